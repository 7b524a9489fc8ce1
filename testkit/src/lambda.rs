//! A test double of Lambda Cloud's API (`/api/v1`, as its published reference describes it),
//! for the Lambda pool tests and the docs' dry run (`cargo run -p gantry-testkit --bin
//! lambda-double`): no Lambda server can run here, and its real API needs an account.
//! It keeps instances, SSH keys and capacity per instance type and region, and answers as
//! Lambda does:
//! * `GET instance-types` — each type's price and `regions_with_capacity_available`;
//! * `POST instance-operations/launch` — `{"data": {"instance_ids": […]}}`, or
//!   `instance-operations/launch/insufficient-capacity` (400) where the region has none, or 429
//!   when launches come faster than its limit (one per `launch_every`); an unknown SSH key is
//!   `global/invalid-parameters`;
//! * `GET instances`, `GET instances/{id}` — `booting` until `boot` has passed, then `active`;
//!   a terminated instance is `terminating` a moment, then no longer listed (404
//!   `global/object-does-not-exist`);
//! * `POST instance-operations/terminate`, `GET`/`POST ssh-keys`;
//! * a bearer API key, else 401 `global/invalid-api-key`.
//!
//! Faults the tests set: a region that lists capacity but refuses launches, a launch whose
//! instance is made but whose answer is a 502 (a lost reply), a launch answer held back (to
//! kill the daemon meanwhile), an instance Lambda ends by itself.
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub const KEY: &str = "secret_test-key.0123456789abcdef";

#[derive(Clone, Debug)]
pub struct Inst {
    pub id: String,
    pub name: String,
    pub region: String,
    pub instance_type: String,
    pub ssh_key_names: Vec<String>,
    pub launched: Instant,
    /// Asked to terminate then.
    pub ended: Option<Instant>,
    pub ip: String,
}

#[derive(Default)]
pub struct Account {
    /// Instance type → (price in cents an hour, GPU description).
    pub types: BTreeMap<String, (u32, String)>,
    /// (type, region) → how many more can be launched there now.
    pub capacity: BTreeMap<(String, String), u32>,
    /// Regions that list capacity but refuse every launch (Lambda's list is not a promise).
    pub refuse_in: HashSet<String>,
    pub instances: Vec<Inst>,
    pub ssh_keys: Vec<(String, String)>,
    /// Booting this long, then active.
    pub boot: Duration,
    pub launch_every: Duration,
    last_launch: Option<Instant>,
    /// The next launch makes its instance and answers 502.
    pub lose_next_answer: bool,
    /// Launch answers are held this long (the instance is made first).
    pub hold_answer: Duration,
    /// Launch requests received, made (instances), refused for the rate limit.
    pub launch_requests: u32,
    pub rate_limited: u32,
    /// Every request: `METHOD path`.
    pub seen: Vec<String>,
    next_id: u32,
}

pub type Shared = Arc<Mutex<Account>>;

pub struct LambdaDouble {
    pub port: u16,
    pub account: Shared,
    _runtime: tokio::runtime::Runtime,
}

impl LambdaDouble {
    /// A double on a port of its own offering `types` (name, cents/h, GPU description).
    pub fn start(types: &[(&str, u32, &str)]) -> LambdaDouble {
        Self::start_on("127.0.0.1:0", types).expect("a port on 127.0.0.1")
    }

