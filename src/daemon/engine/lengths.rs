//! How long the fleet's runs last, learnt from the runs that completed: what a start estimate
//! (`Engine::present`) gives each running and waiting job as its end. The narrowest history
//! that knows enough answers — the same job name by the same user, then the user's, the
//! team's runs that asked the same time limit, the team's, the class's, everyone's — and a
//! time limit bounds it. (A limit is what its submitter expects, rounded up: the runs that
//! asked the same one are the likeliest to run alike — on the Philly replay this kind took
//! FIFO's p90 error for jobs that waited from 263 to 72 minutes.)
//!
//! Every byte is counted: a history keeps its newest runs only, and past `MAX_KINDS` job kinds
//! (or `MAX_USERS` users) a new one is not remembered on its own (its team's history stands in).

use super::Job;
use crate::scheduler::durations::{left_from, History, Left};
use std::collections::HashMap;

/// Job kinds (user, name) remembered on their own, at most.
const MAX_KINDS: usize = 4_096;
/// Users remembered on their own, at most.
const MAX_USERS: usize = 1_024;
/// Runs a kind's own history keeps.
const KIND_KEPT: usize = 32;
/// Runs a user's history keeps.
const USER_KEPT: usize = 128;
/// (team, time limit) kinds remembered on their own, at most.
const MAX_LIMITS: usize = 1_024;
/// Runs a (team, time limit) history keeps.
const LIMIT_KEPT: usize = 128;
/// What a run nothing like it has ever completed is taken to last.
pub const UNKNOWN_S: f64 = 3_600.0;

/// What an end was estimated from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Basis {
    Kind,
    User,
    SameLimit,
    Team,
    Class,
    Everyone,
    TimeLimit,
    Guess,
}

impl Basis {
    pub fn name(self) -> &'static str {
        match self {
            Basis::Kind => "the same job's past runs",
            Basis::User => "its user's past runs",
            Basis::SameLimit => "its team's past runs that asked the same time limit",
            Basis::Team => "its team's past runs",
            Basis::Class => "its class's past runs",
            Basis::Everyone => "the fleet's past runs",
            Basis::TimeLimit => "its time limit",
            Basis::Guess => "a guess (nothing like it has completed)",
        }
    }
}

/// A completed run's kind: who ran it, under what name, in which team and class, and the time
/// limit it asked.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run<'a> {
    pub user: Option<&'a str>,
    pub name: Option<&'a str>,
    pub team: Option<usize>,
    pub class: Option<usize>,
    pub limit: Option<f64>,
}

/// A time limit as a key: whole seconds (none for a limit that is not a positive number).
fn limit_key(limit: f64) -> Option<u64> {
    (limit.is_finite() && limit > 0.0).then(|| limit.round() as u64)
}

#[derive(Default)]
pub struct RunLengths {
    /// By user, then job name: looked up without building a key (a copy of the present asks
    /// for every live job).
    kinds: HashMap<String, HashMap<String, History>>,
    /// How many (user, name) kinds `kinds` holds.
    kind_count: usize,
    users: HashMap<String, History>,
    /// By team and the time limit asked (whole seconds).
    limits: HashMap<(usize, u64), History>,
    teams: HashMap<usize, History>,
    classes: HashMap<usize, History>,
    all: History,
}

