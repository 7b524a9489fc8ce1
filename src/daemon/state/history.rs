//! What each GPU did over the last 5 minutes, hour and day: utilization, VRAM in use, power and
//! temperature, at three resolutions (10 s, 1 min, 20 min buckets), each a fixed ring, so a
//! GPU costs the daemon the same ~4 KiB whether it ran for a minute or a month. A bucket with
//! no sample holds the last one when samples came at most `HOLD_S` apart (the daemon samples
//! once a cycle, and the simulated demo's cycles are a simulated minute), and is empty (`None`,
//! `null` in JSON) after a longer silence (the daemon was down, the node was away): nothing is
//! made up for it.

use std::collections::VecDeque;

pub use crate::api::history::{Point, Range};

/// Samples at most this far apart describe the time between them.
pub const HOLD_S: f64 = 120.0;

#[derive(Clone, Debug, Default)]
struct Tier {
    points: VecDeque<Option<Point>>,
    /// The bucket being filled (its index on the daemon's clock) and its running sums.
    bucket: i64,
    sum: [f64; 4],
    n: u32,
}

impl Tier {
    fn push(&mut self, range: Range, t: f64, p: Point, hold: bool) {
        let (step, keep) = range.buckets();
        let b = (t / step).floor() as i64;
        if self.n > 0 && b != self.bucket {
            let mean = self.mean();
            self.points.push_back(Some(mean));
            // Buckets with no sample between: the last one held over a short step, empty after
            // a silence; the time axis stays true either way.
            let gap = (b - self.bucket - 1).clamp(0, keep as i64) as usize;
            let fill = hold.then_some(mean);
            self.points.extend(std::iter::repeat_n(fill, gap));
            while self.points.len() > keep {
                self.points.pop_front();
            }
            self.sum = [0.0; 4];
            self.n = 0;
        }
        self.bucket = b;
        self.sum[0] += f64::from(p.util_pct);
        self.sum[1] += f64::from(p.vram_used_mib);
        self.sum[2] += f64::from(p.power_w);
        self.sum[3] += f64::from(p.temp_c);
        self.n += 1;
    }

    fn mean(&self) -> Point {
        let n = f64::from(self.n.max(1));
        Point {
            util_pct: (self.sum[0] / n) as f32,
            vram_used_mib: (self.sum[1] / n).round() as u32,
            power_w: (self.sum[2] / n) as f32,
            temp_c: (self.sum[3] / n) as f32,
        }
    }

    /// The closed buckets and the one being filled, oldest first, at most `keep`.
    fn series(&self, keep: usize) -> Vec<Option<Point>> {
        let mut out: Vec<Option<Point>> = self.points.iter().copied().collect();
        if self.n > 0 {
            out.push(Some(self.mean()));
        }
        let extra = out.len().saturating_sub(keep);
        out.drain(..extra);
        out
    }
}

/// One GPU's history at the three resolutions.
#[derive(Clone, Debug, Default)]
pub struct GpuHistory {
    tiers: [Tier; 3],
    last: Option<f64>,
}

impl GpuHistory {
    /// A sample taken at daemon time `t`.
    pub fn push(&mut self, t: f64, p: Point) {
        let hold = self.last.is_some_and(|l| t - l <= HOLD_S);
        self.last = Some(t);
        for r in Range::ALL {
            self.tiers[r.tier()].push(r, t, p, hold);
        }
    }

    /// The range's buckets, oldest first (the last one still filling); `None` where there
    /// was no sample.
    pub fn series(&self, r: Range) -> Vec<Option<Point>> {
        self.tiers[r.tier()].series(r.buckets().1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(util: f32) -> Point {
        Point {
            util_pct: util,
            vram_used_mib: (util * 100.0) as u32,
            power_w: util * 7.0,
            temp_c: 30.0,
        }
    }

    #[test]
    fn buckets_average_their_samples_and_the_rings_stay_bounded() {
        let mut h = GpuHistory::default();
        // Two days of a sample every 10 s, utilization the hour of the day.
        for i in 0..(2 * 8640) {
            let t = f64::from(i) * 10.0;
            h.push(t, at(((t / 3600.0) % 24.0).floor() as f32));
        }
        let five = h.series(Range::FiveMinutes);
        assert_eq!(five.len(), 30);
        let hour: Vec<Point> = h.series(Range::Hour).into_iter().flatten().collect();
        assert_eq!(hour.len(), 60);
        let day: Vec<Point> = h.series(Range::Day).into_iter().flatten().collect();
        assert_eq!(day.len(), 72);
        // The day's buckets (20 min) climb through the hours: 0, 0, 0, 1, 1, 1, …
        assert_eq!(day.last().unwrap().util_pct, 23.0);
        assert_eq!(day[day.len() - 4].util_pct, 22.0);
        assert_eq!(hour[0].util_pct, 23.0, "the last hour was hour 23");
    }

    #[test]
    fn a_short_step_holds_the_last_sample_and_a_silence_is_empty() {
        let mut h = GpuHistory::default();
        h.push(0.0, at(50.0));
        h.push(5.0, at(70.0));
        // A simulated minute later (the demo's cycle): the buckets between hold 60%.
        h.push(60.0, at(90.0));
        let five = h.series(Range::FiveMinutes);
        assert_eq!(five.len(), 7, "buckets 0..=6");
        assert_eq!(five[0].unwrap().util_pct, 60.0, "the mean of 50 and 70");
        assert!(five[1..6].iter().all(|p| p.unwrap().util_pct == 60.0));
        assert_eq!(five[6].unwrap().util_pct, 90.0);
        // Ten minutes of silence (the daemon was down): no numbers for them.
        h.push(660.0, at(10.0));
        let five = h.series(Range::FiveMinutes);
        assert_eq!(five.len(), 30);
        assert!(five[..29].iter().all(Option::is_none), "{five:?}");
        assert_eq!(five[29].unwrap().util_pct, 10.0);
        assert_eq!(
            Range::parse("1h"),
            Ok(Range::Hour),
            "and ranges read as the API takes them"
        );
        assert!(Range::parse("2h").unwrap_err().contains("5m, 1h or 24h"));
    }
}
