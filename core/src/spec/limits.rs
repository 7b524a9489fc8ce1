//! Input budgets for a job spec, checked before the YAML is loaded: a spec comes from anyone
//! holding a researcher token, and a loader that expands aliases, or whose cost grows with
//! the square of the nesting depth, lets one small document exhaust the daemon's memory or
//! hold its time. The check walks the document's events with a streaming parser
//! (`saphyr-parser`) and stops at the first budget exceeded, so its own cost is bounded by
//! the budgets, not by the input.

use saphyr_parser::{Event, Parser};

/// The largest spec accepted, in bytes (a task file is a few KiB; a long `run` script tens).
pub const MAX_SPEC_BYTES: usize = 128 * 1024;
/// Aliases (`*name`) a spec may use.
pub const MAX_ALIASES: usize = 64;
/// How deep mappings and sequences may nest.
pub const MAX_DEPTH: usize = 32;
/// YAML events (scalars, collection starts and ends) a spec may hold.
pub const MAX_EVENTS: usize = 50_000;

/// What went over budget, and where (1-based line and column).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverBudget {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

/// Checks `text` against the budgets. A document the streaming parser cannot read is passed
/// on: the loader reports the syntax error with its own position.
pub fn check(text: &str) -> Result<(), OverBudget> {
    if text.len() > MAX_SPEC_BYTES {
        return Err(OverBudget {
            line: 1,
            col: 1,
            message: format!(
                "the spec is {} bytes; the limit is {MAX_SPEC_BYTES} (a job spec is a few KiB: ship large files with `workdir`)",
                text.len()
            ),
        });
    }
    if plainly_within(text) {
        return Ok(());
    }
    walk(text)
}

/// The largest spec `plainly_within` decides from its bytes alone.
const PLAIN_BYTES: usize = 2 << 10;

/// True when no document of these bytes could exceed a budget, as one scan of them shows:
/// what most submissions are, and the streaming parse they skip cost a third of the spec's
/// whole parse (`gantry bench api`). Each level of nesting is a collection that has an
/// indicator of its own — a flow collection its `[` or `{`, a block sequence its first `-`,
/// a block mapping its first `:` or `?` — so these characters, counted wherever they stand,
/// bound the depth; every alias is written with a `*`; and a YAML event takes at least a
/// quarter of a byte on average (a null scalar comes with the indicator that implies it), so
/// 2 KiB hold far fewer than `MAX_EVENTS`. Checked against the walk by a property test.
fn plainly_within(text: &str) -> bool {
    const _: () = assert!(4 * PLAIN_BYTES + 16 < MAX_EVENTS);
    if text.len() > PLAIN_BYTES {
        return false;
    }
    let (mut levels, mut aliases) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'[' | b'{' | b'-' | b':' | b'?' => levels += 1,
            b'*' => aliases += 1,
            _ => {}
        }
    }
    levels < MAX_DEPTH && aliases <= MAX_ALIASES
}

