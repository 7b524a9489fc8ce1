//! Where the paid GPU-hours go that do no work. Every paid GPU-second of a `gantry sim` setup
//! is either busy or has exactly one cause here, so the causes add up to the gap between
//! utilization and 100% — what is left to win, and where.

use super::Life;
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum IdleCause {
    /// A cloud node bought and billed, still booting.
    Provisioning,
    /// An up cloud node with no job: inside the scale-down window, kept by the pool's minimum,
    /// or (naive) a static node nobody in its partition uses.
    EmptyCloudNode,
    /// Free GPUs on a cloud node that runs jobs (what packing leaves).
    PartlyUsedCloudNode,
    /// Free reserved GPUs while a waiting job may use their model: held back by its team's
    /// quota, by its shape (a gang needs whole nodes) or, naive, by the partitions.
    ReservedWhileWorkWaits,
    /// Free reserved GPUs and no waiting job that may use their model (nights, weekends).
    ReservedNoWork,
    /// A node down: an on-prem node in repair, or a real host that stopped answering (paid,
    /// unusable).
    InRepair,
    /// Held by a job that is not working: notebooks left open, restoring from a checkpoint,
    /// a service's unused share, a preempted job's grace period.
    HeldNotBusy,
}

impl IdleCause {
    /// The causes measured from free GPUs; `HeldNotBusy` is what held GPUs leave unused.
    pub const FREE: [IdleCause; 6] = [
        IdleCause::Provisioning,
        IdleCause::EmptyCloudNode,
        IdleCause::PartlyUsedCloudNode,
        IdleCause::ReservedWhileWorkWaits,
        IdleCause::ReservedNoWork,
        IdleCause::InRepair,
    ];

    /// Its place in `FREE` (the free-GPU causes); `None` for `HeldNotBusy`.
    pub fn slot(self) -> Option<usize> {
        IdleCause::FREE.iter().position(|c| *c == self)
    }

    pub fn label(self) -> &'static str {
        match self {
            IdleCause::Provisioning => "cloud node booting (billed)",
            IdleCause::EmptyCloudNode => "cloud node empty",
            IdleCause::PartlyUsedCloudNode => "cloud node partly used",
            IdleCause::ReservedWhileWorkWaits => "reserved, idle while work waits",
            IdleCause::ReservedNoWork => "reserved, no work wants it",
            IdleCause::InRepair => "node down (in repair or unreachable)",
            IdleCause::HeldNotBusy => "held by a job, not working",
        }
    }

    /// A label of at most 17 characters, for narrow panes.
    pub fn short(self) -> &'static str {
        match self {
            IdleCause::Provisioning => "booting",
            IdleCause::EmptyCloudNode => "cloud, empty",
            IdleCause::PartlyUsedCloudNode => "cloud, part-used",
            IdleCause::ReservedWhileWorkWaits => "reserved, blocked",
            IdleCause::ReservedNoWork => "reserved, no work",
            IdleCause::InRepair => "down",
            IdleCause::HeldNotBusy => "held, not working",
        }
    }
}

/// Paid GPUs doing nothing right now for one cause, and what they cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IdleNow {
    pub cause: IdleCause,
    pub gpus: usize,
    pub dollars_per_hour: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct IdleShare {
    pub cause: IdleCause,
    pub gpu_hours: f64,
}

/// Free GPU-hours by pool and cause, charged interval by interval: between two events the
/// fleet does not change, so the rate measured after one event holds until the next.
#[derive(Clone, Debug, Default)]
pub struct IdleLedger {
    by_pool: Vec<[f64; IdleCause::FREE.len()]>,
}

impl IdleLedger {
    pub fn new(pools: usize) -> Self {
        IdleLedger {
            by_pool: vec![[0.0; IdleCause::FREE.len()]; pools],
        }
    }

