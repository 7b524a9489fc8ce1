//! `[calendar]` in the fleet file: the time zone whose calendar months budgets run by, and in
//! which dates given to `gantry report --since` and event times are read and said.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarSettings {
    /// An IANA time zone; UTC by default, as cloud providers' bills run.
    #[serde(default = "default_zone")]
    pub time_zone: String,
}

fn default_zone() -> String {
    "UTC".to_string()
}

impl Default for CalendarSettings {
    fn default() -> Self {
        CalendarSettings {
            time_zone: default_zone(),
        }
    }
}

impl CalendarSettings {
    /// The zone, or what is wrong with the name.
    pub fn zone(&self) -> Result<chrono_tz::Tz, String> {
        zone(&self.time_zone).map_err(|e| format!("calendar: time_zone {e}"))
    }
}

/// A time zone by its IANA name (`Europe/Berlin`, `UTC`), or what to write instead.
pub fn zone(name: &str) -> Result<chrono_tz::Tz, String> {
    name.parse::<chrono_tz::Tz>().map_err(|_| {
        let names: Vec<&str> = chrono_tz::TZ_VARIANTS.iter().map(|z| z.name()).collect();
        let hint = crate::spec::did_you_mean(name, &names)
            .map_or(String::new(), |s| format!("; did you mean `{s}`?"));
        format!(
            "`{}` is not an IANA time zone (e.g. UTC, Europe/Berlin, America/New_York){hint}",
            name.escape_debug()
        )
    })
}

#[cfg(test)]
mod tests {
    use crate::config::fleet::{parse, DEFAULT_FLEET};

    #[test]
    fn a_zone_that_is_not_ianas_is_refused_at_its_line() {
        let text = format!("{DEFAULT_FLEET}\n[calendar]\ntime_zone = \"Europe/Berln\"\n");
        let e = parse("fleet.toml", &text).unwrap_err();
        let line = text.lines().count();
        assert_eq!((e.line, e.col), (line, 1), "{e}");
        assert!(
            e.message
                .contains("calendar: time_zone `Europe/Berln` is not an IANA time zone")
                && e.message.contains("did you mean `Europe/Berlin`?"),
            "{e}"
        );
        let ok = format!("{DEFAULT_FLEET}\n[calendar]\ntime_zone = \"Asia/Tokyo\"\n");
        assert_eq!(
            parse("fleet.toml", &ok).unwrap().calendar.time_zone,
            "Asia/Tokyo"
        );
    }
}
