//! When each waiting job will start: the scheduling cycle itself run forward on a copy of the
//! present. Running jobs end when their estimate says (`durations`); at each end the same
//! `run_cycle` the daemon runs decides who starts, preempts and waits; a started job ends in
//! turn after its own estimate. Nobody new arrives, so an estimate is what happens if the queue
//! stays as it is.
//!
//! Pure like the rest of the core: the caller hands in copies of the state, what is left of
//! each job, how far to look and how much work to spend (a `stop` the caller answers from its
//! own clock), and gets each job's start on the forward clock.

use super::cycle::{
    check, walk, CycleConfig, CycleError, CycleInput, Decision, JobId, PendingJob, Queued,
    RunningJob,
};
use super::hash::FastHash;
use super::shapes::Shapes;
use super::{Cluster, Placer};
use crate::model::{Health, NodeId, PriorityClass, Team};
use std::collections::{HashMap, HashSet};

/// A copy of the present to run forward.
#[derive(Clone)]
pub struct Present {
    pub now: f64,
    pub cluster: Cluster,
    pub placer: Placer,
    pub teams: Vec<Team>,
    pub classes: Vec<PriorityClass>,
    pub usage: Vec<f64>,
    pub config: CycleConfig,
    pub pending: Vec<PendingJob>,
    pub running: Vec<RunningJob>,
    /// A running job preempted on the way goes back to the queue as this.
    pub requeue: HashMap<JobId, PendingJob>,
    /// Nodes being bought, and when each is expected to take work (elastic pools' capacity).
    pub arriving: Vec<(f64, NodeId)>,
}

/// How far to look and how much to spend.
#[derive(Clone, Copy, Debug)]
pub struct Reach {
    /// A job not started this far ahead is "later than that".
    pub horizon_s: f64,
    /// Cycles at most.
    pub max_cycles: usize,
    /// Ends within this share of how far ahead they are are taken together in one cycle
    /// (far ahead, a minute matters less than the cycles it costs) …
    pub coalesce: f64,
    /// … and within this many seconds in any case.
    pub min_step_s: f64,
}

impl Default for Reach {
    fn default() -> Self {
        Reach {
            horizon_s: 7.0 * 86_400.0,
            max_cycles: 500,
            coalesce: 0.02,
            min_step_s: 30.0,
        }
    }
}

/// An action to run forward instead of taking it (a preview): on a copy of the present.
#[derive(Clone, Debug)]
pub enum Change {
    /// A job submitted now (its id one no job has: the caller's to pick).
    Submit(Box<PendingJob>),
    Hold(JobId),
    Release(JobId),
    Cancel(JobId),
    Preempt(JobId),
    /// Moves the job to this priority class.
    Class(JobId, usize),
}

impl Present {
    /// A cycle's input at `now`: this copy as it stands.
    fn input(&self, now: f64) -> CycleInput<'_> {
        CycleInput {
            now,
            cluster: &self.cluster,
            teams: &self.teams,
            classes: &self.classes,
            usage: &self.usage,
            pending: &self.pending,
            running: &self.running,
            config: &self.config,
        }
    }

    /// Applies `change` to this copy, as the daemon would: a hold keeps the job waiting out of
    /// the queue, a cancel takes it away (a running one's GPUs freed), a preemption puts a
    /// running job back in the queue where it resumes. The error says why the job's state
    /// does not allow it.
    pub fn apply(&mut self, change: Change) -> Result<(), String> {
        let waiting = |p: &Present, id: JobId| p.pending.iter().position(|j| j.id == id);
        let running = |p: &Present, id: JobId| p.running.iter().position(|r| r.id == id);
        match change {
            Change::Submit(job) => {
                if waiting(self, job.id).is_some() || running(self, job.id).is_some() {
                    return Err(format!("job {} is already here", job.id));
                }
                self.pending.push(*job);
            }
            Change::Hold(id) => {
                let i = waiting(self, id).ok_or("only a waiting job is held")?;
                self.pending[i].held = true;
            }
            Change::Release(id) => {
                let i = waiting(self, id).ok_or("only a held job is released")?;
                self.pending[i].held = false;
            }
            Change::Cancel(id) => {
                if let Some(i) = waiting(self, id) {
                    self.pending.swap_remove(i);
                } else {
                    let i = running(self, id).ok_or("the job neither waits nor runs")?;
                    let r = self.running.swap_remove(i);
                    let _ = self.cluster.release(&r.placement);
                }
            }
            Change::Preempt(id) => {
                let i = running(self, id).ok_or("only a running job is preempted")?;
                let r = self.running.swap_remove(i);
                let _ = self.cluster.release(&r.placement);
                let p = self
                    .requeue
                    .get(&id)
                    .cloned()
                    .ok_or("the job cannot be requeued")?;
                self.pending.push(p);
            }
            Change::Class(id, class) => {
                if class >= self.classes.len() {
                    return Err(format!("no priority class #{class}"));
                }
                if let Some(i) = waiting(self, id) {
                    self.pending[i].class = class;
                } else {
                    let i = running(self, id).ok_or("the job neither waits nor runs")?;
                    self.running[i].class = class;
                }
                if let Some(p) = self.requeue.get_mut(&id) {
                    p.class = class;
                }
            }
        }
        Ok(())
    }
}

