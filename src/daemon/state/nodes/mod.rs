//! The fleet's nodes: which exist, what is coming, what is going, and per pool the
//! provisioner elastic capacity is bought from and given back to. The type and the small API
//! the rest of the state reads it through; the lifecycle (what provisioners say, elastic
//! growth, consolidation), the marks the console shows, the timers kept across restarts and
//! the pools that left the fleet file are the folders' other files.

mod kept_timers;
mod left_pools;
mod lifecycle;
mod marks;

pub(super) use left_pools::record_cloud_pools;
pub use left_pools::Retiring;
pub(super) use lifecycle::unreached_pause_s;
pub use marks::span;

use super::cx::Cx;
use crate::config::fleet::PoolConfig;
use crate::model::Life;
use crate::scheduler::scale::ScaleConfig;
use std::collections::HashMap;

/// What lives on the nodes, which their lifecycle reaches: the runs on them (stopped,
/// requeued, reached at a new address), what was measured of them (forgotten with a machine
/// that goes), and the counters.
pub(super) struct OnNodes<'a> {
    pub runs: &'a mut super::runs::Runs,
    pub telemetry: &'a mut super::telemetry::Telemetry,
    pub counters: &'a mut super::counters::Counters,
}

/// How often consolidation looks for a cloud node to give back (at most one at a time).
const CONSOLIDATE_EVERY_S: f64 = 300.0;

/// The fleet's nodes over time: which exist, what is coming, what is going; and, per pool,
/// the provisioner elastic capacity is bought from and given back to (none where the nodes
/// are simply there).
pub(super) struct Nodes {
    pools: Vec<crate::config::fleet::PoolConfig>,
    /// Per node, its pool and its index there (what its provisioner calls it).
    slot_of: Vec<(usize, usize)>,
    lives: Vec<Life>,
    empty_since: Vec<Option<f64>>,
    /// Bought nodes' empty-since as the last daemon kept it (on this clock), taken as each is
    /// up again (`kept_timers`).
    restored_empty: HashMap<String, f64>,
    provisioners: Vec<Option<Box<dyn crate::backend::Provisioner>>>,
    interrupted: Vec<Option<f64>>,
    /// Per pool: passed over by the planner until then (it could not buy a node).
    unavailable: Vec<Option<f64>>,
    /// Per pool: why it was last passed over (shown while it is).
    passed_over: Vec<String>,
    /// Nodes bought and coming: when each is expected ready.
    coming_at: HashMap<usize, f64>,
    /// Nodes under a notice of their end: when each goes.
    going_at: HashMap<usize, f64>,
    /// Bought machines ready but not yet reached (their agent has not answered since).
    unconnected: std::collections::HashSet<usize>,
    /// Per pool: machines in a row given back because they never answered (reset when one
    /// does): each passes the pool over twice as long, so a pool whose machines cannot be
    /// reached is not bought from again at once, and again.
    unreached: Vec<u32>,
    /// The fleet's spending cap ($/h), and per pool the cap last said to cut a buy short.
    fleet_cap: Option<f64>,
    /// `[scale] rebalance`: consolidation and defragmentation move jobs.
    rebalance: bool,
    capped: HashMap<usize, String>,
    scale: ScaleConfig,
    /// When consolidation looks for a cloud node to give back next.
    next_consolidate: f64,
}

impl Nodes {
    /// The nodes of fleet file `cfg` as they are at `now` (`lives`), each pool with its
    /// provisioner (none where the nodes are simply there).
    pub(super) fn new(
        cfg: &crate::config::fleet::FleetConfig,
        fleet: &crate::model::Fleet,
        lives: Vec<Life>,
        provisioners: Vec<Option<Box<dyn crate::backend::Provisioner>>>,
        now: f64,
    ) -> Nodes {
        let pools = cfg.pools.len();
        Nodes {
            pools: cfg.pools.clone(),
            slot_of: {
                let mut seen = vec![0usize; pools];
                fleet
                    .nodes
                    .iter()
                    .map(|n| {
                        let p = n.pool.index();
                        seen[p] += 1;
                        (p, seen[p] - 1)
                    })
                    .collect()
            },
            empty_since: vec![Some(now); lives.len()],
            restored_empty: HashMap::new(),
            lives,
            provisioners,
            interrupted: vec![None; pools],
            unavailable: vec![None; pools],
            passed_over: vec![String::new(); pools],
            coming_at: HashMap::new(),
            going_at: HashMap::new(),
            unconnected: Default::default(),
            unreached: vec![0; pools],
            fleet_cap: cfg.scale.max_dollars_per_hour,
            rebalance: cfg.scale.rebalance,
            capped: HashMap::new(),
            scale: crate::config::fleet::scale_of(cfg),
            next_consolidate: now + CONSOLIDATE_EVERY_S,
        }
    }

    /// Node `i`'s life now.
    pub(super) fn life(&self, i: usize) -> Life {
        self.lives[i]
    }

    /// Node `i` is `life` now: the scheduler sees its health; a node up is empty since now
    /// (or since when the last daemon saw it empty).
    pub(super) fn set_life(&mut self, cx: &mut Cx, i: usize, life: Life) {
        self.lives[i] = life;
        if life != Life::Provisioning {
            self.coming_at.remove(&i);
        }
        if life != Life::Noticed {
            self.going_at.remove(&i);
        }
        cx.engine
            .set_health(crate::model::NodeId(i as u32), life.health());
        if life == Life::Up {
            self.empty_since_up(cx, i);
        }
    }

    /// Whether node `i` is a machine bought from a provisioner that gives machines (a
    /// cloud's instance, reached as an SSH host), not a node that is simply there.
    pub(super) fn is_machine(&self, i: usize) -> bool {
        self.provisioners[self.slot_of[i].0]
            .as_ref()
            .is_some_and(|p| p.machines())
    }

    /// What the provisioners say happened up to `until`, in time order (pool order within a
    /// moment).
    pub(super) fn due(&mut self, until: f64) -> Vec<(f64, usize, crate::backend::NodeEvent)> {
        let mut due = Vec::new();
        for (pool, p) in self.provisioners.iter_mut().enumerate() {
            if let Some(p) = p {
                due.extend(p.poll(until).into_iter().map(|(at, e)| (at, pool, e)));
            }
        }
        due.sort_by(|a: &(f64, usize, _), b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        due
    }

    /// Every node's life, in node order.
    pub(super) fn lives(&self) -> &[Life] {
        &self.lives
    }

    /// Pool `pool` as the fleet file gives it.
    pub(super) fn pool(&self, pool: usize) -> &PoolConfig {
        &self.pools[pool]
    }

    /// How many pools the fleet has.
    pub(super) fn pool_count(&self) -> usize {
        self.pools.len()
    }

    /// How long a job of class `class` waits before elastic capacity is bought for it.
    pub(super) fn patience_s(&self, class: usize) -> f64 {
        self.scale.patience_s(class)
    }

    /// Whether bought machine `i` is ready but has not answered yet.
    pub(super) fn is_unconnected(&self, i: usize) -> bool {
        self.unconnected.contains(&i)
    }

    /// Bought machine `i` answered: whether it was the first time.
    pub(super) fn connected(&mut self, i: usize) -> bool {
        self.unconnected.remove(&i)
    }

    /// One more machine of pool `pool` in a row given back because it never answered: how
    /// many now.
    pub(super) fn unreached_once_more(&mut self, pool: usize) -> u32 {
        self.unreached[pool] += 1;
        self.unreached[pool]
    }
}
