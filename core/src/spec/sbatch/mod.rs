//! Slurm batch scripts as job specs: `gantry submit job.sbatch` reads a script's `#SBATCH`
//! lines as `sbatch` does — from the lines after the `#!` line up to the first command —
//! and runs the script itself as the job's `run`, under its own interpreter.
//!
//! What the options mean in gantry: nodes, GPUs per node (from `--gres`, `--gpus-per-node`,
//! `--gpus` or `--gpus-per-task`), CPUs and memory per node, the time limit, `--signal` as the
//! checkpoint signal and its grace, `--account` as the team, `--qos` as the priority class,
//! `--export` variables as envs, `--chdir` as the working directory. Options gantry does not
//! act on (where the job runs, its output files, mail, …) are listed in the spec's `ignored`,
//! which `gantry submit` and `gantry spec check` print; options whose loss would change what
//! the job does (`--array`, `--dependency`) are refused.

mod options;
mod values;

use super::values::Signal;
use super::{Accelerator, Accelerators, Checkpoint, GpuCount, JobSpec, SpecError};
use options::{options, Given};
use values::{count, gres, memory_mib, signal, time_s, typed_count};

/// Whether `text` is a batch script rather than a YAML or JSON spec: a `.sbatch` / `.slurm`
/// file, or a `#!` script with `#SBATCH` lines.
pub fn is_batch_script(file: &str, text: &str) -> bool {
    let named = [".sbatch", ".slurm"].iter().any(|e| file.ends_with(e));
    named || (text.starts_with("#!") && text.lines().any(|l| l.trim_start().starts_with("#SBATCH")))
}

/// The job's `run`: a shell script as it is (gantry runs `run` with bash); any other
/// interpreter is run on the script as the kernel would (`INTERPRETER [ARG] SCRIPT`).
fn run_of(file: &str, text: &str) -> Result<String, SpecError> {
    let first = text.lines().next().unwrap_or_default();
    let Some(shebang) = first.strip_prefix("#!") else {
        return Err(SpecError {
            file: file.to_string(),
            line: 1,
            col: 1,
            message: "a batch script starts with #! and its interpreter (#!/bin/bash), as sbatch requires".to_string(),
        });
    };
    let shebang = shebang.trim();
    let mut words = shebang.split_whitespace();
    let interp = words.next().unwrap_or_default();
    let base = interp.rsplit('/').next().unwrap_or(interp);
    let prog = if base == "env" {
        words.find(|w| !w.starts_with('-')).unwrap_or_default()
    } else {
        base
    };
    if ["bash", "sh"].contains(&prog) {
        return Ok(text.to_string());
    }
    let mut delim = "GANTRY_BATCH_SCRIPT".to_string();
    while text.contains(&delim) {
        delim.push('_');
    }
    // As `#!` does: the interpreter and its one argument, then the script (here on fd 3).
    let (interp, arg) = match shebang.split_once(char::is_whitespace) {
        Some((i, a)) => (i, format!(" '{}'", a.trim().replace('\'', "'\\''"))),
        None => (shebang, String::new()),
    };
    let body = if text.ends_with('\n') {
        text.to_string()
    } else {
        format!("{text}\n")
    };
    Ok(format!(
        "exec {interp}{arg} /dev/fd/3 3<<'{delim}'\n{body}{delim}\n"
    ))
}

