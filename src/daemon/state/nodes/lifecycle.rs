//! The fleet's nodes over time: what the provisioners say (ready, spot notice, taken back,
//! failed, repaired), elastic growth and shrink through them, defragmentation and
//! consolidation — each a journaled event with its reason and price.

use super::CONSOLIDATE_EVERY_S;
use super::{Nodes, OnNodes};
use crate::api::JobState;
use crate::backend::NodeEvent;
use crate::daemon::engine::Engine;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::lives::offers;
use crate::daemon::state::cx::Cx;
use crate::model::{pool_counts, CapacityType, Life, NodeId};
use crate::scheduler::moves::{Candidate, Rebalance};
use crate::scheduler::scale::{scale_down, scale_up, NodeIdle};
use std::collections::HashMap;

/// How long a pool that could not buy a node (no capacity in its zones, a quota) is passed
/// over by the planner.
const UNAVAILABLE_FOR_S: f64 = 600.0;

/// How long a pool is passed over after `times` machines in a row never answered: 5 min,
/// doubling, at most 2 h.
pub(in crate::daemon::state) fn unreached_pause_s(times: u32) -> f64 {
    (300.0 * 2f64.powi(times.saturating_sub(1).min(5) as i32)).min(7200.0)
}

impl Nodes {
    /// Node `i`'s pool and its index there, for its provisioner.
    fn slot(&self, i: usize) -> (usize, usize) {
        self.slot_of[i]
    }

    /// Asks node `i`'s provisioner for it; the expected seconds until it is ready.
    pub(in crate::daemon::state) fn buy(&mut self, cx: &mut Cx, i: usize) -> f64 {
        let (pool, host) = self.slot(i);
        let now = cx.now;
        self.set_life(cx, i, Life::Provisioning);
        let delay = match self.provisioners[pool].as_mut() {
            Some(p) => p.buy(host, now),
            None => 0.0,
        };
        self.coming_at.insert(i, now + delay);
        delay
    }

    /// Gives node `i` back to its provisioner.
    fn give_back(&mut self, cx: &mut Cx, on: &mut OnNodes, i: usize) {
        let (pool, host) = self.slot(i);
        let now = cx.now;
        self.set_life(cx, i, Life::Absent);
        if let Some(p) = self.provisioners[pool].as_mut() {
            p.give_back(host, now);
        }
        self.set_empty_since(cx, i, None);
        self.machine_gone(on, i);
    }

    /// How many of `nodes` more for `pool` its spending cap and the fleet's allow (each, US
    /// dollars an hour over the nodes paid for); a buy cut short is said once until it changes.
    fn within_caps(
        &mut self,
        cx: &mut Cx,
        (pool, nodes, job): (usize, u32, u64),
    ) -> Result<u32, EngineError> {
        let price = self.pools[pool].price_per_hour;
        let fleet = cx.engine.fleet();
        let mut pool_now = 0.0;
        let mut fleet_now = 0.0;
        for (n, life) in fleet.nodes.iter().zip(&self.lives) {
            if life.paid() {
                let p = self.pools[n.pool.index()].price_per_hour;
                fleet_now += p;
                if n.pool.index() == pool {
                    pool_now += p;
                }
            }
        }
        let fits = |cap: Option<f64>, now: f64| -> u32 {
            match cap {
                Some(c) if price > 0.0 => ((c - now + 1e-9) / price).floor().max(0.0) as u32,
                Some(c) if now > c => 0,
                _ => u32::MAX,
            }
        };
        let by_pool = fits(self.pools[pool].max_dollars_per_hour, pool_now);
        let by_fleet = fits(self.fleet_cap, fleet_now);
        let n = nodes.min(by_pool).min(by_fleet);
        if n == nodes {
            self.capped.remove(&pool);
            return Ok(n);
        }
        let (whose, cap, now) = if by_pool <= by_fleet {
            (
                "the pool's",
                self.pools[pool].max_dollars_per_hour,
                pool_now,
            )
        } else {
            ("the fleet's", self.fleet_cap, fleet_now)
        };
        let line = format!(
            "{}: +{nodes} for job {job} (+${:.2}/h) would pass {whose} cap of ${:.2}/h (${now:.2}/h now): {}",
            cx.engine.fleet().pool_path(crate::model::PoolId(pool as u32)),
            price * f64::from(nodes),
            cap.unwrap_or(0.0),
            if n == 0 {
                "waits until nodes are given back (or raise max_dollars_per_hour)".to_string()
            } else {
                format!("buys {n}")
            }
        );
        if self.capped.get(&pool) != Some(&line) {
            self.capped.insert(pool, line.clone());
            cx.record("fleet", line)?;
        }
        Ok(n)
    }

