//! The fleet file (TOML): pools of nodes with their shape, topology and real prices, and the
//! teams with their quotas and budgets. Errors carry file:line:col.

use crate::model::{Fleet, FleetBuilder, PoolSpec, PriorityClass, Quota, Team};
use crate::spec::did_you_mean;
use serde::{Deserialize, Serialize};
use std::fmt;

pub use super::pool::*;

/// The built-in default: a simulated multi-cloud and on-prem fleet with real prices.
pub const DEFAULT_FLEET: &str = include_str!("default_fleet.toml");
/// A starting fleet file for one host with its GPUs discovered (`gantry fleet --print-local`).
pub const LOCAL_FLEET: &str = include_str!("local_fleet.toml");

/// The local fleet file with this host's CPUs and memory (`gantry fleet --print-local`).
pub fn local_fleet_for_this_host() -> String {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mem_gb = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map_or(1, |kib| (kib / (1024 * 1024)).max(1));
    LOCAL_FLEET
        .replacen("cpus = 16\n", &format!("cpus = {cpus}\n"), 1)
        .replacen("memory_gb = 64\n", &format!("memory_gb = {mem_gb}\n"), 1)
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ConfigError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for ConfigError {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FleetConfig {
    #[serde(default)]
    pub teams: Vec<TeamConfig>,
    #[serde(default)]
    pub pools: Vec<PoolConfig>,
    /// When a running job's GPUs count as idle (what `gantry reclaim` offers to free).
    #[serde(default)]
    pub reclaim: ReclaimSettings,
    /// How elastic pools grow and shrink.
    #[serde(default)]
    pub scale: ScaleSettings,
    /// The time zone of budget months and dates.
    #[serde(default)]
    pub calendar: super::calendar::CalendarSettings,
    /// Limits of one user (who submitted: the Unix user, the account a token was issued
    /// for), over all their
    /// running jobs whatever the team; they override the teams' `*_per_user` defaults.
    #[serde(default)]
    pub users: Vec<UserConfig>,
    /// How long hosts keep the logs of jobs that ended.
    #[serde(default)]
    pub logs: LogSettings,
    /// The scheduler's own settings.
    #[serde(default)]
    pub scheduler: SchedulerSettings,
    /// Where services' endpoints may listen.
    #[serde(default)]
    pub services: ServiceSettings,
    /// The experiment tracker jobs' runs are reported to.
    #[serde(default)]
    pub mlflow: MlflowSettings,
}

/// `[mlflow]`: the MLflow tracking server a job that names an experiment (`experiment:`, or
/// `MLFLOW_EXPERIMENT_NAME` in its `envs`) is reported to. The fleet's to name, not a job's:
/// the daemon reaches no address a caller chose. Credentials, where the server asks for them,
/// come from files the fleet file names (read by the daemon, never shown) or, as MLflow's own
/// clients read them, from the daemon's `MLFLOW_TRACKING_TOKEN` or
/// `MLFLOW_TRACKING_USERNAME`/`MLFLOW_TRACKING_PASSWORD`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MlflowSettings {
    /// `http://host:5000`, `https://…`; none: no job is reported.
    #[serde(default)]
    pub tracking_uri: Option<String>,
    /// A file holding the bearer token (`Authorization: Bearer …`).
    #[serde(default)]
    pub token_file: Option<std::path::PathBuf>,
    /// The user of HTTP basic auth (`mlflow server --app-name basic-auth`), its password in
    /// `password_file`.
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password_file: Option<std::path::PathBuf>,
}

/// `[services]`: the addresses and ports services' endpoints may be given. An endpoint is the
/// fleet's to allow, not a researcher's to choose: a researcher's `--endpoint` must name one
/// of `addresses` (default `127.0.0.1`) and a port in `ports` (default 30001–30999, where
/// SkyServe's load balancers start);
/// operators may also name any other address of this host (`0.0.0.0`), never a port below
/// 1024 or one of the daemon's own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServiceSettings {
    #[serde(default = "default_endpoint_addresses")]
    pub addresses: Vec<String>,
    /// `FIRST-LAST`, both from 1024 to 65535.
    #[serde(default = "default_endpoint_ports")]
    pub ports: String,
}

