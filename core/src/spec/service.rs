//! SkyPilot's `service:` section (SkyServe): replicas behind one endpoint, a readiness probe,
//! and the policy that scales them, read into a [`ServiceSpec`]. Each replica is a job of the
//! task the file describes; running the replicas, the endpoint and the autoscaler are the
//! daemon's (`daemon::services`), deciding how many is `scheduler::autoscale`'s.

use super::task::{present, Reader, Refused};
use super::values::{kind, Count, Number, Text};
use super::SpecError;
use serde::{Deserialize, Serialize};
use serde_yaml_ng::Value;

type Ignored = serde::de::IgnoredAny;

/// SkyServe's defaults (`sky/serve/constants.py`), so a file behaves as `sky serve up` runs it.
pub const DEFAULT_INITIAL_DELAY_S: f64 = 1200.0;
pub const DEFAULT_PROBE_TIMEOUT_S: f64 = 15.0;
pub const DEFAULT_PROBE_INTERVAL_S: f64 = 10.0;
pub const DEFAULT_UPSCALE_DELAY_S: f64 = 300.0;
pub const DEFAULT_DOWNSCALE_DELAY_S: f64 = 1200.0;
pub const DEFAULT_QPS_WINDOW_S: f64 = 60.0;
pub const DEFAULT_STREAM_TIMEOUT_S: f64 = 120.0;
/// The most replicas one service may ask for.
pub const MAX_REPLICAS: u32 = 1000;

/// A service: how many replicas of the task, when one is ready, how traffic reaches them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServiceSpec {
    pub readiness: Readiness,
    pub min_replicas: u32,
    pub max_replicas: u32,
    /// What the replica count follows between min and max (`None`: fixed at `min_replicas`).
    pub signal: Option<ScaleSignal>,
    pub upscale_delay_s: f64,
    pub downscale_delay_s: f64,
    /// Requests over this window make the QPS the autoscaler reads (SkyServe: 60 s).
    pub qps_window_s: f64,
    /// Replicas above the autoscaler's target, kept warm (SkyServe's `num_overprovision`).
    pub overprovision: u32,
    /// The port each replica serves on (`ports`); `None`: gantry gives each its own in `$PORT`.
    pub port: Option<u16>,
    pub balance: Balance,
    /// How long the endpoint waits for a replica's answer.
    pub stream_timeout_s: f64,
    /// Of a spot service's replicas, how many always run on demand
    /// (`base_ondemand_fallback_replicas`).
    pub base_ondemand: u32,
    /// A spot replica that is not ready is covered by an on-demand one until it is
    /// (`dynamic_ondemand_fallback`).
    pub dynamic_ondemand_fallback: bool,
}

/// When a replica takes traffic: its probe answers 2xx.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Readiness {
    /// Starts with `/`.
    pub path: String,
    /// Failures before this are the replica starting, not failing.
    pub initial_delay_s: f64,
    pub timeout_s: f64,
    pub interval_s: f64,
    /// Sent as a POST body (JSON) where given; else the probe is a GET.
    pub post_data: Option<String>,
    pub headers: Vec<(String, String)>,
}

/// What the replica count follows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum ScaleSignal {
    /// Requests per second through the endpoint, over the QPS window (SkyServe's).
    Qps { per_replica: f64 },
    /// A gauge the replicas expose in Prometheus text (vLLM's `vllm:num_requests_waiting`),
    /// summed over the ready replicas (gantry's).
    Metric {
        name: String,
        path: String,
        per_replica: f64,
    },
}

impl ScaleSignal {
    pub fn per_replica(&self) -> f64 {
        match self {
            ScaleSignal::Qps { per_replica } | ScaleSignal::Metric { per_replica, .. } => {
                *per_replica
            }
        }
    }
    /// What the signal is called in events ("qps", "vllm:num_requests_waiting").
    pub fn name(&self) -> &str {
        match self {
            ScaleSignal::Qps { .. } => "qps",
            ScaleSignal::Metric { name, .. } => name,
        }
    }
}

