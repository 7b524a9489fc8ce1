//! The command line as clap reads it: the global flags and every command with its arguments.
//! Each command's help ends with the exit codes.

use super::*;
use clap::{Parser, Subcommand};

/// gantry: a scheduler and operations console for GPU fleets.
#[derive(Parser)]
#[command(name = "gantry", version, about)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Option<Command>,
    /// Console theme: dark, light, 16color, high-contrast (also GANTRY_THEME). A file of the
    /// same name under the config dir's themes/ overrides any colour role.
    #[arg(long, env = "GANTRY_THEME")]
    pub(super) theme: Option<String>,
    /// Console keymap: default, vim (also GANTRY_KEYMAP). A file of the same name under the
    /// config dir's keymaps/ rebinds only the keys it names.
    #[arg(long, env = "GANTRY_KEYMAP")]
    pub(super) keymap: Option<String>,
    /// The daemon to talk to: a Unix socket path, http://HOST:PORT or https://HOST:PORT (also
    /// GANTRY_CONNECT; default: the socket `gantry info` shows). With no command, opens the
    /// console on it.
    #[arg(long, global = true, env = "GANTRY_CONNECT")]
    pub(super) connect: Option<String>,
    /// The daemon (and so the clusters and hosts behind it) of this console.toml context —
    /// its address, token file and certificate fingerprint (also GANTRY_CONTEXT); given
    /// before the command: `gantry --context prod jobs`. `:ctx NAME` switches in the console.
    #[arg(long, env = "GANTRY_CONTEXT")]
    pub(super) context: Option<String>,
    /// Console without dangerous actions (preempt, cancel, hold, release): they leave the keys
    /// and the help, and an RO badge shows (also GANTRY_READONLY=1).
    #[arg(long, env = "GANTRY_READONLY", value_parser = clap::builder::BoolishValueParser::new())]
    pub(super) readonly: bool,
    /// Console on the built-in SIMULATED demo fleet, whatever daemon answers. Plain `gantry`
    /// opens it only when no daemon answers and you have no fleet file of your own.
    #[arg(long)]
    pub(super) demo: bool,
    /// Bearer token for a TCP daemon (also GANTRY_TOKEN).
    #[arg(long, global = true, env = "GANTRY_TOKEN", hide_env_values = true)]
    pub(super) token: Option<String>,
    /// Trust the https:// daemon whose certificate has this SHA-256 fingerprint (also
    /// GANTRY_TLS_FINGERPRINT): the one `gantry token create` and the daemon's start line print
    /// for the certificate it made itself. Without it, the system's CAs must vouch for it.
    #[arg(long, global = true, env = "GANTRY_TLS_FINGERPRINT")]
    pub(super) tls_fingerprint: Option<String>,
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// Replay a public cluster trace through the scheduler core.
    #[command(subcommand)]
    Replay(replay::ReplayCmd),
    /// A seeded week of mixed work on the SIMULATED fleet: the naive setup vs gantry — the
    /// daemon itself, over the simulated backend (utilization, cost per useful GPU-hour, waits,
    /// spot, failures, elasticity).
    Sim(sim::SimArgs),
    /// Benchmarks that print the figures gantry reports.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Job specs (gantry YAML, a superset of SkyPilot task YAML).
    #[command(subcommand)]
    Spec(spec::SpecCmd),
    /// Runs the daemon: journal, scheduler, simulated backend, API on the Unix socket.
    Daemon(Box<daemon::DaemonArgs>),
    /// Submits a job file (gantry YAML or SkyPilot task YAML) to the daemon.
    Submit {
        /// The job file; `-` reads it from stdin.
        file: std::path::PathBuf,
        /// Team (overrides the file's).
        #[arg(long, add = complete::team_names())]
        team: Option<String>,
        /// Priority class (overrides the file's).
        #[arg(long)]
        priority: Option<String>,
        /// table, json, or id (the job id alone, as `sbatch --parsable` prints it).
        #[arg(short, long, value_enum, default_value_t = SubmitOutput::Table)]
        output: SubmitOutput,
        /// NAME=VALUE for the job's `envs` (overrides the file's; gives those it leaves
        /// empty). Repeatable.
        #[arg(long = "env", value_name = "NAME=VALUE")]
        envs: Vec<String>,
        /// A dotenv file of NAME=VALUE lines for the job's `envs`, as `sky launch --env-file`
        /// reads it; `--env` overrides what it gives. Repeatable.
        #[arg(long = "env-file", value_name = "PATH")]
        env_files: Vec<std::path::PathBuf>,
        /// A secret for the job's `secrets`: NAME (its value read from your environment) or
        /// NAME=VALUE. Never shown by gantry. Repeatable.
        #[arg(long = "secret", value_name = "NAME[=VALUE]")]
        secrets: Vec<String>,
        /// GPUs per node, as the file's `accelerators` (e.g. H100:8, or 8 for any model);
        /// overrides the file's.
        #[arg(long, value_name = "MODEL:COUNT")]
        gpus: Option<String>,
        /// Nodes of the gang; overrides the file's `num_nodes`.
        #[arg(long, value_name = "N")]
        num_nodes: Option<u16>,
        /// Submit nothing: say where the job would land now, when it would start and whose
        /// start it would move (the daemon's cycle run forward with it and without it).
        #[arg(long)]
        dry_run: bool,
    },
    /// Services: a task's replicas behind an endpoint, scaled with their traffic.
    #[command(subcommand)]
    Serve(serve::ServeCmd),
    /// Lists services: replicas ready, QPS, latency, GPUs, $/h.
    Services {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// One service: its policy, traffic, last scaling decision and each replica.
    Service {
        name: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Lists jobs, queue order first.
    Jobs {
        /// State(s), comma-separated: pending, held, running, preempting, completed, failed, cancelled.
        #[arg(long)]
        state: Option<String>,
        #[arg(long, add = complete::team_names())]
        team: Option<String>,
        #[arg(long)]
        class: Option<String>,
        /// Submitted by this user (`me`: you — the Unix user on the socket, your token's
        /// label over TCP), as `squeue -u`.
        #[arg(short, long)]
        user: Option<String>,
        #[arg(long)]
        limit: Option<usize>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// After the list, print each job again as it changes (as `kubectl get -w`).
        #[arg(short, long, conflicts_with = "limit")]
        watch: bool,
    },
    /// One job: spec, placement, events.
    Job {
        #[arg(add = complete::job_ids())]
        id: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A job's stdout and stderr, from every node it ran on or one (`--node K`); `-f`
    /// follows until it ends.
    Logs(logs::LogsArgs),
    /// Runs a command inside a running job (its working directory and environment) on one
    /// of its nodes; exits with the command's status.
    Exec(exec::ExecArgs),
    /// A shell inside a running job, on one of its nodes (as `kubectl exec -it`, `sky ssh`).
    Ssh(exec::SshArgs),
    /// Why a job waits (or where it runs).
    Explain {
        #[arg(add = complete::job_ids())]
        id: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Cancels jobs.
    Cancel {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        /// Show what it would do (which jobs start sooner or later, $/h, teams' GPUs), from
        /// the daemon's own cycle run forward, and do nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Preempts running jobs: signal, grace, requeue from the checkpoint.
    Preempt {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        /// Show what it would do (which jobs start sooner or later, $/h, teams' GPUs), from
        /// the daemon's own cycle run forward, and do nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Holds pending jobs (they keep their place but do not start).
    Hold {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        /// Show what it would do (which jobs start sooner or later, $/h, teams' GPUs), from
        /// the daemon's own cycle run forward, and do nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Releases held jobs.
    Release {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        /// Show what it would do (which jobs start sooner or later, $/h, teams' GPUs), from
        /// the daemon's own cycle run forward, and do nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Moves a job to another priority class.
    Prio {
        #[arg(add = complete::job_ids())]
        id: String,
        class: String,
        /// Show what it would do, and do nothing.
        #[arg(long)]
        dry_run: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Chargeback: what jobs cost in a window, by team, project or job.
    Report {
        /// Start: a date (2026-11-01) or time (2026-11-01T09:30) in the fleet's time zone,
        /// RFC 3339 (2026-11-01T09:30:00Z), a duration before now (24h, 7d), or seconds on
        /// the daemon's clock. Default: the beginning.
        #[arg(long)]
        since: Option<String>,
        /// End (same forms). Default: now.
        #[arg(long)]
        until: Option<String>,
        /// team, project, job, user (who submitted) or experiment (MLflow's, the jobs report to).
        #[arg(long, default_value = "team", value_parser = ["team", "project", "job", "user", "experiment"])]
        by: String,
        #[arg(long, value_enum, default_value_t = history::ReportFormat::Table)]
        format: history::ReportFormat,
        /// The same as `--format json`.
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Finished jobs from the journal with each run: nodes, start and end, how it ended,
    /// what it cost (as Slurm's sacct).
    History(audit::HistoryArgs),
    /// Teams: quota, usage, borrowing, spend rate, this month's spend against the budget.
    Teams {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// After the list, print each team again as it changes.
        #[arg(short, long)]
        watch: bool,
    },
    /// The daemon's events; `-f/--follow` keeps printing new ones.
    Events {
        #[arg(short, long)]
        follow: bool,
        /// Only this job's events.
        #[arg(long)]
        job: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Jobs whose GPUs sit idle, as a plan with an id: a dry run unless --apply. `--apply
    /// PLAN` applies the plan shown earlier with that id; `--apply` alone shows the plan now
    /// and applies that one. Either way only the jobs shown are touched.
    Reclaim {
        #[arg(long, num_args = 0..=1, default_missing_value = "")]
        apply: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// API tokens for TCP clients.
    #[command(subcommand)]
    Token(token::TokenCmd),
    /// Prints a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions { shell: clap_complete::Shell },
    /// The manual page (roff) of gantry on stdout; with --dir, one page per command written
    /// there (`gantry man --dir /usr/local/share/man/man1`, then `man gantry-submit`).
    Man {
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
    /// The fleet: live from the daemon when one answers, else the fleet file in force.
    Fleet {
        /// A fleet file (default: the one `gantry info` shows, else the built-in).
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// Print the built-in fleet file (a documented starting point) and exit.
        #[arg(long)]
        print_default: bool,
        /// Print a fleet file for this host alone (GPUs discovered through NVML) and exit.
        #[arg(long, conflicts_with = "print_default")]
        print_local: bool,
        /// One pool of the live fleet node by node and GPU by GPU: its index in `gantry
        /// fleet` or its path.
        #[arg(long, conflicts_with_all = ["print_default", "config"], add = complete::pool_paths())]
        pool: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
        /// The live fleet's pools, then each pool again as it changes.
        #[arg(short, long, conflicts_with_all = ["print_default", "print_local", "config", "pool"])]
        watch: bool,
        /// One node of the live fleet GPU by GPU over time (`--range`): utilization, VRAM,
        /// power and temperature, and who is on each GPU.
        #[arg(long, conflicts_with_all = ["print_default", "print_local", "config", "pool", "watch"])]
        node: Option<String>,
        /// With --node: the last 5m, 1h or 24h.
        #[arg(long, default_value = "1h", requires = "node")]
        range: String,
    },
    /// The local host's GPUs through NVML (or why they cannot be read).
    Gpus {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The clouds the fleet file's pools buy from: `check` (credentials, regions, zones,
    /// images) and `ls` (every instance gantry owns, found by its tags).
    #[command(subcommand)]
    Cloud(cloud::CloudCmd),
    /// A Slurm cluster through slurmrestd: partitions, nodes with their GPUs (GRES) and state,
    /// and the queue with Slurm's reasons in plain words. The token comes from SLURM_JWT
    /// (`scontrol token username=USER`; slurmrestd takes no root token).
    Slurm {
        /// slurmrestd's address: http://HOST:PORT or unix:/PATH (also SLURMRESTD).
        #[arg(long, env = "SLURMRESTD")]
        slurmrestd: String,
        /// The Slurm user the token belongs to (default: $USER).
        #[arg(long)]
        user: Option<String>,
        /// Print fleet-file pools for the cluster's GPU nodes instead (one per partition, GPU
        /// type and node shape), to paste into fleet.toml.
        #[arg(long)]
        fleet: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// A Kubernetes cluster's GPU nodes: GPUs (device plugin, MIG), models (GPU Feature
    /// Discovery labels), pools, zones, which nodes take work, and the pods holding GPUs.
    /// Connects as kubectl does (KUBECONFIG or ~/.kube/config, or in-cluster).
    Kube {
        /// A kubeconfig file (else KUBECONFIG, ~/.kube/config, or the in-cluster account).
        #[arg(long)]
        kubeconfig: Option<std::path::PathBuf>,
        /// The kubeconfig context (else the current one).
        #[arg(long)]
        context: Option<String>,
        /// The node label whose value groups nodes into pools.
        #[arg(long)]
        pool_label: Option<String>,
        /// The node label naming its network block (leaf switch), as Kueue's topology-aware
        /// scheduling reads it.
        #[arg(long)]
        block_label: Option<String>,
        /// Print fleet-file pools for the cluster's GPU nodes (by pool label, zone, model and
        /// shape, with their blocks and NVLink domains) and exit.
        #[arg(long)]
        fleet: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The agent on an SSH host: the daemon starts it over SSH (`provider = "ssh"` pools) and
    /// speaks to it on stdin/stdout. Not for interactive use.
    Agent {
        /// Where it keeps its runs and logs (default ~/.gantry/agent/HOSTNAME).
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
        /// How often it samples the host's GPUs (NVML) for the daemon.
        #[arg(long, default_value = "2s")]
        sample_every: String,
        /// The cloud's instance metadata service to watch for notices of this host's end
        /// (EC2's spot interruption and rebalance): the daemon passes it for spot nodes.
        #[arg(long)]
        notices: Option<String>,
        /// Remove an ended job's logs this long after its last write (`[logs] keep_for`).
        #[arg(long)]
        keep_logs: Option<String>,
        /// Cut each ended job's logs to their last N MiB (`[logs] max_job_mb`).
        #[arg(long)]
        max_job_logs_mb: Option<u64>,
        /// Keep this host's logs of ended jobs under N MiB, oldest removed first.
        #[arg(long)]
        max_logs_mb: Option<u64>,
    },
    /// What `gantry exec` runs on a job's host: becomes the command inside the job's run.
    /// Not for interactive use.
    #[command(name = "agent-enter", hide = true)]
    AgentEnter {
        /// The agent's runs directory (default ~/.gantry/agent/HOSTNAME/runs).
        #[arg(long)]
        runs: Option<std::path::PathBuf>,
        #[arg(long)]
        job: i64,
        #[arg(long)]
        tty: bool,
        #[arg(last = true)]
        argv: Vec<String>,
    },
    /// Where gantry keeps its files (XDG paths).
    Info {
        /// Print the documented console.toml (theme, keymap, readonly, mouse) and exit.
        #[arg(long)]
        print_console: bool,
        /// Print only the fleet file's path (where `gantry fleet --print-local` should go).
        #[arg(long)]
        fleet_file: bool,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// What every command's help ends with.
const EXIT_CODES: &str = "Exit codes: 0 done, 1 the daemon failed, 2 bad input, 3 no such job, 4 not allowed, 5 no daemon to reach, 6 the job's state does not allow it.";

/// The command line as clap builds it, every command's help ending with the exit codes.
pub(super) fn command() -> clap::Command {
    use clap::CommandFactory;
    fn with_codes(c: clap::Command) -> clap::Command {
        c.after_help(EXIT_CODES).mut_subcommands(with_codes)
    }
    with_codes(Cli::command())
}
