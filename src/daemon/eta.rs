//! Start estimates, made off the actor. The actor hands a copy of the present
//! (`Engine::present`) to one worker thread at most every `EVERY_S` and only when the worker
//! is idle (single flight: copies never pile up); the worker runs the scheduling cycle forward
//! three times — each job ending as its kind's history says, early and late — within a time
//! box, and leaves the estimates where the snapshot reads them.

use crate::api::{Eta, StartMove, TeamMove, WhatIf};
use crate::daemon::calendar::Calendar;
use crate::daemon::engine::{Basis, Copy};
use crate::daemon::journal::JobId;
use crate::scheduler::durations::Left;
use crate::scheduler::forecast::{forward, Ahead, Change, Reach};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often, on the daemon's clock, the estimates are made again.
pub const EVERY_S: f64 = 2.0;

/// What one set of estimates may take, its three forward runs together (the middle one, the
/// estimate itself, gets 60%). Off the actor; and the next set waits at least as long as the
/// last took, so the worker holds at most half a core.
pub const TIME_BOX: Duration = Duration::from_millis(3000);

/// What one preview (`--dry-run`, a confirmation's, a submission's) may take: its two forward
/// runs, off the actor.
pub const PREVIEW_BOX: Duration = Duration::from_millis(3000);

/// Every waiting job's estimate, from one copy of the present.
#[derive(Clone, Debug, Default)]
pub struct Estimates {
    pub made_s: f64,
    pub by_job: HashMap<JobId, Eta>,
    /// Wall time the three runs took, and how the middle one ended.
    pub took: Duration,
    pub stopped: &'static str,
    pub cycles: usize,
}

/// The worker and what it left last.
pub struct Forecaster {
    tx: SyncSender<(Copy, Calendar)>,
    latest: Arc<Mutex<Arc<Estimates>>>,
    busy: Arc<AtomicBool>,
    last_sent: f64,
}

/// The share of the time box each run has used by its end: the estimate, early, late.
const SHARES: [f64; 3] = [0.6, 0.8, 1.0];

impl Forecaster {
    pub fn start() -> Forecaster {
        let (tx, rx) = sync_channel::<(Copy, Calendar)>(1);
        let latest = Arc::new(Mutex::new(Arc::new(Estimates::default())));
        let busy = Arc::new(AtomicBool::new(false));
        let (out, flag) = (latest.clone(), busy.clone());
        let spawned = std::thread::Builder::new()
            .name("gantry-eta".to_string())
            .spawn(move || {
                // Ends when the state (and its sender) is dropped.
                while let Ok((copy, calendar)) = rx.recv() {
                    let made = estimate(copy, &calendar, TIME_BOX);
                    if let Ok(mut l) = out.lock() {
                        *l = Arc::new(made);
                    }
                    flag.store(false, Ordering::Release);
                }
            });
        if spawned.is_err() {
            // No thread: no estimates (the rows say nothing), the daemon runs on.
            busy.store(true, Ordering::Release);
        }
        Forecaster {
            tx,
            latest,
            busy,
            last_sent: f64::NEG_INFINITY,
        }
    }

    /// Whether a copy of the present is wanted now (the worker idle, the last one not fresh).
    pub fn due(&self, now: f64) -> bool {
        let took = self.latest().took.as_secs_f64();
        now - self.last_sent >= EVERY_S.max(2.0 * took) && !self.busy.load(Ordering::Acquire)
    }

    pub fn send(&mut self, now: f64, copy: Copy, calendar: Calendar) {
        self.busy.store(true, Ordering::Release);
        match self.tx.try_send((copy, calendar)) {
            Ok(()) => self.last_sent = now,
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.busy.store(false, Ordering::Release);
            }
        }
    }

    /// The estimates made last.
    pub fn latest(&self) -> Arc<Estimates> {
        self.latest
            .lock()
            .map(|l| l.clone())
            .unwrap_or_else(|p| p.into_inner().clone())
    }
}

/// Runs the present forward — with each job's estimated end, then early, then late — and says
/// when each waiting job starts. `budget` bounds the wall time of the three runs together.
pub fn estimate(copy: Copy, calendar: &Calendar, budget: Duration) -> Estimates {
    let began = Instant::now();
    let now = copy.present.now;
    let pick = |f: fn(&Left) -> f64| {
        let left = &copy.left;
        move |id: u64| left.get(&id).map_or(0.0, |(l, _)| f(l))
    };
    let run = |part: usize, left: &dyn Fn(u64) -> f64| -> Ahead {
        let until = began + budget.mul_f64(SHARES[part]);
        let mut stop = || Instant::now() >= until;
        forward(copy.present.clone(), left, Reach::default(), &mut stop).unwrap_or_default()
    };
    let mid = run(0, &pick(|l| l.mid));
    let lo = run(1, &pick(|l| l.lo));
    let hi = run(2, &pick(|l| l.hi));
    // What the running jobs' ends rest on, counted: the same for every waiting job.
    let mut bases: Vec<(Basis, usize)> = Vec::new();
    for r in &copy.present.running {
        if let Some((_, b)) = copy.left.get(&r.id) {
            match bases.iter_mut().find(|(k, _)| k == b) {
                Some((_, n)) => *n += 1,
                None => bases.push((*b, 1)),
            }
        }
    }
    bases.sort_by_key(|(_, n)| std::cmp::Reverse(*n));
    let ends = if bases.is_empty() {
        "nothing runs".to_string()
    } else {
        let parts: Vec<String> = bases
            .iter()
            .map(|(b, n)| format!("{n} by {}", b.name()))
            .collect();
        format!("running jobs' ends: {}", parts.join(", "))
    };
    let mut by_job = HashMap::new();
    for p in &copy.present.pending {
        let id = p.id as JobId;
        let own = copy
            .left
            .get(&p.id)
            .map_or("", |(_, b)| b.name())
            .to_string();
        let mut eta = Eta {
            made_s: now,
            basis: format!("{ends}; its own run: {own}"),
            ..Eta::default()
        };
        if let Some(why) = copy.never.get(&id) {
            eta.never = Some(why.clone());
        } else if let Some(&at) = mid.starts.get(&p.id) {
            eta.at_s = Some(at);
            eta.at = Some(calendar.rfc3339(at));
            let seen = [Some(at), lo.starts.get(&p.id).copied()];
            eta.lo_s = seen.into_iter().flatten().min_by(f64::total_cmp);
            eta.hi_s = hi.starts.get(&p.id).map(|&h| h.max(at));
        } else if mid.stopped == "nothing ends" {
            eta.never = Some("it does not fit, and nothing running frees room for it".into());
        } else {
            eta.later_than_s = Some(mid.looked_to);
        }
        by_job.insert(id, eta);
    }
    Estimates {
        made_s: now,
        by_job,
        took: began.elapsed(),
        stopped: mid.stopped,
        cycles: mid.cycles,
    }
}

