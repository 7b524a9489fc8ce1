//! Who may reach a daemon, for how long, and what a retry does: tokens that are listed,
//! revoked and expire (the real daemon and CLI); an `Idempotency-Key` that makes a submission
//! retried after a lost reply one job, not two (a proxy that drops the daemon's first answer);
//! a CLI that never allocates what a server merely claims. Each failed before its fix.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::daemon;
use daemon::*;

fn gantry(d: &Daemon, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(args)
        .env("XDG_CONFIG_HOME", d.dir.join("cfg"))
        .env("XDG_DATA_HOME", d.dir.join("data"))
        .output()
        .unwrap()
}

fn json_body(out: &str) -> serde_json::Value {
    serde_json::from_str(out.split_once("\r\n\r\n").map_or(out, |(_, b)| b)).unwrap()
}

fn create_token(d: &Daemon, body: &str) -> String {
    let v = json_body(&request(&d.socket, "POST /v1/tokens", body));
    v["token"].as_str().expect("a token").to_string()
}

#[test]
fn tokens_are_listed_revoked_at_once_and_expire() {
    // Before: a token, once made, was accepted forever, and no one could see which existed.
    let d = start("tokens", &[]);
    let ci = create_token(&d, r#"{"role":"viewer","label":"ci-bot"}"#);
    let brief = create_token(&d, r#"{"role":"viewer","label":"brief","expires_in":"2s"}"#);
    for t in [&ci, &brief] {
        let (status, body) = tcp_request(d.port, t, "GET /v1/health", "");
        assert!(status.contains("200"), "{status} {body}");
    }
    // Listed by id, never by the token or its whole hash.
    let out = gantry(&d, &["token", "list", "-o", "json"]);
    assert!(out.status.success(), "{out:?}");
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let listed = list.to_string();
    assert!(
        !listed.contains(&ci) && !listed.contains(&ci[4..]),
        "{listed}"
    );
    let row = |label: &str| {
        list.as_array()
            .unwrap()
            .iter()
            .find(|t| t["label"] == label)
            .cloned()
            .unwrap()
    };
    assert_eq!(row("ci-bot")["status"], "active");
    assert!(row("ci-bot")["expires_at"].is_null());
    assert!(row("brief")["expires_at"].as_f64().is_some());
    let id = row("ci-bot")["id"].as_str().unwrap().to_string();
    assert_eq!(id.len(), 12);

    // Revoked: refused on the next request, with no restart.
    let out = gantry(&d, &["token", "revoke", &id]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("revoked"));
    let (status, body) = tcp_request(d.port, &ci, "GET /v1/health", "");
    assert!(
        status.contains("401") && body.contains("revoked"),
        "{status} {body}"
    );
    // A bad id says what an id is.
    let out = gantry(&d, &["token", "revoke", "xyz"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least 8 hex digits"));

    // Expired: refused, saying when.
    std::thread::sleep(Duration::from_millis(2_500));
    let (status, body) = tcp_request(d.port, &brief, "GET /v1/health", "");
    assert!(
        status.contains("401") && body.contains("expired at"),
        "{status} {body}"
    );
    let out = gantry(&d, &["token", "list", "-o", "json"]);
    let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let statuses: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, vec!["revoked", "expired"]);
    // Only operators see or revoke tokens.
    let viewer = create_token(&d, r#"{"role":"viewer"}"#);
    let (status, _) = tcp_request(d.port, &viewer, "GET /v1/tokens", "");
    assert!(status.contains("403"), "{status}");
    let (status, _) = tcp_request(d.port, &viewer, &format!("DELETE /v1/tokens/{id}"), "");
    assert!(status.contains("403"), "{status}");
}

#[test]
fn a_revoked_token_stays_revoked_after_a_restart() {
    let d = start("revoke-restart", &[]);
    let t = create_token(&d, r#"{"role":"viewer","label":"gone"}"#);
    let list = json_body(&request(&d.socket, "GET /v1/tokens", ""));
    let id = list[0]["id"].as_str().unwrap().to_string();
    let out = request(&d.socket, &format!("DELETE /v1/tokens/{id}"), "");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let dir = d.dir.clone();
    let mut d = d;
    let _ = d.child.kill();
    let _ = d.child.wait();
    std::mem::forget(d);
    let d = start_in(dir, &[]);
    let (status, _) = tcp_request(d.port, &t, "GET /v1/health", "");
    assert!(status.contains("401"), "{status}");
}

const SPEC: &str = "name: once\nteam: ml\nresources:\n  accelerators: H100:1\nrun: train\n";

fn submit_with_key(d: &Daemon, key: &str, spec: &str) -> (String, String) {
    let s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
    split(&exchange(
        s,
        "POST /v1/jobs",
        &[("Idempotency-Key", key)],
        spec,
    ))
}

fn job_count(d: &Daemon) -> usize {
    json_body(&request(&d.socket, "GET /v1/jobs", ""))
        .as_array()
        .unwrap()
        .len()
}

#[test]
fn a_submission_sent_again_with_its_idempotency_key_is_one_job() {
    // Before: a client retrying after a lost reply made a second job.
    let d = start_with_fleet("idempotent");
    let (s1, b1) = submit_with_key(&d, "k-1", SPEC);
    let (s2, b2) = submit_with_key(&d, "k-1", SPEC);
    assert!(s1.contains("201") && s2.contains("201"), "{s1} {s2}");
    assert_eq!(b1, b2, "the retry names the first job");
    assert_eq!(job_count(&d), 1);
    // The same key with another submission is refused, naming the first job.
    let (s3, b3) = submit_with_key(&d, "k-1", &SPEC.replace("once", "other"));
    assert!(
        s3.contains("422") && b3.contains("different submission"),
        "{s3} {b3}"
    );
    // A new key is a new job; a bad key is refused.
    let (s4, _) = submit_with_key(&d, "k-2", SPEC);
    assert!(s4.contains("201"));
    assert_eq!(job_count(&d), 2);
    let (s5, b5) = submit_with_key(&d, &"k".repeat(300), SPEC);
    assert!(
        s5.contains("400") && b5.contains("Idempotency-Key"),
        "{s5} {b5}"
    );
    // Another caller's key is its own: a researcher token with key k-1 makes its own job.
    let ml = token(&d, "researcher", Some("ml"));
    let bearer = format!("Bearer {ml}");
    let out = exchange(
        TcpStream::connect(("127.0.0.1", d.port)).unwrap(),
        "POST /v1/jobs",
        &[("Authorization", &bearer), ("Idempotency-Key", "k-1")],
        SPEC,
    );
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
    assert_eq!(job_count(&d), 3);
    // The keys outlive a restart (they are in the journal, with the job).
    let dir = d.dir.clone();
    let mut d = d;
    let _ = d.child.kill();
    let _ = d.child.wait();
    std::mem::forget(d);
    let fleet = dir.join("fleet.toml");
    let d = start_in(dir.clone(), &["--config", fleet.to_str().unwrap()]);
    let (s6, b6) = submit_with_key(&d, "k-1", SPEC);
    assert!(s6.contains("201") && b6 == b1, "{s6} {b6}");
    assert_eq!(job_count(&d), 3);
}

/// Reads one HTTP request (head and Content-Length body) off `s`.
fn read_request(s: &mut BufReader<TcpStream>) -> Vec<u8> {
    let mut raw = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if s.read_line(&mut line).unwrap() == 0 {
            break;
        }
        raw.extend_from_slice(line.as_bytes());
        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = v.trim().parse().unwrap();
        }
        if line == "\r\n" {
            break;
        }
    }
    let mut body = vec![0; length];
    s.read_exact(&mut body).unwrap();
    raw.extend_from_slice(&body);
    raw
}

#[test]
fn the_cli_retries_a_submission_whose_reply_was_lost_and_makes_one_job() {
    // A proxy in front of the daemon forwards the first submission, lets the daemon commit
    // it, and drops the answer (the network failed after the commit); it forwards the
    // retry and passes that answer on. The CLI must send an Idempotency-Key and retry.
    let d = start_with_fleet("lost-reply");
    let ml = token(&d, "researcher", Some("ml"));
    let proxy = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy_port = proxy.local_addr().unwrap().port();
    let daemon_port = d.port;
    let seen = std::thread::spawn(move || {
        let mut keys = Vec::new();
        proxy.set_nonblocking(true).unwrap();
        for n in 0..2 {
            // A client that never retries must fail the test, not hang it.
            let deadline = Instant::now() + Duration::from_secs(20);
            let conn = loop {
                match proxy.accept() {
                    Ok((c, _)) => break c,
                    Err(_) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(20))
                    }
                    Err(_) => return keys,
                }
            };
            conn.set_nonblocking(false).unwrap();
            let mut conn = BufReader::new(conn);
            let req = read_request(&mut conn);
            let text = String::from_utf8_lossy(&req).to_string();
            // Header names are case-insensitive (hyper sends them lower-case).
            keys.push(text.lines().find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("idempotency-key")
                    .then(|| value.trim().to_string())
            }));
            let mut up = TcpStream::connect(("127.0.0.1", daemon_port)).unwrap();
            let fixed = text.replacen("Connection: keep-alive", "Connection: close", 1);
            up.write_all(fixed.as_bytes()).unwrap();
            let mut answer = Vec::new();
            let mut up = BufReader::new(up);
            let head = read_request(&mut up);
            answer.extend_from_slice(&head);
            if n == 1 {
                conn.get_mut().write_all(&answer).unwrap();
            }
            // n == 0: the answer is lost; the connection closes without it.
        }
        keys
    });
    let spec = d.dir.join("job.yaml");
    std::fs::write(&spec, SPEC).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["--connect", &format!("http://127.0.0.1:{proxy_port}")])
        .args(["--token", &ml, "submit"])
        .arg(&spec)
        .output()
        .unwrap();
    let keys = seen.join().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(keys.len(), 2, "the CLI retried: {keys:?}");
    assert!(keys[0].is_some(), "the CLI sends an Idempotency-Key");
    assert_eq!(keys[0], keys[1], "the retry carries the same key");
    assert_eq!(job_count(&d), 1, "one job, not two");
    assert!(String::from_utf8_lossy(&out.stdout).contains("submitted job 1"));
}

#[test]
fn the_cli_never_allocates_what_a_server_merely_claims() {
    // Before: `Content-Length: 99999999999999` made the CLI allocate it and abort.
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for _ in 0..4 {
            let Ok((conn, _)) = server.accept() else {
                return;
            };
            let mut conn = BufReader::new(conn);
            let _ = read_request(&mut conn);
            let _ = conn
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n[]");
        }
    });
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["--connect", &format!("http://127.0.0.1:{port}"), "jobs"])
        .args(["--token", "x"])
        .output()
        .unwrap();
    assert!(out.status.code().is_some(), "killed by a signal: {out:?}");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("over the client's limit"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(10));
}
