//! Pods users give gantry to place (`spec.schedulerName: gantry`), as work for the daemon to
//! queue: one job file per waiting pod, whose `adopt` names it — placed by gantry's core and
//! bound where it chose, as a secondary scheduler (Kueue, Volcano, KAI) binds.

use super::inventory::{pod_gpus, JOB_LABEL, SCHEDULER};
use crate::backend::Wanted;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use serde_yaml_ng::{Mapping, Value};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The pod label naming its gantry team; else the same label on its namespace; else the
/// namespace's name is the team's.
pub const TEAM_LABEL: &str = "gantry.dev/team";

/// The team a namespace's `TEAM_LABEL` names, by namespace.
pub type NamespaceTeams = BTreeMap<String, String>;
/// The pod label naming its priority class.
pub const PRIORITY_LABEL: &str = "gantry.dev/priority";

/// The pod label that makes pods one gang (all placed at once, or none), and the annotation
/// saying how many it has: the group is queued once every member waits.
pub const GROUP_LABEL: &str = "gantry.dev/pod-group";
pub const GROUP_SIZE: &str = "gantry.dev/pod-group-size";
/// Kueue's names for the same (plain pods written for Kueue run unchanged).
pub const KUEUE_GROUP_LABEL: &str = "kueue.x-k8s.io/pod-group-name";
pub const KUEUE_GROUP_SIZE: &str = "kueue.x-k8s.io/pod-group-total-count";
/// What the JobSet controller labels its Jobs' pods with.
const JOBSET_LABEL: &str = "jobset.sigs.k8s.io/jobset-name";
const REPLICATED_JOB_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-name";
const REPLICAS_LABEL: &str = "jobset.sigs.k8s.io/replicatedjob-replicas";
const JOB_INDEX_LABEL: &str = "jobset.sigs.k8s.io/job-index";
/// An Indexed Job's pod's index (annotation and label).
const COMPLETION_INDEX: &str = "batch.kubernetes.io/job-completion-index";

/// The gang a waiting pod belongs to, if any: a pod group (gantry's or Kueue's label), a
/// JobSet (every pod of every Job of it), or a Job (its `parallelism` pods).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Gang {
    Group(String),
    JobSet(String),
    Job(String),
}

impl Gang {
    fn of(p: &Pod) -> Option<Gang> {
        let label = |k: &str| p.metadata.labels.as_ref()?.get(k).cloned();
        if let Some(g) = label(GROUP_LABEL).or_else(|| label(KUEUE_GROUP_LABEL)) {
            return Some(Gang::Group(g));
        }
        if let Some(js) = label(JOBSET_LABEL) {
            return Some(Gang::JobSet(js));
        }
        owning_job(p).map(Gang::Job)
    }

    /// The work's key (and `adopt`): `pods NS/GROUP`, `jobset NS/NAME`, `job NS/NAME`.
    fn key(&self, ns: &str) -> String {
        match self {
            Gang::Group(g) => format!("pods {ns}/{g}"),
            Gang::JobSet(n) => format!("jobset {ns}/{n}"),
            Gang::Job(n) => format!("job {ns}/{n}"),
        }
    }
}

/// The Job that controls `p` (its controller owner reference), by name.
fn owning_job(p: &Pod) -> Option<String> {
    p.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.kind == "Job" && o.api_version == "batch/v1" && o.controller == Some(true))
        .map(|o| o.name.clone())
}

