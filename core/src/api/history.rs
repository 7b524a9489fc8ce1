//! The ranges of a node's GPU history (5 minutes, an hour, a day) and one bucket of it.

use serde::{Deserialize, Serialize};

/// One bucket: the mean of the samples that fell in it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    pub util_pct: f32,
    pub vram_used_mib: u32,
    pub power_w: f32,
    pub temp_c: f32,
}

/// A range the node view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Range {
    #[serde(rename = "5m")]
    FiveMinutes,
    #[serde(rename = "1h")]
    Hour,
    #[serde(rename = "24h")]
    Day,
}

impl Range {
    pub const ALL: [Range; 3] = [Range::FiveMinutes, Range::Hour, Range::Day];

    pub fn parse(s: &str) -> Result<Range, String> {
        Range::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("range `{}`: use 5m, 1h or 24h", s.escape_debug()))
    }

    pub fn name(self) -> &'static str {
        match self {
            Range::FiveMinutes => "5m",
            Range::Hour => "1h",
            Range::Day => "24h",
        }
    }

    /// The next one (`r` in the console cycles).
    pub fn next(self) -> Range {
        match self {
            Range::FiveMinutes => Range::Hour,
            Range::Hour => Range::Day,
            Range::Day => Range::FiveMinutes,
        }
    }

    /// Seconds a bucket spans, and how many buckets the range holds.
    pub fn buckets(self) -> (f64, usize) {
        match self {
            Range::FiveMinutes => (10.0, 30),
            Range::Hour => (60.0, 60),
            Range::Day => (1200.0, 72),
        }
    }

    /// Its index among the resolutions (finest first).
    pub fn tier(self) -> usize {
        self as usize
    }
}
