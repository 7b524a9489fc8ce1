//! SSH hosts: a pool of servers reached with the system `ssh` (the user's `ssh_config`,
//! `known_hosts`, agent and jump hosts apply; one multiplexed master connection per host,
//! driven by the `openssh` crate). On each host runs `gantry agent` — this same binary,
//! copied to `~/.gantry/bin/` when the host has no copy of this build (without its debug
//! sections and gzip'd on the wire: `agent_image`) — which is the local backend run there
//! (process groups, logs, exit statuses, NVML).
//!
//! One thread per pool runs a small async runtime with one task per host. A task connects,
//! installs the agent if needed, starts it, and relays: the daemon's requests to the agent's
//! stdin, the agent's lines back as `RunEvent`s. When the connection drops it says so and
//! reconnects with backoff; the agent that answers next lists the runs it still has, which is
//! how the daemon re-adopts them.

use super::agent::{FromAgent, ToAgent, PROTOCOL, SAID_MAX};
use super::error::OpenWhy;
use super::logs::{LogQuery, LogRead, LogReader};
use super::wire::{self, Line, Lines};
use super::{Launch, RunEvent, Runner};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc as amp;

/// How to reach the hosts of one pool.
#[derive(Clone, Debug)]
pub struct SshOptions {
    /// `ssh -i`.
    pub identity_file: Option<PathBuf>,
    /// `ssh -F` (default: the user's `~/.ssh/config`).
    pub config_file: Option<PathBuf>,
    /// `ssh -J`, for hosts reached through a head node.
    pub jump: Option<String>,
    pub connect_timeout: Duration,
    /// A connected host whose agent answers nothing this long is down (then lost after the
    /// pool's `lost_after`).
    pub silent_after: Duration,
    /// How long each host keeps the logs of ended jobs (the agent's flags).
    pub retention: super::retention::Retention,
    /// Wakes the daemon when a host's run ends.
    pub wake: super::Wake,
    /// The cloud's metadata service each host's agent watches for notices of its end (a spot
    /// pool's instances: `gantry agent --notices`).
    pub notices: Option<String>,
}

pub use crate::config::ssh::Destination;

/// Identifies this build of gantry, so a host runs the agent of the same build: its version
/// and the binary's size and modification time (hashing a debug build costs seconds).
fn build_id(exe: &std::path::Path) -> String {
    let meta = std::fs::metadata(exe).ok();
    let len = meta.as_ref().map_or(0, std::fs::Metadata::len);
    let mtime = meta
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_secs());
    format!("{}-{len:x}-{mtime:x}", env!("CARGO_PKG_VERSION"))
}

type Pending = Arc<Mutex<HashMap<u64, mpsc::Sender<LogRead>>>>;

pub mod agent_image;
use agent_image::install;
mod control;
mod feed;
mod ship;
use ship::copy_workdir;
pub use ship::remote_workdir;

/// Hosts listed in the fleet file, reached over SSH, where `gantry agent` runs the jobs.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::registration::Registration {
        backend: crate::config::fleet::Backend::Ssh,
        runner: |p, _, _, opening| {
            Ok(Box::new(SshPool::connect(
                &p.hosts,
                super::ssh_options(p, opening),
            )?))
        },
        provisioner: None,
        here: None,
        hosts_are: Some("SSH host(s)"),
        cloud: None,
        gpus_from_agents: true,
    };

/// The SSH hosts of one pool.
pub struct SshPool {
    agents: Arc<Agents>,
    events: mpsc::Receiver<RunEvent>,
    /// Turned true when the pool goes: every host task ends, whatever it waits for.
    stop: tokio::sync::watch::Sender<bool>,
    /// Says when the pool's thread has ended (its sessions closed).
    ended: mpsc::Receiver<()>,
    /// Swept after the thread ends: no master outlives the pool.
    _control: control::ControlDir,
}

impl Drop for SshPool {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // Each session closes its master as it ends (`ssh -O exit`, a few ms each); the sweep
        // then ends whatever is left.
        let _ = self.ended.recv_timeout(Duration::from_secs(5));
    }
}

