//! Into a running job: `gantry exec` and `gantry ssh`, end to end with the real binary — on
//! this host (a local pool) and on real `sshd` hosts (each in namespaces of its own, as in
//! `tests/hosts/ssh.rs`), the shell under tmux as a user's terminal. What a command sees is the
//! job's own: its working directory, its environment, its node's rank; who may enter is the
//! daemon's roles; what cannot be entered is said, with the exit codes `--help` lists.

use crate::support::daemon as common;
use crate::support::sshd;
use crate::support::tmux;

use common::{events, start_in, state, submit, temp_dir, token, wait_for, Daemon, LOCAL_FLEET};
use std::process::{Command, Output};

/// `gantry ARGS` against the daemon's socket (or as `connect`/`token` say): its output.
fn gantry(d: &Daemon, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(args)
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

/// `gantry --connect SOCKET ARGS` in a tmux window of its own (120×40), kept open after.
fn gantry_in_tmux(d: &Daemon, session: &'static str, args: &str) -> tmux::Tmux {
    let t = tmux::Tmux::new(session);
    let cmd = format!(
        "{} --connect {} {args}; sleep 60",
        env!("CARGO_BIN_EXE_gantry"),
        d.socket.display()
    );
    t.run(&[
        "new-session",
        "-d",
        "-s",
        session,
        "-x",
        "120",
        "-y",
        "40",
        &cmd,
    ]);
    t
}

/// A shell in job `id` (`gantry ssh`, node `node`) in a tmux window: runs `typed`, then exits
/// with 3; the screen once it has.
fn shell_in(d: &Daemon, session: &'static str, id: i64, node: usize, typed: &str) -> String {
    let t = gantry_in_tmux(
        d,
        session,
        &format!("ssh {id} --node {node}; echo \"SHELL ENDED $?\""),
    );
    // The shell answers (what is typed is echoed as typed; only the shell prints `ready-2`).
    t.wait_for(&["@", "$", "#"]);
    t.run(&["send-keys", "-t", session, "echo ready-$((1+1))", "Enter"]);
    t.wait_for(&["ready-2"]);
    t.run(&["send-keys", "-t", session, typed, "Enter"]);
    t.run(&["send-keys", "-t", session, "exit 3", "Enter"]);
    t.wait_for(&["SHELL ENDED"])
}

#[test]
fn a_command_and_a_shell_run_inside_a_local_job_and_who_may_is_the_daemons_say() {
    if !tmux::have_tmux("gantry ssh into a local job") {
        return;
    }
    let dir = temp_dir("exec-local");
    let fleet = dir.join("fleet.toml");
    let fleet_text =
        LOCAL_FLEET.replace("name = \"a\"", "name = \"lab\"") + "\n[[teams]]\nname = \"other\"\n";
    std::fs::write(&fleet, fleet_text).unwrap();
    let d = start_in(dir.clone(), &["--config", fleet.to_str().unwrap()]);
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::write(work.join("marker.txt"), "in the workdir").unwrap();
    let id = submit(
        &d,
        &dir,
        "sleeper",
        &format!(
            "name: sleeper\nworkdir: {}\nenvs:\n  GREETING: hello-from-the-spec\nrun: |\n  sleep 300\n",
            work.display()
        ),
    );
    wait_for(&d, 30, "the job to run", || state(&d, id) == "running");

    // A command: the job's environment and directory, its output and its exit status.
    let (code, out, err) = text(&gantry(
        &d,
        &[
            "exec",
            &id.to_string(),
            "--",
            "sh",
            "-c",
            "echo \"job=$GANTRY_JOB_ID greet=$GREETING\"; cat marker.txt; echo oops >&2; exit 7",
        ],
    ));
    assert_eq!(code, 7, "{out}{err}");
    assert!(
        out.contains(&format!("job={id} greet=hello-from-the-spec")),
        "{out}"
    );
    assert!(out.contains("in the workdir"), "{out}");
    assert_eq!(err.trim(), "oops", "stderr stays stderr");
    // Input goes to the command.
    let mut child = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(["exec", &id.to_string(), "--", "wc", "-l"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"one\ntwo\nthree\n").unwrap();
    }
    let o = child.wait_with_output().unwrap();
    assert_eq!(String::from_utf8_lossy(&o.stdout).trim(), "3");

    // A shell, under a terminal: the job's variables, a terminal of the window's size.
    let screen = shell_in(
        &d,
        "exec-local",
        id,
        0,
        "echo \"in-job=$GANTRY_JOB_ID cols=$(tput cols 2>/dev/null || stty size)\"; test -t 0 && echo has-a-tty",
    );
    assert!(screen.contains(&format!("in-job={id}")), "{screen}");
    assert!(screen.contains("has-a-tty"), "{screen}");
    assert!(screen.contains("SHELL ENDED 3"), "{screen}");
    let ev = events(&d).join("\n");
    // The program and its argument count, never the arguments (they carry tokens).
    assert!(
        ev.contains("(operator (unix socket)) runs `sh` (2 arguments, not recorded)"),
        "{ev}"
    );
    assert!(ev.contains("runs a shell on node 0"), "{ev}");

    // The console's `s` on the selected job: the screen put away for the shell, back after.
    {
        let t = gantry_in_tmux(&d, "exec-console", "");
        t.wait_for(&["sleeper"]);
        t.run(&["send-keys", "-t", "exec-console", "2"]);
        t.wait_for(&["running"]);
        t.run(&["send-keys", "-t", "exec-console", "s"]);
        t.wait_for(&[&format!("a shell in job {id}")]);
        t.run(&[
            "send-keys",
            "-t",
            "exec-console",
            "echo from-console-$((40+2))",
            "Enter",
        ]);
        t.wait_for(&["from-console-42"]);
        t.run(&["send-keys", "-t", "exec-console", "exit 4", "Enter"]);
        let screen = t.wait_for(&["the shell ended"]);
        assert!(
            screen.contains(&format!("job {id}: the shell ended (exit 4)")),
            "{screen}"
        );
        assert!(
            screen.contains("sleeper"),
            "the console is drawn again:\n{screen}"
        );
    }

    // Who may: a viewer never; a researcher of another team not; the operators yes.
    let url = format!("http://127.0.0.1:{}", d.port);
    let as_token = |t: &str| {
        text(
            &Command::new(env!("CARGO_BIN_EXE_gantry"))
                .args(["--connect", &url, "--token", t])
                .args(["exec", &id.to_string(), "--", "true"])
                .output()
                .unwrap(),
        )
    };
    let (code, _, err) = as_token(&token(&d, "viewer", None));
    assert_eq!(code, 4, "{err}");
    assert!(
        err.contains("only its researchers and the operators"),
        "{err}"
    );
    let (code, _, err) = as_token(&token(&d, "researcher", Some("other")));
    assert_eq!(code, 4, "{err}");
    let (code, _, err) = as_token(&token(&d, "researcher", Some("lab")));
    assert_eq!(code, 0, "{err}");

    // What cannot be entered is said: a node the job does not have, a job that ended.
    let (code, _, err) = text(&gantry(
        &d,
        &["exec", &id.to_string(), "--node", "3", "--", "true"],
    ));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("has 1 node (ranks 0 to 0): no node 3"),
        "{err}"
    );
    let (code, _, err) = text(&gantry(&d, &["exec", "999", "--", "true"]));
    assert_eq!(code, 3, "{err}");
    common::cli(&d, &["cancel", &id.to_string()]);
    wait_for(&d, 30, "the job to end", || state(&d, id) == "cancelled");
    let (code, _, err) = text(&gantry(&d, &["exec", &id.to_string(), "--", "true"]));
    assert_eq!(code, 6, "{err}");
    assert!(
        err.contains("has ended (cancelled): nothing runs to enter"),
        "{err}"
    );
    // A request that is not an upgrade is told what the endpoint is for.
    let raw = common::request(&d.socket, &format!("POST /v1/jobs/{id}/exec"), "");
    assert!(
        raw.contains("426") && raw.contains("Upgrade: gantry-exec"),
        "{raw}"
    );
}

