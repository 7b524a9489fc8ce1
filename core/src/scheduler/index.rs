//! The cluster state the scheduler reads: the fleet plus an index that groups nodes whose free
//! state is identical (same pool, health, free CPU and memory, same multiset of GPU states).
//!
//! Every policy scores a node from its pool and free state alone, so scoring one node per class
//! is exact, not an approximation — and a fleet of 10,000 nodes has far fewer classes than
//! nodes (all idle nodes of a pool are one class). Within a class the lowest node id is taken,
//! which keeps decisions deterministic.

use crate::model::{AllocError, DomainLevel, Fleet, Gpu, Health, NodeId, Placement, PoolId};
use std::collections::{BTreeSet, HashMap};

/// The part of a node that decides how it scores.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NodeState {
    pub pool: PoolId,
    pub health: Health,
    pub cpu_free: u32,
    pub mem_free: u64,
    /// The node's GPUs, sorted, so that GPU order inside a node does not split classes.
    pub gpus: Box<[Gpu]>,
}

#[derive(Clone, Debug)]
pub struct Class {
    pub state: NodeState,
    pub summary: Summary,
    pub members: BTreeSet<u32>,
}

/// What a class can offer at most, so that most classes are rejected without scoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Idle GPUs not in MIG mode.
    pub idle_gpus: u8,
    /// The largest free share on a GPU not in MIG mode.
    pub max_share: u16,
    /// GPUs in MIG mode with at least one free compute slice.
    pub mig_open: u8,
}

impl Summary {
    fn of(state: &NodeState) -> Summary {
        let mut s = Summary::default();
        for g in state.gpus.iter() {
            match g.mig {
                None => {
                    s.max_share = s.max_share.max(g.milli_free);
                    if g.milli_free == crate::model::MILLI_PER_GPU {
                        s.idle_gpus = s.idle_gpus.saturating_add(1);
                    }
                }
                Some(m) if m.compute_used < 7 => s.mig_open = s.mig_open.saturating_add(1),
                Some(_) => {}
            }
        }
        s
    }
}

/// The part of a live class that the first filter reads, packed densely so that scanning every
/// class on every decision stays in cache.
#[derive(Clone, Copy, Debug)]
pub struct Header {
    pub class: u32,
    pub pool: PoolId,
    pub cpu_free: u32,
    pub mem_free: u64,
    pub healthy: bool,
    pub summary: Summary,
}

/// Nodes alike in what stays put while jobs come and go — their pool and their GPUs' modes —
/// counted: what an empty fleet could host is decided per kind (a few per pool), not per class
/// (thousands on a busy fleet), when a job is explained.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    pub pool: PoolId,
    /// GPUs not in MIG mode.
    pub plain: u16,
    /// At least one GPU in MIG mode.
    pub mig: bool,
    pub nodes: usize,
}

fn kind_of(fleet: &Fleet, id: usize) -> (PoolId, u16, bool) {
    let n = &fleet.nodes[id];
    let plain = n.gpus.iter().filter(|g| g.mig.is_none()).count();
    let plain = u16::try_from(plain).unwrap_or(u16::MAX);
    (n.pool, plain, n.gpus.iter().any(|g| g.mig.is_some()))
}

/// The fleet and its class index, kept in step by [`Cluster::allocate`] and friends.
#[derive(Debug)]
pub struct Cluster {
    fleet: Fleet,
    classes: Vec<Class>,
    kinds: Vec<Kind>,
    /// The most nodes one NVLink domain, one leaf and one zone hold (a gang larger than that
    /// cannot sit in one domain of that level: no need to group nodes to find out).
    largest_domain: [usize; 3],
    /// Each node's NVLink domain, leaf (u32::MAX: none) and zone, packed: a gang's search
    /// reads them for every eligible node.
    node_domains: Vec<[u32; 3]>,
    /// Live classes' headers by pool and idle GPUs (`live[pool][idle]`), each list densely
    /// packed: a job asking n whole GPUs reads only the lists of pools it may use with n or
    /// more idle. `slot[class]` is a class's index in its list (or u32::MAX).
    live_headers: Vec<Vec<Vec<Header>>>,
    slot: Vec<u32>,
    by_state: HashMap<NodeState, u32, super::hash::FastHash>,
    node_class: Vec<u32>,
    live: usize,
    /// Changes whenever class ids are renumbered, so callers can drop caches keyed by them.
    epoch: u64,
}

