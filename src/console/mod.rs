//! The full-screen console. It depends only on the client interface. It draws only when data
//! or input changed (no frame loop: an idle console writes nothing), wraps each frame in
//! synchronized output, and restores the terminal on exit and on panic.

pub mod app;
pub mod clock;
pub mod filter;
pub mod form;
pub mod keymap;
pub mod logs;
pub mod node;
pub mod runs;
pub mod svg;
pub mod table;
pub mod theme;

use crate::api::{Client, ClientError};
use app::{App, Outcome};
use crossterm::event::{self, Event, KeyCode, KeyEventKind};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use ratatui::backend::Backend;
use ratatui::Terminal;
use std::io::Write;
use std::time::{Duration, Instant};

/// The keymap in force: `name` (default "default"), with the user's bindings layered on top.
pub fn load_keymap(
    name: Option<&str>,
    config_dir: &std::path::Path,
) -> Result<keymap::Keymap, String> {
    keymap::Keymap::load(name.unwrap_or("default"), config_dir)
}

/// The theme to draw with: `name` (default "dark"), layered with the user's file in
/// `config_dir/themes/`, downsampled to what NO_COLOR, COLORTERM and TERM say the terminal shows.
pub fn load_theme(
    name: Option<&str>,
    config_dir: &std::path::Path,
) -> Result<(theme::Theme, bool), String> {
    let depth = theme::detect_depth(|k| std::env::var(k).ok());
    let t = theme::Theme::load(name.unwrap_or("dark"), config_dir, depth)?;
    Ok((t, depth != theme::Depth::None))
}

/// The console's names for a key press, in order. A terminal sends Escape as one byte and
/// Alt+key as Escape then the key, so an Escape typed just before a key (over SSH both often
/// arrive in one read) parses as Alt+key: the console binds nothing to Alt, so it takes that
/// as the Escape and then the key the user typed.
pub fn key_names(k: crossterm::event::KeyEvent) -> Vec<String> {
    use crossterm::event::KeyModifiers;
    let name = match k.code {
        KeyCode::Char(c) if k.modifiers.contains(KeyModifiers::CONTROL) => format!("ctrl-{c}"),
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Delete => "delete".into(),
        KeyCode::Tab => "tab".into(),
        KeyCode::Up => "up".into(),
        KeyCode::Down => "down".into(),
        KeyCode::Home => "home".into(),
        KeyCode::End => "end".into(),
        KeyCode::PageUp => "pageup".into(),
        KeyCode::PageDown => "pagedown".into(),
        KeyCode::Esc => "esc".into(),
        KeyCode::Backspace => "backspace".into(),
        KeyCode::Enter => "enter".into(),
        KeyCode::Left => "left".into(),
        KeyCode::Right => "right".into(),
        KeyCode::BackTab => "backtab".into(),
        _ => return Vec::new(),
    };
    if k.modifiers.contains(KeyModifiers::ALT) && k.code != KeyCode::Esc {
        vec!["esc".into(), name]
    } else {
        vec![name]
    }
}

/// Where key and resize events come from.
pub trait Input {
    /// Waits up to `timeout` for one event.
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<Event>>;
}

/// The terminal's own events.
pub struct TerminalInput;

impl Input for TerminalInput {
    fn next(&mut self, timeout: Duration) -> std::io::Result<Option<Event>> {
        if event::poll(timeout)? {
            Ok(Some(event::read()?))
        } else {
            Ok(None)
        }
    }
}

/// Applies a confirmed change to a job and says how it went.
fn act(app: &mut App, client: &mut dyn Client, req: crate::api::JobRequest) {
    app.flash = Some(match client.act(req) {
        Ok(done) => done,
        Err(why) => crate::api::about_job(req.id, &why.to_string()),
    });
    // The change shows once the daemon publishes it.
    let _ = client.poll();
}

