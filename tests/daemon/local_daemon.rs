//! Jobs the scheduler places on the local host (`provider = "local"`) run as real processes
//! under the daemon: exit codes decide completed or failed, logs show in the job's detail, a
//! preemption signals and requeues, a cancel kills, and a restarted daemon kills the process
//! groups its predecessor left. Ordinary commands, no GPU.

use crate::support::daemon;
use crate::support::promtool;

use gantry::api::JobState;
use gantry::config::fleet::{parse, FleetConfig};
use gantry::daemon::engine::Submission;
use gantry::daemon::state::{Action, State, StateOptions};
use gantry::scheduler::reclaim::ReclaimAction;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn host() -> FleetConfig {
    parse("local.toml", daemon::LOCAL_FLEET).unwrap()
}

fn dir(name: &str) -> PathBuf {
    gantry_testkit::scratch::scratch(&format!("localdaemon-{name}"))
}

fn options(d: &Path) -> StateOptions {
    StateOptions {
        seed: 1,
        demo_workload: false,
        failures_per_node_hour: 0.0,
        log_dir: Some(d.join("logs")),
        // Samples of this host's GPUs come from the tests (`observe_sample`), not NVML.
        sampling: gantry::backend::agent::Sampling::Off,
        ..StateOptions::default()
    }
}

fn open(d: &Path) -> State {
    State::open(&d.join("state.db"), &host(), &options(d)).unwrap()
}

/// The user running the tests: who the jobs are submitted by, and so run as (a root daemon
/// runs nothing on its host for a submission that names no one).
fn me() -> Option<String> {
    gantry::unix_user::this_user()
}

fn job(run: &str) -> Submission {
    Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: host-job\nresources:\n  cpus: 1\n  memory: 1\ncheckpoint: {{grace: 5s}}\nrun: |\n  {run}\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    }
}

/// Submits the job file `text` (named `file`) for team `a`; its id.
fn submit_file(s: &mut State, file: &str, text: String) -> i64 {
    s.submit(&[Submission {
        file: file.into(),
        text: text.into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    }])
    .remove(0)
    .unwrap()
}

/// Advances the daemon's clock with the wall clock until `done` or 10 s.
fn until(s: &mut State, done: impl Fn(&State) -> bool) {
    let start = Instant::now();
    while !done(s) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        s.advance(0.02).unwrap();
    }
}

/// The fleet's name for this host's node.
fn host_name(s: &State) -> String {
    s.engine().fleet().nodes[0].name.clone()
}

fn state(s: &State, id: i64) -> JobState {
    s.engine().job(id).unwrap().state
}

/// The last lines of every stream of a job's logs, as a job's detail shows them.
fn log_tail(s: &mut State, id: i64) -> Vec<String> {
    let q = gantry::backend::logs::LogQuery {
        tail: 20,
        after: None,
        partial: true,
    };
    let logs = s.job_logs(id).unwrap();
    assert!(logs.none.is_none(), "{:?}", logs.none);
    logs.sources
        .iter()
        .flat_map(|src| src.read(id, &q, Duration::from_secs(1)).unwrap().lines)
        .map(|l| l.to_string())
        .collect()
}

#[test]
fn a_job_on_the_host_runs_logs_and_its_exit_code_decides() {
    let d = dir("exit");
    let mut s = open(&d);
    let ok = s
        .submit(&[job("echo hello from gantry; exit 0")])
        .remove(0)
        .unwrap();
    let bad = s.submit(&[job("echo oops >&2; exit 3")]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| {
        state(s, ok).is_final() && state(s, bad).is_final()
    });
    assert_eq!(state(&s, ok), JobState::Completed);
    assert_eq!(state(&s, bad), JobState::Failed);
    assert_eq!(
        log_tail(&mut s, ok),
        vec!["out: hello from gantry".to_string()]
    );
    assert_eq!(log_tail(&mut s, bad), vec!["err: oops".to_string()]);
    let said = format!("job {bad} exited with code 3 on {}", host_name(&s));
    assert!(
        s.snapshot().events.iter().any(|e| e.contains(&said)),
        "{:?}",
        s.snapshot().events
    );
}

/// A job with no `run` on a fleet of real pools is refused at submit, saying what to add and
/// which real pool it may land on — not admitted, then failed at its start. Submitted with
/// others in one batch, only it is refused.
#[test]
fn a_job_with_nothing_to_run_is_refused_at_submit_on_a_real_pool() {
    let d = dir("norun");
    let mut s = open(&d);
    let norun = Submission {
        file: "idle.yaml".into(),
        text: b"name: idle\nresources:\n  cpus: 1\n".to_vec(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    };
    let answers = s.submit(&[job("exit 0"), norun.clone()]);
    assert!(answers[0].is_ok(), "{:?}", answers[0]);
    let e = answers[1].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("idle.yaml: the job has no `run`")
            && e.contains("a real one")
            && e.contains("add `run: COMMAND`"),
        "{e}"
    );
    // A dry run (`submit --dry-run`, `serve up`'s probe) says the same.
    let e = s.preview(&norun).unwrap_err().to_string();
    assert!(e.contains("has no `run`"), "{e}");
    assert_eq!(s.engine().jobs().count(), 1);
}

/// A job that waits for room says which pool has none and why, in the host's terms: here a
/// node whose CPUs another job holds ("needs 1 node(s); 0 have room now" alone said nothing).
#[test]
fn a_waiting_job_names_the_pool_without_room_and_why() {
    let d = dir("why-pending");
    let mut s = open(&d);
    let big = |name: &str| Submission {
        file: format!("{name}.yaml"),
        text: format!("name: {name}\nresources:\n  cpus: 6\n  memory: 1\nrun: sleep 30\n")
            .into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    };
    let first = s.submit(&[big("first")]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| state(s, first) == JobState::Running);
    let second = s.submit(&[big("second")]).remove(0).unwrap();
    s.tick().unwrap();
    let why = s.job_detail(second).unwrap().reason.unwrap_or_default();
    assert!(
        why.contains("0 have room now")
            && why.contains("pool local/here/here/host: 1 short of CPUs (asks 6, 2 of 8 free)"),
        "{why}"
    );
    s.act(first, Action::Cancel, "test").unwrap();
}

