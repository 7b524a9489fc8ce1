//! Crash safety of the journal: the real binary submits from 16 concurrent clients and is
//! killed with SIGKILL mid-stream, three times on the same database. Every acknowledged job
//! must exist exactly once afterwards, and nothing may be half-written.

use gantry::daemon::journal::Store;
use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

#[test]
fn acknowledged_jobs_survive_kill_9() {
    let dir = gantry_testkit::scratch::scratch("crash");
    let db = dir.join("state.db");
    let mut acked: HashSet<i64> = HashSet::new();
    for round in 0..3 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args([
                "bench",
                "journal",
                "--db",
                db.to_str().unwrap(),
                "--clients",
                "16",
                "--jobs",
                "10000000",
                "--print-acks",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gantry");
        let stdout = child.stdout.take().unwrap();
        let mut lines = BufReader::new(stdout).lines();
        let mut this_round = 0;
        // Let it run until it has acknowledged a good number, then kill it without warning.
        while this_round < 1500 {
            let line = lines.next().expect("gantry stopped early").unwrap();
            let id: i64 = line
                .strip_prefix("ack ")
                .expect("ack line")
                .parse()
                .unwrap();
            assert!(acked.insert(id), "id {id} acknowledged twice");
            this_round += 1;
        }
        child.kill().unwrap(); // SIGKILL on Unix
                               // Acks already written before the kill are acknowledged too.
        for line in lines.map_while(Result::ok) {
            if let Some(id) = line.strip_prefix("ack ").and_then(|s| s.parse().ok()) {
                assert!(acked.insert(id), "id {id} acknowledged twice");
            }
        }
        child.wait().unwrap();

        let store = Store::open(&db).expect("the journal opens after a crash");
        let jobs = store.load().expect("every row reads back");
        let ids: HashSet<i64> = jobs.iter().map(|j| j.id).collect();
        assert_eq!(ids.len(), jobs.len(), "round {round}: a job appears twice");
        let lost: Vec<&i64> = acked
            .iter()
            .filter(|id| !ids.contains(id))
            .take(5)
            .collect();
        assert!(
            lost.is_empty(),
            "round {round}: acknowledged jobs lost: {lost:?}"
        );
        for j in &jobs {
            gantry::spec::parse("journal", j.spec.as_bytes())
                .unwrap_or_else(|e| panic!("job {} half-written: {e}", j.id));
            assert!(
                j.name.as_deref().is_some_and(|n| n.starts_with("bench-")),
                "job {} has no name",
                j.id
            );
        }
    }
    assert!(acked.len() >= 4500);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The whole daemon: `gantry daemon` serves 8 concurrent API clients and is killed with
/// SIGKILL mid-stream, twice. After each restart every acknowledged job is listed exactly
/// once, with the name its client gave it, and the journal holds nothing half-written.
#[test]
fn acknowledged_api_submissions_survive_kill_9_of_the_daemon() {
    use gantry::client::http::{Endpoint, HttpClient};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    let dir = gantry_testkit::scratch::scratch("dcrash");
    let db = dir.join("state.db");
    let socket = dir.join("d.sock");
    let start = || {
        let child = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args([
                "daemon",
                "--db",
                db.to_str().unwrap(),
                "--socket",
                socket.to_str().unwrap(),
            ])
            .env("XDG_CONFIG_HOME", dir.join("cfg"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start gantry daemon");
        let t0 = Instant::now();
        while HttpClient::new(Endpoint::Unix(socket.clone()), None)
            .request("GET", "/v1/health", None)
            .is_err()
        {
            assert!(
                t0.elapsed() < Duration::from_secs(20),
                "daemon did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        child
    };
    // name → id, for every acknowledged submission.
    let acked: Arc<Mutex<Vec<(String, i64)>>> = Arc::default();
    for round in 0..2 {
        let mut child = start();
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let clients: Vec<_> = (0..8)
            .map(|c| {
                let (acked, stop, socket) = (acked.clone(), stop.clone(), socket.clone());
                std::thread::spawn(move || {
                    let mut http = HttpClient::new(Endpoint::Unix(socket), None);
                    for i in 0.. {
                        if stop.load(std::sync::atomic::Ordering::Relaxed) {
                            break;
                        }
                        let name = format!("r{round}-c{c}-{i}");
                        let spec =
                            format!("name: {name}\nresources:\n  accelerators: H100:1\nrun: x\n");
                        match http.request("POST", "/v1/jobs", Some(spec.as_bytes())) {
                            Ok(r) if r.status == 201 => {
                                let v: serde_json::Value = serde_json::from_slice(&r.body).unwrap();
                                acked
                                    .lock()
                                    .unwrap()
                                    .push((name, v["id"].as_i64().unwrap()));
                            }
                            Ok(r) => panic!("refused: {}", String::from_utf8_lossy(&r.body)),
                            Err(_) => break, // the daemon died under us
                        }
                    }
                })
            })
            .collect();
        let t0 = Instant::now();
        while acked.lock().unwrap().len() < 1000 * (round + 1)
            && t0.elapsed() < Duration::from_secs(60)
        {
            std::thread::sleep(Duration::from_millis(5));
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for c in clients {
            c.join().unwrap();
        }

        let mut child = start();
        let mut http = HttpClient::new(Endpoint::Unix(socket.clone()), None);
        let rows: Vec<serde_json::Value> = http.call("GET", "/v1/jobs", None).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
        let listed: std::collections::HashMap<i64, String> = rows
            .iter()
            .map(|r| {
                (
                    r["id"].as_i64().unwrap(),
                    r["name"].as_str().unwrap().to_string(),
                )
            })
            .collect();
        assert_eq!(
            listed.len(),
            rows.len(),
            "round {round}: a job is listed twice"
        );
        let acked = acked.lock().unwrap();
        assert!(
            acked.len() >= 1000 * (round + 1),
            "round {round}: only {} acks",
            acked.len()
        );
        for (name, id) in acked.iter() {
            assert_eq!(
                listed.get(id),
                Some(name),
                "round {round}: acknowledged job {id} ({name}) lost or renamed"
            );
        }
        let mut names: Vec<&String> = listed.values().collect();
        names.sort();
        names.dedup();
        assert_eq!(
            names.len(),
            listed.len(),
            "round {round}: a submission was stored twice"
        );
        let jobs = Store::open(&db).unwrap().load().unwrap();
        assert_eq!(jobs.len(), listed.len());
        for j in &jobs {
            gantry::spec::parse("journal", j.spec.as_bytes())
                .unwrap_or_else(|e| panic!("job {} half-written: {e}", j.id));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs the CLI against the daemon at `sock`.
fn cli(sock: &std::path::Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env("GANTRY_CONNECT", sock)
        .output()
        .expect("run gantry");
    String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr)
}

fn daemon(dir: &std::path::Path) -> std::process::Child {
    let sock = dir.join("sock");
    let _ = std::fs::remove_file(&sock);
    let child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["daemon", "--config"])
        .arg(dir.join("fleet.toml"))
        .arg("--db")
        .arg(dir.join("state.db"))
        .arg("--socket")
        .arg(&sock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the daemon");
    let t = std::time::Instant::now();
    while !sock.exists() && t.elapsed() < std::time::Duration::from_secs(20) {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !done() {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn a_local_job_outlives_a_kill_9_of_its_daemon_and_is_re_adopted() {
    let dir = gantry_testkit::scratch::scratch("crash-local");
    let fleet = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["fleet", "--print-local"])
        .output()
        .unwrap();
    std::fs::write(dir.join("fleet.toml"), fleet.stdout).unwrap();
    let go = dir.join("go");
    std::fs::write(
        dir.join("job.yaml"),
        format!(
            "name: survivor\nresources:\n  cpus: 1\n  memory: 1\nrun: |\n  echo started\n  while [ ! -e {} ]; do sleep 0.1; done\n  echo finished\n",
            go.display()
        ),
    )
    .unwrap();
    let sock = dir.join("sock");
    let mut first = daemon(&dir);
    let submitted = cli(&sock, &["submit", dir.join("job.yaml").to_str().unwrap()]);
    assert!(submitted.contains("submitted job 1"), "{submitted}");
    let log = dir.join("logs").join("job-1.out");
    wait_for("the job to start", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("started"))
    });
    first.kill().unwrap(); // SIGKILL: no chance to clean up
    first.wait().unwrap();
    let mut second = daemon(&dir);
    let job = cli(&sock, &["job", "1", "--output", "json"]);
    assert!(job.contains("\"state\": \"running\""), "{job}");
    assert!(job.contains("re-adopted on"), "{job}");
    std::fs::write(&go, "").unwrap();
    wait_for("the re-adopted job to complete", || {
        cli(&sock, &["job", "1", "--output", "json"]).contains("\"state\": \"completed\"")
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, "started\nfinished\n", "it ran once, not twice");
    second.kill().unwrap();
    second.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The fleet file is edited under a running daemon: a broken edit is reported where it is
/// wrong and changes nothing; a good one is applied, says what changed, and the job running on
/// this host meanwhile keeps running and finishes once.
#[test]
fn an_edited_fleet_file_is_applied_while_a_local_job_keeps_running() {
    let Steady {
        dir,
        fleet,
        go,
        sock,
        log,
        mut d,
    } = steady("reload", "  echo finished\n");
    let events = || cli(&sock, &["events", "--limit", "200"]);
    // A broken edit: said with where, nothing changes.
    let lines = fleet.lines().count();
    std::fs::write(
        dir.join("fleet.toml"),
        format!("{fleet}\n[[teams]]\nname = 5\n"),
    )
    .unwrap();
    wait_for("the broken edit to be reported", || {
        let e = events();
        e.contains("was not applied") && e.contains(&format!("fleet.toml:{}", lines + 3))
    });
    // A good one.
    std::fs::write(
        dir.join("fleet.toml"),
        format!("{fleet}\n[[teams]]\nname = \"vision\"\n"),
    )
    .unwrap();
    wait_for("the edit to be applied", || {
        events().contains("fleet file reloaded: team `vision` added")
    });
    let job = cli(&sock, &["job", "1", "--output", "json"]);
    assert!(job.contains("\"state\": \"running\""), "{job}");
    let teams = cli(&sock, &["teams", "--output", "json"]);
    assert!(teams.contains("vision"), "{teams}");
    std::fs::write(&go, "").unwrap();
    wait_for("the job to complete", || {
        cli(&sock, &["job", "1", "--output", "json"]).contains("\"state\": \"completed\"")
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert_eq!(text, "started\nfinished\n", "it ran once, not twice");
    d.kill().unwrap();
    d.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A half-written fleet file is never applied (issue 36): an editor's truncate-then-write
/// leaves it empty, a full disk cuts it short. The empty file, and one cut before its team,
/// would each have failed the running job (`unknown GPU model … (this fleet has: )`); both are
/// refused, saying so, and the job keeps running. SIGHUP — the operator's say-so — applies a
/// file that fails jobs, and says which.
#[test]
fn a_half_written_fleet_file_fails_no_job() {
    let Steady {
        dir,
        fleet,
        go,
        sock,
        mut d,
        ..
    } = steady("halfwritten", "");
    let file = dir.join("fleet.toml");
    let events = || cli(&sock, &["events", "--limit", "200"]);
    let state = || cli(&sock, &["job", "1", "--output", "json"]);
    std::fs::write(&file, "").unwrap();
    wait_for("the empty file to be refused", || {
        events().contains("has no pools (empty, or half-written?): not applied")
    });
    assert!(state().contains("\"state\": \"running\""), "{}", state());
    // Cut short before its [[teams]]: the pools are whole, the job's team is gone.
    let cut = &fleet[fleet.find("[[pools]]").unwrap()..];
    std::fs::write(&file, cut).unwrap();
    wait_for("the cut file to be refused", || {
        let e = events();
        e.contains("it would fail 1 live job(s) (1; job 1: its team `default` is not in it)")
    });
    assert!(state().contains("\"state\": \"running\""), "{}", state());
    let said = events();
    assert!(!said.contains("failed at startup"), "{said}");
    // The operator's SIGHUP applies it: the job fails, saying why.
    let pid = d.id().to_string();
    assert!(Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    wait_for("the forced file to fail the job", || {
        state().contains("\"state\": \"failed\"")
    });
    std::fs::write(&go, "").unwrap();
    d.kill().unwrap();
    d.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A daemon over this host's fleet file, running job 1 — `started`, then waiting for the file
/// `go` (so its process ends when the test says), then `tail`.
struct Steady {
    dir: std::path::PathBuf,
    fleet: String,
    go: std::path::PathBuf,
    sock: std::path::PathBuf,
    log: std::path::PathBuf,
    d: std::process::Child,
}

fn steady(name: &str, tail: &str) -> Steady {
    let dir = gantry_testkit::scratch::scratch(name);
    let fleet = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["fleet", "--print-local"])
        .output()
        .unwrap()
        .stdout;
    let fleet = String::from_utf8(fleet).unwrap();
    std::fs::write(dir.join("fleet.toml"), &fleet).unwrap();
    let go = dir.join("go");
    std::fs::write(
        dir.join("job.yaml"),
        format!(
            "name: steady\nresources:\n  cpus: 1\n  memory: 1\nrun: |\n  echo started\n  while [ ! -e {} ]; do sleep 0.1; done\n{tail}",
            go.display()
        ),
    )
    .unwrap();
    let sock = dir.join("sock");
    let d = daemon(&dir);
    let submitted = cli(&sock, &["submit", dir.join("job.yaml").to_str().unwrap()]);
    assert!(submitted.contains("submitted job 1"), "{submitted}");
    let log = dir.join("logs").join("job-1.out");
    wait_for("the job to start", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("started"))
    });
    Steady {
        dir,
        fleet,
        go,
        sock,
        log,
        d,
    }
}

/// A reload never rewrites a job's history: the fleet file edited once a second under a
/// running job, every event the job had keeps its time, and its bill keeps every second it
/// ran. (A reload used to resume the daemon's clock from the last one it had journaled, up to
/// a minute back, and pin that moment to the wall clock: a job started in that minute read as
/// submitted and started at the reload, and its bill lost the seconds before it.)
#[test]
fn a_reload_never_rewrites_a_jobs_history_or_its_bill() {
    let dir = gantry_testkit::scratch::scratch("restamp");
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["fleet", "--print-local"])
        .output()
        .unwrap()
        .stdout;
    // A dollar a second for the host, so the bill counts seconds.
    let fleet: String = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(|l| {
            if l.starts_with("price_per_hour") {
                "price_per_hour = 3600.0".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(fleet.contains("price_per_hour = 3600.0"), "{fleet}");
    std::fs::write(dir.join("fleet.toml"), &fleet).unwrap();
    std::fs::write(
        dir.join("job.yaml"),
        "name: billed\nresources:\n  cpus: 1\n  memory: 1\nrun: sleep 300\n",
    )
    .unwrap();
    let sock = dir.join("sock");
    // Killed however the test ends: a failed assertion must not leave a daemon running.
    struct Killed(std::process::Child);
    impl Drop for Killed {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _d = Killed(daemon(&dir));
    let job = || -> serde_json::Value {
        serde_json::from_str(&cli(&sock, &["job", "1", "-o", "json"])).unwrap()
    };
    let submitted = cli(&sock, &["submit", dir.join("job.yaml").to_str().unwrap()]);
    assert!(submitted.contains("submitted job 1"), "{submitted}");
    let started = std::time::Instant::now();
    wait_for("the job to run", || job()["state"] == "running");
    std::thread::sleep(std::time::Duration::from_secs(3));
    let before = job();
    let times = |j: &serde_json::Value| -> Vec<(String, String)> {
        j["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
                (s("kind"), s("time"))
            })
            .collect()
    };
    let history = times(&before);
    assert!(history.len() >= 2, "{before}");
    for i in 0..4 {
        std::fs::write(
            dir.join("fleet.toml"),
            format!("{fleet}\n[[teams]]\nname = \"t{i}\"\n"),
        )
        .unwrap();
        wait_for("the edit to be applied", || {
            cli(&sock, &["events", "--limit", "50"]).contains(&format!("team `t{i}` added"))
        });
        std::thread::sleep(std::time::Duration::from_secs(1));
    }
    let after = job();
    let ran = started.elapsed().as_secs_f64();
    assert_eq!(
        times(&after)[..history.len()],
        history[..],
        "{before}\n{after}"
    );
    for k in ["submitted", "started"] {
        assert_eq!(after[k], before[k], "{k}: {before}\n{after}");
    }
    // Every second it ran is billed (a second or two of the daemon's steps aside), at its
    // share of the host's price.
    let per_s = after["dollars_per_hour"].as_f64().unwrap() / 3600.0;
    let billed = after["cost_usd"].as_f64().unwrap() / per_s;
    assert!(
        billed >= ran - 3.0 && billed <= ran + 1.0,
        "billed {billed:.1} s of {ran:.1} s: {after}"
    );
    cli(&sock, &["cancel", "1"]);
    drop(_d);
    let _ = std::fs::remove_dir_all(&dir);
}
