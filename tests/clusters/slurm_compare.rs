//! `scripts/slurm-compare.sh`: the same job set run through Slurm alone and through gantry's
//! Slurm pool over the same real cluster (Debian's Slurm 22.05), in paired rounds (Slurm alone,
//! then gantry, `ROUNDS` times), so the two are always measured side by side (issues 39, 68).
//!
//! Measured as an outsider would, from the jobs' own stamps and the clients' send times, not
//! from gantry's events: each job holds one GPU, writes its index, the time and its GPU when it
//! starts and ends, and sleeps. Slurm alone: `sbatch --gres=gpu:1` from 16 submitting threads.
//! gantry: `POST /v1/jobs` from 16 threads to one daemon whose pool is the cluster, kept across
//! rounds (the cluster keeps its finished jobs, as a real one does for `MinJobAge`). Figures per
//! round and side: the makespan from the first send to the last end; each job's wait from its
//! own send to its start (mean, p50); the first start after the first send; how long a GPU
//! stood between jobs; and the daemon's resident memory after each of its rounds. A benchmark,
//! not a timed test: it is `#[ignore]`d and fails on no figure.

use crate::support::daemon::{exchange, temp_dir};
use crate::support::slurm_cluster::{can_run, daemon_over, daemon_over_as_nobody, Cluster};
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Knobs from the environment (the script passes them): jobs, seconds each, nodes, GPUs per
/// node, rounds.
fn knob(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

const CLIENTS: usize = 16;

struct Figures {
    makespan_s: f64,
    mean_wait_s: f64,
    p50_wait_s: f64,
    /// From the first send instead of each job's own: where one side's clients take longer
    /// to have their jobs accepted (1,000 `sbatch`: 4–6 s), its later sends make its own-send
    /// waits shorter for the same starts.
    mean_wait_from_first_s: f64,
    first_start_s: f64,
    submit_s: f64,
    /// The mean time a GPU stood between one job's end and the next one's start there.
    mean_gap_s: f64,
}

/// One stamp a job wrote: its index, the time, its node and GPU.
fn stamps(dir: &Path, tag: &str, what: &str) -> Vec<(usize, f64, String)> {
    std::fs::read_to_string(dir.join(format!("{tag}.{what}")))
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let mut f = l.split_whitespace();
            let (i, t, gpu) = (f.next(), f.next(), f.next().unwrap_or(""));
            let parsed = i.and_then(|i| i.parse().ok()).zip(t.and_then(|t| t.parse().ok()));
            let (i, t) = parsed.unwrap_or_else(|| {
                panic!("{tag}.{what}: `{l}` is not an index, a time and a GPU (no `date` in the job's PATH?)")
            });
            (i, t, gpu.to_string())
        })
        .collect()
}

/// The figures of a side's round from what its jobs wrote and when each was sent.
fn figures(dir: &Path, tag: &str, sent: &[f64], submit_s: f64) -> Figures {
    let (starts, ends) = (stamps(dir, tag, "starts"), stamps(dir, tag, "ends"));
    let t0 = sent.iter().copied().fold(f64::INFINITY, f64::min);
    let last = ends.iter().map(|e| e.1).fold(t0, f64::max);
    let mut waits: Vec<f64> = starts.iter().map(|(i, t, _)| t - sent[*i]).collect();
    waits.sort_by(f64::total_cmp);
    // Per GPU, its starts and ends in time order: each end before the GPU's next start.
    let mut by_gpu: std::collections::HashMap<&str, (Vec<f64>, Vec<f64>)> = Default::default();
    for (_, t, g) in &starts {
        by_gpu.entry(g).or_default().0.push(*t);
    }
    for (_, t, g) in &ends {
        by_gpu.entry(g).or_default().1.push(*t);
    }
    let mut gaps = Vec::new();
    for (s, e) in by_gpu.values_mut() {
        s.sort_by(f64::total_cmp);
        e.sort_by(f64::total_cmp);
        gaps.extend(s.iter().skip(1).zip(e.iter()).map(|(s, e)| s - e));
    }
    Figures {
        makespan_s: last - t0,
        mean_wait_s: waits.iter().sum::<f64>() / waits.len().max(1) as f64,
        p50_wait_s: waits.get(waits.len() / 2).copied().unwrap_or(0.0),
        mean_wait_from_first_s: starts.iter().map(|s| s.1 - t0).sum::<f64>()
            / starts.len().max(1) as f64,
        first_start_s: starts.iter().map(|s| s.1).fold(f64::INFINITY, f64::min) - t0,
        submit_s,
        mean_gap_s: gaps.iter().sum::<f64>() / gaps.len().max(1) as f64,
    }
}

