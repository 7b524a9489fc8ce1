//! `gantry bench sched`: placement speed on a synthetic fleet.
//!
//! The fleet: `nodes` 8-GPU nodes over two providers and four zones, one NVLink domain per
//! node, 32 nodes per InfiniBand leaf, four GPU models (H100 and A100 with some GPUs in MIG
//! mode, L40S, A10G), on-demand and spot pools. The pending set, seeded: single GPUs, GPU
//! fractions, MIG slices, 2–8 GPU jobs and gangs of 2–64 nodes × 8 GPUs.

use super::{peak_rss_mib, quantile};
use crate::model::{
    CapacityType, Fleet, FleetBuilder, GpuRequest, JobRequest, MigGeometry, MigProfile,
    ModelChoice, PoolSpec,
};
use crate::scheduler::rng::Rng;
use crate::scheduler::{Cluster, Placer, Policy};
use serde::Serialize;
use std::time::Instant;

pub struct SchedBenchConfig {
    pub nodes: usize,
    pub pending: usize,
    pub policy: Policy,
    pub baseline: Policy,
    pub seed: u64,
    /// 512-GPU gang decisions to time.
    pub gangs: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct PolicyRun {
    pub policy: String,
    /// Single-node decisions (place + commit) per second, one core.
    pub placements_per_sec: f64,
    pub decisions: usize,
    pub placed: usize,
    pub p50_us: f64,
    pub p99_us: f64,
    pub gang512_p50_ms: f64,
    pub gang512_p99_ms: f64,
    /// How many of the timed gang decisions found room (the rest were refusals).
    pub gang512_placed: usize,
    pub gang512_timed: usize,
    pub gpu_allocated_pct: f64,
    pub node_classes_at_end: usize,
}

/// One full scheduling cycle at scale.
#[derive(Clone, Debug, Serialize)]
pub struct CycleRun {
    pub pending: usize,
    pub running: usize,
    pub teams: usize,
    pub cycle_ms: f64,
    pub starts: usize,
    pub preemptions: usize,
    pub reservations: usize,
    pub explanations: usize,
}

#[derive(Clone, Debug, Serialize)]
pub struct SchedBenchReport {
    pub nodes: usize,
    pub gpus: usize,
    pub pending: usize,
    pub policy: String,
    pub placements_per_sec: f64,
    pub baseline_policy: String,
    pub baseline_placements_per_sec: f64,
    /// The policy's throughput as a multiple of the baseline's (policy / baseline).
    pub speed_vs_baseline: f64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub gang512_p99_ms: f64,
    /// A full cycle (quotas, fair share, preemption, backfill, explanations for every job).
    pub cycle_ms: f64,
    pub cycle: CycleRun,
    pub peak_rss_mib: Option<f64>,
    pub runs: Vec<PolicyRun>,
}

/// The synthetic fleet of the benchmark.
pub fn synthetic_fleet(nodes: usize) -> Fleet {
    let mut b = FleetBuilder::new();
    let h100 = b
        .model("H100", 81_559, Some(MigGeometry { slice_gb: 10 }))
        .expect("model");
    let a100 = b
        .model("A100-80GB", 81_920, Some(MigGeometry { slice_gb: 10 }))
        .expect("model");
    let l40s = b.model("L40S", 46_068, None).expect("model");
    let a10g = b.model("A10G", 23_028, None).expect("model");
    let models = [
        (h100, "p5", 98.32),
        (a100, "p4de", 40.97),
        (l40s, "g6e", 30.13),
        (a10g, "g5", 16.29),
    ];
    let zones = [
        ("aws", "us-east-1", "us-east-1a"),
        ("aws", "us-east-1", "us-east-1b"),
        ("gcp", "us-central1", "us-central1-a"),
        ("gcp", "us-central1", "us-central1-b"),
    ];
    let mut pools = Vec::new();
    for (provider, region, zone) in zones {
        for &(model, itype, price) in &models {
            for (cap, factor, suffix) in [
                (CapacityType::OnDemand, 1.0, "od"),
                (CapacityType::Spot, 0.4, "spot"),
            ] {
                let name = format!("{itype}-{suffix}");
                let pool = b
                    .pool(PoolSpec {
                        provider,
                        region,
                        zone,
                        name: &name,
                        instance_type: itype,
                        model: Some(model),
                        gpus_per_node: 8,
                        cpu_milli: 192_000,
                        mem_mib: 2 << 20,
                        capacity: cap,
                        price_per_hour: price * factor,
                    })
                    .expect("pool");
                pools.push((pool, model == h100 || model == a100));
            }
        }
    }
    for i in 0..nodes {
        let (pool, mig_capable) = pools[i % pools.len()];
        let k = i / pools.len();
        let leaf = format!("leaf-{}-{}", pool.0, k / 32);
        // One node in eight of the MIG-capable pools runs two GPUs in MIG mode.
        let mig = if mig_capable && k % 8 == 0 { 2 } else { 0 };
        b.node(pool, &format!("node-{i:05}"), Some(&leaf), None, mig)
            .expect("node");
    }
    b.build()
}

/// The seeded pending set of the benchmark.
pub fn pending_set(fleet: &Fleet, count: usize, seed: u64) -> Vec<JobRequest> {
    let mut rng = Rng::new(seed);
    let profiles =
        ["1g.10gb", "2g.20gb", "3g.40gb"].map(|p| MigProfile::parse(p).expect("profile"));
    (0..count)
        .map(|_| {
            let roll = rng.below(1000);
            let (nodes, gpu) = match roll {
                0..=599 => (1, GpuRequest::Whole(1)),
                600..=749 => (
                    1,
                    GpuRequest::Fraction([250, 500, 750][rng.below(3) as usize]),
                ),
                750..=849 => (1, GpuRequest::Mig(profiles[rng.below(3) as usize])),
                850..=994 => (1, GpuRequest::Whole([2, 4, 8][rng.below(3) as usize])),
                _ => (2 + rng.below(63) as u16, GpuRequest::Whole(8)),
            };
            let per_gpu = u32::from(gpu.gpu_count().max(1));
            let models = match rng.below(4) {
                0 => ModelChoice::AnyOf(vec![fleet.model_by_name("H100").expect("H100")]),
                1 => ModelChoice::Prefer(vec![
                    fleet.model_by_name("H100").expect("H100"),
                    fleet.model_by_name("A100-80GB").expect("A100"),
                ]),
                _ => ModelChoice::Any,
            };
            let models = if matches!(gpu, GpuRequest::Mig(_)) {
                ModelChoice::Any
            } else {
                models
            };
            JobRequest {
                nodes,
                gpu,
                cpu_milli: 8_000 * per_gpu,
                mem_mib: 65_536 * u64::from(per_gpu),
                vram_mib: 0,
                models,
                spot_ok: rng.below(2) == 0,
                max_price_per_hour: None,
                pools: None,
            }
        })
        .collect()
}

fn gang512() -> JobRequest {
    JobRequest {
        nodes: 64,
        gpu: GpuRequest::Whole(8),
        cpu_milli: 96_000,
        mem_mib: 1 << 20,
        spot_ok: true,
        ..JobRequest::default()
    }
}

fn run_policy(
    fleet: &Fleet,
    pending: &[JobRequest],
    policy: Policy,
    cfg: &SchedBenchConfig,
) -> PolicyRun {
    let mut cluster = Cluster::new(fleet.clone());
    let mut placer = Placer::new(policy);
    let mut latencies = Vec::with_capacity(pending.len());
    let (mut placed, mut decided_single) = (0usize, 0usize);
    let mut single_time = 0.0f64;
    let mut gang_times = Vec::new();
    let mut gang_placed = 0usize;
    let capacity = fleet.gpu_milli_capacity() as f64;
    let mut allocated = 0f64;
    let mut gangs_timed = false;
    for (i, job) in pending.iter().enumerate() {
        placer.observe(job);
        if job.nodes > 1 {
            // Gangs are placed too (they shape the load), but timed separately below.
            if let Ok(p) = placer.place(&cluster, job, i as u64) {
                cluster
                    .allocate(&p)
                    .expect("placement within free capacity");
                allocated += job.total_gpu_milli() as f64;
            }
            continue;
        }
        let t = Instant::now();
        let decision = placer.place(&cluster, job, i as u64);
        if let Ok(p) = &decision {
            cluster.allocate(p).expect("placement within free capacity");
            placed += 1;
            allocated += job.total_gpu_milli() as f64;
        }
        let dt = t.elapsed().as_secs_f64();
        single_time += dt;
        decided_single += 1;
        latencies.push(dt * 1e6);
        // Time 512-GPU gang decisions once, when half the GPUs are allocated: place, then give
        // the GPUs back so the load stays the same for the next sample.
        if !gangs_timed && allocated >= 0.5 * capacity {
            gangs_timed = true;
            let gang = gang512();
            for k in 0..cfg.gangs {
                let t = Instant::now();
                let d = placer.place(&cluster, &gang, k as u64);
                gang_times.push(t.elapsed().as_secs_f64() * 1e3);
                if let Ok(p) = d {
                    gang_placed += 1;
                    cluster.allocate(&p).expect("gang within free capacity");
                    cluster.release(&p).expect("release what was allocated");
                }
            }
        }
    }
    latencies.sort_by(f64::total_cmp);
    gang_times.sort_by(f64::total_cmp);
    let fleet_now = cluster.fleet();
    let free: u64 = fleet_now
        .nodes
        .iter()
        .flat_map(|n| n.gpus.iter())
        .map(|g| match g.mig {
            None => u64::from(g.milli_free),
            Some(m) => 1000 - u64::from(m.compute_used) * 1000 / 7,
        })
        .sum();
    PolicyRun {
        policy: policy.name().to_string(),
        placements_per_sec: decided_single as f64 / single_time.max(1e-9),
        decisions: decided_single,
        placed,
        p50_us: quantile(&latencies, 0.5),
        p99_us: quantile(&latencies, 0.99),
        gang512_p50_ms: quantile(&gang_times, 0.5),
        gang512_p99_ms: quantile(&gang_times, 0.99),
        gang512_placed: gang_placed,
        gang512_timed: gang_times.len(),
        gpu_allocated_pct: 100.0 * (capacity - free as f64) / capacity,
        node_classes_at_end: cluster.class_count(),
    }
}

/// What one cycle starts from: a fleet about half full of running work, 20 teams in 4 cohorts
/// with guarantees and borrowing, 3 priority classes, fair-share usage, time limits.
pub struct CycleWorld {
    pub cluster: Cluster,
    pub teams: Vec<crate::model::Team>,
    pub classes: Vec<crate::model::PriorityClass>,
    pub usage: Vec<f64>,
    pub running: Vec<crate::scheduler::cycle::RunningJob>,
    pub pending: Vec<crate::scheduler::cycle::PendingJob>,
}

/// The world `run_cycle_bench` and `run_eta_bench` start from, seeded.
pub fn cycle_world(fleet: &Fleet, pending: &[JobRequest], policy: Policy, seed: u64) -> CycleWorld {
    use crate::model::{default_classes, Quota, Team};
    use crate::scheduler::cycle::{PendingJob, RunningJob};
    let mut rng = Rng::new(seed ^ 0xC1C1E);
    let gpus = fleet.gpu_count() as u32;
    let teams: Vec<Team> = (0..20)
        .map(|i| Team {
            name: format!("team-{i:02}"),
            weight: 1.0 + (i % 3) as f64,
            quota: Some(Quota {
                guaranteed: gpus / 25,
                borrow_limit: gpus / 100,
                lend_limit: None,
                per_model: Vec::new(),
            }),
            cohort: Some(format!("cohort-{}", i % 4)),
        })
        .collect();
    let classes = default_classes();
    let usage: Vec<f64> = (0..teams.len()).map(|_| rng.unit() * 1e6).collect();
    let mut cluster = Cluster::new(fleet.clone());
    let mut placer = Placer::new(policy);
    let mut running = Vec::new();
    let capacity = fleet.gpu_milli_capacity();
    let mut allocated = 0u64;
    // Running load: a separate seeded set, placed until half the GPUs are busy.
    let load = pending_set(fleet, pending.len().max(1000), seed ^ 0x10AD);
    for (i, job) in load.iter().enumerate() {
        if allocated >= capacity / 2 {
            break;
        }
        if job.nodes > 1 {
            continue;
        }
        if let Ok(p) = placer.place(&cluster, job, i as u64) {
            cluster
                .allocate(&p)
                .expect("placement within free capacity");
            allocated += job.total_gpu_milli();
            running.push(RunningJob {
                id: 1_000_000_000 + i as u64,
                team: rng.below(teams.len() as u64) as usize,
                class: 1 + rng.below(2) as usize,
                started: 0.0,
                placement: p,
                preemptible: rng.below(4) != 0,
                last_checkpoint: Some(rng.unit() * 3600.0),
                time_limit_s: Some(3600.0 + rng.unit() * 86_400.0),
                borrowed: false,
                signal: "SIGTERM".to_string(),
                grace_s: 30.0,
            });
        }
    }
    let pending: Vec<PendingJob> = pending
        .iter()
        .enumerate()
        .map(|(i, job)| PendingJob {
            id: i as u64,
            team: rng.below(teams.len() as u64) as usize,
            class: match rng.below(10) {
                0 => 0,
                1..=3 => 1,
                _ => 2,
            },
            submitted: rng.unit() * 3600.0,
            request: job.clone(),
            alternatives: Vec::new(),
            held: rng.below(100) == 0,
            time_limit_s: Some(600.0 + rng.unit() * 86_400.0),
        })
        .collect();
    CycleWorld {
        cluster,
        teams,
        classes,
        usage,
        running,
        pending,
    }
}

/// One cycle over `pending` jobs on `cycle_world`'s fleet.
pub fn run_cycle_bench(
    fleet: &Fleet,
    pending: &[JobRequest],
    policy: Policy,
    seed: u64,
) -> CycleRun {
    use crate::scheduler::cycle::{run_cycle, CycleConfig, CycleInput, Decision};
    let w = cycle_world(fleet, pending, policy, seed);
    let config = CycleConfig::default();
    let input = CycleInput {
        now: 4000.0,
        cluster: &w.cluster,
        teams: &w.teams,
        classes: &w.classes,
        usage: &w.usage,
        pending: &w.pending,
        running: &w.running,
        config: &config,
    };
    let mut fresh = Placer::new(policy);
    let t = Instant::now();
    let out = run_cycle(&mut fresh, &input).expect("valid benchmark input");
    let cycle_ms = t.elapsed().as_secs_f64() * 1e3;
    let count = |f: &dyn Fn(&Decision) -> bool| out.decisions.iter().filter(|d| f(d)).count();
    CycleRun {
        pending: w.pending.len(),
        running: w.running.len(),
        teams: w.teams.len(),
        cycle_ms,
        starts: count(&|d| matches!(d, Decision::Start { .. })),
        preemptions: count(&|d| matches!(d, Decision::Preempt { .. })),
        reservations: count(&|d| matches!(d, Decision::Reserve { .. })),
        explanations: out.explanations.len(),
    }
}

/// `gantry bench sched --eta`: start estimates for every waiting job of `cycle_world`, the
/// scheduling cycle run forward within a time box, as the daemon's estimates worker runs it.
#[derive(Clone, Debug, Serialize)]
pub struct EtaRun {
    pub pending: usize,
    pub running: usize,
    /// The time box (ms) and the wall time taken (copying the present included).
    pub box_ms: f64,
    pub wall_ms: f64,
    pub copy_ms: f64,
    pub cycles: usize,
    /// Waiting jobs given a start, and how far ahead the run looked (hours).
    pub estimated: usize,
    pub looked_ahead_h: f64,
    pub stopped: String,
    pub peak_rss_mib: Option<f64>,
}

pub fn run_eta_bench(
    fleet: &Fleet,
    pending: &[JobRequest],
    policy: Policy,
    seed: u64,
    box_ms: f64,
) -> EtaRun {
    use crate::scheduler::cycle::CycleConfig;
    use crate::scheduler::forecast::{forward, Present, Reach};
    let w = cycle_world(fleet, pending, policy, seed);
    let mut rng = Rng::new(seed ^ 0xE7A);
    let now = 4000.0;
    // What is left of each job: a running one part of its time limit, a waiting one ten
    // minutes to twelve hours.
    let mut left: std::collections::HashMap<u64, f64> = std::collections::HashMap::new();
    for r in &w.running {
        left.insert(r.id, r.time_limit_s.unwrap_or(3600.0) * rng.unit());
    }
    for p in &w.pending {
        left.insert(p.id, 600.0 + rng.unit() * 12.0 * 3600.0);
    }
    let began = Instant::now();
    let present = Present {
        now,
        cluster: w.cluster.clone(),
        placer: Placer::new(policy),
        teams: w.teams.clone(),
        classes: w.classes.clone(),
        usage: w.usage.clone(),
        config: CycleConfig::default(),
        pending: w.pending.clone(),
        running: w.running.clone(),
        requeue: std::collections::HashMap::new(),
        arriving: Vec::new(),
    };
    let copy_ms = began.elapsed().as_secs_f64() * 1e3;
    let until = began + std::time::Duration::from_secs_f64(box_ms / 1e3);
    let ahead = forward(
        present,
        &|id| left.get(&id).copied().unwrap_or(3600.0),
        Reach::default(),
        &mut || Instant::now() >= until,
    )
    .expect("valid benchmark input");
    EtaRun {
        pending: w.pending.len(),
        running: w.running.len(),
        box_ms,
        wall_ms: began.elapsed().as_secs_f64() * 1e3,
        copy_ms,
        cycles: ahead.cycles,
        estimated: ahead.starts.len(),
        looked_ahead_h: (ahead.looked_to - now) / 3600.0,
        stopped: ahead.stopped.to_string(),
        peak_rss_mib: peak_rss_mib(),
    }
}

pub fn run(cfg: &SchedBenchConfig) -> SchedBenchReport {
    let fleet = synthetic_fleet(cfg.nodes);
    let pending = pending_set(&fleet, cfg.pending, cfg.seed);
    let main = run_policy(&fleet, &pending, cfg.policy, cfg);
    let base = run_policy(&fleet, &pending, cfg.baseline, cfg);
    let cycle = run_cycle_bench(&fleet, &pending, cfg.policy, cfg.seed);
    SchedBenchReport {
        nodes: cfg.nodes,
        gpus: fleet.gpu_count(),
        pending: cfg.pending,
        policy: main.policy.clone(),
        placements_per_sec: main.placements_per_sec,
        baseline_policy: base.policy.clone(),
        baseline_placements_per_sec: base.placements_per_sec,
        speed_vs_baseline: main.placements_per_sec / base.placements_per_sec.max(1e-9),
        p50_us: main.p50_us,
        p99_us: main.p99_us,
        gang512_p99_ms: main.gang512_p99_ms,
        cycle_ms: cycle.cycle_ms,
        cycle,
        peak_rss_mib: peak_rss_mib(),
        runs: vec![main, base],
    }
}
