//! Real hosts: local processes, SSH pools over real sshd's, exec, starts, container images (podman), a gang reported to MLflow.

#[path = "../support/mod.rs"]
mod support;

mod containers;
mod exec;
mod experiments;
mod local;
mod ssh;
mod starts;
