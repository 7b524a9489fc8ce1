//! The daemon's engine: submissions are checked and journaled, cycles start work, every state
//! change is durable, and a restart rebuilds the state from the journal.

use gantry::api::JobState;
use gantry::daemon::engine::{Engine, EngineError};
use gantry::model::*;
use std::path::{Path, PathBuf};

use crate::support::fleets as common;

fn fleet() -> Fleet {
    fleet_of_nodes(2)
}

/// `nodes` 8-GPU H100 nodes on one leaf.
fn fleet_of_nodes(nodes: usize) -> Fleet {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, None).unwrap();
    let p = common::onprem_pool(&mut b, h100, "hgx", 8, 25.0);
    for i in 0..nodes {
        b.node(p, &format!("n{i}"), Some("leaf-1"), None, 0)
            .unwrap();
    }
    b.build()
}

fn teams() -> Vec<Team> {
    ["default", "ml-research"]
        .iter()
        .map(|n| Team {
            name: n.to_string(),
            weight: 1.0,
            quota: None,
            cohort: None,
        })
        .collect()
}

fn db(name: &str) -> PathBuf {
    let dir = gantry_testkit::scratch::scratch(&format!("engine-{name}"));
    dir.join("state.db")
}

fn open(path: &Path, now: f64) -> Engine {
    Engine::open(path, fleet(), teams(), default_classes(), now).unwrap()
}

const EIGHT: &[u8] = b"name: big\nresources:\n  accelerators: H100:8\nrun: train\n";

#[test]
fn submissions_are_checked_before_they_are_accepted() {
    let path = db("checked");
    let mut e = open(&path, 0.0);
    let err = e
        .submit(
            "j.yaml",
            b"resources:\n  accelerators: H100:16\n",
            None,
            None,
            1.0,
        )
        .unwrap_err();
    assert!(matches!(err, EngineError::NeverFits(_)));
    assert_eq!(
        err.to_string(),
        "rejected: no node could ever host it: asks 16 GPUs per node; the largest node has 8"
    );
    let err = e
        .submit("j.yaml", EIGHT, Some("nobody"), None, 1.0)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown team `nobody`; teams: default, ml-research"
    );
    let err = e
        .submit("j.yaml", EIGHT, None, Some("urgent"), 1.0)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown priority class `urgent`; classes: serving, production, experiment"
    );
    let err = e
        .submit(
            "j.yaml",
            b"resources:\n  accelerators: B200:8\n",
            None,
            None,
            1.0,
        )
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("no pool of this fleet has `B200` GPUs (this fleet has: "),
        "{err}"
    );
    let err = e
        .submit("j.yaml", b"nmae: x\n", None, None, 1.0)
        .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("j.yaml:1:1: unknown field `nmae`; did you mean `name`?"),
        "{err}"
    );
    assert_eq!(e.jobs().count(), 0, "nothing was accepted");
}

#[test]
fn cycles_start_work_and_finished_work_frees_gpus() {
    let path = db("cycles");
    let mut e = open(&path, 0.0);
    let a = e.submit("a.yaml", EIGHT, None, None, 1.0).unwrap();
    let b = e
        .submit(
            "b.yaml",
            EIGHT,
            Some("ml-research"),
            Some("production"),
            2.0,
        )
        .unwrap();
    let c = e.submit("c.yaml", EIGHT, None, None, 3.0).unwrap();
    let r = e.tick(10.0).unwrap();
    // production first, then the older experiment; the third waits with a reason.
    assert_eq!(r.started, vec![b, a]);
    assert_eq!(e.job(c).unwrap().state, JobState::Pending);
    assert!(e.job(c).unwrap().explanation.is_some());
    e.finished(a, true, 20.0).unwrap();
    assert_eq!(e.tick(21.0).unwrap().started, vec![c]);
    assert_eq!(e.job(a).unwrap().state, JobState::Completed);
}

#[test]
fn hold_release_priority_and_illegal_moves() {
    let path = db("hold");
    let mut e = open(&path, 0.0);
    let a = e.submit("a.yaml", EIGHT, None, None, 1.0).unwrap();
    e.hold(a, 2.0).unwrap();
    assert!(
        e.tick(3.0).unwrap().started.is_empty(),
        "held jobs do not start"
    );
    e.release(a, 4.0).unwrap();
    e.set_priority(a, "serving", 5.0, true).unwrap();
    assert!(e.set_priority(a, "urgent", 5.0, true).is_err());
    assert_eq!(e.tick(6.0).unwrap().started, vec![a]);
    let err = e.hold(a, 7.0).unwrap_err();
    assert!(
        err.to_string()
            .contains("job 1 is running; hold applies to pending jobs"),
        "{err}"
    );
    assert_eq!(
        e.job(a).unwrap().state,
        JobState::Running,
        "a refused change changes nothing"
    );
    assert!(matches!(e.cancel(999, 8.0), Err(EngineError::NoJob(999))));
}

