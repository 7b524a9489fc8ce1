//! What the worker makes of each reading of the cluster: the nodes' status, gantry's runs
//! followed from queued to ended, and the cluster's own jobs on a pool's nodes.

use super::*;
use crate::backend::slurm::{inventory, queue};

impl Worker {
    /// What the reader found, its queue asked for at `began`: says what changed.
    pub(super) fn refresh(&mut self, began: Instant, found: Result<Inventory, String>) {
        let inv = match found {
            Ok(inv) => inv,
            Err(why) => {
                for host in 0..self.nodes.len() {
                    self.say_status(host, Err(why.clone()), None);
                }
                return;
            }
        };
        let by_id: HashMap<u64, &Job> = inv.jobs.iter().map(|j| (j.id, j)).collect();
        let by_name: HashMap<&str, &inventory::Node> =
            inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let seen = Seen::of(&inv);
        let closed = queue::partition_closed(&inv, self.submit.partition.as_deref());
        for host in 0..self.nodes.len() {
            let name = self.nodes[host].clone();
            let said = |n: &inventory::Node| {
                format!(
                    "Slurm says node {name} is {}{}",
                    n.state,
                    if n.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", n.reason)
                    }
                )
            };
            let (status, cordon) = match by_name.get(name.as_str()) {
                None => (Err(format!("Slurm has no node {name}")), None),
                Some(n) if n.state.contains("down") || n.state.contains("not_responding") => {
                    (Err(said(n)), None)
                }
                // Drained, failing, in maintenance: what runs there goes on, nothing new.
                Some(n) if !n.usable() => (Ok(()), Some(said(n))),
                Some(_) => (Ok(()), closed.clone()),
            };
            let up = status.is_ok();
            self.say_status(host, status, Some(&seen));
            if let Some(e) = up.then(|| self.reports.cordon(host, cordon)).flatten() {
                self.emit(e);
            }
        }
        self.follow_runs(began, &by_id);
        self.say_foreign(&inv);
        let waiting = queue::waiting(&inv, &self.nodes);
        if waiting != self.queue {
            self.queue = waiting.clone();
            self.emit(RunEvent::Queue { waiting });
        }
    }

    /// `Up` (with the runs gantry has there) when a node becomes reachable, `Down` when it
    /// stops being so or the reason changes.
    pub(super) fn say_status(&mut self, host: usize, now: Result<(), String>, seen: Option<&Seen>) {
        if !self.reports.status_changed(host, &now) {
            return;
        }
        match (now, seen) {
            (Ok(()), Some(seen)) => {
                let (name, inv) = (&self.nodes[host], seen.inv);
                let mut runs = Vec::new();
                for (job, token, id) in seen.ours.get(name.as_str()).into_iter().flatten() {
                    // Followed from now on (a run from before a restart is re-adopted).
                    self.runs
                        .entry((host, *job, token.clone()))
                        .or_insert(Run::new(*id));
                    runs.push((*job, token.clone()));
                }
                let release = inv.slurm.clone().unwrap_or_else(|| "?".into());
                let info = HostInfo {
                    hostname: name.clone(),
                    arch: format!(
                        "Slurm {release} via slurmrestd {}, {}",
                        inv.api,
                        self.submits.via.said(&inv.api)
                    ),
                    version: env!("CARGO_PKG_VERSION").into(),
                    gpus: Vec::new(),
                    nvml: Some("Slurm reports no GPU telemetry".into()),
                    driver: None,
                    runs,
                    addresses: Vec::new(),
                };
                let said = self.reports.up(
                    host,
                    info,
                    Some("Slurm reports no GPU telemetry (GPUs as its GRES and the fleet file declare)"),
                );
                for e in said {
                    self.emit(e);
                }
            }
            (Err(why), _) => self.emit(RunEvent::Down { host, why }),
            (Ok(()), None) => {}
        }
    }

    /// Each followed run's state as Slurm had it in a read that began at `began`.
    fn follow_runs(&mut self, began: Instant, by_id: &HashMap<u64, &Job>) {
        let mut events = Vec::new();
        let mut cancel: Vec<(usize, u64)> = Vec::new();
        for ((host, job, token), r) in self.runs.iter_mut().filter(|(_, r)| !r.ended) {
            let (id, host, job, token) = (r.slurm, *host, *job, token.clone());
            if r.cancel_at.is_some_and(|t| Instant::now() >= t) {
                r.cancel_at = None;
                cancel.push((host, id));
            }
            match by_id.get(&id) {
                Some(j) if j.running() => {
                    if !r.started {
                        r.started = true;
                        events.push(RunEvent::Started {
                            host,
                            job,
                            token,
                            pgid: None,
                            handle: Some(format!("Slurm job {id}")),
                        });
                    }
                }
                Some(j) if j.pending() => {
                    if HOPELESS.contains(&j.reason_code.as_str()) {
                        r.ended = true;
                        self.taken.add(id);
                        cancel.push((host, id));
                        events.push(RunEvent::StartFailed {
                            host,
                            job,
                            token,
                            why: format!("Slurm job {id} cannot start: {}", j.reason),
                        });
                    } else {
                        // Held back (a reason other than the moment's scheduling pass):
                        // said while it lasts, so the job says why it has not started.
                        let said = r.waits.is_some() || j.reason_code != "Resources";
                        let why = (!j.reason.is_empty() && said)
                            .then(|| format!("Slurm job {id} pending: {}", j.reason));
                        if why != r.waits {
                            r.waits = why.clone();
                            events.push(RunEvent::Waits {
                                host,
                                job,
                                token,
                                why,
                            });
                        }
                    }
                }
                Some(j) => {
                    r.ended = true;
                    self.taken.add(id);
                    let exit = exit_of(j);
                    if r.started || j.start_time > 0 {
                        events.extend(ended(host, job, token, id, r.started, exit));
                    } else {
                        events.push(RunEvent::StartFailed {
                            host,
                            job,
                            token,
                            why: format!(
                                "Slurm job {id} ended before it ran ({}{})",
                                j.state,
                                if j.reason.is_empty() {
                                    String::new()
                                } else {
                                    format!(": {}", j.reason)
                                }
                            ),
                        });
                    }
                }
                // Submitted after the read began: the read cannot have seen it.
                None if r.since >= began => {}
                None => {
                    // Gone from Slurm's memory (MinJobAge) without being seen to end.
                    r.ended = true;
                    events.push(RunEvent::Exited {
                        host,
                        job,
                        token,
                        exit: Exit::Unknown,
                        at: None,
                    });
                }
            }
        }
        let done = cancel
            .into_iter()
            .map(|(host, id)| (host, id, batch::scancel(id, None)))
            .collect();
        self.said(done);
        for e in events {
            self.emit(e);
        }
    }

    /// The cluster's own running jobs on each node, with the GPUs they hold there. One pass
    /// over the queue (a large cluster's runs to tens of thousands of jobs, read each second).
    fn say_foreign(&mut self, inv: &Inventory) {
        let mut on: HashMap<&str, Vec<ForeignWork>> = HashMap::new();
        let theirs = inv.jobs.iter().filter(|j| j.running() && !j.is_gantrys());
        for j in theirs {
            let mut nodes: Vec<&str> = j.alloc.iter().map(|(n, _)| n.as_str()).collect();
            nodes.dedup();
            for node in nodes {
                let gpus = j.gpus_on(node);
                if gpus == 0 {
                    continue;
                }
                on.entry(node).or_default().push(ForeignWork {
                    what: what(j),
                    gpus,
                });
            }
        }
        for host in 0..self.nodes.len() {
            if !self.reports.is_up(host) {
                continue;
            }
            let mut work = on.remove(self.nodes[host].as_str()).unwrap_or_default();
            work.sort_by(|a, b| a.what.cmp(&b.what));
            if let Some(e) = self.reports.foreign(host, work) {
                self.emit(e);
            }
        }
    }
}

