//! The one interface the console and the CLI use to reach a daemon, and how a call fails.

use super::{
    history, Access, JobRequest, JobView, LogsFrom, LogsView, NodeDetail, PoolDetail, Preview,
    Snapshot,
};

/// Why a call to the daemon failed, the same from either client: the daemon's own answer
/// (`Api`, with its status, code and the field of the file it is about), or why there was none.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {endpoint}: {why} (is `gantry daemon` running? `gantry info` shows the default socket)")]
    Unreachable { endpoint: String, why: String },
    #[error("{error}")]
    Api {
        status: u16,
        code: String,
        error: String,
        /// The field of a submitted file the error is about, when the daemon says.
        field: Option<String>,
    },
    #[error("daemon at {endpoint}: {why}")]
    Protocol { endpoint: String, why: String },
    /// The TLS handshake failed: the certificate is not the pinned one, or nothing trusted
    /// vouches for it.
    #[error("will not talk to {endpoint}: {why}")]
    Untrusted { endpoint: String, why: String },
    /// What this client cannot do at all (a read-only client, a console on the embedded
    /// simulated fleet asked for a shell).
    #[error("{0}")]
    Unsupported(String),
}

impl ClientError {
    /// A refusal about a field of the spec `written` (read from `file`), said at that field as
    /// the spec's own errors are (`FILE:LINE:COL: \`field\`: …`), with its line; `None` for
    /// any other error, or a field the text does not write (given on the command line).
    pub fn at_its_field(&self, file: &str, written: &str) -> Option<(usize, String)> {
        let ClientError::Api {
            field: Some(field),
            error,
            ..
        } = self
        else {
            return None;
        };
        let (line, col) = crate::spec::position_of(written, field)?;
        Some((line, format!("{file}:{line}:{col}: `{field}`: {error}")))
    }

    /// The exit code the CLI uses: 2 bad input, 3 not found, 4 not allowed, 5 unreachable,
    /// 6 conflict (the job is not in a state that allows it), 1 anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Unreachable { .. } | ClientError::Untrusted { .. } => 5,
            ClientError::Api { status, .. } => match status {
                400 | 413 | 422 => 2,
                404 => 3,
                401 | 403 => 4,
                409 => 6,
                _ => 1,
            },
            ClientError::Protocol { .. } | ClientError::Unsupported(_) => 1,
        }
    }
}

