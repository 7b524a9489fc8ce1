//! The console: views rendered on a TestBackend at 80×24 and 160×48 from the demo's snapshot,
//! keys, selection kept by job id, the too-small screen, escaping, and an end-to-end run of the
//! real binary in tmux.

use gantry::api::{JobRow, Snapshot};
use gantry::console::app::{escape, App, Outcome, View};

use crate::support::console as fixture;
use crate::support::tmux;
use fixture::screen;
use tmux::{have_tmux, Tmux};

fn demo_snapshot() -> Snapshot {
    Snapshot::clone(fixture::demo(5).state.snapshot())
}

/// The Jobs view's default rows: waiting jobs first (by position), then running, then ended.
fn queue_order(snap: &Snapshot) -> Vec<i64> {
    let rank = |s: &str| match s {
        "pending" => 0,
        "held" => 1,
        "running" | "preempting" => 2,
        _ => 3,
    };
    let mut jobs: Vec<&JobRow> = snap.jobs.iter().map(|j| &**j).collect();
    jobs.sort_by_key(|j| rank(&j.state));
    jobs.iter().map(|j| j.id).collect()
}

#[test]
fn every_view_renders_at_80x24_and_160x48() {
    let snap = demo_snapshot();
    assert!(snap.simulated && snap.gpus_total >= 200 && !snap.jobs.is_empty());
    let mut app = App::new(false);
    for (w, h) in [(80, 24), (160, 48)] {
        app.view = View::Overview;
        let s = screen(&app, &snap, w, h);
        assert!(s.contains("SIMULATED"), "{s}");
        assert!(s.contains("GPUs busy"), "{s}");
        assert!(s.contains("pending"), "{s}");
        assert!(s.contains("recent events"), "{s}");
        app.view = View::Jobs;
        let s = screen(&app, &snap, w, h);
        assert!(s.contains(&format!("jobs ({})", snap.jobs.len())), "{s}");
        assert!(s.contains("running"), "{s}");
        if w >= 120 {
            assert!(
                s.contains("team") && s.contains("pos"),
                "wide terminals show more columns:\n{s}"
            );
        }
        app.view = View::Fleet;
        let s = screen(&app, &snap, w, h);
        let pool = if w >= 120 {
            "onprem/dc1/dc1-hall-a/dgx-h100"
        } else {
            "onprem/dgx-h100"
        };
        assert!(s.contains(pool), "{s}");
        assert!(s.contains("aws/p5-spot") || w >= 120, "{s}");
        assert!(s.contains("$14.00"), "{s}");
        app.view = View::Teams;
        let s = screen(&app, &snap, w, h);
        assert!(
            s.contains("ml-research")
                && (s.contains("guaranteed") || s.contains("quota"))
                && s.contains("budget"),
            "{s}"
        );
        app.view = View::Events;
        let s = screen(&app, &snap, w, h);
        assert!(s.contains("newest first") && s.contains("started"), "{s}");
    }
}

#[test]
fn a_small_terminal_gets_a_clear_message() {
    let snap = demo_snapshot();
    let s = screen(&App::new(false), &snap, 60, 20);
    assert!(
        s.contains("gantry needs 80×24; this terminal is 60×20"),
        "{s}"
    );
}

#[test]
fn keys_switch_views_and_selection_follows_the_job_not_the_row() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    assert_eq!(app.on_key("2", &snap), Outcome::Redraw);
    assert_eq!(app.view, View::Jobs);
    app.on_key("j", &snap);
    app.on_key("j", &snap);
    let chosen = app.jobs.selected.unwrap();
    assert_eq!(chosen, queue_order(&snap)[2]);
    // New data arrive with the rows in another order: the selection stays on the same job.
    let mut moved = snap.clone();
    moved.jobs.reverse();
    app.on_key("j", &moved);
    let order = queue_order(&moved);
    let at = order.iter().position(|&j| j == chosen).unwrap();
    assert_eq!(
        app.jobs.selected,
        Some(order[(at + 1).min(order.len() - 1)])
    );
    assert_eq!(app.on_key("tab", &snap), Outcome::Redraw);
    assert_eq!(app.view, View::Fleet);
    app.on_key("4", &snap);
    assert_eq!(app.view, View::Teams);
    app.on_key("5", &snap);
    app.on_key("tab", &snap);
    assert_eq!(app.view, View::Services);
    app.on_key("tab", &snap);
    assert_eq!(app.view, View::Overview, "tab wraps around");
    app.on_key("3", &snap);
    assert_eq!(app.on_key("?", &snap), Outcome::Redraw);
    assert!(screen(&app, &snap, 80, 24).contains("keys"));
    assert_eq!(
        app.on_key("z", &snap),
        Outcome::Redraw,
        "any key closes help"
    );
    assert_eq!(app.on_key("z", &snap), Outcome::Nothing);
    assert_eq!(app.on_key("q", &snap), Outcome::Quit);
}

#[test]
fn control_characters_in_job_names_are_escaped() {
    assert_eq!(escape("evil\u{1b}[2Jname"), "evil\\u{1b}[2Jname");
    let mut snap = demo_snapshot();
    snap.jobs.insert(
        0,
        std::sync::Arc::new(JobRow {
            id: 999,
            name: "x\u{1b}[31mred\u{7}".into(),
            state: "pending".into(),
            ..JobRow::default()
        }),
    );
    let mut app = App::new(false);
    app.view = View::Jobs;
    let s = screen(&app, &snap, 160, 48);
    assert!(s.contains("x\\u{1b}[31mred"), "{s}");
    assert!(!s.contains('\u{1b}'));
}

#[test]
fn the_demo_is_deterministic_for_a_seed() {
    assert_eq!(demo_snapshot(), demo_snapshot());
}

