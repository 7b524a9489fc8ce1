//! SkyPilot's task schema, field by field: what gantry honours (alternatives with their own
//! places and spot policy, memory-sized accelerators, SkyPilot's names for gantry's fields),
//! what it notes with what it does instead, and what it refuses at the field, with why.

use crate::support::fleets as common;

use gantry::model::*;
use gantry::spec;

/// A fleet of four pools: H100 on demand in aws/us-east-1, H100 spot in aws/us-east-1, A100
/// (40 GB) on demand in gcp/us-central1, L4 on Kubernetes.
fn fleet() -> (Fleet, [PoolId; 4]) {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, None).unwrap();
    let a100 = b.model("A100", 40_960, None).unwrap();
    let l4 = b.model("L4", 23_034, None).unwrap();
    let mut pool = |provider, region, name, model, capacity| {
        common::one_node_pool(&mut b, provider, region, name, model, capacity)
    };
    let east = pool("aws", "us-east-1", "h100", h100, CapacityType::OnDemand);
    let spot = pool("aws", "us-east-1", "h100-spot", h100, CapacityType::Spot);
    let gcp = pool("gcp", "us-central1", "a100", a100, CapacityType::OnDemand);
    let k8s = pool("kubernetes", "ctx", "l4", l4, CapacityType::OnDemand);
    (b.build(), [east, spot, gcp, k8s])
}

fn parse(text: &str) -> Result<spec::JobSpec, String> {
    spec::parse("task.yaml", text.as_bytes()).map_err(|e| e.to_string())
}

fn request(text: &str) -> Result<JobRequest, String> {
    let (fleet, _) = fleet();
    parse(text)?.to_request(&fleet).map_err(|e| e.to_string())
}

#[test]
fn any_of_keeps_each_model_where_its_alternative_allows_it() {
    let (fleet, [east, spot, gcp, _]) = fleet();
    let h100 = fleet.model_by_name("H100").unwrap();
    let a100 = fleet.model_by_name("A100").unwrap();
    // H100 only on demand in aws, A100 only in gcp: the union of the two is not "H100 or A100
    // anywhere" — a pool is one model in one place, so the pools carry the pairing.
    let r = request(
        "run: x\nresources:\n  any_of:\n    - {infra: aws, accelerators: H100:8}\n    - {infra: gcp, accelerators: A100:8}\n",
    )
    .unwrap();
    assert_eq!(r.gpu, GpuRequest::Whole(8));
    assert_eq!(r.models, ModelChoice::AnyOf(vec![h100, a100]));
    assert_eq!(
        r.pools,
        Some(vec![east, gcp]),
        "spot not asked for: no spot pool"
    );
    assert!(!r.spot_ok);
    // `ordered` prefers in the order written.
    let r = request(
        "run: x\nresources:\n  ordered:\n    - {accelerators: A100:8}\n    - {accelerators: H100:8, use_spot: true}\n",
    )
    .unwrap();
    assert_eq!(r.models, ModelChoice::Prefer(vec![a100, h100]));
    assert_eq!(r.pools, Some(vec![east, spot, gcp]));
    assert!(r.spot_ok);
}

#[test]
fn spot_or_on_demand_as_deepseek_writes_it() {
    // The form of SkyPilot's llm/deepseek-r1 task: the models in `resources`, the spot policy
    // in the alternatives; one model the fleet lacks (H200) is skipped.
    let (_, [east, spot, _, _]) = fleet();
    let r = request(
        "num_nodes: 2\nresources:\n  accelerators: {H200:8, H100:8}\n  any_of:\n    - use_spot: true\n    - use_spot: false\nrun: x\n",
    )
    .unwrap();
    assert_eq!((r.nodes, r.gpu, r.spot_ok), (2, GpuRequest::Whole(8), true));
    assert_eq!(r.pools, Some(vec![east, spot]));
}

#[test]
fn alternatives_the_fleet_cannot_offer_are_skipped_and_all_missing_is_one_clear_error() {
    let (_, [_, _, gcp, _]) = fleet();
    let r = request(
        "run: x\nresources:\n  any_of:\n    - {accelerators: B200:8}\n    - {accelerators: A100:8}\n",
    )
    .unwrap();
    assert_eq!(r.pools, Some(vec![gcp]));
    let e = request(
        "run: x\nresources:\n  any_of:\n    - {accelerators: B200:8}\n    - {infra: azure, accelerators: A100:8}\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with(
            "no alternative of `resources.any_of` fits this fleet: 1. no pool of this fleet has `B200` GPUs"
        ) && e.contains("2. infra azure: no pool of this fleet is there"),
        "{e}"
    );
}

