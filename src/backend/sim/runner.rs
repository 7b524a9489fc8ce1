//! Jobs on the simulated fleet: each run gets a modelled duration (the demo kind's mean, or a
//! share of its time limit), a busy level and, for notebooks, a moment its GPUs go quiet. A
//! stop ends it within its grace (the modelled signal handler checkpoints at once, at most
//! two minutes); about one run in twenty fails. Runs live only as long as the daemon: the
//! daemon does not journal them for re-adoption (`simulated()`).

use super::work::{Ended, WorkBook};
use crate::backend::logs::{LogQuery, LogRead, LogReader};
use crate::backend::{Exit, Launch, Modelled, RunEvent, Runner};
use crate::scheduler::rng::Rng;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The longest a modelled job takes to checkpoint and stop after its signal.
const STOP_AT_MOST_S: f64 = 120.0;

/// A modelled notebook's GPUs go quiet this long after it starts (left open).
const NOTEBOOK_BUSY_S: f64 = 20.0 * 60.0;

/// One pool of the simulated fleet, as a `Runner`.
pub struct SimPool {
    /// Its nodes' names, by host index (the addresses a gang's nodes get).
    nodes: Vec<String>,
    rng: Rng,
    /// The daemon's clock as of the last poll (the only clock a model has).
    now: f64,
    runs: BTreeMap<(i64, String), SimRun>,
    /// Starts not yet reported.
    started: Vec<(usize, i64, String)>,
    /// The jobs a what-if run models (their work, checkpoints, worth), and its books.
    book: Option<WorkBook>,
}

#[derive(Clone, Debug)]
struct SimRun {
    /// The hosts its parts run on.
    hosts: Vec<usize>,
    ends_at: f64,
    /// Whether it ends well (exit 0) or fails (exit 1).
    ok: bool,
    /// Its work is in the what-if run's books.
    booked: bool,
    /// Seconds after start when its GPUs go idle; None: busy throughout.
    idle_after: Option<f64>,
    busy_pct: f64,
    /// When a stop ends it, and by which signal.
    stop: Option<(f64, i32)>,
}

impl SimPool {
    /// A pool of `nodes` (the fleet's node names, host order); `seed` makes its draws
    /// repeatable.
    pub fn new(nodes: Vec<String>, seed: u64) -> SimPool {
        SimPool {
            nodes,
            rng: Rng::new(seed),
            now: 0.0,
            runs: BTreeMap::new(),
            started: Vec::new(),
            book: None,
        }
    }

    /// The jobs `book` models run as it says, and their runs go into its books.
    pub fn with_book(mut self, book: Option<WorkBook>) -> SimPool {
        self.book = book;
        self
    }

    /// The run of `job` with `token`.
    fn run_mut(&mut self, job: i64, token: &str) -> Option<&mut SimRun> {
        self.runs.get_mut(&(job, token.to_string()))
    }
}

/// Logs of the simulated fleet: there are none, and the reader says why.
struct NoLogs;

impl LogReader for NoLogs {
    fn read(&self, _: usize, job: i64, _: &LogQuery, _: Duration) -> Result<LogRead, String> {
        Err(format!(
            "job {job} ran on the simulated fleet, which runs no processes: it has no logs"
        ))
    }
}

