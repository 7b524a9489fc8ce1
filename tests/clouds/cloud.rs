//! EC2 pools end to end: the real `gantry daemon` buys instances from a real EC2 API
//! (`moto_server`, driven by the official SDK), each instance joins as an SSH host (a real
//! `sshd` in namespaces of its own, reached by the node's name through an ssh_config the test
//! writes — never at the made-up address moto hands out), jobs run there, idle instances are
//! terminated; a fault-injecting proxy in front of moto refuses capacity and holds requests
//! so failover and a daemon killed mid-launch or mid-termination are tested too.
//! Needs `moto_server` (pip install 'moto[server]') and what the SSH tests need; without them
//! each test says it skipped.

use crate::support::daemon as common;
use crate::support::moto;
use crate::support::sshd;

use common::{events, free_port, log_text, start_with, state, submit, temp_dir, wait_for, Daemon};
use moto::{instances, proxy, Fault, Faults, Moto, Rule};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn can_run() -> bool {
    if moto::moto_bin().is_none() {
        eprintln!("skipped: needs moto_server (pip install 'moto[server]')");
        return false;
    }
    sshd::can_run()
}

/// One test's world: a host (an sshd), a `moto_server`, and the fault proxy in front of it at
/// `port`; `None`, said, where the tools are missing.
struct World {
    h: sshd::Hosts,
    moto: Moto,
    faults: Faults,
    port: u16,
}

fn world(test: &str) -> Option<World> {
    world_of(test, 1)
}

fn world_of(test: &str, hosts: usize) -> Option<World> {
    if !can_run() {
        return None;
    }
    let h = sshd::hosts(test, hosts);
    let moto = Moto::start(free_port());
    let faults = Faults::default();
    let port = proxy(moto.port, faults.clone());
    Some(World {
        h,
        moto,
        faults,
        port,
    })
}

/// One EC2 pool of the fleet file.
struct Pool<'a> {
    name: &'a str,
    capacity: &'a str,
    price: f64,
    zones: &'a [&'a str],
    max_nodes: u32,
    /// The metadata service its spot instances' agents watch (a test double's port).
    metadata: Option<u16>,
}

const GPU: Pool = Pool {
    name: "gpu",
    capacity: "on-demand",
    price: 21.96,
    zones: &["us-east-1a"],
    max_nodes: 2,
    metadata: None,
};

