//! The local host: jobs as process groups (in a container where asked), GPUs through NVML; `pool` is this host as a
//! backend of the daemon, `runs` the process groups that `agent` keeps on any host.

pub mod container;
pub mod exec;
pub mod nvml;
pub mod pool;
pub mod runs;
pub mod stage;

/// This host: real processes, GPUs through NVML.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::registration::Registration {
        backend: crate::config::fleet::Backend::Local,
        runner: |_, _, _, opening| {
            Ok(Box::new(pool::LocalPool::open(
                &opening.local,
                opening.sampling,
                opening.retention,
                opening.wake.clone(),
            )?))
        },
        provisioner: None,
        here: Some("this host: local processes, GPUs through NVML"),
        hosts_are: None,
        cloud: None,
        gpus_from_agents: false,
    };
