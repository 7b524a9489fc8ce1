//! One cycle's quota bookkeeping, in milli-GPU: what each team holds (guaranteed and
//! borrowed, per GPU model), and what it may take or borrow next.
//!
//! A cycle asks `admit` for every waiting job it walks — at 100,000 waiting, mostly for teams
//! already at their limit — so what a team may borrow is read from its cohort's members
//! (numbered once per cycle) and a running total, not from every team's cohort name.

use super::cycle::{CycleInput, PendingReason, RunningJob};
use super::hash::FastHash;
use crate::model::{Health, Placement, Team, MILLI_PER_GPU};
use std::collections::HashMap;

pub(super) struct Quotas<'a> {
    teams: &'a [Team],
    pub(super) used: Vec<u64>,
    /// The part of `used` that runs on borrowed capacity (a start is borrowed as a whole).
    borrowed: Vec<u64>,
    /// `borrowed` summed.
    borrowed_total: u64,
    /// Milli-GPU in use per (team, GPU model), for per-model guarantees.
    used_by_model: HashMap<(usize, u16), u64, FastHash>,
    /// Healthy capacity that no team is guaranteed: anyone may borrow it.
    unclaimed: u64,
    /// Each team's cohort's members that lend (those with a quota), or `None` without one.
    cohort: Vec<Option<usize>>,
    members: Vec<Vec<usize>>,
}

/// Milli-GPU of `gpus` whole GPUs.
fn milli(gpus: u32) -> u64 {
    u64::from(gpus) * u64::from(MILLI_PER_GPU)
}

