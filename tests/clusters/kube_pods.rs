//! gantry's daemon over a Kubernetes cluster (gantry's test API server, whose kubelet
//! stand-in runs a pod once bound; the tests end pods with exit codes): jobs as pods bound
//! where gantry chose, gangs bound whole or not at all, a daemon killed and restarted, GPU
//! telemetry from a DCGM exporter.

use crate::support::daemon;
use crate::support::kube_cluster;
use crate::support::kube_daemon;

use gantry_testkit::apiserver::{ApiServer, Kind};
use kube_cluster::{cluster, kubeconfig, runtime};
use kube_daemon::{
    daemon_over, daemon_with, free_nodes, start_daemon, start_daemon_with, user_pod,
};
use serde_json::{json, Value};
use std::time::Duration;

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
    let api = free_nodes(&rt, &["gpu-3"]);
    cluster(&api);
    api.remove(Kind::Pod, "gantry", "gantry-7-0");
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
    // Bound, not only created: gantry creates a job's pods first and binds them after (CI once
    // read the pod in between, its nodeName still empty).
    wait_for(&d, 30, "its pod to be bound", || {
        let pods = pods_of(&api, first);
        pods.len() == 1 && !pods[0].1.is_empty()
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
    // The node's GPUs name the pod that holds them (the console's node view, `gantry fleet
    // --node`), as nvitop names a GPU's processes.
    let held = format!("as pod gantry/{name}");
    wait_for(&d, 30, "the node view to name the pod", || {
        cli(&d, &["fleet", "--node", "gpu-3"]).contains(&held)
    });
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
    let api = free_nodes(&rt, &["gpu-3"]);
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
    // A command inside its pod through the exec API (`kubectl exec`, as k9s does): the
    // container's environment, its exit status returned.
    if kube_cluster::have_kubectl() {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
            .arg("--connect")
            .arg(&d.socket)
            .args(["exec", &id.to_string(), "--", "sh", "-c"])
            .arg("echo \"job=$GANTRY_JOB_ID rank=$GANTRY_NODE_RANK\"; exit 4")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(4),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains(&format!("job={id} rank=0")), "{text}");
    }
    // Its logs, read by the new daemon from the pod (issue 35: logs outlive the daemon).
    api.log("gantry", &name, "epoch 1\nepoch 2\n");
    let logs = daemon::log_text(&d, id);
    assert!(logs.contains("epoch 2"), "{logs}");
    api.finish("gantry", &name, 0);
    wait_for(&d, 30, "the job to complete", || {
        state(&d, id) == "completed"
    });
    wait_for(&d, 30, "its pod to be deleted", || {
        pods_of(&api, id).is_empty()
    });
    // With its pod gone, so are its logs, and that is what is said.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gantry"))
        .arg("--connect")
        .arg(&d.socket)
        .args(["logs", &id.to_string()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(
        said.contains("Kubernetes keeps a pod's log only while the pod exists"),
        "{said}"
    );
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
    let api = free_nodes(&rt, &["gpu-a", "gpu-b"]);
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
    // The worker is owned by the head: `kubectl delete pod HEAD` takes the gang.
    let rank = |r: &str| {
        pods.iter()
            .find(|(_, _, p)| p["metadata"]["labels"]["gantry.dev/rank"] == r)
            .map(|(_, _, p)| p.clone())
            .unwrap()
    };
    let (head, worker) = (rank("0"), rank("1"));
    assert!(head["metadata"]["ownerReferences"].is_null(), "{head:#}");
    let owner = &worker["metadata"]["ownerReferences"][0];
    assert_eq!(
        (&owner["kind"], &owner["name"], &owner["uid"]),
        (
            &json!("Pod"),
            &head["metadata"]["name"],
            &head["metadata"]["uid"]
        ),
        "{worker:#}"
    );
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

/// A DCGM exporter's text for `node`: per GPU (util %, MiB used, the pod it is given to).
fn dcgm_text(node: &str, gpus: &[(u32, Option<&str>)]) -> String {
    let mut out = String::new();
    for (metric, help) in [
        ("DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %)."),
        ("DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB)."),
        ("DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB)."),
    ] {
        out.push_str(&format!("# HELP {metric} {help}\n# TYPE {metric} gauge\n"));
        for (i, (util, pod)) in gpus.iter().enumerate() {
            let used = if pod.is_some() { 60_000 } else { 0 };
            let value = match metric {
                "DCGM_FI_DEV_GPU_UTIL" => *util,
                "DCGM_FI_DEV_FB_USED" => used,
                _ => 81_559 - used,
            };
            let pod = pod.map_or(String::new(), |p| {
                format!(",container=\"main\",namespace=\"gantry\",pod=\"{p}\"")
            });
            out.push_str(&format!(
                "{metric}{{gpu=\"{i}\",UUID=\"GPU-{i:04}\",pci_bus_id=\"00000000:{i:02X}:00.0\",device=\"nvidia{i}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"{node}\",DCGM_FI_DRIVER_VERSION=\"550.90.07\"{pod}}} {value}\n"
            ));
        }
    }
    out
}

/// With a DCGM exporter, a Kubernetes node's GPUs are measured; the device plugin gave the
/// job's pod other GPUs than the indices gantry granted, and the job's GPUs still show the
/// utilization and memory of the GPUs its pod really has. An exporter that goes away is said
/// once, and the GPUs are then unmeasured, not invented.
#[test]
fn dcgm_telemetry_measures_the_gpus_a_jobs_pods_really_have() {
    use daemon::{events, json as cli_json, state, submit, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-3"]);
    let text = std::sync::Arc::new(std::sync::Mutex::new(dcgm_text("gpu-3", &[(0, None); 8])));
    let serve = text.clone();
    let app = axum::Router::new().route(
        "/metrics",
        axum::routing::get(move || {
            let t = serve.lock().unwrap().clone();
            async move {
                if t.is_empty() {
                    (axum::http::StatusCode::SERVICE_UNAVAILABLE, t)
                } else {
                    (axum::http::StatusCode::OK, t)
                }
            }
        }),
    );
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let url = format!("http://{}/metrics", listener.local_addr().unwrap());
    rt.spawn(async move { axum::serve(listener, app).await });
    let d = daemon_with(
        &api,
        "kube-dcgm",
        &["gpu-3"],
        &format!("dcgm = \"{url}\"\n"),
    );
    let gpus = |d: &daemon::Daemon| -> Vec<Value> {
        let pool = cli_json(d, &["fleet", "--pool", "0"]);
        pool["nodes"][0]["gpus"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    wait_for(&d, 30, "the GPUs to be measured", || {
        let g = gpus(&d);
        g.len() == 8
            && g.iter()
                .all(|g| g["unmeasured"].is_null() && g["vram_total_mib"] == 81559)
    });
    let dir = d.dir.clone();
    let id = submit(
        &d,
        &dir,
        "two",
        "name: two\nresources:\n  accelerators: H100:2\nrun: python train.py\n",
    );
    wait_for(&d, 30, "its pod", || {
        state(&d, id) == "running" && pods_of(&api, id).len() == 1
    });
    let (pod, _, p) = pods_of(&api, id).remove(0);
    let granted = p["metadata"]["annotations"]["gantry.dev/gpus"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(granted.split(',').count(), 2, "{granted}");
    // The device plugin gave the pod GPUs 5 and 6.
    let mut now = vec![(0, None); 8];
    now[5] = (88, Some(pod.as_str()));
    now[6] = (77, Some(pod.as_str()));
    *text.lock().unwrap() = dcgm_text("gpu-3", &now);
    wait_for(&d, 30, "the job's GPUs to show its pod's", || {
        let mut theirs: Vec<(u64, u64)> = gpus(&d)
            .iter()
            .filter(|g| g["jobs"].as_array().is_some_and(|j| j.contains(&json!(id))))
            .map(|g| {
                (
                    g["util_pct"].as_f64().unwrap_or(0.0) as u64,
                    g["vram_used_mib"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        theirs.sort();
        theirs == [(77, 60_000), (88, 60_000)]
    });
    assert!(
        gpus(&d)
            .iter()
            .filter(|g| g["jobs"].as_array().is_some_and(|j| j.is_empty()))
            .all(|g| g["util_pct"].as_f64() == Some(0.0)),
        "{:?}",
        gpus(&d)
    );
    // The exporter fails: said once.
    text.lock().unwrap().clear();
    wait_for(&d, 30, "the failure to be said", || {
        events(&d)
            .iter()
            .any(|e| e.contains("DCGM exporter") && e.contains("503"))
    });
}

/// A cluster that refuses gantry (RBAC: 403) or cannot be reached: each node's problem is one
/// line with what to do, the daemon goes on answering, and once the cluster lets gantry in
/// the nodes come up and a waiting job runs.
#[test]
fn a_forbidden_or_unreachable_cluster_is_said_and_the_daemon_keeps_running() {
    use daemon::{cli, events, state, submit, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-3"]);
    api.forbid(true);
    let d = daemon_over(&api, "kube-forbidden", &["gpu-3"]);
    wait_for(&d, 30, "the refusal to be said", || {
        events(&d).iter().any(|e| {
            e.contains("host gpu-3 unreachable")
                && e.contains("is forbidden")
                && e.contains("the ClusterRole in deploy/")
        })
    });
    let dir = d.dir.clone();
    let id = submit(
        &d,
        &dir,
        "waits",
        "name: waits\nresources:\n  accelerators: H100:1\nrun: python train.py\n",
    );
    assert_eq!(state(&d, id), "pending");
    assert!(cli(&d, &["jobs", "-o", "json"]).contains("\"waits\""));
    // Why it waits names the pool and that its node cannot be reached, with the cluster's
    // answer; the pool's row counts the node unreachable, not down "in repair".
    wait_for(&d, 30, "the cause in the job's row", || {
        let jobs: Value = serde_json::from_str(&cli(&d, &["jobs", "-o", "json"])).unwrap();
        jobs.as_array().unwrap().iter().any(|j| {
            let why = j["detail"].as_str().unwrap_or("");
            j["id"] == id && why.contains("1 unreachable (") && why.contains("is forbidden")
        })
    });
    let fleet: Value = serde_json::from_str(&cli(&d, &["fleet", "-o", "json"])).unwrap();
    assert_eq!(
        (
            fleet["pools"][0]["unreachable"].as_u64(),
            fleet["pools"][0]["down"].as_u64()
        ),
        (Some(1), Some(0)),
        "{fleet}"
    );
    api.forbid(false);
    wait_for(&d, 60, "the node to come up and the job to run", || {
        state(&d, id) == "running" && pods_of(&api, id).len() == 1
    });
    // A server that is not there: said, and the daemon answers.
    let dir = daemon::temp_dir("kube-gone");
    let k = kubeconfig(&dir, "http://127.0.0.1:1");
    std::fs::write(
        dir.join("fleet.toml"),
        format!(
            "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"z\"\nname = \"h100\"\ninstance_type = \"p5.48xlarge\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 190\nmemory_gb = 1900\ncapacity = \"reserved\"\nprice_per_hour = 98.32\nhosts = [\"gpu-3\"]\n[pools.kubernetes]\nkubeconfig = \"{}\"\nimage = \"x\"\n",
            k.display()
        ),
    )
    .unwrap();
    let d = start_daemon(dir);
    wait_for(&d, 30, "the outage to be said", || {
        events(&d).iter().any(|e| {
            e.contains("host gpu-3 unreachable") && e.contains("cannot reach the API server")
        })
    });
    assert!(cli(&d, &["jobs", "-o", "json"]).starts_with('['));
}

/// A pod of `namespace` a user gives gantry (`schedulerName: gantry`), asking `gpus` GPUs.
/// gantry as a secondary scheduler: a pod a user creates with `schedulerName: gantry` is
/// queued as a gantry job (its team from its namespace, its class from a label), placed by
/// gantry's core and bound where it chose; one that cannot fit waits in the queue and says
/// why; deleted while it waits, its job is cancelled; a pod that ended is the user's to keep.
#[test]
fn pods_users_give_gantry_are_queued_placed_and_bound() {
    use daemon::{events, json as cli_json, state, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-3"]);
    let d = daemon_over(&api, "kube-sched", &["gpu-3"]);
    let job_of = |d: &daemon::Daemon, pod: &str| -> Option<Value> {
        cli_json(d, &["jobs"])
            .as_array()?
            .iter()
            .find(|j| j["name"] == format!("pod lab/{pod}"))
            .cloned()
    };
    api.apply(user_pod("lab", "train-1", 6)).unwrap();
    wait_for(&d, 30, "the pod to be queued and bound", || {
        job_of(&d, "train-1").is_some_and(|j| j["state"] == "running")
            && api
                .get(Kind::Pod, "lab", "train-1")
                .is_some_and(|p| p["spec"]["nodeName"] == "gpu-3")
    });
    let first = job_of(&d, "train-1").unwrap();
    assert_eq!(
        (first["team"].as_str(), first["class"].as_str()),
        (Some("lab"), Some("production"))
    );
    let first = first["id"].as_i64().unwrap();
    // gantry marks the pod it placed as its run's: a daemon killed and started again finds
    // the run and does not place the pod twice.
    wait_for(&d, 30, "the pod to be marked", || {
        api.get(Kind::Pod, "lab", "train-1").is_some_and(|p| {
            p["metadata"]["labels"]["gantry.dev/job"].as_str() == Some(&*first.to_string())
        })
    });
    let dir = d.dir.clone();
    let mut d = d;
    unsafe { libc::kill(d.child.id() as i32, libc::SIGKILL) };
    let _ = d.child.wait();
    std::mem::forget(d);
    let d = start_daemon(dir);
    wait_for(&d, 30, "the run to be found again", || {
        events(&d)
            .iter()
            .any(|e| e.contains(&format!("job {first}")) && e.contains("re-adopted"))
    });
    assert_eq!(state(&d, first), "running");
    // Four more GPUs do not fit beside six: the pod waits, queued, and says why.
    api.apply(user_pod("lab", "train-2", 4)).unwrap();
    wait_for(&d, 30, "the second pod to be queued", || {
        job_of(&d, "train-2").is_some_and(|j| j["state"] == "pending" && j["position"] == 1)
    });
    let waiting = job_of(&d, "train-2").unwrap();
    assert!(
        !waiting["detail"].as_str().unwrap_or("").is_empty(),
        "{waiting}"
    );
    assert!(api.get(Kind::Pod, "lab", "train-2").unwrap()["spec"]["nodeName"].is_null());
    let second = waiting["id"].as_i64().unwrap();
    // Its user deletes it: its job goes.
    api.remove(Kind::Pod, "lab", "train-2");
    wait_for(&d, 30, "its job to be cancelled", || {
        state(&d, second) == "cancelled"
    });
    // The first pod's container ends: its job completes; the pod is left to its user.
    api.finish("lab", "train-1", 0);
    wait_for(&d, 30, "the job to complete", || {
        state(&d, first) == "completed"
    });
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        api.get(Kind::Pod, "lab", "train-1").is_some(),
        "a user's pod is theirs"
    );
    let ev = events(&d);
    assert!(
        ev.iter()
            .any(|e| e.contains(&format!("job {first} queued for pod lab/train-1"))),
        "{ev:?}"
    );
    let placed = ev
        .iter()
        .filter(|e| e.contains(&format!("job {first} pending → running")))
        .count();
    assert_eq!(placed, 1, "{ev:?}");
    // Preempted, a user's pod is deleted with its grace; its job does not wait for a pod that
    // is gone (its controller would make a new one, queued as new work).
    api.apply(user_pod("lab", "train-3", 2)).unwrap();
    wait_for(&d, 30, "the third pod to run", || {
        job_of(&d, "train-3").is_some_and(|j| j["state"] == "running")
    });
    let third = job_of(&d, "train-3").unwrap()["id"].as_i64().unwrap();
    daemon::cli(&d, &["preempt", &third.to_string()]);
    wait_for(&d, 30, "the delete with grace", || {
        api.get(Kind::Pod, "lab", "train-3")
            .is_some_and(|p| !p["metadata"]["deletionTimestamp"].is_null())
    });
    api.finish("lab", "train-3", 0);
    wait_for(&d, 30, "its job to end with its pod gone", || {
        state(&d, third) == "cancelled"
    });
    // A namespace labelled with a team: its pods are that team's (the namespace's name is
    // not a team of this fleet).
    api.apply(serde_json::json!({
        "apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "vision", "labels": {"gantry.dev/team": "lab"}}
    }))
    .unwrap();
    api.apply(user_pod("vision", "seg-1", 1)).unwrap();
    wait_for(
        &d,
        30,
        "the labelled namespace's pod to run as its team's",
        || {
            cli_json(&d, &["jobs"]).as_array().is_some_and(|jobs| {
                jobs.iter().any(|j| {
                    j["name"] == "pod vision/seg-1" && j["team"] == "lab" && j["state"] == "running"
                })
            })
        },
    );
}

/// A pod group (`gantry.dev/pod-group`, `gantry.dev/pod-group-size`) is one gang: queued once
/// every member exists, its members bound to as many nodes at once, the job ending when all
/// of them have.
#[test]
fn a_pod_group_is_queued_whole_and_placed_as_one_gang() {
    use daemon::{json as cli_json, state, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-a", "gpu-b"]);
    let d = daemon_over(&api, "kube-group", &["gpu-a", "gpu-b"]);
    let member = |name: &str| {
        let mut p = user_pod("lab", name, 8);
        p["metadata"]["labels"]["gantry.dev/pod-group"] = json!("ddp");
        p["metadata"]["annotations"] = json!({"gantry.dev/pod-group-size": "2"});
        p
    };
    let group_job = |d: &daemon::Daemon| -> Option<Value> {
        cli_json(d, &["jobs"])
            .as_array()?
            .iter()
            .find(|j| j["name"] == "pods lab/ddp")
            .cloned()
    };
    api.apply(member("ddp-0")).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(group_job(&d).is_none(), "half a group is not queued");
    api.apply(member("ddp-1")).unwrap();
    wait_for(&d, 30, "the group to be placed whole", || {
        group_job(&d).is_some_and(|j| j["state"] == "running")
            && ["ddp-0", "ddp-1"].iter().all(|p| {
                api.get(Kind::Pod, "lab", p)
                    .is_some_and(|p| p["spec"]["nodeName"].is_string())
            })
    });
    let mut nodes: Vec<String> = ["ddp-0", "ddp-1"]
        .iter()
        .map(|p| {
            api.get(Kind::Pod, "lab", p).unwrap()["spec"]["nodeName"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["gpu-a", "gpu-b"]);
    let id = group_job(&d).unwrap()["id"].as_i64().unwrap();
    api.finish("lab", "ddp-0", 0);
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(state(&d, id), "running", "one member still runs");
    api.finish("lab", "ddp-1", 0);
    wait_for(&d, 30, "the group's job to complete", || {
        state(&d, id) == "completed"
    });
}

/// Starts driven by events on Kubernetes too (issue 39): with the daemon's clock step at an
/// hour, only the wake the worker sends when it sees a pod end can bind the next job's pod.
#[test]
fn a_pods_end_starts_the_next_job_without_waiting_for_the_clock() {
    use daemon::{state, submit, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-w"]);
    let d = daemon_over(&api, "kube-wake", &["gpu-w"]);
    let dir = d.dir.clone();
    // The same daemon's files, started again with the clock's step at an hour.
    let mut d = d;
    let _ = d.child.kill();
    let _ = d.child.wait();
    std::mem::forget(d);
    let d = start_daemon_with(dir.clone(), &["--step", "1h"]);
    let eight = "resources:\n  accelerators: H100:8\nrun: python train.py\n";
    let first = submit(&d, &dir, "first", &format!("name: first\n{eight}"));
    let second = submit(&d, &dir, "second", &format!("name: second\n{eight}"));
    wait_for(&d, 30, "the first job's pod to run", || {
        state(&d, first) == "running"
            && pods_of(&api, first)
                .first()
                .is_some_and(|(_, _, p)| p["status"]["phase"] == "Running")
    });
    assert_eq!(state(&d, second), "pending");
    let (name, _, _) = pods_of(&api, first).remove(0);
    api.finish("gantry", &name, 0);
    wait_for(
        &d,
        30,
        "the second job to run (woken by the first pod's end)",
        || state(&d, second) == "running",
    );
    assert_eq!(state(&d, first), "completed");
}

/// A user's pod deleted between gantry's decision to place it and its bind: the bind finds
/// it gone (404), and its job is cancelled as one whose pod went away, not failed with the
/// API's refusal. The test API server holds the binding while the pod is deleted.
#[test]
fn a_users_pod_deleted_before_its_bind_cancels_its_job() {
    use daemon::{events, state, wait_for};
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-3"]);
    let d = daemon_over(&api, "kube-vanished", &["gpu-3"]);
    api.hold_bindings(true);
    api.apply(user_pod("lab", "gone-1", 2)).unwrap();
    wait_for(&d, 30, "gantry to bind the pod", || {
        api.bindings_held() == 1
    });
    let i = daemon::json(&d, &["jobs"])
        .as_array()
        .and_then(|a| a.iter().find(|j| j["name"] == "pod lab/gone-1").cloned())
        .and_then(|j| j["id"].as_i64())
        .expect("the pod's job");
    api.remove(Kind::Pod, "lab", "gone-1");
    api.hold_bindings(false);
    wait_for(&d, 30, "its job to be cancelled", || {
        state(&d, i) == "cancelled"
    });
    assert!(
        events(&d).iter().any(|e| e.contains(&format!("job {i}"))
            && e.contains("pod lab/gone-1 went away before it could be placed again")),
        "{:?}",
        events(&d)
    );
}
