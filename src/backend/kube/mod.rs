//! Kubernetes clusters through kube-rs: connecting as kubectl does (kubeconfig and its
//! contexts, `KUBECONFIG`, or the in-cluster service account), Nodes and Pods watched by
//! reflectors (not polled), and the cluster's GPU nodes as gantry sees them (`inventory`).

pub mod dcgm;
pub mod discover;
pub mod inventory;
mod pod;
mod podlog;
pub mod pools;
pub mod runner;
mod start;
pub mod wanted;

/// A Kubernetes cluster's nodes: pods gantry binds.
pub const REGISTRATION: crate::backend::registration::Registration =
    crate::backend::registration::Registration {
        backend: crate::config::fleet::Backend::Kubernetes,
        runner: |p, _, nodes, opening| {
            Ok(Box::new(runner::KubePool::open(
                p,
                nodes,
                opening.wake.clone(),
            )))
        },
        provisioner: None,
        here: None,
        hosts_are: Some("Kubernetes node(s)"),
        cloud: None,
        gpus_from_agents: false,
    };

use futures_util::StreamExt;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::{Namespace, Node, Pod};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Config};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// A cluster connected to: the client, and what to call it in messages.
pub struct Cluster {
    pub client: Client,
    /// `context NAME (https://…)`, or the in-cluster account.
    pub name: String,
    pub server: String,
}

/// The kubeconfig's error, said as one line with what to do.
fn config_error(e: impl std::fmt::Display, file: Option<&Path>, context: Option<&str>) -> String {
    let e = e.to_string();
    let what = match (file, context) {
        (Some(f), Some(c)) => format!("kubeconfig {} context {c}", f.display()),
        (Some(f), None) => format!("kubeconfig {}", f.display()),
        (None, Some(c)) => format!("kubeconfig context {c}"),
        (None, None) => "kubeconfig".to_string(),
    };
    let hint = if e.contains("context") && context.is_some() {
        "list the contexts with `kubectl config get-contexts`"
    } else if file.is_none() {
        "set KUBECONFIG or pass --kubeconfig (or run inside the cluster, where its service account is used)"
    } else {
        "check the file (`kubectl --kubeconfig FILE config view`)"
    };
    format!("{what}: {e}: {hint}")
}

/// Connects as kubectl would: `file` (else `KUBECONFIG` / `~/.kube/config`, else the
/// in-cluster service account) and `context` (else the current one).
pub async fn connect(file: Option<&Path>, context: Option<&str>) -> Result<Cluster, String> {
    let options = kube::config::KubeConfigOptions {
        context: context.map(str::to_string),
        ..Default::default()
    };
    let config = match file {
        Some(f) => {
            let kc = kube::config::Kubeconfig::read_from(f)
                .map_err(|e| config_error(e, file, context))?;
            Config::from_custom_kubeconfig(kc, &options)
                .await
                .map_err(|e| config_error(e, file, context))?
        }
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| config_error(e, file, context))?,
        None => Config::infer()
            .await
            .map_err(|e| config_error(e, file, context))?,
    };
    let server = config.cluster_url.to_string();
    let name = match context {
        Some(c) => format!("context {c} ({server})"),
        None => server.clone(),
    };
    let client = Client::try_from(config).map_err(|e| format!("{name}: {e}"))?;
    Ok(Cluster {
        client,
        name,
        server,
    })
}

/// An API error in one line with what to do.
pub fn api_error(cluster: &str, e: &watcher::Error) -> String {
    let text = match e {
        watcher::Error::InitialListFailed(k)
        | watcher::Error::WatchStartFailed(k)
        | watcher::Error::WatchFailed(k) => kube_error(k),
        watcher::Error::WatchError(s) => format!("{} ({})", s.message, s.reason),
        other => other.to_string(),
    };
    format!("{cluster}: {text}")
}

fn kube_error(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) if s.code == 403 || s.code == 401 => format!(
            "{} (HTTP {}): gantry needs get, list and watch on nodes and pods (the ClusterRole in deploy/), and fresh credentials (`kubectl auth can-i list nodes`)",
            s.message, s.code
        ),
        kube::Error::Api(s) => format!("{} (HTTP {})", s.message, s.code),
        other => {
            let mut text = other.to_string();
            let mut src = std::error::Error::source(other);
            while let Some(s) = src {
                text = format!("{text}: {s}");
                src = s.source();
            }
            format!("cannot reach the API server: {text}")
        }
    }
}

