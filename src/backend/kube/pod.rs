//! gantry's pods: what one node's part of a job looks like as a pod, and what a pod's
//! changes mean for its run (started, ended with its container's exit code, could not
//! start, gone).

use super::inventory::JOB_LABEL;
use crate::backend::{Exit, Launch, RunEvent};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const TOKEN_ANNOTATION: &str = "gantry.dev/token";
/// The GPUs gantry granted the run (its indices or UUIDs), for telemetry after a restart.
const GPUS_ANNOTATION: &str = "gantry.dev/gpus";
/// The label on the pods gantry makes (a user's pod gantry placed lacks it).
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const RANK_LABEL: &str = "gantry.dev/rank";
/// How long a pod just created may be missing before it counts as gone (its creation
/// answered, the watch has not delivered it yet).
const CREATE_LAG: Duration = Duration::from_secs(30);
/// How long a pod once seen may be missing from the store before it counts as gone without
/// the watch having said so (a watch that listed again after a gap sends no delete).
const MISSING_LAG: Duration = Duration::from_secs(2);
/// Container states Kubernetes will not get over by waiting: the start failed.
const HOPELESS: [&str; 5] = [
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// A run (one node's part of a job), as the daemon knows it: `(host, job, token)`.
pub(super) type RunKey = (usize, i64, String);

/// A pod of gantry's, followed.
pub(super) struct Run {
    /// Empty for a run found again after a restart until its pod is seen (by its token).
    pub pod: String,
    created: Instant,
    seen: bool,
    missing_since: Option<Instant>,
    started: bool,
    pub ended: bool,
    /// Its pod is being created and bound (what the watch says of it waits in `held`).
    pub starting: bool,
    /// Told to stop (this grace) while starting.
    pub stop: Option<u32>,
    /// The last change the watch delivered while starting: (pod, deleted).
    pub held: Option<(Pod, bool)>,
    /// The GPUs gantry granted it (indices or UUIDs, as its launch named them).
    pub gpus: Vec<String>,
    /// Its pod's namespace (gantry's, or a user's whose pod gantry placed).
    pub namespace: String,
    /// A user's pod gantry placed (`adopt`): never deleted when its run is forgotten.
    pub adopted: bool,
}

impl Run {
    /// A pod just created, or (`pod` empty) a run found again after a restart.
    pub fn new(pod: String) -> Run {
        Run {
            pod,
            created: Instant::now(),
            seen: false,
            missing_since: None,
            started: false,
            ended: false,
            starting: false,
            stop: None,
            held: None,
            gpus: Vec::new(),
            namespace: String::new(),
            adopted: false,
        }
    }

    /// A pod being created and bound, granted `gpus`.
    pub fn starting(pod: String, gpus: Vec<String>) -> Run {
        Run {
            starting: true,
            gpus,
            ..Run::new(pod)
        }
    }

    /// A run found again after a restart: its pod is `p` (one gantry made, or a user's it
    /// placed and marked).
    pub fn found(&mut self, p: &Pod) {
        self.pod = p.metadata.name.clone().unwrap_or_default();
        self.namespace = p.metadata.namespace.clone().unwrap_or_default();
        self.adopted = p
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .is_none_or(|m| m != "gantry");
        if let Some(g) = p
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(GPUS_ANNOTATION))
        {
            self.gpus = g
                .split(',')
                .filter(|s| !s.is_empty())
                .map(str::to_string)
                .collect();
        }
    }

    /// What the pod's state `p` means for the run; `deleted`: the pod is gone (`p` is its
    /// last state).
    pub fn step(&mut self, key: &RunKey, p: &Pod, deleted: bool) -> Vec<RunEvent> {
        let (host, job, token) = (key.0, key.1, key.2.clone());
        let mut events = Vec::new();
        if self.ended {
            return events;
        }
        self.seen = true;
        self.missing_since = None;
        let phase = p
            .status
            .as_ref()
            .and_then(|s| s.phase.as_deref())
            .unwrap_or("Pending");
        let pod = format!(
            "pod {}/{}",
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default()
        );
        let started = |events: &mut Vec<RunEvent>| {
            events.push(RunEvent::Started {
                host,
                job,
                token: token.clone(),
                pgid: None,
                handle: Some(pod.clone()),
            })
        };
        if let Some(exit) = ended(p) {
            self.ended = true;
            if !self.started {
                started(&mut events);
            }
            events.push(RunEvent::Exited {
                host,
                job,
                token: token.clone(),
                exit,
                at: None,
            });
            return events;
        }
        if let Some(why) = hopeless(p) {
            self.ended = true;
            events.push(RunEvent::StartFailed {
                host,
                job,
                token: token.clone(),
                why: format!("pod {}: {why}", self.pod),
            });
            return events;
        }
        if phase == "Running" && !self.started {
            self.started = true;
            started(&mut events);
        }
        if deleted {
            // Gone without its container's end being reported (deleted at once, or with
            // its node).
            self.ended = true;
            events.push(RunEvent::Exited {
                host,
                job,
                token,
                exit: Exit::Unknown,
                at: None,
            });
        }
        events
    }

    /// The pod is not in the store now: gone, once it has been missing long enough.
    pub fn missing(&mut self, key: &RunKey, now: Instant) -> Vec<RunEvent> {
        if self.ended {
            return Vec::new();
        }
        let since = *self.missing_since.get_or_insert(now);
        let gone = if self.seen {
            now.duration_since(since) >= MISSING_LAG
        } else {
            now.duration_since(self.created) >= CREATE_LAG
        };
        if !gone {
            return Vec::new();
        }
        self.ended = true;
        vec![RunEvent::Exited {
            host: key.0,
            job: key.1,
            token: key.2.clone(),
            exit: Exit::Unknown,
            at: None,
        }]
    }
}

