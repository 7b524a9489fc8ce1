//! The Alibaba 2023 GPU trace ("openb", the FGD paper's trace) and its published protocol,
//! "workload inflation": shuffle the pods with a seed, append pods sampled with replacement
//! until the requested GPU would exceed `inflate` × capacity, place them one by one with no
//! retries and no departures, and report the GPU allocation ratio at 100% and 130% arrived.

use super::csv::{Fields, Table, TraceError};
use crate::model::{
    CapacityType, Fleet, FleetBuilder, GpuRequest, JobRequest, ModelChoice, PoolSpec, MILLI_PER_GPU,
};
use crate::scheduler::frag::{Measure, ShapeStats, Workload};
use crate::scheduler::rng::Rng;
use crate::scheduler::{cluster_fragmentation, Cluster, Placer, Policy, Unplaceable};
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// Limits that reject absurd rows instead of letting them skew a replay.
const MAX_CPU_MILLI: u64 = 10_000_000; // 10,000 cores
const MAX_MEM_MIB: u64 = 1 << 30; // 1 PiB
const MAX_GPUS: u64 = 64;

#[derive(Clone, Debug, PartialEq)]
pub struct OpenbNode {
    pub name: String,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub gpus: u8,
    pub model: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct OpenbPod {
    pub name: String,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub num_gpu: u8,
    pub gpu_milli: u16,
    /// Allowed models; empty = any.
    pub gpu_spec: Vec<String>,
}

impl OpenbPod {
    /// Requested GPU in milli-GPU (num_gpu × gpu_milli).
    pub fn gpu_request(&self) -> u64 {
        u64::from(self.num_gpu) * u64::from(self.gpu_milli)
    }
}

pub fn load_nodes(path: &Path) -> Result<Vec<OpenbNode>, TraceError> {
    let table = Table::read(path)?;
    parse_nodes(&table)
}

pub fn parse_nodes(table: &Table) -> Result<Vec<OpenbNode>, TraceError> {
    let cols = table.columns(&["sn", "cpu_milli", "memory_mib", "gpu", "model"], &[])?;
    let mut nodes = Vec::with_capacity(table.rows.len());
    let mut seen = HashMap::new();
    for row in &table.rows {
        let f = Fields {
            file: &table.file,
            row,
            columns: &cols,
        };
        let name = f.text("sn").unwrap_or("").to_string();
        if name.is_empty() {
            return Err(f.error("sn", "is empty; every node needs a name".to_string()));
        }
        if let Some(first) = seen.insert(name.clone(), row.line) {
            return Err(f.error(
                "sn",
                format!("node `{name}` already appears on line {first}"),
            ));
        }
        let cpu = f.uint("cpu_milli", MAX_CPU_MILLI)?;
        let mem = f.uint("memory_mib", MAX_MEM_MIB)?;
        let gpus = f.uint("gpu", MAX_GPUS)?;
        let model = f.text("model").unwrap_or("").to_string();
        if gpus > 0 && model.is_empty() {
            return Err(f.error(
                "model",
                format!("is empty but the node has {gpus} GPUs; name the GPU model"),
            ));
        }
        if cpu == 0 {
            return Err(f.error(
                "cpu_milli",
                "is 0; a node needs CPU to run anything".to_string(),
            ));
        }
        nodes.push(OpenbNode {
            name,
            cpu_milli: cpu as u32,
            mem_mib: mem,
            gpus: gpus as u8,
            model: if gpus > 0 { model } else { String::new() },
        });
    }
    if nodes.is_empty() {
        return Err(TraceError {
            file: table.file.clone(),
            line: 1,
            col: 1,
            field: None,
            message: "the node list has no nodes".to_string(),
        });
    }
    Ok(nodes)
}

pub fn load_pods(path: &Path) -> Result<Vec<OpenbPod>, TraceError> {
    let table = Table::read(path)?;
    parse_pods(&table)
}

pub fn parse_pods(table: &Table) -> Result<Vec<OpenbPod>, TraceError> {
    let cols = table.columns(
        &["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"],
        &[
            "gpu_spec",
            "qos",
            "pod_phase",
            "creation_time",
            "deletion_time",
            "scheduled_time",
        ],
    )?;
    let mut pods = Vec::with_capacity(table.rows.len());
    for row in &table.rows {
        let f = Fields {
            file: &table.file,
            row,
            columns: &cols,
        };
        let name = f.text("name").unwrap_or("").to_string();
        let cpu = f.uint("cpu_milli", MAX_CPU_MILLI)?;
        let mem = f.uint("memory_mib", MAX_MEM_MIB)?;
        let num_gpu = f.uint("num_gpu", MAX_GPUS)?;
        let gpu_milli = f.uint("gpu_milli", u64::from(MILLI_PER_GPU))?;
        if num_gpu == 0 && gpu_milli > 0 {
            return Err(f.error(
                "gpu_milli",
                format!("is {gpu_milli} but num_gpu is 0; a CPU-only pod has gpu_milli 0"),
            ));
        }
        if num_gpu > 0 && gpu_milli == 0 {
            return Err(f.error(
                "gpu_milli",
                "is 0 but num_gpu > 0; expected 1..=1000".to_string(),
            ));
        }
        if num_gpu > 1 && gpu_milli < u64::from(MILLI_PER_GPU) {
            return Err(f.error(
                "gpu_milli",
                format!("is {gpu_milli} with num_gpu {num_gpu}; GPU sharing is single-GPU, multi-GPU pods take whole GPUs (1000)"),
            ));
        }
        let gpu_spec = f
            .text("gpu_spec")
            .unwrap_or("")
            .split('|')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect();
        pods.push(OpenbPod {
            name,
            cpu_milli: cpu as u32,
            mem_mib: mem,
            num_gpu: num_gpu as u8,
            gpu_milli: gpu_milli as u16,
            gpu_spec,
        });
    }
    Ok(pods)
}

/// The trace's nodes as a gantry fleet: one pool per node shape, one zone, each node its own
/// NVLink domain. Prices are not part of the trace and are left at zero.
pub fn fleet_of(nodes: &[OpenbNode]) -> Fleet {
    let mut b = FleetBuilder::new();
    let mut pools = HashMap::new();
    for n in nodes {
        let model =
            (n.gpus > 0).then(|| b.model(&n.model, 16 * 1024, None).expect("positive VRAM"));
        let key = (n.model.clone(), n.cpu_milli, n.mem_mib, n.gpus);
        let pool = *pools.entry(key).or_insert_with(|| {
            let name = format!(
                "{}-{}c-{}g",
                if n.model.is_empty() { "cpu" } else { &n.model },
                n.cpu_milli / 1000,
                n.gpus
            );
            b.pool(PoolSpec {
                provider: "openb",
                region: "trace",
                zone: "trace",
                name: &name,
                instance_type: &name,
                model,
                gpus_per_node: n.gpus,
                cpu_milli: n.cpu_milli,
                mem_mib: n.mem_mib,
                capacity: CapacityType::Reserved,
                price_per_hour: 0.0,
            })
            .expect("pool shape checked above")
        });
        b.node(pool, &n.name, None, None, 0)
            .expect("node names checked unique");
    }
    b.build()
}

/// A pod as a job request on `fleet`; `None` when its gpu_spec names no model of the fleet.
pub fn job_of(fleet: &Fleet, pod: &OpenbPod) -> Option<JobRequest> {
    let gpu = match (pod.num_gpu, pod.gpu_milli) {
        (0, _) => GpuRequest::None,
        (n, m) if m >= MILLI_PER_GPU => GpuRequest::Whole(n),
        (_, m) => GpuRequest::Fraction(m),
    };
    let models = if pod.gpu_spec.is_empty() || gpu == GpuRequest::None {
        ModelChoice::Any
    } else {
        let ids: Vec<_> = pod
            .gpu_spec
            .iter()
            .filter_map(|s| fleet.model_by_name(s))
            .collect();
        if ids.is_empty() {
            return None;
        }
        ModelChoice::AnyOf(ids)
    };
    Some(JobRequest {
        nodes: 1,
        gpu,
        cpu_milli: pod.cpu_milli,
        mem_mib: pod.mem_mib,
        vram_mib: 0,
        models,
        spot_ok: true,
        max_price_per_hour: None,
        pools: None,
    })
}

/// One policy on one seed.
#[derive(Clone, Debug, Serialize)]
pub struct SeedResult {
    pub seed: u64,
    /// GPU allocation ratio (percent of capacity) when 100% of capacity had arrived.
    pub alloc_100: f64,
    /// … when `inflate` × capacity had arrived (the end of the run).
    pub alloc_130: f64,
    /// Share of idle GPU capacity that is fragmented (percent) at 90% arrived.
    pub frag_90: f64,
    pub pods: usize,
    pub failed: usize,
    /// Failures of pods that no node could ever host (part of `failed`).
    pub never_fits: usize,
    pub seconds: f64,
}

#[derive(Clone, Debug, Serialize)]
pub struct PolicyResult {
    pub policy: String,
    pub alloc_100_mean: f64,
    pub alloc_100_std: f64,
    pub alloc_130_mean: f64,
    pub alloc_130_std: f64,
    pub frag_90_mean: f64,
    pub seeds: Vec<SeedResult>,
}

/// Everything a replay needs, prepared once and shared by all runs.
pub struct Replay {
    pub fleet: Fleet,
    pub pods: Vec<OpenbPod>,
    jobs: Vec<Option<JobRequest>>,
    /// The trace's shape distribution, for FGD (which knows it up front) and for measuring
    /// fragmentation the same way for every policy.
    trace_jobs: Vec<JobRequest>,
    measure: Workload,
    pub inflate: f64,
}

impl Replay {
    pub fn new(nodes: &[OpenbNode], pods: Vec<OpenbPod>, inflate: f64) -> Replay {
        let fleet = fleet_of(nodes);
        let jobs: Vec<Option<JobRequest>> = pods.iter().map(|p| job_of(&fleet, p)).collect();
        let trace_jobs: Vec<JobRequest> = jobs.iter().flatten().cloned().collect();
        let mut stats = ShapeStats::default();
        for j in &trace_jobs {
            stats.observe(j);
        }
        Replay {
            measure: stats.workload(true, Measure::OnePod),
            fleet,
            pods,
            jobs,
            trace_jobs,
            inflate,
        }
    }

