//! What a team can account for. Per-user limits, end to end with the real daemon on a
//! simulated fleet: `[[users]]` caps one user's GPUs, a team's `max_dollars_per_hour_per_user`
//! caps what each of its users' running jobs cost an hour; jobs past a limit wait with a reason
//! that names the user, the figures and where the limit was set, and start once their user's
//! running jobs leave room; other users are not held by them; a limit that is not one is
//! refused at its line. Log retention (`[logs]`), on this host and on a real sshd host: an
//! ended job's logs go after `keep_for`, and `gantry logs` then says why.

use crate::support::daemon as common;
use crate::support::fleets as fixtures;
use crate::support::sshd;

use common::{cli, events, start_in, state, submit, temp_dir, wait_for, LOCAL_FLEET};
use std::process::Command;

/// Four 8-GPU nodes at $16/h a node ($2 a GPU-hour).
fn fleet(me: &str) -> String {
    format!(
        r#"[[teams]]
name = "lab"
max_dollars_per_hour_per_user = 20.0

{hgx}
[[users]]
name = "{me}"
max_gpus = 4
"#,
        hgx = crate::support::daemon::hgx_pool(16.0, 4)
    )
}

#[test]
fn a_users_jobs_past_their_limits_wait_and_say_why_and_start_when_room_is_left() {
    let me = gantry::daemon::auth::this_user().unwrap();
    let dir = temp_dir("limits");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.toml");
    std::fs::write(&file, fleet(&me)).unwrap();
    let d = start_in(dir.clone(), &["--config", file.to_str().unwrap()]);
    let two = "name: two\nresources:\n  accelerators: H100:2\nrun: train\n";
    // As this Unix user (the socket): [[users]] allows 4 GPUs at once.
    let a = submit(&d, &dir, "a", two);
    let b = submit(&d, &dir, "b", two);
    let c = submit(&d, &dir, "c", two);
    wait_for(&d, 30, "two of the three to run", || {
        state(&d, a) == "running" && state(&d, b) == "running"
    });
    let why = cli(&d, &["explain", &c.to_string()]);
    assert_eq!(state(&d, c), "pending", "{why}");
    assert!(
        why.contains(&format!(
            "user limit: {me}'s running jobs hold 4.0 GPU, this job may take 2.0 GPU more, over the limit of 4.0 GPU ([[users]])"
        )),
        "{why}"
    );

    // Another user of the team (a token issued for the Unix account nobody, labelled ci-bot):
    // the team's $20/h per user.
    let url = format!("http://127.0.0.1:{}", d.port);
    let bot = {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--connect"])
            .arg(&d.socket)
            .args([
                "token",
                "create",
                "--role",
                "researcher",
                "--team",
                "lab",
                "--label",
                "ci-bot",
                "--user",
                "nobody",
            ])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let spec = dir.join("eight.yaml");
    std::fs::write(
        &spec,
        "name: eight\nteam: lab\nresources:\n  accelerators: H100:8\nrun: train\n",
    )
    .unwrap();
    let as_bot = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--connect", &url, "--token", &bot])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    let x: i64 = as_bot(&["submit", spec.to_str().unwrap(), "-o", "id"])
        .parse()
        .unwrap();
    let y: i64 = as_bot(&["submit", spec.to_str().unwrap(), "-o", "id"])
        .parse()
        .unwrap();
    wait_for(&d, 30, "the bot's first job to run", || {
        state(&d, x) == "running"
    });
    let why = cli(&d, &["explain", &y.to_string()]);
    assert_eq!(state(&d, y), "pending", "{why}");
    assert!(
        why.contains("user limit: nobody's running jobs hold $16.00/h, this job may take $16.00/h more, over the limit of $20.00/h (team lab's max_*_per_user)"),
        "{why}"
    );
    // Room is there (32 GPUs, 12 in use): only the limits hold c and y.

    // One of this user's jobs ends: c starts; the bot's y still waits for its own.
    cli(&d, &["cancel", &a.to_string()]);
    wait_for(&d, 30, "c to start once a left room", || {
        state(&d, c) == "running"
    });
    assert_eq!(state(&d, y), "pending");
    as_bot(&["cancel", &x.to_string()]);
    wait_for(&d, 30, "y to start once x left room", || {
        state(&d, y) == "running"
    });
}

#[test]
fn a_limit_that_is_not_one_is_refused_at_its_line() {
    let dir = temp_dir("limits-bad");
    std::fs::create_dir_all(&dir).unwrap();
    for (text, says) in [
        (
            fleet("alice").replace("max_gpus = 4", "max_gpus = 0"),
            "user `alice`: max_gpus 0 must be a number above 0",
        ),
        (
            fleet("alice").replace("max_gpus = 4", ""),
            "user `alice`: nothing given; set team (who they act for on the socket), max_gpus, max_dollars_per_hour, or several",
        ),
        (
            fleet("alice").replace("max_gpus = 4", "team = \"vision\""),
            "user `alice`: team `vision` is not a team of this fleet (teams: lab)",
        ),
        (
            fleet("alice") + "\n[[users]]\nname = \"alice\"\nmax_gpus = 1\n",
            "user `alice` is listed twice (first as user #1)",
        ),
        (
            fleet("alice") + "\n[logs]\nkeep_for = \"soon\"\n",
            "logs: keep_for `soon` must be a duration of at least 1s (e.g. 30d, 12h) or \"forever\"",
        ),
        (
            fleet("alice") + "\n[services]\naddresses = [\"localhost\"]\n",
            "services: addresses: `localhost` is not an IP address",
        ),
        (
            fleet("alice") + "\n[services]\nports = \"80-90\"\n",
            "services: ports `80-90`: expected FIRST-LAST, both from 1024 to 65535",
        ),
        (
            fleet("alice") + "\n[mlflow]\ntracking_uri = \"localhost:5000\"\n",
            "mlflow: tracking_uri `localhost:5000`: expected the http:// or https:// address of an MLflow tracking server",
        ),
        (
            fleet("alice") + "\n[logs]\nmax_job_mb = 0\n",
            "logs: max_job_mb must be above 0 (leave it out for no limit)",
        ),
        (
            fleet("alice").replace(
                "max_dollars_per_hour_per_user = 20.0",
                "max_dollars_per_hour_per_user = -1",
            ),
            "team `lab`: max_dollars_per_hour_per_user -1 must be a number above 0",
        ),
    ] {
        let file = dir.join("fleet.toml");
        std::fs::write(&file, &text).unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["fleet", "--config"])
            .arg(&file)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(err.contains(says), "{err}");
        assert!(err.contains("fleet.toml:"), "at a line: {err}");
    }
}

