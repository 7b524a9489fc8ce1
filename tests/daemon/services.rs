//! Services end to end, with the real binary: replicas are real HTTP servers (Python's
//! `http.server`) run by a local pool, traffic comes from a bounded load generator through the
//! service's endpoint. Load rises → replicas are added after the upscale delay and every
//! request is answered; load stops → they are retired after the downscale delay; a replica
//! killed → it leaves the rotation and is replaced; a serving scale-up on a full host preempts
//! a training job, which requeues and resumes from its checkpoint; a bad `service:` section is
//! refused at its line.

use crate::support::daemon;

use daemon::{cli, events, free_port, json, start_in, temp_dir, wait_for, Daemon};
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// At the end of a test, passed or not: its services stopped and its jobs cancelled, and their
/// processes gone, before the daemon is killed (a local job outlives a killed daemon, to be
/// re-adopted: the replicas would be left running on the box).
struct Cleanup<'a>(&'a Daemon);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        let d = self.0;
        let run = |args: &[&str]| {
            Command::new(env!("CARGO_BIN_EXE_gantry"))
                .arg("--connect")
                .arg(&d.socket)
                .args(args)
                .output()
                .ok()
                .and_then(|o| serde_json::from_slice::<Value>(&o.stdout).ok())
        };
        for s in run(&["services", "-o", "json"])
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
        {
            if let Some(name) = s["name"].as_str() {
                run(&["serve", "down", name, "-o", "json"]);
            }
        }
        for j in run(&["jobs", "-o", "json"])
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
        {
            if ["pending", "running", "held", "preempting"]
                .contains(&j["state"].as_str().unwrap_or(""))
            {
                run(&["cancel", &j["id"].to_string(), "-o", "json"]);
            }
        }
        // Each run's wrapper names its exit file under the daemon's logs: wait for them all.
        let dir = d
            .dir
            .join("state")
            .join("logs")
            .join("job-")
            .display()
            .to_string();
        for _ in 0..100 {
            let left = Command::new("pgrep")
                .args(["-f", &dir])
                .output()
                .is_ok_and(|o| !o.stdout.is_empty());
            if !left {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn fleet(dir: &Path) -> String {
    let f = dir.join("fleet.toml");
    // The endpoints are free ports the tests find (any from 1024 up), not [services]' default
    // range, where two test processes could meet.
    let text = format!(
        "{}\n[services]\nports = \"1024-65535\"\n",
        daemon::LOCAL_FLEET
    );
    std::fs::write(&f, text).unwrap();
    f.display().to_string()
}

fn service(d: &Daemon, name: &str) -> Value {
    json(d, &["service", name])
}

/// One GET through the endpoint: its status code, or why there was none.
fn get(addr: &str, path: &str) -> Result<u16, String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    out.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {out:?}"))
}

/// Requests at `rate` per second until `stop`, each on its own thread (bounded: at most
/// 64 in flight); (answered 200, anything else).
struct Load {
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    fn start(addr: &str, rate: f64) -> Load {
        let (ok, failed, stop) = (
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicU64::new(0)),
            Arc::new(AtomicBool::new(false)),
        );
        let (o, f, s, addr) = (ok.clone(), failed.clone(), stop.clone(), addr.to_string());
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            let in_flight = Arc::new(AtomicU64::new(0));
            let mut n = 0u64;
            let mut workers = Vec::new();
            while !s.load(Ordering::Relaxed) {
                if in_flight.load(Ordering::Relaxed) < 64 {
                    let (o, f, addr, in_flight) =
                        (o.clone(), f.clone(), addr.clone(), in_flight.clone());
                    in_flight.fetch_add(1, Ordering::Relaxed);
                    workers.push(std::thread::spawn(move || {
                        match get(&addr, "/") {
                            Ok(200) => o.fetch_add(1, Ordering::Relaxed),
                            _ => f.fetch_add(1, Ordering::Relaxed),
                        };
                        in_flight.fetch_sub(1, Ordering::Relaxed);
                    }));
                }
                n += 1;
                let next = t0 + Duration::from_secs_f64(n as f64 / rate);
                std::thread::sleep(next.saturating_duration_since(Instant::now()));
            }
            for w in workers {
                let _ = w.join();
            }
        });
        Load {
            ok,
            failed,
            stop,
            thread: Some(thread),
        }
    }

    fn stop(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
        )
    }
}

