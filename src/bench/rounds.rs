//! `--rounds`: a long-lived daemon's memory after each round of short jobs that came and went
//! through a backend (`bench ssh`, `bench kube`); flat when nothing it keeps follows the
//! history (issue 68).

use crate::daemon::engine::Submission;
use crate::daemon::state::{Messages, State, StateOptions};
use std::path::Path;
use std::time::{Duration, Instant};

/// The memory a long-lived daemon holds after each round of jobs that came and went
/// (`--rounds`): flat when nothing it keeps follows the history.
#[derive(Clone, Debug, serde::Serialize)]
pub struct RoundMemory {
    pub round: usize,
    pub jobs: usize,
    pub seconds: f64,
    pub rss_mib: f64,
    pub anon_mib: f64,
}

impl RoundMemory {
    /// This process now, after `round` of `jobs` that took `seconds`.
    pub fn now(round: usize, jobs: usize, seconds: f64) -> RoundMemory {
        RoundMemory {
            round,
            jobs,
            seconds,
            rss_mib: super::current_rss_mib().unwrap_or(0.0),
            anon_mib: super::current_anon_mib().unwrap_or(0.0),
        }
    }
}

/// The rounds' lines, and the last round's resident memory against the first's.
pub fn print_rounds(rounds: &[RoundMemory]) {
    for r in rounds {
        println!(
            "round {:>2}: {} jobs in {:.1} s, resident {:.1} MiB (anonymous {:.1} MiB)",
            r.round, r.jobs, r.seconds, r.rss_mib, r.anon_mib
        );
    }
    if let (Some(first), Some(last)) = (rounds.first(), rounds.last()) {
        if rounds.len() > 1 {
            println!(
                "after round {} against round 1: resident {:+.1}%, anonymous {:+.1}% (flat: within 10%)",
                last.round,
                (last.rss_mib / first.rss_mib.max(1e-9) - 1.0) * 100.0,
                (last.anon_mib / first.anon_mib.max(1e-9) - 1.0) * 100.0
            );
        }
    }
}

/// A bench's daemon state over `cfg`, its journal at `db`, its messages in `dir`'s log.
pub fn open(
    db: &Path,
    cfg: &crate::config::fleet::FleetConfig,
    dir: &Path,
) -> Result<State, String> {
    let opts = StateOptions {
        messages: Messages::File(dir.join("daemon.log")),
        ..StateOptions::default()
    };
    State::open(db, cfg, &opts).map_err(|e| e.to_string())
}

/// Advances `state` on the wall clock until `done` holds (or `limit` passes).
pub fn run_until(
    state: &mut State,
    limit: Duration,
    what: &str,
    mut done: impl FnMut(&mut State) -> bool,
) -> Result<(), String> {
    let t0 = Instant::now();
    let mut last = Instant::now();
    while !done(state) {
        if t0.elapsed() > limit {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_millis(2));
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        state.advance(dt).map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `rounds` rounds of `round_jobs` one-CPU jobs that run `true`, each round to the last
/// job's end; this process's memory after each (the daemon's state, its links to the
/// backend and what they answered all live in it).
pub fn run(
    state: &mut State,
    rounds: usize,
    round_jobs: usize,
) -> Result<Vec<RoundMemory>, String> {
    let mut out = Vec::new();
    for round in 1..=rounds {
        let t = Instant::now();
        let subs: Vec<Submission> = (0..round_jobs)
            .map(|_| Submission {
                file: "bench".to_string(),
                text: b"name: round\nresources:\n  cpus: 1\nrun: 'true'\n".to_vec(),
                team: Some("bench".to_string()),
                user: crate::unix_user::this_user(),
                ..Submission::default()
            })
            .collect();
        for r in state.submit(&subs) {
            r.map_err(|e| e.to_string())?;
        }
        // The snapshot has them waiting from the first cycle on.
        state.tick().map_err(|e| e.to_string())?;
        run_until(
            state,
            Duration::from_secs(600),
            "the round's jobs to end",
            |s| {
                s.snapshot()
                    .jobs
                    .iter()
                    .all(|j| !matches!(j.state.as_str(), "pending" | "running" | "preempting"))
            },
        )?;
        out.push(RoundMemory::now(
            round,
            round_jobs,
            t.elapsed().as_secs_f64(),
        ));
    }
    Ok(out)
}
