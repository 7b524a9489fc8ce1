//! The TCP listener's TLS: a certificate and key from PEM files (`--tls-cert`, `--tls-key`),
//! or one the daemon makes on first start and keeps beside its journal (`tls/cert.pem`, and
//! `tls/key.pem` readable by this user only), so that its fingerprint — what clients pin —
//! stays the same across restarts.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where the listener's certificate comes from.
#[derive(Clone, Debug)]
pub enum CertSource {
    /// PEM files the operator gave (a certificate chain, then its key).
    Files { cert: PathBuf, key: PathBuf },
    /// The daemon's own, in `dir`, made on first start for `names` (and localhost).
    Own { dir: PathBuf, names: Vec<String> },
}

/// What the listener serves.
#[derive(Clone)]
pub struct Tls {
    pub config: Arc<rustls::ServerConfig>,
    /// Of the certificate served (the chain's first).
    pub fingerprint: String,
    pub cert: PathBuf,
    /// Made on this start (a new fingerprint for clients to pin).
    pub made: bool,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tls({} {})", self.cert.display(), self.fingerprint)
    }
}

/// Loads (or, for the daemon's own, makes) the certificate and builds the server's TLS.
pub fn load(source: &CertSource) -> Result<Tls, String> {
    let (cert, key, made) = match source {
        CertSource::Files { cert, key } => (cert.clone(), key.clone(), false),
        CertSource::Own { dir, names } => {
            let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
            let made = match (cert.exists(), key.exists()) {
                (true, true) => false,
                (false, false) => {
                    make(dir, &cert, &key, names)?;
                    true
                }
                _ => {
                    return Err(format!(
                        "{}: holds one of cert.pem and key.pem but not the other; restore the missing one, or remove the directory to have a new certificate made (clients must then pin its new fingerprint)",
                        dir.display()
                    ))
                }
            };
            (cert, key, made)
        }
    };
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&cert)
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {e}", cert.display()))?;
    let Some(first) = chain.first() else {
        return Err(format!(
            "--tls-cert {}: no PEM certificate (-----BEGIN CERTIFICATE-----) in it",
            cert.display()
        ));
    };
    let fingerprint = crate::tls::fingerprint(first.as_ref());
    let private = PrivateKeyDer::from_pem_file(&key).map_err(|e| {
        format!(
            "--tls-key {}: {e} (expected a PEM private key: PKCS#8, RSA or EC)",
            key.display()
        )
    })?;
    let mut config = rustls::ServerConfig::builder_with_provider(crate::tls::provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| {
            format!(
                "--tls-cert {} with --tls-key {}: {e} (is the key the certificate's?)",
                cert.display(),
                key.display()
            )
        })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Tls {
        config: Arc::new(config),
        fingerprint,
        cert,
        made,
    })
}

/// Makes a self-signed certificate for `names`, localhost and this host's name; the key is
/// written 0600 and both files appear whole or not at all.
fn make(dir: &Path, cert: &Path, key: &Path, names: &[String]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut all: Vec<String> = vec![
        "localhost".into(),
        "127.0.0.1".into(),
        "::1".into(),
        crate::backend::agent::hostname(),
    ];
    all.extend(names.iter().cloned());
    let mut seen = std::collections::HashSet::new();
    all.retain(|n| seen.insert(n.clone()));
    let made = rcgen::generate_simple_self_signed(all)
        .map_err(|e| format!("cannot make a TLS certificate: {e}"))?;
    write_new(key, made.signing_key.serialize_pem().as_bytes(), 0o600)?;
    write_new(cert, made.cert.pem().as_bytes(), 0o644)
}

fn write_new(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_daemons_own_certificate_is_made_once_and_kept() {
        let dir = gantry_testkit::scratch::scratch("tls");
        let own = CertSource::Own {
            dir: dir.clone(),
            names: vec!["gantry.example".into()],
        };
        let first = load(&own).unwrap();
        assert!(first.made);
        let again = load(&own).unwrap();
        assert!(!again.made);
        assert_eq!(first.fingerprint, again.fingerprint, "kept across starts");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("key.pem"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // The files given explicitly are the same certificate.
        let files = load(&CertSource::Files {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        })
        .unwrap();
        assert_eq!(files.fingerprint, first.fingerprint);
        // Half a pair is refused with the way out; a key that is not the certificate's too.
        std::fs::remove_file(dir.join("key.pem")).unwrap();
        let e = load(&own).unwrap_err();
        assert!(e.contains("not the other"), "{e}");
        std::fs::write(dir.join("key.pem"), "not a key").unwrap();
        let e = load(&CertSource::Files {
            cert: dir.join("cert.pem"),
            key: dir.join("key.pem"),
        })
        .unwrap_err();
        assert!(e.contains("--tls-key"), "{e}");
        let e = load(&CertSource::Files {
            cert: dir.join("key.pem"),
            key: dir.join("key.pem"),
        })
        .unwrap_err();
        assert!(e.contains("no PEM certificate"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
