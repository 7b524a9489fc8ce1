//! `gantry replay philly --eta`: how far off a start estimate is. At each submission, and every
//! ten minutes while anyone waits, the replay's own world is copied and run forward under its
//! own policy with no further arrivals, each run's end estimated instead of known; the start
//! each waiting job gets there is its estimate, judged against the start it really got.
//!
//! Two estimates of how long a run lasts, side by side, through the same forward run:
//! * gantry's (`durations`): the median of past runs of the same size in the VC that lasted
//!   longer than this one has so far (else the VC's), learnt only from runs that have ended;
//! * Slurm-style: each job runs to its time limit, as `squeue --start` assumes. Philly has no
//!   time limits, so each job is given the one a careful user would ask for — its true length
//!   rounded up to the next of 1 h, 2 h, 4 h, 8 h, 12 h, 1 d, 2 d, 3 d, 7 d, 14 d, 30 d. That
//!   knows each job's length to within its bucket, which gantry's never does;
//! * gantry's given the same limits: its history bounded by the limit, as the daemon bounds
//!   an estimate by a job's `time_limit` — both estimates then start from the same inputs.

use super::{Sim, SimJob};
use crate::scheduler::durations::{left_from, History};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};

/// How often the waiting jobs' estimates are made again.
pub const EVERY_S: f64 = 600.0;

/// How far a forward run looks: a job not started by then is estimated to start then.
const HORIZON_S: f64 = 30.0 * 86_400.0;

/// Events one forward run may take (a bound on its cost); a run cut there leaves the jobs it
/// has not started at the horizon.
const MAX_EVENTS: usize = 20_000;

/// What a job nobody has seen the like of is taken to run, in all.
const UNKNOWN_S: f64 = 3_600.0;

/// The time limits a Slurm user picks from.
const LIMITS_S: [f64; 11] = [
    3_600.0,
    7_200.0,
    14_400.0,
    28_800.0,
    43_200.0,
    86_400.0,
    172_800.0,
    259_200.0,
    604_800.0,
    1_209_600.0,
    2_592_000.0,
];

/// The time limit a careful user asks for a run of `seconds`.
pub fn slurm_limit(seconds: f64) -> f64 {
    LIMITS_S
        .iter()
        .copied()
        .find(|&l| l >= seconds)
        .unwrap_or_else(|| (seconds / 86_400.0).ceil() * 86_400.0)
}

/// One estimate of one job's start: when it was made, from which estimate, and the truth.
#[derive(Clone, Copy, Debug)]
pub struct Estimate {
    pub at: f64,
    pub submitted: f64,
    pub gantry: f64,
    /// gantry's estimate bounded by the Slurm-style limit.
    pub limited: f64,
    pub slurm: f64,
    pub actual: f64,
    pub at_submission: bool,
}

/// A VC's estimates and what making them cost.
#[derive(Clone, Debug, Default)]
pub struct VcEta {
    pub estimates: Vec<Estimate>,
    /// Jobs estimated that never started within the replay (not judged).
    pub never_started: usize,
    pub forward_runs: u64,
    pub forward_events: u64,
    /// Forward runs cut at `MAX_EVENTS`.
    pub cut: u64,
}

/// The kind of run a limit makes: its GPU count and the limit it asked.
fn limit_key(job: &SimJob) -> (u32, u64) {
    (job.gpus, (slurm_limit(job.duration) * 1e3) as u64)
}

/// One job's three estimates made at `at`, before the truth is known.
struct Made {
    job: usize,
    at: f64,
    gantry: f64,
    limited: f64,
    slurm: f64,
    at_submission: bool,
}

/// What an estimate was not sure of: filled as the replay goes.
pub(super) struct EtaLog {
    /// Runs that ended, by GPU count, and all of the VC's.
    by_gpus: HashMap<u32, History>,
    /// Runs that ended, by GPU count and the time limit they asked (in milliseconds, a key).
    by_limit: HashMap<(u32, u64), History>,
    all: History,
    next_tick: f64,
    made: Vec<Made>,
    /// Every start of every job, in order: an estimate made at `at` is judged against the
    /// job's first start from `at` on (a preempted job starts again).
    starts: HashMap<usize, Vec<f64>>,
    out: VcEta,
}

impl EtaLog {
    pub fn new() -> EtaLog {
        EtaLog {
            by_gpus: HashMap::new(),
            by_limit: HashMap::new(),
            all: History::default(),
            next_tick: EVERY_S,
            made: Vec::new(),
            starts: HashMap::new(),
            out: VcEta::default(),
        }
    }

