//! The daemon's API, end to end over real sockets: every endpoint under every role (forbidden
//! cases included), bad input answered with a precise 4xx and no change of state, fuzzed
//! request bodies, the event stream, and the snapshot deltas a remote console applies.

use crate::support::promtool;

use gantry::api::Snapshot;
use gantry::client::http::{Endpoint, HttpClient, Response};
use gantry::daemon::actor::{spawn, Clock, Handle};
use gantry::daemon::server::{serve, Listen};
use gantry::daemon::state::{State, StateOptions};
use proptest::prelude::*;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

struct Daemon {
    /// `--metrics-listen`: GET /metrics alone, no token.
    metrics: String,
    socket: PathBuf,
    tcp: String,
    handle: Handle,
    _runtime: tokio::runtime::Runtime,
    tokens: Tokens,
}

struct Tokens {
    viewer: String,
    applied: String,
    research: String,
    operator: String,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start() -> Daemon {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = gantry_testkit::scratch::scratch(&format!("api-{n}"));
    let cfg =
        gantry::config::fleet::parse("built-in", gantry::config::fleet::DEFAULT_FLEET).unwrap();
    let opts = StateOptions {
        seed: 3,
        demo_workload: false,
        failures_per_node_hour: 0.0,
        log_dir: None,
        ..StateOptions::default()
    };
    let state = State::open(&dir.join("t.db"), &cfg, &opts).unwrap();
    let clock = Clock {
        speed: 1.0,
        step: Duration::from_millis(200),
    };
    let (handle, _actor) = spawn(state, clock).unwrap();
    let runtime = gantry::daemon::server::runtime().unwrap();
    let socket = dir.join("api.sock");
    let port = free_port();
    let metrics_port = free_port();
    let listen = Listen {
        socket: socket.clone(),
        tcp: Some(format!("127.0.0.1:{port}").parse().unwrap()),
        metrics: Some(format!("127.0.0.1:{metrics_port}").parse().unwrap()),
        ..Default::default()
    };
    let h = handle.clone();
    runtime.spawn(async move { serve(h, &listen, std::future::pending()).await });
    let t0 = Instant::now();
    while HttpClient::new(Endpoint::Unix(socket.clone()), None)
        .request("GET", "/v1/health", None)
        .is_err()
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "daemon did not start"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut unix = HttpClient::new(Endpoint::Unix(socket.clone()), None);
    let mut token = |body: &str| -> String {
        let r = unix
            .request("POST", "/v1/tokens", Some(body.as_bytes()))
            .unwrap();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        v["token"].as_str().unwrap().to_string()
    };
    let tokens = Tokens {
        viewer: token(r#"{"role":"viewer"}"#),
        applied: token(r#"{"role":"researcher","team":"applied","label":"alice"}"#),
        research: token(r#"{"role":"researcher","team":"ml-research","label":"bob"}"#),
        operator: token(r#"{"role":"operator","label":"oncall"}"#),
    };
    Daemon {
        socket,
        tcp: format!("127.0.0.1:{port}"),
        metrics: format!("127.0.0.1:{metrics_port}"),
        handle,
        _runtime: runtime,
        tokens,
    }
}

/// One daemon shared by the tests of this file (each test makes its own jobs).
fn daemon() -> &'static Daemon {
    static D: OnceLock<Daemon> = OnceLock::new();
    D.get_or_init(start)
}

impl Daemon {
    fn unix(&self) -> HttpClient {
        HttpClient::new(Endpoint::Unix(self.socket.clone()), None)
    }
    fn tcp(&self, token: Option<&str>) -> HttpClient {
        HttpClient::new(Endpoint::Tcp(self.tcp.clone()), token.map(str::to_string))
    }
    fn submit(&self, team: &str) -> i64 {
        let spec = format!("name: t\nteam: {team}\nresources:\n  accelerators: H100:1\nrun: x\n");
        let r = self
            .unix()
            .request("POST", "/v1/jobs", Some(spec.as_bytes()))
            .unwrap();
        assert_eq!(r.status, 201, "{}", String::from_utf8_lossy(&r.body));
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["id"]
            .as_i64()
            .unwrap()
    }
    fn job_count(&self) -> usize {
        let r = self.unix().request("GET", "/v1/jobs", None).unwrap();
        serde_json::from_slice::<Vec<serde_json::Value>>(&r.body)
            .unwrap()
            .len()
    }
}

fn text(r: &Response) -> String {
    String::from_utf8_lossy(&r.body).into_owned()
}

#[derive(Clone, Copy, Debug)]
enum Who {
    NoToken,
    BadToken,
    Viewer,
    Applied,
    Research,
    Operator,
    Unix,
}

const EVERYONE: [Who; 7] = [
    Who::NoToken,
    Who::BadToken,
    Who::Viewer,
    Who::Applied,
    Who::Research,
    Who::Operator,
    Who::Unix,
];

fn client(d: &Daemon, who: Who) -> HttpClient {
    match who {
        Who::NoToken => d.tcp(None),
        Who::BadToken => d.tcp(Some("gty_not-a-token")),
        Who::Viewer => d.tcp(Some(&d.tokens.viewer)),
        Who::Applied => d.tcp(Some(&d.tokens.applied)),
        Who::Research => d.tcp(Some(&d.tokens.research)),
        Who::Operator => d.tcp(Some(&d.tokens.operator)),
        Who::Unix => d.unix(),
    }
}

/// The status each caller gets: anonymous and bad tokens 401 everywhere; then by role.
fn expect(who: Who, viewer: u16, applied: u16, research: u16, operator: u16) -> u16 {
    match who {
        Who::NoToken | Who::BadToken => 401,
        Who::Viewer => viewer,
        Who::Applied => applied,
        Who::Research => research,
        Who::Operator | Who::Unix => operator,
    }
}

#[test]
fn every_read_endpoint_under_every_role() {
    let d = daemon();
    let id = d.submit("applied");
    let reads = [
        "/v1/health".to_string(),
        "/v1/whoami".to_string(),
        "/v1/snapshot".to_string(),
        "/v1/jobs".to_string(),
        "/v1/jobs?state=running,pending&team=applied".to_string(),
        format!("/v1/jobs/{id}"),
        format!("/v1/jobs/{id}/explain"),
        "/v1/fleet".to_string(),
        "/v1/teams".to_string(),
        "/v1/events?limit=5".to_string(),
        format!("/v1/events?job={id}"),
        "/v1/reclaim".to_string(),
        "/metrics".to_string(),
    ];
    for path in &reads {
        for who in EVERYONE {
            let r = client(d, who).request("GET", path, None).unwrap();
            assert_eq!(
                r.status,
                expect(who, 200, 200, 200, 200),
                "GET {path} as {who:?}: {}",
                text(&r)
            );
        }
    }
    let metrics = text(
        &client(d, Who::Viewer)
            .request("GET", "/metrics", None)
            .unwrap(),
    );
    for family in [
        "gantry_scale_ups_total",
        "gantry_consolidated_nodes_total",
        "# TYPE gantry_idle_gpus gauge",
    ] {
        assert!(metrics.contains(family), "{family}: {metrics}");
    }
}

#[test]
fn every_change_endpoint_under_every_role() {
    let d = daemon();
    let spec = "name: t\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n";
    for who in EVERYONE {
        let r = client(d, who)
            .request("POST", "/v1/jobs", Some(spec.as_bytes()))
            .unwrap();
        assert_eq!(
            r.status,
            expect(who, 403, 201, 403, 201),
            "submit as {who:?}: {}",
            text(&r)
        );
        for action in ["cancel", "preempt"] {
            let id = d.submit("applied");
            std::thread::sleep(Duration::from_millis(50)); // let a cycle start it
            let r = client(d, who)
                .request("POST", &format!("/v1/jobs/{id}/{action}"), None)
                .unwrap();
            let allowed = [200, 409]; // 409: the job was not running yet, for preempt
            let want = expect(who, 403, 200, 403, 200);
            if want == 200 {
                assert!(
                    allowed.contains(&r.status),
                    "{action} as {who:?}: {}",
                    text(&r)
                );
            } else {
                assert_eq!(r.status, want, "{action} as {who:?}: {}", text(&r));
            }
        }
        let id = d.submit("applied");
        let r = client(d, who)
            .request(
                "PUT",
                &format!("/v1/jobs/{id}/priority"),
                Some(br#"{"class":"production"}"#),
            )
            .unwrap();
        assert_eq!(
            r.status,
            expect(who, 403, 200, 403, 200),
            "prio as {who:?}: {}",
            text(&r)
        );
        let r = client(d, who)
            .request("POST", "/v1/reclaim", Some(br#"{"plan":"0000"}"#))
            .unwrap();
        // An operator gets past the role check to the plan, which was never shown.
        assert_eq!(
            r.status,
            expect(who, 403, 403, 403, 409),
            "reclaim as {who:?}: {}",
            text(&r)
        );
        let r = client(d, who)
            .request("POST", "/v1/tokens", Some(br#"{"role":"viewer"}"#))
            .unwrap();
        assert_eq!(
            r.status,
            expect(who, 403, 403, 403, 201),
            "token as {who:?}: {}",
            text(&r)
        );
    }
}

#[test]
fn a_researcher_cannot_submit_for_another_team_or_touch_its_jobs() {
    let d = daemon();
    let mut alice = d.tcp(Some(&d.tokens.applied));
    let other = "name: t\nteam: ml-research\nresources:\n  accelerators: H100:1\nrun: x\n";
    let r = alice
        .request("POST", "/v1/jobs", Some(other.as_bytes()))
        .unwrap();
    assert_eq!(r.status, 403);
    assert!(text(&r).contains("team `applied` only"), "{}", text(&r));
    let r = alice
        .request(
            "POST",
            "/v1/jobs?team=ml-research",
            Some(b"name: t\nresources:\n  accelerators: H100:1\nrun: x\n"),
        )
        .unwrap();
    assert_eq!(r.status, 403, "{}", text(&r));
    // Without a team, the job is the researcher's own team's.
    let r = alice
        .request(
            "POST",
            "/v1/jobs",
            Some(b"name: mine\nresources:\n  accelerators: H100:1\nrun: x\n"),
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", text(&r));
    let id = serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["id"]
        .as_i64()
        .unwrap();
    let v: serde_json::Value = d
        .unix()
        .call("GET", &format!("/v1/jobs/{id}"), None)
        .unwrap();
    assert_eq!(v["team"], "applied");
    let theirs = d.submit("ml-research");
    let r = alice
        .request("POST", &format!("/v1/jobs/{theirs}/cancel"), None)
        .unwrap();
    assert_eq!(r.status, 403);
    assert!(
        text(&r).contains("belongs to team `ml-research`"),
        "{}",
        text(&r)
    );
}

#[test]
fn bad_input_gets_a_precise_4xx_and_changes_nothing() {
    // A daemon of its own: the job count must not move because of other tests.
    let d = &start();
    let cases: Vec<(&str, String, Vec<u8>, u16, &str)> = vec![
        (
            "POST",
            "/v1/jobs".into(),
            b"name: [unclosed\n".to_vec(),
            400,
            "request body:2:1",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            b"name: t\nresourcez: {}\n".to_vec(),
            400,
            "did you mean",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            vec![0xff, 0xfe, b'\n'],
            400,
            "UTF-8",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            b"name: t\nresources:\n  accelerators: H100:0\n".to_vec(),
            400,
            "accelerators",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            b"name: t\nresources:\n  accelerators: H100:-3\n".to_vec(),
            400,
            "accelerators",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            b"name: t\nnum_nodes: 4000\nresources:\n  accelerators: H100:8\n".to_vec(),
            422,
            "rejected",
        ),
        (
            "POST",
            "/v1/jobs".into(),
            b"name: \"a\\u0007b\"\nresources:\n  accelerators: H100:1\n".to_vec(),
            400,
            "control character",
        ),
        (
            "POST",
            "/v1/jobs?team=nope".into(),
            b"name: t\nresources:\n  accelerators: H100:1\n".to_vec(),
            400,
            "unknown team `nope`",
        ),
        (
            "POST",
            "/v1/jobs?priority=urgent".into(),
            b"name: t\nresources:\n  accelerators: H100:1\n".to_vec(),
            400,
            "unknown priority class `urgent`",
        ),
        (
            "GET",
            "/v1/jobs/abc".into(),
            vec![],
            400,
            "positive integer",
        ),
        ("GET", "/v1/jobs/0".into(), vec![], 400, "positive integer"),
        ("GET", "/v1/jobs/999999".into(), vec![], 404, "no such job"),
        (
            "GET",
            "/v1/jobs?colour=red".into(),
            vec![],
            400,
            "unknown filter",
        ),
        ("GET", "/v1/events?limit=0".into(), vec![], 400, "1..=10000"),
        (
            "POST",
            "/v1/jobs/1/explode".into(),
            vec![],
            404,
            "unknown action",
        ),
        (
            "PUT",
            "/v1/jobs/1/priority".into(),
            b"{\"class\": ".to_vec(),
            400,
            "line 1 column",
        ),
        (
            "PUT",
            "/v1/jobs/1/priority".into(),
            b"{\"klass\": \"x\"}".to_vec(),
            400,
            "unknown field",
        ),
        (
            "PUT",
            "/v1/jobs/1/priority".into(),
            b"{\"class\": 7}".to_vec(),
            400,
            "invalid type",
        ),
        (
            "POST",
            "/v1/tokens".into(),
            b"{\"role\": \"admin\"}".to_vec(),
            400,
            "roles: viewer",
        ),
        (
            "POST",
            "/v1/tokens".into(),
            b"{\"role\": \"researcher\"}".to_vec(),
            400,
            "needs --team",
        ),
        (
            "GET",
            "/v2/anything".into(),
            vec![],
            404,
            "no such endpoint",
        ),
    ];
    let before = d.job_count();
    let mut c = d.unix();
    for (method, path, body, status, needle) in &cases {
        let body = (!body.is_empty() || *method != "GET").then_some(&body[..]);
        let r = c.request(method, path, body).unwrap();
        assert_eq!(r.status, *status, "{method} {path}: {}", text(&r));
        let v: serde_json::Value = serde_json::from_slice(&r.body)
            .unwrap_or_else(|_| panic!("{method} {path}: not JSON: {}", text(&r)));
        let msg = v["error"].as_str().unwrap_or("");
        assert!(
            msg.contains(needle),
            "{method} {path}: `{msg}` lacks `{needle}`"
        );
    }
    // A body over the limit: the daemon answers 413 after reading 1 MiB and closes (raw here,
    // since a client still writing sees its write cut before it reads the answer)…
    {
        use std::io::{Read, Write};
        let mut s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let big = 2usize << 20;
        s.write_all(
            format!("POST /v1/jobs HTTP/1.1\r\nHost: x\r\nContent-Length: {big}\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let _ = s.write_all(&vec![b'#'; big]);
        let mut answer = Vec::new();
        let _ = s.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(
            answer.contains("request body over 1048576 bytes"),
            "{answer}"
        );
    }
    // …and gantry's client says so itself without sending it.
    match c.request("POST", "/v1/jobs", Some(&vec![b'#'; 2 << 20])) {
        Err(e @ gantry::client::http::ClientError::Api { status: 413, .. }) => {
            assert!(e.to_string().contains("over the daemon's limit"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        d.job_count(),
        before,
        "a refused request changed the job list"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Whatever the body, the daemon answers 201 or a 4xx with a JSON error, never a 5xx,
    /// and keeps answering.
    #[test]
    fn fuzzed_bodies_never_break_the_daemon(
        body in prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..400),
            "[a-z_:{}\\[\\], \\n\"0-9.-]{0,200}".prop_map(String::into_bytes),
            ("(H100|A10G|L4|X)", -3i64..100_000, 0u32..5).prop_map(|(m, n, k)| format!("name: f\nnum_nodes: {k}\nresources:\n  accelerators: {m}:{n}\nrun: x\n").into_bytes()),
        ],
        target in 0usize..3,
    ) {
        let d = daemon();
        let (method, path) = [("POST", "/v1/jobs"), ("PUT", "/v1/jobs/1/priority"), ("POST", "/v1/tokens")][target];
        let r = d.unix().request(method, path, Some(&body)).unwrap();
        prop_assert!(r.status < 500, "{} {}: {}", method, path, text(&r));
        if r.status >= 400 {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            prop_assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()));
        }
    }
}

#[test]
fn the_event_stream_starts_with_a_snapshot_and_its_deltas_rebuild_the_next_ones() {
    let d = daemon();
    let mut c = d.tcp(Some(&d.tokens.viewer));
    let mut mirror: Option<Snapshot> = None;
    let mut deltas = 0;
    let mut submitted = false;
    c.follow("/v1/events/stream", |event, data| {
        match event {
            "snapshot" => mirror = Some(serde_json::from_str(data).unwrap()),
            "delta" => {
                let delta = serde_json::from_str(data).unwrap();
                mirror.as_mut().expect("a snapshot came first").apply(delta);
                deltas += 1;
                // The mirror equals what the daemon publishes, version for version.
                let published = d.handle.published.borrow().snapshot.clone();
                let m = mirror.as_ref().unwrap();
                if published.version == m.version {
                    assert!(
                        *published == *m,
                        "the mirror differs at version {}",
                        m.version
                    );
                }
            }
            other => panic!("unexpected event {other}"),
        }
        if !submitted {
            d.submit("inference");
            submitted = true;
        }
        deltas < 3
    })
    .unwrap();
    assert_eq!(deltas, 3);
}

/// Snapshots as the daemon makes them, two apart: a delta carries one into the other.
#[test]
fn deltas_apply_exactly_on_a_living_demo() {
    let dir = gantry_testkit::scratch::scratch("delta");
    let mut s = State::demo(&dir, 11).unwrap();
    let mut mirror = Snapshot::clone(s.snapshot());
    for step in 0..120 {
        let before = s.snapshot().clone();
        s.advance(if step % 7 == 0 { 3600.0 } else { 60.0 })
            .unwrap();
        mirror.apply(before.diff(s.snapshot()));
        assert_eq!(&mirror, &**s.snapshot(), "step {step}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn preview_checks_a_spec_and_says_where_it_would_land_without_submitting() {
    let d = daemon();
    let spec =
        "name: preview-only-zz9\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n";
    for who in EVERYONE {
        let r = client(d, who)
            .request("POST", "/v1/preview", Some(spec.as_bytes()))
            .unwrap();
        assert_eq!(
            r.status,
            expect(who, 403, 200, 403, 200),
            "preview as {who:?}: {}",
            text(&r)
        );
        if r.status == 200 {
            let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
            assert_eq!(v["team"], "applied");
            assert_eq!(v["gpus"], 1.0);
            assert!(v["fits_now"].is_boolean());
            if v["fits_now"] == true {
                assert!(v["dollars_per_hour"].as_f64().unwrap() > 0.0, "{v}");
                assert!(!v["nodes"].as_array().unwrap().is_empty());
            } else {
                assert!(v["reason"].is_string(), "{v}");
            }
        }
    }
    let r = client(d, Who::Unix)
        .request(
            "POST",
            "/v1/preview?file=mine.yaml",
            Some(b"name: t\nresources:\n  acelerators: H100:1\n"),
        )
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(
        text(&r).contains("mine.yaml:3:3: unknown field"),
        "{}",
        text(&r)
    );
    // Nothing was submitted: no job has the previewed name (a real submission is listed).
    let r = client(d, Who::Unix)
        .request(
            "POST",
            "/v1/jobs",
            Some(spec.replace("preview-only", "listed").as_bytes()),
        )
        .unwrap();
    assert_eq!(r.status, 201, "{}", text(&r));
    // The listing is the published snapshot: wait for the submission to show.
    let mut jobs: Vec<serde_json::Value> = Vec::new();
    for _ in 0..100 {
        let all = client(d, Who::Unix)
            .request("GET", "/v1/jobs?limit=100000", None)
            .unwrap();
        jobs = serde_json::from_slice(&all.body).unwrap();
        if jobs.iter().any(|j| j["name"] == "listed-zz9") {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(jobs.iter().any(|j| j["name"] == "listed-zz9"));
    assert!(jobs.iter().all(|j| j["name"] != "preview-only-zz9"));
}

#[test]
fn a_pool_in_detail_by_index_with_precise_errors() {
    let d = daemon();
    let r = client(d, Who::Viewer)
        .request("GET", "/v1/pools/0", None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", text(&r));
    let p: gantry::api::PoolDetail = serde_json::from_slice(&r.body).unwrap();
    assert!(p.simulated && !p.nodes.is_empty() && !p.nodes[0].gpus.is_empty());
    let r = client(d, Who::Viewer)
        .request("GET", "/v1/pools/999", None)
        .unwrap();
    assert_eq!(r.status, 404);
    assert!(text(&r).contains("pool 999: no such pool"), "{}", text(&r));
    let r = client(d, Who::Viewer)
        .request("GET", "/v1/pools/dgx", None)
        .unwrap();
    assert_eq!(r.status, 400);
    assert!(text(&r).contains("give its index"), "{}", text(&r));
    let r = client(d, Who::NoToken)
        .request("GET", "/v1/pools/0", None)
        .unwrap();
    assert_eq!(r.status, 401);
}

#[test]
fn metrics_pass_promtool_and_serve_without_a_token_on_their_own_address() {
    let d = daemon();
    d.submit("applied");
    let spec =
        "name: p\nteam: applied\nproject: vision-7b\nresources:\n  accelerators: H100:1\nrun: x\n";
    let r = d
        .unix()
        .request("POST", "/v1/jobs", Some(spec.as_bytes()))
        .unwrap();
    assert_eq!(r.status, 201, "{}", text(&r));
    let mut open = HttpClient::new(Endpoint::Tcp(d.metrics.clone()), None);
    // Spend by project once the job runs (before: by team only).
    let by_project = "gantry_spend_dollars_total{team=\"applied\",project=\"vision-7b\"}";
    let t0 = std::time::Instant::now();
    let metrics = loop {
        let r = open.request("GET", "/metrics", None).unwrap();
        assert_eq!(r.status, 200, "{}", text(&r));
        let metrics = text(&r);
        if metrics.contains(by_project) || t0.elapsed() > std::time::Duration::from_secs(30) {
            break metrics;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    for family in [
        "gantry_build_info{version=\"",
        "# TYPE gantry_jobs gauge",
        "gantry_jobs{state=\"",
        "# TYPE gantry_spend_dollars_total counter",
        "gantry_spend_dollars_total{team=\"applied\",project=\"\"}",
        by_project,
        "# TYPE gantry_job_gpu_info gauge",
    ] {
        assert!(metrics.contains(family), "{family}: {metrics}");
    }
    // Only /metrics there: the API stays behind the socket and tokens.
    let r = open.request("GET", "/v1/jobs", None).unwrap();
    assert_eq!(r.status, 404, "{}", text(&r));
    // promtool finds nothing to say (the demo fleet has no measured GPUs).
    promtool::check(&metrics, &[]);
}

/// How long each team's jobs of each class wait and how often they are preempted: in the
/// report (from the journal: the jobs submitted in the window) and in /metrics as histograms
/// and counters labelled by class and team (was: by class only, no preemption counts).
#[test]
fn waits_and_preemptions_are_counted_per_team_and_class() {
    let d = daemon();
    let id = d.submit("inference");
    let state = |id: i64| -> String {
        let r = d
            .unix()
            .request("GET", &format!("/v1/jobs/{id}"), None)
            .unwrap();
        serde_json::from_slice::<serde_json::Value>(&r.body).unwrap()["state"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let until = |want: &str| {
        let t0 = std::time::Instant::now();
        while state(id) != want {
            assert!(
                t0.elapsed() < std::time::Duration::from_secs(60),
                "{}",
                state(id)
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    };
    until("running");
    let r = d
        .unix()
        .request("POST", &format!("/v1/jobs/{id}/preempt"), None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", text(&r));
    until("running");
    let r = d
        .unix()
        .request("GET", "/v1/report?since=1h", None)
        .unwrap();
    assert_eq!(r.status, 200, "{}", text(&r));
    let report: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
    let row = report["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["team"] == "inference" && q["class"] == "experiment")
        .cloned()
        .unwrap_or_else(|| panic!("{report}"));
    assert!(row["started"].as_u64() >= Some(1), "{row}");
    assert!(row["runs"].as_u64() >= Some(2), "{row}");
    assert!(row["preempted"].as_u64() >= Some(1), "{row}");
    let rate = row["preemption_rate"].as_f64().unwrap();
    assert!(rate > 0.0 && rate <= 1.0, "{row}");
    assert!(
        row["wait_p90_s"].as_f64() >= row["wait_p50_s"].as_f64(),
        "{row}"
    );
    let mut open = HttpClient::new(Endpoint::Tcp(d.metrics.clone()), None);
    let metrics = text(&open.request("GET", "/metrics", None).unwrap());
    for family in [
        "gantry_wait_seconds_count{class=\"experiment\",team=\"inference\"}",
        "# TYPE gantry_job_preemptions_total counter",
        "gantry_job_preemptions_total{class=\"experiment\",team=\"inference\"}",
    ] {
        assert!(metrics.contains(family), "{family}: {metrics}");
    }
    promtool::check(&metrics, &[]);
}

/// The one wire vocabulary: every answer the daemon writes reads back whole through the type
/// the CLI and the console read it with — no field the daemon writes is dropped, renamed or
/// defaulted on the way (a field renamed on one side fails here, not silently in a client).
#[test]
fn every_answer_reads_back_whole_through_the_clients_type() {
    use gantry::api::*;
    use gantry::scheduler::reclaim::ReclaimPlan;
    use serde::de::DeserializeOwned;
    use serde::Serialize;

    fn reads_back<T: DeserializeOwned + Serialize>(c: &mut HttpClient, method: &str, path: &str) {
        let body = (method == "PUT").then_some(&br#"{"class":"production"}"#[..]);
        let r = c.request(method, path, body).unwrap();
        assert!(r.status < 300, "{method} {path}: {} {}", r.status, text(&r));
        let raw: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
        let typed: T = serde_json::from_value(raw.clone())
            .unwrap_or_else(|e| panic!("{method} {path} does not read as its type: {e}\n{raw:#}"));
        // Through text, as a client sends it on: `to_value` would widen an f32 to its f64
        // digits, which the wire never carries.
        let again: serde_json::Value =
            serde_json::from_str(&serde_json::to_string(&typed).unwrap()).unwrap();
        assert_eq!(
            again, raw,
            "{method} {path}: what the daemon wrote is not what its type reads"
        );
    }

    let d = daemon();
    let id = d.submit("applied");
    let mut c = d.unix();
    reads_back::<Health>(&mut c, "GET", "/v1/health");
    reads_back::<WhoAmI>(&mut c, "GET", "/v1/whoami");
    reads_back::<WhoAmI>(&mut d.tcp(Some(&d.tokens.applied)), "GET", "/v1/whoami");
    reads_back::<Snapshot>(&mut c, "GET", "/v1/snapshot");
    reads_back::<Vec<JobRow>>(&mut c, "GET", "/v1/jobs");
    reads_back::<JobView>(&mut c, "GET", &format!("/v1/jobs/{id}"));
    reads_back::<Explain>(&mut c, "GET", &format!("/v1/jobs/{id}/explain"));
    reads_back::<FleetView>(&mut c, "GET", "/v1/fleet");
    reads_back::<PoolDetail>(&mut c, "GET", "/v1/pools/0");
    let pool: PoolDetail = c.call("GET", "/v1/pools/0", None).unwrap();
    reads_back::<NodeDetail>(&mut c, "GET", &format!("/v1/nodes/{}", pool.nodes[0].name));
    reads_back::<Vec<TeamRow>>(&mut c, "GET", "/v1/teams");
    reads_back::<Vec<EventRecord>>(&mut c, "GET", "/v1/events");
    reads_back::<Report>(&mut c, "GET", "/v1/report?by=team");
    reads_back::<Vec<HistoryJob>>(&mut c, "GET", "/v1/history");
    reads_back::<Vec<services::ServiceRow>>(&mut c, "GET", "/v1/services");
    reads_back::<ReclaimPlan>(&mut c, "GET", "/v1/reclaim");
    reads_back::<Vec<TokenInfo>>(&mut c, "GET", "/v1/tokens");
    reads_back::<Vec<KnownCloudPool>>(&mut c, "GET", "/v1/clouds");
    reads_back::<Reprioritized>(&mut c, "PUT", &format!("/v1/jobs/{id}/priority"));
    reads_back::<Acted>(&mut c, "POST", &format!("/v1/jobs/{id}/cancel"));
}