#[test]
fn a_restart_rebuilds_the_state_and_requeues_what_was_running() {
    let path = db("restart");
    let (a, b, c);
    {
        let mut e = open(&path, 0.0);
        a = e
            .submit("a.yaml", EIGHT, None, Some("production"), 1.0)
            .unwrap();
        b = e.submit("b.yaml", EIGHT, None, None, 2.0).unwrap();
        c = e.submit("c.yaml", EIGHT, None, None, 3.0).unwrap();
        e.tick(4.0).unwrap();
        e.finished(b, false, 5.0).unwrap();
        e.hold(c, 6.0).unwrap();
        // the daemon dies here: no shutdown
    }
    let mut e = open(&path, 100.0);
    let state = |id| e.job(id).unwrap().state;
    assert_eq!(
        (state(a), state(b), state(c)),
        (JobState::Pending, JobState::Failed, JobState::Held)
    );
    assert_eq!(e.job(a).unwrap().spec.name.as_deref(), Some("big"));
    assert_eq!(e.jobs().count(), 3);
    // The requeued job starts again, with its priority intact.
    assert_eq!(e.tick(101.0).unwrap().started, vec![a]);
}

/// The engine remembers which starts were borrowed, so borrowing stays within the limit over
/// many cycles (it used to forget, and every cycle could borrow again).
#[test]
fn borrowing_stays_within_the_limit_across_cycles() {
    let path = db("borrow");
    let teams = vec![
        Team {
            name: "a".into(),
            weight: 1.0,
            quota: Some(Quota {
                guaranteed: 8,
                borrow_limit: 8,
                ..Quota::default()
            }),
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
    ];
    let mut e = Engine::open(&path, fleet_of_nodes(6), teams, default_classes(), 0.0).unwrap();
    for i in 0..5 {
        e.submit("j.yaml", EIGHT, Some("a"), None, i as f64)
            .unwrap();
    }
    for t in 0..5 {
        e.tick(10.0 + t as f64).unwrap();
        let running = e.jobs().filter(|j| j.state == JobState::Running).count();
        assert!(
            running <= 2,
            "cycle {t}: team a runs {running} 8-GPU jobs with 8 guaranteed + 8 borrowable"
        );
    }
    let borrowed: Vec<bool> = e
        .jobs()
        .filter(|j| j.state == JobState::Running)
        .map(|j| j.borrowed)
        .collect();
    assert_eq!(borrowed, vec![false, true]);
}

#[test]
fn release_and_hold_apply_only_to_the_states_they_name() {
    // Before: `release` on a running job freed its GPUs and the next cycle started it again
    // while its first copy still ran (and every later cycle failed on "running to running").
    let path = db("release-running");
    let mut e = open(&path, 0.0);
    let a = e.submit("a", EIGHT, None, None, 0.0).unwrap();
    let b = e.submit("b", EIGHT, None, None, 0.0).unwrap();
    let c = e.submit("c", EIGHT, None, None, 0.0).unwrap();
    e.tick(1.0).unwrap();
    assert_eq!(e.job(a).unwrap().state, JobState::Running);
    let err = e.release(a, 2.0).unwrap_err();
    assert!(matches!(err, EngineError::WrongState { .. }), "{err}");
    assert!(err.to_string().contains("release applies to held jobs"));
    assert_eq!(e.job(a).unwrap().state, JobState::Running);
    assert!(
        e.job(a).unwrap().placement.is_some(),
        "its GPUs stay its own"
    );
    // A running job is not held either; a pending one is, and only a held one is released.
    assert!(matches!(
        e.hold(b, 2.0).unwrap_err(),
        EngineError::WrongState { .. }
    ));
    e.hold(c, 2.0).unwrap();
    assert!(matches!(
        e.hold(c, 2.0).unwrap_err(),
        EngineError::WrongState { .. }
    ));
    e.release(c, 3.0).unwrap();
    assert_eq!(e.job(c).unwrap().state, JobState::Pending);
    // Cycles go on, and no GPU is handed out twice: two 8-GPU nodes, two running jobs.
    for t in 4..10 {
        e.tick(t as f64).unwrap();
    }
    let running = e.jobs().filter(|j| j.state == JobState::Running).count();
    assert_eq!(running, 2);
    // The journal agrees after a restart.
    drop(e);
    let e = open(&path, 20.0);
    assert_eq!(e.job(c).unwrap().state, JobState::Pending);
}

/// H100 nodes, plus (with `a100`) a pool of A100 nodes.
fn fleet_with(a100: bool) -> Fleet {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, None).unwrap();
    let p = common::onprem_pool(&mut b, h100, "hgx", 8, 25.0);
    b.node(p, "n0", Some("leaf-1"), None, 0).unwrap();
    if a100 {
        let a = b.model("A100", 40_960, None).unwrap();
        let q = common::onprem_pool(&mut b, a, "dgx", 8, 12.0);
        b.node(q, "a0", Some("leaf-1"), None, 0).unwrap();
    }
    b.build()
}

