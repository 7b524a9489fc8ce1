//! The fleet file's Lambda Cloud pools (`backend = "lambda"`): instances gantry launches
//! through Lambda's Cloud API and terminates, each joining the pool as an SSH host running
//! `gantry agent`. The pool's table (`[pools.lambda]`) says where to try (regions, in order),
//! which SSH key Lambda installs, and how the daemon reaches an instance; the rest (GPU model
//! and count, `instance_type` — Lambda's name, like `gpu_8x_h100_sxm5` — price, `max_nodes`)
//! is as for any pool. Lambda sells on-demand only.

use super::fleet::PoolConfig;
use super::problem::Problem;
use serde::{Deserialize, Serialize};

/// `[pools.lambda]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LambdaSettings {
    /// The regions to try, in order (default: the pool's `region`). Those Lambda lists
    /// without capacity for the type now are passed over; a launch refused for capacity
    /// passes to the next.
    #[serde(default)]
    pub regions: Vec<String>,
    /// The SSH key, by its name in the Lambda account, installed on every instance (its
    /// private key is `identity_file` in the pool's `[pools.ssh]`).
    pub ssh_key_name: Option<String>,
    /// A public key file registered as `ssh_key_name` when the account has no key of that
    /// name.
    pub ssh_public_key: Option<String>,
    /// The user gantry logs in as (default `ubuntu`).
    pub ssh_user: Option<String>,
    /// What `ssh` is given to reach an instance: `{public_ip}` (default), `{private_ip}`,
    /// `{public_dns}` (Lambda's hostname), `{instance_id}` or `{node}`.
    pub ssh_host: Option<String>,
    /// A file holding the API key (default: `LAMBDA_API_KEY`, else `~/.lambda_cloud/lambda_keys`
    /// as SkyPilot keeps it, `api_key = …`).
    pub api_key_file: Option<String>,
    /// Another API root (a local test server); default `https://cloud.lambda.ai/api/v1`.
    pub endpoint_url: Option<String>,
    /// What every instance's name starts with (`gantry/<fleet>/<pool>/<node>`): the instances
    /// of this fleet, which gantry adopts, sweeps and gives back (default: this host's name).
    pub fleet: Option<String>,
    /// How long a bought instance may take to answer over SSH before it is terminated
    /// (default 15m: Lambda's instances take minutes to boot).
    pub reachable_within: Option<String>,
    /// The least time between two launches (default 10s: Lambda's limit on the launch call).
    pub launch_every: Option<String>,
}

/// Lambda's regions (its catalog, 2026).
pub const REGIONS: [&str; 17] = [
    "asia-northeast-1",
    "asia-northeast-2",
    "asia-south-1",
    "australia-east-1",
    "europe-central-1",
    "europe-south-1",
    "me-west-1",
    "us-east-1",
    "us-east-2",
    "us-east-3",
    "us-midwest-1",
    "us-south-1",
    "us-south-2",
    "us-south-3",
    "us-west-1",
    "us-west-2",
    "us-west-3",
];

