//! Kubernetes clusters, against gantry's test API server (`gantry::testkit::apiserver`: no
//! kube-apiserver can be installed here). The server is checked with the real `kubectl`
//! (discovery, lists, label and field selectors, watches) so it cannot drift from what a
//! client expects; then `gantry kube` reads the cluster through kube-rs reflectors, and the
//! watches are cut, resumed and sent back to list by a 410.

#[path = "common/daemon.rs"]
mod daemon;
#[path = "common/kube_cluster.rs"]
mod kube_cluster;

use gantry::backend::kube::inventory::Labels;
use gantry::backend::kube::{connect, Watched};
use gantry::testkit::apiserver::{ApiServer, Kind};
use kube_cluster::{cluster, gpu_node, gpu_pod, have_kubectl, kubeconfig, kubectl, runtime, temp};
use serde_json::{json, Value};
use std::path::PathBuf;
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

/// The pods of gantry's namespace for job `job`: (name, node, pod).
fn pods_of(api: &ApiServer, job: i64) -> Vec<(String, String, Value)> {
    let mut pods: Vec<_> = api
        .pods("gantry")
        .into_iter()
        .filter(|p| p["metadata"]["labels"]["gantry.dev/job"].as_str() == Some(&*job.to_string()))
        .map(|p| {
            (
                p["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p["spec"]["nodeName"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                p,
            )
        })
        .collect();
    pods.sort_by(|a, b| a.0.cmp(&b.0));
    pods
}

/// A daemon whose one pool is the test cluster's H100 nodes.
fn daemon_over(api: &ApiServer, test: &str, hosts: &[&str]) -> daemon::Daemon {
    let dir = daemon::temp_dir(test);
    let k = kubeconfig(&dir, &api.url);
    let hosts: Vec<String> = hosts.iter().map(|h| format!("\"{h}\"")).collect();
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"us-east-1a\"\nname = \"h100\"\ninstance_type = \"p5.48xlarge\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 190\nmemory_gb = 1900\ncapacity = \"reserved\"\nprice_per_hour = 98.32\nkubeconfig = \"{}\"\ncontext = \"test\"\nimage = \"nvcr.io/nvidia/pytorch:25.01-py3\"\nhosts = [{}]\n",
            k.display(),
            hosts.join(", ")
        ),
    )
    .unwrap();
    start_daemon(dir)
}

/// The daemon of `dir` (its fleet file there), started again after a crash too.
fn start_daemon(dir: PathBuf) -> daemon::Daemon {
    let fleet = dir.join("fleet.toml");
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("daemon.err"))
        .unwrap();
    daemon::start_with(dir, &["--config", fleet.to_str().unwrap()], |cmd| {
        cmd.stderr(err);
    })
}

fn env_of(pod: &Value, name: &str) -> Option<String> {
    pod["spec"]["containers"][0]["env"]
        .as_array()?
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_str())
        .map(str::to_string)
}

