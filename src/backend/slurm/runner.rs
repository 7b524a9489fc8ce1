//! A Slurm pool as a `Runner`: each node's part of a gantry job is a batch job pinned to that
//! node (`batch::sbatch`), followed through slurmrestd's queue; the cluster's own jobs are
//! foreign work holding GPUs. A worker thread does every network and command call, so the
//! daemon's calls return at once; what it learns waits in a queue `poll` drains.
//!
//! A run is identified on the cluster by its comment (`gantry:JOB:TOKEN:RANK`): after a daemon
//! restart the runs still queued or running are reported in each node's `Up`, and the daemon
//! re-adopts them (or stops the ones it gave up on).

use super::batch::{self, Submit};
use super::ends::{exit_of, Reader, Taken};
use super::inventory::{Inventory, Job};
use super::submits::{Submits, Via};
use crate::backend::cluster::NodeReports;
use crate::backend::logs::{DirReader, LogQuery, LogRead, LogReader};
use crate::backend::{Exit, ForeignWaiting, ForeignWork, HostInfo, Launch, RunEvent, Runner};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod follow;

/// How often the queue is read.
pub(super) const REFRESH: Duration = Duration::from_secs(1);

/// How often the runs' exit files are looked for (`batch::exits_dir`), while a run is followed.
const EXITS_EVERY: Duration = Duration::from_millis(10);

/// An exit file no followed run claims is removed once this old (its run was forgotten, or
/// ended under another daemon).
const STRAY_EXIT: Duration = Duration::from_secs(600);

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

pub(super) enum Cmd {
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
    /// What the reader thread found in Slurm (each `REFRESH`), and when the queue in it was
    /// asked for.
    Read(Instant, Box<Result<Inventory, String>>),
    /// A part's `sbatch` answered (`Submits`): Slurm's job id or why not, and when.
    Submitted(RunKey, Result<u64, String>, Instant),
    /// What the event log should say about `host`'s parts (slurmrestd could not take one).
    Said(usize, String),
    /// The daemon let the pool go (a reload or its end).
    Quit,
}

/// Who slurmrestd reads gantry as when the pool names nobody: the user the daemon runs as.
/// Who slurmrestd reads as: the pool's `user`, else the token's own (what it was made for),
/// else the user the daemon runs as.
pub(super) fn reads_as(
    user: Option<String>,
    token: Option<&super::token::Token>,
) -> Option<String> {
    user.or_else(|| token.and_then(super::token::Token::user))
        .or_else(daemon_user)
}

pub(super) fn daemon_user() -> Option<String> {
    std::env::var("USER")
        .ok()
        .or_else(|| std::env::var("LOGNAME").ok())
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
        let s = p.slurm.clone().unwrap_or_default();
        let url = s.slurmrestd.unwrap_or_default();
        let token = super::token::Token::of(s.token_file.as_deref());
        let user = reads_as(s.user, token.as_ref());
        let via = Via::new(
            &url,
            user.clone(),
            token.clone(),
            crate::unix_user::this_user().as_deref(),
        );
        via.warm();
        let taken = Taken::default();
        let reader = Reader::new(url, user, token, taken.clone());
        let mut worker = Worker::new(
            Submit {
                partition: s.partition,
                gpus_per_node: usize::from(p.gpus_per_node),
                logs: logs.to_path_buf(),
            },
            nodes.clone(),
            events.clone(),
            tx.clone(),
        );
        worker.wake = wake;
        worker.taken = taken;
        worker.submits.via = via;
        let found = tx.clone();
        std::thread::Builder::new()
            .name(format!("slurm-read-{}", p.name))
            .spawn(move || reader.run(found))
            .expect("spawn the Slurm reader thread");
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

impl Drop for SlurmPool {
    fn drop(&mut self) {
        // The reader holds a sender too: the worker is told, and the reader's next send fails.
        let _ = self.tx.send(Cmd::Quit);
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
    /// When it was submitted (or found): a read begun before cannot know it.
    since: Instant,
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
            since: Instant::now(),
        }
    }
}

