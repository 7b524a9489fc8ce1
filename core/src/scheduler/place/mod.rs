//! Placement: filter → score → select, over node classes (see `index.rs`).
//!
//! Single-node jobs take the best-scoring class and its lowest node id. Gangs (`nodes > 1`) are
//! all-or-nothing and land in the smallest topology domain that holds them — one NVLink domain,
//! else one InfiniBand leaf, else one zone; never across zones, regions or providers.

use super::frag::{FragKey, Measure, ShapeStats, Workload};
use super::hash::FastHash;
use super::index::{Class, Cluster, Header, Kind, NodeState};
use super::policy::Policy;
use super::rng::Rng;
use crate::model::{
    CapacityType, DomainLevel, Fleet, Gpu, GpuGrant, GpuRequest, GpuShare, JobRequest, NodeGrant,
    NodeId, Placement, MILLI_PER_GPU,
};
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::HashMap;

mod explain;
mod gang;

use explain::why_not;
pub use explain::{Block, Unplaceable};

/// The GPU choice on a node, by GPU *state* (mapped to a GPU index once the node is chosen).
#[derive(Clone, Copy, Debug, PartialEq)]
enum Pick {
    NoGpu,
    Whole,
    Share(Gpu),
    Mig(Gpu, u8),
}

/// Lexicographic score; lower wins.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Key {
    rank: u16,
    primary: f64,
    secondary: f64,
    price: f64,
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        self.rank
            .cmp(&other.rank)
            .then(self.primary.total_cmp(&other.primary))
            .then(self.secondary.total_cmp(&other.secondary))
            .then(self.price.total_cmp(&other.price))
    }
}

/// Rounds away float noise so that truly equal scores tie and price can decide.
fn quantize(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

struct Candidate<'a> {
    class: &'a Class,
    key: Key,
    pick: Pick,
}

impl Candidate<'_> {
    /// The better one-node choice first: the lower key, then the class holding the lower
    /// node id (no two classes share a node: a total order).
    fn order(&self, other: &Candidate) -> Ordering {
        self.key
            .cmp(&other.key)
            .then(self.class.members.first().cmp(&other.class.members.first()))
    }

    fn before(&self, other: &Candidate) -> bool {
        self.order(other) == Ordering::Less
    }
}

/// Up to 16 distinct GPU choices on one node, kept inline: this runs for every class on every
/// decision. A node with more distinct GPU states offers its first 16.
#[derive(Clone, Copy)]
struct Picks {
    items: [Pick; 16],
    len: u8,
}

impl Picks {
    fn new() -> Picks {
        Picks {
            items: [Pick::NoGpu; 16],
            len: 0,
        }
    }
    fn as_slice(&self) -> &[Pick] {
        &self.items[..usize::from(self.len)]
    }
    fn push_distinct(&mut self, pick: Pick) {
        if usize::from(self.len) < self.items.len() && !self.as_slice().contains(&pick) {
            self.items[usize::from(self.len)] = pick;
            self.len += 1;
        }
    }
}

/// A placement policy with the state it learns (the shape distribution) and its memo. A copy
/// places as the original would (a start estimate runs the policy forward on one).
#[derive(Clone)]
pub struct Placer {
    policy: Policy,
    stats: ShapeStats,
    workload: Workload,
    /// A distribution given up front is kept as is (FGD as published).
    fixed: bool,
    memo: HashMap<FragKey, f64, FastHash>,
    /// Best (primary, secondary, pick) per job shape and class id: `evals[shape][class]`.
    /// Valid for one cluster epoch and one workload, because a class's state never changes;
    /// indexed, not hashed, because it is read for every class on every decision.
    evals: Vec<Vec<Cached>>,
    shape_ids: HashMap<EvalShape, u32, FastHash>,
    cached_entries: usize,
    evals_epoch: u64,
    /// Per-pool terms of the current decision, kept to reuse the allocation.
    pool_buf: Vec<Option<(u16, f64)>>,
}

/// What a class evaluation depends on besides the class and the policy's workload.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct EvalShape {
    gpu: GpuRequest,
    cpu_milli: u32,
    mem_mib: u64,
    vram_mib: u32,
}

#[derive(Clone, Copy)]
enum Cached {
    Unknown,
    NoFit,
    Best(f64, f64, Pick),
}

