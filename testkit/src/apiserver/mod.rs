//! A Kubernetes API server for tests and benchmarks: no kube-apiserver can be installed on
//! the machines gantry is built on, so this keeps the semantics gantry's client relies on —
//! checked with the real `kubectl` (tests/clusters/kube.rs) so it cannot drift from what a client
//! expects:
//!
//! * every object and list carries a `resourceVersion` from one counter;
//! * `watch=true&resourceVersion=N` replays what changed after N, then streams; a version
//!   older than the kept history answers an `ERROR` event with a 410 `Expired` status (the
//!   client must list again), as the real server does;
//! * `allowWatchBookmarks=true` gets `BOOKMARK` events;
//! * label selectors (`k=v`, `k!=v`, `k`, `!k`, `k in (…)`, `k notin (…)`) and field selectors
//!   (`metadata.name`, `metadata.namespace`, `spec.nodeName`, `status.phase`), on lists and
//!   watches (an object that stops matching is `DELETED` for that watch);
//! * discovery (`/api`, `/apis`, `/api/v1`, `/version`) as kubectl reads it;
//! * what a scheduler does to pods: create (`generateName` too), bind through the
//!   `pods/binding` subresource (409 when already bound), delete with a grace period
//!   (`deletionTimestamp`, then gone when the pod ends or the grace runs out), read logs —
//!   with a kubelet stand-in that runs bound pods and ends them as tests say (`pods.rs`).
//!
//! Objects go in through [`ApiServer::apply`] and [`ApiServer::remove`] (what a cluster's
//! other clients would do); [`ApiServer::drop_watches`] cuts every open watch, as a load
//! balancer or an apiserver restart does.

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};

mod exec;
mod pods;
mod select;
mod watch_stream;

use select::{field_selector, label_selector, Filter};
use watch_stream::watch_stream;

/// Changes kept for watches to resume from.
const HISTORY: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
    Namespace,
    /// batch/v1 Jobs (read by gantry for the gang a Job's pods make).
    Job,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
            Kind::Namespace => "Namespace",
            Kind::Job => "Job",
        }
    }
    /// Whether its objects live in a namespace (Pods, Jobs) or in the cluster (Nodes,
    /// Namespaces).
    fn namespaced(self) -> bool {
        matches!(self, Kind::Pod | Kind::Job)
    }
    /// Its API group and version, as objects and lists carry it.
    fn api_version(self) -> &'static str {
        match self {
            Kind::Job => "batch/v1",
            _ => "v1",
        }
    }
}

/// One change: the object after it (`None`: deleted) and before it.
#[derive(Clone, Debug)]
struct Change {
    rv: u64,
    kind: Kind,
    now: Option<Arc<Value>>,
    before: Option<Arc<Value>>,
}

#[derive(Default)]
struct Store {
    rv: u64,
    /// (kind, namespace, name) → object.
    objects: BTreeMap<(Kind, String, String), Arc<Value>>,
    history: VecDeque<Change>,
    /// The oldest version a watch may resume from.
    oldest: u64,
}

struct Shared {
    store: Mutex<Store>,
    changes: broadcast::Sender<Change>,
    /// Bumped to cut every open watch.
    cut: watch::Sender<u64>,
    bookmark_every: Duration,
    counts: Mutex<Counts>,
    /// What each pod has written, (namespace, name) → text.
    logs: Mutex<HashMap<(String, String), String>>,
    /// A ResourceQuota on the pods of a namespace: namespace → most pods. Held while a
    /// create is admitted (the check and the write are one step, as the real server's are).
    pod_quota: Mutex<HashMap<String, usize>>,
    /// Every request answered 403, as RBAC answers a service account without the role.
    forbidden: std::sync::atomic::AtomicBool,
    /// Bindings wait while set (a test acts between a scheduler's decision and its bind);
    /// `binding_held` counts those waiting.
    hold_bindings: std::sync::atomic::AtomicBool,
    binding_held: std::sync::atomic::AtomicU64,
    /// How long the kubelet stand-in runs each pod it starts before its containers exit 0
    /// (`None`: until a test says how it ended, `ApiServer::finish`).
    runs_for: Mutex<Option<Duration>>,
}

