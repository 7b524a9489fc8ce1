//! The EC2 calls gantry makes, through the official SDK: launch one instance (idempotent by
//! client token, tagged as this fleet's at launch), list this fleet's instances, terminate,
//! look an image up, and what a refusal means for the next step (another zone, another pool,
//! or stop and say why). Every call is counted: `gantry bench cloud` reports calls per node.

use crate::backend::cloud::{CheckLines, Cloud, Instance, Phase, Refusal};
use crate::backend::error::OpenWhy;
use crate::config::ec2::ANY_ZONE;
use aws_sdk_ec2::error::ProvideErrorMetadata;
use aws_sdk_ec2::types::{
    Filter, InstanceMarketOptionsRequest, InstanceStateName, InstanceType, MarketType, Placement,
    ResourceType, SpotInstanceType, SpotMarketOptions, Tag, TagSpecification,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The tags that mark an instance as gantry's: which fleet, pool and node it is.
pub const TAG_FLEET: &str = "gantry:fleet";
pub const TAG_POOL: &str = "gantry:pool";
pub const TAG_NODE: &str = "gantry:node";

/// Where and how one pool's instances are bought.
#[derive(Clone, Debug)]
pub struct Target {
    pub region: String,
    pub fleet: String,
    pub pool: String,
    pub instance_type: String,
    pub spot: bool,
    pub key_name: Option<String>,
    pub security_groups: Vec<String>,
    pub subnets: std::collections::BTreeMap<String, String>,
    pub image: Option<String>,
    pub image_name: Option<String>,
    pub image_owner: Option<String>,
    pub profile: Option<String>,
    pub endpoint_url: Option<String>,
    /// The most instances the pool buys (`gantry cloud check` weighs its quota against it).
    pub max_nodes: u32,
}

/// EC2 error codes by what they mean for the next step.
const ZONE_CODES: [&str; 6] = [
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientCapacity",
    "InsufficientReservedInstanceCapacity",
    "InsufficientFreeAddressesInSubnet",
    "Unsupported",
];
const POOL_CODES: [&str; 6] = [
    "VcpuLimitExceeded",
    "InstanceLimitExceeded",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
    "InsufficientSpotCapacity",
    "RequestLimitExceeded-Spot",
];
const RETRY_CODES: [&str; 5] = [
    "RequestLimitExceeded",
    "Throttling",
    "ThrottlingException",
    "InternalError",
    "ServiceUnavailable",
];

/// What an SDK error means (its EC2 code, or how the request failed).
fn refusal<E>(e: &aws_sdk_ec2::error::SdkError<E>) -> Refusal
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    use aws_sdk_ec2::error::SdkError;
    match e {
        SdkError::ServiceError(s) => {
            let err = s.err();
            let code = err.code().unwrap_or("Unknown").to_string();
            let why = format!("{code}: {}", err.message().unwrap_or("(no message)"));
            if ZONE_CODES.contains(&code.as_str()) {
                Refusal::Zone(why)
            } else if POOL_CODES.contains(&code.as_str()) {
                Refusal::Pool(why)
            } else if RETRY_CODES.contains(&code.as_str()) || s.raw().status().is_server_error() {
                Refusal::Retry(why)
            } else {
                Refusal::Stop(why)
            }
        }
        SdkError::ConstructionFailure(_) => Refusal::Stop(chain(e)),
        // Credentials that cannot be found surface here, before anything is sent.
        SdkError::DispatchFailure(d) if !d.is_io() && !d.is_timeout() => Refusal::Stop(chain(e)),
        _ => Refusal::Retry(chain(e)),
    }
}

fn chain(e: &dyn std::error::Error) -> String {
    crate::untrusted::bounded(&crate::backend::ssh::error_chain(e), 400)
}

/// One pool's EC2 client.
#[derive(Clone)]
pub struct Ec2 {
    client: aws_sdk_ec2::Client,
    quotas: aws_sdk_servicequotas::Client,
    credentials: Option<aws_sdk_ec2::config::SharedCredentialsProvider>,
    pub target: Target,
    /// Calls made (each an API request; the SDK's own retries of one are not counted).
    pub calls: Arc<AtomicU64>,
    /// The AMI found for `image_name` (`Cloud::prepare`).
    image: Option<String>,
}

