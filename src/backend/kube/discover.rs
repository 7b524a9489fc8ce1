//! `gpu = "auto"` Kubernetes pools: the daemon builds them from the cluster when it opens its
//! state (at start, and at every reload of the fleet file): the nodes `node_selector` selects,
//! grouped as `gantry kube --fleet` groups them (pool label, zone, GPU model, node shape),
//! each group one gantry pool named `STANZA-GROUP` with the stanza's cluster, image,
//! namespace, region and capacity, its hosts the group's nodes, its leaves and NVLink domains
//! the nodes' block label and `nvidia.com/gpu.clique`. One LIST of Nodes (not a watch: the
//! pools' runners watch once they are open). A cluster that cannot be read leaves the stanza
//! without nodes, and says why.

use super::inventory::Labels;
use crate::config::fleet::PoolConfig;
use k8s_openapi::api::core::v1::Node;
use kube::api::ListParams;
use kube::Api;
use std::time::Duration;

/// How long the listing may take before the stanza is left without nodes.
const LIST_TIMEOUT: Duration = Duration::from_secs(15);

pub use crate::config::kube::{check_label_key, check_selector};

/// The pools a `gpu = "auto"` Kubernetes stanza makes of the nodes it selects now, and what
/// to say of it (the pools; nodes left out and why); an error where the cluster cannot be
/// read (`backend::discover` keeps what the stanza had).
pub fn build(p: &PoolConfig) -> Result<(Vec<PoolConfig>, Vec<String>), String> {
    let nodes = list_nodes(p)?;
    let (pools, left) = built(p, &nodes);
    let mut said = vec![summary(p, &pools, nodes.len())];
    for (node, why) in left {
        said.push(format!("pool {}: node {node} left out: {why}", p.name));
    }
    Ok((pools, said))
}

fn summary(stanza: &PoolConfig, pools: &[PoolConfig], selected: usize) -> String {
    let sel = stanza
        .kubernetes
        .as_ref()
        .and_then(|k| k.node_selector.as_deref())
        .map_or("the cluster has".to_string(), |s| format!("match `{s}`"));
    let each: Vec<String> = pools
        .iter()
        .map(|p| {
            format!(
                "{} ({} × {} {})",
                p.name,
                p.nodes,
                p.gpus_per_node,
                p.gpu.as_deref().unwrap_or("CPU")
            )
        })
        .collect();
    format!(
        "pool {}: {selected} node(s) {sel}; the {} with GPUs make {} pool(s){}{}",
        stanza.name,
        pools.iter().map(|p| p.nodes as usize).sum::<usize>(),
        pools.len(),
        if each.is_empty() { "" } else { ": " },
        each.join(", ")
    )
}

/// The stanza's pools from the cluster's `nodes`, and the nodes left out with why.
fn built(stanza: &PoolConfig, nodes: &[Node]) -> (Vec<PoolConfig>, Vec<(String, String)>) {
    let k8s = stanza.kubernetes.clone().unwrap_or_default();
    let labels = Labels {
        pool: k8s.pool_label.unwrap_or_else(|| Labels::default().pool),
        block: k8s.block_label,
        ..Labels::default()
    };
    let seen: Vec<_> = nodes
        .iter()
        .map(|n| super::inventory::node(n, &labels))
        .collect();
    let (groups, mut left) = super::pools::pools(&seen);
    let mut out = Vec::new();
    for g in groups {
        if let Some(check) = &g.check {
            for h in &g.hosts {
                left.push((h.clone(), check.clone()));
            }
            continue;
        }
        let mut p = stanza.clone();
        p.name = format!("{}-{}", stanza.name, g.name);
        if !g.zone.is_empty() {
            p.zone = g.zone.clone();
        }
        if !g.label.is_empty() {
            p.instance_type = g.label.clone();
        }
        p.gpu = Some(g.gpu.clone());
        p.gpus_per_node = g.gpus_per_node.min(16) as u8;
        p.vram_gb = g.vram_gb;
        p.cpus = g.cpus;
        p.memory_gb = g.memory_gb.min(u64::from(u32::MAX)) as u32;
        // The stanza prices a GPU-hour: its nodes differ in how many GPUs they have.
        p.price_per_hour = stanza.price_per_hour * f64::from(p.gpus_per_node);
        p.nodes = g.hosts.len() as u32;
        p.hosts = g.hosts.clone();
        p.leaves = g.leaves.clone();
        p.nvlink_domains = g.nvlink_domains.clone();
        if let Some(k) = &mut p.kubernetes {
            k.node_selector = None;
            k.pool_label = None;
            k.block_label = None;
        }
        out.push(p);
    }
    (out, left)
}

/// The nodes the stanza selects: one LIST, on a runtime of its own (the caller may or may not
/// be inside one), bounded by `LIST_TIMEOUT`.
fn list_nodes(p: &PoolConfig) -> Result<Vec<Node>, String> {
    let k8s = p.kubernetes.clone().unwrap_or_default();
    let kubeconfig = k8s.kubeconfig.as_deref().map(crate::backend::expand_home);
    let context = k8s.context;
    let selector = k8s.node_selector;
    std::thread::scope(|s| {
        s.spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| format!("cannot start a runtime: {e}"))?;
            rt.block_on(async {
                let listing = async {
                    let cluster = super::connect(kubeconfig.as_deref(), context.as_deref()).await?;
                    let mut params = ListParams::default();
                    if let Some(sel) = &selector {
                        params = params.labels(sel);
                    }
                    Api::<Node>::all(cluster.client)
                        .list(&params)
                        .await
                        .map(|l| l.items)
                        .map_err(|e| format!("{}: listing nodes: {e}", cluster.name))
                };
                tokio::time::timeout(LIST_TIMEOUT, listing)
                    .await
                    .map_err(|_| format!("no answer in {} s", LIST_TIMEOUT.as_secs()))?
            })
        })
        .join()
        .map_err(|_| "the listing thread panicked".to_string())?
    })
}
