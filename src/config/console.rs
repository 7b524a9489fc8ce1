//! `console.toml` in the config dir: the console's defaults. Flags and environment variables
//! win over it, except `readonly`, which any of the three turns on (an operator can make a
//! shared account's console read-only in its file).

use serde::{Deserialize, Serialize};

/// The documented default, printed by `gantry info --print-console`.
pub const DEFAULT_CONSOLE: &str = "\
# gantry console settings ($XDG_CONFIG_HOME/gantry/console.toml). Every key is optional;
# --theme/--keymap and GANTRY_THEME/GANTRY_KEYMAP override this file.
theme = \"dark\"          # dark, light, 16color, high-contrast (or your themes/NAME.toml)
keymap = \"default\"      # default, vim (or your keymaps/NAME.toml)
readonly = false        # true: no dangerous actions, whatever the flags say
mouse = false           # true: start with mouse capture on (m toggles it)

# Daemons the console can switch between (`:ctx` lists them, `:ctx NAME` switches; plain
# `gantry` opens the one named `context`, else the default socket):
# context = \"lab\"
# [[contexts]]
# name = \"lab\"
# connect = \"/run/gantry/gantry.sock\"
# [[contexts]]
# name = \"prod\"
# connect = \"https://gantry.prod.example:7450\"
# token_file = \"~/.config/gantry/prod.token\"   # a token from `gantry token create`
# tls_fingerprint = \"sha256:…\"                  # the daemon's certificate, as it prints it
";

/// A daemon the console can switch to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Context {
    pub name: String,
    /// A Unix socket path, `http://HOST:PORT` or `https://HOST:PORT`, as `--connect` takes.
    pub connect: String,
    /// A file holding its bearer token (TCP daemons).
    pub token_file: Option<String>,
    /// The SHA-256 of an https:// daemon's own certificate, as `--tls-fingerprint` takes.
    pub tls_fingerprint: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConsoleConfig {
    pub theme: Option<String>,
    pub keymap: Option<String>,
    #[serde(default)]
    pub readonly: bool,
    #[serde(default)]
    pub mouse: bool,
    /// The context plain `gantry` opens.
    pub context: Option<String>,
    #[serde(default)]
    pub contexts: Vec<Context>,
}

impl ConsoleConfig {
    /// The context named `name`, or what the file has.
    pub fn context(&self, name: &str) -> Result<&Context, String> {
        self.contexts.iter().find(|c| c.name == name).ok_or_else(|| {
            let names: Vec<&str> = self.contexts.iter().map(|c| c.name.as_str()).collect();
            if names.is_empty() {
                format!("no context `{name}`: console.toml lists none ([[contexts]] name, connect, token_file, tls_fingerprint)")
            } else {
                format!("no context `{name}`; contexts: {}", names.join(", "))
            }
        })
    }
}

/// Parses the file; an error names the file, line and column, and the allowed keys.
pub fn parse(file: &str, text: &str) -> Result<ConsoleConfig, String> {
    toml::from_str(text).map_err(|e| {
        let (line, col) = e.span().map_or((1, 1), |s| {
            let before = &text[..s.start.min(text.len())];
            (
                before.matches('\n').count() + 1,
                before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1,
            )
        });
        format!(
            "{file}:{line}:{col}: {} (keys: theme, keymap, readonly, mouse, context, [[contexts]] name, connect, token_file, tls_fingerprint)",
            e.message()
        )
    })
}

/// The file at `path`, or the defaults when there is none.
pub fn load(path: &std::path::Path) -> Result<ConsoleConfig, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => parse(&path.display().to_string(), &text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ConsoleConfig::default()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contexts_name_daemons_and_an_unknown_one_says_which_exist() {
        let c = parse(
            "console.toml",
            "context = \"lab\"\n[[contexts]]\nname = \"lab\"\nconnect = \"/run/gantry/gantry.sock\"\n[[contexts]]\nname = \"prod\"\nconnect = \"http://gantry.prod:7450\"\ntoken_file = \"~/.config/gantry/prod.token\"\n",
        )
        .unwrap();
        assert_eq!(c.context.as_deref(), Some("lab"));
        assert_eq!(
            c.context("prod").unwrap().token_file.as_deref(),
            Some("~/.config/gantry/prod.token")
        );
        assert_eq!(
            c.context("x").unwrap_err(),
            "no context `x`; contexts: lab, prod"
        );
        let e = parse(
            "console.toml",
            "[[contexts]]\nname = \"a\"\nconect = \"x\"\n",
        )
        .unwrap_err();
        assert!(
            e.starts_with("console.toml:3:1:") && e.contains("conect"),
            "{e}"
        );
    }

    #[test]
    fn the_default_parses_and_mistakes_are_placed() {
        let c = parse("console.toml", DEFAULT_CONSOLE).unwrap();
        assert_eq!(c.theme.as_deref(), Some("dark"));
        assert!(!c.readonly && !c.mouse);
        let e = parse("console.toml", "readonly = true\nmuose = true\n").unwrap_err();
        assert!(
            e.starts_with("console.toml:2:1: unknown field `muose`"),
            "{e}"
        );
        let e = parse("console.toml", "readonly = \"yes\"\n").unwrap_err();
        assert!(e.starts_with("console.toml:1:12:"), "{e}");
        assert_eq!(
            load(std::path::Path::new("/nonexistent/console.toml")).unwrap(),
            ConsoleConfig::default()
        );
    }
}