    /// A run ended: its length is history.
    pub fn ended(&mut self, job: &SimJob) {
        self.by_limit
            .entry(limit_key(job))
            .or_default()
            .record(job.duration);
        self.by_gpus
            .entry(job.gpus)
            .or_default()
            .record(job.duration);
        self.all.record(job.duration);
    }

    /// Notes the starts the scheduler just made.
    pub fn scheduled(&mut self, sim: &Sim) {
        for &j in &sim.running {
            if sim.jobs[j].running_since == Some(sim.now) {
                let starts = self.starts.entry(j).or_default();
                if starts.last() != Some(&sim.now) {
                    starts.push(sim.now);
                }
            }
        }
    }

    /// Estimates for every waiting job at each ten-minute mark before `t` (the next event;
    /// nothing changes in between).
    pub fn ticks_before(&mut self, sim: &Sim, t: f64) {
        while self.next_tick < t {
            if !sim.pending.is_empty() {
                let waiting: Vec<usize> = sim.pending.iter().map(|k| k.2).collect();
                self.estimate(sim, self.next_tick, &waiting, false);
            }
            self.next_tick += EVERY_S;
        }
    }

    /// Estimates for the jobs just submitted, before the scheduler has seen them.
    pub fn submitted(&mut self, sim: &Sim, jobs: &[usize]) {
        if !jobs.is_empty() {
            self.estimate(sim, sim.now, jobs, true);
        }
    }

    fn estimate(&mut self, sim: &Sim, at: f64, jobs: &[usize], at_submission: bool) {
        let (by_gpus, by_limit, all) = (&self.by_gpus, &self.by_limit, &self.all);
        let none = History::default();
        let history = |j: &SimJob, ran: f64| {
            let own = by_gpus.get(&j.gpus).unwrap_or(&none);
            left_from([own, all], ran, UNKNOWN_S).0.mid
        };
        let limit = |j: &SimJob, ran: f64| (slurm_limit(j.duration) - ran).max(1.0);
        let gantry = forward(&mut self.out, sim, at, jobs, &history);
        let limited = forward(&mut self.out, sim, at, jobs, &|j: &SimJob, ran: f64| {
            let asked = by_limit.get(&limit_key(j)).unwrap_or(&none);
            let own = by_gpus.get(&j.gpus).unwrap_or(&none);
            let mid = left_from([asked, own, all], ran, UNKNOWN_S).0.mid;
            mid.min(limit(j, ran))
        });
        let slurm = forward(&mut self.out, sim, at, jobs, &limit);
        for (i, &job) in jobs.iter().enumerate() {
            self.made.push(Made {
                job,
                at,
                gantry: gantry[i],
                limited: limited[i],
                slurm: slurm[i],
                at_submission,
            });
        }
    }

    /// The estimates against the starts the jobs got.
    pub fn judged(mut self, jobs: &[SimJob]) -> VcEta {
        for m in std::mem::take(&mut self.made) {
            let next = self
                .starts
                .get(&m.job)
                .and_then(|s| s.iter().copied().find(|&t| t >= m.at));
            let Some(actual) = next else {
                self.out.never_started += usize::from(m.at_submission);
                continue;
            };
            self.out.estimates.push(Estimate {
                at: m.at,
                submitted: jobs[m.job].submit,
                gantry: m.gantry,
                limited: m.limited,
                slurm: m.slurm,
                actual,
                at_submission: m.at_submission,
            });
        }
        self.out
    }
}

/// Copies the world at `at` (no event between `sim.now` and `at`), gives every live job
/// the run time `left` estimates (given how long it has run), runs the policy forward
/// without arrivals and says when each of `jobs` first starts.
fn forward(
    out: &mut VcEta,
    sim: &Sim,
    at: f64,
    jobs: &[usize],
    left: &dyn Fn(&SimJob, f64) -> f64,
) -> Vec<f64> {
    let live: Vec<usize> = sim
        .running
        .iter()
        .copied()
        .chain(sim.pending.iter().map(|k| k.2))
        .collect();
    let index: HashMap<usize, usize> = live.iter().enumerate().map(|(i, &j)| (j, i)).collect();
    let mut f = Sim {
        policy: sim.policy,
        overhead: sim.overhead,
        cluster: sim.cluster.clone(),
        placer: sim.placer.clone(),
        jobs: live.iter().map(|&j| sim.jobs[j].clone()).collect(),
        pending: BTreeSet::new(),
        running: (0..sim.running.len()).collect(),
        total_gpus: sim.total_gpus,
        busy_gpu_s: 0.0,
        preemptions: 0,
        now: sim.now,
    };
    f.advance(at);
    for j in &mut f.jobs {
        let ran = j.attained / f64::from(j.gpus.max(1));
        j.remaining = left(j, ran);
        j.first_start = None;
    }
    for i in sim.running.len()..live.len() {
        let k = f.key(i);
        f.pending.insert(k);
    }
    let ours: Vec<usize> = jobs.iter().filter_map(|j| index.get(j).copied()).collect();
    let mut events = 0;
    loop {
        f.schedule();
        if ours.iter().all(|&j| f.jobs[j].first_start.is_some()) {
            break;
        }
        let next = [f.next_completion(), f.next_crossing()]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp);
        let Some(t) = next.filter(|&t| t <= at + HORIZON_S) else {
            break;
        };
        if events == MAX_EVENTS {
            out.cut += 1;
            break;
        }
        events += 1;
        f.advance(t);
        f.end_done();
    }
    out.forward_runs += 1;
    out.forward_events += events as u64;
    ours.iter()
        .map(|&j| f.jobs[j].first_start.unwrap_or(at + HORIZON_S))
        .collect()
}

