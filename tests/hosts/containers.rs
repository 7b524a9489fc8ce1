//! `image_id: docker:IMAGE` on a local pool with `container_runtime = "podman"`: the job's
//! setup and run run in a real podman container of that image (as SkyPilot runs tasks in a
//! Docker image), with the workdir mounted, the job's environment, the stop signal passed to
//! the script inside, and no container left behind by a cancel. Real `gantry daemon`, real
//! podman; the image is made here from this host's own bash and coreutils (`podman import`:
//! no registry is reachable from CI). `container_runtime = "docker"` runs through the real
//! docker CLI, its engine podman's Docker-compatible API (`podman system service`): no Docker
//! engine runs here. Skipped without a working podman (`.ci/run` installs it), unless
//! GANTRY_REQUIRE_PODMAN=1 says it must work here.

use crate::support::daemon as common;
use crate::support::podman;

use common::{cli, job, log_text, state, submit, wait_for};
use podman::{containers_with, podman_ok, Cleanup, IMAGE};
use std::path::Path;
use std::process::Command;

fn fleet(runtime: Option<&str>) -> String {
    let rt = runtime.map_or(String::new(), |r| format!("container_runtime = \"{r}\"\n"));
    common::local_fleet("lab", &rt)
}

fn daemon(name: &str, runtime: Option<&str>) -> (common::Daemon, std::path::PathBuf) {
    let dir = common::temp_dir(name);
    let file = dir.join("fleet.toml");
    std::fs::write(&file, fleet(runtime)).unwrap();
    let d = common::start_in(dir.join("d"), &["--config", file.to_str().unwrap()]);
    (d, dir)
}

/// A daemon over a podman pool, and a workdir of the test's own (its containers found by it
/// and removed when the test ends).
fn podman_daemon(
    name: &str,
) -> (
    common::Daemon,
    std::path::PathBuf,
    std::path::PathBuf,
    Cleanup,
) {
    let (d, dir) = daemon(name, Some("podman"));
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let cleanup = Cleanup(work.clone());
    (d, dir, work, cleanup)
}

fn wait_state(d: &common::Daemon, id: i64, want: &str) {
    wait_for(d, 90, &format!("job {id} {want}"), || state(d, id) == want);
}

#[test]
fn a_job_with_an_image_runs_its_setup_and_run_in_a_container_of_it() {
    if !podman_ok() {
        return;
    }
    let (d, dir, work, _cleanup) = podman_daemon("container-run");
    // A local `file_mounts` source outside the workdir: the container sees it (read-only)
    // for setup to copy into the container's own filesystem.
    let outside = dir.join("outside.txt");
    std::fs::write(&outside, "mounted from the host\n").unwrap();
    let yaml = format!(
        "name: boxed\nworkdir: {w}\nfile_mounts:\n  /tmp/in-box.txt: {o}\nresources:\n  image_id: docker:{IMAGE}\nenvs:\n  GREETING: hello there\nsetup: |\n  export LEAK=1\n  cd /\n  echo set up > \"$OLDPWD/setup.txt\"\nrun: |\n  cat /etc/gantry-test-image\n  echo \"pwd=$(pwd) LEAK=$LEAK greeting=$GREETING rank=$SKYPILOT_NODE_RANK job=$GANTRY_JOB_ID\"\n  cat setup.txt\n  [[ -n $BASH_VERSION ]] && echo bash\n  echo from the container > made-inside.txt\n  cat /tmp/in-box.txt\n",
        w = work.display(),
        o = outside.display()
    );
    let id = submit(&d, &dir, "boxed", &yaml);
    wait_for(&d, 120, "the container job to end", || {
        ["completed", "failed"].contains(&state(&d, id).as_str())
    });
    let log = log_text(&d, id);
    assert_eq!(state(&d, id), "completed", "{log}\n{}", job(&d, id));
    // The image's own file: it ran in the container, not on the host.
    assert!(log.contains("inside the test image"), "{log}");
    assert!(!Path::new("/etc/gantry-test-image").exists());
    // The workdir is mounted at its own path and is the working directory; the spec's env
    // and gantry's and SkyPilot's are there; setup's `cd` and `export` stayed in setup.
    assert!(
        log.contains(&format!(
            "pwd={} LEAK= greeting=hello there rank=0 job={id}",
            work.display()
        )),
        "{log}"
    );
    assert!(log.contains("set up") && log.contains("bash"), "{log}");
    assert!(log.contains("mounted from the host"), "{log}");
    assert_eq!(
        std::fs::read_to_string(work.join("made-inside.txt")).unwrap(),
        "from the container\n"
    );
    // `--rm`: the container goes with the run.
    wait_for(&d, 30, "the container to be removed", || {
        containers_with(&work).is_empty()
    });

    // An image that cannot be had: the runtime's own failure, said as such.
    let missing = format!(
        "name: nowhere\nworkdir: {w}\nresources:\n  image_id: docker:localhost/gantry-no-such-image:1\nrun: echo never\n",
        w = work.display()
    );
    let id = submit(&d, &dir, "nowhere", &missing);
    wait_state(&d, id, "failed");
    let why = job(&d, id).to_string();
    assert!(
        why.contains("exited with code 125")
            && why.contains("podman could not run a container of localhost/gantry-no-such-image:1"),
        "{why}"
    );

    // A failing run fails the job with its code, from inside the container.
    let failing = format!(
        "name: fails\nworkdir: {w}\nresources:\n  image_id: docker:{IMAGE}\nrun: exit 7\n",
        w = work.display()
    );
    let id = submit(&d, &dir, "fails", &failing);
    wait_state(&d, id, "failed");
    let why = job(&d, id).to_string();
    assert!(why.contains("exited with code 7"), "{why}");
}

