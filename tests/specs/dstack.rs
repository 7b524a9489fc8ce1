//! dstack task files (`type: task`): translated into gantry's spec with nothing dropped
//! unsaid, resolved against a fleet, refused at the field where gantry cannot do what they say,
//! and run for real: commands as one bash script that stops at the first failure.

use crate::support::fleets as common;

use gantry::model::*;
use gantry::spec;

fn fleet() -> Fleet {
    let mut b = FleetBuilder::new();
    for (provider, region, name, vram) in [
        ("aws", "us-east-1", "A100", 40_960),
        ("gcp", "us-central1", "H100", 81_559),
        ("aws", "us-east-1", "A10G", 23_028),
    ] {
        let m = b.model(name, vram, None).unwrap();
        common::one_node_pool(&mut b, provider, region, name, m, CapacityType::OnDemand);
    }
    b.build()
}

fn parse(text: &str) -> Result<spec::JobSpec, String> {
    spec::parse("train.dstack.yml", text.as_bytes()).map_err(|e| e.to_string())
}

#[test]
fn a_dstack_task_becomes_the_same_request() {
    let s = parse(
        r#"type: task
name: train
nodes: 2
env:
  - HF_TOKEN
  - MODEL=llama
commands:
  - pip install -r requirements.txt
  - torchrun --nnodes=$DSTACK_NODES_NUM train.py
resources:
  gpu: A100:8
  cpu: 32..
  memory: 256GB..
  disk: 500GB
spot_policy: auto
max_price: 40
max_duration: 2h
"#,
    )
    .unwrap();
    assert_eq!(s.name.as_deref(), Some("train"));
    assert_eq!(s.nodes, 2);
    assert_eq!(
        s.run.as_deref(),
        Some("set -e\npip install -r requirements.txt\ntorchrun --nnodes=$DSTACK_NODES_NUM train.py\n")
    );
    assert_eq!(s.envs.get("MODEL").map(String::as_str), Some("llama"));
    assert_eq!(s.unset, ["env.HF_TOKEN"], "a bare name is given at submit");
    assert_eq!((s.cpu_milli, s.mem_mib), (32_000, 256 * 1024));
    assert!(s.use_spot);
    assert_eq!(s.max_price_per_hour, Some(40.0));
    assert_eq!(s.time_limit_s, Some(7200.0));
    assert!(s.ignored.iter().any(|i| i.starts_with("resources.disk: ")));
    let mut s = s;
    s.unset.clear();
    let r = s.to_request(&fleet()).unwrap();
    let f = fleet();
    assert_eq!((r.nodes, r.gpu), (2, GpuRequest::Whole(8)));
    assert_eq!(
        r.models,
        ModelChoice::AnyOf(vec![f.model_by_name("A100").unwrap()])
    );
}

#[test]
fn gpu_memory_and_count_ranges_are_the_models_and_shapes_that_meet_them() {
    let f = fleet();
    let s = parse("type: task\ncommands: [python x.py]\nresources:\n  gpu: 24GB..:1..2\n").unwrap();
    let shapes = s.to_requests(&f).unwrap();
    let gpus: Vec<GpuRequest> = shapes.iter().map(|r| r.gpu).collect();
    assert_eq!(gpus, [GpuRequest::Whole(2), GpuRequest::Whole(1)]);
    // At least 24 GB, as names round it: the A10G's 23,028 MiB counts.
    assert_eq!(shapes[0].vram_mib, (24.0 * 1024.0 * 0.9) as u32);
    let s = parse("type: task\ncommands: [x]\nresources:\n  gpu: 40GB..:8\n").unwrap();
    let r = s.to_request(&f).unwrap();
    assert_eq!(r.vram_mib, (40.0 * 1024.0 * 0.9) as u32);
    assert_eq!(r.models, ModelChoice::Any);
}

#[test]
fn backends_and_regions_are_where_it_may_run() {
    let f = fleet();
    let pool = |n: &str| {
        (0..f.pools.len() as u32)
            .map(PoolId)
            .find(|&p| f.pool(p).instance_type == n)
            .unwrap()
    };
    let s =
        parse("type: task\ncommands: [x]\nbackends: [aws, gcp]\nresources:\n  gpu: A100,H100:8\n")
            .unwrap();
    let r = s.to_request(&f).unwrap();
    assert_eq!(r.pools, Some(vec![pool("A100"), pool("H100")]));
    let s =
        parse("type: task\ncommands: [x]\nbackends: [gcp]\nresources:\n  gpu: A100:8\n").unwrap();
    let e = s.to_request(&f).unwrap_err().to_string();
    assert!(e.contains("none of the GPUs asked for is there"), "{e}");
}

#[test]
fn what_gantry_cannot_do_is_refused_at_the_field() {
    let cases = [
        (
            "type: service\nport: 80\ncommands: [x]\n",
            "1:1: `type`: `service`: gantry runs dstack tasks",
        ),
        (
            "type: task\ncommands: [x]\npriority: 50\n",
            "3:1: `priority`: not supported: dstack's numeric priority",
        ),
        (
            "type: task\ncommands: [x]\nvolumes:\n  - /data:/data\n",
            "3:1: `volumes`: not supported",
        ),
        (
            "type: task\ncommands: [x]\nfiles:\n  - ./a:/a\n",
            "3:1: `files`: not supported",
        ),
        (
            "type: task\ncommands: [x]\nschedule:\n  cron: '0 * * * *'\n",
            "3:1: `schedule`: not supported",
        ),
        (
            "type: task\nname: x\n",
            "1:1: `commands`: a task needs `commands`",
        ),
        (
            "type: task\ncommands: [x]\nspot_policy: sometimes\n",
            "3:1: `spot_policy`: `sometimes`; allowed: spot, on-demand, auto",
        ),
        (
            "type: task\ncommands: [x]\nresources:\n  gpu: H100:1..32\n",
            "4:3: `resources.gpu`: GPU count 1..32",
        ),
        (
            "type: task\ncommands: [x]\nresources:\n  gpus: H100\n",
            "4:3: unknown field `resources.gpus`; did you mean `gpu`?",
        ),
        ("type: task\ncommands: [x]\nimage: ami-1\n", ""),
    ];
    for (text, want) in cases {
        match parse(text) {
            Err(e) => assert!(
                e.starts_with(&format!("train.dstack.yml:{want}")),
                "{text}\n got  {e}\n want train.dstack.yml:{want}"
            ),
            // An image is a container image in dstack: `ami-1` is one by name.
            Ok(s) => assert_eq!((want, s.image.as_deref()), ("", Some("ami-1"))),
        }
    }
}

#[test]
fn a_repository_url_is_the_jobs_directory_at_its_branch() {
    let s = parse(
        "type: task\ncommands: [make]\nrepos:\n  - url: https://github.com/example/repo.git\n    branch: dev\n",
    )
    .unwrap();
    let g = s.git_workdir.unwrap();
    assert_eq!(
        (g.url.as_str(), g.reference.as_deref()),
        ("https://github.com/example/repo.git", Some("dev"))
    );
    let s = parse("type: task\ncommands: [make]\nrepos: [.]\n").unwrap();
    assert_eq!(s.workdir.as_deref(), Some("."));
}
