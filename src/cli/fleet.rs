//! `gantry fleet` and `gantry info`: the fleet file in force, and the fleet a running daemon
//! holds (`fleet_live`, `pool_live`).

use super::table::cell;
use super::{print_as, CliError, Output};
use gantry::api::{PoolDetail, PoolRow};
use gantry::client::http::HttpClient;
use gantry::config::fleet::{self, FleetConfig, DEFAULT_FLEET};
use gantry::config::paths;
use serde::Serialize;
use std::path::PathBuf;

/// Which fleet file is in force: an explicit one, the user's, or the built-in simulated fleet.
/// The fleet file (`--config`, else the user's, else the built-in one): its name, the fleet,
/// and its path (`None` for the built-in one).
pub fn load(explicit: Option<PathBuf>) -> Result<(String, FleetConfig, Option<PathBuf>), String> {
    let p = paths::from_env();
    if explicit.is_none() {
        if let Some(unread) = paths::unread_user_fleet(&p) {
            eprintln!("gantry: warning: {}", paths::unread_warning(&p, &unread));
        }
    }
    let user = p.fleet_file;
    let path = explicit.or_else(|| user.exists().then_some(user));
    match path {
        Some(p) => {
            let name = p.display().to_string();
            let text = std::fs::read_to_string(&p)
                .map_err(|e| format!("{name}: cannot read the fleet file: {e}"))?;
            let cfg = fleet::parse(&name, &text).map_err(|e| e.to_string())?;
            let (cfg, said) = gantry::backend::discover_auto(&cfg);
            for line in said {
                eprintln!("gantry: {line}");
            }
            Ok((name.clone(), cfg, Some(p)))
        }
        None => Ok((
            "built-in".to_string(),
            fleet::parse("built-in", DEFAULT_FLEET).map_err(|e| e.to_string())?,
            None,
        )),
    }
}

/// `load`, with the pools of `gpu = "auto"` Kubernetes pools read from their clusters (what
/// the daemon does when it opens), for the commands that show or check against the fleet
/// without a daemon.
pub fn load_built(
    explicit: Option<PathBuf>,
) -> Result<(String, FleetConfig, Option<PathBuf>), String> {
    let (source, cfg, file) = load(explicit)?;
    let (cfg, said, _) = gantry::backend::discover::expand(&cfg, &Default::default(), false);
    for line in said {
        eprintln!("gantry: {line}");
    }
    Ok((source, cfg, file))
}

#[derive(Serialize)]
struct FleetView<'a> {
    source: &'a str,
    simulated: bool,
    nodes: usize,
    gpus: usize,
    dollars_per_hour: f64,
    config: &'a FleetConfig,
}