/// Options with other GPU counts are other shapes of the job (the first that fits starts it),
/// as in SkyPilot's llama-3 and dbrx tasks (`{A100-80GB:8, A100-80GB:4, A100:8}`); only what
/// one placement cannot vary (CPUs, memory, price cap) must agree.
#[test]
fn other_counts_are_other_shapes_of_the_job() {
    let (fleet, [east, _, gcp, _]) = fleet();
    let id = |n| fleet.model_by_name(n).unwrap();
    let spec = parse(
        "run: x\nresources:\n  any_of:\n    - {infra: aws, accelerators: H100:4}\n    - {accelerators: A100:8}\n",
    )
    .unwrap();
    let shapes = spec.to_requests(&fleet).unwrap();
    let seen: Vec<(GpuRequest, ModelChoice, Option<Vec<PoolId>>)> = shapes
        .into_iter()
        .map(|r| (r.gpu, r.models, r.pools))
        .collect();
    assert_eq!(
        seen,
        [
            (
                GpuRequest::Whole(4),
                ModelChoice::AnyOf(vec![id("H100")]),
                Some(vec![east])
            ),
            (
                GpuRequest::Whole(8),
                ModelChoice::AnyOf(vec![id("A100")]),
                Some(vec![gcp])
            ),
        ]
    );
    // One mapping, several counts per model: one shape per count, in the order written.
    let spec =
        parse("run: x\nresources:\n  accelerators: {H100:8, H100:4, A100:8, B200:2}\n").unwrap();
    let shapes: Vec<(GpuRequest, ModelChoice)> = spec
        .to_requests(&fleet)
        .unwrap()
        .into_iter()
        .map(|r| (r.gpu, r.models))
        .collect();
    assert_eq!(
        shapes,
        [
            (
                GpuRequest::Whole(8),
                ModelChoice::AnyOf(vec![id("H100"), id("A100")])
            ),
            (GpuRequest::Whole(4), ModelChoice::AnyOf(vec![id("H100")])),
        ]
    );
    // Alternatives asking for their own CPUs and memory are shapes of their own, as SkyPilot
    // reads each alternative's `cpus` and `memory` (before: refused, "the alternatives ask
    // for different `cpus`").
    let spec = parse(
        "run: x\nresources:\n  memory: 64\n  any_of:\n    - {cpus: 8, accelerators: H100:8}\n    - {cpus: 16, accelerators: A100:8}\n    - {cpus: 16, memory: 128+, accelerators: H100:8}\n",
    )
    .unwrap();
    let shapes: Vec<(GpuRequest, ModelChoice, u32, u64)> = spec
        .to_requests(&fleet)
        .unwrap()
        .into_iter()
        .map(|r| (r.gpu, r.models, r.cpu_milli, r.mem_mib))
        .collect();
    let mib = |gb: u64| gb * 1024;
    assert_eq!(
        shapes,
        [
            (
                GpuRequest::Whole(8),
                ModelChoice::AnyOf(vec![id("H100")]),
                8000,
                mib(64)
            ),
            (
                GpuRequest::Whole(8),
                ModelChoice::AnyOf(vec![id("A100")]),
                16000,
                mib(64)
            ),
            (
                GpuRequest::Whole(8),
                ModelChoice::AnyOf(vec![id("H100")]),
                16000,
                mib(128)
            ),
        ]
    );
    // What is the job's, not a shape's, is still given once.
    let e = parse(
        "run: x\nresources:\n  any_of:\n    - {max_hourly_cost: 8, accelerators: H100:8}\n    - {max_hourly_cost: 16, accelerators: A100:8}\n",
    )
    .unwrap_err();
    assert!(
        e.starts_with(
            "task.yaml:3:3: `resources.any_of`: the alternatives ask for different `max_hourly_cost`"
        ),
        "{e}"
    );
}