    /// A double listening on `addr` offering `types` (name, cents/h, GPU description), its
    /// instances booting for 2 s and launches allowed every 2 s.
    pub fn start_on(addr: &str, types: &[(&str, u32, &str)]) -> std::io::Result<LambdaDouble> {
        let account: Shared = Arc::default();
        {
            let mut a = account.lock().unwrap();
            for (t, cents, gpu) in types {
                a.types.insert(t.to_string(), (*cents, gpu.to_string()));
            }
            a.boot = Duration::from_secs(2);
            a.launch_every = Duration::from_secs(2);
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listener = runtime.block_on(tokio::net::TcpListener::bind(addr))?;
        let port = listener.local_addr()?.port();
        let app = Router::new()
            .route("/api/v1/instance-types", get(instance_types))
            .route("/api/v1/instances", get(instances))
            .route("/api/v1/instances/{id}", get(one_instance))
            .route("/api/v1/instance-operations/launch", post(launch))
            .route("/api/v1/instance-operations/terminate", post(terminate))
            .route("/api/v1/ssh-keys", get(ssh_keys).post(add_ssh_key))
            .with_state(account.clone());
        runtime.spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(LambdaDouble {
            port,
            account,
            _runtime: runtime,
        })
    }

    /// A double on `addr` offering every type of the catalog gantry carries, at its price,
    /// `capacity` of each in every region the catalog sells it in: what `lambda-double` (the
    /// docs' dry run) serves. Also says how many types it offers.
    pub fn of_catalog(addr: &str, capacity: u32) -> std::io::Result<(LambdaDouble, usize)> {
        let types = catalog();
        let named: Vec<(&str, u32, &str)> = types
            .iter()
            .map(|(t, s)| (t.as_str(), s.cents, s.gpu.as_str()))
            .collect();
        let api = Self::start_on(addr, &named)?;
        for (t, sold) in &types {
            for r in &sold.regions {
                api.capacity(t, r, capacity);
            }
        }
        Ok((api, types.len()))
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/api/v1", self.port)
    }

    pub fn with<T>(&self, f: impl FnOnce(&mut Account) -> T) -> T {
        f(&mut self.account.lock().unwrap())
    }

    /// Capacity for `n` more of `t` in `region`.
    pub fn capacity(&self, t: &str, region: &str, n: u32) {
        self.with(|a| a.capacity.insert((t.to_string(), region.to_string()), n));
    }

    /// Instances not terminated: (id, name, region).
    pub fn live(&self) -> Vec<(String, String, String)> {
        self.with(|a| {
            a.instances
                .iter()
                .filter(|i| i.ended.is_none())
                .map(|i| (i.id.clone(), i.name.clone(), i.region.clone()))
                .collect()
        })
    }

    /// Every instance ever made (terminated ones too).
    pub fn made(&self) -> Vec<Inst> {
        self.with(|a| a.instances.clone())
    }

    /// Lambda ends `id` by itself (a host failure, an operator in Lambda's console).
    pub fn end(&self, id: &str) {
        self.with(|a| {
            if let Some(i) = a.instances.iter_mut().find(|i| i.id == id) {
                i.ended.get_or_insert_with(Instant::now);
            }
        });
    }

    pub fn count(&self, what: &str) -> usize {
        self.with(|a| a.seen.iter().filter(|s| s.contains(what)).count())
    }
}

/// "8x H100 (80 GB SXM5)": the count leads Lambda's description.
fn gpus_of(description: &str) -> u32 {
    description
        .split('x')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
}

fn answer(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn error(status: StatusCode, code: &str, message: &str, suggestion: Option<&str>) -> Response {
    answer(
        status,
        json!({"error": {"code": code, "message": message, "suggestion": suggestion}}),
    )
}

/// The request's API key is the account's (a bearer token; Lambda also takes HTTP basic
/// with the key as user, which gantry does not send).
fn authorized(h: &HeaderMap) -> bool {
    h.get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|k| k == KEY)
}

/// Checks the key and notes the request; `Some` is the refusal.
fn gate(s: &Shared, h: &HeaderMap, what: String) -> Option<Response> {
    s.lock().unwrap().seen.push(what);
    (!authorized(h)).then(|| {
        error(
            StatusCode::UNAUTHORIZED,
            "global/invalid-api-key",
            "API key was invalid, expired, or deleted.",
            Some("Check your API key or create a new one, then try again."),
        )
    })
}

impl Account {
    /// Lambda forgets a terminated instance a moment after: what it lists now.
    fn settle(&mut self) {
        self.instances.retain(|i| {
            i.ended
                .is_none_or(|t| t.elapsed() < Duration::from_millis(500))
        });
    }

