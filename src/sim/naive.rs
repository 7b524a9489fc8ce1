//! The naive baselines on the simulated fleet, on a virtual clock as fast as the CPU allows:
//! what industry reports describe — every team a static share of every pool, first come first
//! served inside it, whole GPUs only, nothing reclaimed, no elasticity, and no reaction to
//! spot notices (jobs lose the work since their last own checkpoint). Nodes are interrupted
//! (spot, with a 2-minute notice), fail and recover, and a lost cloud node is replaced; jobs
//! start, requeue and finish; and the bill for all of it.
//!
//! gantry is not modelled here: `gantry sim` runs it on the daemon's own engine
//! ([`super::daemon`]). A baseline is what the daemon is compared against, so it is a model:
//! the daemon cannot be made to schedule this badly.
//!
//! Deterministic for a seed: events are ordered by (time, sequence) and every random draw comes
//! from one seeded generator. Every event is hashed into `event_hash`.

use super::mix::{Kind, SimJob};
use super::result::{SetupResult, SimConfig};
use crate::config::fleet::{fleet_at_max, teams_of, FleetConfig, PoolConfig};
use crate::model::idle::{cause_of, IdleCause, IdleLedger};
use crate::model::Life;
use crate::model::{
    default_classes, CapacityType, Health, ModelId, NodeId, Placement, PoolId, Team,
};
use crate::scheduler::rng::draw_after;
use crate::scheduler::rng::Rng;
use crate::scheduler::{Cluster, Placer, Policy};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

/// Which baseline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Baseline {
    /// Strict: the oldest job that does not fit blocks its team's queue.
    Strict,
    /// Any job that fits starts (no head-of-line blocking).
    AnyFit,
}

#[derive(Clone, Debug)]
struct SimNode {
    life: Life,
    /// Bumped on every change of life, so that stale timed events are ignored.
    epoch: u64,
    /// Which cluster (partition) owns it.
    owner: usize,
    pool: PoolId,
    paid_since: Option<f64>,
    empty_since: Option<f64>,
    jobs: u32,
    /// Milli-GPU its jobs hold.
    held_milli: u64,
    gpus: usize,
    /// Its GPU model's index, if it has GPUs.
    model: Option<usize>,
    reserved: bool,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum JobState {
    Pending,
    Running,
    Finished,
    /// Reclaimed or killed and not requeued.
    Closed,
}

#[derive(Clone, Debug)]
struct Run {
    state: JobState,
    epoch: u64,
    /// Seconds of work still to do.
    remaining: f64,
    first_start: Option<f64>,
    started: f64,
    /// Restore time at the head of this run.
    overhead: f64,
    placement: Option<Placement>,
    cluster: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    Tick,
    End(usize, u64),
    Ready(usize, u64),
    Notice(usize, u64),
    Gone(usize, u64),
    Fail(usize, u64),
    Repair(usize, u64),
}

pub struct World<'a> {
    baseline: Baseline,
    cfg: SimConfig,
    jobs: &'a [SimJob],
    runs: Vec<Run>,
    fleet_cfg: Vec<PoolConfig>,
    clusters: Vec<Cluster>,
    /// Each cluster with every node it owns up and empty: what could ever fit.
    pristine: Vec<Cluster>,
    placer: Placer,
    nodes: Vec<SimNode>,
    teams: Vec<Team>,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: f64,
    end: f64,
    rng: Rng,
    dirty: bool,
    hash: Sha256,
    out: SetupResult,
    waits: Vec<Vec<f64>>,
    team_spend: Vec<(f64, f64)>,
    /// (paid GPU-h, held GPU-h, spend) by capacity type.
    capacity_use: [(f64, f64, f64); 3],
    /// Per pool: (paid, held) GPU-hours.
    pool_use: Vec<(f64, f64)>,
    useful_by_kind: [f64; 4],
    never: Vec<bool>,
    /// Naive: the partition (cluster) of each team; `None` for a team without a guarantee.
    part_of_team: Vec<Option<usize>>,
    /// Jobs waiting to start, by arrival (job index order is arrival order).
    queued: BTreeSet<usize>,
    /// Jobs holding GPUs (running or stopping).
    placed: BTreeSet<usize>,
    /// The GPU models each job's request (as this setup places it) allows, by index.
    allowed: Vec<Vec<usize>>,
    /// Queued jobs that allow each GPU model.
    waiting_for: Vec<u32>,
    idle: IdleLedger,
}

