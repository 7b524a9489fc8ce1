//! The Microsoft Philly trace (2017), job level, replayed per virtual cluster (VC): each VC is
//! its own cluster of 8-GPU nodes; jobs arrive at their timestamp asking for `num_gpus` for
//! `duration` seconds of run time.
//!
//! Queue policies, side by side, all placing through the same scheduler core:
//! * `fifo` — strict first come, first served: the head of the queue blocks everyone behind it;
//! * `sjf` — shortest job first, non-preemptive (reads durations: a baseline, not deployable);
//! * `srtf` — shortest remaining time first, preemptive (reads durations: a baseline);
//! * `gantry` — discretized least-attained-service: a job's level rises as it accumulates
//!   GPU-time (thresholds 1, 10, 100 GPU-hours); lower levels go first, FIFO within a level;
//!   a waiting job may preempt running jobs of a higher level, which resume from their
//!   checkpoint after a restore overhead. It never reads durations.

mod eta;

use super::csv::{Fields, Table, TraceError};
use crate::model::{CapacityType, FleetBuilder, GpuRequest, JobRequest, PoolSpec};
use crate::scheduler::{Cluster, Placer, Policy};
pub use eta::{slurm_limit, ErrorRow, EtaReport, VcEta};
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::Path;
use std::str::FromStr;

#[derive(Clone, Debug, PartialEq)]
pub struct PhillyJob {
    /// Submission, seconds since the Unix epoch (UTC).
    pub submit: i64,
    pub duration: f64,
    pub gpus: u32,
    pub vc: String,
    pub line: usize,
}

/// Seconds since 1970-01-01 for a civil date (proleptic Gregorian), after Howard Hinnant.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Parses `YYYY-MM-DD HH:MM:SS` or `YYYY-MM-DD` (UTC).
pub fn parse_time(text: &str) -> Option<i64> {
    let (date, time) = text
        .trim()
        .split_once(' ')
        .unwrap_or((text.trim(), "00:00:00"));
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, mo, da) = (d.next()??, d.next()??, d.next()??);
    let mut t = time.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (t.next()??, t.next()??, t.next()??);
    let valid = (1..=12).contains(&mo) && (1..=31).contains(&da) && h < 24 && mi < 60 && s < 61;
    valid.then(|| days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + s)
}

pub fn load_jobs(path: &Path) -> Result<Vec<PhillyJob>, TraceError> {
    let table = Table::read(path)?;
    let cols = table.columns(
        &["timestamp", "duration", "num_gpus", "cluster"],
        &["gpu_time"],
    )?;
    let mut jobs = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let f = Fields {
            file: &table.file,
            row,
            columns: &cols,
        };
        let ts = f.text("timestamp").unwrap_or("");
        let submit = parse_time(ts).ok_or_else(|| {
            f.error(
                "timestamp",
                format!("`{ts}` is not a time; expected YYYY-MM-DD HH:MM:SS"),
            )
        })?;
        let dtext = f.text("duration").unwrap_or("");
        let duration: f64 = dtext
            .parse()
            .ok()
            .filter(|d: &f64| d.is_finite() && *d >= 0.0 && *d <= 1e9)
            .ok_or_else(|| {
                f.error(
                    "duration",
                    format!("`{dtext}` is not a number of seconds in 0..=1e9"),
                )
            })?;
        let gpus = f.uint("num_gpus", 4096)? as u32;
        let vc = f.text("cluster").unwrap_or("").to_string();
        if vc.is_empty() {
            return Err(f.error("cluster", "is empty; name the virtual cluster".to_string()));
        }
        jobs.push(PhillyJob {
            submit,
            duration,
            gpus,
            vc,
            line: row.line,
        });
    }
    Ok(jobs)
}

