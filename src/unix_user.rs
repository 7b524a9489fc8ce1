//! Unix users by uid and name (the system's user database): the daemon's callers, and the
//! accounts a root daemon's jobs and sessions run as (`Account`, `Creds::apply`).

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
    account(name).is_ok()
}

/// The id of the group `name`, where the system has one.
pub fn group_id(name: &str) -> Option<u32> {
    let c = std::ffi::CString::new(name).ok()?;
    let mut buf = vec![0u8; 16 << 10];
    let mut gr: libc::group = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::group = std::ptr::null_mut();
    // SAFETY: getgrnam_r reads the NUL-terminated `c` and writes into `gr` and `buf` (their
    // sizes given); only the id is read, before `buf` is dropped.
    let found = unsafe {
        libc::getgrnam_r(
            c.as_ptr(),
            &mut gr,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        ) == 0
            && !out.is_null()
    };
    found.then_some(gr.gr_gid)
}

/// The user this process runs as.
pub fn this_user() -> Option<String> {
    // SAFETY: getuid has no preconditions.
    Some(user_name(unsafe { libc::getuid() }))
}

/// A Unix account as this host's user database has it: who a job's processes run as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub creds: Creds,
    pub home: std::path::PathBuf,
    pub shell: std::path::PathBuf,
}

/// The identity a process runs with: user, primary group and supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Creds {
    pub uid: u32,
    pub gid: u32,
    pub groups: Vec<u32>,
}

/// The account named `name`, with its groups (as `initgroups` would give them).
pub fn account(name: &str) -> Result<Account, String> {
    let missing = || format!("no Unix account `{}` on this host", name.escape_debug());
    let c = std::ffi::CString::new(name).map_err(|_| missing())?;
    let mut buf = vec![0u8; 16 << 10];
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwnam_r reads the NUL-terminated `c` and writes into `pw` and `buf` (their
    // sizes given); the strings `pw` points at live in `buf`, read before it is dropped.
    let found = unsafe {
        libc::getpwnam_r(
            c.as_ptr(),
            &mut pw,
            buf.as_mut_ptr().cast(),
            buf.len(),
            &mut out,
        ) == 0
            && !out.is_null()
    };
    if !found {
        return Err(missing());
    }
    let text = |p: *const libc::c_char| {
        if p.is_null() {
            return std::path::PathBuf::new();
        }
        // SAFETY: a non-null passwd field is a NUL-terminated string inside `buf`.
        let s = unsafe { std::ffi::CStr::from_ptr(p) };
        std::path::PathBuf::from(
            <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(s.to_bytes()),
        )
    };
    let (uid, gid) = (pw.pw_uid, pw.pw_gid);
    let (home, shell) = (text(pw.pw_dir), text(pw.pw_shell));
    Ok(Account {
        name: name.to_string(),
        creds: Creds {
            uid,
            gid,
            groups: group_list(&c, gid),
        },
        home,
        shell,
    })
}

/// The groups `user` (primary group `gid`) is a member of.
fn group_list(user: &std::ffi::CStr, gid: u32) -> Vec<u32> {
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let asked = n;
        // SAFETY: getgrouplist writes at most `n` ids into `groups` and sets `n` to how many
        // there are; -1 when `groups` was too small.
        let r = unsafe { libc::getgrouplist(user.as_ptr(), gid, groups.as_mut_ptr(), &mut n) };
        if r >= 0 {
            groups.truncate(n.max(0) as usize);
            return groups;
        }
        if n <= asked {
            // Said too small without saying how big: the primary group alone.
            return vec![gid];
        }
    }
}