fn ready(s: &Value) -> u64 {
    s["ready"].as_u64().unwrap_or(0)
}

/// The process listening on `port` (the replica's server), by `ss`.
fn listener_pid(port: u16) -> Option<i32> {
    let out = Command::new("ss").args(["-ltnpH"]).output().ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.contains(&format!(":{port} ")))?;
    let pid = line.split("pid=").nth(1)?.split(',').next()?;
    pid.parse().ok()
}

const WEB: &str = r#"name: web
team: a
resources:
  cpus: 1
  memory: 1
service:
  readiness_probe:
    path: /
    initial_delay_seconds: 60
    timeout_seconds: 2
    endpoint_probe_interval_seconds: 1
  replica_policy:
    min_replicas: 1
    max_replicas: 3
    target_qps_per_replica: 5
    upscale_delay_seconds: 1
    downscale_delay_seconds: 3
    qps_window_seconds: 3
run: exec python3 -m http.server $PORT --bind 127.0.0.1
"#;

#[test]
fn a_service_scales_with_its_traffic_and_replaces_a_killed_replica() {
    let dir = temp_dir("svc-scale");
    let f = fleet(&dir);
    let d = start_in(dir.clone(), &["--config", &f]);
    let _cleanup = Cleanup(&d);
    let file = dir.join("web.yaml");
    std::fs::write(&file, WEB).unwrap();
    let endpoint = format!("127.0.0.1:{}", free_port());
    let up = json(
        &d,
        &[
            "serve",
            "up",
            file.to_str().unwrap(),
            "--endpoint",
            &endpoint,
        ],
    );
    assert_eq!(up["name"], "web");
    assert_eq!(up["version"], 1);
    assert_eq!(up["endpoint"].as_str(), Some(endpoint.as_str()));
    wait_for(&d, 60, "the first replica ready", || {
        ready(&service(&d, "web")) == 1
    });
    assert_eq!(get(&endpoint, "/"), Ok(200));
    let s = service(&d, "web");
    assert_eq!(s["class"], "serving");
    assert_eq!(s["replicas"][0]["state"], "running");

    // 20 requests per second against 5 per replica: the autoscaler wants 3 (its maximum).
    let load = Load::start(&endpoint, 20.0);
    wait_for(&d, 60, "three replicas ready under load", || {
        ready(&service(&d, "web")) == 3
    });
    std::thread::sleep(Duration::from_secs(2));
    let (ok, failed) = load.stop();
    assert!(ok > 40, "only {ok} requests answered");
    assert_eq!(
        failed, 0,
        "{failed} requests failed while the service scaled up"
    );
    let ev = events(&d);
    let up = ev
        .iter()
        .find(|e| e.contains("service web: qps") && e.contains("+"))
        .unwrap_or_else(|| panic!("no scale-up event in {ev:#?}"));
    assert!(up.contains("> 1 × 5 for"), "{up}");
    let s = service(&d, "web");
    assert!(s["requests"].as_u64().unwrap() >= 40, "{s}");
    assert!(s["latency_p99_ms"].as_f64().is_some(), "{s}");
    // The table shows it too.
    let table = cli(&d, &["services"]);
    assert!(
        table.contains("web") && table.contains(&endpoint),
        "{table}"
    );

    // No traffic: back to one replica after the window and the downscale delay.
    wait_for(&d, 60, "the service back at one replica", || {
        let s = service(&d, "web");
        s["wanted"] == 1 && s["live"] == 1 && s["replicas"].as_array().map(Vec::len) == Some(1)
    });
    assert!(
        events(&d)
            .iter()
            .any(|e| e.contains("service web: qps 0.0 ≤") && e.contains("−2 replicas (3 → 1)")),
        "{:#?}",
        events(&d)
    );

    // The replica killed: out of rotation at once, replaced by a new one.
    let s = service(&d, "web");
    let victim = &s["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["detail"] != "retiring")
        .cloned()
        .unwrap();
    let port: u16 = victim["address"]
        .as_str()
        .unwrap()
        .rsplit(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let pid = listener_pid(port).expect("the replica's server listens");
    unsafe { libc::kill(pid, libc::SIGKILL) };
    let old = victim["replica"].as_u64().unwrap();
    wait_for(
        &d,
        60,
        "a new replica ready in the killed one's place",
        || {
            let s = service(&d, "web");
            ready(&s) == 1
                && s["replicas"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["ready"] == true && r["replica"].as_u64().unwrap() > old)
        },
    );
    assert!(
        events(&d)
            .iter()
            .any(|e| e.contains(&format!("service web: replica {old} ")) && e.contains("replaced")),
        "{:#?}",
        events(&d)
    );
    let (code, text) = body(&endpoint, "/").unwrap();
    assert_eq!(code, 200, "{text}");

    // The same file again changes nothing; down cancels the replicas and closes the endpoint.
    let again = json(&d, &["serve", "up", file.to_str().unwrap()]);
    assert_eq!(again["version"], 1);
    let before = service(&d, "web");
    let down = json(&d, &["serve", "down", "web"]);
    assert_eq!(
        down["cancelled"].as_array().map(Vec::len),
        Some(1),
        "{before:#}\n{:#?}",
        events(&d)
    );
    wait_for(&d, 20, "the endpoint closed", || {
        TcpStream::connect(&endpoint).is_err()
    });
    assert_eq!(json(&d, &["services"]), serde_json::json!([]));
}

#[test]
fn a_bad_service_section_is_refused_at_its_line() {
    let dir = temp_dir("svc-bad");
    let f = fleet(&dir);
    let d = start_in(dir.clone(), &["--config", &f]);
    let _cleanup = Cleanup(&d);
    let cases = [
        (
            "run: x\nservice:\n  readiness_probe: /\n  replica_policy:\n    min_replicas: 3\n    max_replicas: 2\n    target_qps_per_replica: 1\n",
            "bad.yaml:6:5: `service.replica_policy.max_replicas`: 2 is below `min_replicas` (3)",
        ),
        (
            "run: x\nservice:\n  readiness_probe: health\n",
            "bad.yaml:3:3: `service.readiness_probe`: `health`: the path starts with a slash (/)",
        ),
        (
            "run: x\nservice:\n  replicas: 2\n  replica_policy:\n    min_replicas: 1\n",
            "bad.yaml:3:3: `service.replicas`: give either `replicas` (a fixed count) or `replica_policy`, not both",
        ),
        (
            "run: x\nservice:\n  replica_policy:\n    min_replicas: 1\n    max_replicas: 4\n",
            "bad.yaml:5:5: `service.replica_policy.max_replicas`: 4 differs from `min_replicas` (1) while nothing scales them",
        ),
        (
            "run: x\nservice:\n  load_balancing_policy: random\n",
            "bad.yaml:3:3: `service.load_balancing_policy`: `random`: allowed values are round_robin, least_load and instance_aware_least_load",
        ),
        (
            "run: x\nservice:\n  replica_policy:\n    min_replicas: 1\n    max_replica: 2\n",
            "bad.yaml:5:5: unknown field `service.replica_policy.max_replica`; did you mean `max_replicas`?",
        ),
    ];
    let file = dir.join("bad.yaml");
    for (text, want) in cases {
        std::fs::write(&file, text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .current_dir(&dir)
            .arg("--connect")
            .arg(&d.socket)
            .args(["serve", "up", "bad.yaml"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {err}");
        assert!(err.contains(want), "{text}\nwanted: {want}\ngot: {err}");
    }
    // A service's file is not a job: `submit` says how to start it.
    std::fs::write(&file, WEB).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .current_dir(&dir)
        .arg("--connect")
        .arg(&d.socket)
        .args(["submit", "bad.yaml"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("bad.yaml:6:1: `service`: the file is a service (it has `service:`): start it with `gantry serve up FILE`"),
        "{err}"
    );
    // A task file is not a service.
    std::fs::write(&file, "run: x\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .current_dir(&dir)
        .arg("--connect")
        .arg(&d.socket)
        .args(["serve", "up", "bad.yaml"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("the file has no `service:` section"));
    assert_eq!(json(&d, &["services"]), serde_json::json!([]));
}

#[test]
fn a_serving_replica_on_a_full_host_preempts_training_which_resumes_from_its_checkpoint() {
    let dir = temp_dir("svc-preempt");
    // One GPU (declared: no NVML here), a serving team with it guaranteed and a training team
    // using it while it is idle; preemption at once (`min_runtime = "0s"`).
    let f = dir.join("fleet.toml");
    std::fs::write(
        &f,
        r#"
[services]
ports = "1024-65535"

[[teams]]
name = "a"
guaranteed = 1

[[teams]]
name = "b"

[[pools]]
provider = "local"
region = "here"
zone = "here"
name = "host"
instance_type = "this machine"
gpu = "H100"
gpus_per_node = 1
vram_gb = 80
cpus = 8
memory_gb = 16
capacity = "reserved"
price_per_hour = 0.5
nodes = 1

[scheduler]
min_runtime = "0s"
"#,
    )
    .unwrap();
    let d = start_in(dir.clone(), &["--config", f.to_str().unwrap()]);
    let _cleanup = Cleanup(&d);
    let ckpt = dir.join("ckpt");
    let train = format!(
        r#"name: train
team: b
priority: experiment
resources:
  accelerators: H100:1
  cpus: 1
checkpoint: {{grace: 10s}}
run: |
  step=0
  if [ -f {ckpt} ]; then step=$(cat {ckpt}); echo "resumed from step $step"; fi
  trap 'echo $step > {ckpt}; echo "checkpoint at step $step"; exit 0' TERM
  while true; do step=$((step+1)); sleep 0.1; done
"#,
        ckpt = ckpt.display()
    );
    let tf = dir.join("train.yaml");
    std::fs::write(&tf, train).unwrap();
    let out = cli(&d, &["submit", tf.to_str().unwrap()]);
    let id: i64 = out.trim().rsplit(' ').next().unwrap().parse().unwrap();
    wait_for(&d, 30, "training running", || {
        daemon::state(&d, id) == "running"
    });
    std::thread::sleep(Duration::from_secs(1));

    let port = free_port();
    let web = WEB
        .replace("  cpus: 1\n", "  accelerators: H100:1\n  cpus: 1\n")
        .replace("service:\n", &format!("service:\n  ports: {port}\n"));
    let wf = dir.join("web.yaml");
    std::fs::write(&wf, web).unwrap();
    let endpoint = format!("127.0.0.1:{}", free_port());
    json(
        &d,
        &["serve", "up", wf.to_str().unwrap(), "--endpoint", &endpoint],
    );
    wait_for(
        &d,
        60,
        "the replica ready on the training job's GPU",
        || ready(&service(&d, "web")) == 1,
    );
    assert_eq!(get(&endpoint, "/"), Ok(200));
    let ev = events(&d);
    assert!(
        ev.iter()
            .any(|e| e.contains(&format!("job {id} running → preempting: preempted for job"))),
        "{ev:#?}"
    );
    assert!(
        ev.iter()
            .any(|e| e.contains(&format!("job {id} preempting → pending"))
                && e.contains("requeued from its checkpoint")),
        "{ev:#?}"
    );
    assert!(daemon::log_text(&d, id).contains("checkpoint at step"));
    let step: u64 = std::fs::read_to_string(&ckpt)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(step > 0);

    // The service gives the GPU back: training resumes where it stopped.
    json(&d, &["serve", "down", "web"]);
    wait_for(&d, 60, "training running again", || {
        daemon::state(&d, id) == "running"
    });
    wait_for(&d, 30, "training resumed from its checkpoint", || {
        daemon::log_text(&d, id).contains(&format!("resumed from step {step}"))
    });
}

/// A replica's server: answers `GET /` with `$VERSION`, and `/metrics` with a gauge
/// `waiting` of `$WAITING` (vLLM's `vllm:num_requests_waiting` stands for it).
const SERVER: &str = r##"
import http.server, os
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        if self.path == "/metrics":
            b = ("# TYPE waiting gauge\nwaiting{model=\"m\"} %s\n" % os.environ.get("WAITING", "0")).encode()
        else:
            b = os.environ.get("VERSION", "").encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def do_POST(self):
        n, left = 0, int(self.headers.get("Content-Length", "0"))
        while left > 0:
            got = self.rfile.read(min(left, 1 << 16))
            if not got:
                break
            n, left = n + len(got), left - len(got)
        b = str(n).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"##;

/// One GET: status and body.
fn body(addr: &str, path: &str) -> Result<(u16, String), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| e.to_string())?;
    let mut out = String::new();
    s.read_to_string(&mut out).map_err(|e| e.to_string())?;
    let code = out
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| format!("no status line in {out:?}"))?;
    let text = out.split("\r\n\r\n").nth(1).unwrap_or("").to_string();
    Ok((code, text))
}

fn versioned(server: &Path, version: &str, policy: &str) -> String {
    format!(
        "name: api\nteam: a\nresources:\n  cpus: 1\nenvs:\n  VERSION: {version}\n  WAITING: '3'\nservice:\n  readiness_probe:\n    path: /\n    initial_delay_seconds: 60\n    endpoint_probe_interval_seconds: 1\n{policy}run: exec python3 {}\n",
        server.display()
    )
}

#[test]
fn a_new_version_replaces_replicas_one_at_a_time_while_requests_keep_succeeding() {
    let dir = temp_dir("svc-roll");
    let f = fleet(&dir);
    let d = start_in(dir.clone(), &["--config", &f]);
    let _cleanup = Cleanup(&d);
    let server = dir.join("server.py");
    std::fs::write(&server, SERVER).unwrap();
    let file = dir.join("api.yaml");
    let fixed = "  replicas: 2\n";
    std::fs::write(&file, versioned(&server, "v1", fixed)).unwrap();
    let endpoint = format!("127.0.0.1:{}", free_port());
    json(
        &d,
        &[
            "serve",
            "up",
            file.to_str().unwrap(),
            "--endpoint",
            &endpoint,
        ],
    );
    wait_for(&d, 60, "two v1 replicas ready", || {
        ready(&service(&d, "api")) == 2
    });
    assert_eq!(body(&endpoint, "/"), Ok((200, "v1".to_string())));

    let load = Load::start(&endpoint, 25.0);
    std::fs::write(&file, versioned(&server, "v2", fixed)).unwrap();
    let up = json(&d, &["serve", "up", file.to_str().unwrap()]);
    assert_eq!(up["version"], 2);
    let mut least_ready = u64::MAX;
    wait_for(&d, 90, "both replicas on v2", || {
        let s = service(&d, "api");
        least_ready = least_ready.min(ready(&s));
        let reps = s["replicas"].as_array().unwrap();
        ready(&s) == 2 && reps.len() == 2 && reps.iter().all(|r| r["version"] == 2)
    });
    std::thread::sleep(Duration::from_millis(500));
    let (ok, failed) = load.stop();
    assert_eq!(
        failed,
        0,
        "{failed} of {} requests failed during the update",
        ok + failed
    );
    assert!(least_ready >= 1, "the update left no replica ready");
    assert_eq!(body(&endpoint, "/"), Ok((200, "v2".to_string())));
    let ev = events(&d);
    let retired: Vec<&String> = ev
        .iter()
        .filter(|e| e.contains("retired (version 1 replaced by 2)"))
        .collect();
    assert_eq!(retired.len(), 2, "{ev:#?}");
}

#[test]
fn a_service_scales_on_a_metric_its_replicas_expose() {
    let dir = temp_dir("svc-metric");
    let f = fleet(&dir);
    let d = start_in(dir.clone(), &["--config", &f]);
    let _cleanup = Cleanup(&d);
    let server = dir.join("server.py");
    std::fs::write(&server, SERVER).unwrap();
    let file = dir.join("api.yaml");
    // Each replica says 3 requests wait; one replica per waiting request, at most 2.
    let policy = "  replica_policy:\n    min_replicas: 1\n    max_replicas: 2\n    target_metric:\n      name: waiting\n      per_replica: 1\n    upscale_delay_seconds: 1\n    downscale_delay_seconds: 600\n";
    std::fs::write(&file, versioned(&server, "v1", policy)).unwrap();
    let endpoint = format!("127.0.0.1:{}", free_port());
    json(
        &d,
        &[
            "serve",
            "up",
            file.to_str().unwrap(),
            "--endpoint",
            &endpoint,
        ],
    );
    wait_for(&d, 60, "two replicas from the metric, each read", || {
        let s = service(&d, "api");
        ready(&s) == 2 && s["load"].as_f64() == Some(6.0)
    });
    let ev = events(&d);
    assert!(
        ev.iter()
            .any(|e| e.contains("service api: waiting 3.0 > 1 × 1 for") && e.contains("(1 → 2)")),
        "{ev:#?}"
    );
}

/// The daemon's resident memory, KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// What a caller can make an endpoint hold is bounded: a large body streams to the replica
/// (six uploads held open mid-body took +388 MB, ~65 MB each, before), and connections past a
/// peer's cap are closed at once, counted, while the Unix-socket API answers (1,100 slow
/// connections took the daemon to its descriptor limit and the API timed out, before).
#[test]
fn an_endpoint_streams_large_bodies_and_caps_a_peers_connections() {
    let dir = temp_dir("svc-bounded");
    let f = fleet(&dir);
    let d = start_in(dir.clone(), &["--config", &f]);
    let _cleanup = Cleanup(&d);
    let server = dir.join("server.py");
    std::fs::write(&server, SERVER).unwrap();
    let file = dir.join("api.yaml");
    std::fs::write(&file, versioned(&server, "v1", "  replicas: 1\n")).unwrap();
    let endpoint = format!("127.0.0.1:{}", free_port());
    json(
        &d,
        &[
            "serve",
            "up",
            file.to_str().unwrap(),
            "--endpoint",
            &endpoint,
        ],
    );
    wait_for(&d, 60, "the replica ready", || {
        ready(&service(&d, "api")) == 1
    });
    // A 3 MB body arrives whole at the replica, streamed.
    let post = |len: usize| {
        let mut s = TcpStream::connect(&endpoint).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write!(
            s,
            "POST /up HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {len}\r\n\r\n"
        )
        .unwrap();
        s
    };
    let mut s = post(3 << 20);
    s.write_all(&vec![b'x'; 3 << 20]).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(
        out.starts_with("HTTP/1.1 200") && out.ends_with("3145728"),
        "{out}"
    );
    // Six uploads of 60 MB held open after 16 MB each: the daemon holds none of it.
    let before = rss_kib(d.child.id());
    let held: Vec<TcpStream> = (0..6)
        .map(|_| {
            let mut s = post(60 << 20);
            s.write_all(&vec![b'y'; 16 << 20]).unwrap();
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let grown = rss_kib(d.child.id()).saturating_sub(before);
    assert!(
        grown < 32 << 10,
        "the daemon grew {grown} KiB holding six half-sent uploads"
    );
    eprintln!("six 60 MB uploads held open after 16 MB each: the daemon grew {grown} KiB");
    drop(held);
    // 70 idle connections from one address: those past its 64 are closed at once.
    let idle: Vec<TcpStream> = (0..70)
        .map(|_| TcpStream::connect(&endpoint).unwrap())
        .collect();
    let closed = idle
        .iter()
        .filter(|c| {
            let mut c = *c;
            c.set_read_timeout(Some(Duration::from_millis(300)))
                .unwrap();
            let mut b = [0u8; 1];
            matches!(c.read(&mut b), Ok(0))
        })
        .count();
    assert!(closed >= 6, "{closed} of 70 closed");
    // Meanwhile the API answers at once.
    let t = Instant::now();
    cli(&d, &["jobs"]);
    eprintln!(
        "70 idle connections from one address: {closed} closed at once; `gantry jobs` meanwhile: {:?}",
        t.elapsed()
    );
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    wait_for(&d, 10, "the turned-away count", || {
        service(&d, "api")["turned_away"].as_u64().unwrap_or(0) >= 6
    });
    assert!(cli(&d, &["service", "api"]).contains("turned away"));
    drop(idle);
}