/// The real binary in tmux: it opens on the embedded default, switches views, quits on q.
#[test]
fn end_to_end_in_tmux() {
    if !have_tmux("end-to-end console test") {
        return;
    }
    let t = Tmux::new("e2e");
    let tmux = |args: &[&str]| t.run(args);
    let bin = env!("CARGO_BIN_EXE_gantry");
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "e2e",
        "-x",
        "120",
        "-y",
        "32",
        &format!("{bin}; echo EXITED; sleep 30"),
    ]);
    let wait_for = |text: &str| t.wait_for(&[text]);
    let wait_for_any = |texts: &[&str]| t.wait_for(texts);
    wait_for("SIMULATED");
    // No daemon answers on the default socket: the embedded demo, and the header says so.
    wait_for("demo  sim 20");
    wait_for("GPUs busy");
    tmux(&["send-keys", "-t", "e2e", "2"]);
    wait_for("where / why pending");
    // Preempt the first running job: Enter on the default button goes back; y confirms.
    tmux(&[
        "send-keys",
        "-t",
        "e2e",
        ":",
        "j",
        "o",
        "b",
        "s",
        " ",
        "s",
        "t",
        "a",
        "t",
        "e",
        "=",
        "r",
        "u",
        "n",
        "Enter",
    ]);
    wait_for("/state=run");
    tmux(&["send-keys", "-t", "e2e", "p"]);
    wait_for("confirm preempt");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let s = tmux(&["capture-pane", "-p", "-t", "e2e"]);
    assert!(
        !s.contains("confirm preempt") && !s.contains("preempt done"),
        "{s}"
    );
    tmux(&["send-keys", "-t", "e2e", "p"]);
    wait_for("confirm preempt");
    tmux(&["send-keys", "-t", "e2e", "y"]);
    wait_for("preempt done");
    // A preempting job leaves the state=run filter: esc clears it.
    tmux(&["send-keys", "-t", "e2e", "Escape"]);
    t.wait_gone("/state=run");
    wait_for("preempting");
    // Filter, reprioritize through `:prio`, and the reclaim sweep.
    tmux(&[
        "send-keys",
        "-t",
        "e2e",
        "/",
        "l",
        "l",
        "a",
        "m",
        "a",
        "Enter",
    ]);
    wait_for("/llama");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    wait_for("events, newest first");
    // An Escape and a key in one read are Alt+key to a terminal parser: wait for each Escape
    // to take effect before the next key.
    tmux(&["send-keys", "-t", "e2e", "Escape"]);
    t.wait_gone("events, newest first");
    wait_for("/llama");
    tmux(&["send-keys", "-t", "e2e", "Escape"]);
    t.wait_gone("/llama");
    tmux(&["send-keys", "-t", "e2e", "P"]);
    wait_for(":prio ");
    tmux(&[
        "send-keys",
        "-t",
        "e2e",
        "s",
        "e",
        "r",
        "v",
        "i",
        "n",
        "g",
        "Enter",
    ]);
    let s = wait_for_any(&["confirm reprioritize", "is already serving"]);
    if s.contains("confirm reprioritize") {
        // The dialog shows the embedded daemon's preview of the move (or why there is none);
        // y applies it if the daemon still says the same, else shows what changed.
        wait_for_any(&["If the queue stays as it is:", "(no preview"]);
        tmux(&["send-keys", "-t", "e2e", "y"]);
        let s = wait_for_any(&["now serving", "the preview changed"]);
        if s.contains("the preview changed") {
            tmux(&["send-keys", "-t", "e2e", "y"]);
            wait_for("now serving");
        }
    }
    tmux(&[
        "send-keys",
        "-t",
        "e2e",
        ":",
        "r",
        "e",
        "c",
        "l",
        "a",
        "i",
        "m",
        "Enter",
    ]);
    let s = wait_for_any(&["nothing to reclaim", "confirm reclaim"]);
    if s.contains("confirm reclaim") {
        tmux(&["send-keys", "-t", "e2e", "y"]);
        wait_for("reclaimed");
    }
    // Submit a job through the form: preview, then submit.
    tmux(&["send-keys", "-t", "e2e", "n"]);
    wait_for("submit a job: YAML");
    tmux(&["send-keys", "-t", "e2e", "C-p"]);
    wait_for_any(&["would start now", "would wait"]);
    wait_for("submitted now, if the queue stays as it is");
    tmux(&["send-keys", "-t", "e2e", "C-s"]);
    wait_for("submitted");
    tmux(&["send-keys", "-t", "e2e", "3"]);
    wait_for("dgx-h100");
    tmux(&["send-keys", "-t", "e2e", "Enter"]);
    wait_for("gpu0");
    tmux(&["send-keys", "-t", "e2e", "Escape"]);
    wait_for("fleet: provider/region");
    tmux(&["send-keys", "-t", "e2e", "4"]);
    wait_for("use/weight");
    tmux(&["send-keys", "-t", "e2e", "5"]);
    wait_for("events, newest first");
    tmux(&["send-keys", "-t", "e2e", "1"]);
    wait_for("GPUs busy");
    tmux(&["send-keys", "-t", "e2e", "?"]);
    wait_for("keys (from the keymap)");
    tmux(&["send-keys", "-t", "e2e", "Escape"]);
    t.wait_gone("keys (from the keymap)");
    tmux(&["send-keys", "-t", "e2e", "q"]);
    wait_for("EXITED");
    tmux(&["kill-server"]);
}

#[test]
fn dangerous_actions_ask_first_with_cancel_the_default_and_vanish_when_readonly() {
    use gantry::api::{JobAction, JobRequest};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("j", &snap);
    let id = app.jobs.selected.unwrap();
    // The dialog opens and asks the daemon for its preview (nothing is changed).
    assert_eq!(
        app.on_key("p", &snap),
        Outcome::WhatIf(JobRequest {
            id,
            action: JobAction::Preempt
        })
    );
    let s = screen(&app, &snap, 80, 24);
    assert!(
        s.contains("confirm preempt") && s.contains("[ Back ]"),
        "{s}"
    );
    // Enter on the default (Cancel) does nothing; other keys are swallowed by the dialog.
    assert_eq!(app.on_key("2", &snap), Outcome::Nothing);
    assert_eq!(app.on_key("enter", &snap), Outcome::Redraw);
    assert!(app.confirm.is_none());
    app.on_key("x", &snap);
    app.on_key("tab", &snap);
    let want = JobRequest {
        id,
        action: JobAction::Cancel,
    };
    assert_eq!(app.on_key("enter", &snap), Outcome::Act(want));
    app.on_key("H", &snap);
    assert_eq!(
        app.on_key("y", &snap),
        Outcome::Act(JobRequest {
            id,
            action: JobAction::Hold
        })
    );
    app.on_key("p", &snap);
    assert_eq!(app.on_key("esc", &snap), Outcome::Redraw);
    assert!(app.confirm.is_none());
    // Outside the Jobs view the action says what to do instead of guessing a job.
    app.on_key("1", &snap);
    app.on_key("p", &snap);
    assert!(app.confirm.is_none() && app.flash.as_deref().unwrap().contains("Jobs view"));

    let mut ro = App::new(false);
    ro.readonly = true;
    ro.on_key("2", &snap);
    assert_eq!(ro.on_key("p", &snap), Outcome::Nothing);
    assert!(ro.confirm.is_none());
    let s = screen(&ro, &snap, 160, 48);
    let keybar = s.lines().last().unwrap_or_default();
    assert!(s.contains("RO") && !keybar.contains("preempt"), "{s}");
    ro.on_key("?", &snap);
    let s = screen(&ro, &snap, 160, 48);
    assert!(!s.contains("preempt the selected job"), "{s}");
}

#[test]
fn the_selected_job_stays_on_screen_deep_in_a_long_queue() {
    let snap = gantry::bench::tui::big_snapshot(10_000, 5_000);
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("G", &snap);
    // The queue order ends with the running jobs (every fourth), the last one last.
    let s = screen(&app, &snap, 80, 24);
    assert!(s.contains("job-4996"), "{s}");
    for _ in 0..30 {
        app.on_key("k", &snap);
    }
    let s = screen(&app, &snap, 80, 24);
    assert!(s.contains("job-4876"), "{s}");
    assert!(s.contains("jobs (5000)"));
}

/// The console's own loop, off-screen: with nothing changing it writes nothing after the first
/// frame; when data change it writes (only the changed cells).
#[test]
fn an_idle_console_writes_nothing() {
    let r = gantry::bench::tui::idle_and_live(2_000, 5_000, 1.5);
    assert_eq!(r.idle_bytes_written, 0);
    assert!(r.live_bytes_per_sec > 0.0);
}

fn keys(app: &mut App, snap: &Snapshot, text: &str) {
    for c in text.chars() {
        app.on_key(&c.to_string(), snap);
    }
}

