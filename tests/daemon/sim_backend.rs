//! The daemon's simulated backend: elastic pools grow for work that fits nowhere and shrink
//! when empty, spot nodes give a 2-minute notice before they go (the job checkpoints and
//! requeues), and a failed node's jobs requeue — each an event with its reason and price.

use gantry::api::JobState;
use gantry::config::fleet::{parse, FleetConfig};
use gantry::daemon::engine::Submission;
use gantry::daemon::state::{Action, State, StateOptions};

fn fleet(spot_rate: f64) -> FleetConfig {
    let text = format!(
        r#"
[[teams]]
name = "a"

{hgx}
[[pools]]
provider = "aws"
backend = "simulated"
region = "us-east-1"
zone = "use1-az3"
name = "p5-spot"
instance_type = "p5.48xlarge"
gpu = "H100"
gpus_per_node = 8
vram_gb = 80
cpus = 192
memory_gb = 2048
capacity = "spot"
price_per_hour = 14.582
nodes = 0
max_nodes = 2
provisioning_delay = "6m"
spot_interruptions_per_node_hour = {spot_rate}

[[pools]]
provider = "aws"
backend = "simulated"
region = "us-east-1"
zone = "use1-az3"
name = "p5-od"
instance_type = "p5.48xlarge"
gpu = "H100"
gpus_per_node = 8
vram_gb = 80
cpus = 192
memory_gb = 2048
capacity = "on-demand"
price_per_hour = 55.04
nodes = 0
max_nodes = 2
provisioning_delay = "6m"
"#,
        hgx = crate::support::daemon::hgx_pool(16.0, 1)
    );
    parse("backend.toml", &text).unwrap()
}

fn open(name: &str, cfg: &FleetConfig, failures: f64) -> State {
    let d = gantry_testkit::scratch::scratch(&format!("backend-{name}"));
    State::open(
        &d.join("state.db"),
        cfg,
        &StateOptions {
            seed: 9,
            demo_workload: false,
            failures_per_node_hour: failures,
            log_dir: None,
            ..StateOptions::default()
        },
    )
    .unwrap()
}

/// The state `open(name, …)` made, opened again over its journal.
fn reopen(name: &str, cfg: &FleetConfig) -> State {
    let d = gantry_testkit::scratch::path(&format!("backend-{name}"));
    let opts = StateOptions {
        seed: 9,
        failures_per_node_hour: 0.0,
        ..StateOptions::default()
    };
    State::open(&d.join("state.db"), cfg, &opts).unwrap()
}

/// A checkpointing training job of team a.
fn train(gpus: u8, spot: bool, time_limit: &str) -> Submission {
    Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: train\nresources:\n  accelerators: H100:{gpus}\n  use_spot: {spot}\ncheckpoint: {{interval: 10m, grace: 1m}}\ntime_limit: {time_limit}\nrun: train\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        ..Submission::default()
    }
}

fn eight(spot: bool) -> Submission {
    train(8, spot, "12h")
}

/// Advances `step` seconds at a time, at most `steps` times, until an event mentions `what`;
/// the events then.
fn advance_until(s: &mut State, what: &str, step: f64, steps: usize) -> String {
    for _ in 0..steps {
        if events(s).contains(what) {
            break;
        }
        s.advance(step).unwrap();
    }
    events(s)
}

fn events(s: &mut State) -> String {
    let mut list: Vec<String> = s
        .events(None, 1000)
        .unwrap()
        .into_iter()
        .map(|e| format!("{:>6.0} {}", e.at, e.detail))
        .collect();
    list.reverse();
    list.join("\n")
}

