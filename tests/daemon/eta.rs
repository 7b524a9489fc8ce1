//! Start estimates, end to end: a real daemon on this host's pool (real processes), jobs that
//! take the whole host one after another. Once three runs of a job have completed, the next
//! waiting job's ETA is the running one's start plus what runs like it lasted, said in
//! `gantry jobs`, `gantry explain` and their JSON; the job then starts about then. A hold says
//! `never: held`, and a release brings the estimate back.

use crate::support::daemon as common;
use common::{cli, json, local_fleet, start_in, state, submit, temp_dir, wait_for};
use serde_json::Value;

/// A job that takes the whole host (its 8 CPUs) for `secs`.
fn whole_host(name: &str, secs: u32) -> String {
    format!("name: {name}\nresources:\n  cpus: 8\nrun: sleep {secs}\n")
}

/// A daemon of its own whose only pool is this host, for team `lab`, and its directory.
fn on_this_host(name: &str) -> (common::Daemon, std::path::PathBuf) {
    let dir = temp_dir(name);
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, local_fleet("lab", "")).unwrap();
    let d = start_in(dir.clone(), &["--config", fleet.to_str().unwrap()]);
    (d, dir)
}

/// What a preview says of job `id`'s start (`before_s`, `after_s`, …), or null if it does not
/// move.
fn moved(w: &Value, id: i64) -> Value {
    w["starts"]
        .as_array()
        .and_then(|s| s.iter().find(|m| m["job"] == id).cloned())
        .unwrap_or(Value::Null)
}

fn row(d: &common::Daemon, id: i64) -> Value {
    let rows = json(d, &["jobs"]);
    rows.as_array()
        .and_then(|r| r.iter().find(|j| j["id"] == id).cloned())
        .unwrap_or(Value::Null)
}

#[test]
fn a_waiting_jobs_eta_comes_from_past_runs_and_it_starts_then() {
    let (d, dir) = on_this_host("eta-e2e");
    // Three runs of `step` (2 s each) teach the daemon how long it lasts.
    let warm: Vec<i64> = (0..3)
        .map(|i| submit(&d, &dir, &format!("warm{i}"), &whole_host("step", 2)))
        .collect();
    wait_for(&d, 60, "the three warm-up runs to complete", || {
        warm.iter().all(|&id| state(&d, id) == "completed")
    });
    let a = submit(&d, &dir, "a", &whole_host("step", 2));
    let b = submit(&d, &dir, "b", &whole_host("other", 1));
    wait_for(&d, 20, "job a to run", || state(&d, a) == "running");
    let mut eta = Value::Null;
    wait_for(&d, 20, "an estimate for job b made while a runs", || {
        eta = row(&d, b)["eta"].clone();
        let made = eta["made_s"].as_f64().unwrap_or(0.0);
        let a_started = common::job(&d, a)["started_at"].as_f64();
        eta["at_s"].is_f64() && a_started.is_some_and(|s| made >= s)
    });
    let a_started = common::job(&d, a)["started_at"].as_f64().unwrap();
    let at = eta["at_s"].as_f64().unwrap();
    // a lasts what `step` lasted (2 s, a little more with the process's own start).
    assert!(
        (a_started + 1.0..=a_started + 5.0).contains(&at),
        "b's ETA {at} against a's start {a_started}: {eta}"
    );
    let basis = eta["basis"].as_str().unwrap_or("");
    assert!(basis.contains("1 by the same job's past runs"), "{basis}");
    assert!(
        basis.contains("its own run: its user's past runs"),
        "{basis}"
    );
    // Said in the table and by explain.
    let table = cli(&d, &["jobs"]);
    assert!(table.contains("ETA"), "{table}");
    let explain = cli(&d, &["explain", &b.to_string()]);
    assert!(explain.contains("ETA: estimated to start"), "{explain}");
    let v = json(&d, &["explain", &b.to_string()]);
    assert_eq!(v["eta"]["at_s"].as_f64(), Some(at), "{v}");
    // And it starts about then.
    wait_for(&d, 20, "job b to start", || state(&d, b) != "pending");
    let b_started = common::job(&d, b)["started_at"].as_f64().unwrap();
    assert!(
        (b_started - at).abs() <= 3.0,
        "b started at {b_started}, estimated {at}"
    );

    // A held job will not start while it is held; released, it has an estimate again.
    let c = submit(&d, &dir, "c", &whole_host("step", 30));
    let e = submit(&d, &dir, "e", &whole_host("other", 1));
    wait_for(&d, 20, "job c to run", || state(&d, c) == "running");
    cli(&d, &["hold", &e.to_string()]);
    wait_for(&d, 20, "e's estimate to say it is held", || {
        row(&d, e)["eta"]["never"] == "held"
    });
    assert!(cli(&d, &["jobs"]).contains("never: held"));
    cli(&d, &["release", &e.to_string()]);
    wait_for(&d, 20, "e's estimate once released", || {
        row(&d, e)["eta"]["at_s"].is_f64()
    });
    cli(&d, &["cancel", &c.to_string(), &e.to_string()]);
}