impl Ec2 {
    /// The client for `target`, credentials from the usual chain (or its profile).
    pub async fn new(target: Target) -> Ec2 {
        let http = aws_smithy_http_client::Builder::new()
            .tls_provider(aws_smithy_http_client::tls::Provider::Rustls(
                aws_smithy_http_client::tls::rustls_provider::CryptoMode::Ring,
            ))
            .build_https();
        let mut loader = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .region(aws_config::Region::new(target.region.clone()))
            .http_client(http)
            .timeout_config(
                aws_config::timeout::TimeoutConfig::builder()
                    .connect_timeout(std::time::Duration::from_secs(10))
                    .operation_attempt_timeout(std::time::Duration::from_secs(30))
                    .build(),
            );
        if let Some(p) = &target.profile {
            loader = loader.profile_name(p);
        }
        if let Some(u) = &target.endpoint_url {
            loader = loader.endpoint_url(u);
        }
        let sdk = loader.load().await;
        Ec2 {
            client: aws_sdk_ec2::Client::new(&sdk),
            quotas: aws_sdk_servicequotas::Client::new(&sdk),
            credentials: sdk.credentials_provider(),
            target,
            calls: Arc::default(),
            image: None,
        }
    }

    fn count(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }

    /// Whether credentials can be found, without a call to EC2: what is missing, if not.
    pub async fn credentials(&self) -> Result<(), String> {
        use aws_sdk_ec2::config::ProvideCredentials;
        let Some(p) = &self.credentials else {
            return Err("no AWS credentials provider is configured".to_string());
        };
        p.provide_credentials().await.map(|_| ()).map_err(|e| {
            format!(
                "no AWS credentials: {} — set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE (or the pool's [pools.ec2] profile), or run where an instance role applies",
                chain(&e)
            )
        })
    }

    /// The AMI to launch: the pool's, or the newest whose name matches its `image_name`.
    pub async fn image(&self) -> Result<String, Refusal> {
        if let Some(i) = &self.target.image {
            return Ok(i.clone());
        }
        let name = self.target.image_name.clone().unwrap_or_default();
        self.count();
        let out = self
            .client
            .describe_images()
            .owners(self.target.image_owner.as_deref().unwrap_or("amazon"))
            .filters(Filter::builder().name("name").values(&name).build())
            .filters(Filter::builder().name("state").values("available").build())
            .send()
            .await
            .map_err(|e| refusal(&e))?;
        let mut images: Vec<_> = out.images().iter().collect();
        images.sort_by_key(|i| std::cmp::Reverse(i.creation_date().unwrap_or("").to_string()));
        images
            .first()
            .and_then(|i| i.image_id())
            .map(str::to_string)
            .ok_or_else(|| {
                Refusal::Stop(format!(
                    "no image named `{name}` (owner {}) in {}",
                    self.target.image_owner.as_deref().unwrap_or("amazon"),
                    self.target.region
                ))
            })
    }

    /// Launches one instance for `node` in `zone`, tagged as this fleet's at launch (so a
    /// daemon killed before it hears the answer finds it when it lists the fleet). `token`
    /// makes the request idempotent: sent again after a lost answer, it buys nothing more.
    pub async fn run_instance(
        &self,
        node: &str,
        zone: &str,
        image: &str,
        token: &str,
    ) -> Result<Instance, Refusal> {
        let t = &self.target;
        let tags = TagSpecification::builder()
            .resource_type(ResourceType::Instance)
            .tags(Tag::builder().key(TAG_FLEET).value(&t.fleet).build())
            .tags(Tag::builder().key(TAG_POOL).value(&t.pool).build())
            .tags(Tag::builder().key(TAG_NODE).value(node).build())
            .tags(Tag::builder().key("Name").value(node).build())
            .build();
        let mut req = self
            .client
            .run_instances()
            .image_id(image)
            .instance_type(InstanceType::from(t.instance_type.as_str()))
            .min_count(1)
            .max_count(1)
            .client_token(token)
            .placement(Placement::builder().availability_zone(zone).build())
            .tag_specifications(tags);
        if let Some(k) = &t.key_name {
            req = req.key_name(k);
        }
        for g in &t.security_groups {
            req = req.security_group_ids(g);
        }
        if let Some(s) = t.subnets.get(zone) {
            req = req.subnet_id(s);
        }
        if t.spot {
            req = req.instance_market_options(
                InstanceMarketOptionsRequest::builder()
                    .market_type(MarketType::Spot)
                    .spot_options(
                        SpotMarketOptions::builder()
                            .spot_instance_type(SpotInstanceType::OneTime)
                            .build(),
                    )
                    .build(),
            );
        }
        self.count();
        let out = req.send().await.map_err(|e| refusal(&e))?;
        out.instances()
            .first()
            .map(instance)
            .ok_or_else(|| Refusal::Retry("RunInstances answered with no instance".to_string()))
    }