#[test]
fn preempt_signals_the_process_and_requeues_cancel_kills() {
    let d = dir("stop");
    let mut s = open(&d);
    let marker = d.join("checkpointed");
    let id = s
        .submit(&[job(&format!(
            "trap 'touch {}; exit 0' TERM; while true; do sleep 0.1; done",
            marker.display()
        ))])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    until(&mut s, |s| state(s, id) == JobState::Running);
    std::thread::sleep(Duration::from_millis(200)); // let the trap be set
    s.act(id, Action::Preempt, "test").unwrap();
    until(&mut s, |s| state(s, id) != JobState::Preempting);
    assert!(marker.exists(), "the job got SIGTERM and checkpointed");
    // Requeued, then started again by the next cycle.
    assert!(matches!(
        state(&s, id),
        JobState::Pending | JobState::Running
    ));
    s.tick().unwrap();
    until(&mut s, |s| state(s, id) == JobState::Running);
    s.act(id, Action::Cancel, "test").unwrap();
    assert_eq!(state(&s, id), JobState::Cancelled);
}

/// A Slurm batch script submitted as it is runs as sbatch would run it: under bash (its
/// `[[`, `pipefail`), with its `--export` variables, and its `--signal` is the checkpoint
/// signal a preemption sends; a Python script runs under its own interpreter.
#[test]
fn a_slurm_batch_script_runs_as_sbatch_would_run_it() {
    let d = dir("sbatch");
    let mut s = open(&d);
    let marker = d.join("checkpointed");
    let script = format!(
        "#!/bin/bash\n#SBATCH --job-name=batch -c 1 --mem=100M -t 5\n#SBATCH --signal=B:USR1@5\n#SBATCH --export=GREETING=hello\n#SBATCH -p gpu -o slurm-%j.out\nset -euo pipefail\ntrap 'touch {}; exit 0' USR1\n[[ -n \"$GREETING\" ]] && echo \"$GREETING from bash $BASH_VERSINFO\"\nwhile true; do sleep 0.1; done\n",
        marker.display()
    );
    let sub = |file: &str, text: &str| Submission {
        file: file.into(),
        text: text.as_bytes().to_vec(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    };
    let id = s.submit(&[sub("train.sbatch", &script)]).remove(0).unwrap();
    let py = s
        .submit(&[sub(
            "eval.sh",
            "#!/usr/bin/env python3\n#SBATCH -c 1\nimport sys\nprint('python', sys.version_info[0])\n",
        )])
        .remove(0)
        .unwrap();
    let j = s.engine().job(id).unwrap();
    assert_eq!(j.name.as_deref(), Some("batch"));
    s.tick().unwrap();
    until(&mut s, |s| {
        state(s, id) == JobState::Running && state(s, py).is_final()
    });
    let t0 = Instant::now();
    while log_tail(&mut s, id).is_empty() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        s.advance(0.02).unwrap();
    }
    assert_eq!(
        log_tail(&mut s, id),
        vec!["out: hello from bash 5".to_string()]
    );
    let has_python = std::path::Path::new("/usr/bin/python3").exists();
    if has_python {
        assert_eq!(state(&s, py), JobState::Completed);
        assert_eq!(log_tail(&mut s, py), vec!["out: python 3".to_string()]);
    }
    std::thread::sleep(Duration::from_millis(200)); // let the trap be set
    s.act(id, Action::Preempt, "test").unwrap();
    until(&mut s, |s| state(s, id) != JobState::Preempting);
    assert!(marker.exists(), "the script got SIGUSR1 and checkpointed");
    s.act(id, Action::Cancel, "test").unwrap();
}

/// Starts `run` under a daemon that is then dropped without stopping it (as if the daemon
/// were killed); returns the job id and its start time.
fn start_and_abandon(d: &Path, run: &str) -> (i64, f64) {
    let mut s = open(d);
    let id = s.submit(&[job(run)]).remove(0).unwrap();
    s.tick().unwrap();
    let started = s.engine().job(id).unwrap().started_at.unwrap();
    (id, started)
}

#[test]
fn a_restarted_daemon_re_adopts_a_job_still_running_and_sees_it_end() {
    let d = dir("adopt");
    let go = d.join("go");
    let (id, started) = start_and_abandon(
        &d,
        &format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo finishing; exit 4",
            go.display()
        ),
    );
    std::thread::sleep(Duration::from_millis(100));
    let mut s = open(&d);
    let j = s.engine().job(id).unwrap();
    assert_eq!(j.state, JobState::Running, "still running, not requeued");
    assert_eq!(j.started_at, Some(started), "the same run, still billing");
    assert!(j.placement.is_some());
    let events = s.events(None, 100).unwrap();
    assert!(
        events.iter().any(|e| e.detail.contains("re-adopted on")),
        "{events:?}"
    );
    std::fs::write(&go, "").unwrap();
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Failed, "its exit code 4 decides");
    let said = format!("job {id} exited with code 4 on {}", host_name(&s));
    assert!(s.snapshot().events.iter().any(|e| e.contains(&said)));
    assert_eq!(log_tail(&mut s, id), vec!["out: finishing".to_string()]);
}

