//! Moving running jobs with checkpoints, the one planner of both the daemon and `gantry sim`:
//! consolidation (give a cloud node back once its jobs fit on capacity already paid for, as
//! Karpenter does for pods) and defragmentation (empty a node already paid for to give a job
//! that fits nowhere, instead of buying one). The planner decides which nodes and whether
//! their jobs fit elsewhere; the world it plans for (`Rebalance`) says which nodes it may let
//! go or empty and carries a move out — at once in `gantry sim`, by checkpoint, stop and
//! requeue in the daemon, whose moves therefore go one node per pass.

use super::index::Cluster;
use super::place::Placer;
use crate::model::{GpuRequest, Health, JobRequest, ModelId, NodeId, Placement};
use std::collections::HashSet;

/// How many stuck jobs defragmentation looks at per pass, and how many nodes for each.
const DEFRAG_JOBS: usize = 4;
const DEFRAG_NODES: usize = 4;

/// A node the planner may empty.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Candidate {
    pub node: usize,
    pub pool: usize,
    /// GPU share in use, milli-GPUs: the lightest nodes are emptied first.
    pub used_milli: u32,
    pub model: Option<ModelId>,
    pub gpus: usize,
}

/// The world the planner plans for: the daemon's state, or `gantry sim`'s world.
pub trait Rebalance {
    /// Nodes consolidation may give back (up, paid by the hour, running something).
    fn consolidation_candidates(&self) -> Vec<Candidate>;
    /// Nodes defragmentation may empty (up and running something).
    fn defrag_candidates(&self) -> Vec<Candidate>;
    /// The running jobs on `node`, in the order they would move.
    fn jobs_on(&self, node: usize) -> Vec<u64>;
    /// Whether a running job may be moved (it checkpoints, may be stopped, runs on one node).
    fn movable(&self, job: u64) -> bool;
    /// Where `jobs` (all on `node`) would go with `node` out of the picture and, with `then`,
    /// where that job would go after them — `None` unless every one fits (see `moves_off`).
    fn try_moves(
        &mut self,
        node: usize,
        jobs: &[u64],
        then: Option<u64>,
    ) -> Option<(Vec<Placement>, Option<Placement>)>;
    /// Consolidation chose `node`: its `jobs` move (to `moves`, where they can go at once)
    /// and the node is given back.
    fn drain(&mut self, node: usize, jobs: &[u64], moves: Vec<Placement>);
    /// Defragmentation chose `node` for `job`: its `jobs` move and `job` gets the node
    /// (`target`, once they have gone).
    fn empty_for(
        &mut self,
        node: usize,
        jobs: &[u64],
        moves: Vec<Placement>,
        job: u64,
        target: Placement,
    );
}

/// Consolidation: the least-used candidates first, each given back if every job on it
/// moves and fits on other capacity; never a pool below its minimum (`counts`, `mins` per
/// pool), never a node that received jobs in this pass; at most `at_most` nodes. Returns the
/// nodes drained.
pub fn consolidate<W: Rebalance>(
    w: &mut W,
    counts: &mut [u32],
    mins: &[u32],
    at_most: usize,
) -> Vec<usize> {
    let mut candidates = w.consolidation_candidates();
    candidates.sort_unstable_by_key(|c| (c.used_milli, c.node));
    let mut receivers = HashSet::new();
    let mut drained = Vec::new();
    for c in candidates {
        if drained.len() >= at_most {
            break;
        }
        if receivers.contains(&c.node) || counts[c.pool] <= mins[c.pool] {
            continue;
        }
        let jobs = w.jobs_on(c.node);
        if jobs.is_empty() || !jobs.iter().all(|&j| w.movable(j)) {
            continue;
        }
        let Some((moves, _)) = w.try_moves(c.node, &jobs, None) else {
            continue;
        };
        receivers.extend(
            moves
                .iter()
                .flat_map(|p| p.nodes.iter().map(|g| g.node.index())),
        );
        w.drain(c.node, &jobs, moves);
        counts[c.pool] -= 1;
        drained.push(c.node);
    }
    drained
}