    fn json_of(&self, i: &Inst) -> Value {
        let status = match i.ended {
            Some(_) => "terminating",
            None if i.launched.elapsed() < self.boot => "booting",
            None => "active",
        };
        let (cents, gpu) = self
            .types
            .get(&i.instance_type)
            .cloned()
            .unwrap_or_default();
        let active = status == "active";
        let gpus = gpus_of(&gpu);
        json!({
            "id": i.id,
            "name": i.name,
            "ip": if active { Value::from(i.ip.clone()) } else { Value::Null },
            "private_ip": if active { Value::from("10.19.0.2") } else { Value::Null },
            "status": status,
            "ssh_key_names": i.ssh_key_names,
            "file_system_names": [],
            "region": {"name": i.region, "description": i.region},
            "instance_type": {
                "name": i.instance_type,
                "description": gpu,
                "gpu_description": gpu,
                "price_cents_per_hour": cents,
                "specs": {"vcpus": 8, "memory_gib": 32, "storage_gib": 512, "gpus": gpus}
            },
            "hostname": format!("{}.cloud.lambda.ai", i.ip.replace('.', "-")),
            "is_reserved": false
        })
    }
}

async fn instance_types(State(s): State<Shared>, h: HeaderMap) -> Response {
    if let Some(r) = gate(&s, &h, "GET instance-types".into()) {
        return r;
    }
    let a = s.lock().unwrap();
    let mut data = serde_json::Map::new();
    for (t, (cents, gpu)) in &a.types {
        let gpus = gpus_of(gpu);
        let regions: Vec<Value> = a
            .capacity
            .iter()
            .filter(|((ty, _), n)| ty == t && **n > 0)
            .map(|((_, r), _)| json!({"name": r, "description": r}))
            .collect();
        data.insert(
            t.clone(),
            json!({
                "instance_type": {
                    "name": t, "description": gpu, "gpu_description": gpu,
                    "price_cents_per_hour": cents,
                    "specs": {"vcpus": 8, "memory_gib": 32, "storage_gib": 512, "gpus": gpus}
                },
                "regions_with_capacity_available": regions
            }),
        );
    }
    answer(StatusCode::OK, json!({ "data": data }))
}

async fn instances(State(s): State<Shared>, h: HeaderMap) -> Response {
    if let Some(r) = gate(&s, &h, "GET instances".into()) {
        return r;
    }
    let mut a = s.lock().unwrap();
    a.settle();
    let data: Vec<Value> = a.instances.iter().map(|i| a.json_of(i)).collect();
    answer(StatusCode::OK, json!({ "data": data }))
}

async fn one_instance(State(s): State<Shared>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = gate(&s, &h, format!("GET instances/{id}")) {
        return r;
    }
    let mut a = s.lock().unwrap();
    a.settle();
    match a.instances.iter().find(|i| i.id == id) {
        Some(i) => answer(StatusCode::OK, json!({ "data": a.json_of(i) })),
        None => error(
            StatusCode::NOT_FOUND,
            "global/object-does-not-exist",
            "Specified instance does not exist.",
            None,
        ),
    }
}

fn parse(body: &Bytes) -> Result<Value, String> {
    serde_json::from_slice(body).map_err(|e| format!("Invalid JSON: {e}"))
}

fn invalid(why: &str) -> Response {
    error(
        StatusCode::BAD_REQUEST,
        "global/invalid-parameters",
        why,
        None,
    )
}

async fn launch(State(s): State<Shared>, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = gate(&s, &h, "POST launch".into()) {
        return r;
    }
    let req = match parse(&body) {
        Ok(v) => v,
        Err(e) => return invalid(&e),
    };
    let (hold, lose, made) = {
        let mut a = s.lock().unwrap();
        a.launch_requests += 1;
        if a.last_launch.is_some_and(|t| t.elapsed() < a.launch_every) {
            a.rate_limited += 1;
            return error(
                StatusCode::TOO_MANY_REQUESTS,
                "global/too-many-requests",
                "Too many requests to the launch endpoint.",
                Some("Wait before launching again."),
            );
        }
        a.last_launch = Some(Instant::now());
        let region = req["region_name"].as_str().unwrap_or("").to_string();
        let t = req["instance_type_name"].as_str().unwrap_or("").to_string();
        let name = req["name"].as_str().unwrap_or("").to_string();
        let keys: Vec<String> = req["ssh_key_names"]
            .as_array()
            .map(|k| {
                k.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        if !a.types.contains_key(&t) {
            return error(
                StatusCode::BAD_REQUEST,
                "global/invalid-parameters",
                &format!("Invalid instance type {t}"),
                None,
            );
        }
        if keys.len() != 1 || !a.ssh_keys.iter().any(|(k, _)| k == &keys[0]) {
            return error(
                StatusCode::BAD_REQUEST,
                "global/invalid-parameters",
                "Exactly one existing SSH key name must be given",
                None,
            );
        }
        if name.len() > 64 {
            return error(
                StatusCode::BAD_REQUEST,
                "global/invalid-parameters",
                "Name must be at most 64 characters",
                None,
            );
        }
        let left = a
            .capacity
            .get(&(t.clone(), region.clone()))
            .copied()
            .unwrap_or(0);
        if left == 0 || a.refuse_in.contains(&region) {
            return error(
                StatusCode::BAD_REQUEST,
                "instance-operations/launch/insufficient-capacity",
                "Not enough capacity to fulfill launch request.",
                Some("Choose an instance type with more availability, or try again later."),
            );
        }
        a.capacity.insert((t.clone(), region.clone()), left - 1);
        a.next_id += 1;
        let id = format!("{:032x}", 0x1a2b_0000u64 + a.next_id as u64);
        let ip = format!("192.0.2.{}", a.next_id);
        a.instances.push(Inst {
            id: id.clone(),
            name,
            region,
            instance_type: t,
            ssh_key_names: keys,
            launched: Instant::now(),
            ended: None,
            ip,
        });
        let lose = std::mem::take(&mut a.lose_next_answer);
        (a.hold_answer, lose, id)
    };
    tokio::time::sleep(hold).await;
    if lose {
        return (StatusCode::BAD_GATEWAY, "upstream timed out").into_response();
    }
    answer(StatusCode::OK, json!({"data": {"instance_ids": [made]}}))
}

async fn terminate(State(s): State<Shared>, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = gate(&s, &h, "POST terminate".into()) {
        return r;
    }
    let req = match parse(&body) {
        Ok(v) => v,
        Err(e) => return invalid(&e),
    };
    let ids: Vec<String> = req["instance_ids"]
        .as_array()
        .map(|k| {
            k.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let mut a = s.lock().unwrap();
    a.settle();
    if let Some(missing) = ids
        .iter()
        .find(|id| !a.instances.iter().any(|i| &&i.id == id))
    {
        return error(
            StatusCode::NOT_FOUND,
            "global/object-does-not-exist",
            &format!("Instance {missing} does not exist."),
            None,
        );
    }
    let now = Instant::now();
    let mut out = Vec::new();
    for i in a.instances.iter_mut().filter(|i| ids.contains(&i.id)) {
        i.ended.get_or_insert(now);
    }
    for i in a.instances.iter().filter(|i| ids.contains(&i.id)) {
        out.push(a.json_of(i));
    }
    answer(
        StatusCode::OK,
        json!({"data": {"terminated_instances": out}}),
    )
}

async fn ssh_keys(State(s): State<Shared>, h: HeaderMap) -> Response {
    if let Some(r) = gate(&s, &h, "GET ssh-keys".into()) {
        return r;
    }
    let a = s.lock().unwrap();
    let data: Vec<Value> = a
        .ssh_keys
        .iter()
        .enumerate()
        .map(|(n, (k, p))| json!({"id": format!("key{n}"), "name": k, "public_key": p}))
        .collect();
    answer(StatusCode::OK, json!({ "data": data }))
}

async fn add_ssh_key(State(s): State<Shared>, h: HeaderMap, body: Bytes) -> Response {
    if let Some(r) = gate(&s, &h, "POST ssh-keys".into()) {
        return r;
    }
    let req = match parse(&body) {
        Ok(v) => v,
        Err(e) => return invalid(&e),
    };
    let name = req["name"].as_str().unwrap_or("").to_string();
    let key = req["public_key"].as_str().unwrap_or("").to_string();
    let mut a = s.lock().unwrap();
    if a.ssh_keys.iter().any(|(k, _)| k == &name) {
        return error(
            StatusCode::BAD_REQUEST,
            "global/duplicate",
            "An SSH key with this name already exists",
            None,
        );
    }
    if !key.starts_with("ssh-") {
        return error(
            StatusCode::BAD_REQUEST,
            "global/invalid-parameters",
            "Invalid public key",
            None,
        );
    }
    a.ssh_keys.push((name.clone(), key.clone()));
    answer(
        StatusCode::OK,
        json!({"data": {"id": format!("key{}", a.ssh_keys.len()), "name": name, "public_key": key}}),
    )
}

/// The catalog gantry carries (SkyPilot's `lambda/vms.csv`), which the dry run offers.
const CATALOG: &str = include_str!("../../core/src/catalog/lambda.csv");

/// A type of the catalog: its price, GPUs, and the regions it is sold in.
struct Sold {
    cents: u32,
    gpu: String,
    regions: BTreeSet<String>,
}

/// The catalog's types, by name.
fn catalog() -> BTreeMap<String, Sold> {
    let mut types: BTreeMap<String, Sold> = BTreeMap::new();
    for line in CATALOG.lines().skip(1) {
        // InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,Price,Region,…: the
        // first seven fields are never quoted.
        let f: Vec<&str> = line.splitn(8, ',').collect();
        let (Some(t), Some(gpu), Some(n), Some(price), Some(region)) =
            (f.first(), f.get(1), f.get(2), f.get(5), f.get(6))
        else {
            continue;
        };
        let (Ok(n), Ok(price)) = (n.parse::<f64>(), price.parse::<f64>()) else {
            continue;
        };
        let sold = types.entry(t.to_string()).or_insert_with(|| Sold {
            cents: (price * 100.0).round() as u32,
            gpu: format!("{}x {gpu}", n as u32),
            regions: BTreeSet::new(),
        });
        sold.regions.insert(region.to_string());
    }
    types
}
