//! Jobs on real hosts: a `Runner` per pool of a real backend (this host, SSH hosts). Starting
//! each node's part of a placement, what the hosts report (started, exited, reachable or not,
//! GPU samples), re-adoption when a host answers again (after a disconnect, an agent crash or
//! a daemon restart), and hosts lost past their pool's timeout. The journal keeps each run
//! (its token and placement) until its end is recorded; only then may the host forget it, so
//! an exit is recorded once however the link behaves. Nothing here knows which backend a
//! pool is: that is the runner's business.

use super::State;
use crate::api::Action;
use crate::backend::logs::LogSource;
use crate::backend::{Exit, Gang, RunEvent, Runner};
use crate::config::fleet::FleetConfig;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::model::{Life, NodeId};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A job handed to a backend: its run's token and each node's part, rank order.
pub(super) struct HostRun {
    pub token: String,
    pub parts: Vec<Part>,
    /// Journaled for re-adoption (a real backend's run; the simulated fleet's end with the
    /// daemon).
    pub journaled: bool,
}

pub(super) struct Part {
    /// The fleet node.
    pub node: usize,
    pub state: PartState,
    /// When it was asked to start (daemon time).
    pub since: f64,
    /// Its process group there, once the host said.
    pub pgid: Option<u32>,
    /// Why the backend's scheduler holds it back, while it does (a Slurm job pending).
    pub waits: Option<String>,
    /// What the backend calls it (`pod NS/NAME`, `Slurm job 123`), once it said.
    pub handle: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum PartState {
    Starting,
    Running,
    Exited(Exit),
}

/// The real backends' side of the state.
#[derive(Default)]
pub(super) struct Hosts {
    /// One runner per pool.
    pub runners: Vec<Box<dyn Runner>>,
    /// Per pool: its runner is a model (`Runner::simulated`).
    pub simulated: Vec<bool>,
    /// The real hosts' nodes, lowest first.
    real: Vec<usize>,
    /// Fleet node → (pool, host index within the pool).
    pub at: HashMap<usize, (usize, usize)>,
    /// Per pool, its hosts' fleet nodes in host order (the reverse of `at`).
    pool_nodes: Vec<Vec<usize>>,
    pub runs: BTreeMap<JobId, HostRun>,
    /// Unreachable nodes: since when (daemon time) and the last reason said.
    pub down: HashMap<usize, (f64, String)>,
    /// Nodes unreachable past their timeout (their jobs were requeued).
    pub lost: std::collections::HashSet<usize>,
    /// Nodes their backend's scheduler takes no new work on (a drained Slurm node), and why.
    pub cordoned: HashMap<usize, String>,
    /// Where recently ended jobs ran (for their logs), at most `RAN_ON_KEPT`.
    pub ran_on: HashMap<JobId, Vec<usize>>,
    ran_on_order: VecDeque<JobId>,
    /// Per pool: how long a host may stay unreachable before it is lost, seconds.
    pub lost_after: Vec<f64>,
    /// What each real host calls itself (its agent's hello): DCGM's `Hostname`.
    pub hostnames: HashMap<usize, String>,
    /// Per node, the GPUs held for its backend's own work (a Slurm cluster's jobs) and that
    /// work, as last said.
    pub foreign: HashMap<usize, super::foreign::Held>,
    /// Restarts of jobs whose own process failed (`state::recovery`).
    pub restarts: super::recovery::Restarts,
    /// Work its users asked gantry to place that could not be queued (said once each).
    pub wanted_refused: std::collections::HashSet<String>,
    /// Per pool: the work its backend's own users queued for its nodes that waits there, as
    /// last said.
    pub queues: HashMap<usize, Vec<crate::backend::ForeignWaiting>>,
    /// Per node, the IP addresses its agent said it has (first: where the daemon reached it).
    pub addresses: HashMap<usize, Vec<String>>,
    /// Per node, its CPUs, memory and disk as its agent last measured them, and when.
    pub usage: HashMap<usize, (f64, crate::backend::host_usage::HostUsage)>,
}

/// How many ended jobs keep where they ran (their logs stay on the hosts).
const RAN_ON_KEPT: usize = 1000;

/// How long a part may wait for its host to confirm the start once the host is up.
pub(super) const START_TIMEOUT_S: f64 = 120.0;

impl Hosts {
    /// A runner for each pool of the fleet file; nodes of `fleet` mapped to their hosts.
    pub fn open(
        cfg: &FleetConfig,
        fleet: &crate::model::Fleet,
        opening: &crate::backend::Opening,
    ) -> Result<Hosts, crate::backend::error::OpenError> {
        let mut r = Hosts {
            lost_after: cfg.pools.iter().map(|p| p.lost_after_s()).collect(),
            ..Hosts::default()
        };
        r.pool_nodes = vec![Vec::new(); cfg.pools.len()];
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = n.pool.index();
            r.at.insert(i, (pool, r.pool_nodes[pool].len()));
            r.pool_nodes[pool].push(i);
        }
        for (i, p) in cfg.pools.iter().enumerate() {
            let names = r.pool_nodes[i]
                .iter()
                .map(|&n| fleet.nodes[n].name.clone())
                .collect();
            let runner = crate::backend::runner_for(p, i, names, opening)?;
            r.simulated.push(runner.simulated());
            r.runners.push(runner);
        }
        r.real = (0..fleet.nodes.len()).filter(|&n| r.is_real(n)).collect();
        Ok(r)
    }

