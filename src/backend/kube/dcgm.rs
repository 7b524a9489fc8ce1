//! GPU telemetry of a Kubernetes pool from NVIDIA's DCGM exporter (Prometheus text): per GPU
//! of each node, utilization, framebuffer memory used and free, temperature, power, and the
//! pod the GPU is given to. The URL may be one exporter or a Prometheus `/federate` of all.
//!
//! The device plugin, not gantry, picks which of a node's GPUs a pod gets, so the GPUs are
//! reported to the daemon in gantry's numbering: each gantry run's GPUs (by the `pod` label)
//! at the indices gantry granted it, the rest after in their own order. A job's utilization
//! is then that of the GPUs its pods really have.

use crate::backend::local::nvml::GpuSample;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::UnboundedSender;

/// One GPU as the exporter reports it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DcgmGpu {
    /// The device's index on its node (`gpu` label).
    pub index: u32,
    pub uuid: String,
    pub model: String,
    pub pci_bus_id: String,
    pub driver: Option<String>,
    pub util_pct: Option<f64>,
    pub mem_copy_util_pct: Option<f64>,
    pub fb_used_mib: Option<f64>,
    pub fb_free_mib: Option<f64>,
    pub fb_reserved_mib: Option<f64>,
    pub temperature_c: Option<f64>,
    pub power_w: Option<f64>,
    /// The pod it is given to, `namespace/name`.
    pub pod: Option<String>,
}

/// The label naming a GPU's node: the exporter's `Hostname` (the node's name under the GPU
/// Operator), else what a Prometheus relabelling commonly adds.
const NODE_LABELS: [&str; 3] = ["Hostname", "kubernetes_node", "node"];

