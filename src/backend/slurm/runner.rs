//! A Slurm pool as a `Runner`: each node's part of a gantry job is a batch job pinned to that
//! node (`batch::sbatch`), followed through slurmrestd's queue; the cluster's own jobs are
//! foreign work holding GPUs. A worker thread does every network and command call, so the
//! daemon's calls return at once; what it learns waits in a queue `poll` drains.
//!
//! A run is identified on the cluster by its comment (`gantry:JOB:TOKEN:RANK`): after a daemon
//! restart the runs still queued or running are reported in each node's `Up`, and the daemon
//! re-adopts them (or stops the ones it gave up on).

use super::batch::{self, Submit};
use super::inventory::{Inventory, Job};
use super::rest::SlurmRest;
use crate::backend::cluster::NodeReports;
use crate::backend::logs::{DirReader, LogQuery, LogRead, LogReader};
use crate::backend::{Exit, ForeignWaiting, ForeignWork, HostInfo, Launch, RunEvent, Runner};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often the queue is read.
const REFRESH: Duration = Duration::from_secs(1);

/// Pending reasons Slurm will not get over by waiting: the part is cancelled and the start
/// failed with the reason.
/// (A partition down or inactive is not among them: an administrator brings it back; the
/// part waits, said, and the pool's nodes are cordoned meanwhile.)
const HOPELESS: [&str; 7] = [
    "BadConstraints",
    "InvalidAccount",
    "InvalidQOS",
    "PartitionTimeLimit",
    "PartitionNodeLimit",
    "DependencyNeverSatisfied",
    "AccountNotAllowed",
];

enum Cmd {
    Start(usize, Box<Launch>),
    Stop {
        host: usize,
        job: i64,
        token: String,
        signal: String,
        grace_s: f64,
    },
    Kill {
        host: usize,
        job: i64,
        token: String,
    },
    Forget {
        host: usize,
        job: i64,
        token: String,
    },
}

pub struct SlurmPool {
    nodes: Vec<String>,
    tx: Sender<Cmd>,
    events: Arc<Mutex<Vec<RunEvent>>>,
    logs: Arc<SlurmLogs>,
}

impl SlurmPool {
    /// The pool's runner; it connects in the background (an unreachable slurmrestd is said
    /// in `Down` events, and retried).
    pub fn open(
        p: &crate::config::fleet::PoolConfig,
        nodes: Vec<String>,
        logs: &std::path::Path,
        wake: crate::backend::Wake,
    ) -> SlurmPool {
        let (tx, rx) = channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let user = p
            .slurm_user
            .clone()
            .or_else(|| std::env::var("USER").ok())
            .or_else(|| std::env::var("LOGNAME").ok());
        let mut worker = Worker::new(
            p.slurmrestd.clone().unwrap_or_default(),
            user,
            std::env::var("SLURM_JWT").ok().filter(|t| !t.is_empty()),
            Submit {
                partition: p.partition.clone(),
                gpus_per_node: usize::from(p.gpus_per_node),
                logs: logs.to_path_buf(),
            },
            nodes.clone(),
            events.clone(),
        );
        worker.wake = wake;
        std::thread::Builder::new()
            .name(format!("slurm-{}", p.name))
            .spawn(move || worker.run(rx))
            .expect("spawn the Slurm worker thread");
        SlurmPool {
            logs: Arc::new(SlurmLogs {
                root: logs.to_path_buf(),
                nodes: nodes.clone(),
            }),
            nodes,
            tx,
            events,
        }
    }
}

