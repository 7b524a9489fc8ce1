//! What jobs cost: the journal bills each run, reports add up over any split of time, costs
//! survive a restart, and budgets alert, demote or block.

use gantry::api::JobState;
use gantry::api::ReportBy;
use gantry::config::fleet::{parse, FleetConfig};
use gantry::daemon::engine::{EngineError, Submission};
use gantry::daemon::state::{Action, State, StateOptions};
use proptest::prelude::*;
use std::path::{Path, PathBuf};

/// Two on-prem nodes at $16/h (2 $/GPU-h) and one spot node at $8/h; two teams.
fn fleet(budget: &str) -> FleetConfig {
    let text = format!(
        r#"
[[teams]]
name = "a"
{budget}

[[teams]]
name = "b"

{hgx}
[[pools]]
provider = "aws"
backend = "simulated"
region = "us-east-1"
zone = "use1-az1"
name = "spot"
instance_type = "p5.48xlarge"
gpu = "H100"
gpus_per_node = 8
vram_gb = 80
cpus = 192
memory_gb = 2048
capacity = "spot"
price_per_hour = 8.0
nodes = 1
"#,
        hgx = crate::support::daemon::hgx_pool(16.0, 2)
    );
    parse("cost.toml", &text).unwrap()
}

fn dir(name: &str) -> PathBuf {
    gantry_testkit::scratch::scratch(&format!("cost-{name}"))
}

/// 2026-11-20T00:00:00Z: the wall clock the tests' daemons start at.
const NOV_20: f64 = 1_795_132_800.0;

fn open(d: &Path, cfg: &FleetConfig) -> State {
    open_at(d, cfg, NOV_20)
}

fn open_at(d: &Path, cfg: &FleetConfig, wall: f64) -> State {
    State::open(
        &d.join("state.db"),
        cfg,
        &StateOptions {
            seed: 3,
            demo_workload: false,
            failures_per_node_hour: 0.0,
            log_dir: None,
            wall_clock: Some(wall),
            ..StateOptions::default()
        },
    )
    .unwrap()
}

fn job(team: &str, gpus: u8, project: &str) -> Submission {
    Submission {
        file: "job.yaml".into(),
        text: format!(
            "name: j\nproject: {project}\nresources:\n  accelerators: H100:{gpus}\ncheckpoint: {{interval: 10m, grace: 30s}}\ntime_limit: 48h\nrun: train\n"
        )
        .into_bytes(),
        team: Some(team.into()),
        ..Submission::default()
    }
}

fn total(s: &State) -> f64 {
    s.engine().jobs().map(|j| j.cost_at(s.now())).sum()
}

