//! The one interface the console and the CLI use to reach a daemon. The console renders
//! `Snapshot`s only, so an embedded daemon and a remote one look the same to it. A remote
//! console follows the daemon's event stream: one snapshot, then `SnapshotDelta`s.

pub mod history;
pub mod logs;
pub mod services;

pub use crate::model::idle::{IdleCause, IdleNow};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A job's id, as the daemon numbers them (from 1).
pub type JobId = i64;

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolRow {
    /// provider/region/zone/pool
    pub path: String,
    /// provider/pool, for narrow terminals
    pub short: String,
    pub instance: String,
    pub model: String,
    pub capacity: String,
    pub nodes: usize,
    pub gpus: usize,
    pub gpus_busy: usize,
    pub dollars_per_hour: f64,
    /// Nodes being provisioned (paid, not yet usable).
    #[serde(default)]
    pub provisioning: usize,
    /// Nodes down for repair (on-prem: still paid), or lost.
    #[serde(default)]
    pub down: usize,
    /// Nodes counted up whose host cannot be reached right now (no new work goes there; lost
    /// after the pool's `lost_after`).
    #[serde(default)]
    pub unreachable: usize,
    /// What a pool that buys its nodes is doing: nodes coming (price, ready when), spot
    /// notices, passed over and why, the next idle node given back and when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// Which jobs a listing shows: `GET /v1/jobs?state=&team=&class=`, and `gantry jobs -w` over
/// the event stream.
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    /// Comma-separated states, any of which.
    pub state: Option<String>,
    pub team: Option<String>,
    pub class: Option<String>,
    /// Who submitted it.
    pub user: Option<String>,
}

