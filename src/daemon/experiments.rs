//! Each job that names an experiment (`experiment:`, or `MLFLOW_EXPERIMENT_NAME` in its
//! `envs`) is reported to the fleet's MLflow tracking server (`[mlflow] tracking_uri`):
//!
//! * **at submit**, before the job is queued, its MLflow run is made (or the one its
//!   `MLFLOW_RUN_ID` names is joined) and `MLFLOW_RUN_ID`, `MLFLOW_TRACKING_URI` and
//!   `MLFLOW_EXPERIMENT_NAME` are written into its `envs`: every node of every start has them,
//!   so the job's own `mlflow.log_*` calls land in the same run, and a restarted daemon finds
//!   the run in the job's spec;
//! * **as it runs**, off the actor, gantry's tags and metrics (`gantry.queue_wait_s`,
//!   `gantry.gpu_hours`, `gantry.cost_usd`, `gantry.restarts`, `gantry.preemptions`,
//!   `gantry.gpu_util_mean` where NVML measures its GPUs) at most once a minute, the spec as
//!   an artifact and the file mounts' sources as the run's inputs once, the status
//!   `RUNNING`, and at its end `FINISHED`, `FAILED` or `KILLED` with the end time.
//!
//! A tracker that does not answer never holds a job: a run it could not make at submit is made
//! when it answers (the job then runs without `MLFLOW_RUN_ID`), and what could not be sent is
//! sent at the next beat. The daemon reaches only the fleet's tracking server: a job whose own
//! `MLFLOW_TRACKING_URI` names another is left to report there itself.

use super::actor::{Handle, Request};
use super::engine::Submission;
use crate::api::JobState;
use crate::experiments::mlflow::{Mlflow, MlflowError, RunStatus};
use serde_yaml_ng::Value as Y;
use std::collections::HashMap;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, watch};

/// How often the tracker looks at the jobs it follows.
const BEAT: Duration = Duration::from_secs(5);
/// Metrics of a running job at most this often (MLflow keeps every point).
const METRICS_EVERY: Duration = Duration::from_secs(60);
/// How long a submission waits for its run to be made before it goes without one.
const AT_SUBMIT: Duration = Duration::from_secs(3);
/// Jobs followed at once; past it a job is reported no further (said in the daemon's log).
const MAX_FOLLOWED: usize = 10_000;

/// A job the tracker follows, from its submission.
#[derive(Debug)]
pub struct Follow {
    pub job: i64,
    /// Its MLflow run, where one was made (or named) at submit.
    pub run: Option<String>,
    /// What to make it from where none was.
    pub experiment: String,
    pub name: String,
    pub tags: Vec<(String, String)>,
    /// What happened at submit, said in the job's events once it has an id.
    pub said: String,
}

/// Where the API hands the tracker what it made at submit.
#[derive(Clone)]
pub struct Tracker {
    tx: mpsc::Sender<Follow>,
    handle: Handle,
}

/// Says `line` in the daemon's events (of job `job`): the tracker shares the console's
/// terminal with an embedded daemon, so it prints nothing.
fn say(handle: &Handle, job: Option<i64>, line: String) {
    handle.tell(Request::Experiment { job, line });
}

impl Tracker {
    /// The tracker and its loop (run it with `tokio::spawn`).
    pub fn new(
        handle: Handle,
        stop: watch::Receiver<bool>,
    ) -> (Tracker, impl std::future::Future<Output = ()>) {
        let (tx, rx) = mpsc::channel(1024);
        (
            Tracker {
                tx,
                handle: handle.clone(),
            },
            run(handle, rx, stop),
        )
    }

    /// The job `id` was queued: follow it.
    pub fn follow(&self, mut f: Follow, id: i64) {
        f.job = id;
        // A full channel (a thousand submissions within one beat) drops the follow, said.
        if let Err(e) = self.tx.try_send(f) {
            let why = match e {
                mpsc::error::TrySendError::Full(_) => "too many submissions at once",
                mpsc::error::TrySendError::Closed(_) => "the tracker stopped",
            };
            say(
                &self.handle,
                Some(id),
                format!("is not reported to MLflow: {why}"),
            );
        }
    }
}