impl Runner for SimPool {
    fn kind(&self) -> &'static str {
        "sim"
    }

    fn simulated(&self) -> bool {
        true
    }

    fn address(&self, host: usize) -> String {
        self.nodes.get(host).cloned().unwrap_or_default()
    }

    fn start(&mut self, host: usize, launch: Launch) {
        let key = (launch.job, launch.token.clone());
        self.started.push((host, launch.job, launch.token.clone()));
        if let Some(run) = self.runs.get_mut(&key) {
            // Another node of the same gang: it shares the run's fate.
            run.hosts.push(host);
            return;
        }
        let notebook = launch.run.contains("jupyter")
            || launch
                .name
                .as_deref()
                .is_some_and(|n| n.starts_with("notebook"));
        let base = launch
            .name
            .as_deref()
            .and_then(crate::spec::demo::Workload::mean_duration)
            .or(launch.time_limit_s.map(|t| 0.6 * t))
            .unwrap_or(3600.0);
        let busy_pct = 70.0 + 25.0 * self.rng.unit();
        let modelled = self
            .book
            .as_ref()
            .and_then(|b| b.begin(launch.job, self.now));
        let (duration, ok, idle_after) = match modelled {
            Some((duration, idle_after)) => (duration, true, idle_after),
            None => (
                base * (0.5 + self.rng.unit()),
                self.rng.below(20) != 0,
                notebook.then_some(NOTEBOOK_BUSY_S),
            ),
        };
        self.runs.insert(
            key,
            SimRun {
                hosts: vec![host],
                ends_at: self.now + duration,
                ok,
                booked: modelled.is_some(),
                idle_after,
                busy_pct,
                stop: None,
            },
        );
    }

    fn stop(&mut self, _host: usize, job: i64, token: &str, signal: &str, grace_s: f64) {
        let now = self.now;
        let signal = crate::backend::local::exec::signal_number(signal).unwrap_or(libc::SIGTERM);
        if let Some(run) = self.run_mut(job, token) {
            if run.stop.is_none() {
                run.stop = Some((now + grace_s.clamp(0.0, STOP_AT_MOST_S), signal));
            }
        }
    }

    fn kill(&mut self, _host: usize, job: i64, token: &str) {
        let run = self.runs.remove(&(job, token.to_string()));
        if let (Some(book), Some(run)) = (&self.book, run.filter(|r| r.booked)) {
            // Whichever came first since the last poll: its own end, its signal's, the kill
            // (as of the last poll: the model's only clock).
            let stopped = run.stop.map(|(s, _)| s).filter(|&s| s <= self.now);
            let (at, how) = match stopped {
                _ if run.ends_at <= self.now && stopped.is_none_or(|s| run.ends_at <= s) => {
                    (run.ends_at, Ended::Finished)
                }
                Some(s) => (s, Ended::Stopped),
                None => (self.now, Ended::Killed),
            };
            book.end(job, at, how);
        }
    }

    fn forget(&mut self, _host: usize, _job: i64, _token: &str) {}

    fn poll(&mut self, now: f64) -> Vec<RunEvent> {
        self.now = now;
        let mut out: Vec<(f64, RunEvent)> = self
            .started
            .drain(..)
            .map(|(host, job, token)| {
                let e = RunEvent::Started {
                    host,
                    job,
                    token,
                    pgid: None,
                    handle: None,
                };
                (f64::NEG_INFINITY, e)
            })
            .collect();
        let mut ended = Vec::new();
        for ((job, token), run) in &self.runs {
            let (at, exit) = match run.stop {
                Some((at, sig)) if at <= now && at <= run.ends_at => (at, Exit::Signal(sig)),
                _ if run.ends_at <= now => (run.ends_at, Exit::Code(if run.ok { 0 } else { 1 })),
                _ => continue,
            };
            ended.push((*job, token.clone()));
            if let Some(book) = self.book.as_ref().filter(|_| run.booked) {
                let how = if matches!(exit, Exit::Signal(_)) {
                    Ended::Stopped
                } else {
                    Ended::Finished
                };
                book.end(*job, at, how);
            }
            for &host in &run.hosts {
                let e = RunEvent::Exited {
                    host,
                    job: *job,
                    token: token.clone(),
                    exit,
                    at: Some(at),
                };
                out.push((at, e));
            }
        }
        for key in ended {
            self.runs.remove(&key);
        }
        // Each at its own time, however long the daemon's step (billing stops there).
        out.sort_by(|a, b| a.0.total_cmp(&b.0));
        out.into_iter().map(|(_, e)| e).collect()
    }

    fn logs(&self) -> Arc<dyn LogReader> {
        Arc::new(NoLogs)
    }

    fn modelled_gpu(&self, job: i64, gpu: u32, started: f64, at: f64) -> Option<Modelled> {
        let run = self
            .runs
            .range((job, String::new())..)
            .next()
            .filter(|((j, _), _)| *j == job)
            .map(|(_, r)| r)?;
        // Each GPU its own level (±6 points), phase and memory footprint, fixed per job and
        // GPU: a data-parallel job's GPUs are alike, not identical.
        let h = mix(job as u64, u64::from(gpu));
        let offset = (h % 13) as f64 - 6.0;
        let phase = ((h >> 8) % 1000) as f64 / 1000.0 * std::f64::consts::TAU;
        let memory_used = 0.55 + 0.4 * ((h >> 24) % 1000) as f64 / 1000.0;
        let util_pct = match (run.stop, run.idle_after) {
            // Checkpointing and exiting: the GPU winds down.
            (Some(_), _) => 0.0,
            (None, Some(a)) if at - started >= a => 1.0,
            // A deterministic wobble (steps, evaluation, data loading) around the level.
            _ => (run.busy_pct + offset + 6.0 * ((at - started) / 420.0 + phase).sin())
                .clamp(0.0, 100.0),
        };
        Some(Modelled {
            util_pct,
            memory_used,
        })
    }
}

/// A well-mixed hash of two numbers (SplitMix64's finalizer).
fn mix(a: u64, b: u64) -> u64 {
    let mut z = a
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(b)
        .wrapping_add(0x6A09_E667_F3BC_C909);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(job: i64, name: &str) -> Launch {
        Launch {
            job,
            token: format!("t{job}"),
            name: Some(name.to_string()),
            time_limit_s: Some(1000.0),
            ..Launch::default()
        }
    }

    #[test]
    fn a_gang_ends_together_at_its_own_time_and_a_stop_ends_it_within_the_grace() {
        let mut p = SimPool::new(vec!["a".into(), "b".into()], 7);
        p.poll(100.0);
        p.start(0, launch(1, "x"));
        p.start(1, launch(1, "x"));
        p.start(0, launch(2, "y"));
        let started = p.poll(100.0);
        assert_eq!(started.len(), 3, "{started:?}");
        let util = |p: &SimPool, gpu| p.modelled_gpu(1, gpu, 100.0, 150.0).map(|m| m.util_pct);
        assert!(util(&p, 0).is_some_and(|u| u > 50.0));
        assert_ne!(util(&p, 0), util(&p, 1), "each GPU varies on its own");
        p.stop(0, 2, "t2", "SIGUSR1", 30.0);
        let ev = p.poll(100_000.0);
        let exits: Vec<(usize, i64, Exit, Option<f64>)> = ev
            .iter()
            .filter_map(|e| match e {
                RunEvent::Exited {
                    host,
                    job,
                    exit,
                    at,
                    ..
                } => Some((*host, *job, *exit, *at)),
                _ => None,
            })
            .collect();
        assert_eq!(exits[0], (0, 2, Exit::Signal(libc::SIGUSR1), Some(130.0)));
        let gang: Vec<_> = exits.iter().filter(|e| e.1 == 1).collect();
        assert_eq!(gang.len(), 2);
        assert_eq!(gang[0].3, gang[1].3, "both nodes end at the same time");
        let at = gang[0].3.unwrap();
        assert!(
            (400.0..=1000.0).contains(&(at - 100.0)),
            "0.6 × limit × [0.5, 1.5)"
        );
        assert!(p.poll(200_000.0).is_empty(), "each exit is said once");
        assert_eq!(p.modelled_gpu(1, 0, 100.0, 150.0), None);
    }
}
