//! Job specs: real-world-style SkyPilot and gantry files that must parse and resolve, broken
//! files with their exact messages, and fuzzing for panics.

use gantry::model::*;
use gantry::spec::{self, GpuCount};
use proptest::prelude::*;

fn read(path: &str) -> Vec<u8> {
    std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fleet() -> Fleet {
    let mut b = FleetBuilder::new();
    let geo = Some(MigGeometry { slice_gb: 10 });
    for (name, vram, mig) in [
        ("H100", 81_559, geo.clone()),
        ("A100", 40_960, None),
        ("A100-80GB", 81_920, geo),
        ("L4", 23_034, None),
        ("A10G", 23_028, None),
    ] {
        let m = b.model(name, vram, mig).unwrap();
        let p = b
            .pool(PoolSpec {
                provider: "aws",
                region: "us-east-1",
                zone: "us-east-1a",
                name,
                instance_type: name,
                model: Some(m),
                gpus_per_node: 8,
                cpu_milli: 192_000,
                mem_mib: 2 << 20,
                capacity: CapacityType::OnDemand,
                price_per_hour: 50.0,
            })
            .unwrap();
        b.node(p, &format!("{name}-0"), None, None, 1).ok();
        b.node(p, &format!("{name}-1"), None, None, 0).unwrap();
    }
    b.build()
}

#[test]
fn every_ok_fixture_parses_and_resolves() {
    let fleet = fleet();
    let mut n = 0;
    for entry in std::fs::read_dir("tests/specs/ok").unwrap() {
        let path = entry.unwrap().path();
        let name = path.display().to_string();
        let mut spec = spec::parse(&name, &read(&name)).unwrap_or_else(|e| panic!("{e}"));
        if let Some(first) = spec.unset.first() {
            // Values left to the submitter: refused until given (`--env`), then it resolves.
            let e = spec.to_request(&fleet).unwrap_err().to_string();
            assert!(e.contains(first.as_str()), "{name}: {e}");
            spec.unset.clear();
        }
        let req = spec
            .to_request(&fleet)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(req.validate().is_ok(), "{name}");
        n += 1;
    }
    assert!(n >= 7, "fixtures found: {n}");
}

#[test]
fn fixtures_mean_what_they_say() {
    let fleet = fleet();
    let id = |n: &str| fleet.model_by_name(n).unwrap();
    let parse = |f: &str| spec::parse(f, &read(f)).unwrap();

    let d = parse("tests/specs/ok/skypilot_distributed.yaml");
    let r = d.to_request(&fleet).unwrap();
    assert_eq!((r.nodes, r.gpu, r.spot_ok), (2, GpuRequest::Whole(8), true));
    assert_eq!(r.models, ModelChoice::AnyOf(vec![id("A100")]));

    let mut s = parse("tests/specs/ok/skypilot_serve.yaml");
    // Each field gantry does not act on is named with what it does instead.
    let noted: Vec<&str> = s
        .ignored
        .iter()
        .map(|i| i.split(": ").next().unwrap())
        .collect();
    assert_eq!(noted, ["resources.ports", "resources.disk_tier"]);
    // The service section is read (`gantry serve up`): two replicas on `resources.ports`.
    let svc = s.service.clone().expect("its service section");
    assert_eq!(
        (svc.min_replicas, svc.max_replicas, svc.port),
        (2, 2, Some(8081))
    );
    assert_eq!(svc.readiness.path, "/v1/models");
    assert_eq!(s.envs.get("HF_TOKEN"), None);
    assert_eq!(
        s.unset,
        ["envs.HF_TOKEN"],
        "an unset SkyPilot env must be given at submit, as SkyPilot requires"
    );
    assert_eq!(
        s.envs.get("MAX_MODEL_LEN").map(String::as_str),
        Some("4096")
    );
    assert!(s.to_request(&fleet).is_err());
    s.unset.clear();
    let r = s.to_request(&fleet).unwrap();
    assert_eq!(
        r.models,
        ModelChoice::AnyOf(vec![id("L4"), id("A10G"), id("A100")])
    );

    let i = parse("tests/specs/ok/skypilot_infra.yaml");
    assert_eq!(
        (
            i.infra.cloud.as_deref(),
            i.infra.region.as_deref(),
            i.infra.zone.as_deref()
        ),
        (Some("aws"), Some("us-east-1"), None)
    );
    assert_eq!(
        (i.cpu_milli, i.mem_mib, i.disk_gb),
        (32_000, 262_144, Some(500))
    );
    assert_eq!(
        i.to_request(&fleet).unwrap().models,
        ModelChoice::Prefer(vec![id("H100"), id("A100-80GB")])
    );

    let g = parse("tests/specs/ok/gantry_full.yaml");
    assert_eq!(
        (
            g.team.as_deref(),
            g.project.as_deref(),
            g.priority.as_deref()
        ),
        (Some("ml-research"), Some("llama-4"), Some("production"))
    );
    let c = g.checkpoint.clone().unwrap();
    assert_eq!(
        (
            c.dir.as_deref(),
            c.interval_s,
            c.signal.0.as_str(),
            c.grace_s
        ),
        (Some("/ckpt/llama"), Some(1800.0), "SIGUSR1", 120.0)
    );
    assert_eq!(
        (g.vram_mib, g.time_limit_s, g.max_price_per_hour),
        (Some(81_920), Some(43_200.0), Some(400.0))
    );
    assert_eq!(g.envs.get("LR").map(String::as_str), Some("0.0003"));

    let f = parse("tests/specs/ok/gantry_fraction.yaml");
    assert_eq!(
        f.accelerators.as_ref().unwrap().options[0].count,
        GpuCount::Fraction(500)
    );
    assert_eq!(f.to_request(&fleet).unwrap().gpu, GpuRequest::Fraction(500));

    let m = parse("tests/specs/ok/gantry_mig.yaml");
    assert!(!m.preemptible);
    assert_eq!(
        m.to_request(&fleet).unwrap().gpu,
        GpuRequest::Mig(MigProfile::parse("3g.40gb").unwrap())
    );
}

#[test]
fn broken_fixtures_say_where_and_what() {
    let cases = [
        ("unknown_field", "2:1: unknown field `nmae`; did you mean `name`?"),
        ("unknown_nested", "2:3: unknown field `resources.acelerators`; did you mean `accelerators`?"),
        ("zero_gpus", "2:3: `resources.accelerators`: `H100:0` asks for no GPU; leave `accelerators` out for CPU-only work"),
        ("negative_nodes", "1:1: `num_nodes`: -2 is not a whole number in 0..=1000000"),
        ("malformed", "2:1: did not find expected ',' or ']'"),
        ("control_name", "1:1: `name`: control character '\\u{7}' is not allowed here"),
        ("bad_signal", "2:3: `checkpoint.signal`: unknown signal `SIGSTOP`; allowed: SIGTERM, SIGINT, SIGUSR1, SIGUSR2, SIGHUP, SIGQUIT"),
        ("bad_duration", "1:1: `time_limit`: `forever` is not a duration; expected e.g. 90s, 30m, 12h, 1h30m"),
        ("bad_mig", "3:1: `mig`: `9g.90gb` is not a MIG profile"),
        ("infra_and_cloud", "2:3: `resources.infra`: give either `infra` or `cloud`/`region`/`zone`, not both"),
        ("file_mounts", "3:3: `file_mounts` entry `/data`: `store: azure`: gantry fetches S3, GCS and S3-compatible buckets"),
    ];
    for (name, want) in cases {
        let path = format!("tests/specs/bad/{name}.yaml");
        let err = spec::parse(&path, &read(&path)).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{path}:{want}")),
            "{name}:\n got  {err}\n want {path}:{want}"
        );
    }
}

