//! Lambda Cloud's API as gantry calls it (`https://cloud.lambda.ai/api/v1`, a bearer API key):
//! `instance-types` (each type's price and the regions with capacity for it now),
//! `instance-operations/launch` and `/terminate`, `instances`, `ssh-keys`. Lambda has no tags
//! and no client tokens: an instance's name says whose it is (`gantry/<fleet>/<pool>/<node>`),
//! and a launch whose answer was lost is found by that name before it is sent again (the pool's
//! worker does that for every cloud). Lambda allows about one request a second and one launch
//! in ten: requests are paced here, launches queued by the worker. Errors come as
//! `{"error": {"code", "message", "suggestion"}}`; their codes decide the next step.

use crate::backend::cloud::{CheckLines, Cloud, Instance, Phase, Refusal};
use crate::backend::error::OpenWhy;
use serde::Deserialize;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Lambda's API root.
pub const API: &str = "https://cloud.lambda.ai/api/v1";
/// What every instance's name starts with.
pub const NAME_PREFIX: &str = "gantry/";
/// Lambda's limit on requests, about one a second (its documentation).
const REQUEST_EVERY: Duration = Duration::from_millis(1000);

/// Where and how one pool's instances are bought.
#[derive(Clone, Debug)]
pub struct Target {
    pub fleet: String,
    pub pool: String,
    pub instance_type: String,
    pub ssh_key_name: String,
    /// A public key file registered as `ssh_key_name` when the account has none of that name.
    pub ssh_public_key: Option<std::path::PathBuf>,
    pub api_key_file: Option<std::path::PathBuf>,
    pub endpoint_url: String,
    pub launch_every: Duration,
}

impl Target {
    /// The name of `node`'s instance: what marks it as this fleet's and pool's.
    pub fn name_of(&self, node: &str) -> String {
        format!("{NAME_PREFIX}{}/{}/{node}", self.fleet, self.pool)
    }

    /// The node an instance of this fleet and pool was launched for, from its name.
    fn node_in(&self, name: &str) -> Option<String> {
        name.strip_prefix(&format!("{NAME_PREFIX}{}/{}/", self.fleet, self.pool))
            .map(str::to_string)
    }
}

/// One pool's Lambda client.
pub struct Lambda {
    http: reqwest::Client,
    /// `Bearer …`; never printed, journaled or shown.
    auth: Result<String, String>,
    pub target: Target,
    pub calls: Arc<AtomicU64>,
}

/// When this process last called each Lambda endpoint (requests are paced per account; the
/// pools of one daemon share it).
fn last_call() -> &'static Mutex<HashMap<String, Instant>> {
    static LAST: std::sync::OnceLock<Mutex<HashMap<String, Instant>>> = std::sync::OnceLock::new();
    LAST.get_or_init(Mutex::default)
}

/// A request refused, and whether for what it names not existing.
struct Failed {
    gone: bool,
    refusal: Refusal,
}

impl From<Refusal> for Failed {
    fn from(refusal: Refusal) -> Failed {
        Failed {
            gone: false,
            refusal,
        }
    }
}

#[derive(Deserialize)]
struct Envelope<T> {
    data: T,
}

#[derive(Deserialize, Default)]
struct ErrorBody {
    #[serde(default)]
    code: String,
    #[serde(default)]
    message: String,
    #[serde(default)]
    suggestion: Option<String>,
}

#[derive(Deserialize)]
struct ErrorEnvelope {
    error: ErrorBody,
}

#[derive(Deserialize, Clone)]
struct Region {
    name: String,
}

#[derive(Deserialize, Clone)]
struct TypeInfo {
    #[serde(default)]
    price_cents_per_hour: f64,
    #[serde(default)]
    gpu_description: String,
}

#[derive(Deserialize, Clone)]
struct Offered {
    instance_type: TypeInfo,
    #[serde(default)]
    regions_with_capacity_available: Vec<Region>,
}

#[derive(Deserialize, Clone)]
struct LambdaInstance {
    id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    ip: Option<String>,
    #[serde(default)]
    private_ip: Option<String>,
    #[serde(default)]
    hostname: Option<String>,
    #[serde(default)]
    status: String,
    #[serde(default)]
    region: Option<Region>,
    #[serde(default)]
    instance_type: Option<NamedType>,
}

#[derive(Deserialize, Clone)]
struct NamedType {
    name: String,
}

#[derive(Deserialize)]
struct Launched {
    instance_ids: Vec<String>,
}

#[derive(Deserialize)]
struct SshKey {
    name: String,
}

