//! `gantry agent`: the local backend, run on a remote host and driven over a pipe (the SSH
//! channel). One JSON object per line each way; the agent speaks first with a `Hello` that
//! names the protocol version, the host, its GPUs as NVML sees them and the runs it still
//! has. The agent lives as long as its connection; the jobs do not depend on it: each runs in
//! its own process group with its logs and exit status in files, and each run is written to
//! the agent's directory, so the next agent (after a disconnect, a crash or a daemon restart)
//! re-adopts it. A run is forgotten only when the daemon says its end is recorded, so an exit
//! that happened while nobody listened is reported on the next connection: once.

use super::local::container::Container;
use super::local::runs::LocalRuns;
use super::local::{exec, nvml};
use super::logs::{LogQuery, LogRead};
use super::{Exit, HostGpu, HostInfo, Launch, RunEvent};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The protocol's version: a daemon refuses an agent that speaks another.
pub const PROTOCOL: u32 = 6;

/// The most characters of a host's own words (its names, reasons, stderr) an event keeps.
pub const SAID_MAX: usize = 200;

/// How often the runs are looked at for ends (a `waitpid` each, or an exit file after a
/// restart). A run's end is what frees its GPUs: at 50 ms a freed slot waited 25 ms on
/// average before the daemon heard of it (`gantry bench starts`, issue 39).
const EXITS_EVERY: Duration = Duration::from_millis(10);

/// What the daemon asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToAgent {
    Start(Box<Launch>),
    Stop {
        job: i64,
        token: String,
        signal: String,
        grace_s: f64,
    },
    Kill {
        job: i64,
        token: String,
    },
    Forget {
        job: i64,
        token: String,
    },
    /// Read a run's logs (answered with `Logs` of the same id).
    Logs {
        id: u64,
        job: i64,
        query: LogQuery,
    },
    /// Are you there? (answered with `Pong`: an agent that answers nothing is down).
    Ping,
}

/// What the agent says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FromAgent {
    Hello {
        protocol: u32,
        info: HostInfo,
    },
    Started {
        job: i64,
        token: String,
        pgid: u32,
    },
    StartFailed {
        job: i64,
        token: String,
        why: String,
    },
    Exited {
        job: i64,
        token: String,
        exit: Exit,
    },
    Logs {
        id: u64,
        read: LogRead,
    },
    /// An NVML sample of the host's GPUs, with the process group of each run: (pgid, job).
    Sample {
        found: nvml::Discovery,
        groups: Vec<(u32, i64)>,
    },
    /// The host's CPUs, memory and disk, every sampling interval (with NVML or without).
    Usage {
        usage: super::host_usage::HostUsage,
    },
    /// A line the agent could not act on, and why.
    Refused {
        why: String,
    },
    Pong,
    /// The cloud said the host will be taken back in `gone_in_s` (a spot interruption), or
    /// warned that it may be (`None`: a rebalance recommendation).
    Notice {
        what: String,
        gone_in_s: Option<f64>,
    },
}

impl FromAgent {
    /// What this message tells the daemon about host `host` (`None` for a log read's answer,
    /// which goes to the reader that asked).
    pub fn event(self, host: usize) -> Option<RunEvent> {
        Some(match self {
            FromAgent::Hello { info, .. } => RunEvent::Up { host, info },
            FromAgent::Started { job, token, pgid } => RunEvent::Started {
                host,
                job,
                token,
                pgid: Some(pgid),
                handle: None,
            },
            FromAgent::StartFailed { job, token, why } => RunEvent::StartFailed {
                host,
                job,
                token,
                why,
            },
            FromAgent::Exited { job, token, exit } => RunEvent::Exited {
                host,
                job,
                token,
                exit,
                at: None,
            },
            FromAgent::Sample { found, groups } => RunEvent::Sample {
                host,
                found,
                groups,
            },
            FromAgent::Usage { usage } => RunEvent::Usage { host, usage },
            FromAgent::Notice { what, gone_in_s } => RunEvent::Notice {
                host,
                what,
                gone_in_s: gone_in_s
                    .filter(|s| s.is_finite())
                    .map(|s| s.clamp(0.0, 3600.0)),
            },
            FromAgent::Refused { why } => RunEvent::Down {
                host,
                why: format!("the agent refused a request: {why}"),
            },
            FromAgent::Logs { .. } | FromAgent::Pong => return None,
        })
    }

    /// What the daemon takes from one line an agent sent: the message, with what the host
    /// chose to say bounded (`bounded`); `None` for a line that is not one.
    pub fn read(line: &str) -> Option<FromAgent> {
        serde_json::from_str::<FromAgent>(line)
            .ok()
            .map(FromAgent::bounded)
    }

