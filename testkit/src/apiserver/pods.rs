//! What a scheduler and its users do to pods — create (with `generateName`), bind to a node
//! (the `pods/binding` subresource), delete with a grace period, read logs — and a kubelet
//! stand-in: a bound pod runs (phase Running, its containers started); a pod deleted with
//! grace is terminating (`deletionTimestamp`) until it ends or the grace runs out (then its
//! container is killed: exit 137) and goes. Tests end pods with [`super::ApiServer::finish`]
//! and give them output with [`super::ApiServer::log`].

use super::{js, status, Kind, Shared};
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

const NOW: &str = "2026-11-24T00:00:00Z";

pub(super) async fn create(
    State(s): State<Arc<Shared>>,
    Path(ns): Path<String>,
    body: axum::body::Bytes,
) -> Response {
    let mut pod: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => {
            return status(
                StatusCode::BAD_REQUEST,
                "BadRequest",
                format!("the body of the request was in an unknown format: {e}"),
            )
        }
    };
    if pod["kind"] != "Pod" {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            format!("expected a Pod, got kind {}", pod["kind"]),
        );
    }
    if pod["metadata"]["name"].as_str().unwrap_or("").is_empty() {
        let Some(prefix) = pod["metadata"]["generateName"].as_str() else {
            return status(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Invalid",
                "Pod \"\" is invalid: metadata.name: Required value: name or generateName is required".into(),
            );
        };
        let n = s.store.lock().unwrap_or_else(|e| e.into_inner()).rv + 1;
        pod["metadata"]["name"] = json!(format!("{prefix}{:05x}", n % 0xfffff));
    }
    let name = pod["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if s.get(Kind::Pod, &ns, &name).is_some() {
        return status(
            StatusCode::CONFLICT,
            "AlreadyExists",
            format!("pods \"{name}\" already exists"),
        );
    }
    pod["metadata"]["namespace"] = json!(ns);
    if pod["status"]["phase"].is_null() {
        pod["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    let bound = pod["spec"]["nodeName"].as_str().is_some();
    {
        let quota = s.pod_quota.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&most) = quota.get(&ns) {
            let used = s.pods_in(&ns);
            if used >= most {
                return status(
                    StatusCode::FORBIDDEN,
                    "Forbidden",
                    format!("pods \"{name}\" is forbidden: exceeded quota: pods, requested: pods=1, used: pods={used}, limited: pods={most}"),
                );
            }
        }
        if let Err(e) = s.apply(pod) {
            return status(StatusCode::BAD_REQUEST, "BadRequest", e);
        }
    }
    if bound {
        s.kubelet_start(&ns, &name);
    }
    let mut r = js(s.get(Kind::Pod, &ns, &name).unwrap_or_default());
    *r.status_mut() = StatusCode::CREATED;
    r
}

pub(super) async fn bind(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    body: axum::body::Bytes,
) -> Response {
    use std::sync::atomic::Ordering;
    if s.hold_bindings.load(Ordering::SeqCst) {
        s.binding_held.fetch_add(1, Ordering::SeqCst);
        while s.hold_bindings.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        s.binding_held.fetch_sub(1, Ordering::SeqCst);
    }
    let b: Value = serde_json::from_slice(&body).unwrap_or_default();
    let Some(node) = b["target"]["name"].as_str().filter(|n| !n.is_empty()) else {
        return status(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Invalid",
            "Binding is invalid: target.name: Required value".into(),
        );
    };
    let Some(mut pod) = s.get(Kind::Pod, &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    if let Some(on) = pod["spec"]["nodeName"].as_str() {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is already assigned to node \"{on}\""),
        );
    }
    if !pod["metadata"]["deletionTimestamp"].is_null() {
        return status(
            StatusCode::CONFLICT,
            "Conflict",
            format!("Operation cannot be fulfilled on pods/binding \"{name}\": pod {name} is being deleted, cannot be assigned to a host"),
        );
    }
    pod["spec"]["nodeName"] = json!(node);
    if let Err(e) = s.apply(pod) {
        return status(StatusCode::BAD_REQUEST, "BadRequest", e);
    }
    s.counts.lock().unwrap_or_else(|e| e.into_inner()).bindings += 1;
    s.kubelet_start(&ns, &name);
    let mut r = js(
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    );
    *r.status_mut() = StatusCode::CREATED;
    r
}

/// A JSON merge patch (RFC 7386, `application/merge-patch+json`) of a pod's labels and
/// annotations: what a scheduler writes on the pods it places.
pub(super) async fn patch(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    headers: axum::http::HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let kind = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if kind != "application/merge-patch+json" {
        return status(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "UnsupportedMediaType",
            format!("the body of the request was in an unknown format - accepted media types include: application/merge-patch+json (got {kind:?}; this test server takes merge patches only)"),
        );
    }
    let Ok(p) = serde_json::from_slice::<Value>(&body) else {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "the patch is not JSON".into(),
        );
    };
    let Some(mut pod) = s.get(Kind::Pod, &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    for key in ["labels", "annotations"] {
        if let Some(m) = p["metadata"][key].as_object() {
            if !pod["metadata"][key].is_object() {
                pod["metadata"][key] = json!({});
            }
            for (k, v) in m {
                if v.is_null() {
                    pod["metadata"][key].as_object_mut().map(|o| o.remove(k));
                } else {
                    pod["metadata"][key][k] = v.clone();
                }
            }
        }
    }
    if let Err(e) = s.apply(pod) {
        return status(StatusCode::BAD_REQUEST, "BadRequest", e);
    }
    js(s.get(Kind::Pod, &ns, &name).unwrap_or_default())
}

