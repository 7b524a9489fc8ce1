//! The scheduling cycle: queue order, quotas and borrowing, preemption, backfill, explanations.

use gantry::model::*;
use gantry::scheduler::cycle::*;
use gantry::scheduler::{Cluster, Placer, Policy};
use proptest::prelude::*;

use crate::support::fleets as common;

fn fleet(nodes: usize, gpus: u8) -> Fleet {
    let mut b = FleetBuilder::new();
    let m = b.model("H100", 81_559, None).unwrap();
    let p = common::onprem_pool(&mut b, m, "hgx", gpus, 20.0);
    for i in 0..nodes {
        b.node(p, &format!("n{i}"), Some("leaf-0"), None, 0)
            .unwrap();
    }
    b.build()
}

fn team(name: &str, guaranteed: Option<u32>, borrow: u32, cohort: Option<&str>) -> Team {
    Team {
        name: name.to_string(),
        weight: 1.0,
        quota: guaranteed.map(|g| Quota {
            guaranteed: g,
            borrow_limit: borrow,
            ..Quota::default()
        }),
        cohort: cohort.map(str::to_string),
    }
}

fn pending(id: JobId, team: usize, class: usize, gpus: u8, submitted: f64) -> PendingJob {
    PendingJob {
        id,
        team,
        class,
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

/// Starts `job` on `cluster` the way a daemon would, returning the running record.
fn run(
    cluster: &mut Cluster,
    job: &PendingJob,
    started: f64,
    borrowed: bool,
    preemptible: bool,
) -> RunningJob {
    let p = Placer::new(Policy::Gantry)
        .place(cluster, &job.request, 1)
        .expect("room to start");
    cluster.allocate(&p).unwrap();
    RunningJob {
        id: job.id,
        team: job.team,
        class: job.class,
        started,
        placement: p,
        preemptible,
        last_checkpoint: Some(started),
        time_limit_s: job.time_limit_s,
        borrowed,
        signal: "SIGTERM".to_string(),
        grace_s: 30.0,
    }
}

struct World {
    cluster: Cluster,
    teams: Vec<Team>,
    classes: Vec<PriorityClass>,
    usage: Vec<f64>,
    running: Vec<RunningJob>,
    config: CycleConfig,
}

impl World {
    fn new(nodes: usize, teams: Vec<Team>) -> World {
        let n = teams.len();
        World {
            cluster: Cluster::new(fleet(nodes, 8)),
            teams,
            classes: default_classes(),
            usage: vec![0.0; n],
            running: Vec::new(),
            config: CycleConfig::default(),
        }
    }
    /// One tick of a little daemon: finish the jobs due by `now`, run a cycle over `queue`,
    /// start what it decided (each runs `duration(id)` seconds). Returns the ids started.
    fn step(
        &mut self,
        now: f64,
        queue: &mut Vec<PendingJob>,
        ends: &mut Vec<(f64, JobId)>,
        duration: &dyn Fn(JobId) -> f64,
    ) -> Vec<JobId> {
        for (_, id) in ends.iter().filter(|(e, _)| *e <= now) {
            let r = self.running.iter().position(|r| r.id == *id).unwrap();
            let r = self.running.remove(r);
            self.cluster.release(&r.placement).unwrap();
        }
        ends.retain(|(e, _)| *e > now);
        let out = self.cycle(now, queue).unwrap();
        let mut started = Vec::new();
        for d in out.decisions {
            if let Decision::Start {
                job,
                placement,
                borrowed,
            } = d
            {
                let j = queue.remove(queue.iter().position(|j| j.id == job).unwrap());
                self.cluster.allocate(&placement).unwrap();
                ends.push((now + duration(job), job));
                self.running.push(RunningJob {
                    id: job,
                    team: j.team,
                    class: j.class,
                    started: now,
                    placement,
                    preemptible: false,
                    last_checkpoint: None,
                    time_limit_s: j.time_limit_s,
                    borrowed,
                    signal: "SIGTERM".into(),
                    grace_s: 30.0,
                });
                started.push(job);
            }
        }
        started
    }

    fn cycle(&self, now: f64, pending: &[PendingJob]) -> Result<CycleOutput, CycleError> {
        let input = CycleInput {
            now,
            cluster: &self.cluster,
            teams: &self.teams,
            classes: &self.classes,
            usage: &self.usage,
            pending,
            running: &self.running,
            config: &self.config,
        };
        run_cycle(&mut Placer::new(Policy::Gantry), &input)
    }
}

const SERVING: usize = 0;
const PRODUCTION: usize = 1;
const EXPERIMENT: usize = 2;

/// The jobs started, each with whether it runs on borrowed capacity.
fn started_borrowed(out: &CycleOutput) -> Vec<(JobId, bool)> {
    out.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, borrowed, .. } => Some((*job, *borrowed)),
            _ => None,
        })
        .collect()
}