/// The invariant, over random users, limits, jobs and ends: after every cycle no user's running
/// jobs hold more GPUs or cost more an hour than their limit allows, and a user with nothing
/// running whose smallest waiting job fits their limits and the empty fleet is never held back.
mod property {
    use gantry::api::JobState;
    use gantry::daemon::engine::{Engine, Limit, Submission, UserLimits};
    use gantry::model::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    use super::fixtures;

    fn engine(name: &str) -> Engine {
        let mut b = FleetBuilder::new();
        let h100 = b.model("H100", 81_559, None).unwrap();
        // $24 a node: $3 a GPU-hour.
        let p = fixtures::onprem_pool(&mut b, h100, "hgx", 8, 24.0);
        for i in 0..3 {
            b.node(p, &format!("n{i}"), Some("leaf-1"), None, 0)
                .unwrap();
        }
        let dir = gantry_testkit::scratch::scratch(&format!("limits-{name}"));
        let teams = vec![Team {
            name: "lab".into(),
            weight: 1.0,
            quota: None,
            cohort: None,
        }];
        Engine::open(
            &dir.join("state.db"),
            b.build(),
            teams,
            default_classes(),
            0.0,
        )
        .unwrap()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

        #[test]
        fn no_user_ever_holds_more_than_their_limits(
            limits in prop::collection::vec((prop::option::of(1u8..10), prop::option::of(3u8..40)), 3),
            jobs in prop::collection::vec((0usize..3, prop::sample::select(vec![1u8, 2, 4, 8])), 1..16),
            ends in prop::collection::vec(any::<bool>(), 8),
            case in any::<u32>(),
        ) {
            let mut e = engine(&format!("p{case}"));
            let users: HashMap<String, Limit> = limits
                .iter()
                .enumerate()
                .map(|(i, (g, d))| (format!("u{i}"), Limit {
                    gpus: g.map(f64::from),
                    dollars_per_hour: d.map(f64::from),
                }))
                .collect();
            e.set_user_limits(UserLimits { per_team: vec![Limit::default()], users: users.clone() });
            let batch: Vec<Submission> = jobs
                .iter()
                .map(|(u, g)| Submission {
                    file: "j.yaml".into(),
                    text: format!("resources:\n  accelerators: H100:{g}\nrun: x\n").into_bytes(),
                    team: Some("lab".into()),
                    user: Some(format!("u{u}")),
                    ..Submission::default()
                })
                .collect();
            for r in e.submit_batch(&batch, 0.0) {
                r.unwrap();
            }
            for (step, end) in ends.iter().enumerate() {
                let now = 10.0 * (step + 1) as f64;
                e.tick(now).unwrap();
                let mut held: HashMap<String, (f64, f64)> = HashMap::new();
                for j in e.jobs().filter(|j| j.state == JobState::Running) {
                    let p = j.placement.as_ref().unwrap();
                    let h = held.entry(j.user.clone().unwrap()).or_default();
                    h.0 += p.gpu_milli() as f64 / 1000.0;
                    h.1 += p.price_per_hour;
                }
                for (u, (gpus, dollars)) in &held {
                    let l = users[u];
                    prop_assert!(l.gpus.is_none_or(|m| *gpus <= m + 1e-9), "{u}: {gpus} GPUs over {l:?}");
                    prop_assert!(l.dollars_per_hour.is_none_or(|m| *dollars <= m + 1e-9), "{u}: ${dollars}/h over {l:?}");
                }
                // Nothing runs anywhere (the first cycle): each user's first job that fits its
                // limits alone has started — the limits hold back no more than they must.
                if step == 0 {
                    for (i, _) in limits.iter().enumerate() {
                        let u = format!("u{i}");
                        let l = users[&u];
                        let first = e.jobs().find(|j| j.user.as_deref() == Some(&u));
                        if let Some(j) = first {
                            let gpus = j.request.total_gpu_milli() as f64 / 1000.0;
                            let fits = l.gpus.is_none_or(|m| gpus <= m)
                                && l.dollars_per_hour.is_none_or(|m| gpus * 3.0 <= m);
                            let started = held.contains_key(&u);
                            prop_assert!(!fits || started || e.jobs().filter(|j| j.state == JobState::Running).map(|j| j.request.total_gpu_milli()).sum::<u64>() + j.request.total_gpu_milli() > 24_000,
                                "{u}'s first job ({gpus} GPUs) fits {l:?} and the fleet but did not start");
                        }
                    }
                }
                if *end {
                    let running: Vec<i64> = e.jobs().filter(|j| j.state == JobState::Running).map(|j| j.id).collect();
                    if let Some(&id) = running.first() {
                        e.finished(id, true, now).unwrap();
                    }
                }
            }
        }
    }
}

