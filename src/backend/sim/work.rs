//! What a simulated job's process does when a what-if run (`gantry sim`) says so: how much
//! work it has, how often it checkpoints, what a restart costs it, and what it is worth — and
//! the books of what every run of it did (busy and useful GPU-time).
//!
//! The daemon knows none of this about a real job (it sees processes start and end); here it
//! is the model of the process, so it lives in the simulated backend, beside the runner that
//! plays the process. `gantry sim` writes each job's model into the book as it submits it, and
//! reads the book's totals when the window closes. A job the book does not know runs as the
//! demo's runs do (`SimPool`'s own draws).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One job's process, as modelled.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkModel {
    /// What the what-if run sums useful time by (its kind of work).
    pub tag: usize,
    /// Seconds of work to finish (services and notebooks: until they are closed).
    pub work_s: f64,
    /// Busy this long after each start, then idle until the work ends (a notebook left
    /// open); `work_s` otherwise.
    pub active_s: f64,
    /// Saves its progress this often (seconds); on a stop signal it saves at once.
    pub checkpoint_s: Option<f64>,
    /// Loading a checkpoint after a restart: busy, not useful.
    pub restore_s: f64,
    /// Useful milli-GPU while busy, for the whole gang.
    pub useful_milli: u32,
    /// Whatever it ran for is kept (a service serves; a notebook's user worked).
    pub keeps_all: bool,
}

/// How a run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// Its work was done.
    Finished,
    /// A stop signal: a job that checkpoints saves its progress before it exits.
    Stopped,
    /// Killed outright (its node went, a cancel): progress since the last periodic
    /// checkpoint is lost.
    Killed,
    /// The what-if window closed: what it did so far counts.
    WindowClosed,
}

#[derive(Clone, Debug)]
struct Open {
    started: f64,
    /// Restore time at the head of this run.
    overhead: f64,
}

/// The books: each job's model, its saved progress and open run, and the totals.
#[derive(Debug, Default)]
pub struct Books {
    models: HashMap<i64, WorkModel>,
    /// Seconds of work still to do, per job (absent: all of it).
    remaining: HashMap<i64, f64>,
    first_start: HashMap<i64, f64>,
    open: HashMap<i64, Open>,
    /// GPU-seconds busy (restores and lost work included).
    pub busy_gpu_s: f64,
    /// GPU-seconds whose work was kept.
    pub useful_gpu_s: f64,
    /// Useful GPU-seconds by the models' tags.
    pub useful_by_tag: HashMap<usize, f64>,
}

/// The books, shared by every pool's runner and the what-if run that reads them.
#[derive(Clone, Debug, Default)]
pub struct WorkBook(Arc<Mutex<Books>>);

impl WorkBook {
    fn books(&self) -> std::sync::MutexGuard<'_, Books> {
        // A runner that panicked mid-entry leaves numbers, not broken invariants.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Job `job`'s process follows `model` from its next start on.
    pub fn model(&self, job: i64, model: WorkModel) {
        self.books().models.insert(job, model);
    }

    /// A run of `job` starts at `now`: how long it runs by itself and when its GPUs go
    /// quiet (seconds after the start), or `None` when the book does not model the job.
    pub fn begin(&self, job: i64, now: f64) -> Option<(f64, Option<f64>)> {
        let mut b = self.books();
        let m = b.models.get(&job)?.clone();
        let remaining = b.remaining.get(&job).copied().unwrap_or(m.work_s);
        let overhead = if remaining < m.work_s && !m.keeps_all {
            m.restore_s
        } else {
            0.0
        };
        b.first_start.entry(job).or_insert(now);
        b.open.insert(
            job,
            Open {
                started: now,
                overhead,
            },
        );
        let idle_after = (m.active_s < m.work_s).then_some(m.active_s);
        Some((overhead + remaining, idle_after))
    }

