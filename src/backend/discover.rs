//! Pools built from a cluster: a `gpu = "auto"` stanza of a Kubernetes or Slurm pool stands for
//! the pools its cluster's nodes make (`kube::discover::build`, `slurm::discover::build`). The
//! daemon builds them when it opens its state (at start and at every reload of the fleet file)
//! and looks again every `--cluster-look-every`, reloading when what they would be built into
//! moves (nodes joined or left, a node's GPUs changed).

use crate::config::fleet::{mig_geometry, FleetConfig, FoundGpus, PoolConfig};

/// What each `gpu = "auto"` stanza was last built into, and which could not be read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Built {
    /// The pools each stanza was last built into, by its name.
    pub pools: std::collections::BTreeMap<String, Vec<PoolConfig>>,
    /// Stanzas whose cluster could not be read at the last try, by name: why, and how many
    /// tries in a row have failed (the pool shows it, and the events say it when it changes).
    pub unread: std::collections::BTreeMap<String, Unread>,
}

/// A stanza whose cluster could not be read.
#[derive(Clone, Debug, PartialEq)]
pub struct Unread {
    pub why: String,
    pub tries: u32,
    /// It has no pools of its own yet (nothing was ever read): it is one empty pool.
    pub empty: bool,
}

impl Built {
    /// Why the stanza (or the pool built from it, of the same name) has no nodes, if it has
    /// none because its cluster could not be read: a line for the pool's row.
    pub fn why_empty(&self, pool: &str) -> Option<String> {
        let u = self.unread.get(pool).filter(|u| u.empty)?;
        Some(format!(
            "no nodes: cannot read the cluster's nodes ({}); tried {} time(s), again every minute or at a reload",
            u.why, u.tries
        ))
    }

    /// The lines of `now` worth an event against `self` (what was built before): a stanza
    /// whose cluster became unreadable, or unreadable for another reason, or readable again.
    /// With `all`, every unreadable one (the operator asked: a SIGHUP).
    pub fn news(&self, now: &Built, all: bool) -> Vec<String> {
        let mut said = Vec::new();
        for (name, u) in &now.unread {
            let before = self.unread.get(name).map(|b| &b.why);
            if all || before != Some(&u.why) {
                said.push(now.unread_line(name, u));
            }
        }
        for name in self.unread.keys() {
            if !now.unread.contains_key(name) && now.pools.contains_key(name) {
                let n = now.pools[name].len();
                said.push(format!(
                    "pool {name}: the cluster's nodes are read again: {n} pool(s) built"
                ));
            }
        }
        said
    }

    fn unread_line(&self, name: &str, u: &Unread) -> String {
        if u.empty {
            format!(
                "pool {name}: cannot read the cluster's nodes ({}): the pool has no nodes until it can (the daemon looks again every minute, and at a reload: edit the fleet file or `kill -HUP` the daemon)",
                u.why
            )
        } else {
            let n = self.pools.get(name).map_or(0, Vec::len);
            format!(
                "pool {name}: cannot read the cluster's nodes ({}): it keeps the {n} pool(s) it had",
                u.why
            )
        }
    }
}

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
    let mut built_now = Built::default();
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
        if let (true, Some(pools)) = (fresh, last.pools.get(&p.name)) {
            built_now.pools.insert(p.name.clone(), pools.clone());
            if let Some(u) = last.unread.get(&p.name) {
                built_now.unread.insert(p.name.clone(), u.clone());
            }
            out.pools.extend(pools.iter().cloned());
            continue;
        }
        let pools = match build(p) {
            Ok((pools, what)) => {
                said.extend(what);
                pools
            }
            Err(e) => {
                let before = last.unread.get(&p.name);
                let had = last
                    .pools
                    .get(&p.name)
                    .filter(|_| before.is_none_or(|u| !u.empty));
                let u = Unread {
                    why: e,
                    tries: before.map_or(1, |u| u.tries + 1),
                    empty: had.is_none(),
                };
                let pools = match had {
                    // A reload while its API is down must not take running jobs' nodes away.
                    Some(before) => before.clone(),
                    None => {
                        let mut empty = p.clone();
                        empty.resolve_auto(None);
                        vec![empty]
                    }
                };
                built_now.pools.insert(p.name.clone(), pools.clone());
                said.push(built_now.unread_line(&p.name, &u));
                built_now.unread.insert(p.name.clone(), u);
                pools
            }
        };
        built_now.pools.insert(p.name.clone(), pools.clone());
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

