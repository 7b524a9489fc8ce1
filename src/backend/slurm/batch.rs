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

/// One node's part as Slurm is asked for it: sbatch's long options (a flag without a value),
/// and the batch script. slurmrestd's v0.0.38 submission takes the same options by the same
/// names (`rest_field`): both go through Slurm's one option parser (`slurm_opt.c`).
pub struct Part {
    pub options: Vec<(&'static str, Option<String>)>,
    pub script: String,
}

/// `node`'s part of `l`; its log and exit directories made.
pub fn part(s: &Submit, node: &str, l: &Launch) -> Result<Part, String> {
    let gpus = l.gpus.len();
    let dir = node_log_dir(&s.logs, node);
    let exits = exits_dir(&s.logs);
    for d in [&dir, &exits] {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("cannot create the log directory {}: {e}", d.display()))?;
    }
    let log = |stream: crate::backend::logs::Stream| {
        Some(
            crate::backend::logs::log_path(&dir, l.job, stream)
                .display()
                .to_string(),
        )
    };
    let mut options = vec![
        ("job-name", Some(format!("gantry-{}", l.job))),
        ("comment", Some(comment(l.job, &l.token, l.gang.rank))),
        ("nodelist", Some(node.to_string())),
        ("nodes", Some("1".into())),
        ("ntasks", Some("1".into())),
        ("open-mode", Some("append".into())),
        ("output", log(crate::backend::logs::Stream::Out)),
        ("error", log(crate::backend::logs::Stream::Err)),
    ];
    if let Some(p) = &s.partition {
        options.push(("partition", Some(p.clone())));
    }
    if gpus > 0 {
        options.push(("gres", Some(format!("gpu:{gpus}"))));
    }
    if gpus > 0 && gpus == s.gpus_per_node {
        options.push(("exclusive", None));
    }
    if let Some(t) = l.time_limit_s {
        let minutes = (t / 60.0).ceil().max(1.0) as u64;
        options.push(("time", Some(minutes.to_string())));
    }
    let home = std::env::var("HOME").unwrap_or_else(|_| "/tmp".into());
    options.push(("chdir", Some(l.workdir.clone().unwrap_or(home))));
    let enter = enter_path(&s.logs, node, l.job);
    Ok(Part {
        options,
        script: script(l, gpus, &enter, &exits),
    })
}

/// Submits `part` with `sbatch`; Slurm's job id, or what sbatch said.
pub fn sbatch(part: &Part) -> Result<u64, String> {
    let mut cmd = slurm_command("sbatch");
    cmd.arg("--parsable");
    for (name, value) in &part.options {
        match value {
            Some(v) => cmd.arg(format!("--{name}={v}")),
            None => cmd.arg(format!("--{name}")),
        };
    }
    let out = run(&mut cmd, Some(&part.script))?;
    out.trim()
        .split(';')
        .next()
        .and_then(|id| id.parse().ok())
        .ok_or_else(|| format!("sbatch answered `{}`, not a job id", out.trim()))
}

/// slurmrestd v0.0.38's name for an sbatch option (`jobs.c`'s table).
fn rest_field(option: &str) -> &str {
    match option {
        "job-name" => "name",
        "ntasks" => "tasks",
        "open-mode" => "open_mode",
        "output" => "standard_output",
        "error" => "standard_error",
        "time" => "time_limit",
        "chdir" => "current_working_directory",
        other => other,
    }
}

/// `part` as slurmrestd v0.0.38's `POST /job/submit` takes it: the options, and the
/// environment sbatch would have given the job (`slurm_command`'s: slurmrestd gives it none).
pub fn rest_job(part: &Part) -> serde_json::Value {
    let mut job = serde_json::Map::new();
    for (option, value) in &part.options {
        // A flag is given as its own name (`"exclusive": "exclusive"`).
        let v = value.clone().unwrap_or_else(|| option.to_string());
        job.insert(rest_field(option).to_string(), serde_json::Value::String(v));
    }
    let env: serde_json::Map<String, serde_json::Value> = passed_env()
        .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
        .collect();
    job.insert("environment".into(), serde_json::Value::Object(env));
    serde_json::json!({ "script": part.script, "job": job })
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
    cmd.env_clear().envs(passed_env());
    cmd
}

/// The daemon's environment a Slurm command (and so a job it submits) is given.
fn passed_env() -> impl Iterator<Item = (&'static str, String)> {
    ["PATH", "HOME", "USER", "LOGNAME", "LANG", "SLURM_CONF"]
        .into_iter()
        .filter_map(|k| Some((k, std::env::var(k).ok()?)))
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

    /// sbatch's options and slurmrestd's fields are one list: what one is given the other is.
    #[test]
    fn a_part_asks_slurmrestd_for_what_it_asks_sbatch() {
        let dir = gantry_testkit::scratch::scratch("part");
        let s = Submit {
            partition: Some("gpu".into()),
            gpus_per_node: 4,
            logs: dir.clone(),
        };
        let l = Launch {
            job: 9,
            token: "tok".into(),
            gpus: ["0", "1", "2", "3"].map(String::from).to_vec(),
            time_limit_s: Some(61.0),
            workdir: Some("/work".into()),
            run: "true".into(),
            ..Launch::default()
        };
        let p = part(&s, "gpu-a", &l).unwrap();
        let body = rest_job(&p);
        let job = &body["job"];
        let field = |k: &str| job[k].as_str().unwrap_or("").to_string();
        assert_eq!(
            [
                "name",
                "comment",
                "nodelist",
                "nodes",
                "tasks",
                "open_mode",
                "partition",
                "gres",
                "exclusive",
                "time_limit",
                "current_working_directory"
            ]
            .map(field),
            [
                "gantry-9",
                "gantry:9:tok:0",
                "gpu-a",
                "1",
                "1",
                "append",
                "gpu",
                "gpu:4",
                "exclusive",
                "2",
                "/work"
            ]
        );
        assert!(
            field("standard_output").ends_with("/slurm/gpu-a/job-9.out"),
            "{body}"
        );
        assert!(
            field("standard_error").ends_with("/slurm/gpu-a/job-9.err"),
            "{body}"
        );
        // slurmrestd gives a job no environment of its own: the one sbatch would pass.
        assert_eq!(
            job["environment"]["PATH"].as_str(),
            std::env::var("PATH").ok().as_deref()
        );
        assert_eq!(body["script"].as_str(), Some(p.script.as_str()));
        assert_eq!(p.options.len(), job.as_object().unwrap().len() - 1);
        let _ = std::fs::remove_dir_all(&dir);
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
        let dir = gantry_testkit::scratch::scratch("batch");
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
