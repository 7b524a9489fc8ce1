//! The five views: overview, jobs, teams, events, fleet.

use super::*;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Cell, Gauge, Paragraph, Row, Table, TableState};
use ratatui::Frame;

impl App {
    pub(super) fn render_overview(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
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
                .gauge_style(self.style(self.theme.bar))
                .ratio(ratio.clamp(0.0, 1.0))
                .label(format!(
                    "{}/{} GPUs busy · fleet ${:.0}/h · idle GPUs cost ${:.0}/h",
                    snap.gpus_busy,
                    snap.gpus_total,
                    snap.dollars_per_hour,
                    snap.idle_dollars_per_hour
                )),
            gauges,
        );
        let [queue, events] =
            Layout::horizontal([Constraint::Length(30), Constraint::Min(20)]).areas(mid);
        let running = snap.jobs.iter().filter(|j| j.state == "running").count();
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
                "budgets   {} {:.1}% used",
                money(budget),
                100.0 * spent / budget
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
                self.style(self.theme.warn),
            ));
        }
        // Why the idle GPUs are idle: what an operator can act on (a quota that blocks waiting
        // work, a pool minimum) is told apart from what nobody can (no work wants them).
        if !snap.idle_by_cause.is_empty() {
            lines.push(Line::from(""));
            lines.push(Line::styled(
                "idle GPUs, why     GPUs  $/h",
                self.style(self.theme.muted),
            ));
            for c in &snap.idle_by_cause {
                lines.push(Line::from(format!(
                    "{:<17}{:>5} {:>4.0}",
                    c.cause.short(),
                    c.gpus,
                    c.dollars_per_hour
                )));
            }
        }
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" queue ")),
            queue,
        );
        self.render_event_list(f, events, snap, " recent events ");
    }

    pub(super) fn render_jobs(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let wide = area.width >= 120;
        let header = if wide {
            vec![
                "id",
                "name",
                "team",
                "class",
                "state",
                "GPUs",
                "age",
                "pos",
                "cost",
                "where / why pending",
            ]
        } else {
            vec![
                "id",
                "name",
                "class",
                "state",
                "GPUs",
                "age",
                "where / why pending",
            ]
        };
        // Build only the rows that fit, around the selection: a 100,000-job queue costs the same
        // to draw as a 40-job one.
        let list = self.rows(snap);
        let selected = self.selected.and_then(|id| list.position(id)).unwrap_or(0);
        let visible = area.height.saturating_sub(3).max(1) as usize;
        let first = selected.saturating_sub(visible - 1);
        // Below the border and the header row.
        self.jobs_geometry.set((area.y + 2, first));
        let rows: Vec<Row> = (first..list.len().min(first + visible))
            .filter_map(|i| list.get(i))
            .map(|j| {
                let state_color = match j.state.as_str() {
                    "running" => self.theme.ok,
                    "pending" => self.theme.warn,
                    "failed" => self.theme.error,
                    _ => self.theme.muted,
                };
                let pos = j.position.map_or(String::new(), |p| p.to_string());
                let id = if self.marked.contains(&j.id) {
                    format!("*{}", j.id)
                } else {
                    j.id.to_string()
                };
                let mut cells = vec![Cell::from(id), Cell::from(escape(&j.name))];
                if wide {
                    cells.push(Cell::from(escape(&j.team)));
                }
                cells.extend([
                    Cell::from(j.class.clone()),
                    Cell::from(j.state.clone()).style(self.style(state_color)),
                    Cell::from(j.gpus.clone()),
                    Cell::from(hm(snap.now - j.since_s)),
                ]);
                if wide {
                    cells.push(Cell::from(pos));
                    cells.push(Cell::from(money(j.cost_at(snap.now))));
                }
                cells.push(Cell::from(escape(&j.detail)));
                Row::new(cells)
            })
            .collect();
        let widths: Vec<Constraint> = if wide {
            vec![
                Constraint::Length(5),
                Constraint::Length(20),
                Constraint::Length(12),
                Constraint::Length(11),
                Constraint::Length(10),
                Constraint::Length(8),
                Constraint::Length(6),
                Constraint::Length(4),
                Constraint::Length(8),
                Constraint::Min(20),
            ]
        } else {
            vec![
                Constraint::Length(4),
                Constraint::Length(17),
                Constraint::Length(10),
                Constraint::Length(8),
                Constraint::Length(7),
                Constraint::Length(5),
                Constraint::Min(10),
            ]
        };
        let mut state = TableState::default().with_selected(Some(selected - first));
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
            .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED))
            .block(Block::default().borders(Borders::ALL).title(format!(
                "{}{}",
                match &self.job_filter {
                    None => format!(" jobs ({}) ", snap.jobs.len()),
                    Some(f) => format!(
                        " jobs ({} of {}) /{} ",
                        list.len(),
                        snap.jobs.len(),
                        escape(&f.text)
                    ),
                },
                if self.sort == SortBy::Queue {
                    String::new()
                } else {
                    format!("by {} ", self.sort.name())
                }
            )));
        f.render_stateful_widget(table, area, &mut state);
    }

    pub(super) fn render_teams(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let wide = area.width >= 120;
        let used_total: f64 = snap.teams.iter().map(|t| t.used_gpus).sum();
        let weight_total: f64 = snap.teams.iter().map(|t| t.weight).sum();
        let rows: Vec<Row> = snap
            .teams
            .iter()
            .map(|t| {
                let quota = t.guaranteed.map_or("none".to_string(), |g| {
                    if wide {
                        format!("{g} (+{} borrow)", t.borrow_limit)
                    } else {
                        format!("{g} +{}", t.borrow_limit)
                    }
                });
                // Fair share: its part of the GPUs in use against its part of the weights.
                let share = format!(
                    "{:.0}%/{:.0}%",
                    100.0 * t.used_gpus / used_total.max(1e-9),
                    100.0 * t.weight / weight_total.max(1e-9)
                );
                let budget = match (t.budget_used, t.budget_monthly_usd) {
                    (Some(u), Some(b)) => {
                        format!(
                            "{} of {} {:.0}%",
                            money(t.spend_month_usd),
                            money(b),
                            u * 100.0
                        )
                    }
                    (Some(u), None) => format!("{:.0} GPU-h {:.0}%", t.gpu_hours_month, u * 100.0),
                    _ => format!("{} (no budget)", money(t.spend_month_usd)),
                };
                let budget_color = match t.budget_used {
                    Some(u) if u >= 1.0 => self.theme.error,
                    Some(u) if u >= 0.8 => self.theme.warn,
                    _ => Color::Reset,
                };
                let over = t.guaranteed.is_some_and(|g| t.used_gpus > f64::from(g));
                let mut cells = vec![Cell::from(escape(&t.name))];
                if wide {
                    cells.push(Cell::from(escape(&t.cohort)));
                    cells.push(Cell::from(format!("{:.1}", t.weight)));
                }
                cells.extend([
                    Cell::from(quota),
                    Cell::from(format!("{:.1}", t.used_gpus)).style(self.style(if over {
                        self.theme.warn
                    } else {
                        Color::Reset
                    })),
                    Cell::from(format!("{:.1}", t.borrowed_gpus)),
                ]);
                if wide {
                    cells.push(Cell::from(format!("{:.1}", t.lent_gpus)));
                    cells.push(Cell::from(share));
                }
                cells.extend([
                    Cell::from(t.running.to_string()),
                    Cell::from(t.pending.to_string()),
                    Cell::from(format!("${:.0}/h", t.burn_per_hour)),
                    Cell::from(budget).style(self.style(budget_color)),
                ]);
                Row::new(cells)
            })
            .collect();
        let mut widths = vec![Constraint::Min(12)];
        if wide {
            widths.extend([Constraint::Length(9), Constraint::Length(6)]);
        }
        widths.extend([
            Constraint::Length(if wide { 15 } else { 8 }),
            Constraint::Length(6),
            Constraint::Length(8),
        ]);
        if wide {
            widths.extend([Constraint::Length(6), Constraint::Length(10)]);
        }
        widths.extend([
            Constraint::Length(4),
            Constraint::Length(5),
            Constraint::Length(8),
            Constraint::Min(18),
        ]);
        let header: Vec<&str> = if wide {
            vec![
                "team",
                "cohort",
                "weight",
                "guaranteed",
                "GPUs",
                "borrowed",
                "lent",
                "use/weight",
                "run",
                "pend",
                "burn",
                "spent this month / budget",
            ]
        } else {
            vec![
                "team", "quota", "GPUs", "borrowed", "run", "pend", "burn", "budget",
            ]
        };
        let table = Table::new(rows, widths)
            .header(Row::new(header).style(Style::default().add_modifier(Modifier::BOLD)))
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" teams: quota, usage, spend rate and monthly budget "),
            );
        f.render_widget(table, area);
    }

    /// Events, newest first, as many as fit: the Events view and the Overview's box.
    pub(super) fn render_event_list(
        &self,
        f: &mut Frame,
        area: Rect,
        snap: &Snapshot,
        title: &str,
    ) {
        // The Events view's filter; the Overview's box shows everything.
        let filter = (self.view == View::Events)
            .then_some(self.event_filter.as_ref())
            .flatten();
        let lines: Vec<Line> = snap
            .events
            .iter()
            .filter(|e| filter.is_none_or(|f| f.matches_text(e)))
            .take(area.height.saturating_sub(2) as usize)
            .map(|e| Line::from(escape(e)))
            .collect();
        let title = match filter {
            Some(f) => format!("{}/{} ", title, escape(&f.text)),
            None => title.to_string(),
        };
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(title)),
            area,
        );
    }

    pub(super) fn render_fleet(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let wide = area.width >= 120;
        let shown = self.visible_pools(snap);
        let selected = shown.iter().position(|&i| i == self.pool_selected);
        let rows: Vec<Row> = shown
            .iter()
            .map(|&i| &snap.pools[i])
            .map(|p| {
                let width = 16usize;
                let filled = (p.gpus_busy * width).checked_div(p.gpus).unwrap_or(0);
                let bar = format!("{}{}", "█".repeat(filled), "░".repeat(width - filled));
                Row::new(vec![
                    Cell::from(if wide {
                        p.path.clone()
                    } else {
                        p.short.clone()
                    }),
                    Cell::from(p.model.clone()),
                    Cell::from(p.capacity.clone()),
                    Cell::from(match (p.provisioning, p.down) {
                        (0, 0) => p.nodes.to_string(),
                        (0, d) => format!("{} -{d}", p.nodes),
                        (k, _) => format!("{} +{k}", p.nodes),
                    }),
                    Cell::from(format!("{}/{}", p.gpus_busy, p.gpus)),
                    Cell::from(bar).style(self.style(self.theme.bar)),
                    Cell::from(format!("${:.2}", p.dollars_per_hour)),
                ])
            })
            .collect();
        let widths = [
            Constraint::Min(24),
            Constraint::Length(10),
            Constraint::Length(9),
            Constraint::Length(6),
            Constraint::Length(7),
            Constraint::Length(16),
            Constraint::Length(8),
        ];
        let mut block = Block::default().borders(Borders::ALL).title(format!(
            " fleet: {}{} ",
            if wide {
                "provider/region/zone/pool"
            } else {
                "provider/pool"
            },
            self.pool_filter
                .as_ref()
                .map_or(String::new(), |f| format!(" /{}", escape(&f.text)))
        ));
        if let Some(h) = &snap.host {
            block = block.title_bottom(Line::from(format!(" {} ", escape(&h.summary()))));
        }
        let table = Table::new(rows, widths)
            .header(
                Row::new(vec![
                    "pool", "GPU", "capacity", "nodes", "busy", "", "$/node-h",
                ])
                .style(Style::default().add_modifier(Modifier::BOLD)),
            )
            .block(block)
            .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
        let mut state = TableState::default().with_selected(selected);
        f.render_stateful_widget(table, area, &mut state);
    }
}