impl<'a> Quotas<'a> {
    /// What the running jobs of `input` hold; `model_of` names the GPU model a placement is on.
    pub(super) fn of(input: &CycleInput<'a>, model_of: &dyn Fn(&Placement) -> Option<u16>) -> Self {
        let healthy: u64 = input
            .cluster
            .fleet()
            .nodes
            .iter()
            .filter(|n| n.health == Health::Healthy)
            .map(|n| n.gpus.len() as u64 * u64::from(MILLI_PER_GPU))
            .sum();
        let guaranteed: u64 = input
            .teams
            .iter()
            .filter_map(|t| t.quota.as_ref())
            .map(|q| milli(q.guaranteed))
            .sum();
        let mut names: Vec<&str> = Vec::new();
        let mut members: Vec<Vec<usize>> = Vec::new();
        let cohort = input
            .teams
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let name = t.cohort.as_deref()?;
                let c = names.iter().position(|n| *n == name).unwrap_or_else(|| {
                    names.push(name);
                    members.push(Vec::new());
                    names.len() - 1
                });
                if t.quota.is_some() {
                    members[c].push(i);
                }
                Some(c)
            })
            .collect();
        let mut q = Quotas {
            teams: input.teams,
            used: vec![0; input.teams.len()],
            borrowed: vec![0; input.teams.len()],
            borrowed_total: 0,
            used_by_model: HashMap::default(),
            unclaimed: healthy.saturating_sub(guaranteed),
            cohort,
            members,
        };
        for r in input.running {
            q.charge(
                r.team,
                model_of(&r.placement),
                r.placement.gpu_milli(),
                r.borrowed,
            );
        }
        q
    }

    pub(super) fn guarantee(&self, t: usize) -> Option<u64> {
        self.teams[t].quota.as_ref().map(|q| milli(q.guaranteed))
    }

    /// What team `t` may borrow now: its cohort's idle guarantees plus capacity nobody is
    /// guaranteed, net of everything any team already borrows (conservative: never over-lends).
    fn lendable(&self, t: usize) -> u64 {
        let Some(cohort) = self.cohort[t] else {
            return self.unclaimed.saturating_sub(self.borrowed_total);
        };
        let mut lendable = 0u64;
        for &i in &self.members[cohort] {
            let Some(q) = &self.teams[i].quota else {
                continue;
            };
            let g = milli(q.guaranteed);
            let lend = milli(q.lend_limit.unwrap_or(q.guaranteed).min(q.guaranteed));
            if i != t {
                let guaranteed_use = self.used[i].saturating_sub(self.borrowed[i]);
                lendable += lend.min(g.saturating_sub(guaranteed_use));
            }
        }
        (lendable + self.unclaimed).saturating_sub(self.borrowed_total)
    }

    /// Whether a start of `wants` on `model` stays inside the team's per-model guarantees: the
    /// model's own part if it has one, else the part of the total no model claims.
    fn within_model_guarantee(&self, t: usize, model: Option<u16>, wants: u64) -> bool {
        let (Some(q), Some(m)) = (&self.teams[t].quota, model) else {
            return true;
        };
        if q.per_model.is_empty() {
            return true;
        }
        let used = |mm: u16| self.used_by_model.get(&(t, mm)).copied().unwrap_or(0);
        if let Some(&(_, g)) = q.per_model.iter().find(|(id, _)| id.0 == m) {
            return used(m) + wants <= milli(g);
        }
        let claimed: u64 = q.per_model.iter().map(|(_, g)| milli(*g)).sum();
        let rest = milli(q.guaranteed).saturating_sub(claimed);
        let used_rest: u64 = self
            .used_by_model
            .iter()
            .filter(|((team, mm), _)| *team == t && !q.per_model.iter().any(|(id, _)| id.0 == *mm))
            .map(|(_, v)| *v)
            .sum();
        used_rest + wants <= rest
    }

    /// Whether a start of `wants` on `model` that `admit` let through may go ahead, and
    /// whether it runs borrowed: past the team's per-model guarantee, the start runs on
    /// borrowed capacity — if the team may borrow that much.
    pub(super) fn admit_on_model(
        &self,
        t: usize,
        model: Option<u16>,
        wants: u64,
        borrowed: bool,
    ) -> Result<bool, PendingReason> {
        if borrowed || self.within_model_guarantee(t, model, wants) {
            return Ok(borrowed);
        }
        let limit = self.teams[t]
            .quota
            .as_ref()
            .map_or(0, |q| milli(q.borrow_limit));
        if self.borrowed[t] + wants > limit || wants > self.lendable(t) {
            return Err(PendingReason::Quota {
                wants,
                used: self.used[t],
                guaranteed: self.guarantee(t).unwrap_or(0),
                borrow_limit: limit,
                lendable: self.lendable(t),
            });
        }
        Ok(true)
    }

    /// Charges a start (or a running job) to its team.
    pub(super) fn charge(&mut self, t: usize, model: Option<u16>, wants: u64, borrowed: bool) {
        self.used[t] += wants;
        if borrowed {
            self.borrowed[t] += wants;
            self.borrowed_total += wants;
        }
        if let Some(m) = model {
            *self.used_by_model.entry((t, m)).or_default() += wants;
        }
    }

    /// Takes a victim's GPUs off its team: it is being stopped.
    pub(super) fn discharge(&mut self, r: &RunningJob, model: Option<u16>) {
        let m = r.placement.gpu_milli();
        self.used[r.team] = self.used[r.team].saturating_sub(m);
        if r.borrowed {
            let was = self.borrowed[r.team];
            self.borrowed[r.team] = was.saturating_sub(m);
            self.borrowed_total -= was - self.borrowed[r.team];
        }
        if let Some(u) = model.and_then(|mm| self.used_by_model.get_mut(&(r.team, mm))) {
            *u = u.saturating_sub(m);
        }
    }

    /// `Ok(borrowed?)` when the team may take `wants` more milli-GPU: inside its guarantee, or
    /// as a whole on borrowed capacity within its borrow limit and what the cohort has idle.
    pub(super) fn admit(&self, t: usize, wants: u64) -> Result<bool, PendingReason> {
        let Some(q) = &self.teams[t].quota else {
            return Ok(false);
        };
        let g = milli(q.guaranteed);
        let guaranteed_use = self.used[t].saturating_sub(self.borrowed[t]);
        if guaranteed_use + wants <= g {
            return Ok(false);
        }
        let limit = milli(q.borrow_limit);
        let idle = self.lendable(t);
        if self.borrowed[t] + wants <= limit && wants <= idle {
            return Ok(true);
        }
        Err(PendingReason::Quota {
            wants,
            used: self.used[t],
            guaranteed: g,
            borrow_limit: limit,
            lendable: idle,
        })
    }
}