/// Nodes and Pods as reflectors keep them, updated by watches that resume where they
/// stopped (and list again when the server says their version is gone).
pub struct Watched {
    pub nodes: Store<Node>,
    pub pods: Store<Pod>,
    /// Namespaces, for the team a namespace's `gantry.dev/team` label names. Optional: a
    /// role without namespaces (an older ClusterRole) leaves it empty and teams fall back to
    /// the namespace's name; its errors are not the cluster's.
    pub namespaces: Store<Namespace>,
    /// batch/v1 Jobs, for the gang a Job's (or a JobSet's) pods given to gantry make.
    /// Optional as namespaces are.
    pub jobs: Store<Job>,
    /// The last error each watch met (cleared when it works again): nodes', pods'.
    errors: [Arc<Mutex<Option<String>>>; 2],
    /// Both stores have held a full list (set once).
    full: Arc<std::sync::atomic::AtomicBool>,
    /// Bumped by every change either watch delivers: nothing to look at again while unmoved.
    generation: Arc<AtomicU64>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Watched {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// A change to one of gantry's pods (labelled with a job), as the pods watch delivered it —
/// after the store took it. A deleted pod carries its last state (how it ended).
pub struct PodChange {
    pub pod: Pod,
    pub deleted: bool,
}

/// What each watch event is also told to: the generation (any change) and, for pods, the
/// worker following gantry's own.
type Hook<K> = Box<dyn Fn(&watcher::Event<K>) + Send + Sync>;

fn follow<K>(
    rt: &tokio::runtime::Handle,
    api: Api<K>,
    name: String,
    error: Arc<Mutex<Option<String>>>,
    trim: fn(&mut K),
    hook: Hook<K>,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store::<K>();
    let stream = watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(trim)
        .reflect(writer);
    let task = rt.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(item) = stream.next().await {
            if let Ok(event) = &item {
                hook(event);
            }
            let mut e = error.lock().unwrap_or_else(|e| e.into_inner());
            match item {
                Ok(_) => *e = None,
                Err(err) => *e = Some(api_error(&name, &err)),
            }
        }
    });
    (reader, task)
}

/// What gantry keeps of a Node: not the images it has pulled (hundreds on a real node), nor
/// the fields' edit history.
fn trim_node(n: &mut Node) {
    n.metadata.managed_fields = None;
    if let Some(s) = &mut n.status {
        s.images = None;
        s.volumes_attached = None;
        s.volumes_in_use = None;
    }
}

/// What gantry keeps of a Pod: where it is bound, what it asks for, its phase and its
/// containers' states — not its environment, commands, volumes or probes (tens of
/// thousands of pods are held in memory).
fn trim_pod(p: &mut Pod) {
    p.metadata.managed_fields = None;
    if let Some(spec) = &mut p.spec {
        spec.volumes = None;
        for c in spec
            .containers
            .iter_mut()
            .chain(spec.init_containers.iter_mut().flatten())
        {
            c.env = None;
            c.env_from = None;
            c.command = None;
            c.args = None;
            c.volume_mounts = None;
            c.liveness_probe = None;
            c.readiness_probe = None;
            c.startup_probe = None;
        }
    }
    if let Some(s) = &mut p.status {
        s.conditions = None;
    }
}

impl Watched {
    /// Starts the watches on `rt`.
    pub fn start(rt: &tokio::runtime::Handle, cluster: &Cluster) -> Watched {
        Watched::start_following(rt, cluster, None)
    }

