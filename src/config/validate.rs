//! The fleet file's checks once it parsed: each pool (its provider's own fields through
//! `ssh`, `slurm`, `kube`, `topology`), the teams, classes and calendar, each error at the
//! table it is about (file:line:col).

use super::fleet::*;

pub(super) fn validate(file: &str, text: &str, cfg: &FleetConfig) -> Result<(), ConfigError> {
    let error = |(line, col): (usize, usize), message: String| ConfigError {
        file: file.to_string(),
        line,
        col,
        message,
    };
    let at =
        |table: &str, i: usize, message: String| error(table_position(text, table, i), message);
    // A pool's problem, at the line of the field it is about.
    let at_field = |i: usize, problem: super::problem::Problem| {
        let place = match problem.field {
            Some(field) => super::problem::field_position(text, i, field),
            None => table_position(text, "pools", i),
        };
        error(place, problem.message)
    };
    // Each backend's own table (and the topology), checked by its module.
    let checks: [fn(&PoolConfig, &str) -> super::problem::Checked; 6] = [
        super::ssh::validate,
        super::slurm::validate,
        super::ec2::validate,
        super::lambda::validate,
        super::kube::validate,
        super::topology::validate,
    ];
    for (i, p) in cfg.pools.iter().enumerate() {
        let name = format!("pool `{}/{}/{}/{}`", p.provider, p.region, p.zone, p.name);
        if let Some(j) = cfg.pools[..i].iter().position(|q| {
            (&q.provider, &q.region, &q.zone, &q.name) == (&p.provider, &p.region, &p.zone, &p.name)
        }) {
            return Err(at(
                "pools",
                i,
                format!("{name} is defined twice (first as pool #{})", j + 1),
            ));
        }
        for check in checks {
            check(p, &name).map_err(|problem| at_field(i, problem))?;
        }
        if let Some(rt) = &p.container_runtime {
            use super::fleet::RUNTIMES;
            let message = if !p.is_local() && !p.is_ssh() {
                Some(format!("{name}: `container_runtime` is for provider = \"local\" and \"ssh\" pools (a Kubernetes pool runs images as pods)"))
            } else if !RUNTIMES.contains(&rt.as_str()) {
                Some(format!(
                    "{name}: container_runtime = \"{rt}\": allowed values are {}",
                    RUNTIMES.map(|r| format!("\"{r}\"")).join(", ")
                ))
            } else {
                None
            };
            if let Some(message) = message {
                return Err(at("pools", i, message));
            }
        }
        if let Some(bad) = p
            .tools
            .iter()
            .flatten()
            .find(|t| !crate::spec::mounts::TOOLS.contains(&t.as_str()))
        {
            return Err(at(
                "pools",
                i,
                format!(
                    "{name}: tools: `{bad}` is not a tool gantry knows for file_mounts; allowed: {}",
                    crate::spec::mounts::TOOLS.join(", ")
                ),
            ));
        }
        let auto = p.is_auto();
        if auto && !p.is_local() && !p.is_ssh() && !p.lists_cluster_nodes() {
            return Err(at(
                "pools",
                i,
                format!("{name}: gpu = \"auto\" (discover the GPUs: through NVML, or a cluster's node labels) is only for provider = \"local\", \"ssh\", \"kubernetes\" and \"slurm\" pools; declare this pool's `gpu` and `gpus_per_node`"),
            ));
        }
        if auto && p.is_local() && p.nodes != 1 {
            return Err(at(
                "pools",
                i,
                format!(
                    "{name}: a provider = \"local\" pool is this host: nodes = 1 (got {})",
                    p.nodes
                ),
            ));
        }
        if !auto && p.gpu.is_some() != (p.gpus_per_node > 0) {
            return Err(at("pools", i, format!("{name}: give `gpu` and `gpus_per_node` > 0 together (or neither, for CPU-only)")));
        }
        if p.gpus_per_node > 16 {
            return Err(at(
                "pools",
                i,
                format!("{name}: gpus_per_node {} (at most 16)", p.gpus_per_node),
            ));
        }
        if !auto && p.gpu.is_some() && p.vram_gb == 0 {
            return Err(at("pools", i, format!("{name}: vram_gb must be > 0")));
        }
        if p.max_dollars_per_hour.is_some_and(|d| !dollars(d)) {
            return Err(at(
                "pools",
                i,
                format!("{name}: max_dollars_per_hour must be a number ≥ 0 (US dollars an hour)"),
            ));
        }
        if !dollars(p.price_per_hour) {
            return Err(at(
                "pools",
                i,
                format!("{name}: price_per_hour must be a number ≥ 0"),
            ));
        }
        let max = p.max_nodes.unwrap_or(p.nodes);
        if p.min_nodes > p.nodes || p.nodes > max || max > 10_000 {
            return Err(at(
                "pools",
                i,
                format!(
                    "{name}: need min_nodes ≤ nodes ≤ max_nodes ≤ 10000 (got {} ≤ {} ≤ {max})",
                    p.min_nodes, p.nodes
                ),
            ));
        }
        if p.mig_gpus_per_node > p.gpus_per_node {
            return Err(at(
                "pools",
                i,
                format!("{name}: mig_gpus_per_node exceeds gpus_per_node"),
            ));
        }
        if !auto && p.mig_gpus_per_node > 0 && p.gpu.as_deref().and_then(mig_geometry).is_none() {
            return Err(at(
                "pools",
                i,
                format!(
                    "{name}: {} does not support MIG (known: H100, H200, A100, A100-80GB)",
                    p.gpu.as_deref().unwrap_or("a CPU pool")
                ),
            ));
        }
        if let Some(d) = &p.provisioning_delay {
            if crate::spec::parse_duration(d).is_none() {
                return Err(at(
                    "pools",
                    i,
                    format!("{name}: provisioning_delay `{d}` is not a duration like 5m"),
                ));
            }
        }
        if !(p.spot_interruptions_per_node_hour.is_finite()
            && (0.0..=10.0).contains(&p.spot_interruptions_per_node_hour))
        {
            return Err(at(
                "pools",
                i,
                format!("{name}: spot_interruptions_per_node_hour must be in 0..=10"),
            ));
        }
        if p.nodes_per_leaf == Some(0) || p.nodes_per_nvlink == Some(0) {
            return Err(at(
                "pools",
                i,
                format!("{name}: nodes_per_leaf and nodes_per_nvlink must be ≥ 1"),
            ));
        }
    }
    let r = &cfg.reclaim;
    let reclaim_at = |message: String| {
        let (line, col) = text.find("[reclaim]").map_or((1, 1), |o| position(text, o));
        ConfigError {
            file: file.to_string(),
            line,
            col,
            message,
        }
    };
    if !(r.idle_threshold_pct.is_finite() && (0.0..=100.0).contains(&r.idle_threshold_pct)) {
        return Err(reclaim_at(format!(
            "reclaim: idle_threshold_pct {} must be a percentage in 0..=100",
            r.idle_threshold_pct
        )));
    }
    if crate::spec::parse_duration(&r.idle_window)
        .is_none_or(|w| !(60.0..=7.0 * 86400.0).contains(&w))
    {
        return Err(reclaim_at(format!(
            "reclaim: idle_window `{}` must be a duration from 1m to 7d, e.g. 15m",
            r.idle_window
        )));
    }
    if let Some(m) = &cfg.scheduler.min_runtime {
        if crate::spec::parse_duration(m).is_none_or(|s| s > 86400.0) {
            let table = text.find("[scheduler]").unwrap_or(0);
            let key = text[table..]
                .find("min_runtime")
                .map_or(table, |k| table + k);
            let (line, col) = position(text, key);
            return Err(ConfigError {
                file: file.to_string(),
                line,
                col,
                message: format!(
                    "scheduler: min_runtime `{m}` must be a duration from 0s to 1d, e.g. 5m"
                ),
            });
        }
    }
    if let Err(message) = cfg.calendar.zone() {
        let table = text.find("[calendar]").unwrap_or(0);
        let key = text[table..].find("time_zone").map_or(table, |k| table + k);
        let (line, col) = position(text, key);
        return Err(ConfigError {
            file: file.to_string(),
            line,
            col,
            message,
        });
    }
    let s = &cfg.scale;
    let scale_at = |message: String| {
        let (line, col) = text.find("[scale]").map_or((1, 1), |o| position(text, o));
        ConfigError {
            file: file.to_string(),
            line,
            col,
            message,
        }
    };
    for (field, v) in [
        ("scale_down_after", &s.scale_down_after),
        ("spot_cooldown", &s.spot_cooldown),
    ] {
        if crate::spec::parse_duration(v).is_none_or(|d| d > 86_400.0) {
            return Err(scale_at(format!(
                "scale: {field} `{v}` must be a duration from 0s to 1d, e.g. 10m"
            )));
        }
    }
    if s.max_dollars_per_hour.is_some_and(|d| !dollars(d)) {
        return Err(scale_at(
            "scale: max_dollars_per_hour must be a number ≥ 0 (US dollars an hour)".to_string(),
        ));
    }
    let classes = classes_of(cfg);
    for (class, v) in &s.burst_after {
        if !classes.iter().any(|c| &c.name == class) {
            let names: Vec<&str> = classes.iter().map(|c| c.name.as_str()).collect();
            return Err(scale_at(format!(
                "scale: burst_after names class `{class}`; the classes are {}",
                names.join(", ")
            )));
        }
        if crate::spec::parse_duration(v).is_none_or(|d| d > 7.0 * 86_400.0) {
            return Err(scale_at(format!(
                "scale: burst_after.{class} `{v}` must be a duration from 0s to 7d, e.g. 1h"
            )));
        }
    }
    crate::model::validate_teams(&teams_of(cfg), &crate::model::default_classes()).map_err(
        |e| {
            let i = cfg
                .teams
                .iter()
                .position(|t| e.to_string().contains(&format!("`{}`", t.name)))
                .unwrap_or(0);
            at("teams", i, e.to_string())
        },
    )?;
    for (i, t) in cfg.teams.iter().enumerate() {
        for c in t.classes.iter().flatten() {
            if !classes.iter().any(|k| &k.name == c) {
                let names: Vec<&str> = classes.iter().map(|k| k.name.as_str()).collect();
                return Err(at(
                    "teams",
                    i,
                    format!(
                        "team `{}`: classes names `{c}`; the classes are {}",
                        t.name,
                        names.join(", ")
                    ),
                ));
            }
        }
        for (field, v) in [
            ("budget_monthly_usd", t.budget_monthly_usd),
            ("budget_monthly_gpu_hours", t.budget_monthly_gpu_hours),
        ] {
            if v.is_some_and(|b| !(b.is_finite() && b >= 0.0)) {
                return Err(at(
                    "teams",
                    i,
                    format!("team `{}`: {field} must be a number ≥ 0", t.name),
                ));
            }
        }
        for (field, v) in [
            ("max_gpus_per_user", t.max_gpus_per_user),
            (
                "max_dollars_per_hour_per_user",
                t.max_dollars_per_hour_per_user,
            ),
        ] {
            if let Some(why) = v.and_then(|v| limit_error(field, v)) {
                return Err(at("teams", i, format!("team `{}`: {why}", t.name)));
            }
        }
        if let Some(bad) = t
            .budget_alerts
            .iter()
            .flatten()
            .find(|a| !(a.is_finite() && **a > 0.0 && **a <= 10.0))
        {
            return Err(at(
                "teams",
                i,
                format!(
                    "team `{}`: budget_alerts {bad} must be a fraction of the budget in (0, 10], e.g. 0.8",
                    t.name
                ),
            ));
        }
    }
    validate_users(cfg, &at)?;
    validate_services(text, file, &cfg.services)?;
    if let Err(why) = crate::experiments::mlflow::check_settings(&cfg.mlflow) {
        return Err(at_section(text, file, "[mlflow]")(why));
    }
    validate_logs(text, file, &cfg.logs)
}

