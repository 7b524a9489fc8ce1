//! Jobs on remote backends (a `Runner` per pool: SSH hosts so far). Starting each node's part
//! of a placement, what the hosts report (started, exited, reachable or not), re-adoption when
//! a host answers again (after a disconnect, an agent crash or a daemon restart), and hosts
//! lost past their pool's timeout. The journal keeps each remote run (its token and
//! placement) until its end is recorded; only then may the host forget it, so an exit is
//! recorded once however the link behaves.

use super::*;
use crate::backend::logs::{LogAt, LogSource};
use crate::backend::{Exit, Gang, HostInfo, RunEvent, Runner};

/// A job handed to a remote backend: its run's token and each node's part, rank order.
pub(super) struct RemoteRun {
    pub token: String,
    pub parts: Vec<Part>,
}

pub(super) struct Part {
    /// The fleet node.
    pub node: usize,
    pub state: PartState,
    /// When it was asked to start (daemon time).
    pub since: f64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum PartState {
    Starting,
    Running,
    Exited(Exit),
}

/// The remote backends' side of the state.
#[derive(Default)]
pub(super) struct Remote {
    /// One runner per pool (`None`: the pool is not a remote backend's).
    pub runners: Vec<Option<Box<dyn Runner>>>,
    /// Fleet node → (pool, host index within the pool).
    pub hosts: HashMap<usize, (usize, usize)>,
    /// Per pool, its hosts' fleet nodes in host order (the reverse of `hosts`).
    pool_nodes: Vec<Vec<usize>>,
    pub runs: BTreeMap<JobId, RemoteRun>,
    /// Unreachable nodes: since when (daemon time) and the last reason said.
    pub down: HashMap<usize, (f64, String)>,
    /// Nodes unreachable past their timeout (their jobs were requeued).
    pub lost: std::collections::HashSet<usize>,
    /// Where recently ended remote jobs ran (for their logs), at most `RAN_ON_KEPT`.
    pub ran_on: HashMap<JobId, Vec<usize>>,
    ran_on_order: VecDeque<JobId>,
    /// Per pool: how long a host may stay unreachable before it is lost, seconds.
    pub lost_after: Vec<f64>,
}

/// How many ended remote jobs keep where they ran (their logs stay on the hosts).
const RAN_ON_KEPT: usize = 1000;

/// How long a part may wait for its host to confirm the start once the host is up.
const START_TIMEOUT_S: f64 = 120.0;

impl Remote {
    /// Runners for the fleet file's remote pools; nodes of `fleet` mapped to their hosts.
    pub fn open(cfg: &FleetConfig, fleet: &crate::model::Fleet) -> Result<Remote, String> {
        let mut r = Remote {
            lost_after: cfg.pools.iter().map(|p| p.lost_after_s()).collect(),
            ..Remote::default()
        };
        for p in &cfg.pools {
            r.runners.push(if p.is_ssh() {
                let opts = crate::backend::ssh::SshOptions {
                    identity_file: p.identity_file.as_deref().map(expand_home),
                    config_file: p.ssh_config.as_deref().map(expand_home),
                    jump: p.jump_host.clone(),
                    connect_timeout: std::time::Duration::from_secs(10),
                };
                let pool = crate::backend::ssh::SshPool::connect(&p.hosts, opts)
                    .map_err(|e| format!("pool `{}`: {e}", p.name))?;
                Some(Box::new(pool) as Box<dyn Runner>)
            } else {
                None
            });
        }
        r.pool_nodes = vec![Vec::new(); cfg.pools.len()];
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = n.pool.index();
            if r.runners[pool].is_some() {
                r.hosts.insert(i, (pool, r.pool_nodes[pool].len()));
                r.pool_nodes[pool].push(i);
            }
        }
        Ok(r)
    }

    /// Forgets a run, remembering where it ran.
    fn remove(&mut self, id: JobId) {
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
        let &(pool, host) = self.hosts.get(&node)?;
        Some((self.runners[pool].as_mut()?, host))
    }

    /// Sends `f` to the runner of every part of a run.
    fn each_part(&mut self, id: JobId, mut f: impl FnMut(&mut Box<dyn Runner>, usize, &str)) {
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

/// `~/x` → `$HOME/x`.
fn expand_home(p: &str) -> std::path::PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => std::path::PathBuf::from(p),
    }
}

