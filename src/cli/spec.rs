//! `gantry spec check FILE`

use super::{print_as, Output};
use clap::Subcommand;
use gantry::spec::JobSpec;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum SpecCmd {
    /// Checks a job spec and prints what gantry understood (exit 2 with file:line:col if not).
    Check {
        file: PathBuf,
        /// Also resolve it against this fleet file: each shape the job takes, the models and
        /// the pools it may land in (what the daemon would queue).
        #[arg(long)]
        fleet: Option<PathBuf>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

/// One shape of a task resolved on a fleet, as `spec check --fleet` prints it.
#[derive(serde::Serialize)]
struct Shape {
    nodes: u16,
    gpus_per_node: String,
    /// CPUs and memory (MiB) reserved per node (0: none asked for): alternatives asking for
    /// their own are shapes of their own.
    cpus_per_node: f64,
    memory_mib_per_node: u64,
    models: Vec<String>,
    /// In order of preference (else any of them).
    preferred_in_order: bool,
    /// The pools it may land in (`cloud/region/zone name`), all when none is listed.
    pools: Vec<String>,
    spot_allowed: bool,
    max_price_per_hour: Option<f64>,
}

/// The shapes of `spec` on `fleet`, or why it cannot run there — at the field's place in
/// `written` (the task's text, positions as in file `name`) where it is about one.
fn shapes(
    name: &str,
    written: &str,
    spec: &JobSpec,
    fleet: &gantry::model::Fleet,
    simulated: &[bool],
) -> Result<Vec<Shape>, String> {
    use gantry::model::{CapacityType, GpuRequest, ModelChoice};
    // What the file leaves to be given at submit is not this check's business.
    let mut spec = spec.clone();
    spec.unset.clear();
    let requests = spec.to_requests(fleet).map_err(|e| match e.field {
        Some(f) => match gantry::spec::position_of(written, &f) {
            Some((line, col)) => format!("{name}:{line}:{col}: `{f}`: {}", e.message),
            None => format!("{name}: `{f}`: {}", e.message),
        },
        None => format!("{name}: {}", e.message),
    })?;
    // A job with no `run` has nothing to start on a real pool (the daemon refuses it at
    // submit where it may land on one).
    if spec.run.is_none() {
        let real = requests.iter().find_map(|r| {
            r.pools_of_its_model(fleet)
                .find(|&p| !simulated.get(p.index()).copied().unwrap_or(true))
        });
        if let Some(p) = real {
            return Err(no_run(name, Some(&fleet.pool_path(p))));
        }
    }
    Ok(requests
        .into_iter()
        .map(|r| {
            let (models, preferred_in_order) = match &r.models {
                ModelChoice::Any => (Vec::new(), false),
                ModelChoice::AnyOf(ids) => (ids.clone(), false),
                ModelChoice::Prefer(ids) => (ids.clone(), true),
            };
            Shape {
                nodes: r.nodes,
                gpus_per_node: match r.gpu {
                    GpuRequest::None => "none".into(),
                    GpuRequest::Whole(n) => n.to_string(),
                    GpuRequest::Fraction(m) => format!("{:.3}", f64::from(m) / 1000.0),
                    GpuRequest::Mig(p) => format!("MIG {p}"),
                },
                cpus_per_node: f64::from(r.cpu_milli) / 1000.0,
                memory_mib_per_node: r.mem_mib,
                models: models
                    .iter()
                    .map(|&m| fleet.model(m).name.clone())
                    .collect(),
                preferred_in_order,
                pools: r
                    .pools_of_its_model(fleet)
                    .filter(|&p| r.spot_ok || fleet.pool(p).capacity != CapacityType::Spot)
                    .map(|p| {
                        let (c, reg, z) = fleet.pool_place(p);
                        format!("{c}/{reg}/{z} {}", fleet.pool(p).name)
                    })
                    .collect(),
                spot_allowed: r.spot_ok,
                max_price_per_hour: r.max_price_per_hour,
            }
        })
        .collect())
}

pub fn run(cmd: SpecCmd) -> Result<(), String> {
    let SpecCmd::Check {
        file,
        fleet,
        output,
    } = cmd;
    let name = file.display().to_string();
    let bytes = std::fs::read(&file).map_err(|e| format!("{name}: cannot read the file: {e}"))?;
    let pipeline = gantry::spec::parse_pipeline(&name, &bytes).map_err(|e| e.to_string())?;
    let specs: Vec<&JobSpec> = pipeline.tasks.iter().map(|(_, s)| s).collect();
    if let Some(path) = fleet {
        let (_, cfg, _) = super::fleet::load_built(Some(path))?;
        let fleet = gantry::config::fleet::fleet_of(&cfg);
        let simulated: Vec<bool> = cfg
            .pools
            .iter()
            .map(|p| !gantry::backend::registry::starts_processes(p))
            .collect();
        let resolved: Vec<Result<Vec<Shape>, String>> = pipeline
            .tasks
            .iter()
            .map(|(written, s)| shapes(&name, written, s, &fleet, &simulated))
            .collect();
        if output.is_data() {
            let tasks: Vec<serde_json::Value> = specs
                .iter()
                .zip(&resolved)
                .map(|(s, r)| match r {
                    Ok(shapes) => serde_json::json!({"name": s.name, "shapes": shapes}),
                    Err(why) => serde_json::json!({"name": s.name, "refused": why}),
                })
                .collect();
            print_as(output, &tasks)?;
        } else {
            for (n, (s, r)) in specs.iter().zip(&resolved).enumerate() {
                let title = s.name.clone().unwrap_or_else(|| format!("task {}", n + 1));
                match r {
                    // Said once, as the command's error, below.
                    Err(_) => {}
                    Ok(shapes) => {
                        println!("{name}: {title}: on this fleet");
                        for (k, sh) in shapes.iter().enumerate() {
                            let models = if sh.models.is_empty() {
                                "any model".to_string()
                            } else {
                                sh.models
                                    .join(if sh.preferred_in_order { " > " } else { " | " })
                            };
                            let gpus = if sh.gpus_per_node == "none" {
                                "CPU only".to_string()
                            } else {
                                format!("{} GPU(s) of {models}", sh.gpus_per_node)
                            };
                            let mut host = Vec::new();
                            if sh.cpus_per_node > 0.0 {
                                host.push(format!("{} CPUs", sh.cpus_per_node));
                            }
                            if sh.memory_mib_per_node > 0 {
                                host.push(format!(
                                    "{:.1} GiB",
                                    sh.memory_mib_per_node as f64 / 1024.0
                                ));
                            }
                            let gpus = match host.is_empty() {
                                true => gpus,
                                false => format!("{gpus}, {}", host.join(", ")),
                            };
                            println!(
                                "  shape {}: {} node(s) × {gpus}; spot {}{}",
                                k + 1,
                                sh.nodes,
                                if sh.spot_allowed { "allowed" } else { "no" },
                                sh.max_price_per_hour
                                    .map_or(String::new(), |p| format!("; at most ${p:.2}/h"))
                            );
                            println!("    pools: {}", sh.pools.join(", "));
                        }
                    }
                }
            }
        }
        return match resolved.iter().find_map(|r| r.as_ref().err()) {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        };
    }
    // Without a fleet, a job with no `run` is one no real pool can start.
    if specs.iter().any(|s| s.run.is_none()) {
        return Err(no_run(&name, None));
    }
    if output.is_data() {
        return match specs.as_slice() {
            [one] => print_as(output, one),
            _ => print_as(
                output,
                &serde_json::json!({ "pipeline": pipeline.name, "tasks": specs }),
            ),
        };
    }
    if specs.len() > 1 {
        println!(
            "{name}: ok — pipeline {} of {} tasks, each started once the one before it has completed",
            pipeline.name.as_deref().unwrap_or("(unnamed)"),
            specs.len()
        );
    }
    for (n, spec) in specs.iter().enumerate() {
        if specs.len() > 1 {
            println!("task {}:", n + 1);
        }
        print_spec(&name, spec, specs.len() == 1);
    }
    Ok(())
}

/// Why a job with no `run` is refused: on `pool` (a real one), or on any real pool.
fn no_run(file: &str, pool: Option<&str>) -> String {
    let place = match pool {
        Some(p) => format!("it may land on pool {p}, a real one, where"),
        None => "on a real pool (SSH, Slurm, Kubernetes, a cloud, this host)".to_string(),
    };
    format!(
        "{file}: the job has no `run`: {place} it would have nothing to start. Add `run: COMMAND` (a SkyPilot task's `run:`, a batch script's body); only a simulated pool models a job's work without one — check such a job with --fleet FILE naming that fleet"
    )
}

/// GPUs per node as `H100×8 | A100×8 (any of)`.
fn gpus_of(
    acc: Option<&gantry::spec::Accelerators>,
    mig: Option<gantry::model::MigProfile>,
) -> String {
    match (acc, mig) {
        (_, Some(p)) => format!("MIG slice {p}"),
        (None, None) => "none (CPU only)".to_string(),
        (Some(a), None) => {
            let mut opts: Vec<String> = a
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
            if opts.len() == 1 {
                return opts.remove(0);
            }
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
    }
}

fn print_spec(name: &str, spec: &JobSpec, whole: bool) {
    let gpus = gpus_of(spec.accelerators.as_ref(), spec.mig);
    if whole {
        println!("{name}: ok");
    }
    println!("  name        {}", spec.name.as_deref().unwrap_or("(none)"));
    println!("  nodes       {}", spec.nodes);
    if spec.alternatives.is_empty() {
        println!("  GPUs/node   {gpus}");
    } else {
        println!(
            "  ways        {} ({})",
            spec.alternatives.len(),
            if spec.ordered {
                "in order of preference"
            } else {
                "any of them"
            }
        );
        for (i, w) in spec.alternatives.iter().enumerate() {
            let mut line = format!(
                "    {}. {}",
                i + 1,
                gpus_of(w.accelerators.as_ref(), spec.mig)
            );
            if w.infra != gantry::spec::Infra::default() {
                line.push_str(&format!(" in {}", w.infra));
            }
            line.push_str(if w.use_spot {
                ", spot allowed"
            } else {
                ", on-demand"
            });
            if let Some(i) = &w.image {
                line.push_str(&format!(", image {i}"));
            }
            println!("{line}");
        }
    }
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
    if spec.alternatives.is_empty() {
        println!(
            "  spot        {}",
            if spec.use_spot {
                "allowed (on-demand too)"
            } else {
                "no"
            }
        );
        if spec.infra != gantry::spec::Infra::default() {
            println!("  runs in     {} (cloud/region/zone)", spec.infra);
        }
    }
    if let Some(p) = spec.max_price_per_hour {
        println!("  price cap   ${p:.2}/h");
    }
    if let Some(w) = &spec.workdir {
        println!("  workdir     {w}");
    }
    if let Some(g) = &spec.git_workdir {
        println!(
            "  workdir     git {} at {} (cloned on each node)",
            g.url,
            g.reference.as_deref().unwrap_or("its default branch")
        );
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
    if let (Some(i), true) = (&spec.image, spec.alternatives.is_empty()) {
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
    for m in &spec.file_mounts {
        use gantry::spec::mounts::{MountMode, MountSource};
        let (what, from) = match (&m.source, m.mode) {
            (MountSource::Local(p), _) => ("copied from", p.as_str()),
            (MountSource::Bucket { url, .. }, MountMode::Copy) => ("copied from", url.as_str()),
            (MountSource::Bucket { url, .. }, MountMode::Mount) => ("mounts", url.as_str()),
            (MountSource::Bucket { url, .. }, MountMode::MountCached) => {
                ("mounts (cached)", url.as_str())
            }
        };
        println!("  mount       {} {what} {from}", m.dest);
    }
    if let Some(s) = &spec.service {
        let count = if s.min_replicas == s.max_replicas {
            format!("{} replica(s)", s.min_replicas)
        } else {
            format!("{} to {} replicas", s.min_replicas, s.max_replicas)
        };
        let follows = s.signal.as_ref().map_or(String::new(), |g| {
            format!(", {} {} per replica", g.name(), g.per_replica())
        });
        let port = s
            .port
            .map_or("$PORT given by gantry".to_string(), |p| format!("port {p}"));
        println!(
            "  service     {count}{follows}; ready when {} {} answers 2xx (after up to {:.0} s); {port}",
            if s.readiness.post_data.is_some() { "POST" } else { "GET" },
            s.readiness.path,
            s.readiness.initial_delay_s
        );
    }
    if !spec.ignored.is_empty() {
        println!("  not acted on:");
        for i in &spec.ignored {
            println!("    {i}");
        }
    }
}
