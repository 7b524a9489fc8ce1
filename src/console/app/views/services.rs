//! The Services view: replicas ready of wanted, traffic through each endpoint, latency, cost,
//! and what the autoscaler did last and why (`gantry services`, `gantry service NAME`).

use super::super::*;
use super::Tab;
use crate::console::table::Col;
use crate::console::table::{text, Grid};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// The Services view.
pub struct Services;

impl Tab for Services {
    fn name(&self) -> &'static str {
        "services"
    }

    fn short(&self) -> &'static str {
        "Services"
    }

    fn columns(&self) -> &'static [Col] {
        &order::SERVICE_COLS
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let plain = Style::default();
        let mut grid = Grid::new(&order::SERVICE_COLS, app.sorts[View::Services]);
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
        grid.rows = app
            .service_rows(snap)
            .into_iter()
            .map(|s| {
                let short = s.ready < s.wanted;
                let status = match &s.last_decision {
                    Some(d) => format!("{} · {d}", s.status),
                    None => s.status.clone(),
                };
                let status_color = if s.status.starts_with("endpoint failed") {
                    app.theme.error
                } else if short {
                    app.theme.warn
                } else {
                    Color::Reset
                };
                vec![
                    text(escape(&s.name), plain),
                    text(escape(&s.team), plain),
                    text(format!("v{}", s.version), plain),
                    text(escape(&s.endpoint), plain),
                    text(
                        s.replicas_text(),
                        app.style(if short { app.theme.warn } else { Color::Reset }),
                    ),
                    text(format!("{:.1}", s.qps), plain),
                    text(ms(s.latency_p50_ms), plain),
                    text(ms(s.latency_p99_ms), plain),
                    text(crate::api::gpus_text(s.gpus), plain),
                    text(format!("{}/h", money(s.dollars_per_hour)), plain),
                    text(escape(&status), app.style(status_color)),
                ]
            })
            .collect();
        let title = if snap.services.is_empty() {
            " services: none (gantry serve up FILE starts one) "
        } else {
            " services: replicas ready/wanted, traffic through the endpoint, last scaling "
        };
        let block = Block::default().borders(Borders::ALL).title(title);
        app.shown_cols[View::Services].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            None,
            Style::default(),
        ));
    }
}
