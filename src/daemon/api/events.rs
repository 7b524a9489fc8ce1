//! `GET /v1/events/stream`: a snapshot, then a delta per change, as server-sent events, until
//! the daemon stops or — for a stream let in by a token — the token is revoked or expires.

use super::Api;
use crate::api::Snapshot;
use crate::daemon::actor::Published;
use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Extension;
use std::convert::Infallible;
use std::sync::Arc;

/// The bearer token a TCP request was let in with.
#[derive(Clone)]
pub(super) struct Bearer(pub(super) String);

/// How often an open event stream checks that its token still stands.
const TOKEN_RECHECK: std::time::Duration = std::time::Duration::from_secs(1);

/// Server-sent events: `snapshot` (whole) first, then a `delta` per change.
pub(super) async fn stream(
    State(api): State<Api>,
    bearer: Option<Extension<Bearer>>,
) -> Sse<impl futures_util::Stream<Item = Result<Event, Infallible>>> {
    let rx = api.handle.published.clone();
    let token = bearer.map(|Extension(b)| b.0);
    let handle = api.handle.clone();
    // A stream let in by a token ends within a second of the token's revocation or expiry
    // (each ordinary request is checked as it comes; a stream lives on).
    let revoked = move || {
        let token = token.clone();
        let handle = handle.clone();
        async move {
            let Some(t) = token else {
                return std::future::pending().await;
            };
            let mut every = tokio::time::interval(TOKEN_RECHECK);
            loop {
                every.tick().await;
                if handle.caller_for(&t).is_err() {
                    return;
                }
            }
        }
    };
    type Watch<T> = tokio::sync::watch::Receiver<T>;
    let state: (Watch<Arc<Published>>, Watch<bool>, Option<Arc<Snapshot>>) =
        (rx, api.stop.clone(), None);
    let events = futures_util::stream::unfold(state, move |(mut rx, mut stop, last)| {
        let revoked = revoked();
        async move {
            if *stop.borrow() {
                return None;
            }
            let current = match &last {
                None => rx.borrow_and_update().snapshot.clone(),
                Some(_) => {
                    // The stream ends when the daemon stops, so shutdown never waits on a
                    // client; and when its token no longer stands.
                    tokio::select! {
                        changed = rx.changed() => changed.ok()?,
                        _ = stop.wait_for(|&s| s) => return None,
                        _ = revoked => return None,
                    }
                    rx.borrow_and_update().snapshot.clone()
                }
            };
            let event = match &last {
                None => Event::default()
                    .event("snapshot")
                    .data(serde_json::to_string(&*current).unwrap_or_default()),
                Some(prev) => Event::default()
                    .event("delta")
                    .data(serde_json::to_string(&prev.diff(&current)).unwrap_or_default()),
            };
            Some((Ok(event), (rx, stop, Some(current))))
        }
    });
    Sse::new(events).keep_alive(KeepAlive::default())
}
