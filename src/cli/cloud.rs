//! `gantry cloud check` and `gantry cloud ls`: the clouds the fleet file's pools buy from, as
//! `sky check` and `sky status` show them — asked straight from each cloud's API with the usual
//! credentials, so they answer with no daemon running, and show what a daemon that died left
//! behind.

use super::{print_as, Output};
use gantry::backend::cloud::{by_pool, Instance};
use gantry::backend::registration::CloudRegistration;
use gantry::backend::registry::cloud_of;
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
    /// Every instance gantry owns (found by its tags) in the fleet file's cloud pools and in
    /// those the daemon's journal knows that left the file (bought from before, being given
    /// back): pool, node, state, zone, market, age and $/h — what runs up a bill, daemon or
    /// not.
    Ls {
        #[arg(long)]
        config: Option<PathBuf>,
        /// The journal read for the pools that left the fleet file when no daemon answers
        /// (default: the one in force, `gantry info`).
        #[arg(long)]
        db: Option<PathBuf>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(cmd: CloudCmd, target: &super::remote::Target) -> Result<(), super::CliError> {
    let (config, output) = match &cmd {
        CloudCmd::Check { config, output } | CloudCmd::Ls { config, output, .. } => {
            (config.clone(), *output)
        }
    };
    let (source, cfg, _) = super::fleet::load(config)?;
    let mut pools: Vec<&PoolConfig> = cfg.pools.iter().filter(|p| cloud_of(p).is_some()).collect();
    let left = match &cmd {
        CloudCmd::Ls { db, .. } => left_pools(target, &cfg, db.as_deref())?,
        CloudCmd::Check { .. } => Vec::new(),
    };
    pools.extend(left.iter());
    if pools.is_empty() {
        return Err(super::CliError::from(format!(
            "the fleet file ({source}) has no cloud pools (backend = {}): nothing to check or list",
            cloud_backends()
        )));
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| super::CliError::from(e.to_string()))?;
    match cmd {
        CloudCmd::Check { .. } => {
            let checks: Vec<Check> = pools
                .iter()
                .filter_map(|p| Some(rt.block_on(check(cloud_of(p)?, p))))
                .collect();
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
            // What runs on each node, where a daemon answers (else the instances alone).
            let running = running_on(target);
            let now = chrono::Utc::now();
            let mut rows = Vec::new();
            for (p, c) in pools.into_iter().filter_map(|p| Some((p, cloud_of(p)?))) {
                let found = rt
                    .block_on(by_pool::list(c, p))
                    .map_err(|why| super::CliError::from(format!("pool `{}`: {why}", p.name)))?;
                let gone = left.iter().any(|l| std::ptr::eq(l, p));
                rows.extend(found.into_iter().map(|i| {
                    Row {
                        pool: p.name.clone(),
                        left_the_fleet: gone,
                        backend: p.backend().name().to_string(),
                        region: p.region.clone(),
                        dollars_per_hour: p.price_per_hour,
                        age_s: i
                            .launched
                            .as_deref()
                            .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
                            .map(|t| {
                                (now - t.with_timezone(&chrono::Utc)).num_seconds().max(0) as f64
                            }),
                        jobs: running.as_ref().map(|r| {
                            i.node
                                .as_ref()
                                .and_then(|n| r.get(&(p.name.clone(), n.clone())))
                                .cloned()
                                .unwrap_or_default()
                        }),
                        instance: i,
                    }
                }));
            }
            if output.is_data() {
                return Ok(print_as(output, &rows)?);
            }
            print_rows(&rows);
            if running.is_none() {
                println!("(no daemon answers: what runs on each instance is not shown)");
            }
            Ok(())
        }
    }
}

/// The cloud pools the journal knows that `cfg` lacks (they left the fleet file; what they
/// bought is being given back): asked of the daemon, else read from its journal.
fn left_pools(
    target: &super::remote::Target,
    cfg: &gantry::config::fleet::FleetConfig,
    db: Option<&std::path::Path>,
) -> Result<Vec<PoolConfig>, super::CliError> {
    let known: Vec<(String, String)> = match target.client().ok().and_then(|mut c| {
        c.call::<Vec<gantry::api::KnownCloudPool>>("GET", "/v1/clouds", None)
            .ok()
    }) {
        Some(list) => list.into_iter().map(|k| (k.key, k.config)).collect(),
        None => {
            let path = db.map_or_else(
                || gantry::config::paths::from_env().journal,
                std::path::Path::to_path_buf,
            );
            if !path.exists() {
                return Ok(Vec::new());
            }
            gantry::daemon::journal::cloud_pools_at(&path)
                .map_err(super::CliError::from)?
                .into_iter()
                .map(|r| (r.key, r.config))
                .collect()
        }
    };
    let here: std::collections::HashSet<String> = cfg
        .pools
        .iter()
        .map(gantry::config::reload::key_text)
        .collect();
    Ok(known
        .into_iter()
        .filter(|(key, _)| !here.contains(key))
        .filter_map(|(_, config)| serde_json::from_str::<PoolConfig>(&config).ok())
        .collect())
}

/// The jobs on each node of the daemon's pools, by (pool name, node name); `None` where no
/// daemon answers.
fn running_on(
    target: &super::remote::Target,
) -> Option<std::collections::HashMap<(String, String), Vec<i64>>> {
    let mut c = target.client().ok()?;
    let fleet: gantry::api::FleetView = c.call("GET", "/v1/fleet", None).ok()?;
    let mut out = std::collections::HashMap::new();
    for (index, pool) in fleet.pools.iter().enumerate() {
        let Some(name) = pool.path.rsplit('/').next() else {
            continue;
        };
        let Ok(detail) =
            c.call::<gantry::api::PoolDetail>("GET", &format!("/v1/pools/{index}"), None)
        else {
            continue;
        };
        for n in detail.nodes {
            let mut jobs: Vec<i64> = n.gpus.iter().flat_map(|g| g.jobs.clone()).collect();
            jobs.sort_unstable();
            jobs.dedup();
            out.insert((name.to_string(), n.name), jobs);
        }
    }
    Some(out)
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

async fn check(c: &CloudRegistration, p: &PoolConfig) -> Check {
    let (_, fleet) = (c.places_and_fleet)(p);
    let lines = by_pool::check(c, p).await;
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
    /// Its pool left the fleet file (known from the journal): it is being given back.
    left_the_fleet: bool,
    backend: String,
    region: String,
    dollars_per_hour: f64,
    /// Since its launch, seconds (`None` where the cloud does not say: Lambda).
    age_s: Option<f64>,
    /// The daemon's jobs on it now (`None`: no daemon answered).
    jobs: Option<Vec<i64>>,
    #[serde(flatten)]
    instance: Instance,
}

fn print_rows(rows: &[Row]) {
    if rows.is_empty() {
        println!("(gantry owns no instances in these pools)");
        return;
    }
    println!(
        "{:<12} {:<16} {:<34} {:<12} {:<14} {:<9} {:>8} {:>7}  JOBS",
        "POOL", "NODE", "INSTANCE", "STATE", "ZONE/REGION", "MARKET", "$/H", "AGE"
    );
    let mut live = 0.0;
    for r in rows {
        let i = &r.instance;
        if i.live() {
            live += r.dollars_per_hour;
        }
        println!(
            "{:<12} {:<16} {:<34} {:<12} {:<14} {:<9} {:>8.2} {:>7}  {}",
            if r.left_the_fleet {
                format!("{}*", r.pool)
            } else {
                r.pool.clone()
            },
            i.node.as_deref().unwrap_or("?"),
            i.id,
            i.state,
            i.zone.as_deref().unwrap_or("?"),
            if i.spot { "spot" } else { "on-demand" },
            r.dollars_per_hour,
            r.age_s
                .map_or("?".to_string(), |s| { gantry::daemon::state::span(s) }),
            match &r.jobs {
                None => "?".to_string(),
                Some(j) if j.is_empty() => "idle".to_string(),
                Some(j) => j
                    .iter()
                    .map(|j| format!("job {j}"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        );
    }
    println!("\n{} instance(s), ${live:.2}/h while they run", rows.len());
    if rows.iter().any(|r| r.left_the_fleet) {
        println!("* its pool left the fleet file (the journal knows it): the daemon is ending its instances");
    }
}

/// The backends that are clouds, as a fleet file names them: `"ec2" or "lambda"`.
fn cloud_backends() -> String {
    let names: Vec<String> = gantry::config::fleet::Backend::ALL
        .into_iter()
        .filter(|b| gantry::backend::registry::of(*b).cloud.is_some())
        .map(|b| format!("\"{}\"", b.name()))
        .collect();
    names.join(" or ")
}
