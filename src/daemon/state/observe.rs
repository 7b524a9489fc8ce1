//! NVML samples of real hosts (this one, and SSH hosts through their agents): telemetry for
//! the console, reclaim and `/metrics`; each GPU's MIG mode as the host has it; GPUs busy with
//! processes gantry did not start held out of the scheduler's reach until those exit.

use super::cx::Cx;
use super::telemetry::Telemetry;
use crate::backend::Discovery;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::local_gpus::HostChange;
use crate::model::NodeId;
use std::collections::HashMap;

impl Telemetry {
    /// A sample of node `node`'s GPUs (or why there is none), said in the events as its
    /// runner's `source`. `groups` maps the process groups of gantry's runs on that host to
    /// their jobs; each series keeps `keep_s`. The caller rebuilds the snapshot.
    pub(super) fn observe(
        &mut self,
        (cx, source, keep_s): (&mut Cx, &str, f64),
        node: usize,
        found: Discovery,
        groups: &HashMap<u32, JobId>,
    ) -> Result<(), EngineError> {
        let nid = NodeId(node as u32);
        // The GPUs each running job holds on this node (its utilization is read per job).
        let jobs: Vec<(JobId, Vec<u8>)> = groups
            .values()
            .filter_map(|&id| {
                let p = cx.engine.job(id)?.placement.as_ref()?;
                let gpus: Vec<u8> = p
                    .nodes
                    .iter()
                    .filter(|n| n.node == nid)
                    .flat_map(|n| n.gpus.iter().map(|g| g.gpu))
                    .collect();
                Some((id, gpus))
            })
            .collect();
        let now = cx.now;
        let tel = self.of_mut(node);
        let first = tel.sampled_at.is_none() && tel.unavailable.is_none();
        let changes = tel.observe(now, found, groups, &jobs, keep_s);
        // Each GPU's MIG mode follows the host's (the operator's MIG manager decides it).
        let modes: Vec<(u8, bool)> = tel
            .gpus
            .iter()
            .filter_map(|g| Some((u8::try_from(g.index).ok()?, g.mig_enabled?)))
            .collect();
        let on_host = cx.node_name(node);
        for (g, on) in modes {
            let current = cx.engine.fleet().nodes[node]
                .gpus
                .get(usize::from(g))
                .map(|gpu| gpu.mig.is_some());
            if current.is_none_or(|c| c == on) {
                continue;
            }
            // Held GPUs are not idle to the cluster: release, switch, hold again.
            let held = cx.engine.release_gpu(nid, g);
            if cx.engine.set_mig_mode(nid, g, on) {
                cx.log(format!(
                    "GPU {g} on {on_host} is {} MIG mode (NVML)",
                    if on { "in" } else { "out of" }
                ));
            }
            if held {
                cx.engine.hold_gpu(nid, g);
            }
        }
        if first {
            // The GPUs held since the start: free those without foreign processes (all of them
            // when NVML is absent, so that a job granted one fails with the reason).
            let foreign = &self.of_mut(node).foreign;
            let free: Vec<u8> = (0..cx.engine.fleet().nodes[node].gpus.len() as u8)
                .filter(|g| !foreign.contains_key(g))
                .collect();
            for g in free {
                cx.engine.release_gpu(nid, g);
            }
        }
        for change in changes {
            match change {
                HostChange::Unavailable(reason) => {
                    cx.record(
                        source,
                        format!("{reason}: GPUs on {on_host} are as declared, not measured"),
                    )?;
                }
                HostChange::Foreign { gpu, pids, mib } => {
                    let held = cx.engine.hold_gpu(nid, gpu) || cx.engine.is_held(nid, gpu);
                    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                    cx.record(
                        source,
                        format!(
                            "GPU {gpu} on {on_host} is busy with processes gantry did not start (pid {}, {mib} MiB){}",
                            pids.join(", "),
                            if held {
                                "; not allocated until they exit"
                            } else {
                                "; it shares a GPU with a gantry job"
                            }
                        ),
                    )?;
                }
                HostChange::Cleared { gpu } => {
                    if cx.engine.release_gpu(nid, gpu) {
                        cx.record(
                            source,
                            format!("GPU {gpu} on {on_host}: the foreign processes exited; it can be allocated again"),
                        )?;
                    }
                }
            }
        }
        // A GPU still foreign that could not be held (a gantry job was on it) is held once free.
        let pending: Vec<u8> = self
            .of_mut(node)
            .foreign
            .keys()
            .copied()
            .filter(|&g| !cx.engine.is_held(nid, g))
            .collect();
        for g in pending {
            cx.engine.hold_gpu(nid, g);
        }
        Ok(())
    }
}
