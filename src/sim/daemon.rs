//! The gantry setup on the daemon's own engine: the week's jobs are submitted to a real
//! `State` (its journal in a scratch directory) at their arrival times, and its clock is
//! advanced as the daemon's actor advances it — the same cycles, preemptions, reclaims,
//! purchases, give-backs, consolidations and requeues the daemon makes, over the simulated
//! backend (`backend::sim`), whose runners play each job's process from the workload's model
//! of it (`WorkBook`: its work, checkpoints, restores and worth).
//!
//! What is measured comes from the daemon: what its fleet pays for and holds between two
//! steps (`State::fleet_now`, integrated), its counters, its jobs' bills and states, and its
//! journal's events (hashed). Busy and useful time come from the model of the processes,
//! which only the simulated backend knows. Between two steps the fleet stands still; a run
//! ends at its own time (billing stops there), and the next step sees it.

use super::mix::{Kind, SimJob};
use super::result::{SetupResult, SimConfig};
use crate::api::JobState;
use crate::backend::sim::work::{WorkBook, WorkModel};
use crate::config::fleet::{fleet_at_max, teams_of, FleetConfig};
use crate::daemon::engine::Submission;
use crate::daemon::state::{Messages, State, StateOptions};
use crate::model::idle::IdleLedger;
use crate::model::{default_classes, Fleet, GpuRequest, ModelChoice};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Monday 2026-11-02 00:00 UTC: the workload's day 0 is a Monday (its weekday hours), and the
/// week stays inside one budget month.
const WEEK_STARTS: f64 = 1_793_577_600.0;

/// How often the operator on call sweeps idle GPUs (`gantry reclaim --apply`).
const SWEEP_EVERY_S: f64 = 300.0;

/// Who applies the reclaim plans.
const OPERATOR: &str = "the operator (gantry sim)";

/// A scratch directory for the run's journal, removed when the run ends.
struct Scratch(PathBuf);

impl Scratch {
    fn new(seed: u64) -> Result<Scratch, String> {
        Scratch::sweep_abandoned();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir =
            std::env::temp_dir().join(format!("gantry-sim-{}-{seed}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {} for the run's journal: {e}", dir.display()))?;
        Ok(Scratch(dir))
    }

