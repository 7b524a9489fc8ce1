//! Where gantry keeps its files. A user's gantry follows the XDG base directory
//! specification; a system daemon — run as root without XDG directories of its own, or with
//! `GANTRY_SYSTEM=1` — uses `/etc/gantry`, `/var/lib/gantry` and `/run/gantry`.
//! `GANTRY_CONFIG`, `GANTRY_DB` and `GANTRY_SOCKET` name one file each, over either.
//! `gantry info` prints every path with the rule that chose it.

use serde::Serialize;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Paths {
    /// `$XDG_CONFIG_HOME/gantry` (default `~/.config/gantry`; `/etc/gantry` for the system):
    /// fleet.toml, themes, keymaps.
    pub config_dir: PathBuf,
    pub fleet_file: PathBuf,
    /// Console settings: theme, keymap, readonly, mouse.
    pub console_file: PathBuf,
    /// `$XDG_DATA_HOME/gantry` (default `~/.local/share/gantry`; `/var/lib/gantry` for the
    /// system): the journal.
    pub data_dir: PathBuf,
    pub journal: PathBuf,
    /// `$XDG_RUNTIME_DIR/gantry` (default: the data directory; `/run/gantry` for the
    /// system): the daemon's socket.
    pub runtime_dir: PathBuf,
    pub socket: PathBuf,
    /// The certificate `gantry daemon --tls` makes for itself: beside the journal.
    pub tls_dir: PathBuf,
    /// `user` or `system`.
    pub scope: &'static str,
    /// Why: the rule that chose the scope, and each path a variable set.
    pub chosen_by: Vec<String>,
}

