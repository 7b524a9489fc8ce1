//! What anyone asks of jobs — a client through the API, a service for its replicas, a backend's
//! users for work they want placed: admit, preview, cancel, hold, release, preempt,
//! reprioritize. Borrowed from the state's parts, so that a component asking for a job (the
//! services) needs no `State`.

use super::counters::Counters;
use super::cx::Cx;
use super::runs::Runs;
use crate::api::Action;
use crate::daemon::engine::{EngineError, Submission};
use crate::daemon::journal::JobId;

pub(super) struct Desk<'a> {
    pub cx: Cx<'a>,
    pub runs: &'a mut Runs,
    pub counters: &'a mut Counters,
    /// Team and class names, in the engine's order.
    pub teams: &'a [String],
    pub classes: &'a [String],
}

impl Desk<'_> {
    /// Admits submissions with one commit; each gets its own answer.
    pub(super) fn submit(&mut self, batch: &[Submission]) -> Vec<Result<JobId, EngineError>> {
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
        let out = self.cx.engine.submit_batch(batch, self.cx.now);
        let replayed = self.cx.engine.replayed().to_vec();
        for (r, s) in out.iter().zip(batch) {
            if let Some(id) = r.as_ref().ok().filter(|id| !replayed.contains(id)) {
                let team = s
                    .team
                    .clone()
                    .or_else(|| self.cx.engine.job(*id).map(|j| self.team_name(j.team)))
                    .unwrap_or_default();
                let name = self
                    .cx
                    .engine
                    .job(*id)
                    .and_then(|j| j.name.clone())
                    .unwrap_or_default();
                self.cx.log(format!("job {id} {name} submitted by {team}"));
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
        if root && s.user.is_none() && !s.from_backend && self.runs.on_daemon_host() {
            return Some(EngineError::Forbidden("this caller names no Unix user (a token made without --user), and this daemon runs as root with a pool on its own host, where a job's processes run as its owner: it starts nothing as root for a caller it cannot name. Ask an operator for a token made with `gantry token create --user NAME`".to_string()));
        }
        if s.from_backend || self.runs.real_nodes().is_empty() {
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
        let fleet = self.cx.engine.fleet();
        let mut may = spec.clone();
        may.unset.clear();
        let real = may.to_requests(fleet).ok()?.iter().find_map(|r| {
            r.pools_of_its_model(fleet).find(|&p| {
                fleet
                    .nodes
                    .iter()
                    .enumerate()
                    .any(|(i, n)| n.pool == p && self.runs.is_real(i))
            })
        })?;
        Some(EngineError::NeverFits(format!(
            "{}: the job has no `run`, and it may land on pool {}, a real one, where it would have nothing to start: add `run: COMMAND` (only a simulated pool models a job's work without one)",
            s.file,
            fleet.pool_path(real)
        )))
    }

    /// Where a submission would land now, without admitting it.
    pub(super) fn preview(
        &mut self,
        s: &Submission,
    ) -> Result<crate::daemon::engine::Preview, EngineError> {
        if let Some(why) = self.refusal(s) {
            return Err(why);
        }
        self.cx.engine.preview(s)
    }

    /// One more preemption, of job `id`'s class and team.
    pub(super) fn count_preemption(&mut self, id: JobId) {
        self.counters.preemptions += 1;
        if let Some(j) = self.cx.engine.job(id) {
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

    pub(super) fn act(&mut self, id: JobId, action: Action, who: &str) -> Result<(), EngineError> {
        let now = self.cx.now;
        match action {
            Action::Cancel => {
                self.cx.engine.cancel(id, now)?;
                self.runs.kill(self.cx.engine, id)?;
            }
            Action::Hold => self.cx.engine.hold(id, now)?,
            Action::Release => self.cx.engine.release(id, now)?,
            Action::Preempt => {
                self.cx
                    .engine
                    .preempt(id, now, &format!("preempted by {who}"))?;
                self.runs.stop(self.cx.engine, id, None);
                self.count_preemption(id);
            }
        }
        self.cx.log(format!("job {id} {} by {who}", past(action)));
        Ok(())
    }

    /// Moves job `id` to `class`, asked by `who` (an operator or not: see
    /// `Engine::set_priority`).
    pub(super) fn set_priority(
        &mut self,
        id: JobId,
        class: &str,
        who: &str,
        operator: bool,
    ) -> Result<(), EngineError> {
        self.cx
            .engine
            .set_priority(id, class, self.cx.now, operator)?;
        self.cx
            .log(format!("job {id} reprioritized to {class} by {who}"));
        Ok(())
    }

    fn team_name(&self, i: usize) -> String {
        super::named(self.teams, i)
    }

    fn class_name(&self, i: usize) -> String {
        super::named(self.classes, i)
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
