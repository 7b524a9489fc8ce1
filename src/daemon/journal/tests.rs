//! The journal's own tests: migrations, transitions, charges, crash-safe reloads.

use super::*;

fn job(i: usize) -> NewJob {
    NewJob {
        user: None,
        name: Some(format!("job-{i}")),
        team: "ml".into(),
        priority: "experiment".into(),
        spec: "{}".into(),
        at: i as f64,
        idempotency: None,
        reported: false,
    }
}

fn tmp(name: &str) -> PathBuf {
    let dir = gantry_testkit::scratch::scratch(&format!("journal-{name}"));
    dir.join("state.db")
}

#[test]
fn state_comes_back_exactly_after_reopening() {
    let path = tmp("reopen");
    {
        let mut s = Store::open(&path).unwrap();
        let ids = s.submit_all(&[job(1), job(2), job(3)]).unwrap();
        s.transition(ids[0], JobState::Running, 10.0, "placed")
            .unwrap();
        s.transition(ids[1], JobState::Held, 11.0, "operator")
            .unwrap();
        s.transition(ids[0], JobState::Completed, 20.0, "exit 0")
            .unwrap();
    }
    let s = Store::open(&path).unwrap();
    assert_eq!(s.schema_version().unwrap(), MIGRATIONS.len());
    let jobs = s.load().unwrap();
    let states: Vec<JobState> = jobs.iter().map(|j| j.state).collect();
    assert_eq!(
        states,
        vec![JobState::Completed, JobState::Held, JobState::Pending]
    );
    assert_eq!(jobs[0].updated_at, 20.0);
    assert_eq!(s.event_count().unwrap(), 6);
}

#[test]
fn illegal_transitions_change_nothing() {
    let path = tmp("illegal");
    let mut s = Store::open(&path).unwrap();
    let id = s.submit_all(&[job(1)]).unwrap()[0];
    let e = s.transition(id, JobState::Completed, 1.0, "?").unwrap_err();
    assert_eq!(
        e.to_string(),
        format!("job {id}: cannot go from pending to completed")
    );
    assert!(matches!(
        s.transition(999, JobState::Running, 1.0, "?"),
        Err(JournalError::NoJob(999))
    ));
    assert_eq!(s.load().unwrap()[0].state, JobState::Pending);
    assert_eq!(s.event_count().unwrap(), 1);
}

#[test]
fn batched_moves_are_all_or_nothing() {
    let path = tmp("batch");
    let mut s = Store::open(&path).unwrap();
    let ids = s.submit_all(&[job(1), job(2)]).unwrap();
    let bad = [
        (ids[0], JobState::Running, "ok".to_string()),
        (ids[1], JobState::Completed, "illegal".to_string()),
    ];
    assert!(matches!(
        s.transition_all(&bad, 5.0),
        Err(JournalError::BadTransition { .. })
    ));
    assert!(
        s.load()
            .unwrap()
            .iter()
            .all(|j| j.state == JobState::Pending),
        "the legal half was rolled back too"
    );
    let good = [
        (ids[0], JobState::Running, "ok".to_string()),
        (ids[1], JobState::Held, "ok".to_string()),
    ];
    s.transition_all(&good, 6.0).unwrap();
    let states: Vec<JobState> = s.load().unwrap().iter().map(|j| j.state).collect();
    assert_eq!(states, vec![JobState::Running, JobState::Held]);
}