#[test]
fn work_that_fits_nowhere_grows_the_cheapest_pool_then_empty_nodes_go_back() {
    let cfg = fleet(0.0);
    let mut s = open("grow", &cfg, 0.0);
    let ids: Vec<i64> = s
        .submit(&[eight(false), eight(true), eight(false)])
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    s.tick().unwrap();
    let log = events(&mut s);
    // One fits on-prem; the spot-tolerant one gets spot, the other on-demand.
    assert!(
        log.contains("aws/us-east-1/use1-az3/p5-spot +1 for job"),
        "{log}"
    );
    assert!(
        log.contains("aws/us-east-1/use1-az3/p5-od +1 for job"),
        "{log}"
    );
    assert!(log.contains("+$55.04/h, ready in 6 min"), "{log}");
    let pools = &s.snapshot().pools;
    assert_eq!((pools[1].provisioning, pools[2].provisioning), (1, 1));
    // Paid while provisioning: the fleet's $/h counts the new nodes already.
    assert!((s.snapshot().dollars_per_hour - (16.0 + 14.582 + 55.04)).abs() < 1e-6);
    for _ in 0..8 {
        s.advance(60.0).unwrap();
    }
    let running = ids
        .iter()
        .filter(|id| s.engine().job(**id).unwrap().state == JobState::Running)
        .count();
    assert_eq!(running, 3, "{}", events(&mut s));
    // Once everything is done the cloud nodes go back: after 10 empty minutes, or sooner by
    // consolidation if on-prem frees up first (the modelled durations decide which).
    for _ in 0..40 {
        s.advance(1800.0).unwrap();
    }
    let log = events(&mut s);
    assert!(
        log.contains("p5-od -1 (aws-p5-od-000 empty for")
            || log.contains("p5-od -1 (aws-p5-od-000 consolidated"),
        "{log}"
    );
    assert!(log.contains("p5-spot -1 (aws-p5-spot-000"), "{log}");
    assert_eq!(s.snapshot().dollars_per_hour, 16.0, "{log}");
}

/// Issue 34: spending caps. A buy that would pass the pool's or the fleet's $/h waits and
/// says so (once), and buys again once there is room.
#[test]
fn a_buy_past_a_spending_cap_waits_and_says_whose_cap() {
    let mut cfg = fleet(0.0);
    // On-prem $16/h + one spot node $14.58/h fit under $45/h; an on-demand one ($55.04/h)
    // does not. The spot pool itself allows one node.
    cfg.scale.max_dollars_per_hour = Some(45.0);
    cfg.pools[1].max_dollars_per_hour = Some(20.0);
    let mut s = open("caps", &cfg, 0.0);
    s.submit(&[eight(false), eight(true), eight(true), eight(false)])
        .into_iter()
        .for_each(|r| {
            r.unwrap();
        });
    s.tick().unwrap();
    s.advance(1.0).unwrap();
    let log = events(&mut s);
    assert!(
        log.contains("aws/us-east-1/use1-az3/p5-spot +1 for job"),
        "{log}"
    );
    assert!(
        log.contains("p5-spot: +1 for job") && log.contains("would pass the pool's cap of $20.00/h ($14.58/h now): waits until nodes are given back"),
        "{log}"
    );
    assert!(
        log.contains("p5-od: +1 for job")
            && log.contains("(+$55.04/h) would pass the fleet's cap of $45.00/h ($30.58/h now)"),
        "{log}"
    );
    assert!(!log.contains("p5-od +1 for job"), "{log}");
    // Said once, not at every cycle.
    assert_eq!(
        log.matches("would pass the fleet's cap").count(),
        1,
        "{log}"
    );
    let pools = &s.snapshot().pools;
    assert_eq!((pools[1].provisioning, pools[2].provisioning), (1, 0));
}

#[test]
fn a_spot_notice_checkpoints_the_job_which_requeues_and_falls_back_to_on_demand() {
    // Several interruptions an hour: the first spot node is soon taken back.
    let cfg = fleet(3.0);
    let mut s = open("spot", &cfg, 0.0);
    let _busy = s.submit(&[eight(false)]).remove(0).unwrap();
    let id = s.submit(&[eight(true)]).remove(0).unwrap();
    s.tick().unwrap();
    let log = advance_until(&mut s, "taken back by the provider", 30.0, 2000);
    assert!(log.contains("spot notice: aws-p5-spot-000"), "{log}");
    assert!(
        log.contains("is taken back in 2 min; 1 job(s) checkpointing"),
        "{log}"
    );
    assert!(
        log.contains("spot interruption notice: checkpoint now"),
        "the job was told: {log}"
    );
    assert!(log.contains("requeued from its checkpoint"), "{log}");
    for _ in 0..20 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    assert!(
        log.contains("p5-od +1 for job")
            && log.contains("(spot was just interrupted or had no capacity: on-demand)"),
        "{log}"
    );
    assert_eq!(
        s.engine().job(id).unwrap().state,
        JobState::Running,
        "{log}"
    );
    assert!(s.snapshot().teams[0].spend_month_usd > 0.0);
}

