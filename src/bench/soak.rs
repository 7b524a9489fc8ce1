//! `gantry bench soak`: one real daemon (this binary, `gantry daemon`, a process of its own)
//! under normal and hostile traffic at once for a long while, measured from outside every
//! interval: its resident memory (now and peak), its open descriptors, and the latency of a
//! probe on the Unix-socket API (a job's detail: a turn of the actor). The traffic:
//! * normal — durable submissions of short jobs on the local pool (each acknowledged id is
//!   checked at the end: a job acknowledged and not found is lost), listings, the snapshot;
//! * hostile, from a viewer's token over TCP — submissions with fresh `Idempotency-Key`s and
//!   100 KB bodies (kept answers), history pages of 10,000 jobs, connections that send a header
//!   byte every few seconds (slowloris), from 200 source addresses;
//! * hostile, at a service's endpoint — uploads that announce 64 MiB and send a byte every 2 s
//!   (600, past the endpoint's cap, from 200 addresses), and uploads of 8 MiB sent whole;
//! * `exec` sessions held past the caller's cap (`gantry exec JOB -- sleep`, re-opened as
//!   they are refused).
//!
//! Agents on remote hosts are not part of it (they need SSH hosts); nor is a replica's metrics
//! page (its scrape is bounded by a test of its own).

use super::quantile;
use serde::Serialize;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct SoakConfig {
    /// A fresh directory: the fleet file, the journal, the socket, the replica's log.
    pub dir: PathBuf,
    pub seconds: f64,
    /// How often the figures are taken (and printed).
    pub every: f64,
    /// The hostile kinds sent (`KINDS`); the normal traffic and the probe always run.
    pub kinds: Vec<String>,
}

/// The hostile traffic's kinds, as `--only` names them.
pub const KINDS: [&str; 6] = [
    "keyed",
    "history",
    "slow-api",
    "slow-endpoint",
    "uploads",
    "exec",
];

/// One interval's figures.
#[derive(Clone, Debug, Serialize)]
pub struct SoakInterval {
    /// Seconds since the traffic started, at the interval's end.
    pub at_s: f64,
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
    pub fds: usize,
    pub probes: usize,
    pub probe_failures: usize,
    pub api_p50_ms: f64,
    pub api_p99_ms: f64,
    pub api_max_ms: f64,
    /// Requests sent in the interval, normal and hostile.
    pub normal: u64,
    pub hostile: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct SoakReport {
    pub seconds: f64,
    pub intervals: Vec<SoakInterval>,
    /// The most resident memory of any interval over the first's.
    pub rss_growth: f64,
    pub worst_api_p99_ms: f64,
    pub max_fds: usize,
    pub jobs_acknowledged: usize,
    pub jobs_lost: usize,
    pub exec_refused: u64,
    /// RSS within 2× of the first interval and every interval's p99 under 50 ms.
    pub flat: bool,
}

/// This host alone (`bench::local::HOST`), its services' endpoints on any free port.
fn fleet_text() -> String {
    format!(
        "{}\n[services]\nports = \"1024-65535\"\n",
        super::local::HOST
    )
}

const SHORT_JOB: &str =
    "name: soak\nteam: bench\nresources:\n  cpus: 0.1\n  memory: 0.1\nrun: true\n";
const HELD_JOB: &str =
    "name: soak-held\nteam: bench\nresources:\n  cpus: 0.1\n  memory: 0.1\nrun: exec sleep 100000\n";

/// Counts shared by the traffic threads.
#[derive(Default)]
struct Counts {
    normal: AtomicU64,
    hostile: AtomicU64,
    exec_refused: AtomicU64,
    probes: Mutex<Vec<f64>>,
    probe_failures: AtomicU64,
    acked: Mutex<Vec<i64>>,
}

/// One request on a connection of its own (`Connection: close`): the status and the body.
fn exchange(
    mut s: impl Read + Write,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: soak\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
    s.write_all(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    s.read_to_end(&mut out).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&out);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| {
            format!(
                "no status line: {:?}",
                text.chars().take(80).collect::<String>()
            )
        })?;
    let body = text
        .split_once("\r\n\r\n")
        .map_or(Vec::new(), |(_, b)| b.as_bytes().to_vec());
    Ok((status, body))
}

fn unix(socket: &Path, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
    let s = UnixStream::connect(socket).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    exchange(s, method, path, &[], body)
}