/// Where a member stands in its gang: replicated job, job index, completion index, name.
fn member_order(p: &Pod) -> (String, u64, u64, String) {
    let labels = p.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let index = |k: &str| {
        label(k)
            .or_else(|| p.metadata.annotations.as_ref()?.get(k).cloned())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (
        label(REPLICATED_JOB_LABEL).unwrap_or_default(),
        index(JOB_INDEX_LABEL),
        index(COMPLETION_INDEX),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// How many waiting pods make gang `g` of namespace `ns` whole: a group's size; for a Job or
/// JobSet, the pods its Jobs run at once (`parallelism`, no more than the completions still
/// owed) less those of it already placed and running — a pod the Job controller made again
/// after one failed is placed alone, next to the ones still running (`None`: not known yet —
/// a JobSet's Jobs not all created, a Job not seen).
fn gang_size(
    g: &Gang,
    ns: &str,
    members: &[&Pod],
    placed: usize,
    jobs: &[Arc<Job>],
) -> Option<usize> {
    let pods_of = |j: &Job| {
        let s = j.spec.as_ref();
        let parallelism = s.and_then(|s| s.parallelism).unwrap_or(1).max(0);
        let completions = s.and_then(|s| s.completions).unwrap_or(parallelism);
        let done = j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0);
        parallelism.min((completions - done).max(0)) as usize
    };
    let in_ns = |j: &&Arc<Job>| j.metadata.namespace.as_deref() == Some(ns);
    match g {
        Gang::Group(_) => Some(
            members
                .iter()
                .find_map(|p| {
                    let a = p.metadata.annotations.as_ref()?;
                    a.get(GROUP_SIZE)
                        .or_else(|| a.get(KUEUE_GROUP_SIZE))?
                        .parse::<usize>()
                        .ok()
                })
                .unwrap_or(members.len()),
        ),
        Gang::Job(name) => jobs
            .iter()
            .filter(in_ns)
            .find(|j| j.metadata.name.as_deref() == Some(name.as_str()))
            .map(|j| pods_of(j).saturating_sub(placed)),
        Gang::JobSet(name) => {
            let of_set: Vec<&Arc<Job>> = jobs
                .iter()
                .filter(in_ns)
                .filter(|j| {
                    j.metadata.labels.as_ref().and_then(|l| l.get(JOBSET_LABEL)) == Some(name)
                })
                .collect();
            // Whole once every replicated job has all its replicas.
            let mut replicated: BTreeMap<String, (usize, usize)> = BTreeMap::new();
            for j in &of_set {
                let l = j.metadata.labels.as_ref();
                let rj = l.and_then(|l| l.get(REPLICATED_JOB_LABEL)).cloned()?;
                let want = l
                    .and_then(|l| l.get(REPLICAS_LABEL))
                    .and_then(|r| r.parse().ok())?;
                let e = replicated.entry(rj).or_insert((0, want));
                e.0 += 1;
            }
            let whole = !replicated.is_empty() && replicated.values().all(|(n, want)| n == want);
            whole.then(|| {
                of_set
                    .iter()
                    .map(|j| pods_of(j))
                    .sum::<usize>()
                    .saturating_sub(placed)
            })
        }
    }
}

/// The pod of rank `rank` that `adopt` names: `pod NAMESPACE/NAME` (rank 0), or a gang's
/// (`pods NAMESPACE/GROUP`, `job NAMESPACE/NAME`, `jobset NAMESPACE/NAME`: its members in
/// order — by name for a group; by replicated job, job index and completion index for a Job
/// or JobSet — rank 0 first) among `pods`.
pub fn adopted_pod(adopt: &str, rank: u16, pods: &[Arc<Pod>]) -> Option<(String, String)> {
    let split = |rest: &str| {
        rest.split_once('/')
            .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
            .map(|(a, b)| (a.to_string(), b.to_string()))
    };
    if let Some(rest) = adopt.strip_prefix("pod ") {
        return split(rest).filter(|_| rank == 0);
    }
    let (kind, rest) = adopt.split_once(' ')?;
    let (ns, name) = split(rest)?;
    let gang = match kind {
        "pods" => Gang::Group(name),
        "job" => Gang::Job(name),
        "jobset" => Gang::JobSet(name),
        _ => return None,
    };
    let mut members: Vec<(_, String)> = pods
        .iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns.as_str()))
        .filter(|p| Gang::of(p).as_ref() == Some(&gang))
        .map(|p| (member_order(p), p.metadata.name.clone().unwrap_or_default()))
        .collect();
    members.sort();
    Some((ns, members.get(usize::from(rank))?.1.clone()))
}