#[test]
fn a_command_and_a_shell_reach_each_node_of_a_gang_on_ssh_hosts() {
    if !sshd::can_run() || !tmux::have_tmux("gantry ssh into an SSH job") {
        return;
    }
    let h = sshd::hosts("exec", 2);
    let d = start_in(
        temp_dir("exec-ssh"),
        &["--config", h.fleet(&h.entries(), "2m").to_str().unwrap()],
    );
    wait_for(&d, 60, "both hosts to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 2
    });
    let gang = submit(
        &d,
        &h.dir,
        "gang",
        "name: gang\nnum_nodes: 2\nresources:\n  accelerators: A100-80GB:2\nrun: |\n  sleep 300\n",
    );
    wait_for(&d, 60, "the gang to run", || state(&d, gang) == "running");
    let names: Vec<&str> = h.hosts.iter().map(|x| x.name.as_str()).collect();
    for node in 0..2 {
        let (code, out, err) = text(&gantry(
            &d,
            &[
                "exec",
                &gang.to_string(),
                "--node",
                &node.to_string(),
                "--",
                "sh",
                "-c",
                "echo \"rank=$SKYPILOT_NODE_RANK host=$(hostname) gpus=$CUDA_VISIBLE_DEVICES\"; exit 5",
            ],
        ));
        assert_eq!(code, 5, "{out}{err}");
        assert!(out.contains(&format!("rank={node} host=")), "{out}");
        let host = out
            .split("host=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        assert!(names.contains(&host), "{host} is one of {names:?}");
    }
    let screen = shell_in(
        &d,
        "exec-ssh",
        gang,
        1,
        "echo \"rank-here=$SKYPILOT_NODE_RANK\"; test -t 0 && echo has-a-tty",
    );
    assert!(screen.contains("rank-here=1"), "{screen}");
    assert!(screen.contains("has-a-tty"), "{screen}");
    assert!(screen.contains("SHELL ENDED 3"), "{screen}");
    common::cli(&d, &["cancel", &gang.to_string()]);
    wait_for(&d, 30, "the gang to end", || state(&d, gang) == "cancelled");
}