impl Runner for SlurmPool {
    fn kind(&self) -> &'static str {
        "slurm"
    }
    fn address(&self, host: usize) -> String {
        self.nodes.get(host).cloned().unwrap_or_default()
    }
    fn start(&mut self, host: usize, launch: Launch) {
        let _ = self.tx.send(Cmd::Start(host, Box::new(launch)));
    }
    fn stop(&mut self, host: usize, job: i64, token: &str, signal: &str, grace_s: f64) {
        let _ = self.tx.send(Cmd::Stop {
            host,
            job,
            token: token.to_string(),
            signal: signal.to_string(),
            grace_s,
        });
    }
    fn kill(&mut self, host: usize, job: i64, token: &str) {
        let _ = self.tx.send(Cmd::Kill {
            host,
            job,
            token: token.to_string(),
        });
    }
    fn forget(&mut self, host: usize, job: i64, token: &str) {
        let _ = self.tx.send(Cmd::Forget {
            host,
            job,
            token: token.to_string(),
        });
    }
    fn poll(&mut self, _now: f64) -> Vec<RunEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
    fn enter(
        &self,
        host: usize,
        job: i64,
        tty: bool,
        argv: &[String],
    ) -> Result<std::process::Command, String> {
        let node = self
            .nodes
            .get(host)
            .ok_or_else(|| format!("no node {host} in this pool"))?;
        super::batch::srun(
            &super::batch::enter_path(&self.logs.root, node, job),
            tty,
            argv,
        )
    }
    fn logs(&self) -> Arc<dyn LogReader> {
        self.logs.clone()
    }
    fn logs_of(&self, job: i64) -> Vec<usize> {
        (0..self.nodes.len())
            .filter(|&h| {
                let dir = batch::node_log_dir(&self.logs.root, &self.nodes[h]);
                crate::backend::logs::log_path(&dir, job, crate::backend::logs::Stream::Out)
                    .exists()
            })
            .collect()
    }
}

/// The runs' output files, where the daemon can read them (a filesystem the nodes share with
/// the daemon's host, as Slurm sites have).
struct SlurmLogs {
    root: PathBuf,
    nodes: Vec<String>,
}

impl LogReader for SlurmLogs {
    fn read(&self, host: usize, job: i64, q: &LogQuery, w: Duration) -> Result<LogRead, String> {
        let node = self.nodes.get(host).ok_or("no such node")?;
        DirReader(batch::node_log_dir(&self.root, node)).read(host, job, q, w)
    }
}

/// One node's part, as the worker follows it.
struct Run {
    /// Slurm's job id.
    slurm: u64,
    started: bool,
    /// Reported ended (or failed to start): nothing more is said about it.
    ended: bool,
    /// When the grace of a stop runs out: the job is cancelled then.
    cancel_at: Option<Instant>,
    /// Why Slurm holds it pending, as last said.
    waits: Option<String>,
}

impl Run {
    /// Slurm job `slurm`, not seen running yet.
    fn new(slurm: u64) -> Run {
        Run {
            slurm,
            started: false,
            ended: false,
            cancel_at: None,
            waits: None,
        }
    }
}

type RunKey = (usize, i64, String);

struct Worker {
    url: String,
    user: Option<String>,
    token: Option<String>,
    submit: Submit,
    nodes: Vec<String>,
    rest: Option<SlurmRest>,
    runs: HashMap<RunKey, Run>,
    /// What was last said of each node.
    reports: NodeReports,
    /// The cluster's own jobs waiting for the pool's nodes, as last said.
    queue: Vec<ForeignWaiting>,
    out: Arc<Mutex<Vec<RunEvent>>>,
    /// Wakes the daemon when a run ends or a node answers (events are queued first).
    wake: crate::backend::Wake,
}

impl Worker {
    fn new(
        url: String,
        user: Option<String>,
        token: Option<String>,
        submit: Submit,
        nodes: Vec<String>,
        out: Arc<Mutex<Vec<RunEvent>>>,
    ) -> Worker {
        Worker {
            url,
            user,
            token,
            submit,
            rest: None,
            runs: HashMap::new(),
            reports: NodeReports::new(nodes.len()),
            queue: Vec::new(),
            nodes,
            out,
            wake: crate::backend::Wake::default(),
        }
    }

    fn run(mut self, rx: Receiver<Cmd>) {
        let mut next = Instant::now();
        loop {
            match rx.recv_timeout(next.saturating_duration_since(Instant::now())) {
                Ok(cmd) => self.command(cmd),
                Err(RecvTimeoutError::Timeout) => {
                    self.refresh();
                    next = Instant::now() + REFRESH;
                }
                // The daemon let the pool go (a reload or its end).
                Err(RecvTimeoutError::Disconnected) => return,
            }
        }
    }

