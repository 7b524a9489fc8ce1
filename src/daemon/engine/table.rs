//! The engine's jobs in memory, live and ended apart: every cycle walks the live ones (what
//! runs, what waits, what each team and user holds), and the window of finished jobs it keeps
//! for what follows an end must not make each of those walks longer (issue 68: with 5,000
//! finished jobs kept, the per-cycle work grew with the daemon's history).

use super::Job;
use crate::daemon::journal::JobId;
use std::collections::BTreeMap;

/// Boxed: a `Job` is over a kilobyte, and a B-tree's nodes hold eleven values each, about
/// half full when ids only grow and the oldest finished jobs leave from the front; the
/// slack cost more than a kilobyte per kept job (`gantry bench memory`).
#[derive(Default)]
pub(super) struct JobTable {
    live: BTreeMap<JobId, Box<Job>>,
    ended: BTreeMap<JobId, Box<Job>>,
}

impl JobTable {
    pub fn get(&self, id: &JobId) -> Option<&Job> {
        (self.live.get(id).or_else(|| self.ended.get(id))).map(|j| &**j)
    }

    /// A job to change. An ended job's state never changes (`JobState::can_become`); what
    /// may change is what it keeps (`Job::keep_as_finished`) and its bill.
    pub fn get_mut(&mut self, id: &JobId) -> Option<&mut Job> {
        match self.live.get_mut(id) {
            Some(j) => Some(&mut **j),
            None => self.ended.get_mut(id).map(|j| &mut **j),
        }
    }

    pub fn contains_key(&self, id: &JobId) -> bool {
        self.live.contains_key(id) || self.ended.contains_key(id)
    }

    pub fn insert(&mut self, id: JobId, job: Box<Job>) {
        if job.state.is_final() {
            self.live.remove(&id);
            self.ended.insert(id, job);
        } else {
            self.ended.remove(&id);
            self.live.insert(id, job);
        }
    }

    pub fn remove(&mut self, id: &JobId) -> Option<Box<Job>> {
        self.live.remove(id).or_else(|| self.ended.remove(id))
    }

    /// Moves a job that has just reached a final state among the ended ones.
    pub fn ended(&mut self, id: JobId) {
        if let Some(j) = self.live.remove(&id) {
            self.ended.insert(id, j);
        }
    }

    /// Jobs not finished (pending, held, running, preempting), by id.
    pub fn live(&self) -> impl Iterator<Item = &Job> {
        self.live.values().map(|j| &**j)
    }

    /// Every job in memory, by id.
    pub fn values(&self) -> impl Iterator<Item = &Job> {
        let mut live = self.live.values().peekable();
        let mut ended = self.ended.values().peekable();
        std::iter::from_fn(move || {
            let next = match (live.peek(), ended.peek()) {
                (Some(a), Some(b)) if a.id < b.id => live.next(),
                (Some(_), Some(_)) | (None, Some(_)) => ended.next(),
                (Some(_), None) => live.next(),
                (None, None) => None,
            };
            next.map(|j| &**j)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::JobState;

    fn job(id: JobId, state: JobState) -> Box<Job> {
        Box::new(Job::bare(id, state))
    }

    #[test]
    fn every_job_is_walked_by_id_and_the_live_ones_alone() {
        let mut t = JobTable::default();
        for (id, s) in [
            (5, JobState::Completed),
            (1, JobState::Pending),
            (3, JobState::Failed),
            (2, JobState::Running),
            (4, JobState::Pending),
        ] {
            t.insert(id, job(id, s));
        }
        let ids = |it: &mut dyn Iterator<Item = &Job>| it.map(|j| j.id).collect::<Vec<_>>();
        assert_eq!(ids(&mut t.values()), [1, 2, 3, 4, 5]);
        assert_eq!(ids(&mut t.live()), [1, 2, 4]);
        t.get_mut(&4).unwrap().state = JobState::Cancelled;
        t.ended(4);
        assert_eq!(ids(&mut t.live()), [1, 2]);
        assert_eq!(ids(&mut t.values()), [1, 2, 3, 4, 5]);
        assert_eq!(t.get(&4).map(|j| j.state), Some(JobState::Cancelled));
        assert!(t.remove(&3).is_some() && !t.contains_key(&3));
        assert_eq!(t.values().count(), 4);
    }
}