    /// Removes the scratch directories of runs whose process is gone (interrupted: a
    /// `kill` runs no destructor). A directory is named `gantry-sim-PID-…`.
    fn sweep_abandoned() {
        let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("gantry-sim-"))
                .and_then(|rest| rest.split('-').next())
                .and_then(|p| p.parse::<libc::pid_t>().ok())
            else {
                continue;
            };
            // SAFETY: signal 0 only asks whether the process exists; nothing is sent.
            let gone = unsafe { libc::kill(pid, 0) } == -1
                && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
            if gone {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The spec a workload job is submitted with: what it asks for, in the job file's words.
pub fn spec_of(j: &SimJob, fleet: &Fleet, name: &str) -> String {
    let r = &j.request;
    let models: Vec<&str> = match &r.models {
        ModelChoice::Any => fleet.models.iter().map(|m| m.name.as_str()).collect(),
        ModelChoice::AnyOf(ids) | ModelChoice::Prefer(ids) => {
            ids.iter().map(|&m| fleet.model(m).name.as_str()).collect()
        }
    };
    let count = match r.gpu {
        GpuRequest::Whole(n) => n.to_string(),
        GpuRequest::Fraction(m) => format!("{}", f64::from(m) / 1000.0),
        GpuRequest::Mig(_) | GpuRequest::None => "1".to_string(),
    };
    let mut s = format!("name: {name}\nnum_nodes: {}\nresources:\n", r.nodes);
    if r.gpu != GpuRequest::None {
        let any: Vec<String> = models.iter().map(|m| format!("{m}: {count}")).collect();
        let _ = writeln!(s, "  accelerators: {{{}}}", any.join(", "));
    }
    let _ = writeln!(s, "  use_spot: {}", r.spot_ok);
    let _ = writeln!(s, "  cpus: {}", f64::from(r.cpu_milli) / 1000.0);
    let _ = writeln!(s, "  memory: {}", r.mem_mib / 1024);
    if let GpuRequest::Mig(p) = r.gpu {
        let _ = writeln!(s, "mig: {}g.{}gb", p.compute, p.memory_gb);
    }
    if r.vram_mib > 0 {
        let _ = writeln!(s, "vram: {}GB", r.vram_mib / 1024);
    }
    let _ = writeln!(s, "preemptible: {}", j.preemptible);
    if let Some(c) = j.checkpoint_s {
        let _ = writeln!(s, "checkpoint: {{interval: {}s, grace: 2m}}", c.round());
    }
    if j.kind == Kind::Notebook {
        s.push_str("interactive: true\n");
    }
    let _ = writeln!(s, "run: simulated {}", j.kind.name());
    s
}

/// What the process of `j` does, for the simulated backend.
fn model_of(j: &SimJob, restore_s: f64) -> WorkModel {
    WorkModel {
        tag: j.kind as usize,
        work_s: j.work_s,
        active_s: j.active_s,
        checkpoint_s: j.checkpoint_s,
        restore_s,
        useful_milli: j.useful_milli,
        keeps_all: matches!(j.kind, Kind::Inference | Kind::Notebook),
    }
}

/// Totals integrated step by step.
#[derive(Default)]
struct Tally {
    paid: f64,
    held: f64,
    spend: f64,
    /// (paid GPU-h, held GPU-h, spend) by capacity type.
    by_capacity: [(f64, f64, f64); 3],
    /// (paid, held) GPU-hours by pool.
    by_pool: Vec<(f64, f64)>,
    /// Held GPU-hours by team.
    team_held: Vec<f64>,
    peak: usize,
}

/// Runs the week's `jobs` (sorted by arrival, as `mix::generate` makes them) through the
/// daemon's engine on the (already scaled) fleet file.
pub fn run(cfg: &FleetConfig, jobs: &[SimJob], sim: &SimConfig) -> Result<SetupResult, String> {
    let scratch = Scratch::new(sim.seed)?;
    let book = WorkBook::default();
    let opts = StateOptions {
        seed: sim.seed,
        failures_per_node_hour: sim.failures_per_node_hour,
        messages: Messages::File(scratch.0.join("daemon.log")),
        wall_clock: Some(WEEK_STARTS),
        work: Some(book.clone()),
        headless: true,
        ..StateOptions::default()
    };
    let mut cfg = cfg.clone();
    cfg.scale.rebalance &= sim.consolidate;
    let cfg = &cfg;
    let mut s = State::open(&scratch.0.join("sim.db"), cfg, &opts).map_err(|e| e.to_string())?;
    s.set_history_kept(sim.history_kept);
    let err = |e: crate::daemon::engine::EngineError| e.to_string();
    let fleet = fleet_at_max(cfg);
    let teams = teams_of(cfg);
    let classes = default_classes();
    let end = sim.days * 86_400.0;
    let capacity: Vec<usize> = cfg.pools.iter().map(|p| p.capacity as usize).collect();
    let mut t = Tally {
        by_pool: vec![(0.0, 0.0); cfg.pools.len()],
        team_held: vec![0.0; teams.len()],
        ..Tally::default()
    };
    let mut idle = IdleLedger::new(cfg.pools.len());
    // Each submitted job's daemon id, by workload index; refused ones are never fit.
    let mut ids: Vec<Option<i64>> = vec![None; jobs.len()];
    let mut never_fit = 0;
    let mut next = 0;
    let mut next_sweep = SWEEP_EVERY_S;
    // Notebooks not yet closed, and how long each stays open once started.
    let mut notebooks: Vec<(i64, f64)> = Vec::new();
    let start = s.now();
    loop {
        let now = s.now() - start;
        // Every job that has arrived, at its own time.
        let mut batch = Vec::new();
        let first = next;
        while next < jobs.len() && jobs[next].arrive <= now + 1e-9 {
            let j = &jobs[next];
            batch.push(Submission {
                file: format!("{}-{next}.yaml", j.kind.name()),
                text: spec_of(j, &fleet, &format!("{}-{next}", j.kind.name())).into_bytes(),
                team: Some(teams[j.team].name.clone()),
                priority: Some(classes[j.class].name.clone()),
                user: Some("gantry-sim".to_string()),
                ..Submission::default()
            });
            next += 1;
        }
        if !batch.is_empty() {
            for (k, r) in s.submit(&batch).into_iter().enumerate() {
                match r {
                    Ok(id) => {
                        let j = &jobs[first + k];
                        book.model(id, model_of(j, sim.restore_s));
                        ids[first + k] = Some(id);
                        if j.kind == Kind::Notebook {
                            notebooks.push((id, j.work_s));
                        }
                    }
                    Err(crate::daemon::engine::EngineError::NeverFits(_)) => never_fit += 1,
                    Err(e) => {
                        return Err(format!(
                            "the daemon refused workload job {} ({}): {e}",
                            first + k,
                            jobs[first + k].kind.name()
                        ))
                    }
                }
            }
            s.tick().map_err(err)?;
        }
        if now >= end - 1e-9 {
            break;
        }
        let until = jobs
            .get(next)
            .map_or(end, |j| j.arrive)
            .min(now + sim.cycle_s)
            .min(end);
        let dt = (until - now).max(1e-3);
        // The fleet as the daemon holds it until the next step.
        let pools = s.fleet_now();
        let h = dt / 3600.0;
        let mut paid_gpus = 0;
        let mut milli = Vec::with_capacity(pools.len());
        for (i, p) in pools.iter().enumerate() {
            let (paid, held) = (p.paid_gpus as f64 * h, p.held_milli as f64 / 1000.0 * h);
            let spend = p.dollars_per_hour * h;
            paid_gpus += p.paid_gpus;
            t.paid += paid;
            t.held += held;
            t.spend += spend;
            let c = &mut t.by_capacity[capacity[i]];
            c.0 += paid;
            c.1 += held;
            c.2 += spend;
            t.by_pool[i].0 += paid;
            t.by_pool[i].1 += held;
            milli.push(p.idle_milli);
        }
        idle.charge(dt, &milli);
        t.peak = t.peak.max(paid_gpus);
        for j in s.engine().jobs() {
            if let Some(p) = &j.placement {
                t.team_held[j.team] += p.gpu_milli() as f64 / 1000.0 * h;
            }
        }
        s.advance(dt).map_err(err)?;
        // The operator on call sweeps idle GPUs: shows the daemon's reclaim plan and applies
        // it, as `gantry reclaim --apply` does.
        if s.now() - start >= next_sweep {
            next_sweep += SWEEP_EVERY_S;
            let plan = s.show_reclaim();
            if !plan.items.is_empty() {
                s.apply_reclaim(OPERATOR, &plan.id).map_err(err)?;
            }
            close_notebooks(&mut s, &book, &mut notebooks).map_err(err)?;
        }
    }
    let close = s.now();
    book.close(close);
    Ok(results(
        &mut s, jobs, &ids, never_fit, &book, t, idle, sim, close,
    ))
}

/// Their owners close the notebooks they are done with: one that was suspended for idling is
/// cancelled when it would have been closed had it kept running (its start plus the time it
/// stays open); one still running ends by itself then (its process's model).
fn close_notebooks(
    s: &mut State,
    book: &WorkBook,
    notebooks: &mut Vec<(i64, f64)>,
) -> Result<(), crate::daemon::engine::EngineError> {
    let now = s.now();
    let mut close = Vec::new();
    notebooks.retain(|&(id, open_s)| {
        let Some(state) = s.engine().job(id).map(|j| j.state) else {
            return false;
        };
        if state.is_final() {
            return false;
        }
        let due = book.first_start(id).is_some_and(|t| now >= t + open_s);
        if due && state == JobState::Held {
            close.push(id);
            return false;
        }
        true
    });
    for id in close {
        s.act(id, crate::daemon::state::Action::Cancel, OWNER)?;
    }
    Ok(())
}

/// Who closes the notebooks.
const OWNER: &str = "its owner (gantry sim)";

/// The daemon's figures as `gantry sim` reports them.
#[allow(clippy::too_many_arguments)]
fn results(
    s: &mut State,
    jobs: &[SimJob],
    ids: &[Option<i64>],
    never_fit: usize,
    book: &WorkBook,
    t: Tally,
    idle: IdleLedger,
    sim: &SimConfig,
    close: f64,
) -> SetupResult {
    let mut out = SetupResult {
        setup: "gantry".to_string(),
        engine: "daemon".to_string(),
        jobs: jobs.len(),
        never_fit,
        paid_gpu_hours: t.paid,
        allocated_gpu_hours: t.held,
        spend_usd: t.spend,
        peak_gpus: t.peak,
        ..SetupResult::default()
    };
    let (busy, useful, by_tag) = book.read(|b| {
        (
            b.busy_gpu_s / 3600.0,
            b.useful_gpu_s / 3600.0,
            b.useful_by_tag.clone(),
        )
    });
    out.busy_gpu_hours = busy;
    out.useful_gpu_hours = useful;
    out.useful_gpu_hours_by_kind = Kind::ALL
        .iter()
        .map(|k| {
            let h = by_tag.get(&(*k as usize)).copied().unwrap_or(0.0) / 3600.0;
            (k.name().to_string(), h)
        })
        .collect();
    let fleet = s.engine().fleet();
    let paths: Vec<String> = (0..t.by_pool.len())
        .map(|i| fleet.pool_path(crate::model::PoolId(i as u32)))
        .collect();
    out.close_books(&t.by_capacity, &t.by_pool, &idle, &paths);
    // Bills and states: the ended jobs from the journal (the engine keeps only the newest in
    // memory), the others — running or waiting, always in memory — with their current run.
    let teams = s.team_names();
    let mut team_spend = vec![0.0; teams.len()];
    let mut state_of: HashMap<i64, JobState> = HashMap::new();
    for r in s.ended_jobs().unwrap_or_default() {
        if let Some(t) = teams.iter().position(|n| *n == r.team) {
            team_spend[t] += r.cost;
        }
        state_of.insert(r.id, r.state);
    }
    for j in s.engine().live_jobs() {
        team_spend[j.team] += j.cost_at(close);
        state_of.insert(j.id, j.state);
    }
    out.bill_teams(
        teams
            .into_iter()
            .zip(team_spend)
            .zip(&t.team_held)
            .map(|((team, usd), &held)| (team, usd, held)),
    );
    let end = sim.days * 86_400.0;
    let mut waits: [Vec<f64>; 3] = Default::default();
    for (j, id) in jobs.iter().zip(ids) {
        let Some(id) = *id else { continue };
        let state = state_of.get(&id).copied();
        match state {
            Some(JobState::Completed) => out.finished += 1,
            Some(JobState::Pending | JobState::Running | JobState::Preempting) => {
                out.unfinished += 1
            }
            _ => {}
        }
        let wait = match book.first_start(id) {
            Some(at) => at - j.arrive,
            // Censored: still waiting at the end.
            None if state == Some(JobState::Pending) => end - j.arrive,
            None => continue,
        };
        if let Some(w) = waits.get_mut(j.class) {
            w.push(wait.max(0.0));
        }
    }
    out.set_queue_waits(&mut waits);
    let c = &s.counters;
    out.preemptions = c.preemptions;
    out.spot_interruptions = c.spot_interruptions;
    out.node_failures = c.node_failures;
    out.reclaimed_jobs = c.reclaimed_jobs;
    out.reclaimed_gpu_hours = c.reclaimed_gpu_hours;
    out.consolidated_nodes = c.consolidated_nodes;
    out.defragmented = c.defragmented;
    out.moved_jobs = c.moved_jobs;
    out.scale_ups = c.scale_ups;
    out.scale_downs = c.scale_downs;
    // The journal's events, in order, hashed (and kept when asked).
    let mut events = s.events(None, usize::MAX).unwrap_or_default();
    events.sort_by_key(|e| e.seq);
    let mut hash = Sha256::new();
    for e in &events {
        let line = format!("{:.3} {} {}", e.at, e.kind, e.detail);
        hash.update(line.as_bytes());
        hash.update(b"\n");
        if sim.keep_events {
            out.event_log.push(line);
        }
    }
    out.events = events.len() as u64;
    out.event_hash = format!("{:x}", hash.finalize());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fleet::{parse, DEFAULT_FLEET};
    use crate::sim::mix::{generate, MixConfig};

    #[test]
    fn a_scratch_directory_left_by_a_killed_run_is_removed_and_a_live_ones_kept() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let tmp = std::env::temp_dir();
        let left = tmp.join(format!("gantry-sim-{dead}-1-7"));
        let live = tmp.join(format!("gantry-sim-{}-1-7", std::process::id()));
        for d in [&left, &live] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::write(d.join("sim.db"), b"x").unwrap();
        }
        Scratch::sweep_abandoned();
        assert!(!left.exists(), "the dead run's directory is removed");
        assert!(live.exists(), "a running one's is kept");
        std::fs::remove_dir_all(&live).unwrap();
    }

    #[test]
    fn every_workload_job_is_a_spec_the_daemon_resolves_to_the_same_request() {
        let cfg = parse("default", DEFAULT_FLEET).unwrap();
        let fleet = fleet_at_max(&cfg);
        let jobs = generate(
            &crate::sim::start_fleet(&cfg),
            &teams_of(&cfg),
            &MixConfig {
                days: 2.0,
                load: 0.8,
                seed: 3,
            },
        );
        for (i, j) in jobs.iter().enumerate() {
            let text = spec_of(j, &fleet, &format!("job-{i}"));
            let spec = crate::spec::parse("job.yaml", text.as_bytes())
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            let got = spec
                .to_request(&fleet)
                .unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(got, j.request, "{text}");
        }
    }
}
