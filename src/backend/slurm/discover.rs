//! `gpu = "auto"` Slurm pools: built from what slurmrestd says of the cluster's nodes, as
//! `gantry slurm --fleet` prints them (one pool per partition, GPU type and node shape), so a
//! fleet file needs only the slurmrestd address — and the pools follow the cluster (nodes
//! added, removed, their GRES changed) as `backend::discover` looks again.

use super::inventory::Inventory;
use super::rest::SlurmRest;
use crate::config::fleet::PoolConfig;

/// The pools the stanza makes of its cluster's nodes now, and what to say of it.
pub fn build(p: &PoolConfig) -> Result<(Vec<PoolConfig>, Vec<String>), String> {
    let s = p.slurm.clone().unwrap_or_default();
    let url = s.slurmrestd.unwrap_or_default();
    let token = super::token::Token::of(s.token_file.as_deref());
    let user = super::runner::reads_as(s.user, token.as_ref());
    // A blocking client on a thread of its own: the caller may be inside a runtime.
    let inv = std::thread::scope(|s| {
        s.spawn(|| SlurmRest::connect(&url, user, token)?.inventory())
            .join()
            .map_err(|_| "the listing thread panicked".to_string())?
    })?;
    let (pools, notes) = built(p, &inv);
    let each: Vec<String> = pools
        .iter()
        .map(|b| {
            format!(
                "{} ({} × {} {})",
                b.name,
                b.nodes,
                b.gpus_per_node,
                b.gpu.as_deref().unwrap_or("CPU")
            )
        })
        .collect();
    let mut said = vec![format!(
        "pool {}: slurmrestd {url} (Slurm {}) lists {} node(s){}; {} pool(s){}{}",
        p.name,
        inv.slurm.as_deref().unwrap_or("?"),
        inv.nodes.len(),
        partition(p).map_or(String::new(), |q| format!(", partition {q}")),
        pools.len(),
        if each.is_empty() { "" } else { ": " },
        each.join(", ")
    )];
    said.extend(notes);
    Ok((pools, said))
}

/// The partition a Slurm pool names, if it names one.
fn partition(p: &PoolConfig) -> Option<&str> {
    p.slurm.as_ref().and_then(|s| s.partition.as_deref())
}