/// A daemon of the previous version journaled this host's runs as process groups (the
/// `local_runs` table); the first daemon of this one hands them to this host's agent, which
/// re-adopts them like any host's runs.
#[test]
fn runs_journaled_by_the_previous_version_are_handed_over_and_re_adopted() {
    let d = dir("migrate");
    let go = d.join("go");
    let (id, started) = start_and_abandon(
        &d,
        &format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo handed over; exit 0",
            go.display()
        ),
    );
    // Rewrite what the daemon left as the previous version would have left it.
    std::thread::sleep(Duration::from_millis(200));
    let pgid: u32 = {
        let runs = std::fs::read_dir(d.join("runs")).unwrap();
        let file = runs.flatten().next().unwrap().path();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        std::fs::remove_file(file).unwrap();
        v["pgid"].as_u64().unwrap() as u32
    };
    {
        let mut store = gantry::daemon::journal::Store::open(&d.join("state.db")).unwrap();
        let run = store.remote_runs().unwrap().remove(0);
        store.remove_remote_run(id).unwrap();
        store
            .add_local_run(&gantry::daemon::journal::LocalRunRecord {
                job: id,
                pgid,
                placement: Some(run.placement),
                started_at: Some(run.started_at),
                token: Some(run.token),
            })
            .unwrap();
    }
    let mut s = open(&d);
    let j = s.engine().job(id).unwrap();
    assert_eq!(j.state, JobState::Running, "re-adopted, not requeued");
    assert_eq!(j.started_at, Some(started));
    std::fs::write(&go, "").unwrap();
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Completed);
    assert_eq!(log_tail(&mut s, id), vec!["out: handed over".to_string()]);
    // The daemon's state holds its journal alone while it is open.
    drop(s);
    let left = gantry::daemon::journal::Store::open(&d.join("state.db"))
        .unwrap()
        .local_runs()
        .unwrap();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_job_that_ended_while_no_daemon_watched_keeps_its_exit_status() {
    let d = dir("away");
    let (id, _) = start_and_abandon(&d, "echo done");
    let exit = d.join("logs").join(format!("job-{id}.exit"));
    let t = Instant::now();
    while !exit.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut s = open(&d);
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Completed);
    assert_eq!(
        log_tail(&mut s, id),
        vec!["out: done".to_string()],
        "recorded from the status it left, not run again"
    );
}

#[test]
fn a_restarted_daemon_kills_a_group_it_cannot_re_adopt_and_requeues_its_job() {
    let d = dir("restart");
    let pid_file = d.join("pid");
    let (id, _) = start_and_abandon(&d, &format!("echo $$ > {}; sleep 60", pid_file.display()));
    let t = Instant::now();
    while !pid_file.exists() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // SAFETY: signal 0 only checks that the process exists.
    assert_eq!(
        unsafe { libc::kill(pid, 0) },
        0,
        "still running before the restart"
    );
    // The host shrank while the daemon was down: the job's placement no longer fits.
    let mut cfg = host();
    cfg.pools[0].cpus = 0;
    let mut s = State::open(&d.join("state.db"), &cfg, &options(&d)).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // It may be a zombie of this test process until reaped; either way it is not running.
    let gone = unsafe { libc::kill(pid, 0) } != 0
        || std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|st| st.split_whitespace().nth(2) == Some("Z"));
    assert!(gone, "the orphaned process group was killed");
    let events = s.events(None, 100).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.detail.contains("stopped a run of it left on")),
        "{events:?}"
    );
    assert!(!state(&s, id).is_final(), "requeued, not lost");
    s.tick().unwrap();
    assert_eq!(state(&s, id), JobState::Pending);
}

// ---- This host's GPUs as NVML reports them. The samples below are test data standing in for
// the sampler thread (no GPU in CI); `scripts/gpu-check.sh` runs the real thing on a GPU host.

use gantry::backend::local::nvml::{Discovery, GpuProcess, GpuSample};

fn gpu_host() -> FleetConfig {
    let mut cfg = host();
    let p = &mut cfg.pools[0];
    p.gpu = Some("H100".into());
    p.gpus_per_node = 2;
    p.vram_gb = 80;
    cfg
}

fn open_gpu(d: &Path) -> State {
    State::open(&d.join("state.db"), &gpu_host(), &options(d)).unwrap()
}

fn gpu_job(run: &str) -> Submission {
    Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: gpu-job\nresources:\n  cpus: 1\n  memory: 1\n  accelerators: H100:1\ncheckpoint: {{grace: 5s}}\nrun: |\n  {run}\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    }
}

/// A sample of the two GPUs: utilization and the processes on each.
fn nvml(gpus: [(u32, Vec<GpuProcess>); 2]) -> Discovery {
    Discovery::Available {
        driver: "test".into(),
        gpus: gpus
            .into_iter()
            .enumerate()
            .map(|(i, (util, processes))| GpuSample {
                index: i as u32,
                uuid: format!("GPU-test-{i}"),
                name: "NVIDIA H100 80GB HBM3".into(),
                memory_total_mib: 81_559,
                memory_used_mib: processes.iter().filter_map(|p| p.used_mib).sum(),
                util_gpu_pct: util,
                power_w: Some(100.0 + f64::from(util) * 5.0),
                temperature_c: Some(40),
                processes,
                ..GpuSample::default()
            })
            .collect(),
    }
}

fn process(pid: u32, pgid: Option<u32>, sm: u32) -> GpuProcess {
    GpuProcess {
        pid,
        pgid,
        used_mib: Some(2048),
        sm_util_pct: Some(sm),
    }
}

