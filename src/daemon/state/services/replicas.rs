//! Keeping a service's replicas at the count its autoscaler wants: ended ones forgotten and
//! replaced, failed ones retired, a new version rolled out one replica at a time, and the
//! ports and addresses they serve on.

use super::{replica_text, Services, DRAIN_BEAT_S, REPLICA_PORTS};
use crate::api::Action;
use crate::daemon::engine::Submission;
use crate::daemon::journal::{JobId, ReplicaRecord};
use crate::daemon::state::desk::Desk;
use crate::daemon::state::runs::Runs;

impl Services {
    /// Every service's replica count kept (each scheduling cycle).
    pub(in crate::daemon::state) fn reconcile_all(&mut self, desk: &mut Desk) {
        let names: Vec<String> = self.list.keys().cloned().collect();
        for name in names {
            self.reconcile(desk, &name);
        }
    }

    /// One service: ended replicas forgotten (and replaced), failed ones retired, then as many
    /// started or retired as its autoscaler wants — a new version one replica at a time.
    pub(super) fn reconcile(&mut self, desk: &mut Desk, name: &str) {
        // The autoscaler looks at the last load measured at every step: a load that stays
        // where it is (no new report) still counts toward the delays.
        let now = desk.cx.now;
        let Some(e) = self.list.get_mut(name) else {
            return;
        };
        if let Some(d) = e.autoscaler.observe(&e.svc, e.measured.load, now) {
            e.last_decision = Some(d.reason.clone());
            let _ = desk
                .cx
                .record("service", format!("service {name}: {}", d.reason));
        }
        self.drain(desk, name);
        let Some(e) = self.list.get(name) else {
            return;
        };
        let version = e.record.version;
        // Ended replicas.
        let mut ended = Vec::new();
        for r in &e.replicas {
            let state = desk.cx.engine.job(r.job).map(|j| j.state);
            if state.is_none_or(|s| s.is_final()) {
                ended.push((*r, state));
            }
        }
        for (r, state) in ended {
            let _ = desk.cx.engine.drop_replica(r.job);
            let Some(e) = self.list.get_mut(name) else {
                return;
            };
            e.replicas.retain(|x| x.job != r.job);
            if e.retiring.remove(&r.job).is_none() {
                let how = state.map_or("ended".to_string(), |s| s.to_string());
                let _ = desk.cx.record(
                    "service",
                    format!(
                        "service {name}: replica {} (job {}) {how}: replaced",
                        r.replica, r.job
                    ),
                );
            }
        }
        // Replicas that failed their probe.
        let Some(e) = self.list.get(name) else {
            return;
        };
        let failing: Vec<(ReplicaRecord, String)> = e
            .measured
            .failing
            .iter()
            .filter(|(id, _)| !e.retiring.contains_key(id))
            .filter_map(|(id, why)| {
                let r = e.replicas.iter().find(|r| r.job == *id)?;
                Some((*r, why.clone()))
            })
            .collect();
        for (r, why) in failing {
            self.retire(
                desk,
                name,
                r,
                &format!("failed its readiness probe ({why}): replaced"),
            );
        }
        let Some(e) = self.list.get(name) else {
            return;
        };
        let wanted = e.autoscaler.wanted(&e.svc) as usize;
        let ready: std::collections::HashSet<JobId> = e.measured.ready.iter().copied().collect();
        let live: Vec<ReplicaRecord> = e
            .replicas
            .iter()
            .filter(|r| !e.retiring.contains_key(&r.job))
            .copied()
            .collect();
        let (new, old): (Vec<ReplicaRecord>, Vec<ReplicaRecord>) =
            live.iter().partition(|r| r.version == version);
        let new_unready = new.iter().filter(|r| !ready.contains(&r.job)).count();
        let mut start = 0usize;
        let mut retire: Vec<ReplicaRecord> = Vec::new();
        // A spot service keeps `base_ondemand_fallback_replicas` of its replicas on demand,
        // and with `dynamic_ondemand_fallback` one more for each spot replica not ready.
        let spot = e.spec.use_spot || e.spec.alternatives.iter().any(|a| a.use_spot);
        let mut start_ondemand = 0usize;
        if old.is_empty() {
            let ondemand_target = if spot {
                let base = (e.svc.base_ondemand as usize).min(wanted);
                let covering = if e.svc.dynamic_ondemand_fallback {
                    live.iter()
                        .filter(|r| !r.ondemand && !ready.contains(&r.job))
                        .count()
                        .min(wanted - base)
                } else {
                    0
                };
                base + covering
            } else {
                0
            };
            let spot_target = if spot {
                wanted - (e.svc.base_ondemand as usize).min(wanted)
            } else {
                wanted
            };
            for (kind, target) in [(true, ondemand_target), (false, spot_target)] {
                let these: Vec<ReplicaRecord> = live
                    .iter()
                    .filter(|r| r.ondemand == kind)
                    .copied()
                    .collect();
                if these.len() < target {
                    if kind {
                        start_ondemand = target - these.len();
                    } else {
                        start = target - these.len();
                    }
                } else if these.len() > target {
                    // The ones not ready first (they serve nobody), then the newest.
                    let mut order = these.clone();
                    order.sort_by_key(|r| (ready.contains(&r.job), std::cmp::Reverse(r.replica)));
                    retire.extend(order.into_iter().take(these.len() - target));
                }
            }
        } else {
            // A rolling update: one new replica at a time; an old one leaves once the ready
            // ones can spare it.
            if new.len() < wanted && new_unready == 0 {
                let base = if spot {
                    (e.svc.base_ondemand as usize).min(wanted)
                } else {
                    0
                };
                if new.iter().filter(|r| r.ondemand).count() < base {
                    start_ondemand = 1;
                } else {
                    start = 1;
                }
            }
            let keep_ready = (e.svc.min_replicas.max(1) as usize).min(wanted.max(1));
            let mut ready_now = live.iter().filter(|r| ready.contains(&r.job)).count();
            let mut total = live.len();
            let mut old_order = old.clone();
            old_order.sort_by_key(|r| (ready.contains(&r.job), r.replica));
            for r in old_order {
                let is_ready = ready.contains(&r.job);
                let surplus = total > wanted || (new.len() >= wanted);
                if !surplus {
                    break;
                }
                if is_ready && ready_now <= keep_ready {
                    break;
                }
                if is_ready {
                    ready_now -= 1;
                }
                total -= 1;
                retire.push(r);
            }
        }
        for r in retire {
            let why = if r.version == version {
                "retired (scaled down)".to_string()
            } else {
                format!("retired (version {} replaced by {version})", r.version)
            };
            self.retire(desk, name, r, &why);
        }
        let kinds =
            std::iter::repeat_n(true, start_ondemand).chain(std::iter::repeat_n(false, start));
        for ondemand in kinds {
            if let Err(why) = self.start_replica(desk, name, ondemand) {
                let _ = desk.cx.record(
                    "service",
                    format!("service {name}: a replica could not be submitted: {why}"),
                );
                break;
            }
        }
    }