/// `gantry logs ID`: (exit code, stdout, stderr).
fn logs_of(d: &common::Daemon, id: i64) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(["logs", &id.to_string()])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A job that prints and ends, its logs read, then gone after `keep_for` with why.
fn logs_go_after_keep_for(d: &common::Daemon, dir: &std::path::Path) {
    let id = submit(
        d,
        dir,
        "talk",
        "name: talk\nrun: |\n  echo said-by-the-job\n",
    );
    wait_for(d, 60, "the job to complete", || state(d, id) == "completed");
    let (_, out, _) = logs_of(d, id);
    assert!(out.contains("said-by-the-job"), "{out}");
    wait_for(d, 60, "the retention to remove its logs", || {
        logs_of(d, id).2.contains("removed")
    });
    let (code, out, err) = logs_of(d, id);
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("said-by-the-job"), "{out}");
    assert!(
        err.contains("its logs on this node were removed")
            && err.contains("by the log retention ([logs] keep_for = 6s)"),
        "{err}"
    );
}

#[test]
fn an_ended_jobs_logs_on_this_host_go_after_keep_for_and_logs_says_why() {
    let dir = temp_dir("retention-local");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("fleet.toml");
    let text =
        LOCAL_FLEET.replace("name = \"a\"", "name = \"lab\"") + "\n[logs]\nkeep_for = \"6s\"\n";
    std::fs::write(&file, text).unwrap();
    let d = start_in(dir.clone(), &["--config", file.to_str().unwrap()]);
    logs_go_after_keep_for(&d, &dir);
}

#[test]
fn an_ssh_hosts_agent_applies_the_fleets_log_retention() {
    if !sshd::can_run() {
        return;
    }
    let h = sshd::hosts("retention", 1);
    let fleet = h.fleet(&h.entries(), "2m");
    let text = std::fs::read_to_string(&fleet).unwrap() + "\n[logs]\nkeep_for = \"6s\"\n";
    std::fs::write(&fleet, text).unwrap();
    let d = start_in(
        temp_dir("retention-ssh"),
        &["--config", fleet.to_str().unwrap()],
    );
    wait_for(&d, 60, "the host to connect", || {
        events(&d).iter().any(|e| e.contains("connected:"))
    });
    logs_go_after_keep_for(&d, &h.dir);
}
