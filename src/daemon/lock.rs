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
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        if !locked {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            let holder = holder.trim();
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
        let dir = std::env::temp_dir().join(format!("gantry-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
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
}
