//! Least authority, end to end: a root daemon shared by people who do not trust each other
//! acts for each of them with *their* identity, never its own. Real second Unix users
//! (`useradd`: gantry-alice of team lab, gantry-bob of team other) talk to a real root
//! `gantry daemon` over TCP with tokens issued for them, running the CLI as themselves; the
//! daemon runs their jobs on this host (a local pool).
//!
//! Skips, saying so, when the tests do not run as root (they need `useradd` and a root daemon).

use crate::support::daemon as common;

use common::{cli, events, log_text, start_with, state, temp_dir, wait_for, Daemon, LOCAL_FLEET};
use gantry::unix_user::Account;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const ALICE: &str = "gantry-alice";
const BOB: &str = "gantry-bob";

fn root() -> bool {
    gantry::unix_user::this_user().as_deref() == Some("root")
}

/// Held while this test process changes the user database (useradd, groupadd, usermod take
/// its lock: two at once fail).
static MADE: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The account `name`, made (with a home) if this host lacks it. Made once per test process;
/// a concurrent `useradd` of another test binary is waited out (it holds /etc/passwd's lock).
fn user(name: &str) -> Account {
    let _one = MADE.lock().unwrap_or_else(|e| e.into_inner());
    for _ in 0..50 {
        if let Ok(a) = gantry::unix_user::account(name) {
            return a;
        }
        let _ = Command::new("useradd")
            .args(["-m", "-s", "/bin/sh", name])
            .output();
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("could not make the user {name}");
}

/// A directory of `who`'s own (under their home), fresh for `what`.
fn home_dir(who: &Account, what: &str) -> PathBuf {
    let d = who.home.join(format!("gantry-test-{what}"));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    chown(who, &d);
    d
}

fn chown(who: &Account, path: &Path) {
    let s = Command::new("chown")
        .arg("-R")
        .arg(format!("{}:{}", who.creds.uid, who.creds.gid))
        .arg(path)
        .status()
        .unwrap();
    assert!(s.success());
}

/// `gantry ARGS` run as `who` (their uid, group and home, in `cwd`), against the daemon over
/// TCP with `token`.
fn gantry_as(who: &Account, d: &Daemon, token: &str, cwd: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["--connect", &format!("http://127.0.0.1:{}", d.port)])
        .args(["--token", token])
        .args(args)
        .env_clear()
        .env("HOME", &who.home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(cwd)
        .uid(who.creds.uid)
        .gid(who.creds.gid)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A token made on the daemon's socket (as its operator): `role`, `team`, issued for `user`.
fn token(d: &Daemon, team: &str, user: Option<&str>) -> String {
    let mut args = vec!["token", "create", "--role", "researcher", "--team", team];
    if let Some(u) = user {
        args.extend(["--user", u]);
    }
    cli(d, &args).trim().to_string()
}

/// A root daemon over this host with teams lab and other; a secret in its own environment
/// (as a cloud credential would be) that no job may see.
fn daemon(test: &str) -> Daemon {
    let dir = temp_dir(test);
    let fleet = dir.join("fleet.toml");
    let text =
        LOCAL_FLEET.replace("name = \"a\"", "name = \"lab\"") + "\n[[teams]]\nname = \"other\"\n";
    std::fs::write(&fleet, text).unwrap();
    start_with(dir, &["--config", fleet.to_str().unwrap()], |cmd| {
        cmd.env("AWS_SECRET_ACCESS_KEY", "the-daemons-own-secret");
    })
}

/// The job's id from `gantry submit -o id`.
fn submitted(o: &Output) -> i64 {
    let (code, out, err) = text(o);
    assert_eq!(code, 0, "{out}{err}");
    out.trim().parse().unwrap_or_else(|_| panic!("{out}"))
}

#[test]
fn a_job_and_a_session_run_as_their_owner_and_reach_nothing_of_the_daemons() {
    if !root() {
        eprintln!("skipped: needs root (useradd, a root daemon)");
        return;
    }
    let (alice, bob) = (user(ALICE), user(BOB));
    let d = daemon("authority-run");
    let (ta, tb) = (token(&d, "lab", Some(ALICE)), token(&d, "other", Some(BOB)));
    let state_dir = d.dir.join("state");
    // Bob's job: a secret in its spec, a line in its log.
    let bdir = home_dir(&bob, "run");
    std::fs::write(
        bdir.join("b.yaml"),
        "name: b\nsecrets:\n  BOB_SECRET: bob-s3cret-value\nrun: echo bob-was-here; sleep 300\n",
    )
    .unwrap();
    chown(&bob, &bdir);
    let b = submitted(&gantry_as(
        &bob,
        &d,
        &tb,
        &bdir,
        &["submit", "b.yaml", "-o", "id"],
    ));
    // Alice's job looks at who it is and at everything of the daemon's it might reach.
    let adir = home_dir(&alice, "run");
    let probe = format!(
        r#"name: a
run: |
  echo "uid=$(id -u) gid=$(id -g) home=$HOME user=$USER pwd=$(pwd)"
  cat {state}/state.db >/dev/null 2>&1 && echo journal=read || echo journal=denied
  ls {state}/logs >/dev/null 2>&1 && echo logs=read || echo logs=denied
  grep -rl bob-s3cret-value /proc/*/environ 2>/dev/null | head -1 | grep -q . && echo bobs-secret=seen || echo bobs-secret=unseen
  echo "daemon-secret=${{AWS_SECRET_ACCESS_KEY:-unset}}"
  echo probed
  sleep 300
"#,
        state = state_dir.display()
    );
    std::fs::write(adir.join("a.yaml"), probe).unwrap();
    chown(&alice, &adir);
    let a = submitted(&gantry_as(
        &alice,
        &d,
        &ta,
        &adir,
        &["submit", "a.yaml", "-o", "id"],
    ));
    wait_for(&d, 60, "both jobs to run", || {
        state(&d, a) == "running" && state(&d, b) == "running"
    });
    wait_for(&d, 30, "alice's probe", || {
        log_text(&d, a).contains("probed")
    });
    let log = log_text(&d, a);
    let (uid, gid) = (alice.creds.uid, alice.creds.gid);
    assert!(
        log.contains(&format!(
            "uid={uid} gid={gid} home={} user={ALICE} pwd={}",
            alice.home.display(),
            alice.home.display()
        )),
        "{log}"
    );
    for line in [
        "journal=denied",
        "logs=denied",
        "bobs-secret=unseen",
        "daemon-secret=unset",
    ] {
        assert!(log.contains(line), "{line}: {log}");
    }
    assert!(log_text(&d, b).contains("bob-was-here"));

    // `gantry exec` runs as the job's owner, whoever enters: alice herself, or root's operator.
    let (code, out, err) = text(&gantry_as(
        &alice,
        &d,
        &ta,
        &adir,
        &["exec", &a.to_string(), "--", "id", "-u"],
    ));
    assert_eq!((code, out.trim()), (0, uid.to_string().as_str()), "{err}");
    let out = cli(&d, &["exec", &a.to_string(), "--", "id", "-u"]);
    assert_eq!(out.trim(), uid.to_string());
    // Bob may not enter alice's job at all.
    let (code, _, err) = text(&gantry_as(
        &bob,
        &d,
        &tb,
        &bdir,
        &["exec", &a.to_string(), "--", "id", "-u"],
    ));
    assert_ne!(code, 0, "{err}");
    // A session's command line does not reach the event log: it carries tokens.
    let (code, _, err) = text(&gantry_as(
        &alice,
        &d,
        &ta,
        &adir,
        &[
            "exec",
            &a.to_string(),
            "--",
            "echo",
            "login",
            "--token",
            "hf_not_for_the_events",
        ],
    ));
    assert_eq!(code, 0, "{err}");
    let ev = events(&d).join("\n");
    assert!(!ev.contains("hf_not_for_the_events"), "{ev}");
    assert!(
        ev.contains("runs `echo` (3 arguments, not recorded)"),
        "{ev}"
    );
    cli(&d, &["cancel", &a.to_string()]);
    cli(&d, &["cancel", &b.to_string()]);
}

#[test]
fn the_daemon_opens_no_path_for_a_caller_and_ships_what_the_caller_reads() {
    if !root() {
        eprintln!("skipped: needs root (useradd, a root daemon)");
        return;
    }
    let (alice, bob) = (user(ALICE), user(BOB));
    let d = daemon("authority-paths");
    let (ta, tb) = (token(&d, "lab", Some(ALICE)), token(&d, "other", Some(BOB)));
    // Bob's private file, and a workdir bob ships.
    let bdir = home_dir(&bob, "paths");
    std::fs::write(bdir.join("private.txt"), "bobs-private-words").unwrap();
    std::fs::create_dir_all(bdir.join("work")).unwrap();
    std::fs::write(bdir.join("work/code.txt"), "bobs-code").unwrap();
    std::fs::write(
        bdir.join("b.yaml"),
        "name: b\nworkdir: work\nrun: cat code.txt; sleep 300\n",
    )
    .unwrap();
    chown(&bob, &bdir);
    std::fs::set_permissions(
        bdir.join("private.txt"),
        std::os::unix::fs::PermissionsExt::from_mode(0o600),
    )
    .unwrap();
    let b = submitted(&gantry_as(
        &bob,
        &d,
        &tb,
        &bdir,
        &["submit", "b.yaml", "-o", "id"],
    ));
    wait_for(&d, 60, "bob's job to run", || {
        log_text(&d, b).contains("bobs-code")
    });
    // The spec as the daemon keeps it names bob's shipped copy (any viewer may read it).
    let spec = common::job(&d, b)["spec"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let bobs_copy = spec
        .lines()
        .find_map(|l| l.strip_prefix("workdir: "))
        .unwrap_or_default()
        .to_string();
    assert!(!bobs_copy.is_empty(), "{}", common::job(&d, b));

    // Paths on the daemon's machine, sent by alice as they are (the API, not the CLI): each
    // refused at its field — bob's file, the daemon's state directory, bob's shipped copy.
    let adir = home_dir(&alice, "paths");
    let private = bdir.join("private.txt").display().to_string();
    let state_dir = d.dir.join("state").display().to_string();
    for (what, spec) in [
        (
            "workdir",
            format!("name: x\nworkdir: {state_dir}\nrun: ls\n"),
        ),
        (
            "workdir",
            format!("name: x\nworkdir: {bobs_copy}\nrun: ls\n"),
        ),
        (
            "file_mounts entry `/tmp/p`: source",
            format!("name: x\nfile_mounts:\n  /tmp/p: {private}\nrun: cat /tmp/p\n"),
        ),
    ] {
        let (status, body) = common::tcp_request(d.port, &ta, "POST /v1/jobs?file=x.yaml", &spec);
        assert!(status.contains("400"), "{what}: {status} {body}");
        assert!(body.contains(what), "{what}: {body}");
        assert!(body.contains("does not read"), "{body}");
    }
    // Through the CLI, run as alice: what alice can read is shipped and runs as alice; what
    // she cannot read stays unread.
    std::fs::create_dir_all(adir.join("work")).unwrap();
    std::fs::write(adir.join("work/mine.txt"), "alices-own-words").unwrap();
    std::fs::write(adir.join("notes.txt"), "alices-notes").unwrap();
    std::fs::write(
        adir.join("a.yaml"),
        "name: a\nworkdir: work\nfile_mounts:\n  ~/mounted.txt: notes.txt\nrun: |\n  echo \"uid=$(id -u) pwd=$(pwd)\"\n  cat mine.txt; echo; cat ~/mounted.txt; echo\n  echo done\n",
    )
    .unwrap();
    std::fs::write(
        adir.join("steal.yaml"),
        format!("name: steal\nfile_mounts:\n  /tmp/p: {private}\nrun: cat /tmp/p\n"),
    )
    .unwrap();
    chown(&alice, &adir);
    let (code, out, err) = text(&gantry_as(
        &alice,
        &d,
        &ta,
        &adir,
        &["submit", "steal.yaml"],
    ));
    assert_ne!(code, 0, "{out}");
    assert!(err.contains("Permission denied"), "{err}");
    let a = submitted(&gantry_as(
        &alice,
        &d,
        &ta,
        &adir,
        &["submit", "a.yaml", "-o", "id"],
    ));
    wait_for(&d, 60, "alice's job to end", || state(&d, a) == "completed");
    let log = log_text(&d, a);
    let copy = alice.home.join(".gantry/work");
    assert!(
        log.contains(&format!("uid={} pwd={}", alice.creds.uid, copy.display())),
        "{log}"
    );
    assert!(
        log.contains("alices-own-words") && log.contains("alices-notes"),
        "{log}"
    );
    cli(&d, &["cancel", &b.to_string()]);
}

#[test]
fn a_token_that_names_no_user_runs_nothing_on_a_root_daemons_host() {
    if !root() {
        eprintln!("skipped: needs root (a root daemon)");
        return;
    }
    let d = daemon("authority-nameless");
    let nameless = token(&d, "lab", None);
    let (status, body) = common::tcp_request(
        d.port,
        &nameless,
        "POST /v1/jobs?file=x.yaml",
        "name: x\nrun: id -u\n",
    );
    assert!(status.contains("403"), "{status} {body}");
    assert!(body.contains("gantry token create --user NAME"), "{body}");
    // A token for an account this host lacks is refused when it is made.
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(["token", "create", "--role", "researcher", "--team", "lab"])
        .args(["--user", "no-such-account-here"])
        .output()
        .unwrap();
    let (code, _, err) = text(&out);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("no Unix account"), "{err}");
}

/// `POST /v1/services` with `token`: the status line and body.
fn serve_up(d: &Daemon, token: &str, name: &str, endpoint: Option<&str>) -> (String, String) {
    let spec = "resources:\n  cpus: 1\n  memory: 1\nservice:\n  readiness_probe:\n    path: /\n    initial_delay_seconds: 600\n  replicas: 1\nrun: sleep 300\n";
    let mut head = format!("POST /v1/services?name={name}&file={name}.yaml");
    if let Some(e) = endpoint {
        head.push_str(&format!("&endpoint={e}"));
    }
    common::tcp_request(d.port, token, &head, spec)
}

#[test]
fn an_endpoint_is_the_fleets_to_allow_and_its_services_for_as_long_as_it_lives() {
    let dir = temp_dir("authority-endpoints");
    let fleet = dir.join("fleet.toml");
    // A wide port range, so that the daemon's own port falls inside it.
    let serving = "\nclasses = [\"serving\", \"experiment\"]";
    let text = LOCAL_FLEET.replace("name = \"a\"", &format!("name = \"lab\"{serving}"))
        + &format!(
            "\n[[teams]]\nname = \"other\"{serving}\n\n[services]\nports = \"1024-65535\"\n"
        );
    std::fs::write(&fleet, &text).unwrap();
    let mut d = start_with(dir, &["--config", fleet.to_str().unwrap()], |_| {});
    let researcher = |d: &Daemon, team: &str| common::token(d, "researcher", Some(team));
    let (a, b) = (researcher(&d, "lab"), researcher(&d, "other"));
    let op = common::token(&d, "operator", None);
    // Team other's service holds its endpoint.
    let (status, body) = serve_up(&d, &b, "bsvc", None);
    assert!(status.contains("201"), "{status} {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let held = v["endpoint"].as_str().unwrap().to_string();
    let port = held.rsplit(':').next().unwrap().to_string();
    let own = d.port.to_string();
    for (endpoint, token, code, said) in [
        (
            "127.0.0.1:600",
            &a,
            "400",
            "ports below 1024 are the system's",
        ),
        (
            &*format!("127.0.0.1:{own}"),
            &a,
            "400",
            "one of the daemon's own listeners",
        ),
        ("0.0.0.0:31000", &a, "403", "every interface"),
        (&*held, &a, "409", "service bsvc holds"),
        (
            &*format!("0.0.0.0:{port}"),
            &op,
            "409",
            "service bsvc holds",
        ),
    ] {
        let (status, body) = serve_up(&d, token, "asvc", Some(endpoint));
        assert!(status.contains(code), "{endpoint}: {status} {body}");
        assert!(body.contains(said), "{endpoint}: {body}");
    }
    // An operator may open another address; a researcher one of [services] addresses.
    let (status, body) = serve_up(&d, &a, "asvc", Some("127.0.0.1:31001"));
    assert!(status.contains("201"), "{status} {body}");
    // A restart changes nothing of who holds what.
    let _ = d.child.kill();
    let _ = d.child.wait();
    let _ = std::fs::remove_file(&d.socket);
    d.child = common::daemon_cmd(
        &d.dir,
        &d.socket,
        d.port,
        &["--config", fleet.to_str().unwrap()],
    )
    .stderr(common::stderr_file(&d.dir))
    .spawn()
    .unwrap();
    let t0 = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&d.socket).is_err() {
        assert!(t0.elapsed().as_secs() < 90, "the daemon did not come back");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let (status, body) = serve_up(&d, &op, "csvc", Some(&format!("0.0.0.0:{port}")));
    assert!(status.contains("409"), "{status} {body}");
    let services = common::json(&d, &["services"]);
    let at = |name: &str| {
        services
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .map(|s| s["endpoint"].as_str().unwrap_or_default().to_string())
    };
    assert_eq!(at("bsvc").as_deref(), Some(held.as_str()));
    assert_eq!(at("asvc").as_deref(), Some("127.0.0.1:31001"));
    for s in ["asvc", "bsvc"] {
        cli(&d, &["serve", "down", s]);
    }
}

#[test]
fn gantry_info_says_who_the_daemons_jobs_run_as() {
    let dir = temp_dir("authority-info");
    let info = |socket: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("info")
            .env("GANTRY_SOCKET", socket)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let socket = dir.join("d.sock");
    let _l = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let me = gantry::unix_user::this_user().unwrap();
    let out = info(&socket);
    if root() {
        assert!(
            out.contains("jobs run as each job's owner (the daemon at the socket runs as root"),
            "{out}"
        );
        // A daemon of another user's runs its jobs as itself.
        let s = Command::new("chown")
            .arg("nobody")
            .arg(&socket)
            .status()
            .unwrap();
        assert!(s.success());
        let out = info(&socket);
        assert!(out.contains("jobs run as nobody (the daemon at the socket is not root, so it runs every job on this host as itself)"), "{out}");
    } else {
        assert!(
            out.contains(&format!(
                "jobs run as {me} (the daemon at the socket is not root"
            )),
            "{out}"
        );
    }
}

/// The group `name` with `members` in it (made, and they added, where this host lacks it;
/// tried again while another process holds the user database's lock).
fn group(name: &str, members: &[&str]) {
    let _one = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let gid = || gantry::unix_user::group_id(name);
    let member = |m: &str| {
        gantry::unix_user::account(m)
            .is_ok_and(|a| gid().is_some_and(|g| a.creds.groups.contains(&g)))
    };
    for _ in 0..50 {
        if gid().is_none() {
            let _ = Command::new("groupadd").arg(name).output();
        }
        for m in members.iter().filter(|m| !member(m)) {
            let _ = Command::new("usermod").args(["-aG", name, m]).output();
        }
        if members.iter().all(|m| member(m)) {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("could not make the group {name} of {members:?}");
}

/// `gantry ARGS` run as `who` against the daemon's Unix socket (no token: the kernel says who).
fn gantry_on_socket(who: &Account, d: &Daemon, cwd: &Path, args: &[&str]) -> Output {
    use std::os::unix::process::CommandExt;
    let mut groups = who.creds.groups.clone();
    // The groups as they are now (a group added since the account was read).
    if let Ok(a) = gantry::unix_user::account(&who.name) {
        groups = a.creds.groups;
    }
    let groups: Vec<u32> = groups;
    let mut c = Command::new(env!("CARGO_BIN_EXE_gantry"));
    c.arg("--connect")
        .arg(&d.socket)
        .args(args)
        .env_clear()
        .env("HOME", &who.home)
        .env("PATH", "/usr/bin:/bin")
        .current_dir(cwd);
    let (uid, gid) = (who.creds.uid, who.creds.gid);
    // SAFETY: only async-signal-safe calls between fork and exec, on data made before it.
    unsafe {
        c.pre_exec(move || {
            if libc::setgroups(groups.len(), groups.as_ptr()) != 0
                || libc::setgid(gid) != 0
                || libc::setuid(uid) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    c.output().unwrap()
}

#[test]
fn a_socket_opened_to_a_group_takes_each_member_as_themselves() {
    if !root() {
        eprintln!("skipped: needs root (useradd, groupadd, a root daemon)");
        return;
    }
    let (alice, bob) = (user(ALICE), user(BOB));
    group("gantry-lab", &[ALICE, BOB]);
    let dir = temp_dir("authority-group");
    let fleet = dir.join("fleet.toml");
    let file = LOCAL_FLEET.replace("name = \"a\"", "name = \"lab\"")
        + &format!("\n[[users]]\nname = \"{ALICE}\"\nteam = \"lab\"\n");
    std::fs::write(&fleet, file).unwrap();
    let d = start_with(
        dir,
        &[
            "--config",
            fleet.to_str().unwrap(),
            "--socket-group",
            "gantry-lab",
        ],
        |_| {},
    );
    // Alice, a member the fleet file gives team lab: a researcher there, as herself. Her
    // workdir is shipped (the daemon is not hers) and her job runs as her.
    let adir = home_dir(&alice, "group");
    std::fs::create_dir_all(adir.join("work")).unwrap();
    std::fs::write(adir.join("work/w.txt"), "from-alices-workdir").unwrap();
    std::fs::write(
        adir.join("a.yaml"),
        "name: a\nworkdir: work\nrun: echo \"uid=$(id -u)\"; cat w.txt\n",
    )
    .unwrap();
    chown(&alice, &adir);
    let (code, out, err) = text(&gantry_on_socket(
        &alice,
        &d,
        &adir,
        &["submit", "a.yaml", "-o", "id"],
    ));
    assert_eq!(code, 0, "{out}{err}");
    let a: i64 = out.trim().parse().unwrap();
    wait_for(&d, 60, "alice's job to end", || state(&d, a) == "completed");
    let log = log_text(&d, a);
    assert!(log.contains(&format!("uid={}", alice.creds.uid)), "{log}");
    assert!(log.contains("from-alices-workdir"), "{log}");
    let (_, who, _) = text(&gantry_on_socket(
        &alice,
        &d,
        &adir,
        &["jobs", "-u", "me", "-o", "json"],
    ));
    assert!(who.contains(&format!("\"id\": {a}")), "{who}");
    // Bob, a member it names no team for: he reads, and changes nothing.
    let bdir = home_dir(&bob, "group");
    std::fs::write(bdir.join("b.yaml"), "name: b\nrun: id -u\n").unwrap();
    chown(&bob, &bdir);
    let (code, _, err) = text(&gantry_on_socket(&bob, &d, &bdir, &["submit", "b.yaml"]));
    assert_ne!(code, 0);
    assert!(err.contains("viewer"), "{err}");
    let (code, _, err) = text(&gantry_on_socket(&bob, &d, &bdir, &["jobs"]));
    assert_eq!(code, 0, "{err}");
    // Someone outside the group does not reach the socket at all.
    let nobody = gantry::unix_user::account("nobody").unwrap();
    let (code, _, err) = text(&gantry_on_socket(&nobody, &d, Path::new("/"), &["jobs"]));
    assert_ne!(code, 0, "{err}");
}

/// One GET through an endpoint, with `token` as its bearer: the status code.
fn get_through(addr: &str, token: Option<&str>) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

#[test]
fn an_endpoint_may_ask_for_a_token_and_a_stranger_reaches_no_replica() {
    let dir = temp_dir("authority-endpoint-token");
    let fleet = dir.join("fleet.toml");
    let file = LOCAL_FLEET.replace(
        "name = \"a\"",
        "name = \"lab\"\nclasses = [\"serving\", \"experiment\"]",
    ) + "\n[services]\nports = \"1024-65535\"\n";
    std::fs::write(&fleet, file).unwrap();
    let d = start_with(dir.clone(), &["--config", fleet.to_str().unwrap()], |_| {});
    let port = common::free_port();
    let addr = format!("127.0.0.1:{port}");
    let spec = dir.join("web.yaml");
    std::fs::write(
        &spec,
        "name: web\nteam: lab\nresources:\n  cpus: 1\n  memory: 1\nservice:\n  readiness_probe:\n    path: /\n    initial_delay_seconds: 60\n  replicas: 1\nrun: exec python3 -m http.server $PORT --bind 127.0.0.1\n",
    )
    .unwrap();
    let up = |extra: &[&str]| {
        let mut args = vec!["serve", "up", spec.to_str().unwrap(), "--endpoint", &addr];
        args.extend_from_slice(extra);
        cli(&d, &args)
    };
    let said = up(&["--auth"]);
    let token = said
        .lines()
        .find_map(|l| l.strip_prefix("token "))
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();
    // The daemon keeps only the token's digest: not in the journal, not in what viewers read.
    let journal = std::fs::read(d.dir.join("state/state.db")).unwrap();
    assert!(!journal.windows(token.len()).any(|w| w == token.as_bytes()));
    assert!(!common::json(&d, &["services"]).to_string().contains(&token));
    wait_for(&d, 60, "the endpoint to answer", || {
        get_through(&addr, None) == 401
    });
    assert_eq!(get_through(&addr, Some("gty_wrong")), 401);
    // With the token, the request goes on to a replica (200 once one is ready).
    wait_for(&d, 60, "a replica to answer through the endpoint", || {
        get_through(&addr, Some(&token)) == 200
    });
    // `--auth` again replaces it: the old token is refused from then on.
    let said = up(&["--auth"]);
    let new = said
        .lines()
        .find_map(|l| l.strip_prefix("token "))
        .unwrap_or_else(|| panic!("{said}"))
        .to_string();
    assert_ne!(new, token);
    wait_for(&d, 30, "the old token to be refused", || {
        get_through(&addr, Some(&token)) == 401
    });
    assert_eq!(get_through(&addr, Some(&new)), 200);
    cli(&d, &["serve", "down", "web"]);
}
