//! Idle reclamation in the daemon: the plan from telemetry, remembered by id, and applying
//! exactly a plan that was shown.

use super::cx::Cx;
use super::runs::Runs;
use super::seen::Seen;
use super::{Counters, Samples};
use crate::api::JobState;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::scheduler::reclaim::{
    reclaim_plan, JobUsage, ReclaimAction, ReclaimConfig, ReclaimPlan, ReclaimSkip,
};
use std::collections::VecDeque;

/// Reclaim plans remembered for applying (several operators may be reviewing at once).
const RECLAIM_PLANS_KEPT: usize = 16;

/// The fleet file's `[reclaim]` and the plans shown lately, newest last: what
/// `apply_reclaim` may apply.
pub(super) struct Reclaim {
    config: ReclaimConfig,
    shown: VecDeque<ReclaimPlan>,
}

impl Reclaim {
    pub(super) fn new(config: ReclaimConfig) -> Reclaim {
        Reclaim {
            config,
            shown: VecDeque::new(),
        }
    }

    /// How long a GPU must idle to be reclaimed, seconds (telemetry keeps that much).
    pub(super) fn window_s(&self) -> f64 {
        self.config.window_s
    }

    /// The fleet file's `[reclaim]`.
    pub(super) fn config(&self) -> &ReclaimConfig {
        &self.config
    }

    /// Remembers a plan shown (a plan shown again moves to the newest).
    pub(super) fn remember(&mut self, plan: &ReclaimPlan) {
        self.shown.retain(|p| p.id != plan.id);
        self.shown.push_back(plan.clone());
        while self.shown.len() > RECLAIM_PLANS_KEPT {
            self.shown.pop_front();
        }
    }

    /// The plan `id` shown, taken (a plan is applied once).
    pub(super) fn take(&mut self, id: &str) -> Option<ReclaimPlan> {
        let pos = self.shown.iter().position(|p| p.id == id)?;
        self.shown.remove(pos)
    }

    /// Applies plan `shown` (taken by `take`), and only it, against the plan `current`: each
    /// of its jobs is checked again — still running, its GPUs still idle, the same action —
    /// and skipped, with the reason, if not; nothing outside the plan is touched.
    /// Checkpointing jobs are preempted (they requeue), interactive ones suspended (held until
    /// their owner releases them), the rest cancelled. Returns what was applied and skipped.
    pub(super) fn apply(
        (cx, runs, counters): (&mut Cx, &mut Runs, &mut Counters),
        shown: ReclaimPlan,
        current: ReclaimPlan,
        who: &str,
    ) -> Result<ReclaimPlan, EngineError> {
        let mut applied = Vec::new();
        let mut skipped = Vec::new();
        for item in shown.items {
            let jid = item.job as JobId;
            if !current
                .items
                .iter()
                .any(|c| c.job == item.job && c.action == item.action)
            {
                let why = match cx.engine.job(jid).map(|j| j.state) {
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
                    cx.engine.preempt(jid, cx.now, &because)?;
                    runs.stop(cx.engine, jid, None);
                }
                ReclaimAction::Suspend => {
                    cx.engine.suspend(jid, cx.now, &because)?;
                    runs.stop(cx.engine, jid, None);
                }
                ReclaimAction::Cancel => {
                    cx.engine.cancel(jid, cx.now)?;
                    runs.kill(cx.engine, jid)?;
                }
            }
            counters.reclaimed_jobs += 1;
            counters.reclaimed_gpu_hours += item.gpus * item.idle_for_s / 3600.0;
            cx.log(format!(
                "job {jid} reclaimed by {who} ({}): {} idle GPU(s), ${:.2}/h freed",
                item.action.describe(),
                crate::api::gpus_text(item.gpus),
                item.dollars_per_hour
            ));
            applied.push(item);
        }
        let mut plan = ReclaimPlan::of(cx.now, applied);
        plan.id = shown.id;
        plan.skipped = skipped;
        Ok(plan)
    }
}

impl Seen<'_> {
    /// Jobs whose GPUs have stayed idle past the window of `config` (simulated telemetry, or
    /// NVML's for jobs on this host).
    pub(super) fn reclaim_plan(&self, config: &ReclaimConfig) -> ReclaimPlan {
        let step = 60.0;
        let from = self.now - config.window_s - step;
        let mut series: Vec<(&crate::daemon::engine::Job, Vec<Samples>)> = Vec::new();
        for j in self
            .engine
            .live_jobs()
            .filter(|j| j.state == JobState::Running)
        {
            let (Some(p), Some(started)) = (&j.placement, j.started_at) else {
                continue;
            };
            let real = p.nodes.iter().any(|n| self.runs.is_real(n.node.index()));
            if real {
                // Measured: this job's own utilization of each of its GPUs, from NVML; a host
                // without measurements gives no samples (and nothing is judged idle from them).
                let per_gpu: Vec<Samples> = p
                    .nodes
                    .iter()
                    .flat_map(|n| n.gpus.iter().map(move |g| (n.node.index(), g.gpu)))
                    .map(|(node, g)| {
                        self.telemetry
                            .of(node)
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
        reclaim_plan(self.now, &usage, config)
    }
}
