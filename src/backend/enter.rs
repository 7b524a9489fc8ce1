//! Into a running job, on the host where it runs (`gantry exec` / `gantry ssh`): the daemon
//! starts `gantry agent-enter` there — in-process hosts directly, SSH hosts over the pool's
//! master connection — and it becomes a process in the run's own environment and working
//! directory, read from the run's leader in `/proc` (so what the job was given, GPUs and ranks
//! included, is what the shell gets, with nothing recomputed), or `RUNTIME exec` into the run's
//! container. Only a run this host's agent keeps, whose process group provably still runs it,
//! is entered, and as the user the run runs as (its leader's identity; a container's own user).

use super::local::container::Container;
use super::local::exec::group_runs_job;
use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};

/// The hidden subcommand the daemon runs on the host.
pub const SUBCOMMAND: &str = "agent-enter";

/// The words after the agent's path: `agent-enter --runs DIR --job N [--tty] -- ARGV…`.
pub fn args(runs: Option<&Path>, job: i64, tty: bool, argv: &[String]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec![SUBCOMMAND.into()];
    if let Some(r) = runs {
        a.push("--runs".into());
        a.push(r.into());
    }
    a.push("--job".into());
    a.push(job.to_string().into());
    if tty {
        a.push("--tty".into());
    }
    a.push("--".into());
    a.extend(argv.iter().map(OsString::from));
    a
}

/// A shell where the image or host may lack bash: bash if it is there, else sh.
pub const SHELL: [&str; 3] = [
    "/bin/sh",
    "-c",
    "command -v bash >/dev/null && exec bash || exec sh",
];

/// One word for a POSIX shell (ssh hands the remote command to the user's shell).
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@%+".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// The run as the agent keeps it (`agent::RunFile`'s fields that matter here).
#[derive(serde::Deserialize)]
struct Run {
    pgid: u32,
    token: String,
    #[serde(default)]
    runtime: Option<String>,
}

/// Becomes `argv` (or a shell when empty) inside job `job`'s run on this host; returns only
/// with why it could not.
pub fn enter(runs: &Path, job: i64, tty: bool, argv: &[String]) -> String {
    let file = runs.join(format!("job-{job}.json"));
    let run: Run = match std::fs::read(&file) {
        Ok(b) => match serde_json::from_slice(&b) {
            Ok(r) => r,
            Err(e) => return format!("{}: not a run this agent wrote: {e}", file.display()),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return format!(
                "job {job} does not run on this host (no {})",
                file.display()
            )
        }
        Err(e) => return format!("{}: {e}", file.display()),
    };
    let mut cmd = match run.runtime.as_deref() {
        Some(rt) => in_container(&Container::of(rt, job, &run.token), tty, argv),
        None => match in_process_env(run.pgid, job, &run.token, argv) {
            Ok(c) => c,
            Err(why) => return why,
        },
    };
    use std::os::unix::process::CommandExt;
    let e = cmd.exec();
    format!("cannot run {:?}: {e}", cmd.get_program())
}

/// `argv` with the environment and working directory of the run's leader.
fn in_process_env(
    pgid: u32,
    job: i64,
    token: &str,
    argv: &[String],
) -> Result<std::process::Command, String> {
    if !group_runs_job(pgid, job, Some(token)) {
        return Err(format!(
            "job {job}'s process on this host has ended (process group {pgid} no longer runs it)"
        ));
    }
    let proc_dir = PathBuf::from(format!("/proc/{pgid}"));
    let env = std::fs::read(proc_dir.join("environ"))
        .map_err(|e| format!("cannot read job {job}'s environment: {e}"))?;
    let env: Vec<(OsString, OsString)> = env
        .split(|b| *b == 0)
        .filter_map(|kv| {
            let i = kv.iter().position(|b| *b == b'=')?;
            Some((
                OsString::from_vec(kv[..i].to_vec()),
                OsString::from_vec(kv[i + 1..].to_vec()),
            ))
        })
        .collect();
    let cwd = std::fs::read_link(proc_dir.join("cwd"))
        .map_err(|e| format!("cannot read job {job}'s working directory: {e}"))?;
    let (program, rest) = match argv.split_first() {
        Some((p, rest)) => (OsString::from(p), rest.to_vec()),
        None => {
            let shell = env
                .iter()
                .find(|(k, _)| k == "SHELL")
                .map(|(_, v)| v.clone())
                .filter(|s| Path::new(s).is_file());
            let shell = shell.unwrap_or_else(|| {
                if Path::new("/bin/bash").exists() {
                    "/bin/bash".into()
                } else {
                    "/bin/sh".into()
                }
            });
            (shell, Vec::new())
        }
    };
    let mut cmd = std::process::Command::new(program);
    cmd.args(rest).env_clear().envs(env);
    // As whoever the run runs as: its leader's user and groups (a root agent's run of
    // another user's job), entering its directory with their rights, never root's.
    let creds = crate::unix_user::Creds::of_process(pgid)?;
    if creds.switch_needed() {
        // The session's terminal becomes theirs, as a login's does.
        // SAFETY: isatty and fchown on this process's own standard input.
        unsafe {
            if libc::isatty(0) == 1 {
                libc::fchown(0, creds.uid, u32::MAX);
            }
        }
        creds.apply(&mut cmd, Some(&cwd));
    } else {
        cmd.current_dir(cwd);
    }
    Ok(cmd)
}

/// `RUNTIME exec [-it] NAME argv` (a shell when empty: bash where the image has it).
fn in_container(c: &Container, tty: bool, argv: &[String]) -> std::process::Command {
    let mut cmd = std::process::Command::new(&c.runtime);
    cmd.arg("exec");
    if tty {
        cmd.arg("-it");
    } else {
        cmd.arg("-i");
    }
    cmd.arg(&c.name);
    if argv.is_empty() {
        cmd.args(SHELL);
    } else {
        cmd.args(argv);
    }
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_the_remote_shell() {
        assert_eq!(shell_quote("nvidia-smi"), "nvidia-smi");
        assert_eq!(shell_quote(".gantry/bin/x"), ".gantry/bin/x");
        assert_eq!(shell_quote("a b"), "'a b'");
        assert_eq!(shell_quote("it's $HOME"), r"'it'\''s $HOME'");
        assert_eq!(shell_quote(""), "''");
    }

    #[test]
    fn a_job_this_host_does_not_run_is_said() {
        let dir = gantry_testkit::scratch::scratch("enter");
        let why = enter(&dir, 7, false, &["true".into()]);
        assert!(why.contains("job 7 does not run on this host"), "{why}");
        std::fs::write(
            dir.join("job-8.json"),
            r#"{"job":8,"pgid":999999999,"token":"t"}"#,
        )
        .unwrap();
        let why = enter(&dir, 8, false, &["true".into()]);
        assert!(
            why.contains("job 8's process on this host has ended"),
            "{why}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
