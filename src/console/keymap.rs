//! Keymaps: TOML bindings of keys to actions (`keymaps/*.toml`, compiled in), layered with the
//! user's file of the same name; the help screen is generated from the active one.

use serde::Deserialize;
use std::path::Path;

const DEFAULT: &str = include_str!("../../keymaps/default.toml");
const VIM: &str = include_str!("../../keymaps/vim.toml");

pub const KEYMAPS: [&str; 2] = ["default", "vim"];

/// What a key does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    View(crate::console::app::View),
    NextView,
    PrevView,
    Down,
    Up,
    First,
    Last,
    /// A screenful down or up (PageDown/PageUp).
    PageDown,
    PageUp,
    /// Half a screen down or up (ctrl-d/ctrl-u).
    HalfDown,
    HalfUp,
    Help,
    Quit,
    /// Opens the `/` prompt: filter the view's rows.
    Filter,
    /// Opens the `:` prompt: a command (`:jobs`, `:gpus h100`, `:team NAME`, `:reclaim`, …).
    Command,
    /// Opens the `:` prompt at `prio ` for the selected job (absent in read-only mode).
    Reprioritize,
    /// Marks or unmarks the selected job for a bulk action (absent in read-only mode).
    Mark,
    /// Opens the selected job's detail (spec, placement, cost, why it waits, events).
    Open,
    /// Opens the submit form (absent in read-only mode).
    Submit,
    /// Turns mouse capture on or off.
    Mouse,
    /// Reverses the view's order.
    Sort,
    /// Orders the view by the next column (`>`).
    SortNext,
    /// Orders the view by the previous column (`<`).
    SortPrev,
    /// A change to the selected job (asks for confirmation; absent in read-only mode).
    Job(crate::api::JobAction),
    /// A shell in the selected running job: the screen is suspended until it exits (absent
    /// in read-only mode).
    Shell,
}

impl Action {
    /// Whether the action changes something (hidden and disabled with --readonly).
    pub fn is_dangerous(self) -> bool {
        matches!(
            self,
            Action::Job(_) | Action::Reprioritize | Action::Mark | Action::Submit | Action::Shell
        )
    }
}

const KEYS: [&str; 12] = [
    "tab",
    "up",
    "down",
    "left",
    "right",
    "home",
    "end",
    "pageup",
    "pagedown",
    "esc",
    "enter",
    "backspace",
];

/// A key a binding may name: one character, `ctrl-` and a letter, or a named key.
fn is_key(on: &str) -> bool {
    let ctrl = on
        .strip_prefix("ctrl-")
        .is_some_and(|c| c.len() == 1 && c.chars().all(|c| c.is_ascii_lowercase()));
    on.chars().count() == 1 || ctrl || KEYS.contains(&on)
}

/// How the help names a key (a space is invisible).
pub fn key_label(key: &str) -> &str {
    match key {
        " " => "space",
        k => k,
    }
}

