//! The daemon's state: the engine plus the simulated backend that runs what it places, the
//! event log, simulated telemetry, counters for `/metrics`, and the snapshot the console and
//! the API read. It does no networking and keeps no wall clock: its owner (the actor) tells it
//! what time it is. Everything the simulated backend makes up is labelled simulated.

use super::engine::{BudgetGate, Engine, EngineError, Submission};
use super::job::JobState;
use super::journal::{EventRecord, JobId};
use crate::client::{JobRow, PoolRow, Snapshot, TeamRow, EVENTS_KEPT};
use crate::config::fleet::{
    classes_of, fleet_sized, teams_of, BudgetAction, FleetConfig, TeamConfig,
};
use crate::model::{CapacityType, GpuRequest, GpuShare, ModelId, NodeId};
use crate::scheduler::cycle::PendingReason;
use crate::scheduler::reclaim::{
    reclaim_plan, JobUsage, ReclaimAction, ReclaimConfig, ReclaimPlan, ReclaimSkip,
};
use crate::scheduler::rng::Rng;
use crate::scheduler::scale::{scale_down, scale_up, NodeIdle, ScaleConfig};
use crate::sim::idle::{cause_of, IdleCause, IdleNow};
use crate::sim::lifecycle::{
    draw_after, offers, pool_counts, provisioning_delay, start_lives, Life, SPOT_NOTICE_S,
};
use crate::sim::workload::Workload;
use serde::Serialize;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::Path;

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
    /// Where local jobs' logs go (default: `logs/` beside the journal).
    pub log_dir: Option<std::path::PathBuf>,
    /// Where the daemon's own warnings go besides the event log.
    pub messages: Messages,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            seed: 1,
            demo_workload: false,
            failures_per_node_hour: 0.0002,
            log_dir: None,
            messages: Messages::Stderr,
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
    fn write(&self, line: &str) {
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

/// A timed event of the simulated nodes; the epoch drops it if the node changed since.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NodeTimer {
    Ready(usize, u64),
    Notice(usize, u64),
    Gone(usize, u64),
    Fail(usize, u64),
    Repair(usize, u64),
}

/// The simulated backend's nodes: which exist, what is coming, what is going.
struct Nodes {
    pools: Vec<crate::config::fleet::PoolConfig>,
    lives: Vec<Life>,
    epochs: Vec<u64>,
    empty_since: Vec<Option<f64>>,
    timers: BinaryHeap<Reverse<(u64, u64, NodeTimer)>>,
    seq: u64,
    interrupted: Vec<Option<f64>>,
    failures_per_node_hour: f64,
    scale: ScaleConfig,
    /// When consolidation looks for a cloud node to give back next.
    next_consolidate: f64,
}

/// What an operator or researcher can do to one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Cancel,
    Hold,
    Release,
    Preempt,
}

impl Action {
    pub const ALL: [Action; 4] = [
        Action::Cancel,
        Action::Hold,
        Action::Release,
        Action::Preempt,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Action::Cancel => "cancel",
            Action::Hold => "hold",
            Action::Release => "release",
            Action::Preempt => "preempt",
        }
    }
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == s)
    }
}

/// Simulated behaviour of a running job: when it ends and when its GPUs go quiet.
#[derive(Clone, Debug)]
struct SimRun {
    ends_at: f64,
    /// Seconds after start when its GPUs go idle (notebooks left open); None: busy throughout.
    idle_after: Option<f64>,
    /// Its busy utilization, percent.
    busy_pct: f64,
}

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
    pub reclaimed_jobs: u64,
    pub reclaimed_gpu_hours: f64,
    pub cycles: u64,
    /// Wait before first start, seconds, per class name: (bucket counts, sum, count).
    pub waits: BTreeMap<String, Histogram>,
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

/// How `gantry report` groups the bill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportBy {
    Team,
    Project,
    Job,
}