#[test]
fn gpus_wait_for_nvml_then_jobs_get_their_uuids_and_foreign_gpus_are_never_allocated() {
    let d = dir("foreign");
    let mut s = open_gpu(&d);
    let first = s
        .submit(&[gpu_job("echo $CUDA_VISIBLE_DEVICES; sleep 30")])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    assert_eq!(
        state(&s, first),
        JobState::Pending,
        "no GPU before NVML's first sample"
    );
    // GPU 1 runs a process gantry did not start.
    let foreign = vec![process(4_000_000, None, 80)];
    let host = host_name(&s);
    s.observe_sample(&host, nvml([(0, vec![]), (80, foreign.clone())]))
        .unwrap();
    s.tick().unwrap();
    let log = d.join("logs").join(format!("job-{first}.out"));
    // Its output may come before the daemon has heard that it started.
    until(&mut s, |s| {
        s.process_group(first).is_some()
            && std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty())
    });
    assert_eq!(
        log_tail(&mut s, first),
        vec!["out: GPU-test-0".to_string()],
        "the job sees the UUID of the GPU it was granted"
    );
    let second = s
        .submit(&[gpu_job("echo $CUDA_VISIBLE_DEVICES; sleep 30")])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    assert_eq!(state(&s, second), JobState::Pending, "GPU 1 is foreign");
    let events = s.events(None, 100).unwrap();
    assert!(
        events.iter().any(|e| e.detail.contains(&format!("GPU 1 on {host} is busy with processes gantry did not start (pid 4000000, 2048 MiB); not allocated"))),
        "{events:?}"
    );
    let pool = s.pool_detail(0).unwrap();
    assert!(!pool.simulated, "the host's telemetry is measured");
    assert_eq!(pool.nodes[0].gpus[1].foreign_pids, vec![4_000_000]);
    assert_eq!(pool.nodes[0].gpus[1].util_pct, 80.0);
    assert_eq!(pool.nodes[0].gpus[1].power_w, 500.0);
    let status = s.snapshot().host.clone().unwrap();
    assert_eq!(
        (status.nvml, status.gpus, status.foreign_gpus.clone()),
        (true, 2, vec![1])
    );
    // The foreign process exits: GPU 1 is given to the waiting job.
    let pg = s.process_group(first).unwrap();
    s.observe_sample(
        &host,
        nvml([(90, vec![process(pg, Some(pg), 90)]), (0, vec![])]),
    )
    .unwrap();
    s.tick().unwrap();
    let log = d.join("logs").join(format!("job-{second}.out"));
    until(&mut s, |_| {
        std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty())
    });
    assert_eq!(
        log_tail(&mut s, second),
        vec!["out: GPU-test-1".to_string()]
    );
    for id in [first, second] {
        s.act(id, Action::Cancel, "test").unwrap();
    }
}

#[test]
fn a_local_job_idle_on_its_gpu_is_flagged_for_reclaim_from_measured_utilization() {
    let d = dir("idle");
    let mut s = open_gpu(&d);
    let host = host_name(&s);
    s.observe_sample(&host, nvml([(0, vec![]), (0, vec![])]))
        .unwrap();
    let idle = s.submit(&[gpu_job("sleep 60")]).remove(0).unwrap();
    let busy = s.submit(&[gpu_job("sleep 60")]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| {
        s.process_group(idle).is_some() && s.process_group(busy).is_some()
    });
    let (pi, pb) = (
        s.process_group(idle).unwrap(),
        s.process_group(busy).unwrap(),
    );
    let gpu_of = |s: &State, id: i64| {
        s.engine()
            .job(id)
            .unwrap()
            .placement
            .as_ref()
            .unwrap()
            .nodes[0]
            .gpus[0]
            .gpu
    };
    let (gi, gb) = (gpu_of(&s, idle), gpu_of(&s, busy));
    // Twenty minutes of samples, one a minute: the idle job's process holds memory and
    // computes nothing; the busy one computes.
    for _ in 0..20 {
        s.advance(60.0).unwrap();
        let mut gpus = [(0, Vec::new()), (0, Vec::new())];
        gpus[usize::from(gi)] = (0, vec![process(pi, Some(pi), 0)]);
        gpus[usize::from(gb)] = (85, vec![process(pb, Some(pb), 85)]);
        s.observe_sample(&host, nvml(gpus)).unwrap();
    }
    let plan = s.reclaim_plan();
    let jobs: Vec<u64> = plan.items.iter().map(|i| i.job).collect();
    assert_eq!(jobs, vec![idle as u64], "{plan:?}");
    for id in [idle, busy] {
        s.act(id, Action::Cancel, "test").unwrap();
    }
}

#[test]
fn without_nvml_the_host_says_so_once_and_gpu_jobs_get_the_declared_gpus() {
    let d = dir("nonvml");
    let mut s = open_gpu(&d);
    let host = host_name(&s);
    let gone = || Discovery::Unavailable {
        reason: "NVML is not available (test)".into(),
    };
    s.observe_sample(&host, gone()).unwrap();
    s.observe_sample(&host, gone()).unwrap();
    let id = s
        .submit(&[gpu_job("echo $CUDA_VISIBLE_DEVICES")])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Completed);
    assert_eq!(
        log_tail(&mut s, id),
        vec!["out: 0".to_string()],
        "the declared GPU, by index"
    );
    let events = s.events(None, 100).unwrap();
    let said = events
        .iter()
        .filter(|e| e.detail.starts_with("NVML is not available (test)"))
        .count();
    assert_eq!(said, 1, "{events:?}");
    let pool = s.pool_detail(0).unwrap();
    assert!(pool.nodes[0].gpus.iter().all(|g| g.unmeasured));
}

