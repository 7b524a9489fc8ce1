//! Calendar time for the daemon's clock. The daemon keeps its own clock (seconds, resumed
//! after a restart, sped up in a simulation), and every start pins it to the wall clock: an
//! anchor `(clock, unix)` in the journal. Between anchors the clock runs as the calendar
//! does; across a restart the calendar jumps over the downtime while the clock resumes. So
//! budget months, report windows given as dates and event timestamps all mean the calendar's
//! days, in the fleet's time zone (`[calendar] time_zone`, UTC by default, as cloud bills are).

use chrono::{DateTime, Datelike, NaiveDate, NaiveDateTime, SecondsFormat, TimeZone, Utc};
use chrono_tz::Tz;

/// Where the daemon's clock stood on the wall clock when it started.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Anchor {
    /// Seconds on the daemon's clock.
    pub clock: f64,
    /// Unix seconds (UTC).
    pub unix: f64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Calendar {
    /// Sorted by clock; never empty.
    anchors: Vec<Anchor>,
    zone: Tz,
}

impl Default for Calendar {
    /// The clock at the Unix epoch, in UTC.
    fn default() -> Self {
        Calendar::new(Vec::new(), Tz::UTC)
    }
}

/// A budget month: the calendar month (in the fleet's zone) that a moment falls in.
#[derive(Clone, Debug, PartialEq)]
pub struct Month {
    /// Months since year 0 (`year * 12 + month - 1`): a new value is a new month.
    pub key: i64,
    /// When it began and when it ends, on the daemon's clock.
    pub start: f64,
    pub end: f64,
    /// `2026-11`.
    pub label: String,
}

impl Calendar {
    /// `anchors` as the journal keeps them; a daemon that never started gets one at `(0, 0)`.
    pub fn new(mut anchors: Vec<Anchor>, zone: Tz) -> Calendar {
        anchors.retain(|a| a.clock.is_finite() && a.unix.is_finite());
        anchors.sort_by(|a, b| a.clock.total_cmp(&b.clock));
        if anchors.is_empty() {
            anchors.push(Anchor {
                clock: 0.0,
                unix: 0.0,
            });
        }
        Calendar { anchors, zone }
    }

    /// The anchor a start at clock `resume` and wall clock `wall` adds, if any. A journal with
    /// no anchor yet (new, or from before calendars) is taken to have run until now; the
    /// calendar never goes back (a sped-up simulation runs ahead of the wall clock, and a
    /// restart continues from where it was), and a start that is on time adds nothing.
    pub fn start(anchors: &[Anchor], resume: f64, wall: f64) -> Option<Anchor> {
        if anchors.is_empty() {
            return Some(Anchor {
                clock: 0.0,
                unix: wall - resume,
            });
        }
        let known = Calendar::new(anchors.to_vec(), Tz::UTC).unix(resume);
        (wall - known >= 1.0).then_some(Anchor {
            clock: resume,
            unix: wall,
        })
    }

    pub fn zone(&self) -> Tz {
        self.zone
    }

    pub fn anchors(&self) -> &[Anchor] {
        &self.anchors
    }

    /// Unix seconds of a moment on the daemon's clock.
    pub fn unix(&self, t: f64) -> f64 {
        let i = self.anchors.partition_point(|a| a.clock <= t).max(1) - 1;
        let a = self.anchors[i];
        a.unix + (t - a.clock)
    }

    /// The daemon's clock at a Unix time. A time in a downtime (between a stop and the next
    /// start) is the start; a time before the first start counts back from it.
    pub fn clock(&self, unix: f64) -> f64 {
        let i = self.anchors.partition_point(|a| a.unix <= unix).max(1) - 1;
        let a = self.anchors[i];
        let t = a.clock + (unix - a.unix);
        match self.anchors.get(i + 1) {
            Some(next) => t.min(next.clock),
            None => t,
        }
    }

    /// A moment on the daemon's clock, in the fleet's zone.
    pub fn datetime(&self, t: f64) -> DateTime<Tz> {
        let unix = self.unix(t);
        let secs = unix.floor();
        let nanos = ((unix - secs) * 1e9) as u32;
        DateTime::from_timestamp(secs as i64, nanos.min(999_999_999))
            .unwrap_or(DateTime::<Utc>::MIN_UTC)
            .with_timezone(&self.zone)
    }

    /// RFC 3339, to the second, with the zone's offset (`Z` in UTC).
    pub fn rfc3339(&self, t: f64) -> String {
        self.datetime(t).to_rfc3339_opts(SecondsFormat::Secs, true)
    }

