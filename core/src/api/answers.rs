//! What the daemon answers to a change: a job submitted, acted on or moved to another class, a
//! service brought up or down, a workdir kept — the types it writes and the CLI reads.

use super::JobId;
use serde::{Deserialize, Serialize};

/// A refusal's body, whatever the endpoint (its HTTP status says what kind): a stable code
/// (`never-fits`), what was wrong and what to do, and the field of the submitted file it is
/// about (`resources.accelerators`), so a client can say where in the file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Refused {
    pub code: String,
    pub error: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

/// A job accepted (`POST /v1/jobs`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    pub id: JobId,
}

/// A job cancelled, held, released or preempted (`POST /v1/jobs/{id}/{action}`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Acted {
    pub id: JobId,
    /// The action done (`cancel`, `hold`, …).
    pub done: String,
}

/// A job moved to another priority class (`PUT /v1/jobs/{id}/priority`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reprioritized {
    pub id: JobId,
    pub class: String,
}

/// What `serve up` did (`POST /v1/services`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServiceUpAnswer {
    pub name: String,
    pub version: u32,
    pub endpoint: String,
    /// Replicas it starts with.
    pub replicas: u32,
    /// The bearer token its endpoint asks for, made by this `serve up --auth` (shown once:
    /// the daemon keeps its SHA-256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// What `serve down` did (`DELETE /v1/services/{name}`): the replicas' jobs it cancelled.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServiceDown {
    pub cancelled: Vec<JobId>,
}

/// A workdir shipped to the daemon and kept under its state directory (`POST /v1/workdirs`):
/// where, and its size unpacked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptWorkdir {
    pub path: String,
    pub bytes: u64,
}