/// What a forward run found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ahead {
    /// Each pending job that started, and when (on the forward clock).
    pub starts: HashMap<JobId, f64>,
    /// How far the run looked: a job not in `starts` starts later than this (if ever).
    pub looked_to: f64,
    /// Why it stopped looking: `"queue empty"`, `"nothing ends"`, `"horizon"`, `"cycles"`,
    /// `"time"`.
    pub stopped: &'static str,
    pub cycles: usize,
    /// After the first cycle: what the running jobs cost an hour, and each team's GPUs.
    pub dollars_per_hour: f64,
    pub team_gpus: Vec<f64>,
}

/// The waiting jobs of a forward run, kept between its cycles. A cycle walks them in queue
/// order; between two cycles only a few change places — jobs that start leave, victims come
/// back, jobs that pass the aging limit move up their class — so the order is mended, not
/// sorted again (sorting 100,000 jobs each cycle was a sixth of a forward run). Jobs stay at
/// their index in `present.pending` for the whole run; one that starts is only marked gone.
struct Queue {
    /// Live jobs not held, in queue order.
    order: Vec<Queued>,
    /// Jobs not held and not yet aged when last placed, with their submission times, the
    /// longest waiting last.
    young: Vec<(f64, u32)>,
    /// Live waiting jobs by id, and whether each index is live.
    at: HashMap<JobId, u32, FastHash>,
    live: Vec<bool>,
    /// Jobs to (re)place in `order` at the next cycle: come back, or their key changed.
    fresh: Vec<u32>,
    /// Some job left `order` since it was last mended.
    left: bool,
    /// The requests' numbering, for the whole run.
    shapes: Shapes,
    /// Live jobs not held (those in `order` that have not started, and those in `fresh`).
    waiting: usize,
}

impl Queue {
    fn of(pending: &[PendingJob]) -> Queue {
        let mut q = Queue {
            order: Vec::new(),
            young: Vec::new(),
            at: HashMap::default(),
            live: vec![true; pending.len()],
            fresh: Vec::new(),
            left: false,
            waiting: 0,
            shapes: Shapes::default(),
        };
        for (i, p) in pending.iter().enumerate() {
            q.at.insert(p.id, i as u32);
            if !p.held {
                q.fresh.push(i as u32);
                q.waiting += 1;
            }
        }
        q
    }

    /// Whether no live job waits unheld.
    fn is_empty(&self) -> bool {
        self.waiting == 0
    }

    /// A job back in the queue (a victim), at `pending`'s new last index.
    fn push(&mut self, pending: &[PendingJob]) {
        let i = pending.len() - 1;
        self.at.insert(pending[i].id, i as u32);
        self.live.push(true);
        if !pending[i].held {
            self.fresh.push(i as u32);
            self.waiting += 1;
        }
    }

