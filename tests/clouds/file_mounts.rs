//! SkyPilot's `file_mounts` on a local pool, end to end with real tools: `moto_server` serves
//! S3 on 127.0.0.1 (`.ci/run` installs it, with the `aws` CLI), the job's setup copies an
//! object and a prefix with `aws s3`, copies the submitter's local file and directory, and
//! mounts a checkpoint bucket with `rclone mount` (FUSE). The job writes its step to the
//! bucket, is preempted, and the run that follows resumes from the bucket. A local source
//! submitted to a daemon over TCP is shipped to it. What S3 holds is read back with the `aws`
//! CLI, not through gantry.
//!
//! Skips, saying so, without `moto_server` or `aws`; the mount part skips without `rclone`,
//! `fusermount` and `/dev/fuse`.

use crate::support::daemon;
use crate::support::moto;

use daemon::{cli, free_port, log_text, state, temp_dir, token, wait_for, Daemon};
use std::path::Path;
use std::process::Command;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The `aws` CLI against moto; its stdout.
fn aws(endpoint: &str, args: &[&str]) -> String {
    let out = Command::new("aws")
        .args(args)
        .env("AWS_ENDPOINT_URL", endpoint)
        .env("AWS_ACCESS_KEY_ID", "test")
        .env("AWS_SECRET_ACCESS_KEY", "test")
        .env("AWS_DEFAULT_REGION", "us-east-1")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "aws {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `gantry submit FILE` run in `cwd` (where relative sources are read from); the job's id and
/// what it said on stderr.
fn submit_in(d: &Daemon, cwd: &Path, file: &Path, connect: &[&str]) -> (i64, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gantry"));
    if connect.is_empty() {
        c.arg("--connect").arg(&d.socket);
    } else {
        c.args(connect);
    }
    let out = c
        .arg("submit")
        .arg(file)
        .args(["--team", "a"])
        .current_dir(cwd)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "submit: {said}");
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text
        .trim()
        .rsplit(' ')
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no job id in {text:?}"));
    (id, said)
}

fn mounted(path: &Path) -> bool {
    std::fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(path.to_str().unwrap()))
}