    async fn describe(
        &self,
        filters: Vec<Filter>,
        ids: Vec<String>,
    ) -> Result<Vec<Instance>, Refusal> {
        let mut out = Vec::new();
        let mut next: Option<String> = None;
        loop {
            self.count();
            let page = self
                .client
                .describe_instances()
                .set_filters((!filters.is_empty()).then(|| filters.clone()))
                .set_instance_ids((!ids.is_empty()).then(|| ids.clone()))
                .set_next_token(next.clone())
                .send()
                .await
                .map_err(|e| refusal(&e))?;
            for r in page.reservations() {
                out.extend(r.instances().iter().map(instance));
            }
            next = page
                .next_token()
                .map(str::to_string)
                .filter(|t| !t.is_empty());
            if next.is_none() {
                return Ok(out);
            }
        }
    }

    /// The Service Quotas limit (vCPUs) that caps the pool's instances, and the line
    /// `gantry cloud check` says of it: how many of the pool's instances it allows against
    /// its `max_nodes`. Unreadable (no permission, a service that does not serve it) is said,
    /// not failed: a quota refusal still shows as an event when a buy hits it.
    pub async fn quota_line(&self, max_nodes: u32) -> (bool, String) {
        let t = &self.target;
        let Some((code, name)) = quota_of(&t.instance_type, t.spot) else {
            return (true, format!("quota: none known for {}", t.instance_type));
        };
        self.count();
        let read = self
            .quotas
            .get_service_quota()
            .service_code("ec2")
            .quota_code(code)
            .send()
            .await;
        let value = match read {
            Ok(out) => out.quota().and_then(|q| q.value()),
            Err(e) => {
                return (
                    true,
                    format!(
                        "quota {name} ({code}): not readable ({}): a quota refusal shows as an event when a buy hits it",
                        quota_error(&e)
                    ),
                )
            }
        };
        let Some(vcpus) = value else {
            return (true, format!("quota {name} ({code}): no value given"));
        };
        let per = crate::config::catalog::offers(crate::config::catalog::Cloud::Aws)
            .iter()
            .find(|o| o.instance_type == t.instance_type)
            .map(|o| o.vcpus)
            .filter(|v| *v > 0.0);
        let Some(per) = per else {
            return (true, format!("quota {name} ({code}): {vcpus:.0} vCPUs"));
        };
        let fits = (vcpus / per).floor() as u32;
        let needs = per * f64::from(max_nodes);
        (
            fits > 0,
            format!(
                "quota {name} ({code}): {vcpus:.0} vCPUs = {fits} × {} ({per:.0} vCPUs each); max_nodes {max_nodes} needs {needs:.0}{}",
                t.instance_type,
                if fits == 0 {
                    " — none can be bought: ask AWS for more (Service Quotas console)".to_string()
                } else if fits < max_nodes {
                    format!(" — at most {fits} can run at once")
                } else {
                    String::new()
                }
            ),
        )
    }