/// An error at a table's header (`[logs]`), or at the top of the file where it has none.
fn at_section<'a>(
    text: &'a str,
    file: &'a str,
    section: &'a str,
) -> impl Fn(String) -> ConfigError + 'a {
    move |message: String| {
        let o = text.find(section).unwrap_or(0);
        let (line, col) = super::fleet::position(text, o);
        ConfigError {
            file: file.to_string(),
            line,
            col,
            message,
        }
    }
}

/// `[services]`: addresses that are IP addresses, a port range `FIRST-LAST` from 1024 up.
fn validate_services(
    text: &str,
    file: &str,
    s: &super::fleet::ServiceSettings,
) -> Result<(), ConfigError> {
    let at = at_section(text, file, "[services]");
    if let Some(bad) = s
        .addresses
        .iter()
        .find(|a| a.parse::<std::net::IpAddr>().is_err())
    {
        return Err(at(format!(
            "services: addresses: `{}` is not an IP address (e.g. \"127.0.0.1\", \"10.0.0.5\")",
            bad.escape_debug()
        )));
    }
    if s.port_range().is_none() {
        return Err(at(format!(
            "services: ports `{}`: expected FIRST-LAST, both from 1024 to 65535, FIRST ≤ LAST (e.g. \"30000-30999\")",
            s.ports.escape_debug()
        )));
    }
    Ok(())
}

