//! The Overview: GPUs allocated, the queue by class, spend against budgets, why idle GPUs are
//! idle, and the newest events.

use super::super::*;
use super::Tab;
use ratatui::layout::Rect;
use ratatui::layout::{Constraint, Layout};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
use ratatui::Frame;

/// The Overview.
pub struct Overview;

impl Tab for Overview {
    fn name(&self) -> &'static str {
        "overview"
    }

    fn short(&self) -> &'static str {
        "Overview"
    }

    /// No rows of its own to order.
    fn turned(&self) -> Option<crate::console::table::Sort> {
        None
    }

    fn draw(&self, app: &App, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let [gauges, mid] =
            Layout::vertical([Constraint::Length(4), Constraint::Min(3)]).areas(area);
        let ratio = if snap.gpus_total == 0 {
            0.0
        } else {
            snap.gpus_busy as f64 / snap.gpus_total as f64
        };
        f.render_widget(
            Gauge::default()
                .block(
                    Block::default()
                        .borders(Borders::ALL)
                        .title(" GPUs allocated "),
                )
                .gauge_style(app.style(app.theme.bar))
                .ratio(ratio.clamp(0.0, 1.0))
                .label(format!(
                    "{}/{} GPUs busy · fleet {}/h · idle GPUs cost {}/h",
                    snap.gpus_busy,
                    snap.gpus_total,
                    money(snap.dollars_per_hour),
                    money(snap.idle_dollars_per_hour)
                )),
            gauges,
        );
        let [queue, events] =
            Layout::horizontal([Constraint::Length(30), Constraint::Min(20)]).areas(mid);
        let running = app.running_jobs(snap);
        let mut lines = vec![Line::from(format!("running   {running}"))];
        for (class, n) in &snap.queue_by_class {
            lines.push(Line::from(format!("{class:<11} {n} pending")));
        }
        // This budget month's spend against the budgets the teams have.
        let spent: f64 = snap.teams.iter().map(|t| t.spend_month_usd).sum();
        let budget: f64 = snap.teams.iter().filter_map(|t| t.budget_monthly_usd).sum();
        lines.push(Line::from(""));
        lines.push(Line::from(format!("spent     {} this month", money(spent))));
        if budget > 0.0 {
            // Fits the 28 columns of the pane at any budget.
            lines.push(Line::from(format!(
                "budgets   {} {} used",
                money(budget),
                pct(spent / budget)
            )));
        }
        if let Some(t) = snap
            .teams
            .iter()
            .filter(|t| t.budget_used.is_some_and(|u| u >= 0.8))
            .max_by(|a, b| {
                a.budget_used
                    .unwrap_or(0.0)
                    .total_cmp(&b.budget_used.unwrap_or(0.0))
            })
        {
            lines.push(Line::styled(
                format!(
                    "{} at {:.0}%",
                    escape(&t.name),
                    100.0 * t.budget_used.unwrap_or(0.0)
                ),
                app.style(app.theme.warn),
            ));
        }
        // Why the idle GPUs are idle: what an operator can act on (a quota that blocks waiting
        // work, a pool minimum) is told apart from what nobody can (no work wants them).
        if !snap.idle_by_cause.is_empty() {
            lines.push(Line::from(""));
            lines.push(Line::styled(
                "idle GPUs, why   GPUs    $/h",
                app.style(app.theme.muted),
            ));
            for c in &snap.idle_by_cause {
                lines.push(Line::from(format!(
                    "{:<17}{:>4}{:>7}",
                    c.cause.short(),
                    c.gpus,
                    money(c.dollars_per_hour)
                )));
            }
        }
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" queue ")),
            queue,
        );
        super::events::list(app, f, events, snap, " recent events ");
    }
}