    /// Whether the pool's security groups admit SSH (tcp 22), which the daemon needs to reach
    /// its instances: each group found, and one of them with an inbound rule for port 22.
    async fn security_group_lines(&self) -> Vec<(bool, String)> {
        let groups = &self.target.security_groups;
        if groups.is_empty() {
            return vec![(
                true,
                "security groups: none given, so the VPC's default (it admits only its own members unless changed): give security_groups that admit this host on tcp 22".to_string(),
            )];
        }
        self.count();
        let found = match self
            .client
            .describe_security_groups()
            .set_group_ids(Some(groups.clone()))
            .send()
            .await
        {
            Ok(out) => out.security_groups().to_vec(),
            Err(e) => return vec![(false, format!("security groups: {}", refusal(&e).why()))],
        };
        let mut lines = Vec::new();
        let mut ssh = false;
        for g in &found {
            let id = g.group_id().unwrap_or("?");
            let from: Vec<String> = g
                .ip_permissions()
                .iter()
                .filter(|p| {
                    p.ip_protocol() == Some("-1")
                        || (p.ip_protocol() == Some("tcp")
                            && p.from_port().unwrap_or(0) <= 22
                            && p.to_port().unwrap_or(0) >= 22)
                })
                .flat_map(|p| {
                    p.ip_ranges()
                        .iter()
                        .filter_map(|r| r.cidr_ip().map(str::to_string))
                        .chain(
                            p.user_id_group_pairs()
                                .iter()
                                .filter_map(|u| u.group_id().map(|g| format!("members of {g}"))),
                        )
                        .collect::<Vec<_>>()
                })
                .collect();
            ssh |= !from.is_empty();
            lines.push((
                true,
                if from.is_empty() {
                    format!("security group {id}: no inbound rule for tcp 22")
                } else {
                    format!(
                        "security group {id}: admits tcp 22 from {}",
                        from.join(", ")
                    )
                },
            ));
        }
        if !ssh {
            lines.push((
                false,
                format!(
                    "no security group of the pool admits tcp 22 ({}): the daemon could not reach its instances; add an inbound rule for port 22 from this host",
                    groups.join(", ")
                ),
            ));
        }
        lines
    }

    /// `zones = ["*"]`: the available zones of `have` where the catalog offers the type,
    /// cheapest first (spot prices for a spot pool) — every available zone, by name, where the
    /// catalog does not know the type — and the sentence that says so.
    fn by_price(&self, have: &[(String, String, String)]) -> (Vec<String>, String) {
        use crate::config::catalog::{zone_prices, Cloud as Catalog};
        let t = &self.target;
        let prices = zone_prices(Catalog::Aws, &t.instance_type, &t.region, t.spot);
        let available: Vec<&(String, String, String)> = have
            .iter()
            .filter(|(_, state, _)| state == "available")
            .collect();
        if prices.is_empty() {
            let mut names: Vec<String> = available.iter().map(|(n, _, _)| n.clone()).collect();
            names.sort();
            let said = format!(
                "zones: {} is not in gantry's catalog for {}: every available zone, by name ({})",
                t.instance_type,
                t.region,
                names.join(", ")
            );
            return (names, said);
        }
        let mut order = Vec::new();
        let mut parts = Vec::new();
        for (id, price) in prices {
            if let Some((name, _, _)) = available.iter().find(|(_, _, z)| z == id) {
                order.push(name.clone());
                parts.push(format!("{name} ${price:.2}/h"));
            }
        }
        let said = format!(
            "zones by {} price (catalog): {}",
            if t.spot { "spot" } else { "on-demand" },
            if parts.is_empty() {
                "none of the zones offering it is available".to_string()
            } else {
                parts.join(", ")
            }
        );
        (order, said)
    }

    /// The region's zones that answer: (name, state, zone id).
    pub async fn zones(&self) -> Result<Vec<(String, String, String)>, Refusal> {
        self.count();
        let out = self
            .client
            .describe_availability_zones()
            .send()
            .await
            .map_err(|e| refusal(&e))?;
        Ok(out
            .availability_zones()
            .iter()
            .map(|z| {
                (
                    z.zone_name().unwrap_or_default().to_string(),
                    z.state().map_or("?", |s| s.as_str()).to_string(),
                    z.zone_id().unwrap_or_default().to_string(),
                )
            })
            .collect())
    }
}

impl Cloud for Ec2 {
    fn offer(&self) -> String {
        format!(
            "{}, {}",
            self.target.instance_type,
            if self.target.spot {
                "spot"
            } else {
                "on-demand"
            }
        )
    }

    fn calls(&self) -> Arc<AtomicU64> {
        self.calls.clone()
    }

