//! The Jobs view: every job, the queue order first, with where each runs or why it waits.

use super::super::*;
use super::Tab;
use crate::console::keymap::Action;
use crate::console::table::Col;
use crate::console::table::{text, Grid};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// What the Jobs view keeps between frames.
#[derive(Debug, Default)]
pub struct JobsState {
    /// The selected job, kept by id across refreshes.
    pub selected: Option<i64>,
    /// Jobs marked with space for a bulk action.
    pub marked: std::collections::BTreeSet<i64>,
    /// The `/` filter in force (`:jobs team=ml` sets it too).
    pub filter: Option<Filter>,
    /// Where the table's first row was drawn and which row it was (for mouse clicks).
    pub(in crate::console::app) geometry: std::cell::Cell<(u16, usize)>,
}

/// The Jobs view.
pub struct Jobs;

impl Tab for Jobs {
    fn name(&self) -> &'static str {
        "jobs"
    }

    fn short(&self) -> &'static str {
        "Jobs"
    }

    fn takes_filter(&self) -> bool {
        true
    }

    fn columns(&self) -> &'static [Col] {
        &order::JOB_COLS
    }

    /// Reversing the queue order: by position, last first.
    fn turned(&self) -> Option<crate::console::table::Sort> {
        let pos = order::JOB_COLS.iter().position(|c| c.title == "pos")?;
        Some(crate::console::table::Sort {
            col: pos,
            desc: true,
        })
    }

    /// The job actions (greyed for a viewer) beside the moves.
    fn key_bar(&self, app: &App, bar: super::KeyBar) -> ratatui::text::Line<'static> {
        use crate::console::keymap::Action;
        ratatui::text::Line::from(vec![
            ratatui::text::Span::raw(format!(
                "{}{}/{} move  ",
                bar.help,
                app.key_for(Action::Down),
                app.key_for(Action::Up)
            )),
            bar.acts,
            ratatui::text::Span::raw(bar.common),
        ])
    }

    /// Space marks a job, enter opens it, `S` a shell in it; the job actions act on the
    /// marked jobs (confirmed by typing their count) or the selected one.
    fn key(&self, app: &mut App, action: Action, snap: &Snapshot) -> Option<Outcome> {
        Some(match action {
            Action::Mark => {
                if let Some(id) = app.selected_job(snap).map(|j| j.id) {
                    if !app.jobs.marked.remove(&id) {
                        app.jobs.marked.insert(id);
                    }
                }
                app.move_selection(snap, 1);
                Outcome::Redraw
            }
            Action::Open => app
                .selected_job(snap)
                .map_or(Outcome::Nothing, |j| Outcome::Detail(j.id)),
            Action::Shell => {
                let Some(j) = app.selected_job(snap) else {
                    return Some(Outcome::Nothing);
                };
                if let Some(why) = app.access.forbids_job(&j.team) {
                    app.flash = Some(format!("shell: job {}: {why}", j.id));
                } else if j.state != "running" {
                    app.flash = Some(format!(
                        "shell: job {} is {}: a shell opens in a running job",
                        j.id, j.state
                    ));
                } else {
                    return Some(Outcome::Shell(j.id));
                }
                Outcome::Redraw
            }
            Action::Job(what) if !app.jobs.marked.is_empty() => {
                // Only marked jobs still listed count; one the caller may not change stops it.
                let marked: Vec<&JobRow> = snap
                    .jobs
                    .iter()
                    .filter(|j| app.jobs.marked.contains(&j.id))
                    .map(|j| &**j)
                    .collect();
                if let Some((j, why)) = marked
                    .iter()
                    .find_map(|j| app.access.forbids_job(&j.team).map(|w| (j, w)))
                {
                    app.flash = Some(format!("{}: job {}: {why}", what.name(), j.id));
                    return Some(Outcome::Redraw);
                }
                let ids: Vec<i64> = marked.iter().map(|j| j.id).collect();
                app.confirm = Some(Confirm {
                    ask: Ask::Bulk {
                        action: what,
                        ids: ids.clone(),
                        typed: String::new(),
                    },
                    on_confirm: false,
                });
                // What it would do to them together, asked of the daemon as the dialog opens
                // (kept under the first id: the dialog shows it only for these ids).
                app.what_if = None;
                Outcome::WhatIfMany { action: what, ids }
            }
            Action::Job(what) => {
                match app.selected_job(snap) {
                    Some(j) => match app.access.forbids_job(&j.team) {
                        Some(why) => app.flash = Some(format!("{}: {why}", what.name())),
                        None => {
                            let request = crate::api::JobRequest {
                                id: j.id,
                                action: what,
                            };
                            app.confirm = Some(Confirm {
                                ask: Ask::Job {
                                    request,
                                    name: j.name.clone(),
                                },
                                on_confirm: false,
                            });
                            // What it would do, asked of the daemon as the dialog opens.
                            app.what_if = None;
                            return Some(Outcome::WhatIf(request));
                        }
                    },
                    None => return None,
                }
                Outcome::Redraw
            }
            _ => return None,
        })
    }

    /// The wheel moves the selection; a click on a row selects it.
    fn mouse(
        &self,
        app: &mut App,
        event: crossterm::event::MouseEvent,
        snap: &Snapshot,
    ) -> Outcome {
        use crossterm::event::{MouseButton, MouseEventKind};
        match event.kind {
            MouseEventKind::ScrollDown => app.move_selection(snap, 1),
            MouseEventKind::ScrollUp => app.move_selection(snap, -1),
            MouseEventKind::Down(MouseButton::Left) => {
                let (top, first) = app.jobs.geometry.get();
                let Some(offset) = event.row.checked_sub(top) else {
                    return Outcome::Nothing;
                };
                let rows = app.rows(snap);
                match rows.get(first + usize::from(offset)) {
                    Some(j) => app.jobs.selected = Some(j.id),
                    None => return Outcome::Nothing,
                }
            }
            _ => return Outcome::Nothing,
        }
        Outcome::Redraw
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        // Build only the rows that fit, around the selection: a 100,000-job queue costs the same
        // to draw as a 40-job one.
        let list = app.rows(snap);
        let selected = app
            .jobs
            .selected
            .and_then(|id| list.position(id))
            .unwrap_or(0);
        let visible = area.height.saturating_sub(3).max(1) as usize;
        app.page.set(visible);
        let first = selected.saturating_sub(visible - 1);
        // Below the border and the header row.
        app.jobs.geometry.set((area.y + 2, first));
        let plain = Style::default();
        let mut grid = Grid::new(&order::JOB_COLS, app.sorts[View::Jobs]);
        // The experiment column where the fleet reports to MLflow or a job names one.
        if snap.mlflow.is_none() && snap.jobs.iter().all(|j| j.experiment.is_none()) {
            grid.hidden |= 1 << order::EXPERIMENT_COL;
        }
        // The ETA column where a job waits with an estimate.
        if snap.jobs.iter().all(|j| j.eta.is_none()) {
            grid.hidden |= 1 << order::ETA_COL;
        }
        grid.rows = (first..list.len().min(first + visible))
            .filter_map(|i| list.get(i))
            .map(|j| {
                let state_color = match j.state.as_str() {
                    "running" => app.theme.ok,
                    "pending" => app.theme.warn,
                    "failed" => app.theme.error,
                    _ => app.theme.muted,
                };
                let id = if app.jobs.marked.contains(&j.id) {
                    format!("*{}", j.id)
                } else {
                    j.id.to_string()
                };
                let rate = if j.dollars_per_hour > 0.0 {
                    money(j.dollars_per_hour)
                } else {
                    String::new()
                };
                vec![
                    text(id, plain),
                    text(escape(&j.name), plain),
                    text(escape(&j.team), plain),
                    text(j.class.clone(), plain),
                    text(j.state.clone(), app.style(state_color)),
                    text(j.gpus.clone(), plain),
                    text(hm(j.age(snap.now)), plain),
                    text(j.position.map_or(String::new(), |p| p.to_string()), plain),
                    text(
                        j.eta.as_ref().map_or(String::new(), |e| e.short(snap.now)),
                        plain,
                    ),
                    text(rate, plain),
                    text(money(j.cost_at(snap.now)), plain),
                    text(
                        if j.restarts > 0 {
                            j.restarts.to_string()
                        } else {
                            String::new()
                        },
                        plain,
                    ),
                    text(escape(j.experiment.as_deref().unwrap_or("")), plain),
                    text(escape(&j.detail), plain),
                ]
            })
            .collect();
        let block = Block::default().borders(Borders::ALL).title(format!(
            "{}{}",
            match &app.jobs.filter {
                None => format!(" jobs ({}) ", snap.jobs.len()),
                Some(f) => format!(
                    " jobs ({} of {}) /{} ",
                    list.len(),
                    snap.jobs.len(),
                    escape(&f.text)
                ),
            },
            if app.sorts[View::Jobs].is_none() {
                "queue order, waiting first "
            } else {
                ""
            }
        ));
        app.shown_cols[View::Jobs].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            Some(selected - first),
            Style::default().add_modifier(Modifier::REVERSED),
        ));
    }
}