    /// Takes a replica out: out of the rotation now, cancelled at once if it serves nobody
    /// (not ready), else once the endpoint has no request in flight to it (`drain`).
    fn retire(&mut self, desk: &mut Desk, name: &str, r: ReplicaRecord, why: &str) {
        let now = desk.cx.now;
        let serving = match self.list.get_mut(name) {
            Some(e) => {
                e.retiring.insert(r.job, now);
                e.measured.ready.contains(&r.job)
            }
            None => false,
        };
        if !serving
            && desk
                .cx
                .engine
                .job(r.job)
                .is_some_and(|j| !j.state.is_final())
        {
            let _ = desk.act(r.job, Action::Cancel, &format!("service {name}"));
        }
        let _ = desk.cx.record(
            "service",
            format!(
                "service {name}: replica {} (job {}) {why}",
                r.replica, r.job
            ),
        );
    }

    /// Retiring replicas cancelled once the endpoint has had a beat to take them out of its
    /// rotation and has no request in flight to them (at most the stream timeout later).
    fn drain(&mut self, desk: &mut Desk, name: &str) {
        let now = desk.cx.now;
        let Some(e) = self.list.get(name) else {
            return;
        };
        let done: Vec<JobId> = e
            .retiring
            .iter()
            .filter(|(job, since)| {
                let idle = now - **since >= DRAIN_BEAT_S && !e.measured.busy.contains(job);
                idle || now - **since >= e.svc.stream_timeout_s
            })
            .map(|(job, _)| *job)
            .filter(|job| {
                desk.cx
                    .engine
                    .job(*job)
                    .is_some_and(|j| !j.state.is_final())
            })
            .collect();
        for job in done {
            let _ = desk.act(job, Action::Cancel, &format!("service {name}"));
        }
    }

