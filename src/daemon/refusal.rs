//! Why the daemon refuses a request, in its own words: what kind of refusal it is, a stable
//! code, what was wrong and what to do, and the field of the submitted file it is about. Below
//! the actor and the state, which answer with it; the API (`daemon::api`) alone turns a kind
//! into an HTTP status.

use crate::daemon::engine::EngineError;
use crate::daemon::journal::JournalError;

/// What kind of refusal: what the caller can do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The request is malformed or names what does not exist in the fleet file.
    Invalid,
    /// Well-formed, but it cannot be done as asked (a job that never fits, a key reused).
    Unprocessable,
    /// The caller may not do this.
    Forbidden,
    /// No such job, node or service.
    NotFound,
    /// Not in a state that allows it (a job already ended, a plan gone stale).
    Conflict,
    /// Too much at once (a full queue).
    TooMany,
    /// The daemon is stopping.
    Unavailable,
    /// The daemon failed (its journal, a reload).
    Internal,
}

/// A refusal: its kind, a stable code (`never-fits`), the message, and the field it is about.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    pub kind: Kind,
    pub code: &'static str,
    pub error: String,
    /// The field of the submitted file the refusal is about (`resources.accelerators`), so a
    /// client can say where in the file.
    pub field: Option<String>,
}

impl Refusal {
    pub fn new(kind: Kind, code: &'static str, error: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            code,
            error: error.into(),
            field: None,
        }
    }

    pub fn forbidden(error: impl Into<String>) -> Refusal {
        Refusal::new(Kind::Forbidden, "forbidden", error)
    }

    pub fn bad_request(error: impl Into<String>) -> Refusal {
        Refusal::new(Kind::Invalid, "invalid", error)
    }

    /// The daemon is shutting down: the request was not taken, or not answered.
    pub fn stopping() -> Refusal {
        Refusal::new(Kind::Unavailable, "stopping", "the daemon is shutting down")
    }
}

impl From<EngineError> for Refusal {
    fn from(e: EngineError) -> Refusal {
        let (kind, code) = match &e {
            EngineError::Spec(_)
            | EngineError::Resolve(_)
            | EngineError::UnknownTeam { .. }
            | EngineError::UnknownClass { .. }
            | EngineError::Teams(_) => (Kind::Invalid, "invalid"),
            EngineError::NeverFits(_) => (Kind::Unprocessable, "never-fits"),
            EngineError::Forbidden(_) => (Kind::Forbidden, "forbidden"),
            EngineError::OverBudget(_) => (Kind::Forbidden, "over-budget"),
            EngineError::QueueFull(_) => (Kind::TooMany, "queue-full"),
            EngineError::Stale(_) => (Kind::Conflict, "stale-plan"),
            EngineError::KeyReused(_) => (Kind::Unprocessable, "idempotency-key-reused"),
            EngineError::NoJob(_) | EngineError::Journal(JournalError::NoJob(_)) => {
                (Kind::NotFound, "not-found")
            }
            EngineError::Journal(JournalError::BadTransition { .. })
            | EngineError::WrongState { .. } => (Kind::Conflict, "conflict"),
            _ => (Kind::Internal, "internal"),
        };
        let field = match &e {
            EngineError::Resolve(r) => r.field.clone(),
            EngineError::UnknownTeam { .. } => Some("team".to_string()),
            EngineError::UnknownClass { .. } => Some("priority".to_string()),
            EngineError::NeverFits(_) => Some("resources".to_string()),
            _ => None,
        };
        Refusal {
            field,
            ..Refusal::new(kind, code, e.to_string())
        }
    }
}
