//! The submit form: a YAML editor (ratatui-textarea) prefilled from a template or a file,
//! checked on every edit with the same parser the daemon uses (errors with line and column),
//! a preview from the daemon of where the job would land and at what $/h, then submit.

use crate::api::Preview;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Paragraph, Wrap};
use ratatui::Frame;
use ratatui_textarea::{CursorMove, Input, Key, TextArea};

/// What a new form starts from: every field a first job needs, commented.
pub const TEMPLATE: &str = "\
name: my-experiment
team: ml-research            # your team (a researcher token submits for its own)
priority: experiment         # serving | production | experiment
resources:
  accelerators: H100:1       # MODEL:COUNT, L4:0.5 (a share), {H100: 8, H200: 8} (any of)
  use_spot: true
checkpoint: {interval: 30m, grace: 2m}
time_limit: 4h
run: python train.py
";

/// The template for the fleet in force: the caller's team (a researcher's token's, else the
/// fleet's first), a GPU model the fleet has (the first pool with GPUs), spot only where the
/// fleet sells it, and a CPU-only job on a fleet without GPUs — so that a first submit works
/// on any fleet, not only the demo's (issue 41: `unknown GPU model H100 (this fleet has: )`).
pub fn template_for(snap: &crate::api::Snapshot, team: Option<&str>) -> String {
    let team = team
        .map(str::to_string)
        .or_else(|| snap.teams.first().map(|t| t.name.clone()));
    let model = snap
        .pools
        .iter()
        .find(|p| p.model != "-" && p.gpus > 0)
        .map(|p| p.model.clone());
    let spot = snap.pools.iter().any(|p| p.capacity == "spot");
    let mut lines = TEMPLATE.lines().map(str::to_string).collect::<Vec<_>>();
    for l in &mut lines {
        if l.starts_with("team:") {
            *l = match &team {
                Some(t) => {
                    format!("team: {t:<22} # your team (a researcher token submits for its own)")
                }
                None => String::new(),
            };
        } else if l.starts_with("  accelerators:") {
            *l = match &model {
                Some(m) => format!(
                    "  accelerators: {:<12} # MODEL:COUNT, L4:0.5 (a share), {{H100: 8, H200: 8}} (any of)",
                    format!("{m}:1")
                ),
                None => "  cpus: 1                   # this fleet has no GPUs: a CPU job".to_string(),
            };
        } else if l.starts_with("  use_spot:") && !spot {
            *l = String::new();
        }
    }
    let mut text: String = lines
        .into_iter()
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    text.push('\n');
    text
}

/// What a key did in the form.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FormKey {
    /// Handled inside the form.
    Edited,
    /// Ask the daemon where this spec would land.
    Preview,
    /// Submit this spec.
    Submit(String),
    /// Close the form (the draft is kept).
    Close,
    Ignored,
}

pub struct Form {
    editor: TextArea<'static>,
    /// The local check of the spec: `None` when it parses.
    pub error: Option<String>,
    /// The line of the error (0-based), highlighted in the editor.
    error_line: Option<usize>,
    /// The daemon's answer to the last preview.
    pub preview: Option<Result<Preview, String>>,
}

impl Form {
    pub fn new(text: &str) -> Form {
        let mut editor = TextArea::new(text.lines().map(str::to_string).collect());
        editor.set_line_number_style(Style::default().fg(Color::DarkGray));
        editor.set_cursor_line_style(Style::default());
        editor.move_cursor(CursorMove::Top);
        let mut f = Form {
            editor,
            error: None,
            error_line: None,
            preview: None,
        };
        f.check();
        f
    }

    pub fn text(&self) -> String {
        let mut t = self.editor.lines().join("\n");
        t.push('\n');
        t
    }

    /// Parses the spec as the daemon will; the error names its line and column.
    fn check(&mut self) {
        match crate::spec::parse("form", self.text().as_bytes()) {
            Ok(_) => {
                self.error = None;
                self.error_line = None;
            }
            Err(e) => {
                self.error_line = Some(e.line.saturating_sub(1));
                self.error = Some(e.to_string());
            }
        }
    }

    /// The daemon's answer to a preview or a submission of this spec. A refusal that names a
    /// field of the spec (a team it does not know, resources no pool has) is said at that
    /// field's line and column, and the line marked, as the parser's own errors are.
    pub fn answered(&mut self, answer: Result<Preview, crate::api::ClientError>) {
        self.preview = Some(
            answer.map_err(|e| match e.at_its_field("form", &self.text()) {
                Some((line, said)) => {
                    self.error_line = Some(line.saturating_sub(1));
                    said
                }
                None => e.to_string(),
            }),
        );
    }

