//! The commands that talk to a running daemon about jobs and teams: jobs, job, explain,
//! cancel, preempt, hold, release, prio, teams, reclaim (submit: `submit`; the fleet: `fleet`;
//! tokens: `token`; events and report: `history`). Each prints a table or JSON (`--output
//! json`, the daemon's own JSON) and exits with a code that says what went wrong.

use super::table::{cell, width};
use super::{print_as, CliError, Output};
use gantry::api::{JobRow, JobState, TeamRow};
use gantry::client::http::{encode, ClientError, Endpoint, HttpClient};
use gantry::console::app::hm;
use gantry::scheduler::reclaim::ReclaimPlan;
use serde_json::Value;

/// How to reach the daemon.
pub struct Target {
    pub connect: Option<String>,
    pub token: Option<String>,
    pub tls_fingerprint: Option<String>,
}

impl Target {
    /// The daemon's address (`--connect`, else the default socket), its certificate pinned
    /// where `--tls-fingerprint` says; warns on stderr when a token would cross a network
    /// unencrypted.
    pub fn endpoint(&self) -> Result<Endpoint, CliError> {
        let endpoint = match &self.connect {
            Some(c) => Endpoint::parse(c).map_err(CliError::usage)?,
            None => Endpoint::Unix(gantry::config::paths::from_env().socket),
        };
        let endpoint = endpoint
            .pinned(self.tls_fingerprint.as_deref())
            .map_err(CliError::usage)?;
        if let Some(warning) = endpoint.cleartext_warning() {
            eprintln!("{warning}");
        }
        Ok(endpoint)
    }

    /// Whether the daemon takes this user's files only as bytes sent to it (`gantry submit`
    /// packs the workdir and local mounts as this user and ships them): over TCP, and on a
    /// socket that is not this user's own daemon's (a root daemon shared through a group
    /// socket), since a daemon opens no path for anyone but its own user.
    pub fn ships_files(&self) -> bool {
        use std::os::unix::fs::MetadataExt;
        match self
            .connect
            .as_deref()
            .map(Endpoint::parse)
            .unwrap_or_else(|| Ok(Endpoint::Unix(gantry::config::paths::from_env().socket)))
        {
            Ok(Endpoint::Unix(socket)) => std::fs::metadata(&socket)
                // SAFETY: getuid has no preconditions.
                .is_ok_and(|m| m.uid() != unsafe { libc::getuid() }),
            Ok(_) => true,
            Err(_) => false,
        }
    }

    pub fn client(&self) -> Result<HttpClient, CliError> {
        Ok(HttpClient::new(self.endpoint()?, self.token.clone()))
    }
}

pub(super) fn print_value_as(output: Output, v: &Value) -> Result<(), CliError> {
    super::print_as(output, v).map_err(CliError::usage)
}

/// `--user`: `me` is who the daemon takes this client for (`GET /v1/whoami`).
pub fn user_of(t: &Target, user: Option<String>) -> Result<Option<String>, CliError> {
    match user.as_deref() {
        Some("me") => {
            let who: gantry::api::WhoAmI = t.client()?.call("GET", "/v1/whoami", None)?;
            match who.user {
                Some(u) => Ok(Some(u)),
                None => Err(CliError::usage(
                    "--user me: the daemon knows no Unix user for this connection (a token made without `gantry token create --user NAME` names none)".to_string(),
                )),
            }
        }
        _ => Ok(user),
    }
}

#[allow(clippy::too_many_arguments)]
pub fn jobs(
    t: &Target,
    state: Option<String>,
    team: Option<String>,
    class: Option<String>,
    user: Option<String>,
    limit: Option<usize>,
    output: Output,
) -> Result<(), CliError> {
    let mut q = Vec::new();
    for (k, v) in [
        ("state", state),
        ("team", team),
        ("class", class),
        ("user", user),
    ] {
        if let Some(v) = v {
            q.push(format!("{k}={}", encode(&v)));
        }
    }
    if let Some(l) = limit {
        q.push(format!("limit={l}"));
    }
    let path = format!("/v1/jobs?{}", q.join("&"));
    let mut c = t.client()?;
    let rows: Vec<JobRow> = c.call("GET", &path, None)?;
    if output.is_data() {
        return super::print_as(output, &rows).map_err(CliError::usage);
    }
    let now = c
        .call::<gantry::api::Health>("GET", "/v1/health", None)?
        .now;
    let table = JobTable::new(&rows, output == Output::Wide);
    table.header();
    for j in &rows {
        println!("{}", table.line(j, now));
    }
    if rows.is_empty() {
        println!("(no jobs match)");
    }
    Ok(())
}