#[test]
fn a_mig_job_on_the_host_gets_a_mig_instance_of_its_size() {
    use gantry::backend::local::nvml::MigInstance;
    let d = dir("mig");
    let mut s = open_gpu(&d);
    let Discovery::Available { driver, mut gpus } = nvml([(0, vec![]), (0, vec![])]) else {
        unreachable!()
    };
    // GPU 1 is in MIG mode with two 3g.40gb instances (as `nvidia-smi mig -cgi 9,9 -C` makes).
    gpus[1].mig_enabled = Some(true);
    gpus[1].mig_instances = ["MIG-aaa", "MIG-bbb"]
        .iter()
        .zip([1, 2])
        .map(|(u, gi)| MigInstance {
            uuid: u.to_string(),
            memory_total_mib: 40_320,
            memory_used_mib: 0,
            gpu_instance_id: Some(gi),
        })
        .collect();
    gpus[0].mig_enabled = Some(false);
    let host = host_name(&s);
    s.observe_sample(&host, Discovery::Available { driver, gpus })
        .unwrap();
    let job = |n: &str| {
        Submission {
        file: "mig.yaml".into(),
        text: format!(
            "name: {n}\nresources:\n  cpus: 1\n  memory: 1\nmig: 3g.40gb\nrun: echo $CUDA_VISIBLE_DEVICES; sleep 30\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    }
    };
    let a = s.submit(&[job("a")]).remove(0).unwrap();
    let b = s.submit(&[job("b")]).remove(0).unwrap();
    s.tick().unwrap();
    let out = |id: i64| d.join("logs").join(format!("job-{id}.out"));
    until(&mut s, |_| {
        [a, b]
            .iter()
            .all(|&id| std::fs::read_to_string(out(id)).is_ok_and(|t| !t.is_empty()))
    });
    let mut seen: Vec<String> = [a, b]
        .iter()
        .map(|&id| std::fs::read_to_string(out(id)).unwrap().trim().to_string())
        .collect();
    seen.sort();
    assert_eq!(seen, vec!["MIG-aaa", "MIG-bbb"], "one instance each");
    // Each job's instance joins DCGM's per-instance series by GPU_I_ID (before: always "").
    let text = metrics_of(&s);
    for (uuid, gi) in [("MIG-aaa", 1), ("MIG-bbb", 2)] {
        assert!(
            text.lines().any(|l| l.starts_with("gantry_job_gpu_info")
                && l.contains(&format!("GPU_I_ID=\"{gi}\",mig_uuid=\"{uuid}\""))),
            "{text}"
        );
    }
    for id in [a, b] {
        s.act(id, Action::Cancel, "test").unwrap();
    }
}

#[test]
fn a_restart_never_kills_a_process_group_that_is_not_provably_the_jobs() {
    // Before: the restart SIGKILLed the group of every local run it could not re-adopt,
    // including a group id that now belonged to someone else (pid reuse after a reboot).
    let d = dir("stranger");
    drop(open(&d));
    let mut stranger = std::process::Command::new("sleep")
        .arg("300")
        .process_group(0)
        .spawn()
        .unwrap();
    let pgid = stranger.id();
    {
        let mut store = gantry::daemon::journal::Store::open(&d.join("state.db")).unwrap();
        for (job, token) in [(41, Some("gty_not-this-one".to_string())), (42, None)] {
            store
                .add_local_run(&gantry::daemon::journal::LocalRunRecord {
                    job,
                    pgid,
                    placement: None,
                    started_at: Some(0.0),
                    token,
                })
                .unwrap();
        }
    }
    let mut s = open(&d);
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        stranger.try_wait().unwrap().is_none(),
        "the stranger's process was killed"
    );
    let events = s.events(None, 100).unwrap();
    assert!(
        events.iter().any(|e| e.detail.contains("left alone")),
        "{events:?}"
    );
    let _ = stranger.kill();
    let _ = stranger.wait();
}

/// An SSH host's agent sends the same NVML samples: measured utilization and foreign processes
/// on that node, held out of the scheduler like this host's; a host with no sample is shown
/// as not measured, never modelled. (The hosts are unreachable here: the samples are fed to
/// the state as the SSH backend would hand them over.)
#[test]
fn an_ssh_hosts_samples_are_measured_telemetry_and_hosts_without_them_are_not_made_up() {
    let d = dir("ssh-samples");
    let cfg = parse(
        "ssh.toml",
        r#"
[[teams]]
name = "a"

[[pools]]
provider = "ssh"
region = "onprem"
zone = "rack"
name = "lab"
instance_type = "server"
gpu = "H100"
gpus_per_node = 2
vram_gb = 80
cpus = 8
memory_gb = 16
capacity = "reserved"
price_per_hour = 0.0
hosts = ["127.0.0.1:1", "127.0.0.1:2"]
"#,
    )
    .unwrap();
    let mut s = State::open(&d.join("state.db"), &cfg, &options(&d)).unwrap();
    let pool = s.pool_detail(0).unwrap();
    assert!(
        pool.nodes
            .iter()
            .all(|n| n.gpus.iter().all(|g| g.unmeasured && g.power_w == 0.0)),
        "no sample yet: nothing is modelled for a real host"
    );
    let found = nvml([(87, vec![process(4242, Some(4242), 80)]), (3, vec![])]);
    s.observe_node(0, found, &std::collections::HashMap::new())
        .unwrap();
    let pool = s.pool_detail(0).unwrap();
    let g0 = &pool.nodes[0].gpus[0];
    assert_eq!(
        (g0.util_pct, g0.foreign_pids.clone(), g0.unmeasured),
        (87.0, vec![4242], false)
    );
    assert!(pool.nodes[1].gpus.iter().all(|g| g.unmeasured));
    assert!(
        events(&mut s).iter().any(|e| e.contains(
            "GPU 0 on 127.0.0.1:1 is busy with processes gantry did not start (pid 4242"
        )),
        "{:?}",
        events(&mut s)
    );
    // The foreign process exits: the GPU is free again.
    s.observe_node(0, nvml([(0, vec![]), (0, vec![])]), &Default::default())
        .unwrap();
    assert!(events(&mut s)
        .iter()
        .any(|e| e.contains("GPU 0 on 127.0.0.1:1: the foreign processes exited")));
}

fn events(s: &mut State) -> Vec<String> {
    s.events(None, 100)
        .unwrap()
        .into_iter()
        .map(|e| e.detail)
        .collect()
}

/// The embedded console's client reads a local job's logs as the API does: the detail's tail
/// and the log view's lines (both read outside the daemon's actor).
#[test]
fn the_in_process_client_shows_a_local_jobs_logs() {
    use gantry::api::Client;
    let d = dir("inproc-logs");
    let (handle, actor) = gantry::daemon::actor::spawn(
        open(&d),
        gantry::daemon::actor::Clock {
            speed: 1.0,
            step: Duration::from_millis(50),
        },
    )
    .unwrap();
    let mut c = gantry::daemon::embedded::LocalClient::new(handle.clone());
    let id = c
        .submit("name: talk\nteam: a\nresources:\n  cpus: 1\n  memory: 1\nrun: echo hi; echo oops >&2\n")
        .unwrap();
    let t0 = Instant::now();
    while c.job(id).map(|j| j.state).ok() != Some(gantry::api::JobState::Completed) {
        assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", c.job(id));
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(c.job(id).unwrap().log_tail, ["out: hi", "err: oops"]);
    let tail = gantry::api::LogsFrom::Tail(10);
    let logs = c.logs(id, None, &tail).unwrap();
    assert!(logs.is_final);
    let texts: Vec<String> = logs.nodes[0].lines.iter().map(|l| l.text.clone()).collect();
    assert_eq!(texts, ["hi", "oops"]);
    // Following from the answer's cursors: nothing new, nothing twice.
    let after = gantry::api::LogsFrom::After {
        cursors: logs.cursors(),
        partial: true,
    };
    assert!(c.logs(id, None, &after).unwrap().nodes[0].lines.is_empty());
    // The embedded client's refusals are typed as the HTTP client's are: the daemon's status
    // and code, so the CLI's exit codes and the console's messages are the same either way.
    match c.logs(id, Some(3), &tail).unwrap_err() {
        gantry::api::ClientError::Api { status, error, .. } => {
            assert_eq!(status, 400, "{error}");
            assert!(error.contains("expected a rank"), "{error}");
        }
        other => panic!("not the daemon's answer: {other:?}"),
    }
    match c.job(id + 100).unwrap_err() {
        e @ gantry::api::ClientError::Api { .. } => assert_eq!(e.exit_code(), 3, "{e}"),
        other => panic!("not the daemon's answer: {other:?}"),
    }
    handle.shutdown();
    drop(c);
    drop(handle);
    let _ = actor.join();
}

#[test]
fn a_job_reclaimed_by_cancel_has_its_processes_stopped() {
    // Bug fixed: applying a reclaim plan's `cancel` marked the job cancelled and freed its GPU
    // while its processes kept running on it.
    let d = dir("reclaim-cancel");
    let mut s = open_gpu(&d);
    let host = host_name(&s);
    s.observe_sample(&host, nvml([(0, vec![]), (0, vec![])]))
        .unwrap();
    let mut sub = gpu_job("sleep 120");
    let text = String::from_utf8(sub.text.clone()).unwrap();
    // No checkpoint, not interactive: reclaim cancels it.
    sub.text = text.replace("checkpoint: {grace: 5s}\n", "").into_bytes();
    let id = s.submit(&[sub]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| s.process_group(id).is_some());
    let pg = s.process_group(id).unwrap() as i32;
    let g = s
        .engine()
        .job(id)
        .unwrap()
        .placement
        .as_ref()
        .unwrap()
        .nodes[0]
        .gpus[0]
        .gpu;
    for _ in 0..20 {
        s.advance(60.0).unwrap();
        let mut gpus = [(0, Vec::new()), (0, Vec::new())];
        gpus[usize::from(g)] = (0, vec![process(pg as u32, Some(pg as u32), 0)]);
        s.observe_sample(&host, nvml(gpus)).unwrap();
    }
    let shown = s.show_reclaim();
    assert_eq!(shown.items.len(), 1, "{shown:?}");
    assert_eq!(shown.items[0].action, ReclaimAction::Cancel);
    s.apply_reclaim("test", &shown.id).unwrap();
    assert_eq!(state(&s, id), JobState::Cancelled);
    // SAFETY: signal 0 only checks that the process group exists.
    let alive = || unsafe { libc::kill(-pg, 0) } == 0;
    let t = Instant::now();
    while alive() && t.elapsed() < Duration::from_secs(10) {
        s.advance(0.02).unwrap();
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!alive(), "the cancelled job's process group {pg} is gone");
}

/// Two SSH hosts nobody answers on (their hellos come from the test, standing in for NVML).
fn auto_ssh_fleet() -> FleetConfig {
    parse(
        "auto.toml",
        r#"
[[teams]]
name = "a"
guaranteed = 8

[[pools]]
provider = "ssh"
region = "lab"
zone = "lab"
name = "lab"
instance_type = "server"
hosts = ["127.0.0.1:1", "127.0.0.2:1"]
gpu = "auto"
cpus = 8
memory_gb = 16
capacity = "reserved"
price_per_hour = 2.0
lost_after = "1h"
"#,
    )
    .unwrap()
}

fn hello(gpus: usize, name: &str) -> gantry::backend::HostInfo {
    gantry::backend::HostInfo {
        hostname: "gpu-box".into(),
        arch: std::env::consts::ARCH.into(),
        version: env!("CARGO_PKG_VERSION").into(),
        gpus: (0..gpus)
            .map(|i| gantry::backend::HostGpu {
                index: i as u32,
                name: name.into(),
                memory_mib: 81_559,
                uuid: format!("GPU-{i}"),
            })
            .collect(),
        nvml: None,
        driver: Some("550.54".into()),
        runs: Vec::new(),
        addresses: Vec::new(),
    }
}

#[test]
fn an_auto_ssh_pool_is_built_with_the_gpus_its_hosts_nvml_finds() {
    let d = dir("auto-ssh");
    let cfg = auto_ssh_fleet();
    let mut s = State::open(&d.join("state.db"), &cfg, &options(&d)).unwrap();
    let gpus = |s: &State| -> Vec<usize> {
        s.engine()
            .fleet()
            .nodes
            .iter()
            .map(|n| n.gpus.len())
            .collect()
    };
    let names: Vec<String> = s
        .engine()
        .fleet()
        .nodes
        .iter()
        .map(|n| n.name.clone())
        .collect();
    assert_eq!(gpus(&s), [0, 0], "CPU-only until a host says");
    // A host without NVML leaves it so.
    let mut none = hello(0, "");
    none.nvml = Some("NVML is not available (test)".into());
    s.observe_hello(&names[1], none).unwrap();
    assert!(!s.wants_reopen());
    // The first to find GPUs builds the pool.
    s.observe_hello(&names[0], hello(2, "NVIDIA H100 80GB HBM3"))
        .unwrap();
    assert!(s.wants_reopen());
    let mut s = s.reopen_rediscovered().unwrap();
    assert_eq!(gpus(&s), [2, 2]);
    let fleet = s.engine().fleet();
    let model = fleet.model(fleet.nodes[0].model.unwrap());
    assert_eq!((model.name.as_str(), model.vram_mib / 1024), ("H100", 80));
    let events = s.events(None, 20).unwrap();
    assert!(
        events
            .iter()
            .any(|e| e.detail.contains("NVML on") && e.detail.contains("finds 2 × H100 (80 GB)")),
        "{events:?}"
    );
    // Said again on reconnect: nothing to do. Another host with other GPUs is said only.
    s.observe_hello(&names[0], hello(2, "NVIDIA H100 80GB HBM3"))
        .unwrap();
    s.observe_hello(&names[1], hello(4, "NVIDIA A100-SXM4-80GB"))
        .unwrap();
    assert!(!s.wants_reopen());
    let events = s.events(None, 20).unwrap();
    assert!(
        events.iter().any(|e| e
            .detail
            .contains("give hosts with other GPUs a pool of their own")),
        "{events:?}"
    );
    // The host that built it finds more (a GPU added, a driver upgraded): rebuilt again.
    s.observe_hello(&names[0], hello(4, "NVIDIA H100 80GB HBM3"))
        .unwrap();
    assert!(s.wants_reopen());
    let s = s.reopen_rediscovered().unwrap();
    assert_eq!(gpus(&s), [4, 4]);
}

#[test]
fn metrics_put_each_measured_gpu_and_each_jobs_gpu_under_dcgms_labels() {
    let d = dir("metrics");
    let mut s = open_gpu(&d);
    let host = host_name(&s);
    s.observe_sample(&host, nvml([(0, vec![]), (0, vec![])]))
        .unwrap();
    let id = s.submit(&[gpu_job("sleep 30")]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| s.process_group(id).is_some());
    let pg = s.process_group(id).unwrap();
    let g = s
        .engine()
        .job(id)
        .unwrap()
        .placement
        .as_ref()
        .unwrap()
        .nodes[0]
        .gpus[0]
        .gpu;
    let mut gpus = [(0, Vec::new()), (0, Vec::new())];
    gpus[usize::from(g)] = (87, vec![process(pg, Some(pg), 87)]);
    s.observe_sample(&host, nvml(gpus)).unwrap();
    let text = metrics_of(&s);
    // This host's name as its agent says it (DCGM's Hostname).
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let uuid = format!("GPU-test-{g}");
    let util = format!(
        "gantry_gpu_utilization_ratio{{gpu=\"{g}\",UUID=\"{uuid}\",device=\"nvidia{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{hostname}\","
    );
    assert!(text.contains(&util), "{util}\n{text}");
    assert!(
        text.contains("gantry_gpu_memory_total_bytes{gpu=\"0\""),
        "{text}"
    );
    let info = format!(
        "gantry_job_gpu_info{{job=\"{id}\",team=\"a\",gpu=\"{g}\",UUID=\"{uuid}\",Hostname=\"{hostname}\",GPU_I_ID=\"\",mig_uuid=\"\"}} 1"
    );
    assert!(text.contains(&info), "{info}\n{text}");
    promtool::check(
        &text,
        &[
            "gantry_gpu_utilization_ratio",
            "gantry_gpu_memory_used_bytes",
            "gantry_gpu_memory_total_bytes",
            "gantry_gpu_power_watts",
            "gantry_gpu_temperature_celsius",
        ],
    );
    s.act(id, Action::Cancel, "test").unwrap();
}

/// `secrets` reach the job's environment as `envs` do; an `envs` or `secrets` value the file
/// leaves empty is refused at submit with how to give it (SkyPilot refuses to launch too).
#[test]
fn secrets_reach_the_job_and_empty_values_are_refused() {
    let d = dir("secrets");
    let mut s = open(&d);
    let with = |extra: &str| {
        Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: t\nresources:\n  cpus: 1\n  memory: 1\n{extra}run: echo \"$HF_TOKEN $WANDB_API_KEY\"\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        user: me(),
        ..Submission::default()
    }
    };
    let id = s
        .submit(&[with(
            "envs:\n  HF_TOKEN: hf_abc\nsecrets:\n  WANDB_API_KEY: k-123\n",
        )])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Completed);
    assert_eq!(log_tail(&mut s, id), vec!["out: hf_abc k-123".to_string()]);
    let refused = s
        .submit(&[with("envs:\n  HF_TOKEN:\nsecrets:\n  WANDB_API_KEY:\n")])
        .remove(0)
        .unwrap_err()
        .to_string();
    assert!(
        refused.contains("envs.HF_TOKEN has no value in the file")
            && refused.contains("--env HF_TOKEN=")
            && refused.contains("also without one: secrets.WANDB_API_KEY"),
        "{refused}"
    );
}