    /// One key, named as the console names keys (`a`, `enter`, `ctrl-s`, …).
    pub fn key(&mut self, key: &str) -> FormKey {
        match key {
            "esc" => return FormKey::Close,
            "ctrl-s" if self.error.is_none() => return FormKey::Submit(self.text()),
            "ctrl-s" => return FormKey::Ignored,
            "ctrl-p" => return FormKey::Preview,
            _ => {}
        }
        let Some(input) = to_input(key) else {
            return FormKey::Ignored;
        };
        if self.editor.input(input) {
            self.preview = None;
            self.check();
        }
        FormKey::Edited
    }

    pub fn render(&self, f: &mut Frame, area: Rect, accent: Color, error: Color) {
        let lines = self.check_lines(accent, error);
        // The check grows with what the preview says (up to 10 lines), the editor keeps 5.
        let tall = (lines.len() as u16 + 2).clamp(6, 12);
        let [edit, status] =
            Layout::vertical([Constraint::Min(5), Constraint::Length(tall)]).areas(area);
        let mut editor = self.editor.clone();
        editor.set_block(
            Block::default()
                .borders(Borders::ALL)
                .title(" submit a job: YAML (ctrl-p preview · ctrl-s submit · esc close) "),
        );
        if let Some(l) = self.error_line {
            // Mark the line the error points at.
            editor.set_cursor_line_style(if editor.cursor().0 == l {
                Style::default().add_modifier(Modifier::UNDERLINED)
            } else {
                Style::default()
            });
        }
        f.render_widget(&editor, edit);
        f.render_widget(
            Paragraph::new(lines)
                .wrap(Wrap { trim: true })
                .block(Block::default().borders(Borders::ALL).title(" check ")),
            status,
        );
    }

    /// What the check box says: whether the spec parses, and the daemon's preview — where it
    /// would land now and, submitted now, when it would start and whose start it would move.
    fn check_lines(&self, accent: Color, error: Color) -> Vec<Line<'static>> {
        let mut lines = Vec::new();
        match &self.error {
            Some(e) => lines.push(Line::styled(
                format!("✗ {}", super::app::escape(e)),
                Style::default().fg(error),
            )),
            None => lines.push(Line::styled(
                "✓ the spec parses; ctrl-p asks the daemon where it would land",
                Style::default().fg(accent),
            )),
        }
        match &self.preview {
            Some(Ok(p)) if p.fits_now => {
                lines.push(Line::from(format!(
                    "would start now: {} GPU(s) for {} ({}) at ${:.2}/h on {}",
                    p.gpus,
                    super::app::escape(&p.team),
                    p.class,
                    p.dollars_per_hour,
                    super::app::escape(&p.nodes.join(", "))
                )));
                lines.push(Line::from(
                    "(quota and queue order decide at the next scheduling cycle)",
                ));
            }
            Some(Ok(p)) => lines.push(Line::from(format!(
                "would wait: {}",
                super::app::escape(p.reason.as_deref().unwrap_or("no room now"))
            ))),
            Some(Err(e)) => lines.push(Line::styled(
                format!("✗ {}", super::app::escape(e)),
                Style::default().fg(error),
            )),
            None => {}
        }
        if let Some(Ok(p)) = &self.preview {
            if let Some(w) = &p.what_if {
                lines.push(Line::from("submitted now, if the queue stays as it is:"));
                for l in w.lines().into_iter().take(8) {
                    lines.push(Line::from(format!("  {}", super::app::escape(&l))));
                }
            }
        }
        lines
    }
}