/// A fleet of EC2 pools bought through the proxy at `port`, each node of each pool reached
/// (by its name) at a test host of its own (an sshd), the last host for those past them.
fn fleet(h: &sshd::Hosts, port: u16, fleet_id: &str, pools: &[Pool]) -> PathBuf {
    let mut ssh = String::new();
    let mut text =
        String::from("[scale]\nscale_down_after = \"8s\"\n\n[[teams]]\nname = \"lab\"\n");
    let mut k = 0;
    for p in pools {
        for i in 0..p.max_nodes {
            let port = h
                .hosts
                .get(k.min(h.hosts.len().saturating_sub(1)))
                .map_or(22, |x| x.port);
            k += 1;
            ssh.push_str(&format!(
                "Host aws-{}-{i:03}\n  HostName 127.0.0.1\n  Port {port}\n  User root\n",
                p.name
            ));
        }
        let zones: Vec<String> = p.zones.iter().map(|z| format!("\"{z}\"")).collect();
        text.push_str(&format!(
            r#"
[[pools]]
name = "{name}"
provider = "aws"
backend = "ec2"
region = "us-east-1"
zone = "{zone}"
instance_type = "p4de.24xlarge"
gpu = "A100-80GB"
gpus_per_node = 8
vram_gb = 80
cpus = 8
memory_gb = 32
capacity = "{capacity}"
price_per_hour = {price}
nodes = 0
max_nodes = {max}
provisioning_delay = "20s"

[pools.ssh]
config = "{dir}/cloud_ssh_config"

[pools.ec2]
image = "ami-f8e54081"
zones = [{zones}]
ssh_host = "{{node}}"
ssh_user = "root"
endpoint_url = "http://127.0.0.1:{port}"
fleet = "{fleet_id}"
{metadata}"#,
            name = p.name,
            zone = if p.zones[0] == "*" {
                "us-east-1a"
            } else {
                p.zones[0]
            },
            capacity = p.capacity,
            price = p.price,
            max = p.max_nodes,
            dir = h.dir.display(),
            zones = zones.join(", "),
            metadata = p.metadata.map_or(String::new(), |m| format!(
                "metadata_url = \"http://127.0.0.1:{m}\"\n"
            )),
        ));
    }
    // Each node's name first; then what every host needs (the key, known hosts).
    let general = std::fs::read_to_string(h.dir.join("ssh_config")).unwrap();
    std::fs::write(h.dir.join("cloud_ssh_config"), ssh + &general).unwrap();
    let path = h.dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A daemon on `fleet` in `dir`, with test credentials for the EC2 API.
fn daemon(dir: &Path, fleet: &Path) -> Daemon {
    start_with(
        dir.to_path_buf(),
        &["--config", fleet.to_str().unwrap()],
        |c| {
            c.env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing")
                .env("AWS_EC2_METADATA_DISABLED", "true");
        },
    )
}

fn has(d: &Daemon, what: &str) -> bool {
    events(d).iter().any(|e| e.contains(what))
}

const JOB: &str = "name: hello\nresources:\n  accelerators: A100-80GB:2\nrun: echo \"host=$(hostname) gpus=$GANTRY_NUM_GPUS\"\n";

#[test]
fn a_job_buys_an_instance_runs_there_and_the_idle_instance_is_given_back() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-buy")
    else {
        return;
    };
    let fleet = fleet(&h, port, "t-buy", &[GPU]);
    let dir = temp_dir("cloud-buy");
    let d = daemon(&dir, &fleet);
    assert!(instances(moto.port, "us-east-1").is_empty());
    // The launch takes 2 s at EC2: meanwhile the pool says what is coming, at what price.
    faults.set(vec![Rule {
        when: vec!["Action=RunInstances".to_string()],
        fault: Fault::Delay(Duration::from_secs(2)),
    }]);
    let id = submit(&d, &h.dir, "hello", JOB);
    let notes = |d: &Daemon| common::json(d, &["fleet"])["pools"][0]["notes"].to_string();
    wait_for(&d, 30, "the pool to say a node is coming", || {
        notes(&d).contains("+1 coming (+$21.96/h), first ready in ~")
    });
    wait_for(
        &d,
        120,
        "the job to run on the instance and complete",
        || state(&d, id) == "completed",
    );
    // Idle now: the pool and the node say when it goes.
    let pool = common::json(&d, &["fleet", "--pool", "gpu"]);
    assert!(
        pool["nodes"][0]["note"]
            .as_str()
            .is_some_and(|n| n.starts_with("idle ") && n.contains(": given back in ")),
        "{pool}"
    );
    assert!(notes(&d).contains("aws-gpu-000 idle: given back in "));
    let log = log_text(&d, id);
    assert!(
        log.contains(&format!("host={} gpus=2", h.hosts[0].name)),
        "ran on the instance's host: {log}"
    );
    let held = instances(moto.port, "us-east-1");
    assert_eq!(held.len(), 1, "one instance bought: {held:?}");
    let i = &held[0];
    assert_eq!(i.tag("gantry:fleet"), Some("t-buy"));
    assert_eq!(i.tag("gantry:pool"), Some("gpu"));
    assert_eq!(i.tag("gantry:node"), Some("aws-gpu-000"));
    assert_eq!(i.zone, "us-east-1a");
    let ev = events(&d);
    for want in [
        "aws/us-east-1/us-east-1a/gpu +1 for job",
        &format!(
            "aws-gpu-000: launched {} in us-east-1a (p4de.24xlarge, on-demand)",
            i.id
        ),
        "node aws-gpu-000 ready at root@aws-gpu-000",
        "host aws-gpu-000 connected",
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    // Empty past the pool's window: given back, and EC2 says so.
    wait_for(&d, 90, "the idle instance to be terminated", || {
        has(&d, &format!("aws-gpu-000: terminated {}", i.id))
    });
    let held = instances(moto.port, "us-east-1");
    assert!(held.iter().all(|i| !i.live()), "{held:?}");
    assert_eq!(faults.count("Action=RunInstances"), 1);
    assert_eq!(faults.count("Action=TerminateInstances"), 1);
}

#[test]
fn an_instance_taken_back_requeues_its_job_onto_a_new_one() {
    let Some(World { h, moto, port, .. }) = world("cloud-taken") else {
        return;
    };
    let fleet = fleet(&h, port, "t-taken", &[GPU]);
    let dir = temp_dir("cloud-taken");
    let d = daemon(&dir, &fleet);
    let id = submit(
        &d,
        &h.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100-80GB:2\nrun: echo start-$GANTRY_JOB_ID; sleep 600\n",
    );
    wait_for(&d, 120, "the job to run", || {
        state(&d, id) == "running" && log_text(&d, id).contains("start-")
    });
    let first = instances(moto.port, "us-east-1");
    assert_eq!(first.len(), 1, "{first:?}");
    // `gantry cloud ls` asks EC2 and the daemon: the instance, its node, age and its job.
    let ls = |output: &str| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("--connect")
            .arg(&d.socket)
            .args(["cloud", "ls", "-o", output, "--config"])
            .arg(&fleet)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let rows: serde_json::Value = serde_json::from_str(&ls("json")).unwrap();
    assert_eq!(rows[0]["id"], first[0].id.as_str(), "{rows}");
    assert_eq!(rows[0]["node"], "aws-gpu-000");
    assert_eq!(rows[0]["jobs"], serde_json::json!([id]), "{rows}");
    assert!(
        rows[0]["age_s"].as_f64().is_some_and(|a| a >= 0.0),
        "{rows}"
    );
    let table = ls("table");
    assert!(
        table.contains(&format!("job {id}")) && table.contains("aws-gpu-000"),
        "{table}"
    );
    // EC2 ends it (a spot reclaim, an operator's terminate): seen, the job requeued, a new
    // instance bought for it.
    // The machine goes, then EC2 says so; the next instance of that node is a fresh machine.
    h.hosts[0].replace(&h.dir, 0);
    moto::terminate(moto.port, "us-east-1", &first[0].id);
    wait_for(&d, 60, "the loss to be seen", || {
        has(&d, "node aws-gpu-000 taken back by the provider")
    });
    assert!(has(&d, &format!("aws-gpu-000: {} is ", first[0].id)));
    wait_for(&d, 120, "the job to run again on a new instance", || {
        instances(moto.port, "us-east-1").iter().any(|i| i.live()) && state(&d, id) == "running"
    });
    let now = instances(moto.port, "us-east-1");
    let live: Vec<_> = now.iter().filter(|i| i.live()).collect();
    assert_eq!(live.len(), 1, "{now:?}\n{:#?}", events(&d));
    assert_ne!(live[0].id, first[0].id);
    common::cli(&d, &["cancel", &id.to_string()]);
}

#[test]
fn no_capacity_in_a_zone_tries_the_next_and_no_spot_anywhere_buys_on_demand() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-failover")
    else {
        return;
    };
    let refuse = |when: &[&str], code: &str| {
        Rule {
        when: when.iter().map(|w| w.to_string()).collect(),
        fault: Fault::Refuse {
            code: code.to_string(),
            message: "We currently do not have sufficient capacity in the Availability Zone you requested.".to_string(),
        },
    }
    };
    // us-east-1a has no p4d at all; spot has none anywhere.
    faults.set(vec![
        refuse(
            &[
                "Action=RunInstances",
                "Placement.AvailabilityZone=us-east-1a",
            ],
            "InsufficientInstanceCapacity",
        ),
        refuse(
            &[
                "Action=RunInstances",
                "InstanceMarketOptions.MarketType=spot",
            ],
            "InsufficientInstanceCapacity",
        ),
    ]);
    let spot = Pool {
        name: "spot",
        capacity: "spot",
        price: 8.0,
        zones: &["us-east-1b", "us-east-1c"],
        max_nodes: 1,
        metadata: None,
    };
    let od = Pool {
        name: "od",
        capacity: "on-demand",
        price: 21.96,
        zones: &["us-east-1a", "us-east-1b"],
        max_nodes: 1,
        metadata: None,
    };
    let fleet = fleet(&h, port, "t-failover", &[spot, od]);
    let dir = temp_dir("cloud-failover");
    let d = daemon(&dir, &fleet);
    // The on-demand launch takes 3 s at EC2: meanwhile `gantry explain` says what was passed
    // over and what is being bought.
    faults.rules.lock().unwrap().push(Rule {
        when: vec![
            "Action=RunInstances".to_string(),
            "Placement.AvailabilityZone=us-east-1b".to_string(),
        ],
        fault: Fault::Delay(Duration::from_secs(3)),
    });
    // A job that may run on spot: spot first, where it is cheaper.
    let spot_ok = JOB.replace("resources:\n", "resources:\n  use_spot: true\n");
    let id = submit(&d, &h.dir, "hello", &spot_ok);
    wait_for(&d, 60, "explain to say the fallback", || {
        let e = common::json(&d, &["explain", &id.to_string()]);
        let detail = e["detail"].as_str().unwrap_or("");
        detail.contains("1 node(s) being bought, first aws-od-000 (aws/us-east-1/us-east-1a/od)")
            && detail.contains("; aws/us-east-1/us-east-1b/spot passed over for ")
            && detail.contains(": no capacity in us-east-1b, us-east-1c")
    });
    wait_for(&d, 120, "the job to complete", || {
        state(&d, id) == "completed"
    });
    let ev = events(&d);
    for want in [
        // The cheapest first: spot, zone by zone, then passed over…
        "aws-spot-000: us-east-1b: InsufficientInstanceCapacity",
        "; trying us-east-1c",
        "cannot buy aws-spot-000: no capacity in us-east-1b, us-east-1c",
        // …then on-demand, past the zone without capacity.
        "aws/us-east-1/us-east-1a/od +1 for job 1, +$21.96/h",
        "aws-od-000: us-east-1a: InsufficientInstanceCapacity",
        "aws-od-000: launched",
        "in us-east-1b (p4de.24xlarge, on-demand)",
        "host aws-od-000 connected",
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    let held = instances(moto.port, "us-east-1");
    assert_eq!(
        held.len(),
        1,
        "only the on-demand instance was bought: {held:?}"
    );
    assert_eq!(held[0].tag("gantry:pool"), Some("od"));
    assert_eq!(held[0].zone, "us-east-1b");
    assert!(log_text(&d, id).contains("gpus=2"));
}

#[test]
fn a_daemon_killed_during_a_launch_or_a_termination_leaks_nothing_and_buys_nothing_twice() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-kill")
    else {
        return;
    };
    let fleet = fleet(
        &h,
        port,
        "t-kill",
        &[Pool {
            max_nodes: 1,
            ..GPU
        }],
    );
    let dir = temp_dir("cloud-kill");
    let hold = |action: &str| Rule {
        when: vec![format!("Action={action}")],
        fault: Fault::Delay(Duration::from_secs(3)),
    };
    for round in 1..=3 {
        // Killed while its RunInstances is with EC2 (held 3 s by the proxy): the instance is
        // bought after the daemon is gone.
        faults.set(vec![hold("RunInstances")]);
        let mut d = daemon(&dir, &fleet);
        let id = submit(&d, &h.dir, &format!("r{round}"), JOB);
        wait_for(&d, 60, "the launch to reach EC2", || {
            faults.count("Action=RunInstances") == round
        });
        let _ = d.child.kill();
        let _ = d.child.wait();
        std::thread::sleep(Duration::from_secs(4));
        faults.set(vec![]);
        let d = daemon(&dir, &fleet);
        wait_for(
            &d,
            120,
            "the job to complete on the adopted instance",
            || state(&d, id) == "completed",
        );
        assert!(has(&d, "aws-gpu-000: adopted i-"), "{:#?}", events(&d));
        assert_eq!(
            faults.count("Action=RunInstances"),
            round,
            "the restarted daemon bought nothing"
        );
        let live: Vec<_> = instances(moto.port, "us-east-1")
            .into_iter()
            .filter(|i| i.live())
            .collect();
        assert_eq!(live.len(), 1, "round {round}: {live:?}");
        // Killed while its TerminateInstances is with EC2.
        faults.set(vec![hold("TerminateInstances")]);
        wait_for(&d, 90, "the idle instance to be given back", || {
            faults.count("Action=TerminateInstances") == round
        });
        let mut d = d;
        let _ = d.child.kill();
        let _ = d.child.wait();
        std::thread::sleep(Duration::from_secs(4));
        faults.set(vec![]);
        let held = instances(moto.port, "us-east-1");
        assert!(held.iter().all(|i| !i.live()), "round {round}: {held:?}");
        assert_eq!(
            held.len(),
            round,
            "one instance a round, never two: {held:?}"
        );
        drop(d);
    }
}

