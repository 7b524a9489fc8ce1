//! The HTTP/JSON API (axum). Served on a Unix socket (mode 0600) where every caller is the
//! daemon's own user, an operator; and, only when asked, on TCP where every request needs a
//! bearer token. Reads come from the last published snapshot without queueing behind the
//! actor; changes go through it. Every error is JSON: `{"code": …, "error": …}` with a 4xx/5xx
//! status that says whose fault it was.

use super::actor::{Handle, Published, Request};
use super::auth::{Caller, Role};
use super::engine::Submission;
use super::journal::JobId;
use super::refusal::{Kind, Refusal};
use super::state::Action;
use crate::api::ReportBy;
use axum::body::{to_bytes, Body, Bytes};
use axum::extract::{Path, RawQuery, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Extension, Router};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::Arc;

pub use crate::api::MAX_BODY;

mod events;
mod exec;
mod history;
pub mod logs;
pub mod metrics;
mod replay;
mod submit;
mod tokens;
mod workdirs;
pub(super) use submit::valid_key;
use submit::{body_bytes, preview, service_down, service_up, submit};
use tokens::{revoke, token, tokens};

#[derive(Clone)]
pub(super) struct Api {
    pub(super) handle: Handle,
    /// Served on TCP: every request needs a token.
    tcp: bool,
    /// The TCP listener's TLS certificate, for `gantry token create` to print.
    tls_fingerprint: Option<String>,
    /// Turns true when the daemon stops: event streams end then.
    pub(super) stop: tokio::sync::watch::Receiver<bool>,
    pub(super) limits: super::server::Limits,
    /// Where shipped workdirs are kept; `None`: refused.
    pub(super) workdirs: Option<Arc<std::path::Path>>,
    /// Reports jobs that name an experiment to the fleet's MLflow (`None` on the metrics
    /// listener, which takes no submissions).
    pub(super) tracker: Option<super::experiments::Tracker>,
}

/// A refusal as the API answers it: its HTTP status (from its kind; statuses are the API's
/// alone), a stable code, the message, and the field of the file it is about.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: &'static str,
    pub error: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: u16, code: &'static str, error: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            error: error.into(),
            field: None,
        }
    }
    pub fn forbidden(error: impl Into<String>) -> ApiError {
        ApiError::new(403, "forbidden", error)
    }
    pub fn bad_request(error: impl Into<String>) -> ApiError {
        ApiError::new(400, "invalid", error)
    }
}

