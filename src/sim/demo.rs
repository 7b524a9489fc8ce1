//! A living demo: the engine over the built-in fleet, fed a seeded mix of work (training gangs,
//! sweeps, evaluations, notebooks on GPU shares, an inference service on MIG slices), each job
//! finishing after a seeded duration. Deterministic for a seed and a sequence of steps.

use crate::client::{Client, JobRow, PoolRow, Snapshot, TeamRow};
use crate::config::fleet::{classes_of, fleet_of, parse, teams_of, DEFAULT_FLEET};
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::job::JobState;
use crate::model::{GpuRequest, GpuShare};
use crate::scheduler::cycle::PendingReason;
use crate::scheduler::rng::Rng;
use std::collections::{HashMap, VecDeque};
use std::path::Path;

/// (name, team, priority, spec body, mean duration in seconds)
const WORK: &[(&str, &str, &str, &str, f64)] = &[
    ("llama-pretrain", "ml-research", "production", "num_nodes: 2\nresources:\n  accelerators: H100:8\ncheckpoint: {interval: 30m, signal: SIGUSR1, grace: 2m}\ntime_limit: 24h\nrun: torchrun train.py\n", 6.0 * 3600.0),
    ("lr-sweep", "ml-research", "experiment", "resources:\n  accelerators: H100:1\n  use_spot: true\ntime_limit: 2h\nrun: python sweep.py\n", 3600.0),
    ("eval-harness", "applied", "experiment", "resources:\n  accelerators: {A100-80GB: 4, H100: 4}\ntime_limit: 3h\nrun: python eval.py\n", 1.5 * 3600.0),
    ("finetune", "applied", "production", "resources:\n  accelerators: [H200:8, H100:8]\n  use_spot: true\ntime_limit: 8h\nrun: python finetune.py\n", 4.0 * 3600.0),
    ("notebook", "applied", "experiment", "resources:\n  accelerators: A10G:0.5\n  use_spot: true\nrun: jupyter lab\n", 2.0 * 3600.0),
    ("vllm-serve", "inference", "serving", "resources:\n  accelerators: A100-80GB\nmig: 3g.40gb\npreemptible: false\nrun: python -m vllm.entrypoints.openai.api_server\n", 12.0 * 3600.0),
    ("embed-batch", "default", "experiment", "resources:\n  accelerators: L40S:2\n  use_spot: true\ntime_limit: 1h\nrun: python embed.py\n", 1800.0),
];

pub struct Demo {
    engine: Engine,
    rng: Rng,
    now: f64,
    ends: HashMap<i64, f64>,
    events: VecDeque<String>,
    snapshot: Snapshot,
    teams: Vec<String>,
    /// Priority class names, in the engine's order.
    classes: Vec<String>,
    team_config: Vec<crate::config::fleet::TeamConfig>,
    /// Simulated seconds per step.
    pub step_s: f64,
    counter: u64,
}

impl Demo {
    /// A demo whose journal lives in `dir` (a fresh directory: demo state is not kept).
    pub fn new(dir: &Path, seed: u64) -> Result<Demo, EngineError> {
        let cfg =
            parse("built-in", DEFAULT_FLEET).map_err(|e| EngineError::NeverFits(e.to_string()))?;
        let teams = teams_of(&cfg);
        let names = teams.iter().map(|t| t.name.clone()).collect();
        let classes = classes_of(&cfg);
        let class_names = classes.iter().map(|c| c.name.clone()).collect();
        let engine = Engine::open(&dir.join("demo.db"), fleet_of(&cfg), teams, classes, 0.0)?;
        let mut d = Demo {
            engine,
            rng: Rng::new(seed),
            now: 0.0,
            ends: HashMap::new(),
            events: VecDeque::new(),
            snapshot: Snapshot::default(),
            teams: names,
            classes: class_names,
            team_config: cfg.teams.clone(),
            step_s: 60.0,
            counter: 0,
        };
        // A morning's backlog, so the first screen is already busy.
        for _ in 0..40 {
            d.submit_one()?;
        }
        d.step()?;
        Ok(d)
    }

    fn log(&mut self, what: String) {
        let t = self.now as u64;
        self.events
            .push_front(format!("{:02}:{:02} {what}", t / 3600 % 24, t / 60 % 60));
        self.events.truncate(200);
    }

    fn submit_one(&mut self) -> Result<(), EngineError> {
        let (name, team, class, body, _) = WORK[self.rng.below(WORK.len() as u64) as usize];
        self.counter += 1;
        let spec = format!("name: {name}-{}\n{body}", self.counter);
        let id = self
            .engine
            .submit("demo", spec.as_bytes(), Some(team), Some(class), self.now)?;
        self.log(format!(
            "job {id} {name}-{} submitted by {team} ({class})",
            self.counter
        ));
        Ok(())
    }

