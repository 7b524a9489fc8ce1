//! Fixtures shared by the integration tests.

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
