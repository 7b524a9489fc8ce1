//! The console's tables and navigation: every view sorts by any column (an arrow in the
//! header), narrow terminals drop low-value columns before cutting the reason, bars are drawn at
//! the width they get, page keys, a help that scrolls, `:` completion, the key bar of what is
//! open, and a console that says it lost its daemon and comes back by itself.

use gantry::api::Snapshot;
use gantry::console::app::{App, Outcome, View};

use crate::support::console as fixture;
use crate::support::daemon;
use crate::support::tmux;
use fixture::screen;
use tmux::{have_tmux, Tmux};

fn demo_snapshot() -> Snapshot {
    Snapshot::clone(fixture::demo(5).state.snapshot())
}

fn keys(app: &mut App, snap: &Snapshot, keys: &[&str]) {
    for k in keys {
        app.on_key(k, snap);
    }
}

/// The ids of the Jobs view's rows, top to bottom, as drawn.
fn job_ids(screen: &str) -> Vec<i64> {
    screen
        .lines()
        .filter_map(|l| l.strip_prefix('│'))
        .filter_map(|l| l.split_whitespace().next())
        .filter_map(|w| w.trim_start_matches('*').parse().ok())
        .collect()
}

#[test]
fn waiting_jobs_come_first_in_the_default_order() {
    // Before: the daemon's order (running first) put the queue below 40 running jobs.
    let snap = demo_snapshot();
    let pending: Vec<i64> = snap
        .jobs
        .iter()
        .filter(|j| j.state == "pending")
        .map(|j| j.id)
        .collect();
    assert!(!pending.is_empty(), "the demo has waiting jobs");
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let s = screen(&app, &snap, 120, 36);
    let ids = job_ids(&s);
    assert_eq!(ids[..pending.len()], pending[..], "{s}");
    assert!(s.contains("queue order, waiting first"), "{s}");
    // g selects the first waiting job; the selection follows it.
    app.on_key("g", &snap);
    assert_eq!(app.jobs.selected, Some(pending[0]));
}

#[test]
fn every_table_sorts_by_any_column_with_an_arrow_in_the_header() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    // Shift+M: by cost, largest first (numbers start descending); again: ascending.
    assert_eq!(app.on_key("M", &snap), Outcome::Redraw);
    let s = screen(&app, &snap, 200, 50);
    assert!(s.contains("cost▼"), "{s}");
    let cost = |id: i64| {
        snap.jobs
            .iter()
            .find(|j| j.id == id)
            .unwrap()
            .cost_at(snap.now)
    };
    let ids = job_ids(&s);
    assert!(ids.windows(2).all(|w| cost(w[0]) >= cost(w[1])), "{s}");
    app.on_key("M", &snap);
    let s = screen(&app, &snap, 200, 50);
    assert!(s.contains("cost▲"), "{s}");
    let ids = job_ids(&s);
    assert!(ids.windows(2).all(|w| cost(w[0]) <= cost(w[1])), "{s}");
    // > steps to the next column (restarts, then where / why), < back; o reverses.
    app.on_key(">", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("restarts▼"));
    app.on_key(">", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("where / why pending▲"));
    app.on_key("<", &snap);
    app.on_key("<", &snap);
    app.on_key("<", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("$/h▼"));
    app.on_key("N", &snap);
    app.on_key("o", &snap);
    let s = screen(&app, &snap, 200, 50);
    assert!(s.contains("name▼"), "{s}");
    let names: Vec<String> = job_ids(&s)
        .iter()
        .map(|id| snap.jobs.iter().find(|j| j.id == *id).unwrap().name.clone())
        .collect();
    assert!(names.windows(2).all(|w| w[0] >= w[1]), "{names:?}");

    // The Fleet view: by $/node-h, dearest first.
    app.on_key("3", &snap);
    app.on_key("D", &snap);
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("$/node-h▼"), "{s}");
    let prices: Vec<f64> = s
        .lines()
        .filter_map(|l| l.trim_end_matches(['│', ' ']).rsplit(' ').next())
        .filter_map(|p| p.strip_prefix('$')?.parse().ok())
        .collect();
    assert!(prices.len() >= 5, "{s}");
    assert!(prices.windows(2).all(|w| w[0] >= w[1]), "{prices:?}");
    // enter opens the pool in the row selected, in this order.
    app.on_key("g", &snap);
    let dearest = snap
        .pools
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.dollars_per_hour.total_cmp(&b.1.dollars_per_hour))
        .unwrap()
        .0;
    assert_eq!(app.on_key("enter", &snap), Outcome::Pool(dearest));

    // The Teams view: by GPUs in use.
    app.on_key("4", &snap);
    app.on_key("U", &snap);
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("GPUs▼"), "{s}");
    let most = snap
        .teams
        .iter()
        .max_by(|a, b| a.used_gpus.total_cmp(&b.used_gpus))
        .unwrap();
    let first_row = s.lines().nth(3).unwrap();
    assert!(first_row.contains(&most.name), "{s}");

    // The Events view: o shows the oldest first.
    app.on_key("5", &snap);
    app.on_key("o", &snap);
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("oldest first"), "{s}");
    let oldest: String = snap.events.last().unwrap().chars().take(40).collect();
    assert!(s.contains(&oldest), "{s}");
    // Again: back to the newest first (not a column reversed: the view has none).
    app.on_key("o", &snap);
    assert_eq!(app.flash.as_deref(), Some("events: newest first"));
    assert!(screen(&app, &snap, 120, 36).contains("events, newest first"));
}

