//! Starts driven by events, not ticks (issue 39): a run's end on this host or on an SSH host
//! wakes the daemon, which records it and starts what waits at once. Shown with the clock's
//! step set to an hour (`--step 1h`): nothing but those wakes can move the queue, so a second
//! job that waits for the first one's slot starts only if the first one's end woke the daemon.
//! `gantry bench starts` measures how fast (makespan against the ideal).

use crate::support::daemon as common;
use crate::support::sshd;

use common::{events, start_in, state, submit, temp_dir, wait_for, Daemon, LOCAL_FLEET};

/// Two jobs that need the same slot: the second starts when the first ends.
fn one_after_the_other(d: &Daemon, dir: &std::path::Path, resources: &str) {
    let first = submit(
        d,
        dir,
        "first",
        &format!("name: first\nresources:\n{resources}run: sleep 1\n"),
    );
    let second = submit(
        d,
        dir,
        "second",
        &format!("name: second\nresources:\n{resources}run: echo second\n"),
    );
    wait_for(d, 30, "the first job to run", || {
        state(d, first) == "running"
    });
    assert_eq!(state(d, second), "pending");
    wait_for(
        d,
        30,
        "the second job to complete (woken by the first's end)",
        || state(d, second) == "completed",
    );
    assert_eq!(state(d, first), "completed");
}

#[test]
fn a_local_runs_end_starts_the_next_job_without_waiting_for_the_clock() {
    let dir = temp_dir("starts-local");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.toml");
    let text = LOCAL_FLEET
        .replace("name = \"a\"", "name = \"lab\"")
        .replace("cpus = 8", "cpus = 1");
    assert!(text.contains("cpus = 1"), "{text}");
    std::fs::write(&file, text).unwrap();
    let d = start_in(
        dir.clone(),
        &["--config", file.to_str().unwrap(), "--step", "1h"],
    );
    one_after_the_other(&d, &dir, "  cpus: 1\n");
}

#[test]
fn an_ssh_hosts_run_end_starts_the_next_job_without_waiting_for_the_clock() {
    if !sshd::can_run() {
        return;
    }
    let h = sshd::hosts("starts", 1);
    let d = start_in(
        temp_dir("starts-ssh"),
        &[
            "--config",
            h.fleet(&h.entries(), "2m").to_str().unwrap(),
            "--step",
            "1h",
        ],
    );
    wait_for(&d, 60, "the host to connect", || {
        events(&d).iter().any(|e| e.contains("connected:"))
    });
    one_after_the_other(&d, &h.dir, "  accelerators: A100-80GB:2\n");
}