/// What the server has answered, for tests to check how a client behaved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lists: u64,
    pub watches: u64,
    /// Watches answered 410 Gone (their version was compacted away).
    pub gone: u64,
    /// Pods bound through `pods/binding`.
    pub bindings: u64,
}

/// A running test API server.
#[derive(Clone)]
pub struct ApiServer {
    shared: Arc<Shared>,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
}

impl ApiServer {
    /// Serves on 127.0.0.1 (a free port) on `runtime`, sending bookmarks every
    /// `bookmark_every` on watches that allow them.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        bookmark_every: Duration,
    ) -> Result<ApiServer, String> {
        let (changes, _) = broadcast::channel(65_536);
        let (cut, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::default()),
            changes,
            cut,
            bookmark_every,
            counts: Mutex::new(Counts::default()),
            logs: Mutex::new(HashMap::new()),
            pod_quota: Mutex::new(HashMap::new()),
            forbidden: std::sync::atomic::AtomicBool::new(false),
            hold_bindings: std::sync::atomic::AtomicBool::new(false),
            binding_held: std::sync::atomic::AtomicU64::new(0),
            runs_for: Mutex::new(None),
        });
        let app = Router::new()
            .route("/version", get(version))
            .route("/api", get(api_versions))
            .route("/apis", get(api_groups))
            .route("/api/v1", get(resources))
            .route("/api/v1/nodes", get(list_nodes))
            .route("/api/v1/nodes/{name}", get(get_node))
            .route("/api/v1/namespaces", get(list_namespaces))
            .route("/api/v1/namespaces/{name}", get(get_namespace))
            .route("/api/v1/pods", get(list_all_pods))
            .route(
                "/api/v1/namespaces/{ns}/pods",
                get(list_pods).post(pods::create),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}",
                get(get_pod).delete(pods::delete).patch(pods::patch),
            )
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/binding",
                axum::routing::post(pods::bind),
            )
            .route("/api/v1/namespaces/{ns}/pods/{name}/log", get(pods::log))
            .route(
                "/api/v1/namespaces/{ns}/pods/{name}/exec",
                get(exec::exec).post(exec::exec),
            )
            .route("/apis/batch/v1", get(batch_resources))
            .route("/apis/batch/v1/jobs", get(list_all_jobs))
            .route("/apis/batch/v1/namespaces/{ns}/jobs", get(list_jobs))
            .route("/apis/batch/v1/namespaces/{ns}/jobs/{name}", get(get_job))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                refuse_when_forbidden,
            ))
            .with_state(shared.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .map_err(|e| format!("test API server: {e}"))?;
        let url = format!(
            "http://{}",
            listener.local_addr().map_err(|e| e.to_string())?
        );
        runtime.spawn(async move { axum::serve(listener, app).await });
        Ok(ApiServer { shared, url })
    }

    /// Creates or replaces an object (a Node or a Pod, as JSON of its real shape); its
    /// resourceVersion (and uid, creationTimestamp where missing) are the server's.
    pub fn apply(&self, object: Value) -> Result<u64, String> {
        self.shared.apply(object)
    }

    /// Deletes an object; false if there was none.
    pub fn remove(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        self.shared.remove(kind, namespace, name)
    }

    /// The object now, if any.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        self.shared.get(kind, namespace, name)
    }

    /// A ResourceQuota of `most` pods in `namespace` (`None`: none): creates beyond it are
    /// refused with 403 "exceeded quota", as the real server refuses them.
    pub fn quota_pods(&self, namespace: &str, most: Option<usize>) {
        let mut q = self
            .shared
            .pod_quota
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match most {
            Some(n) => q.insert(namespace.to_string(), n),
            None => q.remove(namespace),
        };
    }

    /// Refuses every request with 403 Forbidden (`true`) as RBAC does when the client's
    /// account lacks the role, or serves again (`false`).
    pub fn forbid(&self, forbidden: bool) {
        self.shared
            .forbidden
            .store(forbidden, std::sync::atomic::Ordering::SeqCst);
    }

    /// Holds every `pods/binding` request until released (`false`): what a test does between a
    /// scheduler's decision and its bind, as a user deleting the pod.
    pub fn hold_bindings(&self, hold: bool) {
        self.shared
            .hold_bindings
            .store(hold, std::sync::atomic::Ordering::SeqCst);
    }

    /// How many `pods/binding` requests wait (`hold_bindings`).
    pub fn bindings_held(&self) -> u64 {
        self.shared
            .binding_held
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The pods of `namespace` now, by name.
    pub fn pods(&self, namespace: &str) -> Vec<Value> {
        let st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        st.objects
            .iter()
            .filter(|((k, ns, _), _)| *k == Kind::Pod && ns == namespace)
            .map(|(_, v)| (**v).clone())
            .collect()
    }

    /// A pod's containers end with exit `code` (as its kubelet would report); a pod being
    /// deleted then goes.
    pub fn finish(&self, namespace: &str, name: &str, code: i32) {
        self.shared.finish(namespace, name, code);
    }

    /// Every pod started from now on runs for `d` and then succeeds (its containers exit 0),
    /// as short jobs on a real cluster do; `None`: pods run until `finish`.
    pub fn end_runs_after(&self, d: Option<Duration>) {
        *self
            .shared
            .runs_for
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = d;
    }

    /// Appends to what a pod has written (its log).
    pub fn log(&self, namespace: &str, name: &str, text: &str) {
        self.shared
            .logs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry((namespace.to_string(), name.to_string()))
            .or_default()
            .push_str(text);
    }

    /// Cuts every open watch (clients must resume from their last version).
    pub fn drop_watches(&self) {
        self.shared.cut.send_modify(|n| *n += 1);
    }

    /// How many lists, watches and 410s the server has answered.
    pub fn counts(&self) -> Counts {
        *self.shared.counts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the history: a watch resuming from before now gets 410 Gone.
    /// (The store moves to a new version as it forgets: every version a client holds is
    /// then older than what a watch may resume from.)
    pub fn compact(&self) {
        let mut st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        st.rv += 1;
        st.history.clear();
        st.oldest = st.rv;
    }
}

impl Shared {
    /// Creates or replaces an object (a Node or a Pod, as JSON of its real shape); its
    /// resourceVersion (and uid, creationTimestamp where missing) are the server's.
    pub(super) fn apply(&self, object: Value) -> Result<u64, String> {
        let kind = match object["kind"].as_str() {
            Some("Node") => Kind::Node,
            Some("Pod") => Kind::Pod,
            Some("Namespace") => Kind::Namespace,
            Some("Job") => Kind::Job,
            other => return Err(format!("test API server: cannot store a {other:?}")),
        };
        let name = object["metadata"]["name"]
            .as_str()
            .ok_or("an object needs metadata.name")?
            .to_string();
        let ns = if kind.namespaced() {
            object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string()
        } else {
            String::new()
        };
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        st.rv += 1;
        let rv = st.rv;
        let key = (kind, ns.clone(), name.clone());
        let before = st.objects.get(&key).cloned();
        let mut object = object;
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        if kind.namespaced() {
            meta["namespace"] = json!(ns);
        }
        if meta["uid"].is_null() {
            meta["uid"] = before
                .as_ref()
                .map(|b| b["metadata"]["uid"].clone())
                .unwrap_or_else(|| json!(format!("{:08x}-0000-4000-8000-{rv:012x}", rv)));
        }
        if meta["creationTimestamp"].is_null() {
            meta["creationTimestamp"] = json!("2026-11-24T00:00:00Z");
        }
        let now = Arc::new(object);
        st.objects.insert(key, now.clone());
        record(&mut st, self, kind, Some(now), before);
        Ok(rv)
    }

    /// Deletes an object; false if there was none.
    pub(super) fn remove(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        let mut st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let ns = if kind.namespaced() { namespace } else { "" };
        let Some(before) = st.objects.remove(&(kind, ns.to_string(), name.to_string())) else {
            return false;
        };
        st.rv += 1;
        record(&mut st, self, kind, None, Some(before));
        true
    }

    /// The object now, if any.
    pub(super) fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        let st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        let ns = if kind.namespaced() { namespace } else { "" };
        st.objects
            .get(&(kind, ns.to_string(), name.to_string()))
            .map(|v| (**v).clone())
    }
}