/// A part as the daemon names it: its node (host), job and run token.
pub(super) type RunKey = (usize, i64, String);

struct Worker {
    submit: Submit,
    nodes: Vec<String>,
    runs: HashMap<RunKey, Run>,
    /// What was last said of each node.
    reports: NodeReports,
    /// The cluster's own jobs waiting for the pool's nodes, as last said.
    queue: Vec<ForeignWaiting>,
    out: Arc<Mutex<Vec<RunEvent>>>,
    /// Wakes the daemon when a run ends or a node answers (events are queued first).
    wake: crate::backend::Wake,
    /// The parts whose `sbatch` has not answered yet.
    submits: Submits,
    /// Where the runs whose end was taken are told to the reader.
    taken: Taken,
}

impl Worker {
    /// `answers`: the worker's own channel, where each `sbatch` says how it went.
    fn new(
        submit: Submit,
        nodes: Vec<String>,
        out: Arc<Mutex<Vec<RunEvent>>>,
        answers: Sender<Cmd>,
    ) -> Worker {
        Worker {
            submit,
            runs: HashMap::new(),
            reports: NodeReports::new(nodes.len()),
            queue: Vec::new(),
            nodes,
            out,
            wake: crate::backend::Wake::default(),
            submits: Submits::new(answers, Via::default()),
            taken: Taken::default(),
        }
    }

