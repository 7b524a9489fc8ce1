//! A job's part in a container (`image_id: docker:IMAGE` on a local or SSH pool with
//! `container_runtime = "docker"` or `"podman"`), as SkyPilot runs tasks in a Docker image:
//! setup and run are still separate bash scripts, now inside one container that lives for the
//! part (what setup installs, run has), with the host's network (a gang's nodes reach each
//! other by the host addresses gantry gives them), the host's IPC (PyTorch's data loaders and
//! NCCL want more shared memory than a container's 64 MB), the granted GPUs and nothing else,
//! and the workdir and checkpoint directory mounted at the paths the job is told.
//!
//! The runtime's client stays in the foreground under the job's process-group leader, so its
//! logs, exit status and stop signal work as for a bare run: the client passes the signal to
//! the container's first process, a small bash script that passes it on to the running
//! script's own process group (PID 1 of a container ignores signals it does not handle). A
//! SIGKILL only kills the client, so the container is removed by name
//! (`Container::remove`), as it is once any run in one ends; the name carries a hash of the run's secret token, so no container
//! gantry did not start is ever touched.

use sha2::{Digest, Sha256};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub use crate::config::fleet::RUNTIMES;

/// The container's first process: runs setup, then run (if setup succeeded), each in a
/// process group of its own (`set -m` just for the spawn, so no job-control chatter reaches
/// the logs), and passes the stop signals to the running one. `$1` is setup, `$2` run.
const INNER: &str = r#"pid=
for s in TERM INT HUP QUIT USR1 USR2; do trap "[ -n \"\$pid\" ] && kill -$s -- -\$pid 2>/dev/null" $s; done
part() { set -m; bash -c "$1" & pid=$!; set +m; while kill -0 "$pid" 2>/dev/null; do wait "$pid"; done; wait "$pid"; }
rc=0
if [ -n "$1" ]; then part "$1"; rc=$?; fi
if [ "$rc" -eq 0 ]; then part "$2"; rc=$?; fi
exit "$rc""#;

/// A run's container: which runtime runs it, and its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Container {
    pub runtime: String,
    pub name: String,
}

impl Container {
    /// The container of job `job`'s run with token `token`.
    pub fn of(runtime: &str, job: i64, token: &str) -> Container {
        let hash = Sha256::digest(token.as_bytes());
        let hex = crate::random::hex(&hash[..6]);
        Container {
            runtime: runtime.to_string(),
            name: format!("gantry-job-{job}-{hex}"),
        }
    }

    /// Removes the container at once (killing what runs in it), in a thread of its own so
    /// that the agent's loop does not wait on the runtime; a container already gone is fine.
    pub fn remove(&self) {
        let c = self.clone();
        let _ = std::thread::Builder::new()
            .name("container-rm".into())
            .spawn(move || c.remove_now());
    }

