//! The forward run (start estimates and previews) keeps its queue between cycles; each cycle
//! must still decide exactly what `run_cycle` decides. The reference below is the forward run
//! as it was before it kept anything: `run_cycle` from scratch at every cycle, the pending list
//! rebuilt after each. Both are run on seeded worlds of the scheduler benchmark (20 teams in
//! cohorts with guarantees and borrowing, three classes, time limits, held jobs, preemption)
//! and must agree to the bit.

use gantry::bench::sched::{cycle_world, pending_set, synthetic_fleet};
use gantry::model::Health;
use gantry::scheduler::cycle::{
    run_cycle, CycleConfig, CycleError, CycleInput, Decision, JobId, RunningJob,
};
use gantry::scheduler::forecast::{forward, Ahead, Change, Present, Reach};
use gantry::scheduler::{Placer, Policy};
use std::collections::{HashMap, HashSet};

type FastHash = std::collections::hash_map::RandomState;

fn reference(
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

fn world(
    nodes: usize,
    waiting: usize,
    seed: u64,
    policy: Policy,
) -> (Present, HashMap<JobId, f64>) {
    let fleet = synthetic_fleet(nodes);
    let pending = pending_set(&fleet, waiting, seed);
    let w = cycle_world(&fleet, &pending, policy, seed);
    let mut left = HashMap::new();
    for (i, r) in w.running.iter().enumerate() {
        left.insert(r.id, 60.0 + (i as f64 * 7919.0) % 20_000.0);
    }
    for (i, p) in w.pending.iter().enumerate() {
        left.insert(p.id, 600.0 + (i as f64 * 104_729.0) % 40_000.0);
    }
    let present = Present {
        now: 4000.0,
        cluster: w.cluster,
        placer: Placer::new(policy),
        teams: w.teams,
        classes: w.classes,
        usage: w.usage,
        config: CycleConfig::default(),
        pending: w.pending,
        running: w.running,
        requeue: HashMap::new(),
        arriving: Vec::new(),
    };
    (present, left)
}

fn both(present: Present, left: &HashMap<JobId, f64>) -> (Ahead, Ahead) {
    let f = |id: JobId| left.get(&id).copied().unwrap_or(3600.0);
    let reach = Reach::default();
    let kept = forward(present.clone(), &f, reach, &mut || false).unwrap();
    let fresh = reference(present, &f, reach, &mut || false).unwrap();
    (kept, fresh)
}

#[test]
fn the_forward_run_decides_what_run_cycle_decides_at_every_cycle() {
    for (seed, nodes, waiting, policy) in [
        (1, 60, 1500, Policy::Gantry),
        (5, 1000, 10_000, Policy::Gantry),
        (2, 120, 3000, Policy::Gantry),
        (3, 40, 2000, Policy::Gantry),
        (4, 80, 1200, Policy::BestFit),
    ] {
        let (present, left) = world(nodes, waiting, seed, policy);
        let (kept, fresh) = both(present, &left);
        assert!(
            fresh.starts.len() > waiting / 2,
            "seed {seed}: {} starts",
            fresh.starts.len()
        );
        assert!(fresh.cycles > 20, "seed {seed}: {} cycles", fresh.cycles);
        assert_eq!(kept, fresh, "seed {seed}");
    }
}

#[test]
fn a_previewed_change_is_run_forward_the_same_way() {
    let (mut present, left) = world(60, 1500, 7, Policy::Gantry);
    let running = present.running[0].id;
    let waiting: Vec<JobId> = present.pending.iter().take(40).map(|p| p.id).collect();
    present.apply(Change::Preempt(running)).ok();
    for (i, id) in waiting.into_iter().enumerate() {
        let change = match i % 3 {
            0 => Change::Hold(id),
            1 => Change::Class(id, 0),
            _ => Change::Cancel(id),
        };
        present.apply(change).unwrap();
    }
    let (kept, fresh) = both(present, &left);
    assert_eq!(kept, fresh);
}