    /// Node `i` is taken back in `gone_in_s` (its provider said so: `what`): nothing new is
    /// placed there and its running jobs are stopped with their checkpoint signal and that
    /// grace, to requeue from the checkpoint. Said once per node.
    pub(in crate::daemon::state) fn spot_noticed(
        &mut self,
        (cx, on): (&mut Cx, &mut OnNodes),
        i: usize,
        gone_in_s: f64,
        what: &str,
    ) -> Result<(), EngineError> {
        if self.lives[i] == Life::Noticed {
            return Ok(());
        }
        self.set_life(cx, i, Life::Noticed);
        self.going_at.insert(i, cx.now + gone_in_s);
        on.counters.spot_interruptions += 1;
        let jobs = super::super::seen::jobs_on(cx.engine, i);
        for id in &jobs {
            // A job already stopping (its node draining) keeps its own grace.
            if cx.engine.job(*id).map(|j| j.state) != Some(JobState::Running) {
                continue;
            }
            cx.engine
                .preempt(*id, cx.now, "spot interruption notice: checkpoint now")?;
            on.runs.stop(cx.engine, *id, Some(gone_in_s));
        }
        cx.record(
            "fleet",
            format!(
                "{what}: {} ({}) is taken back in {:.0} min; {} job(s) checkpointing",
                cx.node_name(i),
                cx.pool_path_of(i),
                gone_in_s / 60.0,
                jobs.len()
            ),
        )?;
        Ok(())
    }

    /// A real host not reached yet: down ("connecting") until its agent answers, its GPUs
    /// held until NVML's first sample (until then gantry cannot tell which are busy with
    /// processes it did not start, nor give a job their UUIDs).
    pub(in crate::daemon::state) fn await_first_contact(
        &mut self,
        cx: &mut Cx,
        on: &mut OnNodes,
        i: usize,
    ) {
        // A machine bought again is a new machine: its first sample is awaited afresh.
        on.telemetry.forget(i);
        on.runs.connecting(i, cx.now);
        for g in 0..cx.engine.fleet().nodes[i].gpus.len() as u8 {
            cx.engine.hold_gpu(NodeId(i as u32), g);
        }
    }

    /// A bought machine that cannot be reached goes back.
    pub(in crate::daemon::state) fn give_back_lost(
        &mut self,
        cx: &mut Cx,
        on: &mut OnNodes,
        i: usize,
    ) {
        self.give_back(cx, on, i);
        on.counters.scale_downs += 1;
    }

    /// A bought machine is gone (given back, taken back, failed): its runner stops reaching
    /// for it, and what was said of its link goes with it.
    fn machine_gone(&mut self, on: &mut OnNodes, i: usize) {
        if self.is_machine(i) {
            on.runs.machine_gone(i);
            on.telemetry.forget(i);
            self.unconnected.remove(&i);
        }
    }

