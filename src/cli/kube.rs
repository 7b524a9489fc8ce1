//! `gantry kube`: a Kubernetes cluster's GPU nodes as gantry sees them — GPUs, models (GPU
//! Feature Discovery), zones, which nodes take work and which pods hold GPUs there.

use super::{print_as, Output};
use gantry::backend::kube::inventory::{KubeNode, Labels};
use gantry::backend::kube::{connect, Watched};
use std::path::PathBuf;
use std::time::Duration;

/// Which cluster, and which labels say what.
pub struct Reading {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub pool_label: Option<String>,
    pub block_label: Option<String>,
}

pub fn show(r: Reading, fleet: bool, output: Output) -> Result<(), String> {
    let rt = gantry::daemon::server::runtime()?;
    let labels = Labels {
        pool: r.pool_label.unwrap_or_else(|| Labels::default().pool),
        block: r.block_label,
        ..Labels::default()
    };
    let (cluster, nodes) = rt.block_on(async {
        let cluster = connect(r.kubeconfig.as_deref(), r.context.as_deref()).await?;
        let watched = Watched::start(&tokio::runtime::Handle::current(), &cluster);
        watched.ready(Duration::from_secs(15)).await?;
        Ok::<_, String>((cluster.name, watched.inventory(&labels)))
    })?;
    if fleet {
        let (pools, left) = gantry::backend::kube::pools::pools(&nodes);
        if output.is_data() {
            return print_as(output, &pools);
        }
        print!(
            "{}",
            gantry::backend::kube::pools::to_toml(&cluster, r.context.as_deref(), &pools, &left)
        );
        return Ok(());
    }
    if output.is_data() {
        return print_as(output, &nodes);
    }
    print_table(&cluster, &nodes);
    Ok(())
}

fn print_table(cluster: &str, nodes: &[KubeNode]) {
    let gpus: u32 = nodes.iter().map(|n| n.gpus).sum();
    let foreign: Vec<(&str, &gantry::backend::kube::inventory::ForeignPod)> = nodes
        .iter()
        .flat_map(|n| n.foreign.iter().map(move |p| (n.name.as_str(), p)))
        .collect();
    println!(
        "Kubernetes {cluster} · {} node(s), {gpus} GPU(s), {} pod(s) of others holding {}",
        nodes.len(),
        foreign.len(),
        foreign.iter().map(|(_, p)| p.gpus).sum::<u32>()
    );
    println!(
        "\n{:<24} {:<18} {:>9}  {:<28} {:<14} STATE",
        "NODE", "POOL", "GPUS USED", "MODEL", "ZONE"
    );
    for n in nodes {
        let used: u32 = n.foreign.iter().map(|p| p.gpus).sum::<u32>() + n.gantry_gpus;
        let mut model = n.product.clone().unwrap_or_else(|| "-".into());
        if let Some(m) = n.gpu_memory_mib {
            model.push_str(&format!(" {} GiB", m / 1024));
        }
        if !n.mig.is_empty() {
            let slices: Vec<String> = n.mig.iter().map(|(p, c)| format!("{c}×{p}")).collect();
            model.push_str(&format!(" MIG {}", slices.join(",")));
        }
        let state = if n.unusable.is_empty() {
            "ready".to_string()
        } else {
            n.unusable.join(", ")
        };
        println!(
            "{:<24} {:<18} {:>9}  {:<28} {:<14} {state}",
            n.name,
            if n.pool.is_empty() { "-" } else { &n.pool },
            format!("{used}/{}", n.gpus),
            model,
            if n.zone.is_empty() { "-" } else { &n.zone },
        );
    }
    if !foreign.is_empty() {
        println!(
            "\n{:<20} {:<32} {:<24} {:>4}  PHASE",
            "NAMESPACE", "POD", "NODE", "GPUS"
        );
        for (node, p) in foreign {
            println!(
                "{:<20} {:<32} {:<24} {:>4}  {}",
                p.namespace, p.name, node, p.gpus, p.phase
            );
        }
    }
}
