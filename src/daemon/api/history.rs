//! `GET /v1/history`: finished jobs from the journal with every run — as Slurm's `sacct` —
//! for an auditor or a researcher asking what ran, where, how it ended and what it cost.
//!
//! Query: `since`, `until` (dates or times in the fleet's time zone, RFC 3339, a duration
//! before now such as `7d`, or seconds on the daemon's clock; the job's last change must fall
//! in between), `team`, `state` (comma-separated: any states, the final ones by default),
//! `limit` (default 100, at most 10,000) and `offset` (paging), newest first.

use super::ApiError;
use super::{ok, query, Api};
use crate::api::JobState;
use crate::daemon::actor::Request;
use crate::daemon::journal::HistoryQuery;
use axum::extract::{RawQuery, State};
use axum::response::Response;

/// The most finished jobs one turn of the actor reads for a history page (with their runs).
const HISTORY_TURN: usize = 200;

pub(super) async fn history(
    State(api): State<Api>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    // `until` includes now: a job that ended this instant is listed.
    let (since, until) = super::window(&api, &q, 1.0)?;
    let states = match q.get("state") {
        None => Vec::new(),
        Some(list) => list
            .split(',')
            .map(|s| {
                s.trim().parse::<JobState>().map_err(|_| {
                    ApiError::bad_request(format!(
                        "state `{}`: expected pending, held, running, preempting, completed, failed or cancelled",
                        s.escape_debug()
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
    };
    let number = |name: &str, default: usize, max: usize| -> Result<usize, ApiError> {
        match q.get(name) {
            None => Ok(default),
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| *n <= max)
                .ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "{name} `{}`: expected a number from 0 to {max}",
                        v.escape_debug()
                    ))
                }),
        }
    };
    let query = HistoryQuery {
        since,
        until,
        team: q.get("team").cloned(),
        user: q.get("user").cloned(),
        states,
        limit: number("limit", 100, 10_000)?,
        offset: number("offset", 0, usize::MAX)?,
    };
    // Read in turns of `HISTORY_TURN` jobs: the actor never builds a large page in one go, so
    // a submission waits behind one turn at most, not behind a viewer's whole page.
    let mut jobs = Vec::new();
    let end = query.offset.saturating_add(query.limit);
    let mut at = query.offset;
    while at < end {
        let turn = HistoryQuery {
            offset: at,
            limit: HISTORY_TURN.min(end - at),
            ..query.clone()
        };
        let want = turn.limit;
        let got = api
            .handle
            .call(|reply| Request::History { query: turn, reply })
            .await?;
        let n = got.len();
        jobs.extend(got);
        if n < want {
            break;
        }
        at += n;
    }
    Ok(ok(&jobs))
}
