//! The local host: launching placed jobs as process groups, noticing their exits, and reading
//! NVML's samples (foreign processes, MIG mode, per-job utilization).

use super::*;

impl State {
    /// Local processes: SIGKILL those past their grace, and record the ones that exited (a
    /// preempted one requeues; otherwise its exit code decides completed or failed).
    pub(super) fn poll_local(&mut self) -> Result<(), EngineError> {
        self.local.kill_due(self.now);
        for (id, exit) in self.local.exited() {
            self.engine.store().remove_local_run(id)?;
            let preempted = self
                .engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Preempting);
            if preempted {
                self.engine.requeued(id, self.now)?;
                self.log(format!("job {id} stopped ({exit:?}) and requeued"));
            } else if self
                .engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Running)
            {
                self.engine.finished(id, exit.success(), self.now)?;
                self.log(format!("job {id} exited on the local host: {exit:?}"));
            }
        }
        Ok(())
    }

    /// Starts a job placed on this host as a process group; a job that cannot start fails with
    /// the reason.
    pub(super) fn launch_local(&mut self, id: JobId) -> Result<(), EngineError> {
        let Some(j) = self.engine.job(id) else {
            return Ok(());
        };
        let wants_gpus = j
            .placement
            .as_ref()
            .is_some_and(|p| p.nodes.iter().any(|n| !n.gpus.is_empty()));
        if wants_gpus && self.host.sampled_at.is_none() && self.host.unavailable.is_none() {
            // Placed on a GPU the hold before NVML's first sample could not cover (MIG mode):
            // back to the queue until the host has been seen.
            self.engine
                .lost(id, self.now, "waiting for NVML's first sample of this host")?;
            return Ok(());
        }
        let gpus: Result<Vec<String>, String> = if wants_gpus {
            self.host_gpu_ids(
                j.placement
                    .iter()
                    .flat_map(|p| &p.nodes)
                    .flat_map(|n| &n.gpus),
            )
        } else {
            Ok(Vec::new())
        };
        let spec = j.spec.clone();
        let j_placement = j.placement.clone();
        let mig: Vec<String> = gpus
            .iter()
            .flatten()
            .filter(|u| u.starts_with("MIG-"))
            .cloned()
            .collect();
        let launch = gpus.and_then(|g| launch_of(id, &spec, g, crate::backend::Gang::default()));
        match launch.and_then(|l| Ok((self.local.launch(&l)?, l.token))) {
            Ok((pgid, token)) => {
                if !mig.is_empty() {
                    self.host.assigned.insert(id, mig);
                }
                let run = crate::daemon::journal::LocalRunRecord {
                    job: id,
                    pgid,
                    placement: j_placement
                        .as_ref()
                        .and_then(|p| serde_json::to_string(p).ok()),
                    started_at: Some(self.now),
                    token: Some(token),
                };
                self.engine.store().add_local_run(&run)?;
                self.log(format!(
                    "job {id} started on the local host as process group {pgid}"
                ));
            }
            Err(why) => {
                self.engine.finished(id, false, self.now)?;
                self.record_job(
                    id,
                    "local",
                    format!("could not start on the local host: {why}"),
                )?;
            }
        }
        Ok(())
    }

    /// The UUIDs for `CUDA_VISIBLE_DEVICES` of GPU grants on this host, from the latest NVML
    /// sample: the GPU's own, or for a MIG slice a MIG instance of that size not yet given out.
    pub(super) fn host_gpu_ids<'a>(
        &self,
        grants: impl Iterator<Item = &'a crate::model::GpuGrant>,
    ) -> Result<Vec<String>, String> {
        if let Some(reason) = &self.host.unavailable {
            return Err(format!(
                "it was granted GPUs but NVML is not available here ({reason})"
            ));
        }
        let mut ids: Vec<String> = Vec::new();
        for g in grants {
            let id = match g.share {
                GpuShare::Mig { profile, .. } => {
                    let free = self
                        .host
                        .free_mig_instance(g.gpu, profile.memory_gb)
                        .filter(|u| !ids.contains(u));
                    free.ok_or(format!(
                        "GPU {} has no free MIG instance of {}g.{}gb (create one with `nvidia-smi mig -cgi {}g.{}gb -C`)",
                        g.gpu, profile.compute, profile.memory_gb, profile.compute, profile.memory_gb
                    ))?
                }
                _ => self
                    .host
                    .uuid(g.gpu)
                    .map(str::to_string)
                    .ok_or(format!("this host has no GPU {}", g.gpu))?,
            };
            ids.push(id);
        }
        Ok(ids)
    }

    /// The process group a job runs in on this host, if it runs here.
    pub fn local_process_group(&self, id: JobId) -> Option<u32> {
        self.local.runs.get(&id).map(|r| r.pgid)
    }

    /// Whether the fleet has this host in it (a `provider = "local"` pool): the daemon then
    /// samples NVML and sends what it sees to `observe_host`.
    pub fn has_local_host(&self) -> bool {
        self.host_node.is_some()
    }

    /// An NVML sample of this host (or why there is none): telemetry for the console and
    /// reclaim, and GPUs busy with processes gantry did not start held out of the scheduler's
    /// reach until those processes exit.
    pub fn observe_host(
        &mut self,
        found: crate::backend::local::nvml::Discovery,
    ) -> Result<(), EngineError> {
        let Some(node) = self.host_node else {
            return Ok(());
        };
        let groups: HashMap<u32, JobId> = self.local.groups().map(|(j, g)| (g, j)).collect();
        let nid = NodeId(node as u32);
        let jobs: Vec<(JobId, Vec<u8>)> = self
            .local
            .runs
            .keys()
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
        let first = self.host.sampled_at.is_none() && self.host.unavailable.is_none();
        let changes = self.host.observe(self.now, found, &groups, &jobs, keep);
        // Each GPU's MIG mode follows the host's (the operator's MIG manager decides it).
        let modes: Vec<(u8, bool)> = self
            .host
            .gpus
            .iter()
            .filter_map(|g| Some((u8::try_from(g.index).ok()?, g.mig_enabled?)))
            .collect();
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
                    "GPU {g} on this host is {} MIG mode (NVML)",
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
            for g in 0..self.engine.fleet().nodes[node].gpus.len() as u8 {
                if !self.host.foreign.contains_key(&g) {
                    self.engine.release_gpu(nid, g);
                }
            }
        }
        for change in changes {
            match change {
                crate::daemon::host::HostChange::Unavailable(reason) => {
                    self.record("local", format!("{reason}; jobs on this host get no GPUs"))?;
                }
                crate::daemon::host::HostChange::Foreign { gpu, pids, mib } => {
                    let held = self.engine.hold_gpu(nid, gpu) || self.engine.is_held(nid, gpu);
                    let pids: Vec<String> = pids.iter().map(u32::to_string).collect();
                    self.record(
                        "local",
                        format!(
                            "GPU {gpu} on this host is busy with processes gantry did not start (pid {}, {mib} MiB){}",
                            pids.join(", "),
                            if held {
                                "; not allocated until they exit"
                            } else {
                                "; it shares a GPU with a gantry job"
                            }
                        ),
                    )?;
                }
                crate::daemon::host::HostChange::Cleared { gpu } => {
                    if self.engine.release_gpu(nid, gpu) {
                        self.record(
                            "local",
                            format!("GPU {gpu} on this host: the foreign processes exited; it can be allocated again"),
                        )?;
                    }
                }
            }
        }
        // A GPU still foreign that could not be held (a gantry job was on it) is held once free.
        let pending: Vec<u8> = self
            .host
            .foreign
            .keys()
            .copied()
            .filter(|&g| !self.engine.is_held(nid, g))
            .collect();
        for g in pending {
            self.engine.hold_gpu(nid, g);
        }
        self.snapshot = self.build_snapshot();
        Ok(())
    }
}

/// A job's launch on one node: its spec's commands and environment, a fresh run token, the
/// GPUs to make visible and the node's place in the gang.
pub(super) fn launch_of(
    id: JobId,
    spec: &crate::spec::JobSpec,
    gpus: Vec<String>,
    gang: crate::backend::Gang,
) -> Result<crate::backend::Launch, String> {
    let token = crate::daemon::auth::new_token()
        .map_err(|e| format!("cannot read /dev/urandom for the run's token: {e}"))?;
    let run = spec
        .run
        .clone()
        .ok_or("the spec has no `run` command to start")?;
    Ok(crate::backend::Launch {
        job: id,
        token,
        setup: spec.setup.clone(),
        run,
        workdir: spec.workdir.clone(),
        envs: spec.envs.clone(),
        gpus,
        checkpoint_dir: spec.checkpoint.as_ref().and_then(|c| c.dir.clone()),
        gang,
    })
}
