//! Jobs on real hosts: a `Runner` per pool of a real backend (this host, SSH hosts). Starting
//! each node's part of a placement, what the hosts report (started, exited, reachable or not,
//! GPU samples), re-adoption when a host answers again (after a disconnect, an agent crash or
//! a daemon restart), and hosts lost past their pool's timeout. The journal keeps each run
//! (its token and placement) until its end is recorded; only then may the host forget it, so
//! an exit is recorded once however the link behaves. Nothing here knows which backend a
//! pool is: that is the runner's business.

mod ends;
mod enter;
pub use enter::{Entering, STARTING};
mod foreign;
pub(super) use foreign::Held;
mod launch;
pub(super) mod legacy;
mod links;
pub(super) use links::{Answering, Rediscovery};
mod recovery;
mod wanted;
pub(super) use wanted::wanted;

use super::cx::Cx;
use crate::backend::logs::LogSource;
use crate::backend::{Exit, RunEvent, Runner};
use crate::config::fleet::FleetConfig;
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::journal::JobId;
use crate::model::{Life, NodeId};
use std::collections::{BTreeMap, HashMap, VecDeque};

/// A job handed to a backend: its run's token and each node's part, rank order.
struct HostRun {
    pub token: String,
    pub parts: Vec<Part>,
    /// Journaled for re-adoption (a real backend's run; the simulated fleet's end with the
    /// daemon).
    pub journaled: bool,
}

