//! What a host's CPUs, memory and disk are doing, as its agent measures them: `/proc/stat`
//! (busy time since the last sample), `/proc/meminfo` (MemAvailable, as `free` reports it) and
//! `statvfs` of the agent's directory (where jobs' workdirs and logs land). Two small kernel
//! files and one libc call: a crate (`procfs`, `sysinfo`) would add far more than it saves.

use std::path::{Path, PathBuf};

pub use crate::api::HostUsage;

/// Samples one host; keeps the previous CPU counters for the next interval.
pub struct Probe {
    disk: PathBuf,
    last: Option<(u64, u64)>,
}

impl Probe {
    pub fn new(disk: &Path) -> Probe {
        Probe {
            disk: disk.to_path_buf(),
            last: None,
        }
    }

    /// `None` where the kernel's files cannot be read (not Linux).
    pub fn sample(&mut self) -> Option<HostUsage> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
        let (busy, total, cpus) = parse_stat(&stat)?;
        let cpu_busy_pct = self.last.and_then(|(b0, t0)| {
            let (db, dt) = (busy.checked_sub(b0)?, total.checked_sub(t0)?);
            (dt > 0).then(|| 100.0 * db as f64 / dt as f64)
        });
        self.last = Some((busy, total));
        let (mem_total_mib, mem_available_mib) = parse_meminfo(&meminfo)?;
        let (disk_total_mib, disk_free_mib) = disk_space(&self.disk).unwrap_or((0, 0));
        Some(HostUsage {
            cpus,
            cpu_busy_pct,
            mem_total_mib,
            mem_available_mib,
            disk_path: self.disk.display().to_string(),
            disk_total_mib,
            disk_free_mib,
        })
    }
}

/// The all-CPU line's busy and total jiffies, and how many CPUs are listed.
fn parse_stat(text: &str) -> Option<(u64, u64, u32)> {
    let mut lines = text.lines();
    let first = lines.next()?;
    let mut fields = first.split_whitespace();
    if fields.next()? != "cpu" {
        return None;
    }
    // user nice system idle iowait irq softirq steal (guest time is already in user).
    let v: Vec<u64> = fields.take(8).filter_map(|f| f.parse().ok()).collect();
    if v.len() < 4 {
        return None;
    }
    let total: u64 = v.iter().sum();
    let idle = v[3] + v.get(4).copied().unwrap_or(0);
    let cpus = lines
        .filter(|l| {
            l.strip_prefix("cpu")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
        })
        .count() as u32;
    Some((total - idle, total, cpus.max(1)))
}

/// MemTotal and MemAvailable, MiB.
fn parse_meminfo(text: &str) -> Option<(u64, u64)> {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb / 1024)
    };
    Some((field("MemTotal:")?, field("MemAvailable:")?))
}

/// The filesystem's size and what an unprivileged user may still write, MiB.
fn disk_space(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path and `s` a statvfs the call fills in.
    if unsafe { libc::statvfs(c.as_ptr(), &mut s) } != 0 {
        return None;
    }
    let unit = s.f_frsize as u64;
    let mib = |blocks: u64| blocks.saturating_mul(unit) / (1024 * 1024);
    Some((mib(s.f_blocks as u64), mib(s.f_bavail as u64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernels_counters_are_read_as_free_and_top_read_them() {
        let stat = "cpu  100 0 50 800 50 0 0 0 0 0\ncpu0 50 0 25 400 25 0 0 0 0 0\ncpu1 50 0 25 400 25 0 0 0 0 0\nintr 1\n";
        assert_eq!(parse_stat(stat), Some((150, 1000, 2)));
        let meminfo =
            "MemTotal:       16384000 kB\nMemFree:         1000 kB\nMemAvailable:    8192000 kB\n";
        assert_eq!(parse_meminfo(meminfo), Some((16_000, 8_000)));
        assert_eq!(parse_meminfo("MemTotal: 1 kB\n"), None);
    }

    #[test]
    fn this_host_is_measured_and_the_second_sample_has_a_busy_share() {
        let dir = std::env::temp_dir();
        let mut p = Probe::new(&dir);
        let first = p.sample().expect("Linux has /proc");
        assert!(first.cpus >= 1 && first.mem_total_mib > 0, "{first:?}");
        assert!(first.mem_available_mib <= first.mem_total_mib);
        assert!(first.disk_total_mib > 0 && first.disk_free_mib <= first.disk_total_mib);
        assert_eq!(first.cpu_busy_pct, None);
        std::thread::sleep(std::time::Duration::from_millis(30));
        let second = p.sample().unwrap();
        let busy = second.cpu_busy_pct.unwrap_or(0.0);
        assert!((0.0..=100.0).contains(&busy), "{second:?}");
    }
}