/// How the endpoint picks a ready replica for each request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Balance {
    RoundRobin,
    /// The replica with the fewest requests in flight.
    LeastLoad,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawService {
    readiness_probe: Option<Value>,
    replicas: Option<Count>,
    replica_policy: Option<RawPolicy>,
    ports: Option<Count>,
    load_balancing_policy: Option<Text>,
    load_balancer: Option<RawBalancer>,
    tls: Option<Ignored>,
    pool: Option<Ignored>,
    workers: Option<Ignored>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    min_replicas: Option<Count>,
    max_replicas: Option<Count>,
    num_overprovision: Option<Count>,
    target_qps_per_replica: Option<Value>,
    dynamic_ondemand_fallback: Option<bool>,
    base_ondemand_fallback_replicas: Option<Count>,
    spot_placer: Option<Text>,
    upscale_delay_seconds: Option<Number>,
    downscale_delay_seconds: Option<Number>,
    // gantry's
    /// The window the QPS is measured over, seconds (SkyServe's is 60, fixed).
    qps_window_seconds: Option<Number>,
    /// Scale on a metric the replicas expose instead of the endpoint's QPS.
    target_metric: Option<RawMetric>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMetric {
    name: Text,
    per_replica: Number,
    path: Option<Text>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBalancer {
    stream_timeout_seconds: Option<Number>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProbe {
    path: Text,
    initial_delay_seconds: Option<Number>,
    timeout_seconds: Option<Number>,
    endpoint_probe_interval_seconds: Option<Number>,
    consecutive_failure_threshold_timeout: Option<Number>,
    post_data: Option<Value>,
    headers: Option<std::collections::BTreeMap<String, Text>>,
}

impl Reader<'_> {
    /// The `service:` section, checked as SkyServe checks it (`service_spec.py`), each
    /// refusal at its field.
    pub(super) fn service(&mut self, raw: RawService) -> Result<ServiceSpec, SpecError> {
        self.others(
            "service.",
            present([
                (raw.tls.is_some(), "tls", Refused("the endpoint serves plain HTTP: put TLS in front of it (a reverse proxy, an ingress)")),
                (raw.pool.is_some(), "pool", Refused("SkyPilot pools (workers kept warm for batch jobs) are not gantry's: submit each job to gantry's queue")),
                (raw.workers.is_some(), "workers", Refused("SkyPilot pools (workers kept warm for batch jobs) are not gantry's: give `replicas` for a service")),
            ]),
        )?;
        let readiness = self.readiness(raw.readiness_probe)?;
        let stream_timeout_s = raw
            .load_balancer
            .and_then(|b| b.stream_timeout_seconds)
            .map_or(DEFAULT_STREAM_TIMEOUT_S, |n| n.0);
        if stream_timeout_s <= 0.0 {
            return Err(self.err(
                "service.load_balancer.stream_timeout_seconds",
                format!("{stream_timeout_s}: give a number of seconds above 0"),
            ));
        }
        let balance = match raw.load_balancing_policy.as_ref().map(|t| t.0.to_ascii_lowercase()) {
            None => Balance::LeastLoad,
            Some(p) => match p.as_str() {
                "round_robin" => Balance::RoundRobin,
                "least_load" => Balance::LeastLoad,
                "instance_aware_least_load" => {
                    self.ignored.push("service.load_balancing_policy: `instance_aware_least_load` weighs replicas by their GPU type's QPS target; gantry balances by requests in flight (`least_load`)".to_string());
                    Balance::LeastLoad
                }
                other => {
                    return Err(self.err(
                        "service.load_balancing_policy",
                        format!("`{other}`: allowed values are round_robin, least_load and instance_aware_least_load"),
                    ))
                }
            },
        };
        let port = match raw.ports {
            None => None,
            Some(Count(p)) if (1..=65535).contains(&p) => Some(p as u16),
            Some(Count(p)) => {
                return Err(self.err(
                    "service.ports",
                    format!("{p}: a port is between 1 and 65535"),
                ))
            }
        };
        let mut spec = ServiceSpec {
            readiness,
            min_replicas: 1,
            max_replicas: 1,
            signal: None,
            upscale_delay_s: DEFAULT_UPSCALE_DELAY_S,
            downscale_delay_s: DEFAULT_DOWNSCALE_DELAY_S,
            qps_window_s: DEFAULT_QPS_WINDOW_S,
            overprovision: 0,
            port,
            balance,
            stream_timeout_s,
            base_ondemand: 0,
            dynamic_ondemand_fallback: false,
        };
        match (raw.replicas, raw.replica_policy) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    "service.replicas",
                    "give either `replicas` (a fixed count) or `replica_policy`, not both"
                        .to_string(),
                ))
            }
            (Some(Count(n)), None) => {
                self.replica_count("service.replicas", n)?;
                spec.min_replicas = n;
                spec.max_replicas = n;
            }
            (None, Some(p)) => self.policy(p, &mut spec)?,
            (None, None) => {}
        }
        Ok(spec)
    }

    /// Seconds at `path` (0 or more), or `default` where not given.
    fn seconds(&self, path: &str, v: Option<Number>, default: f64) -> Result<f64, SpecError> {
        let s = v.map_or(default, |n| n.0);
        if s < 0.0 {
            return Err(self.err(path, format!("{s}: give seconds, 0 or more")));
        }
        Ok(s)
    }

    fn replica_count(&self, path: &str, n: u32) -> Result<(), SpecError> {
        if n > MAX_REPLICAS {
            return Err(self.err(
                path,
                format!("{n}: a service has at most {MAX_REPLICAS} replicas"),
            ));
        }
        Ok(())
    }

    fn policy(&mut self, p: RawPolicy, spec: &mut ServiceSpec) -> Result<(), SpecError> {
        const AT: &str = "service.replica_policy";
        let Some(Count(min)) = p.min_replicas else {
            return Err(self.err(
                AT,
                "`min_replicas` is required (the replicas kept when there is no traffic)"
                    .to_string(),
            ));
        };
        self.replica_count(&format!("{AT}.min_replicas"), min)?;
        let max = p.max_replicas.map(|c| c.0);
        if let Some(max) = max {
            self.replica_count(&format!("{AT}.max_replicas"), max)?;
            if max < min {
                return Err(self.err(
                    &format!("{AT}.max_replicas"),
                    format!("{max} is below `min_replicas` ({min}): give a maximum at least the minimum"),
                ));
            }
        }
        let qps = match p.target_qps_per_replica {
            None => None,
            Some(Value::Number(n)) => match n.as_f64().filter(|x| x.is_finite() && *x > 0.0) {
                Some(x) => Some(x),
                None => {
                    return Err(self.err(
                        &format!("{AT}.target_qps_per_replica"),
                        format!("{n}: give requests per second above 0"),
                    ))
                }
            },
            Some(Value::Mapping(m)) => {
                // SkyServe's instance-aware autoscaler weighs each replica by its GPU's
                // target; gantry counts replicas, each at the lowest target given.
                let lowest = m
                    .values()
                    .filter_map(Value::as_f64)
                    .filter(|x| x.is_finite() && *x > 0.0)
                    .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.min(x))));
                let Some(lowest) =
                    lowest.filter(|_| m.values().all(|v| v.as_f64().is_some_and(|x| x > 0.0)))
                else {
                    return Err(self.err(
                        &format!("{AT}.target_qps_per_replica"),
                        "give requests per second above 0 for each GPU type (`{H100: 10, A100: 5}`), or one number".to_string(),
                    ));
                };
                self.ignored.push(format!("{AT}.target_qps_per_replica: per GPU type: gantry counts every replica at the lowest target given ({lowest} requests per second)"));
                Some(lowest)
            }
            Some(other) => {
                return Err(self.err(
                    &format!("{AT}.target_qps_per_replica"),
                    format!(
                        "expected a number of requests per second, found {}",
                        kind(&other)
                    ),
                ))
            }
        };
        let metric = match p.target_metric {
            None => None,
            Some(m) => {
                if m.per_replica.0 <= 0.0 {
                    return Err(self.err(
                        &format!("{AT}.target_metric.per_replica"),
                        format!("{}: give a value above 0", m.per_replica.0),
                    ));
                }
                let path = m.path.map_or_else(|| "/metrics".to_string(), |t| t.0);
                if !path.starts_with('/') {
                    return Err(self.err(
                        &format!("{AT}.target_metric.path"),
                        format!("`{path}`: a path starts with /"),
                    ));
                }
                Some(ScaleSignal::Metric {
                    name: m.name.0,
                    path,
                    per_replica: m.per_replica.0,
                })
            }
        };
        spec.signal = match (qps, metric) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    &format!("{AT}.target_metric"),
                    "give either `target_qps_per_replica` or `target_metric`: a service scales on one signal".to_string(),
                ))
            }
            (Some(per_replica), None) => Some(ScaleSignal::Qps { per_replica }),
            (None, m) => m,
        };
        spec.min_replicas = min;
        spec.max_replicas = match (max, &spec.signal) {
            (None, Some(_)) => {
                return Err(self.err(
                    AT,
                    "`max_replicas` is required where the replicas scale (`target_qps_per_replica`, `target_metric`)".to_string(),
                ))
            }
            (Some(max), None) if max != min => {
                return Err(self.err(
                    &format!("{AT}.max_replicas"),
                    format!("{max} differs from `min_replicas` ({min}) while nothing scales them: set `target_qps_per_replica` (or `target_metric`) to autoscale"),
                ))
            }
            (max, _) => max.unwrap_or(min),
        };
        let seconds = |this: &Self, field: &str, v, default| {
            this.seconds(&format!("{AT}.{field}"), v, default)
        };
        spec.upscale_delay_s = seconds(
            self,
            "upscale_delay_seconds",
            p.upscale_delay_seconds,
            DEFAULT_UPSCALE_DELAY_S,
        )?;
        spec.downscale_delay_s = seconds(
            self,
            "downscale_delay_seconds",
            p.downscale_delay_seconds,
            DEFAULT_DOWNSCALE_DELAY_S,
        )?;
        spec.qps_window_s = seconds(
            self,
            "qps_window_seconds",
            p.qps_window_seconds,
            DEFAULT_QPS_WINDOW_S,
        )?;
        if spec.qps_window_s < 1.0 {
            return Err(self.err(
                &format!("{AT}.qps_window_seconds"),
                format!("{}: give at least 1 second", spec.qps_window_s),
            ));
        }
        spec.overprovision = p.num_overprovision.map_or(0, |c| c.0);
        self.replica_count(
            &format!("{AT}.num_overprovision"),
            spec.overprovision.saturating_add(spec.max_replicas),
        )?;
        spec.base_ondemand = p.base_ondemand_fallback_replicas.map_or(0, |c| c.0);
        spec.dynamic_ondemand_fallback = p.dynamic_ondemand_fallback.unwrap_or(false);
        if let Some(Text(s)) = p.spot_placer {
            if !s.eq_ignore_ascii_case("dynamic_fallback") {
                return Err(self.err(
                    &format!("{AT}.spot_placer"),
                    format!("`{s}`: the allowed value is dynamic_fallback"),
                ));
            }
            self.ignored.push("service.replica_policy.spot_placer: gantry places each spot replica where spot capacity is cheapest and free, as it places any job".to_string());
        }
        Ok(())
    }

    fn readiness(&mut self, v: Option<Value>) -> Result<Readiness, SpecError> {
        const AT: &str = "service.readiness_probe";
        let mut out = Readiness {
            path: "/".to_string(),
            initial_delay_s: DEFAULT_INITIAL_DELAY_S,
            timeout_s: DEFAULT_PROBE_TIMEOUT_S,
            interval_s: DEFAULT_PROBE_INTERVAL_S,
            post_data: None,
            headers: Vec::new(),
        };
        match v {
            None => {}
            Some(Value::String(path)) => out.path = path,
            Some(v @ Value::Mapping(_)) => {
                let p: RawProbe = serde_path_to_error::deserialize(v).map_err(|e| {
                    let path = e.path().to_string();
                    let at = if path.is_empty() || path == "." {
                        AT.to_string()
                    } else {
                        format!("{AT}.{path}")
                    };
                    self.err(&at, e.into_inner().to_string())
                })?;
                out.path = p.path.0;
                let positive = |this: &Self, field: &str, v, default| {
                    this.seconds(&format!("{AT}.{field}"), v, default)
                };
                out.initial_delay_s = positive(
                    self,
                    "initial_delay_seconds",
                    p.initial_delay_seconds,
                    DEFAULT_INITIAL_DELAY_S,
                )?;
                out.timeout_s = positive(
                    self,
                    "timeout_seconds",
                    p.timeout_seconds,
                    DEFAULT_PROBE_TIMEOUT_S,
                )?;
                out.interval_s = positive(
                    self,
                    "endpoint_probe_interval_seconds",
                    p.endpoint_probe_interval_seconds,
                    DEFAULT_PROBE_INTERVAL_S,
                )?;
                if out.timeout_s <= 0.0 || out.interval_s <= 0.0 {
                    return Err(self.err(
                        AT,
                        "`timeout_seconds` and `endpoint_probe_interval_seconds` are above 0"
                            .to_string(),
                    ));
                }
                if p.consecutive_failure_threshold_timeout.is_some() {
                    self.ignored.push(format!("{AT}.consecutive_failure_threshold_timeout: a ready replica that fails its probe leaves the rotation at once and is replaced after the probe's interval"));
                }
                out.post_data = match p.post_data {
                    None => None,
                    Some(Value::String(s)) => Some(s),
                    Some(v) => Some(serde_json::to_string(&v).map_err(|e| {
                        self.err(&format!("{AT}.post_data"), format!("not JSON: {e}"))
                    })?),
                };
                out.headers = p
                    .headers
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(k, v)| (k, v.0))
                    .collect();
            }
            Some(other) => {
                return Err(self.err(
                    AT,
                    format!(
                        "expected a path (`/health`) or a mapping with `path`, found {}",
                        kind(&other)
                    ),
                ))
            }
        }
        if !out.path.starts_with('/') {
            return Err(self.err(
                AT,
                format!("`{}`: the path starts with a slash (/)", out.path),
            ));
        }
        Ok(out)
    }
}
