//! The Slurm worker's submissions in flight. Each part's submission runs on a thread of its
//! own (at most `SUBMITTERS` at once) and answers on the worker's channel, so the worker goes
//! on reading the runs' ends while Slurm takes parts: an `sbatch` takes 50–60 ms on a busy
//! controller, and an end read that waits for it is a GPU standing idle (issue 39).
//!
//! Where slurmrestd would run the part as the daemon's own user (`Via::rest`), the part is
//! posted to it instead: one request on a kept connection, where `sbatch` is a process that
//! loads Slurm's configuration and plugins and makes a munge credential (about 14 ms of CPU
//! each on this project's box, on the cores slurmctld and the nodes' daemons share). A
//! slurmrestd that cannot be reached (or refuses the token) sends the part back to `sbatch`,
//! which needs only slurmctld and munge.
//!
//! A command about a part whose `sbatch` has not answered (a stop, a kill, a forget) waits
//! here and is replayed in order once the answer is in, so it never finds no run.

use super::batch::{self, Submit};
use super::rest::{SlurmRest, SubmitFailed};
use super::runner::{Cmd, RunKey};
use super::token::Token;
use crate::backend::Launch;
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// At most this many `sbatch` at once: the parts one cycle starts are submitted together.
const SUBMITTERS: usize = 16;

/// How parts reach Slurm: over slurmrestd where it submits as the daemon's user, else (and
/// whenever it cannot be reached) with `sbatch`.
#[derive(Clone, Default)]
pub(super) struct Via {
    rest: Option<Arc<RestSubmit>>,
}

struct RestSubmit {
    url: String,
    user: Option<String>,
    token: Option<Token>,
    conn: Mutex<Conn>,
    /// Told when a connection attempt ends: the submitters that came meanwhile take its
    /// outcome.
    attempted: std::sync::Condvar,
}

/// Where posting parts to slurmrestd stands.
enum Conn {
    /// Not tried yet, or worth trying again.
    Idle,
    /// A submitter is connecting (outside the lock): the others wait for that one attempt,
    /// together, and take its outcome. Before, they went by `sbatch` meanwhile — and on a
    /// host with no Slurm commands (a daemon that only posts) the first burst of parts
    /// failed, 9–15 jobs of 1,000 in `scripts/slurm-compare.sh`; and before that, each waited
    /// on the lock and tried in turn, a slurmrestd that never answers holding every
    /// submitter for its timeout one after the other.
    Connecting,
    Up(Arc<SlurmRest>),
    /// Not reached, or it refused the credentials: `sbatch` until `until`, then tried again;
    /// each failure in a row waits twice as long (`backoff`), up to `MOST_BACKOFF`. Tried again
    /// at every part, a slurmrestd that is down cost each part a connection attempt first.
    Down {
        until: Instant,
        backoff: Duration,
    },
    /// Its API is one whose job description gantry does not write: `sbatch` from then on.
    Unsupported,
}

/// The first wait after slurmrestd could not be used, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(5);
const MOST_BACKOFF: Duration = Duration::from_secs(300);
/// The longest a submitter waits for another's connection attempt (slurmrestd's connect and
/// request timeouts, 5 s and 10 s, and a margin) before its part goes by `sbatch`.
const ATTEMPT_WAIT: Duration = Duration::from_secs(16);

impl Via {
    /// Parts go to slurmrestd at `url` when the job would run as the user the daemon runs as
    /// (`daemon`, from its uid): with a token for `user` that is that user, or through the
    /// Unix socket when the daemon is not root (slurmrestd's local auth takes only its own
    /// uid or root's, and acts as itself, or for root as the user a header names). A token for
    /// anyone else would run gantry's jobs as them, so `sbatch` (munge: the daemon's uid)
    /// submits.
    pub(super) fn new(
        url: &str,
        user: Option<String>,
        token: Option<Token>,
        daemon: Option<&str>,
    ) -> Via {
        let ours = if url.starts_with("unix:") {
            daemon.is_some_and(|d| d != "root")
        } else {
            token.is_some() && user.is_some() && user.as_deref() == daemon
        };
        Via {
            rest: ours.then(|| {
                Arc::new(RestSubmit {
                    url: url.to_string(),
                    user,
                    token,
                    conn: Mutex::new(Conn::Idle),
                    attempted: std::sync::Condvar::new(),
                })
            }),
        }
    }

