//! Slurm's generic resources as slurmrestd writes them: `gpu:a100:4`, `gpu:4`,
//! `gpu:a100:6(IDX:0-5)`, `gpu:a100:0(IDX:N/A)`, `gpu:a100:2(S:0-1)`, several joined by commas
//! (`gpu:a100:4,shard:8`). Only GPUs matter to gantry; other kinds are skipped.

/// GPUs of one type on a node (or held by a job).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Gpus {
    /// The GRES type (`a100`), if the site names one.
    pub model: Option<String>,
    pub count: u32,
    /// Which GPUs (by index), where Slurm says (`IDX:0-5`).
    pub indices: Vec<u32>,
}

/// The GPUs in a GRES string, by type; an entry that does not parse is an error naming it.
pub fn parse(text: &str) -> Result<Vec<Gpus>, String> {
    let mut out = Vec::new();
    for entry in split_entries(text) {
        let entry = entry.trim();
        if entry.is_empty() || entry == "(null)" {
            continue;
        }
        let (head, detail) = match entry.split_once('(') {
            Some((h, d)) => (h, Some(d.trim_end_matches(')'))),
            None => (entry, None),
        };
        let mut parts = head.split(':');
        let kind = parts.next().unwrap_or_default();
        if kind != "gpu" {
            continue;
        }
        let rest: Vec<&str> = parts.collect();
        let (model, count) = match rest.as_slice() {
            [] => (None, 1),
            [n] if n.parse::<u32>().is_ok() => (None, n.parse().unwrap_or(0)),
            [m] => (Some(m.to_string()), 1),
            [m, n] => (
                Some(m.to_string()),
                n.parse()
                    .map_err(|_| format!("GRES `{entry}`: `{n}` is not a GPU count"))?,
            ),
            _ => return Err(format!("GRES `{entry}`: expected gpu[:TYPE][:COUNT]")),
        };
        let indices = match detail.and_then(|d| d.strip_prefix("IDX:")) {
            Some("N/A") | None => Vec::new(),
            Some(list) => indices(list).map_err(|e| format!("GRES `{entry}`: {e}"))?,
        };
        out.push(Gpus {
            model,
            count,
            indices,
        });
    }
    Ok(out)
}

/// How many GPUs, all types together.
pub fn count(gpus: &[Gpus]) -> u32 {
    gpus.iter().map(|g| g.count).sum()
}

/// Entries split on commas outside parentheses (`IDX:0,2-3` has commas of its own).
fn split_entries(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

/// `0-2,5` → [0, 1, 2, 5].
fn indices(list: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in list.split(',') {
        let num = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("`{s}` is not a GPU index"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (num(a)?, num(b)?);
                if b < a || b - a > 1024 {
                    return Err(format!("`{part}` is not an index range"));
                }
                out.extend(a..=b);
            }
            None => out.push(num(part)?),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_slurmrestd_writes() {
        let g = |model: Option<&str>, count, indices: Vec<u32>| Gpus {
            model: model.map(str::to_string),
            count,
            indices,
        };
        assert_eq!(parse("gpu:a100:4").unwrap(), [g(Some("a100"), 4, vec![])]);
        assert_eq!(parse("gpu:8").unwrap(), [g(None, 8, vec![])]);
        assert_eq!(parse("gpu").unwrap(), [g(None, 1, vec![])]);
        assert_eq!(
            parse("gpu:a100:6(IDX:0-5)").unwrap(),
            [g(Some("a100"), 6, (0..6).collect())]
        );
        assert_eq!(
            parse("gpu:a100:0(IDX:N/A)").unwrap(),
            [g(Some("a100"), 0, vec![])]
        );
        assert_eq!(
            parse("gpu:h100:2(IDX:0,3),gpu:a100:1(IDX:1),shard:8").unwrap(),
            [g(Some("h100"), 2, vec![0, 3]), g(Some("a100"), 1, vec![1])]
        );
        assert_eq!(
            parse("gpu:a100:2(S:0-1)").unwrap(),
            [g(Some("a100"), 2, vec![])]
        );
        assert!(parse("").unwrap().is_empty());
        assert!(parse("(null)").unwrap().is_empty());
        assert_eq!(count(&parse("gpu:a100:4,gpu:v100:2").unwrap()), 6);
        let e = parse("gpu:a100:x").unwrap_err();
        assert!(e.contains("`x` is not a GPU count"), "{e}");
        assert!(parse("gpu:a100:2(IDX:3-1)").is_err());
    }
}