impl Default for ServiceSettings {
    fn default() -> Self {
        ServiceSettings {
            addresses: default_endpoint_addresses(),
            ports: default_endpoint_ports(),
        }
    }
}

fn default_endpoint_addresses() -> Vec<String> {
    vec!["127.0.0.1".to_string()]
}

fn default_endpoint_ports() -> String {
    "30001-30999".to_string()
}

impl ServiceSettings {
    /// The port range, where `ports` reads as one (`validate` has said why not otherwise).
    pub fn port_range(&self) -> Option<std::ops::RangeInclusive<u16>> {
        let (a, b) = self.ports.split_once('-')?;
        let (a, b): (u16, u16) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
        (1024 <= a && a <= b).then_some(a..=b)
    }

    /// The addresses researchers' endpoints may name, as addresses.
    pub fn ips(&self) -> Vec<std::net::IpAddr> {
        self.addresses
            .iter()
            .filter_map(|a| a.parse().ok())
            .collect()
    }
}

/// `[scheduler]`: `min_runtime` is how long a job runs before a higher class may preempt it
/// (default 5m: no churn of jobs that just started; a fleet whose serving must take GPUs at
/// once sets less, down to `0s`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSettings {
    pub min_runtime: Option<String>,
}

impl SchedulerSettings {
    /// `min_runtime` in seconds (checked at load).
    pub fn min_runtime_s(&self) -> Option<f64> {
        self.min_runtime
            .as_deref()
            .and_then(crate::spec::parse_duration)
    }
}

/// `[logs]`: each host (this one, SSH and cloud hosts) keeps an ended job's logs for
/// `keep_for` after its last write (default 30 days; `"forever"` keeps them), cuts each ended
/// job's logs to their last `max_job_mb`, and removes the oldest past `max_total_mb`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    pub keep_for: Option<String>,
    pub max_job_mb: Option<u64>,
    pub max_total_mb: Option<u64>,
}

/// The container runtimes a pool may name (`container_runtime`).
pub const RUNTIMES: [&str; 2] = ["docker", "podman"];

/// How long a host keeps the logs of ended jobs, as `[logs]` says (the agents apply it:
/// `backend::retention`). The limits; `None` is no limit of that kind.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Retention {
    pub keep_for_s: Option<f64>,
    pub max_job_bytes: Option<u64>,
    pub max_total_bytes: Option<u64>,
}

/// What `[logs]` says when it says nothing: 30 days.
pub const KEEP_LOGS_FOR: &str = "30d";

impl LogSettings {
    /// As the agents apply it (the file is checked first: a bad `keep_for` is refused there).
    pub fn retention(&self) -> Retention {
        let keep = self.keep_for.as_deref().unwrap_or(KEEP_LOGS_FOR);
        Retention {
            keep_for_s: (keep != "forever")
                .then(|| crate::spec::parse_duration(keep))
                .flatten(),
            max_job_bytes: self.max_job_mb.map(|m| m << 20),
            max_total_bytes: self.max_total_mb.map(|m| m << 20),
        }
    }
}

/// `[[users]]`: one user's limits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    /// The team this Unix user acts for on the daemon's socket, where it is opened to a group
    /// (`gantry daemon --socket-group`): a researcher of it. A user of the group the fleet
    /// file does not name is a viewer there.
    #[serde(default)]
    pub team: Option<String>,
    /// GPUs the user's running jobs may hold at once (fractions count as such).
    pub max_gpus: Option<f64>,
    /// What the user's running jobs may cost an hour, US dollars.
    pub max_dollars_per_hour: Option<f64>,
}

