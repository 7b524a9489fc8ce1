//! `gantry serve up|down`, `gantry services` and `gantry service NAME`: services (SkyServe's
//! `service:` section) started, updated, stopped and shown.

use super::remote::Target;
use super::{CliError, Output};
use clap::Subcommand;
use gantry::api::services::ServiceRow;
use gantry::client::http::encode;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ServeCmd {
    /// Starts a service from a task file with a `service:` section, or rolls it to the file's
    /// new version (replicas replaced one at a time, `min_replicas` kept ready).
    Up {
        /// The service's file.
        file: PathBuf,
        /// Its name (default: the file's `name`, else the file's stem).
        #[arg(long, short)]
        name: Option<String>,
        /// Where the daemon serves it (default 127.0.0.1, the first free port from 30001;
        /// the fleet file's `[services]` says where it may).
        #[arg(long, value_name = "ADDR:PORT")]
        endpoint: Option<String>,
        /// Its endpoint asks for `Authorization: Bearer TOKEN`: a new token is made (replacing
        /// one made before) and printed once; the daemon keeps its SHA-256.
        #[arg(long)]
        auth: bool,
        /// Team (overrides the file's).
        #[arg(long, add = super::complete::team_names())]
        team: Option<String>,
        /// Priority class of its replicas (default: the file's, else `serving`).
        #[arg(long)]
        priority: Option<String>,
        /// NAME=VALUE for the replicas' `envs`. Repeatable.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        envs: Vec<String>,
        /// A dotenv file of NAME=VALUE lines for the replicas' `envs`; `--env` overrides it.
        /// Repeatable.
        #[arg(long = "env-file", value_name = "PATH")]
        env_files: Vec<std::path::PathBuf>,
        /// A secret for the replicas' `secrets`: NAME or NAME=VALUE. Repeatable.
        #[arg(long = "secret", value_name = "NAME[=VALUE]")]
        secrets: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Stops a service: its replicas cancelled, its endpoint closed.
    Down {
        name: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn serve(t: &Target, cmd: ServeCmd) -> Result<(), CliError> {
    match cmd {
        ServeCmd::Up {
            file,
            name,
            endpoint,
            auth,
            team,
            priority,
            envs,
            env_files,
            secrets,
            output,
        } => {
            let shown = file.display().to_string();
            let text = std::fs::read(&file).map_err(|e| {
                CliError::usage(format!("{shown}: cannot read the service file: {e}"))
            })?;
            let written = String::from_utf8_lossy(&text).into_owned();
            // Its errors at their line before anything is sent.
            let spec =
                gantry::spec::parse(&shown, &text).map_err(|e| CliError::usage(e.to_string()))?;
            if spec.service.is_none() {
                return Err(CliError::usage(format!(
                    "{shown}: the file has no `service:` section: a service needs one (`readiness_probe`, `replicas` or `replica_policy`); a task runs once with `gantry submit {shown}`"
                )));
            }
            let ship = t.ships_files();
            let given = super::submit::Given {
                envs,
                env_files,
                secrets,
                gpus: None,
                num_nodes: None,
            };
            let text = super::submit::prepare(&shown, text, &given, t, ship)?;
            let mut path = format!("/v1/services?file={}", encode(&shown));
            for (k, v) in [
                ("name", &name),
                ("endpoint", &endpoint),
                ("team", &team),
                ("priority", &priority),
            ] {
                if let Some(v) = v {
                    path.push_str(&format!("&{k}={}", encode(v)));
                }
            }
            if auth {
                path.push_str("&auth=true");
            }
            let answer: gantry::api::ServiceUpAnswer = t
                .client()?
                .call("POST", &path, Some(&text))
                .map_err(|e| super::submit::at_its_field(&shown, &written, e))?;
            if output.is_data() {
                return super::print_as(output, &answer).map_err(CliError::usage);
            }
            println!(
                "service {} version {} at http://{} ({} replica(s) wanted; gantry service {} follows them)",
                answer.name,
                answer.version,
                answer.endpoint,
                answer.replicas,
                answer.name,
            );
            if let Some(token) = &answer.token {
                println!("token {token}");
                eprintln!("(shown once: the daemon keeps only its SHA-256. Clients send `Authorization: Bearer TOKEN`; `gantry serve up --auth` again replaces it.)");
            }
            Ok(())
        }
        ServeCmd::Down { name, output } => {
            let answer: gantry::api::ServiceDown =
                t.client()?
                    .call("DELETE", &format!("/v1/services/{}", encode(&name)), None)?;
            if output.is_data() {
                return super::print_as(output, &answer).map_err(CliError::usage);
            }
            let n = answer.cancelled.len();
            println!("service {name} down: {n} replica(s) cancelled");
            Ok(())
        }
    }
}

/// `gantry services`: one line per service.
pub fn list(t: &Target, output: Output) -> Result<(), CliError> {
    let rows: Vec<ServiceRow> = t.client()?.call("GET", "/v1/services", None)?;
    if output.is_data() {
        return super::print_as(output, &rows).map_err(CliError::usage);
    }
    if rows.is_empty() {
        println!("no services (gantry serve up FILE starts one)");
        return Ok(());
    }
    println!(
        "{:<20} {:<8} {:<22} {:>9} {:>8} {:>8} {:>8} {:>6} {:>9}  STATUS",
        "NAME", "VERSION", "ENDPOINT", "READY", "QPS", "P50 ms", "P99 ms", "GPUS", "$/H"
    );
    for s in &rows {
        println!("{}", line(s));
    }
    Ok(())
}

fn ms(v: Option<f64>) -> String {
    v.map_or("-".to_string(), |x| format!("{x:.1}"))
}

fn line(s: &ServiceRow) -> String {
    format!(
        "{:<20} {:<8} {:<22} {:>9} {:>8.1} {:>8} {:>8} {:>6} {:>9.2}  {}",
        s.name,
        format!("v{}", s.version),
        s.endpoint,
        s.replicas_text(),
        s.qps,
        ms(s.latency_p50_ms),
        ms(s.latency_p99_ms),
        gantry::api::gpus_text(s.gpus),
        s.dollars_per_hour,
        s.status
    )
}

/// `gantry service NAME`: the service, its policy and each replica.
pub fn show(t: &Target, name: &str, output: Output) -> Result<(), CliError> {
    let s: ServiceRow = t
        .client()?
        .call("GET", &format!("/v1/services/{}", encode(name)), None)?;
    if output.is_data() {
        return super::print_as(output, &s).map_err(CliError::usage);
    }
    let spec = &s.spec;
    println!(
        "service {} v{} ({}, team {}, class {})",
        s.name, s.version, s.status, s.team, s.class
    );
    println!("  endpoint     http://{}", s.endpoint);
    let signal = match &spec.signal {
        None => "fixed".to_string(),
        Some(sig) => format!(
            "{} {} per replica (now {}), up after {:.0} s, down after {:.0} s",
            sig.name(),
            sig.per_replica(),
            s.load.map_or("-".to_string(), |l| format!("{l:.2}")),
            spec.upscale_delay_s,
            spec.downscale_delay_s
        ),
    };
    println!(
        "  replicas     {} ready of {} wanted ({}..{}); {signal}",
        s.ready, s.wanted, spec.min_replicas, spec.max_replicas
    );
    println!(
        "  traffic      {:.2} req/s over {:.0} s, p50 {} ms, p99 {} ms, {} requests ({} failed){}",
        s.qps,
        spec.qps_window_s,
        ms(s.latency_p50_ms),
        ms(s.latency_p99_ms),
        s.requests,
        s.failed_requests,
        if s.turned_away > 0 {
            format!(
                "; {} connection(s) turned away (over the endpoint's cap of {} or a peer's of {})",
                s.turned_away,
                gantry::daemon::serving::proxy::MOST_CONNECTIONS,
                gantry::daemon::serving::proxy::MOST_PER_PEER
            )
        } else {
            String::new()
        }
    );
    println!(
        "  probe        {} {} every {:.0} s, timeout {:.0} s, initial delay {:.0} s",
        if spec.readiness.post_data.is_some() {
            "POST"
        } else {
            "GET"
        },
        spec.readiness.path,
        spec.readiness.interval_s,
        spec.readiness.timeout_s,
        spec.readiness.initial_delay_s
    );
    println!(
        "  cost         {} GPU(s), ${:.2}/h",
        gantry::api::gpus_text(s.gpus),
        s.dollars_per_hour
    );
    if let Some(d) = &s.last_decision {
        println!("  last scaling {d}");
    }
    println!();
    println!(
        "  {:<8} {:>7} {:<8} {:<11} {:<22} DETAIL",
        "REPLICA", "JOB", "VERSION", "STATE", "ADDRESS"
    );
    for r in &s.replicas {
        println!(
            "  {:<8} {:>7} {:<8} {:<11} {:<22} {}",
            r.replica,
            r.job,
            format!("v{}", r.version),
            match (r.ready, r.ondemand) {
                (true, false) => "ready".to_string(),
                (true, true) => "ready (od)".to_string(),
                (false, _) => r.state.clone(),
            },
            r.address.as_deref().unwrap_or("-"),
            r.detail
        );
    }
    Ok(())
}