impl ReportBy {
    pub fn parse(s: &str) -> Option<ReportBy> {
        match s {
            "team" => Some(ReportBy::Team),
            "project" => Some(ReportBy::Project),
            "job" => Some(ReportBy::Job),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct ReportRow {
    /// The team, project or job id.
    pub key: String,
    pub team: String,
    pub spend_usd: f64,
    pub gpu_hours: f64,
    pub on_demand_usd: f64,
    pub spot_usd: f64,
    pub reserved_usd: f64,
    /// Runs billed in the window (a job preempted and restarted has several).
    pub runs: usize,
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Report {
    pub simulated: bool,
    pub since: f64,
    pub until: f64,
    pub by: ReportBy,
    pub total_usd: f64,
    pub total_gpu_hours: f64,
    pub rows: Vec<ReportRow>,
}

/// How much of its monthly budget a team has used (the larger of dollars and GPU-hours), or
/// `None` without a budget.
fn budget_used(t: &TeamConfig, usd: f64, gpu_h: f64) -> Option<f64> {
    let a = t.budget_monthly_usd.map(|b| usd / b.max(1e-9));
    let g = t.budget_monthly_gpu_hours.map(|b| gpu_h / b.max(1e-9));
    match (a, g) {
        (Some(a), Some(g)) => Some(a.max(g)),
        (a, g) => a.or(g),
    }
}

fn budget_text(t: &TeamConfig, usd: f64, gpu_h: f64) -> String {
    let mut parts = Vec::new();
    if let Some(b) = t.budget_monthly_usd {
        parts.push(format!("${usd:.0} of ${b:.0}"));
    }
    if let Some(b) = t.budget_monthly_gpu_hours {
        parts.push(format!("{gpu_h:.0} of {b:.0} GPU-h"));
    }
    parts.join(", ")
}

/// Everything about one job, for `gantry job ID`.
#[derive(Clone, Debug, Serialize)]
pub struct JobDetail {
    pub id: JobId,
    pub name: Option<String>,
    pub team: String,
    pub class: String,
    pub state: JobState,
    pub submitted_at: f64,
    pub started_at: Option<f64>,
    pub borrowed: bool,
    /// Where it runs: node names and GPU indices.
    pub placement: Vec<String>,
    pub dollars_per_hour: f64,
    /// Dollars so far: finished runs plus the current one.
    pub cost_usd: f64,
    pub explanation: Option<crate::scheduler::cycle::Explanation>,
    /// The explanation in one line.
    pub reason: Option<String>,
    pub spec: String,
    pub events: Vec<EventRecord>,
    /// The last lines of its stdout and stderr, if it ran on this host.
    pub log_tail: Vec<String>,
}

/// A month of the daemon's clock, for budgets: 30 days.
pub const BUDGET_MONTH_S: f64 = 30.0 * 86_400.0;

/// How often consolidation looks for a cloud node to give back (at most one at a time).
const CONSOLIDATE_EVERY_S: f64 = 300.0;

/// How a budget alert's event begins: one wording for announcing it and for finding it again.
fn alert_prefix(team: &str, threshold: f64) -> String {
    format!(
        "budget: team {team} at {:.0}% of its monthly budget",
        threshold * 100.0
    )
}

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
}

pub struct State {
    /// This daemon's exclusive hold on the journal (released when the state is dropped).
    _lock: super::lock::StateLock,
    messages: Messages,
    engine: Engine,
    nodes: Nodes,
    /// Jobs running as real processes on this host (`provider = "local"` pools).
    local: super::local::LocalRuns,
    /// The fleet node that is this host (the first node of a `provider = "local"` pool).
    host_node: Option<usize>,
    /// This host's GPUs as NVML last reported them.
    host: super::host::HostTelemetry,
    budgets: Vec<TeamBudget>,
    /// The clock time last written to the journal (at most a simulated minute behind).
    clock_saved: f64,
    /// Recent simulated utilization per (node, GPU), sampled once a simulated minute.
    gpu_history: HashMap<(u32, u8), VecDeque<u8>>,
    history_at: f64,
    /// The engine's release count when the closed spend was last read.
    budget_read_at: Option<u64>,
    rng: Rng,
    now: f64,
    runs: HashMap<JobId, SimRun>,
    /// Preempting jobs and when their grace ends (the simulated stop).
    stops: HashMap<JobId, f64>,
    events: VecDeque<String>,
    events_total: u64,
    snapshot: Snapshot,
    teams: Vec<String>,
    /// Priority class names, in the engine's order.
    classes: Vec<String>,
    team_config: Vec<TeamConfig>,
    workload: Option<Workload>,
    pub reclaim: ReclaimConfig,
    pub counters: Counters,
    /// Reclaim plans shown lately, newest last: what `apply_reclaim` may apply.
    reclaim_shown: VecDeque<ReclaimPlan>,
}

/// Reclaim plans remembered for applying (several operators may be reviewing at once).
const RECLAIM_PLANS_KEPT: usize = 16;

impl State {
    /// Opens the journal at `db` over the fleet of `cfg`. The clock resumes from the latest
    /// time the journal has seen; jobs that were running are requeued (the simulated backend
    /// keeps nothing across a restart), with an event each.
    pub fn open(db: &Path, cfg: &FleetConfig, opts: &StateOptions) -> Result<State, EngineError> {
        // One daemon per journal, before anything is read or written.
        let lock = super::lock::StateLock::acquire(db).map_err(EngineError::Locked)?;
        // `gpu = "auto"` pools not discovered by the caller are discovered here.
        let discovered;
        let cfg = if crate::config::fleet::wants_discovery(cfg) {
            let mut c = cfg.clone();
            crate::config::fleet::apply_discovery(&mut c, &crate::backend::local::nvml::discover());
            discovered = c;
            &discovered
        } else {
            cfg
        };
        let (resume, local_records) = {
            let store = super::journal::Store::open(db)?;
            (store.last_time()?, store.local_runs()?)
        };
        let log_dir = opts
            .log_dir
            .clone()
            .unwrap_or_else(|| db.parent().unwrap_or_else(|| Path::new(".")).join("logs"));
        // Jobs a previous daemon started on this host that still run (or left how they
        // ended) are re-adopted where they were placed; the rest are requeued.
        let mut local = super::local::LocalRuns::new(log_dir);
        let mut adopted = BTreeMap::new();
        let mut orphans = Vec::new();
        for r in local_records {
            let placement = r
                .placement
                .as_deref()
                .and_then(|p| serde_json::from_str::<crate::model::Placement>(p).ok());
            match (placement, r.started_at) {
                (Some(p), Some(t)) if local.adopt(r.job, r.pgid, r.token.clone()) => {
                    adopted.insert(r.job, (p, t));
                }
                _ => orphans.push((r.job, r.pgid, r.token)),
            }
        }
        let teams = teams_of(cfg);
        let names = teams.iter().map(|t| t.name.clone()).collect();
        let classes = classes_of(cfg);
        let class_names = classes.iter().map(|c| c.name.clone()).collect();
        // Every pool at its elastic maximum, so node ids never change; nodes not bought yet
        // are down until an elastic decision provisions them.
        let mut fleet = fleet_sized(cfg, |p| p.max_nodes.unwrap_or(p.nodes).max(p.nodes));
        let lives = start_lives(&fleet, &cfg.pools);
        for (n, life) in fleet.nodes.iter_mut().zip(&lives) {
            n.health = life.health();
        }
        let nodes = Nodes {
            pools: cfg.pools.clone(),
            epochs: vec![0; lives.len()],
            empty_since: vec![Some(resume); lives.len()],
            lives,
            timers: BinaryHeap::new(),
            seq: 0,
            interrupted: vec![None; cfg.pools.len()],
            failures_per_node_hour: opts.failures_per_node_hour,
            scale: crate::config::fleet::scale_of(cfg),
            next_consolidate: resume + CONSOLIDATE_EVERY_S,
        };
        let mut engine = Engine::open_adopting(db, fleet, teams, classes, resume, &adopted)?;
        for t in &cfg.teams {
            engine.set_allowed_classes(&t.name, t.classes.as_deref())?;
            if let Some(n) = t.max_pending {
                engine.set_max_pending(&t.name, n)?;
            }
        }
        let recent = engine.store().events(None, EVENTS_KEPT)?;
        for &id in adopted.keys() {
            if engine.job(id).is_none_or(|j| j.placement.is_none()) {
                // Its placement no longer fits the fleet (or the job is gone): stop it.
                if let Some(r) = local.runs.remove(&id) {
                    orphans.push((id, r.pgid, r.token));
                }
            }
        }
        let host_node = engine
            .fleet()
            .nodes
            .iter()
            .position(|n| cfg.pools[n.pool.index()].is_local());
        let mut s = State {
            _lock: lock,
            messages: opts.messages.clone(),
            local,
            host_node,
            host: super::host::HostTelemetry::default(),
            nodes,
            budgets: vec![TeamBudget::default(); cfg.teams.len()],
            budget_read_at: None,
            clock_saved: resume,
            gpu_history: HashMap::new(),
            history_at: f64::NEG_INFINITY,
            engine,
            rng: Rng::new(opts.seed),
            now: resume,
            runs: HashMap::new(),
            stops: HashMap::new(),
            events: VecDeque::new(),
            events_total: 0,
            snapshot: Snapshot::default(),
            teams: names,
            classes: class_names,
            team_config: cfg.teams.clone(),
            workload: opts.demo_workload.then(Workload::default),
            reclaim: cfg.reclaim.config(),
            counters: Counters::default(),
            reclaim_shown: VecDeque::new(),
        };
        for e in recent {
            s.push_event(
                e.at,
                format!(
                    "{}{}",
                    e.job.map_or(String::new(), |j| format!("job {j} ")),
                    e.detail
                ),
            );
        }
        // Said where an operator looks (the journal already holds each job's reason).
        let failed = s.engine.failed_at_open().to_vec();
        for (id, why) in failed {
            let what = format!("job {id} {why}");
            s.messages.write(&what);
            s.log(what);
        }
        if s.engine.stale_history() > 0 {
            let n = s.engine.stale_history();
            s.messages.write(&format!("{n} finished job(s) name a pool, team or class the fleet file no longer has: their history stays in the journal (gantry job ID)"));
        }
        for i in 0..s.nodes.lives.len() {
            if s.nodes.lives[i] == Life::Up {
                s.arm_node(i);
            }
        }
        // This host's GPUs wait for NVML's first sample: until then gantry cannot tell which
        // are busy with processes it did not start, nor give a job their UUIDs.
        if let Some(node) = s.host_node {
            for g in 0..s.engine.fleet().nodes[node].gpus.len() as u8 {
                s.engine.hold_gpu(NodeId(node as u32), g);
            }
        }
        for &id in adopted.keys() {
            let Some(pgid) = s.local.runs.get(&id).map(|r| r.pgid) else {
                continue;
            };
            if s.engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Preempting)
            {
                // Its stop began before the restart: the grace runs again from now.
                let grace = s.grace_of(id);
                if let Some(r) = s.local.runs.get_mut(&id) {
                    r.kill_at = Some(s.now + grace);
                }
            }
            s.record_job(
                id,
                "local",
                format!(
                    "re-adopted process group {pgid}, still running on this host after the restart"
                ),
            )?;
        }
        // Processes a previous daemon left on this host that could not be re-adopted: their
        // jobs were requeued; stop them — only where the group is provably the run's (its
        // token in every member's environment). A group id that now names someone else's
        // processes (pid reuse after a reboot) is left alone, and said so.
        for (job, pgid, token) in orphans {
            use super::local::{kill_orphan, Orphan};
            match kill_orphan(pgid, job, token.as_deref()) {
                Orphan::Killed => s.record(
                    "local",
                    format!("job {job}: killed process group {pgid} left from before the restart; the job was requeued"),
                )?,
                Orphan::NotOurs => s.record(
                    "local",
                    format!("job {job}: process group {pgid} is alive but not provably this job's (its id was reused): left alone; the job was requeued"),
                )?,
                Orphan::Gone => {}
            }
            s.engine.store().remove_local_run(job)?;
        }
        if s.workload.is_some() && s.engine.jobs().next().is_none() {
            // A morning's backlog, so the first screen is already busy (a fresh journal only).
            for _ in 0..40 {
                s.submit_demo()?;
            }
        }
        s.tick()?;
        Ok(s)
    }

    /// The built-in simulated fleet with the demo workload, its journal in `dir`: what the
    /// embedded console shows, for tests and benches.
    pub fn demo(dir: &Path, seed: u64) -> Result<State, EngineError> {
        State::demo_with(dir, seed, Messages::File(dir.join("daemon.log")))
    }

    /// `demo`, with the daemon's warnings sent to `messages`.
    pub fn demo_with(dir: &Path, seed: u64, messages: Messages) -> Result<State, EngineError> {
        let cfg = crate::config::fleet::parse("built-in", crate::config::fleet::DEFAULT_FLEET)
            .map_err(|e| EngineError::NeverFits(e.to_string()))?;
        let opts = StateOptions {
            seed,
            demo_workload: true,
            messages,
            ..StateOptions::default()
        };
        State::open(&dir.join("demo.db"), &cfg, &opts)
    }

    pub fn now(&self) -> f64 {
        self.now
    }

    pub fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    fn push_event(&mut self, at: f64, what: String) {
        let t = at.max(0.0) as u64;
        self.events
            .push_front(format!("{:02}:{:02} {what}", t / 3600 % 24, t / 60 % 60));
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
        let _ = self
            .engine
            .store()
            .add_event(self.now, None, "daemon", &what);
        self.log(what);
    }

    /// An event that is also journaled (fleet changes: they are not job transitions, which the
    /// journal records by itself).
    fn record(&mut self, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine.store().add_event(self.now, None, kind, &what)?;
        self.log(what);
        Ok(())
    }

    /// A journaled event about one job (it shows in the job's history).
    fn record_job(&mut self, id: JobId, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine
            .store()
            .add_event(self.now, Some(id), kind, &what)?;
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

    /// Where a submission would land now, without admitting it.
    pub fn preview(&mut self, s: &Submission) -> Result<super::engine::Preview, EngineError> {
        self.engine.preview(s)
    }

    pub fn tokens(&mut self) -> Result<Vec<super::journal::TokenRecord>, EngineError> {
        Ok(self.engine.store().tokens()?)
    }

    pub fn add_token(&mut self, t: &super::journal::TokenRecord) -> Result<(), EngineError> {
        self.engine.store().add_token(t)?;
        self.log(format!("token {} created ({})", t.label, t.role));
        Ok(())
    }

    pub fn revoke_token(
        &mut self,
        t: &super::journal::TokenRecord,
        at: f64,
        by: &str,
    ) -> Result<(), EngineError> {
        self.engine.store().revoke_token(&t.hash, at)?;
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
        Ok(self.engine.store().events(job, limit)?)
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
                self.runs.remove(&id);
                self.stops.remove(&id);
                if self.local.runs.contains_key(&id) {
                    self.local.kill(id);
                    self.engine.store().remove_local_run(id)?;
                }
            }
            Action::Hold => self.engine.hold(id, now)?,
            Action::Release => self.engine.release(id, now)?,
            Action::Preempt => {
                self.engine
                    .preempt(id, now, &format!("preempted by {who}"))?;
                self.begin_stop(id);
                self.counters.preemptions += 1;
            }
        }
        self.log(format!("job {id} {} by {who}", past(action)));
        Ok(())
    }

    pub fn set_priority(&mut self, id: JobId, class: &str, who: &str) -> Result<(), EngineError> {
        self.engine.set_priority(id, class, self.now)?;
        self.log(format!("job {id} reprioritized to {class} by {who}"));
        Ok(())
    }

    /// A preempted job stops when its grace period ends (the simulated signal handler
    /// checkpoints within it).
    /// The job's stop grace period, seconds (the spec's `checkpoint.grace`, else 30 s).
    fn grace_of(&self, id: JobId) -> f64 {
        self.engine
            .job(id)
            .and_then(|j| j.spec.checkpoint.as_ref().map(|c| c.grace_s))
            .unwrap_or(30.0)
    }

    fn begin_stop(&mut self, id: JobId) {
        let grace = self.grace_of(id);
        if self.local.runs.contains_key(&id) {
            // A real process: the spec's signal now, SIGKILL when the grace ends; its exit
            // requeues it.
            let signal = self
                .engine
                .job(id)
                .and_then(|j| j.spec.checkpoint.as_ref())
                .and_then(|c| crate::backend::local::exec::signal_number(&c.signal.0))
                .unwrap_or(libc::SIGTERM);
            self.local.stop(id, signal, self.now + grace);
            return;
        }
        self.runs.remove(&id);
        self.stops.insert(id, self.now + grace.min(120.0));
    }

    fn node_name(&self, i: usize) -> String {
        self.engine.fleet().nodes[i].name.clone()
    }

    fn pool_path_of(&self, i: usize) -> String {
        let fleet = self.engine.fleet();
        fleet.pool_path(fleet.nodes[i].pool)
    }

    fn timer(&mut self, at: f64, t: NodeTimer) {
        self.nodes.seq += 1;
        self.nodes
            .timers
            .push(Reverse((at.max(0.0).to_bits(), self.nodes.seq, t)));
    }

    /// Whether node `i` is this host (a `provider = "local"` pool): real processes, no
    /// simulated failures.
    fn is_local(&self, i: usize) -> bool {
        self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].is_local()
    }

