//! The seeded demo workload (`gantry daemon --demo`): arrivals every few simulated minutes.

use crate::scheduler::rng::Rng;
use crate::spec::demo::Workload;

/// The seeded demo workload (`gantry daemon --demo`): arrivals every few simulated minutes.
pub(super) struct Demo {
    workload: Workload,
    rng: Rng,
}

impl Demo {
    pub(super) fn new(seed: u64) -> Demo {
        Demo {
            workload: Workload::default(),
            rng: Rng::new(seed),
        }
    }

    /// Whether a job arrives in this step (in about one step of three).
    pub(super) fn arrives(&mut self) -> bool {
        self.rng.below(3) == 0
    }

    /// The next job: its name, team, class and spec.
    pub(super) fn next(&mut self) -> (String, &'static str, &'static str, String) {
        self.workload.next(&mut self.rng)
    }
}