    /// Connects to slurmrestd now, off the caller's thread, so that the first parts find the
    /// connection made (the worker calls it as it starts).
    pub(super) fn warm(&self) {
        if let Some(r) = &self.rest {
            let r = r.clone();
            let _ = std::thread::Builder::new()
                .name("gantry-slurm-connect".into())
                .spawn(move || {
                    let _ = r.connection();
                });
        }
    }

    /// How parts go to a slurmrestd serving `api`, as a node's connection says it.
    pub(super) fn said(&self, api: &str) -> &'static str {
        if self.rest.is_some() && api == super::rest::SUBMITS {
            "parts posted to slurmrestd"
        } else {
            "parts submitted with sbatch"
        }
    }

    /// Submits `node`'s part of `l`: Slurm's job id, or why not; and, when slurmrestd has
    /// just been found unusable, what the event log should say of it (once per backoff).
    fn submit(&self, s: &Submit, node: &str, l: &Launch) -> (Result<u64, String>, Option<String>) {
        let part = match batch::part(s, node, l) {
            Ok(p) => p,
            Err(why) => return (Err(why), None),
        };
        let Some(r) = &self.rest else {
            return (batch::sbatch(&part), None);
        };
        let conn = match r.connection() {
            Ok(c) => c,
            Err(said) => return (batch::sbatch(&part), said),
        };
        match conn.submit(&batch::rest_job(&part)) {
            Ok(id) => (Ok(id), None),
            Err(SubmitFailed::Refused(why)) => (Err(why), None),
            Err(SubmitFailed::Untried(why)) => (batch::sbatch(&part), r.down(&why)),
            Err(SubmitFailed::Unsupported) => {
                *r.lock() = Conn::Unsupported;
                (batch::sbatch(&part), None)
            }
        }
    }
}

impl RestSubmit {
    fn lock(&self) -> std::sync::MutexGuard<'_, Conn> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// slurmrestd could not be used (`why`): `sbatch` for a while, longer after each failure
    /// in a row; what the event log says of it. Submitters whose posts fail together in one
    /// outage find it already down: that is one failure, said once (each of them doubled the
    /// wait and said it again).
    fn down(&self, why: &str) -> Option<String> {
        let mut conn = self.lock();
        let backoff = match &*conn {
            Conn::Down { until, .. } if Instant::now() < *until => return None,
            Conn::Down { backoff, .. } => (*backoff * 2).min(MOST_BACKOFF),
            _ => FIRST_BACKOFF,
        };
        *conn = Conn::Down {
            until: Instant::now() + backoff,
            backoff,
        };
        Some(format!(
            "parts cannot be posted to slurmrestd ({why}); they go by sbatch for {} s, then slurmrestd is tried again",
            backoff.as_secs()
        ))
    }

    /// The connection parts are posted on, made if there is none and it is time to try
    /// (outside the lock). `Err` for `sbatch`, with what to say when this attempt failed.
    fn connection(&self) -> Result<Arc<SlurmRest>, Option<String>> {
        let mut conn = self.lock();
        let waited = Instant::now();
        loop {
            match &*conn {
                Conn::Up(c) => return Ok(c.clone()),
                Conn::Unsupported => return Err(None),
                Conn::Down { until, .. } if Instant::now() < *until => return Err(None),
                Conn::Connecting => {
                    let left = ATTEMPT_WAIT.saturating_sub(waited.elapsed());
                    if left.is_zero() {
                        return Err(None);
                    }
                    conn = self
                        .attempted
                        .wait_timeout(conn, left)
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
                Conn::Idle | Conn::Down { .. } => break,
            }
        }
        // A failure in a row keeps its backoff: put back if this attempt fails too.
        let before = std::mem::replace(&mut *conn, Conn::Connecting);
        drop(conn);
        let made = SlurmRest::connect(&self.url, self.user.clone(), self.token.clone());
        let mut conn = self.lock();
        let outcome = match made {
            Ok(c) => {
                let c = Arc::new(c);
                *conn = Conn::Up(c.clone());
                drop(conn);
                Ok(c)
            }
            Err(why) => {
                *conn = before;
                drop(conn);
                Err(self.down(&why))
            }
        };
        self.attempted.notify_all();
        outcome
    }
}

pub(super) struct Submits {
    /// Where each submission's answer goes (the worker's own channel).
    answers: Sender<Cmd>,
    pub(super) via: Via,
    /// Parts waiting for a submitter, in the order they were asked for.
    queued: VecDeque<(usize, Box<Launch>)>,
    /// Every part asked for and not answered yet, with the commands about it that came
    /// meanwhile: those not `queued` are being submitted.
    held: HashMap<RunKey, Vec<Cmd>>,
}

impl Submits {
    pub(super) fn new(answers: Sender<Cmd>, via: Via) -> Submits {
        Submits {
            answers,
            via,
            queued: VecDeque::new(),
            held: HashMap::new(),
        }
    }