impl Placer {
    pub fn new(policy: Policy) -> Placer {
        Placer {
            policy,
            stats: ShapeStats::default(),
            workload: Workload::default(),
            fixed: false,
            memo: HashMap::default(),
            evals: Vec::new(),
            shape_ids: HashMap::default(),
            cached_entries: 0,
            evals_epoch: 0,
            pool_buf: Vec::new(),
        }
    }

    /// A placer that knows the workload's shape distribution in advance.
    pub fn with_workload<'a>(
        policy: Policy,
        jobs: impl IntoIterator<Item = &'a JobRequest>,
    ) -> Placer {
        let mut p = Placer::new(policy);
        for j in jobs {
            p.stats.observe(j);
        }
        p.workload = p.stats.workload(p.uses_memory(), p.measure());
        p.fixed = true;
        p
    }

    pub fn policy(&self) -> Policy {
        self.policy
    }

    fn uses_memory(&self) -> bool {
        self.policy == Policy::Gantry
    }

    fn measure(&self) -> Measure {
        if self.policy == Policy::Gantry {
            Measure::Blend
        } else {
            Measure::OnePod
        }
    }

    fn forget_evaluations(&mut self) {
        self.evals.clear();
        self.shape_ids.clear();
        self.cached_entries = 0;
    }

    /// Tells the policy that a job arrived (placed or not): the online shape distribution.
    pub fn observe(&mut self, job: &JobRequest) {
        if self.fixed || !self.policy.is_fragmentation_aware() {
            return;
        }
        if self.stats.observe(job) {
            self.workload = self.stats.workload(self.uses_memory(), self.measure());
            self.memo.clear();
            self.forget_evaluations();
        }
    }

    fn frag(&mut self, model: u16, cpu: u32, mem: u64, frees: &[u16]) -> f64 {
        match FragKey::new(model, cpu, mem, frees) {
            Some(k) => {
                if let Some(v) = self.memo.get(&k) {
                    return *v;
                }
                let v = self.workload.node_frag(model, cpu, mem, frees);
                if self.memo.len() > 1 << 20 {
                    self.memo.clear();
                }
                self.memo.insert(k, v);
                v
            }
            None => self.workload.node_frag(model, cpu, mem, frees),
        }
    }

    /// Decides where `job` goes. Pure: reads the cluster, changes only this placer's memo.
    pub fn place(
        &mut self,
        cluster: &Cluster,
        job: &JobRequest,
        seed: u64,
    ) -> Result<Placement, Unplaceable> {
        job.validate().map_err(|e| Unplaceable::Invalid {
            reason: e.to_string(),
        })?;
        let fleet = cluster.fleet();
        // Pool-level filters once per decision, not once per class.
        let mut pools = std::mem::take(&mut self.pool_buf);
        pools.clear();
        pools.extend(
            (0..fleet.pools.len()).map(|i| pool_terms(fleet, crate::model::PoolId(i as u32), job)),
        );
        if self.evals_epoch != cluster.epoch() || self.cached_entries > 1 << 22 {
            self.forget_evaluations();
            self.evals_epoch = cluster.epoch();
        }
        let shape = EvalShape {
            gpu: job.gpu,
            cpu_milli: job.cpu_milli,
            mem_mib: job.mem_mib,
            vram_mib: job.vram_mib,
        };
        let next_id = self.shape_ids.len() as u32;
        let shape_id = *self.shape_ids.entry(shape).or_insert(next_id) as usize;
        if shape_id == self.evals.len() {
            self.evals.push(Vec::new());
        }
        // A one-node job's best class is kept as the scan goes (no list of every class with
        // room); a gang, or a random pick, needs them all.
        let only_best = job.nodes == 1 && self.policy != Policy::Random;
        let candidates = self.scan(cluster, job, &pools, shape_id, only_best);
        let mut rng = Rng::new(seed);
        let result = if job.nodes == 1 {
            self.select_single(fleet, &candidates, job, &mut rng)
        } else {
            self.select_gang(cluster, &candidates, job, &mut rng)
        };
        let result = match result {
            Some(p) => Ok(p),
            // The best class could not be granted (not expected: its pick was feasible):
            // explain from every class with room, as for any refusal.
            None if only_best && !candidates.is_empty() => {
                let all = self.scan(cluster, job, &pools, shape_id, false);
                Err(why_not(fleet, cluster, &all, job))
            }
            None => Err(why_not(fleet, cluster, &candidates, job)),
        };
        self.pool_buf = pools;
        result
    }

    /// The classes with room for one member of `job` in the pools it may use, with their
    /// scores (cached per job shape and class); `only_best`: just the best one.
    fn scan<'c>(
        &mut self,
        cluster: &'c Cluster,
        job: &JobRequest,
        pools: &[Option<(u16, f64)>],
        shape_id: usize,
        only_best: bool,
    ) -> Vec<Candidate<'c>> {
        let fleet = cluster.fleet();
        let mut candidates = Vec::new();
        let mut best_so_far: Option<Candidate<'c>> = None;
        let idle = match job.gpu {
            GpuRequest::Whole(n) => n,
            _ => 0,
        };
        let usable = pools
            .iter()
            .enumerate()
            .filter_map(|(p, terms)| terms.map(|t| (p, t)));
        for (pool, (rank, price)) in usable {
            for h in cluster.headers_in(crate::model::PoolId(pool as u32), idle) {
                if !has_room(h, job) {
                    continue;
                }
                let class = cluster.class(h.class);
                let slot = h.class as usize;
                if self.evals[shape_id].len() <= slot {
                    let grow = slot + 1 - self.evals[shape_id].len();
                    self.cached_entries += grow;
                    self.evals[shape_id].resize(slot + 1, Cached::Unknown);
                }
                let best = match self.evals[shape_id][slot] {
                    Cached::Best(p, q, pick) => Some((p, q, pick)),
                    Cached::NoFit => None,
                    Cached::Unknown => {
                        let best = self.evaluate(fleet, class, job);
                        self.evals[shape_id][slot] =
                            best.map_or(Cached::NoFit, |(p, q, k)| Cached::Best(p, q, k));
                        best
                    }
                };
                let Some((primary, secondary, pick)) = best else {
                    continue;
                };
                let key = Key {
                    rank,
                    primary,
                    secondary,
                    price,
                };
                let c = Candidate { class, key, pick };
                if !only_best {
                    candidates.push(c);
                } else if best_so_far.as_ref().is_none_or(|b| c.before(b)) {
                    best_so_far = Some(c);
                }
            }
        }
        candidates.extend(best_so_far);
        candidates
    }

    /// The best pick on one class and its (primary, secondary) score; pool-level terms (model
    /// rank, price) are added by the caller.
    fn evaluate(
        &mut self,
        fleet: &Fleet,
        class: &Class,
        job: &JobRequest,
    ) -> Option<(f64, f64, Pick)> {
        let s = &class.state;
        let picks = feasible_picks(fleet, s, job);
        let mut best: Option<(f64, f64, Pick)> = None;
        let mut frag_before = None;
        for &pick in picks.as_slice() {
            let (primary, secondary) = self.score(fleet, s, job, pick, &mut frag_before);
            let (primary, secondary) = (quantize(primary), quantize(secondary));
            let better = best.as_ref().is_none_or(|(p, q, _)| {
                primary.total_cmp(p).then(secondary.total_cmp(q)) == Ordering::Less
            });
            if better {
                best = Some((primary, secondary, pick));
            }
        }
        best
    }

    /// (primary, secondary) for one pick on one class; lower is better.
    /// `frag_before` caches the class's own fragmentation across its picks.
    fn score(
        &mut self,
        fleet: &Fleet,
        s: &NodeState,
        job: &JobRequest,
        pick: Pick,
        frag_before: &mut Option<f64>,
    ) -> (f64, f64) {
        let pool = fleet.pool(s.pool);
        let cpu_after = f64::from(s.cpu_free - job.cpu_milli);
        let mem_after = (s.mem_free - job.mem_mib) as f64;
        let gpu_total = s.gpus.len() as f64 * f64::from(MILLI_PER_GPU);
        let free_before: u32 = s
            .gpus
            .iter()
            .filter(|g| g.mig.is_none())
            .map(|g| u32::from(g.milli_free))
            .sum();
        let taken = match (job.gpu, pick) {
            (GpuRequest::Whole(n), _) => u32::from(n) * u32::from(MILLI_PER_GPU),
            (GpuRequest::Fraction(m), _) => u32::from(m),
            _ => 0,
        };
        let gpu_after = f64::from(free_before - taken);
        let cpu_left = cpu_after / f64::from(pool.cpu_milli.max(1));
        let mem_left = mem_after / pool.mem_mib.max(1) as f64;
        let avg_left = if gpu_total > 0.0 {
            (cpu_left + mem_left + gpu_after / gpu_total) / 3.0
        } else {
            (cpu_left + mem_left) / 2.0
        };
        // The chosen GPU's free share after placement, in GPUs (0 = filled exactly).
        let chosen_left = match (pick, job.gpu) {
            (Pick::Share(g), GpuRequest::Fraction(m)) => f64::from(g.milli_free - m) / 1000.0,
            (Pick::Mig(g, _), GpuRequest::Mig(p)) => {
                let used = g.mig.map_or(0, |m| m.compute_used);
                f64::from(7 - used - p.compute) / 7.0
            }
            _ => 0.0,
        };
        match self.policy {
            Policy::Random => (0.0, 0.0),
            Policy::Spread => (-avg_left, -chosen_left),
            Policy::BestFit => (avg_left, chosen_left),
            Policy::Packing => {
                let node_used = s.gpus.iter().any(|g| !g.is_idle());
                let tier = match pick {
                    Pick::Share(g) if g.milli_free < MILLI_PER_GPU => 0.0,
                    Pick::Mig(g, _) if g.mig.is_some_and(|m| !m.is_empty()) => 0.0,
                    _ if node_used => 1.0,
                    _ => 2.0,
                };
                let gpu_left = if gpu_total > 0.0 {
                    gpu_after / gpu_total
                } else {
                    0.0
                };
                (tier + gpu_left, chosen_left)
            }
            Policy::Fgd | Policy::Gantry => {
                let delta = self.frag_delta(
                    s,
                    job,
                    pick,
                    pool.model.map_or(u16::MAX, |m| m.0),
                    frag_before,
                );
                // gantry breaks ties by GPU best fit: the fullest node, then the fullest GPU.
                let tie = if self.policy == Policy::Gantry {
                    let gpu_left = if gpu_total > 0.0 {
                        gpu_after / gpu_total
                    } else {
                        0.0
                    };
                    gpu_left + chosen_left
                } else {
                    0.0
                };
                (delta, tie)
            }
        }
    }

    /// Growth of the node's expected fragmentation if `pick` is taken.
    fn frag_delta(
        &mut self,
        s: &NodeState,
        job: &JobRequest,
        pick: Pick,
        model: u16,
        frag_before: &mut Option<f64>,
    ) -> f64 {
        if self.workload.is_empty() {
            return 0.0;
        }
        // Free shares on a stack buffer: this runs for every class on every decision.
        let mut stack = [0u16; 16];
        let mut heap = Vec::new();
        let plain = s
            .gpus
            .iter()
            .filter(|g| g.mig.is_none())
            .map(|g| g.milli_free);
        let frees: &mut [u16] = if s.gpus.len() <= stack.len() {
            let mut n = 0;
            for f in plain {
                stack[n] = f;
                n += 1;
            }
            &mut stack[..n]
        } else {
            heap.extend(plain);
            &mut heap
        };
        let before = match *frag_before {
            Some(v) => v,
            None => {
                let v = self.frag(model, s.cpu_free, s.mem_free, frees);
                *frag_before = Some(v);
                v
            }
        };
        match (pick, job.gpu) {
            (Pick::Whole, GpuRequest::Whole(n)) => {
                let mut left = n;
                for f in frees.iter_mut() {
                    if left > 0 && *f == MILLI_PER_GPU {
                        *f = 0;
                        left -= 1;
                    }
                }
            }
            (Pick::Share(g), GpuRequest::Fraction(m)) => {
                if let Some(f) = frees.iter_mut().find(|f| **f == g.milli_free) {
                    *f -= m;
                }
            }
            _ => {}
        }
        let after = self.frag(
            model,
            s.cpu_free - job.cpu_milli,
            s.mem_free - job.mem_mib,
            frees,
        );
        after - before
    }

    fn select_single(
        &self,
        fleet: &Fleet,
        cands: &[Candidate],
        job: &JobRequest,
        rng: &mut Rng,
    ) -> Option<Placement> {
        if cands.is_empty() {
            return None;
        }
        let (node, pick) = if self.policy == Policy::Random {
            let total: u64 = cands.iter().map(|c| c.class.members.len() as u64).sum();
            let mut at = rng.below(total);
            let c = cands
                .iter()
                .find(|c| {
                    let n = c.class.members.len() as u64;
                    if at < n {
                        true
                    } else {
                        at -= n;
                        false
                    }
                })
                .unwrap_or(&cands[0]);
            let node = *c
                .class
                .members
                .iter()
                .nth(at as usize)
                .unwrap_or(c.class.members.first()?);
            let picks = feasible_picks(fleet, &c.class.state, job);
            let pick = picks.as_slice()[rng.below(u64::from(picks.len)) as usize];
            (node, pick)
        } else {
            let best = cands.iter().min_by(|a, b| a.order(b))?;
            (*best.class.members.first()?, best.pick)
        };
        let grant = grant_on(fleet, NodeId(node), job, pick)?;
        let price = job_price_in_pool(fleet, fleet.node(NodeId(node)).pool, job);
        Some(Placement {
            level: DomainLevel::Node,
            nodes: vec![grant],
            price_per_hour: price,
        })
    }
}

