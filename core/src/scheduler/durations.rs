//! How long a job will still run, from how long jobs like it ran: the history behind a start
//! estimate (ETA). Pure: the caller records each finished run's length and asks, for a job
//! that has run `ran_s` so far, what is left — the median of the past runs that lasted longer
//! than that (a job that has outlived most of its kind is likely a long one), with the
//! quartiles as its range.

use std::collections::VecDeque;

/// Past runs a history keeps, newest: old habits fade as a team's work changes.
pub const KEPT: usize = 512;

/// Past runs longer than what a job has run so far that an estimate needs; fewer, and the
/// caller asks a wider history (the job's team, then its class).
pub const ENOUGH: usize = 3;

/// What is left of a run, in seconds: `mid` the estimate, `lo`..`hi` its likely range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Left {
    pub lo: f64,
    pub mid: f64,
    pub hi: f64,
}

impl Left {
    /// A run that ends at once (nothing known is left).
    pub const NONE: Left = Left {
        lo: 0.0,
        mid: 0.0,
        hi: 0.0,
    };

    /// Exactly `s` left (a known end: a time limit).
    pub fn exactly(s: f64) -> Left {
        let s = s.max(0.0);
        Left {
            lo: s,
            mid: s,
            hi: s,
        }
    }

    /// The bound that a time limit puts on every part.
    pub fn capped(self, at_most: Option<f64>) -> Left {
        let Some(cap) = at_most else { return self };
        let cap = cap.max(0.0);
        Left {
            lo: self.lo.min(cap),
            mid: self.mid.min(cap),
            hi: self.hi.min(cap),
        }
    }
}

/// The lengths of one kind of job's past runs (seconds), the newest `KEPT` (or its own
/// capacity).
#[derive(Clone, Debug, Default)]
pub struct History {
    /// How many it keeps (0: `KEPT`).
    cap: usize,
    /// In the order they were recorded, to let the oldest go.
    order: VecDeque<f64>,
    /// The same, sorted, for the quantiles.
    sorted: Vec<f64>,
}

impl History {
    /// A history that keeps the newest `cap` runs (a narrow kind needs fewer to be sure).
    pub fn keeping(cap: usize) -> History {
        History {
            cap,
            ..History::default()
        }
    }

    pub fn record(&mut self, seconds: f64) {
        if !seconds.is_finite() || seconds < 0.0 {
            return;
        }
        let cap = if self.cap == 0 { KEPT } else { self.cap };
        if self.order.len() >= cap {
            if let Some(old) = self.order.pop_front() {
                let i = self.sorted.partition_point(|&x| x < old);
                if i < self.sorted.len() {
                    self.sorted.remove(i);
                }
            }
        }
        self.order.push_back(seconds);
        let i = self.sorted.partition_point(|&x| x <= seconds);
        self.sorted.insert(i, seconds);
    }

    pub fn len(&self) -> usize {
        self.sorted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.sorted.is_empty()
    }

    /// What is left of a run that has lasted `ran_s`: the quartiles of the past runs that lasted
    /// longer, less `ran_s`. `None` when fewer than `ENOUGH` did.
    pub fn left(&self, ran_s: f64) -> Option<Left> {
        let longer = &self.sorted[self.sorted.partition_point(|&x| x <= ran_s)..];
        if longer.len() < ENOUGH {
            return None;
        }
        let q = |p: f64| (crate::stats::quantile(longer, p) - ran_s).max(1.0);
        Some(Left {
            lo: q(0.25),
            mid: q(0.5),
            hi: q(0.75),
        })
    }

    /// What is left when this history knows runs of this kind but none as long as this one
    /// has already lasted: as long again as it has run (half to twice that as the range) —
    /// a run that has outlived its kind is as likely to end soon as to go on as long again.
    pub fn outlived(&self, ran_s: f64) -> Option<Left> {
        (self.sorted.len() >= ENOUGH && ran_s > 0.0).then(|| Left {
            lo: (ran_s / 2.0).max(1.0),
            mid: ran_s.max(1.0),
            hi: (2.0 * ran_s).max(1.0),
        })
    }
}

/// The estimate from the first history that knows enough, narrowest first (the job's own
/// kind, its team, its class, everyone), with the index of the one that answered. A run
/// that has outlived all of them is taken as going on as long again (`History::outlived`);
/// `fallback` is what a kind nobody has seen is given.
pub fn left_from<'a>(
    histories: impl IntoIterator<Item = &'a History> + Clone,
    ran_s: f64,
    fallback: f64,
) -> (Left, Option<usize>) {
    for (i, h) in histories.clone().into_iter().enumerate() {
        if let Some(l) = h.left(ran_s) {
            return (l, Some(i));
        }
    }
    for (i, h) in histories.into_iter().enumerate() {
        if let Some(l) = h.outlived(ran_s) {
            return (l, Some(i));
        }
    }
    let left = (fallback - ran_s).max(ran_s).max(1.0);
    (
        Left {
            lo: left / 2.0,
            mid: left,
            hi: left * 2.0,
        },
        None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn of(runs: &[f64]) -> History {
        let mut h = History::default();
        for &r in runs {
            h.record(r);
        }
        h
    }

    #[test]
    fn what_is_left_is_the_median_of_the_runs_that_lasted_longer() {
        let h = of(&[60.0, 120.0, 600.0, 3600.0, 7200.0, 36_000.0]);
        // Nothing run yet: the median of all six (nearest rank: 3600).
        assert_eq!(h.left(0.0).unwrap().mid, 3600.0);
        // Past ten minutes only 3600, 7200 and 36000 remain: 7200 − 700.
        let l = h.left(700.0).unwrap();
        assert_eq!(l.mid, 6500.0);
        assert!(l.lo <= l.mid && l.mid <= l.hi);
        // Past two hours, two runs lasted longer: not enough, so it has outlived them.
        assert!(h.left(7300.0).is_none());
        assert_eq!(h.outlived(7300.0).unwrap().mid, 7300.0);
    }

    #[test]
    fn a_history_keeps_its_newest_runs_only() {
        let mut h = History::default();
        for _ in 0..KEPT {
            h.record(10.0);
        }
        for _ in 0..KEPT {
            h.record(1000.0);
        }
        assert_eq!(h.len(), KEPT);
        assert_eq!(
            h.left(0.0).unwrap().mid,
            1000.0,
            "the old short runs are gone"
        );
        h.record(f64::NAN);
        h.record(-1.0);
        assert_eq!(h.len(), KEPT, "nonsense is not recorded");
    }

    #[test]
    fn the_narrowest_history_that_knows_enough_answers() {
        let own = of(&[100.0, 100.0]);
        let team = of(&[500.0, 500.0, 500.0]);
        let (l, from) = left_from([&own, &team], 0.0, 3600.0);
        assert_eq!((l.mid, from), (500.0, Some(1)));
        let (l, from) = left_from([&own, &team], 600.0, 3600.0);
        assert_eq!((l.mid, from), (600.0, Some(1)), "outlived its team's runs");
        let empty = History::default();
        let (l, from) = left_from([&empty], 0.0, 3600.0);
        assert_eq!((l.mid, from), (3600.0, None));
        assert_eq!(Left::exactly(50.0).capped(Some(20.0)).hi, 20.0);
    }
}