/// Fills the `gpu = "auto"` pools from what NVML found on this host: the model (of GPU 0;
/// a host mixing models is counted as that model), the count, VRAM and how many GPUs are in
/// MIG mode. Without NVML they become CPU-only pools. Returns what it did, to be said once.
pub fn apply_discovery(
    cfg: &mut FleetConfig,
    found: &super::local::nvml::Discovery,
) -> Vec<String> {
    use super::local::nvml::{model_name, Discovery};
    let mut said = Vec::new();
    for p in cfg.pools.iter_mut().filter(|p| p.is_local() && p.is_auto()) {
        let name = format!("{}/{}/{}/{}", p.provider, p.region, p.zone, p.name);
        match found {
            Discovery::Available { gpus, driver } if !gpus.is_empty() => {
                let first = &gpus[0];
                let found =
                    FoundGpus::new("this host", &first.name, first.memory_total_mib, gpus.len());
                let model = found.model.clone();
                let mixed: Vec<String> = gpus
                    .iter()
                    .map(|g| model_name(&g.name))
                    .filter(|m| *m != model)
                    .collect();
                p.resolve_auto(Some(&found));
                let mig = gpus.iter().filter(|g| g.mig_enabled == Some(true)).count() as u8;
                p.mig_gpus_per_node = if mig_geometry(&model).is_some() {
                    mig
                } else {
                    0
                };
                said.push(format!(
                    "{name}: NVML (driver {driver}) found {} × {model} ({} GB){}{}",
                    p.gpus_per_node,
                    p.vram_gb,
                    if mig > 0 {
                        format!(", {mig} in MIG mode")
                    } else {
                        String::new()
                    },
                    if mixed.is_empty() {
                        String::new()
                    } else {
                        format!("; also {} — counted as {model}", mixed.join(", "))
                    }
                ));
            }
            Discovery::Available { .. } => {
                p.resolve_auto(None);
                said.push(format!("{name}: NVML found no GPUs; the pool is CPU-only"));
            }
            Discovery::Unavailable { reason } => {
                p.resolve_auto(None);
                said.push(format!("{name}: {reason}; the pool is CPU-only"));
            }
        }
    }
    said
}

/// From the GPUs a host's agent reported (none without NVML).
pub fn found_gpus(host: &str, gpus: &[super::HostGpu]) -> Option<FoundGpus> {
    let first = gpus.first()?;
    Some(FoundGpus::new(
        host,
        &first.name,
        first.memory_mib,
        gpus.len(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_local_pools_are_sized_from_nvml_or_become_cpu_only() {
        use crate::backend::local::nvml::{Discovery, GpuSample};
        use crate::config::fleet::{fleet_of, parse, wants_discovery, LOCAL_FLEET};
        let mut cfg = parse("local.toml", LOCAL_FLEET).unwrap();
        assert!(wants_discovery(&cfg));
        let h100 = |index, mig| GpuSample {
            index,
            name: "NVIDIA H100 80GB HBM3".into(),
            memory_total_mib: 81_559,
            mig_enabled: Some(mig),
            ..GpuSample::default()
        };
        let said = apply_discovery(
            &mut cfg.clone(),
            &Discovery::Available {
                driver: "550".into(),
                gpus: vec![h100(0, false), h100(1, true)],
            },
        );
        assert_eq!(
            said,
            vec![
                "local/here/here/host: NVML (driver 550) found 2 × H100 (80 GB), 1 in MIG mode"
                    .to_string()
            ]
        );
        let mut found = cfg.clone();
        apply_discovery(
            &mut found,
            &Discovery::Available {
                driver: "550".into(),
                gpus: vec![h100(0, false), h100(1, true)],
            },
        );
        let p = &found.pools[0];
        assert_eq!(
            (
                p.gpu.as_deref(),
                p.gpus_per_node,
                p.vram_gb,
                p.mig_gpus_per_node
            ),
            (Some("H100"), 2, 80, 1)
        );
        assert!(!wants_discovery(&found));
        let said = apply_discovery(
            &mut cfg,
            &Discovery::Unavailable {
                reason: "NVML is not available (no driver)".into(),
            },
        );
        assert!(said[0].ends_with("the pool is CPU-only"), "{said:?}");
        assert_eq!(
            (cfg.pools[0].gpu.as_deref(), cfg.pools[0].gpus_per_node),
            (None, 0)
        );
        assert_eq!(fleet_of(&cfg).gpu_count(), 0);
    }
}