#[test]
fn a_job_copies_buckets_and_local_files_and_resumes_from_its_mounted_checkpoint_bucket() {
    if moto::moto_bin().is_none() || !have("aws") {
        eprintln!("skipped: needs moto_server and the aws CLI (pip install 'moto[server]' awscli)");
        return;
    }
    let can_mount = have("rclone") && have("fusermount") && Path::new("/dev/fuse").exists();
    if !can_mount {
        eprintln!("the checkpoint-bucket part skipped: needs rclone, fusermount and /dev/fuse");
    }
    let s3 = moto::Moto::start(free_port());
    let ep = format!("http://127.0.0.1:{}", s3.port);
    let dir = temp_dir("file-mounts");
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("localdir")).unwrap();
    std::fs::write(src.join("localdir/x.txt"), "from a local dir\n").unwrap();
    std::fs::write(src.join("note.txt"), "from a local file\n").unwrap();
    std::fs::write(dir.join("in.txt"), "from an s3 object\n").unwrap();
    std::fs::write(dir.join("a.txt"), "from an s3 prefix\n").unwrap();
    aws(&ep, &["s3", "mb", "s3://data"]);
    let put = |file: &str, key: &str| {
        aws(
            &ep,
            &[
                "s3",
                "cp",
                dir.join(file).to_str().unwrap(),
                &format!("s3://data/{key}"),
            ],
        )
    };
    put("in.txt", "in.txt");
    put("a.txt", "dir/a.txt");

    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, daemon::LOCAL_FLEET).unwrap();
    let d = daemon::start_in(dir.join("daemon"), &["--config", fleet.to_str().unwrap()]);
    let out = dir.join("out");
    let ckpt = out.join("ckpt");
    let (ckpt_mount, step) = if can_mount {
        (
            format!("  {}:\n    name: ckpts\n    mode: MOUNT\n", ckpt.display()),
            "n=$(cat ckpt/step 2>/dev/null || echo 0); n=$((n+1)); echo $n > ckpt/step; echo \"step $n\"\n  ",
        )
    } else {
        (String::new(), "")
    };
    let yaml = format!(
        "name: mounts\nenvs:\n  AWS_ENDPOINT_URL: {ep}\n  AWS_ACCESS_KEY_ID: test\n  AWS_SECRET_ACCESS_KEY: test\n  AWS_DEFAULT_REGION: us-east-1\nfile_mounts:\n  {o}/in.txt: s3://data/in.txt\n  {o}/dir: s3://data/dir\n  {o}/local: ./localdir\n  {o}/note.txt: ./note.txt\n{ckpt_mount}checkpoint: {{grace: 10s}}\nrun: |\n  cd {o}\n  cat in.txt dir/a.txt local/x.txt note.txt\n  {step}trap 'exit 0' TERM\n  while true; do sleep 0.1; done\n",
        o = out.display()
    );
    let file = src.join("job.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let (id, _) = submit_in(&d, &src, &file, &[]);
    let has = |text: &str| log_text(&d, id).contains(text);
    wait_for(&d, 90, "the job to print what its mounts copied", || {
        has("from a local file")
    });
    let logs = log_text(&d, id);
    for want in [
        "from an s3 object",
        "from an s3 prefix",
        "from a local dir",
        "from a local file",
    ] {
        assert!(logs.contains(want), "{want} not in:\n{logs}");
    }
    if can_mount {
        wait_for(&d, 30, "step 1", || has("step 1"));
        assert!(
            mounted(&ckpt),
            "the checkpoint bucket is mounted while the job runs"
        );
        cli(&d, &["preempt", &id.to_string()]);
        // The next run reads the step the first one wrote to the bucket.
        wait_for(
            &d,
            90,
            "the run after the preemption to resume at step 2",
            || has("step 2"),
        );
        let held = aws(&ep, &["s3", "cp", "s3://ckpts/step", "-"]);
        assert_eq!(held.trim(), "2", "the bucket holds the second run's step");
    }
    cli(&d, &["cancel", &id.to_string()]);
    wait_for(&d, 30, "the job to be cancelled", || {
        state(&d, id) == "cancelled"
    });
    if can_mount {
        wait_for(
            &d,
            15,
            "the bucket to be unmounted when the run ended",
            || !mounted(&ckpt),
        );
    }

    // Over TCP, a local source is shipped to the daemon and copied from its copy.
    let t = token(&d, "operator", None);
    let url = format!("http://127.0.0.1:{}", d.port);
    let tcp = ["--connect", url.as_str(), "--token", t.as_str()];
    let shipped = dir.join("shipped.yaml");
    std::fs::write(
        &shipped,
        format!(
            "name: shipped\nfile_mounts:\n  {o}/shipped.txt: ./note.txt\nrun: cat {o}/shipped.txt\n",
            o = out.display()
        ),
    )
    .unwrap();
    let (id, said) = submit_in(&d, &src, &shipped, &tcp);
    assert!(said.contains("shipped to the daemon"), "{said}");
    wait_for(&d, 60, "the shipped job to complete", || {
        state(&d, id) == "completed"
    });
    assert!(
        log_text(&d, id).contains("from a local file"),
        "{}",
        log_text(&d, id)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A local pool is this host, whose tools the daemon knows: a mount it cannot do is refused at
/// submit, at `file_mounts`, rather than failing the job's setup; a copy of a local source,
/// which needs no tool, is taken.
#[test]
fn a_mount_this_host_cannot_do_is_refused_at_submit() {
    let dir = temp_dir("file-mounts-tools");
    let fleet = dir.join("fleet.toml");
    std::fs::write(&fleet, daemon::LOCAL_FLEET).unwrap();
    // A PATH with none of the tools: what the daemon finds on this host (the job below is given
    // a PATH of its own for cp).
    let d = daemon::start_with(
        dir.join("daemon"),
        &["--config", fleet.to_str().unwrap()],
        |c| {
            c.env("PATH", "/nonexistent-gantry-path");
        },
    );
    let job = dir.join("mount.yaml");
    std::fs::write(
        &job,
        "name: m\nfile_mounts:\n  /ckpt:\n    source: s3://ck\n    mode: MOUNT\nrun: ls /ckpt\n",
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(["submit", job.to_str().unwrap(), "--team", "a"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mount.yaml:2:1: `file_mounts`: `/ckpt`: mounting s3://ck needs rclone with fuse, mount-s3 or goofys on the node, and no pool where the job may run has it"),
        "{err}"
    );
    // Through the API, a relative source names nobody's directory: refused at the field.
    let out = daemon::request(
        &d.socket,
        "POST /v1/jobs?team=a",
        "name: r\nfile_mounts:\n  /data: ./data\nrun: 'true'\n",
    );
    assert!(
        out.starts_with("HTTP/1.1 400")
            && out.contains("the local source `./data` is relative")
            && out.contains("file_mounts"),
        "{out}"
    );
    std::fs::write(dir.join("here.txt"), "here\n").unwrap();
    let copy = dir.join("copy.yaml");
    std::fs::write(
        &copy,
        format!(
            "name: c\nenvs:\n  PATH: /usr/bin:/bin\nfile_mounts:\n  {}/copied.txt: {}/here.txt\nrun: 'true'\n",
            dir.display(),
            dir.display()
        ),
    )
    .unwrap();
    let (id, _) = submit_in(&d, &dir, &copy, &[]);
    wait_for(&d, 60, "the copy job to complete", || {
        state(&d, id) == "completed"
    });
    assert_eq!(
        std::fs::read_to_string(dir.join("copied.txt")).unwrap(),
        "here\n"
    );
}
