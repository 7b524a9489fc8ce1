//! `gantry bench …`

use super::{print_as, Output};
use clap::Subcommand;
use gantry::bench::sched::{run as run_sched, SchedBenchConfig};
use gantry::scheduler::Policy;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum BenchCmd {
    /// Placement speed (single-job throughput and latency, 512-GPU gang decisions) against
    /// the first-fit (spread) baseline, and one full scheduling cycle. Runs on one core.
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
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A service's endpoint: latency it adds at a request rate (direct vs through it), and
    /// how fast a new replica takes traffic once the load crosses the threshold (gantry's
    /// share, the replica's own start-up excluded).
    Serve {
        #[arg(long, default_value_t = 1000.0)]
        rate: f64,
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A service replica for `bench serve`: answers every request with its replica id.
    #[command(hide = true)]
    Replica {
        #[arg(long)]
        port: u16,
        #[arg(long)]
        log: PathBuf,
    },
    /// Durable submissions per second through the whole daemon: HTTP on the Unix socket, the
    /// actor, admission and the journal's group commit, with concurrent clients.
    Api {
        #[arg(long, default_value_t = 16)]
        clients: usize,
        #[arg(long, default_value_t = 20_000)]
        jobs: usize,
        /// Also run the same clients against a server that answers every submission at once
        /// (the same HTTP stack, nothing else): the most this machine allows, side by side.
        #[arg(long)]
        floor: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Durable submissions per second into the SQLite journal (WAL, synchronous=FULL, group
    /// commit) with concurrent clients, and the reload time of a restart.
    Journal {
        /// Database file (created if missing; jobs are appended).
        #[arg(long)]
        db: PathBuf,
        #[arg(long, default_value_t = 16)]
        clients: usize,
        #[arg(long, default_value_t = 20_000)]
        jobs: usize,
        /// Print `ack ID` as each submission is acknowledged.
        #[arg(long)]
        print_acks: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// How long one CLI call takes, spawn to exit, against a daemon holding jobs: a read
    /// (`gantry jobs -o json`), a durable write (`gantry submit`), and the process alone.
    Cli {
        /// Calls of each kind.
        #[arg(long, default_value_t = 100)]
        calls: usize,
        /// Jobs the daemon holds first (what `gantry jobs` lists).
        #[arg(long, default_value_t = 1_000)]
        jobs: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Resident memory of a daemon's engine after many jobs were submitted, ran and finished
    /// (and after a restart on that journal): only live jobs and a bounded window of finished
    /// ones stay in memory.
    Memory {
        #[arg(long, default_value_t = 1_000_000)]
        jobs: usize,
        /// Finished jobs kept in memory (the daemon keeps 5,000).
        #[arg(long, default_value_t = gantry::daemon::engine::HISTORY_KEPT)]
        history: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Console frame time on a large fleet (off-screen), per view, and key-to-frame time.
    Tui {
        #[arg(long, default_value_t = 10_000)]
        gpus: usize,
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        #[arg(long, default_value_t = 300)]
        frames: usize,
        /// Seconds of the idle and of the live run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Instead: the log view following a job that writes this many MB/s, for --seconds.
        #[arg(long)]
        log_mb_per_s: Option<f64>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// An EC2 pool against a real EC2 API (moto: started here when `moto_server` is
    /// installed, or at --endpoint): N nodes bought and given back — the actor's time per
    /// node, time to ready, EC2 calls per node, instances leaked.
    Cloud {
        #[arg(long, default_value_t = 100)]
        nodes: usize,
        /// An EC2 endpoint (http://127.0.0.1:5000); never a real account's.
        #[arg(long)]
        endpoint: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// SSH hosts (`provider = "ssh"`): from the cycle that places a job to its first output
    /// line on the host, over a warm connection; and a restart re-adopting N running jobs.
    /// The hosts must accept this user's key (gantry installs its agent there).
    Ssh {
        /// ssh destinations, comma-separated ([user@]host[:port]).
        #[arg(long, value_delimiter = ',', required = true)]
        hosts: Vec<String>,
        /// `ssh -F`.
        #[arg(long)]
        ssh_config: Option<PathBuf>,
        /// `ssh -i`.
        #[arg(long)]
        identity_file: Option<PathBuf>,
        #[arg(long, default_value_t = 20)]
        launches: usize,
        #[arg(long, default_value_t = 100)]
        jobs: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A Slurm cluster's refresh through slurmrestd: the real slurmrestd's recorded JSON
    /// (v0.0.38) scaled to N nodes and M jobs and served on a Unix socket; read, a pool
    /// worker's whole refresh (cold and steady), and the daemon to every node up.
    Slurm {
        #[arg(long, default_value_t = 1_000)]
        nodes: usize,
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u32,
        #[arg(long, default_value_t = 20_000)]
        jobs: usize,
        /// Steady refreshes timed.
        #[arg(long, default_value_t = 10)]
        refreshes: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A Kubernetes cluster through kube-rs reflectors: connect to both stores full, the
    /// inventory from them, and peak memory. The cluster is gantry's test API server, in a
    /// child process.
    Kube {
        #[arg(long, default_value_t = 5_000)]
        nodes: usize,
        #[arg(long, default_value_t = 8)]
        gpus_per_node: u32,
        #[arg(long, default_value_t = 50_000)]
        pods: usize,
        /// gantry pods then started through a Kubernetes pool's runner (created and bound).
        #[arg(long, default_value_t = 1_000)]
        binds: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The populated test API server of `bench kube` (it starts this itself).
    #[command(hide = true)]
    KubeServe {
        #[arg(long)]
        nodes: usize,
        #[arg(long)]
        gpus_per_node: u32,
        #[arg(long)]
        pods: usize,
    },
    /// The daemon's time for one telemetry round of N SSH hosts (synthetic NVML samples in
    /// the agent's wire format, applied through the daemon's state, plus one daemon step).
    Telemetry {
        #[arg(long, default_value_t = 16)]
        hosts: usize,
        #[arg(long, default_value_t = 8)]
        gpus: usize,
        #[arg(long, default_value_t = 50)]
        rounds: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// How fast freed capacity is used again: N jobs of S seconds through the whole daemon on
    /// a local pool of one-CPU slots; the makespan against the ideal and each slot's idle time
    /// between jobs. --ticks-only measures gantry without the wake a run's end sends.
    Starts {
        #[arg(long, default_value_t = 1000)]
        jobs: usize,
        #[arg(long, default_value_t = 32)]
        slots: usize,
        /// Each job's length (`sleep`).
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        #[arg(long)]
        ticks_only: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The local host: one NVML telemetry sample of every GPU, and a local job from the
    /// scheduling cycle that places it to running (its first output written).
    Local {
        #[arg(long, default_value_t = 200)]
        launches: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(cmd: BenchCmd) -> Result<(), String> {
    let (nodes, pending, policy, gangs, seed, output) = match cmd {
        BenchCmd::Sched {
            nodes,
            pending,
            policy,
            gangs,
            seed,
            output,
        } => (nodes, pending, policy, gangs, seed, output),
        BenchCmd::Journal {
            db,
            clients,
            jobs,
            print_acks,
            output,
        } => return journal(db, clients, jobs, print_acks, output),
        BenchCmd::Local { launches, output } => return local(launches, output),
        BenchCmd::Starts {
            jobs,
            slots,
            seconds,
            ticks_only,
            output,
        } => return starts(jobs, slots, seconds, ticks_only, output),
        BenchCmd::Memory {
            jobs,
            history,
            output,
        } => return memory(jobs, history, output),
        BenchCmd::Cli {
            calls,
            jobs,
            output,
        } => return cli(calls, jobs, output),
        BenchCmd::Api {
            clients,
            jobs,
            floor,
            output,
        } => return api(clients, jobs, floor, output),
        BenchCmd::Replica { port, log } => {
            let started = std::time::SystemTime::now();
            return gantry::bench::serve::replica(port, &log, started);
        }
        BenchCmd::Serve {
            rate,
            seconds,
            output,
        } => {
            if !(1.0..=100_000.0).contains(&rate) || !(1.0..=600.0).contains(&seconds) {
                return Err(format!(
                    "--rate {rate} --seconds {seconds}: expected a rate in 1..=100000 and 1..=600 seconds"
                ));
            }
            let r = in_scratch("serve", |dir| gantry::bench::serve::run(dir, rate, seconds))?;
            if !json_asked(&r, output)? {
                println!(
                    "service endpoint at {:.0} requests/s for {:.0} s (open loop, latency from each request's scheduled time):",
                    r.rate, r.seconds
                );
                println!(
                    "  direct to the replica     p50 {:.3} ms  p99 {:.3} ms",
                    r.direct_p50_ms, r.direct_p99_ms
                );
                println!(
                    "  through the endpoint      p50 {:.3} ms  p99 {:.3} ms  ({} errors)",
                    r.endpoint_p50_ms, r.endpoint_p99_ms, r.endpoint_errors
                );
                println!(
                    "  the endpoint adds         {:.3} ms at p50, {:.3} ms at p99 (ten alternating rounds of each)",
                    r.added_p50_ms, r.added_p99_ms
                );
                let x = &r.reaction;
                println!(
                    "scale-up at {:.0} requests/s against {:.0} per replica (upscale delay 0, QPS window 1 s):",
                    x.load_rps, x.per_replica
                );
                println!(
                    "  threshold crossed -> new replica answers: {:.1} ms, of which the replica's own start-up {:.1} ms",
                    x.total_ms, x.replica_startup_ms
                );
                println!(
                    "  gantry's share (measure, decide, place, start, probe, route): {:.1} ms ({} errors)",
                    x.gantry_ms, x.errors
                );
                for (stage, ms) in &x.stages {
                    println!("    {ms:>8.1} ms  {stage}");
                }
            }
            return Ok(());
        }
        BenchCmd::Telemetry {
            hosts,
            gpus,
            rounds,
            output,
        } => {
            let r = in_scratch("tele", |dir| {
                gantry::bench::telemetry::run(hosts.max(1), gpus.clamp(1, 64), rounds.max(1), dir)
            })?;
            if !json_asked(&r, output)? {
                println!(
                    "telemetry round, {} SSH hosts x {} GPUs (synthetic NVML samples, agent wire format), {} rounds:",
                    r.hosts, r.gpus_per_host, r.rounds
                );
                println!(
                    "  decode + apply samples: p50 {:.2} ms, max {:.2} ms",
                    r.observe_p50_ms, r.observe_max_ms
                );
                println!(
                    "  with one daemon step (cycle, snapshot): p50 {:.2} ms, max {:.2} ms",
                    r.round_p50_ms, r.round_max_ms
                );
            }
            return Ok(());
        }
        BenchCmd::Cloud {
            nodes,
            endpoint,
            output,
        } => {
            let r = gantry::bench::cloud::run(&gantry::bench::cloud::CloudBenchConfig {
                nodes: nodes.max(1),
                endpoint,
            })?;
            if !json_asked(&r, output)? {
                println!(
                    "EC2 pool against {}: {} nodes bought and given back",
                    r.endpoint, r.nodes
                );
                println!(
                    "daemon's time per node (decision → registered as coming, on the actor): p50 {:.1} µs, max {:.1} µs",
                    r.buy_p50_us, r.buy_max_us
                );
                println!(
                    "buy → launched (RunInstances answered; one launch at a time per pool): p50 {:.0} ms; all {} launched in {:.2} s",
                    r.launched_p50_ms, r.nodes, r.all_launched_s
                );
                println!(
                    "buy → ready (instance running, address known; polled every 2 s): p50 {:.0} ms, max {:.0} ms; all {} in {:.2} s",
                    r.ready_p50_ms, r.ready_max_ms, r.nodes, r.all_ready_s
                );
                println!(
                    "EC2 calls per node: {:.2} to buy (launch + its share of the polls), {:.2} to give back; all terminated in {:.2} s",
                    r.calls_per_node_buy, r.calls_per_node_give_back, r.all_terminated_s
                );
                println!("instances leaked: {}", r.leaked);
            }
            return Ok(());
        }
        BenchCmd::Ssh {
            hosts,
            ssh_config,
            identity_file,
            launches,
            jobs,
            output,
        } => {
            let r = in_scratch("ssh", |dir| {
                gantry::bench::ssh::run(&gantry::bench::ssh::SshBenchConfig {
                    hosts,
                    ssh_config,
                    identity_file,
                    launches: launches.max(1),
                    jobs,
                    dir: dir.to_path_buf(),
                })
            })?;
            if !json_asked(&r, output)? {
                println!(
                    "SSH hosts: {} (connected and agents ready in {:.2} s)",
                    r.hosts, r.connect_s
                );
                println!(
                    "placement to first output line: p50 {:.0} ms, max {:.0} ms over {} launches (warm connection)",
                    r.first_output_p50_ms, r.first_output_max_ms, r.launches
                );
                println!(
                    "restart re-adopting {} running jobs: {:.2} s",
                    r.jobs, r.readopt_s
                );
                println!("telemetry round: `gantry bench telemetry` measures it (daemon time per round of samples)");
            }
            return Ok(());
        }
        BenchCmd::KubeServe {
            nodes,
            gpus_per_node,
            pods,
        } => return kube::serve(nodes, gpus_per_node, pods),
        BenchCmd::Kube {
            nodes,
            gpus_per_node,
            pods,
            binds,
            output,
        } => return kube::run(nodes, gpus_per_node, pods, binds, output),
        BenchCmd::Slurm {
            nodes,
            gpus_per_node,
            jobs,
            refreshes,
            output,
        } => {
            let r = in_scratch("slurm", |dir| {
                gantry::bench::slurm::run(&gantry::bench::slurm::SlurmBenchConfig {
                    nodes: nodes.max(1),
                    gpus_per_node: gpus_per_node.max(1),
                    jobs,
                    refreshes: refreshes.max(1),
                    dir: dir.to_path_buf(),
                })
            })?;
            if !json_asked(&r, output)? {
                println!(
                    "Slurm cluster (slurmrestd {} JSON recorded from Slurm 22.05, scaled): {} nodes, {} GPUs, {} jobs ({} running, {} of them gantry's), {:.1} MB per refresh",
                    r.api, r.nodes, r.gpus, r.jobs, r.running_jobs, r.gantry_runs, r.bytes as f64 / 1e6
                );
                println!(
                    "read (3 GETs + parse): p50 {:.0} ms, max {:.0} ms",
                    r.read_p50_ms, r.read_max_ms
                );
                println!(
                    "pool worker refresh: cold {:.0} ms ({} events), steady p50 {:.0} ms, max {:.0} ms",
                    r.cold_refresh_ms, r.cold_events, r.refresh_p50_ms, r.refresh_max_ms
                );
                println!(
                    "daemon start to every node up and {} foreign GPUs held: {:.2} s",
                    r.foreign_gpus_held, r.first_view_s
                );
            }
            return Ok(());
        }
        BenchCmd::Tui {
            gpus,
            jobs,
            frames,
            seconds,
            log_mb_per_s,
            output,
        } => {
            if !(seconds.is_finite() && (0.5..=3600.0).contains(&seconds)) {
                return Err(format!("--seconds {seconds}: expected 0.5..=3600"));
            }
            if let Some(rate) = log_mb_per_s {
                if !(rate.is_finite() && (0.01..=1000.0).contains(&rate)) {
                    return Err(format!("--log-mb-per-s {rate}: expected 0.01..=1000"));
                }
                let r = gantry::bench::logview::run(rate, seconds, 160, 48)
                    .map_err(|e| format!("bench tui --log-mb-per-s: {e}"))?;
                if output.is_data() {
                    return print_as(output, &r);
                }
                let mib = |m: Option<f64>| m.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"));
                println!(
                    "bench tui, log view: a job writing {:.1} MB/s (asked {:.1}) for {:.0} s, followed at 160×48: frame p50 {:.2} ms, p99 {:.2} ms ({} frames); fetch p50 {:.2} ms, p99 {:.2} ms; the pane held at most {} lines, {} KiB; RSS {} after 1 s, {} at the end",
                    r.written_mb_per_s, r.asked_mb_per_s, r.seconds, r.frame_p50_ms, r.frame_p99_ms, r.frames,
                    r.fetch_p50_ms, r.fetch_p99_ms, r.max_lines_held, r.max_bytes_held / 1024,
                    mib(r.rss_after_1s_mib), mib(r.rss_end_mib)
                );
                return Ok(());
            }
            let r = gantry::bench::tui::run(gpus, jobs, 160, 48, frames.max(1));
            let l = gantry::bench::tui::idle_and_live(gpus, jobs, seconds);
            let rss = gantry::bench::peak_rss_mib();
            if output.is_data() {
                #[derive(serde::Serialize)]
                struct Both<'a> {
                    #[serde(flatten)]
                    frames: &'a gantry::bench::tui::TuiBenchReport,
                    #[serde(flatten)]
                    idle_live: &'a gantry::bench::tui::IdleLiveReport,
                    peak_rss_mib: Option<f64>,
                }
                return print_as(
                    output,
                    &Both {
                        frames: &r,
                        idle_live: &l,
                        peak_rss_mib: rss,
                    },
                );
            }
            println!(
                "bench tui: {} GPUs, {} jobs, {}×{}: frame p50 {:.2} ms, p99 {:.2} ms; key to frame p99 {:.2} ms ({} frames)",
                r.gpus, r.jobs, r.width, r.height, r.frame_p50_ms, r.frame_p99_ms, r.key_to_frame_p99_ms, r.frames
            );
            let views: Vec<String> = r
                .view_p99_ms
                .iter()
                .map(|(v, ms)| format!("{v} {ms:.2}"))
                .collect();
            println!("frame p99 by view, ms: {}", views.join(", "));
            let first: Vec<String> = r
                .first_frame_ms
                .iter()
                .map(|(v, ms)| format!("{v} {ms:.2}"))
                .collect();
            println!(
                "first frame on a new snapshot (not in the figures above), ms: {}",
                first.join(", ")
            );
            println!(
                "idle {:.0} s: {} bytes written, {:.2}% of a core; live (data change every second) {:.0} s: {:.0} bytes/s, {:.2}% of a core; peak RSS {}",
                l.seconds,
                l.idle_bytes_written,
                l.idle_cpu_pct,
                l.seconds,
                l.live_bytes_per_sec,
                l.live_cpu_pct,
                rss.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"))
            );
            return Ok(());
        }
    };
    if nodes == 0 || nodes > 1_000_000 {
        return Err(format!("--nodes {nodes}: expected 1..=1000000"));
    }
    let cfg = SchedBenchConfig {
        nodes,
        pending,
        policy: policy.parse()?,
        baseline: Policy::Spread,
        seed,
        gangs,
    };
    let r = run_sched(&cfg);
    if output.is_data() {
        return print_as(output, &r);
    }
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
        "full cycle: {} pending, {} running, {} teams in cohorts, fair share: {:.0} ms \
         ({} starts, {} preemptions, {} reservation, {} explanations)",
        c.pending,
        c.running,
        c.teams,
        c.cycle_ms,
        c.starts,
        c.preemptions,
        c.reservations,
        c.explanations
    );
    println!(
        "{} places at {:.2}× the {} baseline's rate; peak RSS {}",
        r.policy,
        r.speed_vs_baseline,
        r.baseline_policy,
        r.peak_rss_mib
            .map_or("n/a".to_string(), |m| format!("{m:.0} MiB"))
    );
    Ok(())
}

fn api(clients: usize, jobs: usize, floor: bool, output: Output) -> Result<(), String> {
    if clients == 0 || clients > 1024 {
        return Err(format!("--clients {clients}: expected 1..=1024"));
    }
    let r = in_scratch("api", |dir| {
        gantry::bench::api::run(&gantry::bench::api::ApiBenchConfig {
            dir: dir.to_path_buf(),
            clients,
            jobs,
            floor,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench api: {} durable submissions over the Unix socket from {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms; journal holds {}; {} scheduling cycles ran meanwhile, {:.2} s in all",
        r.jobs, r.clients, r.durable_submits_per_sec, r.p50_ms, r.p99_ms, r.journaled, r.cycles, r.cycle_seconds
    );
    if let Some(f) = &r.floor {
        println!(
            "floor: the same clients against a server that answers at once: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms; gantry reaches {:.0}% of it",
            f.submits_per_sec,
            f.p50_ms,
            f.p99_ms,
            100.0 * r.durable_submits_per_sec / f.submits_per_sec.max(1e-9)
        );
    }
    Ok(())
}

fn journal(
    db: PathBuf,
    clients: usize,
    jobs: usize,
    print_acks: bool,
    output: Output,
) -> Result<(), String> {
    if clients == 0 || clients > 1024 {
        return Err(format!("--clients {clients}: expected 1..=1024"));
    }
    let cfg = gantry::bench::journal::JournalBenchConfig {
        db,
        clients,
        jobs,
        print_acks,
    };
    let r = gantry::bench::journal::run(&cfg).map_err(|e| e.to_string())?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench journal: {} durable submissions from {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
        r.jobs, r.clients, r.durable_submits_per_sec, r.p50_ms, r.p99_ms
    );
    println!(
        "restart with {} jobs in the journal: rows loaded in {:.0} ms; engine rebuilt and first scheduling decision in {:.0} ms",
        r.reloaded_jobs, r.reload_ms, r.restart_to_first_decision_ms
    );
    Ok(())
}

fn cli(calls: usize, jobs: usize, output: Output) -> Result<(), String> {
    if calls == 0 {
        return Err("--calls 0: expected at least 1".to_string());
    }
    let r = in_scratch("cli", |dir| {
        gantry::bench::cli::run(&gantry::bench::cli::CliBenchConfig {
            dir: dir.to_path_buf(),
            calls,
            jobs,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench cli: {} calls each, spawn to exit, the daemon holding {} jobs",
        r.calls, r.jobs_held
    );
    for (what, t) in [
        ("gantry jobs -o json", &r.list),
        ("gantry submit FILE", &r.submit),
        ("gantry --version (no daemon reached)", &r.process_only),
    ] {
        println!(
            "  {what}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            t.p50_ms, t.p99_ms, t.max_ms
        );
    }
    Ok(())
}

fn memory(jobs: usize, history: usize, output: Output) -> Result<(), String> {
    let r = in_scratch("memory", |dir| {
        gantry::bench::memory::run(&gantry::bench::memory::MemoryBenchConfig {
            dir: dir.to_path_buf(),
            jobs,
            history,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench memory: {} jobs submitted, run and finished in {:.0} s ({:.0}/s, group commits of 1,000); journal {:.0} MiB",
        r.jobs, r.seconds, r.jobs_per_sec, r.journal_mib
    );
    println!(
        "in memory: {} jobs (live + the last {} finished); resident {:.0} MiB ({:.0} MiB its own, the rest the binary's code), peak {:.0} MiB",
        r.jobs_in_memory, r.history_kept, r.rss_mib, r.anon_mib, r.peak_rss_mib
    );
    println!(
        "restart on that journal: {:.0} ms, {} jobs loaded; resident {:.0} MiB",
        r.restart_ms, r.restart_jobs_in_memory, r.rss_after_restart_mib
    );
    Ok(())
}

fn local(launches: usize, output: Output) -> Result<(), String> {
    let dir = std::env::temp_dir().join(format!("gantry-bench-local-{}", std::process::id()));
    let r = gantry::bench::local::run(&dir, launches);
    let _ = std::fs::remove_dir_all(&dir);
    let r = r?;
    if output.is_data() {
        return print_as(output, &r);
    }
    match (r.telemetry_sample_p50_ms, r.telemetry_sample_p99_ms) {
        (Some(p50), Some(p99)) => println!(
            "telemetry: one NVML sample of {} GPU(s): p50 {p50:.2} ms, p99 {p99:.2} ms ({}; opening NVML {:.0} ms, once)",
            r.gpus,
            r.nvml,
            r.nvml_open_ms.unwrap_or(0.0)
        ),
        _ => println!("telemetry: not measured: {}", r.nvml),
    }
    println!(
        "local job, placement to running (cycle start to its first output line): p50 {:.2} ms, p99 {:.2} ms over {} jobs",
        r.placement_to_running_p50_ms, r.placement_to_running_p99_ms, r.launches
    );
    Ok(())
}

fn starts(
    jobs: usize,
    slots: usize,
    seconds: f64,
    ticks_only: bool,
    output: Output,
) -> Result<(), String> {
    if !(seconds.is_finite() && (0.0..=3600.0).contains(&seconds)) || jobs == 0 {
        return Err(format!(
            "--jobs {jobs} --seconds {seconds}: expected at least one job of 0 to 3600 seconds"
        ));
    }
    let r = gantry::bench::starts::run(&gantry::bench::starts::StartsBenchConfig {
        jobs,
        slots,
        seconds,
        ticks_only,
        dir: std::env::temp_dir().join(format!("gantry-bench-starts-{}", std::process::id())),
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "{} jobs of {}s on {} slots ({}): makespan {:.1} s, ideal {:.1} s ({:.2}×); a freed slot waited {:.0} ms a job on average; {} cycles",
        r.jobs,
        r.job_seconds,
        r.slots,
        if r.woken_by_run_ends { "woken by run ends" } else { "clock ticks only" },
        r.makespan_s,
        r.ideal_s,
        r.ratio,
        r.idle_per_job_ms,
        r.cycles
    );
    Ok(())
}

/// Runs `f` in a scratch directory of its own, removed afterwards.
fn in_scratch<T>(
    name: &str,
    f: impl FnOnce(&std::path::Path) -> Result<T, String>,
) -> Result<T, String> {
    let dir = std::env::temp_dir().join(format!("gantry-bench-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let r = f(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    r
}

/// `bench kube` needs the Kubernetes API double, which only a build with `--features testkit`
/// carries: release builds leave the test double out.
#[cfg(feature = "testkit")]
mod kube {
    use super::{json_asked, Output};

    pub fn serve(nodes: usize, gpus_per_node: u32, pods: usize) -> Result<(), String> {
        gantry::bench::kube::serve(&gantry::bench::kube::KubeBenchConfig {
            nodes,
            gpus_per_node,
            pods,
            binds: 0,
        })
    }

    pub fn run(
        nodes: usize,
        gpus_per_node: u32,
        pods: usize,
        binds: usize,
        output: Output,
    ) -> Result<(), String> {
        let r = gantry::bench::kube::run(&gantry::bench::kube::KubeBenchConfig {
            nodes: nodes.max(1),
            gpus_per_node: gpus_per_node.max(1),
            pods,
            binds,
        })?;
        if !json_asked(&r, output)? {
            println!(
                "Kubernetes cluster (gantry's test API server, in a child process): {} nodes, {} GPUs, {} pods ({} holding a GPU)",
                r.nodes, r.gpus, r.pods, r.gpu_pods
            );
            println!(
                "connect to Nodes and Pods reflectors full: {:.2} s; inventory from them: {:.0} ms ({} GPUs held found); peak RSS {:.0} MiB",
                r.ready_s, r.inventory_ms, r.held, r.peak_rss_mib
            );
            if r.binds > 0 {
                println!(
                    "{} gantry pods created, bound and seen running through a pool's runner: {:.2} s ({:.0} pods/s)",
                    r.binds,
                    r.bind_s,
                    r.binds as f64 / r.bind_s.max(1e-9)
                );
            }
        }
        Ok(())
    }
}

#[cfg(not(feature = "testkit"))]
mod kube {
    use super::Output;

    const LEFT_OUT: &str = "this gantry was built without the Kubernetes API double that `bench kube` serves its cluster from; build it with `cargo build --release --features testkit` and run that binary";

    pub fn serve(_: usize, _: u32, _: usize) -> Result<(), String> {
        Err(LEFT_OUT.to_string())
    }

    pub fn run(_: usize, _: u32, _: usize, _: usize, _: Output) -> Result<(), String> {
        Err(LEFT_OUT.to_string())
    }
}

/// Prints `r` as JSON when asked; whether it did (else the caller prints its table).
fn json_asked<T: serde::Serialize>(r: &T, output: Output) -> Result<bool, String> {
    if !output.is_data() {
        return Ok(false);
    }
    print_as(output, r)?;
    Ok(true)
}