#[test]
fn missing_credentials_and_a_zone_the_region_lacks_are_refused_with_what_to_do() {
    if moto::moto_bin().is_none() {
        eprintln!("skipped: needs moto_server (pip install 'moto[server]')");
        return;
    }
    let moto = Moto::start(free_port());
    let dir = temp_dir("cloud-refused");
    let h = sshd::Hosts {
        dir: dir.clone(),
        hosts: Vec::new(),
    };
    std::fs::write(dir.join("ssh_config"), "").unwrap();
    let run = |fleet: &Path, creds: bool| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"));
        c.args(["daemon", "--config"])
            .arg(fleet)
            .arg("--db")
            .arg(dir.join("state.db"))
            .arg("--socket")
            .arg(dir.join("d.sock"))
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .env("AWS_CONFIG_FILE", dir.join("none"))
            .env("AWS_SHARED_CREDENTIALS_FILE", dir.join("none"))
            .env_remove("AWS_ACCESS_KEY_ID")
            .env_remove("AWS_SECRET_ACCESS_KEY")
            .env_remove("AWS_PROFILE");
        if creds {
            c.env("AWS_ACCESS_KEY_ID", "testing")
                .env("AWS_SECRET_ACCESS_KEY", "testing");
        }
        let out = c.output().unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let f = fleet(&h, moto.port, "t-refused", &[GPU]);
    let err = run(&f, false);
    assert!(
        err.contains("pool `gpu` (backend ec2, region us-east-1): no AWS credentials")
            && err.contains("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE"),
        "{err}"
    );
    let f = fleet(
        &h,
        moto.port,
        "t-refused",
        &[Pool {
            zones: &["us-east-1a", "us-east-1z"],
            ..GPU
        }],
    );
    let err = run(&f, true);
    assert!(
        err.contains(
            "zone `us-east-1z` is not a zone of us-east-1 (it has: us-east-1a, us-east-1b"
        ),
        "{err}"
    );
    assert!(instances(moto.port, "us-east-1").is_empty());
}