/// A batch commits its writes together, and a move that is all-or-none of its own stays so
/// inside one (an illegal half rolls back alone; the batch's other writes are kept).
#[test]
fn a_batch_commits_once_and_keeps_moves_all_or_nothing() {
    let path = tmp("batch-events");
    let mut s = Store::open(&path).unwrap();
    let ids = s.submit_all(&[job(1), job(2)]).unwrap();
    s.begin_batch().unwrap();
    for i in 0..100 {
        s.add_event(i as f64, None, "host", &format!("node-{i} connected"))
            .unwrap();
    }
    let bad = [
        (ids[0], JobState::Running, "ok".to_string()),
        (ids[1], JobState::Completed, "illegal".to_string()),
    ];
    assert!(s.transition_all(&bad, 5.0).is_err());
    s.transition(ids[1], JobState::Held, 6.0, "operator")
        .unwrap();
    // Not yet on disk for another reader.
    assert_eq!(Store::open(&path).unwrap().event_count().unwrap(), 2);
    s.end_batch().unwrap();
    let other = Store::open(&path).unwrap();
    assert_eq!(other.event_count().unwrap(), 2 + 100 + 1);
    let states: Vec<JobState> = other.load().unwrap().iter().map(|j| j.state).collect();
    assert_eq!(states, vec![JobState::Pending, JobState::Held]);
    // Outside a batch, each write commits as before.
    s.add_event(7.0, None, "host", "alone").unwrap();
    assert_eq!(other.event_count().unwrap(), 2 + 100 + 1 + 1);
}

#[test]
fn a_newer_schema_is_refused_not_damaged() {
    let path = tmp("newer");
    {
        let s = Store::open(&path).unwrap();
        s.conn.pragma_update(None, "user_version", 99).unwrap();
    }
    let e = Store::open(&path).err().expect("refused");
    assert!(
        e.to_string()
            .contains("written by a newer gantry (schema 99"),
        "{e}"
    );
}

