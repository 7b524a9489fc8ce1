//! A pool of the fleet file: its shape, price and topology, and the backend that drives it
//! (`Backend`, and each backend's own settings), with what `gpu = "auto"` finds.

use crate::model::{CapacityType, MigGeometry};
use crate::spec::did_you_mean;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PoolConfig {
    /// Who sells the capacity (aws, lambda, onprem, …); for the drivers' own names (local,
    /// ssh, slurm, kubernetes) also how gantry drives it.
    pub provider: String,
    /// How gantry drives the pool (`Backend`'s names); required where `provider` is not one
    /// of them, so that no pool is simulated without saying so.
    pub backend: Option<String>,
    // Every pool writes the fields up to `price_per_hour` but a Slurm pool built from its
    // cluster (`gpu = "auto"`), which reads them from slurmrestd: `parse` says which is
    // missing where (`REQUIRED`).
    #[serde(default)]
    pub region: String,
    #[serde(default)]
    pub zone: String,
    pub name: String,
    #[serde(default)]
    pub instance_type: String,
    /// GPU model (absent for CPU-only pools).
    pub gpu: Option<String>,
    #[serde(default)]
    pub gpus_per_node: u8,
    #[serde(default)]
    pub vram_gb: u32,
    #[serde(default)]
    pub cpus: u32,
    #[serde(default)]
    pub memory_gb: u32,
    #[serde(default = "reserved")]
    pub capacity: CapacityType,
    /// US dollars per node-hour.
    #[serde(default)]
    pub price_per_hour: f64,
    /// Nodes at start (an SSH pool: one per host, so it may be left out).
    #[serde(default = "nodes_unset")]
    pub nodes: u32,
    #[serde(default)]
    pub min_nodes: u32,
    /// Elastic ceiling (defaults to `nodes`: a fixed pool).
    pub max_nodes: Option<u32>,
    /// Nodes per InfiniBand leaf (absent: no leaf information).
    pub nodes_per_leaf: Option<u32>,
    /// Nodes sharing one NVLink domain (NVL72-style racks; default 1 = the node).
    pub nodes_per_nvlink: Option<u32>,
    /// Listed hosts by leaf or network block, by name: `leaves = { block-a = ["g1", "g2"] }`.
    #[serde(default)]
    pub leaves: std::collections::BTreeMap<String, Vec<String>>,
    /// Listed hosts by NVLink domain (`nvidia.com/gpu.clique`), by name.
    #[serde(default)]
    pub nvlink_domains: std::collections::BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub mig_gpus_per_node: u8,
    pub provisioning_delay: Option<String>,
    #[serde(default)]
    pub spot_interruptions_per_node_hour: f64,
    /// The pool's machines by name, one node each: an SSH pool's `ssh` destinations
    /// (`[user@]host[:port]`; `~/.ssh/config` applies), a Slurm pool's nodes (NodeName), a
    /// Kubernetes pool's nodes.
    #[serde(default)]
    pub hosts: Vec<String>,
    /// How long an SSH host (or a Slurm node, or a bought instance) may stay unreachable
    /// before it counts as lost and its jobs requeue from their checkpoints (default 2m).
    pub lost_after: Option<String>,
    /// `provider = "local"` / `"ssh"`: the container runtime on the hosts (`docker` or
    /// `podman`) that runs jobs asking for an image (`image_id: docker:…`). Without it such
    /// jobs are not placed on this pool.
    pub container_runtime: Option<String>,
    /// The tools this pool's nodes have for `file_mounts` (`aws`, `rclone`, `fuse`, …:
    /// `spec::mounts::TOOLS`): a job whose mounts need what they lack goes elsewhere, or is
    /// refused at submit when no pool has it. Not declared: not known to lack any.
    pub tools: Option<Vec<String>>,
    /// The pool's spending cap, US dollars an hour over its nodes paid for: a buy that would
    /// pass it waits, and says so (`max_nodes` caps the count).
    pub max_dollars_per_hour: Option<f64>,
    /// `[pools.ssh]`: how `ssh` reaches the hosts of an SSH, EC2 or Lambda pool
    /// (`config::ssh`).
    pub ssh: Option<super::ssh::SshSettings>,
    /// `[pools.slurm]`: which slurmrestd, which partition, who as (`config::slurm`).
    pub slurm: Option<super::slurm::SlurmSettings>,
    /// `[pools.kubernetes]`: which cluster, namespace and image, which nodes
    /// (`config::kube`).
    pub kubernetes: Option<super::kube::KubeSettings>,
    /// `backend = "ec2"`: what to launch, where, and how to reach it (`config::ec2`).
    pub ec2: Option<super::ec2::Ec2Settings>,
    /// `backend = "lambda"`: where to launch, which SSH key, how to reach it
    /// (`config::lambda`).
    pub lambda: Option<super::lambda::LambdaSettings>,
}

