//! The benches of where GPUs come from and jobs run: this host, SSH hosts and their telemetry,
//! an EC2 endpoint, Slurm, Kubernetes, and a service's endpoint.

use super::*;

pub(super) fn local(launches: usize, output: Output) -> Result<(), String> {
    let r = in_scratch("local", |dir| gantry::bench::local::run(dir, launches))?;
    if output.is_data() {
        return print_as(output, &r);
    }
    match (r.telemetry_sample_p50_ms, r.telemetry_sample_p99_ms) {
        (Some(p50), Some(p99)) => println!(
            "telemetry: one NVML sample of {} GPU(s): p50 {p50:.2} ms, p99 {p99:.2} ms ({}; opening NVML {:.0} ms, once)",
            r.gpus,
            r.nvml,
            r.nvml_open_ms.unwrap_or(0.0)
        ),
        _ => println!("telemetry: not measured: {}", r.nvml),
    }
    println!(
        "local job, placement to running (cycle start to its first output line): p50 {:.2} ms, p99 {:.2} ms over {} jobs",
        r.placement_to_running_p50_ms, r.placement_to_running_p99_ms, r.launches
    );
    Ok(())
}

/// `bench kube` needs the Kubernetes API double, which only a build with `--features testkit`
/// carries: release builds leave the test double out.
#[cfg(feature = "testkit")]
pub(super) mod kube {
    use super::{json_asked, Output};

    pub fn serve(
        nodes: usize,
        gpus_per_node: u32,
        pods: usize,
        rounds: usize,
    ) -> Result<(), String> {
        gantry::bench::kube::serve(&gantry::bench::kube::KubeBenchConfig {
            nodes,
            gpus_per_node,
            pods,
            binds: 0,
            rounds,
            round_jobs: 0,
        })
    }

    pub fn run(
        (nodes, gpus_per_node, pods, binds): (usize, u32, usize, usize),
        (rounds, round_jobs): (usize, usize),
        output: Output,
    ) -> Result<(), String> {
        let r = gantry::bench::kube::run(&gantry::bench::kube::KubeBenchConfig {
            nodes: nodes.max(1),
            gpus_per_node: gpus_per_node.max(1),
            pods,
            binds,
            rounds,
            round_jobs,
        })?;
        if !json_asked(&r, output)? {
            println!(
                "Kubernetes cluster (gantry's test API server, in a child process): {} nodes, {} GPUs, {} pods ({} holding a GPU)",
                r.nodes, r.gpus, r.pods, r.gpu_pods
            );
            println!(
                "connect to Nodes and Pods reflectors full: {:.2} s; inventory from them: {:.0} ms ({} GPUs held found); peak RSS {:.0} MiB",
                r.ready_s, r.inventory_ms, r.held, r.peak_rss_mib
            );
            if r.binds > 0 {
                println!(
                    "{} gantry pods created, bound and seen running through a pool's runner: {:.2} s ({:.0} pods/s)",
                    r.binds,
                    r.bind_s,
                    r.binds as f64 / r.bind_s.max(1e-9)
                );
            }
            gantry::bench::print_rounds(&r.rounds);
        }
        Ok(())
    }
}

#[cfg(not(feature = "testkit"))]
pub(super) mod kube {
    use super::Output;

    const LEFT_OUT: &str = "this gantry was built without the Kubernetes API double that `bench kube` serves its cluster from; build it with `cargo build --release --features testkit` and run that binary";

    pub fn serve(_: usize, _: u32, _: usize, _: usize) -> Result<(), String> {
        Err(LEFT_OUT.to_string())
    }

    pub fn run(_: (usize, u32, usize, usize), _: (usize, usize), _: Output) -> Result<(), String> {
        Err(LEFT_OUT.to_string())
    }
}

/// `gantry bench serve`: a service's endpoint against its replica, and how fast it scales up.
pub(super) fn serve(rate: f64, seconds: f64, output: Output) -> Result<(), String> {
    if !(1.0..=100_000.0).contains(&rate) || !(1.0..=600.0).contains(&seconds) {
        return Err(format!(
            "--rate {rate} --seconds {seconds}: expected a rate in 1..=100000 and 1..=600 seconds"
        ));
    }
    let r = in_scratch("serve", |dir| gantry::bench::serve::run(dir, rate, seconds))?;
    if !json_asked(&r, output)? {
        println!(
            "service endpoint at {:.0} requests/s for {:.0} s (open loop, latency from each request's scheduled time):",
            r.rate, r.seconds
        );
        println!(
            "  direct to the replica     p50 {:.3} ms  p99 {:.3} ms",
            r.direct_p50_ms, r.direct_p99_ms
        );
        println!(
            "  through the endpoint      p50 {:.3} ms  p99 {:.3} ms  ({} errors)",
            r.endpoint_p50_ms, r.endpoint_p99_ms, r.endpoint_errors
        );
        println!(
            "  the endpoint adds         {:.3} ms at p50, {:.3} ms at p99 (ten alternating rounds of each)",
            r.added_p50_ms, r.added_p99_ms
        );
        let x = &r.reaction;
        println!(
            "scale-up at {:.0} requests/s against {:.0} per replica (upscale delay 0, QPS window 1 s):",
            x.load_rps, x.per_replica
        );
        println!(
            "  threshold crossed -> new replica answers: {:.1} ms, of which the replica's own start-up {:.1} ms",
            x.total_ms, x.replica_startup_ms
        );
        println!(
            "  gantry's share (measure, decide, place, start, probe, route): {:.1} ms ({} errors)",
            x.gantry_ms, x.errors
        );
        for (stage, ms) in &x.stages {
            println!("    {ms:>8.1} ms  {stage}");
        }
    }
    Ok(())
}

