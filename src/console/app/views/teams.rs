//! The Teams view: each team's quota, usage, fair share, spend rate and monthly budget.

use super::super::*;
use super::Tab;
use crate::console::table::Col;
use crate::console::table::{text, Grid};
use ratatui::layout::Rect;
use ratatui::style::{Color, Style};
use ratatui::widgets::{Block, Borders};
use ratatui::Frame;

/// The Teams view.
pub struct Teams;

impl Tab for Teams {
    fn name(&self) -> &'static str {
        "teams"
    }

    fn short(&self) -> &'static str {
        "Teams"
    }

    fn columns(&self) -> &'static [Col] {
        &order::TEAM_COLS
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let usage_total: f64 = snap.teams.iter().map(|t| t.usage_gpu_hours).sum();
        let weight_total: f64 = snap.teams.iter().map(|t| t.weight).sum();
        let plain = Style::default();
        let mut grid = Grid::new(&order::TEAM_COLS, app.sorts[View::Teams]);
        grid.rows = app
            .team_rows(snap)
            .into_iter()
            .map(|t| {
                let quota = t
                    .guaranteed
                    .map_or("none".to_string(), |g| format!("{g} +{}", t.borrow_limit));
                // Fair share: its part of the usage the queue goes by (GPU-hours, decayed)
                // against its part of the weights, and its place in that order.
                let share = format!(
                    "{:.0}%/{:.0}% #{}",
                    100.0 * t.usage_gpu_hours / usage_total.max(1e-9),
                    100.0 * t.weight / weight_total.max(1e-9),
                    t.fair_share_rank
                );
                let budget = match (t.budget_used, t.budget_monthly_usd) {
                    (Some(u), Some(b)) => {
                        format!("{} of {} {}", money(t.spend_month_usd), money(b), pct(u))
                    }
                    (Some(u), None) => format!("{:.0} GPU-h {}", t.gpu_hours_month, pct(u)),
                    _ => format!("{} (no budget)", money(t.spend_month_usd)),
                };
                let budget_color = match t.budget_used {
                    Some(u) if u >= 1.0 => app.theme.error,
                    Some(u) if u >= 0.8 => app.theme.warn,
                    _ => Color::Reset,
                };
                let over = t.guaranteed.is_some_and(|g| t.used_gpus > f64::from(g));
                vec![
                    text(escape(&t.name), plain),
                    text(escape(&t.cohort), plain),
                    text(format!("{:.1}", t.weight), plain),
                    text(quota, plain),
                    text(
                        format!("{:.1}", t.used_gpus),
                        app.style(if over { app.theme.warn } else { Color::Reset }),
                    ),
                    text(format!("{:.1}", t.borrowed_gpus), plain),
                    text(format!("{:.1}", t.lent_gpus), plain),
                    text(share, plain),
                    text(t.running.to_string(), plain),
                    text(t.pending.to_string(), plain),
                    text(format!("{}/h", money(t.burn_per_hour)), plain),
                    text(budget, app.style(budget_color)),
                ]
            })
            .collect();
        let block = Block::default()
            .borders(Borders::ALL)
            .title(" teams: quota (guaranteed +borrow), usage, spend rate and monthly budget ");
        app.shown_cols[View::Teams].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            None,
            Style::default(),
        ));
    }
}
