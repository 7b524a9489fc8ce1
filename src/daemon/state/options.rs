//! How a state is opened (`StateOptions`), and where the daemon's own warnings go.

use super::Retiring;
use std::collections::BTreeMap;

/// How the state is opened.
#[derive(Clone, Debug)]
pub struct StateOptions {
    pub seed: u64,
    /// Feed the seeded demo workload (arrivals every few simulated minutes).
    pub demo_workload: bool,
    /// Simulated node failures per node-hour (Llama 3's 54-day run: about 0.0002).
    pub failures_per_node_hour: f64,
    /// Where this host's jobs' logs go (default: `logs/` beside the journal).
    pub log_dir: Option<std::path::PathBuf>,
    /// How this host's GPUs are sampled (`provider = "local"` pools).
    pub sampling: crate::backend::agent::Sampling,
    /// Where the daemon's own warnings go besides the event log.
    pub messages: Messages,
    /// What NVML found on the hosts of `gpu = "auto"` SSH pools, by pool name (those pools are
    /// CPU-only until a host says; the state is then reopened with this filled in).
    pub discovered: BTreeMap<String, crate::config::fleet::FoundGpus>,
    /// What each `gpu = "auto"` Kubernetes pool was built into when the state last opened
    /// (kept if its cluster cannot be read at the next).
    pub cluster_built: crate::backend::discover::Built,
    /// `cluster_built` was listed just now (by a reload): taken without listing again.
    pub cluster_built_fresh: bool,
    /// The wall clock at opening, Unix seconds: `None` reads the system's (tests pin it).
    pub wall_clock: Option<f64>,
    /// What runners call when a run ends (the actor steps at once); kept across reopens.
    pub wake: crate::backend::Wake,
    /// A what-if run's model of its jobs' work, for the simulated fleet (`gantry sim`).
    pub work: Option<crate::backend::sim::WorkBook>,
    /// No client reads this state (a what-if run): a cycle decides and acts as ever, but
    /// builds no snapshot and samples no GPU history — what only views read.
    pub headless: bool,
    /// The daemon's own listening ports (API, metrics): never a service's endpoint.
    pub reserved_ports: Vec<u16>,
    /// Provisioners of pools that left the fleet file, ending what they bought: kept (across
    /// reopens) so that what they say still reaches the event log.
    pub retiring: Retiring,
}

impl Default for StateOptions {
    fn default() -> Self {
        StateOptions {
            seed: 1,
            demo_workload: false,
            failures_per_node_hour: 0.0002,
            log_dir: None,
            sampling: crate::backend::agent::Sampling::Nvml(std::time::Duration::from_secs(1)),
            messages: Messages::Stderr,
            discovered: BTreeMap::new(),
            cluster_built: Default::default(),
            cluster_built_fresh: false,
            wall_clock: None,
            wake: crate::backend::Wake::default(),
            work: None,
            headless: false,
            reserved_ports: Vec::new(),
            retiring: Retiring::default(),
        }
    }
}

/// Where the daemon's warnings are written, besides the event log (which always has them).
/// `gantry daemon` writes to stderr, its log; the console's embedded daemon to a file, since
/// the terminal is the console's screen and a stray line would wreck its layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Messages {
    Stderr,
    File(std::path::PathBuf),
}

impl Messages {
    pub(in crate::daemon) fn write(&self, line: &str) {
        match self {
            Messages::Stderr => eprintln!("gantry daemon: {line}"),
            Messages::File(path) => {
                use std::io::Write;
                if let Ok(mut f) = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                {
                    let _ = writeln!(f, "gantry daemon: {line}");
                }
            }
        }
    }
}