/// A preview before the key is pressed: `hold B --dry-run` says C would start sooner and
/// changes nothing; the hold then moves C's estimate there. `cancel A --dry-run` says C (B is
/// held) would start at the next cycle; the cancel then starts it.
#[test]
fn a_preview_says_what_an_action_would_do_and_the_action_does_it() {
    let (d, dir) = on_this_host("eta-preview");
    let a = submit(&d, &dir, "a", &whole_host("long", 600));
    let b = submit(&d, &dir, "b", &whole_host("next", 600));
    let c = submit(&d, &dir, "c", &whole_host("last", 600));
    wait_for(&d, 20, "job a to run", || state(&d, a) == "running");
    let w = json(&d, &["hold", &b.to_string(), "--dry-run"]);
    let m = moved(&w, c);
    let (before, after) = (m["before_s"].as_f64(), m["after_s"].as_f64());
    assert!(
        matches!((before, after), (Some(x), Some(y)) if y < x)
            || (before.is_none() && after.is_some()),
        "holding b brings c sooner: {w}"
    );
    assert_eq!(state(&d, b), "pending", "a preview changes nothing");
    // A preview of what the action would refuse is refused, with the action's own words.
    let refused = |args: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("--connect")
            .arg(&d.socket)
            .args(args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} was not refused");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let (a_id, b_id) = (a.to_string(), b.to_string());
    assert_eq!(
        refused(&["hold", &a_id, "--dry-run"]),
        refused(&["hold", &a_id])
    );
    assert_eq!(
        refused(&["release", &b_id, "--dry-run"]),
        refused(&["release", &b_id])
    );
    assert_eq!(
        refused(&["preempt", &b_id, "--dry-run"]),
        refused(&["preempt", &b_id])
    );
    assert!(refused(&["hold", &a_id, "--dry-run"]).contains("hold applies to pending jobs"));
    let text = cli(&d, &["hold", &b.to_string(), "--dry-run"]);
    assert!(
        text.contains(&format!("job {c} last: starts sooner")),
        "{text}"
    );
    // The hold: c's estimate is now what the preview said.
    cli(&d, &["hold", &b.to_string()]);
    let said = after.unwrap();
    wait_for(&d, 20, "c's estimate to move as previewed", || {
        let rows = json(&d, &["jobs"]);
        let at = rows
            .as_array()
            .and_then(|r| r.iter().find(|j| j["id"] == c).cloned())
            .and_then(|j| j["eta"]["at_s"].as_f64());
        at.is_some_and(|t| (t - said).abs() <= 60.0)
    });
    // Cancelling a starts c now (b is held), says the preview; and the cancel does.
    let w = json(&d, &["cancel", &a.to_string(), "--dry-run"]);
    let m = moved(&w, c);
    let made = w["made_s"].as_f64().unwrap();
    assert!(
        m["after_s"].as_f64().is_some_and(|t| t - made < 60.0),
        "c starts at the next cycle: {w}"
    );
    // Several jobs are previewed together: cancelling a and b starts c at the next cycle.
    let w = json(&d, &["cancel", &a.to_string(), &b.to_string(), "--dry-run"]);
    assert_eq!(
        (w["job"].as_i64(), &w["also"]),
        (Some(a), &serde_json::json!([b]))
    );
    assert!(
        moved(&w, c)["after_s"]
            .as_f64()
            .is_some_and(|t| t - made < 60.0),
        "{w}"
    );
    let text = cli(&d, &["cancel", &a.to_string(), &b.to_string(), "--dry-run"]);
    assert!(
        text.contains(&format!("what cancel on jobs {a}, {b} would do")),
        "{text}"
    );
    // One of them refused (c is pending, not running): the whole preview is.
    assert_eq!(
        refused(&["preempt", &a.to_string(), &c.to_string(), "--dry-run"]),
        refused(&["preempt", &c.to_string()])
    );
    assert_eq!(
        (state(&d, a), state(&d, b)),
        ("running".into(), "held".into())
    );
    cli(&d, &["cancel", &a.to_string()]);
    wait_for(&d, 20, "c to start once a is cancelled", || {
        state(&d, c) == "running"
    });
    cli(&d, &["cancel", &b.to_string(), &c.to_string()]);
}

