//! The console's node view (Fleet → pool → `enter` on a node): each GPU over the last 5
//! minutes, hour or day (`r` cycles) — utilization, VRAM in use, power and temperature as
//! sparklines with the value now and the range's low and high — and who is on it: gantry's
//! jobs with their share of the GPU, and work that is not gantry's (processes NVML sees, a
//! cluster's own jobs). `j`/`k` select a GPU, `enter` opens its job, `esc` goes back.

use crate::api::history::{Point, Range};
use crate::api::{GpuHistoryView, NodeDetail};
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};
use ratatui::Frame;

const SPARK: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

#[derive(Clone, Debug, PartialEq)]
pub struct NodePane {
    pub name: String,
    pub range: Range,
    pub detail: Option<NodeDetail>,
    /// Why the last fetch failed (what is shown is from before it).
    pub error: Option<String>,
    /// The selected GPU.
    pub selected: usize,
}

/// What a key in the node view asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeKey {
    Close,
    /// Fetch again (another range).
    Fetch,
    /// Open this job's detail.
    Open(i64),
    Redraw,
    Nothing,
}

impl NodePane {
    pub fn new(name: &str) -> NodePane {
        NodePane {
            name: name.to_string(),
            range: Range::Hour,
            detail: None,
            error: None,
            selected: 0,
        }
    }

    pub fn update(&mut self, got: Result<NodeDetail, String>) {
        match got {
            Ok(d) => {
                self.selected = self.selected.min(d.gpus.len().saturating_sub(1));
                self.detail = Some(d);
                self.error = None;
            }
            Err(why) => self.error = Some(why),
        }
    }

    /// `step`: the keymap's motion (GPUs down, negative up), if the key is one.
    pub fn key(&mut self, key: &str, step: Option<i32>) -> NodeKey {
        let gpus = self.detail.as_ref().map_or(0, |d| d.gpus.len());
        match key {
            "esc" | "q" => NodeKey::Close,
            "r" => {
                self.range = self.range.next();
                NodeKey::Fetch
            }
            "enter" => self
                .detail
                .as_ref()
                .and_then(|d| match d.gpus.get(self.selected) {
                    Some(g) => g.jobs.first().map(|j| j.id),
                    // A CPU-only node: its first job.
                    None => d.jobs.first().copied(),
                })
                .map_or(NodeKey::Nothing, NodeKey::Open),
            _ => match step {
                Some(n) if gpus > 0 => {
                    let at = self.selected as i64 + i64::from(n.signum());
                    self.selected = at.clamp(0, gpus as i64 - 1) as usize;
                    NodeKey::Redraw
                }
                _ => NodeKey::Nothing,
            },
        }
    }

    pub fn render(&self, f: &mut Frame, area: Rect, muted: Style, accent: Style, error: Style) {
        let width = usize::from(area.width.saturating_sub(2));
        let mut lines: Vec<Line> = Vec::new();
        let mut selected_at = 0;
        match &self.detail {
            None => lines.push(Line::styled("fetching…", muted)),
            Some(d) => {
                // CPUs, memory, disk and every job there; a CPU-only node has nothing else.
                lines.push(Line::styled(
                    super::table::cut(&super::app::escape(&d.resources.line(&d.jobs)), width)
                        .into_owned(),
                    muted,
                ));
                if d.gpus.is_empty() {
                    lines.push(Line::styled(
                        "no GPUs: a CPU-only node (enter opens its first job)",
                        muted,
                    ));
                }
                for (k, g) in d.gpus.iter().enumerate() {
                    if k == self.selected {
                        selected_at = lines.len();
                    }
                    gpu_lines(&mut lines, g, width, k == self.selected, muted, accent);
                }
            }
        }
        if let Some(why) = &self.error {
            lines.push(Line::styled(format!("(fetch failed: {why})"), error));
        }
        // Keep the selected GPU's block (5 lines) on screen.
        let inner = usize::from(area.height.saturating_sub(2));
        let top = (selected_at + 5).saturating_sub(inner) as u16;
        let title = match &self.detail {
            Some(d) => format!(
                " {} · {} · {} · {} · last {} ({} s a point){} ",
                super::app::escape(&d.name),
                super::app::escape(&d.pool),
                super::app::escape(&d.model),
                d.state,
                d.range.name(),
                d.step_s,
                if d.simulated { " · SIMULATED" } else { "" }
            ),
            None => format!(" {} ", super::app::escape(&self.name)),
        };
        f.render_widget(
            Paragraph::new(lines).scroll((top, 0)).block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(Span::styled(
                        title,
                        Style::default().add_modifier(Modifier::BOLD),
                    ))
                    .title_bottom(" r range 5m/1h/24h · j/k GPU · enter its job · esc back "),
            ),
            area,
        );
    }
}