/// `/metrics` as the daemon would serve it for `s` now.
fn metrics_of(s: &State) -> String {
    let published = gantry::daemon::actor::publication(s, &Default::default(), 0);
    gantry::daemon::api::metrics::render_metrics(&published)
}

/// SkyPilot's `workdir: {url, ref}`: the repository is cloned at its ref on the node, setup and
/// run start in the clone (setup's `cd` does not carry over, the clone does), and a repository
/// that cannot be cloned fails the job saying so.
#[test]
fn a_git_workdir_is_cloned_at_its_ref_and_setup_and_run_start_in_it() {
    let d = dir("gitwd");
    let repo = d.join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "init.defaultBranch=main",
            ])
            .args(args)
            .current_dir(&repo)
            .output()
            .expect("git is installed");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    git(&["init", "--quiet"]);
    std::fs::write(repo.join("version.txt"), "one\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "--quiet", "-m", "one"]);
    git(&["tag", "v1"]);
    std::fs::write(repo.join("version.txt"), "two\n").unwrap();
    git(&["commit", "--quiet", "-am", "two"]);
    let mut s = open(&d);
    let submit = |s: &mut State, url: &str| {
        let text = format!(
            "name: git\nworkdir:\n  url: {url}\n  ref: v1\nresources:\n  cpus: 1\nsetup: |\n  cd /\nrun: |\n  echo \"run in $(basename $(dirname $PWD))/$(basename $PWD): $(cat version.txt)\"\n"
        );
        submit_file(s, "git.yaml", text)
    };
    let ok = submit(&mut s, &format!("file://{}", repo.display()));
    let bad = submit(&mut s, &format!("file://{}/missing", d.display()));
    s.tick().unwrap();
    until(&mut s, |s| {
        state(s, ok).is_final() && state(s, bad).is_final()
    });
    assert_eq!(
        state(&s, ok),
        JobState::Completed,
        "{:?}",
        log_tail(&mut s, ok)
    );
    let host = std::process::Command::new("hostname").output().unwrap();
    let host = String::from_utf8_lossy(&host.stdout).trim().to_string();
    assert_eq!(
        log_tail(&mut s, ok),
        vec![format!("out: run in {host}/job-{ok}: one")],
        "the tag's file, read in the clone"
    );
    assert_eq!(state(&s, bad), JobState::Failed);
    assert!(
        log_tail(&mut s, bad)
            .iter()
            .any(|l| l.contains("gantry: cannot clone the workdir")),
        "{:?}",
        log_tail(&mut s, bad)
    );
}

