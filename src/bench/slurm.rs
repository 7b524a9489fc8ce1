//! `gantry bench slurm`: the daemon's time to refresh a large Slurm cluster's state from
//! slurmrestd. The JSON is what the real slurmrestd of the test cluster answered (Slurm 22.05,
//! API v0.0.38, recorded by `GANTRY_RECORD_SLURM=1 cargo test --test clusters the_bench_recording`,
//! which without the variable checks the recording still has every field the server sends),
//! scaled to N nodes and M jobs — every field the server sends kept, names, ids, GPUs and
//! states rewritten — and served as slurmrestd serves it (indented, over HTTP on a Unix socket).
//!
//! Three figures: reading the cluster (three GETs and the parse into gantry's inventory); a
//! pool worker's whole refresh (that read, following gantry's runs, saying which nodes changed
//! and the foreign work on each), once cold and then steady; and the daemon's state from
//! start to every node up with the cluster's own jobs' GPUs held out.

use super::quantile;
use crate::backend::slurm::rest::SlurmRest;
use crate::backend::slurm::runner::Probe;
use crate::backend::RunEvent;
use crate::daemon::state::{Messages, State, StateOptions};
use serde::Serialize;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

const NODES: &str = include_str!("slurm/v0.0.38/nodes.json");
const PARTITIONS: &str = include_str!("slurm/v0.0.38/partitions.json");
const JOBS: &str = include_str!("slurm/v0.0.38/jobs.json");

pub struct SlurmBenchConfig {
    pub nodes: usize,
    pub gpus_per_node: u32,
    pub jobs: usize,
    /// Steady refreshes timed.
    pub refreshes: usize,
    pub dir: PathBuf,
}

#[derive(Clone, Debug, Serialize)]
pub struct SlurmBenchReport {
    pub api: String,
    pub nodes: usize,
    pub gpus: usize,
    pub jobs: usize,
    pub running_jobs: usize,
    /// gantry's own runs among the running jobs (followed by the worker).
    pub gantry_runs: usize,
    /// What one refresh reads (the three answers).
    pub bytes: usize,
    pub read_p50_ms: f64,
    pub read_max_ms: f64,
    pub cold_refresh_ms: f64,
    pub cold_events: usize,
    pub refresh_p50_ms: f64,
    pub refresh_max_ms: f64,
    /// Daemon start (state opened, slurmrestd connected) to every node up and the foreign
    /// GPUs held.
    pub first_view_s: f64,
    pub foreign_gpus_held: usize,
}

/// The three answers a refresh reads.
struct Cluster {
    nodes: Vec<u8>,
    partitions: Vec<u8>,
    jobs: Vec<u8>,
    running: usize,
    gantry: usize,
    names: Vec<String>,
}

fn template(
    doc: &str,
    list: &str,
    pick: impl Fn(&Value) -> bool,
) -> Result<(Value, Value), String> {
    let v: Value = serde_json::from_str(doc).map_err(|e| format!("recorded {list}: {e}"))?;
    let item = v[list]
        .as_array()
        .and_then(|a| a.iter().find(|x| pick(x)))
        .cloned()
        .ok_or(format!("recorded {list}: none to scale"))?;
    Ok((v, item))
}

