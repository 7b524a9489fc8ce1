//! The local host's GPUs as the daemon sees them, from the NVML sampler: the latest sample,
//! each GPU's and each local job's utilization over the reclaim window (per process where
//! NVML reports it), and the GPUs busy with processes gantry did not start ("foreign").
//! Pure bookkeeping: the sampler does the IO and the state decides what to do with a change.

pub use crate::api::HostStatus;
use crate::backend::{Discovery, GpuSample};
use crate::daemon::journal::JobId;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// One utilization series: (daemon time, percent), oldest first.
pub type Series = VecDeque<(f64, f64)>;

/// What a sample changed that the daemon must act on or say.
#[derive(Clone, Debug, PartialEq)]
pub enum HostChange {
    /// NVML is not available (said once).
    Unavailable(String),
    /// A GPU became busy with processes gantry did not start.
    Foreign { gpu: u8, pids: Vec<u32>, mib: u64 },
    /// Its foreign processes are gone.
    Cleared { gpu: u8 },
}

#[derive(Debug, Default)]
pub struct HostTelemetry {
    pub driver: Option<String>,
    pub gpus: Vec<GpuSample>,
    pub sampled_at: Option<f64>,
    pub unavailable: Option<String>,
    gpu_util: Vec<Series>,
    job_util: HashMap<(JobId, u8), Series>,
    /// GPU → the foreign processes on it.
    pub foreign: BTreeMap<u8, Vec<u32>>,
    /// MIG instance UUIDs handed to running jobs.
    pub assigned: HashMap<JobId, Vec<String>>,
}

impl HostTelemetry {
    /// Takes a sample at `now`. `groups` maps process groups to the jobs gantry runs here;
    /// `jobs` lists, per local job, the host GPUs it holds. Series keep `keep_s` seconds.
    pub fn observe(
        &mut self,
        now: f64,
        found: Discovery,
        groups: &HashMap<u32, JobId>,
        jobs: &[(JobId, Vec<u8>)],
        keep_s: f64,
    ) -> Vec<HostChange> {
        let gpus = match found {
            Discovery::Unavailable { reason } => {
                let first = self.unavailable.is_none();
                self.unavailable = Some(reason.clone());
                return if first {
                    vec![HostChange::Unavailable(reason)]
                } else {
                    Vec::new()
                };
            }
            Discovery::Available { driver, gpus } => {
                self.driver = Some(driver);
                self.unavailable = None;
                gpus
            }
        };
        self.sampled_at = Some(now);
        let trim = |s: &mut Series| {
            while s.front().is_some_and(|(t, _)| *t < now - keep_s) {
                s.pop_front();
            }
        };
        self.gpu_util.resize_with(gpus.len(), Series::new);
        for (g, s) in gpus.iter().zip(&mut self.gpu_util) {
            s.push_back((now, f64::from(g.util_gpu_pct)));
            trim(s);
        }
        for (job, held) in jobs {
            for &g in held {
                let Some(sample) = gpus.get(usize::from(g)) else {
                    continue;
                };
                let s = self.job_util.entry((*job, g)).or_default();
                s.push_back((now, job_util(sample, *job, groups)));
                trim(s);
            }
        }
        self.job_util
            .retain(|(j, _), _| jobs.iter().any(|(k, _)| k == j));
        self.assigned
            .retain(|j, _| jobs.iter().any(|(k, _)| k == j));
        let mut changes = Vec::new();
        for g in &gpus {
            let gpu = g.index as u8;
            let foreign: Vec<&crate::backend::GpuProcess> = g
                .processes
                .iter()
                .filter(|p| p.pgid.is_none_or(|pg| !groups.contains_key(&pg)))
                .collect();
            let pids: Vec<u32> = foreign.iter().map(|p| p.pid).collect();
            if pids.is_empty() {
                if self.foreign.remove(&gpu).is_some() {
                    changes.push(HostChange::Cleared { gpu });
                }
            } else {
                if !self.foreign.contains_key(&gpu) {
                    changes.push(HostChange::Foreign {
                        gpu,
                        pids: pids.clone(),
                        mib: foreign.iter().filter_map(|p| p.used_mib).sum(),
                    });
                }
                self.foreign.insert(gpu, pids);
            }
        }
        self.gpus = gpus;
        changes
    }

