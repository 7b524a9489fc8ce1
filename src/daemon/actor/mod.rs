//! The daemon actor: one thread owns the state; the API, the CLI and the console reach it only
//! through a `Handle` — requests on a channel, answers on one-shot replies, and published
//! snapshots on a watch channel. Submissions that arrive together are admitted with one
//! journal commit (group commit), so every acknowledged job is on disk. The scheduling cycle
//! runs after changes (debounced) and on the clock's timer.

mod handle;
mod requests;

use crate::daemon::refusal::{Kind, Refusal};
use handle::Reply;
pub use handle::{Clock, Handle, Published, Request, CYCLE_BUCKETS};

use super::auth::{Caller, Grant};
use super::engine::{EngineError, Submission};
use super::journal::JobId;
use super::state::{Histogram, State};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Starts the actor thread over `state`.
pub fn spawn(
    mut state: State,
    clock: Clock,
) -> Result<(Handle, std::thread::JoinHandle<()>), EngineError> {
    let mut tokens = HashMap::new();
    for t in state.tokens()? {
        if let (Ok(role), None) = (t.role.parse(), t.revoked_at) {
            tokens.insert(
                t.hash.clone(),
                Grant {
                    caller: Caller::of_token(&t, role),
                    expires_at: t.expires_at,
                },
            );
        }
    }
    let tokens = Arc::new(RwLock::new(tokens));
    let members = Arc::new(RwLock::new(state.members()));
    let (tx, rx) = mpsc::channel();
    // Backends wake the actor when a run ends; one wake queued at a time.
    let queued = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (tx, queued) = (tx.clone(), queued.clone());
        state.wake().set(move || {
            if !queued.swap(true, Ordering::AcqRel) {
                let _ = tx.send(Request::Wake);
            }
        });
    }
    let (publish, watcher) = watch::channel(publication(&state, &Histogram::default(), 0));
    let acked = Arc::new(AtomicU64::new(0));
    let handle = Handle {
        tx,
        published: watcher,
        tokens: tokens.clone(),
        members: members.clone(),
        acked: acked.clone(),
    };
    let thread = std::thread::Builder::new()
        .name("gantry-daemon".to_string())
        .spawn(move || {
            let mut actor = Actor {
                state,
                tokens,
                members,
                clock,
                last_step: Instant::now(),
                dirty: false,
                last_cycle: Instant::now(),
                cycle_cost: Duration::ZERO,
                cycle_cpu: Duration::ZERO,
                cycle_seconds: Histogram::default(),
                changes: 0,
                acked,
                reload: None,
                woken: false,
                queued,
                republish: false,
                submitting: false,
            };
            loop {
                if actor.run(&rx, &publish) {
                    // Hosts of a `gpu = "auto"` pool found GPUs: the fleet is rebuilt.
                    match actor.reopen(State::reopen_rediscovered) {
                        Ok(a) => {
                            actor = a;
                            actor.changed();
                            publish.send_replace(publication(
                                &actor.state,
                                &actor.cycle_seconds,
                                actor.changes,
                            ));
                            continue;
                        }
                        // Said through the daemon's messages (`reopen_rediscovered`): nothing
                        // to serve.
                        Err(_) => return,
                    }
                }
                let Some((cfg, force, reply)) = actor.reload.take() else {
                    return;
                };
                let mut said = Ok(String::new());
                match actor.reopen(|s| {
                    let (s, r) = s.reload(&cfg, force)?;
                    said = r;
                    Ok(s)
                }) {
                    Ok(a) => {
                        actor = a;
                        actor.changed();
                        let _ = reply.send(
                            said.map_err(|e| Refusal::new(Kind::Unprocessable, "invalid", e)),
                        );
                        publish.send_replace(publication(
                            &actor.state,
                            &actor.cycle_seconds,
                            actor.changes,
                        ));
                    }
                    Err(e) => {
                        // Not even the previous fleet file opens again: nothing to serve (the
                        // caller says why and stops the daemon).
                        let why = format!("reopening the state failed: {e}");
                        let _ = reply.send(Err(Refusal::new(Kind::Internal, "reopen-failed", why)));
                        return;
                    }
                }
            }
        })
        .map_err(|e| EngineError::NeverFits(format!("cannot start the daemon thread: {e}")))?;
    Ok((handle, thread))
}