impl State {
    /// Whether node `i` is a remote backend's host.
    pub(super) fn is_remote(&self, i: usize) -> bool {
        self.remote.hosts.contains_key(&i)
    }

    /// Whether node `i` is a real machine (this host, or a remote backend's): its telemetry
    /// is measured or unknown, never modelled.
    pub(super) fn is_real_host(&self, i: usize) -> bool {
        self.is_remote(i) || Some(i) == self.host_node
    }

    /// Starts every node's part of a job placed on remote hosts: the same run token, each
    /// node its rank and the addresses of all, head first.
    pub(super) fn launch_remote(&mut self, id: JobId) -> Result<(), EngineError> {
        let Some(j) = self.engine.job(id) else {
            return Ok(());
        };
        let Some(p) = j.placement.clone() else {
            return Ok(());
        };
        let spec = j.spec.clone();
        let ips: Vec<String> = p
            .nodes
            .iter()
            .map(|g| self.host_address(g.node.index()))
            .collect();
        let launch = match super::local_host::launch_of(id, &spec, Vec::new(), Gang::default()) {
            Ok(l) => l,
            Err(why) => {
                self.engine.finished(id, false, self.now)?;
                return self.record_job(id, "ssh", format!("could not start: {why}"));
            }
        };
        let record = crate::daemon::journal::RemoteRunRecord {
            job: id,
            token: launch.token.clone(),
            placement: serde_json::to_string(&p).unwrap_or_default(),
            started_at: self.now,
        };
        self.engine.store().add_remote_run(&record)?;
        let mut parts = Vec::new();
        for (rank, g) in p.nodes.iter().enumerate() {
            let node = g.node.index();
            let mut l = launch.clone();
            l.gpus = g.gpus.iter().map(|x| x.gpu.to_string()).collect();
            l.gang = Gang {
                rank: rank as u16,
                ips: ips.clone(),
            };
            if let Some((runner, host)) = self.remote.runner(node) {
                runner.start(host, l);
            }
            parts.push(Part {
                node,
                state: PartState::Starting,
                since: self.now,
            });
        }
        let hosts: Vec<String> = parts.iter().map(|p| self.node_name(p.node)).collect();
        self.remote.runs.insert(
            id,
            RemoteRun {
                token: launch.token,
                parts,
            },
        );
        self.log(format!("job {id} starting on {}", hosts.join(", ")));
        Ok(())
    }

    /// The address a node is reached at (its host entry's host part).
    fn host_address(&self, node: usize) -> String {
        let name = self.node_name(node);
        crate::backend::ssh::Destination::parse(&name).map_or(name, |d| d.address().to_string())
    }

    /// The spec's stop signal to every part; SIGKILL after the grace. Their exits requeue it.
    pub(super) fn stop_remote(&mut self, id: JobId) -> bool {
        if !self.remote.runs.contains_key(&id) {
            return false;
        }
        let grace = self.grace_of(id);
        let signal = self
            .engine
            .job(id)
            .and_then(|j| j.spec.checkpoint.as_ref())
            .map_or("SIGTERM".to_string(), |c| c.signal.0.clone());
        self.remote
            .each_part(id, |r, host, token| r.stop(host, id, token, &signal, grace));
        true
    }

    /// Kills every part at once and forgets the run (a cancel, or the rest of a gang).
    pub(super) fn kill_remote(&mut self, id: JobId) -> Result<(), EngineError> {
        if self.remote.runs.contains_key(&id) {
            self.remote.each_part(id, |r, host, token| {
                r.kill(host, id, token);
                r.forget(host, id, token);
            });
            self.remote.remove(id);
            self.engine.store().remove_remote_run(id)?;
        }
        Ok(())
    }

    /// What the remote backends reported since the last poll, then hosts past their timeout.
    pub(super) fn poll_remote(&mut self) -> Result<(), EngineError> {
        let mut events = Vec::new();
        for (pool, r) in self.remote.runners.iter_mut().enumerate() {
            if let Some(r) = r {
                events.extend(r.poll().into_iter().map(|e| (pool, e)));
            }
        }
        for (pool, e) in events {
            self.on_remote_event(pool, e)?;
        }
        self.lose_unreachable()
    }

