//! The daemon actor: one thread owns the state; the API, the CLI and the console reach it only
//! through a `Handle` — requests on a channel, answers on one-shot replies, and published
//! snapshots on a watch channel. Submissions that arrive together are admitted with one
//! journal commit (group commit), so every acknowledged job is on disk. The scheduling cycle
//! runs after changes (debounced) and on the clock's timer.

use super::auth::{hash_token, new_token, rfc3339, unix_now, Caller, Grant, Role, TokenInfo};
use super::engine::{EngineError, Submission};
use super::journal::{EventRecord, JobId, JournalError, TokenRecord};
use super::state::{Action, Counters, Histogram, JobDetail, JobLogs, Report, ReportBy, State};
use crate::api::Snapshot;
use crate::scheduler::reclaim::ReclaimPlan;
use serde::Serialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// An error as the API returns it: an HTTP status, a stable code, and a message that says what
/// was wrong and what to do.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ApiError {
    #[serde(skip)]
    pub status: u16,
    pub code: &'static str,
    pub error: String,
    /// The field of the submitted file the error is about (`resources.accelerators`), so a
    /// client can say where in the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            error: error.into(),
            field: None,
        }
    }
    pub fn forbidden(error: impl Into<String>) -> ApiError {
        ApiError::new(403, "forbidden", error)
    }
    pub fn bad_request(error: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid", error)
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> ApiError {
        let (status, code) = match &e {
            EngineError::Spec(_)
            | EngineError::Resolve(_)
            | EngineError::UnknownTeam { .. }
            | EngineError::UnknownClass { .. }
            | EngineError::Teams(_) => (400, "invalid"),
            EngineError::NeverFits(_) => (422, "never-fits"),
            EngineError::Forbidden(_) => (403, "forbidden"),
            EngineError::OverBudget(_) => (403, "over-budget"),
            EngineError::QueueFull(_) => (429, "queue-full"),
            EngineError::Stale(_) => (409, "stale-plan"),
            EngineError::KeyReused(_) => (422, "idempotency-key-reused"),
            EngineError::NoJob(_) | EngineError::Journal(JournalError::NoJob(_)) => {
                (404, "not-found")
            }
            EngineError::Journal(JournalError::BadTransition { .. })
            | EngineError::WrongState { .. } => (409, "conflict"),
            _ => (500, "internal"),
        };
        let field = match &e {
            EngineError::Resolve(r) => r.field.clone(),
            EngineError::UnknownTeam { .. } => Some("team".to_string()),
            EngineError::UnknownClass { .. } => Some("priority".to_string()),
            EngineError::NeverFits(_) => Some("resources".to_string()),
            _ => None,
        };
        ApiError {
            field,
            ..ApiError::new(status, code, e.to_string())
        }
    }
}

type Reply<T> = oneshot::Sender<Result<T, ApiError>>;

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
    Job {
        id: JobId,
        reply: Reply<JobDetail>,
    },
    /// Where a job's logs are (the API reads them).
    Logs {
        id: JobId,
        reply: Reply<JobLogs>,
    },
    /// How to reach into a running job's node (`POST /v1/jobs/{id}/exec`).
    Enter {
        caller: super::auth::Caller,
        id: JobId,
        rank: Option<usize>,
        tty: bool,
        argv: Vec<String>,
        reply: Reply<super::state::Entering>,
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
        /// Seconds from now until it expires.
        expires_in: Option<f64>,
        reply: Reply<String>,
    },
    Tokens {
        reply: Reply<Vec<TokenInfo>>,
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
        range: super::state::history::Range,
        reply: Reply<crate::api::NodeDetail>,
    },
    Preview {
        submission: Submission,
        reply: Reply<super::engine::Preview>,
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
        reply: Reply<Vec<crate::daemon::state::HistoryJob>>,
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
        up: super::state::ServiceUp,
        caller: Caller,
        reply: Reply<super::state::ServiceUpAnswer>,
    },
    /// `gantry serve down`: its replicas cancelled (their jobs answered).
    ServiceDown {
        name: String,
        caller: Caller,
        reply: Reply<Vec<JobId>>,
    },
    /// What the services' endpoints and probes measured (`daemon::services`, every second).
    ServiceMeasured {
        measured: Vec<(String, super::state::Measured)>,
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
    pub gpus: Vec<super::state::GpuMetric>,
    pub job_gpus: Vec<super::state::JobGpuMetric>,
    /// Dollars spent ever per team and project ("" for none).
    pub project_spend: Vec<(String, String, f64)>,
    /// The daemon's clock on the calendar (reading dates in requests).
    pub calendar: super::calendar::Calendar,
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
    tx: mpsc::Sender<Request>,
    pub published: watch::Receiver<Arc<Published>>,
    /// Changes the actor has acknowledged (a reader waits until the published state has them).
    acked: Arc<AtomicU64>,
    /// Token hash → what it grants (revoked tokens are not here).
    pub tokens: Arc<RwLock<HashMap<String, Grant>>>,
}

