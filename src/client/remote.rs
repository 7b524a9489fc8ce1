//! The console's view of a remote daemon: a thread follows `/v1/events/stream` (a snapshot,
//! then deltas) and reconnects when the stream breaks, saying so in the event list; changes
//! are requests of their own.

use super::http::{new_idempotency_key, ClientError, Endpoint, HttpClient};
use crate::api::{Client, Snapshot, SnapshotDelta};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the following thread shares with the console.
#[derive(Default)]
struct Followed {
    snapshot: Snapshot,
    /// A change the console has not taken yet.
    news: bool,
    /// Since when (local time) and why the daemon is out of reach; cleared by its next
    /// snapshot.
    lost: Option<String>,
}

pub struct RemoteClient {
    shared: Arc<Mutex<Followed>>,
    snapshot: Snapshot,
    lost: Option<String>,
    access: crate::api::Access,
    /// For changes (requests of their own; the stream has its connection).
    http: HttpClient,
}

impl RemoteClient {
    /// Connects once (so a wrong address fails now, with its reason), then follows.
    pub fn connect(endpoint: Endpoint, token: Option<String>) -> Result<RemoteClient, ClientError> {
        let mut http = HttpClient::new(endpoint.clone(), token.clone());
        let first: Snapshot = http.call("GET", "/v1/snapshot", None)?;
        let access = http
            .call::<crate::api::WhoAmI>("GET", "/v1/whoami", None)?
            .access();
        let shared = Arc::new(Mutex::new(Followed {
            snapshot: first.clone(),
            ..Followed::default()
        }));
        let mine = shared.clone();
        std::thread::Builder::new()
            .name("gantry-follow".into())
            .spawn(move || loop {
                let mut c = HttpClient::new(endpoint.clone(), token.clone());
                let result = c.follow("/v1/events/stream", |event, data| {
                    let Ok(mut guard) = mine.lock() else {
                        return false;
                    };
                    match event {
                        "snapshot" => {
                            if let Ok(s) = serde_json::from_str::<Snapshot>(data) {
                                guard.snapshot = s;
                                guard.news = true;
                                guard.lost = None;
                            }
                        }
                        "delta" => {
                            if let Ok(d) = serde_json::from_str::<SnapshotDelta>(data) {
                                guard.snapshot.apply(d);
                                guard.news = true;
                            }
                        }
                        _ => {}
                    }
                    true
                });
                if let Ok(mut guard) = mine.lock() {
                    let why = match result {
                        Ok(()) => "the daemon closed the stream".to_string(),
                        Err(e) => e.to_string(),
                    };
                    if guard.lost.is_none() {
                        let at = chrono::Local::now().format("%H:%M:%S");
                        guard.lost = Some(format!("since {at}"));
                        guard.snapshot.events.insert(
                            0,
                            format!("{at} connection lost: {why}; retrying every 2 s"),
                        );
                        guard.news = true;
                    }
                }
                std::thread::sleep(Duration::from_secs(2));
            })
            .map_err(|e| ClientError::Protocol {
                endpoint: String::new(),
                why: e.to_string(),
            })?;
        Ok(RemoteClient {
            shared,
            snapshot: first,
            lost: None,
            access,
            http,
        })
    }
}

