//! `gantry bench kube`: a large Kubernetes cluster read through kube-rs reflectors — from
//! connecting to both stores holding a full list, the inventory built from them, and this
//! process's peak memory. The cluster is gantry's test API server (no kube-apiserver can run
//! here) in a child process (`gantry bench kube-serve`), so the figure is the client's alone:
//! GPU nodes in the shape GPU Operator clusters have (device plugin allocatable, GPU Feature
//! Discovery labels, the GPU taint), most GPUs held by running pods of one GPU, the rest of
//! the pods CPU-only or pending.

use crate::backend::kube::inventory::Labels;
use crate::backend::kube::{connect, Watched};
use gantry_testkit::apiserver::ApiServer;
use serde::Serialize;
use serde_json::{json, Value};
use std::io::BufRead;
use std::time::{Duration, Instant};

pub struct KubeBenchConfig {
    pub nodes: usize,
    pub gpus_per_node: u32,
    pub pods: usize,
    /// gantry pods the pool's runner starts (one GPU each, on as many nodes).
    pub binds: usize,
    /// Then rounds of `round_jobs` short jobs through a daemon's state over a pool of the
    /// first `ROUND_NODES` nodes, the memory measured after each (`bench::rounds`).
    pub rounds: usize,
    pub round_jobs: usize,
}

/// The nodes of the rounds' pool.
const ROUND_NODES: usize = 16;

/// How long each pod of the rounds runs (the test server's kubelet then ends it with 0).
const ROUND_POD_RUNS_MS: u64 = 200;

#[derive(Clone, Debug, Serialize)]
pub struct KubeBenchReport {
    pub nodes: usize,
    pub gpus: usize,
    pub pods: usize,
    pub gpu_pods: usize,
    /// Connect to both reflectors holding the full lists.
    pub ready_s: f64,
    /// The inventory (every node, its GPUs, the pods holding them) from the stores.
    pub inventory_ms: f64,
    /// GPUs the inventory found held by pods (must equal `gpu_pods`).
    pub held: u64,
    /// This process's peak resident memory (the server runs apart), before the bind phase
    /// (whose pool keeps stores of its own).
    pub peak_rss_mib: f64,
    /// gantry pods started through a Kubernetes pool's runner.
    pub binds: usize,
    /// From the first start to every pod created, bound and reported running by the watch.
    pub bind_s: f64,
    pub rounds: Vec<super::RoundMemory>,
}

/// The name of the cluster's `i`th node.
fn node_name(i: usize) -> String {
    format!("gpu-{i:05}")
}

fn node(i: usize, gpus: u32) -> Value {
    let name = node_name(i);
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": if i.is_multiple_of(2) { "p5.48xlarge" } else { "p4d.24xlarge" },
            "topology.kubernetes.io/region": "us-east-1",
            "topology.kubernetes.io/zone": format!("us-east-1{}", ["a", "b", "c"][i % 3]),
            "cloud.google.com/gke-nodepool": "gpu",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": if i.is_multiple_of(2) { "NVIDIA-H100-80GB-HBM3" } else { "NVIDIA-A100-SXM4-40GB" },
            "nvidia.com/gpu.memory": if i.is_multiple_of(2) { "81559" } else { "40960" },
            "nvidia.com/gpu.count": gpus.to_string(),
            "nvidia.com/gpu.family": "hopper",
            "nvidia.com/cuda.driver.major": "550",
            "nvidia.com/mig.strategy": "single",
            "feature.node.kubernetes.io/pci-10de.present": "true"
        }, "annotations": {
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true"
        }},
        "spec": {"providerID": format!("aws:///us-east-1a/i-{i:017x}"),
                  "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "192", "memory": "2097151232Ki", "nvidia.com/gpu": gpus.to_string(),
                         "pods": "737", "ephemeral-storage": "3905110864Ki", "hugepages-1Gi": "0"},
            "allocatable": {"cpu": "191450m", "memory": "2052345856Ki", "nvidia.com/gpu": gpus.to_string(),
                            "pods": "737", "ephemeral-storage": "3597861458096", "hugepages-1Gi": "0"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
                 "lastHeartbeatTime": "2026-11-24T00:00:00Z", "lastTransitionTime": "2026-11-20T00:00:00Z",
                 "message": "kubelet has sufficient memory available"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
                 "lastHeartbeatTime": "2026-11-24T00:00:00Z", "lastTransitionTime": "2026-11-20T00:00:00Z",
                 "message": "kubelet has no disk pressure"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady",
                 "lastHeartbeatTime": "2026-11-24T00:00:00Z", "lastTransitionTime": "2026-11-20T00:00:00Z",
                 "message": "kubelet is posting ready status"}
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)},
                          {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "containerRuntimeVersion": "containerd://1.7.27",
                         "osImage": "Amazon Linux 2023", "kernelVersion": "6.1.0", "architecture": "amd64",
                         "operatingSystem": "linux", "machineID": "0", "systemUUID": "0", "bootID": "0",
                         "kubeProxyVersion": "v1.33.2"}
        }
    })
}

