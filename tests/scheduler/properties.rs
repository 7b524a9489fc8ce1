//! Scheduler invariants under random fleets and job streams, for every policy, checked against
//! an independent brute-force oracle.

use gantry::model::*;
use gantry::scheduler::{fits_on, Cluster, Placer, Policy, Unplaceable};
use proptest::prelude::*;

const GEO: MigGeometry = MigGeometry { slice_gb: 10 };

#[derive(Debug, Clone)]
struct PoolGen {
    zone: u8,
    h100: bool,
    gpus: u8,
    spot: bool,
    price: u16,
    nodes: Vec<(Option<u8>, Option<u8>, u8)>, // (leaf, rack, mig gpus)
}

fn pool_gen() -> impl Strategy<Value = PoolGen> {
    (0u8..2, any::<bool>(), 1u8..=8, any::<bool>(), 1u16..200).prop_flat_map(
        |(zone, h100, gpus, spot, price)| {
            let node = (
                proptest::option::of(0u8..3),
                proptest::option::of(0u8..2),
                0u8..=2,
            );
            proptest::collection::vec(node, 1..5).prop_map(move |nodes| PoolGen {
                zone,
                h100,
                gpus,
                spot,
                price,
                nodes,
            })
        },
    )
}

fn build(pools: &[PoolGen]) -> Fleet {
    let mut b = FleetBuilder::new();
    let h100 = b.model("H100", 81_559, Some(GEO)).unwrap();
    let l4 = b.model("L4", 23_034, None).unwrap();
    let mut n = 0;
    for (i, p) in pools.iter().enumerate() {
        let zone = format!("z{}", p.zone);
        let name = format!("pool{i}");
        let id = b
            .pool(PoolSpec {
                provider: "sim",
                region: "r",
                zone: &zone,
                name: &name,
                instance_type: &name,
                model: Some(if p.h100 { h100 } else { l4 }),
                gpus_per_node: p.gpus,
                cpu_milli: 32_000,
                mem_mib: 65_536,
                capacity: if p.spot {
                    CapacityType::Spot
                } else {
                    CapacityType::OnDemand
                },
                price_per_hour: f64::from(p.price),
            })
            .unwrap();
        for &(leaf, rack, mig) in &p.nodes {
            // Leaves and racks live inside a zone.
            let leaf = leaf.map(|l| format!("{zone}-leaf{l}"));
            let rack = rack.map(|r| format!("{zone}-rack{r}"));
            let mig = if p.h100 { mig.min(p.gpus) } else { 0 };
            b.node(id, &format!("n{n}"), leaf.as_deref(), rack.as_deref(), mig)
                .unwrap();
            n += 1;
        }
    }
    b.build()
}

fn job_gen() -> impl Strategy<Value = JobRequest> {
    let gpu = prop_oneof![
        Just(GpuRequest::None),
        (1u8..=8).prop_map(GpuRequest::Whole),
        (1u16..1000).prop_map(GpuRequest::Fraction),
        prop::sample::select(vec![
            "1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"
        ])
        .prop_map(|p| GpuRequest::Mig(MigProfile::parse(p).unwrap())),
    ];
    let models = prop_oneof![
        Just(ModelChoice::Any),
        Just(ModelChoice::AnyOf(vec![ModelId(0)])),
        Just(ModelChoice::Prefer(vec![ModelId(1), ModelId(0)])),
    ];
    (
        gpu,
        1u16..=3,
        0u32..20_000,
        0u64..40_000,
        prop_oneof![Just(0u32), 0u32..60_000],
        models,
        any::<bool>(),
        proptest::option::of(1u16..400),
    )
        .prop_map(|(gpu, nodes, cpu, mem, vram, models, spot_ok, max_price)| {
            let nodes = if matches!(gpu, GpuRequest::Whole(_) | GpuRequest::None) {
                nodes
            } else {
                1
            };
            JobRequest {
                nodes,
                gpu,
                cpu_milli: cpu,
                mem_mib: mem,
                vram_mib: vram,
                models,
                spot_ok,
                max_price_per_hour: max_price.map(f64::from),
                pools: None,
            }
        })
}

