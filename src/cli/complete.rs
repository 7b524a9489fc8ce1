//! Dynamic shell completion: job ids, team names and pool paths asked of the running daemon at
//! each <Tab> (`source <(COMPLETE=bash gantry)`; zsh, fish, elvish and powershell alike).
//! clap_complete's engine calls these; a daemon that is not there, or slow, completes nothing
//! rather than making the shell wait or print.

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use gantry::api::{FleetView, JobRow, TeamRow};
use gantry::client::http::{Endpoint, HttpClient};
use std::ffi::OsStr;
use std::time::Duration;

/// GET `path` from the daemon the environment names (flags are not parsed yet at <Tab>).
fn daemon_get<T: serde::de::DeserializeOwned>(path: &str) -> Option<T> {
    let endpoint = match std::env::var("GANTRY_CONNECT") {
        Ok(c) => Endpoint::parse(&c).ok()?,
        Err(_) => Endpoint::Unix(gantry::config::paths::from_env().socket),
    };
    let fingerprint = std::env::var("GANTRY_TLS_FINGERPRINT").ok();
    let endpoint = endpoint.pinned(fingerprint.as_deref()).ok()?;
    let mut c = HttpClient::new(endpoint, std::env::var("GANTRY_TOKEN").ok());
    c.timeout = Duration::from_secs(2);
    c.call("GET", path, None).ok()
}

/// The candidates among `items` (value, help) that start with what is typed.
fn matching(current: &OsStr, items: Vec<(String, String)>) -> Vec<CompletionCandidate> {
    let typed = current.to_string_lossy();
    items
        .into_iter()
        .filter(|(v, _)| v.starts_with(typed.as_ref()))
        .map(|(v, help)| CompletionCandidate::new(v).help(Some(help.into())))
        .collect()
}

fn jobs(current: &OsStr) -> Vec<CompletionCandidate> {
    let rows: Vec<JobRow> = daemon_get("/v1/jobs").unwrap_or_default();
    let items = rows
        .iter()
        .map(|j| {
            let help = format!("{} · {} · {}", j.name, j.state, j.team);
            (j.id.to_string(), help)
        })
        .collect();
    matching(current, items)
}

fn teams(current: &OsStr) -> Vec<CompletionCandidate> {
    let rows: Vec<TeamRow> = daemon_get("/v1/teams").unwrap_or_default();
    let items = rows
        .iter()
        .map(|t| {
            let help = format!("{} running, {} pending", t.running, t.pending);
            (t.name.clone(), help)
        })
        .collect();
    matching(current, items)
}

fn pools(current: &OsStr) -> Vec<CompletionCandidate> {
    let pools = daemon_get::<FleetView>("/v1/fleet").map_or_else(Vec::new, |f| f.pools);
    let items = pools
        .iter()
        .map(|p| (p.path.clone(), format!("{} × {} GPUs", p.model, p.gpus)))
        .collect();
    matching(current, items)
}

pub fn job_ids() -> ArgValueCompleter {
    ArgValueCompleter::new(jobs)
}

pub fn team_names() -> ArgValueCompleter {
    ArgValueCompleter::new(teams)
}

pub fn pool_paths() -> ArgValueCompleter {
    ArgValueCompleter::new(pools)
}