impl<'a> World<'a> {
    /// A world for `baseline` over the (already scaled) fleet file and the workload `jobs`.
    pub fn new(
        baseline: Baseline,
        fleet_cfg: &FleetConfig,
        jobs: &'a [SimJob],
        cfg: SimConfig,
    ) -> Self {
        let teams = teams_of(fleet_cfg);
        let fleet = fleet_at_max(fleet_cfg);
        let pools = fleet_cfg.pools.clone();
        let mut start = vec![0u32; pools.len()];
        let mut nodes = Vec::with_capacity(fleet.nodes.len());
        for n in &fleet.nodes {
            let p = n.pool.index();
            let up = start[p] < pools[p].nodes;
            start[p] += 1;
            nodes.push(SimNode {
                life: if up { Life::Up } else { Life::Absent },
                epoch: 0,
                owner: 0,
                pool: n.pool,
                paid_since: up.then_some(0.0),
                empty_since: up.then_some(0.0),
                jobs: 0,
                held_milli: 0,
                gpus: n.gpus.len(),
                model: n.model.map(|m| m.index()),
                reserved: pools[p].capacity == CapacityType::Reserved,
            });
        }
        // Every team with a guarantee owns a static share of every pool's start nodes.
        let partitions: Vec<usize> = (0..teams.len())
            .filter(|&t| teams[t].quota.is_some())
            .collect();
        {
            let weights: Vec<f64> = partitions
                .iter()
                .map(|&t| {
                    teams[t]
                        .quota
                        .as_ref()
                        .map_or(0.0, |q| f64::from(q.guaranteed))
                })
                .collect();
            let total: f64 = weights.iter().sum::<f64>().max(1.0);
            for (p, pool) in pools.iter().enumerate() {
                let ids: Vec<usize> = (0..nodes.len())
                    .filter(|&i| nodes[i].pool.index() == p && nodes[i].life == Life::Up)
                    .collect();
                let n = ids.len() as f64;
                // Largest remainder.
                let exact: Vec<f64> = weights.iter().map(|w| n * w / total).collect();
                let mut counts: Vec<usize> = exact.iter().map(|e| e.floor() as usize).collect();
                let mut order: Vec<usize> = (0..weights.len()).collect();
                order.sort_by(|&a, &b| {
                    (exact[b] - exact[b].floor())
                        .total_cmp(&(exact[a] - exact[a].floor()))
                        .then(a.cmp(&b))
                });
                let mut left = ids.len() - counts.iter().sum::<usize>();
                for &o in order.iter().cycle().take(order.len() * 2) {
                    if left == 0 {
                        break;
                    }
                    counts[o] += 1;
                    left -= 1;
                }
                let mut it = ids.into_iter();
                for (part, &c) in counts.iter().enumerate() {
                    for id in it.by_ref().take(c) {
                        nodes[id].owner = part;
                    }
                }
                let _ = pool;
            }
        }
        let mut clusters = Vec::new();
        let mut pristine = Vec::new();
        for part in 0..partitions.len() {
            let mut f = fleet.clone();
            let mut all = fleet.clone();
            for (i, n) in nodes.iter().enumerate() {
                let mine = n.owner == part;
                let reachable = mine && n.life == Life::Up;
                f.nodes[i].health = if mine && n.life == Life::Up {
                    Health::Healthy
                } else {
                    Health::Down
                };
                all.nodes[i].health = if reachable {
                    Health::Healthy
                } else {
                    Health::Down
                };
            }
            clusters.push(Cluster::new(f));
            pristine.push(Cluster::new(all));
        }
        let runs = jobs
            .iter()
            .map(|j| Run {
                state: JobState::Pending,
                epoch: 0,
                remaining: j.work_s,
                first_start: None,
                started: 0.0,
                overhead: 0.0,
                placement: None,
                cluster: 0,
            })
            .collect();
        let classes = default_classes();
        let allowed = jobs
            .iter()
            .map(|j| {
                (0..fleet.models.len())
                    .filter(|&m| j.whole.models.rank(ModelId(m as u16)).is_some())
                    .collect()
            })
            .collect();
        let mut w = World {
            baseline,
            end: cfg.days * 86_400.0,
            rng: Rng::new(cfg.seed ^ 0x0077_6f72_6c64),
            cfg,
            jobs,
            runs,
            fleet_cfg: pools.clone(),
            clusters,
            pristine,
            placer: Placer::new(Policy::BestFit),
            team_spend: vec![(0.0, 0.0); teams.len()],
            teams,
            waits: vec![Vec::new(); classes.len()],
            nodes,
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            dirty: false,
            hash: Sha256::new(),
            out: SetupResult {
                setup: match baseline {
                    Baseline::Strict => "naive",
                    Baseline::AnyFit => "naive-any-fit",
                }
                .to_string(),
                engine: "model".to_string(),
                jobs: jobs.len(),
                ..SetupResult::default()
            },
            capacity_use: [(0.0, 0.0, 0.0); 3],
            pool_use: vec![(0.0, 0.0); fleet_cfg.pools.len()],
            useful_by_kind: [0.0; 4],
            never: vec![false; jobs.len()],
            part_of_team: Vec::new(),
            queued: BTreeSet::new(),
            placed: BTreeSet::new(),
            allowed,
            waiting_for: vec![0; fleet.models.len()],
            idle: IdleLedger::new(fleet_cfg.pools.len()),
        };
        w.partition_teams(&partitions);
        for (i, j) in jobs.iter().enumerate() {
            if j.arrive < w.end {
                w.at(j.arrive, Ev::Arrive(i));
            }
        }
        for i in 0..w.nodes.len() {
            if w.nodes[i].life == Life::Up {
                w.arm_node(i);
            }
        }
        w.at(0.0, Ev::Tick);
        w
    }

