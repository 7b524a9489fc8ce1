//! `gantry cloud check` and `gantry cloud ls`: the clouds the fleet file's pools buy from, as
//! `sky check` and `sky status` show them — asked straight from each cloud's API with the usual
//! credentials, so they answer with no daemon running, and show what a daemon that died left
//! behind.

use super::{print_as, Output};
use gantry::backend::cloud::{by_pool, Instance};
use gantry::config::fleet::PoolConfig;
use serde::Serialize;
use std::path::PathBuf;

#[derive(clap::Subcommand)]
pub enum CloudCmd {
    /// Each cloud pool: are there credentials, does its region answer, are its zones there,
    /// can its image be found. Exits 1 when one cannot buy.
    Check {
        /// The fleet file (default: the one in force, `gantry info`).
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Every instance gantry owns in the fleet file's cloud pools (found by its tags): pool,
    /// node, state, zone, market, age and $/h — what runs up a bill, daemon or not.
    Ls {
        #[arg(long)]
        config: Option<PathBuf>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(cmd: CloudCmd) -> Result<(), super::CliError> {
    let (config, output) = match &cmd {
        CloudCmd::Check { config, output } | CloudCmd::Ls { config, output } => {
            (config.clone(), *output)
        }
    };
    let (source, cfg, _) = super::fleet::load(config)?;
    let pools: Vec<&PoolConfig> = cfg.pools.iter().filter(|p| p.buys_machines()).collect();
    if pools.is_empty() {
        return Err(super::CliError::from(format!(
            "the fleet file ({source}) has no cloud pools (backend = \"ec2\" or \"lambda\"): nothing to check or list"
        )));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| super::CliError::from(e.to_string()))?;
    match cmd {
        CloudCmd::Check { .. } => {
            let checks: Vec<Check> = pools.iter().map(|p| rt.block_on(check(p))).collect();
            let failed = checks.iter().any(|c| !c.ok);
            if output.is_data() {
                print_as(output, &checks)?;
            } else {
                for c in &checks {
                    println!(
                        "{} pool {} ({}, region {}, fleet {}): {}",
                        if c.ok { "ok  " } else { "FAIL" },
                        c.pool,
                        c.backend,
                        c.region,
                        c.fleet,
                        if c.ok { "can buy" } else { "cannot buy" }
                    );
                    for l in &c.lines {
                        println!("     {l}");
                    }
                }
            }
            if failed {
                return Err(super::CliError {
                    code: 1,
                    message: String::new(),
                });
            }
            Ok(())
        }
        CloudCmd::Ls { .. } => {
            let mut rows = Vec::new();
            for p in pools {
                let found = rt
                    .block_on(by_pool::list(p))
                    .map_err(|why| super::CliError::from(format!("pool `{}`: {why}", p.name)))?;
                rows.extend(found.into_iter().map(|i| Row {
                    pool: p.name.clone(),
                    region: p.region.clone(),
                    dollars_per_hour: p.price_per_hour,
                    instance: i,
                }));
            }
            if output.is_data() {
                return Ok(print_as(output, &rows)?);
            }
            print_rows(&rows);
            Ok(())
        }
    }
}

/// What `gantry cloud check` says of one pool.
#[derive(Serialize)]
struct Check {
    pool: String,
    backend: String,
    region: String,
    fleet: String,
    ok: bool,
    lines: Vec<String>,
}

async fn check(p: &PoolConfig) -> Check {
    let (_, fleet) = by_pool::places_and_fleet(p);
    let lines = by_pool::check(p).await;
    Check {
        pool: p.name.clone(),
        backend: p.backend().name().to_string(),
        region: p.region.clone(),
        fleet,
        ok: lines.iter().all(|(ok, _)| *ok),
        lines: lines
            .into_iter()
            .map(|(ok, l)| if ok { l } else { format!("✗ {l}") })
            .collect(),
    }
}

#[derive(Serialize)]
struct Row {
    pool: String,
    region: String,
    dollars_per_hour: f64,
    #[serde(flatten)]
    instance: Instance,
}

fn print_rows(rows: &[Row]) {
    if rows.is_empty() {
        println!("(gantry owns no instances in these pools)");
        return;
    }
    println!(
        "{:<12} {:<14} {:<21} {:<13} {:<12} {:<9} {:>9}  LAUNCHED",
        "POOL", "NODE", "INSTANCE", "STATE", "ZONE", "MARKET", "$/H"
    );
    let mut live = 0.0;
    for r in rows {
        let i = &r.instance;
        if i.live() {
            live += r.dollars_per_hour;
        }
        println!(
            "{:<12} {:<14} {:<21} {:<13} {:<12} {:<9} {:>9.2}  {}",
            r.pool,
            i.node.as_deref().unwrap_or("?"),
            i.id,
            i.state,
            i.zone.as_deref().unwrap_or("?"),
            if i.spot { "spot" } else { "on-demand" },
            r.dollars_per_hour,
            i.launched.as_deref().unwrap_or("?"),
        );
    }
    println!("\n{} instance(s), ${live:.2}/h while they run", rows.len());
}