    /// Advances the simulated clock one step: arrivals, completions, a scheduling cycle.
    pub fn step(&mut self) -> Result<(), EngineError> {
        self.now += self.step_s;
        let due: Vec<i64> = self
            .ends
            .iter()
            .filter(|(_, &t)| t <= self.now)
            .map(|(&id, _)| id)
            .collect();
        for id in due {
            self.ends.remove(&id);
            let ok = self.rng.below(20) != 0;
            self.engine.finished(id, ok, self.now)?;
            self.log(format!(
                "job {id} {}",
                if ok { "completed" } else { "failed (exit 1)" }
            ));
        }
        if self.rng.below(3) == 0 {
            self.submit_one()?;
        }
        let report = self.engine.tick(self.now)?;
        for id in report.started {
            let base = self
                .engine
                .job(id)
                .and_then(|j| {
                    WORK.iter()
                        .find(|w| j.name.as_deref().is_some_and(|n| n.starts_with(w.0)))
                        .map(|w| w.4)
                })
                .unwrap_or(3600.0);
            let duration = base * (0.5 + self.rng.unit());
            self.ends.insert(id, self.now + duration);
            self.log(format!("job {id} started"));
        }
        self.snapshot = self.build_snapshot();
        Ok(())
    }

    fn build_snapshot(&self) -> Snapshot {
        let fleet = self.engine.fleet();
        let mut pools: Vec<PoolRow> = fleet
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| PoolRow {
                path: fleet.pool_path(crate::model::PoolId(i as u32)),
                short: format!(
                    "{}/{}",
                    fleet.regions[fleet.zones[p.zone.index()].region as usize].provider,
                    p.name
                ),
                instance: p.instance_type.clone(),
                model: p
                    .model
                    .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
                capacity: p.capacity.to_string(),
                dollars_per_hour: p.price_per_hour,
                ..PoolRow::default()
            })
            .collect();
        for n in &fleet.nodes {
            let row = &mut pools[n.pool.index()];
            row.nodes += 1;
            row.gpus += n.gpus.len();
            row.gpus_busy += n.gpus.iter().filter(|g| !g.is_idle()).count();
        }
        let gpus_total: usize = pools.iter().map(|p| p.gpus).sum();
        let gpus_busy: usize = pools.iter().map(|p| p.gpus_busy).sum();
        let dollars: f64 = pools
            .iter()
            .map(|p| p.dollars_per_hour * p.nodes as f64)
            .sum();
        let idle_dollars: f64 = pools
            .iter()
            .map(|p| {
                if p.gpus == 0 {
                    0.0
                } else {
                    p.dollars_per_hour * p.nodes as f64 * (p.gpus - p.gpus_busy) as f64
                        / p.gpus as f64
                }
            })
            .sum();
        let mut jobs: Vec<JobRow> =
            self.engine
                .jobs()
                .filter(|j| !j.state.is_final() || self.now - j.submitted_at < 6.0 * 3600.0)
                .map(|j| {
                    let gpus = match (j.request.gpu, j.request.nodes) {
                        (GpuRequest::None, _) => "cpu".to_string(),
                        (GpuRequest::Whole(n), 1) => format!("{n}"),
                        (GpuRequest::Whole(n), k) => format!("{k}×{n}"),
                        (GpuRequest::Fraction(m), _) => format!("{:.2}", f64::from(m) / 1000.0),
                        (GpuRequest::Mig(p), _) => p.to_string(),
                    };
                    let (detail, position) = match (&j.placement, &j.explanation) {
                        (Some(p), _) => {
                            let node = &fleet.node(p.nodes[0].node).name;
                            let share = p.nodes[0].gpus.first().map_or(String::new(), |g| match g
                                .share
                            {
                                GpuShare::Mig { start, .. } => {
                                    format!(" gpu{} slice@{start}", g.gpu)
                                }
                                _ => String::new(),
                            });
                            let more = if p.nodes.len() > 1 {
                                format!(" +{} nodes", p.nodes.len() - 1)
                            } else {
                                String::new()
                            };
                            (
                                format!("{node}{share}{more} ${:.2}/h", p.price_per_hour),
                                None,
                            )
                        }
                        (None, Some(e)) => (reason_text(&e.reason), Some(e.position)),
                        (None, None) => (String::new(), None),
                    };
                    let since = j.started_at.unwrap_or(j.submitted_at);
                    JobRow {
                        id: j.id,
                        name: j.name.clone().unwrap_or_default(),
                        team: self.team_name(j.team),
                        class: self.class_name(j.class),
                        state: j.state.to_string(),
                        gpus,
                        age_s: self.now - since,
                        position,
                        detail,
                    }
                })
                .collect();
        jobs.sort_by_key(|j| {
            (
                state_order(&j.state),
                j.position.unwrap_or(usize::MAX),
                -j.id,
            )
        });
        let mut queue_by_class: Vec<(String, usize)> =
            self.classes.iter().map(|c| (c.clone(), 0)).collect();
        for j in self.engine.jobs().filter(|j| j.state == JobState::Pending) {
            if let Some(q) = queue_by_class
                .iter_mut()
                .find(|(c, _)| *c == self.class_name(j.class))
            {
                q.1 += 1;
            }
        }
        let mut teams: Vec<TeamRow> = self
            .team_config
            .iter()
            .map(|t| TeamRow {
                name: t.name.clone(),
                cohort: t.cohort.clone().unwrap_or_default(),
                weight: t.weight,
                guaranteed: t.guaranteed,
                borrow_limit: t.borrow_limit,
                budget_monthly_usd: t.budget_monthly_usd,
                ..TeamRow::default()
            })
            .collect();
        for j in self.engine.jobs() {
            let Some(row) = teams.get_mut(j.team) else {
                continue;
            };
            match j.state {
                JobState::Running | JobState::Preempting => {
                    row.running += 1;
                    row.used_gpus += j.request.total_gpu_milli() as f64 / 1000.0;
                    row.burn_per_hour += j.placement.as_ref().map_or(0.0, |p| p.price_per_hour);
                }
                JobState::Pending => row.pending += 1,
                _ => {}
            }
        }
        for row in &mut teams {
            row.borrowed_gpus = row
                .guaranteed
                .map_or(0.0, |g| (row.used_gpus - f64::from(g)).max(0.0));
        }
        Snapshot {
            teams,
            simulated: true,
            now: self.now,
            pools,
            gpus_total,
            gpus_busy,
            dollars_per_hour: dollars,
            idle_dollars_per_hour: idle_dollars,
            jobs,
            queue_by_class,
            events: self.events.iter().take(50).cloned().collect(),
        }
    }

    fn team_name(&self, i: usize) -> String {
        self.teams
            .get(i)
            .cloned()
            .unwrap_or_else(|| "?".to_string())
    }

    fn class_name(&self, i: usize) -> String {
        self.classes
            .get(i)
            .cloned()
            .unwrap_or_else(|| "?".to_string())
    }
}

