//! The scheduler and its engine, with no daemon process: cost, the scheduling cycle, placement, the
//! invariants as properties, the simulator.

#[path = "../support/mod.rs"]
mod support;

mod cost;
mod cycle;
mod engine;
mod forward;
mod placement;
mod properties;
mod sim;