    async fn open_check(&self, zones: &[String]) -> Result<(), OpenWhy> {
        self.credentials().await.map_err(OpenWhy::Credentials)?;
        match self.zones().await {
            Ok(have) => match zones
                .iter()
                .filter(|z| z.as_str() != ANY_ZONE)
                .find(|z| !have.iter().any(|(n, _, _)| n == *z))
            {
                Some(z) => Err(OpenWhy::Place(format!(
                    "zone `{z}` is not a zone of {} (it has: {})",
                    self.target.region,
                    names_or_none(have.iter().map(|(n, _, _)| n.as_str()))
                ))),
                None => Ok(()),
            },
            Err(Refusal::Stop(why)) => Err(OpenWhy::Refused(why)),
            Err(_) => Ok(()),
        }
    }

    async fn check(&self, zones: &[String]) -> CheckLines {
        let mut lines = Vec::new();
        if let Err(e) = self.credentials().await {
            lines.push((false, format!("credentials: {e}")));
            return lines;
        }
        lines.push((true, "credentials: found".to_string()));
        let region = &self.target.region;
        match self.zones().await {
            Ok(have) => {
                lines.push((
                    true,
                    format!("region {region} answers: {} zone(s)", have.len()),
                ));
                for z in zones {
                    if z == ANY_ZONE {
                        lines.push(match self.by_price(&have) {
                            (order, _) if order.is_empty() => (
                                false,
                                format!("zones = [\"*\"]: no zone of {region} answers"),
                            ),
                            (_, said) => (true, said),
                        });
                        continue;
                    }
                    lines.push(match have.iter().find(|(n, _, _)| n == z) {
                        Some((_, state, _)) => (true, format!("zone {z}: {state}")),
                        None => (false, format!("zone {z}: not a zone of {region}")),
                    });
                }
            }
            Err(r) => {
                lines.push((false, format!("region {region}: {}", r.why())));
                return lines;
            }
        }
        lines.push(match self.image().await {
            Ok(i) => (true, format!("image: {i}")),
            Err(r) => (false, format!("image: {}", r.why())),
        });
        lines.extend(self.security_group_lines().await);
        lines.push(crate::backend::cloud::instances_line(
            self.list().await,
            "running",
        ));
        lines.push(self.quota_line(self.target.max_nodes).await);
        lines
    }

    async fn prepare(&mut self) -> Result<(), Refusal> {
        if self.image.is_none() {
            self.image = Some(self.image().await?);
        }
        Ok(())
    }

    async fn places(
        &self,
        configured: &[String],
    ) -> Result<(Vec<String>, Option<String>), Refusal> {
        if configured != [ANY_ZONE] {
            return Ok((configured.to_vec(), None));
        }
        let have = self.zones().await?;
        let (order, said) = self.by_price(&have);
        if order.is_empty() {
            return Err(Refusal::Pool(format!(
                "zones = [\"*\"]: no zone of {} is available",
                self.target.region
            )));
        }
        Ok((order, Some(said)))
    }

    async fn launch(&self, node: &str, zone: &str, token: &str) -> Result<Instance, Refusal> {
        let image = self.image.clone().unwrap_or_default();
        self.run_instance(node, zone, &image, token).await
    }

    /// This fleet's instances (of this pool), any state but terminated.
    async fn list(&self) -> Result<Vec<Instance>, Refusal> {
        self.describe(
            vec![
                Filter::builder()
                    .name(format!("tag:{TAG_FLEET}"))
                    .values(&self.target.fleet)
                    .build(),
                Filter::builder()
                    .name(format!("tag:{TAG_POOL}"))
                    .values(&self.target.pool)
                    .build(),
                Filter::builder()
                    .name("instance-state-name")
                    .set_values(Some(
                        ["pending", "running", "stopping", "stopped", "shutting-down"]
                            .map(String::from)
                            .to_vec(),
                    ))
                    .build(),
            ],
            Vec::new(),
        )
        .await
    }

