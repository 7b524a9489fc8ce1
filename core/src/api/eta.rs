//! A waiting job's start estimate (`gantry jobs`' ETA column, `gantry explain`): the daemon's
//! own scheduling cycle run forward from a copy of the present (`scheduler::forecast`).

use serde::{Deserialize, Serialize};

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Eta {
    /// Daemon time the estimate was made at (the present it ran forward from).
    pub made_s: f64,
    /// Daemon time it starts by the estimate; `None`: not within what was looked at, or never.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_s: Option<f64>,
    /// `at_s` on the calendar (RFC 3339 in the fleet's time zone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at: Option<String>,
    /// The likely range (daemon time): with the jobs ahead ending early, and late; `hi_s`
    /// `None` when, ending late, it did not start within what was looked at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lo_s: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hi_s: Option<f64>,
    /// It starts later than this daemon time, if ever: as far as the estimate looked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_than_s: Option<f64>,
    /// Why it will not start while things stay as they are (held, a pipeline, never fits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub never: Option<String>,
    /// What the estimate rests on: how the runs ahead of it were given their ends.
    pub basis: String,
}

impl Eta {
    /// The ETA column's text at daemon time `now`: `now` (starts at the next cycle),
    /// `~14:20` (the calendar's hour and minute, within a day), `~12-05 14:20`, `>3h`,
    /// `never: held`.
    pub fn short(&self, now: f64) -> String {
        if let Some(never) = &self.never {
            return format!("never: {never}");
        }
        if let (Some(at), Some(cal)) = (self.at_s, &self.at) {
            if at - now < 60.0 {
                return "now".to_string();
            }
            // RFC 3339: YYYY-MM-DDTHH:MM:SS…
            let day = cal.get(5..10).unwrap_or("");
            let hm = cal.get(11..16).unwrap_or(cal);
            return if at - now < 86_400.0 {
                format!("~{hm}")
            } else {
                format!("~{day} {hm}")
            };
        }
        match self.later_than_s {
            Some(t) => format!(">{}", span((t - now).max(0.0))),
            None => "?".to_string(),
        }
    }
}

impl Eta {
    /// When in words, or why not: what `gantry explain` and the console's detail say.
    pub fn when(&self) -> String {
        let from = |t: f64| span((t - self.made_s).max(0.0));
        if let Some(never) = &self.never {
            return format!("will not start while things stay as they are: {never}");
        }
        if let (Some(at), Some(cal)) = (self.at_s, &self.at) {
            let range = match (self.lo_s, self.hi_s) {
                (Some(lo), Some(hi)) if hi - lo >= 60.0 => {
                    format!(" (likely in {} to {})", from(lo), from(hi))
                }
                (Some(lo), None) => format!(" (likely in {} to later)", from(lo)),
                _ => String::new(),
            };
            return format!("estimated to start {cal}, in {}{range}", from(at));
        }
        match self.later_than_s {
            Some(t) => format!("not within the {} the estimate looked ahead", from(t)),
            None => "no estimate yet".to_string(),
        }
    }
}

