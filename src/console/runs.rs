//! A job's runs, one line each, as the console's detail and the CLI show them.

use crate::api::RunRecord;

/// One run in a line: `#2 gpu-a,gpu-b 8 GPU spot 2026-11-28T06:00:00Z → 06:12:03Z $3.10:
/// failed: node gpu-b (rank 1) exited with code 3`.
pub fn run_line(r: &RunRecord, wide: bool) -> String {
    let end = match &r.ended_time {
        // The same day: only the time.
        Some(t) if t.get(..10) == r.started.get(..10) => t.get(11..).unwrap_or(t).to_string(),
        Some(t) => t.clone(),
        None => "running".into(),
    };
    let how = r
        .ended
        .as_deref()
        .map(super::app::escape)
        .unwrap_or_default();
    let how = if wide {
        how
    } else {
        super::table::cut(&how, 90).into_owned()
    };
    let cost = match r.ended_at {
        Some(end) => format!(" ${:.2}", r.cost(end)),
        None => String::new(),
    };
    format!(
        "#{} {} {} {} {} → {}{}{}{}",
        r.attempt,
        if r.nodes.is_empty() {
            "-".to_string()
        } else {
            super::app::escape(&r.nodes.join(","))
        },
        if r.gpus > 0.0 {
            format!("{} GPU", r.gpus)
        } else {
            "CPU".to_string()
        },
        r.capacity,
        r.started,
        end,
        cost,
        if how.is_empty() { "" } else { ": " },
        how
    )
}
