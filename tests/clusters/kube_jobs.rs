//! Pods of Jobs and JobSets given to gantry (`schedulerName: gantry` in their template), with
//! no gantry label: a Job's `parallelism` pods are one gang, a JobSet's pods over all its Jobs
//! are one gang, each queued once whole and bound all at once; Kueue's pod-group labels are
//! read as gantry's. The Job objects as the Job and JobSet controllers write them, checked
//! with the real kubectl.

use crate::support::daemon;
use crate::support::kube_cluster;
use crate::support::kube_daemon;

use daemon::{json as cli_json, wait_for};
use gantry_testkit::apiserver::{ApiServer, Kind};
use kube_cluster::{have_kubectl, kubeconfig, kubectl, runtime};
use kube_daemon::{daemon_over, free_nodes, user_pod};
use serde_json::{json, Value};
use std::time::Duration;

/// A batch/v1 Job as the Job controller has it once it made its pods.
fn job(ns: &str, name: &str, parallelism: u32, labels: Value) -> Value {
    json!({
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": {"name": name, "namespace": ns, "labels": labels,
                     "uid": format!("uid-{name}")},
        "spec": {"parallelism": parallelism, "completions": parallelism,
                 "completionMode": "Indexed", "backoffLimit": 0,
                 "template": {"spec": {"schedulerName": "gantry", "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "nvcr.io/nvidia/pytorch:25.01-py3"}]}}},
        "status": {"active": parallelism, "ready": 0, "startTime": "2026-11-24T00:00:00Z"}
    })
}

/// Pod `index` of Job `job_name` (its controller owner reference, its completion index).
fn job_pod(ns: &str, job_name: &str, index: u32, gpus: u32, labels: Value) -> Value {
    let mut p = user_pod(ns, &format!("{job_name}-{index}-x7k2"), gpus);
    let l = p["metadata"]["labels"].as_object_mut().unwrap();
    l.insert("batch.kubernetes.io/job-name".into(), json!(job_name));
    l.insert(
        "batch.kubernetes.io/job-completion-index".into(),
        json!(index.to_string()),
    );
    for (k, v) in labels.as_object().unwrap() {
        l.insert(k.clone(), v.clone());
    }
    p["metadata"]["annotations"] =
        json!({"batch.kubernetes.io/job-completion-index": index.to_string()});
    p["metadata"]["ownerReferences"] = json!([{
        "apiVersion": "batch/v1", "kind": "Job", "name": job_name, "uid": format!("uid-{job_name}"),
        "controller": true, "blockOwnerDeletion": true
    }]);
    p
}

fn queued(d: &daemon::Daemon, name: &str) -> Option<Value> {
    cli_json(d, &["jobs"])
        .as_array()?
        .iter()
        .find(|j| j["name"] == name)
        .cloned()
}

fn node_of(api: &ApiServer, ns: &str, pod: &str) -> Option<String> {
    api.get(Kind::Pod, ns, pod)?["spec"]["nodeName"]
        .as_str()
        .map(str::to_string)
}

#[test]
fn a_jobs_pods_are_one_gang_queued_once_all_exist_and_bound_together() {
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-a", "gpu-b"]);
    let d = daemon_over(&api, "kube-job", &["gpu-a", "gpu-b"]);
    api.apply(job("lab", "ddp", 2, json!({}))).unwrap();
    api.apply(job_pod("lab", "ddp", 0, 8, json!({}))).unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        queued(&d, "job lab/ddp").is_none() && queued(&d, "pod lab/ddp-0-x7k2").is_none(),
        "half a Job is neither a gang nor a pod of its own: {}",
        cli_json(&d, &["jobs"])
    );
    api.apply(job_pod("lab", "ddp", 1, 8, json!({}))).unwrap();
    wait_for(&d, 30, "the Job's pods to be bound together", || {
        queued(&d, "job lab/ddp").is_some_and(|j| j["state"] == "running")
            && (0..2).all(|i| node_of(&api, "lab", &format!("ddp-{i}-x7k2")).is_some())
    });
    let mut nodes: Vec<String> = (0..2)
        .map(|i| node_of(&api, "lab", &format!("ddp-{i}-x7k2")).unwrap())
        .collect();
    nodes.sort();
    assert_eq!(nodes, ["gpu-a", "gpu-b"], "8 GPUs each: one node each");

    // A Job of one pod is that pod, as before.
    api.apply(job("lab", "eval", 1, json!({}))).unwrap();
    api.apply(job_pod("lab", "eval", 0, 0, json!({}))).unwrap();
    wait_for(&d, 30, "the one-pod Job to be queued as its pod", || {
        queued(&d, "pod lab/eval-0-x7k2").is_some()
    });

    // kubectl reads the Jobs the test server serves as a client of a real cluster would.
    if have_kubectl() {
        let k = kubeconfig(&d.dir, &api.url);
        let out = kubectl(&k, &["get", "jobs", "-n", "lab", "-o", "name"]);
        assert_eq!(
            out.lines().collect::<Vec<_>>(),
            ["job.batch/ddp", "job.batch/eval"]
        );
        let one = kubectl(
            &k,
            &[
                "get",
                "job",
                "ddp",
                "-n",
                "lab",
                "-o",
                "jsonpath={.spec.parallelism}",
            ],
        );
        assert_eq!(one, "2");
    }
}

#[test]
fn a_jobsets_pods_over_all_its_jobs_are_one_gang_and_kueue_groups_are_read() {
    let rt = runtime();
    let api = free_nodes(&rt, &["gpu-a", "gpu-b", "gpu-c"]);
    let d = daemon_over(&api, "kube-jobset", &["gpu-a", "gpu-b", "gpu-c"]);
    // JobSet `llm`: replicated job `workers` of 2 Jobs × 1 pod, plus `driver`, 1 Job × 1 pod.
    let set = |rj: &str, replicas: u32, index: u32| {
        json!({
            "jobset.sigs.k8s.io/jobset-name": "llm",
            "jobset.sigs.k8s.io/replicatedjob-name": rj,
            "jobset.sigs.k8s.io/replicatedjob-replicas": replicas.to_string(),
            "jobset.sigs.k8s.io/job-index": index.to_string()
        })
    };
    api.apply(job("lab", "llm-workers-0", 1, set("workers", 2, 0)))
        .unwrap();
    api.apply(job_pod("lab", "llm-workers-0", 0, 8, set("workers", 2, 0)))
        .unwrap();
    api.apply(job("lab", "llm-driver-0", 1, set("driver", 1, 0)))
        .unwrap();
    api.apply(job_pod("lab", "llm-driver-0", 0, 0, set("driver", 1, 0)))
        .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    assert!(
        queued(&d, "jobset lab/llm").is_none(),
        "a JobSet whose second worker Job is not there yet waits: {}",
        cli_json(&d, &["jobs"])
    );
    api.apply(job("lab", "llm-workers-1", 1, set("workers", 2, 1)))
        .unwrap();
    api.apply(job_pod("lab", "llm-workers-1", 0, 8, set("workers", 2, 1)))
        .unwrap();
    let pods = [
        "llm-driver-0-0-x7k2",
        "llm-workers-0-0-x7k2",
        "llm-workers-1-0-x7k2",
    ];
    wait_for(
        &d,
        30,
        "the JobSet's three pods to be bound together",
        || {
            queued(&d, "jobset lab/llm").is_some_and(|j| j["state"] == "running")
                && pods.iter().all(|p| node_of(&api, "lab", p).is_some())
        },
    );
    let j = queued(&d, "jobset lab/llm").unwrap();
    let job_detail = cli_json(&d, &["job", &j["id"].to_string()]);
    assert!(
        job_detail["spec"]
            .as_str()
            .unwrap_or_default()
            .contains("num_nodes: 3"),
        "{job_detail}"
    );

    // Kueue's pod group labels: a plain pod group written for Kueue.
    let member = |name: &str| {
        let mut p = user_pod("lab", name, 8);
        p["metadata"]["labels"]["kueue.x-k8s.io/pod-group-name"] = json!("sweep");
        p["metadata"]["annotations"] = json!({"kueue.x-k8s.io/pod-group-total-count": "2"});
        api.apply(p).unwrap();
    };
    member("sweep-a");
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        queued(&d, "pods lab/sweep").is_none(),
        "half a Kueue group waits"
    );
    member("sweep-b");
    wait_for(&d, 30, "the Kueue group to be queued whole", || {
        queued(&d, "pods lab/sweep").is_some()
    });
}
