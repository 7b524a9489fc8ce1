//! Jobs the scheduler places on the local host (`provider = "local"`) run as real processes
//! under the daemon: exit codes decide completed or failed, logs show in the job's detail, a
//! preemption signals and requeues, a cancel kills, and a restarted daemon kills the process
//! groups its predecessor left. Ordinary commands, no GPU.

use gantry::config::fleet::{parse, FleetConfig};
use gantry::daemon::engine::Submission;
use gantry::daemon::job::JobState;
use gantry::daemon::state::{Action, State, StateOptions};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn host() -> FleetConfig {
    parse(
        "local.toml",
        r#"
[[teams]]
name = "a"

[[pools]]
provider = "local"
region = "here"
zone = "here"
name = "host"
instance_type = "this machine"
cpus = 8
memory_gb = 16
capacity = "reserved"
price_per_hour = 0.5
nodes = 1
"#,
    )
    .unwrap()
}

fn dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("gantry-localdaemon-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn options(d: &Path) -> StateOptions {
    StateOptions {
        seed: 1,
        demo_workload: false,
        failures_per_node_hour: 0.0,
        log_dir: Some(d.join("logs")),
    }
}

fn open(d: &Path) -> State {
    State::open(&d.join("state.db"), &host(), &options(d)).unwrap()
}

fn job(run: &str) -> Submission {
    Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: host-job\nresources:\n  cpus: 1\n  memory: 1\ncheckpoint: {{grace: 5s}}\nrun: |\n  {run}\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        ..Submission::default()
    }
}

/// Advances the daemon's clock with the wall clock until `done` or 10 s.
fn until(s: &mut State, done: impl Fn(&State) -> bool) {
    let start = Instant::now();
    while !done(s) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
        s.advance(0.02).unwrap();
    }
}

fn state(s: &State, id: i64) -> JobState {
    s.engine().job(id).unwrap().state
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
    let detail = s.job_detail(ok).unwrap();
    assert_eq!(detail.log_tail, vec!["out: hello from gantry".to_string()]);
    assert_eq!(
        s.job_detail(bad).unwrap().log_tail,
        vec!["err: oops".to_string()]
    );
    assert!(s
        .snapshot()
        .events
        .iter()
        .any(|e| e.contains(&format!("job {bad} exited on the local host: Code(3)"))));
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
        events
            .iter()
            .any(|e| e.detail.contains("re-adopted process group")),
        "{events:?}"
    );
    std::fs::write(&go, "").unwrap();
    until(&mut s, |s| state(s, id).is_final());
    assert_eq!(state(&s, id), JobState::Failed, "its exit code 4 decides");
    assert!(s
        .snapshot()
        .events
        .iter()
        .any(|e| e.contains(&format!("job {id} exited on the local host: Code(4)"))));
    assert_eq!(
        s.job_detail(id).unwrap().log_tail,
        vec!["out: finishing".to_string()]
    );
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
        s.job_detail(id).unwrap().log_tail,
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
            .any(|e| e.detail.contains("left from before the restart")),
        "{events:?}"
    );
    assert!(!state(&s, id).is_final(), "requeued, not lost");
    s.tick().unwrap();
    assert_eq!(state(&s, id), JobState::Pending);
}
