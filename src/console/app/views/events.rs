//! The Events view: what the daemon did and saw, newest first (`o` turns it), filtered by `/`.

use super::super::*;
use super::Tab;
use crate::console::table::{cut, Sort};
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// What the Events view keeps between frames.
#[derive(Debug, Default)]
pub struct EventsState {
    /// The `/` filter in force.
    pub filter: Option<Filter>,
}

/// The Events view.
pub struct Events;

impl Tab for Events {
    fn name(&self) -> &'static str {
        "events"
    }

    fn short(&self) -> &'static str {
        "Events"
    }

    fn takes_filter(&self) -> bool {
        true
    }

    fn filter<'a>(&self, app: &'a mut App) -> &'a mut Option<Filter> {
        &mut app.events.filter
    }

    /// Newest first is its own order; `o` turns it to oldest first and back.
    fn turned(&self) -> Option<Sort> {
        Some(Sort {
            col: 0,
            desc: false,
        })
    }

    fn turns_back(&self) -> bool {
        true
    }

    fn order_name(&self, sort: Option<Sort>) -> Option<String> {
        Some(match sort {
            None => "events: newest first".into(),
            Some(_) => "events: oldest first".into(),
        })
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        list(app, f, area, snap, " events, newest first ");
    }
}

/// Events, newest first, as many as fit: the Events view and the Overview's box.
pub(super) fn list(app: &App, f: &mut Frame, area: Rect, snap: &Snapshot, title: &str) {
    // The Events view's filter; the Overview's box shows everything.
    let filter = (app.view == View::Events)
        .then_some(app.events.filter.as_ref())
        .flatten();
    let oldest_first = app.view == View::Events && app.events_oldest_first();
    let inner = usize::from(area.width.saturating_sub(2));
    let kept = snap
        .events
        .iter()
        .filter(|e| filter.is_none_or(|f| f.matches_text(e)));
    let kept: Box<dyn Iterator<Item = &String>> = if oldest_first {
        Box::new(kept.rev())
    } else {
        Box::new(kept)
    };
    let lines: Vec<Line> = kept
        .take(area.height.saturating_sub(2) as usize)
        .map(|e| Line::from(cut(&escape(e), inner).into_owned()))
        .collect();
    let title = if oldest_first {
        title.replace("newest first", "oldest first")
    } else {
        title.to_string()
    };
    let title = match filter {
        Some(f) => format!("{}/{} ", title, escape(&f.text)),
        None => title,
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
        area,
    );
}