/// `o` in a view's own order turns it as the view says: the Jobs queue by position, last
/// first; the Overview has no rows of its own to turn.
#[test]
fn o_turns_each_views_own_order_its_own_way() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    assert_eq!(app.on_key("o", &snap), Outcome::Nothing);
    app.on_key("2", &snap);
    app.on_key("o", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("pos▼"));
    app.on_key("o", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("pos▲"));
    // The Teams view: its first column, descending.
    app.on_key("4", &snap);
    app.on_key("o", &snap);
    assert!(screen(&app, &snap, 200, 50).contains("team▼"));
}

#[test]
fn narrow_tables_keep_the_reason_whole_and_wide_ones_fill_with_it() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.view = View::Jobs;
    let waiting = snap.jobs.iter().find(|j| j.state == "pending").unwrap();
    for (w, h) in [(80, 24), (120, 36), (200, 50)] {
        let s = screen(&app, &snap, w, h);
        let row = s
            .lines()
            .find(|l| job_ids(l).first() == Some(&waiting.id))
            .unwrap_or_else(|| panic!("{s}"));
        if waiting.detail.chars().count() <= 64 {
            assert!(row.contains(&waiting.detail), "at {w}: {row}");
        }
        if w >= 200 {
            assert!(row.contains(&waiting.team) && row.contains('$'), "{row}");
        }
    }
}

#[test]
fn fleet_bars_are_as_full_as_the_pool_at_any_width() {
    // Before: a 16-cell bar cut to 8 at 80 columns, so 18/32 looked full.
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.view = View::Fleet;
    for (w, h) in [(80, 24), (120, 36), (200, 50)] {
        let s = screen(&app, &snap, w, h);
        for p in snap.pools.iter().filter(|p| p.gpus > 0) {
            let busy = format!(" {}/{} ", p.gpus_busy, p.gpus);
            let name = if w >= 120 { &p.path } else { &p.short };
            let row = s
                .lines()
                .find(|l| l.contains(name.as_str()) && l.contains(&busy))
                .unwrap_or_else(|| panic!("{} at {w}:\n{s}", p.short));
            let full = row.matches('█').count();
            let cells = full + row.matches('░').count();
            assert!(cells >= 8, "{row}");
            let want = p.gpus_busy as f64 / p.gpus as f64 * cells as f64;
            assert!(
                (full as f64 - want).abs() <= 0.5 + 1e-9,
                "{row}: {full} of {cells} cells for {busy}"
            );
        }
    }
}