pub fn run(config: Option<PathBuf>, print_default: bool, output: Output) -> Result<(), String> {
    if print_default {
        print!("{DEFAULT_FLEET}");
        return Ok(());
    }
    let (source, cfg, file) = load_built(config)?;
    let simulated = file.is_none();
    let built = fleet::fleet_of(&cfg);
    let dollars: f64 = cfg
        .pools
        .iter()
        .map(|p| p.price_per_hour * f64::from(p.nodes))
        .sum();
    if output.is_data() {
        return print_as(
            output,
            &FleetView {
                source: &source,
                simulated,
                nodes: built.nodes.len(),
                gpus: built.gpu_count(),
                dollars_per_hour: dollars,
                config: &cfg,
            },
        );
    }
    let label = if simulated {
        " — SIMULATED (the built-in demo fleet; `gantry fleet --print-default` shows it)"
    } else {
        ""
    };
    println!("fleet from {source}{label}");
    println!(
        "{:<40} {:<34} {:>11} {:<9} {:>10} {:>9} {:>6}",
        "pool", "instance", "GPUs/node", "capacity", "$/node-h", "nodes", "GPUs"
    );
    for p in &cfg.pools {
        let path = format!("{}/{}/{}/{}", p.provider, p.region, p.zone, p.name);
        // An auto pool not discovered yet says its GPUs are found when the daemon starts (it
        // read `0×auto`).
        let gpus = match p.gpu.as_deref() {
            None => "-".to_string(),
            Some(_) if p.is_auto() => "discovered".to_string(),
            Some(g) => format!("{}×{}", p.gpus_per_node, g),
        };
        let nodes = format!("{}/{}", p.nodes, p.max_nodes.unwrap_or(p.nodes));
        println!(
            "{:<40} {:<34} {:>11} {:<9} {:>10.2} {:>9} {:>6}",
            path,
            p.instance_type,
            gpus,
            p.capacity.to_string(),
            p.price_per_hour,
            nodes,
            u32::from(p.gpus_per_node) * p.nodes
        );
    }
    println!(
        "{} nodes, {} GPUs, ${:.2}/h at start; {} teams: {}",
        built.nodes.len(),
        built.gpu_count(),
        dollars,
        cfg.teams.len(),
        cfg.teams
            .iter()
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    let s = &cfg.scale;
    let patience = if s.burst_after.is_empty() {
        "capacity is bought for any class at once".to_string()
    } else {
        let each: Vec<String> = s
            .burst_after
            .iter()
            .map(|(class, d)| format!("{class} jobs after {d} of waiting"))
            .collect();
        format!("capacity is bought for {}", each.join(", "))
    };
    println!(
        "scale: empty cloud nodes go back after {}; on-demand for {} after a spot interruption; {patience}",
        s.scale_down_after, s.spot_cooldown
    );
    Ok(())
}

pub fn info(output: Output) -> Result<(), String> {
    let p = paths::from_env();
    if output.is_data() {
        return print_as(output, &p);
    }
    let state = |f: &PathBuf| {
        if f.exists() {
            "exists"
        } else {
            "absent: the built-in default is used"
        }
    };
    println!("gantry {}", env!("CARGO_PKG_VERSION"));
    println!("config dir  {}", p.config_dir.display());
    println!(
        "fleet file  {} ({})",
        p.fleet_file.display(),
        state(&p.fleet_file)
    );
    println!(
        "console     {} ({})",
        p.console_file.display(),
        state(&p.console_file)
    );
    println!("data dir    {}", p.data_dir.display());
    println!("journal     {}", p.journal.display());
    println!("socket      {}", p.socket.display());
    let cert = p.tls_dir.join("cert.pem");
    let tls = match std::fs::read(&cert) {
        Ok(pem) => gantry::tls::pem_fingerprint(&pem).unwrap_or_else(|| "unreadable".to_string()),
        Err(_) => "absent: `gantry daemon --listen ADDR --tls` makes it on first start".to_string(),
    };
    println!("tls cert    {} ({tls})", cert.display());
    println!("jobs run as {}", runs_jobs_as(&p.socket));
    println!("scope       {}", p.scope);
    for why in &p.chosen_by {
        println!("  chosen by {why}");
    }
    // Which fleet a daemon started now would run, and why.
    if p.fleet_file.exists() {
        println!("in force    the fleet file {}", p.fleet_file.display());
    } else {
        println!(
            "in force    the built-in SIMULATED fleet: {} does not exist (`gantry fleet --print-local > \"$(gantry info --fleet-file)\"` writes one for this host)",
            p.fleet_file.display()
        );
    }
    if let Some(unread) = paths::unread_user_fleet(&p) {
        println!("warning     {}", paths::unread_warning(&p, &unread));
    }
    println!("defaults    `gantry fleet --print-default` prints the built-in fleet file,");
    println!("            `gantry info --print-console` the documented console.toml");
    Ok(())
}

/// Who the jobs of the daemon at `socket` run as on its own host: each job's owner where the
/// daemon is root, else the daemon's user (it cannot be anyone else).
fn runs_jobs_as(socket: &std::path::Path) -> String {
    use std::os::unix::fs::MetadataExt;
    let (uid, whose) = match std::fs::metadata(socket) {
        Ok(m) => (m.uid(), "the daemon at the socket"),
        // SAFETY: geteuid has no preconditions.
        Err(_) => (unsafe { libc::geteuid() }, "a daemon you start now"),
    };
    if uid == 0 {
        format!("each job's owner ({whose} runs as root: the socket's user, or a token's --user)")
    } else {
        format!(
            "{} ({whose} is not root, so it runs every job on this host as itself)",
            gantry::unix_user::user_name(uid)
        )
    }
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
    let v: gantry::api::FleetView = c.call("GET", "/v1/fleet", None)?;
    if output.is_data() {
        return print_as(output, &v).map_err(CliError::from);
    }
    println!(
        "live fleet from the daemon at {}{}, {}: {} GPUs, {} busy, ${:.2}/h (${:.2}/h idle)",
        c.endpoint,
        if v.simulated { " (simulated)" } else { "" },
        v.calendar.time,
        v.gpus_total,
        v.gpus_busy,
        v.dollars_per_hour,
        v.idle_dollars_per_hour
    );
    pool_header();
    for p in &v.pools {
        println!("{}", pool_line(p));
        // A bought pool's doings, under its row.
        for n in &p.notes {
            println!("    {}", gantry::untrusted::bounded(n, 200));
        }
    }
    if !v.idle_by_cause.is_empty() {
        let parts: Vec<String> = v
            .idle_by_cause
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
    if let Some(h) = &v.host {
        println!("{}", h.summary());
    }
    Ok(())
}

/// One pool node by node and GPU by GPU (what the console's Fleet drill-down shows): `which`
/// is its index in `gantry fleet` or its path (or the end of it).
pub fn pool_live(c: &mut HttpClient, which: &str, output: Output) -> Result<(), CliError> {
    let fleet: gantry::api::FleetView = c.call("GET", "/v1/fleet", None)?;
    let paths: Vec<&str> = fleet.pools.iter().map(|p| p.path.as_str()).collect();
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
    let v: PoolDetail = c.call("GET", &format!("/v1/pools/{index}"), None)?;
    if output.is_data() {
        return print_as(output, &v).map_err(CliError::from);
    }
    println!(
        "pool {} — {} {} ${:.2}/node-h ({})",
        v.path,
        v.model,
        v.capacity,
        v.dollars_per_hour,
        if v.simulated {
            "simulated telemetry"
        } else {
            "measured through NVML"
        }
    );
    println!(
        "{:<28} {:<12} {:>3} {:>5} {:>17} {:>6} {:>5}  JOBS",
        "NODE", "STATE", "GPU", "UTIL", "VRAM USED/TOT MiB", "POWER", "TEMP"
    );
    for n in &v.nodes {
        let resources = n.resources_line();
        if n.gpus.is_empty() {
            println!(
                "{:<28} {:<12} {:>3}  {}",
                n.name,
                n.state,
                "-",
                gantry::untrusted::escape(&resources)
            );
        } else {
            println!("{:<28} {}", "", gantry::untrusted::escape(&resources));
        }
        for (k, g) in n.gpus.iter().enumerate() {
            fn comma<T: ToString>(v: &[T]) -> String {
                let items: Vec<String> = v.iter().map(T::to_string).collect();
                items.join(",")
            }
            let mut who = comma(&g.jobs);
            if !g.foreign_pids.is_empty() {
                who.push_str(&format!(" foreign pid {}", comma(&g.foreign_pids)));
            }
            if let Some(holder) = &g.foreign {
                who.push_str(&format!(" held by {holder}"));
            }
            // A GPU nothing measures (a Slurm node's) shows no numbers rather than zeros.
            let (util, used, power, temp) = if g.unmeasured {
                let none = || "-".to_string();
                (none(), none(), none(), none())
            } else {
                (
                    format!("{:.0}%", g.util_pct),
                    g.vram_used_mib.to_string(),
                    format!("{:.0} W", g.power_w),
                    format!("{:.0}°C", g.temp_c),
                )
            };
            println!(
                "{:<28} {:<12} {:>3} {:>5} {:>17} {:>6} {:>5}  {}",
                if k == 0 { n.name.as_str() } else { "" },
                if k == 0 { n.state.as_str() } else { "" },
                g.index,
                util,
                format!("{used}/{}", g.vram_total_mib),
                power,
                temp,
                who.trim()
            );
        }
        if let Some(note) = &n.note {
            println!("{:<28} {}", "", gantry::untrusted::bounded(note, 200));
        }
    }
    if !v.waiting.is_empty() {
        println!("\nwaiting in the backend's own queue for these nodes:");
        for w in &v.waiting {
            println!(
                "  {} — {} GPU(s) on {} node(s): {}",
                w.what, w.gpus, w.nodes, w.reason
            );
        }
    }
    Ok(())
}