/// The pool's links to its hosts' agents: sends them requests and reads their runs' logs;
/// shared with log readers, which call it from the API's threads.
struct Agents {
    /// Each host's entry (`[user@]host[:port]`); empty for a slot with no host yet (a cloud
    /// pool's node not bought).
    names: std::sync::RwLock<Vec<String>>,
    /// Each host's destination as its task follows it: `None` while the slot has no host.
    dests: Vec<tokio::sync::watch::Sender<Option<Destination>>>,
    links: Vec<amp::UnboundedSender<ToAgent>>,
    /// Log reads waiting for their host's answer, by request id.
    pending: Pending,
    next: AtomicU64,
    /// How each connected host is entered (`gantry exec`).
    reach: Reach,
}

/// Per host, while its agent is connected: how to run a command there over the master
/// connection (its control socket, the destination, the agent's path on the host).
type Reach = Arc<std::sync::RwLock<Vec<Option<Entry>>>>;

#[derive(Clone)]
struct Entry {
    control: PathBuf,
    host: String,
    agent: String,
}

/// Clears a host's entry when its session ends, however it ends.
struct Reached<'a>(&'a Reach, usize);

impl Drop for Reached<'_> {
    fn drop(&mut self) {
        if let Ok(mut r) = self.0.write() {
            if let Some(e) = r.get_mut(self.1) {
                *e = None;
            }
        }
    }
}

impl Agents {
    fn send(&self, host: usize, req: ToAgent) {
        if let Some(l) = self.links.get(host) {
            let _ = l.send(req);
        }
    }
}

impl LogReader for Agents {
    fn read(&self, host: usize, job: i64, q: &LogQuery, wait: Duration) -> Result<LogRead, String> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        if let Ok(mut t) = self.pending.lock() {
            t.insert(id, tx);
        }
        self.send(host, ToAgent::Logs { id, job, query: *q });
        let got = rx.recv_timeout(wait);
        if let Ok(mut t) = self.pending.lock() {
            t.remove(&id);
        }
        got.map_err(|_| {
            let name = self
                .names
                .read()
                .ok()
                .and_then(|n| n.get(host).cloned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "the host".to_string());
            format!("{name} did not answer within {} ms", wait.as_millis())
        })
    }
}

impl SshPool {
    /// Starts connecting to every host of the pool (in the background: a host that cannot
    /// be reached is reported by `poll`, not here).
    pub fn connect(hosts: &[String], opts: SshOptions) -> Result<SshPool, OpenWhy> {
        let dests: Vec<Option<Destination>> = hosts
            .iter()
            .map(|h| Destination::parse(h).map(Some))
            .collect::<Result<_, _>>()
            .map_err(OpenWhy::Settings)?;
        SshPool::open(dests, hosts.to_vec(), opts)
    }

    /// A pool of `slots` hosts not known yet (a cloud pool's nodes): each is connected to
    /// once `attach` names it, and left when `detach` says it is gone.
    pub fn slots(slots: usize, opts: SshOptions) -> Result<SshPool, OpenWhy> {
        SshPool::open(vec![None; slots], vec![String::new(); slots], opts)
    }

