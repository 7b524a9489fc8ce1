//! A real `gantry daemon` for end-to-end tests: its own directory, Unix socket and TCP port,
//! killed and removed on drop; raw requests over either listener; tokens.

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Daemon {
    pub child: Child,
    pub dir: PathBuf,
    pub socket: PathBuf,
    pub port: u16,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failing test shows what its daemon said last (its events, a panic), which the
        // directory removed below would otherwise take with it.
        if std::thread::panicking() {
            let said = std::fs::read_to_string(self.dir.join(STDERR)).unwrap_or_default();
            let lines: Vec<&str> = said.lines().collect();
            let tail = &lines[lines.len().saturating_sub(40)..];
            eprintln!(
                "the daemon in {} said last:\n{}",
                self.dir.display(),
                tail.join("\n")
            );
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Where a test daemon's stderr goes, in its directory: a file, never a pipe nobody reads (a
/// daemon that said 64 KiB of events would block on the next line).
pub const STDERR: &str = "daemon.err";

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn temp_dir(name: &str) -> PathBuf {
    gantry_testkit::scratch::scratch(&format!("hard-{name}"))
}

pub fn daemon_cmd(dir: &Path, socket: &Path, port: u16, extra: &[&str]) -> Command {
    // `DAEMON_WRAP='heaptrack -o /var/tmp/d'`: the daemon run under a profiler, by hand
    // (the daemon is then the wrapper's child).
    let wrap = std::env::var("DAEMON_WRAP").unwrap_or_default();
    let mut wrap = wrap.split_whitespace();
    let mut c = match wrap.next() {
        Some(w) => {
            let mut c = Command::new(w);
            c.args(wrap).arg(env!("CARGO_BIN_EXE_gantry"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_gantry")),
    };
    c.args(["daemon", "--db"])
        .arg(dir.join("state").join("state.db"))
        .arg("--socket")
        .arg(socket)
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--request-timeout", "1s"])
        .args(extra)
        .env("XDG_CONFIG_HOME", dir.join("cfg"))
        .env("XDG_DATA_HOME", dir.join("data"))
        .stdout(Stdio::null());
    c
}

/// The file a daemon started in `dir` writes its stderr to (the pipe's null if it cannot be
/// made: the test then fails on its own terms, not here).
pub fn stderr_file(dir: &Path) -> Stdio {
    let _ = std::fs::create_dir_all(dir);
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(STDERR))
        .map_or_else(|_| Stdio::null(), Stdio::from)
}

pub fn start(name: &str, extra: &[&str]) -> Daemon {
    start_in(temp_dir(name), extra)
}

/// Starts a daemon whose files live in `dir` and waits until its Unix socket answers.
pub fn start_in(dir: PathBuf, extra: &[&str]) -> Daemon {
    start_with(dir, extra, |_| {})
}

/// `start_in`, with `adjust` changing the command first (its environment, its stderr).
pub fn start_with(dir: PathBuf, extra: &[&str], adjust: impl FnOnce(&mut Command)) -> Daemon {
    let socket = dir.join("d.sock");
    let port = free_port();
    let mut cmd = daemon_cmd(&dir, &socket, port, extra);
    cmd.stderr(stderr_file(&dir));
    adjust(&mut cmd);
    let child = cmd.spawn().unwrap();
    wait_socket(&socket);
    Daemon {
        child,
        dir,
        socket,
        port,
    }
}

/// `d` killed (`SIGKILL`) and started again over the same journal, socket and port, with
/// `extra` arguments: a daemon crash and restart.
pub fn restart(d: &mut Daemon, extra: &[&str]) {
    let _ = d.child.kill();
    let _ = d.child.wait();
    let _ = std::fs::remove_file(&d.socket);
    let mut cmd = daemon_cmd(&d.dir, &d.socket, d.port, extra);
    cmd.stderr(stderr_file(&d.dir));
    d.child = cmd.spawn().unwrap();
    wait_socket(&d.socket);
}

/// Waits until a daemon's Unix socket answers. Generous: on CI's two cores nine cloud tests
/// start their daemons and EC2 servers at once, and one daemon once took more than 30 s to
/// answer (CI at fa64cc4).
fn wait_socket(socket: &Path) {
    let t0 = Instant::now();
    while UnixStream::connect(socket).is_err() {
        assert!(
            t0.elapsed() < Duration::from_secs(90),
            "daemon did not start within 90 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// One request on its own connection; the whole answer as text.
pub fn request(socket: &Path, head: &str, body: &str) -> String {
    let s = UnixStream::connect(socket).expect("the Unix socket answers");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    exchange(s, head, &[], body)
}

/// Writes one request (`head` as "METHOD PATH", extra headers, a body) on a fresh
/// connection and reads the whole answer as text.
pub fn exchange(
    mut s: impl Read + Write,
    head: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> String {
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    let request = format!(
        "{head} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // One write; and a daemon that answers (and closes) before reading the whole request (a
    // refusal on the headers) may break the pipe under it: its answer is read all the same.
    let _ = s.write_all(request.as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// An answer's status line and body.
pub fn split(out: &str) -> (String, String) {
    let (status, rest) = out.split_once("\r\n").unwrap_or((out, ""));
    let body = rest.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status.to_string(), body.to_string())
}

pub fn healthy(d: &mut Daemon) -> bool {
    d.child.try_wait().unwrap().is_none()
        && request(&d.socket, "GET /v1/health", "").contains("\"ok\":true")
}

/// Two teams (`ml` with two classes, `infra`) over two simulated HGX H100 nodes at $14/h.
pub fn two_team_fleet() -> String {
    format!(
        r#"
[[teams]]
name = "ml"
classes = ["production", "experiment"]

[[teams]]
name = "infra"

{hgx}"#,
        hgx = hgx_pool(14.0, 2)
    )
}

/// The HGX H100 pool of `tests/fleets/hgx_pool.toml` at `price` an hour a node, `nodes` of them.
pub fn hgx_pool(price: f64, nodes: u32) -> String {
    format!(
        "{}price_per_hour = {price:?}\nnodes = {nodes}\n",
        include_str!("../fleets/hgx_pool.toml")
    )
}

/// This host as the only pool (`provider = "local"`): jobs run as real processes, team `a`.
pub const LOCAL_FLEET: &str = concat!(
    "[[teams]]\nname = \"a\"\n\n",
    include_str!("../fleets/local_pool.toml")
);

/// This host's pool for `team`, with `pool_lines` (TOML keys) added to the pool.
pub fn local_fleet(team: &str, pool_lines: &str) -> String {
    format!(
        "[[teams]]\nname = \"{team}\"\n\n{}{pool_lines}",
        include_str!("../fleets/local_pool.toml")
    )
}

pub fn start_with_fleet(name: &str) -> Daemon {
    let dir = temp_dir(name);
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, two_team_fleet()).unwrap();
    start_in(dir, &["--config", fleet.to_str().unwrap()])
}

/// A request over TCP with a bearer token: (status line, body).
pub fn tcp_request(port: u16, token: &str, head: &str, body: &str) -> (String, String) {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let bearer = format!("Bearer {token}");
    split(&exchange(s, head, &[("Authorization", &bearer)], body))
}

/// A token of `role` (and `team`) issued for the user running the tests: the Unix account its
/// jobs run as (a root daemon runs nothing on its host for a token that names none).
pub fn token(d: &Daemon, role: &str, team: Option<&str>) -> String {
    let user = gantry::unix_user::this_user().unwrap_or_default();
    let body = match team {
        Some(t) => format!(r#"{{"role":"{role}","team":"{t}","user":"{user}"}}"#),
        None => format!(r#"{{"role":"{role}","user":"{user}"}}"#),
    };
    let out = request(&d.socket, "POST /v1/tokens", &body);
    let v: serde_json::Value = serde_json::from_str(out.split_once("\r\n\r\n").unwrap().1).unwrap();
    v["token"].as_str().unwrap().to_string()
}

// The CLI against a daemon (`--connect` its socket), as a user would run it.

pub fn cli(d: &Daemon, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gantry {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn json(d: &Daemon, args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["-o", "json"]);
    serde_json::from_str(&cli(d, &a)).unwrap()
}

pub fn events(d: &Daemon) -> Vec<String> {
    cli(d, &["events", "--limit", "500", "-o", "json"])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .map(|e| {
            format!(
                "{}{}",
                e["job"]
                    .as_i64()
                    .map_or(String::new(), |j| format!("job {j} ")),
                e["detail"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// Waits (up to `secs`) until `pred` holds; the daemon's events in the panic message.
pub fn wait_for(d: &Daemon, secs: u64, what: &str, mut pred: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !pred() {
        if t0.elapsed() > Duration::from_secs(secs) {
            panic!(
                "timed out waiting for {what}; events:\n{}",
                events(d).join("\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

pub fn submit(d: &Daemon, dir: &Path, name: &str, yaml: &str) -> i64 {
    let file = dir.join(format!("{name}.yaml"));
    std::fs::write(&file, yaml).unwrap();
    let out = cli(d, &["submit", file.to_str().unwrap(), "--team", "lab"]);
    out.trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {out:?}"))
}

pub fn job(d: &Daemon, id: i64) -> Value {
    json(d, &["job", &id.to_string()])
}

pub fn state(d: &Daemon, id: i64) -> String {
    job(d, id)["state"].as_str().unwrap_or("").to_string()
}

pub fn log_text(d: &Daemon, id: i64) -> String {
    job(d, id)["log_tail"]
        .as_array()
        .map(|l| {
            l.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join("\n")
        })
        .unwrap_or_default()
}

/// The blocks of `doc`'s section `heading` with the info string `lang`, in order.
pub fn doc_blocks(doc: &str, heading: &str, lang: &str) -> Vec<String> {
    let text = std::fs::read_to_string(doc).unwrap();
    let start = text
        .find(heading)
        .unwrap_or_else(|| panic!("{heading} in {doc}"));
    let section = &text[start..];
    let end = section[heading.len()..]
        .find("\n## ")
        .map_or(section.len(), |e| e + heading.len());
    let mut rest = &section[..end];
    let mut out = Vec::new();
    let open = format!("```{lang}\n");
    while let Some(at) = rest.find(&open) {
        let body = &rest[at + open.len()..];
        let close = body.find("```").expect("a closed block");
        out.push(body[..close].to_string());
        rest = &body[close + 3..];
    }
    out
}
