//! The benches of gantry itself: the scheduler core, the daemon and its journal, a CLI call, the
//! console, and how soon freed capacity is used again.

use super::*;
use gantry::bench::sched::{run as run_sched, SchedBenchConfig};
use gantry::scheduler::Policy;

/// `gantry bench sched --eta`.
pub(super) fn sched_eta(
    nodes: usize,
    pending: usize,
    policy: String,
    seed: u64,
    box_ms: f64,
    output: Output,
) -> Result<(), String> {
    if nodes == 0 || nodes > 1_000_000 {
        return Err(format!("--nodes {nodes}: expected 1..=1000000"));
    }
    if !(box_ms.is_finite() && (1.0..=600_000.0).contains(&box_ms)) {
        return Err(format!(
            "--eta {box_ms}: expected milliseconds in 1..=600000"
        ));
    }
    let fleet = gantry::bench::sched::synthetic_fleet(nodes);
    let jobs = gantry::bench::sched::pending_set(&fleet, pending, seed);
    let r = gantry::bench::sched::run_eta_bench(&fleet, &jobs, policy.parse()?, seed, box_ms);
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench sched --eta: {nodes} nodes, {} running, {} waiting, one core, a {:.0} ms time box",
        r.running, r.pending, r.box_ms
    );
    println!(
        "  {:.0} ms in all (the copy of the present {:.0} ms), {} cycles; {} waiting jobs given a start, looking {:.1} h ahead (stopped: {}); peak RSS {} MiB",
        r.wall_ms,
        r.copy_ms,
        r.cycles,
        r.estimated,
        r.looked_ahead_h,
        r.stopped,
        r.peak_rss_mib.map_or("?".to_string(), |m| format!("{m:.0}"))
    );
    Ok(())
}

/// `gantry bench sched`.
pub(super) fn sched(
    nodes: usize,
    pending: usize,
    policy: String,
    gangs: usize,
    seed: u64,
    output: Output,
) -> Result<(), String> {
    if nodes == 0 || nodes > 1_000_000 {
        return Err(format!("--nodes {nodes}: expected 1..=1000000"));
    }
    let cfg = SchedBenchConfig {
        nodes,
        pending,
        policy: policy.parse()?,
        baseline: Policy::Spread,
        seed,
        gangs,
    };
    let r = run_sched(&cfg);
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench sched: {} nodes, {} GPUs, {} pending jobs, one core",
        r.nodes, r.gpus, r.pending
    );
    println!(
        "{:<10} {:>14} {:>9} {:>9} {:>12} {:>12} {:>8} {:>8}",
        "policy",
        "placements/s",
        "p50 µs",
        "p99 µs",
        "gang512 p50",
        "gang512 p99",
        "placed",
        "alloc"
    );
    for run in &r.runs {
        println!(
            "{:<10} {:>14.0} {:>9.2} {:>9.2} {:>9.3} ms {:>9.3} ms {:>8} {:>7.1}%",
            run.policy,
            run.placements_per_sec,
            run.p50_us,
            run.p99_us,
            run.gang512_p50_ms,
            run.gang512_p99_ms,
            run.placed,
            run.gpu_allocated_pct
        );
    }
    for run in &r.runs {
        println!(
            "{}: {} of {} timed 512-GPU gang decisions (at 50% GPU allocation) found room",
            run.policy, run.gang512_placed, run.gang512_timed
        );
    }
    let c = &r.cycle;
    println!(
        "full cycle: {} pending, {} running, {} teams in cohorts, fair share: {:.0} ms \
         ({} starts, {} preemptions, {} reservation, {} explanations)",
        c.pending,
        c.running,
        c.teams,
        c.cycle_ms,
        c.starts,
        c.preemptions,
        c.reservations,
        c.explanations
    );
    println!(
        "{} places at {:.2}× the {} baseline's rate; peak RSS {}",
        r.policy,
        r.speed_vs_baseline,
        r.baseline_policy,
        r.peak_rss_mib
            .map_or("n/a".to_string(), |m| format!("{m:.0} MiB"))
    );
    Ok(())
}

