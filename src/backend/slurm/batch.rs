//! Slurm's command line for what gantry changes on a cluster: a node's part of a gantry job
//! submitted as a batch job pinned to that node (`sbatch --nodelist`), signalled and
//! cancelled (`scancel`). Writes go through the commands (munge auth, as the daemon's user)
//! while reads stay on the REST API: slurmrestd's v0.0.38 (Slurm 22.05) submission takes a
//! `nodelist`, but the job then runs as the user of the pool's token, not the daemon's.

use crate::backend::Launch;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long a Slurm command may take (sbatch retries a controller that is down).
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// What gantry writes in a Slurm job's comment: its job, run token and rank.
pub fn comment(job: i64, token: &str, rank: u16) -> String {
    format!("gantry:{job}:{token}:{rank}")
}

/// A comment gantry wrote: (job, token, rank).
pub fn parse_comment(c: &str) -> Option<(i64, String, u16)> {
    let mut it = c.strip_prefix("gantry:")?.split(':');
    let job = it.next()?.parse().ok()?;
    let token = it.next()?.to_string();
    let rank = it.next()?.parse().ok()?;
    (!token.is_empty()).then_some((job, token, rank))
}

/// Where a run's output goes: `<logs>/<node>/job-<id>.out|err` (the layout the local backend's
/// log reader reads).
pub fn node_log_dir(logs: &Path, node: &str) -> PathBuf {
    logs.join("slurm").join(node)
}

/// Where a running part says how to enter it (`gantry exec`): its Slurm job id, then its
/// environment and working directory as shell lines (mode 0600: the job's secrets are in it).
pub fn enter_path(logs: &Path, node: &str, job: i64) -> PathBuf {
    node_log_dir(logs, node).join(format!("job-{job}.enter"))
}

/// Where each part's batch script says how its run ended as it ends: a file named by its
/// Slurm job id holding the script's status. The pool's worker reads the directory many times
/// a second, so a run's end reaches the daemon at once rather than at the next read of Slurm's
/// queue (Slurm still holds the job's GPUs for the moment it takes to complete; the next part
/// pinned there waits for it in Slurm's queue, not in gantry's).
pub fn exits_dir(logs: &Path) -> PathBuf {
    logs.join("slurm").join(".exits")
}

/// `'…'` for the shell.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The batch script of one node's part: the job's environment, then setup and run as separate
/// bash scripts (as SkyPilot and the local backend run them), its status the script's.
pub fn script(l: &Launch, gpus: usize, enter: &Path, exits: &Path) -> String {
    let mut s = String::from("#!/bin/bash\n");
    s.push_str(&format!(
        "# gantry job {} ({}), rank {} of {}\n",
        l.job,
        l.name.as_deref().unwrap_or("unnamed"),
        l.gang.rank,
        l.gang.ips.len()
    ));
    let mut env: Vec<(String, String)> = l.envs.clone().into_iter().collect();
    let ours =
        crate::backend::part_env(l.job, &l.token, gpus, l.checkpoint_dir.as_deref(), &l.gang);
    env.extend(ours.into_iter().map(|(k, v)| (k.to_string(), v)));
    for (k, v) in env {
        if k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') && !k.is_empty() {
            s.push_str(&format!("export {k}={}\n", quote(&v)));
        }
    }
    // Slurm sets CUDA_VISIBLE_DEVICES to the GPUs it allocated; a job given none sees none.
    s.push_str("[ -n \"${SLURM_JOB_GPUS:-}\" ] || export CUDA_VISIBLE_DEVICES=\n");
    // How `gantry exec` enters this part (`srun --overlap` into the allocation): the
    // environment above (`srun` leaves Slurm's own out: the step has its own), and where it
    // runs. Only builtins from here to the run, and from its end to the script's: every
    // process started between two jobs is time the GPU stands idle (issue 39).
    let enter = quote(&enter.display().to_string());
    s.push_str(&format!(
        "(umask 077; {{ echo \"# slurm-job $SLURM_JOB_ID\"; export -p; printf 'cd %q\\n' \"$PWD\"; }} > {enter}) 2>/dev/null\n"
    ));
    // Quoted here-documents read by `read` (a builtin: `$(cat …)` forks twice): the bodies
    // are taken as written (the token keeps the end marker out of any body).
    let body = |name: &str, text: &str| {
        let mark = format!("GANTRY_{name}_{}", l.token);
        format!(
            "IFS= read -r -d '' _gantry_{name} <<'{mark}'\n{}{text}\n{mark}\n",
            super::super::local::exec::BASH_PRELUDE
        )
    };
    if let Some(setup) = &l.setup {
        s.push_str(&body("setup", setup));
    }
    s.push_str(&body("run", &l.run));
    // The signal goes to every process of the job (`scancel --full`): the script outlives
    // its child to report the child's status.
    s.push_str("trap : TERM INT HUP QUIT USR1 USR2\nrc=0\n");
    if l.setup.is_some() {
        s.push_str("/bin/bash -c \"$_gantry_setup\"; rc=$?\n");
    }
    s.push_str("if [ \"$rc\" -eq 0 ]; then /bin/bash -c \"$_gantry_run\"; rc=$?; fi\n");
    // The end said at once, by one write of a builtin: the worker takes a status only
    // once its line has ended (`exec::written_status`), and removes the enter file.
    let exit = quote(&exits.display().to_string());
    s.push_str(&format!(
        "{{ printf '%s\\n' \"$rc\" > {exit}/$SLURM_JOB_ID; }} 2>/dev/null\nexit \"$rc\"\n"
    ));
    s
}

