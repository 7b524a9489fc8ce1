//! The daemon's state: the engine, the backends' runners that run what it places (one per
//! pool, driven through `backend::Runner` whatever the backend), the simulated fleet's node
//! lifecycle, the event log, telemetry, counters for `/metrics`, and the snapshot the console
//! and the API read. It does no networking and keeps no wall clock: its owner (the actor)
//! tells it what time it is. Everything the simulated backend makes up is labelled simulated.

mod open;

mod budget;
mod ends;
mod enter;
pub use enter::{Entering, STARTING};
mod export;
mod foreign;
pub mod history;
mod hosts;
mod kept_timers;
mod launch;
pub mod ledger;
mod left_pools;
mod legacy;
mod links;
mod marks;
pub use marks::span;
mod nodes;
mod observe;
mod reclaim;
mod recovery;
mod services;
pub use services::{Measured, ServiceUp, ServiceUpAnswer};
mod telemetry;
mod view;
mod waits;
mod wanted;

use crate::api::{HistoryJob, QueueRow};
pub use export::{GpuMetric, JobGpuMetric};
pub use view::{reason_text, JobLogs};

use super::engine::{Engine, EngineError, Submission};
use super::journal::{EventRecord, JobId};
use crate::api::{Snapshot, EVENTS_KEPT};
use crate::config::fleet::{FleetConfig, TeamConfig};
use crate::model::Life;
use crate::scheduler::reclaim::{ReclaimConfig, ReclaimPlan};
use crate::scheduler::rng::Rng;
use crate::scheduler::scale::ScaleConfig;
use crate::spec::demo::Workload;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

/// One GPU's utilization samples: (seconds, percent), oldest first.
type Samples = Vec<(f64, f64)>;

/// How the state is opened.
#[derive(Clone, Debug)]
pub struct StateOptions {
    pub seed: u64,
    /// Feed the seeded demo workload (arrivals every few simulated minutes).
    pub demo_workload: bool,
    /// Simulated node failures per node-hour (Llama 3's 54-day run: about 0.0002).
    pub failures_per_node_hour: f64,
    /// Where this host's jobs' logs go (default: `logs/` beside the journal).
    pub log_dir: Option<std::path::PathBuf>,
    /// How this host's GPUs are sampled (`provider = "local"` pools).
    pub sampling: crate::backend::agent::Sampling,
    /// Where the daemon's own warnings go besides the event log.
    pub messages: Messages,
    /// What NVML found on the hosts of `gpu = "auto"` SSH pools, by pool name (those pools are
    /// CPU-only until a host says; the state is then reopened with this filled in).
    pub discovered: BTreeMap<String, crate::config::fleet::FoundGpus>,
    /// What each `gpu = "auto"` Kubernetes pool was built into when the state last opened
    /// (kept if its cluster cannot be read at the next).
    pub cluster_built: crate::backend::discover::Built,
    /// `cluster_built` was listed just now (by a reload): taken without listing again.
    pub cluster_built_fresh: bool,
    /// The wall clock at opening, Unix seconds: `None` reads the system's (tests pin it).
    pub wall_clock: Option<f64>,
    /// What runners call when a run ends (the actor steps at once); kept across reopens.
    pub wake: crate::backend::Wake,
    /// A what-if run's model of its jobs' work, for the simulated fleet (`gantry sim`).
    pub work: Option<crate::backend::sim::WorkBook>,
    /// No client reads this state (a what-if run): a cycle decides and acts as ever, but
    /// builds no snapshot and samples no GPU history — what only views read.
    pub headless: bool,
    /// The daemon's own listening ports (API, metrics): never a service's endpoint.
    pub reserved_ports: Vec<u16>,
    /// Provisioners of pools that left the fleet file, ending what they bought: kept (across
    /// reopens) so that what they say still reaches the event log.
    pub retiring: Retiring,
}

/// Provisioners retiring, shared by every state a daemon opens (`left_pools`).
#[derive(Clone, Default)]
pub struct Retiring(std::sync::Arc<std::sync::Mutex<left_pools::Retirees>>);

impl Retiring {
    pub(crate) fn lock(
        &self,
    ) -> std::sync::LockResult<std::sync::MutexGuard<'_, left_pools::Retirees>> {
        self.0.lock()
    }
}

