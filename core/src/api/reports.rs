//! What the bill and the record say: `gantry report`'s spend by team, project, job, user or
//! experiment
//! with each team's queueing (`GET /v1/report`), and `gantry history`'s finished jobs with
//! their runs (`GET /v1/history`) — the types the daemon writes and the CLI reads.

use super::{JobId, JobState, RunRecord};
use serde::{Deserialize, Serialize};

/// How `gantry report` groups the bill.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReportBy {
    Team,
    Project,
    Job,
    /// Who submitted the jobs.
    User,
    /// The experiment the jobs report to (`experiment:`, `MLFLOW_EXPERIMENT_NAME`).
    Experiment,
}

impl ReportBy {
    pub fn parse(s: &str) -> Option<ReportBy> {
        match s {
            "team" => Some(ReportBy::Team),
            "project" => Some(ReportBy::Project),
            "job" => Some(ReportBy::Job),
            "user" => Some(ReportBy::User),
            "experiment" => Some(ReportBy::Experiment),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub simulated: bool,
    /// The window, seconds on the daemon's clock.
    pub since: f64,
    pub until: f64,
    /// The same on the calendar, RFC 3339 in the fleet's time zone.
    pub since_time: String,
    pub until_time: String,
    pub by: ReportBy,
    pub total_usd: f64,
    pub total_gpu_hours: f64,
    pub rows: Vec<ReportRow>,
    /// How long each team's jobs of each class waited for their first start, and how often
    /// their runs were preempted: the jobs submitted in the window, from the journal.
    pub queues: Vec<QueueRow>,
}

/// One team's and class's queueing over a report's window.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueRow {
    pub team: String,
    pub class: String,
    /// Jobs submitted in the window, and how many of them have started.
    pub jobs: u32,
    pub started: u32,
    /// Submission to first start, seconds, over the jobs that started.
    pub wait_mean_s: f64,
    pub wait_p50_s: f64,
    pub wait_p90_s: f64,
    /// Their runs, and of those the ones preempted (by the scheduler, an operator, a spot
    /// notice): preempted / runs.
    pub runs: u32,
    pub preempted: u32,
    pub preemption_rate: f64,
}

/// A finished job as `gantry history` lists it, with its runs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HistoryJob {
    pub id: JobId,
    pub name: Option<String>,
    pub user: Option<String>,
    pub team: String,
    pub class: String,
    pub state: JobState,
    /// RFC 3339: when it was submitted and when it last changed (ended, for a final job).
    pub submitted: String,
    pub ended: String,
    pub cost_usd: f64,
    pub runs: Vec<RunRecord>,
}
