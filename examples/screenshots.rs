//! Renders every console view of the simulated demo (seed 7, after 30 simulated minutes) into
//! screenshots/*.svg and screenshots/*.png at 120×36: `cargo run --release --example
//! screenshots`. The PNGs are drawn with DejaVu Sans Mono (examples/fonts, its licence beside it).

use gantry::console::app::{App, View};
use gantry::console::svg::{rgb, BG_RGB, FG_RGB};
use gantry::daemon::state::State;
use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::style::Modifier;
use ratatui::Terminal;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = std::env::temp_dir().join(format!("gantry-screenshots-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)?;
    let mut d = State::demo(&dir, 7)?;
    for _ in 0..30 {
        d.advance(60.0)?;
    }
    let snap = d.snapshot().clone();
    let font = fontdue::Font::from_bytes(
        include_bytes!("fonts/DejaVuSansMono.ttf") as &[u8],
        fontdue::FontSettings::default(),
    )?;
    let out = std::path::Path::new("screenshots");
    std::fs::create_dir_all(out)?;
    let mut app = App::new(true);
    let shoot = |app: &App, name: &str| -> Result<(), Box<dyn std::error::Error>> {
        let mut t = Terminal::new(TestBackend::new(120, 36))?;
        t.draw(|f| app.render(f, &snap))?;
        let svg = gantry::console::svg::render(t.backend().buffer());
        let path = out.join(format!("{name}.svg"));
        std::fs::write(&path, svg)?;
        let png = out.join(format!("{name}.png"));
        write_png(t.backend().buffer(), &font, &png)?;
        println!("wrote {} and {}", path.display(), png.display());
        Ok(())
    };
    for view in View::ALL {
        app.view = view;
        shoot(&app, &view.short().to_lowercase())?;
    }
    app.view = View::Fleet;
    app.pool_detail = d.pool_detail(0).map(|p| (0, p));
    shoot(&app, "pool")?;
    let node = app
        .pool_detail
        .as_ref()
        .map(|(_, p)| p.nodes[0].name.clone());
    if let Some(name) = node {
        let mut pane = gantry::console::node::NodePane::new(&name);
        pane.update(
            d.node_detail(&name, gantry::daemon::state::history::Range::Hour)
                .ok_or_else(|| format!("no node {name}")),
        );
        app.node = Some(pane);
        shoot(&app, "node")?;
        app.node = None;
    }
    app.pool_detail = None;
    app.view = View::Jobs;
    app.on_key("n", &snap);
    shoot(&app, "submit")?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

const CELL_W: usize = 9;
const CELL_H: usize = 18;
const PX: f32 = 15.0;

/// Draws the buffer cell by cell: the background, then the glyph's coverage blended in the
/// cell's colour on the baseline.
fn write_png(
    buf: &Buffer,
    font: &fontdue::Font,
    path: &std::path::Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let (w, h) = (usize::from(buf.area.width), usize::from(buf.area.height));
    let (pw, ph) = (w * CELL_W, h * CELL_H);
    let mut img = vec![0u8; pw * ph * 3];
    let mut cache = std::collections::HashMap::new();
    for y in 0..h {
        for x in 0..w {
            let cell = &buf[(x as u16, y as u16)];
            let (mut fg, mut bg) = (
                rgb(cell.fg).unwrap_or(FG_RGB),
                rgb(cell.bg).unwrap_or(BG_RGB),
            );
            if cell.modifier.contains(Modifier::REVERSED) {
                std::mem::swap(&mut fg, &mut bg);
            }
            for py in 0..CELL_H {
                for px in 0..CELL_W {
                    let i = ((y * CELL_H + py) * pw + x * CELL_W + px) * 3;
                    img[i..i + 3].copy_from_slice(&bg);
                }
            }
            let Some(c) = cell.symbol().chars().next().filter(|c| *c != ' ') else {
                continue;
            };
            let (m, cover) = cache
                .entry(c)
                .or_insert_with(|| font.rasterize(c, PX))
                .clone();
            // Baseline 4 px above the cell's bottom; glyphs are clipped to their cell.
            let top = (y * CELL_H + CELL_H - 4) as i32 - m.height as i32 - m.ymin;
            let left = (x * CELL_W) as i32 + m.xmin;
            for gy in 0..m.height {
                for gx in 0..m.width {
                    let (ix, iy) = (left + gx as i32, top + gy as i32);
                    let in_cell = ix >= (x * CELL_W) as i32
                        && ix < ((x + 1) * CELL_W) as i32
                        && iy >= (y * CELL_H) as i32
                        && iy < ((y + 1) * CELL_H) as i32;
                    if !in_cell {
                        continue;
                    }
                    let a = f32::from(cover[gy * m.width + gx]) / 255.0;
                    let i = (iy as usize * pw + ix as usize) * 3;
                    for k in 0..3 {
                        let v = f32::from(bg[k]) * (1.0 - a) + f32::from(fg[k]) * a;
                        img[i + k] = v.round() as u8;
                    }
                }
            }
        }
    }
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut enc = png::Encoder::new(file, pw as u32, ph as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()?.write_image_data(&img)?;
    Ok(())
}