/// The streaming walk: every event, against the budgets, until one is exceeded.
fn walk(text: &str) -> Result<(), OverBudget> {
    let (mut depth, mut aliases, mut events) = (0usize, 0usize, 0usize);
    for item in Parser::new_from_str(text) {
        let (event, span) = match item {
            Ok(e) => e,
            // The scanner reads ahead through flow collections and gives up past 255 levels,
            // before the parser has emitted the level that is too deep.
            Err(e) if e.info().contains("recursion limit") => {
                return Err(OverBudget {
                    line: e.marker().line(),
                    col: e.marker().col() + 1,
                    message: format!(
                        "nested more than {MAX_DEPTH} levels deep; a job spec needs a few"
                    ),
                })
            }
            Err(_) => return Ok(()),
        };
        let at = |message: String| OverBudget {
            line: span.start.line(),
            col: span.start.col() + 1,
            message,
        };
        events += 1;
        if events > MAX_EVENTS {
            return Err(at(format!(
                "the spec holds more than {MAX_EVENTS} values; a job spec needs far fewer"
            )));
        }
        match event {
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Err(at(format!(
                        "nested more than {MAX_DEPTH} levels deep; a job spec needs a few"
                    )));
                }
            }
            Event::MappingEnd | Event::SequenceEnd => depth = depth.saturating_sub(1),
            Event::Alias(_) => {
                aliases += 1;
                if aliases > MAX_ALIASES {
                    return Err(at(format!(
                        "more than {MAX_ALIASES} aliases (`*name`); write the values out instead"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::time::Instant;

    /// A valid document nesting one collection per kind, in order (0 a flow sequence, 1 a
    /// flow mapping, 2 a block sequence, 3 a block mapping; block kinds inside a flow one
    /// become flow) around an alias, so its depth is the list's length.
    fn nested(kinds: &[u8], indent: usize, in_flow: bool) -> String {
        let Some((&k, rest)) = kinds.split_first() else {
            return "*a".to_string();
        };
        let pad = " ".repeat(indent);
        match (k, in_flow) {
            (0, _) | (2, true) => format!("[{}]", nested(rest, indent, true)),
            (1, _) | (3, true) => format!("{{k: {}}}", nested(rest, indent, true)),
            (2, false) => format!("\n{pad}- {}", nested(rest, indent + 2, false)),
            _ => format!("\n{pad}k: {}", nested(rest, indent + 2, false)),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2_000))]
        /// What the byte scan lets through, the streaming walk passes too: nested documents
        /// around the depth budget, with aliases.
        #[test]
        fn what_the_scan_lets_through_the_walk_passes(
            kinds in proptest::collection::vec(0u8..4, 0..48),
            aliases in 0usize..80,
        ) {
            let refs = vec!["*a"; aliases].join(", ");
            let text = format!(
                "anchor: &a 1\nrefs: [{refs}]\nconfig: {}\n",
                nested(&kinds, 2, false)
            );
            if plainly_within(&text) {
                prop_assert!(walk(&text).is_ok(), "{text:?}: {:?}", walk(&text));
            }
        }
    }

    /// A short spec that nests 32 levels deep with few characters is still refused: the
    /// scan does not let it through.
    #[test]
    fn a_short_spec_nested_too_deep_still_meets_the_walk() {
        let text = format!("run: x\nconfig:\n  {}x\n", "- ".repeat(40));
        assert!(!plainly_within(&text));
        let err = check(&text).unwrap_err();
        assert!(err.message.contains("nested"), "{err:?}");
        let flow = format!("run: x\nconfig: {}", "[".repeat(40));
        assert!(check(&flow).unwrap_err().message.contains("nested"));
    }

    #[test]
    fn an_alias_bomb_is_refused_before_anything_is_expanded() {
        let big = "x".repeat(100_000);
        let refs = vec!["*a"; 2_000].join(", ");
        let text = format!("run: echo\nconfig:\n  a: &a \"{big}\"\n  b: [{refs}]\n");
        let t = Instant::now();
        let err = check(&text).unwrap_err();
        assert!(err.message.contains("aliases"), "{err:?}");
        assert_eq!(err.line, 4);
        assert!(t.elapsed().as_secs_f64() < 1.0);
    }

    #[test]
    fn deep_nesting_is_refused_at_the_first_level_too_deep() {
        let text = format!("run: x\nconfig: {}", "[".repeat(80_000));
        let t = Instant::now();
        let err = check(&text).unwrap_err();
        assert!(err.message.contains("nested"), "{err:?}");
        assert!(t.elapsed().as_secs_f64() < 1.0);
        assert_eq!(err.line, 2);
    }

    #[test]
    fn ordinary_specs_pass_and_broken_ones_are_left_to_the_loader() {
        check("name: a\nresources:\n  accelerators: H100:8\nrun: |\n  ls *.py\n").unwrap();
        check("run: [unclosed").unwrap();
        let shallow = format!("run: x\nconfig: {}", "[".repeat(20));
        check(&shallow).unwrap();
        let err = check(&"#".repeat(MAX_SPEC_BYTES + 1)).unwrap_err();
        assert!(err.message.contains("limit"));
    }
}
