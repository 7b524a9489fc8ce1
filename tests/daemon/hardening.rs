//! A daemon left running on a shared box: the real binary against clients that hang up, hold
//! connections open, stream events through a shutdown, a second daemon on the same journal, a
//! file where the socket should be, and an empty journal. Each test here failed before the fix
//! it names.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::support::daemon;
use daemon::*;

#[test]
fn clients_that_hang_up_mid_request_do_not_kill_the_daemon() {
    // Before: the CLI reset SIGPIPE to its default for the daemon too, and the daemon died
    // (exit 141) writing its answer to a client that had gone.
    let mut d = start("pipe", &[]);
    for _ in 0..20 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        let _ = s.write_all(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n");
        drop(s);
        let mut s = UnixStream::connect(&d.socket).unwrap();
        let _ = s.write_all(b"POST /v1/jobs HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100\r\n\r\n");
        drop(s);
        let mut s = UnixStream::connect(&d.socket).unwrap();
        let _ = s.write_all(b"GET /v1/snapshot HTTP/1.1\r\nHost: x\r\n\r\n");
        drop(s);
        let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        let _ = s.write_all(b"GET /v1/snapshot HTTP/1.1\r\nHost: x\r\n\r\n");
        drop(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(healthy(&mut d), "the daemon died or stopped answering");
}

#[test]
fn a_second_daemon_on_the_same_journal_is_refused_naming_the_first() {
    // Before: both opened the journal and both scheduled — every node booked twice.
    let mut d = start("lock", &[]);
    let other_socket = d.dir.join("other.sock");
    let out = daemon_cmd(&d.dir, &other_socket, free_port(), &[])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        err.contains(&format!("pid {}", d.child.id())),
        "the error names the holder's pid: {err}"
    );
    assert!(!other_socket.exists(), "the second daemon never served");
    assert!(healthy(&mut d));
}

#[test]
fn sigterm_stops_the_daemon_while_event_streams_are_open() {
    // Before: graceful shutdown waited for every open event stream, forever.
    let mut d = start("term", &[]);
    let mut streams = Vec::new();
    for _ in 0..3 {
        let mut s = UnixStream::connect(&d.socket).unwrap();
        s.write_all(b"GET /v1/events/stream HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut first = [0u8; 64];
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let n = s.read(&mut first).unwrap();
        assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
        streams.push(s);
    }
    // A client in the middle of sending its headers, too.
    let mut slow = UnixStream::connect(&d.socket).unwrap();
    slow.write_all(b"GET /v1/health HTTP/1.1\r\n").unwrap();
    let t0 = Instant::now();
    // SAFETY: kill(2) on the daemon this test started.
    unsafe {
        libc::kill(d.child.id() as i32, libc::SIGTERM);
    }
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the daemon ignored SIGTERM with event streams open"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    assert!(
        !d.socket.exists(),
        "the socket file is removed on the way out"
    );
}

#[test]
fn slow_and_flooding_tcp_clients_cannot_lock_out_the_unix_socket() {
    // Before: no header timeout and no cap — partial-header connections stayed open until the
    // descriptor table was full and the Unix socket stopped answering too.
    let mut d = start("slowloris", &["--max-connections", "32"]);
    let mut held = Vec::new();
    for _ in 0..300 {
        if let Ok(mut s) = TcpStream::connect(("127.0.0.1", d.port)) {
            let _ = s.write_all(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n");
            held.push(s);
        }
    }
    let t0 = Instant::now();
    assert!(healthy(&mut d), "the Unix socket answers during the flood");
    assert!(t0.elapsed() < Duration::from_secs(5));
    // Every partial request is cut off: past the cap at once, the rest after the 1 s timeout.
    let t0 = Instant::now();
    let mut closed = 0;
    for s in &mut held {
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut buf = [0u8; 512];
        loop {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        closed += 1;
    }
    assert_eq!(closed, held.len());
    assert!(
        t0.elapsed() < Duration::from_secs(15),
        "partial requests were held {:?}",
        t0.elapsed()
    );
    // A body that never comes is cut off too, with an answer.
    let mut s = UnixStream::connect(&d.socket).unwrap();
    s.write_all(b"POST /v1/preview HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nrun: x")
        .unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(healthy(&mut d));
}

#[test]
fn the_state_directory_and_journal_are_private() {
    // Before: state.db and its WAL were 0644 in a 0755 directory.
    let d = start("perms", &[]);
    let state = d.dir.join("state");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    for f in std::fs::read_dir(&state).unwrap() {
        let f = f.unwrap().path();
        assert_eq!(mode(&f) & 0o077, 0, "{} is {:o}", f.display(), mode(&f));
    }
}

#[test]
fn a_file_where_the_socket_goes_is_not_deleted() {
    // Before: --socket removed any file it took for a stale socket.
    let dir = temp_dir("notsock");
    let file = dir.join("notes.txt");
    std::fs::write(&file, "keep me").unwrap();
    let out = daemon_cmd(&dir, &file, free_port(), &[]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0));
    assert!(err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "keep me");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_empty_journal_is_refused_not_started_as_new() {
    // Before: SQLite took the 0-byte file for a new database and the daemon started with no
    // jobs, silently.
    let dir = temp_dir("empty");
    std::fs::create_dir_all(dir.join("state")).unwrap();
    std::fs::write(dir.join("state").join("state.db"), "").unwrap();
    let out = daemon_cmd(&dir, &dir.join("d.sock"), free_port(), &[])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("empty file"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_daemon_never_writes_to_the_terminal_it_shares_with_the_console() {
    // Before: the actor printed cycle failures with eprintln!, over the console's screen. Now
    // every warning goes through `State::warn`: the event log and the daemon's message sink.
    let mut offenders = Vec::new();
    for dir in [
        "src/daemon",
        "src/backend",
        "src/sim",
        "src/scheduler",
        "src/console",
        "src/client",
    ] {
        let mut stack = vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(dir)];
        while let Some(p) = stack.pop() {
            if p.is_dir() {
                stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
                continue;
            }
            let text = std::fs::read_to_string(&p).unwrap_or_default();
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            for (i, line) in code.lines().enumerate() {
                let prints = line.contains("eprintln!(") || line.contains("println!(");
                let the_sink = line.contains("eprintln!(\"gantry daemon: {line}\")");
                if prints && !the_sink && !line.trim_start().starts_with("//") {
                    offenders.push(format!("{}:{}: {}", p.display(), i + 1, line.trim()));
                }
            }
        }
    }
    assert!(offenders.is_empty(), "{offenders:#?}");

    let dir = temp_dir("warn");
    let log = dir.join("daemon.log");
    let mut state = gantry::daemon::state::State::demo_with(
        &dir,
        7,
        gantry::daemon::state::Messages::File(log.clone()),
    )
    .unwrap();
    state.warn("scheduling cycle failed: a test".to_string());
    assert!(std::fs::read_to_string(&log)
        .unwrap()
        .contains("scheduling cycle failed: a test"));
    let events = state.events(None, 5).unwrap();
    assert!(events.iter().any(|e| e.detail.contains("a test")));
    drop(state);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_team_submits_only_at_the_classes_its_fleet_entry_allows() {
    // Before: a researcher submitted `priority: serving` and preempted production work.
    let d = start_with_fleet("classes");
    let ml = token(&d, "researcher", Some("ml"));
    let spec = "resources:\n  accelerators: H100:1\nrun: train\npriority: serving\n";
    let (status, body) = tcp_request(d.port, &ml, "POST /v1/jobs", spec);
    assert!(status.contains("403"), "{status} {body}");
    assert!(
        body.contains("production, experiment") && body.contains("`serving`"),
        "{body}"
    );
    let ok = spec.replace("serving", "production");
    let (status, body) = tcp_request(d.port, &ml, "POST /v1/jobs", &ok);
    assert!(status.contains("201"), "{status} {body}");
    let id: serde_json::Value = serde_json::from_str(&body).unwrap();
    let (status, body) = tcp_request(
        d.port,
        &ml,
        &format!("PUT /v1/jobs/{}/priority", id["id"]),
        r#"{"class":"serving"}"#,
    );
    assert!(status.contains("403"), "{status} {body}");
    // Its preview is refused as the move is (before: it ran the move forward and said what
    // a class the team may not use would do).
    let (status, preview) = tcp_request(
        d.port,
        &ml,
        &format!("PUT /v1/jobs/{}/priority?dry_run=true", id["id"]),
        r#"{"class":"serving"}"#,
    );
    assert!(status.contains("403"), "{status} {preview}");
    assert_eq!(preview, body, "the same refusal");
    // A team with no list has the default class only (issue 36: a fresh install let any
    // team submit at `serving` and preempt other teams' production jobs) ...
    let infra = token(&d, "researcher", Some("infra"));
    let (status, body) = tcp_request(d.port, &infra, "POST /v1/jobs", spec);
    assert!(status.contains("403"), "{status} {body}");
    assert!(
        body.contains("team `infra` lists no priority classes") && body.contains("classes = ["),
        "{body}"
    );
    let plain = spec.replace("priority: serving\n", "");
    let (status, body) = tcp_request(d.port, &infra, "POST /v1/jobs", &plain);
    assert!(status.contains("201"), "{status} {body}");
    let id: serde_json::Value = serde_json::from_str(&body).unwrap();
    let (status, _) = tcp_request(
        d.port,
        &infra,
        &format!("PUT /v1/jobs/{}/priority", id["id"]),
        r#"{"class":"production"}"#,
    );
    assert!(status.contains("403"), "{status}");
    // ... and an operator (the Unix socket) may raise its jobs, or submit for it at any class.
    let out = request(
        &d.socket,
        &format!("PUT /v1/jobs/{}/priority", id["id"]),
        r#"{"class":"serving"}"#,
    );
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let out = request(&d.socket, "POST /v1/jobs?team=infra", spec);
    assert!(out.starts_with("HTTP/1.1 201"), "{out}");
}

#[test]
fn hostile_specs_are_refused_quickly_without_stopping_other_clients() {
    // Before: a 1 MB alias bomb under an ignored field aborted the daemon on allocation, and
    // 80k nested brackets held the actor (and every other client) for 15 s.
    let mut d = start_with_fleet("bomb");
    let ml = token(&d, "researcher", Some("ml"));
    let big = "x".repeat(100_000);
    let refs = vec!["*a"; 5_000].join(", ");
    let bomb = format!("run: echo\nconfig:\n  a: &a \"{big}\"\n  b: [{refs}]\n");
    let deep = format!("run: echo\nconfig: {}", "[".repeat(80_000));
    let huge = format!("run: echo\n# {}\n", "y".repeat(600_000));
    for (spec, want) in [(&bomb, "aliases"), (&deep, "nested"), (&huge, "limit")] {
        for path in ["POST /v1/preview", "POST /v1/jobs"] {
            let t0 = Instant::now();
            let (status, body) = tcp_request(d.port, &ml, path, spec);
            assert!(status.contains("400"), "{path}: {status} {body}");
            assert!(body.contains(want), "{body}");
            assert!(
                t0.elapsed() < Duration::from_secs(5),
                "{path} took {:?}",
                t0.elapsed()
            );
        }
    }
    assert!(healthy(&mut d));
}

#[test]
fn secrets_in_a_spec_are_shown_to_nobody_and_envs_only_to_the_owners() {
    // Before: GET /v1/jobs/ID returned the spec verbatim to viewers and other teams.
    let d = start_with_fleet("secrets");
    let ml = token(&d, "researcher", Some("ml"));
    let spec = "resources:\n  accelerators: H100:1\nenvs:\n  HF_TOKEN: hf_abc123\nsecrets:\n  WANDB_API_KEY: wb-secret-9\nrun: train\n";
    let (status, body) = tcp_request(d.port, &ml, "POST /v1/jobs", spec);
    assert!(status.contains("201"), "{status} {body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"].clone();
    let path = format!("GET /v1/jobs/{id}");
    let (_, own) = tcp_request(d.port, &ml, &path, "");
    assert!(
        own.contains("hf_abc123") && !own.contains("wb-secret-9"),
        "{own}"
    );
    for other in [
        token(&d, "viewer", None),
        token(&d, "researcher", Some("infra")),
    ] {
        let (status, seen) = tcp_request(d.port, &other, &path, "");
        assert!(status.contains("200"), "{status}");
        assert!(
            !seen.contains("hf_abc123") && !seen.contains("wb-secret-9"),
            "{seen}"
        );
        assert!(seen.contains("HF_TOKEN"), "the names stay: {seen}");
    }
    // Nor do they reach the events or the metrics.
    let events = request(&d.socket, "GET /v1/events?limit=1000", "");
    let metrics = request(&d.socket, "GET /metrics", "");
    for text in [events, metrics] {
        assert!(!text.contains("hf_abc123") && !text.contains("wb-secret-9"));
    }
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    const TOKENS: &[&str] = &[
        "[",
        "]",
        "{",
        "}",
        "&a ",
        "*a",
        "&b ",
        "*b",
        ": ",
        "\n",
        "- ",
        "'",
        "\"",
        "run: x\n",
        "config: ",
        "envs:\n  K: v\n",
        "secrets:\n  S: ",
        "  ",
        "# c",
        "|\n",
        ">-\n",
        "x",
        "1",
        "resources:\n  accelerators: ",
        "H100:8",
        "{H100: 8, A100: 4}",
        "num_nodes: ",
        "---\n",
        "!!binary ",
        "? ",
        ",",
        "\t",
        "\u{feff}",
        "é",
        "\0",
    ];

    fn spec_text() -> impl Strategy<Value = String> {
        prop::collection::vec(prop::sample::select(TOKENS), 0..3000).prop_map(|t| t.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: fuzz_cases(400), ..ProptestConfig::default() })]

        /// Any text: an answer (accepted, or an error with a place), never a panic, and fast.
        #[test]
        fn the_spec_parser_answers_every_input_quickly(text in spec_text()) {
            let t0 = Instant::now();
            let r = gantry::spec::parse("fuzz.yaml", text.as_bytes());
            prop_assert!(t0.elapsed() < Duration::from_secs(2), "took {:?}", t0.elapsed());
            if let Err(e) = r {
                prop_assert!(e.line >= 1 && e.col >= 1);
            }
        }
    }

    /// Raw bytes on the daemon's sockets: malformed request lines, headers, lengths and bodies,
    /// cut off anywhere. The daemon must answer a health check after each batch.
    #[test]
    fn the_http_layer_survives_malformed_requests() {
        let mut d = start("httpfuzz", &[]);
        let parts: &[&[u8]] = &[
            b"GET ",
            b"POST ",
            b"PUT ",
            b"/v1/jobs",
            b"/v1/preview",
            b"/v1/jobs/1/cancel",
            b"/v1/events/stream",
            b"/../../etc/passwd",
            b"?limit=-1&state=%ff",
            b" HTTP/1.1\r\n",
            b" HTTP/9.9\r\n",
            b"Host: x\r\n",
            b"Content-Length: 5\r\n",
            b"Content-Length: 99999999999999999999\r\n",
            b"Transfer-Encoding: chunked\r\n",
            b"Expect: 100-continue\r\n",
            b"Authorization: Bearer x\r\n",
            b"\r\n",
            b"zz\r\n",
            b"0\r\n\r\n",
            b"run: x\n",
            b"\xff\xfe",
            b"{\"class\":",
            b"\0",
        ];
        let mut rng = 0x2545F4914F6CDD1Du64;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let mut cases = 0;
        let batches = fuzz_cases(500).div_ceil(25);
        for _batch in 0..batches {
            for _ in 0..25 {
                let n = 1 + next() % 12;
                let mut req = Vec::new();
                for _ in 0..n {
                    req.extend_from_slice(parts[(next() % parts.len() as u64) as usize]);
                }
                let cut = (next() % (req.len() as u64 + 1)) as usize;
                if let Ok(mut s) = UnixStream::connect(&d.socket) {
                    s.set_read_timeout(Some(Duration::from_millis(200)))
                        .unwrap();
                    let _ = s.write_all(&req[..cut.max(1)]);
                    if next() % 2 == 0 {
                        let mut buf = [0u8; 256];
                        let _ = s.read(&mut buf);
                    }
                }
                cases += 1;
            }
            assert!(
                healthy(&mut d),
                "the daemon stopped answering after {cases} cases"
            );
        }
        assert_eq!(cases, batches * 25);
    }

    const AGENT_PARTS: &[&str] = &[
        "{\"hello\":{\"protocol\":6,\"info\":{\"hostname\":\"",
        "\",\"arch\":\"x86_64\",\"version\":\"0\",\"gpus\":[{\"index\":0,\"name\":\"",
        "\",\"memory_mib\":1,\"uuid\":\"u\"}],\"nvml\":null,\"driver\":\"",
        "\",\"runs\":[]}}}",
        "{\"start_failed\":{\"job\":1,\"token\":\"t\",\"why\":\"",
        "{\"refused\":{\"why\":\"",
        "{\"exited\":{\"job\":1,\"token\":\"t\",\"exit\":",
        "{\"code\":3}}}",
        "\"}}",
        "{\"pong\":null}",
        "\"pong\"",
        "\\u001b]0;pwned\\u0007",
        "\\n",
        "\u{1b}[2J",
        "x",
        "é",
        "\n",
        "\r\n",
        "{",
        "}",
        "\"",
        "null",
        "9999999999999999999999",
    ];

    proptest! {
        #![proptest_config(ProptestConfig { cases: fuzz_cases(400), ..ProptestConfig::default() })]

        /// What a hostile host may send: messages with fields of any text (escapes, control
        /// characters, megabytes), cut anywhere, lines of any length, invalid UTF-8. Read as
        /// the daemon reads them (`wire::Lines`, then `FromAgent::read`): never a panic, never
        /// a line held past the bound, and what reaches an event is escaped and bounded.
        #[test]
        fn the_agent_protocol_reader_bounds_and_escapes_whatever_a_host_sends(
            parts in prop::collection::vec((prop::sample::select(AGENT_PARTS), 1usize..400), 0..80),
            junk in prop::collection::vec(any::<u8>(), 0..64),
        ) {
            let mut bytes = Vec::new();
            for (i, (p, times)) in parts.iter().enumerate() {
                // Most parts once; now and then a long run of one (a field of megabytes).
                let n = if *times > 390 { 2_000 } else { 1 };
                let text: String = std::iter::repeat_n(*p, n).collect();
                // Every other part a whole message with that text in its host-chosen fields
                // (valid JSON, so it reaches the event), the rest raw.
                let msg = match (i % 6, i % 2) {
                    (_, 1) => {
                        bytes.extend_from_slice(text.as_bytes());
                        bytes.push(b'\n');
                        continue;
                    }
                    (0, _) => serde_json::json!({"hello": {"protocol": gantry::backend::agent::PROTOCOL, "info": {"hostname": text, "arch": text, "version": text, "gpus": [{"index": 0, "name": text, "memory_mib": 1, "uuid": "u"}], "nvml": text, "driver": text, "runs": []}}}),
                    (2, _) => serde_json::json!({"start_failed": {"job": 1, "token": "t", "why": text}}),
                    _ => serde_json::json!({"refused": {"why": text}}),
                };
                bytes.extend_from_slice(msg.to_string().as_bytes());
                bytes.push(b'\n');
            }
            bytes.extend_from_slice(&junk);
            let mut reached = 0;
            let mut flooded = false;
            let bound = 64 << 10;
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let lines = rt.block_on(async {
                let mut r = gantry::backend::wire::Lines::with_bound(
                    tokio::io::BufReader::new(&bytes[..]),
                    bound,
                );
                let mut out = Vec::new();
                while let Ok(Some(l)) = r.next().await {
                    out.push(l);
                }
                out
            });
            for l in lines {
                if l == gantry::backend::wire::Line::TooFast {
                    flooded = true;
                }
                let gantry::backend::wire::Line::Text(text) = l else { continue };
                prop_assert!(text.len() <= bound);
                let Some(msg) = gantry::backend::agent::FromAgent::read(&text) else { continue };
                let said = match msg.event(0) {
                    Some(gantry::backend::RunEvent::Up { info, .. }) => {
                        let mut s = vec![info.hostname, info.arch, info.version];
                        s.extend(info.nvml);
                        s.extend(info.driver);
                        s.extend(info.gpus.into_iter().map(|g| g.name));
                        s
                    }
                    Some(gantry::backend::RunEvent::StartFailed { why, .. })
                    | Some(gantry::backend::RunEvent::Down { why, .. }) => vec![why],
                    _ => Vec::new(),
                };
                for s in said {
                    reached += 1;
                    prop_assert!(s.chars().count() < 300, "{} characters", s.chars().count());
                    prop_assert!(!s.chars().any(char::is_control), "{s:?}");
                }
            }
            // Whole messages of short text reach an event (the test tests something) —
            // unless the stream was a flood (a run of 2,000 newlines passes `MAX_BURST` within
            // the second), which the reader rightly cuts off before them.
            let whole = parts
                .iter()
                .enumerate()
                .filter(|(i, (_, t))| i % 2 == 0 && *t <= 390)
                .count();
            prop_assert!(whole == 0 || reached > 0 || flooded);
        }
    }

    /// Cases per fuzz target: `default` in CI (bounded time); `GANTRY_FUZZ_CASES=N` for a
    /// longer run by hand.
    fn fuzz_cases(default: u32) -> u32 {
        std::env::var("GANTRY_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }
}

/// `POST /v1/workdirs` (a workdir shipped by `gantry submit`): researchers only, a gzip'd tar
/// only, no bigger than `--max-workdir-mb`; the same content is kept once, at one path.
#[test]
fn shipped_workdirs_are_bounded_checked_and_kept_by_content() {
    let mut d = start("workdirs", &["--max-workdir-mb", "1"]);
    let viewer = token(&d, "viewer", None);
    let researcher = token(&d, "researcher", Some("default"));
    let (status, body) = tcp_request(d.port, &viewer, "POST /v1/workdirs", "x");
    assert!(status.contains("403"), "{status} {body}");
    let (status, body) = tcp_request(d.port, &researcher, "POST /v1/workdirs", "not a tar");
    assert!(
        status.contains("400") && body.contains("not a gzip'd tar"),
        "{status} {body}"
    );
    let big = "a".repeat(2 << 20);
    let (status, body) = tcp_request(d.port, &researcher, "POST /v1/workdirs", &big);
    assert!(
        status.contains("413") && body.contains("over 1 MiB packed"),
        "{status} {body}"
    );
    // A real one, twice: one copy.
    let src = d.dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("a.txt"), "a").unwrap();
    let packed = gantry::workdir::pack(&src, 1 << 20).unwrap();
    let mut c = gantry::client::http::HttpClient::new(
        gantry::client::http::Endpoint::parse(&format!("http://127.0.0.1:{}", d.port)).unwrap(),
        Some(researcher.clone()),
    );
    let first = c.upload_workdir(packed.clone()).unwrap();
    let again = c.upload_workdir(packed).unwrap();
    assert_eq!(first.path, again.path);
    let kept = std::path::PathBuf::from(&first.path);
    assert_eq!(std::fs::read_to_string(kept.join("a.txt")).unwrap(), "a");
    let leftovers: Vec<_> = std::fs::read_dir(kept.parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(
        leftovers.is_empty(),
        "no partial uploads left: {leftovers:?}"
    );
    assert!(healthy(&mut d));
}

/// One team's shipped workdirs are bounded together (`--max-team-workdirs-mb`, unpacked): a
/// workdir that would take the team past it is refused saying so; another caller's bound is
/// its own; the same content again costs nothing.
#[test]
fn a_teams_shipped_workdirs_are_bounded_together() {
    let mut d = start("team-workdirs", &["--max-team-workdirs-mb", "1"]);
    let researcher = token(&d, "researcher", Some("default"));
    let over_tcp = |token: Option<String>| {
        gantry::client::http::HttpClient::new(
            gantry::client::http::Endpoint::parse(&format!("http://127.0.0.1:{}", d.port)).unwrap(),
            token,
        )
    };
    let packed = |name: &str, fill: char| {
        let src = d.dir.join(name);
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(src.join("data.txt"), fill.to_string().repeat(700 << 10)).unwrap();
        gantry::workdir::pack(&src, 1 << 20).unwrap()
    };
    let (a, b) = (packed("a", 'a'), packed("b", 'b'));
    let mut team = over_tcp(Some(researcher));
    team.upload_workdir(a.clone()).unwrap();
    team.upload_workdir(a.clone()).unwrap();
    let e = team.upload_workdir(b.clone()).unwrap_err().to_string();
    assert!(
        e.contains("team default's shipped workdirs would take more than its limit on this daemon (1 MiB on disk"),
        "{e}"
    );
    // An operator (the Unix socket) is bounded apart.
    let mut operator = gantry::client::http::HttpClient::new(
        gantry::client::http::Endpoint::parse(d.socket.to_str().unwrap()).unwrap(),
        None,
    );
    operator.upload_workdir(b).unwrap();
    assert!(healthy(&mut d));
}

/// Workdirs are charged what they take on disk, not their bytes (issue 36): many tiny files
/// take an inode and a block each. Before: 100,000 one-byte files were charged 100 kB and took
/// 412 MB and 100k inodes. One upload is bounded in files (`--max-workdir-files`), a team's
/// together in four times that.
#[test]
fn many_tiny_files_are_bounded_by_count_and_blocks() {
    let mut d = start("tiny-files", &["--max-workdir-files", "100"]);
    let researcher = token(&d, "researcher", Some("default"));
    let mut c = gantry::client::http::HttpClient::new(
        gantry::client::http::Endpoint::parse(&format!("http://127.0.0.1:{}", d.port)).unwrap(),
        Some(researcher),
    );
    let tiny = |name: &str, n: usize| {
        let src = d.dir.join(name);
        std::fs::create_dir_all(&src).unwrap();
        for i in 0..n {
            // Each workdir its own content (the same content is kept once).
            std::fs::write(src.join(format!("{i}")), name).unwrap();
        }
        gantry::workdir::pack(&src, 1 << 20).unwrap()
    };
    let e = c.upload_workdir(tiny("many", 150)).unwrap_err().to_string();
    assert!(e.contains("over 100 files and directories unpacked"), "{e}");
    // Within the bound: taken, four times; the fifth passes the team's 400.
    for i in 0..4 {
        c.upload_workdir(tiny(&format!("ok{i}"), 99)).unwrap();
    }
    let e = c.upload_workdir(tiny("fifth", 99)).unwrap_err().to_string();
    assert!(
        e.contains("400 files; 0 MiB") || e.contains("400 files;"),
        "{e}"
    );
    assert!(
        e.contains("team default's shipped workdirs would take more"),
        "{e}"
    );
    assert!(healthy(&mut d));
}

/// The console's first action after it sat idle (issue 41): the daemon closes a kept-alive
/// connection after its header-read timeout (1 s here), and the client's next change went out
/// on the closed connection — `Broken pipe`, nothing applied. Now every change carries an
/// Idempotency-Key and is sent again on a new connection; the daemon answers a key once, so a
/// change sent twice is applied once.
#[test]
fn a_change_after_the_client_sat_idle_is_applied_once() {
    use gantry::client::http::{Endpoint, HttpClient};
    let d = start_with_fleet("idle");
    // The first job takes every GPU, so the second stays pending (hold and release apply).
    let ml = token(&d, "researcher", Some("ml"));
    let whole = "resources:\n  accelerators: H100:8\nnum_nodes: 2\nrun: train\n";
    let (status, body) = tcp_request(d.port, &ml, "POST /v1/jobs", whole);
    assert!(status.contains("201"), "{status} {body}");
    let one = "resources:\n  accelerators: H100:1\nrun: train\n";
    let (status, body) = tcp_request(d.port, &ml, "POST /v1/jobs", one);
    assert!(status.contains("201"), "{status} {body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"].clone();
    let mut c = HttpClient::new(Endpoint::Unix(d.socket.clone()), None);
    for round in 0..3 {
        assert_eq!(c.request("GET", "/v1/health", None).unwrap().status, 200);
        // Past the daemon's 1 s header-read timeout: it has closed the connection the client
        // keeps (and, within the client's reuse bound, would reuse).
        std::thread::sleep(Duration::from_millis(1500));
        let action = if round % 2 == 0 { "hold" } else { "release" };
        let r = c
            .request("POST", &format!("/v1/jobs/{id}/{action}"), None)
            .unwrap_or_else(|e| panic!("round {round}: {action} after idling: {e}"));
        assert_eq!(r.status, 200, "{}", String::from_utf8_lossy(&r.body));
    }
    // The same key twice: the second gets the first's answer (without the kept answer it
    // would be 409: a held job cannot be held again) and the job is released once.
    let key = [("Idempotency-Key", "one-release")];
    let path = format!("/v1/jobs/{id}/release");
    let first = c.request_with("POST", &path, None, &key).unwrap();
    let again = c.request_with("POST", &path, None, &key).unwrap();
    assert_eq!(
        first.status,
        200,
        "{}",
        String::from_utf8_lossy(&first.body)
    );
    assert_eq!((again.status, again.body), (first.status, first.body));
    let third = c.request("POST", &path, None).unwrap();
    assert_eq!(third.status, 409, "a new key is a new change");
    let said = events(&d);
    let count = |w: &str| said.iter().filter(|e| e.contains(w)).count();
    assert_eq!(count("→ held"), 2, "held once a round: {said:#?}");
    assert_eq!(
        count("→ pending: released"),
        2,
        "released once each: {said:#?}"
    );
}

/// A job's logs are its team's and the operators' (issue 36): before, any viewer and a
/// researcher of another team read every job's logs, secrets the job printed included. Now
/// they get 403 (and no log tail in the job's detail), the owners see the secret's value
/// masked, and `gantry logs` prints the job's escape sequences escaped unless `--raw` (before,
/// a job retitled the operator's tmux pane).
#[test]
fn logs_are_the_teams_with_secrets_masked_and_escapes_escaped() {
    let dir = temp_dir("logs-access");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, format!("{LOCAL_FLEET}\n[[teams]]\nname = \"b\"\n")).unwrap();
    let d = start_in(dir.clone(), &["--config", fleet.to_str().unwrap()]);
    let spec = "name: talky\nresources:\n  cpus: 1\nsecrets:\n  API_KEY: s3cr3t-value-42\nrun: |\n  echo \"key=$API_KEY\"\n  printf '\\033]0;pwned\\007title\\n'\n";
    let owner = token(&d, "researcher", Some("a"));
    let (status, body) = tcp_request(d.port, &owner, "POST /v1/jobs?team=a", spec);
    assert!(status.contains("201"), "{status} {body}");
    let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"].clone();
    wait_for(&d, 30, "the job to complete", || {
        cli(&d, &["job", &id.to_string(), "-o", "json"]).contains("\"state\": \"completed\"")
    });
    let logs = format!("GET /v1/jobs/{id}/logs?from=start&partial=true");
    for (who, t) in [
        ("a viewer", token(&d, "viewer", None)),
        ("another team", token(&d, "researcher", Some("b"))),
    ] {
        let (status, body) = tcp_request(d.port, &t, &logs, "");
        assert!(status.contains("403"), "{who}: {status} {body}");
        assert!(body.contains("team a's and the operators'"), "{body}");
        let (_, detail) = tcp_request(d.port, &t, &format!("GET /v1/jobs/{id}"), "");
        assert!(!detail.contains("s3cr3t"), "{who}: {detail}");
        assert!(
            detail.contains("\"log_tail\":[]"),
            "{who} sees no log tail: {detail}"
        );
    }
    let (status, body) = tcp_request(d.port, &owner, &logs, "");
    assert!(status.contains("200"), "{status} {body}");
    assert!(body.contains("key=***"), "{body}");
    assert!(!body.contains("s3cr3t"), "{body}");
    // The operator's CLI: masked, and escaped unless --raw.
    let text = cli(&d, &["logs", &id.to_string()]);
    assert!(text.contains("key=***"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{7}'),
        "{text:?}"
    );
    assert!(text.contains("\\u{1b}]0;pwned\\u{7}title"), "{text}");
    let raw = cli(&d, &["logs", &id.to_string(), "--raw"]);
    assert!(raw.contains("\u{1b}]0;pwned\u{7}title"), "{raw:?}");
}

/// An open event stream ends within a second or so of its token's revocation or expiry (issue
/// 36). Before: ordinary requests got 401 at once, but a stream opened before lived on (39.6 s
/// measured) and kept showing the fleet.
#[test]
fn revoked_and_expired_tokens_lose_their_open_event_streams() {
    use sha2::Digest;
    let d = start("stream-revoke", &[]);
    let open = |token: &str| {
        let mut s = TcpStream::connect(("127.0.0.1", d.port)).unwrap();
        s.write_all(
            format!("GET /v1/events/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
        let mut first = [0u8; 64];
        let n = s.read(&mut first).unwrap();
        assert!(String::from_utf8_lossy(&first[..n]).starts_with("HTTP/1.1 200"));
        s
    };
    // Reads until the daemon closes the stream; how long that took.
    let until_closed = |mut s: TcpStream| {
        let t0 = Instant::now();
        let mut buf = [0u8; 4096];
        loop {
            match s.read(&mut buf) {
                Ok(0) => return t0.elapsed(),
                // Keep-alives come every 15 s: a stream still open at 10 s stayed open.
                Ok(_) if t0.elapsed() < Duration::from_secs(10) => {}
                Ok(_) => panic!("the stream stayed open"),
                Err(e) => panic!("the stream stayed open: {e}"),
            }
        }
    };
    let revoked = token(&d, "viewer", None);
    let stream = open(&revoked);
    let id: String = sha2::Sha256::digest(revoked.as_bytes())
        .iter()
        .take(6)
        .map(|b| format!("{b:02x}"))
        .collect();
    let out = request(&d.socket, &format!("DELETE /v1/tokens/{id}"), "");
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    let took = until_closed(stream);
    assert!(
        took < Duration::from_secs(3),
        "closed {took:?} after revocation"
    );
    let out = request(
        &d.socket,
        "POST /v1/tokens",
        r#"{"role":"viewer","expires_in":"2s"}"#,
    );
    let v: serde_json::Value = serde_json::from_str(split(&out).1.as_str()).unwrap();
    let expiring = v["token"].as_str().unwrap().to_string();
    let t0 = Instant::now();
    let stream = open(&expiring);
    until_closed(stream);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_secs(5),
        "closed {took:?} after it was made (it expires at 2 s)"
    );
}

/// Strangers holding idle TCP connections cannot lock out the clients with tokens (issue 36).
/// Before: 300 idle connections, reopened as they were cut, filled the listener's slots and
/// 59 of 59 real requests failed. Now connections without a good token are on probation — a
/// bounded few, the oldest evicted to make room — and a real client's first request takes
/// its connection off.
#[test]
fn idle_strangers_on_tcp_cannot_lock_out_clients_with_tokens() {
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::Arc;
    let mut d = start("strangers", &[]);
    let viewer = token(&d, "viewer", None);
    let port = d.port;
    let stop = Arc::new(AtomicBool::new(false));
    let opened = Arc::new(AtomicUsize::new(0));
    let flood = {
        let (stop, opened) = (stop.clone(), opened.clone());
        // 300 connections that send nothing, each opened again as soon as the daemon cuts it.
        std::thread::spawn(move || {
            let connect = || {
                let s = TcpStream::connect(("127.0.0.1", port)).ok()?;
                s.set_nonblocking(true).ok()?;
                opened.fetch_add(1, Ordering::Relaxed);
                Some(s)
            };
            let mut held: Vec<Option<TcpStream>> = (0..300).map(|_| connect()).collect();
            while !stop.load(Ordering::Relaxed) {
                for slot in held.iter_mut() {
                    let cut = match slot {
                        None => true,
                        Some(s) => !matches!(
                            s.read(&mut [0u8; 64]),
                            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock
                        ),
                    };
                    if cut {
                        *slot = connect();
                    }
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let t0 = Instant::now();
    while opened.load(Ordering::Relaxed) < 600 {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the flood did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut ok = 0;
    // Each on a new connection, as gantry's client sends them (a GET is sent once more if its
    // connection is cut before the answer).
    for _ in 0..30 {
        let endpoint = gantry::client::http::Endpoint::Tcp(format!("127.0.0.1:{port}"));
        let mut c = gantry::client::http::HttpClient::new(endpoint, Some(viewer.clone()));
        if c.request("GET", "/v1/whoami", None)
            .is_ok_and(|r| r.status == 200)
        {
            ok += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    flood.join().unwrap();
    let opened = opened.load(Ordering::Relaxed);
    eprintln!(
        "strangers: {ok} of 30 real requests answered during a flood of {opened} idle connections"
    );
    // Locked out was 0 of 59 before probation. On a 2-core box running the rest of the suite,
    // a real client's connection is now and then cut twice in a row by the flood's churn (seen
    // as 29 of 30 in CI runs, never fewer): a rare retry is not a lockout.
    assert!(
        ok >= 28,
        "only {ok} of 30 real requests answered during a flood of {opened} connections"
    );
    assert!(healthy(&mut d));
}

/// `gantry bench soak`, briefly: one daemon under every kind of traffic at once keeps every
/// acknowledged job, refuses exec sessions past the caller's cap, and holds fewer descriptors
/// than the 900 slow connections held against it (1,100 once took it to 1,024 and the API with
/// it: each was held). No figure of speed is asserted: a slow machine must not fail it.
#[test]
fn a_short_soak_loses_nothing_and_holds_its_caps() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "bench",
            "soak",
            "--duration",
            "15s",
            "--every",
            "5s",
            "-o",
            "json",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["intervals"].as_array().unwrap().len(), 3, "{r}");
    assert!(r["jobs_acknowledged"].as_u64().unwrap() > 0, "{r}");
    assert_eq!(r["jobs_lost"], 0, "{r}");
    assert!(r["exec_refused"].as_u64().unwrap() > 0, "{r}");
    assert!(r["max_fds"].as_u64().unwrap() < 1000, "{r}");
}
