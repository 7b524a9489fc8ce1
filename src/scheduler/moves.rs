//! Moving running jobs with checkpoints: where the jobs on one node would go if that node
//! were out of the picture. Consolidation (give a cloud node back once its jobs fit on
//! capacity already paid for) and defragmentation (empty a node for a job that fits nowhere)
//! both ask this; `gantry sim` and the daemon's simulated backend both answer with it.

use super::index::Cluster;
use super::place::Placer;
use crate::model::{Health, JobRequest, NodeId, Placement};

/// A running job that would move: its id, where it runs, what it asked for.
pub struct Mover<'a> {
    pub id: u64,
    pub placement: &'a Placement,
    pub request: &'a JobRequest,
}

/// Where each of `jobs` (all on `node`) would go with `node` cordoned, placed in the order
/// given on other capacity that is up — `None` unless every one fits. With `then`, also where
/// that job would go once they have moved (it must fit too). The cluster is left as it was.
pub fn moves_off(
    placer: &mut Placer,
    cluster: &mut Cluster,
    node: NodeId,
    jobs: &[Mover],
    then: Option<(u64, &JobRequest)>,
) -> Option<(Vec<Placement>, Option<Placement>)> {
    let was = cluster.fleet().node(node).health;
    cluster.set_health(node, Health::Cordoned);
    for j in jobs {
        cluster
            .release(j.placement)
            .expect("a running job's placement was allocated");
    }
    let mut moves = Vec::new();
    for j in jobs {
        match placer.place(cluster, j.request, j.id) {
            Ok(p) if cluster.allocate(&p).is_ok() => moves.push(p),
            _ => break,
        }
    }
    cluster.set_health(node, was);
    let all_moved = moves.len() == jobs.len();
    let target = match then {
        Some((id, request)) if all_moved => placer.place(cluster, request, id).ok(),
        _ => None,
    };
    for p in &moves {
        cluster.release(p).expect("allocated just above");
    }
    for j in jobs {
        cluster
            .allocate(j.placement)
            .expect("it was allocated before the dry run");
    }
    let fits = all_moved && (then.is_none() || target.is_some());
    fits.then_some((moves, target))
}
