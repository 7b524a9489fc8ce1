//! The engine: the single owner of the daemon's state. Every change is written to the journal
//! first and applied in memory only once it is committed, so memory never runs ahead of disk.
//! It is synchronous on purpose: the async daemon (API, timers, backends) drives it from one
//! task, which keeps "one owner" true by construction.

use super::job::JobState;
use super::journal::{Charge, JobId, JobRecord, JournalError, NewJob, Store};
use crate::model::{validate_teams, Fleet, JobRequest, Placement, PriorityClass, Team, TeamError};
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
    /// An action the job's state does not allow, with what would.
    #[error("job {id} is {state}; {why}")]
    WrongState {
        id: JobId,
        state: JobState,
        why: &'static str,
    },
}

/// What a submission would become and where it would land now (`Engine::preview`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Preview {
    pub name: Option<String>,
    pub team: String,
    pub class: String,
    pub gpus: f64,
    /// Free capacity could take it now (quota and queue order still decide).
    pub fits_now: bool,
    /// Nodes it would use, with their pools.
    pub nodes: Vec<String>,
    pub dollars_per_hour: f64,
    /// Why it would not start now.
    pub reason: Option<String>,
}

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
    pub team: usize,
    pub class: usize,
    pub state: JobState,
    pub submitted_at: f64,
    pub spec: JobSpec,
    pub request: JobRequest,
    pub placement: Option<Placement>,
    pub started_at: Option<f64>,
    /// Started on capacity borrowed from its team's cohort (reclaimed first).
    pub borrowed: bool,
    /// Why it waits, from the last cycle.
    pub explanation: Option<Explanation>,
    /// Dollars billed for its finished runs (the current run bills on top).
    pub cost: f64,
}

impl Job {
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
}

