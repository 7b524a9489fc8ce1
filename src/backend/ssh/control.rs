//! Where a pool's ssh master connections live, and their end. openssh starts each master with
//! `ControlPersist` (it outlives the `ssh` that made it): a daemon that stopped, a pool a reload
//! replaced, a host dropped while it had not said hello, or a daemon killed outright would
//! leave masters running for ever. So each pool keeps its masters' sockets in a directory of
//! its own, named after the daemon's pid; when the pool goes, every master there is told to
//! exit (and any process still naming the directory is ended); when a pool starts, the
//! directories of daemons that no longer run are swept the same way.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

const PREFIX: &str = "gantry-ssh-";

/// A pool's control directory: made (0700) now, swept when dropped.
pub struct ControlDir {
    pub path: PathBuf,
}

impl ControlDir {
    pub fn new() -> std::io::Result<ControlDir> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        sweep_stale(&std::env::temp_dir());
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("{PREFIX}{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(true)
            .create(&path)?;
        Ok(ControlDir { path })
    }
}

impl Drop for ControlDir {
    fn drop(&mut self) {
        sweep(&self.path);
    }
}

/// The directories of daemons that no longer run, swept.
fn sweep_stale(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix(PREFIX)
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        let mine = e.metadata().is_ok_and(|m| {
            use std::os::unix::fs::MetadataExt;
            m.uid() == unsafe { libc::geteuid() }
        });
        if mine && !Path::new(&format!("/proc/{pid}")).exists() {
            sweep(&e.path());
        }
    }
}

/// Every master under `dir` told to exit, any process of this user still naming `dir` on its
/// command line ended, and `dir` removed.
pub fn sweep(dir: &Path) {
    let sockets = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("master"))
        .filter(|p| p.exists());
    for socket in sockets {
        let _ = std::process::Command::new("ssh")
            .arg("-S")
            .arg(&socket)
            .args(["-O", "exit", "gantry-master"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status();
    }
    for pid in processes_naming(dir) {
        // SAFETY: kill(2) on a process of this user whose command line names this pool's own
        // control directory: one of its ssh masters or clients.
        unsafe {
            libc::kill(pid as i32, libc::SIGTERM);
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// This user's processes whose command line names `dir`.
fn processes_naming(dir: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    // With its slash: `…-0/` is not a prefix of another pool's `…-01/`.
    let needle = format!("{}/", dir.to_string_lossy());
    let me = unsafe { libc::geteuid() };
    let Ok(proc) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    proc.flatten()
        .filter_map(|e| {
            let pid = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            if e.metadata().ok()?.uid() != me || pid == std::process::id() {
                return None;
            }
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            cmd.contains(&needle).then_some(pid)
        })
        .collect()
}