    fn open(
        dests: Vec<Option<Destination>>,
        names: Vec<String>,
        opts: SshOptions,
    ) -> Result<SshPool, OpenWhy> {
        // The binary installed as the agent: this one, or `GANTRY_AGENT_BIN` (a gantry built
        // for the hosts' architecture, or the real binary when the daemon is embedded).
        let own_binary = std::env::var_os("GANTRY_AGENT_BIN").is_none();
        let exe = match std::env::var_os("GANTRY_AGENT_BIN") {
            Some(p) => PathBuf::from(p),
            None => std::env::current_exe().map_err(|e| {
                OpenWhy::Host(format!(
                    "cannot find this gantry binary to install it on the hosts: {e}"
                ))
            })?,
        };
        if !exe.is_file() {
            return Err(OpenWhy::Host(format!(
                "the agent binary {} is not a file (GANTRY_AGENT_BIN)",
                exe.display()
            )));
        }
        let (tx, events) = mpsc::channel();
        let control = control::ControlDir::new().map_err(|e| {
            OpenWhy::Host(format!(
                "cannot make a directory for the ssh connections: {e}"
            ))
        })?;
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let (ended_tx, ended) = mpsc::channel();
        let pending: Pending = Arc::default();
        let mut links = Vec::new();
        let mut receivers = Vec::new();
        let mut watches = Vec::new();
        for d in &dests {
            let (ltx, lrx) = amp::unbounded_channel();
            links.push(ltx);
            let (dtx, drx) = tokio::sync::watch::channel(d.clone());
            watches.push(dtx);
            receivers.push((lrx, drx));
        }
        let reach: Reach = Arc::new(std::sync::RwLock::new(vec![None; dests.len()]));
        let shared = Arc::new(Shared {
            exe: exe.clone(),
            build: build_id(&exe),
            own_binary,
            image: tokio::sync::OnceCell::new(),
            opts,
            events: tx,
            pending: pending.clone(),
            control: control.path.clone(),
            reach: reach.clone(),
            stopped,
        });
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| OpenWhy::Host(format!("cannot start the SSH backend's runtime: {e}")))?;
        let tasks: Vec<_> = receivers.into_iter().enumerate().collect();
        std::thread::Builder::new()
            .name("gantry-ssh".to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    let mut set = tokio::task::JoinSet::new();
                    for (i, (rx, dest)) in tasks {
                        set.spawn(host_task(i, dest, rx, shared.clone()));
                    }
                    while set.join_next().await.is_some() {}
                });
                let _ = ended_tx.send(());
            })
            .map_err(|e| OpenWhy::Host(format!("cannot start the SSH backend's thread: {e}")))?;
        Ok(SshPool {
            agents: Arc::new(Agents {
                names: std::sync::RwLock::new(names),
                dests: watches,
                links,
                pending,
                next: AtomicU64::new(1),
                reach,
            }),
            events,
            stop,
            ended,
            _control: control,
        })
    }

    fn send(&self, host: usize, req: ToAgent) {
        self.agents.send(host, req);
    }
}

impl Runner for SshPool {
    fn kind(&self) -> &'static str {
        "ssh"
    }

    fn address(&self, host: usize) -> String {
        self.agents
            .names
            .read()
            .ok()
            .and_then(|n| n.get(host).cloned())
            .and_then(|n| Destination::parse(&n).ok())
            .map_or_else(String::new, |d| d.address().to_string())
    }

    fn attach(&mut self, host: usize, entry: &str) -> Result<(), String> {
        let dest = Destination::parse(entry)?;
        if let Ok(mut n) = self.agents.names.write() {
            if let Some(n) = n.get_mut(host) {
                *n = entry.to_string();
            }
        }
        if let Some(w) = self.agents.dests.get(host) {
            w.send_replace(Some(dest));
        }
        Ok(())
    }

    fn detach(&mut self, host: usize) {
        if let Some(w) = self.agents.dests.get(host) {
            w.send_replace(None);
        }
    }

    fn start(&mut self, host: usize, launch: Launch) {
        self.send(host, ToAgent::Start(Box::new(launch)));
    }

    fn stop(&mut self, host: usize, job: i64, token: &str, signal: &str, grace_s: f64) {
        self.send(
            host,
            ToAgent::Stop {
                job,
                token: token.to_string(),
                signal: signal.to_string(),
                grace_s,
            },
        );
    }

    fn kill(&mut self, host: usize, job: i64, token: &str) {
        self.send(
            host,
            ToAgent::Kill {
                job,
                token: token.to_string(),
            },
        );
    }

    fn forget(&mut self, host: usize, job: i64, token: &str) {
        self.send(
            host,
            ToAgent::Forget {
                job,
                token: token.to_string(),
            },
        );
    }

    fn poll(&mut self, _now: f64) -> Vec<RunEvent> {
        self.events.try_iter().collect()
    }

    fn enter(
        &self,
        host: usize,
        job: i64,
        tty: bool,
        argv: &[String],
    ) -> Result<std::process::Command, String> {
        let entry = self
            .agents
            .reach
            .read()
            .ok()
            .and_then(|r| r.get(host).cloned().flatten());
        let Some(e) = entry else {
            return Err(format!(
                "host {} is not connected now: try again when it is",
                self.address(host)
            ));
        };
        // Over the pool's master connection: no new login, no second host-key prompt.
        let mut cmd = std::process::Command::new("ssh");
        cmd.arg("-S")
            .arg(&e.control)
            .args(["-o", "ControlMaster=no", "-o", "BatchMode=yes", "-q"])
            .arg(if tty { "-tt" } else { "-T" })
            .arg(&e.host)
            .arg("--");
        let mut remote = vec![crate::backend::enter::shell_quote(&e.agent)];
        remote.extend(
            crate::backend::enter::args(None, job, tty, argv)
                .iter()
                .map(|a| crate::backend::enter::shell_quote(&a.to_string_lossy())),
        );
        cmd.arg(remote.join(" "));
        Ok(cmd)
    }

    fn logs(&self) -> Arc<dyn LogReader> {
        self.agents.clone()
    }
}