#[test]
fn concurrent_submitters_all_get_distinct_durable_ids() {
    let path = tmp("concurrent");
    let journal = Journal::start(&path).unwrap();
    let handles: Vec<_> = (0..8)
        .map(|t| {
            let s = journal.submitter();
            std::thread::spawn(move || {
                (0..50)
                    .map(|i| s.submit(job(t * 100 + i)).unwrap())
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut ids: Vec<JobId> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    journal.stop();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 400);
    assert_eq!(Store::open(&path).unwrap().load().unwrap().len(), 400);
}

#[test]
fn closed_charges_are_kept_only_for_a_store_asked_for_them_and_only_once_committed() {
    let path = tmp("closed");
    let mut s = Store::open(&path).unwrap();
    let ids = s.submit_all(&[job(1), job(2), job(3)]).unwrap();
    let charge = |job| Charge {
        job,
        team: "ml".into(),
        project: Some("p".into()),
        capacity: "spot".into(),
        gpus: 2.0,
        dollars_per_hour: 4.0,
        nodes: vec!["n1".into()],
    };
    let run = |id| (id, JobState::Running, "placed".to_string());
    s.transition_charged(&[run(ids[0])], 10.0, &[charge(ids[0])])
        .unwrap();
    s.transition(ids[0], JobState::Completed, 20.0, "exit 0")
        .unwrap();
    // Nobody asked yet: nothing kept (the engine alone keeps no tally).
    assert!(s.closed.is_none());
    assert_eq!(s.take_closed(), None, "the first look reads in full");
    s.transition_charged(&[run(ids[1])], 30.0, &[charge(ids[1])])
        .unwrap();
    s.transition(ids[1], JobState::Failed, 45.0, "exit 1")
        .unwrap();
    // A refused batch closes nothing: job 3's run would end, but job 1 cannot run again.
    s.transition_charged(&[run(ids[2])], 46.0, &[charge(ids[2])])
        .unwrap();
    assert!(s
        .transition_all(
            &[
                (ids[2], JobState::Completed, "exit 0".into()),
                (ids[0], JobState::Running, "?".into())
            ],
            50.0
        )
        .is_err());
    let closed = s.take_closed().unwrap();
    assert_eq!(
        closed,
        vec![ClosedCharge {
            team: "ml".into(),
            project: Some("p".into()),
            started_at: 30.0,
            ended_at: 45.0,
            dollars_per_hour: 4.0,
            gpus: 2.0,
        }]
    );
    assert_eq!(s.take_closed(), Some(Vec::new()));
}

/// The engine's store holds the journal alone while open (no file locks taken and given back
/// per transaction); another connection is refused rather than reading behind it, and opens
/// it, with everything committed, once the holder closes.
#[test]
fn a_held_store_is_the_journals_only_reader_until_it_closes() {
    let path = tmp("held");
    let mut s = Store::open(&path).unwrap();
    s.hold().unwrap();
    let mode: String = s
        .conn
        .pragma_query_value(None, "locking_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "exclusive");
    let ids = s.submit_all(&[job(1), job(2)]).unwrap();
    let other = Connection::open(&path).unwrap();
    other.busy_timeout(std::time::Duration::ZERO).unwrap();
    let read = other.query_row("SELECT count(*) FROM jobs", [], |r| r.get::<_, i64>(0));
    assert!(
        matches!(&read, Err(e) if e.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)),
        "{read:?}"
    );
    drop(other);
    drop(s);
    let again = Store::open(&path).unwrap();
    let loaded: Vec<i64> = again.load().unwrap().iter().map(|j| j.id).collect();
    assert_eq!(loaded, ids);
}

/// A history page reads no specs: a page of jobs with 118 KB specs held every one of them
/// (+175 MB for one viewer's `gantry history` of 1,500 jobs).
#[test]
fn a_history_page_leaves_the_specs_in_the_journal() {
    let path = tmp("history-specs");
    let mut s = Store::open(&path).unwrap();
    let big = format!("name: big\nenvs:\n  PAD: {}\n", "x".repeat(100_000));
    let jobs: Vec<NewJob> = (0..20)
        .map(|i| NewJob {
            spec: big.clone(),
            ..job(i)
        })
        .collect();
    let ids = s.submit_all(&jobs).unwrap();
    for &id in &ids {
        s.transition(id, JobState::Running, 30.0, "placed").unwrap();
        s.transition(id, JobState::Completed, 40.0, "exit 0")
            .unwrap();
    }
    let page = s
        .history(&HistoryQuery {
            since: 0.0,
            until: 100.0,
            team: None,
            user: None,
            states: Vec::new(),
            limit: 100,
            offset: 0,
        })
        .unwrap();
    assert_eq!(page.len(), ids.len());
    assert!(page.iter().all(|j| j.spec.is_empty()), "specs were read");
    // The job itself still has it.
    assert_eq!(s.job(ids[0]).unwrap().unwrap().spec, big);
}

#[test]
fn what_the_tracker_owes_is_written_with_the_job_and_kept_until_its_end_is_sent() {
    let path = tmp("reports");
    let ids = {
        let mut s = Store::open(&path).unwrap();
        let reported = NewJob {
            reported: true,
            ..job(2)
        };
        s.submit_all(&[job(1), reported.clone(), reported]).unwrap()
    };
    // After a restart: the two reported jobs are owed, nothing sent yet, oldest first.
    let mut s = Store::open(&path).unwrap();
    let owed = s.owed_reports(10).unwrap();
    assert_eq!(
        owed.iter().map(|r| r.job).collect::<Vec<_>>(),
        vec![ids[1], ids[2]]
    );
    assert!(owed.iter().all(|r| r.sent.is_none() && r.run.is_none()));
    assert_eq!(s.report(ids[0]).unwrap(), None);
    // A run made late is kept; a later report without it does not lose it.
    s.report_sent(&ReportRecord {
        run: Some("abc".into()),
        experiment_id: Some("7".into()),
        sent: Some(JobState::Running),
        ..owed[0].clone()
    })
    .unwrap();
    s.report_sent(&ReportRecord {
        sent: Some(JobState::Completed),
        done: true,
        ..owed[0].clone()
    })
    .unwrap();
    let r = s.report(ids[1]).unwrap().unwrap();
    assert_eq!(
        (r.run.as_deref(), r.experiment_id.as_deref(), r.sent, r.done),
        (Some("abc"), Some("7"), Some(JobState::Completed), true)
    );
    // Done is no longer owed; the bound holds.
    let owed: Vec<JobId> = s.owed_reports(10).unwrap().iter().map(|r| r.job).collect();
    assert_eq!(owed, vec![ids[2]]);
    assert!(s.owed_reports(0).unwrap().is_empty());
}

/// What a start estimate learns at open: each completed job's runs summed, newest first, with
/// the time limit its spec asked (none where it asked none or the spec is not a job's).
#[test]
fn completed_lengths_sum_a_jobs_runs_and_carry_its_time_limit() {
    let path = tmp("lengths");
    let mut s = Store::open(&path).unwrap();
    let mut limited = job(1);
    limited.spec = r#"{"time_limit_s":7200.0}"#.into();
    // A spec that is not JSON, or whose limit is not a number, gives no limit (and does not
    // stop the journal opening: it did once, "malformed JSON", on a cloud test's restart).
    let mut not_json = job(4);
    not_json.spec = "name: x\n".into();
    let mut odd = job(5);
    odd.spec = r#"{"time_limit_s":"1h"}"#.into();
    let ids = s
        .submit_all(&[limited, job(2), job(3), not_json, odd])
        .unwrap();
    for &id in &ids[3..] {
        s.transition_charged(&[(id, JobState::Running, "placed".to_string())], 70.0, &[])
            .unwrap();
        s.transition(id, JobState::Completed, 71.0, "exit 0")
            .unwrap();
    }
    let charge = |job| Charge {
        job,
        team: "ml".into(),
        project: None,
        capacity: "on-demand".into(),
        gpus: 1.0,
        dollars_per_hour: 1.0,
        nodes: vec!["n1".into()],
    };
    let run = |id| (id, JobState::Running, "placed".to_string());
    // Job 1 runs twice (preempted once): 10 s then 30 s.
    s.transition_charged(&[run(ids[0])], 0.0, &[charge(ids[0])])
        .unwrap();
    s.transition(ids[0], JobState::Pending, 10.0, "preempted")
        .unwrap();
    s.transition_charged(&[run(ids[0])], 20.0, &[charge(ids[0])])
        .unwrap();
    s.transition(ids[0], JobState::Completed, 50.0, "exit 0")
        .unwrap();
    s.transition_charged(&[run(ids[1])], 60.0, &[charge(ids[1])])
        .unwrap();
    s.transition(ids[1], JobState::Completed, 65.0, "exit 0")
        .unwrap();
    // Job 3 failed: not a completed run.
    s.transition_charged(&[run(ids[2])], 60.0, &[charge(ids[2])])
        .unwrap();
    s.transition(ids[2], JobState::Failed, 61.0, "exit 1")
        .unwrap();
    let got = s.completed_lengths(10).unwrap();
    let seen: Vec<(Option<String>, Option<f64>, f64)> = got
        .into_iter()
        .map(|r| (r.name, r.time_limit_s, r.seconds))
        .collect();
    assert_eq!(
        seen,
        vec![
            (Some("job-5".into()), None, 0.0),
            (Some("job-4".into()), None, 0.0),
            (Some("job-2".into()), None, 5.0),
            (Some("job-1".into()), Some(7200.0), 40.0),
        ]
    );
}

/// Fair share's usage at open reads twenty weeks of runs, and a report its window, not the
/// whole journal: both queries read the index on `ended_at` (each was a COALESCE no index
/// answers: a scan of every run).
#[test]
fn the_usage_read_at_open_reads_the_index_not_every_run() {
    let s = Store::open(&tmp("gpu-time-plan")).unwrap();
    let plan = s.window_plans().unwrap();
    assert_eq!(plan.matches("MULTI-INDEX OR").count(), 2, "{plan}");
    assert!(plan.contains("USING INDEX charges_end"), "{plan}");
    assert!(!plan.contains("SCAN charges"), "{plan}");
}
