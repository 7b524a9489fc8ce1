//! A line of a run's logs, and which stream it came from.

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stream {
    Out,
    Err,
}

impl Stream {
    /// The log file's suffix, and how a job's detail labels its lines.
    pub fn suffix(self) -> &'static str {
        match self {
            Stream::Out => "out",
            Stream::Err => "err",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub stream: Stream,
    pub text: String,
}

impl std::fmt::Display for LogLine {
    /// `out: text` — how a job's detail shows a line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.stream.suffix(), self.text)
    }
}

impl LogsView {
    /// Where the next read of each node starts, for `?after=` (`OUT,ERR;OUT,ERR…`).
    pub fn cursors(&self) -> String {
        let cursors: Vec<&str> = self.nodes.iter().map(|n| n.cursor.as_str()).collect();
        cursors.join(";")
    }
}

/// Which lines of a job's logs to read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogsFrom {
    /// The last lines of each stream (a last line not yet ended included).
    Tail(usize),
    /// What was written since these cursors (`OUT,ERR;OUT,ERR…`, one per node, from the last
    /// answer): complete lines only, unless `partial` (the run has ended; its last line may
    /// lack its newline).
    After { cursors: String, partial: bool },
}

impl LogsFrom {
    /// The query's parameters for `GET /v1/jobs/{id}/logs`.
    pub fn query(&self) -> String {
        match self {
            LogsFrom::Tail(n) => format!("tail={n}&partial=true"),
            LogsFrom::After { cursors, partial } => format!("after={cursors}&partial={partial}"),
        }
    }
}

/// A job's logs: what `GET /v1/jobs/{id}/logs` answers, `gantry logs` prints and the console's
/// log pane shows — the one type the daemon writes and its clients read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LogsView {
    pub job: i64,
    pub state: super::JobState,
    /// The job has ended: nothing more will be written.
    #[serde(rename = "final")]
    pub is_final: bool,
    pub nodes: Vec<NodeLogsView>,
}

/// One node's part of a job's logs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeLogsView {
    pub rank: usize,
    pub node: String,
    pub lines: Vec<LogLine>,
    /// Where the next read of this node starts (`OUT,ERR`).
    pub cursor: String,
    /// Why this node's logs could not be read (the others' still are).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}
