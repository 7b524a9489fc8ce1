//! `gantry bench starts`: how fast freed capacity is used again. N jobs of S seconds each
//! (`sleep`, one CPU) through the whole daemon — the actor, the journal, this host's agent —
//! on a local pool of `slots` one-CPU slots; the makespan against the ideal (⌈N / slots⌉ × S)
//! and the mean time a slot stood idle between two jobs. `--ticks-only` turns off the wake a
//! run's end sends the actor (what gantry did before: the next job waited for the clock's
//! next 1 s step), so both are measured by one binary on one machine.

use crate::daemon::actor::{spawn, Request};
use crate::daemon::engine::Submission;
use crate::daemon::state::{State, StateOptions};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct StartsBenchConfig {
    pub jobs: usize,
    pub slots: usize,
    pub seconds: f64,
    pub ticks_only: bool,
    pub dir: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
pub struct StartsBenchReport {
    pub jobs: usize,
    pub slots: usize,
    pub job_seconds: f64,
    pub woken_by_run_ends: bool,
    pub makespan_s: f64,
    pub ideal_s: f64,
    /// Makespan over the ideal.
    pub ratio: f64,
    /// Slot-seconds not spent running a job, per job: how long a freed slot waited.
    pub idle_per_job_ms: f64,
    pub cycles: u64,
}

pub fn run(cfg: &StartsBenchConfig) -> Result<StartsBenchReport, String> {
    let _ = std::fs::remove_dir_all(&cfg.dir);
    std::fs::create_dir_all(&cfg.dir).map_err(|e| format!("{}: {e}", cfg.dir.display()))?;
    let slots = cfg.slots.max(1);
    let fleet_text = format!(
        r#"[[teams]]
name = "bench"
max_pending = {}

[[pools]]
provider = "local"
region = "here"
zone = "here"
name = "host"
instance_type = "this machine"
cpus = {slots}
memory_gb = {}
capacity = "reserved"
price_per_hour = 0.0
nodes = 1
"#,
        cfg.jobs.max(1),
        slots.max(1)
    );
    let fleet = crate::config::fleet::parse("bench", &fleet_text).map_err(|e| e.to_string())?;
    let opts = StateOptions {
        failures_per_node_hour: 0.0,
        sampling: crate::backend::agent::Sampling::Off,
        ..StateOptions::default()
    };
    if cfg.ticks_only {
        // The first setting wins: the actor's own is then ignored.
        opts.wake.set(|| {});
    }
    let state = State::open(&cfg.dir.join("bench.db"), &fleet, &opts).map_err(|e| e.to_string())?;
    let (handle, actor) = spawn(state, super::REAL_TIME).map_err(|e| e.to_string())?;
    let spec = format!(
        "name: nap\nresources:\n  cpus: 1\n  memory: 0.5\nrun: sleep {}\n",
        cfg.seconds
    );
    let started = Instant::now();
    for _ in 0..cfg.jobs {
        let submission = Submission {
            file: "nap.yaml".into(),
            text: spec.clone().into_bytes(),
            team: Some("bench".into()),
            // The bench's jobs are its user's (a root daemon runs none for nobody).
            user: crate::unix_user::this_user(),
            ..Submission::default()
        };
        handle
            .call_blocking(|reply| Request::Submit { submission, reply })
            .map_err(|e| e.error)?;
    }
    let limit =
        Duration::from_secs_f64(cfg.seconds * (cfg.jobs as f64 / slots as f64 + 1.0) * 4.0 + 60.0);
    let finished = loop {
        let p = handle.published.borrow().clone();
        let done = p
            .snapshot
            .jobs
            .iter()
            .filter(|j| j.state == "completed" || j.state == "failed")
            .count();
        if done >= cfg.jobs {
            if let Some(bad) = p.snapshot.jobs.iter().find(|j| j.state == "failed") {
                return Err(format!("job {} failed: {}", bad.id, bad.detail));
            }
            break started.elapsed();
        }
        if started.elapsed() > limit {
            return Err(format!(
                "{done} of {} jobs ended within {:.0} s",
                cfg.jobs,
                limit.as_secs_f64()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let cycles = handle.published.borrow().counters.cycles;
    handle.shutdown();
    drop(handle);
    let _ = actor.join();
    let makespan = finished.as_secs_f64();
    let ideal = (cfg.jobs as f64 / slots as f64).ceil() * cfg.seconds;
    let idle = (makespan * slots as f64 - cfg.jobs as f64 * cfg.seconds) / cfg.jobs.max(1) as f64;
    let _ = std::fs::remove_dir_all(&cfg.dir);
    Ok(StartsBenchReport {
        jobs: cfg.jobs,
        slots,
        job_seconds: cfg.seconds,
        woken_by_run_ends: !cfg.ticks_only,
        makespan_s: makespan,
        ideal_s: ideal,
        ratio: makespan / ideal.max(1e-9),
        idle_per_job_ms: idle.max(0.0) * 1000.0,
        cycles,
    })
}
