//! Renders a console frame (a ratatui buffer) as SVG: one text run per cell colour, a rect
//! per background colour, a monospace grid. Used by `cargo run --example screenshots`.

use ratatui::buffer::Buffer;
use ratatui::style::{Color, Modifier};
use std::fmt::Write;

const CELL_W: f64 = 8.4;
const CELL_H: f64 = 17.0;
const BG: &str = "#1e1e2e";
const FG: &str = "#cdd6f4";

/// The 16 ANSI colours as a dark terminal shows them; `None` for the terminal's default.
pub fn rgb(c: Color) -> Option<[u8; 3]> {
    Some(match c {
        Color::Reset => return None,
        Color::Black => [0x45, 0x47, 0x5a],
        Color::Red | Color::LightRed => [0xf3, 0x8b, 0xa8],
        Color::Green | Color::LightGreen => [0xa6, 0xe3, 0xa1],
        Color::Yellow | Color::LightYellow => [0xf9, 0xe2, 0xaf],
        Color::Blue | Color::LightBlue => [0x89, 0xb4, 0xfa],
        Color::Magenta | Color::LightMagenta => [0xf5, 0xc2, 0xe7],
        Color::Cyan | Color::LightCyan => [0x94, 0xe2, 0xd5],
        Color::Gray => [0xba, 0xc2, 0xde],
        Color::DarkGray => [0x58, 0x5b, 0x70],
        Color::White => [0xff, 0xff, 0xff],
        Color::Rgb(r, g, b) => [r, g, b],
        Color::Indexed(i) => [i, i, i],
    })
}

/// The page's background and default text colour.
pub const BG_RGB: [u8; 3] = [0x1e, 0x1e, 0x2e];
pub const FG_RGB: [u8; 3] = [0xcd, 0xd6, 0xf4];

fn hex(c: Color) -> Option<String> {
    rgb(c).map(|[r, g, b]| format!("#{r:02x}{g:02x}{b:02x}"))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The buffer as a standalone SVG document.
pub fn render(buf: &Buffer) -> String {
    let (w, h) = (buf.area.width, buf.area.height);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{:.0}" height="{:.0}" viewBox="0 0 {:.0} {:.0}" font-family="'DejaVu Sans Mono', Menlo, Consolas, monospace" font-size="14">"#,
        f64::from(w) * CELL_W,
        f64::from(h) * CELL_H,
        f64::from(w) * CELL_W,
        f64::from(h) * CELL_H
    );
    let _ = writeln!(out, r#"<rect width="100%" height="100%" fill="{BG}"/>"#);
    for y in 0..h {
        // Backgrounds, merged across runs of the same colour.
        let mut x = 0;
        while x < w {
            let cell = &buf[(x, y)];
            let reversed = cell.modifier.contains(Modifier::REVERSED);
            let bg = if reversed {
                hex(cell.fg).or(Some(FG.into()))
            } else {
                hex(cell.bg)
            };
            let start = x;
            while x < w {
                let c = &buf[(x, y)];
                let r = c.modifier.contains(Modifier::REVERSED);
                let b = if r {
                    hex(c.fg).or(Some(FG.into()))
                } else {
                    hex(c.bg)
                };
                if b != bg {
                    break;
                }
                x += 1;
            }
            if let Some(bg) = bg {
                let _ = writeln!(
                    out,
                    r#"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}" fill="{bg}"/>"#,
                    f64::from(start) * CELL_W,
                    f64::from(y) * CELL_H,
                    f64::from(x - start) * CELL_W,
                    CELL_H
                );
            }
        }
        // Text, one <text> per run of cells with the same style.
        let mut x = 0;
        while x < w {
            let cell = &buf[(x, y)];
            let style = (cell.fg, cell.modifier);
            let start = x;
            let mut text = String::new();
            while x < w {
                let c = &buf[(x, y)];
                if (c.fg, c.modifier) != style {
                    break;
                }
                text.push_str(c.symbol());
                x += 1;
            }
            if text.trim().is_empty() {
                continue;
            }
            let reversed = style.1.contains(Modifier::REVERSED);
            let fill = if reversed {
                hex(cell.bg).unwrap_or_else(|| BG.into())
            } else {
                hex(style.0).unwrap_or_else(|| FG.into())
            };
            let weight = if style.1.contains(Modifier::BOLD) {
                r#" font-weight="bold""#
            } else {
                ""
            };
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" fill="{fill}"{weight} xml:space="preserve" textLength="{:.1}" lengthAdjust="spacingAndGlyphs">{}</text>"#,
                f64::from(start) * CELL_W,
                f64::from(y) * CELL_H + 13.0,
                f64::from(x - start) * CELL_W,
                escape(&text)
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    #[test]
    fn cells_become_escaped_text_runs_and_background_rects() {
        let mut buf = Buffer::empty(Rect::new(0, 0, 10, 2));
        buf.set_string(0, 0, "a<b&c", Style::default().fg(Color::Green));
        buf.set_string(0, 1, "xy", Style::default().bg(Color::Rgb(1, 2, 3)));
        let svg = render(&buf);
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(
            svg.contains(">a&lt;b&amp;c</text>") && svg.contains("fill=\"#a6e3a1\""),
            "{svg}"
        );
        assert!(svg.contains("fill=\"#010203\""), "{svg}");
    }
}
