//! The one interface the console (and later the CLI) uses to reach a daemon. The console
//! renders `Snapshot`s only, so an embedded daemon and a remote one look the same to it.

use serde::Serialize;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobRow {
    pub id: i64,
    pub name: String,
    pub team: String,
    pub class: String,
    pub state: String,
    /// GPUs, as text ("8×H100", "0.5", "3g.40gb").
    pub gpus: String,
    /// Seconds since submission (pending) or since start (running).
    pub age_s: f64,
    /// Queue position, for pending jobs.
    pub position: Option<usize>,
    /// Why it waits, or where it runs.
    pub detail: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
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
    pub running: usize,
    pub pending: usize,
    /// $/h of its running jobs.
    pub burn_per_hour: f64,
    pub budget_monthly_usd: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    /// The data come from the simulated fleet (labelled everywhere it shows).
    pub simulated: bool,
    /// Seconds on the daemon's clock.
    pub now: f64,
    pub pools: Vec<PoolRow>,
    pub gpus_total: usize,
    pub gpus_busy: usize,
    pub dollars_per_hour: f64,
    /// $/h of GPUs that nobody uses.
    pub idle_dollars_per_hour: f64,
    pub jobs: Vec<JobRow>,
    /// Pending jobs per priority class, highest class first.
    pub queue_by_class: Vec<(String, usize)>,
    pub teams: Vec<TeamRow>,
    /// Most recent first.
    pub events: Vec<String>,
}

pub trait Client {
    /// Brings in anything new; true when the snapshot changed.
    fn poll(&mut self) -> bool;
    fn snapshot(&self) -> &Snapshot;
    /// How long until there may be news (the console sleeps on input until then).
    fn until_next(&self) -> std::time::Duration;
}