/// A measure's row: its label, how to read it from a point, what the sparkline is scaled to
/// (a negative number: that many times the range's peak) and its unit.
type Measure = (&'static str, fn(&Point) -> f64, f64, &'static str);

/// One GPU: who is on it, then a sparkline row for each measure.
fn gpu_lines(
    lines: &mut Vec<Line<'static>>,
    g: &GpuHistoryView,
    width: usize,
    selected: bool,
    muted: Style,
    accent: Style,
) {
    // Names come from users: escaped once the phrase is made.
    let who: Vec<String> = g.who().iter().map(|w| super::app::escape(w)).collect();
    let head = format!(
        "{} gpu{}{}  {}",
        if selected { "▶" } else { " " },
        g.index,
        g.uuid.as_deref().map_or(String::new(), |u| format!(" {u}")),
        if who.is_empty() {
            "idle".to_string()
        } else {
            who.join(" · ")
        }
    );
    let head = super::table::cut(&head, width).into_owned();
    lines.push(if selected {
        Line::styled(head, Style::default().add_modifier(Modifier::REVERSED))
    } else {
        Line::from(head)
    });
    if g.unmeasured {
        lines.push(Line::styled(
            "    not measured (no NVML answer for this GPU): nothing is made up",
            muted,
        ));
        lines.extend((0..3).map(|_| Line::from("")));
        return;
    }
    let total = f64::from(g.vram_total_mib.max(1));
    let rows: [Measure; 4] = [
        ("util ", |p| f64::from(p.util_pct), 100.0, "%"),
        (
            "VRAM ",
            |p| f64::from(p.vram_used_mib) / 1024.0,
            total / 1024.0,
            "G",
        ),
        // Power against a quarter above its peak (a steady draw reads ▆, not a full bar);
        // temperature against 100 °C.
        ("power", |p| f64::from(p.power_w), -1.25, "W"),
        ("temp ", |p| f64::from(p.temp_c), 100.0, "°C"),
    ];
    // Label, then the sparkline, then "now  low–high".
    let spark_w = width.saturating_sub(6 + 24).max(8);
    for (label, value, scale, unit) in rows {
        let values: Vec<Option<f64>> = g.points.iter().map(|p| p.as_ref().map(value)).collect();
        let (lo, hi) = values
            .iter()
            .flatten()
            .fold((f64::MAX, f64::MIN), |(l, h), &v| (l.min(v), h.max(v)));
        let top = if scale > 0.0 {
            scale
        } else {
            -scale * hi.max(1.0)
        };
        let now = value(&g.now);
        let tail = if values.iter().all(Option::is_none) {
            format!(" {now:>5.0}{unit}  no history yet")
        } else {
            format!(" {now:>5.0}{unit}  {lo:.0}–{hi:.0}")
        };
        lines.push(Line::from(vec![
            Span::styled(format!("    {label} "), muted),
            Span::styled(spark(&values, top, spark_w), accent),
            Span::raw(tail),
        ]));
    }
}

/// `values` as at most `width` sparkline cells (groups averaged when there are more points
/// than cells), scaled to `top`; a cell without a sample is blank.
fn spark(values: &[Option<f64>], top: f64, width: usize) -> String {
    if values.is_empty() || width == 0 {
        return " ".repeat(width);
    }
    let group = values.len().div_ceil(width);
    let cells: Vec<Option<f64>> = values
        .chunks(group)
        .map(|c| {
            let got: Vec<f64> = c.iter().flatten().copied().collect();
            (!got.is_empty()).then(|| got.iter().sum::<f64>() / got.len() as f64)
        })
        .collect();
    let mut out: String = " ".repeat(width.saturating_sub(cells.len()));
    for v in cells {
        out.push(match v {
            Some(v) => SPARK[((v / top.max(1e-9)) * 7.0).round().clamp(0.0, 7.0) as usize],
            None => ' ',
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sparklines_fit_their_width_and_scale_to_the_top() {
        assert_eq!(
            spark(&[Some(0.0), Some(50.0), Some(100.0)], 100.0, 5),
            "  ▁▅█"
        );
        // 72 points in 24 cells: three a cell.
        let day: Vec<Option<f64>> = (0..72)
            .map(|i| Some(if i < 36 { 0.0 } else { 100.0 }))
            .collect();
        let s = spark(&day, 100.0, 24);
        assert_eq!(s.chars().count(), 24);
        assert_eq!(s, format!("{}{}", "▁".repeat(12), "█".repeat(12)));
        assert_eq!(spark(&[], 100.0, 3), "   ");
        assert_eq!(
            spark(&[None, Some(100.0)], 100.0, 2),
            " █",
            "no sample, no bar"
        );
    }
}
