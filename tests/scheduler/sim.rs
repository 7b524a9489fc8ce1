//! `gantry sim`: determinism, the bill's arithmetic, elasticity with spot fallback, and the
//! naive setups' rules — on small fleets so that they run in a debug build.

use gantry::config::fleet::{parse, FleetConfig, DEFAULT_FLEET};
use gantry::model::idle::IdleCause;
use gantry::model::{GpuRequest, JobRequest, ModelChoice};
use gantry::sim::mix::{Kind, SimJob, EXPERIMENT, PRODUCTION};
use gantry::sim::naive::{Baseline, World};
use gantry::sim::{compare, Setup, SimOptions};
use gantry::sim::{SetupResult, SimConfig};
use proptest::prelude::*;

fn small(days: f64, seed: u64, setups: Vec<Setup>) -> gantry::sim::Comparison {
    let fleet = parse("default", DEFAULT_FLEET).unwrap();
    compare(
        &fleet,
        &SimOptions {
            days,
            seed,
            load: 0.8,
            gpus: Some(64),
            setups,
            keep_events: false,
        },
    )
    .unwrap()
}

#[test]
fn the_same_seed_gives_the_same_event_log() {
    let all = vec![Setup::Naive, Setup::NaiveAnyFit, Setup::Gantry];
    let a = small(1.0, 5, all.clone());
    let b = small(1.0, 5, all.clone());
    let c = small(1.0, 6, all);
    for i in 0..3 {
        assert!(
            a.setups[i].events > 100,
            "{}: {}",
            a.setups[i].setup,
            a.setups[i].events
        );
        assert_eq!(a.setups[i].event_hash, b.setups[i].event_hash);
        assert_eq!(a.setups[i].spend_usd, b.setups[i].spend_usd);
        assert_ne!(a.setups[i].event_hash, c.setups[i].event_hash);
    }
    let engines: Vec<&str> = a.setups.iter().map(|s| s.engine.as_str()).collect();
    assert_eq!(engines, ["model", "model", "daemon"]);
}

/// `gantry sim` as a user runs it: gantry's column is the daemon's engine, and its events are
/// the daemon's journal.
#[test]
fn gantry_sim_runs_gantry_on_the_daemons_engine() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args([
            "sim",
            "--days",
            "0.25",
            "--gpus",
            "48",
            "--compare",
            "--events",
        ])
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gantry = v["setups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["setup"] == "gantry")
        .unwrap();
    assert_eq!(gantry["engine"], "daemon");
    let log: Vec<&str> = gantry["event_log"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l.as_str())
        .collect();
    assert!(
        log.iter()
            .any(|l| l.contains("running pending → running: placed")),
        "{log:?}"
    );
}

