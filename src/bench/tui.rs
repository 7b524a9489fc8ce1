//! `gantry bench tui`: how long the console takes to draw a frame of a large fleet (10,000 GPUs
//! and 100,000 jobs by default), per view, on an off-screen terminal.

use super::quantile;
use crate::client::{JobRow, PoolRow, Snapshot};
use crate::console::app::{App, View};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde::Serialize;
use std::time::Instant;

#[derive(Clone, Debug, Serialize)]
pub struct TuiBenchReport {
    pub gpus: usize,
    pub jobs: usize,
    pub width: u16,
    pub height: u16,
    pub frames: usize,
    pub frame_p50_ms: f64,
    pub frame_p99_ms: f64,
    /// A key (selection move) until its frame is drawn.
    pub key_to_frame_p99_ms: f64,
}

/// A snapshot of the given size (synthetic: the figures are about drawing, not data).
pub fn big_snapshot(gpus: usize, jobs: usize) -> Snapshot {
    let pools: Vec<PoolRow> = (0..gpus / 800)
        .map(|i| PoolRow {
            path: format!("aws/us-east-1/use1-az{}/pool-{i}", i % 6),
            short: format!("aws/pool-{i}"),
            instance: "p5.48xlarge".into(),
            model: "H100".into(),
            capacity: "on-demand".into(),
            nodes: 100,
            gpus: 800,
            gpus_busy: 800 * (i % 10) / 10,
            dollars_per_hour: 55.04,
        })
        .collect();
    let jobs: Vec<JobRow> = (0..jobs)
        .map(|i| JobRow {
            id: i as i64,
            name: format!("job-{i}"),
            team: format!("team-{}", i % 20),
            class: ["serving", "production", "experiment"][i % 3].into(),
            state: if i % 4 == 0 { "running" } else { "pending" }.into(),
            gpus: "8".into(),
            age_s: (i % 7200) as f64,
            position: (i % 4 != 0).then_some(i),
            detail: "no-capacity: needs 8 GPUs on one node; 0 nodes have room now".into(),
        })
        .collect();
    Snapshot {
        simulated: true,
        now: 3600.0,
        gpus_total: gpus,
        gpus_busy: gpus / 2,
        dollars_per_hour: 1e5,
        idle_dollars_per_hour: 5e4,
        queue_by_class: vec![
            ("serving".into(), 100),
            ("production".into(), 1000),
            ("experiment".into(), jobs.len() / 2),
        ],
        events: (0..200)
            .map(|i| format!("00:{:02} job {i} started", i % 60))
            .collect(),
        teams: (0..20)
            .map(|i| crate::client::TeamRow {
                name: format!("team-{i}"),
                guaranteed: Some(400),
                used_gpus: 380.0,
                ..Default::default()
            })
            .collect(),
        pools,
        jobs,
    }
}

pub fn run(gpus: usize, jobs: usize, width: u16, height: u16, frames: usize) -> TuiBenchReport {
    let snap = big_snapshot(gpus, jobs);
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    let mut app = App::new(true);
    let mut times = Vec::new();
    for i in 0..frames {
        app.view = [
            View::Overview,
            View::Jobs,
            View::Fleet,
            View::Teams,
            View::Events,
        ][i % 5];
        let t = Instant::now();
        term.draw(|f| app.render(f, &snap)).expect("draw");
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    app.view = View::Jobs;
    let mut keys = Vec::new();
    for _ in 0..frames {
        let t = Instant::now();
        app.on_key("j", &snap);
        term.draw(|f| app.render(f, &snap)).expect("draw");
        keys.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    keys.sort_by(f64::total_cmp);
    TuiBenchReport {
        gpus,
        jobs,
        width,
        height,
        frames,
        frame_p50_ms: quantile(&times, 0.5),
        frame_p99_ms: quantile(&times, 0.99),
        key_to_frame_p99_ms: quantile(&keys, 0.99),
    }
}