    pub(in crate::daemon::state) fn node_event(
        &mut self,
        (cx, on): (&mut Cx, &mut OnNodes),
        pool: usize,
        e: NodeEvent,
    ) -> Result<(), EngineError> {
        let host = match &e {
            NodeEvent::Ready(h)
            | NodeEvent::SpotNotice { host: h, .. }
            | NodeEvent::Gone(h)
            | NodeEvent::Failed { host: h, .. }
            | NodeEvent::Unavailable { host: h, .. }
            | NodeEvent::Repaired(h) => *h,
            NodeEvent::Said { host: None, what } => {
                let line = format!(
                    "{}: {what}",
                    cx.engine
                        .fleet()
                        .pool_path(crate::model::PoolId(pool as u32))
                );
                return cx.record("cloud", line);
            }
            NodeEvent::Said { host: Some(h), .. } => *h,
        };
        let Some(i) = on.runs.node_of(pool, host) else {
            return Ok(());
        };
        match e {
            NodeEvent::Said { what, .. } => {
                let line = format!("{}: {what}", cx.node_name(i));
                cx.record("cloud", line)?;
            }
            NodeEvent::Unavailable { why, .. } => {
                // Passed over while the planner buys elsewhere (the next pool by price; a
                // spot pool's jobs go on-demand as after an interruption).
                let spot = self.pools[pool].capacity == CapacityType::Spot;
                self.pass_over(cx, pool, cx.now + UNAVAILABLE_FOR_S, why.clone());
                if spot {
                    self.interrupted[pool] = Some(cx.now);
                }
                if self.lives[i] == Life::Provisioning {
                    self.set_life(cx, i, Life::Absent);
                }
                self.machine_gone(on, i);
                cx.record(
                    "cloud",
                    format!(
                        "{}: cannot buy {}: {why}; the pool is passed over for {:.0} min",
                        cx.pool_path_of(i),
                        cx.node_name(i),
                        UNAVAILABLE_FOR_S / 60.0
                    ),
                )?;
            }
            NodeEvent::Ready(_) => {
                let adopted = self.lives[i] == Life::Absent;
                let entry = self.provisioners[pool].as_ref().and_then(|p| p.entry(host));
                let mut at = String::new();
                match entry {
                    Some(entry) if self.is_machine(i) => {
                        // Reached as an SSH host from now on; placed on once its agent answers
                        // (still coming until then: paid, counted, not placed on).
                        self.set_life(cx, i, Life::Provisioning);
                        if let Err(e) = on.runs.attach(i, &entry) {
                            cx.record("cloud", format!("{}: {e}", cx.node_name(i)))?;
                        }
                        self.unconnected.insert(i);
                        self.await_first_contact(cx, on, i);
                        at = format!(" at {entry}");
                    }
                    // A machine with no address cannot run anything: not up (jobs would be
                    // placed where nothing reaches); given back if none comes in time.
                    None if self.is_machine(i) => {
                        self.set_life(cx, i, Life::Provisioning);
                        self.unconnected.insert(i);
                        self.await_first_contact(cx, on, i);
                        at = " with no address to reach it yet".to_string();
                    }
                    _ => self.set_life(cx, i, Life::Up),
                }
                cx.record(
                    "fleet",
                    format!(
                        "node {} {}{at} ({})",
                        cx.node_name(i),
                        if adopted {
                            "adopted: already running"
                        } else {
                            "ready"
                        },
                        cx.pool_path_of(i)
                    ),
                )?;
            }
            NodeEvent::SpotNotice { gone_in_s, .. } => {
                self.spot_noticed((cx, on), i, gone_in_s, "spot notice")?;
            }
            NodeEvent::Gone(_) => {
                for id in super::super::seen::jobs_on(cx.engine, i) {
                    on.runs.requeue(
                        cx,
                        id,
                        "spot node taken back: requeued from its checkpoint",
                    )?;
                }
                self.interrupted[pool] = Some(cx.now);
                self.set_life(cx, i, Life::Absent);
                self.machine_gone(on, i);
                cx.record(
                    "fleet",
                    format!("node {} taken back by the provider", cx.node_name(i)),
                )?;
            }
            NodeEvent::Failed { repair, .. } => {
                let jobs = super::super::seen::jobs_on(cx.engine, i);
                for id in &jobs {
                    on.runs.requeue(
                        cx,
                        *id,
                        "its node failed: requeued from its last checkpoint",
                    )?;
                }
                on.counters.node_failures += 1;
                self.set_life(cx, i, if repair { Life::Failed } else { Life::Absent });
                cx.record(
                    "fleet",
                    format!(
                        "node {} failed ({} job(s) requeued); {}",
                        cx.node_name(i),
                        jobs.len(),
                        if repair {
                            "repair under way"
                        } else {
                            "instance terminated"
                        }
                    ),
                )?;
            }
            NodeEvent::Repaired(_) => {
                self.set_life(cx, i, Life::Up);
                cx.record("fleet", format!("node {} repaired", cx.node_name(i)))?;
            }
        }
        Ok(())
    }