impl JobFilter {
    pub fn matches(&self, j: &JobRow) -> bool {
        self.state
            .as_ref()
            .is_none_or(|s| s.split(',').any(|s| s == j.state))
            && self.team.as_ref().is_none_or(|t| *t == j.team)
            && self.class.as_ref().is_none_or(|c| *c == j.class)
            && self
                .user
                .as_ref()
                .is_none_or(|u| j.user.as_ref() == Some(u))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobRow {
    pub id: i64,
    pub name: String,
    /// Who submitted it (the Unix user on the socket, a token's label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    pub team: String,
    pub class: String,
    pub state: String,
    /// GPUs, as text ("8×H100", "0.5", "3g.40gb").
    pub gpus: String,
    /// Daemon time of submission (pending) or of start (running): the age is `now - since_s`,
    /// so rows do not change merely because time passes.
    pub since_s: f64,
    /// Daemon time of submission: a job's age, which a requeue does not reset (absent from
    /// daemons before it: `since_s` stands in).
    #[serde(default)]
    pub submitted_s: Option<f64>,
    /// Queue position, for pending jobs.
    pub position: Option<usize>,
    /// Why it waits, or where it runs.
    pub detail: String,
    /// Dollars billed for its finished runs.
    #[serde(default)]
    pub cost_usd: f64,
    /// What its current run costs per hour (0 unless it holds GPUs).
    #[serde(default)]
    pub dollars_per_hour: f64,
    /// Times it was started again after its own process failed (`job_recovery`).
    #[serde(default)]
    pub restarts: u32,
}

impl JobRow {
    /// Seconds since it was submitted, at daemon time `now`.
    pub fn age(&self, now: f64) -> f64 {
        now - self.submitted_s.unwrap_or(self.since_s)
    }

    /// Cost so far at daemon time `now`: finished runs plus the current one (which started at
    /// `since_s`). Computed by the reader so the row does not change merely as time passes.
    pub fn cost_at(&self, now: f64) -> f64 {
        self.cost_usd + self.dollars_per_hour * (now - self.since_s).max(0.0) / 3600.0
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamRow {
    pub name: String,
    pub cohort: String,
    pub weight: f64,
    /// Guaranteed GPUs (None: no quota).
    pub guaranteed: Option<u32>,
    pub borrow_limit: u32,
    /// GPUs its running jobs hold.
    pub used_gpus: f64,
    /// GPUs above its guarantee (borrowed from its cohort).
    pub borrowed_gpus: f64,
    /// Of its idle guarantee, what its cohort's borrowers use.
    #[serde(default)]
    pub lent_gpus: f64,
    pub running: usize,
    pub pending: usize,
    /// $/h of its running jobs.
    pub burn_per_hour: f64,
    pub budget_monthly_usd: Option<f64>,
    #[serde(default)]
    pub budget_monthly_gpu_hours: Option<f64>,
    /// Spent this budget month (the calendar month in the fleet's time zone), dollars and
    /// GPU-hours.
    #[serde(default)]
    pub spend_month_usd: f64,
    #[serde(default)]
    pub gpu_hours_month: f64,
    /// Spent ever (finished runs, and running ones so far), dollars.
    #[serde(default)]
    pub spend_total_usd: f64,
    /// Fraction of the budget used (the larger of dollars and GPU-hours), if it has one.
    #[serde(default)]
    pub budget_used: Option<f64>,
    /// notify, block or demote: what happens at 100%.
    #[serde(default)]
    pub budget_action: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Grows by one with every change the daemon publishes.
    pub version: u64,
    /// The data come from the simulated fleet (labelled everywhere it shows).
    pub simulated: bool,
    /// Seconds on the daemon's clock.
    pub now: f64,
    /// `now` on the calendar, and the budget month.
    #[serde(default)]
    pub calendar: CalendarNow,
    pub pools: Vec<PoolRow>,
    pub gpus_total: usize,
    pub gpus_busy: usize,
    pub dollars_per_hour: f64,
    /// $/h of GPUs that nobody uses.
    pub idle_dollars_per_hour: f64,
    /// Paid GPUs that nobody uses, by why (booting, empty cloud node, owned with nothing
    /// waiting for it, …), the causes with any GPUs only.
    #[serde(default)]
    pub idle_by_cause: Vec<IdleNow>,
    pub jobs: Vec<JobRow>,
    /// Pending jobs per priority class, highest class first.
    pub queue_by_class: Vec<(String, usize)>,
    pub teams: Vec<TeamRow>,
    /// Most recent first (the newest `EVENTS_KEPT`).
    pub events: Vec<String>,
    /// Events ever logged: tells a follower how many of a delta's events are new.
    pub events_total: u64,
    /// The local host's GPUs through NVML (fleets with a `provider = "local"` pool).
    #[serde(default)]
    pub host: Option<HostStatus>,
    /// Services (`gantry serve up`) and their replicas.
    #[serde(default)]
    pub services: Vec<services::ServiceRow>,
}

/// The local host's NVML status, when the fleet has a `provider = "local"` pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostStatus {
    /// NVML answered (false: `reason` says why not).
    pub nvml: bool,
    pub driver: Option<String>,
    pub gpus: usize,
    /// GPUs busy with processes gantry did not start (never allocated while they are).
    pub foreign_gpus: Vec<u8>,
    /// Seconds since the last sample (daemon clock).
    pub sample_age_s: Option<f64>,
    pub reason: Option<String>,
}

impl HostStatus {
    /// The host's NVML status in one line, as the console's Fleet foot and `gantry fleet` print it.
    pub fn summary(&self) -> String {
        if !self.nvml {
            return format!(
                "this host: {}",
                self.reason
                    .as_deref()
                    .unwrap_or("waiting for NVML's first sample")
            );
        }
        let foreign = if self.foreign_gpus.is_empty() {
            String::new()
        } else {
            let g: Vec<String> = self.foreign_gpus.iter().map(u8::to_string).collect();
            format!(
                " · GPU {} busy with processes gantry did not start (not allocated)",
                g.join(",")
            )
        };
        format!(
            "this host: NVIDIA driver {} · {} GPU(s) via NVML · sampled {:.0}s ago{foreign}",
            self.driver.as_deref().unwrap_or("?"),
            self.gpus,
            self.sample_age_s.unwrap_or(0.0)
        )
    }
}

/// The daemon's now on the calendar.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CalendarNow {
    /// RFC 3339, in the fleet's time zone.
    pub time: String,
    /// The fleet's IANA time zone (`[calendar] time_zone`).
    pub time_zone: String,
    /// The budget month (`2026-11`) and when the next begins (RFC 3339).
    pub budget_month: String,
    pub budget_month_ends: String,
}

/// How many recent events a snapshot carries.
pub const EVENTS_KEPT: usize = 50;

/// What changed between two snapshots: the small parts whole, jobs by id.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SnapshotDelta {
    pub version: u64,
    pub now: f64,
    #[serde(default)]
    pub calendar: CalendarNow,
    pub pools: Vec<PoolRow>,
    pub gpus_total: usize,
    pub gpus_busy: usize,
    pub dollars_per_hour: f64,
    pub idle_dollars_per_hour: f64,
    #[serde(default)]
    pub idle_by_cause: Vec<IdleNow>,
    pub queue_by_class: Vec<(String, usize)>,
    pub teams: Vec<TeamRow>,
    /// Jobs that are new or whose row changed.
    pub jobs_changed: Vec<JobRow>,
    /// Jobs no longer listed.
    pub jobs_removed: Vec<i64>,
    /// The order of every listed job, by id.
    pub job_order: Vec<i64>,
    /// New events, most recent first.
    pub events_new: Vec<String>,
    pub events_total: u64,
    #[serde(default)]
    pub host: Option<HostStatus>,
    /// Every service, whole (they are few).
    #[serde(default)]
    pub services: Vec<services::ServiceRow>,
}

impl Snapshot {
    /// The delta that turns `self` into `next`.
    pub fn diff(&self, next: &Snapshot) -> SnapshotDelta {
        let old: std::collections::HashMap<i64, &JobRow> =
            self.jobs.iter().map(|j| (j.id, j)).collect();
        let listed: std::collections::HashSet<i64> = next.jobs.iter().map(|j| j.id).collect();
        let fresh = next.events_total.saturating_sub(self.events_total) as usize;
        SnapshotDelta {
            version: next.version,
            now: next.now,
            calendar: next.calendar.clone(),
            pools: next.pools.clone(),
            gpus_total: next.gpus_total,
            gpus_busy: next.gpus_busy,
            dollars_per_hour: next.dollars_per_hour,
            idle_dollars_per_hour: next.idle_dollars_per_hour,
            idle_by_cause: next.idle_by_cause.clone(),
            queue_by_class: next.queue_by_class.clone(),
            teams: next.teams.clone(),
            jobs_changed: next
                .jobs
                .iter()
                .filter(|j| old.get(&j.id) != Some(j))
                .cloned()
                .collect(),
            jobs_removed: self
                .jobs
                .iter()
                .map(|j| j.id)
                .filter(|id| !listed.contains(id))
                .collect(),
            job_order: next.jobs.iter().map(|j| j.id).collect(),
            events_new: next.events.iter().take(fresh).cloned().collect(),
            events_total: next.events_total,
            host: next.host.clone(),
            services: next.services.clone(),
        }
    }

