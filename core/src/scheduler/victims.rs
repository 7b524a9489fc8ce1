//! Preemption: the running jobs a pending one may displace, cheapest first, and the fewest
//! of them that make room for it.

use super::cycle::{total_order, CycleInput, JobId, PendingJob, RunningJob};
use super::hash::FastHash;
use super::index::Cluster;
use super::place::{may_fit_in_freed, Placer};
use crate::model::{NodeId, Placement};
use std::collections::HashSet;

/// A victim's cost, cheapest first: class value, guaranteed (borrowed go first), work lost
/// since the last checkpoint, milli-GPU held, id.
type CostKey = (i32, bool, i64, u64, JobId);

/// Running preemptible jobs, cheapest victim first: lowest class, borrowed before guaranteed,
/// least work lost since the last checkpoint, fewest GPUs. Sorted once per cycle; beside the
/// order, what a search filters on, so that a search reads only the jobs it may take (it runs
/// for every job that does not fit, over tens of thousands of running jobs).
pub(super) struct Victims<'a> {
    order: Vec<&'a RunningJob>,
    /// Each one's class value, in order (ascending: the order sorts by it first).
    value: Vec<i32>,
    /// Where in `order` the borrowed ones are, ascending.
    borrowed: Vec<usize>,
}

impl<'a> Victims<'a> {
    pub(super) fn of(input: &CycleInput<'a>) -> Victims<'a> {
        let value = |c: usize| input.classes[c].value;
        // Sorted on keys computed once per job (the GPUs a job holds are summed over its
        // grants; a sort compares each job about 17 times at 100,000).
        let mut keyed: Vec<(CostKey, &RunningJob)> = input
            .running
            .iter()
            .filter(|r| r.preemptible && input.now - r.started >= input.config.min_runtime_s)
            .map(|r| {
                let lost = input.now - r.last_checkpoint.unwrap_or(r.started);
                let key = (
                    value(r.class),
                    !r.borrowed,
                    total_order(lost),
                    r.placement.gpu_milli(),
                    r.id,
                );
                (key, r)
            })
            .collect();
        keyed.sort_unstable_by_key(|(k, _)| *k);
        let order: Vec<&RunningJob> = keyed.into_iter().map(|(_, r)| r).collect();
        Victims {
            value: order.iter().map(|r| value(r.class)).collect(),
            borrowed: (0..order.len()).filter(|&i| order[i].borrowed).collect(),
            order,
        }
    }

    /// Whom a job of class value `job_value` and team `team` may displace, cheapest first: a
    /// higher class displaces lower ones — but a job that would itself run on borrowed
    /// capacity never takes a guarantee away, only other borrowed work; a job inside its
    /// guarantee also takes back what other teams borrow, whatever their class.
    fn allowed(
        &self,
        job_value: i32,
        team: usize,
        within_guarantee: bool,
    ) -> impl Iterator<Item = &'a RunningJob> + '_ {
        let lower = self.value.partition_point(|&v| v < job_value);
        let split = self.borrowed.partition_point(|&i| i < lower);
        let (all_lower, borrowed_lower, borrowed_higher) = if within_guarantee {
            (lower, &[][..], &self.borrowed[split..])
        } else {
            (0, &self.borrowed[..split], &[][..])
        };
        (0..all_lower)
            .chain(borrowed_lower.iter().copied())
            .chain(
                borrowed_higher
                    .iter()
                    .copied()
                    .filter(move |&i| self.order[i].team != team),
            )
            .map(|i| self.order[i])
    }
}

/// Victims for `job`, cheapest first, inside the nodes the job will land on; `None` when no
/// allowed set makes it fit (then nothing is touched).
pub(super) fn preempt_for(
    placer: &mut Placer,
    work: &mut Cluster,
    input: &CycleInput,
    victims: &Victims,
    job: &PendingJob,
    within_guarantee: bool,
    already: &HashSet<JobId, FastHash>,
) -> Option<(Vec<JobId>, Placement)> {
    let candidates = victims
        .allowed(input.classes[job.class].value, job.team, within_guarantee)
        .filter(|r| !already.contains(&r.id))
        .take(input.config.max_victims);
    let mut released = Vec::new();
    let mut found = None;
    for r in candidates {
        if work.release(&r.placement).is_err() {
            continue;
        }
        released.push(r);
        if !may_fit_in_freed(work, &job.request, &r.placement) {
            continue;
        }
        if let Ok(p) = placer.place(work, &job.request, job.id) {
            found = Some(p);
            break;
        }
    }
    let Some(p) = found else {
        for r in released.iter().rev() {
            work.allocate(&r.placement)
                .expect("restore what was released");
        }
        return None;
    };
    // Keep only victims on the job's nodes: the others go back untouched.
    let on: HashSet<NodeId, FastHash> = p.nodes.iter().map(|g| g.node).collect();
    let mut victims = Vec::new();
    for r in released {
        if r.placement.nodes.iter().any(|g| on.contains(&g.node)) {
            victims.push(r.id);
        } else {
            work.allocate(&r.placement)
                .expect("restore an unneeded victim");
        }
    }
    Some((victims, p))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::DomainLevel;

    fn running(id: JobId, team: usize, class: usize, borrowed: bool) -> RunningJob {
        RunningJob {
            id,
            team,
            class,
            started: 0.0,
            placement: Placement {
                level: DomainLevel::Node,
                nodes: Vec::new(),
                price_per_hour: 0.0,
            },
            preemptible: true,
            last_checkpoint: None,
            time_limit_s: None,
            borrowed,
            signal: "SIGTERM".into(),
            grace_s: 0.0,
        }
    }

    /// `allowed` reads only the jobs the rule allows, and exactly those, in cost order: the
    /// same answer as testing the rule on every running job.
    #[test]
    fn allowed_victims_are_the_rule_applied_to_every_running_job() {
        let values = [0, 10, 20];
        let mut jobs = Vec::new();
        for (id, (class, team, borrowed)) in (0..3)
            .flat_map(|c| (0..2).flat_map(move |t| [(c, t, true), (c, t, false)]))
            .enumerate()
        {
            jobs.push(running(id as JobId, team, class, borrowed));
        }
        // In cost order: class value first, borrowed before guaranteed.
        jobs.sort_by(|a, b| {
            values[a.class]
                .cmp(&values[b.class])
                .then(b.borrowed.cmp(&a.borrowed))
                .then(a.id.cmp(&b.id))
        });
        let order: Vec<&RunningJob> = jobs.iter().collect();
        let v = Victims {
            value: order.iter().map(|r| values[r.class]).collect(),
            borrowed: (0..order.len()).filter(|&i| order[i].borrowed).collect(),
            order,
        };
        for job_value in [-5, 0, 5, 10, 15, 20, 25] {
            for team in 0..2 {
                for within in [true, false] {
                    let rule: Vec<JobId> = jobs
                        .iter()
                        .filter(|r| {
                            (values[r.class] < job_value && (within || r.borrowed))
                                || (within && r.borrowed && r.team != team)
                        })
                        .map(|r| r.id)
                        .collect();
                    let got: Vec<JobId> =
                        v.allowed(job_value, team, within).map(|r| r.id).collect();
                    assert_eq!(got, rule, "value {job_value} team {team} within {within}");
                }
            }
        }
    }
}
