//! Backends: where GPUs come from and where jobs run. Built so far: the local host (real child
//! processes; GPUs through NVML when a driver is present), SSH hosts (the same local backend
//! run remotely by `gantry agent`, reached with the system `ssh`), Slurm clusters (each
//! node's part a batch job pinned to it; the cluster's own jobs are foreign work) and the
//! simulated fleet (a model, labelled so wherever it shows).
//!
//! The interface is `Runner`: the daemon hands it a `Launch` per node of a placement and
//! learns what happened from `RunEvent`s it polls. Every call returns at once: a remote
//! backend answers over a network that may be slow or gone, and the daemon's actor must never
//! wait on it. What a runner reports is keyed by the run's token, so an event from an earlier
//! run of the same job (a requeue that landed on the same host) is told apart from the
//! current one.

pub mod agent;
pub mod cloud;
mod cluster;
pub mod discover;
pub mod ec2;
pub mod enter;
pub mod error;

pub mod host_usage;
pub mod kube;
pub mod lambda;
pub mod local;
pub mod logs;
pub mod mounts;
pub mod notices;
pub mod registration;
pub mod registry;
pub mod retention;
pub mod sim;
pub mod slurm;
pub mod ssh;
pub mod wire;

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What opening a pool's runner needs from the daemon.
#[derive(Clone, Debug)]
pub struct Opening {
    /// Where this host's runs and their logs are kept (beside the journal).
    pub local: agent::AgentDirs,
    /// How this host's GPUs are sampled.
    pub sampling: agent::Sampling,
    /// What makes the simulated fleet's draws repeatable.
    pub seed: u64,
    /// The simulated fleet's node failures per node-hour.
    pub failures_per_node_hour: f64,
    /// How long each host keeps the logs of ended jobs (`[logs]`).
    pub retention: retention::Retention,
    /// Wakes the daemon when a run ends (this host's and SSH hosts' runners).
    pub wake: Wake,
    /// A what-if run's model of its jobs' work (`gantry sim`), for the simulated fleet's
    /// runners.
    pub work: Option<sim::WorkBook>,
}

/// Wakes the daemon when a backend has news that may start work — a run ended or failed to
/// start, a host answered — so what waits starts within milliseconds rather than at the next
/// clock step. The daemon sets it once; every runner holds a clone, across reloads.
///
/// Backends start with the state, before the daemon's actor sets what waking does: a wake
/// sent meanwhile (a Slurm pool read within milliseconds) is kept and delivered by `set`.
/// It was dropped, and a daemon whose clock steps hourly then looked at its first news an
/// hour late (CI, stop 80: `a_slurm_runs_end_starts_the_next_job_without_waiting_for_the_clock`).
#[derive(Clone, Default)]
pub struct Wake(std::sync::Arc<WakeInner>);

#[derive(Default)]
struct WakeInner {
    wake: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
    /// A wake came before `set`.
    early: std::sync::atomic::AtomicBool,
}

impl Wake {
    /// What waking does (the first call wins); a wake sent before is delivered now.
    pub fn set(&self, wake: impl Fn() + Send + Sync + 'static) {
        let _ = self.0.wake.set(Box::new(wake));
        self.deliver_early();
    }

    pub fn wake(&self) {
        if let Some(w) = self.0.wake.get() {
            w();
            return;
        }
        self.0
            .early
            .store(true, std::sync::atomic::Ordering::SeqCst);
        // `set` may have run between the look above and the store: then no one else
        // delivers it.
        self.deliver_early();
    }

    /// Sends a wake kept from before `set`, once (whichever of `set` and `wake` sees both
    /// the function and the flag).
    fn deliver_early(&self) {
        if let Some(w) = self.0.wake.get() {
            if self
                .0
                .early
                .swap(false, std::sync::atomic::Ordering::SeqCst)
            {
                w();
            }
        }
    }

    /// Queues `event` with `queue`, then wakes the daemon if it may let waiting work start:
    /// queued first, so that the daemon woken finds it.
    pub fn after(&self, event: RunEvent, queue: impl FnOnce(RunEvent)) {
        let news = Wake::is_news(&event);
        queue(event);
        if news {
            self.wake();
        }
    }