    /// The run of `job` ended at `at`, as `how` says: the books take its busy and useful
    /// time, and the work it kept.
    pub fn end(&self, job: i64, at: f64, how: Ended) {
        let mut b = self.books();
        let Some(run) = b.open.remove(&job) else {
            return;
        };
        let Some(m) = b.models.get(&job).cloned() else {
            return;
        };
        let remaining = b.remaining.get(&job).copied().unwrap_or(m.work_s);
        let ran = (at - run.started).max(0.0);
        let progress = (ran - run.overhead).max(0.0);
        let kept = match how {
            Ended::Finished | Ended::WindowClosed => progress,
            _ if m.keeps_all => progress,
            Ended::Stopped if m.checkpoint_s.is_some() => progress,
            Ended::Stopped | Ended::Killed => {
                m.checkpoint_s.map_or(0.0, |c| (progress / c).floor() * c)
            }
        };
        let busy_s = if m.active_s < m.work_s {
            ran.min(m.active_s)
        } else {
            ran
        };
        let useful_s = if m.keeps_all {
            busy_s
        } else {
            kept.min(remaining)
        };
        let rate = f64::from(m.useful_milli) / 1000.0;
        b.busy_gpu_s += rate * busy_s;
        b.useful_gpu_s += rate * useful_s;
        *b.useful_by_tag.entry(m.tag).or_default() += rate * useful_s;
        let left = if how == Ended::Finished {
            0.0
        } else {
            (remaining - kept).max(0.0)
        };
        b.remaining.insert(job, left);
    }

    /// Closes the books at `at`: every run still going counts what it did so far.
    pub fn close(&self, at: f64) {
        let open: Vec<i64> = self.books().open.keys().copied().collect();
        for job in open {
            self.end(job, at, Ended::WindowClosed);
        }
    }

    /// When `job` first started, if it has.
    pub fn first_start(&self, job: i64) -> Option<f64> {
        self.books().first_start.get(&job).copied()
    }

    /// Reads the totals.
    pub fn read<T>(&self, f: impl FnOnce(&Books) -> T) -> T {
        f(&self.books())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn training() -> WorkModel {
        WorkModel {
            tag: 0,
            work_s: 10_000.0,
            active_s: 10_000.0,
            checkpoint_s: Some(1_800.0),
            restore_s: 120.0,
            useful_milli: 8_000,
            keeps_all: false,
        }
    }

    #[test]
    fn a_kill_loses_the_work_since_the_last_checkpoint_and_a_restart_pays_its_restore() {
        let book = WorkBook::default();
        book.model(1, training());
        assert_eq!(book.begin(1, 0.0), Some((10_000.0, None)));
        book.end(1, 4_000.0, Ended::Killed);
        // 4,000 s busy on 8 GPUs; 3,600 s kept (two checkpoints).
        let (busy, useful) = book.read(|b| (b.busy_gpu_s, b.useful_gpu_s));
        assert_eq!((busy, useful), (8.0 * 4_000.0, 8.0 * 3_600.0));
        // 6,400 s left, after a 120 s restore.
        assert_eq!(book.begin(1, 5_000.0), Some((6_520.0, None)));
        book.end(1, 5_000.0 + 6_520.0, Ended::Finished);
        let useful = book.read(|b| b.useful_gpu_s);
        assert_eq!(useful, 8.0 * 10_000.0, "all the work, once");
        assert_eq!(book.first_start(1), Some(0.0));
    }

    #[test]
    fn a_stop_signal_saves_a_checkpointing_job_and_not_one_without() {
        let book = WorkBook::default();
        book.model(1, training());
        book.model(
            2,
            WorkModel {
                checkpoint_s: None,
                ..training()
            },
        );
        book.begin(1, 0.0);
        book.begin(2, 0.0);
        book.end(1, 1_000.0, Ended::Stopped);
        book.end(2, 1_000.0, Ended::Stopped);
        assert_eq!(book.begin(1, 2_000.0), Some((9_120.0, None)));
        assert_eq!(book.begin(2, 2_000.0), Some((10_000.0, None)));
    }

    #[test]
    fn a_notebook_is_busy_then_idle_and_what_it_did_is_kept() {
        let book = WorkBook::default();
        book.model(
            3,
            WorkModel {
                tag: 3,
                work_s: 6.0 * 3600.0,
                active_s: 2.0 * 3600.0,
                checkpoint_s: None,
                restore_s: 120.0,
                useful_milli: 600,
                keeps_all: true,
            },
        );
        assert_eq!(book.begin(3, 0.0), Some((6.0 * 3600.0, Some(2.0 * 3600.0))));
        book.end(3, 3.0 * 3600.0, Ended::Killed);
        let (busy, useful) = book.read(|b| (b.busy_gpu_s, b.useful_gpu_s));
        assert!((busy - 0.6 * 7200.0).abs() < 1e-9 && (useful - busy).abs() < 1e-9);
        assert_eq!(book.begin(4, 0.0), None, "a job the book does not model");
    }
}
