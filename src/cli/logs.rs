//! `gantry logs ID [-f] [--node K] [--tail N]`: a job's stdout and stderr, from every node it
//! ran on (a multi-node job's lines marked `[node K]`) or one. The job's stdout lines go to
//! stdout and its stderr lines to stderr, so `2>/dev/null` and pipes work as with the job
//! itself; `-o json` prints one object per line (`node`, `stream`, `text`).

use super::remote::{id_arg, Target};
use super::{CliError, Output};
use serde_json::Value;
use std::io::Write;

#[derive(clap::Args)]
pub struct LogsArgs {
    /// The job's id.
    id: String,
    /// Keep printing what the job writes until it ends.
    #[arg(short, long)]
    follow: bool,
    /// Only this node's logs, by rank (0 is the head of a multi-node job).
    #[arg(long)]
    node: Option<usize>,
    /// Only the last N lines of each stream (default: everything).
    #[arg(long)]
    tail: Option<usize>,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

/// How long a follower waits between reads that found nothing new.
const FOLLOW_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

pub fn logs(t: &Target, a: LogsArgs) -> Result<(), CliError> {
    let id = id_arg(&a.id)?;
    let mut c = t.client()?;
    let mut base = format!("/v1/jobs/{id}/logs?");
    if let Some(k) = a.node {
        base.push_str(&format!("node={k}&"));
    }
    let mut after: Option<String> = None;
    loop {
        let mut path = base.clone();
        match (&after, a.tail) {
            (Some(cursors), _) => path.push_str(&format!("after={cursors}")),
            (None, Some(n)) => path.push_str(&format!("tail={n}")),
            (None, None) => path.push_str("from=start"),
        }
        // Complete lines only while the job may still write (the rest comes with its newline).
        let v: Value = c.call("GET", &format!("{path}&partial={}", !a.follow), None)?;
        let (printed, cursors) = print(&v, a.node.is_none(), a.output)?;
        after = Some(cursors);
        let is_final = v["final"].as_bool().unwrap_or(true);
        if printed > 0 {
            continue; // more may be waiting (reads are bounded)
        }
        if !a.follow {
            return Ok(());
        }
        if is_final {
            // The last line may lack its newline: read it now that none will follow.
            let path = format!(
                "{base}after={}&partial=true",
                after.clone().unwrap_or_default()
            );
            let v: Value = c.call("GET", &path, None)?;
            print(&v, a.node.is_none(), a.output)?;
            return Ok(());
        }
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// Prints one answer's lines; (how many, the cursors for the next read).
fn print(v: &Value, all_nodes: bool, output: Output) -> Result<(usize, String), CliError> {
    let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
    let gang = all_nodes && nodes.len() > 1;
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    let mut printed = 0;
    let mut cursors = Vec::new();
    for n in &nodes {
        let rank = n["rank"].as_u64().unwrap_or(0);
        cursors.push(n["cursor"].as_str().unwrap_or("0,0").to_string());
        if let Some(why) = n["error"].as_str() {
            let _ = writeln!(
                err,
                "gantry: node {rank} ({}): {why}",
                n["node"].as_str().unwrap_or("?")
            );
        }
        for l in n["lines"].as_array().into_iter().flatten() {
            printed += 1;
            let text = l["text"].as_str().unwrap_or("");
            let to_err = l["stream"] == "err";
            let line = match output {
                Output::Json => serde_json::json!({
                    "node": rank, "stream": l["stream"], "text": text
                })
                .to_string(),
                Output::Table if gang => format!("[node {rank}] {text}"),
                Output::Table => text.to_string(),
            };
            let w: &mut dyn Write = if to_err && output == Output::Table {
                &mut err
            } else {
                &mut out
            };
            if writeln!(w, "{line}").is_err() {
                // A closed pipe (`| head`): nothing more to print.
                return Err(CliError {
                    code: 0,
                    message: String::new(),
                });
            }
        }
    }
    let _ = out.flush();
    Ok((printed, cursors.join(";")))
}