    /// Whether `event` may let waiting work start, or makes a run reachable (a service's
    /// replica takes traffic once its start is confirmed): a reason to wake, once queued.
    pub fn is_news(event: &RunEvent) -> bool {
        matches!(
            event,
            RunEvent::Started { .. }
                | RunEvent::Exited { .. }
                | RunEvent::StartFailed { .. }
                | RunEvent::Vanished { .. }
                | RunEvent::Up { .. }
        )
    }
}

impl std::fmt::Debug for Wake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.wake.get().is_some() {
            "Wake(set)"
        } else {
            "Wake(unset)"
        })
    }
}

/// The provisioner of a pool whose nodes are bought and given back (elastic capacity), or
/// `None` where the nodes are simply there (this host, SSH hosts): as its backend builds it
/// (`registry`): the simulated clouds', EC2's, Lambda's. `nodes` are the pool's node slots by name (its maximum), `now` the daemon's clock at
/// open. The error says why a real cloud's cannot start (its credentials), at the pool.
pub fn provisioner_for(
    p: &crate::config::fleet::PoolConfig,
    index: usize,
    nodes: &[String],
    opening: &Opening,
    now: f64,
) -> Result<Option<Box<dyn Provisioner>>, error::OpenError> {
    registry::of_pool(p)
        .provisioner
        .map(|make| make(p, index, nodes, opening, now))
        .transpose()
        .map_err(|why| error::OpenError::at(p, registry::from_a_cloud(p), why))
}

/// What a provisioner reports about a node of its pool (`host`: its index in the pool).
#[derive(Clone, Debug, PartialEq)]
pub enum NodeEvent {
    /// A node bought is up.
    Ready(usize),
    /// The provider takes a spot node back in `gone_in_s`: its jobs should checkpoint now.
    SpotNotice { host: usize, gone_in_s: f64 },
    /// Taken back by the provider.
    Gone(usize),
    /// Failed: in repair (`repair`, a reserved node) or terminated.
    Failed { host: usize, repair: bool },
    /// Back from repair.
    Repaired(usize),
    /// What the provider did on the way, for the event log: a zone without capacity and the
    /// next tried, an instance adopted or swept (`host`: the node it is about, if any).
    Said { host: Option<usize>, what: String },
    /// The node could not be bought (no capacity anywhere the pool tries, a quota, wrong
    /// settings): it stays absent and the pool is passed over for a while, so the planner
    /// buys elsewhere.
    Unavailable { host: usize, why: String },
}

/// Where elastic capacity comes from: buys and gives back a pool's nodes, and says what
/// happens to them. Times are the daemon's clock (a real cloud reports what it saw; the
/// simulated one has no other clock).
pub trait Provisioner: Send {
    /// Asks for node slot `host`; the answer is the expected seconds until it is ready.
    fn buy(&mut self, host: usize, now: f64) -> f64;
    /// Gives node `host` back (nothing more is said about it until it is bought again).
    fn give_back(&mut self, host: usize, now: f64);
    /// What happened up to `until`, each event at its own time, in time order.
    fn poll(&mut self, until: f64) -> Vec<(f64, NodeEvent)>;
    /// How node `host` is reached once it is ready (an `ssh` destination), for pools whose
    /// nodes are real machines; `None` for the simulated ones.
    fn entry(&self, _host: usize) -> Option<String> {
        None
    }
    /// Whether its nodes are real machines, paid while they exist: reached through the
    /// pool's runner once ready (`entry`), and given back when they cannot be reached.
    fn machines(&self) -> bool {
        false
    }
    /// The pool left the fleet file: every machine it bought is given back, in the background
    /// (nothing else would ever end them); the daemon keeps polling what it says.
    fn retire(&mut self) {}
    /// Retired, and none of what it bought is left (its journal record may go).
    fn retired(&self) -> bool {
        false
    }
}

/// The runner of a pool of the fleet file, as its backend builds it (`registry`). `nodes` are
/// the fleet's names for the pool's nodes, host order. The error names the pool and its kind.
pub fn runner_for(
    p: &crate::config::fleet::PoolConfig,
    index: usize,
    nodes: Vec<String>,
    opening: &Opening,
) -> Result<Box<dyn Runner>, error::OpenError> {
    (registry::of_pool(p).runner)(p, index, nodes, opening)
        .map_err(|why| error::OpenError::at(p, registry::from_a_cloud(p), why))
}

