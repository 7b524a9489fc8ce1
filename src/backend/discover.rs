//! Pools built from a cluster: a `gpu = "auto"` stanza of a Kubernetes or Slurm pool stands for
//! the pools its cluster's nodes make (`kube::discover::build`, `slurm::discover::build`). The
//! daemon builds them when it opens its state (at start and at every reload of the fleet file)
//! and looks again every `--cluster-look-every`, reloading when what they would be built into
//! moves (nodes joined or left, a node's GPUs changed).

use crate::config::fleet::{mig_geometry, FleetConfig, FoundGpus, PoolConfig};

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
