//! A job's life: pending → running → completed / failed, with hold, preemption and cancel.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobState {
    /// Where every job starts.
    #[default]
    Pending,
    Held,
    Running,
    /// Told to stop (signal sent, grace running); requeues from its checkpoint.
    Preempting,
    Completed,
    Failed,
    Cancelled,
}

impl JobState {
    pub const ALL: [JobState; 7] = [
        JobState::Pending,
        JobState::Held,
        JobState::Running,
        JobState::Preempting,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
    ];

    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Held => "held",
            JobState::Running => "running",
            JobState::Preempting => "preempting",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
        }
    }

    pub fn is_final(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled
        )
    }

    /// Whether `self → to` is a legal transition.
    pub fn can_become(self, to: JobState) -> bool {
        use JobState::*;
        matches!(
            (self, to),
            // A job that never started may still fail: its fleet file no longer resolves it.
            (Pending, Held | Running | Cancelled | Failed)
                | (Held, Pending | Cancelled | Failed)
                | (
                    Running,
                    Preempting | Completed | Failed | Cancelled | Pending
                )
                // A suspended job (an idle notebook reclaimed) is held once it has stopped.
                | (Preempting, Pending | Held | Completed | Failed | Cancelled)
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|j| j.name() == s)
            .ok_or_else(|| format!("unknown job state `{s}`"))
    }
}

#[cfg(test)]
mod tests {
    use super::JobState::*;
    use super::*;

    #[test]
    fn final_states_go_nowhere() {
        for from in [Completed, Failed, Cancelled] {
            assert!(
                JobState::ALL.iter().all(|&to| !from.can_become(to)),
                "{from}"
            );
        }
    }

    #[test]
    fn the_usual_paths_are_legal_and_shortcuts_are_not() {
        assert!(
            Pending.can_become(Running)
                && Running.can_become(Preempting)
                && Preempting.can_become(Pending)
        );
        assert!(Held.can_become(Pending) && !Held.can_become(Running));
        assert!(!Pending.can_become(Completed));
        for s in JobState::ALL {
            assert_eq!(s.name().parse::<JobState>().unwrap(), s);
        }
    }
}