/// The daemon's preview of the change a confirmation asks about; none for a reclaim.
fn preview(
    client: &mut dyn Client,
    ask: &app::Ask,
) -> Option<Result<crate::api::WhatIf, ClientError>> {
    Some(match ask {
        app::Ask::Job { request, .. } => client.what_if(*request),
        app::Ask::Prio { id, to, .. } => client.what_if_priority(*id, to),
        app::Ask::Bulk { action, ids, .. } => client.what_if_many(*action, ids),
        app::Ask::Reclaim(_) => return None,
    })
}

/// Carries out a confirmed change to jobs: one job's action, a reprioritization, or one
/// action on every marked job; what happened goes to the status bar.
fn carry_out(app: &mut App, client: &mut dyn Client, outcome: Outcome) {
    match outcome {
        Outcome::Act(req) => act(app, client, req),
        Outcome::Prio { id, class } => {
            app.flash = Some(match client.set_priority(id, &class) {
                Ok(done) => done,
                Err(why) => crate::api::about_job(id, &why.to_string()),
            });
            let _ = client.poll();
        }
        Outcome::ActMany(reqs) => {
            let (mut ok, mut failed) = (0, Vec::new());
            for req in &reqs {
                match client.act(*req) {
                    Ok(_) => ok += 1,
                    Err(why) => failed.push(crate::api::about_job(req.id, &why.to_string())),
                }
            }
            let verb = reqs.first().map_or("", |r| r.action.name());
            app.jobs.marked.clear();
            app.flash = Some(match failed.first() {
                None => format!("{verb}: {ok} job(s) done"),
                Some(first) => format!("{verb}: {ok} done, {} failed ({first})", failed.len()),
            });
            let _ = client.poll();
        }
        _ => {}
    }
}

/// A shell in job `id`, on this terminal: the console's screen put away until it exits (as
/// k9s does), then drawn afresh. What the status bar says of it.
fn shell<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    client: &mut dyn Client,
    id: i64,
) -> std::io::Result<String>
where
    std::io::Error: From<B::Error>,
{
    use crossterm::terminal::{EnterAlternateScreen, LeaveAlternateScreen};
    crossterm::execute!(
        terminal.backend_mut(),
        crossterm::event::DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    )?;
    let _ = crossterm::terminal::disable_raw_mode();
    crossterm::execute!(
        terminal.backend_mut(),
        crossterm::style::Print(format!(
            "gantry: a shell in job {id} (exit it to return to the console)\r\n"
        ))
    )?;
    let ended = client.shell(id);
    let _ = crossterm::terminal::enable_raw_mode();
    crossterm::execute!(
        terminal.backend_mut(),
        EnterAlternateScreen,
        crossterm::cursor::Hide
    )?;
    terminal.clear()?;
    Ok(match ended {
        Ok(code) => format!("job {id}: the shell ended (exit {code})"),
        Err(why) => crate::api::about_job(id, &why.to_string()),
    })
}

/// Runs the console until the user quits (`None`) or switches to a context (`Some(name)`).
pub fn run(client: &mut dyn Client, mut app: App) -> std::io::Result<Option<String>> {
    app.access = client.access();
    let mut terminal = ratatui::init(); // raw mode, alternate screen, and a panic hook that restores
    let result = run_loop(&mut terminal, app, client, &mut TerminalInput, &|| false);
    let _ = crossterm::execute!(std::io::stdout(), crossterm::event::DisableMouseCapture);
    ratatui::restore();
    result
}