pub(super) fn api(clients: usize, jobs: usize, floor: bool, output: Output) -> Result<(), String> {
    if clients == 0 || clients > 1024 {
        return Err(format!("--clients {clients}: expected 1..=1024"));
    }
    let r = in_scratch("api", |dir| {
        gantry::bench::api::run(&gantry::bench::api::ApiBenchConfig {
            dir: dir.to_path_buf(),
            clients,
            jobs,
            floor,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench api: {} durable submissions over the Unix socket from {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms; journal holds {}; {} scheduling cycles ran meanwhile, {:.2} s in all",
        r.jobs, r.clients, r.durable_submits_per_sec, r.p50_ms, r.p99_ms, r.journaled, r.cycles, r.cycle_seconds
    );
    if let Some(f) = &r.floor {
        println!(
            "floor: the same clients against a server that answers at once: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms; gantry reaches {:.0}% of it",
            f.submits_per_sec,
            f.p50_ms,
            f.p99_ms,
            100.0 * r.durable_submits_per_sec / f.submits_per_sec.max(1e-9)
        );
    }
    Ok(())
}

pub(super) fn soak(
    duration: &str,
    every: &str,
    only: &[String],
    output: Output,
) -> Result<(), String> {
    use gantry::bench::soak::KINDS;
    if let Some(bad) = only.iter().find(|k| !KINDS.contains(&k.as_str())) {
        return Err(format!(
            "--only `{bad}`: expected some of {}",
            KINDS.join(", ")
        ));
    }
    let kinds: Vec<String> = if only.is_empty() {
        KINDS.iter().map(|k| k.to_string()).collect()
    } else {
        only.to_vec()
    };
    let secs = |flag: &str, v: &str| {
        gantry::spec::parse_duration(v)
            .filter(|s| *s > 0.0)
            .ok_or_else(|| format!("--{flag} `{v}`: expected a duration such as 30m or 90s"))
    };
    let (seconds, every) = (secs("duration", duration)?, secs("every", every)?);
    let table = !output.is_data();
    if table {
        println!(
            "{:>7} {:>8} {:>9} {:>5} {:>7} {:>8} {:>8} {:>8} {:>7} {:>8}",
            "AT",
            "RSS MiB",
            "PEAK MiB",
            "FDS",
            "PROBES",
            "P50 ms",
            "P99 ms",
            "MAX ms",
            "NORMAL",
            "HOSTILE"
        );
    }
    let r = in_scratch("soak", |dir| {
        gantry::bench::soak::run(
            &gantry::bench::soak::SoakConfig {
                dir: dir.to_path_buf(),
                seconds,
                every,
                kinds,
            },
            |i| {
                if table {
                    println!(
                        "{:>6.0}s {:>8.1} {:>9.1} {:>5} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>7} {:>8}{}",
                        i.at_s,
                        i.rss_mib,
                        i.peak_rss_mib,
                        i.fds,
                        i.probes,
                        i.api_p50_ms,
                        i.api_p99_ms,
                        i.api_max_ms,
                        i.normal,
                        i.hostile,
                        if i.probe_failures > 0 {
                            format!("  {} probe(s) failed", i.probe_failures)
                        } else {
                            String::new()
                        }
                    );
                }
            },
        )
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench soak: {:.0} s; RSS at most {:.2}× the first interval's, at most {} descriptors, worst API p99 {:.2} ms; {} jobs acknowledged, {} lost; {} exec sessions refused past the cap — {}",
        r.seconds,
        r.rss_growth,
        r.max_fds,
        r.worst_api_p99_ms,
        r.jobs_acknowledged,
        r.jobs_lost,
        r.exec_refused,
        if r.flat {
            "flat (RSS within 2×, p99 < 50 ms)"
        } else {
            "NOT flat (RSS past 2× or p99 ≥ 50 ms)"
        }
    );
    Ok(())
}

pub(super) fn journal(
    db: PathBuf,
    clients: usize,
    jobs: usize,
    print_acks: bool,
    output: Output,
) -> Result<(), String> {
    if clients == 0 || clients > 1024 {
        return Err(format!("--clients {clients}: expected 1..=1024"));
    }
    let cfg = gantry::bench::journal::JournalBenchConfig {
        db,
        clients,
        jobs,
        print_acks,
    };
    let r = gantry::bench::journal::run(&cfg).map_err(|e| e.to_string())?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench journal: {} durable submissions from {} clients: {:.0}/s, p50 {:.2} ms, p99 {:.2} ms",
        r.jobs, r.clients, r.durable_submits_per_sec, r.p50_ms, r.p99_ms
    );
    println!(
        "restart with {} jobs in the journal: rows loaded in {:.0} ms; engine rebuilt and first scheduling decision in {:.0} ms",
        r.reloaded_jobs, r.reload_ms, r.restart_to_first_decision_ms
    );
    Ok(())
}

pub(super) fn cli(calls: usize, jobs: usize, output: Output) -> Result<(), String> {
    if calls == 0 {
        return Err("--calls 0: expected at least 1".to_string());
    }
    let r = in_scratch("cli", |dir| {
        gantry::bench::cli::run(&gantry::bench::cli::CliBenchConfig {
            dir: dir.to_path_buf(),
            calls,
            jobs,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench cli: {} calls each, spawn to exit, the daemon holding {} jobs",
        r.calls, r.jobs_held
    );
    for (what, t) in [
        ("gantry jobs -o json", &r.list),
        ("gantry submit FILE", &r.submit),
        ("gantry --version (no daemon reached)", &r.process_only),
    ] {
        println!(
            "  {what}: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
            t.p50_ms, t.p99_ms, t.max_ms
        );
    }
    Ok(())
}

pub(super) fn memory(jobs: usize, history: usize, output: Output) -> Result<(), String> {
    let r = in_scratch("memory", |dir| {
        gantry::bench::memory::run(&gantry::bench::memory::MemoryBenchConfig {
            dir: dir.to_path_buf(),
            jobs,
            history,
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "bench memory: {} jobs submitted, run and finished in {:.0} s ({:.0}/s, group commits of 1,000); journal {:.0} MiB",
        r.jobs, r.seconds, r.jobs_per_sec, r.journal_mib
    );
    println!(
        "in memory: {} jobs (live + the last {} finished); resident {:.0} MiB ({:.0} MiB its own, the rest the binary's code), peak {:.0} MiB",
        r.jobs_in_memory, r.history_kept, r.rss_mib, r.anon_mib, r.peak_rss_mib
    );
    println!(
        "restart on that journal: {:.0} ms, {} jobs loaded; resident {:.0} MiB",
        r.restart_ms, r.restart_jobs_in_memory, r.rss_after_restart_mib
    );
    Ok(())
}

pub(super) fn starts(
    jobs: usize,
    slots: usize,
    seconds: f64,
    ticks_only: bool,
    output: Output,
) -> Result<(), String> {
    if !(seconds.is_finite() && (0.0..=3600.0).contains(&seconds)) || jobs == 0 {
        return Err(format!(
            "--jobs {jobs} --seconds {seconds}: expected at least one job of 0 to 3600 seconds"
        ));
    }
    let r = in_scratch("starts", |dir| {
        gantry::bench::starts::run(&gantry::bench::starts::StartsBenchConfig {
            jobs,
            slots,
            seconds,
            ticks_only,
            dir: dir.to_path_buf(),
        })
    })?;
    if output.is_data() {
        return print_as(output, &r);
    }
    println!(
        "{} jobs of {}s on {} slots ({}): makespan {:.1} s, ideal {:.1} s ({:.2}×); a freed slot waited {:.0} ms a job on average; {} cycles",
        r.jobs,
        r.job_seconds,
        r.slots,
        if r.woken_by_run_ends { "woken by run ends" } else { "clock ticks only" },
        r.makespan_s,
        r.ideal_s,
        r.ratio,
        r.idle_per_job_ms,
        r.cycles
    );
    Ok(())
}

/// `gantry bench tui`: the console's frames, its log view following a fast job, idle and live cost.
pub(super) fn tui(
    gpus: usize,
    jobs: usize,
    frames: usize,
    seconds: f64,
    log_mb_per_s: Option<f64>,
    output: Output,
) -> Result<(), String> {
    if !(seconds.is_finite() && (0.5..=3600.0).contains(&seconds)) {
        return Err(format!("--seconds {seconds}: expected 0.5..=3600"));
    }
    if let Some(rate) = log_mb_per_s {
        if !(rate.is_finite() && (0.01..=1000.0).contains(&rate)) {
            return Err(format!("--log-mb-per-s {rate}: expected 0.01..=1000"));
        }
        let r = gantry::bench::logview::run(rate, seconds, 160, 48)
            .map_err(|e| format!("bench tui --log-mb-per-s: {e}"))?;
        if output.is_data() {
            return print_as(output, &r);
        }
        let mib = |m: Option<f64>| m.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"));
        println!(
            "bench tui, log view: a job writing {:.1} MB/s (asked {:.1}) for {:.0} s, followed at 160×48: frame p50 {:.2} ms, p99 {:.2} ms ({} frames); fetch p50 {:.2} ms, p99 {:.2} ms; the pane held at most {} lines, {} KiB; RSS {} after 1 s, {} at the end",
            r.written_mb_per_s, r.asked_mb_per_s, r.seconds, r.frame_p50_ms, r.frame_p99_ms, r.frames,
            r.fetch_p50_ms, r.fetch_p99_ms, r.max_lines_held, r.max_bytes_held / 1024,
            mib(r.rss_after_1s_mib), mib(r.rss_end_mib)
        );
        return Ok(());
    }
    let r = gantry::bench::tui::run(gpus, jobs, 160, 48, frames.max(1));
    let l = gantry::bench::tui::idle_and_live(gpus, jobs, seconds);
    let rss = gantry::bench::peak_rss_mib();
    if output.is_data() {
        #[derive(serde::Serialize)]
        struct Both<'a> {
            #[serde(flatten)]
            frames: &'a gantry::bench::tui::TuiBenchReport,
            #[serde(flatten)]
            idle_live: &'a gantry::bench::tui::IdleLiveReport,
            peak_rss_mib: Option<f64>,
        }
        return print_as(
            output,
            &Both {
                frames: &r,
                idle_live: &l,
                peak_rss_mib: rss,
            },
        );
    }
    println!(
        "bench tui: {} GPUs, {} jobs, {}×{}: frame p50 {:.2} ms, p99 {:.2} ms; key to frame p99 {:.2} ms ({} frames)",
        r.gpus, r.jobs, r.width, r.height, r.frame_p50_ms, r.frame_p99_ms, r.key_to_frame_p99_ms, r.frames
    );
    let views: Vec<String> = r
        .view_p99_ms
        .iter()
        .map(|(v, ms)| format!("{v} {ms:.2}"))
        .collect();
    println!("frame p99 by view, ms: {}", views.join(", "));
    let first: Vec<String> = r
        .first_frame_ms
        .iter()
        .map(|(v, ms)| format!("{v} {ms:.2}"))
        .collect();
    println!(
        "first frame on a new snapshot (not in the figures above), ms: {}",
        first.join(", ")
    );
    println!(
        "idle {:.0} s: {} bytes written, {:.2}% of a core; live (data change every second) {:.0} s: {:.0} bytes/s, {:.2}% of a core; peak RSS {}",
        l.seconds,
        l.idle_bytes_written,
        l.idle_cpu_pct,
        l.seconds,
        l.live_bytes_per_sec,
        l.live_cpu_pct,
        rss.map_or("n/a".to_string(), |m| format!("{m:.0} MiB"))
    );
    Ok(())
}