#[test]
fn a_failed_node_requeues_its_jobs_and_on_prem_is_repaired() {
    let cfg = fleet(0.0);
    // A failure every few hours per node.
    let mut s = open("fail", &cfg, 0.3);
    s.submit(&[eight(false)]).remove(0).unwrap();
    s.tick().unwrap();
    let log = advance_until(&mut s, "repaired", 600.0, 400);
    assert!(
        log.contains("failed (1 job(s) requeued); repair under way"),
        "{log}"
    );
    assert!(
        log.contains("its node failed: requeued from its last checkpoint"),
        "{log}"
    );
    assert!(log.contains("node onprem-hgx-000 repaired"), "{log}");
}

#[test]
fn a_cloud_node_is_drained_onto_paid_capacity_once_it_frees_up() {
    let cfg = fleet(0.0);
    let mut s = open("consolidate", &cfg, 0.0);
    // The on-prem node is full for under an hour, so the 4-GPU job gets a spot node.
    let short = s.submit(&[train(8, true, "1h")]).remove(0).unwrap();
    let long = s.submit(&[train(4, true, "48h")]).remove(0).unwrap();
    s.tick().unwrap();
    assert!(events(&mut s).contains("p5-spot +1 for job"));
    let log = advance_until(&mut s, "consolidated", 60.0, 240);
    assert!(
        log.contains("draining aws-p5-spot-000: 1 job(s) checkpoint and move"),
        "{log}"
    );
    assert!(
        log.contains("consolidation: aws-p5-spot-000 is given back; checkpoint"),
        "the job was told why: {log}"
    );
    assert!(
        log.contains("p5-spot -1 (aws-p5-spot-000 consolidated"),
        "{log}"
    );
    // The short job had finished first: nothing is drained onto capacity still in use.
    assert_ne!(
        s.engine().job(short).unwrap().state,
        JobState::Running,
        "{log}"
    );
    for _ in 0..5 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    let j = s.engine().job(long).unwrap();
    assert_eq!(j.state, JobState::Running, "{log}");
    let node = j.placement.as_ref().unwrap().nodes[0].node;
    assert_eq!(s.engine().fleet().node(node).name, "onprem-hgx-000");
    // Only the on-prem node is paid for now.
    assert_eq!(s.snapshot().dollars_per_hour, 16.0);
    assert_eq!(
        (s.counters.consolidated_nodes, s.counters.scale_downs),
        (1, 1)
    );
}

#[test]
fn a_class_with_patience_waits_an_hour_before_capacity_is_bought_for_it() {
    let mut cfg = fleet(0.0);
    cfg.scale.burst_after = [("experiment".to_string(), "1h".to_string())].into();
    let mut s = open("patience", &cfg, 0.0);
    s.submit(&[train(8, false, "12h")]).remove(0).unwrap();
    let sweep = s
        .submit(&[Submission {
            priority: Some("experiment".into()),
            ..train(8, true, "12h")
        }])
        .remove(0)
        .unwrap();
    s.tick().unwrap();
    let bought = format!("+1 for job {sweep},");
    for _ in 0..55 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    assert!(!log.contains(&bought), "bought before its hour: {log}");
    // The queue says why it waits and for how much longer.
    let row = s
        .snapshot()
        .jobs
        .iter()
        .find(|j| j.id == sweep)
        .unwrap()
        .clone();
    assert!(
        row.detail.contains(
            "experiment jobs wait 60 min for paid capacity before any is bought (5 min left)"
        ),
        "{row:?}"
    );
    for _ in 0..10 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    assert!(log.contains(&bought), "{log}");
}

