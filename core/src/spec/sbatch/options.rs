//! The `#SBATCH` lines of a script: the options sbatch takes, split and read as sbatch
//! reads them, with where each is written.

use crate::spec::SpecError;

/// An option `sbatch` takes: long name, short letter, whether it takes a value.
type Opt = (&'static str, Option<char>, bool);

/// The options gantry reads.
const READ: &[Opt] = &[
    ("job-name", Some('J'), true),
    ("nodes", Some('N'), true),
    ("gres", None, true),
    ("gpus-per-node", None, true),
    ("gpus", Some('G'), true),
    ("gpus-per-task", None, true),
    ("ntasks-per-node", None, true),
    ("ntasks", Some('n'), true),
    ("cpus-per-task", Some('c'), true),
    ("cpus-per-gpu", None, true),
    ("mem", None, true),
    ("mem-per-cpu", None, true),
    ("mem-per-gpu", None, true),
    ("time", Some('t'), true),
    ("signal", None, true),
    ("account", Some('A'), true),
    ("qos", Some('q'), true),
    ("export", None, true),
    ("chdir", Some('D'), true),
    ("array", Some('a'), true),
    ("dependency", Some('d'), true),
];

/// sbatch options gantry does not act on, with why.
const NOT_ACTED_ON: &[(&[Opt], &str)] = &[
    (
        &[
            ("partition", Some('p'), true),
            ("nodelist", Some('w'), true),
            ("exclude", Some('x'), true),
            ("constraint", Some('C'), true),
            ("reservation", None, true),
            ("clusters", Some('M'), true),
            ("exclusive", None, false),
            ("oversubscribe", Some('s'), false),
            ("contiguous", None, false),
            ("switches", None, true),
        ],
        "gantry chooses where the job runs",
    ),
    (
        &[
            ("output", Some('o'), true),
            ("error", Some('e'), true),
            ("input", Some('i'), true),
            ("open-mode", None, true),
        ],
        "gantry keeps the job's output: `gantry logs`",
    ),
    (
        &[
            ("mail-type", None, true),
            ("mail-user", None, true),
            ("comment", None, true),
            ("wckey", None, true),
            ("requeue", None, false),
            ("no-requeue", None, false),
            ("hold", Some('H'), false),
            ("begin", Some('b'), true),
            ("deadline", None, true),
            ("licenses", Some('L'), true),
            ("time-min", None, true),
            ("tmp", None, true),
            ("distribution", Some('m'), true),
            ("gpu-bind", None, true),
            ("gpu-freq", None, true),
            ("cpu-freq", None, true),
            ("mem-bind", None, true),
            ("hint", None, true),
            ("nice", None, true),
            ("priority", None, true),
            ("propagate", None, true),
            ("ntasks-per-core", None, true),
            ("ntasks-per-socket", None, true),
            ("ntasks-per-gpu", None, true),
            ("mincpus", None, true),
            ("sockets-per-node", None, true),
            ("cores-per-socket", None, true),
            ("threads-per-core", None, true),
            ("overcommit", Some('O'), false),
            ("no-kill", Some('k'), false),
            ("kill-on-invalid-dep", None, true),
            ("profile", None, true),
            ("acctg-freq", None, true),
            ("container", None, true),
            ("network", None, true),
            ("get-user-env", None, false),
            ("parsable", None, false),
            ("quiet", Some('Q'), false),
            ("verbose", Some('v'), false),
            ("wait", Some('W'), false),
            ("uid", None, true),
            ("gid", None, true),
            ("mcs-label", None, true),
            ("delay-boot", None, true),
            ("reboot", None, false),
            ("spread-job", None, false),
            ("use-min-nodes", None, false),
        ],
        "not acted on",
    ),
];

/// A word of a directive line and the column it starts at (1-based, in characters).
struct Word {
    col: usize,
    text: String,
}

/// The words of `line` from byte `from`, as sbatch splits them: whitespace between words,
/// single and double quotes grouping, an unquoted `#` starting a word ending the line.
fn words(line: &str, from: usize) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur: Option<Word> = None;
    let mut quote: Option<char> = None;
    for (i, ch) in line[from..].char_indices() {
        let col = line[..from + i].chars().count() + 1;
        match (quote, ch) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur
                .get_or_insert(Word {
                    col,
                    text: String::new(),
                })
                .text
                .push(c),
            (None, '"' | '\'') => {
                quote = Some(ch);
                cur.get_or_insert(Word {
                    col,
                    text: String::new(),
                });
            }
            (None, c) if c.is_whitespace() => out.extend(cur.take()),
            (None, '#') if cur.is_none() => break,
            (None, c) => cur
                .get_or_insert(Word {
                    col,
                    text: String::new(),
                })
                .text
                .push(c),
        }
    }
    out.extend(cur);
    out
}