#[test]
fn resolving_against_the_fleet_names_what_is_missing() {
    let fleet = fleet();
    let s = spec::parse("t.yaml", b"resources:\n  accelerators: H10:8\n").unwrap();
    assert_eq!(
        s.to_request(&fleet).unwrap_err().to_string(),
        "unknown GPU model `H10`; did you mean `H100`? (this fleet has: H100, A100, A100-80GB, L4, A10G)"
    );
    // A model gantry knows that this fleet lacks is no typo: said so, without a suggestion.
    let s = spec::parse("t.yaml", b"resources:\n  accelerators: B200:8\n").unwrap();
    assert_eq!(
        s.to_request(&fleet).unwrap_err().to_string(),
        "no pool of this fleet has `B200` GPUs (this fleet has: H100, A100, A100-80GB, L4, A10G)"
    );
    // On a fleet without GPUs, that is what is said (not an empty list).
    let cpus = FleetBuilder::new().build();
    let s = spec::parse("t.yaml", b"resources:\n  accelerators: A100:1\n").unwrap();
    assert_eq!(
        s.to_request(&cpus).unwrap_err().to_string(),
        "no pool of this fleet has `A100` GPUs (this fleet has no GPUs: a CPU job asks for `cpus` alone)"
    );
    let s = spec::parse(
        "t.yaml",
        b"num_nodes: 2\nresources:\n  accelerators: L4:0.5\n",
    )
    .unwrap();
    assert!(s
        .to_request(&fleet)
        .unwrap_err()
        .to_string()
        .contains("cannot be a 2-node gang"));
    // Other counts are other shapes of the job (they were refused: "same count").
    let s = spec::parse("t.yaml", b"resources:\n  accelerators: {H100: 8, L4: 4}\n").unwrap();
    let shapes: Vec<GpuRequest> = s
        .to_requests(&fleet)
        .unwrap()
        .into_iter()
        .map(|r| r.gpu)
        .collect();
    assert_eq!(shapes, [GpuRequest::Whole(8), GpuRequest::Whole(4)]);
    // As SkyPilot does, options the fleet cannot offer are skipped (the whole job used to be
    // refused for one of them); none left is an error naming them.
    let s = spec::parse(
        "t.yaml",
        b"resources:\n  accelerators: {B200: 8, H100: 8}\n",
    )
    .unwrap();
    let r = s.to_request(&fleet).unwrap();
    assert_eq!(r.gpu, GpuRequest::Whole(8));
    assert_eq!(
        r.models,
        gantry::model::ModelChoice::AnyOf(vec![fleet.model_by_name("H100").unwrap()])
    );
    let s = spec::parse(
        "t.yaml",
        b"resources:\n  accelerators: {B200: 8, GB200: 4}\n",
    )
    .unwrap();
    assert_eq!(
        s.to_request(&fleet).unwrap_err().to_string(),
        "none of `B200`, `GB200` is in this fleet (it has: H100, A100, A100-80GB, L4, A10G)"
    );
    assert!(spec::parse("t.yaml", b"  \n")
        .unwrap_err()
        .to_string()
        .contains("empty"));
    let e = spec::parse("t.yaml", b"name: ok\nrun: \xff\n").unwrap_err();
    assert_eq!((e.line, e.col), (2, 6));
}

