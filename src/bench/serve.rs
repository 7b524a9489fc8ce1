//! `gantry bench serve`: what a service's endpoint costs and how fast a service grows.
//!
//! 1. **Endpoint overhead.** An upstream HTTP server in this process answers at once; an
//!    open-loop load at `rate` requests per second goes to it directly, then through a
//!    service endpoint (`daemon::serving::proxy`) forwarding to it. Latency is measured from
//!    each request's scheduled send time (no coordinated omission); the endpoint's share is
//!    the difference of the two runs' quantiles.
//! 2. **Scale-up reaction.** A whole daemon in this process with a local pool; a service of
//!    replicas that are this binary (`gantry bench replica`, a tiny HTTP server that writes
//!    when it started and when it listened); load rises past the threshold. Measured: from the
//!    moment the load crossed the threshold (the request that made the QPS window's count
//!    exceed it) to the first request answered by the new replica, less the replica's own
//!    start-up (its process's start to its listening socket) — gantry's share.

use super::quantile;
use crate::daemon::actor::Request;
use crate::daemon::serving::proxy::{self, Backend, Shared};
use crate::daemon::state::{ServiceUp, StateOptions};
use axum::body::Body;
use serde::Serialize;
use std::path::Path;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

#[derive(Clone, Debug, Serialize)]
pub struct ServeBenchReport {
    pub rate: f64,
    pub seconds: f64,
    pub direct_p50_ms: f64,
    pub direct_p99_ms: f64,
    pub endpoint_p50_ms: f64,
    pub endpoint_p99_ms: f64,
    /// The endpoint's quantiles less the direct ones.
    pub added_p50_ms: f64,
    pub added_p99_ms: f64,
    pub endpoint_errors: usize,
    pub reaction: Reaction,
}

#[derive(Clone, Debug, Serialize)]
pub struct Reaction {
    pub load_rps: f64,
    pub per_replica: f64,
    /// From the threshold crossed to the first request the new replica answered.
    pub total_ms: f64,
    /// The replica's own start-up: its process's first instruction to its listening socket.
    pub replica_startup_ms: f64,
    /// What is left: measuring, deciding, placing, starting the process, probing, routing.
    pub gantry_ms: f64,
    pub errors: usize,
    /// When each stage showed in what the daemon published, ms after the crossing.
    pub stages: Vec<(String, f64)>,
}

/// A load at `rate` for `secs` on `url` (http://host:port/): latencies (ms) from each
/// request's scheduled time, the replica id that answered each (its body), and errors.
async fn load(
    client: &proxy::HttpClient,
    url: &str,
    rate: f64,
    secs: f64,
) -> (Vec<f64>, Vec<(Instant, String)>, usize) {
    let n = (rate * secs) as usize;
    let t0 = Instant::now();
    let mut tasks = Vec::with_capacity(n);
    for i in 0..n {
        let at = t0 + Duration::from_secs_f64(i as f64 / rate);
        tokio::time::sleep_until(at.into()).await;
        let (client, uri) = (client.clone(), url.to_string());
        tasks.push(tokio::spawn(async move {
            let req = hyper::Request::get(uri).body(Body::empty()).ok()?;
            let resp = client.request(req).await.ok()?;
            let ok = resp.status().is_success();
            let body = axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20)
                .await
                .ok()?;
            let done = Instant::now();
            ok.then(|| {
                (
                    done.duration_since(at).as_secs_f64() * 1e3,
                    done,
                    String::from_utf8_lossy(&body).into_owned(),
                )
            })
        }));
    }
    let (mut lat, mut who, mut errors) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        match t.await.ok().flatten() {
            Some((ms, done, body)) => {
                lat.push(ms);
                who.push((done, body));
            }
            None => errors += 1,
        }
    }
    lat.sort_by(f64::total_cmp);
    (lat, who, errors)
}

