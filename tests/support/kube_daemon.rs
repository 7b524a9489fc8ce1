//! A gantry daemon over the test API server's cluster, and pods users give it: what the
//! Kubernetes scheduling tests share.

use super::daemon;
use super::kube_cluster::{gpu_node, kubeconfig};
use gantry_testkit::apiserver::ApiServer;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::time::Duration;

/// A test API server on `rt` whose cluster is free 8-GPU H100 nodes of these names.
pub fn free_nodes(rt: &tokio::runtime::Runtime, names: &[&str]) -> ApiServer {
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    for n in names {
        api.apply(gpu_node(n, "NVIDIA-H100-80GB-HBM3", 81559, 8, "us-east-1a"))
            .unwrap();
    }
    api
}

/// A daemon whose one pool is the test cluster's H100 nodes.
pub fn daemon_over(api: &ApiServer, test: &str, hosts: &[&str]) -> daemon::Daemon {
    daemon_with(api, test, hosts, "")
}

/// The same, with `extra` lines in the pool's [pools.kubernetes] table.
pub fn daemon_with(api: &ApiServer, test: &str, hosts: &[&str], extra: &str) -> daemon::Daemon {
    let dir = daemon::temp_dir(test);
    let k = kubeconfig(&dir, &api.url);
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"us-east-1a\"\nname = \"h100\"\ninstance_type = \"p5.48xlarge\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 190\nmemory_gb = 1900\ncapacity = \"reserved\"\nprice_per_hour = 98.32\nhosts = [{}]\n[pools.kubernetes]\nkubeconfig = \"{}\"\ncontext = \"test\"\nimage = \"nvcr.io/nvidia/pytorch:25.01-py3\"\n{extra}",
            hosts.join(", "),
            k.display()
        ),
    )
    .unwrap();
    start_daemon(dir)
}

/// The daemon of `dir` (its fleet file there), started again after a crash too.
pub fn start_daemon(dir: PathBuf) -> daemon::Daemon {
    start_daemon_with(dir, &[])
}

/// The same, with more of the daemon's flags.
pub fn start_daemon_with(dir: PathBuf, extra: &[&str]) -> daemon::Daemon {
    let fleet = dir.join("fleet.toml");
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("daemon.err"))
        .unwrap();
    let mut args = vec!["--config", fleet.to_str().unwrap()];
    args.extend_from_slice(extra);
    daemon::start_with(dir, &args, |cmd| {
        cmd.stderr(err);
    })
}

pub fn user_pod(namespace: &str, name: &str, gpus: u32) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app": name, "gantry.dev/priority": "production"}},
        "spec": {
            "schedulerName": "gantry", "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                            "command": ["python", "train.py"],
                            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()}}}]
        },
        "status": {"phase": "Pending"}
    })
}
