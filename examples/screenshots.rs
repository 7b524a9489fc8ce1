//! Renders every console view of the simulated demo (seed 7, after 30 simulated minutes) into
//! screenshots/*.svg at 120×36: `cargo run --release --example screenshots`.

use gantry::console::app::{App, View};
use gantry::daemon::state::State;
use ratatui::backend::TestBackend;
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
    let out = std::path::Path::new("screenshots");
    std::fs::create_dir_all(out)?;
    let mut app = App::new(true);
    let shoot = |app: &App, name: &str| -> Result<(), Box<dyn std::error::Error>> {
        let mut t = Terminal::new(TestBackend::new(120, 36))?;
        t.draw(|f| app.render(f, &snap))?;
        let svg = gantry::console::svg::render(t.backend().buffer());
        let path = out.join(format!("{name}.svg"));
        std::fs::write(&path, svg)?;
        println!("wrote {}", path.display());
        Ok(())
    };
    for (view, name) in [
        (View::Overview, "overview"),
        (View::Jobs, "jobs"),
        (View::Fleet, "fleet"),
        (View::Teams, "teams"),
        (View::Events, "events"),
    ] {
        app.view = view;
        shoot(&app, name)?;
    }
    app.view = View::Fleet;
    app.pool_detail = d.pool_detail(0).map(|p| (0, p));
    shoot(&app, "pool")?;
    app.pool_detail = None;
    app.view = View::Jobs;
    app.on_key("n", &snap);
    shoot(&app, "submit")?;
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
