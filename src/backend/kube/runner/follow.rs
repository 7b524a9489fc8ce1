//! What the worker learns of the cluster: the GPU exporter's samples, the nodes looked at again
//! after a watch delivered something, gantry's pods changing, runs that have gone missing, and
//! each node's status said to the daemon.

use super::*;
use crate::backend::kube::wanted;

impl Worker {
    /// The exporter's answer: each node's GPUs in gantry's numbering, or why there are none.
    pub(super) fn scraped(&mut self, s: dcgm::Scraped) {
        self.telemetry.in_flight = false;
        let url = self.settings.dcgm.clone().unwrap_or_default();
        for host in 0..self.nodes.len() {
            if !self.reports.is_up(host) {
                continue;
            }
            let node = &self.nodes[host];
            let gpus = match &s {
                Err(why) => Err(format!("the DCGM exporter at {url}: {why}")),
                Ok(by_node) => by_node.get(node).ok_or_else(|| {
                    format!("the DCGM exporter at {url} reports no GPU of node {node}")
                }),
            };
            let found = match gpus {
                Err(reason) => {
                    if self.telemetry.said[host].as_ref() == Some(&reason) {
                        continue;
                    }
                    self.telemetry.said[host] = Some(reason.clone());
                    (Discovery::Unavailable { reason }, Vec::new())
                }
                Ok(gpus) => {
                    self.telemetry.said[host] = None;
                    let order = &self.telemetry.order[host];
                    let mut runs = Vec::new();
                    let mut groups = Vec::new();
                    for ((h, job, _), r) in &self.runs {
                        if *h != host || r.ended || r.pod.is_empty() {
                            continue;
                        }
                        let granted = r
                            .gpus
                            .iter()
                            .filter_map(|id| {
                                id.parse::<u32>().ok().or_else(|| {
                                    order.iter().position(|u| u == id).map(|i| i as u32)
                                })
                            })
                            .collect();
                        runs.push((format!("{}/{}", r.namespace, r.pod), granted));
                        // Pods have no process groups gantry sees: one entry per job says
                        // which jobs run here (their GPUs' utilization is theirs).
                        groups.push((u32::MAX - groups.len() as u32, *job));
                    }
                    let (samples, uuids) = dcgm::in_gantrys_order(gpus, &runs);
                    self.telemetry.order[host] = uuids;
                    let driver = gpus
                        .iter()
                        .find_map(|g| g.driver.clone())
                        .unwrap_or_else(|| "unknown (DCGM)".into());
                    (
                        Discovery::Available {
                            driver,
                            gpus: samples,
                        },
                        groups,
                    )
                }
            };
            self.emit(RunEvent::Sample {
                host,
                found: found.0,
                groups: found.1,
            });
        }
    }