    /// Applies a delta made against this snapshot (or one that followed every earlier delta).
    pub fn apply(&mut self, d: SnapshotDelta) {
        let mut rows: std::collections::HashMap<i64, JobRow> = std::mem::take(&mut self.jobs)
            .into_iter()
            .map(|j| (j.id, j))
            .collect();
        for id in &d.jobs_removed {
            rows.remove(id);
        }
        for j in d.jobs_changed {
            rows.insert(j.id, j);
        }
        self.jobs = d
            .job_order
            .iter()
            .filter_map(|id| rows.remove(id))
            .collect();
        let mut events = d.events_new;
        events.extend(std::mem::take(&mut self.events));
        events.truncate(EVENTS_KEPT);
        self.events = events;
        self.events_total = d.events_total;
        self.version = d.version;
        self.now = d.now;
        self.calendar = d.calendar;
        self.pools = d.pools;
        self.services = d.services;
        self.gpus_total = d.gpus_total;
        self.gpus_busy = d.gpus_busy;
        self.dollars_per_hour = d.dollars_per_hour;
        self.idle_dollars_per_hour = d.idle_dollars_per_hour;
        self.idle_by_cause = d.idle_by_cause;
        self.queue_by_class = d.queue_by_class;
        self.teams = d.teams;
        self.host = d.host;
    }
}

pub use self::Action as JobAction;

/// A change the console asks of the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRequest {
    pub id: i64,
    pub action: JobAction,
}

