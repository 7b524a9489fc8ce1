//! `gantry bench api`: durable submissions per second through the whole daemon — HTTP over the
//! Unix socket, the actor, spec parsing and admission, the journal's group commit — with
//! concurrent clients, each waiting for its acknowledgement before sending the next.

use super::quantile;
use crate::client::http::{Endpoint, HttpClient};
use crate::daemon::actor::spawn;
use crate::daemon::server::{serve, Listen};
use crate::daemon::state::{State, StateOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct ApiBenchConfig {
    /// A fresh directory for the journal and the socket.
    pub dir: PathBuf,
    pub clients: usize,
    pub jobs: usize,
    /// Also measure the floor: the same clients against a server on the same HTTP stack that
    /// answers every submission at once, doing nothing (`ApiBenchReport::floor`).
    pub floor: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ApiBenchReport {
    pub clients: usize,
    pub jobs: usize,
    pub durable_submits_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Jobs the journal holds afterwards (must equal `jobs`).
    pub journaled: usize,
    /// Scheduling cycles the daemon ran during the bench.
    pub cycles: u64,
    /// Seconds the actor spent in those cycles (submissions wait behind them).
    pub cycle_seconds: f64,
    /// With `--floor`: what the same clients reach against a server that answers `201` at
    /// once (axum and hyper over the same socket, no parse, no journal) — the most this box
    /// allows for the HTTP round trips alone, measured in the same run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub floor: Option<Floor>,
}

/// The HTTP round trip alone, on this box, with these clients.
#[derive(Clone, Debug, Serialize)]
pub struct Floor {
    pub submits_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

/// A realistic spec: what a researcher submits.
const SPEC: &str = "name: bench\nresources:\n  accelerators: H100:1\n  cpus: 8\n  memory: 64\n  use_spot: true\ncheckpoint:\n  dir: /ckpt\n  interval: 30m\nrun: python train.py --epochs 3\n";

/// A whole daemon in this process (the built-in fleet, its journal in a scratch directory,
/// the API on a Unix socket), as the benches that time it through its API need one.
pub(super) struct BenchDaemon {
    pub db: PathBuf,
    /// The API's Unix socket.
    pub socket: PathBuf,
    handle: crate::daemon::actor::Handle,
    actor: std::thread::JoinHandle<()>,
    runtime: tokio::runtime::Runtime,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<Result<(), String>>,
}

impl BenchDaemon {
    /// Started in `dir` on the built-in fleet, each team allowed `max_pending` waiting jobs;
    /// returns once the socket answers.
    pub fn start(dir: &std::path::Path, max_pending: usize) -> Result<BenchDaemon, String> {
        let mut fleet =
            crate::config::fleet::parse("built-in", crate::config::fleet::DEFAULT_FLEET)
                .map_err(|e| e.to_string())?;
        for t in &mut fleet.teams {
            t.max_pending = Some(max_pending.max(1));
        }
        let opts = StateOptions {
            seed: 1,
            demo_workload: false,
            failures_per_node_hour: 0.0,
            log_dir: None,
            ..StateOptions::default()
        };
        BenchDaemon::start_with(dir, &fleet, &opts)
    }

    /// Started in `dir` on this fleet with these options; returns once the socket answers.
    pub fn start_with(
        dir: &std::path::Path,
        fleet: &crate::config::fleet::FleetConfig,
        opts: &StateOptions,
    ) -> Result<BenchDaemon, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let db = dir.join("bench.db");
        let socket = dir.join("bench.sock");
        let state = State::open(&db, fleet, opts).map_err(|e| e.to_string())?;
        let (handle, actor) = spawn(state, super::REAL_TIME).map_err(|e| e.to_string())?;
        let runtime = crate::daemon::server::runtime()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let listen = Listen {
            socket: socket.clone(),
            tcp: None,
            ..Default::default()
        };
        let server = {
            let handle = handle.clone();
            runtime.spawn(async move {
                serve(handle, &listen, async {
                    let _ = stopped.await;
                })
                .await
            })
        };
        let ready = Instant::now();
        while HttpClient::new(Endpoint::Unix(socket.clone()), None)
            .request("GET", "/v1/health", None)
            .is_err()
        {
            if ready.elapsed() > Duration::from_secs(10) {
                return Err("the bench daemon did not start within 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(BenchDaemon {
            db,
            socket,
            handle,
            actor,
            runtime,
            stop,
            server,
        })
    }

    /// Where its API answers.
    pub fn endpoint(&self) -> Endpoint {
        Endpoint::Unix(self.socket.clone())
    }

    /// The daemon's own runtime (its server's), for work that talks to it.
    pub fn runtime(&self) -> &tokio::runtime::Runtime {
        &self.runtime
    }

    pub fn handle(&self) -> &crate::daemon::actor::Handle {
        &self.handle
    }

    /// Scheduling cycles run so far, and the seconds they took.
    pub fn cycles(&self) -> (u64, f64) {
        let published = self.handle.published.borrow();
        (published.counters.cycles, published.cycle_seconds.sum)
    }

    /// Stops the server and the actor (the journal is closed when this returns).
    pub fn stop(self) {
        let _ = self.stop.send(());
        let _ = self.runtime.block_on(self.server);
        self.handle.shutdown();
        drop(self.handle);
        let _ = self.actor.join();
    }
}

pub fn run(cfg: &ApiBenchConfig) -> Result<ApiBenchReport, String> {
    // Every submission is kept waiting-room for: the figure is admission, not the cap.
    let daemon = BenchDaemon::start(&cfg.dir, cfg.jobs)?;
    let (lat, elapsed) = drive(&daemon.endpoint(), cfg.clients, cfg.jobs)?;
    let (cycles, cycle_seconds) = daemon.cycles();
    let db = daemon.db.clone();
    daemon.stop();
    let journaled = crate::daemon::journal::Store::open(&db)
        .and_then(|s| s.load())
        .map_err(|e| e.to_string())?
        .len();
    let floor = if cfg.floor { Some(floor(cfg)?) } else { None };
    Ok(ApiBenchReport {
        clients: cfg.clients.max(1),
        jobs: lat.len(),
        durable_submits_per_sec: lat.len() as f64 / elapsed.max(1e-9),
        p50_ms: quantile(&lat, 0.5),
        p99_ms: quantile(&lat, 0.99),
        journaled,
        cycles,
        cycle_seconds,
        floor,
    })
}

/// `clients` threads, each with gantry's own client, submitting `jobs` in all and waiting for
/// each acknowledgement: the latencies (ms, sorted) and the seconds it all took.
fn drive(endpoint: &Endpoint, clients: usize, jobs: usize) -> Result<(Vec<f64>, f64), String> {
    let clients = clients.max(1);
    let per_client = jobs.div_ceil(clients);
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let endpoint = endpoint.clone();
            std::thread::spawn(move || -> Result<Vec<f64>, String> {
                let mut c = HttpClient::new(endpoint, None);
                let mut lat = Vec::with_capacity(per_client);
                for _ in 0..per_client {
                    let t = Instant::now();
                    let r = c
                        .request("POST", "/v1/jobs", Some(SPEC.as_bytes()))
                        .map_err(|e| e.to_string())?;
                    if r.status != 201 {
                        return Err(format!(
                            "submission refused: HTTP {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        ));
                    }
                    lat.push(t.elapsed().as_secs_f64() * 1e3);
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in threads {
        lat.extend(
            t.join()
                .map_err(|_| "a client thread panicked".to_string())??,
        );
    }
    let elapsed = started.elapsed().as_secs_f64();
    lat.sort_by(f64::total_cmp);
    Ok((lat, elapsed))
}

/// The same clients against a server that reads each body and answers `201` with a job's
/// acknowledgement at once: the daemon's own runtime and axum, on a Unix socket, and nothing
/// else. What gantry reaches is read against this.
fn floor(cfg: &ApiBenchConfig) -> Result<Floor, String> {
    use axum::routing::post;
    let socket = cfg.dir.join("floor.sock");
    let _ = std::fs::remove_file(&socket);
    let runtime = crate::daemon::server::runtime()?;
    let listener = runtime.block_on(async { tokio::net::UnixListener::bind(&socket) });
    let listener = listener.map_err(|e| format!("{}: {e}", socket.display()))?;
    let app = axum::Router::new().route(
        "/v1/jobs",
        post(|body: axum::body::Bytes| async move {
            let ack = format!("{{\"id\":{},\"state\":\"pending\"}}", body.len());
            (
                axum::http::StatusCode::CREATED,
                [(axum::http::header::CONTENT_TYPE, "application/json")],
                ack,
            )
        }),
    );
    let server = runtime.spawn(async move { axum::serve(listener, app).await });
    let run = drive(&Endpoint::Unix(socket), cfg.clients, cfg.jobs);
    server.abort();
    let (lat, elapsed) = run?;
    Ok(Floor {
        submits_per_sec: lat.len() as f64 / elapsed.max(1e-9),
        p50_ms: quantile(&lat, 0.5),
        p99_ms: quantile(&lat, 0.99),
    })
}