fn started(out: &CycleOutput) -> Vec<JobId> {
    out.decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, .. } => Some(*job),
            _ => None,
        })
        .collect()
}

#[test]
fn higher_classes_go_first_then_fair_share_then_age() {
    let mut w = World::new(1, vec![team("a", None, 0, None), team("b", None, 0, None)]);
    w.usage = vec![1000.0, 10.0];
    let jobs = [
        pending(1, 0, EXPERIMENT, 8, 0.0),
        pending(2, 0, PRODUCTION, 8, 5.0),
        pending(3, 1, PRODUCTION, 8, 9.0),
        pending(4, 1, SERVING, 8, 10.0),
    ];
    let out = w.cycle(100.0, &jobs).unwrap();
    assert_eq!(started(&out), vec![4]);
    let pos: Vec<(JobId, usize)> = out
        .explanations
        .iter()
        .map(|e| (e.job, e.position))
        .collect();
    // production: team b has used less, so its job 3 ranks ahead of team a's older job 2.
    assert_eq!(pos, vec![(1, 4), (2, 3), (3, 2)]);
    let e3 = out.explanations.iter().find(|e| e.job == 3).unwrap();
    assert_eq!(
        (e3.class.as_str(), e3.class_position, e3.class_size),
        ("production", 1, 2)
    );
    assert!(matches!(
        e3.reason,
        PendingReason::NoCapacity { .. } | PendingReason::Reserved { .. }
    ));
}

#[test]
fn quotas_block_then_borrow_from_an_idle_cohort() {
    let teams = vec![
        team("a", Some(8), 8, Some("c")),
        team("b", Some(8), 0, Some("c")),
        team("solo", Some(8), 0, None),
    ];
    let w = World::new(4, teams);
    let jobs = [
        pending(1, 0, PRODUCTION, 8, 0.0),
        pending(2, 0, PRODUCTION, 8, 1.0),
        pending(3, 2, PRODUCTION, 8, 2.0),
        pending(4, 2, PRODUCTION, 8, 3.0),
    ];
    let out = w.cycle(10.0, &jobs).unwrap();
    let borrowed = started_borrowed(&out);
    assert_eq!(
        borrowed,
        vec![(1, false), (2, true), (3, false)],
        "a borrows b's idle 8; solo has no cohort"
    );
    let e4 = out.explanations.iter().find(|e| e.job == 4).unwrap();
    assert_eq!(
        e4.reason,
        PendingReason::Quota {
            wants: 8000,
            used: 8000,
            guaranteed: 8000,
            borrow_limit: 0,
            lendable: 0
        }
    );
}

#[test]
fn a_lender_reclaims_its_guarantee_from_a_borrower() {
    let teams = vec![
        team("a", Some(8), 8, Some("c")),
        team("b", Some(8), 0, Some("c")),
    ];
    let mut w = World::new(2, teams);
    let mut c = w.cluster.clone();
    w.running.push(run(
        &mut c,
        &pending(1, 0, PRODUCTION, 8, 0.0),
        0.0,
        false,
        true,
    ));
    w.running.push(run(
        &mut c,
        &pending(2, 0, PRODUCTION, 8, 0.0),
        0.0,
        true,
        true,
    ));
    w.cluster = c;
    // b wants its guarantee back, same class: only the borrowed job may go.
    let out = w
        .cycle(1000.0, &[pending(3, 1, PRODUCTION, 8, 900.0)])
        .unwrap();
    let victims: Vec<JobId> = out
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Preempt {
                victim,
                signal,
                grace_s,
                requeue_from_checkpoint,
                ..
            } => {
                assert_eq!(
                    (signal.as_str(), *grace_s, *requeue_from_checkpoint),
                    ("SIGTERM", 30.0, true)
                );
                Some(*victim)
            }
            _ => None,
        })
        .collect();
    assert_eq!(victims, vec![2]);
    assert_eq!(
        out.explanations[0].reason,
        PendingReason::AwaitingPreemption { victims: vec![2] }
    );
}

