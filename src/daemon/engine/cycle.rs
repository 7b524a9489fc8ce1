//! A scheduling cycle applied: the cycle's decisions checked against the jobs' states and the
//! fleet, journaled as one entry, then applied in memory.

use super::*;
use crate::scheduler::cycle::PendingReason;

impl Engine {
    /// Runs one scheduling cycle and applies its decisions (journaled first).
    pub fn tick(&mut self, now: f64) -> Result<TickReport, EngineError> {
        self.count_usage(now);
        let waits = self.follow_pipelines(now)?;
        let capped = self.over_user_limits();
        let pending: Vec<PendingJob> = self
            .jobs
            .live()
            .filter(|j| matches!(j.state, JobState::Pending | JobState::Held))
            .map(|j| pending_of(j, waits.contains_key(&j.id) || capped.contains_key(&j.id)))
            .collect();
        let running: Vec<RunningJob> = self.jobs.live().filter_map(running_of).collect();
        let view = self.pinned_out();
        let cluster = view.as_ref().unwrap_or(&self.cluster);
        let input = CycleInput {
            now,
            cluster,
            teams: &self.teams,
            classes: &self.classes,
            usage: &self.usage,
            pending: &pending,
            running: &running,
            config: &self.config,
        };
        let mut out = run_cycle(&mut self.placer, &input)?;
        self.start_pinned(&mut out);
        // One bad decision never fails the cycle: a decision about a job whose state does not
        // allow it, or a placement the fleet refuses, is dropped with the reason and the rest
        // stand. Starts take their GPUs first (in memory; undone if the journal refuses).
        let mut skipped = Vec::new();
        let mut allocated = Vec::new();
        {
            let (jobs, cluster) = (&self.jobs, &mut self.cluster);
            out.decisions.retain(|d| {
                let (id, want) = match d {
                    Decision::Start { job, .. } => (*job as JobId, JobState::Pending),
                    Decision::Preempt { victim, .. } => (*victim as JobId, JobState::Running),
                    Decision::Reserve { .. } => return true,
                };
                let state = jobs.get(&id).map(|j| j.state);
                if state != Some(want) {
                    skipped.push((
                        id,
                        format!(
                            "the cycle's decision for it was dropped: it is {}, not {want}",
                            state.map_or("gone", JobState::name)
                        ),
                    ));
                    return false;
                }
                if let Decision::Start { placement, .. } = d {
                    if let Err(e) = cluster.allocate(placement) {
                        skipped.push((id, format!("its placement was refused: {e}")));
                        return false;
                    }
                    allocated.push(placement.clone());
                }
                true
            });
        }
        // The cycle's decisions are one journal entry: one commit, then memory.
        let moves: Vec<(JobId, JobState, String)> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job, .. } => {
                    Some((*job as JobId, JobState::Running, "placed".to_string()))
                }
                Decision::Preempt {
                    victim, for_job, ..
                } => Some((
                    *victim as JobId,
                    JobState::Preempting,
                    format!("preempted for job {for_job}"),
                )),
                Decision::Reserve { .. } => None,
            })
            .collect();
        let fleet = self.cluster.fleet();
        let opens: Vec<Charge> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Start { job, placement, .. } => {
                    let j = self.jobs.get(&(*job as JobId))?;
                    let capacity = placement
                        .nodes
                        .first()
                        .map_or("on-demand".to_string(), |g| {
                            fleet.pool(fleet.node(g.node).pool).capacity.to_string()
                        });
                    Some(Charge {
                        job: j.id,
                        team: self.teams[j.team].name.clone(),
                        project: j.spec.project.clone(),
                        capacity,
                        gpus: j.request.total_gpu_milli() as f64 / 1000.0,
                        dollars_per_hour: placement.price_per_hour,
                        nodes: placement
                            .nodes
                            .iter()
                            .map(|g| fleet.node(g.node).name.clone())
                            .collect(),
                    })
                }
                _ => None,
            })
            .collect();
        if let Err(e) = self.store.transition_charged(&moves, now, &opens) {
            for p in &allocated {
                let _ = self.cluster.release(p);
            }
            return Err(e.into());
        }
        let mut report = TickReport {
            skipped,
            ..TickReport::default()
        };
        for d in out.decisions {
            match d {
                Decision::Start {
                    job,
                    placement,
                    borrowed,
                } => {
                    let id = job as JobId;
                    let j = self.job_mut(id)?;
                    let (team, from) = (j.team, j.state);
                    j.state = JobState::Running;
                    j.placement = Some(placement);
                    j.started_at = Some(now);
                    j.borrowed = borrowed;
                    j.explanation = None;
                    self.count_waiting(team, Some(from), Some(JobState::Running));
                    report.started.push(id);
                }
                Decision::Preempt { victim, .. } => {
                    let id = victim as JobId;
                    self.job_mut(id)?.state = JobState::Preempting;
                    report.preempting.push(id);
                }
                Decision::Reserve { job, .. } => report.reserved.push(job as JobId),
            }
        }
        for mut e in out.explanations {
            if let Some(&after) = waits.get(&(e.job as JobId)) {
                e.reason = PendingReason::After { job: after as u64 };
            } else if let Some(r) = capped.get(&(e.job as JobId)) {
                e.reason = r.clone();
            }
            if let Some(j) = self.jobs.get_mut(&(e.job as JobId)) {
                j.explanation = Some(Box::new(e));
            }
        }
        Ok(report)
    }

    /// Pipelines: a pending job that follows another (`after`) waits while that one has not
    /// completed, and is cancelled, saying why, once it has failed or been cancelled. The
    /// answer: each waiting job and the job it waits for.
    fn follow_pipelines(&mut self, now: f64) -> Result<HashMap<JobId, JobId>, EngineError> {
        let mut waits = HashMap::new();
        let mut cancel = Vec::new();
        for j in self.jobs.live() {
            let (JobState::Pending, Some(after)) = (j.state, j.spec.after) else {
                continue;
            };
            // A job the window of finished ones has let go is read from the journal; if that
            // read fails, the job waits (a cycle is not failed, nor a job cancelled, for it).
            let state = match self.jobs.get(&after) {
                Some(a) => Some(a.state),
                None => match self.store.job(after) {
                    Ok(r) => r.map(|r| r.state),
                    Err(_) => Some(JobState::Pending),
                },
            };
            match state {
                Some(JobState::Completed) => {}
                Some(JobState::Failed) => cancel.push((
                    j.id,
                    format!("job {after}, before it in its pipeline, failed"),
                )),
                Some(JobState::Cancelled) => cancel.push((
                    j.id,
                    format!("job {after}, before it in its pipeline, was cancelled"),
                )),
                None => cancel.push((
                    j.id,
                    format!("job {after}, before it in its pipeline, is not known to this daemon"),
                )),
                Some(_) => {
                    waits.insert(j.id, after);
                }
            }
        }
        for (id, why) in cancel {
            self.move_to(id, JobState::Cancelled, now, &why)?;
        }
        Ok(waits)
    }

    /// Starts each pinned job that this cycle admitted but found no room for, on its node
    /// alone, once it fits there.
    pub(super) fn start_pinned(&mut self, out: &mut CycleOutput) {
        let pins: Vec<(u32, JobId)> = self.pins.iter().map(|(&n, &(j, _))| (n, j)).collect();
        for (node, id) in pins {
            // Admitted by this cycle's quotas, with no room: its explanation says so, and
            // whether starting it goes past its team's guarantee (then it runs borrowed).
            let admitted = out
                .explanations
                .iter()
                .find(|e| e.job == id as u64 && e.reason.waits_for_capacity());
            let (Some(e), Some(j)) = (admitted, self.jobs.get(&id)) else {
                continue;
            };
            let borrowed = e
                .team_guaranteed
                .is_some_and(|g| e.team_used + j.request.total_gpu_milli() > g);
            let mut only = self.cluster.clone();
            for n in 0..only.fleet().nodes.len() as u32 {
                if n != node {
                    only.set_health(crate::model::NodeId(n), crate::model::Health::Cordoned);
                }
            }
            if let Ok(placement) = self.placer.place(&only, &j.request, id as u64) {
                out.explanations.retain(|e| e.job != id as u64);
                out.decisions.push(Decision::Start {
                    job: id as u64,
                    placement,
                    borrowed,
                });
                self.pins.remove(&node);
            }
        }
    }

    /// The cluster as the cycle sees it where nodes are pinned: those nodes out of everyone
    /// else's reach (`None`: nothing is pinned, the cluster as it is).
    pub(super) fn pinned_out(&self) -> Option<Cluster> {
        if self.pins.is_empty() {
            return None;
        }
        let mut c = self.cluster.clone();
        for &n in self.pins.keys() {
            c.set_health(crate::model::NodeId(n), crate::model::Health::Cordoned);
        }
        Some(c)
    }

    pub fn unplaceable_reason(&self, id: JobId) -> Option<&Unplaceable> {
        match &self.jobs.get(&id)?.explanation.as_ref()?.reason {
            crate::scheduler::cycle::PendingReason::NoCapacity { why, .. } => Some(why),
            _ => None,
        }
    }
}