static NEXT_EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

fn new_epoch() -> u64 {
    NEXT_EPOCH.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

impl Clone for Cluster {
    /// A copy gets its own epoch: its class ids will diverge from the original's, so caches
    /// keyed by class id must not carry over.
    fn clone(&self) -> Self {
        Cluster {
            fleet: self.fleet.clone(),
            classes: self.classes.clone(),
            kinds: self.kinds.clone(),
            largest_domain: self.largest_domain,
            node_domains: self.node_domains.clone(),
            live_headers: self.live_headers.clone(),
            slot: self.slot.clone(),
            by_state: self.by_state.clone(),
            node_class: self.node_class.clone(),
            live: self.live,
            epoch: new_epoch(),
        }
    }

    /// Into the allocations already there: a forward run copies the present's cluster at
    /// every cycle. Every field is named: one added fails to compile here rather than going
    /// uncopied.
    fn clone_from(&mut self, source: &Self) {
        let Cluster {
            fleet,
            classes,
            kinds,
            largest_domain,
            node_domains,
            live_headers,
            slot,
            by_state,
            node_class,
            live,
            epoch: _,
        } = source;
        self.fleet.clone_from(fleet);
        self.classes.clone_from(classes);
        self.kinds.clone_from(kinds);
        self.largest_domain = *largest_domain;
        self.node_domains.clone_from(node_domains);
        self.live_headers.clone_from(live_headers);
        self.slot.clone_from(slot);
        self.by_state.clone_from(by_state);
        self.node_class.clone_from(node_class);
        self.live = *live;
        // A copy gets its own epoch, as `clone` gives it.
        self.epoch = new_epoch();
    }
}

fn state_of(fleet: &Fleet, id: usize) -> NodeState {
    let n = &fleet.nodes[id];
    let mut gpus: Box<[Gpu]> = n.gpus.clone().into_boxed_slice();
    gpus.sort_unstable();
    NodeState {
        pool: n.pool,
        health: n.health,
        cpu_free: n.cpu_free,
        mem_free: n.mem_free,
        gpus,
    }
}

impl Cluster {
    pub fn new(fleet: Fleet) -> Self {
        let mut c = Cluster {
            node_class: vec![u32::MAX; fleet.nodes.len()],
            fleet,
            classes: Vec::new(),
            kinds: Vec::new(),
            largest_domain: [0; 3],
            node_domains: Vec::new(),
            live_headers: Vec::new(),
            slot: Vec::new(),
            by_state: HashMap::default(),
            live: 0,
            epoch: new_epoch(),
        };
        for id in 0..c.fleet.nodes.len() {
            c.reindex(id);
            c.count_kind(id, 1);
        }
        c.node_domains = c
            .fleet
            .nodes
            .iter()
            .map(|n| [n.nvlink.0, n.leaf.map_or(u32::MAX, |l| l.0), n.zone.0])
            .collect();
        for (k, level) in [DomainLevel::Nvlink, DomainLevel::Leaf, DomainLevel::Zone]
            .into_iter()
            .enumerate()
        {
            let mut n = vec![0usize; c.domain_count(level)];
            for id in 0..c.node_domains.len() {
                if let Some(x) = c.domain(id as u32, level).and_then(|d| n.get_mut(d)) {
                    *x += 1;
                }
            }
            c.largest_domain[k] = n.into_iter().max().unwrap_or(0);
        }
        c
    }

    /// How many domains of `level` the fleet has (their ids are below it).
    pub fn domain_count(&self, level: DomainLevel) -> usize {
        match level {
            DomainLevel::Node => self.fleet.nodes.len(),
            DomainLevel::Nvlink => self.fleet.nvlink_domains.len(),
            DomainLevel::Leaf => self.fleet.leaves.len(),
            DomainLevel::Zone => self.fleet.zones.len(),
        }
    }

    /// Node `node`'s domain at `level` (None: it has none, e.g. no leaf).
    pub fn domain(&self, node: u32, level: DomainLevel) -> Option<usize> {
        let d = self.node_domains.get(node as usize)?;
        let id = match level {
            DomainLevel::Node => node,
            DomainLevel::Nvlink => d[0],
            DomainLevel::Leaf => d[1],
            DomainLevel::Zone => d[2],
        };
        (id != u32::MAX).then_some(id as usize)
    }

    /// The most nodes one domain of `level` holds (NVLink domain, leaf or zone; 1 per node).
    pub fn largest_domain(&self, level: DomainLevel) -> usize {
        match level {
            DomainLevel::Node => 1,
            DomainLevel::Nvlink => self.largest_domain[0],
            DomainLevel::Leaf => self.largest_domain[1],
            DomainLevel::Zone => self.largest_domain[2],
        }
    }

    /// Adds `delta` (±1) nodes to node `id`'s kind.
    fn count_kind(&mut self, id: usize, delta: isize) {
        let (pool, plain, mig) = kind_of(&self.fleet, id);
        let at = self
            .kinds
            .iter()
            .position(|k| k.pool == pool && k.plain == plain && k.mig == mig);
        let at = at.unwrap_or_else(|| {
            self.kinds.push(Kind {
                pool,
                plain,
                mig,
                nodes: 0,
            });
            self.kinds.len() - 1
        });
        let k = &mut self.kinds[at];
        k.nodes = k.nodes.saturating_add_signed(delta);
        if k.nodes == 0 {
            self.kinds.swap_remove(at);
        }
    }

    /// The fleet's nodes by pool and GPU modes (see [`Kind`]), each kind once.
    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    pub fn fleet(&self) -> &Fleet {
        &self.fleet
    }

    /// Gives the fleet back, e.g. to persist it.
    pub fn into_fleet(self) -> Fleet {
        self.fleet
    }

    /// Classes that have at least one node, with their ids.
    pub fn classes(&self) -> impl Iterator<Item = &Class> {
        self.classes.iter().filter(|c| !c.members.is_empty())
    }

    /// Headers of the live classes in `pool` with at least `idle` idle GPUs (not in MIG
    /// mode), in no particular (but deterministic) order.
    pub fn headers_in(&self, pool: PoolId, idle: u8) -> impl Iterator<Item = &Header> {
        self.live_headers
            .get(pool.index())
            .into_iter()
            .flat_map(move |by_idle| by_idle.iter().skip(usize::from(idle)))
            .flatten()
    }

    /// The list a class's header is in.
    fn list_of(&self, cid: u32) -> (usize, usize) {
        let c = &self.classes[cid as usize];
        (c.state.pool.index(), usize::from(c.summary.idle_gpus))
    }

    /// The header of the class node `id` is in now.
    pub fn header_of(&self, id: NodeId) -> Option<&Header> {
        let cid = *self.node_class.get(id.index())?;
        let at = *self.slot.get(cid as usize)?;
        let (pool, idle) = self.list_of(cid);
        self.live_headers.get(pool)?.get(idle)?.get(at as usize)
    }

    pub fn class(&self, id: u32) -> &Class {
        &self.classes[id as usize]
    }

    /// Identifies this cluster's numbering of classes (unique across clusters).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    pub fn class_count(&self) -> usize {
        self.live
    }

    pub fn allocate(&mut self, placement: &Placement) -> Result<(), AllocError> {
        self.fleet.allocate(placement)?;
        for g in &placement.nodes {
            self.reindex(g.node.index());
        }
        Ok(())
    }

    pub fn release(&mut self, placement: &Placement) -> Result<(), AllocError> {
        self.fleet.release(placement)?;
        for g in &placement.nodes {
            self.reindex(g.node.index());
        }
        Ok(())
    }

    /// Switches an idle GPU into or out of MIG mode (what an operator's MIG manager does while
    /// nothing runs on it). False, and nothing changed, if the GPU is busy, does not exist, or
    /// its model has no MIG geometry.
    pub fn set_mig_mode(&mut self, node: NodeId, gpu: usize, on: bool) -> bool {
        let Some(n) = self.fleet.nodes.get(node.index()) else {
            return false;
        };
        let supports = n.model.is_some_and(|m| self.fleet.model(m).mig.is_some());
        let Some(g) = n.gpus.get(gpu) else {
            return false;
        };
        if !g.is_idle() || g.mig.is_some() == on || (on && !supports) {
            return false;
        }
        self.count_kind(node.index(), -1);
        self.fleet.nodes[node.index()].gpus[gpu].mig = on.then(crate::model::MigState::default);
        self.count_kind(node.index(), 1);
        self.reindex(node.index());
        true
    }

    pub fn set_health(&mut self, node: NodeId, health: Health) {
        if let Some(n) = self.fleet.nodes.get_mut(node.index()) {
            n.health = health;
            self.reindex(node.index());
        }
    }

    fn reindex(&mut self, id: usize) {
        let state = state_of(&self.fleet, id);
        let old = self.node_class[id];
        if old != u32::MAX {
            let class = &mut self.classes[old as usize];
            if class.state == state {
                return;
            }
            class.members.remove(&(id as u32));
            if class.members.is_empty() {
                self.live -= 1;
                self.unlist(old);
            }
        }
        let next = self.classes.len() as u32;
        let cid = *self.by_state.entry(state.clone()).or_insert(next);
        if cid == next {
            self.classes.push(Class {
                summary: Summary::of(&state),
                state,
                members: BTreeSet::new(),
            });
        }
        let class = &mut self.classes[cid as usize];
        let was_empty = class.members.is_empty();
        class.members.insert(id as u32);
        if was_empty {
            self.live += 1;
            self.list(cid);
        }
        self.node_class[id] = cid;
        if self.classes.len() > 2 * self.live + 64 {
            self.compact();
        }
    }

    fn list(&mut self, cid: u32) {
        let c = &self.classes[cid as usize];
        if self.slot.len() <= cid as usize {
            self.slot.resize(cid as usize + 1, u32::MAX);
        }
        let (pool, idle) = self.list_of(cid);
        if self.live_headers.len() <= pool {
            self.live_headers.resize_with(pool + 1, Vec::new);
        }
        if self.live_headers[pool].len() <= idle {
            self.live_headers[pool].resize_with(idle + 1, Vec::new);
        }
        let list = &mut self.live_headers[pool][idle];
        self.slot[cid as usize] = list.len() as u32;
        list.push(Header {
            class: cid,
            pool: c.state.pool,
            cpu_free: c.state.cpu_free,
            mem_free: c.state.mem_free,
            healthy: c.state.health == Health::Healthy,
            summary: c.summary,
        });
    }

    fn unlist(&mut self, cid: u32) {
        let at = self.slot[cid as usize];
        self.slot[cid as usize] = u32::MAX;
        let (pool, idle) = self.list_of(cid);
        let list = &mut self.live_headers[pool][idle];
        list.swap_remove(at as usize);
        if let Some(moved) = list.get(at as usize) {
            self.slot[moved.class as usize] = at;
        }
    }

    /// Drops empty classes so a long-running daemon's index does not grow without bound.
    fn compact(&mut self) {
        self.epoch = new_epoch();
        let old = std::mem::take(&mut self.classes);
        self.by_state.clear();
        self.live_headers.clear();
        self.slot.clear();
        for class in old.into_iter().filter(|c| !c.members.is_empty()) {
            let cid = self.classes.len() as u32;
            for &m in &class.members {
                self.node_class[m as usize] = cid;
            }
            self.by_state.insert(class.state.clone(), cid);
            self.classes.push(class);
            self.list(cid);
        }
    }
}
