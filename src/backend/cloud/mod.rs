//! What every cloud gantry buys from has in common: an instance as gantry tracks it, what a
//! refusal means for the next step, and the calls a cloud answers (`Cloud`). One worker
//! (`pool::CloudPool`) drives any of them: the sweep for strays, idempotent launches with
//! failover from place to place, the poll, terminations retried until they hold. A cloud
//! brings only its API: EC2 (`backend::ec2`) and Lambda Cloud (`backend::lambda`) now; Google
//! Cloud or Azure would bring the same eight calls.

pub mod pool;

use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

pub use pool::CloudPool;

/// What a cloud registers (`backend::registration`): its provisioner buys and gives back
/// instances; its runner is SSH slots, each the instance bought for it once it runs
/// (`Runner::attach`).
pub const fn registration(
    backend: crate::config::fleet::Backend,
    cloud: &'static crate::backend::registration::CloudRegistration,
    provisioner: crate::backend::registration::MakeProvisioner,
) -> crate::backend::registration::Registration {
    crate::backend::registration::Registration {
        backend,
        runner: |p, _, nodes, opening| {
            Ok(Box::new(crate::backend::ssh::SshPool::slots(
                nodes.len(),
                crate::backend::ssh_options(p, opening),
            )?))
        },
        provisioner: Some(provisioner),
        here: None,
        hosts_are: None,
        cloud: Some(cloud),
        gpus_from_agents: false,
    }
}

/// Where an instance is in its life, whatever its cloud calls it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Phase {
    /// Bought, not yet running (EC2 `pending`, Lambda `booting`).
    Starting,
    /// Running (EC2 `running`, Lambda `active` or `unhealthy`).
    Running,
    /// Stopped, still paid for in part (EC2 `stopping`/`stopped`: its volumes).
    Stopped,
    /// Ending or ended (EC2 `shutting-down`/`terminated`, Lambda `terminating`/`terminated`, or
    /// no longer listed).
    Ended,
}

/// An instance of this fleet as its cloud describes it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Instance {
    pub id: String,
    /// The cloud's own word for its state (`running`, `active`, …).
    pub state: String,
    pub phase: Phase,
    pub node: Option<String>,
    pub pool: Option<String>,
    /// Where it runs: an EC2 availability zone, a Lambda region.
    pub zone: Option<String>,
    pub instance_type: Option<String>,
    pub spot: bool,
    pub public_ip: Option<String>,
    pub private_ip: Option<String>,
    pub public_dns: Option<String>,
    /// RFC 3339.
    pub launched: Option<String>,
    /// Why it stopped or ended, as the cloud says (`Server.SpotInstanceTermination: …`).
    pub reason: Option<String>,
}

impl Instance {
    /// An instance its cloud no longer has (`why`: as the cloud's poll found it), of `pool`
    /// where known.
    pub fn gone(id: &str, pool: Option<String>, why: &str) -> Instance {
        Instance {
            id: id.to_string(),
            state: "terminated".to_string(),
            phase: Phase::Ended,
            node: None,
            pool,
            zone: None,
            instance_type: None,
            spot: false,
            public_ip: None,
            private_ip: None,
            public_dns: None,
            launched: None,
            reason: Some(why.to_string()),
        }
    }

    /// Bought and not ended or stopped: what runs up a bill by the hour.
    pub fn live(&self) -> bool {
        matches!(self.phase, Phase::Starting | Phase::Running)
    }
}

/// Why a call did not do what was asked, and what that means for the next step.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// This place (an EC2 zone, a Lambda region) has no capacity for the instance type now, or
    /// does not offer it: nothing was bought; the next place may.
    Zone(String),
    /// The account's quota or the spot price stops every place the pool tries: another pool
    /// (region, market, cloud) may.
    Pool(String),
    /// The pool's settings or credentials are wrong: nothing will work until they change.
    Stop(String),
    /// The call may or may not have reached the cloud (a timeout, a throttle, a 5xx): retry
    /// the same request (a launch first looks for what it may have bought).
    Retry(String),
}

impl Refusal {
    pub fn why(&self) -> &str {
        match self {
            Refusal::Zone(w) | Refusal::Pool(w) | Refusal::Stop(w) | Refusal::Retry(w) => w,
        }
    }
}

/// What `gantry cloud check` says of one pool: each line, and whether it stops buying.
pub type CheckLines = Vec<(bool, String)>;