/// EC2's instance metadata service as a spot instance's agent reads it (IMDSv2: a token, then
/// `spot/instance-action`, 404 until a notice is set), on a 127.0.0.1 port of its own.
struct Imds {
    port: u16,
    notice: std::sync::Arc<std::sync::Mutex<Option<String>>>,
    tokened: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

fn imds() -> Imds {
    use std::io::{BufRead, BufReader, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let notice: std::sync::Arc<std::sync::Mutex<Option<String>>> = Default::default();
    let tokened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let (n, t) = (notice.clone(), tokened.clone());
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut first = String::new();
            let _ = r.read_line(&mut first);
            let mut token = false;
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
                token |= h
                    .to_ascii_lowercase()
                    .starts_with("x-aws-ec2-metadata-token: tok");
            }
            let (status, body) = if first.starts_with("PUT /latest/api/token") {
                ("200 OK", "tok".to_string())
            } else if first.starts_with("GET /latest/meta-data/spot/instance-action") {
                if token {
                    t.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                match n.lock().unwrap().clone() {
                    Some(b) if token => ("200 OK", b),
                    Some(_) => ("401 Unauthorized", String::new()),
                    None => ("404 Not Found", "<html>404 - Not Found</html>".to_string()),
                }
            } else {
                ("404 Not Found", "<html>404 - Not Found</html>".to_string())
            };
            let mut c = c;
            let _ = write!(
                c,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    Imds {
        port,
        notice,
        tokened,
    }
}

#[test]
fn a_spot_notice_read_on_the_instance_checkpoints_its_job_which_runs_again_on_a_new_node() {
    let Some(World { h, moto, port, .. }) = world_of("cloud-notice", 2) else {
        return;
    };
    let md = imds();
    let spot = Pool {
        name: "spot",
        capacity: "spot",
        price: 8.0,
        zones: &["us-east-1a"],
        max_nodes: 1,
        metadata: Some(md.port),
    };
    let od = Pool {
        name: "od",
        max_nodes: 1,
        ..GPU
    };
    let fleet = fleet(&h, port, "t-notice", &[spot, od]);
    let dir = temp_dir("cloud-notice");
    let d = daemon(&dir, &fleet);
    // What each run did, kept where both hosts write (a run's log goes with it).
    let marks = h.dir.join("marks");
    let id = submit(
        &d,
        &h.dir,
        "ckpt",
        &format!("name: ckpt\nresources:\n  use_spot: true\n  accelerators: A100-80GB:2\nrun: |\n  trap 'echo checkpointed-on-$(hostname) >> {0}; exit 0' TERM\n  echo start-on-$(hostname) >> {0}\n  sleep 600 & wait\n", marks.display()),
    );
    let marked = || std::fs::read_to_string(&marks).unwrap_or_default();
    wait_for(&d, 120, "the job to run on the spot instance", || {
        state(&d, id) == "running" && marked().contains(&format!("start-on-{}", h.hosts[0].name))
    });
    // The agent reads the metadata service (with an IMDSv2 token) and finds nothing yet.
    wait_for(&d, 30, "the agent to watch the metadata", || {
        md.tokened.load(std::sync::atomic::Ordering::Relaxed) > 0
    });
    assert!(!has(&d, "spot interruption notice"));
    let at = chrono::Utc::now() + chrono::Duration::seconds(120);
    *md.notice.lock().unwrap() = Some(format!(
        r#"{{"action": "terminate", "time": "{}"}}"#,
        at.format("%Y-%m-%dT%H:%M:%SZ")
    ));
    wait_for(
        &d,
        90,
        "the job to checkpoint and run again on a new node",
        || {
            marked().contains(&format!("start-on-{}", h.hosts[1].name))
                && state(&d, id) == "running"
        },
    );
    assert_eq!(
        marked(),
        format!(
            "start-on-{0}\ncheckpointed-on-{0}\nstart-on-{1}\n",
            h.hosts[0].name, h.hosts[1].name
        )
    );
    let ev = events(&d);
    for want in [
        "spot interruption notice from EC2: terminate at",
        "aws-spot-000 (aws/us-east-1/us-east-1a/spot) is taken back in 2 min; 1 job(s) checkpointing",
        "aws-od-000: launched",
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    // EC2 takes the instance back when it said: seen, and nothing else requeued.
    let spot_instance = instances(moto.port, "us-east-1")
        .into_iter()
        .find(|i| i.tag("gantry:pool") == Some("spot"))
        .unwrap();
    moto::terminate(moto.port, "us-east-1", &spot_instance.id);
    wait_for(&d, 60, "the spot node's end to be seen", || {
        has(&d, "node aws-spot-000 taken back by the provider")
    });
    assert_eq!(state(&d, id), "running");
    common::cli(&d, &["cancel", &id.to_string()]);
}

#[test]
fn a_spot_pool_of_any_zone_tries_the_cheapest_zone_by_the_catalog_first() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-zones")
    else {
        return;
    };
    // The catalog's spot prices for p4de.24xlarge in us-east-1: use1-az6 (moto's us-east-1a)
    // $9.73/h, use1-az4 (us-east-1d) $11.46/h; no other zone offers it. The cheapest has no
    // capacity now.
    faults.set(vec![Rule {
        when: vec![
            "Action=RunInstances".to_string(),
            "Placement.AvailabilityZone=us-east-1a".to_string(),
        ],
        fault: Fault::Refuse {
            code: "InsufficientInstanceCapacity".to_string(),
            message: "There is no Spot capacity available that matches your request.".to_string(),
        },
    }]);
    let spot = Pool {
        name: "spot",
        capacity: "spot",
        price: 9.73,
        zones: &["*"],
        max_nodes: 1,
        metadata: None,
    };
    let fleet = fleet(&h, port, "t-zones", &[spot]);
    let dir = temp_dir("cloud-zones");
    let d = daemon(&dir, &fleet);
    let spot_ok = JOB.replace("resources:\n", "resources:\n  use_spot: true\n");
    let id = submit(&d, &h.dir, "hello", &spot_ok);
    wait_for(&d, 120, "the job to complete", || {
        state(&d, id) == "completed"
    });
    let ev = events(&d);
    for want in [
        "zones by spot price (catalog): us-east-1a $9.73/h, us-east-1d $11.46/h",
        "aws-spot-000: us-east-1a: InsufficientInstanceCapacity",
        "; trying us-east-1d",
        "in us-east-1d (p4de.24xlarge, spot)",
    ] {
        assert!(ev.iter().any(|e| e.contains(want)), "{want}: {ev:#?}");
    }
    let held = instances(moto.port, "us-east-1");
    assert_eq!(held.len(), 1, "{held:?}");
    assert_eq!(held[0].zone, "us-east-1d");
}

#[test]
fn cloud_check_weighs_the_gpu_quota_against_max_nodes() {
    // moto stays bound: dropped, it would stop.
    let Some(World {
        h,
        faults,
        port,
        moto: _moto,
    }) = world("cloud-quota")
    else {
        return;
    };
    let fleet = fleet(&h, port, "t-quota", &[GPU]);
    let check = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["cloud", "check", "-o", "json", "--config"])
            .arg(&fleet)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), v[0]["lines"].to_string())
    };
    // moto serves no EC2 quotas: said, not failed.
    let (code, lines) = check();
    assert_eq!(code, Some(0), "{lines}");
    assert!(
        lines.contains("quota Running On-Demand P instances (L-417A185B): not readable (NoSuchResourceException"),
        "{lines}"
    );
    assert!(
        lines.contains("catalog: p4de.24xlarge holds 8× A100-80GB; in us-east-1: $27.45/h on-demand, spot from $9.73/h (use1-az6); the pool counts $21.96/h"),
        "{lines}"
    );
    // As AWS answers it: 96 vCPUs, one p4de.24xlarge of the pool's two.
    let quota = |vcpus: f64| Rule {
        when: vec!["\"QuotaCode\":\"L-417A185B\"".to_string()],
        fault: Fault::Json(format!(
            r#"{{"Quota":{{"ServiceCode":"ec2","ServiceName":"Amazon Elastic Compute Cloud (Amazon EC2)","QuotaCode":"L-417A185B","QuotaName":"Running On-Demand P instances","Value":{vcpus},"Unit":"None","Adjustable":true,"GlobalQuota":false}}}}"#
        )),
    };
    faults.set(vec![quota(96.0)]);
    let (code, lines) = check();
    assert_eq!(code, Some(0), "{lines}");
    assert!(
        lines.contains("quota Running On-Demand P instances (L-417A185B): 96 vCPUs = 1 × p4de.24xlarge (96 vCPUs each); max_nodes 2 needs 192 — at most 1 can run at once"),
        "{lines}"
    );
    // None: the pool cannot buy, and check says so with exit 1.
    faults.set(vec![quota(0.0)]);
    let (code, lines) = check();
    assert_eq!(code, Some(1), "{lines}");
    assert!(
        lines.contains("none can be bought: ask AWS for more"),
        "{lines}"
    );
}

