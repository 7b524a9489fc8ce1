//! Hosts coming and going: a host answering (back in the fleet, its runs re-adopted or
//! settled, strays stopped, a `gpu = "auto"` pool rebuilt with what NVML finds there) and
//! hosts lost past their pool's timeout (their jobs requeued).

use super::hosts::{PartState, START_TIMEOUT_S};
use super::State;
use crate::api::JobState;
use crate::backend::{Exit, HostInfo};
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::model::{Life, NodeId};
use std::collections::HashMap;

impl State {
    /// A host answered: back in the fleet, its runs compared with what the daemon expects
    /// there (re-adopted, gone, or strays to stop).
    pub(super) fn host_up(
        &mut self,
        pool: usize,
        host: usize,
        node: usize,
        info: HostInfo,
    ) -> Result<(), EngineError> {
        if self.is_machine(node) && self.nodes.lives[node] == Life::Absent {
            // A machine given back whose agent answered on the way out: not the fleet's.
            return Ok(());
        }
        if self.nodes.unconnected.remove(&node) {
            let pool = self.engine.fleet().nodes[node].pool.index();
            self.reset_unreached(pool);
        }
        self.hosts.addresses.insert(node, info.addresses.clone());
        let name = self.node_name(node);
        let declared = self.engine.fleet().nodes[node].gpus.len();
        let auto = self
            .opened
            .cfg
            .pools
            .get(pool)
            .is_some_and(crate::backend::registry::discovers_gpus);
        if auto {
            self.rediscover(pool, &name, &info);
        }
        let gpus = if auto && info.gpus.is_empty() {
            match &info.nvml {
                Some(why) => format!("no GPUs (gpu = \"auto\": {why})"),
                None => "no GPUs (gpu = \"auto\": NVML found none)".to_string(),
            }
        } else if auto {
            format!(
                "{} GPU(s) {} (NVML; gpu = \"auto\")",
                info.gpus.len(),
                info.gpus[0].name
            )
        } else if declared == 0 && info.gpus.is_empty() {
            "no GPUs".to_string()
        } else if let Some(why) = &info.nvml {
            format!("{declared} GPU(s) as declared (not measured: {why})")
        } else if info.gpus.is_empty() {
            format!("{declared} GPU(s) as declared, measured once sampled")
        } else {
            let mut s = format!("{} GPU(s) {} (NVML)", info.gpus.len(), info.gpus[0].name);
            if info.gpus.len() != declared {
                s.push_str(&format!(
                    "; the fleet file declares {declared}: gantry schedules the declared count"
                ));
            }
            s
        };
        self.hosts.hostnames.insert(node, info.hostname.clone());
        let was_lost = self.nodes.lives[node] != Life::Up;
        self.hosts.down.remove(&node);
        self.hosts.lost.remove(&node);
        if was_lost {
            self.set_life(node, Life::Up);
        } else {
            // Cordoned while unreachable: placeable again.
            self.engine
                .set_health(NodeId(node as u32), crate::model::Health::Healthy);
        }
        self.record(
            self.hosts.kind(node),
            format!(
                "host {name} connected: {} ({}, gantry {}), {gpus}",
                info.hostname, info.arch, info.version
            ),
        )?;
        // Its GPUs as NVML sees them now (a driver installed since it last answered is picked
        // up here): without NVML they are as declared, not measured; with it, they wait for
        // the first sample.
        match &info.nvml {
            Some(reason) => {
                let found = crate::backend::Discovery::Unavailable {
                    reason: reason.clone(),
                };
                self.observe_node(node, found, &HashMap::new())?;
            }
            None => {
                self.measured.entry(node).or_default();
            }
        }
        let expected: Vec<(JobId, String, PartState)> = self
            .hosts
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
                    self.record_job(*id, self.hosts.kind(node), format!("re-adopted on {name}"))?;
                    if self
                        .engine
                        .job(*id)
                        .is_some_and(|j| j.state == JobState::Preempting)
                    {
                        // Its stop may have been lost with the connection: sent again.
                        self.stop_on_hosts(*id, None);
                    }
                }
                PartState::Starting if there => {
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.state = PartState::Running;
                    }
                    self.record_job(*id, self.hosts.kind(node), format!("re-adopted on {name}"))?;
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
                self.stray(pool, host, *job, token, &name)?;
            }
        }
        Ok(())
    }

    /// A host of `gpu = "auto"` pool `pool` said what NVML finds there. The first host to find
    /// GPUs builds the pool (its hosts are taken to be alike), and it rebuilds it when it finds
    /// others (a driver installed or a GPU added since); another host finding other GPUs is
    /// said, and the pool keeps what it was built with.
    fn rediscover(&mut self, pool: usize, name: &str, info: &HostInfo) {
        let Some(found) = crate::backend::discover::found_gpus(name, &info.gpus) else {
            return;
        };
        let pool_name = self.opened.cfg.pools[pool].name.clone();
        let pending = self
            .rediscovered
            .as_ref()
            .filter(|r| r.1 == pool_name)
            .map(|r| &r.2);
        let known = pending.or(self.opened.opts.discovered.get(&pool_name));
        match known {
            Some(known) if known.same(&found) => return,
            Some(known) if known.host != found.host => {
                let what = format!(
                    "host {name} has {} × {} ({} GB) but pool {pool_name} is built with {} × {} from {}: give hosts with other GPUs a pool of their own",
                    found.count, found.model, found.vram_gb, known.count, known.model, known.host
                );
                self.warn(what);
                return;
            }
            _ => {}
        }
        let why = format!(
            "pool {pool_name}: NVML on {name} finds {} × {} ({} GB); the pool is rebuilt with them",
            found.count, found.model, found.vram_gb
        );
        self.rediscovered = Some((why, pool_name, found));
    }

    /// Hosts unreachable past their pool's timeout are lost: out of the fleet until they
    /// answer, their jobs requeued from their checkpoints (a gang's other nodes stopped).
    /// Parts whose start the host never confirmed are treated the same way.
    pub(super) fn lose_unreachable(&mut self) -> Result<(), EngineError> {
        let now = self.now;
        let mut lost: Vec<(usize, String)> = Vec::new();
        for (&node, (since, why)) in &self.hosts.down {
            let pool = self.hosts.at[&node].0;
            // A machine just bought gets its pool's time to boot before it counts as lost.
            let mut after = self.hosts.lost_after[pool];
            if self.nodes.unconnected.contains(&node) {
                after = after.max(self.nodes.pools[pool].first_contact_s());
            }
            if now - since >= after && !self.hosts.lost.contains(&node) {
                lost.push((node, why.clone()));
            }
        }
        lost.sort();
        for (node, why) in lost {
            let name = self.node_name(node);
            self.hosts.lost.insert(node);
            if self.nodes.lives[node] == Life::Up {
                self.set_life(node, Life::Failed);
            }
            let jobs: Vec<JobId> = self
                .hosts
                .runs
                .iter()
                .filter(|(_, r)| r.parts.iter().any(|p| p.node == node))
                .map(|(&id, _)| id)
                .collect();
            for &id in &jobs {
                self.requeue_run(
                    id,
                    &format!(
                        "host {name} unreachable past its timeout: requeued from its checkpoint"
                    ),
                )?;
            }
            if self.is_machine(node) {
                // Not paid for forever: given back, and bought again if the queue needs it —
                // but a machine that never answered says the pool's cannot be reached (a
                // security group, an image without sshd): the pool is passed over, each time
                // in a row twice as long, instead of bought from again at once.
                let pool = self.engine.fleet().nodes[node].pool.index();
                let mut line = format!(
                    "host {name} lost ({why}); {} job(s) requeued; its instance is given back",
                    jobs.len()
                );
                if self.nodes.unconnected.contains(&node) {
                    self.nodes.unreached[pool] += 1;
                    let times = self.nodes.unreached[pool];
                    let pause = super::nodes::unreached_pause_s(times);
                    self.pass_over(
                        pool,
                        now + pause,
                        format!("{times} machine(s) in a row never answered ({why})"),
                    );
                    line.push_str(&format!(
                        "; it never answered ({times} in a row): the pool is passed over for {:.0} min (check that its instances can be reached: ssh_host, the security group, sshd in the image)",
                        pause / 60.0
                    ));
                }
                self.record(self.hosts.kind(node), line)?;
                self.give_back_lost(node);
                continue;
            }
            self.record(
                self.hosts.kind(node),
                format!(
                    "host {name} lost ({why}); {} job(s) requeued; it rejoins when it answers",
                    jobs.len()
                ),
            )?;
        }
        let stuck: Vec<(JobId, usize, Option<String>)> = self
            .hosts
            .runs
            .iter()
            .flat_map(|(&id, r)| {
                r.parts
                    .iter()
                    .filter(|p| p.state == PartState::Starting && now - p.since > START_TIMEOUT_S)
                    .map(move |p| (id, p.node, p.waits.clone()))
            })
            .filter(|(_, n, _)| !self.hosts.down.contains_key(n))
            .collect();
        for (id, node, waits) in stuck {
            let name = self.node_name(node);
            let why = match waits {
                // Its scheduler holds it (a Slurm job pending): placed again, maybe elsewhere.
                Some(w) => format!(
                    "still held back on {name} after {START_TIMEOUT_S:.0} s ({w}): requeued"
                ),
                None => {
                    format!("{name} did not confirm its start in {START_TIMEOUT_S:.0} s: requeued")
                }
            };
            self.requeue_run(id, &why)?;
        }
        Ok(())
    }
}
