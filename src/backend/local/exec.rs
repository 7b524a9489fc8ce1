//! Running a job as a real process on this host. Each job gets its own process group so that a
//! signal reaches everything it started; stdout and stderr go to log files the console can tail;
//! stopping sends the job's signal, waits the grace period, then SIGKILLs the group.

use crate::backend::logs::{log_path, Stream};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fs::OpenOptions;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Default)]
pub struct LaunchSpec {
    pub job: i64,
    pub setup: Option<String>,
    pub run: String,
    pub workdir: Option<PathBuf>,
    pub envs: BTreeMap<String, String>,
    /// GPU (or MIG instance) UUIDs granted to the job; empty hides every GPU.
    pub gpu_uuids: Vec<String>,
    pub checkpoint_dir: Option<PathBuf>,
    pub log_dir: PathBuf,
    /// A secret of this run alone, put in its environment (`GANTRY_RUN_TOKEN`): what proves,
    /// after a restart, that a process group is this run's and not a stranger's.
    pub run_token: String,
    /// The node's place in a multi-node job (one node: rank 0 of 1).
    pub gang: crate::backend::Gang,
    /// The image and runtime to run it in (`image_id` on a pool with `container_runtime`);
    /// `None`: on the host as it is.
    pub container: Option<(super::container::Container, String)>,
    /// Where the run's local `file_mounts` sources are on this host (each source, or the root
    /// a remote daemon shipped them to): a container sees them there, read-only, for setup
    /// to copy.
    pub mount_sources: Vec<PathBuf>,
    /// Who the run's processes are (its job's owner), where this process is root and they
    /// are someone else: the run starts as them, in a login's environment. `None`: as this
    /// process, with its environment.
    pub owner: Option<crate::unix_user::Account>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(tag = "kind", content = "value", rename_all = "kebab-case")]
pub enum Exit {
    Code(i32),
    Signal(i32),
    /// A re-adopted job's group is gone and left no status: it was killed outright.
    Unknown,
}

impl Exit {
    pub fn success(self) -> bool {
        self == Exit::Code(0)
    }

    /// What a shell's status says: above 128 (up to the last signal) is death by signal
    /// `status - 128`, as the local leader and the Slurm batch script write it.
    pub fn of_shell_status(status: i64) -> Exit {
        match i32::try_from(status) {
            Ok(s @ 129..=159) => Exit::Signal(s - 128),
            Ok(s) => Exit::Code(s),
            Err(_) => Exit::Code(i32::MAX),
        }
    }
}

/// How a run ended, as the job's history says it ("exited with code 3", "killed by signal 9
/// (SIGKILL)").
impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            Exit::Code(0) => write!(f, "exited 0"),
            Exit::Code(c) => write!(f, "exited with code {c}"),
            Exit::Signal(s) => {
                let name = [
                    (1, "SIGHUP"),
                    (2, "SIGINT"),
                    (6, "SIGABRT"),
                    (9, "SIGKILL"),
                    (10, "SIGUSR1"),
                    (11, "SIGSEGV"),
                    (12, "SIGUSR2"),
                    (15, "SIGTERM"),
                ]
                .iter()
                .find(|(n, _)| *n == s)
                .map_or(String::new(), |(_, n)| format!(" ({n})"));
                write!(f, "killed by signal {s}{name}")
            }
            Exit::Unknown => write!(f, "ended without an exit status"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("job {job}: cannot create log files in {dir}: {source}")]
    Logs {
        job: i64,
        dir: String,
        source: std::io::Error,
    },
    #[error("job {job}: working directory {dir} does not exist")]
    NoWorkdir { job: i64, dir: String },
    #[error("job {job}: cannot start: {source}")]
    Spawn { job: i64, source: std::io::Error },
    #[error("job {job}: cannot start as {user}{workdir}: {source}")]
    SpawnAs {
        job: i64,
        user: String,
        workdir: String,
        source: std::io::Error,
    },
    #[error("job {job}: {source}")]
    Wait { job: i64, source: std::io::Error },
}