fn tcp(
    port: u16,
    token: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Result<(u16, Vec<u8>), String> {
    let s = std::net::TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .map_err(|e| e.to_string())?;
    let bearer = format!("Bearer {token}");
    let mut all = vec![("Authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    exchange(s, method, path, &all, body)
}

fn json(body: &[u8]) -> serde_json::Value {
    serde_json::from_slice(body).unwrap_or_default()
}

fn submit(socket: &Path, spec: &str) -> Result<i64, String> {
    let (status, body) = unix(socket, "POST", "/v1/jobs", spec.as_bytes())?;
    json(&body)["id"]
        .as_i64()
        .filter(|_| status == 201)
        .ok_or_else(|| {
            format!(
                "submission: HTTP {status}: {}",
                String::from_utf8_lossy(&body)
            )
        })
}

/// The daemon's resident memory now and at its peak (MiB), and its open descriptors.
fn measure(pid: u32) -> (f64, f64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mib = |key: &str| {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|k| k.parse::<f64>().ok())
            .map_or(0.0, |k| k / 1024.0)
    };
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (mib("VmRSS:"), mib("VmHWM:"), fds)
}

struct Daemon {
    child: Child,
    socket: PathBuf,
    port: u16,
    /// The jobs it runs on this host (a daemon stopped leaves its jobs running, to adopt
    /// them when it starts again): ended before it is.
    jobs: Vec<i64>,
    service: bool,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if self.service {
            let _ = unix(&self.socket, "DELETE", "/v1/services/soakweb", b"");
        }
        for id in &self.jobs {
            let _ = unix(&self.socket, "POST", &format!("/v1/jobs/{id}/cancel"), b"");
        }
        // Until none of them runs (the replica's job too), at most 30 s.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            let Ok((_, body)) = unix(&self.socket, "GET", "/v1/jobs", b"") else {
                break;
            };
            let live = json(&body).as_array().is_some_and(|jobs| {
                jobs.iter()
                    .any(|j| j["state"] == "running" || j["state"] == "preempting")
            });
            if !live {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_daemon(exe: &Path, dir: &Path) -> Result<Daemon, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, fleet_text()).map_err(|e| e.to_string())?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    let socket = dir.join("d.sock");
    let log = std::fs::File::create(dir.join("daemon.log")).map_err(|e| e.to_string())?;
    let child = Command::new(exe)
        .arg("daemon")
        .arg("--config")
        .arg(&fleet)
        .arg("--db")
        .arg(dir.join("state.db"))
        .arg("--socket")
        .arg(&socket)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("XDG_CONFIG_HOME", dir.join("cfg"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("starting the daemon: {e}"))?;
    let d = Daemon {
        child,
        socket,
        port,
        jobs: Vec::new(),
        service: false,
    };
    let t0 = Instant::now();
    while UnixStream::connect(&d.socket).is_err() {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!(
                "the daemon did not answer within 60 s ({})",
                dir.join("daemon.log").display()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(d)
}

pub fn run(cfg: &SoakConfig, mut said: impl FnMut(&SoakInterval)) -> Result<SoakReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let mut d = start_daemon(&exe, &cfg.dir)?;
    let socket = d.socket.clone();
    // A viewer's token for the hostile TCP callers.
    let (status, body) = unix(
        &socket,
        "POST",
        "/v1/tokens",
        br#"{"role":"viewer","label":"soak"}"#,
    )?;
    let token = json(&body)["token"]
        .as_str()
        .filter(|_| status == 201 || status == 200)
        .ok_or_else(|| format!("a viewer token: HTTP {status}"))?
        .to_string();
    // A service whose endpoint takes the hostile uploads, and a job to exec into.
    let service = format!(
        "name: soakweb\nteam: bench\nresources:\n  cpus: 0.1\n  memory: 0.1\nservice:\n  readiness_probe: /\n  replicas: 1\nrun: exec {} bench replica --port $PORT --log {}\n",
        exe.display(),
        cfg.dir.join("replica.log").display()
    );
    let file = cfg.dir.join("soakweb.yaml");
    std::fs::write(&file, &service).map_err(|e| e.to_string())?;
    d.service = true;
    let up = Command::new(&exe)
        .arg("--connect")
        .arg(&socket)
        .args(["serve", "up"])
        .arg(&file)
        .args(["-o", "json"])
        .output()
        .map_err(|e| e.to_string())?;
    let endpoint = json(&up.stdout)["endpoint"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| {
            format!(
                "serve up: {}{}",
                String::from_utf8_lossy(&up.stdout),
                String::from_utf8_lossy(&up.stderr)
            )
        })?;
    let held = submit(&socket, HELD_JOB)?;
    d.jobs.push(held);
    let t0 = Instant::now();
    while json(&unix(&socket, "GET", &format!("/v1/jobs/{held}"), b"")?.1)["state"] != "running" {
        if t0.elapsed() > Duration::from_secs(60) {
            return Err(format!("job {held} did not start within 60 s"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let mut threads = Vec::new();
    let mut spawn = |f: Box<dyn FnOnce() + Send>| threads.push(std::thread::spawn(f));
    let every = |ms: u64, stop: &AtomicBool, mut f: Box<dyn FnMut() + Send + '_>| {
        while !stop.load(Ordering::Relaxed) {
            let t = Instant::now();
            f();
            if let Some(left) = Duration::from_millis(ms).checked_sub(t.elapsed()) {
                std::thread::sleep(left);
            }
        }
    };
    // The probe: a job's detail on the Unix socket, ten times a second.
    {
        let (stop, c, socket) = (stop.clone(), counts.clone(), socket.clone());
        spawn(Box::new(move || {
            every(
                100,
                &stop,
                Box::new(|| {
                    let t = Instant::now();
                    match unix(&socket, "GET", &format!("/v1/jobs/{held}"), b"") {
                        Ok((200, _)) => c
                            .probes
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push(t.elapsed().as_secs_f64() * 1e3),
                        _ => {
                            c.probe_failures.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }),
            )
        }));
    }
    // Normal: two submissions a second, each acknowledged id kept; a listing and the snapshot.
    {
        let (stop, c, socket) = (stop.clone(), counts.clone(), socket.clone());
        spawn(Box::new(move || {
            every(
                500,
                &stop,
                Box::new(|| {
                    if let Ok(id) = submit(&socket, SHORT_JOB) {
                        c.acked.lock().unwrap_or_else(|e| e.into_inner()).push(id);
                    }
                    let _ = unix(&socket, "GET", "/v1/jobs", b"");
                    let _ = unix(&socket, "GET", "/v1/snapshot", b"");
                    c.normal.fetch_add(3, Ordering::Relaxed);
                }),
            )
        }));
    }
    // Hostile over TCP: keyed 100 KB submissions (20 a second) and 10,000-job history pages.
    for kind in 0..2 {
        if !cfg.kinds.iter().any(|k| k == ["keyed", "history"][kind]) {
            continue;
        }
        let (stop, c, token, port) = (stop.clone(), counts.clone(), token.clone(), d.port);
        spawn(Box::new(move || {
            let big = format!(
                "name: big\nrun: true\nenvs:\n  PAD: \"{}\"\n",
                "x".repeat(100_000)
            );
            let mut n = 0u64;
            every(
                if kind == 0 { 50 } else { 2000 },
                &stop,
                Box::new(|| {
                    n += 1;
                    let _ = if kind == 0 {
                        let key = format!("soak-{n}");
                        tcp(
                            port,
                            &token,
                            "POST",
                            "/v1/jobs",
                            &[("Idempotency-Key", &key)],
                            big.as_bytes(),
                        )
                    } else {
                        tcp(port, &token, "GET", "/v1/history?limit=10000", &[], b"")
                    };
                    c.hostile.fetch_add(1, Ordering::Relaxed);
                }),
            )
        }));
    }
    // Hostile slow connections: 300 to the API's TCP listener and 600 uploads to the endpoint
    // (past its cap of 512), each sending a byte every 2 s, from 200 source addresses
    // (127.0.0.2 …, so that per-peer caps alone do not turn them away); one closed is opened
    // again.
    for (count, target, announce) in [
        (300usize, format!("127.0.0.1:{}", d.port), false),
        (600, endpoint.clone(), true),
    ] {
        let kind = if announce {
            "slow-endpoint"
        } else {
            "slow-api"
        };
        if !cfg.kinds.iter().any(|k| k == kind) {
            continue;
        }
        let (stop, c) = (stop.clone(), counts.clone());
        spawn(Box::new(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let Ok(target) = target.parse::<std::net::SocketAddr>() else {
                return;
            };
            let open = |k: usize| -> Option<std::net::TcpStream> {
                let from = std::net::SocketAddr::from(([127, 0, 0, 2 + (k % 200) as u8], 0));
                let s = rt.block_on(async {
                    let sock = tokio::net::TcpSocket::new_v4().ok()?;
                    sock.bind(from).ok()?;
                    tokio::time::timeout(Duration::from_secs(2), sock.connect(target))
                        .await
                        .ok()?
                        .ok()
                })?;
                let mut s = s.into_std().ok()?;
                s.set_nonblocking(false).ok()?;
                let head: &[u8] = if announce {
                    b"POST / HTTP/1.1\r\nHost: soak\r\nContent-Length: 67108864\r\n\r\n"
                } else {
                    b"GET /v1/jobs HTTP/1.1\r\n"
                };
                s.write_all(head).ok()?;
                Some(s)
            };
            let mut conns: Vec<Option<std::net::TcpStream>> = (0..count).map(|_| None).collect();
            every(
                2000,
                &stop,
                Box::new(|| {
                    for (k, slot) in conns.iter_mut().enumerate() {
                        let alive = slot.as_mut().is_some_and(|s| s.write_all(b"x").is_ok());
                        if !alive {
                            *slot = open(k);
                            c.hostile.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }),
            )
        }));
    }
    // Hostile uploads of 8 MiB sent whole to the endpoint, two at a time.
    for _ in 0..2 {
        if !cfg.kinds.iter().any(|k| k == "uploads") {
            break;
        }
        let (stop, c, endpoint) = (stop.clone(), counts.clone(), endpoint.clone());
        spawn(Box::new(move || {
            let body = vec![b'u'; 8 << 20];
            every(
                1000,
                &stop,
                Box::new(|| {
                    if let Ok(s) = std::net::TcpStream::connect(&endpoint) {
                        let _ = s.set_read_timeout(Some(Duration::from_secs(30)));
                        let _ = exchange(s, "POST", "/", &[], &body);
                    }
                    c.hostile.fetch_add(1, Ordering::Relaxed);
                }),
            )
        }));
    }
    if cfg.kinds.iter().any(|k| k == "exec") {
        // exec sessions: 20 held at once by one caller (its cap is 8); those refused are opened
        // again every 5 s.
        {
            let (stop, c, socket, exe) =
                (stop.clone(), counts.clone(), socket.clone(), exe.clone());
            spawn(Box::new(move || {
                let mut held_now: Vec<Child> = Vec::new();
                every(
                    5000,
                    &stop,
                    Box::new(|| {
                        held_now.retain_mut(|ch| match ch.try_wait() {
                            Ok(Some(status)) => {
                                if !status.success() {
                                    c.exec_refused.fetch_add(1, Ordering::Relaxed);
                                }
                                false
                            }
                            _ => true,
                        });
                        while held_now.len() < 20 {
                            let Ok(ch) = Command::new(&exe)
                                .arg("--connect")
                                .arg(&socket)
                                .args(["exec", &held.to_string(), "--", "sleep", "3600"])
                                .stdin(Stdio::null())
                                .stdout(Stdio::null())
                                .stderr(Stdio::null())
                                .spawn()
                            else {
                                break;
                            };
                            held_now.push(ch);
                            c.hostile.fetch_add(1, Ordering::Relaxed);
                        }
                    }),
                );
                for mut ch in held_now {
                    let _ = ch.kill();
                    let _ = ch.wait();
                }
            }));
        }
    }

    // The figures, every interval.
    let start = Instant::now();
    let mut intervals = Vec::new();
    let (mut normal0, mut hostile0, mut failures0) = (0, 0, 0);
    while start.elapsed().as_secs_f64() < cfg.seconds {
        let left = cfg.seconds - start.elapsed().as_secs_f64();
        std::thread::sleep(Duration::from_secs_f64(cfg.every.min(left).max(0.05)));
        let mut lat = std::mem::take(&mut *counts.probes.lock().unwrap_or_else(|e| e.into_inner()));
        lat.sort_by(f64::total_cmp);
        let (rss, peak, fds) = measure(d.child.id());
        let (normal, hostile, failures) = (
            counts.normal.load(Ordering::Relaxed),
            counts.hostile.load(Ordering::Relaxed),
            counts.probe_failures.load(Ordering::Relaxed),
        );
        let i = SoakInterval {
            at_s: start.elapsed().as_secs_f64(),
            rss_mib: rss,
            peak_rss_mib: peak,
            fds,
            probes: lat.len(),
            probe_failures: (failures - failures0) as usize,
            api_p50_ms: quantile(&lat, 0.5),
            api_p99_ms: quantile(&lat, 0.99),
            api_max_ms: lat.last().copied().unwrap_or(0.0),
            normal: normal - normal0,
            hostile: hostile - hostile0,
        };
        (normal0, hostile0, failures0) = (normal, hostile, failures);
        said(&i);
        intervals.push(i);
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    // Every acknowledged job is in the journal.
    let acked = std::mem::take(&mut *counts.acked.lock().unwrap_or_else(|e| e.into_inner()));
    let lost = acked
        .iter()
        .filter(|id| {
            !matches!(
                unix(&socket, "GET", &format!("/v1/jobs/{id}"), b""),
                Ok((200, _))
            )
        })
        .count();
    let first = intervals.first().map_or(0.0, |i| i.rss_mib).max(1.0);
    let rss_growth = intervals.iter().map(|i| i.rss_mib).fold(0.0, f64::max) / first;
    let worst_api_p99_ms = intervals.iter().map(|i| i.api_p99_ms).fold(0.0, f64::max);
    Ok(SoakReport {
        seconds: cfg.seconds,
        rss_growth,
        worst_api_p99_ms,
        max_fds: intervals.iter().map(|i| i.fds).max().unwrap_or(0),
        jobs_acknowledged: acked.len(),
        jobs_lost: lost,
        exec_refused: counts.exec_refused.load(Ordering::Relaxed),
        flat: rss_growth <= 2.0 && worst_api_p99_ms < 50.0,
        intervals,
    })
}