    fn emit(&self, e: RunEvent) {
        self.wake.after(e, |e| {
            self.out.lock().unwrap_or_else(|p| p.into_inner()).push(e)
        });
    }

    fn command(&mut self, cmd: Cmd) {
        let mut out = Vec::new();
        match cmd {
            Cmd::Start(host, l) => {
                let key = (host, l.job, l.token.clone());
                let node = self.nodes[host].clone();
                match batch::sbatch(&self.submit, &node, &l) {
                    Ok(id) => {
                        self.runs.insert(key, Run::new(id));
                    }
                    Err(why) => self.emit(RunEvent::StartFailed {
                        host,
                        job: l.job,
                        token: l.token,
                        why: format!("Slurm refused it: {why}"),
                    }),
                }
            }
            Cmd::Stop {
                host,
                job,
                token,
                signal,
                grace_s,
            } => {
                if let Some(r) = self.runs.get_mut(&(host, job, token)) {
                    let id = r.slurm;
                    if r.started {
                        out.push((host, id, batch::scancel(id, Some(&signal))));
                        r.cancel_at =
                            Some(Instant::now() + Duration::from_secs_f64(grace_s.max(0.0)));
                    } else {
                        out.push((host, id, batch::scancel(id, None)));
                    }
                }
            }
            Cmd::Kill { host, job, token } => {
                if let Some(id) = self.runs.get(&(host, job, token)).map(|r| r.slurm) {
                    out.push((host, id, batch::scancel(id, None)));
                }
            }
            Cmd::Forget { host, job, token } => {
                self.runs.remove(&(host, job, token));
            }
        }
        self.said(out);
    }

    /// A cancel Slurm refused goes to the event log (the job's own end, or its staying, is
    /// what the daemon's state follows).
    fn said(&self, done: Vec<(usize, u64, Result<(), String>)>) {
        for (host, id, r) in done {
            if let Err(why) = r {
                self.emit(RunEvent::Failed {
                    host,
                    why: format!("cancelling Slurm job {id}: {why}"),
                });
            }
        }
    }