fn mutate(text: &str, seed: u64, kind: u8) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return String::new();
    }
    let at = (seed as usize) % chars.len();
    let pool = [
        ':', '-', ' ', '\n', '{', '[', '"', '\'', '0', 'x', '\t', '#', '&', '*', '!', '|', '>',
        '\u{7}',
    ];
    match kind % 4 {
        0 => {
            chars.remove(at);
        }
        1 => chars.insert(at, pool[(seed as usize / 7) % pool.len()]),
        2 => chars[at] = pool[(seed as usize / 13) % pool.len()],
        _ => chars.truncate(at),
    }
    chars.into_iter().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// Any text: an error with a position on line ≥ 1, or a spec — never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,200}") {
        match spec::parse("f.yaml", text.as_bytes()) {
            Ok(s) => { let _ = s.to_request(&fleet()); }
            Err(e) => prop_assert!(e.line >= 1 && e.col >= 1),
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Err(e) = spec::parse("f.yaml", &bytes) {
            prop_assert!(e.line >= 1 && e.col >= 1);
        }
    }

    /// Small edits of real specs (the inputs people actually get wrong).
    #[test]
    fn mutated_fixtures_never_panic(which in 0usize..64, edits in proptest::collection::vec((any::<u64>(), any::<u8>()), 1..4)) {
        let mut files: Vec<_> = std::fs::read_dir("tests/specs/ok").unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        let mut text = std::fs::read_to_string(&files[which % files.len()]).unwrap();
        for (seed, kind) in edits {
            text = mutate(&text, seed, kind);
        }
        match spec::parse("f.yaml", text.as_bytes()) {
            Ok(s) => { let _ = s.to_request(&fleet()); }
            Err(e) => prop_assert!(e.line >= 1 && e.col >= 1 && !e.message.is_empty()),
        }
    }

    /// Batch scripts of random #SBATCH options with random values: a spec or an error at
    /// a line of the script — never a panic (huge counts and times included).
    #[test]
    fn random_batch_scripts_never_panic(opts in proptest::collection::vec((0usize..22, "[a-z0-9:@=,.-]{0,12}|[0-9]{1,20}"), 0..8)) {
        let names = ["--nodes", "-N", "--gres", "--gpus-per-node", "--gpus", "-G", "--gpus-per-task",
            "--ntasks-per-node", "-n", "-c", "--cpus-per-gpu", "--mem", "--mem-per-cpu", "--mem-per-gpu",
            "-t", "--signal", "-A", "-q", "--export", "-D", "-p", "--bogus"];
        let mut text = String::from("#!/bin/bash\n");
        for (i, v) in &opts {
            text.push_str(&format!("#SBATCH {}={v}\n", names[*i]));
        }
        text.push_str("echo hi\n");
        let lines = text.lines().count();
        match spec::parse("f.sbatch", text.as_bytes()) {
            Ok(s) => { let _ = s.to_request(&fleet()); }
            Err(e) => prop_assert!(e.line >= 2 && e.line <= lines && e.col >= 9 && !e.message.is_empty(), "{e}"),
        }
    }
}