/// One row of the error table: estimates of one kind, judged.
#[derive(Clone, Debug, Serialize)]
pub struct ErrorRow {
    pub estimates: String,
    pub n: usize,
    pub gantry_p50_s: f64,
    pub gantry_p90_s: f64,
    /// Share of estimates within ±10 minutes of the start.
    pub gantry_within_10min: f64,
    /// gantry's history bounded by the limits the Slurm-style estimate is given.
    pub limited_p50_s: f64,
    pub limited_p90_s: f64,
    pub limited_within_10min: f64,
    pub slurm_p50_s: f64,
    pub slurm_p90_s: f64,
    pub slurm_within_10min: f64,
}

/// Every VC's estimates, judged: the error table.
#[derive(Clone, Debug, Serialize)]
pub struct EtaReport {
    pub rows: Vec<ErrorRow>,
    pub never_started: usize,
    pub forward_runs: u64,
    pub forward_events: u64,
    pub cut: u64,
}

impl EtaReport {
    pub fn of(vcs: &[&VcEta]) -> EtaReport {
        let all: Vec<&Estimate> = vcs.iter().flat_map(|v| &v.estimates).collect();
        let waited = |e: &&&Estimate| e.actual - e.submitted >= 1.0;
        let row = |name: &str, es: &[&&Estimate]| {
            let errors = |of: fn(&Estimate) -> f64| {
                let mut v: Vec<f64> = es.iter().map(|e| (of(e) - e.actual).abs()).collect();
                v.sort_by(f64::total_cmp);
                v
            };
            let g = errors(|e| e.gantry);
            let l = errors(|e| e.limited);
            let s = errors(|e| e.slurm);
            let within = |v: &[f64]| {
                v.iter().filter(|&&x| x <= 600.0).count() as f64 / v.len().max(1) as f64
            };
            ErrorRow {
                estimates: name.to_string(),
                n: es.len(),
                gantry_p50_s: crate::stats::quantile(&g, 0.5),
                gantry_p90_s: crate::stats::quantile(&g, 0.9),
                gantry_within_10min: within(&g),
                limited_p50_s: crate::stats::quantile(&l, 0.5),
                limited_p90_s: crate::stats::quantile(&l, 0.9),
                limited_within_10min: within(&l),
                slurm_p50_s: crate::stats::quantile(&s, 0.5),
                slurm_p90_s: crate::stats::quantile(&s, 0.9),
                slurm_within_10min: within(&s),
            }
        };
        let at_sub: Vec<&&Estimate> = all.iter().filter(|e| e.at_submission).collect();
        let at_sub_waited: Vec<&&Estimate> = at_sub.iter().copied().filter(waited).collect();
        let later: Vec<&&Estimate> = all.iter().filter(|e| !e.at_submission).collect();
        EtaReport {
            rows: vec![
                row("at submission, every job", &at_sub),
                row("at submission, jobs that waited", &at_sub_waited),
                row("every 10 min while waiting", &later),
            ],
            never_started: vcs.iter().map(|v| v.never_started).sum(),
            forward_runs: vcs.iter().map(|v| v.forward_runs).sum(),
            forward_events: vcs.iter().map(|v| v.forward_events).sum(),
            cut: vcs.iter().map(|v| v.cut).sum(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_careful_user_rounds_a_run_up_to_a_usual_limit() {
        assert_eq!(slurm_limit(66.0), 3_600.0);
        assert_eq!(slurm_limit(3_600.0), 3_600.0);
        assert_eq!(slurm_limit(3_601.0), 7_200.0);
        assert_eq!(slurm_limit(40.0 * 86_400.0), 40.0 * 86_400.0);
    }
}
