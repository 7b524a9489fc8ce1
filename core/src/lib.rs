//! gantry's core: what every other part of gantry speaks, and nothing that does IO.
//!
//! * [`api`] — every type that crosses the client/daemon boundary, and the `Client` trait.
//! * [`model`] — the domain vocabulary: pools, nodes, GPUs, jobs, placements.
//! * [`scheduler`] — pure, deterministic policy: placement, preemption, quotas, reclaim, scale.
//! * [`spec`] — job specs (gantry YAML, a superset of SkyPilot task YAML), parsed and resolved.
//! * [`catalog`] — the cloud price catalogs gantry carries.
//! * [`stats`] — small numeric helpers the benchmarks, replays and daemon share.
//!
//! This crate depends on no async runtime, terminal, database, HTTP or cluster client and reads
//! no clock (`now` is always an argument): the compiler keeps the layers that
//! `docs/architecture.md` draws.
pub mod api;
pub mod catalog;
pub mod model;
pub mod scheduler;
pub mod spec;
pub mod stats;