/// gantry's jobs become pods bound (through `pods/binding`) to the nodes its core chose:
/// the GPUs pods of others hold are left alone, cordoned and NotReady nodes take nothing;
/// the pod's phase and exit code drive the job, its log is the job's, a preemption deletes
/// it with the job's grace and the requeued job runs again as a new pod, and gantry deletes
/// the pods of ended runs.
#[test]
fn gantry_jobs_run_as_pods_bound_to_the_nodes_gantry_chose() {
    use daemon::{cli, events, job, log_text, state, submit, wait_for};
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    cluster(&api);
    api.remove(Kind::Pod, "gantry", "gantry-7-0");
    api.apply(gpu_node(
        "gpu-3",
        "NVIDIA-H100-80GB-HBM3",
        81559,
        8,
        "us-east-1a",
    ))
    .unwrap();
    let d = daemon_over(&api, "kube-run", &["gpu-0", "gpu-1", "gpu-2", "gpu-3"]);
    wait_for(&d, 30, "the nodes to be read", || {
        let ev = events(&d);
        let said = |s: &str| ev.iter().any(|e| e.contains(s));
        said("pod research/llama-sft-0 holds 6 GPU(s) on gpu-0")
            && said("host gpu-1 cordoned")
            && said("node gpu-2 is not Ready")
            && ev.iter().filter(|e| e.contains("connected:")).count() >= 3
    });
    // Four GPUs: gpu-0 has two free, gpu-1 is cordoned, gpu-2 is down: gpu-3.
    let dir = d.dir.clone();
    let first = submit(
        &d,
        &dir,
        "first",
        "name: first\nresources:\n  accelerators: H100:4\n  image_id: docker:nvcr.io/nvidia/pytorch:24.12-py3\nenvs:\n  MODEL: llama\nrun: python train.py\n",
    );
    wait_for(&d, 30, "its pod to be bound", || {
        pods_of(&api, first).len() == 1
    });
    let (name, node, pod) = pods_of(&api, first).remove(0);
    assert_eq!(node, "gpu-3", "{pod:#}");
    assert_eq!(pod["spec"]["schedulerName"], "gantry");
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"],
        "4"
    );
    assert_eq!(
        pod["spec"]["containers"][0]["image"], "nvcr.io/nvidia/pytorch:24.12-py3",
        "the job's image_id"
    );
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "gantry"
    );
    assert_eq!(env_of(&pod, "MODEL").as_deref(), Some("llama"));
    assert_eq!(
        env_of(&pod, "GANTRY_RUN").as_deref(),
        Some("python train.py")
    );
    assert_eq!(env_of(&pod, "GANTRY_NUM_GPUS").as_deref(), Some("4"));
    wait_for(&d, 30, "the job to run", || state(&d, first) == "running");
    // Its output is read through the pod log API.
    api.log("gantry", &name, "step 1 loss 2.31\n");
    wait_for(&d, 30, "its log", || {
        log_text(&d, first).contains("step 1 loss 2.31")
    });
    // The container exits 0: the job completes and gantry deletes the pod.
    api.finish("gantry", &name, 0);
    wait_for(&d, 30, "the job to complete", || {
        state(&d, first) == "completed"
    });
    wait_for(&d, 30, "its pod to be deleted", || {
        pods_of(&api, first).is_empty()
    });
    // A whole node, with a checkpoint grace: preempted, its pod is deleted with that grace
    // (terminating until the container ends), the job requeues and runs again as a new pod.
    let whole = submit(
        &d,
        &dir,
        "whole",
        "name: whole\nresources:\n  accelerators: H100:8\ncheckpoint: {signal: SIGTERM, grace: 45s}\nrun: python train.py --resume\n",
    );
    wait_for(&d, 30, "the whole node to run", || {
        state(&d, whole) == "running"
    });
    let (old, node, pod) = pods_of(&api, whole).remove(0);
    assert_eq!(node, "gpu-3");
    assert_eq!(
        pod["spec"]["containers"][0]["image"], "nvcr.io/nvidia/pytorch:25.01-py3",
        "the pool's image"
    );
    cli(&d, &["preempt", &whole.to_string()]);
    wait_for(&d, 30, "the delete with the job's grace", || {
        api.get(Kind::Pod, "gantry", &old).is_some_and(|p| {
            p["metadata"]["deletionGracePeriodSeconds"] == 45
                && !p["metadata"]["deletionTimestamp"].is_null()
        })
    });
    assert_eq!(state(&d, whole), "preempting");
    // The container checkpoints and exits on SIGTERM.
    api.finish("gantry", &old, 0);
    wait_for(&d, 30, "the requeue and the new pod", || {
        pods_of(&api, whole)
            .iter()
            .any(|(n, node, _)| *n != old && node == "gpu-3")
            && state(&d, whole) == "running"
    });
    assert!(api.get(Kind::Pod, "gantry", &old).is_none());
    // A container that exits 3 fails its job with that code.
    let (new, _, _) = pods_of(&api, whole).remove(0);
    api.finish("gantry", &new, 3);
    wait_for(&d, 30, "the failure", || state(&d, whole) == "failed");
    let said = format!("job {whole} running → failed: exited with code 3 on gpu-3");
    assert!(
        events(&d).iter().any(|e| e.starts_with(&said)),
        "{said}: {:?}",
        events(&d)
    );
    assert_eq!(job(&d, whole)["state"], "failed");
    wait_for(&d, 30, "the failed run's pod to be deleted", || {
        pods_of(&api, whole).is_empty()
    });
    // The cluster cordons gpu-3: gantry says so and places nothing there.
    let mut cordon = api.get(Kind::Node, "", "gpu-3").unwrap();
    cordon["spec"]["unschedulable"] = json!(true);
    api.apply(cordon).unwrap();
    wait_for(&d, 30, "the cordon", || {
        events(&d).iter().any(|e| e.contains("host gpu-3 cordoned"))
    });
    let waits = submit(
        &d,
        &dir,
        "waits",
        "name: waits\nresources:\n  accelerators: H100:4\nrun: python train.py\n",
    );
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(state(&d, waits), "pending");
    assert!(pods_of(&api, waits).is_empty());
}

