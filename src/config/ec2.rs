//! The fleet file's EC2 pools (`backend = "ec2"`): instances gantry buys from AWS and gives
//! back, each joining the pool as an SSH host running `gantry agent`. The pool's own table
//! (`[pools.ec2]`) says which image, where to try (zones, in order), how the daemon reaches an
//! instance and how gantry's instances are tagged; the rest of the pool (GPU model and count,
//! `instance_type`, price, `capacity` on-demand or spot, `max_nodes`) is as for any pool.

use super::fleet::PoolConfig;
use super::problem::Problem;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `[pools.ec2]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ec2Settings {
    /// The AMI to launch (`ami-…`).
    pub image: Option<String>,
    /// Or an AMI name to look up (a `DescribeImages` name filter, `*` allowed): the newest
    /// match owned by `image_owner` (default `amazon`).
    pub image_name: Option<String>,
    pub image_owner: Option<String>,
    /// The zones to try, in order (default: the pool's `zone`). A zone without capacity
    /// passes the request to the next. `["*"]`: every zone of the region where the catalog
    /// offers the type, cheapest first (the spot price per zone for a spot pool).
    #[serde(default)]
    pub zones: Vec<String>,
    /// The subnet to launch into, per zone (default: the zone's default subnet).
    #[serde(default)]
    pub subnets: BTreeMap<String, String>,
    /// Security groups (ids) that admit the daemon's SSH connection.
    #[serde(default)]
    pub security_groups: Vec<String>,
    /// The EC2 key pair installed on the instance (its private key is `identity_file` in the
    /// pool's `[pools.ssh]`).
    pub key_name: Option<String>,
    /// The user gantry logs in as (default `ubuntu`).
    pub ssh_user: Option<String>,
    /// What `ssh` is given to reach an instance: `{public_ip}` (default), `{private_ip}`,
    /// `{public_dns}`, `{instance_id}` (an ssh_config `Host i-*` with an SSM proxy) or
    /// `{node}` (the node's name, for an ssh_config that names each node).
    pub ssh_host: Option<String>,
    /// The credentials profile (default: the usual chain — environment, `AWS_PROFILE`,
    /// `~/.aws`, SSO, instance role).
    pub profile: Option<String>,
    /// Another EC2 endpoint (a VPC endpoint, or a local test server).
    pub endpoint_url: Option<String>,
    /// What every instance gantry buys is tagged with (`gantry:fleet`): the instances of this
    /// fleet, which gantry adopts, sweeps and gives back (default: this host's name). Two
    /// daemons must not share it.
    pub fleet: Option<String>,
    /// How long a bought instance may take to answer over SSH before it is terminated
    /// (default 10m).
    pub reachable_within: Option<String>,
    /// The instance metadata service a spot instance's agent watches for the interruption
    /// notice (default `http://169.254.169.254`, EC2's on every instance).
    pub metadata_url: Option<String>,
}

/// `zones = ["*"]`: any zone, by price.
pub const ANY_ZONE: &str = "*";

/// What `ssh_host` may name.
pub const SSH_HOST_FIELDS: [&str; 5] = [
    "{public_ip}",
    "{private_ip}",
    "{public_dns}",
    "{instance_id}",
    "{node}",
];

impl Ec2Settings {
    pub fn zones_or(&self, zone: &str) -> Vec<String> {
        if self.zones.is_empty() {
            vec![zone.to_string()]
        } else {
            self.zones.clone()
        }
    }

    pub fn ssh_user(&self) -> &str {
        self.ssh_user.as_deref().unwrap_or("ubuntu")
    }

    pub fn ssh_host(&self) -> &str {
        self.ssh_host.as_deref().unwrap_or("{public_ip}")
    }

    pub fn reachable_within_s(&self) -> f64 {
        self.reachable_within
            .as_deref()
            .and_then(crate::spec::parse_duration)
            .unwrap_or(600.0)
    }
}

