//! What the console renders: a daemon's whole state as one `Snapshot`, and the
//! `SnapshotDelta`s a remote console follows it by.

use super::services;
use super::IdleNow;
use serde::{Deserialize, Serialize};

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
    /// Nodes down for repair (on-prem: still paid), or lost for another reason.
    #[serde(default)]
    pub down: usize,
    /// Nodes whose host cannot be reached right now (no new work goes there; lost
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
    /// The experiment its run is reported to (`experiment:`, `MLFLOW_EXPERIMENT_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
    /// When it will start, for a waiting job (boxed: only waiting jobs have one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<Box<crate::api::Eta>>,
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
    /// Fair share: the GPU-hours its jobs held, an hour a week ago counting half (the
    /// half-life), as the daemon counts it. Within a priority class the queue goes by this
    /// over `weight`, least first.
    #[serde(default)]
    pub usage_gpu_hours: f64,
    /// Where that puts the team among all teams: 1 goes first within a class.
    #[serde(default)]
    pub fair_share_rank: usize,
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
    pub jobs: Vec<std::sync::Arc<JobRow>>,
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
    /// The MLflow tracking server jobs' runs are reported to (`[mlflow] tracking_uri`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlflow: Option<String>,
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
    pub jobs_changed: Vec<std::sync::Arc<JobRow>>,
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
        let old: std::collections::HashMap<i64, &std::sync::Arc<JobRow>> =
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
        let mut rows: std::collections::HashMap<i64, std::sync::Arc<JobRow>> =
            std::mem::take(&mut self.jobs)
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

/// The fleet now: `GET /v1/fleet`, `gantry fleet` against a daemon — the snapshot's totals,
/// pools, idle GPUs by cause and this host's GPU status.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetView {
    pub simulated: bool,
    pub calendar: CalendarNow,
    pub gpus_total: usize,
    pub gpus_busy: usize,
    pub dollars_per_hour: f64,
    pub idle_dollars_per_hour: f64,
    pub idle_by_cause: Vec<IdleNow>,
    pub pools: Vec<PoolRow>,
    pub host: Option<HostStatus>,
}

impl FleetView {
    /// The fleet part of snapshot `s`.
    pub fn of(s: &Snapshot) -> FleetView {
        FleetView {
            simulated: s.simulated,
            calendar: s.calendar.clone(),
            gpus_total: s.gpus_total,
            gpus_busy: s.gpus_busy,
            dollars_per_hour: s.dollars_per_hour,
            idle_dollars_per_hour: s.idle_dollars_per_hour,
            idle_by_cause: s.idle_by_cause.clone(),
            pools: s.pools.clone(),
            host: s.host.clone(),
        }
    }
}

/// Whether the daemon answers, and its clock (`GET /v1/health`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Health {
    pub ok: bool,
    pub version: String,
    pub simulated: bool,
    /// Seconds on the daemon's clock.
    pub now: f64,
    pub snapshot_version: u64,
}