/// The console's loop over any backend and input: draw when dirty, else wait for input or
/// for the client's next news. `stop` ends it from outside (benchmarks). Ends with the context to
/// switch to, if the user asked for one.
pub fn run_loop<B: Backend + Write>(
    terminal: &mut Terminal<B>,
    mut app: App,
    client: &mut dyn Client,
    input: &mut dyn Input,
    stop: &dyn Fn() -> bool,
) -> std::io::Result<Option<String>>
where
    std::io::Error: From<B::Error>,
{
    let mut dirty = true;
    let mut mouse_on = false;
    let mut pool_fetched = Instant::now();
    let mut logs_fetched = Instant::now();
    let mut node_fetched = Instant::now();
    while !stop() {
        // Mouse capture follows the app's setting (the config file's, then the m key).
        if app.mouse != mouse_on {
            mouse_on = app.mouse;
            if mouse_on {
                crossterm::execute!(terminal.backend_mut(), crossterm::event::EnableMouseCapture)?;
            } else {
                crossterm::execute!(
                    terminal.backend_mut(),
                    crossterm::event::DisableMouseCapture
                )?;
            }
        }
        if dirty {
            app.lost = client.lost();
            crossterm::execute!(terminal.backend_mut(), BeginSynchronizedUpdate)?;
            terminal.draw(|f| app.render(f, client.snapshot()))?;
            crossterm::execute!(terminal.backend_mut(), EndSynchronizedUpdate)?;
            Write::flush(terminal.backend_mut())?;
            dirty = false;
        }
        // Wait for input until the client may have news; drain what queued, then draw once.
        let mut wait = client.until_next();
        while let Some(ev) = input.next(wait)? {
            match ev {
                Event::Key(k) if k.kind == KeyEventKind::Press => {
                    for name in key_names(k) {
                        let outcome = app.on_key(&name, client.snapshot());
                        if let Some(since) = client.lost().filter(|_| outcome.changes()) {
                            // Refused here, at once, rather than each request timing out.
                            app.flash = Some(format!(
                                "not sent: the daemon is out of reach ({since}); the console reconnects by itself"
                            ));
                            dirty = true;
                            continue;
                        }
                        match outcome {
                            Outcome::Quit => return Ok(None),
                            Outcome::Switch(to) => return Ok(Some(to)),
                            Outcome::Redraw => dirty = true,
                            Outcome::WhatIf(req) => {
                                let said = client.what_if(req).map_err(|e| e.to_string());
                                app.what_if = Some((req.id, said));
                                dirty = true;
                            }
                            Outcome::WhatIfMany { action, ids } => {
                                let said =
                                    client.what_if_many(action, &ids).map_err(|e| e.to_string());
                                app.what_if = ids.first().map(|&id| (id, said));
                                dirty = true;
                            }
                            Outcome::Act(req) => {
                                act(&mut app, client, req);
                                dirty = true;
                            }
                            Outcome::WhatIfPrio { id, class } => {
                                let said = client
                                    .what_if_priority(id, &class)
                                    .map_err(|e| e.to_string());
                                app.what_if = Some((id, said));
                                dirty = true;
                            }
                            Outcome::AsShown { ask, shown } => {
                                // Asked again at the key: applied only if it still says what
                                // was shown (a preview that cannot be made now is no change
                                // to show: the action itself says why it is refused).
                                let now = preview(client, &ask).and_then(Result::ok);
                                match now.as_ref().and_then(|n| shown.changed(n).map(|c| (n, c))) {
                                    None => carry_out(&mut app, client, ask.outcome()),
                                    Some((now, what)) => {
                                        app.flash = Some(format!(
                                            "the preview changed since it was shown: {what}; confirming applies what it says now"
                                        ));
                                        app.what_if =
                                            ask.previewed().map(|id| (id, Ok(now.clone())));
                                        app.confirm = Some(app::Confirm {
                                            ask: ask.again(),
                                            on_confirm: false,
                                        });
                                    }
                                }
                                dirty = true;
                            }
                            Outcome::Prio { .. } | Outcome::ActMany(_) => {
                                carry_out(&mut app, client, outcome);
                                dirty = true;
                            }
                            Outcome::Reclaim { apply: None } => {
                                match client.reclaim(None) {
                                    Ok(plan) => app.review_reclaim(plan),
                                    Err(why) => app.flash = Some(format!("reclaim: {why}")),
                                }
                                dirty = true;
                            }
                            Outcome::Reclaim { apply: Some(id) } => {
                                app.flash = Some(match client.reclaim(Some(&id)) {
                                    Ok(done) => format!(
                                        "reclaimed {} job(s): {} GPU(s), ${:.2}/h freed{}",
                                        done.items.len(),
                                        crate::api::gpus_text(done.gpus_freed),
                                        done.dollars_per_hour_saved,
                                        if done.skipped.is_empty() {
                                            String::new()
                                        } else {
                                            format!(
                                                "; {} skipped (no longer idle)",
                                                done.skipped.len()
                                            )
                                        }
                                    ),
                                    Err(why) => format!("reclaim: {why}"),
                                });
                                let _ = client.poll();
                                dirty = true;
                            }
                            Outcome::Shell(id) => {
                                app.flash = Some(shell(terminal, client, id)?);
                                mouse_on = false; // turned on again below if it was
                                dirty = true;
                            }
                            Outcome::Detail(id) => {
                                match client.job(id) {
                                    Ok(d) => {
                                        app.detail = Some(d);
                                        app.detail_scroll = 0;
                                    }
                                    Err(why) => {
                                        app.flash =
                                            Some(crate::api::about_job(id, &why.to_string()))
                                    }
                                }
                                dirty = true;
                            }
                            Outcome::Preview(spec) => {
                                let answer = client.preview(&spec);
                                if let Some(form) = app.form.as_mut() {
                                    form.answered(answer);
                                }
                                dirty = true;
                            }
                            Outcome::Submit(spec) => {
                                match client.submit(&spec) {
                                    Ok(id) => {
                                        let _ = client.poll();
                                        app.submitted(id);
                                    }
                                    Err(why) => {
                                        if let Some(form) = app.form.as_mut() {
                                            form.answered(Err(why));
                                        }
                                    }
                                }
                                dirty = true;
                            }
                            Outcome::Logs { id, node } => {
                                let from = crate::api::LogsFrom::Tail(logs::TAIL);
                                let got = client.logs(id, node, &from).map_err(|e| e.to_string());
                                if let Some(p) = app.logs.as_mut() {
                                    p.update(got);
                                }
                                logs_fetched = Instant::now();
                                dirty = true;
                            }
                            Outcome::Node { name, range } => {
                                let got = client.node(&name, range).map_err(|e| e.to_string());
                                if let Some(n) = app.node.as_mut() {
                                    n.update(got);
                                }
                                node_fetched = Instant::now();
                                dirty = true;
                            }
                            Outcome::Pool(i) => {
                                match client.pool(i) {
                                    Ok(p) => app.pool_detail = Some((i, p)),
                                    Err(why) => app.flash = Some(format!("pool: {why}")),
                                }
                                pool_fetched = Instant::now();
                                dirty = true;
                            }
                            Outcome::Nothing => {}
                        }
                    }
                }
                Event::Mouse(m) if app.on_mouse(m, client.snapshot()) == Outcome::Redraw => {
                    dirty = true;
                }
                Event::Resize(..) => dirty = true,
                _ => {}
            }

            wait = Duration::ZERO;
        }
        // A followed log view reads what was written since its last read, twice a second (as
        // `gantry logs -f` does).
        if let Some(p) = app.logs.as_mut().filter(|p| p.follow) {
            if logs_fetched.elapsed() >= Duration::from_millis(500) {
                let from = p.next_read();
                let got = client.logs(p.job, p.node, &from).map_err(|e| e.to_string());
                p.take(&from, got);
                logs_fetched = Instant::now();
                dirty = true;
            }
        }
        // An open node view follows the data once a second.
        if let Some(n) = app.node.as_mut() {
            if node_fetched.elapsed() >= Duration::from_secs(1) {
                n.update(
                    client
                        .node(&n.name.clone(), n.range)
                        .map_err(|e| e.to_string()),
                );
                node_fetched = Instant::now();
                dirty = true;
            }
        }
        if client.poll() {
            dirty = true;
            // An open pool follows the data, at most once a second.
            if let Some((i, _)) = app.pool_detail {
                if pool_fetched.elapsed() >= Duration::from_secs(1) {
                    if let Ok(p) = client.pool(i) {
                        app.pool_detail = Some((i, p));
                    }
                    pool_fetched = Instant::now();
                }
            }
        }
    }
    Ok(None)
}
