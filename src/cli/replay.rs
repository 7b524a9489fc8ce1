//! `gantry replay openb|philly`

use super::{parse_list, print_as, threads_or_all, Output};
use clap::Subcommand;
use gantry::scheduler::Policy;
use gantry::trace::{openb, philly};
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum ReplayCmd {
    /// Microsoft Philly 2017, job level: each virtual cluster its own cluster of 8-GPU nodes.
    Philly {
        /// Job CSV (timestamp,duration,num_gpus[,gpu_time],cluster).
        #[arg(long, default_value = "../shared/traces/philly/philly.csv")]
        trace: PathBuf,
        /// VC sizes CSV (vc,node num).
        #[arg(long, default_value = "../shared/traces/philly/philly_vc.csv")]
        vcs: PathBuf,
        /// First submission day included (UTC).
        #[arg(long, default_value = "2017-10-01")]
        from: String,
        /// First submission day excluded (UTC).
        #[arg(long, default_value = "2017-11-30")]
        to: String,
        /// fifo, sjf, srtf, gantry, a comma list, or `all`.
        #[arg(long, default_value = "all")]
        policy: String,
        /// Seconds a preempted job needs to restore from its checkpoint.
        #[arg(long, default_value_t = 60.0)]
        ckpt_overhead: f64,
        /// Multiply every VC's node count (e.g. 0.5 replays the jobs on half the nodes).
        #[arg(long, default_value_t = 1.0)]
        vc_scale: f64,
        /// Judge start estimates: at each submission and every 10 minutes while a job waits,
        /// its start is estimated by running the policy forward, with gantry's run-time
        /// estimate and with a Slurm-style one (time limits), against the start it got.
        #[arg(long)]
        eta: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        #[arg(long)]
        threads: Option<usize>,
    },
    /// Alibaba openb 2023 (FGD paper) with the published workload-inflation protocol.
    Openb {
        /// Node list CSV (sn,cpu_milli,memory_mib,gpu,model).
        #[arg(
            long,
            default_value = "../shared/traces/openb/openb_node_list_gpu_node.csv"
        )]
        nodes: PathBuf,
        /// Pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec,…]).
        #[arg(
            long,
            default_value = "../shared/traces/openb/openb_pod_list_default.csv"
        )]
        pods: PathBuf,
        /// Seeds: a range `42..51` (inclusive) or a list `42,43`.
        #[arg(long, default_value = "42..51")]
        seeds: String,
        /// Load to inflate the workload to, as a multiple of GPU capacity.
        #[arg(long, default_value_t = 1.3)]
        inflate: f64,
        /// A policy name, a comma list, or `all`.
        #[arg(long, default_value = "all")]
        policy: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
}

