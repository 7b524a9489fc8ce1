//! Scratch directories for tests: `TMPDIR/gantry-test-PID-WHAT`, made empty. The first one a
//! test process makes removes those of test processes that have exited, so a machine that runs
//! the tests again and again keeps only the last run's (a failed test's files stay for a look
//! until the next run) instead of every run's — hundreds of MiB of journals, logs and Slurm
//! clusters after a few dozen runs.

use std::path::{Path, PathBuf};
use std::sync::Once;

const PREFIX: &str = "gantry-test-";

/// An empty directory for `what` (unique within this test process: a test's name).
pub fn scratch(what: &str) -> PathBuf {
    static SWEPT: Once = Once::new();
    SWEPT.call_once(|| sweep(&std::env::temp_dir()));
    let dir = path(what);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    dir
}

/// Where `scratch(what)` makes its directory (to open again what a test left there).
pub fn path(what: &str) -> PathBuf {
    std::env::temp_dir().join(format!("{PREFIX}{}-{what}", std::process::id()))
}

/// Removes the scratch directories in `tmp` of processes that no longer run.
fn sweep(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dead_processs_scratch_goes_and_a_live_ones_stays() {
        let tmp = scratch("sweep");
        // No process has a pid this large (the kernel's limit is 2^22).
        let dead = tmp.join(format!("{PREFIX}4294967295-x"));
        let live = tmp.join(format!("{PREFIX}{}-x", std::process::id()));
        let other = tmp.join("gantry-something-else");
        for d in [&dead, &live, &other] {
            std::fs::create_dir_all(d.join("inside")).unwrap();
        }
        sweep(&tmp);
        assert!(!dead.exists());
        assert!(live.join("inside").exists());
        assert!(other.exists());
        let again = scratch("sweep-2");
        assert!(again.is_dir() && std::fs::read_dir(&again).unwrap().next().is_none());
    }
}
