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
pub mod rounds;
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

pub use rounds::{print_rounds, RoundMemory};

fn status_mib(key: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub use gantry_core::stats::quantile;
