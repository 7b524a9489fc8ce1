//! The fleet: where GPUs live, what they cost, and what is free on them right now.

use super::mig::{MigGeometry, MigState};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::fmt;

/// A whole GPU is 1000 milli-GPU; fractional jobs ask for less.
pub const MILLI_PER_GPU: u16 = 1000;

macro_rules! id_type {
    ($name:ident, $inner:ty) => {
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub $inner);
        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }
    };
}

id_type!(ModelId, u16);
id_type!(NodeId, u32);
id_type!(PoolId, u32);
id_type!(ZoneId, u32);
id_type!(LeafId, u32);
id_type!(NvlinkId, u32);

/// A GPU model (H100, A100-80GB, L4, …).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuModel {
    pub name: String,
    pub vram_mib: u32,
    /// Present when the model supports MIG.
    pub mig: Option<MigGeometry>,
}

/// How capacity is bought. Spot is cheap and can be taken back by the provider.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CapacityType {
    OnDemand,
    Spot,
    Reserved,
}

impl fmt::Display for CapacityType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CapacityType::OnDemand => "on-demand",
            CapacityType::Spot => "spot",
            CapacityType::Reserved => "reserved",
        })
    }
}

/// Whether a node may take new work.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    Healthy,
    /// Runs what it has, takes nothing new (an operator drain, a spot interruption notice).
    Cordoned,
    Down,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Region {
    pub name: String,
    pub provider: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Zone {
    pub name: String,
    pub region: u32,
}

/// Nodes of one shape and one price in one zone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub name: String,
    pub instance_type: String,
    pub zone: ZoneId,
    /// `None` for CPU-only pools.
    pub model: Option<ModelId>,
    pub gpus_per_node: u8,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub capacity: CapacityType,
    /// Price of one node per hour, in US dollars.
    pub price_per_hour: f64,
}

impl Pool {
    /// Price of one GPU-hour on this pool (the node price for CPU-only pools).
    pub fn price_per_gpu_hour(&self) -> f64 {
        if self.gpus_per_node == 0 {
            self.price_per_hour
        } else {
            self.price_per_hour / f64::from(self.gpus_per_node)
        }
    }
}

/// What is free on one GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Gpu {
    /// Free milli-GPU for whole and fractional jobs (1000 = nobody uses it). A GPU in MIG mode
    /// keeps 1000 here and tracks its slices in `mig`.
    pub milli_free: u16,
    pub vram_free_mib: u32,
    /// `Some` when the GPU is in MIG mode.
    pub mig: Option<MigState>,
}

impl Gpu {
    pub fn is_idle(&self) -> bool {
        self.milli_free == MILLI_PER_GPU && self.mig.is_none_or(|m| m.is_empty())
    }
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub pool: PoolId,
    pub zone: ZoneId,
    /// The NVLink domain: the node itself, or a rack for NVL72-style systems.
    pub nvlink: NvlinkId,
    /// The InfiniBand leaf switch, where known.
    pub leaf: Option<LeafId>,
    pub health: Health,
    pub model: Option<ModelId>,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub cpu_free: u32,
    pub mem_free: u64,
    pub gpus: Vec<Gpu>,
}

impl Clone for Node {
    fn clone(&self) -> Self {
        Node {
            name: self.name.clone(),
            gpus: self.gpus.clone(),
            ..*self
        }
    }

    /// Into the name and GPU list already there: a start estimate copies the fleet's nodes
    /// at every cycle of its forward run (20,000 allocations at 10,000 nodes otherwise). The
    /// other fields are copied by `..*source`: one added that is not `Copy` fails to compile
    /// here rather than going uncopied.
    fn clone_from(&mut self, source: &Self) {
        let mut name = std::mem::take(&mut self.name);
        let mut gpus = std::mem::take(&mut self.gpus);
        name.clone_from(&source.name);
        gpus.clone_from(&source.gpus);
        *self = Node {
            name,
            gpus,
            ..*source
        };
    }
}

impl Node {
    pub fn gpu_milli_free(&self) -> u32 {
        self.gpus
            .iter()
            .filter(|g| g.mig.is_none())
            .map(|g| u32::from(g.milli_free))
            .sum()
    }
    pub fn gpu_milli_total(&self) -> u32 {
        self.gpus.len() as u32 * u32::from(MILLI_PER_GPU)
    }
    /// What is not free for whole and fractional jobs (MIG-mode GPUs count as used).
    pub fn gpu_milli_used(&self) -> u32 {
        self.gpu_milli_total() - self.gpu_milli_free()
    }
}

/// The whole fleet as the scheduler sees it.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    pub models: Vec<GpuModel>,
    pub regions: Vec<Region>,
    pub zones: Vec<Zone>,
    pub leaves: Vec<String>,
    pub nvlink_domains: Vec<String>,
    pub pools: Vec<Pool>,
    pub nodes: Vec<Node>,
    /// The pools that run jobs in container images (`image_id`): Kubernetes pools, and hosts
    /// with a container runtime.
    #[serde(default)]
    pub image_pools: Vec<PoolId>,
    /// The tools for `file_mounts` the pools that declare them have (`tools` in the fleet
    /// file); a pool not listed is not known to lack any.
    #[serde(default)]
    pub pool_tools: Vec<(PoolId, Vec<String>)>,
}