struct Actor {
    /// Changes acknowledged so far, and the same count shared with readers.
    changes: u64,
    acked: Arc<AtomicU64>,
    state: State,
    tokens: Arc<RwLock<HashMap<String, Grant>>>,
    members: Arc<RwLock<HashMap<String, String>>>,
    clock: Clock,
    last_step: Instant,
    /// A change arrived since the last cycle.
    dirty: bool,
    last_cycle: Instant,
    /// The last cycle's whole cost (its publication included), on the wall clock and in the
    /// actor thread's CPU time.
    cycle_cost: Duration,
    cycle_cpu: Duration,
    /// Scheduling-cycle latency, for `/metrics`.
    cycle_seconds: Histogram,
    /// A fleet file to reopen the state over, once the run loop has returned.
    reload: Option<(Box<crate::config::fleet::FleetConfig>, bool, Reply<String>)>,
    /// A backend woke the actor: step as soon as the debounce allows.
    woken: bool,
    /// A wake is queued (cleared when it is read, so the next one is sent).
    queued: Arc<std::sync::atomic::AtomicBool>,
    /// The snapshot changed without a change that needs a cycle (services' measurements).
    republish: bool,
    /// Submissions were admitted since the last cycle: a burst the debounce yields to.
    submitting: bool,
}

/// While submissions arrive, cycles take at most one part in this many of the actor's wall
/// time (see `Actor::debounce`). It was one in five: on `gantry bench api --jobs 60000` (a
/// queue that grows to 60,000) cycles then took a quarter of the run and 40% of the actor's CPU — the snapshot rebuilt, every waiting job explained again — for a queue that
/// changed only by the jobs just admitted. One in ten halves that; what a job submitted in a
/// burst waits for its first cycle grows from four to nine times a cycle's cost (a 45 ms
/// cycle over 60,000 waiting jobs: 405 ms) while submissions keep coming, and ends 10 ms
/// after the last one (`BURST_QUIET`).
const BURST_CYCLE_SHARE: u32 = 10;

/// How long without a submission ends a burst. The burst's spacing protects submissions that
/// keep arriving; the last jobs of one must not wait nine cycles' time for their first cycle
/// once nothing else comes (on a loaded CI box a job submitted just after two others was still
/// unexplained well after they ran: `tests/daemon/accounting.rs`).
const BURST_QUIET: Duration = Duration::from_millis(10);

/// The least time before the next cycle after one that took `wall` (its actor thread's CPU:
/// `cpu`): see `Actor::debounce`.
fn debounce_after(submitting: bool, wall: Duration, cpu: Duration) -> Duration {
    let least = Duration::from_millis(10);
    if submitting {
        (wall * (BURST_CYCLE_SHARE - 1)).max(least)
    } else {
        (cpu * 2).max(least)
    }
}

/// The CPU time this thread has used.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the struct passed.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// What the actor publishes: the state's snapshot and counters, taken once.
/// What the API serves of `state` (and `/metrics`), as published after a change.
pub fn publication(state: &State, cycle_seconds: &Histogram, changes: u64) -> Arc<Published> {
    let (gpus, job_gpus) = state.gpu_metrics();
    Arc::new(Published {
        changes,
        snapshot: state.snapshot().clone(),
        counters: state.counters.clone(),
        cycle_seconds: cycle_seconds.clone(),
        gpus,
        job_gpus,
        project_spend: state.project_spend(),
        calendar: state.calendar().clone(),
        service_tokens: state.service_tokens(),
        mlflow: state.mlflow().clone(),
    })
}

impl Actor {
    /// The actor over the state `open` reopens (`State::reload`, `State::reopen_rediscovered`).
    fn reopen(
        self,
        open: impl FnOnce(State) -> Result<State, EngineError>,
    ) -> Result<Actor, EngineError> {
        let Actor {
            changes,
            acked,
            state,
            tokens,
            members,
            clock,
            cycle_seconds,
            queued,
            last_step,
            ..
        } = self;
        let state = open(state)?;
        // Who acts for which team on the socket, as the fleet file now in force says.
        if let Ok(mut m) = members.write() {
            *m = state.members();
        }
        Ok(Actor {
            changes,
            acked,
            state,
            tokens,
            members,
            clock,
            // The clock goes on from its last step: the time the reopening took is the
            // daemon's too (a run's bill counts it).
            last_step,
            dirty: true,
            last_cycle: Instant::now(),
            cycle_cost: Duration::ZERO,
            cycle_cpu: Duration::ZERO,
            cycle_seconds,
            reload: None,
            woken: true,
            queued,
            republish: false,
            submitting: false,
        })
    }