pub fn load_vcs(path: &Path) -> Result<Vec<(String, u32)>, TraceError> {
    let table = Table::read(path)?;
    let cols = table.columns(&["vc", "node num"], &[])?;
    let mut vcs = Vec::new();
    for row in &table.rows {
        let f = Fields {
            file: &table.file,
            row,
            columns: &cols,
        };
        let nodes = f.uint("node num", 100_000)? as u32;
        if nodes == 0 {
            return Err(f.error("node num", "is 0; a VC needs at least one node".to_string()));
        }
        vcs.push((f.text("vc").unwrap_or("").to_string(), nodes));
    }
    Ok(vcs)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueuePolicy {
    Fifo,
    Sjf,
    Srtf,
    Gantry,
}

impl QueuePolicy {
    pub const ALL: [QueuePolicy; 4] = [
        QueuePolicy::Fifo,
        QueuePolicy::Sjf,
        QueuePolicy::Srtf,
        QueuePolicy::Gantry,
    ];
    pub fn name(self) -> &'static str {
        match self {
            QueuePolicy::Fifo => "fifo",
            QueuePolicy::Sjf => "sjf",
            QueuePolicy::Srtf => "srtf",
            QueuePolicy::Gantry => "gantry",
        }
    }
    fn preemptive(self) -> bool {
        matches!(self, QueuePolicy::Srtf | QueuePolicy::Gantry)
    }
}

impl fmt::Display for QueuePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for QueuePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        QueuePolicy::ALL
            .into_iter()
            .find(|p| p.name() == s.trim().to_ascii_lowercase())
            .ok_or_else(|| format!("unknown policy `{s}`; allowed: fifo, sjf, srtf, gantry"))
    }
}

/// Attained-service levels of the gantry policy, in GPU-seconds.
const LAS_LEVELS: [f64; 3] = [3_600.0, 36_000.0, 360_000.0];

fn las_level(attained: f64) -> u8 {
    LAS_LEVELS.iter().filter(|&&t| attained >= t).count() as u8
}

/// One job inside a VC simulation.
#[derive(Clone, Debug)]
struct SimJob {
    submit: f64,
    duration: f64,
    gpus: u32,
    request: JobRequest,
    /// Seconds of work left (grows by the restore overhead on each resume after preemption).
    remaining: f64,
    attained: f64,
    running_since: Option<f64>,
    placement: Option<crate::model::Placement>,
    started_once: bool,
    /// When it first started (the start an estimate is judged against).
    first_start: Option<f64>,
    preempted: u32,
    finish: Option<f64>,
}

/// A gang shape for `gpus` on 8-GPU nodes: the fewest nodes with an equal share each.
pub fn gang_shape(gpus: u32) -> (u16, u8) {
    if gpus <= 8 {
        return (1, gpus.max(1) as u8);
    }
    let mut nodes = gpus.div_ceil(8);
    while !gpus.is_multiple_of(nodes) || gpus / nodes > 8 {
        nodes += 1;
    }
    (nodes as u16, (gpus / nodes) as u8)
}

/// What a queue policy achieved on a set of jobs.
#[derive(Clone, Debug, Serialize, Default)]
pub struct QueueMetrics {
    pub jobs: usize,
    pub avg_jct_s: f64,
    pub avg_queue_s: f64,
    pub p99_queue_s: f64,
    pub gpu_util_pct: f64,
    pub makespan_s: f64,
    pub preemptions: u64,
    /// Mean duration: the average JCT with zero queueing.
    pub lower_bound_jct_s: f64,
}

#[derive(Clone, Debug, Serialize, Default)]
pub struct VcResult {
    pub vc: String,
    pub nodes: u32,
    #[serde(flatten)]
    pub metrics: QueueMetrics,
    /// Every finished job's queueing delay, for overall percentiles.
    #[serde(skip)]
    pub queue_samples: Vec<f64>,
    /// Its start estimates, judged (`--eta`).
    #[serde(skip)]
    pub eta: Option<VcEta>,
}

struct Sim {
    policy: QueuePolicy,
    overhead: f64,
    cluster: Cluster,
    placer: Placer,
    jobs: Vec<SimJob>,
    pending: BTreeSet<(u64, u64, usize)>,
    running: Vec<usize>,
    total_gpus: u32,
    busy_gpu_s: f64,
    preemptions: u64,
    now: f64,
}

/// Orders f64 keys in a BTreeSet (all keys here are finite and ≥ 0).
fn ord(x: f64) -> u64 {
    x.max(0.0).to_bits()
}

