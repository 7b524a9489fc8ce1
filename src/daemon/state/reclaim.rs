//! Idle reclamation in the daemon: the plan from telemetry, remembered by id, and applying
//! exactly a plan that was shown.

use super::{Samples, State, RECLAIM_PLANS_KEPT};
use crate::api::JobState;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::scheduler::reclaim::{reclaim_plan, JobUsage, ReclaimAction, ReclaimPlan, ReclaimSkip};

impl State {
    /// Jobs whose GPUs have stayed idle past the window (simulated telemetry, or NVML's for
    /// jobs on this host).
    pub fn reclaim_plan(&self) -> ReclaimPlan {
        let step = 60.0;
        let from = self.now - self.reclaim.window_s - step;
        let mut series: Vec<(&crate::daemon::engine::Job, Vec<Samples>)> = Vec::new();
        for j in self.engine.jobs().filter(|j| j.state == JobState::Running) {
            let (Some(p), Some(started)) = (&j.placement, j.started_at) else {
                continue;
            };
            let real = p.nodes.iter().any(|n| self.is_real_host(n.node.index()));
            if real {
                // Measured: this job's own utilization of each of its GPUs, from NVML; a host
                // without measurements gives no samples (and nothing is judged idle from them).
                let per_gpu: Vec<Samples> = p
                    .nodes
                    .iter()
                    .flat_map(|n| n.gpus.iter().map(move |g| (n.node.index(), g.gpu)))
                    .map(|(node, g)| {
                        self.measured
                            .get(&node)
                            .and_then(|t| t.job_series(j.id, g))
                            .map_or(Vec::new(), |s| {
                                s.iter().copied().filter(|(t, _)| *t >= from).collect()
                            })
                    })
                    .collect();
                series.push((j, per_gpu));
                continue;
            }
            let per_gpu: Vec<Samples> = p
                .nodes
                .iter()
                .flat_map(|n| {
                    n.gpus
                        .iter()
                        .map(move |g| super::telemetry::gpu_key(n.node.0, g.gpu))
                })
                .map(|key| {
                    let mut samples = Vec::new();
                    let mut t = started.max(from);
                    while t <= self.now {
                        samples.push((t, self.util_at(j.id, key, started, t)));
                        t += step;
                    }
                    samples
                })
                .collect();
            series.push((j, per_gpu));
        }
        let usage: Vec<JobUsage> = series
            .iter()
            .filter_map(|(j, s)| {
                Some(JobUsage {
                    job: j.id as u64,
                    placement: j.placement.as_ref()?,
                    checkpoints: j.spec.checkpoint.is_some(),
                    interactive: j.spec.interactive,
                    window_s: j.spec.idle_window_s,
                    gpu_samples: s,
                })
            })
            .collect();
        reclaim_plan(self.now, &usage, &self.reclaim)
    }

    /// The reclaim plan now, remembered by its id so that applying it applies exactly it.
    pub fn show_reclaim(&mut self) -> ReclaimPlan {
        let plan = self.reclaim_plan();
        if !plan.items.is_empty() {
            self.reclaim_shown.retain(|p| p.id != plan.id);
            self.reclaim_shown.push_back(plan.clone());
            while self.reclaim_shown.len() > RECLAIM_PLANS_KEPT {
                self.reclaim_shown.pop_front();
            }
        }
        plan
    }

    /// Applies the plan `id` that `show_reclaim` returned, and only it: each of its jobs is
    /// checked again — still running, its GPUs still idle, the same action — and skipped,
    /// with the reason, if not; nothing outside the plan is touched. Checkpointing jobs are
    /// preempted (they requeue), interactive ones suspended (held until their owner releases
    /// them), the rest cancelled. Returns what was applied and what was skipped.
    pub fn apply_reclaim(&mut self, who: &str, id: &str) -> Result<ReclaimPlan, EngineError> {
        let Some(pos) = self.reclaim_shown.iter().position(|p| p.id == id) else {
            return Err(EngineError::Stale(format!(
                "reclaim plan `{}` is not one this daemon showed (or it was applied already); get the current plan (gantry reclaim) and apply its id",
                id.escape_debug()
            )));
        };
        let shown = self.reclaim_shown.remove(pos).unwrap_or_default();
        let current = self.reclaim_plan();
        let mut applied = Vec::new();
        let mut skipped = Vec::new();
        for item in shown.items {
            let jid = item.job as JobId;
            if !current
                .items
                .iter()
                .any(|c| c.job == item.job && c.action == item.action)
            {
                let why = match self.engine.job(jid).map(|j| j.state) {
                    Some(JobState::Running) => "its GPUs are no longer idle".to_string(),
                    Some(s) => format!("it is {s} now"),
                    None => "it has finished".to_string(),
                };
                skipped.push(ReclaimSkip { job: item.job, why });
                continue;
            }
            let because = format!("idle GPUs reclaimed by {who}");
            match item.action {
                ReclaimAction::CheckpointAndRequeue => {
                    self.engine.preempt(jid, self.now, &because)?;
                    self.begin_stop(jid);
                }
                ReclaimAction::Suspend => {
                    self.engine.suspend(jid, self.now, &because)?;
                    self.begin_stop(jid);
                }
                ReclaimAction::Cancel => {
                    self.engine.cancel(jid, self.now)?;
                    self.kill_on_hosts(jid)?;
                }
            }
            self.counters.reclaimed_jobs += 1;
            self.counters.reclaimed_gpu_hours += item.gpus * item.idle_for_s / 3600.0;
            self.log(format!(
                "job {jid} reclaimed by {who} ({}): {} idle GPU(s), ${:.2}/h freed",
                item.action.describe(),
                crate::api::gpus_text(item.gpus),
                item.dollars_per_hour
            ));
            applied.push(item);
        }
        let mut plan = ReclaimPlan::of(self.now, applied);
        plan.id = shown.id;
        plan.skipped = skipped;
        self.rebuild_snapshot();
        Ok(plan)
    }
}
