//! The engine: the single owner of the daemon's state. Every change is written to the journal
//! first and applied in memory only once it is committed, so memory never runs ahead of disk.
//! It is synchronous on purpose: the async daemon (API, timers, backends) drives it from one
//! task, which keeps "one owner" true by construction.

mod admit;
mod ahead;
mod cycle;
mod fleet;
mod lengths;
mod limits;
mod open;
mod records;
mod table;
mod usage;

pub use ahead::Copy;
pub use lengths::Basis;
pub use limits::{Limit, UserLimits};

use super::journal::{Charge, JobId, JobRecord, JournalError, NewJob, Store};
use crate::api::JobState;
use crate::model::{
    decay, used, validate_teams, Fleet, JobRequest, Placement, PriorityClass, Team, TeamError,
    FAIR_SHARE_HALF_LIFE_S,
};
use crate::scheduler::cycle::{
    run_cycle, CycleConfig, CycleError, CycleInput, CycleOutput, Decision, Explanation, PendingJob,
    RunningJob,
};
use crate::scheduler::moves::{moves_off, Mover};
use crate::scheduler::{Cluster, Placer, Policy, Unplaceable};
use crate::spec::{self, JobSpec};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Journal(#[from] JournalError),
    #[error(transparent)]
    Spec(#[from] spec::SpecError),
    #[error("{0}")]
    Resolve(#[from] spec::ResolveError),
    #[error(transparent)]
    Teams(#[from] TeamError),
    #[error("unknown team `{team}`; teams: {known}")]
    UnknownTeam { team: String, known: String },
    #[error("unknown priority class `{class}`; classes: {known}")]
    UnknownClass { class: String, known: String },
    #[error("rejected: {0}")]
    NeverFits(String),
    #[error("{0}")]
    Forbidden(String),
    #[error("{0}")]
    OverBudget(String),
    /// The team has as many jobs waiting as it may.
    #[error("{0}")]
    QueueFull(String),
    /// A plan or view that is no longer current.
    #[error("{0}")]
    Stale(String),
    /// An idempotency key sent again with a different submission.
    #[error("{0}")]
    KeyReused(String),
    #[error("job {0}: no such job")]
    NoJob(JobId),
    #[error("scheduling cycle: {0}")]
    Cycle(#[from] CycleError),
    #[error("journal holds job {id} whose spec no longer parses: {why}")]
    Unreadable { id: JobId, why: String },
    #[error("{0}")]
    Locked(String),
    /// A pool's backend could not be opened (its runner or provisioner), and why.
    #[error(transparent)]
    Open(#[from] crate::backend::error::OpenError),
    /// A backend was asked about what it does not have (a node no pool holds), or this host
    /// could not hand it what it needs (a run directory).
    #[error("{0}")]
    Backend(String),
    /// An action the job's state does not allow, with what would.
    #[error("job {id} is {state}; {why}")]
    WrongState {
        id: JobId,
        state: JobState,
        why: &'static str,
    },
}

pub use crate::api::Preview;

/// What a spent budget does to a team's new submissions.
#[derive(Clone, Debug, PartialEq)]
pub enum BudgetGate {
    /// Refused, with this message.
    Block(String),
    /// Admitted in the lowest priority class.
    Demote,
}

/// One job as the engine holds it.
#[derive(Clone, Debug, Serialize)]
pub struct Job {
    pub id: JobId,
    pub name: Option<String>,
    /// Who submitted it.
    pub user: Option<String>,
    pub team: usize,
    pub class: usize,
    pub state: JobState,
    pub submitted_at: f64,
    pub spec: JobSpec,
    pub request: JobRequest,
    /// Other shapes it takes (other GPU counts), in order; see `PendingJob::alternatives`.
    pub alternatives: Vec<JobRequest>,
    pub placement: Option<Placement>,
    pub started_at: Option<f64>,
    /// Started on capacity borrowed from its team's cohort (reclaimed first).
    pub borrowed: bool,
    /// Why it waits, from the last cycle (boxed: only waiting jobs have one, and it is 200
    /// bytes that every kept job would carry).
    pub explanation: Option<Box<Explanation>>,
    /// Dollars billed for its finished runs (the current run bills on top).
    pub cost: f64,
}

impl Job {
    /// What a finished job keeps in memory: what the lists, the bills and the logs' redaction
    /// read. What only a start reads (its commands, environment, file mounts, the shapes it
    /// might have taken, why it waited) goes: the whole spec stays in the journal, where a
    /// job's detail reads it. With the jobs boxed, a kept job went from about 3.5 KB to about 1.4 KB.
    pub fn keep_as_finished(&mut self) {
        let s = &mut self.spec;
        s.run = None;
        s.setup = None;
        s.envs = Default::default();
        s.unset = Vec::new();
        s.unset_uses = None;
        s.file_mounts = Vec::new();
        s.alternatives = Vec::new();
        s.ignored = Vec::new();
        s.git_workdir = None;
        self.alternatives = Vec::new();
        self.explanation = None;
    }

    /// A job with nothing set but its id and state (tests build on it).
    #[cfg(test)]
    pub(crate) fn bare(id: JobId, state: JobState) -> Job {
        Job {
            id,
            name: None,
            user: None,
            team: 0,
            class: 0,
            state,
            submitted_at: 0.0,
            spec: Default::default(),
            request: Default::default(),
            alternatives: Vec::new(),
            placement: None,
            started_at: None,
            borrowed: false,
            explanation: None,
            cost: 0.0,
        }
    }

    /// The shape it runs as (one of its alternatives when it started as one), else its first.
    pub fn shape(&self) -> &JobRequest {
        let Some(p) = &self.placement else {
            return &self.request;
        };
        std::iter::once(&self.request)
            .chain(&self.alternatives)
            .find(|r| r.total_gpu_milli() == p.gpu_milli())
            .unwrap_or(&self.request)
    }
    /// What it has cost up to `now`: finished runs plus the current one.
    pub fn cost_at(&self, now: f64) -> f64 {
        let running = match (&self.placement, self.started_at) {
            (Some(p), Some(t)) => p.price_per_hour * (now - t).max(0.0) / 3600.0,
            _ => 0.0,
        };
        self.cost + running
    }
}

/// One job file to admit, with the caller's overrides.
#[derive(Clone, Debug, Default)]
pub struct Submission {
    pub file: String,
    pub text: Vec<u8>,
    pub team: Option<String>,
    pub priority: Option<String>,
    /// When set, the job must belong to this team (a researcher's token).
    pub only_team: Option<String>,
    /// `text` already parsed, off the daemon's thread (the API does this: parsing untrusted
    /// YAML must never hold up the actor every other client waits on).
    pub parsed: Option<JobSpec>,
    /// The client's `Idempotency-Key`, scoped to the caller: a retry with the same key and
    /// the same submission gets the job the first one made.
    pub idempotency_key: Option<String>,
    /// Who submits it: the Unix account its processes run as (the peer on the socket, the
    /// user a token was issued for over TCP); `None`: nobody.
    pub user: Option<String>,
    /// Work a backend's own users handed gantry to place (a pod with `schedulerName:
    /// gantry`): it runs there, started by that backend, never by this daemon on its host.
    pub from_backend: bool,
    /// The text as the client sent it, where the daemon wrote into `text` (an experiment
    /// run's variables, made for this submission): what an idempotency key vouches for.
    pub sent_text: Option<Vec<u8>>,
    /// It is reported to the fleet's experiment tracker: the journal keeps what is owed.
    pub reported: bool,
}

impl Submission {
    /// What the idempotency key vouches for: the spec as sent and the overrides, hashed.
    fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.sent_text.as_deref().unwrap_or(&self.text),
            self.team.as_deref().unwrap_or("").as_bytes(),
            self.priority.as_deref().unwrap_or("").as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        crate::daemon::auth::hex(&h.finalize())
    }
}

/// What a cycle did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct TickReport {
    pub started: Vec<JobId>,
    pub preempting: Vec<JobId>,
    pub reserved: Vec<JobId>,
    /// Decisions dropped because the job's state or the fleet did not allow them, and why.
    pub skipped: Vec<(JobId, String)>,
}

pub struct Engine {
    store: Store,
    cluster: Cluster,
    placer: Placer,
    teams: Vec<Team>,
    classes: Vec<PriorityClass>,
    /// Each team's fair-share usage (GPU-seconds decayed with `FAIR_SHARE_HALF_LIFE_S`) as
    /// counted at `usage_at`: read from the journal's charges at open, then counted from what
    /// runs at each cycle and as each run ends.
    usage: Vec<f64>,
    usage_at: f64,
    config: CycleConfig,
    /// The jobs in memory: every live one, and the window of finished ones.
    jobs: table::JobTable,
    /// Teams whose budget is spent, and what that does to their submissions.
    budget: HashMap<usize, BudgetGate>,
    /// Runs ended so far (each closes a charge): tells readers of the bill when to re-read.
    releases: u64,
    /// GPUs a backend reports busy with work gantry did not start, held out of the
    /// scheduler's reach as an allocation of the whole GPU (node, GPU) → that allocation.
    held: BTreeMap<(u32, u8), Placement>,
    /// Nodes held for one pending job while the jobs on them move away (defragmentation):
    /// node → (job, since). The cycle places nobody else there; the job starts there once it
    /// fits.
    pins: BTreeMap<u32, (JobId, f64)>,
    /// Per team, the class indices its jobs may have (`None`: any).
    allowed: HashMap<usize, Vec<usize>>,
    /// Per team, how many jobs it may have waiting (pending or held) at once.
    max_pending: HashMap<usize, usize>,
    /// What one user's running jobs may hold at once.
    user_limits: UserLimits,
    /// Finished jobs still in memory, in the order they finished; past `history_kept` the
    /// oldest are dropped from memory (the journal keeps them: `job_record`).
    finished: VecDeque<JobId>,
    history_kept: usize,
    /// Finished jobs past the window stay until `forget_old` is called.
    until_read: bool,
    /// Finished jobs dropped from memory since the allocator was last asked to give back
    /// what they held.
    forgotten: usize,
    /// Finished jobs in the journal that the fleet file no longer resolves (a pool, team or
    /// class since removed): kept in the journal only.
    stale_history: usize,
    /// Jobs the last `submit_batch` answered from an idempotency key (retries, not new jobs).
    replayed: Vec<JobId>,
    /// Preempting jobs to hold, not requeue, once stopped (suspended: reclaimed notebooks).
    suspending: std::collections::HashSet<JobId>,
    /// Per team, its jobs in memory that wait (pending or held), kept as states change.
    waiting: Vec<usize>,
    /// Live jobs that failed when the engine opened because the fleet file no longer
    /// resolves them, and why.
    failed_at_open: Vec<(JobId, String)>,
    /// How long completed runs lasted, by kind: what start estimates give running jobs.
    lengths: lengths::RunLengths,
}

/// How a suspension's preemption reads in the journal (and is recognised after a restart).
const SUSPENDED: &str = "suspended: ";

/// Finished jobs a daemon keeps whole in memory by default (what follows an end reads them:
/// a job's detail, a service's replacement, a dependant; older ones are read from the journal
/// one at a time). A kept job is about 1.5 KB (`gantry bench memory`); the listings keep a row
/// for more (`state::rows::LISTED_FINISHED`, about a third of that each), so that a daemon's
/// memory stops growing with its history after a few thousand jobs (it was 5,000 whole ones).
pub const HISTORY_KEPT: usize = 1_000;

/// The least number of finished jobs to leave memory between two hand-backs of freed memory
/// (`heap::give_back_freed`), so that a small window does not trim at every cycle.
const FORGOTTEN_BEFORE_TRIM: usize = 1_000;

/// Jobs a team may have waiting at once unless its `[[teams]] max_pending` says otherwise.
pub const DEFAULT_MAX_PENDING: usize = 10_000;

impl Engine {
    /// Live jobs that failed as the engine opened: the fleet file no longer resolves them.
    pub fn failed_at_open(&self) -> &[(JobId, String)] {
        &self.failed_at_open
    }

    /// Finished jobs in the journal that today's fleet file no longer resolves (kept there,
    /// not in memory).
    pub fn stale_history(&self) -> usize {
        self.stale_history
    }

    /// One job as the journal has it, in memory or not (its spec text as submitted).
    pub fn job_record(&mut self, id: JobId) -> Result<Option<JobRecord>, EngineError> {
        Ok(self.store.job(id)?)
    }

    /// How many finished jobs stay in memory (the rest are read from the journal).
    /// How long a job runs before a higher class may preempt it (`[scheduler] min_runtime`).
    pub fn set_min_runtime(&mut self, s: f64) {
        self.config.min_runtime_s = s.max(0.0);
    }

    pub fn set_history_kept(&mut self, n: usize) {
        self.history_kept = n;
        self.forget_old();
    }

    /// Keeps the per-team count of waiting jobs as one job goes `from` → `to` (`None`: not in
    /// memory).
    fn count_waiting(&mut self, team: usize, from: Option<JobState>, to: Option<JobState>) {
        let waits = |s: Option<JobState>| matches!(s, Some(JobState::Pending | JobState::Held));
        if let Some(n) = self.waiting.get_mut(team) {
            match (waits(from), waits(to)) {
                (false, true) => *n += 1,
                (true, false) => *n = n.saturating_sub(1),
                _ => {}
            }
        }
    }

    /// How many of `team`'s jobs wait (pending or held).
    pub fn waiting(&self, team: &str) -> Result<usize, EngineError> {
        let t = self.team_index(team)?;
        Ok(self.waiting.get(t).copied().unwrap_or(0))
    }

    /// How many jobs `team` may have waiting at once.
    pub fn set_max_pending(&mut self, team: &str, n: usize) -> Result<(), EngineError> {
        let t = self.team_index(team)?;
        self.max_pending.insert(t, n);
        Ok(())
    }

    /// Past the window, the oldest finished jobs leave memory when they finish (the
    /// default), or only when `forget_old` is called (`true`: a reader must see every job
    /// finished first — the daemon's listings take each one's row at the next snapshot).
    pub fn keep_finished_until_read(&mut self, on: bool) {
        self.until_read = on;
    }

    /// Lets the finished jobs past the window leave memory (the journal keeps them).
    pub fn forget_old(&mut self) {
        while self.finished.len() > self.history_kept {
            if let Some(id) = self.finished.pop_front() {
                self.jobs.remove(&id);
                self.forgotten += 1;
            }
        }
        // The memory of jobs that left is handed back once a window's worth has left: held,
        // it would stay resident until reused, and after a burst it may never be.
        if self.forgotten >= self.history_kept.max(FORGOTTEN_BEFORE_TRIM) {
            self.forgotten = 0;
            crate::heap::give_back_freed();
        }
    }

    /// How many runs have ended (and closed their charge) since the engine opened.
    pub fn releases(&self) -> u64 {
        self.releases
    }

    /// The class with the lowest value (where over-budget teams' jobs go).
    pub fn lowest_class(&self) -> usize {
        (0..self.classes.len())
            .min_by_key(|&c| self.classes[c].value)
            .unwrap_or(0)
    }

    /// Sets (or lifts, with `None`) what a team's spent budget does to its new submissions.
    pub fn set_budget_gate(&mut self, team: usize, gate: Option<BudgetGate>) {
        match gate {
            Some(g) => self.budget.insert(team, g),
            None => self.budget.remove(&team),
        };
    }

    /// Limits the classes `team`'s jobs may be submitted at or moved to (by name; unknown
    /// names are refused). `None` lifts the limit.
    pub fn set_allowed_classes(
        &mut self,
        team: &str,
        classes: Option<&[String]>,
    ) -> Result<(), EngineError> {
        let t = self.team_index(team)?;
        match classes {
            None => {
                self.allowed.remove(&t);
            }
            Some(names) => {
                let idx = names
                    .iter()
                    .map(|c| self.class_index(c))
                    .collect::<Result<Vec<_>, _>>()?;
                self.allowed.insert(t, idx);
            }
        }
        Ok(())
    }

    /// Whether `team`'s researchers may have jobs of `class`; the error names the classes it
    /// may use. A team whose fleet entry lists no classes has the default (lowest) one only: a
    /// fresh install lets no team raise its own work above everyone else's; classes above the
    /// default are given per team, explicitly. An operator (`operator`) may set any class.
    fn check_class(&self, team: usize, class: usize, operator: bool) -> Result<(), EngineError> {
        if operator {
            return Ok(());
        }
        let lowest = self.lowest_class();
        if !self.allowed.contains_key(&team)
            && self.classes[class].value > self.classes[lowest].value
        {
            return Err(EngineError::Forbidden(format!(
                "team `{}` lists no priority classes in the fleet file, so its researchers use `{}`, the default; `{}` is above it — an operator may set it, or give the team classes = [\"{}\", …] in its [[teams]] entry",
                self.teams[team].name,
                self.classes[lowest].name,
                self.classes[class].name,
                self.classes[class].name,
            )));
        }
        match self.allowed.get(&team) {
            Some(ok) if !ok.contains(&class) => {
                let names: Vec<&str> = ok.iter().map(|&c| self.classes[c].name.as_str()).collect();
                Err(EngineError::Forbidden(format!(
                    "team `{}` may use the priority classes {}; `{}` is not among them (the fleet file's [[teams]] classes)",
                    self.teams[team].name,
                    names.join(", "),
                    self.classes[class].name
                )))
            }
            _ => Ok(()),
        }
    }

    fn team_index(&self, name: &str) -> Result<usize, EngineError> {
        find_named(&self.teams, name, |t| &t.name).map_err(|known| EngineError::UnknownTeam {
            team: name.to_string(),
            known,
        })
    }

    /// The index of the priority class `name` (the error lists the classes).
    pub fn class_named(&self, name: &str) -> Result<usize, EngineError> {
        self.class_index(name)
    }

    fn class_index(&self, name: &str) -> Result<usize, EngineError> {
        find_named(&self.classes, name, |c| &c.name).map_err(|known| EngineError::UnknownClass {
            class: name.to_string(),
            known,
        })
    }

    /// Why job `id`, not in memory, cannot change: it finished (the journal has it) or there
    /// is no such job.
    fn not_live(&self, id: JobId) -> EngineError {
        match self.store.job(id) {
            Ok(Some(r)) => EngineError::WrongState {
                id,
                state: r.state,
                why: "a finished job cannot change",
            },
            Ok(None) => EngineError::NoJob(id),
            Err(e) => e.into(),
        }
    }

    /// A job in memory to change; one only in the journal has finished and cannot change.
    fn job_mut(&mut self, id: JobId) -> Result<&mut Job, EngineError> {
        if !self.jobs.contains_key(&id) {
            return Err(self.not_live(id));
        }
        self.jobs.get_mut(&id).ok_or(EngineError::NoJob(id))
    }

    /// Journals then applies a state change; releases GPUs when a job stops running.
    fn move_to(&mut self, id: JobId, to: JobState, now: f64, why: &str) -> Result<(), EngineError> {
        self.job_mut(id)?;
        self.store.transition(id, to, now, why)?;
        self.apply_move(id, to, now)
    }

    /// Applies a journaled move in memory: the bill, the GPUs, the waiting counts, the set of
    /// suspending jobs and the window of finished ones.
    fn apply_move(&mut self, id: JobId, to: JobState, now: f64) -> Result<(), EngineError> {
        let job = self.jobs.get_mut(&id).ok_or(EngineError::NoJob(id))?;
        let (team, from) = (job.team, job.state);
        if let (JobState::Completed, Some(started)) = (to, job.started_at) {
            self.learn_length(id, started, now);
        }
        let job = self.jobs.get_mut(&id).ok_or(EngineError::NoJob(id))?;
        job.state = to;
        let mut released = Ok(());
        if to != JobState::Running && to != JobState::Preempting {
            job.cost = job.cost_at(now);
            if let (Some(p), Some(started)) = (&job.placement, job.started_at) {
                // The run's last piece, since usage was last counted.
                let gpus = p.gpu_milli() as f64 / 1000.0;
                let from = self.usage_at.max(started);
                if let Some(u) = self.usage.get_mut(team) {
                    *u += used(gpus, from, now, self.usage_at, FAIR_SHARE_HALF_LIFE_S);
                }
            }
            if let Some(p) = job.placement.take() {
                self.releases += 1;
                released = self
                    .cluster
                    .release(&p)
                    .map_err(|e| EngineError::Unreadable {
                        id,
                        why: e.to_string(),
                    });
            }
            job.started_at = None;
        }
        self.count_waiting(team, Some(from), Some(to));
        if to != JobState::Preempting {
            self.suspending.remove(&id);
        }
        if to.is_final() {
            if let Some(job) = self.jobs.get_mut(&id) {
                job.keep_as_finished();
            }
            self.jobs.ended(id);
            self.finished.push_back(id);
            if !self.until_read {
                self.forget_old();
            }
        }
        released
    }

    pub fn cancel(&mut self, id: JobId, now: f64) -> Result<(), EngineError> {
        self.move_to(id, JobState::Cancelled, now, "cancelled")
    }
    /// Holds a pending job: it keeps its place in the queue but does not start. A running
    /// job is stopped by preempting or cancelling it, never by a hold.
    pub fn hold(&mut self, id: JobId, now: f64) -> Result<(), EngineError> {
        self.expect_state(
            id,
            JobState::Pending,
            "hold applies to pending jobs (a running job is stopped with preempt or cancel)",
        )?;
        self.move_to(id, JobState::Held, now, "held")
    }
    /// Holds a pending job for a reason of the daemon's own (a restart's backoff), said in its
    /// history.
    pub fn hold_because(&mut self, id: JobId, now: f64, why: &str) -> Result<(), EngineError> {
        self.expect_state(id, JobState::Pending, "only a pending job is held")?;
        self.move_to(id, JobState::Held, now, why)
    }

    /// Releases a job the daemon held (`hold_because`), saying why.
    pub fn release_because(&mut self, id: JobId, now: f64, why: &str) -> Result<(), EngineError> {
        self.expect_state(id, JobState::Held, "only a held job is released")?;
        self.move_to(id, JobState::Pending, now, why)
    }

    /// Releases a held job back to the queue. Only a held job: releasing a running one would
    /// free its GPUs while its processes still run, and the next cycle would start it again.
    pub fn release(&mut self, id: JobId, now: f64) -> Result<(), EngineError> {
        self.expect_state(
            id,
            JobState::Held,
            "release applies to held jobs (a running job is stopped with preempt or cancel)",
        )?;
        self.move_to(id, JobState::Pending, now, "released")
    }

    fn expect_state(
        &self,
        id: JobId,
        want: JobState,
        why: &'static str,
    ) -> Result<(), EngineError> {
        let state = match self.jobs.get(&id) {
            Some(j) => j.state,
            None => self.store.job(id)?.ok_or(EngineError::NoJob(id))?.state,
        };
        if state == want {
            Ok(())
        } else {
            Err(EngineError::WrongState { id, state, why })
        }
    }
    /// An operator's preemption: the job is told to stop (its backend sends the signal and
    /// waits the grace), then requeues from its checkpoint.
    pub fn preempt(&mut self, id: JobId, now: f64, why: &str) -> Result<(), EngineError> {
        self.move_to(id, JobState::Preempting, now, why)
    }
    /// Suspends a running job: it is told to stop like a preemption and, once stopped, held
    /// (not requeued) until its owner releases it.
    pub fn suspend(&mut self, id: JobId, now: f64, why: &str) -> Result<(), EngineError> {
        self.expect_state(id, JobState::Running, "only a running job is suspended")?;
        self.move_to(
            id,
            JobState::Preempting,
            now,
            &format!("{SUSPENDED}{why}; held once stopped, until its owner releases it"),
        )?;
        self.suspending.insert(id);
        Ok(())
    }

    /// A backend reports that a preempted job has stopped: back to the queue (or held, if it
    /// was suspended).
    pub fn requeued(&mut self, id: JobId, now: f64) -> Result<(), EngineError> {
        if self.suspending.contains(&id) {
            self.move_to(
                id,
                JobState::Held,
                now,
                "stopped; suspended until its owner releases it (gantry release ID)",
            )?;
            return Ok(());
        }
        self.move_to(
            id,
            JobState::Pending,
            now,
            "stopped; requeued from its checkpoint",
        )
    }
    pub fn teams(&self) -> &[Team] {
        &self.teams
    }
    pub fn classes(&self) -> &[PriorityClass] {
        &self.classes
    }
    /// A backend reports that a job exited.
    pub fn finished(&mut self, id: JobId, ok: bool, now: f64) -> Result<(), EngineError> {
        let (to, why) = exit_move(ok);
        self.move_to(id, to, now, why)
    }

    /// The same, with what happened said in the job's history ("exited with code 3 on
    /// gpu-b", "could not start on gpu-a: …").
    pub fn finished_because(
        &mut self,
        id: JobId,
        ok: bool,
        now: f64,
        why: &str,
    ) -> Result<(), EngineError> {
        let (to, _) = exit_move(ok);
        self.move_to(id, to, now, why)
    }

    /// Several jobs' exits, with one journal commit; (job, exited 0). A job that is not
    /// running or preempting is skipped and named in the answer.
    pub fn finished_all(
        &mut self,
        exits: &[(JobId, bool)],
        now: f64,
    ) -> Result<Vec<JobId>, EngineError> {
        let mut skipped = Vec::new();
        let mut moves = Vec::new();
        for &(id, ok) in exits {
            match self.jobs.get(&id).map(|j| j.state) {
                Some(JobState::Running | JobState::Preempting) => {
                    let (to, why) = exit_move(ok);
                    moves.push((id, to, why.to_string()));
                }
                _ => skipped.push(id),
            }
        }
        self.store.transition_all(&moves, now)?;
        for (id, to, _) in moves {
            // Journaled already: every exit is applied; a placement the fleet no longer
            // recognises (an invariant broken elsewhere) does not stop the others.
            let _ = self.apply_move(id, to, now);
        }
        Ok(skipped)
    }

    /// Moves job `id` to `class`; `operator`: an operator asks (see `check_class`).
    pub fn set_priority(
        &mut self,
        id: JobId,
        class: &str,
        now: f64,
        operator: bool,
    ) -> Result<(), EngineError> {
        let c = self.class_index(class)?;
        let team = self.job_mut(id)?.team;
        self.check_class(team, c, operator)?;
        self.store.set_priority(id, class, now)?;
        self.job_mut(id)?.class = c;
        Ok(())
    }

    /// Every job in memory (the live ones and the window of finished ones), by id.
    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    /// The jobs not finished, by id: what each cycle's walks over what runs and waits read.
    pub fn live_jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.live()
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    pub fn fleet(&self) -> &Fleet {
        self.cluster.fleet()
    }

    /// A backend lost the node a running job was on: the job goes back to the queue.
    pub fn lost(&mut self, id: JobId, now: f64, why: &str) -> Result<(), EngineError> {
        let to = if self.suspending.contains(&id) {
            JobState::Held
        } else {
            JobState::Pending
        };
        self.move_to(id, to, now, why)
    }
}

/// The index of the item called `name`, or the list of names there are (for the error).
fn find_named<T>(items: &[T], name: &str, name_of: impl Fn(&T) -> &str) -> Result<usize, String> {
    items
        .iter()
        .position(|t| name_of(t) == name)
        .ok_or_else(|| items.iter().map(&name_of).collect::<Vec<_>>().join(", "))
}

/// What a job's exit makes of it, and the journal's reason.
fn exit_move(ok: bool) -> (JobState, &'static str) {
    if ok {
        (JobState::Completed, "exited 0")
    } else {
        (JobState::Failed, "exited with an error")
    }
}
