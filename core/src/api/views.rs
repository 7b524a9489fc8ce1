//! One thing in detail, as the console and `gantry job`, `gantry node` and `gantry pool` show
//! it: a job, a node, a pool, a GPU; a job's runs; a submission's preview.

use super::history;
use super::{JobId, JobState};
use serde::{Deserialize, Serialize};

/// One job in detail: what `GET /v1/jobs/{id}` answers, `gantry job` prints and the console's
/// job view shows — the one type the daemon writes and its clients read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct JobView {
    pub id: JobId,
    pub name: Option<String>,
    /// Who submitted it.
    pub user: Option<String>,
    pub team: String,
    pub class: String,
    pub state: JobState,
    pub submitted_at: f64,
    pub started_at: Option<f64>,
    /// `submitted_at` and `started_at` on the calendar (RFC 3339 in the fleet's time zone).
    pub submitted: String,
    pub started: Option<String>,
    /// Whether it runs on GPUs another team lent (past its team's guarantee).
    pub borrowed: bool,
    /// Where it runs: node names and GPU indices.
    pub placement: Vec<String>,
    pub dollars_per_hour: f64,
    /// Dollars so far: finished runs plus the current one.
    pub cost_usd: f64,
    /// Where it stands in the queue, for a waiting job.
    pub explanation: Option<crate::scheduler::cycle::Explanation>,
    /// Why it waits, or how it ended, in one line.
    pub reason: Option<String>,
    /// Its spec as submitted (secrets' values never; `envs` values only for its team).
    pub spec: String,
    /// The pipeline it is a task of (by name), and the job before it there.
    pub pipeline: Option<String>,
    pub after: Option<JobId>,
    /// Its latest events, oldest first.
    pub events: Vec<EventRecord>,
    /// Every run it had: nodes, times, how each ended, what each cost.
    pub runs: Vec<RunRecord>,
    /// The last lines of its logs (for its team and operators).
    pub log_tail: Vec<String>,
    /// The experiment it reports to, and its MLflow run there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<ExperimentRun>,
    /// When it will start, for a waiting job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<crate::api::Eta>,
}

/// A job's run in the experiment tracker, as its spec says it (`experiment:`,
/// `MLFLOW_EXPERIMENT_NAME`, and the `MLFLOW_RUN_ID`, `MLFLOW_EXPERIMENT_ID` and
/// `MLFLOW_TRACKING_URI` the daemon writes at submit).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExperimentRun {
    pub experiment: String,
    pub run_id: Option<String>,
    pub tracking_uri: Option<String>,
    /// The run in MLflow's UI (`URI/#/experiments/ID/runs/RUN`), where all three are known.
    pub url: Option<String>,
    /// What is not in MLflow yet because its server does not answer (since when, and why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting: Option<String>,
}

impl ExperimentRun {
    pub fn of(spec: &crate::spec::JobSpec) -> Option<ExperimentRun> {
        let experiment = spec.experiment.clone()?;
        let env = |k: &str| spec.envs.get(k).filter(|v| !v.is_empty()).cloned();
        let (run_id, uri, id) = (
            env("MLFLOW_RUN_ID"),
            env("MLFLOW_TRACKING_URI"),
            env("MLFLOW_EXPERIMENT_ID"),
        );
        let mut run = ExperimentRun {
            experiment,
            run_id,
            tracking_uri: uri,
            url: None,
            waiting: None,
        };
        run.link(id.as_deref());
        Some(run)
    }

    /// Its link in MLflow's UI, where the experiment's id is known (`experiment`, or the one
    /// it has).
    pub fn link(&mut self, experiment: Option<&str>) {
        if let (Some(u), Some(e), Some(r)) = (&self.tracking_uri, experiment, &self.run_id) {
            self.url = Some(format!(
                "{}/#/experiments/{e}/runs/{r}",
                u.trim_end_matches('/')
            ));
        }
    }
}

