//! The fleet file's Slurm pools: slurmrestd's address and the nodes, checked before the daemon
//! connects (a wrong entry is named with what is wrong in it).

use super::fleet::{Backend, PoolConfig};
use super::problem::Problem;
use serde::{Deserialize, Serialize};

/// `[pools.slurm]`: which slurmrestd gantry talks to, where its jobs go and who it is there.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlurmSettings {
    /// slurmrestd's address (`http://HOST:6820` or `unix:/PATH`).
    pub slurmrestd: Option<String>,
    /// The partition gantry's jobs are submitted to (default: the cluster's default), or
    /// several as sbatch takes them (`gpu,long`).
    pub partition: Option<String>,
    /// Who slurmrestd reads as (`X-SLURM-USER-NAME`, with the token in SLURM_JWT; default:
    /// the user the daemon runs as). Not needed over the Unix socket.
    pub user: Option<String>,
    /// A file holding the token (what `scontrol token` prints, or the bare JWT), read again
    /// at every request, so whatever renews it (a cron line, a systemd timer) is taken without
    /// a restart. Default: `SLURM_JWT` in the daemon's environment.
    pub token_file: Option<String>,
}

/// A Slurm pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> super::problem::Checked {
    let Some(s) = super::pool::backend_table(
        p,
        name,
        p.slurm.as_ref(),
        Backend::Slurm,
        "with slurmrestd's address, e.g. slurmrestd = \"unix:/run/slurmrestd.sock\" or \"http://head:6820\"",
    )?
    else {
        return Ok(());
    };
    let Some(url) = &s.slurmrestd else {
        return Err(Problem::at("slurm.slurmrestd", format!(
            "{name}: [pools.slurm] needs `slurmrestd`, e.g. slurmrestd = \"unix:/run/slurmrestd.sock\" or \"http://head:6820\""
        )));
    };
    if !(url.starts_with("unix:/") || url.starts_with("http://") || url.starts_with("https://")) {
        return Err(Problem::at("slurm.slurmrestd", format!(
            "{name}: [pools.slurm] slurmrestd = \"{url}\": expected http://HOST:PORT or unix:/PATH/TO/SOCKET"
        )));
    }
    if let Some(f) = &s.token_file {
        if !f.starts_with('/') {
            return Err(Problem::at("slurm.token_file", format!(
                "{name}: [pools.slurm] token_file = \"{f}\": give an absolute path (the daemon reads it from wherever it runs)"
            )));
        }
    }
    if p.is_auto() {
        // Built from the cluster (`backend::slurm::discover`): `hosts`, where given, only
        // narrows it down.
        if p.gpus_per_node > 0 || p.vram_gb > 0 || p.mig_gpus_per_node > 0 {
            return Err(Problem::at("gpus_per_node", format!(
                "{name}: gpu = \"auto\": the GPUs come from the nodes' GRES; leave gpus_per_node and vram_gb out"
            )));
        }
        if p.max_nodes.is_some() || p.min_nodes > 0 {
            return Err(Problem::at(
                "max_nodes",
                format!("{name}: a Slurm pool is the cluster's nodes: no min_nodes or max_nodes"),
            ));
        }
    } else if p.hosts.is_empty() {
        return Err(Problem::at("hosts", format!(
            "{name}: a provider = \"slurm\" pool needs `hosts`: its Slurm nodes, e.g. hosts = [\"gpu-a\", \"gpu-b\"] (`gantry slurm --fleet` prints them) — or gpu = \"auto\", and gantry builds the pools from the cluster's nodes"
        )));
    }
    for h in &p.hosts {
        if h.is_empty() || h.contains(|c: char| c.is_whitespace() || ",[]".contains(c)) {
            return Err(Problem::at(
                "hosts",
                format!(
                    "{name}: hosts: `{h}` is not a Slurm node name (one node per entry; no ranges)"
                ),
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

    /// The pool with `extra` among its own fields and `table` as its [pools.slurm].
    fn with(extra: &str, table: &str) -> Result<crate::config::fleet::FleetConfig, String> {
        parse("f.toml", &format!("{POOL}{extra}[pools.slurm]\n{table}")).map_err(|e| e.to_string())
    }

    const RESTD: &str = "slurmrestd = \"http://h:6820\"\n";

    #[test]
    fn a_slurm_pool_has_a_node_per_slurm_node() {
        let cfg = with(
            "hosts = [\"gpu-a\", \"gpu-b\"]\n",
            "slurmrestd = \"unix:/run/slurmrestd.sock\"\npartition = \"gpu\"\nuser = \"alice\"\n",
        )
        .unwrap();
        assert_eq!(cfg.pools[0].nodes, 2);
        let s = cfg.pools[0].slurm.as_ref().unwrap();
        assert_eq!(
            (s.partition.as_deref(), s.user.as_deref()),
            (Some("gpu"), Some("alice"))
        );
        let fleet = crate::config::fleet::fleet_of(&cfg);
        let names: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu-a", "gpu-b"]);
    }

    #[test]
    fn a_wrong_slurm_pool_says_what_is_wrong_and_where() {
        let e = parse("f.toml", &format!("{POOL}hosts = [\"gpu-a\"]\n"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("f.toml:4:1")
                && e.contains("needs its [pools.slurm] table with slurmrestd's address"),
            "{e}"
        );
        let e = with("hosts = [\"gpu-a\"]\n", "partition = \"gpu\"\n").unwrap_err();
        assert!(e.contains("[pools.slurm] needs `slurmrestd`"), "{e}");
        let e = with("hosts = [\"gpu-a\"]\n", "slurmrestd = \"gpu-head:6820\"\n").unwrap_err();
        assert!(e.contains("expected http://HOST:PORT or unix:/PATH"), "{e}");
        let e = with("", RESTD).unwrap_err();
        assert!(
            e.contains("needs `hosts`") && e.contains("gantry slurm --fleet"),
            "{e}"
        );
        let e = with("hosts = [\"gpu-[a-b]\"]\n", RESTD).unwrap_err();
        assert!(e.contains("no ranges"), "{e}");
        let e = with("hosts = [\"a\", \"a\"]\n", RESTD).unwrap_err();
        assert!(e.contains("listed twice"), "{e}");
        let e = with(
            "hosts = [\"a\"]\n",
            "slurmrestd = \"http://h:6820\"\nslurm_user = \"x\"\n",
        )
        .unwrap_err();
        assert!(e.contains("unknown field `slurm_user`"), "{e}");
        let ssh = POOL.replace("\"slurm\"", "\"ssh\"");
        let e = parse(
            "f.toml",
            &format!("{ssh}hosts = [\"h\"]\n[pools.slurm]\npartition = \"gpu\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("[pools.slurm] is for backend = \"slurm\" pools (this one is driven by the ssh backend)"),
            "{e}"
        );
        // A file written for an older gantry: the field is named with where it goes now.
        let e = parse(
            "f.toml",
            &format!("{POOL}hosts = [\"gpu-a\"]\nslurm_user = \"alice\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("f.toml:18:1: `slurm_user` is no longer a field of the pool itself")
                && e.contains("[pools.slurm] table, as `user`"),
            "{e}"
        );
    }
}
