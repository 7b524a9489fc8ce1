//! End-to-end: the real `gantry` binary, its output formats, errors and exit codes.

use std::process::Command;

fn gantry(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .output()
        .expect("run gantry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const NODES: &str = "tests/data/openb_nodes.csv";
const PODS: &str = "tests/data/openb_pods.csv";

#[test]
fn openb_replay_json_has_the_promised_fields_and_gantry_beats_fgd() {
    let (code, out, err) = gantry(&[
        "replay",
        "openb",
        "--nodes",
        NODES,
        "--pods",
        PODS,
        "--seeds",
        "42",
        "--policy",
        "fgd,gantry",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let rows = v.as_array().expect("an array, one object per policy");
    let get = |name: &str, field: &str| {
        rows.iter()
            .find(|r| r["policy"] == name)
            .and_then(|r| r[field].as_f64())
            .unwrap_or_else(|| panic!("{name}.{field}"))
    };
    for p in ["fgd", "gantry"] {
        for f in [
            "alloc_100_mean",
            "alloc_130_mean",
            "alloc_100_std",
            "alloc_130_std",
            "frag_90_mean",
        ] {
            let x = get(p, f);
            assert!((0.0..=100.0).contains(&x), "{p}.{f} = {x}");
        }
    }
    assert!(get("gantry", "alloc_130_mean") > get("fgd", "alloc_130_mean"));
    assert!(get("gantry", "alloc_100_mean") > get("fgd", "alloc_100_mean"));
}

#[test]
fn openb_replay_table_names_every_policy() {
    let (code, out, err) = gantry(&[
        "replay",
        "openb",
        "--nodes",
        NODES,
        "--pods",
        PODS,
        "--seeds",
        "7",
        "--inflate",
        "0.5",
    ]);
    assert_eq!(code, 0, "{err}");
    for p in ["random", "spread", "best-fit", "packing", "fgd", "gantry"] {
        assert!(
            out.lines().any(|l| l.starts_with(p)),
            "{p} missing in\n{out}"
        );
    }
}

#[test]
fn bad_trace_files_fail_with_position_and_field() {
    let cases = [
        (
            "tests/data/bad_negative_pods.csv",
            "tests/data/bad_negative_pods.csv:3:4: field `cpu_milli`: is negative (-4000); expected an integer in 0..=10000000",
        ),
        (
            "tests/data/bad_column_pods.csv",
            "tests/data/bad_column_pods.csv:1:6: unknown column `colour`; allowed columns: name, cpu_milli, memory_mib, num_gpu, gpu_milli, gpu_spec, qos, pod_phase, creation_time, deletion_time, scheduled_time",
        ),
    ];
    for (pods, want) in cases {
        let (code, _, err) = gantry(&[
            "replay", "openb", "--nodes", NODES, "--pods", pods, "--seeds", "1",
        ]);
        assert_eq!(code, 2);
        assert_eq!(err.trim(), format!("error: {want}"));
    }
    let (code, _, err) = gantry(&[
        "replay",
        "openb",
        "--nodes",
        "tests/data/bad_ragged_nodes.csv",
        "--pods",
        PODS,
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "error: tests/data/bad_ragged_nodes.csv:3:15: expected 5 fields like the header, found 3"
    );
    let (code, _, err) = gantry(&["replay", "openb", "--nodes", "no/such.csv", "--pods", PODS]);
    assert_eq!(code, 2);
    assert!(
        err.contains("no/such.csv:0:0: cannot read the file"),
        "{err}"
    );
}

#[test]
fn bad_flags_are_explained() {
    let (code, _, err) = gantry(&[
        "replay", "openb", "--nodes", NODES, "--pods", PODS, "--policy", "tetris",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains(
            "unknown policy `tetris`; allowed: random, spread, best-fit, packing, fgd, gantry"
        ),
        "{err}"
    );
    let (code, _, err) = gantry(&[
        "replay", "openb", "--nodes", NODES, "--pods", PODS, "--seeds", "9..3",
    ]);
    assert_eq!(code, 2);
    assert!(err.contains("--seeds `9..3`"), "{err}");
}

#[test]
fn bench_sched_json_has_the_promised_fields() {
    let (code, out, err) = gantry(&[
        "bench",
        "sched",
        "--nodes",
        "600",
        "--pending",
        "3000",
        "--gangs",
        "3",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    for f in [
        "placements_per_sec",
        "baseline_placements_per_sec",
        "gang512_p99_ms",
        "p50_us",
        "p99_us",
        "cycle_ms",
    ] {
        assert!(v[f].as_f64().is_some_and(|x| x >= 0.0), "{f} in {v}");
    }
    assert_eq!(v["nodes"], 600);
    assert_eq!(v["gpus"], 4800);
}

/// `bench cli` times the real binary's calls against a daemon holding jobs: each call must
/// succeed for a figure to come out.
#[test]
fn bench_cli_times_real_calls_against_a_daemon() {
    let (code, out, err) = gantry(&["bench", "cli", "--calls", "2", "--jobs", "5", "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["jobs_held"], 5, "{v}");
    for kind in ["list", "submit", "process_only"] {
        for f in ["p50_ms", "p99_ms", "max_ms"] {
            assert!(
                v[kind][f].as_f64().is_some_and(|x| x > 0.0),
                "{kind}.{f} in {v}"
            );
        }
    }
}

/// `bench api --floor` measures the daemon and, in the same run, the same clients against a
/// server that answers at once; every acknowledged job is in the journal.
#[test]
fn bench_api_measures_the_daemon_beside_its_floor() {
    let (code, out, err) = gantry(&[
        "bench",
        "api",
        "--jobs",
        "200",
        "--clients",
        "4",
        "--floor",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["jobs"], 200, "{v}");
    assert_eq!(v["journaled"], 200, "{v}");
    assert!(
        v["durable_submits_per_sec"]
            .as_f64()
            .is_some_and(|x| x > 0.0),
        "{v}"
    );
    let floor = &v["floor"];
    for f in ["submits_per_sec", "p50_ms", "p99_ms"] {
        assert!(
            floor[f].as_f64().is_some_and(|x| x > 0.0),
            "floor.{f} in {v}"
        );
    }
}

/// The Slurm bench runs end to end on a small cluster: every node read, gantry's runs
/// followed, the cluster's own jobs' GPUs held out by the daemon.
#[test]
fn bench_slurm_reads_the_scaled_cluster_and_the_daemon_holds_its_gpus() {
    let (code, out, err) = gantry(&[
        "bench",
        "slurm",
        "--nodes",
        "50",
        "--jobs",
        "500",
        "--refreshes",
        "2",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(
        (v["nodes"].as_u64(), v["gpus"].as_u64()),
        (Some(50), Some(400))
    );
    assert_eq!(v["api"], "v0.0.38");
    // Three 2-GPU jobs on each node, gantry's on every tenth (in the daemon's part all are
    // the cluster's own).
    assert_eq!(
        (v["running_jobs"].as_u64(), v["gantry_runs"].as_u64()),
        (Some(150), Some(5))
    );
    assert_eq!(v["foreign_gpus_held"], 300);
    for f in [
        "read_p50_ms",
        "cold_refresh_ms",
        "refresh_p50_ms",
        "first_view_s",
    ] {
        assert!(v[f].as_f64().is_some_and(|x| x > 0.0), "{f} in {v}");
    }
}

/// The Kubernetes bench reads the whole cluster from its child test server: every GPU the
/// pods hold is found; then a pool's runner starts a pod on each of 10 nodes; then two rounds
/// of jobs run through a daemon's state over the cluster, each to its end. Only a build with
/// the test double has it (`.ci/run` runs this with `--features testkit`).
#[cfg(feature = "testkit")]
#[test]
fn bench_kube_reads_every_node_and_pod() {
    let (code, out, err) = gantry(&[
        "bench",
        "kube",
        "--nodes",
        "20",
        "--pods",
        "300",
        "--binds",
        "10",
        "--rounds",
        "2",
        "--round-jobs",
        "40",
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(
        (v["nodes"].as_u64(), v["gpus"].as_u64()),
        (Some(20), Some(160))
    );
    assert_eq!(v["gpu_pods"], 140);
    assert_eq!(v["held"], 140);
    assert!(v["ready_s"].as_f64().is_some_and(|x| x > 0.0), "{v}");
    assert_eq!(v["binds"], 10);
    assert!(v["bind_s"].as_f64().is_some_and(|x| x > 0.0), "{v}");
    let rounds = v["rounds"].as_array().expect("rounds");
    assert_eq!(rounds.len(), 2, "{v}");
    for (i, r) in rounds.iter().enumerate() {
        assert_eq!(
            (r["round"].as_u64(), r["jobs"].as_u64()),
            (Some(i as u64 + 1), Some(40))
        );
        assert!(r["rss_mib"].as_f64().is_some_and(|x| x > 0.0), "{r}");
    }
}

/// A build without the test double (every release) says how to get `bench kube`.
#[cfg(not(feature = "testkit"))]
#[test]
fn bench_kube_says_which_build_has_it() {
    let (code, _, err) = gantry(&["bench", "kube", "--nodes", "2"]);
    assert_ne!(code, 0);
    assert!(err.contains("--features testkit"), "{err}");
}

#[test]
fn philly_replay_reports_every_policy_and_what_it_skipped() {
    let args = [
        "replay",
        "philly",
        "--trace",
        "tests/data/philly_small.csv",
        "--vcs",
        "tests/data/philly_small_vc.csv",
    ];
    let (code, out, err) = gantry(&[&args[..], &["--output", "json"]].concat());
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    let rows = v.as_array().expect("one object per policy");
    assert_eq!(rows.len(), 4);
    let get = |p: &str, f: &str| {
        rows.iter()
            .find(|r| r["policy"] == p)
            .and_then(|r| r[f].as_f64())
            .unwrap()
    };
    for p in ["fifo", "sjf", "srtf", "gantry"] {
        for f in [
            "avg_jct_s",
            "avg_queue_s",
            "p99_queue_s",
            "lower_bound_jct_s",
        ] {
            assert!(get(p, f) >= 0.0, "{p}.{f}");
        }
        assert!(get(p, "avg_jct_s") >= get(p, "lower_bound_jct_s") - 1e-6);
    }
    // The short job behind the 10-hour job on vcA waits for it under FIFO, not under gantry.
    assert!(get("gantry", "avg_queue_s") < get("fifo", "avg_queue_s") / 2.0);
    let (code, out, err) = gantry(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("5 jobs on 2 VCs (24 GPUs); skipped 1 outside the window, 1 in VCs without a size, 1 larger than their VC"), "{out}");
}

#[test]
fn bad_philly_rows_name_the_field() {
    let (code, _, err) = gantry(&[
        "replay",
        "philly",
        "--trace",
        "tests/data/bad_philly.csv",
        "--vcs",
        "tests/data/philly_small_vc.csv",
    ]);
    assert_eq!(code, 2);
    assert_eq!(
        err.trim(),
        "error: tests/data/bad_philly.csv:2:21: field `duration`: `abc` is not a number of seconds in 0..=1e9"
    );
    let (code, _, err) = gantry(&[
        "replay",
        "philly",
        "--from",
        "2017-12-01",
        "--to",
        "2017-10-01",
    ]);
    assert_eq!(code, 2);
    assert!(
        err.contains("--to 2017-10-01 must be after --from 2017-12-01"),
        "{err}"
    );
}

/// `spec check --fleet`: each shape of the job on that fleet, with the pools it may land in
/// (its `infra`, its models, its spot policy held to), or the fleet's refusal at its field.
#[test]
fn spec_check_against_a_fleet_shows_each_shape_and_its_pools() {
    let fleet = "src/config/default_fleet.toml";
    let (code, out, err) = gantry(&[
        "spec",
        "check",
        "tests/specs/ok/skypilot_infra.yaml",
        "--fleet",
        fleet,
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        out,
        "tests/specs/ok/skypilot_infra.yaml: finetune-llama: on this fleet\n  shape 1: 1 node(s) × 8 GPU(s) of H100 > A100-80GB, 32 CPUs, 256.0 GiB; spot no\n    pools: aws/us-east-1/use1-az3 p5-od\n"
    );
    let dir = gantry_testkit::scratch::scratch("speccheck");
    let job = dir.join("shapes.yaml");
    std::fs::write(
        &job,
        "run: x\nresources:\n  accelerators: {H100:8, H100:4, B300:8}\n",
    )
    .unwrap();
    let (code, out, err) = gantry(&[
        "spec",
        "check",
        job.to_str().unwrap(),
        "--fleet",
        fleet,
        "-o",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let gpus: Vec<&str> = v[0]["shapes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["gpus_per_node"].as_str().unwrap())
        .collect();
    assert_eq!(gpus, ["8", "4"], "{out}");
    // Alternatives asking for their own CPUs are shapes of their own, said with them.
    std::fs::write(
        &job,
        "run: x\nresources:\n  accelerators: H100:8\n  any_of:\n    - cpus: 16\n    - cpus: 32\n",
    )
    .unwrap();
    let (code, out, err) = gantry(&["spec", "check", job.to_str().unwrap(), "--fleet", fleet]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("shape 1: 1 node(s) × 8 GPU(s) of H100, 16 CPUs;")
            && out.contains("shape 2: 1 node(s) × 8 GPU(s) of H100, 32 CPUs;"),
        "{out}"
    );
    std::fs::write(&job, "run: x\nresources:\n  accelerators: B300:8\n").unwrap();
    let (code, _, err) = gantry(&["spec", "check", job.to_str().unwrap(), "--fleet", fleet]);
    assert_eq!(code, 2);
    assert!(
        err.contains(":3:3: `resources.accelerators`: unknown GPU model `B300`"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A job with no `run` has nothing to start on a real pool: `spec check` refuses it, with
/// what to add; against a simulated fleet (which models a job's work) it passes, against a
/// fleet with a real pool it may land on it names that pool.
#[test]
fn spec_check_refuses_a_job_with_nothing_to_run() {
    let dir = gantry_testkit::scratch::scratch("speccheck-norun");
    let job = dir.join("norun.yaml");
    std::fs::write(&job, "name: idle\nresources:\n  accelerators: H100:1\n").unwrap();
    let (code, _, err) = gantry(&["spec", "check", job.to_str().unwrap()]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("norun.yaml: the job has no `run`") && err.contains("Add `run: COMMAND`"),
        "{err}"
    );
    let sim = "src/config/default_fleet.toml";
    let (code, _, err) = gantry(&["spec", "check", job.to_str().unwrap(), "--fleet", sim]);
    assert_eq!(code, 0, "a simulated fleet models the work: {err}");
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"onprem\"\nzone = \"rack1\"\nname = \"box\"\ninstance_type = \"server\"\ngpu = \"H100\"\ngpus_per_node = 1\nvram_gb = 80\ncpus = 8\nmemory_gb = 32\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [\"gpu1\"]\n",
    )
    .unwrap();
    let (code, _, err) = gantry(&[
        "spec",
        "check",
        job.to_str().unwrap(),
        "--fleet",
        fleet.to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("it may land on pool ssh/onprem/rack1/box, a real one"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn spec_check_prints_what_it_understood_or_where_it_is_wrong() {
    let (code, out, err) = gantry(&["spec", "check", "tests/specs/ok/skypilot_serve.yaml"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("GPUs/node   L4×1 | A10G×1 | A100×1 (any of)"),
        "{out}"
    );
    // Each with what gantry does instead.
    assert!(
        out.contains("  service     2 replica(s); ready when GET /v1/models answers 2xx (after up to 1200 s); port 8081")
            && out.contains("not acted on:\n    resources.ports: not opened or forwarded")
            && out.contains("\n    resources.disk_tier: the job uses the disk its node has"),
        "{out}"
    );
    // A Slurm batch script: its #SBATCH lines read, what gantry does not act on listed.
    let (code, out, err) = gantry(&["spec", "check", "tests/specs/ok/slurm_pretrain.sbatch"]);
    assert_eq!(code, 0, "{err}");
    for line in [
        "name        llama-pretrain",
        "nodes       2",
        "GPUs/node   h100×8",
        "CPU/node    96.0",
        "memory/node 1024000 MiB",
        "team        ml",
        "priority    high",
        "time limit  2days",
        "checkpoint  SIGUSR1 then 300 s grace",
        "`--partition=gpu` (line 12: gantry chooses where the job runs)",
        "`--output=logs/%x-%j.out` (line 13: gantry keeps the job's output: `gantry logs`)",
        "`--exclusive` (line 14: gantry chooses where the job runs)",
        "Slurm's own commands or SLURM_* variables (line 17)",
    ] {
        assert!(out.contains(line), "{line:?} in {out}");
    }
    let (code, out, _) = gantry(&[
        "spec",
        "check",
        "tests/specs/ok/gantry_full.yaml",
        "--output",
        "json",
    ]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["nodes"], 4);
    assert_eq!(v["checkpoint"]["grace_s"], 120.0);
    let (code, _, err) = gantry(&["spec", "check", "tests/specs/bad/unknown_nested.yaml"]);
    assert_eq!(code, 2);
    assert!(err.starts_with("error: tests/specs/bad/unknown_nested.yaml:2:3: unknown field `resources.acelerators`; did you mean `accelerators`?"), "{err}");
}

#[test]
fn fleet_shows_the_builtin_as_simulated_and_accepts_its_own_default() {
    // No user fleet file: an empty XDG config dir.
    let empty = std::env::temp_dir().join(format!("gantry-noconfig-{}", std::process::id()));
    let builtin = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(args)
            .env("XDG_CONFIG_HOME", &empty)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    let (code, out) = builtin(&["fleet", "--output", "json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["simulated"], true);
    assert!(v["gpus"].as_u64().unwrap() >= 200);
    let (code, table) = builtin(&["fleet"]);
    assert_eq!(code, 0);
    assert!(table.contains("SIMULATED"), "{table}");
    assert!(
        table.contains("scale: empty cloud nodes go back after 10m; on-demand for 30m"),
        "{table}"
    );
    assert_eq!(v["config"]["scale"]["scale_down_after"], "10m");
    // The printed default is a valid fleet file.
    let (code, text, _) = gantry(&["fleet", "--print-default"]);
    assert_eq!(code, 0);
    let path = gantry_testkit::scratch::scratch("fleet-check").join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    let (code, out, err) = gantry(&[
        "fleet",
        "--config",
        path.to_str().unwrap(),
        "--output",
        "json",
    ]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["simulated"], false);
    let _ = std::fs::remove_file(&path);
    let (code, _, err) = gantry(&["fleet", "--config", "tests/data/bad_fleet.toml"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("error: tests/data/bad_fleet.toml:13:12: unknown variant `spotty`"),
        "{err}"
    );
}

#[test]
fn info_prints_xdg_paths() {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["info", "--output", "json"])
        .env("XDG_CONFIG_HOME", "/tmp/xdg-config")
        .env("XDG_DATA_HOME", "/tmp/xdg-data")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["fleet_file"], "/tmp/xdg-config/gantry/fleet.toml");
    assert_eq!(v["journal"], "/tmp/xdg-data/gantry/state.db");
    assert_eq!(v["socket"], "/tmp/xdg-data/gantry/gantry.sock");
}

#[test]
fn gpus_without_a_driver_says_so_once_and_succeeds() {
    let (code, out, err) = gantry(&["gpus", "--output", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    if v["status"] == "unavailable" {
        assert!(v["reason"]
            .as_str()
            .unwrap()
            .contains("NVML is not available"));
        let (code, out, _) = gantry(&["gpus"]);
        assert_eq!(code, 0);
        assert_eq!(out.lines().count(), 1, "one clear line: {out}");
    } else {
        assert_eq!(v["status"], "available");
    }
}

#[test]
fn help_ends_with_the_exit_codes_and_console_flags_stay_with_the_console() {
    let (code, top, _) = gantry(&["--help"]);
    assert_eq!(code, 0);
    assert!(
        top.contains("--theme") && top.contains("--readonly"),
        "{top}"
    );
    assert!(
        top.contains("Exit codes: 0 done, 1 the daemon failed, 2 bad input"),
        "{top}"
    );
    let (code, jobs, _) = gantry(&["jobs", "--help"]);
    assert_eq!(code, 0);
    assert!(jobs.contains("5 no daemon to reach"), "{jobs}");
    // Before: --theme, --keymap and --readonly cluttered every subcommand's help.
    for flag in ["--theme", "--keymap", "--readonly"] {
        assert!(
            !jobs.contains(flag),
            "{flag} in `gantry jobs --help`: {jobs}"
        );
    }
    let (code, _, err) = gantry(&["jobs", "--theme", "dark"]);
    assert_eq!(code, 2, "{err}");
}

#[test]
fn the_man_pages_come_from_the_command_line_itself() {
    let (code, page, _) = gantry(&["man"]);
    assert_eq!(code, 0);
    assert!(page.contains(".TH gantry 1"), "{page}");
    assert!(page.contains("Exit codes"), "{page}");
    let dir = gantry_testkit::scratch::scratch("man");
    let (code, _, err) = gantry(&["man", "--dir", dir.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    let submit = std::fs::read_to_string(dir.join("gantry-submit.1")).unwrap();
    assert!(submit.contains(".TH gantry-submit 1"), "{submit}");
    assert!(submit.contains("\\fBgantry submit\\fR"), "{submit}");
    assert!(dir.join("gantry-logs.1").exists() && dir.join("gantry.1").exists());
}

/// `gantry fleet --config` on a file with a `gpu = "auto"` SSH pool: the pool is CPU-only
/// until its hosts answer a daemon (it panicked building a GPU model named "auto").
#[test]
fn a_fleet_file_with_an_undiscovered_auto_pool_shows_it_cpu_only() {
    let dir = gantry_testkit::scratch::scratch("cli-auto");
    let file = dir.join("fleet.toml");
    std::fs::write(
        &file,
        "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"onprem\"\nzone = \"r1\"\nname = \"lab\"\ninstance_type = \"box\"\ngpu = \"auto\"\ncpus = 8\nmemory_gb = 32\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [\"gpu1.example\"]\n",
    )
    .unwrap();
    let (code, out, err) = gantry(&["fleet", "--config", file.to_str().unwrap(), "-o", "json"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (v["nodes"].as_u64(), v["gpus"].as_u64()),
        (Some(1), Some(0)),
        "{out}"
    );
    // The table says its GPUs are discovered, not `0×auto` (issue 41).
    let (code, out, err) = gantry(&["fleet", "--config", file.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("discovered") && !out.contains("×auto"),
        "{out}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Root's fleet file (issue 41): as root without XDG variables gantry reads
/// `/etc/gantry/fleet.toml`, so the README's `~/.config/gantry/fleet.toml` was ignored and the
/// daemon ran the built-in simulated fleet without a word. Now `gantry info` says which fleet is
/// in force and warns of the unread file, `gantry info --fleet-file` prints where it goes, and
/// commands that load the fleet warn too.
#[test]
fn info_says_which_fleet_is_in_force_and_warns_of_a_file_root_does_not_read() {
    let home = gantry_testkit::scratch::scratch("home");
    std::fs::create_dir_all(home.join(".config/gantry")).unwrap();
    std::fs::write(home.join(".config/gantry/fleet.toml"), "").unwrap();
    let run = |args: &[&str], system: bool| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_gantry"));
        c.args(args)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env_remove("XDG_DATA_HOME")
            .env_remove("GANTRY_CONFIG");
        if system {
            // What running as root without XDG variables chooses (the test may not be root).
            c.env("GANTRY_SYSTEM", "1");
        } else {
            c.env_remove("GANTRY_SYSTEM");
        }
        let out = c.output().unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (out, _) = run(&["info"], true);
    assert!(
        out.contains(
            "in force    the built-in SIMULATED fleet: /etc/gantry/fleet.toml does not exist"
        ) || out.contains("in force    the fleet file /etc/gantry/fleet.toml"),
        "{out}"
    );
    assert!(
        out.contains(&format!(
            "warning     {}/.config/gantry/fleet.toml exists but is not read",
            home.display()
        )),
        "{out}"
    );
    let (out, _) = run(&["info", "--fleet-file"], true);
    assert_eq!(out.trim(), "/etc/gantry/fleet.toml");
    let (_, err) = run(&["fleet"], true);
    assert!(err.contains("exists but is not read"), "{err}");
    // User paths: the file is the one in force, no warning.
    let (out, _) = run(&["info"], false);
    if unsafe { libc::geteuid() } != 0 {
        assert!(!out.contains("warning"), "{out}");
    }
    let (out, _) = run(&["info", "--fleet-file"], false);
    if unsafe { libc::geteuid() } != 0 {
        assert_eq!(
            out.trim(),
            format!("{}/.config/gantry/fleet.toml", home.display())
        );
    }
    let _ = std::fs::remove_dir_all(&home);
}

/// The reference lists every command: each one `gantry --help` names has a line of its own
/// in docs/reference.md (it omitted 18), and each of a command's subcommands too.
#[test]
fn every_command_in_help_has_a_line_in_the_reference() {
    let reference = std::fs::read_to_string("docs/reference.md").unwrap();
    let help = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
            .args(args)
            .arg("--help")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The words under `Commands:` of a help text.
    let commands = |text: &str| -> Vec<String> {
        text.lines()
            .skip_while(|l| !l.starts_with("Commands:"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .filter_map(|l| l.split_whitespace().next().map(str::to_string))
            .collect()
    };
    let top = commands(&help(&[]));
    assert!(top.len() > 20, "{top:?}");
    let mut missing = Vec::new();
    for c in &top {
        let sub: Vec<String> = if c == "help" {
            Vec::new()
        } else {
            commands(&help(&[c]))
                .into_iter()
                .filter(|s| s != "help")
                .collect()
        };
        let lines = if sub.is_empty() {
            vec![format!("gantry {c}")]
        } else {
            sub.iter().map(|s| format!("gantry {c} {s}")).collect()
        };
        for l in lines {
            let listed = reference
                .lines()
                .any(|r| r == l || r.starts_with(&format!("{l} ")));
            if !listed {
                missing.push(l);
            }
        }
    }
    assert!(missing.is_empty(), "docs/reference.md lacks: {missing:?}");
}

/// Every relative link of the README and docs/ resolves: its file exists and its anchor is a
/// heading there (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
#[test]
fn the_docs_links_resolve() {
    use std::path::{Path, PathBuf};
    let slug = |h: &str| -> String {
        h.trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
            .map(|c| if c == ' ' { '-' } else { c })
            .collect()
    };
    let mut files: Vec<PathBuf> = vec![PathBuf::from("README.md")];
    for e in std::fs::read_dir("docs").unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            files.push(p);
        }
    }
    let headings = |p: &Path| -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| slug(l.trim_start_matches('#')))
            .collect()
    };
    let mut broken = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        // Code blocks hold commands and output, not links.
        let prose: String = text
            .split("```")
            .enumerate()
            .filter(|(i, _)| i % 2 == 0)
            .map(|(_, s)| s)
            .collect();
        for part in prose.split("](").skip(1) {
            let Some(target) = part.split(')').next() else {
                continue;
            };
            if target.contains("://") || target.starts_with("mailto:") || target.contains(' ') {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let file = if path.is_empty() {
                f.clone()
            } else {
                f.parent().unwrap().join(path)
            };
            if !file.exists() {
                broken.push(format!("{}: {target}: no such file", f.display()));
            } else if !anchor.is_empty()
                && file.extension().is_some_and(|x| x == "md")
                && !headings(&file).contains(&anchor.to_string())
            {
                broken.push(format!("{}: {target}: no such heading", f.display()));
            }
        }
    }
    assert!(broken.is_empty(), "{broken:#?}");
}
