//! Hosts coming and going: a host answering (back in the fleet, its runs re-adopted or
//! settled, strays stopped, a `gpu = "auto"` pool rebuilt with what NVML finds there) and
//! hosts lost past their pool's timeout (their jobs requeued).

use super::{PartState, Runs, START_TIMEOUT_S};
use crate::api::JobState;
use crate::backend::{Exit, HostInfo};
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::state::cx::Cx;
use crate::daemon::state::nodes::{Nodes, OnNodes};
use crate::daemon::state::telemetry::Telemetry;
use crate::daemon::state::Rediscovered;
use crate::model::{Life, NodeId};
use std::collections::HashMap;

/// What a host of a `gpu = "auto"` pool saying what NVML finds there is compared with: the
/// pool's name, what the state was opened with, and what is pending a reopen (written here).
pub(in crate::daemon::state) struct Rediscovery<'a> {
    pub pool_name: String,
    pub discovered: Option<&'a crate::config::fleet::FoundGpus>,
    pub pending: &'a mut Option<Rediscovered>,
}

/// What a host answering reaches besides the runs: the `Cx`, the nodes, what was measured
/// (and how long its series keep), and, for a `gpu = "auto"` pool, its rediscovery.
pub(in crate::daemon::state) struct Answering<'a, 'b> {
    pub cx: &'b mut Cx<'a>,
    pub nodes: &'b mut Nodes,
    pub telemetry: &'b mut Telemetry,
    pub keep_s: f64,
    pub auto: Option<Rediscovery<'b>>,
}

