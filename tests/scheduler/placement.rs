//! Placement semantics on small hand-built fleets.

use gantry::model::*;
use gantry::scheduler::{Cluster, Placer, Policy, Unplaceable};

const H100_MIG: MigGeometry = MigGeometry { slice_gb: 10 };

struct Fixture {
    b: FleetBuilder,
    h100: ModelId,
    l4: ModelId,
}

impl Fixture {
    fn new() -> Fixture {
        let mut b = FleetBuilder::new();
        let h100 = b.model("H100", 81_559, Some(H100_MIG)).unwrap();
        let l4 = b.model("L4", 23_034, None).unwrap();
        Fixture { b, h100, l4 }
    }

    fn pool(
        &mut self,
        zone: &str,
        name: &str,
        model: ModelId,
        gpus: u8,
        cap: CapacityType,
        price: f64,
    ) -> PoolId {
        self.b
            .pool(PoolSpec {
                provider: "aws",
                region: "us-east-1",
                zone,
                name,
                instance_type: name,
                model: Some(model),
                gpus_per_node: gpus,
                cpu_milli: 192_000,
                mem_mib: 2 << 20,
                capacity: cap,
                price_per_hour: price,
            })
            .unwrap()
    }
}

fn whole(nodes: u16, gpus: u8) -> JobRequest {
    JobRequest {
        nodes,
        gpu: GpuRequest::Whole(gpus),
        cpu_milli: 1000,
        mem_mib: 1024,
        ..JobRequest::default()
    }
}

fn place(fleet: &Fleet, job: &JobRequest, policy: Policy) -> Result<Placement, Unplaceable> {
    Placer::new(policy).place(&Cluster::new(fleet.clone()), job, 7)
}

#[test]
fn a_gang_prefers_one_nvlink_domain_then_one_leaf_then_one_zone() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    // An NVL-style rack of 4 nodes on leaf-1, and 4 loose nodes on leaf-2.
    for i in 0..4 {
        f.b.node(
            p,
            &format!("rack-{i}"),
            Some("leaf-1"),
            Some("nvl-rack-1"),
            0,
        )
        .unwrap();
    }
    for i in 0..4 {
        f.b.node(p, &format!("loose-{i}"), Some("leaf-2"), None, 0)
            .unwrap();
    }
    let fleet = f.b.build();
    for policy in Policy::ALL {
        let four = place(&fleet, &whole(4, 8), policy).unwrap();
        assert_eq!(four.level, DomainLevel::Nvlink, "{policy}");
        assert!(
            four.nodes
                .iter()
                .all(|g| fleet.node(g.node).name.starts_with("rack-")),
            "{policy}"
        );
        // Six nodes fit no rack and no leaf: the zone it is.
        let six = place(&fleet, &whole(6, 8), policy).unwrap();
        assert_eq!(six.level, DomainLevel::Zone, "{policy}");
        assert_eq!(six.nodes.len(), 6);
    }
}

#[test]
fn a_gang_fills_one_leaf_when_no_rack_fits() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    for i in 0..3 {
        f.b.node(p, &format!("l1-{i}"), Some("leaf-1"), None, 0)
            .unwrap();
    }
    for i in 0..5 {
        f.b.node(p, &format!("l2-{i}"), Some("leaf-2"), None, 0)
            .unwrap();
    }
    let fleet = f.b.build();
    let gang = place(&fleet, &whole(4, 8), Policy::Gantry).unwrap();
    assert_eq!(gang.level, DomainLevel::Leaf);
    assert!(gang
        .nodes
        .iter()
        .all(|g| fleet.node(g.node).name.starts_with("l2-")));
    let ids: Vec<_> = gang.nodes.iter().map(|g| g.node).collect();
    let mut dedup = ids.clone();
    dedup.dedup();
    assert_eq!(ids, dedup, "distinct nodes");
    assert!(gang.nodes.iter().all(|g| g.gpus.len() == 8));
}

