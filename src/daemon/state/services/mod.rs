//! Services (`gantry serve up`): each is a set of replica jobs of one task, kept at the count
//! its autoscaler wants. The state owns what a service is (its file, version, endpoint,
//! replicas, journaled) and decides (how many replicas, which to retire, which failed); the
//! endpoint and the probes are IO, done by `daemon::services`, which reports what it measured
//! (`Measured`) every second.

use super::cx::Cx;
use super::desk::Desk;
use super::runs::Runs;
use crate::api::services::{ReplicaRow, ServiceRow};
use crate::api::{Action, JobRow};
use crate::config::fleet::ServiceSettings;
use crate::daemon::engine::{Engine, EngineError, Submission};
use crate::daemon::journal::JobId;
use crate::daemon::journal::{ReplicaRecord, ServiceRecord};
use crate::scheduler::autoscale::Autoscaler;
use crate::spec::service::ServiceSpec;
use std::collections::{BTreeMap, HashMap};

mod endpoints;
mod replicas;

/// How long a retiring replica stays up at least: the endpoint sees it leave the rotation
/// within a beat (250 ms) and a report (1 s).
const DRAIN_BEAT_S: f64 = 1.5;
/// Ports given to replicas that do not name theirs (`$PORT`).
pub const REPLICA_PORTS: std::ops::RangeInclusive<u16> = 41001..=48999;

/// What the endpoint and the probes measured of one service, as last reported.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// The scale signal's value (requests per second over the window, or the metric's sum).
    pub load: Option<f64>,
    pub qps: f64,
    pub latency_p50_ms: Option<f64>,
    pub latency_p99_ms: Option<f64>,
    pub requests: u64,
    pub failed_requests: u64,
    pub turned_away: u64,
    /// Replicas whose probe answered 2xx last.
    pub ready: Vec<JobId>,
    /// Replicas that failed their probe past its initial delay (or after being ready), with
    /// the probe's last answer: they are replaced.
    pub failing: Vec<(JobId, String)>,
    /// Why a replica is not ready yet (its probe's last answer).
    pub waiting: Vec<(JobId, String)>,
    /// The endpoint could not be served (its port taken).
    pub endpoint_error: Option<String>,
    /// Replicas with requests in flight through the endpoint.
    pub busy: Vec<JobId>,
}

/// `gantry serve up`: a service's file, and what the caller gave over it.
pub struct ServiceUp {
    pub submission: Submission,
    /// The service's name (else the file's `name`, else the file's stem).
    pub name: Option<String>,
    /// Where to serve it (`0.0.0.0:8000`); else `127.0.0.1` at the first free port from 30001.
    pub endpoint: Option<String>,
    /// Its endpoint asks for a bearer token from now on: a new one is made (and an old one
    /// replaced), answered once.
    pub auth: bool,
}

pub use crate::api::ServiceUpAnswer;

pub(super) struct Service {
    record: ServiceRecord,
    /// Its file parsed: each replica's spec is this without `service`.
    spec: crate::spec::JobSpec,
    svc: ServiceSpec,
    class: String,
    autoscaler: Autoscaler,
    replicas: Vec<ReplicaRecord>,
    /// Replicas the service retired (scale-down, update, failed probe) and since when: out of
    /// the rotation at once, cancelled once their requests in flight are answered; their ends
    /// are not failures to replace.
    retiring: HashMap<JobId, f64>,
    measured: Measured,
    last_decision: Option<String>,
    /// The number the next replica gets (numbers are not reused while the daemon runs).
    next_replica: u32,
}

impl Service {
    /// A service as its record says, with the replicas it has (none when new).
    fn new(
        record: ServiceRecord,
        spec: crate::spec::JobSpec,
        svc: ServiceSpec,
        class: String,
        replicas: Vec<ReplicaRecord>,
    ) -> Service {
        let next_replica = replicas.iter().map(|r| r.replica).max().unwrap_or(0) + 1;
        Service {
            autoscaler: Autoscaler::new(&svc),
            record,
            spec,
            svc,
            class,
            replicas,
            retiring: Default::default(),
            measured: Measured::default(),
            last_decision: None,
            next_replica,
        }
    }
}