/// A server that answers `body` at once, on 127.0.0.1 at any port; its address.
async fn upstream(body: &'static str) -> Result<String, String> {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|e| e.to_string())?;
    let addr = l.local_addr().map_err(|e| e.to_string())?.to_string();
    tokio::spawn(async move {
        while let Ok((io, _)) = l.accept().await {
            let _ = io.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Body::from(body)))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}

fn ms_since_epoch(t: SystemTime) -> f64 {
    t.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e3)
}

/// `gantry bench replica`: answers every request with its replica id; writes to `log` the
/// Unix time (ms) it started and the one it listened at.
pub fn replica(port: u16, log: &Path, started: SystemTime) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())?;
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .map_err(|e| format!("port {port}: {e}"))?;
        let listening = SystemTime::now();
        std::fs::write(
            log,
            format!(
                "{} {}\n",
                ms_since_epoch(started),
                ms_since_epoch(listening)
            ),
        )
        .map_err(|e| format!("{}: {e}", log.display()))?;
        let id: &'static str = Box::leak(
            std::env::var("SKYPILOT_SERVE_REPLICA_ID")
                .unwrap_or_default()
                .into_boxed_str(),
        );
        loop {
            let Ok((io, _)) = l.accept().await else {
                continue;
            };
            let _ = io.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |_req| async move {
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Body::from(id)))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
                    .await;
            });
        }
    })
}

pub fn run(dir: &Path, rate: f64, secs: f64) -> Result<ServeBenchReport, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let runtime = crate::daemon::server::runtime()?;
    // 1. The endpoint's overhead.
    let (direct, via, errors) = runtime.block_on(async {
        let client = proxy::client();
        let addr = upstream("ok").await?;
        let shared = Shared::new("bench", proxy::client());
        *shared.backends.write().unwrap_or_else(|p| p.into_inner()) = vec![Backend {
            job: 1,
            addr: addr.clone(),
            in_flight: Arc::new(AtomicUsize::new(0)),
        }];
        let l = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| e.to_string())?;
        let ep = l.local_addr().map_err(|e| e.to_string())?;
        let (_stop_tx, stop) = tokio::sync::watch::channel(false);
        tokio::spawn(proxy::serve(l, shared, stop));
        // Warm both paths' connections, then alternate them in ten rounds: what the box is
        // doing meanwhile weighs on both alike.
        let (direct_url, via_url) = (format!("http://{addr}/"), format!("http://{ep}/"));
        let _ = load(&client, &direct_url, rate, 1.0).await;
        let _ = load(&client, &via_url, rate, 1.0).await;
        let (mut direct, mut via, mut errors) = (Vec::new(), Vec::new(), 0);
        for _ in 0..10 {
            let (d, _, e1) = load(&client, &direct_url, rate, secs / 10.0).await;
            let (v, _, e2) = load(&client, &via_url, rate, secs / 10.0).await;
            direct.extend(d);
            via.extend(v);
            errors += e1 + e2;
        }
        direct.sort_by(f64::total_cmp);
        via.sort_by(f64::total_cmp);
        Ok::<_, String>((direct, via, errors))
    })?;
    let reaction = reaction(dir)?;
    let q = |v: &[f64], p: f64| (quantile(v, p) * 1000.0).round() / 1000.0;
    Ok(ServeBenchReport {
        rate,
        seconds: secs,
        direct_p50_ms: q(&direct, 0.5),
        direct_p99_ms: q(&direct, 0.99),
        endpoint_p50_ms: q(&via, 0.5),
        endpoint_p99_ms: q(&via, 0.99),
        added_p50_ms: ((q(&via, 0.5) - q(&direct, 0.5)) * 1000.0).round() / 1000.0,
        added_p99_ms: ((q(&via, 0.99) - q(&direct, 0.99)) * 1000.0).round() / 1000.0,
        endpoint_errors: errors,
        reaction,
    })
}

