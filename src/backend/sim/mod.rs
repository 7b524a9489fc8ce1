//! The simulated backend: a model of a cloud fleet for the demo, tests and what-if runs. It
//! implements the interfaces real backends do — `Runner` for the jobs placed on its nodes
//! (`SimPool`), `Provisioner` for the nodes its clouds sell and take back (`SimCloud`) — so
//! the daemon drives it exactly as it drives this host or SSH hosts, and everything it makes
//! up (durations, exit codes, utilization, interruptions, failures) is labelled simulated
//! where it is shown.

pub mod cloud;
pub mod runner;
pub mod work;

pub use cloud::SimCloud;
pub use runner::SimPool;
pub use work::WorkBook;

/// The simulated fleet: made-up runs on every pool, and nodes bought and given back on a
/// virtual clock. One stream of draws per pool, so adding a pool leaves the others' as they
/// were.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::registration::Registration {
        backend: crate::config::fleet::Backend::Simulated,
        runner: |_, index, nodes, opening| {
            let seed = opening.seed ^ (index as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            Ok(Box::new(
                SimPool::new(nodes, seed).with_book(opening.work.clone()),
            ))
        },
        provisioner: Some(|p, index, nodes, opening, now| {
            let seed = opening.seed ^ (index as u64 + 1).wrapping_mul(0xD1B5_4A32_D192_ED03);
            Ok(Box::new(SimCloud::new(
                p,
                nodes.len(),
                opening.failures_per_node_hour,
                seed,
                now,
            )))
        }),
        here: None,
        hosts_are: None,
        cloud: None,
        gpus_from_agents: false,
    };