#[test]
fn a_preempted_container_job_gets_its_signal_inside_and_a_cancel_leaves_no_container() {
    if !podman_ok() {
        return;
    }
    let (d, dir, work, _cleanup) = podman_daemon("container-stop");
    // The script traps the checkpoint signal, as a training loop that checkpoints does.
    let yaml = format!(
        "name: trains\nworkdir: {w}\nresources:\n  image_id: docker:{IMAGE}\ncheckpoint: {{interval: 10m, grace: 20s}}\nrun: |\n  trap 'echo got TERM >> signals.txt; exit 143' TERM\n  echo started >> starts.txt\n  while :; do sleep 0.2; done\n",
        w = work.display()
    );
    let id = submit(&d, &dir, "trains", &yaml);
    let starts = work.join("starts.txt");
    let started = |n: usize| {
        std::fs::read_to_string(&starts).is_ok_and(|s| s.lines().count() >= n)
            && state(&d, id) == "running"
    };
    wait_for(&d, 120, "the container job to start", || started(1));
    assert_eq!(containers_with(&work).lines().count(), 1, "one container");
    cli(&d, &["preempt", &id.to_string()]);
    // The signal reached the script inside the container (PID 1 passes it on), and the job
    // was requeued and started again.
    wait_for(&d, 60, "the script inside to get SIGTERM", || {
        std::fs::read_to_string(work.join("signals.txt")).is_ok_and(|s| s.contains("got TERM"))
    });
    wait_for(&d, 120, "the job to start again", || started(2));

    // A cancel kills at once: the runtime's client dies, and the container with it.
    cli(&d, &["cancel", &id.to_string()]);
    wait_state(&d, id, "cancelled");
    wait_for(&d, 30, "no container left", || {
        containers_with(&work).is_empty()
    });
}

#[test]
fn an_image_is_refused_where_no_pool_runs_containers_and_a_runtime_is_checked() {
    let dir = common::temp_dir("container-refused");
    std::fs::write(dir.join("fleet.toml"), fleet(None)).unwrap();
    std::fs::write(
        dir.join("job.yaml"),
        "name: boxed\nresources:\n  cpus: 1\n  image_id: docker:pytorch:25\nrun: python x.py\n",
    )
    .unwrap();
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_gantry"))
            .current_dir(&dir)
            .args(["spec", "check", "job.yaml", "--fleet", "fleet.toml"])
            .output()
            .unwrap()
    };
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("job.yaml:4:3: `resources.image_id`")
            && err.contains("runs container images")
            && err.contains("container_runtime"),
        "{err}"
    );
    // With a runtime, the same file resolves onto the pool.
    std::fs::write(dir.join("fleet.toml"), fleet(Some("podman"))).unwrap();
    let out = check();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A runtime gantry does not drive is named with the ones it does.
    std::fs::write(dir.join("fleet.toml"), fleet(Some("lxc"))).unwrap();
    let out = check();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("container_runtime = \"lxc\": allowed values are \"docker\", \"podman\""),
        "{err}"
    );
}

/// The docker CLI, talking to podman's Docker-compatible API on a socket of the test's own;
/// stopped when dropped.
struct DockerApi {
    service: std::process::Child,
    host: String,
}

impl Drop for DockerApi {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
    }
}

fn docker_api(dir: &Path) -> Option<DockerApi> {
    let have = Command::new("docker")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !have {
        eprintln!("skipped: no docker CLI");
        return None;
    }
    let sock = dir.join("podman.sock");
    let service = Command::new("podman")
        .args(["system", "service", "--time=0"])
        .arg(format!("unix://{}", sock.display()))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let host = format!("unix://{}", sock.display());
    let api = DockerApi { service, host };
    let t0 = std::time::Instant::now();
    while !sock.exists() {
        if t0.elapsed() > std::time::Duration::from_secs(20) {
            eprintln!("skipped: podman's Docker API did not start");
            return None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    Some(api)
}

/// `container_runtime = "docker"`: the same job through the docker CLI — its image, env and
/// workdir — and a cancel's `docker rm -f` leaves no container.
#[test]
fn a_docker_pool_runs_jobs_through_the_docker_cli() {
    if !podman_ok() {
        return;
    }
    let dir = common::temp_dir("container-docker");
    let Some(api) = docker_api(&dir) else { return };
    let file = dir.join("fleet.toml");
    std::fs::write(&file, fleet(Some("docker"))).unwrap();
    let d = common::start_with(dir.join("d"), &["--config", file.to_str().unwrap()], |c| {
        c.env("DOCKER_HOST", &api.host);
    });
    let work = dir.join("work");
    std::fs::create_dir_all(&work).unwrap();
    let _cleanup = Cleanup(work.clone());
    let yaml = format!(
        "name: docked\nworkdir: {w}\nresources:\n  image_id: docker:{IMAGE}\nenvs:\n  GREETING: hi\nrun: |\n  cat /etc/gantry-test-image\n  echo \"pwd=$(pwd) greeting=$GREETING\"\n",
        w = work.display()
    );
    let id = submit(&d, &dir, "docked", &yaml);
    wait_state(&d, id, "completed");
    let log = log_text(&d, id);
    assert!(
        log.contains("inside the test image")
            && log.contains(&format!("pwd={} greeting=hi", work.display())),
        "{log}"
    );
    let long = format!(
        "name: long\nworkdir: {w}\nresources:\n  image_id: docker:{IMAGE}\nrun: |\n  echo up\n  while :; do sleep 0.2; done\n",
        w = work.display()
    );
    let id = submit(&d, &dir, "long", &long);
    wait_for(&d, 60, "the job to run", || log_text(&d, id).contains("up"));
    cli(&d, &["cancel", &id.to_string()]);
    wait_for(&d, 30, "no container left", || {
        containers_with(&work).is_empty()
    });
}