#[test]
fn preemption_respects_class_preemptibility_runtime_and_fit() {
    let mut w = World::new(2, vec![team("a", None, 0, None)]);
    let mut c = w.cluster.clone();
    w.running.push(run(
        &mut c,
        &pending(1, 0, EXPERIMENT, 8, 0.0),
        0.0,
        false,
        false,
    )); // not preemptible
    w.running.push(run(
        &mut c,
        &pending(2, 0, EXPERIMENT, 8, 0.0),
        950.0,
        false,
        true,
    )); // too young
    w.cluster = c;
    let job = pending(9, 0, SERVING, 8, 990.0);
    let out = w.cycle(1000.0, std::slice::from_ref(&job)).unwrap();
    assert!(
        out.decisions
            .iter()
            .all(|d| !matches!(d, Decision::Preempt { .. })),
        "{:?}",
        out.decisions
    );
    // Once old enough, the preemptible one goes; the other never does.
    let out = w.cycle(1300.0, std::slice::from_ref(&job)).unwrap();
    assert!(out.decisions.iter().any(|d| matches!(
        d,
        Decision::Preempt {
            victim: 2,
            for_job: 9,
            ..
        }
    )));
    // A 16-GPU serving job cannot fit even with job 2 gone: nothing is preempted.
    let big = JobRequest {
        nodes: 2,
        ..job.request.clone()
    };
    let out = w
        .cycle(
            1300.0,
            &[PendingJob {
                request: big,
                ..job
            }],
        )
        .unwrap();
    assert!(out
        .decisions
        .iter()
        .all(|d| !matches!(d, Decision::Preempt { .. })));
}

#[test]
fn the_blocked_head_gets_a_reservation_and_short_jobs_backfill() {
    let mut w = World::new(2, vec![team("a", None, 0, None)]);
    let mut c = w.cluster.clone();
    // Node 1: an 8-GPU job until 7200 s. Node 2: a 4-GPU job until 3600 s, 4 GPUs free.
    let mut long = pending(1, 0, PRODUCTION, 8, 0.0);
    long.time_limit_s = Some(7200.0);
    w.running.push(run(&mut c, &long, 0.0, false, false));
    let mut half = pending(2, 0, PRODUCTION, 4, 0.0);
    half.time_limit_s = Some(3600.0);
    w.running.push(run(&mut c, &half, 0.0, false, false));
    w.cluster = c;
    let head = pending(10, 0, PRODUCTION, 8, 100.0);
    let mut short = pending(11, 0, PRODUCTION, 4, 200.0);
    short.time_limit_s = Some(600.0);
    let mut slow = pending(12, 0, PRODUCTION, 4, 150.0);
    slow.time_limit_s = Some(100_000.0);
    let out = w.cycle(1000.0, &[head, short, slow]).unwrap();
    let reserve = out.decisions.iter().find_map(|d| match d {
        Decision::Reserve {
            job,
            start_at,
            nodes,
        } => Some((*job, *start_at, nodes.len())),
        _ => None,
    });
    assert_eq!(reserve, Some((10, 3600.0, 1)), "{:?}", out.decisions);
    // The 4 free GPUs are on the reserved node: the short job ends before the reservation, so
    // it may take them; the slow job would delay the head, so it waits.
    assert_eq!(started(&out), vec![11]);
    let slow_reason = &out
        .explanations
        .iter()
        .find(|e| e.job == 12)
        .unwrap()
        .reason;
    assert!(
        matches!(
            slow_reason,
            PendingReason::NoCapacity {
                reservation: Some((10, _)),
                ..
            }
        ),
        "{slow_reason:?}"
    );
}

#[test]
fn held_jobs_and_bad_input_are_explained() {
    let w = World::new(1, vec![team("a", None, 0, None)]);
    let mut held = pending(1, 0, PRODUCTION, 1, 0.0);
    held.held = true;
    let out = w.cycle(0.0, &[held]).unwrap();
    assert_eq!(out.explanations[0].reason, PendingReason::Held);
    assert_eq!(out.explanations[0].position, 0);
    let err = w
        .cycle(0.0, &[pending(7, 3, PRODUCTION, 1, 0.0)])
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "job 7: unknown team #3 (1 teams are defined)"
    );
    let err = w.cycle(0.0, &[pending(8, 0, 9, 1, 0.0)]).unwrap_err();
    assert_eq!(
        err.to_string(),
        "job 8: unknown priority class #9 (3 classes are defined)"
    );
    let never = PendingJob {
        request: JobRequest {
            gpu: GpuRequest::Whole(9),
            ..JobRequest::default()
        },
        ..pending(9, 0, PRODUCTION, 1, 0.0)
    };
    let out = w.cycle(0.0, &[never]).unwrap();
    assert!(matches!(
        &out.explanations[0].reason,
        PendingReason::NoCapacity {
            why: gantry::scheduler::Unplaceable::NeverFits { .. },
            ..
        }
    ));
}

