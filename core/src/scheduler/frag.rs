//! Fragmentation: how much idle GPU capacity the jobs likely to arrive could not use.
//!
//! For one node and one job shape, idle GPU capacity is a *fragment* when the shape cannot use
//! it: the node lacks the CPU or memory for it, has too few GPUs with enough free share, the
//! model is not allowed, or (for a shape that fits) a GPU's free share is smaller than the shape
//! needs. Weighting shapes by how often they arrive gives the node's expected fragmentation;
//! a fragmentation-aware policy places each job where that expectation grows least. This is the
//! idea of FGD (Weng et al., ATC'23); what gantry adds is in `policy.rs`.

use crate::model::{GpuRequest, JobRequest, MILLI_PER_GPU};
use std::collections::HashMap;

/// The part of a job that decides whether it fits: GPUs per node, share per GPU, CPU, memory
/// and allowed models. MIG and CPU-only jobs have no shape here: they use no shareable GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Shape {
    pub gpus: u8,
    pub milli: u16,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub model_mask: u64,
}

impl Shape {
    pub fn of(job: &JobRequest) -> Option<Shape> {
        let (gpus, milli) = match job.gpu {
            GpuRequest::Whole(n) => (n, MILLI_PER_GPU),
            GpuRequest::Fraction(m) => (1, m),
            GpuRequest::None | GpuRequest::Mig(_) => return None,
        };
        Some(Shape {
            gpus,
            milli,
            cpu_milli: job.cpu_milli,
            mem_mib: job.mem_mib,
            model_mask: job.models.mask(),
        })
    }
}

#[derive(Clone, Debug)]
struct Member {
    cpu_milli: u32,
    mem_mib: u64,
    p: f64,
}

/// Shapes that share a GPU need, with their CPU and memory needs sorted by CPU.
#[derive(Clone, Debug)]
struct Group {
    gpus: u8,
    milli: u16,
    model_mask: u64,
    p: f64,
    members: Vec<Member>,
}

/// A normalized shape distribution, ready for fast fragmentation sums.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    groups: Vec<Group>,
    measure: Measure,
}

/// How a node's fragmentation for one shape is judged.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Measure {
    /// FGD's view: can *one* more pod of the shape fit, and which GPUs are too small for it.
    /// Memory is left to the caller (FGD ignores it).
    #[default]
    OnePod,
    /// gantry's view: the mean of the one-pod view and the fill view, which asks how much GPU
    /// would stay unused if the node were filled with that shape until GPUs, CPU or memory ran
    /// out. The one-pod view alone misses a node with 8 idle GPUs and CPU for only one pod; the
    /// fill view alone misses that other shapes can use what one shape leaves.
    Blend,
}

impl Workload {
    /// `use_memory: false` reproduces FGD, which checks CPU but not memory.
    pub fn from_counts<'a>(
        counts: impl IntoIterator<Item = (&'a Shape, f64)>,
        use_memory: bool,
        measure: Measure,
    ) -> Workload {
        let mut sorted: Vec<(Shape, f64)> = counts.into_iter().map(|(s, c)| (*s, c)).collect();
        sorted.sort_by_key(|a| a.0);
        let total: f64 = sorted.iter().map(|(_, c)| c).sum();
        let mut groups: Vec<Group> = Vec::new();
        if total <= 0.0 {
            return Workload { groups, measure };
        }
        for (s, c) in sorted {
            let p = c / total;
            let member = Member {
                cpu_milli: s.cpu_milli,
                mem_mib: if use_memory { s.mem_mib } else { 0 },
                p,
            };
            match groups
                .iter_mut()
                .find(|g| g.gpus == s.gpus && g.milli == s.milli && g.model_mask == s.model_mask)
            {
                Some(g) => {
                    g.p += p;
                    g.members.push(member);
                }
                None => groups.push(Group {
                    gpus: s.gpus,
                    milli: s.milli,
                    model_mask: s.model_mask,
                    p,
                    members: vec![member],
                }),
            }
        }
        for g in &mut groups {
            g.members.sort_by_key(|m| (m.cpu_milli, m.mem_mib));
        }
        Workload { groups, measure }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// Expected fragmented milli-GPU of a node with GPU model `model`, `cpu_free` and
    /// `mem_free`, and free shares `frees` (GPUs in MIG mode left out).
    pub fn node_frag(&self, model: u16, cpu_free: u32, mem_free: u64, frees: &[u16]) -> f64 {
        let total: u32 = frees.iter().map(|&f| u32::from(f)).sum();
        if total == 0 {
            return 0.0;
        }
        let total = f64::from(total);
        let bit = if model < 64 { 1u64 << model } else { u64::MAX };
        let mut frag = 0.0;
        for g in &self.groups {
            if g.model_mask & bit == 0 {
                frag += g.p * total;
                continue;
            }
            let mut usable = 0u8;
            let mut partial = 0u32;
            for &f in frees {
                if f >= g.milli {
                    usable += 1;
                } else {
                    partial += u32::from(f);
                }
            }
            if usable < g.gpus {
                frag += g.p * total;
                continue;
            }
            let one_pod = |frag: &mut f64, weight: f64| {
                let mut fit = 0.0;
                for m in &g.members {
                    if m.cpu_milli > cpu_free {
                        break;
                    }
                    if m.mem_mib <= mem_free {
                        fit += m.p;
                    }
                }
                *frag += weight * ((g.p - fit) * total + fit * f64::from(partial));
            };
            match self.measure {
                Measure::OnePod => one_pod(&mut frag, 1.0),
                Measure::Blend => {
                    one_pod(&mut frag, 0.5);
                    // Fill view: how many pods of each shape the node could still take,
                    // limited by GPUs, CPU and memory together; the GPU capacity they could
                    // not use is the fragment.
                    let per_pod = u32::from(g.gpus) * u32::from(g.milli);
                    let by_gpu = if g.milli >= MILLI_PER_GPU {
                        u32::from(usable / g.gpus.max(1))
                    } else {
                        frees.iter().map(|&f| u32::from(f / g.milli)).sum()
                    };
                    for m in &g.members {
                        let by_cpu = cpu_free.checked_div(m.cpu_milli).unwrap_or(u32::MAX);
                        let by_mem = mem_free.checked_div(m.mem_mib).unwrap_or(u64::MAX);
                        let k = u64::from(by_gpu.min(by_cpu)).min(by_mem) as u32;
                        frag += 0.5 * m.p * (total - f64::from(k * per_pod));
                    }
                }
            }
        }
        frag
    }
}

/// Arrival counts of shapes, learned online, turned into a [`Workload`] at doubling intervals
/// (1, 2, 4, … 4096, then every 4096 arrivals) so cached fragmentation values stay valid in between.
#[derive(Clone, Debug, Default)]
pub struct ShapeStats {
    counts: HashMap<Shape, f64>,
    seen: u64,
    next_refresh: u64,
}

impl ShapeStats {
    /// Records an arrival; returns true when the distribution should be rebuilt.
    pub fn observe(&mut self, job: &JobRequest) -> bool {
        let Some(shape) = Shape::of(job) else {
            return false;
        };
        *self.counts.entry(shape).or_insert(0.0) += 1.0;
        self.seen += 1;
        if self.seen >= self.next_refresh {
            self.next_refresh = if self.seen < 4096 {
                self.seen * 2
            } else {
                self.seen + 4096
            };
            return true;
        }
        false
    }

