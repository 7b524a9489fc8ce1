//! The daemon's command line, end to end: a real `gantry daemon`, then `gantry submit`, `jobs`,
//! `job`, `explain`, `prio`, `hold`, `cancel`, `reclaim`, `token`, `events`, with their JSON
//! and their exit codes (2 bad input, 3 no such job, 4 not allowed, 5 no daemon, 6 conflict).

use crate::support::daemon as common;

use common::Daemon;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A daemon of its own (tests run in parallel: each gets its own directory).
fn start() -> Daemon {
    start_with(&[])
}

/// A daemon of its own with these extra arguments (`--config FILE`, …).
fn start_with(extra: &[&str]) -> Daemon {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    common::start(&format!("dcli-{n}"), extra)
}

fn gantry(connect: &Path, args: &[&str]) -> (i32, String, String) {
    gantry_as(connect.to_str().unwrap(), None, args)
}

fn gantry_as(connect: &str, token: Option<&str>, args: &[&str]) -> (i32, String, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gantry"));
    c.args(args)
        .env("GANTRY_CONNECT", connect)
        .env_remove("GANTRY_TOKEN");
    if let Some(t) = token {
        c.env("GANTRY_TOKEN", t);
    }
    let out = c.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_daemon_cli_round_trip_with_exit_codes() {
    let d = start();
    let s = &d.socket;
    let spec = d.dir.join("job.yaml");
    std::fs::write(
        &spec,
        "name: cli-train\nteam: applied\nresources:\n  accelerators: H100:8\ncheckpoint: {interval: 30m}\nrun: python train.py\n",
    )
    .unwrap();
    let (code, out, err) = gantry(s, &["submit", spec.to_str().unwrap(), "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_i64()
        .unwrap();
    let ids = id.to_string();

    let (code, out, err) = gantry(s, &["jobs", "--team", "applied", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert!(
        rows.iter()
            .any(|r| r["id"] == id && r["name"] == "cli-train"),
        "{out}"
    );
    let (code, out, _) = gantry(s, &["jobs"]);
    assert_eq!(code, 0);
    assert!(out.contains("cli-train"), "{out}");

    let (code, out, err) = gantry(s, &["job", &ids, "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["team"], "applied");
    assert!(v["spec"].as_str().unwrap().contains("python train.py"));

    let (code, out, err) = gantry(s, &["explain", &ids, "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["state"].is_string());

    // A job of the simulated fleet writes no logs: the command says why.
    let (code, _, err) = gantry(s, &["logs", &ids]);
    assert_eq!(code, 3, "{err}");
    assert!(
        err.contains("has not started") || err.contains("simulated fleet"),
        "{err}"
    );

    let (code, _, err) = gantry(s, &["prio", &ids, "production"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = gantry(s, &["prio", &ids, "urgent"]);
    assert_eq!(code, 2, "unknown class is bad input: {err}");
    assert!(
        err.contains("classes: serving, production, experiment"),
        "{err}"
    );

    // Exit codes.
    let bad = d.dir.join("bad.yaml");
    std::fs::write(&bad, "name: x\nresources:\n  acelerators: H100:1\n").unwrap();
    let (code, _, err) = gantry(s, &["submit", bad.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.yaml:3:3") && err.contains("accelerators"),
        "{err}"
    );
    let (code, _, err) = gantry(s, &["job", "999999"]);
    assert_eq!(code, 3, "{err}");
    let (code, _, err) = gantry(s, &["job", "nope"]);
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = gantry_as("/nonexistent/gantry.sock", None, &["jobs"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("cannot reach the daemon"), "{err}");

    // Tokens: a viewer over TCP may read but not change.
    let (code, token, err) = gantry(s, &["token", "create", "--role", "viewer"]);
    assert_eq!(code, 0, "{err}");
    let url = format!("http://127.0.0.1:{}", d.port);
    let (code, _, err) = gantry_as(&url, Some(token.trim()), &["jobs"]);
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = gantry_as(&url, Some(token.trim()), &["cancel", &ids]);
    assert_eq!(code, 4, "{err}");
    assert!(err.contains("viewer"), "{err}");
    let (code, _, err) = gantry_as(&url, None, &["jobs"]);
    assert_eq!(code, 4, "no token: {err}");

    // Cancel, then cancelling again is a conflict; several ids: each tried.
    let (code, _, err) = gantry(s, &["cancel", &ids]);
    assert_eq!(code, 0, "{err}");
    let (code, out, _) = gantry(s, &["cancel", &ids, "999999", "--output", "json"]);
    assert_eq!(code, 6);
    let v: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(v.len(), 2);

    let (code, out, err) = gantry(s, &["reclaim", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["items"].is_array());
    let (code, out, err) = gantry(s, &["events", "--job", &ids, "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("cancelled"), "{out}");
    let (code, out, err) = gantry(s, &["fleet", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let fleet: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(fleet["simulated"], true);
    // Every idle GPU of an up node has one cause (nodes booting or in repair add theirs).
    let n = |v: &serde_json::Value| v.as_u64().unwrap();
    let idle_up: u64 = fleet["idle_by_cause"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !matches!(c["cause"].as_str(), Some("provisioning" | "in-repair")))
        .map(|c| n(&c["gpus"]))
        .sum();
    assert_eq!(
        idle_up,
        n(&fleet["gpus_total"]) - n(&fleet["gpus_busy"]),
        "{fleet}"
    );
}

#[test]
fn completions_print_a_script() {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["completions", "bash"])
        .output()
        .unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("_gantry"));
}

#[test]
fn tables_align_names_in_any_script() {
    // Before: widths counted characters, so a CJK or emoji name (two columns a character)
    // pushed every later column of its row to the right.
    let d = start();
    let s = &d.socket;
    for name in ["训练任务-大模型-预训练", "🚀-launch", "plain-name"] {
        let spec = d.dir.join(format!("{}.yaml", name.len()));
        std::fs::write(
            &spec,
            format!("name: {name}\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n"),
        )
        .unwrap();
        let (code, _, err) = gantry(s, &["submit", spec.to_str().unwrap()]);
        assert_eq!(code, 0, "{err}");
    }
    let (code, out, err) = gantry(s, &["jobs", "--team", "applied"]);
    assert_eq!(code, 0, "{err}");
    let width = |line: &str| unicode_width::UnicodeWidthStr::width(line);
    // The TEAM column starts at the same display column on every row as in the header.
    let header = out.lines().next().unwrap();
    let at = width(&header[..header.find("TEAM").unwrap()]);
    let rows: Vec<&str> = out.lines().filter(|l| l.contains("applied")).collect();
    assert!(rows.len() >= 3, "{out}");
    for row in rows {
        let col = width(&row[..row.find("applied").unwrap()]);
        assert_eq!(col, at, "{out}");
    }
    assert!(
        out.contains("训练任务-大模型-预训练") || out.contains('…'),
        "{out}"
    );
}

#[test]
fn listings_print_wide_tables_and_yaml_as_kubectl_does() {
    // Before: `-o` took table and json only.
    let d = start();
    let s = &d.socket;
    let long = "a-job-name-longer-than-the-twenty-four-columns-of-the-table";
    let spec = d.dir.join("long.yaml");
    std::fs::write(
        &spec,
        format!("name: {long}\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n"),
    )
    .unwrap();
    let (code, _, err) = gantry(s, &["submit", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (_, table, _) = gantry(s, &["jobs", "--team", "applied"]);
    assert!(!table.contains(long) && table.contains('…'), "{table}");
    let (code, wide, err) = gantry(s, &["jobs", "--team", "applied", "-o", "wide"]);
    assert_eq!(code, 0, "{err}");
    assert!(wide.contains(long), "wide cuts nothing: {wide}");
    assert!(wide.lines().next().unwrap().contains("$/H"), "{wide}");
    // YAML is the same data as JSON.
    for args in [
        &["jobs", "--team", "applied"][..],
        &["teams"],
        &["fleet"],
        &["report"],
    ] {
        let (_, json, _) = gantry(s, &[args, &["-o", "json"]].concat());
        let (code, yaml, err) = gantry(s, &[args, &["-o", "yaml"]].concat());
        assert_eq!(code, 0, "{args:?}: {err}");
        let from_json: serde_json::Value = serde_json::from_str(&json).unwrap();
        let from_yaml: serde_json::Value = serde_yaml_ng::from_str(&yaml).unwrap();
        assert_eq!(from_json, from_yaml, "{args:?}");
    }
    // A stream is one YAML document per record.
    let (code, events, err) = gantry(s, &["events", "--limit", "3", "-o", "yaml"]);
    assert_eq!(code, 0, "{err}");
    let docs: Vec<serde_json::Value> = serde_yaml_ng::Deserializer::from_str(&events)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect();
    assert!(
        !docs.is_empty() && docs.iter().all(|d| d["detail"].is_string()),
        "{events}"
    );
    // Following is -f, as tail's and kubectl logs' (before: --follow only).
    let (_, help, _) = gantry(s, &["events", "--help"]);
    assert!(help.contains("-f, --follow"), "{help}");
}

/// `gantry ARGS` against `d` with `input` on its stdin.
fn gantry_stdin(d: &Daemon, args: &[&str], input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CONNECT", &d.socket)
        .env_remove("GANTRY_TOKEN")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn submit_reads_stdin_and_prints_only_the_id_when_asked() {
    let d = start();
    let out = gantry_stdin(
        &d,
        &["submit", "-", "-o", "id"],
        b"name: from-stdin\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n",
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The id alone, as `sbatch --parsable` prints it: usable as ID=$(gantry submit - -o id).
    let id: i64 = said.trim().parse().unwrap_or_else(|_| panic!("{said:?}"));
    let (code, out, err) = gantry(&d.socket, &["job", &id.to_string(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("from-stdin"), "{out}");
    // A Slurm batch script, known by its #! and #SBATCH lines: submitted with what gantry
    // does not act on said, not dropped unseen.
    let out = gantry_stdin(
        &d,
        &["submit", "-", "-o", "id"],
        b"#!/bin/bash\n#SBATCH -A applied --gres=gpu:h100:2 -p gpu\npython x.py\n",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert_eq!(
        err.trim(),
        "gantry: stdin: not acted on: `-p gpu` (line 2: gantry chooses where the job runs)"
    );
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let (code, out, err) = gantry(&d.socket, &["job", &id, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["team"], "applied", "{v}");
    // A broken file on stdin is named `stdin` with its position.
    let out = gantry_stdin(&d, &["submit", "-"], b"name: x\nnum_nodes: two\n");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("stdin:2:"), "{err}");
}

/// Job `id`'s spec as the daemon shows it (`gantry job ID -o json`).
/// The id `gantry submit … -o id` printed, once it succeeded.
fn submitted_id(out: &std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn spec_of(d: &Daemon, id: &str) -> String {
    let (code, job, err) = gantry(&d.socket, &["job", id, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&job).unwrap();
    v["spec"].as_str().unwrap().to_string()
}

/// A mount whose source is an env the file leaves empty for the launch to give (`sky launch
/// --env SKYPILOT_BUCKET=…`): without it the file is refused naming the variable and what to
/// pass at the mount that uses it (it said "the source is empty or has control characters");
/// `gantry submit --env` gives it and the job mounts that bucket; so does `--env-file` (a
/// dotenv file, as `sky launch --env-file` reads one), which `--env` overrides.
#[test]
fn a_mount_left_to_an_empty_env_is_given_at_submit() {
    let d = start();
    let file = d.dir.join("mount.yaml");
    std::fs::write(
        &file,
        "name: t\nenvs:\n  SKYPILOT_BUCKET: \"\"\nfile_mounts:\n  /artifacts:\n    source: ${SKYPILOT_BUCKET}\n    mode: COPY\nrun: ls /artifacts\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = gantry(&d.socket, &["submit", f, "--team", "applied"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("mount.yaml: file_mounts./artifacts: ${SKYPILOT_BUCKET} is not set: pass --env SKYPILOT_BUCKET=… at submit"),
        "{err}"
    );
    let dotenv = d.dir.join("bucket.env");
    std::fs::write(
        &dotenv,
        "# where this run keeps what it makes\nexport SKYPILOT_BUCKET='s3://from-file/artifacts'\n",
    )
    .unwrap();
    let env_file = dotenv.to_str().unwrap();
    let (code, out, err) = gantry(
        &d.socket,
        &[
            "submit",
            f,
            "--team",
            "applied",
            "--env-file",
            env_file,
            "-o",
            "id",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec = spec_of(&d, out.trim());
    assert!(spec.contains("s3://from-file/artifacts"), "{spec}");
    // A line that is not NAME=VALUE is named by its place in the file.
    let bad = d.dir.join("bad.env");
    std::fs::write(&bad, "A=1\nnot a pair\n").unwrap();
    let (code, _, err) = gantry(
        &d.socket,
        &["submit", f, "--env-file", bad.to_str().unwrap()],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("bad.env:2:") && err.contains("`not a pair` is not NAME=VALUE"),
        "{err}"
    );
    let (code, out, err) = gantry(
        &d.socket,
        &[
            "submit",
            f,
            "--team",
            "applied",
            "--env-file",
            env_file,
            "--env",
            "SKYPILOT_BUCKET=s3://runs/artifacts",
            "-o",
            "id",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec = spec_of(&d, out.trim());
    assert!(
        spec.contains("s3://runs/artifacts") && !spec.contains("from-file"),
        "{spec}"
    );
}

/// `gantry submit --env` and `--secret` give what the file leaves empty (a secret's value from
/// the submitter's environment); without them the file is refused before it is sent; a
/// secret's value is never shown, not even to an operator.
#[test]
fn submit_gives_envs_and_secrets_the_file_leaves_empty() {
    let d = start();
    let file = d.dir.join("job.yaml");
    std::fs::write(
        &file,
        "name: t\nresources:\n  accelerators: H100:1\nenvs:\n  HF_TOKEN:\n  EPOCHS: 3\nsecrets:\n  WANDB_API_KEY:\nrun: python train.py\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = gantry(&d.socket, &["submit", f, "--team", "applied"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("envs.HF_TOKEN, secrets.WANDB_API_KEY have no value in the file")
            && err.contains("--env HF_TOKEN=…"),
        "{err}"
    );
    let (code, _, err) = gantry(
        &d.socket,
        &[
            "submit",
            f,
            "--env",
            "HF_TOKEN=hf_x",
            "--secret",
            "NOT_SET_ANYWHERE_42",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("NOT_SET_ANYWHERE_42 is not set in your environment"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "submit",
            f,
            "--team",
            "applied",
            "--env",
            "HF_TOKEN=hf_x",
            "--secret",
            "WANDB_API_KEY",
            "-o",
            "id",
        ])
        .env("GANTRY_CONNECT", &d.socket)
        .env("WANDB_API_KEY", "k-secret-9")
        .output()
        .unwrap();
    let id = submitted_id(&out);
    let spec = spec_of(&d, &id);
    assert!(spec.contains("hf_x") && spec.contains("EPOCHS"), "{spec}");
    assert!(
        !spec.contains("k-secret-9") && spec.contains("WANDB_API_KEY"),
        "{spec}"
    );
    // --gpus and --num-nodes override the file's; a bare count is any model.
    let (code, out, err) = gantry(
        &d.socket,
        &[
            "submit",
            f,
            "--team",
            "applied",
            "--env",
            "HF_TOKEN=x",
            "--secret",
            "WANDB_API_KEY=y",
            "--gpus",
            "H100:2",
            "--num-nodes",
            "2",
            "-o",
            "id",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec = spec_of(&d, out.trim());
    assert!(
        spec.contains("num_nodes: 2") && spec.contains("accelerators: H100:2"),
        "{spec}"
    );
    let (code, _, err) = gantry(&d.socket, &["submit", f, "--gpus", "H100:two"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("as --env, --secret, --gpus and --num-nodes made it"),
        "{err}"
    );
}

/// `workdir: .` is the submitter's directory, as `sky launch` reads it: made absolute for a
/// daemon on this machine.
#[test]
fn a_relative_workdir_is_the_submitters() {
    let d = start();
    let here = d.dir.join("project");
    std::fs::create_dir_all(&here).unwrap();
    std::fs::write(
        here.join("job.yaml"),
        "name: w\nworkdir: .\nresources:\n  accelerators: H100:1\nrun: python train.py\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["submit", "job.yaml", "--team", "applied", "-o", "id"])
        .env("GANTRY_CONNECT", &d.socket)
        .current_dir(&here)
        .output()
        .unwrap();
    let id = submitted_id(&out);
    let want = format!("workdir: {}", here.canonicalize().unwrap().display());
    let spec = spec_of(&d, &id);
    assert!(spec.contains(&want), "{spec}");
    // Over TCP the daemon cannot read this machine: the directory is shipped to it
    // (tests/daemon/pipeline.rs runs a job in the shipped copy).
}

/// Time is said and read as calendar time: events in RFC 3339, report windows as dates in the
/// fleet's zone, the budget month named (before: seconds on the daemon's clock everywhere, and
/// `--since 2026-11-01` refused).
#[test]
fn reports_and_events_speak_calendar_time() {
    let d = start();
    let s = &d.socket;
    let near_now = |t: &str| {
        let t = chrono::DateTime::parse_from_rfc3339(t)
            .unwrap_or_else(|e| panic!("`{t}` is not RFC 3339: {e}"));
        let off = (t.timestamp() - chrono::Utc::now().timestamp()).abs();
        assert!(off < 2 * 86_400, "{t} is not about now");
    };
    let spec = d.dir.join("cal.yaml");
    std::fs::write(
        &spec,
        "name: cal\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, _, err) = gantry(s, &["submit", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let (code, events, err) = gantry(s, &["events", "--limit", "3", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let first = events.lines().next().expect("the submission is an event");
    let e: serde_json::Value = serde_json::from_str(first).unwrap();
    near_now(e["time"].as_str().unwrap());
    let (_, table, _) = gantry(s, &["events", "--limit", "1"]);
    assert!(
        table.starts_with(&e["time"].as_str().unwrap()[..10]),
        "{table}"
    );
    // `gantry job` on the same clock (issue 41: it said `t=103s`).
    let id = e["job"].as_i64().unwrap().to_string();
    let (code, detail, err) = gantry(s, &["job", &id]);
    assert_eq!(code, 0, "{err}");
    assert!(!detail.contains("t="), "{detail}");
    let day = &e["time"].as_str().unwrap()[..10];
    assert!(detail.contains(&format!("submitted {day}")), "{detail}");
    assert!(
        detail.contains(&format!("    {day}")),
        "events on the calendar: {detail}"
    );

    let (code, json, err) = gantry(s, &["report", "--since", "2020-01-01", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let r: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        r["since"], 0.0,
        "before the daemon's first start: its beginning"
    );
    near_now(r["until_time"].as_str().unwrap());
    for since in ["2026-11-01T09:30", "2026-11-01T09:30:00+01:00", "7d", "0"] {
        let (code, _, err) = gantry(s, &["report", "--since", since]);
        assert_eq!(code, 0, "{since}: {err}");
    }
    let (code, _, err) = gantry(s, &["report", "--since", "yesterday"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("since `yesterday`: expected a date (2026-11-01), a time in UTC"),
        "{err}"
    );
    let (_, table, _) = gantry(s, &["report"]);
    assert!(table.starts_with("SIMULATED spend from 20"), "{table}");

    let (_, teams, _) = gantry(s, &["teams"]);
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    assert!(
        teams.contains(&format!("budget month {month} (UTC); the next begins ")),
        "{teams}"
    );
    // A team that spent nothing spent 0, not -0 (an empty sum of f64 is -0.0).
    assert!(!teams.contains("-0.0"), "{teams}");
}

/// `gantry jobs -w` prints the list, then each job again as it changes, read from the event
/// stream (before: no --watch at all).
#[test]
fn jobs_watch_prints_each_change_as_it_happens() {
    use std::io::BufRead;
    let d = start();
    let s = &d.socket;
    let mut watcher = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["jobs", "-w", "-o", "json", "--team", "applied"])
        .env("GANTRY_CONNECT", s)
        .env_remove("GANTRY_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<serde_json::Value>();
    let out = watcher.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let until = |pred: &dyn Fn(&serde_json::Value) -> bool| {
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(30) {
            if let Ok(v) = rx.recv_timeout(Duration::from_millis(200)) {
                if pred(&v) {
                    return v;
                }
            }
        }
        panic!("the watch printed no such row");
    };
    let spec = d.dir.join("w.yaml");
    std::fs::write(
        &spec,
        "name: watched\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, out, err) = gantry(s, &["submit", spec.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let id = serde_json::from_str::<serde_json::Value>(&out).unwrap()["id"]
        .as_i64()
        .unwrap();
    let first = until(&|v| v["id"] == id);
    assert_eq!(first["team"], "applied");
    let (code, _, err) = gantry(s, &["cancel", &id.to_string()]);
    assert_eq!(code, 0, "{err}");
    until(&|v| v["id"] == id && v["state"] == "cancelled");
    let _ = watcher.kill();
    let _ = watcher.wait();
    // The fleet's pools too, as a table: the header once, then rows.
    let mut fleet = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["fleet", "-w"])
        .env("GANTRY_CONNECT", s)
        .env_remove("GANTRY_TOKEN")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(fleet.stdout.take().unwrap()).lines();
    let header = lines.next().unwrap().unwrap();
    let row = lines.next().unwrap().unwrap();
    assert!(
        header.starts_with("POOL") && header.contains("$/H/NODE"),
        "{header}"
    );
    assert!(row.contains('/') && !row.starts_with("POOL"), "{row}");
    let _ = fleet.kill();
    let _ = fleet.wait();
}

/// Dynamic completion asks the daemon: job ids with their names, teams, pools (before: only
/// the static script, which knows no job); with no daemon it completes no ids and says nothing.
#[test]
fn completion_offers_the_daemons_job_ids_teams_and_pools() {
    let d = start();
    let spec = d.dir.join("c.yaml");
    std::fs::write(
        &spec,
        "name: tabbed\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, _, err) = gantry(&d.socket, &["submit", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let complete = |connect: &Path, words: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["--", "gantry"])
            .args(words)
            .env("COMPLETE", "fish")
            .env("GANTRY_CONNECT", connect)
            .env_remove("GANTRY_TOKEN")
            .output()
            .unwrap();
        assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let ids = complete(&d.socket, &["cancel", ""]);
    assert!(
        ids.lines()
            .any(|l| l.starts_with("1\t") && l.contains("tabbed") && l.contains("applied")),
        "{ids}"
    );
    let teams = complete(&d.socket, &["jobs", "--team", "app"]);
    assert!(teams.lines().any(|l| l.starts_with("applied\t")), "{teams}");
    let pools = complete(&d.socket, &["fleet", "--pool", "aws/"]);
    assert!(
        !pools.is_empty() && pools.lines().all(|l| l.starts_with("aws/")),
        "{pools}"
    );
    let none = complete(&d.dir.join("no-daemon.sock"), &["cancel", ""]);
    assert!(!none.lines().any(|l| l.starts_with("1\t")), "{none}");
}

#[test]
fn a_fleet_with_nothing_idle_costs_zero_not_minus_zero() {
    // Seen on a GPU host with its one GPU busy: `($-0.00/h idle)` — an empty f64 sum is -0.0.
    let dir = gantry_testkit::scratch::scratch("dcli-zero");
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        "[[teams]]\nname = \"default\"\n\n[[pools]]\nprovider = \"onprem\"\nbackend = \"simulated\"\nregion = \"r\"\nzone = \"z\"\nname = \"cpu\"\ninstance_type = \"box\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 64\nmemory_gb = 512\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nnodes = 0\n",
    )
    .unwrap();
    let d = start_with(&["--config", fleet.to_str().unwrap()]);
    let (code, out, err) = gantry(&d.socket, &["fleet"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("($0.00/h idle)"), "{out}");
    assert!(!out.contains("-0.00"), "{out}");
    let (_, json, _) = gantry(&d.socket, &["fleet", "-o", "json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert!(
        v["idle_dollars_per_hour"]
            .as_f64()
            .unwrap()
            .is_sign_positive(),
        "{json}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Fair share is shown as the queue uses it: `gantry teams` has each team's decayed GPU-hours
/// and its place in the order (before: the console's "use/weight" was the GPUs held this
/// moment, and nothing said which team goes first within a class).
#[test]
fn teams_show_the_fair_share_usage_the_queue_goes_by() {
    let dir = gantry_testkit::scratch::scratch("dcli-share");
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        "[[teams]]\nname = \"busy\"\n\n[[teams]]\nname = \"quiet\"\nweight = 2.0\n\n[[pools]]\nprovider = \"onprem\"\nbackend = \"simulated\"\nregion = \"r\"\nzone = \"z\"\nname = \"p\"\ninstance_type = \"box\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 64\nmemory_gb = 512\ncapacity = \"reserved\"\nprice_per_hour = 8.0\nnodes = 1\n",
    )
    .unwrap();
    let d = start_with(&["--config", fleet.to_str().unwrap()]);
    let spec = dir.join("eight.yaml");
    std::fs::write(
        &spec,
        "name: eight\nresources:\n  accelerators: H100:8\nrun: x\n",
    )
    .unwrap();
    let (code, _, err) = gantry(
        &d.socket,
        &["submit", spec.to_str().unwrap(), "--team", "busy"],
    );
    assert_eq!(code, 0, "{err}");
    let teams = || -> Vec<serde_json::Value> {
        let (code, json, err) = gantry(&d.socket, &["teams", "-o", "json"]);
        assert_eq!(code, 0, "{err}");
        serde_json::from_str(&json).unwrap()
    };
    let named = |rows: &[serde_json::Value], n: &str| {
        rows.iter().find(|r| r["name"] == n).cloned().unwrap()
    };
    common::wait_for(&d, 30, "busy's usage to count", || {
        named(&teams(), "busy")["usage_gpu_hours"].as_f64().unwrap() > 0.0
    });
    let rows = teams();
    let (busy, quiet) = (named(&rows, "busy"), named(&rows, "quiet"));
    assert_eq!(quiet["usage_gpu_hours"].as_f64(), Some(0.0), "{quiet}");
    assert_eq!(
        (
            quiet["fair_share_rank"].as_u64(),
            busy["fair_share_rank"].as_u64()
        ),
        (Some(1), Some(2))
    );
    let (_, table, _) = gantry(&d.socket, &["teams"]);
    let header = table.lines().next().unwrap();
    assert!(
        header.contains("USAGE GPU-H") && header.contains("FAIR"),
        "{table}"
    );
    let quiet_line = table.lines().find(|l| l.starts_with("quiet")).unwrap();
    assert!(quiet_line.contains(" #1 "), "{table}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_node_over_time_from_the_cli_and_the_api() {
    let d = start();
    let s = &d.socket;
    let (code, out, err) = gantry(s, &["fleet", "--pool", "0", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let pool: serde_json::Value = serde_json::from_str(&out).unwrap();
    let name = pool["nodes"][0]["name"].as_str().unwrap().to_string();
    let (code, out, err) = gantry(s, &["fleet", "--node", &name, "--range", "5m"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains(&format!("node {name}")) && out.contains("the last 5m"),
        "{out}"
    );
    assert!(out.contains("UTIL%") && out.contains("WHO"), "{out}");
    let (code, out, err) = gantry(s, &["fleet", "--node", &name, "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["range"], "1h");
    assert_eq!(v["step_s"], 60.0);
    assert!(v["gpus"].as_array().is_some_and(|g| !g.is_empty()), "{v}");
    // Mistakes say what is allowed, with the CLI's exit codes (2 usage, 3 not found).
    let (code, _, err) = gantry(s, &["fleet", "--node", &name, "--range", "2h"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("5m, 1h or 24h"), "{err}");
    let (code, _, err) = gantry(s, &["fleet", "--node", "no-such-node"]);
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("no such node"), "{err}");
}

/// What only the daemon can judge (the fleet's models, teams, classes) is said at the field of
/// the file, as the file's own errors are (before: no file:line:col at all).
#[test]
fn refusals_the_fleet_decides_point_at_their_field() {
    let d = start();
    let cases = [
        (
            "name: x\nteam: applied\nresources:\n  cpus: 1\n  accelerators: B300:8\nrun: x\n",
            "5:3: `resources.accelerators`: unknown GPU model `B300`",
        ),
        (
            "name: x\nteam: nosuch\nrun: x\n",
            "2:1: `team`: unknown team `nosuch`",
        ),
        (
            "name: x\nteam: applied\npriority: urgent-ish\nrun: x\n",
            "3:1: `priority`: unknown priority class `urgent-ish`",
        ),
        (
            "name: x\nteam: applied\nresources:\n  infra: azure\n  accelerators: H100:1\nrun: x\n",
            "4:3: `resources.infra`: infra azure: no pool of this fleet is there",
        ),
    ];
    for (n, (text, want)) in cases.iter().enumerate() {
        let file = d.dir.join(format!("f{n}.yaml"));
        std::fs::write(&file, text).unwrap();
        let (code, _, err) = gantry(&d.socket, &["submit", file.to_str().unwrap()]);
        assert_ne!(code, 0);
        let want = format!("{}:{want}", file.display());
        assert!(err.contains(&want), "got  {err}\nwant {want}");
    }
}

/// A dstack task is submitted as it is written: a bare name in `env` waits for `--env`, which
/// lands in its `env` list; `--gpus` and `--num-nodes` in its own fields.
#[test]
fn a_dstack_task_takes_env_gpus_and_nodes_at_submit() {
    let d = start();
    let file = d.dir.join("train.dstack.yml");
    std::fs::write(
        &file,
        "type: task\nname: dtrain\nenv:\n  - HF_TOKEN\ncommands:\n  - python train.py\nresources:\n  gpu: H100:1\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let (code, _, err) = gantry(&d.socket, &["submit", f, "--team", "applied"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("env.HF_TOKEN has no value in the file"),
        "{err}"
    );
    let (code, out, err) = gantry(
        &d.socket,
        &[
            "submit",
            f,
            "--team",
            "applied",
            "--env",
            "HF_TOKEN=hf_x",
            "--gpus",
            "H100:2",
            "--num-nodes",
            "2",
            "-o",
            "id",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let spec = spec_of(&d, out.trim());
    assert!(spec.contains("HF_TOKEN=hf_x"), "{spec}");
    assert!(
        spec.contains("gpu: H100:2") && spec.contains("nodes: 2"),
        "{spec}"
    );
    let (code, _, err) = gantry(
        &d.socket,
        &["submit", f, "--team", "applied", "--secret", "HF_TOKEN=x"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("a dstack task has no secrets"), "{err}");
}

/// `gantry --context NAME`: the daemon of console.toml's context of that name, with its token
/// file, for any command; an unknown name lists the known ones; naming a daemon twice is
/// refused.
#[test]
fn context_names_a_daemon_from_console_toml_with_its_token() {
    let d = start();
    let cfg = d.dir.join("ctx-cfg");
    std::fs::create_dir_all(cfg.join("gantry")).unwrap();
    let token = common::token(&d, "operator", None);
    std::fs::write(cfg.join("lab.token"), format!("{token}\n")).unwrap();
    std::fs::write(
        cfg.join("gantry").join("console.toml"),
        format!(
            "[[contexts]]\nname = \"local\"\nconnect = \"{}\"\n\n[[contexts]]\nname = \"lab\"\nconnect = \"http://127.0.0.1:{}\"\ntoken_file = \"{}\"\n",
            d.socket.display(),
            d.port,
            cfg.join("lab.token").display()
        ),
    )
    .unwrap();
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(args)
            .env("XDG_CONFIG_HOME", &cfg)
            .env_remove("GANTRY_CONNECT")
            .env_remove("GANTRY_TOKEN")
            .env_remove("GANTRY_CONTEXT")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    for ctx in ["local", "lab"] {
        let (code, out, err) = run(&["--context", ctx, "teams", "-o", "json"]);
        assert_eq!(code, 0, "{ctx}: {err}");
        assert!(out.contains("\"name\""), "{ctx}: {out}");
    }
    // Over TCP without the token file's token, the daemon refuses: the context's token is
    // what let it in.
    std::fs::write(cfg.join("lab.token"), "not-a-token\n").unwrap();
    let (code, _, err) = run(&["--context", "lab", "teams"]);
    assert_eq!(code, 4, "{err}");
    let (code, _, err) = run(&["--context", "prod", "jobs"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("no context `prod`; contexts: local, lab"),
        "{err}"
    );
    let (code, _, err) = run(&["--context", "lab", "--connect", "/tmp/x.sock", "jobs"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--context and --connect"), "{err}");
}

/// The daemon's minutely look at its clusters (`--cluster-look-every`) reads only the fleet
/// file: it ran this host's NVML discovery each time, saying so on stderr (a line a minute,
/// forever, on a host with a `gpu = "auto"` local pool).
#[test]
fn looking_at_the_clusters_does_not_rediscover_this_host() {
    let dir = common::temp_dir("look-every");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, common::local_fleet("lab", "gpu = \"auto\"\n")).unwrap();
    let log = dir.join("daemon.err");
    let err = std::fs::File::create(&log).unwrap();
    let d = common::start_with(
        dir.join("d"),
        &[
            "--config",
            fleet.to_str().unwrap(),
            "--cluster-look-every",
            "1s",
        ],
        |c| {
            c.stderr(err);
        },
    );
    std::thread::sleep(Duration::from_millis(3500));
    drop(d);
    let text = std::fs::read_to_string(&log).unwrap();
    let said = text
        .lines()
        .filter(|l| l.contains("local/here/here/host: NVML"))
        .count();
    assert_eq!(said, 1, "discovery is said once, at start:\n{text}");
}

/// Errors that misled (issue 41), each now saying what was wrong and what to do, with the exit
/// codes `--help` lists: `--connect` to a directory ("Connection refused"), a `HOST:PORT`
/// without `http://` ("No such file"), another user's socket ("Permission denied … is gantry
/// daemon running?" while it ran), `jobs --state runing` ("(no jobs match)", exit 0), and the
/// console exiting 2 where every command exits 5 for a daemon it cannot reach.
#[test]
fn errors_say_what_was_wrong_and_what_to_do() {
    let d = start();
    let (code, _, err) = gantry(&d.dir, &["jobs"]);
    assert_eq!(code, 5, "{err}");
    assert!(
        err.contains("is a directory, not the daemon's socket"),
        "{err}"
    );
    let (code, _, err) = gantry_as("127.0.0.1:7450", None, &["jobs"]);
    assert_eq!(code, 5, "{err}");
    assert!(err.contains("say --connect http://127.0.0.1:7450"), "{err}");
    let (code, _, err) = gantry(&d.socket, &["jobs", "--state", "runing"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("state `runing` is not a job state; did you mean `running`?"),
        "{err}"
    );
    let (code, _, _) = gantry(&d.socket, &["jobs", "--state", "running,pending"]);
    assert_eq!(code, 0);
    // Another user (root can reach any socket: the CLI runs as nobody).
    let runuser = Path::new("/usr/sbin/runuser");
    if unsafe { libc::geteuid() } == 0 && runuser.exists() {
        let exe = std::env::temp_dir().join(format!("gantry-nobody-{}", std::process::id()));
        std::fs::copy(env!("CARGO_BIN_EXE_gantry"), &exe).unwrap();
        let out = Command::new(runuser)
            .args(["-u", "nobody", "--"])
            .arg(&exe)
            .arg("--connect")
            .arg(&d.socket)
            .arg("jobs")
            .env("HOME", "/tmp")
            .output()
            .unwrap();
        let _ = std::fs::remove_file(&exe);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(5), "{err}");
        assert!(
            err.contains("Unix socket is its own user's only (the daemon may well be running)"),
            "{err}"
        );
    }
    // The console, on a terminal (`script` gives it one), for a daemon that is not there.
    if Path::new("/usr/bin/script").exists() {
        let gone = d.dir.join("gone.sock");
        let out = Command::new("script")
            .args(["-qec"])
            .arg(format!(
                "{} --connect {}",
                env!("CARGO_BIN_EXE_gantry"),
                gone.display()
            ))
            .arg("/dev/null")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(5),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// `gantry events -f` prints what follows as it printed what came before (issue 41: it
/// switched format mid-stream, from RFC 3339 times to the console's `HH:MM` lines), and keeps
/// to `--job`.
#[test]
fn following_events_keeps_one_format_and_the_job_filter() {
    use std::io::BufRead;
    let d = start();
    let spec = d.dir.join("f.yaml");
    std::fs::write(
        &spec,
        "name: f\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, _, err) = gantry(&d.socket, &["submit", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let mut follow = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["events", "-f", "--job", "2"])
        .env("GANTRY_CONNECT", &d.socket)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let out = follow.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(out).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    std::thread::sleep(Duration::from_millis(500));
    let (code, _, err) = gantry(&d.socket, &["submit", spec.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a followed event");
    let _ = follow.kill();
    let _ = follow.wait();
    let (time, rest) = line.split_once(' ').unwrap();
    assert!(
        chrono::DateTime::parse_from_rfc3339(time).is_ok(),
        "followed as listed (RFC 3339 first): {line}"
    );
    assert!(rest.starts_with("job 2 "), "only job 2's: {line}");
}

/// `gantry jobs` lists in queue order as its help says: what waits first (pending by position,
/// then held), then what runs, then what ended (it listed running jobs first).
#[test]
fn jobs_lists_what_waits_before_what_runs() {
    let d = start();
    let s = &d.socket;
    let spec = d.dir.join("chain.yaml");
    // A pipeline: the first task runs, the second waits for it, the third is held.
    let task = |n: &str| format!("name: {n}\nresources:\n  accelerators: H100:1\nrun: x\n");
    std::fs::write(
        &spec,
        format!(
            "name: chain\n---\n{}---\n{}---\n{}",
            task("a"),
            task("b"),
            task("c")
        ),
    )
    .unwrap();
    let (code, out, err) = gantry(
        s,
        &[
            "submit",
            spec.to_str().unwrap(),
            "--team",
            "applied",
            "-o",
            "id",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let ids: Vec<i64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    let (runs, waits, held) = (ids[0], ids[1], ids[2]);
    assert_eq!(gantry(s, &["hold", &held.to_string()]).0, 0);
    let t0 = Instant::now();
    let rows = loop {
        let (_, json, _) = gantry(s, &["jobs", "--team", "applied", "-o", "json"]);
        let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
        let state = |id: i64| {
            rows.iter()
                .find(|r| r["id"] == id)
                .map(|r| r["state"].as_str().unwrap_or("").to_string())
        };
        if state(runs).as_deref() == Some("running") && state(held).as_deref() == Some("held") {
            break rows;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{json}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let rank = |s: &str| match s {
        "pending" => 0,
        "held" => 1,
        "running" | "preempting" => 2,
        _ => 3,
    };
    let ranks: Vec<u8> = rows
        .iter()
        .map(|r| rank(r["state"].as_str().unwrap()))
        .collect();
    assert!(ranks.windows(2).all(|w| w[0] <= w[1]), "{rows:?}");
    let (_, table, _) = gantry(s, &["jobs", "--team", "applied"]);
    let line_of = |id: i64| {
        table
            .lines()
            .position(|l| l.trim_start().starts_with(&format!("{id} ")))
            .unwrap_or_else(|| panic!("job {id} not listed:\n{table}"))
    };
    assert!(
        line_of(waits) < line_of(held) && line_of(held) < line_of(runs),
        "{table}"
    );
}

/// A history page longer than one turn of the actor (200 jobs) comes whole, newest first,
/// each job once: the page is read in turns, so a submission never waits behind all of it.
#[test]
fn a_history_page_longer_than_a_turn_is_whole_and_in_order() {
    let d = start();
    let s = &d.socket;
    let spec = "name: many\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n";
    let mut ids = std::collections::BTreeSet::new();
    for _ in 0..450 {
        let out = common::request(s, "POST /v1/jobs", spec);
        let (status, body) = common::split(&out);
        assert!(status.contains("201"), "{out}");
        let id = serde_json::from_str::<serde_json::Value>(&body).unwrap()["id"]
            .as_i64()
            .unwrap();
        let out = common::request(s, &format!("POST /v1/jobs/{id}/cancel"), "");
        assert!(common::split(&out).0.contains("20"), "{out}");
        ids.insert(id);
    }
    let (code, json, err) = gantry(
        s,
        &[
            "history", "--team", "applied", "--limit", "1000", "-o", "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let jobs: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let listed: Vec<i64> = jobs.iter().map(|j| j["id"].as_i64().unwrap()).collect();
    let unique: std::collections::BTreeSet<i64> = listed.iter().copied().collect();
    assert_eq!(unique.len(), listed.len(), "each job once");
    assert!(
        ids.is_subset(&unique),
        "{} of {} listed",
        unique.len(),
        ids.len()
    );
    // Newest first: by end, then id.
    let ends: Vec<(String, i64)> = jobs
        .iter()
        .map(|j| {
            (
                j["ended"].as_str().unwrap().to_string(),
                j["id"].as_i64().unwrap(),
            )
        })
        .collect();
    assert!(ends.windows(2).all(|w| w[0] >= w[1]), "{ends:?}");
    // A page from the middle, across a turn's edge.
    let (_, json, _) = gantry(
        s,
        &[
            "history", "--team", "applied", "--offset", "150", "--limit", "100", "-o", "json",
        ],
    );
    let page: Vec<i64> = serde_json::from_str::<Vec<serde_json::Value>>(&json)
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(page, listed[150..250], "the same jobs as the whole page's");
}

/// `gantry history` reads finished jobs from the journal with each run (nodes, times, how it
/// ended, cost), filtered by window, team and state, paged; bad input is exit 2.
#[test]
fn history_lists_finished_jobs_with_their_runs() {
    let d = start();
    let s = &d.socket;
    let spec = d.dir.join("h.yaml");
    std::fs::write(
        &spec,
        "name: audited\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, out, err) = gantry(s, &["submit", spec.to_str().unwrap(), "-o", "id"]);
    assert_eq!(code, 0, "{err}");
    let id = out.trim().to_string();
    let t0 = Instant::now();
    while !gantry(s, &["job", &id, "-o", "json"])
        .1
        .contains("\"running\"")
    {
        assert!(t0.elapsed() < Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(gantry(s, &["cancel", &id]).0, 0);
    let (code, json, err) = gantry(
        s,
        &[
            "history", "--team", "applied", "--since", "1h", "-o", "json",
        ],
    );
    assert_eq!(code, 0, "{err}");
    let jobs: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    let job = jobs
        .iter()
        .find(|j| j["id"].as_i64().map(|v| v.to_string()).as_deref() == Some(id.as_str()))
        .unwrap_or_else(|| panic!("{json}"));
    assert_eq!(job["state"], "cancelled");
    let runs = job["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 1, "{job}");
    assert_eq!(runs[0]["nodes"].as_array().unwrap().len(), 1, "{job}");
    assert!(
        runs[0]["ended"].as_str().unwrap().starts_with("cancelled"),
        "{job}"
    );
    assert!(runs[0]["ended_time"].is_string(), "{job}");
    // The table: the job, then its run.
    let (_, table, _) = gantry(s, &["history"]);
    assert!(
        table.contains("audited") && table.contains("#1 "),
        "{table}"
    );
    // Filters: another team, a window before it, a page past it.
    for args in [
        &["history", "--team", "nobody-here"][..],
        &["history", "--until", "2020-01-01"],
        &["history", "--offset", "1000"],
    ] {
        let (code, out, err) = gantry(s, args);
        assert_eq!(code, 0, "{args:?}: {err}");
        assert!(out.contains("(no jobs match)"), "{args:?}: {out}");
    }
    let (code, _, err) = gantry(s, &["history", "--state", "runing"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--state runing"), "{err}");
}

/// Each job records who submitted it — the Unix user on the socket (the kernel's word), the
/// Unix account a token was issued for over TCP (`token create --user`), never a token's
/// label — and `gantry jobs -u USER|me` lists theirs, as `squeue -u`.
#[test]
fn jobs_belong_to_who_submitted_them() {
    let d = start();
    let s = &d.socket;
    let spec = d.dir.join("mine.yaml");
    std::fs::write(
        &spec,
        "name: mine\nteam: applied\nresources:\n  accelerators: H100:1\nrun: x\n",
    )
    .unwrap();
    let (code, out, err) = gantry(s, &["submit", spec.to_str().unwrap(), "-o", "id"]);
    assert_eq!(code, 0, "{err}");
    let mine: i64 = out.trim().parse().unwrap();
    let me = gantry::daemon::auth::this_user().unwrap();
    let token = |label: &str, user: Option<&str>, role: &str| {
        let mut args = vec!["token", "create", "--role", role, "--label", label];
        if role == "researcher" {
            args.extend(["--team", "applied"]);
        }
        if let Some(u) = user {
            args.extend(["--user", u]);
        }
        let (code, token, err) = gantry(s, &args);
        assert_eq!(code, 0, "{err}");
        token.trim().to_string()
    };
    // Over TCP with a researcher's token issued for the account nobody, labelled ci-bot.
    let bot = token("ci-bot", Some("nobody"), "researcher");
    let url = format!("http://127.0.0.1:{}", d.port);
    let (code, out, err) = gantry_as(
        &url,
        Some(&bot),
        &["submit", spec.to_str().unwrap(), "-o", "id"],
    );
    assert_eq!(code, 0, "{err}");
    let bots: i64 = out.trim().parse().unwrap();
    // A token labelled root names nobody: its job is not root's (and shares none of root's
    // limits).
    let spoof = token("root", None, "researcher");
    let (code, out, err) = gantry_as(
        &url,
        Some(&spoof),
        &["submit", spec.to_str().unwrap(), "-o", "id"],
    );
    assert_eq!(code, 0, "{err}");
    let spoofed: i64 = out.trim().parse().unwrap();
    let ids = |args: &[&str], token: Option<&str>, at: &str| -> Vec<i64> {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let (code, json, err) = gantry_as(at, token, &a);
        assert_eq!(code, 0, "{a:?}: {err}");
        let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
        rows.iter().filter_map(|r| r["id"].as_i64()).collect()
    };
    let socket = s.to_str().unwrap();
    let by_me = ids(&["jobs", "-u", &me], None, socket);
    assert!(by_me.contains(&mine) && !by_me.contains(&bots), "{by_me:?}");
    assert_eq!(ids(&["jobs", "-u", "me"], None, socket), by_me);
    let by_bot = ids(&["jobs", "--user", "nobody"], None, socket);
    assert_eq!(by_bot, [bots]);
    assert!(!ids(&["jobs", "--user", "root"], None, socket).contains(&spoofed));
    let (_, shown, _) = gantry(s, &["job", &spoofed.to_string()]);
    assert!(!shown.contains("submitted by root"), "{shown}");
    // `me` over the token is the account it was issued for; a token for nobody has no `me`.
    assert_eq!(ids(&["jobs", "-u", "me"], Some(&bot), &url), [bots]);
    let (code, _, err) = gantry_as(&url, Some(&spoof), &["jobs", "-u", "me"]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("knows no Unix user"), "{err}");
    // Who is in `gantry job` and the wide table.
    let (_, shown, _) = gantry(s, &["job", &mine.to_string()]);
    assert!(shown.contains(&format!("submitted by {me}")), "{shown}");
    let (_, wide, _) = gantry(s, &["jobs", "-o", "wide"]);
    assert!(wide.contains("USER") && wide.contains("nobody"), "{wide}");
    // A user of this host with no jobs: none; someone nobody knows: exit 2, said (to an
    // operator).
    let (code, out, _) = gantry(s, &["jobs", "-u", "bin"]);
    assert_eq!(code, 0);
    assert!(out.contains("(no jobs match)"), "{out}");
    let (code, _, err) = gantry(s, &["jobs", "-u", "no-such-user-anywhere"]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("user `no-such-user-anywhere` is unknown"),
        "{err}"
    );
    // To anyone else the same question says nothing of the host's accounts: an empty list
    // whether the account exists or not.
    let viewer = token("watcher", None, "viewer");
    for who in ["bin", "no-such-user-anywhere"] {
        assert_eq!(
            ids(&["jobs", "-u", who], Some(&viewer), &url),
            Vec::<i64>::new(),
            "{who}"
        );
    }
    // The bill by who submitted (both jobs run on the simulated fleet, so both are charged).
    let t0 = Instant::now();
    loop {
        let (code, json, err) = gantry(s, &["report", "--by", "user", "-o", "json"]);
        assert_eq!(code, 0, "{err}");
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        let keys: Vec<&str> = v["rows"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|r| r["key"].as_str())
            .collect();
        if keys.contains(&me.as_str()) && keys.contains(&"nobody") {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "{json}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