/// The API key: the pool's file, `LAMBDA_API_KEY`, or SkyPilot's `~/.lambda_cloud/lambda_keys`.
pub fn api_key(file: Option<&std::path::Path>) -> Result<(String, String), String> {
    let from_file = |path: &std::path::Path| -> Result<String, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        // `api_key = …` (SkyPilot's file), or the key alone.
        let key = text
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == "api_key").then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| text.trim().to_string());
        if key.is_empty() {
            return Err(format!("{} holds no API key", path.display()));
        }
        Ok(key)
    };
    if let Some(f) = file {
        return from_file(f).map(|k| (k, f.display().to_string()));
    }
    if let Ok(k) = std::env::var("LAMBDA_API_KEY") {
        if !k.trim().is_empty() {
            return Ok((k.trim().to_string(), "LAMBDA_API_KEY".to_string()));
        }
    }
    let sky = crate::backend::expand_home("~/.lambda_cloud/lambda_keys");
    if sky.exists() {
        return from_file(&sky).map(|k| (k, sky.display().to_string()));
    }
    Err("no Lambda Cloud API key: set LAMBDA_API_KEY, write `api_key = …` to ~/.lambda_cloud/lambda_keys (as SkyPilot keeps it), or give [pools.lambda] api_key_file — keys are made at https://cloud.lambda.ai/api-keys".to_string())
}