pub(super) async fn delete(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
    body: axum::body::Bytes,
) -> Response {
    let Some(mut pod) = s.get(Kind::Pod, &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    // DeleteOptions in the body or the query; the pod's own grace otherwise (30 s default).
    let opts: Value = serde_json::from_slice(&body).unwrap_or_default();
    let grace = opts["gracePeriodSeconds"]
        .as_u64()
        .or_else(|| q.get("gracePeriodSeconds").and_then(|g| g.parse().ok()))
        .or_else(|| pod["spec"]["terminationGracePeriodSeconds"].as_u64())
        .unwrap_or(30);
    let running = pod["spec"]["nodeName"].as_str().is_some()
        && !matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
    if grace == 0 || !running {
        s.remove(Kind::Pod, &ns, &name);
        return js(pod);
    }
    if pod["metadata"]["deletionTimestamp"].is_null() {
        pod["metadata"]["deletionTimestamp"] = json!(NOW);
        pod["metadata"]["deletionGracePeriodSeconds"] = json!(grace);
        let _ = s.apply(pod.clone());
        let (shared, ns2, name2) = (s.clone(), ns.clone(), name.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(grace)).await;
            // Still running when the grace ends: killed.
            shared.finish(&ns2, &name2, 137);
        });
    }
    let mut r = js(s.get(Kind::Pod, &ns, &name).unwrap_or(pod));
    *r.status_mut() = StatusCode::OK;
    r
}

pub(super) async fn log(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    if s.get(Kind::Pod, &ns, &name).is_none() {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    }
    let text = s
        .logs
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&(ns, name))
        .cloned()
        .unwrap_or_default();
    let text = match q.get("tailLines").and_then(|t| t.parse::<usize>().ok()) {
        Some(n) => {
            let lines: Vec<&str> = text.lines().collect();
            let mut t = lines[lines.len().saturating_sub(n)..].join("\n");
            if !t.is_empty() {
                t.push('\n');
            }
            t
        }
        None => text,
    };
    axum::response::IntoResponse::into_response((
        [(axum::http::header::CONTENT_TYPE, "text/plain")],
        text,
    ))
}

impl Shared {
    /// How many pods `ns` has.
    fn pods_in(&self, ns: &str) -> usize {
        let st = self.store.lock().unwrap_or_else(|e| e.into_inner());
        st.objects
            .keys()
            .filter(|(k, n, _)| *k == Kind::Pod && n == ns)
            .count()
    }

    /// The kubelet stand-in starts a bound pod's containers (and ends them after
    /// `runs_for`, where set).
    pub(super) fn kubelet_start(self: &Arc<Self>, ns: &str, name: &str) {
        let runs_for = *self.runs_for.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = runs_for {
            let (s, ns, name) = (self.clone(), ns.to_string(), name.to_string());
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                s.finish(&ns, &name, 0);
            });
        }
        let Some(mut pod) = self.get(Kind::Pod, ns, name) else {
            return;
        };
        let containers: Vec<Value> = pod["spec"]["containers"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                json!({"name": c["name"], "image": c["image"], "ready": true, "restartCount": 0,
                       "started": true, "state": {"running": {"startedAt": NOW}}})
            })
            .collect();
        pod["status"]["phase"] = json!("Running");
        pod["status"]["startTime"] = json!(NOW);
        pod["status"]["containerStatuses"] = json!(containers);
        let _ = self.apply(pod);
    }

    /// A pod's containers end with `code` (0: Succeeded, else Failed); a pod being deleted
    /// then goes.
    pub(super) fn finish(&self, ns: &str, name: &str, code: i32) {
        let Some(mut pod) = self.get(Kind::Pod, ns, name) else {
            return;
        };
        if matches!(
            pod["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        ) {
            return;
        }
        let reason = match code {
            0 => "Completed",
            137 => "Killed",
            _ => "Error",
        };
        for c in pod["status"]["containerStatuses"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            c["ready"] = json!(false);
            c["state"] = json!({"terminated": {"exitCode": code, "reason": reason,
                                               "startedAt": NOW, "finishedAt": NOW}});
        }
        pod["status"]["phase"] = json!(if code == 0 { "Succeeded" } else { "Failed" });
        let deleting = !pod["metadata"]["deletionTimestamp"].is_null();
        let _ = self.apply(pod);
        if deleting {
            self.remove(Kind::Pod, ns, name);
        }
    }
}