    /// Charges `seconds` at `milli` free milli-GPU per pool and cause (`IdleCause::FREE`
    /// order).
    pub fn charge(&mut self, seconds: f64, milli: &[[u64; IdleCause::FREE.len()]]) {
        for (pool, rates) in self.by_pool.iter_mut().zip(milli) {
            for (h, m) in pool.iter_mut().zip(rates) {
                *h += *m as f64 / 1000.0 * seconds / 3600.0;
            }
        }
    }

    /// One pool's free GPU-hours by cause.
    pub fn pool_shares(&self, pool: usize) -> Vec<IdleShare> {
        let hours = self.by_pool.get(pool).copied().unwrap_or_default();
        IdleCause::FREE
            .iter()
            .zip(hours)
            .map(|(&cause, gpu_hours)| IdleShare { cause, gpu_hours })
            .collect()
    }

    /// The whole fleet's, with the held-but-not-busy hours added last.
    pub fn shares(&self, held_not_busy: f64) -> Vec<IdleShare> {
        IdleCause::FREE
            .iter()
            .enumerate()
            .map(|(k, &cause)| IdleShare {
                cause,
                gpu_hours: self.by_pool.iter().map(|p| p[k]).sum(),
            })
            .chain(std::iter::once(IdleShare {
                cause: IdleCause::HeldNotBusy,
                gpu_hours: held_not_busy.max(0.0),
            }))
            .collect()
    }
}

/// Which cause a free GPU has on a node in `life` (`has_jobs`: any job runs there, and
/// `work_waits`: a waiting job may use its GPU model); `None` when the node is not paid for.
pub fn cause_of(life: Life, reserved: bool, has_jobs: bool, work_waits: bool) -> Option<IdleCause> {
    Some(match life {
        Life::Absent => return None,
        Life::Provisioning => IdleCause::Provisioning,
        Life::Failed => IdleCause::InRepair,
        Life::Up | Life::Noticed | Life::Draining if reserved && work_waits => {
            IdleCause::ReservedWhileWorkWaits
        }
        Life::Up | Life::Noticed | Life::Draining if reserved => IdleCause::ReservedNoWork,
        Life::Up | Life::Noticed | Life::Draining if !has_jobs => IdleCause::EmptyCloudNode,
        Life::Up | Life::Noticed | Life::Draining => IdleCause::PartlyUsedCloudNode,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_by_cause() {
        let mut l = IdleLedger::new(2);
        l.charge(3600.0, &[[8000, 0, 500, 0, 0, 0], [0; 6]]);
        l.charge(1800.0, &[[0; 6], [0, 0, 1000, 0, 0, 0]]);
        assert!((l.pool_shares(0)[2].gpu_hours - 0.5).abs() < 1e-9);
        assert!((l.pool_shares(1)[2].gpu_hours - 0.5).abs() < 1e-9);
        let s = l.shares(2.5);
        assert_eq!(s.len(), 7);
        assert!((s[0].gpu_hours - 8.0).abs() < 1e-9);
        assert!((s[2].gpu_hours - 1.0).abs() < 1e-9);
        assert_eq!(s[6].cause, IdleCause::HeldNotBusy);
        assert!((s[6].gpu_hours - 2.5).abs() < 1e-9);
    }

    #[test]
    fn each_free_gpu_has_one_cause() {
        use IdleCause::*;
        let c = cause_of;
        assert_eq!(c(Life::Absent, false, false, true), None);
        assert_eq!(
            c(Life::Provisioning, false, false, true),
            Some(Provisioning)
        );
        assert_eq!(c(Life::Failed, true, false, true), Some(InRepair));
        assert_eq!(c(Life::Up, true, true, true), Some(ReservedWhileWorkWaits));
        assert_eq!(c(Life::Noticed, true, true, false), Some(ReservedNoWork));
        assert_eq!(c(Life::Up, false, false, true), Some(EmptyCloudNode));
        assert_eq!(
            c(Life::Noticed, false, true, false),
            Some(PartlyUsedCloudNode)
        );
    }
}