/// A job that was started.
#[derive(Debug)]
pub struct Running {
    pub job: i64,
    pub pid: u32,
    pub stdout_log: PathBuf,
    pub stderr_log: PathBuf,
    pub started: Instant,
    child: Child,
}

/// How a stop went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Stopped {
    pub exit: Exit,
    /// The grace period ran out and the group was SIGKILLed.
    pub killed: bool,
}

/// Where a job's exit status is written when it ends (read by a daemon that re-adopted it).
pub fn exit_path(dir: &Path, job: i64) -> PathBuf {
    dir.join(format!("job-{job}.exit"))
}

/// How a group leader ends, once the job has: writes the job's status to the exit file (on
/// descriptor 3, opened by whoever started it: the leader may run as a job's owner, who
/// cannot open a file in the daemon's log directory; in one write of a builtin: `read_exit`
/// takes it only once its line has ended), then dies of the job's signal if a signal killed
/// it, so the parent sees that too.
macro_rules! leader_ends {
    () => {
        r#"printf '%s\n' "$rc" >&3
if [ "$rc" -gt 128 ] && [ "$rc" -lt 160 ]; then
  trap - TERM INT HUP QUIT USR1 USR2
  kill -$((rc - 128)) $$
fi
exit "$rc""#
    };
}

/// The job's process-group leader: runs the job's setup and run in child shells and writes
/// the exit status to a file, so that a daemon that restarted (and so is not the parent) still
/// learns how the job ended. The leader traps the stop signals (a trap, not an ignore, so the
/// job's own shell gets the default dispositions back) and only acts once the job has ended.
/// `$1` is setup (may be empty), `$2` run, `$4` the shell; the exit file is descriptor 3,
/// which the job's shells do not get.
const WRAPPER: &str = concat!(
    r#"trap : TERM INT HUP QUIT USR1 USR2
rc=0
if [ -n "$1" ]; then
  "$4" -c "$1" 3>&-
  rc=$?
fi
if [ "$rc" -eq 0 ]; then
  "$4" -c "$2" 3>&-
  rc=$?
fi
"#,
    leader_ends!()
);

/// The group leader of a containerized run: as `WRAPPER`, around the runtime's client (its
/// command line after `$1`, which is not used). The client passes the stop signals on.
const CONTAINER_WRAPPER: &str = concat!(
    r#"trap : TERM INT HUP QUIT USR1 USR2
shift
"$@" 3>&-
rc=$?
"#,
    leader_ends!()
);

/// What a task script starts with under bash: conda's shell hook where conda is on the PATH,
/// so `conda activate` works as in SkyPilot's scripts. Not ~/.bashrc (SkyPilot sources it):
/// a job killed while the user's rc ran its own setup left this project's pyenv with a stale
/// lock that stalled every later bash login for a minute — a job must not be able to break
/// its user's shells.
pub(crate) const BASH_PRELUDE: &str = "if command -v conda >/dev/null 2>&1; then _c=$(conda info --base 2>/dev/null) && . \"$_c/etc/profile.d/conda.sh\" >/dev/null 2>&1; unset _c; fi\n";

/// The status an exit file holds, once its line has ended. A leader here and a Slurm part's
/// batch script (`slurm::batch::exits_dir`) write it in one write of a builtin, so a read
/// between the file's creation and that write finds it empty: not written yet.
pub fn written_status(text: &str) -> Option<i64> {
    text.strip_suffix('\n')?.trim().parse().ok()
}

/// How a job ended, from the status its leader wrote (`None`: not written, so not ended or
/// killed outright). Shell convention: above 128 is death by signal `status - 128`.
pub fn read_exit(dir: &Path, job: i64) -> Option<Exit> {
    let text = std::fs::read_to_string(exit_path(dir, job)).ok()?;
    let rc = written_status(&text)?;
    i32::try_from(rc).ok().map(|_| Exit::of_shell_status(rc))
}

