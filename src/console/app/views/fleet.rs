//! The Fleet view: each pool by provider, region and zone, its GPUs busy, load, price and
//! what its cloud is doing.

use super::super::*;
use super::Tab;
use crate::console::keymap::Action;
use crate::console::table::Col;
use crate::console::table::{text, Grid, Value};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// What the Fleet view keeps between frames.
#[derive(Debug, Default)]
pub struct FleetState {
    /// The selected pool (its index in the snapshot's pools).
    pub selected: usize,
    /// The `/` filter in force.
    pub filter: Option<Filter>,
}

/// The Fleet view.
pub struct Fleet;

impl Tab for Fleet {
    fn name(&self) -> &'static str {
        "fleet"
    }

    fn short(&self) -> &'static str {
        "Fleet"
    }

    fn takes_filter(&self) -> bool {
        true
    }

    fn filter<'a>(&self, app: &'a mut App) -> &'a mut Option<Filter> {
        &mut app.fleet.filter
    }

    fn columns(&self) -> &'static [Col] {
        &order::POOL_COLS
    }

    /// Enter opens the selected pool node by node; the moves, g and G select a pool as the
    /// view orders them.
    fn key(&self, app: &mut App, action: Action, snap: &Snapshot) -> Option<Outcome> {
        match action {
            Action::Open => {
                return Some(if app.visible_pools(snap).contains(&app.fleet.selected) {
                    Outcome::Pool(app.fleet.selected)
                } else {
                    Outcome::Nothing
                })
            }
            Action::Down
            | Action::Up
            | Action::PageDown
            | Action::PageUp
            | Action::HalfDown
            | Action::HalfUp => {
                let n = app.motion(Some(action), 1).unwrap_or(0) as i64;
                app.move_pool(snap, n);
            }
            Action::First => {
                if let Some(&i) = app.visible_pools(snap).first() {
                    app.fleet.selected = i;
                }
            }
            Action::Last => {
                if let Some(&i) = app.visible_pools(snap).last() {
                    app.fleet.selected = i;
                }
            }
            _ => return None,
        }
        Some(Outcome::Redraw)
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let wide = area.width >= 120;
        let shown = app.visible_pools(snap);
        let selected = shown.iter().position(|&i| i == app.fleet.selected);
        app.page.set(usize::from(area.height.saturating_sub(3)));
        let plain = Style::default();
        let mut grid = Grid::new(&order::POOL_COLS, app.sorts[View::Fleet]);
        grid.rows = shown
            .iter()
            .map(|&i| &snap.pools[i])
            .map(|p| {
                let load = (p.gpus_busy as f64 / p.gpus.max(1) as f64).clamp(0.0, 1.0);
                vec![
                    text(
                        if wide {
                            p.path.clone()
                        } else {
                            p.short.clone()
                        },
                        plain,
                    ),
                    text(p.model.clone(), plain),
                    text(p.capacity.clone(), plain),
                    text(
                        match (p.provisioning, p.down) {
                            (0, 0) => p.nodes.to_string(),
                            (0, d) => format!("{} -{d}", p.nodes),
                            (k, _) => format!("{} +{k}", p.nodes),
                        },
                        plain,
                    ),
                    text(format!("{}/{}", p.gpus_busy, p.gpus), plain),
                    (Value::Bar(load), app.style(app.theme.bar)),
                    text(money(p.dollars_per_hour), plain),
                    text(escape(&p.notes.join(" · ")), app.style(app.theme.accent)),
                ]
            })
            .collect();
        let mut block = Block::default().borders(Borders::ALL).title(format!(
            " fleet: {}{} ",
            if wide {
                "provider/region/zone/pool"
            } else {
                "provider/pool"
            },
            app.fleet
                .filter
                .as_ref()
                .map_or(String::new(), |f| format!(" /{}", escape(&f.text)))
        ));
        if let Some(h) = &snap.host {
            block = block.title_bottom(Line::from(format!(" {} ", escape(&h.summary()))));
        }
        app.shown_cols[View::Fleet].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            selected,
            Style::default().add_modifier(Modifier::REVERSED),
        ));
    }
}
