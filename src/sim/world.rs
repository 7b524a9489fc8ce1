//! The simulated fleet on a virtual clock, as fast as the CPU allows: nodes that are
//! provisioned, interrupted (spot, with a 2-minute notice), fail and recover; jobs that start,
//! checkpoint, are preempted or reclaimed, requeue and finish; and the bill for all of it.
//!
//! One [`World`] runs one *setup* over one workload:
//! * [`Setup::Gantry`] — the scheduler core as the daemon uses it (`run_cycle`: classes,
//!   fair-share, quotas with borrowing, checkpoint-aware preemption, backfill, fractional GPUs),
//!   plus idle reclamation (`reclaim_plan`) and elastic capacity (`scale_up`/`scale_down`:
//!   spot first, on-demand fallback, empty nodes given back).
//! * [`Setup::Naive`] — what industry reports describe: every team a static share of every pool,
//!   first come first served inside it, whole GPUs only, nothing reclaimed, no elasticity,
//!   and no reaction to spot notices (jobs lose the work since their last own checkpoint).
//!
//! Deterministic for a seed: events are ordered by (time, sequence) and every random draw comes
//! from one seeded generator. Every event is hashed into `event_hash`.

use super::mix::{Kind, SimJob, EXPERIMENT, PRODUCTION, SERVING};
use crate::config::fleet::{fleet_at_max, fleet_sized, teams_of, FleetConfig, PoolConfig};
use crate::daemon::lives::offers;
use crate::model::idle::{cause_of, IdleCause, IdleLedger, IdleShare};
use crate::model::{
    default_classes, CapacityType, Fleet, Health, ModelId, NodeId, Placement, PoolId,
    PriorityClass, Team,
};
use crate::model::{pool_counts, Life};
use crate::scheduler::cycle::{
    run_cycle, CycleConfig, CycleInput, Decision, PendingJob, RunningJob,
};
use crate::scheduler::moves::{moves_off, Mover};
use crate::scheduler::reclaim::{reclaim_plan, JobUsage, ReclaimConfig};
use crate::scheduler::rng::draw_after;
use crate::scheduler::rng::Rng;
use crate::scheduler::scale::{scale_down, scale_up, NodeIdle, ScaleConfig};
use crate::scheduler::{Cluster, Placer, Policy};
use serde::Serialize;
use sha2::{Digest, Sha256};
use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

mod rebalance;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    /// Static partitions, strict first come first served: the oldest job that does not fit
    /// blocks its team's queue.
    Naive,
    /// Static partitions, arrival order, but any job that fits starts (no head-of-line
    /// blocking): the kinder reading of "first come first served".
    NaiveAnyFit,
    Gantry,
}