/// `gantry bench telemetry`: the daemon's time per round of SSH hosts' GPU samples.
pub(super) fn telemetry(
    hosts: usize,
    gpus: usize,
    rounds: usize,
    output: Output,
) -> Result<(), String> {
    let r = in_scratch("tele", |dir| {
        gantry::bench::telemetry::run(hosts.max(1), gpus.clamp(1, 64), rounds.max(1), dir)
    })?;
    if !json_asked(&r, output)? {
        println!(
            "telemetry round, {} SSH hosts x {} GPUs (synthetic NVML samples, agent wire format), {} rounds:",
            r.hosts, r.gpus_per_host, r.rounds
        );
        println!(
            "  decode + apply samples: p50 {:.2} ms, max {:.2} ms",
            r.observe_p50_ms, r.observe_max_ms
        );
        println!(
            "  with one daemon step (cycle, snapshot): p50 {:.2} ms, max {:.2} ms",
            r.round_p50_ms, r.round_max_ms
        );
    }
    Ok(())
}

/// `gantry bench cloud`: nodes bought from and given back to an EC2 endpoint.
pub(super) fn cloud(nodes: usize, endpoint: Option<String>, output: Output) -> Result<(), String> {
    let r = gantry::bench::cloud::run(&gantry::bench::cloud::CloudBenchConfig {
        nodes: nodes.max(1),
        endpoint,
    })?;
    if !json_asked(&r, output)? {
        println!(
            "EC2 pool against {}: {} nodes bought and given back",
            r.endpoint, r.nodes
        );
        println!(
            "daemon's time per node (decision → registered as coming, on the actor): p50 {:.1} µs, max {:.1} µs",
            r.buy_p50_us, r.buy_max_us
        );
        println!(
            "buy → launched (RunInstances answered; one launch at a time per pool): p50 {:.0} ms; all {} launched in {:.2} s",
            r.launched_p50_ms, r.nodes, r.all_launched_s
        );
        println!(
            "buy → ready (instance running, address known; polled every 2 s): p50 {:.0} ms, max {:.0} ms; all {} in {:.2} s",
            r.ready_p50_ms, r.ready_max_ms, r.nodes, r.all_ready_s
        );
        println!(
            "EC2 calls per node: {:.2} to buy (launch + its share of the polls), {:.2} to give back; all terminated in {:.2} s",
            r.calls_per_node_buy, r.calls_per_node_give_back, r.all_terminated_s
        );
        println!("instances leaked: {}", r.leaked);
    }
    Ok(())
}

/// `gantry bench ssh`: SSH hosts connected, a launch's first output, a restart's re-adoption.
pub(super) fn ssh(
    hosts: Vec<String>,
    ssh_config: Option<PathBuf>,
    identity_file: Option<PathBuf>,
    (launches, jobs): (usize, usize),
    (rounds, round_jobs): (usize, usize),
    output: Output,
) -> Result<(), String> {
    let r = in_scratch("ssh", |dir| {
        gantry::bench::ssh::run(&gantry::bench::ssh::SshBenchConfig {
            hosts,
            ssh_config,
            identity_file,
            launches: launches.max(1),
            jobs,
            rounds,
            round_jobs,
            dir: dir.to_path_buf(),
        })
    })?;
    if !json_asked(&r, output)? {
        println!(
            "SSH hosts: {} (connected and agents ready in {:.2} s)",
            r.hosts, r.connect_s
        );
        println!(
            "placement to first output line: p50 {:.0} ms, max {:.0} ms over {} launches (warm connection)",
            r.first_output_p50_ms, r.first_output_max_ms, r.launches
        );
        println!(
            "restart re-adopting {} running jobs: {:.2} s",
            r.jobs, r.readopt_s
        );
        println!("telemetry round: `gantry bench telemetry` measures it (daemon time per round of samples)");
        gantry::bench::print_rounds(&r.rounds);
    }
    Ok(())
}

/// `gantry bench slurm`: reading a large Slurm cluster, and the pool worker's refresh.
pub(super) fn slurm(
    nodes: usize,
    gpus_per_node: u32,
    jobs: usize,
    refreshes: usize,
    output: Output,
) -> Result<(), String> {
    let r = in_scratch("slurm", |dir| {
        gantry::bench::slurm::run(&gantry::bench::slurm::SlurmBenchConfig {
            nodes: nodes.max(1),
            gpus_per_node: gpus_per_node.max(1),
            jobs,
            refreshes: refreshes.max(1),
            dir: dir.to_path_buf(),
        })
    })?;
    if !json_asked(&r, output)? {
        println!(
            "Slurm cluster (slurmrestd {} JSON recorded from Slurm 22.05, scaled): {} nodes, {} GPUs, {} jobs ({} running, {} of them gantry's), {:.1} MB per refresh",
            r.api, r.nodes, r.gpus, r.jobs, r.running_jobs, r.gantry_runs, r.bytes as f64 / 1e6
        );
        println!(
            "read (3 GETs + parse): p50 {:.0} ms, max {:.0} ms",
            r.read_p50_ms, r.read_max_ms
        );
        println!(
            "pool worker refresh: cold {:.0} ms ({} events), steady p50 {:.0} ms, max {:.0} ms",
            r.cold_refresh_ms, r.cold_events, r.refresh_p50_ms, r.refresh_max_ms
        );
        println!(
            "daemon start to every node up and {} foreign GPUs held: {:.2} s",
            r.foreign_gpus_held, r.first_view_s
        );
    }
    Ok(())
}