/// The recorded cluster at `nodes` × `gpus` GPUs and `jobs` jobs: three running jobs of two
/// GPUs on most nodes (one of them gantry's on every tenth), every hundredth node drained,
/// the rest of the jobs pending for resources, priority or a QOS limit. With `gantry_runs`
/// false, gantry's jobs are the cluster's own (a daemon that did not submit them would cancel
/// them).
fn scale(nodes: usize, gpus: u32, jobs: usize, gantry_runs: bool) -> Result<Cluster, String> {
    let (mut node_doc, node) = template(NODES, "nodes", |_| true)?;
    let (mut job_doc, run) = template(JOBS, "jobs", |j| {
        j["job_state"] == "RUNNING" && j["comment"] == ""
    })?;
    let (_, ours) = template(JOBS, "jobs", |j| {
        j["comment"]
            .as_str()
            .is_some_and(|c| c.starts_with("gantry:"))
    })?;
    let (_, wait) = template(JOBS, "jobs", |j| j["job_state"] == "PENDING")?;
    let (mut part_doc, part) = template(PARTITIONS, "partitions", |_| true)?;
    let names: Vec<String> = (0..nodes).map(|i| format!("gpu-{i:04}")).collect();
    let per = 2u32.min(gpus);
    let slots = gpus.checked_div(per).unwrap_or(0).min(3);
    let (mut out_nodes, mut out_jobs) = (Vec::new(), Vec::new());
    let (mut running, mut gantry, mut id) = (0, 0, 1u64);
    for (i, name) in names.iter().enumerate() {
        let drained = i % 100 == 99;
        let here = if drained { 0 } else { slots };
        let used = here * per;
        let mut n = node.clone();
        n["name"] = json!(name);
        n["hostname"] = json!(name);
        n["gres"] = json!(format!("gpu:h100:{gpus}"));
        n["gres_used"] = json!(if used == 0 {
            "gpu:h100:0(IDX:N/A)".to_string()
        } else {
            format!("gpu:h100:{used}(IDX:0-{})", used - 1)
        });
        n["state"] = json!(match (used, drained) {
            (_, true) | (0, _) => "idle",
            (u, _) if u == gpus => "allocated",
            _ => "mixed",
        });
        n["state_flags"] = json!(if drained { vec!["DRAIN"] } else { vec![] });
        n["reason"] = json!(if drained { "fan failure" } else { "" });
        out_nodes.push(n);
        for k in 0..here {
            if out_jobs.len() >= jobs {
                break;
            }
            let mine = gantry_runs && i % 10 == 0 && k == 0;
            let mut j = if mine { ours.clone() } else { run.clone() };
            let first = k * per;
            j["job_id"] = json!(id);
            j["name"] = json!(if mine {
                format!("gantry-{id}")
            } else {
                format!("train-{id}")
            });
            j["comment"] = json!(if mine {
                format!("gantry:{id}:t{id}:0")
            } else {
                String::new()
            });
            j["user_name"] = json!(format!("user{}", id % 97));
            j["account"] = json!(format!("lab{}", id % 13));
            j["nodes"] = json!(name);
            j["required_nodes"] = json!("");
            j["batch_host"] = json!(name);
            j["tres_per_node"] = json!(format!("gres:gpu:h100:{per}"));
            j["gres_detail"] = json!([format!("gpu:h100:{per}(IDX:{first}-{})", first + per - 1)]);
            j["job_resources"]["nodes"] = json!(name);
            if let Some(a) = j["job_resources"]["allocated_nodes"].get_mut(0) {
                a["nodename"] = json!(name);
            }
            out_jobs.push(j);
            running += 1;
            gantry += usize::from(mine);
            id += 1;
        }
    }
    let reasons = ["Resources", "Priority", "QOSMaxGRESPerUser", "Dependency"];
    while out_jobs.len() < jobs {
        let mut j = wait.clone();
        j["job_id"] = json!(id);
        j["name"] = json!(format!("sweep-{id}"));
        j["user_name"] = json!(format!("user{}", id % 97));
        j["account"] = json!(format!("lab{}", id % 13));
        j["state_reason"] = json!(reasons[id as usize % reasons.len()]);
        j["required_nodes"] = json!("");
        j["tres_per_node"] = json!(format!("gres:gpu:h100:{}", 1 + id % 8));
        out_jobs.push(j);
        id += 1;
    }
    node_doc["nodes"] = Value::Array(out_nodes);
    job_doc["jobs"] = Value::Array(out_jobs);
    let mut p = part;
    p["nodes"] = json!(format!("gpu-[0000-{:04}]", nodes.saturating_sub(1)));
    part_doc["partitions"] = json!([p]);
    let body = |v: &Value| serde_json::to_vec_pretty(v).map_err(|e| e.to_string());
    Ok(Cluster {
        nodes: body(&node_doc)?,
        partitions: body(&part_doc)?,
        jobs: body(&job_doc)?,
        running,
        gantry,
        names,
    })
}

