//! The journal's side tables: API tokens, events, the clock, local runs and the charges
//! reports are made of.

use super::*;

/// A team's finished spend (`closed_spend_by_team`): team, dollars and GPU-hours inside the
/// window, the same runs' whole dollars.
/// A team's and project's (`None`: none) dollars and GPU-hours in a window, and the whole
/// dollars of those runs.
pub type TeamSpend = (String, Option<String>, f64, f64, f64);

/// Billed runs that overlap `[?1, ?2)`, open ones counting up to `?3` (now). What
/// `COALESCE(ended_at, ?3) > ?1` says, written so that each side of the OR reads the index on
/// `ended_at` (a COALESCE no index answers: every run ever billed was read), so a journal of
/// years reads only the window asked for.
const OVERLAPS: &str = "started_at < ?2 AND (ended_at > ?1 OR (ended_at IS NULL AND ?3 > ?1))";

/// Each such run's team, GPUs and span.
fn gpu_time_sql() -> String {
    format!("SELECT team, gpus, started_at, COALESCE(ended_at, ?3) FROM charges WHERE {OVERLAPS}")
}

/// Each such run in full, in order.
fn charges_sql() -> String {
    format!(
        "SELECT job, team, project, capacity, gpus, dollars_per_hour, started_at, COALESCE(ended_at, ?3)
         FROM charges WHERE {OVERLAPS} ORDER BY started_at, job"
    )
}

impl Store {
    pub fn add_token(&mut self, t: &TokenRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT INTO tokens (hash, role, team, label, created_at, expires_at, revoked_at, user) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![t.hash, t.role, t.team, t.label, t.created_at, t.expires_at, t.revoked_at, t.user],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    pub fn tokens(&self) -> Result<Vec<TokenRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT hash, role, team, label, created_at, expires_at, revoked_at, user FROM tokens ORDER BY created_at")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(TokenRecord {
                    hash: r.get(0)?,
                    role: r.get(1)?,
                    team: r.get(2)?,
                    label: r.get(3)?,
                    created_at: r.get(4)?,
                    expires_at: r.get(5)?,
                    revoked_at: r.get(6)?,
                    user: r.get(7)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// Marks the token whose hash is `hash` revoked at `at`.
    pub fn revoke_token(&mut self, hash: &str, at: f64) -> Result<(), JournalError> {
        self.conn
            .execute(
                "UPDATE tokens SET revoked_at = ?2 WHERE hash = ?1 AND revoked_at IS NULL",
                params![hash, at],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// Records an event that is not a job transition (scaling, reclaim, restarts).
    pub fn add_event(
        &mut self,
        at: f64,
        job: Option<JobId>,
        kind: &str,
        detail: &str,
    ) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT INTO events (at, job, kind, detail) VALUES (?1, ?2, ?3, ?4)",
                params![at, job, kind, detail],
            )
            .map_err(self.sql())?;
        Ok(())
    }

    /// The text of every event of `kind` at or after `since`, oldest first.
    pub fn event_details(&self, kind: &str, since: f64) -> Result<Vec<String>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT detail FROM events WHERE kind = ?1 AND at >= ?2 ORDER BY seq")
            .map_err(self.sql())?;
        let rows = q
            .query_map(params![kind, since], |r| r.get(0))
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    /// The newest `limit` events (of one job, if given), oldest first.
    pub fn events(
        &self,
        job: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare(
                "SELECT seq, at, job, kind, detail FROM events
                 WHERE ?1 IS NULL OR job = ?1 ORDER BY seq DESC LIMIT ?2",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map(params![job, limit as i64], |r| {
                Ok(EventRecord {
                    seq: r.get(0)?,
                    at: r.get(1)?,
                    time: String::new(),
                    job: r.get(2)?,
                    kind: r.get(3)?,
                    detail: r.get(4)?,
                })
            })
            .map_err(self.sql())?;
        let mut out: Vec<EventRecord> = rows.collect::<Result<_, _>>().map_err(self.sql())?;
        out.reverse();
        Ok(out)
    }

    /// The reason journaled with a job's latest move to `state` (`from → to: why`).
    pub fn last_move_to(&self, id: JobId, state: JobState) -> Result<Option<String>, JournalError> {
        match self.conn.query_row(
            "SELECT detail FROM events WHERE job = ?1 AND kind = ?2 ORDER BY seq DESC LIMIT 1",
            params![id, state.name()],
            |r| r.get(0),
        ) {
            Ok(d) => Ok(Some(d)),
            Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
            Err(e) => Err(self.sql()(e)),
        }
    }

