//! The simulated fleet: the demo workload that keeps the embedded console alive. The simulated
//! backend itself (clock, job lifecycle, telemetry) lives with the daemon's state; everything
//! it produces is labelled simulated.

pub mod workload;
