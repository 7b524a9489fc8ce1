//! Each job that names an experiment (`experiment:`, or `MLFLOW_EXPERIMENT_NAME` in its
//! `envs`) is reported to the fleet's MLflow tracking server (`[mlflow] tracking_uri`):
//!
//! * **at submit**, before the job is queued, its MLflow run is made (or the one its
//!   `MLFLOW_RUN_ID` names is joined) and `MLFLOW_RUN_ID`, `MLFLOW_TRACKING_URI` and
//!   `MLFLOW_EXPERIMENT_NAME` are written into its `envs`: every node of every start has them,
//!   so the job's own `mlflow.log_*` calls land in the same run;
//! * **as it runs**, off the actor, gantry's tags and metrics (`gantry.queue_wait_s`,
//!   `gantry.gpu_hours`, `gantry.cost_usd`, `gantry.restarts`, `gantry.preemptions`,
//!   `gantry.gpu_util_mean` where NVML measures its GPUs) at most once a minute, the spec as
//!   an artifact and the file mounts' sources as the run's inputs once, the status
//!   `RUNNING`, and at its end `FINISHED`, `FAILED` or `KILLED` with the end time.
//!
//! What is owed is kept in the journal, written with the job (`experiment_reports`): the
//! job's state there against the state last sent. A tracker that does not answer never holds
//! a job — a run it could not make at submit is made when it answers (found again, not made
//! twice, where an answer was lost), and what could not be sent is sent then, by this daemon
//! or by the next one over the same journal. The daemon reaches only the fleet's tracking
//! server: a job whose own `MLFLOW_TRACKING_URI` names another is left to report there itself.

use super::actor::{Handle, Request};
use super::engine::Submission;
use crate::api::{JobState, JobView};
use crate::config::fleet::MlflowSettings;
use crate::daemon::journal::ReportRecord;
use crate::experiments::mlflow::{Mlflow, MlflowError, RunStatus};
use serde_yaml_ng::Value as Y;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the tracker looks at what it owes.
const BEAT: Duration = Duration::from_secs(5);
/// Metrics of a running job at most this often (MLflow keeps every point).
const METRICS_EVERY: Duration = Duration::from_secs(60);
/// How long a submission waits for its run to be made before it goes without one.
const AT_SUBMIT: Duration = Duration::from_secs(3);
/// Jobs followed at once, oldest first; the others wait in the journal for their turn.
const MAX_FOLLOWED: usize = 10_000;
/// The tag that finds a run made after submit again where the answer that made it was lost.
const KEY_TAG: &str = "gantry.report_key";

/// The tracker, as the API and its loop share it: a daemon without one reports nothing. It
/// keeps one client of the fleet's tracking server (and its connection pool) for both the
/// submissions and the beats.
#[derive(Clone, Default)]
pub struct Tracker {
    client: Arc<Mutex<Option<(MlflowSettings, Mlflow)>>>,
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
        let tracker = Tracker::default();
        (tracker.clone(), run(tracker, handle, stop))
    }

    /// A client of the fleet's tracking server as the latest publication names it (`None`: it
    /// names none): the one kept, made again (its credentials read again) only when a reload
    /// changes `[mlflow]`, or after its files could not be read.
    fn client(&self, handle: &Handle) -> Option<Result<Mlflow, String>> {
        let settings = handle.published.borrow().mlflow.clone();
        settings.tracking_uri.as_ref()?;
        let mut kept = self.client.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, m)) = kept.as_ref() {
            if *at == settings {
                return Some(Ok(m.clone()));
            }
        }
        let made = Mlflow::connect(&settings)?;
        *kept = made.as_ref().ok().map(|m| (settings, m.clone()));
        Some(made)
    }
}