    /// `HH:MM` in the fleet's zone, for event lines.
    pub fn hh_mm(&self, t: f64) -> String {
        self.datetime(t).format("%H:%M").to_string()
    }

    /// The calendar month a moment on the daemon's clock falls in.
    pub fn month(&self, t: f64) -> Month {
        let d = self.datetime(t);
        let (y, m) = (d.year(), d.month());
        let next = if m == 12 { (y + 1, 1) } else { (y, m + 1) };
        Month {
            key: i64::from(y) * 12 + i64::from(m) - 1,
            start: self.clock(self.midnight(y, m, 1)),
            end: self.clock(self.midnight(next.0, next.1, 1)),
            label: format!("{y:04}-{m:02}"),
        }
    }

    /// Unix seconds of a day's start in the zone (where DST skips midnight, the first moment
    /// that exists).
    fn midnight(&self, y: i32, m: u32, d: u32) -> f64 {
        let day = NaiveDate::from_ymd_opt(y, m, d).unwrap_or_default();
        self.local(day.and_hms_opt(0, 0, 0).unwrap_or_default())
    }

    /// Unix seconds of a wall time in the zone: the earlier of an ambiguous one, and a time
    /// a DST change skips read as the offset before it.
    fn local(&self, at: NaiveDateTime) -> f64 {
        match self.zone.from_local_datetime(&at).earliest() {
            Some(t) => t.timestamp() as f64,
            None => {
                let off = self.zone.offset_from_utc_datetime(&at);
                let utc = chrono::Offset::fix(&off).local_minus_utc();
                (at.and_utc().timestamp() - i64::from(utc)) as f64
            }
        }
    }

    /// A moment as people write it, on the daemon's clock: a date (`2026-11-01`, its midnight
    /// in the fleet's zone), a wall time there (`2026-11-01T09:30`, `2026-11-01 09:30:00`),
    /// RFC 3339 (`2026-11-01T09:30:00Z`, `…+01:00`), a duration before `now` (`24h`, `7d`),
    /// or bare seconds on the daemon's clock.
    pub fn parse(&self, text: &str, now: f64) -> Result<f64, String> {
        let text = text.trim();
        if let Ok(t) = text.parse::<f64>() {
            return if t.is_finite() && t >= 0.0 {
                Ok(t)
            } else {
                Err(format!(
                    "`{}`: seconds must be 0 or more",
                    text.escape_debug()
                ))
            };
        }
        if let Ok(t) = DateTime::parse_from_rfc3339(text) {
            return Ok(self.clock(t.timestamp() as f64));
        }
        if let Ok(d) = NaiveDate::parse_from_str(text, "%Y-%m-%d") {
            return Ok(self.clock(self.midnight(d.year(), d.month(), d.day())));
        }
        for f in [
            "%Y-%m-%dT%H:%M:%S",
            "%Y-%m-%d %H:%M:%S",
            "%Y-%m-%dT%H:%M",
            "%Y-%m-%d %H:%M",
        ] {
            if let Ok(at) = NaiveDateTime::parse_from_str(text, f) {
                return Ok(self.clock(self.local(at)));
            }
        }
        if let Some(d) = crate::spec::parse_duration(text) {
            return Ok(now - d);
        }
        Err(format!(
            "`{}`: expected a date (2026-11-01), a time in {} (2026-11-01T09:30), RFC 3339 (2026-11-01T09:30:00Z), a duration before now (24h, 7d) or seconds on the daemon's clock",
            text.escape_debug(),
            self.zone.name()
        ))
    }
}

pub use crate::config::calendar::zone;

#[cfg(test)]
mod tests {
    use super::*;

    const NOV_1_2026_UTC: f64 = 1_793_491_200.0;

    fn cal(zone: &str, anchors: &[(f64, f64)]) -> Calendar {
        Calendar::new(
            anchors
                .iter()
                .map(|&(clock, unix)| Anchor { clock, unix })
                .collect(),
            super::zone(zone).unwrap(),
        )
    }