/// The calls gantry makes to one cloud for one pool. Every instance a launch creates must be
/// findable afterwards by `list` as this fleet's and pool's and its node's (tags, or a name
/// that says so) — that is what lets a daemon killed mid-launch adopt it rather than buy it
/// twice, and what the sweep for strays reads.
#[allow(async_fn_in_trait)] // driven on the pool's own single-threaded runtime: never sent
pub trait Cloud {
    /// What is bought, for events: `p5.48xlarge, spot`.
    fn offer(&self) -> String;
    /// The calls made so far (each an API request).
    fn calls(&self) -> Arc<AtomicU64>;
    /// The least time between two launches (a cloud that rate-limits them: Lambda's one in
    /// ten seconds); launches wait their turn in the pool's queue.
    fn launch_every(&self) -> Duration {
        Duration::ZERO
    }
    /// Before the pool opens: are there credentials, are `places` the region's. An error
    /// refuses the pool with what to do; a cloud that does not answer is not an error (the
    /// pool retries as it buys).
    async fn open_check(&self, places: &[String]) -> Result<(), crate::backend::error::OpenWhy>;
    /// `gantry cloud check`'s lines for the pool (credentials, region, places, image, quota).
    async fn check(&self, places: &[String]) -> CheckLines;
    /// What a launch needs found first, once (EC2: the AMI by name; Lambda: the SSH key).
    async fn prepare(&mut self) -> Result<(), Refusal>;
    /// The places to try, in order, from the pool's (once, after `prepare`): EC2's `["*"]`
    /// becomes the region's zones offering the type, cheapest first. With what to say of it.
    async fn places(
        &self,
        configured: &[String],
    ) -> Result<(Vec<String>, Option<String>), Refusal> {
        Ok((configured.to_vec(), None))
    }
    /// The places with capacity for the pool's instance type now, where the cloud says so
    /// (Lambda's `instance-types`); `None` where it does not (EC2: a launch finds out).
    async fn capacity(&self) -> Result<Option<Vec<String>>, Refusal> {
        Ok(None)
    }
    /// Launches one instance for `node` in `place`, marked as this fleet's at launch. `token`
    /// is the same for every retry of one request (EC2's client token).
    async fn launch(&self, node: &str, place: &str, token: &str) -> Result<Instance, Refusal>;
    /// This fleet's instances of this pool, any phase but ended.
    async fn list(&self) -> Result<Vec<Instance>, Refusal>;
    /// The instances `ids` as they are now; one the cloud no longer has is `Phase::Ended`.
    async fn states(&self, ids: Vec<String>) -> Result<Vec<Instance>, Refusal>;
    /// Terminates `ids`.
    async fn terminate(&self, ids: Vec<String>) -> Result<(), Refusal>;
}

/// `gantry cloud check`'s line of a pool's instances now (`running`: the cloud's word for it).
pub fn instances_line(found: Result<Vec<Instance>, Refusal>, running: &str) -> (bool, String) {
    match found {
        Ok(found) => (
            true,
            format!(
                "instances of this pool now: {} ({} {running})",
                found.len(),
                found.iter().filter(|i| i.phase == Phase::Running).count()
            ),
        ),
        Err(r) => (
            !matches!(r, Refusal::Stop(_)),
            format!("listing instances: {}", r.why()),
        ),
    }
}

/// The `ssh` destination of an instance from a pool's `ssh_host` template (`None` when a
/// field it names is empty: no public address, say).
pub fn entry_of(ssh_user: &str, ssh_host: &str, node: &str, i: &Instance) -> Option<String> {
    let mut host = ssh_host.to_string();
    let fields: [(&str, Option<&str>); 5] = [
        ("{public_ip}", i.public_ip.as_deref()),
        ("{private_ip}", i.private_ip.as_deref()),
        ("{public_dns}", i.public_dns.as_deref()),
        ("{instance_id}", Some(i.id.as_str())),
        ("{node}", Some(node)),
    ];
    for (f, v) in fields {
        if host.contains(f) {
            host = host.replace(f, v.filter(|v| !v.is_empty())?);
        }
    }
    Some(format!("{ssh_user}@{host}"))
}

/// The fleet's name when the pool names none: this host's name.
pub fn default_fleet() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gantry".to_string())
}

/// What `gantry cloud` says of a pool, whichever cloud it buys from (`registry::cloud_of`).
pub mod by_pool {
    use super::{CheckLines, Instance};
    use crate::backend::registration::CloudRegistration;
    use crate::config::fleet::PoolConfig;

    /// What the catalog gantry carries says of pool `p`'s type in its region, beside the price
    /// the pool counts.
    pub fn catalog_line(c: &CloudRegistration, p: &PoolConfig) -> (bool, String) {
        use crate::config::catalog::offers;
        let cloud = c.catalog;
        let here: Vec<_> = offers(cloud)
            .iter()
            .filter(|o| o.instance_type == p.instance_type && o.region == p.region)
            .collect();
        let Some(first) = here.first() else {
            return (
                true,
                format!(
                    "catalog: {} is not in gantry's {} catalog for {}: its GPUs are as declared, its price as written (${:.2}/h)",
                    p.instance_type,
                    cloud.name(),
                    p.region,
                    p.price_per_hour
                ),
            );
        };
        let on_demand = here.iter().filter_map(|o| o.price).fold(f64::NAN, f64::min);
        let spot = here
            .iter()
            .filter_map(|o| {
                o.spot_price
                    .map(|s| (s, o.zone_id.as_deref().unwrap_or("?")))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        (
            true,
            format!(
                "catalog: {} holds {}× {}; in {}: {}{}; the pool counts ${:.2}/h",
                p.instance_type,
                first.gpus,
                first.gpu,
                p.region,
                if on_demand.is_nan() {
                    "no on-demand price".to_string()
                } else {
                    format!("${on_demand:.2}/h on-demand")
                },
                spot.map_or(String::new(), |(s, z)| format!(
                    ", spot from ${s:.2}/h ({z})"
                )),
                p.price_per_hour
            ),
        )
    }

    /// `gantry cloud check`'s lines for pool `p` of cloud `c`.
    pub async fn check(c: &CloudRegistration, p: &PoolConfig) -> CheckLines {
        let (places, _) = (c.places_and_fleet)(p);
        let mut lines = vec![catalog_line(c, p)];
        lines.extend((c.check)(p, &places).await);
        lines
    }

    /// Every instance gantry owns in pool `p`, asked from its cloud `c`.
    pub async fn list(c: &CloudRegistration, p: &PoolConfig) -> Result<Vec<Instance>, String> {
        (c.list)(p).await
    }
}