    fn node_of(&self, pool: usize, host: usize) -> Option<usize> {
        self.remote.pool_nodes.get(pool)?.get(host).copied()
    }

    /// The part of run `id` on `node` if `token` is the run's.
    fn part_mut(&mut self, id: JobId, token: &str, node: usize) -> Option<&mut Part> {
        let run = self.remote.runs.get_mut(&id)?;
        if run.token != token {
            return None;
        }
        run.parts.iter_mut().find(|p| p.node == node)
    }

    fn on_remote_event(&mut self, pool: usize, e: RunEvent) -> Result<(), EngineError> {
        let host = match &e {
            RunEvent::Started { host, .. }
            | RunEvent::StartFailed { host, .. }
            | RunEvent::Exited { host, .. }
            | RunEvent::Up { host, .. }
            | RunEvent::Down { host, .. }
            | RunEvent::Sample { host, .. } => *host,
        };
        let Some(node) = self.node_of(pool, host) else {
            return Ok(());
        };
        let name = self.node_name(node);
        match e {
            RunEvent::Started {
                job, token, pgid, ..
            } => {
                let now = self.now;
                match self.part_mut(job, &token, node) {
                    Some(p) => {
                        p.state = PartState::Running;
                        p.since = now;
                        self.log(format!(
                            "job {job} started on {name} as process group {pgid}"
                        ));
                    }
                    None => self.stray(pool, host, job, &token, &name),
                }
            }
            RunEvent::StartFailed {
                job, token, why, ..
            } => {
                if self.part_mut(job, &token, node).is_some() {
                    self.kill_remote(job)?;
                    if self.engine.job(job).is_some_and(|j| !j.state.is_final()) {
                        self.engine.finished(job, false, self.now)?;
                    }
                    self.record_job(job, "ssh", format!("could not start on {name}: {why}"))?;
                }
            }
            RunEvent::Exited {
                job, token, exit, ..
            } => match self.part_mut(job, &token, node) {
                Some(p) => {
                    p.state = PartState::Exited(exit);
                    self.settle(job, node, exit)?;
                }
                None => {
                    // An exit already recorded (reported again after a reconnect), or a run
                    // the daemon gave up on: the host may forget it.
                    if let Some(r) = self.remote.runners[pool].as_mut() {
                        r.forget(host, job, &token);
                    }
                }
            },
            RunEvent::Up { info, .. } => self.host_up(pool, host, node, info)?,
            RunEvent::Sample { found, groups, .. } => {
                // Only the runs the daemon has there count as gantry's; anything else on a
                // GPU is foreign to it.
                let groups: HashMap<u32, JobId> = groups
                    .into_iter()
                    .filter(|(_, job)| {
                        self.remote
                            .runs
                            .get(job)
                            .is_some_and(|r| r.parts.iter().any(|p| p.node == node))
                    })
                    .collect();
                self.observe_node(node, found, &groups)?;
            }
            RunEvent::Down { why, .. } => {
                let now = self.now;
                let said = self.remote.down.get(&node).map(|(_, w)| w.clone());
                if said.as_deref() != Some(why.as_str()) {
                    let since = self.remote.down.get(&node).map_or(now, |d| d.0);
                    self.remote.down.insert(node, (since, why.clone()));
                    let mut line = format!("host {name} unreachable: {why}");
                    if said.is_none() && self.nodes.lives[node] == Life::Up {
                        // Its jobs keep running until it is lost; nothing new is placed there
                        // (a gang never waits on a host it cannot reach).
                        self.engine
                            .set_health(NodeId(node as u32), crate::model::Health::Cordoned);
                        line.push_str("; no new jobs go there until it answers");
                    }
                    self.record("ssh", line)?;
                }
            }
        }
        Ok(())
    }

    /// A run the host has that the daemon does not expect there: killed (the agent acts only
    /// on the run's own processes) and forgotten.
    fn stray(&mut self, pool: usize, host: usize, job: JobId, token: &str, name: &str) {
        if let Some(r) = self.remote.runners[pool].as_mut() {
            r.kill(host, job, token);
            r.forget(host, job, token);
        }
        self.log(format!(
            "job {job}: stopped a run of it left on {name} (the job was requeued meanwhile)"
        ));
    }