#[derive(Default)]
pub(super) struct Services {
    list: BTreeMap<String, Service>,
}

/// A service's name: what its replicas' jobs are named after and `gantry service NAME` finds.
fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        && name.starts_with(|c: char| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(format!("service name `{name}`: use up to 63 letters, digits, `-` and `_`, starting with a letter or digit"))
    }
}

/// The replica's file: the service's, without `service:`, named after it and told its port.
/// `ondemand`: the replica is one of a spot service's on-demand ones
/// (`base_ondemand_fallback_replicas`, `dynamic_ondemand_fallback`): `use_spot: false`
/// wherever its resources say otherwise.
fn replica_text(
    text: &[u8],
    service: &str,
    replica: u32,
    port: u16,
    ondemand: bool,
) -> Result<String, String> {
    use serde_yaml_ng::{Mapping, Value};
    let text = std::str::from_utf8(text).map_err(|e| format!("the file is not UTF-8: {e}"))?;
    let mut doc: Value = serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?;
    let Value::Mapping(m) = &mut doc else {
        return Err("the file is not a mapping".to_string());
    };
    m.remove("service");
    if ondemand {
        if let Some(Value::Mapping(r)) = m.get_mut("resources") {
            r.insert(Value::from("use_spot"), Value::from(false));
            for key in ["any_of", "ordered"] {
                if let Some(Value::Sequence(ways)) = r.get_mut(key) {
                    for w in ways.iter_mut() {
                        if let Value::Mapping(w) = w {
                            w.insert(Value::from("use_spot"), Value::from(false));
                        }
                    }
                }
            }
        }
    }
    m.insert(
        Value::from("name"),
        Value::from(format!("{service}-{replica}")),
    );
    let envs = m
        .entry(Value::from("envs"))
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    if envs.is_null() {
        *envs = Value::Mapping(Mapping::new());
    }
    let Value::Mapping(envs) = envs else {
        return Err("`envs` is not a mapping".to_string());
    };
    envs.insert(Value::from("PORT"), Value::from(port.to_string()));
    envs.insert(
        Value::from("SKYPILOT_SERVE_REPLICA_ID"),
        Value::from(replica.to_string()),
    );
    envs.insert(Value::from("GANTRY_SERVICE"), Value::from(service));
    serde_yaml_ng::to_string(&doc).map_err(|e| e.to_string())
}

impl Services {
    /// The services the journal holds, with their replicas (at open).
    pub(super) fn open(&mut self, cx: &mut Cx, classes: &[String]) -> Result<(), EngineError> {
        let records = cx.engine.services()?;
        let mut replicas: HashMap<String, Vec<ReplicaRecord>> = HashMap::new();
        for (name, r) in cx.engine.replicas()? {
            replicas.entry(name).or_default().push(r);
        }
        for record in records {
            let reps = replicas.remove(&record.name).unwrap_or_default();
            match service_of(classes, &record, None) {
                Ok((spec, svc, class)) => {
                    let mut e = Service::new(record, spec, svc, class, reps);
                    // Carry on at the count it had: a restart is no reason to scale down.
                    e.autoscaler.target = (e.replicas.len() as u32)
                        .saturating_sub(e.svc.overprovision)
                        .clamp(e.svc.min_replicas, e.svc.max_replicas);
                    self.list.insert(e.record.name.clone(), e);
                }
                Err(why) => cx.warn(format!(
                    "service {}: its file no longer reads ({why}): it is not served; `gantry serve down {}` forgets it",
                    record.name, record.name
                )),
            }
        }
        Ok(())
    }

