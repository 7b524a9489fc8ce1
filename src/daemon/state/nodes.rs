//! The fleet's nodes over time: what the provisioners say (ready, spot notice, taken back,
//! failed, repaired), elastic growth and shrink through them, defragmentation and
//! consolidation — each a journaled event with its reason and price.

use super::{State, CONSOLIDATE_EVERY_S};
use crate::api::JobState;
use crate::backend::NodeEvent;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::lives::offers;
use crate::model::{pool_counts, CapacityType, Life, NodeId};
use crate::scheduler::moves::{Candidate, Rebalance};
use crate::scheduler::scale::{scale_down, scale_up, NodeIdle};
use std::collections::HashMap;

/// How long a pool that could not buy a node (no capacity in its zones, a quota) is passed
/// over by the planner.
const UNAVAILABLE_FOR_S: f64 = 600.0;

/// How long a pool is passed over after `times` machines in a row never answered: 5 min,
/// doubling, at most 2 h.
pub(super) fn unreached_pause_s(times: u32) -> f64 {
    (300.0 * 2f64.powi(times.saturating_sub(1).min(5) as i32)).min(7200.0)
}

impl State {
    pub(super) fn set_life(&mut self, i: usize, life: Life) {
        self.nodes.lives[i] = life;
        if life != Life::Provisioning {
            self.nodes.coming_at.remove(&i);
        }
        if life != Life::Noticed {
            self.nodes.going_at.remove(&i);
        }
        self.engine.set_health(NodeId(i as u32), life.health());
        if life == Life::Up {
            self.empty_since_up(i);
        }
    }

    pub(super) fn jobs_on(&self, i: usize) -> Vec<JobId> {
        let node = NodeId(i as u32);
        self.engine
            .jobs()
            .filter(|j| {
                j.placement
                    .as_ref()
                    .is_some_and(|p| p.nodes.iter().any(|g| g.node == node))
            })
            .map(|j| j.id)
            .collect()
    }

    /// Node `i`'s pool and its index there, for its provisioner.
    fn slot(&self, i: usize) -> (usize, usize) {
        self.hosts.at.get(&i).copied().unwrap_or_default()
    }

    /// Asks node `i`'s provisioner for it; the expected seconds until it is ready.
    pub(super) fn buy(&mut self, i: usize) -> f64 {
        let (pool, host) = self.slot(i);
        let now = self.now;
        self.set_life(i, Life::Provisioning);
        let delay = match self.nodes.provisioners[pool].as_mut() {
            Some(p) => p.buy(host, now),
            None => 0.0,
        };
        self.nodes.coming_at.insert(i, now + delay);
        delay
    }

    /// Gives node `i` back to its provisioner.
    fn give_back(&mut self, i: usize) {
        let (pool, host) = self.slot(i);
        let now = self.now;
        self.set_life(i, Life::Absent);
        if let Some(p) = self.nodes.provisioners[pool].as_mut() {
            p.give_back(host, now);
        }
        self.set_empty_since(i, None);
        self.machine_gone(i);
    }

