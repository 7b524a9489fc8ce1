//! `gantry bench local`: one NVML telemetry sample of every local GPU (with the library kept
//! open, as the daemon's sampler keeps it), and a local job from placement to running: from
//! the start of the scheduling cycle that places it on a `provider = "local"` pool to its first
//! output line, through the daemon's state (cycle, journal, process launch).

use super::quantile;
use crate::backend::local::nvml::{Discovery, Probe};
use crate::daemon::engine::Submission;
use crate::daemon::state::{State, StateOptions};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct LocalBenchReport {
    /// `None` when NVML is unavailable (the reason is in `nvml`).
    pub telemetry_sample_p50_ms: Option<f64>,
    pub telemetry_sample_p99_ms: Option<f64>,
    /// Opening NVML (once per daemon).
    pub nvml_open_ms: Option<f64>,
    pub gpus: usize,
    pub nvml: String,
    pub placement_to_running_p50_ms: f64,
    pub placement_to_running_p99_ms: f64,
    pub launches: usize,
}

/// A fleet of this host alone, as the benches that run real processes here use it.
pub(super) const HOST: &str = r#"
[[teams]]
name = "bench"

[[pools]]
provider = "local"
region = "here"
zone = "here"
name = "host"
instance_type = "this machine"
cpus = 64
memory_gb = 64
capacity = "reserved"
price_per_hour = 0.0
nodes = 1
"#;

fn telemetry(samples: usize) -> (Vec<f64>, Option<f64>, usize, String) {
    let t = Instant::now();
    let mut probe = match Probe::open() {
        Ok(p) => p,
        Err(reason) => return (Vec::new(), None, 0, reason),
    };
    let open_ms = t.elapsed().as_secs_f64() * 1e3;
    let mut times = Vec::new();
    let mut gpus = 0;
    let mut nvml = String::new();
    for _ in 0..samples {
        let t = Instant::now();
        if let Discovery::Available { gpus: g, driver } = probe.sample() {
            times.push(t.elapsed().as_secs_f64() * 1e3);
            gpus = g.len();
            nvml = format!("driver {driver}");
        }
    }
    times.sort_by(f64::total_cmp);
    (times, Some(open_ms), gpus, nvml)
}

pub fn run(dir: &Path, launches: usize) -> Result<LocalBenchReport, String> {
    let (samples, nvml_open_ms, gpus, nvml) = telemetry(200);
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let cfg = crate::config::fleet::parse("bench-local", HOST).map_err(|e| e.to_string())?;
    let opts = StateOptions {
        failures_per_node_hour: 0.0,
        log_dir: Some(dir.join("logs")),
        ..StateOptions::default()
    };
    let mut s = State::open(&dir.join("bench.db"), &cfg, &opts).map_err(|e| e.to_string())?;
    let mut lat = Vec::new();
    for _ in 0..launches {
        let sub = Submission {
            file: "bench.yaml".into(),
            text: b"name: bench\nresources:\n  cpus: 1\n  memory: 1\nrun: echo running\n".to_vec(),
            team: Some("bench".into()),
            // The bench's jobs are its user's (a root daemon runs none for nobody).
            user: crate::unix_user::this_user(),
            ..Submission::default()
        };
        let id = s.submit(&[sub]).remove(0).map_err(|e| e.to_string())?;
        let log = dir.join("logs").join(format!("job-{id}.out"));
        let t = Instant::now();
        s.tick().map_err(|e| e.to_string())?;
        let deadline = t + Duration::from_secs(10);
        while Instant::now() < deadline
            && !std::fs::read_to_string(&log).is_ok_and(|s| s.contains("running"))
        {
            std::thread::yield_now();
        }
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        // Let it exit and be recorded before the next one.
        while s.engine().job(id).is_some_and(|j| !j.state.is_final()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
            s.advance(0.001).map_err(|e| e.to_string())?;
        }
    }
    lat.sort_by(f64::total_cmp);
    Ok(LocalBenchReport {
        telemetry_sample_p50_ms: (!samples.is_empty()).then(|| quantile(&samples, 0.5)),
        telemetry_sample_p99_ms: (!samples.is_empty()).then(|| quantile(&samples, 0.99)),
        nvml_open_ms,
        gpus,
        nvml,
        placement_to_running_p50_ms: quantile(&lat, 0.5),
        placement_to_running_p99_ms: quantile(&lat, 0.99),
        launches: lat.len(),
    })
}
