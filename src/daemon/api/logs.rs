//! `GET /v1/jobs/{id}/logs`: a job's logs, per node. The actor only says where they are; the
//! reading (files here, or a remote host's agent, which may take a while or not answer) runs
//! on a blocking thread, so a slow host never holds up other clients.
//!
//! Query: `node=K` (one node's, by rank; default every node's), `tail=N` (the last N lines of
//! each stream, default 100), `after=OUT,ERR[;OUT,ERR…]` (follow: what was written since the
//! cursors the previous answer gave, one per node in its order; `from=start` for zero
//! cursors), `partial=true` (include a last line without its newline: the job has ended).

use super::ApiError;
use super::{job_id, ok, query, Api};
use crate::api::{LogsView, NodeLogsView};
use crate::backend::logs::{LogCursor, LogQuery, LogSource};
use crate::daemon::actor::{Handle, Request};
use crate::daemon::auth::Caller;
use crate::daemon::journal::JobId;
use crate::daemon::state::JobLogs;
use axum::extract::{Path, RawQuery, State};
use axum::response::Response;
use axum::Extension;
use std::time::Duration;

/// How long a read waits for a remote host.
const WAIT: Duration = Duration::from_secs(2);

pub(super) async fn logs(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let id = job_id(&id)?;
    let q = query(raw)?;
    let tail = match q.get("tail") {
        None => 100,
        Some(t) => t
            .parse::<usize>()
            .ok()
            .filter(|&n| n <= 100_000)
            .ok_or_else(|| {
                ApiError::bad_request(format!("tail `{}`: expected 0..=100000", t.escape_debug()))
            })?,
    };
    let partial = match q.get("partial").map(String::as_str) {
        None | Some("false" | "0") => false,
        Some("true" | "1") => true,
        Some(p) => {
            return Err(ApiError::bad_request(format!(
                "partial `{}`: expected true or false",
                p.escape_debug()
            )))
        }
    };
    let after = q.get("after").cloned();
    let from_start = q.get("from").is_some_and(|f| f == "start");
    let node = q.get("node").cloned();
    let found = api.handle.call(|reply| Request::Logs { id, reply }).await?;
    if !caller.may_change(&found.team) {
        return Err(ApiError::new(
            403,
            "forbidden",
            format!(
                "job {id}'s logs are team {}'s and the operators' (a job may print what only its team should see); ask for a researcher token of that team",
                found.team
            ),
        ));
    }
    let answer = tokio::task::spawn_blocking(move || {
        let want = Want {
            node: node.as_deref(),
            tail,
            after: after.as_deref(),
            from_start,
            partial,
        };
        answer(found, id, &want)
    })
    .await
    .map_err(|e| ApiError::new(500, "internal", format!("reading logs: {e}")))??;
    Ok(ok(&answer))
}

/// What a logs request asks, as its query gave it.
pub struct Want<'a> {
    pub node: Option<&'a str>,
    pub tail: usize,
    pub after: Option<&'a str>,
    pub from_start: bool,
    pub partial: bool,
}