impl LambdaSettings {
    pub fn regions_or(&self, region: &str) -> Vec<String> {
        if self.regions.is_empty() {
            vec![region.to_string()]
        } else {
            self.regions.clone()
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
            .unwrap_or(900.0)
    }

    pub fn launch_every_s(&self) -> f64 {
        self.launch_every
            .as_deref()
            .and_then(crate::spec::parse_duration)
            .unwrap_or(10.0)
    }
}

/// A Lambda pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> super::problem::Checked {
    let Some(l) = super::cloud::table_for(
        p,
        name,
        p.lambda.as_ref(),
        super::fleet::Backend::Lambda,
        ("lambda", "Lambda Cloud"),
        "with the SSH key Lambda installs, e.g. ssh_key_name = \"gantry\"",
    )?
    else {
        return Ok(());
    };
    if l.ssh_key_name.as_deref().is_none_or(str::is_empty) {
        return Err(Problem::at("lambda.ssh_key_name", format!(
            "{name}: [pools.lambda] needs ssh_key_name: the SSH key (as named in your Lambda account) installed on each instance; with ssh_public_key = \"~/.ssh/id_ed25519.pub\" gantry registers it if the account has none of that name"
        )));
    }
    for r in l.regions_or(&p.region) {
        if !REGIONS.contains(&r.as_str()) && l.endpoint_url.is_none() {
            let hint = crate::spec::did_you_mean(&r, &REGIONS)
                .map_or(String::new(), |m| format!("; did you mean `{m}`?"));
            return Err(Problem::at(
                "lambda.regions",
                format!(
                    "{name}: `{r}` is not a Lambda Cloud region{hint} (regions: {})",
                    REGIONS.join(", ")
                ),
            ));
        }
    }
    if p.capacity != crate::model::CapacityType::OnDemand {
        return Err(Problem::at("capacity", format!(
            "{name}: Lambda Cloud sells on-demand instances only: capacity = \"on-demand\" (got \"{}\")",
            p.capacity
        )));
    }
    if p.is_auto() {
        return Err(Problem::at("gpu", format!(
            "{name}: a Lambda pool declares what it buys: gpu and gpus_per_node of its instance_type (not \"auto\")"
        )));
    }
    // Lambda's types say their GPU count: gpu_8x_h100_sxm5.
    let count = p
        .instance_type
        .strip_prefix("gpu_")
        .and_then(|t| t.split_once("x_"))
        .and_then(|(n, _)| n.parse::<u8>().ok());
    match count {
        None if !p.instance_type.starts_with("cpu_") => {
            return Err(Problem::at("instance_type", format!(
                "{name}: instance_type = \"{}\" is not a Lambda Cloud instance type (like gpu_1x_a10, gpu_8x_h100_sxm5)",
                p.instance_type
            )))
        }
        Some(n) if n != p.gpus_per_node => {
            return Err(Problem::at("gpus_per_node", format!(
                "{name}: instance_type = \"{}\" has {n} GPU(s) but gpus_per_node = {}",
                p.instance_type, p.gpus_per_node
            )))
        }
        _ => {}
    }
    super::ec2::check_ssh_host(l.ssh_host(), name, "lambda")
        .map_err(|m| Problem::at("lambda.ssh_host", m))?;
    for (field, at, value, least) in [
        (
            "reachable_within",
            "lambda.reachable_within",
            &l.reachable_within,
            10.0,
        ),
        ("launch_every", "lambda.launch_every", &l.launch_every, 0.0),
    ] {
        if let Some(d) = value {
            if crate::spec::parse_duration(d).is_none_or(|s| !(least..=86_400.0).contains(&s)) {
                return Err(Problem::at(
                    at,
                    format!(
                        "{name}: [pools.lambda] {field} `{d}` must be a duration up to 1d, e.g. 10m"
                    ),
                ));
            }
        }
    }
    if let Some(f) = &l.fleet {
        // The instance's name carries it (Lambda names are at most 64 characters).
        if f.is_empty() || f.contains('/') || f.len() > 24 {
            return Err(Problem::at(
                "lambda.fleet",
                format!("{name}: [pools.lambda] fleet must be 1 to 24 characters without `/`"),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::config::fleet::parse;

    fn pool(extra: &str) -> String {
        format!(
            "[[pools]]\nprovider = \"lambda\"\nbackend = \"lambda\"\nregion = \"us-east-1\"\nzone = \"us-east-1\"\nname = \"h100\"\ninstance_type = \"gpu_8x_h100_sxm5\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 208\nmemory_gb = 1800\ncapacity = \"on-demand\"\nprice_per_hour = 23.92\nnodes = 0\nmax_nodes = 2\n{extra}"
        )
    }

    #[test]
    fn a_lambda_pool_is_checked_at_its_line() {
        let ok = parse(
            "f.toml",
            &pool(
                "[pools.lambda]\nssh_key_name = \"k\"\nregions = [\"us-east-1\", \"us-west-1\"]\n",
            ),
        )
        .unwrap();
        assert!(ok.pools[0].is_lambda());
        let no_table = parse("f.toml", &pool("")).unwrap_err();
        assert!(
            no_table.message.contains("needs its [pools.lambda] table"),
            "{no_table}"
        );
        let no_key = parse(
            "f.toml",
            &pool("[pools.lambda]\nregions = [\"us-east-1\"]\n"),
        )
        .unwrap_err();
        assert!(no_key.message.contains("needs ssh_key_name"), "{no_key}");
        let typo = parse(
            "f.toml",
            &pool("[pools.lambda]\nssh_key_name = \"k\"\nregions = [\"us-est-1\"]\n"),
        )
        .unwrap_err();
        assert!(typo.message.contains("did you mean `us-east-1`"), "{typo}");
        let spot = parse(
            "f.toml",
            &pool("[pools.lambda]\nssh_key_name = \"k\"\n").replace("\"on-demand\"", "\"spot\""),
        )
        .unwrap_err();
        assert!(spot.message.contains("on-demand instances only"), "{spot}");
        let count = parse(
            "f.toml",
            &pool("[pools.lambda]\nssh_key_name = \"k\"\n")
                .replace("gpus_per_node = 8", "gpus_per_node = 4"),
        )
        .unwrap_err();
        assert!(
            count
                .message
                .contains("holds 8× H100 (Lambda Cloud's catalog), but the pool says 4× H100"),
            "{count}"
        );
        // A type newer than the catalog: its name says its count.
        let newer = parse(
            "f.toml",
            &pool("[pools.lambda]\nssh_key_name = \"k\"\n")
                .replace("gpus_per_node = 8", "gpus_per_node = 4")
                .replace("gpu_8x_h100_sxm5", "gpu_8x_h300_sxm7"),
        )
        .unwrap_err();
        assert!(
            newer.message.contains("has 8 GPU(s) but gpus_per_node = 4"),
            "{newer}"
        );
        let unknown = parse(
            "f.toml",
            &pool("[pools.lambda]\nssh_key_name = \"k\"\nzones = [\"a\"]\n"),
        )
        .unwrap_err();
        assert!(unknown.message.contains("zones"), "{unknown}");
        assert!(unknown.line > 0, "{unknown}");
    }
}