/// `nodes` left out of a pool (filled from `hosts` for SSH pools, an error for others).
pub(super) fn nodes_unset() -> u32 {
    u32::MAX
}

/// How gantry drives a pool's nodes — apart from who sells them (`provider`). A pool names its
/// backend (`backend = "ssh"`), or its provider is one (`provider = "ssh"`); a cloud's name as
/// the provider alone is refused: gantry never simulates a pool nobody said was simulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// Made-up nodes and runs on a virtual clock (the demo; trace replays).
    Simulated,
    /// This host: real processes, GPUs through NVML.
    Local,
    /// Hosts reached over SSH, where `gantry agent` runs the jobs.
    Ssh,
    /// A Slurm cluster through slurmrestd.
    Slurm,
    /// A Kubernetes cluster: pods gantry binds.
    Kubernetes,
    /// AWS EC2 instances gantry buys and gives back, each an SSH host running its agent.
    Ec2,
    /// Lambda Cloud instances gantry buys and gives back, each an SSH host running its agent.
    Lambda,
}

impl Backend {
    pub const ALL: [Backend; 7] = [
        Backend::Simulated,
        Backend::Local,
        Backend::Ssh,
        Backend::Slurm,
        Backend::Kubernetes,
        Backend::Ec2,
        Backend::Lambda,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Backend::Simulated => "simulated",
            Backend::Local => "local",
            Backend::Ssh => "ssh",
            Backend::Slurm => "slurm",
            Backend::Kubernetes => "kubernetes",
            Backend::Ec2 => "ec2",
            Backend::Lambda => "lambda",
        }
    }

    pub fn named(name: &str) -> Option<Backend> {
        Backend::ALL.into_iter().find(|b| b.name() == name)
    }
}

/// The backends a provider's name alone may pick (the drivers gantry has for hosts and
/// clusters it does not buy).
pub const REAL_PROVIDERS: [&str; 4] = ["local", "ssh", "slurm", "kubernetes"];

/// Clouds gantry knows the names of but cannot buy from yet: said so when a pool names one.
const CLOUDS: [&str; 8] = [
    "aws",
    "gcp",
    "azure",
    "lambda",
    "oci",
    "nebius",
    "runpod",
    "coreweave",
];

/// Why pool `p`'s `provider` and `backend` do not say how gantry drives it, if they do not.
pub(super) fn backend_problem(p: &PoolConfig) -> Option<String> {
    let name = &p.name;
    let allowed = Backend::ALL.map(Backend::name).join(", ");
    match p.backend.as_deref() {
        Some(b) if Backend::named(b).is_none() => Some(if CLOUDS.contains(&b) {
            format!(
                "pool `{name}`: backend = \"{b}\" is not built yet — gantry cannot buy or give back {b} capacity itself; backend = \"simulated\" simulates the pool (nothing is bought), and hosts you already have are driven with \"ssh\", \"slurm\" or \"kubernetes\" (allowed: {allowed})"
            )
        } else {
            let hint = did_you_mean(b, &Backend::ALL.map(Backend::name))
                .map_or(String::new(), |m| format!("; did you mean `{m}`?"));
            format!("pool `{name}`: unknown backend `{b}`{hint} (allowed: {allowed})")
        }),
        Some(b) if REAL_PROVIDERS.contains(&p.provider.as_str()) && b != p.provider => Some(format!(
            "pool `{name}`: provider = \"{0}\" is driven by the {0} backend, not \"{b}\"; leave `backend` out, or write who sells the capacity as `provider` (onprem, aws, …)",
            p.provider
        )),
        Some(_) => None,
        None if REAL_PROVIDERS.contains(&p.provider.as_str()) => None,
        None => {
            let typo = did_you_mean(&p.provider, &REAL_PROVIDERS)
                .map_or(String::new(), |m| format!("did you mean provider = \"{m}\"? Else "));
            Some(format!(
                "pool `{name}`: provider = \"{}\" says who sells its capacity, not how gantry drives it: {typo}write backend = \"simulated\" to simulate it (nothing is bought, its nodes and jobs are made up and shown as SIMULATED), or drive hosts you have with backend = \"ssh\", \"slurm\" or \"kubernetes\"{}",
                p.provider,
                if p.provider == "aws" {
                    " — or buy its instances with backend = \"ec2\" and a [pools.ec2] table (the image to launch)".to_string()
                } else if p.provider == "lambda" {
                    " — or buy its instances with backend = \"lambda\" and a [pools.lambda] table (the SSH key to install)".to_string()
                } else if CLOUDS.contains(&p.provider.as_str()) {
                    format!(" — gantry cannot buy {} capacity itself yet", p.provider)
                } else {
                    String::new()
                }
            ))
        }
    }
}

