//! Command-line interface. Every command prints a table for people or JSON for scripts
//! (`--output json`); errors go to stderr as one line. Exit codes: 0 done; 1 the daemon
//! failed; 2 bad input (a file, an argument, a spec); 3 no such job; 4 not allowed (token,
//! role, team); 5 the daemon cannot be reached; 6 the job's state does not allow it.

mod audit;
mod bench;
mod cloud;
mod complete;
mod daemon;
mod exec;
mod fleet;
mod history;
mod kube;
mod logs;
mod node;
mod remote;
mod replay;
mod serve;
mod sim;
mod slurm;
mod spec;
mod submit;
mod table;
mod watch;

use clap::{Parser, Subcommand, ValueEnum};
use gantry::api::JobFilter;
use serde::Serialize;
use std::process::ExitCode;

/// gantry: a scheduler and operations console for GPU fleets.
#[derive(Parser)]
#[command(name = "gantry", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Console theme: dark, light, 16color, high-contrast (also GANTRY_THEME). A file of the
    /// same name under the config dir's themes/ overrides any colour role.
    #[arg(long, env = "GANTRY_THEME")]
    theme: Option<String>,
    /// Console keymap: default, vim (also GANTRY_KEYMAP). A file of the same name under the
    /// config dir's keymaps/ rebinds only the keys it names.
    #[arg(long, env = "GANTRY_KEYMAP")]
    keymap: Option<String>,
    /// The daemon to talk to: a Unix socket path, http://HOST:PORT or https://HOST:PORT (also
    /// GANTRY_CONNECT; default: the socket `gantry info` shows). With no command, opens the
    /// console on it.
    #[arg(long, global = true, env = "GANTRY_CONNECT")]
    connect: Option<String>,
    /// The daemon (and so the clusters and hosts behind it) of this console.toml context —
    /// its address, token file and certificate fingerprint (also GANTRY_CONTEXT); given
    /// before the command: `gantry --context prod jobs`. `:ctx NAME` switches in the console.
    #[arg(long, env = "GANTRY_CONTEXT")]
    context: Option<String>,
    /// Console without dangerous actions (preempt, cancel, hold, release): they leave the keys
    /// and the help, and an RO badge shows (also GANTRY_READONLY=1).
    #[arg(long, env = "GANTRY_READONLY", value_parser = clap::builder::BoolishValueParser::new())]
    readonly: bool,
    /// Bearer token for a TCP daemon (also GANTRY_TOKEN).
    #[arg(long, global = true, env = "GANTRY_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Trust the https:// daemon whose certificate has this SHA-256 fingerprint (also
    /// GANTRY_TLS_FINGERPRINT): the one `gantry token create` and the daemon's start line print
    /// for the certificate it made itself. Without it, the system's CAs must vouch for it.
    #[arg(long, global = true, env = "GANTRY_TLS_FINGERPRINT")]
    tls_fingerprint: Option<String>,
}

/// A failed command: what to print and the exit code.
#[derive(Debug)]
pub struct CliError {
    pub code: u8,
    pub message: String,
}

impl CliError {
    pub fn usage(message: impl Into<String>) -> CliError {
        CliError {
            code: 2,
            message: message.into(),
        }
    }
}

impl From<String> for CliError {
    fn from(message: String) -> CliError {
        CliError::usage(message)
    }
}

/// How a command prints (`-o`), as kubectl's: a table, a wide table (every column, nothing
/// cut), or the daemon's own data as JSON or YAML.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Table,
    Wide,
    Json,
    Yaml,
}

impl Output {
    /// JSON or YAML: data for programs, not a table.
    pub fn is_data(self) -> bool {
        matches!(self, Output::Json | Output::Yaml)
    }
}

/// What `gantry submit` prints.
#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum SubmitOutput {
    Table,
    Json,
    Yaml,
    Id,
}