    /// Elastic capacity after a cycle: grow pools for jobs that fit nowhere (cheapest offer,
    /// spot first, on-demand after an interruption), give back nodes empty past the window.
    pub(in crate::daemon::state) fn elastic(
        &mut self,
        cx: &mut Cx,
        on: &mut OnNodes,
    ) -> Result<(), EngineError> {
        self.defragment(cx, on)?;
        let pinned: std::collections::HashSet<JobId> =
            cx.engine.pins().map(|(_, j, _)| j).collect();
        let fleet = cx.engine.fleet();
        let waiting: Vec<(u64, &crate::model::JobRequest)> = {
            let mut w: Vec<(usize, u64, &crate::model::JobRequest)> = cx
                .engine
                .jobs()
                .filter(|j| {
                    j.state == JobState::Pending
                        && !pinned.contains(&j.id)
                        && self.scale.may_buy_for(j.class, cx.now - j.submitted_at)
                })
                .filter_map(|j| {
                    let e = j.explanation.as_ref()?;
                    e.reason
                        .waits_for_capacity()
                        .then_some((e.position, j.id as u64, &j.request))
                })
                .collect();
            w.sort_by_key(|x| (x.0, x.1));
            w.into_iter().map(|(_, id, r)| (id, r)).collect()
        };
        let (offers, incoming) = offers(fleet, &self.pools, &self.lives, &self.interrupted);
        // A pool that just could not buy is passed over until its time is up.
        let now = cx.now;
        let (offers, incoming): (Vec<_>, Vec<_>) = offers
            .into_iter()
            .zip(incoming)
            .filter(|(o, _)| self.unavailable[o.pool.index()].is_none_or(|t| t <= now))
            .unzip();
        let plan = scale_up(cx.now, &offers, &incoming, &waiting, &self.scale);
        for up in plan {
            let n = self.within_caps(cx, (up.pool.index(), up.nodes, up.for_job))?;
            if n == 0 {
                continue;
            }
            let absent: Vec<usize> = (0..self.lives.len())
                .filter(|&i| {
                    cx.engine.fleet().nodes[i].pool == up.pool && self.lives[i] == Life::Absent
                })
                .take(n as usize)
                .collect();
            let mut delay: f64 = 0.0;
            for &i in &absent {
                delay = delay.max(self.buy(cx, i));
            }
            on.counters.scale_ups += 1;
            let fallback = if up.spot_fallback {
                " (spot was just interrupted or had no capacity: on-demand)"
            } else {
                ""
            };
            cx.record(
                "fleet",
                format!(
                    "{} +{} for job {}, +${:.2}/h, ready in {}{fallback}",
                    cx.engine.fleet().pool_path(up.pool),
                    absent.len(),
                    up.for_job,
                    up.added_per_hour,
                    if delay < 90.0 {
                        format!("{delay:.0} s")
                    } else {
                        format!("{:.0} min", delay / 60.0)
                    }
                ),
            )?;
        }
        // Empty elastic nodes go back after the window.
        let changed: Vec<(usize, Option<f64>)> = cx
            .engine
            .fleet()
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let empty = n.gpus.iter().all(|g| g.is_idle()) && n.cpu_free == n.cpu_milli;
                match (empty, self.empty_since[i]) {
                    (true, None) => Some((i, Some(cx.now))),
                    (false, Some(_)) => Some((i, None)),
                    _ => None,
                }
            })
            .collect();
        for (i, since) in changed {
            self.set_empty_since(cx, i, since);
        }
        let fleet = cx.engine.fleet();
        let idle: Vec<NodeIdle> = (0..fleet.nodes.len())
            .filter(|&i| {
                self.lives[i] == Life::Up
                    && self.pools[fleet.nodes[i].pool.index()].capacity != CapacityType::Reserved
            })
            .map(|i| NodeIdle {
                node: NodeId(i as u32),
                pool: fleet.nodes[i].pool,
                empty_since: self.empty_since[i],
            })
            .collect();
        let counts = pool_counts(fleet, self.pools.len(), &self.lives);
        let mins: Vec<u32> = self.pools.iter().map(|p| p.min_nodes).collect();
        // A drained node goes as soon as its last job has moved.
        let drained: Vec<usize> = (0..fleet.nodes.len())
            .filter(|&i| {
                self.lives[i] == Life::Draining
                    && super::super::seen::jobs_on(cx.engine, i).is_empty()
            })
            .collect();
        for i in drained {
            let price = self.pools[cx.engine.fleet().nodes[i].pool.index()].price_per_hour;
            self.give_back(cx, on, i);
            on.counters.scale_downs += 1;
            on.counters.consolidated_nodes += 1;
            cx.record(
                "fleet",
                format!(
                    "{} -1 ({} consolidated: its jobs moved to paid capacity), -${price:.2}/h",
                    cx.pool_path_of(i),
                    cx.node_name(i),
                ),
            )?;
        }
        for n in scale_down(cx.now, &idle, &counts, &mins, &self.scale) {
            let i = n.index();
            let price = self.pools[cx.engine.fleet().nodes[i].pool.index()].price_per_hour;
            let empty = cx.now - self.empty_since[i].unwrap_or(cx.now);
            self.give_back(cx, on, i);
            on.counters.scale_downs += 1;
            cx.record(
                "fleet",
                format!(
                    "{} -1 ({} empty for {:.0} min), -${price:.2}/h",
                    cx.pool_path_of(i),
                    cx.node_name(i),
                    empty / 60.0
                ),
            )?;
        }
        Ok(())
    }

    /// Tells each job why it must move: it checkpoints within its grace and requeues, and the
    /// next cycle places it elsewhere.
    pub(in crate::daemon::state) fn move_jobs(
        (cx, on): (&mut Cx, &mut OnNodes),
        jobs: &[JobId],
        why: &str,
    ) -> Result<(), EngineError> {
        for &id in jobs {
            cx.engine.preempt(id, cx.now, why)?;
            on.runs.stop(cx.engine, id, None);
        }
        Ok(())
    }

    /// Defragmentation, planned by `scheduler::moves` (`[scale] rebalance`): a job that fits
    /// nowhere and needs whole GPUs on one node gets a node already paid for, emptied by
    /// moving its jobs to room elsewhere, instead of one bought for it. The node is held for
    /// the job (nobody else is placed there) while its jobs checkpoint and requeue; the job
    /// starts there once it fits, or the hold lapses after 15 minutes. One at a time.
    pub(in crate::daemon::state) fn defragment(
        &mut self,
        cx: &mut Cx,
        on: &mut OnNodes,
    ) -> Result<(), EngineError> {
        if !self.rebalance {
            return Ok(());
        }
        cx.engine.drop_pins(cx.now - 15.0 * 60.0);
        if cx.engine.pins().next().is_some() {
            return Ok(());
        }
        let mut stuck: Vec<(usize, JobId, crate::model::JobRequest)> = cx
            .engine
            .jobs()
            .filter(|j| j.state == JobState::Pending)
            .filter_map(|j| {
                let e = j.explanation.as_ref()?;
                let waits = e.reason.waits_for_capacity();
                waits.then(|| (e.position, j.id, j.request.clone()))
            })
            .collect();
        stuck.sort_unstable_by_key(|s| (s.0, s.1));
        let stuck: Vec<(u64, &crate::model::JobRequest)> =
            stuck.iter().map(|(_, id, r)| (*id as u64, r)).collect();
        let mut world = Rebalancing::new(self, cx, on);
        crate::scheduler::moves::defragment(&mut world, &stuck, 1);
        world.failed.map_or(Ok(()), Err)
    }

    /// Consolidation, planned by `scheduler::moves` (`[scale] rebalance`): when no job
    /// waits for capacity, the least-used cloud node whose jobs all checkpoint and would all
    /// fit on other capacity already paid for is drained (cordoned; its jobs told to
    /// checkpoint, then requeued to start elsewhere) and given back once empty. One node at
    /// a time, every few minutes, each move taking its jobs' grace: calm, and each step an
    /// event.
    pub(in crate::daemon::state) fn consolidate(
        &mut self,
        cx: &mut Cx,
        on: &mut OnNodes,
    ) -> Result<(), EngineError> {
        if !self.rebalance || cx.now < self.next_consolidate {
            return Ok(());
        }
        self.next_consolidate = cx.now + CONSOLIDATE_EVERY_S;
        let waiting = cx.engine.live_jobs().any(|j| {
            j.state == JobState::Pending
                && j.explanation
                    .as_ref()
                    .is_some_and(|e| e.reason.waits_for_capacity())
        });
        if waiting || self.lives.contains(&Life::Draining) {
            return Ok(());
        }
        let fleet = cx.engine.fleet();
        let mut counts = pool_counts(fleet, self.pools.len(), &self.lives);
        let mins: Vec<u32> = self.pools.iter().map(|p| p.min_nodes).collect();
        let mut world = Rebalancing::new(self, cx, on);
        crate::scheduler::moves::consolidate(&mut world, &mut counts, &mins, 1);
        world.failed.map_or(Ok(()), Err)
    }

    /// Node `i` as the planner sees it.
    fn candidate(engine: &Engine, i: usize) -> Candidate {
        let n = &engine.fleet().nodes[i];
        Candidate {
            node: i,
            pool: n.pool.index(),
            used_milli: n.gpu_milli_used(),
            model: n.model,
            gpus: n.gpus.len(),
        }
    }

    /// Whether a running job may be moved: its spec says it can be stopped and resumed
    /// (preemptible, with a checkpoint) and it runs on one node.
    fn movable(engine: &Engine, id: JobId) -> bool {
        engine.job(id).is_some_and(|j| {
            j.state == JobState::Running
                && j.spec.preemptible
                && j.spec.checkpoint.is_some()
                && j.placement.as_ref().is_some_and(|p| p.nodes.len() == 1)
        })
    }
}