/// Independent per-node check: could one gang member go on this node right now?
fn oracle_fits(fleet: &Fleet, node: &Node, job: &JobRequest) -> bool {
    let pool = fleet.pool(node.pool);
    if node.health != Health::Healthy
        || node.cpu_free < job.cpu_milli
        || node.mem_free < job.mem_mib
    {
        return false;
    }
    if pool.capacity == CapacityType::Spot && !job.spot_ok {
        return false;
    }
    let per_node_price = match job.gpu {
        GpuRequest::None => {
            pool.price_per_hour * f64::from(job.cpu_milli) / f64::from(pool.cpu_milli)
        }
        g => pool.price_per_hour / f64::from(pool.gpus_per_node) * f64::from(g.milli()) / 1000.0,
    };
    if let Some(max) = job.max_price_per_hour {
        if per_node_price * f64::from(job.nodes) > max + 1e-9 {
            return false;
        }
    }
    if job.gpu == GpuRequest::None {
        return true;
    }
    let Some(model) = node.model else {
        return false;
    };
    let allowed = match &job.models {
        ModelChoice::Any => true,
        ModelChoice::AnyOf(l) | ModelChoice::Prefer(l) => l.contains(&model),
    };
    if !allowed {
        return false;
    }
    let m = fleet.model(model);
    match job.gpu {
        GpuRequest::Whole(k) => {
            m.vram_mib >= job.vram_mib
                && node
                    .gpus
                    .iter()
                    .filter(|g| g.mig.is_none() && g.milli_free == 1000)
                    .count()
                    >= usize::from(k)
        }
        GpuRequest::Fraction(f) => node
            .gpus
            .iter()
            .any(|g| g.mig.is_none() && g.milli_free >= f && g.vram_free_mib >= job.vram_mib),
        GpuRequest::Mig(p) => {
            let Some(geo) = &m.mig else { return false };
            node.gpus.iter().any(|g| {
                g.mig
                    .is_some_and(|st| geo.starts(p).iter().any(|&s| st.can_take(geo, p, s)))
            })
        }
        GpuRequest::None => true,
    }
}

fn domain(node: &Node, level: DomainLevel) -> Option<u32> {
    match level {
        DomainLevel::Node => None,
        DomainLevel::Nvlink => Some(node.nvlink.0),
        DomainLevel::Leaf => node.leaf.map(|l| l.0),
        DomainLevel::Zone => Some(node.zone.0),
    }
}

/// The largest number of eligible nodes inside one domain of `level`.
fn largest_block(fleet: &Fleet, job: &JobRequest, level: DomainLevel) -> usize {
    let mut counts = std::collections::HashMap::new();
    for n in fleet.nodes.iter().filter(|n| oracle_fits(fleet, n, job)) {
        if let Some(d) = domain(n, level) {
            *counts.entry(d).or_insert(0usize) += 1;
        }
    }
    counts.values().copied().max().unwrap_or(0)
}

fn check_decision(
    fleet: &Fleet,
    job: &JobRequest,
    decision: &Result<Placement, Unplaceable>,
) -> Result<(), TestCaseError> {
    let need = usize::from(job.nodes);
    match decision {
        Ok(p) => {
            prop_assert_eq!(p.nodes.len(), need, "gang size");
            let mut ids: Vec<_> = p.nodes.iter().map(|g| g.node).collect();
            ids.sort();
            ids.dedup();
            prop_assert_eq!(ids.len(), need, "distinct nodes");
            for g in &p.nodes {
                let node = fleet.node(g.node);
                prop_assert!(
                    oracle_fits(fleet, node, job),
                    "node {} does not fit the job",
                    node.name
                );
                prop_assert_eq!(g.gpus.len(), usize::from(job.gpu.gpu_count()));
                let mut idx: Vec<u8> = g.gpus.iter().map(|x| x.gpu).collect();
                idx.sort();
                idx.dedup();
                prop_assert_eq!(idx.len(), g.gpus.len(), "distinct GPUs");
                for grant in &g.gpus {
                    let gpu = node.gpus[usize::from(grant.gpu)];
                    match (grant.share, job.gpu) {
                        (GpuShare::Whole, GpuRequest::Whole(_)) => {
                            prop_assert!(gpu.mig.is_none() && gpu.milli_free == 1000)
                        }
                        (GpuShare::Milli(m), GpuRequest::Fraction(f)) => {
                            prop_assert!(m == f && gpu.mig.is_none() && gpu.milli_free >= f)
                        }
                        (GpuShare::Mig { profile, start }, GpuRequest::Mig(want)) => {
                            prop_assert_eq!(profile, want);
                            prop_assert!(gpu
                                .mig
                                .is_some_and(|st| st.can_take(&GEO, profile, start)));
                        }
                        other => prop_assert!(false, "grant {other:?} does not match the request"),
                    }
                }
            }
            if need > 1 {
                let first = fleet.node(p.nodes[0].node);
                let d = domain(first, p.level);
                prop_assert!(d.is_some());
                for g in &p.nodes {
                    prop_assert_eq!(
                        domain(fleet.node(g.node), p.level),
                        d,
                        "gang inside one {}",
                        p.level
                    );
                }
                for smaller in [DomainLevel::Nvlink, DomainLevel::Leaf, DomainLevel::Zone] {
                    if smaller >= p.level {
                        break;
                    }
                    prop_assert!(
                        largest_block(fleet, job, smaller) < need,
                        "a smaller {smaller} domain fitted"
                    );
                }
            } else {
                prop_assert_eq!(p.level, DomainLevel::Node);
            }
            if let Some(max) = job.max_price_per_hour {
                prop_assert!(p.price_per_hour <= max + 1e-6);
            }
        }
        Err(Unplaceable::Invalid { .. }) => prop_assert!(job.validate().is_err()),
        Err(_) => {
            // Never refuse what fits: no zone holds enough eligible nodes.
            let room = if need == 1 {
                fleet
                    .nodes
                    .iter()
                    .filter(|n| oracle_fits(fleet, n, job))
                    .count()
            } else {
                largest_block(fleet, job, DomainLevel::Zone)
            };
            prop_assert!(
                room < need,
                "refused although {room} suitable node(s) were free"
            );
        }
    }
    Ok(())
}

