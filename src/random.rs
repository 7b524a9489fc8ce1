//! Random bytes from the kernel, in hex: the daemon's tokens and upload names, the clients'
//! idempotency keys.

use std::io::Read;

/// `n` random bytes from the kernel, in hex.
pub fn random_hex(n: usize) -> std::io::Result<String> {
    let mut bytes = vec![0u8; n];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(hex(&bytes))
}

/// Bytes as lower-case hex.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
