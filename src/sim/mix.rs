//! The seeded mixed workload of `gantry sim`: the same jobs are offered to every setup.
//!
//! The offered load is a fraction of the fleet's start size in *useful* GPUs (GPUs doing the
//! work the job exists for), split by kind in GPU-hours. The mix and its numbers are documented
//! in docs/measured.md ("The utilization claim"); change them here and there together.
//! * **training** gangs — 1, 2 or 4 nodes × 8 H100/H200, 6–20 h of work, production class,
//!   checkpoint every 30 min, spot allowed, preemptible; arrive around the clock.
//! * **experiment** sweeps — bursts of 4–16 jobs of 1–8 GPUs (most 1–2), 20 min–4 h each,
//!   experiment class, spot allowed, half checkpoint every 15 min; weekdays 08–20 h mostly.
//! * **inference** services — half on a MIG 3g.40gb slice, half on half a GPU; they serve all
//!   week, serving class, never preempted. Useful work is the share they need, not the GPU
//!   they are given.
//! * **notebooks** — one GPU each, opened on weekday mornings, busy (60% of a GPU) for 1–3 h,
//!   then left open and idle until the user closes them 4–10 h after opening.

use crate::model::{Fleet, GpuRequest, JobRequest, MigProfile, ModelChoice, ModelId, Team};
use crate::scheduler::rng::Rng;
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Kind {
    Training,
    Experiment,
    Inference,
    Notebook,
}

