//! The domain model: one vocabulary shared by the scheduler core, the replays, the daemon and
//! the console. Providers → regions → zones → pools → nodes → GPUs (and MIG slices); jobs and
//! the placements that the scheduler hands back.
//!
//! Everything here is plain data plus the bookkeeping that keeps it consistent (allocating and
//! releasing a placement). No IO, no clock.

mod fleet;
pub mod idle;
mod job;
mod life;
mod mig;
pub mod names;
mod placement;
mod team;

pub use fleet::{
    CapacityType, Fleet, FleetBuilder, FleetError, Gpu, GpuModel, Health, LeafId, ModelId, Node,
    NodeId, NvlinkId, Pool, PoolId, PoolSpec, Region, Zone, ZoneId, MILLI_PER_GPU,
};
pub use job::{GpuRequest, JobRequest, ModelChoice, RequestError};
pub use life::{pool_counts, Life, SPOT_NOTICE_S};
pub use mig::{MigGeometry, MigProfile, MigState};
pub use placement::{AllocError, DomainLevel, GpuGrant, GpuShare, NodeGrant, Placement};
pub use team::{
    decay, default_classes, used, validate as validate_teams, PriorityClass, Quota, Team,
    TeamError, FAIR_SHARE_HALF_LIFE_S,
};
