//! The local host as a backend: the agent that SSH hosts run (`backend::agent`), run inside
//! the daemon instead, its messages going straight to the daemon's event queue. So this host
//! and a remote one differ only in the link: runs, re-adoption after a restart (each run is a
//! file in the agent's directory), exit statuses, logs and NVML telemetry are the same code.

use crate::backend::agent::{self, AgentDirs, Sampling, ToAgent};
use crate::backend::logs::{DirReader, LogReader};
use crate::backend::{Launch, RunEvent, Runner};
use std::sync::{mpsc, Arc, Mutex};

/// This host: one node.
pub struct LocalPool {
    agent: agent::Running,
    events: mpsc::Receiver<RunEvent>,
    logs: Arc<DirReader>,
    /// Where the agent keeps its runs (`gantry agent-enter` reads them).
    runs: std::path::PathBuf,
}

impl LocalPool {
    /// Starts the agent over `dirs`. Its hello (with the runs a previous daemon left) is
    /// queued before this returns, so the first `poll` finds the host up.
    pub fn open(
        dirs: &AgentDirs,
        sampling: Sampling,
        retention: crate::backend::retention::Retention,
        wake: crate::backend::Wake,
    ) -> Result<LocalPool, crate::backend::error::OpenWhy> {
        let (tx, events) = mpsc::channel();
        // The sender is shared by the agent's threads; a Mutex makes it Sync.
        let tx = Mutex::new(tx);
        let say: agent::Say = Arc::new(move |msg| {
            if let (Some(event), Ok(tx)) = (msg.event(0), tx.lock()) {
                wake.after(event, |e| {
                    let _ = tx.send(e);
                });
            }
        });
        let agent = agent::start(dirs, sampling, retention, say).map_err(|e| {
            crate::backend::error::OpenWhy::Host(format!(
                "cannot keep this host's runs in {}: {e}",
                dirs.runs.display()
            ))
        })?;
        Ok(LocalPool {
            agent,
            events,
            logs: Arc::new(DirReader(dirs.logs.clone())),
            runs: dirs.runs.clone(),
        })
    }
}

impl Runner for LocalPool {
    fn kind(&self) -> &'static str {
        "local"
    }

    fn on_daemon_host(&self) -> bool {
        true
    }

    fn address(&self, _host: usize) -> String {
        "127.0.0.1".to_string()
    }

    fn start(&mut self, _host: usize, launch: Launch) {
        self.agent.handle(ToAgent::Start(Box::new(launch)));
    }

    fn stop(&mut self, _host: usize, job: i64, token: &str, signal: &str, grace_s: f64) {
        self.agent.handle(ToAgent::Stop {
            job,
            token: token.to_string(),
            signal: signal.to_string(),
            grace_s,
        });
    }

    fn kill(&mut self, _host: usize, job: i64, token: &str) {
        self.agent.handle(ToAgent::Kill {
            job,
            token: token.to_string(),
        });
    }

    fn forget(&mut self, _host: usize, job: i64, token: &str) {
        self.agent.handle(ToAgent::Forget {
            job,
            token: token.to_string(),
        });
    }

    fn poll(&mut self, _now: f64) -> Vec<RunEvent> {
        self.events.try_iter().collect()
    }

    fn enter(
        &self,
        _host: usize,
        job: i64,
        tty: bool,
        argv: &[String],
    ) -> Result<std::process::Command, String> {
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find this gantry binary to enter job {job}: {e}"))?;
        let mut cmd = std::process::Command::new(exe);
        cmd.args(crate::backend::enter::args(
            Some(&self.runs),
            job,
            tty,
            argv,
        ));
        Ok(cmd)
    }

    fn logs(&self) -> Arc<dyn LogReader> {
        self.logs.clone()
    }

    fn logs_of(&self, job: i64) -> Vec<usize> {
        use crate::backend::logs::{log_path, Stream};
        let kept = [Stream::Out, Stream::Err]
            .iter()
            .any(|&s| log_path(&self.logs.0, job, s).exists());
        if kept {
            vec![0]
        } else {
            Vec::new()
        }
    }
}