/// The HTTP status a refusal of this kind is answered with.
pub fn status_of(kind: Kind) -> u16 {
    match kind {
        Kind::Invalid => 400,
        Kind::Forbidden => 403,
        Kind::NotFound => 404,
        Kind::Conflict => 409,
        Kind::Unprocessable => 422,
        Kind::TooMany => 429,
        Kind::Internal => 500,
        Kind::Unavailable => 503,
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> ApiError {
        ApiError {
            status: status_of(r.kind),
            code: r.code,
            error: r.error,
            field: r.field,
        }
    }
}

impl From<super::engine::EngineError> for ApiError {
    fn from(e: super::engine::EngineError) -> ApiError {
        Refusal::from(e).into()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        json(
            status,
            &crate::api::Refused {
                code: self.code.to_string(),
                error: self.error,
                field: self.field,
            },
        )
    }
}

pub(super) fn json<T: Serialize>(status: StatusCode, value: &T) -> Response {
    match serde_json::to_vec(value) {
        Ok(body) => (status, [(header::CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

pub(super) fn ok<T: Serialize>(value: &T) -> Response {
    json(StatusCode::OK, value)
}

/// The router; `tcp` makes every route require a bearer token; event streams end when `stop`
/// turns true. `tls_fingerprint`: the TCP listener's certificate, when it serves TLS.
pub fn router(
    handle: Handle,
    tcp: bool,
    tls_fingerprint: Option<String>,
    stop: tokio::sync::watch::Receiver<bool>,
    limits: super::server::Limits,
    workdirs: Option<Arc<std::path::Path>>,
    tracker: super::experiments::Tracker,
) -> Router {
    let api = Api {
        handle,
        tcp,
        tls_fingerprint,
        stop,
        limits,
        workdirs,
        tracker: Some(tracker),
    };
    Router::new()
        .route("/v1/health", get(health))
        .route("/v1/whoami", get(whoami))
        .route("/v1/snapshot", get(snapshot))
        .route("/v1/jobs", get(jobs).post(submit))
        .route("/v1/preview", post(preview))
        .route("/v1/workdirs", post(workdirs::upload_workdir))
        .route("/v1/jobs/{id}", get(job))
        .route("/v1/jobs/{id}/explain", get(explain))
        .route("/v1/jobs/{id}/logs", get(logs::logs))
        .route("/v1/jobs/{id}/exec", post(exec::exec))
        .route("/v1/jobs/{id}/priority", put(priority))
        .route("/v1/jobs/{id}/{action}", post(act))
        .route("/v1/preview/{action}", post(what_if_many))
        .route("/v1/services", get(services).post(service_up))
        .route("/v1/services/{name}", get(service).delete(service_down))
        .route("/v1/fleet", get(fleet))
        .route("/v1/pools/{index}", get(pool))
        .route("/v1/nodes/{name}", get(node))
        .route("/v1/teams", get(teams))
        .route("/v1/events", get(events))
        .route("/v1/report", get(report))
        .route("/v1/history", get(history::history))
        .route("/v1/events/stream", get(events::stream))
        .route("/v1/reclaim", get(reclaim_plan).post(reclaim_apply))
        .route("/v1/tokens", post(token).get(tokens))
        .route("/v1/clouds", get(tokens::clouds))
        .route("/v1/tokens/{id}", axum::routing::delete(revoke))
        .route("/metrics", get(metrics))
        .fallback(|| async {
            ApiError::new(
                404,
                "not-found",
                "no such endpoint; see the README's API table (GET /v1/health, /v1/jobs, …)",
            )
        })
        // Inside authentication: a kept answer is the caller's own.
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(replay::Replays::default()),
            replay::remember,
        ))
        .layer(axum::middleware::from_fn_with_state(
            api.clone(),
            authenticate,
        ))
        .with_state(api)
}

/// `GET /metrics` alone, without a token (as exporters serve it), for `--metrics-listen`.
pub fn metrics_router(
    handle: Handle,
    stop: tokio::sync::watch::Receiver<bool>,
    limits: super::server::Limits,
) -> Router {
    let api = Api {
        handle,
        tcp: true,
        tls_fingerprint: None,
        stop,
        limits,
        workdirs: None,
        tracker: None,
    };
    Router::new()
        .route("/metrics", get(metrics))
        .fallback(|| async {
            ApiError::new(
                404,
                "not-found",
                "this listener serves GET /metrics only; the API is on the daemon's socket (and --listen)",
            )
        })
        .with_state(api)
}

/// Names the caller: the Unix socket's user is an operator; TCP needs `Authorization: Bearer`.
async fn authenticate(
    State(api): State<Api>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let caller = if api.tcp {
        let token = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim);
        match token {
            None => {
                return ApiError::new(
                    401,
                    "unauthenticated",
                    "this listener needs `Authorization: Bearer TOKEN`; create one with `gantry token create --role viewer|researcher|operator`",
                )
                .into_response()
            }
            Some(t) => match api.handle.caller_for(t) {
                Ok(c) => {
                    // The connection showed a good token: off probation.
                    if let Some(p) = req.extensions().get::<super::probation::Proof>() {
                        p.prove();
                    }
                    // A long-lived answer (the event stream) checks it again as it goes.
                    let bearer = events::Bearer(t.to_string());
                    req.extensions_mut().insert(bearer);
                    c
                }
                Err(why) => return ApiError::new(401, "unauthenticated", why).into_response(),
            },
        }
    } else {
        // On the Unix socket: who is at the other end, by the kernel's word (SO_PEERCRED).
        // Root and the daemon's own user are operators; anyone else (a socket opened to a
        // group) acts as themselves: a researcher of the team the fleet file gives them, or a
        // viewer.
        let peer = req.extensions().get::<super::server::SocketUser>().cloned();
        // SAFETY: geteuid has no preconditions.
        let own = |uid: u32| uid == 0 || uid == unsafe { libc::geteuid() };
        match peer {
            Some(super::server::SocketUser(uid, name)) if !own(uid) => {
                let team = api
                    .handle
                    .members
                    .read()
                    .ok()
                    .and_then(|m| m.get(&name).cloned());
                Caller {
                    role: if team.is_some() {
                        Role::Researcher
                    } else {
                        Role::Viewer
                    },
                    team,
                    name: format!("{name} (unix socket)"),
                    key: format!("socket {name}"),
                    user: Some(name),
                }
            }
            peer => {
                let user = peer.map(|p| p.1);
                Caller {
                    key: format!("socket {}", user.as_deref().unwrap_or("")),
                    user,
                    ..Caller::local_operator()
                }
            }
        }
    };
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// The published state with every change acknowledged so far (read your writes).
async fn published(api: &Api) -> Arc<Published> {
    api.handle.fresh().await
}

pub(super) fn query(raw: Option<String>) -> Result<HashMap<String, String>, ApiError> {
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(raw.as_deref().unwrap_or(""))
        .map_err(|e| ApiError::bad_request(format!("query string: {e}")))?;
    Ok(pairs.into_iter().collect())
}

pub(super) fn job_id(text: &str) -> Result<JobId, ApiError> {
    super::journal::parse_job_id(text).map_err(ApiError::bad_request)
}

pub(super) fn require(caller: &Caller, role: Role, what: &str) -> Result<(), ApiError> {
    if caller.role >= role {
        Ok(())
    } else {
        Err(ApiError::forbidden(format!(
            "{what} needs the {role} role; this caller is a {}",
            caller.role
        )))
    }
}

async fn health(State(api): State<Api>) -> Response {
    let p = published(&api).await;
    ok(&crate::api::Health {
        ok: true,
        version: env!("CARGO_PKG_VERSION").to_string(),
        simulated: p.snapshot.simulated,
        now: p.snapshot.now,
        snapshot_version: p.snapshot.version,
    })
}

async fn whoami(Extension(caller): Extension<Caller>) -> Response {
    ok(&caller.whoami())
}

async fn snapshot(State(api): State<Api>) -> Response {
    ok(&*published(&api).await.snapshot)
}

async fn jobs(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    for key in q.keys() {
        if !["state", "team", "class", "user", "limit"].contains(&key.as_str()) {
            return Err(ApiError::bad_request(format!(
                "unknown filter `{}`; filters: state, team, class, user, limit",
                key.escape_debug()
            )));
        }
    }
    let limit = match q.get("limit") {
        None => usize::MAX,
        Some(l) => l.parse().map_err(|_| {
            ApiError::bad_request(format!("limit `{}`: expected a count", l.escape_debug()))
        })?,
    };
    // A state no job can be in matches nothing: said, not answered with an empty list.
    if let Some(states) = q.get("state") {
        let names = crate::api::JobState::ALL.map(crate::api::JobState::name);
        if let Some(bad) = states.split(',').find(|s| !names.contains(s)) {
            let hint = crate::spec::did_you_mean(bad, &names)
                .map_or(String::new(), |m| format!("; did you mean `{m}`?"));
            return Err(ApiError::bad_request(format!(
                "state `{}` is not a job state{hint} (states: {})",
                bad.escape_debug(),
                names.join(", ")
            )));
        }
    }
    let p = published(&api).await;
    // Someone nobody knows is a mistake, said to operators (not an empty list): not a user of
    // this host, and no job of the daemon's is theirs. Only to operators: to anyone else the
    // answer would say which accounts the daemon's host has.
    if let Some(u) = q.get("user").filter(|_| caller.role == Role::Operator) {
        let known = p.snapshot.jobs.iter().any(|j| j.user.as_ref() == Some(u))
            || crate::daemon::auth::user_exists(u);
        if !known {
            return Err(ApiError::bad_request(format!(
                "user `{}` is unknown here: not a user of the daemon's host, and no job of this daemon's was submitted by it",
                u.escape_debug()
            )));
        }
    }
    let filter = crate::api::JobFilter {
        state: q.get("state").cloned(),
        team: q.get("team").cloned(),
        class: q.get("class").cloned(),
        user: q.get("user").cloned(),
    };
    let rows: Vec<_> = p
        .snapshot
        .jobs
        .iter()
        .filter(|j| filter.matches(j))
        .take(limit)
        .collect();
    Ok(ok(&rows))
}

/// Every service, as the snapshot has them.
async fn services(State(api): State<Api>) -> Response {
    ok(&published(&api).await.snapshot.services)
}

async fn service(State(api): State<Api>, Path(name): Path<String>) -> Result<Response, ApiError> {
    let p = published(&api).await;
    match p.snapshot.services.iter().find(|s| s.name == name) {
        Some(s) => Ok(ok(s)),
        None => Err(ApiError::new(
            404,
            "not-found",
            format!("no service named {name} (gantry services lists them)"),
        )),
    }
}

/// One pool node by node and GPU by GPU; `index` is the pool's place in `GET /v1/fleet`.
async fn pool(State(api): State<Api>, Path(index): Path<String>) -> Result<Response, ApiError> {
    let index: usize = index.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "pool `{}`: give its index in GET /v1/fleet's list (0, 1, …)",
            index.escape_debug()
        ))
    })?;
    let detail = api
        .handle
        .call(|reply| Request::Pool { index, reply })
        .await?;
    Ok(ok(&detail))
}