    /// Starts a service, or rolls it to a new version (its replicas replaced one at a time).
    /// What changed is journaled; the answer says whether the snapshot is to be rebuilt.
    pub(super) fn up(
        &mut self,
        (desk, settings, reserved): (&mut Desk, &ServiceSettings, &[u16]),
        up: ServiceUp,
        caller: &crate::daemon::auth::Caller,
    ) -> Result<(ServiceUpAnswer, bool), crate::daemon::refusal::Refusal> {
        use crate::daemon::refusal::{Kind, Refusal};
        let s = &up.submission;
        // Parsed off the actor's thread by the API; parsed here for in-process callers.
        let spec = match &s.parsed {
            Some(p) => p.clone(),
            None => crate::spec::parse(&s.file, &s.text).map_err(EngineError::Spec)?,
        };
        if spec.service.is_none() {
            return Err(Refusal {
                field: Some("service".to_string()),
                ..Refusal::bad_request(format!("{}: the file has no `service:` section: a service needs one (`readiness_probe`, `replicas` or `replica_policy`); a task runs once with `gantry submit`", s.file))
            });
        }
        let name = up
            .name
            .clone()
            .or_else(|| spec.name.clone())
            .or_else(|| {
                std::path::Path::new(&s.file)
                    .file_stem()
                    .map(|f| f.to_string_lossy().into_owned())
            })
            .unwrap_or_default();
        check_name(&name).map_err(Refusal::bad_request)?;
        let team = s
            .team
            .clone()
            .or_else(|| spec.team.clone())
            .or_else(|| s.only_team.clone())
            .unwrap_or_else(|| "default".to_string());
        if !caller.may_change(&team) {
            return Err(Refusal::forbidden(format!(
                "service {name} would be team {team}'s: a researcher token serves its own team's only"
            )));
        }
        let existing = self.list.get(&name);
        if let Some(e) = existing {
            if !caller.may_change(&e.record.team) {
                return Err(Refusal::forbidden(format!(
                    "service {name} is team {}'s: only its researchers and the operators may update it",
                    e.record.team
                )));
            }
            if up
                .endpoint
                .as_ref()
                .is_some_and(|a| *a != e.record.endpoint)
            {
                return Err(Refusal::new(Kind::Conflict, "conflict", format!(
                    "service {name} is served at {}: an update keeps its endpoint (`gantry serve down {name}` first to move it)",
                    e.record.endpoint
                )));
            }
        }
        // A token for the endpoint, when asked for: made here, only its digest kept.
        let token = if up.auth {
            Some(crate::daemon::auth::new_token().map_err(|e| {
                Refusal::new(
                    Kind::Internal,
                    "internal",
                    format!("cannot read random bytes: {e}"),
                )
            })?)
        } else {
            None
        };
        let auth = token
            .as_deref()
            .map(crate::daemon::auth::hash_token)
            .or_else(|| existing.and_then(|e| e.record.auth.clone()));
        // The same file again (a retry, a script run twice): nothing changes but the token.
        if let Some(e) = existing.filter(|e| {
            e.record.spec == s.text && e.record.priority == s.priority && e.record.team == team
        }) {
            let answer = ServiceUpAnswer {
                name: name.clone(),
                version: e.record.version,
                endpoint: e.record.endpoint.clone(),
                replicas: e.autoscaler.wanted(&e.svc),
                token,
            };
            if answer.token.is_some() {
                let mut record = e.record.clone();
                record.auth = auth;
                desk.cx
                    .engine
                    .save_service(&record)
                    .map_err(EngineError::from)?;
                if let Some(e) = self.list.get_mut(&name) {
                    e.record = record;
                }
                let _ = desk
                    .cx
                    .record("service", format!("service {name}: a new endpoint token"));
                return Ok((answer, true));
            }
            return Ok((answer, false));
        }
        let endpoint = match (existing, &up.endpoint) {
            (Some(e), _) => e.record.endpoint.clone(),
            (None, Some(a)) => self.allowed_endpoint((settings, reserved), a, caller)?,
            (None, None) => self.free_endpoint((settings, reserved)).ok_or_else(|| {
                Refusal::new(
                    Kind::Conflict,
                    "conflict",
                    format!(
                        "no free endpoint port in [services] ports ({}) on {}: give one (`--endpoint ADDR:PORT`), or an operator widens the range",
                        settings.ports,
                        settings.addresses.join(", ")
                    ),
                )
            })?,
        };
        let record = ServiceRecord {
            name: name.clone(),
            file: s.file.clone(),
            spec: s.text.clone(),
            team: team.clone(),
            user: s.user.clone(),
            priority: s.priority.clone(),
            endpoint: endpoint.clone(),
            version: existing.map_or(1, |e| e.record.version + 1),
            created_at: desk.cx.now,
            auth,
        };
        let (spec, svc, class) =
            service_of(desk.classes, &record, Some(spec)).map_err(Refusal::bad_request)?;
        // Would a replica be admitted? Asked before anything is kept, so a file no node
        // can run (or a class the team may not use) is refused here, at its field.
        let probe = Submission {
            file: s.file.clone(),
            text: replica_text(&s.text, &name, 1, svc.port.unwrap_or(1), false)
                .map_err(Refusal::bad_request)?
                .into_bytes(),
            team: Some(team.clone()),
            priority: Some(class.clone()),
            only_team: s.only_team.clone(),
            parsed: None,
            idempotency_key: None,
            user: s.user.clone(),
            from_backend: false,
            sent_text: None,
            reported: false,
        };
        desk.preview(&probe)?;
        desk.cx
            .engine
            .save_service(&record)
            .map_err(EngineError::from)?;
        let version = record.version;
        let what = match self.list.get_mut(&name) {
            Some(e) => {
                e.record = record;
                e.spec = spec;
                e.svc = svc;
                e.class = class;
                e.autoscaler.respec(&e.svc);
                format!(
                    "service {name}: version {version} (its replicas are replaced one at a time)"
                )
            }
            None => {
                self.list.insert(
                    name.clone(),
                    Service::new(record, spec, svc, class, Vec::new()),
                );
                format!("service {name} up at {endpoint} by {}", caller.name)
            }
        };
        let _ = desk.cx.record("service", what);
        self.reconcile(desk, &name);
        let wanted = self
            .list
            .get(&name)
            .map_or(0, |e| e.autoscaler.wanted(&e.svc));
        Ok((
            ServiceUpAnswer {
                name,
                version,
                endpoint,
                replicas: wanted,
                token,
            },
            true,
        ))
    }