    /// Forgets a run, remembering where it ran.
    pub(super) fn remove(&mut self, id: JobId) {
        if let Some(r) = self.runs.remove(&id) {
            self.ran_on
                .insert(id, r.parts.iter().map(|p| p.node).collect());
            self.ran_on_order.push_back(id);
            while self.ran_on_order.len() > RAN_ON_KEPT {
                if let Some(old) = self.ran_on_order.pop_front() {
                    self.ran_on.remove(&old);
                }
            }
        }
    }

    fn runner(&mut self, node: usize) -> Option<(&mut Box<dyn Runner>, usize)> {
        let &(pool, host) = self.at.get(&node)?;
        Some((&mut self.runners[pool], host))
    }

    /// Whether `node` is a real machine: its telemetry is measured or unknown, never
    /// modelled, and its runs are journaled.
    pub fn is_real(&self, node: usize) -> bool {
        self.at
            .get(&node)
            .is_some_and(|&(pool, _)| !self.simulated[pool])
    }

    /// The real hosts, lowest node first.
    pub fn real_nodes(&self) -> &[usize] {
        &self.real
    }

    /// The first real host (the lowest node).
    pub fn first_node(&self) -> Option<usize> {
        self.real.first().copied()
    }

    /// What the runner of `node`'s pool files its events under.
    pub fn kind(&self, node: usize) -> &'static str {
        self.at
            .get(&node)
            .map_or("host", |&(pool, _)| self.runners[pool].kind())
    }

    /// Sends `f` to the runner of every part of a run.
    pub(super) fn each_part(
        &mut self,
        id: JobId,
        mut f: impl FnMut(&mut Box<dyn Runner>, usize, &str),
    ) {
        let Some(run) = self.runs.get(&id) else {
            return;
        };
        let token = run.token.clone();
        let nodes: Vec<usize> = run.parts.iter().map(|p| p.node).collect();
        for node in nodes {
            if let Some((runner, host)) = self.runner(node) {
                f(runner, host, &token);
            }
        }
    }
}

impl State {
    /// Whether node `i` is a real machine (a real backend's host): its telemetry is measured
    /// or unknown, never modelled.
    pub(super) fn is_real_host(&self, i: usize) -> bool {
        self.hosts.is_real(i)
    }