fn pod(i: usize, node: Option<String>, gpus: u32) -> Value {
    let name = format!("train-{i:06}");
    let mut limits = json!({"cpu": "8", "memory": "64Gi"});
    if gpus > 0 {
        limits["nvidia.com/gpu"] = json!(gpus.to_string());
    }
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": format!("team-{}", i % 40),
                     "labels": {"app": "train", "batch.kubernetes.io/job-name": format!("job-{}", i / 4)},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": format!("job-{}", i / 4),
                                          "uid": "00000000-0000-4000-8000-000000000000", "controller": true}]},
        "spec": {
            "nodeName": node, "schedulerName": "default-scheduler", "restartPolicy": "Never",
            "serviceAccountName": "default",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                            "command": ["torchrun", "train.py"],
                            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
                            "resources": {"limits": limits.clone(), "requests": limits}}]
        },
        "status": {"phase": if node.is_some() { "Running" } else { "Pending" },
                   "qosClass": "Guaranteed", "podIP": "10.200.0.1", "hostIP": "10.0.0.1",
                   "startTime": "2026-11-24T00:00:00Z"}
    })
}

/// Fills `api` with the cluster; the GPU pods placed.
pub fn populate(api: &ApiServer, c: &KubeBenchConfig) -> Result<usize, String> {
    for i in 0..c.nodes {
        api.apply(node(i, c.gpus_per_node))?;
    }
    // Most GPUs held by one-GPU pods (seven of each node's eight), the rest CPU pods and
    // pods waiting.
    let held_per_node = c.gpus_per_node.saturating_sub(1) as usize;
    let gpu_pods = (c.nodes * held_per_node).min(c.pods * 7 / 10);
    for i in 0..c.pods {
        let (node, gpus) = if i < gpu_pods {
            (Some(node_name(i / held_per_node.max(1))), 1)
        } else if i.is_multiple_of(2) {
            (Some(node_name(i % c.nodes.max(1))), 0)
        } else {
            (None, 1)
        };
        api.apply(pod(i, node, gpus))?;
    }
    Ok(gpu_pods)
}

