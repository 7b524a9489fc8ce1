//! One table for every view. Each column says how narrow it may get, what it claims before
//! lower-value columns give way, and which go first on a narrow terminal; text is cut by
//! display width with `…`; spare width goes to the text columns (names, reasons), so a wide
//! terminal shows a pending job's whole reason instead of empty space; the sorted column has
//! an arrow in the header.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::{Modifier, Style};
use ratatui::widgets::{Block, Widget};
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

/// A column of a view's table.
#[derive(Clone, Copy, Debug)]
pub struct Col {
    pub title: &'static str,
    /// Shift and this letter sort by the column (pressed again: the other way).
    pub key: char,
    /// The narrowest it is drawn; cut text ends in `…`.
    pub min: u16,
    /// What it claims before columns that matter less are dropped.
    pub want: u16,
    /// 0: always shown; otherwise the higher, the sooner it is dropped when space is short.
    pub drop: u8,
    /// Text that grows into spare width up to its whole content.
    pub flex: bool,
    /// A number: right-aligned.
    pub right: bool,
}

impl Col {
    /// A column of short values that keeps its width.
    pub const fn fixed(title: &'static str, key: char, width: u16, drop: u8) -> Col {
        Col {
            title,
            key,
            min: width,
            want: width,
            drop,
            flex: false,
            right: false,
        }
    }
    /// A text column: at least `min`, claims `want`, grows into spare width.
    pub const fn text(title: &'static str, key: char, min: u16, want: u16, drop: u8) -> Col {
        Col {
            title,
            key,
            min,
            want,
            drop,
            flex: true,
            right: false,
        }
    }
    pub const fn right(self) -> Col {
        Col {
            right: true,
            ..self
        }
    }
}

/// Which column a view is ordered by, and which way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sort {
    pub col: usize,
    pub desc: bool,
}

/// `text` cut to `width` terminal columns, ending in `…` when cut. Wide characters (CJK,
/// emoji) count as two.
pub fn cut(text: &str, width: usize) -> std::borrow::Cow<'_, str> {
    if text.width() <= width {
        return text.into();
    }
    if width == 0 {
        return "".into();
    }
    let mut out = String::new();
    let mut used = 0;
    for c in text.chars() {
        let cw = c.width().unwrap_or(0);
        if used + cw + 1 > width {
            break;
        }
        out.push(c);
        used += cw;
    }
    out.push('…');
    out.into()
}

/// The columns shown and their widths, for a table `width` columns wide whose cells are at
/// most `natural[i]` wide. Columns are dropped (highest `drop` first) until what the rest claim
/// fits; then text columns shrink toward their minimum if still needed; spare width goes to
/// text columns whose content is wider than they are, the last (the reason, the detail) first.
pub fn fit(cols: &[Col], natural: &[u16], width: u16) -> Vec<(usize, u16)> {
    let claim = |i: usize| natural[i].min(cols[i].want).max(cols[i].min);
    let total = |kept: &[(usize, u16)]| -> u32 {
        kept.iter().map(|&(_, w)| u32::from(w)).sum::<u32>() + kept.len().saturating_sub(1) as u32
    };
    let mut kept: Vec<(usize, u16)> = (0..cols.len()).map(|i| (i, claim(i))).collect();
    while total(&kept) > u32::from(width) {
        let Some(k) = kept
            .iter()
            .enumerate()
            .filter(|(_, &(i, _))| cols[i].drop > 0)
            .max_by_key(|(k, &(i, _))| (cols[i].drop, *k))
            .map(|(k, _)| k)
        else {
            break;
        };
        kept.remove(k);
    }
    // Still too wide: the widest text column gives a column at a time, then any column.
    for flex_only in [true, false] {
        while total(&kept) > u32::from(width) {
            let Some(c) = kept
                .iter_mut()
                .filter(|(i, w)| (cols[*i].flex || !flex_only) && *w > cols[*i].min)
                .max_by_key(|(_, w)| *w)
            else {
                break;
            };
            c.1 -= 1;
        }
    }
    let mut spare = u32::from(width).saturating_sub(total(&kept));
    for (i, w) in kept.iter_mut().rev() {
        if spare == 0 {
            break;
        }
        if cols[*i].flex && natural[*i] > *w {
            let more = u32::from(natural[*i] - *w).min(spare);
            *w += more as u16;
            spare -= more;
        }
    }
    kept
}

/// What a cell holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Text(String),
    /// A bar filled to this fraction, drawn at whatever width its column gets (a bar cut by
    /// width would read as full).
    Bar(f64),
}

