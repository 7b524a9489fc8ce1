//! The commands that talk to a running daemon: submit, jobs, job, explain, cancel, preempt,
//! hold, release, prio, teams, reclaim, token (events and report: `history`). Each prints a table or JSON
//! (`--output json`, the daemon's own JSON) and exits with a code that says what went wrong.

use super::table::{cell, width};
use super::{CliError, Output};
use gantry::api::{HostStatus, IdleNow, JobRow, PoolRow, TeamRow};
use gantry::client::http::{encode, ClientError, Endpoint, HttpClient};
use gantry::console::app::hm;
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

    pub fn client(&self) -> Result<HttpClient, CliError> {
        Ok(HttpClient::new(self.endpoint()?, self.token.clone()))
    }
}

#[derive(clap::Subcommand)]
pub enum TokenCmd {
    /// Creates an API token (printed once; the daemon keeps only its hash).
    Create {
        #[arg(long)]
        role: String,
        /// A researcher's team: the only team whose jobs the token may change.
        #[arg(long)]
        team: Option<String>,
        /// A name for events and audits.
        #[arg(long)]
        label: Option<String>,
        /// How long it is accepted: 90d, 12h, 1h30m (forever when absent).
        #[arg(long)]
        expires_in: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Lists the tokens: id, role, team, label, when created and when it expires, status
    /// (never the tokens themselves).
    List {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Revokes a token at once, on every listener (ID: the ID column of `token list`).
    Revoke {
        id: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub(super) fn print_value_as(output: Output, v: &Value) -> Result<(), CliError> {
    super::print_as(output, v).map_err(CliError::usage)
}

/// `--user`: `me` is who the daemon takes this client for (`GET /v1/whoami`).
pub fn user_of(t: &Target, user: Option<String>) -> Result<Option<String>, CliError> {
    match user.as_deref() {
        Some("me") => {
            let who: Value = t.client()?.call("GET", "/v1/whoami", None)?;
            match who["user"].as_str() {
                Some(u) => Ok(Some(u.to_string())),
                None => Err(CliError::usage(
                    "--user me: the daemon does not know who you are on this connection (a token made before owners were kept has no label?)".to_string(),
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
    let snap: Value = c.call("GET", "/v1/health", None)?;
    let now = snap["now"].as_f64().unwrap_or(0.0);
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
            "{:>6} {} {} {} {:<10} {:>7} {:>7} {:>4}{money}  DETAIL",
            "ID",
            cell("NAME", nw),
            cell("TEAM", tw),
            cell("CLASS", cw),
            "STATE",
            "GPUS",
            "AGE",
            "POS"
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
        format!(
            "{:>6} {} {} {} {:<10} {:>7} {:>7} {:>4}{money}  {}",
            j.id,
            cell(&j.name, nw),
            cell(&j.team, tw),
            cell(&j.class, cw),
            j.state,
            j.gpus,
            hm(j.age(now)),
            j.position.map_or(String::new(), |p| p.to_string()),
            gantry::console::app::escape(&j.detail)
        )
    }
}

pub fn id_arg(id: &str) -> Result<i64, CliError> {
    gantry::daemon::journal::parse_job_id(id).map_err(CliError::usage)
}

pub fn job(t: &Target, id: &str, output: Output) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let v: Value = t.client()?.call("GET", &format!("/v1/jobs/{id}"), None)?;
    if output.is_data() {
        return print_value_as(output, &v);
    }
    let s = |k: &str| {
        v[k].as_str()
            .map(gantry::console::app::escape)
            .unwrap_or_default()
    };
    println!("job {id} {}", s("name"));
    println!(
        "  team {}  class {}  state {}{}",
        s("team"),
        s("class"),
        s("state"),
        match s("user") {
            u if u.is_empty() => String::new(),
            u => format!("  submitted by {u}"),
        }
    );
    // The calendar's times (RFC 3339 in the fleet's time zone), as every listing shows them.
    println!(
        "  submitted {}{}  cost so far ${:.2}",
        s("submitted"),
        v["started"]
            .as_str()
            .map_or(String::new(), |t| format!("  started {t}")),
        v["cost_usd"].as_f64().unwrap_or(0.0)
    );
    if let Some(p) = v["placement"].as_array().filter(|p| !p.is_empty()) {
        let where_: Vec<&str> = p.iter().filter_map(Value::as_str).collect();
        println!(
            "  runs on {} (${:.2}/h{})",
            where_.join("; "),
            v["dollars_per_hour"].as_f64().unwrap_or(0.0),
            if v["borrowed"].as_bool() == Some(true) {
                ", on borrowed quota"
            } else {
                ""
            }
        );
    }
    match (v["pipeline"].as_str(), v["after"].as_i64()) {
        (Some(p), Some(a)) => println!(
            "  pipeline {}: starts after job {a}",
            gantry::console::app::escape(p)
        ),
        (Some(p), None) => println!(
            "  pipeline {}: its first task",
            gantry::console::app::escape(p)
        ),
        (None, Some(a)) => println!("  starts after job {a}"),
        (None, None) => {}
    }
    if let Some(r) = v["reason"].as_str() {
        // A waiting job's reason says why it waits; an ended one's, how it ended.
        let waiting = matches!(v["state"].as_str(), Some("pending" | "held"));
        let label = if waiting { "waits" } else { "why" };
        println!("  {label}: {}", gantry::console::app::escape(r));
    }
    // Every run: where, when, how it ended, what it cost.
    let runs: Vec<gantry::daemon::journal::RunRecord> =
        serde_json::from_value(v["runs"].clone()).unwrap_or_default();
    if !runs.is_empty() {
        println!("  runs:");
        for r in &runs {
            println!("    {}", super::audit::run_line(r, true));
        }
    }
    println!("  spec:");
    for line in v["spec"].as_str().unwrap_or("").lines() {
        println!("    {}", gantry::console::app::escape(line));
    }
    if let Some(ev) = v["events"].as_array() {
        println!("  events:");
        for e in ev {
            println!(
                "    {} {}",
                e["time"].as_str().unwrap_or(""),
                gantry::console::app::escape(e["detail"].as_str().unwrap_or(""))
            );
        }
    }
    if let Some(tail) = v["log_tail"].as_array().filter(|t| !t.is_empty()) {
        println!("  log tail:");
        for l in tail.iter().filter_map(Value::as_str) {
            println!("    {}", gantry::console::app::escape(l));
        }
    }
    Ok(())
}

pub fn explain(t: &Target, id: &str, output: Output) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let v: Value = t
        .client()?
        .call("GET", &format!("/v1/jobs/{id}/explain"), None)?;
    if output.is_data() {
        return print_value_as(output, &v);
    }
    let e = &v["explanation"];
    // Position 0: held out of the queue (held, a pipeline, a user's limit) — no place to say.
    match v["position"].as_u64() {
        Some(0) => println!(
            "job {id} is {}, out of the queue; team {} uses {:.1} GPUs\n  {}",
            v["state"].as_str().unwrap_or("?"),
            e["team"].as_str().unwrap_or("?"),
            e["team_used"].as_f64().unwrap_or(0.0) / 1000.0,
            gantry::console::app::escape(v["detail"].as_str().unwrap_or(""))
        ),
        Some(p) => println!(
            "job {id} is {} — #{p} in the queue, {} of {} in {}; team {} uses {:.1}{} GPUs\n  {}",
            v["state"].as_str().unwrap_or("?"),
            e["class_position"],
            e["class_size"],
            e["class"].as_str().unwrap_or("?"),
            e["team"].as_str().unwrap_or("?"),
            e["team_used"].as_f64().unwrap_or(0.0) / 1000.0,
            e["team_guaranteed"]
                .as_f64()
                .map_or(String::new(), |g| format!("/{:.0} guaranteed", g / 1000.0)),
            gantry::console::app::escape(v["detail"].as_str().unwrap_or(""))
        ),
        // The reason may carry what a job or a host said (an exit, a refusal): escaped.
        None => println!(
            "job {id} is {}: {}",
            v["state"].as_str().unwrap_or("?"),
            gantry::console::app::escape(v["detail"].as_str().unwrap_or(""))
        ),
    }
    Ok(())
}

/// cancel / hold / release / preempt on several jobs: each is tried; the exit code is the
/// first failure's.
pub fn act(t: &Target, action: &str, ids: &[String], output: Output) -> Result<(), CliError> {
    if ids.is_empty() {
        return Err(CliError::usage(format!(
            "{action}: name at least one job id"
        )));
    }
    let mut c = t.client()?;
    let mut first_err: Option<CliError> = None;
    let mut results = Vec::new();
    for id in ids {
        let r = id_arg(id).and_then(|id| {
            c.call::<Value>("POST", &format!("/v1/jobs/{id}/{action}"), None)
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

pub fn prio(t: &Target, id: &str, class: &str, output: Output) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let body = serde_json::json!({ "class": class }).to_string();
    let v: Value = t.client()?.call(
        "PUT",
        &format!("/v1/jobs/{id}/priority"),
        Some(body.as_bytes()),
    )?;
    match output {
        Output::Json | Output::Yaml => print_value_as(output, &v),
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
    let fleet: Value = t.client()?.call("GET", "/v1/fleet", None)?;
    let cal = &fleet["calendar"];
    if let Some(month) = cal["budget_month"].as_str().filter(|m| !m.is_empty()) {
        println!(
            "budget month {month} ({}); the next begins {}",
            cal["time_zone"].as_str().unwrap_or(""),
            cal["budget_month_ends"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

pub fn team_header() {
    println!(
        "{:<14} {:<10} {:>6} {:>10} {:>8} {:>8} {:>7} {:>7} {:>9} {:>12} {:>12} {:>6}  AT 100%",
        "TEAM",
        "COHORT",
        "WEIGHT",
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
        "{} {} {:>6.1} {:>10} {:>8.1} {:>8.1} {:>7} {:>7} {:>9.2} {:>12.2} {:>12} {:>6}  {}",
        cell(&r.name, 14),
        cell(&r.cohort, 10),
        r.weight,
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

pub fn pool_header() {
    println!(
        "{:<44} {:<14} {:<10} {:>5} {:>5} {:>5} {:>7} {:>6} {:>6} {:>9}",
        "POOL", "MODEL", "CAPACITY", "NODES", "PROV", "DOWN", "UNREACH", "GPUS", "BUSY", "$/H/NODE"
    );
}

pub fn pool_line(p: &PoolRow) -> String {
    format!(
        "{} {} {:<10} {:>5} {:>5} {:>5} {:>7} {:>6} {:>6} {:>9.2}",
        cell(&p.path, 44),
        cell(&p.model, 14),
        p.capacity,
        p.nodes,
        p.provisioning,
        p.down,
        p.unreachable,
        p.gpus,
        p.gpus_busy,
        p.dollars_per_hour
    )
}

pub fn fleet_live(c: &mut HttpClient, output: Output) -> Result<(), CliError> {
    let v: Value = c.call("GET", "/v1/fleet", None)?;
    if output.is_data() {
        return print_value_as(output, &v);
    }
    println!(
        "live fleet from the daemon at {}{}, {}: {} GPUs, {} busy, ${:.2}/h (${:.2}/h idle)",
        c.endpoint,
        if v["simulated"].as_bool() == Some(true) {
            " (simulated)"
        } else {
            ""
        },
        v["calendar"]["time"].as_str().unwrap_or("?"),
        v["gpus_total"],
        v["gpus_busy"],
        v["dollars_per_hour"].as_f64().unwrap_or(0.0),
        v["idle_dollars_per_hour"].as_f64().unwrap_or(0.0)
    );
    pool_header();
    let pools: Vec<PoolRow> = serde_json::from_value(v["pools"].clone()).unwrap_or_default();
    for p in &pools {
        println!("{}", pool_line(p));
        // A bought pool's doings, under its row.
        for n in &p.notes {
            println!("    {}", gantry::untrusted::bounded(n, 200));
        }
    }
    let why: Vec<IdleNow> = serde_json::from_value(v["idle_by_cause"].clone()).unwrap_or_default();
    if !why.is_empty() {
        let parts: Vec<String> = why
            .iter()
            .map(|c| {
                format!(
                    "{} {} (${:.2}/h)",
                    c.cause.label(),
                    c.gpus,
                    c.dollars_per_hour
                )
            })
            .collect();
        println!("idle GPUs, why: {}", parts.join("; "));
    }
    let host = v.get("host").cloned().unwrap_or(Value::Null);
    if let Ok(Some(h)) = serde_json::from_value::<Option<HostStatus>>(host) {
        println!("{}", h.summary());
    }
    Ok(())
}

/// The items of a JSON array as text (none if it is not an array).
fn items(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect()
}

/// One pool node by node and GPU by GPU (what the console's Fleet drill-down shows): `which`
/// is its index in `gantry fleet` or its path (or the end of it).
pub fn pool_live(c: &mut HttpClient, which: &str, output: Output) -> Result<(), CliError> {
    let fleet: Value = c.call("GET", "/v1/fleet", None)?;
    let paths: Vec<&str> = fleet["pools"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|p| p["path"].as_str().unwrap_or(""))
        .collect();
    let index = which
        .parse::<usize>()
        .ok()
        .filter(|i| *i < paths.len())
        .or_else(|| paths.iter().position(|p| *p == which))
        .or_else(|| paths.iter().position(|p| p.ends_with(&format!("/{which}"))))
        .ok_or_else(|| {
            CliError::usage(format!(
                "--pool {which}: no such pool; give an index 0..{} or one of: {}",
                paths.len().saturating_sub(1),
                paths.join(", ")
            ))
        })?;
    let v: Value = c.call("GET", &format!("/v1/pools/{index}"), None)?;
    if output.is_data() {
        return print_value_as(output, &v);
    }
    println!(
        "pool {} — {} {} ${:.2}/node-h ({})",
        v["path"].as_str().unwrap_or(""),
        v["model"].as_str().unwrap_or(""),
        v["capacity"].as_str().unwrap_or(""),
        v["dollars_per_hour"].as_f64().unwrap_or(0.0),
        if v["simulated"].as_bool() == Some(false) {
            "measured through NVML"
        } else {
            "simulated telemetry"
        }
    );
    println!(
        "{:<28} {:<12} {:>3} {:>5} {:>17} {:>6} {:>5}  JOBS",
        "NODE", "STATE", "GPU", "UTIL", "VRAM USED/TOT MiB", "POWER", "TEMP"
    );
    for n in v["nodes"].as_array().into_iter().flatten() {
        let resources = serde_json::from_value::<gantry::api::NodeView>(n.clone())
            .map(|n| n.resources_line())
            .unwrap_or_default();
        if n["gpus"].as_array().is_none_or(|g| g.is_empty()) {
            println!(
                "{:<28} {:<12} {:>3}  {}",
                n["name"].as_str().unwrap_or(""),
                n["state"].as_str().unwrap_or(""),
                "-",
                gantry::untrusted::escape(&resources)
            );
        } else {
            println!("{:<28} {}", "", gantry::untrusted::escape(&resources));
        }
        for (k, g) in n["gpus"].as_array().into_iter().flatten().enumerate() {
            let jobs = items(&g["jobs"]);
            let foreign = items(&g["foreign_pids"]);
            let mut who = jobs.join(",");
            if !foreign.is_empty() {
                who.push_str(&format!(" foreign pid {}", foreign.join(",")));
            }
            if let Some(holder) = g["foreign"].as_str() {
                who.push_str(&format!(" held by {holder}"));
            }
            // A GPU nothing measures (a Slurm node's) shows no numbers rather than zeros.
            let (util, used, power, temp) = if g["unmeasured"].as_bool() == Some(true) {
                let none = || "-".to_string();
                (none(), none(), none(), none())
            } else {
                (
                    format!("{:.0}%", g["util_pct"].as_f64().unwrap_or(0.0)),
                    g["vram_used_mib"].as_u64().unwrap_or(0).to_string(),
                    format!("{:.0} W", g["power_w"].as_f64().unwrap_or(0.0)),
                    format!("{:.0}°C", g["temp_c"].as_f64().unwrap_or(0.0)),
                )
            };
            println!(
                "{:<28} {:<12} {:>3} {:>5} {:>17} {:>6} {:>5}  {}",
                if k == 0 {
                    n["name"].as_str().unwrap_or("")
                } else {
                    ""
                },
                if k == 0 {
                    n["state"].as_str().unwrap_or("")
                } else {
                    ""
                },
                g["index"],
                util,
                format!("{used}/{}", g["vram_total_mib"].as_u64().unwrap_or(0)),
                power,
                temp,
                who.trim()
            );
        }
        if let Some(note) = n["note"].as_str() {
            println!("{:<28} {}", "", gantry::untrusted::bounded(note, 200));
        }
    }
    let waiting = v["waiting"].as_array().map_or(&[][..], Vec::as_slice);
    if !waiting.is_empty() {
        println!("\nwaiting in the backend's own queue for these nodes:");
        for w in waiting {
            println!(
                "  {} — {} GPU(s) on {} node(s): {}",
                w["what"].as_str().unwrap_or(""),
                w["gpus"],
                w["nodes"],
                w["reason"].as_str().unwrap_or("")
            );
        }
    }
    Ok(())
}

pub fn reclaim(t: &Target, apply: Option<String>, output: Output) -> Result<(), CliError> {
    let mut c = t.client()?;
    let (v, applied) = match apply {
        None => (c.call("GET", "/v1/reclaim", None)?, false),
        Some(id) => {
            // `--apply` alone applies the plan fetched now: by its id, so a job that became
            // idle in between is never included.
            let id = if id.is_empty() {
                let shown: Value = c.call("GET", "/v1/reclaim", None)?;
                if shown["items"].as_array().is_none_or(Vec::is_empty) {
                    return match output {
                        Output::Json | Output::Yaml => print_value_as(output, &shown),
                        Output::Table | Output::Wide => {
                            println!("nothing to reclaim: no job's GPUs have been idle through the window");
                            Ok(())
                        }
                    };
                }
                shown["id"].as_str().unwrap_or("").to_string()
            } else {
                id
            };
            let body = serde_json::json!({ "plan": id }).to_string();
            (c.call("POST", "/v1/reclaim", Some(body.as_bytes()))?, true)
        }
    };
    if output.is_data() {
        return print_value_as(output, &v);
    }
    let items = v["items"].as_array().cloned().unwrap_or_default();
    let skipped = v["skipped"].as_array().cloned().unwrap_or_default();
    if items.is_empty() && skipped.is_empty() {
        println!("nothing to reclaim: no job's GPUs have been idle through the window");
        return Ok(());
    }
    print!("{}", reclaim_rows(&items, &skipped));
    let id = v["id"].as_str().unwrap_or("");
    let gpus = gantry::api::gpus_text(v["gpus_freed"].as_f64().unwrap_or(0.0));
    let usd = v["dollars_per_hour_saved"].as_f64().unwrap_or(0.0);
    if applied {
        println!("plan {id}: reclaimed {gpus} GPU(s), ${usd:.2}/h");
    } else {
        println!("plan {id}: would free {gpus} GPU(s), ${usd:.2}/h — a dry run; `gantry reclaim --apply {id}` applies exactly this plan");
    }
    Ok(())
}

/// The reclaim plan's table: a header, a row per idle job, a line per job skipped.
fn reclaim_rows(items: &[Value], skipped: &[Value]) -> String {
    use std::fmt::Write;
    let mut out = format!(
        "{:>6} {:>5} {:>9} {:>9}  ACTION\n",
        "JOB", "GPUS", "$/H", "IDLE"
    );
    for i in items {
        let _ = writeln!(
            out,
            "{:>6} {:>5} {:>9.2} {:>9}  {}",
            // A JSON value's Display ignores width: the id as a number pads.
            i["job"].as_i64().unwrap_or(0),
            gantry::api::gpus_text(i["gpus"].as_f64().unwrap_or(0.0)),
            i["dollars_per_hour"].as_f64().unwrap_or(0.0),
            hm(i["idle_for_s"].as_f64().unwrap_or(0.0)),
            i["action"].as_str().unwrap_or("")
        );
    }
    for s in skipped {
        let _ = writeln!(
            out,
            "{:>6} skipped: {}",
            s["job"].as_i64().unwrap_or(0),
            s["why"].as_str().unwrap_or("")
        );
    }
    out
}

pub fn token(t: &Target, cmd: TokenCmd) -> Result<(), CliError> {
    let (role, team, label, expires_in, output) = match cmd {
        TokenCmd::Create {
            role,
            team,
            label,
            expires_in,
            output,
        } => (role, team, label, expires_in, output),
        TokenCmd::List { output } => {
            let v: Value = t.client()?.call("GET", "/v1/tokens", None)?;
            return match output {
                Output::Json | Output::Yaml => print_value_as(output, &v),
                Output::Table | Output::Wide => {
                    print_tokens(&v);
                    Ok(())
                }
            };
        }
        TokenCmd::Revoke { id, output } => {
            let v: Value =
                t.client()?
                    .call("DELETE", &format!("/v1/tokens/{}", encode(&id)), None)?;
            return match output {
                Output::Json | Output::Yaml => print_value_as(output, &v),
                Output::Table | Output::Wide => {
                    println!(
                        "token {} ({}) revoked",
                        v["id"].as_str().unwrap_or(""),
                        v["label"].as_str().unwrap_or("")
                    );
                    Ok(())
                }
            };
        }
    };
    let body =
        serde_json::json!({ "role": role, "team": team, "label": label, "expires_in": expires_in })
            .to_string();
    let v: Value = t
        .client()?
        .call("POST", "/v1/tokens", Some(body.as_bytes()))?;
    match output {
        Output::Json | Output::Yaml => print_value_as(output, &v),
        Output::Table | Output::Wide => {
            println!("{}", v["token"].as_str().unwrap_or(""));
            eprintln!("(shown once: the daemon keeps only its SHA-256. Use it as GANTRY_TOKEN or --token.)");
            // Stdout stays the token alone (scripts capture it); the pin goes with the advice.
            if let Some(fp) = v["tls_fingerprint"].as_str() {
                eprintln!("(the daemon serves TLS with certificate {fp}: connect with --connect https://HOST:PORT --tls-fingerprint {fp}, or GANTRY_TLS_FINGERPRINT)");
            }
            Ok(())
        }
    }
}

fn print_tokens(v: &Value) {
    let when = |x: &Value| {
        x.as_f64()
            .map_or("-".to_string(), gantry::daemon::auth::rfc3339)
    };
    println!(
        "{:<12}  {:<10}  {:<14}  {:<20}  {:<20}  {:<20}  STATUS",
        "ID", "ROLE", "TEAM", "LABEL", "CREATED", "EXPIRES"
    );
    for t in v.as_array().into_iter().flatten() {
        println!(
            "{:<12}  {:<10}  {}  {}  {:<20}  {:<20}  {}",
            t["id"].as_str().unwrap_or(""),
            t["role"].as_str().unwrap_or(""),
            cell(t["team"].as_str().unwrap_or("-"), 14),
            cell(t["label"].as_str().unwrap_or(""), 20),
            when(&t["created_at"]),
            when(&t["expires_at"]),
            t["status"].as_str().unwrap_or("")
        );
    }
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
        let items = vec![serde_json::json!({
            "job": 1, "gpus": 1.0, "dollars_per_hour": 2.5, "idle_for_s": 90.0,
            "action": "checkpoint-and-requeue"
        })];
        let skipped = vec![serde_json::json!({ "job": 12, "why": "busy again" })];
        let text = reclaim_rows(&items, &skipped);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "   JOB  GPUS       $/H      IDLE  ACTION");
        assert_eq!(
            lines[1],
            "     1     1      2.50        1m  checkpoint-and-requeue"
        );
        assert_eq!(lines[2], "    12 skipped: busy again");
    }
}