#[test]
fn skypilot_forms_that_lost_a_count_or_were_refused() {
    let acc = |text: &str| {
        let s = spec::parse("t.yaml", text.as_bytes()).unwrap_or_else(|e| panic!("{e}"));
        s.accelerators
            .unwrap()
            .options
            .iter()
            .map(|a| (a.model.clone(), a.count))
            .collect::<Vec<_>>()
    };
    // No space after the colon: YAML keys "H100:8" with no value — the count is in the key
    // (it was read as one GPU each).
    assert_eq!(
        acc("resources:\n  accelerators: {H100:8, H200:8}\nrun: x\n"),
        [
            ("H100".to_string(), GpuCount::Whole(8)),
            ("H200".to_string(), GpuCount::Whole(8))
        ]
    );
    assert_eq!(
        acc("resources:\n  accelerators: {H100: 4}\nrun: x\n"),
        [("H100".to_string(), GpuCount::Whole(4))]
    );
    // `gpus` is SkyPilot's newer name for `accelerators`.
    assert_eq!(
        acc("resources:\n  gpus: H100:8\nrun: x\n"),
        [("H100".to_string(), GpuCount::Whole(8))]
    );
    let e = spec::parse(
        "t.yaml",
        b"resources:\n  accelerators: {'H100:8': 4}\nrun: x\n",
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("give the count once"), "{e}");
    // Sizes with units, and the deprecated `spot_recovery`.
    let s = spec::parse(
        "t.yaml",
        b"resources:\n  memory: 32GB+\n  disk_size: 1TB\n  spot_recovery: failover\nrun: x\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((s.mem_mib, s.disk_gb), (32 * 1024, Some(1024)));
    let e = spec::parse("t.yaml", b"resources:\n  memory: 32XB\nrun: x\n")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("t.yaml:2:3") && e.contains("`32XB` is not memory"),
        "{e}"
    );
}

#[test]
fn a_bad_value_is_reported_at_its_own_key() {
    // Before: at the first key of its mapping, under that key's name (`1:1: 'name': …`).
    let err = |name: &str, text: &str| spec::parse(name, text.as_bytes()).unwrap_err().to_string();
    assert_eq!(
        err("t.yaml", "name: test\nnum_nodes: two\nrun: x\n"),
        "t.yaml:2:1: `num_nodes`: expected a whole number, found a string"
    );
    let e = err(
        "t.yaml",
        "name: test\nresources:\n  cpus: 4\n  accelerators: H100:zero\nrun: x\n",
    );
    assert!(
        e.starts_with("t.yaml:4:3: `resources.accelerators`:"),
        "{e}"
    );
    // JSON too (it was always 1:1).
    let e = err("t.json", "{\"name\": \"x\", \"num_nodes\": \"two\"}");
    assert!(e.starts_with("t.json:1:15: `num_nodes`:"), "{e}");
    let e = err(
        "t.json",
        "{\n  \"name\": \"x\",\n  \"resources\": {\"cpus\": 2, \"accelerators\": \"H100:zero\"}\n}\n",
    );
    assert!(
        e.starts_with("t.json:3:28: `resources.accelerators`:"),
        "{e}"
    );
}