    /// Starts every node's part of a placed job through its pool's runner: the same run
    /// token, each node its rank, the addresses of all (head first) and the IDs of its GPUs
    /// there.
    pub(super) fn launch(&mut self, id: JobId) -> Result<(), EngineError> {
        let Some(j) = self.engine.job(id) else {
            return Ok(());
        };
        let Some(p) = j.placement.clone() else {
            return Ok(());
        };
        let spec = j.spec.clone();
        let name = j.name.clone();
        let owner = j.user.clone();
        let real = p.nodes.iter().any(|g| self.is_real_host(g.node.index()));
        // A GPU job on a host whose NVML has not answered yet waits (see `observe_node`).
        let waiting = p.nodes.iter().find(|g| {
            !g.gpus.is_empty()
                && self
                    .measured
                    .get(&g.node.index())
                    .is_some_and(|t| t.sampled_at.is_none() && t.unavailable.is_none())
        });
        if let Some(g) = waiting {
            let name = self.node_name(g.node.index());
            self.engine.lost(
                id,
                self.now,
                &format!("waiting for NVML's first sample of {name}"),
            )?;
            return Ok(());
        }
        let ips: Vec<String> = p
            .nodes
            .iter()
            .map(|g| self.host_address(g.node.index()))
            .collect();
        let gpus: Result<Vec<Vec<String>>, String> = p
            .nodes
            .iter()
            .map(|g| self.gpu_ids(g.node.index(), &g.gpus))
            .collect();
        let launch = gpus.and_then(|gpus| {
            if real && spec.run.is_none() {
                return Err("the spec has no `run` command to start".to_string());
            }
            super::launch::launch_of(id, name, owner, &spec).map(|l| (l, gpus))
        });
        let (launch, gpus) = match launch {
            Ok(l) => l,
            Err(why) => {
                let why = format!("could not start: {why}");
                self.engine.finished_because(id, false, self.now, &why)?;
                self.log(format!("job {id} {why}"));
                return Ok(());
            }
        };
        let record = crate::daemon::journal::RemoteRunRecord {
            job: id,
            token: launch.token.clone(),
            placement: serde_json::to_string(&p).unwrap_or_default(),
            started_at: self.now,
            nodes: Some(
                p.nodes
                    .iter()
                    .map(|g| self.node_name(g.node.index()))
                    .collect(),
            ),
        };
        if real {
            self.engine.add_remote_run(&record)?;
        }
        let mut parts = Vec::new();
        for ((rank, g), ids) in p.nodes.iter().enumerate().zip(gpus) {
            let node = g.node.index();
            let mig: Vec<String> = ids
                .iter()
                .filter(|u| u.starts_with("MIG-"))
                .cloned()
                .collect();
            if !mig.is_empty() {
                self.measured
                    .entry(node)
                    .or_default()
                    .assigned
                    .insert(id, mig);
            }
            let mut l = launch.clone();
            l.gpus = ids;
            if l.image.is_some() {
                let pool = self.engine.fleet().nodes[node].pool.index();
                l.runtime = self.nodes.pools[pool].container_runtime.clone();
            }
            l.gang = Gang {
                rank: rank as u16,
                ips: ips.clone(),
            };
            if let Some((runner, host)) = self.hosts.runner(node) {
                runner.start(host, l);
            }
            parts.push(Part {
                node,
                state: PartState::Starting,
                waits: None,
                since: self.now,
                pgid: None,
                handle: None,
            });
        }
        let hosts: Vec<String> = parts.iter().map(|p| self.node_name(p.node)).collect();
        self.hosts.runs.insert(
            id,
            HostRun {
                token: launch.token,
                parts,
                journaled: real,
            },
        );
        if real {
            self.log(format!("job {id} starting on {}", hosts.join(", ")));
        }
        Ok(())
    }

    /// The address the other nodes of a job reach `node` at.
    /// Where a gang's peers reach `node`: the first address its agent said it has (an IP),
    /// else what its backend reaches it by (an ssh destination, a node name).
    pub(super) fn host_address(&self, node: usize) -> String {
        if let Some(ip) = self.hosts.addresses.get(&node).and_then(|a| a.first()) {
            return ip.clone();
        }
        let at = self.hosts.at.get(&node).copied();
        at.map(|(pool, host)| self.hosts.runners[pool].address(host))
            .unwrap_or_else(|| self.node_name(node))
    }

    /// The spec's stop signal to every part; SIGKILL after the grace (the spec's, unless
    /// `grace` says otherwise). Their exits requeue it.
    pub(super) fn stop_on_hosts(&mut self, id: JobId, grace: Option<f64>) -> bool {
        if !self.hosts.runs.contains_key(&id) {
            return false;
        }
        let grace = grace.unwrap_or_else(|| self.grace_of(id));
        let signal = self
            .engine
            .job(id)
            .and_then(|j| j.spec.checkpoint.as_ref())
            .map_or("SIGTERM".to_string(), |c| c.signal.0.clone());
        self.hosts
            .each_part(id, |r, host, token| r.stop(host, id, token, &signal, grace));
        true
    }

