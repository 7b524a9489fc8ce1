//! Pools built from a cluster: a `gpu = "auto"` stanza of a Kubernetes or Slurm pool stands for
//! the pools its cluster's nodes make (`kube::discover::build`, `slurm::discover::build`). The
//! daemon builds them when it opens its state (at start and at every reload of the fleet file)
//! and looks again every `--cluster-look-every`, reloading when what they would be built into
//! moves (nodes joined or left, a node's GPUs changed).

use crate::config::fleet::{FleetConfig, PoolConfig};

/// The pools each `gpu = "auto"` stanza was last built into, by its name.
pub type Built = std::collections::BTreeMap<String, Vec<PoolConfig>>;

/// The stanza's pools from its cluster now, and what to say of them.
fn build(p: &PoolConfig) -> Result<(Vec<PoolConfig>, Vec<String>), String> {
    if p.is_kube() {
        super::kube::discover::build(p)
    } else {
        super::slurm::discover::build(p)
    }
}

/// The fleet file with each stanza built from its cluster replaced by the pools its nodes
/// make, what was done (or why not), to be said once, and what each was built into. A
/// cluster that cannot be read keeps what `last` built from it (a reload while its API is
/// down must not take running jobs' nodes away), else leaves the stanza empty. With `fresh`,
/// what `last` has is taken as it is (just listed: a reload that compared it).
pub fn expand(cfg: &FleetConfig, last: &Built, fresh: bool) -> (FleetConfig, Vec<String>, Built) {
    let mut built_now = Built::new();
    if !cfg.pools.iter().any(PoolConfig::built_from_cluster) {
        return (cfg.clone(), Vec::new(), built_now);
    }
    let mut out = cfg.clone();
    out.pools.clear();
    let mut said = Vec::new();
    for p in &cfg.pools {
        if !p.built_from_cluster() {
            out.pools.push(p.clone());
            continue;
        }
        if let (true, Some(pools)) = (fresh, last.get(&p.name)) {
            built_now.insert(p.name.clone(), pools.clone());
            out.pools.extend(pools.iter().cloned());
            continue;
        }
        let pools = match build(p) {
            Ok((pools, what)) => {
                said.extend(what);
                pools
            }
            Err(e) => match last.get(&p.name) {
                Some(before) => {
                    said.push(format!(
                        "pool {}: cannot read the cluster's nodes ({e}): it keeps the {} pool(s) it had",
                        p.name,
                        before.len()
                    ));
                    before.clone()
                }
                None => {
                    said.push(format!(
                        "pool {}: cannot read the cluster's nodes ({e}): the pool has no nodes until the fleet file is reloaded (edit it or `kill -HUP` the daemon; the daemon also looks again every minute)",
                        p.name
                    ));
                    let mut empty = p.clone();
                    empty.resolve_auto(None);
                    vec![empty]
                }
            },
        };
        built_now.insert(p.name.clone(), pools.clone());
        out.pools.extend(pools);
    }
    (out, said, built_now)
}

/// What each stanza of `cfg` built from a cluster would be built into now: its pools' names,
/// models and nodes — or why a cluster could not be read.
pub fn shape(cfg: &FleetConfig) -> Result<Vec<(String, String, Vec<String>)>, String> {
    let mut out = Vec::new();
    for p in cfg.pools.iter().filter(|p| p.built_from_cluster()) {
        let (pools, _) = build(p).map_err(|e| format!("pool {}: {e}", p.name))?;
        for b in pools {
            out.push((b.name, b.gpu.unwrap_or_default(), b.hosts));
        }
    }
    Ok(out)
}
