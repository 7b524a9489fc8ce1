//! The daemon on this host alone: its API and CLI, access and authority, accounting, crash
//! safety, hardening, installs, local pools, services, the simulated backend.

#[path = "../support/mod.rs"]
mod support;

mod access;
mod accounting;
mod api;
mod authority;
mod cli;
mod crash;
mod daemon_cli;
mod eta;
mod experiments;
mod hardening;
mod install;
mod local_daemon;
mod pipeline;
mod services;
mod sim_backend;
mod tls;
