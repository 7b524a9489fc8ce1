//! Random bytes from the kernel, in hex (the daemon's tokens and upload names, the clients'
//! idempotency keys), and bytes in hex (digests and fingerprints).

/// `n` random bytes from the kernel, in hex: `getrandom(2)`, one system call where opening
/// `/dev/urandom` took three (a client's every submission carries a key: opening the device
/// was 3% of all the CPU `gantry bench api` used). The crate reads the device on kernels
/// without the call, and retries an interrupted one.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    getrandom::fill(&mut bytes)?;
    Ok(hex(&bytes))
}

/// Bytes as lower-case hex (a digest per submission goes through here: no formatter per byte).
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 0xf)] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn hex_is_two_lower_case_digits_per_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
        assert_eq!(super::hex(&[]), "");
    }

    #[test]
    fn random_bytes_fill_what_is_asked_and_differ() {
        let a = super::random_hex(300).unwrap();
        let b = super::random_hex(300).unwrap();
        assert_eq!(a.len(), 600);
        assert_ne!(a, b);
        // 300 bytes from the kernel are not all zero (what an unfilled buffer would be).
        assert_ne!(a, "0".repeat(600));
    }
}