    /// The job `id` started: it leaves the queue.
    fn start(&mut self, id: JobId) -> Option<usize> {
        let i = self.at.remove(&id)? as usize;
        self.live[i] = false;
        self.left = true;
        // Only jobs of `order` start.
        self.waiting -= 1;
        Some(i)
    }

    /// Brings the order to `input.now`: jobs that left taken out, jobs aged since moved up,
    /// jobs come back put in their place — the order a sort at `input.now` gives.
    fn mend(&mut self, input: &CycleInput) {
        let pending = input.pending;
        let limit = input.config.aging_limit_s;
        let mut aged = Vec::new();
        while let Some(&(submitted, i)) = self.young.last() {
            if self.live[i as usize] && input.now - submitted <= limit {
                break;
            }
            self.young.pop();
            if self.live[i as usize] {
                aged.push(i);
            }
        }
        if aged.is_empty() && self.fresh.is_empty() && !self.left {
            return;
        }
        let mut moved = vec![false; if aged.is_empty() { 0 } else { pending.len() }];
        for &i in &aged {
            moved[i as usize] = true;
        }
        let live = &self.live;
        self.order.retain(|q| {
            live[q.idx as usize] && !moved.get(q.idx as usize).copied().unwrap_or(false)
        });
        let mut add: Vec<Queued> = aged
            .into_iter()
            .chain(std::mem::take(&mut self.fresh))
            .filter(|&i| live[i as usize])
            .map(|i| Queued::of(input, i as usize, &mut self.shapes))
            .collect();
        add.sort_unstable_by_key(|q| q.key);
        // Not aged yet: each will be, and move up then.
        let mut young: Vec<(f64, u32)> = add
            .iter()
            .filter(|q| q.key.1 == std::cmp::Reverse(false))
            .map(|q| (pending[q.idx as usize].submitted, q.idx))
            .collect();
        young.sort_by(|a, b| b.0.total_cmp(&a.0));
        self.young = merge(std::mem::take(&mut self.young), young, |a, b| {
            a.0.total_cmp(&b.0).is_ge()
        });
        self.order = merge(std::mem::take(&mut self.order), add, |p, q| p.key <= q.key);
        self.left = false;
    }
}

/// Two sorted runs as one: `first(p, q)` when `p` goes before (or with) `q`.
fn merge<T>(a: Vec<T>, b: Vec<T>, first: impl Fn(&T, &T) -> bool) -> Vec<T> {
    if b.is_empty() {
        return a;
    }
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut x, mut y) = (a.into_iter().peekable(), b.into_iter().peekable());
    loop {
        let next = match (x.peek(), y.peek()) {
            (Some(p), Some(q)) if first(p, q) => x.next(),
            (_, Some(_)) => y.next(),
            (Some(_), None) => x.next(),
            (None, None) => break,
        };
        out.extend(next);
    }
    out
}