    /// `remove`, waiting (at most 15 s) for the runtime.
    pub fn remove_now(&self) {
        let mut cmd = Command::new(&self.runtime);
        cmd.arg("rm").arg("-f");
        if self.runtime == "podman" {
            // podman's `rm -f` stops with a 10 s grace first; the grace has been given.
            cmd.args(["-t", "0"]);
        }
        let child = cmd
            .arg(&self.name)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Ok(mut child) = child {
            let deadline = Instant::now() + Duration::from_secs(15);
            while Instant::now() < deadline {
                if !matches!(child.try_wait(), Ok(None)) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The runtime's command line that runs `setup` and `run` of `spec`'s part in `image`:
    /// the environment named by `env` (its values are passed through the client's
    /// environment, so secrets do not show in `ps`), the part's GPUs (UUIDs, or indices), its
    /// workdir (the working directory) and checkpoint directory mounted at their own paths.
    pub fn run_args(
        &self,
        image: &str,
        spec: &super::exec::LaunchSpec,
        env: &[String],
        setup: &str,
        run: &str,
    ) -> Vec<OsString> {
        let (job, gpus, workdir) = (spec.job, &spec.gpu_uuids, spec.workdir.as_ref());
        let mounts: Vec<&PathBuf> = spec.workdir.iter().chain(&spec.checkpoint_dir).collect();
        let mut a: Vec<OsString> = Vec::new();
        let mut push = |s: &str| a.push(OsString::from(s));
        for s in [
            "run",
            "--rm",
            "--name",
            &self.name,
            "--label",
            &format!("dev.gantry.job={job}"),
            "--network",
            "host",
            "--ipc",
            "host",
            "--entrypoint",
            "",
        ] {
            push(s);
        }
        // Someone else's run (a root agent): the container's processes are its owner's, as a
        // process of the run on the host would be.
        if let Some(a) = spec.owner.as_ref().filter(|a| a.creds.switch_needed()) {
            push("--user");
            push(&format!("{}:{}", a.creds.uid, a.creds.gid));
            for g in a.creds.groups.iter().filter(|&&g| g != a.creds.gid) {
                push("--group-add");
                push(&g.to_string());
            }
            push("-e");
            push(&format!("HOME={}", a.home.display()));
            push("-e");
            push(&format!("USER={}", a.name));
        }
        for k in env {
            push("-e");
            push(k);
        }
        if !gpus.is_empty() {
            if self.runtime == "docker" {
                // The NVIDIA Container Toolkit's device list: quoted, since it holds commas.
                push("--gpus");
                push(&format!("\"device={}\"", gpus.join(",")));
            } else {
                // podman names GPUs by CDI (`nvidia-ctk cdi generate`: by index and UUID).
                for g in gpus {
                    push("--device");
                    push(&format!("nvidia.com/gpu={g}"));
                }
            }
        }
        for m in mounts {
            a.push("-v".into());
            let mut v = m.as_os_str().to_os_string();
            v.push(":");
            v.push(m);
            a.push(v);
        }
        for m in &spec.mount_sources {
            // Only what is there: a runtime would make a missing source as a directory.
            if m.exists() {
                a.push("-v".into());
                let mut v = m.as_os_str().to_os_string();
                v.push(":");
                v.push(m);
                v.push(":ro");
                a.push(v);
            }
        }
        if let Some(w) = workdir {
            a.push("-w".into());
            a.push(w.clone().into_os_string());
        }
        for s in [image, "bash", "-c", INNER, "gantry-job", setup, run] {
            a.push(OsString::from(s));
        }
        a
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_containers_name_is_the_jobs_and_its_tokens_not_the_token() {
        let c = Container::of("podman", 42, "secret-token");
        assert!(c.name.starts_with("gantry-job-42-"), "{}", c.name);
        assert_eq!(c.name.len(), "gantry-job-42-".len() + 12);
        assert!(!c.name.contains("secret"));
        assert_ne!(c.name, Container::of("podman", 42, "other").name);
    }

    #[test]
    fn gpus_are_asked_for_as_each_runtime_names_them() {
        let spec = crate::backend::local::exec::LaunchSpec {
            job: 1,
            gpu_uuids: vec!["GPU-a".into(), "GPU-b".into()],
            workdir: Some(PathBuf::from("/w")),
            ..Default::default()
        };
        let args = |rt: &str| -> Vec<String> {
            Container::of(rt, 1, "t")
                .run_args("img", &spec, &["A".into()], "", "true")
                .into_iter()
                .map(|s| s.into_string().unwrap())
                .collect()
        };
        let d = args("docker").join(" ");
        assert!(d.contains("--gpus \"device=GPU-a,GPU-b\""), "{d}");
        assert!(d.contains("-e A --gpus"), "{d}");
        assert!(d.contains("-v /w:/w -w /w img bash -c"), "{d}");
        let p = args("podman").join(" ");
        assert!(
            p.contains("--device nvidia.com/gpu=GPU-a --device nvidia.com/gpu=GPU-b"),
            "{p}"
        );
    }
}