#[test]
fn slash_filters_the_view_and_colon_runs_commands() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    app.on_key("/", &snap);
    keys(&mut app, &snap, "team=applie");
    let s = screen(&app, &snap, 160, 48);
    assert!(
        s.contains("/team=applie█"),
        "the prompt shows what is typed:\n{s}"
    );
    app.on_key("backspace", &snap);
    keys(&mut app, &snap, "ed");
    assert_eq!(app.on_key("enter", &snap), Outcome::Redraw);
    let applied = snap.jobs.iter().filter(|j| j.team == "applied").count();
    assert!(applied > 0 && applied < snap.jobs.len());
    let s = screen(&app, &snap, 160, 48);
    assert!(
        s.contains(&format!(
            "jobs ({applied} of {}) /team=applied",
            snap.jobs.len()
        )),
        "{s}"
    );
    assert!(
        !s.contains("ml-research  "),
        "other teams are filtered out:\n{s}"
    );
    // Selection moves within the kept rows; actions act on them.
    app.on_key("G", &snap);
    let last = queue_order(&snap)
        .into_iter()
        .rev()
        .find(|&id| snap.jobs.iter().any(|j| j.id == id && j.team == "applied"))
        .unwrap();
    assert_eq!(app.jobs.selected, Some(last));
    // `!` inverts; esc clears.
    app.on_key("/", &snap);
    for _ in 0..20 {
        app.on_key("backspace", &snap);
    }
    keys(&mut app, &snap, "!team=applied");
    app.on_key("enter", &snap);
    assert!(screen(&app, &snap, 160, 48).contains(&format!(
        "jobs ({} of {})",
        snap.jobs.len() - applied,
        snap.jobs.len()
    )));
    app.on_key("esc", &snap);
    assert!(app.jobs.filter.is_none());
    // A bad pattern or field says what is wrong and changes nothing.
    app.on_key("/", &snap);
    keys(&mut app, &snap, "tema=x");
    app.on_key("enter", &snap);
    assert!(app.flash.as_deref().unwrap().contains("no field `tema`"));
    assert!(app.jobs.filter.is_none());

    // Commands.
    app.on_key(":", &snap);
    keys(&mut app, &snap, "gpus h100");
    app.on_key("enter", &snap);
    assert_eq!(app.view, View::Fleet);
    let s = screen(&app, &snap, 160, 48);
    assert!(
        s.contains("dgx-h100") && !s.contains("inference-a100"),
        "{s}"
    );
    app.on_key(":", &snap);
    keys(&mut app, &snap, "team ml-research");
    app.on_key("enter", &snap);
    assert_eq!(app.view, View::Jobs);
    assert!(app.rows_len(&snap) > 0);
    app.on_key(":", &snap);
    keys(&mut app, &snap, "team nope");
    app.on_key("enter", &snap);
    assert!(app
        .flash
        .as_deref()
        .unwrap()
        .contains("no team `nope`; teams: ml-research"));
    app.on_key(":", &snap);
    keys(&mut app, &snap, "frobnicate");
    app.on_key("enter", &snap);
    assert!(app
        .flash
        .as_deref()
        .unwrap()
        .contains("unknown command `:frobnicate`"));
    app.on_key(":", &snap);
    keys(&mut app, &snap, "q");
    assert_eq!(app.on_key("enter", &snap), Outcome::Quit);
}

#[test]
fn reprioritize_and_reclaim_ask_first() {
    use gantry::scheduler::reclaim::{ReclaimAction, ReclaimItem, ReclaimPlan};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let job = snap
        .jobs
        .iter()
        .find(|j| j.class != "serving")
        .unwrap()
        .clone();
    app.on_key(":", &snap);
    keys(&mut app, &snap, &format!("job {}", job.id));
    app.on_key("enter", &snap);
    assert_eq!(app.jobs.selected, Some(job.id));
    // P opens `:prio `; an unknown class is named with the real ones.
    app.on_key("P", &snap);
    keys(&mut app, &snap, "urgent");
    app.on_key("enter", &snap);
    assert!(app
        .flash
        .as_deref()
        .unwrap()
        .contains("classes: serving, production, experiment"));
    app.on_key("P", &snap);
    keys(&mut app, &snap, "serving");
    app.on_key("enter", &snap);
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("confirm reprioritize")
            && s.contains(&format!("from {} to serving", job.class))
            && s.contains("[ Back ]"),
        "{s}"
    );
    assert_eq!(
        app.on_key("enter", &snap),
        Outcome::Redraw,
        "Back is the default"
    );
    app.on_key("P", &snap);
    keys(&mut app, &snap, "serving");
    app.on_key("enter", &snap);
    assert_eq!(
        app.on_key("y", &snap),
        Outcome::Prio {
            id: job.id,
            class: "serving".into()
        }
    );

    app.on_key(":", &snap);
    keys(&mut app, &snap, "reclaim");
    assert_eq!(app.on_key("enter", &snap), Outcome::Reclaim { apply: None });
    app.review_reclaim(ReclaimPlan::default());
    assert!(app
        .flash
        .as_deref()
        .unwrap()
        .starts_with("nothing to reclaim"));
    let plan = ReclaimPlan::of(
        100.0,
        vec![ReclaimItem {
            job: 17,
            gpus: 1.0,
            dollars_per_hour: 2.5,
            idle_for_s: 1800.0,
            action: ReclaimAction::Cancel,
        }],
    );
    app.review_reclaim(plan.clone());
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("Reclaim 1 GPU(s) from 1 idle job(s), saving $2.50/h?")
            && s.contains("job 17")
            && s.contains("cancel"),
        "{s}"
    );
    // At 80×24, with more jobs than fit, the buttons are still there (they were cut off).
    let many = ReclaimPlan::of(
        100.0,
        (0..30)
            .map(|k| ReclaimItem {
                job: 100 + k,
                gpus: 8.0,
                dollars_per_hour: 98.32,
                idle_for_s: 7200.0,
                action: ReclaimAction::Suspend,
            })
            .collect(),
    );
    let mut small = App::new(false);
    small.review_reclaim(many);
    let s = screen(&small, &snap, 80, 24);
    assert!(
        s.contains("[ Back ]") && s.contains("[ Reclaim ]") && s.contains("more"),
        "{s}"
    );
    // Confirming applies this plan, by its id, and no other.
    assert_eq!(
        app.on_key("y", &snap),
        Outcome::Reclaim {
            apply: Some(plan.id.clone())
        }
    );

    // Read-only: no reprioritizing; the plan is shown, not offered.
    let mut ro = App::new(false);
    ro.readonly = true;
    ro.on_key("2", &snap);
    assert_eq!(ro.on_key("P", &snap), Outcome::Nothing);
    ro.review_reclaim(plan);
    assert!(ro.confirm.is_none());
    assert!(ro
        .flash
        .as_deref()
        .unwrap()
        .contains("read-only: not applied"));
}

