//! The simulated fleet. So far: the demo that drives the embedded console — the built-in fleet,
//! a seeded workload, and jobs that finish after seeded durations. Everything it produces is
//! labelled simulated.

pub mod demo;
