//! `gantry sim`: a seeded week of mixed work (`mix`) on the simulated multi-cloud fleet, under
//! gantry — the daemon's own engine over the simulated backend (`daemon`) — and under the naive
//! setups it is compared with (`naive`, a model). Everything here is simulated and says so.

pub mod daemon;
pub mod mix;
pub mod naive;
pub mod result;

use crate::config::fleet::FleetConfig;
use mix::{Kind, MixConfig};
use naive::{Baseline, World};
pub use result::{scaled, start_fleet, Setup, SetupResult, SimConfig};
use serde::Serialize;

#[derive(Clone, Debug)]
pub struct SimOptions {
    pub days: f64,
    pub seed: u64,
    /// Offered useful load as a fraction of the fleet's start GPUs.
    pub load: f64,
    /// Scale the fleet (nodes, quotas, budgets) to about this many GPUs at start size.
    pub gpus: Option<usize>,
    pub setups: Vec<Setup>,
    pub keep_events: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct WorkloadSummary {
    pub jobs: usize,
    pub by_kind: Vec<(String, usize)>,
    /// Useful GPU-hours the workload offers inside the window.
    pub offered_useful_gpu_hours: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Against {
    pub setup: String,
    /// gantry's utilization over this setup's.
    pub utilization_ratio: f64,
    /// 1 − gantry's cost per useful GPU-hour / this setup's.
    pub cost_reduction: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub simulated: bool,
    pub days: f64,
    pub seed: u64,
    pub load: f64,
    pub fleet_gpus_start: usize,
    pub fleet_gpus_max: usize,
    pub workload: WorkloadSummary,
    pub setups: Vec<SetupResult>,
    /// gantry against each naive setup that ran.
    pub against: Vec<Against>,
}

/// Runs the setups (in parallel, one thread each) over one seeded workload. Refuses a fleet
/// without teams or whose scaled quotas do not hold together.
pub fn compare(fleet: &FleetConfig, opts: &SimOptions) -> Result<Comparison, String> {
    let start_gpus = |c: &FleetConfig| -> usize {
        c.pools
            .iter()
            .map(|p| p.nodes as usize * usize::from(p.gpus_per_node))
            .sum()
    };
    let k = opts
        .gpus
        .map_or(1.0, |g| g as f64 / start_gpus(fleet).max(1) as f64);
    let cfg = scaled(fleet, k);
    let teams = crate::config::fleet::teams_of(&cfg);
    if teams.is_empty() {
        return Err(
            "the fleet file defines no [[teams]]: the workload needs teams to submit".into(),
        );
    }
    crate::model::validate_teams(&teams, &crate::model::default_classes())
        .map_err(|e| format!("the fleet scaled ×{k:.2}: {e}"))?;
    let jobs = mix::generate(
        &start_fleet(&cfg),
        &teams,
        &MixConfig {
            days: opts.days,
            load: opts.load,
            seed: opts.seed,
        },
    );
    let end = opts.days * 86_400.0;
    let offered: f64 = jobs
        .iter()
        .map(|j| {
            let active = j.active_s.min((end - j.arrive).max(0.0));
            f64::from(j.useful_milli) / 1000.0 * active / 3600.0
        })
        .sum();
    let sim = SimConfig {
        days: opts.days,
        seed: opts.seed,
        keep_events: opts.keep_events,
        ..SimConfig::default()
    };
    let results: Vec<SetupResult> = std::thread::scope(|s| {
        let handles: Vec<_> = opts
            .setups
            .iter()
            .map(|&setup| {
                let (cfg, jobs, sim) = (&cfg, &jobs, sim.clone());
                s.spawn(move || match setup {
                    Setup::Gantry => daemon::run(cfg, jobs, &sim),
                    Setup::Naive => Ok(World::new(Baseline::Strict, cfg, jobs, sim).run()),
                    Setup::NaiveAnyFit => Ok(World::new(Baseline::AnyFit, cfg, jobs, sim).run()),
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a simulation thread panicked"))
            .collect::<Vec<_>>()
    })
    .into_iter()
    .collect::<Result<_, String>>()?;
    let gantry = results.iter().find(|r| r.setup == "gantry");
    let against = gantry.map_or(Vec::new(), |g| {
        results
            .iter()
            .filter(|r| r.setup != "gantry")
            .map(|n| Against {
                setup: n.setup.clone(),
                utilization_ratio: g.utilization / n.utilization.max(1e-9),
                cost_reduction: 1.0
                    - g.cost_per_useful_gpu_hour / n.cost_per_useful_gpu_hour.max(1e-9),
            })
            .collect()
    });
    Ok(Comparison {
        simulated: true,
        days: opts.days,
        seed: opts.seed,
        load: opts.load,
        fleet_gpus_start: start_gpus(&cfg),
        fleet_gpus_max: cfg
            .pools
            .iter()
            .map(|p| p.max_nodes.unwrap_or(p.nodes) as usize * usize::from(p.gpus_per_node))
            .sum(),
        workload: WorkloadSummary {
            jobs: jobs.len(),
            by_kind: Kind::ALL
                .iter()
                .map(|k| {
                    (
                        k.name().to_string(),
                        jobs.iter().filter(|j| j.kind == *k).count(),
                    )
                })
                .collect(),
            offered_useful_gpu_hours: offered,
        },
        against,
        setups: results,
    })
}