/// `45m`, `3h`, `2d`.
pub fn span(s: f64) -> String {
    if s < 3600.0 {
        format!("{:.0}m", (s / 60.0).floor())
    } else if s < 86_400.0 {
        format!("{:.0}h", (s / 3600.0).floor())
    } else {
        format!("{:.0}d", (s / 86_400.0).floor())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_eta_column_says_when_or_why_not() {
        let at = |s: f64, cal: &str| Eta {
            made_s: 0.0,
            at_s: Some(s),
            at: Some(cal.to_string()),
            ..Eta::default()
        };
        assert_eq!(at(30.0, "2026-12-04T21:00:30Z").short(0.0), "now");
        assert_eq!(at(4000.0, "2026-12-04T22:06:40Z").short(0.0), "~22:06");
        assert_eq!(
            at(90_000.0, "2026-12-05T22:00:00+01:00").short(0.0),
            "~12-05 22:00"
        );
        let later = Eta {
            later_than_s: Some(3.5 * 3600.0),
            ..Eta::default()
        };
        assert_eq!(later.short(0.0), ">3h");
        let never = Eta {
            never: Some("held".into()),
            ..Eta::default()
        };
        assert_eq!(never.short(0.0), "never: held");
    }

    #[test]
    fn a_preview_made_again_says_what_changed_since_the_first() {
        let moved = |job, after: f64| StartMove {
            job,
            name: String::new(),
            before_s: Some(5000.0),
            after_s: Some(after),
            before: None,
            after: Some(format!("t{after}")),
        };
        let shown = WhatIf {
            action: "hold".into(),
            made_s: 100.0,
            starts: vec![moved(2, 1000.0), moved(3, 2000.0)],
            dollars_per_hour_after: 4.0,
            ..WhatIf::default()
        };
        // Made 20 s later: the same moves within a minute, the same change to the $/h (the
        // fleet's bill moved meanwhile, by a start elsewhere).
        let mut now = shown.clone();
        now.made_s = 120.0;
        now.starts[0].after_s = Some(1030.0);
        now.dollars_per_hour_before = 1.5;
        now.dollars_per_hour_after = 5.5;
        assert_eq!(shown.changed(&now), None);
        // Job 3 no longer moves, job 4 does, job 2 moves elsewhere, and the change to the $/h
        // differs.
        now.starts = vec![moved(2, 1500.0), moved(4, 110.0)];
        now.dollars_per_hour_after = 7.5;
        assert_eq!(
            shown.changed(&now).as_deref(),
            Some("job 2 starts t1500 instead; job 4 now starts now; job 3's start no longer moves; $/h +6.00 after the next cycle, not +4.00")
        );
    }
}

/// What an action would do, before it is taken (`--dry-run`, the console's confirmation): the
/// daemon's own cycle run forward with and without it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WhatIf {
    /// `hold`, `release`, `cancel`, `preempt`, `prio CLASS`.
    pub action: String,
    pub job: i64,
    /// The other jobs it is taken on, together (a preview of several marked jobs).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<i64>,
    /// Daemon time of the present it ran forward from.
    pub made_s: f64,
    /// Jobs whose start moves (by a minute or more, or from never to a time), soonest after
    /// first.
    pub starts: Vec<StartMove>,
    /// What the running jobs cost an hour after the next cycle, without and with the action.
    pub dollars_per_hour_before: f64,
    pub dollars_per_hour_after: f64,
    /// Teams whose GPUs after the next cycle change.
    pub teams: Vec<TeamMove>,
    /// How far ahead the runs looked (daemon time); what they rest on.
    pub looked_to_s: f64,
    pub basis: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StartMove {
    pub job: i64,
    pub name: String,
    /// Daemon time it starts without the action and with it (`None`: not within what was
    /// looked at); the same on the calendar.
    pub before_s: Option<f64>,
    pub after_s: Option<f64>,
    pub before: Option<String>,
    pub after: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TeamMove {
    pub team: String,
    pub gpus_before: f64,
    pub gpus_after: f64,
}

impl WhatIf {
    /// The preview in lines, as `--dry-run` prints it and the confirmation shows it.
    /// What `now`, a preview of the same action made later, says that this one did not: a job
    /// whose start moves now and did not, or no longer does, or moves to a time a minute or
    /// more away from what this one said; what it does to the $/h, a cent or more away.
    /// `None`: the same.
    pub fn changed(&self, now: &WhatIf) -> Option<String> {
        let close = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).abs() < 60.0,
            (a, b) => a.is_none() && b.is_none(),
        };
        let when = |m: &StartMove| match (m.after_s, &m.after) {
            (Some(t), _) if t - now.made_s < 60.0 => "now".to_string(),
            (Some(_), Some(c)) => c.clone(),
            _ => "not within the look".to_string(),
        };
        let mut said = Vec::new();
        for m in &now.starts {
            match self.starts.iter().find(|o| o.job == m.job) {
                None => said.push(format!("job {} now starts {}", m.job, when(m))),
                Some(o) if !close(o.after_s, m.after_s) => {
                    said.push(format!("job {} starts {} instead", m.job, when(m)))
                }
                Some(_) => {}
            }
        }
        for o in &self.starts {
            if !now.starts.iter().any(|m| m.job == o.job) {
                said.push(format!("job {}'s start no longer moves", o.job));
            }
        }
        // What the change does to the bill, not the bill itself: the fleet's $/h moves with
        // every start and end elsewhere, which is no reason to refuse the change.
        let delta = |w: &WhatIf| w.dollars_per_hour_after - w.dollars_per_hour_before;
        if (delta(self) - delta(now)).abs() >= 0.01 {
            said.push(format!(
                "$/h {:+.2} after the next cycle, not {:+.2}",
                delta(now),
                delta(self)
            ));
        }
        (!said.is_empty()).then(|| said.join("; "))
    }

    pub fn lines(&self) -> Vec<String> {
        let when = |s: Option<f64>, cal: &Option<String>| match (s, cal) {
            (Some(t), _) if t - self.made_s < 60.0 => "now".to_string(),
            (Some(t), Some(c)) => format!("{} (in {})", c, span(t - self.made_s)),
            _ => format!("not within {}", span(self.looked_to_s - self.made_s)),
        };
        let mut out = Vec::new();
        // A submission's own start comes first: it had none without it.
        let submitted = self.action == "submit";
        if submitted {
            match self.starts.iter().find(|m| m.job == self.job) {
                Some(m) => out.push(format!("it starts {}", when(m.after_s, &m.after))),
                None => out.push(format!(
                    "it does not start within {}",
                    span(self.looked_to_s - self.made_s)
                )),
            }
        }
        let others = || {
            self.starts
                .iter()
                .filter(move |m| !submitted || m.job != self.job)
        };
        if others().next().is_none() {
            out.push(if submitted {
                "no other job's start moves".to_string()
            } else {
                "no job's start moves".to_string()
            });
        }
        for m in others() {
            let verb = match (m.before_s, m.after_s) {
                (Some(b), Some(a)) if a < b => "sooner",
                (None, Some(_)) => "sooner",
                _ => "later",
            };
            out.push(format!(
                "job {} {}: starts {verb}: {} → {}",
                m.job,
                m.name,
                when(m.before_s, &m.before),
                when(m.after_s, &m.after)
            ));
        }
        out.push(format!(
            "$/h after the next cycle: ${:.2} → ${:.2}",
            self.dollars_per_hour_before, self.dollars_per_hour_after
        ));
        for t in &self.teams {
            out.push(format!(
                "team {}: {:.1} → {:.1} GPUs",
                t.team, t.gpus_before, t.gpus_after
            ));
        }
        out
    }
}