    /// Reads the cluster; says what changed.
    fn refresh(&mut self) {
        let inv = match self.read() {
            Ok(inv) => inv,
            Err(why) => {
                for host in 0..self.nodes.len() {
                    self.say_status(host, Err(why.clone()), None);
                }
                return;
            }
        };
        let by_id: HashMap<u64, &Job> = inv.jobs.iter().map(|j| (j.id, j)).collect();
        let by_name: HashMap<&str, &super::inventory::Node> =
            inv.nodes.iter().map(|n| (n.name.as_str(), n)).collect();
        let seen = Seen::of(&inv);
        let closed = super::queue::partition_closed(&inv, self.submit.partition.as_deref());
        for host in 0..self.nodes.len() {
            let name = self.nodes[host].clone();
            let said = |n: &super::inventory::Node| {
                format!(
                    "Slurm says node {name} is {}{}",
                    n.state,
                    if n.reason.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", n.reason)
                    }
                )
            };
            let (status, cordon) = match by_name.get(name.as_str()) {
                None => (Err(format!("Slurm has no node {name}")), None),
                Some(n) if n.state.contains("down") || n.state.contains("not_responding") => {
                    (Err(said(n)), None)
                }
                // Drained, failing, in maintenance: what runs there goes on, nothing new.
                Some(n) if !n.usable() => (Ok(()), Some(said(n))),
                Some(_) => (Ok(()), closed.clone()),
            };
            let up = status.is_ok();
            self.say_status(host, status, Some(&seen));
            if let Some(e) = up.then(|| self.reports.cordon(host, cordon)).flatten() {
                self.emit(e);
            }
        }
        self.follow_runs(&by_id);
        self.say_foreign(&inv);
        let waiting = super::queue::waiting(&inv, &self.nodes);
        if waiting != self.queue {
            self.queue = waiting.clone();
            self.emit(RunEvent::Queue { waiting });
        }
    }

    fn read(&mut self) -> Result<Inventory, String> {
        if self.rest.is_none() {
            self.rest = Some(SlurmRest::connect(
                &self.url,
                self.user.clone(),
                self.token.clone(),
            )?);
        }
        let rest = self.rest.as_mut().ok_or("not connected")?;
        rest.inventory().inspect_err(|_| {
            // Reconnect (and detect the version again) next time: it may have been upgraded.
            self.rest = None;
        })
    }

    /// `Up` (with the runs gantry has there) when a node becomes reachable, `Down` when it
    /// stops being so or the reason changes.
    fn say_status(&mut self, host: usize, now: Result<(), String>, seen: Option<&Seen>) {
        if !self.reports.status_changed(host, &now) {
            return;
        }
        match (now, seen) {
            (Ok(()), Some(seen)) => {
                let (name, inv) = (&self.nodes[host], seen.inv);
                let mut runs = Vec::new();
                for (job, token, id) in seen.ours.get(name.as_str()).into_iter().flatten() {
                    // Followed from now on (a run from before a restart is re-adopted).
                    self.runs
                        .entry((host, *job, token.clone()))
                        .or_insert(Run::new(*id));
                    runs.push((*job, token.clone()));
                }
                let release = inv.slurm.clone().unwrap_or_else(|| "?".into());
                let info = HostInfo {
                    hostname: name.clone(),
                    arch: format!("Slurm {release} via slurmrestd {}", inv.api),
                    version: env!("CARGO_PKG_VERSION").into(),
                    gpus: Vec::new(),
                    nvml: Some("Slurm reports no GPU telemetry".into()),
                    driver: None,
                    runs,
                    addresses: Vec::new(),
                };
                let said = self.reports.up(
                    host,
                    info,
                    Some("Slurm reports no GPU telemetry (GPUs as its GRES and the fleet file declare)"),
                );
                for e in said {
                    self.emit(e);
                }
            }
            (Err(why), _) => self.emit(RunEvent::Down { host, why }),
            (Ok(()), None) => {}
        }
    }

    /// Each followed run's state as Slurm has it now.
    fn follow_runs(&mut self, by_id: &HashMap<u64, &Job>) {
        let mut events = Vec::new();
        let mut cancel: Vec<(usize, u64)> = Vec::new();
        for ((host, job, token), r) in self.runs.iter_mut().filter(|(_, r)| !r.ended) {
            let (id, host, job, token) = (r.slurm, *host, *job, token.clone());
            if r.cancel_at.is_some_and(|t| Instant::now() >= t) {
                r.cancel_at = None;
                cancel.push((host, id));
            }
            match by_id.get(&id) {
                Some(j) if j.running() => {
                    if !r.started {
                        r.started = true;
                        events.push(RunEvent::Started {
                            host,
                            job,
                            token,
                            pgid: None,
                            handle: Some(format!("Slurm job {id}")),
                        });
                    }
                }
                Some(j) if j.pending() => {
                    if HOPELESS.contains(&j.reason_code.as_str()) {
                        r.ended = true;
                        cancel.push((host, id));
                        events.push(RunEvent::StartFailed {
                            host,
                            job,
                            token,
                            why: format!("Slurm job {id} cannot start: {}", j.reason),
                        });
                    } else {
                        // Held back (a reason other than the moment's scheduling pass):
                        // said while it lasts, so the job says why it has not started.
                        let said = r.waits.is_some() || j.reason_code != "Resources";
                        let why = (!j.reason.is_empty() && said)
                            .then(|| format!("Slurm job {id} pending: {}", j.reason));
                        if why != r.waits {
                            r.waits = why.clone();
                            events.push(RunEvent::Waits {
                                host,
                                job,
                                token,
                                why,
                            });
                        }
                    }
                }
                Some(j) => {
                    r.ended = true;
                    let exit = exit_of(j);
                    if r.started || j.start_time > 0 {
                        if !r.started {
                            events.push(RunEvent::Started {
                                host,
                                job,
                                token: token.clone(),
                                pgid: None,
                                handle: Some(format!("Slurm job {id}")),
                            });
                        }
                        events.push(RunEvent::Exited {
                            host,
                            job,
                            token,
                            exit,
                            at: None,
                        });
                    } else {
                        events.push(RunEvent::StartFailed {
                            host,
                            job,
                            token,
                            why: format!(
                                "Slurm job {id} ended before it ran ({}{})",
                                j.state,
                                if j.reason.is_empty() {
                                    String::new()
                                } else {
                                    format!(": {}", j.reason)
                                }
                            ),
                        });
                    }
                }
                None => {
                    // Gone from Slurm's memory (MinJobAge) without being seen to end.
                    r.ended = true;
                    events.push(RunEvent::Exited {
                        host,
                        job,
                        token,
                        exit: Exit::Unknown,
                        at: None,
                    });
                }
            }
        }
        let done = cancel
            .into_iter()
            .map(|(host, id)| (host, id, batch::scancel(id, None)))
            .collect();
        self.said(done);
        for e in events {
            self.emit(e);
        }
    }

    /// The cluster's own running jobs on each node, with the GPUs they hold there. One pass
    /// over the queue (a large cluster's runs to tens of thousands of jobs, read each second).
    fn say_foreign(&mut self, inv: &Inventory) {
        let mut on: HashMap<&str, Vec<ForeignWork>> = HashMap::new();
        let theirs = inv.jobs.iter().filter(|j| j.running() && !j.is_gantrys());
        for j in theirs {
            let mut nodes: Vec<&str> = j.alloc.iter().map(|(n, _)| n.as_str()).collect();
            nodes.dedup();
            for node in nodes {
                let gpus = j.gpus_on(node);
                if gpus == 0 {
                    continue;
                }
                on.entry(node).or_default().push(ForeignWork {
                    what: what(j),
                    gpus,
                });
            }
        }
        for host in 0..self.nodes.len() {
            if !self.reports.is_up(host) {
                continue;
            }
            let mut work = on.remove(self.nodes[host].as_str()).unwrap_or_default();
            work.sort_by(|a, b| a.what.cmp(&b.what));
            if let Some(e) = self.reports.foreign(host, work) {
                self.emit(e);
            }
        }
    }
}

