//! `gantry bench …`

use super::{print_as, Output};
use clap::Subcommand;
use std::path::PathBuf;

mod backends;
mod engine;
use backends::{cloud, kube, local, serve, slurm, ssh, telemetry};
use engine::{api, cli, journal, memory, sched, sched_eta, soak, starts, tui};

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
        /// Time start estimates instead: every waiting job's, the scheduling cycle run
        /// forward within a time box of this many milliseconds (as the daemon's worker does:
        /// 1500 for its three runs together).
        #[arg(long, value_name = "MS", num_args = 0..=1, default_missing_value = "1000")]
        eta: Option<f64>,
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
    /// One daemon (a process of its own) under normal and hostile traffic at once — API
    /// submissions, keyed 100 KB bodies, 10,000-job history pages, slow connections, slow and
    /// large uploads at a service's endpoint, exec sessions past their cap — printing its
    /// resident memory, descriptors and Unix-socket API latency every interval, and at the end
    /// whether they stayed flat (RSS within 2× of the first interval, API p99 < 50 ms) and
    /// whether any acknowledged job was lost.
    Soak {
        /// How long, as `30m`, `90s`.
        #[arg(long, default_value = "30m")]
        duration: String,
        /// How often the figures are taken.
        #[arg(long, default_value = "1m")]
        every: String,
        /// Only these kinds of hostile traffic (comma-separated: keyed, history, slow-api,
        /// slow-endpoint, uploads, exec); all by default.
        #[arg(long, value_delimiter = ',')]
        only: Vec<String>,
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
        /// Finished jobs kept in memory (the daemon keeps 1,000 whole; its listings a row for 2,000).
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
        /// Then rounds of `--round-jobs` short jobs, the resident memory after each (flat
        /// when nothing the daemon keeps follows the history).
        #[arg(long, default_value_t = 0)]
        rounds: usize,
        #[arg(long, default_value_t = 1_000)]
        round_jobs: usize,
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
        /// Then rounds of `--round-jobs` short jobs through a daemon's state over the first
        /// 16 nodes (each pod runs 200 ms), the resident memory after each (flat when
        /// nothing the daemon keeps follows the history).
        #[arg(long, default_value_t = 0)]
        rounds: usize,
        #[arg(long, default_value_t = 1_000)]
        round_jobs: usize,
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
        /// Pods started end after 200 ms (`bench kube --rounds`).
        #[arg(long, default_value_t = 0)]
        rounds: usize,
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
    match cmd {
        BenchCmd::Sched {
            nodes,
            pending,
            policy,
            gangs: _,
            seed,
            eta: Some(box_ms),
            output,
        } => sched_eta(nodes, pending, policy, seed, box_ms, output),
        BenchCmd::Sched {
            nodes,
            pending,
            policy,
            gangs,
            seed,
            eta: None,
            output,
        } => sched(nodes, pending, policy, gangs, seed, output),
        BenchCmd::Journal {
            db,
            clients,
            jobs,
            print_acks,
            output,
        } => journal(db, clients, jobs, print_acks, output),
        BenchCmd::Local { launches, output } => local(launches, output),
        BenchCmd::Starts {
            jobs,
            slots,
            seconds,
            ticks_only,
            output,
        } => starts(jobs, slots, seconds, ticks_only, output),
        BenchCmd::Memory {
            jobs,
            history,
            output,
        } => memory(jobs, history, output),
        BenchCmd::Cli {
            calls,
            jobs,
            output,
        } => cli(calls, jobs, output),
        BenchCmd::Api {
            clients,
            jobs,
            floor,
            output,
        } => api(clients, jobs, floor, output),
        BenchCmd::Replica { port, log } => {
            let started = std::time::SystemTime::now();
            gantry::bench::serve::replica(port, &log, started)
        }
        BenchCmd::Serve {
            rate,
            seconds,
            output,
        } => serve(rate, seconds, output),
        BenchCmd::Soak {
            duration,
            every,
            only,
            output,
        } => soak(&duration, &every, &only, output),
        BenchCmd::Telemetry {
            hosts,
            gpus,
            rounds,
            output,
        } => telemetry(hosts, gpus, rounds, output),
        BenchCmd::Cloud {
            nodes,
            endpoint,
            output,
        } => cloud(nodes, endpoint, output),
        BenchCmd::Ssh {
            hosts,
            ssh_config,
            identity_file,
            launches,
            jobs,
            rounds,
            round_jobs,
            output,
        } => ssh(
            hosts,
            ssh_config,
            identity_file,
            (launches, jobs),
            (rounds, round_jobs),
            output,
        ),
        BenchCmd::KubeServe {
            nodes,
            gpus_per_node,
            pods,
            rounds,
        } => kube::serve(nodes, gpus_per_node, pods, rounds),
        BenchCmd::Kube {
            nodes,
            gpus_per_node,
            pods,
            binds,
            rounds,
            round_jobs,
            output,
        } => kube::run(
            (nodes, gpus_per_node, pods, binds),
            (rounds, round_jobs),
            output,
        ),
        BenchCmd::Slurm {
            nodes,
            gpus_per_node,
            jobs,
            refreshes,
            output,
        } => slurm(nodes, gpus_per_node, jobs, refreshes, output),
        BenchCmd::Tui {
            gpus,
            jobs,
            frames,
            seconds,
            log_mb_per_s,
            output,
        } => tui(gpus, jobs, frames, seconds, log_mb_per_s, output),
    }
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

/// Prints `r` as JSON when asked; whether it did (else the caller prints its table).
fn json_asked<T: serde::Serialize>(r: &T, output: Output) -> Result<bool, String> {
    if !output.is_data() {
        return Ok(false);
    }
    print_as(output, r)?;
    Ok(true)
}
