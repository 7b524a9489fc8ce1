//! Each job's runs as the journal keeps them (a charge is one run: its nodes, start, end, how
//! it ended, its price), and the finished jobs an auditor asks for (`gantry history`): read
//! from the journal, not from the daemon's window of recent jobs.

use super::*;

/// Which jobs `history` lists: those whose last change falls in `[since, until)` on the
/// daemon's clock, of `team` (any if `None`), in one of `states` (the final ones if empty),
/// newest first, `limit` of them after skipping `offset`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HistoryQuery {
    pub since: f64,
    pub until: f64,
    pub team: Option<String>,
    /// Submitted by.
    pub user: Option<String>,
    pub states: Vec<JobState>,
    pub limit: usize,
    pub offset: usize,
}

/// One submitted job's queueing, as `report` counts it: its team and class, when it was
/// submitted, when it first started (`None`: never), its runs and how many were preempted.
#[derive(Clone, Debug, PartialEq)]
pub struct Queued {
    pub team: String,
    pub class: String,
    pub submitted_at: f64,
    pub first_start: Option<f64>,
    pub runs: u32,
    pub preempted: u32,
}

/// A completed job's kind and how long it ran in all (its runs' lengths summed).
#[derive(Clone, Debug, PartialEq)]
pub struct RunLength {
    pub user: Option<String>,
    pub name: Option<String>,
    pub team: String,
    pub class: String,
    pub time_limit_s: Option<f64>,
    pub seconds: f64,
}

impl Store {
    /// The newest `limit` completed jobs' run lengths, newest first.
    pub fn completed_lengths(&self, limit: usize) -> Result<Vec<RunLength>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(
                "SELECT j.user, j.name, j.team, j.priority,
                        CASE WHEN json_valid(j.spec)
                              AND json_type(j.spec, '$.time_limit_s') IN ('integer', 'real')
                             THEN json_extract(j.spec, '$.time_limit_s') END,
                        (SELECT SUM(c.ended_at - c.started_at) FROM charges c
                         WHERE c.job = j.id AND c.ended_at IS NOT NULL)
                 FROM jobs j WHERE j.state = 'completed' ORDER BY j.id DESC LIMIT ?1",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map([limit as i64], |r| {
                Ok(RunLength {
                    user: r.get(0)?,
                    name: r.get(1)?,
                    team: r.get(2)?,
                    class: r.get(3)?,
                    time_limit_s: r.get(4)?,
                    seconds: r.get::<_, Option<f64>>(5)?.unwrap_or(0.0),
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    /// The jobs submitted in `[since, until)`, with their first start and runs.
    pub fn queued(&self, since: f64, until: f64) -> Result<Vec<Queued>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(
                "SELECT j.team, j.priority, j.submitted_at,
                        (SELECT MIN(c.started_at) FROM charges c WHERE c.job = j.id),
                        (SELECT COUNT(*) FROM charges c WHERE c.job = j.id),
                        (SELECT COUNT(*) FROM charges c WHERE c.job = j.id AND c.ended LIKE 'preempting:%')
                 FROM jobs j WHERE j.submitted_at >= ?1 AND j.submitted_at < ?2",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map(params![since, until], |r| {
                Ok(Queued {
                    team: r.get(0)?,
                    class: r.get(1)?,
                    submitted_at: r.get(2)?,
                    first_start: r.get(3)?,
                    runs: r.get(4)?,
                    preempted: r.get(5)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    /// A job's runs, oldest first.
    pub fn runs(&self, job: JobId) -> Result<Vec<RunRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(
                "SELECT capacity, gpus, dollars_per_hour, started_at, ended_at, nodes, ended
                 FROM charges WHERE job = ?1 ORDER BY started_at, rowid",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map([job], |r| {
                let nodes: Option<String> = r.get(5)?;
                Ok(RunRecord {
                    job,
                    attempt: 0,
                    capacity: r.get(0)?,
                    gpus: r.get(1)?,
                    dollars_per_hour: r.get(2)?,
                    started_at: r.get(3)?,
                    ended_at: r.get(4)?,
                    nodes: nodes
                        .filter(|n| !n.is_empty())
                        .map(|n| n.split(',').map(str::to_string).collect())
                        .unwrap_or_default(),
                    ended: r.get(6)?,
                    started: String::new(),
                    ended_time: None,
                })
            })
            .map_err(self.sql())?;
        let mut runs = rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())?;
        for (k, r) in runs.iter_mut().enumerate() {
            r.attempt = k as u32 + 1;
        }
        Ok(runs)
    }

    /// The jobs `q` asks for, newest change first, without their specs.
    pub fn history(&self, q: &HistoryQuery) -> Result<Vec<JobRecord>, JournalError> {
        let states: Vec<&str> = if q.states.is_empty() {
            vec!["completed", "failed", "cancelled"]
        } else {
            q.states.iter().map(|s| s.name()).collect()
        };
        // The states are this build's own names, never the caller's text.
        let list = states
            .iter()
            .map(|s| format!("'{s}'"))
            .collect::<Vec<_>>()
            .join(", ");
        let tail = format!(
            "WHERE state IN ({list}) AND updated_at >= ?1 AND updated_at < ?2 AND (?3 IS NULL OR team = ?3)
             AND (?6 IS NULL OR user = ?6)
             ORDER BY updated_at DESC, id DESC LIMIT ?4 OFFSET ?5"
        );
        // The specs stay in the journal: a history row has none (`gantry job ID` reads one).
        self.select_jobs_with(
            "'' AS spec",
            &tail,
            params![
                q.since,
                q.until,
                q.team,
                i64::try_from(q.limit).unwrap_or(i64::MAX),
                i64::try_from(q.offset).unwrap_or(i64::MAX),
                q.user
            ],
        )
    }
}
