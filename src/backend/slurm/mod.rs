//! Slurm clusters through slurmrestd: the REST client (the server's API version detected and
//! said), the GRES strings of nodes and jobs, and the cluster's inventory and queue with
//! Slurm's reasons in gantry's words — what `gantry slurm` shows — and the fleet-file pools
//! for its GPU nodes (`gantry slurm --fleet`). `runner` runs gantry jobs on a Slurm pool.

pub mod batch;
pub mod discover;
mod ends;
pub mod gres;
pub mod inventory;
pub mod pools;
pub mod queue;
pub mod rest;
pub mod runner;
mod submits;
pub mod token;

/// A Slurm cluster's nodes, through slurmrestd: each node's part of a job a batch job.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::registration::Registration {
        backend: crate::config::fleet::Backend::Slurm,
        runner: |p, _, nodes, opening| {
            Ok(Box::new(runner::SlurmPool::open(
                p,
                nodes,
                &opening.local.logs,
                opening.wake.clone(),
            )))
        },
        provisioner: None,
        here: None,
        hosts_are: Some("Slurm node(s)"),
        cloud: None,
        gpus_from_agents: false,
    };
