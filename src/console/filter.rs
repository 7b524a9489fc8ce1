//! The console's `/` filter: a case-insensitive regex over a row's text, `!` in front to keep
//! the rows that do not match, or `field=regex` on one column of the Jobs view.

use crate::api::JobRow;
use regex_lite::{Regex, RegexBuilder};

/// Job columns a filter may name.
pub const JOB_FIELDS: [&str; 10] = [
    "id",
    "name",
    "team",
    "class",
    "state",
    "gpus",
    "detail",
    "cost",
    "user",
    "experiment",
];

#[derive(Clone, Debug)]
pub struct Filter {
    /// What the user typed, shown in the view's title.
    pub text: String,
    invert: bool,
    field: Option<&'static str>,
    re: Regex,
}

impl Filter {
    /// Parses `[!][field=]regex`; the error says what was wrong.
    pub fn parse(text: &str) -> Result<Filter, String> {
        let (invert, rest) = match text.strip_prefix('!') {
            Some(r) => (true, r),
            None => (false, text),
        };
        let (field, pattern) = match rest.split_once('=') {
            Some((f, p)) if !f.is_empty() && f.chars().all(|c| c.is_ascii_alphabetic()) => {
                let f = f.to_ascii_lowercase();
                let known = JOB_FIELDS.iter().find(|k| **k == f).ok_or_else(|| {
                    format!("filter: no field `{f}`; fields: {}", JOB_FIELDS.join(", "))
                })?;
                (Some(*known), p)
            }
            _ => (None, rest),
        };
        let re = RegexBuilder::new(pattern)
            .case_insensitive(true)
            .build()
            .map_err(|e| format!("filter `{pattern}`: {e}"))?;
        Ok(Filter {
            text: text.to_string(),
            invert,
            field,
            re,
        })
    }

    /// For rows that are one line of text (pools, events); a field name never matches here.
    pub fn matches_text(&self, text: &str) -> bool {
        let hit = self.field.is_none() && self.re.is_match(text);
        hit != self.invert
    }

    pub fn matches_job(&self, j: &JobRow) -> bool {
        let hit = match self.field {
            Some("id") => self.re.is_match(&j.id.to_string()),
            Some("name") => self.re.is_match(&j.name),
            Some("team") => self.re.is_match(&j.team),
            Some("class") => self.re.is_match(&j.class),
            Some("state") => self.re.is_match(&j.state),
            Some("gpus") => self.re.is_match(&j.gpus),
            Some("detail") => self.re.is_match(&j.detail),
            Some("cost") => self.re.is_match(&format!("{:.2}", j.cost_usd)),
            Some("user") => self.re.is_match(j.user.as_deref().unwrap_or("")),
            Some("experiment") => self.re.is_match(j.experiment.as_deref().unwrap_or("")),
            _ => [&j.name, &j.team, &j.class, &j.state, &j.gpus, &j.detail]
                .iter()
                .any(|s| self.re.is_match(s)),
        };
        hit != self.invert
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, team: &str, state: &str) -> JobRow {
        JobRow {
            id: 7,
            name: name.into(),
            team: team.into(),
            state: state.into(),
            ..JobRow::default()
        }
    }

    #[test]
    fn text_fields_and_inversion() {
        let a = job("llama-pretrain-3", "ml-research", "running");
        let b = job("notebook-9", "applied", "pending");
        let f = Filter::parse("LLAMA").unwrap();
        assert!(f.matches_job(&a) && !f.matches_job(&b));
        let f = Filter::parse("team=^applied$").unwrap();
        assert!(!f.matches_job(&a) && f.matches_job(&b));
        let f = Filter::parse("!state=run").unwrap();
        assert!(!f.matches_job(&a) && f.matches_job(&b));
        let f = Filter::parse("id=^7$").unwrap();
        assert!(f.matches_job(&a));
        assert!(Filter::parse("h100")
            .unwrap()
            .matches_text("aws/p5-spot H100 spot"));
        assert!(!Filter::parse("team=x").unwrap().matches_text("team=x"));
    }

    #[test]
    fn mistakes_say_what_is_wrong() {
        let e = Filter::parse("tema=ml").unwrap_err();
        assert!(e.contains("no field `tema`") && e.contains("team"), "{e}");
        let e = Filter::parse("(unclosed").unwrap_err();
        assert!(e.starts_with("filter `(unclosed`:"), "{e}");
        // A URL-like `=` after non-letters is part of the pattern, not a field.
        assert!(Filter::parse("a-b=c").is_ok());
    }
}
