//! Every backend gantry drives, and how each builds its pools' runner and provisioner: the one
//! place that asks which backend a pool is. Above the backends: each declares its
//! `Registration` (`registration`, below them) and none imports this list. A pool names its backend in the fleet file
//! (`backend = "…"`, or a provider that is a backend's name); `of` answers with what that
//! backend registered. `of` matches every `Backend` there is, so a backend added to the
//! vocabulary without a registration here does not compile.

pub use super::registration::{CloudRegistration, MakeProvisioner, MakeRunner, Registration};
use crate::config::fleet::{Backend, PoolConfig};

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

/// The cloud pool `p` buys its nodes from, if it does.
pub fn cloud_of(p: &PoolConfig) -> Option<&'static CloudRegistration> {
    of_pool(p).cloud
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
