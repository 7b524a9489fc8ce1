//! `/metrics`: the published state in Prometheus' text exposition format (GPUs by pool, model
//! and state, jobs by state, queue depth and wait time by class, cycle latency, spend, idle
//! GPUs by cause), and each measured GPU and each running job's GPU with the DCGM exporter's
//! label names (`gpu`, `UUID`, `modelName`, `Hostname`), so that
//! `DCGM_FI_DEV_GPU_UTIL * on(UUID, Hostname) group_left(job, team) gantry_job_gpu_info` puts
//! gantry's jobs on DCGM's series.

use crate::daemon::actor::{Published, CYCLE_BUCKETS};
use crate::daemon::state::WAIT_BUCKETS;
use std::fmt::Write as _;

/// Prometheus text exposition of the published state.
pub fn render_metrics(p: &Published) -> String {
    let s = &p.snapshot;
    let mut o = String::new();
    let label = |v: &str| {
        v.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let _ = writeln!(
        o,
        "# HELP gantry_build_info The running gantry's version.\n# TYPE gantry_build_info gauge\ngantry_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    let _ = writeln!(o, "# HELP gantry_simulated 1 when the fleet is the simulated one.\n# TYPE gantry_simulated gauge\ngantry_simulated {}", u8::from(s.simulated));
    let _ = writeln!(
        o,
        "# HELP gantry_jobs Jobs not yet ended, by state, priority class and team.\n# TYPE gantry_jobs gauge"
    );
    let mut jobs: std::collections::BTreeMap<(&str, &str, &str), usize> = Default::default();
    for j in &s.jobs {
        if matches!(
            j.state.as_str(),
            "pending" | "held" | "running" | "preempting"
        ) {
            *jobs
                .entry((j.state.as_str(), j.class.as_str(), j.team.as_str()))
                .or_default() += 1;
        }
    }
    for ((state, class, team), n) in jobs {
        let _ = writeln!(
            o,
            "gantry_jobs{{state=\"{state}\",class=\"{}\",team=\"{}\"}} {n}",
            label(class),
            label(team)
        );
    }
    let _ = writeln!(
        o,
        "# HELP gantry_gpus GPUs by pool, model and state.\n# TYPE gantry_gpus gauge"
    );
    for pool in &s.pools {
        for (state, n) in [
            ("busy", pool.gpus_busy),
            ("idle", pool.gpus - pool.gpus_busy),
        ] {
            let _ = writeln!(
                o,
                "gantry_gpus{{pool=\"{}\",model=\"{}\",state=\"{state}\"}} {n}",
                label(&pool.path),
                label(&pool.model)
            );
        }
    }
    let _ = writeln!(o, "# HELP gantry_gpu_allocation_ratio Allocated GPUs over all GPUs.\n# TYPE gantry_gpu_allocation_ratio gauge\ngantry_gpu_allocation_ratio {}", s.gpus_busy as f64 / s.gpus_total.max(1) as f64);
    let _ = writeln!(o, "# HELP gantry_queue_depth Pending jobs by priority class.\n# TYPE gantry_queue_depth gauge");
    for (class, n) in &s.queue_by_class {
        let _ = writeln!(o, "gantry_queue_depth{{class=\"{}\"}} {n}", label(class));
    }
    let _ = writeln!(o, "# HELP gantry_wait_seconds Wait from submission to first start, by class and team.\n# TYPE gantry_wait_seconds histogram");
    for (class, teams) in &p.counters.waits {
        for (team, h) in teams {
            histogram(
                &mut o,
                "gantry_wait_seconds",
                &format!("class=\"{}\",team=\"{}\",", label(class), label(team)),
                &WAIT_BUCKETS,
                h,
            );
        }
    }
    let _ = writeln!(o, "# HELP gantry_job_preemptions_total Jobs preempted, by class and team.\n# TYPE gantry_job_preemptions_total counter");
    for (class, teams) in &p.counters.preempted {
        for (team, n) in teams {
            let _ = writeln!(
                o,
                "gantry_job_preemptions_total{{class=\"{}\",team=\"{}\"}} {n}",
                label(class),
                label(team)
            );
        }
    }
    let _ = writeln!(o, "# HELP gantry_cycle_seconds Scheduling cycle latency.\n# TYPE gantry_cycle_seconds histogram");
    histogram(
        &mut o,
        "gantry_cycle_seconds",
        "",
        &CYCLE_BUCKETS,
        &p.cycle_seconds,
    );
    let _ = writeln!(o, "# HELP gantry_preemptions_total Jobs preempted.\n# TYPE gantry_preemptions_total counter\ngantry_preemptions_total {}", p.counters.preemptions);
    let _ = writeln!(o, "# HELP gantry_scale_ups_total Elastic pools grown (simulated backend).\n# TYPE gantry_scale_ups_total counter\ngantry_scale_ups_total {}", p.counters.scale_ups);
    let _ = writeln!(o, "# HELP gantry_scale_downs_total Cloud nodes given back, consolidated ones included.\n# TYPE gantry_scale_downs_total counter\ngantry_scale_downs_total {}", p.counters.scale_downs);
    let _ = writeln!(o, "# HELP gantry_consolidated_nodes_total Cloud nodes given back after their jobs moved to capacity already paid for.\n# TYPE gantry_consolidated_nodes_total counter\ngantry_consolidated_nodes_total {}", p.counters.consolidated_nodes);
    let _ = writeln!(o, "# HELP gantry_reclaimed_gpu_seconds_total Idle GPU time reclaimed, GPU-seconds.\n# TYPE gantry_reclaimed_gpu_seconds_total counter\ngantry_reclaimed_gpu_seconds_total {}", p.counters.reclaimed_gpu_hours * 3600.0);
    let _ = writeln!(o, "# HELP gantry_spend_dollars_per_hour Spend rate of running jobs, by team.\n# TYPE gantry_spend_dollars_per_hour gauge");
    for t in &s.teams {
        let _ = writeln!(
            o,
            "gantry_spend_dollars_per_hour{{team=\"{}\"}} {}",
            label(&t.name),
            t.burn_per_hour
        );
    }
    let _ = writeln!(o, "# HELP gantry_spend_dollars_total Dollars spent by team and project (\"\" for none): finished runs, and running ones so far.\n# TYPE gantry_spend_dollars_total counter");
    for (team, project, usd) in &p.project_spend {
        let _ = writeln!(
            o,
            "gantry_spend_dollars_total{{team=\"{}\",project=\"{}\"}} {usd}",
            label(team),
            label(project)
        );
    }
    // Teams that never spent have their series too (at 0).
    for t in s
        .teams
        .iter()
        .filter(|t| !p.project_spend.iter().any(|(team, _, _)| team == &t.name))
    {
        let _ = writeln!(
            o,
            "gantry_spend_dollars_total{{team=\"{}\",project=\"\"}} 0",
            label(&t.name)
        );
    }
    let _ = writeln!(o, "# HELP gantry_idle_dollars_per_hour Price of GPUs nobody uses.\n# TYPE gantry_idle_dollars_per_hour gauge\ngantry_idle_dollars_per_hour {}", s.idle_dollars_per_hour);
    let _ = writeln!(
        o,
        "# HELP gantry_idle_gpus Paid GPUs nobody uses, by cause.\n# TYPE gantry_idle_gpus gauge"
    );
    for c in &s.idle_by_cause {
        let cause = serde_json::to_value(c.cause).unwrap_or_default();
        let _ = writeln!(
            o,
            "gantry_idle_gpus{{cause=\"{}\"}} {}",
            cause.as_str().unwrap_or("unknown"),
            c.gpus
        );
    }
    gpu_series(&mut o, p, &label);
    service_series(&mut o, p, &label);
    o
}

/// Per service: replicas wanted and ready, the scale signal, traffic through its endpoint,
/// latency, GPUs and $/h (`gantry services` in series).
fn service_series(o: &mut String, p: &Published, label: &dyn Fn(&str) -> String) {
    let services = &p.snapshot.services;
    if services.is_empty() {
        return;
    }
    type Figure = fn(&crate::api::services::ServiceRow) -> Option<f64>;
    let gauges: [(&str, &str, Figure); 9] = [
        (
            "gantry_service_replicas_wanted",
            "Replicas the autoscaler wants.",
            |s| Some(f64::from(s.wanted)),
        ),
        (
            "gantry_service_replicas_ready",
            "Replicas taking traffic.",
            |s| Some(f64::from(s.ready)),
        ),
        (
            "gantry_service_replicas",
            "Replicas not ended (starting, ready, not yet retired).",
            |s| Some(f64::from(s.live)),
        ),
        (
            "gantry_service_load",
            "The scale signal as last measured (requests per second, or the metric's sum).",
            |s| s.load,
        ),
        (
            "gantry_service_requests_per_second",
            "Requests per second through the endpoint over the QPS window.",
            |s| Some(s.qps),
        ),
        (
            "gantry_service_latency_p50_seconds",
            "Latency through the endpoint over the last minute, median.",
            |s| s.latency_p50_ms.map(|m| m / 1e3),
        ),
        (
            "gantry_service_latency_p99_seconds",
            "Latency through the endpoint over the last minute, 99th percentile.",
            |s| s.latency_p99_ms.map(|m| m / 1e3),
        ),
        (
            "gantry_service_gpus",
            "GPUs its running replicas hold.",
            |s| Some(s.gpus),
        ),
        (
            "gantry_service_dollars_per_hour",
            "What its running replicas cost per hour.",
            |s| Some(s.dollars_per_hour),
        ),
    ];
    for (name, help, f) in gauges {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge");
        for s in services {
            if let Some(v) = f(s) {
                let _ = writeln!(
                    o,
                    "{name}{{service=\"{}\",team=\"{}\"}} {v}",
                    label(&s.name),
                    label(&s.team)
                );
            }
        }
    }
    for (name, help, f) in [
        (
            "gantry_service_requests_total",
            "Requests through the endpoint since the daemon started.",
            (|s| s.requests) as fn(&crate::api::services::ServiceRow) -> u64,
        ),
        (
            "gantry_service_failed_requests_total",
            "Requests the endpoint answered itself with an error (no replica answered).",
            |s| s.failed_requests,
        ),
        (
            "gantry_service_turned_away_total",
            "Connections the endpoint closed at once: over its cap, or their peer address's.",
            |s| s.turned_away,
        ),
    ] {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter");
        for s in services {
            let _ = writeln!(
                o,
                "{name}{{service=\"{}\",team=\"{}\"}} {}",
                label(&s.name),
                label(&s.team),
                f(s)
            );
        }
    }
}

/// Per measured GPU (real hosts: the simulated fleet's are modelled, not exported one by one)
/// and per running job's GPU, with the DCGM exporter's label names.
fn gpu_series(o: &mut String, p: &Published, label: &dyn Fn(&str) -> String) {
    type Value = fn(&crate::daemon::state::GpuMetric) -> Option<f64>;
    let series: [(&str, &str, &str, Value); 5] = [
        (
            "gantry_gpu_utilization_ratio",
            "gauge",
            "GPU utilization (NVML), 0 to 1.",
            |g| Some(g.util_pct / 100.0),
        ),
        (
            "gantry_gpu_memory_used_bytes",
            "gauge",
            "GPU memory in use (NVML).",
            |g| Some(g.memory_used_bytes as f64),
        ),
        (
            "gantry_gpu_memory_total_bytes",
            "gauge",
            "GPU memory (NVML).",
            |g| Some(g.memory_total_bytes as f64),
        ),
        (
            "gantry_gpu_power_watts",
            "gauge",
            "GPU board power (NVML).",
            |g| g.power_w,
        ),
        (
            "gantry_gpu_temperature_celsius",
            "gauge",
            "GPU temperature (NVML).",
            |g| g.temperature_c.map(f64::from),
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for g in &p.gpus {
            let Some(v) = value(g) else { continue };
            let _ = writeln!(
                o,
                "{name}{{gpu=\"{}\",UUID=\"{}\",device=\"nvidia{}\",modelName=\"{}\",Hostname=\"{}\",node=\"{}\",pool=\"{}\"}} {v}",
                g.gpu,
                label(&g.uuid),
                g.gpu,
                label(&g.model_name),
                label(&g.hostname),
                label(&g.node),
                label(&g.pool)
            );
        }
    }
    let _ = writeln!(o, "# HELP gantry_job_gpu_info A running gantry job's GPU; join DCGM's series on UUID and Hostname.\n# TYPE gantry_job_gpu_info gauge");
    for j in &p.job_gpus {
        let _ = writeln!(
            o,
            "gantry_job_gpu_info{{job=\"{}\",team=\"{}\",gpu=\"{}\",UUID=\"{}\",Hostname=\"{}\",GPU_I_ID=\"{}\",mig_uuid=\"{}\"}} 1",
            j.job,
            label(&j.team),
            j.gpu,
            label(&j.uuid),
            label(&j.hostname),
            j.gpu_instance_id.map_or(String::new(), |i| i.to_string()),
            label(&j.mig_uuid)
        );
    }
}

fn histogram(
    o: &mut String,
    name: &str,
    labels: &str,
    bounds: &[f64],
    h: &crate::daemon::state::Histogram,
) {
    for (i, b) in bounds.iter().enumerate() {
        let _ = writeln!(
            o,
            "{name}_bucket{{{labels}le=\"{b}\"}} {}",
            h.counts.get(i).copied().unwrap_or(0)
        );
    }
    let _ = writeln!(o, "{name}_bucket{{{labels}le=\"+Inf\"}} {}", h.count);
    let trimmed = labels.trim_end_matches(',');
    let braces = if trimmed.is_empty() {
        String::new()
    } else {
        format!("{{{trimmed}}}")
    };
    let _ = writeln!(o, "{name}_sum{braces} {}", h.sum);
    let _ = writeln!(o, "{name}_count{braces} {}", h.count);
}