/// `[scale]`: when an empty cloud node goes back, how long a pool whose spot capacity was just
/// interrupted buys on-demand instead, and per priority class how long a job waits for
/// capacity already paid for before gantry buys some for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScaleSettings {
    #[serde(default = "default_scale_down_after")]
    pub scale_down_after: String,
    #[serde(default = "default_spot_cooldown")]
    pub spot_cooldown: String,
    /// Class name → duration; a class not named buys at once.
    #[serde(default)]
    pub burst_after: std::collections::BTreeMap<String, String>,
    /// The fleet's spending cap, US dollars an hour over every node paid for (reserved ones
    /// too): a buy that would pass it waits, and says so.
    pub max_dollars_per_hour: Option<f64>,
    /// Whether gantry moves checkpointing jobs to use what is paid for: drains an underused
    /// cloud node onto capacity already paid for (consolidation) and empties a fragmented
    /// paid node for a job that fits nowhere else (defragmentation). Each move costs the
    /// job a checkpoint and a restore.
    #[serde(default = "yes")]
    pub rebalance: bool,
    /// Whether the instances of a cloud pool that left the fleet file (the journal knows
    /// what it bought) are given back: yes by default; `false` keeps them, said at every start
    /// and reload, and listed by `gantry cloud ls` — paid until someone ends them.
    #[serde(default = "yes")]
    pub give_back_left_pools: bool,
}

fn yes() -> bool {
    true
}

fn default_scale_down_after() -> String {
    "10m".to_string()
}

fn default_spot_cooldown() -> String {
    "30m".to_string()
}

impl Default for ScaleSettings {
    fn default() -> Self {
        ScaleSettings {
            scale_down_after: default_scale_down_after(),
            spot_cooldown: default_spot_cooldown(),
            burst_after: Default::default(),
            max_dollars_per_hour: None,
            rebalance: true,
            give_back_left_pools: true,
        }
    }
}

/// The elastic settings of a (validated) fleet file, for `scheduler::scale`.
pub fn scale_of(cfg: &FleetConfig) -> crate::scheduler::scale::ScaleConfig {
    let d = crate::scheduler::scale::ScaleConfig::default();
    let secs = |v: &str, or: f64| crate::spec::parse_duration(v).unwrap_or(or);
    let classes = classes_of(cfg);
    crate::scheduler::scale::ScaleConfig {
        idle_window_s: secs(&cfg.scale.scale_down_after, d.idle_window_s),
        spot_cooldown_s: secs(&cfg.scale.spot_cooldown, d.spot_cooldown_s),
        burst_after_s: classes
            .iter()
            .map(|c| {
                cfg.scale
                    .burst_after
                    .get(&c.name)
                    .map_or(0.0, |v| secs(v, 0.0))
            })
            .collect(),
    }
}

/// `[reclaim]`: a job whose every GPU stayed below `idle_threshold_pct` for `idle_window` is
/// reclaimable.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReclaimSettings {
    #[serde(default = "default_idle_threshold")]
    pub idle_threshold_pct: f64,
    #[serde(default = "default_idle_window")]
    pub idle_window: String,
}

fn default_idle_threshold() -> f64 {
    5.0
}

fn default_idle_window() -> String {
    "15m".to_string()
}

impl Default for ReclaimSettings {
    fn default() -> Self {
        ReclaimSettings {
            idle_threshold_pct: default_idle_threshold(),
            idle_window: default_idle_window(),
        }
    }
}