impl Client for RemoteClient {
    fn access(&self) -> crate::api::Access {
        self.access.clone()
    }
    fn what_if(&mut self, req: crate::api::JobRequest) -> Result<crate::api::WhatIf, ClientError> {
        let path = format!("/v1/jobs/{}/{}?dry_run=true", req.id, req.action.name());
        self.http.call("POST", &path, None)
    }
    fn what_if_many(
        &mut self,
        action: crate::api::JobAction,
        ids: &[i64],
    ) -> Result<crate::api::WhatIf, ClientError> {
        let body = serde_json::json!({ "jobs": ids }).to_string();
        let path = format!("/v1/preview/{}", action.name());
        self.http.call("POST", &path, Some(body.as_bytes()))
    }
    fn what_if_priority(
        &mut self,
        id: i64,
        class: &str,
    ) -> Result<crate::api::WhatIf, ClientError> {
        let body = serde_json::json!({ "class": class }).to_string();
        let path = format!("/v1/jobs/{id}/priority?dry_run=true");
        self.http.call("PUT", &path, Some(body.as_bytes()))
    }
    fn act(&mut self, req: crate::api::JobRequest) -> Result<String, ClientError> {
        let path = format!("/v1/jobs/{}/{}", req.id, req.action.name());
        self.http
            .call::<serde_json::Value>("POST", &path, None)
            .map(|_| format!("job {}: {} done", req.id, req.action.name()))
    }
    fn logs(
        &mut self,
        id: i64,
        node: Option<usize>,
        from: &crate::api::LogsFrom,
    ) -> Result<crate::api::LogsView, ClientError> {
        let node = node.map_or(String::new(), |k| format!("&node={k}"));
        self.http.call(
            "GET",
            &format!("/v1/jobs/{id}/logs?{}{node}", from.query()),
            None,
        )
    }
    fn pool(&mut self, index: usize) -> Result<crate::api::PoolDetail, ClientError> {
        self.http.call("GET", &format!("/v1/pools/{index}"), None)
    }
    fn node(
        &mut self,
        name: &str,
        range: crate::api::history::Range,
    ) -> Result<crate::api::NodeDetail, ClientError> {
        self.http
            .call("GET", &super::http::node_path(name, range), None)
    }
    fn submit(&mut self, spec: &str) -> Result<i64, ClientError> {
        #[derive(serde::Deserialize)]
        struct Submitted {
            id: i64,
        }
        let key = new_idempotency_key()?;
        self.http
            .call_with::<Submitted>(
                "POST",
                "/v1/jobs?file=form",
                Some(spec.as_bytes()),
                &[("Idempotency-Key", &key)],
            )
            .map(|s| s.id)
    }
    fn preview(&mut self, spec: &str) -> Result<crate::api::Preview, ClientError> {
        self.http
            .call("POST", "/v1/preview?file=form", Some(spec.as_bytes()))
    }
    fn job(&mut self, id: i64) -> Result<crate::api::JobView, ClientError> {
        self.http.call("GET", &format!("/v1/jobs/{id}"), None)
    }
    fn shell(&mut self, id: i64) -> Result<i32, ClientError> {
        let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
        let path = super::http::exec_path(id, 0, Some((rows, cols)), &[]);
        self.http.exec(&path, true)
    }
    fn set_priority(&mut self, id: i64, class: &str) -> Result<String, ClientError> {
        let body = serde_json::json!({ "class": class }).to_string();
        self.http
            .call::<serde_json::Value>(
                "PUT",
                &format!("/v1/jobs/{id}/priority"),
                Some(body.as_bytes()),
            )
            .map(|_| format!("job {id}: now {class}"))
    }
    fn reclaim(
        &mut self,
        apply: Option<&str>,
    ) -> Result<crate::scheduler::reclaim::ReclaimPlan, ClientError> {
        match apply {
            None => self.http.call("GET", "/v1/reclaim", None),
            Some(id) => {
                let body = serde_json::json!({ "plan": id }).to_string();
                self.http.call("POST", "/v1/reclaim", Some(body.as_bytes()))
            }
        }
    }
    fn poll(&mut self) -> bool {
        let Ok(mut guard) = self.shared.lock() else {
            return false;
        };
        if !guard.news {
            return false;
        }
        guard.news = false;
        self.snapshot = guard.snapshot.clone();
        self.lost = guard.lost.clone();
        true
    }
    fn lost(&self) -> Option<String> {
        self.lost.clone()
    }
    fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    fn until_next(&self) -> Duration {
        Duration::from_millis(200)
    }
}
