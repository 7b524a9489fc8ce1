//! A real Slurm cluster (Debian's slurm-wlm 22.05: `slurmctld`, `slurmd`, `slurmrestd`, with
//! `munged`), started by each test on 127.0.0.1 ports with GPUs declared as GRES (no GPU is
//! needed): `gantry slurm` reading it through slurmrestd, and gantry's daemon running jobs
//! there. Needs root and the packages (`.ci/run` installs them); without them each test says
//! it skipped.

use crate::support::daemon as common;
use crate::support::slurm_cluster;

use common::{cli, events, free_port, job, log_text, state, submit, wait_for};
use serde_json::Value;
use slurm_cluster::{
    can_run, daemon_over, daemon_over_as_nobody, daemon_over_partitions, daemon_over_with,
    gantry_jobs, restart_over, Cluster,
};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn gantry_slurm_shows_gpus_who_holds_them_and_why_jobs_wait() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("show", &[("gpu-a", "a100", 4)]);
    let holder = c.sbatch(&["-J", "holder", "--gres=gpu:a100:3", "--wrap", "sleep 120"]);
    c.wait_for("the first job to run", 30, |c| {
        c.slurm("squeue", &["-h", "-j", &holder.to_string(), "-o", "%T"])
            .trim()
            == "RUNNING"
    });
    let waiting = c.sbatch(&[
        "-J",
        "waiting",
        "--nodelist=gpu-a",
        "--gres=gpu:a100:2",
        "--wrap",
        "sleep 1",
    ]);
    c.wait_for("the second job to be held back for resources", 30, |c| {
        c.slurm("squeue", &["-h", "-j", &waiting.to_string(), "-o", "%r"])
            .trim()
            == "Resources"
    });
    let token = c.token("nobody");
    let out = c.gantry(&token, &["--user", "nobody", "-o", "json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["api"], "v0.0.38", "{v}");
    assert!(v["slurm"].as_str().unwrap().starts_with("22.05"), "{v}");
    let node = &v["nodes"][0];
    assert_eq!(node["name"], "gpu-a");
    assert_eq!(node["gpus"][0]["model"], "a100");
    assert_eq!(node["gpus"][0]["count"], 4);
    assert_eq!(node["gpus_used"][0]["count"], 3, "{node}");
    assert_eq!(
        node["gpus_used"][0]["indices"],
        serde_json::json!([0, 1, 2])
    );
    let job = |id: u64| {
        v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|j| j["id"] == id)
            .cloned()
            .unwrap_or_else(|| panic!("job {id} in {v}"))
    };
    let h = job(holder);
    assert_eq!(
        (h["state"].as_str(), h["user"].as_str()),
        (Some("running"), Some("nobody"))
    );
    assert_eq!(h["gpus_per_node"], 3);
    let w = job(waiting);
    assert_eq!(w["state"], "pending");
    assert_eq!(w["reason_code"], "Resources");
    // Where it is pinned, while it waits (how gantry finds its own waiting runs again).
    assert_eq!(w["required_nodes"], "gpu-a", "{w}");
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .starts_with("waits for free resources"),
        "{w}"
    );
    // The table says the same on one screen.
    let out = c.gantry(&token, &["--user", "nobody"]);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("3/4 a100"), "{table}");
    assert!(table.contains("waits for free resources"), "{table}");
    // Pools for the fleet file, from the nodes' GRES: one that gantry loads as it is.
    let out = c.gantry(&token, &["--user", "nobody", "--fleet"]);
    let pools = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "provider = \"slurm\"",
        "name = \"gpu-a100\"",
        "gpu = \"A100\"",
        "gpus_per_node = 4",
        "vram_gb = 40  # CHECK: A100s come with 40 or 80 GB",
        "partition = \"gpu\"",
        "hosts = [\"gpu-a\"]",
    ] {
        assert!(pools.contains(line), "{line:?} in {pools}");
    }
    let fleet =
        gantry::config::fleet::parse("fleet.toml", &format!("[[teams]]\nname = \"lab\"\n{pools}"))
            .unwrap_or_else(|e| panic!("{e}\n{pools}"));
    assert_eq!(fleet.pools[0].hosts.len(), 1);
    assert_eq!(
        fleet.pools[0].slurm.as_ref().unwrap().user.as_deref(),
        Some("nobody"),
        "the stanza reads as the token's user: {pools}"
    );
    // With no --user, gantry reads as the token's own user (not $USER, whose token it is not).
    let out = c.gantry_as(&token, "root", &["--fleet"]);
    let pools = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && pools.contains("user = \"nobody\""),
        "{}{pools}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Named someone else, the refusal says whose the token is and what fixes it.
    let out = c.gantry_as(&token, "root", &["--user", "root"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("is nobody's, but gantry reads as root")
            && err.contains("--user nobody"),
        "{err}"
    );
    // An expired token says so, with how long tokens last and how to make one that lasts.
    let short = c.token_for("nobody", 1);
    std::thread::sleep(Duration::from_secs(3));
    let out = c.gantry(&short, &["--user", "nobody"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("expired") && err.contains("lifespan="),
        "{err}"
    );
    // A token slurmctld does not take is an error that says what to do.
    let out = c.gantry("not-a-token", &["--user", "nobody"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("not a JWT")
            && err.contains("scontrol token username=USER"),
        "{err}"
    );
    // A wrong address names itself.
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "slurm",
            "--slurmrestd",
            &format!("http://127.0.0.1:{}", free_port()),
        ])
        .env("SLURM_JWT", &token)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("cannot reach slurmrestd at http://127.0.0.1:"),
        "{err}"
    );
}

