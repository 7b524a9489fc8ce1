//! Jobs the scheduler places on the local host (`provider = "local"` pools) run as real
//! processes (`backend::local::exec`): each in its own process group with its logs in the
//! daemon's log directory. Exits are polled on the daemon's clock; a preemption sends the
//! spec's signal and SIGKILLs the group when the grace period ends. Process groups are
//! journaled, so a restarted daemon kills what its predecessor left and requeues those jobs.

use crate::backend::local::exec::{self, Exit, LaunchSpec, Running};
use crate::daemon::journal::JobId;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub struct LocalRun {
    pub running: Running,
    /// Daemon time at which the group is SIGKILLed (set by a stop).
    pub kill_at: Option<f64>,
}

#[derive(Default)]
pub struct LocalRuns {
    pub runs: BTreeMap<JobId, LocalRun>,
    pub log_dir: PathBuf,
}

impl LocalRuns {
    pub fn new(log_dir: PathBuf) -> LocalRuns {
        LocalRuns {
            runs: BTreeMap::new(),
            log_dir,
        }
    }

    /// Starts a job's `setup` and `run` as a process group; the error says why it could not.
    pub fn launch(
        &mut self,
        id: JobId,
        spec: &crate::spec::JobSpec,
        gpu_uuids: Vec<String>,
    ) -> Result<u32, String> {
        let run = spec
            .run
            .clone()
            .ok_or("the spec has no `run` command to start on the local host")?;
        let running = exec::launch(&LaunchSpec {
            job: id,
            setup: spec.setup.clone(),
            run,
            workdir: spec.workdir.as_ref().map(PathBuf::from),
            envs: spec.envs.clone(),
            gpu_uuids,
            checkpoint_dir: spec
                .checkpoint
                .as_ref()
                .and_then(|c| c.dir.as_ref())
                .map(PathBuf::from),
            log_dir: self.log_dir.clone(),
        })
        .map_err(|e| e.to_string())?;
        let pid = running.pid;
        self.runs.insert(
            id,
            LocalRun {
                running,
                kill_at: None,
            },
        );
        Ok(pid)
    }

    /// Jobs that have exited since the last poll, with how.
    pub fn exited(&mut self) -> Vec<(JobId, Exit)> {
        let mut out = Vec::new();
        for (id, r) in &mut self.runs {
            match r.running.try_exit() {
                Ok(Some(exit)) => out.push((*id, exit)),
                Ok(None) => {}
                Err(_) => out.push((*id, Exit::Code(-1))),
            }
        }
        for (id, _) in &out {
            self.runs.remove(id);
        }
        out
    }

    /// Sends the stop signal now; the group is killed at `kill_at` if it is still there.
    pub fn stop(&mut self, id: JobId, signal: i32, kill_at: f64) -> bool {
        match self.runs.get_mut(&id) {
            Some(r) => {
                r.running.signal(signal);
                r.kill_at = Some(kill_at);
                true
            }
            None => false,
        }
    }

    /// SIGKILLs the groups whose grace period ended by `now`.
    pub fn kill_due(&mut self, now: f64) {
        for r in self.runs.values_mut() {
            if r.kill_at.is_some_and(|t| t <= now) {
                r.running.signal(libc::SIGKILL);
                r.kill_at = None;
            }
        }
    }

    /// Kills a job's group at once (a cancel) and forgets it.
    pub fn kill(&mut self, id: JobId) {
        if let Some(mut r) = self.runs.remove(&id) {
            r.running.signal(libc::SIGKILL);
            let _ = r.running.wait();
        }
    }
}

/// Kills a process group a previous daemon left (true if it was still alive).
pub fn kill_orphan(pgid: u32) -> bool {
    // SAFETY: kill(2) on a negative pid signals that process group; signal 0 only checks it.
    unsafe {
        let alive = libc::kill(-(pgid as i32), 0) == 0;
        if alive {
            libc::kill(-(pgid as i32), libc::SIGKILL);
        }
        alive
    }
}

/// The last `n` lines of a job's stdout and stderr logs, if it ran on this host.
pub fn log_tail(dir: &Path, id: JobId, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    for stream in ["out", "err"] {
        let Ok(text) = std::fs::read_to_string(dir.join(format!("job-{id}.{stream}"))) else {
            continue;
        };
        let lines: Vec<&str> = text.lines().collect();
        for l in &lines[lines.len().saturating_sub(n)..] {
            out.push(format!("{stream}: {l}"));
        }
    }
    out
}