/// Pool `p`'s table for `backend` (`[pools.slurm]`), checked: present exactly when the pool is
/// driven by `backend`. `Ok(None)`: another backend's pool without the table. `needs` says
/// what the table must give, for the error.
pub(super) fn backend_table<'a, T>(
    p: &PoolConfig,
    name: &str,
    table: Option<&'a T>,
    backend: Backend,
    needs: &str,
) -> Result<Option<&'a T>, String> {
    let b = backend.name();
    let mine = p.backend() == backend;
    match table {
        None if mine => Err(format!(
            "{name}: a backend = \"{b}\" pool needs its [pools.{b}] table {needs}"
        )),
        None => Ok(None),
        Some(_) if !mine => Err(format!(
            "{name}: [pools.{b}] is for backend = \"{b}\" pools (this one is driven by the {} backend)",
            p.backend().name()
        )),
        Some(t) => Ok(Some(t)),
    }
}

/// `gpu = "auto"` on a `provider = "local"` pool: model, count, VRAM and MIG mode come from
/// NVML when the daemon starts.
pub const AUTO_GPU: &str = "auto";

/// The GPUs NVML found on a host of a `gpu = "auto"` SSH pool: what the pool is built with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FoundGpus {
    pub model: String,
    pub count: u8,
    pub vram_gb: u32,
    /// The host that said (its fleet node's name).
    pub host: String,
}

impl FoundGpus {
    /// `count` GPUs on `host` counted as the model of the first (named `name` by NVML, with
    /// `memory_mib`): a host mixing models is one pool of the first's.
    pub fn new(host: &str, name: &str, memory_mib: u64, count: usize) -> FoundGpus {
        FoundGpus {
            host: host.to_string(),
            model: crate::model::names::from_nvml(name),
            count: count.min(16) as u8,
            vram_gb: (memory_mib as f64 / 1024.0).round() as u32,
        }
    }

    /// The same GPUs, whoever said.
    pub fn same(&self, other: &FoundGpus) -> bool {
        (&self.model, self.count, self.vram_gb) == (&other.model, other.count, other.vram_gb)
    }
}

impl PoolConfig {
    /// Seconds from buying a node to its being up (`provisioning_delay`, default 5 minutes):
    /// what the simulated clouds take, and what a real cloud's provisioner waits before it
    /// counts a node as slow.
    pub fn provisioning_delay_s(&self) -> f64 {
        self.provisioning_delay
            .as_deref()
            .and_then(crate::spec::parse_duration)
            .unwrap_or(300.0)
    }

    /// How gantry drives this pool: its `backend`, or the backend its provider names. A file
    /// whose pool says neither is refused when parsed; a pool made in code (a trace replay's)
    /// with only a cloud's name is simulated.
    pub fn backend(&self) -> Backend {
        self.backend
            .as_deref()
            .or(Some(self.provider.as_str()))
            .and_then(Backend::named)
            .unwrap_or(Backend::Simulated)
    }

