//! NVML samples of real hosts (this one, and SSH hosts through their agents): telemetry for
//! the console, reclaim and `/metrics`; each GPU's MIG mode as the host has it; GPUs busy with
//! processes gantry did not start held out of the scheduler's reach until those exit.

use super::State;
use crate::backend::Discovery;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::local_gpus::HostChange;
use crate::model::NodeId;
use std::collections::HashMap;

impl State {
    /// A sample of the real host named `node` as if its agent had sent it, the process groups
    /// of gantry's runs being those the host reported when they started: for tests, which
    /// stand in for NVML (no GPU in CI). The snapshot is rebuilt.
    pub fn observe_sample(&mut self, node: &str, found: Discovery) -> Result<(), EngineError> {
        let fleet = self.engine.fleet();
        let Some(i) = fleet.nodes.iter().position(|n| n.name == node) else {
            return Err(EngineError::Backend(format!("no node named {node}")));
        };
        let groups: HashMap<u32, JobId> = self
            .hosts
            .runs
            .iter()
            .flat_map(|(&id, r)| {
                r.parts
                    .iter()
                    .filter(|p| p.node == i)
                    .filter_map(move |p| Some((p.pgid?, id)))
            })
            .collect();
        self.observe_node(i, found, &groups)?;
        self.rebuild_snapshot();
        Ok(())
    }

    /// The real host named `node` answering with `info`, as if its agent had said hello: for
    /// tests, which stand in for a host's NVML (no GPU in CI). The snapshot is rebuilt.
    pub fn observe_hello(
        &mut self,
        node: &str,
        info: crate::backend::HostInfo,
    ) -> Result<(), EngineError> {
        let fleet = self.engine.fleet();
        let Some(i) = fleet.nodes.iter().position(|n| n.name == node) else {
            return Err(EngineError::Backend(format!("no node named {node}")));
        };
        let Some(&(pool, host)) = self.hosts.at.get(&i) else {
            return Err(EngineError::Backend(format!("{node} is not a host")));
        };
        self.host_up(pool, host, i, info)?;
        self.rebuild_snapshot();
        Ok(())
    }

    /// A sample of node `node`'s GPUs (or why there is none). `groups` maps the process groups
    /// of gantry's runs on that host to their jobs. The caller rebuilds the snapshot.
    pub fn observe_node(
        &mut self,
        node: usize,
        found: Discovery,
        groups: &HashMap<u32, JobId>,
    ) -> Result<(), EngineError> {
        let nid = NodeId(node as u32);
        // The GPUs each running job holds on this node (its utilization is read per job).
        let jobs: Vec<(JobId, Vec<u8>)> = groups
            .values()
            .filter_map(|&id| {
                let p = self.engine.job(id)?.placement.as_ref()?;
                let gpus: Vec<u8> = p
                    .nodes
                    .iter()
                    .filter(|n| n.node == nid)
                    .flat_map(|n| n.gpus.iter().map(|g| g.gpu))
                    .collect();
                Some((id, gpus))
            })
            .collect();
        let keep = self.reclaim.window_s + 120.0;
        let now = self.now;
        let tel = self.measured.entry(node).or_default();
        let first = tel.sampled_at.is_none() && tel.unavailable.is_none();
        let changes = tel.observe(now, found, groups, &jobs, keep);
        // Each GPU's MIG mode follows the host's (the operator's MIG manager decides it).
        let modes: Vec<(u8, bool)> = tel
            .gpus
            .iter()
            .filter_map(|g| Some((u8::try_from(g.index).ok()?, g.mig_enabled?)))
            .collect();
        let on_host = self.node_name(node);
        let source = self.hosts.kind(node);
        for (g, on) in modes {
            let current = self.engine.fleet().nodes[node]
                .gpus
                .get(usize::from(g))
                .map(|gpu| gpu.mig.is_some());
            if current.is_none_or(|c| c == on) {
                continue;
            }
            // Held GPUs are not idle to the cluster: release, switch, hold again.
            let held = self.engine.release_gpu(nid, g);
            if self.engine.set_mig_mode(nid, g, on) {
                self.log(format!(
                    "GPU {g} on {on_host} is {} MIG mode (NVML)",
                    if on { "in" } else { "out of" }
                ));
            }
            if held {
                self.engine.hold_gpu(nid, g);
            }
        }
        if first {
            // The GPUs held since the start: free those without foreign processes (all of them
            // when NVML is absent, so that a job granted one fails with the reason).
            let foreign = &self.measured[&node].foreign;
            let free: Vec<u8> = (0..self.engine.fleet().nodes[node].gpus.len() as u8)
                .filter(|g| !foreign.contains_key(g))
                .collect();
            for g in free {
                self.engine.release_gpu(nid, g);
            }
        }
        for change in changes {
            match change {
                HostChange::Unavailable(reason) => {
                    self.record(
                        source,
                        format!("{reason}: GPUs on {on_host} are as declared, not measured"),
                    )?;
                }
                HostChange::Foreign { gpu, pids, mib } => {
                    let held = self.engine.hold_gpu(nid, gpu) || self.engine.is_held(nid, gpu);
                    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                    self.record(
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
                    if self.engine.release_gpu(nid, gpu) {
                        self.record(
                            source,
                            format!("GPU {gpu} on {on_host}: the foreign processes exited; it can be allocated again"),
                        )?;
                    }
                }
            }
        }
        // A GPU still foreign that could not be held (a gantry job was on it) is held once free.
        let pending: Vec<u8> = self.measured[&node]
            .foreign
            .keys()
            .copied()
            .filter(|&g| !self.engine.is_held(nid, g))
            .collect();
        for g in pending {
            self.engine.hold_gpu(nid, g);
        }
        Ok(())
    }
}