/// What a pool's submissions share.
#[derive(Clone, Debug)]
pub struct Submit {
    pub partition: Option<String>,
    /// The pool's GPUs per node: a part asking for all of them gets the node exclusively.
    pub gpus_per_node: usize,
    pub logs: PathBuf,
}

/// Submits one node's part pinned to `node`; Slurm's job id, or what sbatch said.
pub fn sbatch(s: &Submit, node: &str, l: &Launch) -> Result<u64, String> {
    let gpus = l.gpus.len();
    let dir = node_log_dir(&s.logs, node);
    let exits = exits_dir(&s.logs);
    for d in [&dir, &exits] {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("cannot create the log directory {}: {e}", d.display()))?;
    }
    let log =
        |stream: crate::backend::logs::Stream| crate::backend::logs::log_path(&dir, l.job, stream);
    let mut cmd = slurm_command("sbatch");
    cmd.arg("--parsable")
        .arg(format!("--job-name=gantry-{}", l.job))
        .arg(format!(
            "--comment={}",
            comment(l.job, &l.token, l.gang.rank)
        ))
        .arg(format!("--nodelist={node}"))
        .args(["--nodes=1", "--ntasks=1", "--open-mode=append"])
        .arg(format!(
            "--output={}",
            log(crate::backend::logs::Stream::Out).display()
        ))
        .arg(format!(
            "--error={}",
            log(crate::backend::logs::Stream::Err).display()
        ));
    if let Some(p) = &s.partition {
        cmd.arg(format!("--partition={p}"));
    }
    if gpus > 0 {
        cmd.arg(format!("--gres=gpu:{gpus}"));
    }
    if gpus > 0 && gpus == s.gpus_per_node {
        cmd.arg("--exclusive");
    }
    if let Some(t) = l.time_limit_s {
        cmd.arg(format!("--time={}", (t / 60.0).ceil().max(1.0) as u64));
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    cmd.arg(format!("--chdir={}", l.workdir.as_deref().unwrap_or(&home)));
    let enter = enter_path(&s.logs, node, l.job);
    let out = run(&mut cmd, Some(&script(l, gpus, &enter, &exits)))?;
    out.trim()
        .split(';')
        .next()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| format!("sbatch answered `{}`, not a job id", out.trim()))
}

/// `scancel` of Slurm job `id`: `signal` (a name) to every process of it, or the job
/// cancelled outright.
pub fn scancel(id: u64, signal: Option<&str>) -> Result<(), String> {
    let mut cmd = slurm_command("scancel");
    if let Some(sig) = signal {
        cmd.arg("--full")
            .arg(format!("--signal={}", sig.trim_start_matches("SIG")));
    }
    cmd.arg(id.to_string());
    match run(&mut cmd, None) {
        // Ended meanwhile, or so long ago Slurm forgot it: nothing left to cancel.
        Err(e) if e.contains("already completing or completed") || e.contains("Invalid job id") => {
            Ok(())
        }
        r => r.map(|_| ()),
    }
}

/// `srun` into the running part that wrote `enter` (`enter_path`): a step overlapping the
/// job's own, in its environment and directory, running `argv` (a shell when empty); with a
/// pseudo-terminal when `tty`.
pub fn srun(enter: &Path, tty: bool, argv: &[String]) -> Result<Command, String> {
    let text = std::fs::read_to_string(enter).map_err(|_| {
        "its batch script has not said where it runs yet (it has just started, or it ended): try again in a moment".to_string()
    })?;
    let id: u64 = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# slurm-job "))
        .and_then(|id| id.trim().parse().ok())
        .ok_or_else(|| format!("{} names no Slurm job", enter.display()))?;
    let mut cmd = slurm_command("srun");
    cmd.arg(format!("--jobid={id}"))
        .args(["--overlap", "--ntasks=1", "--quiet"]);
    if tty {
        cmd.arg("--pty");
    }
    let body = if argv.is_empty() {
        "exec /bin/bash -i"
    } else {
        "exec \"$@\""
    };
    // The batch step's environment without Slurm's own (this step has its own).
    cmd.args(["/bin/bash", "-c"])
        .arg(format!(
            ". <(grep -v '^declare -x SLURM_' {}) && {body}",
            quote(&enter.display().to_string())
        ))
        .arg("gantry-exec")
        .args(argv);
    Ok(cmd)
}