impl std::fmt::Debug for Retiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |v| v.claimed.len());
        write!(f, "Retiring({n})")
    }
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            seed: 1,
            demo_workload: false,
            failures_per_node_hour: 0.0002,
            log_dir: None,
            sampling: crate::backend::agent::Sampling::Nvml(std::time::Duration::from_secs(1)),
            messages: Messages::Stderr,
            discovered: BTreeMap::new(),
            cluster_built: Default::default(),
            cluster_built_fresh: false,
            wall_clock: None,
            wake: crate::backend::Wake::default(),
            work: None,
            headless: false,
            reserved_ports: Vec::new(),
            retiring: Retiring::default(),
        }
    }
}

/// Where the daemon's warnings are written, besides the event log (which always has them).
/// `gantry daemon` writes to stderr, its log; the console's embedded daemon to a file, since
/// the terminal is the console's screen and a stray line would wreck its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Messages {
    Stderr,
    File(std::path::PathBuf),
}

impl Messages {
    pub(super) fn write(&self, line: &str) {
        match self {
            Messages::Stderr => eprintln!("gantry daemon: {line}"),
            Messages::File(path) => {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "gantry daemon: {line}");
                }
            }
        }
    }
}

/// The fleet's nodes over time: which exist, what is coming, what is going; and, per pool,
/// the provisioner elastic capacity is bought from and given back to (none where the nodes
/// are simply there).
struct Nodes {
    pools: Vec<crate::config::fleet::PoolConfig>,
    lives: Vec<Life>,
    empty_since: Vec<Option<f64>>,
    /// Bought nodes' empty-since as the last daemon kept it (on this clock), taken as each is
    /// up again (`kept_timers`).
    restored_empty: HashMap<String, f64>,
    provisioners: Vec<Option<Box<dyn crate::backend::Provisioner>>>,
    interrupted: Vec<Option<f64>>,
    /// Per pool: passed over by the planner until then (it could not buy a node).
    unavailable: Vec<Option<f64>>,
    /// Per pool: why it was last passed over (shown while it is).
    passed_over: Vec<String>,
    /// Nodes bought and coming: when each is expected ready.
    coming_at: HashMap<usize, f64>,
    /// Nodes under a notice of their end: when each goes.
    going_at: HashMap<usize, f64>,
    /// Bought machines ready but not yet reached (their agent has not answered since).
    unconnected: std::collections::HashSet<usize>,
    /// Per pool: machines in a row given back because they never answered (reset when one
    /// does): each passes the pool over twice as long, so a pool whose machines cannot be
    /// reached is not bought from again at once, and again.
    unreached: Vec<u32>,
    /// The fleet's spending cap ($/h), and per pool the cap last said to cut a buy short.
    fleet_cap: Option<f64>,
    /// `[scale] rebalance`: consolidation and defragmentation move jobs.
    rebalance: bool,
    capped: HashMap<usize, String>,
    scale: ScaleConfig,
    /// When consolidation looks for a cloud node to give back next.
    next_consolidate: f64,
}

pub use crate::api::Action;

/// Counters and histograms behind `/metrics`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    pub preemptions: u64,
    pub spot_interruptions: u64,
    pub node_failures: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Cloud nodes given back after their jobs moved to capacity already paid for.
    pub consolidated_nodes: u64,
    /// Paid nodes emptied for a job that fit nowhere (instead of buying one for it).
    pub defragmented: u64,
    /// Jobs told to checkpoint and move by consolidation or defragmentation.
    pub moved_jobs: u64,
    pub reclaimed_jobs: u64,
    pub reclaimed_gpu_hours: f64,
    pub cycles: u64,
    /// Wait before first start, seconds, per class and team name: (bucket counts, sum,
    /// count).
    pub waits: BTreeMap<String, BTreeMap<String, Histogram>>,
    /// Preemptions per class and team.
    pub preempted: BTreeMap<String, BTreeMap<String, u64>>,
}

/// A Prometheus-style cumulative histogram.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Histogram {
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

/// Bucket bounds of the wait-time histogram, seconds.
pub const WAIT_BUCKETS: [f64; 9] = [
    1.0, 10.0, 60.0, 300.0, 900.0, 3_600.0, 14_400.0, 43_200.0, 86_400.0,
];

impl Histogram {
    pub fn observe(&mut self, bounds: &[f64], x: f64) {
        if self.counts.len() != bounds.len() {
            self.counts = vec![0; bounds.len()];
        }
        for (c, b) in self.counts.iter_mut().zip(bounds) {
            if x <= *b {
                *c += 1;
            }
        }
        self.sum += x;
        self.count += 1;
    }
}