    fn run(mut self, rx: Receiver<Cmd>) {
        let mut exits_read = Instant::now();
        loop {
            let following = self.submits.busy() || self.runs.values().any(|r| !r.ended);
            let wait = if following { EXITS_EVERY } else { REFRESH };
            match rx.recv_timeout(wait) {
                Ok(Cmd::Quit) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(cmd) => {
                    // Everything asked meanwhile, in order.
                    let mut cmds = vec![cmd];
                    cmds.extend(rx.try_iter());
                    if cmds.iter().any(|c| matches!(c, Cmd::Quit)) {
                        return;
                    }
                    for cmd in cmds {
                        self.command(cmd);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
            }
            if following && exits_read.elapsed() >= EXITS_EVERY {
                self.read_exits();
                exits_read = Instant::now();
            }
        }
    }

    /// A part's `sbatch` answered: its run followed (or its start failed), then what was
    /// asked about it meanwhile.
    fn submitted(&mut self, key: RunKey, r: Result<u64, String>, at: Instant) {
        let held = self.submits.answered(&self.submit, &self.nodes, &key);
        match r {
            Ok(id) => {
                let mut run = Run::new(id);
                run.since = at;
                self.runs.insert(key, run);
            }
            Err(why) => {
                let (host, job, token) = key;
                self.emit(RunEvent::StartFailed {
                    host,
                    job,
                    token,
                    why: format!("Slurm refused it: {why}"),
                });
            }
        }
        for cmd in held {
            self.command(cmd);
        }
    }

    /// The ends the runs' batch scripts wrote (`batch::exits_dir`): each said at once.
    fn read_exits(&mut self) {
        let dir = batch::exits_dir(&self.submit.logs);
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return;
        };
        let mut found: Vec<(u64, PathBuf)> = entries
            .flatten()
            .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path())))
            .collect();
        if found.is_empty() {
            return;
        }
        found.sort_unstable();
        let by_slurm: HashMap<u64, RunKey> = self
            .runs
            .iter()
            .filter(|(_, r)| !r.ended)
            .map(|(k, r)| (r.slurm, k.clone()))
            .collect();
        for (id, path) in found {
            let Some(key) = by_slurm.get(&id) else {
                let stale = std::fs::metadata(&path)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STRAY_EXIT));
                if stale {
                    let _ = std::fs::remove_file(&path);
                }
                continue;
            };
            let Some(code) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| crate::backend::local::exec::written_status(&t))
            else {
                continue;
            };
            let _ = std::fs::remove_file(&path);
            let (host, job, token) = key.clone();
            // What `gantry exec` would enter has ended (the script leaves this to us: a
            // command there is time between two jobs).
            let _ =
                std::fs::remove_file(batch::enter_path(&self.submit.logs, &self.nodes[host], job));
            let r = self.runs.get_mut(key).expect("a followed run");
            r.ended = true;
            self.taken.add(id);
            let said_started = r.started;
            for e in ended(
                host,
                job,
                token,
                id,
                said_started,
                Exit::of_shell_status(code),
            ) {
                self.emit(e);
            }
        }
    }

    fn emit(&self, e: RunEvent) {
        self.wake.after(e, |e| {
            self.out.lock().unwrap_or_else(|p| p.into_inner()).push(e)
        });
    }

    fn command(&mut self, cmd: Cmd) {
        // About a part Slurm has not answered for yet: done once it has.
        let key = match &cmd {
            Cmd::Stop {
                host, job, token, ..
            }
            | Cmd::Kill { host, job, token }
            | Cmd::Forget { host, job, token } => Some((*host, *job, token.clone())),
            _ => None,
        };
        let Some(cmd) = (match key {
            Some(key) => self.submits.hold(&key, cmd),
            None => Some(cmd),
        }) else {
            return;
        };
        let mut out = Vec::new();
        match cmd {
            Cmd::Start(host, l) => self.submits.start(&self.submit, &self.nodes, host, l),
            Cmd::Submitted(key, r, at) => self.submitted(key, r, at),
            Cmd::Read(began, found) => self.refresh(began, *found),
            Cmd::Said(host, why) => self.emit(RunEvent::Failed { host, why }),
            Cmd::Quit => {}
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
}

/// A run of Slurm job `id` seen to have ended: its start first where it was never said (it
/// ran between two looks), then its end.
fn ended(
    host: usize,
    job: i64,
    token: String,
    id: u64,
    said_started: bool,
    exit: Exit,
) -> Vec<RunEvent> {
    let mut events = Vec::with_capacity(2);
    if !said_started {
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
    events
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

/// A pool's worker driven by the caller, one refresh at a time (`gantry bench slurm` times
/// what the worker thread does each second).
pub(crate) struct Probe {
    reader: Reader,
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
        // Each refresh timed whole: the queue read every time, whatever it costs.
        let taken = Taken::default();
        let mut reader = Reader::new(url.into(), user, None, taken.clone());
        reader.whole_queue = true;
        // It submits nothing: no answers to wait for.
        let mut worker = Worker::new(submit, nodes, out.clone(), channel().0);
        worker.taken = taken;
        Probe {
            reader,
            worker,
            out,
        }
    }

    /// One refresh (read the cluster, follow the runs, say what changed): its events.
    pub(crate) fn refresh(&mut self) -> Vec<RunEvent> {
        let (began, found) = self.reader.read();
        self.worker.refresh(began, found);
        std::mem::take(&mut *self.out.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[cfg(test)]
mod tests {
    use super::follow::Seen;
    use super::*;

    /// The worker of a pool of `nodes`, never connected.
    fn worker(nodes: &[&str]) -> Worker {
        Worker::new(
            Submit {
                partition: None,
                gpus_per_node: 8,
                logs: std::env::temp_dir(),
            },
            nodes.iter().map(|s| s.to_string()).collect(),
            Arc::new(Mutex::new(Vec::new())),
            channel().0,
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

    /// A run's end is said as soon as its batch script writes it, without reading Slurm's
    /// queue (the worker here never reaches a slurmrestd); an exit file no run claims stays
    /// until it is old.
    #[test]
    fn a_runs_end_is_said_from_its_exit_file_at_once() {
        let mut w = worker(&["gpu-a"]);
        let logs = gantry_testkit::scratch::scratch("exits");
        w.submit.logs = logs.clone();
        let exits = batch::exits_dir(&logs);
        std::fs::create_dir_all(&exits).unwrap();
        w.runs.insert((0, 7, "tok".into()), Run::new(41));
        w.runs.insert((0, 8, "tok".into()), Run::new(42));
        std::fs::write(exits.join("41"), "143\n").unwrap();
        std::fs::write(exits.join("99"), "0\n").unwrap();
        w.read_exits();
        let said = std::mem::take(&mut *w.out.lock().unwrap());
        assert!(
            matches!(
                &said[..],
                [
                    RunEvent::Started { job: 7, .. },
                    RunEvent::Exited {
                        job: 7,
                        exit: Exit::Signal(15),
                        ..
                    }
                ]
            ),
            "{said:?}"
        );
        assert!(w.runs[&(0, 7, "tok".to_string())].ended);
        assert!(!w.runs[&(0, 8, "tok".to_string())].ended);
        assert_eq!(w.taken.ids(), [41], "the reader is told its end was taken");
        assert!(!exits.join("41").exists() && exits.join("99").exists());
        // Said once.
        w.read_exits();
        assert!(w.out.lock().unwrap().is_empty());
        let _ = std::fs::remove_dir_all(&logs);
    }

    /// A part's `sbatch` answers on another thread: what the daemon asked about the part
    /// meanwhile (here, to forget it) is done once the answer is in, not lost because no
    /// run was followed yet.
    #[test]
    fn a_command_about_a_part_being_submitted_waits_for_its_answer() {
        let mut w = worker(&["gpu-a"]);
        let key: RunKey = (0, 7, "tok".into());
        w.submits.asked(key.clone());
        w.command(Cmd::Forget {
            host: 0,
            job: 7,
            token: "tok".into(),
        });
        assert!(w.submits.busy());
        w.command(Cmd::Submitted(key.clone(), Ok(41), Instant::now()));
        assert!(!w.runs.contains_key(&key) && !w.submits.busy());
        // Refused: said as a failed start.
        w.submits.asked(key.clone());
        w.command(Cmd::Submitted(key, Err("no".into()), Instant::now()));
        let said = std::mem::take(&mut *w.out.lock().unwrap());
        assert!(
            matches!(&said[..], [RunEvent::StartFailed { job: 7, why, .. }] if why.contains("no")),
            "{said:?}"
        );
    }

    /// A part seen ended in a read is told to the reader as taken (issue 68: the reader kept
    /// every ended part Slurm remembered, and copied them to the worker at each refresh);
    /// one still running is not.
    #[test]
    fn an_end_read_from_slurm_is_told_to_the_reader_as_taken() {
        let mut w = worker(&["gpu-a"]);
        w.runs.insert((0, 7, "tok".into()), Run::new(41));
        w.runs.insert((0, 8, "tok".into()), Run::new(42));
        let job = |id, state: &str| Job {
            id,
            state: state.into(),
            start_time: 1,
            comment: format!("gantry:{}:tok:0", id - 34),
            ..Job::default()
        };
        let inv = Inventory {
            jobs: vec![job(41, "completed"), job(42, "running")],
            ..Inventory::default()
        };
        w.refresh(Instant::now(), Ok(inv));
        assert!(w.runs[&(0, 7, "tok".to_string())].ended);
        assert_eq!(w.taken.ids(), [41]);
    }

    /// The reader reads on its own thread: a read begun before a part was submitted does not
    /// have it, and that is not its end; a later read without it is.
    #[test]
    fn a_read_begun_before_a_submission_does_not_end_it() {
        let mut w = worker(&["gpu-a"]);
        let before = Instant::now();
        w.runs.insert((0, 7, "tok".into()), Run::new(41));
        let ended = |w: &Worker| {
            w.out
                .lock()
                .unwrap()
                .iter()
                .any(|e| matches!(e, RunEvent::Exited { job: 7, .. }))
        };
        w.refresh(before, Ok(Inventory::default()));
        assert!(!ended(&w) && !w.runs[&(0, 7, "tok".to_string())].ended);
        w.refresh(Instant::now(), Ok(Inventory::default()));
        assert!(ended(&w));
    }
}
