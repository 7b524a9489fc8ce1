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
    run_cycle, CycleConfig, CycleError, CycleInput, Decision, JobId, PendingJob, RunningJob,
};
use super::hash::FastHash;
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

/// Runs `present` forward: `left(id)` is how much longer a job runs once it has started (for
/// a running job, from `present.now`). `stop` is asked between cycles whether the caller's
/// time box is spent.
pub fn forward(
    mut present: Present,
    left: &dyn Fn(JobId) -> f64,
    reach: Reach,
    stop: &mut dyn FnMut() -> bool,
) -> Result<Ahead, CycleError> {
    let start = present.now;
    let mut now = start;
    // Each running job's end on the forward clock.
    let mut ends: HashMap<JobId, f64, FastHash> = present
        .running
        .iter()
        .map(|r| (r.id, now + left(r.id).max(0.0)))
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
    loop {
        let input = CycleInput {
            now,
            cluster: &present.cluster,
            teams: &present.teams,
            classes: &present.classes,
            usage: &present.usage,
            pending: &present.pending,
            running: &present.running,
            config: &present.config,
        };
        let out = run_cycle(&mut present.placer, &input)?;
        ahead.cycles += 1;
        let mut started = Vec::new();
        // Where the jobs that start and the victims are, to take them out of their lists at
        // once after (looked up for those alone: a map of all 100,000 waiting jobs each cycle
        // was a tenth of a forward run).
        let mut named: HashSet<JobId, FastHash> = HashSet::default();
        for d in &out.decisions {
            match d {
                Decision::Start { job, .. } => named.insert(*job),
                Decision::Preempt { victim, .. } => named.insert(*victim),
                Decision::Reserve { .. } => false,
            };
        }
        let waiting_at: HashMap<JobId, usize, FastHash> = present
            .pending
            .iter()
            .enumerate()
            .filter(|(_, p)| named.contains(&p.id))
            .map(|(i, p)| (p.id, i))
            .collect();
        let running_at: HashMap<JobId, usize, FastHash> = present
            .running
            .iter()
            .enumerate()
            .filter(|(_, r)| named.contains(&r.id))
            .map(|(i, r)| (r.id, i))
            .collect();
        let mut leave_queue = vec![false; present.pending.len()];
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
                    let Some(&i) = waiting_at.get(&job).filter(|&&i| !leave_queue[i]) else {
                        continue;
                    };
                    leave_queue[i] = true;
                    let p = present.pending[i].clone();
                    ahead.starts.entry(job).or_insert(now);
                    let runs = resume.remove(&job).unwrap_or_else(|| left(job).max(0.0));
                    ends.insert(job, now + runs);
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
                        signal: "SIGTERM".to_string(),
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
                    let left_then = ends.remove(&victim).map_or(0.0, |e| (e - now).max(0.0));
                    if let Some(p) = present.requeue.get(&victim) {
                        requeued.push(p.clone());
                        resume.insert(victim, left_then);
                    }
                }
                Decision::Reserve { .. } => {}
            }
        }
        let mut k = 0;
        present.pending.retain(|_| {
            k += 1;
            !leave_queue[k - 1]
        });
        let mut k = 0;
        present.running.retain(|_| {
            k += 1;
            !stop_running[k - 1]
        });
        present.pending.extend(requeued);
        present.running.extend(started);
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
        if present.pending.iter().all(|p| p.held) {
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
        let Some(next) = present
            .running
            .iter()
            .filter_map(|r| ends.get(&r.id).copied())
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
            let id = present.running[i].id;
            match ends.get(&id).copied().filter(|&e| e <= until) {
                Some(e) => {
                    let r = present.running.swap_remove(i);
                    let _ = present.cluster.release(&r.placement);
                    ends.remove(&id);
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
