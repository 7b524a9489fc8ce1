//! A container image for the tests of jobs in containers, made once per test binary from this
//! host's own bash and a few tools (`podman import`: no registry is reachable from CI), and
//! what podman has of a job's containers.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

pub const IMAGE: &str = "localhost/gantry-test-image:1";

fn sh(script: &str) -> std::process::Output {
    Command::new("/bin/bash")
        .args(["-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The test image, made once: this host's bash and a few tools with their libraries, and a
/// marker file only the image has. Whether podman can run it (else why not).
pub fn image() -> Result<(), String> {
    static MADE: OnceLock<Result<(), String>> = OnceLock::new();
    MADE.get_or_init(|| {
        if sh("command -v podman").stdout.is_empty() {
            return Err("no podman (apt-get install podman)".into());
        }
        let root = super::daemon::temp_dir("container-rootfs");
        // cp, dirname and hostname: what `file_mounts`' prelude uses to copy a local source.
        let tools = "/bin/bash /bin/cat /bin/sleep /bin/ls /bin/mkdir /bin/rm /bin/touch /usr/bin/env /usr/bin/id /bin/cp /usr/bin/dirname /bin/hostname";
        let script = format!(
            "set -e\nroot={r}\nfor b in {tools}; do cp --parents -L $b $root/; for l in $(ldd $b | grep -o '/[^ ]*'); do cp --parents -L $l $root/ 2>/dev/null || true; done; done\nmkdir -p $root/etc $root/tmp\necho 'inside the test image' > $root/etc/gantry-test-image\ntar -C $root -c . | podman import - {IMAGE} >/dev/null\npodman run --rm {IMAGE} /bin/bash -c 'cat /etc/gantry-test-image'",
            r = root.display()
        );
        let out = sh(&script);
        let _ = std::fs::remove_dir_all(&root);
        if String::from_utf8_lossy(&out.stdout).contains("inside the test image") {
            Ok(())
        } else {
            Err(format!(
                "podman cannot run a container here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))
        }
    })
    .clone()
}

pub fn podman_ok() -> bool {
    match image() {
        Ok(()) => true,
        Err(why) => {
            assert!(
                std::env::var("GANTRY_REQUIRE_PODMAN").as_deref() != Ok("1"),
                "GANTRY_REQUIRE_PODMAN=1 and {why}"
            );
            eprintln!("skipped: {why}");
            false
        }
    }
}

/// The containers podman has (running or not) with `dir` mounted: a test's own, since every
/// test daemon numbers its jobs from 1 (and tests run side by side).
pub fn containers_with(dir: &Path) -> String {
    let out = sh(&format!(
        "podman ps -a --filter volume={} --format '{{{{.Names}}}}'",
        dir.display()
    ));
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Removes the containers with `dir` mounted when dropped: a test that fails leaves none
/// running (its daemon is killed, and jobs outlive their daemon by design).
pub struct Cleanup(pub PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in containers_with(&self.0).lines() {
            let _ = sh(&format!("podman rm -f -t 0 {name}"));
        }
    }
}