#[test]
fn bulk_actions_need_the_count_typed() {
    use gantry::api::{JobAction, JobRequest};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    // Mark three jobs (space marks and moves down).
    for _ in 0..3 {
        app.on_key(" ", &snap);
    }
    assert_eq!(app.jobs.marked.len(), 3);
    let ids: Vec<i64> = queue_order(&snap).into_iter().take(3).collect();
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains(&format!("*{}", ids[0])),
        "marked rows show a star:\n{s}"
    );
    // The dialog asks what cancelling all three together would do, and shows it.
    match app.on_key("x", &snap) {
        Outcome::WhatIfMany { action, ids: asked } => {
            assert_eq!(action, JobAction::Cancel);
            let mut asked = asked;
            asked.sort_unstable();
            let mut want = ids.clone();
            want.sort_unstable();
            assert_eq!(asked, want);
        }
        other => panic!("{other:?}"),
    }
    let first = match &app.confirm {
        Some(gantry::console::app::Confirm {
            ask: gantry::console::app::Ask::Bulk { ids, .. },
            ..
        }) => ids[0],
        other => panic!("{other:?}"),
    };
    let w = gantry::api::WhatIf {
        action: "cancel".into(),
        job: first,
        starts: vec![gantry::api::StartMove {
            job: 77,
            name: "behind-them".into(),
            before_s: Some(snap.now + 7200.0),
            after_s: Some(snap.now),
            before: Some("2026-12-05T03:00:00Z".into()),
            after: Some("2026-12-05T01:00:00Z".into()),
        }],
        made_s: snap.now,
        ..gantry::api::WhatIf::default()
    };
    app.what_if = Some((first, Ok(w.clone())));
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("confirm cancel ×3") && s.contains("Type 3 and press enter"),
        "{s}"
    );
    assert!(s.contains("job 77 behind-them: starts sooner"), "{s}");
    // y does not confirm a bulk action; a wrong count closes the dialog.
    assert_eq!(app.on_key("y", &snap), Outcome::Nothing);
    app.on_key("4", &snap);
    assert_eq!(app.on_key("enter", &snap), Outcome::Redraw);
    assert!(app.confirm.is_none());
    app.on_key("x", &snap);
    app.on_key("3", &snap);
    let Outcome::ActMany(mut got) = app.on_key("enter", &snap) else {
        panic!("the typed count confirms")
    };
    got.sort_by_key(|r| r.id);
    let mut want: Vec<JobRequest> = ids
        .iter()
        .map(|&id| JobRequest {
            id,
            action: JobAction::Cancel,
        })
        .collect();
    want.sort_by_key(|r| r.id);
    assert_eq!(got, want);
    // With the preview on screen, the typed count applies what it showed, and only that:
    // the loop asks again and compares.
    app.on_key("x", &snap);
    app.what_if = Some((first, Ok(w.clone())));
    app.on_key("3", &snap);
    match app.on_key("enter", &snap) {
        Outcome::AsShown {
            ask: gantry::console::app::Ask::Bulk { ids: asked, .. },
            shown,
        } => {
            assert_eq!(asked.len(), 3);
            assert_eq!(*shown, w);
        }
        other => panic!("{other:?}"),
    }
    // Esc clears the marks; read-only cannot mark.
    app.on_key("esc", &snap);
    assert!(app.jobs.marked.is_empty());
    let mut ro = App::new(false);
    ro.readonly = true;
    ro.on_key("2", &snap);
    assert_eq!(ro.on_key(" ", &snap), Outcome::Nothing);
    assert!(ro.jobs.marked.is_empty());
}

#[test]
fn actions_the_token_forbids_stay_visible_greyed_with_the_reason() {
    use gantry::api::Access;
    use gantry::daemon::auth::Role;
    let snap = demo_snapshot();
    let mut viewer = App::new(false);
    viewer.access = Access {
        role: Role::Viewer,
        team: None,
    };
    viewer.on_key("2", &snap);
    let s = screen(&viewer, &snap, 160, 48);
    assert!(
        s.contains("preempt") && s.contains("(viewer token: read-only)"),
        "{s}"
    );
    viewer.on_key("p", &snap);
    assert!(viewer.confirm.is_none());
    assert!(viewer
        .flash
        .as_deref()
        .unwrap()
        .contains("your viewer token may not change jobs"));

    let mut researcher = App::new(false);
    researcher.access = Access {
        role: Role::Researcher,
        team: Some("applied".into()),
    };
    researcher.on_key("2", &snap);
    let other = snap.jobs.iter().find(|j| j.team != "applied").unwrap();
    let mine = snap.jobs.iter().find(|j| j.team == "applied").unwrap();
    researcher.jobs.selected = Some(other.id);
    researcher.on_key("x", &snap);
    assert!(researcher.confirm.is_none());
    assert!(researcher
        .flash
        .as_deref()
        .unwrap()
        .contains("may change team applied's jobs only"));
    researcher.jobs.selected = Some(mine.id);
    researcher.on_key("x", &snap);
    assert!(researcher.confirm.is_some(), "its own team's job: asks");
    researcher.on_key("esc", &snap);
    researcher.review_reclaim(gantry::scheduler::reclaim::ReclaimPlan::of(
        0.0,
        vec![gantry::scheduler::reclaim::ReclaimItem {
            job: 1,
            gpus: 1.0,
            dollars_per_hour: 1.0,
            idle_for_s: 1000.0,
            action: gantry::scheduler::reclaim::ReclaimAction::Cancel,
        }],
    ));
    assert!(researcher.confirm.is_none());
    assert!(researcher
        .flash
        .as_deref()
        .unwrap()
        .contains("applying a reclaim needs an operator token"));
}

#[test]
fn enter_opens_the_job_in_detail_and_esc_goes_back() {
    use gantry::api::{EventRecord, JobState, JobView};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let first = queue_order(&snap)[0];
    assert_eq!(app.on_key("enter", &snap), Outcome::Detail(first));
    app.detail = Some(JobView {
        id: first,
        name: Some("train\u{1b}[31m".into()),
        team: "ml-research".into(),
        class: "production".into(),
        state: JobState::Pending,
        submitted_at: 0.0,
        reason: Some("quota: wants 16.0 GPU".into()),
        spec: "name: train\nresources:\n  accelerators: H100:8\n".into(),
        cost_usd: 12.5,
        // As the daemon lists them: in the order they happened.
        events: vec![
            EventRecord {
                at: 60.0,
                time: "2026-11-20T00:01:00Z".into(),
                detail: "submitted".into(),
                ..EventRecord::default()
            },
            EventRecord {
                at: 120.0,
                time: "2026-11-20T00:02:00Z".into(),
                detail: "held by an operator".into(),
                ..EventRecord::default()
            },
        ],
        ..JobView::default()
    });
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains(&format!("job {first} train\\u{{1b}}[31m")),
        "escaped name:\n{s}"
    );
    assert!(s.contains("why it waits: quota: wants 16.0 GPU"), "{s}");
    assert!(
        s.contains("accelerators: H100:8") && s.contains("cost so far $12"),
        "{s}"
    );
    // The one clock: the calendar's, as the header says it (the demo's day).
    assert!(s.contains("00:01:00  submitted"), "{s}");
    // Under "events, newest first", the newest first.
    let (newer, older) = (
        s.find("00:02:00  held by an operator").unwrap(),
        s.find("00:01:00  submitted").unwrap(),
    );
    assert!(newer < older, "{s}");
    assert_eq!(
        app.on_key("p", &snap),
        Outcome::Nothing,
        "keys under the detail do nothing"
    );
    assert_eq!(app.on_key("esc", &snap), Outcome::Redraw);
    assert!(app.detail.is_none());
}

