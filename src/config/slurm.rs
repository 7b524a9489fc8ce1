//! The fleet file's Slurm pools: slurmrestd's address and the nodes, checked before the daemon
//! connects (a wrong entry is named with what is wrong in it).

use super::fleet::PoolConfig;

/// A Slurm pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> Result<(), String> {
    let slurm_only = [
        ("slurmrestd", p.slurmrestd.is_some()),
        ("partition", p.partition.is_some()),
        ("slurm_user", p.slurm_user.is_some()),
    ];
    if !p.is_slurm() {
        return super::ssh::none_set(p, name, "slurm", &slurm_only);
    }
    let Some(url) = &p.slurmrestd else {
        return Err(format!(
            "{name}: a provider = \"slurm\" pool needs `slurmrestd`, e.g. slurmrestd = \"unix:/run/slurmrestd.sock\" or \"http://head:6820\""
        ));
    };
    if !(url.starts_with("unix:/") || url.starts_with("http://") || url.starts_with("https://")) {
        return Err(format!(
            "{name}: slurmrestd = \"{url}\": expected http://HOST:PORT or unix:/PATH/TO/SOCKET"
        ));
    }
    if p.is_auto() {
        // Built from the cluster (`backend::slurm::discover`): `hosts`, where given, only
        // narrows it down.
        if p.gpus_per_node > 0 || p.vram_gb > 0 || p.mig_gpus_per_node > 0 {
            return Err(format!(
                "{name}: gpu = \"auto\": the GPUs come from the nodes' GRES; leave gpus_per_node and vram_gb out"
            ));
        }
        if p.max_nodes.is_some() || p.min_nodes > 0 {
            return Err(format!(
                "{name}: a Slurm pool is the cluster's nodes: no min_nodes or max_nodes"
            ));
        }
    } else if p.hosts.is_empty() {
        return Err(format!(
            "{name}: a provider = \"slurm\" pool needs `hosts`: its Slurm nodes, e.g. hosts = [\"gpu-a\", \"gpu-b\"] (`gantry slurm --fleet` prints them) — or gpu = \"auto\", and gantry builds the pools from the cluster's nodes"
        ));
    }
    for h in &p.hosts {
        if h.is_empty() || h.contains(|c: char| c.is_whitespace() || ",[]".contains(c)) {
            return Err(format!(
                "{name}: hosts: `{h}` is not a Slurm node name (one node per entry; no ranges)"
            ));
        }
    }
    if p.hosts.is_empty() {
        return Ok(());
    }
    super::ssh::listed_nodes(p, name, "node", "a Slurm pool is its nodes")
}

#[cfg(test)]
mod tests {
    use crate::config::fleet::parse;

    const POOL: &str = "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"slurm\"\nregion = \"hpc\"\nzone = \"dc\"\nname = \"a100\"\ninstance_type = \"node\"\ngpu = \"A100\"\ngpus_per_node = 4\nvram_gb = 80\ncpus = 8\nmemory_gb = 32\ncapacity = \"reserved\"\nprice_per_hour = 0.0\n";

    fn with(extra: &str) -> Result<crate::config::fleet::FleetConfig, String> {
        parse("f.toml", &format!("{POOL}{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_slurm_pool_has_a_node_per_slurm_node() {
        let cfg = with("slurmrestd = \"unix:/run/slurmrestd.sock\"\nhosts = [\"gpu-a\", \"gpu-b\"]\npartition = \"gpu\"\n").unwrap();
        assert_eq!(cfg.pools[0].nodes, 2);
        let fleet = crate::config::fleet::fleet_of(&cfg);
        let names: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-b"]);
    }

    #[test]
    fn a_wrong_slurm_pool_says_what_is_wrong_and_where() {
        let e = with("hosts = [\"gpu-a\"]\n").unwrap_err();
        assert!(
            e.contains("f.toml:4:1") && e.contains("needs `slurmrestd`"),
            "{e}"
        );
        let e = with("slurmrestd = \"gpu-head:6820\"\nhosts = [\"gpu-a\"]\n").unwrap_err();
        assert!(e.contains("expected http://HOST:PORT or unix:/PATH"), "{e}");
        let e = with("slurmrestd = \"http://h:6820\"\n").unwrap_err();
        assert!(
            e.contains("needs `hosts`") && e.contains("gantry slurm --fleet"),
            "{e}"
        );
        let e = with("slurmrestd = \"http://h:6820\"\nhosts = [\"gpu-[a-b]\"]\n").unwrap_err();
        assert!(e.contains("no ranges"), "{e}");
        let e = with("slurmrestd = \"http://h:6820\"\nhosts = [\"a\", \"a\"]\n").unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        let ssh = POOL.replace("\"slurm\"", "\"ssh\"");
        let e = parse(
            "f.toml",
            &format!("{ssh}hosts = [\"h\"]\npartition = \"gpu\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`partition` is for provider = \"slurm\" pools"),
            "{e}"
        );
    }
}
