//! Answers kept for retries. A client whose connection breaks before the answer arrives cannot
//! tell whether its change was applied; so every change the client sends carries an
//! `Idempotency-Key`, and sends it again once on a new connection. Here the first answer to
//! each (caller, method, path, key) is kept for a while, and a second request with the same
//! key gets that answer — the change is applied once. A request that comes while the first is
//! still being answered waits for it.
//!
//! Submissions (`POST /v1/jobs`) keep their keys in the journal instead (a job must not be
//! made twice even across a restart of the daemon); workdir uploads are content-addressed.

use super::auth::Caller;
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How long an answer is kept: far longer than a client's one retry takes.
const KEPT: Duration = Duration::from_secs(600);
/// The most answers kept at once (the oldest go first): a few MiB at most.
const MOST: usize = 10_000;
/// The largest answer kept; a larger one is served but not kept (changes answer in bytes).
const LARGEST: usize = 64 << 10;
/// The header that says an answer is the kept one.
pub const REPLAYED: &str = "idempotent-replayed";

#[derive(Clone)]
struct Kept {
    status: StatusCode,
    content_type: Option<HeaderValue>,
    body: Bytes,
}

impl Kept {
    fn response(&self) -> Response {
        let mut r = (self.status, self.body.clone()).into_response();
        if let Some(ct) = &self.content_type {
            r.headers_mut()
                .insert(axum::http::header::CONTENT_TYPE, ct.clone());
        }
        r.headers_mut()
            .insert(REPLAYED, HeaderValue::from_static("true"));
        r
    }
}

enum Entry {
    /// Being answered; the answer comes on the channel (a dropped sender: never answered).
    Pending(watch::Receiver<Option<Kept>>),
    Done(Kept),
}

/// The kept answers.
#[derive(Default)]
pub struct Replays {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    entries: HashMap<String, Entry>,
    /// Keys by when they were first seen, oldest first.
    order: VecDeque<(Instant, String)>,
}

enum Claim {
    Done(Kept),
    Wait(watch::Receiver<Option<Kept>>),
    Mine(watch::Sender<Option<Kept>>),
}

impl Replays {
    fn claim(&self, key: &str, now: Instant) -> Claim {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *g;
        while let Some((at, k)) = inner.order.front() {
            if now.duration_since(*at) < KEPT && inner.order.len() < MOST {
                break;
            }
            inner.entries.remove(k);
            inner.order.pop_front();
        }
        match inner.entries.get(key) {
            Some(Entry::Done(k)) => return Claim::Done(k.clone()),
            // A first request whose handler was dropped never answered: this one goes ahead.
            Some(Entry::Pending(rx)) if rx.has_changed().is_ok() => return Claim::Wait(rx.clone()),
            _ => {}
        }
        let (tx, rx) = watch::channel(None);
        if inner
            .entries
            .insert(key.to_string(), Entry::Pending(rx))
            .is_none()
        {
            inner.order.push_back((now, key.to_string()));
        }
        Claim::Mine(tx)
    }

    fn answered(&self, key: &str, kept: Option<Kept>) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match kept {
            Some(k) => g.entries.insert(key.to_string(), Entry::Done(k)),
            None => g.entries.remove(key),
        };
    }
}

/// The middleware (inside authentication: the key is scoped to the caller). Requests other
/// than changes with a key pass through untouched.
pub async fn remember(
    State(replays): State<Arc<Replays>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let change = !matches!(*req.method(), Method::GET | Method::HEAD);
    let own_keys = matches!(req.uri().path(), "/v1/jobs" | "/v1/workdirs");
    let key = req
        .headers()
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .filter(|k| super::api::valid_key(k));
    let (true, false, Some(key)) = (change, own_keys, key) else {
        return next.run(req).await;
    };
    let who = req
        .extensions()
        .get::<Caller>()
        .map(Caller::scope)
        .unwrap_or_default();
    let scoped = format!("{who}|{} {}|{key}", req.method(), req.uri());
    loop {
        match replays.claim(&scoped, Instant::now()) {
            Claim::Done(kept) => return kept.response(),
            Claim::Wait(mut rx) => {
                if let Ok(kept) = rx.wait_for(Option::is_some).await {
                    if let Some(k) = kept.as_ref() {
                        return k.response();
                    }
                }
                // The first request's handler was dropped unanswered: claim it again.
            }
            Claim::Mine(tx) => {
                let answer = next.run(req).await;
                let (parts, body) = answer.into_parts();
                let Ok(bytes) = to_bytes(body, LARGEST).await else {
                    replays.answered(&scoped, None);
                    return (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "the answer was larger than a change's answer may be",
                    )
                        .into_response();
                };
                let kept = Kept {
                    status: parts.status,
                    content_type: parts.headers.get(axum::http::header::CONTENT_TYPE).cloned(),
                    body: bytes.clone(),
                };
                replays.answered(&scoped, Some(kept.clone()));
                let _ = tx.send(Some(kept));
                return Response::from_parts(parts, Body::from(bytes));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kept(body: &'static str) -> Kept {
        Kept {
            status: StatusCode::OK,
            content_type: None,
            body: Bytes::from_static(body.as_bytes()),
        }
    }

    #[test]
    fn a_key_is_answered_once_then_replayed_until_it_expires() {
        let r = Replays::default();
        let t = Instant::now();
        let Claim::Mine(_tx) = r.claim("k", t) else {
            panic!("the first claim answers")
        };
        assert!(matches!(r.claim("k", t), Claim::Wait(_)), "a second waits");
        r.answered("k", Some(kept("one")));
        let Claim::Done(k) = r.claim("k", t + Duration::from_secs(1)) else {
            panic!("then it is replayed")
        };
        assert_eq!(k.body, "one");
        assert!(
            matches!(
                r.claim("k", t + KEPT + Duration::from_secs(1)),
                Claim::Mine(_)
            ),
            "and forgotten after KEPT"
        );
    }

    #[test]
    fn an_unanswered_claim_is_taken_again() {
        let r = Replays::default();
        let t = Instant::now();
        let Claim::Mine(tx) = r.claim("k", t) else {
            panic!()
        };
        drop(tx);
        assert!(matches!(r.claim("k", t), Claim::Mine(_)));
    }

    #[test]
    fn the_oldest_go_first_past_the_cap() {
        let r = Replays::default();
        let t = Instant::now();
        for i in 0..MOST + 5 {
            let key = i.to_string();
            let _ = r.claim(&key, t);
            r.answered(&key, Some(kept("x")));
        }
        let _ = r.claim("last", t);
        let g = r.inner.lock().unwrap();
        assert!(g.entries.len() <= MOST + 1, "{}", g.entries.len());
        assert!(!g.entries.contains_key("0"), "the oldest went");
    }
}
