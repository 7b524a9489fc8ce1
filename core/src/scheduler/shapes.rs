//! Requests numbered by what a placement failure depends on, so that a cycle remembers a
//! failure in a slot instead of hashing each waiting job's request again: identical requests
//! fail identically while capacity only shrinks (`RequestKey`). A forward run numbers each job
//! once for the whole run; a single cycle numbers them as it orders the queue.

use super::hash::{FastHash, FxHasher};
use crate::model::{GpuRequest, JobRequest, ModelChoice};
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// What a failure depends on, borrowed from the request.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct RequestKey<'a> {
    nodes: u16,
    gpu: GpuRequest,
    cpu: u32,
    mem: u64,
    vram: u32,
    models: &'a ModelChoice,
    spot: bool,
    price: Option<u64>,
}

impl RequestKey<'_> {
    fn of(r: &JobRequest) -> RequestKey<'_> {
        RequestKey {
            nodes: r.nodes,
            gpu: r.gpu,
            cpu: r.cpu_milli,
            mem: r.mem_mib,
            vram: r.vram_mib,
            models: &r.models,
            spot: r.spot_ok,
            price: r.max_price_per_hour.map(f64::to_bits),
        }
    }
}

/// The numbering: a request of each shape kept to compare with, chained by hash.
#[derive(Default)]
pub(super) struct Shapes {
    first: HashMap<u64, u32, FastHash>,
    /// The next shape of the same hash (u32::MAX: none).
    next: Vec<u32>,
    reps: Vec<JobRequest>,
}

impl Shapes {
    /// The number of `r`'s shape (a new one if none before was alike).
    pub(super) fn id(&mut self, r: &JobRequest) -> u32 {
        let key = RequestKey::of(r);
        let mut h = FxHasher::default();
        key.hash(&mut h);
        let hash = h.finish();
        let head = self.first.get(&hash).copied().unwrap_or(u32::MAX);
        let mut at = head;
        while at != u32::MAX {
            if RequestKey::of(&self.reps[at as usize]) == key {
                return at;
            }
            at = self.next[at as usize];
        }
        let id = self.reps.len() as u32;
        self.reps.push(r.clone());
        self.next.push(head);
        self.first.insert(hash, id);
        id
    }
}
