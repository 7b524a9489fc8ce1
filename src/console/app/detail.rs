//! One job in full, over the Jobs view: what it is, where it runs or why it waits, what it
//! cost, its spec and events (scrolled with j/k and the page keys), and the newest lines of its
//! log in a box of their own at the bottom, so the latest output is never below the fold.

use super::*;
use crate::api::JobState;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

impl App {
    pub(super) fn render_detail(
        &self,
        f: &mut Frame,
        area: Rect,
        d: &crate::api::JobView,
        snap: &Snapshot,
    ) {
        use crate::console::clock::moment;
        let now = snap.now;
        let today = snap.calendar.time.as_str();
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let when = |time: &str, at: f64| {
            if time.is_empty() && snap.calendar.time.is_empty() {
                format!("{} ago", hm(now - at))
            } else {
                format!("{} ({} ago)", moment(time, at, today), hm(now - at))
            }
        };
        let mut lines = vec![
            Line::from(vec![
                Span::styled(
                    format!("job {} {}", d.id, escape(d.name.as_deref().unwrap_or(""))),
                    bold,
                ),
                Span::raw(format!(
                    "   {} · {} · {}{}",
                    escape(&d.team),
                    escape(&d.class),
                    d.state,
                    d.user
                        .as_deref()
                        .map_or(String::new(), |u| format!(" · by {}", escape(u)))
                )),
            ]),
            Line::from(format!(
                "submitted {}{}",
                when(&d.submitted, d.submitted_at),
                d.started_at.map_or(String::new(), |t| format!(
                    " · started {}",
                    when(d.started.as_deref().unwrap_or(""), t)
                )),
            )),
            Line::from(format!(
                "cost so far {} at ${:.2}/h",
                money(d.cost_usd),
                d.dollars_per_hour
            )),
        ];
        if let Some(r) = &d.reason {
            let head = if matches!(d.state, JobState::Pending | JobState::Held) {
                "why it waits: "
            } else {
                "why: "
            };
            lines.push(Line::from(vec![
                Span::styled(head, bold),
                Span::raw(escape(r)),
            ]));
        }
        if let Some(e) = &d.eta {
            lines.push(Line::from(vec![
                Span::styled("ETA: ", bold),
                Span::raw(escape(&e.when())),
            ]));
            lines.push(Line::from(format!(
                "  if the queue stays as it is; {}",
                escape(&e.basis)
            )));
        }
        for p in &d.placement {
            lines.push(Line::from(format!("on {}", escape(p))));
        }
        if let Some(e) = &d.experiment {
            let run = e
                .url
                .as_deref()
                .or(e.run_id.as_deref())
                .map_or("no MLflow run yet".to_string(), |r| {
                    format!("MLflow run {}", escape(r))
                });
            lines.push(Line::from(vec![
                Span::styled("experiment ", bold),
                Span::raw(format!("{} · {run}", escape(&e.experiment))),
            ]));
            if let Some(w) = &e.waiting {
                lines.push(Line::from(Span::styled(
                    format!("  {}", escape(w)),
                    self.style(self.theme.warn),
                )));
            }
        }
        if !d.runs.is_empty() {
            lines.push(Line::from(Span::styled("runs", bold)));
            lines.extend(
                d.runs
                    .iter()
                    .map(|r| Line::from(format!("  {}", crate::console::runs::run_line(r, false)))),
            );
        }
        lines.push(Line::from(Span::styled("spec", bold)));
        lines.extend(
            d.spec
                .lines()
                .map(|l| Line::from(format!("  {}", escape(l)))),
        );
        // The daemon lists a job's events in the order they happened: shown the other way, as
        // the heading says (it listed them oldest first under it).
        lines.push(Line::from(Span::styled("events, newest first", bold)));
        lines.extend(d.events.iter().rev().map(|e| {
            Line::from(format!(
                "  {}  {}",
                moment(&e.time, e.at, today),
                escape(&e.detail)
            ))
        }));
        // The log's newest lines keep a box at the bottom (up to a third of the screen).
        let tail = if d.log_tail.is_empty() {
            0
        } else {
            (d.log_tail.len() as u16 + 2).min((area.height / 3).max(4))
        };
        let [top, bottom] =
            Layout::vertical([Constraint::Min(3), Constraint::Length(tail)]).areas(area);
        let inner = top.height.saturating_sub(2);
        let max = (lines.len() as u16).saturating_sub(inner);
        self.detail_max.set(max);
        let scroll = self.detail_scroll.min(max);
        if d.log_tail.is_empty() {
            lines.push(Line::from(Span::styled(
                "logs: none kept here (l asks the job's hosts; simulated jobs run no process)",
                self.style(self.theme.muted),
            )));
        }
        let more = if max > 0 {
            format!(" · line {}/{} j/k", scroll + 1, max + 1)
        } else {
            String::new()
        };
        f.render_widget(
            Paragraph::new(lines).scroll((scroll, 0)).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(format!(" job {} (l logs{more} · esc back) ", d.id)),
            ),
            top,
        );
        if tail > 0 {
            let shown = usize::from(tail - 2);
            let skip = d.log_tail.len().saturating_sub(shown);
            let width = usize::from(bottom.width.saturating_sub(2));
            let log: Vec<Line> = d.log_tail[skip..]
                .iter()
                .map(|l| Line::from(crate::console::table::cut(&escape(l), width).into_owned()))
                .collect();
            f.render_widget(
                Paragraph::new(log).block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" log, newest last (l for all of it) "),
                ),
                bottom,
            );
        }
    }
}