fn record(
    st: &mut Store,
    shared: &Shared,
    kind: Kind,
    now: Option<Arc<Value>>,
    before: Option<Arc<Value>>,
) {
    let c = Change {
        rv: st.rv,
        kind,
        now,
        before,
    };
    st.history.push_back(c.clone());
    while st.history.len() > HISTORY {
        if let Some(old) = st.history.pop_front() {
            st.oldest = old.rv;
        }
    }
    // No watch open: nobody to tell.
    let _ = shared.changes.send(c);
}

async fn version() -> Response {
    js(json!({
        "major": "1", "minor": "33", "gitVersion": "v1.33.0-gantry-test",
        "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
        "buildDate": "2026-11-24T00:00:00Z", "goVersion": "go1.24", "compiler": "gc",
        "platform": "linux/amd64"
    }))
}

async fn api_versions() -> Response {
    js(json!({
        "kind": "APIVersions", "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]
    }))
}

async fn api_groups() -> Response {
    let batch = json!({"groupVersion": "batch/v1", "version": "v1"});
    js(
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": "batch", "versions": [batch], "preferredVersion": batch}
        ]}),
    )
}

async fn batch_resources() -> Response {
    js(json!({
        "kind": "APIResourceList", "groupVersion": "batch/v1",
        "resources": [
            {"name": "jobs", "singularName": "job", "namespaced": true, "kind": "Job",
             "verbs": ["get", "list", "watch"], "categories": ["all"]}
        ]
    }))
}

