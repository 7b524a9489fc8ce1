//! Snapshot tests (insta) of every console view at 80×24, 120×36 and 200×50 on a fixed fixture: the
//! simulated demo fleet, seed 7, after five simulated minutes. A change to any screen shows up
//! as a reviewable diff (`cargo insta review`, or compare the `.snap.new` files).

use gantry::client::Snapshot;
use gantry::console::app::{App, View};

#[path = "common/console.rs"]
mod fixture;

fn fixture() -> (
    Snapshot,
    gantry::client::PoolDetail,
    gantry::client::NodeDetail,
) {
    let d = fixture::demo(5);
    let pool = d.state.pool_detail(1).unwrap();
    let node = d
        .state
        .node_detail(
            &pool.nodes[0].name,
            gantry::daemon::state::history::Range::Hour,
        )
        .unwrap();
    (d.state.snapshot().clone(), pool, node)
}

/// The screen with each line's trailing blanks trimmed (smaller, clearer snapshot files).
fn screen(app: &App, snap: &Snapshot, w: u16, h: u16) -> String {
    fixture::screen(app, snap, w, h)
        .lines()
        .map(|l| l.trim_end().to_string() + "\n")
        .collect()
}

#[test]
fn every_view_at_three_sizes() {
    let (snap, pool, node) = fixture();
    let mut app = App::new(false);
    for (w, h) in [(80u16, 24u16), (120, 36), (200, 50)] {
        for view in View::ALL {
            app.view = view;
            let name = view.short().to_lowercase();
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(&app, &snap, w, h));
        }
        app.view = View::Fleet;
        app.pool_detail = Some((1, pool.clone()));
        insta::assert_snapshot!(format!("pool_{w}x{h}"), screen(&app, &snap, w, h));
        let mut pane = gantry::console::node::NodePane::new(&node.name);
        pane.update(Ok(node.clone()));
        app.node = Some(pane);
        insta::assert_snapshot!(format!("node_{w}x{h}"), screen(&app, &snap, w, h));
        app.node = None;
        app.pool_detail = None;
        app.help = true;
        insta::assert_snapshot!(format!("help_{w}x{h}"), screen(&app, &snap, w, h));
        app.help = false;
    }
    // The fixture is the same every time (the simulated backend is seeded).
    let (again, _, _) = fixture();
    assert_eq!(snap.jobs, again.jobs);
}
