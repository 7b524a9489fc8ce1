//! What `gantry sim` compares: the setups, the run's settings, and what each setup achieved
//! — the same figures whether the daemon's engine ran the setup (gantry) or the naive model
//! did (the baselines).

use super::mix::{EXPERIMENT, PRODUCTION, SERVING};
use crate::config::fleet::{fleet_sized, FleetConfig};
use crate::model::idle::{IdleLedger, IdleShare};
use crate::model::{CapacityType, Fleet};
use serde::Serialize;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Setup {
    /// Static partitions, strict first come first served: the oldest job that does not fit
    /// blocks its team's queue.
    Naive,
    /// Static partitions, arrival order, but any job that fits starts (no head-of-line
    /// blocking): the kinder reading of "first come first served".
    NaiveAnyFit,
    Gantry,
}

impl Setup {
    pub fn name(self) -> &'static str {
        match self {
            Setup::Naive => "naive",
            Setup::NaiveAnyFit => "naive-any-fit",
            Setup::Gantry => "gantry",
        }
    }
}

#[derive(Clone, Debug)]
pub struct SimConfig {
    pub days: f64,
    pub seed: u64,
    /// Scheduling cadence, simulated seconds.
    pub cycle_s: f64,
    /// Time to load a checkpoint after a restart (busy, not useful).
    pub restore_s: f64,
    /// Node failures per node-hour on every pool (Llama 3's 54-day run: about 0.0002).
    pub failures_per_node_hour: f64,
    /// How long an on-prem node is down after a failure (cloud nodes are replaced instead).
    pub repair_s: f64,
    /// The provider's notice before it takes a spot node back.
    pub spot_notice_s: f64,
    /// gantry moves checkpointing jobs onto capacity already paid for (consolidation and
    /// defragmentation: the fleet file's `[scale] rebalance`, unless this turns it off).
    pub consolidate: bool,
    /// Keep the text of every event (the hash is always kept).
    pub keep_events: bool,
    /// Finished jobs the daemon keeps in memory (its own default); what is reported counts
    /// every job, from the journal.
    pub history_kept: usize,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            days: 7.0,
            seed: 1,
            cycle_s: 60.0,
            restore_s: 120.0,
            failures_per_node_hour: 0.0002,
            repair_s: 4.0 * 3600.0,
            spot_notice_s: 120.0,
            consolidate: true,
            keep_events: false,
            history_kept: crate::daemon::engine::HISTORY_KEPT,
        }
    }
}
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClassWait {
    pub class: String,
    pub jobs: usize,
    pub p50_s: f64,
    pub p99_s: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct CapacityUse {
    pub capacity: String,
    pub paid_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub spend_usd: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct PoolUse {
    pub pool: String,
    pub paid_gpu_hours: f64,
    pub held_gpu_hours: f64,
    /// Its paid GPU-hours held by no job, by cause (they add up to paid − held).
    pub idle: Vec<IdleShare>,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct TeamSpend {
    pub team: String,
    pub spend_usd: f64,
    pub gpu_hours: f64,
}

/// What one setup achieved. Hours are GPU-hours.
#[derive(Clone, Debug, Default, Serialize)]
pub struct SetupResult {
    pub setup: String,
    /// What ran it: `daemon` (gantry's own engine over the simulated backend) or `model`
    /// (the naive baselines).
    pub engine: String,
    /// Busy GPU-hours / paid GPU-hours.
    pub utilization: f64,
    /// Allocated GPU-hours / paid GPU-hours.
    pub allocation: f64,
    pub cost_per_useful_gpu_hour: f64,
    pub paid_gpu_hours: f64,
    pub allocated_gpu_hours: f64,
    pub busy_gpu_hours: f64,
    /// Busy hours whose work was kept (not lost to a kill, not restore time).
    pub useful_gpu_hours: f64,
    pub spend_usd: f64,
    /// Paid and held GPU-hours and spend by how capacity is bought.
    pub by_capacity: Vec<CapacityUse>,
    /// Paid and held GPU-hours by pool (where the idle hours are).
    pub by_pool: Vec<PoolUse>,
    pub spend_by_team: Vec<TeamSpend>,
    /// Paid for but held by no job.
    pub idle_spend_usd: f64,
    /// Paid GPU-hours that did no work, by cause: they add up to paid − busy.
    pub idle: Vec<IdleShare>,
    pub queue_wait: Vec<ClassWait>,
    pub jobs: usize,
    pub finished: usize,
    /// Still queued or running when the window closed (services run all along).
    pub unfinished: usize,
    /// Could never fit where this setup would put them.
    pub never_fit: usize,
    pub preemptions: u64,
    pub spot_interruptions: u64,
    pub node_failures: u64,
    pub reclaimed_jobs: u64,
    pub reclaimed_gpu_hours: f64,
    /// Cloud nodes drained by consolidation (their jobs checkpointed and moved to capacity
    /// already paid for) and given back, and the jobs moved.
    pub consolidated_nodes: u64,
    /// Nodes emptied for a job that fit nowhere (instead of buying one).
    pub defragmented: u64,
    pub moved_jobs: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    pub peak_gpus: usize,
    pub useful_gpu_hours_by_kind: Vec<(String, f64)>,
    pub events: u64,
    pub event_hash: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub event_log: Vec<String>,
}

impl SetupResult {
    /// The ratios and breakdowns from the totals: utilization, allocation, cost per useful
    /// GPU-hour, the idle causes, and (paid, held, spend) by capacity type and (paid, held) by
    /// pool, whose paths are `pools`.
    pub fn close_books(
        &mut self,
        by_capacity: &[(f64, f64, f64); 3],
        by_pool: &[(f64, f64)],
        idle: &IdleLedger,
        pools: &[String],
    ) {
        let paid = self.paid_gpu_hours.max(1e-9);
        self.utilization = self.busy_gpu_hours / paid;
        self.allocation = self.allocated_gpu_hours / paid;
        self.cost_per_useful_gpu_hour = self.spend_usd / self.useful_gpu_hours.max(1e-9);
        self.idle = idle.shares(self.allocated_gpu_hours - self.busy_gpu_hours);
        self.by_capacity = [
            CapacityType::OnDemand,
            CapacityType::Spot,
            CapacityType::Reserved,
        ]
        .iter()
        .map(|c| {
            let u = by_capacity[*c as usize];
            CapacityUse {
                capacity: c.to_string(),
                paid_gpu_hours: u.0,
                allocated_gpu_hours: u.1,
                spend_usd: u.2,
            }
        })
        .collect();
        self.by_pool = by_pool
            .iter()
            .zip(pools)
            .enumerate()
            .filter(|(_, (u, _))| u.0 > 0.0)
            .map(|(i, (u, path))| PoolUse {
                pool: path.clone(),
                paid_gpu_hours: u.0,
                held_gpu_hours: u.1,
                idle: idle.pool_shares(i),
            })
            .collect();
    }
}

impl SetupResult {
    /// Each team's spend and held GPU-hours, as `(name, dollars, GPU-hours)`: the teams that
    /// held any, and what no team's jobs were billed (the idle spend).
    pub fn bill_teams(&mut self, teams: impl Iterator<Item = (String, f64, f64)>) {
        let mut billed = 0.0;
        self.spend_by_team.clear();
        for (team, spend_usd, gpu_hours) in teams {
            billed += spend_usd;
            if gpu_hours > 0.0 {
                self.spend_by_team.push(TeamSpend {
                    team,
                    spend_usd,
                    gpu_hours,
                });
            }
        }
        self.idle_spend_usd = self.spend_usd - billed;
    }

    /// The waits before a first start of the workload's classes (serving, production,
    /// experiment), from each class's waits, seconds, by the default classes' index.
    pub fn set_queue_waits(&mut self, waits: &mut [Vec<f64>]) {
        let classes = crate::model::default_classes();
        self.queue_wait = [SERVING, PRODUCTION, EXPERIMENT]
            .iter()
            .map(|&c| {
                let w = &mut waits[c];
                w.sort_by(f64::total_cmp);
                ClassWait {
                    class: classes[c].name.clone(),
                    jobs: w.len(),
                    p50_s: crate::stats::quantile(w, 0.5),
                    p99_s: crate::stats::quantile(w, 0.99),
                }
            })
            .collect();
    }
}

/// Scales a fleet file by `k`: node counts, guarantees, borrow limits and budgets.
pub fn scaled(cfg: &FleetConfig, k: f64) -> FleetConfig {
    let s = |n: u32| {
        if n == 0 {
            0
        } else {
            ((f64::from(n) * k).round() as u32).max(1)
        }
    };
    let mut out = cfg.clone();
    for p in &mut out.pools {
        p.max_nodes = Some(s(p.max_nodes.unwrap_or(p.nodes)));
        p.nodes = s(p.nodes);
        p.min_nodes = s(p.min_nodes);
        p.nodes_per_leaf = p.nodes_per_leaf.map(|n| n.max(1));
    }
    for t in &mut out.teams {
        t.guaranteed = t.guaranteed.map(s);
        t.borrow_limit = s(t.borrow_limit);
        t.lend_limit = t.lend_limit.map(s);
        t.budget_monthly_usd = t.budget_monthly_usd.map(|b| b * k);
    }
    // Rounding must not lift a borrow limit above what the cohort can lend.
    let lends: Vec<(Option<String>, u32)> = out
        .teams
        .iter()
        .map(|t| {
            let g = t.guaranteed.unwrap_or(0);
            (t.cohort.clone(), t.lend_limit.unwrap_or(g).min(g))
        })
        .collect();
    for (i, t) in out.teams.iter_mut().enumerate() {
        let lendable: u32 = lends
            .iter()
            .enumerate()
            .filter(|(j, (c, _))| *j != i && c.is_some() && *c == t.cohort)
            .map(|(_, (_, l))| *l)
            .sum();
        if t.cohort.is_some() {
            t.borrow_limit = t.borrow_limit.min(lendable);
        }
    }
    out
}

/// The fleet at its start size, as the workload generator sizes the offered load.
pub fn start_fleet(cfg: &FleetConfig) -> Fleet {
    fleet_sized(cfg, |p| p.nodes)
}
