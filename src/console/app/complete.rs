//! `tab` in the `:` prompt: completes a command's name, then its argument (a team, a GPU
//! model, a priority class, a context, a job id) from what the console knows.

use super::View;
use crate::api::Snapshot;

/// The commands that are not a view's name, and what each takes.
const OTHER_COMMANDS: [(&str, &str); 9] = [
    ("gpus", "MODEL"),
    ("team", "NAME"),
    ("job", "ID"),
    ("prio", "CLASS"),
    ("reclaim", ""),
    ("submit", "[FILE]"),
    ("ctx", "[NAME]"),
    ("help", ""),
    ("q", ""),
];

/// The commands and what each takes, as the completion and an unknown command's answer list
/// them: each view by its name (with a filter where it takes one), then the rest.
pub fn commands() -> Vec<(&'static str, &'static str)> {
    View::ALL
        .into_iter()
        .map(|v| (v.name(), if v.takes_filter() { "[FILTER]" } else { "" }))
        .chain(OTHER_COMMANDS)
        .collect()
}

/// What the command line reads after `tab`, and the candidates when more than one is left.
pub fn complete(
    text: &str,
    contexts: &[(String, String)],
    snap: &Snapshot,
) -> (String, Option<String>) {
    let (verb, arg) = match text.split_once(' ') {
        None => {
            let names: Vec<String> = commands().iter().map(|(c, _)| c.to_string()).collect();
            return extend("", text, &names, true);
        }
        Some((v, a)) => (v, a.trim_start()),
    };
    let mut names: Vec<String> = match verb {
        "team" => snap.teams.iter().map(|t| t.name.clone()).collect(),
        "gpus" => snap.pools.iter().map(|p| p.model.clone()).collect(),
        "prio" => snap.queue_by_class.iter().map(|(c, _)| c.clone()).collect(),
        "ctx" => contexts.iter().map(|(n, _)| n.clone()).collect(),
        "job" => snap.jobs.iter().map(|j| j.id.to_string()).collect(),
        _ => return (text.to_string(), None),
    };
    names.sort();
    names.dedup();
    extend(&format!("{verb} "), arg, &names, false)
}

/// `typed` extended to the longest prefix its candidates share (and a space after a whole
/// command); the candidates listed when several remain.
fn extend(lead: &str, typed: &str, names: &[String], command: bool) -> (String, Option<String>) {
    let hits: Vec<&String> = names.iter().filter(|n| n.starts_with(typed)).collect();
    match hits.as_slice() {
        [] => (
            format!("{lead}{typed}"),
            Some(format!("nothing starts with `{typed}`")),
        ),
        [one] => {
            let space = if command && commands().iter().any(|(c, a)| c == one && !a.is_empty()) {
                " "
            } else {
                ""
            };
            (format!("{lead}{one}{space}"), None)
        }
        many => {
            let mut common = many[0].clone();
            for h in &many[1..] {
                while !h.starts_with(common.as_str()) {
                    common.pop();
                }
            }
            let shown: Vec<&str> = many.iter().take(12).map(|s| s.as_str()).collect();
            let more = if many.len() > 12 { " …" } else { "" };
            (
                format!("{lead}{common}"),
                Some(format!("{}{more}", shown.join("  "))),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_then_their_arguments_complete() {
        let mut snap = Snapshot::default();
        for name in ["ml-research", "ml-platform", "applied"] {
            snap.teams.push(crate::api::TeamRow {
                name: name.into(),
                ..Default::default()
            });
        }
        let ctx = vec![("prod".to_string(), "https://a".to_string())];
        assert_eq!(complete("rec", &ctx, &snap), ("reclaim".into(), None));
        assert_eq!(complete("pr", &ctx, &snap), ("prio ".into(), None));
        let (t, note) = complete("te", &ctx, &snap);
        assert_eq!(t, "team");
        assert_eq!(note.as_deref(), Some("teams  team"));
        let (t, note) = complete("team ml", &ctx, &snap);
        assert_eq!(t, "team ml-");
        assert_eq!(note.as_deref(), Some("ml-platform  ml-research"));
        assert_eq!(complete("team ap", &ctx, &snap).0, "team applied");
        assert_eq!(complete("ctx p", &ctx, &snap).0, "ctx prod");
        assert!(complete("zz", &ctx, &snap)
            .1
            .unwrap()
            .contains("nothing starts"));
    }

    /// Every view is a command that completes (`:services` was left out of the list the
    /// completion read, written apart from the views).
    #[test]
    fn every_view_is_a_command_that_completes() {
        let snap = Snapshot::default();
        for v in View::ALL {
            let name = v.name();
            let (t, note) = complete(&name[..name.len() - 1], &[], &snap);
            let offered = note.is_some_and(|n| n.split_whitespace().any(|c| c == name));
            assert!(t.starts_with(name) || offered, "{name}: {t}");
        }
        assert_eq!(complete("se", &[], &snap), ("services".into(), None));
    }
}