/// Sends `sig` to a job's process group (its leader's pid is the group id). A group id of 0
/// or 1 is never signalled: `kill(0)` is the caller's own group and `kill(-1)` every process
/// the user may signal.
pub fn signal_group(pgid: u32, sig: i32) {
    if pgid <= 1 || pgid > i32::MAX as u32 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe {
        libc::kill(-(pgid as i32), sig);
    }
}

/// What identifies a run's processes: the run's own token in their environment when the
/// journal has one (every run since it was added), else the job id (older journals).
fn marker(job: i64, token: Option<&str>) -> String {
    match token {
        Some(t) => format!("GANTRY_RUN_TOKEN={t}"),
        None => format!("GANTRY_JOB_ID={job}"),
    }
}

fn carries(pid: u32, marker: &str) -> bool {
    std::fs::read(format!("/proc/{pid}/environ"))
        .is_ok_and(|env| env.split(|b| *b == 0).any(|kv| kv == marker.as_bytes()))
}

/// (pid, process group, state) of every process, from /proc.
fn processes() -> Vec<(u32, u32, char)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The fields after the command name (in parentheses, which may hold anything).
        let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
        let state = rest.next()?.chars().next()?;
        let _ppid = rest.next()?;
        let pgrp: u32 = rest.next()?.parse().ok()?;
        Some((pid, pgrp, state))
    })
    .collect()
}

/// Whether every live process of group `pgid` is provably this run's (its environment carries
/// the run's marker), and there is at least one. Only such a group may be signalled by a
/// daemon that is not its parent: a pid reused after a reboot, or a group whose leader is gone
/// and whose id now names a stranger's, is left alone.
pub fn group_is_ours(pgid: u32, job: i64, token: Option<&str>) -> bool {
    if pgid <= 1 {
        return false;
    }
    let want = marker(job, token);
    let members: Vec<u32> = processes()
        .into_iter()
        .filter(|&(_, g, state)| g == pgid && !matches!(state, 'Z' | 'X'))
        .map(|(pid, _, _)| pid)
        .collect();
    !members.is_empty() && members.iter().all(|&pid| carries(pid, &want))
}

/// Signals a group only when it is provably the run's (`group_is_ours`); true if it was.
pub fn signal_group_if_ours(pgid: u32, job: i64, token: Option<&str>, sig: i32) -> bool {
    let ours = group_is_ours(pgid, job, token);
    if ours {
        signal_group(pgid, sig);
    }
    ours
}

/// Whether the process group a job was started in still runs that job: its leader exists, is
/// not a zombie, and carries the job's `GANTRY_JOB_ID` (so a recycled pid is not mistaken for
/// it after a reboot).
pub fn group_runs_job(pgid: u32, job: i64, token: Option<&str>) -> bool {
    if pgid <= 1 {
        return false;
    }
    let proc_dir = PathBuf::from(format!("/proc/{pgid}"));
    let Ok(stat) = std::fs::read_to_string(proc_dir.join("stat")) else {
        return false;
    };
    // The state follows the command name, which is in parentheses and may contain spaces.
    let state = stat
        .rsplit(')')
        .next()
        .and_then(|r| r.split_whitespace().next());
    if matches!(state, Some("Z" | "X") | None) {
        return false;
    }
    carries(pgid, &marker(job, token))
}