/// A job's detail longer than the screen scrolls (j/k, G, g), and its log's newest lines are
/// shown whatever the scroll: the latest output is what an on-call reads first.
#[test]
fn a_long_job_detail_scrolls_and_shows_the_newest_log_lines() {
    use gantry::api::JobView;
    let snap = demo_snapshot();
    let mut app = App::new(false);
    let spec: String = (0..60).map(|i| format!("line{i:02}: x\n")).collect();
    app.detail = Some(JobView {
        id: 9,
        state: gantry::api::JobState::Running,
        spec,
        log_tail: (0..40).map(|i| format!("out {i:02}")).collect(),
        ..JobView::default()
    });
    let s = screen(&app, &snap, 100, 30);
    assert!(s.contains("line00") && !s.contains("line59"), "{s}");
    assert!(s.contains("out 39"), "the newest log line is shown:\n{s}");
    assert!(!s.contains("out 00"), "{s}");
    assert_eq!(app.on_key("G", &snap), Outcome::Redraw);
    let s = screen(&app, &snap, 100, 30);
    assert!(s.contains("line59") && !s.contains("line00"), "{s}");
    assert!(s.contains("out 39"), "{s}");
    app.on_key("g", &snap);
    app.on_key("j", &snap);
    let s = screen(&app, &snap, 100, 30);
    assert!(s.contains("line 2/49") && !s.contains("│job 9"), "{s}");
}

/// `l` in a job's detail opens its logs: every node's marked `[node K]`, `]` one node's,
/// stderr shown apart, escape sequences in the output neutralised, esc back to the detail.
#[test]
fn l_opens_a_jobs_logs_and_brackets_step_through_its_nodes() {
    use gantry::api::{JobView, LogsView, NodeLogsView};
    use gantry::backend::logs::{LogLine, Stream};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.detail = Some(JobView {
        id: 7,
        state: gantry::api::JobState::Running,
        ..JobView::default()
    });
    assert!(screen(&app, &snap, 100, 30).contains("l logs"));
    assert_eq!(app.on_key("l", &snap), Outcome::Logs { id: 7, node: None });
    let line = |stream, text: &str| LogLine {
        stream,
        text: text.into(),
    };
    let node = |rank: usize, lines: Vec<LogLine>| NodeLogsView {
        rank,
        node: format!("gpu{rank}"),
        lines,
        cursor: String::new(),
        error: None,
    };
    let pane = app.logs.as_mut().unwrap();
    pane.update(Ok(LogsView {
        job: 7,
        state: gantry::api::JobState::Running,
        is_final: false,
        nodes: vec![
            node(0, vec![line(Stream::Out, "step 1 loss 2.3\u{1b}[2J")]),
            node(1, vec![line(Stream::Err, "rank 1 warning")]),
        ],
    }));
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("[node 0] step 1 loss 2.3\\u{1b}[2J") && s.contains("[node 1] rank 1 warning"),
        "{s}"
    );
    assert!(s.contains("all 2 nodes") && s.contains("following"), "{s}");
    assert_eq!(
        app.on_key("]", &snap),
        Outcome::Logs {
            id: 7,
            node: Some(0)
        }
    );
    app.logs.as_mut().unwrap().update(Ok(LogsView {
        job: 7,
        state: gantry::api::JobState::Completed,
        is_final: true,
        nodes: vec![node(0, vec![line(Stream::Out, "done")])],
    }));
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("node 0 of 2 (gpu0)") && s.contains("paused") && !s.contains("[node"),
        "the job ended: following stops\n{s}"
    );
    assert_eq!(app.on_key("[", &snap), Outcome::Logs { id: 7, node: None });
    assert_eq!(app.on_key("esc", &snap), Outcome::Redraw);
    assert!(app.logs.is_none() && app.detail.is_some());
}

#[test]
fn the_submit_form_checks_as_you_type_and_submits_what_parses() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("n", &snap);
    let s = screen(&app, &snap, 100, 30);
    assert!(
        s.contains("submit a job: YAML") && s.contains("name: my-experiment"),
        "{s}"
    );
    assert!(s.contains("✓ the spec parses"), "{s}");
    // Break the first line: `name:` becomes `nam:`.
    for k in ["right", "right", "right", "delete"] {
        app.on_key(k, &snap);
    }
    let s = screen(&app, &snap, 100, 30);
    assert!(s.contains("✗ form:1:1: unknown field `nam`"), "{s}");
    assert_eq!(app.on_key("ctrl-s", &snap), Outcome::Nothing);
    // Esc keeps the draft; n resumes it.
    app.on_key("esc", &snap);
    assert!(app.form.is_none() && app.draft.is_some());
    app.on_key("n", &snap);
    app.on_key("e", &snap);
    assert!(screen(&app, &snap, 100, 30).contains("✓ the spec parses"));
    assert!(matches!(app.on_key("ctrl-p", &snap), Outcome::Preview(_)));
    // The daemon's answer: it would wait, and submitted now it starts in 10 minutes, taking
    // job 7's place.
    let moved = |job, name: &str, before: Option<f64>, after: f64| gantry::api::StartMove {
        job,
        name: name.into(),
        before_s: before,
        after_s: Some(after),
        before: before.map(|_| "2026-12-05T01:10:00Z".into()),
        after: Some(
            if after < 1000.0 {
                "2026-12-05T01:10:00Z"
            } else {
                "2026-12-05T02:10:00Z"
            }
            .into(),
        ),
    };
    let w = gantry::api::WhatIf {
        action: "submit".into(),
        job: 0,
        also: Vec::new(),
        made_s: 0.0,
        starts: vec![
            moved(0, "my-experiment", None, 600.0),
            moved(7, "other", Some(600.0), 4200.0),
        ],
        dollars_per_hour_before: 2.0,
        dollars_per_hour_after: 2.0,
        teams: Vec::new(),
        looked_to_s: 86_400.0,
        basis: String::new(),
    };
    app.form
        .as_mut()
        .unwrap()
        .answered(Ok(gantry::api::Preview {
            name: Some("my-experiment".into()),
            team: "ml".into(),
            class: "experiment".into(),
            gpus: 1.0,
            fits_now: false,
            nodes: Vec::new(),
            dollars_per_hour: 0.0,
            reason: Some("needs 1 node(s); 0 have room now".into()),
            what_if: Some(Box::new(w)),
        }));
    let s = screen(&app, &snap, 100, 30);
    assert!(s.contains("would wait: needs 1 node(s)"), "{s}");
    assert!(
        s.contains("submitted now, if the queue stays as it is:"),
        "{s}"
    );
    assert!(s.contains("it starts 2026-12-05T01:10:00Z (in 10m)"), "{s}");
    assert!(s.contains("job 7 other: starts later"), "{s}");
    match app.on_key("ctrl-s", &snap) {
        Outcome::Submit(spec) => assert!(spec.starts_with("name: my-experiment\n"), "{spec}"),
        other => panic!("{other:?}"),
    }
    app.submitted(4242);
    assert!(app.form.is_none() && app.draft.is_none());
    assert_eq!((app.view, app.jobs.selected), (View::Jobs, Some(4242)));
    // Read-only has no form.
    let mut ro = App::new(false);
    ro.readonly = true;
    assert_eq!(ro.on_key("n", &snap), Outcome::Nothing);
    assert!(ro.form.is_none());
}

#[test]
fn the_mouse_is_off_until_toggled_then_clicks_select_and_the_wheel_scrolls() {
    use crossterm::event::{KeyModifiers, MouseButton, MouseEvent, MouseEventKind};
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let _ = screen(&app, &snap, 100, 30);
    let at = |kind, row| MouseEvent {
        kind,
        column: 10,
        row,
        modifiers: KeyModifiers::NONE,
    };
    // Off: the terminal keeps mouse selection; events are ignored.
    assert_eq!(
        app.on_mouse(at(MouseEventKind::Down(MouseButton::Left), 5), &snap),
        Outcome::Nothing
    );
    app.on_key("m", &snap);
    assert!(app.mouse && app.flash.as_deref().unwrap().starts_with("mouse on"));
    let _ = screen(&app, &snap, 100, 30);
    // Rows start below the tab line, the border and the header: screen row 3 is the first job.
    app.on_mouse(at(MouseEventKind::Down(MouseButton::Left), 5), &snap);
    let order = queue_order(&snap);
    assert_eq!(app.jobs.selected, Some(order[2]));
    app.on_mouse(at(MouseEventKind::ScrollDown, 0), &snap);
    assert_eq!(app.jobs.selected, Some(order[3]));
    app.on_mouse(at(MouseEventKind::ScrollUp, 0), &snap);
    assert_eq!(app.jobs.selected, Some(order[2]));
    app.on_key("m", &snap);
    assert!(!app.mouse);
}