/// A cluster's own job, for events and views: `Slurm job 12 "train" of alice, account ml`.
pub(super) fn what(j: &Job) -> String {
    format!(
        "Slurm job {} \"{}\" of {}{}",
        j.id,
        j.name,
        j.user,
        if j.account.is_empty() {
            String::new()
        } else {
            format!(", account {}", j.account)
        }
    )
}

/// A refresh's reading of the cluster, with gantry's runs that have not ended indexed by
/// node (each node that comes up is told its runs: one pass over the queue for all of them).
struct Seen<'a> {
    inv: &'a Inventory,
    /// Per node: (gantry job, token, Slurm job) of each run pinned there, waiting or running.
    ours: HashMap<&'a str, Vec<(i64, String, u64)>>,
}

impl<'a> Seen<'a> {
    fn of(inv: &'a Inventory) -> Seen<'a> {
        let mut ours: HashMap<&str, Vec<(i64, String, u64)>> = HashMap::new();
        for j in inv.jobs.iter().filter(|j| !j.ended()) {
            let Some((job, token, _)) = batch::parse_comment(&j.comment) else {
                continue;
            };
            // Pinned to one node, whether it runs or still waits (a waiting job has no
            // nodes yet).
            let mut on: Vec<&str> = [j.required_nodes.as_str(), j.nodes.as_str()]
                .into_iter()
                .chain(j.alloc.iter().map(|(n, _)| n.as_str()))
                .filter(|n| !n.is_empty())
                .collect();
            on.sort_unstable();
            on.dedup();
            for node in on {
                ours.entry(node)
                    .or_default()
                    .push((job, token.clone(), j.id));
            }
        }
        Seen { inv, ours }
    }
}

/// A pool's worker driven by the caller, one refresh at a time (`gantry bench slurm` times
/// what the worker thread does each second).
pub(crate) struct Probe {
    worker: Worker,
    out: Arc<Mutex<Vec<RunEvent>>>,
}

impl Probe {
    pub(crate) fn new(url: &str, user: Option<String>, nodes: Vec<String>) -> Probe {
        let out = Arc::new(Mutex::new(Vec::new()));
        let submit = Submit {
            partition: None,
            gpus_per_node: 8,
            logs: std::env::temp_dir(),
        };
        Probe {
            worker: Worker::new(url.into(), user, None, submit, nodes, out.clone()),
            out,
        }
    }