impl LogsView {
    /// Where the next read of each node starts, for `?after=` (`OUT,ERR;OUT,ERR…`).
    pub fn cursors(&self) -> String {
        let cursors: Vec<&str> = self.nodes.iter().map(|n| n.cursor.as_str()).collect();
        cursors.join(";")
    }
}

/// Which lines of a job's logs to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogsFrom {
    /// The last lines of each stream (a last line not yet ended included).
    Tail(usize),
    /// What was written since these cursors (`OUT,ERR;OUT,ERR…`, one per node, from the last
    /// answer): complete lines only, unless `partial` (the run has ended; its last line may
    /// lack its newline).
    After { cursors: String, partial: bool },
}

impl LogsFrom {
    /// The query's parameters for `GET /v1/jobs/{id}/logs`.
    pub fn query(&self) -> String {
        match self {
            LogsFrom::Tail(n) => format!("tail={n}&partial=true"),
            LogsFrom::After { cursors, partial } => format!("after={cursors}&partial={partial}"),
        }
    }
}

/// A job's logs as `GET /v1/jobs/{id}/logs` answers (the fields the console uses).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogsView {
    pub job: i64,
    #[serde(rename = "final")]
    pub is_final: bool,
    pub nodes: Vec<NodeLogsView>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeLogsView {
    pub rank: usize,
    pub node: String,
    pub lines: Vec<logs::LogLine>,
    /// Where the next read of this node starts (`OUT,ERR`).
    #[serde(default)]
    pub cursor: String,
    #[serde(default)]
    pub error: Option<String>,
}

/// One job in detail, as the console shows it (the fields of `GET /v1/jobs/{id}` it uses).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: i64,
    #[serde(default)]
    pub name: Option<String>,
    /// Who submitted it.
    #[serde(default)]
    pub user: Option<String>,
    pub team: String,
    pub class: String,
    pub state: String,
    pub submitted_at: f64,
    #[serde(default)]
    pub started_at: Option<f64>,
    /// `submitted_at` and `started_at` on the calendar (RFC 3339).
    #[serde(default)]
    pub submitted: String,
    #[serde(default)]
    pub started: Option<String>,
    #[serde(default)]
    pub placement: Vec<String>,
    #[serde(default)]
    pub dollars_per_hour: f64,
    #[serde(default)]
    pub cost_usd: f64,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub spec: String,
    #[serde(default)]
    pub events: Vec<JobEvent>,
    /// Every run it had: nodes, times, how each ended.
    #[serde(default)]
    pub runs: Vec<RunRecord>,
    /// The last lines of its logs, for jobs that ran on the daemon's host.
    #[serde(default)]
    pub log_tail: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobEvent {
    pub at: f64,
    /// `at` on the calendar (RFC 3339 in the fleet's zone); empty from a daemon before it.
    #[serde(default)]
    pub time: String,
    pub detail: String,
}

/// One node GPU by GPU over a range (`GET /v1/nodes/{name}?range=5m|1h|24h`, `gantry node`):
/// what each GPU did and who is on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeDetail {
    pub name: String,
    pub pool: String,
    pub model: String,
    pub state: String,
    pub simulated: bool,
    pub range: history::Range,
    /// Seconds each point spans.
    pub step_s: f64,
    pub gpus: Vec<GpuHistoryView>,
    /// Its CPUs, memory and disk, and every job of gantry's there (CPU-only ones included).
    #[serde(default)]
    pub resources: NodeResources,
    #[serde(default)]
    pub jobs: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuHistoryView {
    pub index: u8,
    /// NVML's UUID on a real host.
    pub uuid: Option<String>,
    pub vram_total_mib: u32,
    /// What it shows now.
    pub now: history::Point,
    /// A real host's GPU that NVML does not measure: no numbers are shown for it.
    pub unmeasured: bool,
    /// Oldest first, one per `step_s`, the last still filling; `None` (null) where there was
    /// no sample.
    pub points: Vec<Option<history::Point>>,
    pub jobs: Vec<GpuJob>,
    /// Work on it that is not gantry's: processes NVML sees, a cluster's own jobs or pods.
    pub foreign: Vec<String>,
}