/// gantry killed (SIGKILL) while its pod runs finds the run again when it starts (by the
/// pod's job label and token): the job is not started twice, and ends once, with its pod's
/// exit code.
#[test]
fn a_daemon_killed_while_its_pod_runs_finds_the_run_again() {
    use daemon::{events, state, submit, wait_for};
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    api.apply(gpu_node(
        "gpu-3",
        "NVIDIA-H100-80GB-HBM3",
        81559,
        8,
        "us-east-1a",
    ))
    .unwrap();
    let d = daemon_over(&api, "kube-crash", &["gpu-3"]);
    let dir = d.dir.clone();
    let id = submit(
        &d,
        &dir,
        "long",
        "name: long\nresources:\n  accelerators: H100:8\nrun: python train.py\n",
    );
    wait_for(&d, 30, "its pod to run", || {
        state(&d, id) == "running"
            && pods_of(&api, id)
                .first()
                .is_some_and(|(_, _, p)| p["status"]["phase"] == "Running")
    });
    let (name, _, _) = pods_of(&api, id).remove(0);
    let mut d = d;
    unsafe { libc::kill(d.child.id() as i32, libc::SIGKILL) };
    let _ = d.child.wait();
    std::mem::forget(d);
    let d = start_daemon(dir);
    wait_for(&d, 30, "the run to be found again", || {
        events(&d).iter().any(|e| e.contains("re-adopted"))
    });
    assert_eq!(state(&d, id), "running");
    assert_eq!(pods_of(&api, id).len(), 1, "no second pod");
    api.finish("gantry", &name, 0);
    wait_for(&d, 30, "the job to complete", || {
        state(&d, id) == "completed"
    });
    wait_for(&d, 30, "its pod to be deleted", || {
        pods_of(&api, id).is_empty()
    });
    let ev = events(&d);
    let count = |s: &str| ev.iter().filter(|e| e.contains(s)).count();
    assert_eq!(
        (
            count(&format!("job {id} pending → running")),
            count(&format!("job {id} running → completed"))
        ),
        (1, 1),
        "{}",
        ev.join("\n")
    );
}

/// A two-node gang's pods are all created before any is bound: refused one (a namespace
/// quota), none is bound and the one made is deleted; allowed, both are bound on the nodes
/// gantry chose, with their ranks, and the job ends when both have.
#[test]
fn a_gang_is_bound_whole_or_not_at_all() {
    use daemon::{events, state, submit, wait_for};
    let rt = runtime();
    let api = ApiServer::start(rt.handle(), Duration::from_millis(200)).unwrap();
    for n in ["gpu-a", "gpu-b"] {
        api.apply(gpu_node(n, "NVIDIA-H100-80GB-HBM3", 81559, 8, "us-east-1a"))
            .unwrap();
    }
    let d = daemon_over(&api, "kube-gang", &["gpu-a", "gpu-b"]);
    let dir = d.dir.clone();
    let gang =
        "name: gang\nnum_nodes: 2\nresources:\n  accelerators: H100:8\nrun: torchrun train.py\n";
    api.quota_pods("gantry", Some(1));
    let refused = submit(&d, &dir, "refused", gang);
    wait_for(&d, 30, "the refusal", || {
        events(&d)
            .iter()
            .any(|e| e.starts_with(&format!("job {refused} ")) && e.contains("exceeded quota"))
    });
    wait_for(&d, 30, "the pod made to be deleted", || {
        pods_of(&api, refused).is_empty()
    });
    assert_eq!(api.counts().bindings, 0, "half a gang was bound");
    api.quota_pods("gantry", None);
    let id = submit(&d, &dir, "gang", gang);
    wait_for(&d, 30, "both pods bound", || {
        pods_of(&api, id)
            .iter()
            .filter(|(_, node, _)| !node.is_empty())
            .count()
            == 2
    });
    let pods = pods_of(&api, id);
    let mut placed: Vec<(String, Option<String>, Option<String>)> = pods
        .iter()
        .map(|(_, node, p)| {
            assert_eq!(p["spec"]["hostNetwork"], true, "{p:#}");
            (
                node.clone(),
                env_of(p, "GANTRY_NODE_RANK"),
                env_of(p, "GANTRY_NUM_NODES"),
            )
        })
        .collect();
    placed.sort();
    let two = Some("2".to_string());
    let mut ranks: Vec<_> = placed.iter().map(|p| p.1.clone().unwrap()).collect();
    ranks.sort();
    assert_eq!(ranks, ["0", "1"]);
    assert_eq!(
        placed
            .iter()
            .map(|p| (p.0.as_str(), p.2.clone()))
            .collect::<Vec<_>>(),
        [("gpu-a", two.clone()), ("gpu-b", two)]
    );
    assert_eq!(api.counts().bindings, 2);
    wait_for(&d, 30, "the gang to run", || state(&d, id) == "running");
    for (name, _, _) in &pods {
        api.finish("gantry", name, 0);
    }
    wait_for(&d, 30, "the gang to complete", || {
        state(&d, id) == "completed"
    });
}