/// `gantry bench kube-serve`: the populated test server; prints its URL and the GPU pods,
/// then serves until killed.
pub fn serve(c: &KubeBenchConfig) -> Result<(), String> {
    let rt = crate::daemon::server::runtime()?;
    let api = ApiServer::start(rt.handle(), Duration::from_secs(60))?;
    if c.rounds > 0 {
        api.end_runs_after(Some(Duration::from_millis(ROUND_POD_RUNS_MS)));
    }
    let gpu_pods = populate(&api, c)?;
    println!("{} {gpu_pods}", api.url);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

/// A fleet of one Kubernetes pool over `hosts`, read through `kubeconfig`.
fn fleet(
    kubeconfig: &std::path::Path,
    hosts: &[String],
) -> Result<crate::config::fleet::FleetConfig, String> {
    let listed: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    let fleet = format!(
        "[[teams]]\nname = \"bench\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"us-east-1a\"\nname = \"h100\"\ninstance_type = \"p5.48xlarge\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 190\nmemory_gb = 1900\ncapacity = \"reserved\"\nprice_per_hour = 98.32\nhosts = [{}]\n[pools.kubernetes]\nkubeconfig = \"{}\"\nimage = \"nvcr.io/nvidia/pytorch:25.01-py3\"\n",
        listed.join(", "),
        kubeconfig.display()
    );
    crate::config::fleet::parse("bench.toml", &fleet).map_err(|e| e.to_string())
}

/// A Kubernetes pool over the first `binds` nodes (one GPU free on each), through the
/// daemon's own runner: once it has the cluster, one single-GPU run started on each node;
/// the seconds until every one is reported started (its pod created, bound, running).
fn bind(kubeconfig: &std::path::Path, binds: usize) -> Result<f64, String> {
    use crate::backend::{Gang, Launch, RunEvent, Runner};
    let hosts: Vec<String> = (0..binds).map(node_name).collect();
    let config = fleet(kubeconfig, &hosts)?;
    let mut pool = crate::backend::kube::runner::KubePool::open(
        &config.pools[0],
        hosts,
        crate::backend::Wake::default(),
    );
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut up = 0;
    while up < binds {
        for e in pool.poll(0.0) {
            match e {
                RunEvent::Up { .. } => up += 1,
                RunEvent::Down { why, .. } => return Err(format!("bind phase: {why}")),
                _ => {}
            }
        }
        if Instant::now() > deadline {
            return Err(format!("bind phase: {up} of {binds} nodes up after 300 s"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let t = Instant::now();
    for i in 0..binds {
        pool.start(
            i,
            Launch {
                job: i as i64 + 1,
                token: format!("gty_{:016x}{:016x}", i, i * 7919),
                name: None,
                time_limit_s: None,
                setup: None,
                run: "python train.py".into(),
                workdir: None,
                local_mounts: Vec::new(),
                mount_points: Vec::new(),
                envs: Default::default(),
                gpus: vec!["0".into()],
                checkpoint_dir: None,
                image: None,
                runtime: None,
                adopt: None,
                gang: Gang::default(),
                owner: None,
            },
        );
    }
    let mut started = 0;
    while started < binds {
        for e in pool.poll(0.0) {
            match e {
                RunEvent::Started { .. } => started += 1,
                RunEvent::StartFailed { why, .. } => return Err(format!("bind phase: {why}")),
                _ => {}
            }
        }
        if Instant::now() > deadline {
            return Err(format!("bind phase: {started} of {binds} pods started"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Ok(t.elapsed().as_secs_f64())
}

pub fn run(c: &KubeBenchConfig) -> Result<KubeBenchReport, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let mut server = std::process::Command::new(exe)
        .args(["bench", "kube-serve", "--nodes"])
        .arg(c.nodes.to_string())
        .arg("--gpus-per-node")
        .arg(c.gpus_per_node.to_string())
        .arg("--pods")
        .arg(c.pods.to_string())
        .arg("--rounds")
        .arg(c.rounds.to_string())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting the test API server: {e}"))?;
    let mut line = String::new();
    let read =
        std::io::BufReader::new(server.stdout.take().ok_or("no stdout")?).read_line(&mut line);
    let result = (|| {
        read.map_err(|e| e.to_string())?;
        let mut words = line.split_whitespace();
        let url = words
            .next()
            .ok_or("the test API server said nothing")?
            .to_string();
        let gpu_pods: usize = words.next().and_then(|w| w.parse().ok()).unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("gantry-bench-kube-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let config = dir.join("kubeconfig");
        std::fs::write(
            &config,
            format!("apiVersion: v1\nkind: Config\nclusters:\n- name: bench\n  cluster:\n    server: {url}\ncontexts:\n- name: bench\n  context:\n    cluster: bench\n    user: bench\ncurrent-context: bench\nusers:\n- name: bench\n  user:\n    token: bench\n"),
        )
        .map_err(|e| e.to_string())?;
        let rt = crate::daemon::server::runtime()?;
        let t = Instant::now();
        let watched = rt.block_on(async {
            let cluster = connect(Some(&config), None).await?;
            let w = Watched::start(&tokio::runtime::Handle::current(), &cluster);
            w.ready(Duration::from_secs(120)).await?;
            Ok::<_, String>(w)
        })?;
        let ready_s = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let inv = watched.inventory(&Labels::default());
        let inventory_ms = t.elapsed().as_secs_f64() * 1000.0;
        let held: u64 = inv
            .iter()
            .flat_map(|n| n.foreign.iter().map(|p| u64::from(p.gpus)))
            .sum();
        let peak_rss_mib = super::peak_rss_mib().unwrap_or(0.0);
        drop(watched);
        let binds = c.binds.min(c.nodes);
        let bind_s = if binds > 0 {
            bind(&config, binds)?
        } else {
            0.0
        };
        let rounds = if c.rounds > 0 {
            rounds(&config, &dir, c)?
        } else {
            Vec::new()
        };
        let _ = std::fs::remove_dir_all(&dir);
        Ok(KubeBenchReport {
            nodes: c.nodes,
            gpus: c.nodes * c.gpus_per_node as usize,
            pods: c.pods,
            gpu_pods,
            ready_s,
            inventory_ms,
            held,
            peak_rss_mib,
            binds,
            bind_s,
            rounds,
        })
    })();
    let _ = server.kill();
    let _ = server.wait();
    result
}

/// A daemon's state over a pool of the first nodes (`ROUND_NODES`), then `c.rounds` rounds of
/// `c.round_jobs` jobs, each a pod the test server's kubelet ends after `ROUND_POD_RUNS_MS`.
fn rounds(
    kubeconfig: &std::path::Path,
    dir: &std::path::Path,
    c: &KubeBenchConfig,
) -> Result<Vec<super::RoundMemory>, String> {
    let hosts: Vec<String> = (0..ROUND_NODES.min(c.nodes)).map(node_name).collect();
    let config = fleet(kubeconfig, &hosts)?;
    let mut state = super::rounds::open(&dir.join("rounds.db"), &config, dir)?;
    super::rounds::run_until(&mut state, Duration::from_secs(120), "the nodes", |s| {
        let (up, all) = s.hosts_up();
        up == all
    })?;
    super::rounds::run(&mut state, c.rounds, c.round_jobs)
}