    /// Whether the pool is this host (`provider = "local"`): real processes, GPUs through
    /// NVML, nothing simulated.
    pub fn is_local(&self) -> bool {
        self.backend() == Backend::Local
    }

    /// Hosts reached over SSH, where `gantry agent` runs the jobs.
    pub fn is_ssh(&self) -> bool {
        self.backend() == Backend::Ssh
    }

    /// A Slurm cluster's nodes, reached through slurmrestd; gantry's jobs run as Slurm jobs.
    pub fn is_slurm(&self) -> bool {
        self.backend() == Backend::Slurm
    }

    /// A Kubernetes cluster's nodes; gantry's jobs run as pods it binds to them.
    pub fn is_kube(&self) -> bool {
        self.backend() == Backend::Kubernetes
    }

    /// AWS EC2 instances gantry buys (`config::ec2`), reached over SSH.
    pub fn is_ec2(&self) -> bool {
        self.backend() == Backend::Ec2
    }

    /// Lambda Cloud instances gantry buys (`config::lambda`), reached over SSH.
    pub fn is_lambda(&self) -> bool {
        self.backend() == Backend::Lambda
    }

    /// Instances gantry buys from a cloud and reaches over SSH (EC2, Lambda).
    pub fn buys_machines(&self) -> bool {
        self.is_ec2() || self.is_lambda()
    }

    /// Pools whose `hosts` are a cluster's node names (not ssh destinations).
    pub fn lists_cluster_nodes(&self) -> bool {
        self.is_slurm() || self.is_kube()
    }

    /// `gpu = "auto"` on a Kubernetes or Slurm pool: a stanza the daemon builds pools from,
    /// out of the cluster's nodes (`backend::discover`), and builds again as they change.
    pub fn built_from_cluster(&self) -> bool {
        self.lists_cluster_nodes() && self.is_auto()
    }

    /// `gpu = "auto"`: the GPUs are what NVML finds (this host's, or an SSH pool's hosts').
    pub fn is_auto(&self) -> bool {
        self.gpu.as_deref() == Some(AUTO_GPU)
    }

    /// An auto pool built with the GPUs found (CPU-only until some are).
    pub fn resolve_auto(&mut self, found: Option<&FoundGpus>) {
        match found {
            Some(f) => {
                self.gpu = Some(f.model.clone());
                self.gpus_per_node = f.count;
                self.vram_gb = f.vram_gb;
            }
            None => {
                self.gpu = None;
                self.gpus_per_node = 0;
            }
        }
    }

    /// A pool of the simulated backend.
    pub fn is_simulated(&self) -> bool {
        self.backend() == Backend::Simulated
    }

    /// How long an SSH host may stay unreachable before it is lost, seconds.
    pub fn lost_after_s(&self) -> f64 {
        self.lost_after
            .as_deref()
            .and_then(crate::spec::parse_duration)
            .unwrap_or(120.0)
    }

    /// How long a machine just bought may take to answer before it counts as lost.
    pub fn first_contact_s(&self) -> f64 {
        match (&self.ec2, &self.lambda) {
            (Some(e), _) => e.reachable_within_s(),
            (_, Some(l)) => l.reachable_within_s(),
            _ => 0.0,
        }
    }

    /// The name of node `i` of this pool: an SSH pool's host entry, else a made-up one.
    pub fn node_name(&self, i: u32) -> String {
        match self.hosts.get(i as usize) {
            Some(h) if self.is_ssh() => h.rsplit('@').next().unwrap_or(h).to_string(),
            Some(h) if self.lists_cluster_nodes() => h.clone(),
            _ => format!("{}-{}-{i:03}", self.provider, self.name),
        }
    }
}

/// MIG geometry by GPU model: the models whose MIG profiles gantry knows.
pub fn mig_geometry(model: &str) -> Option<MigGeometry> {
    match model.to_ascii_uppercase().as_str() {
        "H100" | "A100-80GB" => Some(MigGeometry { slice_gb: 10 }),
        "A100" => Some(MigGeometry { slice_gb: 5 }),
        "H200" => Some(MigGeometry { slice_gb: 18 }),
        _ => None,
    }
}

fn reserved() -> CapacityType {
    CapacityType::Reserved
}