/// Runs `present` forward: `left(id)` is how much longer a job runs once it has started (for
/// a running job, from `present.now`). `stop` is asked between cycles whether the caller's
/// time box is spent.
///
/// Each cycle decides what `run_cycle` decides on the same state (the property test below
/// holds it to that); what is kept between cycles is only how it gets there.
pub fn forward(
    mut present: Present,
    left: &dyn Fn(JobId) -> f64,
    reach: Reach,
    stop: &mut dyn FnMut() -> bool,
) -> Result<Ahead, CycleError> {
    let start = present.now;
    let mut now = start;
    // Each running job's end on the forward clock, beside it in `present.running` (kept in
    // step: a map looked up for every running job at every cycle was a tenth of the run).
    let mut ends: Vec<f64> = present
        .running
        .iter()
        .map(|r| now + left(r.id).max(0.0))
        .collect();
    // What a preempted job had left when it stopped: it resumes from there.
    let mut resume: HashMap<JobId, f64, FastHash> = HashMap::default();
    let mut ahead = Ahead::default();
    present.config.explain = false;
    present.arriving.sort_by(|a, b| b.0.total_cmp(&a.0));
    // Nodes due by now (or overdue) take work from the first cycle.
    while present.arriving.last().is_some_and(|a| a.0 <= now) {
        if let Some((_, n)) = present.arriving.pop() {
            present.cluster.set_health(n, Health::Healthy);
        }
    }
    // Jobs neither start nor come back with a team or class they did not have: checked once.
    check(&present.input(now))?;
    let mut queue = Queue::of(&present.pending);
    // Out of the copy, so that a cycle's input can borrow the rest of it whole.
    let fresh = Placer::new(present.placer.policy());
    let mut placer = std::mem::replace(&mut present.placer, fresh);
    // The cycle's working copy of the cluster, copied into again at each cycle.
    let mut work = present.cluster.clone();
    loop {
        let input = present.input(now);
        queue.mend(&input);
        work.clone_from(&present.cluster);
        let out = walk(
            &mut placer,
            &input,
            &queue.order,
            &mut queue.shapes,
            &mut work,
        );
        ahead.cycles += 1;
        let mut started = Vec::new();
        let mut started_ends = Vec::new();
        // Where the victims are, to take them out of the running list at once after (looked
        // up for those alone).
        let named: HashSet<JobId, FastHash> = out
            .decisions
            .iter()
            .filter_map(|d| match d {
                Decision::Preempt { victim, .. } => Some(*victim),
                _ => None,
            })
            .collect();
        let running_at: HashMap<JobId, usize, FastHash> = present
            .running
            .iter()
            .enumerate()
            .filter(|(_, r)| named.contains(&r.id))
            .map(|(i, r)| (r.id, i))
            .collect();
        let mut stop_running = vec![false; present.running.len()];
        let mut requeued = Vec::new();
        for d in out.decisions {
            match d {
                Decision::Start {
                    job,
                    placement,
                    borrowed,
                } => {
                    if present.cluster.allocate(&placement).is_err() {
                        continue;
                    }
                    let Some(i) = queue.start(job) else {
                        continue;
                    };
                    let p = present.pending[i].clone();
                    ahead.starts.entry(job).or_insert(now);
                    let runs = resume.remove(&job).unwrap_or_else(|| left(job).max(0.0));
                    started_ends.push(now + runs);
                    started.push(RunningJob {
                        id: job,
                        team: p.team,
                        class: p.class,
                        started: now,
                        placement,
                        preemptible: true,
                        last_checkpoint: None,
                        time_limit_s: p.time_limit_s,
                        borrowed,
                        // Nobody is signalled in a forward run (and an empty name is no
                        // allocation at each of 100,000 starts).
                        signal: String::new(),
                        grace_s: 0.0,
                    });
                    present.requeue.insert(job, p);
                }
                // The victim stops now and waits again, resuming where it was.
                Decision::Preempt { victim, .. } => {
                    let Some(&i) = running_at.get(&victim).filter(|&&i| !stop_running[i]) else {
                        continue;
                    };
                    stop_running[i] = true;
                    let _ = present.cluster.release(&present.running[i].placement);
                    let left_then = (ends[i] - now).max(0.0);
                    if let Some(p) = present.requeue.get(&victim) {
                        requeued.push(p.clone());
                        resume.insert(victim, left_then);
                    }
                }
                Decision::Reserve { .. } => {}
            }
        }
        let mut k = 0;
        present.running.retain(|_| {
            k += 1;
            !stop_running[k - 1]
        });
        let mut k = 0;
        ends.retain(|_| {
            k += 1;
            !stop_running[k - 1]
        });
        for p in requeued {
            present.pending.push(p);
            queue.push(&present.pending);
        }
        present.running.extend(started);
        ends.extend(started_ends);
        if ahead.cycles == 1 {
            ahead.dollars_per_hour = present
                .running
                .iter()
                .map(|r| r.placement.price_per_hour)
                .sum();
            ahead.team_gpus = vec![0.0; present.teams.len()];
            for r in &present.running {
                if let Some(g) = ahead.team_gpus.get_mut(r.team) {
                    *g += r.placement.gpu_milli() as f64 / 1000.0;
                }
            }
        }
        if queue.is_empty() {
            ahead.stopped = "queue empty";
            break;
        }
        if ahead.cycles >= reach.max_cycles {
            ahead.stopped = "cycles";
            break;
        }
        if stop() {
            ahead.stopped = "time";
            break;
        }
        // The next end or node bought, and every one close enough after it to be taken with it.
        let Some(next) = ends
            .iter()
            .copied()
            .chain(present.arriving.last().map(|a| a.0))
            .min_by(f64::total_cmp)
        else {
            ahead.stopped = "nothing ends";
            break;
        };
        if next > start + reach.horizon_s {
            ahead.stopped = "horizon";
            break;
        }
        // The clock moves to the last end taken (not past it): an estimate errs early by
        // at most the step, never late.
        let until = next + (reach.coalesce * (next - start)).max(reach.min_step_s);
        let mut to = next;
        let mut i = 0;
        while i < present.running.len() {
            match Some(ends[i]).filter(|&e| e <= until) {
                Some(e) => {
                    let r = present.running.swap_remove(i);
                    ends.swap_remove(i);
                    let _ = present.cluster.release(&r.placement);
                    to = to.max(e);
                }
                None => i += 1,
            }
        }
        while present.arriving.last().is_some_and(|a| a.0 <= until) {
            if let Some((at, n)) = present.arriving.pop() {
                present.cluster.set_health(n, Health::Healthy);
                to = to.max(at);
            }
        }
        now = to.max(now);
    }
    ahead.looked_to = now;
    Ok(ahead)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{
        default_classes, CapacityType, FleetBuilder, GpuRequest, JobRequest, PoolSpec, Team,
    };
    use crate::scheduler::Policy;

    fn one_node(gpus: u8) -> Cluster {
        let mut b = FleetBuilder::new();
        let model = b.model("h100", 80 * 1024, None).unwrap();
        let pool = b
            .pool(PoolSpec {
                provider: "test",
                region: "r",
                zone: "z",
                name: "p",
                instance_type: "x",
                model: Some(model),
                gpus_per_node: gpus,
                cpu_milli: 64_000,
                mem_mib: 512 * 1024,
                capacity: CapacityType::Reserved,
                price_per_hour: 1.0,
            })
            .unwrap();
        b.node(pool, "n0", None, None, 0).unwrap();
        Cluster::new(b.build())
    }

    fn pending(id: JobId, gpus: u8, submitted: f64) -> PendingJob {
        PendingJob {
            id,
            team: 0,
            class: 0,
            submitted,
            request: JobRequest {
                gpu: GpuRequest::Whole(gpus),
                ..JobRequest::default()
            },
            alternatives: Vec::new(),
            held: false,
            time_limit_s: None,
        }
    }

    fn present(cluster: Cluster, pending: Vec<PendingJob>) -> Present {
        Present {
            now: 1000.0,
            cluster,
            placer: Placer::new(Policy::Gantry),
            teams: vec![Team {
                name: "lab".to_string(),
                weight: 1.0,
                quota: None,
                cohort: None,
            }],
            classes: default_classes(),
            usage: vec![0.0],
            config: CycleConfig::default(),
            pending,
            running: Vec::new(),
            requeue: HashMap::new(),
            arriving: Vec::new(),
        }
    }

    #[test]
    fn a_job_starts_when_the_one_before_it_ends_by_its_estimate() {
        // Two whole-node jobs on one 8-GPU node: 1 runs 600 s, so 2 starts at 1600 and
        // 3 (after 2's 300 s) at 1900.
        let p = present(
            one_node(8),
            vec![
                pending(1, 8, 10.0),
                pending(2, 8, 20.0),
                pending(3, 8, 30.0),
            ],
        );
        let left = |id: JobId| if id == 1 { 600.0 } else { 300.0 };
        let ahead = forward(p, &left, Reach::default(), &mut || false).unwrap();
        assert_eq!(ahead.starts.get(&1), Some(&1000.0));
        let two = ahead.starts[&2];
        assert!((1600.0..=1600.0 + 0.02 * 600.0).contains(&two), "{two}");
        assert!(ahead.starts[&3] > two + 299.0, "{:?}", ahead.starts);
        assert_eq!(ahead.stopped, "queue empty");
    }

    #[test]
    fn a_held_job_or_one_that_never_fits_gets_no_start() {
        let mut held = pending(2, 1, 20.0);
        held.held = true;
        let p = present(one_node(8), vec![pending(1, 1, 10.0), held]);
        let ahead = forward(p, &|_| 60.0, Reach::default(), &mut || false).unwrap();
        assert!(ahead.starts.contains_key(&1));
        assert!(!ahead.starts.contains_key(&2), "held");
        // Nothing but the held job left after the first cycle: no second one.
        assert_eq!((ahead.cycles, ahead.stopped), (1, "queue empty"));
        let p = present(one_node(8), vec![pending(1, 8, 10.0), pending(2, 8, 20.0)]);
        let ahead = forward(p, &|_| 1e9, Reach::default(), &mut || false).unwrap();
        assert!(!ahead.starts.contains_key(&2));
        assert_eq!(ahead.stopped, "horizon");
    }

    #[test]
    fn a_node_being_bought_takes_work_when_it_is_expected() {
        let mut c = one_node(8);
        c.set_health(NodeId(0), Health::Cordoned);
        let mut p = present(c, vec![pending(1, 8, 10.0)]);
        p.arriving.push((1300.0, NodeId(0)));
        let ahead = forward(p, &|_| 60.0, Reach::default(), &mut || false).unwrap();
        let at = ahead.starts[&1];
        assert!((1300.0..=1306.0).contains(&at), "{at}");
    }

    #[test]
    fn a_preview_of_a_cancel_starts_the_next_job_now() {
        let p = present(one_node(8), vec![pending(1, 8, 10.0), pending(2, 8, 20.0)]);
        let before = forward(p.clone(), &|_| 600.0, Reach::default(), &mut || false).unwrap();
        assert_eq!(before.starts.get(&2), Some(&1600.0));
        // Job 1 waits; held, job 2 goes first.
        let mut held = p.clone();
        held.apply(Change::Hold(1)).unwrap();
        let after = forward(held, &|_| 600.0, Reach::default(), &mut || false).unwrap();
        assert_eq!(after.starts.get(&2), Some(&1000.0));
        assert!(!after.starts.contains_key(&1));
        let mut wrong = p;
        assert!(wrong.apply(Change::Preempt(1)).is_err(), "1 does not run");
    }

    #[test]
    fn a_preview_of_a_submission_says_when_it_starts_and_whom_it_delays() {
        // Job 1 (experiment) waits for the node that job 2 holds; a production job submitted
        // now goes ahead of it.
        let mut first = pending(1, 8, 10.0);
        first.class = 2;
        let mut p = present(one_node(8), vec![first]);
        let before = forward(p.clone(), &|_| 600.0, Reach::default(), &mut || false).unwrap();
        assert_eq!(before.starts.get(&1), Some(&1000.0));
        let mut new = pending(99, 8, 1000.0);
        new.class = 1;
        assert!(p.classes[1].value > p.classes[2].value);
        p.apply(Change::Submit(Box::new(new.clone()))).unwrap();
        let after = forward(p.clone(), &|_| 600.0, Reach::default(), &mut || false).unwrap();
        assert_eq!(after.starts.get(&99), Some(&1000.0), "it goes first");
        assert_eq!(after.starts.get(&1), Some(&1600.0), "job 1 waits for it");
        assert!(p.apply(Change::Submit(Box::new(new))).is_err(), "once");
    }

    #[test]
    fn the_callers_time_box_stops_the_run() {
        let jobs = (1..=20).map(|i| pending(i, 8, i as f64)).collect();
        let mut asked = 0;
        let ahead = forward(
            present(one_node(8), jobs),
            &|_| 100.0,
            Reach::default(),
            &mut || {
                asked += 1;
                asked >= 3
            },
        )
        .unwrap();
        assert_eq!(ahead.stopped, "time");
        assert_eq!(ahead.cycles, 3);
        assert_eq!(ahead.starts.len(), 3);
    }
}
