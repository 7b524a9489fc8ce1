//! The local backend with ordinary commands (no GPU needed): environment, logs, exit codes,
//! signal + grace + kill, checkpoint on preemption, and the NVML-absent path.

use gantry::backend::local::exec::{launch, signal_number, Exit, LaunchSpec};
use gantry::backend::local::nvml::{discover, Discovery};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn tmp(name: &str) -> PathBuf {
    gantry_testkit::scratch::scratch(&format!("local-{name}"))
}

fn wait_for(path: &std::path::Path, text: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if std::fs::read_to_string(path).is_ok_and(|s| s.contains(text)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never contained {text:?}", path.display());
}

#[test]
fn the_job_sees_its_gpus_and_gantry_variables() {
    let dir = tmp("env");
    let mut r = launch(&LaunchSpec {
            run_token: "test-run".to_string(),
        job: 42,
        run: "echo \"$CUDA_VISIBLE_DEVICES|$GANTRY_JOB_ID|$GANTRY_NUM_GPUS|$GANTRY_CHECKPOINT_DIR|$SKYPILOT_NUM_GPUS_PER_NODE|$EPOCHS|$(pwd)\"".into(),
        gpu_uuids: vec!["GPU-aaaa".into(), "MIG-bbbb".into()],
        envs: [("EPOCHS".to_string(), "3".to_string())].into(),
        checkpoint_dir: Some("/ckpt/42".into()),
        workdir: Some(dir.clone()),
        log_dir: dir.join("logs"),
        ..LaunchSpec::default()
    })
    .unwrap();
    assert_eq!(r.wait().unwrap(), Exit::Code(0));
    let out = std::fs::read_to_string(&r.stdout_log).unwrap();
    assert_eq!(
        out.trim(),
        format!("GPU-aaaa,MIG-bbbb|42|2|/ckpt/42|2|3|{}", dir.display())
    );
}

#[test]
fn preemption_signals_the_job_which_checkpoints_and_exits() {
    let dir = tmp("ckpt");
    let ckpt = dir.join("ckpt");
    std::fs::create_dir_all(&ckpt).unwrap();
    let script = "trap 'echo step-17 > \"$GANTRY_CHECKPOINT_DIR/state\"; exit 0' USR1\necho ready\nwhile true; do sleep 0.05; done";
    let mut r = launch(&LaunchSpec {
        run_token: "test-run".to_string(),
        job: 1,
        run: script.into(),
        checkpoint_dir: Some(ckpt.clone()),
        log_dir: dir.clone(),
        ..LaunchSpec::default()
    })
    .unwrap();
    wait_for(&r.stdout_log, "ready");
    let stopped = r
        .stop(signal_number("SIGUSR1").unwrap(), Duration::from_secs(5))
        .unwrap();
    assert_eq!((stopped.exit, stopped.killed), (Exit::Code(0), false));
    assert_eq!(
        std::fs::read_to_string(ckpt.join("state")).unwrap().trim(),
        "step-17"
    );
}

#[test]
fn a_job_that_ignores_the_signal_is_killed_after_the_grace_period() {
    let dir = tmp("kill");
    // The shell and its child both ignore TERM; only SIGKILL of the group ends them.
    let script =
        "trap '' TERM\necho ready\nsh -c \"trap '' TERM; while true; do sleep 0.05; done\"";
    let mut r = launch(&LaunchSpec {
        run_token: "test-run".to_string(),
        job: 2,
        run: script.into(),
        log_dir: dir,
        ..LaunchSpec::default()
    })
    .unwrap();
    wait_for(&r.stdout_log, "ready");
    let t = Instant::now();
    let stopped = r
        .stop(
            signal_number("SIGTERM").unwrap(),
            Duration::from_millis(300),
        )
        .unwrap();
    assert!(stopped.killed);
    assert_eq!(stopped.exit, Exit::Signal(9));
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "waited the grace period"
    );
}

#[test]
fn without_a_driver_nvml_says_so_clearly() {
    match discover() {
        Discovery::Unavailable { reason } => {
            assert!(reason.contains("NVML is not available"), "{reason}");
            assert!(reason.contains("no NVIDIA driver on this host"), "{reason}");
        }
        // On a GPU host the same call lists real GPUs; each has a UUID and memory.
        Discovery::Available { gpus, .. } => {
            assert!(gpus
                .iter()
                .all(|g| g.uuid.starts_with("GPU-") && g.memory_total_mib > 0));
        }
    }
}