/// The fleet's tracking server, as the latest snapshot names it.
fn tracking_uri(handle: &Handle) -> Option<String> {
    handle.published.borrow().snapshot.mlflow.clone()
}

/// Before a submission is queued: where it names an experiment on the fleet's tracking
/// server, its run is made (or joined) and its variables written into the job's `envs`. What
/// to follow once it has an id; `None` where it is not reported.
pub async fn prepare(handle: &Handle, sub: &mut Submission) -> Option<Follow> {
    let uri = tracking_uri(handle)?;
    let spec = sub.parsed.as_ref()?;
    let experiment = spec.experiment.clone()?;
    if spec
        .envs
        .get("MLFLOW_TRACKING_URI")
        .is_some_and(|own| own.trim_end_matches('/') != uri.trim_end_matches('/'))
    {
        return None;
    }
    let mut tags = vec![
        (
            "gantry.user".to_string(),
            sub.user.clone().unwrap_or_default(),
        ),
        ("gantry.nodes".to_string(), spec.nodes.to_string()),
        ("gantry.gpu".to_string(), gpus_of(spec)),
    ];
    if let Some(team) = sub.team.clone().or_else(|| spec.team.clone()) {
        tags.push(("gantry.team".to_string(), team));
    }
    if let Some(class) = sub.priority.clone().or_else(|| spec.priority.clone()) {
        tags.push(("gantry.class".to_string(), class));
    }
    if let Some(g) = &spec.git_workdir {
        tags.push(("gantry.git_url".to_string(), g.url.clone()));
        if let Some(r) = &g.reference {
            tags.push(("gantry.git_commit".to_string(), r.clone()));
        }
    }
    let name = spec.name.clone().unwrap_or_else(|| "job".to_string());
    let mut follow = Follow {
        job: 0,
        run: spec.envs.get("MLFLOW_RUN_ID").cloned(),
        experiment: experiment.clone(),
        name,
        tags,
        said: String::new(),
    };
    let mut experiment_id = None;
    follow.said = match &follow.run {
        Some(run) => format!("joins MLflow run {run} (its MLFLOW_RUN_ID) at {uri}"),
        None => match Mlflow::new(&uri) {
            Err(e) => e,
            Ok(mlflow) => {
                let unix_ms = (wall_unix() * 1000.0) as i64;
                match tokio::time::timeout(AT_SUBMIT, make_run(&mlflow, &follow, unix_ms)).await {
                    Ok(Ok((id, run))) => {
                        let said = format!("has MLflow run {run} in experiment `{experiment}` at {uri}");
                        follow.run = Some(run);
                        experiment_id = Some(id);
                        said
                    }
                    Ok(Err(e)) => format!("has no MLflow run yet: {e}; it is made when the server answers (the job runs without MLFLOW_RUN_ID)"),
                    Err(_) => format!("has no MLflow run yet: {uri} did not answer within {} s; it is made when it answers (the job runs without MLFLOW_RUN_ID)", AT_SUBMIT.as_secs()),
                }
            }
        },
    };
    let mut vars = vec![
        ("MLFLOW_TRACKING_URI", uri.clone()),
        ("MLFLOW_EXPERIMENT_NAME", experiment),
    ];
    if let Some(run) = &follow.run {
        vars.push(("MLFLOW_RUN_ID", run.clone()));
    }
    if let Some(id) = experiment_id {
        vars.push(("MLFLOW_EXPERIMENT_ID", id));
    }
    write_envs(sub, &vars);
    Some(follow)
}

fn gpus_of(spec: &crate::spec::JobSpec) -> String {
    match spec.accelerators.as_ref().and_then(|a| a.options.first()) {
        Some(o) => match o.count {
            crate::spec::GpuCount::Whole(n) => format!("{}x{n}", o.model),
            crate::spec::GpuCount::Fraction(m) => {
                format!("{}x{}", o.model, f64::from(m) / 1000.0)
            }
        },
        None => "none".to_string(),
    }
}

