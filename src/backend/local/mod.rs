//! The local host: jobs as process groups (in a container where asked), GPUs through NVML; `pool` is this host as a
//! backend of the daemon, `runs` the process groups that `agent` keeps on any host.

pub mod container;
pub mod exec;
pub mod nvml;
pub mod pool;
pub mod runs;