/// An EC2 pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> super::problem::Checked {
    let Some(e) = super::cloud::table_for(
        p,
        name,
        p.ec2.as_ref(),
        super::fleet::Backend::Ec2,
        ("aws", "AWS"),
        "with the image to launch, e.g. image = \"ami-0123456789abcdef0\" or image_name = \"Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04) *\"",
    )?
    else {
        return Ok(());
    };
    match (&e.image, &e.image_name) {
        (None, None) => {
            return Err(Problem::at("ec2.image", format!(
                "{name}: [pools.ec2] needs `image` (an AMI id, ami-…) or `image_name` (looked up, newest first)"
            )))
        }
        (Some(_), Some(_)) => {
            return Err(Problem::at("ec2.image_name", format!(
                "{name}: [pools.ec2] has both `image` and `image_name`: give one"
            )))
        }
        (Some(i), None) if !i.starts_with("ami-") => {
            return Err(Problem::at("ec2.image", format!(
                "{name}: [pools.ec2] image = \"{i}\" is not an AMI id (ami-…); to look one up by name write image_name = \"{i}\""
            )))
        }
        _ => {}
    }
    if !looks_like_region(&p.region) {
        return Err(Problem::at("region", format!(
            "{name}: region = \"{}\" is not an AWS region name (like us-east-1, eu-west-2, ap-northeast-1)",
            p.region
        )));
    }
    // A region gantry does not know is a typo more often than a new region (whose endpoint
    // would not answer); with its own endpoint_url a pool may name any.
    if !REGIONS.contains(&p.region.as_str()) && e.endpoint_url.is_none() {
        let hint = crate::spec::did_you_mean(&p.region, &REGIONS)
            .map_or(String::new(), |m| format!("; did you mean `{m}`?"));
        return Err(Problem::at("region", format!(
            "{name}: region = \"{}\" is not an AWS region{hint} (a region newer than this gantry: give its endpoint_url in [pools.ec2])",
            p.region
        )));
    }
    let any_zone = e.zones.iter().any(|z| z == ANY_ZONE);
    if any_zone && e.zones.len() > 1 {
        return Err(Problem::at("ec2.zones", format!(
            "{name}: [pools.ec2] zones = [\"*\"] stands alone (every zone of the region offering the type, cheapest first); or list zones to try in order"
        )));
    }
    for z in e.zones_or(&p.zone).iter().filter(|_| !any_zone) {
        if !z.starts_with(&p.region) || z.len() <= p.region.len() {
            return Err(Problem::at(
                "ec2.zones",
                format!(
                    "{name}: zone `{z}` is not a zone of region {} (like {}a)",
                    p.region, p.region
                ),
            ));
        }
    }
    for z in e.subnets.keys().filter(|_| !any_zone) {
        if !e.zones_or(&p.zone).contains(z) {
            return Err(Problem::at("ec2.subnets", format!(
                "{name}: [pools.ec2] subnets names zone `{z}`, which the pool does not try (zones: {})",
                e.zones_or(&p.zone).join(", ")
            )));
        }
    }
    check_ssh_host(e.ssh_host(), name, "ec2").map_err(|m| Problem::at("ec2.ssh_host", m))?;
    if p.capacity == crate::model::CapacityType::Reserved {
        return Err(Problem::at("capacity", format!(
            "{name}: an EC2 pool buys its nodes: capacity = \"on-demand\" or \"spot\" (not reserved)"
        )));
    }
    if p.is_auto() {
        return Err(Problem::at("gpu", format!(
            "{name}: an EC2 pool declares what it buys: gpu and gpus_per_node of its instance_type (not \"auto\")"
        )));
    }
    if let Some(d) = &e.reachable_within {
        if crate::spec::parse_duration(d).is_none_or(|s| !(10.0..=86_400.0).contains(&s)) {
            return Err(Problem::at("ec2.reachable_within", format!(
                "{name}: [pools.ec2] reachable_within `{d}` must be a duration from 10s to 1d, e.g. 10m"
            )));
        }
    }
    if let Some(u) = &e.metadata_url {
        if !(u.starts_with("http://") || u.starts_with("https://")) {
            return Err(Problem::at("ec2.metadata_url", format!(
                "{name}: [pools.ec2] metadata_url = \"{u}\" must be an http:// URL (EC2's is http://169.254.169.254)"
            )));
        }
    }
    if let Some(f) = &e.fleet {
        if f.is_empty() || f.len() > 200 {
            return Err(Problem::at(
                "ec2.fleet",
                format!("{name}: [pools.ec2] fleet must be 1 to 200 characters"),
            ));
        }
    }
    Ok(())
}

/// A cloud pool's `ssh_host` template: only the fields gantry fills in.
pub fn check_ssh_host(host: &str, name: &str, table: &str) -> Result<(), String> {
    let mut rest = host.to_string();
    for f in SSH_HOST_FIELDS {
        rest = rest.replace(f, "");
    }
    if rest.contains('{') || rest.contains('}') || host.trim().is_empty() {
        return Err(format!(
            "{name}: [pools.{table}] ssh_host = \"{host}\": allowed fields are {}",
            SSH_HOST_FIELDS.join(", ")
        ));
    }
    Ok(())
}

/// AWS's public regions (as of 2026).
const REGIONS: [&str; 34] = [
    "us-east-1",
    "us-east-2",
    "us-west-1",
    "us-west-2",
    "ca-central-1",
    "ca-west-1",
    "mx-central-1",
    "sa-east-1",
    "eu-west-1",
    "eu-west-2",
    "eu-west-3",
    "eu-central-1",
    "eu-central-2",
    "eu-north-1",
    "eu-south-1",
    "eu-south-2",
    "il-central-1",
    "me-south-1",
    "me-central-1",
    "af-south-1",
    "ap-east-1",
    "ap-east-2",
    "ap-south-1",
    "ap-south-2",
    "ap-northeast-1",
    "ap-northeast-2",
    "ap-northeast-3",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-southeast-3",
    "ap-southeast-4",
    "ap-southeast-5",
    "ap-southeast-7",
    "us-gov-west-1",
];