impl JobView {
    /// Why it is where it is (`GET /v1/jobs/{id}/explain`, `gantry explain`).
    pub fn explain(&self) -> Explain {
        let detail = self.reason.clone().unwrap_or_else(|| match self.state {
            JobState::Running => format!("running on {}", self.placement.join("; ")),
            s => s.to_string(),
        });
        Explain {
            id: self.id,
            state: self.state,
            position: self.explanation.as_ref().map(|e| e.position),
            detail,
            explanation: self.explanation.clone(),
            eta: self.eta.clone(),
        }
    }
}

/// Why a job is where it is: its state, its place in the queue (0: held out of it) and the
/// scheduler's reason.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Explain {
    pub id: JobId,
    pub state: JobState,
    pub position: Option<usize>,
    pub detail: String,
    pub explanation: Option<crate::scheduler::cycle::Explanation>,
    /// When it will start, for a waiting job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta: Option<crate::api::Eta>,
}

/// One event of the daemon's log (`GET /v1/events`, a job's events), as the journal keeps it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    pub seq: i64,
    /// Seconds on the daemon's clock.
    pub at: f64,
    /// `at` on the calendar (RFC 3339 in the fleet's time zone), filled in by the state.
    pub time: String,
    pub job: Option<JobId>,
    pub kind: String,
    pub detail: String,
}

/// One node GPU by GPU over a range (`GET /v1/nodes/{name}?range=5m|1h|24h`, `gantry node`):
/// what each GPU did and who is on it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeDetail {
    pub name: String,
    pub pool: String,
    pub model: String,
    pub state: String,
    pub simulated: bool,
    pub range: history::Range,
    /// Seconds each point spans.
    pub step_s: f64,
    pub gpus: Vec<GpuHistoryView>,
    /// Its CPUs, memory and disk, and every job of gantry's there (CPU-only ones included).
    #[serde(default)]
    pub resources: NodeResources,
    #[serde(default)]
    pub jobs: Vec<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuHistoryView {
    pub index: u8,
    /// NVML's UUID on a real host.
    pub uuid: Option<String>,
    pub vram_total_mib: u32,
    /// What it shows now.
    pub now: history::Point,
    /// A real host's GPU that NVML does not measure: no numbers are shown for it.
    pub unmeasured: bool,
    /// Oldest first, one per `step_s`, the last still filling; `None` (null) where there was
    /// no sample.
    pub points: Vec<Option<history::Point>>,
    pub jobs: Vec<GpuJob>,
    /// Work on it that is not gantry's: processes NVML sees, a cluster's own jobs or pods.
    pub foreign: Vec<String>,
}

impl GpuHistoryView {
    /// Who is on the GPU, a phrase each: gantry's jobs with their share, then work that is not
    /// gantry's (the console's node view and `gantry fleet --node` say it alike).
    pub fn who(&self) -> Vec<String> {
        self.jobs
            .iter()
            .map(|j| {
                let run = j.run.as_ref().map_or(String::new(), |r| format!(" as {r}"));
                format!("job {} {} ({}, {}){run}", j.id, j.name, j.team, j.share)
            })
            .chain(self.foreign.iter().map(|f| format!("not gantry's: {f}")))
            .collect()
    }
}

/// A gantry job on a GPU, and how much of the GPU it has.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GpuJob {
    pub id: i64,
    pub name: String,
    pub team: String,
    /// whole, a fraction (0.50) or a MIG profile (3g.40gb).
    pub share: String,
    /// What the backend calls its run on this node (`pod NS/NAME`, `Slurm job 123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
}

