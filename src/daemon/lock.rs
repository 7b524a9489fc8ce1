//! One daemon per journal: an exclusive `flock` on `JOURNAL.lock` beside the journal, held for
//! the daemon's life. The kernel drops it when the process dies (kill -9 included), so there is
//! never a stale lock to clean up; the holder writes its pid into the file so that a second
//! daemon can say who holds it.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

/// The held lock; dropping it (or exiting) releases it.
#[derive(Debug)]
pub struct StateLock {
    _file: File,
    pub path: PathBuf,
}

/// The lock file of the journal at `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".lock");
    db.with_file_name(name)
}

impl StateLock {
    /// Takes the journal's lock, or says which process holds it.
    pub fn acquire(db: &Path) -> Result<StateLock, String> {
        let path = lock_path(db);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| {
                format!(
                    "{}: cannot open the journal's lock file: {e}",
                    path.display()
                )
            })?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        let try_lock =
            |file: &File| unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        let holder_of = |file: &mut File| {
            let mut holder = String::new();
            let _ = file.seek(SeekFrom::Start(0));
            let _ = file.read_to_string(&mut holder);
            holder.trim().to_string()
        };
        let mut locked = try_lock(&file);
        // This process let the lock go a moment ago (a state reopened): a child forked while it
        // was held shares it until that child's exec closes it. Such a window is short; wait it
        // out rather than refuse ourselves.
        let ours = std::process::id().to_string();
        let t0 = std::time::Instant::now();
        while !locked
            && holder_of(&mut file) == ours
            && t0.elapsed() < std::time::Duration::from_secs(2)
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            locked = try_lock(&file);
        }
        if !locked {
            let holder = holder_of(&mut file);
            let holder = holder.as_str();
            let who = if holder.is_empty() {
                "another process".to_string()
            } else {
                format!("another gantry daemon (pid {holder})")
            };
            return Err(format!(
                "{}: {who} already uses this journal; two daemons on one journal would book every node twice. Stop it first (kill {holder}), or give this one its own --db",
                db.display(),
            ));
        }
        let _ = file.set_len(0);
        let _ = file.seek(SeekFrom::Start(0));
        let _ = write!(file, "{}", std::process::id());
        let _ = file.flush();
        Ok(StateLock { _file: file, path })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let dir = gantry_testkit::scratch::scratch("lock");
        let db = dir.join("state.db");
        let first = StateLock::acquire(&db).unwrap();
        // flock locks belong to the open file description: a second open in the same process
        // conflicts just as another process would.
        let err = StateLock::acquire(&db).unwrap_err();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        StateLock::acquire(&db).expect("released on drop");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A child forked while the lock was held shares it until it execs or exits: the lock let
    /// go and taken again at once (a state reopened) waits that out instead of refusing this
    /// process itself (seen as a flaky reopen while an SSH pool spawned `ssh` processes).
    #[test]
    fn a_lock_a_forked_child_still_shares_is_taken_once_the_child_lets_it_go() {
        let dir = gantry_testkit::scratch::scratch("lock-fork");
        let db = dir.join("state.db");
        let first = StateLock::acquire(&db).unwrap();
        // SAFETY: the child only sleeps and exits (no allocation, no locks): async-signal-safe.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let t = libc::timespec {
                tv_sec: 0,
                tv_nsec: 300_000_000,
            };
            unsafe {
                libc::nanosleep(&t, std::ptr::null_mut());
                libc::_exit(0);
            }
        }
        assert!(child > 0, "fork");
        drop(first);
        let again = StateLock::acquire(&db);
        let mut status = 0;
        // SAFETY: waiting for the child forked above.
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(again.is_ok(), "{again:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