/// The ETA column: `~12-05 14:20`, `>3h`; a `never: …` reason is cut there (whole in
/// `gantry explain`).
const ETA_WIDTH: usize = 12;

/// How `gantry jobs` lays out its table: column widths, and whether it is wide (names and
/// teams whole, and what each job costs).
pub struct JobTable {
    wide: bool,
    widths: (usize, usize, usize),
}

impl JobTable {
    pub fn new(rows: &[JobRow], wide: bool) -> JobTable {
        let fit = |of: fn(&JobRow) -> &str, head: &str, narrow: usize| {
            let longest = rows.iter().map(|j| width(of(j))).max().unwrap_or(0);
            if wide {
                longest.max(head.len())
            } else {
                narrow
            }
        };
        JobTable {
            wide,
            widths: (
                fit(|j| &j.name, "NAME", 24),
                fit(|j| &j.team, "TEAM", 12),
                fit(|j| &j.class, "CLASS", 11),
            ),
        }
    }

    pub fn header(&self) {
        let (nw, tw, cw) = self.widths;
        let money = if self.wide {
            "      $/H       COST RESTARTS USER        "
        } else {
            ""
        };
        println!(
            "{:>6} {} {} {} {:<10} {:>7} {:>7} {:>4} {}{money}  DETAIL",
            "ID",
            cell("NAME", nw),
            cell("TEAM", tw),
            cell("CLASS", cw),
            "STATE",
            "GPUS",
            "AGE",
            "POS",
            cell("ETA", ETA_WIDTH),
        );
    }

    pub fn line(&self, j: &JobRow, now: f64) -> String {
        let (nw, tw, cw) = self.widths;
        let money = if self.wide {
            format!(
                " {:>8.2} {:>10.2} {:>8} {}",
                j.dollars_per_hour,
                j.cost_at(now),
                j.restarts,
                cell(j.user.as_deref().unwrap_or("-"), 12)
            )
        } else {
            String::new()
        };
        let eta = j.eta.as_ref().map_or(String::new(), |e| e.short(now));
        format!(
            "{:>6} {} {} {} {:<10} {:>7} {:>7} {:>4} {}{money}  {}",
            j.id,
            cell(&j.name, nw),
            cell(&j.team, tw),
            cell(&j.class, cw),
            j.state,
            j.gpus,
            hm(j.age(now)),
            j.position.map_or(String::new(), |p| p.to_string()),
            cell(&eta, ETA_WIDTH),
            gantry::console::app::escape(&j.detail)
        )
    }
}

pub fn id_arg(id: &str) -> Result<i64, CliError> {
    gantry::daemon::journal::parse_job_id(id).map_err(CliError::usage)
}