/// AWS region names: `us-east-1`, `ap-northeast-3`, `us-gov-west-1`, `eusc-de-east-1`.
fn looks_like_region(r: &str) -> bool {
    let parts: Vec<&str> = r.split('-').collect();
    parts.len() >= 3
        && parts[0].len() >= 2
        && parts[0].chars().all(|c| c.is_ascii_lowercase())
        && parts[1..parts.len() - 1]
            .iter()
            .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_lowercase()))
        && parts[parts.len() - 1].parse::<u8>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::looks_like_region;

    fn pool(region: &str, zone: &str, ec2: &str) -> String {
        format!(
            "[[teams]]\nname = \"t\"\n\n[[pools]]\nname = \"p\"\nprovider = \"aws\"\nbackend = \"ec2\"\nregion = \"{region}\"\nzone = \"{zone}\"\ninstance_type = \"p4d.24xlarge\"\ngpu = \"A100\"\ngpus_per_node = 8\nvram_gb = 40\ncpus = 96\nmemory_gb = 1152\ncapacity = \"on-demand\"\nprice_per_hour = 21.96\nnodes = 0\nmax_nodes = 2\n\n[pools.ec2]\n{ec2}\n"
        )
    }

    /// Mistakes in an EC2 pool are refused at its line, with what to write instead.
    #[test]
    fn an_ec2_pools_mistakes_are_named_at_its_line() {
        let parse = |t: &str| crate::config::fleet::parse("f.toml", t);
        let ok = parse(&pool("us-east-1", "us-east-1a", "image = \"ami-0123\"")).unwrap();
        assert!(ok.pools[0].is_ec2());
        assert!(parse(&pool(
            "us-east-1",
            "us-east-1a",
            "image = \"ami-0123\"\nzones = [\"*\"]"
        ))
        .is_ok());
        // Each at the line that writes the field it is about (the pool's header is line 4,
        // its `[pools.ec2]` line 21), or the table where the field it needs is missing.
        for (text, want, line) in [
            (
                pool(
                    "us-east-1",
                    "us-east-1a",
                    "image = \"ami-0123\"\nzones = [\"*\", \"us-east-1b\"]",
                ),
                "zones = [\"*\"] stands alone",
                23,
            ),
            (
                pool("us-est-1", "us-est-1a", "image = \"ami-0123\""),
                "region = \"us-est-1\" is not an AWS region; did you mean `us-east-1`?",
                8,
            ),
            (
                pool("us-east-1", "us-east-1a", "image_owner = \"amazon\""),
                "needs `image` (an AMI id, ami-…) or `image_name`",
                21,
            ),
            (
                pool("us-east-1", "us-east-1a", "image = \"ubuntu-22.04\""),
                "is not an AMI id (ami-…); to look one up by name write image_name",
                22,
            ),
            (
                pool(
                    "us-east-1",
                    "us-east-1a",
                    "image = \"ami-0123\"\nzones = [\"eu-west-1a\"]",
                ),
                "zone `eu-west-1a` is not a zone of region us-east-1",
                23,
            ),
            (
                pool(
                    "us-east-1",
                    "us-east-1a",
                    "image = \"ami-0123\"\nssh_host = \"{ip}\"",
                ),
                "allowed fields are {public_ip}, {private_ip}",
                23,
            ),
            (
                pool(
                    "us-east-1",
                    "us-east-1a",
                    "image = \"ami-0123\"\nsecret_key = \"x\"",
                ),
                "unknown field `secret_key`",
                23,
            ),
        ] {
            let e = parse(&text).unwrap_err();
            assert!(e.message.contains(want), "{e}");
            assert_eq!(e.line, line, "{e}");
        }
        let reserved = pool("us-east-1", "us-east-1a", "image = \"ami-0123\"")
            .replace("on-demand", "reserved");
        let e = parse(&reserved).unwrap_err();
        assert!(e.message.contains("capacity = \"on-demand\" or \"spot\""));
        assert_eq!((e.line, e.col), (16, 1), "{e}");
    }

    #[test]
    fn region_names() {
        for r in [
            "us-east-1",
            "ap-northeast-3",
            "us-gov-west-1",
            "eusc-de-east-1",
        ] {
            assert!(looks_like_region(r), "{r}");
        }
        for r in [
            "us-east",
            "useast1",
            "us-east-1a",
            "US-EAST-1",
            "onprem",
            "",
        ] {
            assert!(!looks_like_region(r), "{r}");
        }
    }
}
