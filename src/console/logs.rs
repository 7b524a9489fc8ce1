//! The console's log view: a job's stdout and stderr over the whole body, every node's (a
//! multi-node job's lines marked `[node K]`) or one node's; `[` and `]` step through the
//! nodes, `f` follows (refetched each second while the job runs), j/k scroll back.

use crate::client::LogsView;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// How many lines of each stream the view asks for.
pub const TAIL: usize = 500;

#[derive(Clone, Debug, Default, PartialEq)]
pub struct LogPane {
    pub job: i64,
    /// One node's logs (by rank), or every node's.
    pub node: Option<usize>,
    /// The nodes the job ran on, by rank (from the last answer for every node).
    pub nodes: Vec<String>,
    pub view: LogsView,
    /// Why the last fetch failed (the lines shown are from before it).
    pub error: Option<String>,
    pub follow: bool,
    /// Lines scrolled back from the end.
    pub back: u16,
}

/// What a key in the log view asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogKey {
    Close,
    /// Fetch again (another node, or following).
    Fetch,
    Redraw,
    Nothing,
}

impl LogPane {
    pub fn new(job: i64) -> LogPane {
        LogPane {
            job,
            follow: true,
            ..LogPane::default()
        }
    }

    /// Takes a fetch's answer.
    pub fn update(&mut self, got: Result<LogsView, String>) {
        match got {
            Ok(v) => {
                if self.node.is_none() {
                    self.nodes = v.nodes.iter().map(|n| n.node.clone()).collect();
                }
                if v.is_final {
                    self.follow = false;
                }
                self.view = v;
                self.error = None;
            }
            Err(why) => self.error = Some(why),
        }
    }

    /// `down`/`up`: the keymap's scroll actions.
    pub fn key(&mut self, key: &str, down: bool, up: bool) -> LogKey {
        match key {
            "esc" | "q" => LogKey::Close,
            "]" | "[" => {
                let n = self.nodes.len();
                if n < 2 {
                    return LogKey::Nothing;
                }
                // every node → 0 → 1 … → n-1 → every node (and back the other way).
                self.node = match (key, self.node) {
                    ("]", None) => Some(0),
                    ("]", Some(k)) if k + 1 < n => Some(k + 1),
                    ("]", Some(_)) => None,
                    (_, None) => Some(n - 1),
                    (_, Some(0)) => None,
                    (_, Some(k)) => Some(k - 1),
                };
                self.back = 0;
                LogKey::Fetch
            }
            "f" => {
                self.follow = !self.follow;
                if self.follow {
                    self.back = 0;
                    LogKey::Fetch
                } else {
                    LogKey::Redraw
                }
            }
            _ if down => {
                self.back = self.back.saturating_sub(3);
                LogKey::Redraw
            }
            _ if up => {
                self.back = self.back.saturating_add(3);
                LogKey::Redraw
            }
            _ => LogKey::Nothing,
        }
    }

    pub fn render(&self, f: &mut Frame, area: Rect, muted: Style, error: Style) {
        let all = self.node.is_none() && self.view.nodes.len() > 1;
        let mut lines: Vec<Line> = Vec::new();
        for n in &self.view.nodes {
            if let Some(why) = &n.error {
                lines.push(Line::from(Span::styled(
                    format!("node {} ({}): {}", n.rank, super::app::escape(&n.node), why),
                    error,
                )));
            }
            for l in &n.lines {
                let mark = if all {
                    format!("[node {}] ", n.rank)
                } else {
                    String::new()
                };
                let text = format!("{mark}{}", super::app::escape(&l.text));
                lines.push(match l.stream {
                    crate::backend::logs::Stream::Err => Line::from(Span::styled(text, error)),
                    crate::backend::logs::Stream::Out => Line::from(text),
                });
            }
        }
        if lines.is_empty() {
            lines.push(Line::from(Span::styled("no output yet", muted)));
        }
        if let Some(why) = &self.error {
            lines.push(Line::from(Span::styled(
                format!("(fetch failed: {why})"),
                error,
            )));
        }
        let inner = area.height.saturating_sub(2);
        let max = (lines.len() as u16).saturating_sub(inner);
        let top = max.saturating_sub(self.back);
        let which = match self.node {
            None if self.nodes.len() > 1 => format!("all {} nodes", self.nodes.len()),
            None => self.nodes.first().cloned().unwrap_or_default(),
            Some(k) => format!(
                "node {k} of {} ({})",
                self.nodes.len(),
                self.nodes.get(k).map_or("", String::as_str)
            ),
        };
        let title = format!(
            " logs of job {} · {} · {}{} ",
            self.job,
            super::app::escape(&which),
            if self.follow { "following" } else { "paused" },
            if self.nodes.len() > 1 {
                " · [ ] node"
            } else {
                ""
            },
        );
        f.render_widget(
            Paragraph::new(lines).scroll((top, 0)).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(Span::styled(
                        title,
                        Style::default().add_modifier(Modifier::BOLD),
                    ))
                    .title_bottom(" f follow · j/k scroll · esc back "),
            ),
            area,
        );
    }
}