#[test]
fn cloud_check_says_whether_the_pools_security_groups_admit_ssh() {
    let Some(World { h, moto, port, .. }) = world("cloud-sg") else {
        return;
    };
    let web = moto::security_group(moto.port, "us-east-1", "web-only", &[443]);
    let ssh = moto::security_group(moto.port, "us-east-1", "ssh", &[22]);
    let check = |groups: &[&str]| {
        let fleet = fleet(&h, port, "t-sg", &[GPU]);
        let list: Vec<String> = groups.iter().map(|g| format!("\"{g}\"")).collect();
        let text = std::fs::read_to_string(&fleet).unwrap().replace(
            "[pools.ec2]\n",
            &format!("[pools.ec2]\nsecurity_groups = [{}]\n", list.join(", ")),
        );
        std::fs::write(&fleet, text).unwrap();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(["cloud", "check", "-o", "json", "--config"])
            .arg(&fleet)
            .env("AWS_ACCESS_KEY_ID", "testing")
            .env("AWS_SECRET_ACCESS_KEY", "testing")
            .env("AWS_EC2_METADATA_DISABLED", "true")
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out.status.code(), v[0]["lines"].to_string())
    };
    let (code, lines) = check(&[&web]);
    assert_eq!(code, Some(1), "{lines}");
    assert!(
        lines.contains(&format!("security group {web}: no inbound rule for tcp 22"))
            && lines.contains("no security group of the pool admits tcp 22"),
        "{lines}"
    );
    let (code, lines) = check(&[&web, &ssh]);
    assert_eq!(code, Some(0), "{lines}");
    assert!(
        lines.contains(&format!(
            "security group {ssh}: admits tcp 22 from 0.0.0.0/0"
        )),
        "{lines}"
    );
    let (code, lines) = check(&["sg-0000000000000dead"]);
    assert_eq!(code, Some(1), "{lines}");
    assert!(lines.contains("security groups: "), "{lines}");
}

