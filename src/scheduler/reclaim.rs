//! Idle reclamation: which running jobs hold GPUs they do not use. It only plans; an operator
//! (or a policy in the daemon) decides whether to apply it.

use super::cycle::JobId;
use crate::model::Placement;
use serde::{Deserialize, Serialize};

#[derive(Clone, Debug)]
pub struct ReclaimConfig {
    /// A GPU below this utilization (percent) counts as idle.
    pub threshold_pct: f64,
    /// How long every GPU of a job must have been idle.
    pub window_s: f64,
}

impl Default for ReclaimConfig {
    fn default() -> Self {
        ReclaimConfig {
            threshold_pct: 5.0,
            window_s: 15.0 * 60.0,
        }
    }
}

/// A running job and its GPUs' utilization samples, `(seconds, percent)` per GPU, oldest first.
pub struct JobUsage<'a> {
    pub job: JobId,
    pub placement: &'a Placement,
    /// Whether the job checkpoints (then it is requeued; otherwise cancelled).
    pub checkpoints: bool,
    pub gpu_samples: &'a [Vec<(f64, f64)>],
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimAction {
    CheckpointAndRequeue,
    Cancel,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReclaimItem {
    pub job: JobId,
    pub gpus: usize,
    pub dollars_per_hour: f64,
    /// Seconds since any of its GPUs was last busy (at least the window).
    pub idle_for_s: f64,
    pub action: ReclaimAction,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReclaimPlan {
    pub items: Vec<ReclaimItem>,
    pub gpus_freed: usize,
    pub dollars_per_hour_saved: f64,
}

/// Jobs whose every GPU stayed below the threshold for the whole window. A job without
/// samples covering the window is never reclaimable: no data is not evidence of idleness.
pub fn reclaim_plan(now: f64, jobs: &[JobUsage], cfg: &ReclaimConfig) -> ReclaimPlan {
    let since = now - cfg.window_s;
    let mut plan = ReclaimPlan::default();
    for j in jobs {
        let gpus: usize = j.placement.nodes.iter().map(|n| n.gpus.len()).sum();
        if gpus == 0 || j.gpu_samples.len() != gpus {
            continue;
        }
        let mut idle_since = f64::NEG_INFINITY;
        let idle = j.gpu_samples.iter().all(|series| {
            let covers = series.first().is_some_and(|&(t, _)| t <= since);
            let quiet = series
                .iter()
                .filter(|&&(t, _)| t >= since && t <= now)
                .all(|&(_, u)| u < cfg.threshold_pct);
            let last_busy = series
                .iter()
                .rev()
                .find(|&&(_, u)| u >= cfg.threshold_pct)
                .map_or(series.first().map_or(now, |s| s.0), |s| s.0);
            idle_since = idle_since.max(last_busy);
            covers && quiet
        });
        if !idle {
            continue;
        }
        plan.items.push(ReclaimItem {
            job: j.job,
            gpus,
            dollars_per_hour: j.placement.price_per_hour,
            idle_for_s: (now - idle_since).max(cfg.window_s),
            action: if j.checkpoints {
                ReclaimAction::CheckpointAndRequeue
            } else {
                ReclaimAction::Cancel
            },
        });
        plan.gpus_freed += gpus;
        plan.dollars_per_hour_saved += j.placement.price_per_hour;
    }
    plan.items.sort_by(|a, b| {
        b.dollars_per_hour
            .total_cmp(&a.dollars_per_hour)
            .then(a.job.cmp(&b.job))
    });
    plan
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DomainLevel, GpuGrant, GpuShare, NodeGrant, NodeId};

    fn placement(gpus: u8, price: f64) -> Placement {
        Placement {
            level: DomainLevel::Node,
            nodes: vec![NodeGrant {
                node: NodeId(0),
                cpu_milli: 0,
                mem_mib: 0,
                gpus: (0..gpus)
                    .map(|g| GpuGrant {
                        gpu: g,
                        share: GpuShare::Whole,
                        vram_mib: 0,
                    })
                    .collect(),
            }],
            price_per_hour: price,
        }
    }

    fn series(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
        points.to_vec()
    }

    #[test]
    fn only_jobs_idle_on_every_gpu_for_the_whole_window_are_planned() {
        let p2 = placement(2, 8.0);
        let p1 = placement(1, 4.0);
        let idle = [
            series(&[(0.0, 90.0), (100.0, 1.0), (1100.0, 2.0)]),
            series(&[(0.0, 0.0), (1100.0, 0.0)]),
        ];
        let one_busy = [
            series(&[(0.0, 1.0), (1100.0, 1.0)]),
            series(&[(0.0, 1.0), (900.0, 50.0), (1100.0, 1.0)]),
        ];
        let too_new = [series(&[(800.0, 0.0), (1100.0, 0.0)])];
        let jobs = [
            JobUsage {
                job: 1,
                placement: &p2,
                checkpoints: true,
                gpu_samples: &idle,
            },
            JobUsage {
                job: 2,
                placement: &p2,
                checkpoints: true,
                gpu_samples: &one_busy,
            },
            JobUsage {
                job: 3,
                placement: &p1,
                checkpoints: false,
                gpu_samples: &too_new,
            },
        ];
        let plan = reclaim_plan(1100.0, &jobs, &ReclaimConfig::default());
        assert_eq!(plan.items.len(), 1, "{plan:?}");
        assert_eq!(plan.items[0].job, 1);
        assert_eq!(plan.items[0].action, ReclaimAction::CheckpointAndRequeue);
        assert_eq!(plan.items[0].idle_for_s, 1100.0);
        assert_eq!((plan.gpus_freed, plan.dollars_per_hour_saved), (2, 8.0));
    }

    #[test]
    fn jobs_without_checkpoints_are_cancelled_not_requeued() {
        let p = placement(1, 3.0);
        let s = [series(&[(0.0, 0.0), (2000.0, 0.0)])];
        let plan = reclaim_plan(
            2000.0,
            &[JobUsage {
                job: 5,
                placement: &p,
                checkpoints: false,
                gpu_samples: &s,
            }],
            &ReclaimConfig::default(),
        );
        assert_eq!(plan.items[0].action, ReclaimAction::Cancel);
    }
}
