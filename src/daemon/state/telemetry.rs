//! GPU utilization: simulated for the simulated fleet (and labelled so), measured by NVML for
//! the local host; per-pool detail and idle GPUs by cause.

use super::history::GpuHistory;
use super::history::{Point, Range};
use super::seen::{jobs_by_node, jobs_on, Seen};
use crate::api::JobState;
use crate::daemon::journal::JobId;
use crate::daemon::local_gpus::HostTelemetry;
use crate::model::idle::{cause_of, IdleCause, IdleNow};
use crate::model::{CapacityType, GpuShare, Life, ModelId};
use std::collections::{BTreeMap, HashMap};

/// What was measured: per real host, its GPUs as NVML last reported them (or why it cannot;
/// a node without an entry has no measurements, and none are made up for it), and what each
/// GPU did over the last 5 minutes, hour and day, sampled every 10 s.
#[derive(Default)]
pub(super) struct Telemetry {
    by_node: BTreeMap<usize, HostTelemetry>,
    history: HashMap<(u32, u8), GpuHistory>,
    sampled_at: Option<f64>,
}

/// How often a GPU's history takes a sample, seconds of the daemon's clock.
const SAMPLE_EVERY_S: f64 = 10.0;

impl Telemetry {
    /// What node `node`'s host last reported, if it ever did.
    pub(super) fn of(&self, node: usize) -> Option<&HostTelemetry> {
        self.by_node.get(&node)
    }

    /// Node `node`'s host's record, begun empty (awaiting its first sample).
    pub(super) fn of_mut(&mut self, node: usize) -> &mut HostTelemetry {
        self.by_node.entry(node).or_default()
    }

    /// Node `node`'s host is awaited: neither a sample nor why there is none has come yet
    /// (a node with no record is not: it is not measured at all).
    pub(super) fn awaits_first_sample(&self, node: usize) -> bool {
        self.of(node)
            .is_some_and(|t| t.sampled_at.is_none() && t.unavailable.is_none())
    }

    /// A machine that is gone, or bought again (a new machine): what it said goes.
    pub(super) fn forget(&mut self, node: usize) {
        self.by_node.remove(&node);
    }

    /// Every host that reported, by node.
    pub(super) fn hosts(&self) -> impl Iterator<Item = (usize, &HostTelemetry)> {
        self.by_node.iter().map(|(&n, t)| (n, t))
    }

    /// One GPU's history.
    pub(super) fn history(&self, gpu: (u32, u8)) -> Option<&GpuHistory> {
        self.history.get(&gpu)
    }

    /// Samples every GPU of every node that is up into its history (`history`), from
    /// `readings` (what each shows now); a node not up keeps none.
    pub(super) fn sample(
        &mut self,
        fleet: &crate::model::Fleet,
        lives: &[Life],
        readings: &HashMap<(u32, u8), Reading>,
        now: f64,
    ) {
        for (i, n) in fleet.nodes.iter().enumerate() {
            if !matches!(lives[i], Life::Up | Life::Noticed | Life::Draining) {
                for g in 0..n.gpus.len() as u8 {
                    self.history.remove(&(i as u32, g));
                }
                continue;
            }
            for g in 0..n.gpus.len() as u8 {
                let Some(r) = readings.get(&(i as u32, g)) else {
                    continue;
                };
                // A real host's GPU that NVML has not measured gets no made-up history.
                if r.unmeasured {
                    continue;
                }
                self.history
                    .entry((i as u32, g))
                    .or_default()
                    .push(now, r.point());
            }
        }
    }

    /// Whether a sample is due at `now` (then it is taken: the next is due 10 s later).
    pub(super) fn sample_due(&mut self, now: f64) -> bool {
        if self.sampled_at.is_some_and(|t| now - t < SAMPLE_EVERY_S) {
            return false;
        }
        self.sampled_at = Some(now);
        true
    }
}

