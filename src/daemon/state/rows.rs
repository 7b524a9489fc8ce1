//! The snapshot's job rows. A live job's row is built afresh for each snapshot (where it runs,
//! why it waits, what it costs all move); a finished job's row never changes (a final state
//! goes nowhere), so it is built once and carried from one snapshot to the next, also after
//! the engine has let the job itself go. The engine keeps the last `engine::HISTORY_KEPT`
//! finished jobs whole (about 1.5 KB each); the listings show the last `LISTED_FINISHED` as
//! rows (about 0.5 KB each), so neither a daemon's memory nor the work of each snapshot
//! follows its history (issue 68: the rows of 5,000 finished jobs were rebuilt at every
//! cycle, each from a whole job kept for nothing else, and the daemon grew until 5,000 had
//! ended).

use super::view::state_order;
use crate::api::{JobRow, Snapshot};
use crate::daemon::engine::{Engine, Job};
use crate::daemon::journal::JobId;
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Finished jobs the listings show (the newest to finish), within `LISTED_FOR_S`; older ones
/// are in `gantry history` (the journal). A listed row is about 0.5 KB: `gantry bench ssh
/// --rounds 6` grew by 1.5 MiB over five rounds of 1,000 jobs with 1,000 listed and by
/// 3.3 MiB with 5,000 (issue 68).
pub const LISTED_FINISHED: usize = 2_000;

/// A finished job is listed for this long after its submission.
const LISTED_FOR_S: f64 = 6.0 * 3600.0;

/// Which finished jobs have a row, in the order they were first seen finished: the oldest
/// leave once `LISTED_FINISHED` are listed.
#[derive(Debug)]
pub(super) struct Listed {
    order: VecDeque<JobId>,
    ids: HashSet<JobId>,
    most: usize,
}

impl Default for Listed {
    fn default() -> Self {
        Listed {
            order: VecDeque::new(),
            ids: HashSet::new(),
            most: LISTED_FINISHED,
        }
    }
}

impl Listed {
    fn saw(&mut self, id: JobId) {
        if self.ids.insert(id) {
            self.order.push_back(id);
        }
        while self.order.len() > self.most {
            if let Some(old) = self.order.pop_front() {
                self.ids.remove(&old);
            }
        }
    }

    fn holds(&self, id: JobId) -> bool {
        self.ids.contains(&id)
    }
}

/// The finished jobs' rows of the snapshot being replaced, newest job first (the snapshot's
/// order), shared with it: a finished row is built once and every later snapshot holds the
/// same one. (Copied whole, the 2,000 listed rows were some 20,000 allocations at every
/// cycle, since the published snapshot is always still held when the next is built.)
pub(super) fn finished_rows_of(previous: &Snapshot) -> Vec<Arc<JobRow>> {
    (previous.jobs.iter())
        .filter(|r| state_order(&r.state) == 3)
        .cloned()
        .collect()
}

/// Every job's row, in the snapshot's order: the live jobs' built now by `build`, the
/// finished ones' taken from `kept` (the last snapshot's, newest job first) where they are
/// there, built once where not.
pub(super) fn job_rows(
    (engine, now): (&Engine, f64),
    mut kept: Vec<Arc<JobRow>>,
    listed: &mut Listed,
    mut build: impl FnMut(&Job) -> JobRow,
) -> Vec<Arc<JobRow>> {
    let recent = |submitted: f64| now - submitted < LISTED_FOR_S;
    let mut rows = Vec::new();
    for j in engine.jobs() {
        if !j.state.is_final() {
            rows.push(Arc::new(build(j)));
            continue;
        }
        // A final state goes nowhere: a row kept for the job is its row still.
        let have = kept.binary_search_by(|r| j.id.cmp(&r.id)).is_ok();
        if !have && recent(j.submitted_at) {
            listed.saw(j.id);
            rows.push(Arc::new(build(j)));
        }
    }
    // The kept rows, of jobs in memory or not (the journal has them whole), while listed.
    kept.retain(|r| r.submitted_s.is_some_and(recent));
    // No doubling: thousands of rows of slack would stay with every snapshot.
    kept.reserve_exact(rows.len());
    kept.extend(rows);
    kept.retain(|r| state_order(&r.state) != 3 || listed.holds(r.id));
    // What waits first (in queue position), then what is held, what runs, what ended; the
    // newest first within each.
    kept.sort_by_key(|r| {
        (
            state_order(&r.state),
            r.position.unwrap_or(usize::MAX),
            -r.id,
        )
    });
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A finished job's row is the same row in every snapshot that lists it, not a copy
    /// (the published snapshot is still held when the next is built).
    #[test]
    fn finished_rows_are_shared_from_snapshot_to_snapshot() {
        let row = |id, state: &str| {
            Arc::new(JobRow {
                id,
                state: state.into(),
                ..JobRow::default()
            })
        };
        let previous = Arc::new(Snapshot {
            jobs: vec![row(3, "running"), row(2, "completed"), row(1, "failed")],
            ..Snapshot::default()
        });
        let held = previous.clone();
        let kept = finished_rows_of(&previous);
        assert_eq!(kept.iter().map(|r| r.id).collect::<Vec<_>>(), [2, 1]);
        assert!(Arc::ptr_eq(&kept[0], &held.jobs[1]) && Arc::ptr_eq(&kept[1], &held.jobs[2]));
    }

    #[test]
    fn the_first_to_finish_leave_the_listing_first() {
        let mut l = Listed {
            most: 3,
            ..Listed::default()
        };
        // Seen finished in this order (ids need not be: a long job ends after later ones).
        for id in [7, 2, 9, 2, 4] {
            l.saw(id);
        }
        assert_eq!(l.order, [2, 9, 4]);
        assert!(!l.holds(7) && l.holds(2) && l.holds(9) && l.holds(4));
    }
}
