//! One scheduling cycle over one snapshot: rank the queue, admit within quota, place, preempt
//! when allowed, reserve for the blocked head (EASY backfill), and explain every pending job.
//!
//! Pure: the daemon hands in the state and `now`, applies the decisions that come out and
//! journals them. Within a cycle the decisions are applied to a working copy of the cluster so
//! that later jobs see the capacity earlier ones took.

use super::hash::FastHash;
use super::index::Cluster;
use super::place::{may_fit_in_freed, Placer, Unplaceable};
use super::quotas::Quotas;
use super::shapes::Shapes;
use super::victims::{preempt_for, Victims};
use crate::model::{
    validate_teams, Health, JobRequest, NodeId, Placement, PriorityClass, Team, TeamError,
};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

pub type JobId = u64;

#[derive(Clone, Debug)]
pub struct PendingJob {
    pub id: JobId,
    pub team: usize,
    pub class: usize,
    /// Seconds on the daemon's clock.
    pub submitted: f64,
    pub request: JobRequest,
    /// Other shapes the job takes (SkyPilot's alternatives with other GPU counts), in order:
    /// the first of `request` and these that fits starts it; if none fits, it waits, makes
    /// room and is reserved for as `request`.
    pub alternatives: Vec<JobRequest>,
    pub held: bool,
    pub time_limit_s: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct RunningJob {
    pub id: JobId,
    pub team: usize,
    pub class: usize,
    pub started: f64,
    pub placement: Placement,
    pub preemptible: bool,
    /// When the job last reported a checkpoint.
    pub last_checkpoint: Option<f64>,
    pub time_limit_s: Option<f64>,
    /// Started on capacity borrowed from the cohort: reclaimed first.
    pub borrowed: bool,
    /// What to send on preemption (e.g. "SIGTERM") and how long to wait before SIGKILL.
    pub signal: String,
    pub grace_s: f64,
}

#[derive(Clone, Debug)]
pub struct CycleConfig {
    /// A job that has run less than this is not preempted (against churn).
    pub min_runtime_s: f64,
    /// A job that waited longer than this goes first in its class and gets the reservation.
    pub aging_limit_s: f64,
    /// Victims considered per preemption attempt.
    pub max_victims: usize,
    /// Preemptions decided in one cycle at most: no mass-preemption storm in a single pass.
    pub max_preemptions: usize,
    /// Whether to explain every job left waiting (a start estimate's forward run needs only
    /// the decisions).
    pub explain: bool,
}

impl Default for CycleConfig {
    fn default() -> Self {
        CycleConfig {
            min_runtime_s: 300.0,
            aging_limit_s: 4.0 * 3600.0,
            max_victims: 64,
            max_preemptions: 1000,
            explain: true,
        }
    }
}

pub struct CycleInput<'a> {
    pub now: f64,
    pub cluster: &'a Cluster,
    pub teams: &'a [Team],
    pub classes: &'a [PriorityClass],
    /// Decayed GPU-seconds per team (fair share), same order as `teams`.
    pub usage: &'a [f64],
    pub pending: &'a [PendingJob],
    pub running: &'a [RunningJob],
    pub config: &'a CycleConfig,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Decision {
    Start {
        job: JobId,
        placement: Placement,
        borrowed: bool,
    },
    /// Stop `victim` for `for_job`: send `signal`, wait `grace_s`, then kill; the victim goes
    /// back to the queue and resumes from its last checkpoint.
    Preempt {
        victim: JobId,
        for_job: JobId,
        signal: String,
        grace_s: f64,
        requeue_from_checkpoint: bool,
        work_lost_s: f64,
    },
    /// The blocked head of the queue: it starts on `nodes` at `start_at` at the latest.
    Reserve {
        job: JobId,
        start_at: f64,
        nodes: Vec<NodeId>,
    },
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum PendingReason {
    Held,
    /// Follows this job in a pipeline and waits for it to complete (set by the daemon, which
    /// holds the job from the cycle meanwhile).
    After {
        job: JobId,
    },
    /// Its user is at a per-user limit (set by the daemon, which holds the job from the cycle
    /// meanwhile): what their running jobs hold, what this job may take, the limit, and which
    /// part of the fleet file set it. `resource`: `GPUs` or `$/h`.
    UserLimit {
        user: String,
        resource: String,
        used: f64,
        wants: f64,
        limit: f64,
        set_by: String,
    },
    /// Over the team's guarantee and nothing idle can be lent to it (milli-GPU): the cohort's
    /// idle guarantees plus capacity nobody is guaranteed, net of what is already borrowed.
    Quota {
        wants: u64,
        used: u64,
        guaranteed: u64,
        borrow_limit: u64,
        lendable: u64,
    },
    NoCapacity {
        why: Unplaceable,
        reservation: Option<(JobId, f64)>,
    },
    /// Victims were told to stop; the job starts once they have.
    AwaitingPreemption {
        victims: Vec<JobId>,
    },
    Reserved {
        start_at: f64,
    },
}

impl PendingReason {
    /// Admitted by the quotas but no room now (with or without a reservation): what buying,
    /// consolidating or defragmenting capacity answers.
    pub fn waits_for_capacity(&self) -> bool {
        matches!(
            self,
            PendingReason::NoCapacity { .. } | PendingReason::Reserved { .. }
        )
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explanation {
    pub job: JobId,
    /// 1-based rank among runnable (not held) pending jobs; 0 when held.
    pub position: usize,
    pub class: String,
    pub class_position: usize,
    pub class_size: usize,
    pub team: String,
    /// The team's GPUs in use and its guarantee, in milli-GPU, after this cycle's decisions.
    pub team_used: u64,
    pub team_guaranteed: Option<u64>,
    pub reason: PendingReason,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CycleOutput {
    pub decisions: Vec<Decision>,
    pub explanations: Vec<Explanation>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum CycleError {
    #[error(transparent)]
    Teams(#[from] TeamError),
    #[error("job {job}: unknown team #{team} ({teams} teams are defined)")]
    UnknownTeam {
        job: JobId,
        team: usize,
        teams: usize,
    },
    #[error("job {job}: unknown priority class #{class} ({classes} classes are defined)")]
    UnknownClass {
        job: JobId,
        class: usize,
        classes: usize,
    },
    #[error("usage has {got} entries for {teams} teams")]
    UsageLength { got: usize, teams: usize },
}

pub(super) fn check(input: &CycleInput) -> Result<(), CycleError> {
    validate_teams(input.teams, input.classes)?;
    if input.usage.len() != input.teams.len() {
        return Err(CycleError::UsageLength {
            got: input.usage.len(),
            teams: input.teams.len(),
        });
    }
    let (t, c) = (input.teams.len(), input.classes.len());
    let jobs = input.pending.iter().map(|j| (j.id, j.team, j.class));
    for (id, team, class) in jobs.chain(input.running.iter().map(|j| (j.id, j.team, j.class))) {
        if team >= t {
            return Err(CycleError::UnknownTeam {
                job: id,
                team,
                teams: t,
            });
        }
        if class >= c {
            return Err(CycleError::UnknownClass {
                job: id,
                class,
                classes: c,
            });
        }
    }
    Ok(())
}

/// The queue's sort key: class value and aging (both descending), fair share, submission
/// time, id. Ids are unique, so the order is total: sorting any way gives the same queue.
pub(super) type QueueKey = (
    std::cmp::Reverse<i32>,
    std::cmp::Reverse<bool>,
    i64,
    i64,
    JobId,
);

/// Where `job` goes in the queue at `input.now`: higher class, then aged past the limit, then
/// the team's fair share, then submission time and id.
fn queue_key(input: &CycleInput, job: &PendingJob) -> QueueKey {
    let share = input.usage[job.team] / input.teams[job.team].weight;
    (
        std::cmp::Reverse(input.classes[job.class].value),
        std::cmp::Reverse(input.now - job.submitted > input.config.aging_limit_s),
        total_order(share),
        total_order(job.submitted),
        job.id,
    )
}

/// A job in the queue: where it goes, and what the walk reads of it before it needs the job
/// itself. At 100,000 waiting, most jobs walked are refused by their team's quota; reading the
/// team and the GPUs here, in queue order, spares a cache miss on the job for each.
#[derive(Clone, Copy, Debug)]
pub(super) struct Queued {
    pub key: QueueKey,
    /// The job's index in `input.pending`.
    pub idx: u32,
    team: u32,
    /// Milli-GPU it asks for.
    wants: u64,
    /// It has other shapes (tried before the quota test).
    shapes: bool,
    /// Its request's number in `Shapes`, its class and its time limit.
    shape: u32,
    class: u32,
    limit: Option<f64>,
}

impl Queued {
    pub(super) fn of(input: &CycleInput, idx: usize, shapes: &mut Shapes) -> Queued {
        let job = &input.pending[idx];
        Queued {
            key: queue_key(input, job),
            idx: idx as u32,
            team: job.team as u32,
            wants: job.request.total_gpu_milli(),
            shapes: !job.alternatives.is_empty(),
            shape: shapes.id(&job.request),
            class: job.class as u32,
            limit: job.time_limit_s,
        }
    }
}

/// The shapes that failed to fit in this cycle, and why, by shape number: forgotten all at
/// once (by a new generation) when a preemption changes what is free.
#[derive(Default)]
struct Failed {
    why: Vec<Option<Unplaceable>>,
    stamp: Vec<u32>,
    generation: u32,
}

impl Failed {
    fn get(&self, shape: u32) -> Option<&Unplaceable> {
        let i = shape as usize;
        match self.stamp.get(i) {
            Some(&g) if g == self.generation => self.why[i].as_ref(),
            _ => None,
        }
    }

    fn insert(&mut self, shape: u32, why: Unplaceable) {
        let i = shape as usize;
        if self.stamp.len() <= i {
            self.stamp.resize(i + 1, u32::MAX);
            self.why.resize(i + 1, None);
        }
        self.stamp[i] = self.generation;
        self.why[i] = Some(why);
    }

    fn clear(&mut self) {
        self.generation += 1;
    }
}

/// An integer that orders as `f64::total_cmp` orders `x`.
pub(super) fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// Runs one cycle. On invalid input nothing is decided and the error says what was wrong.
pub fn run_cycle(placer: &mut Placer, input: &CycleInput) -> Result<CycleOutput, CycleError> {
    check(input)?;
    // Sorted on keys computed once per job (a sort compares each job about 17 times at
    // 100,000).
    let mut shapes = Shapes::default();
    let mut order: Vec<Queued> = input
        .pending
        .iter()
        .enumerate()
        .filter(|(_, j)| !j.held)
        .map(|(i, _)| Queued::of(input, i, &mut shapes))
        .collect();
    order.sort_unstable_by_key(|q| q.key);
    let mut work = input.cluster.clone();
    Ok(walk(placer, input, &order, &mut shapes, &mut work))
}

/// Why a job was left waiting, by its index in `input.pending` — kept only when the cycle
/// explains (a forward run needs the decisions alone).
fn note(reasons: &mut [Option<PendingReason>], idx: usize, reason: PendingReason) {
    if let Some(slot) = reasons.get_mut(idx) {
        *slot = Some(reason);
    }
}

/// A failure no change of capacity cures.
fn is_final(why: &Unplaceable) -> bool {
    matches!(
        why,
        Unplaceable::Invalid { .. } | Unplaceable::NeverFits { .. }
    )
}

/// The cycle itself, over the jobs of `order` (indices into `input.pending`, in queue order:
/// every job not held, each `queue_key`'s place at `input.now`), deciding on `work` — a copy
/// of `input.cluster` the caller hands in and gets back with this cycle's starts and
/// reservations on it. `input` has passed `check`.
pub(super) fn walk(
    placer: &mut Placer,
    input: &CycleInput,
    order: &[Queued],
    shapes: &mut Shapes,
    work: &mut Cluster,
) -> CycleOutput {
    let now = input.now;
    let explain = input.config.explain;
    let model_of = |p: &Placement| -> Option<u16> {
        p.nodes
            .first()
            .and_then(|g| input.cluster.fleet().node(g.node).model)
            .map(|m| m.0)
    };
    let mut quotas = Quotas::of(input, &model_of);
    let mut class_size = vec![0usize; input.classes.len()];
    if explain {
        for q in order {
            class_size[input.pending[q.idx as usize].class] += 1;
        }
    }
    let mut out = CycleOutput::default();
    let mut failed = Failed::default();
    let mut preempted: HashSet<JobId, FastHash> = HashSet::default();
    // Victim sets only shrink within a cycle, so a failed attempt stays failed.
    let mut no_victims: HashSet<(u32, usize, bool), FastHash> = HashSet::default();
    // Borrowed from the running jobs (at 30,000 running, cloning each placement every cycle
    // was a tenth of a forward run's time); owned for the jobs started this cycle.
    let mut ends: Vec<(f64, Cow<'_, Placement>)> = input
        .running
        .iter()
        .filter_map(|r| {
            r.time_limit_s
                .map(|l| (r.started + l, Cow::Borrowed(&r.placement)))
        })
        .collect();
    let victims = Victims::of(input);
    // Running jobs by id, for the victims of a preemption (built at the first one).
    let mut running_at: HashMap<JobId, usize, FastHash> = HashMap::default();
    let mut reservation: Option<(JobId, f64, Vec<NodeId>)> = None;
    // EASY backfill reserves for the head of the queue only: the first job that is blocked.
    let mut head_seen = false;
    // By the job's index in `input.pending` (empty when the cycle does not explain).
    let size = if explain { input.pending.len() } else { 0 };
    let mut reasons: Vec<Option<PendingReason>> = vec![None; size];
    let mut positions = vec![(0usize, 0usize); size];
    let mut class_seen = vec![0usize; input.classes.len()];
    for (rank, q) in order.iter().enumerate() {
        let idx = q.idx as usize;
        if explain {
            let class = input.pending[idx].class;
            class_seen[class] += 1;
            positions[idx] = (rank + 1, class_seen[class]);
        }
        if q.shapes {
            let job = &input.pending[idx];
            if let Some(start) = first_shape_that_fits(
                placer,
                work,
                &mut quotas,
                shapes,
                &mut failed,
                job,
                &model_of,
            ) {
                if let (Decision::Start { placement, .. }, Some(l)) = (&start, job.time_limit_s) {
                    ends.push((now + l, Cow::Owned(placement.clone())));
                }
                out.decisions.push(start);
                continue;
            }
        }
        // Most jobs walked stop here, without reading the job itself.
        let wants = q.wants;
        let borrowed = match quotas.admit(q.team as usize, wants) {
            Ok(b) => b,
            Err(reason) => {
                note(&mut reasons, idx, reason);
                continue;
            }
        };
        let job = &input.pending[idx];
        // A job that ends before the reservation may use the reserved nodes (backfill).
        let backfill = match (&reservation, q.limit) {
            (Some((_, at, _)), Some(limit)) => now + limit <= *at,
            _ => false,
        };
        let key = q.shape;
        // `Err(None)`: it failed before in this cycle (and nothing since made room).
        let attempt = if failed.get(key).is_some() && !backfill {
            Err(None)
        } else {
            let reserved = reservation.as_ref().map_or(&[][..], |r| &r.2);
            if backfill {
                set_nodes(work, reserved, Health::Healthy);
            }
            let r = placer.place(work, &job.request, job.id);
            if backfill {
                set_nodes(work, reserved, Health::Cordoned);
            }
            r.map_err(Some)
        };
        let fresh = match attempt {
            Ok(p) => {
                let model = model_of(&p);
                let borrowed = match quotas.admit_on_model(job.team, model, wants, borrowed) {
                    Ok(b) => b,
                    Err(reason) => {
                        note(&mut reasons, idx, reason);
                        continue;
                    }
                };
                work.allocate(&p).expect("placed within free capacity");
                quotas.charge(job.team, model, wants, borrowed);
                if let Some(l) = job.time_limit_s {
                    ends.push((now + l, Cow::Owned(p.clone())));
                }
                out.decisions.push(Decision::Start {
                    job: job.id,
                    placement: p,
                    borrowed,
                });
                continue;
            }
            Err(fresh) => fresh,
        };
        if let (Some(why), false) = (&fresh, backfill) {
            failed.insert(key, why.clone());
        }
        let cached = failed.get(key);
        if fresh.as_ref().or(cached).is_some_and(is_final) {
            if let Some(why) = fresh.or_else(|| cached.cloned()).filter(|_| explain) {
                let reason = PendingReason::NoCapacity {
                    why,
                    reservation: None,
                };
                note(&mut reasons, idx, reason);
            }
            continue;
        }
        // What the job is told if nothing below moves it (cloned only to explain).
        let why = if explain {
            fresh.or_else(|| cached.cloned())
        } else {
            None
        };
        let within_guarantee = !borrowed;
        let memo = (key, q.class as usize, within_guarantee);
        let attempt =
            if preempted.len() >= input.config.max_preemptions || no_victims.contains(&memo) {
                None
            } else {
                let found = preempt_for(
                    placer,
                    work,
                    input,
                    &victims,
                    job,
                    within_guarantee,
                    &preempted,
                );
                if found.is_none() {
                    no_victims.insert(memo);
                }
                found
            };
        if let Some((victims, _)) = attempt {
            if running_at.is_empty() {
                running_at.extend(input.running.iter().enumerate().map(|(i, r)| (r.id, i)));
            }
            for v in &victims {
                let r = &input.running[running_at[v]];
                // A victim holds its GPUs until it stops (its grace period): nothing
                // starts this cycle in the room it frees — not even the part the
                // preemptor does not need (the daemon would refuse that start).
                work.allocate(&r.placement)
                    .expect("a victim's GPUs were free a moment ago");
                preempted.insert(*v);
                quotas.discharge(r, model_of(&r.placement));
                out.decisions.push(Decision::Preempt {
                    victim: *v,
                    for_job: job.id,
                    signal: r.signal.clone(),
                    grace_s: r.grace_s,
                    requeue_from_checkpoint: true,
                    work_lost_s: now - r.last_checkpoint.unwrap_or(r.started),
                });
            }
            quotas.used[job.team] += wants;
            failed.clear();
            note(
                &mut reasons,
                idx,
                PendingReason::AwaitingPreemption { victims },
            );
            continue;
        }
        if !head_seen {
            head_seen = true;
            if let Some((at, p)) = earliest_start(placer, work, &ends, job) {
                let nodes: Vec<NodeId> = p.nodes.iter().map(|g| g.node).collect();
                set_nodes(work, &nodes, Health::Cordoned);
                out.decisions.push(Decision::Reserve {
                    job: job.id,
                    start_at: at,
                    nodes: nodes.clone(),
                });
                reservation = Some((job.id, at, nodes));
                note(&mut reasons, idx, PendingReason::Reserved { start_at: at });
                continue;
            }
        }
        if let Some(why) = why {
            let res = reservation.as_ref().map(|(j, at, _)| (*j, *at));
            let reason = PendingReason::NoCapacity {
                why,
                reservation: res,
            };
            note(&mut reasons, idx, reason);
        }
    }
    if !explain {
        return out;
    }
    for (at, job) in input.pending.iter().enumerate() {
        let (position, class_position) = positions[at];
        let reason = if job.held {
            PendingReason::Held
        } else {
            match reasons[at].take() {
                Some(r) => r,
                None => continue, // started this cycle
            }
        };
        out.explanations.push(Explanation {
            job: job.id,
            position,
            class: input.classes[job.class].name.clone(),
            class_position,
            class_size: class_size[job.class],
            team: input.teams[job.team].name.clone(),
            team_used: quotas.used[job.team],
            team_guaranteed: quotas.guarantee(job.team),
            reason,
        });
    }
    out
}

/// A job that takes several shapes: the first of them that its team's quota admits and that
/// fits now, placed, charged and its start; `None` when none does (each shape that did not fit
/// is remembered in `failed`, as the main loop does).
fn first_shape_that_fits(
    placer: &mut Placer,
    work: &mut Cluster,
    quotas: &mut Quotas,
    shapes: &mut Shapes,
    failed: &mut Failed,
    job: &PendingJob,
    model_of: &dyn Fn(&Placement) -> Option<u16>,
) -> Option<Decision> {
    for req in std::iter::once(&job.request).chain(&job.alternatives) {
        let wants = req.total_gpu_milli();
        let Ok(borrowed) = quotas.admit(job.team, wants) else {
            continue;
        };
        let key = shapes.id(req);
        if failed.get(key).is_some() {
            continue;
        }
        match placer.place(work, req, job.id) {
            Ok(p) => {
                let model = model_of(&p);
                let Ok(borrowed) = quotas.admit_on_model(job.team, model, wants, borrowed) else {
                    continue;
                };
                work.allocate(&p).expect("placed within free capacity");
                quotas.charge(job.team, model, wants, borrowed);
                return Some(Decision::Start {
                    job: job.id,
                    placement: p,
                    borrowed,
                });
            }
            Err(why) => {
                failed.insert(key, why);
            }
        }
    }
    None
}

fn set_nodes(work: &mut Cluster, nodes: &[NodeId], health: Health) {
    for &n in nodes {
        work.set_health(n, health);
    }
}

/// When the job could start at the latest, from running jobs' time limits, and where.
fn earliest_start(
    placer: &mut Placer,
    work: &Cluster,
    ends: &[(f64, Cow<'_, Placement>)],
    job: &PendingJob,
) -> Option<(f64, Placement)> {
    if ends.is_empty() {
        return None;
    }
    let mut ends: Vec<&(f64, Cow<'_, Placement>)> = ends.iter().collect();
    ends.sort_by(|a, b| a.0.total_cmp(&b.0));
    // A copy, not a release-and-give-back on `work`: giving back reorders the index's lists,
    // and with them which of equally good nodes a later placement in this cycle takes.
    let mut scratch = work.clone();
    for (at, p) in ends {
        if scratch.release(p).is_err() {
            continue;
        }
        // Not a search at each of tens of thousands of ends.
        if !may_fit_in_freed(&scratch, &job.request, p) {
            continue;
        }
        if let Ok(placement) = placer.place(&scratch, &job.request, job.id) {
            return Some((*at, placement));
        }
    }
    None
}
