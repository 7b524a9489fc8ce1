//! Where a job waiting for capacity finds no room, pool by pool, in the backends' words: the
//! scheduler counts the nodes that have room ("needs 1 node(s); 0 have room now"); the state
//! knows why the others do not — a host that cannot be reached (a Kubernetes API server down,
//! an SSH host gone), a cluster that cannot be read, GPUs held by the backend's own jobs (a
//! Slurm job of another user), GPUs busy with gantry's jobs, a node short of CPUs or memory.

use super::seen::Seen;
use crate::model::Life;
use crate::model::{CapacityType, GpuRequest, JobRequest, PoolId};

/// Why one node of a pool has no room for one member of the job, in the words of a count
/// ("2 unreachable").
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum NoRoom {
    NotBought,
    Booting,
    Unreachable(String),
    Down,
    Cordoned(String),
    HeldForeign(String),
    BusyGantry,
    ShortCpu { free: u32, total: u32 },
    ShortMemory { free: u64, total: u64 },
}

impl NoRoom {
    fn said(&self, n: usize, job: &JobRequest) -> String {
        match self {
            NoRoom::NotBought => format!("{n} not bought"),
            NoRoom::Booting => format!("{n} booting"),
            NoRoom::Unreachable(why) => {
                format!("{n} unreachable ({})", crate::untrusted::bounded(why, 120))
            }
            NoRoom::Down => format!("{n} down"),
            NoRoom::Cordoned(why) => {
                format!("{n} cordoned ({})", crate::untrusted::bounded(why, 80))
            }
            NoRoom::HeldForeign(what) => format!(
                "{n} with GPUs held by the backend's own work ({})",
                crate::untrusted::bounded(what, 80)
            ),
            NoRoom::BusyGantry => format!("{n} with GPUs busy with gantry's jobs"),
            NoRoom::ShortCpu { free, total } => format!(
                "{n} short of CPUs (asks {}, {} of {} free)",
                cpus(job.cpu_milli),
                cpus(*free),
                cpus(*total)
            ),
            NoRoom::ShortMemory { free, total } => format!(
                "{n} short of memory (asks {} GiB, {} of {} GiB free)",
                job.mem_mib / 1024,
                free / 1024,
                total / 1024
            ),
        }
    }
}

fn cpus(milli: u32) -> String {
    if milli.is_multiple_of(1000) {
        (milli / 1000).to_string()
    } else {
        format!("{:.1}", f64::from(milli) / 1000.0)
    }
}

/// The most pools a line names (the rest are counted).
const MOST_POOLS: usize = 4;

impl Seen<'_> {
    /// For a job that waits for room: each pool it may use and why its nodes have none, one
    /// clause per pool ("pool ssh/onprem/rack1/box: 1 short of CPUs (asks 16, 4 of 8 free)").
    /// `None` where no pool it may use has a node without room to explain.
    pub(super) fn where_no_room(&self, j: &crate::daemon::engine::Job) -> Option<String> {
        let fleet = self.engine.fleet();
        let r = &j.request;
        let mut clauses = Vec::new();
        let mut by_pool: Vec<Vec<usize>> = vec![Vec::new(); fleet.pools.len()];
        for (i, n) in fleet.nodes.iter().enumerate() {
            by_pool[n.pool.index()].push(i);
        }
        for (p, nodes) in by_pool.iter().enumerate() {
            let pool = fleet.pool(PoolId(p as u32));
            let fits = r.allows_pool(PoolId(p as u32))
                && (pool.capacity != CapacityType::Spot || r.spot_ok)
                && pool.cpu_milli >= r.cpu_milli
                && pool.mem_mib >= r.mem_mib
                && (r.gpu == GpuRequest::None
                    || pool.model.is_some_and(|m| r.models.rank(m).is_some()));
            if !fits {
                continue;
            }
            let mut counts: std::collections::BTreeMap<NoRoom, usize> = Default::default();
            for &i in nodes {
                if let Some(why) = self.no_room(i, r) {
                    *counts.entry(why).or_default() += 1;
                }
            }
            // Nodes not bought are the elastic reserve, said by the patience clause; alone they
            // are not a reason worth a clause.
            if counts.keys().all(|k| *k == NoRoom::NotBought) {
                if nodes.is_empty() {
                    if let Some(why) = self.built.why_empty(&pool.name) {
                        clauses.push(format!("pool {}: {why}", fleet.pool_path(PoolId(p as u32))));
                    }
                }
                continue;
            }
            let said: Vec<String> = counts
                .iter()
                .filter(|(k, _)| **k != NoRoom::NotBought)
                .map(|(k, &n)| k.said(n, r))
                .collect();
            clauses.push(format!(
                "pool {}: {}",
                fleet.pool_path(PoolId(p as u32)),
                said.join(", ")
            ));
        }
        if clauses.is_empty() {
            return None;
        }
        let more = clauses.len().saturating_sub(MOST_POOLS);
        clauses.truncate(MOST_POOLS);
        let mut text = clauses.join("; ");
        if more > 0 {
            text.push_str(&format!("; and {more} more pool(s) (gantry explain)"));
        }
        Some(text)
    }

    /// Why node `i` has no room for one member of `r` now, or `None` where it has.
    fn no_room(&self, i: usize, r: &JobRequest) -> Option<NoRoom> {
        match self.nodes.life(i) {
            Life::Absent => return Some(NoRoom::NotBought),
            Life::Provisioning => return Some(NoRoom::Booting),
            Life::Failed => {
                return Some(match self.runs.unreachable(i) {
                    Some(why) => NoRoom::Unreachable(why.to_string()),
                    None => NoRoom::Down,
                })
            }
            Life::Up | Life::Noticed | Life::Draining => {}
        }
        if let Some(why) = self.runs.unreachable(i) {
            return Some(NoRoom::Unreachable(why.to_string()));
        }
        if let Some(why) = self.runs.cordoned(i) {
            return Some(NoRoom::Cordoned(why.to_string()));
        }
        let n = &self.engine.fleet().nodes[i];
        if n.health != crate::model::Health::Healthy {
            return Some(NoRoom::Down);
        }
        let wants = match r.gpu {
            GpuRequest::Whole(k) => usize::from(k),
            GpuRequest::Fraction(_) | GpuRequest::Mig(_) => 1,
            GpuRequest::None => 0,
        };
        let free = n
            .gpus
            .iter()
            .filter(|g| match r.gpu {
                GpuRequest::Whole(_) => g.is_idle(),
                GpuRequest::Fraction(m) => g.mig.is_none() && g.milli_free >= m,
                GpuRequest::Mig(_) => g.mig.is_some(),
                GpuRequest::None => false,
            })
            .count();
        if free < wants {
            let foreign = self.runs.held_foreign(i).filter(|h| !h.gpus.is_empty());
            return Some(match foreign {
                Some(h) if free + h.gpus.len() >= wants || free == 0 => NoRoom::HeldForeign(
                    h.work
                        .iter()
                        .map(|w| w.what.clone())
                        .collect::<Vec<_>>()
                        .join(", "),
                ),
                _ => NoRoom::BusyGantry,
            });
        }
        if n.cpu_free < r.cpu_milli {
            return Some(NoRoom::ShortCpu {
                free: n.cpu_free,
                total: n.cpu_milli,
            });
        }
        if n.mem_free < r.mem_mib {
            return Some(NoRoom::ShortMemory {
                free: n.mem_free,
                total: n.mem_mib,
            });
        }
        None
    }
}