    /// Any part not answered yet (its run may already have ended: its exit file is looked for).
    pub(super) fn busy(&self) -> bool {
        !self.held.is_empty()
    }

    /// Submits `l` on `node` (or queues it behind the submitters).
    pub(super) fn start(&mut self, submit: &Submit, nodes: &[String], host: usize, l: Box<Launch>) {
        self.held.entry((host, l.job, l.token.clone())).or_default();
        self.queued.push_back((host, l));
        self.spawn(submit, nodes);
    }

    /// As if `key` had been handed to a submitter (tests: no `sbatch` runs).
    #[cfg(test)]
    pub(super) fn asked(&mut self, key: RunKey) {
        self.held.entry(key).or_default();
    }

    /// Holds `cmd` if it is about a part not answered yet; gives it back otherwise.
    pub(super) fn hold(&mut self, key: &RunKey, cmd: Cmd) -> Option<Cmd> {
        match self.held.get_mut(key) {
            Some(waiting) => {
                waiting.push(cmd);
                None
            }
            None => Some(cmd),
        }
    }

    /// `key`'s answer is in: the commands held for it, and the next queued parts submitted.
    pub(super) fn answered(&mut self, submit: &Submit, nodes: &[String], key: &RunKey) -> Vec<Cmd> {
        let held = self.held.remove(key).unwrap_or_default();
        self.spawn(submit, nodes);
        held
    }

    /// Parts whose `sbatch` runs now.
    fn running(&self) -> usize {
        self.held.len().saturating_sub(self.queued.len())
    }

