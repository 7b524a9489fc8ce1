//! What a node of an elastic or simulated pool goes through: provisioning, up, a spot notice,
//! draining, gone, failed and repaired. Which of these are paid for and what the scheduler may
//! place on; the daemon and `gantry sim` both track each node's `Life`.

use super::{Fleet, Health};

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
