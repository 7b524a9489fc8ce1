//! A small, strict CSV reader for trace files. Every error names file, line, column and field,
//! because a trace is usually fixed by hand in an editor.

use std::fmt;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub field: Option<String>,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}: ", self.file, self.line, self.col)?;
        if let Some(field) = &self.field {
            write!(f, "field `{field}`: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for TraceError {}

/// One data row: its line number and its fields with their starting columns (1-based).
#[derive(Debug, Clone)]
pub struct Row {
    pub line: usize,
    pub fields: Vec<(String, usize)>,
}

#[derive(Debug, Clone)]
pub struct Table {
    pub file: String,
    pub header: Vec<String>,
    pub rows: Vec<Row>,
}

impl Table {
    pub fn read(path: &Path) -> Result<Table, TraceError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|e| TraceError {
            file: file.clone(),
            line: 0,
            col: 0,
            field: None,
            message: format!("cannot read the file: {e}"),
        })?;
        Table::parse(&file, &bytes)
    }

    pub fn parse(file: &str, bytes: &[u8]) -> Result<Table, TraceError> {
        let err = |line: usize, col: usize, message: String| TraceError {
            file: file.to_string(),
            line,
            col,
            field: None,
            message,
        };
        let text = std::str::from_utf8(bytes).map_err(|e| {
            let before = &bytes[..e.valid_up_to()];
            let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
            let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
            err(line, col, "the file is not valid UTF-8".to_string())
        })?;
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let mut header: Option<Vec<String>> = None;
        let mut rows = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let raw = raw.strip_suffix('\r').unwrap_or(raw);
            if raw.trim().is_empty() {
                continue;
            }
            if let Some(col) = raw.find('"') {
                return Err(err(
                    line,
                    col + 1,
                    "quoted fields are not supported in trace files".to_string(),
                ));
            }
            let mut fields = Vec::new();
            let mut col = 1;
            for f in raw.split(',') {
                fields.push((f.trim().to_string(), col));
                col += f.chars().count() + 1;
            }
            match &header {
                None => {
                    let names: Vec<String> = fields
                        .into_iter()
                        .map(|(f, _)| f.to_ascii_lowercase())
                        .collect();
                    if let Some((pos, dup)) = names
                        .iter()
                        .enumerate()
                        .find(|(k, n)| names[..*k].contains(n))
                    {
                        return Err(err(
                            line,
                            pos + 1,
                            format!("column `{dup}` appears twice in the header"),
                        ));
                    }
                    header = Some(names);
                }
                Some(h) => {
                    if fields.len() != h.len() {
                        // Point just past the row's last character, where a field is missing.
                        return Err(err(
                            line,
                            col - 1,
                            format!(
                                "expected {} fields like the header, found {}",
                                h.len(),
                                fields.len()
                            ),
                        ));
                    }
                    rows.push(Row { line, fields });
                }
            }
        }
        let header = header.ok_or_else(|| {
            err(
                1,
                1,
                "the file is empty: expected a header line".to_string(),
            )
        })?;
        Ok(Table {
            file: file.to_string(),
            header,
            rows,
        })
    }

    /// Checks the header: every `required` column present, nothing outside `required` and
    /// `optional`. Returns a column lookup.
    pub fn columns(&self, required: &[&str], optional: &[&str]) -> Result<Columns, TraceError> {
        let err = |col: usize, message: String| TraceError {
            file: self.file.clone(),
            line: 1,
            col,
            field: None,
            message,
        };
        for name in required {
            if !self.header.iter().any(|h| h == name) {
                return Err(err(
                    1,
                    format!(
                        "missing column `{name}`; required columns: {}",
                        required.join(", ")
                    ),
                ));
            }
        }
        for (i, h) in self.header.iter().enumerate() {
            if !required.contains(&h.as_str()) && !optional.contains(&h.as_str()) {
                let mut allowed: Vec<&str> = required.to_vec();
                allowed.extend_from_slice(optional);
                return Err(err(
                    i + 1,
                    format!(
                        "unknown column `{h}`; allowed columns: {}",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        Ok(Columns {
            names: self.header.clone(),
        })
    }
}

#[derive(Debug, Clone)]
pub struct Columns {
    names: Vec<String>,
}

impl Columns {
    pub fn index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }
}

/// Reads fields of one row with errors that point at the field.
pub struct Fields<'a> {
    pub file: &'a str,
    pub row: &'a Row,
    pub columns: &'a Columns,
}

impl<'a> Fields<'a> {
    pub fn error(&self, name: &str, message: String) -> TraceError {
        let col = self.columns.index(name).map_or(1, |i| self.row.fields[i].1);
        TraceError {
            file: self.file.to_string(),
            line: self.row.line,
            col,
            field: Some(name.to_string()),
            message,
        }
    }

    pub fn text(&self, name: &str) -> Option<&'a str> {
        self.columns
            .index(name)
            .map(|i| self.row.fields[i].0.as_str())
    }

    /// A non-negative integer no larger than `max`.
    pub fn uint(&self, name: &str, max: u64) -> Result<u64, TraceError> {
        let text = self.text(name).unwrap_or("");
        let value: u64 = text.parse().map_err(|_| {
            let what = if text.is_empty() {
                "is empty".to_string()
            } else if text.starts_with('-') {
                format!("is negative ({text})")
            } else {
                format!("`{text}` is not a whole number")
            };
            self.error(name, format!("{what}; expected an integer in 0..={max}"))
        })?;
        if value > max {
            return Err(self.error(
                name,
                format!("{value} is out of range; expected at most {max}"),
            ));
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_ragged_rows_with_position() {
        let e = Table::parse("x.csv", b"a,b\n1,2\n3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.csv:3:2: expected 2 fields like the header, found 1"
        );
    }

    #[test]
    fn reports_unknown_and_missing_columns() {
        let t = Table::parse("x.csv", b"a,zz\n1,2\n").unwrap();
        let e = t.columns(&["a"], &["b"]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "x.csv:1:2: unknown column `zz`; allowed columns: a, b"
        );
        let e = t.columns(&["a", "c"], &[]).unwrap_err();
        assert!(e.to_string().contains("missing column `c`"), "{e}");
    }

    #[test]
    fn reports_negative_and_absurd_numbers_by_field() {
        let t = Table::parse("x.csv", b"a,b\n-5,99999\n").unwrap();
        let cols = t.columns(&["a", "b"], &[]).unwrap();
        let f = Fields {
            file: "x.csv",
            row: &t.rows[0],
            columns: &cols,
        };
        assert_eq!(
            f.uint("a", 10).unwrap_err().to_string(),
            "x.csv:2:1: field `a`: is negative (-5); expected an integer in 0..=10"
        );
        assert_eq!(
            f.uint("b", 10).unwrap_err().to_string(),
            "x.csv:2:4: field `b`: 99999 is out of range; expected at most 10"
        );
    }

    #[test]
    fn rejects_non_utf8_with_position() {
        let e = Table::parse("x.csv", b"a\nok\n\xff\n").unwrap_err();
        assert_eq!((e.line, e.col), (3, 1));
    }
}
