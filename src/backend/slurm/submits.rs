//! The Slurm worker's submissions in flight. Each part's `sbatch` runs on a thread of its own
//! (at most `SUBMITTERS` at once) and answers on the worker's channel, so the worker goes on
//! reading the runs' ends while Slurm takes parts: an `sbatch` takes 50–60 ms on a busy
//! controller, and an end read that waits for it is a GPU standing idle (issue 39).
//!
//! A command about a part whose `sbatch` has not answered (a stop, a kill, a forget) waits
//! here and is replayed in order once the answer is in, so it never finds no run.

use super::batch::{self, Submit};
use super::runner::{Cmd, RunKey};
use crate::backend::Launch;
use std::collections::{HashMap, VecDeque};
use std::sync::mpsc::Sender;
use std::time::Instant;

/// At most this many `sbatch` at once: the parts one cycle starts are submitted together.
const SUBMITTERS: usize = 16;

pub(super) struct Submits {
    /// Where each `sbatch`'s answer goes (the worker's own channel).
    answers: Sender<Cmd>,
    /// Parts waiting for a submitter, in the order they were asked for.
    queued: VecDeque<(usize, Box<Launch>)>,
    /// Every part asked for and not answered yet, with the commands about it that came
    /// meanwhile: those not `queued` are being submitted.
    held: HashMap<RunKey, Vec<Cmd>>,
}

impl Submits {
    pub(super) fn new(answers: Sender<Cmd>) -> Submits {
        Submits {
            answers,
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
            let spawned = std::thread::Builder::new()
                .name("slurm-sbatch".into())
                .spawn(move || {
                    let r = batch::sbatch(&submit, &node, &l);
                    let _ = answers.send(Cmd::Submitted(answer, r, Instant::now()));
                });
            if let Err(e) = spawned {
                let why = Err(format!("cannot start a thread for sbatch: {e}"));
                let _ = self.answers.send(Cmd::Submitted(key, why, Instant::now()));
            }
        }
    }
}
