//! The scheduler core: pure, deterministic policy code. It imports no async runtime, terminal,
//! network or filesystem and reads no clock; it takes a view of the fleet and a job and returns
//! a decision as plain data. That is what makes it property-testable, replayable on traces at
//! full speed and benchmarkable in isolation.

pub mod autoscale;
pub mod cycle;
pub mod durations;
pub mod forecast;
pub mod frag;
mod hash;
mod index;
pub mod moves;
mod place;
mod policy;
mod quotas;
pub mod reclaim;
pub mod rng;
pub mod scale;
mod shapes;
mod victims;

pub use index::{Class, Cluster, Header, Kind, NodeState, Summary};
pub use place::{cluster_fragmentation, fits_on, Block, Placer, Unplaceable};
pub use policy::Policy;