    /// The arrival order for a seed: a shuffle, then samples with replacement, stopping before
    /// the pod that would push the requested GPU past `inflate` × capacity. A pod list that
    /// already asks for more than that is cut at the same point, so the last figure is always
    /// measured at `inflate`.
    pub fn arrivals(&self, seed: u64) -> Vec<usize> {
        let mut rng = Rng::new(seed);
        let mut shuffled: Vec<usize> = (0..self.pods.len()).collect();
        rng.shuffle(&mut shuffled);
        let limit = self.inflate * self.fleet.gpu_milli_capacity() as f64;
        let mut total = 0u64;
        let mut order = Vec::with_capacity(shuffled.len());
        for i in shuffled {
            let next = total + self.pods[i].gpu_request();
            if next as f64 > limit {
                return order;
            }
            total = next;
            order.push(i);
        }
        if self.pods.iter().any(|p| p.gpu_request() > 0) {
            loop {
                let i = rng.below(self.pods.len() as u64) as usize;
                let next = total + self.pods[i].gpu_request();
                if next as f64 > limit {
                    break;
                }
                total = next;
                order.push(i);
            }
        }
        order
    }

    pub fn run(&self, policy: Policy, seed: u64) -> SeedResult {
        let started = std::time::Instant::now();
        let mut cluster = Cluster::new(self.fleet.clone());
        let mut placer = match policy {
            Policy::Fgd => Placer::with_workload(policy, &self.trace_jobs),
            _ => Placer::new(policy),
        };
        let capacity = self.fleet.gpu_milli_capacity() as f64;
        let order = self.arrivals(seed);
        let (mut arrived, mut allocated) = (0u64, 0u64);
        let (mut alloc_100, mut frag_90) = (None, None);
        let (mut failed, mut never) = (0, 0);
        for (step, &i) in order.iter().enumerate() {
            let req = self.pods[i].gpu_request();
            if frag_90.is_none() && (arrived + req) as f64 > 0.9 * capacity {
                let (frag, idle) = cluster_fragmentation(&cluster, &self.measure);
                frag_90 = Some(if idle > 0.0 { 100.0 * frag / idle } else { 0.0 });
            }
            if alloc_100.is_none() && (arrived + req) as f64 > capacity {
                alloc_100 = Some(100.0 * allocated as f64 / capacity);
            }
            arrived += req;
            let Some(job) = &self.jobs[i] else {
                failed += 1;
                never += 1;
                continue;
            };
            placer.observe(job);
            let decision = placer.place(
                &cluster,
                job,
                seed.wrapping_mul(1_000_003).wrapping_add(step as u64),
            );
            match decision {
                Ok(p) => {
                    cluster
                        .allocate(&p)
                        .expect("the scheduler placed within free capacity");
                    allocated += req;
                }
                Err(e) => {
                    failed += 1;
                    if matches!(
                        e,
                        Unplaceable::NeverFits { .. } | Unplaceable::Invalid { .. }
                    ) {
                        never += 1;
                    }
                }
            }
        }
        let final_alloc = 100.0 * allocated as f64 / capacity;
        SeedResult {
            seed,
            alloc_100: alloc_100.unwrap_or(final_alloc),
            alloc_130: final_alloc,
            frag_90: frag_90.unwrap_or(0.0),
            pods: order.len(),
            failed,
            never_fits: never,
            seconds: started.elapsed().as_secs_f64(),
        }
    }
}

fn mean_std(xs: &[f64]) -> (f64, f64) {
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n;
    (mean, var.sqrt())
}

/// Runs every (policy, seed) pair on `threads` threads; results keep the order of `policies`.
pub fn replay_all(
    replay: &Replay,
    policies: &[Policy],
    seeds: &[u64],
    threads: usize,
) -> Vec<PolicyResult> {
    let work: Vec<(usize, u64)> = (0..policies.len())
        .flat_map(|p| seeds.iter().map(move |&s| (p, s)))
        .collect();
    let runs = super::parallel::map(&work, threads, |&(p, seed)| replay.run(policies[p], seed));
    let results: Vec<(usize, SeedResult)> = work.iter().map(|w| w.0).zip(runs).collect();
    policies
        .iter()
        .enumerate()
        .map(|(p, policy)| {
            let seeds: Vec<SeedResult> = results
                .iter()
                .filter(|(q, _)| *q == p)
                .map(|(_, r)| r.clone())
                .collect();
            let (a100, s100) = mean_std(&seeds.iter().map(|r| r.alloc_100).collect::<Vec<_>>());
            let (a130, s130) = mean_std(&seeds.iter().map(|r| r.alloc_130).collect::<Vec<_>>());
            let (f90, _) = mean_std(&seeds.iter().map(|r| r.frag_90).collect::<Vec<_>>());
            PolicyResult {
                policy: policy.name().to_string(),
                alloc_100_mean: a100,
                alloc_100_std: s100,
                alloc_130_mean: a130,
                alloc_130_std: s130,
                frag_90_mean: f90,
                seeds,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        Table::parse("t.csv", text.as_bytes()).unwrap()
    }

    #[test]
    fn pods_with_only_the_first_five_columns_load() {
        let t = table(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,1,500\np1,2000,0,0,0\n",
        );
        let pods = parse_pods(&t).unwrap();
        assert_eq!(pods.len(), 2);
        assert!(pods[0].gpu_spec.is_empty());
        assert_eq!(pods[0].gpu_request(), 500);
    }

    #[test]
    fn nodes_without_gpus_load_and_join_the_fleet() {
        let t =
            table("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,T4\nn1,32000,65536,0,\n");
        let nodes = parse_nodes(&t).unwrap();
        let fleet = fleet_of(&nodes);
        assert_eq!(fleet.nodes.len(), 2);
        assert_eq!(fleet.gpu_count(), 2);
        assert!(fleet.nodes[1].model.is_none());
    }

    #[test]
    fn bad_rows_name_file_line_and_field() {
        let t = table("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,2,500\n");
        let e = parse_pods(&t).unwrap_err().to_string();
        assert!(e.starts_with("t.csv:2:"), "{e}");
        assert!(e.contains("field `gpu_milli`"), "{e}");
        let t = table("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,1024,x,500\n");
        let e = parse_pods(&t).unwrap_err().to_string();
        assert!(
            e.contains("field `num_gpu`: `x` is not a whole number"),
            "{e}"
        );
        let t = table("sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,2,\n");
        let e = parse_nodes(&t).unwrap_err().to_string();
        assert!(e.contains("field `model`"), "{e}");
    }

    #[test]
    fn inflation_stops_before_exceeding_the_target() {
        let nodes = parse_nodes(&table(
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,T4\n",
        ))
        .unwrap();
        let pods = parse_pods(&table(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli\na,1000,1,1,1000\nb,1000,1,1,300\n",
        ))
        .unwrap();
        let r = Replay::new(&nodes, pods, 1.3);
        let order = r.arrivals(42);
        let total: u64 = order.iter().map(|&i| r.pods[i].gpu_request()).sum();
        assert!(total as f64 <= 1.3 * 4000.0);
        assert!(total as f64 + 300.0 > 1.3 * 4000.0 || total as f64 + 1000.0 > 1.3 * 4000.0);
        assert_eq!(
            order,
            r.arrivals(42),
            "the same seed gives the same arrivals"
        );
    }

    #[test]
    fn a_pod_whose_spec_names_no_known_model_is_a_counted_failure() {
        let nodes = parse_nodes(&table(
            "sn,cpu_milli,memory_mib,gpu,model\nn0,64000,262144,4,T4\n",
        ))
        .unwrap();
        let pods = parse_pods(&table(
            "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1000,1,1,1000,A100\nb,1000,1,1,1000,T4|A100\n",
        ))
        .unwrap();
        let r = Replay::new(&nodes, pods, 1.0);
        let res = r.run(Policy::Gantry, 1);
        assert!(res.never_fits >= 1);
        assert!(res.alloc_130 > 0.0);
    }
}
