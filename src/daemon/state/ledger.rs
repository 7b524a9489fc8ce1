//! What the fleet pays for and holds at this moment, pool by pool: the rates a what-if run
//! (`gantry sim`) integrates over its virtual clock into GPU-hours and dollars. The same
//! reading of the fleet as the console's idle-by-cause table, in milli-GPU.

use super::nodes::Nodes;
use crate::daemon::engine::Engine;
use crate::model::idle::{cause_of, IdleCause};

/// One pool now.
#[derive(Clone, Debug, Default)]
pub struct PoolNow {
    /// GPUs of its nodes that are billed (provisioning and in repair included).
    pub paid_gpus: usize,
    /// What those nodes cost an hour.
    pub dollars_per_hour: f64,
    /// Milli-GPU that jobs hold on it.
    pub held_milli: u64,
    /// Milli-GPU paid for and held by no job, by cause (`IdleCause::FREE` order).
    pub idle_milli: [u64; IdleCause::FREE.len()],
}

impl Nodes {
    /// Every pool of the fleet now, in the fleet's pool order.
    pub(super) fn fleet_now(&self, engine: &Engine) -> Vec<PoolNow> {
        let fleet = engine.fleet();
        let mut out = vec![PoolNow::default(); self.pool_count()];
        let mut held = vec![0u64; fleet.nodes.len()];
        for p in engine.live_jobs().filter_map(|j| j.placement.as_ref()) {
            for g in &p.nodes {
                held[g.node.index()] += g.gpu_milli();
            }
        }
        let wanted = super::telemetry::models_waited_for(engine);
        for (i, n) in fleet.nodes.iter().enumerate() {
            let life = self.life(i);
            if !life.paid() {
                continue;
            }
            let pool = self.pool(n.pool.index());
            let row = &mut out[n.pool.index()];
            let gpus = n.gpus.len();
            row.paid_gpus += gpus;
            row.dollars_per_hour += pool.price_per_hour;
            row.held_milli += held[i];
            let waits = n.model.is_some_and(|m| wanted[m.index()]);
            let reserved = pool.capacity == crate::model::CapacityType::Reserved;
            let used = held[i] > 0 || n.cpu_free < n.cpu_milli;
            if let Some(cause) = cause_of(life, reserved, used, waits) {
                let all = gpus as u64 * 1000;
                let free = if matches!(cause, IdleCause::Provisioning | IdleCause::InRepair) {
                    all
                } else {
                    all.saturating_sub(held[i])
                };
                let k = cause.slot().expect("cause_of gives a free GPU's cause");
                row.idle_milli[k] += free;
            }
        }
        out
    }
}
