//! Answers kept for retries. A client whose connection breaks before the answer arrives cannot
//! tell whether its change was applied; so every change the client sends carries an
//! `Idempotency-Key`, and sends it again once on a new connection. Here the first answer to
//! each (caller, method, path, key) is kept for a while, and a second request with the same
//! key gets that answer — the change is applied once. A request that comes while the first is
//! still being answered waits for it.
//!
//! Submissions (`POST /v1/jobs`) keep their keys in the journal instead (a job must not be
//! made twice even across a restart of the daemon); workdir uploads are content-addressed.

use crate::daemon::auth::Caller;
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
/// The most answers kept at once (the oldest go first).
const MOST: usize = 10_000;
/// The largest answer kept; a larger one is served but not kept (changes answer in bytes).
const LARGEST: usize = 64 << 10;
/// The bytes all kept answers may hold together (keys and bodies), and one caller's share:
/// past its share a caller's own oldest answers go, never another's; past the whole, the
/// oldest of anyone's. Counted in bytes, not entries: what any caller can make the daemon
/// hold is bounded whatever the size of each answer.
const BUDGET: usize = 32 << 20;
const PER_CALLER: usize = 4 << 20;
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
    /// Keys by when they were first seen, oldest first, with their caller.
    order: VecDeque<(Instant, String, String)>,
    /// Bytes held per kept key (its key and its answer), per caller and in all.
    sizes: HashMap<String, usize>,
    by_caller: HashMap<String, usize>,
    bytes: usize,
}

impl Inner {
    fn forget(&mut self, key: &str, caller: &str) {
        self.entries.remove(key);
        if let Some(n) = self.sizes.remove(key) {
            self.bytes -= n;
            if let Some(c) = self.by_caller.get_mut(caller) {
                *c -= n;
                if *c == 0 {
                    self.by_caller.remove(caller);
                }
            }
        }
    }

    /// Makes room for `n` more bytes of `caller`'s: its own oldest first while it is over its
    /// share, then anyone's oldest while all are over the budget.
    fn room(&mut self, caller: &str, n: usize) {
        while self.by_caller.get(caller).copied().unwrap_or(0) + n > PER_CALLER {
            let Some(i) = self
                .order
                .iter()
                .position(|(_, k, c)| c == caller && self.sizes.contains_key(k))
            else {
                break;
            };
            if let Some((_, k, c)) = self.order.remove(i) {
                self.forget(&k, &c);
            }
        }
        while self.bytes + n > BUDGET {
            let Some((_, k, c)) = self.order.pop_front() else {
                break;
            };
            self.forget(&k, &c);
        }
    }
}

enum Claim {
    Done(Kept),
    Wait(watch::Receiver<Option<Kept>>),
    Mine(watch::Sender<Option<Kept>>),
}

impl Replays {
    fn claim(&self, caller: &str, key: &str, now: Instant) -> Claim {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let inner = &mut *g;
        while let Some((at, _, _)) = inner.order.front() {
            if now.duration_since(*at) < KEPT && inner.order.len() < MOST {
                break;
            }
            if let Some((_, k, c)) = inner.order.pop_front() {
                inner.forget(&k, &c);
            }
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
            inner
                .order
                .push_back((now, key.to_string(), caller.to_string()));
        }
        Claim::Mine(tx)
    }

    fn answered(&self, caller: &str, key: &str, kept: Option<Kept>) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        match kept {
            Some(k) => {
                let n = key.len() + k.body.len();
                g.room(caller, n);
                g.entries.insert(key.to_string(), Entry::Done(k));
                g.sizes.insert(key.to_string(), n);
                *g.by_caller.entry(caller.to_string()).or_default() += n;
                g.bytes += n;
            }
            None => g.forget(key, caller),
        };
    }

    /// The bytes kept answers hold now.
    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().map_or(0, |g| g.bytes)
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
        .filter(|k| super::valid_key(k));
    let (true, false, Some(key)) = (change, own_keys, key) else {
        return next.run(req).await;
    };
    let who = req
        .extensions()
        .get::<Caller>()
        .map(Caller::scope)
        .unwrap_or_default();
    // The URI by its digest: a key's size is bounded whatever the request's.
    let uri = {
        use sha2::Digest;
        crate::random::hex(&sha2::Sha256::digest(req.uri().to_string().as_bytes())[..16])
    };
    let scoped = format!("{who}|{} {uri}|{key}", req.method());
    loop {
        match replays.claim(&who, &scoped, Instant::now()) {
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
                    replays.answered(&who, &scoped, None);
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
                replays.answered(&who, &scoped, Some(kept.clone()));
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
        let Claim::Mine(_tx) = r.claim("c", "k", t) else {
            panic!("the first claim answers")
        };
        assert!(
            matches!(r.claim("c", "k", t), Claim::Wait(_)),
            "a second waits"
        );
        r.answered("c", "k", Some(kept("one")));
        let Claim::Done(k) = r.claim("c", "k", t + Duration::from_secs(1)) else {
            panic!("then it is replayed")
        };
        assert_eq!(k.body, "one");
        assert!(
            matches!(
                r.claim("c", "k", t + KEPT + Duration::from_secs(1)),
                Claim::Mine(_)
            ),
            "and forgotten after KEPT"
        );
    }

    #[test]
    fn an_unanswered_claim_is_taken_again() {
        let r = Replays::default();
        let t = Instant::now();
        let Claim::Mine(tx) = r.claim("c", "k", t) else {
            panic!()
        };
        drop(tx);
        assert!(matches!(r.claim("c", "k", t), Claim::Mine(_)));
    }

    #[test]
    fn the_oldest_go_first_past_the_cap() {
        let r = Replays::default();
        let t = Instant::now();
        for i in 0..MOST + 5 {
            let key = i.to_string();
            let _ = r.claim("c", &key, t);
            r.answered("c", &key, Some(kept("x")));
        }
        let _ = r.claim("c", "last", t);
        let g = r.inner.lock().unwrap();
        assert!(g.entries.len() <= MOST + 1, "{}", g.entries.len());
        assert!(!g.entries.contains_key("0"), "the oldest went");
    }

    #[test]
    fn what_is_kept_is_bounded_in_bytes_per_caller_and_in_all() {
        let r = Replays::default();
        let t = Instant::now();
        let big = Bytes::from(vec![b'x'; LARGEST]);
        let answer = |body: &Bytes| Kept {
            status: StatusCode::OK,
            content_type: None,
            body: body.clone(),
        };
        // One caller sending answers the size of the largest kept: its share, no more.
        for i in 0..1_000 {
            let key = format!("a{i}");
            let _ = r.claim("greedy", &key, t);
            r.answered("greedy", &key, Some(answer(&big)));
        }
        assert!(r.bytes() <= PER_CALLER, "{}", r.bytes());
        // Another caller's answer is not what the first one's make room with.
        let _ = r.claim("other", "mine", t);
        r.answered("other", "mine", Some(kept("ok")));
        for i in 1_000..1_100 {
            let key = format!("a{i}");
            let _ = r.claim("greedy", &key, t);
            r.answered("greedy", &key, Some(answer(&big)));
        }
        assert!(matches!(r.claim("other", "mine", t), Claim::Done(_)));
        // Many callers together: the whole budget.
        for c in 0..40 {
            for i in 0..80 {
                let (caller, key) = (format!("c{c}"), format!("c{c}-{i}"));
                let _ = r.claim(&caller, &key, t);
                r.answered(&caller, &key, Some(answer(&big)));
            }
        }
        assert!(r.bytes() <= BUDGET, "{}", r.bytes());
    }
}
