//! `gantry logs ID [-f] [--node K] [--tail N]`: a job's stdout and stderr, from every node it
//! ran on (a multi-node job's lines marked `[node K]`) or one. The job's stdout lines go to
//! stdout and its stderr lines to stderr, so `2>/dev/null` and pipes work as with the job
//! itself; `-o json` prints one object per line (`node`, `stream`, `text`). Control characters
//! the job wrote are printed escaped unless `--raw`.

use super::remote::{id_arg, Target};
use super::{CliError, Output};
use gantry::api::LogsView;
use gantry::backend::logs::Stream;
use std::io::Write;

#[derive(clap::Args)]
pub struct LogsArgs {
    /// The job's id.
    #[arg(add = super::complete::job_ids())]
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
    /// Print the lines as the job wrote them, terminal escape sequences and all (by default
    /// control characters are shown escaped, `\u{1b}`, so a job cannot retitle or redraw
    /// the terminal they are printed on).
    #[arg(long)]
    raw: bool,
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
        let v: LogsView = c.call("GET", &format!("{path}&partial={}", !a.follow), None)?;
        let printed = print(&v, a.node.is_none(), a.output, a.raw)?;
        let cursors = v.cursors();
        if printed > 0 {
            after = Some(cursors);
            continue; // more may be waiting (reads are bounded)
        }
        if !a.follow {
            return Ok(());
        }
        if v.is_final {
            // The last line may lack its newline: read it now that none will follow.
            let path = format!("{base}after={cursors}&partial=true");
            let v: LogsView = c.call("GET", &path, None)?;
            print(&v, a.node.is_none(), a.output, a.raw)?;
            return Ok(());
        }
        after = Some(cursors);
        std::thread::sleep(FOLLOW_EVERY);
    }
}

/// Prints one answer's lines; how many.
fn print(v: &LogsView, all_nodes: bool, output: Output, raw: bool) -> Result<usize, CliError> {
    let gang = all_nodes && v.nodes.len() > 1;
    let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
    let mut printed = 0;
    for n in &v.nodes {
        if let Some(why) = &n.error {
            let _ = writeln!(
                err,
                "gantry: node {} ({}): {}",
                n.rank,
                gantry::untrusted::escape(&n.node),
                gantry::untrusted::escape(why)
            );
        }
        for l in &n.lines {
            printed += 1;
            let line = match output {
                Output::Json | Output::Yaml => super::record(
                    output,
                    &serde_json::json!({"node": n.rank, "stream": l.stream, "text": l.text}),
                )
                .map_err(CliError::usage)?,
                _ => {
                    let text = match raw {
                        true => l.text.clone(),
                        false => gantry::untrusted::terminal_line(&l.text),
                    };
                    match gang {
                        true => format!("[node {}] {text}", n.rank),
                        false => text,
                    }
                }
            };
            let w: &mut dyn Write = if l.stream == Stream::Err && !output.is_data() {
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
    Ok(printed)
}