#[test]
fn page_keys_move_a_screenful_and_ctrl_d_half() {
    let snap = gantry::bench::tui::big_snapshot(2_000, 500);
    let mut app = App::new(false);
    app.on_key("2", &snap);
    screen(&app, &snap, 120, 36); // the frame tells the app how many rows a page has
    let rows_shown = 36 - 2 /* header, key bar */ - 3 /* borders, table header */;
    let at = |app: &App| {
        let ids = job_ids(&screen(app, &snap, 120, 36));
        ids.iter()
            .position(|&i| Some(i) == app.jobs.selected)
            .unwrap()
    };
    app.on_key("g", &snap);
    app.on_key("pagedown", &snap);
    let first = app.jobs.selected;
    assert_eq!(at(&app), rows_shown - 1, "the last row of the screen");
    app.on_key("pagedown", &snap);
    assert_ne!(app.jobs.selected, first);
    app.on_key("pageup", &snap);
    assert_eq!(app.jobs.selected, first);
    app.on_key("g", &snap);
    app.on_key("ctrl-d", &snap);
    assert_eq!(at(&app), rows_shown / 2);
    app.on_key("ctrl-u", &snap);
    assert_eq!(at(&app), 0);
    // The vim keymap adds ctrl-f / ctrl-b.
    let nowhere = std::path::Path::new("/nonexistent");
    let vim = gantry::console::keymap::Keymap::load("vim", nowhere).unwrap();
    let mut app = App::with(app.theme.clone(), vim, false);
    app.on_key("2", &snap);
    screen(&app, &snap, 120, 36);
    app.on_key("ctrl-f", &snap);
    assert_eq!(at(&app), rows_shown - 1);
}

#[test]
fn the_help_scrolls_at_80x24_and_names_the_space_key() {
    // Before: cut after `q quit`, and the space key's name was blank.
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("?", &snap);
    let s = screen(&app, &snap, 80, 24);
    assert!(s.contains("j/k scroll"), "{s}");
    assert!(!s.contains("mouse on/off"), "the end is below: {s}");
    for _ in 0..4 {
        app.on_key("pagedown", &snap);
    }
    let s = screen(&app, &snap, 80, 24);
    assert!(s.contains("Logs (l on"), "scrolled to the end: {s}");
    assert!(
        s.contains("space    mark/unmark") || {
            app.on_key("pageup", &snap);
            screen(&app, &snap, 80, 24).contains("space    mark/unmark")
        },
        "{s}"
    );
    assert!(app.help, "scrolling keeps it open");
    app.on_key("esc", &snap);
    assert!(!app.help);
}

#[test]
fn colon_completes_commands_and_their_arguments_with_tab() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    keys(&mut app, &snap, &[":", "r", "e", "c", "tab"]);
    assert_eq!(app.prompt.as_ref().unwrap().text, "reclaim");
    app.on_key("esc", &snap);
    keys(
        &mut app,
        &snap,
        &[":", "t", "e", "a", "m", " ", "a", "p", "tab"],
    );
    assert_eq!(app.prompt.as_ref().unwrap().text, "team applied");
    assert_eq!(app.on_key("enter", &snap), Outcome::Redraw);
    assert_eq!(app.view, View::Jobs);
    keys(&mut app, &snap, &[":", "t", "e", "tab"]);
    assert!(screen(&app, &snap, 120, 36).contains("teams  team"));
}

#[test]
fn slash_starts_a_new_filter_instead_of_extending_the_old() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    keys(&mut app, &snap, &["/", "e", "v", "a", "l", "enter"]);
    app.on_key("/", &snap);
    assert_eq!(app.prompt.as_ref().unwrap().text, "", "a fresh line");
    keys(&mut app, &snap, &["n", "o", "t", "e", "enter"]);
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("/note"), "{s}");
    assert!(!s.contains("/evalnote"), "{s}");
}

#[test]
fn the_key_bar_follows_what_is_open() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("n", &snap);
    let s = screen(&app, &snap, 120, 36);
    let bar = s.lines().last().unwrap();
    // Before: the Jobs view's `p preempt  x cancel` while those keys typed letters.
    assert!(
        bar.contains("ctrl-s submit") && !bar.contains("preempt"),
        "{bar}"
    );
    app.on_key("esc", &snap);
    // A job's cancel dialog no longer reads [ Cancel ]   [ Cancel ].
    app.on_key("g", &snap);
    app.on_key("x", &snap);
    let s = screen(&app, &snap, 120, 36);
    let id = app.jobs.selected.unwrap();
    assert!(
        s.contains("[ Back ]") && s.contains(&format!("[ Cancel job {id} ]")),
        "{s}"
    );
    assert!(!s.contains("[ Cancel ]"), "{s}");
}

