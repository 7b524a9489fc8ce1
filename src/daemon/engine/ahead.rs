//! A copy of the present for a start estimate (`scheduler::forecast`), made on the actor and
//! run forward off it: the cycle's own inputs, and what is left of each job by its kind's past
//! runs (`lengths`).

use super::cycle::{pending_of, running_of};
use super::lengths::{Basis, Run};
use super::*;
use crate::scheduler::cycle::PendingReason;
use crate::scheduler::durations::Left;
use crate::scheduler::forecast::Present;

/// The id a submission is previewed under: no job has it (the journal's ids start at 1).
pub const NEW_JOB: JobId = 0;

/// A submission as the queue would take it: the waiting job, what is left of its run (and
/// what that rests on), its name.
pub struct AsSubmitted {
    pub pending: crate::scheduler::cycle::PendingJob,
    pub left: (Left, Basis),
    pub name: Option<String>,
}

/// The present, and for each live job what is left of it and what that rests on.
#[derive(Clone)]
pub struct Copy {
    pub present: Present,
    pub left: HashMap<u64, (Left, Basis)>,
    /// Waiting jobs that will not start while things stay as they are, and why.
    pub never: HashMap<JobId, String>,
}

impl Engine {
    /// A run of job `j`, started at `started`, completed at `now`: its length is history.
    pub(super) fn learn_length(&mut self, id: JobId, started: f64, now: f64) {
        if let Some(j) = self.jobs.get(&id) {
            let run = Run {
                user: j.user.as_deref(),
                name: j.name.as_deref(),
                team: Some(j.team),
                class: Some(j.class),
                limit: j.spec.time_limit_s,
            };
            self.lengths.record(run, now - started);
        }
    }

    /// A submission as the job it would be, waiting from `now` under the id `NEW_JOB`: for a
    /// preview of submitting it. Refused as the submission would be.
    pub fn as_submitted(&mut self, s: &Submission, now: f64) -> Result<AsSubmitted, EngineError> {
        let mut job = self.admit(s)?;
        job.id = NEW_JOB;
        job.submitted_at = now;
        Ok(AsSubmitted {
            left: self.lengths.left(&job, 0.0),
            pending: pending_of(&job, false),
            name: job.name,
        })
    }

    /// Refuses a preview where the change itself would be refused, with the same error and
    /// nothing changed: a finished job, a move its state does not allow (a hold of a job that
    /// is not pending, a release of one that is not held), a class unknown or not the caller's
    /// to set. `to`: the state the action moves the job to; `class`: a move to that class.
    pub fn check_change(
        &self,
        id: JobId,
        to: Option<JobState>,
        class: Option<&str>,
        operator: bool,
    ) -> Result<(), EngineError> {
        let Some(job) = self.jobs.get(&id) else {
            return Err(self.not_live(id));
        };
        match to {
            Some(JobState::Held) => self.expect_state(
                id,
                JobState::Pending,
                "hold applies to pending jobs (a running job is stopped with preempt or cancel)",
            )?,
            Some(JobState::Pending) => self.expect_state(
                id,
                JobState::Held,
                "release applies to held jobs (a running job is stopped with preempt or cancel)",
            )?,
            Some(to) if !job.state.can_become(to) => {
                return Err(JournalError::BadTransition {
                    id,
                    from: job.state,
                    to,
                }
                .into())
            }
            _ => {}
        }
        if let Some(c) = class {
            let c = self.class_index(c)?;
            self.check_class(job.team, c, operator)?;
        }
        Ok(())
    }

    /// The completed runs in the journal, newest `limit`, as history.
    pub(super) fn learn_lengths_from_journal(&mut self, limit: usize) -> Result<(), EngineError> {
        for r in self.store.completed_lengths(limit)?.into_iter().rev() {
            let team = self.teams.iter().position(|t| t.name == r.team);
            let class = self.classes.iter().position(|c| c.name == r.class);
            let run = Run {
                user: r.user.as_deref(),
                name: r.name.as_deref(),
                team,
                class,
                limit: r.time_limit_s,
            };
            self.lengths.record(run, r.seconds);
        }
        Ok(())
    }

    /// A copy of the present at `now` to run forward; `arriving`: the nodes being bought and
    /// when each is expected to take work.
    pub fn present(&self, now: f64, arriving: Vec<(f64, crate::model::NodeId)>) -> Copy {
        let mut left = HashMap::new();
        let mut never = HashMap::new();
        let mut pending = Vec::new();
        let mut running = Vec::new();
        let mut requeue = HashMap::new();
        for j in self.jobs.live() {
            match j.state {
                JobState::Running => {
                    let ran = j.started_at.map_or(0.0, |s| (now - s).max(0.0));
                    left.insert(j.id as u64, self.lengths.left(j, ran));
                    if let Some(r) = running_of(j) {
                        running.push(r);
                    }
                    if j.spec.preemptible {
                        requeue.insert(j.id as u64, pending_of(j, false));
                    }
                }
                JobState::Pending | JobState::Held => {
                    let why = match j.explanation.as_ref().map(|e| &e.reason) {
                        _ if j.state == JobState::Held => Some("held".to_string()),
                        Some(PendingReason::After { job }) => {
                            Some(format!("follows job {job}, which has not completed"))
                        }
                        Some(PendingReason::UserLimit { user, .. }) => {
                            Some(format!("{user} is at a per-user limit"))
                        }
                        _ => None,
                    };
                    left.insert(j.id as u64, self.lengths.left(j, 0.0));
                    pending.push(pending_of(j, why.is_some()));
                    if let Some(w) = why {
                        never.insert(j.id, w);
                    }
                }
                _ => {}
            }
        }
        Copy {
            present: Present {
                now,
                cluster: self.pinned_out().unwrap_or_else(|| self.cluster.clone()),
                placer: self.placer.clone(),
                teams: self.teams.clone(),
                classes: self.classes.clone(),
                usage: self.usage.clone(),
                config: self.config.clone(),
                pending,
                running,
                requeue,
                arriving,
            },
            left,
            never,
        }
    }
}
