//! The daemon's past: `gantry events` (the event log, `-f` to follow it) and `gantry report`
//! (the bill for a window, by team, project or job).

use super::remote::{id_arg, Target};
use super::table::cell;
use super::{CliError, Output};
use gantry::api::EventRecord;

pub fn events(
    t: &Target,
    follow: bool,
    job: Option<String>,
    limit: usize,
    output: Output,
) -> Result<(), CliError> {
    let mut c = t.client()?;
    let mut path = format!("/v1/events?limit={limit}");
    if let Some(j) = &job {
        path.push_str(&format!("&job={}", id_arg(j)?));
    }
    let print = |e: &EventRecord| -> Result<(), CliError> {
        match output {
            Output::Json | Output::Yaml => super::print_record(output, e)?,
            Output::Table | Output::Wide => println!(
                "{} {}{}",
                e.time,
                e.job.map_or(String::new(), |j| format!("job {j} ")),
                gantry::console::app::escape(&e.detail)
            ),
        }
        Ok(())
    };
    let list: Vec<EventRecord> = c.call("GET", &path, None)?;
    let mut last = -1;
    for e in &list {
        print(e)?;
        last = last.max(e.seq);
    }
    if !follow {
        return Ok(());
    }
    // Following: each change the stream carries that has new events is read back from the
    // journal, so what follows is printed as what came before (its time, its job filter).
    let mut reader = t.client()?;
    let mut failed = None;
    // As many as a busy second may bring.
    let follow_path = path.replacen(&format!("limit={limit}"), "limit=1000", 1);
    c.follow("/v1/events/stream", |event, data| {
        if event != "delta" {
            return true;
        }
        let news = serde_json::from_str::<gantry::api::SnapshotDelta>(data)
            .is_ok_and(|d| !d.events_new.is_empty());
        if !news {
            return true;
        }
        let list: Vec<EventRecord> = match reader.call("GET", &follow_path, None) {
            Ok(l) => l,
            Err(e) => {
                failed = Some(CliError::from(e));
                return false;
            }
        };
        let seen = last;
        for e in list.iter().filter(|e| e.seq > seen) {
            if print(e).is_err() {
                return false;
            }
            last = last.max(e.seq);
        }
        true
    })?;
    failed.map_or(Ok(()), Err)
}

/// How `gantry report` prints.
#[derive(Clone, Copy, Debug, clap::ValueEnum, PartialEq, Eq)]
pub enum ReportFormat {
    Table,
    Csv,
    Json,
    Yaml,
}

/// A CSV field, quoted when it must be.
fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

pub fn report(
    t: &Target,
    since: Option<String>,
    until: Option<String>,
    by: &str,
    format: ReportFormat,
) -> Result<(), CliError> {
    let mut path = format!("/v1/report?by={}", gantry::client::http::encode(by));
    for (k, v) in [("since", &since), ("until", &until)] {
        if let Some(v) = v {
            path.push_str(&format!("&{k}={}", gantry::client::http::encode(v)));
        }
    }
    let r: gantry::api::Report = t.client()?.call("GET", &path, None)?;
    match format {
        ReportFormat::Json => super::print_json(&r).map_err(CliError::usage),
        ReportFormat::Yaml => super::print_as(Output::Yaml, &r).map_err(CliError::usage),
        ReportFormat::Csv => {
            println!("key,team,spend_usd,gpu_hours,on_demand_usd,spot_usd,reserved_usd,runs");
            for row in &r.rows {
                println!(
                    "{},{},{:.2},{:.3},{:.2},{:.2},{:.2},{}",
                    csv_field(&row.key),
                    csv_field(&row.team),
                    row.spend_usd,
                    row.gpu_hours,
                    row.on_demand_usd,
                    row.spot_usd,
                    row.reserved_usd,
                    row.runs
                );
            }
            Ok(())
        }
        ReportFormat::Table => {
            println!(
                "{}spend from {} to {}, by {}",
                if r.simulated { "SIMULATED " } else { "" },
                r.since_time,
                r.until_time,
                by
            );
            // Grouped by team, the key is the team.
            let team_col = |t: &str| {
                if by == "team" {
                    String::new()
                } else {
                    format!(" {}", cell(t, 14))
                }
            };
            println!(
                "{:<20}{} {:>12} {:>10} {:>11} {:>11} {:>11} {:>5}",
                by.to_uppercase(),
                team_col("TEAM"),
                "SPEND $",
                "GPU-H",
                "ON-DEMAND $",
                "SPOT $",
                "RESERVED $",
                "RUNS"
            );
            for row in &r.rows {
                println!(
                    "{}{} {:>12.2} {:>10.1} {:>11.2} {:>11.2} {:>11.2} {:>5}",
                    cell(&row.key, 20),
                    team_col(&row.team),
                    row.spend_usd,
                    row.gpu_hours,
                    row.on_demand_usd,
                    row.spot_usd,
                    row.reserved_usd,
                    row.runs
                );
            }
            println!(
                "{:<20}{} {:>12.2} {:>10.1}",
                "TOTAL",
                team_col(""),
                r.total_usd,
                r.total_gpu_hours
            );
            if !r.queues.is_empty() {
                println!();
                println!("queues: the jobs submitted in the window — wait for the first start, and preempted runs");
                println!(
                    "{} {} {:>6} {:>7} {:>9} {:>9} {:>9} {:>6} {:>10}",
                    cell("TEAM", 14),
                    cell("CLASS", 11),
                    "JOBS",
                    "STARTED",
                    "WAIT AVG",
                    "P50",
                    "P90",
                    "RUNS",
                    "PREEMPTED"
                );
                for q in &r.queues {
                    println!(
                        "{} {} {:>6} {:>7} {:>9} {:>9} {:>9} {:>6} {:>5} {:>3.0}%",
                        cell(&q.team, 14),
                        cell(&q.class, 11),
                        q.jobs,
                        q.started,
                        gantry::console::app::hm(q.wait_mean_s),
                        gantry::console::app::hm(q.wait_p50_s),
                        gantry::console::app::hm(q.wait_p90_s),
                        q.runs,
                        q.preempted,
                        q.preemption_rate * 100.0
                    );
                }
            }
            Ok(())
        }
    }
}