    fn spawn(&mut self, submit: &Submit, nodes: &[String]) {
        while self.running() < SUBMITTERS {
            let Some((host, l)) = self.queued.pop_front() else {
                return;
            };
            let key: RunKey = (host, l.job, l.token.clone());
            let (answer, answers) = (key.clone(), self.answers.clone());
            let (submit, node) = (submit.clone(), nodes[host].clone());
            let via = self.via.clone();
            let spawned = std::thread::Builder::new()
                .name("slurm-submit".into())
                .spawn(move || {
                    let (r, said) = via.submit(&submit, &node, &l);
                    if let Some(why) = said {
                        let _ = answers.send(Cmd::Said(host, why));
                    }
                    let _ = answers.send(Cmd::Submitted(answer, r, Instant::now()));
                });
            if let Err(e) = spawned {
                let why = Err(format!("cannot start a thread to submit a part: {e}"));
                let _ = self.answers.send(Cmd::Submitted(key, why, Instant::now()));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job posted to slurmrestd runs as the token's user: only where that is the daemon's
    /// own (or the Unix socket says who calls) do parts go that way.
    #[test]
    fn parts_go_to_slurmrestd_only_as_the_daemons_own_user() {
        let via = |url: &str, user: Option<&str>, token: Option<&str>, daemon: &str| {
            Via::new(
                url,
                user.map(str::to_string),
                token.map(|t| Token::Fixed(t.to_string())),
                Some(daemon),
            )
            .rest
            .is_some()
        };
        let http = "http://head:6820";
        assert!(via(http, Some("gantry"), Some("jwt"), "gantry"));
        assert!(!via(http, Some("alice"), Some("jwt"), "gantry"));
        assert!(!via(http, Some("gantry"), None, "gantry"));
        let socket = "unix:/run/slurmrestd.sock";
        assert!(via(socket, None, None, "gantry"));
        // Root on the socket is slurmrestd's own user (or the one a header names).
        assert!(!via(socket, Some("root"), None, "root"));
    }

    fn posting(url: &str) -> Arc<RestSubmit> {
        let via = Via::new(
            url,
            Some("gantry".into()),
            Some(Token::Fixed("jwt".into())),
            Some("gantry"),
        );
        via.rest.expect("posts as the daemon's own user")
    }

    /// A slurmrestd that is down is tried once, then not again until its backoff is over:
    /// every part tried it first, each paying a connection attempt before its `sbatch`.
    #[test]
    fn a_slurmrestd_that_cannot_be_reached_is_tried_again_only_after_a_backoff() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        {
            let accepted = accepted.clone();
            std::thread::spawn(move || {
                // Each connection is closed unanswered: not a slurmrestd.
                for s in listener.incoming() {
                    accepted.fetch_add(1, Ordering::SeqCst);
                    drop(s);
                }
            });
        }
        let r = posting(&url);
        let said = r.connection().err().flatten().expect("the failure is said");
        assert!(said.contains("go by sbatch for 5 s"), "{said}");
        let one_try = accepted.load(Ordering::SeqCst);
        assert!(one_try > 0, "the first part tried slurmrestd");
        for _ in 0..5 {
            assert!(
                matches!(r.connection(), Err(None)),
                "sbatch, and nothing said again"
            );
        }
        assert_eq!(
            accepted.load(Ordering::SeqCst),
            one_try,
            "within the backoff no part tries slurmrestd again"
        );
        // Once the wait is over it is tried again, and a second failure waits twice as long.
        let Conn::Down { backoff, .. } = *r.lock() else {
            panic!("down after the failed attempt")
        };
        assert_eq!(backoff, FIRST_BACKOFF);
        *r.lock() = Conn::Down {
            until: Instant::now(),
            backoff,
        };
        let said = r.connection().err().flatten().expect("said again");
        assert!(said.contains("for 10 s"), "{said}");
        assert!(accepted.load(Ordering::SeqCst) > one_try);
        let Conn::Down { backoff, .. } = *r.lock() else {
            panic!("down after the second failed attempt")
        };
        assert_eq!(backoff, FIRST_BACKOFF * 2);
    }

    /// Parts posted at once that all find slurmrestd refusing are one failure: the wait is
    /// not doubled by each of them, and the event log hears of it once.
    #[test]
    fn posts_that_fail_together_are_one_failure() {
        let r = posting("http://127.0.0.1:9");
        let said = r.down("HTTP 401").expect("the first failure is said");
        assert!(said.contains("for 5 s"), "{said}");
        for _ in 0..3 {
            assert_eq!(r.down("HTTP 401"), None, "said once");
        }
        let Conn::Down { backoff, .. } = *r.lock() else {
            panic!("down")
        };
        assert_eq!(backoff, FIRST_BACKOFF);
    }

    /// While one submitter connects to a slurmrestd that does not answer, the others wait for
    /// that one attempt and take its outcome — no second attempt, no part by `sbatch` before
    /// it is known (a host without Slurm's commands failed those parts).
    #[test]
    fn parts_wait_together_for_the_one_connection_attempt() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let released = Arc::new(AtomicBool::new(false));
        let (heard, hears) = std::sync::mpsc::channel();
        {
            let released = released.clone();
            std::thread::spawn(move || {
                let (held, _) = listener.accept().unwrap();
                let _ = heard.send(());
                // Accepted and never answered, for a while.
                std::thread::sleep(Duration::from_secs(3));
                released.store(true, Ordering::SeqCst);
                drop(held);
                drop(listener);
            });
        }
        let r = posting(&url);
        let first = {
            let r = r.clone();
            std::thread::spawn(move || r.connection().is_err())
        };
        hears.recv().unwrap();
        let others: Vec<_> = (0..4)
            .map(|_| {
                let r = r.clone();
                std::thread::spawn(move || {
                    let t = Instant::now();
                    (matches!(r.connection(), Err(None)), t.elapsed())
                })
            })
            .collect();
        for o in others {
            let (to_sbatch, took) = o.join().unwrap();
            assert!(
                released.load(Ordering::SeqCst),
                "a part went on before the attempt in flight ended"
            );
            assert!(to_sbatch, "the failed attempt's outcome: sbatch, said once");
            assert!(
                took < Duration::from_secs(12),
                "waited together, not in turn: {took:?}"
            );
        }
        assert!(first.join().unwrap());
    }
}
