//! What a backend registers: how it builds its pools' runner and provisioner, how the daemon's
//! start-up line says its pools, and — for a cloud — what `gantry cloud` asks of it. The type
//! only, below the backends, which each declare theirs; the list of them is `registry`, above.

use super::cloud::{CheckLines, Instance};
use super::error::OpenWhy;
use super::{Opening, Provisioner, Runner};
use crate::config::fleet::{Backend, PoolConfig};
use std::future::Future;
use std::pin::Pin;

/// Builds a pool's runner: the pool, its index in the fleet file, its nodes' names (host
/// order) and what the daemon hands every runner. The error is why, without the pool
/// (`runner_for` says which).
pub type MakeRunner =
    fn(&PoolConfig, usize, Vec<String>, &Opening) -> Result<Box<dyn Runner>, OpenWhy>;

/// Builds the provisioner of a pool whose nodes are bought and given back: the pool, its
/// index, its node slots and the daemon's clock at open.
pub type MakeProvisioner =
    fn(&PoolConfig, usize, &[String], &Opening, f64) -> Result<Box<dyn Provisioner>, OpenWhy>;

/// What a backend registers.
pub struct Registration {
    pub backend: Backend,
    pub runner: MakeRunner,
    /// For backends whose nodes are bought and given back (a cloud's, the simulated fleet's).
    pub provisioner: Option<MakeProvisioner>,
    /// What the daemon's start-up line says of a fleet with such pools (this host's).
    pub here: Option<&'static str>,
    /// What the daemon's start-up line calls the pool's listed `hosts` (`SSH host(s)`), for
    /// backends whose nodes are listed in the fleet file.
    pub hosts_are: Option<&'static str>,
    /// The cloud it buys from, for the backends that are one.
    pub cloud: Option<&'static CloudRegistration>,
    /// Whether a `gpu = "auto"` pool learns its GPUs from what each host's agent reports as it
    /// connects (rather than when the fleet file is read).
    pub gpus_from_agents: bool,
}

/// A future a cloud's call answers with, borrowing the pool it is about.
pub type Answer<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// The instances a cloud lists, or why it could not.
pub type Listed = Result<Vec<Instance>, String>;

/// What a cloud registers besides its pools' runner and provisioner: what `gantry cloud check`
/// and `gantry cloud ls` ask of it, without the daemon.
pub struct CloudRegistration {
    /// As the start-up line and `gantry cloud` say it (`EC2`).
    pub name: &'static str,
    /// Its catalog among those gantry carries (`config::catalog`).
    pub catalog: crate::config::catalog::Cloud,
    /// The places pool `p` tries, in order, and the fleet name that marks its instances.
    pub places_and_fleet: fn(&PoolConfig) -> (Vec<String>, String),
    /// What the cloud says of pool `p`'s credentials, places and quotas, a line each.
    pub check: for<'a> fn(&'a PoolConfig, &'a [String]) -> Answer<'a, CheckLines>,
    /// Every instance gantry owns in pool `p`, asked from the cloud.
    pub list: for<'a> fn(&'a PoolConfig) -> Answer<'a, Listed>,
}
