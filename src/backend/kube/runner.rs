//! A Kubernetes pool as a `Runner`: each node's part of a gantry job is a pod gantry creates
//! (`schedulerName: gantry`, so no other scheduler takes it) and binds to the node its core
//! chose through the `pods/binding` subresource, as a scheduler does. Pod phases and
//! container exit codes drive the job; a stop deletes the pod with the job's grace (the
//! kubelet sends SIGTERM, then SIGKILL when the grace ends); pods of others holding GPUs are
//! foreign work; a cordoned, tainted or NotReady node takes nothing new.
//!
//! gantry's pods are followed change by change as the pods watch delivers them (a pod that
//! starts and ends between two looks is not missed, and its exit code is the one in its last
//! state); nodes are looked at again only when a watch has delivered something.
//!
//! A worker thread runs the client and the reflectors on its own runtime, so the daemon's
//! calls return at once; what it learns waits in a queue `poll` drains. Runs are found again
//! after a restart by their labels (`gantry.dev/job`) and token annotation.

use super::inventory::{self, KubeNode, Labels, JOB_LABEL};
use super::pod::{pod_of, token_of, Run, RunKey};
use super::start::{Gangs, Part, Started, IN_FLIGHT};
use super::wanted::adopted_pod;
use super::{connect, dcgm, Cluster, PodChange, Watched};
use crate::backend::cluster::NodeReports;
use crate::backend::local::nvml::Discovery;
use crate::backend::logs::{LogQuery, LogRead, LogReader};
use crate::backend::{ForeignWork, HostInfo, Launch, RunEvent, Runner};
use k8s_openapi::api::core::v1::Pod;
use kube::api::DeleteParams;
use kube::runtime::reflector::ObjectRef;
use kube::Api;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

mod follow;

enum Cmd {
    Start(usize, Box<Launch>),
    Delete {
        host: usize,
        job: i64,
        token: String,
        grace_s: u32,
    },
    Forget {
        host: usize,
        job: i64,
        token: String,
    },
    /// A run's log, read on the worker's runtime (the client's connections live there).
    Log {
        host: usize,
        job: i64,
        reply: std::sync::mpsc::Sender<Result<String, String>>,
    },
}

pub struct KubePool {
    nodes: Vec<String>,
    /// `kubectl`'s flags that reach the pool's cluster and namespace (`gantry exec`).
    kubectl: Vec<String>,
    tx: UnboundedSender<Cmd>,
    events: Arc<Mutex<Vec<RunEvent>>>,
    logs: Arc<KubeLogs>,
}

struct Settings {
    kubeconfig: Option<std::path::PathBuf>,
    context: Option<String>,
    namespace: String,
    image: String,
    /// The DCGM exporter's metrics URL.
    dcgm: Option<String>,
    /// The pool, for the job files of pods users give gantry.
    place: super::wanted::Place,
}

