//! What `/metrics` exports per GPU and per job's GPU, from real hosts' NVML samples, with the
//! labels the DCGM exporter uses (`gpu`, `UUID`, `modelName`, `Hostname`) so gantry's jobs join
//! DCGM's series in PromQL. The simulated fleet's modelled GPUs are not exported one by one.

use super::seen::Seen;
use crate::daemon::journal::JobId;
use crate::model::GpuShare;
use serde::Serialize;

/// One measured GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GpuMetric {
    pub gpu: u32,
    pub uuid: String,
    /// NVML's name, as DCGM's `modelName` ("NVIDIA H100 80GB HBM3").
    pub model_name: String,
    /// The host's own name (what DCGM's `Hostname` says), or the node's before it said.
    pub hostname: String,
    pub node: String,
    pub pool: String,
    pub util_pct: f64,
    pub memory_used_bytes: u64,
    pub memory_total_bytes: u64,
    pub power_w: Option<f64>,
    pub temperature_c: Option<u32>,
}

/// A running job's GPU on a real host.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct JobGpuMetric {
    pub job: JobId,
    pub team: String,
    pub uuid: String,
    pub hostname: String,
    pub gpu: u32,
    /// The MIG instance it was given (empty for a whole GPU or a share), and that
    /// instance's GPU instance id (DCGM's `GPU_I_ID`).
    pub mig_uuid: String,
    pub gpu_instance_id: Option<u32>,
}

impl Seen<'_> {
    /// The measured GPUs of real hosts and the running jobs' GPUs there.
    pub fn gpu_metrics(&self) -> (Vec<GpuMetric>, Vec<JobGpuMetric>) {
        let fleet = self.engine.fleet();
        let hostname = |node: usize| {
            self.runs
                .hostname(node)
                .map_or_else(|| fleet.nodes[node].name.clone(), str::to_string)
        };
        let mut gpus = Vec::new();
        for (node, t) in self.telemetry.hosts() {
            for s in &t.gpus {
                gpus.push(GpuMetric {
                    gpu: s.index,
                    uuid: s.uuid.clone(),
                    model_name: s.name.clone(),
                    hostname: hostname(node),
                    node: fleet.nodes[node].name.clone(),
                    pool: fleet.pool_path(fleet.nodes[node].pool),
                    util_pct: f64::from(s.util_gpu_pct),
                    memory_used_bytes: s.memory_used_mib * 1024 * 1024,
                    memory_total_bytes: s.memory_total_mib * 1024 * 1024,
                    power_w: s.power_w,
                    temperature_c: s.temperature_c,
                });
            }
        }
        let mut jobs = Vec::new();
        // Real hosts' runs only (the simulated fleet's are most of them at scale, and never
        // measured): this runs at every publication.
        for id in self.runs.journaled() {
            let Some(j) = self.engine.job(id) else {
                continue;
            };
            let Some(p) = &j.placement else { continue };
            for grant in &p.nodes {
                let node = grant.node.index();
                let Some(t) = self.telemetry.of(node) else {
                    continue;
                };
                if !self.runs.has_part_on(id, node) {
                    continue;
                }
                let mut mig = t.assigned.get(&id).into_iter().flatten();
                for g in &grant.gpus {
                    let mig_uuid = match g.share {
                        GpuShare::Mig { .. } => mig.next().cloned().unwrap_or_default(),
                        _ => String::new(),
                    };
                    let gpu_instance_id = t
                        .gpus
                        .iter()
                        .flat_map(|s| &s.mig_instances)
                        .find(|m| !mig_uuid.is_empty() && m.uuid == mig_uuid)
                        .and_then(|m| m.gpu_instance_id);
                    jobs.push(JobGpuMetric {
                        job: id,
                        team: self.team_name(j.team),
                        uuid: t.uuid(g.gpu).unwrap_or_default().to_string(),
                        hostname: hostname(node),
                        gpu: u32::from(g.gpu),
                        mig_uuid,
                        gpu_instance_id,
                    });
                }
            }
        }
        (gpus, jobs)
    }
}