pub fn run(cmd: ReplayCmd) -> Result<(), String> {
    match cmd {
        ReplayCmd::Openb {
            nodes,
            pods,
            seeds,
            inflate,
            policy,
            output,
            threads,
        } => {
            let seeds = parse_seeds(&seeds)?;
            let policies = parse_list(&policy, &Policy::ALL)?;
            if !(inflate.is_finite() && inflate > 0.0 && inflate <= 10.0) {
                return Err(format!(
                    "--inflate {inflate}: expected a number in (0, 10], e.g. 1.3"
                ));
            }
            let nodes = openb::load_nodes(&nodes).map_err(|e| e.to_string())?;
            let pods = openb::load_pods(&pods).map_err(|e| e.to_string())?;
            let replay = openb::Replay::new(&nodes, pods, inflate);
            let threads = threads_or_all(threads);
            let started = std::time::Instant::now();
            let results = openb::replay_all(&replay, &policies, &seeds, threads);
            if output.is_data() {
                return print_as(output, &results);
            }
            println!(
                "openb replay: {} nodes, {} GPUs, {} pods, inflate {:.0}%, seeds {:?}",
                replay.fleet.nodes.len(),
                replay.fleet.gpu_count(),
                replay.pods.len(),
                inflate * 100.0,
                seeds
            );
            println!(
                "{:<10} {:>9} {:>6} {:>9} {:>6} {:>9} {:>8}",
                "policy", "alloc@100", "±std", "alloc@end", "±std", "frag@90", "failed"
            );
            for r in &results {
                let failed = r.seeds.iter().map(|s| s.failed).sum::<usize>() / r.seeds.len().max(1);
                println!(
                    "{:<10} {:>8.2}% {:>6.2} {:>8.2}% {:>6.2} {:>8.2}% {:>8}",
                    r.policy,
                    r.alloc_100_mean,
                    r.alloc_100_std,
                    r.alloc_130_mean,
                    r.alloc_130_std,
                    r.frag_90_mean,
                    failed
                );
            }
            println!("\nper seed (alloc@100 / alloc@end):");
            for r in &results {
                let cells: Vec<String> = r
                    .seeds
                    .iter()
                    .map(|s| format!("{}:{:.2}/{:.2}", s.seed, s.alloc_100, s.alloc_130))
                    .collect();
                println!("{:<10} {}", r.policy, cells.join(" "));
            }
            println!(
                "\n{} runs in {:.1} s on {} thread(s)",
                policies.len() * seeds.len(),
                started.elapsed().as_secs_f64(),
                threads
            );
            Ok(())
        }
        ReplayCmd::Philly {
            trace,
            vcs,
            from,
            to,
            policy,
            ckpt_overhead,
            vc_scale,
            eta,
            output,
            threads,
        } => {
            let day = |flag: &str, text: &str| {
                philly::parse_time(text)
                    .ok_or_else(|| format!("{flag} `{text}`: expected a date like 2017-10-01"))
            };
            let (from_t, to_t) = (day("--from", &from)?, day("--to", &to)?);
            if to_t <= from_t {
                return Err(format!("--to {to} must be after --from {from}"));
            }
            if !(ckpt_overhead.is_finite() && (0.0..=86_400.0).contains(&ckpt_overhead)) {
                return Err(format!(
                    "--ckpt-overhead {ckpt_overhead}: expected seconds in 0..=86400"
                ));
            }
            if !(vc_scale.is_finite() && vc_scale > 0.0 && vc_scale <= 100.0) {
                return Err(format!(
                    "--vc-scale {vc_scale}: expected a factor in (0, 100]"
                ));
            }
            let policies = parse_list(&policy, &philly::QueuePolicy::ALL)?;
            let jobs = philly::load_jobs(&trace).map_err(|e| e.to_string())?;
            let vcs = philly::load_vcs(&vcs).map_err(|e| e.to_string())?;
            let replay =
                philly::PhillyReplay::new(jobs, vcs, from_t, to_t, ckpt_overhead, vc_scale);
            let threads = threads_or_all(threads);
            let started = std::time::Instant::now();
            let results = replay.run(&policies, threads, eta);
            if output.is_data() {
                return print_as(output, &results);
            }
            let s = &replay.skipped;
            println!(
                "philly replay {from} .. {to}, VC scale {vc_scale}: {} jobs on {} VCs ({} GPUs); skipped {} outside the window, {} in VCs without a size, {} larger than their VC",
                replay.jobs(),
                replay.vcs.len(),
                replay.vcs.iter().map(|v| v.1 * 8).sum::<u32>(),
                s.outside_window,
                s.unknown_vc,
                s.larger_than_vc
            );
            println!(
                "{:<8} {:>12} {:>12} {:>12} {:>8} {:>12} {:>11}",
                "policy",
                "avg JCT s",
                "avg queue s",
                "p99 queue s",
                "GPU util",
                "makespan s",
                "preemptions"
            );
            for r in &results {
                let m = &r.metrics;
                println!(
                    "{:<8} {:>12.0} {:>12.0} {:>12.0} {:>7.1}% {:>12.0} {:>11}",
                    r.policy,
                    m.avg_jct_s,
                    m.avg_queue_s,
                    m.p99_queue_s,
                    m.gpu_util_pct,
                    m.makespan_s,
                    m.preemptions
                );
            }
            if let Some(r) = results.first() {
                println!(
                    "lower bound (mean duration, zero queueing): avg JCT {:.0} s",
                    r.metrics.lower_bound_jct_s
                );
            }
            println!("\nper VC (avg JCT s / avg queue s):");
            for (v, (name, nodes)) in replay.vcs.iter().enumerate() {
                let cells: Vec<String> = results
                    .iter()
                    .map(|r| {
                        format!(
                            "{} {:.0}/{:.0}",
                            r.policy, r.vcs[v].metrics.avg_jct_s, r.vcs[v].metrics.avg_queue_s
                        )
                    })
                    .collect();
                let jobs = results.first().map_or(0, |r| r.vcs[v].metrics.jobs);
                println!(
                    "  {name} ({nodes} nodes, {jobs} jobs): {}",
                    cells.join("  ")
                );
            }
            for r in &results {
                if let Some(e) = &r.eta {
                    print_eta(&r.policy, e);
                }
            }
            println!(
                "\n{} policies in {:.1} s on {} thread(s)",
                policies.len(),
                started.elapsed().as_secs_f64(),
                threads
            );
            Ok(())
        }
    }
}

/// The start-estimate error table of one policy's replay.
fn print_eta(policy: &str, e: &philly::EtaReport) {
    println!(
        "\nstart estimates under {policy} ({} forward runs, {} events, {} cut at the event bound; {} jobs never started):",
        e.forward_runs, e.forward_events, e.cut, e.never_started
    );
    println!(
        "  {:<34} {:>7}  {:>10} {:>6} {:>7}  {:>11} {:>6} {:>7}  {:>9} {:>6} {:>7}",
        "estimates",
        "n",
        "gantry p50",
        "p90",
        "±10min",
        "+limit p50",
        "p90",
        "±10min",
        "slurm p50",
        "p90",
        "±10min"
    );
    let m = |s: f64| format!("{:.0}m", s / 60.0);
    for r in &e.rows {
        println!(
            "  {:<34} {:>7}  {:>10} {:>6} {:>6.1}%  {:>11} {:>6} {:>6.1}%  {:>9} {:>6} {:>6.1}%",
            r.estimates,
            r.n,
            m(r.gantry_p50_s),
            m(r.gantry_p90_s),
            100.0 * r.gantry_within_10min,
            m(r.limited_p50_s),
            m(r.limited_p90_s),
            100.0 * r.limited_within_10min,
            m(r.slurm_p50_s),
            m(r.slurm_p90_s),
            100.0 * r.slurm_within_10min
        );
    }
}

fn parse_seeds(text: &str) -> Result<Vec<u64>, String> {
    let bad = || format!("--seeds `{text}`: expected a range like 42..51 or a list like 42,43");
    if let Some((a, b)) = text.split_once("..") {
        let a: u64 = a.trim().parse().map_err(|_| bad())?;
        let b: u64 = b
            .trim()
            .trim_start_matches('=')
            .parse()
            .map_err(|_| bad())?;
        if b < a || b - a > 10_000 {
            return Err(bad());
        }
        return Ok((a..=b).collect());
    }
    text.split(',')
        .map(|s| s.trim().parse().map_err(|_| bad()))
        .collect()
}