#[test]
fn a_console_that_loses_its_daemon_says_so_and_comes_back_by_itself() {
    if !have_tmux("the disconnection test") {
        return;
    }
    // The first daemon stays held (killed below) so its directory outlives the restart.
    let mut first = daemon::start("lost", &[]);
    let (dir, socket) = (first.dir.clone(), first.socket.clone());
    let bin = env!("CARGO_BIN_EXE_gantry");
    let spec = dir.join("job.yaml");
    std::fs::write(
        &spec,
        "name: lost-probe\nresources:\n  accelerators: H100:1\nrun: train\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .arg("submit")
        .arg(&spec)
        .env("GANTRY_CONNECT", &socket)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let t = Tmux::new("lost");
    t.run(&[
        "new-session",
        "-d",
        "-s",
        "lost",
        "-x",
        "120",
        "-y",
        "30",
        &format!("{bin} --connect {}; sleep 30", socket.display()),
    ]);
    t.wait_for(&["d.sock"]);
    // kill -9: the stream breaks; the header says so, actions are refused at once.
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let s = t.wait_for(&["DISCONNECTED since"]);
    assert!(s.contains("connection lost"), "{s}");
    t.run(&["send-keys", "-t", "lost", "2"]);
    t.run(&["send-keys", "-t", "lost", "x"]);
    t.run(&["send-keys", "-t", "lost", "y"]);
    t.wait_for(&["not sent: the daemon is out of reach"]);
    // The same daemon back on the same socket: the console reattaches within its 2 s retry.
    let _ = std::fs::remove_file(&socket);
    let _second = daemon::start_in(dir, &[]);
    t.wait_gone("DISCONNECTED");
    t.run(&["send-keys", "-t", "lost", "q"]);
    t.run(&["kill-server"]);
}

#[test]
fn fleet_pool_node_gpu_job_and_back_again() {
    use gantry::daemon::state::history::Range;
    let d = fixture::demo(30);
    let snap = Snapshot::clone(d.state.snapshot());
    let mut app = App::new(false);
    app.on_key("3", &snap);
    assert_eq!(app.on_key("enter", &snap), Outcome::Pool(0));
    let pool = d.state.pool_detail(0).unwrap();
    app.pool_detail = Some((0, pool.clone()));
    // j selects the next node (marked ▶); enter opens it over the last hour.
    app.on_key("j", &snap);
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains(&format!("▶ {}", pool.nodes[1].name)), "{s}");
    let name = pool.nodes[1].name.clone();
    assert_eq!(
        app.on_key("enter", &snap),
        Outcome::Node {
            name: name.clone(),
            range: Range::Hour
        }
    );
    let node = d.state.node_detail(&name, Range::Hour).unwrap();
    assert_eq!(node.gpus.len(), 8);
    assert!(
        node.gpus.iter().all(|g| g.points.len() >= 29),
        "half an hour of minutes"
    );
    app.node.as_mut().unwrap().update(Ok(node.clone()));
    for (w, h) in [(80, 24), (120, 36), (200, 50)] {
        let s = screen(&app, &snap, w, h);
        assert!(s.contains("last 1h") && s.contains("SIMULATED"), "{s}");
        for measure in ["util", "VRAM", "power", "temp"] {
            assert!(s.contains(measure), "{measure} at {w}: {s}");
        }
        assert!(s.contains('▇') || s.contains('█') || s.contains('▆'), "{s}");
        let job = &node.gpus[0].jobs[0];
        assert!(s.contains(&format!("job {} {}", job.id, job.name)), "{s}");
    }
    // r: the next range; enter: the selected GPU's job, over the node view.
    assert_eq!(
        app.on_key("r", &snap),
        Outcome::Node {
            name: name.clone(),
            range: Range::Day
        }
    );
    app.on_key("j", &snap);
    let on_gpu1 = node.gpus[1].jobs[0].id;
    assert_eq!(app.on_key("enter", &snap), Outcome::Detail(on_gpu1));
    app.detail = Some(gantry::api::JobView {
        id: on_gpu1,
        ..Default::default()
    });
    // esc walks back: job → node → pool → fleet.
    app.on_key("esc", &snap);
    assert!(app.detail.is_none() && app.node.is_some());
    app.on_key("esc", &snap);
    assert!(app.node.is_none() && app.pool_detail.is_some());
    app.on_key("esc", &snap);
    assert!(app.pool_detail.is_none());
    assert_eq!(app.view, View::Fleet);
}