/// Parses a batch script into a spec.
pub fn parse(file: &str, text: &str) -> Result<JobSpec, SpecError> {
    let run = run_of(file, text)?;
    let mut ignored = Vec::new();
    let given = options(file, text, &mut ignored)?;
    let at = |g: &Given, message: String| SpecError {
        file: file.to_string(),
        line: g.line,
        col: g.col,
        message: format!("`{}`: {message}", g.written),
    };
    let mut spec = JobSpec {
        run: Some(run),
        ..JobSpec::default()
    };
    // Per-node GPU sources, read after the node and task counts are known.
    let (mut nodes, mut tasks_per_node, mut tasks) = (None, None, None);
    let (mut cpus_per_task, mut cpus_per_gpu) = (None, None);
    let (mut mem, mut mem_per_cpu, mut mem_per_gpu) = (None, None, None);
    let mut gpu_given: Vec<(&Given, &str)> = Vec::new();
    for g in &given {
        let v = g.value.clone().unwrap_or_default();
        let num = |what: &str| count(&v, what).map_err(|e| at(g, e));
        match g.name.unwrap_or_default() {
            "job-name" => spec.name = Some(v),
            "nodes" => {
                let n = num("nodes")?;
                if n == 0 || n > 4096 {
                    return Err(at(g, format!("{n} nodes; expected 1..=4096")));
                }
                nodes = Some(n);
            }
            "ntasks-per-node" => tasks_per_node = Some(num("tasks")?),
            "ntasks" => tasks = Some(num("tasks")?),
            "cpus-per-task" => cpus_per_task = Some(num("CPUs")?),
            "cpus-per-gpu" => cpus_per_gpu = Some(num("CPUs")?),
            "mem" => mem = Some((g, memory_mib(&v).map_err(|e| at(g, e))?)),
            "mem-per-cpu" => mem_per_cpu = Some(memory_mib(&v).map_err(|e| at(g, e))?),
            "mem-per-gpu" => mem_per_gpu = Some(memory_mib(&v).map_err(|e| at(g, e))?),
            "time" => spec.time_limit_s = time_s(&v).map_err(|e| at(g, e))?,
            "signal" => {
                let (sig, grace) = signal(&v).map_err(|e| at(g, e))?;
                spec.checkpoint = Some(Checkpoint {
                    dir: None,
                    interval_s: None,
                    signal: Signal(sig),
                    grace_s: grace,
                });
            }
            "account" => spec.team = Some(v),
            "qos" => spec.priority = Some(v),
            "chdir" => {
                if !v.starts_with('/') {
                    return Err(at(
                        g,
                        "give an absolute path: the job does not start where you submit it"
                            .to_string(),
                    ));
                }
                spec.workdir = Some(v);
            }
            "export" => {
                for item in v.split(',').filter(|s| !s.is_empty()) {
                    match item.split_once('=') {
                        Some((k, val)) if !k.is_empty() => {
                            spec.envs.insert(k.to_string(), val.to_string());
                        }
                        _ => ignored.push(format!(
                            "`--export={item}` (line {}: the submitter's environment is not carried to the job; give VAR=VALUE)",
                            g.line
                        )),
                    }
                }
            }
            "array" => {
                return Err(at(
                    g,
                    "job arrays are not run by gantry: submit one job per task (e.g. a loop of `gantry submit` with the index in an env)".to_string(),
                ))
            }
            "dependency" => {
                return Err(at(
                    g,
                    "dependencies are not run by gantry: submit this job when the one it waits for has ended".to_string(),
                ))
            }
            "gres" | "gpus-per-node" | "gpus" | "gpus-per-task" => {
                gpu_given.push((g, g.name.unwrap_or_default()))
            }
            _ => {}
        }
    }
    let nodes = nodes.unwrap_or(1);
    spec.nodes = nodes as u16;
    let tasks_per_node = tasks_per_node
        .or(tasks.map(|t: u32| t.div_ceil(nodes)))
        .unwrap_or(1)
        .max(1);
    // GPUs per node: each way of saying it must agree with the others.
    let mut gpus: Option<(Option<String>, u32, &Given)> = None;
    for (g, kind) in gpu_given {
        let v = g.value.clone().unwrap_or_default();
        let (ty, per_node) = match kind {
            "gres" => {
                let (gpu, other) = gres(&v).map_err(|e| at(g, e))?;
                for o in other {
                    ignored.push(format!(
                        "`--gres={o}` (line {}: not a GPU; not acted on)",
                        g.line
                    ));
                }
                match gpu {
                    Some(x) => x,
                    None => continue,
                }
            }
            "gpus" => {
                let (ty, total) = typed_count(&v).map_err(|e| at(g, e))?;
                if total % nodes != 0 {
                    return Err(at(
                        g,
                        format!("{total} GPUs do not divide evenly over {nodes} nodes: give --gpus-per-node"),
                    ));
                }
                (ty, total / nodes)
            }
            "gpus-per-task" => {
                let (ty, n) = typed_count(&v).map_err(|e| at(g, e))?;
                (ty, n.saturating_mul(tasks_per_node))
            }
            _ => typed_count(&v).map_err(|e| at(g, e))?,
        };
        if let Some((t0, n0, g0)) = &gpus {
            let same_type = ty.is_none() || t0.is_none() || ty == *t0;
            if *n0 != per_node || !same_type {
                return Err(at(
                    g,
                    format!(
                        "asks for {per_node} {}GPU(s) per node, but `{}` (line {}) for {n0} {}GPU(s)",
                        ty.as_deref().map(|t| format!("{t} ")).unwrap_or_default(),
                        g0.written,
                        g0.line,
                        t0.as_deref().map(|t| format!("{t} ")).unwrap_or_default(),
                    ),
                ));
            }
            if t0.is_none() && ty.is_some() {
                gpus = Some((ty, per_node, g));
            }
            continue;
        }
        if per_node > 64 {
            return Err(at(g, format!("{per_node} GPUs per node; at most 64")));
        }
        gpus = Some((ty, per_node, g));
    }
    let gpus_per_node = gpus.as_ref().map_or(0, |(_, n, _)| *n);
    if let Some((ty, n, _)) = gpus.filter(|(_, n, _)| *n > 0) {
        spec.accelerators = Some(Accelerators {
            options: vec![Accelerator {
                // No type: any model the fleet has.
                model: ty.unwrap_or_else(|| super::ANY_MODEL.to_string()),
                count: GpuCount::Whole(n as u8),
            }],
            ordered: false,
        });
    }
    let cpus = match (cpus_per_task, cpus_per_gpu) {
        (Some(c), _) => c.saturating_mul(tasks_per_node),
        (None, Some(c)) => c.saturating_mul(gpus_per_node),
        (None, None) => 0,
    };
    spec.cpu_milli = cpus.saturating_mul(1000);
    spec.mem_mib = match (mem, mem_per_cpu, mem_per_gpu) {
        (Some((g, 0)), _, _) => {
            ignored.push(format!(
                "`{}` (line {}: all of a node's memory; gantry reserves none)",
                g.written, g.line
            ));
            0
        }
        (Some((_, m)), _, _) => m,
        (None, Some(m), _) => m.saturating_mul(u64::from(cpus.max(1))),
        (None, None, Some(m)) => m.saturating_mul(u64::from(gpus_per_node.max(1))),
        (None, None, None) => 0,
    };
    if let Some(n) = slurm_bound(text) {
        ignored.push(format!(
            "Slurm's own commands or SLURM_* variables (line {n}): gantry runs the script on each of its {nodes} node(s) with GANTRY_NODE_RANK, GANTRY_NUM_NODES and GANTRY_HEAD_IP; outside a Slurm pool there is no srun, scontrol or SLURM_*"
        ));
    }
    spec.ignored = ignored;
    Ok(spec)
}

/// The first line of the script's commands that uses Slurm itself (`srun`, `scontrol`,
/// `$SLURM_…`), which only a Slurm pool gives it.
fn slurm_bound(text: &str) -> Option<usize> {
    text.lines().enumerate().skip(1).find_map(|(i, l)| {
        let l = l.trim_start();
        if l.starts_with('#') {
            return None;
        }
        let uses = l.contains("SLURM_")
            || l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .any(|w| ["srun", "scontrol", "sbcast"].contains(&w));
        uses.then_some(i + 1)
    })
}

#[cfg(test)]
mod tests;