#[test]
fn gantry_jobs_run_as_slurm_jobs_on_the_nodes_gantry_chose() {
    if !can_run() {
        return;
    }
    let mut c = Cluster::start(
        "run",
        &[
            ("gpu-a", "a100", 8),
            ("gpu-b", "a100", 8),
            ("gpu-c", "h100", 8),
            ("gpu-d", "h100", 8),
        ],
    );
    // The cluster's own work first: 6 of gpu-a's GPUs.
    let holder = c.sbatch(&[
        "-J",
        "holder",
        "--nodelist=gpu-a",
        "--gres=gpu:a100:6",
        "--wrap",
        "sleep 300",
    ]);
    let d = daemon_over(
        &c,
        "slurm-run-daemon",
        &[
            ("a100", "A100", 8, &["gpu-a", "gpu-b"]),
            ("h100", "H100", 8, &["gpu-c", "gpu-d"]),
        ],
    );
    wait_for(&d, 30, "the four nodes to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 4
    });
    wait_for(&d, 30, "Slurm's own job to be held out", || {
        events(&d).iter().any(|e| {
            e.contains(&format!(
                "Slurm job {holder} \"holder\" of nobody holds 6 GPU(s) on gpu-a"
            ))
        })
    });
    // `gantry slurm` shows the four nodes, their GPUs by type and who holds them.
    let out = c.gantry(&c.token("nobody"), &["--user", "nobody", "-o", "json"]);
    let inv: Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpus: Vec<(String, String, u64, u64)> = inv["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            (
                n["name"].as_str().unwrap().to_string(),
                n["gpus"][0]["model"].as_str().unwrap().to_string(),
                n["gpus"][0]["count"].as_u64().unwrap(),
                n["gpus_used"][0]["count"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want = |n: &str, m: &str, used: u64| (n.to_string(), m.to_string(), 8, used);
    assert_eq!(
        gpus,
        [
            want("gpu-a", "a100", 6),
            want("gpu-b", "a100", 0),
            want("gpu-c", "h100", 0),
            want("gpu-d", "h100", 0)
        ]
    );
    // Four A100s: gpu-a has two free, so gantry chooses gpu-b and Slurm runs it there.
    let t0 = Instant::now();
    let single = submit(
        &d,
        &c.dir,
        "single",
        "name: single\nresources:\n  accelerators: A100:4\ncheckpoint: {signal: SIGUSR1, grace: 20s}\nrun: |\n  trap 'echo checkpointed; exit 0' USR1\n  echo \"on $SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES rank=$GANTRY_NODE_RANK\"\n  while true; do sleep 0.1; done\n",
    );
    let name = format!("gantry-{single}");
    wait_for(&d, 30, "Slurm to run the gantry job", || {
        gantry_jobs(&c).iter().any(|(n, _)| *n == name)
    });
    eprintln!(
        "placement to Slurm RUNNING: {:.2} s",
        t0.elapsed().as_secs_f64()
    );
    assert!(
        gantry_jobs(&c).contains(&(name.clone(), "gpu-b".into())),
        "{:?}",
        gantry_jobs(&c)
    );
    wait_for(&d, 30, "gantry to see it running", || {
        state(&d, single) == "running"
    });
    wait_for(&d, 30, "its output", || {
        log_text(&d, single).contains("on gpu-b")
    });
    let said = log_text(&d, single);
    let gpus = said
        .split("gpus=")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or_default()
        .to_string();
    if c.char_devices {
        assert_eq!(
            gpus.split(',').count(),
            4,
            "CUDA_VISIBLE_DEVICES {gpus:?} in {said}"
        );
    } else {
        eprintln!("no mknod here: CUDA_VISIBLE_DEVICES not checked ({said})");
    }
    assert!(said.contains("rank=0"), "{said}");
    // A two-node gang of eight H100s each: one Slurm job per node, each with its rank.
    let gang = submit(
        &d,
        &c.dir,
        "gang",
        "name: gang\nnum_nodes: 2\nresources:\n  accelerators: H100:8\nrun: |\n  echo \"rank=$GANTRY_NODE_RANK of $GANTRY_NUM_NODES head=$GANTRY_HEAD_IP\"\n  sleep 300\n",
    );
    let name = format!("gantry-{gang}");
    wait_for(&d, 30, "both nodes of the gang to run", || {
        let mut on: Vec<String> = gantry_jobs(&c)
            .into_iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, node)| node)
            .collect();
        on.sort();
        on == ["gpu-c", "gpu-d"]
    });
    wait_for(&d, 30, "gantry to see the gang running", || {
        state(&d, gang) == "running"
    });
    // slurmrestd goes away: gantry says so, keeps running, and recovers when it is back.
    let port: u16 = c.url.rsplit(':').next().unwrap().parse().unwrap();
    c.stop_restd();
    wait_for(&d, 30, "the outage to be said", || {
        events(&d)
            .iter()
            .any(|e| e.contains("cannot reach slurmrestd"))
    });
    assert!(cli(&d, &["jobs", "-o", "json"]).contains("\"gang\""));
    c.start_restd(port);
    // Only the hosts gantry polled during the outage are said unreachable (on
    // a slow machine the others' next poll may fall after the restart): each
    // of those must be said connected again after it.
    wait_for(&d, 60, "the nodes to reconnect", || {
        every_outage_recovered(&events(&d))
    });
    assert_eq!(state(&d, single), "running");
    assert_eq!(state(&d, gang), "running");
    // Preempt: the checkpoint signal, then the requeue; the job runs again.
    cli(&d, &["preempt", &single.to_string()]);
    wait_for(&d, 30, "the stop and the requeue", || {
        events(&d)
            .iter()
            .any(|e| e.contains(&format!("job {single} preempting → pending")))
    });
    wait_for(&d, 30, "the restart", || state(&d, single) == "running");
    assert!(
        std::fs::read_to_string(
            d.dir
                .join("state/logs/slurm/gpu-b")
                .join(format!("job-{single}.out"))
        )
        .unwrap_or_default()
        .contains("checkpointed"),
        "the checkpoint handler ran"
    );
    // Cancel: its Slurm jobs are gone.
    cli(&d, &["cancel", &gang.to_string()]);
    let name = format!("gantry-{gang}");
    c.wait_for("the gang's Slurm jobs to end", 30, |c| {
        !gantry_jobs(c).iter().any(|(n, _)| *n == name)
    });
    assert_eq!(job(&d, gang)["state"], "cancelled");
    // A node Slurm drains takes no new gantry work (Slurm would hold it pending there); what
    // runs there goes on, and the node is used again once resumed.
    c.slurm(
        "scontrol",
        &["update", "nodename=gpu-c", "state=drain", "reason=fan"],
    );
    wait_for(&d, 30, "the drain to be said", || {
        events(&d).iter().any(|e| {
            e.contains("host gpu-c cordoned: Slurm says node gpu-c is") && e.contains("(fan)")
        })
    });
    let whole = "name: whole\nresources:\n  accelerators: H100:8\nrun: sleep 300\n";
    let first = submit(&d, &c.dir, "whole1", whole);
    let second = submit(&d, &c.dir, "whole2", whole);
    let on = |id: i64| -> Vec<String> {
        gantry_jobs(&c)
            .into_iter()
            .filter(|(n, _)| *n == format!("gantry-{id}"))
            .map(|(_, node)| node)
            .collect()
    };
    wait_for(&d, 30, "one whole-node job to run on gpu-d", || {
        on(first) == ["gpu-d"] || on(second) == ["gpu-d"]
    });
    let waiting = if on(first).is_empty() { first } else { second };
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(state(&d, waiting), "pending", "{:?}", gantry_jobs(&c));
    assert!(on(waiting).is_empty());
    c.slurm("scontrol", &["update", "nodename=gpu-c", "state=resume"]);
    wait_for(&d, 30, "the resume to be said", || {
        events(&d)
            .iter()
            .any(|e| e.contains("host gpu-c takes new jobs again"))
    });
    wait_for(&d, 30, "the waiting job to run on gpu-c", || {
        on(waiting) == ["gpu-c"] && state(&d, waiting) == "running"
    });
}

