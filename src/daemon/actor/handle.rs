//! The way in to the actor: the requests it serves, the errors it answers with, what it
//! publishes, and the cloneable `Handle` the API, the CLI and the console hold.

use crate::api::Snapshot;
use crate::api::{HistoryJob, JobView, Report, ReportBy};
use crate::daemon::auth::{hash_token, rfc3339, unix_now, Caller, Grant, Role, TokenInfo};
use crate::daemon::engine::Submission;
use crate::daemon::journal::{EventRecord, JobId, ReportRecord};
use crate::daemon::refusal::Refusal;
use crate::daemon::state::{Action, Counters, Histogram, JobLogs};
use crate::scheduler::reclaim::ReclaimPlan;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

pub(super) type Reply<T> = oneshot::Sender<Result<T, Refusal>>;

/// What callers ask of the actor.
pub enum Request {
    Submit {
        submission: Submission,
        reply: Reply<JobId>,
    },
    Act {
        id: JobId,
        action: Action,
        caller: Caller,
        reply: Reply<()>,
    },
    Priority {
        id: JobId,
        class: String,
        caller: Caller,
        reply: Reply<()>,
    },
    /// A copy of the present to preview an action on (`?dry_run=true`): `class` set, a move
    /// to that class; else `action`.
    WhatIf {
        /// The jobs it is taken on, together (a move to a class: one).
        ids: Vec<JobId>,
        action: Action,
        class: Option<String>,
        caller: Caller,
        reply: Reply<crate::daemon::state::WhatIfWork>,
    },
    Job {
        id: JobId,
        reply: Reply<JobView>,
    },
    /// Where a job's logs are (the API reads them).
    Logs {
        id: JobId,
        reply: Reply<JobLogs>,
    },
    /// How to reach into a running job's node (`POST /v1/jobs/{id}/exec`).
    Enter {
        caller: crate::daemon::auth::Caller,
        id: JobId,
        rank: Option<usize>,
        tty: bool,
        argv: Vec<String>,
        reply: Reply<crate::daemon::state::Entering>,
    },
    /// A backend has news (a run ended): step now rather than at the next clock step.
    Wake,
    /// The workdirs of jobs not yet ended (shipped copies still in use).
    WorkdirsInUse {
        reply: Reply<std::collections::HashSet<String>>,
    },
    /// Shows the reclaim plan (`apply: None`) or applies the one shown with that id.
    Reclaim {
        apply: Option<String>,
        caller: Caller,
        reply: Reply<ReclaimPlan>,
    },
    Token {
        role: Role,
        team: Option<String>,
        label: String,
        /// The Unix account its jobs run as.
        user: Option<String>,
        /// Seconds from now until it expires.
        expires_in: Option<f64>,
        reply: Reply<String>,
    },
    Tokens {
        reply: Reply<Vec<TokenInfo>>,
    },
    /// The cloud pools the journal knows (`gantry cloud ls`).
    CloudPools {
        reply: Reply<Vec<crate::api::KnownCloudPool>>,
    },
    Revoke {
        /// A token's id (the start of its hash), at least 8 hex digits.
        id: String,
        caller: Caller,
        reply: Reply<TokenInfo>,
    },
    Events {
        job: Option<JobId>,
        limit: usize,
        reply: Reply<Vec<EventRecord>>,
    },
    Pool {
        index: usize,
        reply: Reply<crate::api::PoolDetail>,
    },
    Node {
        name: String,
        range: crate::daemon::state::history::Range,
        reply: Reply<crate::api::NodeDetail>,
    },
    /// Where a submission would land now, and what previewing its submission needs.
    Preview {
        submission: Submission,
        reply: Reply<(
            crate::daemon::engine::Preview,
            crate::daemon::state::WhatIfWork,
        )>,
    },
    Report {
        since: f64,
        until: f64,
        by: ReportBy,
        reply: Reply<Report>,
    },
    /// Finished jobs from the journal, with their runs (`gantry history`).
    History {
        query: crate::daemon::journal::HistoryQuery,
        reply: Reply<Vec<HistoryJob>>,
    },
    /// Open the state again over an edited fleet file (or say why the edit cannot be read).
    /// `force`: the operator asked for it (SIGHUP), so a file that fails live jobs is applied.
    Reload {
        cfg: Result<Box<crate::config::fleet::FleetConfig>, String>,
        force: bool,
        reply: Reply<String>,
    },
    /// `gantry serve up`: a service started, or rolled to a new version.
    ServiceUp {
        up: crate::daemon::state::ServiceUp,
        caller: Caller,
        reply: Reply<crate::daemon::state::ServiceUpAnswer>,
    },
    /// `gantry serve down`: its replicas cancelled (their jobs answered).
    ServiceDown {
        name: String,
        caller: Caller,
        reply: Reply<Vec<JobId>>,
    },
    /// What the services' endpoints and probes measured (`daemon::services`, every second).
    ServiceMeasured {
        measured: Vec<(String, crate::daemon::state::Measured)>,
    },
    /// What the experiment tracker has to say (`daemon::experiments`): of a job, or of the
    /// tracking server.
    Experiment {
        job: Option<JobId>,
        line: String,
    },
    /// What the experiment tracker owes, oldest job first (at most `limit`): its queue, kept
    /// in the journal.
    ExperimentsOwed {
        limit: usize,
        reply: Reply<Vec<ReportRecord>>,
    },
    /// What it sent of one job (journaled: a restarted daemon goes on from there).
    ExperimentSent {
        report: ReportRecord,
    },
    /// The tracking server stopped answering (why), or answers again (`None`); `line` said.
    ExperimentServer {
        down: Option<String>,
        line: String,
    },
    Shutdown,
}