impl KubePool {
    /// The pool's runner; it connects in the background (an unreachable API server is said
    /// in `Down` events, and retried).
    pub fn open(
        p: &crate::config::fleet::PoolConfig,
        nodes: Vec<String>,
        wake: crate::backend::Wake,
    ) -> KubePool {
        let (tx, rx) = unbounded_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let k8s = p.kubernetes.clone().unwrap_or_default();
        let mut kubectl = Vec::new();
        if let Some(k) = &k8s.kubeconfig {
            kubectl.push(format!(
                "--kubeconfig={}",
                crate::backend::expand_home(k).display()
            ));
        }
        if let Some(c) = &k8s.context {
            kubectl.push(format!("--context={c}"));
        }
        kubectl.push(format!("--namespace={}", k8s.namespace()));
        let settings = Settings {
            kubeconfig: k8s.kubeconfig.as_deref().map(crate::backend::expand_home),
            namespace: k8s.namespace().to_string(),
            context: k8s.context,
            image: k8s.image.unwrap_or_default(),
            dcgm: k8s.dcgm,
            place: super::wanted::Place {
                region: p.region.clone(),
                zone: p.zone.clone(),
                instance_type: p.instance_type.clone(),
            },
        };
        let logs = Arc::new(KubeLogs { tx: tx.clone() });
        let (changes, changed) = unbounded_channel();
        let (starts, started) = unbounded_channel();
        let (scraped_tx, scraped) = unbounded_channel();
        let worker = Worker {
            settings,
            nodes: nodes.clone(),
            cluster: None,
            watched: None,
            next_connect: Instant::now(),
            runs: HashMap::new(),
            changes,
            looked_at: None,
            gangs: Gangs::default(),
            wanted: None,
            adopted_ended: 0,
            adopted_ended_said: 0,
            telemetry: dcgm::Telemetry::new(nodes.len(), scraped_tx),
            starts,
            in_flight: Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT)),
            reports: NodeReports::new(nodes.len()),
            out: events.clone(),
            wake,
        };
        std::thread::Builder::new()
            .name(format!("kube-{}", p.name))
            .spawn(move || worker.run(rx, changed, started, scraped))
            .expect("spawn the Kubernetes worker thread");
        KubePool {
            nodes,
            kubectl,
            tx,
            events,
            logs,
        }
    }
}

impl Runner for KubePool {
    fn kind(&self) -> &'static str {
        "kubernetes"
    }
    fn address(&self, host: usize) -> String {
        self.nodes.get(host).cloned().unwrap_or_default()
    }
    fn start(&mut self, host: usize, launch: Launch) {
        let _ = self.tx.send(Cmd::Start(host, Box::new(launch)));
    }
    /// Kubernetes sends SIGTERM (the container's stop signal), not `signal`: a job that
    /// checkpoints on another signal must handle SIGTERM there.
    fn stop(&mut self, host: usize, job: i64, token: &str, _signal: &str, grace_s: f64) {
        let _ = self.tx.send(Cmd::Delete {
            host,
            job,
            token: token.to_string(),
            grace_s: grace_s.ceil().clamp(1.0, 86_400.0) as u32,
        });
    }
    fn kill(&mut self, host: usize, job: i64, token: &str) {
        let _ = self.tx.send(Cmd::Delete {
            host,
            job,
            token: token.to_string(),
            grace_s: 0,
        });
    }
    fn forget(&mut self, host: usize, job: i64, token: &str) {
        let _ = self.tx.send(Cmd::Forget {
            host,
            job,
            token: token.to_string(),
        });
    }
    fn poll(&mut self, _now: f64) -> Vec<RunEvent> {
        std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()))
    }
    /// `kubectl exec` (the pods/exec API, as k9s reaches a pod) into the job's pod on the
    /// node, found by its job label: the container's environment and working directory are
    /// the job's by construction.
    fn enter(
        &self,
        host: usize,
        job: i64,
        tty: bool,
        argv: &[String],
    ) -> Result<std::process::Command, String> {
        let node = self
            .nodes
            .get(host)
            .ok_or_else(|| format!("no node {host} in this pool"))?;
        let flags = self
            .kubectl
            .iter()
            .map(|f| crate::backend::enter::shell_quote(f))
            .collect::<Vec<_>>()
            .join(" ");
        let find = format!(
            "kubectl {flags} get pods -l {}={job} --field-selector spec.nodeName={} -o name",
            super::inventory::JOB_LABEL,
            crate::backend::enter::shell_quote(node)
        );
        let exec = format!(
            "exec kubectl {flags} exec -i{} \"$p\" -- \"$@\"",
            if tty { " -t" } else { "" }
        );
        let script = format!(
            "p=$({find} | head -n 1); [ -n \"$p\" ] || {{ echo \"no pod of job {job} on {node} now\" >&2; exit 126; }}; {exec}"
        );
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.args(["-c", &script, "gantry-exec"]);
        if argv.is_empty() {
            cmd.args(crate::backend::enter::SHELL);
        } else {
            cmd.args(argv);
        }
        Ok(cmd)
    }
    fn logs(&self) -> Arc<dyn LogReader> {
        self.logs.clone()
    }
}

