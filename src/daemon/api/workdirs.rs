//! `POST /v1/workdirs`: a job's workdir shipped by `gantry submit` to a daemon on another
//! machine, kept under the daemon's state directory (`gantry::workdir` packs, unpacks and
//! sweeps it).

use super::ApiError;
use super::{json, require, Api};
use crate::daemon::auth::{Caller, Role};
use crate::workdir::{Bound, Footprint, UnpackError};
use axum::body::Body;
use axum::extract::{Extension, State};
use axum::http::StatusCode;
use axum::response::Response;

/// A job's workdir, packed by `gantry submit` (a gzip'd tar): kept by the hash of what was
/// sent (the same directory sent twice is kept once), unpacked under the daemon's state
/// directory; the answer is its path there, for the job's `workdir`. The body may be large
/// but must keep arriving (the request time limit applies between its pieces).
pub(super) async fn upload_workdir(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<Response, ApiError> {
    use futures_util::StreamExt;
    use sha2::Digest;
    use tokio::io::AsyncWriteExt;
    require(&caller, Role::Researcher, "shipping a workdir")?;
    let Some(dir) = api.workdirs.clone() else {
        return Err(ApiError::new(
            404,
            "not-found",
            "this daemon keeps no shipped workdirs: give `workdir` as a directory of the daemon's machine",
        ));
    };
    let max = api.limits.max_workdir_bytes;
    let internal =
        |e: std::io::Error| ApiError::new(500, "internal", format!("keeping the workdir: {e}"));
    tokio::fs::create_dir_all(&dir).await.map_err(internal)?;
    let token = crate::daemon::auth::random_hex(8).map_err(internal)?;
    let part = dir.join(format!(".upload-{token}"));
    let result = async {
        let mut file = tokio::fs::File::create(&part).await.map_err(internal)?;
        let mut hash = sha2::Sha256::new();
        let mut size = 0u64;
        let mut stream = body.into_data_stream();
        loop {
            let next = tokio::time::timeout(api.limits.request_timeout, stream.next()).await;
            let chunk = match next {
                Err(_) => {
                    return Err(ApiError::new(
                        408,
                        "timeout",
                        "the workdir stopped arriving",
                    ))
                }
                Ok(None) => break,
                Ok(Some(Err(e))) => {
                    return Err(ApiError::bad_request(format!("reading the workdir: {e}")))
                }
                Ok(Some(Ok(c))) => c,
            };
            size += chunk.len() as u64;
            if size > max {
                return Err(ApiError::new(
                    413,
                    "too-large",
                    format!(
                        "the workdir is over {} MiB packed, this daemon's limit: leave data out of it (.gitignore or .skyignore) and fetch it in `setup`",
                        max >> 20
                    ),
                ));
            }
            hash.update(&chunk);
            file.write_all(&chunk).await.map_err(internal)?;
        }
        file.flush().await.map_err(internal)?;
        // Kept per caller: a job may name only its own caller's copies (`upload_tag`).
        let digest = crate::random::hex(&hash.finalize());
        let kept = dir.join(format!("{digest}-{}", upload_tag(&caller)));
        if kept.is_dir() {
            crate::workdir::touch(&kept);
        } else {
            // The caller's team (operators share one bound) holds no more than its share.
            let team = caller.team.clone().unwrap_or_else(|| "(operators)".into());
            let bound = Footprint {
                bytes: api.limits.max_team_workdir_bytes,
                files: api.limits.max_team_workdir_files,
            };
            let (d, t) = (dir.clone(), team.clone());
            let held = tokio::task::spawn_blocking(move || crate::workdir::charged(&d, &t))
                .await
                .unwrap_or_default();
            let team_full = |held: Footprint| {
                ApiError::new(
                    413,
                    "too-large",
                    format!(
                        "team {team}'s shipped workdirs would take more than its limit on this daemon ({} MiB on disk and {} files; {} MiB and {} files held): each goes an hour after the last job using it ends (or send smaller ones: .gitignore / .skyignore)",
                        bound.bytes >> 20,
                        bound.files,
                        held.bytes >> 20,
                        held.files
                    ),
                )
            };
            if held.bytes >= bound.bytes || held.files >= bound.files {
                return Err(team_full(held));
            }
            let staging = dir.join(format!(".unpack-{token}"));
            let archive = part.clone();
            let into = staging.clone();
            // Unpacked within what the team has left (and the per-workdir bounds).
            let team_left = Footprint {
                bytes: bound.bytes - held.bytes,
                files: bound.files - held.files,
            };
            let room = Footprint {
                bytes: max.saturating_mul(8).min(team_left.bytes),
                files: api.limits.max_workdir_files.min(team_left.files),
            };
            let unpacked = tokio::task::spawn_blocking(move || {
                crate::workdir::unpack(&archive, &into, room)
            })
            .await
            .map_err(|e| ApiError::new(500, "internal", e.to_string()))?;
            let took = match unpacked {
                Ok(b) => b,
                Err(why) => {
                    let _ = tokio::fs::remove_dir_all(&staging).await;
                    let team_bound = match why {
                        UnpackError::OverBudget(Bound::Bytes, _) => room.bytes == team_left.bytes,
                        UnpackError::OverBudget(Bound::Files, _) => room.files == team_left.files,
                        UnpackError::Bad(_) => false,
                    };
                    if team_bound {
                        return Err(team_full(held));
                    }
                    return Err(ApiError::bad_request(format!("the workdir: {why}")));
                }
            };
            // Another upload of the same content may have won the race: either is it.
            if tokio::fs::rename(&staging, &kept).await.is_err() {
                let _ = tokio::fs::remove_dir_all(&staging).await;
            } else {
                crate::workdir::charge(&kept, &team, took).map_err(internal)?;
            }
        }
        Ok((kept, size))
    }
    .await;
    let _ = tokio::fs::remove_file(&part).await;
    let (kept, size) = result?;
    Ok(json(
        StatusCode::CREATED,
        &crate::api::KeptWorkdir {
            path: kept.display().to_string(),
            bytes: size,
        },
    ))
}

/// What marks a kept workdir as one caller's (the end of its name): a digest of the caller's
/// key (its token's id, or the socket's user). Not a secret: a submission is checked against
/// its own caller's tag, so naming another's copy is refused whatever one knows of it.
pub(super) fn upload_tag(caller: &Caller) -> String {
    use sha2::Digest;
    let d = sha2::Sha256::digest(caller.key.as_bytes());
    crate::random::hex(&d[..8])
}
