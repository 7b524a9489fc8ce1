//! Text from outside gantry — a job's output, what a host's agent says, names users chose — made
//! safe to show and to keep: control characters escaped (a job must not retitle the operator's
//! terminal or move its cursor) and length bounded (a host must not fill the event log).

/// `s` with every control character written as its escape (`\u{1b}`, `\n`).
pub fn escape(s: &str) -> String {
    escaped(s).collect()
}

/// The characters of `s`, escaped.
fn escaped(s: &str) -> impl Iterator<Item = char> + '_ {
    s.chars().flat_map(|c| {
        let (plain, escape) = match c.is_control() {
            true => (None, Some(c.escape_default())),
            false => (Some(c), None),
        };
        plain.into_iter().chain(escape.into_iter().flatten())
    })
}

/// `escape`d and cut to at most `max` characters, saying how much was left out (a host's
/// megabytes are counted, never copied).
pub fn bounded(s: &str, max: usize) -> String {
    let mut chars = escaped(s);
    let kept: String = chars.by_ref().take(max).collect();
    match chars.count() {
        0 => kept,
        more => format!("{kept}… ({more} more characters)"),
    }
}

/// A line of a job's output for a terminal: control characters escaped, except the tab (which
/// moves nothing but the cursor along its own line).
pub fn terminal_line(s: &str) -> String {
    s.split('\t').map(escape).collect::<Vec<_>>().join("\t")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_text_is_cut() {
        assert_eq!(escape("a\u{1b}]0;pwned\u{7}b"), "a\\u{1b}]0;pwned\\u{7}b");
        assert_eq!(bounded("abcdef", 3), "abc… (3 more characters)");
        assert_eq!(bounded("abc", 3), "abc");
        assert_eq!(bounded("é\u{1b}x", 2), "é\\… (6 more characters)");
        assert_eq!(terminal_line("a\tb\u{1b}[2J"), "a\tb\\u{1b}[2J");
    }
}
