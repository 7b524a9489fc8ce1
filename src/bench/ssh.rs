//! `gantry bench ssh`: the SSH backend against real hosts (any `ssh` destinations; this
//! project measures loopback `sshd`s). Two figures, through the daemon's own state: from the
//! scheduling cycle that places a job to its first output line in the log on the host (warm
//! connection), and a restart that re-adopts N running jobs (from opening the journal to every
//! job confirmed running by its host).

use super::rounds::{open, run_until};
use crate::daemon::engine::Submission;
use crate::daemon::state::{Action, State};
use serde::Serialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

pub struct SshBenchConfig {
    pub hosts: Vec<String>,
    pub ssh_config: Option<PathBuf>,
    pub identity_file: Option<PathBuf>,
    /// First-output samples.
    pub launches: usize,
    /// Running jobs a restart re-adopts.
    pub jobs: usize,
    /// Rounds of `round_jobs` short jobs run through after, the memory measured after each.
    pub rounds: usize,
    pub round_jobs: usize,
    pub dir: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
pub struct SshBenchReport {
    pub hosts: usize,
    pub connect_s: f64,
    pub launches: usize,
    pub first_output_p50_ms: f64,
    pub first_output_max_ms: f64,
    pub jobs: usize,
    /// Opening the state again to every job confirmed running.
    pub readopt_s: f64,
    pub rounds: Vec<super::RoundMemory>,
}

fn fleet(c: &SshBenchConfig) -> String {
    let hosts: Vec<String> = c.hosts.iter().map(|h| format!("{h:?}")).collect();
    let mut t = format!(
        "[[teams]]\nname = \"bench\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"bench\"\nzone = \"bench\"\nname = \"bench\"\ninstance_type = \"ssh host\"\ncpus = {}\nmemory_gb = 1024\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [{}]\n",
        c.jobs.max(1) + 8,
        hosts.join(", ")
    );
    t.push_str("[pools.ssh]\n");
    if let Some(f) = &c.ssh_config {
        t.push_str(&format!("config = {:?}\n", f.display().to_string()));
    }
    if let Some(f) = &c.identity_file {
        t.push_str(&format!("identity_file = {:?}\n", f.display().to_string()));
    }
    t
}

fn submit(state: &mut State, run: &str) -> Result<i64, String> {
    let sub = Submission {
        file: "bench".to_string(),
        text: format!("name: bench\nresources:\n  cpus: 1\nrun: {run}\n").into_bytes(),
        team: Some("bench".to_string()),
        // The bench's jobs are its user's (a root daemon runs none for nobody).
        user: crate::unix_user::this_user(),
        ..Submission::default()
    };
    state.submit(&[sub]).remove(0).map_err(|e| e.to_string())
}

pub fn run(c: &SshBenchConfig) -> Result<SshBenchReport, String> {
    let cfg = crate::config::fleet::parse("bench fleet", &fleet(c)).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&c.dir).map_err(|e| e.to_string())?;
    let db = c.dir.join("bench.db");
    let t0 = Instant::now();
    let mut state = open(&db, &cfg, &c.dir)?;
    run_until(&mut state, Duration::from_secs(120), "the hosts", |s| {
        let (up, all) = s.hosts_up();
        up == all
    })?;
    let connect_s = t0.elapsed().as_secs_f64();
    let mut first = Vec::new();
    for _ in 0..c.launches {
        let id = submit(&mut state, "'echo first; sleep 60'")?;
        let t = Instant::now();
        state.tick().map_err(|e| e.to_string())?;
        // Read as `gantry logs` reads them: through the host's agent, off the state.
        let q = crate::backend::logs::LogQuery {
            tail: 5,
            after: None,
            partial: true,
        };
        run_until(&mut state, Duration::from_secs(30), "the first line", |s| {
            s.job_logs(id).is_ok_and(|l| {
                l.sources.iter().any(|src| {
                    src.read(id, &q, Duration::from_secs(1))
                        .is_ok_and(|r| r.lines.iter().any(|x| x.text == "first"))
                })
            })
        })?;
        first.push(t.elapsed().as_secs_f64() * 1000.0);
        state
            .act(id, Action::Cancel, "bench")
            .map_err(|e| e.to_string())?;
    }
    first.sort_by(f64::total_cmp);
    let mut ids = Vec::new();
    for _ in 0..c.jobs {
        ids.push(submit(&mut state, "'sleep 600'")?);
    }
    state.tick().map_err(|e| e.to_string())?;
    let n = c.jobs;
    run_until(
        &mut state,
        Duration::from_secs(120),
        "the jobs to run",
        |s| s.runs_confirmed() >= n,
    )?;
    drop(state);
    let t = Instant::now();
    let mut state = open(&db, &cfg, &c.dir)?;
    run_until(&mut state, Duration::from_secs(120), "re-adoption", |s| {
        let (up, all) = s.hosts_up();
        up == all && s.runs_confirmed() >= n
    })?;
    let readopt_s = t.elapsed().as_secs_f64();
    for id in ids {
        let _ = state.act(id, Action::Cancel, "bench");
    }
    // The kills are sent; give the links a moment to deliver them before the state goes.
    run_until(&mut state, Duration::from_secs(2), "", |_| false).ok();
    let rounds = super::rounds::run(&mut state, c.rounds, c.round_jobs)?;
    Ok(SshBenchReport {
        hosts: c.hosts.len(),
        connect_s,
        launches: first.len(),
        first_output_p50_ms: first.get(first.len() / 2).copied().unwrap_or(0.0),
        first_output_max_ms: first.last().copied().unwrap_or(0.0),
        jobs: n,
        readopt_s,
        rounds,
    })
}
