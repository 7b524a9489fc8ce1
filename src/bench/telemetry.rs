//! `gantry bench telemetry`: the daemon's time for one telemetry round of N SSH hosts — each
//! host's agent line decoded, its NVML sample applied (per-GPU series, per-job attribution,
//! foreign processes, MIG modes), then one daemon step (scheduling cycle and snapshot). The
//! samples are synthetic NVML readings in the agent's wire format (8 busy GPUs per host, one
//! with a foreign process), fed to the state as the SSH backend hands them over; the hosts
//! themselves are unreachable names, so no network time is counted.

use crate::backend::agent::FromAgent;
use crate::backend::local::nvml::{Discovery, GpuProcess, GpuSample};
use crate::daemon::state::{Messages, State, StateOptions};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;
use std::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct TelemetryBenchReport {
    pub hosts: usize,
    pub gpus_per_host: usize,
    pub rounds: usize,
    /// Decoding and applying every host's sample, per round.
    pub observe_p50_ms: f64,
    pub observe_max_ms: f64,
    /// The same plus one daemon step (cycle and snapshot), per round.
    pub round_p50_ms: f64,
    pub round_max_ms: f64,
}

fn fleet(hosts: usize, gpus: usize) -> String {
    let names: Vec<String> = (0..hosts)
        .map(|i| format!("\"bench-host-{i}.invalid\""))
        .collect();
    format!(
        "[[teams]]\nname = \"bench\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"bench\"\nzone = \"bench\"\nname = \"bench\"\ninstance_type = \"ssh host\"\ngpu = \"H100\"\ngpus_per_node = {gpus}\nvram_gb = 80\ncpus = 64\nmemory_gb = 512\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nlost_after = \"1h\"\nhosts = [{}]\n",
        names.join(", ")
    )
}

/// One host's sample as its agent writes it, at round `r`.
fn line(gpus: usize, r: usize) -> String {
    let sample = Discovery::Available {
        driver: "synthetic".into(),
        gpus: (0..gpus)
            .map(|g| GpuSample {
                index: g as u32,
                uuid: format!("GPU-bench-{g}"),
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_total_mib: 81_559,
                memory_used_mib: 40_000,
                util_gpu_pct: ((r * 7 + g * 13) % 100) as u32,
                temperature_c: Some(60),
                power_w: Some(450.0),
                mig_enabled: Some(false),
                processes: if g + 1 == gpus {
                    vec![GpuProcess {
                        pid: 777,
                        pgid: Some(777),
                        used_mib: Some(1024),
                        sm_util_pct: Some(10),
                    }]
                } else {
                    Vec::new()
                },
                ..GpuSample::default()
            })
            .collect(),
    };
    serde_json::to_string(&FromAgent::Sample {
        found: sample,
        groups: Vec::new(),
    })
    .unwrap_or_default()
}

pub fn run(
    hosts: usize,
    gpus: usize,
    rounds: usize,
    dir: &Path,
) -> Result<TelemetryBenchReport, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let cfg = crate::config::fleet::parse("bench-telemetry.toml", &fleet(hosts, gpus))
        .map_err(|e| e.to_string())?;
    let opts = StateOptions {
        messages: Messages::File(dir.join("daemon.log")),
        ..StateOptions::default()
    };
    let mut s = State::open(&dir.join("state.db"), &cfg, &opts).map_err(|e| e.to_string())?;
    let mut observe = Vec::new();
    let mut round = Vec::new();
    for r in 0..rounds + 1 {
        // Every host sends the same sample (built once, outside the timing).
        let lines = vec![line(gpus, r); hosts];
        let t0 = Instant::now();
        for (node, l) in lines.iter().enumerate() {
            let Ok(FromAgent::Sample { found, groups }) = serde_json::from_str(l) else {
                return Err("a sample did not decode".to_string());
            };
            let groups: HashMap<u32, i64> = groups.into_iter().collect();
            s.observe_node(node, found, &groups)
                .map_err(|e| e.to_string())?;
        }
        let observed = t0.elapsed();
        s.advance(2.0).map_err(|e| e.to_string())?;
        let all = t0.elapsed();
        if r > 0 {
            // The first round says each foreign GPU once (journal writes): not a steady round.
            observe.push(observed.as_secs_f64() * 1e3);
            round.push(all.as_secs_f64() * 1e3);
        }
    }
    observe.sort_by(f64::total_cmp);
    round.sort_by(f64::total_cmp);
    Ok(TelemetryBenchReport {
        hosts,
        gpus_per_host: gpus,
        rounds,
        observe_p50_ms: super::quantile(&observe, 0.5),
        observe_max_ms: observe.last().copied().unwrap_or(0.0),
        round_p50_ms: super::quantile(&round, 0.5),
        round_max_ms: round.last().copied().unwrap_or(0.0),
    })
}
