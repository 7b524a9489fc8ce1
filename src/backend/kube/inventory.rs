//! A Kubernetes cluster's GPU nodes as gantry sees them, from the Node and Pod objects its
//! reflectors hold: GPUs from `status.allocatable` (`nvidia.com/gpu`, MIG resources such as
//! `nvidia.com/mig-1g.10gb`), model, memory and count from GPU Feature Discovery's labels,
//! NVLink domain, zone and network block from labels, whether the node takes work (Ready, not
//! cordoned, no NoSchedule taint gantry does not tolerate), and the GPUs each pod that gantry
//! did not place holds there (foreign work).

use k8s_openapi::api::core::v1::{Node, Pod};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The label gantry marks its own pods with (its job id).
pub const JOB_LABEL: &str = "gantry.dev/job";
/// The GPU resource of NVIDIA's device plugin.
pub const GPU: &str = "nvidia.com/gpu";

/// Which labels say what (configurable per pool; the defaults are the well-known ones).
#[derive(Clone, Debug)]
pub struct Labels {
    /// Nodes with the same value form one gantry pool.
    pub pool: String,
    pub zone: String,
    /// The network block (leaf switch), as Kueue's topology-aware scheduling reads it.
    pub block: Option<String>,
}

impl Default for Labels {
    fn default() -> Labels {
        Labels {
            pool: "node.kubernetes.io/instance-type".into(),
            zone: "topology.kubernetes.io/zone".into(),
            block: None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct KubeNode {
    pub name: String,
    /// The value of the pool label (empty where the node has none).
    pub pool: String,
    pub zone: String,
    pub block: Option<String>,
    /// Whole GPUs the device plugin offers (`nvidia.com/gpu`).
    pub gpus: u32,
    /// MIG slices offered, by profile (`1g.10gb` → 7).
    pub mig: BTreeMap<String, u32>,
    /// GPU Feature Discovery: product, memory per GPU (MiB), count, MIG strategy, clique.
    pub product: Option<String>,
    pub gpu_memory_mib: Option<u64>,
    pub mig_strategy: Option<String>,
    pub clique: Option<String>,
    pub cpu_milli: u64,
    pub memory_mib: u64,
    pub ready: bool,
    pub cordoned: bool,
    /// NoSchedule / NoExecute taints other than the GPU one device plugins add.
    pub taints: Vec<String>,
    /// Why gantry places nothing there (not Ready, cordoned, tainted); empty if it may.
    pub unusable: Vec<String>,
    /// Pods gantry did not place, holding GPUs here.
    pub foreign: Vec<ForeignPod>,
    /// GPUs held by gantry's own pods.
    pub gantry_gpus: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ForeignPod {
    pub namespace: String,
    pub name: String,
    pub phase: String,
    pub gpus: u32,
}

/// A Kubernetes quantity (`8`, `1500m`, `64Gi`, `1e3`, `500M`) as a number.
pub fn quantity(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// The GPUs a pod asks for (its containers' limits, else requests; an init container's
/// while it runs counts as the most).
pub fn pod_gpus(p: &Pod) -> u32 {
    asked(p, GPU, true) as u32
}

/// What a pod asks of `resource` (`cpu`, `memory`) as the scheduler counts it: its
/// containers' requests summed (a limit alone stands for its request), or the most an init
/// container asks, whichever is more; in the resource's unit (cores, bytes).
pub fn pod_requests(p: &Pod, resource: &str) -> f64 {
    asked(p, resource, false)
}

/// A pod's `resource`: per container its limit or its request (`limit_first` says which is
/// read first, the other standing in where it is missing), summed over the containers, or
/// the most any init container asks if that is more (they run one at a time, before).
fn asked(p: &Pod, resource: &str, limit_first: bool) -> f64 {
    let Some(spec) = &p.spec else { return 0.0 };
    let of = |c: &k8s_openapi::api::core::v1::Container| -> f64 {
        let r = c.resources.as_ref();
        let get = |m: Option<
            &BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        >| { m.and_then(|m| m.get(resource)).and_then(|q| quantity(&q.0)) };
        let (limits, requests) = (
            get(r.and_then(|r| r.limits.as_ref())),
            get(r.and_then(|r| r.requests.as_ref())),
        );
        let (first, then) = if limit_first {
            (limits, requests)
        } else {
            (requests, limits)
        };
        first.or(then).unwrap_or(0.0).max(0.0)
    };
    let main: f64 = spec.containers.iter().map(of).sum();
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(of)
        .fold(0.0, f64::max);
    main.max(init)
}

fn label<'a>(labels: Option<&'a BTreeMap<String, String>>, key: &str) -> Option<&'a str> {
    labels.and_then(|l| l.get(key)).map(String::as_str)
}

/// The node as gantry sees it (foreign pods filled in by `inventory`).
pub fn node(n: &Node, l: &Labels) -> KubeNode {
    let name = n.metadata.name.clone().unwrap_or_default();
    let labels = n.metadata.labels.as_ref();
    let alloc = n.status.as_ref().and_then(|s| s.allocatable.as_ref());
    let res = |k: &str| alloc.and_then(|a| a.get(k)).and_then(|q| quantity(&q.0));
    let mig = alloc
        .into_iter()
        .flatten()
        .filter_map(|(k, q)| {
            let profile = k.strip_prefix("nvidia.com/mig-")?;
            Some((profile.to_string(), quantity(&q.0)? as u32))
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let ready = n
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    let cordoned = n
        .spec
        .as_ref()
        .and_then(|s| s.unschedulable)
        .unwrap_or(false);
    let taints: Vec<String> = n
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        // The GPU taint device plugins and cloud GPU pools add: gantry's pods tolerate it.
        .filter(|t| t.key != GPU)
        // Cordoning adds this one; said once, as cordoned.
        .filter(|t| t.key != "node.kubernetes.io/unschedulable")
        .map(|t| {
            format!(
                "{}{}:{}",
                t.key,
                t.value.as_ref().map_or(String::new(), |v| format!("={v}")),
                t.effect
            )
        })
        .collect();
    let mut unusable = Vec::new();
    if !ready {
        unusable.push("not Ready".to_string());
    }
    if cordoned {
        unusable.push("cordoned".to_string());
    }
    for t in &taints {
        unusable.push(format!("tainted {t}"));
    }
    KubeNode {
        pool: label(labels, &l.pool).unwrap_or_default().to_string(),
        zone: label(labels, &l.zone).unwrap_or_default().to_string(),
        block: l
            .block
            .as_deref()
            .and_then(|b| label(labels, b))
            .map(str::to_string),
        gpus: res(GPU).unwrap_or(0.0).max(0.0) as u32,
        mig,
        product: label(labels, "nvidia.com/gpu.product").map(str::to_string),
        gpu_memory_mib: label(labels, "nvidia.com/gpu.memory").and_then(|m| m.parse().ok()),
        mig_strategy: label(labels, "nvidia.com/mig.strategy").map(str::to_string),
        clique: label(labels, "nvidia.com/gpu.clique").map(str::to_string),
        cpu_milli: (res("cpu").unwrap_or(0.0) * 1000.0).max(0.0) as u64,
        memory_mib: (res("memory").unwrap_or(0.0) / (1024.0 * 1024.0)).max(0.0) as u64,
        ready,
        cordoned,
        taints,
        unusable,
        foreign: Vec::new(),
        gantry_gpus: 0,
        name,
    }
}

/// The scheduler name that gives a pod to gantry.
pub const SCHEDULER: &str = "gantry";

/// Whether gantry placed the pod: one it made (labelled with its job), or one its users gave
/// it (`schedulerName: gantry`). Its GPUs are gantry's jobs', never foreign.
pub fn is_gantrys(p: &Pod) -> bool {
    label(p.metadata.labels.as_ref(), JOB_LABEL).is_some()
        || p.spec.as_ref().and_then(|s| s.scheduler_name.as_deref()) == Some(SCHEDULER)
}

/// Whether a pod holds its node's resources now (bound, not finished).
pub fn holds(p: &Pod) -> bool {
    let bound = p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_some();
    let phase = p
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("Pending");
    bound && phase != "Succeeded" && phase != "Failed"
}

/// Every node with the GPU pods on it, sorted by name.
pub fn inventory<'a>(
    nodes: impl IntoIterator<Item = &'a Node>,
    pods: impl IntoIterator<Item = &'a Pod>,
    l: &Labels,
) -> Vec<KubeNode> {
    let mut out: Vec<KubeNode> = nodes.into_iter().map(|n| node(n, l)).collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    let at: HashMap<String, usize> = out
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.clone(), i))
        .collect();
    for p in pods.into_iter().filter(|p| holds(p)) {
        let gpus = pod_gpus(p);
        if gpus == 0 {
            continue;
        }
        let node = p.spec.as_ref().and_then(|s| s.node_name.as_deref());
        let Some(&i) = node.and_then(|n| at.get(n)) else {
            continue;
        };
        if is_gantrys(p) {
            out[i].gantry_gpus += gpus;
            continue;
        }
        out[i].foreign.push(ForeignPod {
            namespace: p.metadata.namespace.clone().unwrap_or_default(),
            name: p.metadata.name.clone().unwrap_or_default(),
            phase: p
                .status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_else(|| "Pending".into()),
            gpus,
        });
    }
    for n in &mut out {
        n.foreign
            .sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_read_as_kubernetes_writes_them() {
        assert_eq!(quantity("8"), Some(8.0));
        assert_eq!(quantity("1500m"), Some(1.5));
        assert_eq!(quantity("64Gi"), Some(64.0 * 1024.0 * 1024.0 * 1024.0));
        assert_eq!(quantity("500M"), Some(5e8));
        assert_eq!(quantity("1e3"), Some(1000.0));
        assert_eq!(quantity("12x"), None);
    }
}
