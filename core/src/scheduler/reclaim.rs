//! Idle reclamation: which running jobs hold GPUs they do not use. It only plans; an operator
//! (or a policy in the daemon) decides whether to apply it. A plan has an id, so what is
//! applied is exactly what was shown (the daemon re-checks each item and skips, never adds).

use super::cycle::JobId;
use crate::model::{GpuShare, Placement};
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
    /// A person works in it (a notebook): it is suspended — held until its owner releases
    /// it — since a requeue would only start it again, as idle, on the same kind of GPU.
    pub interactive: bool,
    /// The job's own idle window (SkyPilot's `autostop`): it is reclaimable after this long
    /// idle where that is sooner than the fleet's window, never later.
    pub window_s: Option<f64>,
    pub gpu_samples: &'a [Vec<(f64, f64)>],
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ReclaimAction {
    CheckpointAndRequeue,
    Cancel,
    /// Stopped (checkpointed when it can) and held until its owner releases it.
    Suspend,
}

impl ReclaimAction {
    /// As the API writes it (`checkpoint-and-requeue`).
    pub fn name(&self) -> &'static str {
        match self {
            ReclaimAction::CheckpointAndRequeue => "checkpoint-and-requeue",
            ReclaimAction::Cancel => "cancel",
            ReclaimAction::Suspend => "suspend",
        }
    }

    pub fn describe(&self) -> &'static str {
        match self {
            ReclaimAction::CheckpointAndRequeue => "checkpoint + requeue",
            ReclaimAction::Cancel => "cancel",
            ReclaimAction::Suspend => "suspend (held until its owner releases it)",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReclaimItem {
    pub job: JobId,
    /// GPUs it frees: a share of a GPU counts as that share (0.5), a MIG slice as its part.
    pub gpus: f64,
    pub dollars_per_hour: f64,
    /// Seconds since any of its GPUs was last busy (at least the window).
    pub idle_for_s: f64,
    pub action: ReclaimAction,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReclaimPlan {
    /// Names this plan: applying it applies these items and no others.
    #[serde(default)]
    pub id: String,
    pub items: Vec<ReclaimItem>,
    pub gpus_freed: f64,
    pub dollars_per_hour_saved: f64,
    /// When applied: the shown items not applied, because they no longer qualify.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<ReclaimSkip>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReclaimSkip {
    pub job: JobId,
    pub why: String,
}

impl ReclaimPlan {
    /// The plan made of `items` (totals summed, the id from its content and `now`).
    pub fn of(now: f64, items: Vec<ReclaimItem>) -> ReclaimPlan {
        // FNV-1a over what the plan does: two different plans never share an id in practice,
        // and the same idle set at the same moment always gets the same one.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        let mut eat = |bytes: &[u8]| {
            for b in bytes {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        };
        eat(&now.to_bits().to_le_bytes());
        for i in &items {
            eat(&i.job.to_le_bytes());
            eat(i.action.describe().as_bytes());
        }
        ReclaimPlan {
            id: format!("{h:016x}"),
            gpus_freed: items.iter().map(|i| i.gpus).sum(),
            dollars_per_hour_saved: items.iter().map(|i| i.dollars_per_hour).sum(),
            items,
            skipped: Vec::new(),
        }
    }
}

/// The GPUs a placement holds, counting a share as its fraction and a MIG slice as its part.
pub fn gpus_held(p: &Placement) -> f64 {
    p.nodes
        .iter()
        .flat_map(|n| &n.gpus)
        .map(|g| match g.share {
            GpuShare::Whole => 1.0,
            GpuShare::Milli(m) => f64::from(m) / 1000.0,
            GpuShare::Mig { profile, .. } => f64::from(profile.compute) / 7.0,
        })
        .sum()
}

/// Jobs whose every GPU stayed below the threshold for the whole window. A job without
/// samples covering the window is never reclaimable: no data is not evidence of idleness.
pub fn reclaim_plan(now: f64, jobs: &[JobUsage], cfg: &ReclaimConfig) -> ReclaimPlan {
    let mut items = Vec::new();
    for j in jobs {
        let window = j.window_s.map_or(cfg.window_s, |w| w.min(cfg.window_s));
        let since = now - window;
        let grants: usize = j.placement.nodes.iter().map(|n| n.gpus.len()).sum();
        if grants == 0 || j.gpu_samples.len() != grants {
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
        items.push(ReclaimItem {
            job: j.job,
            gpus: gpus_held(j.placement),
            dollars_per_hour: j.placement.price_per_hour,
            idle_for_s: (now - idle_since).max(window),
            action: if j.interactive {
                ReclaimAction::Suspend
            } else if j.checkpoints {
                ReclaimAction::CheckpointAndRequeue
            } else {
                ReclaimAction::Cancel
            },
        });
    }
    items.sort_by(|a, b| {
        b.dollars_per_hour
            .total_cmp(&a.dollars_per_hour)
            .then(a.job.cmp(&b.job))
    });
    ReclaimPlan::of(now, items)
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
                interactive: false,
                window_s: None,
                gpu_samples: &idle,
            },
            JobUsage {
                job: 2,
                placement: &p2,
                checkpoints: true,
                interactive: false,
                window_s: None,
                gpu_samples: &one_busy,
            },
            JobUsage {
                job: 3,
                placement: &p1,
                checkpoints: false,
                interactive: false,
                window_s: None,
                gpu_samples: &too_new,
            },
        ];
        let plan = reclaim_plan(1100.0, &jobs, &ReclaimConfig::default());
        assert_eq!(plan.items.len(), 1, "{plan:?}");
        assert_eq!(plan.items[0].job, 1);
        assert_eq!(plan.items[0].action, ReclaimAction::CheckpointAndRequeue);
        assert_eq!(plan.items[0].idle_for_s, 1100.0);
        assert_eq!((plan.gpus_freed, plan.dollars_per_hour_saved), (2.0, 8.0));
    }

    /// A job's own window (SkyPilot's `autostop`) makes it reclaimable sooner, never later.
    #[test]
    fn a_jobs_own_window_is_kept_where_it_is_sooner_than_the_fleets() {
        let p = placement(1, 2.0);
        // Idle for the last 400 s of 1000; the fleet's window is 15 minutes.
        let s = [series(&[(0.0, 90.0), (600.0, 90.0), (1000.0, 0.0)])];
        let usage = |job, window_s| JobUsage {
            job,
            placement: &p,
            checkpoints: true,
            interactive: false,
            window_s,
            gpu_samples: &s,
        };
        let plan = reclaim_plan(
            1000.0,
            &[
                usage(1, Some(300.0)),
                usage(2, Some(7200.0)),
                usage(3, None),
            ],
            &ReclaimConfig::default(),
        );
        let jobs: Vec<u64> = plan.items.iter().map(|i| i.job).collect();
        assert_eq!(
            jobs,
            vec![1],
            "5 minutes idle asked for; the others wait for the fleet's 15"
        );
        assert_eq!(plan.items[0].idle_for_s, 400.0);
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
                interactive: false,
                window_s: None,
                gpu_samples: &s,
            }],
            &ReclaimConfig::default(),
        );
        assert_eq!(plan.items[0].action, ReclaimAction::Cancel);
    }

    #[test]
    fn shares_count_as_shares_and_interactive_jobs_are_suspended() {
        let mut half = placement(1, 0.5);
        half.nodes[0].gpus[0].share = GpuShare::Milli(500);
        let s = [series(&[(0.0, 0.0), (2000.0, 0.0)])];
        let usage = |job, interactive| JobUsage {
            job,
            placement: &half,
            checkpoints: true,
            interactive,
            window_s: None,
            gpu_samples: &s,
        };
        let plan = reclaim_plan(
            2000.0,
            &[usage(1, true), usage(2, false)],
            &ReclaimConfig::default(),
        );
        assert_eq!(plan.gpus_freed, 1.0, "two half GPUs are one GPU");
        assert_eq!(plan.items[0].gpus, 0.5);
        assert_eq!(plan.items[0].action, ReclaimAction::Suspend);
        assert_eq!(plan.items[1].action, ReclaimAction::CheckpointAndRequeue);
        // The id names the plan: the same content at the same time, the same id.
        let again = reclaim_plan(
            2000.0,
            &[usage(1, true), usage(2, false)],
            &ReclaimConfig::default(),
        );
        assert_eq!(plan.id, again.id);
        let other = reclaim_plan(2000.0, &[usage(1, true)], &ReclaimConfig::default());
        assert_ne!(plan.id, other.id);
    }
}