/// Defragmentation: for each of the first few jobs that wait for capacity (`stuck`, queue
/// order) that needs whole GPUs on one node, the lightest few candidates of its model with
/// enough GPUs are tried; the first whose jobs all move and leave room for it is emptied for
/// it. At most `at_most` jobs are served; returns them.
pub fn defragment<W: Rebalance>(
    w: &mut W,
    stuck: &[(u64, &JobRequest)],
    at_most: usize,
) -> Vec<u64> {
    let mut served = Vec::new();
    for &(job, req) in stuck.iter().take(DEFRAG_JOBS) {
        if served.len() >= at_most {
            break;
        }
        let GpuRequest::Whole(k) = req.gpu else {
            continue;
        };
        if req.nodes != 1 {
            continue;
        }
        let mut candidates: Vec<Candidate> = w
            .defrag_candidates()
            .into_iter()
            .filter(|c| c.gpus >= usize::from(k))
            .filter(|c| c.model.is_some_and(|m| req.models.rank(m).is_some()))
            .filter(|c| req.allows_pool(crate::model::PoolId(c.pool as u32)))
            .collect();
        candidates.sort_unstable_by_key(|c| (c.used_milli, c.node));
        for c in candidates.into_iter().take(DEFRAG_NODES) {
            let jobs = w.jobs_on(c.node);
            if jobs.is_empty() || !jobs.iter().all(|&j| w.movable(j)) {
                continue;
            }
            // The stuck job must fit once the moves are made (on the emptied node).
            let Some((moves, Some(target))) = w.try_moves(c.node, &jobs, Some(job)) else {
                continue;
            };
            w.empty_for(c.node, &jobs, moves, job, target);
            served.push(job);
            break;
        }
    }
    served
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{DomainLevel, ModelChoice, NodeGrant};

    /// A toy world: per node (pool, used milli, model, GPUs, its jobs, whether they fit
    /// elsewhere, where they would go); what the planner did is recorded.
    /// (pool, used milli, model, GPUs, jobs, they fit elsewhere, the node they would go to)
    type ToyNode = (usize, u32, u16, usize, Vec<u64>, bool, usize);

    #[derive(Default)]
    struct Toy {
        nodes: Vec<ToyNode>,
        immovable: Vec<u64>,
        drained: Vec<usize>,
        emptied: Vec<(usize, u64)>,
    }

    fn on(node: usize) -> Placement {
        Placement {
            level: DomainLevel::Node,
            nodes: vec![NodeGrant {
                node: NodeId(node as u32),
                cpu_milli: 0,
                mem_mib: 0,
                gpus: Vec::new(),
            }],
            price_per_hour: 0.0,
        }
    }

    impl Rebalance for Toy {
        fn consolidation_candidates(&self) -> Vec<Candidate> {
            self.defrag_candidates()
        }
        fn defrag_candidates(&self) -> Vec<Candidate> {
            self.nodes
                .iter()
                .enumerate()
                .map(|(i, n)| Candidate {
                    node: i,
                    pool: n.0,
                    used_milli: n.1,
                    model: Some(ModelId(n.2)),
                    gpus: n.3,
                })
                .collect()
        }
        fn jobs_on(&self, node: usize) -> Vec<u64> {
            self.nodes[node].4.clone()
        }
        fn movable(&self, job: u64) -> bool {
            !self.immovable.contains(&job)
        }
        fn try_moves(
            &mut self,
            node: usize,
            jobs: &[u64],
            then: Option<u64>,
        ) -> Option<(Vec<Placement>, Option<Placement>)> {
            let n = &self.nodes[node];
            n.5.then(|| (vec![on(n.6); jobs.len()], then.map(|_| on(node))))
        }
        fn drain(&mut self, node: usize, _: &[u64], _: Vec<Placement>) {
            self.drained.push(node);
        }
        fn empty_for(&mut self, node: usize, _: &[u64], _: Vec<Placement>, job: u64, _: Placement) {
            self.emptied.push((node, job));
        }
    }

    #[test]
    fn consolidation_takes_the_lightest_node_that_empties_and_keeps_pool_minimums() {
        let mut w = Toy {
            nodes: vec![
                (0, 500, 0, 8, vec![1], true, 3),    // light, fits: first
                (0, 100, 0, 8, vec![2], false, 3),   // lightest, but its job fits nowhere
                (1, 200, 0, 8, vec![3], true, 3),    // pool 1 is at its minimum
                (0, 900, 0, 8, vec![4], true, 0),    // receives node 0's job: kept
                (0, 950, 0, 8, vec![5, 6], true, 1), // an immovable job
                (0, 990, 0, 8, vec![], true, 1),     // runs nothing
            ],
            immovable: vec![6],
            ..Toy::default()
        };
        let mut counts = vec![6, 1];
        let drained = consolidate(&mut w, &mut counts, &[0, 1], usize::MAX);
        assert_eq!(drained, vec![0]);
        assert_eq!(w.drained, vec![0]);
        assert_eq!(counts, vec![5, 1]);
        // One at a time when asked, and never below a pool's minimum.
        let mut counts = vec![6, 2];
        assert_eq!(consolidate(&mut w, &mut counts, &[5, 1], 1), vec![2]);
        assert_eq!(consolidate(&mut w, &mut counts, &[5, 1], 1), vec![0]);
        assert!(consolidate(&mut w, &mut counts, &[5, 1], 9).is_empty());
        assert_eq!(counts, vec![5, 1]);
    }

    #[test]
    fn defragmentation_serves_whole_gpu_single_node_jobs_on_a_node_of_their_model() {
        let mut w = Toy {
            nodes: vec![
                (0, 100, 1, 8, vec![1], true, 2), // lightest, but the wrong model
                (0, 300, 0, 4, vec![2], true, 2), // too few GPUs for 8
                (0, 400, 0, 8, vec![3], true, 2), // the one
                (0, 200, 0, 8, vec![4], false, 2),
            ],
            ..Toy::default()
        };
        let whole = |k: u8, nodes: u16| JobRequest {
            nodes,
            gpu: GpuRequest::Whole(k),
            models: ModelChoice::AnyOf(vec![ModelId(0)]),
            ..JobRequest::default()
        };
        let (gang, frac, eight) = (whole(8, 2), JobRequest::default(), whole(8, 1));
        let stuck = [(10, &gang), (11, &frac), (12, &eight), (13, &eight)];
        assert_eq!(defragment(&mut w, &stuck, 1), vec![12]);
        assert_eq!(w.emptied, vec![(2, 12)]);
        // Only the first few stuck jobs are looked at.
        let many: Vec<(u64, &JobRequest)> = (0..DEFRAG_JOBS as u64)
            .map(|i| (i, &frac))
            .chain([(99, &eight)])
            .collect();
        assert!(defragment(&mut w, &many, 9).is_empty());
    }
}