#[test]
fn memory_sized_accelerators_name_the_fleets_models() {
    let (fleet, _) = fleet();
    let id = |n| fleet.model_by_name(n).unwrap();
    let r = request("run: x\nresources:\n  accelerators: 80GB+:8\n").unwrap();
    assert_eq!(r.models, ModelChoice::AnyOf(vec![id("H100")]));
    // Names round VRAM: an L4's 23,034 MiB is a "24GB" GPU.
    let r = request("run: x\nresources:\n  accelerators: 24GB+:1\n").unwrap();
    assert_eq!(
        r.models,
        ModelChoice::AnyOf(vec![id("H100"), id("A100"), id("L4")])
    );
    let r = request("run: x\nresources:\n  accelerators: 24GB:1\n").unwrap();
    assert_eq!(r.models, ModelChoice::AnyOf(vec![id("L4")]));
    let r = request("run: x\nresources:\n  accelerators: 40GB:1\n").unwrap();
    assert_eq!(r.models, ModelChoice::AnyOf(vec![id("A100")]));
    let e = request("run: x\nresources:\n  accelerators: 141GB+:8\n").unwrap_err();
    assert_eq!(
        e,
        "`141GB+`: no GPU model of this fleet has 141 GB or more (it has: H100 80 GiB, A100 40 GiB, L4 22 GiB)"
    );
}

#[test]
fn skypilots_names_for_gantrys_fields_are_honoured() {
    let s = parse(
        "run: x\nresources:\n  max_hourly_cost: 12.5\n  priority_class: production\n  ephemeral_storage: 100\n  spot_recovery: FAILOVER\n",
    )
    .unwrap();
    assert_eq!(s.max_price_per_hour, Some(12.5));
    assert_eq!(s.priority.as_deref(), Some("production"));
    assert_eq!(s.disk_gb, Some(100));
    let noted: Vec<&str> = s
        .ignored
        .iter()
        .map(|i| i.split(':').next().unwrap())
        .collect();
    assert_eq!(
        noted,
        ["resources.disk_size", "resources.job_recovery.strategy"]
    );
    // job_recovery's counts are honoured (issue 35), its strategy is gantry's own.
    let r = parse(
        "run: x\nresources:\n  job_recovery:\n    strategy: EAGER_NEXT_REGION\n    max_restarts_on_errors: 3\n    recover_on_exit_codes: [33, 34]\n",
    )
    .unwrap();
    assert_eq!(r.recovery.max_restarts_on_errors, 3);
    assert_eq!(r.recovery.recover_on_exit_codes, [33, 34]);
    let one =
        parse("run: x\nresources:\n  job_recovery:\n    recover_on_exit_codes: 29\n").unwrap();
    assert_eq!(one.recovery.recover_on_exit_codes, [29]);
    let e = parse("run: x\nresources:\n  job_recovery:\n    max_restarts_on_errors: 1000\n")
        .unwrap_err();
    assert!(
        e.contains("`resources.job_recovery.max_restarts_on_errors`: 1000: give 0 to 100 restarts"),
        "{e}"
    );
    let e =
        parse("run: x\nresources:\n  job_recovery:\n    recover_on_exit_codes: [0]\n").unwrap_err();
    assert!(
        e.contains("0 is not an exit code that means failure"),
        "{e}"
    );
    let e = parse("run: x\nmax_price: 3\nresources:\n  max_hourly_cost: 4\n").unwrap_err();
    assert!(
        e.starts_with("task.yaml:2:1: `max_price`: give the price cap once"),
        "{e}"
    );
    let e =
        parse("run: x\npriority: batch\nresources:\n  priority_class: production\n").unwrap_err();
    assert!(
        e.starts_with("task.yaml:2:1: `priority`: `batch`, while"),
        "{e}"
    );
}

#[test]
fn a_git_workdir_is_read_with_its_ref() {
    let s = parse("workdir:\n  url: https://github.com/example/repo.git\n  ref: v1.2\nrun: make\n")
        .unwrap();
    assert_eq!(s.workdir, None);
    let g = s.git_workdir.unwrap();
    assert_eq!(
        (g.url.as_str(), g.reference.as_deref()),
        ("https://github.com/example/repo.git", Some("v1.2"))
    );
}

