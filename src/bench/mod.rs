//! Benchmarks behind every performance figure gantry reports. They print figures; they never
//! pass or fail, so a slow machine cannot break the build.

pub mod api;
pub mod cli;
pub mod cloud;
pub mod journal;
#[cfg(feature = "testkit")]
pub mod kube;
pub mod local;
pub mod logview;
pub mod memory;
pub mod sched;
pub mod serve;
pub mod slurm;
pub mod soak;
pub mod ssh;
pub mod starts;
pub mod telemetry;
pub mod tui;

/// The clock a bench's in-process daemon runs on: real time, a timer step each second.
const REAL_TIME: crate::daemon::actor::Clock = crate::daemon::actor::Clock {
    speed: 1.0,
    step: std::time::Duration::from_secs(1),
};

/// Peak resident set size of this process in MiB (Linux; `None` elsewhere).
pub fn peak_rss_mib() -> Option<f64> {
    status_mib("VmHWM:")
}

/// Resident set size of this process now, in MiB (Linux; `None` elsewhere).
pub fn current_rss_mib() -> Option<f64> {
    status_mib("VmRSS:")
}

/// Of the resident set, this process's own memory (RssAnon: the heap, its stacks), MiB.
pub fn current_anon_mib() -> Option<f64> {
    status_mib("RssAnon:")
}

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
            rss_mib: current_rss_mib().unwrap_or(0.0),
            anon_mib: current_anon_mib().unwrap_or(0.0),
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

fn status_mib(key: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub use gantry_core::stats::quantile;