/// One node GPU by GPU over `?range=5m|1h|24h` (1h by default).
async fn node(
    State(api): State<Api>,
    Path(name): Path<String>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let range = match q.get("range") {
        None => super::state::history::Range::Hour,
        Some(r) => super::state::history::Range::parse(r).map_err(ApiError::bad_request)?,
    };
    let detail = api
        .handle
        .call(|reply| Request::Node { name, range, reply })
        .await?;
    Ok(ok(&detail))
}

/// One job. Its spec's `envs` values are shown to its own team and to operators only (the
/// state hides `secrets` values from everyone).
async fn job(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    let id = job_id(&id)?;
    let mut detail = api.handle.call(|reply| Request::Job { id, reply }).await?;
    if !caller.may_change(&detail.team) {
        detail.spec = crate::spec::redact::redact(&detail.spec, false);
    } else {
        // Logs are the team's and the operators' (`GET /v1/jobs/{id}/logs` says why).
        detail.log_tail = logs::tail(&api.handle, id, 20).await;
    }
    Ok(ok(&detail))
}

/// Why a job is where it is (`gantry explain`).
async fn explain(State(api): State<Api>, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id = job_id(&id)?;
    let d = api.handle.call(|reply| Request::Job { id, reply }).await?;
    Ok(ok(&d.explain()))
}

