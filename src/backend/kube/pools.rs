//! Fleet-file pools for a Kubernetes cluster, from its nodes (`gantry kube --fleet`): nodes
//! grouped by the pool label (default `node.kubernetes.io/instance-type`), zone, GPU model and
//! node shape — gantry's pools hold one model and one shape each — with the network block
//! (a configured label) and NVLink domain (`nvidia.com/gpu.clique`) of each node written as
//! the pool's named `leaves` and `nvlink_domains`, so the core places gangs by them.

use super::inventory::KubeNode;
use crate::model::names::model_of;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pool {
    pub name: String,
    /// The pool label's value (the instance type, by default).
    pub label: String,
    pub zone: String,
    pub gpu: String,
    pub product: Option<String>,
    pub gpus_per_node: u32,
    pub vram_gb: u32,
    /// What needs a look before use, where something does.
    pub check: Option<String>,
    pub cpus: u32,
    pub memory_gb: u64,
    pub hosts: Vec<String>,
    pub leaves: BTreeMap<String, Vec<String>>,
    pub nvlink_domains: BTreeMap<String, Vec<String>>,
}

/// The pools of the cluster's GPU nodes, and the GPU nodes left out with why (MIG nodes that
/// offer slices only: gantry's pools of a cluster take whole GPUs).
pub fn pools(nodes: &[KubeNode]) -> (Vec<Pool>, Vec<(String, String)>) {
    type Shape = (String, String, Option<String>, u32, u32, u64);
    let mut by: BTreeMap<Shape, Vec<&KubeNode>> = BTreeMap::new();
    let mut left = Vec::new();
    for n in nodes {
        if n.gpus == 0 {
            if !n.mig.is_empty() {
                left.push((
                    n.name.clone(),
                    "offers MIG slices only (mig.strategy mixed): not a whole-GPU pool".into(),
                ));
            }
            continue;
        }
        let cpus = (n.cpu_milli / 1000) as u32;
        let memory_gb = (n.memory_mib / 1024).max(1);
        by.entry((
            n.pool.clone(),
            n.zone.clone(),
            n.product.clone(),
            n.gpus,
            cpus,
            memory_gb,
        ))
        .or_default()
        .push(n);
    }
    let mut out: Vec<Pool> = Vec::new();
    for ((label, zone, product, gpus, cpus, memory_gb), nodes) in by {
        let (gpu, mut vram_gb, mut check) = match product.as_deref() {
            Some(p) => model_of(p),
            None => ("GPU".into(), 0, None),
        };
        // GPU Feature Discovery's memory label settles what the product name may not.
        if let Some(mib) = nodes[0].gpu_memory_mib.filter(|&m| m > 0) {
            vram_gb = mib.div_ceil(1024) as u32;
            check = None;
        }
        if product.is_none() {
            check = Some("the nodes have no nvidia.com/gpu.product label (GPU Feature Discovery): set gpu and vram_gb".into());
        }
        let base = if label.is_empty() {
            gpu.to_ascii_lowercase()
        } else {
            label.replace(['.', '_', '/'], "-")
        };
        let mut name = base.clone();
        let mut k = 2;
        while out.iter().any(|p| p.name == name) {
            name = format!("{base}-{k}");
            k += 1;
        }
        let group = |of: fn(&KubeNode) -> Option<&String>| {
            let mut g: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for n in &nodes {
                if let Some(v) = of(n) {
                    g.entry(v.clone()).or_default().push(n.name.clone());
                }
            }
            g
        };
        out.push(Pool {
            name,
            label,
            zone,
            gpu,
            product,
            gpus_per_node: gpus,
            vram_gb,
            check,
            cpus,
            memory_gb,
            hosts: nodes.iter().map(|n| n.name.clone()).collect(),
            leaves: group(|n| n.block.as_ref()),
            nvlink_domains: group(|n| n.clique.as_ref()),
        });
    }
    (out, left)
}

