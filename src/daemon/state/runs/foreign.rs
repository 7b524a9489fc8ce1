//! Work a backend's own scheduler runs beside gantry's (a Slurm cluster's jobs): the GPUs it
//! holds on a node are held out of gantry's reach, as GPUs busy with foreign processes are on
//! a host NVML watches, and let go when it ends. The backend says which work holds how many
//! GPUs; gantry holds that many of the node's GPUs its own jobs do not use.

use super::Runs;
use crate::backend::ForeignWork;
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::state::cx::Cx;
use crate::model::NodeId;

/// What is held on a node for foreign work.
#[derive(Clone, Debug, Default)]
pub(in crate::daemon::state) struct Held {
    /// The GPUs held, in the order they were.
    pub gpus: Vec<u8>,
    /// How many the work holds (more than `gpus` while gantry's own jobs hold the rest).
    pub want: usize,
    pub work: Vec<ForeignWork>,
}

impl Runs {
    /// GPUs held out for foreign work, over the fleet.
    pub(in crate::daemon::state) fn foreign_gpus_held(&self) -> usize {
        self.foreign.values().map(|h| h.gpus.len()).sum()
    }

    /// The foreign work on `node` now (all of it).
    pub(in crate::daemon::state) fn foreign_work(
        &mut self,
        cx: &mut Cx,
        node: usize,
        work: Vec<ForeignWork>,
    ) -> Result<(), EngineError> {
        let nid = NodeId(node as u32);
        let name = cx.node_name(node);
        let source = self.kind(node);
        let size = cx.engine.fleet().nodes[node].gpus.len();
        let want = (work.iter().map(|w| w.gpus as usize).sum::<usize>()).min(size);
        let mut held = self.foreign.remove(&node).unwrap_or_default();
        held.want = want;
        while held.gpus.len() > want {
            if let Some(g) = held.gpus.pop() {
                cx.engine.release_gpu(nid, g);
            }
        }
        top_up(cx.engine, nid, &mut held);
        let short = want - held.gpus.len();
        let started: Vec<&ForeignWork> = work.iter().filter(|w| !held.work.contains(w)).collect();
        let ended: Vec<&ForeignWork> = held.work.iter().filter(|w| !work.contains(w)).collect();
        let mut lines = Vec::new();
        for w in started {
            lines.push(format!(
                "{} holds {} GPU(s) on {name}: gantry does not allocate them while it runs",
                w.what, w.gpus
            ));
        }
        for w in ended {
            lines.push(format!(
                "{} on {name} ended: its {} GPU(s) can be allocated again",
                w.what, w.gpus
            ));
        }
        if short > 0 && !lines.is_empty() {
            lines.push(format!(
                "{name}: {short} GPU(s) of that are ones gantry's own jobs hold; they are held once free"
            ));
        }
        for line in lines {
            cx.record(source, line)?;
        }
        held.work = work;
        if !held.gpus.is_empty() || !held.work.is_empty() {
            self.foreign.insert(node, held);
        }
        Ok(())
    }

    /// Foreign work that holds GPUs gantry's jobs held when it was said gets them as they
    /// free up.
    pub(in crate::daemon::state) fn top_up_foreign(&mut self, engine: &mut Engine) {
        let short: Vec<usize> = self
            .foreign
            .iter()
            .filter(|(_, h)| h.gpus.len() < h.want)
            .map(|(&n, _)| n)
            .collect();
        for node in short {
            if let Some(mut held) = self.foreign.remove(&node) {
                top_up(engine, NodeId(node as u32), &mut held);
                self.foreign.insert(node, held);
            }
        }
    }

    /// What holds GPU `gpu` of `node` for foreign work, if anything does (for the console).
    pub(in crate::daemon::state) fn foreign_holder(&self, node: usize, gpu: u8) -> Option<String> {
        let held = self.foreign.get(&node)?;
        held.gpus.contains(&gpu).then(|| {
            let names: Vec<&str> = held.work.iter().map(|w| w.what.as_str()).collect();
            names.join("; ")
        })
    }
}

/// Holds free GPUs of `node` until `held` has as many as its work holds.
fn top_up(engine: &mut Engine, node: NodeId, held: &mut Held) {
    let size = engine.fleet().nodes[node.index()].gpus.len();
    for g in 0..size as u8 {
        if held.gpus.len() >= held.want {
            break;
        }
        if !held.gpus.contains(&g) && engine.hold_gpu(node, g) {
            held.gpus.push(g);
        }
    }
}
