//! Lambda Cloud pools end to end: the real `gantry daemon` buys instances through Lambda's
//! Cloud API — here a test double that follows its published reference
//! (`gantry_testkit::lambda`; no Lambda server can run here) — each instance joins as an SSH host (a
//! real `sshd` in namespaces of its own, reached by the node's name through an ssh_config the
//! test writes, never at the made-up address the double hands out), jobs run there, idle
//! instances are terminated. Needs what the SSH tests need; without it each test says it
//! skipped.

use crate::support::daemon as common;
use crate::support::sshd;

use common::{events, log_text, start_with, state, submit, temp_dir, wait_for, Daemon};
use gantry_testkit::lambda::{LambdaDouble, KEY};
use std::path::{Path, PathBuf};
use std::time::Duration;

const TYPE: &str = "gpu_2x_a100";

/// A Lambda pool trying `regions` in order, its nodes reached (by name) at the test's hosts.
fn fleet(h: &sshd::Hosts, api: &str, fleet_id: &str, regions: &[&str], max_nodes: u32) -> PathBuf {
    let mut ssh = String::new();
    for i in 0..max_nodes {
        let port = h
            .hosts
            .get((i as usize).min(h.hosts.len().saturating_sub(1)))
            .map_or(22, |x| x.port);
        ssh.push_str(&format!(
            "Host lambda-a100-{i:03}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
        ));
    }
    let general = std::fs::read_to_string(h.dir.join("ssh_config")).unwrap();
    std::fs::write(h.dir.join("cloud_ssh_config"), ssh + &general).unwrap();
    let regions: Vec<String> = regions.iter().map(|r| format!("\"{r}\"")).collect();
    let text = format!(
        r#"[scale]
scale_down_after = "8s"

[[teams]]
name = "lab"

[[pools]]
name = "a100"
provider = "lambda"
backend = "lambda"
region = "us-east-1"
zone = "us-east-1"
instance_type = "{TYPE}"
gpu = "A100"
gpus_per_node = 2
vram_gb = 40
cpus = 8
memory_gb = 32
capacity = "on-demand"
price_per_hour = 2.58
nodes = 0
max_nodes = {max_nodes}
provisioning_delay = "20s"

[pools.ssh]
config = "{dir}/cloud_ssh_config"

[pools.lambda]
regions = [{regions}]
ssh_key_name = "gantry-test"
ssh_public_key = "{dir}/client.pub"
ssh_host = "{{node}}"
ssh_user = "root"
endpoint_url = "{api}"
fleet = "{fleet_id}"
launch_every = "2s"
"#,
        dir = h.dir.display(),
        regions = regions.join(", "),
    );
    let path = h.dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn daemon(dir: &Path, fleet: &Path) -> Daemon {
    start_with(
        dir.to_path_buf(),
        &["--config", fleet.to_str().unwrap()],
        |c| {
            c.env("LAMBDA_API_KEY", KEY);
        },
    )
}

fn has(d: &Daemon, what: &str) -> bool {
    events(d).iter().any(|e| e.contains(what))
}

fn double() -> LambdaDouble {
    LambdaDouble::start(&[
        (TYPE, 258, "2x A100 (40 GB SXM4)"),
        ("gpu_8x_h100_sxm5", 2392, "8x H100 (80 GB SXM5)"),
    ])
}

#[test]
fn a_two_node_job_buys_where_lambda_has_capacity_launches_in_turn_and_idle_instances_are_terminated(
) {
    if !sshd::can_run() {
        return;
    }
    let h = sshd::hosts("lambda-buy", 2);
    let api = double();
    // us-east-1 lists no capacity for the type; us-west-1 has two.
    api.capacity(TYPE, "us-west-1", 2);
    let fleet = fleet(&h, &api.url(), "t-buy", &["us-east-1", "us-west-1"], 2);
    let dir = temp_dir("lambda-buy");
    let d = daemon(&dir, &fleet);
    let id = submit(
        &d,
        &h.dir,
        "pair",
        "name: pair\nnum_nodes: 2\nresources:\n  accelerators: A100:2\nrun: echo \"rank=$SKYPILOT_NODE_RANK host=$(hostname)\"\n",
    );
    wait_for(
        &d,
        150,
        "the 2-node job to complete on two instances",
        || state(&d, id) == "completed",
    );
    let log = log_text(&d, id);
    for i in 0..2 {
        assert!(
            log.contains(&format!("host={}", h.hosts[i].name)),
            "ran on both instances' hosts: {log}"
        );
    }
    let made = api.made();
    assert_eq!(made.len(), 2, "two instances, one a node: {made:?}");
    let mut names: Vec<&str> = made.iter().map(|i| i.name.as_str()).collect();
    names.sort();
    assert_eq!(
        names,
        [
            "gantry/t-buy/a100/lambda-a100-000",
            "gantry/t-buy/a100/lambda-a100-001"
        ]
    );
    assert!(made.iter().all(|i| i.region == "us-west-1"));
    assert!(made.iter().all(|i| i.ssh_key_names == ["gantry-test"]));
    // The key was registered from ssh_public_key (the account had none).
    let keys = api.with(|a| a.ssh_keys.clone());
    let public = std::fs::read_to_string(h.dir.join("client.pub")).unwrap();
    assert_eq!(
        keys,
        [("gantry-test".to_string(), public.trim().to_string())]
    );
    // Launches waited their turn: none refused by Lambda's rate limit, and two seconds apart.
    let (requests, limited) = api.with(|a| (a.launch_requests, a.rate_limited));
    assert_eq!((requests, limited), (2, 0));
    let gap = made[1].launched.duration_since(made[0].launched);
    assert!(gap >= Duration::from_millis(1900), "{gap:?}");
    let ev = events(&d);
    for want in [
        "lambda-a100-000: us-east-1: no gpu_2x_a100, on-demand capacity now; trying us-west-1",
        &format!(
            "lambda-a100-000: launched {} in us-west-1 (gpu_2x_a100, on-demand)",
            made[0].id
        ),
        "node lambda-a100-000 ready at root@lambda-a100-000",
        "host lambda-a100-001 connected",
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    // Idle past scale_down_after: both terminated, and Lambda no longer lists them.
    wait_for(&d, 90, "the idle instances to be terminated", || {
        api.live().is_empty()
    });
    wait_for(&d, 10, "the terminations to be said", || {
        has(&d, &format!("lambda-a100-000: terminated {}", made[0].id))
            && has(&d, &format!("lambda-a100-001: terminated {}", made[1].id))
    });
    // What the daemon logged never holds the API key.
    let log = std::fs::read_to_string(dir.join("daemon.log")).unwrap_or_default();
    assert!(!log.contains(KEY) && !ev.iter().any(|e| e.contains(KEY)));
}

#[test]
fn a_refused_launch_moves_to_the_next_region_and_a_lost_answer_buys_nothing_twice() {
    if !sshd::can_run() {
        return;
    }
    let h = sshd::hosts("lambda-failover", 1);
    let api = double();
    api.capacity(TYPE, "us-east-1", 1);
    api.capacity(TYPE, "us-west-1", 1);
    api.with(|a| {
        a.ssh_keys.push((
            "gantry-test".to_string(),
            "ssh-ed25519 AAAA test".to_string(),
        ));
        // us-east-1 lists capacity but refuses the launch; us-west-1's first launch makes
        // the instance and its answer is lost (a 502).
        a.refuse_in.insert("us-east-1".to_string());
        a.lose_next_answer = true;
    });
    let fleet = fleet(&h, &api.url(), "t-fo", &["us-east-1", "us-west-1"], 1);
    let dir = temp_dir("lambda-failover");
    let d = daemon(&dir, &fleet);
    let id = submit(
        &d,
        &h.dir,
        "one",
        "name: one\nresources:\n  accelerators: A100:2\nrun: echo ok-$GANTRY_JOB_ID\n",
    );
    wait_for(&d, 150, "the job to complete", || {
        state(&d, id) == "completed"
    });
    let made = api.made();
    assert_eq!(made.len(), 1, "bought once: {made:?}");
    assert_eq!(made[0].region, "us-west-1");
    let ev = events(&d);
    for want in [
        "lambda-a100-000: us-east-1: POST instance-operations/launch: instance-operations/launch/insufficient-capacity: Not enough capacity to fulfill launch request.",
        "; trying us-west-1",
        "lambda-a100-000: us-west-1: POST instance-operations/launch: HTTP 502; retrying",
        &format!("lambda-a100-000: found {} from the launch retried", made[0].id),
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    // Two launch requests (the refused one, the lost one), no third.
    assert_eq!(api.with(|a| a.launch_requests), 2);
}

#[test]
fn a_daemon_killed_while_its_launch_is_unanswered_adopts_the_instance_on_restart() {
    if !sshd::can_run() {
        return;
    }
    let h = sshd::hosts("lambda-kill", 1);
    let api = double();
    api.capacity(TYPE, "us-east-1", 5);
    let fleet = fleet(&h, &api.url(), "t-kill", &["us-east-1"], 1);
    let dir = temp_dir("lambda-kill");
    for round in 1..=3u32 {
        api.with(|a| a.hold_answer = Duration::from_secs(5));
        let mut d = daemon(&dir, &fleet);
        let id = submit(
            &d,
            &h.dir,
            &format!("r{round}"),
            "name: r\nresources:\n  accelerators: A100:2\nrun: echo ok\n",
        );
        wait_for(&d, 60, "the launch to reach Lambda", || {
            api.with(|a| a.launch_requests) == round
        });
        let _ = d.child.kill();
        let _ = d.child.wait();
        api.with(|a| a.hold_answer = Duration::ZERO);
        std::thread::sleep(Duration::from_secs(5));
        let d = daemon(&dir, &fleet);
        wait_for(
            &d,
            120,
            "the job to complete on the adopted instance",
            || state(&d, id) == "completed",
        );
        assert!(has(&d, "lambda-a100-000: adopted "), "{:#?}", events(&d));
        assert_eq!(
            api.with(|a| a.launch_requests),
            round,
            "nothing bought twice"
        );
        assert_eq!(api.live().len(), 1);
        wait_for(&d, 90, "the idle instance to be terminated", || {
            api.live().is_empty()
        });
        let mut d = d;
        let _ = d.child.kill();
        let _ = d.child.wait();
    }
    assert_eq!(api.with(|a| a.launch_requests), 3);
}

#[test]
fn a_missing_or_refused_api_key_and_an_unknown_type_are_refused_with_what_to_do() {
    let api = double();
    let dir = temp_dir("lambda-refused");
    let h = sshd::Hosts {
        dir: dir.clone(),
        hosts: Vec::new(),
    };
    std::fs::write(dir.join("ssh_config"), "").unwrap();
    std::fs::write(dir.join("client.pub"), "ssh-ed25519 AAAA test\n").unwrap();
    let run = |fleet: &Path, key: Option<&str>| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"));
        c.args(["daemon", "--config"])
            .arg(fleet)
            .arg("--db")
            .arg(dir.join("state.db"))
            .arg("--socket")
            .arg(dir.join("d.sock"))
            .env("HOME", &dir)
            .env_remove("LAMBDA_API_KEY");
        if let Some(k) = key {
            c.env("LAMBDA_API_KEY", k);
        }
        let out = c.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let f = fleet_without_hosts(&h, &api.url(), TYPE);
    let err = run(&f, None);
    assert!(
        err.contains("pool `a100` (backend lambda, region us-east-1): no Lambda Cloud API key: set LAMBDA_API_KEY"),
        "{err}"
    );
    let err = run(&f, Some("secret_wrong"));
    assert!(
        err.contains("GET instance-types: global/invalid-api-key: API key was invalid")
            && err.contains("the API key was refused")
            && !err.contains("secret_wrong"),
        "{err}"
    );
    let f = fleet_without_hosts(&h, &api.url(), "gpu_2x_a101");
    let err = run(&f, Some(KEY));
    assert!(
        err.contains("Lambda Cloud offers no instance type `gpu_2x_a101` (it offers: gpu_2x_a100, gpu_8x_h100_sxm5)"),
        "{err}"
    );
    assert_eq!(api.with(|a| a.launch_requests), 0);
    // `gantry cloud check` says the same, per line, and exits 1; with the key, it passes.
    let f = fleet_without_hosts(&h, &api.url(), TYPE);
    let check = |key: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["cloud", "check", "-o", "json", "--config"])
            .arg(&f)
            .env("HOME", &dir)
            .env("LAMBDA_API_KEY", key)
            .output()
            .unwrap()
    };
    let bad = check("secret_wrong");
    assert_eq!(bad.status.code(), Some(1));
    let ok = check(KEY);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&ok.stdout).unwrap();
    let lines: Vec<&str> = v[0]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert_eq!(v[0]["backend"], "lambda");
    assert_eq!(
        lines[0],
        "catalog: gpu_2x_a100 holds 2× A100; in us-east-1: $2.58/h on-demand; the pool counts $2.58/h"
    );
    assert!(
        lines.contains(&"API key: found (LAMBDA_API_KEY)"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("gpu_2x_a100: 2x A100 (40 GB SXM4) at $2.58/h")),
        "{lines:?}"
    );
    assert!(
        lines.contains(&"SSH key `gantry-test`: not in the account; registered at the first buy from ssh_public_key"),
        "{lines:?}"
    );
}

