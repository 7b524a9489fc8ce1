//! What a run takes to an SSH host besides its start: its job's workdir and the local sources
//! of its `file_mounts`, packed on the daemon's machine and unpacked on the host over the
//! host's SSH connection, under a directory of the run's own.

use super::super::{Launch, RunEvent};
use super::feed::{run_fed, Input};
use std::sync::{mpsc, Arc};
use tokio::sync::mpsc as amp;

/// Where a run's copy of its job's workdir goes on a host, relative to the home directory
/// (where the agent runs): per host name, since hosts often share a home directory (NFS) and
/// a gang's nodes each copy; per run token too, so a requeued run's fresh copy and the removal
/// of the previous run's never meet. The agent removes it when the run is forgotten.
pub fn remote_workdir(hostname: &str, job: i64, token: &str) -> String {
    format!(".gantry/work/{hostname}/job-{job}-{}", token_tag(token))
}

/// The start of a run token, as far as it is safe in a path.
fn token_tag(token: &str) -> String {
    token
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .take(12)
        .collect()
}

/// Copies a job's workdir (a directory on the daemon's machine) to the host as a gzip'd tar
/// over the host's SSH connection, then hands the start on with the copy as its workdir.
/// Packed as a shipped workdir is (`gantry::workdir::pack`): what `.gitignore` and
/// `.skyignore` leave out and `.git` stay behind, at most 256 MiB. A copy that fails fails the
/// start.
pub(super) async fn copy_workdir(
    s: Arc<openssh::Session>,
    host: usize,
    mut l: Launch,
    copied: amp::UnboundedSender<Launch>,
    events: mpsc::Sender<RunEvent>,
) {
    let failed = |l: Launch, why: String| {
        let _ = events.send(RunEvent::StartFailed {
            host,
            job: l.job,
            token: l.token,
            why,
        });
    };
    if let Some(local) = l.workdir.clone() {
        match send_dir(&s, &local, l.job, &l.token).await {
            Ok(there) => l.workdir = Some(there),
            Err(why) => return failed(l, format!("copying its workdir {local}: {why}")),
        }
    }
    if !l.local_mounts.is_empty() {
        match send_mounts(&s, &l.local_mounts, l.job, &l.token).await {
            Ok(root) => {
                l.envs.insert("GANTRY_MOUNTS_FROM".to_string(), root);
            }
            Err(why) => return failed(l, format!("copying its file_mounts: {why}")),
        }
    }
    let _ = copied.send(l);
}

/// Sends each local `file_mounts` source (a file or a directory on the daemon's machine) to
/// the host, under the run's directory at `.gantry-mounts` + its path; that root, absolute,
/// for `GANTRY_MOUNTS_FROM` (`backend::mounts`). Removed with the run's directory.
async fn send_mounts(
    s: &openssh::Session,
    sources: &[String],
    job: i64,
    token: &str,
) -> Result<String, String> {
    let quote = |s: &str| format!("'{}'", s.replace('\'', r"'\''"));
    let root = format!(
        "$HOME/.gantry/work/$(cat /proc/sys/kernel/hostname)/job-{job}-{}/.gantry-mounts",
        token_tag(token)
    );
    let mut at = String::new();
    for src in sources {
        let path = std::path::PathBuf::from(src);
        let (packed, into) = {
            let p = path.clone();
            let dir = path.is_dir();
            let packed = tokio::task::spawn_blocking(move || {
                if dir {
                    crate::workdir::pack(&p, crate::workdir::DEFAULT_MAX_BYTES)
                } else if p.exists() {
                    crate::workdir::pack_file(&p, crate::workdir::DEFAULT_MAX_BYTES)
                } else {
                    Err("no such file or directory on the daemon's machine".to_string())
                }
            })
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| format!("{src}: {e}"))?;
            let into = if dir {
                src.clone()
            } else {
                path.parent()
                    .map_or("/".to_string(), |p| p.display().to_string())
            };
            (packed, into)
        };
        let command = format!(
            "r=\"{root}\" && mkdir -p \"$r\"{} && tar -xzf - -C \"$r\"{} && echo \"$r\"",
            quote(&into),
            quote(&into)
        );
        at = run_fed(s, command, Input::Bytes(&packed), "tar on the host")
            .await
            .map_err(|e| format!("{src}: {e}"))?;
    }
    Ok(at)
}

/// Sends the directory; where it landed on the host.
async fn send_dir(
    s: &openssh::Session,
    local: &str,
    job: i64,
    token: &str,
) -> Result<String, String> {
    if !std::path::Path::new(local).is_dir() {
        return Err("no such directory on the daemon's machine".to_string());
    }
    let dir = std::path::PathBuf::from(local);
    let packed = tokio::task::spawn_blocking(move || {
        crate::workdir::pack(&dir, crate::workdir::DEFAULT_MAX_BYTES)
    })
    .await
    .map_err(|e| e.to_string())??;
    // The host's name as the agent reads it (`agent::hostname`).
    let command = format!(
        "d=.gantry/work/$(cat /proc/sys/kernel/hostname)/job-{job}-{} && rm -rf \"$d\" && mkdir -p \"$d\" && tar -xzf - -C \"$d\" && echo \"$d\"",
        token_tag(token)
    );
    run_fed(s, command, Input::Bytes(&packed), "tar on the host").await
}