/// The Jobs view's experiment column shows where jobs report to MLflow (sorted by shift+X),
/// goes first when the terminal is narrow, and is not drawn at all on a fleet without
/// experiments (where it could only be empty).
#[test]
fn the_experiment_column_shows_where_jobs_report_to_an_experiment() {
    // The header row (the demo's class `experiment` is in other rows).
    let header = |s: &str| {
        s.lines()
            .find(|l| l.contains("id ") && l.contains("state"))
            .unwrap_or_default()
            .to_string()
    };
    let plain = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &plain);
    assert!(!header(&screen(&app, &plain, 200, 50)).contains("experiment"));
    let mut snap = demo_snapshot();
    for (k, j) in snap.jobs.iter_mut().enumerate() {
        if k % 2 == 0 {
            std::sync::Arc::make_mut(j).experiment = Some(format!("sweep-{}", k % 3));
        }
    }
    let s = screen(&app, &snap, 200, 50);
    assert!(
        header(&s).contains("experiment") && s.contains("sweep-0"),
        "{s}"
    );
    let narrow = header(&screen(&app, &snap, 80, 24));
    assert!(
        narrow.contains("state") && !narrow.contains("experiment"),
        "{narrow}"
    );
    app.on_key("X", &snap);
    let s = screen(&app, &snap, 200, 50);
    assert!(s.contains("experiment▲"), "{s}");
    let named = |id: i64| {
        snap.jobs
            .iter()
            .find(|j| j.id == id)
            .unwrap()
            .experiment
            .clone()
    };
    let ids = job_ids(&s);
    assert!(ids.windows(2).all(|w| named(w[0]) <= named(w[1])), "{s}");
}

/// The Jobs view's ETA column: a waiting job's estimate (`~HH:MM`, `>3h`, `never: held`),
/// sorted by shift+Z soonest first, and not drawn where no job has one.
#[test]
fn the_eta_column_says_when_each_waiting_job_starts() {
    let header = |s: &str| {
        s.lines()
            .find(|l| l.contains("id ") && l.contains("state"))
            .unwrap_or_default()
            .to_string()
    };
    let plain = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &plain);
    assert!(!header(&screen(&app, &plain, 200, 50)).contains("ETA"));
    let mut snap = demo_snapshot();
    let now = snap.now;
    // Four rows with an estimate (the drawing does not ask whether a row waits).
    let waiting: Vec<i64> = snap.jobs.iter().take(4).map(|j| j.id).collect();
    for (k, j) in snap.jobs.iter_mut().take(4).enumerate() {
        std::sync::Arc::make_mut(j).eta = Some(Box::new(gantry::api::Eta {
            made_s: now,
            // The later in the queue, the sooner: the sort must reorder them.
            at_s: Some(now + 7200.0 - 600.0 * k as f64),
            at: Some(format!("2026-12-04T2{}:{:02}:00Z", k % 4, 10 + k)),
            basis: "test".into(),
            ..gantry::api::Eta::default()
        }));
    }
    let s = screen(&app, &snap, 200, 50);
    assert!(header(&s).contains("ETA"), "{s}");
    assert!(s.contains("~20:10"), "{s}");
    app.on_key("Z", &snap);
    let s = screen(&app, &snap, 200, 50);
    assert!(s.contains("ETA▲"), "{s}");
    let ids = job_ids(&s);
    let last = *waiting.last().unwrap();
    assert_eq!(ids.first(), Some(&last), "soonest first: {s}");
}

