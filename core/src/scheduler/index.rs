//! The cluster state the scheduler reads: the fleet plus an index that groups nodes whose free
//! state is identical (same pool, health, free CPU and memory, same multiset of GPU states).
//!
//! Every policy scores a node from its pool and free state alone, so scoring one node per class
//! is exact, not an approximation — and a fleet of 10,000 nodes has far fewer classes than
//! nodes (all idle nodes of a pool are one class). Within a class the lowest node id is taken,
//! which keeps decisions deterministic.

use crate::model::{AllocError, Fleet, Gpu, Health, NodeId, Placement, PoolId};
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

/// The fleet and its class index, kept in step by [`Cluster::allocate`] and friends.
#[derive(Debug)]
pub struct Cluster {
    fleet: Fleet,
    classes: Vec<Class>,
    /// Live classes, densely packed; `slot[class]` is a class's index here (or u32::MAX).
    live_headers: Vec<Header>,
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
            live_headers: self.live_headers.clone(),
            slot: self.slot.clone(),
            by_state: self.by_state.clone(),
            node_class: self.node_class.clone(),
            live: self.live,
            epoch: new_epoch(),
        }
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
            live_headers: Vec::new(),
            slot: Vec::new(),
            by_state: HashMap::default(),
            live: 0,
            epoch: new_epoch(),
        };
        for id in 0..c.fleet.nodes.len() {
            c.reindex(id);
        }
        c
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

    /// Headers of the live classes, in no particular (but deterministic) order.
    pub fn headers(&self) -> &[Header] {
        &self.live_headers
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
        self.fleet.nodes[node.index()].gpus[gpu].mig = on.then(crate::model::MigState::default);
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
        self.slot[cid as usize] = self.live_headers.len() as u32;
        self.live_headers.push(Header {
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
        self.live_headers.swap_remove(at as usize);
        if let Some(moved) = self.live_headers.get(at as usize) {
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
