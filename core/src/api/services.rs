//! Services as the daemon publishes them (`gantry services`, the console's Services view,
//! `/metrics`): each service's replicas, what its endpoint measured, what the autoscaler
//! wants and why.

use crate::spec::service::ServiceSpec;
use serde::{Deserialize, Serialize};

/// One service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceRow {
    pub name: String,
    pub team: String,
    pub class: String,
    /// Grows by one with each `gantry serve up` of a new file under the same name.
    pub version: u32,
    /// Where the daemon serves it (`127.0.0.1:30001`).
    pub endpoint: String,
    /// `ready` (a replica takes traffic), `starting` (none ready yet), `no replica` (scaled to
    /// zero), `endpoint failed: …`.
    pub status: String,
    /// Replicas the autoscaler wants now (with `num_overprovision`).
    pub wanted: u32,
    /// The ready replicas, and all that are not ended.
    pub ready: u32,
    pub live: u32,
    /// The signal's value as last measured (requests per second, or the metric's sum).
    pub load: Option<f64>,
    /// Requests per second through the endpoint over the QPS window.
    pub qps: f64,
    /// Latency through the endpoint over the last minute, milliseconds.
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    /// Requests served since the daemon started, and of those the ones that got no answer
    /// from any replica (a 502/503/504 of the endpoint's own).
    pub requests: u64,
    pub failed_requests: u64,
    /// Connections the endpoint closed at once: over its cap, or their peer address's.
    #[serde(default)]
    pub turned_away: u64,
    /// GPUs its running replicas hold, and what they cost per hour.
    pub gpus: f64,
    pub dollars_per_hour: f64,
    /// The autoscaler's last move, with its reason.
    pub last_decision: Option<String>,
    pub replicas: Vec<ReplicaRow>,
    /// The service section in force (probe, bounds, delays, signal).
    pub spec: ServiceSpec,
}

/// One replica: a job of the service.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReplicaRow {
    /// Its number within the service (1, 2, …).
    pub replica: u32,
    pub job: i64,
    /// The service version it runs.
    pub version: u32,
    /// Its job's state (pending, running, …).
    pub state: String,
    /// Its probe answered 2xx: it takes traffic.
    pub ready: bool,
    /// Where it serves (`host:port`), once it runs.
    pub address: Option<String>,
    /// Taken out (scaled down, replaced): no new requests go to it.
    #[serde(default)]
    pub retiring: bool,
    /// One of a spot service's on-demand replicas (`base_ondemand_fallback_replicas`,
    /// `dynamic_ondemand_fallback`).
    #[serde(default)]
    pub ondemand: bool,
    /// Why it is not ready (the probe's last failure), or since when it is.
    pub detail: String,
    /// When its run started (daemon time): its probe's initial delay counts from here.
    pub started_s: Option<f64>,
}

impl ServiceRow {
    /// The replicas' GPUs as the table prints them.
    pub fn replicas_text(&self) -> String {
        format!("{}/{}", self.ready, self.wanted)
    }
}
