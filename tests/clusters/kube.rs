//! Kubernetes clusters, against gantry's test API server (`gantry_testkit::apiserver`: no
//! kube-apiserver can be installed here). The server is checked with the real `kubectl`
//! (discovery, lists, label and field selectors, watches) so it cannot drift from what a
//! client expects; then `gantry kube` reads the cluster through kube-rs reflectors, and the
//! watches are cut, resumed and sent back to list by a 410.

use crate::support::kube_cluster;

use gantry::backend::kube::inventory::Labels;
use gantry::backend::kube::{connect, Watched};
use gantry_testkit::apiserver::{ApiServer, Kind};
use kube_cluster::{cluster, gpu_node, gpu_pod, have_kubectl, kubeconfig, kubectl, runtime, temp};
use serde_json::{json, Value};
use std::process::Command;
use std::time::{Duration, Instant};

/// What the real kubectl sees of the test server is what it sees of a cluster.
#[test]
fn kubectl_reads_the_test_api_server_as_a_cluster() {
    if !have_kubectl() {
        return;
    }
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    cluster(&api);
    let dir = temp("kubectl");
    let k = kubeconfig(&dir, &api.url);
    let nodes: Value = serde_json::from_str(&kubectl(&k, &["get", "nodes", "-o", "json"])).unwrap();
    let items = nodes["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    assert!(items
        .iter()
        .all(|n| n["metadata"]["resourceVersion"].as_str().is_some()));
    assert_eq!(
        kubectl(
            &k,
            &[
                "get",
                "nodes",
                "-l",
                "nvidia.com/mig.strategy=mixed",
                "-o",
                "name"
            ]
        ),
        "node/mig-0\n"
    );
    assert_eq!(
        kubectl(
            &k,
            &[
                "get",
                "pods",
                "-A",
                "--field-selector",
                "spec.nodeName=gpu-0,status.phase=Running",
                "-o",
                "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name} {end}"
            ]
        ),
        "gantry/gantry-7-0 research/llama-sft-0 "
    );
    assert_eq!(
        kubectl(
            &k,
            &[
                "get",
                "pod",
                "-n",
                "research",
                "llama-sft-0",
                "-o",
                "jsonpath={.spec.nodeName}"
            ]
        ),
        "gpu-0"
    );
    // Pages of one item, followed by their continue tokens, are the whole list.
    assert_eq!(
        kubectl(&k, &["get", "pods", "-A", "--chunk-size=1", "-o", "name"]),
        "pod/gantry-7-0\npod/eval-done\npod/llama-sft-0\n"
    );
    // Namespaces (gantry reads a team from their labels): listed and read by name.
    api.apply(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "research", "labels": {"gantry.dev/team": "ml"}},
        "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}
    }))
    .unwrap();
    assert_eq!(
        kubectl(&k, &["get", "namespaces", "-o", "name"]),
        "namespace/research\n"
    );
    assert_eq!(
        kubectl(
            &k,
            &[
                "get",
                "ns",
                "research",
                "-o",
                "jsonpath={.metadata.labels.gantry\\.dev/team}"
            ]
        ),
        "ml"
    );
    // A watch: kubectl sees a pod added and deleted while it watches.
    let mut watch = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k)
        .args([
            "get",
            "pods",
            "-n",
            "research",
            "-w",
            "--output-watch-events",
            "-o",
            "json",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    api.apply(gpu_pod("research", "new-job", "gpu-0", 1, "Pending"))
        .unwrap();
    api.remove(Kind::Pod, "research", "new-job");
    std::thread::sleep(Duration::from_millis(1500));
    let _ = watch.kill();
    let out = watch.wait_with_output().unwrap();
    let said: Vec<(String, String)> = serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<Value>()
        .map(|e| {
            let e = e.unwrap();
            (
                e["type"].as_str().unwrap_or_default().to_string(),
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
            )
        })
        .collect();
    let new: Vec<&str> = said
        .iter()
        .filter(|(_, n)| n == "new-job")
        .map(|(t, _)| t.as_str())
        .collect();
    assert_eq!(new, ["ADDED", "DELETED"], "{said:?}");
    // Errors as the real server writes them.
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k)
        .args(["get", "node", "nope"])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nodes \"nope\" not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn gantry(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_gantry"))
        .args(args)
        .env_remove("KUBECONFIG")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// What a scheduler does to pods, as kubectl does it to the test server: create, bind (once),