/// What Slurm refuses or what fails there reaches gantry's events with Slurm's words: an
/// `sbatch` refusal (a partition the cluster does not have) fails the job with the refusal;
/// a script that exits 3 fails with exit 3; output and errors are in the job's log.
#[test]
fn slurm_refusals_and_failures_reach_gantrys_events() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("refuse", &[("gpu-a", "a100", 4), ("gpu-b", "h100", 4)]);
    let d = daemon_over_partitions(
        &c,
        "slurm-refuse-daemon",
        &[
            ("a100", "A100", 4, &["gpu-a"], "nope"),
            ("h100", "H100", 4, &["gpu-b"], "gpu"),
        ],
    );
    wait_for(&d, 30, "the nodes to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 2
    });
    let refused = submit(
        &d,
        &c.dir,
        "refused",
        "name: refused\nresources:\n  accelerators: A100:1\nrun: echo never\n",
    );
    let failing = submit(
        &d,
        &c.dir,
        "failing",
        "name: failing\nresources:\n  accelerators: H100:1\nrun: |\n  echo about to fail >&2\n  exit 3\n",
    );
    wait_for(&d, 30, "the refusal", || state(&d, refused) == "failed");
    assert!(
        events(&d).iter().any(|e| e.starts_with(&format!(
            "job {refused} running → failed: could not start on gpu-a: Slurm refused it: sbatch: invalid partition specified: nope"
        ))),
        "{:?}",
        events(&d)
    );
    wait_for(&d, 30, "the failure", || state(&d, failing) == "failed");
    assert!(
        events(&d)
            .iter()
            .any(|e| e == &format!("job {failing} running → failed: exited with code 3 on gpu-b")),
        "{:?}",
        events(&d)
    );
    assert!(log_text(&d, failing).contains("about to fail"));
}