/// What every host task of a pool shares.
struct Shared {
    exe: PathBuf,
    build: String,
    /// The agent is this binary (its architecture is known); not when `GANTRY_AGENT_BIN`
    /// names another.
    own_binary: bool,
    /// The agent as hosts receive it, made at the first copy (`None`: it could not be made,
    /// and the binary goes as it is).
    image: tokio::sync::OnceCell<Option<agent_image::Image>>,
    opts: SshOptions,
    events: mpsc::Sender<RunEvent>,
    pending: Pending,
    /// The pool's own directory for its masters' sockets.
    control: PathBuf,
    reach: Reach,
    /// True once the pool is gone.
    stopped: tokio::sync::watch::Receiver<bool>,
}

/// How long a host that could not be reached waits before the next try (doubling up to the
/// last).
const BACKOFF: [u64; 5] = [1, 2, 4, 8, 15];

async fn host_task(
    host: usize,
    mut dests: tokio::sync::watch::Receiver<Option<Destination>>,
    mut rx: amp::UnboundedReceiver<ToAgent>,
    shared: Arc<Shared>,
) {
    let mut failures = 0usize;
    let mut stopped = shared.stopped.clone();
    loop {
        // A slot with no host (a cloud node not bought, or given back) waits for one; what
        // was asked of the host it had is dropped with it.
        let dest = tokio::select! {
            d = dests.wait_for(Option::is_some) => match d {
                Ok(d) => d.clone(),
                Err(_) => return,
            },
            _ = stopped.wait_for(|s| *s) => return,
        };
        let Some(dest) = dest else { continue };
        // A pool that goes ends its sessions wherever they are — connecting, waiting for a
        // hello, relaying — and with them their masters; so does a host given back.
        let (why, was_up) = tokio::select! {
            ended = session(host, &dest, &mut rx, &shared) => ended,
            _ = stopped.wait_for(|s| *s) => return,
            _ = dests.wait_for(|d| d.as_ref() != Some(&dest)) => {
                while rx.try_recv().is_ok() {}
                failures = 0;
                continue;
            }
        };
        let Some(why) = why else {
            return; // the daemon is stopping
        };
        if shared.events.send(RunEvent::Down { host, why }).is_err() {
            return;
        }
        failures = if was_up { 0 } else { failures + 1 };
        let wait = BACKOFF[failures.min(BACKOFF.len() - 1)];
        // Requests sent meanwhile wait in the channel; a closed channel ends the task.
        if rx.is_closed() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(wait)) => {}
            _ = stopped.wait_for(|s| *s) => return,
        }
    }
}

