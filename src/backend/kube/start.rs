//! Starting runs as pods. Every pod of a gang is created before any is bound, and a gang is
//! bound whole or not at all (a refusal deletes the pods already made): a scheduler that binds
//! half a gang holds GPUs for a job that cannot run. Many starts are in flight at once (the
//! worker does not wait on the API server between them).

use super::pod::RunKey;
use crate::backend::Launch;
use futures_util::future::join_all;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// How many pods may be being created or bound at once.
pub(super) const IN_FLIGHT: usize = 64;

/// One node's part of a job, as the pod that runs it: one gantry makes, or (`adopted`) one
/// a user made that waits for gantry to place it.
pub(super) struct Part {
    pub key: RunKey,
    pub node: String,
    pub namespace: String,
    pub pod: Pod,
    pub adopted: bool,
    /// For a user's pod: the merge patch that marks it as this run's once bound (so a
    /// restarted daemon finds it again).
    pub mark: Option<Value>,
}

/// How a start went, for the worker: the runs it was for with their pods, and the refusal
/// if any.
pub(super) struct Started {
    /// (run, pod, its namespace, adopted).
    pub parts: Vec<(RunKey, String, String, bool)>,
    pub result: Result<(), Refusal>,
}

/// Why a start did not go through.
pub(super) struct Refusal {
    pub why: String,
    /// A user's pod that was gone when gantry went to bind it (`pod NS/NAME`): deleted since
    /// it was queued, so its job goes as it would have before it was placed.
    pub vanished: Option<String>,
}

impl From<String> for Refusal {
    fn from(why: String) -> Refusal {
        Refusal {
            why,
            vanished: None,
        }
    }
}

/// The parts of gangs whose nodes are all this pool's, held until the last one arrives.
#[derive(Default)]
pub(super) struct Gangs {
    waiting: HashMap<(i64, String), Vec<(usize, Launch)>>,
}

impl Gangs {
    /// The parts to start now: this one alone, or a whole gang once its last part is here.
    pub fn add(
        &mut self,
        host: usize,
        l: Launch,
        nodes: &[String],
    ) -> Option<Vec<(usize, Launch)>> {
        let size = l.gang.ips.len();
        if size <= 1 || !l.gang.ips.iter().all(|ip| nodes.contains(ip)) {
            return Some(vec![(host, l)]);
        }
        let key = (l.job, l.token.clone());
        let parts = self.waiting.entry(key.clone()).or_default();
        parts.push((host, l));
        if parts.len() < size {
            return None;
        }
        self.waiting.remove(&key)
    }

    /// Lets go of a gang stopped before all its parts arrived: the hosts of those that had.
    pub fn stop(&mut self, job: i64, token: &str) -> Vec<usize> {
        self.waiting
            .remove(&(job, token.to_string()))
            .map(|parts| parts.into_iter().map(|(h, _)| h).collect())
            .unwrap_or_default()
    }
}

fn name(p: &Part) -> &str {
    p.pod.metadata.name.as_deref().unwrap_or_default()
}

