//! A run's logs: its stdout and stderr, each a file on the node that ran it
//! (`job-N.out`, `job-N.err`), read from the end (a tail) or from where the last read stopped
//! (following). Reads are bounded: the end of a gigabyte log costs what a small one does, and a
//! follower catching up gets at most `CHUNK_BYTES` a read.
//!
//! Reading happens off the daemon's actor: the actor hands out `LogSource`s and the API reads
//! them, so a slow host makes only its own reader wait.

use serde::{Deserialize, Serialize};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Where the next read starts: byte offsets into the run's stdout and stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogCursor {
    pub out: u64,
    pub err: u64,
}

impl LogCursor {
    /// `OUT,ERR` (as the API's `after` parameter carries it).
    pub fn parse(s: &str) -> Result<LogCursor, String> {
        let bad = || format!("`{s}` is not a log cursor: expected OUT,ERR byte offsets");
        let (o, e) = s.split_once(',').ok_or_else(bad)?;
        Ok(LogCursor {
            out: o.trim().parse().map_err(|_| bad())?,
            err: e.trim().parse().map_err(|_| bad())?,
        })
    }

    /// The offset into `stream`.
    fn at(&mut self, stream: Stream) -> &mut u64 {
        match stream {
            Stream::Out => &mut self.out,
            Stream::Err => &mut self.err,
        }
    }
}

impl std::fmt::Display for LogCursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{},{}", self.out, self.err)
    }
}

pub use crate::api::logs::{LogLine, Stream};

/// What to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogQuery {
    /// Without `after`: the last `tail` lines of each stream.
    pub tail: usize,
    /// Read what was written since this cursor (complete lines only, unless `partial`).
    pub after: Option<LogCursor>,
    /// Include a last line not yet ended by a newline (the run has ended: it never will be).
    pub partial: bool,
}

/// Lines read and where the next read starts.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogRead {
    pub lines: Vec<LogLine>,
    pub cursor: LogCursor,
    /// Whether either file exists (a run that never started on this node has none).
    pub found: bool,
    /// Why there are none, where the host's log retention removed them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gone: Option<String>,
}

/// How much of the end of a log a tail reads.
pub const TAIL_BYTES: u64 = 64 * 1024;
/// The most a following read returns per stream.
pub const CHUNK_BYTES: u64 = 1024 * 1024;

pub fn log_path(dir: &Path, job: i64, stream: Stream) -> PathBuf {
    dir.join(format!("job-{job}.{}", stream.suffix()))
}

/// Reads job `job`'s logs in `dir` (the files a local run writes).
pub fn read(dir: &Path, job: i64, q: &LogQuery) -> LogRead {
    let mut out = LogRead::default();
    for stream in [Stream::Out, Stream::Err] {
        let from = q.after.map(|mut c| *c.at(stream));
        let Some((text, next)) = read_stream(&log_path(dir, job, stream), q, from) else {
            // No file: the cursor stays where it was.
            *out.cursor.at(stream) = from.unwrap_or(0);
            continue;
        };
        out.found = true;
        *out.cursor.at(stream) = next;
        let lines: Vec<&str> = text.lines().collect();
        let keep = if q.after.is_some() {
            &lines[..]
        } else {
            &lines[lines.len().saturating_sub(q.tail)..]
        };
        out.lines.extend(keep.iter().map(|l| LogLine {
            stream,
            text: (*l).to_string(),
        }));
    }
    if !out.found {
        out.gone = super::retention::gone(dir, job);
    }
    out
}

/// One stream's text for `q` and the offset after it; `None` when the file is not there.
fn read_stream(path: &Path, q: &LogQuery, from: Option<u64>) -> Option<(String, u64)> {
    let mut f = std::fs::File::open(path).ok()?;
    let len = f.metadata().ok()?.len();
    let Some(from) = from else {
        // A tail: the end of the file, from a line boundary when cut.
        let start = len.saturating_sub(TAIL_BYTES);
        let bytes = read_range(&mut f, start, len - start)?;
        let text = String::from_utf8_lossy(&bytes).into_owned();
        let text = if start > 0 {
            text.split_once('\n')
                .map_or(String::new(), |(_, rest)| rest.to_string())
        } else {
            text
        };
        return Some((text, len));
    };
    // A file shorter than the cursor was truncated or replaced (a requeued run starts its
    // logs again by appending, so this is a user's truncation): start over.
    let from = if from > len { 0 } else { from };
    let mut bytes = read_range(&mut f, from, (len - from).min(CHUNK_BYTES))?;
    let full = bytes.len() as u64 == CHUNK_BYTES;
    if !q.partial && !full {
        // Complete lines only; the rest is read once its newline is written.
        let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
        bytes.truncate(end);
    }
    let next = from + bytes.len() as u64;
    Some((String::from_utf8_lossy(&bytes).into_owned(), next))
}

