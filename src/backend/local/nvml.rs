//! The local GPUs through NVML. One `Probe` keeps the library open and reads every GPU per
//! sample (initializing NVML costs far more than a sample). Without a driver (as in CI)
//! opening says so once, clearly, and the rest of gantry works without local GPUs.

use nvml_wrapper::enums::device::UsedGpuMemory;
use nvml_wrapper::error::NvmlError;
use nvml_wrapper::Nvml;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A compute process on a GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuProcess {
    pub pid: u32,
    /// Its process group (to tell gantry's jobs from foreign processes); `None` if the pid is
    /// not visible here (another PID namespace).
    pub pgid: Option<u32>,
    pub used_mib: Option<u64>,
    /// Its SM utilization since the previous sample, percent (`None`: not supported here).
    pub sm_util_pct: Option<u32>,
}

/// A MIG instance of a GPU in MIG mode (what `CUDA_VISIBLE_DEVICES` names).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MigInstance {
    pub uuid: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    /// Its GPU instance id (DCGM's `GPU_I_ID` label), where the driver says.
    #[serde(default)]
    pub gpu_instance_id: Option<u32>,
}

/// A MIG device's GPU instance id. nvml-wrapper 0.13 does not wrap
/// `nvmlDeviceGetGpuInstanceId`, so it is called through the library it loaded (a driver
/// without the symbol gives `None`).
fn gpu_instance_id(device: &nvml_wrapper::Device) -> Option<u32> {
    let get = device
        .nvml()
        .lib()
        .nvmlDeviceGetGpuInstanceId
        .as_ref()
        .ok()?;
    let mut id: std::os::raw::c_uint = 0;
    // SAFETY: `device` is a live handle of the library `get` came from, and `id` outlives
    // the call, which only writes one unsigned int through it.
    let rc = unsafe { get(device.handle(), &raw mut id) };
    (rc == 0).then_some(id)
}

/// One telemetry sample of one GPU.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuSample {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub pci_bus_id: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    pub util_gpu_pct: u32,
    pub util_memory_pct: u32,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub mig_enabled: Option<bool>,
    pub mig_instances: Vec<MigInstance>,
    /// Indices of the GPUs on this host it has active NVLinks to.
    pub nvlink_peers: Vec<u32>,
    pub processes: Vec<GpuProcess>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Discovery {
    Available {
        driver: String,
        gpus: Vec<GpuSample>,
    },
    /// Why NVML could not be used; said once, then local GPUs stay out of the fleet.
    Unavailable { reason: String },
}

/// NVLink links a GPU may have (NVML_NVLINK_MAX_LINKS on Hopper).
const MAX_NVLINKS: u32 = 18;

/// An open NVML library, sampled repeatedly.
pub struct Probe {
    nvml: Nvml,
    driver: String,
    /// Per GPU, the newest process-utilization timestamp seen (the next query asks from it).
    process_seen: HashMap<u32, u64>,
}

impl Probe {
    /// Opens NVML; the error says why it is not available here.
    pub fn open() -> Result<Probe, String> {
        let nvml = Nvml::init()
            .map_err(|e| format!("NVML is not available ({e}): no NVIDIA driver on this host"))?;
        let driver = nvml
            .sys_driver_version()
            .unwrap_or_else(|_| "unknown".to_string());
        Ok(Probe {
            nvml,
            driver,
            process_seen: HashMap::new(),
        })
    }

