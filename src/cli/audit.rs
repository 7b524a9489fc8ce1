//! `gantry history`: finished jobs from the journal with each run — where, when, how it
//! ended, what it cost — as Slurm's `sacct` lists them; and the runs table `gantry job`
//! prints.

use super::remote::Target;
use super::{CliError, Output};
use gantry::api::HistoryJob;
use gantry::api::RunRecord;
use gantry::client::http::encode;
use gantry::console::app::escape;

#[derive(Clone, Debug, clap::Args)]
pub struct HistoryArgs {
    /// Jobs whose last change (their end) is after this: a date (2026-11-01) or time in the
    /// fleet's time zone, RFC 3339, a duration before now (24h, 7d), or seconds on the
    /// daemon's clock. Default: the beginning.
    #[arg(long)]
    since: Option<String>,
    /// … and before this (same forms). Default: now.
    #[arg(long)]
    until: Option<String>,
    #[arg(long)]
    team: Option<String>,
    /// Submitted by this user (`me`: you).
    #[arg(short, long)]
    user: Option<String>,
    /// State(s), comma-separated (default: completed, failed, cancelled).
    #[arg(long)]
    state: Option<String>,
    /// At most this many jobs, newest first.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Skip this many (the next page: --offset 100).
    #[arg(long, default_value_t = 0)]
    offset: usize,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

pub fn history(t: &Target, a: HistoryArgs) -> Result<(), CliError> {
    if let Some(s) = &a.state {
        for one in s.split(',') {
            if one.trim().parse::<gantry::api::JobState>().is_err() {
                return Err(CliError::usage(format!(
                    "--state {}: expected pending, held, running, preempting, completed, failed or cancelled",
                    one.trim()
                )));
            }
        }
    }
    let mut path = format!("/v1/history?limit={}&offset={}", a.limit, a.offset);
    let user = super::remote::user_of(t, a.user.clone())?;
    for (k, v) in [
        ("since", &a.since),
        ("until", &a.until),
        ("team", &a.team),
        ("state", &a.state),
        ("user", &user),
    ] {
        if let Some(v) = v {
            path.push_str(&format!("&{k}={}", encode(v)));
        }
    }
    let jobs: Vec<HistoryJob> = t.client()?.call("GET", &path, None)?;
    if a.output.is_data() {
        return super::print_as(a.output, &jobs).map_err(CliError::usage);
    }
    println!(
        "{:>6} {:<20} {:<12} {:<10} {:<20} {:>9}  RUNS: NODES, START → END, HOW IT ENDED",
        "ID", "NAME", "TEAM", "STATE", "ENDED", "COST"
    );
    for j in &jobs {
        println!(
            "{:>6} {:<20} {:<12} {:<10} {:<20} {:>9}",
            j.id,
            cut(&escape(j.name.as_deref().unwrap_or("")), 20),
            cut(&escape(&j.team), 12),
            j.state.name(),
            j.ended,
            format!("${:.2}", j.cost_usd)
        );
        for r in &j.runs {
            println!("{:>8}{}", "", run_line(r, a.output == Output::Wide));
        }
    }
    if jobs.is_empty() {
        println!("(no jobs match)");
    }
    Ok(())
}

/// One run in a line (`client::run_line`).
pub fn run_line(r: &RunRecord, wide: bool) -> String {
    gantry::console::runs::run_line(r, wide)
}

fn cut(s: &str, n: usize) -> String {
    gantry::console::table::cut(s, n).into_owned()
}
