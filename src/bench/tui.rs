//! `gantry bench tui`: how long the console takes to draw a frame of a large fleet (10,000 GPUs
//! and 100,000 jobs by default), per view, on an off-screen terminal.

use super::quantile;
use crate::api::{JobRow, PoolRow, Snapshot};
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
    /// Each view's frame p99, ms (Overview, Jobs, Fleet, Teams, Events), after its first.
    pub view_p99_ms: Vec<(String, f64)>,
    /// Each view's first frame on this snapshot, ms (the Jobs view orders the rows then).
    pub first_frame_ms: Vec<(String, f64)>,
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
            ..PoolRow::default()
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
            since_s: 3600.0 - (i % 7200) as f64,
            submitted_s: None,
            user: None,
            position: (i % 4 != 0).then_some(i),
            detail: "no-capacity: needs 8 GPUs on one node; 0 nodes have room now".into(),
            cost_usd: (i % 50) as f64 * 3.5,
            dollars_per_hour: if i % 4 == 0 { 14.0 } else { 0.0 },
            restarts: 0,
            experiment: None,
            eta: (i % 4 != 0).then(|| {
                Box::new(gantry_core::api::Eta {
                    made_s: 3600.0,
                    at_s: Some(3600.0 + (i % 900) as f64 * 60.0),
                    at: Some(format!("2026-12-04T{:02}:{:02}:00Z", (i / 60) % 24, i % 60)),
                    basis: "running jobs' ends: 3 by its team's past runs".into(),
                    ..Default::default()
                })
            }),
        })
        .collect();
    Snapshot {
        host: None,
        services: Vec::new(),
        mlflow: None,
        version: 1,
        events_total: 200,
        simulated: true,
        now: 3600.0,
        calendar: Default::default(),
        gpus_total: gpus,
        gpus_busy: gpus / 2,
        dollars_per_hour: 1e5,
        idle_dollars_per_hour: 5e4,
        idle_by_cause: crate::model::idle::IdleCause::FREE
            .iter()
            .map(|&cause| crate::api::IdleNow {
                cause,
                gpus: gpus / 12,
                dollars_per_hour: 8e3,
            })
            .collect(),
        queue_by_class: vec![
            ("serving".into(), 100),
            ("production".into(), 1000),
            ("experiment".into(), jobs.len() / 2),
        ],
        events: (0..200)
            .map(|i| format!("00:{:02} job {i} started", i % 60))
            .collect(),
        teams: (0..20)
            .map(|i| crate::api::TeamRow {
                name: format!("team-{i}"),
                guaranteed: Some(400),
                used_gpus: 380.0,
                ..Default::default()
            })
            .collect(),
        pools,
        jobs: jobs.into_iter().map(std::sync::Arc::new).collect(),
    }
}

pub fn run(gpus: usize, jobs: usize, width: u16, height: u16, frames: usize) -> TuiBenchReport {
    let snap = big_snapshot(gpus, jobs);
    let mut term = Terminal::new(TestBackend::new(width, height)).expect("test backend");
    let mut app = App::new(true);
    // Each view's first frame, cold: the Jobs view orders the snapshot's rows here, once per
    // snapshot (the daemon publishes at most one a second).
    let mut first_frame_ms = Vec::new();
    for v in View::ALL {
        app.view = v;
        let t = Instant::now();
        term.draw(|f| app.render(f, &snap)).expect("draw");
        first_frame_ms.push((v.short().to_string(), t.elapsed().as_secs_f64() * 1e3));
    }
    let mut times = Vec::new();
    let mut by_view: Vec<Vec<f64>> = vec![Vec::new(); View::ALL.len()];
    for i in 0..frames {
        app.view = View::ALL[i % View::ALL.len()];
        let t = Instant::now();
        term.draw(|f| app.render(f, &snap)).expect("draw");
        let ms = t.elapsed().as_secs_f64() * 1e3;
        times.push(ms);
        by_view[i % View::ALL.len()].push(ms);
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
        first_frame_ms,
        view_p99_ms: View::ALL
            .iter()
            .zip(by_view.iter_mut())
            .map(|(v, t)| {
                t.sort_by(f64::total_cmp);
                (v.short().to_string(), quantile(t, 0.99))
            })
            .collect(),
    }
}