pub fn job(t: &Target, id: &str, output: Output) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let v: gantry::api::JobView = t.client()?.call("GET", &format!("/v1/jobs/{id}"), None)?;
    if output.is_data() {
        return print_as(output, &v).map_err(CliError::from);
    }
    let esc = gantry::console::app::escape;
    println!(
        "job {id} {}",
        v.name.as_deref().map(esc).unwrap_or_default()
    );
    println!(
        "  team {}  class {}  state {}{}",
        esc(&v.team),
        esc(&v.class),
        v.state,
        match v.user.as_deref() {
            None | Some("") => String::new(),
            Some(u) => format!("  submitted by {}", esc(u)),
        }
    );
    // The calendar's times (RFC 3339 in the fleet's time zone), as every listing shows them.
    println!(
        "  submitted {}{}  cost so far ${:.2}",
        esc(&v.submitted),
        v.started
            .as_deref()
            .map_or(String::new(), |t| format!("  started {t}")),
        v.cost_usd
    );
    if !v.placement.is_empty() {
        println!(
            "  runs on {} (${:.2}/h{})",
            v.placement.join("; "),
            v.dollars_per_hour,
            if v.borrowed {
                ", on borrowed quota"
            } else {
                ""
            }
        );
    }
    if let Some(e) = &v.experiment {
        let run = match (&e.url, &e.run_id) {
            (Some(url), _) => format!(": MLflow run {}", esc(url)),
            (None, Some(r)) => format!(": MLflow run {}", esc(r)),
            (None, None) => " (no MLflow run yet)".to_string(),
        };
        println!("  experiment {}{run}", esc(&e.experiment));
        if let Some(w) = &e.waiting {
            println!("    {}", esc(w));
        }
    }
    match (v.pipeline.as_deref(), v.after) {
        (Some(p), Some(a)) => println!("  pipeline {}: starts after job {a}", esc(p)),
        (Some(p), None) => println!("  pipeline {}: its first task", esc(p)),
        (None, Some(a)) => println!("  starts after job {a}"),
        (None, None) => {}
    }
    if let Some(r) = &v.reason {
        // A waiting job's reason says why it waits; an ended one's, how it ended.
        let waiting = matches!(v.state, JobState::Pending | JobState::Held);
        let label = if waiting { "waits" } else { "why" };
        println!("  {label}: {}", esc(r));
    }
    if let Some(e) = &v.eta {
        println!("  {}", eta_line(e));
    }
    // Every run: where, when, how it ended, what it cost.
    if !v.runs.is_empty() {
        println!("  runs:");
        for r in &v.runs {
            println!("    {}", super::audit::run_line(r, true));
        }
    }
    println!("  spec:");
    for line in v.spec.lines() {
        println!("    {}", esc(line));
    }
    println!("  events:");
    for e in &v.events {
        println!("    {} {}", e.time, esc(&e.detail));
    }
    if !v.log_tail.is_empty() {
        println!("  log tail:");
        for l in &v.log_tail {
            println!("    {}", esc(l));
        }
    }
    Ok(())
}

pub fn explain(t: &Target, id: &str, output: Output) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let v: gantry::api::Explain =
        t.client()?
            .call("GET", &format!("/v1/jobs/{id}/explain"), None)?;
    if output.is_data() {
        return print_as(output, &v).map_err(CliError::from);
    }
    // The reason may carry what a job or a host said (an exit, a refusal): escaped.
    let detail = gantry::console::app::escape(&v.detail);
    match (v.position, &v.explanation) {
        // Position 0: held out of the queue (held, a pipeline, a user's limit) — no place to say.
        (Some(0), Some(e)) => println!(
            "job {id} is {}, out of the queue; team {} uses {:.1} GPUs\n  {detail}",
            v.state,
            e.team,
            e.team_used as f64 / 1000.0,
        ),
        (Some(p), Some(e)) => println!(
            "job {id} is {} — #{p} in the queue, {} of {} in {}; team {} uses {:.1}{} GPUs\n  {detail}",
            v.state,
            e.class_position,
            e.class_size,
            e.class,
            e.team,
            e.team_used as f64 / 1000.0,
            e.team_guaranteed
                .map_or(String::new(), |g| format!("/{:.0} guaranteed", g as f64 / 1000.0)),
        ),
        _ => println!("job {id} is {}: {detail}", v.state),
    }
    if let Some(e) = &v.eta {
        println!("  {}", eta_line(e));
    }
    Ok(())
}

/// A preview, as `--dry-run` prints it.
fn print_what_if(w: &gantry::api::WhatIf, output: Output) -> Result<(), CliError> {
    if output.is_data() {
        return print_as(output, w).map_err(CliError::from);
    }
    let jobs = match w.also.as_slice() {
        [] => format!("job {}", w.job),
        more => {
            let rest: Vec<String> = more.iter().map(|j| j.to_string()).collect();
            format!("jobs {}, {}", w.job, rest.join(", "))
        }
    };
    println!(
        "what {} on {jobs} would do (nothing was done), if the queue stays as it is:",
        w.action
    );
    for l in w.lines() {
        println!("  {}", gantry::console::app::escape(&l));
    }
    Ok(())
}

/// A start estimate in words: when (and its range) or why not, and what it rests on.
pub fn eta_line(e: &gantry::api::Eta) -> String {
    format!(
        "ETA: {}\n  if the queue stays as it is; {}",
        e.when(),
        gantry::console::app::escape(&e.basis)
    )
}