/// `infra` (or `cloud`/`region`/`zone`) is where the job may run: the pools there, `k8s` for
/// Kubernetes as SkyPilot writes it; a place the fleet does not have, or one without the GPUs
/// asked for, is refused with what the fleet has.
#[test]
fn infra_limits_the_pools_and_says_where_the_fleet_is() {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, None).unwrap();
    let l4 = b.model("L4", 23_034, None).unwrap();
    let mut pool = |provider: &'static str, region: &'static str, zone: &'static str, model| {
        b.pool(PoolSpec {
            provider,
            region,
            zone,
            name: "p",
            instance_type: "x",
            model: Some(model),
            gpus_per_node: 8,
            cpu_milli: 64_000,
            mem_mib: 1 << 20,
            capacity: CapacityType::OnDemand,
            price_per_hour: 10.0,
        })
        .unwrap()
    };
    let east = pool("aws", "us-east-1", "us-east-1a", h100);
    let west = pool("aws", "us-west-2", "us-west-2b", h100);
    let k8s = pool("kubernetes", "k8s", "dc1", l4);
    let fleet = b.build();
    let resolve = |text: &str| {
        spec::parse("job.yaml", text.as_bytes())
            .unwrap()
            .to_request(&fleet)
            .map(|r| r.pools)
            .map_err(|e| e.to_string())
    };
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n"),
        Ok(None)
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  infra: aws\n"),
        Ok(Some(vec![east, west]))
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  cloud: AWS\n  region: us-west-2\n"),
        Ok(Some(vec![west]))
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: L4:1\n  infra: k8s\n"),
        Ok(Some(vec![k8s]))
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  infra: gcp/us-central1\n"),
        Err("infra gcp/us-central1: no pool of this fleet is there (its pools are in: aws/us-east-1/us-east-1a, aws/us-west-2/us-west-2b, kubernetes/k8s/dc1)".into())
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  infra: k8s\n"),
        Err("infra kubernetes: none of the GPUs asked for is there (its pools have: L4)".into())
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  instance_type: x\n  infra: aws/us-west-2\n"),
        Ok(Some(vec![west]))
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: L4:1\n  image_id: docker:pytorch:25\n"),
        Ok(Some(vec![k8s]))
    );
    assert_eq!(
        resolve("run: x\nresources:\n  accelerators: H100:1\n  image_id: docker:pytorch:25\n"),
        Err("image_id docker:pytorch:25 (pools that run images): none of the GPUs asked for is there (its pools have: L4)".into())
    );
    assert_eq!(
        resolve("run: x\nresources:\n  infra: aws\n  image_id: docker:pytorch:25\n"),
        Err("image_id docker:pytorch:25: none of this fleet's pools where the job may run runs container images (Kubernetes pools do, and local or SSH pools with container_runtime = \"docker\" or \"podman\"); leave image_id out to run on the hosts as they are".into())
    );
    let ami = spec::parse("job.yaml", b"run: x\nresources:\n  image_id: ami-0abc\n").unwrap_err();
    assert!(
        ami.to_string().starts_with(
            "job.yaml:3:3: `resources.image_id`: `ami-0abc`: gantry runs container images"
        ) && ami
            .to_string()
            .ends_with("[pools.ec2] image = \"ami-0abc\")"),
        "{ami}"
    );
    // A bare container name (a RunPod template's) is told how to write it.
    let bare = spec::parse(
        "job.yaml",
        b"run: x\nresources:\n  image_id: runpod/pytorch:2.4.0-py3.11\n",
    )
    .unwrap_err();
    assert!(
        bare.to_string()
            .ends_with("write image_id: docker:runpod/pytorch:2.4.0-py3.11 (a bare name is the image only where the cloud runs containers: Kubernetes, RunPod, Vast)"),
        "{bare}"
    );
    // On RunPod (whose pods are containers) it is the image, as SkyPilot runs it there.
    let on_runpod = spec::parse(
        "job.yaml",
        b"run: x\nresources:\n  cloud: runpod\n  image_id: runpod/pytorch:2.4.0-py3.11\n",
    )
    .unwrap();
    assert_eq!(
        on_runpod.image.as_deref(),
        Some("runpod/pytorch:2.4.0-py3.11")
    );
    assert_eq!(
        resolve("run: x\nresources:\n  instance_type: p4d.24xlarge\n"),
        Err("infra instance type p4d.24xlarge: no pool of this fleet is there (its pools are in: aws/us-east-1/us-east-1a x, aws/us-west-2/us-west-2b x, kubernetes/k8s/dc1 x)".into())
    );
}