impl Submission {
    /// What the idempotency key vouches for: the spec and the overrides, hashed.
    fn digest(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for part in [
            self.text.as_slice(),
            self.team.as_deref().unwrap_or("").as_bytes(),
            self.priority.as_deref().unwrap_or("").as_bytes(),
        ] {
            h.update((part.len() as u64).to_le_bytes());
            h.update(part);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
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
    usage: Vec<f64>,
    config: CycleConfig,
    jobs: BTreeMap<JobId, Job>,
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
    /// Finished jobs still in memory, in the order they finished; past `history_kept` the
    /// oldest are dropped from memory (the journal keeps them: `job_record`).
    finished: VecDeque<JobId>,
    history_kept: usize,
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
}

/// How a suspension's preemption reads in the journal (and is recognised after a restart).
const SUSPENDED: &str = "suspended: ";

/// Finished jobs a daemon keeps in memory by default (listings show them; older ones are
/// read from the journal one at a time).
pub const HISTORY_KEPT: usize = 5_000;

/// Jobs a team may have waiting at once unless its `[[teams]] max_pending` says otherwise.
pub const DEFAULT_MAX_PENDING: usize = 10_000;

impl Engine {
    /// Opens the journal and rebuilds the state from it. Jobs that were running when the
    /// daemon stopped are requeued from their checkpoint (no backend reports them yet), with
    /// an event each.
    pub fn open(
        path: &Path,
        fleet: Fleet,
        teams: Vec<Team>,
        classes: Vec<PriorityClass>,
        now: f64,
    ) -> Result<Engine, EngineError> {
        Engine::open_adopting(path, fleet, teams, classes, now, &BTreeMap::new())
    }

    /// `open`, except that the jobs in `adopted` — still running on a backend that survived
    /// the restart (the local host's process groups) — keep running where they were placed,
    /// since when they started, with their run still billing. One whose placement no longer
    /// fits the fleet is requeued like the rest.
    pub fn open_adopting(
        path: &Path,
        fleet: Fleet,
        teams: Vec<Team>,
        classes: Vec<PriorityClass>,
        now: f64,
        adopted: &BTreeMap<JobId, (Placement, f64)>,
    ) -> Result<Engine, EngineError> {
        validate_teams(&teams, &classes)?;
        let store = Store::open(path)?;
        let records = store.load_live(HISTORY_KEPT)?;
        let mut e = Engine {
            usage: vec![0.0; teams.len()],
            store,
            cluster: Cluster::new(fleet),
            placer: Placer::new(Policy::Gantry),
            teams,
            classes,
            config: CycleConfig::default(),
            jobs: BTreeMap::new(),
            budget: HashMap::new(),
            releases: 0,
            held: BTreeMap::new(),
            pins: BTreeMap::new(),
            allowed: HashMap::new(),
            max_pending: HashMap::new(),
            finished: VecDeque::new(),
            history_kept: HISTORY_KEPT,
            stale_history: 0,
            replayed: Vec::new(),
            suspending: Default::default(),
            waiting: Vec::new(),
            failed_at_open: Vec::new(),
        };
        e.waiting = vec![0; e.teams.len()];
        let mut moves = Vec::new();
        for r in records {
            // The fleet file may have changed since the job was submitted (a pool, team or
            // class removed or renamed). A finished job keeps its history in the journal; a
            // live one fails with the reason; the daemon starts either way.
            let (spec, request, team, class) = match e.resolve(&r) {
                Ok(resolved) => resolved,
                Err(_) if r.state.is_final() => {
                    e.stale_history += 1;
                    continue;
                }
                Err(why) => {
                    let why = format!("failed at startup: {why} (the fleet file changed since it was submitted); fix the spec or the fleet file and submit it again");
                    e.failed_at_open.push((r.id, why.clone()));
                    moves.push((r.id, JobState::Failed, why));
                    continue;
                }
            };
            let mut state = r.state;
            let mut kept = None;
            let suspended = state == JobState::Preempting
                && e.store
                    .last_move_to(r.id, JobState::Preempting)?
                    .is_some_and(|d| d.contains(SUSPENDED));
            if suspended {
                e.suspending.insert(r.id);
            }
            if matches!(state, JobState::Running | JobState::Preempting) {
                if let Some((p, started)) = adopted.get(&r.id) {
                    if e.cluster.allocate(p).is_ok() {
                        kept = Some((p.clone(), *started));
                    }
                }
            }
            if kept.is_none() && suspended {
                e.suspending.remove(&r.id);
                moves.push((r.id, JobState::Held, "daemon restarted while it was being suspended: held until its owner releases it".to_string()));
                state = JobState::Held;
            } else if kept.is_none() && matches!(state, JobState::Running | JobState::Preempting) {
                moves.push((r.id, JobState::Pending, "daemon restarted and no backend reports it running: requeued from its checkpoint".to_string()));
                state = JobState::Pending;
            }
            if state.is_final() {
                e.finished.push_back(r.id);
            }
            e.count_waiting(team, None, Some(state));
            e.jobs.insert(
                r.id,
                Job {
                    id: r.id,
                    name: r.name,
                    team,
                    class,
                    state,
                    submitted_at: r.submitted_at,
                    spec,
                    request,
                    started_at: kept.as_ref().map(|k| k.1),
                    placement: kept.map(|k| k.0),
                    borrowed: false,
                    explanation: None,
                    cost: r.cost,
                },
            );
        }
        e.store.transition_all(&moves, now)?;
        // The moves closed their open runs in the journal: read the bills back.
        for (id, _, _) in &moves {
            if let (Some(j), Some(r)) = (e.jobs.get_mut(id), e.store.job(*id)?) {
                j.cost = r.cost;
            }
        }
        Ok(e)
    }

    /// A journaled job's spec, request, team and class under today's fleet file, or why not.
    fn resolve(&self, r: &JobRecord) -> Result<(JobSpec, JobRequest, usize, usize), String> {
        let spec = spec::parse(&format!("job {}", r.id), r.spec.as_bytes())
            .map_err(|e| format!("its spec no longer parses: {e}"))?;
        let request = spec
            .to_request(self.cluster.fleet())
            .map_err(|e| e.to_string())?;
        let team = self.team_index(&r.team).map_err(|e| e.to_string())?;
        let class = self.class_index(&r.priority).map_err(|e| e.to_string())?;
        Ok((spec, request, team, class))
    }

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

    fn forget_old(&mut self) {
        while self.finished.len() > self.history_kept {
            if let Some(id) = self.finished.pop_front() {
                self.jobs.remove(&id);
            }
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

    /// Whether `team` may have jobs of `class`; the error names the classes it may use.
    fn check_class(&self, team: usize, class: usize) -> Result<(), EngineError> {
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

    fn class_index(&self, name: &str) -> Result<usize, EngineError> {
        find_named(&self.classes, name, |c| &c.name).map_err(|known| EngineError::UnknownClass {
            class: name.to_string(),
            known,
        })
    }

    /// Parses, resolves and admits a spec; `team` and `priority` override the file's. A job no
    /// node of the fleet could ever host is rejected here, with the reason, instead of waiting
    /// forever. Returns once the job is committed.
    pub fn submit(
        &mut self,
        file: &str,
        text: &[u8],
        team: Option<&str>,
        priority: Option<&str>,
        now: f64,
    ) -> Result<JobId, EngineError> {
        let one = Submission {
            file: file.to_string(),
            text: text.to_vec(),
            team: team.map(str::to_string),
            priority: priority.map(str::to_string),
            only_team: None,
            parsed: None,
            idempotency_key: None,
        };
        self.submit_batch(&[one], now)
            .pop()
            .unwrap_or(Err(EngineError::NoJob(0)))
    }

    /// Admits several submissions with one journal commit (group commit): each is checked on
    /// its own, the valid ones are written together, and each gets its own answer.
    pub fn submit_batch(
        &mut self,
        batch: &[Submission],
        now: f64,
    ) -> Vec<Result<JobId, EngineError>> {
        let mut answers: Vec<Result<JobId, EngineError>> = Vec::with_capacity(batch.len());
        let mut admitted = Vec::new();
        // Jobs waiting per team, this batch's admissions included (the counts are kept as
        // states change: recounting every job per batch cost the actor more than admission).
        let mut waiting: HashMap<usize, usize> = self
            .waiting
            .iter()
            .enumerate()
            .map(|(t, &n)| (t, n))
            .collect();
        self.replayed.clear();
        // Idempotency key → the slot of this batch's first submission with it.
        let mut keyed: HashMap<&str, usize> = HashMap::new();
        let mut repeats = Vec::new();
        for s in batch {
            if let Some(key) = s.idempotency_key.as_deref() {
                let slot = answers.len();
                if let Some(&first) = keyed.get(key) {
                    answers.push(Ok(0));
                    repeats.push((slot, first, s.digest() == batch[first].digest()));
                    continue;
                }
                keyed.insert(key, slot);
                match self.store.idempotent(key) {
                    Ok(Some((id, digest))) if digest == s.digest() => {
                        self.replayed.push(id);
                        answers.push(Ok(id));
                        continue;
                    }
                    Ok(Some((id, _))) => {
                        answers.push(Err(key_reused(id)));
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        answers.push(Err(e.into()));
                        continue;
                    }
                }
            }
            match self.admit(s) {
                Ok(job) if self.queue_full(job.team, &waiting).is_some() => {
                    let cap = self.queue_full(job.team, &waiting).unwrap_or_default();
                    answers.push(Err(EngineError::QueueFull(format!(
                        "team `{}` already has {cap} jobs waiting, its limit (the fleet file's [[teams]] max_pending); wait for some to start or cancel some, then submit again",
                        self.teams[job.team].name
                    ))));
                }
                Ok(job) => {
                    *waiting.entry(job.team).or_default() += 1;
                    answers.push(Ok(0));
                    admitted.push((
                        answers.len() - 1,
                        job,
                        String::from_utf8_lossy(&s.text),
                        s.idempotency_key.as_ref().map(|k| (k.clone(), s.digest())),
                    ));
                }
                Err(e) => answers.push(Err(e)),
            }
        }
        if admitted.is_empty() {
            return settle_repeats(answers, &repeats);
        }
        let rows: Vec<NewJob> = admitted
            .iter()
            .map(|(_, j, text, key)| NewJob {
                name: j.name.clone(),
                team: self.teams[j.team].name.clone(),
                priority: self.classes[j.class].name.clone(),
                spec: text.to_string(),
                at: now,
                idempotency: key.clone(),
            })
            .collect();
        match self.store.submit_all(&rows) {
            Ok(ids) => {
                for ((slot, mut job, _, _), id) in admitted.into_iter().zip(ids) {
                    job.id = id;
                    job.submitted_at = now;
                    answers[slot] = Ok(id);
                    self.count_waiting(job.team, None, Some(job.state));
                    self.jobs.insert(id, job);
                }
            }
            Err(e) => {
                let why = e.to_string();
                for (slot, _, _, _) in admitted {
                    answers[slot] = Err(EngineError::Journal(JournalError::Corrupt {
                        id: 0,
                        what: why.clone(),
                    }));
                }
            }
        }
        settle_repeats(answers, &repeats)
    }

    /// The jobs the last `submit_batch` answered from an idempotency key: retries of
    /// submissions already journaled, not new jobs.
    pub fn replayed(&self) -> &[JobId] {
        &self.replayed
    }

    /// `Some(limit)` when `team` has as many jobs waiting as it may.
    fn queue_full(&self, team: usize, waiting: &HashMap<usize, usize>) -> Option<usize> {
        let cap = self
            .max_pending
            .get(&team)
            .copied()
            .unwrap_or(DEFAULT_MAX_PENDING);
        (waiting.get(&team).copied().unwrap_or(0) >= cap).then_some(cap)
    }

    /// Where a submission would land right now, without admitting it: the checks of a
    /// submission, then the placer on the current fleet. Quota and queue order decide at the
    /// next cycle; this answers "is it valid, could it start now, where and at what price".
    pub fn preview(&mut self, s: &Submission) -> Result<Preview, EngineError> {
        let job = self.admit(s)?;
        let fleet = self.cluster.fleet();
        let (nodes, dollars_per_hour, reason) =
            match self.placer.place(&self.cluster, &job.request, 0) {
                Ok(p) => (
                    p.nodes
                        .iter()
                        .map(|g| {
                            let n = fleet.node(g.node);
                            format!("{} ({})", n.name, fleet.pool_path(n.pool))
                        })
                        .collect(),
                    p.price_per_hour,
                    None,
                ),
                Err(why) => (Vec::new(), 0.0, Some(why.to_string())),
            };
        Ok(Preview {
            name: job.name,
            team: self.teams[job.team].name.clone(),
            class: self.classes[job.class].name.clone(),
            gpus: job.request.total_gpu_milli() as f64 / 1000.0,
            fits_now: reason.is_none(),
            nodes,
            dollars_per_hour,
            reason,
        })
    }

    /// Checks one submission and builds the job it would become (not yet journaled).
    fn admit(&mut self, s: &Submission) -> Result<Job, EngineError> {
        let spec = match &s.parsed {
            Some(parsed) => parsed.clone(),
            None => spec::parse(&s.file, &s.text)?,
        };
        let request = spec.to_request(self.cluster.fleet())?;
        // A job that names no team is the default team's, or a researcher's own team's.
        let team_name = s
            .team
            .as_deref()
            .or(spec.team.as_deref())
            .or(s.only_team.as_deref())
            .unwrap_or("default");
        let class_name = s
            .priority
            .as_deref()
            .or(spec.priority.as_deref())
            .unwrap_or("experiment");
        if let Some(only) = s.only_team.as_deref().filter(|&t| t != team_name) {
            return Err(EngineError::Forbidden(format!(
                "this token may submit for team `{only}` only, and the job is for `{team_name}`"
            )));
        }
        let team = self.team_index(team_name)?;
        let mut class = self.class_index(class_name)?;
        self.check_class(team, class)?;
        match self.budget.get(&team) {
            Some(BudgetGate::Block(why)) => return Err(EngineError::OverBudget(why.clone())),
            Some(BudgetGate::Demote) => class = self.lowest_class(),
            None => {}
        }
        // The placer tells "not now" from "never": a refusal is NeverFits when no node of the
        // fleet could host the job even if it were empty.
        if let Err(why @ (Unplaceable::NeverFits { .. } | Unplaceable::Invalid { .. })) =
            self.placer.place(&self.cluster, &request, 0)
        {
            return Err(EngineError::NeverFits(why.to_string()));
        }
        Ok(Job {
            id: 0,
            name: spec.name.clone(),
            team,
            class,
            state: JobState::Pending,
            submitted_at: 0.0,
            spec,
            request,
            placement: None,
            started_at: None,
            borrowed: false,
            explanation: None,
            cost: 0.0,
        })
    }

    /// A job in memory to change; one only in the journal has finished and cannot change.
    fn job_mut(&mut self, id: JobId) -> Result<&mut Job, EngineError> {
        if !self.jobs.contains_key(&id) {
            return Err(match self.store.job(id)? {
                Some(r) => EngineError::WrongState {
                    id,
                    state: r.state,
                    why: "a finished job cannot change",
                },
                None => EngineError::NoJob(id),
            });
        }
        self.jobs.get_mut(&id).ok_or(EngineError::NoJob(id))
    }

    /// Journals then applies a state change; releases GPUs when a job stops running.
    fn move_to(&mut self, id: JobId, to: JobState, now: f64, why: &str) -> Result<(), EngineError> {
        self.job_mut(id)?;
        self.store.transition(id, to, now, why)?;
        let job = self.jobs.get_mut(&id).ok_or(EngineError::NoJob(id))?;
        let (team, from) = (job.team, job.state);
        job.state = to;
        if to != JobState::Running && to != JobState::Preempting {
            job.cost = job.cost_at(now);
            if let Some(p) = job.placement.take() {
                self.releases += 1;
                self.cluster
                    .release(&p)
                    .map_err(|e| EngineError::Unreadable {
                        id,
                        why: e.to_string(),
                    })?;
            }
            job.started_at = None;
        }
        self.count_waiting(team, Some(from), Some(to));
        if to != JobState::Preempting {
            self.suspending.remove(&id);
        }
        if to.is_final() {
            self.finished.push_back(id);
            self.forget_old();
        }
        Ok(())
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
    pub fn store(&mut self) -> &mut Store {
        &mut self.store
    }
    pub fn teams(&self) -> &[Team] {
        &self.teams
    }
    pub fn classes(&self) -> &[PriorityClass] {
        &self.classes
    }
    /// A backend reports that a job exited.
    pub fn finished(&mut self, id: JobId, ok: bool, now: f64) -> Result<(), EngineError> {
        let to = if ok {
            JobState::Completed
        } else {
            JobState::Failed
        };
        self.move_to(
            id,
            to,
            now,
            if ok {
                "exited 0"
            } else {
                "exited with an error"
            },
        )
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
                Some(JobState::Running | JobState::Preempting) => moves.push((
                    id,
                    if ok {
                        JobState::Completed
                    } else {
                        JobState::Failed
                    },
                    if ok {
                        "exited 0"
                    } else {
                        "exited with an error"
                    }
                    .to_string(),
                )),
                _ => skipped.push(id),
            }
        }
        self.store.transition_all(&moves, now)?;
        for (id, to, _) in moves {
            let Some(job) = self.jobs.get_mut(&id) else {
                continue;
            };
            job.state = to;
            job.cost = job.cost_at(now);
            job.started_at = None;
            if let Some(p) = job.placement.take() {
                self.releases += 1;
                let _ = self.cluster.release(&p);
            }
            self.finished.push_back(id);
        }
        self.forget_old();
        Ok(skipped)
    }

    pub fn set_priority(&mut self, id: JobId, class: &str, now: f64) -> Result<(), EngineError> {
        let c = self.class_index(class)?;
        let team = self.job_mut(id)?.team;
        self.check_class(team, c)?;
        self.store.set_priority(id, class, now)?;
        self.job_mut(id)?.class = c;
        Ok(())
    }

    /// Runs one scheduling cycle and applies its decisions (journaled first).
    pub fn tick(&mut self, now: f64) -> Result<TickReport, EngineError> {
        let pending: Vec<PendingJob> = self
            .jobs
            .values()
            .filter(|j| matches!(j.state, JobState::Pending | JobState::Held))
            .map(|j| PendingJob {
                id: j.id as u64,
                team: j.team,
                class: j.class,
                submitted: j.submitted_at,
                request: j.request.clone(),
                held: j.state == JobState::Held,
                time_limit_s: j.spec.time_limit_s,
            })
            .collect();
        let running: Vec<RunningJob> = self
            .jobs
            .values()
            .filter(|j| j.state == JobState::Running)
            .filter_map(|j| {
                Some(RunningJob {
                    id: j.id as u64,
                    team: j.team,
                    class: j.class,
                    started: j.started_at?,
                    placement: j.placement.clone()?,
                    preemptible: j.spec.preemptible,
                    last_checkpoint: None,
                    time_limit_s: j.spec.time_limit_s,
                    borrowed: j.borrowed,
                    signal: j
                        .spec
                        .checkpoint
                        .as_ref()
                        .map_or("SIGTERM".to_string(), |c| c.signal.0.clone()),
                    grace_s: j.spec.checkpoint.as_ref().map_or(30.0, |c| c.grace_s),
                })
            })
            .collect();
        // Pinned nodes are out of everyone else's reach.
        let view;
        let cluster = if self.pins.is_empty() {
            &self.cluster
        } else {
            let mut c = self.cluster.clone();
            for &n in self.pins.keys() {
                c.set_health(crate::model::NodeId(n), crate::model::Health::Cordoned);
            }
            view = c;
            &view
        };
        let input = CycleInput {
            now,
            cluster,
            teams: &self.teams,
            classes: &self.classes,
            usage: &self.usage,
            pending: &pending,
            running: &running,
            config: &self.config,
        };
        let mut out = run_cycle(&mut self.placer, &input)?;
        self.start_pinned(&mut out);
        // One bad decision never fails the cycle: a decision about a job whose state does not
        // allow it, or a placement the fleet refuses, is dropped with the reason and the rest
        // stand. Starts take their GPUs first (in memory; undone if the journal refuses).
        let mut skipped = Vec::new();
        let mut allocated = Vec::new();
        {
            let (jobs, cluster) = (&self.jobs, &mut self.cluster);
            out.decisions.retain(|d| {
                let (id, want) = match d {
                    Decision::Start { job, .. } => (*job as JobId, JobState::Pending),
                    Decision::Preempt { victim, .. } => (*victim as JobId, JobState::Running),
                    Decision::Reserve { .. } => return true,
                };
                let state = jobs.get(&id).map(|j| j.state);
                if state != Some(want) {
                    skipped.push((
                        id,
                        format!(
                            "the cycle's decision for it was dropped: it is {}, not {want}",
                            state.map_or("gone", JobState::name)
                        ),
                    ));
                    return false;
                }
                if let Decision::Start { placement, .. } = d {
                    if let Err(e) = cluster.allocate(placement) {
                        skipped.push((id, format!("its placement was refused: {e}")));
                        return false;
                    }
                    allocated.push(placement.clone());
                }
                true
            });
        }
        // The cycle's decisions are one journal entry: one commit, then memory.
        let moves: Vec<(JobId, JobState, String)> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job, .. } => {
                    Some((*job as JobId, JobState::Running, "placed".to_string()))
                }
                Decision::Preempt {
                    victim, for_job, ..
                } => Some((
                    *victim as JobId,
                    JobState::Preempting,
                    format!("preempted for job {for_job}"),
                )),
                Decision::Reserve { .. } => None,
            })
            .collect();
        let fleet = self.cluster.fleet();
        let opens: Vec<Charge> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job, placement, .. } => {
                    let j = self.jobs.get(&(*job as JobId))?;
                    let capacity = placement
                        .nodes
                        .first()
                        .map_or("on-demand".to_string(), |g| {
                            fleet.pool(fleet.node(g.node).pool).capacity.to_string()
                        });
                    Some(Charge {
                        job: j.id,
                        team: self.teams[j.team].name.clone(),
                        project: j.spec.project.clone(),
                        capacity,
                        gpus: j.request.total_gpu_milli() as f64 / 1000.0,
                        dollars_per_hour: placement.price_per_hour,
                    })
                }
                _ => None,
            })
            .collect();
        if let Err(e) = self.store.transition_charged(&moves, now, &opens) {
            for p in &allocated {
                let _ = self.cluster.release(p);
            }
            return Err(e.into());
        }
        let mut report = TickReport {
            skipped,
            ..TickReport::default()
        };
        for d in out.decisions {
            match d {
                Decision::Start {
                    job,
                    placement,
                    borrowed,
                } => {
                    let id = job as JobId;
                    let j = self.job_mut(id)?;
                    let (team, from) = (j.team, j.state);
                    j.state = JobState::Running;
                    j.placement = Some(placement);
                    j.started_at = Some(now);
                    j.borrowed = borrowed;
                    j.explanation = None;
                    self.count_waiting(team, Some(from), Some(JobState::Running));
                    report.started.push(id);
                }
                Decision::Preempt { victim, .. } => {
                    let id = victim as JobId;
                    self.job_mut(id)?.state = JobState::Preempting;
                    report.preempting.push(id);
                }
                Decision::Reserve { job, .. } => report.reserved.push(job as JobId),
            }
        }
        for e in out.explanations {
            if let Some(j) = self.jobs.get_mut(&(e.job as JobId)) {
                j.explanation = Some(e);
            }
        }
        Ok(report)
    }

    pub fn jobs(&self) -> impl Iterator<Item = &Job> {
        self.jobs.values()
    }

    pub fn job(&self, id: JobId) -> Option<&Job> {
        self.jobs.get(&id)
    }

    pub fn fleet(&self) -> &Fleet {
        self.cluster.fleet()
    }

    /// A backend reports a node's health (provisioned, cordoned by a notice, gone, failed).
    pub fn set_health(&mut self, node: crate::model::NodeId, health: crate::model::Health) {
        self.cluster.set_health(node, health);
    }

    /// A backend reports a GPU busy with processes gantry did not start: it is taken out of
    /// what the scheduler can hand out until `release_gpu`. False (nothing changed) if gantry
    /// has work on it, it is already held, or it does not exist.
    pub fn hold_gpu(&mut self, node: crate::model::NodeId, gpu: u8) -> bool {
        if self.held.contains_key(&(node.0, gpu)) {
            return false;
        }
        let Some(g) = self
            .fleet()
            .nodes
            .get(node.index())
            .and_then(|n| n.gpus.get(usize::from(gpu)))
        else {
            return false;
        };
        if !g.is_idle() || g.mig.is_some() {
            return false;
        }
        let hold = Placement {
            level: crate::model::DomainLevel::Node,
            nodes: vec![crate::model::NodeGrant {
                node,
                cpu_milli: 0,
                mem_mib: 0,
                gpus: vec![crate::model::GpuGrant {
                    gpu,
                    share: crate::model::GpuShare::Whole,
                    vram_mib: g.vram_free_mib,
                }],
            }],
            price_per_hour: 0.0,
        };
        if self.cluster.allocate(&hold).is_err() {
            return false;
        }
        self.held.insert((node.0, gpu), hold);
        true
    }

    /// A backend reports a GPU's MIG mode: an idle GPU follows it (a busy one keeps its
    /// mode until it is free). True if the mode changed.
    pub fn set_mig_mode(&mut self, node: crate::model::NodeId, gpu: u8, on: bool) -> bool {
        self.cluster.set_mig_mode(node, usize::from(gpu), on)
    }

    /// Gives a held GPU back to the scheduler (its foreign processes are gone).
    pub fn release_gpu(&mut self, node: crate::model::NodeId, gpu: u8) -> bool {
        match self.held.remove(&(node.0, gpu)) {
            Some(hold) => self.cluster.release(&hold).is_ok(),
            None => false,
        }
    }

    /// Whether a GPU is held for work gantry did not start.
    pub fn is_held(&self, node: crate::model::NodeId, gpu: u8) -> bool {
        self.held.contains_key(&(node.0, gpu))
    }

    /// Holds `node` for pending job `job` while the jobs on it move away.
    pub fn pin(&mut self, node: crate::model::NodeId, job: JobId, now: f64) {
        self.pins.insert(node.0, (job, now));
    }

    /// The nodes held for a job, and for which job since when.
    pub fn pins(&self) -> impl Iterator<Item = (crate::model::NodeId, JobId, f64)> + '_ {
        self.pins
            .iter()
            .map(|(&n, &(j, since))| (crate::model::NodeId(n), j, since))
    }

    /// Lets go of the pins older than `before` (their job never fitted) — and of any whose job
    /// is no longer pending.
    pub fn drop_pins(&mut self, before: f64) {
        let jobs = &self.jobs;
        self.pins.retain(|_, (j, since)| {
            *since >= before && jobs.get(j).is_some_and(|j| j.state == JobState::Pending)
        });
    }

    /// Starts each pinned job that this cycle admitted but found no room for, on its node
    /// alone, once it fits there.
    fn start_pinned(&mut self, out: &mut CycleOutput) {
        let pins: Vec<(u32, JobId)> = self.pins.iter().map(|(&n, &(j, _))| (n, j)).collect();
        for (node, id) in pins {
            // Admitted by this cycle's quotas, with no room: its explanation says so, and
            // whether starting it goes past its team's guarantee (then it runs borrowed).
            let admitted = out
                .explanations
                .iter()
                .find(|e| e.job == id as u64 && e.reason.waits_for_capacity());
            let (Some(e), Some(j)) = (admitted, self.jobs.get(&id)) else {
                continue;
            };
            let borrowed = e
                .team_guaranteed
                .is_some_and(|g| e.team_used + j.request.total_gpu_milli() > g);
            let mut only = self.cluster.clone();
            for n in 0..only.fleet().nodes.len() as u32 {
                if n != node {
                    only.set_health(crate::model::NodeId(n), crate::model::Health::Cordoned);
                }
            }
            if let Ok(placement) = self.placer.place(&only, &j.request, id as u64) {
                out.explanations.retain(|e| e.job != id as u64);
                out.decisions.push(Decision::Start {
                    job: id as u64,
                    placement,
                    borrowed,
                });
                self.pins.remove(&node);
            }
        }
    }

    /// Whether the jobs on `node` would all fit on other capacity that is up, were the node
    /// given back (a dry run: nothing changes).
    pub fn fit_elsewhere(&mut self, node: crate::model::NodeId, jobs: &[JobId]) -> bool {
        self.room_after_moves(node, jobs, None)
    }

    /// Whether the jobs on `node` would all fit on other capacity that is up and, with
    /// `then`, that pending job on `node` once they have gone (a dry run).
    pub fn room_after_moves(
        &mut self,
        node: crate::model::NodeId,
        jobs: &[JobId],
        then: Option<JobId>,
    ) -> bool {
        let movers: Vec<Mover> = jobs
            .iter()
            .filter_map(|id| {
                let j = self.jobs.get(id)?;
                Some(Mover {
                    id: *id as u64,
                    placement: j.placement.as_ref()?,
                    request: &j.request,
                })
            })
            .collect();
        if movers.len() != jobs.len() {
            return false;
        }
        let then = match then {
            Some(id) => match self.jobs.get(&id) {
                Some(j) => Some((id as u64, &j.request)),
                None => return false,
            },
            None => None,
        };
        // With `then`, it must land on the emptied node itself.
        let Some((_, target)) = moves_off(&mut self.placer, &mut self.cluster, node, &movers, then)
        else {
            return false;
        };
        target.is_none_or(|p| p.nodes.iter().all(|g| g.node == node))
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

    pub fn unplaceable_reason(&self, id: JobId) -> Option<&Unplaceable> {
        match &self.jobs.get(&id)?.explanation.as_ref()?.reason {
            crate::scheduler::cycle::PendingReason::NoCapacity { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// The answer to a submission whose idempotency key was already used for another one.
fn key_reused(id: JobId) -> EngineError {
    EngineError::KeyReused(format!(
        "this Idempotency-Key was used within the last day for a different submission (job {id}); send a new key for a new job"
    ))
}

/// A submission that repeated an earlier one's key in the same batch gets that one's
/// answer: (slot, first slot, same submission).
fn settle_repeats(
    mut answers: Vec<Result<JobId, EngineError>>,
    repeats: &[(usize, usize, bool)],
) -> Vec<Result<JobId, EngineError>> {
    for &(slot, first, same) in repeats {
        answers[slot] = match (&answers[first], same) {
            (Ok(id), true) => Ok(*id),
            (Ok(id), false) => Err(key_reused(*id)),
            (Err(e), _) => Err(EngineError::KeyReused(format!(
                "the first submission with this Idempotency-Key failed: {e}"
            ))),
        };
    }
    answers
}

/// The index of the item called `name`, or the list of names there are (for the error).
fn find_named<T>(items: &[T], name: &str, name_of: impl Fn(&T) -> &str) -> Result<usize, String> {
    items
        .iter()
        .position(|t| name_of(t) == name)
        .ok_or_else(|| items.iter().map(&name_of).collect::<Vec<_>>().join(", "))
}