    /// In the naive setup a job goes to its team's partition.
    fn partition_teams(&mut self, partitions: &[usize]) {
        self.part_of_team = (0..self.teams.len())
            .map(|t| partitions.iter().position(|&p| p == t))
            .collect();
        self.out.peak_gpus = self.paid_gpus();
    }

    fn at(&mut self, t: f64, ev: Ev) {
        self.seq += 1;
        self.queue
            .push(Reverse((t.max(0.0).to_bits(), self.seq, ev)));
    }

    fn log(&mut self, what: std::fmt::Arguments<'_>) {
        let line = format!("{:>9.0} {what}", self.now);
        self.hash.update(line.as_bytes());
        self.hash.update(b"\n");
        self.out.events += 1;
        if self.cfg.keep_events {
            self.out.event_log.push(line);
        }
    }

    fn paid_gpus(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| n.paid_since.is_some())
            .map(|n| n.gpus)
            .sum()
    }

    fn pool_cfg(&self, node: usize) -> &PoolConfig {
        &self.fleet_cfg[self.nodes[node].pool.index()]
    }

    fn delay(&self, node: usize) -> f64 {
        self.pool_cfg(node).provisioning_delay_s()
    }

    /// Draws the node's next spot interruption and failure.
    fn arm_node(&mut self, i: usize) {
        let epoch = self.nodes[i].epoch;
        let pool = self.pool_cfg(i).clone();
        if pool.capacity == CapacityType::Spot && pool.spot_interruptions_per_node_hour > 0.0 {
            let dt = draw_after(&mut self.rng, pool.spot_interruptions_per_node_hour);
            self.at(self.now + dt, Ev::Notice(i, epoch));
        }
        if self.cfg.failures_per_node_hour > 0.0 {
            let dt = draw_after(&mut self.rng, self.cfg.failures_per_node_hour);
            self.at(self.now + dt, Ev::Fail(i, epoch));
        }
    }

    fn set_life(&mut self, i: usize, life: Life) {
        let n = &mut self.nodes[i];
        n.life = life;
        n.epoch += 1;
        match (life.paid(), n.paid_since) {
            (true, None) => n.paid_since = Some(self.now),
            (false, Some(since)) => {
                n.paid_since = None;
                self.bill(i, since);
            }
            _ => {}
        }
        let owner = self.nodes[i].owner;
        self.clusters[owner].set_health(NodeId(i as u32), life.health());
        if life == Life::Up {
            self.nodes[i].empty_since = (self.nodes[i].jobs == 0).then_some(self.now);
        }
        self.out.peak_gpus = self.out.peak_gpus.max(self.paid_gpus());
        self.dirty = true;
    }

    /// Adds the node's bill from `since` to now.
    fn bill(&mut self, i: usize, since: f64) {
        let pool = self.pool_cfg(i);
        let hours = (self.now - since) / 3600.0;
        let cost = pool.price_per_hour * hours;
        let cap = pool.capacity as usize;
        self.out.spend_usd += cost;
        self.out.paid_gpu_hours += self.nodes[i].gpus as f64 * hours;
        self.capacity_use[cap].0 += self.nodes[i].gpus as f64 * hours;
        self.pool_use[self.nodes[i].pool.index()].0 += self.nodes[i].gpus as f64 * hours;
        self.capacity_use[cap].2 += cost;
    }

    fn start(&mut self, j: usize, placement: Placement, cluster: usize) -> bool {
        if self.clusters[cluster].allocate(&placement).is_err() {
            return false;
        }
        self.dequeue(j);
        let job = &self.jobs[j];
        let r = &mut self.runs[j];
        r.overhead = if r.remaining < job.work_s && job.kind != Kind::Notebook {
            self.cfg.restore_s
        } else {
            0.0
        };
        r.state = JobState::Running;
        self.placed.insert(j);
        r.started = self.now;
        r.cluster = cluster;
        r.epoch += 1;
        if r.first_start.is_none() {
            r.first_start = Some(self.now);
            self.waits[job.class].push(self.now - job.arrive);
        }
        let end = self.now + r.overhead + r.remaining;
        let epoch = r.epoch;
        for g in &placement.nodes {
            let n = &mut self.nodes[g.node.index()];
            n.jobs += 1;
            n.held_milli += g.gpu_milli();
            n.empty_since = None;
        }
        let text = format!(
            "start job {j} ({}) on {} node(s) ${:.2}/h",
            job.kind.name(),
            placement.nodes.len(),
            placement.price_per_hour
        );
        self.runs[j].placement = Some(placement);
        if job.kind != Kind::Inference {
            self.at(end, Ev::End(j, epoch));
        }
        self.log(format_args!("{text}"));
        true
    }

    /// Ends a run at `now`: bills the job, counts busy and useful time, frees its GPUs.
    /// `saved` says whether progress since the last periodic checkpoint is kept.
    fn stop(&mut self, j: usize, finished: bool, saved: bool, next: JobState) {
        let job = &self.jobs[j];
        let r = &mut self.runs[j];
        let Some(p) = r.placement.take() else { return };
        let ran = self.now - r.started;
        let progress = (ran - r.overhead).max(0.0);
        let kept = if finished || saved || job.kind == Kind::Inference {
            progress
        } else {
            match job.checkpoint_s {
                Some(c) => (progress / c).floor() * c,
                None => 0.0,
            }
        };
        let busy_s = if job.kind == Kind::Notebook {
            ran.min(job.active_s)
        } else {
            ran
        };
        let useful_s = if job.kind == Kind::Notebook {
            busy_s
        } else {
            kept.min(r.remaining)
        };
        r.remaining = (r.remaining - kept).max(0.0);
        r.state = next;
        r.epoch += 1;
        self.placed.remove(&j);
        let rate = f64::from(job.useful_milli) / 1000.0;
        self.out.busy_gpu_hours += rate * busy_s / 3600.0;
        self.out.useful_gpu_hours += rate * useful_s / 3600.0;
        self.useful_by_kind[job.kind as usize] += rate * useful_s / 3600.0;
        let held = p.gpu_milli() as f64 / 1000.0;
        self.out.allocated_gpu_hours += held * ran / 3600.0;
        let spend = &mut self.team_spend[job.team];
        spend.0 += p.price_per_hour * ran / 3600.0;
        spend.1 += held * ran / 3600.0;
        for g in &p.nodes {
            let cap = self.fleet_cfg[self.nodes[g.node.index()].pool.index()].capacity as usize;
            let milli: u64 = g.gpu_milli();
            self.capacity_use[cap].1 += milli as f64 / 1000.0 * ran / 3600.0;
            self.pool_use[self.nodes[g.node.index()].pool.index()].1 +=
                milli as f64 / 1000.0 * ran / 3600.0;
        }
        self.clusters[r.cluster]
            .release(&p)
            .expect("a running job's placement was allocated");
        for g in &p.nodes {
            let n = &mut self.nodes[g.node.index()];
            n.jobs -= 1;
            n.held_milli -= g.gpu_milli();
            if n.jobs == 0 {
                n.empty_since = Some(self.now);
            }
        }
        if finished {
            self.out.finished += 1;
        }
        if next == JobState::Pending {
            self.enqueue(j);
        }
        self.dirty = true;
    }

    fn enqueue(&mut self, j: usize) {
        if self.queued.insert(j) {
            for &m in &self.allowed[j] {
                self.waiting_for[m] += 1;
            }
        }
    }

    fn dequeue(&mut self, j: usize) {
        if self.queued.remove(&j) {
            for &m in &self.allowed[j] {
                self.waiting_for[m] -= 1;
            }
        }
    }

    /// Charges the free GPUs of every paid node to their causes from `now` until `t`.
    fn charge_idle(&mut self, t: f64) {
        let dt = t - self.now;
        if dt <= 0.0 {
            return;
        }
        let mut milli = vec![[0u64; IdleCause::FREE.len()]; self.fleet_cfg.len()];
        for n in &self.nodes {
            let waits = n.model.is_some_and(|m| self.waiting_for[m] > 0);
            if let Some(cause) = cause_of(n.life, n.reserved, n.jobs > 0, waits) {
                let free = (n.gpus as u64 * 1000).saturating_sub(n.held_milli);
                let k = cause.slot().expect("cause_of gives a free GPU's cause");
                milli[n.pool.index()][k] += free;
            }
        }
        self.idle.charge(dt, &milli);
    }

    fn jobs_on(&self, node: usize) -> Vec<usize> {
        let id = NodeId(node as u32);
        self.placed
            .iter()
            .copied()
            .filter(|&j| {
                self.runs[j]
                    .placement
                    .as_ref()
                    .is_some_and(|p| p.nodes.iter().any(|g| g.node == id))
            })
            .collect()
    }

    /// A node is gone (interrupted or failed): its jobs lose the work since their last own
    /// checkpoint and requeue, or close if they cannot.
    fn evict(&mut self, node: usize) {
        for j in self.jobs_on(node) {
            let next = if self.jobs[j].kind == Kind::Notebook {
                JobState::Closed
            } else {
                JobState::Pending
            };
            self.stop(j, false, false, next);
            self.log(format_args!(
                "job {j} lost its node {node}; {}",
                if next == JobState::Pending {
                    "requeued"
                } else {
                    "closed"
                }
            ));
        }
    }

    fn handle(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive(j) => {
                let job = &self.jobs[j];
                let cluster = self.part_of_team.get(job.team).copied().flatten();
                let req = &job.whole;
                self.placer.observe(req);
                let fits = cluster
                    .is_some_and(|c| self.placer.place(&self.pristine[c], req, j as u64).is_ok());
                if !fits {
                    self.never[j] = true;
                    self.out.never_fit += 1;
                    self.runs[j].state = JobState::Closed;
                    self.log(format_args!(
                        "job {j} ({}) can never fit; rejected",
                        job.kind.name()
                    ));
                } else {
                    self.dirty = true;
                    self.enqueue(j);
                    self.log(format_args!("arrive job {j} ({})", job.kind.name()));
                }
            }
            Ev::Tick => {
                if self.dirty {
                    self.dirty = false;
                    self.schedule_naive(self.baseline == Baseline::Strict);
                }
                if self.now + self.cfg.cycle_s < self.end {
                    self.at(self.now + self.cfg.cycle_s, Ev::Tick);
                }
            }
            Ev::End(j, e) if self.runs[j].epoch == e && self.runs[j].state == JobState::Running => {
                self.stop(j, true, true, JobState::Finished);
                self.log(format_args!("job {j} finished"));
            }
            Ev::Ready(i, e) if self.nodes[i].epoch == e => {
                self.set_life(i, Life::Up);
                self.arm_node(i);
                self.log(format_args!("node {i} ready"));
            }
            Ev::Notice(i, e) if self.nodes[i].epoch == e && self.nodes[i].life == Life::Up => {
                self.out.spot_interruptions += 1;
                self.set_life(i, Life::Noticed);
                let epoch = self.nodes[i].epoch;
                let pool = self.pool_cfg(i).name.clone();
                self.log(format_args!("spot notice for node {i} ({pool}): 2 min"));
                self.at(self.now + self.cfg.spot_notice_s, Ev::Gone(i, epoch));
            }
            Ev::Gone(i, e) if self.nodes[i].epoch == e => {
                self.evict(i);
                self.set_life(i, Life::Absent);
                self.log(format_args!("node {i} taken back by the provider"));
                self.replace_if_static(i);
            }
            Ev::Fail(i, e) if self.nodes[i].epoch == e && self.nodes[i].life == Life::Up => {
                self.out.node_failures += 1;
                self.evict(i);
                if self.pool_cfg(i).capacity == CapacityType::Reserved {
                    self.set_life(i, Life::Failed);
                    let epoch = self.nodes[i].epoch;
                    self.at(self.now + self.cfg.repair_s, Ev::Repair(i, epoch));
                    self.log(format_args!("node {i} failed; repair under way"));
                } else {
                    self.set_life(i, Life::Absent);
                    self.log(format_args!("node {i} failed; instance terminated"));
                    self.replace_if_static(i);
                }
            }
            Ev::Repair(i, e) if self.nodes[i].epoch == e => {
                self.set_life(i, Life::Up);
                self.arm_node(i);
                self.log(format_args!("node {i} repaired"));
            }
            _ => {}
        }
    }

    /// The naive fleet is static: a lost cloud node is replaced.
    fn replace_if_static(&mut self, i: usize) {
        self.set_life(i, Life::Provisioning);
        let epoch = self.nodes[i].epoch;
        let delay = self.delay(i);
        self.at(self.now + delay, Ev::Ready(i, epoch));
    }

    /// First come, first served inside each team's partition; with `strict` the oldest job
    /// that does not fit blocks its team's queue.
    fn schedule_naive(&mut self, strict: bool) {
        let mut blocked = vec![false; self.clusters.len()];
        let mut failed = std::collections::HashSet::new();
        let queued: Vec<usize> = self.queued.iter().copied().collect();
        for j in queued {
            if blocked.iter().all(|b| *b) {
                break;
            }
            let Some(c) = self.part_of_team[self.jobs[j].team] else {
                continue;
            };
            if blocked[c] {
                continue;
            }
            // Capacity only shrinks during a pass: a request that failed fails again.
            let r = &self.jobs[j].whole;
            let key = (
                c,
                r.nodes,
                r.gpu,
                r.cpu_milli,
                r.mem_mib,
                r.vram_mib,
                r.models.clone(),
            );
            if failed.contains(&key) {
                continue;
            }
            match self.placer.place(&self.clusters[c], r, j as u64) {
                Ok(p) => {
                    self.start(j, p, c);
                }
                Err(_) => {
                    blocked[c] = strict;
                    failed.insert(key);
                }
            }
        }
    }

    /// Runs to the end of the window and returns what the baseline achieved.
    pub fn run(mut self) -> SetupResult {
        while let Some(Reverse((bits, _, ev))) = self.queue.pop() {
            let t = f64::from_bits(bits);
            if t >= self.end {
                break;
            }
            self.charge_idle(t);
            self.now = t;
            self.handle(ev);
        }
        self.charge_idle(self.end);
        self.now = self.end;
        self.finish()
    }

    fn finish(mut self) -> SetupResult {
        for j in 0..self.runs.len() {
            if self.runs[j].placement.is_some() {
                // Work done by the window's end counts; nothing is lost by closing the books.
                self.stop(j, false, true, JobState::Pending);
                self.out.unfinished += 1;
            } else if self.runs[j].state == JobState::Pending
                && !self.never[j]
                && self.jobs[j].arrive < self.end
            {
                self.out.unfinished += 1;
                if self.runs[j].first_start.is_none() {
                    // Censored: still waiting at the end.
                    let job = &self.jobs[j];
                    self.waits[job.class].push(self.end - job.arrive);
                }
            }
        }
        for i in 0..self.nodes.len() {
            if let Some(since) = self.nodes[i].paid_since.take() {
                self.bill(i, since);
            }
        }
        let fleet = self.clusters[0].fleet();
        let paths: Vec<String> = (0..self.pool_use.len())
            .map(|i| fleet.pool_path(PoolId(i as u32)))
            .collect();
        self.out
            .close_books(&self.capacity_use, &self.pool_use, &self.idle, &paths);
        let o = &mut self.out;
        o.bill_teams(
            self.teams
                .iter()
                .zip(&self.team_spend)
                .map(|(t, s)| (t.name.clone(), s.0, s.1)),
        );
        o.set_queue_waits(&mut self.waits);
        o.useful_gpu_hours_by_kind = Kind::ALL
            .iter()
            .map(|k| (k.name().to_string(), self.useful_by_kind[*k as usize]))
            .collect();
        o.event_hash = format!("{:x}", self.hash.finalize());
        self.out
    }
}