/// A job's `file_mounts` go only to pools whose declared `tools` can do them (a pool that
/// declares none is not known to lack any); where no pool can, the job is refused at
/// `file_mounts`, naming the mount, what it needs and the pools that have it.
#[test]
fn mounts_go_to_pools_whose_tools_can_do_them_or_are_refused_at_the_field() {
    let mut b = FleetBuilder::new();
    let l4 = b.model("L4", 23_034, None).unwrap();
    let mut pools = Vec::new();
    for name in ["copiers", "mounters", "unknown"] {
        let p = b
            .pool(PoolSpec {
                provider: "aws",
                region: "us-east-1",
                zone: "us-east-1a",
                name,
                instance_type: name,
                model: Some(l4),
                gpus_per_node: 1,
                cpu_milli: 8_000,
                mem_mib: 32 << 10,
                capacity: CapacityType::OnDemand,
                price_per_hour: 1.0,
            })
            .unwrap();
        b.node(p, &format!("{name}-0"), None, None, 0).unwrap();
        pools.push(p);
    }
    b.declare_tools(pools[0], vec!["aws".into(), "curl".into()]);
    b.declare_tools(pools[1], vec!["rclone".into(), "fuse".into()]);
    let fleet = b.build();
    let pools_for = |yaml: &str| {
        spec::parse("job.yaml", yaml.as_bytes())
            .unwrap()
            .to_request(&fleet)
            .map(|r| r.pools)
            .map_err(|e| e.to_string())
    };
    let copy = "run: x\nresources: {accelerators: L4}\nfile_mounts:\n  /data: s3://b/data\n";
    // aws copies, rclone copies too; the undeclared pool may.
    assert_eq!(pools_for(copy), Ok(None));
    let mount = "run: x\nresources: {accelerators: L4}\nfile_mounts:\n  /ckpt: {source: s3://ck, mode: MOUNT}\n";
    assert_eq!(pools_for(mount), Ok(Some(vec![pools[1], pools[2]])));
    let gcs = "run: x\nresources: {accelerators: L4}\nfile_mounts:\n  /in: {source: gs://b/in, mode: MOUNT}\n";
    assert_eq!(pools_for(gcs), Ok(Some(vec![pools[1], pools[2]])));
    // Only the declared pools are left: refused, naming what would do.
    let only = "run: x\nresources: {accelerators: L4, instance_type: copiers}\nfile_mounts:\n  /local: ./here\n  /ckpt: {source: s3://ck, mode: MOUNT_CACHED}\n";
    assert_eq!(
        pools_for(only),
        Err("`/ckpt`: mounting s3://ck needs rclone with fuse, mount-s3 or goofys on the node, and no pool where the job may run has it (their `tools` in the fleet file); pools that have it: mounters".to_string())
    );
    let e = spec::parse("job.yaml", only.as_bytes())
        .unwrap()
        .to_request(&fleet)
        .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("file_mounts"));
}

/// A pool's `tools` are checked where they are written and reach the fleet the scheduler uses.
#[test]
fn a_pools_tools_are_checked_and_reach_the_fleet() {
    let text =
        |tools: &str| crate::support::daemon::local_fleet("a", &format!("tools = {tools}\n"));
    let cfg =
        gantry::config::fleet::parse("fleet.toml", &text(r#"["aws", "rclone", "fuse"]"#)).unwrap();
    let fleet = gantry::config::fleet::fleet_of(&cfg);
    assert_eq!(
        fleet.tools_of(PoolId(0)),
        Some(&["aws".to_string(), "rclone".to_string(), "fuse".to_string()][..])
    );
    let e = gantry::config::fleet::parse("fleet.toml", &text(r#"["aws", "s3fs"]"#))
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("fleet.toml:6:1:") && e.contains("tools: `s3fs` is not a tool gantry knows for file_mounts; allowed: aws, gcloud, gsutil, rclone, fuse, mount-s3, goofys, gcsfuse, curl, wget"),
        "{e}"
    );
}