    /// A part ended: once every part has, or one failed, the job's fate is decided.
    fn settle(&mut self, id: JobId, node: usize, exit: Exit) -> Result<(), EngineError> {
        let name = self.node_name(node);
        let Some(run) = self.remote.runs.get(&id) else {
            return Ok(());
        };
        let gang = run.parts.len() > 1;
        let all_done = run
            .parts
            .iter()
            .all(|p| matches!(p.state, PartState::Exited(_)));
        let failed = !exit.success();
        let state = self.engine.job(id).map(|j| j.state);
        if failed && !all_done && state == Some(JobState::Running) {
            // One node's process failed: the rest of the gang stops now.
            self.remote
                .each_part(id, |r, host, token| r.kill(host, id, token));
        }
        if !all_done && !failed {
            return Ok(());
        }
        // Decided: the journal first, then the hosts may forget the run.
        match state {
            Some(JobState::Preempting) => {
                self.engine.requeued(id, self.now)?;
                self.log(format!(
                    "job {id} stopped on {name} ({exit:?}) and requeued"
                ));
            }
            Some(JobState::Running) if exit == Exit::Unknown => {
                self.engine.lost(
                    id,
                    self.now,
                    &format!("its processes on {name} are gone without an exit status (killed outright, or the host restarted): requeued from its checkpoint"),
                )?;
            }
            Some(JobState::Running) if gang && failed => {
                self.engine.lost(
                    id,
                    self.now,
                    &format!("node {name}'s process ended ({exit:?}): the whole gang stopped and requeued from its checkpoint"),
                )?;
            }
            Some(JobState::Running) => {
                self.engine.finished(id, !failed, self.now)?;
                self.log(format!("job {id} exited on {name}: {exit:?}"));
            }
            _ => {}
        }
        self.remote
            .each_part(id, |r, host, token| r.forget(host, id, token));
        self.remote.remove(id);
        self.engine.store().remove_remote_run(id)?;
        Ok(())
    }