/// `gantry bench slurm` scales what the real slurmrestd answered (v0.0.38, Slurm 22.05),
/// recorded in `src/bench/slurm/v0.0.38/`: this checks the recording still has every field
/// the server sends for the same cluster — two nodes of eight GPUs, a running job of the
/// cluster's own, a pending one, a gantry-submitted one — and, with `GANTRY_RECORD_SLURM=1`,
/// records it again.
#[test]
fn the_bench_recording_is_what_slurmrestd_answers() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("record", &[("gpu-a", "a100", 8), ("gpu-b", "h100", 8)]);
    c.sbatch(&[
        "-J",
        "pretrain",
        "--nodelist=gpu-a",
        "--gres=gpu:a100:6",
        "--wrap",
        "sleep 300",
    ]);
    c.sbatch(&[
        "-J",
        "gantry-7",
        "--nodelist=gpu-b",
        "--gres=gpu:h100:2",
        "--comment=gantry:7:t0:0",
        "--wrap",
        "sleep 300",
    ]);
    c.wait_for("the jobs to run", 30, |c| {
        c.slurm("squeue", &["-h", "-t", "RUNNING", "-o", "%i"])
            .lines()
            .count()
            == 2
    });
    let pending = c.sbatch(&[
        "-J",
        "sweep",
        "--nodelist=gpu-a",
        "--gres=gpu:a100:4",
        "--wrap",
        "sleep 1",
    ]);
    c.wait_for("the sweep to wait for resources", 30, |c| {
        c.slurm("squeue", &["-h", "-j", &pending.to_string(), "-o", "%r"])
            .trim()
            == "Resources"
    });
    let token = c.token("nobody");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/bench/slurm/v0.0.38");
    let record = std::env::var_os("GANTRY_RECORD_SLURM").is_some();
    gantry::tls::install_provider();
    let http = reqwest::blocking::Client::new();
    for (what, list) in [
        ("nodes", "nodes"),
        ("partitions", "partitions"),
        ("jobs", "jobs"),
    ] {
        let body = http
            .get(format!("{}/slurm/v0.0.38/{what}", c.url))
            .header("X-SLURM-USER-NAME", "nobody")
            .header("X-SLURM-USER-TOKEN", &token)
            .send()
            .unwrap()
            .text()
            .unwrap();
        let live: Value = serde_json::from_str(&body).unwrap();
        assert!(
            live["errors"].as_array().is_some_and(|e| e.is_empty()),
            "{live}"
        );
        let file = dir.join(format!("{what}.json"));
        if record {
            // As served (slurmrestd 22.05 indents its JSON): the bench serves these bytes.
            std::fs::write(&file, &body).unwrap();
        }
        let recorded: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let keys = |v: &Value| -> Vec<Vec<String>> {
            let mut k: Vec<Vec<String>> = v[list]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| {
                    let mut k: Vec<String> = x.as_object().unwrap().keys().cloned().collect();
                    k.sort();
                    k
                })
                .collect();
            k.sort();
            k
        };
        assert_eq!(
            keys(&live),
            keys(&recorded),
            "{what}: the recording differs from what slurmrestd answers now: record it again with GANTRY_RECORD_SLURM=1"
        );
    }
}

/// The row of job `id` in `gantry jobs -o json`.
fn row(d: &common::Daemon, id: i64) -> Value {
    let rows = common::json(d, &["jobs"]);
    rows.as_array()
        .into_iter()
        .flatten()
        .find(|r| r["id"].as_i64() == Some(id))
        .cloned()
        .unwrap_or(Value::Null)
}

