//! What the simulated backend's nodes go through, shared by `gantry sim` (the world) and the
//! daemon's live demo: provisioning, up, a spot notice, gone, failed and repaired. Which of
//! these are paid, what the scheduler may place on, and the offers elastic pools make.

use crate::config::fleet::PoolConfig;
use crate::model::{CapacityType, Fleet, Health, PoolId};
use crate::scheduler::rng::Rng;
use crate::scheduler::scale::PoolOffer;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Life {
    /// Not bought (an elastic pool below its maximum) or given back.
    Absent,
    Provisioning,
    Up,
    /// Spot notice received: runs what it has, takes nothing new.
    Noticed,
    /// Being given back by consolidation: its jobs checkpoint and move to capacity already
    /// paid for; takes nothing new, goes once empty.
    Draining,
    /// Failed on-prem node, paid while it is repaired.
    Failed,
}

impl Life {
    /// Whether the provider bills for the node (provisioning time is billed).
    pub fn paid(self) -> bool {
        !matches!(self, Life::Absent)
    }
    /// What the scheduler sees.
    pub fn health(self) -> Health {
        match self {
            Life::Up => Health::Healthy,
            Life::Noticed | Life::Draining => Health::Cordoned,
            _ => Health::Down,
        }
    }
    /// Counts toward a pool's size (for its maximum and minimum).
    pub fn counted(self) -> bool {
        matches!(
            self,
            Life::Provisioning | Life::Up | Life::Noticed | Life::Draining
        )
    }
}

/// The provider's notice before it takes a spot node back.
pub const SPOT_NOTICE_S: f64 = 120.0;

/// Seconds until the next event of a Poisson process with `per_hour` events an hour.
pub fn draw_after(rng: &mut Rng, per_hour: f64) -> f64 {
    -(1.0 - rng.unit()).ln() / per_hour * 3600.0
}

/// A pool's provisioning delay (default 5 minutes).
pub fn provisioning_delay(p: &PoolConfig) -> f64 {
    p.provisioning_delay
        .as_deref()
        .and_then(crate::spec::parse_duration)
        .unwrap_or(300.0)
}

/// Each node's life at start: the first `nodes` of every pool up, the rest absent. `fleet`
/// holds every pool at its maximum (`fleet_sized`).
pub fn start_lives(fleet: &Fleet, pools: &[PoolConfig]) -> Vec<Life> {
    let mut seen = vec![0u32; pools.len()];
    fleet
        .nodes
        .iter()
        .map(|n| {
            let p = n.pool.index();
            seen[p] += 1;
            if seen[p] <= pools[p].nodes {
                Life::Up
            } else {
                Life::Absent
            }
        })
        .collect()
}

/// What each elastic (non-reserved) pool offers the scale-up planner, and how many of its
/// nodes are already on their way.
pub fn offers(
    fleet: &Fleet,
    pools: &[PoolConfig],
    lives: &[Life],
    interrupted: &[Option<f64>],
) -> (Vec<PoolOffer>, Vec<u32>) {
    let counts = pool_counts(fleet, pools.len(), lives);
    let mut coming = vec![0u32; pools.len()];
    for (n, life) in fleet.nodes.iter().zip(lives) {
        if *life == Life::Provisioning {
            coming[n.pool.index()] += 1;
        }
    }
    let mut out = Vec::new();
    let mut incoming = Vec::new();
    for (i, p) in pools.iter().enumerate() {
        if p.capacity == CapacityType::Reserved {
            continue;
        }
        let pool = fleet.pool(PoolId(i as u32));
        out.push(PoolOffer {
            pool: PoolId(i as u32),
            model: pool.model,
            gpus_per_node: pool.gpus_per_node,
            vram_mib: pool.model.map_or(0, |m| fleet.model(m).vram_mib),
            cpu_milli: pool.cpu_milli,
            mem_mib: pool.mem_mib,
            capacity: pool.capacity,
            price_per_hour: pool.price_per_hour,
            mig: p.mig_gpus_per_node > 0,
            nodes: counts[i],
            max_nodes: p.max_nodes.unwrap_or(p.nodes),
            last_interruption: interrupted.get(i).copied().flatten(),
        });
        incoming.push(coming[i]);
    }
    (out, incoming)
}

/// Nodes counted toward each pool's size, by pool index.
pub fn pool_counts(fleet: &Fleet, pools: usize, lives: &[Life]) -> Vec<u32> {
    let mut counts = vec![0u32; pools];
    for (n, life) in fleet.nodes.iter().zip(lives) {
        if life.counted() {
            counts[n.pool.index()] += 1;
        }
    }
    counts
}