/// The daemon's state as the planner's world; the first journal error stops the pass.
struct Rebalancing<'s, 'c, 'o> {
    nodes: &'s mut Nodes,
    cx: &'s mut Cx<'c>,
    on: &'s mut OnNodes<'o>,
    failed: Option<EngineError>,
    /// The jobs on each node, read from every job once per pass and again after a move: a
    /// pass asks for the jobs of up to `DEFRAG_NODES` nodes for each of `DEFRAG_JOBS` jobs,
    /// and reading every job for each made defragmentation the largest cost of a
    /// thousand-GPU daemon (a fifth of `gantry sim --gpus 1000`).
    on_node: std::cell::OnceCell<HashMap<usize, Vec<JobId>>>,
}

impl<'s, 'c, 'o> Rebalancing<'s, 'c, 'o> {
    fn new(
        nodes: &'s mut Nodes,
        cx: &'s mut Cx<'c>,
        on: &'s mut OnNodes<'o>,
    ) -> Rebalancing<'s, 'c, 'o> {
        Rebalancing {
            nodes,
            cx,
            on,
            failed: None,
            on_node: std::cell::OnceCell::new(),
        }
    }

    fn carry_out(
        &mut self,
        f: impl FnOnce(&mut Nodes, &mut Cx, &mut OnNodes) -> Result<(), EngineError>,
    ) {
        // What moves changes which jobs are where.
        self.on_node = std::cell::OnceCell::new();
        if self.failed.is_none() {
            if let Err(e) = f(self.nodes, self.cx, self.on) {
                self.failed = Some(e);
            }
        }
    }
}

