//! Submissions: a job's or a service's file read from the body, its idempotency key, and what it
//! would become (`preview`).

use super::*;

pub(super) async fn submit(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
    headers: axum::http::HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    require(&caller, Role::Researcher, "submitting")?;
    let key = idempotency_key(&caller, &headers)?;
    let mut submission =
        submission_of(&api, &caller, query(raw)?, &body_bytes(&api, body).await?).await?;
    submission.idempotency_key = key;
    // A job that names an experiment has its MLflow run before it is queued.
    let said = match &api.tracker {
        Some(t) => crate::daemon::experiments::prepare(t, &api.handle, &mut submission).await,
        None => None,
    };
    let id = api
        .handle
        .call(|reply| Request::Submit { submission, reply })
        .await?;
    if let Some(line) = said {
        api.handle.tell(Request::Experiment {
            job: Some(id),
            line,
        });
    }
    Ok(json(StatusCode::CREATED, &crate::api::Submitted { id }))
}

/// `gantry serve up`: the body is the service's file; `?name=`, `?endpoint=`, `?team=`,
/// `?priority=` and `?file=` as for a job.
pub(super) async fn service_up(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
    body: Body,
) -> Result<Response, ApiError> {
    require(&caller, Role::Researcher, "serving")?;
    let q = query(raw)?;
    let (name, endpoint) = (q.get("name").cloned(), q.get("endpoint").cloned());
    let auth = q.get("auth").is_some_and(|v| v == "true");
    let submission = submission_of(&api, &caller, q, &body_bytes(&api, body).await?).await?;
    let up = crate::daemon::state::ServiceUp {
        submission,
        name,
        endpoint,
        auth,
    };
    let answer = api
        .handle
        .call(|reply| Request::ServiceUp { up, caller, reply })
        .await?;
    Ok(json(StatusCode::CREATED, &answer))
}