/// The action a path names (404 with the actions there are if none).
fn action_named(action: &str) -> Result<Action, ApiError> {
    Action::parse(action).ok_or_else(|| {
        ApiError::new(
            404,
            "not-found",
            format!(
                "unknown action `{}`; actions: cancel, hold, release, preempt",
                action.escape_debug()
            ),
        )
    })
}

async fn act(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path((id, action)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
) -> Result<Response, ApiError> {
    let dry_run = dry_run(raw)?;
    let id = job_id(&id)?;
    let action = action_named(&action)?;
    require(&caller, Role::Researcher, action.name())?;
    if dry_run {
        let work = api
            .handle
            .call(|reply| Request::WhatIf {
                ids: vec![id],
                action,
                class: None,
                caller,
                reply,
            })
            .await?;
        return what_if(work).await;
    }
    api.handle
        .call(|reply| Request::Act {
            id,
            action,
            caller,
            reply,
        })
        .await?;
    Ok(ok(&crate::api::Acted {
        id,
        done: action.name().to_string(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JobsBody {
    jobs: Vec<JobId>,
}

/// At most this many jobs in one preview (each is a change run forward together).
const MAX_PREVIEWED: usize = 1_000;

/// What one action on several jobs together would do (`gantry cancel 3 4 5 --dry-run`, the
/// console's marked jobs): body `{"jobs": [3, 4, 5]}`, the roles of the action.
async fn what_if_many(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(action): Path<String>,
    body: Body,
) -> Result<Response, ApiError> {
    let action = action_named(&action)?;
    require(&caller, Role::Researcher, action.name())?;
    let b: JobsBody = decode(&body_bytes(&api, body).await?)?;
    let mut ids = b.jobs;
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() || ids.len() > MAX_PREVIEWED {
        return Err(ApiError::bad_request(format!(
            "`jobs`: name 1 to {MAX_PREVIEWED} job ids"
        )));
    }
    let work = api
        .handle
        .call(|reply| Request::WhatIf {
            ids,
            action,
            class: None,
            caller,
            reply,
        })
        .await?;
    what_if(work).await
}

/// `?dry_run=true`: preview, do not act (any other query is refused).
fn dry_run(raw: Option<String>) -> Result<bool, ApiError> {
    let q = query(raw)?;
    for k in q.keys() {
        if k != "dry_run" {
            return Err(ApiError::bad_request(format!(
                "unknown query parameter `{}`; allowed: dry_run",
                k.escape_debug()
            )));
        }
    }
    match q.get("dry_run").map(String::as_str) {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(v) => Err(ApiError::bad_request(format!(
            "dry_run `{}`: expected true or false",
            v.escape_debug()
        ))),
    }
}

/// Runs a preview off the actor (the cycle run forward twice, time-boxed).
async fn what_if(work: crate::daemon::state::WhatIfWork) -> Result<Response, ApiError> {
    let done = tokio::task::spawn_blocking(move || work.run(crate::daemon::eta::PREVIEW_BOX))
        .await
        .map_err(|e| ApiError::new(500, "internal", format!("the preview stopped: {e}")))?;
    match done {
        Ok(w) => Ok(ok(&w)),
        Err(why) => Err(ApiError::new(409, "conflict", why)),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PriorityBody {
    class: String,
}

/// Decodes a JSON body into `T`, with the position of what was wrong.
pub fn decode<T: for<'de> Deserialize<'de>>(body: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!(
            "request body (JSON) line {} column {}: {e}",
            e.line(),
            e.column()
        ))
    })
}

async fn priority(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    body: Body,
) -> Result<Response, ApiError> {
    let dry_run = dry_run(raw)?;
    let id = job_id(&id)?;
    require(&caller, Role::Researcher, "reprioritizing")?;
    let b: PriorityBody = decode(&body_bytes(&api, body).await?)?;
    let class = b.class;
    if dry_run {
        let work = api
            .handle
            .call(|reply| Request::WhatIf {
                ids: vec![id],
                action: Action::Hold,
                class: Some(class),
                caller,
                reply,
            })
            .await?;
        return what_if(work).await;
    }
    api.handle
        .call(|reply| Request::Priority {
            id,
            class: class.clone(),
            caller,
            reply,
        })
        .await?;
    Ok(ok(&crate::api::Reprioritized { id, class }))
}

async fn fleet(State(api): State<Api>) -> Response {
    ok(&crate::api::FleetView::of(&published(&api).await.snapshot))
}

async fn teams(State(api): State<Api>) -> Response {
    ok(&published(&api).await.snapshot.teams)
}

async fn events(State(api): State<Api>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let job = q.get("job").map(|j| job_id(j)).transpose()?;
    let limit = match q.get("limit") {
        None => 100,
        Some(l) => l
            .parse::<usize>()
            .ok()
            .filter(|&n| (1..=10_000).contains(&n))
            .ok_or_else(|| {
                ApiError::bad_request(format!("limit `{}`: expected 1..=10000", l.escape_debug()))
            })?,
    };
    let list = api
        .handle
        .call(|reply| Request::Events { job, limit, reply })
        .await?;
    Ok(ok(&list))
}

/// A query's `since` and `until` on the daemon's clock: dates or times in the fleet's time
/// zone, RFC 3339, a duration before now (`24h`, `7d`) or seconds on the daemon's clock; by
/// default the beginning and now (plus `past_now`, so that what happened this instant is in).
pub(super) fn window(
    api: &Api,
    q: &HashMap<String, String>,
    past_now: f64,
) -> Result<(f64, f64), ApiError> {
    let calendar = api.handle.published.borrow().calendar.clone();
    let now = api.handle.published.borrow().snapshot.now;
    let at = |name: &str, default: f64| -> Result<f64, ApiError> {
        match q.get(name) {
            None => Ok(default),
            Some(v) => calendar
                .parse(v, now)
                .map(|t| t.max(0.0))
                .map_err(|e| ApiError::bad_request(format!("{name} {e}"))),
        }
    };
    let (since, until) = (at("since", 0.0)?, at("until", now + past_now)?);
    if until < since {
        return Err(ApiError::bad_request(format!(
            "until ({until:.0}) is before since ({since:.0})"
        )));
    }
    Ok((since, until))
}

/// The bill for a window: `since` and `until` are dates or times in the fleet's time zone,
/// RFC 3339, a duration before now (`24h`, `7d`) or seconds on the daemon's clock; `by` is
/// team (default), project or job.
async fn report(State(api): State<Api>, RawQuery(raw): RawQuery) -> Result<Response, ApiError> {
    let q = query(raw)?;
    let (since, until) = window(&api, &q, 0.0)?;
    let by = match q.get("by") {
        None => ReportBy::Team,
        Some(b) => ReportBy::parse(b).ok_or_else(|| {
            ApiError::bad_request(format!(
                "by `{}`: expected team, project, job or user",
                b.escape_debug()
            ))
        })?,
    };
    let report = api
        .handle
        .call(|reply| Request::Report {
            since,
            until,
            by,
            reply,
        })
        .await?;
    Ok(ok(&report))
}

/// The idle-GPU plan, with its id (anyone may read it).
async fn reclaim_plan(state: State<Api>, caller: Extension<Caller>) -> Result<Response, ApiError> {
    reclaim(state, caller, None).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ApplyBody {
    /// The id of the plan `GET /v1/reclaim` showed: exactly it is applied.
    plan: String,
}

/// Applies a plan shown before, by its id (operators only).
async fn reclaim_apply(
    state: State<Api>,
    caller: Extension<Caller>,
    body: Body,
) -> Result<Response, ApiError> {
    require(&caller, Role::Operator, "applying a reclaim")?;
    let bytes = body_bytes(&state, body).await?;
    let b: ApplyBody = decode(&bytes).map_err(|e| {
        ApiError::bad_request(format!(
            "{}; send {{\"plan\": ID}} with the id GET /v1/reclaim showed, so that what is applied is what was reviewed",
            e.error
        ))
    })?;
    reclaim(state, caller, Some(b.plan)).await
}

async fn reclaim(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    apply: Option<String>,
) -> Result<Response, ApiError> {
    let plan = api
        .handle
        .call(|reply| Request::Reclaim {
            apply,
            caller,
            reply,
        })
        .await?;
    Ok(ok(&plan))
}

async fn metrics(State(api): State<Api>) -> Response {
    let text = metrics::render_metrics(&*published(&api).await);
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        text,
    )
        .into_response()
}