impl Seen<'_> {
    /// Simulated utilization now of every GPU that runs something, percent (a GPU shared by
    /// several jobs adds their shares).
    pub(super) fn gpu_utils(&self) -> HashMap<(u32, u8), f64> {
        let mut out: HashMap<(u32, u8), f64> = HashMap::new();
        for j in self.engine.live_jobs() {
            let (Some(p), Some(started)) = (&j.placement, j.started_at) else {
                continue;
            };
            for n in &p.nodes {
                for g in &n.gpus {
                    let u = self.util_at(j.id, gpu_key(n.node.0, g.gpu), started, self.now);
                    let share = match g.share {
                        GpuShare::Whole => 1.0,
                        GpuShare::Milli(m) => f64::from(m) / 1000.0,
                        GpuShare::Mig { profile, .. } => f64::from(profile.compute) / 7.0,
                    };
                    *out.entry((n.node.0, g.gpu)).or_default() += u * share;
                }
            }
        }
        // Real hosts' GPUs read what NVML measured, whoever runs there; nothing is made up
        // for one without measurements.
        out.retain(|&(node, _), _| !self.runs.is_real(node as usize));
        for (node, t) in self.telemetry.hosts() {
            for g in 0..self.engine.fleet().nodes[node].gpus.len() as u8 {
                if let Some(u) = t.util(g) {
                    out.insert((node as u32, g), u);
                }
            }
        }
        out
    }

    /// What every GPU of the pool `only` (or of every pool) shows now: its jobs, what they
    /// reserve and use, utilization, power and temperature — measured by NVML on real hosts,
    /// modelled on the simulated fleet (and labelled so there), unmeasured elsewhere.
    pub(super) fn readings(&self, only: Option<usize>) -> HashMap<(u32, u8), Reading> {
        let fleet = self.engine.fleet();
        let utils = self.gpu_utils();
        let vram_of = |pool: usize| {
            fleet.pools[pool]
                .model
                .map_or(0, |m| fleet.model(m).vram_mib)
        };
        let mut out: HashMap<(u32, u8), Reading> = HashMap::new();
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = n.pool.index();
            if only.is_some_and(|p| p != pool) || self.nodes.life(i) == Life::Absent {
                continue;
            }
            // Simulated board power from utilization: idle draw to the model's TDP;
            // temperature follows power.
            let tdp = match fleet.pools[pool]
                .model
                .map(|m| fleet.model(m).name.as_str())
            {
                Some("H100" | "H200") => 700.0,
                Some("A100-80GB" | "A100") => 400.0,
                Some("L40S") => 350.0,
                _ => 300.0,
            };
            for g in 0..n.gpus.len() as u8 {
                let util = utils.get(&(i as u32, g)).copied().unwrap_or(0.0).min(100.0);
                let power = 0.1 * tdp + 0.9 * tdp * util / 100.0;
                let mut r = Reading {
                    util_pct: util,
                    power_w: power,
                    temp_c: 30.0 + 45.0 * power / tdp,
                    vram_total_mib: vram_of(pool),
                    ..Reading::default()
                };
                match self.telemetry.of(i) {
                    Some(t) if t.util(g).is_some() => {
                        r.measured = t.gpus.get(usize::from(g)).cloned();
                        r.foreign_pids = t.foreign.get(&g).cloned().unwrap_or_default();
                    }
                    _ if self.runs.is_real(i) => r.unmeasured = true,
                    _ => {}
                }
                if let Some(s) = &r.measured {
                    r.power_w = s.power_w.unwrap_or(0.0);
                    r.temp_c = s.temperature_c.map_or(0.0, f64::from);
                    r.vram_total_mib = u32::try_from(s.memory_total_mib).unwrap_or(u32::MAX);
                }
                if r.unmeasured {
                    (r.util_pct, r.power_w, r.temp_c) = (0.0, 0.0, 0.0);
                }
                out.insert((i as u32, g), r);
            }
        }
        // Per GPU: its jobs, the memory they reserve and (modelled) use, MiB.
        for j in self.engine.live_jobs() {
            let Some(p) = &j.placement else { continue };
            for n in &p.nodes {
                for g in &n.gpus {
                    let Some(r) = out.get_mut(&(n.node.0, g.gpu)) else {
                        continue;
                    };
                    let reserved = match g.share {
                        GpuShare::Whole if g.vram_mib == 0 => r.vram_total_mib,
                        GpuShare::Mig { profile, .. } if g.vram_mib == 0 => {
                            u32::from(profile.memory_gb) * 1024
                        }
                        _ => g.vram_mib,
                    };
                    let used = j.started_at.and_then(|started| {
                        self.runs
                            .modelled_gpu(j.id, gpu_key(n.node.0, g.gpu), started, self.now)
                    });
                    r.jobs.push((j.id, g.share));
                    r.reserved_mib = r.reserved_mib.saturating_add(reserved);
                    r.used_mib += f64::from(reserved) * used.map_or(0.0, |m| m.memory_used);
                }
            }
        }
        out
    }

    /// One pool node by node and GPU by GPU: measured on real hosts (NVML), modelled on the
    /// simulated fleet (and labelled so).
    pub fn pool_detail(&self, index: usize) -> Option<crate::api::PoolDetail> {
        let fleet = self.engine.fleet();
        let pool = fleet.pools.get(index)?;
        let readings = self.readings(Some(index));
        let of_pool: Vec<usize> = (0..fleet.nodes.len())
            .filter(|&i| fleet.nodes[i].pool.index() == index)
            .collect();
        let mut jobs_on = jobs_by_node(self.engine, |n| of_pool.contains(&n));
        let nodes = fleet
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.pool.index() == index && self.nodes.life(*i) != Life::Absent)
            .map(|(i, n)| crate::api::NodeView {
                name: n.name.clone(),
                state: self.life_name(i).to_string(),
                note: self.nodes.node_note(self.now, i, &of_pool),
                resources: self.node_resources(i),
                jobs: jobs_on.remove(&i).unwrap_or_default(),
                leaf: n.leaf.map(|l| fleet.leaves[l.index()].clone()),
                nvlink: fleet.nvlink_domains[n.nvlink.index()].clone(),
                gpus: n
                    .gpus
                    .iter()
                    .enumerate()
                    .map(|(g, gpu)| {
                        let key = (i as u32, g as u8);
                        let r = readings.get(&key).cloned().unwrap_or_default();
                        // The sparkline: the last 40 minutes.
                        let history = match (&r.unmeasured, self.telemetry.history(key)) {
                            (false, Some(h)) => h
                                .series(Range::Hour)
                                .iter()
                                .rev()
                                .take(40)
                                .rev()
                                .map(|p| p.map_or(0, |p| p.util_pct.clamp(0.0, 100.0) as u8))
                                .collect(),
                            _ => Vec::new(),
                        };
                        crate::api::GpuView {
                            index: g as u8,
                            util_pct: r.util_pct,
                            power_w: r.power_w,
                            temp_c: r.temp_c,
                            vram_used_mib: r.vram_used(),
                            vram_reserved_mib: r.reserved_mib.min(r.vram_total_mib),
                            vram_total_mib: r.vram_total_mib,
                            foreign: self.runs.foreign_holder(i, g as u8),
                            unmeasured: r.unmeasured,
                            jobs: r.jobs.iter().map(|&(id, _)| id).collect(),
                            foreign_pids: r.foreign_pids,
                            mig_used: gpu.mig.map(|m| m.compute_used),
                            history,
                        }
                    })
                    .collect(),
            })
            .collect();
        Some(crate::api::PoolDetail {
            simulated: self.runs.is_simulated(index),
            path: fleet.pool_path(crate::model::PoolId(index as u32)),
            model: pool
                .model
                .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
            capacity: pool.capacity.to_string(),
            dollars_per_hour: pool.price_per_hour,
            nodes,
            waiting: self.runs.queue(index),
        })
    }

    /// Node `i`'s CPUs and memory as given to gantry's jobs, and as its agent last measured
    /// them (within two minutes).
    fn node_resources(&self, i: usize) -> crate::api::NodeResources {
        let fleet = self.engine.fleet();
        let n = &fleet.nodes[i];
        let pool = &fleet.pools[n.pool.index()];
        crate::api::NodeResources {
            cpus: f64::from(pool.cpu_milli) / 1000.0,
            cpus_allocated: f64::from(pool.cpu_milli.saturating_sub(n.cpu_free)) / 1000.0,
            mem_mib: pool.mem_mib,
            mem_allocated_mib: pool.mem_mib.saturating_sub(n.mem_free),
            measured: self.runs.usage(i, self.now, 120.0),
        }
    }

    /// One node GPU by GPU over a range: utilization, VRAM in use, power and temperature, and
    /// who is on each GPU (gantry's jobs with their share, and work that is not gantry's).
    pub fn node_detail(&self, name: &str, range: Range) -> Option<crate::api::NodeDetail> {
        let fleet = self.engine.fleet();
        let i = fleet.nodes.iter().position(|n| n.name == name)?;
        let n = &fleet.nodes[i];
        let pool = n.pool.index();
        let readings = self.readings(Some(pool));
        let gpus = (0..n.gpus.len() as u8)
            .map(|g| {
                let r = readings.get(&(i as u32, g)).cloned().unwrap_or_default();
                let jobs = r
                    .jobs
                    .iter()
                    .filter_map(|&(id, share)| {
                        let j = self.engine.job(id)?;
                        Some(crate::api::GpuJob {
                            id,
                            name: j.name.clone().unwrap_or_default(),
                            team: self.team_name(j.team),
                            share: match share {
                                GpuShare::Whole => "whole".to_string(),
                                GpuShare::Milli(m) => format!("{:.2}", f64::from(m) / 1000.0),
                                GpuShare::Mig { profile, .. } => profile.to_string(),
                            },
                            run: self.runs.handle_on(id, i),
                        })
                    })
                    .collect();
                let mut foreign: Vec<String> =
                    r.foreign_pids.iter().map(|p| format!("pid {p}")).collect();
                foreign.extend(self.runs.foreign_holder(i, g));
                crate::api::GpuHistoryView {
                    index: g,
                    uuid: r.measured.as_ref().map(|s| s.uuid.clone()),
                    vram_total_mib: r.vram_total_mib,
                    now: r.point(),
                    unmeasured: r.unmeasured,
                    points: self
                        .telemetry
                        .history((i as u32, g))
                        .map_or(Vec::new(), |h| h.series(range)),
                    jobs,
                    foreign,
                }
            })
            .collect();
        let (step_s, _) = range.buckets();
        Some(crate::api::NodeDetail {
            name: n.name.clone(),
            pool: fleet.pool_path(n.pool),
            model: fleet.pools[pool]
                .model
                .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
            state: self.life_name(i).to_string(),
            simulated: self.runs.is_simulated(pool),
            range,
            step_s,
            gpus,
            resources: self.node_resources(i),
            // In id order: the engine keeps its jobs by id.
            jobs: jobs_on(self.engine, i),
        })
    }

    fn life_name(&self, i: usize) -> &'static str {
        match self.nodes.life(i) {
            Life::Up => "up",
            Life::Provisioning => "provisioning",
            Life::Noticed => "notice",
            Life::Draining => "draining",
            Life::Failed => "failed",
            Life::Absent => "absent",
        }
    }

    /// Modelled utilization of one GPU of a running job at time `t`, percent (0 unmodelled).
    pub(super) fn util_at(&self, id: JobId, key: u32, started: f64, t: f64) -> f64 {
        self.runs
            .modelled_gpu(id, key, started, t)
            .map_or(0.0, |m| m.util_pct)
    }

    /// Paid GPUs that nobody uses right now, by cause (`model::idle`'s vocabulary, as `gantry
    /// sim` accounts them), with their price; causes with no GPUs are left out.
    pub(super) fn idle_by_cause(&self) -> Vec<IdleNow> {
        let fleet = self.engine.fleet();
        let wanted = models_waited_for(self.engine);
        let mut out: Vec<IdleNow> = IdleCause::FREE
            .iter()
            .map(|&cause| IdleNow {
                cause,
                gpus: 0,
                dollars_per_hour: 0.0,
            })
            .collect();
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = self.nodes.pool(n.pool.index());
            let idle = n.gpus.iter().filter(|g| g.is_idle()).count();
            let used = idle < n.gpus.len() || n.cpu_free < n.cpu_milli;
            let waits = n.model.is_some_and(|m| wanted[m.index()]);
            let reserved = pool.capacity == CapacityType::Reserved;
            let Some(cause) = cause_of(self.nodes.life(i), reserved, used, waits) else {
                continue;
            };
            // A node that is not up yet (or down) idles whole.
            let free = if matches!(cause, IdleCause::Provisioning | IdleCause::InRepair) {
                n.gpus.len()
            } else {
                idle
            };
            if free == 0 {
                continue;
            }
            let k = cause.slot().expect("cause_of gives a free GPU's cause");
            out[k].gpus += free;
            out[k].dollars_per_hour +=
                pool.price_per_hour * free as f64 / f64::from(pool.gpus_per_node.max(1));
        }
        out.retain(|c| c.gpus > 0);
        out
    }
}