impl Setup {
    pub fn name(self) -> &'static str {
        match self {
            Setup::Naive => "naive",
            Setup::NaiveAnyFit => "naive-any-fit",
            Setup::Gantry => "gantry",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub days: f64,
    pub seed: u64,
    /// Scheduling cadence, simulated seconds.
    pub cycle_s: f64,
    /// Time to load a checkpoint after a restart (busy, not useful).
    pub restore_s: f64,
    /// Node failures per node-hour on every pool (Llama 3's 54-day run: about 0.0002).
    pub failures_per_node_hour: f64,
    /// How long an on-prem node is down after a failure (cloud nodes are replaced instead).
    pub repair_s: f64,
    /// The provider's notice before it takes a spot node back.
    pub spot_notice_s: f64,
    pub reclaim: ReclaimConfig,
    pub scale: ScaleConfig,
    /// gantry drains underused cloud nodes whose jobs fit on paid capacity (consolidation).
    pub consolidate: bool,
    /// Keep the text of every event (the hash is always kept).
    pub keep_events: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            days: 7.0,
            seed: 1,
            cycle_s: 60.0,
            restore_s: 120.0,
            failures_per_node_hour: 0.0002,
            repair_s: 4.0 * 3600.0,
            spot_notice_s: 120.0,
            reclaim: ReclaimConfig::default(),
            scale: ScaleConfig::default(),
            consolidate: true,
            keep_events: false,
        }
    }
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
    /// Told to stop (preemption); holds its GPUs until `Stopped`.
    Stopping,
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
    borrowed: bool,
    /// A spot notice told it to checkpoint before the node goes.
    noticed: bool,
    /// Victims still stopping for it.
    awaiting: u32,
    /// The job it is being preempted for.
    preemptor: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Arrive(usize),
    Tick,
    End(usize, u64),
    Stopped(usize, u64),
    Ready(usize, u64),
    Notice(usize, u64),
    Gone(usize, u64),
    Fail(usize, u64),
    Repair(usize, u64),
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct ClassWait {
    pub class: String,
    pub jobs: usize,
    pub p50_s: f64,
    pub p99_s: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CapacityUse {
    pub capacity: String,
    pub paid_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub spend_usd: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PoolUse {
    pub pool: String,
    pub paid_gpu_hours: f64,
    pub held_gpu_hours: f64,
    /// Its paid GPU-hours held by no job, by cause (they add up to paid − held).
    pub idle: Vec<IdleShare>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TeamSpend {
    pub team: String,
    pub spend_usd: f64,
    pub gpu_hours: f64,
}

/// What one setup achieved. Hours are GPU-hours.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SetupResult {
    pub setup: String,
    /// Busy GPU-hours / paid GPU-hours.
    pub utilization: f64,
    /// Allocated GPU-hours / paid GPU-hours.
    pub allocation: f64,
    pub cost_per_useful_gpu_hour: f64,
    pub paid_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub busy_gpu_hours: f64,
    /// Busy hours whose work was kept (not lost to a kill, not restore time).
    pub useful_gpu_hours: f64,
    pub spend_usd: f64,
    /// Paid and held GPU-hours and spend by how capacity is bought.
    pub by_capacity: Vec<CapacityUse>,
    /// Paid and held GPU-hours by pool (where the idle hours are).
    pub by_pool: Vec<PoolUse>,
    pub spend_by_team: Vec<TeamSpend>,
    /// Paid for but held by no job.
    pub idle_spend_usd: f64,
    /// Paid GPU-hours that did no work, by cause: they add up to paid − busy.
    pub idle: Vec<IdleShare>,
    pub queue_wait: Vec<ClassWait>,
    pub jobs: usize,
    pub finished: usize,
    /// Still queued or running when the window closed (services run all along).
    pub unfinished: usize,
    /// Could never fit where this setup would put them.
    pub never_fit: usize,
    pub preemptions: u64,
    pub spot_interruptions: u64,
    pub node_failures: u64,
    pub reclaimed_jobs: u64,
    pub reclaimed_gpu_hours: f64,
    /// Cloud nodes drained by consolidation (their jobs checkpointed and moved to capacity
    /// already paid for) and given back, and the jobs moved.
    pub consolidated_nodes: u64,
    /// Nodes emptied for a job that fit nowhere (instead of buying one).
    pub defragmented: u64,
    pub moved_jobs: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub peak_gpus: usize,
    pub useful_gpu_hours_by_kind: Vec<(String, f64)>,
    pub events: u64,
    pub event_hash: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_log: Vec<String>,
}

/// Scales a fleet file by `k`: node counts, guarantees, borrow limits and budgets.
pub fn scaled(cfg: &FleetConfig, k: f64) -> FleetConfig {
    let s = |n: u32| {
        if n == 0 {
            0
        } else {
            ((f64::from(n) * k).round() as u32).max(1)
        }
    };
    let mut out = cfg.clone();
    for p in &mut out.pools {
        p.max_nodes = Some(s(p.max_nodes.unwrap_or(p.nodes)));
        p.nodes = s(p.nodes);
        p.min_nodes = s(p.min_nodes);
        p.nodes_per_leaf = p.nodes_per_leaf.map(|n| n.max(1));
    }
    for t in &mut out.teams {
        t.guaranteed = t.guaranteed.map(s);
        t.borrow_limit = s(t.borrow_limit);
        t.lend_limit = t.lend_limit.map(s);
        t.budget_monthly_usd = t.budget_monthly_usd.map(|b| b * k);
    }
    // Rounding must not lift a borrow limit above what the cohort can lend.
    let lends: Vec<(Option<String>, u32)> = out
        .teams
        .iter()
        .map(|t| {
            let g = t.guaranteed.unwrap_or(0);
            (t.cohort.clone(), t.lend_limit.unwrap_or(g).min(g))
        })
        .collect();
    for (i, t) in out.teams.iter_mut().enumerate() {
        let lendable: u32 = lends
            .iter()
            .enumerate()
            .filter(|(j, (c, _))| *j != i && c.is_some() && *c == t.cohort)
            .map(|(_, (_, l))| *l)
            .sum();
        if t.cohort.is_some() {
            t.borrow_limit = t.borrow_limit.min(lendable);
        }
    }
    out
}

/// The fleet at its start size, as the workload generator sizes the offered load.
pub fn start_fleet(cfg: &FleetConfig) -> Fleet {
    fleet_sized(cfg, |p| p.nodes)
}

/// Utilization samples of one GPU: (seconds, percent), oldest first.
type Series = Vec<(f64, f64)>;

pub struct World<'a> {
    setup: Setup,
    cfg: SimConfig,
    jobs: &'a [SimJob],
    runs: Vec<Run>,
    fleet_cfg: Vec<PoolConfig>,
    clusters: Vec<Cluster>,
    /// Each cluster with every node it owns up and empty: what could ever fit.
    pristine: Vec<Cluster>,
    /// The same with MIG pools' GPUs whole (gantry repartitions MIG to demand).
    pristine_whole: Vec<Cluster>,
    placer: Placer,
    nodes: Vec<SimNode>,
    teams: Vec<Team>,
    classes: Vec<PriorityClass>,
    usage: Vec<f64>,
    last_usage: f64,
    interrupted: Vec<Option<f64>>,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
    now: f64,
    end: f64,
    rng: Rng,
    dirty: bool,
    next_reclaim: f64,
    next_consolidate: f64,
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
    /// When a job held back by its class's patience may have capacity bought for it.
    wake_at: Option<f64>,
    idle: IdleLedger,
}

impl<'a> World<'a> {
    /// A world for `setup` over the (already scaled) fleet file and the workload `jobs`.
    pub fn new(setup: Setup, fleet_cfg: &FleetConfig, jobs: &'a [SimJob], cfg: SimConfig) -> Self {
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
        // Naive: every team with a guarantee owns a static share of every pool's start nodes.
        let partitions: Vec<usize> = match setup {
            Setup::Gantry => vec![0],
            Setup::Naive | Setup::NaiveAnyFit => (0..teams.len())
                .filter(|&t| teams[t].quota.is_some())
                .collect(),
        };
        if setup != Setup::Gantry {
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
        let mut pristine_whole = Vec::new();
        for part in 0..partitions.len() {
            let mut f = fleet.clone();
            let mut all = fleet.clone();
            for (i, n) in nodes.iter().enumerate() {
                let mine = n.owner == part;
                let reachable = mine && (setup == Setup::Gantry || n.life == Life::Up);
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
            let mut whole = Cluster::new(all.clone());
            if setup == Setup::Gantry {
                // gantry may turn MIG GPUs of MIG pools into whole ones: what fits then counts.
                for (i, n) in all.nodes.iter().enumerate() {
                    if pools[n.pool.index()].mig_gpus_per_node > 0 {
                        for g in 0..n.gpus.len() {
                            whole.set_mig_mode(NodeId(i as u32), g, false);
                        }
                    }
                }
            }
            pristine.push(Cluster::new(all));
            pristine_whole.push(whole);
        }
        let policy = match setup {
            Setup::Gantry => Policy::Gantry,
            Setup::Naive | Setup::NaiveAnyFit => Policy::BestFit,
        };
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
                borrowed: false,
                noticed: false,
                awaiting: 0,
                preemptor: None,
            })
            .collect();
        let classes = default_classes();
        let allowed = jobs
            .iter()
            .map(|j| {
                let req = match setup {
                    Setup::Gantry => &j.request,
                    Setup::Naive | Setup::NaiveAnyFit => &j.whole,
                };
                (0..fleet.models.len())
                    .filter(|&m| req.models.rank(ModelId(m as u16)).is_some())
                    .collect()
            })
            .collect();
        let mut w = World {
            setup,
            end: cfg.days * 86_400.0,
            rng: Rng::new(cfg.seed ^ 0x0077_6f72_6c64),
            cfg,
            jobs,
            runs,
            fleet_cfg: pools.clone(),
            clusters,
            pristine,
            pristine_whole,
            placer: Placer::new(policy),
            usage: vec![0.0; teams.len()],
            team_spend: vec![(0.0, 0.0); teams.len()],
            teams,
            waits: vec![Vec::new(); classes.len()],
            classes,
            nodes,
            last_usage: 0.0,
            interrupted: vec![None; pools.len()],
            queue: BinaryHeap::new(),
            seq: 0,
            now: 0.0,
            dirty: false,
            next_reclaim: 0.0,
            next_consolidate: 0.0,
            hash: Sha256::new(),
            out: SetupResult {
                setup: setup.name().to_string(),
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
            wake_at: None,
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

    fn start(&mut self, j: usize, placement: Placement, cluster: usize, borrowed: bool) -> bool {
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
        r.borrowed = borrowed;
        r.noticed = false;
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

    /// A node is gone (interrupted or failed): its jobs requeue, or close if they cannot.
    fn evict(&mut self, node: usize, saved_if_noticed: bool) {
        for j in self.jobs_on(node) {
            let saved =
                saved_if_noticed && self.runs[j].noticed && self.jobs[j].checkpoint_s.is_some();
            let next = if self.jobs[j].kind == Kind::Notebook {
                JobState::Closed
            } else {
                JobState::Pending
            };
            self.stop(j, false, saved, next);
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
                let cluster = match self.setup {
                    Setup::Gantry => Some(0),
                    Setup::Naive | Setup::NaiveAnyFit => {
                        self.part_of_team.get(job.team).copied().flatten()
                    }
                };
                let req = match self.setup {
                    Setup::Gantry => &job.request,
                    Setup::Naive | Setup::NaiveAnyFit => &job.whole,
                };
                self.placer.observe(req);
                let fits = cluster.is_some_and(|c| {
                    self.placer.place(&self.pristine[c], req, j as u64).is_ok()
                        || self
                            .placer
                            .place(&self.pristine_whole[c], req, j as u64)
                            .is_ok()
                });
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
                self.account_usage();
                if self.wake_at.is_some_and(|t| self.now >= t) {
                    self.wake_at = None;
                    self.dirty = true;
                }
                if self.setup == Setup::Gantry {
                    self.scale_down();
                }
                if self.dirty {
                    self.dirty = false;
                    match self.setup {
                        Setup::Gantry => self.schedule_gantry(),
                        Setup::Naive => self.schedule_naive(true),
                        Setup::NaiveAnyFit => self.schedule_naive(false),
                    }
                }
                if self.now + self.cfg.cycle_s < self.end {
                    self.at(self.now + self.cfg.cycle_s, Ev::Tick);
                }
            }
            Ev::End(j, e) if self.runs[j].epoch == e && self.runs[j].state == JobState::Running => {
                self.stop(j, true, true, JobState::Finished);
                self.log(format_args!("job {j} finished"));
            }
            Ev::Stopped(j, e)
                if self.runs[j].epoch == e && self.runs[j].state == JobState::Stopping =>
            {
                let saved = self.jobs[j].checkpoint_s.is_some();
                self.stop(j, false, saved, JobState::Pending);
                self.log(format_args!("job {j} stopped after preemption; requeued"));
                // Its preemptor may go once all its victims have stopped.
                if let Some(p) = self.runs[j].preemptor.take() {
                    self.runs[p].awaiting = self.runs[p].awaiting.saturating_sub(1);
                }
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
                if self.setup == Setup::Gantry {
                    for j in self.jobs_on(i) {
                        self.runs[j].noticed = true;
                    }
                }
                let pool = self.pool_cfg(i).name.clone();
                self.log(format_args!("spot notice for node {i} ({pool}): 2 min"));
                self.at(self.now + self.cfg.spot_notice_s, Ev::Gone(i, epoch));
            }
            Ev::Gone(i, e) if self.nodes[i].epoch == e => {
                self.interrupted[self.nodes[i].pool.index()] = Some(self.now);
                self.evict(i, true);
                self.set_life(i, Life::Absent);
                self.log(format_args!("node {i} taken back by the provider"));
                self.replace_if_static(i);
            }
            Ev::Fail(i, e) if self.nodes[i].epoch == e && self.nodes[i].life == Life::Up => {
                self.out.node_failures += 1;
                self.evict(i, false);
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
        if self.setup != Setup::Gantry {
            self.set_life(i, Life::Provisioning);
            let epoch = self.nodes[i].epoch;
            let delay = self.delay(i);
            self.at(self.now + delay, Ev::Ready(i, epoch));
        }
    }

    /// Fair-share usage: decayed GPU-seconds per team (12 h half-life).
    fn account_usage(&mut self) {
        let dt = self.now - self.last_usage;
        self.last_usage = self.now;
        for u in &mut self.usage {
            *u = crate::model::decay(*u, dt, 12.0 * 3600.0);
        }
        for &j in &self.placed {
            if let Some(p) = &self.runs[j].placement {
                self.usage[self.jobs[j].team] += p.gpu_milli() as f64 / 1000.0 * dt;
            }
        }
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
                    self.start(j, p, c, false);
                }
                Err(_) => {
                    blocked[c] = strict;
                    failed.insert(key);
                }
            }
        }
    }

    /// MIG layout follows demand on the pools configured for MIG (what an operator's MIG
    /// manager does on idle GPUs): with no MIG job waiting, idle MIG GPUs beyond one spare per
    /// pool go back to whole-GPU mode; a waiting MIG job turns an idle whole GPU there into
    /// MIG mode. Pools without MIG (training nodes) are never touched.
    fn repartition_mig(&mut self) {
        let waiting: Vec<usize> = self
            .queued
            .iter()
            .copied()
            .filter(|&j| {
                !self.never[j]
                    && matches!(self.jobs[j].request.gpu, crate::model::GpuRequest::Mig(_))
            })
            .collect();
        let cluster = &self.clusters[0];
        let fleet = cluster.fleet();
        let mut changes: Vec<(usize, usize, bool)> = Vec::new();
        let mut need = waiting.len();
        let mut spare = vec![false; self.fleet_cfg.len()];
        for (i, n) in fleet.nodes.iter().enumerate() {
            let p = n.pool.index();
            if n.health != Health::Healthy || self.fleet_cfg[p].mig_gpus_per_node == 0 {
                continue;
            }
            let idle_mig: Vec<usize> = (0..n.gpus.len())
                .filter(|&g| n.gpus[g].mig.is_some() && n.gpus[g].is_idle())
                .collect();
            if need == 0 {
                let keep = usize::from(!spare[p] && !idle_mig.is_empty());
                spare[p] |= keep == 1;
                changes.extend(idle_mig.iter().skip(keep).map(|&g| (i, g, false)));
            } else if idle_mig.is_empty() {
                if let Some(g) =
                    (0..n.gpus.len()).find(|&g| n.gpus[g].mig.is_none() && n.gpus[g].is_idle())
                {
                    changes.push((i, g, true));
                    need -= 1;
                }
            }
        }
        for (node, gpu, on) in changes {
            if self.clusters[0].set_mig_mode(NodeId(node as u32), gpu, on) {
                self.log(format_args!(
                    "node {node} gpu {gpu}: MIG {}",
                    if on {
                        "on (a MIG job waits)"
                    } else {
                        "off (no MIG work waiting; the GPU serves whole-GPU jobs)"
                    }
                ));
            }
        }
    }

    fn schedule_gantry(&mut self) {
        self.reclaim();
        self.repartition_mig();
        let limit = |k: Kind| match k {
            Kind::Training => Some(24.0 * 3600.0),
            Kind::Experiment => Some(4.0 * 3600.0),
            Kind::Notebook => Some(12.0 * 3600.0),
            Kind::Inference => None,
        };
        let mut pending = Vec::new();
        let mut running = Vec::new();
        for &j in self.queued.iter().chain(self.placed.iter()) {
            let (job, r) = (&self.jobs[j], &self.runs[j]);
            match r.state {
                JobState::Pending if !self.never[j] && r.awaiting == 0 => {
                    pending.push(PendingJob {
                        id: j as u64,
                        team: job.team,
                        class: job.class,
                        submitted: job.arrive,
                        request: job.request.clone(),
                        alternatives: Vec::new(),
                        held: false,
                        time_limit_s: limit(job.kind),
                    })
                }
                JobState::Running | JobState::Stopping => {
                    let progress = (self.now - r.started - r.overhead).max(0.0);
                    running.push(RunningJob {
                        id: j as u64,
                        team: job.team,
                        class: job.class,
                        started: r.started,
                        placement: r.placement.clone().expect("running has a placement"),
                        preemptible: job.preemptible && r.state == JobState::Running,
                        last_checkpoint: job
                            .checkpoint_s
                            .map(|c| r.started + r.overhead + (progress / c).floor() * c),
                        time_limit_s: limit(job.kind),
                        borrowed: r.borrowed,
                        signal: "SIGTERM".into(),
                        grace_s: 120.0,
                    })
                }
                _ => {}
            }
        }
        if pending.is_empty() {
            self.consolidate();
            return;
        }
        let config = CycleConfig::default();
        let out = run_cycle(
            &mut self.placer,
            &CycleInput {
                now: self.now,
                cluster: &self.clusters[0],
                teams: &self.teams,
                classes: &self.classes,
                usage: &self.usage,
                pending: &pending,
                running: &running,
                config: &config,
            },
        )
        .expect("the simulator builds valid cycle input");
        for d in out.decisions {
            match d {
                Decision::Start {
                    job,
                    placement,
                    borrowed,
                } => {
                    self.start(job as usize, placement, 0, borrowed);
                }
                Decision::Preempt {
                    victim,
                    for_job,
                    grace_s,
                    ..
                } => {
                    let v = victim as usize;
                    if self.runs[v].state != JobState::Running {
                        continue;
                    }
                    self.runs[v].state = JobState::Stopping;
                    let epoch = self.runs[v].epoch;
                    self.runs[for_job as usize].awaiting += 1;
                    self.out.preemptions += 1;
                    self.log(format_args!(
                        "preempt job {v} for job {for_job}: SIGTERM, grace {grace_s:.0}s"
                    ));
                    self.at(self.now + grace_s, Ev::Stopped(v, epoch));
                    self.runs[v].preemptor = Some(for_job as usize);
                }
                Decision::Reserve { .. } => {}
            }
        }
        // Jobs that fit nowhere ask for capacity, once per provisioning round.
        let mut waiting: Vec<usize> = Vec::new();
        for e in &out.explanations {
            let j = e.job as usize;
            let stuck = e.reason.waits_for_capacity();
            if stuck {
                waiting.push(j);
            }
        }
        waiting.sort_by_key(|&j| out.explanations.iter().position(|e| e.job as usize == j));
        self.defragment(&mut waiting);
        self.consolidate();
        self.grow(&waiting);
    }

    fn grow(&mut self, waiting: &[usize]) {
        // A class with patience waits for paid capacity before any is bought for it; the
        // world wakes when the first one's patience runs out.
        let mut waiting_now = Vec::with_capacity(waiting.len());
        for &j in waiting {
            let job = &self.jobs[j];
            if self.cfg.scale.may_buy_for(job.class, self.now - job.arrive) {
                waiting_now.push(j);
            } else {
                let at = job.arrive + self.cfg.scale.patience_s(job.class);
                self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
            }
        }
        let waiting = waiting_now;
        if waiting.is_empty() {
            return;
        }
        let lives: Vec<Life> = self.nodes.iter().map(|n| n.life).collect();
        let (offers, incoming) = offers(
            self.clusters[0].fleet(),
            &self.fleet_cfg,
            &lives,
            &self.interrupted,
        );
        let reqs: Vec<(u64, &crate::model::JobRequest)> = waiting
            .iter()
            .map(|&j| (j as u64, &self.jobs[j].request))
            .collect();
        let plan = scale_up(self.now, &offers, &incoming, &reqs, &self.cfg.scale);
        for s in plan {
            let p = s.pool.index();
            let absent: Vec<usize> = (0..self.nodes.len())
                .filter(|&i| self.nodes[i].pool.index() == p && self.nodes[i].life == Life::Absent)
                .take(s.nodes as usize)
                .collect();
            for &i in &absent {
                self.set_life(i, Life::Provisioning);
                let epoch = self.nodes[i].epoch;
                let delay = self.delay(i);
                self.at(self.now + delay, Ev::Ready(i, epoch));
            }
            self.out.scale_ups += 1;
            let path = self.clusters[0].fleet().pool_path(s.pool);
            let fallback = if s.spot_fallback {
                " (spot just interrupted: on-demand)"
            } else {
                ""
            };
            self.log(format_args!(
                "{path} +{} for job {}, +${:.2}/h{fallback}",
                absent.len(),
                s.for_job,
                s.added_per_hour
            ));
        }
    }

    fn scale_down(&mut self) {
        let lives: Vec<Life> = self.nodes.iter().map(|n| n.life).collect();
        let counts = pool_counts(self.clusters[0].fleet(), self.fleet_cfg.len(), &lives);
        let mins: Vec<u32> = self.fleet_cfg.iter().map(|p| p.min_nodes).collect();
        let idle: Vec<NodeIdle> = (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].life == Life::Up
                    && self.pool_cfg(i).capacity != CapacityType::Reserved
            })
            .map(|i| NodeIdle {
                node: NodeId(i as u32),
                pool: self.nodes[i].pool,
                empty_since: self.nodes[i].empty_since,
            })
            .collect();
        for n in scale_down(self.now, &idle, &counts, &mins, &self.cfg.scale) {
            let i = n.index();
            let empty = self.now - self.nodes[i].empty_since.unwrap_or(self.now);
            self.set_life(i, Life::Absent);
            self.out.scale_downs += 1;
            let path = self.clusters[0].fleet().pool_path(self.nodes[i].pool);
            let price = self.pool_cfg(i).price_per_hour;
            self.log(format_args!(
                "{path} -1 (node {i} empty {:.0} min), -${price:.2}/h",
                empty / 60.0
            ));
        }
    }

    /// Idle reclamation from utilization samples, applied at once (the policy a team would
    /// turn on in the daemon): notebooks idle past the window are closed, checkpointing jobs
    /// requeued.
    fn reclaim(&mut self) {
        if self.now < self.next_reclaim {
            return;
        }
        self.next_reclaim = self.now + 300.0;
        let mut samples: Vec<(usize, Vec<Series>)> = Vec::new();
        for &j in &self.placed {
            let r = &self.runs[j];
            let (Some(p), JobState::Running) = (&r.placement, &r.state) else {
                continue;
            };
            let job = &self.jobs[j];
            let busy_pct = 100.0 * f64::from(job.useful_milli) / p.gpu_milli().max(1) as f64;
            let idle_at = r.started + job.active_s;
            let series = if self.now > idle_at {
                vec![(r.started, busy_pct), (idle_at, 0.0), (self.now, 0.0)]
            } else {
                vec![(r.started, busy_pct), (self.now, busy_pct)]
            };
            let gpus = p.nodes.iter().map(|n| n.gpus.len()).sum();
            samples.push((j, vec![series; gpus]));
        }
        let usages: Vec<JobUsage> = samples
            .iter()
            .map(|(j, s)| JobUsage {
                job: *j as u64,
                placement: self.runs[*j].placement.as_ref().expect("running"),
                checkpoints: self.jobs[*j].checkpoint_s.is_some(),
                // The simulation's own model: a notebook idle past the window is closed.
                interactive: false,
                window_s: None,
                gpu_samples: s,
            })
            .collect();
        let plan = reclaim_plan(self.now, &usages, &self.cfg.reclaim);
        drop(usages);
        for item in plan.items {
            let j = item.job as usize;
            let r = &self.runs[j];
            let left = (r.started + self.jobs[j].work_s - self.now).max(0.0);
            self.out.reclaimed_gpu_hours += item.gpus * left / 3600.0;
            self.out.reclaimed_jobs += 1;
            let next = if self.jobs[j].checkpoint_s.is_some() {
                JobState::Pending
            } else {
                JobState::Closed
            };
            self.stop(j, false, true, next);
            self.log(format_args!(
                "reclaim job {j}: {} GPU(s) idle {:.0} min, -${:.2}/h",
                item.gpus,
                item.idle_for_s / 60.0,
                item.dollars_per_hour
            ));
        }
    }

    /// Runs to the end of the window and returns what the setup achieved.
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
        let o = &mut self.out;
        let paid = o.paid_gpu_hours.max(1e-9);
        o.utilization = o.busy_gpu_hours / paid;
        o.allocation = o.allocated_gpu_hours / paid;
        o.cost_per_useful_gpu_hour = o.spend_usd / o.useful_gpu_hours.max(1e-9);
        o.idle = self.idle.shares(o.allocated_gpu_hours - o.busy_gpu_hours);
        o.by_capacity = [
            CapacityType::OnDemand,
            CapacityType::Spot,
            CapacityType::Reserved,
        ]
        .iter()
        .map(|c| {
            let u = self.capacity_use[*c as usize];
            CapacityUse {
                capacity: c.to_string(),
                paid_gpu_hours: u.0,
                allocated_gpu_hours: u.1,
                spend_usd: u.2,
            }
        })
        .collect();
        o.by_pool = self
            .pool_use
            .iter()
            .enumerate()
            .filter(|(_, u)| u.0 > 0.0)
            .map(|(i, u)| PoolUse {
                pool: self.clusters[0]
                    .fleet()
                    .pool_path(crate::model::PoolId(i as u32)),
                paid_gpu_hours: u.0,
                held_gpu_hours: u.1,
                idle: self.idle.pool_shares(i),
            })
            .collect();
        o.spend_by_team = self
            .teams
            .iter()
            .zip(&self.team_spend)
            .filter(|(_, s)| s.1 > 0.0)
            .map(|(t, s)| TeamSpend {
                team: t.name.clone(),
                spend_usd: s.0,
                gpu_hours: s.1,
            })
            .collect();
        o.idle_spend_usd = o.spend_usd - self.team_spend.iter().map(|s| s.0).sum::<f64>();
        o.queue_wait = [SERVING, PRODUCTION, EXPERIMENT]
            .iter()
            .map(|&c| {
                let mut w = std::mem::take(&mut self.waits[c]);
                w.sort_by(f64::total_cmp);
                ClassWait {
                    class: self.classes[c].name.clone(),
                    jobs: w.len(),
                    p50_s: crate::stats::quantile(&w, 0.5),
                    p99_s: crate::stats::quantile(&w, 0.99),
                }
            })
            .collect();
        o.useful_gpu_hours_by_kind = Kind::ALL
            .iter()
            .map(|k| (k.name().to_string(), self.useful_by_kind[*k as usize]))
            .collect();
        o.event_hash = format!("{:x}", self.hash.finalize());
        self.out
    }
}
