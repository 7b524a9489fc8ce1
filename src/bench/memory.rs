//! `gantry bench memory`: what a long-lived daemon holds after many jobs have come and gone.
//! Jobs are submitted, started and finished through the engine and its journal (group
//! commits, as the daemon makes them) in batches; the figure is the resident memory at the
//! end and after a restart on the same journal, against how many jobs the journal holds.

use crate::daemon::engine::{Engine, Submission};
use crate::model::{default_classes, Team};
use serde::Serialize;
use std::path::PathBuf;
use std::time::Instant;

pub struct MemoryBenchConfig {
    /// A fresh directory for the journal.
    pub dir: PathBuf,
    pub jobs: usize,
    /// Finished jobs kept in memory (the daemon's default: `engine::HISTORY_KEPT`).
    pub history: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct MemoryBenchReport {
    pub jobs: usize,
    pub history_kept: usize,
    pub seconds: f64,
    pub jobs_per_sec: f64,
    /// Jobs in the engine's memory at the end.
    pub jobs_in_memory: usize,
    pub rss_mib: f64,
    /// Of `rss_mib`, the process's own memory (RssAnon: the heap, its stacks); the rest is
    /// the binary's code and mapped files, which grow with the binary, not with jobs.
    pub anon_mib: f64,
    pub peak_rss_mib: f64,
    pub journal_mib: f64,
    /// Opening the same journal again (a restart): time and jobs loaded.
    pub restart_ms: f64,
    pub restart_jobs_in_memory: usize,
    pub rss_after_restart_mib: f64,
}

/// What a researcher submits.
const SPEC: &str = "name: bench\nresources:\n  accelerators: H100:1\n  cpus: 8\n  memory: 64\ncheckpoint:\n  dir: /ckpt\n  interval: 30m\nenvs:\n  DATA: s3://bucket/shard\nrun: python train.py --epochs 3 --lr 3e-4\n";

const BATCH: usize = 1_000;

fn rss_mib(field: &str) -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            let line = s.lines().find(|l| l.starts_with(field))?.to_string();
            line.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(0.0, |kib| kib / 1024.0)
}

fn open(cfg: &MemoryBenchConfig, now: f64) -> Result<Engine, String> {
    let teams = vec![Team {
        name: "default".to_string(),
        weight: 1.0,
        quota: None,
        cohort: None,
    }];
    // 250 nodes of 8 GPUs or more: every batch starts at once.
    let mut e = Engine::open(
        &cfg.dir.join("memory.db"),
        super::sched::synthetic_fleet(250),
        teams,
        default_classes(),
        now,
    )
    .map_err(|e| e.to_string())?;
    e.set_history_kept(cfg.history);
    Ok(e)
}

pub fn run(cfg: &MemoryBenchConfig) -> Result<MemoryBenchReport, String> {
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let mut e = open(cfg, 0.0)?;
    let started = Instant::now();
    let mut done = 0;
    let mut now = 1.0;
    while done < cfg.jobs {
        let n = BATCH.min(cfg.jobs - done);
        let batch: Vec<Submission> = (0..n)
            .map(|_| Submission {
                file: "bench.yaml".to_string(),
                text: SPEC.as_bytes().to_vec(),
                ..Submission::default()
            })
            .collect();
        for a in e.submit_batch(&batch, now) {
            a.map_err(|e| e.to_string())?;
        }
        // Cycles until the batch has run (the fleet takes a few hundred at a time).
        let mut left = n;
        while left > 0 {
            let started_now = e.tick(now + 1.0).map_err(|e| e.to_string())?.started;
            if started_now.is_empty() {
                return Err("no job started: the bench fleet is full".to_string());
            }
            let exits: Vec<(i64, bool)> = started_now.iter().map(|&id| (id, true)).collect();
            e.finished_all(&exits, now + 60.0)
                .map_err(|e| e.to_string())?;
            left = left.saturating_sub(exits.len());
            done += exits.len();
            now += 120.0;
        }
        now += 120.0;
    }
    let seconds = started.elapsed().as_secs_f64();
    let jobs_in_memory = e.jobs().count();
    let rss = rss_mib("VmRSS:");
    let anon = rss_mib("RssAnon:");
    let peak = rss_mib("VmHWM:");
    drop(e);
    let db = cfg.dir.join("memory.db");
    let journal_mib = ["", "-wal"]
        .iter()
        .filter_map(|s| std::fs::metadata(format!("{}{s}", db.display())).ok())
        .map(|m| m.len() as f64 / (1024.0 * 1024.0))
        .sum();
    let t = Instant::now();
    let e = open(cfg, now)?;
    let restart_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(MemoryBenchReport {
        jobs: done,
        history_kept: cfg.history,
        seconds,
        jobs_per_sec: done as f64 / seconds.max(1e-9),
        jobs_in_memory,
        rss_mib: rss,
        anon_mib: anon,
        peak_rss_mib: peak,
        journal_mib,
        restart_ms,
        restart_jobs_in_memory: e.jobs().count(),
        rss_after_restart_mib: rss_mib("VmRSS:"),
    })
}