    /// Draws a node's next spot interruption (spot pools) and failure.
    fn arm_node(&mut self, i: usize) {
        if self.is_local(i) {
            return;
        }
        let epoch = self.nodes.epochs[i];
        let pool = &self.nodes.pools[self.engine.fleet().nodes[i].pool.index()];
        let spot = (pool.capacity == CapacityType::Spot)
            .then_some(pool.spot_interruptions_per_node_hour)
            .filter(|r| *r > 0.0);
        if let Some(rate) = spot {
            let at = self.now + draw_after(&mut self.rng, rate);
            self.timer(at, NodeTimer::Notice(i, epoch));
        }
        if self.nodes.failures_per_node_hour > 0.0 {
            let at = self.now + draw_after(&mut self.rng, self.nodes.failures_per_node_hour);
            self.timer(at, NodeTimer::Fail(i, epoch));
        }
    }

    fn set_life(&mut self, i: usize, life: Life) {
        self.nodes.lives[i] = life;
        self.nodes.epochs[i] += 1;
        self.engine.set_health(NodeId(i as u32), life.health());
        if life == Life::Up {
            self.nodes.empty_since[i] = Some(self.now);
        }
    }

    fn jobs_on(&self, i: usize) -> Vec<JobId> {
        let node = NodeId(i as u32);
        self.engine
            .jobs()
            .filter(|j| {
                j.placement
                    .as_ref()
                    .is_some_and(|p| p.nodes.iter().any(|g| g.node == node))
            })
            .map(|j| j.id)
            .collect()
    }