fn wall_unix() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The run of `f` made in its experiment (made too where it does not exist): (experiment
/// id, run id).
async fn make_run(
    mlflow: &Mlflow,
    f: &Follow,
    start_ms: i64,
) -> Result<(String, String), MlflowError> {
    let experiment = mlflow.experiment(&f.experiment).await?;
    let run = mlflow
        .create_run(&experiment, &f.name, start_ms, &f.tags)
        .await?;
    Ok((experiment, run))
}

/// Writes `vars` into the task's `envs` (a SkyPilot task file; other forms are left as they
/// are), keeping the text as the client sent it for the idempotency key, and reads it again.
fn write_envs(sub: &mut Submission, vars: &[(&str, String)]) {
    let text = String::from_utf8_lossy(&sub.text).into_owned();
    if crate::spec::sbatch::is_batch_script(&sub.file, &text)
        || crate::spec::dstack::is_dstack(&text)
    {
        return;
    }
    let Ok(Y::Mapping(mut doc)) = serde_yaml_ng::from_str::<Y>(&text) else {
        return;
    };
    let envs = doc
        .entry(Y::String("envs".into()))
        .or_insert_with(|| Y::Mapping(Default::default()));
    if envs.is_null() {
        *envs = Y::Mapping(Default::default());
    }
    let Y::Mapping(envs) = envs else {
        return;
    };
    for (k, v) in vars {
        envs.insert(Y::String((*k).to_string()), Y::String(v.clone()));
    }
    let Ok(written) = serde_yaml_ng::to_string(&Y::Mapping(doc)) else {
        return;
    };
    let Ok(parsed) = crate::spec::parse(&sub.file, written.as_bytes()) else {
        return;
    };
    sub.sent_text = Some(std::mem::replace(&mut sub.text, written.into_bytes()));
    sub.parsed = Some(parsed);
}

/// A followed job as last reported.
struct Followed {
    f: Follow,
    /// The state last reported (`None`: nothing yet).
    said: Option<JobState>,
    job_id_tagged: bool,
    metrics_at: Option<Instant>,
    /// Its GPUs' utilisation as NVML measured it, summed over beats (percent, beats).
    util: (f64, u32),
}

impl Followed {
    fn new(f: Follow, job_id_tagged: bool) -> Followed {
        Followed {
            f,
            said: None,
            job_id_tagged,
            metrics_at: None,
            util: (0.0, 0),
        }
    }
}

/// The mean utilisation of job `id`'s GPUs now, where a real host measured them.
fn util_now(p: &super::actor::Published, id: i64) -> Option<f64> {
    let of_job: Vec<f64> = p
        .job_gpus
        .iter()
        .filter(|g| g.job == id)
        .filter_map(|g| p.gpus.iter().find(|m| m.uuid == g.uuid).map(|m| m.util_pct))
        .collect();
    (!of_job.is_empty()).then(|| of_job.iter().sum::<f64>() / of_job.len() as f64)
}

/// What a job's file mounts read, as MLflow's run inputs: (name, source type, URI).
fn datasets_of(spec: &crate::spec::JobSpec) -> Vec<(String, String, String)> {
    use crate::spec::mounts::MountSource;
    spec.file_mounts
        .iter()
        .map(|m| match &m.source {
            MountSource::Local(path) => (m.dest.clone(), "local".to_string(), path.clone()),
            MountSource::Bucket { url, .. } => {
                let kind = url.split_once("://").map_or("uri", |(k, _)| k);
                (m.dest.clone(), kind.to_string(), url.clone())
            }
        })
        .collect()
}

async fn run(handle: Handle, mut rx: mpsc::Receiver<Follow>, mut stop: watch::Receiver<bool>) {
    let mut followed: HashMap<i64, Followed> = HashMap::new();
    let mut adopted = false;
    // Why the tracking server did not answer, while it does not (said once per outage).
    let mut down: Option<String> = None;
    let mut client: Option<(String, Mlflow)> = None;
    loop {
        tokio::select! {
            f = rx.recv() => match f {
                Some(mut f) => {
                    if followed.len() >= MAX_FOLLOWED {
                        say(&handle, Some(f.job), format!("is not reported to MLflow: {MAX_FOLLOWED} jobs are followed already"));
                    } else {
                        say(&handle, Some(f.job), std::mem::take(&mut f.said));
                        followed.insert(f.job, Followed::new(f, false));
                    }
                    continue;
                }
                None => break,
            },
            _ = tokio::time::sleep(BEAT) => {}
            _ = async { let _ = stop.wait_for(|&s| s).await; } => break,
        }
        let Some(uri) = tracking_uri(&handle) else {
            continue;
        };
        // One client (and its connection pool) per tracking server, kept across beats; made
        // again only when the fleet file names another.
        if client.as_ref().is_none_or(|(at, _)| *at != uri) {
            client = Mlflow::new(&uri).ok().map(|m| (uri.clone(), m));
        }
        let Some((_, mlflow)) = &client else {
            continue;
        };
        if !adopted {
            adopt(&handle, &uri, &mut followed).await;
            adopted = true;
        }
        let ids: Vec<i64> = followed.keys().copied().collect();
        for id in ids {
            let Some(f) = followed.get_mut(&id) else {
                continue;
            };
            match report(&handle, mlflow, f).await {
                Ok(done) => {
                    if let Some(why) = down.take() {
                        say(&handle, None, format!("MLflow at {uri} answers again (it did not: {why}); what waited is sent"));
                    }
                    if done {
                        followed.remove(&id);
                    }
                }
                Err(e) => {
                    if down.is_none() {
                        say(&handle, None, format!("MLflow at {uri}: {e}; what is to be sent waits for it (every {} s)", BEAT.as_secs()));
                        down = Some(e.to_string());
                    }
                    // One beat at a time while it does not answer.
                    break;
                }
            }
        }
    }
}

/// After a restart: the jobs not ended whose spec has a run on this tracking server.
async fn adopt(handle: &Handle, uri: &str, followed: &mut HashMap<i64, Followed>) {
    let live: Vec<i64> = {
        let p = handle.published.borrow();
        p.snapshot
            .jobs
            .iter()
            .filter(|j| !matches!(j.state.as_str(), "completed" | "failed" | "cancelled"))
            .map(|j| j.id)
            .collect()
    };
    for id in live {
        if followed.contains_key(&id) || followed.len() >= MAX_FOLLOWED {
            continue;
        }
        let Ok(view) = handle.call(|reply| Request::Job { id, reply }).await else {
            continue;
        };
        let Ok(spec) = crate::spec::parse("spec", view.spec.as_bytes()) else {
            continue;
        };
        let (Some(run), Some(own)) = (
            spec.envs.get("MLFLOW_RUN_ID"),
            spec.envs.get("MLFLOW_TRACKING_URI"),
        ) else {
            continue;
        };
        if own.trim_end_matches('/') != uri.trim_end_matches('/') {
            continue;
        }
        let f = Follow {
            job: id,
            run: Some(run.clone()),
            experiment: spec.experiment.clone().unwrap_or_default(),
            name: spec.name.clone().unwrap_or_default(),
            tags: Vec::new(),
            said: String::new(),
        };
        followed.insert(id, Followed::new(f, true));
    }
}

/// One beat of one job: its run made where it has none, its state and metrics sent where
/// they changed or are due. True once its end has been sent; the server's refusal where it
/// did not take them.
async fn report(handle: &Handle, mlflow: &Mlflow, f: &mut Followed) -> Result<bool, MlflowError> {
    let (row_state, calendar, now) = {
        let p = handle.published.borrow();
        let row = p
            .snapshot
            .jobs
            .iter()
            .find(|j| j.id == f.f.job)
            .map(|j| j.state.clone());
        if let Some(u) = util_now(&p, f.f.job) {
            f.util = (f.util.0 + u, f.util.1 + 1);
        }
        (row, p.calendar.clone(), p.snapshot.now)
    };
    let unix_ms = |t: f64| (calendar.unix(t) * 1000.0) as i64;
    if f.f.run.is_none() {
        let (_, run) = make_run(mlflow, &f.f, unix_ms(now)).await?;
        say(
            handle,
            Some(f.f.job),
            format!(
                "has MLflow run {run} in experiment `{}`, made now that the server answers",
                f.f.experiment
            ),
        );
        f.f.run = Some(run);
    }
    let Some(run) = f.f.run.clone() else {
        return Ok(false);
    };
    let state = row_state
        .as_deref()
        .and_then(|s| JobState::ALL.into_iter().find(|j| j.name() == s));
    let changed = state.is_none() || state != f.said;
    let due = f.metrics_at.is_none_or(|t| t.elapsed() >= METRICS_EVERY);
    if !changed && !due {
        return Ok(false);
    }
    let Ok(view) = handle
        .call(|reply| Request::Job { id: f.f.job, reply })
        .await
    else {
        // The job is gone from the journal: nothing more to send.
        return Ok(true);
    };
    let first_start = view.runs.first().map(|r| r.started_at);
    let gpu_hours: f64 = view
        .runs
        .iter()
        .map(|r| r.gpus * (r.ended_at.unwrap_or(now) - r.started_at).max(0.0) / 3600.0)
        .sum();
    let preemptions = view
        .runs
        .iter()
        .filter(|r| r.ended.as_deref().is_some_and(|e| e.contains("preempt")))
        .count();
    let restarts = view.runs.len().saturating_sub(1 + preemptions);
    let mut metrics = vec![
        ("gantry.gpu_hours", gpu_hours),
        ("gantry.cost_usd", view.cost_usd),
        ("gantry.restarts", restarts as f64),
        ("gantry.preemptions", preemptions as f64),
    ];
    if let Some(s) = first_start {
        metrics.push(("gantry.queue_wait_s", (s - view.submitted_at).max(0.0)));
    }
    if f.util.1 > 0 {
        metrics.push(("gantry.gpu_util_mean", f.util.0 / f64::from(f.util.1)));
    }
    let mut tags = Vec::new();
    if !f.job_id_tagged {
        tags.push(("gantry.job_id".to_string(), f.f.job.to_string()));
        tags.extend(f.f.tags.iter().cloned());
    }
    tags.push(("gantry.state".to_string(), view.state.name().to_string()));
    if let Some(reason) = &view.reason {
        tags.push(("gantry.reason".to_string(), reason.clone()));
    }
    mlflow
        .log_batch(&run, unix_ms(now), &metrics, &tags)
        .await?;
    if !f.job_id_tagged {
        // Once: the spec as submitted (secrets' values never) and what its mounts read.
        let datasets = crate::spec::parse("spec", view.spec.as_bytes())
            .map(|s| datasets_of(&s))
            .unwrap_or_default();
        if !datasets.is_empty() {
            mlflow.log_inputs(&run, &datasets).await?;
        }
        let root = mlflow.artifact_uri(&run).await?;
        if !mlflow
            .put_artifact(&root, "gantry-spec.yaml", view.spec.clone().into_bytes())
            .await?
        {
            say(
                handle,
                Some(f.f.job),
                format!("its spec is not in MLflow: the run's artifacts go to {root}, which the server does not keep itself"),
            );
        }
    }
    f.job_id_tagged = true;
    f.metrics_at = Some(Instant::now());
    let status = match view.state {
        JobState::Running | JobState::Preempting => Some((RunStatus::Running, None)),
        JobState::Completed => Some((RunStatus::Finished, Some(now))),
        JobState::Failed => Some((RunStatus::Failed, Some(now))),
        JobState::Cancelled => Some((RunStatus::Killed, Some(now))),
        JobState::Pending | JobState::Held => None,
    };
    if let Some((status, end)) = status {
        let end = end.map(|_| unix_ms(view.runs.last().and_then(|r| r.ended_at).unwrap_or(now)));
        mlflow.set_status(&run, status, end).await?;
    }
    f.said = Some(view.state);
    Ok(view.state.is_final())
}