async fn list_all_jobs(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Job, None, q).await
}

async fn list_jobs(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Job, Some(ns), q).await
}

async fn get_job(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    get_one(&s, Kind::Job, &ns, &name)
}

async fn resources() -> Response {
    let verbs = json!(["get", "list", "watch"]);
    js(json!({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [
            {"name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node",
             "verbs": verbs, "shortNames": ["no"]},
            {"name": "namespaces", "singularName": "namespace", "namespaced": false,
             "kind": "Namespace", "verbs": verbs, "shortNames": ["ns"]},
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": ["create", "delete", "get", "list", "watch"], "shortNames": ["po"],
             "categories": ["all"]},
            {"name": "pods/binding", "singularName": "", "namespaced": true, "kind": "Binding",
             "verbs": ["create"]},
            {"name": "pods/log", "singularName": "", "namespaced": true, "kind": "Pod",
             "verbs": ["get"]}
        ]
    }))
}

/// A JSON answer.
fn js(v: Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        serde_json::to_vec(&v).unwrap_or_default(),
    )
        .into_response()
}

/// A `Status` answer, as the real server writes errors.
/// RBAC's answer while the server is told to forbid: what the real server says.
async fn refuse_when_forbidden(
    State(s): State<Arc<Shared>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    if !s.forbidden.load(std::sync::atomic::Ordering::SeqCst) {
        return next.run(req).await;
    }
    let resource = req
        .uri()
        .path()
        .rsplit('/')
        .find(|p| ["nodes", "pods", "namespaces", "jobs"].contains(p))
        .unwrap_or("resource")
        .to_string();
    status(
        StatusCode::FORBIDDEN,
        "Forbidden",
        format!("{resource} is forbidden: User \"system:serviceaccount:gantry:gantry\" cannot list resource \"{resource}\" in API group \"\" at the cluster scope"),
    )
}

fn status(code: StatusCode, reason: &str, message: String) -> Response {
    let mut r = js(json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason, "code": code.as_u16()
    }));
    *r.status_mut() = code;
    r
}

async fn get_node(State(s): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    get_one(&s, Kind::Node, "", &name)
}