/// One option as written: its long name (when sbatch knows it), the text as written, its
/// value, and where it is.
pub(super) struct Given {
    pub(super) name: Option<&'static str>,
    pub(super) written: String,
    pub(super) value: Option<String>,
    pub(super) line: usize,
    pub(super) col: usize,
}

fn find(long: Option<&str>, short: Option<char>) -> Option<(Opt, &'static str)> {
    let all = READ.iter().map(|o| (*o, "")).chain(
        NOT_ACTED_ON
            .iter()
            .flat_map(|(os, why)| os.iter().map(move |o| (*o, *why))),
    );
    for (o, why) in all {
        if long.is_some_and(|l| l == o.0) || (short.is_some() && short == o.1) {
            return Some((o, why));
        }
    }
    None
}

/// The options of the directives in `text`, in order; what gantry does not act on goes to
/// `ignored`.
pub(super) fn options(
    file: &str,
    text: &str,
    ignored: &mut Vec<String>,
) -> Result<Vec<Given>, SpecError> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate().skip(1) {
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        // sbatch reads directives up to the script's first command.
        if !t.starts_with('#') {
            break;
        }
        let Some(rest) = t.strip_prefix("#SBATCH") else {
            continue;
        };
        if !rest.is_empty() && !rest.starts_with(char::is_whitespace) {
            continue;
        }
        let from = line.len() - rest.len();
        let mut ws = words(line, from).into_iter().peekable();
        while let Some(w) = ws.next() {
            let (line_no, col) = (n + 1, w.col);
            let at = |message: String| SpecError {
                file: file.to_string(),
                line: line_no,
                col,
                message,
            };
            let (long, short, inline) = if let Some(l) = w.text.strip_prefix("--") {
                match l.split_once('=') {
                    Some((k, v)) => (Some(k.to_string()), None, Some(v.to_string())),
                    None => (Some(l.to_string()), None, None),
                }
            } else if let Some(s) = w.text.strip_prefix('-').filter(|s| !s.is_empty()) {
                let mut cs = s.chars();
                let c = cs.next();
                let r: String = cs.collect();
                let r = r.strip_prefix('=').map(str::to_string).unwrap_or(r);
                (None, c, (!r.is_empty()).then_some(r))
            } else {
                ignored.push(format!(
                    "`{}` (line {line_no}: not an option; sbatch reads options only)",
                    w.text
                ));
                continue;
            };
            let Some(((name, _, takes), why)) = find(long.as_deref(), short) else {
                ignored.push(format!(
                    "`{}` (line {line_no}: not an sbatch option gantry knows)",
                    w.text
                ));
                continue;
            };
            let value = match (takes, inline) {
                (_, Some(v)) => Some(v),
                (true, None) => {
                    let next = ws.next_if(|x| !x.text.starts_with('-'));
                    Some(next.map(|x| x.text).ok_or_else(|| {
                        at(format!("`{}` needs a value (`--{name}=VALUE`)", w.text))
                    })?)
                }
                (false, None) => None,
            };
            let written = match &value {
                Some(v) if long.is_some() && !w.text.contains('=') => format!("{} {v}", w.text),
                Some(v) if short.is_some() && w.text.len() == 2 => format!("{} {v}", w.text),
                _ => w.text.clone(),
            };
            if !why.is_empty() {
                ignored.push(format!("`{written}` (line {line_no}: {why})"));
                continue;
            }
            out.push(Given {
                name: Some(name),
                written,
                value,
                line: line_no,
                col,
            });
        }
    }
    Ok(out)
}
