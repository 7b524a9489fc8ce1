//! Why a pool's backend could not open, typed: what kind of failure it is (the pool's
//! settings, the provider's credentials, a place the provider does not have, a provider that
//! did not answer, this host) and where (the pool, its backend, its region). The daemon refuses
//! to start with it, said as one line that names the pool and what to do; callers and tests
//! match on the kind instead of reading prose.

use crate::config::fleet::{Backend, PoolConfig};

/// A pool's backend that could not open.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {why}")]
pub struct OpenError {
    pub at: PoolAt,
    pub why: OpenWhy,
}

impl OpenError {
    /// Pool `p`'s backend (a cloud's if `cloud`) could not open, for this reason.
    pub fn at(p: &PoolConfig, cloud: bool, why: OpenWhy) -> OpenError {
        OpenError {
            at: PoolAt::of(p, cloud),
            why,
        }
    }
}

/// Which pool an error is about, as every backend error names it:
/// ``pool `a100` (backend ec2, region us-east-1)``.
#[derive(Clone, Debug, PartialEq)]
pub struct PoolAt {
    pub pool: String,
    pub backend: Backend,
    /// Where the provider sells it, for the clouds (a region is what their errors are about).
    pub region: Option<String>,
}

impl PoolAt {
    /// Pool `p`, with its region if it is a `cloud`'s.
    pub fn of(p: &PoolConfig, cloud: bool) -> PoolAt {
        PoolAt {
            pool: p.name.clone(),
            backend: p.backend(),
            region: cloud.then(|| p.region.clone()),
        }
    }
}

impl std::fmt::Display for PoolAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "pool `{}` (backend {}", self.pool, self.backend.name())?;
        if let Some(r) = &self.region {
            write!(f, ", region {r}")?;
        }
        f.write_str(")")
    }
}

/// What kind of failure stopped a backend from opening; each says what to do.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum OpenWhy {
    /// The pool's settings cannot work as written (a host that is no SSH destination, names
    /// past a provider's limit): fix the fleet file.
    #[error("{0}")]
    Settings(String),
    /// The provider's credentials cannot be found or are refused: set them.
    #[error("{0}")]
    Credentials(String),
    /// A place the pool names (a zone) that the provider does not have.
    #[error("{0}")]
    Place(String),
    /// The provider answered and refused: a permission the credentials lack, an instance type
    /// it does not offer.
    #[error("{0}")]
    Refused(String),
    /// The provider did not answer in time: check the network, or start again later.
    #[error("{0}")]
    Unanswered(String),
    /// This host could not start what the backend needs (a thread, a runtime, a directory,
    /// the agent binary to install).
    #[error("{0}")]
    Host(String),
}

impl OpenWhy {
    /// Its kind as one word (`credentials`), for logs and `-o json`.
    pub fn kind(&self) -> &'static str {
        match self {
            OpenWhy::Settings(_) => "settings",
            OpenWhy::Credentials(_) => "credentials",
            OpenWhy::Place(_) => "place",
            OpenWhy::Refused(_) => "refused",
            OpenWhy::Unanswered(_) => "unanswered",
            OpenWhy::Host(_) => "host",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cloud_pool_is_named_with_its_region_and_a_host_pool_without() {
        let fleet: crate::config::fleet::FleetConfig = toml::from_str(
            r#"
[[pools]]
name = "gpu"
backend = "ec2"
provider = "aws"
region = "us-east-1"
instance_type = "p4d.24xlarge"
gpu = "A100"
gpus_per_node = 8
[pools.ec2]

[[pools]]
name = "lab"
provider = "ssh"
hosts = ["a"]
gpu = "A100"
gpus_per_node = 1
"#,
        )
        .unwrap();
        let e = OpenError::at(
            &fleet.pools[0],
            true,
            OpenWhy::Credentials("no AWS credentials".into()),
        );
        assert_eq!(
            e.to_string(),
            "pool `gpu` (backend ec2, region us-east-1): no AWS credentials"
        );
        assert_eq!(e.why.kind(), "credentials");
        let e = OpenError::at(&fleet.pools[1], false, OpenWhy::Host("no runtime".into()));
        assert_eq!(e.to_string(), "pool `lab` (backend ssh): no runtime");
    }

    #[test]
    fn a_runner_that_cannot_open_says_its_pool_and_kind() {
        let fleet: crate::config::fleet::FleetConfig = toml::from_str(
            r#"
[[pools]]
name = "here"
provider = "local"
gpu = "A100"
gpus_per_node = 1
"#,
        )
        .unwrap();
        // Its runs directory under a plain file: this host cannot keep its runs.
        let dir = gantry_testkit::scratch::scratch("open-err");
        let file = dir.join("not-a-dir");
        std::fs::write(&file, "").unwrap();
        let opening = crate::backend::Opening {
            local: crate::backend::agent::AgentDirs::under(&file),
            sampling: crate::backend::agent::Sampling::Off,
            seed: 1,
            failures_per_node_hour: 0.0,
            retention: Default::default(),
            wake: Default::default(),
            work: None,
        };
        let Err(e) = crate::backend::runner_for(&fleet.pools[0], 0, vec!["here".into()], &opening)
        else {
            panic!("a runs directory under a file opened");
        };
        assert!(matches!(e.why, OpenWhy::Host(_)), "{e:?}");
        assert_eq!(e.at.pool, "here");
        assert!(
            e.to_string()
                .starts_with("pool `here` (backend local): cannot keep this host's runs in"),
            "{e}"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