/// Every piece of work waiting in `place`'s pool: single pods, and gangs all of whose
/// members wait — a pod group, a Job's `parallelism` pods, a JobSet's pods over all its Jobs
/// (one not yet whole waits for the rest, as Kueue's workloads do). `jobs` are the cluster's
/// Jobs; where none can be read (a role without them), a Job's pods are single pods.
pub fn all_wanted(
    pods: &[Arc<Pod>],
    jobs: &[Arc<Job>],
    place: &Place,
    teams: &NamespaceTeams,
) -> Vec<Wanted> {
    let mut work = Vec::new();
    let mut groups: BTreeMap<(String, Gang), Vec<&Pod>> = BTreeMap::new();
    for p in pods.iter().filter(|p| waits(p, place)) {
        let gang = Gang::of(p).filter(|g| matches!(g, Gang::Group(_)) || !jobs.is_empty());
        match gang {
            Some(g) => groups
                .entry((p.metadata.namespace.clone().unwrap_or_default(), g))
                .or_default()
                .push(p),
            None => work.push(wanted(p, place, teams)),
        }
    }
    // Each waiting gang's pods that are already placed and have not ended, in one pass.
    let mut placed: BTreeMap<(String, Gang), usize> = BTreeMap::new();
    if !groups.is_empty() {
        for p in pods {
            let bound = p.spec.as_ref().is_some_and(|s| s.node_name.is_some());
            let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
            if !bound || matches!(phase, Some("Succeeded" | "Failed")) {
                continue;
            }
            let Some(g) = Gang::of(p) else { continue };
            let key = (p.metadata.namespace.clone().unwrap_or_default(), g);
            if groups.contains_key(&key) {
                *placed.entry(key).or_default() += 1;
            }
        }
    }
    for ((ns, g), mut members) in groups {
        members.sort_by_key(|p| member_order(p));
        let running = placed.get(&(ns.clone(), g.clone())).copied().unwrap_or(0);
        match gang_size(&g, &ns, &members, running, jobs) {
            // A Job of one pod is that pod.
            Some(1) if members.len() == 1 && !matches!(g, Gang::Group(_)) => {
                work.push(wanted(members[0], place, teams));
            }
            Some(size) if members.len() == size => {
                work.push(gang(&g.key(&ns), &ns, &members, place, teams));
            }
            _ => {}
        }
    }
    work.sort_by(|a, b| a.key.cmp(&b.key));
    work
}

/// The pool the pods are placed in: where the job files keep them.
pub struct Place {
    pub region: String,
    pub zone: String,
    pub instance_type: String,
}

/// Whether `p` waits for gantry to place it in `place`'s pool: given to gantry, not placed,
/// not gantry's own, not going away, and not selecting another instance type.
pub fn waits(p: &Pod, place: &Place) -> bool {
    let Some(spec) = &p.spec else { return false };
    let other_type = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get("node.kubernetes.io/instance-type"))
        .is_some_and(|t| *t != place.instance_type);
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    spec.scheduler_name.as_deref() == Some(SCHEDULER)
        && spec.node_name.is_none()
        && p.metadata.deletion_timestamp.is_none()
        && !p
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(JOB_LABEL))
        && phase.is_none_or(|ph| ph == "Pending")
        && !other_type
}

/// The job file for a waiting pod: its GPUs (any model of the pool's), kept to the pool.
pub fn wanted(p: &Pod, place: &Place, teams: &NamespaceTeams) -> Wanted {
    let ns = p
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = p.metadata.name.clone().unwrap_or_default();
    job_file(
        format!("pod {ns}/{name}"),
        &ns,
        &[p],
        pod_gpus(p),
        place,
        teams,
    )
}

/// The job file for a pod group: one gang of its members, each with the GPUs the most
/// asking of them asks.
fn gang(key: &str, ns: &str, members: &[&Pod], place: &Place, teams: &NamespaceTeams) -> Wanted {
    let gpus = members.iter().map(|p| pod_gpus(p)).max().unwrap_or(0);
    job_file(key.to_string(), ns, members, gpus, place, teams)
}