impl Kind {
    pub const ALL: [Kind; 4] = [
        Kind::Training,
        Kind::Experiment,
        Kind::Inference,
        Kind::Notebook,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Kind::Training => "training",
            Kind::Experiment => "experiment",
            Kind::Inference => "inference",
            Kind::Notebook => "notebook",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimJob {
    pub kind: Kind,
    pub team: usize,
    /// Index into the default priority classes (serving, production, experiment).
    pub class: usize,
    pub arrive: f64,
    /// What a scheduler with fractional GPUs places.
    pub request: JobRequest,
    /// What a whole-GPU-only scheduler places (a share becomes one whole GPU).
    pub whole: JobRequest,
    /// Seconds the job must run (for services and notebooks: until they are closed).
    pub work_s: f64,
    /// Busy for this long after each start, then idle (notebooks); `work_s` otherwise.
    pub active_s: f64,
    pub checkpoint_s: Option<f64>,
    pub preemptible: bool,
    /// Useful milli-GPU while busy, for the whole gang.
    pub useful_milli: u32,
}

#[derive(Clone, Debug)]
pub struct MixConfig {
    pub days: f64,
    /// Offered useful load as a fraction of the fleet's GPUs at start size.
    pub load: f64,
    pub seed: u64,
}

/// GPU-hour shares of the offered useful load, by kind (sum 1).
pub const SHARES: [(Kind, f64); 4] = [
    (Kind::Training, 0.55),
    (Kind::Experiment, 0.32),
    (Kind::Inference, 0.08),
    (Kind::Notebook, 0.05),
];

const HOUR: f64 = 3600.0;
const DAY: f64 = 24.0 * HOUR;
pub const SERVING: usize = 0;
pub const PRODUCTION: usize = 1;
pub const EXPERIMENT: usize = 2;

fn models(fleet: &Fleet, names: &[&str]) -> ModelChoice {
    let ids: Vec<ModelId> = names
        .iter()
        .filter_map(|n| fleet.model_by_name(n))
        .collect();
    if ids.is_empty() {
        ModelChoice::Any
    } else {
        ModelChoice::AnyOf(ids)
    }
}

fn exp(rng: &mut Rng, rate: f64) -> f64 {
    -(1.0 - rng.unit()).ln() / rate
}

fn uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    lo + (hi - lo) * rng.unit()
}

fn log_uniform(rng: &mut Rng, lo: f64, hi: f64) -> f64 {
    (lo.ln() + (hi.ln() - lo.ln()) * rng.unit()).exp()
}

fn weekday_hours(t: f64, from: f64, to: f64) -> bool {
    let day = (t / DAY).floor() as i64;
    let h = (t - day as f64 * DAY) / HOUR;
    day.rem_euclid(7) < 5 && (from..to).contains(&h)
}

/// Arrival times of a Poisson process whose rate is `rate` inside `window` and `off` outside.
fn arrivals(
    rng: &mut Rng,
    end: f64,
    rate: f64,
    off: f64,
    window: impl Fn(f64) -> bool,
) -> Vec<f64> {
    // Thinning: draw at the peak rate, keep with the rate that applies at that moment.
    let peak = rate.max(off);
    let mut out = Vec::new();
    if peak <= 0.0 {
        return out;
    }
    let mut t = exp(rng, peak);
    while t < end {
        let r = if window(t) { rate } else { off };
        if rng.unit() < r / peak {
            out.push(t);
        }
        t += exp(rng, peak);
    }
    out
}

/// Which team plays which part: teams with a guarantee, largest first; the largest trains,
/// the two largest run experiments and notebooks, the smallest serves.
fn roles(teams: &[Team]) -> (usize, usize, usize) {
    let mut q: Vec<(usize, u32)> = teams
        .iter()
        .enumerate()
        .filter_map(|(i, t)| t.quota.as_ref().map(|q| (i, q.guaranteed)))
        .collect();
    q.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let pick = |k: usize| q.get(k).or(q.last()).map_or(0, |x| x.0);
    (pick(0), pick(1), pick(q.len().saturating_sub(1).min(2)))
}

/// The week's jobs, sorted by arrival. Deterministic for a seed.
pub fn generate(fleet: &Fleet, teams: &[Team], cfg: &MixConfig) -> Vec<SimJob> {
    let mut rng = Rng::new(cfg.seed ^ 0x6d69_785f_7369_6d31);
    let end = cfg.days * DAY;
    let base = fleet
        .nodes
        .iter()
        .filter(|n| n.health != crate::model::Health::Down)
        .map(|n| n.gpus.len())
        .sum::<usize>() as f64;
    let useful = base * cfg.load;
    let share = |k: Kind| SHARES.iter().find(|s| s.0 == k).map_or(0.0, |s| s.1) * useful;
    let (big, second, serving) = roles(teams);
    let mut jobs = Vec::new();

    // Training: mean gang 2.05 nodes × 8 GPUs, mean work 13 h.
    let big_models = models(fleet, &["H100", "H200"]);
    let rate = share(Kind::Training) / (8.0 * 2.05 * 13.0) / HOUR;
    for t in arrivals(&mut rng, end, rate, rate, |_| true) {
        let r = rng.unit();
        let nodes = if r < 0.25 {
            1
        } else if r < 0.85 {
            2
        } else {
            4
        };
        let request = JobRequest {
            nodes,
            gpu: GpuRequest::Whole(8),
            cpu_milli: 64_000,
            mem_mib: 512 * 1024,
            models: big_models.clone(),
            spot_ok: true,
            ..JobRequest::default()
        };
        let work = uniform(&mut rng, 6.0, 20.0) * HOUR;
        jobs.push(SimJob {
            kind: Kind::Training,
            team: big,
            class: PRODUCTION,
            arrive: t,
            whole: request.clone(),
            request,
            work_s: work,
            active_s: work,
            checkpoint_s: Some(30.0 * 60.0),
            preemptible: true,
            useful_milli: u32::from(nodes) * 8000,
        });
    }

    // Experiment sweeps: mean 10 jobs × 2.35 GPUs × 1.47 h; 85% of sweeps in weekday hours.
    let sweep_gpu_h = 10.0 * 2.35 * 1.47;
    let per_week = share(Kind::Experiment) * 168.0 / sweep_gpu_h;
    let (peak, off) = (
        0.85 * per_week / 60.0 / HOUR,
        0.15 * per_week / 108.0 / HOUR,
    );
    let small_models = models(fleet, &["H100", "A100-80GB", "L40S", "H200"]);
    for t in arrivals(&mut rng, end, peak, off, |t| weekday_hours(t, 8.0, 20.0)) {
        let n = 4 + rng.below(13);
        let team = if rng.unit() < 0.5 { big } else { second };
        let r = rng.unit();
        let g: u8 = if r < 0.5 {
            1
        } else if r < 0.75 {
            2
        } else if r < 0.9 {
            4
        } else {
            8
        };
        let checkpoints = rng.unit() < 0.5;
        for i in 0..n {
            let request = JobRequest {
                gpu: GpuRequest::Whole(g),
                cpu_milli: 8_000 * u32::from(g),
                mem_mib: 64 * 1024 * u64::from(g),
                models: if g == 8 {
                    big_models.clone()
                } else {
                    small_models.clone()
                },
                spot_ok: true,
                ..JobRequest::default()
            };
            let work = log_uniform(&mut rng, 20.0 * 60.0, 4.0 * HOUR);
            jobs.push(SimJob {
                kind: Kind::Experiment,
                team,
                class: EXPERIMENT,
                arrive: t + i as f64,
                whole: request.clone(),
                request,
                work_s: work,
                active_s: work,
                checkpoint_s: checkpoints.then_some(15.0 * 60.0),
                preemptible: true,
                useful_milli: u32::from(g) * 1000,
            });
        }
    }

    // Inference services: mean useful share 0.46 GPU, serving all along.
    let services = (share(Kind::Inference) / 0.464).round().max(1.0) as usize;
    let mig_models = models(fleet, &["A100-80GB", "H100"]);
    let share_models = models(fleet, &["A10G", "L40S", "A100-80GB"]);
    for i in 0..services {
        let mig = i % 2 == 0;
        let (gpu, milli, choice) = if mig {
            let p = MigProfile {
                compute: 3,
                memory_gb: 40,
            };
            (GpuRequest::Mig(p), 3000 / 7, mig_models.clone())
        } else {
            (GpuRequest::Fraction(500), 500, share_models.clone())
        };
        let request = JobRequest {
            gpu,
            cpu_milli: 4_000,
            mem_mib: 32 * 1024,
            vram_mib: if mig { 0 } else { 20 * 1024 },
            models: choice,
            ..JobRequest::default()
        };
        let whole = JobRequest {
            gpu: GpuRequest::Whole(1),
            vram_mib: 40 * 1024,
            models: models(fleet, &["A100-80GB", "H100", "L40S"]),
            ..request.clone()
        };
        jobs.push(SimJob {
            kind: Kind::Inference,
            team: serving,
            class: SERVING,
            arrive: uniform(&mut rng, 0.0, 1800.0),
            request,
            whole,
            work_s: end,
            active_s: end,
            checkpoint_s: None,
            preemptible: false,
            useful_milli: milli,
        });
    }

    // Notebooks: busy 60% of a GPU for a mean 2 h; opened weekday mornings.
    let per_week = share(Kind::Notebook) * 168.0 / (0.6 * 2.0);
    let rate = per_week / 20.0 / HOUR;
    let nb_models = models(fleet, &["A10G", "L40S", "A100-80GB"]);
    for t in arrivals(&mut rng, end, rate, 0.0, |t| weekday_hours(t, 8.0, 12.0)) {
        let request = JobRequest {
            gpu: GpuRequest::Whole(1),
            cpu_milli: 8_000,
            mem_mib: 64 * 1024,
            models: nb_models.clone(),
            ..JobRequest::default()
        };
        let active = uniform(&mut rng, 1.0, 3.0) * HOUR;
        let open = uniform(&mut rng, 4.0, 10.0) * HOUR;
        jobs.push(SimJob {
            kind: Kind::Notebook,
            team: if rng.unit() < 0.5 { big } else { second },
            class: EXPERIMENT,
            arrive: t,
            whole: request.clone(),
            request,
            work_s: open,
            active_s: active,
            checkpoint_s: None,
            preemptible: false,
            useful_milli: 600,
        });
    }
    jobs.sort_by(|a, b| a.arrive.total_cmp(&b.arrive));
    jobs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fleet::{fleet_of, parse, teams_of, DEFAULT_FLEET};

    #[test]
    fn the_mix_is_seeded_and_offers_the_load_asked_for() {
        let cfg = parse("default", DEFAULT_FLEET).unwrap();
        let (fleet, teams) = (fleet_of(&cfg), teams_of(&cfg));
        let mc = MixConfig {
            days: 7.0,
            load: 0.8,
            seed: 7,
        };
        let a = generate(&fleet, &teams, &mc);
        let b = generate(&fleet, &teams, &mc);
        assert_eq!(a.len(), b.len());
        assert!(a
            .iter()
            .zip(&b)
            .all(|(x, y)| x.arrive == y.arrive && x.work_s == y.work_s));
        let useful_h: f64 = a
            .iter()
            .map(|j| f64::from(j.useful_milli) / 1000.0 * j.active_s.min(7.0 * DAY) / HOUR)
            .sum();
        let offered = fleet.gpu_count() as f64 * 0.8 * 168.0;
        let ratio = useful_h / offered;
        assert!(
            (0.75..1.25).contains(&ratio),
            "offered {useful_h:.0} of {offered:.0} GPU-h"
        );
        for k in Kind::ALL {
            assert!(a.iter().any(|j| j.kind == k), "{k:?} missing");
        }
        assert!(a
            .iter()
            .all(|j| j.request.validate().is_ok() && j.whole.validate().is_ok()));
    }
}
