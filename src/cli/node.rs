//! `gantry fleet --node NAME [--range 5m|1h|24h]`: one node GPU by GPU over time, what the
//! console's node view shows — utilization, VRAM, power and temperature now and over the
//! range, and who is on each GPU.

use super::{CliError, Output};
use gantry::api::NodeDetail;
use gantry::client::http::node_path;
use gantry::client::http::HttpClient;
use gantry::daemon::state::history::Range;

pub fn node_live(
    c: &mut HttpClient,
    name: &str,
    range: &str,
    output: Output,
) -> Result<(), CliError> {
    let range = Range::parse(range).map_err(|e| CliError::usage(format!("--range: {e}")))?;
    let d: NodeDetail = c.call("GET", &node_path(name, range), None)?;
    if output.is_data() {
        let v = serde_json::to_value(&d).map_err(|e| CliError::usage(e.to_string()))?;
        return super::print_as(output, &v).map_err(CliError::usage);
    }
    println!(
        "node {} — {} {} {}, the last {} ({} s a point){}",
        d.name,
        d.pool,
        d.model,
        d.state,
        d.range.name(),
        d.step_s,
        if d.simulated { " (simulated)" } else { "" }
    );
    println!("{}", gantry::untrusted::escape(&d.resources.line(&d.jobs)));
    if d.gpus.is_empty() {
        println!("no GPUs: a CPU-only node");
        return Ok(());
    }
    println!(
        "{:>3} {:>6} {:>11} {:>13} {:>6} {:>5}  WHO",
        "GPU", "UTIL%", "(LOW–HIGH)", "VRAM USED MiB", "W", "°C"
    );
    for g in &d.gpus {
        let who = g.who();
        let who = if who.is_empty() {
            "idle".to_string()
        } else {
            who.join("; ")
        };
        if g.unmeasured {
            println!(
                "{:>3} {:>6} {:>11} {:>13} {:>6} {:>5}  {who}",
                g.index, "-", "", "not measured", "-", "-"
            );
            continue;
        }
        let (lo, hi) = g
            .points
            .iter()
            .flatten()
            .fold((f32::MAX, f32::MIN), |(l, h), p| {
                (l.min(p.util_pct), h.max(p.util_pct))
            });
        let span = if g.points.iter().all(Option::is_none) {
            String::new()
        } else {
            format!("({lo:.0}–{hi:.0})")
        };
        println!(
            "{:>3} {:>6.0} {:>11} {:>13} {:>6.0} {:>5.0}  {}",
            g.index,
            g.now.util_pct,
            span,
            format!("{}/{}", g.now.vram_used_mib, g.vram_total_mib),
            g.now.power_w,
            g.now.temp_c,
            super::table::cell(&who, 60).trim_end()
        );
    }
    Ok(())
}
