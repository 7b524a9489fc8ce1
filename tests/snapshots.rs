//! Snapshot tests (insta) of every console view at 80×24 and 160×48 on a fixed fixture: the
//! simulated demo fleet, seed 7, after five simulated minutes. A change to any screen shows up
//! as a reviewable diff (`cargo insta review`, or compare the `.snap.new` files).

use gantry::client::Snapshot;
use gantry::console::app::{App, View};
use gantry::daemon::state::State;
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn fixture() -> (Snapshot, gantry::client::PoolDetail) {
    let dir = std::env::temp_dir().join(format!("gantry-snapshots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut d = State::demo(&dir, 7).unwrap();
    for _ in 0..5 {
        d.advance(60.0).unwrap();
    }
    let out = (d.snapshot().clone(), d.pool_detail(1).unwrap());
    let _ = std::fs::remove_dir_all(&dir);
    out
}

fn screen(app: &App, snap: &Snapshot, w: u16, h: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| app.render(f, snap)).unwrap();
    let buf = t.backend().buffer().clone();
    (0..h)
        .map(|y| {
            let line: String = (0..w).map(|x| buf[(x, y)].symbol().to_string()).collect();
            line.trim_end().to_string() + "\n"
        })
        .collect()
}

#[test]
fn every_view_at_two_sizes() {
    let (snap, pool) = fixture();
    let mut app = App::new(false);
    for (w, h) in [(80u16, 24u16), (160, 48)] {
        for (view, name) in [
            (View::Overview, "overview"),
            (View::Jobs, "jobs"),
            (View::Fleet, "fleet"),
            (View::Teams, "teams"),
            (View::Events, "events"),
        ] {
            app.view = view;
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(&app, &snap, w, h));
        }
        app.view = View::Fleet;
        app.pool_detail = Some((1, pool.clone()));
        insta::assert_snapshot!(format!("pool_{w}x{h}"), screen(&app, &snap, w, h));
        app.pool_detail = None;
        app.help = true;
        insta::assert_snapshot!(format!("help_{w}x{h}"), screen(&app, &snap, w, h));
        app.help = false;
    }
    // The fixture is the same every time (the simulated backend is seeded).
    let (again, _) = fixture();
    assert_eq!(snap.jobs, again.jobs);
}
