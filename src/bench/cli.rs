//! `gantry bench cli`: how long one CLI call takes, from the process's start to its exit, the
//! way a person or a script pays for it — this binary run as a child against a daemon in
//! this process that holds some jobs already: a read (`gantry jobs -o json`) and a durable
//! write (`gantry submit`).

use super::api::BenchDaemon;
use super::quantile;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

pub struct CliBenchConfig {
    /// A fresh directory for the journal, the socket and the job file.
    pub dir: PathBuf,
    /// Calls of each kind.
    pub calls: usize,
    /// Jobs the daemon holds before the calls (what `gantry jobs` lists).
    pub jobs: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct CliBenchReport {
    pub calls: usize,
    pub jobs_held: usize,
    /// `gantry jobs -o json`: milliseconds from spawn to exit.
    pub list: Timing,
    /// `gantry submit FILE`: the same, the job journaled before it exits.
    pub submit: Timing,
    /// `gantry --version`: the process alone (start, exit), no daemon reached.
    pub process_only: Timing,
}

#[derive(Clone, Debug, Serialize)]
pub struct Timing {
    pub p50_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

const SPEC: &str = "name: cli-bench\nresources:\n  accelerators: H100:1\nrun: python train.py\n";

pub fn run(cfg: &CliBenchConfig) -> Result<CliBenchReport, String> {
    let daemon = BenchDaemon::start(&cfg.dir, cfg.jobs + cfg.calls + 1)?;
    let result = calls(cfg, &daemon);
    daemon.stop();
    result
}

fn calls(cfg: &CliBenchConfig, daemon: &BenchDaemon) -> Result<CliBenchReport, String> {
    let exe = std::env::current_exe().map_err(|e| format!("this binary's path: {e}"))?;
    let file = cfg.dir.join("job.yaml");
    std::fs::write(&file, SPEC).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut client = crate::client::http::HttpClient::new(daemon.endpoint(), None);
    for _ in 0..cfg.jobs {
        let r = client
            .request("POST", "/v1/jobs", Some(SPEC.as_bytes()))
            .map_err(|e| e.to_string())?;
        if r.status != 201 {
            return Err(format!("submission refused: HTTP {}", r.status));
        }
    }
    let file_arg = file.display().to_string();
    let socket = &daemon.socket;
    let list = time(&exe, socket, &["jobs", "-o", "json"], cfg.calls)?;
    let submit = time(&exe, socket, &["submit", &file_arg], cfg.calls)?;
    let process_only = time(&exe, socket, &["--version"], cfg.calls)?;
    Ok(CliBenchReport {
        calls: cfg.calls,
        jobs_held: cfg.jobs,
        list,
        submit,
        process_only,
    })
}

/// Runs `exe args` against the socket `calls` times (after one untimed call, so the binary's
/// pages are in memory as they are for anyone who ran it once); each must succeed.
fn time(exe: &Path, socket: &Path, args: &[&str], calls: usize) -> Result<Timing, String> {
    let mut ms = Vec::with_capacity(calls);
    for i in 0..=calls {
        let t = Instant::now();
        let out = Command::new(exe)
            .args(args)
            .env("GANTRY_CONNECT", socket)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .output()
            .map_err(|e| format!("{}: {e}", exe.display()))?;
        let took = t.elapsed().as_secs_f64() * 1e3;
        if !out.status.success() {
            return Err(format!(
                "gantry {} failed ({}): {}",
                args.join(" "),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        if i > 0 {
            ms.push(took);
        }
    }
    ms.sort_by(f64::total_cmp);
    Ok(Timing {
        p50_ms: quantile(&ms, 0.5),
        p99_ms: quantile(&ms, 0.99),
        max_ms: ms.last().copied().unwrap_or(0.0),
    })
}