const A100: &[u8] = b"resources:\n  accelerators: A100:1\nrun: train\n";

#[test]
fn a_fleet_file_that_no_longer_names_a_jobs_pool_team_or_class_does_not_stop_the_daemon() {
    let path = db("fleet-changed");
    let mut e = Engine::open(&path, fleet_with(true), teams(), default_classes(), 0.0).unwrap();
    let done = e
        .submit("a.yaml", A100, Some("ml-research"), None, 1.0)
        .unwrap();
    e.tick(2.0).unwrap();
    e.finished(done, true, 3.0).unwrap();
    let gone_pool = e.submit("a.yaml", A100, None, None, 4.0).unwrap();
    let gone_team = e
        .submit("h.yaml", EIGHT, Some("ml-research"), None, 4.0)
        .unwrap();
    let gone_class = e
        .submit("h.yaml", EIGHT, None, Some("serving"), 4.0)
        .unwrap();
    let fine = e.submit("h.yaml", EIGHT, None, None, 4.0).unwrap();
    drop(e);

    // The A100 pool, the team `ml-research` and the class `serving` are gone.
    let classes: Vec<PriorityClass> = default_classes()
        .into_iter()
        .filter(|c| c.name != "serving")
        .collect();
    let mut e = Engine::open(
        &path,
        fleet_with(false),
        teams()[..1].to_vec(),
        classes,
        10.0,
    )
    .expect("the daemon starts after its fleet file changed");
    // The finished job keeps its history in the journal.
    assert!(e.job(done).is_none());
    assert_eq!(e.stale_history(), 1);
    let r = e.job_record(done).unwrap().unwrap();
    assert_eq!(
        (r.state, r.team.as_str()),
        (JobState::Completed, "ml-research")
    );
    // Live jobs that no longer resolve fail, each with the reason in its events.
    for (id, why) in [
        (gone_pool, "A100"),
        (gone_team, "unknown team `ml-research`"),
        (gone_class, "unknown priority class `serving`"),
    ] {
        assert_eq!(e.job_record(id).unwrap().unwrap().state, JobState::Failed);
        let events = e.events(Some(id), 10).unwrap();
        let last = &events.last().unwrap().detail;
        assert!(
            last.contains("failed at startup") && last.contains(why),
            "job {id}: {last}"
        );
        // An action on it says it has finished, not that it does not exist.
        let err = e.cancel(id, 11.0).unwrap_err().to_string();
        assert!(err.contains("is failed"), "{err}");
    }
    assert_eq!(e.job(fine).unwrap().state, JobState::Pending);
    assert_eq!(e.tick(12.0).unwrap().started, vec![fine]);
}

#[test]
fn only_live_jobs_and_a_bounded_window_of_finished_ones_stay_in_memory() {
    let path = db("window");
    let mut e = Engine::open(&path, fleet(), teams(), default_classes(), 0.0).unwrap();
    e.set_history_kept(3);
    let mut ids = Vec::new();
    for i in 0..10 {
        let id = e.submit("j.yaml", EIGHT, None, None, f64::from(i)).unwrap();
        e.cancel(id, f64::from(i)).unwrap();
        ids.push(id);
    }
    let live = e.submit("j.yaml", EIGHT, None, None, 20.0).unwrap();
    let in_memory: Vec<i64> = e.jobs().map(|j| j.id).collect();
    assert_eq!(in_memory, vec![ids[7], ids[8], ids[9], live]);
    // A finished job keeps in memory what the lists read, not what only a start reads; its
    // whole spec stays in the journal, where a job's detail reads it.
    let kept = e.job(ids[9]).unwrap();
    assert_eq!(
        (kept.spec.run.as_deref(), kept.spec.name.as_deref()),
        (None, Some("big"))
    );
    assert_eq!(kept.request.total_gpu_milli(), 8_000);
    assert!(e.job(live).unwrap().spec.run.is_some());
    let record = e.job_record(ids[9]).unwrap().unwrap();
    assert!(record.spec.contains("run: train"), "{}", record.spec);
    // The rest are read from the journal.
    assert_eq!(
        e.job_record(ids[0]).unwrap().unwrap().state,
        JobState::Cancelled
    );
    drop(e);
    let e = open(&path, 30.0);
    assert!(e.jobs().any(|j| j.id == live));
    assert!(e.job(live).unwrap().spec.run.is_some());
    assert!(
        e.job(ids[9]).unwrap().spec.run.is_none(),
        "slimmed at a restart too"
    );
    assert!(e.jobs().count() <= gantry::daemon::engine::HISTORY_KEPT + 1);
}

