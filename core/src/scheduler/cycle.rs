//! One scheduling cycle over one snapshot: rank the queue, admit within quota, place, preempt
//! when allowed, reserve for the blocked head (EASY backfill), and explain every pending job.
//!
//! Pure: the daemon hands in the state and `now`, applies the decisions that come out and
//! journals them. Within a cycle the decisions are applied to a working copy of the cluster so
//! that later jobs see the capacity earlier ones took.

use super::hash::FastHash;
use super::index::Cluster;
use super::place::{Placer, Unplaceable};
use super::victims::{preempt_for, Victims};
use crate::model::{
    validate_teams, GpuRequest, Health, JobRequest, ModelChoice, NodeId, Placement, PriorityClass,
    Team, TeamError, MILLI_PER_GPU,
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

/// What a failure depends on: identical requests fail identically while capacity only shrinks.
#[derive(Clone, PartialEq, Eq, Hash)]
struct RequestKey {
    nodes: u16,
    gpu: GpuRequest,
    cpu: u32,
    mem: u64,
    vram: u32,
    models: ModelChoice,
    spot: bool,
    price: Option<u64>,
}

impl RequestKey {
    fn of(r: &JobRequest) -> RequestKey {
        RequestKey {
            nodes: r.nodes,
            gpu: r.gpu,
            cpu: r.cpu_milli,
            mem: r.mem_mib,
            vram: r.vram_mib,
            models: r.models.clone(),
            spot: r.spot_ok,
            price: r.max_price_per_hour.map(f64::to_bits),
        }
    }
}

fn check(input: &CycleInput) -> Result<(), CycleError> {
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

/// Quota bookkeeping for one cycle, in milli-GPU.
struct Quotas<'a> {
    teams: &'a [Team],
    used: Vec<u64>,
    /// The part of `used` that runs on borrowed capacity (a start is borrowed as a whole).
    borrowed: Vec<u64>,
    /// Milli-GPU in use per (team, GPU model), for per-model guarantees.
    used_by_model: HashMap<(usize, u16), u64, FastHash>,
    /// Healthy capacity that no team is guaranteed: anyone may borrow it.
    unclaimed: u64,
}

impl Quotas<'_> {
    fn guarantee(&self, t: usize) -> Option<u64> {
        self.teams[t]
            .quota
            .as_ref()
            .map(|q| u64::from(q.guaranteed) * u64::from(MILLI_PER_GPU))
    }
    /// What team `t` may borrow now: its cohort's idle guarantees plus capacity nobody is
    /// guaranteed, net of everything any team already borrows (conservative: never over-lends).
    fn lendable(&self, t: usize) -> u64 {
        let borrowed: u64 = self.borrowed.iter().sum();
        let Some(cohort) = &self.teams[t].cohort else {
            return self.unclaimed.saturating_sub(borrowed);
        };
        let mut lendable = 0u64;
        for (i, team) in self.teams.iter().enumerate() {
            let (Some(q), Some(c)) = (&team.quota, &team.cohort) else {
                continue;
            };
            if c != cohort {
                continue;
            }
            let g = u64::from(q.guaranteed) * 1000;
            let lend = u64::from(q.lend_limit.unwrap_or(q.guaranteed).min(q.guaranteed)) * 1000;
            if i != t {
                let guaranteed_use = self.used[i].saturating_sub(self.borrowed[i]);
                lendable += lend.min(g.saturating_sub(guaranteed_use));
            }
        }
        (lendable + self.unclaimed).saturating_sub(borrowed)
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
            return used(m) + wants <= u64::from(g) * 1000;
        }
        let claimed: u64 = q.per_model.iter().map(|(_, g)| u64::from(*g)).sum::<u64>() * 1000;
        let rest = (u64::from(q.guaranteed) * 1000).saturating_sub(claimed);
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
    fn admit_on_model(
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
            .map_or(0, |q| u64::from(q.borrow_limit) * 1000);
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

    /// Charges a start to its team.
    fn charge(&mut self, t: usize, model: Option<u16>, wants: u64, borrowed: bool) {
        self.used[t] += wants;
        if borrowed {
            self.borrowed[t] += wants;
        }
        if let Some(m) = model {
            *self.used_by_model.entry((t, m)).or_default() += wants;
        }
    }

    /// `Ok(borrowed?)` when the team may take `wants` more milli-GPU: inside its guarantee, or
    /// as a whole on borrowed capacity within its borrow limit and what the cohort has idle.
    fn admit(&self, t: usize, wants: u64) -> Result<bool, PendingReason> {
        let Some(q) = &self.teams[t].quota else {
            return Ok(false);
        };
        let g = u64::from(q.guaranteed) * 1000;
        let guaranteed_use = self.used[t].saturating_sub(self.borrowed[t]);
        if guaranteed_use + wants <= g {
            return Ok(false);
        }
        let idle = self.lendable(t);
        if self.borrowed[t] + wants <= u64::from(q.borrow_limit) * 1000 && wants <= idle {
            return Ok(true);
        }
        Err(PendingReason::Quota {
            wants,
            used: self.used[t],
            guaranteed: g,
            borrow_limit: u64::from(q.borrow_limit) * 1000,
            lendable: idle,
        })
    }
}

/// The queue's sort key: class value and aging (both descending), fair share, submission
/// time, id.
type QueueKey = (
    std::cmp::Reverse<i32>,
    std::cmp::Reverse<bool>,
    i64,
    i64,
    JobId,
);

/// An integer that orders as `f64::total_cmp` orders `x`.
pub(super) fn total_order(x: f64) -> i64 {
    let bits = x.to_bits() as i64;
    bits ^ (((bits >> 63) as u64) >> 1) as i64
}

/// Runs one cycle. On invalid input nothing is decided and the error says what was wrong.
pub fn run_cycle(placer: &mut Placer, input: &CycleInput) -> Result<CycleOutput, CycleError> {
    check(input)?;
    let now = input.now;
    let mut work = input.cluster.clone();
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
        .map(|q| u64::from(q.guaranteed) * u64::from(MILLI_PER_GPU))
        .sum();
    let mut quotas = Quotas {
        teams: input.teams,
        used: vec![0; input.teams.len()],
        borrowed: vec![0; input.teams.len()],
        used_by_model: HashMap::default(),
        unclaimed: healthy.saturating_sub(guaranteed),
    };
    let model_of = |p: &Placement| -> Option<u16> {
        p.nodes
            .first()
            .and_then(|g| input.cluster.fleet().node(g.node).model)
            .map(|m| m.0)
    };
    for r in input.running {
        let milli = r.placement.gpu_milli();
        quotas.used[r.team] += milli;
        if r.borrowed {
            quotas.borrowed[r.team] += milli;
        }
        if let Some(m) = model_of(&r.placement) {
            *quotas.used_by_model.entry((r.team, m)).or_default() += milli;
        }
    }
    // The queue's order: higher class, then aged past the limit, then the team's fair share,
    // then submission time and id. Sorted on keys computed once per job (a sort compares each
    // job about 17 times at 100,000).
    let share = |t: usize| input.usage[t] / input.teams[t].weight;
    let mut keyed: Vec<(QueueKey, u32)> = input
        .pending
        .iter()
        .enumerate()
        .filter(|(_, j)| !j.held)
        .map(|(i, j)| {
            let key = (
                std::cmp::Reverse(input.classes[j.class].value),
                std::cmp::Reverse(now - j.submitted > input.config.aging_limit_s),
                total_order(share(j.team)),
                total_order(j.submitted),
                j.id,
            );
            (key, i as u32)
        })
        .collect();
    keyed.sort_unstable();
    let order: Vec<usize> = keyed.into_iter().map(|(_, i)| i as usize).collect();
    let mut class_size = vec![0usize; input.classes.len()];
    for &i in &order {
        class_size[input.pending[i].class] += 1;
    }
    let mut out = CycleOutput::default();
    let mut failed: HashMap<RequestKey, Unplaceable, FastHash> = HashMap::default();
    let mut preempted: HashSet<JobId, FastHash> = HashSet::default();
    // Victim sets only shrink within a cycle, so a failed attempt stays failed.
    let mut no_victims: HashSet<(RequestKey, usize, bool), FastHash> = HashSet::default();
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
    // By the job's index in `input.pending`.
    let mut reasons: Vec<Option<PendingReason>> = vec![None; input.pending.len()];
    let mut positions = vec![(0usize, 0usize); input.pending.len()];
    let mut class_seen = vec![0usize; input.classes.len()];
    for (rank, &idx) in order.iter().enumerate() {
        let job = &input.pending[idx];
        class_seen[job.class] += 1;
        positions[idx] = (rank + 1, class_seen[job.class]);
        if !job.alternatives.is_empty() {
            if let Some(start) =
                first_shape_that_fits(placer, &mut work, &mut quotas, &mut failed, job, &model_of)
            {
                if let (Decision::Start { placement, .. }, Some(l)) = (&start, job.time_limit_s) {
                    ends.push((now + l, Cow::Owned(placement.clone())));
                }
                out.decisions.push(start);
                continue;
            }
        }
        let wants = job.request.total_gpu_milli();
        let borrowed = match quotas.admit(job.team, wants) {
            Ok(b) => b,
            Err(reason) => {
                reasons[idx] = Some(reason);
                continue;
            }
        };
        // A job that ends before the reservation may use the reserved nodes (backfill).
        let backfill = match (&reservation, job.time_limit_s) {
            (Some((_, at, _)), Some(limit)) => now + limit <= *at,
            _ => false,
        };
        let key = RequestKey::of(&job.request);
        let attempt = if let (Some(why), false) = (failed.get(&key), backfill) {
            Err(why.clone())
        } else {
            if backfill {
                set_nodes(
                    &mut work,
                    reservation.as_ref().map_or(&[][..], |r| &r.2),
                    Health::Healthy,
                );
            }
            let r = placer.place(&work, &job.request, job.id);
            if backfill {
                set_nodes(
                    &mut work,
                    reservation.as_ref().map_or(&[][..], |r| &r.2),
                    Health::Cordoned,
                );
            }
            r
        };
        match attempt {
            Ok(p) => {
                let model = model_of(&p);
                let borrowed = match quotas.admit_on_model(job.team, model, wants, borrowed) {
                    Ok(b) => b,
                    Err(reason) => {
                        reasons[idx] = Some(reason);
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
            }
            Err(why) => {
                if !backfill {
                    failed.insert(key, why.clone());
                }
                if matches!(
                    why,
                    Unplaceable::Invalid { .. } | Unplaceable::NeverFits { .. }
                ) {
                    reasons[idx] = Some(PendingReason::NoCapacity {
                        why,
                        reservation: None,
                    });
                    continue;
                }
                let within_guarantee = !borrowed;
                let memo = (RequestKey::of(&job.request), job.class, within_guarantee);
                let attempt = if preempted.len() >= input.config.max_preemptions
                    || no_victims.contains(&memo)
                {
                    None
                } else {
                    let found = preempt_for(
                        placer,
                        &mut work,
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
                        let milli: u64 = r.placement.gpu_milli();
                        quotas.used[r.team] = quotas.used[r.team].saturating_sub(milli);
                        if r.borrowed {
                            quotas.borrowed[r.team] = quotas.borrowed[r.team].saturating_sub(milli);
                        }
                        if let Some(m) = model_of(&r.placement) {
                            if let Some(u) = quotas.used_by_model.get_mut(&(r.team, m)) {
                                *u = u.saturating_sub(milli);
                            }
                        }
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
                    reasons[idx] = Some(PendingReason::AwaitingPreemption { victims });
                    continue;
                }
                if !head_seen {
                    head_seen = true;
                    if let Some((at, p)) = earliest_start(placer, &work, &ends, job) {
                        let nodes: Vec<NodeId> = p.nodes.iter().map(|g| g.node).collect();
                        set_nodes(&mut work, &nodes, Health::Cordoned);
                        out.decisions.push(Decision::Reserve {
                            job: job.id,
                            start_at: at,
                            nodes: nodes.clone(),
                        });
                        reservation = Some((job.id, at, nodes));
                        reasons[idx] = Some(PendingReason::Reserved { start_at: at });
                        continue;
                    }
                }
                let res = reservation.as_ref().map(|(j, at, _)| (*j, *at));
                reasons[idx] = Some(PendingReason::NoCapacity {
                    why,
                    reservation: res,
                });
            }
        }
    }
    for (at, job) in input.pending.iter().enumerate() {
        if !input.config.explain {
            break;
        }
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
    Ok(out)
}

/// A job that takes several shapes: the first of them that its team's quota admits and that
/// fits now, placed, charged and its start; `None` when none does (each shape that did not fit
/// is remembered in `failed`, as the main loop does).
fn first_shape_that_fits(
    placer: &mut Placer,
    work: &mut Cluster,
    quotas: &mut Quotas,
    failed: &mut HashMap<RequestKey, Unplaceable, FastHash>,
    job: &PendingJob,
    model_of: &dyn Fn(&Placement) -> Option<u16>,
) -> Option<Decision> {
    for req in std::iter::once(&job.request).chain(&job.alternatives) {
        let wants = req.total_gpu_milli();
        let Ok(borrowed) = quotas.admit(job.team, wants) else {
            continue;
        };
        let key = RequestKey::of(req);
        if failed.contains_key(&key) {
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
        if let Ok(placement) = placer.place(&scratch, &job.request, job.id) {
            return Some((*at, placement));
        }
    }
    None
}
