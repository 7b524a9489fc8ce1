//! A job's own failures (an exit code, a signal — not a preemption, a spot loss or a lost
//! host): it fails, unless its spec asks for restarts (`resources.job_recovery`:
//! `max_restarts_on_errors`, `recover_on_exit_codes`). A restart requeues the job and holds it
//! for a backoff that doubles from 5 s to 5 minutes; the daemon releases it when that is over.
//! Each restart is a move in the journal (`… restart 2 of 3 in 10s: …`), so the count and a
//! backoff under way survive a daemon restart: a restarted daemon releases a held job when its
//! backoff, counted on the calendar from the journaled hold, is over — never sooner, however
//! often the daemon restarts meanwhile.

use crate::api::JobState;
use crate::backend::Exit;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::state::cx::Cx;
use std::collections::HashMap;

/// The first backoff, seconds; doubled at each restart up to `BACKOFF_MAX_S`.
const BACKOFF_FIRST_S: f64 = 5.0;
const BACKOFF_MAX_S: f64 = 300.0;
/// What a restart's move says: counted from the journal.
const RESTART: &str = "restart ";
/// What its hold says: released once the backoff is over (at once after a daemon restart).
const BACKOFF: &str = "backoff before restart ";

/// Restarts per job, and when held ones are released.
#[derive(Default)]
pub(in crate::daemon::state) struct Restarts {
    counts: HashMap<JobId, u32>,
    release_at: HashMap<JobId, f64>,
}

impl Restarts {
    /// Restarts of job `id` known to this daemon (0 for one it has not had to count).
    pub(in crate::daemon::state) fn count(&self, id: JobId) -> u32 {
        self.counts.get(&id).copied().unwrap_or(0)
    }

    /// What a job's end adds about its restarts: `; after 2 restarts`, or nothing.
    pub(in crate::daemon::state) fn said(&self, id: JobId) -> String {
        match self.counts.get(&id) {
            Some(&n) if n > 0 => format!("; after {n} restart{}", if n == 1 { "" } else { "s" }),
            _ => String::new(),
        }
    }
}

/// The backoff before restart `n` (1 for the first): doubling from 5 s, at most 5 minutes.
fn backoff_before(n: u32) -> f64 {
    (BACKOFF_FIRST_S * 2f64.powi(n.saturating_sub(1).min(16) as i32)).min(BACKOFF_MAX_S)
}

impl Restarts {
    /// Restarts job `id` has had (read from the journal the first time).
    fn restarts_of(&mut self, cx: &mut Cx, id: JobId) -> Result<u32, EngineError> {
        if let Some(&n) = self.counts.get(&id) {
            return Ok(n);
        }
        let n = cx
            .engine
            .events(Some(id), 10_000)?
            .iter()
            .filter(|e| e.kind == "pending" && e.detail.contains(&format!(": {RESTART}")))
            .count() as u32;
        self.counts.insert(id, n);
        Ok(n)
    }

    /// Whether job `id`, a node of which ended with `exit` (`what` says which and how), is
    /// restarted; if so it is (requeued and held for its backoff), and said.
    pub(in crate::daemon::state) fn restarted(
        &mut self,
        cx: &mut Cx,
        id: JobId,
        exit: Exit,
        what: &str,
    ) -> Result<bool, EngineError> {
        let Some(recovery) = cx.engine.job(id).map(|j| j.spec.recovery.clone()) else {
            return Ok(false);
        };
        let code = match exit {
            Exit::Code(c) => c,
            Exit::Signal(s) => 128 + s,
            Exit::Unknown => return Ok(false),
        };
        let done = self.restarts_of(cx, id)?;
        let listed = recovery.recover_on_exit_codes.contains(&code);
        let allowed = done < recovery.max_restarts_on_errors || listed;
        if !allowed || done >= crate::spec::RESTARTS_MAX {
            return Ok(false);
        }
        let n = done + 1;
        let backoff = backoff_before(n);
        let of = if listed {
            format!("(exit code {code} is in recover_on_exit_codes)")
        } else {
            format!("of {}", recovery.max_restarts_on_errors)
        };
        cx.engine.lost(
            id,
            cx.now,
            &format!(
                "{RESTART}{n} {of} in {}: {what}",
                super::super::nodes::span(backoff)
            ),
        )?;
        cx.engine
            .hold_because(id, cx.now, &format!("{BACKOFF}{n}"))?;
        self.counts.insert(id, n);
        self.release_at.insert(id, cx.now + backoff);
        Ok(true)
    }

    /// Releases the jobs whose backoff is over (and, after a daemon restart, those it left
    /// held for one).
    pub(in crate::daemon::state) fn release_due(&mut self, cx: &mut Cx) -> Result<(), EngineError> {
        let due: Vec<JobId> = self
            .release_at
            .iter()
            .filter(|(_, &at)| at <= cx.now)
            .map(|(id, _)| *id)
            .collect();
        for id in due {
            self.release_at.remove(&id);
            if cx.engine.job(id).map(|j| j.state) == Some(JobState::Held) {
                cx.engine
                    .release_because(id, cx.now, "backoff over: restarting")?;
            }
        }
        Ok(())
    }

    /// At open: jobs held for a backoff when the daemon stopped are released when it is over
    /// (its hold's calendar time and length are in the journal; the time the daemon was down
    /// counts, and a backoff already over releases at the first step).
    pub(in crate::daemon::state) fn resume(&mut self, cx: &mut Cx) -> Result<(), EngineError> {
        let held: Vec<JobId> = cx
            .engine
            .jobs()
            .filter(|j| j.state == JobState::Held)
            .map(|j| j.id)
            .collect();
        for id in held {
            let last = cx.engine.events(Some(id), 1)?;
            let Some(e) = last.last().filter(|e| e.kind == "held") else {
                continue;
            };
            let Some(n) = e
                .detail
                .split_once(&format!(": {BACKOFF}"))
                .and_then(|(_, n)| n.trim().parse::<u32>().ok())
            else {
                continue;
            };
            let over = cx
                .calendar
                .clock(cx.calendar.unix(e.at) + backoff_before(n));
            self.release_at.insert(id, over.max(cx.now));
        }
        Ok(())
    }
}