    /// One refresh (read the cluster, follow the runs, say what changed): its events.
    pub(crate) fn refresh(&mut self) -> Vec<RunEvent> {
        self.worker.refresh();
        std::mem::take(&mut *self.out.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// How a Slurm job ended, from its state and wait status.
fn exit_of(j: &Job) -> Exit {
    let (code, signal) = ((j.exit_code >> 8) & 0xff, j.exit_code & 0x7f);
    if j.state.contains("completed") && code == 0 {
        return Exit::Code(0);
    }
    if ["node_fail", "boot_fail", "preempted", "deadline"]
        .iter()
        .any(|s| j.state.contains(s))
    {
        // The node or Slurm ended it, not the job: requeued from its checkpoint.
        return Exit::Unknown;
    }
    // The script's status: death by signal N is 128 + N.
    if (129..160).contains(&code) {
        return Exit::Signal((code - 128) as i32);
    }
    if signal > 0 {
        return Exit::Signal(signal as i32);
    }
    if code > 0 {
        return Exit::Code(code as i32);
    }
    if j.state.contains("timeout") || j.state.contains("cancelled") {
        return Exit::Signal(libc::SIGTERM);
    }
    Exit::Code(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The worker of a pool of `nodes`, never connected.
    fn worker(nodes: &[&str]) -> Worker {
        Worker::new(
            "http://127.0.0.1:1".into(),
            None,
            None,
            Submit {
                partition: None,
                gpus_per_node: 8,
                logs: std::env::temp_dir(),
            },
            nodes.iter().map(|s| s.to_string()).collect(),
            Arc::new(Mutex::new(Vec::new())),
        )
    }

    /// After a daemon restart, a gantry job Slurm still holds pending (no nodes yet) is
    /// reported on the node it was pinned to, so the daemon re-adopts it instead of requeuing
    /// it while Slurm later runs it unfollowed (before: only running ones were found).
    #[test]
    fn a_waiting_gantry_job_is_reported_on_its_pinned_node() {
        let mut w = worker(&["gpu-a", "gpu-b"]);
        let inv = Inventory {
            jobs: vec![Job {
                id: 41,
                state: "pending".into(),
                reason_code: "Resources".into(),
                required_nodes: "gpu-b".into(),
                comment: batch::comment(7, "tok", 0),
                ..Job::default()
            }],
            ..Inventory::default()
        };
        let seen = Seen::of(&inv);
        w.say_status(0, Ok(()), Some(&seen));
        w.say_status(1, Ok(()), Some(&seen));
        let runs: Vec<(usize, Vec<(i64, String)>)> = w
            .out
            .lock()
            .unwrap()
            .iter()
            .filter_map(|e| match e {
                RunEvent::Up { host, info } => Some((*host, info.runs.clone())),
                _ => None,
            })
            .collect();
        assert_eq!(runs, [(0, vec![]), (1, vec![(7, "tok".to_string())])]);
        assert_eq!(w.runs[&(1, 7, "tok".to_string())].slurm, 41);
    }

    #[test]
    fn slurm_states_and_wait_statuses_are_exits() {
        let j = |state: &str, exit_code: i64| Job {
            state: state.into(),
            exit_code,
            ..Job::default()
        };
        assert_eq!(exit_of(&j("completed", 0)), Exit::Code(0));
        assert_eq!(exit_of(&j("failed", 3 << 8)), Exit::Code(3));
        assert_eq!(exit_of(&j("failed", 143 << 8)), Exit::Signal(15));
        assert_eq!(exit_of(&j("cancelled", 9)), Exit::Signal(9));
        assert_eq!(exit_of(&j("cancelled", 0)), Exit::Signal(libc::SIGTERM));
        assert_eq!(exit_of(&j("node_fail", 0)), Exit::Unknown);
        assert_eq!(exit_of(&j("failed", 0)), Exit::Code(1));
    }
}