/// What Slurm's own scheduler holds back shows in gantry: the cluster's own jobs waiting for
/// a pool's nodes, with Slurm's reasons (`gantry fleet --pool`, the console's pool view); a
/// gantry job Slurm holds pending says why in its row and its events; a partition taken
/// down cordons the pool's nodes until it is up again; a time limit past the partition's
/// fails the job with Slurm's reason instead of waiting for ever.
#[test]
fn what_slurm_holds_back_is_shown_with_slurms_reasons() {
    if !can_run() {
        return;
    }
    // Strict priority order (sched/builtin): a job behind one that cannot start waits too.
    let c = Cluster::start_conf(
        "holds",
        &[("gpu-a", "a100", 4), ("gpu-b", "a100", 4)],
        "SchedulerType=sched/builtin\n",
    );
    let d = daemon_over(
        &c,
        "slurm-holds-daemon",
        &[("a100", "A100", 4, &["gpu-a", "gpu-b"])],
    );
    wait_for(&d, 30, "the nodes to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 2
    });
    c.sbatch(&[
        "-J",
        "holder",
        "--nodelist=gpu-a",
        "--gres=gpu:a100:3",
        "--wrap",
        "sleep 300",
    ]);
    c.wait_for("the holder to run", 30, |c| {
        c.slurm("squeue", &["-h", "-t", "RUNNING", "-o", "%j"])
            .contains("holder")
    });
    let waiter = c.sbatch(&[
        "-J",
        "waiter",
        "-N",
        "2",
        "--gres=gpu:a100:4",
        "--wrap",
        "sleep 300",
    ]);
    // The cluster's own queue for the pool's nodes, with Slurm's reason.
    let pool = || common::json(&d, &["fleet", "--pool", "a100"]);
    // Slurm gives no reason until its scheduler has looked at a new job (CI once read the
    // pool between submission and that pass): wait for its verdict.
    wait_for(&d, 30, "the waiting Slurm job in the pool's view", || {
        pool()["waiting"].as_array().is_some_and(|w| {
            w.iter().any(|w| {
                w["what"].as_str().unwrap_or("").contains("\"waiter\"")
                    && w["reason"].as_str().unwrap_or("").contains("(Slurm: ")
            })
        })
    });
    let w = pool()["waiting"][0].clone();
    assert_eq!(
        (
            w["what"].as_str().unwrap(),
            w["gpus"].as_u64(),
            w["nodes"].as_u64()
        ),
        (
            &*format!("Slurm job {waiter} \"waiter\" of nobody"),
            Some(8),
            Some(2)
        ),
        "{w}"
    );
    assert!(
        w["reason"]
            .as_str()
            .unwrap()
            .ends_with("(Slurm: Resources)"),
        "{w}"
    );
    let table = cli(&d, &["fleet", "--pool", "a100"]);
    assert!(
        table.contains("waiting in the backend's own queue for these nodes:"),
        "{table}"
    );
    assert!(table.contains("held by Slurm job"), "{table}");

    // A gantry job queued behind the waiter in Slurm's order: held, and said why.
    let held = submit(
        &d,
        &c.dir,
        "held",
        "name: held\nresources:\n  accelerators: A100:1\nrun: sleep 120\n",
    );
    wait_for(&d, 30, "Slurm to hold the gantry job back", || {
        let detail = row(&d, held)["detail"].as_str().unwrap_or("").to_string();
        detail.contains("held back: Slurm job") && detail.contains("(Slurm: Priority)")
    });
    let detail = row(&d, held)["detail"].as_str().unwrap().to_string();
    assert!(detail.contains("(Slurm: Priority)"), "{detail}");
    assert!(
        events(&d)
            .iter()
            .any(|e| e.starts_with(&format!("job {held} waits on gpu-"))
                && e.contains("(Slurm: Priority)")),
        "{:?}",
        events(&d)
    );
    // Once the waiter is gone, it runs and no longer says it is held.
    c.slurm("scancel", &[&waiter.to_string()]);
    c.wait_for("the held job to run", 30, |c| {
        gantry_jobs(c)
            .iter()
            .any(|(name, _)| *name == format!("gantry-{held}"))
    });
    wait_for(&d, 10, "the hold to be lifted in its row", || {
        !row(&d, held)["detail"]
            .as_str()
            .unwrap_or("")
            .contains("held back")
    });

    // A partition taken down cordons the pool's nodes; up again, they take jobs again.
    c.slurm("scontrol", &["update", "PartitionName=gpu", "State=DOWN"]);
    wait_for(&d, 30, "the partition's cordon of both nodes", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("cordoned: Slurm partition gpu is down"))
            .count()
            >= 2
    });
    let waits = submit(
        &d,
        &c.dir,
        "waits",
        "name: waits\nresources:\n  accelerators: A100:1\nrun: sleep 1\n",
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(state(&d, waits), "pending", "{:?}", events(&d));
    // Why it waits names the pool and Slurm's cause, not only "0 have room now".
    wait_for(&d, 10, "the pool and its cause in the job's row", || {
        let why = row(&d, waits)["detail"].as_str().unwrap_or("").to_string();
        why.contains("pool slurm/hpc/dc/a100: 2 cordoned (")
            && why.contains("partition gpu is down")
    });
    c.slurm("scontrol", &["update", "PartitionName=gpu", "State=UP"]);
    wait_for(&d, 30, "the job to run once the partition is up", || {
        state(&d, waits) == "completed"
    });

    // A time limit past the partition's: Slurm will never start it.
    c.slurm("scontrol", &["update", "PartitionName=gpu", "MaxTime=1"]);
    let long = submit(
        &d,
        &c.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100:1\ntime_limit: 2h\nrun: sleep 1\n",
    );
    wait_for(&d, 30, "the hopeless job to fail", || {
        state(&d, long) == "failed"
    });
    assert!(
        events(&d).iter().any(|e| e.starts_with(&format!("job {long} "))
            && e.contains("cannot start: its time limit exceeds the partition's (Slurm: PartitionTimeLimit)")),
        "{:?}",
        events(&d)
    );
}

/// Every host said unreachable is said connected again later, and at least one was.
fn every_outage_recovered(events: &[String]) -> bool {
    let host_of = |e: &str, word: &str| {
        e.strip_prefix("host ")
            .and_then(|r| r.split_once(word))
            .map(|(h, _)| h.to_string())
    };
    let mut down: Vec<String> = Vec::new();
    let mut seen = false;
    for e in events {
        if let Some(h) = host_of(e, " unreachable:") {
            seen = true;
            if !down.contains(&h) {
                down.push(h);
            }
        } else if let Some(h) = host_of(e, " connected:") {
            down.retain(|d| *d != h);
        }
    }
    seen && down.is_empty()
}

