//! `gantry sim`: a seeded week of mixed work on the simulated fleet, naive setup vs gantry.

use super::{print_as, Output};
use gantry::sim::{compare, Comparison, Setup, SimOptions};
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct SimArgs {
    /// Simulated days.
    #[arg(long, default_value_t = 7.0)]
    days: f64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Offered useful load, as a fraction of the fleet's GPUs at start size.
    #[arg(long, default_value_t = 0.8)]
    load: f64,
    /// Scale the fleet (nodes, quotas, budgets) to about this many GPUs at start size.
    #[arg(long)]
    gpus: Option<usize>,
    /// Run the naive setups (strict FIFO, and any-fit) and gantry side by side (default:
    /// gantry only).
    #[arg(long)]
    compare: bool,
    /// A fleet file (default: the one `gantry info` shows, else the built-in).
    #[arg(long)]
    fleet: Option<PathBuf>,
    /// Print every event of each setup (table output) or include them (JSON).
    #[arg(long)]
    events: bool,
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    output: Output,
}

pub fn run(a: SimArgs) -> Result<(), String> {
    if !(a.days.is_finite() && a.days > 0.0 && a.days <= 366.0) {
        return Err(format!(
            "--days {}: give a number of days in (0, 366]",
            a.days
        ));
    }
    if !(a.load.is_finite() && a.load > 0.0 && a.load <= 4.0) {
        return Err(format!(
            "--load {}: give a fraction in (0, 4] of the fleet's GPUs",
            a.load
        ));
    }
    if a.gpus.is_some_and(|g| g == 0 || g > 200_000) {
        return Err("--gpus: give 1..=200000".into());
    }
    let (_, fleet, _) = super::fleet::load(a.fleet)?;
    let started = Instant::now();
    let cmp = compare(
        &fleet,
        &SimOptions {
            days: a.days,
            seed: a.seed,
            load: a.load,
            gpus: a.gpus,
            setups: if a.compare {
                vec![Setup::Naive, Setup::NaiveAnyFit, Setup::Gantry]
            } else {
                vec![Setup::Gantry]
            },
            keep_events: a.events,
        },
    )?;
    let elapsed = started.elapsed().as_secs_f64();
    match a.output {
        Output::Json | Output::Yaml => {
            #[derive(serde::Serialize)]
            struct Out<'a> {
                #[serde(flatten)]
                cmp: &'a Comparison,
                elapsed_s: f64,
            }
            print_as(
                a.output,
                &Out {
                    cmp: &cmp,
                    elapsed_s: elapsed,
                },
            )
        }
        Output::Table | Output::Wide => {
            print_table(&cmp, a.events);
            println!("(simulated in {elapsed:.2} s wall)");
            Ok(())
        }
    }
}

fn print_table(c: &Comparison, events: bool) {
    println!(
        "SIMULATED: {} days, seed {}, fleet {} GPUs at start (elastic to {}), offered load {:.0}% = {:.0} useful GPU-h in {} jobs ({})",
        c.days,
        c.seed,
        c.fleet_gpus_start,
        c.fleet_gpus_max,
        c.load * 100.0,
        c.workload.offered_useful_gpu_hours,
        c.workload.jobs,
        c.workload
            .by_kind
            .iter()
            .map(|(k, n)| format!("{n} {k}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let col = |label: &str, f: &dyn Fn(&gantry::sim::SetupResult) -> String| {
        print!("{label:<34}");
        for s in &c.setups {
            print!(" {:>17}", f(s));
        }
        println!();
    };
    col("", &|s| s.setup.clone());
    col("run by", &|s| s.engine.clone());
    col("utilization (busy/paid GPU-h)", &|s| {
        format!("{:.1}%", s.utilization * 100.0)
    });
    col("allocation (held/paid GPU-h)", &|s| {
        format!("{:.1}%", s.allocation * 100.0)
    });
    col("cost per useful GPU-hour", &|s| {
        format!("${:.2}", s.cost_per_useful_gpu_hour)
    });
    col("spend", &|s| format!("${:.0}", s.spend_usd));
    col("  of which idle (held by no job)", &|s| {
        format!("${:.0}", s.idle_spend_usd)
    });
    col("paid GPU-hours", &|s| format!("{:.0}", s.paid_gpu_hours));
    for (i, cap) in ["on-demand", "spot", "reserved"].iter().enumerate() {
        col(&format!("  {cap}: held / paid GPU-h"), &|s| {
            let u = &s.by_capacity[i];
            format!("{:.0} / {:.0}", u.allocated_gpu_hours, u.paid_gpu_hours)
        });
    }
    col("busy GPU-hours", &|s| format!("{:.0}", s.busy_gpu_hours));
    col("useful GPU-hours", &|s| {
        format!("{:.0}", s.useful_gpu_hours)
    });
    col("paid but did no work (GPU-h), why:", &|s| {
        format!("{:.0}", s.paid_gpu_hours - s.busy_gpu_hours)
    });
    for (i, share) in c
        .setups
        .first()
        .map_or(&[][..], |s| &s.idle[..])
        .iter()
        .enumerate()
    {
        col(&format!("  {}", share.cause.label()), &|s| {
            format!("{:.0}", s.idle[i].gpu_hours)
        });
    }
    for (i, w) in c
        .setups
        .first()
        .map_or(&[][..], |s| &s.queue_wait[..])
        .iter()
        .enumerate()
    {
        col(&format!("wait p50 / p99, {}", w.class), &|s| {
            let q = &s.queue_wait[i];
            format!("{} / {}", hm(q.p50_s), hm(q.p99_s))
        });
    }
    col("jobs finished / unfinished", &|s| {
        format!("{} / {}", s.finished, s.unfinished)
    });
    col("never fit", &|s| s.never_fit.to_string());
    col("preemptions", &|s| s.preemptions.to_string());
    col("spot interruptions", &|s| s.spot_interruptions.to_string());
    col("node failures", &|s| s.node_failures.to_string());
    col("reclaimed jobs / GPU-hours", &|s| {
        format!("{} / {:.0}", s.reclaimed_jobs, s.reclaimed_gpu_hours)
    });
    col("scale-ups / scale-downs", &|s| {
        format!("{} / {}", s.scale_ups, s.scale_downs)
    });
    col("drained / defragmented / moved", &|s| {
        format!(
            "{} / {} / {}",
            s.consolidated_nodes, s.defragmented, s.moved_jobs
        )
    });
    col("peak paid GPUs", &|s| s.peak_gpus.to_string());
    col("events (hash)", &|s| {
        format!("{} ({})", s.events, &s.event_hash[..8])
    });
    for a in &c.against {
        println!(
            "gantry vs {}: {:.2}× the utilization, {:.0}% lower cost per useful GPU-hour",
            a.setup,
            a.utilization_ratio,
            a.cost_reduction * 100.0
        );
    }
    if events {
        for s in &c.setups {
            println!("\n# events: {}", s.setup);
            for e in &s.event_log {
                println!("{e}");
            }
        }
    }
}

fn hm(s: f64) -> String {
    gantry::console::app::hm(s)
}