/// Who the bench is to its daemon.
fn operator() -> crate::daemon::auth::Caller {
    crate::daemon::auth::Caller {
        role: crate::daemon::auth::Role::Operator,
        team: None,
        name: "bench".into(),
        user: None,
        key: "bench".into(),
    }
}

/// 2. The scale-up reaction, on a daemon in this process.
fn reaction(dir: &Path) -> Result<Reaction, String> {
    let mut fleet =
        crate::config::fleet::parse("bench.toml", super::local::HOST).map_err(|e| e.to_string())?;
    // The endpoint is a free port the bench found, wherever it is.
    fleet.services.ports = "1024-65535".to_string();
    let opts = StateOptions {
        seed: 1,
        demo_workload: false,
        failures_per_node_hour: 0.0,
        log_dir: Some(dir.join("logs")),
        sampling: crate::backend::agent::Sampling::Off,
        ..StateOptions::default()
    };
    let daemon = super::api::BenchDaemon::start_with(dir, &fleet, &opts)?;
    let result = react(dir, daemon.runtime(), daemon.handle());
    // The replicas go with the bench: a local job outlives its daemon (to be re-adopted), so
    // the service is stopped and its processes waited for before the daemon is.
    let caller = operator();
    let _ = daemon.handle().call_blocking(|reply| Request::ServiceDown {
        name: "bench".into(),
        caller,
        reply,
    });
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) {
        let alive = std::process::Command::new("pgrep")
            .args(["-f", &dir.join("logs").join("job-").display().to_string()])
            .output()
            .is_ok_and(|o| !o.stdout.is_empty());
        if !alive {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    daemon.stop();
    result
}

fn react(
    dir: &Path,
    runtime: &tokio::runtime::Runtime,
    handle: &crate::daemon::actor::Handle,
) -> Result<Reaction, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let per_replica = 100.0;
    let load_rps = 150.0;
    let spec = format!(
        "name: bench\nresources:\n  cpus: 1\nservice:\n  readiness_probe:\n    path: /\n    endpoint_probe_interval_seconds: 1\n  replica_policy:\n    min_replicas: 1\n    max_replicas: 2\n    target_qps_per_replica: {per_replica}\n    upscale_delay_seconds: 0\n    downscale_delay_seconds: 600\n    qps_window_seconds: 1\nrun: exec {} bench replica --port $PORT --log {}/replica-$SKYPILOT_SERVE_REPLICA_ID.log\n",
        exe.display(),
        dir.display()
    );
    let endpoint = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
        l.local_addr().map_err(|e| e.to_string())?.to_string()
    };
    let up = ServiceUp {
        submission: crate::daemon::engine::Submission {
            file: "bench.yaml".into(),
            text: spec.into_bytes(),
            team: Some("bench".into()),
            user: crate::unix_user::this_user(),
            ..Default::default()
        },
        name: None,
        endpoint: Some(endpoint.clone()),
        auth: false,
    };
    let caller = operator();
    handle
        .call_blocking(|reply| Request::ServiceUp { up, caller, reply })
        .map_err(|e| e.error)?;
    let ready = |n: u32| {
        let p = handle.published.borrow().clone();
        p.snapshot.services.first().is_some_and(|s| s.ready >= n)
    };
    let t = Instant::now();
    while !ready(1) {
        if t.elapsed() > Duration::from_secs(30) {
            return Err("the first replica was not ready within 30 s".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // What the daemon publishes, watched: when each stage of the scale-up showed.
    let stages = Arc::new(Mutex::new(Vec::<(&'static str, Instant)>::new()));
    let watching = Arc::new(std::sync::atomic::AtomicBool::new(true));
    let watcher = {
        let (stages, watching, mut rx) =
            (stages.clone(), watching.clone(), handle.published.clone());
        std::thread::spawn(move || {
            let mut seen = std::collections::HashSet::new();
            while watching.load(std::sync::atomic::Ordering::Relaxed) {
                let p = rx.borrow_and_update().clone();
                if let Some(s) = p.snapshot.services.first() {
                    let second = s.replicas.iter().find(|r| r.replica == 2);
                    for (name, hit) in [
                        (
                            "load seen by the daemon",
                            s.load.is_some_and(|l| l > per_replica),
                        ),
                        ("replica wanted", s.wanted >= 2),
                        (
                            "replica job running",
                            second.is_some_and(|r| r.state == "running"),
                        ),
                        (
                            "replica address known",
                            second.is_some_and(|r| r.address.is_some()),
                        ),
                        ("replica ready", second.is_some_and(|r| r.ready)),
                    ] {
                        if hit && seen.insert(name) {
                            stages
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .push((name, Instant::now()));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    // The load: the request that takes the 1 s window's count past `per_replica` is the
    // crossing; the new replica's id ("2") in an answer is it taking traffic.
    let sent_at = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let (who, errors, t_cross) = runtime.block_on(async {
        let client = proxy::client();
        let url = format!("http://{endpoint}/");
        let n = (load_rps * 20.0) as usize;
        let t0 = Instant::now();
        let mut tasks = Vec::with_capacity(n);
        let found = Arc::new(std::sync::atomic::AtomicBool::new(false));
        for i in 0..n {
            if found.load(std::sync::atomic::Ordering::Relaxed) {
                break;
            }
            let at = t0 + Duration::from_secs_f64(i as f64 / load_rps);
            tokio::time::sleep_until(at.into()).await;
            sent_at.lock().unwrap_or_else(|p| p.into_inner()).push(at);
            let (client, uri, found) = (client.clone(), url.clone(), found.clone());
            tasks.push(tokio::spawn(async move {
                let req = hyper::Request::get(uri).body(Body::empty()).ok()?;
                let resp = client.request(req).await.ok()?;
                let body = axum::body::to_bytes(Body::new(resp.into_body()), 1 << 20)
                    .await
                    .ok()?;
                let body = String::from_utf8_lossy(&body).into_owned();
                if body == "2" {
                    found.store(true, std::sync::atomic::Ordering::Relaxed);
                }
                Some((Instant::now(), body))
            }));
        }
        let (mut who, mut errors) = (Vec::new(), 0);
        for t in tasks {
            match t.await.ok().flatten() {
                Some(w) => who.push(w),
                None => errors += 1,
            }
        }
        let sent = sent_at.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let need = per_replica as usize + 1;
        let cross = sent.get(need - 1).copied();
        (who, errors, cross)
    });
    watching.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = watcher.join();
    let t_cross = t_cross.ok_or("the load never crossed the threshold")?;
    let stages: Vec<(String, f64)> = stages
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .map(|(n, t)| {
            let ms = if *t >= t_cross {
                t.duration_since(t_cross).as_secs_f64() * 1e3
            } else {
                -(t_cross.duration_since(*t).as_secs_f64() * 1e3)
            };
            (n.to_string(), (ms * 10.0).round() / 10.0)
        })
        .collect();
    let t_served = who
        .iter()
        .filter(|(_, body)| body == "2")
        .map(|(t, _)| *t)
        .min()
        .ok_or("no request reached a second replica within 20 s")?;
    let log = std::fs::read_to_string(dir.join("replica-2.log"))
        .map_err(|e| format!("the second replica's log: {e}"))?;
    let mut it = log
        .split_whitespace()
        .map(|x| x.parse::<f64>().unwrap_or(0.0));
    let (started, listening) = (it.next().unwrap_or(0.0), it.next().unwrap_or(0.0));
    let total = t_served.duration_since(t_cross).as_secs_f64() * 1e3;
    let startup = (listening - started).max(0.0);
    Ok(Reaction {
        load_rps,
        per_replica,
        total_ms: (total * 10.0).round() / 10.0,
        replica_startup_ms: (startup * 10.0).round() / 10.0,
        gantry_ms: ((total - startup) * 10.0).round() / 10.0,
        errors,
        stages,
    })
}
