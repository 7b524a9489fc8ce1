//! `gantry bench tui --log-mb-per-s N`: the console's log view following a job that writes N
//! MB/s. A writer thread appends lines to a job's stdout file at that rate, as the local
//! backend lays logs out; twice a second the pane reads what was written since its cursor (as
//! the console follows) through `backend::logs::read` — what the daemon answers
//! `GET /v1/jobs/{id}/logs` with (the HTTP hop is left out) — and the console draws a frame
//! every 33 ms. Reports frame times, the fetch, and what the pane holds: at most `2 × TAIL`
//! lines, and a job faster than that is skipped ahead to its tail, so memory stays flat however
//! much the job writes.

use crate::api::{LogsFrom, LogsView, NodeLogsView};
use crate::backend::logs::{log_path, read, LogCursor, LogQuery, Stream};
use crate::console::app::{App, View};
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use serde::Serialize;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Clone, Debug, Serialize)]
pub struct LogViewReport {
    pub seconds: f64,
    pub asked_mb_per_s: f64,
    /// What the writer managed (this machine's disk and cores permitting).
    pub written_mb_per_s: f64,
    pub frames: usize,
    pub frame_p50_ms: f64,
    pub frame_p99_ms: f64,
    pub fetch_p50_ms: f64,
    pub fetch_p99_ms: f64,
    /// The most lines and bytes of text the pane held at once.
    pub max_lines_held: usize,
    pub max_bytes_held: usize,
    /// Resident memory after the first second and at the end, MiB: flat when bounded.
    pub rss_after_1s_mib: Option<f64>,
    pub rss_end_mib: Option<f64>,
}

/// Follows a job writing `mb_per_s` for `seconds` on a `width`×`height` console.
pub fn run(mb_per_s: f64, seconds: f64, width: u16, height: u16) -> std::io::Result<LogViewReport> {
    let dir = std::env::temp_dir().join(format!("gantry-bench-logview-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let job = 1;
    let path = log_path(&dir, job, Stream::Out);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let writer = {
        let (stop, written, path) = (stop.clone(), written.clone(), path.clone());
        std::thread::spawn(move || -> std::io::Result<()> {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)?;
            let t0 = Instant::now();
            let mut step = 0u64;
            let mut chunk = String::new();
            while !stop.load(Ordering::Relaxed) {
                // Keep to the rate: write what is due, then sleep a little.
                let due = (t0.elapsed().as_secs_f64() * mb_per_s * 1e6) as u64;
                let mut done = written.load(Ordering::Relaxed);
                chunk.clear();
                while done < due && chunk.len() < 4 << 20 {
                    let before = chunk.len();
                    let _ = writeln!(
                        &mut chunk as &mut dyn std::fmt::Write,
                        "step {step:>9} loss {:.5} lr 3.0e-4 tokens/s {:>7} grad_norm {:.3} [{}]",
                        1.0 / (1.0 + step as f64 / 1e5),
                        120_000 + step % 997,
                        0.5 + (step % 13) as f64 / 10.0,
                        "rank0 ".repeat(4)
                    );
                    step += 1;
                    done += (chunk.len() - before) as u64;
                }
                if !chunk.is_empty() {
                    f.write_all(chunk.as_bytes())?;
                    written.store(done, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(())
        })
    };
    let snap = super::tui::big_snapshot(2_000, 1_000);
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    let mut app = App::new(true);
    app.view = View::Jobs;
    app.logs = Some(crate::console::logs::LogPane::new(job));
    let (mut frames, mut fetches) = (Vec::new(), Vec::new());
    let (mut max_lines, mut max_bytes) = (0, 0);
    let mut rss_1s = None;
    let t0 = Instant::now();
    let mut fetched: Option<Instant> = None;
    while t0.elapsed().as_secs_f64() < seconds {
        // As the console follows: what was written since the last read, twice a second.
        if fetched.is_none_or(|f| f.elapsed() >= Duration::from_millis(500)) {
            let t = Instant::now();
            let from = app
                .logs
                .as_ref()
                .map_or(LogsFrom::Tail(crate::console::logs::TAIL), |p| {
                    p.next_read()
                });
            let q = match &from {
                LogsFrom::Tail(n) => LogQuery {
                    tail: *n,
                    after: None,
                    partial: true,
                },
                LogsFrom::After { cursors, partial } => LogQuery {
                    tail: 0,
                    after: LogCursor::parse(cursors).ok(),
                    partial: *partial,
                },
            };
            let got = read(&dir, job, &q);
            let view = LogsView {
                job,
                state: crate::api::JobState::Running,
                is_final: false,
                nodes: vec![NodeLogsView {
                    rank: 0,
                    node: "bench".into(),
                    lines: got.lines,
                    cursor: got.cursor.to_string(),
                    error: None,
                }],
            };
            if let Some(p) = app.logs.as_mut() {
                p.take(&from, Ok(view));
                let lines = &p.view.nodes[0].lines;
                max_lines = max_lines.max(lines.len());
                max_bytes = max_bytes.max(lines.iter().map(|l| l.text.len()).sum());
            }
            fetches.push(t.elapsed().as_secs_f64() * 1e3);
            fetched = Some(Instant::now());
            if rss_1s.is_none() && t0.elapsed() >= Duration::from_secs(1) {
                rss_1s = super::current_rss_mib();
            }
        }
        let t = Instant::now();
        term.draw(|f| app.render(f, &snap)).expect("draw");
        frames.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(Duration::from_millis(33));
    }
    stop.store(true, Ordering::Relaxed);
    writer
        .join()
        .map_err(|_| std::io::Error::other("the writer thread panicked"))??;
    let secs = t0.elapsed().as_secs_f64();
    let bytes = written.load(Ordering::Relaxed);
    let _ = std::fs::remove_dir_all(&dir);
    frames.sort_by(f64::total_cmp);
    fetches.sort_by(f64::total_cmp);
    Ok(LogViewReport {
        seconds: secs,
        asked_mb_per_s: mb_per_s,
        written_mb_per_s: bytes as f64 / 1e6 / secs,
        frames: frames.len(),
        frame_p50_ms: super::quantile(&frames, 0.5),
        frame_p99_ms: super::quantile(&frames, 0.99),
        fetch_p50_ms: super::quantile(&fetches, 0.5),
        fetch_p99_ms: super::quantile(&fetches, 0.99),
        max_lines_held: max_lines,
        max_bytes_held: max_bytes,
        rss_after_1s_mib: rss_1s,
        rss_end_mib: super::current_rss_mib(),
    })
}