struct Part {
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
enum PartState {
    Starting,
    Running,
    Exited(Exit),
}

/// The real backends' side of the state.
#[derive(Default)]
pub(super) struct Runs {
    /// One runner per pool.
    runners: Vec<Box<dyn Runner>>,
    /// Per pool: its runner is a model (`Runner::simulated`).
    simulated: Vec<bool>,
    /// The real hosts' nodes, lowest first.
    real: Vec<usize>,
    /// Fleet node → (pool, host index within the pool).
    at: HashMap<usize, (usize, usize)>,
    /// Per pool, its hosts' fleet nodes in host order (the reverse of `at`).
    pool_nodes: Vec<Vec<usize>>,
    by_job: BTreeMap<JobId, HostRun>,
    /// Unreachable nodes: since when (daemon time) and the last reason said.
    down: HashMap<usize, (f64, String)>,
    /// Nodes unreachable past their timeout (their jobs were requeued).
    lost: std::collections::HashSet<usize>,
    /// Nodes their backend's scheduler takes no new work on (a drained Slurm node), and why.
    cordoned: HashMap<usize, String>,
    /// Where recently ended jobs ran (for their logs), at most `RAN_ON_KEPT`.
    ran_on: HashMap<JobId, Vec<usize>>,
    ran_on_order: VecDeque<JobId>,
    /// Per pool: how long a host may stay unreachable before it is lost, seconds.
    lost_after: Vec<f64>,
    /// What each real host calls itself (its agent's hello): DCGM's `Hostname`.
    hostnames: HashMap<usize, String>,
    /// Per node, the GPUs held for its backend's own work (a Slurm cluster's jobs) and that
    /// work, as last said.
    foreign: HashMap<usize, foreign::Held>,
    /// Restarts of jobs whose own process failed (`state::recovery`).
    restarts: recovery::Restarts,
    /// Work its users asked gantry to place that could not be queued (said once each).
    wanted_refused: std::collections::HashSet<String>,
    /// Per pool: the work its backend's own users queued for its nodes that waits there, as
    /// last said.
    queues: HashMap<usize, Vec<crate::backend::ForeignWaiting>>,
    /// Per node, the IP addresses its agent said it has (first: where the daemon reached it).
    addresses: HashMap<usize, Vec<String>>,
    /// Per node, its CPUs, memory and disk as its agent last measured them, and when.
    usage: HashMap<usize, (f64, crate::backend::host_usage::HostUsage)>,
}

/// How many ended jobs keep where they ran (their logs stay on the hosts).
const RAN_ON_KEPT: usize = 1000;

/// How long a part may wait for its host to confirm the start once the host is up.
pub(super) const START_TIMEOUT_S: f64 = 120.0;

impl Runs {
    /// A runner for each pool of the fleet file; nodes of `fleet` mapped to their hosts.
    pub fn open(
        cfg: &FleetConfig,
        fleet: &crate::model::Fleet,
        opening: &crate::backend::Opening,
    ) -> Result<Runs, crate::backend::error::OpenError> {
        let mut r = Runs {
            lost_after: cfg.pools.iter().map(|p| p.lost_after_s()).collect(),
            ..Runs::default()
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
        if let Some(r) = self.by_job.remove(&id) {
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

    /// Node `node`'s pool and its host's index there (a node of no pool: `(0, 0)`).
    pub(super) fn slot(&self, node: usize) -> (usize, usize) {
        self.at.get(&node).copied().unwrap_or_default()
    }

    /// Whether pool `pool`'s runner is a model (the simulated backend).
    pub(super) fn is_simulated(&self, pool: usize) -> bool {
        self.simulated[pool]
    }

    /// Whether any pool is simulated.
    pub(super) fn any_simulated(&self) -> bool {
        self.simulated.iter().any(|&s| s)
    }

    /// Whether any pool runs processes on the daemon's own host.
    pub(super) fn on_daemon_host(&self) -> bool {
        self.runners.iter().any(|r| r.on_daemon_host())
    }

    /// Why node `node` cannot be reached, while it cannot.
    pub(super) fn unreachable(&self, node: usize) -> Option<&str> {
        self.down.get(&node).map(|(_, why)| why.as_str())
    }

    /// Why node `node`'s backend takes no new work on it, while it does not.
    pub(super) fn cordoned(&self, node: usize) -> Option<&str> {
        self.cordoned.get(&node).map(String::as_str)
    }

    /// The GPUs of node `node` held for its backend's own work, and that work.
    pub(super) fn held_foreign(&self, node: usize) -> Option<&Held> {
        self.foreign.get(&node)
    }

    /// Restarts of job `id` this daemon counted.
    pub(super) fn restarts(&self, id: JobId) -> u32 {
        self.restarts.count(id)
    }

    /// Why the backend's scheduler holds job `id` back (a Slurm job pending), while it does.
    pub(super) fn held_back(&self, id: JobId) -> Option<&str> {
        self.by_job
            .get(&id)
            .and_then(|r| r.parts.iter().find_map(|p| p.waits.as_deref()))
    }

    /// What the backend calls job `id`'s part on node `node` (`Slurm job 123`), once it said.
    pub(super) fn handle_on(&self, id: JobId, node: usize) -> Option<String> {
        self.by_job
            .get(&id)
            .and_then(|r| r.parts.iter().find(|p| p.node == node))
            .and_then(|p| p.handle.clone())
    }

    /// Whether job `id` has a part on node `node`.
    pub(super) fn has_part_on(&self, id: JobId, node: usize) -> bool {
        self.by_job
            .get(&id)
            .is_some_and(|r| r.parts.iter().any(|p| p.node == node))
    }

    /// The jobs whose runs are journaled (real backends'), in id order.
    pub(super) fn journaled(&self) -> impl Iterator<Item = JobId> + '_ {
        self.by_job
            .iter()
            .filter(|(_, r)| r.journaled)
            .map(|(&id, _)| id)
    }

    /// Every job with a run, and the nodes of its parts.
    pub(super) fn nodes_of_runs(&self) -> impl Iterator<Item = (JobId, Vec<usize>)> + '_ {
        self.by_job
            .iter()
            .map(|(&id, r)| (id, r.parts.iter().map(|p| p.node).collect()))
    }

    /// One GPU of job `id` at time `t` as its backend models it (the simulated one).
    pub(super) fn modelled_gpu(
        &self,
        id: JobId,
        key: u32,
        started: f64,
        t: f64,
    ) -> Option<crate::backend::Modelled> {
        let run = self.by_job.get(&id)?;
        let &(pool, _) = run.parts.first().and_then(|p| self.at.get(&p.node))?;
        self.runners[pool].modelled_gpu(id, key, started, t)
    }

    /// What pool `pool`'s backend's own users queued for its nodes, as last said.
    pub(super) fn queue(&self, pool: usize) -> Vec<crate::backend::ForeignWaiting> {
        self.queues.get(&pool).cloned().unwrap_or_default()
    }

    /// Node `node`'s CPUs, memory and disk as its agent measured them within `fresh_s` of
    /// `now`.
    pub(super) fn usage(
        &self,
        node: usize,
        now: f64,
        fresh_s: f64,
    ) -> Option<crate::backend::host_usage::HostUsage> {
        self.usage
            .get(&node)
            .filter(|(at, _)| now - at <= fresh_s)
            .map(|(_, u)| u.clone())
    }

    /// What node `node`'s host calls itself (its agent's hello), once it said.
    pub(super) fn hostname(&self, node: usize) -> Option<&str> {
        self.hostnames.get(&node).map(String::as_str)
    }

    /// Whether node `node` is a host of some pool's runner.
    pub(super) fn is_host(&self, node: usize) -> bool {
        self.at.contains_key(&node)
    }

    /// The process groups of gantry's runs on node `node`, by job (as the host said).
    pub(super) fn groups_on(&self, node: usize) -> HashMap<u32, JobId> {
        self.by_job
            .iter()
            .flat_map(|(&id, r)| {
                r.parts
                    .iter()
                    .filter(|p| p.node == node)
                    .filter_map(move |p| Some((p.pgid?, id)))
            })
            .collect()
    }

    /// Where job `id`'s first part runs, as the daemon reaches it, while it runs: the
    /// backend's address for the host (this host is 127.0.0.1, an SSH host its destination),
    /// else what the host said, else `None`.
    pub(super) fn running_at(&self, id: JobId) -> Option<(usize, Option<String>)> {
        let part = self.by_job.get(&id)?.parts.first()?;
        matches!(part.state, PartState::Running).then(|| {
            let said = self
                .at
                .get(&part.node)
                .map(|&(pool, host)| self.runners[pool].address(host))
                .filter(|a| !a.is_empty());
            (part.node, said)
        })
    }

    /// Releases the jobs whose restart backoff is over.
    pub(super) fn release_restarts(&mut self, cx: &mut super::Cx) -> Result<(), EngineError> {
        self.restarts.release_due(cx)
    }

    /// At open: jobs held for a restart backoff when the daemon stopped are released when it
    /// is over.
    pub(super) fn resume_restarts(&mut self, cx: &mut super::Cx) -> Result<(), EngineError> {
        self.restarts.resume(cx)
    }

    /// A run recovered from the journal at open (its token, its nodes in rank order), taken
    /// to be running on its hosts until they say otherwise.
    pub(super) fn adopt(&mut self, id: JobId, token: String, nodes: &[usize], now: f64) {
        let parts = nodes
            .iter()
            .map(|&node| Part {
                node,
                state: PartState::Running,
                since: now,
                pgid: None,
                waits: None,
                handle: None,
            })
            .collect();
        let run = HostRun {
            token,
            parts,
            journaled: true,
        };
        self.by_job.insert(id, run);
    }

    /// A bought machine is connecting: unreachable until its agent answers.
    pub(super) fn connecting(&mut self, node: usize, now: f64) {
        self.down.insert(node, (now, "connecting".to_string()));
    }

    /// A bought machine was made: its pool's runner reaches for it at `entry`.
    pub(super) fn attach(&mut self, node: usize, entry: &str) -> Result<(), String> {
        let (pool, host) = self.slot(node);
        self.runners[pool].attach(host, entry)
    }

    /// A bought machine is gone: its runner stops reaching for it, and what its link said
    /// goes with it.
    pub(super) fn machine_gone(&mut self, node: usize) {
        let (pool, host) = self.slot(node);
        self.runners[pool].detach(host);
        self.hostnames.remove(&node);
        self.down.remove(&node);
        self.lost.remove(&node);
    }

    /// The address the other nodes of a job reach `node` at.
    /// Where a gang's peers reach `node`: the first address its agent said it has (an IP),
    /// else what its backend reaches it by (an ssh destination, a node name).
    pub(super) fn host_address(&self, fleet: &crate::model::Fleet, node: usize) -> String {
        if let Some(ip) = self.addresses.get(&node).and_then(|a| a.first()) {
            return ip.clone();
        }
        let at = self.at.get(&node).copied();
        at.map(|(pool, host)| self.runners[pool].address(host))
            .unwrap_or_else(|| fleet.nodes[node].name.clone())
    }

    /// The spec's stop signal to every part; SIGKILL after the grace (the spec's, unless
    /// `grace` says otherwise). Their exits requeue it.
    pub(super) fn stop(&mut self, engine: &Engine, id: JobId, grace: Option<f64>) -> bool {
        if !self.by_job.contains_key(&id) {
            return false;
        }
        let grace = grace.unwrap_or_else(|| grace_of(engine, id));
        let signal = engine
            .job(id)
            .and_then(|j| j.spec.checkpoint.as_ref())
            .map_or("SIGTERM".to_string(), |c| c.signal.0.clone());
        self.each_part(id, |r, host, token| r.stop(host, id, token, &signal, grace));
        true
    }

    /// Kills every part at once and forgets the run (a cancel, or the rest of a gang).
    pub(super) fn kill(&mut self, engine: &mut Engine, id: JobId) -> Result<(), EngineError> {
        if let Some(run) = self.by_job.get(&id) {
            let journaled = run.journaled;
            self.each_part(id, |r, host, token| {
                r.kill(host, id, token);
                r.forget(host, id, token);
            });
            self.remove(id);
            if journaled {
                engine.remove_remote_run(id)?;
            }
        }
        Ok(())
    }

    pub(super) fn node_of(&self, pool: usize, host: usize) -> Option<usize> {
        self.pool_nodes.get(pool)?.get(host).copied()
    }

    /// The part of run `id` on `node` if `token` is the run's.
    /// Whether run `token` of job `id` has a part on node `node` (a report of another run is
    /// a stray's).
    pub(super) fn has_run_part(&self, id: JobId, token: &str, node: usize) -> bool {
        self.by_job
            .get(&id)
            .is_some_and(|r| r.token == token && r.parts.iter().any(|p| p.node == node))
    }

    fn part_mut(&mut self, id: JobId, token: &str, node: usize) -> Option<&mut Part> {
        let run = self.by_job.get_mut(&id)?;
        if run.token != token {
            return None;
        }
        run.parts.iter_mut().find(|p| p.node == node)
    }

    /// The backend's scheduler stops (`Some`) or resumes (`None`) taking new work on `node`:
    /// gantry places nothing there meanwhile; its jobs there keep running.
    fn cordon(
        &mut self,
        (cx, nodes): (&mut Cx, &super::nodes::Nodes),
        node: usize,
        name: &str,
        why: Option<String>,
    ) -> Result<(), EngineError> {
        let kind = self.kind(node);
        match why {
            Some(why) => {
                if self.cordoned.get(&node) == Some(&why) {
                    return Ok(());
                }
                self.cordoned.insert(node, why.clone());
                cx.engine
                    .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                cx.record(
                    kind,
                    format!(
                        "host {name} cordoned: {why}; its jobs keep running, no new jobs go there"
                    ),
                )
            }
            None => {
                if self.cordoned.remove(&node).is_none() {
                    return Ok(());
                }
                // Unreachable or gone, it stays out until it is back.
                if !self.down.contains_key(&node) && nodes.life(node) == Life::Up {
                    cx.engine
                        .set_health(NodeId(node as u32), crate::model::Health::Healthy);
                }
                cx.record(kind, format!("host {name} takes new jobs again"))
            }
        }
    }

    /// Where a job's logs are: one source per node, rank order (`None`: the job did not run
    /// on a real host lately, nor does a host keep its logs where the daemon can see them
    /// without asking over a network).
    pub(super) fn log_sources(
        &self,
        fleet: &crate::model::Fleet,
        id: JobId,
    ) -> Option<Vec<LogSource>> {
        let nodes: Vec<usize> = match (self.by_job.get(&id), self.ran_on.get(&id)) {
            (Some(r), _) => r.parts.iter().map(|p| p.node).collect(),
            (None, Some(nodes)) => nodes.clone(),
            // Ended before this daemon started: where a backend still keeps its logs.
            (None, None) => {
                let mut nodes: Vec<usize> = (0..self.runners.len())
                    .flat_map(|pool| {
                        let hosts = self.runners[pool].logs_of(id);
                        hosts
                            .into_iter()
                            .filter_map(move |h| self.pool_nodes[pool].get(h).copied())
                    })
                    .collect();
                nodes.dedup();
                if nodes.is_empty() {
                    return None;
                }
                nodes
            }
        };
        self.sources_on(fleet, nodes)
    }

    /// Where the logs of a job that ran on `nodes` (rank order) are read; `None` where none
    /// of them is a real host (the simulated fleet runs no processes).
    pub(super) fn sources_on(
        &self,
        fleet: &crate::model::Fleet,
        nodes: Vec<usize>,
    ) -> Option<Vec<LogSource>> {
        if !nodes.iter().any(|&n| self.is_real(n)) {
            return None;
        }
        let sources = nodes
            .into_iter()
            .enumerate()
            .filter_map(|(rank, node)| {
                let &(pool, host) = self.at.get(&node)?;
                let reader = self.runners[pool].logs();
                Some(LogSource {
                    rank,
                    node: fleet.nodes[node].name.clone(),
                    reader,
                    host,
                })
            })
            .collect();
        Some(sources)
    }

    /// The process group a job's first node runs it in, once its host said.
    pub(super) fn process_group(&self, id: JobId) -> Option<u32> {
        self.by_job.get(&id)?.parts.first()?.pgid
    }

    /// Real hosts answering now, and all of them.
    pub(super) fn hosts_up(&self) -> (usize, usize) {
        let all = self.real_nodes().len();
        (all - self.down.len(), all)
    }

    /// Jobs on real hosts whose every part the hosts confirmed running.
    pub(super) fn runs_confirmed(&self) -> usize {
        self.by_job
            .values()
            .filter(|r| r.journaled && r.parts.iter().all(|p| p.state == PartState::Running))
            .count()
    }

    /// What a host of pool `pool` reported of the runs there and of itself, as far as the runs
    /// are concerned (`State::on_host_event` gives the rest to the components it concerns):
    /// host `host`, node `node`, named `name`.
    pub(super) fn on_event(
        &mut self,
        (cx, nodes): (&mut Cx, &super::nodes::Nodes),
        (pool, host, node): (usize, usize, usize),
        name: &str,
        e: RunEvent,
    ) -> Result<(), EngineError> {
        match e {
            RunEvent::Started {
                job,
                token,
                pgid,
                handle,
                ..
            } => {
                let now = cx.now;
                match self.part_mut(job, &token, node) {
                    Some(p) => {
                        p.state = PartState::Running;
                        p.since = now;
                        p.pgid = pgid;
                        p.waits = None;
                        p.handle = handle.clone();
                        cx.log(match (pgid, handle) {
                            (Some(pgid), _) => {
                                format!("job {job} started on {name} as process group {pgid}")
                            }
                            (None, Some(h)) => format!("job {job} started on {name} as {h}"),
                            (None, None) => format!("job {job} started on {name}"),
                        });
                    }
                    None => self.stray(cx, pool, host, job, &token, name)?,
                }
            }
            RunEvent::StartFailed {
                job, token, why, ..
            } if self.part_mut(job, &token, node).is_some() => {
                self.kill(cx.engine, job)?;
                let why = format!("could not start on {name}: {why}");
                if cx.engine.job(job).is_some_and(|j| !j.state.is_final()) {
                    cx.engine.finished_because(job, false, cx.now, &why)?;
                    cx.log(format!("job {job} {why}"));
                } else {
                    cx.record_job(job, self.kind(node), why)?;
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
                    let now = cx.now;
                    cx.now = at.map_or(now, |t| t.min(now));
                    let settled = self.settle((&mut *cx, nodes), job, node, exit);
                    cx.now = now;
                    settled?;
                }
                None => {
                    // An exit already recorded (reported again after a reconnect), or a run
                    // the daemon gave up on: the host may forget it.
                    self.runners[pool].forget(host, job, &token);
                }
            },
            RunEvent::Cordon { why, .. } => self.cordon((&mut *cx, nodes), node, name, why)?,
            RunEvent::Waits {
                job, token, why, ..
            } => {
                if let Some(p) = self.part_mut(job, &token, node) {
                    let said = why.clone().filter(|w| p.waits.as_ref() != Some(w));
                    p.waits = why;
                    if let Some(why) = said {
                        let kind = self.kind(node);
                        cx.record_job(job, kind, format!("waits on {name}: {why}"))?;
                    }
                }
            }
            RunEvent::Usage { usage, .. } => {
                self.usage.insert(node, (cx.now, usage));
            }
            RunEvent::Foreign { work, .. } => self.foreign_work(cx, node, work)?,
            RunEvent::Failed { why, .. } => cx.record(self.kind(node), format!("{name}: {why}"))?,
            RunEvent::Notice { what, .. } => {
                cx.record(self.kind(node), format!("{name}: {what}"))?
            }
            RunEvent::Down { why, .. } => {
                let now = cx.now;
                let said = self.down.get(&node).map(|(_, w)| w.clone());
                if said.as_deref() != Some(why.as_str()) {
                    let since = self.down.get(&node).map_or(now, |d| d.0);
                    self.down.insert(node, (since, why.clone()));
                    let mut line = format!("host {name} unreachable: {why}");
                    if said.is_none() && nodes.life(node) == Life::Up {
                        // Its jobs keep running until it is lost; nothing new is placed there
                        // (a gang never waits on a host it cannot reach).
                        cx.engine
                            .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                        line.push_str("; no new jobs go there until it answers");
                    }
                    cx.record(self.kind(node), line)?;
                }
            }

            // The pool's own (`Wanted`, `Queue`), and those of other components.
            _ => {}
        }
        Ok(())
    }

    /// Host and node of what a runner of pool `pool` reported about one of its hosts (`None`
    /// for what is of the pool, or of a host no longer in the fleet).
    pub(super) fn host_of(&self, pool: usize, e: &RunEvent) -> Option<(usize, usize)> {
        let host = match e {
            RunEvent::Wanted { .. } | RunEvent::Queue { .. } => return None,
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
        Some((host, self.node_of(pool, host)?))
    }

    /// What every runner reported since the last poll, by pool.
    pub(super) fn poll(&mut self, now: f64) -> Vec<(usize, RunEvent)> {
        let mut events = Vec::new();
        for (pool, r) in self.runners.iter_mut().enumerate() {
            events.extend(r.poll(now).into_iter().map(|e| (pool, e)));
        }
        events
    }

    /// The work pool `pool`'s backend's own users queued for its nodes, as it says now.
    pub(super) fn set_queue(&mut self, pool: usize, waiting: Vec<crate::backend::ForeignWaiting>) {
        if waiting.is_empty() {
            self.queues.remove(&pool);
        } else {
            self.queues.insert(pool, waiting);
        }
    }

    /// Sends `f` to the runner of every part of a run.
    pub(super) fn each_part(
        &mut self,
        id: JobId,
        mut f: impl FnMut(&mut Box<dyn Runner>, usize, &str),
    ) {
        let Some(run) = self.by_job.get(&id) else {
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

/// The job's stop grace period, seconds (the spec's `checkpoint.grace`, else 30 s).
fn grace_of(engine: &Engine, id: JobId) -> f64 {
    engine
        .job(id)
        .and_then(|j| j.spec.checkpoint.as_ref().map(|c| c.grace_s))
        .unwrap_or(30.0)
}