impl GpuHistoryView {
    /// Who is on the GPU, a phrase each: gantry's jobs with their share, then work that is not
    /// gantry's (the console's node view and `gantry fleet --node` say it alike).
    pub fn who(&self) -> Vec<String> {
        self.jobs
            .iter()
            .map(|j| {
                let run = j.run.as_ref().map_or(String::new(), |r| format!(" as {r}"));
                format!("job {} {} ({}, {}){run}", j.id, j.name, j.team, j.share)
            })
            .chain(self.foreign.iter().map(|f| format!("not gantry's: {f}")))
            .collect()
    }
}

/// A gantry job on a GPU, and how much of the GPU it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuJob {
    pub id: i64,
    pub name: String,
    pub team: String,
    /// whole, a fraction (0.50) or a MIG profile (3g.40gb).
    pub share: String,
    /// What the backend calls its run on this node (`pod NS/NAME`, `Slurm job 123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// One pool node by node and GPU by GPU, for the Fleet view's drill-down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolDetail {
    pub simulated: bool,
    pub path: String,
    pub model: String,
    pub capacity: String,
    pub dollars_per_hour: f64,
    pub nodes: Vec<NodeView>,
    /// Work the backend's own users queued for these nodes that waits there (a Slurm
    /// partition's pending jobs), with its scheduler's reasons.
    #[serde(default)]
    pub waiting: Vec<ForeignWaiting>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    /// up, provisioning, notice (spot, going), failed, absent.
    pub state: String,
    pub leaf: Option<String>,
    /// The NVLink domain (the node itself unless a rack shares one).
    pub nvlink: String,
    pub gpus: Vec<GpuView>,
    /// Beside its state: coming (ready when), a spot notice (gone when), idle (given back
    /// when).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its CPUs, memory and disk: what gantry's jobs were given, and what its agent measured.
    #[serde(default)]
    pub resources: NodeResources,
    /// Every job of gantry's on it, CPU-only ones included.
    #[serde(default)]
    pub jobs: Vec<i64>,
}

impl NodeView {
    /// One line for its CPUs, memory, disk and jobs (`NodeResources::line`).
    pub fn resources_line(&self) -> String {
        self.resources.line(&self.jobs)
    }
}

impl NodeResources {
    /// One line for a node's CPUs, memory, disk and `jobs`, as the console's pool and node
    /// views and `gantry fleet --pool` print it: `cpu 4/64 given, 12% of 64 busy · mem
    /// 32/512G given, 120/512G used · disk 40/900G used · jobs 3,7`.
    pub fn line(&self, jobs: &[i64]) -> String {
        let r = self;
        let g = |mib: u64| format!("{:.0}", mib as f64 / 1024.0);
        let mut cpu = format!("cpu {}/{} given", trim(r.cpus_allocated), trim(r.cpus));
        let mut mem = format!("mem {}/{}G given", g(r.mem_allocated_mib), g(r.mem_mib));
        let mut parts = Vec::new();
        if let Some(m) = &r.measured {
            if let Some(busy) = m.cpu_busy_pct {
                cpu.push_str(&format!(", {busy:.0}% of {} busy", m.cpus));
            }
            mem.push_str(&format!(
                ", {}/{}G used",
                g(m.mem_used_mib()),
                g(m.mem_total_mib)
            ));
            parts.push(cpu);
            parts.push(mem);
            if m.disk_total_mib > 0 {
                parts.push(format!(
                    "disk {}/{}G used",
                    g(m.disk_used_mib()),
                    g(m.disk_total_mib)
                ));
            }
        } else {
            parts.push(cpu);
            parts.push(mem);
        }
        if !jobs.is_empty() {
            let ids: Vec<String> = jobs.iter().map(i64::to_string).collect();
            parts.push(format!("jobs {}", ids.join(",")));
        }
        parts.join(" · ")
    }
}

