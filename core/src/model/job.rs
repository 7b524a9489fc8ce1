//! What a job asks for. A job is a gang of `nodes` identical node requests; each node request
//! is CPU, memory and either whole GPUs, a fraction of one GPU, or one MIG slice.

use super::fleet::{ModelId, PoolId, MILLI_PER_GPU};
use super::mig::MigProfile;
use serde::{Deserialize, Serialize};

/// The GPU part of one node's request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuRequest {
    /// CPU-only work.
    None,
    /// `n` whole GPUs on the node.
    Whole(u8),
    /// A share of one GPU, in milli-GPU (1..=999), co-located with other shares.
    Fraction(u16),
    /// One MIG instance.
    Mig(MigProfile),
}

impl GpuRequest {
    /// Milli-GPU this request takes on one node (MIG counts its compute slices out of 7).
    pub fn milli(&self) -> u32 {
        match *self {
            GpuRequest::None => 0,
            GpuRequest::Whole(n) => u32::from(n) * u32::from(MILLI_PER_GPU),
            GpuRequest::Fraction(m) => u32::from(m),
            GpuRequest::Mig(p) => u32::from(p.compute) * u32::from(MILLI_PER_GPU) / 7,
        }
    }
    /// Number of physical GPUs touched on one node.
    pub fn gpu_count(&self) -> u8 {
        match *self {
            GpuRequest::None => 0,
            GpuRequest::Whole(n) => n,
            GpuRequest::Fraction(_) | GpuRequest::Mig(_) => 1,
        }
    }
}

/// Which GPU models a job accepts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModelChoice {
    #[default]
    Any,
    /// Any of these, no preference.
    AnyOf(Vec<ModelId>),
    /// Any of these, earlier ones preferred.
    Prefer(Vec<ModelId>),
}

impl ModelChoice {
    /// `None` when the model is not allowed; otherwise its rank (0 = most preferred).
    pub fn rank(&self, model: ModelId) -> Option<u16> {
        match self {
            ModelChoice::Any => Some(0),
            ModelChoice::AnyOf(list) => list.contains(&model).then_some(0),
            ModelChoice::Prefer(list) => list.iter().position(|m| *m == model).map(|p| p as u16),
        }
    }
    /// Bit set of allowed models (bit i = ModelId(i)); all bits for `Any`.
    pub fn mask(&self) -> u64 {
        match self {
            ModelChoice::Any => u64::MAX,
            ModelChoice::AnyOf(list) | ModelChoice::Prefer(list) => list
                .iter()
                .filter(|m| m.0 < 64)
                .fold(0, |acc, m| acc | 1u64 << m.0),
        }
    }
}

/// A placement request: `nodes` × (CPU, memory, GPUs) with constraints.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct JobRequest {
    /// Gang size: this many distinct nodes, all or nothing.
    pub nodes: u16,
    pub gpu: GpuRequest,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    /// Minimum VRAM per GPU (whole GPUs) or VRAM to reserve (fractions), MiB; 0 = no need.
    pub vram_mib: u32,
    pub models: ModelChoice,
    pub spot_ok: bool,
    /// Ceiling on the job's price per hour, in US dollars.
    pub max_price_per_hour: Option<f64>,
    /// The pools the job may run in (its spec's `infra`: cloud, region, zone); `None`: any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pools: Option<Vec<PoolId>>,
}

impl Default for JobRequest {
    fn default() -> Self {
        JobRequest {
            nodes: 1,
            gpu: GpuRequest::None,
            cpu_milli: 0,
            mem_mib: 0,
            vram_mib: 0,
            models: ModelChoice::Any,
            spot_ok: false,
            max_price_per_hour: None,
            pools: None,
        }
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RequestError {
    #[error("`nodes` must be at least 1")]
    NoNodes,
    #[error("a whole-GPU request needs at least 1 GPU per node")]
    ZeroGpus,
    #[error("a GPU fraction must be 1..=999 milli-GPU (got {0}); ask for whole GPUs above that")]
    BadFraction(u16),
    #[error("a gang of {0} nodes must ask for whole GPUs or none; fractions and MIG slices are single-node")]
    SharedGang(u16),
    #[error("`max_price_per_hour` must be a finite number > 0")]
    BadPrice,
    #[error("`models` lists no GPU model")]
    EmptyModels,
}

impl JobRequest {
    /// Whether the job may run in `pool` (its `infra`).
    pub fn allows_pool(&self, pool: PoolId) -> bool {
        self.pools.as_ref().is_none_or(|p| p.contains(&pool))
    }

    /// The pools of `fleet` it may land in by its `infra` (in the order it lists them, else the
    /// fleet's) and GPU model (every one for a CPU job): where a spec check and the daemon
    /// look for what would run it.
    pub fn pools_of_its_model<'a>(
        &'a self,
        fleet: &'a super::fleet::Fleet,
    ) -> impl Iterator<Item = PoolId> + 'a {
        let listed: Box<dyn Iterator<Item = PoolId> + 'a> = match &self.pools {
            Some(p) => Box::new(p.iter().copied()),
            None => Box::new((0..fleet.pools.len() as u32).map(PoolId)),
        };
        listed.filter(|&p| {
            self.gpu == GpuRequest::None
                || fleet
                    .pool(p)
                    .model
                    .is_some_and(|m| self.models.rank(m).is_some())
        })
    }

    pub fn validate(&self) -> Result<(), RequestError> {
        if self.nodes == 0 {
            return Err(RequestError::NoNodes);
        }
        match self.gpu {
            GpuRequest::Whole(0) => return Err(RequestError::ZeroGpus),
            GpuRequest::Fraction(m) if m == 0 || m >= MILLI_PER_GPU => {
                return Err(RequestError::BadFraction(m))
            }
            GpuRequest::Fraction(_) | GpuRequest::Mig(_) if self.nodes > 1 => {
                return Err(RequestError::SharedGang(self.nodes))
            }
            _ => {}
        }
        if let Some(p) = self.max_price_per_hour {
            if !(p.is_finite() && p > 0.0) {
                return Err(RequestError::BadPrice);
            }
        }
        if let ModelChoice::AnyOf(l) | ModelChoice::Prefer(l) = &self.models {
            if l.is_empty() {
                return Err(RequestError::EmptyModels);
            }
        }
        Ok(())
    }

    /// Milli-GPU the whole gang takes.
    pub fn total_gpu_milli(&self) -> u64 {
        u64::from(self.gpu.milli()) * u64::from(self.nodes)
    }
}