/// One connection's life: (why it ended, or `None` when the daemon is stopping; whether the
/// agent answered).
async fn session(
    host: usize,
    dest: &Destination,
    rx: &mut amp::UnboundedReceiver<ToAgent>,
    shared: &Shared,
) -> (Option<String>, bool) {
    let mut b = openssh::SessionBuilder::default();
    b.known_hosts_check(openssh::KnownHosts::Add)
        .control_directory(&shared.control)
        .server_alive_interval(Duration::from_secs(5))
        .connect_timeout(shared.opts.connect_timeout.max(Duration::from_secs(1)));
    if let Some(u) = &dest.user {
        b.user(u.clone());
    }
    if let Some(p) = dest.port {
        b.port(p);
    }
    if let Some(k) = &shared.opts.identity_file {
        b.keyfile(k);
    }
    if let Some(f) = &shared.opts.config_file {
        b.config_file(f);
    }
    if let Some(j) = &shared.opts.jump {
        b.jump_hosts([j]);
    }
    let s = match b.connect(&dest.host).await {
        Ok(s) => s,
        Err(e) => return (Some(format!("ssh: {}", error_chain(&e))), false),
    };
    let path = match install(&s, host, shared).await {
        Ok(p) => p,
        Err(why) => return (Some(why), false),
    };
    let mut agent = s.command(&path);
    agent.arg("agent");
    if let Some(url) = &shared.opts.notices {
        agent.arg("--notices").arg(url);
    }
    agent.args(shared.opts.retention.args());
    let mut child = match agent
        .stdin(openssh::Stdio::piped())
        .stdout(openssh::Stdio::piped())
        .stderr(openssh::Stdio::piped())
        .spawn()
        .await
    {
        Ok(c) => c,
        Err(e) => {
            return (
                Some(format!("cannot start the agent: {}", error_chain(&e))),
                false,
            )
        }
    };
    let (Some(mut stdin), Some(stdout)) = (child.stdin().take(), child.stdout().take()) else {
        return (Some("the agent's pipes are missing".to_string()), false);
    };
    let mut stderr = child.stderr().take();
    let mut lines = Lines::new(BufReader::new(stdout));
    let hello = tokio::time::timeout(Duration::from_secs(60), lines.next()).await;
    let hello = match hello {
        Ok(Ok(Some(Line::Text(l)))) => l,
        Ok(Ok(Some(other))) => return (Some(misbehaved(&other)), false),
        Ok(Ok(None)) | Ok(Err(_)) => {
            let said = read_all(&mut stderr).await;
            return (
                Some(format!("the agent ended before it said hello: {said}")),
                false,
            );
        }
        Err(_) => {
            return (
                Some("the agent did not say hello in 60 s".to_string()),
                false,
            )
        }
    };
    match FromAgent::read(&hello) {
        Some(FromAgent::Hello { protocol, info }) if protocol == PROTOCOL => {
            if shared.events.send(RunEvent::Up { host, info }).is_err() {
                return (None, true);
            }
            shared.opts.wake.wake();
        }
        Some(FromAgent::Hello { protocol, .. }) => {
            return (
                Some(format!(
                    "its agent speaks protocol {protocol}, this daemon {PROTOCOL}"
                )),
                false,
            )
        }
        _ => {
            return (
                Some(format!(
                    "the agent's first line is not a hello: {}",
                    crate::untrusted::bounded(&hello, SAID_MAX)
                )),
                false,
            )
        }
    }
    if let Ok(mut r) = shared.reach.write() {
        if let Some(e) = r.get_mut(host) {
            *e = Some(Entry {
                control: s.control_socket().to_path_buf(),
                host: dest.host.clone(),
                agent: path.clone(),
            });
        }
    }
    let _reached = Reached(&shared.reach, host);
    // A host that answers nothing for `silent_after` (its agent stopped, its machine hung
    // while the TCP connection stays up) is down: asked every `silent_after / 3`.
    let silent_after = shared.opts.silent_after;
    let mut heard = tokio::time::Instant::now();
    let mut ping = tokio::time::interval(silent_after / 3);
    ping.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let s = Arc::new(s);
    // Starts whose workdir is being copied come back here when it is there.
    let (copied_tx, mut copied) = amp::unbounded_channel::<Launch>();
    loop {
        let req = tokio::select! {
            req = rx.recv() => {
                let Some(req) = req else { return (None, true) };
                match req {
                    ToAgent::Start(l) if l.workdir.is_some() || !l.local_mounts.is_empty() => {
                        tokio::spawn(copy_workdir(s.clone(), host, *l, copied_tx.clone(), shared.events.clone()));
                        continue;
                    }
                    req => Some(req),
                }
            }
            l = copied.recv() => l.map(|l| ToAgent::Start(Box::new(l))),
            _ = ping.tick() => {
                if heard.elapsed() >= silent_after {
                    return (Some(format!("its agent answered nothing for {} s (stopped, or the host hung)", silent_after.as_secs())), true);
                }
                Some(ToAgent::Ping)
            }
            line = lines.next() => {
                heard = tokio::time::Instant::now();
                match line {
                    Ok(Some(Line::Text(l))) => relay(host, &l, shared),
                    // Not to be trusted again soon: the backoff grows as for a host that never
                    // answered.
                    Ok(Some(other)) => return (Some(misbehaved(&other)), false),
                    Ok(None) => {
                        let said = read_all(&mut stderr).await;
                        return (Some(format!("the connection to its agent closed{}", if said.is_empty() { String::new() } else { format!(": {said}") })), true);
                    }
                    Err(e) => return (Some(format!("reading from the agent failed: {e}")), true),
                }
                None
            }
        };
        if let Some(req) = req {
            let Ok(mut line) = serde_json::to_string(&req) else {
                continue;
            };
            line.push('\n');
            if let Err(e) = stdin.write_all(line.as_bytes()).await {
                return (Some(format!("writing to the agent failed: {e}")), true);
            }
            let _ = stdin.flush().await;
        }
    }
}