/// A Slurm pool written as three lines — the address, `gpu = "auto"`, a name — is built from
/// the cluster's nodes (one pool per partition, GPU type and shape, as `gantry slurm --fleet`
/// prints them), and a job runs there as a Slurm job. It was refused for missing `region`,
/// then `cpus`, then `gpu = "auto"` itself.
#[test]
fn a_slurm_pool_of_three_lines_is_built_from_the_cluster() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("auto", &[("gpu-a", "a100", 4), ("gpu-b", "h100", 8)]);
    let dir = common::temp_dir("slurm-auto-daemon");
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"slurm\"\nname = \"hpc\"\ngpu = \"auto\"\n[pools.slurm]\nslurmrestd = \"{}\"\nuser = \"nobody\"\n",
            c.url
        ),
    )
    .unwrap();
    let token = c.token("nobody");
    let conf = c.conf.clone();
    let d = common::start_with(dir.clone(), &["--config", fleet.to_str().unwrap()], |cmd| {
        cmd.env("SLURM_JWT", token).env("SLURM_CONF", conf);
    });
    wait_for(&d, 30, "the built pools' nodes to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 2
    });
    let pools: Value = serde_json::from_str(&cli(&d, &["fleet", "-o", "json"])).unwrap();
    let mut built: Vec<(String, String, u64)> = pools["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"]
                    .as_str()
                    .unwrap()
                    .rsplit('/')
                    .next()
                    .unwrap()
                    .to_string(),
                p["model"].as_str().unwrap_or("").to_string(),
                p["gpus"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    built.sort();
    assert_eq!(
        built,
        [
            ("hpc-gpu-a100".to_string(), "A100".to_string(), 4),
            ("hpc-gpu-h100".to_string(), "H100".to_string(), 8)
        ],
        "{pools}"
    );
    wait_for(&d, 30, "the A100's VRAM assumption to be said", || {
        events(&d)
            .iter()
            .any(|e| e.contains("pool hpc-gpu-a100: 40 GB of VRAM per GPU assumed"))
    });
    let id = submit(
        &d,
        &dir,
        "h100",
        "name: on-h100\nresources:\n  accelerators: H100:8\nrun: |\n  echo \"on $(hostname -s) $SLURM_JOB_ID\"\n  sleep 60\n",
    );
    wait_for(&d, 60, "the job to run on gpu-b as a Slurm job", || {
        gantry_jobs(&c).contains(&(format!("gantry-{id}"), "gpu-b".to_string()))
    });
    wait_for(&d, 30, "gantry to see it running", || {
        state(&d, id) == "running"
    });
    cli(&d, &["cancel", &id.to_string()]);
}

