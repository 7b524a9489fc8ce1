//! Watches: what changed after a version, then changes as they come, bookmarks, 410 Gone
//! for a version the history no longer has.

use super::{Change, Filter, Shared};
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

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

pub(super) fn watch_stream(s: Arc<Shared>, f: Filter, q: &HashMap<String, String>) -> Response {
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
                // A cut comes first: a watch cut delivers nothing made after the cut (as a
                // connection lost at that moment), however soon the next change follows.
                biased;
                _ = cut.changed() => return,
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
                    // The version this watch has delivered everything up to: a client
                    // resuming from it misses nothing.
                    let b = json!({"kind": kind, "apiVersion": f.kind.api_version(), "metadata": {"resourceVersion": last.to_string()}});
                    if tx.send(event("BOOKMARK", &b)).await.is_err() { return; }
                }
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
