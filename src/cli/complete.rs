//! Dynamic shell completion: job ids, team names and pool paths asked of the running daemon at
//! each <Tab> (`source <(COMPLETE=bash gantry)`; zsh, fish, elvish and powershell alike).
//! clap_complete's engine calls these; a daemon that is not there, or slow, completes nothing
//! rather than making the shell wait or print.

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};
use gantry::client::http::{Endpoint, HttpClient};
use serde_json::Value;
use std::ffi::OsStr;
use std::time::Duration;

/// GET `path` from the daemon the environment names (flags are not parsed yet at <Tab>).
fn daemon_get(path: &str) -> Option<Value> {
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
    let rows = daemon_get("/v1/jobs").unwrap_or_default();
    let items = rows
        .as_array()
        .into_iter()
        .flatten()
        .map(|j| {
            (
                j["id"].to_string(),
                format!(
                    "{} · {} · {}",
                    j["name"].as_str().unwrap_or(""),
                    j["state"].as_str().unwrap_or(""),
                    j["team"].as_str().unwrap_or("")
                ),
            )
        })
        .collect();
    matching(current, items)
}

fn teams(current: &OsStr) -> Vec<CompletionCandidate> {
    let rows = daemon_get("/v1/teams").unwrap_or_default();
    let items = rows
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            let name = t["name"].as_str().unwrap_or("").to_string();
            let help = format!("{} running, {} pending", t["running"], t["pending"]);
            (name, help)
        })
        .collect();
    matching(current, items)
}

fn pools(current: &OsStr) -> Vec<CompletionCandidate> {
    let fleet = daemon_get("/v1/fleet").unwrap_or_default();
    let items = fleet["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| {
            let path = p["path"].as_str().unwrap_or("").to_string();
            let help = format!("{} × {} GPUs", p["model"].as_str().unwrap_or(""), p["gpus"]);
            (path, help)
        })
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