/// Two teams with equal weight and equal endless demand share 8 GPUs equally over time.
#[test]
fn equal_teams_get_equal_gpu_hours() {
    let mut w = World::new(1, vec![team("a", None, 0, None), team("b", None, 0, None)]);
    let half_life = 3600.0;
    let mut gpu_s = [0.0f64; 2];
    let mut next_id = 100;
    let mut queue: Vec<PendingJob> = Vec::new();
    let mut now = 0.0;
    let step = 60.0;
    // Jobs of 1 GPU lasting 10 to 40 minutes, by team, deterministic.
    let duration = |id: u64| 600.0 + (id * 7919 % 1800) as f64;
    let mut ends: Vec<(f64, JobId)> = Vec::new();
    while now < 48.0 * 3600.0 {
        for t in 0..2 {
            while queue.iter().filter(|j| j.team == t).count() < 20 {
                queue.push(pending(next_id, t, EXPERIMENT, 1, now));
                next_id += 1;
            }
        }
        w.step(now, &mut queue, &mut ends, &duration);
        for (t, used) in gpu_s.iter_mut().enumerate() {
            let busy = w.running.iter().filter(|r| r.team == t).count() as f64;
            *used += busy * step;
            w.usage[t] = decay(w.usage[t], step, half_life) + busy * step;
        }
        now += step;
    }
    let ratio = gpu_s[0] / gpu_s[1];
    assert!(
        (ratio - 1.0).abs() < 0.05,
        "GPU-hours a/b = {ratio:.3} ({:.0} vs {:.0})",
        gpu_s[0] / 3600.0,
        gpu_s[1] / 3600.0
    );
    assert!(
        gpu_s[0] + gpu_s[1] > 0.95 * 8.0 * 48.0 * 3600.0,
        "the node stays busy"
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    /// Random running sets and queues: every pending job that did not start is explained;
    /// guaranteed work is never preempted for a borrower; non-preemptible work never at all.
    #[test]
    fn cycle_invariants(
        running in proptest::collection::vec((0usize..3, 0usize..3, 1u8..=8, any::<bool>(), any::<bool>()), 0..8),
        queue in proptest::collection::vec((0usize..3, 0usize..3, 1u8..=8, any::<bool>(), 0u8..=8), 1..12),
    ) {
        let teams = vec![team("a", Some(8), 8, Some("c")), team("b", Some(8), 8, Some("c")), team("c", Some(16), 0, None)];
        let mut w = World::new(4, teams);
        let mut c = w.cluster.clone();
        for (i, &(t, class, gpus, borrowed, preemptible)) in running.iter().enumerate() {
            let job = pending(i as JobId, t, class, gpus, 0.0);
            if let Ok(p) = Placer::new(Policy::Gantry).place(&c, &job.request, 1) {
                c.allocate(&p).unwrap();
                w.running.push(RunningJob { id: job.id, team: t, class, started: 0.0, placement: p, preemptible, last_checkpoint: Some(0.0), time_limit_s: Some(3600.0), borrowed, signal: "SIGTERM".into(), grace_s: 10.0 });
            }
        }
        w.cluster = c;
        // Some jobs take a second shape (another GPU count: SkyPilot's alternatives).
        let pend: Vec<PendingJob> = queue.iter().enumerate().map(|(i, &(t, class, gpus, held, other))| {
            let mut j = pending(100 + i as JobId, t, class, gpus, i as f64);
            j.held = held;
            if other > 0 {
                j.alternatives = vec![JobRequest { gpu: GpuRequest::Whole(other), ..JobRequest::default() }];
            }
            j
        }).collect();
        let out = w.cycle(10_000.0, &pend).unwrap();
        let starts = started(&out);
        for j in &pend {
            let explained = out.explanations.iter().filter(|e| e.job == j.id).count();
            prop_assert_eq!(explained + usize::from(starts.contains(&j.id)), 1, "job {} explained or started exactly once", j.id);
        }
        for d in &out.decisions {
            if let Decision::Preempt { victim, for_job, .. } = d {
                let v = w.running.iter().find(|r| r.id == *victim).unwrap();
                prop_assert!(v.preemptible, "non-preemptible job {} preempted", victim);
                let p = pend.iter().find(|j| j.id == *for_job).unwrap();
                let higher = w.classes[p.class].value > w.classes[v.class].value;
                prop_assert!(higher || v.borrowed, "job {} inside its guarantee preempted at equal class", victim);
            }
        }
        // Decisions fit together: starting everything that was started is possible while
        // the victims still hold their GPUs (they stop over their grace period, after this
        // cycle's starts are applied: a start in the room a victim frees would be refused).
        let mut c = w.cluster.clone();
        for d in &out.decisions {
            if let Decision::Start { placement, .. } = d {
                prop_assert!(c.allocate(placement).is_ok());
            }
        }
        // A job starts as one of its shapes.
        for d in &out.decisions {
            if let Decision::Start { job, placement, .. } = d {
                let j = pend.iter().find(|p| p.id == *job).unwrap();
                let shapes: Vec<u64> = std::iter::once(&j.request).chain(&j.alternatives).map(|r| r.total_gpu_milli()).collect();
                prop_assert!(shapes.contains(&placement.gpu_milli()), "job {} started with {} milli-GPU, not one of {:?}", job, placement.gpu_milli(), shapes);
            }
        }
    }
}

/// A job that takes 8 or 4 GPUs (SkyPilot's `{H100:8, H100:4}`) starts on the 4 free now,
/// rather than waiting for 8; one that takes only 8 waits. Its team's quota is charged for
/// the shape it started as.
#[test]
fn a_job_with_other_shapes_starts_as_the_first_that_fits() {
    let mut w = World::new(1, vec![team("a", None, 0, None)]);
    let mut c = w.cluster.clone();
    let four = pending(1, 0, PRODUCTION, 4, 0.0);
    w.running.push(run(&mut c, &four, 0.0, false, false));
    w.cluster = c;
    let only_eight = pending(2, 0, EXPERIMENT, 8, 1.0);
    let mut eight_or_four = pending(3, 0, EXPERIMENT, 8, 2.0);
    eight_or_four.alternatives = vec![JobRequest {
        gpu: GpuRequest::Whole(4),
        ..JobRequest::default()
    }];
    let out = w.cycle(10.0, &[only_eight, eight_or_four]).unwrap();
    let starts: Vec<(JobId, u64)> = out
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::Start { job, placement, .. } => Some((*job, placement.gpu_milli())),
            _ => None,
        })
        .collect();
    assert_eq!(starts, [(3, 4000)]);
    let waits = out.explanations.iter().find(|e| e.job == 2).unwrap();
    assert!(
        matches!(
            waits.reason,
            PendingReason::NoCapacity { .. } | PendingReason::Reserved { .. }
        ),
        "{:?}",
        waits.reason
    );
    // The quota (8 guaranteed, 4 in use, no borrowing) admits 4 more, not 8: a job whose
    // first shape is over it starts as its second.
    let mut w2 = World::new(2, vec![team("a", Some(8), 0, None)]);
    let mut c = w2.cluster.clone();
    w2.running.push(run(
        &mut c,
        &pending(1, 0, PRODUCTION, 4, 0.0),
        0.0,
        false,
        false,
    ));
    w2.cluster = c;
    let mut job = pending(3, 0, EXPERIMENT, 8, 2.0);
    job.alternatives = vec![JobRequest {
        gpu: GpuRequest::Whole(4),
        ..JobRequest::default()
    }];
    let out = w2.cycle(10.0, &[job]).unwrap();
    assert_eq!(started(&out), [3]);
    assert!(out.explanations.is_empty());
}

