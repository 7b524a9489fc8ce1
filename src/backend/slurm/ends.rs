//! How the Slurm worker learns what happened: the reader thread's reads of the cluster (each
//! `REFRESH`, off the worker's thread), and how a part's end reads as an exit.

use super::inventory::{Inventory, Job};
use super::rest::SlurmRest;
use super::runner::{Cmd, REFRESH};
use crate::backend::Exit;
use std::collections::HashSet;
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Answers at least this large (bytes, one read) are given back to the system after.
const TRIM_AFTER: usize = 1 << 20;

/// The Slurm jobs of gantry's parts whose end the worker has taken, for the reader to stop
/// keeping (`SlurmRest::inventory_without`): shared, the worker adding, the reader draining.
#[derive(Clone, Default)]
pub(super) struct Taken(Arc<Mutex<Vec<u64>>>);

impl Taken {
    pub(super) fn add(&self, slurm: u64) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(slurm);
    }

    fn drain_into(&self, into: &mut HashSet<u64>) {
        into.extend(self.0.lock().unwrap_or_else(|p| p.into_inner()).drain(..));
    }

    #[cfg(test)]
    pub(super) fn ids(&self) -> Vec<u64> {
        self.0.lock().unwrap().clone()
    }
}

/// Reads the cluster through slurmrestd each `REFRESH`, on its own thread: a large queue's
/// answer takes a while to build and read, and meanwhile the worker goes on submitting parts
/// and saying the runs' ends.
pub(super) struct Reader {
    url: String,
    user: Option<String>,
    token: Option<super::token::Token>,
    rest: Option<SlurmRest>,
    /// Every read reads the queue (`SlurmRest::read_the_queue_each_time`).
    pub(super) whole_queue: bool,
    /// Ends the worker has taken, as it says them; and all of them that Slurm still
    /// answers with (kept across reconnections).
    taken: Taken,
    settled: HashSet<u64>,
}

impl Reader {
    pub(super) fn new(
        url: String,
        user: Option<String>,
        token: Option<super::token::Token>,
        taken: Taken,
    ) -> Reader {
        Reader {
            url,
            user,
            token,
            rest: None,
            whole_queue: false,
            taken,
            settled: HashSet::new(),
        }
    }

    pub(super) fn run(mut self, found: Sender<Cmd>) {
        loop {
            let t = Instant::now();
            let (asked, read) = self.read();
            if found.send(Cmd::Read(asked, Box::new(read))).is_err() {
                return;
            }
            // A large answer's text and its parse are freed by now; glibc keeps such pages
            // in this thread's arena until reused, so the daemon's resident memory stood at
            // the largest answer it ever read (issue 68).
            if self
                .rest
                .as_ref()
                .is_some_and(|r| r.read_bytes() >= TRIM_AFTER)
            {
                crate::heap::give_back_freed();
            }
            std::thread::sleep(REFRESH.saturating_sub(t.elapsed()));
        }
    }

    /// The cluster now, and when the queue in it was asked for (a run submitted after is not
    /// in it: not gone).
    pub(super) fn read(&mut self) -> (Instant, Result<Inventory, String>) {
        let now = Instant::now();
        let read = self.inventory();
        let asked = match (&read, &self.rest) {
            (Ok(_), Some(rest)) => rest.queue_read_at().unwrap_or(now),
            _ => now,
        };
        (asked, read)
    }

    fn inventory(&mut self) -> Result<Inventory, String> {
        // Taken before connecting: while slurmrestd cannot be reached, parts still end (their
        // exit files say so) and what the worker tells must not pile up unread.
        self.taken.drain_into(&mut self.settled);
        if self.rest.is_none() {
            let mut rest = SlurmRest::connect(&self.url, self.user.clone(), self.token.clone())?;
            if self.whole_queue {
                rest.read_the_queue_each_time();
            }
            self.rest = Some(rest);
        }
        let rest = self.rest.as_mut().ok_or("not connected")?;
        rest.inventory_without(&mut self.settled).inspect_err(|_| {
            // Reconnect (and detect the version again) next time: it may have been upgraded.
            self.rest = None;
        })
    }
}

/// How a Slurm job ended, from its state and wait status.
pub(super) fn exit_of(j: &Job) -> Exit {
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
    if (129..160).contains(&code) {
        return Exit::of_shell_status(code);
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

    /// A read that leaves a slow queue as it was says when that queue was asked for, not when
    /// the read began: a part submitted in between is not in it, and the worker must not take
    /// its absence for its end (`a_read_begun_before_a_submission_does_not_end_it`).
    #[test]
    fn a_read_that_keeps_the_queue_says_when_the_queue_was_read() {
        use axum::{routing::get, Router};
        use std::time::Duration;
        const NODES: &str = include_str!("../../bench/slurm/v0.0.38/nodes.json");
        const PARTS: &str = include_str!("../../bench/slurm/v0.0.38/partitions.json");
        const JOBS: &str = include_str!("../../bench/slurm/v0.0.38/jobs.json");
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let dir = gantry_testkit::scratch::scratch("slurm-reader");
        let socket = dir.join("restd.sock");
        let _ = std::fs::remove_file(&socket);
        // A queue that takes 200 ms to answer, as a large one does.
        let app = Router::new()
            .route("/slurm/v0.0.38/ping", get(|| async { "{}" }))
            .route("/slurm/v0.0.38/nodes", get(|| async { NODES }))
            .route("/slurm/v0.0.38/partitions", get(|| async { PARTS }))
            .route(
                "/slurm/v0.0.38/jobs",
                get(|| async {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    JOBS
                }),
            );
        let listener = rt
            .block_on(async { tokio::net::UnixListener::bind(&socket) })
            .unwrap();
        rt.spawn(async move { axum::serve(listener, app).await });

        let mut r = Reader::new(
            format!("unix:{}", socket.display()),
            None,
            None,
            Taken::default(),
        );
        let first = Instant::now();
        let (asked, read) = r.read();
        assert!(!read.unwrap().jobs.is_empty());
        assert!(asked >= first, "the first read reads the queue");
        // Well within ten times 200 ms: the queue is kept, and so is when it was asked for.
        let second = Instant::now();
        let (kept, read) = r.read();
        assert!(!read.unwrap().jobs.is_empty());
        assert_eq!(kept, asked);
        assert!(kept < second);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// While slurmrestd cannot be reached, the ends the worker takes do not pile up unread:
    /// each read takes them, connected or not.
    #[test]
    fn ends_taken_while_slurmrestd_is_unreachable_do_not_pile_up() {
        let dir = gantry_testkit::scratch::scratch("reader-down");
        let taken = Taken::default();
        let mut r = Reader::new(
            format!("unix:{}", dir.join("nobody-listens.sock").display()),
            None,
            None,
            taken.clone(),
        );
        for id in 1..=3 {
            taken.add(id);
            let (_, read) = r.read();
            assert!(read.is_err());
        }
        assert!(taken.ids().is_empty());
        assert_eq!(r.settled.len(), 3);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