/// The pools as fleet-file TOML for the cluster `cluster` (the kubeconfig context).
pub fn to_toml(
    cluster: &str,
    context: Option<&str>,
    pools: &[Pool],
    left: &[(String, String)],
) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let list = |v: &[String]| v.iter().map(|h| q(h)).collect::<Vec<_>>().join(", ");
    let table = |g: &BTreeMap<String, Vec<String>>| {
        let parts: Vec<String> = g
            .iter()
            .map(|(k, v)| format!("{} = [{}]", q(k), list(v)))
            .collect();
        format!("{{ {} }}", parts.join(", "))
    };
    let mut t = format!(
        "# Pools for the Kubernetes cluster {cluster}, from its nodes' labels and allocatable GPUs.\n# price_per_hour is what a node-hour costs you (for spend and budgets). Check the lines\n# marked CHECK. Or let the daemon build these pools from the nodes as they come and go:\n# one pool with gpu = \"auto\" and a node_selector (README: \"Your Kubernetes cluster\").\n"
    );
    for (node, why) in left {
        t.push_str(&format!("# left out: {node} {why}\n"));
    }
    for p in pools {
        t.push_str(&format!(
            "\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = {}\nname = {}\ninstance_type = {}\ngpu = {}{}\ngpus_per_node = {}\nvram_gb = {}\ncpus = {}\nmemory_gb = {}\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [{}]\n",
            q(if p.zone.is_empty() { "default" } else { &p.zone }),
            q(&p.name),
            q(if p.label.is_empty() { "node" } else { &p.label }),
            q(&p.gpu),
            p.check
                .as_ref()
                .map_or(String::new(), |c| format!("  # CHECK: {c}")),
            p.gpus_per_node,
            p.vram_gb,
            p.cpus,
            p.memory_gb,
            list(&p.hosts)
        ));
        if !p.leaves.is_empty() {
            t.push_str(&format!("leaves = {}\n", table(&p.leaves)));
        }
        // One node per domain says nothing a node alone does not.
        if p.nvlink_domains.values().any(|v| v.len() > 1) {
            t.push_str(&format!("nvlink_domains = {}\n", table(&p.nvlink_domains)));
        }
        t.push_str(&format!(
            "\n[pools.kubernetes]\n{}image = \"nvcr.io/nvidia/pytorch:25.01-py3\"  # what gantry's pods run unless a job names its image_id\n",
            context.map_or(String::new(), |c| format!("context = {}\n", q(c))),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(
        name: &str,
        pool: &str,
        product: &str,
        gpus: u32,
        block: &str,
        clique: &str,
    ) -> KubeNode {
        KubeNode {
            name: name.into(),
            pool: pool.into(),
            zone: "us-east-1a".into(),
            block: (!block.is_empty()).then(|| block.into()),
            gpus,
            product: (!product.is_empty()).then(|| product.into()),
            gpu_memory_mib: (product == "NVIDIA-H100-80GB-HBM3").then_some(81_559),
            clique: (!clique.is_empty()).then(|| clique.into()),
            cpu_milli: 192_000,
            memory_mib: 2_000_000,
            ready: true,
            ..KubeNode::default()
        }
    }

    /// Nodes group by label, zone, model and shape; blocks and cliques become named leaves
    /// and NVLink domains; the TOML loads as a fleet whose nodes carry them.
    #[test]
    fn pools_group_nodes_with_their_topology_and_load_as_a_fleet() {
        let mut mig = node("mig-1", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", 0, "", "");
        mig.mig.insert("nvidia.com/mig-1g.5gb".into(), 56);
        let nodes = vec![
            node(
                "h-1",
                "p5.48xlarge",
                "NVIDIA-H100-80GB-HBM3",
                8,
                "block-a",
                "c1",
            ),
            node(
                "h-2",
                "p5.48xlarge",
                "NVIDIA-H100-80GB-HBM3",
                8,
                "block-a",
                "c1",
            ),
            node(
                "h-3",
                "p5.48xlarge",
                "NVIDIA-H100-80GB-HBM3",
                8,
                "block-b",
                "c2",
            ),
            node("a-1", "p4d.24xlarge", "NVIDIA-A100-SXM4-40GB", 8, "", ""),
            node("x-1", "", "", 4, "", ""),
            mig,
            node("cpu-1", "m5.large", "", 0, "", ""),
        ];
        let (p, left) = pools(&nodes);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["gpu", "p4d-24xlarge", "p5-48xlarge"]);
        assert_eq!(left.len(), 1);
        let h = &p[2];
        assert_eq!(
            (h.gpu.as_str(), h.vram_gb, h.check.as_ref()),
            ("H100", 80, None)
        );
        assert_eq!(h.leaves["block-a"], ["h-1", "h-2"]);
        assert_eq!(h.nvlink_domains["c2"], ["h-3"]);
        assert!(p[1].check.as_deref().unwrap().contains("40 or 80"));
        assert!(p[0]
            .check
            .as_deref()
            .unwrap()
            .contains("no nvidia.com/gpu.product"));
        let text = to_toml("prod", Some("gpu-prod"), &p, &left);
        assert!(
            text.contains("# left out: mig-1 offers MIG slices only"),
            "{text}"
        );
        assert!(
            text.contains("leaves = { \"block-a\" = [\"h-1\", \"h-2\"], \"block-b\" = [\"h-3\"] }"),
            "{text}"
        );
        // The untyped pool needs its CHECK filled in; then the whole file loads.
        let fixed = text
            .replace("gpu = \"GPU\"", "gpu = \"L4\"")
            .replace("vram_gb = 0", "vram_gb = 24");
        let cfg = crate::config::fleet::parse(
            "fleet.toml",
            &format!("[[teams]]\nname = \"lab\"\n{fixed}"),
        )
        .unwrap_or_else(|e| panic!("{e}\n{fixed}"));
        let f = crate::config::fleet::fleet_of(&cfg);
        let at = |name: &str| f.nodes.iter().find(|n| n.name == name).unwrap();
        assert_eq!(at("h-1").leaf, at("h-2").leaf);
        assert_ne!(at("h-1").leaf, at("h-3").leaf);
        assert_eq!(at("h-1").nvlink, at("h-2").nvlink);
        assert_ne!(at("h-2").nvlink, at("h-3").nvlink);
    }
}