impl ReclaimSettings {
    /// The scheduler's reclaim configuration (validated by `parse`).
    pub fn config(&self) -> crate::scheduler::reclaim::ReclaimConfig {
        crate::scheduler::reclaim::ReclaimConfig {
            threshold_pct: self.idle_threshold_pct,
            window_s: crate::spec::parse_duration(&self.idle_window).unwrap_or(900.0),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TeamConfig {
    pub name: String,
    #[serde(default = "one")]
    pub weight: f64,
    pub cohort: Option<String>,
    /// Guaranteed GPUs (no quota when absent).
    pub guaranteed: Option<u32>,
    #[serde(default)]
    pub borrow_limit: u32,
    pub lend_limit: Option<u32>,
    pub budget_monthly_usd: Option<f64>,
    /// A monthly GPU-hour budget, alone or with the dollar one (whichever is reached first).
    pub budget_monthly_gpu_hours: Option<f64>,
    /// Fractions of the budget that raise an alert event (default 0.5, 0.8, 1.0).
    pub budget_alerts: Option<Vec<f64>>,
    /// What happens at 100%: notify (default), block new submissions, or demote the team's
    /// new and pending jobs to the lowest priority class.
    #[serde(default)]
    pub budget_action: BudgetAction,
    /// The priority classes this team's jobs may have (all when absent): like a Slurm
    /// account's QOS list, so a researcher cannot submit at `serving` and preempt production.
    pub classes: Option<Vec<String>>,
    /// How many jobs the team may have waiting (pending or held) at once; a submission past
    /// it is refused (HTTP 429) until some start. Default 10,000.
    pub max_pending: Option<usize>,
    /// The most GPUs one user's running jobs may hold (over all their jobs) when that user's
    /// job is of this team and `[[users]]` does not name them.
    pub max_gpus_per_user: Option<f64>,
    /// The most one user's running jobs may cost an hour, likewise.
    pub max_dollars_per_hour_per_user: Option<f64>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BudgetAction {
    #[default]
    Notify,
    Block,
    Demote,
}

impl fmt::Display for BudgetAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetAction::Notify => "notify",
            BudgetAction::Block => "block",
            BudgetAction::Demote => "demote",
        })
    }
}

impl TeamConfig {
    /// Alert thresholds, ascending.
    pub fn alerts(&self) -> Vec<f64> {
        let mut a = self.budget_alerts.clone().unwrap_or(vec![0.5, 0.8, 1.0]);
        a.sort_by(f64::total_cmp);
        a
    }
}

fn one() -> f64 {
    1.0
}

/// Whether any pool asks for its GPUs to be discovered.
pub fn wants_discovery(cfg: &FleetConfig) -> bool {
    cfg.pools.iter().any(|p| p.is_local() && p.is_auto())
}