/// The widest a bar grows when there is room.
const BAR_FULL: u16 = 16;

/// A view's rows, laid out by `fit` and drawn with the sort arrow in the header.
pub struct Grid<'a> {
    pub cols: &'a [Col],
    pub sort: Option<Sort>,
    pub rows: Vec<Vec<(Value, Style)>>,
    /// Columns left out whatever the width, a bit each (one nothing in the view fills).
    pub hidden: u64,
}

/// A text cell.
pub fn text(s: impl Into<String>, style: Style) -> (Value, Style) {
    (Value::Text(s.into()), style)
}

/// A bar `width` cells wide filled to `ratio`.
pub fn bar(ratio: f64, width: usize) -> String {
    let filled = ((ratio.clamp(0.0, 1.0) * width as f64).round() as usize).min(width);
    format!("{}{}", "█".repeat(filled), "░".repeat(width - filled))
}

impl<'a> Grid<'a> {
    pub fn new(cols: &'a [Col], sort: Option<Sort>) -> Grid<'a> {
        Grid {
            cols,
            sort,
            rows: Vec::new(),
            hidden: 0,
        }
    }

    /// The column's title, with ▲ or ▼ when the view is ordered by it.
    fn title(&self, i: usize) -> String {
        match self.sort {
            Some(s) if s.col == i => {
                format!("{}{}", self.cols[i].title, if s.desc { "▼" } else { "▲" })
            }
            _ => self.cols[i].title.to_string(),
        }
    }

    /// The columns shown in an area `width` wide, and each one's width.
    fn layout(&self, width: u16) -> Vec<(usize, u16)> {
        let mut natural: Vec<u16> = (0..self.cols.len())
            .map(|i| self.title(i).width() as u16)
            .collect();
        for r in &self.rows {
            for (i, (v, _)) in r.iter().enumerate().take(natural.len()) {
                let w = match v {
                    Value::Text(t) => t.width().min(usize::from(u16::MAX)) as u16,
                    Value::Bar(_) => self.cols[i].want.max(BAR_FULL),
                };
                natural[i] = natural[i].max(w);
            }
        }
        // The sorted column is at least as wide as its title with the arrow.
        let mut cols = self.cols.to_vec();
        if let Some(c) = self.sort.and_then(|s| cols.get_mut(s.col)) {
            let w = self.title(self.sort.map_or(0, |s| s.col)).width() as u16;
            c.min = c.min.max(w);
            c.want = c.want.max(c.min);
        }
        if self.hidden == 0 {
            return fit(&cols, &natural, width);
        }
        let shown: Vec<usize> = (0..cols.len())
            .filter(|i| self.hidden & (1 << i) == 0)
            .collect();
        let kept_cols: Vec<Col> = shown.iter().map(|&i| cols[i]).collect();
        let kept_natural: Vec<u16> = shown.iter().map(|&i| natural[i]).collect();
        fit(&kept_cols, &kept_natural, width)
            .into_iter()
            .map(|(k, w)| (shown[k], w))
            .collect()
    }

    /// Draws the grid in `area` inside `block`: a bold header, then the rows (as many as fit,
    /// scrolled so that `selected` is shown), the selected one in `highlight` across the whole
    /// width, columns one cell apart.
    ///
    /// Written straight into the buffer rather than through ratatui's `Table`, which lays every
    /// cell out as a `Line` of `Span`s and walks it grapheme by grapheme: when the selection
    /// scrolls, every cell of the view is drawn anew, and that walk, the buffer indexing per
    /// grapheme and the per-cell styling were most of a key press's frame (perf). ASCII text —
    /// nearly all a console shows — is copied cell by cell; other text goes through
    /// `set_stringn`, which measures graphemes.
    ///
    /// Returns the columns it showed, a bit each (`<`/`>` step over the others).
    pub fn draw(
        self,
        buf: &mut Buffer,
        area: Rect,
        block: Block,
        selected: Option<usize>,
        highlight: Style,
    ) -> u64 {
        let inner = block.inner(area);
        block.render(area, buf);
        let area = inner.intersection(buf.area);
        if area.is_empty() {
            return 0;
        }
        let layout = self.layout(area.width);
        let shown = layout.iter().fold(0u64, |m, &(i, _)| m | 1 << i);
        let bold = Style::default().add_modifier(Modifier::BOLD);
        let mut x = area.x;
        let mut at = Vec::with_capacity(layout.len());
        for &(i, w) in &layout {
            let w = w.min(area.right().saturating_sub(x));
            at.push((i, x, w));
            x = x.saturating_add(w).saturating_add(1).min(area.right());
        }
        for &(i, x, w) in &at {
            self.put(buf, &self.title(i), i, x, area.y, w, bold);
        }
        let visible = usize::from(area.height.saturating_sub(1));
        let offset = selected.map_or(0, |s| (s + 1).saturating_sub(visible));
        for (k, row) in self.rows.iter().enumerate().skip(offset).take(visible) {
            let y = area.y + 1 + (k - offset) as u16;
            for &(i, x, w) in &at {
                match row.get(i) {
                    Some((Value::Text(text), style)) => self.put(buf, text, i, x, y, w, *style),
                    Some((Value::Bar(ratio), style)) => {
                        self.put(buf, &bar(*ratio, usize::from(w)), i, x, y, w, *style)
                    }
                    None => {}
                }
            }
            if selected == Some(k) {
                buf.set_style(Rect::new(area.x, y, area.width, 1), highlight);
            }
        }
        shown
    }

    /// One cell's text, cut to `w` and aligned as its column says, in `style` across the cell.
    #[allow(clippy::too_many_arguments)]
    fn put(&self, buf: &mut Buffer, text: &str, i: usize, x: u16, y: u16, w: u16, style: Style) {
        if w == 0 {
            return;
        }
        let text = cut(text, usize::from(w));
        let width = text.width() as u16;
        let pad = if self.cols[i].right {
            w.saturating_sub(width)
        } else {
            0
        };
        if !text.is_ascii() {
            buf.set_style(Rect::new(x, y, w, 1), style);
            buf.set_stringn(x + pad, y, &text, usize::from(w - pad), style);
            return;
        }
        let start = buf.index_of(x, y);
        let cells = &mut buf.content[start..start + usize::from(w)];
        let mut chars = text.chars();
        for (k, cell) in cells.iter_mut().enumerate() {
            if k >= usize::from(pad) {
                if let Some(c) = chars.next() {
                    cell.set_char(c);
                }
            }
            cell.set_style(style);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COLS: [Col; 5] = [
        Col::fixed("id", 'I', 4, 0),
        Col::text("name", 'N', 8, 16, 0),
        Col::fixed("team", 'T', 10, 2),
        Col::fixed("cost", 'C', 8, 1),
        Col::text("why", 'W', 20, 48, 0),
    ];

    #[test]
    fn text_is_cut_by_display_width_with_an_ellipsis() {
        assert_eq!(cut("train", 8), "train");
        assert_eq!(cut("训练任务大模型", 9), "训练任务…");
        assert_eq!(cut("needs 1 node(s); 0 have room", 10), "needs 1 n…");
        assert_eq!(cut("🚀 launch", 6).width(), 6);
        assert_eq!(cut("abc", 0), "");
    }

    #[test]
    fn narrow_tables_drop_low_value_columns_before_cutting_the_reason() {
        // Everything at what it claims is 4+16+10+8+48 + 4 gaps = 90.
        let natural = [3, 16, 10, 8, 48];
        let all = fit(&COLS, &natural, 90);
        assert_eq!(all.len(), 5);
        // 80 columns: the team goes first (drop 2), the cost stays; the reason stays whole.
        let at80 = fit(&COLS, &natural, 80);
        assert_eq!(at80.iter().map(|c| c.0).collect::<Vec<_>>(), [0, 1, 3, 4]);
        assert_eq!(at80.last(), Some(&(4, 48)));
        // 60 columns: the cost goes too, then the widest text (the reason) shrinks.
        let at60 = fit(&COLS, &natural, 60);
        assert_eq!(at60.iter().map(|c| c.0).collect::<Vec<_>>(), [0, 1, 4]);
        let sum: u16 = at60.iter().map(|c| c.1).sum::<u16>() + 2;
        assert_eq!(sum, 60);
        assert!(at60.iter().all(|&(i, w)| w >= COLS[i].min));
    }

    #[test]
    fn a_bar_is_drawn_at_its_columns_width_never_cut() {
        assert_eq!(bar(0.5, 8), "████░░░░");
        assert_eq!(bar(18.0 / 32.0, 8), "█████░░░", "4.5 cells round up");
        assert_eq!(bar(1.0, 4), "████");
        assert_eq!(bar(0.0, 3), "░░░");
    }

    #[test]
    fn spare_width_goes_to_text_whose_content_is_wider() {
        // A 120-character reason on a 200-column terminal is shown whole.
        let natural = [3, 30, 10, 8, 120];
        let at200 = fit(&COLS, &natural, 200);
        assert_eq!(at200.len(), 5);
        assert_eq!(at200[4], (4, 120));
        assert_eq!(at200[1], (1, 30), "then the name gets its whole length");
    }

    /// The direct drawing matches ratatui's `Table` (which it replaced for speed) cell for
    /// cell, symbols and styles: header, alignment, cut text, wide characters, bars, the
    /// per-cell style across the cell and the highlight across the row.
    #[test]
    fn drawing_is_what_ratatuis_table_drew() {
        use ratatui::layout::Constraint;
        use ratatui::style::Color;
        use ratatui::text::Line;
        use ratatui::widgets::{Borders, Cell, Row, StatefulWidget, Table, TableState};
        let red = Style::default().fg(Color::Red);
        let rows = vec![
            vec![
                text("1", Style::default()),
                text("train", red),
                text("ml", Style::default()),
                text("$1.50", Style::default()),
                text("needs 1 node(s); 0 have room for 8 GPUs", Style::default()),
            ],
            vec![
                text("22", Style::default()),
                text("训练任务大模型", Style::default()),
                text("research-team-long", red),
                text("$0.05", red),
                (Value::Bar(0.5), red),
            ],
            vec![
                text("333", Style::default()),
                text("🚀 launch", Style::default()),
                text("", Style::default()),
                text("", Style::default()),
                text("x", Style::default()),
            ],
        ];
        for (width, selected) in [(90u16, Some(1)), (60, Some(2)), (40, None), (36, Some(0))] {
            let area = Rect::new(0, 0, width, 6);
            let sort = Some(Sort { col: 1, desc: true });
            let grid = |rows: &Vec<Vec<(Value, Style)>>| {
                let mut g = Grid::new(&COLS, sort);
                g.rows = rows.clone();
                g
            };
            let block = || Block::default().borders(Borders::ALL).title(" t ");
            let highlight = Style::default().add_modifier(Modifier::REVERSED);
            let mut ours = Buffer::empty(area);
            grid(&rows).draw(&mut ours, area, block(), selected, highlight);
            // The same through ratatui's Table.
            let g = grid(&rows);
            let layout = g.layout(width - 2);
            let bold = Style::default().add_modifier(Modifier::BOLD);
            let cell = |t: &str, i: usize, w: u16, style: Style| {
                let t = cut(t, usize::from(w)).into_owned();
                let line = if COLS[i].right {
                    Line::from(t).right_aligned()
                } else {
                    Line::from(t)
                };
                Cell::from(line).style(style)
            };
            let header = Row::new(
                layout
                    .iter()
                    .map(|&(i, w)| cell(&g.title(i), i, w, bold))
                    .collect::<Vec<_>>(),
            );
            let body: Vec<Row> = rows
                .iter()
                .map(|r| {
                    Row::new(
                        layout
                            .iter()
                            .map(|&(i, w)| match &r[i] {
                                (Value::Text(t), s) => cell(t, i, w, *s),
                                (Value::Bar(b), s) => Cell::from(bar(*b, usize::from(w))).style(*s),
                            })
                            .collect::<Vec<_>>(),
                    )
                })
                .collect();
            let widths: Vec<Constraint> =
                layout.iter().map(|&(_, w)| Constraint::Length(w)).collect();
            let table = Table::new(body, widths)
                .header(header)
                .column_spacing(1)
                .row_highlight_style(highlight)
                .block(block());
            let mut theirs = Buffer::empty(area);
            StatefulWidget::render(
                table,
                area,
                &mut theirs,
                &mut TableState::default().with_selected(selected),
            );
            assert_eq!(ours, theirs, "width {width}, selected {selected:?}");
        }
        // Narrower than the columns' minimums: the last column is cut to what is left, with
        // its ellipsis, and a bar drawn at that width (ratatui clipped the cell's text).
        let area = Rect::new(0, 0, 24, 6);
        let mut g = Grid::new(&COLS, None);
        g.rows = rows;
        let mut ours = Buffer::empty(area);
        g.draw(
            &mut ours,
            area,
            Block::default().borders(Borders::ALL),
            None,
            Style::default(),
        );
        let line = |y: u16| (0..24).map(|x| ours[(x, y)].symbol()).collect::<String>();
        assert!(line(2).ends_with("needs 1…│"), "{}", line(2));
        assert!(line(3).ends_with("████░░░░│"), "{}", line(3));
    }
}
