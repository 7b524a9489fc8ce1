//! EC2 pools: instances gantry buys from AWS when its queue needs them and gives back when
//! they idle, each joining its pool as an SSH host running `gantry agent` (the pool's runner
//! is the SSH backend's: multi-node jobs, logs and re-adoption are the same). The pool's
//! worker is every cloud's (`cloud::pool`); this module brings EC2's calls (`api`): launches
//! idempotent by client token and tagged at launch, zones tried in order, `DescribeInstances`
//! for all of a pool's instances at once.

pub mod api;

/// EC2 instances gantry buys and gives back, each an SSH host running its agent.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::cloud::registration(
        crate::config::fleet::Backend::Ec2,
        &CLOUD,
        |p, _, nodes, _, _| Ok(Box::new(open(p, nodes.to_vec())?)),
    );

/// What `gantry cloud` asks of EC2.
const CLOUD: crate::backend::registration::CloudRegistration =
    crate::backend::registration::CloudRegistration {
        name: "EC2",
        catalog: crate::config::catalog::Cloud::Aws,
        places_and_fleet,
        check,
        list,
    };

/// The zones pool `p` tries, in order, and the fleet name that tags its instances.
fn places_and_fleet(p: &crate::config::fleet::PoolConfig) -> (Vec<String>, String) {
    let e = p.ec2.clone().unwrap_or_default();
    (e.zones_or(&p.zone), target_of(p).fleet)
}

fn check<'a>(
    p: &'a crate::config::fleet::PoolConfig,
    zones: &'a [String],
) -> crate::backend::registration::Answer<'a, crate::backend::cloud::CheckLines> {
    use crate::backend::cloud::Cloud;
    Box::pin(async move { Ec2::new(target_of(p)).await.check(zones).await })
}

fn list(
    p: &crate::config::fleet::PoolConfig,
) -> crate::backend::registration::Answer<'_, crate::backend::registration::Listed> {
    use crate::backend::cloud::Cloud;
    Box::pin(async move {
        let found = Ec2::new(target_of(p)).await.list().await;
        found.map_err(|r| r.why().to_string())
    })
}

use crate::backend::cloud::{pool::Reach, CloudPool};
use api::{Ec2, Target};

/// What a pool's settings say about where and how to buy.
pub fn target_of(p: &crate::config::fleet::PoolConfig) -> Target {
    // Validated: an EC2 pool has its table.
    let e = p.ec2.clone().unwrap_or_default();
    Target {
        region: p.region.clone(),
        fleet: e
            .fleet
            .clone()
            .unwrap_or_else(crate::backend::cloud::default_fleet),
        pool: p.name.clone(),
        instance_type: p.instance_type.clone(),
        spot: p.capacity == crate::model::CapacityType::Spot,
        key_name: e.key_name.clone(),
        security_groups: e.security_groups.clone(),
        subnets: e.subnets.clone(),
        image: e.image.clone(),
        image_name: e.image_name.clone(),
        image_owner: e.image_owner.clone(),
        profile: e.profile.clone(),
        endpoint_url: e.endpoint_url.clone(),
        max_nodes: p.max_nodes.unwrap_or(p.nodes).max(p.nodes),
    }
}

/// The provisioner of EC2 pool `p`, whose node slots are `nodes`.
pub fn open(
    p: &crate::config::fleet::PoolConfig,
    nodes: Vec<String>,
) -> Result<CloudPool, crate::backend::error::OpenWhy> {
    let settings = p.ec2.clone().ok_or_else(|| {
        crate::backend::error::OpenWhy::Settings("an EC2 pool needs [pools.ec2]".to_string())
    })?;
    let target = target_of(p);
    let reach = Reach {
        name: crate::backend::error::PoolAt::of(p, true).to_string(),
        places: settings.zones_or(&p.zone),
        ssh_user: settings.ssh_user().to_string(),
        ssh_host: settings.ssh_host().to_string(),
        nodes,
        delay: p.provisioning_delay_s(),
    };
    CloudPool::open(reach, move || async move { Ok(Ec2::new(target).await) })
}