/// A dstack task runs its `commands` as one bash script that stops at the first that fails,
/// as dstack runs them (real processes on the host).
#[test]
fn a_dstack_tasks_commands_run_in_bash_and_stop_at_the_first_failure() {
    let d = dir("dstack");
    let mut s = open(&d);
    let submit = |s: &mut State, commands: &str| {
        let text = format!("type: task\nname: dstack\nresources:\n  cpu: 1\ncommands:\n{commands}");
        submit_file(s, "train.dstack.yml", text)
    };
    let ok = submit(
        &mut s,
        "  - x=bash\n  - '[[ $x == bash ]] && echo \"in $x\"'\n",
    );
    let bad = submit(&mut s, "  - echo one\n  - 'false'\n  - echo never\n");
    s.tick().unwrap();
    until(&mut s, |s| {
        state(s, ok).is_final() && state(s, bad).is_final()
    });
    assert_eq!(
        state(&s, ok),
        JobState::Completed,
        "{:?}",
        log_tail(&mut s, ok)
    );
    assert_eq!(log_tail(&mut s, ok), vec!["out: in bash".to_string()]);
    assert_eq!(state(&s, bad), JobState::Failed);
    assert_eq!(log_tail(&mut s, bad), vec!["out: one".to_string()]);
}

/// The host's CPUs, memory and disk reach the pool's detail as its agent measures them, beside
/// what gantry's jobs were given and every job there — a CPU-only host and job included (the
/// pool view drew nothing for them).
#[test]
fn a_hosts_cpus_memory_and_disk_are_measured_and_shown_with_its_jobs() {
    let d = dir("usage");
    let mut opts = options(&d);
    opts.sampling = gantry::backend::agent::Sampling::Nvml(Duration::from_millis(200));
    let mut s = State::open(&d.join("state.db"), &host(), &opts).unwrap();
    let id = s.submit(&[job("sleep 30")]).remove(0).unwrap();
    s.tick().unwrap();
    until(&mut s, |s| {
        state(s, id) == JobState::Running
            && s.pool_detail(0)
                .is_some_and(|p| p.nodes[0].resources.measured.is_some())
    });
    // Where a CPU-only job runs says what it holds there (it said `gpus ` and nothing).
    let placement = s.job_detail(id).unwrap().placement;
    assert_eq!(placement, [format!("{} (1 CPU, 1024 MiB)", host_name(&s))]);
    let node = s.pool_detail(0).unwrap().nodes.remove(0);
    let r = &node.resources;
    assert_eq!(node.jobs, vec![id]);
    assert_eq!(r.cpus_allocated, 1.0, "{r:?}");
    assert_eq!(r.mem_allocated_mib, 1024, "{r:?}");
    let m = r.measured.as_ref().expect("measured by the agent");
    assert!(
        m.cpus >= 1 && m.mem_total_mib > 0 && m.disk_total_mib > 0,
        "{m:?}"
    );
    assert!(m.mem_available_mib <= m.mem_total_mib);
    let line = node.resources_line();
    assert!(
        line.starts_with("cpu 1/")
            && line.contains("G used")
            && line.ends_with(&format!("jobs {id}")),
        "{line}"
    );
    s.act(id, Action::Cancel, "test").unwrap();
    until(&mut s, |s| state(s, id).is_final());
}

