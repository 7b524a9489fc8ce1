//! Fixtures shared by the integration tests (each file uses its part).

use gantry::model::{CapacityType, FleetBuilder, ModelId, PoolId, PoolSpec};

/// An on-prem pool (onprem/dc1/dc1-a) of `gpus`-GPU nodes with 128 cores and 1 TiB each.
pub fn onprem_pool(
    b: &mut FleetBuilder,
    model: ModelId,
    name: &str,
    gpus: u8,
    price_per_hour: f64,
) -> PoolId {
    b.pool(PoolSpec {
        provider: "onprem",
        region: "dc1",
        zone: "dc1-a",
        name,
        instance_type: name,
        model: Some(model),
        gpus_per_node: gpus,
        cpu_milli: 128_000,
        mem_mib: 1 << 20,
        capacity: CapacityType::Reserved,
        price_per_hour,
    })
    .expect("a valid pool")
}

/// A pool `name` of one 8-GPU node of `model` (64 cores, 1 TiB, $10/h) in zone `z` of
/// `provider`/`region`: the specs' tests' fleets, one place and model per pool.
pub fn one_node_pool(
    b: &mut FleetBuilder,
    provider: &str,
    region: &str,
    name: &str,
    model: ModelId,
    capacity: CapacityType,
) -> PoolId {
    let p = b
        .pool(PoolSpec {
            provider,
            region,
            zone: "z",
            name,
            instance_type: name,
            model: Some(model),
            gpus_per_node: 8,
            cpu_milli: 64_000,
            mem_mib: 1 << 20,
            capacity,
            price_per_hour: 10.0,
        })
        .expect("a valid pool");
    b.node(p, &format!("{name}-0"), None, None, 0)
        .expect("a valid node");
    p
}