/// The stanza's pools from the cluster's nodes (those of its partition, and of its `hosts`
/// where it lists some), and what to say: nodes left out and why, VRAM assumed and why.
pub fn built(stanza: &PoolConfig, inv: &Inventory) -> (Vec<PoolConfig>, Vec<String>) {
    let mut left = Vec::new();
    let mut notes = Vec::new();
    let nodes = inv
        .nodes
        .iter()
        .filter(|n| {
            partition(stanza).is_none_or(|q| n.partitions.iter().any(|m| m == q))
                && (stanza.hosts.is_empty() || stanza.hosts.contains(&n.name))
        })
        .cloned()
        .collect();
    let selected = Inventory {
        nodes,
        ..Inventory::default()
    };
    for n in &selected.nodes {
        if n.gpus.iter().all(|g| g.count == 0) {
            left.push((n.name.clone(), "no GPUs in its GRES".to_string()));
        }
    }
    for h in &stanza.hosts {
        if !inv.nodes.iter().any(|n| &n.name == h) {
            left.push((h.clone(), "Slurm has no node of that name".to_string()));
        }
    }
    let mut out = Vec::new();
    for g in super::pools::pools(&selected) {
        let name = format!("{}-{}", stanza.name, g.name);
        match &g.check {
            // No type gantry knows: no VRAM to place by.
            Some(check) if g.vram_gb == 0 => {
                for h in &g.hosts {
                    left.push((
                        h.clone(),
                        format!("{check} (in a pool of its own, declared by hand)"),
                    ));
                }
                continue;
            }
            // A type sold in two sizes (A100): the smaller, said.
            Some(check) => notes.push(format!(
                "pool {name}: {} GB of VRAM per GPU assumed ({check}; declare the pool by hand to say otherwise)",
                g.vram_gb
            )),
            None => {}
        }
        let mut p = stanza.clone();
        p.name = name;
        p.gpu = Some(g.gpu.clone());
        p.gpus_per_node = g.gpus_per_node.min(16) as u8;
        p.vram_gb = g.vram_gb;
        p.cpus = g.cpus;
        p.memory_gb = g.memory_gb.min(u64::from(u32::MAX)) as u32;
        // The stanza prices a GPU-hour: its nodes differ in how many GPUs they have.
        p.price_per_hour = stanza.price_per_hour * f64::from(p.gpus_per_node);
        if partition(&p).is_none() && !g.partition.is_empty() {
            p.slurm.get_or_insert_default().partition = Some(g.partition.clone());
        }
        p.nodes = g.hosts.len() as u32;
        p.hosts = g.hosts.clone();
        out.push(p);
    }
    left.sort();
    notes.extend(
        left.into_iter()
            .map(|(node, why)| format!("pool {}: node {node} left out: {why}", stanza.name)),
    );
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::slurm::gres;
    use crate::backend::slurm::inventory::Node;

    fn node(name: &str, part: &str, gres_text: &str) -> Node {
        Node {
            name: name.into(),
            partitions: vec![part.into()],
            state: "idle".into(),
            gpus: gres::parse(gres_text).unwrap(),
            cpus: 64,
            memory_mb: 512_000,
            ..Node::default()
        }
    }

    #[test]
    fn an_auto_stanza_is_the_clusters_gpu_nodes_of_its_partition() {
        let cfg = crate::config::fleet::parse(
            "f.toml",
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"slurm\"\nname = \"hpc\"\ngpu = \"auto\"\nprice_per_hour = 2.0\n[pools.slurm]\nslurmrestd = \"unix:/run/slurmrestd.sock\"\npartition = \"gpu\"\n",
        )
        .unwrap();
        let stanza = &cfg.pools[0];
        assert_eq!(
            (stanza.region.as_str(), stanza.zone.as_str(), stanza.nodes),
            ("slurm", "default", 0)
        );
        let inv = Inventory {
            nodes: vec![
                node("h1", "gpu", "gpu:h100:8"),
                node("h2", "gpu", "gpu:h100:8"),
                node("x1", "gpu", "gpu:4"),
                node("d1", "debug", "gpu:h100:8"),
                node("c1", "gpu", ""),
            ],
            ..Inventory::default()
        };
        let (pools, said) = built(stanza, &inv);
        assert_eq!(pools.len(), 1, "{pools:?}");
        let p = &pools[0];
        assert_eq!(p.name, "hpc-gpu-h100");
        assert_eq!(
            (p.gpu.as_deref(), p.gpus_per_node, p.vram_gb),
            (Some("H100"), 8, 80)
        );
        assert_eq!(p.hosts, ["h1", "h2"]);
        assert_eq!(p.nodes, 2);
        assert_eq!(p.price_per_hour, 16.0);
        assert_eq!(partition(p), Some("gpu"));
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("node c1 left out: no GPUs"), "{said:?}");
        assert!(
            said[1].contains("node x1 left out: Slurm names no GPU type"),
            "{said:?}"
        );
        // What it was built into is a fleet gantry opens.
        let mut built_cfg = cfg.clone();
        built_cfg.pools = pools;
        let fleet = crate::config::fleet::fleet_of(&built_cfg);
        assert_eq!(fleet.nodes.len(), 2);
    }

    #[test]
    fn an_auto_stanza_declares_no_gpus_and_a_listed_one_says_what_is_missing() {
        let base = "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"slurm\"\nname = \"hpc\"\n";
        let restd = "[pools.slurm]\nslurmrestd = \"http://h:6820\"\n";
        let e = crate::config::fleet::parse(
            "f.toml",
            &format!("{base}gpu = \"auto\"\ngpus_per_node = 8\n{restd}"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("leave gpus_per_node and vram_gb out"), "{e}");
        // Not auto: the fields a pool writes are asked for, at the pool's line.
        let e = crate::config::fleet::parse(
            "f.toml",
            &format!("{base}gpu = \"H100\"\nhosts = [\"a\"]\n{restd}"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("f.toml:4:1") && e.contains("missing field `region`"),
            "{e}"
        );
    }
}
