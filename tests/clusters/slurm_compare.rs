//! `scripts/slurm-compare.sh`: the same job set run through Slurm alone and through gantry's
//! Slurm pool over the same real cluster (Debian's Slurm 22.05), one after the other in one
//! run, so the two makespans are always measured side by side (issue 39).
//!
//! Each job holds one GPU, notes when it started and ended (`date` into a shared file) and
//! sleeps. Slurm alone: `sbatch --gres=gpu:1` from 16 submitting threads. gantry: `POST
//! /v1/jobs` from 16 threads to a daemon whose one pool is the cluster. The makespan runs from
//! the first submission to the last job's end; the wait from the first submission to each
//! job's start. A benchmark, not a timed test: it is `#[ignore]`d and fails on no figure.

use crate::support::daemon::{exchange, temp_dir};
use crate::support::slurm_cluster::{can_run, daemon_over, daemon_over_as_nobody, Cluster};
use std::path::Path;
use std::time::{Duration, Instant};

/// Knobs from the environment (the script passes them): jobs, seconds each, nodes, GPUs per
/// node.
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
    submit_s: f64,
    /// The mean time a GPU stood between one job's end and the next one's start there.
    mean_gap_s: f64,
}

/// Reads the start and end stamps the jobs wrote; the figures from `t0` (seconds since the
/// epoch at the first submission).
fn figures(dir: &Path, tag: &str, t0: f64, submit_s: f64) -> Figures {
    // Each line: the time, then the node and the GPU the job had.
    let stamps = |what: &str| -> Vec<(f64, String)> {
        std::fs::read_to_string(dir.join(format!("{tag}.{what}")))
            .unwrap_or_default()
            .lines()
            .map(|l| {
                let (t, gpu) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
                let t = t.parse().unwrap_or_else(|_| {
                    panic!("{tag}.{what}: `{l}` is not a time and a GPU (no `date` in the job's PATH?)")
                });
                (t, gpu.to_string())
            })
            .collect()
    };
    let (starts, ends) = (stamps("starts"), stamps("ends"));
    let last = ends.iter().map(|e| e.0).fold(t0, f64::max);
    // Per GPU, its starts and ends in time order: each end before the GPU's next start.
    let mut by_gpu: std::collections::HashMap<&str, (Vec<f64>, Vec<f64>)> = Default::default();
    for (t, g) in &starts {
        by_gpu.entry(g).or_default().0.push(*t);
    }
    for (t, g) in &ends {
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
        mean_wait_s: starts.iter().map(|s| s.0 - t0).sum::<f64>() / starts.len().max(1) as f64,
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

/// Waits until `n` ends are written (or `limit` passes).
fn wait_ends(dir: &Path, tag: &str, n: usize, limit: Duration) {
    let t = Instant::now();
    loop {
        let done = std::fs::read_to_string(dir.join(format!("{tag}.ends")))
            .map(|s| s.lines().count())
            .unwrap_or(0);
        if done >= n {
            return;
        }
        assert!(
            t.elapsed() < limit,
            "{tag}: {done} of {n} jobs ended in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs `each(i)` for i in 0..n from `CLIENTS` threads; the seconds it took.
fn from_clients(n: usize, each: impl Fn(usize) + Sync) -> f64 {
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..CLIENTS {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if i >= n {
                    return;
                }
                each(i);
            });
        }
    });
    t.elapsed().as_secs_f64()
}

fn body(dir: &Path, tag: &str, secs: u64) -> String {
    let d = dir.display();
    // Each stamp names the node and the GPU (Slurm's CUDA_VISIBLE_DEVICES is per job, so
    // SLURM_JOB_GPUS), to measure how long a GPU stands between jobs.
    let gpu = "$SLURMD_NODENAME/$SLURM_JOB_GPUS";
    format!("echo $(date +%s.%N) {gpu} >> {d}/{tag}.starts; sleep {secs}; echo $(date +%s.%N) {gpu} >> {d}/{tag}.ends")
}

#[test]
#[ignore = "a benchmark: scripts/slurm-compare.sh runs it"]
fn slurm_alone_against_gantry_on_slurm() {
    if !can_run() {
        return;
    }
    let (jobs, secs) = (knob("JOBS", 1000) as usize, knob("JOB_SECONDS", 1));
    let (nodes, per_node) = (knob("NODES", 4) as usize, knob("GPUS", 8) as u32);
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

    // Slurm alone.
    let script = body(&dir, "slurm", secs);
    let t0 = epoch();
    let submit_s = from_clients(jobs, |_| {
        let out = std::process::Command::new("sbatch")
            .args(["--parsable", "-o", "/dev/null", "-n1", "--gres=gpu:1"])
            .arg("--wrap")
            .arg(&script)
            .env("SLURM_CONF", &c.conf)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "sbatch: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    wait_ends(&dir, "slurm", jobs, limit);
    let alone = figures(&dir, "slurm", t0, submit_s);
    let (rss_alone, cpu_alone) = (restd_rss_mib(&c), restd_cpu_s(&c));
    c.wait_for("Slurm's queue to empty", 60, |c| {
        c.slurm("squeue", &["-h"]).trim().is_empty()
    });

    // gantry over the same cluster.
    let hosts: Vec<&str> = names.iter().map(String::as_str).collect();
    // How gantry's parts reach Slurm: posted to slurmrestd by a daemon running as its
    // token's user (the default), or `SUBMIT=sbatch`: a root daemon reading as nobody runs
    // `sbatch` for each.
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
    let yaml = format!(
        "name: compare\nteam: lab\nresources:\n  accelerators: A100:1\nrun: |\n  {}\n",
        body(&dir, "gantry", secs)
    );
    let t0 = epoch();
    let submit_s = from_clients(jobs, |_| {
        let s = std::os::unix::net::UnixStream::connect(&d.socket).unwrap();
        let answer = exchange(s, "POST /v1/jobs", &[], &yaml);
        assert!(answer.starts_with("HTTP/1.1 20"), "{answer}");
    });
    wait_ends(&dir, "gantry", jobs, limit);
    let ours = figures(&dir, "gantry", t0, submit_s);

    let line = |who: &str, f: &Figures| {
        println!(
            "{who:<24} makespan {:>7.1} s   mean wait {:>6.1} s   {:>5.2}x ideal   a GPU between jobs {:.3} s   (submitted in {:.1} s)",
            f.makespan_s,
            f.mean_wait_s,
            f.makespan_s / ideal,
            f.mean_gap_s,
            f.submit_s
        )
    };
    println!(
        "\n{jobs} jobs of {secs} s, 1 GPU each, on {nodes} Slurm nodes x {per_node} GPUs ({gpus} GPUs); ideal {ideal:.1} s"
    );
    line("Slurm alone (sbatch)", &alone);
    let how = if by_sbatch {
        "gantry on Slurm (sbatch)"
    } else {
        "gantry on Slurm (REST)"
    };
    line(how, &ours);
    println!(
        "gantry / Slurm alone:  {:.2}x makespan, {:.2}x mean wait",
        ours.makespan_s / alone.makespan_s,
        ours.mean_wait_s / alone.mean_wait_s.max(1e-9)
    );
    // What /proc could not say (slurmrestd gone) is said as such, not as Rust's `None`.
    let said = |v: Option<String>| v.unwrap_or_else(|| "unknown".to_string());
    println!(
        "slurmrestd resident: {} after Slurm alone, {} after gantry",
        said(rss_alone.map(|m| format!("{m} MiB"))),
        said(restd_rss_mib(&c).map(|m| format!("{m} MiB")))
    );
    println!(
        "slurmrestd CPU: {} after Slurm alone, {} after gantry",
        said(cpu_alone.map(|s| format!("{s:.1} s"))),
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
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", restd_pid(c)?)).ok()?;
    // After the command's closing parenthesis: state is field 3, utime 14, stime 15.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let per_s = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / per_s.max(1.0))
}

/// slurmrestd's resident memory (issue 39 saw it grow to 2.9 GB under gantry's polling).
fn restd_rss_mib(c: &Cluster) -> Option<u64> {
    let pid = restd_pid(c)?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024)
}