    /// How many of `nodes` more for `pool` its spending cap and the fleet's allow (each, US
    /// dollars an hour over the nodes paid for); a buy cut short is said once until it changes.
    fn within_caps(&mut self, pool: usize, nodes: u32, job: u64) -> Result<u32, EngineError> {
        let price = self.nodes.pools[pool].price_per_hour;
        let fleet = self.engine.fleet();
        let mut pool_now = 0.0;
        let mut fleet_now = 0.0;
        for (n, life) in fleet.nodes.iter().zip(&self.nodes.lives) {
            if life.paid() {
                let p = self.nodes.pools[n.pool.index()].price_per_hour;
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
        let by_pool = fits(self.nodes.pools[pool].max_dollars_per_hour, pool_now);
        let by_fleet = fits(self.nodes.fleet_cap, fleet_now);
        let n = nodes.min(by_pool).min(by_fleet);
        if n == nodes {
            self.nodes.capped.remove(&pool);
            return Ok(n);
        }
        let (whose, cap, now) = if by_pool <= by_fleet {
            (
                "the pool's",
                self.nodes.pools[pool].max_dollars_per_hour,
                pool_now,
            )
        } else {
            ("the fleet's", self.nodes.fleet_cap, fleet_now)
        };
        let line = format!(
            "{}: +{nodes} for job {job} (+${:.2}/h) would pass {whose} cap of ${:.2}/h (${now:.2}/h now): {}",
            self.engine.fleet().pool_path(crate::model::PoolId(pool as u32)),
            price * f64::from(nodes),
            cap.unwrap_or(0.0),
            if n == 0 {
                "waits until nodes are given back (or raise max_dollars_per_hour)".to_string()
            } else {
                format!("buys {n}")
            }
        );
        if self.nodes.capped.get(&pool) != Some(&line) {
            self.nodes.capped.insert(pool, line.clone());
            self.record("fleet", line)?;
        }
        Ok(n)
    }

    /// Whether node `i` is a machine its pool buys (a cloud instance).
    pub(super) fn is_machine(&self, i: usize) -> bool {
        let (pool, _) = self.slot(i);
        self.nodes.provisioners[pool]
            .as_ref()
            .is_some_and(|p| p.machines())
    }

    /// A real host not reached yet: down ("connecting") until its agent answers, its GPUs
    /// held until NVML's first sample (until then gantry cannot tell which are busy with
    /// processes it did not start, nor give a job their UUIDs).
    /// Node `i` is taken back in `gone_in_s` (its provider said so: `what`): nothing new is
    /// placed there and its running jobs are stopped with their checkpoint signal and that
    /// grace, to requeue from the checkpoint. Said once per node.
    pub(super) fn spot_noticed(
        &mut self,
        i: usize,
        gone_in_s: f64,
        what: &str,
    ) -> Result<(), EngineError> {
        if self.nodes.lives[i] == Life::Noticed {
            return Ok(());
        }
        self.set_life(i, Life::Noticed);
        self.nodes.going_at.insert(i, self.now + gone_in_s);
        self.counters.spot_interruptions += 1;
        let jobs = self.jobs_on(i);
        for id in &jobs {
            // A job already stopping (its node draining) keeps its own grace.
            if self.engine.job(*id).map(|j| j.state) != Some(JobState::Running) {
                continue;
            }
            self.engine
                .preempt(*id, self.now, "spot interruption notice: checkpoint now")?;
            self.stop_on_hosts(*id, Some(gone_in_s));
        }
        self.record(
            "fleet",
            format!(
                "{what}: {} ({}) is taken back in {:.0} min; {} job(s) checkpointing",
                self.node_name(i),
                self.pool_path_of(i),
                gone_in_s / 60.0,
                jobs.len()
            ),
        )?;
        Ok(())
    }

    pub(super) fn await_first_contact(&mut self, i: usize) {
        // A machine bought again is a new machine: its first sample is awaited afresh.
        self.measured.remove(&i);
        self.hosts
            .down
            .insert(i, (self.now, "connecting".to_string()));
        for g in 0..self.engine.fleet().nodes[i].gpus.len() as u8 {
            self.engine.hold_gpu(NodeId(i as u32), g);
        }
    }

    /// A bought machine that cannot be reached goes back.
    pub(super) fn give_back_lost(&mut self, i: usize) {
        self.give_back(i);
        self.counters.scale_downs += 1;
    }

    /// A bought machine is gone (given back, taken back, failed): its runner stops reaching
    /// for it, and what was said of its link goes with it.
    fn machine_gone(&mut self, i: usize) {
        let (pool, host) = self.slot(i);
        if self.is_machine(i) {
            self.hosts.runners[pool].detach(host);
            self.measured.remove(&i);
            self.hosts.hostnames.remove(&i);
            self.hosts.down.remove(&i);
            self.hosts.lost.remove(&i);
            self.nodes.unconnected.remove(&i);
        }
    }

    /// What the provisioners say happened up to `until`, in time order, each at its own time
    /// (what the runners report up to then comes first: a run that ends as its node goes
    /// ends on its own terms).
    pub(super) fn run_node_timers(&mut self, until: f64) -> Result<(), EngineError> {
        let mut due: Vec<(f64, usize, NodeEvent)> = Vec::new();
        for (pool, p) in self.nodes.provisioners.iter_mut().enumerate() {
            if let Some(p) = p {
                due.extend(p.poll(until).into_iter().map(|(at, e)| (at, pool, e)));
            }
        }
        // Pools that left the fleet file: what their workers say of the instances they end.
        self.poll_retiring(until)?;
        due.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (at, pool, e) in due {
            let saved = self.now;
            self.now = at.min(saved);
            self.poll_hosts()?;
            let done = self.node_event(pool, e);
            self.now = saved;
            done?;
        }
        Ok(())
    }

    pub(super) fn node_event(&mut self, pool: usize, e: NodeEvent) -> Result<(), EngineError> {
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
                    self.engine
                        .fleet()
                        .pool_path(crate::model::PoolId(pool as u32))
                );
                return self.record("cloud", line);
            }
            NodeEvent::Said { host: Some(h), .. } => *h,
        };
        let Some(i) = self.node_of(pool, host) else {
            return Ok(());
        };
        match e {
            NodeEvent::Said { what, .. } => {
                let line = format!("{}: {what}", self.node_name(i));
                self.record("cloud", line)?;
            }
            NodeEvent::Unavailable { why, .. } => {
                // Passed over while the planner buys elsewhere (the next pool by price; a
                // spot pool's jobs go on-demand as after an interruption).
                let spot = self.nodes.pools[pool].capacity == CapacityType::Spot;
                self.pass_over(pool, self.now + UNAVAILABLE_FOR_S, why.clone());
                if spot {
                    self.nodes.interrupted[pool] = Some(self.now);
                }
                if self.nodes.lives[i] == Life::Provisioning {
                    self.set_life(i, Life::Absent);
                }
                self.machine_gone(i);
                self.record(
                    "cloud",
                    format!(
                        "{}: cannot buy {}: {why}; the pool is passed over for {:.0} min",
                        self.pool_path_of(i),
                        self.node_name(i),
                        UNAVAILABLE_FOR_S / 60.0
                    ),
                )?;
            }
            NodeEvent::Ready(_) => {
                let adopted = self.nodes.lives[i] == Life::Absent;
                let entry = self.nodes.provisioners[pool]
                    .as_ref()
                    .and_then(|p| p.entry(host));
                let mut at = String::new();
                match entry {
                    Some(entry) if self.is_machine(i) => {
                        // Reached as an SSH host from now on; placed on once its agent answers
                        // (still coming until then: paid, counted, not placed on).
                        self.set_life(i, Life::Provisioning);
                        if let Err(e) = self.hosts.runners[pool].attach(host, &entry) {
                            self.record("cloud", format!("{}: {e}", self.node_name(i)))?;
                        }
                        self.nodes.unconnected.insert(i);
                        self.await_first_contact(i);
                        at = format!(" at {entry}");
                    }
                    // A machine with no address cannot run anything: not up (jobs would be
                    // placed where nothing reaches); given back if none comes in time.
                    None if self.is_machine(i) => {
                        self.set_life(i, Life::Provisioning);
                        self.nodes.unconnected.insert(i);
                        self.await_first_contact(i);
                        at = " with no address to reach it yet".to_string();
                    }
                    _ => self.set_life(i, Life::Up),
                }
                self.record(
                    "fleet",
                    format!(
                        "node {} {}{at} ({})",
                        self.node_name(i),
                        if adopted {
                            "adopted: already running"
                        } else {
                            "ready"
                        },
                        self.pool_path_of(i)
                    ),
                )?;
            }
            NodeEvent::SpotNotice { gone_in_s, .. } => {
                self.spot_noticed(i, gone_in_s, "spot notice")?;
            }
            NodeEvent::Gone(_) => {
                for id in self.jobs_on(i) {
                    self.requeue_run(id, "spot node taken back: requeued from its checkpoint")?;
                }
                self.nodes.interrupted[pool] = Some(self.now);
                self.set_life(i, Life::Absent);
                self.machine_gone(i);
                self.record(
                    "fleet",
                    format!("node {} taken back by the provider", self.node_name(i)),
                )?;
            }
            NodeEvent::Failed { repair, .. } => {
                let jobs = self.jobs_on(i);
                for id in &jobs {
                    self.requeue_run(*id, "its node failed: requeued from its last checkpoint")?;
                }
                self.counters.node_failures += 1;
                self.set_life(i, if repair { Life::Failed } else { Life::Absent });
                self.record(
                    "fleet",
                    format!(
                        "node {} failed ({} job(s) requeued); {}",
                        self.node_name(i),
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
                self.set_life(i, Life::Up);
                self.record("fleet", format!("node {} repaired", self.node_name(i)))?;
            }
        }
        Ok(())
    }

    /// Elastic capacity after a cycle: grow pools for jobs that fit nowhere (cheapest offer,
    /// spot first, on-demand after an interruption), give back nodes empty past the window.
    pub(super) fn elastic(&mut self) -> Result<(), EngineError> {
        self.defragment()?;
        let pinned: std::collections::HashSet<JobId> =
            self.engine.pins().map(|(_, j, _)| j).collect();
        let fleet = self.engine.fleet();
        let waiting: Vec<(u64, &crate::model::JobRequest)> = {
            let mut w: Vec<(usize, u64, &crate::model::JobRequest)> = self
                .engine
                .jobs()
                .filter(|j| {
                    j.state == JobState::Pending
                        && !pinned.contains(&j.id)
                        && self
                            .nodes
                            .scale
                            .may_buy_for(j.class, self.now - j.submitted_at)
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
        let (offers, incoming) = offers(
            fleet,
            &self.nodes.pools,
            &self.nodes.lives,
            &self.nodes.interrupted,
        );
        // A pool that just could not buy is passed over until its time is up.
        let now = self.now;
        let (offers, incoming): (Vec<_>, Vec<_>) = offers
            .into_iter()
            .zip(incoming)
            .filter(|(o, _)| self.nodes.unavailable[o.pool.index()].is_none_or(|t| t <= now))
            .unzip();
        let plan = scale_up(self.now, &offers, &incoming, &waiting, &self.nodes.scale);
        for up in plan {
            let n = self.within_caps(up.pool.index(), up.nodes, up.for_job)?;
            if n == 0 {
                continue;
            }
            let absent: Vec<usize> = (0..self.nodes.lives.len())
                .filter(|&i| {
                    self.engine.fleet().nodes[i].pool == up.pool
                        && self.nodes.lives[i] == Life::Absent
                })
                .take(n as usize)
                .collect();
            let mut delay: f64 = 0.0;
            for &i in &absent {
                delay = delay.max(self.buy(i));
            }
            self.counters.scale_ups += 1;
            let fallback = if up.spot_fallback {
                " (spot was just interrupted or had no capacity: on-demand)"
            } else {
                ""
            };
            self.record(
                "fleet",
                format!(
                    "{} +{} for job {}, +${:.2}/h, ready in {}{fallback}",
                    self.engine.fleet().pool_path(up.pool),
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
        let changed: Vec<(usize, Option<f64>)> = self
            .engine
            .fleet()
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let empty = n.gpus.iter().all(|g| g.is_idle()) && n.cpu_free == n.cpu_milli;
                match (empty, self.nodes.empty_since[i]) {
                    (true, None) => Some((i, Some(self.now))),
                    (false, Some(_)) => Some((i, None)),
                    _ => None,
                }
            })
            .collect();
        for (i, since) in changed {
            self.set_empty_since(i, since);
        }
        let fleet = self.engine.fleet();
        let idle: Vec<NodeIdle> = (0..fleet.nodes.len())
            .filter(|&i| {
                self.nodes.lives[i] == Life::Up
                    && self.nodes.pools[fleet.nodes[i].pool.index()].capacity
                        != CapacityType::Reserved
            })
            .map(|i| NodeIdle {
                node: NodeId(i as u32),
                pool: fleet.nodes[i].pool,
                empty_since: self.nodes.empty_since[i],
            })
            .collect();
        let counts = pool_counts(fleet, self.nodes.pools.len(), &self.nodes.lives);
        let mins: Vec<u32> = self.nodes.pools.iter().map(|p| p.min_nodes).collect();
        // A drained node goes as soon as its last job has moved.
        let drained: Vec<usize> = (0..fleet.nodes.len())
            .filter(|&i| self.nodes.lives[i] == Life::Draining && self.jobs_on(i).is_empty())
            .collect();
        for i in drained {
            let price = self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].price_per_hour;
            self.give_back(i);
            self.counters.scale_downs += 1;
            self.counters.consolidated_nodes += 1;
            self.record(
                "fleet",
                format!(
                    "{} -1 ({} consolidated: its jobs moved to paid capacity), -${price:.2}/h",
                    self.pool_path_of(i),
                    self.node_name(i),
                ),
            )?;
        }
        for n in scale_down(self.now, &idle, &counts, &mins, &self.nodes.scale) {
            let i = n.index();
            let price = self.nodes.pools[self.engine.fleet().nodes[i].pool.index()].price_per_hour;
            let empty = self.now - self.nodes.empty_since[i].unwrap_or(self.now);
            self.give_back(i);
            self.counters.scale_downs += 1;
            self.record(
                "fleet",
                format!(
                    "{} -1 ({} empty for {:.0} min), -${price:.2}/h",
                    self.pool_path_of(i),
                    self.node_name(i),
                    empty / 60.0
                ),
            )?;
        }
        Ok(())
    }

    /// Tells each job why it must move: it checkpoints within its grace and requeues, and the
    /// next cycle places it elsewhere.
    pub(super) fn move_jobs(&mut self, jobs: &[JobId], why: &str) -> Result<(), EngineError> {
        for &id in jobs {
            self.engine.preempt(id, self.now, why)?;
            self.begin_stop(id);
        }
        Ok(())
    }

    /// Defragmentation, planned by `scheduler::moves` (`[scale] rebalance`): a job that fits
    /// nowhere and needs whole GPUs on one node gets a node already paid for, emptied by
    /// moving its jobs to room elsewhere, instead of one bought for it. The node is held for
    /// the job (nobody else is placed there) while its jobs checkpoint and requeue; the job
    /// starts there once it fits, or the hold lapses after 15 minutes. One at a time.
    pub(super) fn defragment(&mut self) -> Result<(), EngineError> {
        if !self.nodes.rebalance {
            return Ok(());
        }
        self.engine.drop_pins(self.now - 15.0 * 60.0);
        if self.engine.pins().next().is_some() {
            return Ok(());
        }
        let mut stuck: Vec<(usize, JobId, crate::model::JobRequest)> = self
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
        let mut world = Rebalancing::new(self);
        crate::scheduler::moves::defragment(&mut world, &stuck, 1);
        world.failed.map_or(Ok(()), Err)
    }

    /// Consolidation, planned by `scheduler::moves` (`[scale] rebalance`): when no job
    /// waits for capacity, the least-used cloud node whose jobs all checkpoint and would all
    /// fit on other capacity already paid for is drained (cordoned; its jobs told to
    /// checkpoint, then requeued to start elsewhere) and given back once empty. One node at
    /// a time, every few minutes, each move taking its jobs' grace: calm, and each step an
    /// event.
    pub(super) fn consolidate(&mut self) -> Result<(), EngineError> {
        if !self.nodes.rebalance || self.now < self.nodes.next_consolidate {
            return Ok(());
        }
        self.nodes.next_consolidate = self.now + CONSOLIDATE_EVERY_S;
        let waiting = self.engine.jobs().any(|j| {
            j.state == JobState::Pending
                && j.explanation
                    .as_ref()
                    .is_some_and(|e| e.reason.waits_for_capacity())
        });
        if waiting || self.nodes.lives.contains(&Life::Draining) {
            return Ok(());
        }
        let fleet = self.engine.fleet();
        let mut counts = pool_counts(fleet, self.nodes.pools.len(), &self.nodes.lives);
        let mins: Vec<u32> = self.nodes.pools.iter().map(|p| p.min_nodes).collect();
        let mut world = Rebalancing::new(self);
        crate::scheduler::moves::consolidate(&mut world, &mut counts, &mins, 1);
        world.failed.map_or(Ok(()), Err)
    }

    /// Node `i` as the planner sees it.
    fn candidate(&self, i: usize) -> Candidate {
        let n = &self.engine.fleet().nodes[i];
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
    fn movable(&self, id: JobId) -> bool {
        self.engine.job(id).is_some_and(|j| {
            j.state == JobState::Running
                && j.spec.preemptible
                && j.spec.checkpoint.is_some()
                && j.placement.as_ref().is_some_and(|p| p.nodes.len() == 1)
        })
    }
}

/// The daemon's state as the planner's world; the first journal error stops the pass.
struct Rebalancing<'s> {
    state: &'s mut State,
    failed: Option<EngineError>,
    /// The jobs on each node, read from every job once per pass and again after a move: a
    /// pass asks for the jobs of up to `DEFRAG_NODES` nodes for each of `DEFRAG_JOBS` jobs,
    /// and reading every job for each made defragmentation the largest cost of a
    /// thousand-GPU daemon (a fifth of `gantry sim --gpus 1000`).
    on_node: std::cell::OnceCell<HashMap<usize, Vec<JobId>>>,
}

impl<'s> Rebalancing<'s> {
    fn new(state: &'s mut State) -> Rebalancing<'s> {
        Rebalancing {
            state,
            failed: None,
            on_node: std::cell::OnceCell::new(),
        }
    }

    fn carry_out(&mut self, f: impl FnOnce(&mut State) -> Result<(), EngineError>) {
        // What moves changes which jobs are where.
        self.on_node = std::cell::OnceCell::new();
        if self.failed.is_none() {
            if let Err(e) = f(self.state) {
                self.failed = Some(e);
            }
        }
    }
}

impl Rebalance for Rebalancing<'_> {
    /// Up cloud nodes of the simulated fleet (only a provisioner can give one back), not held
    /// for a job, running something.
    fn consolidation_candidates(&self) -> Vec<Candidate> {
        let s = &*self.state;
        let fleet = s.engine.fleet();
        (0..fleet.nodes.len())
            .filter(|&i| {
                let pool = fleet.nodes[i].pool.index();
                s.nodes.lives[i] == Life::Up
                    && s.nodes.pools[pool].capacity != CapacityType::Reserved
                    && s.nodes.provisioners[pool].is_some()
                    && !s.engine.pins().any(|(n, _, _)| n.index() == i)
            })
            .map(|i| s.candidate(i))
            .filter(|c| c.used_milli > 0)
            .collect()
    }

    /// Up nodes whose jobs a stop moves (the simulated fleet's), running something.
    fn defrag_candidates(&self) -> Vec<Candidate> {
        let s = &*self.state;
        (0..s.engine.fleet().nodes.len())
            .filter(|&i| s.nodes.lives[i] == Life::Up && !s.is_real_host(i))
            .map(|i| s.candidate(i))
            .filter(|c| c.used_milli > 0)
            .collect()
    }

    /// As `State::jobs_on`, from the pass's index.
    fn jobs_on(&self, node: usize) -> Vec<u64> {
        let on_node = self
            .on_node
            .get_or_init(|| self.state.jobs_by_node(|_| true));
        on_node
            .get(&node)
            .map_or_else(Vec::new, |ids| ids.iter().map(|&j| j as u64).collect())
    }

    fn movable(&self, job: u64) -> bool {
        self.state.movable(job as JobId)
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
        self.state
            .engine
            .moves_off(NodeId(node as u32), &jobs, then.map(|j| j as JobId))
    }

    /// Cordoned; its jobs checkpoint and requeue (the next cycles place them on the capacity
    /// found); given back once empty (`elastic`).
    fn drain(&mut self, node: usize, jobs: &[u64], _moves: Vec<crate::model::Placement>) {
        let jobs: Vec<JobId> = jobs.iter().map(|&j| j as JobId).collect();
        self.carry_out(|s| {
            s.set_life(node, Life::Draining);
            s.counters.moved_jobs += jobs.len() as u64;
            let why = format!(
                "consolidation: {} is given back; checkpoint and move to capacity already paid for",
                s.node_name(node)
            );
            s.move_jobs(&jobs, &why)?;
            s.record(
                "fleet",
                format!(
                    "{} draining {}: {} job(s) checkpoint and move to capacity already paid for",
                    s.pool_path_of(node),
                    s.node_name(node),
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
        self.carry_out(|s| {
            s.engine.pin(NodeId(node as u32), w, s.now);
            s.counters.defragmented += 1;
            s.counters.moved_jobs += jobs.len() as u64;
            let why = format!(
                "defragmentation: {} is emptied for job {w}; checkpoint and move",
                s.node_name(node)
            );
            s.move_jobs(&jobs, &why)?;
            s.record(
                "fleet",
                format!(
                    "defragment {}: {} job(s) checkpoint and move so job {w} gets the node instead of one bought for it",
                    s.node_name(node),
                    jobs.len()
                ),
            )
        });
    }
}