#[test]
fn gangs_never_span_zones_and_say_why() {
    let mut f = Fixture::new();
    let a = f.pool("a", "p5-a", f.h100, 8, CapacityType::OnDemand, 98.0);
    let b = f.pool("b", "p5-b", f.h100, 8, CapacityType::OnDemand, 98.0);
    for i in 0..3 {
        f.b.node(a, &format!("a-{i}"), None, None, 0).unwrap();
        f.b.node(b, &format!("b-{i}"), None, None, 0).unwrap();
    }
    let fleet = f.b.build();
    let err = place(&fleet, &whole(4, 8), Policy::Gantry).unwrap_err();
    match err {
        Unplaceable::NeverFits { reason } => assert!(reason.contains("one zone"), "{reason}"),
        other => panic!("expected NeverFits, got {other:?}"),
    }
}

#[test]
fn all_or_nothing_when_the_zone_is_busy() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    for i in 0..4 {
        f.b.node(p, &format!("n{i}"), None, None, 0).unwrap();
    }
    let mut cluster = Cluster::new(f.b.build());
    let mut placer = Placer::new(Policy::Gantry);
    let one = placer.place(&cluster, &whole(1, 1), 1).unwrap();
    cluster.allocate(&one).unwrap();
    let before = cluster.fleet().clone();
    let err = placer.place(&cluster, &whole(4, 8), 2).unwrap_err();
    assert!(
        matches!(
            err,
            Unplaceable::NoCapacity {
                eligible_nodes: 3,
                needed_nodes: 4,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(cluster.fleet(), &before, "a refused gang changes nothing");
}

#[test]
fn fractions_share_a_gpu_and_name_it() {
    let mut f = Fixture::new();
    let p = f.pool("a", "g6", f.l4, 2, CapacityType::OnDemand, 2.0);
    f.b.node(p, "n0", None, None, 0).unwrap();
    let mut cluster = Cluster::new(f.b.build());
    let mut placer = Placer::new(Policy::Gantry);
    let job = JobRequest {
        gpu: GpuRequest::Fraction(400),
        ..whole(1, 1)
    };
    let mut used = Vec::new();
    for seed in 0..4 {
        let p = placer.place(&cluster, &job, seed).unwrap();
        let g = p.nodes[0].gpus[0];
        assert_eq!(g.share, GpuShare::Milli(400));
        used.push(g.gpu);
        cluster.allocate(&p).unwrap();
    }
    used.sort();
    assert_eq!(used, vec![0, 0, 1, 1], "two 0.4 shares on each GPU");
    let milli: Vec<u16> = cluster.fleet().nodes[0]
        .gpus
        .iter()
        .map(|g| g.milli_free)
        .collect();
    assert_eq!(milli, vec![200, 200]);
    // A fifth 0.4 share has nowhere to go; a 0.2 share still does.
    assert!(matches!(
        placer.place(&cluster, &job, 9),
        Err(Unplaceable::NoCapacity { .. })
    ));
    let small = JobRequest {
        gpu: GpuRequest::Fraction(200),
        ..whole(1, 1)
    };
    assert!(placer.place(&cluster, &small, 10).is_ok());
}

#[test]
fn mig_slices_are_named_and_packed_into_one_gpu() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    f.b.node(p, "mig-node", None, None, 2).unwrap();
    let mut cluster = Cluster::new(f.b.build());
    let mut placer = Placer::new(Policy::Gantry);
    let slice = |name: &str| JobRequest {
        gpu: GpuRequest::Mig(MigProfile::parse(name).unwrap()),
        ..whole(1, 1)
    };
    let mut gpus = Vec::new();
    for (i, name) in ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
        .iter()
        .enumerate()
    {
        let p = placer.place(&cluster, &slice(name), i as u64).unwrap();
        let g = p.nodes[0].gpus[0];
        let GpuShare::Mig { profile, .. } = g.share else {
            panic!("not a MIG grant")
        };
        assert_eq!(profile.to_string(), *name);
        gpus.push(g.gpu);
        cluster.allocate(&p).unwrap();
    }
    assert!(
        gpus.iter().all(|&g| g == gpus[0]),
        "best fit keeps one GPU busy: {gpus:?}"
    );
    let state = cluster.fleet().nodes[0].gpus[usize::from(gpus[0])]
        .mig
        .unwrap();
    assert_eq!(state.compute_used, 7);
    // A whole-GPU job still finds the 6 GPUs that are not in MIG mode, never a MIG one.
    let p = placer.place(&cluster, &whole(1, 6), 9).unwrap();
    assert!(p.nodes[0].gpus.iter().all(|g| g.gpu >= 2));
}

#[test]
fn cheaper_capacity_wins_when_all_else_is_equal() {
    let mut f = Fixture::new();
    let dear = f.pool("a", "dear", f.h100, 8, CapacityType::OnDemand, 120.0);
    let cheap = f.pool("a", "cheap", f.h100, 8, CapacityType::OnDemand, 80.0);
    f.b.node(dear, "dear-0", None, None, 0).unwrap();
    f.b.node(cheap, "cheap-0", None, None, 0).unwrap();
    let fleet = f.b.build();
    for policy in [
        Policy::Spread,
        Policy::BestFit,
        Policy::Packing,
        Policy::Fgd,
        Policy::Gantry,
    ] {
        let p = place(&fleet, &whole(1, 2), policy).unwrap();
        assert_eq!(fleet.node(p.nodes[0].node).name, "cheap-0", "{policy}");
        assert!(
            (p.price_per_hour - 20.0).abs() < 1e-9,
            "2 of 8 GPUs at $80/h"
        );
    }
}

#[test]
fn spot_needs_consent_and_price_ceilings_hold() {
    let mut f = Fixture::new();
    let spot = f.pool("a", "spot", f.h100, 8, CapacityType::Spot, 40.0);
    let od = f.pool("a", "od", f.h100, 8, CapacityType::OnDemand, 100.0);
    f.b.node(spot, "spot-0", None, None, 0).unwrap();
    f.b.node(od, "od-0", None, None, 0).unwrap();
    let fleet = f.b.build();
    let p = place(&fleet, &whole(1, 8), Policy::Gantry).unwrap();
    assert_eq!(
        fleet.node(p.nodes[0].node).name,
        "od-0",
        "spot only with spot_ok"
    );
    let p = place(
        &fleet,
        &JobRequest {
            spot_ok: true,
            ..whole(1, 8)
        },
        Policy::Gantry,
    )
    .unwrap();
    assert_eq!(fleet.node(p.nodes[0].node).name, "spot-0");
    let capped = JobRequest {
        max_price_per_hour: Some(50.0),
        ..whole(1, 8)
    };
    assert!(matches!(
        place(&fleet, &capped, Policy::Gantry),
        Err(Unplaceable::NeverFits { .. })
    ));
}

#[test]
fn vram_and_model_preferences_are_honoured() {
    let mut f = Fixture::new();
    let h = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    let l = f.pool("a", "g6", f.l4, 8, CapacityType::OnDemand, 8.0);
    f.b.node(h, "h-0", None, None, 0).unwrap();
    f.b.node(l, "l-0", None, None, 0).unwrap();
    let fleet = f.b.build();
    // 40 GB of VRAM rules out the (cheaper) L4.
    let big = JobRequest {
        vram_mib: 40_000,
        ..whole(1, 1)
    };
    assert_eq!(
        fleet
            .node(place(&fleet, &big, Policy::Gantry).unwrap().nodes[0].node)
            .name,
        "h-0"
    );
    // An ordered preference beats price; an any-of list lets price decide.
    let prefer = JobRequest {
        models: ModelChoice::Prefer(vec![f.h100, f.l4]),
        ..whole(1, 1)
    };
    assert_eq!(
        fleet
            .node(place(&fleet, &prefer, Policy::Gantry).unwrap().nodes[0].node)
            .name,
        "h-0"
    );
    let any_of = JobRequest {
        models: ModelChoice::AnyOf(vec![f.h100, f.l4]),
        ..whole(1, 1)
    };
    assert_eq!(
        fleet
            .node(place(&fleet, &any_of, Policy::Gantry).unwrap().nodes[0].node)
            .name,
        "l-0"
    );
}

#[test]
fn impossible_requests_get_reasons_not_panics() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    f.b.node(p, "n0", None, None, 0).unwrap();
    let fleet = f.b.build();
    let too_many = place(&fleet, &whole(1, 16), Policy::Gantry).unwrap_err();
    assert_eq!(
        too_many.to_string(),
        "no node could ever host it: asks 16 GPUs per node; the largest node has 8"
    );
    let no_mig = JobRequest {
        gpu: GpuRequest::Mig(MigProfile::parse("1g.10gb").unwrap()),
        ..whole(1, 1)
    };
    assert!(place(&fleet, &no_mig, Policy::Gantry)
        .unwrap_err()
        .to_string()
        .contains("MIG"));
    let zero = place(&fleet, &whole(0, 1), Policy::Gantry).unwrap_err();
    assert!(matches!(zero, Unplaceable::Invalid { .. }));
    let bad_fraction = JobRequest {
        gpu: GpuRequest::Fraction(1000),
        ..whole(1, 1)
    };
    assert!(place(&fleet, &bad_fraction, Policy::Gantry)
        .unwrap_err()
        .to_string()
        .contains("1..=999"));
}

