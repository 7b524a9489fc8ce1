//! The daemon's event log: the newest lines the console and `gantry events` show first, how
//! many were ever written (a client sees that something happened without diffing lines), and
//! where the daemon's own warnings go besides (its stderr, or a file under the console).
//! Journaling an event is the engine's; this keeps what is shown.

use super::Messages;
use crate::api::EVENTS_KEPT;
use crate::daemon::calendar::Calendar;
use std::collections::VecDeque;

pub(super) struct EventLog {
    messages: Messages,
    /// Newest first, each stamped with its time of day.
    lines: VecDeque<String>,
    total: u64,
}

impl EventLog {
    pub(super) fn new(messages: Messages) -> EventLog {
        EventLog {
            messages,
            lines: VecDeque::new(),
            total: 0,
        }
    }

    /// One line, stamped `HH:MM` on the daemon's calendar.
    pub(super) fn push(&mut self, calendar: &Calendar, at: f64, what: &str) {
        self.lines
            .push_front(format!("{} {what}", calendar.hh_mm(at)));
        self.lines.truncate(EVENTS_KEPT);
        self.total += 1;
    }

    /// Also to the daemon's message sink (a warning the operator must hear of).
    pub(super) fn say(&self, what: &str) {
        self.messages.write(what);
    }

    pub(super) fn messages(&self) -> &Messages {
        &self.messages
    }

    /// How many lines were ever pushed.
    pub(super) fn total(&self) -> u64 {
        self.total
    }

    /// The newest `n`, newest first.
    pub(super) fn newest(&self, n: usize) -> Vec<String> {
        self.lines.iter().take(n).cloned().collect()
    }
}