/// A Slurm command with only the environment it needs. The daemon's own stays out: a job's
/// environment is sbatch's (Slurm exports it), and with slurmrestd's token (SLURM_JWT) in it
/// the commands would act as the token's user (who may not cancel the daemon's jobs) instead
/// of the daemon's, through munge.
fn slurm_command(name: &str) -> Command {
    let mut cmd = Command::new(name);
    cmd.env_clear();
    for k in ["PATH", "HOME", "USER", "LOGNAME", "LANG", "SLURM_CONF"] {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    cmd
}

/// Runs a Slurm command with `stdin`; its stdout, or its stderr as the error.
fn run(cmd: &mut Command, stdin: Option<&str>) -> Result<String, String> {
    let what = cmd.get_program().to_string_lossy().into_owned();
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            format!("cannot run {what}: {e} (install Slurm's client commands on the daemon's host)")
        })?;
    if let Some(text) = stdin {
        if let Some(mut w) = child.stdin.take() {
            let _ = w.write_all(text.as_bytes());
        }
    }
    drop(child.stdin.take());
    let t0 = Instant::now();
    // sbatch answers in tens of milliseconds, each of which a freed GPU waits: look often.
    let mut nap = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if t0.elapsed() > COMMAND_TIMEOUT => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "{what} did not answer in {} s (is slurmctld up?)",
                    COMMAND_TIMEOUT.as_secs()
                ));
            }
            Ok(None) => {
                std::thread::sleep(nap);
                nap = (nap * 2).min(Duration::from_millis(4));
            }
            Err(e) => return Err(format!("{what}: {e}")),
        }
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.trim().trim_start_matches(&format!("{what}: error: "));
        Err(if err.is_empty() {
            format!("{what} failed ({})", out.status)
        } else {
            format!("{what}: {err}")
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_round_trip_and_strangers_are_not_read_as_gantrys() {
        assert_eq!(
            parse_comment(&comment(12, "abc", 1)),
            Some((12, "abc".to_string(), 1))
        );
        assert_eq!(parse_comment("my experiment"), None);
        assert_eq!(parse_comment("gantry:x:abc:0"), None);
    }

    #[test]
    fn the_script_exports_the_environment_and_runs_setup_then_run() {
        let mut l = Launch {
            job: 7,
            token: "tok".into(),
            setup: Some("echo setup".into()),
            run: "echo \"it's $GANTRY_NODE_RANK\"".into(),
            ..Launch::default()
        };
        l.envs.insert("LR".into(), "1e-4 'x'".into());
        l.envs.insert("bad key".into(), "no".into());
        let dir = std::env::temp_dir().join(format!("gantry-batch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let enter = dir.join("job-7.enter");
        let s = script(&l, 2, &enter, &dir);
        assert!(s.contains("export LR='1e-4 '\\''x'\\'''\n"), "{s}");
        assert!(!s.contains("bad key"), "{s}");
        assert!(s.contains("export GANTRY_NUM_GPUS='2'"), "{s}");
        let path = dir.join("s.sh");
        std::fs::write(&path, &s).unwrap();
        let out = Command::new("bash").arg(&path).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "setup\nit's 0\n");
        l.setup = Some("exit 4".into());
        std::fs::write(&path, script(&l, 0, &enter, &dir)).unwrap();
        let out = Command::new("bash")
            .arg(&path)
            .env("SLURM_JOB_ID", "812")
            .output()
            .unwrap();
        assert_eq!((out.status.code(), out.stdout.len()), (Some(4), 0));
        // Its end said where the pool's worker looks, whole.
        let said = std::fs::read_to_string(dir.join("812")).unwrap();
        assert_eq!(
            (
                said.as_str(),
                crate::backend::local::exec::written_status(&said)
            ),
            ("4\n", Some(4))
        );
        // A body is run as written: backslashes, quotes, blank lines, leading spaces. And the
        // script itself starts no command but the body's bash (no PATH to find one in): each
        // one between two jobs is time their GPU stands idle.
        l.setup = None;
        l.run = "  printf '%s|' 'a\\b' \"c\\\"d\"\n\n  echo \"$((1 + 2))\"".into();
        std::fs::write(&path, script(&l, 0, &enter, &dir)).unwrap();
        let out = Command::new("/bin/bash")
            .arg(&path)
            .env_clear()
            .env("PATH", "/nonexistent")
            .env("SLURM_JOB_ID", "813")
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "a\\b|c\"d|3\n",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(std::fs::read_to_string(dir.join("813")).unwrap(), "0\n");
        // What `gantry exec` sources: the environment and the directory.
        let entered = std::fs::read_to_string(&enter).unwrap();
        assert!(entered.contains("declare -x LR="), "{entered}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