#[test]
fn a_run_bills_its_share_of_the_node_price_for_the_time_it_held_the_gpus() {
    let d = dir("share");
    let mut s = open(&d, &fleet(""));
    let id = s.submit(&[job("a", 4, "p1")]).remove(0).unwrap();
    s.tick().unwrap();
    let t0 = s.now();
    assert_eq!(s.engine().job(id).unwrap().state, JobState::Running);
    let rate = s
        .engine()
        .job(id)
        .unwrap()
        .placement
        .as_ref()
        .unwrap()
        .price_per_hour;
    // 4 of 8 GPUs: half of the $16/h on-prem node or of the $8/h spot node.
    assert!(rate == 8.0 || rate == 4.0, "{rate}");
    s.advance(1800.0).unwrap();
    s.act(id, Action::Cancel, "test").unwrap();
    let cost = s.engine().job(id).unwrap().cost;
    let want = rate * (s.now() - t0) / 3600.0;
    assert!((cost - want).abs() < 1e-9, "{cost} vs {want}");
    let r = s.report(0.0, s.now(), ReportBy::Project).unwrap();
    assert_eq!(r.rows.len(), 1);
    assert_eq!(
        (r.rows[0].key.as_str(), r.rows[0].team.as_str()),
        ("p1", "a")
    );
    assert!((r.total_usd - want).abs() < 1e-9);
    assert!((r.total_gpu_hours - 4.0 * (s.now() - t0) / 3600.0).abs() < 1e-9);
    // Nothing accrues once it stopped.
    s.advance(3600.0).unwrap();
    assert!((total(&s) - want).abs() < 1e-9);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    /// Whatever happens (starts, preemptions, cancels, time passing), the report over [0, now)
    /// equals the jobs' own costs, and splitting the window anywhere adds up to the same.
    #[test]
    fn reports_add_up_to_the_jobs_costs(
        steps in prop::collection::vec((0u8..4, 1u8..9, 60.0f64..7200.0), 4..24),
        split in 0.0f64..1.0,
    ) {
        let d = dir(&format!("prop-{}", steps.len()));
        let mut s = open(&d, &fleet(""));
        for (op, gpus, dt) in steps {
            match op {
                0 | 1 => {
                    let team = if op == 0 { "a" } else { "b" };
                    let _ = s.submit(&[job(team, gpus, "p")]);
                }
                2 => {
                    let running = s.engine().jobs().find(|j| j.state == JobState::Running).map(|j| j.id);
                    if let Some(id) = running {
                        s.act(id, Action::Preempt, "test").unwrap();
                    }
                }
                _ => {
                    let live = s.engine().jobs().find(|j| !j.state.is_final()).map(|j| j.id);
                    if let Some(id) = live {
                        s.act(id, Action::Cancel, "test").unwrap();
                    }
                }
            }
            s.advance(dt).unwrap();
        }
        let now = s.now();
        let whole = s.report(0.0, now, ReportBy::Team).unwrap();
        prop_assert!((whole.total_usd - total(&s)).abs() < 1e-6, "{} vs {}", whole.total_usd, total(&s));
        let cut = now * split;
        let a = s.report(0.0, cut, ReportBy::Job).unwrap();
        let b = s.report(cut, now, ReportBy::Job).unwrap();
        prop_assert!((a.total_usd + b.total_usd - whole.total_usd).abs() < 1e-6);
        let by_team: f64 = whole.rows.iter().map(|r| r.spend_usd).sum();
        prop_assert!((by_team - whole.total_usd).abs() < 1e-9);
        for r in &whole.rows {
            prop_assert!((r.on_demand_usd + r.spot_usd + r.reserved_usd - r.spend_usd).abs() < 1e-6);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]
    /// The month's spend each team's budget holds grows run by run as runs end (the journal
    /// hands over each closed charge); it is what a daemon opened afresh on the same journal
    /// sums from every run of the month, across month ends too.
    #[test]
    fn the_months_spend_kept_run_by_run_is_the_journals_sum(
        steps in prop::collection::vec((0u8..5, 1u8..9, 60.0f64..7200.0), 4..20),
    ) {
        let d = dir(&format!("month-{}", steps.len()));
        let cfg = fleet("budget_monthly_usd = 1000000");
        let live = {
            let mut s = open(&d, &cfg);
            for (op, gpus, dt) in steps {
                match op {
                    0 | 1 => {
                        let team = if op == 0 { "a" } else { "b" };
                        let _ = s.submit(&[job(team, gpus, "p")]);
                    }
                    2 => {
                        let live = s.engine().jobs().find(|j| !j.state.is_final()).map(|j| j.id);
                        if let Some(id) = live {
                            s.act(id, Action::Cancel, "test").unwrap();
                        }
                    }
                    // Days pass: a month may end (2026-11-20 + 6 days at a time).
                    3 => {
                        s.advance(6.0 * 86_400.0).unwrap();
                        continue;
                    }
                    _ => {}
                }
                s.advance(dt).unwrap();
            }
            let ids: Vec<_> = s.engine().jobs().filter(|j| !j.state.is_final()).map(|j| j.id).collect();
            for id in ids {
                s.act(id, Action::Cancel, "test").unwrap();
            }
            s.advance(1.0).unwrap();
            s.snapshot().teams.iter().map(|t| (t.name.clone(), t.spend_month_usd, t.gpu_hours_month)).collect::<Vec<_>>()
        };
        let s = open(&d, &cfg);
        let fresh: Vec<_> = s.snapshot().teams.iter().map(|t| (t.name.clone(), t.spend_month_usd, t.gpu_hours_month)).collect();
        prop_assert_eq!(live.len(), fresh.len());
        for (l, f) in live.iter().zip(&fresh) {
            prop_assert_eq!(&l.0, &f.0);
            prop_assert!((l.1 - f.1).abs() < 1e-6 && (l.2 - f.2).abs() < 1e-6, "{:?} vs {:?}", l, f);
        }
    }
}

#[test]
fn costs_survive_a_restart_and_open_runs_close_at_the_last_journal_time() {
    let d = dir("restart");
    let cfg = fleet("");
    let (before, last) = {
        let mut s = open(&d, &cfg);
        s.submit(&[job("a", 8, "p"), job("b", 8, "q")]);
        s.tick().unwrap();
        s.advance(3600.0).unwrap();
        // The state is dropped without any shutdown: what is billed is what the journal holds.
        (total(&s), s.now())
    };
    let s = open(&d, &cfg);
    assert_eq!(
        s.now(),
        last,
        "the clock resumes where the journal saw it last"
    );
    let after = total(&s);
    assert!(after > 0.0);
    // The runs ended at the last time the journal saw (the daemon's clock resumes there).
    assert!((after - before).abs() < 1e-6, "{after} vs {before}");
    let mut s = s;
    let requeued = s.events(None, 100).unwrap();
    assert!(
        requeued
            .iter()
            .filter(|e| e.detail.contains("daemon restarted"))
            .count()
            == 2,
        "{requeued:?}"
    );
}

#[test]
fn a_restart_does_not_announce_a_budget_alert_again() {
    // $10 a month, alerts at 50% and 100%; the 8-GPU job costs $16/h.
    let d = dir("alert-restart");
    let cfg = fleet("budget_monthly_usd = 10\nbudget_alerts = [0.5, 1.0]");
    {
        let mut s = open(&d, &cfg);
        s.submit(&[job("a", 8, "p")]);
        s.tick().unwrap();
        s.advance(1500.0).unwrap(); // $6.67: past 50%
    }
    let mut s = open(&d, &cfg);
    s.tick().unwrap();
    for _ in 0..3 {
        s.advance(600.0).unwrap(); // past 100% after the restart
    }
    let events = s.events(None, 1000).unwrap();
    let said = |what: &str| events.iter().filter(|e| e.detail.starts_with(what)).count();
    assert_eq!(
        said("budget: team a at 50% of its monthly budget"),
        1,
        "{events:?}"
    );
    assert_eq!(
        said("budget: team a at 100% of its monthly budget"),
        1,
        "{events:?}"
    );
}

#[test]
fn budgets_alert_then_demote_or_block() {
    // Team a may spend $10 a month; one 8-GPU job costs $16/h or $8/h.
    let d = dir("demote");
    let cfg =
        fleet("budget_monthly_usd = 10\nbudget_alerts = [0.5, 1.0]\nbudget_action = \"demote\"");
    let mut s = open(&d, &cfg);
    s.submit(&[job("a", 8, "p")]);
    s.tick().unwrap();
    for _ in 0..12 {
        s.advance(600.0).unwrap();
    }
    let team = s
        .snapshot()
        .teams
        .iter()
        .find(|t| t.name == "a")
        .unwrap()
        .clone();
    assert!(team.budget_used.unwrap() >= 1.0, "{team:?}");
    assert!(team.spend_month_usd >= 10.0);
    let events = s.snapshot().events.join("\n");
    assert!(
        events.contains("budget: team a at 50% of its monthly budget"),
        "{events}"
    );
    assert!(
        events.contains("budget: team a at 100% of its monthly budget ($"),
        "{events}"
    );
    // Over budget with demote: new jobs land in the lowest class.
    let id = s
        .submit(&[Submission {
            priority: Some("production".into()),
            ..job("a", 1, "p")
        }])
        .remove(0)
        .unwrap();
    let lowest = s.engine().lowest_class();
    assert_eq!(s.engine().job(id).unwrap().class, lowest);
    // Team b is not affected.
    let other = s
        .submit(&[Submission {
            priority: Some("production".into()),
            ..job("b", 1, "p")
        }])
        .remove(0)
        .unwrap();
    assert_ne!(s.engine().job(other).unwrap().class, lowest);

    let d = dir("block");
    let cfg = fleet("budget_monthly_gpu_hours = 4\nbudget_action = \"block\"");
    let mut s = open(&d, &cfg);
    s.submit(&[job("a", 8, "p")]);
    s.tick().unwrap();
    s.advance(3600.0).unwrap();
    let err = s.submit(&[job("a", 1, "p")]).remove(0).unwrap_err();
    assert!(matches!(err, EngineError::OverBudget(_)), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("team `a` has spent its monthly budget") && msg.contains("GPU-h"),
        "{msg}"
    );
    assert!(s.submit(&[job("b", 1, "p")]).remove(0).is_ok());
    // A new budget month lifts the block.
    s.advance(30.0 * 86_400.0).unwrap();
    assert!(s.submit(&[job("a", 1, "p")]).remove(0).is_ok());
}

/// Budget months are calendar months in the fleet's time zone, not 30 days of the daemon's
/// clock: a block set on November 30 lifts at midnight, Berlin's an hour before UTC's.
#[test]
fn a_budget_month_ends_at_midnight_in_the_fleets_time_zone() {
    // 2026-11-30T20:00:00Z.
    let nov_30_20h = NOV_20 + 10.0 * 86_400.0 + 20.0 * 3600.0;
    for (zone, lifted_after_h) in [("UTC", 4.0), ("Europe/Berlin", 3.0)] {
        let d = dir(&format!("month-{}", zone.replace('/', "-")));
        let cfg = fleet(&format!(
            "budget_monthly_gpu_hours = 4\nbudget_action = \"block\"\n[calendar]\ntime_zone = \"{zone}\""
        ));
        let mut s = open_at(&d, &cfg, nov_30_20h);
        let big = s.submit(&[job("a", 8, "p")]).remove(0).unwrap();
        s.tick().unwrap();
        s.advance(3600.0).unwrap();
        s.act(big, Action::Cancel, "test").unwrap();
        let blocked = |s: &mut State| s.submit(&[job("a", 1, "p")]).remove(0).is_err();
        assert!(blocked(&mut s), "{zone}: over budget at 21:00 UTC");
        assert_eq!(s.snapshot().calendar.budget_month, "2026-11", "{zone}");
        // Until the month ends in the zone, the block holds.
        s.advance((lifted_after_h - 1.0) * 3600.0 - 60.0).unwrap();
        assert!(blocked(&mut s), "{zone}: still November there");
        s.advance(120.0).unwrap();
        let spent = s.snapshot().teams[0].spend_month_usd;
        assert!(!blocked(&mut s), "{zone}: December, the block lifted");
        assert_eq!(s.snapshot().calendar.budget_month, "2026-12", "{zone}");
        assert_eq!(spent, 0.0, "{zone}: nothing spent yet in December");
        assert_eq!(s.snapshot().calendar.time_zone, zone);
    }
}

/// A restart resumes the daemon's clock but not the calendar's: what happened before keeps its
/// date, and the downtime passes on the calendar (before: no calendar at all).
#[test]
fn a_restart_keeps_the_dates_and_the_calendar_moves_over_the_downtime() {
    let d = dir("calendar");
    let cfg = fleet("");
    let mut s = open(&d, &cfg);
    let id = s.submit(&[job("a", 1, "p")]).remove(0).unwrap();
    s.advance(3600.0).unwrap();
    s.tick().unwrap();
    assert_eq!(s.job_detail(id).unwrap().submitted, "2026-11-20T00:00:00Z");
    assert_eq!(s.snapshot().calendar.time, "2026-11-20T01:00:00Z");
    assert_eq!(
        s.snapshot().calendar.budget_month_ends,
        "2026-12-01T00:00:00Z"
    );
    drop(s);
    let mut s = open_at(&d, &cfg, NOV_20 + 5.0 * 3600.0);
    s.tick().unwrap();
    assert!(
        (s.now() - 3600.0).abs() < 1.0,
        "the clock resumes: {}",
        s.now()
    );
    assert_eq!(s.snapshot().calendar.time, "2026-11-20T05:00:00Z");
    let job = s.job_detail(id).unwrap();
    assert_eq!(job.submitted, "2026-11-20T00:00:00Z");
    assert!(job
        .events
        .iter()
        .all(|e| e.time.starts_with("2026-11-20T0")));
}
