//! What a node's part of a job is started with: its spec's commands and environment, a fresh
//! run token, and the IDs its GPUs go by on that host.

use super::{HostRun, Part, PartState, Runs};
use crate::backend::Gang;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::local_gpus::HostTelemetry;
use crate::daemon::state::cx::Cx;
use crate::daemon::state::nodes::Nodes;
use crate::daemon::state::telemetry::Telemetry;
use crate::model::GpuShare;

impl Runs {
    /// Starts every node's part of a placed job through its pool's runner: the same run
    /// token, each node its rank, the addresses of all (head first) and the IDs of its GPUs
    /// there.
    pub(in crate::daemon::state) fn launch(
        &mut self,
        (cx, nodes, telemetry): (&mut Cx, &Nodes, &mut Telemetry),
        id: JobId,
    ) -> Result<(), EngineError> {
        let Some(j) = cx.engine.job(id) else {
            return Ok(());
        };
        let Some(p) = j.placement.clone() else {
            return Ok(());
        };
        let spec = j.spec.clone();
        let name = j.name.clone();
        let owner = j.user.clone();
        let real = p.nodes.iter().any(|g| self.is_real(g.node.index()));
        // A GPU job on a host whose NVML has not answered yet waits (see `observe_node`).
        let waiting = p
            .nodes
            .iter()
            .find(|g| !g.gpus.is_empty() && telemetry.awaits_first_sample(g.node.index()));
        if let Some(g) = waiting {
            let name = cx.node_name(g.node.index());
            cx.engine.lost(
                id,
                cx.now,
                &format!("waiting for NVML's first sample of {name}"),
            )?;
            return Ok(());
        }
        let ips: Vec<String> = p
            .nodes
            .iter()
            .map(|g| self.host_address(cx.engine.fleet(), g.node.index()))
            .collect();
        let gpus: Result<Vec<Vec<String>>, String> = p
            .nodes
            .iter()
            .map(|g| {
                let n = g.node.index();
                let host = (self.is_real(n), &*cx.node_name(n), telemetry.of(n));
                gpu_ids(host, &g.gpus)
            })
            .collect();
        let launch = gpus.and_then(|gpus| {
            if real && spec.run.is_none() {
                return Err("the spec has no `run` command to start".to_string());
            }
            launch_of(id, name, owner, &spec).map(|l| (l, gpus))
        });
        let (launch, gpus) = match launch {
            Ok(l) => l,
            Err(why) => {
                let why = format!("could not start: {why}");
                cx.engine.finished_because(id, false, cx.now, &why)?;
                cx.log(format!("job {id} {why}"));
                return Ok(());
            }
        };
        let record = crate::daemon::journal::RemoteRunRecord {
            job: id,
            token: launch.token.clone(),
            placement: serde_json::to_string(&p).unwrap_or_default(),
            started_at: cx.now,
            nodes: Some(
                p.nodes
                    .iter()
                    .map(|g| cx.node_name(g.node.index()))
                    .collect(),
            ),
        };
        if real {
            cx.engine.add_remote_run(&record)?;
        }
        let mut parts = Vec::new();
        for ((rank, g), ids) in p.nodes.iter().enumerate().zip(gpus) {
            let node = g.node.index();
            let mig: Vec<String> = ids
                .iter()
                .filter(|u| u.starts_with("MIG-"))
                .cloned()
                .collect();
            if !mig.is_empty() {
                telemetry.of_mut(node).assigned.insert(id, mig);
            }
            let mut l = launch.clone();
            l.gpus = ids;
            if l.image.is_some() {
                let pool = cx.engine.fleet().nodes[node].pool.index();
                l.runtime = nodes.pool(pool).container_runtime.clone();
            }
            l.gang = Gang {
                rank: rank as u16,
                ips: ips.clone(),
            };
            if let Some((runner, host)) = self.runner(node) {
                runner.start(host, l);
            }
            parts.push(Part {
                node,
                state: PartState::Starting,
                waits: None,
                since: cx.now,
                pgid: None,
                handle: None,
            });
        }
        let hosts: Vec<String> = parts.iter().map(|p| cx.node_name(p.node)).collect();
        self.by_job.insert(
            id,
            HostRun {
                token: launch.token,
                parts,
                journaled: real,
            },
        );
        if real {
            cx.log(format!("job {id} starting on {}", hosts.join(", ")));
        }
        Ok(())
    }
}