impl Clone for Fleet {
    fn clone(&self) -> Self {
        let mut f = Fleet::default();
        f.clone_from(self);
        f
    }

    /// Into the vectors already there (see `Node::clone_from`). Every field is named: one
    /// added fails to compile here rather than going uncopied.
    fn clone_from(&mut self, source: &Self) {
        let Fleet {
            models,
            regions,
            zones,
            leaves,
            nvlink_domains,
            pools,
            nodes,
            image_pools,
            pool_tools,
        } = source;
        self.models.clone_from(models);
        self.regions.clone_from(regions);
        self.zones.clone_from(zones);
        self.leaves.clone_from(leaves);
        self.nvlink_domains.clone_from(nvlink_domains);
        self.pools.clone_from(pools);
        self.nodes.clone_from(nodes);
        self.image_pools.clone_from(image_pools);
        self.pool_tools.clone_from(pool_tools);
    }
}

impl Fleet {
    pub fn model(&self, id: ModelId) -> &GpuModel {
        &self.models[id.index()]
    }
    /// The tools pool `id` declares for `file_mounts`; `None` where it declares none.
    pub fn tools_of(&self, id: PoolId) -> Option<&[String]> {
        self.pool_tools
            .iter()
            .find(|(p, _)| *p == id)
            .map(|(_, t)| t.as_slice())
    }

    pub fn pool(&self, id: PoolId) -> &Pool {
        &self.pools[id.index()]
    }
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id.index()]
    }
    pub fn model_by_name(&self, name: &str) -> Option<ModelId> {
        self.models
            .iter()
            .position(|m| m.name.eq_ignore_ascii_case(name))
            .map(|i| ModelId(i as u16))
    }
    pub fn region_of(&self, zone: ZoneId) -> u32 {
        self.zones[zone.index()].region
    }
    /// Where a pool is: its (provider, region, zone) names.
    pub fn pool_place(&self, id: PoolId) -> (&str, &str, &str) {
        let zone = &self.zones[self.pool(id).zone.index()];
        let region = &self.regions[zone.region as usize];
        (&region.provider, &region.name, &zone.name)
    }
    /// `provider/region/zone/pool` — the name operators read in events and explanations.
    pub fn pool_path(&self, id: PoolId) -> String {
        let (provider, region, zone) = self.pool_place(id);
        format!("{}/{}/{}/{}", provider, region, zone, self.pool(id).name)
    }
    pub fn gpu_count(&self) -> usize {
        self.nodes.iter().map(|n| n.gpus.len()).sum()
    }
    /// GPU capacity in milli-GPU over all nodes (healthy or not).
    pub fn gpu_milli_capacity(&self) -> u64 {
        self.nodes
            .iter()
            .map(|n| u64::from(n.gpu_milli_total()))
            .sum()
    }
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FleetError {
    #[error("duplicate node name `{0}`: node names must be unique across the fleet")]
    DuplicateNode(String),
    #[error("pool `{pool}`: {what}")]
    BadPool { pool: String, what: String },
    #[error("node `{node}`: {what}")]
    BadNode { node: String, what: String },
    #[error("GPU model `{0}`: VRAM must be positive")]
    BadModel(String),
}

/// Everything needed to declare a pool.
#[derive(Clone, Debug)]
pub struct PoolSpec<'a> {
    pub provider: &'a str,
    pub region: &'a str,
    pub zone: &'a str,
    pub name: &'a str,
    pub instance_type: &'a str,
    pub model: Option<ModelId>,
    pub gpus_per_node: u8,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub capacity: CapacityType,
    pub price_per_hour: f64,
}

/// Builds a [`Fleet`] with interned names and checked shapes.
#[derive(Default)]
pub struct FleetBuilder {
    fleet: Fleet,
    region_ids: HashMap<(String, String), u32>,
    zone_ids: HashMap<(u32, String), ZoneId>,
    leaf_ids: HashMap<String, LeafId>,
    nvlink_ids: HashMap<String, NvlinkId>,
    node_names: HashMap<String, NodeId>,
}