#[test]
fn the_fleet_view_opens_a_pool_node_by_node_and_gpu_by_gpu() {
    let demo = fixture::demo(10);
    let d = &demo.state;
    let snap = d.snapshot().clone();
    let mut app = App::new(false);
    app.on_key("3", &snap);
    // The first pool is the on-prem DGX pool; j moves to the next pool.
    assert_eq!(app.on_key("enter", &snap), Outcome::Pool(0));
    let detail = d.pool_detail(0).unwrap();
    assert!(
        detail.simulated && detail.nodes.len() == 16,
        "{}",
        detail.nodes.len()
    );
    let busy = detail
        .nodes
        .iter()
        .flat_map(|n| &n.gpus)
        .filter(|g| !g.jobs.is_empty());
    assert!(busy.clone().count() > 0);
    assert!(busy
        .clone()
        .all(|g| g.util_pct > 0.0 && g.vram_used_mib > 0));
    // Simulated power follows utilization between idle draw and the H100's 700 W.
    assert!(busy
        .clone()
        .all(|g| g.power_w > 70.0 && g.power_w <= 700.0 && g.temp_c > 30.0));
    // Each GPU of a job is modelled on its own (not eight identical copies), and the memory
    // it uses is told apart from what its job reserves.
    let gpus: Vec<&gantry::api::GpuView> = detail
        .nodes
        .iter()
        .flat_map(|n| &n.gpus)
        .filter(|g| g.jobs.len() == 1 && g.jobs[0] == detail.nodes[0].gpus[0].jobs[0])
        .collect();
    assert!(gpus.len() > 1, "a multi-GPU job on the first node");
    let utils: std::collections::BTreeSet<u64> =
        gpus.iter().map(|g| (g.util_pct * 100.0) as u64).collect();
    assert!(utils.len() > 1, "its GPUs vary: {utils:?}");
    assert!(busy
        .clone()
        .all(|g| g.vram_used_mib < g.vram_reserved_mib && g.vram_reserved_mib <= g.vram_total_mib));
    // The idle-cost header counts the same GPUs as the table of causes under it.
    let by_cause: f64 = snap.idle_by_cause.iter().map(|c| c.dollars_per_hour).sum();
    assert!((snap.idle_dollars_per_hour - by_cause).abs() < 1e-9);
    assert!(
        detail.nodes[0].gpus[0].history.len() >= 5,
        "a sample a simulated minute"
    );
    app.pool_detail = Some((0, detail));
    let s = screen(&app, &snap, 120, 40);
    assert!(s.contains("leaf onprem/dc1-hall-a/leaf-0"), "{s}");
    assert!(
        s.contains("onprem-dgx-h100-000") && s.contains("gpu0"),
        "{s}"
    );
    assert!(s.contains("/80 G") || s.contains("/80G"), "{s}");
    assert!(s.contains("SIMULATED"), "{s}");
    assert_eq!(app.on_key("esc", &snap), Outcome::Redraw);
    assert!(app.pool_detail.is_none());
    app.on_key("j", &snap);
    assert_eq!(app.on_key("enter", &snap), Outcome::Pool(1));
    assert!(d.pool_detail(99).is_none());
}

/// Escape typed just before a key reaches the console as Alt+key when both arrive in one read
/// (the CI run that caught it: Escape then 4 in a pool's node view stayed in the node view).
#[test]
fn escape_and_a_key_in_one_read_act_as_both() {
    use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let demo = fixture::demo(10);
    let snap = Snapshot::clone(demo.state.snapshot());
    let mut app = App::new(false);
    app.on_key("3", &snap);
    assert_eq!(app.on_key("enter", &snap), Outcome::Pool(0));
    app.pool_detail = Some((0, demo.state.pool_detail(0).unwrap()));
    let alt_4 = KeyEvent::new(KeyCode::Char('4'), KeyModifiers::ALT);
    let names = gantry::console::key_names(alt_4);
    assert_eq!(names, ["esc", "4"]);
    for name in &names {
        app.on_key(name, &snap);
    }
    assert!(app.pool_detail.is_none());
    let s = screen(&app, &snap, 120, 40);
    assert!(s.contains("use/weight"), "{s}");
    let plain = KeyEvent::new(KeyCode::Char('4'), KeyModifiers::NONE);
    assert_eq!(gantry::console::key_names(plain), ["4"]);
    // A view's key from inside a pool goes to that view (it used to be swallowed).
    app.on_key("3", &snap);
    app.pool_detail = Some((0, demo.state.pool_detail(0).unwrap()));
    app.on_key("5", &snap);
    assert!(app.pool_detail.is_none());
    assert!(screen(&app, &snap, 120, 40).contains("events, newest first"));
    let ctrl_s = KeyEvent::new(KeyCode::Char('s'), KeyModifiers::CONTROL);
    assert_eq!(gantry::console::key_names(ctrl_s), ["ctrl-s"]);
}