    /// The latest utilization of a GPU, percent.
    pub fn util(&self, gpu: u8) -> Option<f64> {
        self.gpu_util.get(usize::from(gpu))?.back().map(|s| s.1)
    }

    /// A local job's utilization series on one of its GPUs.
    pub fn job_series(&self, job: JobId, gpu: u8) -> Option<&Series> {
        self.job_util.get(&(job, gpu))
    }

    /// The UUID of a whole GPU.
    pub fn uuid(&self, gpu: u8) -> Option<&str> {
        self.gpus
            .get(usize::from(gpu))
            .map(|g| g.uuid.as_str())
            .filter(|u| !u.is_empty())
    }

    /// A MIG instance of `gpu` with `memory_gb` of memory that no running job was given.
    pub fn free_mig_instance(&self, gpu: u8, memory_gb: u16) -> Option<String> {
        let taken: Vec<&String> = self.assigned.values().flatten().collect();
        self.gpus
            .get(usize::from(gpu))?
            .mig_instances
            .iter()
            .find(|m| {
                // NVML reports a 10 GB profile as about 9.75 GiB: match to the nearest GB.
                (m.memory_total_mib as f64 / 1024.0 - f64::from(memory_gb)).abs() < 1.0
                    && !taken.contains(&&m.uuid)
            })
            .map(|m| m.uuid.clone())
    }

    pub fn status(&self, now: f64) -> HostStatus {
        HostStatus {
            nvml: self.unavailable.is_none() && self.sampled_at.is_some(),
            driver: self.driver.clone(),
            gpus: self.gpus.len(),
            foreign_gpus: self.foreign.keys().copied().collect(),
            sample_age_s: self.sampled_at.map(|t| (now - t).max(0.0)),
            reason: self.unavailable.clone(),
        }
    }
}