    /// Each service whose endpoint asks for a bearer token, with the token's SHA-256: what the
    /// endpoints check (kept out of the snapshot, which every viewer reads).
    pub(super) fn tokens(&self) -> HashMap<String, String> {
        self.list
            .iter()
            .filter_map(|(n, e)| Some((n.clone(), e.record.auth.clone()?)))
            .collect()
    }

    /// Stops a service: its replicas cancelled, its record forgotten.
    pub(super) fn down(
        &mut self,
        desk: &mut Desk,
        name: &str,
        caller: &crate::daemon::auth::Caller,
    ) -> Result<Vec<JobId>, crate::daemon::refusal::Refusal> {
        use crate::daemon::refusal::{Kind, Refusal};
        let Some(e) = self.list.get(name) else {
            let known: Vec<&String> = self.list.keys().collect();
            return Err(Refusal::new(
                Kind::NotFound,
                "not-found",
                format!(
                    "no service named {name} (services: {})",
                    if known.is_empty() {
                        "none".to_string()
                    } else {
                        known
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ),
            ));
        };
        if !caller.may_change(&e.record.team) {
            return Err(Refusal::forbidden(format!(
                "service {name} is team {}'s: only its researchers and the operators may stop it",
                e.record.team
            )));
        }
        let jobs: Vec<JobId> = e.replicas.iter().map(|r| r.job).collect();
        desk.cx
            .engine
            .delete_service(name)
            .map_err(EngineError::from)?;
        self.list.remove(name);
        let mut cancelled = Vec::new();
        for id in jobs {
            if desk.cx.engine.job(id).is_some_and(|j| !j.state.is_final())
                && desk.act(id, Action::Cancel, &caller.name).is_ok()
            {
                cancelled.push(id);
            }
        }
        let _ = desk.cx.record(
            "service",
            format!(
                "service {name} down by {}: {} replica(s) cancelled",
                caller.name,
                cancelled.len()
            ),
        );
        Ok(cancelled)
    }

    /// What the endpoints and probes measured: the autoscalers decide, replicas that failed
    /// are replaced, the counts are kept.
    /// True when jobs were submitted or cancelled (a scheduling cycle is due); else only the
    /// snapshot's services were brought up to date.
    pub(super) fn measured(&mut self, desk: &mut Desk, measured: Vec<(String, Measured)>) -> bool {
        // Every submission, cancel and retirement is an event: no new event, no new job.
        let events = desk.cx.log.total();
        for (name, m) in measured {
            let Some(e) = self.list.get_mut(&name) else {
                continue;
            };
            e.measured = m;
            self.reconcile(desk, &name);
        }
        desk.cx.log.total() != events
    }

    /// The services as the snapshot shows them; `jobs` are the snapshot's rows.
    pub(super) fn rows(
        &self,
        (engine, runs): (&Engine, &Runs),
        jobs: &[std::sync::Arc<JobRow>],
    ) -> Vec<ServiceRow> {
        if self.list.is_empty() {
            return Vec::new();
        }
        let rows: HashMap<i64, &JobRow> = jobs.iter().map(|j| (j.id, &**j)).collect();
        self.list
            .values()
            .map(|e| {
                let ready: std::collections::HashSet<JobId> =
                    e.measured.ready.iter().copied().collect();
                let why: HashMap<JobId, &String> = e
                    .measured
                    .waiting
                    .iter()
                    .chain(&e.measured.failing)
                    .map(|(j, w)| (*j, w))
                    .collect();
                let mut gpus = 0.0;
                let mut dollars = 0.0;
                let replicas: Vec<ReplicaRow> = e
                    .replicas
                    .iter()
                    .map(|r| {
                        let job = engine.job(r.job);
                        let state = job.map_or("ended".to_string(), |j| j.state.to_string());
                        if let Some(j) = job.filter(|j| j.placement.is_some()) {
                            gpus += j.shape().total_gpu_milli() as f64 / 1000.0;
                        }
                        if let Some(row) = rows.get(&r.job) {
                            dollars += row.dollars_per_hour;
                        }
                        let is_ready = ready.contains(&r.job);
                        let retiring = e.retiring.contains_key(&r.job);
                        let detail = if retiring {
                            "retiring".to_string()
                        } else if is_ready {
                            "ready".to_string()
                        } else if let Some(w) = why.get(&r.job) {
                            (*w).clone()
                        } else if state == "running" {
                            "starting".to_string()
                        } else {
                            rows.get(&r.job)
                                .map_or(String::new(), |row| row.detail.clone())
                        };
                        ReplicaRow {
                            replica: r.replica,
                            job: r.job,
                            version: r.version,
                            state,
                            ready: is_ready,
                            address: replicas::replica_address((runs, engine.fleet()), r),
                            retiring,
                            ondemand: r.ondemand,
                            detail,
                            started_s: job.and_then(|j| j.started_at),
                        }
                    })
                    .collect();
                let ready_n = replicas.iter().filter(|r| r.ready && !r.retiring).count() as u32;
                let live = replicas
                    .iter()
                    .filter(|r| !e.retiring.contains_key(&r.job))
                    .count() as u32;
                let wanted = e.autoscaler.wanted(&e.svc);
                let status = match (&e.measured.endpoint_error, ready_n, wanted) {
                    (Some(err), _, _) => format!("endpoint failed: {err}"),
                    (None, 0, 0) => "no replica".to_string(),
                    (None, 0, _) => "starting".to_string(),
                    _ => "ready".to_string(),
                };
                ServiceRow {
                    name: e.record.name.clone(),
                    team: e.record.team.clone(),
                    class: e.class.clone(),
                    version: e.record.version,
                    endpoint: e.record.endpoint.clone(),
                    status,
                    wanted,
                    ready: ready_n,
                    live,
                    load: e.measured.load,
                    qps: e.measured.qps,
                    latency_p50_ms: e.measured.latency_p50_ms,
                    latency_p99_ms: e.measured.latency_p99_ms,
                    requests: e.measured.requests,
                    failed_requests: e.measured.failed_requests,
                    turned_away: e.measured.turned_away,
                    gpus,
                    dollars_per_hour: dollars,
                    last_decision: e.last_decision.clone(),
                    replicas,
                    spec: e.svc.clone(),
                }
            })
            .collect()
    }
}

/// A record's file parsed, and the class its replicas run in.
fn service_of(
    classes: &[String],
    r: &ServiceRecord,
    parsed: Option<crate::spec::JobSpec>,
) -> Result<(crate::spec::JobSpec, ServiceSpec, String), String> {
    let spec = match parsed {
        Some(p) => p,
        None => crate::spec::parse(&r.file, &r.spec).map_err(|e| e.to_string())?,
    };
    let svc = spec
        .service
        .clone()
        .ok_or_else(|| format!("{}: the file has no `service:` section: a service needs one (its replicas, readiness probe and policy); submit a task with `gantry submit`", r.file))?;
    let class = r
        .priority
        .clone()
        .or_else(|| spec.priority.clone())
        .unwrap_or_else(|| {
            if classes.iter().any(|c| c == "serving") {
                "serving".to_string()
            } else {
                classes.first().cloned().unwrap_or_default()
            }
        });
    Ok((spec, *svc, class))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replicas_file_drops_the_service_and_says_its_port() {
        let text = b"name: web\nservice:\n  readiness_probe: /\n  replicas: 2\nenvs:\n  A: b\nrun: python3 -m http.server $PORT\n";
        let t = replica_text(text, "web", 3, 41007, false).unwrap();
        let spec = crate::spec::parse("r.yaml", t.as_bytes()).unwrap();
        assert!(spec.service.is_none());
        assert_eq!(spec.name.as_deref(), Some("web-3"));
        assert_eq!(spec.envs.get("PORT").map(String::as_str), Some("41007"));
        assert_eq!(spec.envs.get("A").map(String::as_str), Some("b"));
        assert_eq!(
            spec.envs
                .get("SKYPILOT_SERVE_REPLICA_ID")
                .map(String::as_str),
            Some("3")
        );
    }

    #[test]
    fn an_ondemand_replica_of_a_spot_service_is_not_spot() {
        let text = b"service:\n  replica_policy:\n    min_replicas: 2\n    max_replicas: 2\n    base_ondemand_fallback_replicas: 1\nresources:\n  use_spot: true\n  any_of:\n    - accelerators: H100:1\n    - accelerators: A100:1\nrun: x\n";
        let spot = crate::spec::parse(
            "r.yaml",
            replica_text(text, "s", 1, 1, false).unwrap().as_bytes(),
        )
        .unwrap();
        assert!(spot.ways().iter().all(|w| w.use_spot));
        let od = crate::spec::parse(
            "r.yaml",
            replica_text(text, "s", 2, 1, true).unwrap().as_bytes(),
        )
        .unwrap();
        assert!(od.ways().iter().all(|w| !w.use_spot), "{od:?}");
        assert_eq!(od.ways().len(), 2);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("llama-70b_v2").is_ok());
        assert!(check_name("-x").is_err());
        assert!(check_name("a b").is_err());
        assert!(check_name("").is_err());
    }
}