/// `[logs]`: a duration (or `forever`) and sizes above 0.
fn validate_logs(text: &str, file: &str, l: &super::fleet::LogSettings) -> Result<(), ConfigError> {
    let at = at_section(text, file, "[logs]");
    if let Some(k) = l.keep_for.as_deref().filter(|k| *k != "forever") {
        if crate::spec::parse_duration(k).is_none_or(|d| d < 1.0) {
            return Err(at(format!(
                "logs: keep_for `{k}` must be a duration of at least 1s (e.g. 30d, 12h) or \"forever\""
            )));
        }
    }
    for (field, v) in [
        ("max_job_mb", l.max_job_mb),
        ("max_total_mb", l.max_total_mb),
    ] {
        if v == Some(0) {
            return Err(at(format!(
                "logs: {field} must be above 0 (leave it out for no limit)"
            )));
        }
    }
    Ok(())
}

/// Why a per-user limit is not one: a number above 0 (0 would let nothing run; leave the
/// field out for no limit).
fn limit_error(field: &str, v: f64) -> Option<String> {
    (!(v.is_finite() && v > 0.0))
        .then(|| format!("{field} {v} must be a number above 0 (leave it out for no limit)"))
}

/// Each `[[users]]` entry: a name given once, at least one limit, each a number above 0.
fn validate_users(
    cfg: &FleetConfig,
    at: &dyn Fn(&str, usize, String) -> ConfigError,
) -> Result<(), ConfigError> {
    for (i, u) in cfg.users.iter().enumerate() {
        if u.name.trim().is_empty() {
            return Err(at(
                "users",
                i,
                "users: name is empty; give the user's name (the Unix account: the socket's user, or a token's --user)"
                    .to_string(),
            ));
        }
        if let Some(j) = cfg.users[..i].iter().position(|v| v.name == u.name) {
            return Err(at(
                "users",
                i,
                format!(
                    "user `{}` is listed twice (first as user #{})",
                    u.name,
                    j + 1
                ),
            ));
        }
        if u.max_gpus.is_none() && u.max_dollars_per_hour.is_none() && u.team.is_none() {
            return Err(at(
                "users",
                i,
                format!(
                    "user `{}`: nothing given; set team (who they act for on the socket), max_gpus, max_dollars_per_hour, or several",
                    u.name
                ),
            ));
        }
        if let Some(t) = u
            .team
            .as_deref()
            .filter(|t| !cfg.teams.iter().any(|x| x.name == *t))
        {
            let known: Vec<&str> = cfg.teams.iter().map(|t| t.name.as_str()).collect();
            return Err(at(
                "users",
                i,
                format!(
                    "user `{}`: team `{t}` is not a team of this fleet (teams: {})",
                    u.name,
                    known.join(", ")
                ),
            ));
        }
        for (field, v) in [
            ("max_gpus", u.max_gpus),
            ("max_dollars_per_hour", u.max_dollars_per_hour),
        ] {
            if let Some(why) = v.and_then(|v| limit_error(field, v)) {
                return Err(at("users", i, format!("user `{}`: {why}", u.name)));
            }
        }
    }
    Ok(())
}

/// An amount of US dollars (a price, a cap): a number, not negative.
fn dollars(v: f64) -> bool {
    v.is_finite() && v >= 0.0
}