/// How an SSH or EC2 pool's hosts are reached.
pub(crate) fn ssh_options(
    p: &crate::config::fleet::PoolConfig,
    opening: &Opening,
) -> ssh::SshOptions {
    let reach = p.ssh.clone().unwrap_or_default();
    ssh::SshOptions {
        retention: opening.retention,
        wake: opening.wake.clone(),
        identity_file: reach.identity_file.as_deref().map(expand_home),
        config_file: reach.config.as_deref().map(expand_home),
        jump: reach.jump_host,
        connect_timeout: std::time::Duration::from_secs(10),
        // Half the time the pool waits before it gives a host up, so a silent agent is
        // seen down well before it is lost; never under 5 s (an agent busy starting runs
        // is not silent), never over 15 s.
        silent_after: std::time::Duration::from_secs_f64((p.lost_after_s() / 2.0).clamp(5.0, 15.0)),
        // Only a spot instance is told of its end ahead (EC2's metadata service).
        notices: p
            .ec2
            .as_ref()
            .filter(|_| p.capacity == crate::model::CapacityType::Spot)
            .map(|e| {
                e.metadata_url
                    .clone()
                    .unwrap_or_else(|| notices::IMDS.to_string())
            }),
    }
}

/// `~/x` → `$HOME/x`.
pub fn expand_home(p: &str) -> std::path::PathBuf {
    match (p.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => std::path::Path::new(&home).join(rest),
        _ => std::path::PathBuf::from(p),
    }
}

pub use local::exec::Exit;
/// What a host's GPUs look like in a sample (NVML's view, as every real backend reports it).
pub use local::nvml::{Discovery, GpuProcess, GpuSample, MigInstance};

/// The fleet file with its `gpu = "auto"` pools filled in from this host's NVML (and what was
/// done, to be said once), and its local pools' `tools` (for `file_mounts`) from this host's
/// PATH where the file does not declare them; the file as it is when it has neither. SSH
/// pools' GPUs are filled in as their hosts answer, Kubernetes and Slurm pools' when the state
/// opens (`discover::expand`).
pub fn discover_auto(
    cfg: &crate::config::fleet::FleetConfig,
) -> (crate::config::fleet::FleetConfig, Vec<String>) {
    let mut c = cfg.clone();
    let mut said = Vec::new();
    if crate::config::fleet::wants_discovery(cfg) {
        said = discover::apply_discovery(&mut c, &local::nvml::discover());
    }
    // A local pool is this host: what it has for `file_mounts` is known without asking.
    if c.pools.iter().any(|p| p.is_local() && p.tools.is_none()) {
        let here = mounts::tools_here();
        for p in c
            .pools
            .iter_mut()
            .filter(|p| p.is_local() && p.tools.is_none())
        {
            p.tools = Some(here.clone());
        }
    }
    (c, said)
}

/// One node's part of a job, as a backend starts it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Launch {
    pub job: i64,
    /// A secret of this run alone (`GANTRY_RUN_TOKEN`): proves a process is the run's.
    pub token: String,
    /// The job's name, and its time limit: what a scheduler-backed backend asks for (a
    /// batch system's job name and `--time`), and what the simulated one models a run by.
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub time_limit_s: Option<f64>,
    pub setup: Option<String>,
    pub run: String,
    pub workdir: Option<String>,
    /// The local sources of the job's `file_mounts` (paths on the daemon's machine), which
    /// setup copies from `$GANTRY_MOUNTS_FROM` + the path (`mounts`): what a backend whose
    /// nodes do not see the daemon's files ships with the run, as it ships the workdir.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_mounts: Vec<String>,
    /// Where the job's `file_mounts` mount buckets: unmounted by the runner when the run is
    /// over however it ended (a SIGKILL leaves no shell to do it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mount_points: Vec<String>,
    pub envs: BTreeMap<String, String>,
    /// What `CUDA_VISIBLE_DEVICES` names: GPU UUIDs, or indices on a host that maps them.
    pub gpus: Vec<String>,
    pub checkpoint_dir: Option<String>,
    /// The container image to run in (`image_id: docker:…`; only pools that run images get
    /// such jobs): a Kubernetes pool's image otherwise.
    #[serde(default)]
    pub image: Option<String>,
    /// The container runtime of the host's pool (`container_runtime`: docker or podman) that
    /// runs `image` on a local or SSH host.
    #[serde(default)]
    pub runtime: Option<String>,
    /// Work that exists already in the backend and waits for gantry to place it (a pod
    /// created with `schedulerName: gantry`): placed, not started (`spec.adopt`).
    #[serde(default)]
    pub adopt: Option<String>,
    /// This node's place in a multi-node job.
    pub gang: Gang,
    /// The job's owner: the Unix account its processes run as where the runner starts them
    /// as someone else (a root agent); `None`: nobody, and a root agent starts nothing.
    #[serde(default)]
    pub owner: Option<String>,
}