#[test]
fn a_fragmented_node_is_emptied_for_a_job_instead_of_buying_one() {
    let mut cfg = fleet(0.0);
    cfg.pools[0].nodes = 2;
    let mut s = open("defragment", &cfg, 0.0);
    // Two on-prem nodes: two 4-GPU jobs fill the first, a third sits on the second; when one
    // on the first ends, each node has 4 GPUs free and an 8-GPU job fits on neither.
    let ids: Vec<i64> = s
        .submit(&[
            train(4, false, "48h"),
            train(4, false, "48h"),
            train(4, false, "48h"),
        ])
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    s.tick().unwrap();
    let node_of = |s: &State, id: i64| {
        let j = s.engine().job(id).unwrap();
        let n = j.placement.as_ref().unwrap().nodes[0].node;
        s.engine().fleet().node(n).name.clone()
    };
    assert_eq!(node_of(&s, ids[0]), node_of(&s, ids[1]));
    let first = node_of(&s, ids[0]);
    s.act(ids[0], Action::Cancel, "test").unwrap();
    let big = s.submit(&[train(8, false, "12h")]).remove(0).unwrap();
    s.tick().unwrap();
    let row = s
        .snapshot()
        .jobs
        .iter()
        .find(|j| j.id == big)
        .unwrap()
        .clone();
    assert!(
        row.detail.contains(&format!(
            "{first} is being emptied for it (defragmentation)"
        )),
        "{row:?}"
    );
    for _ in 0..5 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    assert!(
        log.contains(&format!(
            "defragment {first}: 1 job(s) checkpoint and move so job {big} gets the node"
        )),
        "{log}"
    );
    assert!(
        !log.contains(&format!("+1 for job {big},")),
        "bought: {log}"
    );
    let j = s.engine().job(big).unwrap();
    assert_eq!(j.state, JobState::Running, "{log}");
    assert_eq!(node_of(&s, big), first);
    // The moved job runs again, on the other node.
    assert_eq!(s.engine().job(ids[1]).unwrap().state, JobState::Running);
    assert_ne!(node_of(&s, ids[1]), first);
}

/// A notebook of team a: half an H100, idle 20 min after it starts (the simulated telemetry
/// of a notebook left open).
fn notebook(name: &str, gpu: &str, interactive: bool) -> Submission {
    Submission {
        file: "nb.yaml".into(),
        text: format!(
            "name: {name}\nresources:\n  accelerators: {gpu}\ncheckpoint: {{interval: 10m, grace: 1m}}\ninteractive: {interactive}\nrun: jupyter lab\n"
        )
        .into_bytes(),
        team: Some("a".into()),
        ..Submission::default()
    }
}

fn state_of(s: &State, id: i64) -> JobState {
    s.engine().job(id).map(|j| j.state).unwrap()
}

#[test]
fn reclaim_applies_exactly_the_plan_shown_counts_shares_and_suspends_notebooks() {
    // Before: confirmed 5 GPUs from 5 jobs, applied 6 jobs and 6 GPUs; half-GPU notebooks
    // counted as whole ones; reclaimed notebooks started again a minute later, idle again.
    let mut s = open("reclaim", &fleet(0.0), 0.0);
    let ids: Vec<i64> = s
        .submit(&[
            notebook("notebook-a", "H100:0.5", true),
            notebook("notebook-b", "H100:0.5", true),
            notebook("notebook-batch", "H100:1", false),
            notebook("notebook-c", "H100:1", true),
        ])
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let (a, b, batch, cancelled) = (ids[0], ids[1], ids[2], ids[3]);
    s.tick().unwrap();
    for _ in 0..40 {
        s.advance(60.0).unwrap();
    }
    // A fifth starts later: it is not idle long enough when the plan is shown.
    let late = s.submit(&[notebook("notebook-late", "H100:1", true)])[0]
        .as_ref()
        .copied()
        .unwrap();
    for _ in 0..10 {
        s.advance(60.0).unwrap();
    }
    let plan = s.show_reclaim();
    let planned: Vec<i64> = plan.items.iter().map(|i| i.job as i64).collect();
    assert_eq!(planned.len(), 4, "{plan:?}");
    assert!(!planned.contains(&late));
    assert_eq!(plan.gpus_freed, 3.0, "two halves and two wholes: {plan:?}");
    let action = |id: i64| {
        plan.items
            .iter()
            .find(|i| i.job as i64 == id)
            .unwrap()
            .action
            .clone()
    };
    use gantry::scheduler::reclaim::ReclaimAction;
    assert_eq!(action(a), ReclaimAction::Suspend);
    assert_eq!(action(batch), ReclaimAction::CheckpointAndRequeue);

    // Meanwhile one planned job is cancelled and the late one goes idle too.
    s.act(cancelled, Action::Cancel, "test").unwrap();
    for _ in 0..30 {
        s.advance(60.0).unwrap();
    }
    assert!(s.reclaim_plan().items.iter().any(|i| i.job as i64 == late));
    let done = s.apply_reclaim("test", &plan.id).unwrap();
    let applied: Vec<i64> = done.items.iter().map(|i| i.job as i64).collect();
    assert_eq!(applied.len(), 3, "{done:?}");
    assert!(!applied.contains(&late), "never a job outside the plan");
    assert_eq!(done.skipped.len(), 1);
    assert_eq!(done.skipped[0].job as i64, cancelled);
    assert!(done.skipped[0].why.contains("cancelled"), "{done:?}");
    assert_eq!(done.gpus_freed, 2.0);
    assert_eq!(state_of(&s, late), JobState::Running);

    // Suspended notebooks are held once stopped and stay held; the batch job requeues.
    for _ in 0..10 {
        s.advance(60.0).unwrap();
    }
    assert_eq!(state_of(&s, a), JobState::Held);
    assert_eq!(state_of(&s, b), JobState::Held);
    assert_ne!(state_of(&s, batch), JobState::Held);
    // A plan applies once.
    let again = s.apply_reclaim("test", &plan.id).unwrap_err().to_string();
    assert!(again.contains("not one this daemon showed"), "{again}");
    // The owner resumes a suspended notebook.
    s.act(a, Action::Release, "test").unwrap();
    assert_eq!(state_of(&s, a), JobState::Pending);
}