impl FleetBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Declares a GPU model, or returns the id of one already declared under that name.
    pub fn model(
        &mut self,
        name: &str,
        vram_mib: u32,
        mig: Option<MigGeometry>,
    ) -> Result<ModelId, FleetError> {
        if let Some(id) = self.fleet.model_by_name(name) {
            return Ok(id);
        }
        if vram_mib == 0 {
            return Err(FleetError::BadModel(name.to_string()));
        }
        self.fleet.models.push(GpuModel {
            name: name.to_string(),
            vram_mib,
            mig,
        });
        Ok(ModelId(self.fleet.models.len() as u16 - 1))
    }

    pub fn pool(&mut self, spec: PoolSpec<'_>) -> Result<PoolId, FleetError> {
        let bad = |what: &str| FleetError::BadPool {
            pool: spec.name.to_string(),
            what: what.to_string(),
        };
        if !(spec.price_per_hour.is_finite() && spec.price_per_hour >= 0.0) {
            return Err(bad("price per hour must be a finite number ≥ 0"));
        }
        if spec.model.is_some() != (spec.gpus_per_node > 0) {
            return Err(bad(
                "a pool has a GPU model exactly when it has GPUs per node",
            ));
        }
        if let Some(m) = spec.model {
            if m.index() >= self.fleet.models.len() {
                return Err(bad("unknown GPU model id"));
            }
        }
        let region_key = (spec.provider.to_string(), spec.region.to_string());
        let next_region = self.fleet.regions.len() as u32;
        let region = *self.region_ids.entry(region_key).or_insert_with(|| {
            self.fleet.regions.push(Region {
                name: spec.region.to_string(),
                provider: spec.provider.to_string(),
            });
            next_region
        });
        let next_zone = ZoneId(self.fleet.zones.len() as u32);
        let zone = *self
            .zone_ids
            .entry((region, spec.zone.to_string()))
            .or_insert_with(|| {
                self.fleet.zones.push(Zone {
                    name: spec.zone.to_string(),
                    region,
                });
                next_zone
            });
        if spec.provider == "kubernetes" {
            // A Kubernetes pool runs every job as a pod of an image.
            self.fleet
                .image_pools
                .push(PoolId(self.fleet.pools.len() as u32));
        }
        self.fleet.pools.push(Pool {
            name: spec.name.to_string(),
            instance_type: spec.instance_type.to_string(),
            zone,
            model: spec.model,
            gpus_per_node: spec.gpus_per_node,
            cpu_milli: spec.cpu_milli,
            mem_mib: spec.mem_mib,
            capacity: spec.capacity,
            price_per_hour: spec.price_per_hour,
        });
        Ok(PoolId(self.fleet.pools.len() as u32 - 1))
    }

    /// Adds a node of `pool`'s shape. `nvlink` names a shared NVLink domain (a rack); `None`
    /// makes the node its own domain. `mig_gpus` is how many of its GPUs run in MIG mode.
    pub fn node(
        &mut self,
        pool: PoolId,
        name: &str,
        leaf: Option<&str>,
        nvlink: Option<&str>,
        mig_gpus: u8,
    ) -> Result<NodeId, FleetError> {
        if self.node_names.contains_key(name) {
            return Err(FleetError::DuplicateNode(name.to_string()));
        }
        let p = self.fleet.pools[pool.index()].clone();
        let model = p.model.map(|m| self.fleet.models[m.index()].clone());
        if mig_gpus > p.gpus_per_node {
            return Err(FleetError::BadNode {
                node: name.to_string(),
                what: format!("{mig_gpus} MIG GPUs but only {} GPUs", p.gpus_per_node),
            });
        }
        if mig_gpus > 0 && model.as_ref().is_none_or(|m| m.mig.is_none()) {
            return Err(FleetError::BadNode {
                node: name.to_string(),
                what: "MIG mode asked for on a GPU model without MIG".to_string(),
            });
        }
        let vram = model.as_ref().map_or(0, |m| m.vram_mib);
        let gpus = (0..p.gpus_per_node)
            .map(|i| Gpu {
                milli_free: MILLI_PER_GPU,
                vram_free_mib: vram,
                mig: (i < mig_gpus).then(MigState::default),
            })
            .collect();
        let leaf = leaf.map(|l| {
            let next = LeafId(self.fleet.leaves.len() as u32);
            *self.leaf_ids.entry(l.to_string()).or_insert_with(|| {
                self.fleet.leaves.push(l.to_string());
                next
            })
        });
        let domain_name = nvlink.unwrap_or(name).to_string();
        let next = NvlinkId(self.fleet.nvlink_domains.len() as u32);
        let nvlink = *self
            .nvlink_ids
            .entry(domain_name.clone())
            .or_insert_with(|| {
                self.fleet.nvlink_domains.push(domain_name);
                next
            });
        let id = NodeId(self.fleet.nodes.len() as u32);
        self.fleet.nodes.push(Node {
            name: name.to_string(),
            pool,
            zone: p.zone,
            nvlink,
            leaf,
            health: Health::Healthy,
            model: p.model,
            cpu_milli: p.cpu_milli,
            mem_mib: p.mem_mib,
            cpu_free: p.cpu_milli,
            mem_free: p.mem_mib,
            gpus,
        });
        self.node_names.insert(name.to_string(), id);
        Ok(id)
    }

    /// Pool `pool`'s nodes have these tools for `file_mounts` (and no other).
    pub fn declare_tools(&mut self, pool: PoolId, tools: Vec<String>) {
        self.fleet.pool_tools.retain(|(p, _)| *p != pool);
        self.fleet.pool_tools.push((pool, tools));
    }

    /// Pool `pool` runs jobs in container images too (its hosts have a container runtime).
    pub fn runs_images(&mut self, pool: PoolId) {
        if !self.fleet.image_pools.contains(&pool) {
            self.fleet.image_pools.push(pool);
        }
    }
    pub fn build(self) -> Fleet {
        self.fleet
    }
}