    /// Serves requests and steps the clock; returns true to have the state reopened with the
    /// GPUs hosts found (`State::wants_reopen`), false to stop or reload (`self.reload`).
    fn run(
        &mut self,
        rx: &mpsc::Receiver<Request>,
        publish: &watch::Sender<Arc<Published>>,
    ) -> bool {
        loop {
            let timer = self.clock.step.saturating_sub(self.last_step.elapsed());
            let timer = if self.woken {
                timer.min(self.debounce().saturating_sub(self.last_cycle.elapsed()))
            } else {
                timer
            };
            let wait = if self.dirty {
                timer.min(self.debounce().saturating_sub(self.last_cycle.elapsed()))
            } else {
                timer
            };
            // A burst's spacing lasts while submissions keep coming: listen for the next one
            // no longer than `BURST_QUIET`.
            let wait = if self.dirty && self.submitting {
                wait.min(BURST_QUIET)
            } else {
                wait
            };
            let mut batch = Vec::new();
            match rx.recv_timeout(wait) {
                Ok(first) => {
                    batch.push(first);
                    // Everything already queued goes in the same batch (one commit).
                    while batch.len() < 4096 {
                        match rx.try_recv() {
                            Ok(more) => batch.push(more),
                            Err(_) => break,
                        }
                    }
                }
                // Quiet that long: the burst is over, and the cycle its jobs wait for is spaced
                // as one without submissions.
                Err(RecvTimeoutError::Timeout) if wait >= BURST_QUIET => self.submitting = false,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return false,
            }
            if !self.handle_batch(batch) {
                return false;
            }
            let started = Instant::now();
            let cpu_before = thread_cpu();
            let due = self.last_step.elapsed() >= self.clock.step
                || (self.woken && self.last_cycle.elapsed() >= self.debounce());
            let stepped = if due {
                self.woken = false;
                let dt = self.last_step.elapsed().as_secs_f64() * self.clock.speed;
                self.last_step = Instant::now();
                Some(self.state.advance(dt))
            } else if self.dirty && self.last_cycle.elapsed() >= self.debounce() {
                Some(self.state.tick())
            } else {
                None
            };
            if let Some(result) = stepped {
                let took = started.elapsed();
                self.dirty = false;
                self.submitting = false;
                if let Err(e) = result {
                    self.state.warn(format!("scheduling cycle failed: {e}"));
                }
                self.cycle_seconds
                    .observe(&CYCLE_BUCKETS, took.as_secs_f64());
                // The old publication is dropped here when no reader holds it.
                drop(publish.send_replace(publication(
                    &self.state,
                    &self.cycle_seconds,
                    self.changes,
                )));
                // What the debounce spaces out is the actor's whole cost of a cycle, its
                // publication included.
                self.cycle_cost = started.elapsed();
                self.cycle_cpu = thread_cpu().saturating_sub(cpu_before);
                self.last_cycle = Instant::now();
                if self.state.wants_reopen() {
                    // Reopened outside the loop (see `start`).
                    return true;
                }
            } else if std::mem::take(&mut self.republish) {
                // Services' measurements changed and nothing else did: published without a
                // scheduling cycle (they arrive four times a second under load).
                publish.send_replace(publication(&self.state, &self.cycle_seconds, self.changes));
            }
        }
    }

    /// A change was applied: a cycle is due, and readers must wait for its publication.
    fn changed(&mut self) {
        self.dirty = true;
        self.changes += 1;
        self.acked.store(self.changes, Ordering::Release);
    }