/// Starts the job: its setup, then (if that succeeded) its run, in a new process group.
pub fn launch(spec: &LaunchSpec) -> Result<Running, ExecError> {
    let job = spec.job;
    std::fs::create_dir_all(&spec.log_dir).map_err(|source| ExecError::Logs {
        job,
        dir: spec.log_dir.display().to_string(),
        source,
    })?;
    let open = |stream: Stream| {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_path(&spec.log_dir, job, stream))
            .map_err(|source| ExecError::Logs {
                job,
                dir: spec.log_dir.display().to_string(),
                source,
            })
    };
    let (out, err) = (open(Stream::Out)?, open(Stream::Err)?);
    // Someone else's run (a root agent, a job of another user): it runs as them, and enters
    // its workdir as them.
    let owner = spec.owner.as_ref().filter(|a| a.creds.switch_needed());
    if let Some(a) = owner {
        // The logs are the owner's (they stay in the agent's directory, which the owner
        // cannot reach: the daemon serves them).
        for f in [&out, &err] {
            let _ = std::os::unix::fs::fchown(f, Some(a.creds.uid), Some(a.creds.gid));
        }
    }
    if let Some(dir) = spec.workdir.as_ref().filter(|_| owner.is_none()) {
        if !dir.is_dir() {
            return Err(ExecError::NoWorkdir {
                job,
                dir: dir.display().to_string(),
            });
        }
    }
    // As SkyPilot runs a task: setup and run as separate bash scripts (a `cd` or `export` in
    // setup does not leak into run; a failing setup — its last command's status — stops the
    // job), each after conda's shell hook where conda is. Hosts without bash get `sh`; a
    // container's image must have bash, as SkyPilot's do.
    let bash = spec.container.is_some() || Path::new("/bin/bash").exists();
    let script = |body: &str| {
        if bash {
            format!("{BASH_PRELUDE}{body}")
        } else {
            body.to_string()
        }
    };
    let setup = spec.setup.as_deref().map(script).unwrap_or_default();
    let run = script(&spec.run);
    // The exit file, empty (a previous run of the same job left its exit; this run must not
    // be mistaken for ended), handed to the leader as descriptor 3.
    let exit_file = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(exit_path(&spec.log_dir, job))
        .map_err(|source| ExecError::Logs {
            job,
            dir: spec.log_dir.display().to_string(),
            source,
        })?;
    let mut env: Vec<(String, std::ffi::OsString)> = vec![
        (
            "CUDA_VISIBLE_DEVICES".into(),
            spec.gpu_uuids.join(",").into(),
        ),
        ("GANTRY_LOG_DIR".into(), spec.log_dir.clone().into()),
    ];
    // The job's id, token and GPU count, its checkpoint directory, and its rank, node count
    // and addresses in gantry's and SkyPilot's names, so existing task scripts run unchanged.
    let checkpoint = spec.checkpoint_dir.as_ref().map(|d| d.to_string_lossy());
    let ours = crate::backend::part_env(
        job,
        &spec.run_token,
        spec.gpu_uuids.len(),
        checkpoint.as_deref(),
        &spec.gang,
    );
    env.extend(ours.into_iter().map(|(k, v)| (k.to_string(), v.into())));
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c");
    match &spec.container {
        None => {
            cmd.arg(WRAPPER)
                .arg("gantry-job")
                .arg(setup)
                .arg(run)
                .arg("-")
                .arg(if bash { "/bin/bash" } else { "/bin/sh" });
        }
        Some((container, image)) => {
            if let Some(dir) = &spec.checkpoint_dir {
                // A bind mount needs its source; the job would create it on the host anyway
                // (as its owner: a path a job names is never made with root's rights).
                match owner {
                    None => {
                        let _ = std::fs::create_dir_all(dir);
                    }
                    Some(a) => {
                        let mut mkdir = Command::new("mkdir");
                        mkdir.arg("-p").arg("--").arg(dir).env_clear();
                        mkdir.envs(a.login_env()).stdin(Stdio::null());
                        a.creds.apply(&mut mkdir, None);
                        let _ = mkdir.status();
                    }
                }
            }
            let names: Vec<String> = spec
                .envs
                .keys()
                .cloned()
                .chain(env.iter().map(|(k, _)| k.clone()))
                .collect();
            cmd.arg(CONTAINER_WRAPPER)
                .arg("gantry-job")
                .arg("-")
                .arg(&container.runtime)
                .args(container.run_args(image, spec, &names, &setup, &run));
        }
    }
    cmd.stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .process_group(0);
    if let (Some(a), None) = (owner, &spec.container) {
        // A login's environment: nothing of the daemon's (its credentials, its tokens). A
        // container's client keeps the agent's (it is the agent's runtime), and passes the
        // container only the variables it names.
        cmd.env_clear().envs(a.login_env());
    }
    cmd.envs(&spec.envs)
        // systemd's readiness socket is the daemon's, not its jobs'.
        .env_remove("NOTIFY_SOCKET")
        .envs(env);
    pass_as_fd3(&mut cmd, exit_file);
    match (owner, &spec.container) {
        // A container's client stays this process's (root's runtime); the container runs as
        // the owner (`--user`, in `run_args`).
        (Some(_), Some(_)) | (None, _) => {
            if let Some(dir) = &spec.workdir {
                cmd.current_dir(dir);
            }
        }
        // No workdir: the owner's home, as a login starts there (not the daemon's directory).
        (Some(a), None) => a
            .creds
            .apply(&mut cmd, Some(spec.workdir.as_deref().unwrap_or(&a.home))),
    }
    let child = cmd.spawn().map_err(|source| match owner {
        Some(a) => ExecError::SpawnAs {
            job,
            user: a.name.clone(),
            workdir: spec
                .workdir
                .as_ref()
                .map_or(String::new(), |d| format!(" in {}", d.display())),
            source,
        },
        None => ExecError::Spawn { job, source },
    })?;
    Ok(Running {
        job,
        pid: child.id(),
        stdout_log: log_path(&spec.log_dir, job, Stream::Out),
        stderr_log: log_path(&spec.log_dir, job, Stream::Err),
        started: Instant::now(),
        child,
    })
}