/// Where a node stands in its job: rank 0 is the head. `ips` lists every node's address,
/// head first, as distributed launchers want them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Gang {
    pub rank: u16,
    pub ips: Vec<String>,
}

impl Default for Gang {
    fn default() -> Self {
        Gang {
            rank: 0,
            ips: vec!["127.0.0.1".to_string()],
        }
    }
}

/// What every backend puts in a node's part's environment besides the job's own `envs`: the
/// job's id, the run's token, the part's GPU count, the checkpoint directory, and its place in
/// the gang (`Gang::env`).
pub fn part_env(
    job: i64,
    token: &str,
    gpus: usize,
    checkpoint_dir: Option<&str>,
    gang: &Gang,
) -> Vec<(&'static str, String)> {
    let mut env = vec![
        ("GANTRY_JOB_ID", job.to_string()),
        ("GANTRY_RUN_TOKEN", token.to_string()),
        ("GANTRY_NUM_GPUS", gpus.to_string()),
    ];
    if let Some(d) = checkpoint_dir {
        env.push(("GANTRY_CHECKPOINT_DIR", d.to_string()));
    }
    env.extend(gang.env(gpus));
    env
}

impl Gang {
    /// The environment a distributed launcher reads, in gantry's names and SkyPilot's (so
    /// `torchrun` recipes written for SkyPilot run unchanged). `gpus` is the GPUs per node.
    pub fn env(&self, gpus: usize) -> Vec<(&'static str, String)> {
        let ips = self.ips.join("\n");
        let n = self.ips.len().to_string();
        let head = self.ips.first().cloned().unwrap_or_default();
        vec![
            ("GANTRY_NODE_RANK", self.rank.to_string()),
            ("GANTRY_NUM_NODES", n.clone()),
            ("GANTRY_NODE_IPS", ips.clone()),
            ("GANTRY_HEAD_IP", head),
            ("SKYPILOT_NODE_RANK", self.rank.to_string()),
            ("SKYPILOT_NUM_NODES", n),
            ("SKYPILOT_NODE_IPS", ips),
            ("SKYPILOT_NUM_GPUS_PER_NODE", gpus.to_string()),
        ]
    }
}

/// A GPU as a host's NVML reported it (or as the fleet file declared it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostGpu {
    pub index: u32,
    pub name: String,
    pub memory_mib: u64,
    pub uuid: String,
}

/// What a host said about itself when its backend (re)connected.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HostInfo {
    pub hostname: String,
    pub arch: String,
    /// The agent's gantry version.
    pub version: String,
    pub gpus: Vec<HostGpu>,
    /// Why NVML is not there (the GPUs are then as declared, not measured).
    pub nvml: Option<String>,
    pub driver: Option<String>,
    /// The runs the host still has: (job, token). Running, or ended and not yet forgotten.
    pub runs: Vec<(i64, String)>,
    /// Its IP addresses, the one the daemon reached it at first (`SSH_CONNECTION`'s server
    /// address), then its interfaces' (not loopback): what a gang's peers are told
    /// (`GANTRY_HEAD_IP`, `SKYPILOT_NODE_IPS`), rather than an ssh alias they may not resolve.
    #[serde(default)]
    pub addresses: Vec<String>,
}

/// One GPU of a job as a simulated backend models it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Modelled {
    pub util_pct: f64,
    /// Of the memory the job reserves on the GPU, the share in use (0 to 1).
    pub memory_used: f64,
}

/// Work a backend's own users asked gantry to place (pods created with `schedulerName:
/// gantry`): the job file gantry queues for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Wanted {
    /// What it is, as its `adopt` says (`pod NAMESPACE/NAME`).
    pub key: String,
    /// The job file (YAML) for it.
    pub spec: String,
    pub team: String,
    pub priority: Option<String>,
}

