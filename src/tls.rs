//! TLS pieces both ends share: the process's crypto provider (ring, as kube uses: no C
//! toolchain), certificate fingerprints, and the client's pinned-certificate verifier.
//!
//! A daemon serving TLS with the certificate it made for itself is trusted the way SSH trusts
//! a host key: the client pins its SHA-256 fingerprint (`--tls-fingerprint`, printed by the
//! daemon at start, by `gantry token create` and by `gantry info`). A daemon with a
//! certificate from a CA needs no pin: the system's roots verify it.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The crypto provider every TLS connection of gantry's uses.
pub fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Makes ring the process's default provider, which reqwest (built without one) needs before
/// any client is built. Calling it again does nothing.
pub fn install_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// A certificate's fingerprint as gantry prints it: `sha256:` and 64 hex digits.
pub fn fingerprint(der: &[u8]) -> String {
    let digest = Sha256::digest(der);
    format!("sha256:{}", crate::random::hex(&digest))
}

/// The fingerprint of a PEM file's first certificate.
pub fn pem_fingerprint(pem: &[u8]) -> Option<String> {
    use rustls::pki_types::pem::PemObject;
    let der = CertificateDer::from_pem_slice(pem).ok()?;
    Some(fingerprint(der.as_ref()))
}

/// Reads a fingerprint as gantry prints it, or as `openssl x509 -fingerprint -sha256` does
/// (`sha256 Fingerprint=AB:CD:…`): case and colons do not matter.
pub fn parse_fingerprint(text: &str) -> Result<[u8; 32], String> {
    let t = text.trim();
    let lower = t.to_ascii_lowercase();
    let body = lower
        .strip_prefix("sha256 fingerprint=")
        .or_else(|| lower.strip_prefix("sha256:"))
        .or_else(|| lower.strip_prefix("sha256="))
        .unwrap_or(&lower);
    let hex: String = body.chars().filter(|c| *c != ':').collect();
    let bad = || {
        format!(
            "TLS fingerprint `{}`: expected sha256: and 64 hex digits, as `gantry token create` or the daemon's start line prints",
            t.escape_debug()
        )
    };
    if hex.len() != 64 {
        return Err(bad());
    }
    let mut out = [0u8; 32];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
    }
    Ok(out)
}

/// Trusts exactly the certificate whose SHA-256 is pinned, whatever its names and dates
/// (the pin is the trust, as a host key is for SSH); the handshake's signatures are still
/// checked, so only the holder of that certificate's key gets through.
#[derive(Debug)]
pub struct Pinned {
    pin: [u8; 32],
    provider: Arc<CryptoProvider>,
}

impl Pinned {
    pub fn new(pin: [u8; 32]) -> Pinned {
        Pinned {
            pin,
            provider: provider(),
        }
    }
}

impl ServerCertVerifier for Pinned {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if Sha256::digest(end_entity.as_ref()).as_slice() == self.pin {
            return Ok(ServerCertVerified::assertion());
        }
        let pinned = crate::random::hex(&self.pin);
        Err(rustls::Error::InvalidCertificate(
            rustls::CertificateError::Other(rustls::OtherError(Arc::new(Mismatch(format!(
                "the daemon's certificate is {}, not the pinned sha256:{pinned} — if the daemon's certificate was replaced, pin the new one (gantry token create prints it); otherwise someone else answers at that address",
                fingerprint(end_entity.as_ref())
            ))))),
        ))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[derive(Debug)]
struct Mismatch(String);

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Mismatch {}

/// A client configuration that trusts only the pinned certificate.
pub fn pinned_client_config(pin: [u8; 32]) -> Result<rustls::ClientConfig, String> {
    Ok(rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(Pinned::new(pin)))
        .with_no_client_auth())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprints_read_back_in_gantrys_and_openssls_forms() {
        let fp = fingerprint(b"certificate");
        assert!(fp.starts_with("sha256:") && fp.len() == 7 + 64, "{fp}");
        let bytes = parse_fingerprint(&fp).unwrap();
        let openssl: Vec<String> = bytes.iter().map(|b| format!("{b:02X}")).collect();
        let openssl = format!("sha256 Fingerprint={}", openssl.join(":"));
        assert_eq!(parse_fingerprint(&openssl).unwrap(), bytes);
        assert_eq!(parse_fingerprint(&fp[7..]).unwrap(), bytes);
        for bad in ["", "sha256:12", "sha256:zz", &format!("{fp}00")] {
            let e = parse_fingerprint(bad).unwrap_err();
            assert!(e.contains("expected sha256:"), "{e}");
        }
    }
}