/// A 16-GPU job whose team has used a lot ranks behind an endless stream of small jobs from a
/// thrifty team; aging must start it within the aging limit plus the longest time limit of the
/// work it waits for.
#[test]
fn no_job_is_bypassed_beyond_the_aging_bound() {
    let mut w = World::new(
        2,
        vec![team("heavy", None, 0, None), team("light", None, 0, None)],
    );
    w.usage = vec![1e9, 0.0];
    w.config.aging_limit_s = 2.0 * 3600.0;
    let limit = 600.0;
    let mut big = pending(1, 0, EXPERIMENT, 8, 0.0);
    big.request.nodes = 2;
    big.time_limit_s = Some(limit);
    let mut queue = vec![big];
    let mut next = 10;
    let mut ends: Vec<(f64, JobId)> = Vec::new();
    let mut now = 0.0;
    let mut big_started = None;
    while now < 6.0 * 3600.0 && big_started.is_none() {
        while queue.iter().filter(|j| j.team == 1).count() < 30 {
            let mut j = pending(next, 1, EXPERIMENT, 1, now);
            j.time_limit_s = Some(limit);
            queue.push(j);
            next += 1;
        }
        if w.step(now, &mut queue, &mut ends, &|_| limit).contains(&1) {
            big_started = Some(now);
        }
        now += 60.0;
    }
    let started = big_started.expect("the big job starts");
    assert!(
        started <= w.config.aging_limit_s + limit + 60.0,
        "started at {started} s"
    );
    assert!(
        started >= w.config.aging_limit_s - 60.0,
        "fair share ranked it behind the stream until aging (started at {started} s)"
    );
}