/// What a runner reports. `host` is the node's index within the runner's pool.
#[derive(Clone, Debug, PartialEq)]
pub enum RunEvent {
    Started {
        host: usize,
        job: i64,
        token: String,
        /// Its process group there (none on the simulated fleet, which runs no processes).
        pgid: Option<u32>,
        /// What the backend calls the run there, where it names it: `pod NS/NAME`, `Slurm
        /// job 123`; shown with the job on the GPUs it holds.
        handle: Option<String>,
    },
    StartFailed {
        host: usize,
        job: i64,
        token: String,
        why: String,
    },
    /// The work a backend's user gave gantry to place (a pod) was gone when gantry went to
    /// start it (`what`: `pod NS/NAME`): the job goes as it would have before it was placed.
    Vanished {
        host: usize,
        job: i64,
        token: String,
        what: String,
    },
    Exited {
        host: usize,
        job: i64,
        token: String,
        exit: Exit,
        /// When, on the daemon's clock, where the backend knows it (the simulated one ends a
        /// run at its own time however long the daemon's step); else when it is reported.
        at: Option<f64>,
    },
    /// The host is reachable (again); what it runs is in `info.runs`.
    Up { host: usize, info: HostInfo },
    /// The cloud told the host it will be taken back in `gone_in_s` (a spot interruption read
    /// from the instance's metadata by its agent), or warned that it may be (`None`).
    Notice {
        host: usize,
        what: String,
        gone_in_s: Option<f64>,
    },
    /// The host cannot be reached or its agent stopped; it is retried.
    Down { host: usize, why: String },
    /// Telemetry: the host's GPUs as NVML measured them, and the process group of each run
    /// there, (pgid, job), to tell the jobs' processes from foreign ones.
    Sample {
        host: usize,
        found: local::nvml::Discovery,
        groups: Vec<(u32, i64)>,
    },
    /// Telemetry: the host's CPUs, memory and disk as its agent measured them.
    Usage {
        host: usize,
        usage: host_usage::HostUsage,
    },
    /// The work on `host` that its scheduler placed and gantry did not (a Slurm cluster's own
    /// jobs), holding GPUs gantry must not allocate: all of it, each time it changes.
    Foreign { host: usize, work: Vec<ForeignWork> },
    /// Something the backend could not do that the event log should say (a cancel its
    /// scheduler refused).
    Failed { host: usize, why: String },
    /// The backend's own scheduler takes no new work on `host` (`Some(why)`: a Slurm node
    /// drained) or takes it again (`None`); what runs there keeps running.
    Cordon { host: usize, why: Option<String> },
    /// All the work the pool's users ask gantry to place now (each time it changes): what is
    /// new is queued, what is gone and not yet placed is cancelled.
    Wanted { work: Vec<Wanted> },
    /// The backend's scheduler holds a part gantry started there back (a Slurm job pending),
    /// and why in gantry's words; `None` once it no longer does.
    Waits {
        host: usize,
        job: i64,
        token: String,
        why: Option<String>,
    },
    /// The work the backend's own users queued for the pool's nodes that waits there (a
    /// Slurm partition's pending jobs), with its scheduler's reasons: all of it, each time
    /// it changes.
    Queue { waiting: Vec<ForeignWaiting> },
}

pub use crate::api::ForeignWaiting;

/// Work a backend's own scheduler runs on a node beside gantry's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignWork {
    /// What it is, for events (`Slurm job 12 "train" of alice, account ml`).
    pub what: String,
    /// The GPUs it holds there.
    pub gpus: u32,
}