impl Handle {
    fn send<T>(
        &self,
        make: impl FnOnce(Reply<T>) -> Request,
    ) -> Result<oneshot::Receiver<Result<T, ApiError>>, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.tx
            .send(make(reply))
            .map_err(|_| ApiError::new(503, "stopping", "the daemon is shutting down"))?;
        Ok(answer)
    }

    /// Sends a request and waits for its answer (from async code).
    pub async fn call<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, ApiError> {
        let answer = self.send(make)?;
        answer.await.unwrap_or_else(|_| {
            Err(ApiError::new(
                503,
                "stopping",
                "the daemon is shutting down",
            ))
        })
    }

    /// Sends a request and waits for its answer (from a plain thread, e.g. the console).
    pub fn call_blocking<T>(&self, make: impl FnOnce(Reply<T>) -> Request) -> Result<T, ApiError> {
        let answer = self.send(make)?;
        answer.blocking_recv().unwrap_or_else(|_| {
            Err(ApiError::new(
                503,
                "stopping",
                "the daemon is shutting down",
            ))
        })
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
    ) -> Result<String, ApiError> {
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

/// Starts the actor thread over `state`.
pub fn spawn(
    mut state: State,
    clock: Clock,
) -> Result<(Handle, std::thread::JoinHandle<()>), EngineError> {
    let mut tokens = HashMap::new();
    for t in state.tokens()? {
        if let (Ok(role), None) = (t.role.parse(), t.revoked_at) {
            tokens.insert(
                t.hash.clone(),
                Grant {
                    caller: Caller {
                        role,
                        team: t.team.clone(),
                        name: format!("token {}", t.label),
                        user: Some(t.label.clone()),
                    },
                    expires_at: t.expires_at,
                },
            );
        }
    }
    let tokens = Arc::new(RwLock::new(tokens));
    let (tx, rx) = mpsc::channel();
    // Backends wake the actor when a run ends; one wake queued at a time.
    let queued = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (tx, queued) = (tx.clone(), queued.clone());
        state.wake().set(move || {
            if !queued.swap(true, Ordering::AcqRel) {
                let _ = tx.send(Request::Wake);
            }
        });
    }
    let (publish, watcher) = watch::channel(publication(&state, &Histogram::default(), 0));
    let acked = Arc::new(AtomicU64::new(0));
    let handle = Handle {
        tx,
        published: watcher,
        tokens: tokens.clone(),
        acked: acked.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("gantry-daemon".to_string())
        .spawn(move || {
            let mut actor = Actor {
                state,
                tokens,
                clock,
                last_step: Instant::now(),
                dirty: false,
                last_cycle: Instant::now(),
                cycle_cost: Duration::ZERO,
                cycle_cpu: Duration::ZERO,
                cycle_seconds: Histogram::default(),
                changes: 0,
                acked,
                reload: None,
                woken: false,
                queued,
                republish: false,
                submitting: false,
            };
            loop {
                if actor.run(&rx, &publish) {
                    // Hosts of a `gpu = "auto"` pool found GPUs: the fleet is rebuilt.
                    match actor.reopen(State::reopen_rediscovered) {
                        Ok(a) => {
                            actor = a;
                            actor.changed();
                            publish.send_replace(publication(
                                &actor.state,
                                &actor.cycle_seconds,
                                actor.changes,
                            ));
                            continue;
                        }
                        // Said through the daemon's messages (`reopen_rediscovered`): nothing
                        // to serve.
                        Err(_) => return,
                    }
                }
                let Some((cfg, force, reply)) = actor.reload.take() else {
                    return;
                };
                let mut said = Ok(String::new());
                match actor.reopen(|s| {
                    let (s, r) = s.reload(&cfg, force)?;
                    said = r;
                    Ok(s)
                }) {
                    Ok(a) => {
                        actor = a;
                        actor.changed();
                        let _ = reply.send(said.map_err(|e| ApiError::new(422, "invalid", e)));
                        publish.send_replace(publication(
                            &actor.state,
                            &actor.cycle_seconds,
                            actor.changes,
                        ));
                    }
                    Err(e) => {
                        // Not even the previous fleet file opens again: nothing to serve (the
                        // caller says why and stops the daemon).
                        let why = format!("reopening the state failed: {e}");
                        let _ = reply.send(Err(ApiError::new(500, "reopen-failed", why)));
                        return;
                    }
                }
            }
        })
        .map_err(|e| EngineError::NeverFits(format!("cannot start the daemon thread: {e}")))?;
    Ok((handle, thread))
}

struct Actor {
    /// Changes acknowledged so far, and the same count shared with readers.
    changes: u64,
    acked: Arc<AtomicU64>,
    state: State,
    tokens: Arc<RwLock<HashMap<String, Grant>>>,
    clock: Clock,
    last_step: Instant,
    /// A change arrived since the last cycle.
    dirty: bool,
    last_cycle: Instant,
    /// The last cycle's whole cost (its publication included), on the wall clock and in the
    /// actor thread's CPU time.
    cycle_cost: Duration,
    cycle_cpu: Duration,
    /// Scheduling-cycle latency, for `/metrics`.
    cycle_seconds: Histogram,
    /// A fleet file to reopen the state over, once the run loop has returned.
    reload: Option<(Box<crate::config::fleet::FleetConfig>, bool, Reply<String>)>,
    /// A backend woke the actor: step as soon as the debounce allows.
    woken: bool,
    /// A wake is queued (cleared when it is read, so the next one is sent).
    queued: Arc<std::sync::atomic::AtomicBool>,
    /// The snapshot changed without a change that needs a cycle (services' measurements).
    republish: bool,
    /// Submissions were admitted since the last cycle: a burst the debounce yields to.
    submitting: bool,
}

/// While submissions arrive, cycles take at most one part in this many of the actor's wall
/// time (see `Actor::debounce`). It was one in five: on `gantry bench api --jobs 60000` (a
/// queue that grows to 60,000) cycles then took a quarter of the run and 40% of the actor's CPU — the snapshot rebuilt, every waiting job explained again — for a queue that
/// changed only by the jobs just admitted. One in ten halves that; what a job submitted in a
/// burst waits for its first cycle grows from four to nine times a cycle's cost (a 45 ms
/// cycle over 60,000 waiting jobs: 405 ms), and stays 10 ms over a short queue.
const BURST_CYCLE_SHARE: u32 = 10;

/// The least time before the next cycle after one that took `wall` (its actor thread's CPU:
/// `cpu`): see `Actor::debounce`.
fn debounce_after(submitting: bool, wall: Duration, cpu: Duration) -> Duration {
    let least = Duration::from_millis(10);
    if submitting {
        (wall * (BURST_CYCLE_SHARE - 1)).max(least)
    } else {
        (cpu * 2).max(least)
    }
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the struct passed.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// What the actor publishes: the state's snapshot and counters, taken once.
/// What the API serves of `state` (and `/metrics`), as published after a change.
pub fn publication(state: &State, cycle_seconds: &Histogram, changes: u64) -> Arc<Published> {
    let (gpus, job_gpus) = state.gpu_metrics();
    Arc::new(Published {
        changes,
        snapshot: state.snapshot().clone(),
        counters: state.counters.clone(),
        cycle_seconds: cycle_seconds.clone(),
        gpus,
        job_gpus,
        project_spend: state.project_spend(),
        calendar: state.calendar().clone(),
    })
}

impl Actor {
    /// The actor over the state `open` reopens (`State::reload`, `State::reopen_rediscovered`).
    fn reopen(
        self,
        open: impl FnOnce(State) -> Result<State, EngineError>,
    ) -> Result<Actor, EngineError> {
        let Actor {
            changes,
            acked,
            state,
            tokens,
            clock,
            cycle_seconds,
            queued,
            ..
        } = self;
        let state = open(state)?;
        Ok(Actor {
            changes,
            acked,
            state,
            tokens,
            clock,
            last_step: Instant::now(),
            dirty: true,
            last_cycle: Instant::now(),
            cycle_cost: Duration::ZERO,
            cycle_cpu: Duration::ZERO,
            cycle_seconds,
            reload: None,
            woken: true,
            queued,
            republish: false,
            submitting: false,
        })
    }

    /// Serves requests and steps the clock; returns true to have the state reopened with the
    /// GPUs hosts found (`State::wants_reopen`), false to stop or reload (`self.reload`).
    fn run(
        &mut self,
        rx: &mpsc::Receiver<Request>,
        publish: &watch::Sender<Arc<Published>>,
    ) -> bool {
        loop {
            let timer = self.clock.step.saturating_sub(self.last_step.elapsed());
            let timer = if self.woken {
                timer.min(self.debounce().saturating_sub(self.last_cycle.elapsed()))
            } else {
                timer
            };
            let wait = if self.dirty {
                timer.min(self.debounce().saturating_sub(self.last_cycle.elapsed()))
            } else {
                timer
            };
            let mut batch = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(first) => {
                    batch.push(first);
                    // Everything already queued goes in the same batch (one commit).
                    while batch.len() < 4096 {
                        match rx.try_recv() {
                            Ok(more) => batch.push(more),
                            Err(_) => break,
                        }
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
            if !self.handle_batch(batch) {
                return false;
            }
            let started = Instant::now();
            let cpu_before = thread_cpu();
            let due = self.last_step.elapsed() >= self.clock.step
                || (self.woken && self.last_cycle.elapsed() >= self.debounce());
            let stepped = if due {
                self.woken = false;
                let dt = self.last_step.elapsed().as_secs_f64() * self.clock.speed;
                self.last_step = Instant::now();
                Some(self.state.advance(dt))
            } else if self.dirty && self.last_cycle.elapsed() >= self.debounce() {
                Some(self.state.tick())
            } else {
                None
            };
            if let Some(result) = stepped {
                let took = started.elapsed();
                self.dirty = false;
                self.submitting = false;
                if let Err(e) = result {
                    self.state.warn(format!("scheduling cycle failed: {e}"));
                }
                self.cycle_seconds
                    .observe(&CYCLE_BUCKETS, took.as_secs_f64());
                // The old publication is dropped here when no reader holds it.
                drop(publish.send_replace(publication(
                    &self.state,
                    &self.cycle_seconds,
                    self.changes,
                )));
                // What the debounce spaces out is the actor's whole cost of a cycle, its
                // publication included.
                self.cycle_cost = started.elapsed();
                self.cycle_cpu = thread_cpu().saturating_sub(cpu_before);
                self.last_cycle = Instant::now();
                if self.state.wants_reopen() {
                    // Reopened outside the loop (see `start`).
                    return true;
                }
            } else if std::mem::take(&mut self.republish) {
                // Services' measurements changed and nothing else did: published without a
                // scheduling cycle (they arrive four times a second under load).
                publish.send_replace(publication(&self.state, &self.cycle_seconds, self.changes));
            }
        }
    }

    /// A change was applied: a cycle is due, and readers must wait for its publication.
    fn changed(&mut self) {
        self.dirty = true;
        self.changes += 1;
        self.acked.store(self.changes, Ordering::Release);
    }

    /// The least time between cycles triggered by changes. While submissions arrive, cycles
    /// take at most about a tenth of the actor's time (`BURST_CYCLE_SHARE`), so a burst of them is not starved by
    /// re-scheduling (a cycle over a long queue explains every waiting job again, and most
    /// of that work is the same from one cycle to the next): the wall clock, which is what a
    /// waiting submission feels. Without submissions, a freed GPU is filled as soon as a
    /// third of the actor's CPU allows: a cycle that waited for the disk (the journal's
    /// fsync) or for a core (a small box shared with Slurm's daemons and `sbatch`) took no
    /// CPU from anyone, and spacing the next by that wait left freed GPUs idle — on
    /// `scripts/slurm-compare.sh`, one slow cycle in ten held the next one back 250 ms.
    fn debounce(&self) -> Duration {
        debounce_after(self.submitting, self.cycle_cost, self.cycle_cpu)
    }

    /// Handles one batch; false when asked to stop.
    fn handle_batch(&mut self, batch: Vec<Request>) -> bool {
        let mut submissions = Vec::new();
        let mut replies = Vec::new();
        for req in batch {
            match req {
                Request::Submit { submission, reply } => {
                    submissions.push(submission);
                    replies.push(reply);
                }
                Request::Shutdown => {
                    self.flush_submissions(&submissions, replies);
                    return false;
                }
                Request::Reload { cfg, force, reply } => {
                    self.flush_submissions(&submissions, std::mem::take(&mut replies));
                    submissions.clear();
                    match cfg {
                        // The run loop returns; the state is reopened outside it.
                        Ok(cfg) => {
                            self.reload = Some((cfg, force, reply));
                            return false;
                        }
                        Err(why) => {
                            self.state.warn(format!(
                                "the edited fleet file was not applied: {why}; the previous one stays in force"
                            ));
                            self.changed();
                            let _ = reply.send(Err(ApiError::new(422, "invalid", why)));
                        }
                    }
                }
                Request::Wake => {
                    self.queued.store(false, Ordering::Release);
                    self.woken = true;
                }
                other => {
                    // Keep order: submissions before this request are admitted first.
                    self.flush_submissions(&submissions, std::mem::take(&mut replies));
                    submissions.clear();
                    self.handle(other);
                }
            }
        }
        self.flush_submissions(&submissions, replies);
        true
    }

    fn flush_submissions(&mut self, subs: &[Submission], replies: Vec<Reply<JobId>>) {
        if subs.is_empty() {
            return;
        }
        let answers = self.state.submit(subs);
        if answers.iter().any(Result::is_ok) {
            self.changed();
            self.submitting = true;
        }
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer.map_err(ApiError::from));
        }
    }

    fn handle(&mut self, req: Request) {
        match req {
            Request::Submit { .. } | Request::Shutdown | Request::Reload { .. } | Request::Wake => {
            }
            Request::Act {
                id,
                action,
                caller,
                reply,
            } => {
                let r = self.check_job(id, &caller).and_then(|()| {
                    self.state
                        .act(id, action, &caller.name)
                        .map_err(ApiError::from)
                });
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::Priority {
                id,
                class,
                caller,
                reply,
            } => {
                let r = self.check_job(id, &caller).and_then(|()| {
                    self.state
                        .set_priority(id, &class, &caller.name, caller.role == Role::Operator)
                        .map_err(ApiError::from)
                });
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::Job { id, reply } => {
                let _ = reply.send(self.state.job_detail(id).map_err(ApiError::from));
            }
            Request::Logs { id, reply } => {
                let _ = reply.send(self.state.job_logs(id).map_err(ApiError::from));
            }
            Request::Enter {
                caller,
                id,
                rank,
                tty,
                argv,
                reply,
            } => {
                let _ = reply.send(self.state.enter(&caller, id, rank, tty, &argv));
            }
            Request::WorkdirsInUse { reply } => {
                let used = self
                    .state
                    .engine()
                    .jobs()
                    .filter(|j| !j.state.is_final())
                    .filter_map(|j| j.spec.workdir.clone())
                    .collect();
                let _ = reply.send(Ok(used));
            }
            Request::Reclaim {
                apply,
                caller,
                reply,
            } => {
                let r = match apply {
                    None => Ok(self.state.show_reclaim()),
                    Some(_) if caller.role != Role::Operator => Err(ApiError::forbidden(format!(
                        "applying a reclaim needs the operator role; this caller is a {}",
                        caller.role
                    ))),
                    Some(id) => {
                        self.changed();
                        self.state
                            .apply_reclaim(&caller.name, &id)
                            .map_err(ApiError::from)
                    }
                };
                let _ = reply.send(r);
            }
            Request::Token {
                role,
                team,
                label,
                expires_in,
                reply,
            } => {
                let _ = reply.send(self.create_token(role, team, label, expires_in));
            }
            Request::Tokens { reply } => {
                let now = unix_now();
                let _ = reply.send(
                    self.state
                        .tokens()
                        .map(|ts| ts.iter().map(|t| TokenInfo::of(t, now)).collect())
                        .map_err(ApiError::from),
                );
            }
            Request::Revoke { id, caller, reply } => {
                let _ = reply.send(self.revoke_token(&id, &caller));
            }
            Request::Events { job, limit, reply } => {
                let _ = reply.send(self.state.events(job, limit).map_err(ApiError::from));
            }
            Request::Node { name, range, reply } => {
                let _ = reply.send(self.state.node_detail(&name, range).ok_or_else(|| {
                    ApiError::new(
                        404,
                        "not-found",
                        format!(
                            "node `{}`: no such node (gantry fleet --pool NAME lists a pool's)",
                            name.escape_debug()
                        ),
                    )
                }));
            }
            Request::ServiceUp { up, caller, reply } => {
                let r = self.state.service_up(up, &caller);
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::ServiceDown {
                name,
                caller,
                reply,
            } => {
                let r = self.state.service_down(&name, &caller);
                if r.is_ok() {
                    self.changed();
                }
                let _ = reply.send(r);
            }
            Request::ServiceMeasured { measured } => {
                // A replica started or retired needs a cycle; new figures only a publication.
                if self.state.service_measured(measured) {
                    self.changed();
                } else {
                    self.republish = true;
                }
            }
            Request::Pool { index, reply } => {
                let _ = reply.send(self.state.pool_detail(index).ok_or_else(|| {
                    ApiError::new(
                        404,
                        "not-found",
                        format!("pool {index}: no such pool (GET /v1/fleet lists them in order)"),
                    )
                }));
            }
            Request::Preview { submission, reply } => {
                let _ = reply.send(self.state.preview(&submission).map_err(ApiError::from));
            }
            Request::Report {
                since,
                until,
                by,
                reply,
            } => {
                let _ = reply.send(self.state.report(since, until, by).map_err(ApiError::from));
            }
            Request::History { query, reply } => {
                let _ = reply.send(self.state.history(&query).map_err(ApiError::from));
            }
        }
    }

    /// The job exists and this caller may change it.
    fn check_job(&self, id: JobId, caller: &Caller) -> Result<(), ApiError> {
        let team = self
            .state
            .job_team(id)
            .ok_or_else(|| ApiError::new(404, "not-found", format!("job {id}: no such job")))?;
        if caller.may_change(&team) {
            Ok(())
        } else {
            Err(ApiError::forbidden(format!(
                "job {id} belongs to team `{team}`; a {}{} cannot change it",
                caller.role,
                caller
                    .team
                    .as_deref()
                    .map_or(String::new(), |t| format!(" of team `{t}`"))
            )))
        }
    }

    fn create_token(
        &mut self,
        role: Role,
        team: Option<String>,
        label: String,
        expires_in: Option<f64>,
    ) -> Result<String, ApiError> {
        if role == Role::Researcher && team.is_none() {
            return Err(ApiError::bad_request(
                "a researcher token needs --team: it may change only that team's jobs",
            ));
        }
        if let Some(t) = &team {
            if !self.state.has_team(t) {
                return Err(ApiError::bad_request(format!(
                    "unknown team `{t}`; teams: {}",
                    self.state.team_names().join(", ")
                )));
            }
        }
        let token = new_token().map_err(|e| {
            ApiError::new(
                500,
                "internal",
                format!("cannot read random bytes from the kernel: {e}"),
            )
        })?;
        let record = TokenRecord {
            hash: hash_token(&token),
            role: role.name().to_string(),
            team: team.clone(),
            label: label.clone(),
            created_at: unix_now(),
            expires_at: expires_in.map(|s| unix_now() + s),
            revoked_at: None,
        };
        self.state.add_token(&record).map_err(ApiError::from)?;
        if let Ok(mut t) = self.tokens.write() {
            t.insert(
                record.hash,
                Grant {
                    caller: Caller {
                        role,
                        team,
                        name: format!("token {label}"),
                        user: Some(label.clone()),
                    },
                    expires_at: record.expires_at,
                },
            );
        }
        Ok(token)
    }

    /// Revokes the one token whose id starts with `id`: refused from then on, by every
    /// listener, with no restart.
    fn revoke_token(&mut self, id: &str, caller: &Caller) -> Result<TokenInfo, ApiError> {
        if id.len() < 8 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(ApiError::bad_request(format!(
                "token id `{}`: expected at least 8 hex digits, the ID column of `gantry token list`",
                id.escape_debug()
            )));
        }
        let id = id.to_ascii_lowercase();
        let all = self.state.tokens().map_err(ApiError::from)?;
        let found: Vec<_> = all.iter().filter(|t| t.hash.starts_with(&id)).collect();
        let mut t = match found.as_slice() {
            [one] => (*one).clone(),
            [] => {
                return Err(ApiError::new(
                    404,
                    "not-found",
                    format!("token {id}: no such token (gantry token list shows them)"),
                ))
            }
            _ => {
                return Err(ApiError::bad_request(format!(
                    "token id {id} names {} tokens; give more of it",
                    found.len()
                )))
            }
        };
        let at = unix_now();
        if t.revoked_at.is_none() {
            self.state
                .revoke_token(&t, at, &caller.name)
                .map_err(ApiError::from)?;
            if let Ok(mut map) = self.tokens.write() {
                map.remove(&t.hash);
            }
            t.revoked_at = Some(at);
        }
        Ok(TokenInfo::of(&t, at))
    }
}

#[cfg(test)]
mod tests {
    use super::{debounce_after, thread_cpu};
    use std::time::Duration;

    /// A cycle that waited 200 ms for the disk or a core but burned 6 ms of CPU: without
    /// submissions the next may run 12 ms after it (it waited 400 ms before, freed GPUs
    /// idle meanwhile); while submissions arrive, the wall clock still spaces cycles.
    #[test]
    fn a_cycle_that_waited_does_not_hold_the_next_back_by_its_wait() {
        let (wall, cpu) = (Duration::from_millis(200), Duration::from_millis(6));
        assert_eq!(debounce_after(false, wall, cpu), Duration::from_millis(12));
        assert_eq!(debounce_after(true, wall, cpu), Duration::from_millis(1800));
        assert_eq!(
            debounce_after(false, wall, Duration::from_micros(300)),
            Duration::from_millis(10),
            "never closer than 10 ms"
        );
    }

    #[test]
    fn the_threads_cpu_time_counts_work_not_sleep() {
        let t0 = thread_cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu() - t0;
        // Work bounded by the wall clock, so a clock that never moves fails, not hangs.
        let (t1, wall) = (thread_cpu(), std::time::Instant::now());
        let mut x = 0u64;
        while wall.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let worked = thread_cpu() - t1;
        assert!(x > 0);
        assert!(
            slept < Duration::from_millis(20),
            "{slept:?} of CPU in a sleep"
        );
        assert!(
            worked > slept,
            "{worked:?} of CPU in 30 ms of work, {slept:?} in a sleep"
        );
    }
}
