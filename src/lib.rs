//! gantry: a scheduler and terminal operations console for GPU fleets.
//!
//! * [`config`] — where files live (XDG) and the fleet file.
//! * [`daemon`] — the state owner: durable journal and job state machine (in progress).
//! * [`errors`] — reading an error's chain of causes.
//! * [`model`] — the domain vocabulary every part imports.
//! * [`scheduler`] — the pure scheduler core (placement policies).
//! * [`spec`] — job specs (gantry YAML, a superset of SkyPilot task YAML).
//! * [`trace`] — public cluster traces and their replay protocols.
//! * [`backend`] — where jobs run: the local host (processes, NVML).
//! * [`bench`] — the benchmarks behind every performance figure.
//! * [`tls`] — TLS both ends share: the crypto provider, fingerprints, pinning.
//! * [`untrusted`] — text from outside (job output, hosts) escaped and bounded.
//! * [`testkit`] — test doubles (a Kubernetes API server) for tests and benchmarks.
pub mod backend;
pub mod bench;
pub mod client;
pub mod config;
pub mod console;
pub mod daemon;
pub mod errors;
pub mod exec_wire;
pub mod model;
pub mod scheduler;
pub mod sim;
pub mod spec;
pub mod testkit;
pub mod tls;
pub mod trace;
pub mod untrusted;
pub mod workdir;
