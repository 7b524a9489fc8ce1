//! Each node's `Life` in the daemon's pools: what they are at start and what the elastic pools
//! offer the scale-up planner. `gantry sim` uses the same.

use crate::config::fleet::PoolConfig;
use crate::model::{pool_counts, CapacityType, Fleet, Life, PoolId};
use crate::scheduler::scale::PoolOffer;

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
