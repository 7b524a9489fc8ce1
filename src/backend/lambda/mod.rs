//! Lambda Cloud pools: instances gantry launches through Lambda's Cloud API when its queue
//! needs them and terminates when they idle, each joining its pool as an SSH host running
//! `gantry agent` (the SSH backend's runner, as for EC2). The pool's worker is every cloud's
//! (`cloud::pool`); this module brings Lambda's calls (`api`): live capacity per region from
//! `instance-types` (regions without it are passed over before any launch), launches queued
//! one per `launch_every`, instances named for their fleet, pool and node.

pub mod api;

/// Lambda Cloud instances gantry buys and gives back, each an SSH host running its agent.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::cloud::registration(
        crate::config::fleet::Backend::Lambda,
        &CLOUD,
        |p, _, nodes, _, _| Ok(Box::new(open(p, nodes.to_vec())?)),
    );

/// What `gantry cloud` asks of Lambda Cloud.
const CLOUD: crate::backend::registration::CloudRegistration =
    crate::backend::registration::CloudRegistration {
        name: "Lambda Cloud",
        catalog: crate::config::catalog::Cloud::Lambda,
        places_and_fleet,
        check,
        list,
    };

/// The regions pool `p` tries, in order, and the fleet name its instances' names begin with.
fn places_and_fleet(p: &crate::config::fleet::PoolConfig) -> (Vec<String>, String) {
    let l = p.lambda.clone().unwrap_or_default();
    (l.regions_or(&p.region), target_of(p).fleet)
}

fn check<'a>(
    p: &'a crate::config::fleet::PoolConfig,
    regions: &'a [String],
) -> crate::backend::registration::Answer<'a, crate::backend::cloud::CheckLines> {
    use crate::backend::cloud::Cloud;
    Box::pin(async move {
        match Lambda::new(target_of(p)) {
            Ok(l) => l.check(regions).await,
            Err(e) => vec![(false, e)],
        }
    })
}

fn list(
    p: &crate::config::fleet::PoolConfig,
) -> crate::backend::registration::Answer<'_, crate::backend::registration::Listed> {
    use crate::backend::cloud::Cloud;
    Box::pin(async move {
        let found = Lambda::new(target_of(p))?.list().await;
        found.map_err(|r| r.why().to_string())
    })
}

use crate::backend::cloud::{pool::Reach, CloudPool};
use crate::backend::error::OpenWhy;
use api::{Lambda, Target};

/// Where and how pool `p`'s instances are bought.
pub fn target_of(p: &crate::config::fleet::PoolConfig) -> Target {
    // Validated: a Lambda pool has its table.
    let l = p.lambda.clone().unwrap_or_default();
    Target {
        fleet: l
            .fleet
            .clone()
            .unwrap_or_else(crate::backend::cloud::default_fleet),
        pool: p.name.clone(),
        instance_type: p.instance_type.clone(),
        ssh_key_name: l.ssh_key_name.clone().unwrap_or_default(),
        ssh_public_key: l.ssh_public_key.as_deref().map(crate::backend::expand_home),
        api_key_file: l.api_key_file.as_deref().map(crate::backend::expand_home),
        endpoint_url: l
            .endpoint_url
            .clone()
            .unwrap_or_else(|| api::API.to_string()),
        launch_every: std::time::Duration::from_secs_f64(l.launch_every_s()),
    }
}

/// The provisioner of Lambda pool `p`, whose node slots are `nodes`.
pub fn open(
    p: &crate::config::fleet::PoolConfig,
    nodes: Vec<String>,
) -> Result<CloudPool, OpenWhy> {
    let settings = p
        .lambda
        .clone()
        .ok_or_else(|| OpenWhy::Settings("a Lambda pool needs [pools.lambda]".to_string()))?;
    let target = target_of(p);
    if let Some(long) = nodes
        .iter()
        .map(|n| target.name_of(n))
        .find(|n| n.len() > 64)
    {
        return Err(OpenWhy::Settings(format!(
            "its instances' names (like `{long}`) pass Lambda's 64 characters: a shorter [pools.lambda] fleet or pool name"
        )));
    }
    let reach = Reach {
        name: crate::backend::error::PoolAt::of(p, true).to_string(),
        places: settings.regions_or(&p.region),
        ssh_user: settings.ssh_user().to_string(),
        ssh_host: settings.ssh_host().to_string(),
        nodes,
        delay: p.provisioning_delay_s(),
    };
    CloudPool::open(reach, move || async move {
        // An HTTP client that cannot be built is this host's failure, not the cloud's.
        Lambda::new(target).map_err(OpenWhy::Host)
    })
}