/// `4`, `0.5`: a CPU count without trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A node's CPUs and memory as gantry allocates them, and as its host measures them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeResources {
    /// CPUs (cores) and memory (MiB) the node offers, and what gantry's jobs there hold.
    pub cpus: f64,
    pub cpus_allocated: f64,
    pub mem_mib: u64,
    pub mem_allocated_mib: u64,
    /// Measured by the host's agent (local and SSH hosts): CPUs busy, memory in use, the
    /// disk of the agent's directory; `None` where nothing measures it (simulated, Slurm,
    /// Kubernetes) or the last sample is over two minutes old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<HostUsage>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    pub index: u8,
    /// Utilization now, percent.
    pub util_pct: f64,
    /// VRAM in use (measured by NVML on a real host, modelled on the simulated fleet), what
    /// its jobs reserve, and the GPU's total, MiB.
    pub vram_used_mib: u32,
    #[serde(default)]
    pub vram_reserved_mib: u32,
    pub vram_total_mib: u32,
    /// Jobs on it (several for shares and MIG slices).
    pub jobs: Vec<i64>,
    /// MIG mode: compute slices in use of 7.
    pub mig_used: Option<u8>,
    /// Board power, watts, and temperature, °C.
    #[serde(default)]
    pub power_w: f64,
    #[serde(default)]
    pub temp_c: f64,
    /// Recent utilization samples, oldest first, percent.
    pub history: Vec<u8>,
    /// Processes on it that gantry did not start (NVML on a real host).
    #[serde(default)]
    pub foreign_pids: Vec<u32>,
    /// The work of its backend's own scheduler that holds it (a Slurm job), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<String>,
    /// A real host's GPU with no NVML measurement (no driver there, or no sample yet):
    /// utilization, power and temperature are unknown and shown as such, not modelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmeasured: bool,
}

/// What the console's caller may do at the daemon (its token's role and team).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub role: Role,
    pub team: Option<String>,
}

impl Access {
    pub fn operator() -> Access {
        Access {
            role: Role::Operator,
            team: None,
        }
    }

    /// Why this caller may not change a job of `team`, if it may not.
    pub fn forbids_job(&self, team: &str) -> Option<String> {
        use Role;
        match (self.role, &self.team) {
            (Role::Operator, _) => None,
            (Role::Researcher, Some(mine)) if mine == team => None,
            (Role::Researcher, Some(mine)) => Some(format!(
                "your researcher token may change team {mine}'s jobs only; this one is {team}'s"
            )),
            _ => Some(format!(
                "your {} token may not change jobs; ask for a researcher or operator token",
                self.role
            )),
        }
    }

    /// Why this caller may not apply a reclaim plan, if it may not.
    pub fn forbids_reclaim(&self) -> Option<String> {
        (self.role != Role::Operator).then(|| {
            format!(
                "applying a reclaim needs an operator token (yours: {})",
                self.role
            )
        })
    }
}

/// Why a call to the daemon failed, the same from either client: the daemon's own answer
/// (`Api`, with its status, code and the field of the file it is about), or why there was none.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {endpoint}: {why} (is `gantry daemon` running? `gantry info` shows the default socket)")]
    Unreachable { endpoint: String, why: String },
    #[error("{error}")]
    Api {
        status: u16,
        code: String,
        error: String,
        /// The field of a submitted file the error is about, when the daemon says.
        field: Option<String>,
    },
    #[error("daemon at {endpoint}: {why}")]
    Protocol { endpoint: String, why: String },
    /// The TLS handshake failed: the certificate is not the pinned one, or nothing trusted
    /// vouches for it.
    #[error("will not talk to {endpoint}: {why}")]
    Untrusted { endpoint: String, why: String },
    /// What this client cannot do at all (a read-only client, a console on the embedded
    /// simulated fleet asked for a shell).
    #[error("{0}")]
    Unsupported(String),
}

