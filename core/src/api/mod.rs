//! What the console, the CLI and the daemon say to each other. The console renders
//! `Snapshot`s only (`snapshot`), so an embedded daemon and a remote one look the same to it; a
//! remote console follows the daemon's event stream: one snapshot, then `SnapshotDelta`s. It
//! reaches either through `Client` (`client`); one thing in detail is a view (`views`); who may
//! do what is `access`.

mod access;
mod answers;
mod client;
mod eta;
pub mod history;
mod job;
pub mod logs;
mod reports;
pub mod services;
mod snapshot;
mod views;

pub use crate::model::idle::{IdleCause, IdleNow};
pub use access::*;
pub use answers::*;
pub use client::*;
pub use eta::{span, Eta, StartMove, TeamMove, WhatIf};
pub use job::JobState;
pub use logs::{LogsFrom, LogsView, NodeLogsView};
pub use reports::*;
pub use snapshot::*;
pub use views::*;

/// A job's id, as the daemon numbers them (from 1).
pub type JobId = i64;

/// The largest request body accepted (a job spec is a few KiB).
pub const MAX_BODY: usize = 1 << 20;
