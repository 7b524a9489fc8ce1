//! Themes: semantic colour roles in TOML (`themes/*.toml`, compiled in), layered with the user's
//! file of the same name in the config dir, and downsampled to what the terminal can show.

use ratatui::style::Color;
use serde::Deserialize;
use std::path::Path;

pub const THEMES: [(&str, &str); 4] = [
    ("dark", include_str!("../../themes/dark.toml")),
    ("light", include_str!("../../themes/light.toml")),
    ("16color", include_str!("../../themes/16color.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

/// What the terminal can show, from NO_COLOR, COLORTERM and TERM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    None,
    Ansi16,
    Ansi256,
    TrueColor,
}

pub fn detect_depth(get: impl Fn(&str) -> Option<String>) -> Depth {
    if get("NO_COLOR").is_some_and(|v| !v.is_empty()) {
        return Depth::None;
    }
    let term = get("TERM").unwrap_or_default();
    if term == "dumb" {
        return Depth::None;
    }
    match get("COLORTERM").as_deref() {
        Some("truecolor") | Some("24bit") => Depth::TrueColor,
        _ if term.contains("256color") => Depth::Ansi256,
        _ => Depth::Ansi16,
    }
}

#[derive(Clone, Debug, PartialEq)]
pub struct Theme {
    pub accent: Color,
    pub ok: Color,
    pub warn: Color,
    pub error: Color,
    pub muted: Color,
    pub badge_fg: Color,
    pub badge_bg: Color,
    pub bar: Color,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct Layer {
    accent: Option<String>,
    ok: Option<String>,
    warn: Option<String>,
    error: Option<String>,
    muted: Option<String>,
    badge_fg: Option<String>,
    badge_bg: Option<String>,
    bar: Option<String>,
}

fn parse_color(v: &str) -> Option<Color> {
    let v = v.trim().to_ascii_lowercase();
    if let Some(hex) = v.strip_prefix('#') {
        if hex.len() != 6 {
            return None;
        }
        let n = u32::from_str_radix(hex, 16).ok()?;
        return Some(Color::Rgb((n >> 16) as u8, (n >> 8) as u8, n as u8));
    }
    if let Ok(i) = v.parse::<u8>() {
        return Some(Color::Indexed(i));
    }
    Some(match v.as_str() {
        "black" => Color::Black,
        "red" => Color::Red,
        "green" => Color::Green,
        "yellow" => Color::Yellow,
        "blue" => Color::Blue,
        "magenta" => Color::Magenta,
        "cyan" => Color::Cyan,
        "gray" | "grey" => Color::Gray,
        "darkgray" | "darkgrey" => Color::DarkGray,
        "lightred" => Color::LightRed,
        "lightgreen" => Color::LightGreen,
        "lightyellow" => Color::LightYellow,
        "lightblue" => Color::LightBlue,
        "lightmagenta" => Color::LightMagenta,
        "lightcyan" => Color::LightCyan,
        "white" => Color::White,
        "reset" => Color::Reset,
        _ => return None,
    })
}

/// The 16 ANSI colours with typical RGB values, for downsampling.
const ANSI16: [(Color, (u8, u8, u8)); 16] = [
    (Color::Black, (0, 0, 0)),
    (Color::Red, (205, 0, 0)),
    (Color::Green, (0, 205, 0)),
    (Color::Yellow, (205, 205, 0)),
    (Color::Blue, (0, 0, 238)),
    (Color::Magenta, (205, 0, 205)),
    (Color::Cyan, (0, 205, 205)),
    (Color::Gray, (229, 229, 229)),
    (Color::DarkGray, (127, 127, 127)),
    (Color::LightRed, (255, 0, 0)),
    (Color::LightGreen, (0, 255, 0)),
    (Color::LightYellow, (255, 255, 0)),
    (Color::LightBlue, (92, 92, 255)),
    (Color::LightMagenta, (255, 0, 255)),
    (Color::LightCyan, (0, 255, 255)),
    (Color::White, (255, 255, 255)),
];

fn dist(a: (u8, u8, u8), b: (u8, u8, u8)) -> u32 {
    let d = |x: u8, y: u8| (i32::from(x) - i32::from(y)).pow(2) as u32;
    d(a.0, b.0) + d(a.1, b.1) + d(a.2, b.2)
}

/// A colour the terminal can show.
pub fn downsample(c: Color, depth: Depth) -> Color {
    match (c, depth) {
        (_, Depth::None) => Color::Reset,
        (Color::Rgb(r, g, b), Depth::Ansi16) => ANSI16
            .iter()
            .min_by_key(|(_, rgb)| dist(*rgb, (r, g, b)))
            .map_or(c, |(c, _)| *c),
        (Color::Rgb(r, g, b), Depth::Ansi256) => {
            // The 6×6×6 cube of the 256-colour palette.
            let q = |v: u8| ((u16::from(v) * 5 + 127) / 255) as u8;
            Color::Indexed(16 + 36 * q(r) + 6 * q(g) + q(b))
        }
        (Color::Indexed(i), Depth::Ansi16) if i >= 16 => Color::Gray,
        _ => c,
    }
}

impl Theme {
    fn apply(&mut self, name: &str, text: &str) -> Result<(), String> {
        let layer: Layer = toml::from_str(text).map_err(|e| {
            let (line, col) = e.span().map_or((1, 1), |s| {
                let before = &text[..s.start.min(text.len())];
                (
                    before.matches('\n').count() + 1,
                    before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
                )
            });
            format!("{name}:{line}:{col}: {}", e.message())
        })?;
        let roles = [
            (&layer.accent, &mut self.accent, "accent"),
            (&layer.ok, &mut self.ok, "ok"),
            (&layer.warn, &mut self.warn, "warn"),
            (&layer.error, &mut self.error, "error"),
            (&layer.muted, &mut self.muted, "muted"),
            (&layer.badge_fg, &mut self.badge_fg, "badge_fg"),
            (&layer.badge_bg, &mut self.badge_bg, "badge_bg"),
            (&layer.bar, &mut self.bar, "bar"),
        ];
        for (value, slot, role) in roles {
            if let Some(v) = value {
                *slot = parse_color(v).ok_or_else(|| format!("{name}: `{role}` = \"{v}\" is not a colour; use a name like cyan, \"#rrggbb\" or 0..=255"))?;
            }
        }
        Ok(())
    }

    /// A shipped theme, layered with `<config_dir>/themes/<name>.toml` if that exists, then
    /// downsampled to `depth`.
    pub fn load(name: &str, config_dir: &Path, depth: Depth) -> Result<Theme, String> {
        let (_, base) = THEMES.iter().find(|(n, _)| *n == name).ok_or_else(|| {
            format!(
                "unknown theme `{name}`; shipped: {}",
                THEMES.map(|(n, _)| n).join(", ")
            )
        })?;
        let mut t = Theme {
            accent: Color::Reset,
            ok: Color::Reset,
            warn: Color::Reset,
            error: Color::Reset,
            muted: Color::Reset,
            badge_fg: Color::Reset,
            badge_bg: Color::Reset,
            bar: Color::Reset,
        };
        t.apply(&format!("themes/{name}.toml"), base)?;
        let user = config_dir.join("themes").join(format!("{name}.toml"));
        if let Ok(text) = std::fs::read_to_string(&user) {
            t.apply(&user.display().to_string(), &text)?;
        }
        for c in [
            &mut t.accent,
            &mut t.ok,
            &mut t.warn,
            &mut t.error,
            &mut t.muted,
            &mut t.badge_fg,
            &mut t.badge_bg,
            &mut t.bar,
        ] {
            *c = downsample(*c, depth);
        }
        Ok(t)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_theme_loads_at_every_depth() {
        for (name, _) in THEMES {
            for depth in [Depth::None, Depth::Ansi16, Depth::Ansi256, Depth::TrueColor] {
                let t = Theme::load(name, Path::new("/nonexistent"), depth).unwrap();
                if depth == Depth::None {
                    assert_eq!(t.accent, Color::Reset);
                }
                if depth == Depth::Ansi16 {
                    assert!(
                        !matches!(t.accent, Color::Rgb(..) | Color::Indexed(_)),
                        "{name}: {:?}",
                        t.accent
                    );
                }
            }
        }
    }

    #[test]
    fn a_user_file_changes_one_role_and_keeps_the_rest() {
        let dir = gantry_testkit::scratch::scratch("theme");
        std::fs::create_dir_all(dir.join("themes")).unwrap();
        std::fs::write(dir.join("themes/dark.toml"), "accent = \"magenta\"\n").unwrap();
        let t = Theme::load("dark", &dir, Depth::TrueColor).unwrap();
        let base = Theme::load("dark", Path::new("/nonexistent"), Depth::TrueColor).unwrap();
        assert_eq!(t.accent, Color::Magenta);
        assert_eq!(t.ok, base.ok);
        std::fs::write(dir.join("themes/dark.toml"), "accent = \"#12\"\n").unwrap();
        let e = Theme::load("dark", &dir, Depth::TrueColor).unwrap_err();
        assert!(e.contains("`accent` = \"#12\" is not a colour"), "{e}");
        std::fs::write(dir.join("themes/dark.toml"), "acent = \"red\"\n").unwrap();
        assert!(Theme::load("dark", &dir, Depth::TrueColor)
            .unwrap_err()
            .contains(":1:1: unknown field `acent`"));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(Theme::load("neon", Path::new("/x"), Depth::TrueColor)
            .unwrap_err()
            .contains("shipped: dark, light, 16color, high-contrast"));
    }

    #[test]
    fn depth_comes_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(
            detect_depth(env(&[("NO_COLOR", "1"), ("COLORTERM", "truecolor")])),
            Depth::None
        );
        assert_eq!(
            detect_depth(env(&[("COLORTERM", "truecolor")])),
            Depth::TrueColor
        );
        assert_eq!(
            detect_depth(env(&[("TERM", "xterm-256color")])),
            Depth::Ansi256
        );
        assert_eq!(detect_depth(env(&[("TERM", "xterm")])), Depth::Ansi16);
        assert_eq!(detect_depth(env(&[("TERM", "dumb")])), Depth::None);
        assert_eq!(
            downsample(Color::Rgb(255, 0, 0), Depth::Ansi256),
            Color::Indexed(196)
        );
        assert_eq!(
            downsample(Color::Rgb(250, 10, 10), Depth::Ansi16),
            Color::LightRed
        );
    }
}
