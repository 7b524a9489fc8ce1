//! `gantry exec JOB [--node K] [-t] -- CMD…` and `gantry ssh JOB [--node K]`: a command, or a
//! shell, inside a running job — in its working directory, with its environment (its GPUs,
//! ranks and addresses), on the node asked for — relayed by the daemon (`POST
//! /v1/jobs/ID/exec`), so it works over `--connect` as over the socket and roles apply. Both
//! exit with the command's status; gantry's own failures (before the command starts) exit as
//! listed.

use super::remote::{id_arg, Target};
use super::CliError;
use gantry::client::http::exec_path;
use std::io::IsTerminal;

#[derive(clap::Args)]
pub struct ExecArgs {
    /// The job's id.
    #[arg(add = super::complete::job_ids())]
    id: String,
    /// The node, by rank (0, the head, by default).
    #[arg(long, default_value_t = 0)]
    node: usize,
    /// Give the command a terminal (for full-screen programs: top, nvtop, a shell).
    #[arg(short, long)]
    tty: bool,
    /// The command and its arguments (after `--`).
    #[arg(last = true, required = true, num_args = 1..)]
    command: Vec<String>,
}

#[derive(clap::Args)]
pub struct SshArgs {
    /// The job's id.
    #[arg(add = super::complete::job_ids())]
    id: String,
    /// The node, by rank (0, the head, by default).
    #[arg(long, default_value_t = 0)]
    node: usize,
}

pub fn exec(t: &Target, a: ExecArgs) -> Result<(), CliError> {
    run(t, &a.id, a.node, a.tty, &a.command)
}

/// A shell: with a terminal where this is one.
pub fn ssh(t: &Target, a: SshArgs) -> Result<(), CliError> {
    let tty = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    run(t, &a.id, a.node, tty, &[])
}

fn run(t: &Target, id: &str, node: usize, tty: bool, argv: &[String]) -> Result<(), CliError> {
    let id = id_arg(id)?;
    let size = tty.then(|| {
        let (cols, rows) = crossterm::terminal::size().unwrap_or((80, 24));
        (rows, cols)
    });
    let path = exec_path(id, node, size, argv);
    let code = t.client()?.exec(&path, tty)?;
    std::process::exit(code.clamp(0, 255));
}