/// What previewing an action needs, copied off the actor (`State::what_if_work`).
pub struct WhatIfWork {
    pub copy: Copy,
    /// Taken together, in order.
    pub changes: Vec<Change>,
    /// The action in words (`hold`, `prio production`).
    pub action: String,
    /// The jobs it is taken on (the first is the preview's `job`).
    pub jobs: Vec<JobId>,
    pub calendar: Calendar,
    /// The live jobs' names, and the teams' in the engine's order.
    pub names: HashMap<JobId, String>,
    pub teams: Vec<String>,
}

impl WhatIfWork {
    /// The preview, within `budget` (off the actor: it runs the cycle forward twice).
    pub fn run(self, budget: Duration) -> Result<WhatIf, String> {
        what_if(self, budget)
    }

    /// A submission's preview with what submitting it would do (none where that could not be
    /// run: the preview itself stands).
    pub fn attach(self, mut preview: crate::api::Preview, budget: Duration) -> crate::api::Preview {
        preview.what_if = self.run(budget).ok().map(Box::new);
        preview
    }
}

/// What an action would do: the present run forward without it and with it, each within
/// half of `budget`, and the difference.
fn what_if(work: WhatIfWork, budget: Duration) -> Result<WhatIf, String> {
    let WhatIfWork {
        copy: before,
        changes,
        action,
        jobs,
        calendar,
        names,
        teams,
    } = work;
    let mut after = before.present.clone();
    let submitted: Vec<u64> = changes
        .iter()
        .filter_map(|c| match c {
            Change::Submit(j) => Some(j.id),
            _ => None,
        })
        .collect();
    for change in changes {
        after.apply(change)?;
    }
    let began = Instant::now();
    let left = |id: u64| before.left.get(&id).map_or(0.0, |(l, _)| l.mid);
    let run = |present, share: f64| -> Ahead {
        let until = began + budget.mul_f64(share);
        let mut stop = || Instant::now() >= until;
        forward(present, &left, Reach::default(), &mut stop).unwrap_or_default()
    };
    let was = run(before.present.clone(), 0.5);
    let will = run(after, 1.0);
    let now = before.present.now;
    let mut ids: Vec<u64> = before.present.pending.iter().map(|p| p.id).collect();
    ids.extend(before.present.requeue.keys().copied());
    ids.extend(submitted);
    ids.sort_unstable();
    ids.dedup();
    let mut starts = Vec::new();
    for id in ids {
        let (b, a) = (was.starts.get(&id).copied(), will.starts.get(&id).copied());
        let moved = match (b, a) {
            (Some(b), Some(a)) => (a - b).abs() >= 60.0,
            (None, None) => false,
            _ => true,
        };
        if moved {
            let jid = id as JobId;
            starts.push(StartMove {
                job: jid,
                name: names.get(&jid).cloned().unwrap_or_default(),
                before_s: b,
                after_s: a,
                before: b.map(|t| calendar.rfc3339(t)),
                after: a.map(|t| calendar.rfc3339(t)),
            });
        }
    }
    starts.sort_by(|x, y| {
        let k = |m: &StartMove| m.after_s.unwrap_or(f64::INFINITY);
        k(x).total_cmp(&k(y)).then(x.job.cmp(&y.job))
    });
    let teams_moved = teams
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let g = |a: &Ahead| a.team_gpus.get(i).copied().unwrap_or(0.0);
            let (b, a) = (g(&was), g(&will));
            ((a - b).abs() >= 0.001).then(|| TeamMove {
                team: t.clone(),
                gpus_before: b,
                gpus_after: a,
            })
        })
        .collect();
    Ok(WhatIf {
        action,
        job: jobs.first().copied().unwrap_or_default(),
        also: jobs.get(1..).unwrap_or_default().to_vec(),
        made_s: now,
        starts,
        dollars_per_hour_before: was.dollars_per_hour,
        dollars_per_hour_after: will.dollars_per_hour,
        teams: teams_moved,
        looked_to_s: was.looked_to.min(will.looked_to),
        basis: "each run ends as the runs like it that completed did; nobody new arrives".into(),
    })
}
