//! Real hosts: local processes, SSH pools over real sshd's, exec, starts, container images (podman).

#[path = "../support/mod.rs"]
mod support;

mod containers;
mod exec;
mod local;
mod ssh;
mod starts;
