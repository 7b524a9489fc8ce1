//! Command-line interface. Every command prints a table for people or JSON for scripts
//! (`--output json`); errors go to stderr as one line and exit with code 2.

mod bench;
mod fleet;
mod replay;
mod spec;

use clap::{Parser, Subcommand, ValueEnum};
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
    #[arg(long, global = true, env = "GANTRY_THEME")]
    theme: Option<String>,
    /// Console keymap: default, vim (also GANTRY_KEYMAP). A file of the same name under the
    /// config dir's keymaps/ rebinds only the keys it names.
    #[arg(long, global = true, env = "GANTRY_KEYMAP")]
    keymap: Option<String>,
}

#[derive(Clone, Copy, Debug, ValueEnum, PartialEq, Eq)]
pub enum Output {
    Table,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Replay a public cluster trace through the scheduler core.
    #[command(subcommand)]
    Replay(replay::ReplayCmd),
    /// Benchmarks that print the figures gantry reports.
    #[command(subcommand)]
    Bench(bench::BenchCmd),
    /// Job specs (gantry YAML, a superset of SkyPilot task YAML).
    #[command(subcommand)]
    Spec(spec::SpecCmd),
    /// The fleet in force: pools, shapes, prices, teams.
    Fleet {
        /// A fleet file (default: the one `gantry info` shows, else the built-in).
        #[arg(long)]
        config: Option<std::path::PathBuf>,
        /// Print the built-in fleet file (a documented starting point) and exit.
        #[arg(long)]
        print_default: bool,
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// The local host's GPUs through NVML (or why they cannot be read).
    Gpus {
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Where gantry keeps its files (XDG paths).
    Info {
        #[arg(long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn main() -> ExitCode {
    // Rust ignores SIGPIPE, which turns `gantry … | head` into a panic on the next print;
    // a command-line tool should simply stop, as every Unix tool does.
    #[cfg(unix)]
    // SAFETY: called once at start, before any thread exists; SIG_DFL is always valid.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None if std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            console(cli.theme.as_deref(), cli.keymap.as_deref())
        }
        None => {
            println!(
                "gantry {}: a scheduler for GPU fleets. Commands: `gantry replay openb|philly`, \
                 `gantry bench sched`, `gantry spec check FILE`, `gantry fleet`, `gantry info`; `gantry --help` for more.",
                env!("CARGO_PKG_VERSION")
            );
            Ok(())
        }
        Some(Command::Replay(cmd)) => replay::run(cmd),
        Some(Command::Bench(cmd)) => bench::run(cmd),
        Some(Command::Spec(cmd)) => spec::run(cmd),
        Some(Command::Fleet {
            config,
            print_default,
            output,
        }) => fleet::run(config, print_default, output),
        Some(Command::Info { output }) => fleet::info(output),
        Some(Command::Gpus { output }) => gpus(output),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Prints `value` as pretty JSON.
pub fn print_json(value: &impl Serialize) -> Result<(), String> {
    let text = serde_json::to_string_pretty(value).map_err(|e| e.to_string())?;
    println!("{text}");
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
    if output == Output::Json {
        return print_json(&d);
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
            }
        }
    }
    Ok(())
}

/// The console on the embedded default: the built-in simulated fleet with a living demo
/// workload. Demo state lives in a fresh temporary directory and is not kept.
fn console(theme: Option<&str>, keymap: Option<&str>) -> Result<(), String> {
    use gantry::sim::demo::{Demo, DemoClient};
    let paths = gantry::config::paths::from_env();
    let (theme, color) = gantry::console::load_theme(theme, &paths.config_dir)?;
    let keymap = gantry::console::load_keymap(keymap, &paths.config_dir)?;
    let app = gantry::console::app::App::with(theme, keymap, color);
    let dir = std::env::temp_dir().join(format!("gantry-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let demo = Demo::new(&dir, 7).map_err(|e| e.to_string())?;
    let mut client = DemoClient::new(demo, std::time::Duration::from_secs(1));
    let result = gantry::console::run(&mut client, app);
    let _ = std::fs::remove_dir_all(&dir);
    result.map_err(|e| format!("console: {e}"))
}