/// How often consolidation looks for a cloud node to give back (at most one at a time).
const CONSOLIDATE_EVERY_S: f64 = 300.0;

/// One team's spend in the current budget month.
#[derive(Clone, Debug, Default)]
struct TeamBudget {
    month: i64,
    /// Finished runs this month (re-read from the journal when runs end).
    closed_usd: f64,
    closed_gpu_h: f64,
    /// With the running jobs' share up to now.
    usd: f64,
    gpu_h: f64,
    /// Alert thresholds already announced this month.
    alerted: usize,
    /// The action at 100% is in force.
    enforced: bool,
    /// The whole spend of runs that ended before this month began (read when a month
    /// begins) and of those that ended in it: with the running jobs' since they started, the
    /// team's spend ever (`/metrics`' counter).
    before_month_usd: f64,
    closed_whole_usd: f64,
    total_usd: f64,
}

/// A team's project's spend ever: runs that ended before this month, those that ended in it,
/// and with the running ones' since they started.
#[derive(Clone, Debug, Default)]
struct ProjectSpend {
    before_month_usd: f64,
    closed_whole_usd: f64,
    total_usd: f64,
}

pub struct State {
    /// This daemon's exclusive hold on the journal (released when the state is dropped).
    _lock: super::lock::StateLock,
    /// What it was opened with (a reload opens it again over a new fleet file).
    opened: Opened,
    messages: Messages,
    engine: Engine,
    nodes: Nodes,
    /// Per real host: its GPUs as NVML last reported them (or why it cannot). A node without
    /// an entry has no measurements, and none are made up for it.
    measured: BTreeMap<usize, super::local_gpus::HostTelemetry>,
    /// Jobs on real backends (this host, SSH hosts) and those hosts.
    hosts: hosts::Hosts,
    budgets: Vec<TeamBudget>,
    /// Spend ever per (team, project; "" for none), kept as the teams' is.
    project_spend: BTreeMap<(String, String), ProjectSpend>,
    /// The clock time last written to the journal (at most a simulated minute behind).
    clock_saved: f64,
    /// What each (node, GPU) did over the last 5 minutes, hour and day, sampled every 10 s.
    gpu_history: HashMap<(u32, u8), history::GpuHistory>,
    history_at: f64,
    /// The engine's release count when the closed spend was last read.
    budget_read_at: Option<u64>,
    rng: Rng,
    now: f64,
    /// The daemon's clock on the calendar, in the fleet's time zone.
    calendar: crate::daemon::calendar::Calendar,
    events: VecDeque<String>,
    events_total: u64,
    /// Shared with every publication and stream that holds it: publishing copies no row.
    snapshot: Arc<Snapshot>,
    teams: Vec<String>,
    /// Priority class names, in the engine's order.
    classes: Vec<String>,
    team_config: Vec<TeamConfig>,
    workload: Option<Workload>,
    pub reclaim: ReclaimConfig,
    pub counters: Counters,
    /// Reclaim plans shown lately, newest last: what `apply_reclaim` may apply.
    reclaim_shown: VecDeque<ReclaimPlan>,
    /// A host of a `gpu = "auto"` pool found GPUs the fleet is not built with: the state is
    /// to be reopened with them (`reopen_rediscovered`), and this says why.
    rediscovered: Option<Rediscovered>,
    /// Services (`gantry serve up`) and their replicas.
    services: services::Services,
}

/// GPUs a host of a `gpu = "auto"` pool found, to reopen the state with: why, the pool's name,
/// what was found.
type Rediscovered = (String, String, crate::config::fleet::FoundGpus);

/// The journal, options and fleet file a state was opened with.
struct Opened {
    db: std::path::PathBuf,
    opts: StateOptions,
    cfg: FleetConfig,
}

/// Reclaim plans remembered for applying (several operators may be reviewing at once).
const RECLAIM_PLANS_KEPT: usize = 16;

impl State {
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Dollars spent ever per team and project ("" for none): finished runs, and running
    /// ones so far.
    pub fn project_spend(&self) -> Vec<(String, String, f64)> {
        self.project_spend
            .iter()
            .map(|((team, project), s)| (team.clone(), project.clone(), s.total_usd))
            .collect()
    }