    /// This message with the text a host chose — reasons, names — escaped and cut to a length
    /// an event may have: what a host says is not trusted.
    pub fn bounded(self) -> FromAgent {
        use crate::untrusted::bounded;
        match self {
            FromAgent::StartFailed { job, token, why } => FromAgent::StartFailed {
                job,
                token,
                why: bounded(&why, SAID_MAX),
            },
            FromAgent::Refused { why } => FromAgent::Refused {
                why: bounded(&why, SAID_MAX),
            },
            FromAgent::Notice { what, gone_in_s } => FromAgent::Notice {
                what: bounded(&what, SAID_MAX),
                gone_in_s,
            },
            FromAgent::Hello { protocol, mut info } => {
                for s in [&mut info.hostname, &mut info.arch, &mut info.version] {
                    *s = bounded(s, SAID_MAX);
                }
                for s in [&mut info.nvml, &mut info.driver].into_iter().flatten() {
                    *s = bounded(s, SAID_MAX);
                }
                for g in &mut info.gpus {
                    g.name = bounded(&g.name, SAID_MAX);
                }
                // Addresses go into jobs' environments: only what parses as one, a few.
                info.addresses
                    .retain(|a| a.parse::<std::net::IpAddr>().is_ok());
                info.addresses.truncate(16);
                FromAgent::Hello { protocol, info }
            }
            FromAgent::Usage { mut usage } => {
                usage.disk_path = bounded(&usage.disk_path, SAID_MAX);
                let pct = usage.cpu_busy_pct.filter(|p| p.is_finite());
                usage.cpu_busy_pct = pct.map(|p| p.clamp(0.0, 100.0));
                usage.mem_available_mib = usage.mem_available_mib.min(usage.mem_total_mib);
                usage.disk_free_mib = usage.disk_free_mib.min(usage.disk_total_mib);
                FromAgent::Usage { usage }
            }
            other => other,
        }
    }
}

/// A run as the agent keeps it on disk.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RunFile {
    job: i64,
    pgid: u32,
    token: String,
    /// The container runtime the run's container is in, where it runs in one.
    #[serde(default)]
    runtime: Option<String>,
}

impl RunFile {
    fn container(&self) -> Option<Container> {
        let rt = self.runtime.as_deref()?;
        Some(Container::of(rt, self.job, &self.token))
    }
}

/// This host's name (what the daemon shows beside the fleet file's host entry).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// Calls `tick` every `period` (the first at once) until `done`, or until it says stop
/// (`false`); looks at `done` every 50 ms between.
fn every(period: Duration, done: &AtomicBool, mut tick: impl FnMut() -> bool) {
    let mut next = Instant::now();
    while !done.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        next += period;
        if !tick() {
            return;
        }
    }
}

/// This host's IPv4 addresses for its peers: the one the daemon's ssh reached it at first
/// (`SSH_CONNECTION`: client address and port, server address and port), then every
/// interface's that is up and not loopback (`getifaddrs`).
pub fn addresses() -> Vec<String> {
    let mut out: Vec<String> = std::env::var("SSH_CONNECTION")
        .ok()
        .and_then(|c| c.split_whitespace().nth(2).map(str::to_string))
        .filter(|a| a.parse::<std::net::IpAddr>().is_ok())
        .into_iter()
        .collect();
    let mut list: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills `list` with a linked list freed below by freeifaddrs; each
    // entry's ifa_addr is null or a sockaddr of the family it says.
    unsafe {
        if libc::getifaddrs(&mut list) == 0 {
            let mut at = list;
            while !at.is_null() {
                let a = &*at;
                let up = a.ifa_flags & libc::IFF_UP as u32 != 0;
                if up
                    && !a.ifa_addr.is_null()
                    && i32::from((*a.ifa_addr).sa_family) == libc::AF_INET
                {
                    let sin = &*(a.ifa_addr as *const libc::sockaddr_in);
                    let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
                    if !ip.is_loopback() && !out.contains(&ip.to_string()) {
                        out.push(ip.to_string());
                    }
                }
                at = a.ifa_next;
            }
            libc::freeifaddrs(list);
        }
    }
    out
}

/// Where the agent keeps its runs and logs: per host name under the home directory, since
/// the home directory is often shared between a lab's servers (NFS).
pub fn default_dir() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".gantry").join("agent").join(hostname())
}

struct Agent {
    runs: LocalRuns,
    /// Job → its run's token, for every run not yet forgotten.
    tokens: HashMap<i64, String>,
    runs_dir: PathBuf,
    /// GPU index → UUID, from NVML (empty without it: indices are passed through).
    uuids: HashMap<String, String>,
    started: Instant,
}