/// The line and column of a byte offset.
pub(super) fn position(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The position of the n-th `[[pools]]` (or `[[teams]]`) table, for errors found after parsing.
pub(super) fn table_position(text: &str, table: &str, index: usize) -> (usize, usize) {
    let header = format!("[[{table}]]");
    text.match_indices(&header)
        .nth(index)
        .map_or((1, 1), |(o, _)| position(text, o))
}

/// What every pool's table writes (a `gpu = "auto"` Slurm pool's come from its cluster).
const REQUIRED: [&str; 7] = [
    "region",
    "zone",
    "instance_type",
    "cpus",
    "memory_gb",
    "capacity",
    "price_per_hour",
];

/// The pool fields that moved into their backend's own table, and their names there.
const MOVED: [(&str, &str, &str); 14] = [
    ("slurmrestd", "slurm", "slurmrestd"),
    ("partition", "slurm", "partition"),
    ("slurm_user", "slurm", "user"),
    ("context", "kubernetes", "context"),
    ("kubeconfig", "kubernetes", "kubeconfig"),
    ("namespace", "kubernetes", "namespace"),
    ("image", "kubernetes", "image"),
    ("dcgm", "kubernetes", "dcgm"),
    ("node_selector", "kubernetes", "node_selector"),
    ("pool_label", "kubernetes", "pool_label"),
    ("block_label", "kubernetes", "block_label"),
    ("identity_file", "ssh", "identity_file"),
    ("ssh_config", "ssh", "config"),
    ("jump_host", "ssh", "jump_host"),
];

/// What to say of a pool field that now lives in its backend's table (a file written for an
/// older gantry), if `field` is one.
fn moved_to_table(field: &str) -> Option<String> {
    let (_, table, as_) = MOVED.iter().find(|(f, ..)| *f == field)?;
    Some(format!(
        "`{field}` is no longer a field of the pool itself: it goes in the pool's own [pools.{table}] table, as `{as_}` — write `[pools.{table}]` on a line after the pool's other fields, then `{as_} = …` under it (docs/backends.md shows each backend's table)"
    ))
}

pub fn parse(file: &str, text: &str) -> Result<FleetConfig, ConfigError> {
    let cfg: FleetConfig = toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |s| position(text, s.start));
        let msg = e.message().to_string();
        let message = match msg
            .strip_prefix("unknown field `")
            .and_then(|r| r.split_once('`'))
        {
            Some((field, rest)) => {
                let allowed: Vec<&str> = rest.split('`').skip(1).step_by(2).collect();
                if let Some(moved) = allowed
                    .contains(&"provider")
                    .then(|| moved_to_table(field))
                    .flatten()
                {
                    return ConfigError {
                        file: file.to_string(),
                        line,
                        col,
                        message: moved,
                    };
                }
                let hint = did_you_mean(field, &allowed)
                    .map_or(String::new(), |b| format!("; did you mean `{b}`?"));
                format!(
                    "unknown field `{field}`{hint} (allowed: {})",
                    allowed.join(", ")
                )
            }
            None => msg,
        };
        ConfigError {
            file: file.to_string(),
            line,
            col,
            message,
        }
    })?;
    let mut cfg = cfg;
    // Which of the fields every pool writes each pool's table has (serde fills in defaults).
    let raw: toml::Table = toml::from_str(text).unwrap_or_default();
    let tables: Vec<&toml::Table> = raw
        .get("pools")
        .and_then(toml::Value::as_array)
        .map(|a| a.iter().filter_map(toml::Value::as_table).collect())
        .unwrap_or_default();
    for (i, p) in cfg.pools.iter_mut().enumerate() {
        let has = |k: &str| tables.get(i).is_some_and(|t| t.contains_key(k));
        if p.is_slurm() && p.is_auto() {
            // Built from the cluster: what the file leaves out is named for it.
            for (k, v) in [
                ("region", "slurm"),
                ("zone", "default"),
                ("instance_type", "slurm node"),
            ] {
                if !has(k) {
                    let field = match k {
                        "region" => &mut p.region,
                        "zone" => &mut p.zone,
                        _ => &mut p.instance_type,
                    };
                    *field = v.to_string();
                }
            }
        } else if let Some(k) = REQUIRED.iter().find(|k| !has(k)) {
            let (line, col) = table_position(text, "pools", i);
            return Err(ConfigError {
                file: file.to_string(),
                line,
                col,
                message: format!("pool `{}`: missing field `{k}`", p.name),
            });
        }
        if let Some(message) = backend_problem(p).or_else(|| super::catalog::resolve(p).err()) {
            let (line, col) = table_position(text, "pools", i);
            return Err(ConfigError {
                file: file.to_string(),
                line,
                col,
                message,
            });
        }
        if p.nodes == nodes_unset() {
            if !p.is_ssh() && !p.lists_cluster_nodes() {
                let (line, col) = table_position(text, "pools", i);
                return Err(ConfigError {
                    file: file.to_string(),
                    line,
                    col,
                    message: format!(
                        "pool `{}`: missing field `nodes` (how many nodes it starts with)",
                        p.name
                    ),
                });
            }
            p.nodes = p.hosts.len() as u32;
        }
    }
    super::validate::validate(file, text, &cfg)?;
    Ok(cfg)
}

pub fn teams_of(cfg: &FleetConfig) -> Vec<Team> {
    cfg.teams
        .iter()
        .map(|t| Team {
            name: t.name.clone(),
            weight: t.weight,
            quota: t.guaranteed.map(|g| Quota {
                guaranteed: g,
                borrow_limit: t.borrow_limit,
                lend_limit: t.lend_limit,
                per_model: Vec::new(),
            }),
            cohort: t.cohort.clone(),
        })
        .collect()
}

pub fn classes_of(_cfg: &FleetConfig) -> Vec<PriorityClass> {
    crate::model::default_classes()
}

