//! gantry: a scheduler and terminal operations console for GPU fleets.
//!
//! * [`config`] — where files live (XDG) and the fleet file.
//! * [`daemon`] — the state owner: durable journal and job state machine (in progress).
//! * [`errors`] — reading an error's chain of causes.
//! * [`experiments`] — experiment trackers (MLflow) each job's run is reported to.
//! * [`model`] — the domain vocabulary every part imports.
//! * [`scheduler`] — the pure scheduler core (placement policies).
//! * [`spec`] — job specs (gantry YAML, a superset of SkyPilot task YAML).
//! * [`trace`] — public cluster traces and their replay protocols.
//! * [`backend`] — where jobs run: the local host (processes, NVML).
//! * [`bench`] — the benchmarks behind every performance figure.
//! * [`tls`] — TLS both ends share: the crypto provider, fingerprints, pinning.
//! * [`untrusted`] — text from outside (job output, hosts) escaped and bounded.
// The core (model, scheduler, specs) is its own crate, so that the compiler keeps it free of
// IO; re-exported so that `crate::model::…` reads the same everywhere.
pub use gantry_core::{api, model, scheduler, spec, stats};

pub mod backend;
pub mod bench;
pub mod client;
pub mod config;
pub mod console;
pub mod daemon;
pub mod errors;
pub mod exec_wire;
pub mod experiments;
pub mod heap;
pub mod random;
pub mod sim;
pub mod tls;
pub mod trace;
pub mod unix_user;
pub mod untrusted;
pub mod workdir;