#[derive(Subcommand)]
enum Command {
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
    Daemon(daemon::DaemonArgs),
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
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Preempts running jobs: signal, grace, requeue from the checkpoint.
    Preempt {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Holds pending jobs (they keep their place but do not start).
    Hold {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Releases held jobs.
    Release {
        #[arg(add = complete::job_ids())]
        ids: Vec<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Moves a job to another priority class.
    Prio {
        #[arg(add = complete::job_ids())]
        id: String,
        class: String,
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
        /// team, project, job or user (who submitted).
        #[arg(long, default_value = "team", value_parser = ["team", "project", "job", "user"])]
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
    Token(remote::TokenCmd),
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
fn command() -> clap::Command {
    use clap::CommandFactory;
    fn with_codes(c: clap::Command) -> clap::Command {
        c.after_help(EXIT_CODES).mut_subcommands(with_codes)
    }
    with_codes(Cli::command())
}

pub fn main() -> ExitCode {
    // `COMPLETE=bash gantry` prints the shell's registration; the shell then runs gantry with
    // COMPLETE set at each <Tab>, answered here (job ids, teams, pools from the daemon).
    clap_complete::CompleteEnv::with_factory(command).complete();
    let cli = {
        use clap::FromArgMatches;
        let matches = command().get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    };
    // Rust ignores SIGPIPE, which turns `gantry … | head` into a panic on the next print; a
    // command that prints should simply stop, as every Unix tool does. Not so the daemon and
    // the console (which embeds one): there a client that hangs up must cost a failed write
    // on its own connection, never the process.
    let serves = matches!(
        cli.command,
        None | Some(Command::Daemon(_) | Command::Agent { .. })
    );
    if !serves {
        // SAFETY: called once at start, before any thread exists; SIG_DFL is always valid.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    let target = remote::Target {
        connect: cli.connect.clone(),
        token: cli.token.clone(),
        tls_fingerprint: cli.tls_fingerprint.clone(),
    };
    let target = match (&cli.context, &cli.connect) {
        (Some(_), Some(_)) => {
            let e = CliError::usage(
                "--context and --connect (or GANTRY_CONNECT) both name a daemon: give one"
                    .to_string(),
            );
            eprintln!("error: {}", e.message);
            std::process::exit(i32::from(e.code));
        }
        (Some(name), None) => match daemon::context_target(name, &target) {
            Ok(t) => t,
            Err(message) => {
                eprintln!("error: {message}");
                std::process::exit(i32::from(CliError::usage(message).code));
            }
        },
        (None, _) => target,
    };
    let result: Result<(), CliError> = match cli.command {
        None if std::io::IsTerminal::is_terminal(&std::io::stdout()) => daemon::console(
            cli.theme.as_deref(),
            cli.keymap.as_deref(),
            &target,
            cli.readonly,
        ),
        None => {
            println!(
                "gantry {}: a scheduler for GPU fleets. Run it in a terminal for the console; `gantry daemon`, `gantry submit FILE`, `gantry jobs`, `gantry replay openb|philly`, `gantry bench sched`; `gantry --help` for more.",
                env!("CARGO_PKG_VERSION")
            );
            Ok(())
        }
        Some(Command::Replay(cmd)) => replay::run(cmd).map_err(CliError::from),
        Some(Command::Bench(cmd)) => bench::run(cmd).map_err(CliError::from),
        Some(Command::Sim(args)) => sim::run(args).map_err(CliError::from),
        Some(Command::Spec(cmd)) => spec::run(cmd).map_err(CliError::from),
        Some(Command::Daemon(args)) => daemon::run(args).map_err(CliError::from),
        Some(Command::Agent {
            dir,
            sample_every,
            notices,
            keep_logs,
            max_job_logs_mb,
            max_logs_mb,
        }) => agent(
            dir,
            &sample_every,
            notices,
            (keep_logs, max_job_logs_mb, max_logs_mb),
        ),
        Some(Command::Submit {
            file,
            team,
            priority,
            output,
            envs,
            secrets,
            gpus,
            num_nodes,
        }) => submit::submit(
            &target,
            file,
            team,
            priority,
            output,
            &submit::Given {
                envs,
                secrets,
                gpus,
                num_nodes,
            },
        ),
        Some(Command::Jobs {
            state,
            team,
            class,
            user,
            output,
            watch: true,
            ..
        }) => remote::user_of(&target, user).and_then(|user| {
            let filter = JobFilter {
                state,
                team,
                class,
                user,
            };
            watch::jobs(&target, filter, output)
        }),
        Some(Command::Jobs {
            state,
            team,
            class,
            user,
            limit,
            output,
            ..
        }) => remote::user_of(&target, user)
            .and_then(|user| remote::jobs(&target, state, team, class, user, limit, output)),
        Some(Command::Job { id, output }) => remote::job(&target, &id, output),
        Some(Command::Explain { id, output }) => remote::explain(&target, &id, output),
        Some(Command::Logs(a)) => logs::logs(&target, a),
        Some(Command::Exec(a)) => exec::exec(&target, a),
        Some(Command::Ssh(a)) => exec::ssh(&target, a),
        Some(Command::AgentEnter {
            runs,
            job,
            tty,
            argv,
        }) => {
            let runs = runs.unwrap_or_else(|| gantry::backend::agent::default_dir().join("runs"));
            let why = gantry::backend::enter::enter(&runs, job, tty, &argv);
            eprintln!("gantry: {why}");
            std::process::exit(126);
        }
        Some(Command::Cancel { ids, output }) => remote::act(&target, "cancel", &ids, output),
        Some(Command::Preempt { ids, output }) => remote::act(&target, "preempt", &ids, output),
        Some(Command::Hold { ids, output }) => remote::act(&target, "hold", &ids, output),
        Some(Command::Release { ids, output }) => remote::act(&target, "release", &ids, output),
        Some(Command::Prio { id, class, output }) => remote::prio(&target, &id, &class, output),
        Some(Command::Serve(cmd)) => serve::serve(&target, cmd),
        Some(Command::Services { output }) => serve::list(&target, output),
        Some(Command::Service { name, output }) => serve::show(&target, &name, output),
        Some(Command::Teams {
            output,
            watch: true,
        }) => watch::teams(&target, output),
        Some(Command::Teams { output, .. }) => remote::teams(&target, output),
        Some(Command::History(a)) => audit::history(&target, a),
        Some(Command::Report {
            since,
            until,
            by,
            format,
            output,
        }) => {
            let format = match output {
                Output::Json => history::ReportFormat::Json,
                Output::Yaml => history::ReportFormat::Yaml,
                Output::Table | Output::Wide => format,
            };
            history::report(&target, since, until, &by, format)
        }
        Some(Command::Events {
            follow,
            job,
            limit,
            output,
        }) => history::events(&target, follow, job, limit, output),
        Some(Command::Reclaim { apply, output }) => remote::reclaim(&target, apply, output),
        Some(Command::Token(cmd)) => remote::token(&target, cmd),
        Some(Command::Completions { shell }) => {
            clap_complete::generate(shell, &mut command(), "gantry", &mut std::io::stdout());
            Ok(())
        }
        Some(Command::Man { dir }) => man(dir).map_err(CliError::from),
        Some(Command::Fleet {
            print_local: true, ..
        }) => {
            print!("{}", gantry::config::fleet::local_fleet_for_this_host());
            Ok(())
        }
        Some(Command::Fleet {
            watch: true,
            output,
            ..
        }) => watch::pools(&target, output),
        Some(Command::Fleet {
            node: Some(name),
            range,
            output,
            ..
        }) => target
            .client()
            .and_then(|mut c| node::node_live(&mut c, &name, &range, output)),
        Some(Command::Fleet {
            pool: Some(which),
            output,
            ..
        }) => target
            .client()
            .and_then(|mut c| remote::pool_live(&mut c, &which, output)),
        Some(Command::Fleet {
            config,
            print_default,
            output,
            ..
        }) => fleet_command(&target, config, print_default, output),
        Some(Command::Info {
            print_console: true,
            ..
        }) => {
            print!("{}", gantry::config::console::DEFAULT_CONSOLE);
            Ok(())
        }
        Some(Command::Info {
            fleet_file: true, ..
        }) => {
            println!("{}", gantry::config::paths::from_env().fleet_file.display());
            Ok(())
        }
        Some(Command::Info { output, .. }) => fleet::info(output).map_err(CliError::from),
        Some(Command::Gpus { output }) => gpus(output).map_err(CliError::from),
        Some(Command::Kube {
            kubeconfig,
            context,
            pool_label,
            block_label,
            fleet,
            output,
        }) => kube::show(
            kube::Reading {
                kubeconfig,
                context,
                pool_label,
                block_label,
            },
            fleet,
            output,
        )
        .map_err(CliError::from),
        Some(Command::Slurm {
            slurmrestd,
            user,
            fleet,
            output,
        }) => slurm::show(&slurmrestd, user, fleet, output).map_err(CliError::from),
        Some(Command::Cloud(cmd)) => cloud::run(cmd, &target),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            if !e.message.is_empty() {
                eprintln!("error: {}", e.message);
            }
            ExitCode::from(e.code)
        }
    }
}

/// `gantry fleet`: the live fleet when a daemon answers (or `--connect` names one), else the
/// fleet file in force.
fn fleet_command(
    target: &remote::Target,
    config: Option<std::path::PathBuf>,
    print_default: bool,
    output: Output,
) -> Result<(), CliError> {
    if config.is_none() && !print_default {
        let mut c = target.client()?;
        match remote::fleet_live(&mut c, output) {
            Err(e) if e.code == 5 && target.connect.is_none() => {
                eprintln!(
                    "(no daemon at {}: showing the fleet file in force)",
                    c.endpoint
                );
            }
            other => return other,
        }
    }
    fleet::run(config, print_default, output).map_err(CliError::from)
}

/// `gantry man`: the manual from the command line's own definitions (clap_mangen), so it never
/// disagrees with `--help`.
fn man(dir: Option<std::path::PathBuf>) -> Result<(), String> {
    let mut cmd = command();
    cmd.build();
    let Some(dir) = dir else {
        let mut out = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut out)
            .map_err(|e| e.to_string())?;
        use std::io::Write;
        return std::io::stdout().write_all(&out).map_err(|e| e.to_string());
    };
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: &str, page: clap::Command| -> Result<(), String> {
        let path = dir.join(format!("{name}.1"));
        let mut out = Vec::new();
        clap_mangen::Man::new(page)
            .title(name.to_string())
            .source(format!("gantry {}", env!("CARGO_PKG_VERSION")))
            .render(&mut out)
            .map_err(|e| e.to_string())?;
        std::fs::write(&path, out).map_err(|e| format!("{}: {e}", path.display()))
    };
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set() && s.get_name() != "help")
        .cloned()
        .collect();
    write("gantry", cmd)?;
    let mut n = 1;
    for s in subs {
        let name = format!("gantry-{}", s.get_name());
        write(&name, s)?;
        n += 1;
    }
    eprintln!("{n} manual pages written to {}", dir.display());
    Ok(())
}

/// Prints `value` as pretty JSON.
pub fn print_json(value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    println!("{text}");
    Ok(())
}

/// `value` as `-o json` (pretty) or `-o yaml` asks.
pub fn print_as(output: Output, value: &impl Serialize) -> Result<(), String> {
    if output != Output::Yaml {
        return print_json(value);
    }
    let text = serde_yaml_ng::to_string(value).map_err(|e| e.to_string())?;
    print!("{text}");
    Ok(())
}

/// One record of a stream (events, log lines) as text without its last newline: a JSON line,
/// or a YAML document.
pub fn record(output: Output, value: &impl Serialize) -> Result<String, String> {
    if output == Output::Yaml {
        let text = serde_yaml_ng::to_string(value).map_err(|e| e.to_string())?;
        Ok(format!("---\n{}", text.trim_end()))
    } else {
        serde_json::to_string(value).map_err(|e| e.to_string())
    }
}

/// Prints one record of a stream (see `record`).
pub fn print_record(output: Output, value: &impl Serialize) -> Result<(), String> {
    println!("{}", record(output, value)?);
    Ok(())
}

/// `--threads`, or every core.
pub fn threads_or_all(threads: Option<usize>) -> usize {
    threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `all`, or a comma-separated list of names.
pub fn parse_list<T>(text: &str, all: &[T]) -> Result<Vec<T>, String>
where
    T: std::str::FromStr<Err = String> + Clone,
{
    if text.trim().eq_ignore_ascii_case("all") {
        return Ok(all.to_vec());
    }
    text.split(',').map(str::parse).collect()
}

fn gpus(output: Output) -> Result<(), String> {
    use gantry::backend::local::nvml::{discover, Discovery};
    let d = discover();
    if output.is_data() {
        return print_as(output, &d);
    }
    match d {
        Discovery::Unavailable { reason } => println!("{reason}"),
        Discovery::Available { driver, gpus } => {
            println!("NVIDIA driver {driver}, {} GPU(s)", gpus.len());
            for g in gpus {
                println!(
                    "{:>2} {:<24} {} util {:>3}% mem {:>6}/{:<6} MiB {:>4} {:>7} MIG {} processes {}",
                    g.index,
                    g.name,
                    g.uuid,
                    g.util_gpu_pct,
                    g.memory_used_mib,
                    g.memory_total_mib,
                    g.temperature_c.map_or("-".to_string(), |t| format!("{t}°C")),
                    g.power_w.map_or("-".to_string(), |w| format!("{w:.0} W")),
                    g.mig_enabled.map_or("?", |m| if m { "on" } else { "off" }),
                    g.processes.len()
                );
                if !g.nvlink_peers.is_empty() {
                    let peers: Vec<String> = g.nvlink_peers.iter().map(u32::to_string).collect();
                    println!("   NVLink to GPU {}", peers.join(", "));
                }
                for m in &g.mig_instances {
                    println!(
                        "   MIG {} mem {}/{} MiB",
                        m.uuid, m.memory_used_mib, m.memory_total_mib
                    );
                }
                for p in &g.processes {
                    println!(
                        "   pid {:<8} group {:<8} {:>6} MiB SM {}",
                        p.pid,
                        p.pgid.map_or("-".to_string(), |g| g.to_string()),
                        p.used_mib.map_or("?".to_string(), |m| m.to_string()),
                        p.sm_util_pct.map_or("?".to_string(), |u| format!("{u}%"))
                    );
                }
            }
        }
    }
    Ok(())
}

/// `gantry agent`: serves the daemon on stdin/stdout until it hangs up.
fn agent(
    dir: Option<std::path::PathBuf>,
    sample_every: &str,
    notices: Option<String>,
    (keep_logs, max_job_mb, max_mb): (Option<String>, Option<u64>, Option<u64>),
) -> Result<(), CliError> {
    let keep_for_s = match keep_logs.as_deref() {
        None => None,
        Some(k) => Some(
            gantry::spec::parse_duration(k)
                .filter(|s| *s >= 1.0)
                .ok_or_else(|| {
                    CliError::usage(format!(
                        "--keep-logs {k}: expected a duration of at least 1s, e.g. 30d"
                    ))
                })?,
        ),
    };
    let retention = gantry::backend::retention::Retention {
        keep_for_s,
        max_job_bytes: max_job_mb.map(|m| m << 20),
        max_total_bytes: max_mb.map(|m| m << 20),
    };
    let dir = dir.unwrap_or_else(gantry::backend::agent::default_dir);
    let every = gantry::spec::parse_duration(sample_every)
        .filter(|s| (0.05..=3600.0).contains(s))
        .ok_or_else(|| {
            CliError::usage(format!(
                "--sample-every {sample_every}: expected a duration from 50ms to 1h, e.g. 2s"
            ))
        })?;
    let stdin = std::io::stdin().lock();
    let every = std::time::Duration::from_secs_f64(every);
    gantry::backend::agent::serve(
        &dir,
        every,
        notices,
        retention,
        stdin,
        Box::new(std::io::stdout()),
    )
    .map_err(|e| CliError::usage(format!("gantry agent ({}): {e}", dir.display())))
}
