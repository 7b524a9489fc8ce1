//! A placement names the exact nodes, GPUs and MIG slices a job gets. Allocating and releasing
//! one is the only way free capacity changes, and both check before they touch anything, so a
//! bad placement is refused whole instead of leaving a node half-updated.

use super::fleet::{Fleet, Gpu, NodeId, MILLI_PER_GPU};
use super::mig::MigProfile;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The topology domain a gang landed in, smallest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum DomainLevel {
    Node,
    Nvlink,
    Leaf,
    Zone,
}

impl fmt::Display for DomainLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DomainLevel::Node => "node",
            DomainLevel::Nvlink => "nvlink",
            DomainLevel::Leaf => "leaf",
            DomainLevel::Zone => "zone",
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuShare {
    Whole,
    Milli(u16),
    Mig { profile: MigProfile, start: u8 },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuGrant {
    /// Index of the GPU on its node.
    pub gpu: u8,
    pub share: GpuShare,
    pub vram_mib: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NodeGrant {
    pub node: NodeId,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub gpus: Vec<GpuGrant>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    pub level: DomainLevel,
    pub nodes: Vec<NodeGrant>,
    /// What the job costs per hour here: its share of each node's price.
    pub price_per_hour: f64,
}

impl NodeGrant {
    /// Milli-GPU this grant holds on its node (a MIG slice counts its compute slices of 7).
    pub fn gpu_milli(&self) -> u64 {
        self.gpus
            .iter()
            .map(|g| match g.share {
                GpuShare::Whole => u64::from(MILLI_PER_GPU),
                GpuShare::Milli(m) => u64::from(m),
                GpuShare::Mig { profile, .. } => u64::from(profile.compute) * 1000 / 7,
            })
            .sum()
    }
}

impl Placement {
    /// Milli-GPU the whole placement holds.
    pub fn gpu_milli(&self) -> u64 {
        self.nodes.iter().map(NodeGrant::gpu_milli).sum()
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum AllocError {
    #[error("node {0:?} does not exist")]
    NoNode(NodeId),
    #[error("node `{node}` GPU {gpu} does not exist")]
    NoGpu { node: String, gpu: u8 },
    #[error("node `{node}` lacks {what}")]
    Short { node: String, what: String },
    #[error("node `{node}` GPU {gpu}: {what}")]
    BadShare { node: String, gpu: u8, what: String },
    #[error("node {0:?} appears twice in one placement")]
    RepeatedNode(NodeId),
}

/// A node's free CPU, memory and GPUs after a change, committed together.
type Update = (NodeId, u32, u64, Vec<Gpu>);

impl Fleet {
    fn commit(&mut self, updates: Vec<Update>) {
        for (id, cpu_free, mem_free, gpus) in updates {
            let node = &mut self.nodes[id.index()];
            node.cpu_free = cpu_free;
            node.mem_free = mem_free;
            node.gpus = gpus;
        }
    }

    /// Takes the capacity a placement names. All-or-nothing: on error nothing changed.
    pub fn allocate(&mut self, placement: &Placement) -> Result<(), AllocError> {
        // Work on copies of the free counters and GPUs (not whole nodes: this runs on every
        // placement), then commit them together.
        let mut updates = Vec::with_capacity(placement.nodes.len());
        for (i, grant) in placement.nodes.iter().enumerate() {
            if placement.nodes[..i].iter().any(|g| g.node == grant.node) {
                return Err(AllocError::RepeatedNode(grant.node));
            }
            let node = self
                .nodes
                .get(grant.node.index())
                .ok_or(AllocError::NoNode(grant.node))?;
            let short = |what: String| AllocError::Short {
                node: node.name.clone(),
                what,
            };
            let cpu_free = node
                .cpu_free
                .checked_sub(grant.cpu_milli)
                .ok_or_else(|| short(format!("CPU: wants {} milli", grant.cpu_milli)))?;
            let mem_free = node
                .mem_free
                .checked_sub(grant.mem_mib)
                .ok_or_else(|| short(format!("memory: wants {} MiB", grant.mem_mib)))?;
            let mut gpus = node.gpus.clone();
            let geometry = node.model.and_then(|m| self.models[m.index()].mig.as_ref());
            for g in &grant.gpus {
                let bad = |what: &str| AllocError::BadShare {
                    node: node.name.clone(),
                    gpu: g.gpu,
                    what: what.to_string(),
                };
                let gpu = gpus.get_mut(usize::from(g.gpu)).ok_or(AllocError::NoGpu {
                    node: node.name.clone(),
                    gpu: g.gpu,
                })?;
                gpu.vram_free_mib = gpu
                    .vram_free_mib
                    .checked_sub(g.vram_mib)
                    .ok_or_else(|| bad("not enough free VRAM"))?;
                match g.share {
                    GpuShare::Whole | GpuShare::Milli(_) => {
                        if gpu.mig.is_some() {
                            return Err(bad("GPU is in MIG mode"));
                        }
                        let want = match g.share {
                            GpuShare::Milli(m) if m > 0 && m < MILLI_PER_GPU => m,
                            GpuShare::Milli(_) => return Err(bad("a share must be 1..=999")),
                            _ => MILLI_PER_GPU,
                        };
                        gpu.milli_free = gpu
                            .milli_free
                            .checked_sub(want)
                            .ok_or_else(|| bad("not enough free GPU"))?;
                    }
                    GpuShare::Mig { profile, start } => {
                        let geometry = geometry.ok_or_else(|| bad("no MIG here"))?;
                        let state = gpu.mig.as_mut().ok_or_else(|| bad("not in MIG mode"))?;
                        if !state.take(geometry, profile, start) {
                            return Err(bad("MIG slice does not fit there"));
                        }
                    }
                }
            }
            updates.push((grant.node, cpu_free, mem_free, gpus));
        }
        self.commit(updates);
        Ok(())
    }

    /// Gives back what [`Fleet::allocate`] took. All-or-nothing as well; like `allocate`, it
    /// works on copies of the counters and GPUs only (a victim search releases and takes back
    /// dozens of placements per preemption).
    pub fn release(&mut self, placement: &Placement) -> Result<(), AllocError> {
        let mut updates = Vec::with_capacity(placement.nodes.len());
        for (i, grant) in placement.nodes.iter().enumerate() {
            if placement.nodes[..i].iter().any(|g| g.node == grant.node) {
                return Err(AllocError::RepeatedNode(grant.node));
            }
            let node = self
                .nodes
                .get(grant.node.index())
                .ok_or(AllocError::NoNode(grant.node))?;
            let over = |what: &str| AllocError::Short {
                node: node.name.clone(),
                what: format!("{what}: release exceeds capacity"),
            };
            let cpu_free = node.cpu_free + grant.cpu_milli;
            let mem_free = node.mem_free + grant.mem_mib;
            if cpu_free > node.cpu_milli {
                return Err(over("CPU"));
            }
            if mem_free > node.mem_mib {
                return Err(over("memory"));
            }
            let mut gpus = node.gpus.clone();
            let model = node.model.map(|m| &self.models[m.index()]);
            let geometry = model.and_then(|m| m.mig.as_ref());
            let vram_total = model.map_or(0, |m| m.vram_mib);
            for g in &grant.gpus {
                let bad = |what: &str| AllocError::BadShare {
                    node: node.name.clone(),
                    gpu: g.gpu,
                    what: what.to_string(),
                };
                let gpu = gpus.get_mut(usize::from(g.gpu)).ok_or(AllocError::NoGpu {
                    node: node.name.clone(),
                    gpu: g.gpu,
                })?;
                gpu.vram_free_mib += g.vram_mib;
                if gpu.vram_free_mib > vram_total {
                    return Err(bad("VRAM release exceeds capacity"));
                }
                match g.share {
                    GpuShare::Whole | GpuShare::Milli(_) => {
                        let m = match g.share {
                            GpuShare::Milli(m) => m,
                            _ => MILLI_PER_GPU,
                        };
                        gpu.milli_free += m;
                        if gpu.milli_free > MILLI_PER_GPU {
                            return Err(bad("GPU release exceeds capacity"));
                        }
                    }
                    GpuShare::Mig { profile, start } => {
                        let geometry = geometry.ok_or_else(|| bad("no MIG here"))?;
                        let state = gpu.mig.as_mut().ok_or_else(|| bad("not in MIG mode"))?;
                        if !state.give_back(geometry, profile, start) {
                            return Err(bad("MIG slice was not taken"));
                        }
                    }
                }
            }
            updates.push((grant.node, cpu_free, mem_free, gpus));
        }
        self.commit(updates);
        Ok(())
    }
}
