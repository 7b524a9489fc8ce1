//! The Kubernetes tests' cluster: a kubeconfig for the test API server, GPU nodes and pods
//! as a GPU Operator cluster has them, and the real kubectl.

use gantry_testkit::apiserver::ApiServer;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn temp(name: &str) -> PathBuf {
    gantry_testkit::scratch::scratch(&format!("kube-{name}"))
}

/// A kubeconfig with one context, `test`, for `server`.
pub fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let f = dir.join("kubeconfig");
    std::fs::write(
        &f,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\nusers:\n- name: test\n  user:\n    token: test-token\n"
        ),
    )
    .unwrap();
    f
}

/// A GPU node as a GPU Operator cluster has it (device plugin allocatable, GPU Feature
/// Discovery labels, the GPU taint cloud GPU pools add).
pub fn gpu_node(name: &str, product: &str, memory_mib: u32, gpus: u32, zone: &str) -> Value {
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name,
            "node.kubernetes.io/instance-type": "p5.48xlarge",
            "topology.kubernetes.io/zone": zone,
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": product,
            "nvidia.com/gpu.memory": memory_mib.to_string(),
            "nvidia.com/gpu.count": gpus.to_string(),
            "nvidia.com/mig.strategy": "single",
            "nvidia.com/gpu.clique": "f3ab1c2e-0000-4000-8000-000000000001.1"
        }},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {"cpu": "192", "memory": "2097151232Ki", "nvidia.com/gpu": gpus.to_string(), "pods": "737"},
            "allocatable": {"cpu": "191450m", "memory": "2052345856Ki", "nvidia.com/gpu": gpus.to_string(), "pods": "737"},
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
            ],
            "nodeInfo": {"kubeletVersion": "v1.33.2", "containerRuntimeVersion": "containerd://1.7.27",
                          "osImage": "Amazon Linux 2023", "kernelVersion": "6.1.0", "architecture": "amd64",
                          "operatingSystem": "linux", "machineID": "", "systemUUID": "", "bootID": "",
                          "kubeProxyVersion": "", "containerRuntimeVersion ": ""}
        }
    })
}

/// A pod bound to `node` asking for `gpus` GPUs.
pub fn gpu_pod(ns: &str, name: &str, node: &str, gpus: u32, phase: &str) -> Value {
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
        "spec": {
            "nodeName": node, "schedulerName": "default-scheduler", "restartPolicy": "Never",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                            "resources": {"limits": {"nvidia.com/gpu": gpus.to_string()},
                                          "requests": {"nvidia.com/gpu": gpus.to_string(), "cpu": "8"}}}]
        },
        "status": {"phase": phase, "podIP": "10.0.0.5", "hostIP": "10.1.0.5"}
    })
}

/// The cluster of the tests: two H100 nodes (one cordoned), an A100 node in MIG mode, a
/// NotReady node; a training pod of others on gpu-0, a finished one, a gantry pod.
pub fn cluster(api: &ApiServer) {
    api.apply(gpu_node(
        "gpu-0",
        "NVIDIA-H100-80GB-HBM3",
        81559,
        8,
        "us-east-1a",
    ))
    .unwrap();
    let mut cordoned = gpu_node("gpu-1", "NVIDIA-H100-80GB-HBM3", 81559, 8, "us-east-1b");
    cordoned["spec"]["unschedulable"] = json!(true);
    cordoned["spec"]["taints"]
        .as_array_mut()
        .unwrap()
        .push(json!({"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}));
    api.apply(cordoned).unwrap();
    let mut mig = gpu_node("mig-0", "NVIDIA-A100-SXM4-80GB", 81920, 0, "us-east-1a");
    mig["metadata"]["labels"]["nvidia.com/mig.strategy"] = json!("mixed");
    mig["status"]["allocatable"]["nvidia.com/mig-1g.10gb"] = json!("14");
    mig["status"]["allocatable"]["nvidia.com/mig-3g.40gb"] = json!("2");
    api.apply(mig).unwrap();
    let mut down = gpu_node("gpu-2", "NVIDIA-H100-80GB-HBM3", 81559, 8, "us-east-1a");
    down["status"]["conditions"][1]["status"] = json!("Unknown");
    api.apply(down).unwrap();
    api.apply(gpu_pod("research", "llama-sft-0", "gpu-0", 6, "Running"))
        .unwrap();
    api.apply(gpu_pod("research", "eval-done", "gpu-0", 2, "Succeeded"))
        .unwrap();
    let mut ours = gpu_pod("gantry", "gantry-7-0", "gpu-0", 1, "Running");
    ours["metadata"]["labels"]["gantry.dev/job"] = json!("7");
    api.apply(ours).unwrap();
}

pub fn kubectl(config: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(config)
        .args(args)
        .output()
        .expect("kubectl is installed");
    assert!(
        out.status.success(),
        "kubectl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn have_kubectl() -> bool {
    let ok = Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        eprintln!("skipped: kubectl is not installed");
    }
    ok
}