/// A Slurm pool the daemon cannot read (here: no token) says why in the events and on its
/// row at once, counts its tries on the row without an event each minute, says it again at
/// the operator's SIGHUP, and is built as soon as a token is given (a `token_file` added to
/// the fleet file), without a restart.
#[test]
fn a_slurm_pool_that_cannot_be_read_says_why_until_it_can() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("unread", &[("gpu-a", "a100", 4)]);
    let dir = common::temp_dir("slurm-unread-daemon");
    let fleet = dir.join("fleet.toml");
    let stanza = |extra: &str| {
        format!(
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"slurm\"\nname = \"hpc\"\ngpu = \"auto\"\n[pools.slurm]\nslurmrestd = \"{}\"\n{extra}",
            c.url
        )
    };
    std::fs::write(&fleet, stanza("")).unwrap();
    let conf = c.conf.clone();
    let d = common::start_with(
        dir.clone(),
        &[
            "--config",
            fleet.to_str().unwrap(),
            "--cluster-look-every",
            "1s",
        ],
        |cmd| {
            cmd.env_remove("SLURM_JWT").env("SLURM_CONF", conf);
        },
    );
    let said = |d: &common::Daemon| {
        events(d)
            .into_iter()
            .filter(|e| e.contains("pool hpc: cannot read the cluster's nodes"))
            .collect::<Vec<_>>()
    };
    wait_for(&d, 30, "why the pool is empty, in the events", || {
        !said(&d).is_empty()
    });
    let first = said(&d).remove(0);
    assert!(
        first.contains("HTTP 401") && first.contains("no token was sent"),
        "{first}"
    );
    let row = |d: &common::Daemon| {
        let v: Value = serde_json::from_str(&cli(d, &["fleet", "-o", "json"])).unwrap();
        v["pools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["path"].as_str().unwrap().ends_with("/hpc"))
            .map(|p| p["notes"].to_string())
            .unwrap_or_default()
    };
    wait_for(&d, 30, "the row to count the tries", || {
        let r = row(&d);
        r.contains("no nodes: cannot read the cluster's nodes") && r.contains("tried 3 time(s)")
    });
    assert_eq!(
        said(&d).len(),
        1,
        "one event, not one a try: {:?}",
        said(&d)
    );
    // The operator's SIGHUP is a question: it is answered again.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGHUP) };
    wait_for(&d, 30, "the SIGHUP to say it again", || said(&d).len() >= 2);
    // A token file, given in the fleet file: the pool is built from the cluster's nodes.
    let jwt = dir.join("slurm.jwt");
    std::fs::write(&jwt, format!("SLURM_JWT={}\n", c.token("nobody"))).unwrap();
    std::fs::write(
        &fleet,
        stanza(&format!("token_file = \"{}\"\n", jwt.display())),
    )
    .unwrap();
    wait_for(&d, 60, "the pool built once a token is given", || {
        let v: Value = serde_json::from_str(&cli(&d, &["fleet", "-o", "json"])).unwrap();
        v["pools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["path"].as_str().unwrap().ends_with("/hpc-gpu-a100") && p["gpus"] == 4)
    });
    assert!(
        events(&d)
            .iter()
            .any(|e| e.contains("pool hpc: the cluster's nodes are read again")),
        "{:?}",
        events(&d)
    );
}

/// `gantry exec` into a gantry job on Slurm: `srun --overlap` into its allocation, in the job's
/// environment and directory (as its batch script wrote them), the command's status returned;
/// `-t` gives it a terminal (`srun --pty`).
#[test]
fn a_command_runs_inside_a_gantry_job_on_slurm_and_its_logs_outlive_the_daemon() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("exec", &[("gpu-a", "a100", 4)]);
    let mut d = daemon_over(&c, "slurm-exec-daemon", &[("a100", "A100", 4, &["gpu-a"])]);
    wait_for(&d, 30, "the node to connect", || {
        events(&d).iter().any(|e| e.contains("connected:"))
    });
    let id = submit(
        &d,
        &d.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100:1\nenvs:\n  GREETING: hi-from-slurm\nrun: |\n  echo started-on-slurm\n  sleep 300\n",
    );
    wait_for(&d, 60, "the job to run", || state(&d, id) == "running");
    let exec = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("--connect")
            .arg(&d.socket)
            .arg("exec")
            .arg(id.to_string())
            .args(args)
            .output()
            .unwrap()
    };
    // The batch script says where it runs as it starts: until then the answer is "try again".
    let t0 = Instant::now();
    let out = loop {
        let out = exec(&[
            "--",
            "sh",
            "-c",
            "echo \"job=$GANTRY_JOB_ID greet=$GREETING slurm=$SLURM_JOB_ID\"; exit 4",
        ]);
        if out.status.code() != Some(6) || t0.elapsed() > Duration::from_secs(30) {
            break out;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!("job={id} greet=hi-from-slurm slurm=")),
        "{text}"
    );
    let slurm_id = text.trim().rsplit("slurm=").next().unwrap_or("");
    assert!(
        slurm_id.parse::<u64>().is_ok(),
        "the step runs in the job's allocation: {text}"
    );
    // With a terminal.
    let out = exec(&["-t", "--", "sh", "-c", "test -t 0 && echo has-a-tty"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("has-a-tty"),
        "{out:?}"
    );
    cli(&d, &["cancel", &id.to_string()]);
    wait_for(&d, 30, "the job to end", || state(&d, id) == "cancelled");
    // Logs outlive the daemon: a new one finds them through the journal's last run.
    restart_over(&c, &mut d);
    let out = log_text(&d, id);
    assert!(out.contains("started-on-slurm"), "{out}");
}

/// A daemon whose slurmrestd token is its own user's posts its parts to slurmrestd (one
/// request on a kept connection) instead of running `sbatch` for each: this one has no Slurm
/// command on its PATH, so a part sent to `sbatch` could not start. The parts run as that
/// user, as `sbatch`'s would, with what `sbatch` would have given them (GPUs, the whole node
/// for a whole-node part, its time limit, its logs).
#[test]
fn a_daemon_whose_token_is_its_own_user_submits_through_slurmrestd() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("rest-submit", &[("gpu-a", "a100", 4)]);
    let d = daemon_over_as_nobody(
        &c,
        "slurm-rest-submit-daemon",
        &[("a100", "A100", 4, &["gpu-a"])],
    );
    wait_for(&d, 30, "the node to connect, saying how parts go", || {
        events(&d)
            .iter()
            .any(|e| e.contains("connected:") && e.contains("v0.0.38, parts posted to slurmrestd"))
    });
    let one = submit(
        &d,
        &d.dir,
        "one",
        "name: one\nresources:\n  accelerators: A100:1\nrun: echo \"as $USER gpus=$CUDA_VISIBLE_DEVICES rank=$GANTRY_NODE_RANK\"\n",
    );
    let whole = submit(
        &d,
        &d.dir,
        "whole",
        "name: whole\nresources:\n  accelerators: A100:4\ntime_limit: 5m\nrun: sleep 30\n",
    );
    wait_for(&d, 60, "the first part to run and end", || {
        state(&d, one) == "completed"
    });
    assert_eq!(log_text(&d, one), "out: as nobody gpus=0 rank=0");
    let name = format!("gantry-{whole}");
    wait_for(&d, 60, "the whole-node part to run", || {
        gantry_jobs(&c).iter().any(|(n, _)| *n == name)
    });
    let row = c.slurm("squeue", &["-h", "-n", &name, "-o", "%u|%b|%l|%h"]);
    assert_eq!(row.trim(), "nobody|gres:gpu:4|5:00|NO");
    let out = state(&d, whole);
    assert_eq!(out, "running", "{:?}", events(&d));
}