    /// The latest time the journal has seen: a restarted daemon's clock resumes from here.
    pub fn last_time(&self) -> Result<f64, JournalError> {
        self.conn
            .query_row(
                "SELECT MAX(m) FROM (SELECT MAX(updated_at) AS m FROM jobs UNION ALL SELECT MAX(at) FROM events UNION ALL SELECT at FROM clock)",
                [],
                |r| r.get::<_, Option<f64>>(0),
            )
            .map(|t| t.unwrap_or(0.0))
            .map_err(self.sql())
    }

    /// Records how far the daemon's clock has come, so that a restart resumes there and bills
    /// runs that were open up to it (not just up to the last state change).
    pub fn save_clock(&mut self, at: f64) -> Result<(), JournalError> {
        self.conn
            .prepare_cached("INSERT INTO clock (id, at) VALUES (1, ?1) ON CONFLICT(id) DO UPDATE SET at = MAX(at, ?1)")
            .and_then(|mut q| q.execute([at]))
            .map(|_| ())
            .map_err(self.sql())
    }

    /// Where the daemon's starts pinned its clock to the wall clock.
    pub fn calendar_anchors(&self) -> Result<Vec<crate::daemon::calendar::Anchor>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached("SELECT clock, unix FROM calendar ORDER BY clock")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(crate::daemon::calendar::Anchor {
                    clock: r.get(0)?,
                    unix: r.get(1)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<_, _>>().map_err(self.sql())
    }

    pub fn add_calendar_anchor(
        &mut self,
        a: crate::daemon::calendar::Anchor,
    ) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO calendar (clock, unix) VALUES (?1, ?2)",
                params![a.clock, a.unix],
            )
            .map(|_| ())
            .map_err(self.sql())
    }

    /// A local job's process group started (so a restarted daemon can find it).
    pub fn add_local_run(&mut self, run: &LocalRunRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO local_runs (job, pgid, placement, started_at, token) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![run.job, run.pgid, run.placement, run.started_at, run.token],
            )
            .map(|_| ())
            .map_err(self.sql())
    }

    pub fn remove_local_run(&mut self, job: JobId) -> Result<(), JournalError> {
        self.conn
            .execute("DELETE FROM local_runs WHERE job = ?1", [job])
            .map(|_| ())
            .map_err(self.sql())
    }

    /// The local runs the journal knows, by job.
    pub fn local_runs(&self) -> Result<Vec<LocalRunRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare("SELECT job, pgid, placement, started_at, token FROM local_runs ORDER BY job")
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(LocalRunRecord {
                    job: r.get(0)?,
                    pgid: r.get(1)?,
                    placement: r.get(2)?,
                    started_at: r.get(3)?,
                    token: r.get(4)?,
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    /// A job's processes were handed to a remote backend.
    pub fn add_remote_run(&mut self, run: &RemoteRunRecord) -> Result<(), JournalError> {
        self.conn
            .execute(
                "INSERT OR REPLACE INTO remote_runs (job, token, placement, started_at, nodes) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    run.job,
                    run.token,
                    run.placement,
                    run.started_at,
                    run.nodes.as_ref().and_then(|n| serde_json::to_string(n).ok())
                ],
            )
            .map(|_| ())
            .map_err(self.sql())
    }

    pub fn remove_remote_run(&mut self, job: JobId) -> Result<(), JournalError> {
        self.conn
            .execute("DELETE FROM remote_runs WHERE job = ?1", [job])
            .map(|_| ())
            .map_err(self.sql())
    }

    /// The remote runs the journal knows, by job.
    pub fn remote_runs(&self) -> Result<Vec<RemoteRunRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare(
                "SELECT job, token, placement, started_at, nodes FROM remote_runs ORDER BY job",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map([], |r| {
                Ok(RemoteRunRecord {
                    job: r.get(0)?,
                    token: r.get(1)?,
                    placement: r.get(2)?,
                    started_at: r.get(3)?,
                    nodes: r
                        .get::<_, Option<String>>(4)?
                        .and_then(|n| serde_json::from_str(&n).ok()),
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    pub fn event_count(&self) -> Result<i64, JournalError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM events", [], |r| r.get(0))
            .map_err(self.sql())
    }

    /// Every job, in submission order: what a restarted daemon starts from.
    /// Per team and project: dollars and GPU-hours of finished runs inside `[since, ∞)`, and
    /// the whole dollars of those runs (their parts before `since` too).
    pub fn closed_spend(&self, since: f64) -> Result<Vec<TeamSpend>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(
                "SELECT team, project, SUM((ended_at - MAX(started_at, ?1)) * dollars_per_hour / 3600.0),
                        SUM((ended_at - MAX(started_at, ?1)) * gpus / 3600.0),
                        SUM((ended_at - started_at) * dollars_per_hour / 3600.0)
                 FROM charges WHERE ended_at IS NOT NULL AND ended_at > ?1 GROUP BY team, project",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map([since], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    /// Per team and project, the whole spend of the runs that ended by `until` (with the last
    /// column of `closed_spend(until)`: every finished run once, whole).
    pub fn spend_before(
        &self,
        until: f64,
    ) -> Result<Vec<(String, Option<String>, f64)>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(
                "SELECT team, project, SUM((ended_at - started_at) * dollars_per_hour / 3600.0)
                 FROM charges WHERE ended_at IS NOT NULL AND ended_at <= ?1 GROUP BY team, project",
            )
            .map_err(self.sql())?;
        let rows = q
            .query_map([until], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>().map_err(self.sql())
    }

    /// The plans of `each_gpu_time`'s and `charges`' queries (a test holds them to the index).
    #[cfg(test)]
    pub(super) fn window_plans(&self) -> Result<String, JournalError> {
        let mut steps = Vec::new();
        for sql in [gpu_time_sql(), charges_sql()] {
            let mut q = self
                .conn
                .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
                .map_err(self.sql())?;
            let rows = q
                .query_map(params![0.0, 1.0, 1.0], |r| r.get::<_, String>(3))
                .map_err(self.sql())?;
            for r in rows {
                steps.push(r.map_err(self.sql())?);
            }
        }
        Ok(steps.join("; "))
    }

    /// Each billed run that overlaps `[since, now)` as (team, GPUs, from, to), clipped to it,
    /// handed to `each` as it is read: fair share's usage at open reads twenty weeks of runs,
    /// and holds none of them (open runs count up to `now`).
    pub fn each_gpu_time(
        &self,
        since: f64,
        now: f64,
        each: &mut dyn FnMut(&str, f64, f64, f64),
    ) -> Result<(), JournalError> {
        let mut q = self
            .conn
            .prepare_cached(&gpu_time_sql())
            .map_err(self.sql())?;
        let mut rows = q.query(params![since, now, now]).map_err(self.sql())?;
        while let Some(r) = rows.next().map_err(self.sql())? {
            let team = r.get_ref(0).map_err(self.sql())?.as_str().unwrap_or("");
            let gpus: f64 = r.get(1).map_err(self.sql())?;
            let from = r.get::<_, f64>(2).map_err(self.sql())?.max(since);
            let to = r.get::<_, f64>(3).map_err(self.sql())?.min(now);
            if to > from {
                each(team, gpus, from, to);
            }
        }
        Ok(())
    }

    /// Billed runs that overlap `[since, until)`, clipped to it; open runs bill up to `now`.
    pub fn charges(
        &self,
        since: f64,
        until: f64,
        now: f64,
    ) -> Result<Vec<ChargeRecord>, JournalError> {
        let mut q = self
            .conn
            .prepare_cached(&charges_sql())
            .map_err(self.sql())?;
        let rows = q
            .query_map(params![since, until, now], |r| {
                Ok(ChargeRecord {
                    job: r.get(0)?,
                    team: r.get(1)?,
                    project: r.get(2)?,
                    capacity: r.get(3)?,
                    gpus: r.get(4)?,
                    dollars_per_hour: r.get(5)?,
                    from: r.get::<_, f64>(6)?.max(since),
                    to: r.get::<_, f64>(7)?.min(until),
                })
            })
            .map_err(self.sql())?;
        rows.collect::<Result<Vec<_>, _>>()
            .map_err(self.sql())
            .map(|v| v.into_iter().filter(|c| c.to > c.from).collect())
    }
}