/// Reads the logs `found` points at (blocking: a remote host may take up to `WAIT`).
pub fn answer(found: JobLogs, id: JobId, want: &Want) -> Result<LogsView, ApiError> {
    let mut sources = found.sources;
    if sources.is_empty() {
        let why = found
            .none
            .unwrap_or_else(|| format!("job {id} has no logs"));
        return Err(ApiError::new(404, "no-logs", why));
    }
    if let Some(k) = want.node {
        let ranks = sources.len();
        let k = k
            .parse::<usize>()
            .ok()
            .filter(|&k| k < ranks)
            .ok_or_else(|| {
                ApiError::bad_request(format!(
                    "node `{}`: job {id} ran on {ranks} node(s); expected a rank in 0..={}",
                    k.escape_debug(),
                    ranks - 1
                ))
            })?;
        sources = vec![sources.swap_remove(k)];
    }
    let after: Vec<Option<LogCursor>> = match want.after {
        None if want.from_start => vec![Some(LogCursor::default()); sources.len()],
        None => vec![None; sources.len()],
        Some(a) => {
            let cursors = a
                .split(';')
                .map(|c| LogCursor::parse(c).map(Some))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| ApiError::bad_request(format!("after: {e}")))?;
            if cursors.len() != sources.len() {
                return Err(ApiError::bad_request(format!(
                    "after: {} cursor(s) for {} node(s); send the cursors of the previous answer",
                    cursors.len(),
                    sources.len()
                )));
            }
            cursors
        }
    };
    let nodes = read_nodes(
        &sources,
        id,
        after,
        want.tail,
        want.partial,
        WAIT,
        &found.secrets,
    );
    Ok(LogsView {
        job: id,
        state: found.state,
        is_final: found.state.is_final(),
        nodes,
    })
}

/// The shortest secret value masked: shorter ones would mask ordinary text and hide nothing
/// worth hiding.
const MASKED_FROM: usize = 4;

/// `text` with every value of `secrets` written as `***` (as CI systems mask theirs).
pub fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.len() >= MASKED_FROM) {
        if out.contains(s.as_str()) {
            out = out.replace(s.as_str(), "***");
        }
    }
    out
}

/// Reads each source (from its cursor in `after`, or its tail), waiting at most `wait` for
/// each remote host; a node that cannot be read says why and keeps its cursor. The values of
/// `secrets` are masked in every line.
fn read_nodes(
    sources: &[LogSource],
    id: JobId,
    after: Vec<Option<LogCursor>>,
    tail: usize,
    partial: bool,
    wait: Duration,
    secrets: &[String],
) -> Vec<NodeLogsView> {
    sources
        .iter()
        .zip(after)
        .map(|(s, after)| {
            let q = LogQuery {
                tail,
                after,
                partial,
            };
            let (lines, cursor, error) = match s.read(id, &q, wait) {
                Ok(r) if r.lines.is_empty() && r.gone.is_some() => (
                    Vec::new(),
                    r.cursor,
                    r.gone
                        .map(|why| format!("its logs on this node were {why}")),
                ),
                Ok(mut r) => {
                    for l in &mut r.lines {
                        l.text = mask(&l.text, secrets);
                    }
                    (r.lines, r.cursor, None)
                }
                Err(why) => (Vec::new(), after.unwrap_or_default(), Some(why)),
            };
            NodeLogsView {
                rank: s.rank,
                node: s.node.clone(),
                lines,
                cursor: cursor.to_string(),
                error,
            }
        })
        .collect()
}

/// The last `n` lines of every node's logs for a job's detail, `[node K]`-marked for a
/// multi-node job; empty when it has none.
pub(super) async fn tail(handle: &Handle, id: JobId, n: usize) -> Vec<String> {
    let Ok(found) = handle.call(|reply| Request::Logs { id, reply }).await else {
        return Vec::new();
    };
    tokio::task::spawn_blocking(move || tail_lines(found, id, n))
        .await
        .unwrap_or_default()
}

/// `tail`'s reading (blocking: a remote host may take up to a second).
pub fn tail_lines(found: JobLogs, id: JobId, n: usize) -> Vec<String> {
    let sources = &found.sources;
    let gang = sources.len() > 1;
    let after = vec![None; sources.len()];
    let mut out = Vec::new();
    for node in read_nodes(
        sources,
        id,
        after,
        n,
        true,
        Duration::from_secs(1),
        &found.secrets,
    ) {
        let mark = |l: String| {
            if gang {
                format!("[node {}] {l}", node.rank)
            } else {
                l
            }
        };
        match &node.error {
            Some(why) => out.push(mark(format!("(logs unavailable: {why})"))),
            None => out.extend(node.lines.iter().map(|l| mark(l.to_string()))),
        }
    }
    out
}
