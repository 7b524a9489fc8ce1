//! The agent protocol's framing, as the daemon reads it: one line at a time, never more than
//! `MAX_LINE` bytes held for one line whatever a host sends (a longer line is skipped to its
//! end and reported by its length), and never more than `MAX_BURST` lines in a second. A host
//! is not trusted to be well-behaved: a broken or hostile one costs its own connection, not the
//! daemon's memory or its event log.

use std::time::{Duration, Instant};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// The longest line kept: a log read's answer (`logs::CHUNK_BYTES`, 1 MiB, JSON-escaped) with
/// room to spare.
pub const MAX_LINE: usize = 8 << 20;
/// The most lines a host may send in one second (an agent sends a sample a second and a line
/// per run that starts or ends).
pub const MAX_BURST: u32 = 2_000;

/// What one read gives.
#[derive(Debug, PartialEq, Eq)]
pub enum Line {
    Text(String),
    /// A line over `MAX_LINE` (its length in bytes): skipped.
    TooLong(usize),
    /// Over `MAX_BURST` lines within a second.
    TooFast,
}

/// Bounded lines from `R`. Cancel-safe: what was read of a line is kept in `self` between
/// calls, so a `select!` that drops a `next` loses nothing.
pub struct Lines<R> {
    reader: R,
    line: Vec<u8>,
    /// Bytes of the current line skipped since it passed the bound.
    skipped: usize,
    max: usize,
    window: (Instant, u32),
}

impl<R: AsyncBufRead + Unpin> Lines<R> {
    pub fn new(reader: R) -> Lines<R> {
        Lines::with_bound(reader, MAX_LINE)
    }

    pub fn with_bound(reader: R, max: usize) -> Lines<R> {
        Lines {
            reader,
            line: Vec::new(),
            skipped: 0,
            max,
            window: (Instant::now(), 0),
        }
    }

    /// The next line (without its newline; invalid UTF-8 replaced), or `None` at the end.
    pub async fn next(&mut self) -> std::io::Result<Option<Line>> {
        loop {
            let buf = self.reader.fill_buf().await?;
            if buf.is_empty() {
                if self.line.is_empty() && self.skipped == 0 {
                    return Ok(None);
                }
                return Ok(Some(self.take()));
            }
            let (part, end) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (&buf[..i], Some(i + 1)),
                None => (buf, None),
            };
            if self.skipped == 0 && self.line.len() + part.len() <= self.max {
                self.line.extend_from_slice(part);
            } else {
                self.skipped += self.line.len() + part.len();
                self.line = Vec::new();
            }
            let used = end.unwrap_or(buf.len());
            self.reader.consume(used);
            if end.is_some() {
                let now = Instant::now();
                if now.duration_since(self.window.0) >= Duration::from_secs(1) {
                    self.window = (now, 0);
                }
                self.window.1 += 1;
                if self.window.1 > MAX_BURST {
                    return Ok(Some(Line::TooFast));
                }
                return Ok(Some(self.take()));
            }
        }
    }

    fn take(&mut self) -> Line {
        if self.skipped > 0 {
            let n = std::mem::take(&mut self.skipped);
            return Line::TooLong(n);
        }
        let bytes = std::mem::take(&mut self.line);
        Line::Text(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_all(input: &[u8], max: usize) -> Vec<Line> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            // A small buffer, so lines span many reads.
            let r = tokio::io::BufReader::with_capacity(7, input);
            let mut lines = Lines::with_bound(r, max);
            let mut out = Vec::new();
            while let Some(l) = lines.next().await.unwrap() {
                out.push(l);
            }
            out
        })
    }

    #[test]
    fn lines_past_the_bound_are_skipped_and_counted() {
        let input = format!("short\n{}\nafter\nlast", "x".repeat(100));
        assert_eq!(
            read_all(input.as_bytes(), 20),
            vec![
                Line::Text("short".into()),
                Line::TooLong(100),
                Line::Text("after".into()),
                Line::Text("last".into()),
            ]
        );
        let endless = "y".repeat(1000);
        assert_eq!(read_all(endless.as_bytes(), 20), vec![Line::TooLong(1000)]);
        assert_eq!(read_all(b"\xff\n", 20), vec![Line::Text("\u{fffd}".into())]);
    }

    #[test]
    fn a_flood_of_lines_is_cut_off() {
        let input = "{}\n".repeat(MAX_BURST as usize + 10);
        let lines = read_all(input.as_bytes(), 20);
        assert_eq!(lines.iter().filter(|l| **l == Line::TooFast).count(), 10);
    }
}