    /// Kills every part at once and forgets the run (a cancel, or the rest of a gang).
    pub(super) fn kill_on_hosts(&mut self, id: JobId) -> Result<(), EngineError> {
        if let Some(run) = self.hosts.runs.get(&id) {
            let journaled = run.journaled;
            self.hosts.each_part(id, |r, host, token| {
                r.kill(host, id, token);
                r.forget(host, id, token);
            });
            self.hosts.remove(id);
            if journaled {
                self.engine.remove_remote_run(id)?;
            }
        }
        Ok(())
    }

    /// What the remote backends reported since the last poll, then hosts past their timeout.
    pub(super) fn poll_hosts(&mut self) -> Result<(), EngineError> {
        let mut events = Vec::new();
        let now = self.now;
        for (pool, r) in self.hosts.runners.iter_mut().enumerate() {
            events.extend(r.poll(now).into_iter().map(|e| (pool, e)));
        }
        // What a refresh says of many nodes at once is written in one commit.
        let batch = events.len() > 1;
        if batch {
            self.engine.begin_batch()?;
        }
        let mut done = Ok(());
        for (pool, e) in events {
            done = self.on_host_event(pool, e);
            if done.is_err() {
                break;
            }
        }
        if batch {
            // What was done is kept whether or not an event failed: the state in memory has
            // it.
            self.engine.end_batch()?;
        }
        done?;
        self.top_up_foreign();
        self.lose_unreachable()
    }

    pub(super) fn node_of(&self, pool: usize, host: usize) -> Option<usize> {
        self.hosts.pool_nodes.get(pool)?.get(host).copied()
    }

    /// The part of run `id` on `node` if `token` is the run's.
    pub(super) fn part_mut(&mut self, id: JobId, token: &str, node: usize) -> Option<&mut Part> {
        let run = self.hosts.runs.get_mut(&id)?;
        if run.token != token {
            return None;
        }
        run.parts.iter_mut().find(|p| p.node == node)
    }