impl Sim {
    fn key(&self, j: usize) -> (u64, u64, usize) {
        let job = &self.jobs[j];
        match self.policy {
            QueuePolicy::Fifo => (0, ord(job.submit), j),
            QueuePolicy::Sjf => (ord(job.duration), ord(job.submit), j),
            QueuePolicy::Srtf => (ord(job.remaining), ord(job.submit), j),
            QueuePolicy::Gantry => (u64::from(las_level(job.attained)), ord(job.submit), j),
        }
    }

    /// Brings running jobs' progress up to `t`.
    fn advance(&mut self, t: f64) {
        let dt = t - self.now;
        if dt > 0.0 {
            for &j in &self.running {
                let job = &mut self.jobs[j];
                job.remaining -= dt;
                job.attained += dt * f64::from(job.gpus);
                self.busy_gpu_s += dt * f64::from(job.gpus);
            }
        }
        self.now = t;
    }

    fn start(&mut self, j: usize, placement: crate::model::Placement) {
        self.cluster
            .allocate(&placement)
            .expect("placement within free capacity");
        let job = &mut self.jobs[j];
        if job.started_once {
            job.remaining += self.overhead;
        }
        job.started_once = true;
        job.first_start.get_or_insert(self.now);
        job.running_since = Some(self.now);
        job.placement = Some(placement);
        self.running.push(j);
    }

    fn stop(&mut self, j: usize) {
        let job = &mut self.jobs[j];
        if let Some(p) = job.placement.take() {
            self.cluster
                .release(&p)
                .expect("release what was allocated");
        }
        job.running_since = None;
        self.running.retain(|&r| r != j);
    }

    /// When the next running job ends.
    fn next_completion(&self) -> Option<f64> {
        self.running
            .iter()
            .map(|&j| self.now + self.jobs[j].remaining)
            .min_by(f64::total_cmp)
    }

    /// gantry re-decides when a running job crosses into the next attained-service level
    /// (while anyone waits).
    fn next_crossing(&self) -> Option<f64> {
        if self.policy != QueuePolicy::Gantry || self.pending.is_empty() {
            return None;
        }
        self.running
            .iter()
            .filter_map(|&j| {
                let job = &self.jobs[j];
                let next = LAS_LEVELS.iter().find(|&&t| job.attained < t)?;
                Some(self.now + (next - job.attained) / f64::from(job.gpus))
            })
            .min_by(f64::total_cmp)
    }

    /// Ends the runs that are done by now; the jobs that ended.
    fn end_done(&mut self) -> Vec<usize> {
        let done: Vec<usize> = self
            .running
            .iter()
            .copied()
            .filter(|&j| self.jobs[j].remaining <= 1e-6)
            .collect();
        for &j in &done {
            self.stop(j);
            self.jobs[j].finish = Some(self.now);
        }
        done
    }

    fn free_gpus(&self) -> u32 {
        self.total_gpus - self.running.iter().map(|&j| self.jobs[j].gpus).sum::<u32>()
    }

    fn try_place(&mut self, j: usize) -> bool {
        let req = self.jobs[j].request.clone();
        match self.placer.place(&self.cluster, &req, j as u64) {
            Ok(p) => {
                self.pending.remove(&self.key(j));
                self.start(j, p);
                true
            }
            Err(_) => false,
        }
    }

    fn schedule(&mut self) {
        if self.policy.preemptive() {
            self.schedule_preemptive();
            return;
        }
        let order: Vec<usize> = self.pending.iter().map(|k| k.2).collect();
        for j in order {
            let free = self.free_gpus();
            if free == 0 {
                break;
            }
            let fits = self.jobs[j].gpus <= free && self.try_place(j);
            if !fits && self.policy == QueuePolicy::Fifo {
                break; // strict FIFO: the head blocks the queue
            }
        }
    }