impl ClientError {
    /// A refusal about a field of the spec `written` (read from `file`), said at that field as
    /// the spec's own errors are (`FILE:LINE:COL: \`field\`: …`), with its line; `None` for
    /// any other error, or a field the text does not write (given on the command line).
    pub fn at_its_field(&self, file: &str, written: &str) -> Option<(usize, String)> {
        let ClientError::Api {
            field: Some(field),
            error,
            ..
        } = self
        else {
            return None;
        };
        let (line, col) = crate::spec::position_of(written, field)?;
        Some((line, format!("{file}:{line}:{col}: `{field}`: {error}")))
    }

    /// The exit code the CLI uses: 2 bad input, 3 not found, 4 not allowed, 5 unreachable,
    /// 6 conflict (the job is not in a state that allows it), 1 anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Unreachable { .. } | ClientError::Untrusted { .. } => 5,
            ClientError::Api { status, .. } => match status {
                400 | 413 | 422 => 2,
                404 => 3,
                401 | 403 => 4,
                409 => 6,
                _ => 1,
            },
            ClientError::Protocol { .. } | ClientError::Unsupported(_) => 1,
        }
    }
}

pub trait Client {
    /// Who the daemon takes this client for (the embedded console is an operator).
    fn access(&self) -> Access {
        Access::operator()
    }
    /// A shell in job `id`'s head node, on this terminal (raw, the console's screen put
    /// away): its exit status once it ends.
    fn shell(&mut self, id: i64) -> Result<i32, ClientError> {
        let _ = id;
        Err(ClientError::Unsupported("a shell needs a daemon this console is attached to (gantry console --connect …); the embedded daemon's fleet is simulated and runs no processes".to_string()))
    }
    /// Asks the daemon to change a job; the answer is one line for the status bar.
    fn act(&mut self, req: JobRequest) -> Result<String, ClientError> {
        let _ = req;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// One job in detail: spec, placement, cost, why it waits, its events.
    fn job(&mut self, id: i64) -> Result<JobView, ClientError> {
        let _ = id;
        Err(ClientError::Unsupported(
            "this client cannot show job details".to_string(),
        ))
    }
    /// A job's logs: every node's, or node `node`'s; the last lines of each stream, or what
    /// was written since a cursor (as `gantry logs -f` reads them).
    fn logs(
        &mut self,
        id: i64,
        node: Option<usize>,
        from: &LogsFrom,
    ) -> Result<LogsView, ClientError> {
        let _ = (id, node, from);
        Err(ClientError::Unsupported(
            "this client cannot show logs".to_string(),
        ))
    }
    /// Submits a job spec (YAML); the new job's id.
    fn submit(&mut self, spec: &str) -> Result<i64, ClientError> {
        let _ = spec;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// Checks a job spec and says where it would land now, without submitting it.
    fn preview(&mut self, spec: &str) -> Result<Preview, ClientError> {
        let _ = spec;
        Err(ClientError::Unsupported(
            "this client cannot preview".to_string(),
        ))
    }
    /// One pool in detail (nodes, GPUs, their jobs and utilization history), by its index in
    /// the snapshot's pool list.
    fn pool(&mut self, index: usize) -> Result<PoolDetail, ClientError> {
        let _ = index;
        Err(ClientError::Unsupported(
            "this client cannot show pool details".to_string(),
        ))
    }
    /// One node GPU by GPU over a range, by its name.
    fn node(&mut self, name: &str, range: history::Range) -> Result<NodeDetail, ClientError> {
        let _ = (name, range);
        Err(ClientError::Unsupported(
            "this client cannot show nodes".to_string(),
        ))
    }
    /// Moves a job to another priority class.
    fn set_priority(&mut self, id: i64, class: &str) -> Result<String, ClientError> {
        let _ = (id, class);
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// The idle-GPU reclaim plan; with `apply` (a plan's id), carries out exactly that plan
    /// and returns what was done and what was skipped.
    fn reclaim(
        &mut self,
        apply: Option<&str>,
    ) -> Result<crate::scheduler::reclaim::ReclaimPlan, ClientError> {
        let _ = apply;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// Brings in anything new; true when the snapshot changed.
    fn poll(&mut self) -> bool;
    fn snapshot(&self) -> &Snapshot;
    /// How long until there may be news (the console sleeps on input until then).
    fn until_next(&self) -> std::time::Duration;
    /// The daemon is out of reach: since when (local time) and why. An embedded daemon
    /// never is.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// A message about job `id`: `why` as it is when it already names the job (the daemon's
/// errors do), else prefixed with it — never `job 1: job 1: …`.
pub fn about_job(id: impl std::fmt::Display, why: &str) -> String {
    let name = format!("job {id}");
    let named = why
        .strip_prefix(&name)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()));
    if named {
        why.to_string()
    } else {
        format!("{name}: {why}")
    }
}

/// GPUs for people: whole numbers as such, shares with two decimals (0.5, 2.25).
pub fn gpus_text(gpus: f64) -> String {
    if (gpus - gpus.round()).abs() < 1e-9 {
        format!("{gpus:.0}")
    } else {
        format!("{gpus:.2}")
    }
}

#[cfg(test)]
mod about_job_tests {
    use super::about_job;

    #[test]
    fn a_message_that_names_the_job_is_not_prefixed_again() {
        assert_eq!(
            about_job(1, "job 1 is running; release applies to held jobs"),
            "job 1 is running; release applies to held jobs"
        );
        assert_eq!(
            about_job(1, "job 12: no such job"),
            "job 1: job 12: no such job"
        );
        assert_eq!(
            about_job(4, "the daemon is shutting down"),
            "job 4: the daemon is shutting down"
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Submits, and changes the jobs of its own team.
    Researcher,
    /// Everything: any job, reclaim, tokens.
    Operator,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Researcher, Role::Operator];
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Researcher => "researcher",
            Role::Operator => "operator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("unknown role `{s}`; roles: viewer, researcher, operator"))
    }
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

/// One run of a job (an attempt): where, when, how it ended, what it cost — what `gantry job`
/// and `gantry history` show of each.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RunRecord {
    pub job: JobId,
    /// 1 for the first run, then each start again.
    pub attempt: u32,
    pub nodes: Vec<String>,
    pub gpus: f64,
    pub capacity: String,
    pub dollars_per_hour: f64,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// The moves that ended it, with their reasons (`preempting: preempted by …; pending:
    /// stopped; requeued from its checkpoint`); `None` while it runs.
    pub ended: Option<String>,
    /// RFC 3339, filled in by the state.
    #[serde(default)]
    pub started: String,
    #[serde(default)]
    pub ended_time: Option<String>,
}

impl RunRecord {
    /// What it cost (so far, at `now`, for one that runs).
    pub fn cost(&self, now: f64) -> f64 {
        self.dollars_per_hour * (self.ended_at.unwrap_or(now) - self.started_at).max(0.0) / 3600.0
    }
}

/// Work a backend's own scheduler holds waiting for a pool's nodes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForeignWaiting {
    /// What it is (`Slurm job 14 "sweep" of bob, account ml`).
    pub what: String,
    /// GPUs it asks for, over all its nodes, and on how many nodes.
    pub gpus: u32,
    pub nodes: u32,
    /// Why it waits, in gantry's words (with the scheduler's own code).
    pub reason: String,
}

/// One sample of a host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostUsage {
    /// Logical CPUs the kernel lists.
    pub cpus: u32,
    /// Of all CPUs' time since the last sample, the part not idle, percent (`None` on the
    /// first sample: there is no interval yet).
    pub cpu_busy_pct: Option<f64>,
    pub mem_total_mib: u64,
    /// What new work could use without swapping (the kernel's MemAvailable).
    pub mem_available_mib: u64,
    /// The filesystem measured (the agent's directory) and its size and free space.
    pub disk_path: String,
    pub disk_total_mib: u64,
    pub disk_free_mib: u64,
}

impl HostUsage {
    pub fn mem_used_mib(&self) -> u64 {
        self.mem_total_mib.saturating_sub(self.mem_available_mib)
    }
    pub fn disk_used_mib(&self) -> u64 {
        self.disk_total_mib.saturating_sub(self.disk_free_mib)
    }
}

/// The largest request body accepted (a job spec is a few KiB).
pub const MAX_BODY: usize = 1 << 20;