/// The console's key names as the editor's input.
fn to_input(key: &str) -> Option<Input> {
    let plain = |key| Input {
        key,
        ctrl: false,
        alt: false,
        shift: false,
    };
    Some(match key {
        "enter" => plain(Key::Enter),
        "backspace" => plain(Key::Backspace),
        "delete" => plain(Key::Delete),
        "tab" => plain(Key::Tab),
        "left" => plain(Key::Left),
        "right" => plain(Key::Right),
        "up" => plain(Key::Up),
        "down" => plain(Key::Down),
        "home" => plain(Key::Home),
        "end" => plain(Key::End),
        k => {
            if let Some(c) = k.strip_prefix("ctrl-").and_then(|c| {
                let mut it = c.chars();
                it.next().filter(|_| it.next().is_none())
            }) {
                return Some(Input {
                    key: Key::Char(c),
                    ctrl: true,
                    alt: false,
                    shift: false,
                });
            }
            let mut it = k.chars();
            let c = it.next()?;
            if it.next().is_some() {
                return None;
            }
            plain(Key::Char(c))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The form starts from the fleet in force (issue 41): its team and GPU model, a CPU job
    /// where it has no GPUs; the demo's template for the demo.
    #[test]
    fn the_template_follows_the_fleet_in_force() {
        use crate::api::{PoolRow, Snapshot, TeamRow};
        let team = |n: &str| TeamRow {
            name: n.into(),
            ..TeamRow::default()
        };
        let pool = |model: &str, gpus: usize, capacity: &str| PoolRow {
            model: model.into(),
            gpus,
            capacity: capacity.into(),
            ..PoolRow::default()
        };
        let cpu = Snapshot {
            teams: vec![team("default")],
            pools: vec![pool("-", 0, "reserved")],
            ..Snapshot::default()
        };
        let t = template_for(&cpu, None);
        assert!(
            t.contains("team: default ") && t.contains("  cpus: 1 "),
            "{t}"
        );
        assert!(
            !t.contains("accelerators") && !t.contains("use_spot"),
            "{t}"
        );
        assert!(crate::spec::parse("t.yaml", t.as_bytes()).is_ok(), "{t}");
        let lab = Snapshot {
            teams: vec![team("lab")],
            pools: vec![pool("-", 0, "reserved"), pool("A100-80GB", 8, "on-demand")],
            ..Snapshot::default()
        };
        let t = template_for(&lab, Some("vision"));
        assert!(
            t.contains("team: vision ") && t.contains("accelerators: A100-80GB:1 "),
            "{t}"
        );
        assert!(crate::spec::parse("t.yaml", t.as_bytes()).is_ok(), "{t}");
        let demo = Snapshot {
            teams: vec![team("ml-research")],
            pools: vec![pool("H100", 8, "reserved"), pool("H100", 8, "spot")],
            ..Snapshot::default()
        };
        assert_eq!(template_for(&demo, None), TEMPLATE);
    }

    #[test]
    fn a_refusal_about_a_field_is_said_at_its_line() {
        let mut f = Form::new("name: x\nteam: nobody\nrun: echo hi\n");
        assert!(f.error.is_none() && f.error_line.is_none(), "{:?}", f.error);
        let refusal = |field: Option<&str>| crate::api::ClientError::Api {
            status: 400,
            code: "invalid".into(),
            error: "unknown team `nobody`".into(),
            field: field.map(str::to_string),
        };
        f.answered(Err(refusal(Some("team"))));
        match &f.preview {
            Some(Err(e)) => assert_eq!(e, "form:2:1: `team`: unknown team `nobody`"),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.error_line, Some(1), "the team's line is marked");
        // Edited, the mark goes with the answer.
        f.key("end");
        assert_eq!(f.key("y"), FormKey::Edited);
        assert!(f.preview.is_none() && f.error_line.is_none());
        // A refusal about no field of the spec is said as it came.
        f.answered(Err(refusal(None)));
        match &f.preview {
            Some(Err(e)) => assert_eq!(e, "unknown team `nobody`"),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.error_line, None);
    }

    #[test]
    fn the_template_parses_and_a_mistake_points_at_its_line() {
        let f = Form::new(TEMPLATE);
        assert!(f.error.is_none(), "{:?}", f.error);
        let mut f = Form::new("name: x\nresources:\n  acelerators: H100:1\n");
        let e = f.error.clone().unwrap();
        assert!(
            e.starts_with("form:3:3:") && e.contains("did you mean `accelerators`"),
            "{e}"
        );
        assert_eq!(f.error_line, Some(2));
        assert_eq!(
            f.key("ctrl-s"),
            FormKey::Ignored,
            "an invalid spec is not submitted"
        );
        // Fix it: go to line 3, column 3, type the missing `c`.
        for k in ["down", "down", "right", "right", "right"] {
            f.key(k);
        }
        assert_eq!(f.key("c"), FormKey::Edited);
        assert!(f.error.is_none(), "{:?}", f.error);
        match f.key("ctrl-s") {
            FormKey::Submit(t) => assert!(t.contains("  accelerators: H100:1")),
            other => panic!("{other:?}"),
        }
        assert_eq!(f.key("esc"), FormKey::Close);
    }
}