fn check_fleet(fleet: &Fleet) -> Result<(), TestCaseError> {
    for n in &fleet.nodes {
        prop_assert!(n.cpu_free <= n.cpu_milli && n.mem_free <= n.mem_mib);
        let vram = n.model.map_or(0, |m| fleet.model(m).vram_mib);
        for g in &n.gpus {
            prop_assert!(g.milli_free <= 1000);
            prop_assert!(g.vram_free_mib <= vram);
            if let Some(st) = g.mig {
                prop_assert!(st.compute_used <= 7);
                prop_assert!(st.memory_mask.count_ones() >= u32::from(st.compute_used.min(1)));
            }
        }
    }
    Ok(())
}

fn run(
    pools: &[PoolGen],
    jobs: &[JobRequest],
    policy: Policy,
    seed: u64,
) -> Result<Vec<Result<Placement, Unplaceable>>, TestCaseError> {
    let mut cluster = Cluster::new(build(pools));
    let mut placer = Placer::new(policy);
    let mut out = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        placer.observe(job);
        // `fits_on` (what a victim search asks of the nodes it frees) agrees with the oracle.
        if job.validate().is_ok() {
            for (n, node) in cluster.fleet().nodes.iter().enumerate() {
                prop_assert_eq!(
                    fits_on(&cluster, job, NodeId(n as u32)),
                    oracle_fits(cluster.fleet(), node, job),
                    "fits_on node {}",
                    n
                );
            }
        }
        let d = placer.place(&cluster, job, seed + i as u64);
        check_decision(cluster.fleet(), job, &d)?;
        if let Ok(p) = &d {
            prop_assert!(
                cluster.allocate(p).is_ok(),
                "the scheduler's placement must allocate"
            );
            check_fleet(cluster.fleet())?;
        }
        out.push(d);
    }
    Ok(out)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_keeps_the_invariants(
        pools in proptest::collection::vec(pool_gen(), 1..5),
        jobs in proptest::collection::vec(job_gen(), 1..30),
        policy in prop::sample::select(Policy::ALL.to_vec()),
        seed in any::<u64>(),
    ) {
        run(&pools, &jobs, policy, seed)?;
    }

    #[test]
    fn same_inputs_and_seed_give_the_same_decisions(
        pools in proptest::collection::vec(pool_gen(), 1..4),
        jobs in proptest::collection::vec(job_gen(), 1..20),
        policy in prop::sample::select(Policy::ALL.to_vec()),
        seed in any::<u64>(),
    ) {
        let a = run(&pools, &jobs, policy, seed)?;
        let b = run(&pools, &jobs, policy, seed)?;
        prop_assert_eq!(a, b);
    }

    #[test]
    fn releasing_everything_restores_the_empty_fleet(
        pools in proptest::collection::vec(pool_gen(), 1..4),
        jobs in proptest::collection::vec(job_gen(), 1..20),
    ) {
        let mut cluster = Cluster::new(build(&pools));
        let empty = cluster.fleet().clone();
        let mut placer = Placer::new(Policy::Gantry);
        let mut placed = Vec::new();
        for (i, job) in jobs.iter().enumerate() {
            if let Ok(p) = placer.place(&cluster, job, i as u64) {
                cluster.allocate(&p).unwrap();
                placed.push(p);
            }
        }
        for p in placed.iter().rev() {
            prop_assert!(cluster.release(p).is_ok());
        }
        prop_assert_eq!(cluster.fleet(), &empty);
    }
}
