//! The full-screen console. It depends only on the client interface. It draws only when data
//! or input changed (no frame loop: an idle console writes nothing), wraps each frame in
//! synchronized output, and restores the terminal on exit and on panic.

pub mod app;

use crate::client::Client;
use app::{App, Outcome};
use crossterm::event::{self, Event, KeyCode, KeyEventKind};
use crossterm::terminal::{BeginSynchronizedUpdate, EndSynchronizedUpdate};
use std::io::Write;
use std::time::Duration;

/// Colour unless NO_COLOR is set (https://no-color.org) or the terminal is dumb.
pub fn color_enabled() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
        && std::env::var("TERM").map_or(true, |t| t != "dumb")
}

fn key_name(code: KeyCode) -> Option<String> {
    Some(match code {
        KeyCode::Char(c) => c.to_string(),
        KeyCode::Tab => "tab".into(),
        KeyCode::Up => "up".into(),
        KeyCode::Down => "down".into(),
        KeyCode::Home => "home".into(),
        KeyCode::End => "end".into(),
        KeyCode::Esc => "esc".into(),
        _ => return None,
    })
}

/// Runs the console until the user quits.
pub fn run(client: &mut dyn Client) -> std::io::Result<()> {
    let mut terminal = ratatui::init(); // raw mode, alternate screen, and a panic hook that restores
    let mut app = App::new(color_enabled());
    let mut dirty = true;
    let result = (|| -> std::io::Result<()> {
        loop {
            if dirty {
                let mut out = std::io::stdout();
                crossterm::execute!(out, BeginSynchronizedUpdate)?;
                terminal.draw(|f| app.render(f, client.snapshot()))?;
                crossterm::execute!(out, EndSynchronizedUpdate)?;
                out.flush()?;
                dirty = false;
            }
            if event::poll(client.until_next())? {
                // Drain everything queued, then draw once.
                loop {
                    match event::read()? {
                        Event::Key(k) if k.kind == KeyEventKind::Press => {
                            if let Some(name) = key_name(k.code) {
                                match app.on_key(&name, client.snapshot()) {
                                    Outcome::Quit => return Ok(()),
                                    Outcome::Redraw => dirty = true,
                                    Outcome::Nothing => {}
                                }
                            }
                        }
                        Event::Resize(..) => dirty = true,
                        _ => {}
                    }
                    if !event::poll(Duration::ZERO)? {
                        break;
                    }
                }
            }
            if client.poll() {
                dirty = true;
            }
        }
    })();
    ratatui::restore();
    result
}