    /// The instances `ids`, as they are now (terminated ones too, while EC2 still lists them).
    async fn states(&self, ids: Vec<String>) -> Result<Vec<Instance>, Refusal> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut found = self.describe(Vec::new(), ids.clone()).await?;
        // EC2 forgets a terminated instance after a while: one it no longer has is ended.
        for id in ids {
            if !found.iter().any(|i| i.id == id) {
                found.push(Instance::gone(&id, None, "no longer listed"));
            }
        }
        Ok(found)
    }

    /// Terminates `ids` (one call for all).
    async fn terminate(&self, ids: Vec<String>) -> Result<(), Refusal> {
        if ids.is_empty() {
            return Ok(());
        }
        self.count();
        self.client
            .terminate_instances()
            .set_instance_ids(Some(ids))
            .send()
            .await
            .map(|_| ())
            .map_err(|e| refusal(&e))
    }
}

/// The Service Quotas code and name that cap `instance_type` (vCPUs of its family, on-demand or
/// spot), for the families GPU pools use and the standard ones.
pub fn quota_of(instance_type: &str, spot: bool) -> Option<(&'static str, &'static str)> {
    let family = instance_type.split('.').next()?;
    let q = match (family.chars().next()?, spot) {
        ('p', false) => ("L-417A185B", "Running On-Demand P instances"),
        ('p', true) => ("L-7212CCBC", "All P Spot Instance Requests"),
        ('g', false) => ("L-DB2E81BA", "Running On-Demand G and VT instances"),
        ('g', true) => ("L-3819A6DF", "All G and VT Spot Instance Requests"),
        _ if family.starts_with("vt") => {
            if spot {
                ("L-3819A6DF", "All G and VT Spot Instance Requests")
            } else {
                ("L-DB2E81BA", "Running On-Demand G and VT instances")
            }
        }
        ('a' | 'c' | 'd' | 'h' | 'i' | 'm' | 'r' | 't' | 'z', false) => {
            ("L-1216C47A", "Running On-Demand Standard instances")
        }
        ('a' | 'c' | 'd' | 'h' | 'i' | 'm' | 'r' | 't' | 'z', true) => {
            ("L-34B43A08", "All Standard Spot Instance Requests")
        }
        _ => return None,
    };
    Some(q)
}

fn quota_error<E>(e: &aws_sdk_servicequotas::error::SdkError<E>) -> String
where
    E: aws_sdk_servicequotas::error::ProvideErrorMetadata + std::error::Error + 'static,
{
    match e {
        aws_sdk_servicequotas::error::SdkError::ServiceError(s) => format!(
            "{}: {}",
            s.err().code().unwrap_or("Unknown"),
            crate::untrusted::bounded(s.err().message().unwrap_or(""), 200)
        ),
        other => chain(other),
    }
}

/// `a, b, c`, or `none`.
fn names_or_none<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = names.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

fn instance(i: &aws_sdk_ec2::types::Instance) -> Instance {
    let tag = |k: &str| {
        i.tags()
            .iter()
            .find(|t| t.key() == Some(k))
            .and_then(|t| t.value())
            .map(str::to_string)
    };
    let state = i
        .state()
        .and_then(|s| s.name())
        .map_or("unknown", InstanceStateName::as_str)
        .to_string();
    let phase = match state.as_str() {
        "pending" => Phase::Starting,
        "running" => Phase::Running,
        "stopping" | "stopped" => Phase::Stopped,
        _ => Phase::Ended,
    };
    Instance {
        id: i.instance_id().unwrap_or_default().to_string(),
        state,
        phase,
        node: tag(TAG_NODE),
        pool: tag(TAG_POOL),
        zone: i
            .placement()
            .and_then(|p| p.availability_zone())
            .map(str::to_string),
        instance_type: i.instance_type().map(|t| t.as_str().to_string()),
        spot: i.instance_lifecycle().is_some_and(|l| l.as_str() == "spot"),
        public_ip: i.public_ip_address().map(str::to_string),
        private_ip: i.private_ip_address().map(str::to_string),
        public_dns: i
            .public_dns_name()
            .filter(|d| !d.is_empty())
            .map(str::to_string),
        launched: i.launch_time().and_then(|t| {
            t.fmt(aws_sdk_ec2::primitives::DateTimeFormat::DateTime)
                .ok()
        }),
        reason: i
            .state_reason()
            .map(|r| format!("{}: {}", r.code().unwrap_or("?"), r.message().unwrap_or(""))),
    }
}
