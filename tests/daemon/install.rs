//! A daemon that installs like one: system paths when run as root (or asked), one variable per
//! file, readiness told to systemd (`Type=notify`) once both listeners answer, and a local
//! fleet file written with the host's own CPUs and memory.

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::Duration;

fn gantry() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gantry"))
}

#[test]
fn gantry_system_selects_system_paths_and_variables_name_single_files() {
    let out = gantry()
        .args(["info", "-o", "json"])
        .env("GANTRY_SYSTEM", "1")
        .env("GANTRY_SOCKET", "/tmp/elsewhere.sock")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["scope"], "system");
    assert_eq!(v["fleet_file"], "/etc/gantry/fleet.toml");
    assert_eq!(v["journal"], "/var/lib/gantry/state.db");
    assert_eq!(v["socket"], "/tmp/elsewhere.sock");
    let why = v["chosen_by"].to_string();
    assert!(
        why.contains("GANTRY_SYSTEM") && why.contains("GANTRY_SOCKET"),
        "{why}"
    );
    // The table says the same.
    let out = gantry()
        .arg("info")
        .env("GANTRY_SYSTEM", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("scope       system") && text.contains("chosen by"),
        "{text}"
    );
}

#[test]
fn the_daemon_tells_systemd_it_is_ready_once_it_answers_and_when_it_stops() {
    let dir = gantry_testkit::scratch::scratch("notify");
    let notify = dir.join("notify.sock");
    let listener = UnixDatagram::bind(&notify).unwrap();
    listener
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let socket = dir.join("d.sock");
    let mut child = gantry()
        .args(["daemon", "--db"])
        .arg(dir.join("state").join("state.db"))
        .arg("--socket")
        .arg(&socket)
        // Its own help's example (the hand-written duration parser refused it).
        .args(["--sample-interval", "500ms", "--request-timeout", "1m 30s"])
        .env("NOTIFY_SOCKET", &notify)
        .env("XDG_CONFIG_HOME", dir.join("cfg"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut buf = [0u8; 256];
    let n = listener.recv(&mut buf).expect("READY=1 within a minute");
    assert_eq!(String::from_utf8_lossy(&buf[..n]).trim(), "READY=1");
    // Ready means answering: the socket takes a request now.
    assert!(std::os::unix::net::UnixStream::connect(&socket).is_ok());
    // SAFETY: kill(2) with the child's pid and SIGTERM.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let n = listener.recv(&mut buf).expect("STOPPING=1");
    assert_eq!(String::from_utf8_lossy(&buf[..n]).trim(), "STOPPING=1");
    assert!(child.wait().unwrap().success());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn print_local_writes_this_hosts_cpus_and_memory() {
    let out = gantry().args(["fleet", "--print-local"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(text.contains(&format!("\ncpus = {cpus}\n")), "{text}");
    assert!(
        !text.contains("--fleet"),
        "names a flag that does not exist"
    );
    let mem: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("memory_gb = "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(mem >= 1);
    // And it parses as a fleet file.
    let path = gantry_testkit::scratch::scratch("install-local").join("fleet.toml");
    std::fs::write(&path, text.as_bytes()).unwrap();
    let check = gantry()
        .args(["fleet", "--config"])
        .arg(&path)
        .args(["-o", "json"])
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    let _ = std::fs::remove_file(&path);
}

/// The Kubernetes manifest cannot drift from the binary: its ConfigMap's fleet file is one
/// gantry accepts, and the Deployment passes only flags `gantry daemon` has.
#[test]
fn the_kubernetes_deployment_is_one_gantry_accepts() {
    let text = std::fs::read_to_string("deploy/gantry.yaml").unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("\n---\n")
        .map(|d| serde_yaml_ng::from_str(d).unwrap())
        .collect();
    let of = |kind: &str| docs.iter().find(|d| d["kind"] == kind).unwrap();
    let fleet = of("ConfigMap")["data"]["fleet.toml"].as_str().unwrap();
    let f = gantry::config::fleet::parse("deploy/gantry.yaml", fleet).unwrap();
    assert!(f
        .pools
        .iter()
        .all(|p| p.is_kube() && p.kubernetes.as_ref().is_some_and(|k| k.context.is_none())));
    let container = &of("Deployment")["spec"]["template"]["spec"]["containers"][0];
    let args: Vec<&str> = container["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "daemon");
    let help = gantry().args(["daemon", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    for a in &args[1..] {
        let flag = a.split('=').next().unwrap();
        assert!(
            help.contains(&format!("{flag} ")),
            "gantry daemon has no {flag}"
        );
    }
    let sa = &of("Deployment")["spec"]["template"]["spec"]["serviceAccountName"];
    let rbac = std::fs::read_to_string("deploy/rbac.yaml").unwrap();
    assert!(rbac.contains(&format!("name: {}", sa.as_str().unwrap())));
}

/// The docs cannot drift from the fleet file either: every pool the docs show in a `toml`
/// block is one gantry accepts (a block without `[[teams]]` gets one). The backends' tables
/// moved out of the pool's own fields once; a page left behind would teach a refused file.
#[test]
fn every_pool_the_docs_show_is_one_gantry_accepts() {
    let mut checked = 0;
    for doc in [
        "README.md",
        "docs/backends.md",
        "docs/config.md",
        "docs/clouds.md",
    ] {
        let text = std::fs::read_to_string(doc).unwrap();
        let mut rest = text.as_str();
        while let Some(start) = rest.find("```toml\n") {
            let line = text.len() - rest.len() + start;
            let line = text[..line].lines().count() + 2;
            let body = &rest[start + 8..];
            let end = body.find("```").expect("a closed block");
            let block = &body[..end];
            rest = &body[end + 3..];
            if !block.contains("[[pools]]") {
                continue;
            }
            let file = if block.contains("[[teams]]") {
                block.to_string()
            } else {
                format!("[[teams]]\nname = \"lab\"\n\n{block}")
            };
            // Errors name the line within the block (after the team added, if one was).
            let name = format!("{doc} (the block at line {line})");
            if let Err(e) = gantry::config::fleet::parse(&name, &file) {
                panic!("a pool the docs show is refused: {e}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 7, "only {checked} blocks with pools found");
}
