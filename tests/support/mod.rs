//! Helpers the integration tests share, one module per thing a test needs: a real daemon, fleets
//! built in code, the console's demo, a Kubernetes API double, an MLflow server, moto, podman, promtool, a Slurm
//! cluster, sshd hosts, tmux. Each test binary mounts this tree once; no binary uses all of it.
#![allow(dead_code)]

pub mod console;
pub mod daemon;
pub mod fleets;
pub mod kube_cluster;
pub mod kube_daemon;
pub mod mlflow;
pub mod moto;
pub mod podman;
pub mod promtool;
pub mod slurm_cluster;
pub mod sshd;
pub mod tmux;
