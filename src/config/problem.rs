//! What a pool's own checks (its backend's table, its topology) found wrong, and the field it
//! is about: the fleet file's error then points at the line that writes that field
//! (`fleet.toml:14:1: … [pools.ec2] image = "x" is not an AMI id`), not at the pool's header
//! twenty lines above. A problem that is about the pool as a whole names no field.

/// One thing wrong with a pool.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// The field it is about: `hosts` in the pool's own table, `ec2.image` in `[pools.ec2]`.
    pub field: Option<&'static str>,
    pub message: String,
}

impl Problem {
    /// A problem with `field` (`"ec2.zones"`).
    pub fn at(field: &'static str, message: String) -> Problem {
        Problem {
            field: Some(field),
            message,
        }
    }
}

/// A problem with the pool as a whole.
impl From<String> for Problem {
    fn from(message: String) -> Problem {
        Problem {
            field: None,
            message,
        }
    }
}

/// A pool's check: nothing wrong, or the first problem.
pub type Checked = Result<(), Problem>;

/// Where pool `index` (its `[[pools]]` table, counted from 0) writes `field` (`hosts`, or
/// `ec2.image` in its `[pools.ec2]` table): the line and column of the key, or of the table
/// it is in when the key is not written there (a default, an inline table), or of the pool's
/// header.
pub fn field_position(text: &str, index: usize, field: &str) -> (usize, usize) {
    let header = super::fleet::table_position(text, "pools", index);
    let Some(start) = text.match_indices("[[pools]]").nth(index).map(|(o, _)| o) else {
        return header;
    };
    // The pool's text: up to the next array table (another pool, a team).
    let pool: Vec<(usize, &str)> = lines_from(text, start)
        .skip(1)
        .take_while(|(_, l)| !l.trim_start().starts_with("[["))
        .collect();
    let own = table_body(&pool);
    let found = match field.split_once('.') {
        // In the pool's own table, or a table of its own (`ssh`: `[pools.ssh]`).
        None => key_in(&own, field).or_else(|| subtable(&pool, field).map(|i| pool[i].0)),
        Some((table, key)) => match subtable(&pool, table) {
            Some(i) => key_in(&table_body(&pool[i + 1..]), key).or(Some(pool[i].0)),
            // Not a table of its own: an inline one (`ec2 = { … }`) is pointed at.
            None => key_in(&own, table),
        },
    };
    found.map_or(header, |o| super::fleet::position(text, o))
}

/// The lines of a table, up to the next table's header.
fn table_body<'a>(lines: &[(usize, &'a str)]) -> Vec<(usize, &'a str)> {
    lines
        .iter()
        .take_while(|(_, l)| !l.trim_start().starts_with('['))
        .copied()
        .collect()
}

/// Where in the pool's lines its `[pools.NAME]` table starts.
fn subtable(pool: &[(usize, &str)], name: &str) -> Option<usize> {
    let header = format!("[pools.{name}]");
    pool.iter().position(|(_, l)| l.trim() == header)
}

/// Each line from `start` on, with its offset in the text.
fn lines_from(text: &str, start: usize) -> impl Iterator<Item = (usize, &str)> {
    let mut at = start;
    text[start..].split_inclusive('\n').map(move |l| {
        let o = at;
        at += l.len();
        (o, l.trim_end_matches(['\n', '\r']))
    })
}

/// The offset of the line in `lines` that sets `key` (`key =`, `key=`, quoted or not), at the
/// key itself.
fn key_in(lines: &[(usize, &str)], key: &str) -> Option<usize> {
    lines.iter().find_map(|(o, l)| {
        let indent = l.len() - l.trim_start().len();
        let rest = l.trim_start();
        let rest = rest
            .strip_prefix(key)
            .or_else(|| rest.strip_prefix(&format!("\"{key}\"")))?;
        rest.trim_start().starts_with('=').then_some(o + indent)
    })
}

#[cfg(test)]
mod tests {
    use super::field_position;

    const FILE: &str = r#"[[teams]]
name = "ml"

[[pools]]
name = "a"
hosts = ["x"]

[[pools]]
name = "b"
  hosts  = ["y"]
zone = "z"

[pools.ec2]
image = "ami-1"
"zones" = ["z"]

[pools.ssh]
user = "u"

[[pools]]
name = "c"
ec2 = { image = "x" }
"#;

    #[test]
    fn a_field_is_found_in_its_own_pools_table_and_nowhere_else() {
        assert_eq!(field_position(FILE, 0, "hosts"), (6, 1));
        assert_eq!(field_position(FILE, 1, "hosts"), (10, 3));
        assert_eq!(field_position(FILE, 1, "ec2.image"), (14, 1));
        assert_eq!(field_position(FILE, 1, "ec2.zones"), (15, 1));
        // A key of a subtable is not the pool's own.
        assert_eq!(field_position(FILE, 1, "image"), (8, 1));
        // Not written: the table it would be in, or the pool.
        assert_eq!(field_position(FILE, 1, "ec2.subnets"), (13, 1));
        assert_eq!(field_position(FILE, 1, "lambda.fleet"), (8, 1));
        assert_eq!(field_position(FILE, 0, "zone"), (4, 1));
        // An inline table is pointed at as a whole.
        assert_eq!(field_position(FILE, 2, "ec2.image"), (22, 1));
        assert_eq!(field_position(FILE, 9, "hosts"), (1, 1));
    }
}
