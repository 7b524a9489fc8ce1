//! `gpu = "auto"` Kubernetes pools: the daemon builds its pools from the nodes a selector
//! picks (gantry's test API server, nodes as a GPU Operator cluster labels them), grouped by
//! a label of the fleet file's choosing, and runs jobs on them as on listed pools.

use crate::support::daemon;
use crate::support::kube_cluster;

use daemon::{cli, events, json, state, submit, wait_for};
use gantry_testkit::apiserver::ApiServer;
use kube_cluster::{gpu_node, kubeconfig, runtime};
use serde_json::{json, Value};
use std::time::Duration;

/// A node of `product` in node group `group`, in `zone`, its network block `block`.
fn node(name: &str, group: &str, product: &str, mib: u32, zone: &str, block: &str) -> Value {
    let mut n = gpu_node(name, product, mib, 8, zone);
    let labels = &mut n["metadata"]["labels"];
    labels["eks.amazonaws.com/nodegroup"] = json!(group);
    labels["network.example.com/block"] = json!(block);
    n
}

/// The auto pool's fleet file, with `extra` in its [pools.kubernetes] table.
fn fleet_file(kubeconfig: &std::path::Path, extra: &str) -> String {
    format!(
        "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"eks\"\nname = \"eks\"\ninstance_type = \"node\"\ngpu = \"auto\"\ncpus = 0\nmemory_gb = 0\ncapacity = \"reserved\"\nprice_per_hour = 4.0\n[pools.kubernetes]\nkubeconfig = \"{}\"\ncontext = \"test\"\nimage = \"nvcr.io/nvidia/pytorch:25.01-py3\"\n{extra}",
        kubeconfig.display()
    )
}

#[test]
fn an_auto_pool_is_built_from_the_nodes_its_selector_picks_grouped_by_its_label() {
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    // Two H100 node groups (one in two zones), an A100 group, and nodes the selector leaves
    // out: a node of another team's and a CPU node.
    for (name, group, product, mib, zone, block) in [
        (
            "h-a-0",
            "train",
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "us-east-1a",
            "b1",
        ),
        (
            "h-a-1",
            "train",
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "us-east-1a",
            "b2",
        ),
        (
            "h-b-0",
            "train",
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "us-east-1b",
            "b3",
        ),
        (
            "a-0",
            "infer",
            "NVIDIA-A100-SXM4-80GB",
            81920,
            "us-east-1a",
            "b1",
        ),
        (
            "other-0",
            "theirs",
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "us-east-1a",
            "b1",
        ),
    ] {
        let mut n = node(name, group, product, mib, zone, block);
        if group != "theirs" {
            n["metadata"]["labels"]["gantry.dev/pool"] = json!("yes");
        }
        api.apply(n).unwrap();
    }
    let mut cpu = node("cpu-0", "train", "x", 0, "us-east-1a", "b1");
    cpu["status"]["allocatable"]["nvidia.com/gpu"] = json!("0");
    cpu["metadata"]["labels"]["gantry.dev/pool"] = json!("yes");
    api.apply(cpu).unwrap();

    let dir = daemon::temp_dir("kube-auto");
    let k = kubeconfig(&dir, &api.url);
    let file = dir.join("fleet.toml");
    std::fs::write(
        &file,
        fleet_file(
            &k,
            "node_selector = \"gantry.dev/pool=yes\"\npool_label = \"eks.amazonaws.com/nodegroup\"\nblock_label = \"network.example.com/block\"\n",
        ),
    )
    .unwrap();
    let d = daemon::start_in(
        dir.join("d"),
        &[
            "--config",
            file.to_str().unwrap(),
            "--cluster-look-every",
            "1s",
        ],
    );
    let fleet: Value = json(&d, &["fleet"]);
    let mut pools: Vec<(String, String)> = fleet["pools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["path"].as_str().unwrap_or_default().to_string(),
                p["model"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    pools.sort();
    let want = [
        ("kubernetes/k8s/us-east-1a/eks-infer", "A100-80GB"),
        ("kubernetes/k8s/us-east-1a/eks-train", "H100"),
        ("kubernetes/k8s/us-east-1b/eks-train-2", "H100"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    assert_eq!(pools, want, "{fleet:#}");
    let ev = events(&d).join("\n");
    assert!(
        ev.contains("pool eks: 5 node(s) match `gantry.dev/pool=yes`; the 4 with GPUs make 3 pool(s): eks-infer (1 × 8 A100-80GB), eks-train (2 × 8 H100), eks-train-2 (1 × 8 H100)"),
        "{ev}"
    );
    // A job lands on the H100 node group, bound where gantry chose.
    let id = submit(
        &d,
        &dir,
        "train",
        "name: train\nresources:\n  accelerators: H100:8\nrun: python train.py\n",
    );
    wait_for(&d, 30, "the job's pod to be bound", || {
        api.pods("gantry").iter().any(|p| {
            p["metadata"]["labels"]["gantry.dev/job"].as_str() == Some(&*id.to_string())
                && p["spec"]["nodeName"]
                    .as_str()
                    .is_some_and(|n| n.starts_with("h-"))
        })
    });
    wait_for(&d, 30, "the job to run", || state(&d, id) == "running");
    // Its nodes are the node group's in that zone, by name.
    let train = "kubernetes/k8s/us-east-1a/eks-train";
    let shown = cli(&d, &["fleet", "--pool", train]);
    assert!(
        shown.contains("h-a-0") && shown.contains("h-a-1") && !shown.contains("h-b-0"),
        "{shown}"
    );

    // The node group grows: the daemon sees it at its next look and the pool is rebuilt
    // with the new node, the running job kept where it runs.
    let mut grown = node(
        "h-a-2",
        "train",
        "NVIDIA-H100-80GB-HBM3",
        81559,
        "us-east-1a",
        "b2",
    );
    grown["metadata"]["labels"]["gantry.dev/pool"] = json!("yes");
    api.apply(grown).unwrap();
    wait_for(&d, 60, "the pool to take the new node", || {
        cli(&d, &["fleet", "--pool", train]).contains("h-a-2")
    });
    assert_eq!(state(&d, id), "running");
    let ev = events(&d).join("\n");
    assert!(
        ev.contains("fleet file reloaded: ") && ev.contains("h-a-2"),
        "the rebuild is said: {ev}"
    );
    assert!(
        !ev.contains(&format!("job {id} running → pending")),
        "the job was not requeued by the rebuild: {ev}"
    );
}

#[test]
fn a_cluster_that_cannot_be_read_leaves_the_auto_pool_empty_and_says_why() {
    let dir = daemon::temp_dir("kube-auto-down");
    // Nothing listens there.
    let k = kubeconfig(&dir, &format!("http://127.0.0.1:{}", daemon::free_port()));
    let file = dir.join("fleet.toml");
    std::fs::write(&file, fleet_file(&k, "")).unwrap();
    let d = daemon::start_in(dir.join("d"), &["--config", file.to_str().unwrap()]);
    let ev = events(&d).join("\n");
    assert!(
        ev.contains("pool eks: cannot read the cluster's nodes (")
            && ev.contains("the pool has no nodes until it can"),
        "{ev}"
    );
    // The daemon serves, with the pool empty.
    let fleet: Value = json(&d, &["fleet"]);
    assert_eq!(fleet["pools"][0]["gpus"], 0, "{fleet:#}");

    // A selector that is not one is refused where it is written.
    std::fs::write(&file, fleet_file(&k, "node_selector = \"a,,b\"\n")).unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(["fleet", "--config", file.to_str().unwrap()])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("node_selector = \"a,,b\": an empty requirement"),
        "{err}"
    );
}