/// A job's utilization of one GPU in a sample: the SM utilization of its own processes where
/// NVML reports it per process; else the GPU's, if the job's processes are on it or the GPU
/// lists no processes at all (a container's pids are invisible here); else 0 — the job holds
/// the GPU and runs nothing on it.
fn job_util(g: &GpuSample, job: JobId, groups: &HashMap<u32, JobId>) -> f64 {
    let own: Vec<_> = g
        .processes
        .iter()
        .filter(|p| p.pgid.and_then(|pg| groups.get(&pg)) == Some(&job))
        .collect();
    if own.iter().any(|p| p.sm_util_pct.is_some()) {
        return own
            .iter()
            .filter_map(|p| p.sm_util_pct)
            .map(f64::from)
            .sum::<f64>()
            .min(100.0);
    }
    if !own.is_empty() || g.processes.is_empty() {
        f64::from(g.util_gpu_pct)
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::GpuProcess;

    fn gpu(index: u32, util: u32, processes: Vec<GpuProcess>) -> GpuSample {
        GpuSample {
            index,
            uuid: format!("GPU-{index}"),
            util_gpu_pct: util,
            processes,
            ..GpuSample::default()
        }
    }

    fn proc(pid: u32, pgid: u32, sm: Option<u32>) -> GpuProcess {
        GpuProcess {
            pid,
            pgid: Some(pgid),
            used_mib: Some(1024),
            sm_util_pct: sm,
        }
    }

    fn sample(gpus: Vec<GpuSample>) -> Discovery {
        Discovery::Available {
            driver: "test".into(),
            gpus,
        }
    }

    #[test]
    fn per_process_utilization_decides_a_jobs_share_of_a_gpu() {
        let mut h = HostTelemetry::default();
        let groups = HashMap::from([(100, 1), (200, 2)]);
        // Two jobs share GPU 0: job 1 computes, job 2 holds memory and idles.
        h.observe(
            0.0,
            sample(vec![gpu(
                0,
                90,
                vec![proc(101, 100, Some(88)), proc(201, 200, Some(0))],
            )]),
            &groups,
            &[(1, vec![0]), (2, vec![0])],
            900.0,
        );
        assert_eq!(h.job_series(1, 0).unwrap().back(), Some(&(0.0, 88.0)));
        assert_eq!(h.job_series(2, 0).unwrap().back(), Some(&(0.0, 0.0)));
        assert_eq!(h.util(0), Some(90.0));
    }

    #[test]
    fn without_per_process_data_the_gpu_decides_and_a_job_with_no_process_is_idle() {
        let mut h = HostTelemetry::default();
        let groups = HashMap::from([(100, 1), (300, 3)]);
        h.observe(
            5.0,
            sample(vec![
                gpu(0, 70, vec![proc(101, 100, None)]),
                gpu(1, 40, vec![proc(101, 100, None)]),
            ]),
            &groups,
            &[(1, vec![0]), (3, vec![1])],
            900.0,
        );
        assert_eq!(h.job_series(1, 0).unwrap().back(), Some(&(5.0, 70.0)));
        assert_eq!(h.job_series(3, 1).unwrap().back(), Some(&(5.0, 0.0)));
    }

    #[test]
    fn foreign_processes_are_reported_once_and_cleared() {
        let mut h = HostTelemetry::default();
        let groups = HashMap::from([(100, 1)]);
        let busy = || sample(vec![gpu(0, 50, vec![proc(4242, 4242, Some(50))])]);
        let c = h.observe(0.0, busy(), &groups, &[], 900.0);
        assert_eq!(
            c,
            vec![HostChange::Foreign {
                gpu: 0,
                pids: vec![4242],
                mib: 1024
            }]
        );
        assert!(h.observe(1.0, busy(), &groups, &[], 900.0).is_empty());
        let c = h.observe(2.0, sample(vec![gpu(0, 0, vec![])]), &groups, &[], 900.0);
        assert_eq!(c, vec![HostChange::Cleared { gpu: 0 }]);
        assert!(h.foreign.is_empty());
        // A job's own process is not foreign.
        let c = h.observe(
            3.0,
            sample(vec![gpu(0, 50, vec![proc(101, 100, Some(50))])]),
            &groups,
            &[(1, vec![0])],
            900.0,
        );
        assert!(c.is_empty());
    }

    #[test]
    fn series_keep_only_the_window_and_unavailable_is_said_once() {
        let mut h = HostTelemetry::default();
        for t in 0..20 {
            h.observe(
                f64::from(t) * 60.0,
                sample(vec![gpu(0, 10, vec![])]),
                &HashMap::new(),
                &[(9, vec![0])],
                300.0,
            );
        }
        let s = h.job_series(9, 0).unwrap();
        assert_eq!(s.len(), 6, "{s:?}");
        let gone = || Discovery::Unavailable {
            reason: "no driver".into(),
        };
        let c = h.observe(2000.0, gone(), &HashMap::new(), &[], 300.0);
        assert_eq!(c, vec![HostChange::Unavailable("no driver".into())]);
        assert!(h
            .observe(2001.0, gone(), &HashMap::new(), &[], 300.0)
            .is_empty());
    }

    #[test]
    fn mig_instances_are_matched_by_size_and_not_handed_out_twice() {
        use crate::backend::MigInstance;
        let mut h = HostTelemetry::default();
        let mut g = gpu(0, 0, vec![]);
        g.mig_instances = vec![
            MigInstance {
                uuid: "MIG-a".into(),
                memory_total_mib: 9984,
                memory_used_mib: 0,
                gpu_instance_id: None,
            },
            MigInstance {
                uuid: "MIG-b".into(),
                memory_total_mib: 9984,
                memory_used_mib: 0,
                gpu_instance_id: None,
            },
            MigInstance {
                uuid: "MIG-c".into(),
                memory_total_mib: 40_192,
                memory_used_mib: 0,
                gpu_instance_id: None,
            },
        ];
        h.observe(0.0, sample(vec![g]), &HashMap::new(), &[], 60.0);
        assert_eq!(h.free_mig_instance(0, 10).as_deref(), Some("MIG-a"));
        h.assigned.insert(1, vec!["MIG-a".into()]);
        assert_eq!(h.free_mig_instance(0, 10).as_deref(), Some("MIG-b"));
        assert_eq!(h.free_mig_instance(0, 40).as_deref(), Some("MIG-c"));
        assert_eq!(h.free_mig_instance(0, 20), None);
    }
}