/// Instances that never answer (here: their names lead to a port nothing listens on) are
/// given back once the pool's `reachable_within` passes — and the pool is then passed over,
/// said with what to check, instead of bought from again at once (46 launches in 14 minutes,
/// none of them usable, before).
#[test]
fn a_pool_whose_instances_never_answer_backs_off_instead_of_buying_again() {
    let Some(World {
        h,
        moto: _moto,
        faults,
        port,
    }) = world("cloud-unreached")
    else {
        return;
    };
    let fleet = fleet(&h, port, "t-unreached", &[GPU]);
    // Every node's name leads nowhere; the pool waits 10 s (the least) for a first answer.
    let dead = free_port();
    let cfg = h.dir.join("cloud_ssh_config");
    let text = std::fs::read_to_string(&cfg).unwrap();
    let text = text
        .lines()
        .map(|l| {
            if l.trim_start().starts_with("Port ") {
                format!("  Port {dead}")
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&cfg, text + "\n").unwrap();
    let with = std::fs::read_to_string(&fleet)
        .unwrap()
        .replace("[pools.ec2]\n", "[pools.ec2]\nreachable_within = \"10s\"\n")
        .replace("[pools.ssh]\n", "lost_after = \"5s\"\n\n[pools.ssh]\n");
    std::fs::write(&fleet, with).unwrap();
    let dir = temp_dir("cloud-unreached");
    let d = daemon(&dir, &fleet);
    let id = submit(&d, &h.dir, "hello", JOB);
    wait_for(&d, 120, "the unreachable instance to be given back", || {
        has(
            &d,
            "it never answered (1 in a row): the pool is passed over for 5 min",
        )
    });
    // Passed over: no second launch while the job waits, and its row says why.
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(faults.count("Action=RunInstances"), 1, "{:#?}", events(&d));
    let pool = common::json(&d, &["fleet"])["pools"][0]["notes"].to_string();
    assert!(
        pool.contains("passed over for") && pool.contains("never answered"),
        "{pool}"
    );
    assert_eq!(state(&d, id), "pending");
    // The pass-over outlives the daemon: a `kill -9` and a restart buy nothing from the pool
    // (before, the restarted daemon bought again at once).
    let mut d = d;
    let _ = d.child.kill();
    let _ = d.child.wait();
    let d = daemon(&dir, &fleet);
    std::thread::sleep(Duration::from_secs(8));
    assert_eq!(faults.count("Action=RunInstances"), 1, "{:#?}", events(&d));
    let pool = common::json(&d, &["fleet"])["pools"][0]["notes"].to_string();
    assert!(pool.contains("never answered"), "{pool}");
}

/// `[scale] scale_down_after` outlives restarts: a daemon killed and restarted more often than
/// the window still gives an idle node back (before, each restart started the window again,
/// and the idle instance was never terminated).
#[test]
fn a_daemon_restarting_faster_than_the_idle_window_still_gives_an_idle_node_back() {
    let Some(World { h, moto, port, .. }) = world("cloud-idle-restarts") else {
        return;
    };
    let fleet = fleet(&h, port, "t-idle-restarts", &[GPU]);
    let dir = temp_dir("cloud-idle-restarts");
    let mut d = daemon(&dir, &fleet);
    let id = submit(&d, &h.dir, "hello", JOB);
    wait_for(&d, 120, "the job to complete", || {
        state(&d, id) == "completed"
    });
    let bought = instances(moto.port, "us-east-1");
    assert_eq!(bought.len(), 1, "{bought:?}");
    // Killed every 5 s, under the 8 s window.
    let mut given_back = false;
    // Each one killed is kept until the end: dropping one removes the directory.
    let mut killed = Vec::new();
    for _ in 0..8 {
        let _ = d.child.kill();
        let _ = d.child.wait();
        let next = daemon(&dir, &fleet);
        killed.push(std::mem::replace(&mut d, next));
        std::thread::sleep(Duration::from_secs(5));
        if instances(moto.port, "us-east-1").iter().all(|i| !i.live()) {
            given_back = true;
            break;
        }
    }
    assert!(
        given_back,
        "the idle node was never given back: {:#?}",
        events(&d)
    );
}

/// A cloud pool taken out of the fleet file leaves nothing running: its instance (with a job
/// on it) is terminated, said, and the job requeued onto a pool that stays (the instance was
/// still running 170 s later, and after a restart, with 0 terminate calls, before).
#[test]
fn a_pool_removed_from_the_fleet_file_gives_back_what_it_bought() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-removed")
    else {
        return;
    };
    const SPARE: Pool = Pool {
        name: "spare",
        ..GPU
    };
    let path = fleet(&h, port, "t-removed", &[GPU, SPARE]);
    let dir = temp_dir("cloud-removed");
    let d = daemon(&dir, &path);
    let id = submit(
        &d,
        &h.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100-80GB:2\nrun: sleep 300\n",
    );
    wait_for(&d, 120, "the job to run on the first pool", || {
        state(&d, id) == "running"
    });
    let bought = instances(moto.port, "us-east-1");
    assert_eq!(bought.len(), 1, "{bought:?}");
    assert_eq!(bought[0].tag("gantry:pool"), Some("gpu"));
    // The pool leaves the file (the other stays): its instance is terminated.
    fleet(&h, port, "t-removed", &[SPARE]);
    wait_for(
        &d,
        60,
        "the removed pool's instance to be terminated",
        || {
            instances(moto.port, "us-east-1")
                .iter()
                .any(|i| i.id == bought[0].id && !i.live())
        },
    );
    assert!(
        has(
            &d,
            "left the fleet file: every instance it bought is terminated (aws-gpu-000)"
        ),
        "{:#?}",
        events(&d)
    );
    assert!(faults.count("Action=TerminateInstances") >= 1);
    // What the retiring pool's worker does still reaches the events.
    wait_for(&d, 30, "the retiring worker's own line", || {
        has(
            &d,
            &format!("left the fleet file: terminated {}", bought[0].id),
        )
    });
    // Once EC2 lists none of it, the journal forgets the pool.
    wait_for(&d, 60, "the removed pool to be forgotten", || {
        has(
            &d,
            "pool aws/us-east-1/us-east-1a/gpu: its cloud lists none of its instances: forgotten",
        )
    });
    // Its job goes on in the pool that stayed.
    wait_for(
        &d,
        120,
        "the job to run again on the pool that stayed",
        || {
            state(&d, id) == "running"
                && instances(moto.port, "us-east-1")
                    .iter()
                    .any(|i| i.live() && i.tag("gantry:pool") == Some("spare"))
        },
    );
    common::cli(&d, &["cancel", &id.to_string()]);
}

/// A pool whose zone is edited keeps its name and region: the pool in force lists (and
/// adopts) what the old one bought, so nothing is retired — retiring it would end the instance
/// its job runs on.
#[test]
fn a_pool_moved_to_another_zone_keeps_what_it_bought() {
    let Some(World { h, moto, port, .. }) = world("cloud-moved") else {
        return;
    };
    const WIDE: Pool = Pool {
        zones: &["us-east-1a", "us-east-1b"],
        ..GPU
    };
    let path = fleet(&h, port, "t-moved", &[WIDE]);
    let dir = temp_dir("cloud-moved");
    let d = daemon(&dir, &path);
    let id = submit(
        &d,
        &h.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100-80GB:2\nrun: sleep 300\n",
    );
    wait_for(&d, 120, "the job to run", || state(&d, id) == "running");
    let bought = instances(moto.port, "us-east-1");
    assert_eq!(bought.len(), 1, "{bought:?}");
    // The pool's zone (its place in the tree) moves; its name and region stay.
    const MOVED: Pool = Pool {
        zones: &["us-east-1b", "us-east-1a"],
        ..GPU
    };
    fleet(&h, port, "t-moved", &[MOVED]);
    wait_for(&d, 30, "the reload", || has(&d, "fleet file reloaded"));
    std::thread::sleep(Duration::from_secs(6));
    assert!(
        instances(moto.port, "us-east-1")
            .iter()
            .any(|i| i.id == bought[0].id && i.live()),
        "{:#?}",
        events(&d)
    );
    assert!(!has(&d, "left the fleet file"), "{:#?}", events(&d));
    common::cli(&d, &["cancel", &id.to_string()]);
}

/// Instances are the journal's, not the fleet file's: a daemon killed while a pool holds an
/// instance, then started with another file that lacks the pool, gives the instance back; until
/// then `gantry cloud ls` (no daemon running) lists it from the journal. Before, the instance
/// ran on (0 terminate calls) and `cloud ls` of the new file said nothing of it.
#[test]
fn a_daemon_started_with_another_file_gives_back_what_the_journal_says_it_bought() {
    let Some(World {
        h,
        moto,
        faults,
        port,
    }) = world("cloud-other-file")
    else {
        return;
    };
    const SPARE: Pool = Pool {
        name: "spare",
        ..GPU
    };
    let path = fleet(&h, port, "t-other", &[GPU, SPARE]);
    let dir = temp_dir("cloud-other-file");
    let mut d = daemon(&dir, &path);
    let id = submit(
        &d,
        &h.dir,
        "long",
        "name: long\nresources:\n  accelerators: A100-80GB:2\nrun: sleep 300\n",
    );
    wait_for(&d, 120, "the job to run on the first pool", || {
        state(&d, id) == "running"
    });
    let bought = instances(moto.port, "us-east-1");
    assert_eq!(bought.len(), 1, "{bought:?}");
    assert_eq!(bought[0].tag("gantry:pool"), Some("gpu"));
    let _ = d.child.kill();
    let _ = d.child.wait();
    // Another file: the pool `gpu` is not in it.
    let other = fleet(&h, port, "t-other", &[SPARE]);
    // No daemon: `cloud ls` of the other file reads the journal for the pools that left.
    let ls = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["--connect"])
        .arg(dir.join("none.sock"))
        .args(["cloud", "ls", "--config"])
        .arg(&other)
        .arg("--db")
        .arg(dir.join("state").join("state.db"))
        .env("AWS_ACCESS_KEY_ID", "testing")
        .env("AWS_SECRET_ACCESS_KEY", "testing")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ls.stdout);
    assert!(
        ls.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&ls.stderr)
    );
    let line = text
        .lines()
        .find(|l| l.contains(&bought[0].id))
        .unwrap_or_else(|| panic!("cloud ls lists the left pool's instance: {text}"));
    assert!(line.starts_with("gpu*"), "{text}");
    assert!(text.contains("its pool left the fleet file"), "{text}");
    // An operator who says so keeps them: said, nothing ended.
    let text = std::fs::read_to_string(&other).unwrap();
    std::fs::write(
        &other,
        text.replace(
            "scale_down_after = \"8s\"",
            "scale_down_after = \"8s\"\ngive_back_left_pools = false",
        ),
    )
    .unwrap();
    let mut d = daemon(&dir, &other);
    wait_for(&d, 30, "the kept pool to be said", || {
        has(
            &d,
            "pool aws/us-east-1/us-east-1a/gpu left the fleet file, and its instances are kept",
        )
    });
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!(faults.count("Action=TerminateInstances"), 0);
    let _ = d.child.kill();
    let _ = d.child.wait();
    std::fs::write(&other, text).unwrap();
    let d = daemon(&dir, &other);
    wait_for(&d, 90, "the left pool's instance to be terminated", || {
        instances(moto.port, "us-east-1")
            .iter()
            .any(|i| i.id == bought[0].id && !i.live())
    });
    assert!(faults.count("Action=TerminateInstances") >= 1);
    for want in [
        "pool aws/us-east-1/us-east-1a/gpu is in the journal but not in this fleet file"
            .to_string(),
        format!("left the fleet file: terminated {}", bought[0].id),
    ] {
        wait_for(&d, 30, &want, || has(&d, &want));
    }
    // Once its cloud lists none, the journal forgets it: `cloud ls` no longer asks.
    wait_for(&d, 60, "the left pool to be forgotten", || {
        has(
            &d,
            "pool aws/us-east-1/us-east-1a/gpu: its cloud lists none of its instances: forgotten",
        )
    });
    let (status, body) = common::split(&common::request(&d.socket, "GET /v1/clouds", ""));
    assert!(status.contains("200"), "{status} {body}");
    let known: serde_json::Value = serde_json::from_str(&body).unwrap();
    let keys: Vec<&str> = known
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|k| k["key"].as_str())
        .collect();
    assert_eq!(keys, ["aws/us-east-1/us-east-1a/spare"], "{known}");
    common::cli(&d, &["cancel", &id.to_string()]);
}