#[test]
fn a_team_may_have_only_so_many_jobs_waiting() {
    let path = db("max-pending");
    let mut e = open(&path, 0.0);
    e.set_max_pending("ml-research", 2).unwrap();
    for _ in 0..2 {
        e.submit("j.yaml", EIGHT, Some("ml-research"), None, 1.0)
            .unwrap();
    }
    let err = e
        .submit("j.yaml", EIGHT, Some("ml-research"), None, 1.0)
        .unwrap_err();
    assert!(matches!(err, EngineError::QueueFull(_)), "{err}");
    assert!(
        err.to_string().contains("already has 2 jobs waiting"),
        "{err}"
    );
    // Other teams are not affected; a job that starts frees a place.
    e.submit("j.yaml", EIGHT, None, None, 1.0).unwrap();
    e.tick(2.0).unwrap();
    e.submit("j.yaml", EIGHT, Some("ml-research"), None, 3.0)
        .unwrap();
    // The kept counts agree with a recount, through holds, cancels and a restart.
    let recount = |e: &Engine, team: usize| {
        e.jobs()
            .filter(|j| j.team == team && matches!(j.state, JobState::Pending | JobState::Held))
            .count()
    };
    let waiting: Vec<i64> = e
        .jobs()
        .filter(|j| j.state == JobState::Pending)
        .map(|j| j.id)
        .collect();
    e.hold(waiting[0], 4.0).unwrap();
    e.cancel(waiting[1], 4.0).unwrap();
    for (t, name) in ["default", "ml-research"].iter().enumerate() {
        assert_eq!(e.waiting(name).unwrap(), recount(&e, t), "{name}");
    }
    drop(e);
    let e = open(&path, 5.0);
    for (t, name) in ["default", "ml-research"].iter().enumerate() {
        assert_eq!(
            e.waiting(name).unwrap(),
            recount(&e, t),
            "{name} after a restart"
        );
    }
}

/// Fair share: of two jobs waiting in one class, the team whose jobs held fewer GPU-seconds
/// (decayed) goes first, whatever the order they were submitted in; a restart reads the usage
/// back from the journal's charges.
#[test]
fn the_team_that_used_less_goes_first_and_a_restart_remembers_the_usage() {
    let path = db("fair-share");
    let mut e = open(&path, 0.0);
    let a = e.submit("a.yaml", EIGHT, None, None, 1.0).unwrap();
    let b = e.submit("b.yaml", EIGHT, None, None, 2.0).unwrap();
    assert_eq!(e.tick(10.0).unwrap().started, vec![a, b]);
    // `default` holds both nodes; its third job waits, then ml-research's.
    let c = e.submit("c.yaml", EIGHT, None, None, 20.0).unwrap();
    let d = e
        .submit("d.yaml", EIGHT, Some("ml-research"), None, 30.0)
        .unwrap();
    assert!(e.tick(40.0).unwrap().started.is_empty());
    let used = e.usage().to_vec();
    assert!(
        (used[0] - 16.0 * 30.0).abs() < 1.0 && used[1] == 0.0,
        "16 GPUs for 30 s: {used:?}"
    );
    // An hour on, a node frees: ml-research's job goes first, though c waited longer.
    e.finished(a, true, 3600.0).unwrap();
    assert_eq!(e.tick(3601.0).unwrap().started, vec![d]);
    assert_eq!(e.job(c).unwrap().state, JobState::Pending);
    let counted = e.usage().to_vec();
    assert!(counted[0] > 16.0 * 3500.0, "{counted:?}");
    // Restarted, the usage is what the charges say: the same.
    drop(e);
    let e = open(&path, 3601.0);
    for (then, now) in counted.iter().zip(e.usage()) {
        assert!(
            (then - now).abs() <= 1e-6 * then.max(1.0),
            "{counted:?} vs {:?}",
            e.usage()
        );
    }
}