/// Why a session with an agent that broke the protocol's bounds ends.
fn misbehaved(line: &Line) -> String {
    match line {
        Line::TooLong(n) => format!(
            "its agent sent a line of {n} bytes, over the limit of {} MiB: disconnected",
            wire::MAX_LINE >> 20
        ),
        Line::TooFast => format!(
            "its agent sent more than {} lines in a second: disconnected",
            wire::MAX_BURST
        ),
        Line::Text(t) => crate::untrusted::bounded(t, SAID_MAX),
    }
}

/// An agent's line, passed on to the daemon (a log read's answer to the reader waiting for it).
fn relay(host: usize, line: &str, shared: &Shared) {
    match FromAgent::read(line) {
        Some(FromAgent::Logs { id, read }) => {
            if let Some(tx) = shared.pending.lock().ok().and_then(|mut t| t.remove(&id)) {
                let _ = tx.send(read);
            }
        }
        // The hello was the session's first line; another one is not news.
        Some(FromAgent::Hello { .. } | FromAgent::Pong) | None => {}
        Some(msg) => {
            if let Some(event) = msg.event(host) {
                shared.opts.wake.after(event, |e| {
                    let _ = shared.events.send(e);
                });
            }
        }
    }
}

/// What is left in a pipe (the agent's stderr), trimmed, at most 2 KiB read and what an event
/// may hold kept, escaped (the host's words).
async fn read_all(pipe: &mut Option<openssh::ChildStderr>) -> String {
    let Some(p) = pipe.as_mut() else {
        return String::new();
    };
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(2), p.take(2048).read_to_end(&mut buf)).await;
    crate::untrusted::bounded(String::from_utf8_lossy(&buf).trim(), SAID_MAX)
}

/// An error with its causes, on one line (openssh puts ssh's own message in the source).
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let msg = c.to_string();
        if !msg.is_empty() && !s.contains(&msg) {
            s.push_str(": ");
            s.push_str(msg.trim());
        }
        cur = c.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_entries_parse_with_user_and_port() {
        let d = Destination::parse("ubuntu@10.0.0.12:2222").unwrap();
        assert_eq!(d.user.as_deref(), Some("ubuntu"));
        assert_eq!(d.host, "10.0.0.12");
        assert_eq!(d.port, Some(2222));
        let d = Destination::parse("gpu1.example").unwrap();
        assert_eq!((d.user, d.port), (None, None));
        let d = Destination::parse("[::1]:22").unwrap();
        assert_eq!((d.host.as_str(), d.port), ("::1", Some(22)));
        assert!(Destination::parse("gpu1:http")
            .unwrap_err()
            .contains("port `http`"));
        assert!(Destination::parse("@gpu1").is_err());
        assert!(Destination::parse("").is_err());
    }
}