/// The exporter's text, as GPUs by node.
pub fn parse(text: &str) -> Result<HashMap<String, Vec<DcgmGpu>>, String> {
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape =
        prometheus_parse::Scrape::parse(lines).map_err(|e| format!("not Prometheus text: {e}"))?;
    let mut by_node: HashMap<String, BTreeMap<(u32, String), DcgmGpu>> = HashMap::new();
    for s in &scrape.samples {
        if !s.metric.starts_with("DCGM_FI_") {
            continue;
        }
        let value = match s.value {
            prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        let Some(node) = NODE_LABELS.iter().find_map(|l| s.labels.get(l)) else {
            continue;
        };
        let Some(index) = s.labels.get("gpu").and_then(|g| g.parse::<u32>().ok()) else {
            continue;
        };
        let uuid = s.labels.get("UUID").unwrap_or_default().to_string();
        let g = by_node
            .entry(node.to_string())
            .or_default()
            .entry((index, uuid.clone()))
            .or_insert_with(|| DcgmGpu {
                index,
                uuid,
                ..DcgmGpu::default()
            });
        if let Some(m) = s.labels.get("modelName") {
            g.model = m.to_string();
        }
        if let Some(p) = s.labels.get("pci_bus_id") {
            g.pci_bus_id = p.to_string();
        }
        if let Some(d) = s.labels.get("DCGM_FI_DRIVER_VERSION") {
            g.driver = Some(d.to_string());
        }
        if let (Some(ns), Some(pod)) = (s.labels.get("namespace"), s.labels.get("pod")) {
            if !pod.is_empty() {
                g.pod = Some(format!("{ns}/{pod}"));
            }
        }
        let slot = match s.metric.as_str() {
            "DCGM_FI_DEV_GPU_UTIL" => &mut g.util_pct,
            "DCGM_FI_DEV_MEM_COPY_UTIL" => &mut g.mem_copy_util_pct,
            "DCGM_FI_DEV_FB_USED" => &mut g.fb_used_mib,
            "DCGM_FI_DEV_FB_FREE" => &mut g.fb_free_mib,
            "DCGM_FI_DEV_FB_RESERVED" => &mut g.fb_reserved_mib,
            "DCGM_FI_DEV_GPU_TEMP" => &mut g.temperature_c,
            "DCGM_FI_DEV_POWER_USAGE" => &mut g.power_w,
            _ => continue,
        };
        if value.is_finite() {
            *slot = Some(value);
        }
    }
    Ok(by_node
        .into_iter()
        .map(|(node, gpus)| (node, gpus.into_values().collect()))
        .collect())
}

/// A node's GPUs in gantry's numbering. `runs` are gantry's runs there: (their pod,
/// `namespace/name`, and the GPU indices gantry granted them). Returns the samples and the
/// UUID at each of gantry's indices.
pub fn in_gantrys_order(
    gpus: &[DcgmGpu],
    runs: &[(String, Vec<u32>)],
) -> (Vec<GpuSample>, Vec<String>) {
    let n = gpus.len();
    let mut slot: Vec<Option<usize>> = vec![None; n];
    let mut placed = vec![false; n];
    for (pod, granted) in runs {
        let theirs = gpus
            .iter()
            .enumerate()
            .filter(|(_, g)| g.pod.as_deref() == Some(pod.as_str()))
            .map(|(i, _)| i);
        for (at, i) in granted.iter().zip(theirs) {
            let at = *at as usize;
            if at < n && slot[at].is_none() && !placed[i] {
                slot[at] = Some(i);
                placed[i] = true;
            }
        }
    }
    let mut rest = (0..n).filter(|i| !placed[*i]);
    for s in slot.iter_mut().filter(|s| s.is_none()) {
        *s = rest.next();
    }
    let samples: Vec<GpuSample> = slot
        .iter()
        .enumerate()
        .filter_map(|(at, i)| Some((at, &gpus[(*i)?])))
        .map(|(at, g)| {
            let used = g.fb_used_mib.unwrap_or(0.0);
            let total = used + g.fb_free_mib.unwrap_or(0.0) + g.fb_reserved_mib.unwrap_or(0.0);
            GpuSample {
                index: at as u32,
                uuid: g.uuid.clone(),
                name: g.model.clone(),
                pci_bus_id: g.pci_bus_id.clone(),
                memory_total_mib: total.round() as u64,
                memory_used_mib: used.round() as u64,
                util_gpu_pct: g.util_pct.unwrap_or(0.0).clamp(0.0, 100.0).round() as u32,
                util_memory_pct: g.mem_copy_util_pct.unwrap_or(0.0).clamp(0.0, 100.0).round()
                    as u32,
                temperature_c: g.temperature_c.map(|t| t.round() as u32),
                power_w: g.power_w,
                ..GpuSample::default()
            }
        })
        .collect();
    let uuids = samples.iter().map(|s| s.uuid.clone()).collect();
    (samples, uuids)
}

/// What one read of the DCGM exporter gave: GPUs by node, or why not.
pub type Scraped = Result<HashMap<String, Vec<DcgmGpu>>, String>;

/// How often the exporter is read (dcgm-exporter collects every 30 s by default; a few
/// seconds keeps a busy/idle change prompt where it is set faster).
const SCRAPE_EVERY: Duration = Duration::from_secs(5);

/// The DCGM exporter's reads and what was said of each node.
pub struct Telemetry {
    http: Option<reqwest::Client>,
    next: Instant,
    pub in_flight: bool,
    out: UnboundedSender<Scraped>,
    /// Per host: the UUID at each of gantry's GPU indices, as last reported.
    pub order: Vec<Vec<String>>,
    /// Per host: why its GPUs were last said unmeasured (said once while it holds).
    pub said: Vec<Option<String>>,
}

impl Telemetry {
    pub fn new(hosts: usize, out: UnboundedSender<Scraped>) -> Telemetry {
        Telemetry {
            http: None,
            next: Instant::now(),
            in_flight: false,
            out,
            order: vec![Vec::new(); hosts],
            said: vec![None; hosts],
        }
    }

    /// Reads `url` in the background when it is time (one read at a time).
    pub fn scrape(&mut self, url: &str) {
        if self.in_flight || Instant::now() < self.next {
            return;
        }
        let http = match &self.http {
            Some(c) => c.clone(),
            None => {
                crate::tls::install_provider();
                match reqwest::Client::builder()
                    .timeout(Duration::from_secs(5))
                    .build()
                {
                    Ok(c) => {
                        self.http = Some(c.clone());
                        c
                    }
                    Err(e) => {
                        let _ = self.out.send(Err(format!("no HTTP client: {e}")));
                        return;
                    }
                }
            }
        };
        self.in_flight = true;
        self.next = Instant::now() + SCRAPE_EVERY;
        let (url, out) = (url.to_string(), self.out.clone());
        tokio::spawn(async move {
            let read = async {
                let r = http.get(&url).send().await.map_err(|e| e.to_string())?;
                if !r.status().is_success() {
                    return Err(format!("HTTP {}", r.status()));
                }
                let text = r.text().await.map_err(|e| e.to_string())?;
                parse(&text)
            };
            let _ = out.send(read.await);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What dcgm-exporter 3.3 (GPU Operator) serves, trimmed to two GPUs of one node: GPU 1
    /// is given to a pod.
    const TEXT: &str = r#"# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3",DCGM_FI_DRIVER_VERSION="550.90.07"} 0
DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3",DCGM_FI_DRIVER_VERSION="550.90.07",container="main",namespace="gantry",pod="gantry-1-0-abcd"} 93
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3"} 81004
DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3",container="main",namespace="gantry",pod="gantry-1-0-abcd"} 21004
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-aaaa",pci_bus_id="00000000:18:00.0",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3"} 0
DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-bbbb",pci_bus_id="00000000:2A:00.0",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="gpu-3",container="main",namespace="gantry",pod="gantry-1-0-abcd"} 60000
"#;

    #[test]
    fn the_exporters_text_is_gpus_by_node() {
        let nodes = parse(TEXT).unwrap();
        let gpus = &nodes["gpu-3"];
        assert_eq!(gpus.len(), 2);
        assert_eq!(
            (
                gpus[1].index,
                gpus[1].util_pct,
                gpus[1].fb_used_mib,
                gpus[1].pod.as_deref()
            ),
            (1, Some(93.0), Some(60000.0), Some("gantry/gantry-1-0-abcd"))
        );
        assert_eq!(gpus[0].driver.as_deref(), Some("550.90.07"));
        // Lines without a node or a GPU index are no GPU of any node.
        let orphan = parse("DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-x\"} 5\nnot a metric\n");
        assert_eq!(orphan.map(|n| n.len()), Ok(0));
    }

    /// gantry granted its run GPU 0; the device plugin gave it physical GPU 1: the sample puts
    /// that GPU (93 %) at index 0, and the idle one at index 1.
    #[test]
    fn a_runs_gpus_are_reported_at_the_indices_gantry_granted() {
        let nodes = parse(TEXT).unwrap();
        let (samples, uuids) = in_gantrys_order(
            &nodes["gpu-3"],
            &[("gantry/gantry-1-0-abcd".into(), vec![0])],
        );
        assert_eq!(uuids, ["GPU-bbbb", "GPU-aaaa"]);
        assert_eq!(
            samples
                .iter()
                .map(|s| (
                    s.index,
                    s.util_gpu_pct,
                    s.memory_used_mib,
                    s.memory_total_mib
                ))
                .collect::<Vec<_>>(),
            [(0, 93, 60000, 81004), (1, 0, 0, 81004)]
        );
        let (_, plain) = in_gantrys_order(&nodes["gpu-3"], &[]);
        assert_eq!(plain, ["GPU-aaaa", "GPU-bbbb"]);
    }
}
