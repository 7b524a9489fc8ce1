//! `gantry bench local`: one NVML telemetry sample of every local GPU, and a local job from
//! launch to running (its first output line written).

use super::quantile;
use crate::backend::local::exec::{launch, LaunchSpec};
use crate::backend::local::nvml::{discover, Discovery};
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct LocalBenchReport {
    /// `None` when NVML is unavailable (the reason is in `nvml`).
    pub telemetry_sample_p50_ms: Option<f64>,
    pub telemetry_sample_p99_ms: Option<f64>,
    pub gpus: usize,
    pub nvml: String,
    pub launch_to_running_p50_ms: f64,
    pub launch_to_running_p99_ms: f64,
    pub launches: usize,
}

pub fn run(log_dir: &Path, launches: usize) -> LocalBenchReport {
    let mut samples = Vec::new();
    let mut gpus = 0;
    let mut nvml = String::new();
    for _ in 0..20 {
        let t = Instant::now();
        match discover() {
            Discovery::Available { gpus: g, driver } => {
                samples.push(t.elapsed().as_secs_f64() * 1e3);
                gpus = g.len();
                nvml = format!("driver {driver}");
            }
            Discovery::Unavailable { reason } => {
                nvml = reason;
                break;
            }
        }
    }
    samples.sort_by(f64::total_cmp);
    let mut lat = Vec::new();
    for i in 0..launches {
        let t = Instant::now();
        let spec = LaunchSpec {
            job: i as i64,
            run: "echo running".into(),
            log_dir: log_dir.to_path_buf(),
            ..LaunchSpec::default()
        };
        let Ok(mut r) = launch(&spec) else { continue };
        let deadline = t + Duration::from_secs(10);
        while Instant::now() < deadline
            && !std::fs::read_to_string(&r.stdout_log).is_ok_and(|s| s.contains("running"))
        {
            std::thread::yield_now();
        }
        lat.push(t.elapsed().as_secs_f64() * 1e3);
        let _ = r.wait();
        let _ = std::fs::remove_file(&r.stdout_log);
        let _ = std::fs::remove_file(&r.stderr_log);
    }
    lat.sort_by(f64::total_cmp);
    LocalBenchReport {
        telemetry_sample_p50_ms: (!samples.is_empty()).then(|| quantile(&samples, 0.5)),
        telemetry_sample_p99_ms: (!samples.is_empty()).then(|| quantile(&samples, 0.99)),
        gpus,
        nvml,
        launch_to_running_p50_ms: quantile(&lat, 0.5),
        launch_to_running_p99_ms: quantile(&lat, 0.99),
        launches: lat.len(),
    }
}
