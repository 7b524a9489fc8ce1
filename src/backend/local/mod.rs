//! The local host: jobs as child processes, GPUs through NVML.

pub mod exec;
pub mod nvml;
pub mod runs;