fn epoch() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// Waits until `n` ends are written; what fell short where `limit` passes first.
fn wait_ends(dir: &Path, tag: &str, n: usize, limit: Duration) -> Result<(), String> {
    let t = Instant::now();
    loop {
        let done = std::fs::read_to_string(dir.join(format!("{tag}.ends")))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        if done >= n {
            return Ok(());
        }
        if t.elapsed() >= limit {
            return Err(format!("{tag}: {done} of {n} jobs ended in {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `each(i)` for i in 0..n from `CLIENTS` threads, noting when each was sent (seconds
/// since the epoch); those times and the seconds it all took.
fn from_clients(n: usize, each: impl Fn(usize) + Sync) -> (Vec<f64>, f64) {
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let sent = Mutex::new(vec![0.0; n]);
    std::thread::scope(|s| {
        for _ in 0..CLIENTS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                let at = epoch();
                each(i);
                sent.lock().unwrap()[i] = at;
            });
        }
    });
    (sent.into_inner().unwrap(), t.elapsed().as_secs_f64())
}

fn body(dir: &Path, tag: &str, i: usize, secs: u64) -> String {
    let d = dir.display();
    // Each stamp names the node and the GPU (Slurm's CUDA_VISIBLE_DEVICES is per job, so
    // SLURM_JOB_GPUS), to measure how long a GPU stands between jobs.
    let gpu = "$SLURMD_NODENAME/$SLURM_JOB_GPUS";
    format!("echo {i} $(date +%s.%N) {gpu} >> {d}/{tag}.starts; sleep {secs}; echo {i} $(date +%s.%N) {gpu} >> {d}/{tag}.ends")
}

/// A process's resident memory and its peak, MiB (`VmRSS`, `VmHWM`).
fn rss_mib(pid: u32) -> Option<(f64, f64)> {
    Some((status_mib(pid, "VmRSS:")?, status_mib(pid, "VmHWM:")?))
}

/// A field of a process's `/proc/PID/status` given in kB, in MiB.
fn status_mib(pid: u32, name: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix(name))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

fn spread(mut v: Vec<f64>) -> String {
    v.sort_by(f64::total_cmp);
    format!(
        "{:.2} / {:.2} / {:.2}",
        v[0],
        v[v.len() / 2],
        v[v.len() - 1]
    )
}

#[test]
#[ignore = "a benchmark: scripts/slurm-compare.sh runs it"]
fn slurm_alone_against_gantry_on_slurm() {
    if !can_run() {
        return;
    }
    let (jobs, secs) = (knob("JOBS", 1000) as usize, knob("JOB_SECONDS", 1));
    let (nodes, per_node) = (knob("NODES", 4) as usize, knob("GPUS", 8) as u32);
    let rounds = knob("ROUNDS", 3).max(1) as usize;
    let names: Vec<String> = (0..nodes).map(|i| format!("gpu-{i}")).collect();
    let spec: Vec<(&str, &str, u32)> = names
        .iter()
        .map(|n| (n.as_str(), "a100", per_node))
        .collect();
    // More slurm.conf for an experiment (`SLURM_CONF_EXTRA='SlurmctldDebug=debug'`, lines
    // apart by `\n`): the same lines serve both halves.
    let extra = std::env::var("SLURM_CONF_EXTRA").map_or(String::new(), |e| {
        e.split("\\n").map(|l| format!("{l}\n")).collect()
    });
    let c = Cluster::start_conf("compare", &spec, &extra);
    println!(
        "the cluster's files (slurm.conf, ctld.log): {}",
        c.conf.parent().unwrap().display()
    );
    let dir = temp_dir("compare-stamps");
    let _ = std::process::Command::new("chmod")
        .arg("777")
        .arg(&dir)
        .status();
    let gpus = nodes * per_node as usize;
    let ideal = (jobs as f64 / gpus as f64).ceil() * secs as f64;
    let limit = Duration::from_secs_f64(ideal * 10.0 + 120.0);

    // How gantry's parts reach Slurm: posted to slurmrestd by a daemon running as its
    // token's user (the default), or `SUBMIT=sbatch`: a root daemon reading as nobody runs
    // `sbatch` for each. One daemon for every round.
    let hosts: Vec<&str> = names.iter().map(String::as_str).collect();
    let pools = [("a100", "A100", per_node as u8, hosts.as_slice())];
    let by_sbatch = std::env::var("SUBMIT").is_ok_and(|s| s == "sbatch");
    let d = if by_sbatch {
        daemon_over(&c, "slurm-compare-daemon", &pools)
    } else {
        daemon_over_as_nobody(&c, "slurm-compare-daemon", &pools)
    };
    crate::support::daemon::wait_for(&d, 60, "every node to connect", || {
        crate::support::daemon::events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= nodes
    });
    let daemon_pid = d.child.id();
    let start_rss = rss_mib(daemon_pid);

    let mut table = Vec::new();
    for round in 1..=rounds {
        // Slurm alone.
        let cpu0 = cpu_now(&c, daemon_pid);
        let tag = format!("slurm-{round}");
        let (sent, submit_s) = from_clients(jobs, |i| {
            let out = std::process::Command::new("sbatch")
                .args(["--parsable", "-o", "/dev/null", "-n1", "--gres=gpu:1"])
                .arg("--wrap")
                .arg(body(&dir, &tag, i, secs))
                .env("SLURM_CONF", &c.conf)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "sbatch: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        });
        wait_ends(&dir, &tag, jobs, limit).unwrap();
        let alone = figures(&dir, &tag, &sent, submit_s);
        c.wait_for("Slurm's queue to empty", 60, |c| {
            c.slurm("squeue", &["-h"]).trim().is_empty()
        });

        let cpu1 = cpu_now(&c, daemon_pid);
        // gantry over the same cluster.
        let tag = format!("gantry-{round}");
        let (sent, submit_s) = from_clients(jobs, |i| {
            let yaml = format!(
                "name: compare\nteam: lab\nresources:\n  accelerators: A100:1\nrun: |\n  {}\n",
                body(&dir, &tag, i, secs)
            );
            let s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
            let answer = exchange(s, "POST /v1/jobs", &[], &yaml);
            assert!(answer.starts_with("HTTP/1.1 20"), "{answer}");
        });
        if let Err(why) = wait_ends(&dir, &tag, jobs, limit) {
            // What the daemon made of the jobs that did not end: their states, and the
            // events of a few.
            let rows = crate::support::daemon::json(&d, &["jobs", "--limit", "100000"]);
            let mut states = std::collections::BTreeMap::<String, usize>::new();
            for r in rows.as_array().into_iter().flatten() {
                *states
                    .entry(r["state"].as_str().unwrap_or("?").to_string())
                    .or_default() += 1;
            }
            let ended: std::collections::HashSet<usize> = stamps(&dir, &tag, "ends")
                .into_iter()
                .map(|s| s.0)
                .collect();
            let missing: Vec<usize> = (0..jobs).filter(|i| !ended.contains(i)).take(5).collect();
            let failed: Vec<String> = rows
                .as_array()
                .into_iter()
                .flatten()
                .filter(|r| r["state"] == "failed")
                .take(3)
                .map(|r| {
                    let id = r["id"].as_i64().unwrap_or(0);
                    crate::support::daemon::cli(&d, &["job", &id.to_string()])
                })
                .collect();
            panic!(
                "{why}; the daemon's jobs by state: {states:?}; indices not ended (first 5): {missing:?}; failed jobs:\n{}",
                failed.join("\n")
            );
        }
        let ours = figures(&dir, &tag, &sent, submit_s);
        let cpu2 = cpu_now(&c, daemon_pid);
        println!(
            "round {round}: Slurm alone's half: {}; gantry's half: {}",
            cpu_used(cpu0, cpu1),
            cpu_used(cpu1, cpu2)
        );
        // The daemon's memory once its round is over (its last parts let go).
        std::thread::sleep(Duration::from_secs(3));
        let rss = rss_mib(daemon_pid);
        // Of it, the daemon's own memory and the pages of its binary it has touched.
        let anon = status_mib(daemon_pid, "RssAnon:");
        let file = status_mib(daemon_pid, "RssFile:");
        c.wait_for("Slurm's queue to empty", 60, |c| {
            c.slurm("squeue", &["-h"]).trim().is_empty()
        });
        println!(
            "round {round}: Slurm alone {:.1} s (wait {:.2} s, p50 {:.2} s, first start {:.2} s) · gantry {:.1} s (wait {:.2} s, p50 {:.2} s, first start {:.2} s) · {:.2}x · daemon {}",
            alone.makespan_s, alone.mean_wait_s, alone.p50_wait_s, alone.first_start_s,
            ours.makespan_s, ours.mean_wait_s, ours.p50_wait_s, ours.first_start_s,
            ours.makespan_s / alone.makespan_s,
            rss.map_or("?".to_string(), |(r, p)| format!(
                "{r:.0} MiB (peak {p:.0}; anonymous {:.1}, file {:.1})",
                anon.unwrap_or(0.0),
                file.unwrap_or(0.0)
            ))
        );
        table.push((alone, ours, rss));
    }

    let how = if by_sbatch { "sbatch" } else { "REST" };
    println!(
        "\n{jobs} jobs of {secs} s, 1 GPU each, on {nodes} Slurm nodes x {per_node} GPUs ({gpus} GPUs); ideal {ideal:.1} s; gantry's parts by {how}; {rounds} paired rounds"
    );
    println!("| round | Slurm alone: makespan, mean / p50 wait, first start, a GPU between jobs | gantry on Slurm | makespan ratio | mean-wait ratio | daemon RSS (peak) |");
    println!("|---|---|---|---|---|---|");
    for (k, (a, o, rss)) in table.iter().enumerate() {
        println!(
            "| {} | {:.1} s, {:.2} / {:.2} s, {:.2} s, {:.3} s | {:.1} s, {:.2} / {:.2} s, {:.2} s, {:.3} s | {:.2}x | {:.2}x | {} |",
            k + 1,
            a.makespan_s, a.mean_wait_s, a.p50_wait_s, a.first_start_s, a.mean_gap_s,
            o.makespan_s, o.mean_wait_s, o.p50_wait_s, o.first_start_s, o.mean_gap_s,
            o.makespan_s / a.makespan_s,
            o.mean_wait_s / a.mean_wait_s.max(1e-9),
            rss.map_or("?".to_string(), |(r, p)| format!("{r:.0} MiB ({p:.0})"))
        );
    }
    let ratios: Vec<f64> = table
        .iter()
        .map(|(a, o, _)| o.makespan_s / a.makespan_s)
        .collect();
    let waits: Vec<f64> = table
        .iter()
        .map(|(a, o, _)| o.mean_wait_s / a.mean_wait_s.max(1e-9))
        .collect();
    println!("makespan ratio min / median / max: {}", spread(ratios));
    println!("mean-wait ratio min / median / max: {}", spread(waits));
    let from_first: Vec<f64> = table
        .iter()
        .map(|(a, o, _)| o.mean_wait_from_first_s / a.mean_wait_from_first_s.max(1e-9))
        .collect();
    println!(
        "mean wait from the first send (Slurm alone / gantry, s): {}; ratio min / median / max: {}",
        table
            .iter()
            .map(|(a, o, _)| format!(
                "{:.2}/{:.2}",
                a.mean_wait_from_first_s, o.mean_wait_from_first_s
            ))
            .collect::<Vec<_>>()
            .join(", "),
        spread(from_first)
    );
    let submits: Vec<String> = table
        .iter()
        .map(|(a, o, _)| format!("{:.1}/{:.1}", a.submit_s, o.submit_s))
        .collect();
    println!(
        "submitted in (Slurm alone / gantry, s): {}",
        submits.join(", ")
    );
    if let (Some((first, _)), Some((last, _))) = (table[0].2, table[table.len() - 1].2) {
        println!(
            "daemon RSS: {} MiB at start, {first:.0} MiB after round 1, {last:.0} MiB after round {rounds} ({:+.1}%)",
            start_rss.map_or("?".to_string(), |(r, _)| format!("{r:.0}")),
            (last / first - 1.0) * 100.0
        );
    }
    // What /proc could not say (slurmrestd gone) is said as such, not as Rust's `None`.
    let said = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_string());
    println!(
        "slurmrestd at the end: {} resident, {} of CPU",
        said(restd_rss_mib(&c).map(|m| format!("{m} MiB"))),
        said(restd_cpu_s(&c).map(|s| format!("{s:.1} s")))
    );
    if let Ok(secs) = std::env::var("HOLD_S") {
        // The cluster kept for a look by hand (its address and a token printed).
        println!(
            "SLURMRESTD={} SLURM_JWT={} SLURM_CONF={}",
            c.url,
            c.token("nobody"),
            c.conf.display()
        );
        drop(d);
        std::thread::sleep(Duration::from_secs(secs.parse().unwrap_or(600)));
    }
}

/// How soon Slurm 22.05 turns a one-GPU node over to a job already queued for it: a job of
/// 1 s runs, the next is queued behind it (pinned to the node, or not), and the gap between
/// the first's last line and the second's first is printed, per turn. It says what a job
/// queued ahead would gain: most turns wait for the periodic pass (`sched_interval`), not the
/// end (docs/measured.md, "Parts posted to slurmrestd").
///   cargo test --release --test clusters queued_turns -- --ignored --nocapture
#[test]
#[ignore = "a probe of Slurm's own passes: run by hand"]
fn queued_turns_on_one_gpu() {
    if !can_run() {
        return;
    }
    let c = Cluster::start("turns", &[("gpu-a", "a100", 1)]);
    let dir = temp_dir("turns-stamps");
    let stamp = |p: &Path| -> Option<f64> { std::fs::read_to_string(p).ok()?.trim().parse().ok() };
    let wait = |p: &Path| loop {
        if let Some(t) = stamp(p) {
            return t;
        }
        std::thread::sleep(Duration::from_millis(2));
    };
    for pinned in [true, false] {
        let mut gaps = Vec::new();
        for turn in 0..10 {
            let tag = |job: &str| format!("{pinned}-{turn}-{job}");
            for job in ["a", "b"] {
                let script = format!(
                    "#!/bin/bash\ndate +%s.%N > {d}/{t}.start\nsleep 1\ndate +%s.%N > {d}/{t}.end\n",
                    d = dir.display(),
                    t = tag(job)
                );
                let mut cmd = std::process::Command::new("sbatch");
                cmd.args(["--parsable", "-o", "/dev/null", "--gres=gpu:1"])
                    .env("SLURM_CONF", &c.conf);
                if pinned {
                    cmd.arg("--nodelist=gpu-a");
                }
                let out = cmd.arg("--wrap").arg(&script).output().unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let end = wait(&dir.join(format!("{}.end", tag("a"))));
            let start = wait(&dir.join(format!("{}.start", tag("b"))));
            gaps.push(start - end);
            wait(&dir.join(format!("{}.end", tag("b"))));
        }
        let shown: Vec<String> = gaps.iter().map(|g| format!("{g:.2}")).collect();
        println!(
            "{}: the queued job started {} s after the GPU's last job ended",
            if pinned {
                "pinned to the node"
            } else {
                "not pinned"
            },
            shown.join(" ")
        );
    }
}

/// The cluster's slurmrestd process.
fn restd_pid(c: &Cluster) -> Option<u32> {
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: u32 = e.file_name().to_str()?.parse().ok()?;
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let cmd = String::from_utf8_lossy(&cmd);
        (cmd.starts_with("/usr/sbin/slurmrestd") && cmd.contains(&c.url[7..])).then_some(pid)
    })
}

/// The CPU seconds slurmrestd has used (user and system): what reading the cluster cost it.
fn restd_cpu_s(c: &Cluster) -> Option<f64> {
    cpu_s(restd_pid(c)?)
}

/// The CPU seconds, user and system, used so far by slurmctld, the slurmds, slurmrestd and
/// the daemon (`daemon`), and by the whole box (from `/proc/stat`): where a half's time went.
fn cpu_now(c: &Cluster, daemon: u32) -> [f64; 5] {
    let mut by = [0.0; 5];
    for e in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd);
        let k = if cmd.starts_with("/usr/sbin/slurmctld") {
            0
        } else if cmd.starts_with("/usr/sbin/slurmd") {
            1
        } else if cmd.starts_with("/usr/sbin/slurmrestd") && cmd.contains(&c.url[7..]) {
            2
        } else if pid == daemon {
            3
        } else {
            continue;
        };
        by[k] += cpu_s(pid).unwrap_or(0.0);
    }
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let busy: f64 = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .enumerate()
        // user nice system (idle iowait skipped) irq softirq steal
        .filter(|(i, _)| ![3, 4].contains(i))
        .take(6)
        .filter_map(|(_, v)| v.parse::<f64>().ok())
        .sum();
    // SAFETY: sysconf reads a constant of the system.
    by[4] = busy / (unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64).max(1.0);
    by
}

/// What `cpu_now` says was used between two readings, as a line.
fn cpu_used(before: [f64; 5], after: [f64; 5]) -> String {
    let d: Vec<f64> = before.iter().zip(after).map(|(b, a)| a - b).collect();
    format!(
        "slurmctld {:.1}, slurmds {:.1}, slurmrestd {:.1}, daemon {:.1}, the box {:.1} s of CPU",
        d[0], d[1], d[2], d[3], d[4]
    )
}

/// A process's CPU seconds, user and system.
fn cpu_s(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / per_s.max(1.0))
}

/// slurmrestd's resident memory (issue 39 saw it grow to 2.9 GB under gantry's polling).
fn restd_rss_mib(c: &Cluster) -> Option<u64> {
    rss_mib(restd_pid(c)?).map(|(rss, _)| rss as u64)
}
