//! Every backend gantry drives, and how each builds its pools' runner and provisioner: the one
//! place that asks which backend a pool is. A pool names its backend in the fleet file
//! (`backend = "…"`, or a provider that is a backend's name); `of` answers with what that
//! backend registered. `of` matches every `Backend` there is, so a backend added to the
//! vocabulary without a registration here does not compile.

use super::error::OpenWhy;
use super::{Opening, Provisioner, Runner};
use crate::config::fleet::{Backend, PoolConfig};

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
    /// The cloud it buys from, as the start-up line says it (`EC2`).
    pub cloud: Option<&'static str>,
    /// Whether a `gpu = "auto"` pool learns its GPUs from what each host's agent reports as it
    /// connects (rather than when the fleet file is read).
    pub gpus_from_agents: bool,
}

/// What `backend` registered.
pub fn of(backend: Backend) -> &'static Registration {
    match backend {
        Backend::Simulated => &super::sim::REGISTRATION,
        Backend::Local => &super::local::REGISTRATION,
        Backend::Ssh => &super::ssh::REGISTRATION,
        Backend::Slurm => &super::slurm::REGISTRATION,
        Backend::Kubernetes => &super::kube::REGISTRATION,
        Backend::Ec2 => &super::ec2::REGISTRATION,
        Backend::Lambda => &super::lambda::REGISTRATION,
    }
}

/// What the backend of pool `p` registered.
pub fn of_pool(p: &PoolConfig) -> &'static Registration {
    of(p.backend())
}

/// Whether pool `p`'s GPUs are what its hosts' agents find (`gpu = "auto"` on a backend whose
/// GPUs come from agents): resolved at open and again when a host connects.
pub fn discovers_gpus(p: &PoolConfig) -> bool {
    of_pool(p).gpus_from_agents && p.is_auto()
}

/// Whether pool `p`'s jobs are processes started somewhere (every backend but the simulated
/// one, which models a job's work): a job there needs a command to start.
pub fn starts_processes(p: &PoolConfig) -> bool {
    !p.is_simulated()
}

/// Whether pool `p`'s nodes are a cloud's instances, bought and given back (its settings are
/// kept in the journal, so that what it bought is found again whatever the fleet file says).
pub fn from_a_cloud(p: &PoolConfig) -> bool {
    of_pool(p).cloud.is_some()
}

#[cfg(test)]
mod tests {
    #[test]
    fn each_backend_registers_itself_under_its_own_name() {
        for b in crate::config::fleet::Backend::ALL {
            assert_eq!(super::of(b).backend, b, "{}", b.name());
        }
    }
}