type Served = Arc<RwLock<Arc<Cluster>>>;

/// Serves `cluster` as slurmrestd v0.0.38 does, on a Unix socket at `path`.
fn serve(runtime: &tokio::runtime::Runtime, path: &Path, cluster: Served) -> Result<(), String> {
    use axum::{extract::State as With, http::StatusCode, routing::get, Router};
    let answer = |what: &'static str| {
        move |With(c): With<Served>| async move {
            let c = c.read().unwrap_or_else(|e| e.into_inner()).clone();
            let body = match what {
                "nodes" => c.nodes.clone(),
                "partitions" => c.partitions.clone(),
                _ => c.jobs.clone(),
            };
            (StatusCode::OK, [("content-type", "application/json")], body)
        }
    };
    let ping = r#"{"meta":{},"errors":[],"pings":[{"hostname":"bench","ping":"UP","status":0,"mode":"primary"}]}"#;
    let app = Router::new()
        .route("/slurm/v0.0.38/nodes", get(answer("nodes")))
        .route("/slurm/v0.0.38/partitions", get(answer("partitions")))
        .route("/slurm/v0.0.38/jobs", get(answer("jobs")))
        .route("/slurm/v0.0.38/ping", get(move || async move { ping }))
        .with_state(cluster);
    let _ = std::fs::remove_file(path);
    let listener = runtime
        .block_on(async { tokio::net::UnixListener::bind(path) })
        .map_err(|e| format!("{}: {e}", path.display()))?;
    runtime.spawn(async move { axum::serve(listener, app).await });
    Ok(())
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1000.0
}

fn fleet(url: &str, names: &[String], gpus: u32) -> String {
    let hosts: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!(
        "[[teams]]\nname = \"bench\"\n\n[[pools]]\nprovider = \"slurm\"\nregion = \"hpc\"\nzone = \"dc\"\nname = \"bench\"\ninstance_type = \"node\"\ngpu = \"H100\"\ngpus_per_node = {gpus}\nvram_gb = 80\ncpus = 4\nmemory_gb = 1\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [{}]\n[pools.slurm]\nslurmrestd = \"{url}\"\nuser = \"bench\"\n",
        hosts.join(", ")
    )
}