/// Creates the pod of every part gantry makes, then binds each part's pod to its node; on
/// any refusal, deletes the pods it made (never one a user made) and says the first refusal.
pub(super) async fn start(
    client: kube::Client,
    parts: Vec<Part>,
    limit: Arc<Semaphore>,
) -> Result<(), Refusal> {
    // A gang larger than the limit takes all of it rather than never starting.
    let want = parts.len().clamp(1, IN_FLIGHT) as u32;
    let _permits = limit
        .acquire_many(want)
        .await
        .map_err(|_| Refusal::from("the Kubernetes pool is closing".to_string()))?;
    let api = |p: &Part| Api::<Pod>::namespaced(client.clone(), &p.namespace);
    let pp = PostParams::default();
    let made: Vec<&Part> = parts.iter().filter(|p| !p.adopted).collect();
    // A gang's other pods are owned by its head (rank 0, made first): deleting the head
    // with kubectl takes the whole gang, so no worker is left holding GPUs alone.
    let head = (made.len() > 1)
        .then(|| {
            made.iter()
                .position(|p| super::pod::rank_of(&p.pod) == Some(0))
        })
        .flatten();
    let refusal = |p: &Part, e: &kube::Error| {
        format!(
            "creating pod {}/{}: {}",
            p.namespace,
            name(p),
            super::kube_error(e)
        )
    };
    let mut have: Vec<&Part> = Vec::new();
    let mut owner = None;
    if let Some(h) = head {
        // Nothing else is made before it: a refusal refuses the gang as it stands.
        let p = made[h];
        let made_head = api(p)
            .create(&pp, &p.pod)
            .await
            .map_err(|e| Refusal::from(refusal(p, &e)))?;
        owner = made_head.metadata.uid.map(|uid| (name(p).to_string(), uid));
        have.push(p);
    }
    let rest: Vec<(&Part, Pod)> = made
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != head)
        .map(|(_, p)| {
            let mut pod = p.pod.clone();
            if let Some((head_name, uid)) = &owner {
                pod.metadata.owner_references = Some(vec![
                    k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                        api_version: "v1".into(),
                        kind: "Pod".into(),
                        name: head_name.clone(),
                        uid: uid.clone(),
                        controller: Some(false),
                        block_owner_deletion: Some(false),
                    },
                ]);
            }
            (*p, pod)
        })
        .collect();
    let created = join_all(rest.iter().map(|(p, pod)| {
        let api = api(p);
        let pp = &pp;
        async move { api.create(pp, pod).await }
    }))
    .await;
    let mut refused = None;
    for ((p, _), r) in rest.iter().zip(created) {
        match r {
            Ok(_) => have.push(p),
            Err(e) => {
                refused.get_or_insert_with(|| refusal(p, &e));
            }
        }
    }
    if let Some(why) = refused {
        remove(&client, &have).await;
        return Err(why.into());
    }
    let bound = join_all(parts.iter().map(|p| {
        let binding = json!({
            "apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name(p), "namespace": p.namespace},
            "target": {"apiVersion": "v1", "kind": "Node", "name": p.node},
        });
        let api = api(p);
        async move {
            api.create_subresource::<Value, Value>(
                "binding",
                name(p),
                &PostParams::default(),
                &binding,
            )
            .await
            .map_err(|e| Refusal {
                why: format!(
                    "binding pod {}/{} to {}: {}",
                    p.namespace,
                    name(p),
                    p.node,
                    super::kube_error(&e)
                ),
                vanished: (p.adopted && matches!(&e, kube::Error::Api(s) if s.code == 404))
                    .then(|| format!("pod {}/{}", p.namespace, name(p))),
            })
        }
    }))
    .await;
    let marks = join_all(parts.iter().filter_map(|p| {
        let mark = p.mark.as_ref()?;
        let api = api(p);
        Some(async move {
            api.patch(name(p), &PatchParams::default(), &Patch::Merge(mark))
                .await
                .map(|_| ())
        })
    }));
    if let Some(why) = bound.into_iter().find_map(Result::err) {
        // Unbound, a pod would wait forever for a scheduler named gantry; bound, it would
        // hold GPUs for a gang that cannot run: all gantry made go (a user's pod waits on).
        let all: Vec<&Part> = parts.iter().filter(|p| !p.adopted).collect();
        remove(&client, &all).await;
        return Err(why);
    }
    // Bound: the run goes on whether or not the mark is written; without it a restarted
    // daemon does not find the run again (it needs `patch` on pods: deploy/rbac.yaml).
    let _ = marks.await;
    Ok(())
}

async fn remove(client: &kube::Client, parts: &[&Part]) {
    let now = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    join_all(parts.iter().map(|p| {
        let api = Api::<Pod>::namespaced(client.clone(), &p.namespace);
        let now = &now;
        async move { api.delete(name(p), now).await }
    }))
    .await;
}