/// Whether a search for `job`, which fitted nowhere before `freed` was given back, can find
/// room now: a one-node job fits only where room was just freed, so the fleet is searched
/// again only when one of those nodes takes it (the same answer as searching every time).
pub(super) fn may_fit_in_freed(cluster: &Cluster, job: &JobRequest, freed: &Placement) -> bool {
    job.nodes > 1 || freed.nodes.iter().any(|g| fits_on(cluster, job, g.node))
}

/// Whether one member of `job` fits on `node` now: the test [`Placer::place`] puts the node's
/// class to, for one node — what a search after freeing a few nodes needs to look at.
pub fn fits_on(cluster: &Cluster, job: &JobRequest, node: NodeId) -> bool {
    let fleet = cluster.fleet();
    cluster.header_of(node).is_some_and(|h| {
        pool_terms(fleet, h.pool, job).is_some()
            && has_room(h, job)
            && feasible_picks(fleet, &cluster.class(h.class).state, job).len > 0
    })
}

/// The cheap test that rejects most classes before any scoring: health, CPU, memory and the
/// class's GPU summary.
fn has_room(h: &Header, job: &JobRequest) -> bool {
    if !h.healthy || h.cpu_free < job.cpu_milli || h.mem_free < job.mem_mib {
        return false;
    }
    match job.gpu {
        GpuRequest::None => true,
        GpuRequest::Whole(n) => h.summary.idle_gpus >= n,
        GpuRequest::Fraction(m) => h.summary.max_share >= m,
        GpuRequest::Mig(_) => h.summary.mig_open > 0,
    }
}

