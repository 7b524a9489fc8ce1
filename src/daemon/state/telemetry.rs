//! GPU utilization: simulated for the simulated fleet (and labelled so), measured by NVML for
//! the local host; per-pool detail and idle GPUs by cause.

use super::*;

impl State {
    /// Simulated utilization now of every GPU that runs something, percent (a GPU shared by
    /// several jobs adds their shares).
    pub(super) fn gpu_utils(&self) -> HashMap<(u32, u8), f64> {
        let mut out: HashMap<(u32, u8), f64> = HashMap::new();
        for j in self.engine.jobs() {
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
        out.retain(|&(node, _), _| !self.is_real_host(node as usize));
        for (&node, t) in &self.measured {
            for g in 0..self.engine.fleet().nodes[node].gpus.len() as u8 {
                if let Some(u) = t.util(g) {
                    out.insert((node as u32, g), u);
                }
            }
        }
        out
    }

    /// Keeps the last 40 samples per GPU, one per simulated minute (the Fleet drill-down's
    /// sparklines).
    pub(super) fn sample_gpus(&mut self) {
        if self.now - self.history_at < 60.0 {
            return;
        }
        self.history_at = self.now;
        let utils = self.gpu_utils();
        let fleet = self.engine.fleet();
        for (i, n) in fleet.nodes.iter().enumerate() {
            if !matches!(
                self.nodes.lives[i],
                Life::Up | Life::Noticed | Life::Draining
            ) {
                for g in 0..n.gpus.len() as u8 {
                    self.gpu_history.remove(&(i as u32, g));
                }
                continue;
            }
            for g in 0..n.gpus.len() as u8 {
                let u = utils.get(&(i as u32, g)).copied().unwrap_or(0.0);
                let h = self.gpu_history.entry((i as u32, g)).or_default();
                h.push_back(u.clamp(0.0, 100.0) as u8);
                if h.len() > 40 {
                    h.pop_front();
                }
            }
        }
    }

    /// One pool node by node and GPU by GPU: measured on real hosts (NVML), modelled on the
    /// simulated fleet (and labelled so).
    pub fn pool_detail(&self, index: usize) -> Option<crate::client::PoolDetail> {
        let fleet = self.engine.fleet();
        let pool = fleet.pools.get(index)?;
        let utils = self.gpu_utils();
        let vram = pool.model.map_or(0, |m| fleet.model(m).vram_mib);
        // Per GPU: its jobs, the memory they reserve and (modelled) use, MiB.
        let mut on: HashMap<(u32, u8), (Vec<i64>, u32, f64)> = HashMap::new();
        for j in self.engine.jobs() {
            let Some(p) = &j.placement else { continue };
            for n in &p.nodes {
                if n.node.index() >= fleet.nodes.len()
                    || fleet.nodes[n.node.index()].pool.index() != index
                {
                    continue;
                }
                for g in &n.gpus {
                    let reserved = match g.share {
                        GpuShare::Whole if g.vram_mib == 0 => vram,
                        GpuShare::Mig { profile, .. } if g.vram_mib == 0 => {
                            u32::from(profile.memory_gb) * 1024
                        }
                        _ => g.vram_mib,
                    };
                    let used = j.started_at.and_then(|started| {
                        self.modelled(j.id, gpu_key(n.node.0, g.gpu), started, self.now)
                    });
                    let e = on.entry((n.node.0, g.gpu)).or_default();
                    e.0.push(j.id);
                    e.1 = e.1.saturating_add(reserved);
                    e.2 += f64::from(reserved) * used.map_or(0.0, |m| m.memory_used);
                }
            }
        }
        // Simulated board power from utilization: idle draw to the model's TDP; temperature
        // follows power.
        let tdp = match pool.model.map(|m| fleet.model(m).name.as_str()) {
            Some("H100" | "H200") => 700.0,
            Some("A100-80GB" | "A100") => 400.0,
            Some("L40S") => 350.0,
            _ => 300.0,
        };
        let nodes = fleet
            .nodes
            .iter()
            .enumerate()
            .filter(|(i, n)| n.pool.index() == index && self.nodes.lives[*i] != Life::Absent)
            .map(|(i, n)| crate::client::NodeView {
                name: n.name.clone(),
                state: match self.nodes.lives[i] {
                    Life::Up => "up",
                    Life::Provisioning => "provisioning",
                    Life::Noticed => "notice",
                    Life::Draining => "draining",
                    Life::Failed => "failed",
                    Life::Absent => "absent",
                }
                .to_string(),
                leaf: n.leaf.map(|l| fleet.leaves[l.index()].clone()),
                nvlink: fleet.nvlink_domains[n.nvlink.index()].clone(),
                gpus: n
                    .gpus
                    .iter()
                    .enumerate()
                    .map(|(g, gpu)| {
                        let key = (i as u32, g as u8);
                        let (jobs, reserved, used) = on.get(&key).cloned().unwrap_or_default();
                        let util = utils.get(&key).copied().unwrap_or(0.0).min(100.0);
                        let power = 0.1 * tdp + 0.9 * tdp * util / 100.0;
                        let mut view = crate::client::GpuView {
                            index: g as u8,
                            util_pct: util,
                            power_w: power,
                            temp_c: 30.0 + 45.0 * power / tdp,
                            vram_used_mib: (used as u32).min(vram),
                            vram_reserved_mib: reserved.min(vram),
                            vram_total_mib: vram,
                            foreign_pids: Vec::new(),
                            foreign: self.foreign_holder(i, g as u8),
                            unmeasured: false,
                            jobs,
                            mig_used: gpu.mig.map(|m| m.compute_used),
                            history: self
                                .gpu_history
                                .get(&key)
                                .map_or(Vec::new(), |h| h.iter().copied().collect()),
                        };
                        match self.measured.get(&i) {
                            Some(t) if t.util(g as u8).is_some() => measured(t, &mut view),
                            _ if self.is_real_host(i) => {
                                view.unmeasured = true;
                                view.util_pct = 0.0;
                                view.power_w = 0.0;
                                view.temp_c = 0.0;
                                view.history.clear();
                            }
                            _ => {}
                        }
                        view
                    })
                    .collect(),
            })
            .collect();
        Some(crate::client::PoolDetail {
            simulated: self.hosts.simulated[index],
            path: fleet.pool_path(crate::model::PoolId(index as u32)),
            model: pool
                .model
                .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
            capacity: pool.capacity.to_string(),
            dollars_per_hour: pool.price_per_hour,
            nodes,
            waiting: self.hosts.queues.get(&index).cloned().unwrap_or_default(),
        })
    }

    /// One GPU of a running job at time `t` as its backend models it (the simulated one;
    /// `None` elsewhere). `key` tells the job's GPUs apart (`gpu_key`).
    pub(super) fn modelled(
        &self,
        id: JobId,
        key: u32,
        started: f64,
        t: f64,
    ) -> Option<crate::backend::Modelled> {
        let run = self.hosts.runs.get(&id)?;
        let &(pool, _) = run.parts.first().and_then(|p| self.hosts.at.get(&p.node))?;
        self.hosts.runners[pool].modelled_gpu(id, key, started, t)
    }

    /// Modelled utilization of one GPU of a running job at time `t`, percent (0 unmodelled).
    pub(super) fn util_at(&self, id: JobId, key: u32, started: f64, t: f64) -> f64 {
        self.modelled(id, key, started, t)
            .map_or(0.0, |m| m.util_pct)
    }

    /// Paid GPUs that nobody uses right now, by cause (`sim::idle`'s vocabulary, as `gantry
    /// sim` accounts them), with their price; causes with no GPUs are left out.
    pub(super) fn idle_by_cause(&self) -> Vec<IdleNow> {
        let fleet = self.engine.fleet();
        let mut wanted = vec![false; fleet.models.len()];
        for j in self.engine.jobs().filter(|j| j.state == JobState::Pending) {
            for (m, w) in wanted.iter_mut().enumerate() {
                *w |= j.request.models.rank(ModelId(m as u16)).is_some();
            }
        }
        let mut out: Vec<IdleNow> = IdleCause::FREE
            .iter()
            .map(|&cause| IdleNow {
                cause,
                gpus: 0,
                dollars_per_hour: 0.0,
            })
            .collect();
        for (i, n) in fleet.nodes.iter().enumerate() {
            let pool = &self.nodes.pools[n.pool.index()];
            let idle = n.gpus.iter().filter(|g| g.is_idle()).count();
            let used = idle < n.gpus.len() || n.cpu_free < n.cpu_milli;
            let waits = n.model.is_some_and(|m| wanted[m.index()]);
            let reserved = pool.capacity == CapacityType::Reserved;
            let Some(cause) = cause_of(self.nodes.lives[i], reserved, used, waits) else {
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

/// Tells a job's GPUs apart for its backend's model: node and GPU index.
pub(super) fn gpu_key(node: u32, gpu: u8) -> u32 {
    (node << 8) | u32::from(gpu)
}

/// What NVML measured on a host's GPU replaces the modelled power, temperature and memory
/// (utilization already comes from it).
fn measured(t: &crate::daemon::host::HostTelemetry, view: &mut crate::client::GpuView) {
    let Some(s) = t.gpus.get(usize::from(view.index)) else {
        return;
    };
    view.power_w = s.power_w.unwrap_or(0.0);
    view.temp_c = s.temperature_c.map_or(0.0, f64::from);
    view.vram_used_mib = u32::try_from(s.memory_used_mib).unwrap_or(u32::MAX);
    view.vram_total_mib = u32::try_from(s.memory_total_mib).unwrap_or(u32::MAX);
    view.foreign_pids = t.foreign.get(&view.index).cloned().unwrap_or_default();
}