/// A fleet file with one Lambda pool of `instance_type` and no hosts to reach.
fn fleet_without_hosts(h: &sshd::Hosts, api: &str, instance_type: &str) -> PathBuf {
    let f = fleet(h, api, "t-refused", &["us-east-1"], 1);
    let text = std::fs::read_to_string(&f)
        .unwrap()
        .replace(&format!("\"{TYPE}\""), &format!("\"{instance_type}\""));
    std::fs::write(&f, text).unwrap();
    f
}

/// docs/clouds.md's Lambda dry run, followed as written: the double the docs start (the same
/// catalog, capacity and key as `lambda-double`), its ssh_config, fleet file and job, with only
/// the double's port, the public key file and the test's sshd put in.
#[test]
fn the_docs_lambda_dry_run_buys_runs_and_gives_back_one_node() {
    if !sshd::can_run() {
        return;
    }
    const SECTION: &str = "## Try a Lambda pool with no account (a dry run)";
    let block = |lang| common::doc_blocks("docs/clouds.md", SECTION, lang);
    let (ssh, toml, yaml) = (
        block("sshconfig").remove(0),
        block("toml").remove(0),
        block("yaml").remove(0),
    );
    let sh = block("sh").join("\n");
    for want in [
        "cargo run --release -p gantry-testkit --bin lambda-double &",
        &format!("export LAMBDA_API_KEY={KEY}"),
        "--db /tmp/try-lambda/state.db",
    ] {
        assert!(sh.contains(want), "{want}: {sh}");
    }
    let (api, types) = LambdaDouble::of_catalog("127.0.0.1:0", 4).unwrap();
    assert!(types >= 10, "{types} types offered");
    let h = sshd::hosts("lambda-dryrun", 1);
    let cfg = h.dir.join("try_lambda_ssh_config");
    let general = std::fs::read_to_string(h.dir.join("ssh_config")).unwrap();
    std::fs::write(&cfg, format!("{ssh}  Port {}\n{general}", h.hosts[0].port)).unwrap();
    for want in ["http://127.0.0.1:8765/api/v1", "ssh_user = \"me\""] {
        assert!(toml.contains(want), "{want}: {toml}");
    }
    let fleet = h.dir.join("try-lambda.toml");
    std::fs::write(
        &fleet,
        toml.replace("http://127.0.0.1:8765/api/v1", &api.url())
            .replace(
                "~/.config/gantry/try_lambda_ssh_config",
                cfg.to_str().unwrap(),
            )
            .replace(
                "~/.ssh/id_ed25519.pub",
                h.dir.join("client.pub").to_str().unwrap(),
            )
            .replace("ssh_user = \"me\"", "ssh_user = \"root\""),
    )
    .unwrap();
    let dir = temp_dir("lambda-dryrun");
    let d = daemon(&dir, &fleet);
    let id = submit(&d, &h.dir, "try-lambda", &yaml);
    wait_for(
        &d,
        120,
        "the job to run on the bought node and complete",
        || state(&d, id) == "completed",
    );
    assert!(
        log_text(&d, id).contains("with 1 GPU(s)"),
        "{}",
        log_text(&d, id)
    );
    let made = api.made();
    assert_eq!(made.len(), 1, "{made:?}");
    assert_eq!(
        (made[0].name.as_str(), made[0].region.as_str()),
        ("gantry/try/try/lambda-try-000", "us-east-1")
    );
    assert_eq!(made[0].ssh_key_names, ["try"]);
    for want in [
        "lambda/us-east-1/us-east-1/try +1 for job",
        &format!(
            "lambda-try-000: launched {} in us-east-1 (gpu_1x_a10, on-demand)",
            made[0].id
        ),
    ] {
        assert!(has(&d, want), "{want}: {:#?}", events(&d));
    }
    wait_for(&d, 120, "the idle node to be given back", || {
        has(&d, &format!("lambda-try-000: terminated {}", made[0].id))
    });
    assert!(api.live().is_empty(), "{:?}", api.live());
}