/// Gives the child `file` as descriptor 3 (and nothing of it elsewhere: the parent's copy
/// closes on exec).
fn pass_as_fd3(cmd: &mut Command, file: std::fs::File) {
    use std::os::fd::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: dup2 is async-signal-safe; `file` is moved into the closure, so the descriptor
    // stays open until the child has duplicated it (the closure lives as long as `cmd`).
    unsafe {
        cmd.pre_exec(move || {
            let _keep = &file;
            if fd == 3 {
                // dup2 onto itself keeps close-on-exec set: clear it.
                if libc::fcntl(3, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            } else if libc::dup2(fd, 3) != 3 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn exit_of(status: std::process::ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    }
}

/// Signal numbers for the names a spec may use.
pub fn signal_number(name: &str) -> Option<i32> {
    Some(match name {
        "SIGTERM" => libc::SIGTERM,
        "SIGINT" => libc::SIGINT,
        "SIGUSR1" => libc::SIGUSR1,
        "SIGUSR2" => libc::SIGUSR2,
        "SIGHUP" => libc::SIGHUP,
        "SIGQUIT" => libc::SIGQUIT,
        "SIGKILL" => libc::SIGKILL,
        _ => return None,
    })
}

impl Running {
    /// The exit, if the job has ended.
    pub fn try_exit(&mut self) -> Result<Option<Exit>, ExecError> {
        let job = self.job;
        Ok(self
            .child
            .try_wait()
            .map_err(|source| ExecError::Wait { job, source })?
            .map(exit_of))
    }

    pub fn wait(&mut self) -> Result<Exit, ExecError> {
        let job = self.job;
        self.child
            .wait()
            .map(exit_of)
            .map_err(|source| ExecError::Wait { job, source })
    }

    /// Sends `sig` to the job's process group without waiting (the daemon waits on its clock).
    pub fn signal(&self, sig: i32) {
        self.signal_group(sig);
    }

    fn signal_group(&self, sig: i32) {
        signal_group(self.pid, sig);
    }

    /// Sends `signal` to the job's process group, waits up to `grace`, then SIGKILLs the group.
    pub fn stop(&mut self, signal: i32, grace: Duration) -> Result<Stopped, ExecError> {
        if let Some(exit) = self.try_exit()? {
            return Ok(Stopped {
                exit,
                killed: false,
            });
        }
        self.signal_group(signal);
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if let Some(exit) = self.try_exit()? {
                return Ok(Stopped {
                    exit,
                    killed: false,
                });
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        self.signal_group(libc::SIGKILL);
        Ok(Stopped {
            exit: self.wait()?,
            killed: true,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An exit file is read only once its line has ended: the one write that says it may not
    /// have happened yet when the file is looked at.
    #[test]
    fn an_exit_status_is_taken_only_whole() {
        assert_eq!(written_status("0\n"), Some(0));
        assert_eq!(written_status("137\n"), Some(137));
        assert_eq!(written_status(""), None);
        assert_eq!(written_status("13"), None);
        assert_eq!(written_status("x\n"), None);
    }

    fn tmp(name: &str) -> PathBuf {
        gantry_testkit::scratch::scratch(&format!("exec-{name}"))
    }

    #[test]
    fn exit_codes_and_logs_are_recorded() {
        let dir = tmp("logs");
        let mut r = launch(&LaunchSpec {
            run_token: "test-run".to_string(),
            job: 7,
            run: "echo hello; echo oops >&2; exit 3".into(),
            log_dir: dir.clone(),
            ..LaunchSpec::default()
        })
        .unwrap();
        assert_eq!(r.wait().unwrap(), Exit::Code(3));
        assert_eq!(std::fs::read_to_string(&r.stdout_log).unwrap(), "hello\n");
        assert_eq!(std::fs::read_to_string(&r.stderr_log).unwrap(), "oops\n");
    }

    #[test]
    fn a_failing_setup_stops_the_job() {
        let dir = tmp("setup");
        let mut r = launch(&LaunchSpec {
            run_token: "test-run".to_string(),
            job: 1,
            setup: Some("false".into()),
            run: "echo ran".into(),
            log_dir: dir,
            ..LaunchSpec::default()
        })
        .unwrap();
        assert_eq!(r.wait().unwrap(), Exit::Code(1));
        assert_eq!(std::fs::read_to_string(&r.stdout_log).unwrap(), "");
    }

    /// Runs a job (in a directory of its own) to its end: its exit and its stdout.
    fn run_job(job: i64, setup: Option<&str>, run: &str) -> (Exit, String) {
        let dir = tmp(&format!("shell-{job}"));
        let mut r = launch(&LaunchSpec {
            run_token: "test-run".to_string(),
            job,
            setup: setup.map(str::to_string),
            run: run.into(),
            workdir: Some(dir.clone()),
            log_dir: dir,
            ..LaunchSpec::default()
        })
        .unwrap();
        let exit = r.wait().unwrap();
        (exit, std::fs::read_to_string(&r.stdout_log).unwrap())
    }

    #[test]
    fn setup_and_run_are_separate_bash_scripts_as_skypilot_runs_them() {
        if !Path::new("/bin/bash").exists() {
            eprintln!("skipped: no /bin/bash");
            return;
        }
        // bash, not dash: [[ ]], pipefail, process substitution, `source`.
        let (exit, out) = run_job(
            11,
            None,
            "[[ 1 -eq 1 ]] && echo brackets\nset -o pipefail; false | true; echo pipefail=$?\ncat <(echo substituted)\necho 'echo sourced' > s.sh; source s.sh",
        );
        assert_eq!(exit, Exit::Code(0));
        assert_eq!(out, "brackets\npipefail=1\nsubstituted\nsourced\n");
        // Setup's `cd` and `export` stay in setup; its status is its last command's.
        let (exit, out) = run_job(
            12,
            Some("cd /\nexport LEAK=1\nfalse\ntrue"),
            "pwd\necho LEAK=$LEAK",
        );
        assert_eq!(exit, Exit::Code(0));
        let wd = tmp("shell-12");
        assert_eq!(out, format!("{}\nLEAK=\n", wd.display()));
        // A failed run fails the job with its code.
        let (exit, _) = run_job(13, Some("true"), "echo before\nexit 7");
        assert_eq!(exit, Exit::Code(7));
    }

    #[test]
    fn a_missing_workdir_is_an_error_not_a_crash() {
        let e = launch(&LaunchSpec {
            run_token: "test-run".to_string(),
            job: 2,
            run: "true".into(),
            workdir: Some("/no/such/dir".into()),
            log_dir: tmp("wd"),
            ..LaunchSpec::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "job 2: working directory /no/such/dir does not exist"
        );
    }
}