/// Builds the fleet the config describes (nodes at their start count).
pub fn fleet_of(cfg: &FleetConfig) -> Fleet {
    fleet_sized(cfg, |p| p.nodes)
}

/// Builds the fleet with every pool at its elastic maximum (what the daemon and the simulator
/// open, so that node ids never change as pools grow and shrink).
pub fn fleet_at_max(cfg: &FleetConfig) -> Fleet {
    fleet_sized(cfg, |p| p.max_nodes.unwrap_or(p.nodes).max(p.nodes))
}

/// Builds the fleet with `count(pool)` nodes per pool (e.g. every pool at its elastic maximum,
/// so that node ids stay fixed while a simulation grows and shrinks pools).
pub fn fleet_sized(cfg: &FleetConfig, count: impl Fn(&PoolConfig) -> u32) -> Fleet {
    let mut b = FleetBuilder::new();
    for p in &cfg.pools {
        // A `gpu = "auto"` pool not discovered yet (an SSH pool whose hosts have not
        // answered, or a file read where no daemon runs) is CPU-only until it is.
        let model = p.gpu.as_ref().filter(|g| *g != AUTO_GPU).map(|g| {
            b.model(g, p.vram_gb * 1024, mig_geometry(g))
                .expect("validated: VRAM > 0")
        });
        let pool = b
            .pool(PoolSpec {
                provider: &p.provider,
                region: &p.region,
                zone: &p.zone,
                name: &p.name,
                instance_type: &p.instance_type,
                model,
                gpus_per_node: if model.is_some() { p.gpus_per_node } else { 0 },
                cpu_milli: p.cpus * 1000,
                mem_mib: u64::from(p.memory_gb) * 1024,
                capacity: p.capacity,
                price_per_hour: p.price_per_hour,
            })
            .expect("validated pool");
        if p.container_runtime.is_some() || p.is_kube() {
            b.runs_images(pool);
        }
        if let Some(t) = &p.tools {
            b.declare_tools(pool, t.clone());
        }
        let n = count(p);
        let (leaves, nvlinks) = (
            super::topology::leaves(p, n),
            super::topology::nvlinks(p, n),
        );
        for i in 0..n {
            let node = p.node_name(i);
            b.node(
                pool,
                &node,
                leaves[i as usize].as_deref(),
                nvlinks[i as usize].as_deref(),
                if model.is_some() {
                    p.mig_gpus_per_node
                } else {
                    0
                },
            )
            .expect("validated node");
        }
    }
    b.build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_fleet_parses_and_builds() {
        let cfg = parse("default", DEFAULT_FLEET).unwrap();
        let fleet = fleet_of(&cfg);
        assert!(fleet.gpu_count() >= 200, "{}", fleet.gpu_count());
        let providers: std::collections::BTreeSet<&str> =
            fleet.regions.iter().map(|r| r.provider.as_str()).collect();
        assert_eq!(
            providers.into_iter().collect::<Vec<_>>(),
            vec!["aws", "gcp", "lambda", "nebius", "onprem"]
        );
        // On-prem DGX: 16 nodes over two InfiniBand leaves; the inference pool runs MIG.
        let dgx_leaves: std::collections::BTreeSet<_> = fleet
            .nodes
            .iter()
            .filter(|n| n.name.starts_with("onprem-dgx"))
            .filter_map(|n| n.leaf)
            .collect();
        assert_eq!(dgx_leaves.len(), 2);
        assert!(fleet
            .nodes
            .iter()
            .any(|n| n.gpus.iter().any(|g| g.mig.is_some())));
        assert_eq!(teams_of(&cfg).len(), 4);
    }

    /// Issue 34: `provider = "aws"` meant a simulation, silently. A pool now says how gantry
    /// drives it; a cloud's name alone is refused at the pool's line, a typo of a driver's name
    /// is pointed out, and a seller can be driven by a real backend (onprem over ssh).
    #[test]
    fn a_pool_says_how_it_is_driven_and_a_cloud_is_never_simulated_silently() {
        let pool = |lines: &str| {
            format!(
                "[[teams]]\nname = \"t\"\n\n[[pools]]\n{lines}\nregion = \"r\"\nzone = \"z\"\nname = \"p\"\ninstance_type = \"x\"\ncpus = 8\nmemory_gb = 8\ncapacity = \"on-demand\"\nprice_per_hour = 1.0\nnodes = 1\n"
            )
        };
        let e = parse("f.toml", &pool("provider = \"aws\"")).unwrap_err();
        assert_eq!((e.line, e.col), (4, 1), "{e}");
        assert!(
            e.message
                .contains("provider = \"aws\" says who sells its capacity")
                && e.message.contains("backend = \"simulated\"")
                && e.message
                    .contains("backend = \"ec2\" and a [pools.ec2] table"),
            "{e}"
        );
        let e = parse("f.toml", &pool("provider = \"lambda\"")).unwrap_err();
        assert!(
            e.message
                .contains("backend = \"lambda\" and a [pools.lambda] table"),
            "{e}"
        );
        let e = parse("f.toml", &pool("provider = \"gcp\"")).unwrap_err();
        assert!(
            e.message
                .contains("gantry cannot buy gcp capacity itself yet"),
            "{e}"
        );
        let e = parse("f.toml", &pool("provider = \"shh\"")).unwrap_err();
        assert!(
            e.message.contains("did you mean provider = \"ssh\"?"),
            "{e}"
        );
        let e = parse("f.toml", &pool("provider = \"aws\"\nbackend = \"ec2\"")).unwrap_err();
        assert!(e.message.contains("needs its [pools.ec2] table"), "{e}");
        let e = parse("f.toml", &pool("provider = \"aws\"\nbackend = \"lambda\"")).unwrap_err();
        assert!(e.message.contains("needs its [pools.lambda] table"), "{e}");
        let e = parse("f.toml", &pool("provider = \"aws\"\nbackend = \"gcp\"")).unwrap_err();
        assert!(
            e.message.contains("backend = \"gcp\" is not built yet"),
            "{e}"
        );
        let e = parse(
            "f.toml",
            &pool("provider = \"aws\"\nbackend = \"simulatd\""),
        )
        .unwrap_err();
        assert!(e.message.contains("did you mean `simulated`?"), "{e}");
        let e = parse("f.toml", &pool("provider = \"ssh\"\nbackend = \"slurm\"")).unwrap_err();
        assert!(e.message.contains("is driven by the ssh backend"), "{e}");
        let sim = parse(
            "f.toml",
            &pool("provider = \"aws\"\nbackend = \"simulated\""),
        )
        .unwrap();
        assert!(sim.pools[0].is_simulated());
        let onprem = parse(
            "f.toml",
            &pool("provider = \"onprem\"\nbackend = \"ssh\"\nhosts = [\"gpu1\"]")
                .replace("nodes = 1\n", ""),
        )
        .unwrap();
        assert!(onprem.pools[0].is_ssh() && !onprem.pools[0].is_simulated());
    }

    #[test]
    fn mistakes_point_at_the_place() {
        let e = parse(
            "f.toml",
            "[[pools]]\nprovider = \"aws\"\nbackend = \"simulated\"\nregoin = \"x\"\n",
        )
        .unwrap_err();
        assert_eq!((e.line, e.col), (4, 1));
        assert!(
            e.message
                .starts_with("unknown field `regoin`; did you mean `region`?"),
            "{e}"
        );
        let bad_price =
            DEFAULT_FLEET.replacen("price_per_hour = 14.582", "price_per_hour = -1.0", 1);
        let e = parse("f.toml", &bad_price).unwrap_err();
        assert!(
            e.message.contains(
                "pool `aws/us-east-1/use1-az3/p5-spot`: price_per_hour must be a number ≥ 0"
            ),
            "{e}"
        );
        assert!(e.line > 1);
        let e = parse("f.toml", "[[pools]]\nprovider = 3\n").unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        let window = DEFAULT_FLEET.replacen("idle_window = \"15m\"", "idle_window = \"soon\"", 1);
        let e = parse("f.toml", &window).unwrap_err();
        assert!(
            e.message
                .contains("reclaim: idle_window `soon` must be a duration from 1m to 7d"),
            "{e}"
        );
        assert_eq!(
            e.line,
            DEFAULT_FLEET
                .lines()
                .position(|l| l == "[reclaim]")
                .unwrap()
                + 1
        );
        let cfg = parse("f.toml", &DEFAULT_FLEET.replacen("\"15m\"", "\"2m\"", 1)).unwrap();
        assert_eq!(cfg.reclaim.config().window_s, 120.0);
        let auto = "[[pools]]\nprovider = \"aws\"\nbackend = \"simulated\"\nregion = \"r\"\nzone = \"z\"\nname = \"p\"\ninstance_type = \"i\"\ngpu = \"auto\"\ncpus = 1\nmemory_gb = 1\ncapacity = \"on-demand\"\nprice_per_hour = 1.0\nnodes = 1\n";
        let e = parse("f.toml", auto).unwrap_err();
        assert!(
            e.message.contains(
                "only for provider = \"local\", \"ssh\", \"kubernetes\" and \"slurm\" pools"
            ),
            "{e}"
        );
        let mig = DEFAULT_FLEET.replacen("mig_gpus_per_node = 4", "mig_gpus_per_node = 9", 1);
        assert!(parse("f.toml", &mig)
            .unwrap_err()
            .message
            .contains("mig_gpus_per_node exceeds"));
        let borrow = DEFAULT_FLEET.replacen("borrow_limit = 64", "borrow_limit = 130", 1);
        let e = parse("f.toml", &borrow).unwrap_err();
        assert!(
            e.message.contains(
                "team `applied`: borrow limit 130 is above what cohort `org` could ever lend (128 GPUs)"
            ),
            "{e}"
        );
    }

    #[test]
    fn the_scale_section_is_checked_and_read() {
        let scale_line = DEFAULT_FLEET.lines().position(|l| l == "[scale]").unwrap() + 1;
        let with = |from: &str, to: &str| DEFAULT_FLEET.replacen(from, to, 1);
        let e = parse(
            "f.toml",
            &with("burst_after = {}", "burst_after = { research = \"1h\" }"),
        )
        .unwrap_err();
        assert_eq!(e.line, scale_line, "{e}");
        assert!(
            e.message.contains(
                "burst_after names class `research`; the classes are serving, production, experiment"
            ),
            "{e}"
        );
        let e = parse(
            "f.toml",
            &with(
                "burst_after = {}",
                "burst_after = { experiment = \"later\" }",
            ),
        )
        .unwrap_err();
        assert!(
            e.message
                .contains("burst_after.experiment `later` must be a duration from 0s to 7d"),
            "{e}"
        );
        let e = parse("f.toml", &with("\"30m\"\n", "\"2d\"\n")).unwrap_err();
        assert!(
            e.message
                .contains("spot_cooldown `2d` must be a duration from 0s to 1d"),
            "{e}"
        );
        let cfg = parse(
            "f.toml",
            &with("burst_after = {}", "burst_after = { experiment = \"90m\" }").replacen(
                "scale_down_after = \"10m\"",
                "scale_down_after = \"5m\"",
                1,
            ),
        )
        .unwrap();
        let s = scale_of(&cfg);
        assert_eq!((s.idle_window_s, s.spot_cooldown_s), (300.0, 1800.0));
        assert_eq!(s.burst_after_s, vec![0.0, 0.0, 5400.0]);
        assert!(!s.may_buy_for(2, 5399.0) && s.may_buy_for(2, 5400.0) && s.may_buy_for(1, 0.0));
        // The built-in file asks for no patience: every class buys at once.
        assert!(scale_of(&parse("f.toml", DEFAULT_FLEET).unwrap())
            .burst_after_s
            .iter()
            .all(|&d| d == 0.0));
    }
}
