//! Fleet-file pools for a Slurm cluster, from what slurmrestd says of its nodes
//! (`gantry slurm --fleet`): one pool per partition, GPU type and node shape, its hosts the
//! Slurm nodes — gantry's pools hold one GPU model and one node shape each.

use super::inventory::{Inventory, Node};
use crate::model::names::model_of;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Pool {
    pub name: String,
    pub partition: String,
    /// gantry's name for the model, from Slurm's GRES type.
    pub gpu: String,
    pub gres_type: Option<String>,
    pub gpus_per_node: u32,
    /// Per GPU; 0 where the type says nothing gantry knows.
    pub vram_gb: u32,
    /// Why `vram_gb` needs a look, where it does.
    pub check: Option<String>,
    pub cpus: u32,
    pub memory_gb: u64,
    pub hosts: Vec<String>,
}

/// The pools of the cluster's GPU nodes (nodes without GPUs are left out).
pub fn pools(inv: &Inventory) -> Vec<Pool> {
    type Shape = (String, Option<String>, u32, u32, u64);
    let mut by: BTreeMap<Shape, Vec<&Node>> = BTreeMap::new();
    for n in &inv.nodes {
        // A node with GPUs of two types is listed under its first (gantry's nodes hold one).
        let Some(g) = n.gpus.first() else { continue };
        let count: u32 = n
            .gpus
            .iter()
            .filter(|x| x.model == g.model)
            .map(|x| x.count)
            .sum();
        if count == 0 {
            continue;
        }
        let partition = n.partitions.first().cloned().unwrap_or_default();
        let memory_gb = (n.memory_mb / 1024).max(1);
        by.entry((partition, g.model.clone(), count, n.cpus, memory_gb))
            .or_default()
            .push(n);
    }
    let mut out: Vec<Pool> = Vec::new();
    for ((partition, ty, count, cpus, memory_gb), nodes) in by {
        let (gpu, vram_gb, check) = match ty.as_deref() {
            Some(t) => model_of(t),
            None => (
                "GPU".into(),
                0,
                Some("Slurm names no GPU type on these nodes: set gpu and vram_gb".into()),
            ),
        };
        let mut name = format!(
            "{}{}",
            if partition.is_empty() {
                String::new()
            } else {
                format!("{partition}-")
            },
            gpu.to_ascii_lowercase()
        );
        // Two shapes of the same partition and model: the second named by its size.
        if out.iter().any(|p| p.name == name) {
            name = format!("{name}-{count}x-{cpus}cpu");
        }
        out.push(Pool {
            name,
            partition,
            gpu,
            gres_type: ty,
            gpus_per_node: count,
            vram_gb,
            check,
            cpus,
            memory_gb,
            hosts: nodes.iter().map(|n| n.name.clone()).collect(),
        });
    }
    out
}

/// The pools as fleet-file TOML for the cluster at `url`.
/// `user`, where given, is who the pools read as (`user =`: the token's user).
pub fn to_toml(inv: &Inventory, pools: &[Pool], url: &str, user: Option<&str>) -> String {
    let q = |s: &str| toml::Value::String(s.to_string()).to_string();
    let mut t = format!(
        "# Pools for the Slurm cluster at {url} (Slurm {}, slurmrestd {}), from its nodes' GRES.\n# price_per_hour is what a node-hour costs you (for spend and budgets); region and zone\n# are yours to name. Check the lines marked CHECK.\n",
        inv.slurm.as_deref().unwrap_or("?"),
        inv.api
    );
    for p in pools {
        let hosts: Vec<String> = p.hosts.iter().map(|h| q(h)).collect();
        t.push_str(&format!(
            "\n[[pools]]\nprovider = \"slurm\"\nregion = \"slurm\"\nzone = {}\nname = {}\ninstance_type = \"slurm node\"\ngpu = {}\ngpus_per_node = {}\nvram_gb = {}{}\ncpus = {}\nmemory_gb = {}\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [{}]\n\n[pools.slurm]\nslurmrestd = {}\n{}",
            q(if p.partition.is_empty() { "default" } else { &p.partition }),
            q(&p.name),
            q(&p.gpu),
            p.gpus_per_node,
            p.vram_gb,
            p.check
                .as_ref()
                .map_or(String::new(), |c| format!("  # CHECK: {c}")),
            p.cpus,
            p.memory_gb,
            hosts.join(", "),
            q(url),
            if p.partition.is_empty() {
                String::new()
            } else {
                format!("partition = {}\n", q(&p.partition))
            },
        ));
        if let Some(u) = user {
            t.push_str(&format!("user = {}\n", q(u)));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slurm::gres;

    fn node(name: &str, part: &str, gres_text: &str, cpus: u32) -> Node {
        Node {
            name: name.into(),
            partitions: vec![part.into()],
            state: "idle".into(),
            gpus: gres::parse(gres_text).unwrap(),
            cpus,
            memory_mb: 512_000,
            ..Node::default()
        }
    }

    /// Nodes group by partition, type and shape; the TOML is a fleet gantry loads.
    #[test]
    fn pools_group_nodes_and_load_as_a_fleet() {
        let inv = Inventory {
            api: "v0.0.38".into(),
            slurm: Some("22.05.8".into()),
            nodes: vec![
                node("a1", "gpu", "gpu:a100_80g:8", 64),
                node("a2", "gpu", "gpu:a100_80g:8", 64),
                node("h1", "gpu", "gpu:h100:8", 96),
                node("h2", "gpu", "gpu:h100:4", 48),
                node("x1", "debug", "gpu:4", 16),
                node("c1", "cpu", "", 128),
            ],
            ..Inventory::default()
        };
        let p = pools(&inv);
        let names: Vec<&str> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "debug-gpu",
                "gpu-a100-80gb",
                "gpu-h100",
                "gpu-h100-8x-96cpu"
            ]
        );
        assert_eq!(p[1].hosts, ["a1", "a2"]);
        assert_eq!((p[1].gpu.as_str(), p[1].vram_gb), ("A100-80GB", 80));
        assert!(p[0].check.as_deref().unwrap().contains("no GPU type"));
        let text = to_toml(&inv, &p, "unix:/run/slurmrestd.sock", None);
        assert!(
            text.contains("vram_gb = 0  # CHECK: Slurm names no GPU type"),
            "{text}"
        );
        // With the CHECK filled in, it loads.
        let fixed = text.replace("vram_gb = 0", "vram_gb = 24");
        let fleet = crate::config::fleet::parse(
            "fleet.toml",
            &format!("[[teams]]\nname = \"lab\"\n{fixed}"),
        )
        .unwrap_or_else(|e| panic!("{e}\n{fixed}"));
        assert_eq!(fleet.pools.len(), 4);
        assert_eq!(model_of("v100").1, 16);
        assert_eq!(model_of("A10G").0, "A10G");
        assert_eq!(model_of("a10").0, "A10");
    }
}
