//! Why a job has no place: data the console and CLI render, counted per node kind and per
//! class so that explaining every job a cycle leaves pending stays cheap.

use super::*;
use std::fmt;

/// Why a job could not be placed. Data, so the console and CLI can render it.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Unplaceable {
    /// The request itself is malformed.
    Invalid { reason: String },
    /// No node of this fleet could host it even if the fleet were empty.
    NeverFits { reason: String },
    /// It could fit, but not now.
    NoCapacity {
        /// Nodes that could take one member of the gang right now.
        eligible_nodes: usize,
        needed_nodes: u16,
        /// The largest block of eligible nodes inside one domain of the required level.
        largest_block: Option<Block>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Block {
    pub level: DomainLevel,
    pub domain: String,
    pub nodes: usize,
}

impl fmt::Display for Unplaceable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unplaceable::Invalid { reason } => write!(f, "invalid request: {reason}"),
            Unplaceable::NeverFits { reason } => write!(f, "no node could ever host it: {reason}"),
            Unplaceable::NoCapacity {
                eligible_nodes,
                needed_nodes,
                largest_block,
            } => {
                write!(
                    f,
                    "needs {needed_nodes} node(s); {eligible_nodes} have room now"
                )?;
                if let Some(b) = largest_block {
                    write!(
                        f,
                        "; largest block in one {} is {} ({})",
                        b.level, b.nodes, b.domain
                    )?;
                }
                Ok(())
            }
        }
    }
}

/// Whether an *empty* node of this kind (pool and GPU modes) could host one gang member.
fn could_ever_host(fleet: &Fleet, kind: &Kind, job: &JobRequest) -> bool {
    let pool = fleet.pool(kind.pool);
    if pool.cpu_milli < job.cpu_milli || pool.mem_mib < job.mem_mib {
        return false;
    }
    if pool.capacity == CapacityType::Spot && !job.spot_ok || !job.allows_pool(kind.pool) {
        return false;
    }
    let price_ok = |p: f64| {
        job.max_price_per_hour
            .is_none_or(|max| p * f64::from(job.nodes) <= max + 1e-9)
    };
    if job.gpu == GpuRequest::None {
        return price_ok(job_price_in_pool(fleet, kind.pool, job));
    }
    let Some(mid) = pool.model else {
        return false;
    };
    if job.models.rank(mid).is_none() || !price_ok(job_price_in_pool(fleet, kind.pool, job)) {
        return false;
    }
    let model = fleet.model(mid);
    match job.gpu {
        GpuRequest::Whole(k) => model.vram_mib >= job.vram_mib && kind.plain >= u16::from(k),
        GpuRequest::Fraction(_) => model.vram_mib >= job.vram_mib && kind.plain > 0,
        GpuRequest::Mig(p) => {
            model
                .mig
                .as_ref()
                .is_some_and(|geo| geo.memory_slices(p).is_some())
                && kind.mig
        }
        GpuRequest::None => true,
    }
}

/// Why `job` has no place now. It runs for every job a cycle leaves pending, so it counts per
/// node kind and per class (a class's nodes share a pool, hence a zone), never per node.
pub(super) fn why_not(
    fleet: &Fleet,
    cluster: &Cluster,
    cands: &[Candidate],
    job: &JobRequest,
) -> Unplaceable {
    let mut per_zone = vec![0usize; fleet.zones.len()];
    let mut hosts = false;
    for kind in cluster.kinds() {
        if could_ever_host(fleet, kind, job) {
            hosts = true;
            per_zone[fleet.pool(kind.pool).zone.index()] += kind.nodes;
        }
    }
    if !hosts {
        return Unplaceable::NeverFits {
            reason: never_fits_reason(fleet, job),
        };
    }
    let most = per_zone.iter().copied().max().unwrap_or(0);
    if most < usize::from(job.nodes) {
        return Unplaceable::NeverFits {
            reason: format!(
                "a gang of {} nodes must sit in one zone; the largest zone has {most} suitable node(s)",
                job.nodes
            ),
        };
    }
    let eligible: usize = cands.iter().map(|c| c.class.members.len()).sum();
    // The largest block: one node for a single node's job (the lowest id), else the zone
    // with the most eligible nodes (ties to the zone holding the lowest node id).
    let mut blocks: Vec<(usize, u32)> = vec![(0, u32::MAX); fleet.zones.len()];
    for c in cands {
        let Some(&first) = c.class.members.first() else {
            continue;
        };
        let b = &mut blocks[fleet.pool(c.class.state.pool).zone.index()];
        b.0 += c.class.members.len();
        b.1 = b.1.min(first);
    }
    let largest_block = if job.nodes > 1 {
        blocks
            .into_iter()
            .filter(|b| b.0 > 0)
            .max_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)))
            .map(|(count, n)| Block {
                level: DomainLevel::Zone,
                domain: domain_name(fleet, NodeId(n), DomainLevel::Zone),
                nodes: count,
            })
    } else {
        blocks
            .iter()
            .map(|b| b.1)
            .min()
            .filter(|&n| n != u32::MAX)
            .map(|n| Block {
                level: DomainLevel::Node,
                domain: domain_name(fleet, NodeId(n), DomainLevel::Node),
                nodes: 1,
            })
    };
    Unplaceable::NoCapacity {
        eligible_nodes: eligible,
        needed_nodes: job.nodes,
        largest_block,
    }
}

fn never_fits_reason(fleet: &Fleet, job: &JobRequest) -> String {
    let max_cpu = fleet.nodes.iter().map(|n| n.cpu_milli).max().unwrap_or(0);
    let max_mem = fleet.nodes.iter().map(|n| n.mem_mib).max().unwrap_or(0);
    if job.cpu_milli > max_cpu {
        return format!(
            "asks {} milli-CPU per node; the largest node has {max_cpu}",
            job.cpu_milli
        );
    }
    if job.mem_mib > max_mem {
        return format!(
            "asks {} MiB memory per node; the largest node has {max_mem}",
            job.mem_mib
        );
    }
    match job.gpu {
        GpuRequest::Whole(k) => {
            let max_gpus = fleet.nodes.iter().map(|n| n.gpus.len()).max().unwrap_or(0);
            if usize::from(k) > max_gpus {
                return format!("asks {k} GPUs per node; the largest node has {max_gpus}");
            }
        }
        GpuRequest::Mig(p)
            if !fleet
                .nodes
                .iter()
                .any(|n| n.gpus.iter().any(|g| g.mig.is_some())) =>
        {
            return format!("asks MIG slice {p}; no GPU in this fleet runs in MIG mode");
        }
        _ => {}
    }
    "no node matches its GPU model, VRAM, CPU, memory, spot and price constraints together"
        .to_string()
}

fn domain_name(fleet: &Fleet, node: NodeId, level: DomainLevel) -> String {
    let n = fleet.node(node);
    let path = fleet.pool_path(n.pool);
    match level {
        DomainLevel::Node => n.name.clone(),
        DomainLevel::Nvlink => fleet.nvlink_domains[n.nvlink.index()].clone(),
        DomainLevel::Leaf => n
            .leaf
            .map_or_else(String::new, |l| fleet.leaves[l.index()].clone()),
        DomainLevel::Zone => path
            .rsplit_once('/')
            .map_or(path.clone(), |(z, _)| z.to_string()),
    }
}