/// docs/clouds.md's dry run, followed as written: its ssh_config, fleet file and job, with
/// only moto's port and the test's sshd put in (the "instance" is a local sshd, as the doc's is
/// this machine's): the node is bought, the job runs there, the idle node is given back.
#[test]
fn the_docs_dry_run_buys_runs_and_gives_back_one_node() {
    let Some(World { h, moto, port, .. }) = world("cloud-dryrun") else {
        return;
    };
    const SECTION: &str = "## Try a cloud pool with no account (a dry run)";
    let ssh = common::doc_blocks("docs/clouds.md", SECTION, "sshconfig").remove(0);
    let toml = common::doc_blocks("docs/clouds.md", SECTION, "toml").remove(0);
    let yaml = common::doc_blocks("docs/clouds.md", SECTION, "yaml").remove(0);
    let sh = common::doc_blocks("docs/clouds.md", SECTION, "sh").join("\n");
    assert!(sh.contains("moto_server -p 5000") && sh.contains("--db /tmp/try/state.db"));
    // The doc's ssh_config, with the test sshd's port, then what the test's hosts need.
    let sshd = &h.hosts[0];
    let cfg = h.dir.join("try_ssh_config");
    let general = std::fs::read_to_string(h.dir.join("ssh_config")).unwrap();
    std::fs::write(&cfg, format!("{}  Port {}\n{general}", ssh, sshd.port)).unwrap();
    assert!(
        toml.contains("endpoint_url = \"http://127.0.0.1:5000\""),
        "{toml}"
    );
    let fleet = h.dir.join("try.toml");
    std::fs::write(
        &fleet,
        toml.replace("http://127.0.0.1:5000", &format!("http://127.0.0.1:{port}"))
            .replace("~/.config/gantry/try_ssh_config", cfg.to_str().unwrap())
            .replace("ssh_user = \"me\"", "ssh_user = \"root\""),
    )
    .unwrap();
    let dir = temp_dir("cloud-dryrun");
    let d = daemon(&dir, &fleet);
    let id = submit(&d, &h.dir, "try", &yaml);
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
    let bought = instances(moto.port, "us-east-1");
    assert_eq!(bought.len(), 1, "{bought:?}");
    for want in [
        "aws/us-east-1/us-east-1a/try +1 for job",
        &format!("aws-try-000: launched {} in us-east-1a", bought[0].id),
    ] {
        assert!(has(&d, want), "{want}: {:#?}", events(&d));
    }
    wait_for(&d, 120, "the idle node to be given back", || {
        has(&d, &format!("aws-try-000: terminated {}", bought[0].id))
    });
    assert!(instances(moto.port, "us-east-1").iter().all(|i| !i.live()));
}