    /// Each node's state, cordon and foreign work, said where it changed.
    pub(super) fn look_at_nodes(&mut self) {
        let Some(w) = &self.watched else { return };
        let inv = w.inventory(&Labels::default());
        let by_name: HashMap<&str, &KubeNode> = inv.iter().map(|n| (n.name.as_str(), n)).collect();
        // gantry's runs' pods (its own, and users' it placed and marked) by node: (job,
        // token), for `Up`.
        let mut ours: HashMap<String, Vec<(i64, String)>> = HashMap::new();
        for p in w.pods.state().iter() {
            let job = p
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(JOB_LABEL))
                .and_then(|j| j.parse::<i64>().ok());
            let node = p.spec.as_ref().and_then(|s| s.node_name.clone());
            if let (Some(job), Some(token), Some(node)) = (job, token_of(p), node) {
                if inventory::holds(p) {
                    ours.entry(node).or_default().push((job, token.clone()));
                }
            }
        }
        for host in 0..self.nodes.len() {
            let name = self.nodes[host].clone();
            let (status, cordon) = match by_name.get(name.as_str()) {
                None => (Err(format!("Kubernetes has no node {name}")), None),
                Some(n) if !n.ready => (Err(format!("node {name} is not Ready")), None),
                Some(n) if !n.unusable.is_empty() => (
                    Ok(()),
                    Some(format!(
                        "Kubernetes node {name} is {}",
                        n.unusable.join(", ")
                    )),
                ),
                Some(_) => (Ok(()), None),
            };
            let up = status.is_ok();
            let runs = ours.get(&name).cloned().unwrap_or_default();
            self.say_status(host, status, Some(runs));
            if up {
                if let Some(e) = self.reports.cordon(host, cordon) {
                    self.emit(e);
                }
                let mut work: Vec<ForeignWork> = by_name
                    .get(name.as_str())
                    .map(|n| {
                        n.foreign
                            .iter()
                            .map(|p| ForeignWork {
                                what: format!("pod {}/{}", p.namespace, p.name),
                                gpus: p.gpus,
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                work.sort_by(|a, b| a.what.cmp(&b.what));
                if let Some(e) = self.reports.foreign(host, work) {
                    self.emit(e);
                }
            }
        }
    }

    /// The pods waiting for gantry to place them: said when the set changes. Each job file
    /// keeps its pod to this pool (`infra`, `instance_type`); where several pools are one
    /// cluster's, a pod's `node.kubernetes.io/instance-type` node selector picks its pool, and
    /// without one the first pool to say it queues it.
    pub(super) fn look_for_wanted(&mut self) {
        let Some(w) = &self.watched else { return };
        let teams: wanted::NamespaceTeams = w
            .namespaces
            .state()
            .iter()
            .filter_map(|n| {
                let team = n.metadata.labels.as_ref()?.get(wanted::TEAM_LABEL)?;
                Some((n.metadata.name.clone()?, team.clone()))
            })
            .collect();
        let work = wanted::all_wanted(
            &w.pods.state(),
            &w.jobs.state(),
            &self.settings.place,
            &teams,
        );
        if self.wanted.as_ref() != Some(&work) || self.adopted_ended != self.adopted_ended_said {
            self.wanted = Some(work.clone());
            self.adopted_ended_said = self.adopted_ended;
            self.emit(RunEvent::Wanted { work });
        }
    }

    /// A change the pods watch delivered to one of gantry's pods.
    pub(super) fn pod_changed(&mut self, c: PodChange) {
        let p = &c.pod;
        let ns = p.metadata.namespace.as_deref().unwrap_or_default();
        let Some(name) = p.metadata.name.as_deref() else {
            return;
        };
        let token = token_of(p);
        let Some((key, run)) = self.runs.iter_mut().find(|(k, r)| {
            (r.pod == name && r.namespace == ns) || (r.pod.is_empty() && token == Some(&k.2))
        }) else {
            return;
        };
        if run.pod.is_empty() {
            // A run found again after a restart: this is its pod.
            run.found(p);
        }
        if run.starting {
            run.held = Some((c.pod, c.deleted));
            return;
        }
        let was = run.ended;
        let events = run.step(key, p, c.deleted);
        if run.adopted && run.ended && !was {
            self.adopted_ended += 1;
        }
        for e in events {
            self.emit(e);
        }
    }

    /// Each followed run's pod as the store has it now: what the watch's changes did not
    /// say (a pod gone while the watch listed again; a run found again after a restart).
    pub(super) fn check_runs(&mut self) {
        let Some(w) = &self.watched else { return };
        let store = w.pods.clone();
        if self.runs.values().any(|r| r.pod.is_empty() && !r.ended) {
            let pods = store.state();
            for ((_, _, token), r) in self.runs.iter_mut().filter(|(_, r)| r.pod.is_empty()) {
                if let Some(p) = pods.iter().find(|p| token_of(p) == Some(token)) {
                    r.found(p);
                }
            }
        }
        let now = Instant::now();
        let mut events = Vec::new();
        for (key, r) in self
            .runs
            .iter_mut()
            .filter(|(_, r)| !r.ended && !r.starting)
        {
            let pod = (!r.pod.is_empty())
                .then(|| store.get(&ObjectRef::new(&r.pod).within(&r.namespace)))
                .flatten();
            events.extend(match pod {
                Some(p) => r.step(key, &p, false),
                None => r.missing(key, now),
            });
            if r.adopted && r.ended {
                self.adopted_ended += 1;
            }
        }
        for e in events {
            self.emit(e);
        }
    }

    /// `Up` (with gantry's runs there) when a node becomes usable, `Down` when it stops
    /// being so or the reason changes.
    pub(super) fn say_status(
        &mut self,
        host: usize,
        now: Result<(), String>,
        runs: Option<Vec<(i64, String)>>,
    ) {
        if !self.reports.status_changed(host, &now) {
            return;
        }
        match now {
            Ok(()) => {
                let runs = runs.unwrap_or_default();
                for (job, token) in &runs {
                    // Followed from now on (a run from before a restart is re-adopted).
                    let key = (host, *job, token.clone());
                    self.runs.entry(key).or_insert_with(|| {
                        let mut r = Run::new(String::new());
                        r.namespace = self.settings.namespace.clone();
                        r
                    });
                }
                let name = self.nodes[host].clone();
                let server = self
                    .cluster
                    .as_ref()
                    .map(|c| c.name.clone())
                    .unwrap_or_default();
                let measured = self.settings.dcgm.is_some();
                let info = HostInfo {
                    hostname: name,
                    arch: format!("Kubernetes {server}"),
                    version: env!("CARGO_PKG_VERSION").into(),
                    gpus: Vec::new(),
                    nvml: (!measured).then(|| {
                        "Kubernetes reports no GPU telemetry without a DCGM exporter (`dcgm` in the pool's [pools.kubernetes])".into()
                    }),
                    driver: None,
                    runs,
                    addresses: Vec::new(),
                };
                let said = self.reports.up(
                    host,
                    info,
                    (!measured).then_some(
                        "Kubernetes reports no GPU telemetry without a DCGM exporter (GPUs as the device plugin offers them and the fleet file declares)",
                    ),
                );
                for e in said {
                    self.emit(e);
                }
            }
            Err(why) => self.emit(RunEvent::Down { host, why }),
        }
    }
}