/// A submission's preview: `submit --dry-run` says when the job would start and whose start
/// it would move, and submits nothing; submitted, it goes where the preview said.
#[test]
fn a_submissions_preview_says_when_it_starts_and_whom_it_delays() {
    let (d, dir) = on_this_host("eta-submit-preview");
    let a = submit(&d, &dir, "a", &whole_host("long", 600));
    let b = submit(&d, &dir, "b", &whole_host("next", 600));
    wait_for(&d, 20, "job a to run", || state(&d, a) == "running");
    // c at production goes ahead of b (experiment) once a ends.
    let file = dir.join("c.yaml");
    let c_spec = format!("{}priority: production\n", whole_host("urgent", 600));
    std::fs::write(&file, &c_spec).unwrap();
    let path = file.to_str().unwrap();
    let p = json(&d, &["submit", path, "--team", "lab", "--dry-run"]);
    assert_eq!(p["class"], "production", "{p}");
    let w = &p["what_if"];
    let moved = |id: i64| moved(w, id);
    let own = moved(0);
    let starts_at = own["after_s"].as_f64().expect("it starts within the look");
    let b_moves = moved(b);
    assert!(
        b_moves["after_s"].as_f64() > b_moves["before_s"].as_f64(),
        "b starts later: {w}"
    );
    assert_eq!(
        b_moves["before_s"].as_f64(),
        Some(starts_at),
        "c takes b's start: {w}"
    );
    let text = cli(&d, &["submit", path, "--team", "lab", "--dry-run"]);
    assert!(text.contains("(nothing was submitted)"), "{text}");
    assert!(text.contains("it starts "), "{text}");
    assert!(
        text.contains(&format!("job {b} next: starts later")),
        "{text}"
    );
    let ids: Vec<i64> = json(&d, &["jobs"])
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| j["id"].as_i64())
        .collect();
    assert_eq!(ids.len(), 2, "nothing was submitted: {ids:?}");
    // Submitted: its estimate is where the preview put it, and b's moves behind it.
    let c = submit(&d, &dir, "c", &c_spec);
    wait_for(&d, 20, "c's estimate to be where the preview said", || {
        row(&d, c)["eta"]["at_s"]
            .as_f64()
            .is_some_and(|t| (t - starts_at).abs() <= 60.0)
            && row(&d, b)["eta"]["at_s"].as_f64() > Some(starts_at + 60.0)
    });
    cli(
        &d,
        &["cancel", &a.to_string(), &b.to_string(), &c.to_string()],
    );
}

/// The two named cases: a preview that says B starts when A is preempted, then B
/// starts; a hold that says C's start moves later (out of the look: held), then it does.
/// (Preempting the oldest job of the queue's own class would only restart it: the preview
/// says so too, and a job of a higher class is what takes its place.)
#[test]
fn a_preempt_preview_starts_the_next_job_and_a_hold_moves_its_own_start_later() {
    let (d, dir) = on_this_host("eta-preempt-preview");
    let a = submit(&d, &dir, "a", &whole_host("long", 600));
    wait_for(&d, 20, "job a to run", || state(&d, a) == "running");
    // b at production waits for a's GPUs (a class does not preempt by itself here); once a
    // is preempted and requeued, b is ahead of it.
    let b_spec = format!("{}priority: production\n", whole_host("next", 600));
    let b = submit(&d, &dir, "b", &b_spec);
    let c = submit(&d, &dir, "c", &whole_host("last", 600));
    // Holding c: its own start moves later, out of what the preview looks at.
    let w = json(&d, &["hold", &c.to_string(), "--dry-run"]);
    let m = moved(&w, c);
    assert!(
        m["before_s"].is_f64() && m["after_s"].is_null(),
        "c's start moves later: {w}"
    );
    cli(&d, &["hold", &c.to_string()]);
    wait_for(&d, 20, "c's estimate to say held", || {
        row(&d, c)["eta"]["never"].as_str() == Some("held")
    });
    // Preempting a: b starts at the next cycle, says the preview; and the preemption does.
    let w = json(&d, &["preempt", &a.to_string(), "--dry-run"]);
    let made = w["made_s"].as_f64().unwrap();
    assert!(
        moved(&w, b)["after_s"]
            .as_f64()
            .is_some_and(|t| t - made < 60.0),
        "b starts once a is preempted: {w}"
    );
    assert_eq!(state(&d, a), "running", "a preview changes nothing");
    cli(&d, &["preempt", &a.to_string()]);
    wait_for(&d, 30, "b to start once a is preempted", || {
        state(&d, b) == "running"
    });
    cli(
        &d,
        &["cancel", &a.to_string(), &b.to_string(), &c.to_string()],
    );
}
