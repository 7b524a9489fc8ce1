//! `/metrics`: the published state in Prometheus' text exposition format (GPUs by pool, model
//! and state, queue depth and wait time by class, cycle latency, spend, idle GPUs by cause).

use super::actor::{Published, CYCLE_BUCKETS};
use super::state::WAIT_BUCKETS;
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
    let _ = writeln!(o, "# HELP gantry_simulated 1 when the fleet is the simulated one.\n# TYPE gantry_simulated gauge\ngantry_simulated {}", u8::from(s.simulated));
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
    let _ = writeln!(o, "# HELP gantry_wait_seconds Wait from submission to first start, by class.\n# TYPE gantry_wait_seconds histogram");
    for (class, h) in &p.counters.waits {
        histogram(
            &mut o,
            "gantry_wait_seconds",
            &format!("class=\"{}\",", label(class)),
            &WAIT_BUCKETS,
            h,
        );
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
    let _ = writeln!(o, "# HELP gantry_reclaimed_gpu_hours_total Idle GPU-hours reclaimed.\n# TYPE gantry_reclaimed_gpu_hours_total counter\ngantry_reclaimed_gpu_hours_total {}", p.counters.reclaimed_gpu_hours);
    let _ = writeln!(o, "# HELP gantry_spend_dollars_per_hour Spend rate of running jobs, by team.\n# TYPE gantry_spend_dollars_per_hour gauge");
    for t in &s.teams {
        let _ = writeln!(
            o,
            "gantry_spend_dollars_per_hour{{team=\"{}\"}} {}",
            label(&t.name),
            t.burn_per_hour
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
    o
}

fn histogram(
    o: &mut String,
    name: &str,
    labels: &str,
    bounds: &[f64],
    h: &super::state::Histogram,
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