#[test]
fn per_model_guarantees_mark_starts_past_a_models_part_as_borrowed() {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, None).unwrap();
    let a100 = b.model("A100", 40_960, None).unwrap();
    for (m, name) in [(h100, "h100"), (a100, "a100")] {
        let p = common::onprem_pool(&mut b, m, name, 8, 10.0);
        for i in 0..4 {
            b.node(p, &format!("{name}-{i}"), None, None, 0).unwrap();
        }
    }
    let quota = |borrow| Quota {
        guaranteed: 16,
        per_model: vec![(h100, 8)],
        borrow_limit: borrow,
        lend_limit: None,
    };
    let teams = vec![
        Team {
            name: "a".into(),
            weight: 1.0,
            quota: Some(quota(8)),
            cohort: Some("c".into()),
        },
        Team {
            name: "lender".into(),
            weight: 1.0,
            quota: Some(Quota {
                guaranteed: 32,
                ..Quota::default()
            }),
            cohort: Some("c".into()),
        },
        Team {
            name: "strict".into(),
            weight: 1.0,
            quota: Some(quota(0)),
            cohort: None,
        },
    ];
    let mut w = World::new(1, teams);
    w.cluster = Cluster::new(b.build());
    w.usage = vec![0.0; 3];
    let on = |id, team, model: ModelId, t| PendingJob {
        request: JobRequest {
            gpu: GpuRequest::Whole(8),
            models: ModelChoice::AnyOf(vec![model]),
            ..JobRequest::default()
        },
        ..pending(id, team, PRODUCTION, 8, t)
    };
    let out = w
        .cycle(
            10.0,
            &[
                on(1, 0, h100, 1.0),
                on(2, 0, h100, 2.0),
                on(3, 0, a100, 3.0),
                on(4, 2, h100, 4.0),
                on(5, 2, h100, 5.0),
            ],
        )
        .unwrap();
    let starts = started_borrowed(&out);
    // a: the first H100 node is its H100 part, the second H100 node is borrowed, the A100 node
    // fits the unclaimed 8 of its 16. strict: one H100 node, then no borrowing allowed.
    assert_eq!(starts, vec![(1, false), (2, true), (3, false), (4, false)]);
    let e5 = out.explanations.iter().find(|e| e.job == 5).unwrap();
    assert!(
        matches!(
            e5.reason,
            PendingReason::Quota {
                borrow_limit: 0,
                ..
            }
        ),
        "{:?}",
        e5.reason
    );
}

#[test]
fn capacity_nobody_is_guaranteed_can_be_borrowed_within_the_limit() {
    // 4 nodes × 8 GPUs; the teams are guaranteed 16 of the 32, so 16 belong to nobody.
    let teams = vec![
        team("a", Some(8), 8, Some("c")),
        team("b", Some(8), 0, Some("c")),
    ];
    let w = World::new(4, teams);
    let jobs = [
        pending(1, 1, PRODUCTION, 8, 0.0),
        pending(2, 0, PRODUCTION, 8, 1.0),
        pending(3, 0, PRODUCTION, 8, 2.0),
        pending(4, 0, PRODUCTION, 8, 3.0),
    ];
    let out = w.cycle(10.0, &jobs).unwrap();
    assert_eq!(
        started_borrowed(&out),
        vec![(1, false), (2, false), (3, true)],
        "b uses its own guarantee, so a borrows from the unguaranteed 16, up to its limit of 8"
    );
    let e4 = out.explanations.iter().find(|e| e.job == 4).unwrap();
    assert!(
        matches!(
            e4.reason,
            PendingReason::Quota {
                lendable: 8000,
                borrow_limit: 8000,
                ..
            }
        ),
        "{:?}",
        e4.reason
    );
}