/// Before a submission is queued: where it names an experiment on the fleet's tracking
/// server, its run is made (or joined), its variables written into the job's `envs`, and the
/// submission marked as reported. What to say in the job's events once it has an id.
pub async fn prepare(tracker: &Tracker, handle: &Handle, sub: &mut Submission) -> Option<String> {
    let spec = sub.parsed.as_ref()?;
    let experiment = spec.experiment.clone()?;
    let mlflow = match tracker.client(handle)? {
        Ok(m) => m,
        Err(why) => return Some(format!("is not reported to MLflow: {why}")),
    };
    let uri = mlflow.uri().to_string();
    if spec
        .envs
        .get("MLFLOW_TRACKING_URI")
        .is_some_and(|own| own.trim_end_matches('/') != uri)
    {
        return None;
    }
    let joined = spec.envs.get("MLFLOW_RUN_ID").cloned();
    let name = spec.name.clone().unwrap_or_else(|| "job".to_string());
    let tags = tags_at_submit(sub, spec);
    let mut vars = vec![
        ("MLFLOW_TRACKING_URI", uri.clone()),
        ("MLFLOW_EXPERIMENT_NAME", experiment.clone()),
    ];
    let said = match joined {
        Some(run) => format!("joins MLflow run {run} (its MLFLOW_RUN_ID) at {uri}"),
        None => {
            let unix_ms = (wall_unix() * 1000.0) as i64;
            let made = tokio::time::timeout(
                AT_SUBMIT,
                make_run(&mlflow, &experiment, &name, unix_ms, &tags),
            )
            .await;
            match made {
                Ok(Ok((id, run))) => {
                    vars.push(("MLFLOW_RUN_ID", run.clone()));
                    vars.push(("MLFLOW_EXPERIMENT_ID", id));
                    format!("has MLflow run {run} in experiment `{experiment}` at {uri}")
                }
                Ok(Err(e)) => format!("has no MLflow run yet: {e}; it is made when the server answers (the job runs without MLFLOW_RUN_ID)"),
                Err(_) => format!("has no MLflow run yet: {uri} did not answer within {} s; it is made when it answers (the job runs without MLFLOW_RUN_ID)", AT_SUBMIT.as_secs()),
            }
        }
    };
    write_envs(sub, &vars);
    sub.reported = true;
    Some(said)
}

/// What gantry tags a run with from the submission (the rest it learns as the job runs).
fn tags_at_submit(sub: &Submission, spec: &crate::spec::JobSpec) -> Vec<(String, String)> {
    let mut tags = vec![(
        "gantry.user".to_string(),
        sub.user.clone().unwrap_or_default(),
    )];
    if let Some(team) = sub.team.clone().or_else(|| spec.team.clone()) {
        tags.push(("gantry.team".to_string(), team));
    }
    if let Some(class) = sub.priority.clone().or_else(|| spec.priority.clone()) {
        tags.push(("gantry.class".to_string(), class));
    }
    tags.extend(spec_tags(spec));
    tags
}

/// The tags the spec alone says: its nodes, its GPUs, its git workdir.
fn spec_tags(spec: &crate::spec::JobSpec) -> Vec<(String, String)> {
    let mut tags = vec![
        ("gantry.nodes".to_string(), spec.nodes.to_string()),
        ("gantry.gpu".to_string(), gpus_of(spec)),
    ];
    if let Some(g) = &spec.git_workdir {
        tags.push(("gantry.git_url".to_string(), g.url.clone()));
        if let Some(r) = &g.reference {
            tags.push(("gantry.git_commit".to_string(), r.clone()));
        }
    }
    tags
}