/// Starts driven by events on Slurm too (issue 39): with the daemon's clock step at an hour,
/// only the wake the Slurm worker sends when it sees a run end can start the next job.
#[test]
fn a_slurm_runs_end_starts_the_next_job_without_waiting_for_the_clock() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("wake", &[("gpu-a", "a100", 4)]);
    let d = daemon_over_with(
        &c,
        "slurm-wake-daemon",
        &[("a100", "A100", 4, &["gpu-a"], "gpu")],
        &["--step", "1h"],
    );
    // Its token is nobody's and it runs as root: each part is an `sbatch`, and it says so.
    wait_for(&d, 30, "the node to connect", || {
        events(&d)
            .iter()
            .any(|e| e.contains("connected:") && e.contains("parts submitted with sbatch"))
    });
    let first = submit(
        &d,
        &d.dir,
        "first",
        "name: first\nresources:\n  accelerators: A100:4\nrun: sleep 1\n",
    );
    let second = submit(
        &d,
        &d.dir,
        "second",
        "name: second\nresources:\n  accelerators: A100:4\nrun: echo second\n",
    );
    wait_for(&d, 60, "the first job to run", || {
        state(&d, first) == "running"
    });
    wait_for(
        &d,
        60,
        "the second job to complete (woken by the first's end)",
        || state(&d, second) == "completed",
    );
    assert_eq!(state(&d, first), "completed");
}

/// slurmrestd 22.05 answers about half the reads of its nodes since a time with HTTP 500
/// ("Unspecified error") while jobs start and end. Read as an error, it made every node look
/// down until the next read, and nothing started there meanwhile (the gap issue 39 measured
/// between gantry on Slurm and Slurm alone). Reads since a time go on answering through it.
#[test]
fn reads_since_a_time_go_on_while_jobs_start_and_end() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("since", &[("gpu-a", "a100", 4)]);
    let mut r = gantry::backend::slurm::rest::SlurmRest::connect(
        &c.url,
        Some("nobody".to_string()),
        Some(gantry::backend::slurm::token::Token::Fixed(
            c.token("nobody"),
        )),
    )
    .unwrap();
    r.inventory().unwrap();
    let t0 = Instant::now();
    let mut reads = 0;
    while t0.elapsed() < Duration::from_secs(8) {
        c.sbatch(&["-n1", "--gres=gpu:1", "--wrap", "sleep 0.3"]);
        std::thread::sleep(Duration::from_millis(400));
        let read = r.inventory();
        assert!(read.is_ok(), "read {reads} since a time: {:?}", read.err());
        reads += 1;
    }
    assert!(reads >= 10, "{reads} reads");
}

/// docs/backends.md's "Your Slurm cluster", followed as written against the real Slurm: its
/// first commands (a token for $USER, `gantry slurm`) run by bash with only the address put
/// in, then its five-line stanza in a daemon whose environment has that token — no `user =`
/// line: the token's own user is who gantry reads as.
#[test]
fn the_docs_slurm_section_works_as_written() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("docs", &[("gpu-a", "a100", 4)]);
    const SECTION: &str = "## Your Slurm cluster";
    let sh = common::doc_blocks("docs/backends.md", SECTION, "sh").remove(0);
    assert!(sh.contains("scontrol token username=$USER") && sh.contains("http://slurm-head:6820"));
    let bin = Path::new(env!("CARGO_BIN_EXE_gantry"))
        .parent()
        .unwrap()
        .to_path_buf();
    let out = Command::new("bash")
        .arg("-ec")
        .arg(sh.replace("http://slurm-head:6820", &c.url))
        .env("USER", "nobody")
        .env("SLURM_CONF", &c.conf)
        .env_remove("SLURM_JWT")
        .env_remove("SLURMRESTD")
        .env(
            "PATH",
            format!(
                "{}:{}",
                bin.display(),
                std::env::var("PATH").unwrap_or_default()
            ),
        )
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && said.contains("gpu-a") && said.contains("0/4 a100"),
        "{said}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The five lines, with this cluster's address, in a daemon given a token for nobody.
    let stanza = common::doc_blocks("docs/backends.md", SECTION, "toml")
        .into_iter()
        .find(|b| b.contains("[[pools]]"))
        .unwrap();
    assert!(
        stanza.contains("gpu = \"auto\"") && !stanza.contains("\nuser ="),
        "{stanza}"
    );
    let dir = common::temp_dir("slurm-docs-daemon");
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[[teams]]\nname = \"lab\"\n\n{}",
            stanza.replace("unix:/run/slurmrestd.sock", &c.url)
        ),
    )
    .unwrap();
    let token = c.token("nobody");
    let conf = c.conf.clone();
    let d = common::start_with(dir.clone(), &["--config", fleet.to_str().unwrap()], |cmd| {
        cmd.env("SLURM_JWT", token).env("SLURM_CONF", conf);
    });
    wait_for(&d, 30, "the pool built from the cluster's node", || {
        cli(&d, &["fleet", "-o", "json"]).contains("hpc-gpu-a100")
    });
    assert!(
        events(&d)
            .iter()
            .any(|e| e.contains("pool hpc: slurmrestd") && e.contains("lists 1 node(s)")),
        "{:#?}",
        events(&d)
    );
}
