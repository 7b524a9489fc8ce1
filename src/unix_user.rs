//! Unix users by uid and name (the system's user database), for the daemon's callers and for
//! backends that act as the daemon's own user.

/// The name of the Unix user `uid` (its number where the system has no name for it).
pub fn user_name(uid: u32) -> String {
    let mut buf = vec![0u8; 4096];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes into `pw` and `buf` (their sizes given) and sets `out` to
    // `&pw` on success; the name it points at lives in `buf`, read before `buf` is dropped.
    let found = unsafe {
        libc::getpwuid_r(uid, &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out) == 0
            && !out.is_null()
            && !pw.pw_name.is_null()
    };
    if found {
        // SAFETY: pw_name is a NUL-terminated string inside `buf`.
        let name = unsafe { std::ffi::CStr::from_ptr(pw.pw_name) };
        if let Ok(n) = name.to_str() {
            return n.to_string();
        }
    }
    uid.to_string()
}

/// Whether the system has a user of this name.
pub fn user_exists(name: &str) -> bool {
    let Ok(c) = std::ffi::CString::new(name) else {
        return false;
    };
    let mut buf = vec![0u8; 4096];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r reads the NUL-terminated `c` and writes into `pw` and `buf`.
    unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        ) == 0
            && !out.is_null()
    }
}

/// The user this process runs as.
pub fn this_user() -> Option<String> {
    // SAFETY: getuid has no preconditions.
    Some(user_name(unsafe { libc::getuid() }))
}
