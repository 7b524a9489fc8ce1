//! SkyPilot's lifecycle fields under `resources`: `job_recovery` (restarts after the job's own
//! failures) and `autostop` (the job's own idle window for gantry's reclaim), read and checked.

use super::task::{RawExitCodes, Reader};
use super::SpecError;

impl Reader<'_> {
    /// `job_recovery`'s counts, checked.
    pub(super) fn recovery(
        &self,
        path: &str,
        max: Option<i64>,
        codes: &Option<RawExitCodes>,
    ) -> Result<crate::spec::Recovery, SpecError> {
        let limit = i64::from(crate::spec::RESTARTS_MAX);
        let max = max.unwrap_or(0);
        if !(0..=limit).contains(&max) {
            return Err(self.err(
                &format!("{path}.max_restarts_on_errors"),
                format!("{max}: give 0 to {limit} restarts"),
            ));
        }
        let codes = match codes {
            None => Vec::new(),
            Some(RawExitCodes::One(c)) => vec![*c],
            Some(RawExitCodes::Many(c)) => c.clone(),
        };
        if let Some(bad) = codes.iter().find(|c| !(1..=255).contains(*c)) {
            return Err(self.err(
                &format!("{path}.recover_on_exit_codes"),
                format!("{bad} is not an exit code that means failure (1 to 255)"),
            ));
        }
        Ok(crate::spec::Recovery {
            max_restarts_on_errors: max as u32,
            recover_on_exit_codes: codes.into_iter().map(|c| c as i32).collect(),
        })
    }

    /// SkyPilot's `autostop` — `true` (5 minutes), `false`, minutes, a duration (`10m`,
    /// `1h`), or `{idle_minutes, down, wait_for, hook}` — as the job's own idle window for
    /// gantry's reclaim: the job is reclaimable once its GPUs sat idle that long, where that is
    /// sooner than the fleet's `[reclaim]` window (never later: the fleet's policy holds).
    pub(super) fn autostop(
        &mut self,
        path: &str,
        v: serde_yaml_ng::Value,
    ) -> Result<Option<f64>, SpecError> {
        use serde_yaml_ng::Value as V;
        let minutes = |r: &Self, key: &str, v: &V| -> Result<f64, SpecError> {
            let seconds = match v {
                V::Number(n) => n.as_f64().map(|m| m * 60.0),
                V::String(t) => match t.trim().parse::<f64>() {
                    Ok(m) => Some(m * 60.0),
                    Err(_) => super::values::parse_duration(t),
                },
                _ => None,
            };
            seconds
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| {
                    r.err(
                        key,
                        format!(
                            "`{}`: expected idle minutes (5), or a duration (10m, 1h)",
                            serde_yaml_ng::to_string(v).unwrap_or_default().trim()
                        ),
                    )
                })
        };
        let window = match &v {
            V::Bool(true) => Some(300.0),
            V::Bool(false) | V::Null => {
                self.ignored.push(format!(
                    "{path}: false: the fleet's idle reclaim still applies (`gantry reclaim`)"
                ));
                None
            }
            V::Mapping(m) => {
                const KEYS: [&str; 4] = ["idle_minutes", "down", "wait_for", "hook"];
                for k in m.keys() {
                    let k = k.as_str().unwrap_or("?");
                    if !KEYS.contains(&k) {
                        return Err(self.err(
                            path,
                            format!("unknown field `{k}` (allowed: {})", KEYS.join(", ")),
                        ));
                    }
                }
                if m.contains_key("down") {
                    self.ignored.push(format!("{path}.down: an idle job's GPUs are freed by reclaim; elastic pools give back the nodes left idle on their own"));
                }
                if m.contains_key("wait_for") || m.contains_key("hook") {
                    self.ignored.push(format!("{path}.wait_for/hook: gantry judges idleness by the job's GPUs' utilization"));
                }
                match m.get("idle_minutes") {
                    Some(v) => Some(minutes(self, &format!("{path}.idle_minutes"), v)?),
                    None => Some(300.0),
                }
            }
            other => Some(minutes(self, path, other)?),
        };
        Ok(window.map(|w| w.max(60.0)))
    }
}