fn read_range(f: &mut std::fs::File, start: u64, n: u64) -> Option<Vec<u8>> {
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut bytes = Vec::with_capacity(n as usize);
    f.take(n).read_to_end(&mut bytes).ok()?;
    Some(bytes)
}

/// Reads runs' logs on the nodes of one backend pool (`host` is the node's index there). May
/// wait for a remote host, at most `wait`; safe to call from any thread.
pub trait LogReader: Send + Sync {
    fn read(&self, host: usize, job: i64, q: &LogQuery, wait: Duration) -> Result<LogRead, String>;
}

/// Logs in a directory of this machine (the local host's runs).
pub struct DirReader(pub PathBuf);

impl LogReader for DirReader {
    fn read(&self, _host: usize, job: i64, q: &LogQuery, _: Duration) -> Result<LogRead, String> {
        Ok(read(&self.0, job, q))
    }
}

/// One node's logs of a job, as the actor hands them to a reader: host `host` of the pool
/// whose runner gave `reader`.
#[derive(Clone)]
pub struct LogSource {
    /// The node's rank in the job (0 for a single-node job).
    pub rank: usize,
    /// The node's name.
    pub node: String,
    pub reader: Arc<dyn LogReader>,
    pub host: usize,
}

impl LogSource {
    pub fn read(&self, job: i64, q: &LogQuery, wait: Duration) -> Result<LogRead, String> {
        self.reader.read(self.host, job, q, wait)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn dir(name: &str) -> PathBuf {
        gantry_testkit::scratch::scratch(&format!("logs-{name}"))
    }

    fn texts(r: &LogRead) -> Vec<String> {
        r.lines.iter().map(ToString::to_string).collect()
    }

    #[test]
    fn the_tail_of_a_large_log_reads_only_its_end() {
        let dir = dir("tail");
        {
            let mut f =
                std::io::BufWriter::new(std::fs::File::create(dir.join("job-7.out")).unwrap());
            for i in 0..400_000 {
                writeln!(f, "line {i}").unwrap();
            }
        }
        let t = std::time::Instant::now();
        let q = LogQuery {
            tail: 3,
            after: None,
            partial: true,
        };
        let tail = texts(&read(&dir, 7, &q));
        assert_eq!(
            tail,
            ["out: line 399997", "out: line 399998", "out: line 399999"]
        );
        assert!(t.elapsed().as_millis() < 500);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn following_returns_each_complete_line_once() {
        let dir = dir("follow");
        let path = log_path(&dir, 3, Stream::Out);
        let mut f = std::fs::File::create(&path).unwrap();
        write!(f, "one\ntw").unwrap();
        let tail = LogQuery {
            tail: 10,
            after: None,
            partial: false,
        };
        let first = read(&dir, 3, &tail);
        assert!(first.found);
        assert_eq!(texts(&first), ["out: one", "out: tw"]);
        // From the start: only the complete line, then the rest once it ends.
        let mut q = LogQuery {
            tail: 0,
            after: Some(LogCursor::default()),
            partial: false,
        };
        let a = read(&dir, 3, &q);
        assert_eq!(texts(&a), ["out: one"]);
        q.after = Some(a.cursor);
        assert!(read(&dir, 3, &q).lines.is_empty());
        write!(f, "o\nthree\n").unwrap();
        let b = read(&dir, 3, &q);
        assert_eq!(texts(&b), ["out: two", "out: three"]);
        q.after = Some(b.cursor);
        write!(f, "end").unwrap();
        assert!(read(&dir, 3, &q).lines.is_empty());
        q.partial = true;
        let c = read(&dir, 3, &q);
        assert_eq!(texts(&c), ["out: end"]);
        assert_eq!(c.cursor.out, std::fs::metadata(&path).unwrap().len());
        // stderr appears with its own cursor.
        std::fs::write(log_path(&dir, 3, Stream::Err), "oops\n").unwrap();
        q.after = Some(c.cursor);
        let d = read(&dir, 3, &q);
        assert_eq!(texts(&d), ["err: oops"]);
        assert_eq!(d.cursor.out, c.cursor.out);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_missing_log_is_not_found_and_a_bad_cursor_is_named() {
        let dir = dir("missing");
        let r = read(
            &dir,
            9,
            &LogQuery {
                tail: 5,
                after: None,
                partial: true,
            },
        );
        assert!(!r.found && r.lines.is_empty());
        assert_eq!(
            LogCursor::parse("12, 4").unwrap(),
            LogCursor { out: 12, err: 4 }
        );
        assert!(LogCursor::parse("12").unwrap_err().contains("OUT,ERR"));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
