//! What a run of someone else's job takes into their reach: a root agent runs another user's
//! job as that user, who cannot read the agent's copies of the job's workdir and local
//! `file_mounts` sources (kept in the daemon's private state directory, or in the agent's own
//! home on an SSH host). So the agent packs its own copy and the owner unpacks it — a `tar`
//! running as the owner, fed on its standard input — under the owner's home, where an SSH
//! host's agent puts a shipped workdir. Nothing is written with root's rights into a place the
//! owner controls, and nothing the owner named is read with them.

use crate::unix_user::Account;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The run's directory under the owner's home (as `ssh::remote_workdir`, per host and run).
pub fn run_dir(owner: &Account, job: i64, token: &str) -> PathBuf {
    owner.home.join(crate::backend::ssh::remote_workdir(
        &crate::backend::agent::hostname(),
        job,
        token,
    ))
}

/// Where the copies gantry keeps for runs are on this host: the daemon's shipped workdirs
/// (`workdirs/` beside the agent's own directories) and what the SSH backend copied here
/// (`~/.gantry/work`). Only those are read with the agent's rights for an owner.
pub fn kept_roots(logs: &Path) -> Vec<PathBuf> {
    let mut roots = Vec::new();
    if let Some(base) = logs.parent() {
        roots.push(base.join("workdirs"));
    }
    if let Some(home) = std::env::var_os("HOME") {
        roots.push(PathBuf::from(home).join(".gantry/work"));
    }
    roots
}

/// Copies the directory or file `src` (this agent's own copy, under one of `kept`) into the
/// directory `dest`, owned by `owner` (`fresh`: `dest` emptied first; a file lands inside it by
/// its own name). Fails, saying why, when the copy cannot be made — or when `src` is not a
/// copy gantry keeps: a path a job names (one journaled before callers' paths were refused)
/// is never read with root's rights.
pub fn copy_as(
    owner: &Account,
    src: &Path,
    dest: &Path,
    fresh: bool,
    kept: &[PathBuf],
) -> Result<(), String> {
    let real = src
        .canonicalize()
        .map_err(|e| format!("{}: {e}", src.display()))?;
    let ours = kept
        .iter()
        .filter_map(|k| k.canonicalize().ok())
        .any(|k| real.starts_with(&k));
    if !ours {
        return Err(format!(
            "{} is not a copy gantry keeps, and an agent running as root reads nothing else for a job's owner (submit it again with `gantry submit`, which ships it)",
            src.display()
        ));
    }
    let max = crate::workdir::DEFAULT_MAX_BYTES;
    let packed = if src.is_dir() {
        crate::workdir::pack(src, max)
    } else if src.exists() {
        crate::workdir::pack_file(src, max)
    } else {
        Err("not on this host".to_string())
    }
    .map_err(|e| format!("{}: {e}", src.display()))?;
    let mut cmd = Command::new("/bin/sh");
    cmd.args([
        "-c",
        r#"{ [ "$2" = keep ] || rm -rf -- "$1"; } && mkdir -p -- "$1" && tar -xzf - -C "$1""#,
        "gantry-stage",
    ])
    .arg(dest)
    .arg(if fresh { "fresh" } else { "keep" })
    .env_clear()
    .envs(owner.login_env())
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    owner.creds.apply(&mut cmd, Some(&owner.home));
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start tar as {}: {e}", owner.name))?;
    let fed = child
        .stdin
        .take()
        .map(|mut i| i.write_all(&packed))
        .unwrap_or(Ok(()));
    let out = child
        .wait_with_output()
        .map_err(|e| format!("tar as {}: {e}", owner.name))?;
    if !out.status.success() || fed.is_err() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "tar as {} into {}: {}",
            owner.name,
            dest.display(),
            crate::untrusted::bounded(err.trim(), 200)
        ));
    }
    Ok(())
}

/// Removes a run's directory as its owner (its contents are theirs).
pub fn remove_as(owner: &Account, dir: &Path) {
    let mut cmd = Command::new("rm");
    cmd.arg("-rf")
        .arg("--")
        .arg(dir)
        .env_clear()
        .envs(owner.login_env())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    owner.creds.apply(&mut cmd, None);
    let _ = cmd.status();
}

/// The launch with its workdir and local mount sources copied to the owner (`copy_as`):
/// the workdir to the run's directory, the sources under its `.gantry-mounts` at their own
/// paths (what `$GANTRY_MOUNTS_FROM` names to the mounts' prelude). Returns the run's
/// directory, for removal when the run is forgotten. A launch staged already (its workdir and
/// mounts in the run's directory) is left as it is.
pub fn stage(
    owner: &Account,
    l: &mut crate::backend::Launch,
    kept: &[PathBuf],
) -> Result<Option<PathBuf>, String> {
    if l.workdir.is_none() && l.local_mounts.is_empty() {
        return Ok(None);
    }
    let dir = run_dir(owner, l.job, &l.token);
    let root = dir.join(".gantry-mounts");
    let staged_workdir = l.workdir.as_deref().is_none_or(|w| Path::new(w) == dir);
    let staged_mounts = l.local_mounts.is_empty()
        || l.envs.get("GANTRY_MOUNTS_FROM").map(PathBuf::from) == Some(root.clone());
    if staged_workdir && staged_mounts {
        return Ok(Some(dir));
    }
    // A requeued run's directory is fresh: nothing of an earlier run's copy is left in it.
    if l.workdir.is_none() {
        remove_as(owner, &dir);
    }
    if let Some(w) = l.workdir.clone() {
        copy_as(owner, Path::new(&w), &dir, true, kept)
            .map_err(|why| format!("copying its workdir for {}: {why}", owner.name))?;
        l.workdir = Some(dir.display().to_string());
    }
    if !l.local_mounts.is_empty() {
        // Where this agent has them: shipped under a root of its own (an SSH host), or at
        // their paths (the daemon's host).
        let from = l
            .envs
            .get("GANTRY_MOUNTS_FROM")
            .cloned()
            .unwrap_or_default();
        for src in &l.local_mounts {
            let here = PathBuf::from(format!("{from}{src}"));
            let into = if here.is_dir() {
                root.join(src.trim_start_matches('/'))
            } else {
                let parent = Path::new(src).parent().unwrap_or(Path::new("/"));
                root.join(parent.strip_prefix("/").unwrap_or(parent))
            };
            copy_as(owner, &here, &into, false, kept)
                .map_err(|why| format!("copying its file_mounts for {}: {why}", owner.name))?;
        }
        l.envs
            .insert("GANTRY_MOUNTS_FROM".to_string(), root.display().to_string());
    }
    Ok(Some(dir))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_copies_gantry_keeps_are_read_for_an_owner() {
        let kept = gantry_testkit::scratch::scratch("stage-kept");
        let owner = crate::unix_user::account("root").unwrap();
        let dest = kept.join("dest");
        // A path a job named (one journaled before callers' paths were refused): refused, and
        // so is a way out of the kept directory through `..`.
        for src in [
            PathBuf::from("/etc/hostname"),
            kept.join("../../etc/hostname"),
        ] {
            let why = copy_as(&owner, &src, &dest, true, &[kept.join("workdirs")]).unwrap_err();
            assert!(why.contains("is not a copy gantry keeps"), "{why}");
        }
        assert!(!dest.exists(), "nothing was copied");
        let _ = std::fs::remove_dir_all(&kept);
    }
}
