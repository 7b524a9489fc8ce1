//! Drawing the console: the frame (header, tabs, body, key bar) and what opens over a view
//! (a pool node by node, a job in detail).

use super::*;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph, Tabs};
use ratatui::Frame;

impl App {
    pub fn render(&self, f: &mut Frame, snap: &Snapshot) {
        let area = f.area();
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            let msg = format!("gantry needs {MIN_WIDTH}×{MIN_HEIGHT}; this terminal is {}×{}. Enlarge it, or press q to quit.", area.width, area.height);
            f.render_widget(
                Paragraph::new(msg).wrap(ratatui::widgets::Wrap { trim: true }),
                area,
            );
            return;
        }
        let [top, body, bottom] = Layout::vertical([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(1),
        ])
        .areas(area);
        let lost = self
            .lost
            .as_ref()
            .map(|since| format!(" DISCONNECTED {since} "));
        let sim = match (snap.simulated, self.readonly) {
            (true, true) => " SIMULATED  RO ",
            (true, false) => " SIMULATED ",
            (false, true) => " RO ",
            (false, false) => "",
        };
        let narrow = area.width < 120;
        let titles: Vec<String> = View::ALL
            .iter()
            .map(|v| {
                if narrow {
                    v.short().to_string()
                } else {
                    v.title()
                }
            })
            .collect();
        // What the tabs take (a space either side of each title, a divider between).
        let tabs_w = titles
            .iter()
            .map(|t| t.chars().count() as u16 + 3)
            .sum::<u16>()
            - 1;
        let tabs = Tabs::new(titles)
            .select(self.view.index())
            .highlight_style(self.style(self.theme.accent).add_modifier(Modifier::BOLD));
        // The right-hand side: alarms and badges, the daemon attached to, the clock — the
        // source cut from its left to what the tabs leave (its end names it best), never the
        // tabs.
        let clock = crate::console::clock::header(
            &snap.calendar,
            snap.now,
            area.width >= 100,
            snap.simulated,
        );
        let right_w = area.width.saturating_sub(tabs_w + 1);
        let fixed = (lost.as_deref().map_or(0, |l| l.chars().count())
            + sim.chars().count()
            + clock.chars().count()
            + 2) as u16;
        let room = usize::from(right_w.saturating_sub(fixed));
        let source = if self.source.is_empty() || lost.is_some() || room < 6 {
            String::new()
        } else {
            let s = escape(&self.source);
            let keep = room - 2;
            if s.chars().count() > keep {
                let tail: String = s.chars().skip(s.chars().count() + 1 - keep).collect();
                format!("…{tail}  ")
            } else {
                format!("{s}  ")
            }
        };
        let [left, right] =
            Layout::horizontal([Constraint::Length(tabs_w), Constraint::Min(right_w)]).areas(top);
        f.render_widget(tabs, left);
        let alarm = if self.color {
            Style::default()
                .fg(self.theme.badge_fg)
                .bg(self.theme.error)
                .add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        };
        f.render_widget(
            Paragraph::new(Line::from(vec![
                Span::styled(lost.clone().unwrap_or_default(), alarm),
                Span::styled(
                    sim,
                    if self.color {
                        Style::default()
                            .fg(self.theme.badge_fg)
                            .bg(self.theme.badge_bg)
                    } else {
                        Style::default().add_modifier(Modifier::REVERSED)
                    },
                ),
                Span::raw(format!(" {source}{clock}")),
            ]))
            .right_aligned(),
            right,
        );
        if let Some(form) = &self.form {
            form.render(f, body, self.theme.accent, self.theme.error);
        } else if self.help {
            self.render_help(f, body);
        } else if let Some(p) = &self.logs {
            self.page.set(usize::from(body.height.saturating_sub(2)));
            p.render(
                f,
                body,
                self.style(self.theme.muted),
                self.style(self.theme.error),
            );
        } else if let Some(d) = &self.detail {
            self.render_detail(f, body, d, snap);
        } else if let Some(n) = &self.node {
            self.page.set(usize::from(body.height.saturating_sub(2)));
            n.render(
                f,
                body,
                self.style(self.theme.muted),
                self.style(self.theme.accent),
                self.style(self.theme.error),
            );
        } else if let Some((_, p)) = &self.pool_detail {
            self.page.set(usize::from(body.height.saturating_sub(2)));
            self.render_pool(f, body, p);
        } else {
            self.view.tab().draw(self, f, body, snap);
        }
        if self.lost.is_some() {
            // Stale data stay readable but grey: nothing on screen is current.
            f.buffer_mut()
                .set_style(body, Style::default().add_modifier(Modifier::DIM));
        }
        use crate::console::keymap::Action;
        // Help first: on a narrow terminal the end of the line is what gets cut.
        let common = format!(
            "{} filter  {} command  {} view  {} quit",
            self.key_for(Action::Filter),
            self.key_for(Action::Command),
            self.key_for(Action::NextView),
            self.key_for(Action::Quit)
        );
        let acts = if self.readonly {
            String::new()
        } else {
            use crate::api::JobAction as J;
            format!(
                "{} preempt  {} cancel  {}/{} hold/release  {} prio  ",
                self.key_for(Action::Job(J::Preempt)),
                self.key_for(Action::Job(J::Cancel)),
                self.key_for(Action::Job(J::Hold)),
                self.key_for(Action::Job(J::Release)),
                self.key_for(Action::Reprioritize)
            )
        };
        let help = format!("{} help  ", self.key_for(Action::Help));
        // Actions the caller's token may not take at all stay visible, greyed, with the reason.
        let greyed = self.access.role == crate::api::Role::Viewer;
        let acts = if greyed && !acts.is_empty() {
            Span::styled(
                format!("{}(viewer token: read-only)  ", acts),
                Style::default().add_modifier(Modifier::DIM | Modifier::CROSSED_OUT),
            )
        } else {
            Span::raw(acts)
        };
        let keys = match self.view {
            // What is open over the view has keys of its own (the form types letters).
            _ if self.form.is_some() => Line::from(
                "ctrl-s submit  ctrl-p preview where it lands  esc close (the draft is kept)",
            ),
            _ if self.help => Line::from("j/k pageup/pagedown scroll  esc close"),
            _ if self.logs.is_some() => Line::from(format!(
                "f {}  / search  n/N next/previous  w wrap  s save  [ ] node  esc back",
                match &self.logs {
                    Some(p) if p.follow => "pause",
                    _ => "follow",
                }
            )),
            _ if self.detail.is_some() => Line::from("l logs  j/k g/G scroll  esc back"),
            _ if self.node.is_some() => {
                Line::from("r range 5m/1h/24h  j/k GPU  enter its job  esc back to the pool")
            }
            _ if self.pool_detail.is_some() => {
                Line::from("j/k node  enter the node over time (5m/1h/24h)  esc back")
            }
            _ if self.lost.is_some() => Line::from(
                "the daemon is out of reach: reconnecting every 2 s; actions wait until it answers  q quit",
            ),
            _ => self.view.tab().key_bar(
                self,
                views::KeyBar {
                    help,
                    acts,
                    common,
                },
            ),
        };
        let line = match (&self.prompt, &self.flash) {
            (Some(p), _) => {
                let lead = match p.kind {
                    PromptKind::Filter => "/",
                    PromptKind::Command => ":",
                };
                // `tab`'s candidates, else what the keys do.
                let hint = match (&self.flash, p.kind) {
                    (Some(m), _) => format!("   {}", escape(m)),
                    (None, PromptKind::Command) => {
                        "   tab completes · enter runs · esc cancels".into()
                    }
                    (None, PromptKind::Filter) => "   enter apply · esc cancel".into(),
                };
                Paragraph::new(Line::from(vec![
                    Span::raw(format!("{lead}{}", escape(&p.text))),
                    Span::styled("█", self.style(self.theme.accent)),
                    Span::styled(hint, self.style(self.theme.muted)),
                ]))
            }
            (None, Some(m)) => Paragraph::new(escape(m)).style(self.style(self.theme.accent)),
            (None, None) => Paragraph::new(keys).style(self.style(self.theme.muted)),
        };
        f.render_widget(line, bottom);
        if let Some(c) = &self.confirm {
            self.render_confirm(f, body, c);
        }
    }

    /// One pool node by node (leaf, NVLink domain, state) and GPU by GPU: a utilization bar,
    /// VRAM used (and, when wide, what its jobs reserve), the jobs on it, MIG slices in use and
    /// a sparkline of recent utilization.
    fn render_pool(&self, f: &mut Frame, area: Rect, p: &crate::api::PoolDetail) {
        const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let wide = area.width >= 120;
        let mut lines = vec![Line::styled(
            format!(
                "    gpu   util             VRAM used{}  power temp  jobs",
                if wide { "   reserved" } else { "" }
            ),
            self.style(self.theme.muted),
        )];
        let mut leaf: Option<&str> = None;
        let mut selected_line = 0;
        for n in &p.nodes {
            if n.leaf.as_deref() != leaf {
                leaf = n.leaf.as_deref();
                lines.push(Line::from(Span::styled(
                    format!("leaf {}", escape(leaf.unwrap_or("-"))),
                    self.style(self.theme.accent),
                )));
            }
            let chosen = p
                .nodes
                .get(self.pool_node)
                .is_some_and(|c| std::ptr::eq(c, n));
            if chosen {
                selected_line = lines.len();
            }
            lines.push(Line::from(vec![
                Span::styled(
                    format!("{} {}", if chosen { "▶" } else { " " }, escape(&n.name)),
                    if chosen {
                        bold.add_modifier(Modifier::REVERSED)
                    } else {
                        bold
                    },
                ),
                Span::raw(format!("  {}  nvlink {}", n.state, escape(&n.nvlink))),
                Span::styled(
                    n.note
                        .as_deref()
                        .map_or(String::new(), |t| format!("  · {}", escape(t))),
                    self.style(self.theme.accent),
                ),
            ]));
            // CPUs, memory, disk and every job there (a CPU-only node has nothing else).
            lines.push(Line::styled(
                crate::console::table::cut(
                    &format!("    {}", escape(&n.resources_line())),
                    usize::from(area.width.saturating_sub(2)),
                )
                .into_owned(),
                self.style(self.theme.muted),
            ));
            for g in &n.gpus {
                if g.unmeasured {
                    lines.push(Line::from(format!(
                        "    gpu{:<2} {}  n/a  res {:>3}/{:<3}G  not measured  {}",
                        g.index,
                        "·".repeat(10),
                        g.vram_reserved_mib / 1024,
                        g.vram_total_mib / 1024,
                        if let Some(f) = &g.foreign {
                            escape(f)
                        } else if g.jobs.is_empty() {
                            "idle".to_string()
                        } else {
                            let ids: Vec<String> = g.jobs.iter().map(|j| j.to_string()).collect();
                            format!("job {}", ids.join(","))
                        }
                    )));
                    continue;
                }
                let filled = ((g.util_pct / 100.0) * 10.0).round().clamp(0.0, 10.0) as usize;
                let spark: String = g
                    .history
                    .iter()
                    .map(|&u| SPARK[(usize::from(u) * 7 / 100).min(7)])
                    .collect();
                let jobs = if let Some(f) = &g.foreign {
                    escape(f)
                } else if !g.foreign_pids.is_empty() {
                    let pids: Vec<String> = g.foreign_pids.iter().map(|p| p.to_string()).collect();
                    format!("foreign {}", pids.join(","))
                } else if g.jobs.is_empty() {
                    "idle".to_string()
                } else {
                    let ids: Vec<String> = g.jobs.iter().map(|j| j.to_string()).collect();
                    format!("job {}", ids.join(","))
                };
                let mig = g.mig_used.map_or(String::new(), |m| format!(" MIG {m}/7"));
                let reserved = if wide {
                    format!("  res {:>3}G", g.vram_reserved_mib / 1024)
                } else {
                    String::new()
                };
                lines.push(Line::from(vec![
                    Span::raw(format!("    gpu{:<2} ", g.index)),
                    Span::styled(
                        format!("{}{}", "█".repeat(filled), "░".repeat(10 - filled)),
                        self.style(self.theme.bar),
                    ),
                    Span::raw(format!(
                        " {:>3.0}%  {:>3}/{:<3}G{reserved} {:>4.0}W {:>3.0}°C{mig}  {:<14} ",
                        g.util_pct,
                        g.vram_used_mib / 1024,
                        g.vram_total_mib / 1024,
                        g.power_w,
                        g.temp_c,
                        jobs
                    )),
                    Span::styled(spark, self.style(self.theme.accent)),
                ]));
            }
        }
        if p.nodes.is_empty() {
            lines.push(Line::from("no nodes: the pool is scaled to zero"));
        }
        if !p.waiting.is_empty() {
            lines.push(Line::from(""));
            lines.push(Line::from(Span::styled(
                format!(
                    "waiting in its own scheduler's queue for these nodes ({})",
                    p.waiting.len()
                ),
                bold,
            )));
            let width = usize::from(area.width.saturating_sub(2));
            for w in &p.waiting {
                let line = format!(
                    "  {} · {} GPU(s) on {} node(s) · {}",
                    escape(&w.what),
                    w.gpus,
                    w.nodes,
                    escape(&w.reason)
                );
                lines.push(Line::from(
                    crate::console::table::cut(&line, width).into_owned(),
                ));
            }
        }
        // The selected node and its GPUs (up to 8 lines) stay on screen.
        let inner = usize::from(area.height.saturating_sub(2));
        let max = lines.len().saturating_sub(inner);
        let top = (selected_line + 10).saturating_sub(inner).min(max) as u16;
        f.render_widget(
            Paragraph::new(lines).scroll((top, 0)).block(
                Block::default().borders(Borders::ALL).title(format!(
                " {} · {} · {} · ${:.2}/node-h{} (j/k node · enter its GPUs over time · esc back) ",
                escape(&p.path),
                escape(&p.model),
                p.capacity,
                p.dollars_per_hour,
                if p.simulated { " · SIMULATED" } else { "" }
            )),
            ),
            area,
        );
    }
}
