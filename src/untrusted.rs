//! Text from outside gantry — a job's output, what a host's agent says, names users chose — made
//! safe to show and to keep: control characters escaped (a job must not retitle the operator's
//! terminal or move its cursor) and length bounded (a host must not fill the event log).

/// `s` with every control character written as its escape (`\u{1b}`, `\n`).
pub fn escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `escape`d and cut to at most `max` characters, saying how much was left out.
pub fn bounded(s: &str, max: usize) -> String {
    let escaped = escape(s);
    match escaped.char_indices().nth(max) {
        None => escaped,
        Some((cut, _)) => format!(
            "{}… ({} more characters)",
            &escaped[..cut],
            escaped[cut..].chars().count()
        ),
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