/// logs, delete with a grace (terminating until the pod ends), and a grace that runs out.
#[test]
fn kubectl_creates_binds_reads_and_deletes_pods() {
    if !have_kubectl() {
        return;
    }
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    cluster(&api);
    let dir = temp("pods");
    let k = kubeconfig(&dir, &api.url);
    let mut pod = gpu_pod("research", "x", "", 2, "Pending");
    pod["spec"].as_object_mut().unwrap().remove("nodeName");
    pod["spec"]["schedulerName"] = json!("gantry");
    pod.as_object_mut().unwrap().remove("status");
    let file = dir.join("pod.json");
    std::fs::write(&file, pod.to_string()).unwrap();
    let out = kubectl(
        &k,
        &["create", "--validate=false", "-f", file.to_str().unwrap()],
    );
    assert_eq!(out.trim(), "pod/x created");
    let phase = |name: &str| {
        kubectl(
            &k,
            &[
                "get",
                "pod",
                "-n",
                "research",
                name,
                "-o",
                "jsonpath={.status.phase} {.spec.nodeName}",
            ],
        )
    };
    assert_eq!(phase("x"), "Pending ");
    let binding = dir.join("binding.json");
    std::fs::write(
        &binding,
        r#"{"apiVersion":"v1","kind":"Binding","metadata":{"name":"x"},"target":{"apiVersion":"v1","kind":"Node","name":"gpu-0"}}"#,
    )
    .unwrap();
    let raw = "/api/v1/namespaces/research/pods/x/binding";
    kubectl(
        &k,
        &["create", "--raw", raw, "-f", binding.to_str().unwrap()],
    );
    assert_eq!(phase("x"), "Running gpu-0");
    let again = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&k)
        .args(["create", "--raw", raw, "-f", binding.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("already assigned to node \"gpu-0\""),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    api.log("research", "x", "step 1\nstep 2\n");
    assert_eq!(
        kubectl(&k, &["logs", "-n", "research", "x"]),
        "step 1\nstep 2\n"
    );
    assert_eq!(
        kubectl(&k, &["logs", "-n", "research", "x", "--tail=1"]),
        "step 2\n"
    );
    // Deleted with a grace: terminating until it ends, then gone.
    kubectl(
        &k,
        &[
            "delete",
            "pod",
            "-n",
            "research",
            "x",
            "--grace-period=60",
            "--wait=false",
        ],
    );
    let deleting = kubectl(
        &k,
        &[
            "get",
            "pod",
            "-n",
            "research",
            "x",
            "-o",
            "jsonpath={.metadata.deletionGracePeriodSeconds}",
        ],
    );
    assert_eq!(deleting, "60");
    api.finish("research", "x", 0);
    assert!(api.get(Kind::Pod, "research", "x").is_none());
    // A pod that does not end within its grace is killed (exit 137) and goes.
    let mut y = gpu_pod("research", "y", "gpu-0", 1, "Running");
    y["spec"]["terminationGracePeriodSeconds"] = json!(1);
    api.apply(y).unwrap();
    kubectl(
        &k,
        &["delete", "pod", "-n", "research", "y", "--wait=false"],
    );
    assert!(api.get(Kind::Pod, "research", "y").is_some());
    wait("the grace to run out", || {
        api.get(Kind::Pod, "research", "y").is_none()
    });
}

/// `gantry kube` shows the GPU nodes, their models, which take work, and who holds GPUs.
#[test]
fn gantry_kube_shows_gpu_nodes_and_who_holds_them() {
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_secs(1)).unwrap();
    cluster(&api);
    let dir = temp("show");
    let k = kubeconfig(&dir, &api.url);
    let ks = k.to_str().unwrap();
    let (ok, out, err) = gantry(&[
        "kube",
        "--kubeconfig",
        ks,
        "--context",
        "test",
        "-o",
        "json",
    ]);
    assert!(ok, "{err}");
    let nodes: Value = serde_json::from_str(&out).unwrap();
    let node = |n: &str| {
        nodes
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .cloned()
            .unwrap()
    };
    let g0 = node("gpu-0");
    assert_eq!(
        (
            g0["gpus"].as_u64(),
            g0["product"].as_str(),
            g0["gpu_memory_mib"].as_u64()
        ),
        (Some(8), Some("NVIDIA-H100-80GB-HBM3"), Some(81559))
    );
    assert_eq!(g0["pool"], "p5.48xlarge");
    assert_eq!(g0["zone"], "us-east-1a");
    assert_eq!(
        g0["unusable"],
        json!([]),
        "the GPU taint is one gantry's pods tolerate"
    );
    assert_eq!(
        g0["foreign"],
        json!([{"namespace": "research", "name": "llama-sft-0", "phase": "Running", "gpus": 6}])
    );
    assert_eq!(g0["gantry_gpus"], 1);
    assert_eq!(node("gpu-1")["unusable"], json!(["cordoned"]));
    assert_eq!(node("gpu-2")["unusable"], json!(["not Ready"]));
    assert_eq!(node("mig-0")["mig"], json!({"1g.10gb": 14, "3g.40gb": 2}));
    let (ok, table, err) = gantry(&["kube", "--kubeconfig", ks]);
    assert!(ok, "{err}");
    assert!(table.contains("7/8"), "{table}");
    assert!(
        table.contains("research             llama-sft-0"),
        "{table}"
    );
    assert!(table.contains("cordoned"), "{table}");
    // A context the file does not have, and a server that is not there: one line each.
    let (ok, _, err) = gantry(&["kube", "--kubeconfig", ks, "--context", "prod"]);
    assert!(!ok);
    assert!(
        err.contains("context prod") && err.contains("kubectl config get-contexts"),
        "{err}"
    );
    let gone = kubeconfig(&temp("gone"), "http://127.0.0.1:1");
    let (ok, _, err) = gantry(&["kube", "--kubeconfig", gone.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("cannot reach the API server"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

fn wait(what: &str, mut done: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !done() {
        assert!(t0.elapsed() < Duration::from_secs(20), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The reflectors follow the cluster through cut watches (resumed from their version,
/// nothing missed) and a version the server no longer has (410 Gone: listed again).
#[test]
fn watches_resume_after_a_cut_and_list_again_after_410() {
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    cluster(&api);
    let dir = temp("watch");
    let k = kubeconfig(&dir, &api.url);
    let watched = rt.block_on(async {
        let c = connect(Some(&k), None).await.unwrap();
        let w = Watched::start(&tokio::runtime::Handle::current(), &c);
        w.ready(Duration::from_secs(10)).await.unwrap();
        // `ready` is the nodes' and pods' first lists; the namespaces' and jobs' watches
        // list too, and a count taken before theirs are in counts them as lists again.
        let all = async {
            let _ = w.namespaces.wait_until_ready().await;
            let _ = w.jobs.wait_until_ready().await;
        };
        tokio::time::timeout(Duration::from_secs(10), all)
            .await
            .expect("the namespaces' and jobs' first lists");
        w
    });
    let labels = Labels::default();
    let foreign_on = |node: &str| -> Vec<String> {
        watched
            .inventory(&labels)
            .into_iter()
            .find(|n| n.name == node)
            .map(|n| n.foreign.into_iter().map(|p| p.name).collect())
            .unwrap_or_default()
    };
    assert_eq!(foreign_on("gpu-0"), ["llama-sft-0"]);
    // Changes while the watches are cut are seen once they resume (from their version: no
    // new list).
    let before = api.counts();
    api.drop_watches();
    api.apply(gpu_pod("research", "while-cut", "gpu-0", 1, "Running"))
        .unwrap();
    api.remove(Kind::Pod, "research", "llama-sft-0");
    wait("the changes made while cut", || {
        foreign_on("gpu-0") == ["while-cut"]
    });
    let after = api.counts();
    assert_eq!(after.lists, before.lists, "resumed without listing again");
    assert!(after.watches >= before.watches + 2, "{after:?}");
    // The server forgets its history and cuts the watches: resuming answers 410, the
    // reflectors list again and miss nothing.
    api.compact();
    api.drop_watches();
    api.apply(gpu_pod("research", "after-410", "gpu-0", 1, "Running"))
        .unwrap();
    let mut cordon = api.get(Kind::Node, "", "gpu-1").unwrap();
    cordon["spec"]["unschedulable"] = json!(false);
    cordon["spec"]["taints"] = json!([]);
    api.apply(cordon).unwrap();
    wait("the changes after 410", || {
        foreign_on("gpu-0") == ["after-410", "while-cut"]
            && watched
                .inventory(&labels)
                .iter()
                .any(|n| n.name == "gpu-1" && n.unusable.is_empty())
    });
    let last = api.counts();
    assert!(last.gone >= 1 && last.lists > after.lists, "{last:?}");
    assert!(watched.error().is_none());
}

/// `gantry kube --fleet` writes the cluster's GPU nodes as fleet-file pools: grouped by the
/// instance type and zone, each node's network block (the label given) and NVLink clique
/// as the pool's named leaves and NVLink domains; the file loads, and the daemon's fleet
/// places those nodes in those leaves and domains.
#[test]
fn gantry_kube_fleet_writes_pools_with_their_topology() {
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_secs(1)).unwrap();
    for (name, block, clique) in [
        ("gb-0", "block-1", "rack-a.0"),
        ("gb-1", "block-1", "rack-a.0"),
        ("gb-2", "block-2", "rack-b.0"),
    ] {
        let mut n = gpu_node(name, "NVIDIA-H100-80GB-HBM3", 81559, 8, "us-east-1a");
        n["metadata"]["labels"]["network.example.com/block"] = json!(block);
        n["metadata"]["labels"]["nvidia.com/gpu.clique"] = json!(clique);
        api.apply(n).unwrap();
    }
    let dir = temp("fleet");
    let k = kubeconfig(&dir, &api.url);
    let (ok, text, err) = gantry(&[
        "kube",
        "--kubeconfig",
        k.to_str().unwrap(),
        "--context",
        "test",
        "--block-label",
        "network.example.com/block",
        "--fleet",
    ]);
    assert!(ok, "{err}");
    assert!(
        text.contains("leaves = { \"block-1\" = [\"gb-0\", \"gb-1\"], \"block-2\" = [\"gb-2\"] }"),
        "{text}"
    );
    assert!(text.contains("context = \"test\""), "{text}");
    let cfg =
        gantry::config::fleet::parse("fleet.toml", &format!("[[teams]]\nname = \"lab\"\n{text}"))
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(cfg.pools.len(), 1);
    assert_eq!(
        (
            cfg.pools[0].name.as_str(),
            cfg.pools[0].gpu.as_deref(),
            cfg.pools[0].vram_gb
        ),
        ("p5-48xlarge", Some("H100"), 80)
    );
    let f = gantry::config::fleet::fleet_of(&cfg);
    let at = |name: &str| f.nodes.iter().find(|n| n.name == name).unwrap();
    assert_eq!(at("gb-0").leaf, at("gb-1").leaf);
    assert_ne!(at("gb-0").leaf, at("gb-2").leaf);
    assert_eq!(at("gb-0").nvlink, at("gb-1").nvlink);
    assert_ne!(at("gb-1").nvlink, at("gb-2").nvlink);
}