impl Runs {
    /// A host answered: back in the fleet, its runs compared with what the daemon expects
    /// there (re-adopted, gone, or strays to stop).
    pub(in crate::daemon::state) fn host_up(
        &mut self,
        a: Answering,
        pool: usize,
        host: usize,
        node: usize,
        info: HostInfo,
    ) -> Result<(), EngineError> {
        let Answering {
            cx,
            nodes,
            telemetry,
            keep_s,
            auto,
        } = a;
        if nodes.is_machine(node) && nodes.life(node) == Life::Absent {
            // A machine given back whose agent answered on the way out: not the fleet's.
            return Ok(());
        }
        if nodes.connected(node) {
            let pool = cx.engine.fleet().nodes[node].pool.index();
            nodes.reset_unreached(cx, pool);
        }
        self.addresses.insert(node, info.addresses.clone());
        let name = cx.node_name(node);
        let declared = cx.engine.fleet().nodes[node].gpus.len();
        let auto = match auto {
            Some(r) => {
                rediscover(cx, r, &name, &info);
                true
            }
            None => false,
        };
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
        self.hostnames.insert(node, info.hostname.clone());
        let was_lost = nodes.life(node) != Life::Up;
        self.down.remove(&node);
        self.lost.remove(&node);
        if was_lost {
            nodes.set_life(cx, node, Life::Up);
        } else {
            // Cordoned while unreachable: placeable again.
            cx.engine
                .set_health(NodeId(node as u32), crate::model::Health::Healthy);
        }
        cx.record(
            self.kind(node),
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
                let source = self.kind(node);
                telemetry.observe((cx, source, keep_s), node, found, &HashMap::new())?;
            }
            None => {
                telemetry.of_mut(node);
            }
        }
        let expected: Vec<(JobId, String, PartState)> = self
            .by_job
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
                    let now = cx.now;
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.since = now;
                    }
                    cx.record_job(*id, self.kind(node), format!("re-adopted on {name}"))?;
                    if cx
                        .engine
                        .job(*id)
                        .is_some_and(|j| j.state == JobState::Preempting)
                    {
                        // Its stop may have been lost with the connection: sent again.
                        self.stop(cx.engine, *id, None);
                    }
                }
                PartState::Starting if there => {
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.state = PartState::Running;
                    }
                    cx.record_job(*id, self.kind(node), format!("re-adopted on {name}"))?;
                }
                PartState::Running => {
                    if let Some(p) = self.part_mut(*id, token, node) {
                        p.state = PartState::Exited(Exit::Unknown);
                    }
                    self.settle((&mut *cx, &*nodes), *id, node, Exit::Unknown)?;
                }
                // A start may still be on its way (sent after the hello); the start
                // timeout covers one that was lost.
                PartState::Starting | PartState::Exited(_) => {}
            }
        }
        for (job, token) in &info.runs {
            if !expected.iter().any(|(j, t, _)| j == job && t == token) {
                self.stray(cx, pool, host, *job, token, &name)?;
            }
        }
        Ok(())
    }

    /// Hosts unreachable past their pool's timeout are lost: out of the fleet until they
    /// answer, their jobs requeued from their checkpoints (a gang's other nodes stopped).
    /// Parts whose start the host never confirmed are treated the same way.
    pub(in crate::daemon::state) fn lose_unreachable(
        &mut self,
        cx: &mut Cx,
        nodes: &mut Nodes,
        (telemetry, counters): (&mut Telemetry, &mut crate::daemon::state::Counters),
    ) -> Result<(), EngineError> {
        let now = cx.now;
        let mut lost: Vec<(usize, String)> = Vec::new();
        for (&node, (since, why)) in &self.down {
            let pool = self.at[&node].0;
            // A machine just bought gets its pool's time to boot before it counts as lost.
            let mut after = self.lost_after[pool];
            if nodes.is_unconnected(node) {
                after = after.max(nodes.pool(pool).first_contact_s());
            }
            if now - since >= after && !self.lost.contains(&node) {
                lost.push((node, why.clone()));
            }
        }
        lost.sort();
        for (node, why) in lost {
            let name = cx.node_name(node);
            self.lost.insert(node);
            if nodes.life(node) == Life::Up {
                nodes.set_life(cx, node, Life::Failed);
            }
            let jobs: Vec<JobId> = self
                .by_job
                .iter()
                .filter(|(_, r)| r.parts.iter().any(|p| p.node == node))
                .map(|(&id, _)| id)
                .collect();
            for &id in &jobs {
                self.requeue(
                    cx,
                    id,
                    &format!(
                        "host {name} unreachable past its timeout: requeued from its checkpoint"
                    ),
                )?;
            }
            if nodes.is_machine(node) {
                // Not paid for forever: given back, and bought again if the queue needs it —
                // but a machine that never answered says the pool's cannot be reached (a
                // security group, an image without sshd): the pool is passed over, each time
                // in a row twice as long, instead of bought from again at once.
                let pool = cx.engine.fleet().nodes[node].pool.index();
                let mut line = format!(
                    "host {name} lost ({why}); {} job(s) requeued; its instance is given back",
                    jobs.len()
                );
                if nodes.is_unconnected(node) {
                    let times = nodes.unreached_once_more(pool);
                    let pause = super::super::nodes::unreached_pause_s(times);
                    nodes.pass_over(
                        cx,
                        pool,
                        now + pause,
                        format!("{times} machine(s) in a row never answered ({why})"),
                    );
                    line.push_str(&format!(
                        "; it never answered ({times} in a row): the pool is passed over for {:.0} min (check that its instances can be reached: ssh_host, the security group, sshd in the image)",
                        pause / 60.0
                    ));
                }
                cx.record(self.kind(node), line)?;
                let mut on = OnNodes {
                    runs: self,
                    telemetry,
                    counters,
                };
                nodes.give_back_lost(cx, &mut on, node);
                continue;
            }
            cx.record(
                self.kind(node),
                format!(
                    "host {name} lost ({why}); {} job(s) requeued; it rejoins when it answers",
                    jobs.len()
                ),
            )?;
        }
        let stuck: Vec<(JobId, usize, Option<String>)> = self
            .by_job
            .iter()
            .flat_map(|(&id, r)| {
                r.parts
                    .iter()
                    .filter(|p| p.state == PartState::Starting && now - p.since > START_TIMEOUT_S)
                    .map(move |p| (id, p.node, p.waits.clone()))
            })
            .filter(|(_, n, _)| !self.down.contains_key(n))
            .collect();
        for (id, node, waits) in stuck {
            let name = cx.node_name(node);
            let why = match waits {
                // Its scheduler holds it (a Slurm job pending): placed again, maybe elsewhere.
                Some(w) => format!(
                    "still held back on {name} after {START_TIMEOUT_S:.0} s ({w}): requeued"
                ),
                None => {
                    format!("{name} did not confirm its start in {START_TIMEOUT_S:.0} s: requeued")
                }
            };
            self.requeue(cx, id, &why)?;
        }
        Ok(())
    }
}

/// A host of `gpu = "auto"` pool `pool` said what NVML finds there. The first host to find
/// GPUs builds the pool (its hosts are taken to be alike), and it rebuilds it when it finds
/// others (a driver installed or a GPU added since); another host finding other GPUs is
/// said, and the pool keeps what it was built with.
fn rediscover(cx: &mut Cx, r: Rediscovery, name: &str, info: &HostInfo) {
    let Some(found) = crate::backend::discover::found_gpus(name, &info.gpus) else {
        return;
    };
    let pool_name = r.pool_name;
    let pending = r
        .pending
        .as_ref()
        .filter(|p| p.1 == pool_name)
        .map(|p| &p.2);
    let known = pending.or(r.discovered);
    match known {
        Some(known) if known.same(&found) => return,
        Some(known) if known.host != found.host => {
            let what = format!(
                "host {name} has {} × {} ({} GB) but pool {pool_name} is built with {} × {} from {}: give hosts with other GPUs a pool of their own",
                found.count, found.model, found.vram_gb, known.count, known.model, known.host
            );
            cx.warn(what);
            return;
        }
        _ => {}
    }
    let why = format!(
        "pool {pool_name}: NVML on {name} finds {} × {} ({} GB); the pool is rebuilt with them",
        found.count, found.model, found.vram_gb
    );
    *r.pending = Some((why, pool_name, found));
}