    /// A host answered: back in the fleet, its runs compared with what the daemon expects
    /// there (re-adopted, gone, or strays to stop).
    fn host_up(
        &mut self,
        pool: usize,
        host: usize,
        node: usize,
        info: HostInfo,
    ) -> Result<(), EngineError> {
        let name = self.node_name(node);
        let declared = self.engine.fleet().nodes[node].gpus.len();
        let gpus = if info.gpus.is_empty() {
            format!("{declared} GPU(s) as declared (not measured: no NVML there)")
        } else {
            let mut s = format!("{} GPU(s) {} (NVML)", info.gpus.len(), info.gpus[0].name);
            if info.gpus.len() != declared {
                s.push_str(&format!(
                    "; the fleet file declares {declared}: gantry schedules the declared count"
                ));
            }
            s
        };
        let was_lost = self.nodes.lives[node] != Life::Up;
        self.remote.down.remove(&node);
        self.remote.lost.remove(&node);
        if was_lost {
            self.set_life(node, Life::Up);
        } else {
            // Cordoned while unreachable: placeable again.
            self.engine
                .set_health(NodeId(node as u32), crate::model::Health::Healthy);
        }
        self.record(
            "ssh",
            format!(
                "host {name} connected: {} ({}, gantry {}), {gpus}",
                info.hostname, info.arch, info.version
            ),
        )?;
        let expected: Vec<(JobId, String, PartState)> = self
            .remote
            .runs
            .iter()
            .filter_map(|(&id, r)| {
                let p = r.parts.iter().find(|p| p.node == node)?;
                Some((id, r.token.clone(), p.state))
            })
            .collect();
        for (id, token, state) in &expected {
            let there = info.runs.iter().any(|(j, t)| j == id && t == token);
            match state {
                PartState::Running if there => {
                    let now = self.now;
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.since = now;
                    }
                    self.record_job(*id, "ssh", format!("re-adopted on {name}"))?;
                    if self
                        .engine
                        .job(*id)
                        .is_some_and(|j| j.state == JobState::Preempting)
                    {
                        // Its stop may have been lost with the connection: sent again.
                        self.stop_remote(*id);
                    }
                }
                PartState::Starting if there => {
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.state = PartState::Running;
                    }
                    self.record_job(*id, "ssh", format!("re-adopted on {name}"))?;
                }
                PartState::Running => {
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.state = PartState::Exited(Exit::Unknown);
                    }
                    self.settle(*id, node, Exit::Unknown)?;
                }
                // A start may still be on its way (sent after the hello); the start
                // timeout covers one that was lost.
                PartState::Starting | PartState::Exited(_) => {}
            }
        }
        for (job, token) in &info.runs {
            if !expected.iter().any(|(j, t, _)| j == job && t == token) {
                self.stray(pool, host, *job, token, &name);
            }
        }
        Ok(())
    }

    /// Hosts unreachable past their pool's timeout are lost: out of the fleet until they
    /// answer, their jobs requeued from their checkpoints (a gang's other nodes stopped).
    /// Parts whose start the host never confirmed are treated the same way.
    fn lose_unreachable(&mut self) -> Result<(), EngineError> {
        let now = self.now;
        let mut lost: Vec<(usize, String)> = Vec::new();
        for (&node, (since, why)) in &self.remote.down {
            let pool = self.remote.hosts[&node].0;
            if now - since >= self.remote.lost_after[pool] && !self.remote.lost.contains(&node) {
                lost.push((node, why.clone()));
            }
        }
        lost.sort();
        for (node, why) in lost {
            let name = self.node_name(node);
            self.remote.lost.insert(node);
            if self.nodes.lives[node] == Life::Up {
                self.set_life(node, Life::Failed);
            }
            let jobs: Vec<JobId> = self
                .remote
                .runs
                .iter()
                .filter(|(_, r)| r.parts.iter().any(|p| p.node == node))
                .map(|(&id, _)| id)
                .collect();
            for &id in &jobs {
                self.requeue_remote(
                    id,
                    &format!(
                        "host {name} unreachable past its timeout: requeued from its checkpoint"
                    ),
                )?;
            }
            self.record(
                "ssh",
                format!(
                    "host {name} lost ({why}); {} job(s) requeued; it rejoins when it answers",
                    jobs.len()
                ),
            )?;
        }
        let stuck: Vec<(JobId, usize)> = self
            .remote
            .runs
            .iter()
            .flat_map(|(&id, r)| {
                r.parts
                    .iter()
                    .filter(|p| p.state == PartState::Starting && now - p.since > START_TIMEOUT_S)
                    .map(move |p| (id, p.node))
            })
            .filter(|(_, n)| !self.remote.down.contains_key(n))
            .collect();
        for (id, node) in stuck {
            let name = self.node_name(node);
            self.requeue_remote(
                id,
                &format!("{name} did not confirm its start in {START_TIMEOUT_S:.0} s: requeued"),
            )?;
        }
        Ok(())
    }

    /// Kills every part of a run and sends its job back to the queue with `why`.
    fn requeue_remote(&mut self, id: JobId, why: &str) -> Result<(), EngineError> {
        self.kill_remote(id)?;
        if self.engine.job(id).is_some_and(|j| !j.state.is_final()) {
            self.engine.lost(id, self.now, why)?;
        }
        Ok(())
    }

    /// Where a remote job's logs are: one source per node, rank order (`None`: the job did
    /// not run on a remote backend lately).
    pub(super) fn remote_log_sources(&self, id: JobId) -> Option<Vec<LogSource>> {
        let nodes: Vec<usize> = match self.remote.runs.get(&id) {
            Some(r) => r.parts.iter().map(|p| p.node).collect(),
            None => self.remote.ran_on.get(&id)?.clone(),
        };
        let sources = nodes
            .into_iter()
            .enumerate()
            .filter_map(|(rank, node)| {
                let &(pool, host) = self.remote.hosts.get(&node)?;
                let reader = self.remote.runners[pool].as_ref()?.logs();
                Some(LogSource {
                    rank,
                    node: self.node_name(node),
                    at: LogAt::Remote { reader, host },
                })
            })
            .collect();
        Some(sources)
    }
}

impl State {
    /// Remote hosts answering now, and all of them.
    pub fn remote_hosts_up(&self) -> (usize, usize) {
        let all = self.remote.hosts.len();
        (all - self.remote.down.len(), all)
    }

    /// Remote jobs whose every part the hosts confirmed running.
    pub fn remote_running(&self) -> usize {
        self.remote
            .runs
            .values()
            .filter(|r| r.parts.iter().all(|p| p.state == PartState::Running))
            .count()
    }
}