#[test]
fn spend_ever_only_grows_across_budget_months_and_restarts() {
    let cfg = fleet(0.0);
    let mut s = open("spend-total", &cfg, 0.0);
    s.submit(&[train(8, false, "20d")]).remove(0).unwrap();
    s.tick().unwrap();
    let total = |s: &State| s.snapshot().teams[0].spend_total_usd;
    let month = |s: &State| s.snapshot().teams[0].spend_month_usd;
    let mut last = 0.0;
    let mut rolled = false;
    for _ in 0..50 {
        s.advance(86_400.0).unwrap();
        assert!(total(&s) >= last - 1e-6, "{} < {last}", total(&s));
        assert!(total(&s) >= month(&s) - 1e-6);
        rolled |= month(&s) < total(&s) - 1.0;
        last = total(&s);
    }
    assert!(
        rolled,
        "a budget month began, and the total kept what came before"
    );
    // The journal gives the same total after a restart (the same journal, reopened).
    drop(s);
    let s = reopen("spend-total", &cfg);
    assert!(
        (total(&s) - last).abs() < 1e-6 * last.max(1.0),
        "{} vs {last}",
        total(&s)
    );
}

#[test]
fn a_job_on_the_simulated_fleet_has_no_logs_and_says_why() {
    let cfg = fleet(0.0);
    let mut s = open("sim-logs", &cfg, 0.0);
    let id = s.submit(&[train(1, false, "2h")]).remove(0).unwrap();
    s.tick().unwrap();
    s.advance(1.0).unwrap();
    assert_eq!(s.engine().job(id).unwrap().state, JobState::Running);
    let logs = s.job_logs(id).unwrap();
    assert!(logs.sources.is_empty());
    let why = logs.none.unwrap_or_default();
    assert!(why.contains("simulated fleet"), "{why}");
}

/// A finished job stays listed after the engine has let it go (issue 68): the engine keeps a
/// window of finished jobs whole, the listings keep each one's row, carried from snapshot to
/// snapshot; the job's detail is read from the journal.
#[test]
fn finished_jobs_stay_listed_after_the_engine_lets_them_go() {
    let cfg = fleet(0.0);
    let mut s = open("listed", &cfg, 0.0);
    s.set_history_kept(0);
    let ids: Vec<i64> = (0..3)
        .map(|_| s.submit(&[train(1, false, "30m")]).remove(0).unwrap())
        .collect();
    s.tick().unwrap();
    for _ in 0..60 {
        s.advance(60.0).unwrap();
    }
    let log = events(&mut s);
    for &id in &ids {
        assert!(s.engine().job(id).is_none(), "job {id} left memory: {log}");
        let row = (s.snapshot().jobs.iter())
            .find(|r| r.id == id)
            .cloned()
            .unwrap_or_else(|| panic!("job {id} is not listed: {log}"));
        assert!(
            ["completed", "failed"].contains(&row.state.as_str()),
            "{row:?}"
        );
        assert_eq!(row.name, "train");
        let detail = s.job_detail(id).unwrap();
        assert_eq!(detail.state.to_string(), row.state);
    }
    // Still listed once the snapshot has been rebuilt again, and only once.
    s.advance(60.0).unwrap();
    for &id in &ids {
        assert_eq!(s.snapshot().jobs.iter().filter(|r| r.id == id).count(), 1);
    }
}
