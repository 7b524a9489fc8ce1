//! A Kubernetes API server for tests and benchmarks: no kube-apiserver can be installed on
//! the machines gantry is built on, so this keeps the semantics gantry's client relies on —
//! checked with the real `kubectl` (tests/kube.rs) so it cannot drift from what a client
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
//! * discovery (`/api`, `/apis`, `/api/v1`, `/version`) as kubectl reads it.
//!
//! Objects go in through [`ApiServer::apply`] and [`ApiServer::remove`] (what a cluster's
//! other clients would do); [`ApiServer::drop_watches`] cuts every open watch, as a load
//! balancer or an apiserver restart does.

use axum::body::Body;
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

/// Changes kept for watches to resume from.
const HISTORY: usize = 10_000;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Node,
    Pod,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Node => "Node",
            Kind::Pod => "Pod",
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
}

/// What the server has answered, for tests to check how a client behaved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub lists: u64,
    pub watches: u64,
    /// Watches answered 410 Gone (their version was compacted away).
    pub gone: u64,
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
        });
        let app = Router::new()
            .route("/version", get(version))
            .route("/api", get(api_versions))
            .route("/apis", get(api_groups))
            .route("/api/v1", get(resources))
            .route("/api/v1/nodes", get(list_nodes))
            .route("/api/v1/nodes/{name}", get(get_node))
            .route("/api/v1/pods", get(list_all_pods))
            .route("/api/v1/namespaces/{ns}/pods", get(list_pods))
            .route("/api/v1/namespaces/{ns}/pods/{name}", get(get_pod))
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
        let kind = match object["kind"].as_str() {
            Some("Node") => Kind::Node,
            Some("Pod") => Kind::Pod,
            other => return Err(format!("test API server: cannot store a {other:?}")),
        };
        let name = object["metadata"]["name"]
            .as_str()
            .ok_or("an object needs metadata.name")?
            .to_string();
        let ns = match kind {
            Kind::Node => String::new(),
            Kind::Pod => object["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_string(),
        };
        let mut st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        st.rv += 1;
        let rv = st.rv;
        let key = (kind, ns.clone(), name.clone());
        let before = st.objects.get(&key).cloned();
        let mut object = object;
        let meta = &mut object["metadata"];
        meta["resourceVersion"] = json!(rv.to_string());
        if kind == Kind::Pod {
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
        record(&mut st, &self.shared, kind, Some(now), before);
        Ok(rv)
    }

    /// Deletes an object; false if there was none.
    pub fn remove(&self, kind: Kind, namespace: &str, name: &str) -> bool {
        let mut st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        let ns = if kind == Kind::Node { "" } else { namespace };
        let Some(before) = st.objects.remove(&(kind, ns.to_string(), name.to_string())) else {
            return false;
        };
        st.rv += 1;
        record(&mut st, &self.shared, kind, None, Some(before));
        true
    }

    /// The object now, if any.
    pub fn get(&self, kind: Kind, namespace: &str, name: &str) -> Option<Value> {
        let st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        let ns = if kind == Kind::Node { "" } else { namespace };
        st.objects
            .get(&(kind, ns.to_string(), name.to_string()))
            .map(|v| (**v).clone())
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
    pub fn compact(&self) {
        let mut st = self.shared.store.lock().unwrap_or_else(|e| e.into_inner());
        st.history.clear();
        st.oldest = st.rv;
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
    js(json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": []}))
}

async fn resources() -> Response {
    let verbs = json!(["get", "list", "watch"]);
    js(json!({
        "kind": "APIResourceList", "groupVersion": "v1",
        "resources": [
            {"name": "nodes", "singularName": "node", "namespaced": false, "kind": "Node",
             "verbs": verbs, "shortNames": ["no"]},
            {"name": "pods", "singularName": "pod", "namespaced": true, "kind": "Pod",
             "verbs": verbs, "shortNames": ["po"], "categories": ["all"]},
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

/// What a list or watch asks for.
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: Vec<LabelReq>,
    fields: Vec<(String, bool, String)>,
}

impl Filter {
    fn matches(&self, v: &Value) -> bool {
        if let Some(ns) = &self.namespace {
            if v["metadata"]["namespace"].as_str() != Some(ns) {
                return false;
            }
        }
        let labels = v["metadata"]["labels"].as_object();
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.labels.iter().all(|r| r.holds(label(&r.key)))
            && self.fields.iter().all(|(path, eq, want)| {
                let got = match path.as_str() {
                    "metadata.name" => v["metadata"]["name"].as_str(),
                    "metadata.namespace" => v["metadata"]["namespace"].as_str(),
                    "spec.nodeName" => v["spec"]["nodeName"].as_str(),
                    "status.phase" => v["status"]["phase"].as_str(),
                    "spec.unschedulable" => Some(if v["spec"]["unschedulable"] == true {
                        "true"
                    } else {
                        "false"
                    }),
                    _ => None,
                }
                .unwrap_or("");
                (got == want) == *eq
            })
    }
}

enum LabelOp {
    Eq(String),
    Ne(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    Absent,
}

struct LabelReq {
    key: String,
    op: LabelOp,
}

impl LabelReq {
    fn holds(&self, got: Option<&str>) -> bool {
        match &self.op {
            LabelOp::Eq(v) => got == Some(v),
            LabelOp::Ne(v) => got != Some(v),
            LabelOp::In(vs) => got.is_some_and(|g| vs.iter().any(|v| v == g)),
            LabelOp::NotIn(vs) => !got.is_some_and(|g| vs.iter().any(|v| v == g)),
            LabelOp::Exists => got.is_some(),
            LabelOp::Absent => got.is_none(),
        }
    }
}

/// `a=b,c!=d,e in (x,y),!f` → requirements (commas inside parentheses kept).
fn label_selector(text: &str) -> Result<Vec<LabelReq>, String> {
    let mut parts = Vec::new();
    let (mut depth, mut cur) = (0, String::new());
    for c in text.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    let set = |s: &str| -> Vec<String> {
        s.trim()
            .trim_start_matches('(')
            .trim_end_matches(')')
            .split(',')
            .map(|x| x.trim().to_string())
            .collect()
    };
    parts
        .into_iter()
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let req = |key: &str, op| LabelReq {
                key: key.trim().to_string(),
                op,
            };
            Ok(if let Some((k, v)) = p.split_once(" notin ") {
                req(k, LabelOp::NotIn(set(v)))
            } else if let Some((k, v)) = p.split_once(" in ") {
                req(k, LabelOp::In(set(v)))
            } else if let Some((k, v)) = p.split_once("!=") {
                req(k, LabelOp::Ne(v.trim().to_string()))
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                req(k, LabelOp::Eq(v.trim().to_string()))
            } else if let Some(k) = p.strip_prefix('!') {
                req(k, LabelOp::Absent)
            } else if p.contains(|c: char| c.is_whitespace() || c == '(') {
                return Err(format!("unable to parse requirement: {p:?}"));
            } else {
                req(&p, LabelOp::Exists)
            })
        })
        .collect()
}

fn field_selector(text: &str) -> Result<Vec<(String, bool, String)>, String> {
    text.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| {
            let (k, eq, v) = if let Some((k, v)) = p.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = p.split_once("==").or_else(|| p.split_once('=')) {
                (k, true, v)
            } else {
                return Err(format!("invalid selector: {p:?}; can't understand {p:?}"));
            };
            let k = k.trim();
            if ![
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "status.phase",
                "spec.unschedulable",
            ]
            .contains(&k)
            {
                return Err(format!("field label not supported: {k}"));
            }
            Ok((k.to_string(), eq, v.trim().to_string()))
        })
        .collect()
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
        "kind": format!("{}List", kind.name()), "apiVersion": "v1",
        "metadata": meta,
        "items": items
    }))
    .unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

fn event(kind: &str, object: &Value) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    line.push(b'\n');
    line
}

/// What `c` means for a watch with filter `f`: the event it sends, if any.
fn watch_event(f: &Filter, c: &Change) -> Option<Vec<u8>> {
    if c.kind != f.kind {
        return None;
    }
    let was = c.before.as_deref().is_some_and(|b| f.matches(b));
    let is = c.now.as_deref().is_some_and(|n| f.matches(n));
    match (was, is, &c.now) {
        (false, true, Some(n)) => Some(event("ADDED", n)),
        (true, true, Some(n)) => Some(event("MODIFIED", n)),
        (true, false, now) => {
            // Gone, or no longer matching: DELETED with its last state.
            let mut last = now.as_deref().or(c.before.as_deref()).cloned()?;
            last["metadata"]["resourceVersion"] = json!(c.rv.to_string());
            Some(event("DELETED", &last))
        }
        _ => None,
    }
}

fn watch_stream(s: Arc<Shared>, f: Filter, q: &HashMap<String, String>) -> Response {
    let from: u64 = q
        .get("resourceVersion")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|b| b == "true");
    let timeout = q
        .get("timeoutSeconds")
        .and_then(|t| t.parse().ok())
        .map_or(Duration::from_secs(1800), Duration::from_secs);
    // Subscribed before the replay is read: nothing falls between the two.
    let mut rx = s.changes.subscribe();
    let mut cut = s.cut.subscribe();
    let (tx, out) = tokio::sync::mpsc::channel::<Vec<u8>>(1024);
    let replay: Result<(Vec<Vec<u8>>, u64), u64> = {
        let st = s.store.lock().unwrap_or_else(|e| e.into_inner());
        if from != 0 && from < st.oldest {
            s.counts.lock().unwrap_or_else(|e| e.into_inner()).gone += 1;
            Err(st.oldest)
        } else if from == 0 {
            // No version: the current state as ADDED events, then changes.
            let items = st
                .objects
                .iter()
                .filter(|((k, _, _), v)| *k == f.kind && f.matches(v))
                .map(|(_, v)| event("ADDED", v))
                .collect();
            Ok((items, st.rv))
        } else {
            let items = st
                .history
                .iter()
                .filter(|c| c.rv > from)
                .filter_map(|c| watch_event(&f, c))
                .collect();
            Ok((items, st.rv))
        }
    };
    let kind = f.kind.name();
    tokio::spawn(async move {
        let (replayed, mut last) = match replay {
            Ok(r) => r,
            Err(oldest) => {
                let gone = json!({
                    "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": format!("too old resource version: {from} ({oldest})"),
                    "reason": "Expired", "code": 410
                });
                let _ = tx.send(event("ERROR", &gone)).await;
                return;
            }
        };
        for e in replayed {
            if tx.send(e).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::Instant::now() + timeout;
        let mut tick = tokio::time::interval(s.bookmark_every);
        tick.tick().await;
        loop {
            tokio::select! {
                c = rx.recv() => match c {
                    Ok(c) if c.rv <= last => {}
                    Ok(c) => {
                        last = c.rv;
                        if let Some(e) = watch_event(&f, &c) {
                            if tx.send(e).await.is_err() { return; }
                        }
                    }
                    // A watcher too slow for the change rate is cut, as the real server does.
                    Err(_) => return,
                },
                _ = tick.tick(), if bookmarks => {
                    let rv = s.store.lock().unwrap_or_else(|e| e.into_inner()).rv.max(last);
                    let b = json!({"kind": kind, "apiVersion": "v1", "metadata": {"resourceVersion": rv.to_string()}});
                    if tx.send(event("BOOKMARK", &b)).await.is_err() { return; }
                }
                _ = cut.changed() => return,
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    });
    let stream = futures_util::stream::unfold(out, |mut out| async move {
        out.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(b), out))
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(stream),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_read_as_the_api_server_reads_them() {
        let v = json!({"metadata": {"name": "n1", "labels": {"a": "1", "zone": "z1"}}, "spec": {"nodeName": "x"}});
        let f = |l: &str, fs: &str| {
            Filter {
                kind: Kind::Node,
                namespace: None,
                labels: label_selector(l).unwrap(),
                fields: field_selector(fs).unwrap(),
            }
            .matches(&v)
        };
        assert!(f("a=1", ""));
        assert!(f("a==1,zone in (z1, z2)", "metadata.name=n1"));
        assert!(!f("a!=1", ""));
        assert!(f("!b,a", "spec.nodeName!=y"));
        assert!(!f("zone notin (z1)", ""));
        assert!(!f("", "spec.nodeName="));
        assert!(field_selector("spec.bogus=1").is_err());
    }
}