/// Per GPU model (by index): whether a waiting job may use it (a free GPU of it idles
/// while work waits).
pub(super) fn models_waited_for(engine: &crate::daemon::engine::Engine) -> Vec<bool> {
    let mut wanted = vec![false; engine.fleet().models.len()];
    for j in engine.live_jobs().filter(|j| j.state == JobState::Pending) {
        for (m, w) in wanted.iter_mut().enumerate() {
            *w |= j.request.models.rank(ModelId(m as u16)).is_some();
        }
    }
    wanted
}

/// Tells a job's GPUs apart for its backend's model: node and GPU index.
pub(super) fn gpu_key(node: u32, gpu: u8) -> u32 {
    (node << 8) | u32::from(gpu)
}

/// What one GPU shows now (`State::readings`).
#[derive(Clone, Debug, Default)]
pub(super) struct Reading {
    /// The jobs on it and each one's share of it.
    pub jobs: Vec<(i64, GpuShare)>,
    /// Processes on it that are not gantry's (NVML, real hosts).
    pub foreign_pids: Vec<u32>,
    /// VRAM its jobs reserve, and (modelled) use, MiB.
    pub reserved_mib: u32,
    pub used_mib: f64,
    pub util_pct: f64,
    pub power_w: f64,
    pub temp_c: f64,
    pub vram_total_mib: u32,
    /// NVML's sample, on a real host that has one.
    pub measured: Option<crate::backend::local::nvml::GpuSample>,
    /// A real host's GPU without measurements: nothing is made up for it.
    pub unmeasured: bool,
}

impl Reading {
    fn vram_used(&self) -> u32 {
        match &self.measured {
            Some(s) => u32::try_from(s.memory_used_mib).unwrap_or(u32::MAX),
            None => (self.used_mib as u32).min(self.vram_total_mib),
        }
    }

    fn point(&self) -> Point {
        Point {
            util_pct: self.util_pct as f32,
            vram_used_mib: self.vram_used(),
            power_w: self.power_w as f32,
            temp_c: self.temp_c as f32,
        }
    }
}