fn job_file(
    key: String,
    ns: &str,
    members: &[&Pod],
    gpus: u32,
    place: &Place,
    teams: &NamespaceTeams,
) -> Wanted {
    let (p, nodes) = (members[0], members.len());
    let labels = p.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let s = |v: &str| Value::String(v.to_string());
    let mut resources = Mapping::new();
    if gpus > 0 {
        resources.insert(
            s("accelerators"),
            s(&format!("{}:{gpus}", crate::spec::ANY_MODEL)),
        );
    }
    // CPUs and memory as the pods request them (the most asking member, per node), so the
    // core reserves them on the node as it would for gantry's own jobs.
    let most = |resource: &str| {
        members
            .iter()
            .map(|m| super::inventory::pod_requests(m, resource))
            .fold(0.0, f64::max)
    };
    let cpus = (most("cpu") * 1000.0).ceil() / 1000.0;
    if cpus > 0.0 {
        resources.insert(s("cpus"), Value::Number(cpus.into()));
    }
    let gib = (most("memory") / f64::from(1u32 << 30) * 1000.0).ceil() / 1000.0;
    if gib > 0.0 {
        resources.insert(s("memory"), Value::Number(gib.into()));
    }
    resources.insert(
        s("infra"),
        s(&format!("kubernetes/{}/{}", place.region, place.zone)),
    );
    resources.insert(s("instance_type"), s(&place.instance_type));
    let mut doc = Mapping::new();
    doc.insert(s("name"), s(&key));
    if nodes > 1 {
        doc.insert(s("num_nodes"), Value::Number(nodes.into()));
    }
    doc.insert(s("resources"), Value::Mapping(resources));
    doc.insert(s("run"), s(&format!("# {key}: its own containers")));
    doc.insert(s("adopt"), s(&key));
    Wanted {
        spec: serde_yaml_ng::to_string(&Value::Mapping(doc)).unwrap_or_default(),
        team: label(TEAM_LABEL)
            .or_else(|| teams.get(ns).cloned())
            .unwrap_or_else(|| ns.to_string()),
        priority: label(PRIORITY_LABEL),
        key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The pool the tests' pods wait for.
    fn place() -> Place {
        Place {
            region: "k8s".into(),
            zone: "dc1".into(),
            instance_type: "p5.48xlarge".into(),
        }
    }

    /// A pod's CPU and memory requests reach its job (before, only its GPUs did: the core
    /// placed it where its CPUs or memory would not fit).
    #[test]
    fn a_pods_cpu_and_memory_requests_are_its_jobs() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "t", "namespace": "research"},
            "spec": {"schedulerName": "gantry", "containers": [
                {"name": "main", "image": "i", "resources": {
                    "requests": {"cpu": "500m", "memory": "2Gi"},
                    "limits": {"nvidia.com/gpu": "1", "cpu": "8"}}},
                {"name": "side", "image": "i", "resources": {"limits": {"cpu": "2"}}}],
                "initContainers": [{"name": "fetch", "image": "i",
                    "resources": {"requests": {"memory": "6Gi"}}}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let place = place();
        let w = wanted(&p, &place, &NamespaceTeams::new());
        let spec = crate::spec::parse("w", w.spec.as_bytes()).unwrap();
        // 0.5 + 2 CPUs; memory the init container's 6 GiB (more than the 2 the others ask).
        assert_eq!(
            (spec.cpu_milli, spec.mem_mib),
            (2500, 6 * 1024),
            "{}",
            w.spec
        );
    }

    #[test]
    fn a_waiting_pod_is_a_job_file_kept_to_its_pool() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "train-x7", "namespace": "research",
                         "labels": {"gantry.dev/priority": "production"}},
            "spec": {"schedulerName": "gantry", "containers": [{"name": "main", "image": "i",
                "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let place = place();
        assert!(waits(&p, &place));
        let w = wanted(&p, &place, &NamespaceTeams::new());
        assert_eq!(
            (w.key.as_str(), w.team.as_str(), w.priority.as_deref()),
            ("pod research/train-x7", "research", Some("production"))
        );
        // The namespace's team label names its team (a pod's own label would win).
        let teams: NamespaceTeams = [("research".to_string(), "ml".to_string())].into();
        assert_eq!(wanted(&p, &place, &teams).team, "ml");
        let spec = crate::spec::parse("w", w.spec.as_bytes()).unwrap();
        assert_eq!(spec.adopt.as_deref(), Some("pod research/train-x7"));
        assert_eq!(
            spec.infra.to_string(),
            "kubernetes/k8s/dc1 instance type p5.48xlarge"
        );
        assert_eq!(
            adopted_pod(&w.key, 0, &[]),
            Some(("research".to_string(), "train-x7".to_string()))
        );
        let mut bound = p.clone();
        bound.spec.as_mut().unwrap().node_name = Some("gpu-0".into());
        assert!(!waits(&bound, &place));
        let mut elsewhere = p.clone();
        elsewhere.spec.as_mut().unwrap().node_selector = Some(
            [(
                "node.kubernetes.io/instance-type".to_string(),
                "g6.xlarge".to_string(),
            )]
            .into(),
        );
        assert!(!waits(&elsewhere, &place));
        let mut other = p;
        other.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
        assert!(!waits(&other, &place));
    }

    fn job_pod(name: &str, job: &str, node: Option<&str>, phase: &str) -> Arc<Pod> {
        let mut spec = json!({"schedulerName": "gantry", "containers": [{"name": "main",
            "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]});
        if let Some(n) = node {
            spec["nodeName"] = json!(n);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "lab", "ownerReferences": [{
                    "apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": "u",
                    "controller": true}]},
                "spec": spec,
                "status": {"phase": phase}
            }))
            .unwrap(),
        )
    }

    fn job(name: &str, parallelism: i32, completions: i32, succeeded: i32) -> Arc<Job> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "lab"},
                "spec": {"parallelism": parallelism, "completions": completions,
                         "template": {"spec": {"containers": []}}},
                "status": {"succeeded": succeeded}
            }))
            .unwrap(),
        )
    }

    /// A Job's gang is what it runs at once less what of it already runs: a pod made again
    /// after one failed, or the last of the completions owed, is placed alone (before, it
    /// waited forever for a partner that would never come).
    #[test]
    fn a_jobs_gang_counts_the_completions_owed_and_the_pods_already_placed() {
        let (place, teams) = (place(), NamespaceTeams::new());
        let keys = |pods: &[Arc<Pod>], jobs: &[Arc<Job>]| -> Vec<String> {
            all_wanted(pods, jobs, &place, &teams)
                .into_iter()
                .map(|w| w.key)
                .collect()
        };
        let ddp = [job("ddp", 2, 2, 0)];
        // Half the gang: nothing yet.
        let one = [job_pod("ddp-0", "ddp", None, "Pending")];
        assert!(keys(&one, &ddp).is_empty());
        let both = [
            job_pod("ddp-0", "ddp", None, "Pending"),
            job_pod("ddp-1", "ddp", None, "Pending"),
        ];
        assert_eq!(keys(&both, &ddp), ["job lab/ddp"]);
        // Rank 1 failed and was made again while rank 0 runs: the new pod alone.
        let again = [
            job_pod("ddp-0", "ddp", Some("gpu-0"), "Running"),
            job_pod("ddp-1-b", "ddp", None, "Pending"),
        ];
        assert_eq!(keys(&again, &ddp), ["pod lab/ddp-1-b"]);
        // Three completions two at a time, two done: the last pod alone.
        let last = [job_pod("w-2", "w", None, "Pending")];
        assert_eq!(keys(&last, &[job("w", 2, 3, 2)]), ["pod lab/w-2"]);
    }
}