/// What marks a pod as run `l`'s — a pod gantry made, or a user's it placed — so that a
/// restarted daemon finds the run again (`token_of`, `Run::found`): the job label, the token
/// and granted-GPUs annotations. (labels, annotations)
pub(super) fn marks(l: &Launch) -> (Value, Value) {
    (
        json!({JOB_LABEL: l.job.to_string()}),
        json!({TOKEN_ANNOTATION: l.token, GPUS_ANNOTATION: l.gpus.join(",")}),
    )
}

/// The run token a pod of gantry's carries.
pub(super) fn token_of(p: &Pod) -> Option<&String> {
    p.metadata.annotations.as_ref()?.get(TOKEN_ANNOTATION)
}

/// The pod's name for a run: what `kubectl get pods` users read.
pub(super) fn pod_name(job: i64, rank: u16, token: &str) -> String {
    // Tokens are `gty_` and hex: the name carries eight of the random characters.
    let random = token.rsplit('_').next().unwrap_or(token);
    let tail: String = random
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(8)
        .collect::<String>()
        .to_ascii_lowercase();
    format!("gantry-{job}-{rank}-{tail}")
}

/// The rank gantry gave a pod of its own (its `gantry.dev/rank` label).
pub(super) fn rank_of(p: &Pod) -> Option<u16> {
    p.metadata.labels.as_ref()?.get(RANK_LABEL)?.parse().ok()
}

/// The pod of one node's part of a job.
/// `image` and `namespace` are the pool's.
pub(super) fn pod_of(l: &Launch, image: &str, namespace: &str) -> Value {
    let gpus = l.gpus.len();
    let mut env: Vec<Value> = l
        .envs
        .iter()
        .map(|(k, v)| json!({"name": k, "value": v}))
        .collect();
    let mut add = |k: &str, v: String| env.push(json!({"name": k, "value": v}));
    let ours =
        crate::backend::part_env(l.job, &l.token, gpus, l.checkpoint_dir.as_deref(), &l.gang);
    for (k, v) in ours {
        add(k, v);
    }
    // As SkyPilot runs a task: setup and run as separate bash scripts; a failing setup stops
    // the job. The scripts travel as environment values (no quoting to get wrong).
    add("GANTRY_SETUP", l.setup.clone().unwrap_or_default());
    add("GANTRY_RUN", l.run.clone());
    let mut container = json!({
        "name": "main",
        "image": l.image.as_deref().unwrap_or(image),
        "command": ["bash", "-c", "bash -c \"$GANTRY_SETUP\" && exec bash -c \"$GANTRY_RUN\""],
        "env": env,
    });
    if gpus > 0 {
        container["resources"] = json!({"limits": {"nvidia.com/gpu": gpus.to_string()}});
    }
    if let Some(w) = &l.workdir {
        container["workingDir"] = json!(w);
    }
    let mut spec = json!({
        "schedulerName": super::inventory::SCHEDULER,
        "restartPolicy": "Never",
        "containers": [container],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    });
    // The nodes of a gang reach one another at their nodes' addresses (NCCL across pods).
    if l.gang.ips.len() > 1 {
        spec["hostNetwork"] = json!(true);
    }
    let (mut labels, annotations) = marks(l);
    labels[MANAGED_BY] = json!("gantry");
    labels[RANK_LABEL] = json!(l.gang.rank.to_string());
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod_name(l.job, l.gang.rank, &l.token),
            "namespace": namespace,
            "labels": labels,
            "annotations": annotations,
        },
        "spec": spec,
    })
}

