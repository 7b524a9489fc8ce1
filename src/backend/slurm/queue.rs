//! What a Slurm pool's own scheduler holds back: the cluster's users' jobs that wait for the
//! pool's nodes (shown with Slurm's reasons beside gantry's queue), and whether the partition
//! gantry submits to takes work at all.

use super::inventory::{Inventory, Job};
use crate::backend::ForeignWaiting;
use std::collections::HashSet;

/// The most waiting jobs said of one pool; past that a last line counts the rest (a large
/// cluster's queue runs to tens of thousands, read each second).
pub const SHOWN: usize = 500;

/// The cluster's own jobs asking for GPUs that wait in a partition holding any of `nodes`,
/// oldest (lowest id) first. gantry's own jobs are not among them: they are followed as runs.
pub fn waiting(inv: &Inventory, nodes: &[String]) -> Vec<ForeignWaiting> {
    let ours: HashSet<&str> = nodes.iter().map(String::as_str).collect();
    let partitions: HashSet<&str> = inv
        .nodes
        .iter()
        .filter(|n| ours.contains(n.name.as_str()))
        .flat_map(|n| n.partitions.iter().map(String::as_str))
        .collect();
    let mut jobs: Vec<&Job> = inv
        .jobs
        .iter()
        .filter(|j| j.pending() && j.gpus_per_node > 0)
        .filter(|j| !j.is_gantrys())
        .filter(|j| j.partition.split(',').any(|p| partitions.contains(p)))
        .collect();
    jobs.sort_by_key(|j| j.id);
    let more = jobs.len().saturating_sub(SHOWN);
    let mut out: Vec<ForeignWaiting> = jobs
        .into_iter()
        .take(SHOWN)
        .map(|j| ForeignWaiting {
            what: super::runner::what(j),
            gpus: j.gpus_per_node.saturating_mul(j.node_count),
            nodes: j.node_count,
            reason: if j.reason.is_empty() {
                "not yet considered by Slurm's scheduler".to_string()
            } else {
                j.reason.clone()
            },
        })
        .collect();
    if more > 0 {
        out.push(ForeignWaiting {
            what: format!("{more} more Slurm job(s)"),
            gpus: 0,
            nodes: 0,
            reason: "not listed (see gantry slurm)".to_string(),
        });
    }
    out
}

/// Why the partition gantry submits to takes no work, if it does not (down, drained,
/// inactive): nothing new should go to the pool's nodes while so. Of a list (`gpu,long`, as
/// sbatch takes it), only when none of them does.
pub fn partition_closed(inv: &Inventory, partition: Option<&str>) -> Option<String> {
    let mut closed = Vec::new();
    for name in partition?.split(',').map(str::trim) {
        let p = inv.partitions.iter().find(|p| p.name == name)?;
        if p.state.is_empty() || p.state == "up" {
            return None;
        }
        closed.push(format!("Slurm partition {name} is {}", p.state));
    }
    (!closed.is_empty()).then(|| closed.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slurm::inventory::{Node, Partition};

    fn job(id: u64, partition: &str, gpus: u32, comment: &str) -> Job {
        Job {
            id,
            name: format!("j{id}"),
            user: "bob".into(),
            partition: partition.into(),
            state: "pending".into(),
            reason_code: "Priority".into(),
            reason: "queued behind jobs of higher priority (Slurm: Priority)".into(),
            gpus_per_node: gpus,
            node_count: 2,
            comment: comment.into(),
            ..Job::default()
        }
    }

    #[test]
    fn only_the_clusters_gpu_jobs_waiting_for_the_pools_partitions() {
        let inv = Inventory {
            nodes: vec![
                Node {
                    name: "gpu-a".into(),
                    partitions: vec!["gpu".into()],
                    ..Node::default()
                },
                Node {
                    name: "cpu-a".into(),
                    partitions: vec!["cpu".into()],
                    ..Node::default()
                },
            ],
            jobs: vec![
                job(9, "gpu", 4, ""),
                job(3, "cpu,gpu", 1, ""),
                job(4, "cpu", 4, ""),
                job(5, "gpu", 0, ""),
                job(6, "gpu", 2, "gantry:7:gty_x:0"),
            ],
            ..Inventory::default()
        };
        let w = waiting(&inv, &["gpu-a".to_string()]);
        let ids: Vec<&str> = w.iter().map(|w| w.what.as_str()).collect();
        assert_eq!(
            ids,
            ["Slurm job 3 \"j3\" of bob", "Slurm job 9 \"j9\" of bob"]
        );
        assert_eq!((w[1].gpus, w[1].nodes), (8, 2));
        assert!(w[1].reason.contains("Slurm: Priority"));
    }

    #[test]
    fn a_long_queue_is_cut_and_counted() {
        let inv = Inventory {
            nodes: vec![Node {
                name: "gpu-a".into(),
                partitions: vec!["gpu".into()],
                ..Node::default()
            }],
            jobs: (0..SHOWN as u64 + 7)
                .map(|i| job(i, "gpu", 1, ""))
                .collect(),
            ..Inventory::default()
        };
        let w = waiting(&inv, &["gpu-a".to_string()]);
        assert_eq!(w.len(), SHOWN + 1);
        assert_eq!(w[SHOWN].what, "7 more Slurm job(s)");
    }

    #[test]
    fn a_partition_not_up_is_closed() {
        let inv = Inventory {
            partitions: vec![Partition {
                name: "gpu".into(),
                nodes: "gpu-a".into(),
                state: "down".into(),
            }],
            ..Inventory::default()
        };
        assert_eq!(
            partition_closed(&inv, Some("gpu")).as_deref(),
            Some("Slurm partition gpu is down")
        );
        assert_eq!(partition_closed(&inv, None), None);
        let mut two = inv.clone();
        two.partitions.push(Partition {
            name: "long".into(),
            nodes: "gpu-a".into(),
            state: "up".into(),
        });
        assert_eq!(partition_closed(&two, Some("gpu,long")), None);
        two.partitions[1].state = "inactive".into();
        assert_eq!(
            partition_closed(&two, Some("gpu,long")).as_deref(),
            Some("Slurm partition gpu is down; Slurm partition long is inactive")
        );
        assert_eq!(partition_closed(&inv, Some("other")), None);
    }
}
