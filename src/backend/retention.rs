//! How long a host keeps the logs of jobs that ended (`[logs]` in the fleet file): an age
//! after which an ended job's logs are removed, a size each ended job's logs are cut to (their
//! last part kept), and a size all of them on one host are kept under (oldest removed first).
//! Each agent sweeps its own host's log directory — this host's and every SSH or cloud host's
//! — and never touches a job it still runs (one with a run file). Where it removed a job's
//! logs it leaves `job-ID.gone` saying why, so a later `gantry logs` says "removed after 30
//! days" rather than showing nothing.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

pub use crate::config::fleet::Retention;

/// How often an agent sweeps (sooner when `keep_for` is shorter).
const SWEEP_EVERY: Duration = Duration::from_secs(600);

const MIB: u64 = 1 << 20;

impl Retention {
    pub fn is_none(&self) -> bool {
        *self == Retention::default()
    }

    /// The agent's flags that carry it to a remote host.
    pub fn args(&self) -> Vec<String> {
        let mut a = Vec::new();
        if let Some(s) = self.keep_for_s {
            a.extend(["--keep-logs".to_string(), format!("{s}s")]);
        }
        if let Some(b) = self.max_job_bytes {
            a.extend(["--max-job-logs-mb".to_string(), (b / MIB).to_string()]);
        }
        if let Some(b) = self.max_total_bytes {
            a.extend(["--max-logs-mb".to_string(), (b / MIB).to_string()]);
        }
        a
    }

    /// How long between sweeps.
    pub fn every(&self) -> Duration {
        let half = self
            .keep_for_s
            .map_or(SWEEP_EVERY, |s| Duration::from_secs_f64((s / 2.0).max(1.0)));
        half.min(SWEEP_EVERY)
    }

    /// Sweeps `logs` once, sparing every job with a run file in `runs`; what it did, a line
    /// per job.
    pub fn sweep(&self, logs: &Path, runs: &Path, now: SystemTime) -> Vec<String> {
        let mut said = Vec::new();
        if self.is_none() {
            return said;
        }
        let live = |job: i64| runs.join(format!("job-{job}.json")).exists();
        let mut ended: Vec<JobLogs> = job_logs(logs)
            .into_iter()
            .filter(|j| !live(j.job))
            .collect();
        if let Some(keep) = self.keep_for_s {
            ended.retain(|j| {
                let age = now.duration_since(j.newest).map_or(0.0, |d| d.as_secs_f64());
                if age <= keep {
                    return true;
                }
                let why = format!(
                    "removed {} after the job's last write, by the log retention ([logs] keep_for = {})",
                    ago(age),
                    ago(keep)
                );
                said.push(j.remove(logs, &why));
                false
            });
        }
        if let Some(max) = self.max_job_bytes {
            for j in ended.iter_mut().filter(|j| j.bytes() > max + 4096) {
                said.push(j.cut_to(max));
            }
        }
        if let Some(max) = self.max_total_bytes {
            ended.sort_by_key(|j| j.newest);
            let mut total: u64 = ended.iter().map(JobLogs::bytes).sum();
            for j in &ended {
                if total <= max {
                    break;
                }
                total -= j.bytes();
                let why = format!(
                    "removed to keep this host's logs of ended jobs under {} MB ([logs] max_total_mb), oldest first",
                    max / MIB
                );
                said.push(j.remove(logs, &why));
            }
        }
        said
    }
}

/// Why `job`'s logs in `logs` were removed, if the retention removed them.
pub fn gone(logs: &Path, job: i64) -> Option<String> {
    std::fs::read_to_string(logs.join(format!("job-{job}.gone")))
        .ok()
        .map(|s| s.trim().to_string())
}

/// One job's files in a log directory (`job-ID.out`, `.err`, `.exit`).
struct JobLogs {
    job: i64,
    files: Vec<(PathBuf, u64)>,
    newest: SystemTime,
}

impl JobLogs {
    fn bytes(&self) -> u64 {
        self.files.iter().map(|f| f.1).sum()
    }

    /// Removes its files and leaves why.
    fn remove(&self, logs: &Path, why: &str) -> String {
        for (f, _) in &self.files {
            let _ = std::fs::remove_file(f);
        }
        let _ = std::fs::write(
            logs.join(format!("job-{}.gone", self.job)),
            format!("{why}\n"),
        );
        format!("job {}: {} bytes of logs {why}", self.job, self.bytes())
    }

    /// Keeps the last part of each stream, `max` in all, each from a line's start, after a
    /// line saying what was cut.
    fn cut_to(&mut self, max: u64) -> String {
        let total = self.bytes().max(1);
        let before = self.bytes();
        for (f, size) in &mut self.files {
            if f.extension().is_some_and(|e| e == "exit") {
                continue;
            }
            let keep = max * *size / total;
            if let Some(n) = cut(f, *size, keep, max) {
                *size = n;
            }
        }
        format!(
            "job {}: logs cut from {before} to {} bytes (their last part kept; [logs] max_job_mb = {})",
            self.job,
            self.bytes(),
            max / MIB
        )
    }
}