#[test]
fn the_fleet_view_shows_this_hosts_nvml_status_and_foreign_gpus() {
    use gantry::api::{GpuView, HostStatus, NodeView, PoolDetail};
    let mut snap = demo_snapshot();
    snap.host = Some(HostStatus {
        nvml: true,
        driver: Some("550.54.15".into()),
        gpus: 8,
        foreign_gpus: vec![3],
        sample_age_s: Some(1.0),
        reason: None,
    });
    let mut app = App::new(false);
    app.on_key("3", &snap);
    let s = screen(&app, &snap, 160, 48);
    assert!(
        s.contains("this host: NVIDIA driver 550.54.15 · 8 GPU(s) via NVML · sampled 1s ago · GPU 3 busy with processes gantry did not start (not allocated)"),
        "{s}"
    );
    snap.host = Some(HostStatus {
        reason: Some("NVML is not available (no driver)".into()),
        ..HostStatus::default()
    });
    assert!(screen(&app, &snap, 160, 48).contains("this host: NVML is not available (no driver)"));
    let gpu = |index: u8, jobs: Vec<i64>, foreign_pids: Vec<u32>| GpuView {
        index,
        util_pct: 93.0,
        vram_used_mib: 40_960,
        vram_reserved_mib: 81_559,
        vram_total_mib: 81_559,
        jobs,
        mig_used: None,
        power_w: 612.0,
        temp_c: 71.0,
        history: vec![90, 93],
        foreign_pids,
        foreign: None,
        unmeasured: false,
    };
    app.pool_detail = Some((
        0,
        PoolDetail {
            simulated: false,
            path: "local/here/here/host".into(),
            model: "H100".into(),
            capacity: "reserved".into(),
            dollars_per_hour: 0.0,
            nodes: vec![
                NodeView {
                    name: "local-host-000".into(),
                    state: "up".into(),
                    leaf: None,
                    nvlink: "local-host-000".into(),
                    note: None,
                    gpus: vec![gpu(0, vec![12], vec![]), gpu(1, vec![], vec![4242])],
                    ..NodeView::default()
                },
                // A CPU-only host with a CPU-only job: drawn by its CPUs, memory and disk (it
                // showed nothing but its name).
                NodeView {
                    name: "cpu-box".into(),
                    state: "up".into(),
                    nvlink: "cpu-box".into(),
                    jobs: vec![31],
                    resources: gantry::api::NodeResources {
                        cpus: 16.0,
                        cpus_allocated: 2.0,
                        mem_mib: 65_536,
                        mem_allocated_mib: 4_096,
                        measured: Some(gantry::backend::host_usage::HostUsage {
                            cpus: 16,
                            cpu_busy_pct: Some(37.0),
                            mem_total_mib: 65_536,
                            mem_available_mib: 45_056,
                            disk_path: "/var/lib/gantry".into(),
                            disk_total_mib: 512_000,
                            disk_free_mib: 256_000,
                        }),
                    },
                    ..NodeView::default()
                },
            ],
            waiting: Vec::new(),
        },
    ));
    let s = screen(&app, &snap, 120, 30);
    assert!(
        s.contains("cpu 2/16 given, 37% of 16 busy · mem 4/64G given, 20/64G used · disk 250/500G used · jobs 31"),
        "{s}"
    );
    assert!(s.contains("job 12") && s.contains("foreign 4242"), "{s}");
    assert!(s.contains("612W") && s.contains("71°C"), "{s}");
    assert!(
        !s.contains("SIMULATED ·") && !s.contains("· SIMULATED"),
        "measured, not simulated:\n{s}"
    );
    // A real host's GPU with no NVML sample: no utilization, power or temperature made up.
    if let Some((_, p)) = app.pool_detail.as_mut() {
        let g = &mut p.nodes[0].gpus[1];
        g.unmeasured = true;
        g.foreign_pids.clear();
        g.power_w = 0.0;
    }
    let s = screen(&app, &snap, 120, 30);
    let line = s
        .lines()
        .find(|l| l.contains("gpu1"))
        .unwrap_or_default()
        .to_string();
    assert!(
        line.contains("n/a") && line.contains("not measured") && !line.contains("0W"),
        "{s}"
    );
    // A GPU a Slurm job of the cluster's own holds says whose it is.
    if let Some((_, p)) = app.pool_detail.as_mut() {
        p.nodes[0].gpus[1].foreign = Some("Slurm job 12 \"train\" of alice".into());
    }
    let s = screen(&app, &snap, 120, 30);
    assert!(s.contains("Slurm job 12 \"train\" of alice"), "{s}");
    // The cluster's own jobs waiting for the pool's nodes, with Slurm's reasons.
    if let Some((_, p)) = app.pool_detail.as_mut() {
        p.waiting = vec![gantry::backend::ForeignWaiting {
            what: "Slurm job 14 \"sweep\" of bob".into(),
            gpus: 8,
            nodes: 2,
            reason: "queued behind jobs of higher priority (Slurm: Priority)".into(),
        }];
    }
    let s = screen(&app, &snap, 120, 30);
    assert!(
        s.contains("waiting in its own scheduler's queue for these nodes (1)")
            && s.contains("Slurm job 14 \"sweep\" of bob · 8 GPU(s) on 2 node(s) · queued behind jobs of higher priority (Slurm: Priority)"),
        "{s}"
    );
}