/// One pool node by node and GPU by GPU, for the Fleet view's drill-down.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PoolDetail {
    pub simulated: bool,
    pub path: String,
    pub model: String,
    pub capacity: String,
    pub dollars_per_hour: f64,
    pub nodes: Vec<NodeView>,
    /// Work the backend's own users queued for these nodes that waits there (a Slurm
    /// partition's pending jobs), with its scheduler's reasons.
    #[serde(default)]
    pub waiting: Vec<ForeignWaiting>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeView {
    pub name: String,
    /// up, provisioning, notice (spot, going), failed, absent.
    pub state: String,
    pub leaf: Option<String>,
    /// The NVLink domain (the node itself unless a rack shares one).
    pub nvlink: String,
    pub gpus: Vec<GpuView>,
    /// Beside its state: coming (ready when), a spot notice (gone when), idle (given back
    /// when).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Its CPUs, memory and disk: what gantry's jobs were given, and what its agent measured.
    #[serde(default)]
    pub resources: NodeResources,
    /// Every job of gantry's on it, CPU-only ones included.
    #[serde(default)]
    pub jobs: Vec<i64>,
}

impl NodeView {
    /// One line for its CPUs, memory, disk and jobs (`NodeResources::line`).
    pub fn resources_line(&self) -> String {
        self.resources.line(&self.jobs)
    }
}

impl NodeResources {
    /// One line for a node's CPUs, memory, disk and `jobs`, as the console's pool and node
    /// views and `gantry fleet --pool` print it: `cpu 4/64 given, 12% of 64 busy · mem
    /// 32/512G given, 120/512G used · disk 40/900G used · jobs 3,7`.
    pub fn line(&self, jobs: &[i64]) -> String {
        let r = self;
        let g = |mib: u64| format!("{:.0}", mib as f64 / 1024.0);
        let mut cpu = format!("cpu {}/{} given", trim(r.cpus_allocated), trim(r.cpus));
        let mut mem = format!("mem {}/{}G given", g(r.mem_allocated_mib), g(r.mem_mib));
        let mut parts = Vec::new();
        if let Some(m) = &r.measured {
            if let Some(busy) = m.cpu_busy_pct {
                cpu.push_str(&format!(", {busy:.0}% of {} busy", m.cpus));
            }
            mem.push_str(&format!(
                ", {}/{}G used",
                g(m.mem_used_mib()),
                g(m.mem_total_mib)
            ));
            parts.push(cpu);
            parts.push(mem);
            if m.disk_total_mib > 0 {
                parts.push(format!(
                    "disk {}/{}G used",
                    g(m.disk_used_mib()),
                    g(m.disk_total_mib)
                ));
            }
        } else {
            parts.push(cpu);
            parts.push(mem);
        }
        if !jobs.is_empty() {
            let ids: Vec<String> = jobs.iter().map(i64::to_string).collect();
            parts.push(format!("jobs {}", ids.join(",")));
        }
        parts.join(" · ")
    }
}

/// `4`, `0.5`: a CPU count without trailing zeros.
fn trim(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// A node's CPUs and memory as gantry allocates them, and as its host measures them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeResources {
    /// CPUs (cores) and memory (MiB) the node offers, and what gantry's jobs there hold.
    pub cpus: f64,
    pub cpus_allocated: f64,
    pub mem_mib: u64,
    pub mem_allocated_mib: u64,
    /// Measured by the host's agent (local and SSH hosts): CPUs busy, memory in use, the
    /// disk of the agent's directory; `None` where nothing measures it (simulated, Slurm,
    /// Kubernetes) or the last sample is over two minutes old.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<HostUsage>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GpuView {
    pub index: u8,
    /// Utilization now, percent.
    pub util_pct: f64,
    /// VRAM in use (measured by NVML on a real host, modelled on the simulated fleet), what
    /// its jobs reserve, and the GPU's total, MiB.
    pub vram_used_mib: u32,
    #[serde(default)]
    pub vram_reserved_mib: u32,
    pub vram_total_mib: u32,
    /// Jobs on it (several for shares and MIG slices).
    pub jobs: Vec<i64>,
    /// MIG mode: compute slices in use of 7.
    pub mig_used: Option<u8>,
    /// Board power, watts, and temperature, °C.
    #[serde(default)]
    pub power_w: f64,
    #[serde(default)]
    pub temp_c: f64,
    /// Recent utilization samples, oldest first, percent.
    pub history: Vec<u8>,
    /// Processes on it that gantry did not start (NVML on a real host).
    #[serde(default)]
    pub foreign_pids: Vec<u32>,
    /// The work of its backend's own scheduler that holds it (a Slurm job), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<String>,
    /// A real host's GPU with no NVML measurement (no driver there, or no sample yet):
    /// utilization, power and temperature are unknown and shown as such, not modelled.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unmeasured: bool,
}