    fn on_host_event(&mut self, pool: usize, e: RunEvent) -> Result<(), EngineError> {
        let e = match e {
            RunEvent::Wanted { work } => return self.wanted(pool, work),
            RunEvent::Queue { waiting } => {
                if waiting.is_empty() {
                    self.hosts.queues.remove(&pool);
                } else {
                    self.hosts.queues.insert(pool, waiting);
                }
                return Ok(());
            }
            e => e,
        };
        let host = match &e {
            // Of the pool, not of a host: handled above.
            RunEvent::Wanted { .. } | RunEvent::Queue { .. } => return Ok(()),
            RunEvent::Started { host, .. }
            | RunEvent::StartFailed { host, .. }
            | RunEvent::Vanished { host, .. }
            | RunEvent::Exited { host, .. }
            | RunEvent::Up { host, .. }
            | RunEvent::Down { host, .. }
            | RunEvent::Notice { host, .. }
            | RunEvent::Sample { host, .. }
            | RunEvent::Usage { host, .. }
            | RunEvent::Foreign { host, .. }
            | RunEvent::Failed { host, .. }
            | RunEvent::Waits { host, .. }
            | RunEvent::Cordon { host, .. } => *host,
        };
        let Some(node) = self.node_of(pool, host) else {
            return Ok(());
        };
        let name = self.node_name(node);
        match e {
            RunEvent::Started {
                job,
                token,
                pgid,
                handle,
                ..
            } => {
                let now = self.now;
                match self.part_mut(job, &token, node) {
                    Some(p) => {
                        p.state = PartState::Running;
                        p.since = now;
                        p.pgid = pgid;
                        p.waits = None;
                        p.handle = handle.clone();
                        self.log(match (pgid, handle) {
                            (Some(pgid), _) => {
                                format!("job {job} started on {name} as process group {pgid}")
                            }
                            (None, Some(h)) => format!("job {job} started on {name} as {h}"),
                            (None, None) => format!("job {job} started on {name}"),
                        });
                    }
                    None => self.stray(pool, host, job, &token, &name)?,
                }
            }
            RunEvent::StartFailed {
                job, token, why, ..
            } => {
                if self.part_mut(job, &token, node).is_some() {
                    self.kill_on_hosts(job)?;
                    let why = format!("could not start on {name}: {why}");
                    if self.engine.job(job).is_some_and(|j| !j.state.is_final()) {
                        self.engine.finished_because(job, false, self.now, &why)?;
                        self.log(format!("job {job} {why}"));
                    } else {
                        self.record_job(job, self.hosts.kind(node), why)?;
                    }
                }
            }
            // Work a backend's user gave gantry (a pod) that is gone by the time it is placed
            // — deleted between its run's end and the next start, which a run's end triggers
            // at once — goes as it would have before it was placed.
            RunEvent::Vanished {
                job, token, what, ..
            } => {
                if self.part_mut(job, &token, node).is_some() {
                    self.kill_on_hosts(job)?;
                    if self.engine.job(job).is_some_and(|j| !j.state.is_final()) {
                        self.act(job, Action::Cancel, &format!("{what} going away"))?;
                        return self.record_job(
                            job,
                            self.hosts.kind(node),
                            format!("cancelled: {what} went away before it could be placed again"),
                        );
                    }
                }
            }
            RunEvent::Exited {
                job,
                token,
                exit,
                at,
                ..
            } => match self.part_mut(job, &token, node) {
                Some(p) => {
                    p.state = PartState::Exited(exit);
                    // Recorded at the exit's own time where the backend knows it.
                    let now = self.now;
                    self.now = at.map_or(now, |t| t.min(now));
                    let settled = self.settle(job, node, exit);
                    self.now = now;
                    settled?;
                }
                None => {
                    // An exit already recorded (reported again after a reconnect), or a run
                    // the daemon gave up on: the host may forget it.
                    self.hosts.runners[pool].forget(host, job, &token);
                }
            },
            RunEvent::Up { info, .. } => {
                self.host_up(pool, host, node, info)?;
                if self.hosts.cordoned.contains_key(&node) {
                    self.engine
                        .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                }
            }
            RunEvent::Cordon { why, .. } => self.cordon(node, &name, why)?,
            RunEvent::Waits {
                job, token, why, ..
            } => {
                if let Some(p) = self.part_mut(job, &token, node) {
                    let said = why.clone().filter(|w| p.waits.as_ref() != Some(w));
                    p.waits = why;
                    if let Some(why) = said {
                        let kind = self.hosts.kind(node);
                        self.record_job(job, kind, format!("waits on {name}: {why}"))?;
                    }
                }
            }
            RunEvent::Wanted { .. } | RunEvent::Queue { .. } => {}
            RunEvent::Sample { found, groups, .. } => {
                // Only the runs the daemon has there count as gantry's; anything else on a
                // GPU is foreign to it.
                let groups: HashMap<u32, JobId> = groups
                    .into_iter()
                    .filter(|(_, job)| {
                        self.hosts
                            .runs
                            .get(job)
                            .is_some_and(|r| r.parts.iter().any(|p| p.node == node))
                    })
                    .collect();
                self.observe_node(node, found, &groups)?;
            }
            RunEvent::Usage { usage, .. } => {
                self.hosts.usage.insert(node, (self.now, usage));
            }
            RunEvent::Foreign { work, .. } => self.foreign_work(node, work)?,
            RunEvent::Failed { why, .. } => {
                self.record(self.hosts.kind(node), format!("{name}: {why}"))?
            }
            RunEvent::Notice {
                what,
                gone_in_s: Some(gone_in_s),
                ..
            } => self.spot_noticed(node, gone_in_s, &what)?,
            RunEvent::Notice { what, .. } => {
                self.record(self.hosts.kind(node), format!("{name}: {what}"))?
            }
            RunEvent::Down { why, .. } => {
                let now = self.now;
                let said = self.hosts.down.get(&node).map(|(_, w)| w.clone());
                if said.as_deref() != Some(why.as_str()) {
                    let since = self.hosts.down.get(&node).map_or(now, |d| d.0);
                    self.hosts.down.insert(node, (since, why.clone()));
                    let mut line = format!("host {name} unreachable: {why}");
                    if said.is_none() && self.nodes.lives[node] == Life::Up {
                        // Its jobs keep running until it is lost; nothing new is placed there
                        // (a gang never waits on a host it cannot reach).
                        self.engine
                            .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                        line.push_str("; no new jobs go there until it answers");
                    }
                    self.record(self.hosts.kind(node), line)?;
                }
            }
        }
        Ok(())
    }