/// cancel / hold / release / preempt on several jobs: each is tried; the exit code is the
/// first failure's.
pub fn act(
    t: &Target,
    action: &str,
    ids: &[String],
    dry_run: bool,
    output: Output,
) -> Result<(), CliError> {
    if ids.is_empty() {
        return Err(CliError::usage(format!(
            "{action}: name at least one job id"
        )));
    }
    if dry_run {
        // Several jobs are previewed together: their changes move starts together.
        let w: gantry::api::WhatIf = match ids {
            [id] => {
                let id = id_arg(id)?;
                t.client()?.call(
                    "POST",
                    &format!("/v1/jobs/{id}/{action}?dry_run=true"),
                    None,
                )?
            }
            _ => {
                let jobs = ids
                    .iter()
                    .map(|i| id_arg(i))
                    .collect::<Result<Vec<_>, _>>()?;
                let body = serde_json::json!({ "jobs": jobs }).to_string();
                t.client()?.call(
                    "POST",
                    &format!("/v1/preview/{action}"),
                    Some(body.as_bytes()),
                )?
            }
        };
        return print_what_if(&w, output);
    }
    let mut c = t.client()?;
    let mut first_err: Option<CliError> = None;
    let mut results = Vec::new();
    for id in ids {
        let r = id_arg(id).and_then(|id| {
            c.call::<gantry::api::Acted>("POST", &format!("/v1/jobs/{id}/{action}"), None)
                .map_err(CliError::from)
        });
        match r {
            Ok(_) => {
                results.push(serde_json::json!({"id": id, "ok": true}));
                if !output.is_data() {
                    println!("job {id}: {action} done");
                }
            }
            Err(e) => {
                results.push(serde_json::json!({"id": id, "ok": false, "error": e.message}));
                if !output.is_data() {
                    eprintln!("error: {}", e.message);
                }
                first_err.get_or_insert(e);
            }
        }
    }
    if output.is_data() {
        print_value_as(output, &Value::Array(results))?;
    }
    match first_err {
        Some(e) => Err(CliError {
            message: String::new(),
            ..e
        }),
        None => Ok(()),
    }
}

pub fn prio(
    t: &Target,
    id: &str,
    class: &str,
    dry_run: bool,
    output: Output,
) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let body = serde_json::json!({ "class": class }).to_string();
    if dry_run {
        let w: gantry::api::WhatIf = t.client()?.call(
            "PUT",
            &format!("/v1/jobs/{id}/priority?dry_run=true"),
            Some(body.as_bytes()),
        )?;
        return print_what_if(&w, output);
    }
    let v: gantry::api::Reprioritized = t.client()?.call(
        "PUT",
        &format!("/v1/jobs/{id}/priority"),
        Some(body.as_bytes()),
    )?;
    match output {
        Output::Json | Output::Yaml => print_as(output, &v).map_err(CliError::from),
        Output::Table | Output::Wide => {
            println!("job {id}: now {class}");
            Ok(())
        }
    }
}

pub fn teams(t: &Target, output: Output) -> Result<(), CliError> {
    let rows: Vec<TeamRow> = t.client()?.call("GET", "/v1/teams", None)?;
    if output.is_data() {
        return super::print_as(output, &rows).map_err(CliError::usage);
    }
    team_header();
    for r in &rows {
        println!("{}", team_line(r));
    }
    // Which month MONTH $ is.
    let fleet: gantry::api::FleetView = t.client()?.call("GET", "/v1/fleet", None)?;
    let cal = &fleet.calendar;
    if !cal.budget_month.is_empty() {
        println!(
            "budget month {} ({}); the next begins {}",
            cal.budget_month, cal.time_zone, cal.budget_month_ends
        );
    }
    Ok(())
}

pub fn team_header() {
    println!(
        "{:<14} {:<10} {:>6} {:>11} {:>4} {:>10} {:>8} {:>8} {:>7} {:>7} {:>9} {:>12} {:>12} {:>6}  AT 100%",
        "TEAM",
        "COHORT",
        "WEIGHT",
        "USAGE GPU-H",
        "FAIR",
        "GUARANTEE",
        "USED",
        "BORROWED",
        "RUNNING",
        "PENDING",
        "$/H",
        "MONTH $",
        "BUDGET $",
        "USED%"
    );
}