impl Rebalance for Rebalancing<'_, '_, '_> {
    /// Up cloud nodes of the simulated fleet (only a provisioner can give one back), not held
    /// for a job, running something.
    fn consolidation_candidates(&self) -> Vec<Candidate> {
        let (s, engine) = (&*self.nodes, &*self.cx.engine);
        let fleet = engine.fleet();
        (0..fleet.nodes.len())
            .filter(|&i| {
                let pool = fleet.nodes[i].pool.index();
                s.lives[i] == Life::Up
                    && s.pools[pool].capacity != CapacityType::Reserved
                    && s.provisioners[pool].is_some()
                    && !engine.pins().any(|(n, _, _)| n.index() == i)
            })
            .map(|i| Nodes::candidate(engine, i))
            .filter(|c| c.used_milli > 0)
            .collect()
    }

    /// Up nodes whose jobs a stop moves (the simulated fleet's), running something.
    fn defrag_candidates(&self) -> Vec<Candidate> {
        let engine = &*self.cx.engine;
        (0..engine.fleet().nodes.len())
            .filter(|&i| self.nodes.lives[i] == Life::Up && !self.on.runs.is_real(i))
            .map(|i| Nodes::candidate(engine, i))
            .filter(|c| c.used_milli > 0)
            .collect()
    }

    /// As `State::jobs_on`, from the pass's index.
    fn jobs_on(&self, node: usize) -> Vec<u64> {
        let on_node = self
            .on_node
            .get_or_init(|| super::super::seen::jobs_by_node(self.cx.engine, |_| true));
        on_node
            .get(&node)
            .map_or_else(Vec::new, |ids| ids.iter().map(|&j| j as u64).collect())
    }

    fn movable(&self, job: u64) -> bool {
        Nodes::movable(self.cx.engine, job as JobId)
    }

    fn try_moves(
        &mut self,
        node: usize,
        jobs: &[u64],
        then: Option<u64>,
    ) -> Option<(
        Vec<crate::model::Placement>,
        Option<crate::model::Placement>,
    )> {
        let jobs: Vec<JobId> = jobs.iter().map(|&j| j as JobId).collect();
        self.cx
            .engine
            .moves_off(NodeId(node as u32), &jobs, then.map(|j| j as JobId))
    }

    /// Cordoned; its jobs checkpoint and requeue (the next cycles place them on the capacity
    /// found); given back once empty (`elastic`).
    fn drain(&mut self, node: usize, jobs: &[u64], _moves: Vec<crate::model::Placement>) {
        let jobs: Vec<JobId> = jobs.iter().map(|&j| j as JobId).collect();
        self.carry_out(|s, cx, on| {
            s.set_life(cx, node, Life::Draining);
            on.counters.moved_jobs += jobs.len() as u64;
            let why = format!(
                "consolidation: {} is given back; checkpoint and move to capacity already paid for",
                cx.node_name(node)
            );
            Nodes::move_jobs((cx, on), &jobs, &why)?;
            cx.record(
                "fleet",
                format!(
                    "{} draining {}: {} job(s) checkpoint and move to capacity already paid for",
                    cx.pool_path_of(node),
                    cx.node_name(node),
                    jobs.len()
                ),
            )
        });
    }

    /// Held for the job; its jobs checkpoint and requeue; the job starts there once it fits.
    fn empty_for(
        &mut self,
        node: usize,
        jobs: &[u64],
        _moves: Vec<crate::model::Placement>,
        job: u64,
        _target: crate::model::Placement,
    ) {
        let jobs: Vec<JobId> = jobs.iter().map(|&j| j as JobId).collect();
        let w = job as JobId;
        self.carry_out(|_, cx, on| {
            cx.engine.pin(NodeId(node as u32), w, cx.now);
            on.counters.defragmented += 1;
            on.counters.moved_jobs += jobs.len() as u64;
            let why = format!(
                "defragmentation: {} is emptied for job {w}; checkpoint and move",
                cx.node_name(node)
            );
            Nodes::move_jobs((cx, on), &jobs, &why)?;
            cx.record(
                "fleet",
                format!(
                    "defragment {}: {} job(s) checkpoint and move so job {w} gets the node instead of one bought for it",
                    cx.node_name(node),
                    jobs.len()
                ),
            )
        });
    }
}
