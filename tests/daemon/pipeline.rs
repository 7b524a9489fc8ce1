//! Pipelines (SkyPilot's chained tasks: a file of several YAML documents): `gantry submit`
//! sends each task to follow the one before it; the daemon starts a task only once its
//! predecessor has completed, and cancels it, saying why, when the predecessor fails. And a
//! relative workdir shipped to a daemon reached over TCP. Real `gantry daemon`, real bash jobs
//! on a local pool.

use crate::support::daemon as common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::LOCAL_FLEET as FLEET;

fn gantry(d: &common::Daemon, dir: &Path, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CONNECT", &d.socket)
        .current_dir(dir)
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn job(d: &common::Daemon, dir: &Path, id: &str) -> Value {
    let (code, out, err) = gantry(d, dir, &["job", id, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

fn state(d: &common::Daemon, dir: &Path, id: &str) -> String {
    job(d, dir, id)["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_final(d: &common::Daemon, dir: &Path, id: &str) -> String {
    let t0 = Instant::now();
    loop {
        let s = state(d, dir, id);
        if ["completed", "failed", "cancelled"].contains(&s.as_str()) {
            return s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "job {id} is still {s}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_pipelines_tasks_run_one_after_another_and_a_failure_cancels_the_rest() {
    let dir = common::temp_dir("pipeline");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, FLEET).unwrap();
    let d = common::start_in(dir.join("d"), &["--config", fleet.to_str().unwrap()]);
    let out = dir.join("order.txt");
    // SkyPilot's form: a first document naming the pipeline, then the tasks. The first task
    // sleeps, so that a second task started early would write first.
    let file = format!(
        "name: chain\n---\nname: first\nresources:\n  cpus: 1\nrun: |\n  sleep 3\n  echo first >> {o}\n---\nname: second\nresources:\n  cpus: 1\nrun: |\n  echo second >> {o}\n",
        o = out.display()
    );
    std::fs::write(dir.join("chain.yaml"), file).unwrap();
    let (code, ids, err) = gantry(
        &d,
        &dir,
        &["submit", "chain.yaml", "--team", "a", "-o", "id"],
    );
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(ids.len(), 2, "one job per task: {ids:?}");
    // While the first task sleeps, the second says what it waits for.
    let waiting = format!("waits for job {} to complete (pipeline)", ids[0]);
    let t0 = Instant::now();
    loop {
        let second = job(&d, &dir, ids[1]);
        let why = second["reason"].as_str().unwrap_or_default();
        if why.contains(&waiting) {
            assert_eq!(second["state"], "pending");
            break;
        }
        assert_eq!(second["state"], "pending", "{second}");
        assert!(t0.elapsed() < Duration::from_secs(20), "{second}");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(wait_final(&d, &dir, ids[0]), "completed");
    assert_eq!(wait_final(&d, &dir, ids[1]), "completed");
    assert_eq!(
        std::fs::read_to_string(&out).unwrap(),
        "first\nsecond\n",
        "the second task ran after the first"
    );
    // Each job keeps the pipeline's name, and the second the job it followed.
    let (first, second) = (job(&d, &dir, ids[0]), job(&d, &dir, ids[1]));
    assert_eq!(
        (&first["pipeline"], &first["after"]),
        (&Value::from("chain"), &Value::Null)
    );
    assert_eq!(
        (&second["pipeline"], &second["after"]),
        (
            &Value::from("chain"),
            &Value::from(ids[0].parse::<i64>().unwrap())
        )
    );
    let (_, shown, _) = gantry(&d, &dir, &["job", ids[1]]);
    assert!(
        shown.contains(&format!("pipeline chain: starts after job {}", ids[0])),
        "{shown}"
    );

    // The first task fails: the second never runs, and is cancelled with the reason.
    let file = "---\nname: fails\nresources:\n  cpus: 1\nrun: exit 3\n---\nname: never\nresources:\n  cpus: 1\nrun: echo ran >> never.txt\n";
    std::fs::write(dir.join("broken.yaml"), file).unwrap();
    let (code, ids, err) = gantry(
        &d,
        &dir,
        &["submit", "broken.yaml", "--team", "a", "-o", "id"],
    );
    assert_eq!(code, 0, "{err}");
    let ids: Vec<&str> = ids.lines().collect();
    assert_eq!(wait_final(&d, &dir, ids[0]), "failed");
    assert_eq!(wait_final(&d, &dir, ids[1]), "cancelled");
    let (_, events, _) = gantry(&d, &dir, &["events", "--limit", "50"]);
    assert!(
        events.contains(&format!(
            "job {}, before it in its pipeline, failed",
            ids[0]
        )),
        "{events}"
    );
    assert!(!dir.join("never.txt").exists());

    // A broken task anywhere in the file: nothing is sent, and the error is at its line.
    let file = "name: a\nrun: echo a\n---\nname: b\nnum_nodes: two\nrun: echo b\n";
    std::fs::write(dir.join("bad.yaml"), file).unwrap();
    let (_, before, _) = gantry(&d, &dir, &["jobs", "-o", "json"]);
    let (code, _, err) = gantry(&d, &dir, &["submit", "bad.yaml", "--team", "a"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("bad.yaml:5:1: `num_nodes`"), "{err}");
    let (_, after, _) = gantry(&d, &dir, &["jobs", "-o", "json"]);
    assert_eq!(before, after, "no task of a broken pipeline is submitted");
}

/// `workdir: .` with a daemon reached over TCP (which cannot read the submitter's machine):
/// `gantry submit` packs the directory as git sees it, the daemon keeps it, and the job runs in
/// the daemon's copy — the file it reads is the submitter's, the ignored one is not there.
#[test]
fn a_relative_workdir_is_shipped_to_a_daemon_over_tcp_and_the_job_runs_in_it() {
    let dir = common::temp_dir("shipped");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, FLEET).unwrap();
    let d = common::start_in(dir.join("d"), &["--config", fleet.to_str().unwrap()]);
    let token = common::token(&d, "researcher", Some("a"));
    let project = dir.join("project");
    std::fs::create_dir_all(project.join("data")).unwrap();
    std::fs::write(project.join("message.txt"), "from the submitter\n").unwrap();
    std::fs::write(project.join("data/huge.bin"), "not wanted").unwrap();
    std::fs::write(project.join(".gitignore"), "data/\n").unwrap();
    std::fs::write(
        project.join("job.yaml"),
        "name: shipped\nworkdir: .\nresources:\n  cpus: 1\nrun: |\n  cat message.txt\n  ls data 2>&1 || echo no data\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["submit", "job.yaml", "--team", "a", "-o", "id"])
        .env("GANTRY_CONNECT", format!("http://127.0.0.1:{}", d.port))
        .env("GANTRY_TOKEN", &token)
        .current_dir(&project)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("shipped to the daemon"), "{err}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let spec = job(&d, &dir, &id)["spec"].as_str().unwrap().to_string();
    let kept = dir.join("d").join("state").join("workdirs");
    assert!(
        spec.contains(&format!("workdir: {}", kept.display())),
        "the job runs in the daemon's copy: {spec}"
    );
    assert_eq!(wait_final(&d, &dir, &id), "completed");
    let (_, logs, _) = gantry(&d, &dir, &["logs", &id]);
    assert!(logs.contains("from the submitter"), "{logs}");
    assert!(
        logs.contains("no data"),
        "the ignored directory stayed behind: {logs}"
    );
}
