//! What the views read — the snapshot's GPU readings, a pool or a node in detail, `/metrics`'
//! GPUs, why a job finds no room — borrowed from the components they are read from, each
//! through its own small API. A `Seen` changes nothing: whatever is computed from it is the
//! same however often it is.

use super::nodes::Nodes;
use super::runs::Runs;
use super::telemetry::Telemetry;
use crate::backend::discover::Built;
use crate::daemon::engine::Engine;
use crate::daemon::journal::JobId;
use crate::model::NodeId;
use std::collections::HashMap;

pub(super) struct Seen<'a> {
    pub engine: &'a Engine,
    pub nodes: &'a Nodes,
    pub runs: &'a Runs,
    pub telemetry: &'a Telemetry,
    /// What the cluster-built pools were built from (why one has no nodes).
    pub built: &'a Built,
    /// Team names, in the engine's order.
    pub teams: &'a [String],
    /// The daemon's clock.
    pub now: f64,
}

impl Seen<'_> {
    pub fn team_name(&self, i: usize) -> String {
        super::named(self.teams, i)
    }
}

/// The jobs holding part of node `i`, in id order.
pub(super) fn jobs_on(engine: &Engine, i: usize) -> Vec<JobId> {
    let node = NodeId(i as u32);
    engine
        .jobs()
        .filter(|j| {
            j.placement
                .as_ref()
                .is_some_and(|p| p.nodes.iter().any(|g| g.node == node))
        })
        .map(|j| j.id)
        .collect()
}

/// Every job holding part of a node that `which` picks, by node, in id order, each once
/// (`jobs_on` for many nodes in one walk of the jobs).
pub(super) fn jobs_by_node(
    engine: &Engine,
    which: impl Fn(usize) -> bool,
) -> HashMap<usize, Vec<JobId>> {
    let mut on: HashMap<usize, Vec<JobId>> = HashMap::new();
    for j in engine.live_jobs() {
        for g in j.placement.iter().flat_map(|p| &p.nodes) {
            if which(g.node.index()) {
                let ids = on.entry(g.node.index()).or_default();
                // Several grants of one job on one node list it once.
                if ids.last() != Some(&j.id) {
                    ids.push(j.id);
                }
            }
        }
    }
    for ids in on.values_mut() {
        ids.sort_unstable();
    }
    on
}