    #[test]
    fn the_clock_maps_to_the_calendar_and_back_across_a_restart() {
        // Started at 2026-11-01 00:00 UTC; stopped at clock 3600, restarted 2 hours later.
        let c = cal(
            "UTC",
            &[
                (0.0, NOV_1_2026_UTC),
                (3600.0, NOV_1_2026_UTC + 3.0 * 3600.0),
            ],
        );
        assert_eq!(c.rfc3339(0.0), "2026-11-01T00:00:00Z");
        assert_eq!(c.rfc3339(1800.0), "2026-11-01T00:30:00Z");
        assert_eq!(c.rfc3339(3600.0), "2026-11-01T03:00:00Z");
        assert_eq!(c.rfc3339(7200.0), "2026-11-01T04:00:00Z");
        assert_eq!(c.clock(NOV_1_2026_UTC + 1800.0), 1800.0);
        // In the downtime: the restart.
        assert_eq!(c.clock(NOV_1_2026_UTC + 2.0 * 3600.0), 3600.0);
        assert_eq!(c.clock(NOV_1_2026_UTC + 4.0 * 3600.0), 7200.0);
        // Before the first start: counted back.
        assert_eq!(c.clock(NOV_1_2026_UTC - 60.0), -60.0);
    }

    #[test]
    fn a_start_adds_an_anchor_only_when_the_calendar_moved_on() {
        let first = Calendar::start(&[], 500.0, NOV_1_2026_UTC).unwrap();
        assert_eq!(first.unix, NOV_1_2026_UTC - 500.0);
        let a = [first];
        // On time (a reload): nothing.
        assert_eq!(Calendar::start(&a, 600.0, NOV_1_2026_UTC + 100.0), None);
        // A simulation ran ahead of the wall clock: nothing, the calendar never goes back.
        assert_eq!(Calendar::start(&a, 90_000.0, NOV_1_2026_UTC + 100.0), None);
        // After a downtime: the restart pins the clock to now.
        let later = Calendar::start(&a, 600.0, NOV_1_2026_UTC + 7200.0).unwrap();
        assert_eq!((later.clock, later.unix), (600.0, NOV_1_2026_UTC + 7200.0));
    }

    #[test]
    fn budget_months_are_calendar_months_in_the_fleets_zone() {
        // Clock 0 = 2026-10-31 22:00 UTC = 2026-10-31 23:00 in Berlin (CET since Oct 25).
        let t0 = NOV_1_2026_UTC - 7200.0;
        let utc = cal("UTC", &[(0.0, t0)]);
        let berlin = cal("Europe/Berlin", &[(0.0, t0)]);
        assert_eq!(utc.month(0.0).label, "2026-10");
        assert_eq!(berlin.month(0.0).label, "2026-10");
        // 01:30 UTC on Nov 1: November in both; Berlin's began an hour before UTC's.
        let m = utc.month(3.5 * 3600.0);
        assert_eq!((m.label.as_str(), m.start), ("2026-11", 7200.0));
        let b = berlin.month(3.5 * 3600.0);
        assert_eq!((b.label.as_str(), b.start), ("2026-11", 3600.0));
        assert_eq!(b.end - b.start, 30.0 * 86_400.0);
        assert_ne!(utc.month(0.0).key, m.key);
        // December has 31 days.
        let dec = utc.month(utc.clock(NOV_1_2026_UTC + 31.0 * 86_400.0));
        assert_eq!(
            (dec.label.as_str(), dec.end - dec.start),
            ("2026-12", 31.0 * 86_400.0)
        );
    }

    #[test]
    fn moments_parse_as_dates_times_rfc3339_durations_and_seconds() {
        let c = cal("America/New_York", &[(0.0, NOV_1_2026_UTC)]);
        let now = 10.0 * 86_400.0;
        // Midnight in New York (EDT until Nov 1 02:00, so UTC-4 at midnight).
        assert_eq!(c.parse("2026-11-01", now), Ok(4.0 * 3600.0));
        assert_eq!(
            c.parse("2026-11-02T09:30", now),
            Ok(86_400.0 + 14.5 * 3600.0)
        );
        assert_eq!(
            c.parse("2026-11-02 09:30:00", now),
            c.parse("2026-11-02T09:30", now)
        );
        assert_eq!(c.parse("2026-11-01T01:00:00Z", now), Ok(3600.0));
        assert_eq!(c.parse("2026-11-01T01:00:00+01:00", now), Ok(0.0));
        assert_eq!(c.parse("24h", now), Ok(now - 86_400.0));
        assert_eq!(c.parse("86400", now), Ok(86_400.0));
        let e = c.parse("yesterday", now).unwrap_err();
        assert!(
            e.contains("`yesterday`") && e.contains("America/New_York"),
            "{e}"
        );
        assert!(c.parse("-5", now).is_err());
    }

    #[test]
    fn an_unknown_zone_is_named_with_a_suggestion() {
        let e = zone("Europe/Berln").unwrap_err();
        assert!(e.contains("did you mean `Europe/Berlin`"), "{e}");
        assert_eq!(zone("UTC").unwrap(), Tz::UTC);
    }
}
