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

#[derive(Debug)]
pub struct Class {
    pub state: NodeState,
    pub members: BTreeSet<u32>,
}

/// The fleet and its class index, kept in step by [`Cluster::allocate`] and friends.
#[derive(Debug)]
pub struct Cluster {
    fleet: Fleet,
    classes: Vec<Class>,
    by_state: HashMap<NodeState, u32>,
    node_class: Vec<u32>,
    live: usize,
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
            by_state: HashMap::new(),
            live: 0,
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

    /// Classes that have at least one node.
    pub fn classes(&self) -> impl Iterator<Item = &Class> {
        self.classes.iter().filter(|c| !c.members.is_empty())
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
            }
        }
        let next = self.classes.len() as u32;
        let cid = *self.by_state.entry(state.clone()).or_insert(next);
        if cid == next {
            self.classes.push(Class {
                state,
                members: BTreeSet::new(),
            });
        }
        let class = &mut self.classes[cid as usize];
        if class.members.is_empty() {
            self.live += 1;
        }
        class.members.insert(id as u32);
        self.node_class[id] = cid;
        if self.classes.len() > 4 * self.live + 256 {
            self.compact();
        }
    }

    /// Drops empty classes so a long-running daemon's index does not grow without bound.
    fn compact(&mut self) {
        let old = std::mem::take(&mut self.classes);
        self.by_state.clear();
        for class in old.into_iter().filter(|c| !c.members.is_empty()) {
            let cid = self.classes.len() as u32;
            for &m in &class.members {
                self.node_class[m as usize] = cid;
            }
            self.by_state.insert(class.state.clone(), cid);
            self.classes.push(class);
        }
    }
}