/// What a submission would become and where it would land now (`Engine::preview`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Preview {
    pub name: Option<String>,
    pub team: String,
    pub class: String,
    pub gpus: f64,
    /// Free capacity could take it now (quota and queue order still decide).
    pub fits_now: bool,
    /// Nodes it would use, with their pools.
    pub nodes: Vec<String>,
    pub dollars_per_hour: f64,
    /// Why it would not start now.
    pub reason: Option<String>,
    /// What submitting it now would do: when it starts and whose start moves (the daemon's
    /// cycle run forward with it and without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub what_if: Option<Box<super::WhatIf>>,
}

/// One run of a job (an attempt): where, when, how it ended, what it cost — what `gantry job`
/// and `gantry history` show of each.
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct RunRecord {
    pub job: JobId,
    /// 1 for the first run, then each start again.
    pub attempt: u32,
    pub nodes: Vec<String>,
    pub gpus: f64,
    pub capacity: String,
    pub dollars_per_hour: f64,
    pub started_at: f64,
    pub ended_at: Option<f64>,
    /// The moves that ended it, with their reasons (`preempting: preempted by …; pending:
    /// stopped; requeued from its checkpoint`); `None` while it runs.
    pub ended: Option<String>,
    /// RFC 3339, filled in by the state.
    #[serde(default)]
    pub started: String,
    #[serde(default)]
    pub ended_time: Option<String>,
}

impl RunRecord {
    /// What it cost (so far, at `now`, for one that runs).
    pub fn cost(&self, now: f64) -> f64 {
        self.dollars_per_hour * (self.ended_at.unwrap_or(now) - self.started_at).max(0.0) / 3600.0
    }
}

/// Work a backend's own scheduler holds waiting for a pool's nodes.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ForeignWaiting {
    /// What it is (`Slurm job 14 "sweep" of bob, account ml`).
    pub what: String,
    /// GPUs it asks for, over all its nodes, and on how many nodes.
    pub gpus: u32,
    pub nodes: u32,
    /// Why it waits, in gantry's words (with the scheduler's own code).
    pub reason: String,
}

/// One sample of a host.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HostUsage {
    /// Logical CPUs the kernel lists.
    pub cpus: u32,
    /// Of all CPUs' time since the last sample, the part not idle, percent (`None` on the
    /// first sample: there is no interval yet).
    pub cpu_busy_pct: Option<f64>,
    pub mem_total_mib: u64,
    /// What new work could use without swapping (the kernel's MemAvailable).
    pub mem_available_mib: u64,
    /// The filesystem measured (the agent's directory) and its size and free space.
    pub disk_path: String,
    pub disk_total_mib: u64,
    pub disk_free_mib: u64,
}

impl HostUsage {
    pub fn mem_used_mib(&self) -> u64 {
        self.mem_total_mib.saturating_sub(self.mem_available_mib)
    }
    pub fn disk_used_mib(&self) -> u64 {
        self.disk_total_mib.saturating_sub(self.disk_free_mib)
    }
}

/// A cloud pool the daemon's journal knows (`GET /v1/clouds`, operators only): those of the
/// fleet file in force and those that left it while what they bought is being given back, so
/// that `gantry cloud ls` lists every instance gantry owns whatever the file says now.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct KnownCloudPool {
    /// `provider/region/zone/name`.
    pub key: String,
    /// The pool's settings as the fleet file had them (a `[[pools]]` entry, as JSON).
    pub config: String,
    /// In the fleet file in force now; else it left, and its instances are being ended.
    pub in_fleet: bool,
}