impl RunLengths {
    /// A run of `seconds` completed; `limit`: the time limit it asked.
    pub fn record(&mut self, run: Run<'_>, seconds: f64) {
        let Run {
            user,
            name,
            team,
            class,
            limit,
        } = run;
        if let (Some(u), Some(n)) = (user, name) {
            let known = self.kinds.get(u).is_some_and(|by| by.contains_key(n));
            if known || self.kind_count < MAX_KINDS {
                let by_name = self.kinds.entry(u.to_string()).or_default();
                let h = by_name.entry(n.to_string()).or_insert_with(|| {
                    self.kind_count += 1;
                    History::keeping(KIND_KEPT)
                });
                h.record(seconds);
            }
        }
        if let Some(u) = user {
            if self.users.len() < MAX_USERS || self.users.contains_key(u) {
                let h = self.users.entry(u.to_string());
                h.or_insert_with(|| History::keeping(USER_KEPT))
                    .record(seconds);
            }
        }
        if let (Some(t), Some(l)) = (team, limit.and_then(limit_key)) {
            if self.limits.len() < MAX_LIMITS || self.limits.contains_key(&(t, l)) {
                let h = self.limits.entry((t, l));
                h.or_insert_with(|| History::keeping(LIMIT_KEPT))
                    .record(seconds);
            }
        }
        if let Some(t) = team {
            self.teams.entry(t).or_default().record(seconds);
        }
        if let Some(c) = class {
            self.classes.entry(c).or_default().record(seconds);
        }
        self.all.record(seconds);
    }

    /// What is left of `job`, which has run `ran_s` so far (0 for a waiting job), and what
    /// that rests on. A time limit bounds it (and is the estimate where no history knows).
    pub fn left(&self, job: &Job, ran_s: f64) -> (Left, Basis) {
        let none = History::default();
        let kind = match (&job.user, &job.name) {
            (Some(u), Some(n)) => self.kinds.get(u).and_then(|by| by.get(n)),
            _ => None,
        };
        let user = job.user.as_ref().and_then(|u| self.users.get(u));
        let same_limit = job
            .spec
            .time_limit_s
            .and_then(limit_key)
            .and_then(|l| self.limits.get(&(job.team, l)));
        let chain = [
            kind.unwrap_or(&none),
            user.unwrap_or(&none),
            same_limit.unwrap_or(&none),
            self.teams.get(&job.team).unwrap_or(&none),
            self.classes.get(&job.class).unwrap_or(&none),
            &self.all,
        ];
        let limit_left = job.spec.time_limit_s.map(|l| (l - ran_s).max(0.0));
        let (left, from) = left_from(chain, ran_s, UNKNOWN_S);
        let basis = match from {
            Some(0) => Basis::Kind,
            Some(1) => Basis::User,
            Some(2) => Basis::SameLimit,
            Some(3) => Basis::Team,
            Some(4) => Basis::Class,
            Some(_) => Basis::Everyone,
            None => match limit_left {
                Some(l) => return (Left::exactly(l), Basis::TimeLimit),
                None => Basis::Guess,
            },
        };
        // A limit below the whole estimate is the end: the job is stopped there.
        match limit_left {
            Some(l) if l < left.mid => (left.capped(Some(l)), Basis::TimeLimit),
            _ => (left.capped(limit_left), basis),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(user: &str, limit: Option<f64>) -> Run<'_> {
        Run {
            user: Some(user),
            name: None,
            team: Some(0),
            class: Some(0),
            limit,
        }
    }

    #[test]
    fn a_teams_runs_that_asked_the_same_limit_answer_before_the_whole_team() {
        let mut l = RunLengths::default();
        for _ in 0..5 {
            l.record(run("ann", Some(3_600.0)), 3_000.0);
            l.record(run("ann", Some(86_400.0)), 60_000.0);
        }
        let mut job = Job {
            user: Some("bob".into()),
            ..Job::bare(1, crate::api::JobState::Pending)
        };
        job.spec.time_limit_s = Some(86_400.0);
        let (left, basis) = l.left(&job, 0.0);
        assert_eq!(basis, Basis::SameLimit);
        assert_eq!(left.mid, 60_000.0);
        job.spec.time_limit_s = Some(3_600.0);
        let (left, basis) = l.left(&job, 0.0);
        assert_eq!((left.mid, basis), (3_000.0, Basis::SameLimit));
        // A limit nobody asked: the team's runs, bounded by the limit.
        job.spec.time_limit_s = Some(7_200.0);
        let (left, basis) = l.left(&job, 0.0);
        assert_eq!((left.mid, basis), (7_200.0, Basis::TimeLimit));
        job.spec.time_limit_s = None;
        assert_eq!(l.left(&job, 0.0).1, Basis::Team);
    }
}
