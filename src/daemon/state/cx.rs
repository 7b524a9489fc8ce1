//! What a component acts through when it changes something: the engine (and the journal
//! behind it, through the engine's named operations), the event log, the calendar and the
//! daemon's clock. A component's method takes a `Cx`, and any other component it needs as an
//! argument — never the whole `State`, whose own methods only order the components' work.

use super::event_log::EventLog;
use crate::daemon::calendar::Calendar;
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::journal::JobId;

pub(super) struct Cx<'a> {
    pub engine: &'a mut Engine,
    pub log: &'a mut EventLog,
    pub calendar: &'a Calendar,
    /// The daemon's clock, seconds.
    pub now: f64,
}

/// A `Cx` over `$state`'s fields, borrowing only them (so that a component of the same state
/// may be borrowed beside it).
macro_rules! cx {
    ($state:expr) => {
        $crate::daemon::state::cx::Cx {
            engine: &mut $state.engine,
            log: &mut $state.log,
            calendar: &$state.calendar,
            now: $state.now,
        }
    };
}
pub(super) use cx;

impl Cx<'_> {
    /// A line in the event log, at the daemon's time now.
    pub fn log(&mut self, what: String) {
        self.log.push(self.calendar, self.now, &what);
    }

    /// Something went wrong that the operator must hear of, though no request failed (a
    /// scheduling cycle, a backend sample): the event log (journaled when the journal takes
    /// it) and the daemon's message sink.
    pub fn warn(&mut self, what: String) {
        self.log.say(&what);
        let _ = self.engine.add_event(self.now, None, "daemon", &what);
        self.log(what);
    }

    /// An event that is also journaled (fleet changes: they are not job transitions, which
    /// the journal records by itself).
    pub fn record(&mut self, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine.add_event(self.now, None, kind, &what)?;
        self.log(what);
        Ok(())
    }

    /// A journaled event about one job (it shows in the job's history).
    pub fn record_job(&mut self, id: JobId, kind: &str, what: String) -> Result<(), EngineError> {
        self.engine.add_event(self.now, Some(id), kind, &what)?;
        self.log(format!("job {id} {what}"));
        Ok(())
    }

    /// Node `i`'s pool's path (`aws/us-east-1/h100`).
    pub fn pool_path_of(&self, i: usize) -> String {
        let fleet = self.engine.fleet();
        fleet.pool_path(fleet.nodes[i].pool)
    }

    /// Node `i`'s name.
    pub fn node_name(&self, i: usize) -> String {
        self.engine.fleet().nodes[i].name.clone()
    }
}