    /// Decides the set that should run (by priority, up to the VC's GPUs), preempts running
    /// jobs outside it, then places the waiting members of the set.
    fn schedule_preemptive(&mut self) {
        let mut running: Vec<(u64, u64, usize)> =
            self.running.iter().map(|&j| self.key(j)).collect();
        running.sort_unstable();
        let mut left = self.total_gpus;
        let mut keep = Vec::new();
        let mut start = Vec::new();
        let (mut ri, mut pi) = (0, self.pending.iter());
        let mut next_pending = pi.next().copied();
        while left > 0 {
            let take_running = match (running.get(ri), next_pending) {
                (Some(r), Some(p)) => r < &p,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let j = if take_running {
                ri += 1;
                running[ri - 1].2
            } else {
                let j = next_pending.map(|k| k.2).unwrap_or(usize::MAX);
                next_pending = pi.next().copied();
                j
            };
            let g = self.jobs[j].gpus;
            if g <= left {
                left -= g;
                if take_running {
                    keep.push(j);
                } else {
                    start.push(j);
                }
            }
        }
        if start.is_empty() {
            return;
        }
        let victims: Vec<usize> = self
            .running
            .iter()
            .copied()
            .filter(|j| !keep.contains(j))
            .collect();
        for v in victims {
            self.stop(v);
            self.preemptions += 1;
            self.jobs[v].preempted += 1;
            let k = self.key(v);
            self.pending.insert(k);
        }
        for j in start {
            self.try_place(j);
        }
    }
}

/// Replays one VC under one policy.
fn run_vc(
    vc: &str,
    nodes: u32,
    jobs: &[&PhillyJob],
    policy: QueuePolicy,
    overhead: f64,
    eta: bool,
) -> VcResult {
    let mut b = FleetBuilder::new();
    let model = b.model("philly-gpu", 24 * 1024, None).expect("model");
    let pool = b
        .pool(PoolSpec {
            provider: "philly",
            region: vc,
            zone: vc,
            name: "nodes",
            instance_type: "8-gpu",
            model: Some(model),
            gpus_per_node: 8,
            cpu_milli: 64_000,
            mem_mib: 512 * 1024,
            capacity: CapacityType::Reserved,
            price_per_hour: 0.0,
        })
        .expect("pool");
    for i in 0..nodes {
        b.node(pool, &format!("{vc}-{i}"), None, None, 0)
            .expect("node");
    }
    let t0 = jobs.iter().map(|j| j.submit).min().unwrap_or(0);
    let sim_jobs: Vec<SimJob> = jobs
        .iter()
        .map(|j| {
            let (n, g) = gang_shape(j.gpus);
            SimJob {
                submit: (j.submit - t0) as f64,
                duration: j.duration,
                gpus: j.gpus.max(1),
                request: JobRequest {
                    nodes: n,
                    gpu: GpuRequest::Whole(g),
                    ..JobRequest::default()
                },
                remaining: j.duration,
                attained: 0.0,
                running_since: None,
                placement: None,
                started_once: false,
                first_start: None,
                preempted: 0,
                finish: None,
            }
        })
        .collect();
    let mut order: Vec<usize> = (0..sim_jobs.len()).collect();
    order.sort_by(|&a, &b| {
        sim_jobs[a]
            .submit
            .total_cmp(&sim_jobs[b].submit)
            .then(a.cmp(&b))
    });
    let mut sim = Sim {
        policy,
        overhead,
        cluster: Cluster::new(b.build()),
        placer: Placer::new(Policy::Packing),
        jobs: sim_jobs,
        pending: BTreeSet::new(),
        running: Vec::new(),
        total_gpus: nodes * 8,
        busy_gpu_s: 0.0,
        preemptions: 0,
        now: 0.0,
    };
    let mut next_arrival = 0;
    let mut eta = eta.then(eta::EtaLog::new);
    loop {
        let arrival = order.get(next_arrival).map(|&j| sim.jobs[j].submit);
        let Some(t) = [arrival, sim.next_completion(), sim.next_crossing()]
            .into_iter()
            .flatten()
            .min_by(f64::total_cmp)
        else {
            break;
        };
        if let Some(e) = eta.as_mut() {
            e.ticks_before(&sim, t);
        }
        sim.advance(t);
        for j in sim.end_done() {
            if let Some(e) = eta.as_mut() {
                e.ended(&sim.jobs[j]);
            }
        }
        let first = next_arrival;
        while let Some(&j) = order.get(next_arrival) {
            if sim.jobs[j].submit > sim.now {
                break;
            }
            next_arrival += 1;
            let k = sim.key(j);
            sim.pending.insert(k);
        }
        if let Some(e) = eta.as_mut() {
            e.submitted(&sim, &order[first..next_arrival]);
        }
        sim.schedule();
        if let Some(e) = eta.as_mut() {
            e.scheduled(&sim);
        }
    }
    let finished: Vec<&SimJob> = sim.jobs.iter().filter(|j| j.finish.is_some()).collect();
    let n = finished.len().max(1) as f64;
    let jct: Vec<f64> = finished
        .iter()
        .map(|j| j.finish.unwrap_or(0.0) - j.submit)
        .collect();
    let mut queue: Vec<f64> = finished
        .iter()
        .zip(&jct)
        .map(|(j, c)| (c - j.duration).max(0.0))
        .collect();
    queue.sort_by(f64::total_cmp);
    let makespan = finished
        .iter()
        .map(|j| j.finish.unwrap_or(0.0))
        .fold(0.0, f64::max);
    VcResult {
        vc: vc.to_string(),
        nodes,
        metrics: QueueMetrics {
            jobs: finished.len(),
            avg_jct_s: jct.iter().sum::<f64>() / n,
            avg_queue_s: queue.iter().sum::<f64>() / n,
            p99_queue_s: crate::stats::quantile(&queue, 0.99),
            gpu_util_pct: 100.0 * sim.busy_gpu_s / (f64::from(sim.total_gpus) * makespan.max(1.0)),
            makespan_s: makespan,
            preemptions: sim.preemptions,
            lower_bound_jct_s: finished.iter().map(|j| j.duration).sum::<f64>() / n,
        },
        queue_samples: queue,
        eta: eta.map(|e| e.judged(&sim.jobs)),
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct PhillyPolicyResult {
    pub policy: String,
    #[serde(flatten)]
    pub metrics: QueueMetrics,
    pub vcs: Vec<VcResult>,
    /// Start estimates against the starts jobs got (`--eta`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eta: Option<EtaReport>,
}

/// What was left out of the replay, and why.
#[derive(Clone, Debug, Serialize, Default)]
pub struct Skipped {
    pub outside_window: usize,
    pub unknown_vc: usize,
    /// Jobs asking for more GPUs than their VC has: they could never run.
    pub larger_than_vc: usize,
}

pub struct PhillyReplay {
    pub vcs: Vec<(String, u32)>,
    per_vc: Vec<Vec<PhillyJob>>,
    pub skipped: Skipped,
    pub overhead_s: f64,
}

impl PhillyReplay {
    /// `vc_scale` multiplies every VC's node count (at least 1 node): below 1 it replays the
    /// same jobs under more contention.
    pub fn new(
        jobs: Vec<PhillyJob>,
        vcs: Vec<(String, u32)>,
        from: i64,
        to: i64,
        overhead_s: f64,
        vc_scale: f64,
    ) -> PhillyReplay {
        let vcs: Vec<(String, u32)> = vcs
            .into_iter()
            .map(|(n, k)| (n, ((f64::from(k) * vc_scale).round() as u32).max(1)))
            .collect();
        let index: HashMap<&str, usize> = vcs
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.as_str(), i))
            .collect();
        let mut per_vc = vec![Vec::new(); vcs.len()];
        let mut skipped = Skipped::default();
        for j in jobs {
            if j.submit < from || j.submit >= to {
                skipped.outside_window += 1;
                continue;
            }
            let Some(&v) = index.get(j.vc.as_str()) else {
                skipped.unknown_vc += 1;
                continue;
            };
            if j.gpus > vcs[v].1 * 8 {
                skipped.larger_than_vc += 1;
                continue;
            }
            per_vc[v].push(j);
        }
        PhillyReplay {
            vcs,
            per_vc,
            skipped,
            overhead_s,
        }
    }

    pub fn jobs(&self) -> usize {
        self.per_vc.iter().map(Vec::len).sum()
    }

    /// Runs every (policy, VC) pair on `threads` threads.
    /// Runs every (policy, VC) pair on `threads` threads; with `eta`, judges start estimates
    /// made along the way.
    pub fn run(
        &self,
        policies: &[QueuePolicy],
        threads: usize,
        eta: bool,
    ) -> Vec<PhillyPolicyResult> {
        let mut work: Vec<(usize, usize)> = (0..policies.len())
            .flat_map(|p| (0..self.vcs.len()).map(move |v| (p, v)))
            .collect();
        // Biggest VCs first, so the slowest runs do not start last.
        work.sort_by_key(|&(_, v)| std::cmp::Reverse(self.per_vc[v].len()));
        let runs = super::parallel::map(&work, threads, |&(p, v)| {
            let jobs: Vec<&PhillyJob> = self.per_vc[v].iter().collect();
            let (name, nodes) = &self.vcs[v];
            run_vc(name, *nodes, &jobs, policies[p], self.overhead_s, eta)
        });
        let mut out: Vec<(usize, usize, VcResult)> = work
            .iter()
            .zip(runs)
            .map(|(&(p, v), r)| (p, v, r))
            .collect();
        out.sort_by_key(|(p, v, _)| (*p, *v));
        policies
            .iter()
            .enumerate()
            .map(|(p, policy)| {
                let vcs: Vec<VcResult> = out
                    .iter()
                    .filter(|(q, _, _)| *q == p)
                    .map(|(_, _, r)| r.clone())
                    .collect();
                let etas: Vec<&VcEta> = vcs.iter().filter_map(|r| r.eta.as_ref()).collect();
                PhillyPolicyResult {
                    policy: policy.name().to_string(),
                    metrics: overall(&vcs),
                    eta: eta.then(|| EtaReport::of(&etas)),
                    vcs,
                }
            })
            .collect()
    }
}

/// Job-weighted means over VCs; the p99 from all jobs' samples; utilization over all GPUs.
fn overall(vcs: &[VcResult]) -> QueueMetrics {
    let jobs: usize = vcs.iter().map(|r| r.metrics.jobs).sum();
    let mean = |f: &dyn Fn(&QueueMetrics) -> f64| {
        vcs.iter()
            .map(|r| f(&r.metrics) * r.metrics.jobs as f64)
            .sum::<f64>()
            / jobs.max(1) as f64
    };
    let mut all: Vec<f64> = vcs
        .iter()
        .flat_map(|r| r.queue_samples.iter().copied())
        .collect();
    all.sort_by(f64::total_cmp);
    let gpus = |r: &VcResult| f64::from(r.nodes * 8);
    let busy: f64 = vcs
        .iter()
        .map(|r| r.metrics.gpu_util_pct / 100.0 * gpus(r) * r.metrics.makespan_s)
        .sum();
    let makespan = vcs.iter().map(|r| r.metrics.makespan_s).fold(0.0, f64::max);
    QueueMetrics {
        jobs,
        avg_jct_s: mean(&|m| m.avg_jct_s),
        avg_queue_s: mean(&|m| m.avg_queue_s),
        p99_queue_s: crate::stats::quantile(&all, 0.99),
        gpu_util_pct: 100.0 * busy / (vcs.iter().map(gpus).sum::<f64>() * makespan.max(1.0)),
        makespan_s: makespan,
        preemptions: vcs.iter().map(|r| r.metrics.preemptions).sum(),
        lower_bound_jct_s: mean(&|m| m.lower_bound_jct_s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_as_utc_seconds() {
        assert_eq!(parse_time("1970-01-01 00:00:00"), Some(0));
        assert_eq!(parse_time("2017-10-01 00:00:00"), Some(1_506_816_000));
        assert_eq!(parse_time("2017-10-01"), Some(1_506_816_000));
        assert_eq!(parse_time("2017-13-01 00:00:00"), None);
        assert_eq!(parse_time("yesterday"), None);
    }

    #[test]
    fn gangs_split_evenly_over_8_gpu_nodes() {
        assert_eq!(gang_shape(1), (1, 1));
        assert_eq!(gang_shape(8), (1, 8));
        assert_eq!(gang_shape(12), (2, 6));
        assert_eq!(gang_shape(20), (4, 5));
        assert_eq!(gang_shape(128), (16, 8));
    }

    fn job(submit: i64, duration: f64, gpus: u32) -> PhillyJob {
        PhillyJob {
            submit,
            duration,
            gpus,
            vc: "vc".to_string(),
            line: 0,
        }
    }

    #[test]
    fn a_start_estimate_from_past_runs_beats_one_from_time_limits() {
        // One node. Five whole-node runs of 100 s teach the estimate; then X runs, and Y,
        // submitted a second later, waits for it.
        let mut jobs: Vec<PhillyJob> = (0..5).map(|i| job(i * 200, 100.0, 8)).collect();
        jobs.push(job(1000, 100.0, 8));
        jobs.push(job(1001, 100.0, 8));
        let refs: Vec<&PhillyJob> = jobs.iter().collect();
        let r = run_vc("vc", 1, &refs, QueuePolicy::Fifo, 60.0, true);
        let eta = r.eta.expect("estimates were made");
        let y = eta
            .estimates
            .iter()
            .find(|e| e.at_submission && e.submitted == 1001.0)
            .expect("Y was estimated at its submission");
        // X has run 1 s of what runs like it last (100 s): Y starts at 1100, as it did.
        assert_eq!(y.actual, 1100.0);
        assert!((y.gantry - 1100.0).abs() < 1e-6, "{y:?}");
        // Bounded by the same limit, from the runs that asked it: the same.
        assert!((y.limited - 1100.0).abs() < 1e-6, "{y:?}");
        // A Slurm-style estimate waits for X's time limit (1 h).
        assert!((y.slurm - 4600.0).abs() < 1e-6, "{y:?}");
        // Y started before the next ten-minute mark: its submission's estimate is its only one.
        let report = EtaReport::of(&[&eta]);
        assert_eq!(report.rows[1].n, 1, "one job waited");
        assert_eq!(report.rows[1].gantry_p50_s, 0.0);
        assert_eq!(report.rows[1].slurm_p50_s, 3500.0);
    }

    #[test]
    fn a_short_job_waits_behind_a_long_one_under_fifo_but_not_under_gantry() {
        // One node: a long 8-GPU job, then a short 8-GPU job right after it.
        let jobs = [job(0, 100_000.0, 8), job(10, 100.0, 8)];
        let refs: Vec<&PhillyJob> = jobs.iter().collect();
        let fifo = run_vc("vc", 1, &refs, QueuePolicy::Fifo, 60.0, false);
        let gantry = run_vc("vc", 1, &refs, QueuePolicy::Gantry, 60.0, false);
        assert!(
            (fifo.metrics.avg_jct_s - (100_000.0 + 100_090.0) / 2.0).abs() < 1.0,
            "{fifo:?}"
        );
        // gantry lets the long job reach its first level (1 GPU-hour = 450 s on 8 GPUs), then
        // runs the short one; the long one resumes with the restore overhead.
        assert!(
            gantry.metrics.avg_jct_s < fifo.metrics.avg_jct_s / 1.9,
            "{gantry:?}"
        );
        assert_eq!(gantry.metrics.preemptions, 1);
        assert_eq!(gantry.metrics.jobs, 2);
    }

    #[test]
    fn every_policy_finishes_every_job_and_respects_the_lower_bound() {
        let jobs: Vec<PhillyJob> = (0..60)
            .map(|i| {
                job(
                    i * 37,
                    50.0 + (i * 7919 % 1000) as f64,
                    [1, 2, 4, 8, 16][i as usize % 5],
                )
            })
            .collect();
        let refs: Vec<&PhillyJob> = jobs.iter().collect();
        for p in QueuePolicy::ALL {
            let r = run_vc("vc", 3, &refs, p, 30.0, false);
            assert_eq!(r.metrics.jobs, 60, "{p}");
            assert!(
                r.metrics.avg_jct_s >= r.metrics.lower_bound_jct_s - 1e-6,
                "{p}: {r:?}"
            );
            assert!(r.metrics.gpu_util_pct <= 100.0 + 1e-6, "{p}: {r:?}");
        }
    }
}