pub fn team_line(r: &TeamRow) -> String {
    format!(
        "{} {} {:>6.1} {:>11.1} {:>4} {:>10} {:>8.1} {:>8.1} {:>7} {:>7} {:>9.2} {:>12.2} {:>12} {:>6}  {}",
        cell(&r.name, 14),
        cell(&r.cohort, 10),
        r.weight,
        r.usage_gpu_hours,
        format!("#{}", r.fair_share_rank),
        r.guaranteed
            .map_or("-".to_string(), |g| format!("{g}+{}", r.borrow_limit)),
        r.used_gpus,
        r.borrowed_gpus,
        r.running,
        r.pending,
        r.burn_per_hour,
        r.spend_month_usd,
        r.budget_monthly_usd
            .map_or("-".to_string(), |b| format!("{b:.0}")),
        r.budget_used
            .map_or("-".to_string(), |u| format!("{:.1}", u * 100.0)),
        if r.budget_used.is_some() {
            r.budget_action.as_str()
        } else {
            "-"
        }
    )
}

pub fn reclaim(t: &Target, apply: Option<String>, output: Output) -> Result<(), CliError> {
    let mut c = t.client()?;
    let (v, applied): (ReclaimPlan, bool) = match apply {
        None => (c.call("GET", "/v1/reclaim", None)?, false),
        Some(id) => {
            // `--apply` alone applies the plan fetched now: by its id, so a job that became
            // idle in between is never included.
            let id = if id.is_empty() {
                let shown: ReclaimPlan = c.call("GET", "/v1/reclaim", None)?;
                if shown.items.is_empty() {
                    return match output {
                        Output::Json | Output::Yaml => {
                            print_as(output, &shown).map_err(CliError::from)
                        }
                        Output::Table | Output::Wide => {
                            println!("nothing to reclaim: no job's GPUs have been idle through the window");
                            Ok(())
                        }
                    };
                }
                shown.id
            } else {
                id
            };
            let body = serde_json::json!({ "plan": id }).to_string();
            (c.call("POST", "/v1/reclaim", Some(body.as_bytes()))?, true)
        }
    };
    if output.is_data() {
        return print_as(output, &v).map_err(CliError::from);
    }
    if v.items.is_empty() && v.skipped.is_empty() {
        println!("nothing to reclaim: no job's GPUs have been idle through the window");
        return Ok(());
    }
    print!("{}", reclaim_rows(&v));
    let id = &v.id;
    let gpus = gantry::api::gpus_text(v.gpus_freed);
    let usd = v.dollars_per_hour_saved;
    if applied {
        println!("plan {id}: reclaimed {gpus} GPU(s), ${usd:.2}/h");
    } else {
        println!("plan {id}: would free {gpus} GPU(s), ${usd:.2}/h — a dry run; `gantry reclaim --apply {id}` applies exactly this plan");
    }
    Ok(())
}

/// The reclaim plan's table: a header, a row per idle job, a line per job skipped.
fn reclaim_rows(plan: &ReclaimPlan) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "{:>6} {:>5} {:>9} {:>9}  ACTION\n",
        "JOB", "GPUS", "$/H", "IDLE"
    );
    for i in &plan.items {
        let _ = writeln!(
            out,
            "{:>6} {:>5} {:>9.2} {:>9}  {}",
            i.job,
            gantry::api::gpus_text(i.gpus),
            i.dollars_per_hour,
            hm(i.idle_for_s),
            i.action.name()
        );
    }
    for s in &plan.skipped {
        let _ = writeln!(out, "{:>6} skipped: {}", s.job, s.why);
    }
    out
}

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> CliError {
        CliError {
            code: e.exit_code(),
            message: e.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reclaim_table_pads_its_job_column() {
        // Seen on an H100 host: `   JOB  GPUS` over `1     1` (a JSON value's Display ignores
        // the width it is given).
        use gantry::scheduler::reclaim::{ReclaimAction, ReclaimItem, ReclaimSkip};
        let plan = ReclaimPlan {
            items: vec![ReclaimItem {
                job: 1,
                gpus: 1.0,
                dollars_per_hour: 2.5,
                idle_for_s: 90.0,
                action: ReclaimAction::CheckpointAndRequeue,
            }],
            skipped: vec![ReclaimSkip {
                job: 12,
                why: "busy again".to_string(),
            }],
            ..ReclaimPlan::default()
        };
        let text = reclaim_rows(&plan);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "   JOB  GPUS       $/H      IDLE  ACTION");
        assert_eq!(
            lines[1],
            "     1     1      2.50        1m  checkpoint-and-requeue"
        );
        assert_eq!(lines[2], "    12 skipped: busy again");
    }
}