    pub fn workload(&self, use_memory: bool, measure: Measure) -> Workload {
        Workload::from_counts(
            self.counts.iter().map(|(s, c)| (s, *c)),
            use_memory,
            measure,
        )
    }

    pub fn seen(&self) -> u64 {
        self.seen
    }
}

/// Memo key for a node's fragmentation: model, CPU, memory and sorted free shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FragKey {
    model: u16,
    len: u8,
    cpu_free: u32,
    mem_free: u64,
    frees: [u16; 16],
}

impl FragKey {
    /// `None` for nodes of more than 16 GPUs (computed without the memo).
    pub fn new(model: u16, cpu_free: u32, mem_free: u64, frees: &[u16]) -> Option<FragKey> {
        if frees.len() > 16 {
            return None;
        }
        let mut k = FragKey {
            model,
            len: frees.len() as u8,
            cpu_free,
            mem_free,
            frees: [0; 16],
        };
        k.frees[..frees.len()].copy_from_slice(frees);
        k.frees[..frees.len()].sort_unstable();
        Some(k)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(gpus: u8, milli: u16, cpu: u32) -> Shape {
        Shape {
            gpus,
            milli,
            cpu_milli: cpu,
            mem_mib: 0,
            model_mask: u64::MAX,
        }
    }

    #[test]
    fn an_empty_node_has_no_fragment_for_shapes_that_fit() {
        let w = Workload::from_counts([(&shape(1, 1000, 4000), 1.0)], true, Measure::OnePod);
        assert_eq!(w.node_frag(0, 64_000, 1 << 20, &[1000; 8]), 0.0);
    }

    #[test]
    fn partial_gpus_are_fragments_for_whole_gpu_shapes() {
        let w = Workload::from_counts([(&shape(1, 1000, 0), 1.0)], true, Measure::OnePod);
        // two GPUs: one has 300 free (unusable by a whole-GPU job), one is idle
        assert_eq!(w.node_frag(0, 1000, 1000, &[300, 1000]), 300.0);
    }

    #[test]
    fn a_node_without_cpu_strands_all_its_gpus() {
        let w = Workload::from_counts([(&shape(1, 500, 8000), 1.0)], true, Measure::OnePod);
        assert_eq!(w.node_frag(0, 4000, 1 << 20, &[1000, 1000]), 2000.0);
    }

    #[test]
    fn frag_is_weighted_by_shape_popularity() {
        let w = Workload::from_counts(
            [(&shape(1, 1000, 0), 3.0), (&shape(1, 200, 0), 1.0)],
            true,
            Measure::OnePod,
        );
        // free [500]: whole-GPU shapes (p=.75) see 500 stranded, 0.2-GPU shapes see none
        let f = w.node_frag(0, 1000, 1000, &[500]);
        assert!((f - 375.0).abs() < 1e-9, "{f}");
    }

    #[test]
    fn stats_refresh_at_doubling_intervals() {
        let mut s = ShapeStats::default();
        let job = JobRequest {
            gpu: GpuRequest::Whole(1),
            ..JobRequest::default()
        };
        let mut refreshes = Vec::new();
        for _ in 0..20 {
            if s.observe(&job) {
                refreshes.push(s.seen());
            }
        }
        assert_eq!(refreshes, vec![1, 2, 4, 8, 16]);
    }
}