/// A job's confirmation asks the daemon what the change would do, and shows its answer: the
/// jobs whose start moves and the $/h after the next cycle (or why there is no preview).
#[test]
fn a_confirmation_shows_what_the_change_would_do() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("g", &snap);
    let outcome = app.on_key("x", &snap);
    let id = app.jobs.selected.unwrap();
    let Outcome::WhatIf(req) = outcome else {
        panic!("the dialog asks for its preview: {outcome:?}");
    };
    assert_eq!(req.id, id);
    let w = gantry::api::WhatIf {
        action: "cancel".into(),
        job: id,
        made_s: snap.now,
        starts: vec![gantry::api::StartMove {
            job: 77,
            name: "next-in-line".into(),
            before_s: Some(snap.now + 3600.0),
            after_s: Some(snap.now),
            before: Some("2026-12-04T23:00:00Z".into()),
            after: Some("2026-12-04T22:00:00Z".into()),
        }],
        dollars_per_hour_before: 10.0,
        dollars_per_hour_after: 12.5,
        ..gantry::api::WhatIf::default()
    };
    app.what_if = Some((id, Ok(w.clone())));
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("If the queue stays as it is:"), "{s}");
    assert!(s.contains("job 77 next-in-line: starts sooner"), "{s}");
    assert!(s.contains("$10.00 → $12.50"), "{s}");
    // y applies what was shown, and only that: the loop asks again and compares.
    match app.on_key("y", &snap) {
        Outcome::AsShown {
            ask: gantry::console::app::Ask::Job { request, .. },
            shown,
        } => {
            assert_eq!((request, *shown), (req, w.clone()));
        }
        other => panic!("{other:?}"),
    }
    assert!(app.confirm.is_none());
    // Without a preview, y applies the change as before.
    app.on_key("x", &snap);
    app.what_if = Some((id, Err("the daemon did not answer".into())));
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains("(no preview: the daemon did not answer)"), "{s}");
    assert_eq!(app.on_key("y", &snap), Outcome::Act(req));
    // A preview of another job is not this one's.
    app.on_key("x", &snap);
    app.what_if = Some((id + 1, Ok(w)));
    assert_eq!(app.on_key("y", &snap), Outcome::Act(req));
}

/// `:prio CLASS` asks the daemon what the move would do as its dialog opens, shows the
/// answer, and y applies only what was shown.
#[test]
fn a_reprioritization_shows_what_the_move_would_do() {
    use gantry::console::app::Ask;
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("g", &snap);
    let id = app.jobs.selected.unwrap();
    let from = snap.jobs.iter().find(|j| j.id == id).unwrap().class.clone();
    let to = snap
        .queue_by_class
        .iter()
        .map(|(c, _)| c.clone())
        .find(|c| *c != from)
        .expect("another class");
    let type_prio = |app: &mut App| {
        app.on_key(":", &snap);
        for c in format!("prio {to}").chars() {
            app.on_key(&c.to_string(), &snap);
        }
        app.on_key("enter", &snap)
    };
    assert_eq!(
        type_prio(&mut app),
        Outcome::WhatIfPrio {
            id,
            class: to.clone()
        }
    );
    let w = gantry::api::WhatIf {
        action: "priority".into(),
        job: id,
        made_s: snap.now,
        starts: vec![gantry::api::StartMove {
            job: 78,
            name: "overtaken".into(),
            before_s: Some(snap.now + 600.0),
            after_s: Some(snap.now + 4200.0),
            before: Some("2026-12-04T22:10:00Z".into()),
            after: Some("2026-12-04T23:10:00Z".into()),
        }],
        ..gantry::api::WhatIf::default()
    };
    app.what_if = Some((id, Ok(w.clone())));
    let s = screen(&app, &snap, 120, 36);
    assert!(s.contains(&format!("from {from} to {to}?")), "{s}");
    assert!(s.contains("job 78 overtaken: starts later"), "{s}");
    match app.on_key("y", &snap) {
        Outcome::AsShown {
            ask:
                Ask::Prio {
                    id: asked,
                    to: class,
                    ..
                },
            shown,
        } => assert_eq!((asked, class, *shown), (id, to.clone(), w)),
        other => panic!("{other:?}"),
    }
    // No preview: y moves it as before.
    type_prio(&mut app);
    assert_eq!(
        app.on_key("y", &snap),
        Outcome::Prio {
            id,
            class: to.clone()
        }
    );
}