#[test]
fn release_gives_back_exactly_what_allocate_took() {
    let mut f = Fixture::new();
    let p = f.pool("a", "p5", f.h100, 8, CapacityType::OnDemand, 98.0);
    f.b.node(p, "n0", None, None, 1).unwrap();
    let mut cluster = Cluster::new(f.b.build());
    let empty = cluster.fleet().clone();
    let mut placer = Placer::new(Policy::Gantry);
    let jobs = [
        whole(1, 2),
        JobRequest {
            gpu: GpuRequest::Fraction(300),
            vram_mib: 1000,
            ..whole(1, 1)
        },
        JobRequest {
            gpu: GpuRequest::Mig(MigProfile::parse("2g.20gb").unwrap()),
            ..whole(1, 1)
        },
    ];
    let placements: Vec<Placement> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let p = placer.place(&cluster, j, i as u64).unwrap();
            cluster.allocate(&p).unwrap();
            p
        })
        .collect();
    for p in placements.iter().rev() {
        cluster.release(p).unwrap();
    }
    assert_eq!(cluster.fleet(), &empty);
    assert!(
        cluster.release(&placements[0]).is_err(),
        "a double release is refused"
    );
    assert_eq!(cluster.fleet(), &empty, "and changes nothing");
}

/// A job's allowed pools (its `infra`) hold even when another pool is cheaper, and a job
/// whose pools are full waits rather than spilling elsewhere.
#[test]
fn a_job_runs_only_in_the_pools_its_infra_allows() {
    let mut f = Fixture::new();
    let cheap = f.pool("a", "cheap", f.h100, 8, CapacityType::OnDemand, 10.0);
    let dear = f.pool("b", "dear", f.h100, 8, CapacityType::OnDemand, 90.0);
    f.b.node(cheap, "cheap-0", None, None, 0).unwrap();
    f.b.node(dear, "dear-0", None, None, 0).unwrap();
    let fleet = f.b.build();
    let pool_of = |p: &Placement| fleet.node(p.nodes[0].node).pool;
    let anywhere = whole(1, 8);
    assert_eq!(
        pool_of(&place(&fleet, &anywhere, Policy::Gantry).unwrap()),
        cheap
    );
    let there = JobRequest {
        pools: Some(vec![dear]),
        ..whole(1, 8)
    };
    assert_eq!(
        pool_of(&place(&fleet, &there, Policy::Gantry).unwrap()),
        dear
    );
    let too_big = JobRequest {
        pools: Some(vec![dear]),
        ..whole(2, 8)
    };
    assert!(place(&fleet, &too_big, Policy::Gantry).is_err());
}