/// A refresh's reading of the cluster, with gantry's runs that have not ended indexed by
/// node (each node that comes up is told its runs: one pass over the queue for all of them).
pub(super) struct Seen<'a> {
    inv: &'a Inventory,
    /// Per node: (gantry job, token, Slurm job) of each run pinned there, waiting or running.
    ours: HashMap<&'a str, Vec<(i64, String, u64)>>,
}

impl<'a> Seen<'a> {
    pub(super) fn of(inv: &'a Inventory) -> Seen<'a> {
        let mut ours: HashMap<&str, Vec<(i64, String, u64)>> = HashMap::new();
        for j in inv.jobs.iter().filter(|j| !j.ended()) {
            let Some((job, token, _)) = batch::parse_comment(&j.comment) else {
                continue;
            };
            // Pinned to one node, whether it runs or still waits (a waiting job has no
            // nodes yet).
            let mut on: Vec<&str> = [j.required_nodes.as_str(), j.nodes.as_str()]
                .into_iter()
                .chain(j.alloc.iter().map(|(n, _)| n.as_str()))
                .filter(|n| !n.is_empty())
                .collect();
            on.sort_unstable();
            on.dedup();
            for node in on {
                ours.entry(node)
                    .or_default()
                    .push((job, token.clone(), j.id));
            }
        }
        Seen { inv, ours }
    }
}