/// The IDs for `CUDA_VISIBLE_DEVICES` of GPU grants on node `name` (`real`: a real host;
/// `measured`: what its NVML said). On the simulated fleet: the indices. On a host NVML
/// measures: each GPU's UUID, or for a MIG slice a MIG instance of that size no other job
/// holds. On one it does not (GPUs as declared): the indices, and no MIG slices (no instance
/// to name).
pub(in crate::daemon::state) fn gpu_ids(
    (real, name, measured): (bool, &str, Option<&HostTelemetry>),
    grants: &[crate::model::GpuGrant],
) -> Result<Vec<String>, String> {
    if !real {
        // The simulated fleet runs no processes: its GPUs go by their indices.
        return Ok(grants.iter().map(|g| g.gpu.to_string()).collect());
    }
    let tel = measured.filter(|t| t.sampled_at.is_some());
    let mut ids: Vec<String> = Vec::new();
    for g in grants {
        let id = match (g.share, tel) {
                (GpuShare::Mig { profile, .. }, Some(tel)) => {
                    let free = tel
                        .free_mig_instance(g.gpu, profile.memory_gb)
                        .filter(|u| !ids.contains(u));
                    free.ok_or(format!(
                        "GPU {} on {name} has no free MIG instance of {}g.{}gb (create one with `nvidia-smi mig -cgi {}g.{}gb -C`)",
                        g.gpu, profile.compute, profile.memory_gb, profile.compute, profile.memory_gb
                    ))?
                }
                (GpuShare::Mig { .. }, None) => {
                    return Err(format!(
                        "it was granted a MIG slice of GPU {} on {name}, whose GPUs NVML does not measure (no MIG instance to name)",
                        g.gpu
                    ))
                }
                (_, Some(tel)) => tel
                    .uuid(g.gpu)
                    .map(str::to_string)
                    .ok_or(format!("{name} has no GPU {}", g.gpu))?,
                (_, None) => g.gpu.to_string(),
            };
        ids.push(id);
    }
    Ok(ids)
}

/// A job's launch: its spec's commands and environment and a fresh run token (each node's
/// GPUs and place in the gang are filled in per node).
pub(in crate::daemon::state) fn launch_of(
    id: JobId,
    name: Option<String>,
    owner: Option<String>,
    spec: &crate::spec::JobSpec,
) -> Result<crate::backend::Launch, String> {
    let token = crate::daemon::auth::new_token().map_err(|e| {
        format!("cannot read random bytes from the kernel for the run's token: {e}")
    })?;
    let mut run = spec.run.clone().unwrap_or_default();
    let mut setup = spec.setup.clone();
    if let Some(g) = &spec.git_workdir {
        let (clone, enter) = git_workdir_scripts(g);
        setup = Some(format!("{clone}{}", setup.unwrap_or_default()));
        run = format!("{enter}{run}");
    }
    // Mounts first: before the clone and the setup that may read them.
    if !spec.file_mounts.is_empty() {
        let mounts = crate::backend::mounts::setup_prelude(&spec.file_mounts);
        setup = Some(format!("{mounts}{}", setup.unwrap_or_default()));
        run = format!(
            "{}{run}",
            crate::backend::mounts::run_prelude(&spec.file_mounts)
        );
    }
    Ok(crate::backend::Launch {
        job: id,
        token,
        name,
        time_limit_s: spec.time_limit_s,
        setup,
        run,
        workdir: spec.workdir.clone(),
        local_mounts: crate::backend::mounts::local_sources(&spec.file_mounts),
        mount_points: crate::backend::mounts::mount_points(&spec.file_mounts),
        envs: spec
            .envs
            .iter()
            .chain(&spec.secrets)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        gpus: Vec::new(),
        checkpoint_dir: spec.checkpoint.as_ref().and_then(|c| c.dir.clone()),
        image: spec.image.clone(),
        runtime: None,
        adopt: spec.adopt.clone(),
        gang: crate::backend::Gang::default(),
        owner,
    })
}

/// SkyPilot's `workdir: {url, ref}`, on any backend: setup first clones the repository (at
/// `ref`) into a directory of the node's own (`~/.gantry/git/HOST/job-ID`, fresh for each
/// run; per host because lab homes are shared), and setup and run start in it. A clone that
/// fails fails the job's setup, saying so.
fn git_workdir_scripts(g: &crate::spec::GitWorkdir) -> (String, String) {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let dir = r#"gantry_workdir="$HOME/.gantry/git/$(hostname)/job-$GANTRY_JOB_ID""#;
    let url = quote(&g.url);
    let checkout = g.reference.as_deref().map_or(String::new(), |r| {
        format!(" && git checkout --quiet {}", quote(r))
    });
    let at = g
        .reference
        .as_deref()
        .map_or(String::new(), |r| format!(" at {}", quote(r)));
    let clone = format!(
        "{dir}\nrm -rf \"$gantry_workdir\" && mkdir -p \"$gantry_workdir\" && git clone --quiet -- {url} \"$gantry_workdir\" && cd \"$gantry_workdir\"{checkout} || {{ echo \"gantry: cannot clone the workdir \"{url}\"{at}\" >&2; exit 1; }}\n"
    );
    let enter = format!("{dir}\ncd \"$gantry_workdir\" || exit 1\n");
    (clone, enter)
}
