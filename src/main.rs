use clap::{Parser, Subcommand, ValueEnum};
use gantry::scheduler::Policy;
use gantry::trace::openb;
use std::path::PathBuf;
use std::process::ExitCode;

/// gantry: a scheduler and operations console for GPU fleets.
#[derive(Parser)]
#[command(name = "gantry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
enum Output {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Replay a public cluster trace through the scheduler core.
    #[command(subcommand)]
    Replay(ReplayCmd),
    /// Benchmarks that print the figures gantry reports.
    #[command(subcommand)]
    Bench(BenchCmd),
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Placement speed: single-job throughput and latency, 512-GPU gang decisions, peak RSS,
    /// against the first-fit (spread) baseline. Runs on one core.
    Sched {
        #[arg(long, default_value_t = 10_000)]
        nodes: usize,
        #[arg(long, default_value_t = 100_000)]
        pending: usize,
        #[arg(long, default_value = "gantry")]
        policy: String,
        /// 512-GPU gang decisions to time.
        #[arg(long, default_value_t = 200)]
        gangs: usize,
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

#[derive(Subcommand)]
enum ReplayCmd {
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
        #[arg(long, value_enum, default_value_t = Output::Table)]
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
        /// A policy name, or `all`.
        #[arg(long, default_value = "all")]
        policy: String,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// Worker threads (default: all cores).
        #[arg(long)]
        threads: Option<usize>,
    },
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

fn parse_policies(text: &str) -> Result<Vec<Policy>, String> {
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(Policy::ALL.to_vec());
    }
    text.split(',').map(|s| s.parse()).collect()
}

fn run(cli: Cli) -> Result<(), String> {
    match cli.command {
        None => {
            println!(
                "gantry {}: run `gantry --help` for commands",
                env!("CARGO_PKG_VERSION")
            );
            Ok(())
        }
        Some(Command::Bench(BenchCmd::Sched {
            nodes,
            pending,
            policy,
            gangs,
            seed,
            output,
        })) => {
            if nodes == 0 || nodes > 1_000_000 {
                return Err(format!("--nodes {nodes}: expected 1..=1000000"));
            }
            let cfg = gantry::bench::sched::SchedBenchConfig {
                nodes,
                pending,
                policy: policy.parse()?,
                baseline: Policy::Spread,
                seed,
                gangs,
            };
            let r = gantry::bench::sched::run(&cfg);
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&r).map_err(|e| e.to_string())?
                ),
                Output::Table => {
                    println!(
                        "bench sched: {} nodes, {} GPUs, {} pending jobs, one core",
                        r.nodes, r.gpus, r.pending
                    );
                    println!(
                        "{:<10} {:>14} {:>9} {:>9} {:>12} {:>12} {:>8} {:>8}",
                        "policy",
                        "placements/s",
                        "p50 µs",
                        "p99 µs",
                        "gang512 p50",
                        "gang512 p99",
                        "placed",
                        "alloc"
                    );
                    for run in &r.runs {
                        println!(
                            "{:<10} {:>14.0} {:>9.2} {:>9.2} {:>9.3} ms {:>9.3} ms {:>8} {:>7.1}%",
                            run.policy,
                            run.placements_per_sec,
                            run.p50_us,
                            run.p99_us,
                            run.gang512_p50_ms,
                            run.gang512_p99_ms,
                            run.placed,
                            run.gpu_allocated_pct
                        );
                    }
                    for run in &r.runs {
                        println!(
                            "{}: {} of {} timed 512-GPU gang decisions (at 50% GPU allocation) found room",
                            run.policy, run.gang512_placed, run.gang512_timed
                        );
                    }
                    let c = &r.cycle;
                    println!(
                        "full cycle: {} pending, {} running, {} teams in cohorts, fair share: {:.0} ms ({} starts, {} preemptions, {} reservation, {} explanations)",
                        c.pending, c.running, c.teams, c.cycle_ms, c.starts, c.preemptions, c.reservations, c.explanations
                    );
                    println!(
                        "{} places at {:.2}× the {} baseline's rate; peak RSS {}",
                        r.policy,
                        r.speed_vs_baseline,
                        r.baseline_policy,
                        r.peak_rss_mib
                            .map_or("n/a".to_string(), |m| format!("{m:.0} MiB"))
                    );
                }
            }
            Ok(())
        }
        Some(Command::Replay(ReplayCmd::Philly {
            trace,
            vcs,
            from,
            to,
            policy,
            ckpt_overhead,
            vc_scale,
            output,
            threads,
        })) => {
            use gantry::trace::philly;
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
            let policies: Vec<philly::QueuePolicy> = if policy.trim().eq_ignore_ascii_case("all") {
                philly::QueuePolicy::ALL.to_vec()
            } else {
                policy
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            };
            let jobs = philly::load_jobs(&trace).map_err(|e| e.to_string())?;
            let vcs = philly::load_vcs(&vcs).map_err(|e| e.to_string())?;
            let replay =
                philly::PhillyReplay::new(jobs, vcs, from_t, to_t, ckpt_overhead, vc_scale);
            let threads = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let started = std::time::Instant::now();
            let results = replay.run(&policies, threads);
            let elapsed = started.elapsed().as_secs_f64();
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?
                ),
                Output::Table => {
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
                        println!(
                            "{:<8} {:>12.0} {:>12.0} {:>12.0} {:>7.1}% {:>12.0} {:>11}",
                            r.policy,
                            r.avg_jct_s,
                            r.avg_queue_s,
                            r.p99_queue_s,
                            r.gpu_util_pct,
                            r.makespan_s,
                            r.preemptions
                        );
                    }
                    if let Some(r) = results.first() {
                        println!(
                            "lower bound (mean duration, zero queueing): avg JCT {:.0} s",
                            r.lower_bound_jct_s
                        );
                    }
                    println!("\nper VC (avg JCT s / avg queue s):");
                    for (v, (name, nodes)) in replay.vcs.iter().enumerate() {
                        let cells: Vec<String> = results
                            .iter()
                            .map(|r| {
                                format!(
                                    "{} {:.0}/{:.0}",
                                    r.policy, r.vcs[v].avg_jct_s, r.vcs[v].avg_queue_s
                                )
                            })
                            .collect();
                        println!(
                            "  {name} ({nodes} nodes, {} jobs): {}",
                            results.first().map_or(0, |r| r.vcs[v].jobs),
                            cells.join("  ")
                        );
                    }
                    println!(
                        "\n{} policies in {:.1} s on {} thread(s)",
                        policies.len(),
                        elapsed,
                        threads
                    );
                }
            }
            Ok(())
        }
        Some(Command::Replay(ReplayCmd::Openb {
            nodes,
            pods,
            seeds,
            inflate,
            policy,
            output,
            threads,
        })) => {
            let seeds = parse_seeds(&seeds)?;
            let policies = parse_policies(&policy)?;
            if !(inflate.is_finite() && inflate > 0.0 && inflate <= 10.0) {
                return Err(format!(
                    "--inflate {inflate}: expected a number in (0, 10], e.g. 1.3"
                ));
            }
            let nodes = openb::load_nodes(&nodes).map_err(|e| e.to_string())?;
            let pods = openb::load_pods(&pods).map_err(|e| e.to_string())?;
            let replay = openb::Replay::new(&nodes, pods, inflate);
            let threads = threads
                .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let started = std::time::Instant::now();
            let results = openb::replay_all(&replay, &policies, &seeds, threads);
            let elapsed = started.elapsed().as_secs_f64();
            match output {
                Output::Json => println!(
                    "{}",
                    serde_json::to_string_pretty(&results).map_err(|e| e.to_string())?
                ),
                Output::Table => {
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
                        let failed: usize =
                            r.seeds.iter().map(|s| s.failed).sum::<usize>() / r.seeds.len().max(1);
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
                        elapsed,
                        threads
                    );
                }
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