/// Resolves the paths from an environment lookup and whether the process runs as root
/// (testable without touching the real ones).
pub fn resolve(env: impl Fn(&str) -> Option<String>, root: bool) -> Paths {
    let set = |var: &str| env(var).filter(|v| !v.is_empty());
    let absolute = |var: &str| set(var).map(PathBuf::from).filter(|p| p.is_absolute());
    let own_xdg = absolute("XDG_CONFIG_HOME").is_some() || absolute("XDG_DATA_HOME").is_some();
    let (system, why) = if set("GANTRY_SYSTEM").is_some_and(|v| v != "0") {
        (true, "system paths: GANTRY_SYSTEM is set".to_string())
    } else if root && !own_xdg {
        (
            true,
            "system paths: running as root without XDG_CONFIG_HOME or XDG_DATA_HOME".to_string(),
        )
    } else {
        (
            false,
            "user paths: the XDG base directories (GANTRY_SYSTEM=1 for the system's)".to_string(),
        )
    };
    let (config_dir, data_dir, runtime_dir) = if system {
        (
            PathBuf::from("/etc/gantry"),
            PathBuf::from("/var/lib/gantry"),
            PathBuf::from("/run/gantry"),
        )
    } else {
        let home = set("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        // XDG says relative values are invalid and must be ignored.
        let dir = |var: &str, fallback: &Path| {
            absolute(var)
                .unwrap_or_else(|| fallback.to_path_buf())
                .join("gantry")
        };
        let config_dir = dir("XDG_CONFIG_HOME", &home.join(".config"));
        let data_dir = dir("XDG_DATA_HOME", &home.join(".local/share"));
        let runtime_dir =
            absolute("XDG_RUNTIME_DIR").map_or_else(|| data_dir.clone(), |p| p.join("gantry"));
        (config_dir, data_dir, runtime_dir)
    };
    let mut p = Paths {
        fleet_file: config_dir.join("fleet.toml"),
        console_file: config_dir.join("console.toml"),
        journal: data_dir.join("state.db"),
        socket: runtime_dir.join("gantry.sock"),
        tls_dir: PathBuf::new(),
        config_dir,
        data_dir,
        runtime_dir,
        scope: if system { "system" } else { "user" },
        chosen_by: vec![why],
    };
    for (var, slot) in [
        ("GANTRY_CONFIG", &mut p.fleet_file),
        ("GANTRY_DB", &mut p.journal),
        ("GANTRY_SOCKET", &mut p.socket),
    ] {
        if let Some(v) = set(var) {
            *slot = PathBuf::from(&v);
            p.chosen_by.push(format!("{var}={v}"));
        }
    }
    p.tls_dir = tls_dir(&p.journal);
    p
}

/// Where a daemon keeps the TLS certificate it makes for itself: `tls/` beside its journal.
pub fn tls_dir(journal: &Path) -> PathBuf {
    journal
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .join("tls")
}

/// A fleet file in the user's own config directory that is *not* read because system paths
/// are in force (root without XDG variables): the trap of writing `~/.config/gantry/fleet.toml`
/// as root and getting the built-in simulated fleet. Said by `gantry info` and the daemon.
pub fn unread_user_fleet(p: &Paths) -> Option<PathBuf> {
    if p.scope != "system" {
        return None;
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    let user = PathBuf::from(home).join(".config/gantry/fleet.toml");
    (user != p.fleet_file && user.exists()).then_some(user)
}

/// What `unread_user_fleet` found, in words that say what to do.
pub fn unread_warning(p: &Paths, unread: &Path) -> String {
    format!(
        "{} exists but is not read: {}; the fleet file is {} — move it there, or set GANTRY_CONFIG={} (or XDG_CONFIG_HOME) for user paths",
        unread.display(),
        p.chosen_by.first().map_or("system paths are in force", String::as_str),
        p.fleet_file.display(),
        unread.display()
    )
}

pub fn from_env() -> Paths {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    resolve(|k| std::env::var(k).ok(), root)
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
        let p = resolve(env, false);
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
        let p = resolve(|k| (k == "HOME").then(|| "/home/a".to_string()), false);
        assert_eq!(
            p.socket,
            PathBuf::from("/home/a/.local/share/gantry/gantry.sock")
        );
    }

    #[test]
    fn root_without_xdg_directories_or_gantry_system_gets_system_paths() {
        let home = |k: &str| (k == "HOME").then(|| "/root".to_string());
        let p = resolve(home, true);
        assert_eq!(p.scope, "system");
        assert_eq!(p.fleet_file, PathBuf::from("/etc/gantry/fleet.toml"));
        assert_eq!(p.journal, PathBuf::from("/var/lib/gantry/state.db"));
        assert_eq!(p.socket, PathBuf::from("/run/gantry/gantry.sock"));
        assert!(p.chosen_by[0].contains("running as root"));
        // Root with its own XDG directories keeps them (a test, a container).
        let xdg = |k: &str| (k == "XDG_DATA_HOME").then(|| "/tmp/d".to_string());
        assert_eq!(resolve(xdg, true).scope, "user");
        // Anyone may ask for the system's paths.
        let sys = |k: &str| (k == "GANTRY_SYSTEM").then(|| "1".to_string());
        assert_eq!(resolve(sys, false).scope, "system");
    }

    #[test]
    fn gantry_variables_name_one_file_each_and_say_so() {
        let env = |k: &str| match k {
            "HOME" => Some("/home/a".to_string()),
            "GANTRY_DB" => Some("/srv/gantry/state.db".to_string()),
            "GANTRY_SOCKET" => Some("/run/g.sock".to_string()),
            _ => None,
        };
        let p = resolve(env, false);
        assert_eq!(p.journal, PathBuf::from("/srv/gantry/state.db"));
        assert_eq!(p.socket, PathBuf::from("/run/g.sock"));
        assert_eq!(
            p.fleet_file,
            PathBuf::from("/home/a/.config/gantry/fleet.toml")
        );
        assert_eq!(
            p.chosen_by[1..],
            [
                "GANTRY_DB=/srv/gantry/state.db",
                "GANTRY_SOCKET=/run/g.sock"
            ]
        );
    }
}