impl Creds {
    /// The identity process `pid` runs with, from `/proc/PID/status` (its real user and
    /// group, and its supplementary groups).
    pub fn of_process(pid: u32) -> Result<Creds, String> {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_err(|e| format!("cannot read process {pid}'s identity: {e}"))?;
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_string()
        };
        let first = |line: String| line.split_whitespace().next()?.parse::<u32>().ok();
        let (uid, gid) = match (first(field("Uid:")), first(field("Gid:"))) {
            (Some(u), Some(g)) => (u, g),
            _ => return Err(format!("process {pid}'s status names no user")),
        };
        let groups = field("Groups:")
            .split_whitespace()
            .filter_map(|g| g.parse().ok())
            .collect();
        Ok(Creds { uid, gid, groups })
    }

    /// Whether a process of this one's must change identity to run as these credentials
    /// (this process is another user), and can (it is root). Not root and another user:
    /// it cannot, and runs as itself (a daemon that is not root runs jobs as itself).
    pub fn switch_needed(&self) -> bool {
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        me == 0 && self.uid != me
    }

    /// Makes the child of `cmd` take these credentials before it runs — supplementary
    /// groups, group, then user, the order in which each step is still permitted — and only
    /// then enter `cwd`, so a directory is entered with the owner's rights, never root's. A
    /// step that fails fails the start: the child never runs as anyone else.
    pub fn apply(&self, cmd: &mut std::process::Command, cwd: Option<&std::path::Path>) {
        use std::os::unix::ffi::OsStrExt;
        use std::os::unix::process::CommandExt;
        let creds = self.clone();
        let cwd = cwd.map(|d| std::ffi::CString::new(d.as_os_str().as_bytes()));
        // SAFETY: the closure runs in the child between fork and exec and makes only
        // async-signal-safe system calls (setgroups, setgid, setuid, chdir) on data prepared
        // before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let err = std::io::Error::last_os_error;
                if libc::setgroups(creds.groups.len(), creds.groups.as_ptr()) != 0 {
                    return Err(err());
                }
                if libc::setgid(creds.gid) != 0 {
                    return Err(err());
                }
                if libc::setuid(creds.uid) != 0 {
                    return Err(err());
                }
                // Root is gone for good: a process that could take it back must not run.
                if creds.uid != 0 && libc::setuid(0) == 0 {
                    return Err(std::io::Error::from_raw_os_error(libc::EPERM));
                }
                match &cwd {
                    Some(Ok(dir)) if libc::chdir(dir.as_ptr()) != 0 => return Err(err()),
                    Some(Err(_)) => return Err(std::io::Error::from_raw_os_error(libc::EINVAL)),
                    _ => {}
                }
                Ok(())
            });
        }
    }
}

impl Account {
    /// The environment a login of this account starts with (what `su -` gives), with the
    /// daemon's PATH and locale: nothing else of the daemon's (its cloud credentials, tokens)
    /// reaches a job.
    pub fn login_env(&self) -> Vec<(String, std::ffi::OsString)> {
        let mut env: Vec<(String, std::ffi::OsString)> = vec![
            ("HOME".into(), self.home.clone().into()),
            ("USER".into(), self.name.clone().into()),
            ("LOGNAME".into(), self.name.clone().into()),
            (
                "SHELL".into(),
                if self.shell.as_os_str().is_empty() {
                    "/bin/sh".into()
                } else {
                    self.shell.clone().into()
                },
            ),
        ];
        for var in ["PATH", "LANG", "LC_ALL", "TZ"] {
            if let Some(v) = std::env::var_os(var) {
                env.push((var.into(), v));
            }
        }
        if !env.iter().any(|(k, _)| k == "PATH") {
            env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_has_an_account_and_strangers_do_not() {
        let root = account("root").unwrap();
        assert_eq!((root.creds.uid, root.creds.gid), (0, 0));
        assert!(root.creds.groups.contains(&0));
        assert!(account("no-such-user-gantry")
            .unwrap_err()
            .contains("no Unix account"));
        assert!(account("a\0b").is_err());
        assert!(user_exists("root") && !user_exists("no-such-user-gantry"));
        assert_eq!(group_id("root"), Some(0));
        assert_eq!(group_id("no-such-group-gantry"), None);
    }

    #[test]
    fn a_process_identity_is_read_from_proc() {
        let me = Creds::of_process(std::process::id()).unwrap();
        // SAFETY: getuid/getgid have no preconditions.
        assert_eq!(me.uid, unsafe { libc::getuid() });
        assert_eq!(me.gid, unsafe { libc::getgid() });
        assert!(!me.switch_needed());
    }
}