    /// Local processes: SIGKILL those past their grace, and record the ones that exited (a
    /// preempted one requeues; otherwise its exit code decides completed or failed).
    fn poll_local(&mut self) -> Result<(), EngineError> {
        self.local.kill_due(self.now);
        for (id, exit) in self.local.exited() {
            self.engine.store().remove_local_run(id)?;
            let preempted = self
                .engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Preempting);
            if preempted {
                self.engine.requeued(id, self.now)?;
                self.log(format!("job {id} stopped ({exit:?}) and requeued"));
            } else if self
                .engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Running)
            {
                self.engine.finished(id, exit.success(), self.now)?;
                self.log(format!("job {id} exited on the local host: {exit:?}"));
            }
        }
        Ok(())
    }

    /// Starts a job placed on this host as a process group; a job that cannot start fails with
    /// the reason.
    fn launch_local(&mut self, id: JobId) -> Result<(), EngineError> {
        let Some(j) = self.engine.job(id) else {
            return Ok(());
        };
        let wants_gpus = j
            .placement
            .as_ref()
            .is_some_and(|p| p.nodes.iter().any(|n| !n.gpus.is_empty()));
        if wants_gpus && self.host.sampled_at.is_none() && self.host.unavailable.is_none() {
            // Placed on a GPU the hold before NVML's first sample could not cover (MIG mode):
            // back to the queue until the host has been seen.
            self.engine
                .lost(id, self.now, "waiting for NVML's first sample of this host")?;
            return Ok(());
        }
        let gpus: Result<Vec<String>, String> = if wants_gpus {
            self.host_gpu_ids(
                j.placement
                    .iter()
                    .flat_map(|p| &p.nodes)
                    .flat_map(|n| &n.gpus),
            )
        } else {
            Ok(Vec::new())
        };
        let spec = j.spec.clone();
        let j_placement = j.placement.clone();
        let mig: Vec<String> = gpus
            .iter()
            .flatten()
            .filter(|u| u.starts_with("MIG-"))
            .cloned()
            .collect();
        match gpus.and_then(|g| self.local.launch(id, &spec, g)) {
            Ok((pgid, token)) => {
                if !mig.is_empty() {
                    self.host.assigned.insert(id, mig);
                }
                let run = super::journal::LocalRunRecord {
                    job: id,
                    pgid,
                    placement: j_placement
                        .as_ref()
                        .and_then(|p| serde_json::to_string(p).ok()),
                    started_at: Some(self.now),
                    token: Some(token),
                };
                self.engine.store().add_local_run(&run)?;
                self.log(format!(
                    "job {id} started on the local host as process group {pgid}"
                ));
            }
            Err(why) => {
                self.engine.finished(id, false, self.now)?;
                self.record_job(
                    id,
                    "local",
                    format!("could not start on the local host: {why}"),
                )?;
            }
        }
        Ok(())
    }

    /// The UUIDs for `CUDA_VISIBLE_DEVICES` of GPU grants on this host, from the latest NVML
    /// sample: the GPU's own, or for a MIG slice a MIG instance of that size not yet given out.
    fn host_gpu_ids<'a>(
        &self,
        grants: impl Iterator<Item = &'a crate::model::GpuGrant>,
    ) -> Result<Vec<String>, String> {
        if let Some(reason) = &self.host.unavailable {
            return Err(format!(
                "it was granted GPUs but NVML is not available here ({reason})"
            ));
        }
        let mut ids: Vec<String> = Vec::new();
        for g in grants {
            let id = match g.share {
                GpuShare::Mig { profile, .. } => {
                    let free = self
                        .host
                        .free_mig_instance(g.gpu, profile.memory_gb)
                        .filter(|u| !ids.contains(u));
                    free.ok_or(format!(
                        "GPU {} has no free MIG instance of {}g.{}gb (create one with `nvidia-smi mig -cgi {}g.{}gb -C`)",
                        g.gpu, profile.compute, profile.memory_gb, profile.compute, profile.memory_gb
                    ))?
                }
                _ => self
                    .host
                    .uuid(g.gpu)
                    .map(str::to_string)
                    .ok_or(format!("this host has no GPU {}", g.gpu))?,
            };
            ids.push(id);
        }
        Ok(ids)
    }

    /// The process group a job runs in on this host, if it runs here.
    pub fn local_process_group(&self, id: JobId) -> Option<u32> {
        self.local.runs.get(&id).map(|r| r.pgid)
    }

    /// Whether the fleet has this host in it (a `provider = "local"` pool): the daemon then
    /// samples NVML and sends what it sees to `observe_host`.
    pub fn has_local_host(&self) -> bool {
        self.host_node.is_some()
    }

    /// An NVML sample of this host (or why there is none): telemetry for the console and
    /// reclaim, and GPUs busy with processes gantry did not start held out of the scheduler's
    /// reach until those processes exit.
    pub fn observe_host(
        &mut self,
        found: crate::backend::local::nvml::Discovery,
    ) -> Result<(), EngineError> {
        let Some(node) = self.host_node else {
            return Ok(());
        };
        let groups: HashMap<u32, JobId> = self.local.groups().map(|(j, g)| (g, j)).collect();
        let nid = NodeId(node as u32);
        let jobs: Vec<(JobId, Vec<u8>)> = self
            .local
            .runs
            .keys()
            .filter_map(|&id| {
                let p = self.engine.job(id)?.placement.as_ref()?;
                let gpus: Vec<u8> = p
                    .nodes
                    .iter()
                    .filter(|n| n.node == nid)
                    .flat_map(|n| n.gpus.iter().map(|g| g.gpu))
                    .collect();
                Some((id, gpus))
            })
            .collect();
        let keep = self.reclaim.window_s + 120.0;
        let first = self.host.sampled_at.is_none() && self.host.unavailable.is_none();
        let changes = self.host.observe(self.now, found, &groups, &jobs, keep);
        // Each GPU's MIG mode follows the host's (the operator's MIG manager decides it).
        let modes: Vec<(u8, bool)> = self
            .host
            .gpus
            .iter()
            .filter_map(|g| Some((u8::try_from(g.index).ok()?, g.mig_enabled?)))
            .collect();
        for (g, on) in modes {
            let current = self.engine.fleet().nodes[node]
                .gpus
                .get(usize::from(g))
                .map(|gpu| gpu.mig.is_some());
            if current.is_none_or(|c| c == on) {
                continue;
            }
            // Held GPUs are not idle to the cluster: release, switch, hold again.
            let held = self.engine.release_gpu(nid, g);
            if self.engine.set_mig_mode(nid, g, on) {
                self.log(format!(
                    "GPU {g} on this host is {} MIG mode (NVML)",
                    if on { "in" } else { "out of" }
                ));
            }
            if held {
                self.engine.hold_gpu(nid, g);
            }
        }
        if first {
            // The GPUs held since the start: free those without foreign processes (all of them
            // when NVML is absent, so that a job granted one fails with the reason).
            for g in 0..self.engine.fleet().nodes[node].gpus.len() as u8 {
                if !self.host.foreign.contains_key(&g) {
                    self.engine.release_gpu(nid, g);
                }
            }
        }
        for change in changes {
            match change {
                super::host::HostChange::Unavailable(reason) => {
                    self.record("local", format!("{reason}; jobs on this host get no GPUs"))?;
                }
                super::host::HostChange::Foreign { gpu, pids, mib } => {
                    let held = self.engine.hold_gpu(nid, gpu) || self.engine.is_held(nid, gpu);
                    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                    self.record(
                        "local",
                        format!(
                            "GPU {gpu} on this host is busy with processes gantry did not start (pid {}, {mib} MiB){}",
                            pids.join(", "),
                            if held {
                                "; not allocated until they exit"
                            } else {
                                "; it shares a GPU with a gantry job"
                            }
                        ),
                    )?;
                }
                super::host::HostChange::Cleared { gpu } => {
                    if self.engine.release_gpu(nid, gpu) {
                        self.record(
                            "local",
                            format!("GPU {gpu} on this host: the foreign processes exited; it can be allocated again"),
                        )?;
                    }
                }
            }
        }
        // A GPU still foreign that could not be held (a gantry job was on it) is held once free.
        let pending: Vec<u8> = self
            .host
            .foreign
            .keys()
            .copied()
            .filter(|&g| !self.engine.is_held(nid, g))
            .collect();
        for g in pending {
            self.engine.hold_gpu(nid, g);
        }
        self.snapshot = self.build_snapshot();
        Ok(())
    }

    /// Node events due by `until`, in time order, each at its own time.
    fn run_node_timers(&mut self, until: f64) -> Result<(), EngineError> {
        while let Some(Reverse((bits, _, _))) = self.nodes.timers.peek() {
            let at = f64::from_bits(*bits);
            if at > until {
                break;
            }
            let Some(Reverse((_, _, t))) = self.nodes.timers.pop() else {
                break;
            };
            let saved = self.now;
            self.now = at;
            self.node_event(t)?;
            self.now = saved.max(at);
        }
        Ok(())
    }

    fn node_event(&mut self, t: NodeTimer) -> Result<(), EngineError> {
        let live = |s: &State, i: usize, e: u64| s.nodes.epochs[i] == e;
        match t {
            NodeTimer::Ready(i, e) if live(self, i, e) => {
                self.set_life(i, Life::Up);
                self.arm_node(i);
                self.record(
                    "fleet",
                    format!(
                        "node {} ready ({})",
                        self.node_name(i),
                        self.pool_path_of(i)
                    ),
                )?;
            }
            NodeTimer::Notice(i, e) if live(self, i, e) && self.nodes.lives[i] == Life::Up => {
                self.set_life(i, Life::Noticed);
                self.counters.spot_interruptions += 1;
                let jobs = self.jobs_on(i);
                for id in &jobs {
                    self.engine.preempt(
                        *id,
                        self.now,
                        "spot interruption notice: checkpoint now",
                    )?;
                    self.runs.remove(id);
                    self.stops.insert(*id, self.now + SPOT_NOTICE_S);
                }
                let epoch = self.nodes.epochs[i];
                self.timer(self.now + SPOT_NOTICE_S, NodeTimer::Gone(i, epoch));
                self.record(
                    "fleet",
                    format!(
                        "spot notice: {} ({}) is taken back in 2 min; {} job(s) checkpointing",
                        self.node_name(i),
                        self.pool_path_of(i),
                        jobs.len()
                    ),
                )?;
            }
            NodeTimer::Gone(i, e) if live(self, i, e) => {
                for id in self.jobs_on(i) {
                    self.stops.remove(&id);
                    self.engine.lost(
                        id,
                        self.now,
                        "spot node taken back: requeued from its checkpoint",
                    )?;
                }
                let pool = self.engine.fleet().nodes[i].pool.index();
                self.nodes.interrupted[pool] = Some(self.now);
                self.set_life(i, Life::Absent);
                self.record(
                    "fleet",
                    format!("node {} taken back by the provider", self.node_name(i)),
                )?;
            }
            NodeTimer::Fail(i, e) if live(self, i, e) && self.nodes.lives[i] == Life::Up => {
                let jobs = self.jobs_on(i);
                for id in &jobs {
                    self.runs.remove(id);
                    self.stops.remove(id);
                    self.engine.lost(
                        *id,
                        self.now,
                        "its node failed: requeued from its last checkpoint",
                    )?;
                }
                let reserved = self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].capacity
                    == CapacityType::Reserved;
                self.counters.node_failures += 1;
                if reserved {
                    self.set_life(i, Life::Failed);
                    let epoch = self.nodes.epochs[i];
                    self.timer(self.now + 4.0 * 3600.0, NodeTimer::Repair(i, epoch));
                } else {
                    self.set_life(i, Life::Absent);
                }
                self.record(
                    "fleet",
                    format!(
                        "node {} failed ({} job(s) requeued); {}",
                        self.node_name(i),
                        jobs.len(),
                        if reserved {
                            "repair under way"
                        } else {
                            "instance terminated"
                        }
                    ),
                )?;
            }
            NodeTimer::Repair(i, e) if live(self, i, e) => {
                self.set_life(i, Life::Up);
                self.arm_node(i);
                self.record("fleet", format!("node {} repaired", self.node_name(i)))?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Elastic capacity after a cycle: grow pools for jobs that fit nowhere (cheapest offer,
    /// spot first, on-demand after an interruption), give back nodes empty past the window.
    fn elastic(&mut self) -> Result<(), EngineError> {
        self.defragment()?;
        let pinned: std::collections::HashSet<JobId> =
            self.engine.pins().map(|(_, j, _)| j).collect();
        let fleet = self.engine.fleet();
        let waiting: Vec<(u64, &crate::model::JobRequest)> = {
            let mut w: Vec<(usize, u64, &crate::model::JobRequest)> = self
                .engine
                .jobs()
                .filter(|j| {
                    j.state == JobState::Pending
                        && !pinned.contains(&j.id)
                        && self
                            .nodes
                            .scale
                            .may_buy_for(j.class, self.now - j.submitted_at)
                })
                .filter_map(|j| {
                    let e = j.explanation.as_ref()?;
                    e.reason
                        .waits_for_capacity()
                        .then_some((e.position, j.id as u64, &j.request))
                })
                .collect();
            w.sort_by_key(|x| (x.0, x.1));
            w.into_iter().map(|(_, id, r)| (id, r)).collect()
        };
        let (offers, incoming) = offers(
            fleet,
            &self.nodes.pools,
            &self.nodes.lives,
            &self.nodes.interrupted,
        );
        let plan = scale_up(self.now, &offers, &incoming, &waiting, &self.nodes.scale);
        for up in plan {
            let absent: Vec<usize> = (0..self.nodes.lives.len())
                .filter(|&i| {
                    self.engine.fleet().nodes[i].pool == up.pool
                        && self.nodes.lives[i] == Life::Absent
                })
                .take(up.nodes as usize)
                .collect();
            let delay = provisioning_delay(&self.nodes.pools[up.pool.index()]);
            for &i in &absent {
                self.set_life(i, Life::Provisioning);
                let epoch = self.nodes.epochs[i];
                self.timer(self.now + delay, NodeTimer::Ready(i, epoch));
            }
            self.counters.scale_ups += 1;
            let fallback = if up.spot_fallback {
                " (spot was just interrupted: on-demand)"
            } else {
                ""
            };
            self.record(
                "fleet",
                format!(
                    "{} +{} for job {}, +${:.2}/h, ready in {:.0} min{fallback}",
                    self.engine.fleet().pool_path(up.pool),
                    absent.len(),
                    up.for_job,
                    up.added_per_hour,
                    delay / 60.0
                ),
            )?;
        }
        // Empty elastic nodes go back after the window.
        let fleet = self.engine.fleet();
        for (i, n) in fleet.nodes.iter().enumerate() {
            let empty = n.gpus.iter().all(|g| g.is_idle()) && n.cpu_free == n.cpu_milli;
            match (empty, self.nodes.empty_since[i]) {
                (true, None) => self.nodes.empty_since[i] = Some(self.now),
                (false, Some(_)) => self.nodes.empty_since[i] = None,
                _ => {}
            }
        }
        let idle: Vec<NodeIdle> = (0..fleet.nodes.len())
            .filter(|&i| {
                self.nodes.lives[i] == Life::Up
                    && self.nodes.pools[fleet.nodes[i].pool.index()].capacity
                        != CapacityType::Reserved
            })
            .map(|i| NodeIdle {
                node: NodeId(i as u32),
                pool: fleet.nodes[i].pool,
                empty_since: self.nodes.empty_since[i],
            })
            .collect();
        let counts = pool_counts(fleet, self.nodes.pools.len(), &self.nodes.lives);
        let mins: Vec<u32> = self.nodes.pools.iter().map(|p| p.min_nodes).collect();
        // A drained node goes as soon as its last job has moved.
        let drained: Vec<usize> = (0..fleet.nodes.len())
            .filter(|&i| self.nodes.lives[i] == Life::Draining && self.jobs_on(i).is_empty())
            .collect();
        for i in drained {
            let price = self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].price_per_hour;
            self.set_life(i, Life::Absent);
            self.counters.scale_downs += 1;
            self.counters.consolidated_nodes += 1;
            self.record(
                "fleet",
                format!(
                    "{} -1 ({} consolidated: its jobs moved to paid capacity), -${price:.2}/h",
                    self.pool_path_of(i),
                    self.node_name(i),
                ),
            )?;
        }
        for n in scale_down(self.now, &idle, &counts, &mins, &self.nodes.scale) {
            let i = n.index();
            let price = self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].price_per_hour;
            let empty = self.now - self.nodes.empty_since[i].unwrap_or(self.now);
            self.set_life(i, Life::Absent);
            self.counters.scale_downs += 1;
            self.record(
                "fleet",
                format!(
                    "{} -1 ({} empty for {:.0} min), -${price:.2}/h",
                    self.pool_path_of(i),
                    self.node_name(i),
                    empty / 60.0
                ),
            )?;
        }
        Ok(())
    }

    /// Tells each job why it must move: it checkpoints within its grace and requeues, and the
    /// next cycle places it elsewhere.
    fn move_jobs(&mut self, jobs: &[JobId], why: &str) -> Result<(), EngineError> {
        for &id in jobs {
            self.engine.preempt(id, self.now, why)?;
            self.begin_stop(id);
        }
        Ok(())
    }

    /// Whether a running job may be moved: its spec says it can be stopped and resumed
    /// (preemptible, with a checkpoint) and it runs on one node of the simulated backend.
    fn movable(&self, id: JobId) -> bool {
        self.engine.job(id).is_some_and(|j| {
            j.state == JobState::Running
                && j.spec.preemptible
                && j.spec.checkpoint.is_some()
                && j.placement.as_ref().is_some_and(|p| p.nodes.len() == 1)
        })
    }

    /// Defragmentation with checkpoints, as `gantry sim` does it: a job that fits nowhere and
    /// needs whole GPUs on one node gets a node already paid for, emptied by moving its jobs
    /// to room elsewhere, instead of one bought for it. The node is held for the job (nobody
    /// else is placed there) while its jobs checkpoint and requeue; the job starts there once
    /// it fits, or the hold lapses after 15 minutes. One at a time, lightest nodes first.
    fn defragment(&mut self) -> Result<(), EngineError> {
        self.engine.drop_pins(self.now - 15.0 * 60.0);
        if self.engine.pins().next().is_some() {
            return Ok(());
        }
        let mut stuck: Vec<(usize, JobId)> = self
            .engine
            .jobs()
            .filter(|j| j.state == JobState::Pending && j.request.nodes == 1)
            .filter(|j| matches!(j.request.gpu, GpuRequest::Whole(_)))
            .filter_map(|j| {
                let e = j.explanation.as_ref()?;
                e.reason.waits_for_capacity().then_some((e.position, j.id))
            })
            .collect();
        stuck.sort_unstable();
        for (_, w) in stuck.into_iter().take(4) {
            let Some(req) = self.engine.job(w).map(|j| j.request.clone()) else {
                continue;
            };
            let fleet = self.engine.fleet();
            let mut candidates: Vec<(u32, usize)> = (0..fleet.nodes.len())
                .filter(|&i| {
                    let n = &fleet.nodes[i];
                    self.nodes.lives[i] == Life::Up
                        && !self.is_local(i)
                        && n.model.is_some_and(|m| req.models.rank(m).is_some())
                        && n.gpu_milli_used() > 0
                })
                .map(|i| (fleet.nodes[i].gpu_milli_used(), i))
                .collect();
            candidates.sort_unstable();
            for (_, i) in candidates.into_iter().take(4) {
                let jobs = self.jobs_on(i);
                if jobs.is_empty()
                    || !jobs.iter().all(|&id| self.movable(id))
                    || !self
                        .engine
                        .room_after_moves(NodeId(i as u32), &jobs, Some(w))
                {
                    continue;
                }
                self.engine.pin(NodeId(i as u32), w, self.now);
                let why = format!(
                    "defragmentation: {} is emptied for job {w}; checkpoint and move",
                    self.node_name(i)
                );
                self.move_jobs(&jobs, &why)?;
                self.record(
                    "fleet",
                    format!(
                        "defragment {}: {} job(s) checkpoint and move so job {w} gets the node instead of one bought for it",
                        self.node_name(i),
                        jobs.len()
                    ),
                )?;
                return Ok(());
            }
        }
        Ok(())
    }

    /// Consolidation — what Karpenter does for pods, done with checkpoints, as `gantry sim`
    /// does it: when no job waits for capacity, the least-used cloud node whose jobs all
    /// checkpoint and would all fit on other capacity already paid for is drained (cordoned;
    /// its jobs told to checkpoint, then requeued to start elsewhere) and given back once
    /// empty. One node at a time, every few minutes: calm, and each step an event.
    fn consolidate(&mut self) -> Result<(), EngineError> {
        if self.now < self.nodes.next_consolidate {
            return Ok(());
        }
        self.nodes.next_consolidate = self.now + CONSOLIDATE_EVERY_S;
        let waiting = self.engine.jobs().any(|j| {
            j.state == JobState::Pending
                && j.explanation
                    .as_ref()
                    .is_some_and(|e| e.reason.waits_for_capacity())
        });
        if waiting || self.nodes.lives.contains(&Life::Draining) {
            return Ok(());
        }
        let fleet = self.engine.fleet();
        let counts = pool_counts(fleet, self.nodes.pools.len(), &self.nodes.lives);
        let mut candidates: Vec<(u32, usize)> = (0..fleet.nodes.len())
            .filter(|&i| {
                let pool = &self.nodes.pools[fleet.nodes[i].pool.index()];
                self.nodes.lives[i] == Life::Up
                    && pool.capacity != CapacityType::Reserved
                    && !pool.is_local()
                    && counts[fleet.nodes[i].pool.index()] > pool.min_nodes
            })
            .map(|i| (fleet.nodes[i].gpu_milli_used(), i))
            .filter(|&(used, _)| used > 0)
            .collect();
        candidates.sort_unstable();
        for (_, i) in candidates {
            let jobs = self.jobs_on(i);
            let movable = jobs.iter().all(|&id| self.movable(id));
            let pinned = self.engine.pins().any(|(n, _, _)| n.index() == i);
            if jobs.is_empty()
                || !movable
                || pinned
                || !self.engine.fit_elsewhere(NodeId(i as u32), &jobs)
            {
                continue;
            }
            self.set_life(i, Life::Draining);
            let why = format!(
                "consolidation: {} is given back; checkpoint and move to capacity already paid for",
                self.node_name(i)
            );
            self.move_jobs(&jobs, &why)?;
            self.record(
                "fleet",
                format!(
                    "{} draining {}: {} job(s) checkpoint and move to capacity already paid for",
                    self.pool_path_of(i),
                    self.node_name(i),
                    jobs.len()
                ),
            )?;
            break;
        }
        Ok(())
    }

    /// Advances the simulated clock by `dt` seconds: completions, stops, arrivals, a cycle.
    /// Jobs end (and stop billing) at their own end time, however large the step.
    pub fn advance(&mut self, dt: f64) -> Result<(), EngineError> {
        self.now += dt.max(0.0);
        self.run_node_timers(self.now)?;
        let mut due: Vec<(f64, JobId)> = self
            .runs
            .iter()
            .filter(|(_, r)| r.ends_at <= self.now)
            .map(|(&id, r)| (r.ends_at, id))
            .collect();
        due.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (at, id) in due {
            self.runs.remove(&id);
            let ok = self.rng.below(20) != 0;
            // One job whose end cannot be recorded must not stop the others' (or the cycle).
            if let Err(e) = self.engine.finished(id, ok, at) {
                self.warn(format!("job {id}: its end could not be recorded: {e}"));
                continue;
            }
            self.log(format!(
                "job {id} {}",
                if ok { "completed" } else { "failed (exit 1)" }
            ));
        }
        let mut stopped: Vec<(f64, JobId)> = self
            .stops
            .iter()
            .filter(|(_, &t)| t <= self.now)
            .map(|(&id, &t)| (t, id))
            .collect();
        stopped.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (at, id) in stopped {
            self.stops.remove(&id);
            if let Err(e) = self.engine.requeued(id, at) {
                self.warn(format!("job {id}: its requeue could not be recorded: {e}"));
                continue;
            }
            self.log(format!("job {id} stopped and requeued from its checkpoint"));
        }
        self.poll_local()?;
        if self.workload.is_some() && self.rng.below(3) == 0 {
            self.submit_demo()?;
        }
        if self.now - self.clock_saved >= 60.0 {
            self.engine.store().save_clock(self.now)?;
            self.clock_saved = self.now;
        }
        self.tick()
    }

    /// One scheduling cycle; starts what it places on the simulated backend.
    pub fn tick(&mut self) -> Result<(), EngineError> {
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
            let notebook = j.spec.run.as_deref().is_some_and(|r| r.contains("jupyter"))
                || j.name.as_deref().is_some_and(|n| n.starts_with("notebook"));
            let base = j
                .name
                .as_deref()
                .and_then(Workload::mean_duration)
                .or(j.spec.time_limit_s.map(|t| 0.6 * t))
                .unwrap_or(3600.0);
            let on_host = j
                .placement
                .as_ref()
                .and_then(|p| p.nodes.first())
                .is_some_and(|g| self.is_local(g.node.index()));
            self.counters
                .waits
                .entry(class)
                .or_default()
                .observe(&WAIT_BUCKETS, wait);
            if on_host {
                self.launch_local(id)?;
                continue;
            }
            let busy_pct = 70.0 + 25.0 * self.rng.unit();
            let duration = base * (0.5 + self.rng.unit());
            self.runs.insert(
                id,
                SimRun {
                    ends_at: self.now + duration,
                    idle_after: notebook.then_some(20.0 * 60.0),
                    busy_pct,
                },
            );
            self.log(format!("job {id} started"));
        }
        for id in report.preempting {
            self.begin_stop(id);
            self.counters.preemptions += 1;
            self.log(format!("job {id} preempted by the scheduler"));
        }
        self.elastic()?;
        self.consolidate()?;
        self.sample_gpus();
        self.account_budgets()?;
        self.snapshot = self.build_snapshot();
        Ok(())
    }

    /// This month's spend per team, alerts at each threshold, and the action at 100%:
    /// `block` refuses the team's new submissions, `demote` moves its new and pending jobs to
    /// the lowest class. A new month lifts both.
    fn account_budgets(&mut self) -> Result<(), EngineError> {
        let month = (self.now / BUDGET_MONTH_S).floor() as i64;
        let start = month as f64 * BUDGET_MONTH_S;
        let releases = self.engine.releases();
        let rollover = self.budgets.iter().any(|b| b.month != month);
        if rollover || self.budget_read_at != Some(releases) {
            let closed = self.engine.store().closed_spend_by_team(start)?;
            // Alerts this month already announced, by this daemon or before a restart: the
            // journal remembers, so a restart does not announce them again.
            let first = self.budget_read_at.is_none();
            let announced = if rollover || first {
                self.engine.store().event_details("budget", start)?
            } else {
                Vec::new()
            };
            for (i, b) in self.budgets.iter_mut().enumerate() {
                if b.month != month || first {
                    let cfg = &self.team_config[i];
                    let alerted = cfg
                        .alerts()
                        .iter()
                        .take_while(|&&th| {
                            let said = alert_prefix(&cfg.name, th);
                            announced.iter().any(|d| d.starts_with(&said))
                        })
                        .count();
                    *b = TeamBudget {
                        month,
                        alerted,
                        ..TeamBudget::default()
                    };
                }
                let name = &self.team_config[i].name;
                let (usd, gh) = closed
                    .iter()
                    .find(|c| &c.0 == name)
                    .map_or((0.0, 0.0), |c| (c.1, c.2));
                b.closed_usd = usd;
                b.closed_gpu_h = gh;
            }
            for t in 0..self.budgets.len() {
                self.engine.set_budget_gate(t, None);
            }
            self.budget_read_at = Some(releases);
        }
        for b in &mut self.budgets {
            b.usd = b.closed_usd;
            b.gpu_h = b.closed_gpu_h;
        }
        for j in self.engine.jobs() {
            let (Some(p), Some(t)) = (&j.placement, j.started_at) else {
                continue;
            };
            let hours = (self.now - t.max(start)).max(0.0) / 3600.0;
            if let Some(b) = self.budgets.get_mut(j.team) {
                b.usd += p.price_per_hour * hours;
                b.gpu_h += j.request.total_gpu_milli() as f64 / 1000.0 * hours;
            }
        }
        for t in 0..self.budgets.len() {
            let cfg = self.team_config[t].clone();
            let Some(used) = budget_used(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h) else {
                continue;
            };
            let alerts = cfg.alerts();
            while self.budgets[t].alerted < alerts.len() && used >= alerts[self.budgets[t].alerted]
            {
                let th = alerts[self.budgets[t].alerted];
                self.budgets[t].alerted += 1;
                let what = format!(
                    "{} ({})",
                    alert_prefix(&cfg.name, th),
                    budget_text(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h)
                );
                self.engine
                    .store()
                    .add_event(self.now, None, "budget", &what)?;
                self.log(what);
            }
            if used >= 1.0 && cfg.budget_action != BudgetAction::Notify {
                let first = !self.budgets[t].enforced;
                self.budgets[t].enforced = true;
                let gate = match cfg.budget_action {
                    BudgetAction::Block => BudgetGate::Block(format!(
                        "team `{}` has spent its monthly budget ({}); budget_action = block refuses new jobs until the month ends or the budget is raised in the fleet file",
                        cfg.name,
                        budget_text(&cfg, self.budgets[t].usd, self.budgets[t].gpu_h)
                    )),
                    _ => BudgetGate::Demote,
                };
                self.engine.set_budget_gate(t, Some(gate));
                if first && cfg.budget_action == BudgetAction::Demote {
                    self.demote_pending(t)?;
                }
            }
        }
        Ok(())
    }

    /// Moves a team's pending jobs to the lowest class (its budget is spent).
    fn demote_pending(&mut self, team: usize) -> Result<(), EngineError> {
        let low = self.engine.lowest_class();
        let name = self.class_name(low);
        let ids: Vec<JobId> = self
            .engine
            .jobs()
            .filter(|j| {
                j.team == team
                    && j.class != low
                    && matches!(j.state, JobState::Pending | JobState::Held)
            })
            .map(|j| j.id)
            .collect();
        for id in &ids {
            self.engine.set_priority(*id, &name, self.now)?;
        }
        self.log(format!(
            "budget: team {} over budget: {} pending job(s) demoted to {name}",
            self.team_name(team),
            ids.len()
        ));
        Ok(())
    }

    /// The bill for `[since, until)`, grouped `by` team, project or job.
    pub fn report(&mut self, since: f64, until: f64, by: ReportBy) -> Result<Report, EngineError> {
        let now = self.now;
        let charges = self.engine.store().charges(since, until.min(now), now)?;
        let mut rows: BTreeMap<String, ReportRow> = BTreeMap::new();
        for c in &charges {
            let key = match by {
                ReportBy::Team => c.team.clone(),
                ReportBy::Project => c.project.clone().unwrap_or_else(|| "(none)".into()),
                ReportBy::Job => c.job.to_string(),
            };
            let row = rows.entry(key.clone()).or_insert_with(|| ReportRow {
                key,
                team: c.team.clone(),
                ..ReportRow::default()
            });
            if row.team != c.team {
                // A project shared by several teams.
                row.team = "*".to_string();
            }
            let usd = c.dollars();
            row.spend_usd += usd;
            row.gpu_hours += c.gpu_hours();
            match c.capacity.as_str() {
                "spot" => row.spot_usd += usd,
                "reserved" => row.reserved_usd += usd,
                _ => row.on_demand_usd += usd,
            }
            row.runs += 1;
        }
        let mut rows: Vec<ReportRow> = rows.into_values().collect();
        rows.sort_by(|a, b| b.spend_usd.total_cmp(&a.spend_usd).then(a.key.cmp(&b.key)));
        Ok(Report {
            simulated: true,
            since,
            until: until.min(now),
            by,
            total_usd: rows.iter().map(|r| r.spend_usd).sum(),
            total_gpu_hours: rows.iter().map(|r| r.gpu_hours).sum(),
            rows,
        })
    }

    /// Simulated utilization now of every GPU that runs something, percent (a GPU shared by
    /// several jobs adds their shares).
    fn gpu_utils(&self) -> HashMap<(u32, u8), f64> {
        let mut out: HashMap<(u32, u8), f64> = HashMap::new();
        for j in self.engine.jobs() {
            let (Some(p), Some(started)) = (&j.placement, j.started_at) else {
                continue;
            };
            let u = self.util_at(j.id, started, self.now);
            for n in &p.nodes {
                for g in &n.gpus {
                    let share = match g.share {
                        GpuShare::Whole => 1.0,
                        GpuShare::Milli(m) => f64::from(m) / 1000.0,
                        GpuShare::Mig { profile, .. } => f64::from(profile.compute) / 7.0,
                    };
                    *out.entry((n.node.0, g.gpu)).or_default() += u * share;
                }
            }
        }
        // This host's GPUs read what NVML measured, whoever runs there.
        if let Some(node) = self.host_node {
            for g in 0..self.engine.fleet().nodes[node].gpus.len() as u8 {
                match self.host.util(g) {
                    Some(u) => out.insert((node as u32, g), u),
                    None => out.remove(&(node as u32, g)),
                };
            }
        }
        out
    }

    /// Keeps the last 40 samples per GPU, one per simulated minute (the Fleet drill-down's
    /// sparklines).
    fn sample_gpus(&mut self) {
        if self.now - self.history_at < 60.0 {
            return;
        }
        self.history_at = self.now;
        let utils = self.gpu_utils();
        let fleet = self.engine.fleet();
        for (i, n) in fleet.nodes.iter().enumerate() {
            if !matches!(
                self.nodes.lives[i],
                Life::Up | Life::Noticed | Life::Draining
            ) {
                for g in 0..n.gpus.len() as u8 {
                    self.gpu_history.remove(&(i as u32, g));
                }
                continue;
            }
            for g in 0..n.gpus.len() as u8 {
                let u = utils.get(&(i as u32, g)).copied().unwrap_or(0.0);
                let h = self.gpu_history.entry((i as u32, g)).or_default();
                h.push_back(u.clamp(0.0, 100.0) as u8);
                if h.len() > 40 {
                    h.pop_front();
                }
            }
        }
    }

    /// One pool node by node and GPU by GPU (simulated telemetry).
    pub fn pool_detail(&self, index: usize) -> Option<crate::client::PoolDetail> {
        let fleet = self.engine.fleet();
        let pool = fleet.pools.get(index)?;
        let utils = self.gpu_utils();
        let mut on: HashMap<(u32, u8), (Vec<i64>, u32)> = HashMap::new();
        for j in self.engine.jobs() {
            let Some(p) = &j.placement else { continue };
            for n in &p.nodes {
                for g in &n.gpus {
                    let e = on.entry((n.node.0, g.gpu)).or_default();
                    e.0.push(j.id);
                    e.1 += match g.share {
                        GpuShare::Whole if g.vram_mib == 0 => u32::MAX,
                        _ => g.vram_mib,
                    };
                }
            }
        }
        let vram = pool.model.map_or(0, |m| fleet.model(m).vram_mib);
        // Simulated board power from utilization: idle draw to the model's TDP; temperature
        // follows power.
        let tdp = match pool.model.map(|m| fleet.model(m).name.as_str()) {
            Some("H100" | "H200") => 700.0,
            Some("A100-80GB" | "A100") => 400.0,
            Some("L40S") => 350.0,
            _ => 300.0,
        };
        let nodes = fleet
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.pool.index() == index && self.nodes.lives[*i] != Life::Absent)
            .map(|(i, n)| crate::client::NodeView {
                name: n.name.clone(),
                state: match self.nodes.lives[i] {
                    Life::Up => "up",
                    Life::Provisioning => "provisioning",
                    Life::Noticed => "notice",
                    Life::Draining => "draining",
                    Life::Failed => "failed",
                    Life::Absent => "absent",
                }
                .to_string(),
                leaf: n.leaf.map(|l| fleet.leaves[l.index()].clone()),
                nvlink: fleet.nvlink_domains[n.nvlink.index()].clone(),
                gpus: n
                    .gpus
                    .iter()
                    .enumerate()
                    .map(|(g, gpu)| {
                        let key = (i as u32, g as u8);
                        let (jobs, reserved) = on.get(&key).cloned().unwrap_or_default();
                        let util = utils.get(&key).copied().unwrap_or(0.0).min(100.0);
                        let power = 0.1 * tdp + 0.9 * tdp * util / 100.0;
                        let mut view = crate::client::GpuView {
                            index: g as u8,
                            util_pct: util,
                            power_w: power,
                            temp_c: 30.0 + 45.0 * power / tdp,
                            vram_used_mib: reserved.min(vram),
                            vram_total_mib: vram,
                            foreign_pids: Vec::new(),
                            jobs,
                            mig_used: gpu.mig.map(|m| m.compute_used),
                            history: self
                                .gpu_history
                                .get(&key)
                                .map_or(Vec::new(), |h| h.iter().copied().collect()),
                        };
                        if Some(i) == self.host_node {
                            self.measured(&mut view);
                        }
                        view
                    })
                    .collect(),
            })
            .collect();
        Some(crate::client::PoolDetail {
            simulated: !self.nodes.pools[index].is_local(),
            path: fleet.pool_path(crate::model::PoolId(index as u32)),
            model: pool
                .model
                .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
            capacity: pool.capacity.to_string(),
            dollars_per_hour: pool.price_per_hour,
            nodes,
        })
    }

    /// What NVML measured on this host's GPU replaces the modelled power, temperature and
    /// memory (utilization already comes from it).
    fn measured(&self, view: &mut crate::client::GpuView) {
        let Some(s) = self.host.gpus.get(usize::from(view.index)) else {
            return;
        };
        view.power_w = s.power_w.unwrap_or(0.0);
        view.temp_c = s.temperature_c.map_or(0.0, f64::from);
        view.vram_used_mib = u32::try_from(s.memory_used_mib).unwrap_or(u32::MAX);
        view.vram_total_mib = u32::try_from(s.memory_total_mib).unwrap_or(u32::MAX);
        view.foreign_pids = self
            .host
            .foreign
            .get(&view.index)
            .cloned()
            .unwrap_or_default();
    }

    /// Simulated per-GPU utilization of a running job at time `t`, percent.
    fn util_at(&self, id: JobId, started: f64, t: f64) -> f64 {
        match self.runs.get(&id) {
            Some(r) if r.idle_after.is_some_and(|a| t - started >= a) => 1.0,
            // A deterministic wobble (steps, evaluation, data loading) around the job's level.
            Some(r) => (r.busy_pct + 6.0 * ((t - started) / 420.0 + id as f64).sin()).min(100.0),
            None => 0.0,
        }
    }

    /// Jobs whose GPUs have stayed idle past the window (simulated telemetry, or NVML's for
    /// jobs on this host).
    pub fn reclaim_plan(&self) -> ReclaimPlan {
        let step = 60.0;
        let from = self.now - self.reclaim.window_s - step;
        let mut series: Vec<(&super::engine::Job, Vec<Samples>)> = Vec::new();
        for j in self.engine.jobs().filter(|j| j.state == JobState::Running) {
            let (Some(p), Some(started)) = (&j.placement, j.started_at) else {
                continue;
            };
            if self.local.runs.contains_key(&j.id) {
                // Measured: this job's own utilization of each of its GPUs, from NVML.
                let per_gpu: Vec<Samples> = p
                    .nodes
                    .iter()
                    .flat_map(|n| n.gpus.iter().map(|g| g.gpu))
                    .map(|g| {
                        self.host.job_series(j.id, g).map_or(Vec::new(), |s| {
                            s.iter().copied().filter(|(t, _)| *t >= from).collect()
                        })
                    })
                    .collect();
                series.push((j, per_gpu));
                continue;
            }
            let gpus: usize = p.nodes.iter().map(|n| n.gpus.len()).sum();
            let mut samples = Vec::new();
            let mut t = started.max(from);
            while t <= self.now {
                samples.push((t, self.util_at(j.id, started, t)));
                t += step;
            }
            series.push((j, vec![samples; gpus]));
        }
        let usage: Vec<JobUsage> = series
            .iter()
            .filter_map(|(j, s)| {
                Some(JobUsage {
                    job: j.id as u64,
                    placement: j.placement.as_ref()?,
                    checkpoints: j.spec.checkpoint.is_some(),
                    interactive: j.spec.interactive,
                    gpu_samples: s,
                })
            })
            .collect();
        reclaim_plan(self.now, &usage, &self.reclaim)
    }

    /// The reclaim plan now, remembered by its id so that applying it applies exactly it.
    pub fn show_reclaim(&mut self) -> ReclaimPlan {
        let plan = self.reclaim_plan();
        if !plan.items.is_empty() {
            self.reclaim_shown.retain(|p| p.id != plan.id);
            self.reclaim_shown.push_back(plan.clone());
            while self.reclaim_shown.len() > RECLAIM_PLANS_KEPT {
                self.reclaim_shown.pop_front();
            }
        }
        plan
    }

    /// Applies the plan `id` that `show_reclaim` returned, and only it: each of its jobs is
    /// checked again — still running, its GPUs still idle, the same action — and skipped,
    /// with the reason, if not; nothing outside the plan is touched. Checkpointing jobs are
    /// preempted (they requeue), interactive ones suspended (held until their owner releases
    /// them), the rest cancelled. Returns what was applied and what was skipped.
    pub fn apply_reclaim(&mut self, who: &str, id: &str) -> Result<ReclaimPlan, EngineError> {
        let Some(pos) = self.reclaim_shown.iter().position(|p| p.id == id) else {
            return Err(EngineError::Stale(format!(
                "reclaim plan `{}` is not one this daemon showed (or it was applied already); get the current plan (gantry reclaim) and apply its id",
                id.escape_debug()
            )));
        };
        let shown = self.reclaim_shown.remove(pos).unwrap_or_default();
        let current = self.reclaim_plan();
        let mut applied = Vec::new();
        let mut skipped = Vec::new();
        for item in shown.items {
            let jid = item.job as JobId;
            if !current
                .items
                .iter()
                .any(|c| c.job == item.job && c.action == item.action)
            {
                let why = match self.engine.job(jid).map(|j| j.state) {
                    Some(JobState::Running) => "its GPUs are no longer idle".to_string(),
                    Some(s) => format!("it is {s} now"),
                    None => "it has finished".to_string(),
                };
                skipped.push(ReclaimSkip { job: item.job, why });
                continue;
            }
            let because = format!("idle GPUs reclaimed by {who}");
            match item.action {
                ReclaimAction::CheckpointAndRequeue => {
                    self.engine.preempt(jid, self.now, &because)?;
                    self.begin_stop(jid);
                }
                ReclaimAction::Suspend => {
                    self.engine.suspend(jid, self.now, &because)?;
                    self.begin_stop(jid);
                }
                ReclaimAction::Cancel => {
                    self.engine.cancel(jid, self.now)?;
                    self.runs.remove(&jid);
                }
            }
            self.counters.reclaimed_jobs += 1;
            self.counters.reclaimed_gpu_hours += item.gpus * item.idle_for_s / 3600.0;
            self.log(format!(
                "job {jid} reclaimed by {who} ({}): {} idle GPU(s), ${:.2}/h freed",
                item.action.describe(),
                crate::client::gpus_text(item.gpus),
                item.dollars_per_hour
            ));
            applied.push(item);
        }
        let mut plan = ReclaimPlan::of(self.now, applied);
        plan.id = shown.id;
        plan.skipped = skipped;
        self.snapshot = self.build_snapshot();
        Ok(plan)
    }

    /// Everything about one job.
    pub fn job_detail(&mut self, id: JobId) -> Result<JobDetail, EngineError> {
        let events = self.engine.store().events(Some(id), 100)?;
        let record = self.engine.job_record(id)?.ok_or(EngineError::NoJob(id))?;
        // `secrets` values are never shown, to anyone (the API hides `envs` from others).
        let spec = crate::spec::redact::redact(&record.spec, true);
        let log_tail = super::local::log_tail(&self.local.log_dir, id, 20);
        let Some(j) = self.engine.job(id) else {
            // Finished long enough ago to be only in the journal (or no longer resolvable).
            return Ok(JobDetail {
                id,
                name: record.name,
                team: record.team,
                class: record.priority,
                state: record.state,
                submitted_at: record.submitted_at,
                started_at: None,
                borrowed: false,
                placement: Vec::new(),
                dollars_per_hour: 0.0,
                cost_usd: record.cost,
                explanation: None,
                reason: None,
                spec,
                events,
                log_tail,
            });
        };
        let fleet = self.engine.fleet();
        let placement = j.placement.as_ref().map_or(Vec::new(), |p| {
            p.nodes
                .iter()
                .map(|n| {
                    let gpus: Vec<String> = n
                        .gpus
                        .iter()
                        .map(|g| match g.share {
                            GpuShare::Mig { start, .. } => format!("{}@slice{start}", g.gpu),
                            GpuShare::Milli(m) if m < crate::model::MILLI_PER_GPU => {
                                format!("{}({:.2})", g.gpu, f64::from(m) / 1000.0)
                            }
                            _ => g.gpu.to_string(),
                        })
                        .collect();
                    format!("{} gpus {}", fleet.node(n.node).name, gpus.join(","))
                })
                .collect()
        });
        Ok(JobDetail {
            id,
            name: j.name.clone(),
            team: self.team_name(j.team),
            class: self.class_name(j.class),
            state: j.state,
            submitted_at: j.submitted_at,
            started_at: j.started_at,
            borrowed: j.borrowed,
            placement,
            dollars_per_hour: j.placement.as_ref().map_or(0.0, |p| p.price_per_hour),
            cost_usd: j.cost_at(self.now),
            reason: self.why_waiting(j),
            explanation: j.explanation.clone(),
            spec,
            events,
            log_tail,
        })
    }

    /// Why a pending job waits: the cycle's reason, and — when it waits for capacity and its
    /// class has patience left (`[scale] burst_after`) — when capacity will be bought for it.
    fn why_waiting(&self, j: &super::engine::Job) -> Option<String> {
        let e = j.explanation.as_ref()?;
        let mut text = reason_text(&e.reason);
        let for_capacity = e.reason.waits_for_capacity();
        let patience = self.nodes.scale.patience_s(j.class);
        let left = patience - (self.now - j.submitted_at);
        if let Some((node, _, _)) = self.engine.pins().find(|(_, w, _)| *w == j.id) {
            text.push_str(&format!(
                "; {} is being emptied for it (defragmentation)",
                self.engine.fleet().node(node).name
            ));
        } else if for_capacity && left > 0.0 {
            text.push_str(&format!(
                "; {} jobs wait {:.0} min for paid capacity before any is bought ({:.0} min left)",
                self.class_name(j.class),
                patience / 60.0,
                (left / 60.0).ceil()
            ));
        }
        Some(text)
    }

    fn build_snapshot(&self) -> Snapshot {
        let fleet = self.engine.fleet();
        let mut pools: Vec<PoolRow> = fleet
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| PoolRow {
                path: fleet.pool_path(crate::model::PoolId(i as u32)),
                short: format!(
                    "{}/{}",
                    fleet.regions[fleet.zones[p.zone.index()].region as usize].provider,
                    p.name
                ),
                instance: p.instance_type.clone(),
                model: p
                    .model
                    .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
                capacity: p.capacity.to_string(),
                dollars_per_hour: p.price_per_hour,
                ..PoolRow::default()
            })
            .collect();
        // Only nodes that exist count; provisioning ones are paid but not yet usable.
        let mut paid = vec![0usize; pools.len()];
        for (n, life) in fleet.nodes.iter().zip(&self.nodes.lives) {
            let row = &mut pools[n.pool.index()];
            match life {
                Life::Absent => continue,
                Life::Provisioning => row.provisioning += 1,
                Life::Failed => row.down += 1,
                Life::Up | Life::Noticed | Life::Draining => {
                    row.nodes += 1;
                    row.gpus += n.gpus.len();
                    row.gpus_busy += n.gpus.iter().filter(|g| !g.is_idle()).count();
                }
            }
            paid[n.pool.index()] += 1;
        }
        let gpus_total: usize = pools.iter().map(|p| p.gpus).sum();
        let gpus_busy: usize = pools.iter().map(|p| p.gpus_busy).sum();
        let dollars: f64 = pools
            .iter()
            .zip(&paid)
            .map(|(p, n)| p.dollars_per_hour * *n as f64)
            .sum();
        let idle_dollars: f64 = pools
            .iter()
            .map(|p| {
                if p.gpus == 0 {
                    0.0
                } else {
                    p.dollars_per_hour * p.nodes as f64 * (p.gpus - p.gpus_busy) as f64
                        / p.gpus as f64
                }
            })
            .sum();
        let mut jobs: Vec<JobRow> = self
            .engine
            .jobs()
            .filter(|j| !j.state.is_final() || self.now - j.submitted_at < 6.0 * 3600.0)
            .map(|j| {
                let gpus = match (j.request.gpu, j.request.nodes) {
                    (GpuRequest::None, _) => "cpu".to_string(),
                    (GpuRequest::Whole(n), 1) => format!("{n}"),
                    (GpuRequest::Whole(n), k) => format!("{k}×{n}"),
                    (GpuRequest::Fraction(m), _) => format!("{:.2}", f64::from(m) / 1000.0),
                    (GpuRequest::Mig(p), _) => p.to_string(),
                };
                let (detail, position) = match (&j.placement, &j.explanation) {
                    (Some(p), _) => {
                        let node = &fleet.node(p.nodes[0].node).name;
                        let share =
                            p.nodes[0]
                                .gpus
                                .first()
                                .map_or(String::new(), |g| match g.share {
                                    GpuShare::Mig { start, .. } => {
                                        format!(" gpu{} slice@{start}", g.gpu)
                                    }
                                    _ => String::new(),
                                });
                        let more = if p.nodes.len() > 1 {
                            format!(" +{} nodes", p.nodes.len() - 1)
                        } else {
                            String::new()
                        };
                        (
                            format!("{node}{share}{more} ${:.2}/h", p.price_per_hour),
                            None,
                        )
                    }
                    (None, Some(e)) => (self.why_waiting(j).unwrap_or_default(), Some(e.position)),
                    (None, None) => (String::new(), None),
                };
                let since = j.started_at.unwrap_or(j.submitted_at);
                JobRow {
                    id: j.id,
                    name: j.name.clone().unwrap_or_default(),
                    team: self.team_name(j.team),
                    class: self.class_name(j.class),
                    state: j.state.to_string(),
                    gpus,
                    since_s: since,
                    position,
                    detail,
                    cost_usd: j.cost,
                    dollars_per_hour: j.placement.as_ref().map_or(0.0, |p| p.price_per_hour),
                }
            })
            .collect();
        jobs.sort_by_key(|j| {
            (
                state_order(&j.state),
                j.position.unwrap_or(usize::MAX),
                -j.id,
            )
        });
        let mut queue_by_class: Vec<(String, usize)> =
            self.classes.iter().map(|c| (c.clone(), 0)).collect();
        for j in self.engine.jobs().filter(|j| j.state == JobState::Pending) {
            if let Some(q) = queue_by_class
                .iter_mut()
                .find(|(c, _)| *c == self.class_name(j.class))
            {
                q.1 += 1;
            }
        }
        let mut teams: Vec<TeamRow> = self
            .team_config
            .iter()
            .zip(&self.budgets)
            .map(|(t, b)| TeamRow {
                name: t.name.clone(),
                cohort: t.cohort.clone().unwrap_or_default(),
                weight: t.weight,
                guaranteed: t.guaranteed,
                borrow_limit: t.borrow_limit,
                budget_monthly_usd: t.budget_monthly_usd,
                budget_monthly_gpu_hours: t.budget_monthly_gpu_hours,
                spend_month_usd: b.usd,
                gpu_hours_month: b.gpu_h,
                budget_used: budget_used(t, b.usd, b.gpu_h),
                budget_action: t.budget_action.to_string(),
                ..TeamRow::default()
            })
            .collect();
        for j in self.engine.jobs() {
            let Some(row) = teams.get_mut(j.team) else {
                continue;
            };
            match j.state {
                JobState::Running | JobState::Preempting => {
                    row.running += 1;
                    row.used_gpus += j.request.total_gpu_milli() as f64 / 1000.0;
                    row.burn_per_hour += j.placement.as_ref().map_or(0.0, |p| p.price_per_hour);
                }
                JobState::Pending => row.pending += 1,
                _ => {}
            }
        }
        for row in &mut teams {
            row.borrowed_gpus = row
                .guaranteed
                .map_or(0.0, |g| (row.used_gpus - f64::from(g)).max(0.0));
        }
        // What each team lends: the others' borrowing in its cohort, spread over the members'
        // idle guarantees.
        let idle: Vec<f64> = teams
            .iter()
            .map(|r| {
                r.guaranteed
                    .map_or(0.0, |g| (f64::from(g) - r.used_gpus).max(0.0))
            })
            .collect();
        for i in 0..teams.len() {
            if teams[i].cohort.is_empty() || idle[i] == 0.0 {
                continue;
            }
            let same = |j: usize| teams[j].cohort == teams[i].cohort;
            let borrowed: f64 = (0..teams.len())
                .filter(|&j| j != i && same(j))
                .map(|j| teams[j].borrowed_gpus)
                .sum();
            let pool: f64 = (0..teams.len()).filter(|&j| same(j)).map(|j| idle[j]).sum();
            teams[i].lent_gpus = (borrowed * idle[i] / pool.max(1e-9)).min(idle[i]);
        }
        Snapshot {
            version: self.snapshot.version + 1,
            events_total: self.events_total,
            teams,
            simulated: self.nodes.pools.iter().any(|p| !p.is_local()),
            host: self.host_node.map(|_| self.host.status(self.now)),
            now: self.now,
            pools,
            gpus_total,
            gpus_busy,
            dollars_per_hour: dollars,
            idle_dollars_per_hour: idle_dollars,
            idle_by_cause: self.idle_by_cause(),
            jobs,
            queue_by_class,
            events: self.events.iter().take(50).cloned().collect(),
        }
    }

    /// Paid GPUs that nobody uses right now, by cause (`sim::idle`'s vocabulary, as `gantry
    /// sim` accounts them), with their price; causes with no GPUs are left out.
    fn idle_by_cause(&self) -> Vec<IdleNow> {
        let fleet = self.engine.fleet();
        let mut wanted = vec![false; fleet.models.len()];
        for j in self.engine.jobs().filter(|j| j.state == JobState::Pending) {
            for (m, w) in wanted.iter_mut().enumerate() {
                *w |= j.request.models.rank(ModelId(m as u16)).is_some();
            }
        }
        let mut out: Vec<IdleNow> = IdleCause::FREE
            .iter()
            .map(|&cause| IdleNow {
                cause,
                gpus: 0,
                dollars_per_hour: 0.0,
            })
            .collect();
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = &self.nodes.pools[n.pool.index()];
            let idle = n.gpus.iter().filter(|g| g.is_idle()).count();
            let used = idle < n.gpus.len() || n.cpu_free < n.cpu_milli;
            let waits = n.model.is_some_and(|m| wanted[m.index()]);
            let reserved = pool.capacity == CapacityType::Reserved;
            let Some(cause) = cause_of(self.nodes.lives[i], reserved, used, waits) else {
                continue;
            };
            // A node that is not up yet (or down) idles whole.
            let free = if matches!(cause, IdleCause::Provisioning | IdleCause::InRepair) {
                n.gpus.len()
            } else {
                idle
            };
            if free == 0 {
                continue;
            }
            let k = cause.slot().expect("cause_of gives a free GPU's cause");
            out[k].gpus += free;
            out[k].dollars_per_hour +=
                pool.price_per_hour * free as f64 / f64::from(pool.gpus_per_node.max(1));
        }
        out.retain(|c| c.gpus > 0);
        out
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

fn state_order(s: &str) -> u8 {
    match s {
        "running" | "preempting" => 0,
        "pending" => 1,
        "held" => 2,
        _ => 3,
    }
}

/// One line for why a job waits.
pub fn reason_text(r: &PendingReason) -> String {
    match r {
        PendingReason::Held => "held".to_string(),
        PendingReason::Quota { wants, used, guaranteed, borrow_limit, lendable } => format!(
            "quota: wants {:.1} GPU, team uses {:.1}/{:.0} guaranteed, may borrow {:.0}, lendable idle {:.1}",
            *wants as f64 / 1000.0,
            *used as f64 / 1000.0,
            *guaranteed as f64 / 1000.0,
            *borrow_limit as f64 / 1000.0,
            *lendable as f64 / 1000.0
        ),
        PendingReason::NoCapacity { why, reservation } => {
            let behind = reservation.map_or(String::new(), |(j, _)| format!(" (behind job {j}'s reservation)"));
            format!("{why}{behind}")
        }
        PendingReason::AwaitingPreemption { victims } => format!("preempting {} job(s) to start", victims.len()),
        PendingReason::Reserved { start_at } => format!("reserved: starts by t+{:.0} min", start_at / 60.0),
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
