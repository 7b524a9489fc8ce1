//! Counters and histograms behind `/metrics`.

use serde::Serialize;
use std::collections::BTreeMap;

/// Counters and histograms behind `/metrics`.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Counters {
    pub preemptions: u64,
    pub spot_interruptions: u64,
    pub node_failures: u64,
    pub scale_ups: u64,
    pub scale_downs: u64,
    /// Cloud nodes given back after their jobs moved to capacity already paid for.
    pub consolidated_nodes: u64,
    /// Paid nodes emptied for a job that fit nowhere (instead of buying one for it).
    pub defragmented: u64,
    /// Jobs told to checkpoint and move by consolidation or defragmentation.
    pub moved_jobs: u64,
    pub reclaimed_jobs: u64,
    pub reclaimed_gpu_hours: f64,
    pub cycles: u64,
    /// Wait before first start, seconds, per class and team name: (bucket counts, sum,
    /// count).
    pub waits: BTreeMap<String, BTreeMap<String, Histogram>>,
    /// Preemptions per class and team.
    pub preempted: BTreeMap<String, BTreeMap<String, u64>>,
}

/// A Prometheus-style cumulative histogram.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Histogram {
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

/// Bucket bounds of the wait-time histogram, seconds.
pub const WAIT_BUCKETS: [f64; 9] = [
    1.0, 10.0, 60.0, 300.0, 900.0, 3_600.0, 14_400.0, 43_200.0, 86_400.0,
];

impl Histogram {
    pub fn observe(&mut self, bounds: &[f64], x: f64) {
        if self.counts.len() != bounds.len() {
            self.counts = vec![0; bounds.len()];
        }
        for (c, b) in self.counts.iter_mut().zip(bounds) {
            if x <= *b {
                *c += 1;
            }
        }
        self.sum += x;
        self.count += 1;
    }
}