/// A pool's model rank and the job's per-node price there, or `None` when the pool is out:
/// spot without `spot_ok`, not where the job's `infra` says, a model the job does not accept,
/// or over the job's price ceiling.
fn pool_terms(fleet: &Fleet, id: crate::model::PoolId, job: &JobRequest) -> Option<(u16, f64)> {
    let pool = fleet.pool(id);
    if pool.capacity == CapacityType::Spot && !job.spot_ok || !job.allows_pool(id) {
        return None;
    }
    let rank = match (job.gpu, pool.model) {
        (GpuRequest::None, _) => 0,
        (_, None) => return None,
        (_, Some(m)) => job.models.rank(m)?,
    };
    let price = job_price_in_pool(fleet, id, job);
    if let Some(max) = job.max_price_per_hour {
        if price * f64::from(job.nodes) > max + 1e-9 {
            return None;
        }
    }
    Some((rank, price))
}

/// The job's per-node price in a pool: its share of the node price (GPU share for GPU jobs,
/// CPU share for CPU-only jobs).
fn job_price_in_pool(fleet: &Fleet, id: crate::model::PoolId, job: &JobRequest) -> f64 {
    let pool = fleet.pool(id);
    match job.gpu {
        GpuRequest::None => {
            pool.price_per_hour * f64::from(job.cpu_milli) / f64::from(pool.cpu_milli.max(1))
        }
        g => pool.price_per_gpu_hour() * f64::from(g.milli()) / f64::from(MILLI_PER_GPU),
    }
}