    /// Submits the next replica of service `name`.
    fn start_replica(
        &mut self,
        desk: &mut Desk,
        name: &str,
        ondemand: bool,
    ) -> Result<JobId, String> {
        let port = {
            let e = self.list.get(name).ok_or("no such service")?;
            e.svc.port
        };
        let port = match port {
            Some(p) => p,
            None => self.free_replica_port().ok_or(
                "no free replica port from 41001 to 48999: give the service a fixed `ports`",
            )?,
        };
        let e = self.list.get(name).ok_or("no such service")?;
        let replica = e.next_replica;
        let text = replica_text(&e.record.spec, name, replica, port, ondemand)?;
        let sub = Submission {
            file: e.record.file.clone(),
            text: text.into_bytes(),
            team: Some(e.record.team.clone()),
            priority: Some(e.class.clone()),
            only_team: None,
            parsed: None,
            idempotency_key: None,
            user: e.record.user.clone(),
            from_backend: false,
            sent_text: None,
            reported: false,
        };
        let version = e.record.version;
        let id = desk
            .submit(&[sub])
            .pop()
            .ok_or("no answer")?
            .map_err(|e| e.to_string())?;
        let r = ReplicaRecord {
            job: id,
            replica,
            port,
            version,
            ondemand,
        };
        desk.cx
            .engine
            .add_replica(name, &r)
            .map_err(|e| e.to_string())?;
        if let Some(e) = self.list.get_mut(name) {
            e.replicas.push(r);
            e.next_replica = replica + 1;
        }
        Ok(id)
    }

    /// A free endpoint of `policy`'s ports (none of `reserved`), on its first address.
    pub(super) fn free_endpoint(
        &self,
        (policy, reserved): (&crate::config::fleet::ServiceSettings, &[u16]),
    ) -> Option<String> {
        let taken: Vec<std::net::SocketAddr> = self
            .list
            .values()
            .filter_map(|e| e.record.endpoint.parse().ok())
            .collect();
        let ip = *policy.ips().first()?;
        policy
            .port_range()?
            .filter(|p| !reserved.contains(p))
            .map(|p| std::net::SocketAddr::new(ip, p))
            .find(|a| {
                !taken.iter().any(|t| super::endpoints::overlaps(*t, *a))
                    && std::net::TcpListener::bind(a).is_ok()
            })
            .map(|a| a.to_string())
    }

    /// A port no live replica of any service has, and free on this host (where replicas of a
    /// local pool listen).
    fn free_replica_port(&self) -> Option<u16> {
        let taken: std::collections::HashSet<u16> = self
            .list
            .values()
            .flat_map(|e| e.replicas.iter().map(|r| r.port))
            .collect();
        // From a random place in the range: two daemons on one host (or a port just given
        // whose server has not bound it yet) rarely reach for the same one.
        let span = u32::from(REPLICA_PORTS.end() - REPLICA_PORTS.start()) + 1;
        let start = crate::random::random_hex(4)
            .ok()
            .and_then(|h| u32::from_str_radix(&h, 16).ok())
            .unwrap_or(0)
            % span;
        (0..span)
            .map(|i| REPLICA_PORTS.start() + ((start + i) % span) as u16)
            .find(|p| !taken.contains(p) && std::net::TcpListener::bind(("127.0.0.1", *p)).is_ok())
    }
}

/// Where a running replica serves: its first node's address and its port.
pub(super) fn replica_address(
    (runs, fleet): (&Runs, &crate::model::Fleet),
    r: &ReplicaRecord,
) -> Option<String> {
    let (node, said) = runs.running_at(r.job)?;
    Some({
        // What the backend reaches the host by (this host is 127.0.0.1, an SSH host its
        // destination), as the daemon connects from where the backend runs.
        let host = said.unwrap_or_else(|| runs.host_address(fleet, node));
        if host.contains(':') {
            format!("[{host}]:{}", r.port)
        } else {
            format!("{host}:{}", r.port)
        }
    })
}