    /// The backend's scheduler stops (`Some`) or resumes (`None`) taking new work on `node`:
    /// gantry places nothing there meanwhile; its jobs there keep running.
    fn cordon(&mut self, node: usize, name: &str, why: Option<String>) -> Result<(), EngineError> {
        let kind = self.hosts.kind(node);
        match why {
            Some(why) => {
                if self.hosts.cordoned.get(&node) == Some(&why) {
                    return Ok(());
                }
                self.hosts.cordoned.insert(node, why.clone());
                self.engine
                    .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                self.record(
                    kind,
                    format!(
                        "host {name} cordoned: {why}; its jobs keep running, no new jobs go there"
                    ),
                )
            }
            None => {
                if self.hosts.cordoned.remove(&node).is_none() {
                    return Ok(());
                }
                // Unreachable or gone, it stays out until it is back.
                if !self.hosts.down.contains_key(&node) && self.nodes.lives[node] == Life::Up {
                    self.engine
                        .set_health(NodeId(node as u32), crate::model::Health::Healthy);
                }
                self.record(kind, format!("host {name} takes new jobs again"))
            }
        }
    }

    /// Where a job's logs are: one source per node, rank order (`None`: the job did not run
    /// on a real host lately, nor does a host keep its logs where the daemon can see them
    /// without asking over a network).
    pub(super) fn log_sources(&self, id: JobId) -> Option<Vec<LogSource>> {
        let nodes: Vec<usize> = match (self.hosts.runs.get(&id), self.hosts.ran_on.get(&id)) {
            (Some(r), _) => r.parts.iter().map(|p| p.node).collect(),
            (None, Some(nodes)) => nodes.clone(),
            // Ended before this daemon started: where a backend still keeps its logs.
            (None, None) => {
                let mut nodes: Vec<usize> = (0..self.hosts.runners.len())
                    .flat_map(|pool| {
                        let hosts = self.hosts.runners[pool].logs_of(id);
                        hosts
                            .into_iter()
                            .filter_map(move |h| self.hosts.pool_nodes[pool].get(h).copied())
                    })
                    .collect();
                nodes.dedup();
                if nodes.is_empty() {
                    return None;
                }
                nodes
            }
        };
        self.sources_on(nodes)
    }

    /// Where the logs of a job that ran on `nodes` (rank order) are read; `None` where none
    /// of them is a real host (the simulated fleet runs no processes).
    pub(super) fn sources_on(&self, nodes: Vec<usize>) -> Option<Vec<LogSource>> {
        if !nodes.iter().any(|&n| self.is_real_host(n)) {
            return None;
        }
        let sources = nodes
            .into_iter()
            .enumerate()
            .filter_map(|(rank, node)| {
                let &(pool, host) = self.hosts.at.get(&node)?;
                let reader = self.hosts.runners[pool].logs();
                Some(LogSource {
                    rank,
                    node: self.node_name(node),
                    reader,
                    host,
                })
            })
            .collect();
        Some(sources)
    }
}

impl State {
    /// The process group a job's first node runs it in, once its host said.
    pub fn process_group(&self, id: JobId) -> Option<u32> {
        self.hosts.runs.get(&id)?.parts.first()?.pgid
    }

    /// Real hosts answering now, and all of them.
    pub fn hosts_up(&self) -> (usize, usize) {
        let all = self.hosts.real_nodes().len();
        (all - self.hosts.down.len(), all)
    }

    /// Jobs on real hosts whose every part the hosts confirmed running.
    pub fn runs_confirmed(&self) -> usize {
        self.hosts
            .runs
            .values()
            .filter(|r| r.journaled && r.parts.iter().all(|p| p.state == PartState::Running))
            .count()
    }
}
