//! Where gantry keeps its files, following the XDG base directory specification.

use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Paths {
    /// `$XDG_CONFIG_HOME/gantry` (default `~/.config/gantry`): fleet.toml, themes, keymaps.
    pub config_dir: PathBuf,
    pub fleet_file: PathBuf,
    /// Console settings: theme, keymap, readonly, mouse.
    pub console_file: PathBuf,
    /// `$XDG_DATA_HOME/gantry` (default `~/.local/share/gantry`): the journal.
    pub data_dir: PathBuf,
    pub journal: PathBuf,
    /// `$XDG_RUNTIME_DIR/gantry` (default: the data directory): the daemon's socket.
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
}

/// Resolves the paths from an environment lookup (testable without touching the real one).
pub fn resolve(env: impl Fn(&str) -> Option<String>) -> Paths {
    let home = env("HOME")
        .filter(|h| !h.is_empty())
        .map_or_else(|| PathBuf::from("."), PathBuf::from);
    // XDG says relative values are invalid and must be ignored.
    let dir = |var: &str, fallback: &Path| {
        env(var)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
            .unwrap_or_else(|| fallback.to_path_buf())
            .join("gantry")
    };
    let config_dir = dir("XDG_CONFIG_HOME", &home.join(".config"));
    let data_dir = dir("XDG_DATA_HOME", &home.join(".local/share"));
    let runtime_dir = env("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map_or_else(|| data_dir.clone(), |p| p.join("gantry"));
    Paths {
        fleet_file: config_dir.join("fleet.toml"),
        console_file: config_dir.join("console.toml"),
        journal: data_dir.join("state.db"),
        socket: runtime_dir.join("gantry.sock"),
        config_dir,
        data_dir,
        runtime_dir,
    }
}

pub fn from_env() -> Paths {
    resolve(|k| std::env::var(k).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xdg_variables_win_and_relative_ones_are_ignored() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/sre".to_string()),
            "XDG_CONFIG_HOME" => Some("/etc/xdg-user".to_string()),
            "XDG_DATA_HOME" => Some("relative/ignored".to_string()),
            "XDG_RUNTIME_DIR" => Some("/run/user/1000".to_string()),
            _ => None,
        };
        let p = resolve(env);
        assert_eq!(
            p.fleet_file,
            PathBuf::from("/etc/xdg-user/gantry/fleet.toml")
        );
        assert_eq!(
            p.journal,
            PathBuf::from("/home/sre/.local/share/gantry/state.db")
        );
        assert_eq!(p.socket, PathBuf::from("/run/user/1000/gantry/gantry.sock"));
    }

    #[test]
    fn without_a_runtime_dir_the_socket_lives_with_the_data() {
        let p = resolve(|k| (k == "HOME").then(|| "/home/a".to_string()));
        assert_eq!(
            p.socket,
            PathBuf::from("/home/a/.local/share/gantry/gantry.sock")
        );
    }
}