fn state_order(s: &str) -> u8 {
    match s {
        "running" | "preempting" => 0,
        "pending" => 1,
        "held" => 2,
        _ => 3,
    }
}

/// One line for why a job waits.
pub fn reason_text(r: &PendingReason) -> String {
    match r {
        PendingReason::Held => "held".to_string(),
        PendingReason::Quota { wants, used, guaranteed, borrow_limit, cohort_idle } => format!(
            "quota: wants {:.1} GPU, team uses {:.1}/{:.0} guaranteed, may borrow {:.0}, cohort idle {:.1}",
            *wants as f64 / 1000.0,
            *used as f64 / 1000.0,
            *guaranteed as f64 / 1000.0,
            *borrow_limit as f64 / 1000.0,
            *cohort_idle as f64 / 1000.0
        ),
        PendingReason::NoCapacity { why, reservation } => {
            let behind = reservation.map_or(String::new(), |(j, _)| format!(" (behind job {j}'s reservation)"));
            format!("{why}{behind}")
        }
        PendingReason::AwaitingPreemption { victims } => format!("preempting {} job(s) to start", victims.len()),
        PendingReason::Reserved { start_at } => format!("reserved: starts by t+{:.0} min", start_at / 60.0),
    }
}

/// The in-process client over a demo that advances one step per `interval` of wall time.
pub struct DemoClient {
    pub demo: Demo,
    interval: std::time::Duration,
    last: std::time::Instant,
}

impl DemoClient {
    pub fn new(demo: Demo, interval: std::time::Duration) -> DemoClient {
        DemoClient {
            demo,
            interval,
            last: std::time::Instant::now(),
        }
    }
}

impl Client for DemoClient {
    fn poll(&mut self) -> bool {
        if self.last.elapsed() < self.interval {
            return false;
        }
        self.last = std::time::Instant::now();
        self.demo.step().is_ok()
    }
    fn snapshot(&self) -> &Snapshot {
        &self.demo.snapshot
    }
    fn until_next(&self) -> std::time::Duration {
        self.interval.saturating_sub(self.last.elapsed())
    }
}
