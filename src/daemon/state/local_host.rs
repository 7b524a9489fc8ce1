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
        let seen = self
            .host_telemetry()
            .is_some_and(|t| t.sampled_at.is_some() || t.unavailable.is_some());
        if wants_gpus && !seen {
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
                if let (false, Some(node)) = (mig.is_empty(), self.host_node) {
                    self.measured
                        .entry(node)
                        .or_default()
                        .assigned
                        .insert(id, mig);
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
        let Some(tel) = self.host_telemetry() else {
            return Err("it was granted GPUs but this host has no NVML sample yet".to_string());
        };
        if let Some(reason) = &tel.unavailable {
            return Err(format!(
                "it was granted GPUs but NVML is not available here ({reason})"
            ));
        }
        let mut ids: Vec<String> = Vec::new();
        for g in grants {
            let id = match g.share {
                GpuShare::Mig { profile, .. } => {
                    let free = tel
                        .free_mig_instance(g.gpu, profile.memory_gb)
                        .filter(|u| !ids.contains(u));
                    free.ok_or(format!(
                        "GPU {} has no free MIG instance of {}g.{}gb (create one with `nvidia-smi mig -cgi {}g.{}gb -C`)",
                        g.gpu, profile.compute, profile.memory_gb, profile.compute, profile.memory_gb
                    ))?
                }
                _ => tel
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

    /// This host's NVML telemetry (`None` when the fleet does not include this host).
    pub(super) fn host_telemetry(&self) -> Option<&crate::daemon::host::HostTelemetry> {
        self.measured.get(&self.host_node?)
    }

    /// An NVML sample of this host (or why there is none): see `observe_node`.
    pub fn observe_host(
        &mut self,
        found: crate::backend::local::nvml::Discovery,
    ) -> Result<(), EngineError> {
        let Some(node) = self.host_node else {
            return Ok(());
        };
        let groups: HashMap<u32, JobId> = self.local.groups().map(|(j, g)| (g, j)).collect();
        self.observe_node(node, found, &groups)?;
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
