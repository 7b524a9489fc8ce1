//! Command-line interface. Every command prints a table for people or JSON for scripts
//! (`--output json`); errors go to stderr as one line. Exit codes: 0 done; 1 the daemon
//! failed; 2 bad input (a file, an argument, a spec); 3 no such job; 4 not allowed (token,
//! role, team); 5 the daemon cannot be reached; 6 the job's state does not allow it.

mod args;
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
mod token;
mod watch;

use args::{command, Cli, Command};
use clap::ValueEnum;
use gantry::api::JobFilter;
use serde::Serialize;
use std::process::ExitCode;

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
            cli.demo,
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
        Some(Command::Daemon(args)) => daemon::run(*args).map_err(CliError::from),
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
            env_files,
            secrets,
            gpus,
            num_nodes,
            dry_run,
        }) => submit::submit(
            &target,
            file,
            (team, priority),
            output,
            dry_run,
            &submit::Given {
                envs,
                env_files,
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
        Some(Command::Cancel {
            ids,
            dry_run,
            output,
        }) => remote::act(&target, "cancel", &ids, dry_run, output),
        Some(Command::Preempt {
            ids,
            dry_run,
            output,
        }) => remote::act(&target, "preempt", &ids, dry_run, output),
        Some(Command::Hold {
            ids,
            dry_run,
            output,
        }) => remote::act(&target, "hold", &ids, dry_run, output),
        Some(Command::Release {
            ids,
            dry_run,
            output,
        }) => remote::act(&target, "release", &ids, dry_run, output),
        Some(Command::Prio {
            id,
            class,
            dry_run,
            output,
        }) => remote::prio(&target, &id, &class, dry_run, output),
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
        Some(Command::Token(cmd)) => token::run(&target, cmd),
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
            .and_then(|mut c| fleet::pool_live(&mut c, &which, output)),
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
        match fleet::fleet_live(&mut c, output) {
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
