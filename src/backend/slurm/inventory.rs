//! A Slurm cluster as slurmrestd describes it — partitions, nodes with their GPUs (GRES) and
//! state, and the queue with Slurm's reasons said in gantry's words — read from the JSON of
//! `v0.0.38` (Slurm 22.05) and later versions (whose states are lists and numbers objects).

use super::gres::{self, Gpus};
use serde::Serialize;
use serde_json::Value;

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Inventory {
    /// The REST API version in use (`v0.0.38`) and Slurm's release.
    pub api: String,
    pub slurm: Option<String>,
    pub partitions: Vec<Partition>,
    pub nodes: Vec<Node>,
    pub jobs: Vec<Job>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Partition {
    pub name: String,
    pub nodes: String,
    pub state: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Node {
    pub name: String,
    pub partitions: Vec<String>,
    /// idle, mixed, allocated, down, drained, draining, … (lowercase, flags joined by `+`).
    pub state: String,
    /// Why it is down or drained, where an administrator said.
    pub reason: String,
    pub gpus: Vec<Gpus>,
    pub gpus_used: Vec<Gpus>,
    pub cpus: u32,
    pub memory_mb: u64,
}

impl Node {
    /// Whether jobs may be placed there (not down, drained, draining or failing).
    pub fn usable(&self) -> bool {
        ![
            "down",
            "drain",
            "fail",
            "maint",
            "reboot",
            "not_responding",
            "future",
        ]
        .iter()
        .any(|s| self.state.contains(s))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Job {
    pub id: u64,
    pub name: String,
    pub user: String,
    pub account: String,
    pub partition: String,
    /// pending, running, completing, completed, failed, cancelled, … (lowercase).
    pub state: String,
    /// Slurm's reason code (`Resources`, `Priority`, `QOSMaxGRESPerUser`, …; empty if none).
    pub reason_code: String,
    /// The reason in gantry's words.
    pub reason: String,
    pub nodes: String,
    /// The nodes it was pinned to (`--nodelist`), even while it waits.
    pub required_nodes: String,
    /// GPUs it asked for per node, and on which indices it holds them (running jobs).
    pub gpus_per_node: u32,
    /// How many nodes it asked for (or runs on).
    pub node_count: u32,
    pub gpus_held: Vec<Gpus>,
    /// Per node it runs on: the node and the GPUs it holds there (running jobs).
    pub alloc: Vec<(String, Vec<Gpus>)>,
    /// What its submitter wrote in `--comment` (gantry marks its own jobs there).
    pub comment: String,
    /// How it ended, as a wait status (`exit code << 8 | signal`).
    pub exit_code: i64,
    /// When it started (Unix seconds; 0: never).
    pub start_time: i64,
}

impl Job {
    pub fn pending(&self) -> bool {
        self.state == "pending"
    }
    /// Whether gantry submitted it (its comment is gantry's mark); else the cluster's own.
    pub fn is_gantrys(&self) -> bool {
        super::batch::parse_comment(&self.comment).is_some()
    }
    pub fn running(&self) -> bool {
        matches!(self.state.as_str(), "running" | "completing" | "suspended")
    }
    /// Whether it has ended (completed, failed, cancelled, timed out, …).
    pub fn ended(&self) -> bool {
        !self.pending() && !self.running() && !self.state.is_empty()
    }
    /// The GPUs it holds on `node`.
    pub fn gpus_on(&self, node: &str) -> u32 {
        self.alloc
            .iter()
            .filter(|(n, _)| n == node)
            .map(|(_, g)| gres::count(g))
            .sum()
    }
}

/// Slurm's reason for a job that waits (or ended badly), in gantry's words.
pub fn reason_text(code: &str) -> String {
    let said = match code {
        "" | "None" => return String::new(),
        "Resources" => "waits for free resources (GPUs, CPUs or memory) on the nodes it may use",
        "Priority" => "queued behind jobs of higher priority",
        "Dependency" => "waits for the jobs it depends on",
        "DependencyNeverSatisfied" => "a job it depends on failed: it will never start",
        "BeginTime" => "its start time has not come",
        "JobHeldUser" => "held by its owner",
        "JobHeldAdmin" => "held by an administrator",
        "ReqNodeNotAvail" => "a node it needs is down, drained or reserved",
        "NodeDown" => "a node it needs is down",
        "PartitionDown" => "its partition is down",
        "PartitionInactive" => "its partition is inactive",
        "PartitionTimeLimit" => "its time limit exceeds the partition's",
        "PartitionNodeLimit" => "it asks for more nodes than the partition allows",
        "QOSMaxGRESPerUser" => "its user's GPU limit in the QOS is reached",
        "QOSMaxGRESPerJob" => "it asks for more GPUs than the QOS allows a job",
        "QOSGrpGRES" => "the QOS's GPU limit for its group is reached",
        "AssocGrpGRES" => "its account's GPU limit is reached",
        "AssocMaxJobsLimit" | "QOSMaxJobsPerUserLimit" => {
            "its user or account runs as many jobs as allowed"
        }
        "AssocGrpCpuLimit" | "QOSGrpCpuLimit" => "its account's or QOS's CPU limit is reached",
        "Reservation" => "waits for its reservation",
        "InvalidAccount" => "its account is not valid (it will not start)",
        "InvalidQOS" => "its QOS is not valid (it will not start)",
        "BadConstraints" => "no node has the features it asks for",
        "Licenses" => "waits for licenses",
        "JobLaunchFailure" => "Slurm could not launch it",
        "NonZeroExitCode" => "it exited with a non-zero code",
        "TimeLimit" => "it reached its time limit",
        "Prolog" => "its prolog is running",
        _ => return format!("Slurm: {code}"),
    };
    format!("{said} (Slurm: {code})")
}

/// A number as slurmrestd writes it: plain, or `{"set": true, "number": N}` (v0.0.39+).
fn num(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::Object(o) => match o.get("set") {
            Some(Value::Bool(false)) => None,
            _ => o.get("number").and_then(Value::as_i64),
        },
        _ => None,
    }
}

/// A state as slurmrestd writes it: a string (v0.0.38) or a list of flags (later), lowercase,
/// joined by `+`.
fn state(v: &Value) -> String {
    match v {
        Value::String(s) => s.to_lowercase(),
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join("+"),
        _ => String::new(),
    }
}

fn text(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn strings(v: &Value) -> impl Iterator<Item = &str> {
    v.as_array().into_iter().flatten().filter_map(Value::as_str)
}

/// One answer of slurmrestd (`/nodes`, `/jobs` or `/partitions`), read as it streams in:
/// only the fields gantry uses are kept — a large cluster's job list runs to tens of
/// megabytes a second, and every other field is skipped unbuilt — each as loosely typed as
/// the API versions differ.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct Answer {
    pub errors: Vec<Value>,
    pub meta: Value,
    pub nodes: Vec<RawNode>,
    /// The jobs gantry has a use for: every job not ended, and gantry's own that ended (how
    /// its runs ended). The cluster's own finished jobs — which slurmctld keeps for
    /// `MinJobAge` and answers with while anything changes, thousands on a busy cluster — are
    /// dropped as they are read, so what the daemon holds follows the live queue, not the
    /// cluster's history.
    #[serde(deserialize_with = "jobs_of_use")]
    pub jobs: Vec<Job>,
    pub partitions: Vec<RawPartition>,
}

/// `jobs`, each read and kept only where `RawJob::of_use`, as a `Job` at once: a raw job
/// (its fields as JSON values) is several times the size, and a vector of thousands of them
/// was the largest thing a Slurm pool held while it read the queue (issue 68, heaptrack).
fn jobs_of_use<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<Job>, D::Error> {
    struct Kept;
    impl<'de> serde::de::Visitor<'de> for Kept {
        type Value = Vec<Job>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a list of jobs")
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<Job>, A::Error> {
            let mut kept = Vec::new();
            while let Some(j) = seq.next_element::<RawJob>()? {
                if j.of_use() {
                    kept.push(job(&j));
                }
            }
            Ok(kept)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Vec<Job>, E> {
            Ok(Vec::new())
        }
    }
    d.deserialize_any(Kept)
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct RawNode {
    name: Value,
    state: Value,
    state_flags: Value,
    reason: Value,
    gres: Value,
    gres_used: Value,
    cpus: Value,
    real_memory: Value,
    partitions: Value,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct RawJob {
    job_id: Value,
    name: Value,
    user_name: Value,
    account: Value,
    partition: Value,
    job_state: Value,
    state_reason: Value,
    nodes: Value,
    required_nodes: Value,
    tres_per_node: Value,
    node_count: Value,
    gres_detail: Value,
    job_resources: RawResources,
    comment: Value,
    exit_code: Value,
    start_time: Value,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RawResources {
    allocated_nodes: Vec<RawAllocated>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
struct RawAllocated {
    nodename: Value,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct RawPartition {
    name: Value,
    nodes: Value,
    state: Value,
}

impl RawJob {
    /// Not ended, or gantry's: what the worker reads (the queue, the foreign work on a
    /// pool's nodes, how gantry's parts ended).
    fn of_use(&self) -> bool {
        let st = state(&self.job_state);
        let live = st.is_empty()
            || st == "pending"
            || matches!(st.as_str(), "running" | "completing" | "suspended")
            // A state with flags (`running+completing`) is read as the worker reads it.
            || st.starts_with("pending+")
            || st.starts_with("running+")
            || st.starts_with("completing+")
            || st.starts_with("suspended+");
        live || super::batch::parse_comment(&text(&self.comment)).is_some()
    }
}

/// The per-node GPUs of a job's TRES (`gres:gpu:a100:2` in v0.0.38, `gres/gpu:a100=2` later).
fn gpus_per_node(tres: &str) -> u32 {
    tres.split(',')
        .filter_map(|t| {
            let t = t
                .trim()
                .trim_start_matches("gres:")
                .trim_start_matches("gres/");
            let t = t.replace('=', ":");
            gres::parse(&t).ok()
        })
        .flatten()
        .map(|g| g.count)
        .sum()
}

/// A node of `GET /slurm/VERSION/nodes`.
pub fn node(v: &RawNode) -> Result<Node, String> {
    let name = text(&v.name);
    let mut st = state(&v.state);
    // v0.0.38 keeps DRAIN and the like in `state_flags`.
    for f in strings(&v.state_flags) {
        let f = f.to_lowercase();
        if !st.split('+').any(|s| s == f) {
            st.push('+');
            st.push_str(&f);
        }
    }
    let gpus = gres::parse(&text(&v.gres)).map_err(|e| format!("node {name}: {e}"))?;
    let gpus_used = gres::parse(&text(&v.gres_used)).map_err(|e| format!("node {name}: {e}"))?;
    Ok(Node {
        partitions: strings(&v.partitions).map(str::to_string).collect(),
        state: st,
        reason: text(&v.reason),
        gpus,
        gpus_used,
        cpus: num(&v.cpus).unwrap_or(0).max(0) as u32,
        memory_mb: num(&v.real_memory).unwrap_or(0).max(0) as u64,
        name,
    })
}

/// A job of `GET /slurm/VERSION/jobs`.
pub fn job(v: &RawJob) -> Job {
    let code = text(&v.state_reason);
    // `gres_detail` has an entry per allocated node, in the order of `allocated_nodes`.
    let details: Vec<Vec<Gpus>> = strings(&v.gres_detail)
        .map(|g| gres::parse(g).unwrap_or_default())
        .collect();
    let held: Vec<Gpus> = details.iter().flatten().cloned().collect();
    let alloc = v
        .job_resources
        .allocated_nodes
        .iter()
        .map(|n| text(&n.nodename))
        .zip(details)
        .collect();
    Job {
        id: num(&v.job_id).unwrap_or(0).max(0) as u64,
        alloc,
        comment: text(&v.comment),
        exit_code: num(&v.exit_code).unwrap_or(0),
        start_time: num(&v.start_time).unwrap_or(0),
        name: text(&v.name),
        user: text(&v.user_name),
        account: text(&v.account),
        partition: text(&v.partition),
        state: state(&v.job_state),
        reason: reason_text(&code),
        reason_code: if code == "None" { String::new() } else { code },
        nodes: text(&v.nodes),
        required_nodes: text(&v.required_nodes),
        gpus_per_node: gpus_per_node(&text(&v.tres_per_node)),
        node_count: num(&v.node_count)
            .unwrap_or(1)
            .clamp(1, i64::from(u32::MAX)) as u32,
        gpus_held: held,
    }
}

pub fn partition(v: &RawPartition) -> Partition {
    Partition {
        name: text(&v.name),
        nodes: text(&v.nodes),
        state: state(&v.state),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(v: Value) -> Result<Node, String> {
        super::node(&serde_json::from_value(v).unwrap())
    }
    /// The cluster's own finished jobs are dropped as the answer is read; what is live, and
    /// gantry's own however they ended, is kept (issue 68: the daemon's memory followed the
    /// cluster's history).
    #[test]
    fn an_answer_keeps_live_jobs_and_gantrys_and_drops_the_clusters_finished_ones() {
        let a: Answer = serde_json::from_value(serde_json::json!({"jobs": [
            {"job_id": 1, "job_state": "COMPLETED", "comment": ""},
            {"job_id": 2, "job_state": "RUNNING", "comment": ""},
            {"job_id": 3, "job_state": "PENDING"},
            {"job_id": 4, "job_state": "FAILED", "comment": "gantry:7:tok:0"},
            {"job_id": 5, "job_state": ["CANCELLED"]},
            {"job_id": 6, "job_state": ["RUNNING", "COMPLETING"]},
        ]}))
        .unwrap();
        let kept: Vec<u64> = a.jobs.iter().map(|j| j.id).collect();
        assert_eq!(kept, vec![2, 3, 4, 6]);
        let none: Answer = serde_json::from_value(serde_json::json!({"jobs": null})).unwrap();
        assert!(none.jobs.is_empty());
    }

    fn job(v: Value) -> Job {
        super::job(&serde_json::from_value(v).unwrap())
    }

    #[test]
    fn nodes_and_jobs_of_v0_0_38_and_later() {
        let n = node(serde_json::json!({
            "name": "gpu-a", "state": "mixed", "state_flags": ["DRAIN"], "reason": "fan",
            "gres": "gpu:a100:4", "gres_used": "gpu:a100:3(IDX:0-2)", "cpus": 64,
            "real_memory": 512000, "partitions": ["gpu"]
        }))
        .unwrap();
        assert_eq!(n.state, "mixed+drain");
        assert!(!n.usable());
        assert_eq!(
            (n.gpus[0].count, n.gpus_used[0].indices.clone()),
            (4, vec![0, 1, 2])
        );
        // v0.0.40: states are lists, numbers objects.
        let n = node(serde_json::json!({
            "name": "gpu-b", "state": ["IDLE"], "gres": "gpu:h100:8",
            "gres_used": "gpu:h100:0(IDX:N/A)", "cpus": 96, "real_memory": {"set": true, "number": 1000}
        }))
        .unwrap();
        assert_eq!(
            (n.state.as_str(), n.memory_mb, n.usable()),
            ("idle", 1000, true)
        );
        let j = job(serde_json::json!({
            "job_id": 7, "name": "train", "job_state": "PENDING", "state_reason": "Resources",
            "user_name": "alice", "account": "ml", "partition": "gpu",
            "tres_per_node": "gres:gpu:a100:3", "gres_detail": []
        }));
        assert!(j.pending());
        assert_eq!(j.gpus_per_node, 3);
        assert_eq!(
            j.reason,
            "waits for free resources (GPUs, CPUs or memory) on the nodes it may use (Slurm: Resources)"
        );
        let j = job(serde_json::json!({
            "job_id": {"set": true, "number": 8}, "job_state": ["RUNNING"], "state_reason": "None",
            "tres_per_node": "gres/gpu:h100=2", "gres_detail": ["gpu:h100:2(IDX:4-5)"]
        }));
        assert!(j.running() && j.reason.is_empty() && j.reason_code.is_empty());
        assert_eq!(
            (j.id, j.gpus_per_node, j.gpus_held[0].indices.clone()),
            (8, 2, vec![4, 5])
        );
        assert_eq!(reason_text("SomethingNew"), "Slurm: SomethingNew");
    }

    /// What the real slurmrestd of the test cluster answered (Slurm 22.05, v0.0.38; the
    /// bench's recording) reads as what the cluster had: a job of the cluster's own on six
    /// of gpu-a's A100s, one waiting there for resources, gantry's on two of gpu-b's H100s.
    #[test]
    fn the_real_slurmrestd_answers_read_as_the_cluster_had() {
        let read = |doc: &str| serde_json::from_str::<Answer>(doc).unwrap();
        let nodes = read(include_str!("../../bench/slurm/v0.0.38/nodes.json"));
        assert!(nodes.errors.is_empty());
        assert_eq!(nodes.meta["Slurm"]["release"], "22.05.8");
        let nodes: Vec<Node> = nodes
            .nodes
            .iter()
            .map(|n| super::node(n).unwrap())
            .collect();
        let a = nodes.iter().find(|n| n.name == "gpu-a").unwrap();
        assert_eq!((a.state.as_str(), a.cpus, a.usable()), ("mixed", 4, true));
        assert_eq!(gres::count(&a.gpus_used), 6);
        let jobs = read(include_str!("../../bench/slurm/v0.0.38/jobs.json"));
        let jobs: Vec<Job> = jobs.jobs;
        let by = |name: &str| jobs.iter().find(|j| j.name == name).unwrap();
        let theirs = by("pretrain");
        assert!(theirs.running() && theirs.comment.is_empty());
        assert_eq!(
            (theirs.gpus_on("gpu-a"), theirs.user.as_str()),
            (6, "nobody")
        );
        let ours = by("gantry-7");
        assert_eq!(ours.comment, "gantry:7:t0:0");
        assert_eq!(ours.gpus_on("gpu-b"), 2);
        let waiting = by("sweep");
        assert!(waiting.pending());
        assert_eq!(
            (
                waiting.reason_code.as_str(),
                waiting.required_nodes.as_str()
            ),
            ("Resources", "gpu-a")
        );
        let parts = read(include_str!("../../bench/slurm/v0.0.38/partitions.json"));
        assert_eq!(super::partition(&parts.partitions[0]).name, "gpu");
    }
}