/// Where an agent keeps its runs (one file each) and their logs and exit statuses.
#[derive(Clone, Debug)]
pub struct AgentDirs {
    pub runs: PathBuf,
    pub logs: PathBuf,
}

impl AgentDirs {
    /// `runs/` and `logs/` under `dir` (a remote host's agent directory).
    pub fn under(dir: &Path) -> AgentDirs {
        AgentDirs {
            runs: dir.join("runs"),
            logs: dir.join("logs"),
        }
    }
}

/// How an agent learns about its host's GPUs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Sampling {
    /// NVML, opened once and sampled every so often.
    Nvml(Duration),
    /// Not at all: the hello names no GPUs and no samples follow (the daemon's tests hand it
    /// samples of their own).
    Off,
}

/// Where an agent's messages go: a pipe to the daemon (`serve`), or the daemon's own event
/// queue when the agent runs inside it (the local host's pool).
pub type Say = Arc<dyn Fn(FromAgent) + Send + Sync>;

/// A running agent: its runs, the thread that notices their exits and the one that samples
/// NVML. Requests go to `handle`; dropping it stops the threads (the jobs keep running).
pub struct Running {
    agent: Arc<Mutex<Agent>>,
    say: Say,
    done: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl Running {
    /// Acts on one request of the daemon; an answer, if any, goes where the agent says things.
    pub fn handle(&self, req: ToAgent) {
        let answer = match self.agent.lock() {
            Ok(mut a) => a.handle(req),
            Err(_) => return,
        };
        if let Some(answer) = answer {
            (self.say)(answer);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Writes a run's file (atomically), so the next agent over `dirs` re-adopts it.
pub fn record_run(
    dirs: &AgentDirs,
    job: i64,
    pgid: u32,
    token: &str,
    runtime: Option<&str>,
) -> std::io::Result<()> {
    std::fs::create_dir_all(&dirs.runs)?;
    let path = dirs.runs.join(format!("job-{job}.json"));
    let tmp = path.with_extension("tmp");
    let file = RunFile {
        job,
        pgid,
        token: token.to_string(),
        runtime: runtime.map(str::to_string),
    };
    std::fs::write(&tmp, serde_json::to_vec(&file)?)?;
    std::fs::rename(&tmp, &path)
}

/// Ends the agent that served `dir` before this one, if it still runs: one the daemon gave up
/// on (stopped, hung) would otherwise stay for ever beside the agent that re-adopted its runs.
/// Only a process whose command line is a gantry agent's is touched; then this agent's pid is
/// written for the next.
fn replace_predecessor(dir: &Path) {
    let file = dir.join("agent.pid");
    let me = std::process::id();
    if let Some(pid) = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        .filter(|&p| p != me)
    {
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        let words: Vec<&[u8]> = cmd.split(|&b| b == 0).collect();
        let is_agent = words.first().is_some_and(|w| {
            use std::os::unix::ffi::OsStrExt;
            Path::new(std::ffi::OsStr::from_bytes(w))
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("gantry"))
        }) && words.get(1).is_some_and(|w| *w == b"agent");
        if is_agent {
            // SAFETY: kill(2) on a gantry agent over this same directory.
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
            let t = Instant::now();
            while Path::new(&format!("/proc/{pid}")).exists()
                && t.elapsed() < Duration::from_secs(2)
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(&file, me.to_string());
}

/// Serves one connection: `input` carries the daemon's requests, `out` the answers and
/// events; with `notices`, the cloud's metadata service whose notices of this host's end are
/// watched and said (`backend::notices`). Returns when `input` ends; the jobs keep running.
pub fn serve(
    dir: &Path,
    sample_every: Duration,
    notices: Option<String>,
    retention: super::retention::Retention,
    input: impl BufRead,
    out: Box<dyn Write + Send>,
) -> std::io::Result<()> {
    replace_predecessor(dir);
    let out = Mutex::new(out);
    let say: Say = Arc::new(move |msg: FromAgent| {
        let Ok(mut line) = serde_json::to_string(&msg) else {
            return;
        };
        line.push('\n');
        if let Ok(mut w) = out.lock() {
            let _ = w.write_all(line.as_bytes());
            let _ = w.flush();
        }
    });
    let agent = start(
        &AgentDirs::under(dir),
        Sampling::Nvml(sample_every),
        retention,
        say.clone(),
    )?;
    let watching = Arc::new(AtomicBool::new(false));
    if let Some(url) = notices {
        let (say, done) = (say.clone(), watching.clone());
        std::thread::spawn(move || {
            super::notices::watch(
                url,
                |n| {
                    say(FromAgent::Notice {
                        what: n.what,
                        gone_in_s: n.gone_in_s,
                    })
                },
                done,
            )
        });
    }
    // The watcher stops with the connection.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let _stop = Stop(watching);
    for line in input.lines() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<ToAgent>(&line) {
            Ok(req) => agent.handle(req),
            Err(e) => say(FromAgent::Refused {
                why: format!("not a request of protocol {PROTOCOL}: {e}"),
            }),
        }
    }
    Ok(())
}

/// Starts an agent over `dirs`: re-adopts the runs a previous agent left, says hello (with
/// them), reports those that vanished, and starts noticing exits and sampling.
pub fn start(
    dirs: &AgentDirs,
    sampling: Sampling,
    retention: super::retention::Retention,
    say: Say,
) -> std::io::Result<Running> {
    std::fs::create_dir_all(&dirs.runs)?;
    let mut agent = Agent {
        runs: LocalRuns::new(dirs.logs.clone()),
        tokens: HashMap::new(),
        runs_dir: dirs.runs.clone(),
        uuids: HashMap::new(),
        started: Instant::now(),
    };
    // The runs a previous agent left: re-adopted where they still run or left their exit.
    let mut known = Vec::new();
    let mut vanished = Vec::new();
    for entry in std::fs::read_dir(&dirs.runs)?.flatten() {
        let Some(r) = std::fs::read(entry.path())
            .ok()
            .and_then(|b| serde_json::from_slice::<RunFile>(&b).ok())
        else {
            continue;
        };
        if !agent
            .runs
            .adopt(r.job, r.pgid, Some(r.token.clone()), r.container())
        {
            // Its group was killed outright (with the agent's, say): a container it ran
            // outlives the runtime's client and would hold its GPUs.
            if let Some(c) = r.container() {
                c.remove();
            }
            vanished.push((r.job, r.token.clone()));
        }
        agent.tokens.insert(r.job, r.token.clone());
        known.push((r.job, r.token));
    }
    known.sort();
    // NVML opened once and kept: per-process utilization is read since the previous sample.
    let (mut probe, sample_every) = match sampling {
        Sampling::Nvml(every) => (Some(nvml::Probe::open()), every),
        Sampling::Off => (None, Duration::MAX),
    };
    let found = match &mut probe {
        Some(Ok(p)) => Some(p.sample()),
        Some(Err(reason)) => Some(nvml::Discovery::Unavailable {
            reason: reason.clone(),
        }),
        None => None,
    };
    let (gpus, nvml, driver) = match found {
        Some(nvml::Discovery::Available { driver, gpus }) => {
            let gpus: Vec<HostGpu> = gpus
                .into_iter()
                .map(|g| HostGpu {
                    index: g.index,
                    name: g.name,
                    memory_mib: g.memory_total_mib,
                    uuid: g.uuid,
                })
                .collect();
            (gpus, None, Some(driver))
        }
        Some(nvml::Discovery::Unavailable { reason }) => (Vec::new(), Some(reason), None),
        None => (Vec::new(), None, None),
    };
    agent.uuids = gpus
        .iter()
        .map(|g| (g.index.to_string(), g.uuid.clone()))
        .collect();
    say(FromAgent::Hello {
        protocol: PROTOCOL,
        info: HostInfo {
            hostname: hostname(),
            arch: std::env::consts::ARCH.to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            gpus,
            nvml,
            driver,
            runs: known,
            addresses: addresses(),
        },
    });
    // Gone without a status (killed outright, or the host rebooted).
    for (job, token) in vanished {
        say(FromAgent::Exited {
            job,
            token,
            exit: Exit::Unknown,
        });
    }
    let agent = Arc::new(Mutex::new(agent));
    let done = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    threads.push({
        let (agent, say, done) = (agent.clone(), say.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                std::thread::sleep(EXITS_EVERY);
                let Ok(mut a) = agent.lock() else { return };
                let now = a.started.elapsed().as_secs_f64();
                a.runs.kill_due(now);
                for (job, exit) in a.runs.exited() {
                    let token = a.tokens.get(&job).cloned().unwrap_or_default();
                    say(FromAgent::Exited { job, token, exit });
                }
            }
        })
    });
    // The logs of ended jobs, kept as the fleet file's `[logs]` says.
    if !retention.is_none() {
        let (done, dirs) = (done.clone(), dirs.clone());
        threads.push(std::thread::spawn(move || {
            every(retention.every(), &done, || {
                retention.sweep(&dirs.logs, &dirs.runs, std::time::SystemTime::now());
                true
            })
        }));
    }
    // The host's CPUs, memory and disk at the same pace, NVML or not (a CPU-only host is
    // drawn by these alone).
    if sample_every != Duration::MAX {
        let (say, done) = (say.clone(), done.clone());
        let mut usage = super::host_usage::Probe::new(&dirs.runs);
        threads.push(std::thread::spawn(move || {
            every(sample_every, &done, || {
                if let Some(usage) = usage.sample() {
                    say(FromAgent::Usage { usage });
                }
                true
            })
        }));
    }
    // Telemetry: an NVML sample every `sample_every`, with the process groups of the runs so
    // the daemon can tell its jobs' processes from foreign ones. None without NVML.
    if let Some(Ok(mut probe)) = probe {
        let (agent, say, done) = (agent.clone(), say.clone(), done.clone());
        threads.push(std::thread::spawn(move || {
            every(sample_every, &done, || {
                let found = probe.sample();
                let Ok(a) = agent.lock() else { return false };
                let groups: Vec<(u32, i64)> = a.runs.groups().map(|(j, g)| (g, j)).collect();
                drop(a);
                say(FromAgent::Sample { found, groups });
                true
            })
        }));
    }
    Ok(Running {
        agent,
        say,
        done,
        threads,
    })
}

impl Agent {
    fn run_file(&self, job: i64) -> PathBuf {
        self.runs_dir.join(format!("job-{job}.json"))
    }

    fn owns(&self, job: i64, token: &str) -> bool {
        self.tokens.get(&job).is_some_and(|t| t == token)
    }

    fn handle(&mut self, req: ToAgent) -> Option<FromAgent> {
        match req {
            ToAgent::Start(mut l) => {
                let (job, token) = (l.job, l.token.clone());
                if self.tokens.get(&job).is_some_and(|t| *t != token) {
                    // An earlier run of the same job the daemon has given up on.
                    self.runs.kill(job);
                    self.drop_files(job);
                }
                l.gpus = l
                    .gpus
                    .iter()
                    .map(|g| self.uuids.get(g).cloned().unwrap_or_else(|| g.clone()))
                    .collect();
                Some(match self.start(&l) {
                    Ok(pgid) => FromAgent::Started { job, token, pgid },
                    Err(why) => FromAgent::StartFailed { job, token, why },
                })
            }
            ToAgent::Stop {
                job,
                token,
                signal,
                grace_s,
            } => {
                if self.owns(job, &token) {
                    let sig = exec::signal_number(&signal).unwrap_or(libc::SIGTERM);
                    let now = self.started.elapsed().as_secs_f64();
                    self.runs.stop(job, sig, now + grace_s.max(0.0));
                }
                None
            }
            ToAgent::Kill { job, token } => {
                if self.owns(job, &token) {
                    self.runs.kill(job);
                }
                None
            }
            ToAgent::Forget { job, token } => {
                if self.owns(job, &token) {
                    self.runs.kill(job);
                    self.drop_files(job);
                    self.tokens.remove(&job);
                    self.runs.forget(job);
                }
                // The run's workdir copy, if it had one (also for a run the agent no longer
                // tracks: the copy may have landed after its end was recorded).
                if let Some(home) = std::env::var_os("HOME") {
                    let copy =
                        Path::new(&home).join(super::ssh::remote_workdir(&hostname(), job, &token));
                    let _ = std::fs::remove_dir_all(copy);
                }
                None
            }
            ToAgent::Logs { id, job, query } => Some(FromAgent::Logs {
                id,
                read: super::logs::read(&self.runs.log_dir, job, &query),
            }),
            ToAgent::Ping => Some(FromAgent::Pong),
        }
    }

    fn start(&mut self, l: &Launch) -> Result<u32, String> {
        let pgid = self.runs.launch(l)?;
        let dirs = AgentDirs {
            runs: self.runs_dir.clone(),
            logs: self.runs.log_dir.clone(),
        };
        let runtime = l.runtime.as_deref().filter(|_| l.image.is_some());
        if let Err(e) = record_run(&dirs, l.job, pgid, &l.token, runtime) {
            // A run the next agent could not find must not be left running.
            self.runs.kill(l.job);
            return Err(format!(
                "cannot record the run in {}: {e}",
                self.run_file(l.job).display()
            ));
        }
        self.tokens.insert(l.job, l.token.clone());
        Ok(pgid)
    }

    fn drop_files(&mut self, job: i64) {
        let _ = std::fs::remove_file(self.run_file(job));
        let _ = std::fs::remove_file(exec::exit_path(&self.runs.log_dir, job));
    }
}