fn check_books(r: &SetupResult) -> Result<(), TestCaseError> {
    let eps = 1e-6 * (1.0 + r.spend_usd);
    let by_cap: f64 = r.by_capacity.iter().map(|c| c.spend_usd).sum();
    prop_assert!(
        (by_cap - r.spend_usd).abs() < eps,
        "{}: {by_cap} vs {}",
        r.setup,
        r.spend_usd
    );
    let teams: f64 = r.spend_by_team.iter().map(|t| t.spend_usd).sum();
    prop_assert!((teams + r.idle_spend_usd - r.spend_usd).abs() < eps);
    prop_assert!(
        r.idle_spend_usd >= -eps,
        "jobs billed more than the nodes cost: {r:?}"
    );
    let paid: f64 = r.by_capacity.iter().map(|c| c.paid_gpu_hours).sum();
    prop_assert!((paid - r.paid_gpu_hours).abs() < 1e-6 * (1.0 + paid));
    for c in &r.by_capacity {
        prop_assert!(c.allocated_gpu_hours <= c.paid_gpu_hours + 1e-6, "{c:?}");
    }
    prop_assert!(r.allocated_gpu_hours <= r.paid_gpu_hours + 1e-6);
    prop_assert!(r.busy_gpu_hours <= r.allocated_gpu_hours + 1e-6);
    prop_assert!(r.useful_gpu_hours <= r.busy_gpu_hours + 1e-6);
    prop_assert!((0.0..=1.0 + 1e-9).contains(&r.utilization));
    let cpu = r.spend_usd / r.useful_gpu_hours.max(1e-9);
    prop_assert!((cpu - r.cost_per_useful_gpu_hour).abs() < 1e-6 * (1.0 + cpu));
    prop_assert!(r.finished + r.unfinished + r.never_fit <= r.jobs);
    // Every paid GPU-hour that did no work has one cause: together they are paid − busy.
    let idle: f64 = r.idle.iter().map(|c| c.gpu_hours).sum();
    let gap = r.paid_gpu_hours - r.busy_gpu_hours;
    prop_assert!(
        (idle - gap).abs() < 1e-6 * (1.0 + r.paid_gpu_hours),
        "{}: causes {idle} vs paid − busy {gap}: {:?}",
        r.setup,
        r.idle
    );
    prop_assert!(r.idle.iter().all(|c| c.gpu_hours >= -1e-9), "{:?}", r.idle);
    // And pool by pool, the free hours are what the pool's jobs did not hold.
    for p in &r.by_pool {
        let free: f64 = p.idle.iter().map(|c| c.gpu_hours).sum();
        prop_assert!(
            (free - (p.paid_gpu_hours - p.held_gpu_hours)).abs() < 1e-6 * (1.0 + p.paid_gpu_hours),
            "{}: {free} vs {} − {}",
            p.pool,
            p.paid_gpu_hours,
            p.held_gpu_hours
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    /// Every dollar is a node's price over the time it was paid for, and is either some team's
    /// (its jobs' share of the nodes they ran on) or idle; no job is billed for more than its
    /// nodes cost, and held ≥ busy ≥ useful.
    #[test]
    fn the_books_balance(seed in 0u64..1000, load in 0.3f64..1.2) {
        let fleet = parse("default", DEFAULT_FLEET).unwrap();
        let c = compare(&fleet, &SimOptions {
            days: 0.5,
            seed,
            load,
            gpus: Some(48),
            setups: vec![Setup::Naive, Setup::Gantry],
            keep_events: false,
        }).unwrap();
        for r in &c.setups {
            check_books(r)?;
        }
    }
}

/// AWS p5 on demand: empty at start, up to 4 nodes.
const P5_OD: &str = r#"
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
max_nodes = 4
provisioning_delay = "6m"
"#;

/// One on-demand and one spot pool, both empty at start, up to 4 nodes each.
fn elastic_fleet(interruptions: f64) -> FleetConfig {
    let text = format!(
        r#"
[[teams]]
name = "ml"
guaranteed = 64

{P5_OD}
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
max_nodes = 4
provisioning_delay = "6m"
spot_interruptions_per_node_hour = {interruptions}
"#
    );
    parse("elastic.toml", &text).unwrap()
}

fn job(arrive: f64, hours: f64, spot: bool) -> SimJob {
    let request = JobRequest {
        gpu: GpuRequest::Whole(8),
        cpu_milli: 64_000,
        mem_mib: 512 * 1024,
        models: ModelChoice::Any,
        spot_ok: spot,
        ..JobRequest::default()
    };
    SimJob {
        kind: Kind::Training,
        team: 0,
        class: PRODUCTION,
        arrive,
        whole: request.clone(),
        request,
        work_s: hours * 3600.0,
        active_s: hours * 3600.0,
        checkpoint_s: Some(1800.0),
        preemptible: true,
        useful_milli: 8000,
    }
}

fn run(setup: Setup, fleet: &FleetConfig, jobs: &[SimJob], days: f64) -> SetupResult {
    let cfg = SimConfig {
        days,
        seed: 1,
        failures_per_node_hour: 0.0,
        keep_events: true,
        ..SimConfig::default()
    };
    match setup {
        Setup::Gantry => gantry::sim::daemon::run(fleet, jobs, &cfg).unwrap(),
        Setup::Naive => World::new(Baseline::Strict, fleet, jobs, cfg).run(),
        Setup::NaiveAnyFit => World::new(Baseline::AnyFit, fleet, jobs, cfg).run(),
    }
}

#[test]
fn pending_work_grows_the_cheapest_pool_and_empty_nodes_go_back() {
    let fleet = elastic_fleet(0.0);
    let jobs = [job(60.0, 2.0, true), job(60.0, 2.0, false)];
    let r = run(Setup::Gantry, &fleet, &jobs, 0.5);
    let log = r.event_log.join("\n");
    assert!(
        log.contains("aws/us-east-1/use1-az3/p5-spot +1 for job 1, +$14.58/h"),
        "{log}"
    );
    assert!(
        log.contains("aws/us-east-1/use1-az3/p5-od +1 for job 2, +$55.04/h"),
        "{log}"
    );
    assert_eq!(r.finished, 2, "{log}");
    assert_eq!(r.scale_downs, 2, "{log}");
    // Paid: about 6 min provisioning + 2 h running + 10 min empty, per node.
    let hours = 2.0 + 16.0 / 60.0;
    let want = (14.582 + 55.04) * hours;
    assert!(
        (r.spend_usd - want).abs() < 0.05 * want,
        "{} vs {want}",
        r.spend_usd
    );
    let waits = &r.queue_wait[1];
    assert_eq!(waits.class, "production");
    assert!(waits.p99_s >= 360.0 && waits.p99_s < 480.0, "{waits:?}");
    // Where the paid hours that did no work went: two 8-GPU nodes booting for 6 minutes, then
    // empty for the 10-minute scale-down window; nothing else.
    let idle = |c: IdleCause| r.idle.iter().find(|s| s.cause == c).unwrap().gpu_hours;
    let near = |got: f64, want: f64| (got - want).abs() < 0.1 * want;
    assert!(
        near(idle(IdleCause::Provisioning), 2.0 * 8.0 * 0.1),
        "{:?}",
        r.idle
    );
    assert!(
        near(idle(IdleCause::EmptyCloudNode), 2.0 * 8.0 / 6.0),
        "{:?}",
        r.idle
    );
    for c in [
        IdleCause::PartlyUsedCloudNode,
        IdleCause::ReservedWhileWorkWaits,
        IdleCause::ReservedNoWork,
        IdleCause::InRepair,
        IdleCause::HeldNotBusy,
    ] {
        assert!(idle(c) < 1e-6, "{c:?}: {:?}", r.idle);
    }
}

/// The daemon keeps only its newest finished jobs in memory; `gantry sim` counts every job
/// and every bill from the journal (at 2,000 GPUs, 37k jobs, it once counted 3,257 finished):
/// what the daemon keeps in memory changes nothing in the report.
#[test]
fn every_finished_job_and_its_bill_count_though_the_daemon_forgot_them() {
    let fleet = elastic_fleet(0.0);
    let jobs = [
        job(60.0, 1.0, true),
        job(60.0, 1.0, false),
        job(4000.0, 1.0, true),
    ];
    let run = |history_kept| {
        let cfg = SimConfig {
            days: 0.5,
            seed: 1,
            failures_per_node_hour: 0.0,
            history_kept,
            ..SimConfig::default()
        };
        gantry::sim::daemon::run(&fleet, &jobs, &cfg).unwrap()
    };
    let (forgetful, all) = (run(1), run(100));
    assert_eq!((forgetful.finished, all.finished), (3, 3));
    let team = |r: &SetupResult| r.spend_by_team.iter().map(|t| t.spend_usd).sum::<f64>();
    assert!(team(&all) > 3.0 * 14.0, "{}", team(&all));
    assert_eq!(team(&forgetful), team(&all));
    assert_eq!(forgetful.idle_spend_usd, all.idle_spend_usd);
    assert_eq!(forgetful.event_hash, all.event_hash);
}

#[test]
fn after_a_spot_interruption_the_job_checkpoints_and_on_demand_takes_over() {
    // Interruptions every few minutes on average: the first spot node is taken back soon.
    let fleet = elastic_fleet(6.0);
    let jobs = [job(60.0, 3.0, true)];
    let r = run(Setup::Gantry, &fleet, &jobs, 1.0);
    let log = r.event_log.join("\n");
    assert!(r.spot_interruptions >= 1, "{log}");
    assert!(log.contains("spot notice: aws-p5-spot-000"), "{log}");
    assert!(
        log.contains("(spot was just interrupted or had no capacity: on-demand)"),
        "{log}"
    );
    assert_eq!(r.finished, 1, "{log}");
    // gantry heard the notice: the job checkpointed, so nothing but restore time was redone.
    assert!(
        r.busy_gpu_hours - r.useful_gpu_hours < 8.0 * 0.5,
        "busy {} useful {}",
        r.busy_gpu_hours,
        r.useful_gpu_hours
    );
}

#[test]
fn the_naive_setup_never_grows_and_rejects_what_its_partition_cannot_hold() {
    let mut fleet = elastic_fleet(0.0);
    fleet.pools[0].nodes = 1; // one on-demand node, fixed
    fleet.pools[1].max_nodes = Some(0);
    let mut big = job(0.0, 4.0, false);
    big.request.nodes = 2;
    big.whole.nodes = 2;
    let jobs = [job(0.0, 1.0, false), big];
    let r = run(Setup::Naive, &fleet, &jobs, 0.5);
    assert_eq!(r.never_fit, 1, "a 2-node gang on a 1-node partition");
    assert_eq!((r.scale_ups, r.finished), (0, 1));
    // The naive fleet is paid all the time, used or not.
    assert!(
        (r.paid_gpu_hours - 8.0 * 12.0).abs() < 1e-6,
        "{}",
        r.paid_gpu_hours
    );
}

#[test]
fn strict_fifo_blocks_behind_its_head_and_any_fit_does_not() {
    let mut fleet = elastic_fleet(0.0);
    fleet.pools[0].nodes = 2;
    fleet.pools[1].max_nodes = Some(0);
    let mut gang = job(60.0, 1.0, false);
    gang.request.nodes = 2;
    gang.whole.nodes = 2;
    let mut small = job(120.0, 1.0, false);
    small.class = EXPERIMENT;
    small.kind = Kind::Experiment;
    // Job 0 holds one node for 4 h; the gang needs both; the small job fits beside job 0.
    let jobs = [job(0.0, 4.0, false), gang, small];
    let wait = |r: &SetupResult| {
        r.queue_wait
            .iter()
            .find(|w| w.class == "experiment")
            .unwrap()
            .p50_s
    };
    let strict = run(Setup::Naive, &fleet, &jobs, 0.5);
    let any = run(Setup::NaiveAnyFit, &fleet, &jobs, 0.5);
    assert!(wait(&strict) > 4.0 * 3600.0, "strict: {}", wait(&strict));
    assert!(wait(&any) < 120.0, "any-fit: {}", wait(&any));
    assert_eq!((strict.finished, any.finished), (3, 3));
}

#[test]
fn a_gpu_in_mig_mode_takes_slices_only_and_the_daemon_keeps_the_layout() {
    use gantry::model::{MigProfile, NodeId, Placement};
    use gantry::scheduler::{Cluster, Placer, Policy, Unplaceable};
    let cfg = parse(
        "mig.toml",
        r#"
[[teams]]
name = "ml"
guaranteed = 8

[[pools]]
provider = "onprem"
backend = "simulated"
region = "dc1"
zone = "dc1-a"
name = "a100"
instance_type = "HGX A100 80GB"
gpu = "A100-80GB"
gpus_per_node = 2
vram_gb = 80
cpus = 64
memory_gb = 512
capacity = "reserved"
price_per_hour = 3.0
nodes = 1
mig_gpus_per_node = 2
"#,
    )
    .unwrap();
    let fleet = gantry::config::fleet::fleet_of(&cfg);
    let mut c = Cluster::new(fleet);
    // Both GPUs are in MIG mode: a 2-GPU job cannot fit.
    let two = JobRequest {
        gpu: GpuRequest::Whole(2),
        ..JobRequest::default()
    };
    let mut placer = Placer::new(Policy::Gantry);
    let never = |r: Result<Placement, Unplaceable>| matches!(r, Err(Unplaceable::NeverFits { .. }));
    assert!(
        never(placer.place(&c, &two, 1)),
        "no 2 whole GPUs, even idle"
    );
    let slice = JobRequest {
        gpu: GpuRequest::Mig(MigProfile::parse("1g.10gb").unwrap()),
        ..JobRequest::default()
    };
    assert!(placer.place(&c, &slice, 1).is_ok());
    assert!(c.set_mig_mode(NodeId(0), 0, false));
    assert!(!c.set_mig_mode(NodeId(0), 0, false), "already whole");
    assert!(c.set_mig_mode(NodeId(0), 1, false));
    // What the fleet could ever host follows the GPUs' modes: no MIG slice now.
    assert!(never(placer.place(&c, &slice, 1)), "no GPU is in MIG mode");
    let p: Placement = placer.place(&c, &two, 1).unwrap();
    c.allocate(&p).unwrap();
    assert!(
        !c.set_mig_mode(NodeId(0), 0, true),
        "a busy GPU is not repartitioned"
    );

    // The daemon does not repartition MIG to demand (on a real host that is `nvidia-smi mig`
    // on drained GPUs, which gantry does not run): the pool's GPUs stay as the fleet file
    // lays them out, so a whole-GPU job is refused there — and `gantry sim`, on the daemon's
    // engine, says so rather than counting a layout change the daemon would not make.
    let mut one = job(0.0, 1.0, false);
    one.request.gpu = GpuRequest::Whole(1);
    one.whole.gpu = GpuRequest::Whole(1);
    one.request.models = ModelChoice::Any;
    one.request.cpu_milli = 8000;
    one.request.mem_mib = 64 * 1024;
    let r = run(Setup::Gantry, &cfg, &[one], 0.2);
    let log = r.event_log.join("\n");
    assert_eq!((r.never_fit, r.finished), (1, 0), "{log}");
    assert!(!log.contains("MIG off"), "{log}");
}

/// An on-prem pool of `onprem` 8×H100 nodes (paid all the time) and the elastic on-demand pool.
fn onprem_and_cloud(onprem: u32) -> FleetConfig {
    let text = format!(
        r#"
[[teams]]
name = "ml"
guaranteed = 64

[[pools]]
provider = "onprem"
backend = "simulated"
region = "dc1"
zone = "hall-a"
name = "dgx"
instance_type = "DGX H100"
gpu = "H100"
gpus_per_node = 8
vram_gb = 80
cpus = 224
memory_gb = 2048
capacity = "reserved"
price_per_hour = 20.0
nodes = {onprem}

{P5_OD}"#
    );
    parse("onprem.toml", &text).unwrap()
}

fn sized(arrive: f64, hours: f64, gpus: u8) -> SimJob {
    let mut j = job(arrive, hours, false);
    j.request.gpu = GpuRequest::Whole(gpus);
    j.request.cpu_milli = 8_000 * u32::from(gpus);
    j.request.mem_mib = 64 * 1024 * u64::from(gpus);
    j.whole = j.request.clone();
    j.useful_milli = 1000 * u32::from(gpus);
    j
}

fn run_with(fleet: &FleetConfig, jobs: &[SimJob], consolidate: bool) -> SetupResult {
    let cfg = SimConfig {
        days: 0.5,
        seed: 1,
        failures_per_node_hour: 0.0,
        keep_events: true,
        consolidate,
        ..SimConfig::default()
    };
    gantry::sim::daemon::run(fleet, jobs, &cfg).unwrap()
}

#[test]
fn a_cloud_node_is_drained_onto_paid_capacity_when_it_frees_up() {
    let fleet = onprem_and_cloud(1);
    // The on-prem node is full for an hour, so the 4-GPU job goes to the cloud; when the
    // on-prem node frees, the job checkpoints, moves there, and the cloud node goes back.
    let jobs = [sized(60.0, 1.0, 8), sized(120.0, 8.0, 4)];
    let r = run_with(&fleet, &jobs, true);
    let log = r.event_log.join("\n");
    assert!(log.contains("p5-od +1 for job 2"), "{log}");
    assert!(
        log.contains("aws-p5-od-000 consolidated: its jobs moved to paid capacity"),
        "{log}"
    );
    assert_eq!(
        (r.consolidated_nodes, r.moved_jobs, r.finished),
        (1, 1, 2),
        "{log}"
    );
    let without = run_with(&fleet, &jobs, false);
    assert_eq!(without.consolidated_nodes, 0);
    assert!(
        r.spend_usd < without.spend_usd - 5.0 * 55.04,
        "about 6 cloud hours saved: {} vs {}",
        r.spend_usd,
        without.spend_usd
    );
    assert!(r.utilization > without.utilization);
    // The move costs the restore once: the job still finishes all its work.
    assert!((r.useful_gpu_hours - without.useful_gpu_hours).abs() < 0.5);
}

#[test]
fn a_fragmented_paid_node_is_emptied_for_a_job_instead_of_buying_one() {
    let fleet = onprem_and_cloud(2);
    // Two long 4-GPU jobs end up on different nodes once the short ones finish; an 8-GPU
    // job then fits nowhere: one long job moves next to the other and the 8-GPU job gets the
    // emptied node — no cloud node bought.
    let jobs = [
        sized(60.0, 10.0, 4),
        sized(61.0, 1.0, 4),
        sized(62.0, 10.0, 4),
        sized(63.0, 1.0, 4),
        sized(2.0 * 3600.0, 4.0, 8),
    ];
    let r = run_with(&fleet, &jobs, true);
    let log = r.event_log.join("\n");
    let without = run_with(&fleet, &jobs, false);
    let log_without = without.event_log.join("\n");
    assert!(
        log_without.contains("p5-od +1 for job 5"),
        "fragmented, the plain policy buys a node:\n{log_without}"
    );
    assert!(
        log.contains("so job 5 gets the node instead of one bought for it"),
        "{log}"
    );
    assert_eq!((r.defragmented, r.scale_ups), (1, 0), "{log}");
    assert!(r.spend_usd < without.spend_usd);
}

#[test]
fn reserved_gpus_left_idle_while_work_waits_are_told_apart_from_those_nothing_wants() {
    // Nine on-prem nodes, a team guaranteed 64 GPUs that may not borrow: the ninth 8-GPU job
    // waits an hour for the quota while a node stands free, then the fleet runs dry.
    let fleet = onprem_and_cloud(9);
    let jobs: Vec<SimJob> = (0..9).map(|_| sized(60.0, 1.0, 8)).collect();
    let r = run_with(&fleet, &jobs, true);
    let log = r.event_log.join("\n");
    assert_eq!((r.finished, r.scale_ups), (9, 0), "{log}");
    let idle = |c: IdleCause| r.idle.iter().find(|s| s.cause == c).unwrap().gpu_hours;
    let waits = idle(IdleCause::ReservedWhileWorkWaits);
    assert!((waits - 8.0).abs() < 0.5, "{waits}: {:?}", r.idle);
    // The rest of the 12 h: 72 GPUs, less the work (9 jobs × 8 GPU-h) and the hour above.
    let none = idle(IdleCause::ReservedNoWork);
    let want = 72.0 * 12.0 - 72.0 - 8.0;
    assert!(
        (none - want).abs() < 0.01 * want,
        "{none} vs {want}: {:?}",
        r.idle
    );
}

#[test]
fn a_class_with_patience_waits_for_paid_capacity_before_any_is_bought() {
    let mut fleet = elastic_fleet(0.0);
    fleet.scale.burst_after = [("experiment".to_string(), "1h".to_string())].into();
    let production = job(60.0, 2.0, true);
    let experiment = SimJob {
        class: EXPERIMENT,
        kind: Kind::Experiment,
        ..job(60.0, 2.0, true)
    };
    let cfg = SimConfig {
        days: 0.5,
        seed: 1,
        failures_per_node_hour: 0.0,
        keep_events: true,
        ..SimConfig::default()
    };
    let r = gantry::sim::daemon::run(&fleet, &[production, experiment], &cfg).unwrap();
    let at = |what: &str| -> f64 {
        r.event_log
            .iter()
            .find(|l| l.contains(what))
            .unwrap_or_else(|| panic!("no `{what}`: {}", r.event_log.join("\n")))
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    // Production buys at once; the experiment waits its hour, then buys.
    assert!(at("+1 for job 1") < 120.0);
    let bought = at("+1 for job 2");
    assert!((3660.0..3800.0).contains(&bought), "{bought}");
    assert_eq!(r.finished, 2);
}