impl Lambda {
    pub fn new(target: Target) -> Result<Lambda, String> {
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| format!("no HTTP client: {e}"))?;
        let auth = api_key(target.api_key_file.as_deref()).map(|(k, _)| format!("Bearer {k}"));
        Ok(Lambda {
            http,
            auth,
            target,
            calls: Arc::default(),
        })
    }

    /// One request; what a refusal means for the next step.
    async fn call<T: for<'de> Deserialize<'de>>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, Refusal> {
        self.send(method, path, body).await.map_err(|f| f.refusal)
    }

    /// Waits for this account's turn (one request a second), then sends.
    async fn send<T: for<'de> Deserialize<'de>>(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<T, Failed> {
        let auth = self
            .auth
            .clone()
            .map_err(|e| Failed::from(Refusal::Stop(e)))?;
        let wait = {
            let mut last = last_call().lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            let next = last
                .get(&self.target.endpoint_url)
                .map_or(now, |t| (*t + REQUEST_EVERY).max(now));
            last.insert(self.target.endpoint_url.clone(), next);
            next - now
        };
        tokio::time::sleep(wait).await;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let url = format!("{}/{path}", self.target.endpoint_url.trim_end_matches('/'));
        let mut req = self
            .http
            .request(method.clone(), &url)
            .header(reqwest::header::AUTHORIZATION, auth)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(b) = body {
            req = req.json(&b);
        }
        let lost = |e: reqwest::Error| {
            Failed::from(Refusal::Retry(format!(
                "{method} {path}: {}",
                crate::errors::root_cause(&e)
            )))
        };
        let resp = req.send().await.map_err(lost)?;
        let status = resp.status();
        let bytes = resp.bytes().await.map_err(lost)?;
        if status.is_success() {
            return serde_json::from_slice::<Envelope<T>>(&bytes)
                .map(|e| e.data)
                .map_err(|e| {
                    Failed::from(Refusal::Retry(format!(
                        "{method} {path}: an answer gantry cannot read: {e}"
                    )))
                });
        }
        let err = serde_json::from_slice::<ErrorEnvelope>(&bytes)
            .map(|e| e.error)
            .unwrap_or_default();
        Err(Failed {
            gone: status.as_u16() == 404 || err.code == "global/object-does-not-exist",
            refusal: refusal(status.as_u16(), &err, &format!("{method} {path}")),
        })
    }

    async fn offered(&self) -> Result<HashMap<String, Offered>, Refusal> {
        self.call(reqwest::Method::GET, "instance-types", None)
            .await
    }

    async fn all_instances(&self) -> Result<Vec<LambdaInstance>, Refusal> {
        self.call(reqwest::Method::GET, "instances", None).await
    }

    fn instance(&self, i: &LambdaInstance) -> Instance {
        let phase = match i.status.as_str() {
            "booting" => Phase::Starting,
            "active" | "unhealthy" => Phase::Running,
            _ => Phase::Ended,
        };
        Instance {
            id: i.id.clone(),
            state: i.status.clone(),
            phase,
            node: i.name.as_deref().and_then(|n| self.target.node_in(n)),
            pool: Some(self.target.pool.clone()),
            zone: i.region.as_ref().map(|r| r.name.clone()),
            instance_type: i.instance_type.as_ref().map(|t| t.name.clone()),
            spot: false,
            public_ip: i.ip.clone(),
            private_ip: i.private_ip.clone(),
            public_dns: i.hostname.clone(),
            launched: None,
            reason: None,
        }
    }

    /// The pool's type as Lambda offers it: $/h and the regions with capacity now.
    async fn pool_type(&self) -> Result<Offered, Refusal> {
        let offered = self.offered().await?;
        let t = &self.target.instance_type;
        offered.get(t).cloned().ok_or_else(|| {
            let mut names: Vec<&String> = offered.keys().collect();
            names.sort();
            Refusal::Stop(format!(
                "Lambda Cloud offers no instance type `{t}` (it offers: {})",
                names
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })
    }

    async fn keys(&self) -> Result<Vec<String>, Refusal> {
        let keys: Vec<SshKey> = self.call(reqwest::Method::GET, "ssh-keys", None).await?;
        Ok(keys.into_iter().map(|k| k.name).collect())
    }
}

/// What a refused request means for the next step.
fn refusal(status: u16, e: &ErrorBody, what: &str) -> Refusal {
    let why = format!(
        "{what}: {}{}{}",
        if e.code.is_empty() {
            format!("HTTP {status}")
        } else {
            e.code.clone()
        },
        if e.message.is_empty() {
            String::new()
        } else {
            format!(": {}", crate::untrusted::bounded(&e.message, 300))
        },
        e.suggestion
            .as_deref()
            .filter(|s| !s.is_empty())
            .map_or(String::new(), |s| format!(
                " ({})",
                crate::untrusted::bounded(s, 200)
            )),
    );
    match (status, e.code.as_str()) {
        (_, "instance-operations/launch/insufficient-capacity") => Refusal::Zone(why),
        (_, "global/quota-exceeded") => Refusal::Pool(why),
        (401 | 403, _) | (_, "global/invalid-api-key" | "global/account-inactive") => {
            Refusal::Stop(format!("{why} — the API key was refused"))
        }
        (429, _) | (500..=599, _) => Refusal::Retry(why),
        _ => Refusal::Stop(why),
    }
}

impl Cloud for Lambda {
    fn offer(&self) -> String {
        format!("{}, on-demand", self.target.instance_type)
    }

    fn calls(&self) -> Arc<AtomicU64> {
        self.calls.clone()
    }

    fn launch_every(&self) -> Duration {
        self.target.launch_every
    }

    async fn open_check(&self, _regions: &[String]) -> Result<(), OpenWhy> {
        // The regions were checked against Lambda's list at the pool's line; the API lists
        // only those with capacity now, which is no reason to refuse one.
        self.auth.clone().map_err(OpenWhy::Credentials)?;
        match self.pool_type().await {
            Ok(_) | Err(Refusal::Retry(_)) => Ok(()),
            Err(r) => Err(OpenWhy::Refused(r.why().to_string())),
        }
    }

    async fn check(&self, regions: &[String]) -> CheckLines {
        let mut lines = Vec::new();
        match api_key(self.target.api_key_file.as_deref()) {
            Ok((_, from)) => lines.push((true, format!("API key: found ({from})"))),
            Err(e) => {
                lines.push((false, format!("API key: {e}")));
                return lines;
            }
        }
        let t = &self.target.instance_type;
        match self.pool_type().await {
            Ok(o) => {
                let have: Vec<&str> = o
                    .regions_with_capacity_available
                    .iter()
                    .map(|r| r.name.as_str())
                    .collect();
                lines.push((
                    true,
                    format!(
                        "{t}: {} at ${:.2}/h; capacity now in {}",
                        if o.instance_type.gpu_description.is_empty() {
                            "offered".to_string()
                        } else {
                            o.instance_type.gpu_description.clone()
                        },
                        o.instance_type.price_cents_per_hour / 100.0,
                        if have.is_empty() {
                            "no region".to_string()
                        } else {
                            have.join(", ")
                        }
                    ),
                ));
                for r in regions {
                    lines.push((
                        true,
                        format!(
                            "region {r}: {}",
                            if have.contains(&r.as_str()) {
                                "has capacity now"
                            } else {
                                "no capacity now (a buy passes it over)"
                            }
                        ),
                    ));
                }
            }
            Err(r) => {
                lines.push((false, r.why().to_string()));
                return lines;
            }
        }
        let key = &self.target.ssh_key_name;
        lines.push(match self.keys().await {
            Ok(k) if k.contains(key) => (true, format!("SSH key `{key}`: in the account")),
            Ok(_) if self.target.ssh_public_key.is_some() => (
                true,
                format!("SSH key `{key}`: not in the account; registered at the first buy from ssh_public_key"),
            ),
            Ok(k) => (
                false,
                format!(
                    "SSH key `{key}`: not in the account (it has: {}); add it in Lambda's console or give ssh_public_key",
                    if k.is_empty() { "none".to_string() } else { k.join(", ") }
                ),
            ),
            Err(r) => (false, format!("SSH keys: {}", r.why())),
        });
        lines.push(crate::backend::cloud::instances_line(
            self.list().await,
            "active",
        ));
        lines.push((
            true,
            "quotas: Lambda's API publishes none; a quota refusal shows as an event when a buy hits it".to_string(),
        ));
        lines
    }

    async fn prepare(&mut self) -> Result<(), Refusal> {
        let key = self.target.ssh_key_name.clone();
        let have = self.keys().await?;
        if have.contains(&key) {
            return Ok(());
        }
        let Some(file) = self.target.ssh_public_key.clone() else {
            return Err(Refusal::Stop(format!(
                "the Lambda account has no SSH key named `{key}` (it has: {}): add it in Lambda's console, or give [pools.lambda] ssh_public_key to register it",
                if have.is_empty() { "none".to_string() } else { have.join(", ") }
            )));
        };
        let public_key = std::fs::read_to_string(&file)
            .map_err(|e| Refusal::Stop(format!("ssh_public_key {}: {e}", file.display())))?;
        let _: serde_json::Value = self
            .call(
                reqwest::Method::POST,
                "ssh-keys",
                Some(serde_json::json!({"name": key, "public_key": public_key.trim()})),
            )
            .await?;
        Ok(())
    }

    async fn capacity(&self) -> Result<Option<Vec<String>>, Refusal> {
        let o = self.pool_type().await?;
        Ok(Some(
            o.regions_with_capacity_available
                .into_iter()
                .map(|r| r.name)
                .collect(),
        ))
    }

    async fn launch(&self, node: &str, region: &str, _token: &str) -> Result<Instance, Refusal> {
        let t = &self.target;
        let launched: Launched = self
            .call(
                reqwest::Method::POST,
                "instance-operations/launch",
                Some(serde_json::json!({
                    "region_name": region,
                    "instance_type_name": t.instance_type,
                    "ssh_key_names": [t.ssh_key_name],
                    "quantity": 1,
                    "name": t.name_of(node),
                })),
            )
            .await?;
        let id =
            launched.instance_ids.into_iter().next().ok_or_else(|| {
                Refusal::Retry("the launch answered with no instance id".to_string())
            })?;
        Ok(Instance {
            id,
            state: "booting".to_string(),
            phase: Phase::Starting,
            node: Some(node.to_string()),
            pool: Some(t.pool.clone()),
            zone: Some(region.to_string()),
            instance_type: Some(t.instance_type.clone()),
            spot: false,
            public_ip: None,
            private_ip: None,
            public_dns: None,
            launched: None,
            reason: None,
        })
    }

    async fn list(&self) -> Result<Vec<Instance>, Refusal> {
        let all = self.all_instances().await?;
        Ok(all
            .iter()
            .map(|i| self.instance(i))
            .filter(|i| i.node.is_some() && i.phase != Phase::Ended)
            .collect())
    }

    async fn states(&self, ids: Vec<String>) -> Result<Vec<Instance>, Refusal> {
        let all = self.all_instances().await?;
        let mut out: Vec<Instance> = all
            .iter()
            .filter(|i| ids.contains(&i.id))
            .map(|i| self.instance(i))
            .collect();
        // Lambda lists what runs: one it no longer lists is asked for by itself, and ended
        // when Lambda does not know it.
        let missing: Vec<String> = ids
            .into_iter()
            .filter(|id| !out.iter().any(|i| &i.id == id))
            .collect();
        for id in missing {
            match self
                .send::<LambdaInstance>(reqwest::Method::GET, &format!("instances/{id}"), None)
                .await
            {
                Ok(i) => out.push(self.instance(&i)),
                Err(f) if f.gone => out.push(Instance::gone(
                    &id,
                    Some(self.target.pool.clone()),
                    "no longer listed by Lambda",
                )),
                Err(_) => {}
            }
        }
        Ok(out)
    }

    async fn terminate(&self, ids: Vec<String>) -> Result<(), Refusal> {
        if ids.is_empty() {
            return Ok(());
        }
        let done: Result<serde_json::Value, Failed> = self
            .send(
                reqwest::Method::POST,
                "instance-operations/terminate",
                Some(serde_json::json!({ "instance_ids": ids })),
            )
            .await;
        match done {
            // Gone already: what was asked holds.
            Ok(_) => Ok(()),
            Err(f) if f.gone => Ok(()),
            Err(f) => Err(f.refusal),
        }
    }
}