/// `gantry serve down NAME`: the replicas' jobs it cancelled.
pub(super) async fn service_down(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Result<Response, ApiError> {
    require(&caller, Role::Researcher, "stopping a service")?;
    let cancelled = api
        .handle
        .call(|reply| Request::ServiceDown {
            name,
            caller,
            reply,
        })
        .await?;
    Ok(ok(&crate::api::ServiceDown { cancelled }))
}

/// Checks a job spec and says where it would land now, and what submitting it would do,
/// without submitting it.
pub(super) async fn preview(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    RawQuery(raw): RawQuery,
    body: Body,
) -> Result<Response, ApiError> {
    require(&caller, Role::Researcher, "previewing a submission")?;
    let submission =
        submission_of(&api, &caller, query(raw)?, &body_bytes(&api, body).await?).await?;
    let (p, work) = api
        .handle
        .call(|reply| Request::Preview { submission, reply })
        .await?;
    let p = tokio::task::spawn_blocking(move || work.attach(p, crate::daemon::eta::PREVIEW_BOX))
        .await
        .map_err(|e| ApiError::new(500, "internal", format!("the preview stopped: {e}")))?;
    Ok(ok(&p))
}

/// The request's `Idempotency-Key` (1 to 255 visible ASCII characters), scoped to the
/// caller so that two clients' keys never meet.
/// An `Idempotency-Key` gantry takes: 1 to 255 visible ASCII characters.
pub(in crate::daemon) fn valid_key(k: &str) -> bool {
    (1..=255).contains(&k.len()) && k.bytes().all(|b| b.is_ascii_graphic())
}

fn idempotency_key(
    caller: &Caller,
    headers: &axum::http::HeaderMap,
) -> Result<Option<String>, ApiError> {
    let Some(v) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match v.to_str() {
        Ok(k) if valid_key(k) => Ok(Some(format!("{}|{k}", caller.scope()))),
        _ => Err(ApiError::bad_request(
            "Idempotency-Key: expected 1 to 255 visible ASCII characters (a UUID, say)",
        )),
    }
}

/// Specs up to this size are parsed on the request's own task: handing a small one to a
/// blocking thread and back cost a submission more than its parse (about 50 µs). The slowest
/// 2 KiB measured, 200 `envs`, parses in 0.6 ms (release, the 2-core box), so a worker is
/// never held long; larger specs go to a blocking thread.
const PARSED_IN_PLACE: usize = 2 << 10;

/// A submission from a request's query (`team`, `priority`, `file`) and body; a researcher's
/// token binds it to the token's team. The spec is parsed here, within the spec budgets (on a
/// blocking thread of the runtime when large), so a hostile document costs its own request
/// and never the actor's time; one that does not parse is answered without reaching the actor.
async fn submission_of(
    api: &Api,
    caller: &Caller,
    q: std::collections::HashMap<String, String>,
    text: &[u8],
) -> Result<Submission, ApiError> {
    let file = q
        .get("file")
        .cloned()
        .unwrap_or_else(|| "request body".to_string());
    let parsed = if text.len() <= PARSED_IN_PLACE {
        crate::spec::parse(&file, text)
    } else {
        let (name, body) = (file.clone(), text.to_vec());
        tokio::task::spawn_blocking(move || crate::spec::parse(&name, &body))
            .await
            .map_err(|e| ApiError::new(500, "internal", format!("parsing the spec: {e}")))?
    }
    .map_err(|e| ApiError::from(crate::daemon::engine::EngineError::Spec(e)))?;
    paths_are_the_callers(api, caller, &file, &parsed)?;
    Ok(Submission {
        file,
        text: text.to_vec(),
        team: q.get("team").cloned(),
        priority: q.get("priority").cloned(),
        only_team: (caller.role == Role::Researcher)
            .then(|| caller.team.clone())
            .flatten(),
        parsed: Some(parsed),
        idempotency_key: None,
        user: caller.user.clone(),
        from_backend: false,
        sent_text: None,
        reported: false,
    })
}

/// The request body, at most `MAX_BODY` bytes, arriving within the request time limit (a
/// client that announces a body and sends it slowly, or never, is answered and dropped).
pub(super) async fn body_bytes(api: &Api, body: Body) -> Result<Bytes, ApiError> {
    let limit = api.limits.request_timeout;
    match tokio::time::timeout(limit, to_bytes(body, MAX_BODY)).await {
        Err(_) => Err(ApiError::new(
            408,
            "timeout",
            format!(
                "the request body did not arrive within {} s",
                limit.as_secs_f64()
            ),
        )),
        Ok(r) => r.map_err(|_| {
            ApiError::new(
                413,
                "too-large",
                format!("request body over {MAX_BODY} bytes (a job spec is a few KiB)"),
            )
        }),
    }
}

/// The daemon opens no path on a caller's behalf: a `workdir` or local `file_mounts` source
/// that names a path on the daemon's machine is refused at its field, unless the caller is the
/// daemon's own user (who could read it anyway). Anyone else's files reach the daemon as
/// bytes, packed by `gantry submit` as the user who runs it (`POST /v1/workdirs`), and a job
/// may name only its own caller's kept copies (`upload_tag`): knowing the path of another
/// team's upload reads nothing.
fn paths_are_the_callers(
    api: &Api,
    caller: &Caller,
    file: &str,
    spec: &crate::spec::JobSpec,
) -> Result<(), ApiError> {
    if caller.user.is_some() && caller.user == crate::daemon::auth::this_user() {
        return Ok(());
    }
    let kept = |path: &str| {
        let Some(dir) = &api.workdirs else {
            return false;
        };
        let Ok(rest) = std::path::Path::new(path).strip_prefix(&**dir) else {
            return false;
        };
        let mut parts = rest.components();
        let ours = parts.next().is_some_and(|c| {
            c.as_os_str()
                .to_str()
                .is_some_and(|n| n.ends_with(&format!("-{}", super::workdirs::upload_tag(caller))))
        });
        ours && parts.all(|c| matches!(c, std::path::Component::Normal(_)))
    };
    let refuse = |field: String, path: &str| {
        ApiError::bad_request(format!(
            "{file}: {field} `{}` names a path on the daemon's machine, which the daemon does not read for anyone but its own user: write it relative to where you submit (e.g. `workdir: .`), and `gantry submit` packs it as you and ships it",
            path.escape_debug()
        ))
    };
    if let Some(w) = spec.workdir.as_deref().filter(|w| !kept(w)) {
        return Err(refuse("workdir".to_string(), w));
    }
    for m in &spec.file_mounts {
        if let crate::spec::mounts::MountSource::Local(src) = &m.source {
            if !kept(src) {
                return Err(refuse(
                    format!("file_mounts entry `{}`: source", m.dest.escape_debug()),
                    src,
                ));
            }
        }
    }
    Ok(())
}