async fn get_namespace(State(s): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    get_one(&s, Kind::Namespace, "", &name)
}

async fn list_namespaces(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Namespace, None, q).await
}

async fn get_pod(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
) -> Response {
    get_one(&s, Kind::Pod, &ns, &name)
}

fn get_one(s: &Shared, kind: Kind, ns: &str, name: &str) -> Response {
    let st = s.store.lock().unwrap_or_else(|e| e.into_inner());
    match st.objects.get(&(kind, ns.to_string(), name.to_string())) {
        Some(v) => js((**v).clone()),
        None => status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("{}s \"{name}\" not found", kind.name().to_lowercase()),
        ),
    }
}

async fn list_nodes(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Node, None, q).await
}

async fn list_all_pods(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Pod, None, q).await
}

async fn list_pods(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    list(s, Kind::Pod, Some(ns), q).await
}

async fn list(
    s: Arc<Shared>,
    kind: Kind,
    namespace: Option<String>,
    q: HashMap<String, String>,
) -> Response {
    let labels = match label_selector(q.get("labelSelector").map_or("", String::as_str)) {
        Ok(l) => l,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e),
    };
    let fields = match field_selector(q.get("fieldSelector").map_or("", String::as_str)) {
        Ok(f) => f,
        Err(e) => return status(StatusCode::BAD_REQUEST, "BadRequest", e),
    };
    let f = Filter {
        kind,
        namespace,
        labels,
        fields,
    };
    if q.get("watch").is_some_and(|w| w == "true" || w == "1") {
        s.counts.lock().unwrap_or_else(|e| e.into_inner()).watches += 1;
        return watch_stream(s, f, &q);
    }
    s.counts.lock().unwrap_or_else(|e| e.into_inner()).lists += 1;
    // Pages as the real server serves them: `limit` items, then a `continue` token naming
    // the list's version and where the next page starts.
    let limit: usize = q
        .get("limit")
        .and_then(|l| l.parse().ok())
        .filter(|&l| l > 0)
        .unwrap_or(usize::MAX);
    let st = s.store.lock().unwrap_or_else(|e| e.into_inner());
    let (list_rv, after) = match q.get("continue").filter(|c| !c.is_empty()) {
        None => (st.rv, None),
        Some(token) => match token.split_once('|').and_then(|(rv, k)| {
            let (ns, name) = k.split_once('/')?;
            Some((rv.parse::<u64>().ok()?, (ns.to_string(), name.to_string())))
        }) {
            Some((rv, _)) if rv < st.oldest => {
                return status(
                    StatusCode::GONE,
                    "Expired",
                    "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.".to_string(),
                )
            }
            Some((rv, key)) => (rv, Some(key)),
            None => {
                return status(
                    StatusCode::BAD_REQUEST,
                    "BadRequest",
                    format!("invalid continue token {token:?}"),
                )
            }
        },
    };
    let from = match &after {
        Some((ns, name)) => std::ops::Bound::Excluded((kind, ns.clone(), name.clone())),
        None => std::ops::Bound::Included((kind, String::new(), String::new())),
    };
    let mut matching = st
        .objects
        .range((from, std::ops::Bound::Unbounded))
        .take_while(|((k, _, _), _)| *k == kind)
        .filter(|(_, v)| f.matches(v));
    let mut items: Vec<&Value> = Vec::new();
    let mut last = None;
    for (key, v) in matching.by_ref() {
        items.push(v.as_ref());
        last = Some(key);
        if items.len() == limit {
            break;
        }
    }
    let more = items.len() == limit && matching.next().is_some();
    let mut meta = json!({"resourceVersion": list_rv.to_string()});
    if let (true, Some((_, ns, name))) = (more, last) {
        meta["continue"] = json!(format!("{list_rv}|{ns}/{name}"));
    }
    // Serialized here, under the lock: a consistent page.
    let body = serde_json::to_vec(&json!({
        "kind": format!("{}List", kind.name()), "apiVersion": kind.api_version(),
        "metadata": meta,
        "items": items
    }))
    .unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}