struct Worker {
    settings: Settings,
    nodes: Vec<String>,
    cluster: Option<Cluster>,
    watched: Option<Watched>,
    next_connect: Instant,
    runs: HashMap<RunKey, Run>,
    /// Where gantry's pod changes are sent (kept for the watches of each connection).
    changes: UnboundedSender<PodChange>,
    /// The watches' generation last looked at.
    looked_at: Option<u64>,
    gangs: Gangs,
    telemetry: dcgm::Telemetry,
    /// The pods waiting for gantry to place them, as last said.
    wanted: Option<Vec<crate::backend::Wanted>>,
    /// Runs of users' pods that have ended (counted), and the count when the waiting pods
    /// were last said: a preempted user's pod is gone, and its requeued job must hear so.
    adopted_ended: u64,
    adopted_ended_said: u64,
    /// Where starts in flight say how they went.
    starts: UnboundedSender<Started>,
    in_flight: Arc<tokio::sync::Semaphore>,
    /// What was last said of each node.
    reports: NodeReports,
    out: Arc<Mutex<Vec<RunEvent>>>,
    /// Wakes the daemon when a run ends or a node answers (events are queued first).
    wake: crate::backend::Wake,
}

impl Worker {
    fn run(
        mut self,
        mut rx: UnboundedReceiver<Cmd>,
        mut changed: UnboundedReceiver<PodChange>,
        mut started: UnboundedReceiver<Started>,
        mut scraped: UnboundedReceiver<dcgm::Scraped>,
    ) {
        // The reflectors and the client's connections run on a worker thread of their own,
        // whatever this loop is waiting on.
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("kube-client")
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                for host in 0..self.nodes.len() {
                    self.emit(RunEvent::Down {
                        host,
                        why: format!("cannot start the Kubernetes client's runtime: {e}"),
                    });
                }
                return;
            }
        };
        rt.block_on(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(500));
            loop {
                tokio::select! {
                    // How a start went comes before what the watch says of its pods.
                    biased;
                    Some(s) = started.recv() => self.started(s).await,
                    cmd = rx.recv() => match cmd {
                        Some(cmd) => self.command(cmd).await,
                        // The daemon let the pool go.
                        None => return,
                    },
                    Some(c) = changed.recv() => self.pod_changed(c),
                    Some(s) = scraped.recv() => self.scraped(s),
                    _ = tick.tick() => {
                        // What the watches delivered before this look is taken first: the
                        // store may already lack a pod whose deletion says how it ended.
                        while let Ok(c) = changed.try_recv() {
                            self.pod_changed(c);
                        }
                        self.refresh().await;
                    }
                }
            }
        });
    }

    fn emit(&self, e: RunEvent) {
        self.wake.after(e, |e| {
            self.out.lock().unwrap_or_else(|p| p.into_inner()).push(e)
        });
    }

    fn pods(&self) -> Option<Api<Pod>> {
        let c = self.cluster.as_ref()?;
        Some(Api::namespaced(c.client.clone(), &self.settings.namespace))
    }

    async fn command(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Start(host, l) => {
                if let Some(parts) = self.gangs.add(host, *l, &self.nodes) {
                    self.start(parts);
                }
            }
            Cmd::Delete {
                host,
                job,
                token,
                grace_s,
            } => {
                let key = (host, job, token);
                match self.runs.get_mut(&key) {
                    // Deleted once its start has gone through.
                    Some(r) if r.starting => r.stop = Some(grace_s),
                    Some(r) => {
                        let (ns, pod) = (r.namespace.clone(), r.pod.clone());
                        self.delete(&ns, &pod, grace_s, host).await;
                    }
                    None => self.gang_stopped(key.1, &key.2),
                }
            }
            Cmd::Log { host, job, reply } => {
                let Some(api) = self.pods() else {
                    let _ =
                        reply.send(Err("not connected to the Kubernetes API server yet".into()));
                    return;
                };
                let node = self.nodes.get(host).cloned().unwrap_or_default();
                // Its own task: a slow answer does not hold the pool's other work.
                tokio::spawn(async move {
                    let _ = reply.send(super::podlog::pod_log(&api, job, &node).await);
                });
            }
            Cmd::Forget { host, job, token } => match self.runs.remove(&(host, job, token.clone()))
            {
                // Its end is recorded: the pod object goes (gantry cleans up after itself);
                // one still starting goes when its start is through. A user's pod gantry
                // placed stays theirs (their Job controller reads how it ended).
                Some(r) if !r.starting && !r.adopted => {
                    self.delete(&r.namespace, &r.pod, 0, host).await
                }
                Some(_) => {}
                None => self.gang_stopped(job, &token),
            },
        }
    }

    async fn delete(&self, ns: &str, pod: &str, grace_s: u32, host: usize) {
        let Some(c) = &self.cluster else { return };
        let api: Api<Pod> = Api::namespaced(c.client.clone(), ns);
        let dp = DeleteParams {
            grace_period_seconds: Some(grace_s),
            ..DeleteParams::default()
        };
        match api.delete(pod, &dp).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => self.emit(RunEvent::Failed {
                host,
                why: format!("deleting pod {ns}/{pod}: {e}"),
            }),
        }
    }

    /// Starts the parts (one run, or a whole gang) in the background.
    fn start(&mut self, parts: Vec<(usize, Launch)>) {
        let refuse = |w: &Worker, parts: &[(usize, Launch)], why: &str| {
            for (host, l) in parts {
                w.emit(RunEvent::StartFailed {
                    host: *host,
                    job: l.job,
                    token: l.token.clone(),
                    why: why.to_string(),
                });
            }
        };
        let Some(client) = self.cluster.as_ref().map(|c| c.client.clone()) else {
            refuse(self, &parts, "not connected to the Kubernetes API server");
            return;
        };
        let s = &self.settings;
        let mut pods = Vec::new();
        for (host, l) in &parts {
            let key = (*host, l.job, l.token.clone());
            let node = self.nodes[*host].clone();
            if let Some(adopt) = &l.adopt {
                // A user's pod that asked gantry to place it: bound, not made.
                let store = self
                    .watched
                    .as_ref()
                    .map(|w| w.pods.state())
                    .unwrap_or_default();
                let Some((ns, name)) = adopted_pod(adopt, l.gang.rank, &store) else {
                    return refuse(
                        self,
                        &parts,
                        &format!(
                            "`adopt: {adopt}` names no pod of rank {} (`pod NAMESPACE/NAME`, or `pods NAMESPACE/GROUP`)",
                            l.gang.rank
                        ),
                    );
                };
                let mut pod = Pod::default();
                pod.metadata.name = Some(name.to_string());
                let (labels, annotations) = super::pod::marks(l);
                let mark = serde_json::json!({"metadata": {
                    "labels": labels,
                    "annotations": annotations,
                }});
                pods.push(Part {
                    key,
                    node,
                    namespace: ns.to_string(),
                    pod,
                    adopted: true,
                    mark: Some(mark),
                });
                continue;
            }
            match serde_json::from_value::<Pod>(pod_of(l, &s.image, &s.namespace)) {
                Ok(pod) => pods.push(Part {
                    key,
                    node,
                    namespace: s.namespace.clone(),
                    pod,
                    adopted: false,
                    mark: None,
                }),
                Err(e) => return refuse(self, &parts, &format!("building the pod: {e}")),
            }
        }
        let named: Vec<(RunKey, String, String, bool)> = pods
            .iter()
            .map(|p| {
                (
                    p.key.clone(),
                    p.pod.metadata.name.clone().unwrap_or_default(),
                    p.namespace.clone(),
                    p.adopted,
                )
            })
            .collect();
        for (p, (_, l)) in pods.iter().zip(&parts) {
            let name = p.pod.metadata.name.clone().unwrap_or_default();
            let mut run = Run::starting(name, l.gpus.clone());
            run.namespace = p.namespace.clone();
            run.adopted = p.adopted;
            self.runs.insert(p.key.clone(), run);
        }
        let (tx, limit) = (self.starts.clone(), self.in_flight.clone());
        tokio::spawn(async move {
            let result = super::start::start(client, pods, limit).await;
            let _ = tx.send(Started {
                parts: named,
                result,
            });
        });
    }

    /// A start is through: the runs go on as their pods say (what the watch delivered
    /// meanwhile is taken now), or fail with the refusal.
    async fn started(&mut self, s: Started) {
        for ((host, job, token), pod, ns, adopted) in s.parts {
            let key = (host, job, token);
            if let Err(refusal) = &s.result {
                if self.runs.remove(&key).is_some() {
                    self.emit(match &refusal.vanished {
                        Some(what) => RunEvent::Vanished {
                            host,
                            job,
                            token: key.2,
                            what: what.clone(),
                        },
                        None => RunEvent::StartFailed {
                            host,
                            job,
                            token: key.2,
                            why: refusal.why.clone(),
                        },
                    });
                }
                continue;
            }
            let Some(r) = self.runs.get_mut(&key) else {
                // Forgotten while it started (a user's pod stays theirs).
                if !adopted {
                    self.delete(&ns, &pod, 0, host).await;
                }
                continue;
            };
            r.starting = false;
            let events = match r.held.take() {
                Some((p, deleted)) => r.step(&key, &p, deleted),
                None => Vec::new(),
            };
            if let Some(grace) = r.stop.take() {
                self.delete(&ns, &pod, grace, host).await;
            }
            for e in events {
                self.emit(e);
            }
        }
    }

    /// A gang stopped before all its parts reached this pool: those that did end here.
    fn gang_stopped(&mut self, job: i64, token: &str) {
        for host in self.gangs.stop(job, token) {
            self.emit(RunEvent::Exited {
                host,
                job,
                token: token.to_string(),
                exit: crate::backend::Exit::Unknown,
                at: None,
            });
        }
    }

    async fn refresh(&mut self) {
        if self.cluster.is_none() {
            if Instant::now() < self.next_connect {
                return;
            }
            let s = &self.settings;
            match connect(s.kubeconfig.as_deref(), s.context.as_deref()).await {
                Ok(c) => {
                    self.watched = Some(Watched::start_following(
                        &tokio::runtime::Handle::current(),
                        &c,
                        Some(self.changes.clone()),
                    ));
                    self.looked_at = None;
                    self.cluster = Some(c);
                }
                Err(why) => {
                    self.next_connect = Instant::now() + Duration::from_secs(5);
                    for host in 0..self.nodes.len() {
                        self.say_status(host, Err(why.clone()), None);
                    }
                    return;
                }
            }
        }
        let Some(w) = &self.watched else { return };
        let ready = w.is_ready();
        let error = w.error();
        if !ready {
            if let Some(why) = error {
                for host in 0..self.nodes.len() {
                    self.say_status(host, Err(why.clone()), None);
                }
            }
            return;
        }
        let generation = w.generation();
        if self.looked_at != Some(generation) {
            self.looked_at = Some(generation);
            self.look_at_nodes();
            self.look_for_wanted();
        }
        self.check_runs();
        if let Some(url) = &self.settings.dcgm {
            self.telemetry.scrape(url);
        }
    }
}

/// Runs' logs through the pod log API, asked of the worker.
struct KubeLogs {
    tx: UnboundedSender<Cmd>,
}

impl LogReader for KubeLogs {
    fn read(&self, host: usize, job: i64, q: &LogQuery, wait: Duration) -> Result<LogRead, String> {
        let (reply, answer) = std::sync::mpsc::channel();
        self.tx
            .send(Cmd::Log { host, job, reply })
            .map_err(|_| "the Kubernetes pool is closed".to_string())?;
        let text = answer
            .recv_timeout(wait.max(Duration::from_secs(5)))
            .map_err(|_| "the Kubernetes API server did not answer in time".to_string())??;
        Ok(super::podlog::log_read(&text, q))
    }
}