/// `f` (of `size` bytes) rewritten as its last `keep` bytes from a line's start, after a note;
/// its new size.
fn cut(f: &Path, size: u64, keep: u64, max: u64) -> Option<u64> {
    use std::io::{Read, Seek, SeekFrom};
    if size <= keep {
        return None;
    }
    let mut file = std::fs::File::open(f).ok()?;
    file.seek(SeekFrom::Start(size - keep)).ok()?;
    let mut rest = Vec::new();
    file.take(keep).read_to_end(&mut rest).ok()?;
    let from = rest.iter().position(|b| *b == b'\n').map_or(0, |i| i + 1);
    let removed = size - (rest.len() - from) as u64;
    let mut text = format!(
        "[gantry: the first {removed} bytes of this log were removed to keep the job's logs under {} MB ([logs] max_job_mb)]\n",
        max / MIB
    )
    .into_bytes();
    text.extend_from_slice(&rest[from..]);
    let tmp = f.with_extension("cut");
    std::fs::write(&tmp, &text).ok()?;
    std::fs::rename(&tmp, f).ok()?;
    Some(text.len() as u64)
}

/// Every job's log files in `dir`.
fn job_logs(dir: &Path) -> Vec<JobLogs> {
    let mut by_job: std::collections::BTreeMap<i64, JobLogs> = Default::default();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some((id, ext)) = name
            .strip_prefix("job-")
            .and_then(|rest| rest.split_once('.'))
        else {
            continue;
        };
        let (Ok(job), true) = (id.parse::<i64>(), matches!(ext, "out" | "err" | "exit")) else {
            continue;
        };
        let Ok(meta) = e.metadata() else { continue };
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        let j = by_job.entry(job).or_insert(JobLogs {
            job,
            files: Vec::new(),
            newest: SystemTime::UNIX_EPOCH,
        });
        j.files.push((e.path(), meta.len()));
        j.newest = j.newest.max(modified);
    }
    by_job.into_values().collect()
}

/// A duration as people write it: `45s`, `12m`, `3h`, `30d`.
fn ago(s: f64) -> String {
    match s {
        s if s < 120.0 => format!("{s:.0}s"),
        s if s < 7_200.0 => format!("{:.0}m", s / 60.0),
        s if s < 172_800.0 => format!("{:.0}h", s / 3_600.0),
        s => format!("{:.0}d", s / 86_400.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> (PathBuf, PathBuf) {
        let d = gantry_testkit::scratch::scratch(&format!("retention-{name}"));
        std::fs::create_dir_all(d.join("logs")).unwrap();
        std::fs::create_dir_all(d.join("runs")).unwrap();
        (d.join("logs"), d.join("runs"))
    }

    fn write(logs: &Path, job: i64, out: &str) {
        std::fs::write(logs.join(format!("job-{job}.out")), out).unwrap();
        std::fs::write(logs.join(format!("job-{job}.err")), "").unwrap();
    }

    #[test]
    fn old_logs_go_with_why_and_a_running_jobs_stay() {
        let (logs, runs) = dir("age");
        write(&logs, 1, "old\n");
        write(&logs, 2, "still running\n");
        std::fs::write(runs.join("job-2.json"), "{}").unwrap();
        let r = Retention {
            keep_for_s: Some(60.0),
            ..Retention::default()
        };
        let later = SystemTime::now() + Duration::from_secs(3_600);
        let said = r.sweep(&logs, &runs, later);
        assert_eq!(said.len(), 1, "{said:?}");
        assert!(!logs.join("job-1.out").exists());
        assert!(logs.join("job-2.out").exists());
        let why = gone(&logs, 1).unwrap();
        assert!(
            why.contains("removed 60m after") && why.contains("keep_for = 60s"),
            "{why}"
        );
        assert_eq!(gone(&logs, 2), None);
        // Within the age: nothing.
        assert!(r.sweep(&logs, &runs, SystemTime::now()).is_empty());
    }

    #[test]
    fn a_big_jobs_logs_keep_their_end_and_the_oldest_go_past_the_total() {
        let (logs, runs) = dir("size");
        let line = "x".repeat(99) + "\n";
        write(&logs, 1, &line.repeat(30_000)); // 3 MB
        let r = Retention {
            max_job_bytes: Some(MIB),
            ..Retention::default()
        };
        r.sweep(&logs, &runs, SystemTime::now());
        let text = std::fs::read_to_string(logs.join("job-1.out")).unwrap();
        assert!(text.len() as u64 <= MIB + 200, "{}", text.len());
        assert!(text.starts_with("[gantry: the first "), "{}", &text[..80]);
        assert!(text.lines().skip(1).all(|l| l == line.trim_end()));
        // Total: the older of two jobs goes.
        write(&logs, 2, &line.repeat(5_000));
        let r = Retention {
            max_total_bytes: Some(MIB),
            ..Retention::default()
        };
        std::thread::sleep(Duration::from_millis(20));
        write(&logs, 3, &line.repeat(5_000));
        let f = std::fs::File::options()
            .append(true)
            .open(logs.join("job-1.out"))
            .unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(100))
            .unwrap();
        let said = r.sweep(&logs, &runs, SystemTime::now());
        assert!(!logs.join("job-1.out").exists(), "{said:?}");
        assert!(logs.join("job-3.out").exists());
        assert!(gone(&logs, 1).unwrap().contains("max_total_mb"));
    }
}
