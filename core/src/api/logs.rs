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