#[test]
fn what_gantry_cannot_do_is_refused_at_the_field_with_what_to_do() {
    let cases = [
        (
            "run: x\nvolumes:\n  /data: my-volume\n",
            "2:1: `volumes`: not supported: gantry does not create SkyPilot volumes",
        ),
        (
            "run: x\nvolume_mounts:\n  - path: /d\n",
            "2:1: `volume_mounts`: not supported",
        ),
        (
            "run: x\npool:\n  workers: 2\n",
            "2:1: `pool`: not supported: SkyPilot pools",
        ),
        (
            "run: x\nresources:\n  cpus: 4\n  priority: 500\n",
            "4:3: `resources.priority`: not supported: SkyPilot's numeric priority",
        ),
        (
            "run: x\nresources:\n  local_disk: nvme:500\n",
            "3:3: `resources.local_disk`: not supported",
        ),
        (
            "run: x\nsecrets:\n  - my-managed-secret\n",
            "2:1: `secrets`: a list of SkyPilot managed secrets",
        ),
        (
            "run: x\nresources:\n  image_id:\n    us-east-1: ami-1\n",
            "3:3: `resources.image_id`: a per-region map of machine images",
        ),
        (
            "run: x\nenvs:\n  OK: 1\n  BAD-NAME: 2\n",
            "4:3: `envs.BAD-NAME`: not a name a shell can export",
        ),
        (
            "run: x\nresources:\n  any_of: []\n",
            "3:3: `resources.any_of`: lists no alternative",
        ),
        (
            "run: x\nresources:\n  any_of: [{cpus: 2}]\n  ordered: [{cpus: 2}]\n",
            "4:3: `resources.ordered`: give either `any_of` or `ordered`, not both",
        ),
        (
            "run: x\nresources:\n  any_of:\n    - ordered: [{cpus: 2}]\n",
            "3:3: `resources.any_of`: an alternative cannot have alternatives",
        ),
    ];
    for (text, want) in cases {
        let e = parse(text).unwrap_err();
        assert!(
            e.starts_with(&format!("task.yaml:{want}")),
            "{text}\n got  {e}\n want task.yaml:{want}"
        );
    }
}

#[test]
fn what_gantry_does_instead_is_said_for_every_field_it_does_not_act_on() {
    let s = parse(
        "run: x\nservice:\n  replicas: 2\nevent_callback: echo hi\ninputs: {s3://b: 10}\nconfig: {}\nresources:\n  ports: 8080\n  autostop: 10\n  labels: {a: b}\n  network_tier: best\n  accelerator_args: {tpu_vm: true}\n",
    )
    .unwrap();
    let fields: Vec<&str> = s
        .ignored
        .iter()
        .map(|i| i.split(": ").next().unwrap())
        .collect();
    assert_eq!(
        fields,
        [
            "config",
            "event_callback",
            "inputs",
            "resources.ports",
            "resources.network_tier",
            "resources.labels",
            "resources.accelerator_args"
        ]
    );
    for i in &s.ignored {
        let (_, instead) = i.split_once(": ").unwrap();
        assert!(instead.len() > 20, "{i}: says what gantry does instead");
    }
    assert_eq!(s.idle_window_s, Some(600.0), "autostop: 10 is honoured");
    // `service` is honoured (`gantry serve up`), its replicas on `resources.ports`.
    let svc = s.service.expect("the service section read");
    assert_eq!(
        (svc.min_replicas, svc.max_replicas, svc.port),
        (2, 2, Some(8080))
    );
}

/// `autostop` in each of SkyPilot's forms is the job's own idle window for reclaim (at least a
/// minute); what has no meaning for gantry in it is noted, and a bad value is refused there.
#[test]
fn autostop_is_the_jobs_own_idle_window() {
    let window = |v: &str| {
        parse(&format!("run: x\nresources:\n  autostop: {v}\n"))
            .map(|s| (s.idle_window_s, s.ignored))
    };
    assert_eq!(window("true").unwrap().0, Some(300.0));
    assert_eq!(window("10").unwrap().0, Some(600.0));
    assert_eq!(window("'1h'").unwrap().0, Some(3600.0));
    assert_eq!(window("0").unwrap().0, Some(60.0), "at least a minute");
    let (w, notes) = window("{idle_minutes: 2, down: true}").unwrap();
    assert_eq!(w, Some(120.0));
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("resources.autostop.down: ")),
        "{notes:?}"
    );
    let (w, notes) = window("false").unwrap();
    assert_eq!(w, None);
    assert!(
        notes[0].contains("the fleet's idle reclaim still applies"),
        "{notes:?}"
    );
    let e = window("soon").unwrap_err();
    assert!(
        e.starts_with("task.yaml:3:3: `resources.autostop`: `soon`: expected idle minutes"),
        "{e}"
    );
    let e = window("{idle: 3}").unwrap_err();
    assert!(
        e.contains("unknown field `idle` (allowed: idle_minutes, down, wait_for, hook)"),
        "{e}"
    );
}