    /// The least time between cycles triggered by changes. While submissions arrive, cycles
    /// take at most about a tenth of the actor's time (`BURST_CYCLE_SHARE`), so a burst of them is not starved by
    /// re-scheduling (a cycle over a long queue explains every waiting job again, and most
    /// of that work is the same from one cycle to the next): the wall clock, which is what a
    /// waiting submission feels. Without submissions, a freed GPU is filled as soon as a
    /// third of the actor's CPU allows: a cycle that waited for the disk (the journal's
    /// fsync) or for a core (a small box shared with Slurm's daemons and `sbatch`) took no
    /// CPU from anyone, and spacing the next by that wait left freed GPUs idle — on
    /// `scripts/slurm-compare.sh`, one slow cycle in ten held the next one back 250 ms.
    fn debounce(&self) -> Duration {
        debounce_after(self.submitting, self.cycle_cost, self.cycle_cpu)
    }

    /// Handles one batch; false when asked to stop.
    fn handle_batch(&mut self, batch: Vec<Request>) -> bool {
        let mut submissions = Vec::new();
        let mut replies = Vec::new();
        for req in batch {
            match req {
                Request::Submit { submission, reply } => {
                    submissions.push(submission);
                    replies.push(reply);
                }
                Request::Shutdown => {
                    self.flush_submissions(&submissions, replies);
                    return false;
                }
                Request::Reload { cfg, force, reply } => {
                    self.flush_submissions(&submissions, std::mem::take(&mut replies));
                    submissions.clear();
                    match cfg {
                        // The run loop returns; the state is reopened outside it.
                        Ok(cfg) => {
                            self.reload = Some((cfg, force, reply));
                            return false;
                        }
                        Err(why) => {
                            self.state.warn(format!(
                                "the edited fleet file was not applied: {why}; the previous one stays in force"
                            ));
                            self.changed();
                            let _ =
                                reply.send(Err(Refusal::new(Kind::Unprocessable, "invalid", why)));
                        }
                    }
                }
                Request::Wake => {
                    self.queued.store(false, Ordering::Release);
                    self.woken = true;
                }
                other => {
                    // Keep order: submissions before this request are admitted first.
                    self.flush_submissions(&submissions, std::mem::take(&mut replies));
                    submissions.clear();
                    self.handle(other);
                }
            }
        }
        self.flush_submissions(&submissions, replies);
        true
    }

    fn flush_submissions(&mut self, subs: &[Submission], replies: Vec<Reply<JobId>>) {
        if subs.is_empty() {
            return;
        }
        let answers = self.state.submit(subs);
        if answers.iter().any(Result::is_ok) {
            self.changed();
            self.submitting = true;
        }
        for (reply, answer) in replies.into_iter().zip(answers) {
            let _ = reply.send(answer.map_err(Refusal::from));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{debounce_after, thread_cpu};
    use std::time::Duration;

    /// A cycle that waited 200 ms for the disk or a core but burned 6 ms of CPU: without
    /// submissions the next may run 12 ms after it (it waited 400 ms before, freed GPUs
    /// idle meanwhile); while submissions arrive, the wall clock still spaces cycles.
    #[test]
    fn a_cycle_that_waited_does_not_hold_the_next_back_by_its_wait() {
        let (wall, cpu) = (Duration::from_millis(200), Duration::from_millis(6));
        assert_eq!(debounce_after(false, wall, cpu), Duration::from_millis(12));
        assert_eq!(debounce_after(true, wall, cpu), Duration::from_millis(1800));
        assert_eq!(
            debounce_after(false, wall, Duration::from_micros(300)),
            Duration::from_millis(10),
            "never closer than 10 ms"
        );
    }

    #[test]
    fn the_threads_cpu_time_counts_work_not_sleep() {
        let t0 = thread_cpu();
        std::thread::sleep(Duration::from_millis(50));
        let slept = thread_cpu() - t0;
        // Work bounded by the wall clock, so a clock that never moves fails, not hangs.
        let (t1, wall) = (thread_cpu(), std::time::Instant::now());
        let mut x = 0u64;
        while wall.elapsed() < Duration::from_millis(30) {
            x = x.wrapping_add(std::hint::black_box(1));
        }
        let worked = thread_cpu() - t1;
        assert!(x > 0);
        assert!(
            slept < Duration::from_millis(20),
            "{slept:?} of CPU in a sleep"
        );
        assert!(
            worked > slept,
            "{worked:?} of CPU in 30 ms of work, {slept:?} in a sleep"
        );
    }
}