/// Counts what the console would write to the terminal.
#[derive(Clone, Default)]
struct Counting(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl std::io::Write for Counting {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .fetch_add(buf.len() as u64, std::sync::atomic::Ordering::Relaxed);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A client whose data change every `period` (or never).
struct Scripted {
    snap: Snapshot,
    period: Option<std::time::Duration>,
    last: Instant,
    tick: usize,
}

impl crate::api::Client for Scripted {
    fn poll(&mut self) -> bool {
        let Some(p) = self.period else { return false };
        if self.last.elapsed() < p {
            return false;
        }
        self.last = Instant::now();
        self.tick += 1;
        let i = self.tick % self.snap.pools.len().max(1);
        if let Some(pool) = self.snap.pools.get_mut(i) {
            pool.gpus_busy = (pool.gpus_busy + 8) % (pool.gpus + 1);
        }
        self.snap.gpus_busy = (self.snap.gpus_busy + 8) % self.snap.gpus_total.max(1);
        self.snap.now += 1.0;
        self.snap.events.insert(0, format!("tick {}", self.tick));
        true
    }
    fn snapshot(&self) -> &Snapshot {
        &self.snap
    }
    fn until_next(&self) -> std::time::Duration {
        self.period.map_or(std::time::Duration::from_secs(1), |p| {
            p.saturating_sub(self.last.elapsed())
        })
    }
}

struct NoInput;

impl crate::console::Input for NoInput {
    fn next(
        &mut self,
        timeout: std::time::Duration,
    ) -> std::io::Result<Option<crossterm::event::Event>> {
        std::thread::sleep(timeout);
        Ok(None)
    }
}

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage only writes into the struct we pass.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

#[derive(Clone, Debug, Serialize)]
pub struct IdleLiveReport {
    pub seconds: f64,
    /// Bytes written while nothing changed, after the first frame.
    pub idle_bytes_written: u64,
    pub idle_cpu_pct: f64,
    /// Data changing once a second (a pool's GPUs, the clock, an event).
    pub live_bytes_per_sec: f64,
    pub live_cpu_pct: f64,
}

/// Runs the real console loop off-screen: `seconds` with a quiet client, then with a live one.
pub fn idle_and_live(gpus: usize, jobs: usize, seconds: f64) -> IdleLiveReport {
    use ratatui::backend::CrosstermBackend;
    use ratatui::layout::Rect;
    use ratatui::{TerminalOptions, Viewport};
    let measure = |period: Option<std::time::Duration>| -> (u64, f64) {
        let counter = Counting::default();
        let mut term = Terminal::with_options(
            CrosstermBackend::new(counter.clone()),
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, 160, 48)),
            },
        )
        .expect("off-screen terminal");
        let mut client = Scripted {
            snap: big_snapshot(gpus, jobs),
            period,
            last: Instant::now(),
            tick: 0,
        };
        let start = Instant::now();
        let after_first = std::cell::Cell::new(None::<(u64, f64)>);
        let checks = std::cell::Cell::new(0u32);
        let stop = || {
            // The loop checks before its first frame and again after it: start counting then.
            checks.set(checks.get() + 1);
            if checks.get() == 2 {
                after_first.set(Some((
                    counter.0.load(std::sync::atomic::Ordering::Relaxed),
                    cpu_seconds(),
                )));
            }
            start.elapsed().as_secs_f64() >= seconds
        };
        crate::console::run_loop(&mut term, App::new(true), &mut client, &mut NoInput, &stop)
            .expect("console loop");
        let (bytes0, cpu0) = after_first.get().unwrap_or((0, cpu_seconds()));
        let bytes = counter.0.load(std::sync::atomic::Ordering::Relaxed) - bytes0;
        (bytes, (cpu_seconds() - cpu0) / seconds * 100.0)
    };
    let (idle_bytes, idle_cpu) = measure(None);
    let (live_bytes, live_cpu) = measure(Some(std::time::Duration::from_secs(1)));
    IdleLiveReport {
        seconds,
        idle_bytes_written: idle_bytes,
        idle_cpu_pct: idle_cpu,
        live_bytes_per_sec: live_bytes as f64 / seconds,
        live_cpu_pct: live_cpu,
    }
}