    /// Reads every GPU once. A GPU that cannot be read is left out of this sample.
    pub fn sample(&mut self) -> Discovery {
        let count = self.nvml.device_count().unwrap_or(0);
        let mut gpus = Vec::new();
        for index in 0..count {
            let Ok(d) = self.nvml.device_by_index(index) else {
                continue;
            };
            let mem = d.memory_info().ok();
            let util = d.utilization_rates().ok();
            let mig_enabled = d.mig_mode().ok().map(|m| m.current == 1);
            // Per-process SM utilization since the last sample: NVML lists only processes
            // that were busy, so a listed process missing from it was idle.
            let since = self.process_seen.get(&index).copied();
            let busy: Option<HashMap<u32, u32>> = match d.process_utilization_stats(since) {
                Ok(samples) => {
                    let mut by_pid = HashMap::new();
                    for s in &samples {
                        let seen = self.process_seen.entry(index).or_default();
                        *seen = (*seen).max(s.timestamp);
                        let u: &mut u32 = by_pid.entry(s.pid).or_default();
                        *u = (*u).max(s.sm_util);
                    }
                    Some(by_pid)
                }
                Err(NvmlError::NotFound) => Some(HashMap::new()),
                Err(_) => None,
            };
            let mut mig_instances = Vec::new();
            let mut handles = vec![d];
            if mig_enabled == Some(true) {
                // The maximum MIG devices; indices without an instance are skipped.
                let max = handles[0].mig_device_count().unwrap_or(0);
                for i in 0..max {
                    if let Ok(m) = handles[0].mig_device_by_index(i) {
                        let mm = m.memory_info().ok();
                        mig_instances.push(MigInstance {
                            uuid: m.uuid().unwrap_or_default(),
                            memory_total_mib: mm.as_ref().map_or(0, |x| x.total >> 20),
                            memory_used_mib: mm.as_ref().map_or(0, |x| x.used >> 20),
                            gpu_instance_id: gpu_instance_id(&m),
                        });
                        handles.push(m);
                    }
                }
            }
            let mut processes = Vec::new();
            for h in &handles {
                for p in h.running_compute_processes().unwrap_or_default() {
                    if processes.iter().any(|q: &GpuProcess| q.pid == p.pid) {
                        continue;
                    }
                    processes.push(GpuProcess {
                        pid: p.pid,
                        pgid: pgid_of(p.pid),
                        used_mib: match p.used_gpu_memory {
                            UsedGpuMemory::Used(b) => Some(b >> 20),
                            UsedGpuMemory::Unavailable => None,
                        },
                        sm_util_pct: busy.as_ref().map(|b| b.get(&p.pid).copied().unwrap_or(0)),
                    });
                }
            }
            let d = &handles[0];
            let mut peers_bus = Vec::new();
            for link in 0..MAX_NVLINKS {
                let l = d.link_wrapper_for(link);
                match l.is_active() {
                    Ok(true) => {
                        if let Ok(remote) = l.remote_pci_info() {
                            peers_bus.push(remote.bus_id);
                        }
                    }
                    Ok(false) => {}
                    Err(_) => break,
                }
            }
            gpus.push((
                GpuSample {
                    index,
                    uuid: d.uuid().unwrap_or_default(),
                    name: d.name().unwrap_or_default(),
                    pci_bus_id: d.pci_info().map(|p| p.bus_id).unwrap_or_default(),
                    memory_total_mib: mem.as_ref().map_or(0, |m| m.total >> 20),
                    memory_used_mib: mem.as_ref().map_or(0, |m| m.used >> 20),
                    util_gpu_pct: util.as_ref().map_or(0, |u| u.gpu),
                    util_memory_pct: util.as_ref().map_or(0, |u| u.memory),
                    temperature_c: d
                        .temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu)
                        .ok(),
                    power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
                    mig_enabled,
                    mig_instances,
                    nvlink_peers: Vec::new(),
                    processes,
                },
                peers_bus,
            ));
        }
        // NVLink peers by PCI bus id (a link to an NVSwitch names no GPU and is left out).
        let bus: Vec<String> = gpus.iter().map(|(g, _)| norm_bus(&g.pci_bus_id)).collect();
        let gpus = gpus
            .into_iter()
            .map(|(mut g, peers)| {
                let mut idx: Vec<u32> = peers
                    .iter()
                    .filter_map(|b| bus.iter().position(|x| *x == norm_bus(b)))
                    .map(|i| i as u32)
                    .filter(|i| *i != g.index)
                    .collect();
                idx.sort_unstable();
                idx.dedup();
                g.nvlink_peers = idx;
                g
            })
            .collect();
        Discovery::Available {
            driver: self.driver.clone(),
            gpus,
        }
    }
}

/// PCI bus ids as NVML prints them differ in domain width and case between calls.
fn norm_bus(b: &str) -> String {
    let b = b.trim_matches(char::from(0)).to_ascii_lowercase();
    match b.split_once(':') {
        Some((domain, rest)) if domain.len() > 4 => {
            format!("{}:{rest}", &domain[domain.len() - 4..])
        }
        _ => b,
    }
}

/// The process group of `pid`, if it is visible from here.
fn pgid_of(pid: u32) -> Option<u32> {
    // SAFETY: getpgid(2) only reads the kernel's process table.
    let g = unsafe { libc::getpgid(pid as libc::pid_t) };
    (g > 0).then_some(g as u32)
}

/// Reads every GPU once (opens NVML for it). Never panics; a missing driver is an answer, not
/// an error.
pub fn discover() -> Discovery {
    match Probe::open() {
        Ok(mut p) => p.sample(),
        Err(reason) => Discovery::Unavailable { reason },
    }
}

pub use crate::model::names::from_nvml as model_name;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_ids_compare_across_domain_widths() {
        assert_eq!(norm_bus("00000000:1B:00.0"), norm_bus("0000:1b:00.0"));
    }
}