/// The GPU choices a node state offers the job (distinct GPU states only).
fn feasible_picks(fleet: &Fleet, s: &NodeState, job: &JobRequest) -> Picks {
    let pool = fleet.pool(s.pool);
    let model = pool.model.map(|m| fleet.model(m));
    let mut picks = Picks::new();
    match job.gpu {
        GpuRequest::None => picks.push_distinct(Pick::NoGpu),
        GpuRequest::Whole(n) => {
            let vram_ok = model.is_some_and(|m| m.vram_mib >= job.vram_mib);
            let idle = s
                .gpus
                .iter()
                .filter(|g| g.mig.is_none() && g.milli_free == MILLI_PER_GPU)
                .count();
            if vram_ok && idle >= usize::from(n) {
                picks.push_distinct(Pick::Whole);
            }
        }
        GpuRequest::Fraction(m) => {
            for g in s.gpus.iter() {
                if g.mig.is_none() && g.milli_free >= m && g.vram_free_mib >= job.vram_mib {
                    picks.push_distinct(Pick::Share(*g));
                }
            }
        }
        GpuRequest::Mig(p) => {
            if let Some(geometry) = model.and_then(|m| m.mig.as_ref()) {
                for g in s.gpus.iter() {
                    if let Some(start) = g.mig.and_then(|st| st.best_start(geometry, p)) {
                        picks.push_distinct(Pick::Mig(*g, start));
                    }
                }
            }
        }
    }
    picks
}

