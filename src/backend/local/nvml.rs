//! The local GPUs through NVML. Without a driver (as in CI) discovery says so once, clearly, and
//! the rest of gantry works without local GPUs.

use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuProcess {
    pub pid: u32,
    pub used_mib: Option<u64>,
}

/// One telemetry sample of one GPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuSample {
    pub index: u32,
    pub uuid: String,
    pub name: String,
    pub memory_total_mib: u64,
    pub memory_used_mib: u64,
    pub util_gpu_pct: u32,
    pub util_memory_pct: u32,
    pub temperature_c: Option<u32>,
    pub power_w: Option<f64>,
    pub mig_enabled: Option<bool>,
    pub processes: Vec<GpuProcess>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum Discovery {
    Available {
        driver: String,
        gpus: Vec<GpuSample>,
    },
    /// Why NVML could not be used; said once, then local GPUs stay out of the fleet.
    Unavailable { reason: String },
}

/// Reads every GPU once. Never panics; a missing driver is an answer, not an error.
pub fn discover() -> Discovery {
    let nvml = match nvml_wrapper::Nvml::init() {
        Ok(n) => n,
        Err(e) => {
            return Discovery::Unavailable {
                reason: format!("NVML is not available ({e}); no NVIDIA driver on this host, so local GPUs are not part of the fleet"),
            }
        }
    };
    let driver = nvml
        .sys_driver_version()
        .unwrap_or_else(|_| "unknown".to_string());
    let count = nvml.device_count().unwrap_or(0);
    let mut gpus = Vec::new();
    for index in 0..count {
        let Ok(d) = nvml.device_by_index(index) else {
            continue;
        };
        let mem = d.memory_info().ok();
        let util = d.utilization_rates().ok();
        let processes = d
            .running_compute_processes()
            .unwrap_or_default()
            .into_iter()
            .map(|p| GpuProcess {
                pid: p.pid,
                used_mib: match p.used_gpu_memory {
                    nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b / (1 << 20)),
                    nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
                },
            })
            .collect();
        gpus.push(GpuSample {
            index,
            uuid: d.uuid().unwrap_or_default(),
            name: d.name().unwrap_or_default(),
            memory_total_mib: mem.as_ref().map_or(0, |m| m.total / (1 << 20)),
            memory_used_mib: mem.as_ref().map_or(0, |m| m.used / (1 << 20)),
            util_gpu_pct: util.as_ref().map_or(0, |u| u.gpu),
            util_memory_pct: util.as_ref().map_or(0, |u| u.memory),
            temperature_c: d
                .temperature(nvml_wrapper::enum_wrappers::device::TemperatureSensor::Gpu)
                .ok(),
            power_w: d.power_usage().ok().map(|mw| f64::from(mw) / 1000.0),
            mig_enabled: d.mig_mode().ok().map(|m| m.current == 1),
            processes,
        });
    }
    Discovery::Available { driver, gpus }
}
