//! Slurm clusters through slurmrestd: the REST client (the server's API version detected and
//! said), the GRES strings of nodes and jobs, and the cluster's inventory and queue with
//! Slurm's reasons in gantry's words — what `gantry slurm` shows — and the fleet-file pools
//! for its GPU nodes (`gantry slurm --fleet`). `runner` runs gantry jobs on a Slurm pool.

pub mod batch;
pub mod discover;
pub mod gres;
pub mod inventory;
pub mod pools;
pub mod queue;
pub mod rest;
pub mod runner;