fn parse_action(run: &str) -> Option<Action> {
    let words: Vec<&str> = run.split_whitespace().collect();
    Some(match words.as_slice() {
        ["view", "next"] => Action::NextView,
        ["view", "prev"] => Action::PrevView,
        ["view", name] => Action::View(crate::console::app::View::named(name)?),
        ["down"] => Action::Down,
        ["up"] => Action::Up,
        ["first"] => Action::First,
        ["last"] => Action::Last,
        ["page", "down"] => Action::PageDown,
        ["page", "up"] => Action::PageUp,
        ["half", "down"] => Action::HalfDown,
        ["half", "up"] => Action::HalfUp,
        ["help"] => Action::Help,
        ["quit"] => Action::Quit,
        ["filter"] => Action::Filter,
        ["command"] => Action::Command,
        ["reprioritize"] => Action::Reprioritize,
        ["mark"] => Action::Mark,
        ["open"] => Action::Open,
        ["submit"] => Action::Submit,
        ["mouse"] => Action::Mouse,
        ["sort"] | ["sort", "reverse"] => Action::Sort,
        ["sort", "next"] => Action::SortNext,
        ["sort", "prev"] => Action::SortPrev,
        ["job", what] => Action::Job(crate::api::JobAction::parse(what)?),
        ["shell"] => Action::Shell,
        _ => return None,
    })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    bind: Vec<Bind>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Bind {
    on: String,
    run: String,
    #[serde(default)]
    desc: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Binding {
    pub key: String,
    pub action: Action,
    pub desc: String,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Keymap {
    /// Earlier bindings win.
    pub bindings: Vec<Binding>,
}

fn parse(name: &str, text: &str) -> Result<Vec<Binding>, String> {
    let file: File = toml::from_str(text).map_err(|e| {
        let line = e.span().map_or(1, |s| {
            text[..s.start.min(text.len())].matches('\n').count() + 1
        });
        format!("{name}:{line}: {}", e.message())
    })?;
    file.bind
        .into_iter()
        .map(|b| {
            if !is_key(&b.on) {
                return Err(format!("{name}: key `{}` is not a key; use one character, ctrl-LETTER or one of {}", b.on, KEYS.join(", ")));
            }
            let action = parse_action(&b.run).ok_or_else(|| {
                format!("{name}: `{}` is not an action; use view overview|jobs|fleet|teams|events|services, view next, view prev, down, up, first, last, page down|up, half down|up, help, quit, filter, command, reprioritize, mark, open, submit, mouse, sort next|prev|reverse, job cancel|hold|release|preempt, shell", b.run)
            })?;
            Ok(Binding { key: b.on, action, desc: b.desc })
        })
        .collect()
}

impl Keymap {
    /// A shipped keymap (vim = default + vim motions), with the user's bindings of the same
    /// name in `<config_dir>/keymaps/` taking precedence.
    pub fn load(name: &str, config_dir: &Path) -> Result<Keymap, String> {
        let mut bindings = match name {
            "default" => parse("keymaps/default.toml", DEFAULT)?,
            "vim" => {
                let mut b = parse("keymaps/vim.toml", VIM)?;
                b.extend(parse("keymaps/default.toml", DEFAULT)?);
                b
            }
            _ => {
                return Err(format!(
                    "unknown keymap `{name}`; shipped: {}",
                    KEYMAPS.join(", ")
                ))
            }
        };
        let user = config_dir.join("keymaps").join(format!("{name}.toml"));
        if let Ok(text) = std::fs::read_to_string(&user) {
            let mut mine = parse(&user.display().to_string(), &text)?;
            mine.append(&mut bindings);
            bindings = mine;
        }
        Ok(Keymap { bindings })
    }

    pub fn action(&self, key: &str) -> Option<Action> {
        self.bindings
            .iter()
            .find(|b| b.key == key)
            .map(|b| b.action)
    }

    /// The bindings in force (a key bound twice shows once, as it acts), for the help screen.
    /// (key, description) for the help screen; `readonly` leaves out what changes things.
    pub fn help(&self, readonly: bool) -> Vec<(&str, &str)> {
        let mut seen: Vec<&str> = Vec::new();
        let mut out = Vec::new();
        for b in &self.bindings {
            if !seen.contains(&b.key.as_str()) {
                seen.push(&b.key);
                if readonly && b.action.is_dangerous() {
                    continue;
                }
                out.push((b.key.as_str(), b.desc.as_str()));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shipped_keymaps_load() {
        let d = Keymap::load("default", Path::new("/nonexistent")).unwrap();
        assert_eq!(
            d.action("2"),
            Some(Action::View(crate::console::app::View::Jobs))
        );
        assert_eq!(d.action("q"), Some(Action::Quit));
        assert_eq!(d.action("h"), None);
        let v = Keymap::load("vim", Path::new("/nonexistent")).unwrap();
        assert_eq!(v.action("h"), Some(Action::PrevView));
        assert_eq!(v.action("j"), Some(Action::Down));
        assert_eq!(v.action("ctrl-d"), Some(Action::HalfDown));
        assert_eq!(v.action("ctrl-b"), Some(Action::PageUp));
        assert_eq!(d.action("pagedown"), Some(Action::PageDown));
        assert_eq!(d.action("ctrl-u"), Some(Action::HalfUp));
        assert!(Keymap::load("emacs", Path::new("/x"))
            .unwrap_err()
            .contains("shipped: default, vim"));
    }

    #[test]
    fn a_user_file_rebinds_one_key_without_copying_the_rest() {
        let dir = gantry_testkit::scratch::scratch("keymap");
        std::fs::create_dir_all(dir.join("keymaps")).unwrap();
        std::fs::write(dir.join("keymaps/default.toml"), "[[bind]]\non = \"q\"\nrun = \"help\"\ndesc = \"no accidental quit\"\n\n[[bind]]\non = \"x\"\nrun = \"quit\"\ndesc = \"quit\"\n").unwrap();
        let k = Keymap::load("default", &dir).unwrap();
        assert_eq!(k.action("q"), Some(Action::Help));
        assert_eq!(k.action("x"), Some(Action::Quit));
        assert_eq!(
            k.action("2"),
            Some(Action::View(crate::console::app::View::Jobs)),
            "the rest is unchanged"
        );
        assert_eq!(
            k.help(false).iter().filter(|(key, _)| *key == "q").count(),
            1
        );
        std::fs::write(
            dir.join("keymaps/default.toml"),
            "[[bind]]\non = \"q\"\nrun = \"explode\"\n",
        )
        .unwrap();
        assert!(Keymap::load("default", &dir)
            .unwrap_err()
            .contains("`explode` is not an action"));
        std::fs::write(
            dir.join("keymaps/default.toml"),
            "[[bind]]\non = \"meta-q\"\nrun = \"quit\"\n",
        )
        .unwrap();
        assert!(Keymap::load("default", &dir)
            .unwrap_err()
            .contains("key `meta-q` is not a key"));
        std::fs::write(
            dir.join("keymaps/default.toml"),
            "[[bind]]\non = \"ctrl-q\"\nrun = \"quit\"\n",
        )
        .unwrap();
        assert_eq!(
            Keymap::load("default", &dir).unwrap().action("ctrl-q"),
            Some(Action::Quit)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
