//! Configuration files: where they live (XDG) and the fleet file (TOML). Every file has a
//! documented built-in default that the binary can print.

pub mod calendar;
pub mod catalog;
pub mod cloud;
pub mod console;
pub mod ec2;
pub mod fleet;
pub mod kube;
pub mod lambda;
pub mod paths;
pub mod pool;
pub mod problem;
pub mod reload;
pub mod slurm;
pub mod ssh;
pub mod topology;
mod validate;