/// The tags of a job as its view has them: for a run made after submit, and a job's first
/// report.
fn tags_of(view: &JobView, spec: &crate::spec::JobSpec) -> Vec<(String, String)> {
    let mut tags = vec![
        ("gantry.job_id".to_string(), view.id.to_string()),
        (
            "gantry.user".to_string(),
            view.user.clone().unwrap_or_default(),
        ),
        ("gantry.team".to_string(), view.team.clone()),
        ("gantry.class".to_string(), view.class.clone()),
    ];
    tags.extend(spec_tags(spec));
    tags
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

/// A run made in `experiment` (made too where it does not exist): (experiment id, run id).
async fn make_run(
    mlflow: &Mlflow,
    experiment: &str,
    name: &str,
    start_ms: i64,
    tags: &[(String, String)],
) -> Result<(String, String), MlflowError> {
    let experiment = mlflow.experiment(experiment).await?;
    let run = mlflow.create_run(&experiment, name, start_ms, tags).await?;
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

/// What the tracker keeps in memory of a job it follows (what is owed is in the journal).
#[derive(Default)]
struct Followed {
    metrics_at: Option<Instant>,
    /// Its GPUs' utilisation as NVML measured it, summed over beats (percent, beats).
    util: (f64, u32),
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

async fn run(tracker: Tracker, handle: Handle, mut stop: watch::Receiver<bool>) {
    let mut followed: HashMap<i64, Followed> = HashMap::new();
    // Why the tracking server did not answer, while it does not (said once per outage).
    let mut down: Option<String> = None;
    // Why the fleet's credentials could not be read (said once until they change).
    let mut unusable: Option<String> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(BEAT) => {}
            _ = async { let _ = stop.wait_for(|&s| s).await; } => break,
        }
        let mlflow = match tracker.client(&handle) {
            None => continue,
            Some(Ok(m)) => {
                unusable = None;
                m
            }
            Some(Err(why)) => {
                if unusable.as_ref() != Some(&why) {
                    say(&handle, None, format!("{why}; nothing is sent to MLflow until the fleet file's [mlflow] is fixed"));
                    unusable = Some(why);
                }
                continue;
            }
        };
        let owed = match handle
            .call(|reply| Request::ExperimentsOwed {
                limit: MAX_FOLLOWED,
                reply,
            })
            .await
        {
            Ok(owed) => owed,
            Err(_) => continue,
        };
        let owed_ids: std::collections::HashSet<i64> = owed.iter().map(|r| r.job).collect();
        followed.retain(|id, _| owed_ids.contains(id));
        let states: HashMap<i64, String> = {
            let p = handle.published.borrow();
            for r in &owed {
                if let Some(u) = util_now(&p, r.job) {
                    let f = followed.entry(r.job).or_default();
                    f.util = (f.util.0 + u, f.util.1 + 1);
                }
            }
            p.snapshot
                .jobs
                .iter()
                .filter(|j| owed_ids.contains(&j.id))
                .map(|j| (j.id, j.state.clone()))
                .collect()
        };
        for r in owed {
            let job = r.job;
            let f = followed.entry(job).or_default();
            match report(&handle, &mlflow, r, f, states.get(&job)).await {
                Ok(()) => {
                    if let Some(why) = down.take() {
                        handle.tell(Request::ExperimentServer {
                            down: None,
                            line: format!("MLflow at {} answers again (it did not: {why}); what waited is sent", mlflow.uri()),
                        });
                    }
                }
                Err(e) => {
                    if down.is_none() {
                        handle.tell(Request::ExperimentServer {
                            down: Some(e.to_string()),
                            line: format!("MLflow at {}: {e}; what is to be sent waits for it in the journal (tried every {} s)", mlflow.uri(), BEAT.as_secs()),
                        });
                        down = Some(e.to_string());
                    }
                    // One beat at a time while it does not answer.
                    break;
                }
            }
        }
    }
}

/// One beat of one job: its run made where it has none, its state and metrics sent where
/// they changed or are due, and what was sent journaled. The server's refusal where it did
/// not take them.
async fn report(
    handle: &Handle,
    mlflow: &Mlflow,
    mut r: ReportRecord,
    f: &mut Followed,
    row_state: Option<&String>,
) -> Result<(), MlflowError> {
    let state = row_state.and_then(|s| JobState::ALL.into_iter().find(|j| j.name() == s));
    let changed = state.is_none() || state != r.sent;
    // Metrics move only while it runs.
    let due = matches!(state, Some(JobState::Running | JobState::Preempting))
        && f.metrics_at.is_none_or(|t| t.elapsed() >= METRICS_EVERY);
    if !changed && !due {
        return Ok(());
    }
    let Ok(view) = handle.call(|reply| Request::Job { id: r.job, reply }).await else {
        // The job is gone from the journal: nothing more to send.
        r.done = true;
        handle.tell(Request::ExperimentSent { report: r });
        return Ok(());
    };
    let (calendar, now) = {
        let p = handle.published.borrow();
        (p.calendar.clone(), p.snapshot.now)
    };
    let unix_ms = |t: f64| (calendar.unix(t) * 1000.0) as i64;
    let spec = crate::spec::parse("spec", view.spec.as_bytes()).ok();
    let own_uri = spec
        .as_ref()
        .and_then(|s| s.envs.get("MLFLOW_TRACKING_URI").cloned());
    if own_uri.is_some_and(|u| u.trim_end_matches('/') != mlflow.uri()) {
        // The fleet's tracking server changed since the job was submitted.
        say(
            handle,
            Some(r.job),
            format!(
                "is reported to MLflow no further: the fleet's tracking server is now {}",
                mlflow.uri()
            ),
        );
        r.done = true;
        handle.tell(Request::ExperimentSent { report: r });
        return Ok(());
    }
    let spec = spec.unwrap_or_default();
    let run = match view.experiment.as_ref().and_then(|e| e.run_id.clone()) {
        Some(run) => run,
        None => {
            let experiment = spec.experiment.clone().unwrap_or_default();
            let key = format!("{}@{}", view.id, unix_ms(view.submitted_at));
            let mut tags = tags_of(&view, &spec);
            tags.push((KEY_TAG.to_string(), key.clone()));
            let experiment_id = mlflow.experiment(&experiment).await?;
            // A run made before an answer was lost (or before a restart) is that run.
            let run = match mlflow.run_tagged(&experiment_id, KEY_TAG, &key).await? {
                Some(run) => run,
                None => {
                    let name = spec.name.clone().unwrap_or_else(|| "job".to_string());
                    mlflow
                        .create_run(&experiment_id, &name, unix_ms(now), &tags)
                        .await?
                }
            };
            say(
                handle,
                Some(r.job),
                format!("has MLflow run {run} in experiment `{experiment}`, made now that the server answers"),
            );
            r.run = Some(run.clone());
            r.experiment_id = Some(experiment_id);
            handle.tell(Request::ExperimentSent { report: r.clone() });
            run
        }
    };
    let first = r.sent.is_none();
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
    let mut tags = if first {
        tags_of(&view, &spec)
    } else {
        Vec::new()
    };
    tags.push(("gantry.state".to_string(), view.state.name().to_string()));
    if let Some(reason) = &view.reason {
        tags.push(("gantry.reason".to_string(), reason.clone()));
    }
    mlflow
        .log_batch(&run, unix_ms(now), &metrics, &tags)
        .await?;
    if first {
        // Once: the spec as submitted (secrets' values never) and what its mounts read.
        let datasets = datasets_of(&spec);
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
                Some(r.job),
                format!("its spec is not in MLflow: the run's artifacts go to {root}, which the server does not keep itself"),
            );
        }
    }
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
    if r.sent != Some(view.state) || view.state.is_final() {
        r.sent = Some(view.state);
        r.done = view.state.is_final();
        handle.tell(Request::ExperimentSent { report: r });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::daemon::state::{GpuMetric, JobGpuMetric};

    fn gpu(uuid: &str, util: f64) -> GpuMetric {
        GpuMetric {
            gpu: 0,
            uuid: uuid.to_string(),
            model_name: "NVIDIA H100 80GB HBM3".to_string(),
            hostname: "h".to_string(),
            node: "n".to_string(),
            pool: "p".to_string(),
            util_pct: util,
            memory_used_bytes: 0,
            memory_total_bytes: 0,
            power_w: None,
            temperature_c: None,
        }
    }

    fn held(job: i64, uuid: &str) -> JobGpuMetric {
        JobGpuMetric {
            job,
            team: "lab".to_string(),
            uuid: uuid.to_string(),
            hostname: "h".to_string(),
            gpu: 0,
            mig_uuid: String::new(),
            gpu_instance_id: None,
        }
    }

    /// `gantry.gpu_util_mean` is over the job's own GPUs only, and absent where none of
    /// them is measured (a simulated or a declared GPU is never reported as 0 %).
    #[test]
    fn a_jobs_utilisation_is_the_mean_of_its_own_measured_gpus() {
        let p = super::super::actor::Published {
            gpus: vec![gpu("a", 90.0), gpu("b", 30.0), gpu("c", 0.0)],
            job_gpus: vec![held(1, "a"), held(1, "b"), held(2, "c"), held(3, "x")],
            ..Default::default()
        };
        assert_eq!(util_now(&p, 1), Some(60.0));
        assert_eq!(util_now(&p, 2), Some(0.0));
        assert_eq!(util_now(&p, 3), None);
        assert_eq!(util_now(&p, 4), None);
    }
}