pub trait Client {
    /// Who the daemon takes this client for (the embedded console is an operator).
    fn access(&self) -> Access {
        Access::operator()
    }
    /// A shell in job `id`'s head node, on this terminal (raw, the console's screen put
    /// away): its exit status once it ends.
    fn shell(&mut self, id: i64) -> Result<i32, ClientError> {
        let _ = id;
        Err(ClientError::Unsupported("a shell needs a daemon this console is attached to (gantry console --connect …); the embedded daemon's fleet is simulated and runs no processes".to_string()))
    }
    /// Asks the daemon to change a job; the answer is one line for the status bar.
    fn act(&mut self, req: JobRequest) -> Result<String, ClientError> {
        let _ = req;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// What a change to a job would do, changing nothing (the confirmation's preview).
    fn what_if(&mut self, req: JobRequest) -> Result<crate::api::WhatIf, ClientError> {
        let _ = req;
        Err(ClientError::Unsupported(
            "this client cannot preview an action".to_string(),
        ))
    }
    /// What one change to several jobs together would do (the marked jobs' confirmation).
    fn what_if_many(
        &mut self,
        action: crate::api::JobAction,
        ids: &[i64],
    ) -> Result<crate::api::WhatIf, ClientError> {
        let _ = (action, ids);
        Err(ClientError::Unsupported(
            "this client cannot preview an action".to_string(),
        ))
    }
    /// What moving job `id` to priority class `class` would do, changing nothing.
    fn what_if_priority(
        &mut self,
        id: i64,
        class: &str,
    ) -> Result<crate::api::WhatIf, ClientError> {
        let _ = (id, class);
        Err(ClientError::Unsupported(
            "this client cannot preview an action".to_string(),
        ))
    }
    /// One job in detail: spec, placement, cost, why it waits, its events.
    fn job(&mut self, id: i64) -> Result<JobView, ClientError> {
        let _ = id;
        Err(ClientError::Unsupported(
            "this client cannot show job details".to_string(),
        ))
    }
    /// A job's logs: every node's, or node `node`'s; the last lines of each stream, or what
    /// was written since a cursor (as `gantry logs -f` reads them).
    fn logs(
        &mut self,
        id: i64,
        node: Option<usize>,
        from: &LogsFrom,
    ) -> Result<LogsView, ClientError> {
        let _ = (id, node, from);
        Err(ClientError::Unsupported(
            "this client cannot show logs".to_string(),
        ))
    }
    /// Submits a job spec (YAML); the new job's id.
    fn submit(&mut self, spec: &str) -> Result<i64, ClientError> {
        let _ = spec;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// Checks a job spec and says where it would land now, without submitting it.
    fn preview(&mut self, spec: &str) -> Result<Preview, ClientError> {
        let _ = spec;
        Err(ClientError::Unsupported(
            "this client cannot preview".to_string(),
        ))
    }
    /// One pool in detail (nodes, GPUs, their jobs and utilization history), by its index in
    /// the snapshot's pool list.
    fn pool(&mut self, index: usize) -> Result<PoolDetail, ClientError> {
        let _ = index;
        Err(ClientError::Unsupported(
            "this client cannot show pool details".to_string(),
        ))
    }
    /// One node GPU by GPU over a range, by its name.
    fn node(&mut self, name: &str, range: history::Range) -> Result<NodeDetail, ClientError> {
        let _ = (name, range);
        Err(ClientError::Unsupported(
            "this client cannot show nodes".to_string(),
        ))
    }
    /// Moves a job to another priority class.
    fn set_priority(&mut self, id: i64, class: &str) -> Result<String, ClientError> {
        let _ = (id, class);
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// The idle-GPU reclaim plan; with `apply` (a plan's id), carries out exactly that plan
    /// and returns what was done and what was skipped.
    fn reclaim(
        &mut self,
        apply: Option<&str>,
    ) -> Result<crate::scheduler::reclaim::ReclaimPlan, ClientError> {
        let _ = apply;
        Err(ClientError::Unsupported(
            "this client is read-only".to_string(),
        ))
    }
    /// Brings in anything new; true when the snapshot changed.
    fn poll(&mut self) -> bool;
    fn snapshot(&self) -> &Snapshot;
    /// How long until there may be news (the console sleeps on input until then).
    fn until_next(&self) -> std::time::Duration;
    /// The daemon is out of reach: since when (local time) and why. An embedded daemon
    /// never is.
    fn lost(&self) -> Option<String> {
        None
    }
}

/// A message about job `id`: `why` as it is when it already names the job (the daemon's
/// errors do), else prefixed with it — never `job 1: job 1: …`.
pub fn about_job(id: impl std::fmt::Display, why: &str) -> String {
    let name = format!("job {id}");
    let named = why
        .strip_prefix(&name)
        .is_some_and(|rest| !rest.starts_with(|c: char| c.is_ascii_digit()));
    if named {
        why.to_string()
    } else {
        format!("{name}: {why}")
    }
}

/// GPUs for people: whole numbers as such, shares with two decimals (0.5, 2.25).
pub fn gpus_text(gpus: f64) -> String {
    if (gpus - gpus.round()).abs() < 1e-9 {
        format!("{gpus:.0}")
    } else {
        format!("{gpus:.2}")
    }
}

#[cfg(test)]
mod about_job_tests {
    use super::about_job;

    #[test]
    fn a_message_that_names_the_job_is_not_prefixed_again() {
        assert_eq!(
            about_job(1, "job 1 is running; release applies to held jobs"),
            "job 1 is running; release applies to held jobs"
        );
        assert_eq!(
            about_job(1, "job 12: no such job"),
            "job 1: job 12: no such job"
        );
        assert_eq!(
            about_job(4, "the daemon is shutting down"),
            "job 4: the daemon is shutting down"
        );
    }
}
