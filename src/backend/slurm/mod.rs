//! Slurm clusters through slurmrestd: the REST client (the server's API version detected and
//! said), the GRES strings of nodes and jobs, and the cluster's inventory and queue with
//! Slurm's reasons in gantry's words — what `gantry slurm` shows. Running gantry jobs on a
//! Slurm pool (a `Runner`) builds on this.

pub mod batch;
pub mod gres;
pub mod inventory;
pub mod rest;
pub mod runner;
