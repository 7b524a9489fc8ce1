//! What the experiment tracker owes the jobs that name an experiment: one row per such job,
//! written with the job. The row is the tracker's queue: what is owed is the job's state in
//! the journal against the state last sent, so updates never pile up (a job has one row
//! however long the server is down) and a restarted daemon sends what its predecessor could
//! not.

use super::*;

/// A job's report to the experiment tracker, as far as it got.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportRecord {
    pub job: JobId,
    /// The run made for it after submit (one made at submit is in its spec's envs).
    pub run: Option<String>,
    pub experiment_id: Option<String>,
    /// The job state last sent (`None`: nothing yet, not even its tags).
    pub sent: Option<JobState>,
    /// Its end was sent: nothing more is owed.
    pub done: bool,
}

fn read(r: &rusqlite::Row) -> rusqlite::Result<ReportRecord> {
    let sent: String = r.get(3)?;
    Ok(ReportRecord {
        job: r.get(0)?,
        run: r.get(1)?,
        experiment_id: r.get(2)?,
        sent: JobState::ALL.into_iter().find(|s| s.name() == sent),
        done: r.get::<_, i64>(4)? != 0,
    })
}

impl Store {
    /// The reports not done, oldest job first, at most `limit`.
    pub fn owed_reports(&self, limit: usize) -> Result<Vec<ReportRecord>, JournalError> {
        let mut s = self
            .conn
            .prepare_cached(
                "SELECT job, run, experiment_id, sent, done FROM experiment_reports WHERE done = 0 ORDER BY job LIMIT ?1",
            )
            .map_err(self.sql())?;
        let rows = s
            .query_map([limit as i64], read)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
            .map_err(self.sql())?;
        Ok(rows)
    }

    /// Job `job`'s report, where it names an experiment.
    pub fn report(&self, job: JobId) -> Result<Option<ReportRecord>, JournalError> {
        self.conn
            .prepare_cached(
                "SELECT job, run, experiment_id, sent, done FROM experiment_reports WHERE job = ?1",
            )
            .and_then(|mut s| s.query_row([job], read).optional())
            .map_err(self.sql())
    }

    /// What the tracker sent: the run it made (kept where it made none now), the state, and
    /// whether that was the end.
    pub fn report_sent(&mut self, r: &ReportRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "UPDATE experiment_reports SET run = COALESCE(?2, run), experiment_id = COALESCE(?3, experiment_id), sent = ?4, done = ?5 WHERE job = ?1",
                params![
                    r.job,
                    r.run,
                    r.experiment_id,
                    r.sent.map_or("", |s| s.name()),
                    i64::from(r.done)
                ],
            )
            .map_err(self.sql())?;
        Ok(())
    }
}