pub fn run(c: &SlurmBenchConfig) -> Result<SlurmBenchReport, String> {
    std::fs::create_dir_all(&c.dir).map_err(|e| format!("{}: {e}", c.dir.display()))?;
    let cluster = Arc::new(scale(c.nodes, c.gpus_per_node, c.jobs, true)?);
    let served: Served = Arc::new(RwLock::new(cluster.clone()));
    let runtime = crate::daemon::server::runtime()?;
    let socket = c.dir.join("slurmrestd.sock");
    serve(&runtime, &socket, served.clone())?;
    let url = format!("unix:{}", socket.display());

    let mut rest = SlurmRest::connect(&url, Some("bench".into()), None)?;
    // Each read timed whole (the daemon reads a queue this large less often).
    rest.read_the_queue_each_time();
    let mut reads = Vec::new();
    let mut inv = None;
    for _ in 0..c.refreshes.max(1) {
        let t = Instant::now();
        inv = Some(rest.inventory()?);
        reads.push(ms(t));
    }
    let inv = inv.unwrap_or_default();
    if inv.nodes.len() != c.nodes || inv.jobs.len() != c.jobs {
        return Err(format!(
            "read {} nodes and {} jobs of {} and {}",
            inv.nodes.len(),
            inv.jobs.len(),
            c.nodes,
            c.jobs
        ));
    }
    reads.sort_by(f64::total_cmp);

    let mut probe = Probe::new(&url, Some("bench".into()), cluster.names.clone());
    let t = Instant::now();
    let cold = probe.refresh();
    let cold_refresh_ms = ms(t);
    if let Some(RunEvent::Down { why, .. }) = cold.first() {
        return Err(why.clone());
    }
    let mut steady = Vec::new();
    for _ in 0..c.refreshes.max(1) {
        let t = Instant::now();
        probe.refresh();
        steady.push(ms(t));
    }
    steady.sort_by(f64::total_cmp);

    // The daemon itself: a cluster of only the cluster's own jobs (gantry's own there would
    // be cancelled as runs this daemon does not know).
    *served.write().unwrap_or_else(|e| e.into_inner()) =
        Arc::new(scale(c.nodes, c.gpus_per_node, c.jobs, false)?);
    let cfg =
        crate::config::fleet::parse("bench fleet", &fleet(&url, &cluster.names, c.gpus_per_node))
            .map_err(|e| e.to_string())?;
    let opts = StateOptions {
        messages: Messages::File(c.dir.join("daemon.log")),
        ..StateOptions::default()
    };
    let want = (cluster.running * 2) as u32;
    let t = Instant::now();
    let mut state = State::open(&c.dir.join("bench.db"), &cfg, &opts).map_err(|e| e.to_string())?;
    let mut last = Instant::now();
    loop {
        let (up, all) = state.hosts_up();
        if up == all && state.foreign_gpus_held() as u32 >= want {
            break;
        }
        if t.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "after 120 s: {up} of {all} nodes up, {} foreign GPUs held of {want}",
                state.foreign_gpus_held()
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
        let dt = last.elapsed().as_secs_f64();
        last = Instant::now();
        state.advance(dt).map_err(|e| e.to_string())?;
    }
    let first_view_s = t.elapsed().as_secs_f64();
    let foreign_gpus_held = state.foreign_gpus_held();
    drop(state);
    Ok(SlurmBenchReport {
        api: inv.api,
        nodes: c.nodes,
        gpus: c.nodes * c.gpus_per_node as usize,
        jobs: c.jobs,
        running_jobs: cluster.running,
        gantry_runs: cluster.gantry,
        bytes: cluster.nodes.len() + cluster.partitions.len() + cluster.jobs.len(),
        read_p50_ms: quantile(&reads, 0.5),
        read_max_ms: reads.last().copied().unwrap_or(0.0),
        cold_refresh_ms,
        cold_events: cold.len(),
        refresh_p50_ms: quantile(&steady, 0.5),
        refresh_max_ms: steady.last().copied().unwrap_or(0.0),
        first_view_s,
        foreign_gpus_held,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scaled cluster reads back as what it was made to be.
    #[test]
    fn the_scaled_cluster_reads_as_made() {
        let c = scale(100, 8, 400, true).unwrap();
        let v: Value = serde_json::from_slice(&c.nodes).unwrap();
        let nodes: Vec<_> = v["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| {
                let raw = serde_json::from_value(n.clone()).unwrap();
                crate::backend::slurm::inventory::node(&raw).unwrap()
            })
            .collect();
        assert_eq!(nodes.len(), 100);
        assert!(nodes[0].usable() && !nodes[99].usable());
        let v: Value = serde_json::from_slice(&c.jobs).unwrap();
        let jobs: Vec<_> = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| {
                crate::backend::slurm::inventory::job(&serde_json::from_value(j.clone()).unwrap())
            })
            .collect();
        assert_eq!(jobs.len(), 400);
        assert_eq!(jobs.iter().filter(|j| j.running()).count(), c.running);
        assert_eq!((c.running, c.gantry), (297, 10));
        let on = |node: &str| -> u32 { jobs.iter().map(|j| j.gpus_on(node)).sum() };
        assert_eq!(on("gpu-0003"), 6);
        assert!(jobs
            .iter()
            .filter(|j| j.pending())
            .all(|j| !j.reason_code.is_empty()));
    }
}