    /// The same, telling `ours` of every change to a pod labelled with a gantry job (a
    /// pod that comes and goes between two looks at the store is not missed).
    pub fn start_following(
        rt: &tokio::runtime::Handle,
        cluster: &Cluster,
        ours: Option<UnboundedSender<PodChange>>,
    ) -> Watched {
        let errors = [Arc::new(Mutex::new(None)), Arc::new(Mutex::new(None))];
        let generation = Arc::new(AtomicU64::new(0));
        let g = generation.clone();
        let (nodes, a) = follow(
            rt,
            Api::<Node>::all(cluster.client.clone()),
            cluster.name.clone(),
            errors[0].clone(),
            trim_node,
            Box::new(move |_| {
                g.fetch_add(1, Ordering::Release);
            }),
        );
        let g = generation.clone();
        let (pods, b) = follow(
            rt,
            Api::<Pod>::all(cluster.client.clone()),
            cluster.name.clone(),
            errors[1].clone(),
            trim_pod,
            Box::new(move |e| {
                g.fetch_add(1, Ordering::Release);
                let Some(tx) = &ours else { return };
                let (pod, deleted) = match e {
                    watcher::Event::Apply(p) | watcher::Event::InitApply(p) => (p, false),
                    watcher::Event::Delete(p) => (p, true),
                    watcher::Event::Init | watcher::Event::InitDone => return,
                };
                let labelled = pod
                    .metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(inventory::JOB_LABEL));
                if labelled {
                    let _ = tx.send(PodChange {
                        pod: pod.clone(),
                        deleted,
                    });
                }
            }),
        );
        let g = generation.clone();
        let (namespaces, c) = follow(
            rt,
            Api::<Namespace>::all(cluster.client.clone()),
            cluster.name.clone(),
            Arc::new(Mutex::new(None)),
            |n: &mut Namespace| n.metadata.managed_fields = None,
            Box::new(move |_| {
                g.fetch_add(1, Ordering::Release);
            }),
        );
        let g = generation.clone();
        let (jobs, d) = follow(
            rt,
            Api::<Job>::all(cluster.client.clone()),
            cluster.name.clone(),
            Arc::new(Mutex::new(None)),
            |j: &mut Job| {
                j.metadata.managed_fields = None;
                // Only the counts are read: the pod template is the pods' business.
                if let Some(s) = &mut j.spec {
                    s.template = Default::default();
                }
            },
            Box::new(move |_| {
                g.fetch_add(1, Ordering::Release);
            }),
        );
        let full = Arc::new(std::sync::atomic::AtomicBool::new(false));
        {
            let (n, p, f) = (nodes.clone(), pods.clone(), full.clone());
            rt.spawn(async move {
                let _ = n.wait_until_ready().await;
                let _ = p.wait_until_ready().await;
                f.store(true, std::sync::atomic::Ordering::Release);
            });
        }
        Watched {
            nodes,
            pods,
            namespaces,
            jobs,
            full,
            generation,
            errors,
            tasks: vec![a, b, c, d],
        }
    }

    /// A number that moves whenever either store changes.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Whether both stores have held a full list.
    pub fn is_ready(&self) -> bool {
        self.full.load(std::sync::atomic::Ordering::Acquire)
    }

    /// What a watch met last time it failed, while it has not worked since (one watch's
    /// success does not hide the other's failure).
    pub fn error(&self) -> Option<String> {
        self.errors
            .iter()
            .find_map(|e| e.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    /// Waits until both stores hold a full list; the watches' first error, or `limit`
    /// passing, ends the wait with it (as kubectl does, a one-shot read does not retry).
    pub async fn ready(&self, limit: Duration) -> Result<(), String> {
        let both = async {
            let _ = self.nodes.wait_until_ready().await;
            let _ = self.pods.wait_until_ready().await;
        };
        let failed = async {
            loop {
                if let Some(e) = self.error() {
                    return e;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        };
        tokio::select! {
            () = both => Ok(()),
            e = failed => Err(e),
            () = tokio::time::sleep(limit) => Err(format!("no answer from the API server in {limit:?}")),
        }
    }

    /// The cluster's nodes with their GPUs and the pods holding them, now.
    pub fn inventory(&self, labels: &inventory::Labels) -> Vec<inventory::KubeNode> {
        let nodes = self.nodes.state();
        let pods = self.pods.state();
        inventory::inventory(
            nodes.iter().map(|n| n.as_ref()),
            pods.iter().map(|p| p.as_ref()),
            labels,
        )
    }
}