/// What the actor publishes after every change.
#[derive(Clone, Debug, Default)]
pub struct Published {
    /// Acknowledged changes it reflects (see `Handle::fresh`).
    pub changes: u64,
    pub snapshot: Arc<Snapshot>,
    pub counters: Counters,
    /// Scheduling-cycle latency, seconds.
    pub cycle_seconds: Histogram,
    /// Real hosts' measured GPUs, and the running jobs' GPUs there (`/metrics`).
    pub gpus: Vec<crate::daemon::state::GpuMetric>,
    pub job_gpus: Vec<crate::daemon::state::JobGpuMetric>,
    /// Dollars spent ever per team and project ("" for none).
    pub project_spend: Vec<(String, String, f64)>,
    /// The daemon's clock on the calendar (reading dates in requests).
    pub calendar: crate::daemon::calendar::Calendar,
    /// Service → the SHA-256 of the bearer token its endpoint asks for (never in the
    /// snapshot: every viewer reads that).
    pub service_tokens: HashMap<String, String>,
    /// The fleet's experiment tracker, and where its credentials are (never them).
    pub mlflow: crate::config::fleet::MlflowSettings,
}

/// Bucket bounds of the cycle-latency histogram, seconds.
pub const CYCLE_BUCKETS: [f64; 8] = [0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0];

/// The clock the actor runs the state on.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// Simulated seconds per wall second (1: real time).
    pub speed: f64,
    /// Wall time between timer steps.
    pub step: Duration,
}

/// A cloneable way in to the actor.
#[derive(Clone)]
pub struct Handle {
    pub(super) tx: mpsc::Sender<Request>,
    pub published: watch::Receiver<Arc<Published>>,
    /// Changes the actor has acknowledged (a reader waits until the published state has them).
    pub(super) acked: Arc<AtomicU64>,
    /// Token hash → what it grants (revoked tokens are not here).
    pub tokens: Arc<RwLock<HashMap<String, Grant>>>,
    /// Unix user → the team they act for on the socket (`[[users]] team`), as the fleet file
    /// in force says.
    pub members: Arc<RwLock<HashMap<String, String>>>,
}

impl Handle {
    fn send<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<oneshot::Receiver<Result<T, Refusal>>, Refusal> {
        let (reply, answer) = oneshot::channel();
        self.tx.send(make(reply)).map_err(|_| Refusal::stopping())?;
        Ok(answer)
    }

    /// Sends a request and waits for its answer (from async code).
    pub async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, Refusal> {
        let answer = self.send(make)?;
        answer.await.unwrap_or_else(|_| Err(Refusal::stopping()))
    }

    /// Sends a request and waits for its answer (from a plain thread, e.g. the console).
    pub fn call_blocking<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, Refusal> {
        let answer = self.send(make)?;
        answer
            .blocking_recv()
            .unwrap_or_else(|_| Err(Refusal::stopping()))
    }

    /// Sends a request that wants no answer; false once the daemon is stopping.
    pub fn tell(&self, r: Request) -> bool {
        self.tx.send(r).is_ok()
    }

    pub fn shutdown(&self) {
        let _ = self.tx.send(Request::Shutdown);
    }

    /// Applies an edited fleet file (`Err`: why it could not be read; the event log says so
    /// and the previous file stays in force). The answer says what changed. `force` (SIGHUP)
    /// applies a file that would fail live jobs; without it such a file is refused.
    pub fn reload(
        &self,
        cfg: Result<crate::config::fleet::FleetConfig, String>,
        force: bool,
    ) -> Result<String, Refusal> {
        self.call_blocking(|reply| Request::Reload {
            cfg: cfg.map(Box::new),
            force,
            reply,
        })
    }

    /// The caller a bearer token stands for.
    /// The published state, once it reflects every change acknowledged before the call (at
    /// most 2 s of waiting): a `gantry submit` followed by `gantry jobs` lists the job.
    pub async fn fresh(&self) -> Arc<Published> {
        let want = self.acked.load(Ordering::Acquire);
        let mut rx = self.published.clone();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        loop {
            let current = rx.borrow_and_update().clone();
            if current.changes >= want {
                return current;
            }
            match tokio::time::timeout_at(deadline, rx.changed()).await {
                Ok(Ok(())) => {}
                _ => return rx.borrow().clone(),
            }
        }
    }

    /// The caller a bearer token names, or why it is refused.
    pub fn caller_for(&self, token: &str) -> Result<Caller, String> {
        let grant = self
            .tokens
            .read()
            .ok()
            .and_then(|t| t.get(&hash_token(token)).cloned())
            .ok_or("unknown or revoked token")?;
        match grant.expires_at {
            Some(at) if unix_now() >= at => Err(format!(
                "token expired at {}; ask an operator for a new one (gantry token create)",
                rfc3339(at)
            )),
            _ => Ok(grant.caller),
        }
    }
}