    pub fn calendar(&self) -> &crate::daemon::calendar::Calendar {
        &self.calendar
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What the runners call when a run ends (set by the actor that drives this state).
    pub fn wake(&self) -> &crate::backend::Wake {
        &self.opened.opts.wake
    }

    fn push_event(&mut self, at: f64, what: String) {
        let line = format!("{} {what}", self.calendar.hh_mm(at));
        self.events.push_front(line);
        self.events.truncate(EVENTS_KEPT);
        self.events_total += 1;
    }

    fn log(&mut self, what: String) {
        self.push_event(self.now, what);
    }

    /// Something went wrong that the operator must hear of, though no request failed (a
    /// scheduling cycle, a backend sample): the event log (journaled when the journal takes
    /// it) and the daemon's message sink.
    pub fn warn(&mut self, what: String) {
        self.messages.write(&what);
        let _ = self.engine.add_event(self.now, None, "daemon", &what);
        self.log(what);
    }

    /// An event that is also journaled (fleet changes: they are not job transitions, which the
    /// journal records by itself).
    fn record(&mut self, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine.add_event(self.now, None, kind, &what)?;
        self.log(what);
        Ok(())
    }

    /// A journaled event about one job (it shows in the job's history).
    fn record_job(&mut self, id: JobId, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine.add_event(self.now, Some(id), kind, &what)?;
        self.log(format!("job {id} {what}"));
        Ok(())
    }

    fn submit_demo(&mut self) -> Result<(), EngineError> {
        let Some(w) = self.workload.as_mut() else {
            return Ok(());
        };
        let (name, team, class, spec) = w.next(&mut self.rng);
        let sub = Submission {
            file: "demo".to_string(),
            text: spec.into_bytes(),
            team: Some(team.to_string()),
            priority: Some(class.to_string()),
            ..Submission::default()
        };
        let id = self.engine.submit_batch(&[sub], self.now).remove(0)?;
        self.log(format!("job {id} {name} submitted by {team} ({class})"));
        Ok(())
    }

    /// Admits submissions with one commit; each gets its own answer.
    pub fn submit(&mut self, batch: &[Submission]) -> Vec<Result<JobId, EngineError>> {
        // What the state refuses before the engine sees it (the engine knows no backend).
        let refused: Vec<Option<EngineError>> = batch.iter().map(|s| self.refusal(s)).collect();
        if refused.iter().any(Option::is_some) {
            let rest: Vec<Submission> = batch
                .iter()
                .zip(&refused)
                .filter(|(_, r)| r.is_none())
                .map(|(s, _)| s.clone())
                .collect();
            let mut admitted = self.submit(&rest).into_iter();
            return refused
                .into_iter()
                .map(|r| match r {
                    Some(why) => Err(why),
                    None => admitted.next().unwrap_or(Err(EngineError::NoJob(0))),
                })
                .collect();
        }
        let out = self.engine.submit_batch(batch, self.now);
        let replayed = self.engine.replayed().to_vec();
        for (r, s) in out.iter().zip(batch) {
            if let Some(id) = r.as_ref().ok().filter(|id| !replayed.contains(id)) {
                let team = s
                    .team
                    .clone()
                    .or_else(|| self.engine.job(*id).map(|j| self.team_name(j.team)))
                    .unwrap_or_default();
                let name = self
                    .engine
                    .job(*id)
                    .and_then(|j| j.name.clone())
                    .unwrap_or_default();
                self.log(format!("job {id} {name} submitted by {team}"));
            }
        }
        out
    }

    /// Why this state refuses `s` before the engine sees it, if it does:
    /// - a root daemon starts nothing on its own host for a caller it cannot name (its
    ///   processes would be root's);
    /// - a job with no `run` that may land on a real pool would have nothing to start there
    ///   (only the simulated backend models a job's work without a command).
    fn refusal(&self, s: &Submission) -> Option<EngineError> {
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        if root
            && s.user.is_none()
            && !s.from_backend
            && self.hosts.runners.iter().any(|r| r.on_daemon_host())
        {
            return Some(EngineError::Forbidden("this caller names no Unix user (a token made without --user), and this daemon runs as root with a pool on its own host, where a job's processes run as its owner: it starts nothing as root for a caller it cannot name. Ask an operator for a token made with `gantry token create --user NAME`".to_string()));
        }
        if s.from_backend || self.hosts.real_nodes().is_empty() {
            return None;
        }
        let parsed;
        let spec = match &s.parsed {
            Some(spec) => spec,
            None => {
                parsed = crate::spec::parse(&s.file, &s.text).ok()?;
                &parsed
            }
        };
        if spec.run.is_some() {
            return None;
        }
        let fleet = self.engine.fleet();
        let mut may = spec.clone();
        may.unset.clear();
        let real = may.to_requests(fleet).ok()?.iter().find_map(|r| {
            r.pools_of_its_model(fleet).find(|&p| {
                fleet
                    .nodes
                    .iter()
                    .enumerate()
                    .any(|(i, n)| n.pool == p && self.hosts.is_real(i))
            })
        })?;
        Some(EngineError::NeverFits(format!(
            "{}: the job has no `run`, and it may land on pool {}, a real one, where it would have nothing to start: add `run: COMMAND` (only a simulated pool models a job's work without one)",
            s.file,
            fleet.pool_path(real)
        )))
    }

    /// Where a submission would land now, without admitting it.
    pub fn preview(&mut self, s: &Submission) -> Result<super::engine::Preview, EngineError> {
        if let Some(why) = self.refusal(s) {
            return Err(why);
        }
        self.engine.preview(s)
    }

    /// The Unix users the fleet file names a team for (`[[users]] team`): researchers of it
    /// on a socket opened to a group.
    pub fn members(&self) -> HashMap<String, String> {
        self.opened
            .cfg
            .users
            .iter()
            .filter_map(|u| Some((u.name.clone(), u.team.clone()?)))
            .collect()
    }

    pub fn tokens(&mut self) -> Result<Vec<super::journal::TokenRecord>, EngineError> {
        Ok(self.engine.tokens()?)
    }

    pub fn add_token(&mut self, t: &super::journal::TokenRecord) -> Result<(), EngineError> {
        self.engine.add_token(t)?;
        self.log(format!("token {} created ({})", t.label, t.role));
        Ok(())
    }

    pub fn revoke_token(
        &mut self,
        t: &super::journal::TokenRecord,
        at: f64,
        by: &str,
    ) -> Result<(), EngineError> {
        self.engine.revoke_token(&t.hash, at)?;
        self.log(format!(
            "token {} ({}, id {}) revoked by {by}",
            t.label,
            t.role,
            t.id()
        ));
        Ok(())
    }

    pub fn events(
        &mut self,
        job: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, EngineError> {
        let events = self.engine.events(job, limit)?;
        Ok(self.dated(events))
    }

    /// One more preemption, of job `id`'s class and team.
    fn count_preemption(&mut self, id: JobId) {
        self.counters.preemptions += 1;
        if let Some(j) = self.engine.job(id) {
            let (class, team) = (self.class_name(j.class), self.team_name(j.team));
            *self
                .counters
                .preempted
                .entry(class)
                .or_default()
                .entry(team)
                .or_default() += 1;
        }
    }

    /// A job's runs, with their calendar times.
    pub(super) fn runs_of(&mut self, id: JobId) -> Vec<crate::daemon::journal::RunRecord> {
        let mut runs = self.engine.runs(id).unwrap_or_default();
        for r in &mut runs {
            r.started = self.calendar.rfc3339(r.started_at);
            r.ended_time = r.ended_at.map(|t| self.calendar.rfc3339(t));
        }
        runs
    }

    /// Jobs from the journal as `gantry history` asks for them, with their runs.
    pub fn history(
        &mut self,
        q: &crate::daemon::journal::HistoryQuery,
    ) -> Result<Vec<HistoryJob>, EngineError> {
        let records = self.engine.history(q)?;
        Ok(records
            .into_iter()
            .map(|r| HistoryJob {
                id: r.id,
                runs: self.runs_of(r.id),
                name: r.name,
                user: r.user,
                team: r.team,
                class: r.priority,
                state: r.state,
                submitted: self.calendar.rfc3339(r.submitted_at),
                ended: self.calendar.rfc3339(r.updated_at),
                cost_usd: r.cost,
            })
            .collect())
    }

    /// Events with their calendar times.
    fn dated(&self, mut events: Vec<EventRecord>) -> Vec<EventRecord> {
        for e in &mut events {
            e.time = self.calendar.rfc3339(e.at);
        }
        events
    }

    pub fn team_names(&self) -> Vec<String> {
        self.teams.clone()
    }

    pub fn has_team(&self, team: &str) -> bool {
        self.teams.iter().any(|t| t == team)
    }

    /// The team a job belongs to (for permission checks).
    pub fn job_team(&self, id: JobId) -> Option<String> {
        self.engine.job(id).map(|j| self.team_name(j.team))
    }

    pub fn act(&mut self, id: JobId, action: Action, who: &str) -> Result<(), EngineError> {
        let now = self.now;
        match action {
            Action::Cancel => {
                self.engine.cancel(id, now)?;
                self.kill_on_hosts(id)?;
            }
            Action::Hold => self.engine.hold(id, now)?,
            Action::Release => self.engine.release(id, now)?,
            Action::Preempt => {
                self.engine
                    .preempt(id, now, &format!("preempted by {who}"))?;
                self.begin_stop(id);
                self.count_preemption(id);
            }
        }
        self.log(format!("job {id} {} by {who}", past(action)));
        Ok(())
    }

    /// Moves job `id` to `class`, asked by `who` (an operator or not: see
    /// `Engine::set_priority`).
    pub fn set_priority(
        &mut self,
        id: JobId,
        class: &str,
        who: &str,
        operator: bool,
    ) -> Result<(), EngineError> {
        self.engine.set_priority(id, class, self.now, operator)?;
        self.log(format!("job {id} reprioritized to {class} by {who}"));
        Ok(())
    }

    /// The job's stop grace period, seconds (the spec's `checkpoint.grace`, else 30 s).
    fn grace_of(&self, id: JobId) -> f64 {
        self.engine
            .job(id)
            .and_then(|j| j.spec.checkpoint.as_ref().map(|c| c.grace_s))
            .unwrap_or(30.0)
    }

    /// The spec's signal now, SIGKILL when the grace ends; the run's exit requeues the job.
    fn begin_stop(&mut self, id: JobId) {
        self.stop_on_hosts(id, None);
    }

    fn node_name(&self, i: usize) -> String {
        self.engine.fleet().nodes[i].name.clone()
    }

    fn pool_path_of(&self, i: usize) -> String {
        let fleet = self.engine.fleet();
        fleet.pool_path(fleet.nodes[i].pool)
    }

    /// Advances the daemon's clock by `dt` seconds: node events, what the backends report
    /// (exits, stops), arrivals, a cycle. Jobs end (and stop billing) at their own end time
    /// where the backend knows it, however large the step.
    pub fn advance(&mut self, dt: f64) -> Result<(), EngineError> {
        self.now += dt.max(0.0);
        self.run_node_timers(self.now)?;
        self.release_restarts()?;
        self.poll_hosts()?;
        if self.workload.is_some() && self.rng.below(3) == 0 {
            self.submit_demo()?;
        }
        if self.now - self.clock_saved >= 60.0 {
            self.engine.save_clock(self.now)?;
            self.clock_saved = self.now;
        }
        self.tick()
    }

    /// One scheduling cycle; starts what it places on the simulated backend.
    pub fn tick(&mut self) -> Result<(), EngineError> {
        // Replicas wanted are submitted before the cycle, so it places them now.
        self.reconcile_services();
        let report = self.engine.tick(self.now)?;
        self.counters.cycles += 1;
        for (id, why) in &report.skipped {
            self.warn(format!("job {id}: {why}"));
        }
        for id in report.started {
            let Some(j) = self.engine.job(id) else {
                continue;
            };
            let wait = self.now - j.submitted_at;
            let class = self.class_name(j.class);
            let team = self.team_name(j.team);
            self.counters
                .waits
                .entry(class)
                .or_default()
                .entry(team)
                .or_default()
                .observe(&WAIT_BUCKETS, wait);
            self.launch(id)?;
        }
        for id in report.preempting {
            self.begin_stop(id);
            self.count_preemption(id);
            self.log(format!("job {id} preempted by the scheduler"));
        }
        self.elastic()?;
        self.consolidate()?;
        self.sample_gpus();
        self.account_budgets()?;
        self.rebuild_snapshot();
        Ok(())
    }

    fn team_name(&self, i: usize) -> String {
        self.teams
            .get(i)
            .cloned()
            .unwrap_or_else(|| "?".to_string())
    }

    fn class_name(&self, i: usize) -> String {
        self.classes
            .get(i)
            .cloned()
            .unwrap_or_else(|| "?".to_string())
    }
}

fn past(a: Action) -> &'static str {
    match a {
        Action::Cancel => "cancelled",
        Action::Hold => "held",
        Action::Release => "released",
        Action::Preempt => "preempted",
    }
}
