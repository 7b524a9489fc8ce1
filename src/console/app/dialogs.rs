//! Dialogs over the body: confirmations (what an action will do, Cancel the default) and the
//! keys help.

use super::*;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

/// The widest a dialog is drawn.
const DIALOG_WIDTH: u16 = 72;

impl App {
    /// The daemon's preview of the change a dialog asks about (its cycle run forward with and
    /// without it), if it has answered for job `id` (the first of several), cut to the dialog.
    fn preview_lines(&self, area: Rect, id: i64) -> Vec<Line<'static>> {
        let inner = usize::from(area.width.min(DIALOG_WIDTH).saturating_sub(2));
        let cut = |row: String| Line::from(crate::console::table::cut(&row, inner).into_owned());
        let mut lines = Vec::new();
        match &self.what_if {
            Some((of, Ok(w))) if *of == id => {
                lines.push(Line::from("If the queue stays as it is:"));
                let room = (area.height.saturating_sub(10) as usize).max(1);
                let all = w.lines();
                for l in all.iter().take(room) {
                    lines.push(cut(format!("  {}", escape(l))));
                }
                if all.len() > room {
                    lines.push(Line::from(format!("  … and {} more", all.len() - room)));
                }
            }
            Some((of, Err(why))) if *of == id => {
                lines.push(cut(format!("(no preview: {})", escape(why))));
            }
            _ => {}
        }
        lines
    }

    /// The confirmation dialog, centred over the body; Cancel is the default.
    pub(super) fn render_confirm(&self, f: &mut Frame, area: Rect, c: &Confirm) {
        use crate::api::JobAction as J;
        let (verb, lines): (String, Vec<Line>) = match &c.ask {
            Ask::Job { request, name } => {
                let what = match request.action {
                    J::Preempt => {
                        "It is signalled, given its grace period, and requeued from its checkpoint."
                    }
                    J::Cancel => "It stops for good and does not requeue.",
                    J::Hold => "It keeps its place in the queue but will not start until released.",
                    J::Release => "It may start again at the next scheduling cycle.",
                };
                let verb = request.action.name().to_string();
                let title = capitalized(&verb);
                let mut lines = vec![
                    Line::from(format!("{title} job {} {}?", request.id, escape(name))),
                    Line::from(what),
                ];
                lines.extend(self.preview_lines(area, request.id));
                (verb, lines)
            }
            Ask::Prio { id, name, from, to } => {
                let mut lines = vec![
                    Line::from(format!(
                        "Move job {id} {} from {from} to {to}?",
                        escape(name)
                    )),
                    Line::from("It is reordered at the next cycle; a higher class may preempt."),
                ];
                lines.extend(self.preview_lines(area, *id));
                ("reprioritize".to_string(), lines)
            }
            Ask::Bulk { action, ids, typed } => {
                let verb = action.name().to_string();
                let shown: Vec<String> = ids.iter().take(12).map(|i| i.to_string()).collect();
                let more = if ids.len() > 12 { " …" } else { "" };
                let mut lines = vec![Line::from(format!(
                    "{} {} marked job(s): {}{more}",
                    capitalized(&verb),
                    ids.len(),
                    shown.join(", ")
                ))];
                if let Some(&first) = ids.first() {
                    lines.extend(self.preview_lines(area, first));
                }
                lines.push(Line::from(format!(
                    "Type {} and press enter to confirm; esc cancels.",
                    ids.len()
                )));
                lines.push(Line::from(vec![
                    Span::raw("> "),
                    Span::raw(typed.clone()),
                    Span::styled("█", self.style(self.theme.accent)),
                ]));
                return self.dialog(f, area, &format!(" confirm {verb} ×{} ", ids.len()), lines);
            }
            Ask::Reclaim(plan) => {
                let mut l = vec![Line::from(format!(
                    "Reclaim {} GPU(s) from {} idle job(s), saving ${:.2}/h? (plan {})",
                    crate::api::gpus_text(plan.gpus_freed),
                    plan.items.len(),
                    plan.dollars_per_hour_saved,
                    plan.id
                ))];
                // A row per job, cut (not wrapped) to the dialog's width; as many as leave
                // room for the question above and the buttons below.
                let room = area.height.saturating_sub(9) as usize;
                let inner = usize::from(area.width.min(DIALOG_WIDTH).saturating_sub(2));
                for it in plan.items.iter().take(room.max(1)) {
                    let row = format!(
                        "  job {:<6} {} GPU(s) idle {:<7} ${:>6.2}/h  {}",
                        it.job,
                        crate::api::gpus_text(it.gpus),
                        hm(it.idle_for_s),
                        it.dollars_per_hour,
                        it.action.describe()
                    );
                    l.push(Line::from(
                        crate::console::table::cut(&row, inner).into_owned(),
                    ));
                }
                if plan.items.len() > room.max(1) {
                    l.push(Line::from(format!(
                        "  … and {} more",
                        plan.items.len() - room.max(1)
                    )));
                }
                ("reclaim".to_string(), l)
            }
        };
        let title = capitalized(&verb);
        let button = |label: &str, focused: bool| {
            let s = Span::raw(format!("[ {label} ]"));
            if focused {
                s.style(Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD))
            } else {
                s
            }
        };
        // "Back" dismisses: a job's cancel dialog would otherwise offer [ Cancel ] twice.
        let confirm = match &c.ask {
            Ask::Job { request, .. } => format!("{title} job {}", request.id),
            _ => title,
        };
        let buttons = Line::from(vec![
            button("Back", !c.on_confirm),
            Span::raw("   "),
            button(&confirm, c.on_confirm),
            Span::raw("   y confirms · esc goes back"),
        ]);
        self.dialog_with(f, area, &format!(" confirm {verb} "), lines, Some(buttons));
    }

    /// A bordered box centred over `area`, sized to its lines.
    pub(super) fn dialog(&self, f: &mut Frame, area: Rect, title: &str, lines: Vec<Line>) {
        self.dialog_with(f, area, title, lines, None);
    }

    /// A dialog whose `buttons` keep the box's last row whatever the text above needs: a
    /// long question on a small terminal is cut, never the way to answer it.
    fn dialog_with(
        &self,
        f: &mut Frame,
        area: Rect,
        title: &str,
        lines: Vec<Line>,
        buttons: Option<Line>,
    ) {
        let w = area.width.min(DIALOG_WIDTH);
        let inner = usize::from(w.saturating_sub(2)).max(1);
        // Rows the text takes once wrapped (a word carried over may take one more: the
        // buttons' row is kept regardless).
        let rows: usize = lines.iter().map(|l| l.width().div_ceil(inner).max(1)).sum();
        let extra = if buttons.is_some() { 2 } else { 0 };
        let h = (rows as u16 + 2 + extra).min(area.height);
        let rect = Rect {
            x: area.x + (area.width - w) / 2,
            y: area.y + area.height.saturating_sub(h) / 2,
            width: w,
            height: h,
        };
        f.render_widget(ratatui::widgets::Clear, rect);
        let block = Block::default()
            .borders(Borders::ALL)
            .border_style(self.style(self.theme.warn))
            .title(title.to_string());
        let body = block.inner(rect);
        f.render_widget(block, rect);
        let text = match buttons {
            Some(b) if body.height > 0 => {
                let last = Rect {
                    y: body.bottom() - 1,
                    height: 1,
                    ..body
                };
                f.render_widget(Paragraph::new(b), last);
                Rect {
                    height: body.height.saturating_sub(2),
                    ..body
                }
            }
            _ => body,
        };
        f.render_widget(
            Paragraph::new(lines).wrap(ratatui::widgets::Wrap { trim: true }),
            text,
        );
    }

    /// The help screen, generated from the active keymap.
    pub(super) fn render_help(&self, f: &mut Frame, area: Rect) {
        let mut lines: Vec<Line> = self
            .keymap
            .help(self.readonly)
            .into_iter()
            .map(|(k, d)| Line::from(format!("  {:<8} {d}", crate::console::keymap::key_label(k))))
            .collect();
        lines.push(Line::from(""));
        lines.push(Line::styled(
            "  Sort: shift and a column's letter (again: reversed) —",
            self.style(self.theme.muted),
        ));
        // Every view that is a table (the Services view's letters were once left out).
        for view in View::ALL
            .into_iter()
            .filter(|v| !v.tab().columns().is_empty())
        {
            let keys: Vec<String> = super::columns(view)
                .iter()
                .map(|c| format!("{} {}", c.key, c.title))
                .collect();
            lines.push(Line::styled(
                format!("    {:<8} {}", view.short(), keys.join(" · ")),
                self.style(self.theme.muted),
            ));
        }
        lines.push(Line::styled(
            "  Logs (l on a job's detail; they open following): f pause/follow · / search, n/N · w wrap · s save · [ ] node",
            self.style(self.theme.muted),
        ));
        let inner = area.height.saturating_sub(2);
        self.page.set(usize::from(inner));
        let max = (lines.len() as u16).saturating_sub(inner);
        let top = self.help_scroll.min(max);
        let title = if max > 0 {
            format!(
                " keys (from the keymap) · {}–{} of {} · j/k scroll · esc closes ",
                top + 1,
                (top + inner).min(lines.len() as u16),
                lines.len()
            )
        } else {
            " keys (from the keymap) · esc closes ".to_string()
        };
        f.render_widget(
            Paragraph::new(lines)
                .scroll((top, 0))
                .block(Block::default().borders(Borders::ALL).title(title)),
            area,
        );
    }
}
