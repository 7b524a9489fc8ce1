//! The console tests' fixture: the simulated demo fleet (seed 7) and a screen rendered to text.

use gantry::api::Snapshot;
use gantry::console::app::App;
use gantry::daemon::state::State;
use ratatui::backend::TestBackend;
use ratatui::Terminal;
use std::path::PathBuf;

/// The demo daemon state after some simulated minutes, in a directory of its own that goes
/// when this is dropped.
pub struct Demo {
    pub state: State,
    dir: PathBuf,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The simulated demo fleet, seed 7, after `minutes` simulated minutes (a sample a minute).
pub fn demo(minutes: u32) -> Demo {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = gantry_testkit::scratch::scratch(&format!("console-{n}"));
    let mut state = State::demo(&dir, 7).unwrap();
    // The screens are fixtures: no estimates, which come when their worker answers.
    state.estimates_off();
    for _ in 0..minutes {
        state.advance(60.0).unwrap();
    }
    Demo { state, dir }
}

/// What `app` draws for `snap` on a `w`×`h` terminal, a line of `w` cells per row.
pub fn screen(app: &App, snap: &Snapshot, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.render(f, snap)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            (0..w)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
                + "\n"
        })
        .collect()
}