/// A restart's backoff is journaled with its hold: a daemon restarted while it runs (again
/// and again, as a crash loop would) releases the job when the backoff is over, not at once.
#[test]
fn a_restarts_backoff_outlives_restarts_of_the_daemon() {
    let d = dir("backoff");
    let mut s = open(&d);
    let id = submit_file(
        &mut s,
        "crash.yaml",
        "name: crash\nresources:\n  cpus: 1\n  memory: 1\n  job_recovery:\n    max_restarts_on_errors: 3\nrun: exit 3\n".into(),
    );
    s.tick().unwrap();
    until(&mut s, |s| state(s, id) == JobState::Held);
    assert_eq!(state(&s, id), JobState::Held, "held for its 5 s backoff");
    let held = Instant::now();
    drop(s);
    for _ in 0..4 {
        let mut s = open(&d);
        for _ in 0..10 {
            std::thread::sleep(Duration::from_millis(30));
            s.advance(0.03).unwrap();
        }
        if held.elapsed() < Duration::from_secs(4) {
            assert_eq!(state(&s, id), JobState::Held, "released by a restart");
        }
    }
    let mut s = open(&d);
    until(&mut s, |s| state(s, id) != JobState::Held);
    assert_ne!(
        state(&s, id),
        JobState::Held,
        "released once its backoff was over"
    );
    assert!(
        held.elapsed() >= Duration::from_millis(4_500),
        "released {:?} after its hold",
        held.elapsed()
    );
}
