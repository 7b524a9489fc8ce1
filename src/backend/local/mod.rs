//! The local host: jobs as process groups, GPUs through NVML; `pool` is this host as a
//! backend of the daemon, `runs` the process groups that `agent` keeps on any host.

pub mod exec;
pub mod nvml;
pub mod pool;
pub mod runs;
