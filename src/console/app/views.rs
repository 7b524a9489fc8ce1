//! The five views: overview, jobs, teams, events, fleet.

use super::*;
use crate::console::table::{cut, text, Grid, Value};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Gauge, Paragraph};
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
        let running = self.running_jobs(snap);
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
                self.style(self.theme.warn),
            ));
        }
        // Why the idle GPUs are idle: what an operator can act on (a quota that blocks waiting
        // work, a pool minimum) is told apart from what nobody can (no work wants them).
        if !snap.idle_by_cause.is_empty() {
            lines.push(Line::from(""));
            lines.push(Line::styled(
                "idle GPUs, why   GPUs    $/h",
                self.style(self.theme.muted),
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
        self.render_event_list(f, events, snap, " recent events ");
    }

    pub(super) fn render_jobs(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        // Build only the rows that fit, around the selection: a 100,000-job queue costs the same
        // to draw as a 40-job one.
        let list = self.rows(snap);
        let selected = self.selected.and_then(|id| list.position(id)).unwrap_or(0);
        let visible = area.height.saturating_sub(3).max(1) as usize;
        self.page.set(visible);
        let first = selected.saturating_sub(visible - 1);
        // Below the border and the header row.
        self.jobs_geometry.set((area.y + 2, first));
        let plain = Style::default();
        let mut grid = Grid::new(&order::JOB_COLS, self.sorts[View::Jobs]);
        grid.rows = (first..list.len().min(first + visible))
            .filter_map(|i| list.get(i))
            .map(|j| {
                let state_color = match j.state.as_str() {
                    "running" => self.theme.ok,
                    "pending" => self.theme.warn,
                    "failed" => self.theme.error,
                    _ => self.theme.muted,
                };
                let id = if self.marked.contains(&j.id) {
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
                    text(j.state.clone(), self.style(state_color)),
                    text(j.gpus.clone(), plain),
                    text(hm(j.age(snap.now)), plain),
                    text(j.position.map_or(String::new(), |p| p.to_string()), plain),
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
                    text(escape(&j.detail), plain),
                ]
            })
            .collect();
        let block = Block::default().borders(Borders::ALL).title(format!(
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
            if self.sorts[View::Jobs].is_none() {
                "queue order, waiting first "
            } else {
                ""
            }
        ));
        self.shown_cols[View::Jobs].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            Some(selected - first),
            Style::default().add_modifier(Modifier::REVERSED),
        ));
    }

    pub(super) fn render_teams(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let used_total: f64 = snap.teams.iter().map(|t| t.used_gpus).sum();
        let weight_total: f64 = snap.teams.iter().map(|t| t.weight).sum();
        let plain = Style::default();
        let mut grid = Grid::new(&order::TEAM_COLS, self.sorts[View::Teams]);
        grid.rows = self
            .team_rows(snap)
            .into_iter()
            .map(|t| {
                let quota = t
                    .guaranteed
                    .map_or("none".to_string(), |g| format!("{g} +{}", t.borrow_limit));
                // Fair share: its part of the GPUs in use against its part of the weights.
                let share = format!(
                    "{:.0}%/{:.0}%",
                    100.0 * t.used_gpus / used_total.max(1e-9),
                    100.0 * t.weight / weight_total.max(1e-9)
                );
                let budget = match (t.budget_used, t.budget_monthly_usd) {
                    (Some(u), Some(b)) => {
                        format!("{} of {} {}", money(t.spend_month_usd), money(b), pct(u))
                    }
                    (Some(u), None) => format!("{:.0} GPU-h {}", t.gpu_hours_month, pct(u)),
                    _ => format!("{} (no budget)", money(t.spend_month_usd)),
                };
                let budget_color = match t.budget_used {
                    Some(u) if u >= 1.0 => self.theme.error,
                    Some(u) if u >= 0.8 => self.theme.warn,
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
                        self.style(if over { self.theme.warn } else { Color::Reset }),
                    ),
                    text(format!("{:.1}", t.borrowed_gpus), plain),
                    text(format!("{:.1}", t.lent_gpus), plain),
                    text(share, plain),
                    text(t.running.to_string(), plain),
                    text(t.pending.to_string(), plain),
                    text(format!("{}/h", money(t.burn_per_hour)), plain),
                    text(budget, self.style(budget_color)),
                ]
            })
            .collect();
        let block = Block::default()
            .borders(Borders::ALL)
            .title(" teams: quota (guaranteed +borrow), usage, spend rate and monthly budget ");
        self.shown_cols[View::Teams].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            None,
            Style::default(),
        ));
    }

    /// Services: replicas ready of wanted, traffic through each endpoint, latency, cost, and
    /// what the autoscaler did last and why (`gantry services`, `gantry service NAME`).
    pub(super) fn render_services(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let plain = Style::default();
        let mut grid = Grid::new(&order::SERVICE_COLS, self.sorts[View::Services]);
        let ms = |v: Option<f64>| v.map_or("-".to_string(), |x| format!("{x:.1}"));
        grid.rows = self
            .service_rows(snap)
            .into_iter()
            .map(|s| {
                let short = s.ready < s.wanted;
                let status = match &s.last_decision {
                    Some(d) => format!("{} · {d}", s.status),
                    None => s.status.clone(),
                };
                let status_color = if s.status.starts_with("endpoint failed") {
                    self.theme.error
                } else if short {
                    self.theme.warn
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
                        self.style(if short { self.theme.warn } else { Color::Reset }),
                    ),
                    text(format!("{:.1}", s.qps), plain),
                    text(ms(s.latency_p50_ms), plain),
                    text(ms(s.latency_p99_ms), plain),
                    text(crate::api::gpus_text(s.gpus), plain),
                    text(format!("{}/h", money(s.dollars_per_hour)), plain),
                    text(escape(&status), self.style(status_color)),
                ]
            })
            .collect();
        let title = if snap.services.is_empty() {
            " services: none (gantry serve up FILE starts one) "
        } else {
            " services: replicas ready/wanted, traffic through the endpoint, last scaling "
        };
        let block = Block::default().borders(Borders::ALL).title(title);
        self.shown_cols[View::Services].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            None,
            Style::default(),
        ));
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
        let oldest_first = self.view == View::Events && self.events_oldest_first();
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

    pub(super) fn render_fleet(&self, f: &mut Frame, area: Rect, snap: &Snapshot) {
        let wide = area.width >= 120;
        let shown = self.visible_pools(snap);
        let selected = shown.iter().position(|&i| i == self.pool_selected);
        self.page.set(usize::from(area.height.saturating_sub(3)));
        let plain = Style::default();
        let mut grid = Grid::new(&order::POOL_COLS, self.sorts[View::Fleet]);
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
                    (Value::Bar(load), self.style(self.theme.bar)),
                    text(money(p.dollars_per_hour), plain),
                    text(escape(&p.notes.join(" · ")), self.style(self.theme.accent)),
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
            self.pool_filter
                .as_ref()
                .map_or(String::new(), |f| format!(" /{}", escape(&f.text)))
        ));
        if let Some(h) = &snap.host {
            block = block.title_bottom(Line::from(format!(" {} ", escape(&h.summary()))));
        }
        self.shown_cols[View::Fleet].set(grid.draw(
            f.buffer_mut(),
            area,
            block,
            selected,
            Style::default().add_modifier(Modifier::REVERSED),
        ));
    }
}
