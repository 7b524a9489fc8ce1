//! The daemon's TCP listener over TLS, with the real binary on both ends: the certificate the
//! daemon makes for itself, pinned by the fingerprint `gantry token create` prints (and that
//! `openssl` computes alike); a CA's certificate verified by that CA; a wrong pin, no pin, or
//! a stalled handshake refused. Before: `--connect https://…` was refused outright and a
//! remote daemon could only be reached through an SSH tunnel.

use gantry::client::http::{Endpoint, HttpClient};
use std::io::Read;
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::support::daemon;
use daemon::*;

fn gantry(args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gantry"));
    c.args(args).env_remove("GANTRY_TLS_FINGERPRINT");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn the_daemons_own_certificate_is_pinned_by_the_fingerprint_it_prints() {
    let d = start("tls-own", &["--tls"]);
    let sock = d.socket.to_str().unwrap().to_string();
    // An operator on the daemon's host makes a token; the answer carries the pin.
    let made = gantry(
        &[
            "--connect",
            &sock,
            "token",
            "create",
            "--role",
            "viewer",
            "-o",
            "json",
        ],
        &[],
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let v: serde_json::Value = serde_json::from_slice(&made.stdout).unwrap();
    let (token, fp) = (
        v["token"].as_str().unwrap().to_string(),
        v["tls_fingerprint"].as_str().unwrap().to_string(),
    );
    let cert = d.dir.join("state").join("tls").join("cert.pem");
    assert!(cert.exists(), "the certificate is kept beside the journal");
    // openssl, reading the same file, computes the same fingerprint (and its form is taken).
    let openssl = Command::new("openssl")
        .args(["x509", "-noout", "-fingerprint", "-sha256", "-in"])
        .arg(&cert)
        .output();
    if let Some(o) = openssl.ok().filter(|o| o.status.success()) {
        let said = String::from_utf8_lossy(&o.stdout).trim().to_string();
        assert_eq!(
            gantry::tls::parse_fingerprint(&said).unwrap(),
            gantry::tls::parse_fingerprint(&fp).unwrap(),
            "openssl: {said}; gantry: {fp}"
        );
    }

    // `gantry info` shows where it is and its fingerprint.
    let db = d.dir.join("state").join("state.db");
    let info = gantry(&["info"], &[("GANTRY_DB", &db)]);
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    assert!(
        info.contains(&format!("{} ({fp})", cert.display())),
        "{info}"
    );

    let https = format!("https://127.0.0.1:{}", d.port);
    let jobs = |extra: &[&str]| {
        let mut args = vec!["--connect", &https, "--token", &token];
        args.extend(extra);
        args.extend(["jobs", "-o", "json"]);
        gantry(&args, &[])
    };
    // Pinned: answered over TLS.
    let ok = jobs(&["--tls-fingerprint", &fp]);
    assert!(ok.status.success(), "{}", stderr(&ok));
    assert!(serde_json::from_slice::<serde_json::Value>(&ok.stdout)
        .unwrap()
        .is_array());
    // Unpinned: no CA vouches for a certificate the daemon made, so it is refused.
    let unpinned = jobs(&[]);
    assert_eq!(unpinned.status.code(), Some(5), "{}", stderr(&unpinned));
    assert!(
        stderr(&unpinned).contains("UnknownIssuer")
            && stderr(&unpinned).contains("pin it with --tls-fingerprint"),
        "{}",
        stderr(&unpinned)
    );
    // Pinned to another certificate: refused, saying what it saw and what to do.
    let other = gantry::tls::fingerprint(b"another certificate");
    let wrong = jobs(&["--tls-fingerprint", &other]);
    assert_eq!(wrong.status.code(), Some(5), "{}", stderr(&wrong));
    assert!(
        stderr(&wrong).contains(&format!("is {fp}, not the pinned")),
        "{}",
        stderr(&wrong)
    );
    // A malformed pin is a usage error, before any connection.
    let bad = jobs(&["--tls-fingerprint", "sha256:xyz"]);
    assert_eq!(bad.status.code(), Some(2), "{}", stderr(&bad));
    assert!(
        stderr(&bad).contains("expected sha256:"),
        "{}",
        stderr(&bad)
    );
    // Plain HTTP to the TLS port gets no answer, never a silent downgrade.
    let plain = gantry(
        &[
            "--connect",
            &format!("http://127.0.0.1:{}", d.port),
            "--token",
            &token,
            "jobs",
        ],
        &[],
    );
    assert!(!plain.status.success(), "{}", stderr(&plain));

    // The event stream, followed over TLS: the snapshot arrives first.
    let endpoint = Endpoint::parse(&https).unwrap().pinned(Some(&fp)).unwrap();
    let mut first = String::new();
    HttpClient::new(endpoint, Some(token.clone()))
        .follow("/v1/events/stream", |event, data| {
            assert!(data.starts_with('{'), "{data}");
            first = event.to_string();
            false
        })
        .unwrap();
    assert_eq!(first, "snapshot");
}

#[test]
fn a_stalled_tls_handshake_is_dropped_after_the_request_timeout() {
    // A client that opens a connection and never says hello holds a slot of the TCP
    // listener no longer than --request-timeout (1 s here).
    let d = start("tls-stall", &["--tls"]);
    let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 16];
    let n = s.read(&mut buf).unwrap_or(0);
    assert_eq!(n, 0, "the daemon closed the stalled connection");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

#[test]
fn a_certificate_from_a_ca_is_verified_by_that_ca() {
    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};
    let dir = temp_dir("tls-ca");
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "gantry test CA");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca, ca_key);
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    let (ca_pem, cert, key) = (
        dir.join("ca.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    std::fs::write(&ca_pem, ca_cert.pem()).unwrap();
    std::fs::write(&cert, leaf.pem()).unwrap();
    std::fs::write(&key, leaf_key.serialize_pem()).unwrap();
    let d = start_in(
        dir.clone(),
        &[
            "--tls-cert",
            cert.to_str().unwrap(),
            "--tls-key",
            key.to_str().unwrap(),
        ],
    );
    let token = token(&d, "viewer", None);
    let https = format!("https://127.0.0.1:{}", d.port);
    let args = [
        "--connect",
        &https,
        "--token",
        &token,
        "teams",
        "-o",
        "json",
    ];
    // The CA in the trust store (here SSL_CERT_FILE, as OpenSSL reads it): verified, no pin.
    let trusted = gantry(&args, &[("SSL_CERT_FILE", &ca_pem)]);
    assert!(trusted.status.success(), "{}", stderr(&trusted));
    // A trust store with another CA only: refused.
    let other = rcgen::generate_simple_self_signed(vec!["other CA".to_string()]).unwrap();
    let other_pem = dir.join("other-ca.pem");
    std::fs::write(&other_pem, other.cert.pem()).unwrap();
    let untrusted = gantry(&args, &[("SSL_CERT_FILE", &other_pem)]);
    assert_eq!(untrusted.status.code(), Some(5), "{}", stderr(&untrusted));
    assert!(
        stderr(&untrusted).contains("UnknownIssuer"),
        "{}",
        stderr(&untrusted)
    );
}

#[test]
fn a_key_that_is_not_the_certificates_stops_the_daemon_with_the_reason() {
    let dir = temp_dir("tls-badkey");
    let a = rcgen::generate_simple_self_signed(vec!["a".to_string()]).unwrap();
    let b = rcgen::generate_simple_self_signed(vec!["b".to_string()]).unwrap();
    std::fs::write(dir.join("cert.pem"), a.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), b.signing_key.serialize_pem()).unwrap();
    let out = daemon_cmd(
        &dir,
        &dir.join("d.sock"),
        free_port(),
        &[
            "--tls-cert",
            dir.join("cert.pem").to_str().unwrap(),
            "--tls-key",
            dir.join("key.pem").to_str().unwrap(),
        ],
    )
    .output()
    .unwrap();
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("is the key the certificate's?"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