/// Turns a pick on a chosen node into exact GPU grants.
fn grant_on(fleet: &Fleet, node: NodeId, job: &JobRequest, pick: Pick) -> Option<NodeGrant> {
    let n = fleet.node(node);
    let mut gpus = Vec::new();
    match (pick, job.gpu) {
        (Pick::NoGpu, _) => {}
        (Pick::Whole, GpuRequest::Whole(k)) => {
            for (i, g) in n.gpus.iter().enumerate() {
                if gpus.len() == usize::from(k) {
                    break;
                }
                if g.mig.is_none() && g.milli_free == MILLI_PER_GPU {
                    gpus.push(GpuGrant {
                        gpu: i as u8,
                        share: GpuShare::Whole,
                        vram_mib: g.vram_free_mib,
                    });
                }
            }
            if gpus.len() != usize::from(k) {
                return None;
            }
        }
        (Pick::Share(state), GpuRequest::Fraction(m)) => {
            let i = n.gpus.iter().position(|g| *g == state)?;
            gpus.push(GpuGrant {
                gpu: i as u8,
                share: GpuShare::Milli(m),
                vram_mib: job.vram_mib,
            });
        }
        (Pick::Mig(state, start), GpuRequest::Mig(profile)) => {
            let i = n.gpus.iter().position(|g| *g == state)?;
            gpus.push(GpuGrant {
                gpu: i as u8,
                share: GpuShare::Mig { profile, start },
                vram_mib: 0,
            });
        }
        _ => return None,
    }
    Some(NodeGrant {
        node,
        cpu_milli: job.cpu_milli,
        mem_mib: job.mem_mib,
        gpus,
    })
}

/// Expected fragmented and idle GPU capacity (milli-GPU) of a cluster, under `workload`.
pub fn cluster_fragmentation(cluster: &Cluster, workload: &Workload) -> (f64, f64) {
    let fleet = cluster.fleet();
    let (mut frag, mut idle) = (0.0, 0.0);
    for class in cluster.classes() {
        let s = &class.state;
        let frees: Vec<u16> = s
            .gpus
            .iter()
            .filter(|g| g.mig.is_none())
            .map(|g| g.milli_free)
            .collect();
        let model = fleet.pool(s.pool).model.map_or(u16::MAX, |m| m.0);
        let k = class.members.len() as f64;
        frag += k * workload.node_frag(model, s.cpu_free, s.mem_free, &frees);
        idle += k * frees.iter().map(|&f| f64::from(f)).sum::<f64>();
    }
    (frag, idle)
}
