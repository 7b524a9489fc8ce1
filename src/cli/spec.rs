//! `gantry spec check FILE`

use super::{print_as, Output};
use clap::Subcommand;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SpecCmd {
    /// Checks a job spec and prints what gantry understood (exit 2 with file:line:col if not).
    Check {
        file: PathBuf,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(cmd: SpecCmd) -> Result<(), String> {
    let SpecCmd::Check { file, output } = cmd;
    let name = file.display().to_string();
    let bytes = std::fs::read(&file).map_err(|e| format!("{name}: cannot read the file: {e}"))?;
    let spec = gantry::spec::parse(&name, &bytes).map_err(|e| e.to_string())?;
    if output.is_data() {
        return print_as(output, &spec);
    }
    let gpus = match (&spec.accelerators, spec.mig) {
        (_, Some(p)) => format!("MIG slice {p}"),
        (None, None) => "none (CPU only)".to_string(),
        (Some(a), None) => {
            let opts: Vec<String> = a
                .options
                .iter()
                .map(|o| {
                    let model = if o.model == gantry::spec::ANY_MODEL {
                        "any model"
                    } else {
                        &o.model
                    };
                    match o.count {
                        gantry::spec::GpuCount::Whole(n) => format!("{model}×{n}"),
                        gantry::spec::GpuCount::Fraction(m) => {
                            format!("{model}×{:.3}", f64::from(m) / 1000.0)
                        }
                    }
                })
                .collect();
            format!(
                "{} ({})",
                opts.join(" | "),
                if a.ordered {
                    "in order of preference"
                } else {
                    "any of"
                }
            )
        }
    };
    println!("{name}: ok");
    println!("  name        {}", spec.name.as_deref().unwrap_or("(none)"));
    println!("  nodes       {}", spec.nodes);
    println!("  GPUs/node   {gpus}");
    println!(
        "  CPU/node    {}",
        if spec.cpu_milli == 0 {
            "no reservation".to_string()
        } else {
            format!("{:.1}", f64::from(spec.cpu_milli) / 1000.0)
        }
    );
    println!(
        "  memory/node {}",
        if spec.mem_mib == 0 {
            "no reservation".to_string()
        } else {
            format!("{} MiB", spec.mem_mib)
        }
    );
    println!(
        "  spot        {}",
        if spec.use_spot { "allowed" } else { "no" }
    );
    if spec.infra != gantry::spec::Infra::default() {
        println!("  runs in     {} (cloud/region/zone)", spec.infra);
    }
    if !spec.unset.is_empty() {
        println!(
            "  at submit   {} (no value in the file: give with --env / --secret)",
            spec.unset.join(", ")
        );
    }
    if !spec.secrets.is_empty() {
        let names: Vec<&str> = spec.secrets.keys().map(String::as_str).collect();
        println!("  secrets     {} (never shown)", names.join(", "));
    }
    if let Some(i) = &spec.image {
        println!("  image       {i} (Kubernetes pools only)");
    }
    println!(
        "  team        {}",
        spec.team.as_deref().unwrap_or("(default)")
    );
    println!(
        "  priority    {}",
        spec.priority.as_deref().unwrap_or("(default)")
    );
    if let Some(t) = spec.time_limit_s {
        println!(
            "  time limit  {}",
            humantime::format_duration(std::time::Duration::from_secs_f64(t))
        );
    }
    if let Some(c) = &spec.checkpoint {
        println!("  checkpoint  {} then {} s grace", c.signal.0, c.grace_s);
    }
    if !spec.ignored.is_empty() {
        println!("  not acted on:");
        for i in &spec.ignored {
            println!("    {i}");
        }
    }
    Ok(())
}