/// Plain `gantry` attaches to the daemon answering on the default socket (before: it always
/// opened the embedded demo), and its header says so.
#[test]
fn plain_gantry_attaches_to_the_daemon_on_the_default_socket() {
    if !have_tmux("attach test") {
        return;
    }
    let dir = gantry_testkit::scratch::scratch("attach");
    let env = [
        ("XDG_RUNTIME_DIR", dir.join("run")),
        ("XDG_CONFIG_HOME", dir.join("cfg")),
        ("XDG_DATA_HOME", dir.join("data")),
    ];
    let bin = env!("CARGO_BIN_EXE_gantry");
    let mut daemon = std::process::Command::new(bin)
        .arg("daemon")
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("GANTRY_CONNECT")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let socket = dir.join("run/gantry/gantry.sock");
    for _ in 0..300 {
        if std::os::unix::net::UnixStream::connect(&socket).is_ok() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let spec = dir.join("probe.yaml");
    std::fs::write(
        &spec,
        "name: attach-probe\nresources:\n  accelerators: H100:1\nrun: train\n",
    )
    .unwrap();
    let out = std::process::Command::new(bin)
        .arg("submit")
        .arg(&spec)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .env_remove("GANTRY_CONNECT")
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");

    let t = Tmux::new("a");
    let tmux = |args: &[&str]| t.run(args);
    let vars: Vec<String> = env
        .iter()
        .map(|(k, v)| format!("{k}={}", v.display()))
        .collect();
    tmux(&[
        "new-session",
        "-d",
        "-s",
        "a",
        "-x",
        "200",
        "-y",
        "40",
        &format!(
            "env -u GANTRY_CONNECT {} {bin}; echo EXITED; sleep 30",
            vars.join(" ")
        ),
    ]);
    let wait_for = |text: &str| t.wait_for(&[text]);
    wait_for("gantry.sock");
    let header = wait_for("daemon ");
    assert!(!header.contains(" demo "), "{header}");
    tmux(&["send-keys", "-t", "a", "2"]);
    wait_for("attach-probe");
    // Ctrl-C quits, as `q` does (it did nothing before).
    tmux(&["send-keys", "-t", "a", "C-c"]);
    wait_for("EXITED");
    tmux(&["kill-server"]);
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Someone with a fleet file of their own and no daemon running is told to start one (exit 5),
/// not shown the simulated demo in its place with only a badge to say so; `--demo` opens it.
#[test]
fn plain_gantry_with_a_fleet_of_ones_own_and_no_daemon_says_to_start_it() {
    if !have_tmux("no-daemon test") {
        return;
    }
    let dir = gantry_testkit::scratch::scratch("own-fleet");
    std::fs::create_dir_all(dir.join("cfg/gantry")).unwrap();
    std::fs::copy(
        "src/config/default_fleet.toml",
        dir.join("cfg/gantry/fleet.toml"),
    )
    .unwrap();
    let vars = format!(
        "XDG_RUNTIME_DIR={} XDG_CONFIG_HOME={} XDG_DATA_HOME={}",
        dir.join("run").display(),
        dir.join("cfg").display(),
        dir.join("data").display()
    );
    let bin = env!("CARGO_BIN_EXE_gantry");
    let t = Tmux::new("own");
    t.run(&[
        "new-session",
        "-d",
        "-s",
        "own",
        "-x",
        "500",
        "-y",
        "40",
        &format!(
            "env -u GANTRY_CONNECT -u GANTRY_CONTEXT {vars} {bin}; echo EXITED $?; read x; env -u GANTRY_CONNECT {vars} {bin} --demo; sleep 30"
        ),
    ]);
    let s = t.wait_for(&["EXITED"]);
    assert!(
        s.contains("no daemon answers on")
            && s.contains("gantry daemon")
            && s.contains("gantry --demo")
            && s.contains("EXITED 5"),
        "{s}"
    );
    // The console's screen would hide the message: the demo is opened once it was read.
    t.run(&["send-keys", "-t", "own", "Enter"]);
    t.wait_for(&["SIMULATED"]);
    t.run(&["send-keys", "-t", "own", "q"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn money_shows_cents_under_a_hundred_dollars() {
    use gantry::console::app::money;
    // A 1 h 37 m notebook at $0.27/h is not "$0".
    assert_eq!(money(0.27 * 97.0 / 60.0), "$0.44");
    assert_eq!(money(12.3), "$12.30");
    assert_eq!(money(99.994), "$99.99");
    assert_eq!(money(950.0), "$950");
    assert_eq!(money(12_300.0), "$12.3k");
    assert_eq!(money(1_250_000.0), "$1.25M");
}

/// `:ctx` lists the daemons console.toml names (the one shown marked), `:ctx NAME` switches to
/// one, and an unknown name says which exist.
#[test]
fn ctx_lists_the_configured_daemons_and_switches() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    let ctx = |app: &mut App, line: &str| {
        app.on_key(":", &snap);
        keys(app, &snap, line);
        app.on_key("enter", &snap)
    };
    ctx(&mut app, "ctx");
    assert!(
        app.flash.as_deref().unwrap().starts_with("no contexts"),
        "{:?}",
        app.flash
    );
    app.contexts = vec![
        ("lab".into(), "/run/gantry/gantry.sock".into()),
        ("prod".into(), "http://gantry.prod:7450".into()),
    ];
    app.source = "daemon /run/gantry/gantry.sock".into();
    ctx(&mut app, "ctx");
    assert_eq!(
        app.flash.as_deref(),
        Some("contexts: *lab (/run/gantry/gantry.sock), prod (http://gantry.prod:7450); :ctx NAME switches")
    );
    assert_eq!(ctx(&mut app, "ctx prod"), Outcome::Switch("prod".into()));
    assert_eq!(ctx(&mut app, "ctx staging"), Outcome::Redraw);
    assert_eq!(
        app.flash.as_deref(),
        Some(":ctx staging: no such context; contexts: lab, prod")
    );
}

/// The real binary in tmux: plain `gantry` opens console.toml's `context`, and `:ctx NAME`
/// closes that daemon's view and opens the other's (the header says which daemon).
#[test]
fn ctx_switches_the_console_between_daemons_in_tmux() {
    if !have_tmux("end-to-end console test") {
        return;
    }
    let bin = env!("CARGO_BIN_EXE_gantry");
    let dir = gantry_testkit::scratch::scratch("ctx-tmux");
    std::fs::create_dir_all(dir.join("cfg/gantry")).unwrap();
    struct Killed(Vec<std::process::Child>);
    impl Drop for Killed {
        fn drop(&mut self) {
            for c in &mut self.0 {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
    let mut daemons = Killed(Vec::new());
    for name in ["a", "b"] {
        let socket = dir.join(format!("{name}.sock"));
        daemons.0.push(
            std::process::Command::new(bin)
                .args(["daemon", "--db"])
                .arg(dir.join(format!("{name}.db")))
                .arg("--socket")
                .arg(&socket)
                .env("XDG_CONFIG_HOME", dir.join("cfg"))
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn()
                .unwrap(),
        );
        let t0 = std::time::Instant::now();
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(t0.elapsed().as_secs() < 20, "daemon {name} did not start");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
    std::fs::write(
        dir.join("cfg/gantry/console.toml"),
        format!(
            "context = \"a\"\n[[contexts]]\nname = \"a\"\nconnect = \"{}\"\n[[contexts]]\nname = \"b\"\nconnect = \"{}\"\n",
            dir.join("a.sock").display(),
            dir.join("b.sock").display()
        ),
    )
    .unwrap();
    let t = Tmux::new("ctx");
    t.run(&[
        "new-session",
        "-d",
        "-s",
        "ctx",
        "-x",
        "160",
        "-y",
        "32",
        &format!(
            "XDG_CONFIG_HOME={} {bin}; echo EXITED; sleep 30",
            dir.join("cfg").display()
        ),
    ]);
    let header = |n: &str| format!("daemon {}", dir.join(format!("{n}.sock")).display());
    t.wait_for(&[&header("a")]);
    for k in [":", "c", "t", "x", "Enter"] {
        t.run(&["send-keys", "-t", "ctx", k]);
    }
    t.wait_for(&["*a ("]);
    for k in [":", "c", "t", "x", " ", "b", "Enter"] {
        t.run(&["send-keys", "-t", "ctx", k]);
    }
    let s = t.wait_for(&[&header("b")]);
    assert!(!s.contains("EXITED") && !s.contains(&header("a")), "{s}");
    t.run(&["send-keys", "-t", "ctx", "q"]);
    t.wait_for(&["EXITED"]);
    t.run(&["kill-server"]);
    drop(daemons);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `<` and `>` order only by columns on screen: at 80 columns the Jobs view drops some (team,
/// position, …), and each step lands on one whose title (with its arrow) is drawn.
#[test]
fn sort_keys_step_over_columns_a_narrow_terminal_does_not_show() {
    let snap = demo_snapshot();
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let first = screen(&app, &snap, 80, 24);
    assert!(
        !first.contains("team"),
        "the team column is dropped at 80:\n{first}"
    );
    for key in [">"; 11].into_iter().chain(["<"; 11]) {
        app.on_key(key, &snap);
        let s = screen(&app, &snap, 80, 24);
        // The table's title row (the key bar below also says the order, arrow and all).
        let titles = s.lines().nth(2).unwrap_or_default();
        assert!(
            titles.contains('▲') || titles.contains('▼'),
            "after {key} the ordered column is not on screen ({:?}):\n{s}",
            app.flash
        );
    }
}

/// The header names the daemon at every width, cut from the left (its end names it best), and
/// never at the cost of a tab (at 120 columns a long socket path cut the Events tab; at 80 no
/// daemon was named).
#[test]
fn the_header_keeps_every_tab_and_names_the_daemon_at_any_width() {
    let mut snap = demo_snapshot();
    snap.simulated = false;
    let mut app = App::new(false);
    app.source = "daemon /home/someone/.local/state/gantry/run/gantry.sock".into();
    for (w, h) in [(80u16, 24u16), (100, 30), (120, 36), (200, 50)] {
        let s = screen(&app, &snap, w, h);
        let top = s.lines().next().unwrap();
        assert!(top.contains("Events"), "{w}: {top}");
        assert!(top.contains("gantry.sock"), "{w}: {top}");
        assert!(top.contains("00:05 UTC"), "{w}: {top}");
    }
}

/// The Jobs view has a restarts column (k9s's RESTARTS): how many times a job was started
/// again after its own failures, where the screen is wide enough.
#[test]
fn the_jobs_view_counts_restarts() {
    let mut snap = demo_snapshot();
    let id = snap.jobs[0].id;
    std::sync::Arc::make_mut(&mut snap.jobs[0]).restarts = 3;
    let mut app = App::new(false);
    app.on_key("2", &snap);
    let s = screen(&app, &snap, 200, 50);
    let lines: Vec<&str> = s.lines().collect();
    let header = lines
        .iter()
        .find(|l| l.contains("restarts"))
        .expect("a restarts column");
    let end = header.find("restarts").unwrap() + "restarts".len();
    let row = lines
        .iter()
        .find(|l| l.trim_start_matches('│').starts_with(&format!("{id} ")))
        .unwrap_or_else(|| panic!("{s}"));
    // Right-aligned under its title.
    assert_eq!(&row[end - 1..end], "3", "{header}\n{row}");
}
