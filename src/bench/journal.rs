//! `gantry bench journal`: durable submissions per second through the journal's group commit,
//! with concurrent clients, and the time a restarted daemon needs to load them back.

use super::quantile;
use crate::daemon::engine::Engine;
use crate::daemon::journal::{Journal, JournalError, NewJob, Store};
use crate::model::{default_classes, Team};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

pub struct JournalBenchConfig {
    pub db: PathBuf,
    pub clients: usize,
    pub jobs: usize,
    /// Print `ack ID` as each submission is acknowledged (for crash tests).
    pub print_acks: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct JournalBenchReport {
    pub clients: usize,
    pub jobs: usize,
    pub durable_submits_per_sec: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Opening the journal and loading every row.
    pub reload_ms: f64,
    pub reloaded_jobs: usize,
    /// A restarted engine: open the journal, re-parse and resolve every job, and run the first
    /// scheduling cycle (on a 1,000-node fleet).
    pub restart_to_first_decision_ms: f64,
}

/// A realistic spec, as submitted (the journal keeps what users wrote).
const SPEC: &str = "name: bench\nresources:\n  accelerators: H100:1\n  cpus: 8\n  memory: 64\n  use_spot: true\ncheckpoint:\n  dir: /ckpt\n  interval: 30m\nrun: python train.py --epochs 3\n";

pub fn run(cfg: &JournalBenchConfig) -> Result<JournalBenchReport, JournalError> {
    let journal = Journal::start(&cfg.db)?;
    let per_client = cfg.jobs.div_ceil(cfg.clients.max(1));
    let started = Instant::now();
    let print = cfg.print_acks;
    let handles: Vec<_> = (0..cfg.clients.max(1))
        .map(|c| {
            let s = journal.submitter();
            std::thread::spawn(move || -> Result<Vec<f64>, JournalError> {
                let mut lat = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let job = NewJob {
                        name: Some(format!("bench-{c}-{i}")),
                        team: format!("team-{}", c % 4),
                        priority: "experiment".to_string(),
                        spec: SPEC.to_string(),
                        at: i as f64,
                        idempotency: None,
                        user: None,
                        reported: false,
                    };
                    let t = Instant::now();
                    let id = s.submit(job)?;
                    lat.push(t.elapsed().as_secs_f64() * 1e3);
                    if print {
                        let mut out = std::io::stdout().lock();
                        let _ = writeln!(out, "ack {id}");
                        let _ = out.flush();
                    }
                }
                Ok(lat)
            })
        })
        .collect();
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(h.join().map_err(|_| JournalError::Stopped)??);
    }
    let elapsed = started.elapsed().as_secs_f64();
    journal.stop();
    lat.sort_by(f64::total_cmp);
    let t = Instant::now();
    let reloaded = Store::open(&cfg.db)?.load()?.len();
    let reload_ms = t.elapsed().as_secs_f64() * 1e3;
    let teams: Vec<Team> = (0..4)
        .map(|i| Team {
            name: format!("team-{i}"),
            weight: 1.0,
            quota: None,
            cohort: None,
        })
        .chain(std::iter::once(Team {
            name: "default".to_string(),
            weight: 1.0,
            quota: None,
            cohort: None,
        }))
        .collect();
    let t = Instant::now();
    let mut engine = Engine::open(
        &cfg.db,
        super::sched::synthetic_fleet(1000),
        teams,
        default_classes(),
        0.0,
    )
    .map_err(|e| JournalError::Corrupt {
        id: 0,
        what: e.to_string(),
    })?;
    engine.tick(1.0).map_err(|e| JournalError::Corrupt {
        id: 0,
        what: e.to_string(),
    })?;
    let restart_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(JournalBenchReport {
        clients: cfg.clients,
        jobs: lat.len(),
        durable_submits_per_sec: lat.len() as f64 / elapsed.max(1e-9),
        p50_ms: quantile(&lat, 0.5),
        p99_ms: quantile(&lat, 0.99),
        reload_ms,
        reloaded_jobs: reloaded,
        restart_to_first_decision_ms: restart_ms,
    })
}
