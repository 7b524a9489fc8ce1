//! One clock on every screen: the daemon's calendar. On a real fleet that is the wall clock in
//! the fleet's time zone; in the demo it is the simulated clock (running faster than the wall),
//! which the header labels as such. Event lines, the job detail and the header all read it, so
//! the same moment is written the same way everywhere (`gantry events` and `gantry job` too).

use crate::api::CalendarNow;
use chrono::{DateTime, FixedOffset};

fn parse(t: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(t).ok()
}

/// `UTC` for a zero offset, else the offset (`+01:00`).
fn zone(t: &DateTime<FixedOffset>) -> String {
    if t.offset().local_minus_utc() == 0 {
        "UTC".into()
    } else {
        t.format("%:z").to_string()
    }
}

/// The header's clock: `2026-11-28 05:41 UTC`, or `05:41 UTC` when `wide` is false; `sim `
/// before it for a simulated fleet. A daemon that sends no calendar gets its own clock's
/// `day N HH:MM`.
pub fn header(cal: &CalendarNow, now: f64, wide: bool, simulated: bool) -> String {
    let sim = if simulated { "sim " } else { "" };
    match parse(&cal.time) {
        Some(t) if wide => format!("{sim}{} {}", t.format("%Y-%m-%d %H:%M"), zone(&t)),
        Some(t) => format!("{sim}{} {}", t.format("%H:%M"), zone(&t)),
        None => {
            let t = now.max(0.0) as u64;
            format!(
                "{sim}day {} {:02}:{:02}",
                t / 86_400 + 1,
                t / 3600 % 24,
                t / 60 % 60
            )
        }
    }
}

/// A moment in a list (a job's events, when it was submitted): `05:41:07` on the day `today`
/// is (RFC 3339, the snapshot's calendar time), else `11-27 19:15`; a daemon that sends no
/// calendar time gets `day N HH:MM` of its clock.
pub fn moment(time: &str, at: f64, today: &str) -> String {
    match (parse(time), parse(today)) {
        (Some(t), Some(d)) if t.date_naive() == d.date_naive() => t.format("%H:%M:%S").to_string(),
        (Some(t), _) => t.format("%m-%d %H:%M").to_string(),
        (None, _) => {
            let t = at.max(0.0) as u64;
            format!(
                "day {} {:02}:{:02}",
                t / 86_400 + 1,
                t / 3600 % 24,
                t / 60 % 60
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cal(time: &str) -> CalendarNow {
        CalendarNow {
            time: time.into(),
            ..CalendarNow::default()
        }
    }

    #[test]
    fn the_header_says_the_calendars_time_and_labels_a_simulated_one() {
        let c = cal("2026-11-28T05:41:07Z");
        assert_eq!(header(&c, 0.0, true, false), "2026-11-28 05:41 UTC");
        assert_eq!(header(&c, 0.0, false, false), "05:41 UTC");
        assert_eq!(header(&c, 0.0, true, true), "sim 2026-11-28 05:41 UTC");
        let berlin = cal("2026-11-28T06:41:07+01:00");
        assert_eq!(header(&berlin, 0.0, false, false), "06:41 +01:00");
        // An older daemon: its own clock, as before.
        assert_eq!(
            header(&cal(""), 86_400.0 + 3_660.0, true, false),
            "day 2 01:01"
        );
    }

    #[test]
    fn a_moment_today_is_its_time_and_another_days_has_its_date() {
        let today = "2026-11-28T05:41:07Z";
        assert_eq!(moment("2026-11-28T01:02:03Z", 0.0, today), "01:02:03");
        assert_eq!(moment("2026-11-27T23:59:00Z", 0.0, today), "11-27 23:59");
        assert_eq!(moment("", 60.0, today), "day 1 00:01");
    }
}