/// A waiting job as the cycle takes it; `held`: out of the queue for a reason of the daemon's
/// (a pipeline, a user's limit) besides a hold.
pub(super) fn pending_of(j: &Job, held: bool) -> PendingJob {
    PendingJob {
        id: j.id as u64,
        team: j.team,
        class: j.class,
        submitted: j.submitted_at,
        request: j.request.clone(),
        alternatives: j.alternatives.clone(),
        held: j.state == JobState::Held || held,
        time_limit_s: j.spec.time_limit_s,
    }
}

/// A running job as the cycle takes it (`None` unless it runs).
pub(super) fn running_of(j: &Job) -> Option<RunningJob> {
    if j.state != JobState::Running {
        return None;
    }
    Some(RunningJob {
        id: j.id as u64,
        team: j.team,
        class: j.class,
        started: j.started_at?,
        placement: j.placement.clone()?,
        preemptible: j.spec.preemptible,
        last_checkpoint: None,
        time_limit_s: j.spec.time_limit_s,
        borrowed: j.borrowed,
        signal: j
            .spec
            .checkpoint
            .as_ref()
            .map_or("SIGTERM".to_string(), |c| c.signal.0.clone()),
        grace_s: j.spec.checkpoint.as_ref().map_or(30.0, |c| c.grace_s),
    })
}