/// A pod's run state: how it ended (exit code of its container), if it did.
pub(super) fn ended(p: &Pod) -> Option<Exit> {
    let phase = p.status.as_ref()?.phase.as_deref()?;
    if phase != "Succeeded" && phase != "Failed" {
        return None;
    }
    let code = p
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| t.exit_code);
    Some(match code {
        // 128 + n: killed by signal n (137: SIGKILL at the end of a grace).
        Some(c) if c > 128 && c < 160 => Exit::Signal(c - 128),
        Some(c) => Exit::Code(c),
        None if phase == "Succeeded" => Exit::Code(0),
        None => Exit::Unknown,
    })
}

/// Why a pod's container cannot start, if Kubernetes will not get over it by waiting.
fn hopeless(p: &Pod) -> Option<String> {
    p.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .iter()
        .filter_map(|c| c.state.as_ref()?.waiting.as_ref())
        .find(|w| HOPELESS.contains(&w.reason.as_deref().unwrap_or("")))
        .map(|w| {
            format!(
                "{}{}",
                w.reason.clone().unwrap_or_default(),
                w.message
                    .as_ref()
                    .map_or(String::new(), |m| format!(": {m}"))
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(phase: &str, state: Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "gantry-1-0-aaaa"},
            "status": {"phase": phase, "containerStatuses": [{"name": "main", "image": "i",
                "imageID": "", "ready": false, "restartCount": 0, "state": state}]}
        }))
        .unwrap()
    }

    fn key() -> RunKey {
        (0, 1, "gty_aaaa".into())
    }

    fn names(events: &[RunEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e {
                RunEvent::Started { .. } => "started".to_string(),
                RunEvent::Exited { exit, .. } => format!("exited {exit:?}"),
                RunEvent::StartFailed { why, .. } => format!("failed {why}"),
                other => format!("{other:?}"),
            })
            .collect()
    }

    #[test]
    fn pod_names_and_exits() {
        assert_eq!(pod_name(7, 1, "AbC-123xyz"), "gantry-7-1-abc123xy");
        assert_eq!(pod_name(7, 0, "gty_0a1b2c3d4e5f"), "gantry-7-0-0a1b2c3d");
        let p = pod("Failed", json!({"terminated": {"exitCode": 137}}));
        assert_eq!(ended(&p), Some(Exit::Signal(9)));
    }

    /// A pod that ran and ended between two looks at the store: its last state (delivered
    /// with its deletion) says how it ended, and it is said once.
    #[test]
    fn a_pod_gone_before_it_was_looked_at_ends_its_run_with_its_exit_code() {
        let mut r = Run::new("gantry-1-0-aaaa".into());
        let last = pod("Succeeded", json!({"terminated": {"exitCode": 0}}));
        assert_eq!(
            names(&r.step(&key(), &last, true)),
            ["started", "exited Code(0)"]
        );
        assert!(r.step(&key(), &last, true).is_empty());
        assert!(r.missing(&key(), Instant::now() + CREATE_LAG).is_empty());
    }

    #[test]
    fn running_then_deleted_at_once_is_an_unknown_end() {
        let mut r = Run::new("p".into());
        let running = pod("Running", json!({"running": {}}));
        assert_eq!(names(&r.step(&key(), &running, false)), ["started"]);
        assert!(r.step(&key(), &running, false).is_empty());
        assert_eq!(names(&r.step(&key(), &running, true)), ["exited Unknown"]);
    }

    #[test]
    fn an_image_that_cannot_be_pulled_fails_the_start() {
        let mut r = Run::new("p".into());
        let p = pod(
            "Pending",
            json!({"waiting": {"reason": "ErrImagePull", "message": "not found"}}),
        );
        assert_eq!(
            names(&r.step(&key(), &p, false)),
            ["failed pod p: ErrImagePull: not found"]
        );
    }

    /// Missing from the store: a pod once seen is gone after a moment (a watch that listed
    /// again sends no delete); one never seen gets the time its creation needs to arrive.
    #[test]
    fn a_missing_pod_is_gone_after_its_lag() {
        let t0 = Instant::now();
        let mut seen = Run::new("p".into());
        seen.step(&key(), &pod("Running", json!({"running": {}})), false);
        assert!(seen.missing(&key(), t0).is_empty());
        assert_eq!(
            names(&seen.missing(&key(), t0 + MISSING_LAG)),
            ["exited Unknown"]
        );
        let mut new = Run::new("q".into());
        assert!(new.missing(&key(), t0 + MISSING_LAG).is_empty());
        assert_eq!(
            names(&new.missing(&key(), t0 + CREATE_LAG + MISSING_LAG)),
            ["exited Unknown"]
        );
    }
}