/// Where jobs run: one per pool. Every method returns at once; outcomes come back from `poll`.
pub trait Runner: Send {
    /// What the daemon's events about this backend are filed under (`local`, `ssh`, `sim`).
    fn kind(&self) -> &'static str;
    /// Whether the backend is a model (the simulated fleet): its telemetry is modelled, not
    /// measured (and labelled so); its runs end with the daemon, so none are journaled for
    /// re-adoption; its nodes need no connection and no first sample before they take work.
    fn simulated(&self) -> bool {
        false
    }
    /// Whether its runs are processes this daemon's own process starts on its own host (so
    /// they run as its user unless it switches to the job's owner): what a root daemon starts
    /// nothing on for a caller it cannot name.
    fn on_daemon_host(&self) -> bool {
        false
    }
    /// The address the other nodes of a job reach `host` at.
    fn address(&self, host: usize) -> String;
    /// Starts one node's part of a job on `host`.
    fn start(&mut self, host: usize, launch: Launch);
    /// Sends `signal` (a name: SIGTERM, SIGUSR1…) to the run; SIGKILL after `grace_s`.
    fn stop(&mut self, host: usize, job: i64, token: &str, signal: &str, grace_s: f64);
    /// Kills the run at once (only processes provably the run's).
    fn kill(&mut self, host: usize, job: i64, token: &str);
    /// The run's end is recorded: the host may forget it (its logs stay).
    fn forget(&mut self, host: usize, job: i64, token: &str);
    /// What happened since the last poll, up to `now` on the daemon's clock (real backends
    /// report what they saw; the simulated one has no other clock).
    fn poll(&mut self, now: f64) -> Vec<RunEvent>;
    /// Node `host` is now at `entry` (an `ssh` destination: a cloud node just bought, or
    /// adopted): connect to it. Only runners of pools whose nodes are bought take one.
    fn attach(&mut self, host: usize, entry: &str) -> Result<(), String> {
        let _ = (host, entry);
        Err(format!(
            "the {} backend has no nodes to attach",
            self.kind()
        ))
    }
    /// Node `host` is gone (given back, taken back): stop reaching for it.
    fn detach(&mut self, _host: usize) {}
    /// The command, run on the daemon's host, that becomes `argv` (a shell when empty) inside
    /// `job`'s run on `host`, in its environment and working directory (`backend::enter`);
    /// `tty`: the daemon gives it a terminal. Backends that cannot reach into a run say why.
    fn enter(
        &self,
        host: usize,
        job: i64,
        tty: bool,
        argv: &[String],
    ) -> Result<std::process::Command, String> {
        let _ = (host, job, tty, argv);
        Err(format!(
            "gantry exec reaches jobs on this host (local), SSH and cloud hosts, Slurm and Kubernetes; the {} backend is not one of them",
            self.kind()
        ))
    }
    /// Reads runs' logs on the pool's nodes, from any thread.
    fn logs(&self) -> std::sync::Arc<dyn logs::LogReader>;
    /// The hosts known, without asking over a network, to keep logs of `job` (after a
    /// restart the daemon no longer knows where an ended job ran).
    fn logs_of(&self, _job: i64) -> Vec<usize> {
        Vec::new()
    }
    /// What a simulated backend models for one GPU of `job` (started at `started`) at time
    /// `at`: utilization, percent, and the share of the memory the job reserves there that it
    /// uses. `gpu` tells the job's GPUs apart (each varies on its own). Real backends measure
    /// instead (their `Sample` events) and answer `None`.
    fn modelled_gpu(&self, _job: i64, _gpu: u32, _started: f64, _at: f64) -> Option<Modelled> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    /// A backend's news sent before the daemon listens is delivered when it does, once.
    #[test]
    fn a_wake_sent_before_the_daemon_listens_is_delivered_once_it_does() {
        let wake = Wake::default();
        let runner = wake.clone();
        runner.after(
            RunEvent::Down {
                host: 0,
                why: "not news".into(),
            },
            |_| {},
        );
        runner.wake();
        runner.wake();
        let woken = Arc::new(AtomicUsize::new(0));
        let w = woken.clone();
        wake.set(move || {
            w.fetch_add(1, Ordering::SeqCst);
        });
        assert_eq!(woken.load(Ordering::SeqCst), 1, "the early wakes, as one");
        runner.wake();
        assert_eq!(woken.load(Ordering::SeqCst), 2);
        // Nothing kept from before is sent again.
        wake.set(|| {});
        assert_eq!(woken.load(Ordering::SeqCst), 2);
    }

    /// A wake racing the set is delivered exactly once, whichever comes first.
    #[test]
    fn wakes_racing_the_set_are_never_all_lost() {
        for _ in 0..200 {
            let wake = Wake::default();
            let runner = wake.clone();
            let t = std::thread::spawn(move || runner.wake());
            let woken = Arc::new(AtomicUsize::new(0));
            let w = woken.clone();
            wake.set(move || {
                w.fetch_add(1, Ordering::SeqCst);
            });
            t.join().unwrap();
            assert_eq!(woken.load(Ordering::SeqCst), 1);
        }
    }
}
