//! The simulated backend: a model of a cloud fleet for the demo, tests and what-if runs. It
//! implements the interfaces real backends do — `Runner` for the jobs placed on its nodes
//! (`SimPool`), `Provisioner` for the nodes its clouds sell and take back (`SimCloud`) — so
//! the daemon drives it exactly as it drives this host or SSH hosts, and everything it makes
//! up (durations, exit codes, utilization, interruptions, failures) is labelled simulated
//! where it is shown.

pub mod cloud;
pub mod runner;

pub use cloud::SimCloud;
pub use runner::SimPool;
