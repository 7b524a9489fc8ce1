//! What clients read: the snapshot, one job's detail and logs, why a job waits, history,
//! events, the bill, GPU detail and `/metrics`' GPUs — most of it computed by the components
//! (`Seen` for what is read of several).

use super::State;
use super::{billing, history, ledger, rows, seen};
use super::{GpuMetric, JobGpuMetric};
use crate::api::HistoryJob;
use crate::api::{ExperimentRun, JobView};
use crate::api::{JobRow, JobState, PoolRow, Snapshot, TeamRow};
use crate::daemon::engine::{EngineError, Job};
use crate::daemon::journal::EventRecord;
use crate::daemon::journal::JobId;
use crate::model::{GpuRequest, GpuShare, Life};
use crate::scheduler::cycle::PendingReason;
use crate::scheduler::reclaim::ReclaimPlan;
use std::collections::HashMap;

pub use crate::daemon::eta::WhatIfWork;

/// Where a job's logs are (read off the actor by the API).
pub struct JobLogs {
    pub state: JobState,
    /// The job's team: its logs are that team's and the operators'.
    pub team: String,
    /// The values of the job's secrets, masked wherever its logs are served.
    pub secrets: Vec<String>,
    pub sources: Vec<crate::backend::logs::LogSource>,
    /// Why there are no sources.
    pub none: Option<String>,
}

impl State {
    pub fn events(
        &mut self,
        job: Option<JobId>,
        limit: usize,
    ) -> Result<Vec<EventRecord>, EngineError> {
        let events = self.engine.events(job, limit)?;
        Ok(self.dated(events))
    }

    /// A job's runs, with their calendar times.
    pub(super) fn runs_of(&mut self, id: JobId) -> Vec<crate::daemon::journal::RunRecord> {
        let mut runs = self.engine.runs(id).unwrap_or_default();
        for r in &mut runs {
            r.started = self.calendar.rfc3339(r.started_at);
            r.ended_time = r.ended_at.map(|t| self.calendar.rfc3339(t));
        }
        runs
    }

    /// Jobs from the journal as `gantry history` asks for them, with their runs.
    pub fn history(
        &mut self,
        q: &crate::daemon::journal::HistoryQuery,
    ) -> Result<Vec<HistoryJob>, EngineError> {
        let records = self.engine.history(q)?;
        Ok(records
            .into_iter()
            .map(|r| HistoryJob {
                id: r.id,
                runs: self.runs_of(r.id),
                name: r.name,
                user: r.user,
                team: r.team,
                class: r.priority,
                state: r.state,
                submitted: self.calendar.rfc3339(r.submitted_at),
                ended: self.calendar.rfc3339(r.updated_at),
                cost_usd: r.cost,
            })
            .collect())
    }

    /// Events with their calendar times.
    fn dated(&self, mut events: Vec<EventRecord>) -> Vec<EventRecord> {
        for e in &mut events {
            e.time = self.calendar.rfc3339(e.at);
        }
        events
    }

    /// Every pool of the fleet now, in the fleet's pool order: what it pays and holds.
    pub fn fleet_now(&self) -> Vec<ledger::PoolNow> {
        self.nodes.fleet_now(&self.engine)
    }

    /// How many finished jobs the engine keeps in memory (`HISTORY_KEPT` unless set).
    pub fn set_history_kept(&mut self, n: usize) {
        self.engine.set_history_kept(n);
    }

    /// Every job that ended (completed, failed, cancelled), from the journal: the engine keeps
    /// only the newest `HISTORY_KEPT` in memory, and a what-if run counts them all.
    pub fn ended_jobs(&mut self) -> Result<Vec<crate::daemon::journal::JobRecord>, EngineError> {
        let q = crate::daemon::journal::HistoryQuery {
            since: f64::MIN,
            until: f64::MAX,
            team: None,
            user: None,
            states: Vec::new(),
            limit: usize::MAX,
            offset: 0,
        };
        Ok(self.engine.history(&q)?)
    }

    /// What the views read, borrowed.
    pub(super) fn seen(&self) -> seen::Seen<'_> {
        seen::Seen {
            engine: &self.engine,
            nodes: &self.nodes,
            runs: &self.runs,
            telemetry: &self.telemetry,
            built: &self.opened.opts.cluster_built,
            teams: &self.teams,
            now: self.now,
        }
    }

    /// One pool node by node and GPU by GPU: measured on real hosts (NVML), modelled on the
    /// simulated fleet (and labelled so).
    pub fn pool_detail(&self, index: usize) -> Option<crate::api::PoolDetail> {
        self.seen().pool_detail(index)
    }

    /// One node GPU by GPU over a range.
    pub fn node_detail(&self, name: &str, range: history::Range) -> Option<crate::api::NodeDetail> {
        self.seen().node_detail(name, range)
    }

    /// The measured GPUs of real hosts and the running jobs' GPUs there (`/metrics`).
    pub fn gpu_metrics(&self) -> (Vec<GpuMetric>, Vec<JobGpuMetric>) {
        self.seen().gpu_metrics()
    }

    /// The process group a job's first node runs it in, once its host said.
    pub fn process_group(&self, id: JobId) -> Option<u32> {
        self.runs.process_group(id)
    }

    /// Real hosts answering now, and all of them.
    pub fn hosts_up(&self) -> (usize, usize) {
        self.runs.hosts_up()
    }

    /// Jobs on real hosts whose every part the hosts confirmed running.
    pub fn runs_confirmed(&self) -> usize {
        self.runs.runs_confirmed()
    }

    /// Jobs whose GPUs have stayed idle past the window (simulated telemetry, or NVML's for
    /// jobs on this host).
    pub fn reclaim_plan(&self) -> ReclaimPlan {
        self.seen().reclaim_plan(self.reclaim.config())
    }

    /// The cloud pools the journal knows: those in force and those that left.
    pub fn known_cloud_pools(&mut self) -> Result<Vec<crate::api::KnownCloudPool>, EngineError> {
        self.nodes.known_cloud_pools(&mut self.engine)
    }

    /// GPUs held out for foreign work (a Slurm cluster's own jobs), over the fleet.
    pub fn foreign_gpus_held(&self) -> usize {
        self.runs.foreign_gpus_held()
    }

    /// The fleet's `[mlflow]`.
    pub fn mlflow(&self) -> &crate::config::fleet::MlflowSettings {
        &self.opened.cfg.mlflow
    }

    /// Each service whose endpoint asks for a bearer token, with the token's SHA-256: what the
    /// endpoints check (kept out of the snapshot, which every viewer reads).
    pub fn service_tokens(&self) -> HashMap<String, String> {
        self.services.tokens()
    }

    /// The services as the snapshot shows them; `jobs` are the snapshot's rows.
    pub(super) fn service_rows(
        &self,
        jobs: &[std::sync::Arc<crate::api::JobRow>],
    ) -> Vec<crate::api::services::ServiceRow> {
        self.services.rows((&self.engine, &self.runs), jobs)
    }

    /// The bill for `[since, until)`, grouped `by` team, project or job.
    pub fn report(
        &mut self,
        since: f64,
        until: f64,
        by: crate::api::ReportBy,
    ) -> Result<crate::api::Report, EngineError> {
        let simulated = self.snapshot.simulated;
        billing::report(
            &mut self.engine,
            self.now,
            &self.calendar,
            simulated,
            (since, until, by),
        )
    }

    /// A job's run in the experiment tracker, with what the tracker did since submit: the run
    /// it made late, and what is still owed while the server does not answer.
    fn reported(&self, id: JobId, mut e: ExperimentRun, state: JobState) -> ExperimentRun {
        let Ok(Some(r)) = self.engine.report(id) else {
            return e;
        };
        if e.run_id.is_none() {
            e.run_id = r.run.clone();
            e.link(r.experiment_id.as_deref());
        }
        let owed = match (&e.run_id, r.sent) {
            _ if r.done => None,
            (None, _) => Some("its run".to_string()),
            (Some(_), Some(sent)) if sent == state => None,
            (Some(_), _) => Some(format!("its state `{state}` and metrics")),
        };
        // The journal's timers are read only where something is owed.
        let down = || {
            self.engine
                .timers()
                .ok()
                .and_then(|t| t.into_iter().find(|t| t.key == super::TRACKER_DOWN))
        };
        if let Some((owed, down)) = owed.and_then(|o| Some((o, down()?))) {
            e.waiting = Some(format!(
                "not in MLflow yet: {owed}; {} has not answered since {} ({}); sent when it answers",
                e.tracking_uri.as_deref().unwrap_or("the tracking server"),
                crate::daemon::auth::rfc3339(down.unix),
                down.why
            ));
        }
        e
    }

    /// Everything about one job.
    pub fn job_detail(&mut self, id: JobId) -> Result<JobView, EngineError> {
        let events = self.engine.events(Some(id), 100)?;
        let events = self.dated(events);
        let record = self.engine.job_record(id)?.ok_or(EngineError::NoJob(id))?;
        let runs = self.runs_of(id);
        // A job that ended says why: its last move's reason ("node gpu-b (rank 1) exited with
        // code 3: the whole gang stopped"), not only its state.
        let ended = record.state.is_final().then(|| {
            events
                .iter()
                .rev()
                .find(|e| e.kind == record.state.name())
                .and_then(|e| e.detail.split_once(": ").map(|(_, why)| why.to_string()))
        });
        // `secrets` values are never shown, to anyone (the API hides `envs` from others).
        let spec = crate::spec::redact::redact(&record.spec, true);
        let written = crate::spec::parse("journal", record.spec.as_bytes()).ok();
        let experiment = written
            .as_ref()
            .and_then(crate::api::ExperimentRun::of)
            .map(|e| self.reported(id, e, record.state));
        // Read by the API, off the actor (a remote host may be slow to answer).
        let log_tail = Vec::new();
        let Some(j) = self.engine.job(id) else {
            // Finished long enough ago to be only in the journal (or no longer resolvable).
            let (pipeline, after) = written.map_or((None, None), |s| (s.pipeline, s.after));
            return Ok(JobView {
                id,
                name: record.name,
                user: record.user,
                team: record.team,
                class: record.priority,
                state: record.state,
                submitted_at: record.submitted_at,
                // Its last run's start (a finished job has no live one).
                started_at: runs.last().map(|r| r.started_at),
                submitted: self.calendar.rfc3339(record.submitted_at),
                started: runs.last().map(|r| r.started.clone()),
                borrowed: false,
                placement: Vec::new(),
                dollars_per_hour: 0.0,
                cost_usd: record.cost,
                explanation: None,
                reason: ended.flatten(),
                spec,
                pipeline,
                after,
                events,
                runs,
                log_tail,
                experiment,
                eta: None,
            });
        };
        let last_start = runs.last().filter(|_| j.state.is_final());
        let fleet = self.engine.fleet();
        let placement = j.placement.as_ref().map_or(Vec::new(), |p| {
            p.nodes
                .iter()
                .map(|n| {
                    let gpus: Vec<String> = n
                        .gpus
                        .iter()
                        .map(|g| match g.share {
                            GpuShare::Mig { start, .. } => format!("{}@slice{start}", g.gpu),
                            GpuShare::Milli(m) if m < crate::model::MILLI_PER_GPU => {
                                format!("{}({:.2})", g.gpu, f64::from(m) / 1000.0)
                            }
                            _ => g.gpu.to_string(),
                        })
                        .collect();
                    let name = &fleet.node(n.node).name;
                    if gpus.is_empty() {
                        // A CPU-only part: what it holds there instead.
                        format!(
                            "{name} ({} CPU{})",
                            f64::from(n.cpu_milli) / 1000.0,
                            if n.mem_mib > 0 {
                                format!(", {} MiB", n.mem_mib)
                            } else {
                                String::new()
                            }
                        )
                    } else {
                        format!("{name} gpus {}", gpus.join(","))
                    }
                })
                .collect()
        });
        Ok(JobView {
            id,
            name: j.name.clone(),
            user: j.user.clone(),
            team: self.team_name(j.team),
            class: self.class_name(j.class),
            state: j.state,
            submitted_at: j.submitted_at,
            // Running: this run's start; ended: its last run's.
            started_at: j.started_at.or(last_start.map(|r| r.started_at)),
            submitted: self.calendar.rfc3339(j.submitted_at),
            started: j
                .started_at
                .map(|t| self.calendar.rfc3339(t))
                .or(last_start.map(|r| r.started.clone())),
            borrowed: j.borrowed,
            placement,
            dollars_per_hour: j.placement.as_ref().map_or(0.0, |p| p.price_per_hour),
            cost_usd: j.cost_at(self.now),
            // `explain` and `job` (not the queue's rows) say what is being bought for it and
            // what was passed over.
            reason: self
                .why_waiting(j)
                .map(|why| {
                    let buying = j
                        .explanation
                        .as_ref()
                        .is_some_and(|e| e.reason.waits_for_capacity());
                    if buying {
                        why + &self.nodes.buying_now(self.engine.fleet(), self.now)
                    } else {
                        why
                    }
                })
                .or(ended.flatten()),
            explanation: j.explanation.as_deref().cloned(),
            spec,
            pipeline: j.spec.pipeline.clone(),
            after: j.spec.after,
            events,
            runs,
            log_tail,
            experiment,
            eta: self.eta_of(id, j.state),
        })
    }

    /// Where job `id`'s logs are, one source per node it ran on (rank order), and its state;
    /// no sources, with why, when it has none.
    pub fn job_logs(&mut self, id: JobId) -> Result<JobLogs, EngineError> {
        let (state, team, secrets) = match self.engine.job(id) {
            Some(j) => (
                j.state,
                self.engine.teams()[j.team].name.clone(),
                j.spec.secrets.values().cloned().collect(),
            ),
            None => {
                let r = self.engine.job_record(id)?.ok_or(EngineError::NoJob(id))?;
                let secrets = crate::spec::parse("journal", r.spec.as_bytes())
                    .map(|s| s.secrets.into_values().collect())
                    .unwrap_or_default();
                (r.state, r.team, secrets)
            }
        };
        // Where it ran, as this daemon saw it (a follower asks every second: no journal read
        // then); else (it ended before this daemon started) as the journal's last run says,
        // by node name.
        let live = self.runs.log_sources(self.engine.fleet(), id);
        let last_run = match live {
            Some(_) => Vec::new(),
            None => self
                .engine
                .runs(id)
                .unwrap_or_default()
                .pop()
                .map(|r| r.nodes)
                .unwrap_or_default(),
        };
        let from_journal = || {
            let fleet = self.engine.fleet();
            let nodes: Vec<usize> = last_run
                .iter()
                .filter_map(|name| fleet.nodes.iter().position(|n| &n.name == name))
                .collect();
            (!nodes.is_empty())
                .then(|| self.runs.sources_on(self.engine.fleet(), nodes))
                .flatten()
        };
        if let Some(sources) = live.or_else(from_journal) {
            return Ok(JobLogs {
                state,
                team,
                secrets,
                sources,
                none: None,
            });
        }
        let none = if state == JobState::Pending || state == JobState::Held {
            format!("job {id} has not started: no logs yet")
        } else if last_run.is_empty() {
            format!("job {id} has no logs: it never ran")
        } else if self.simulated_nodes(&last_run) {
            format!(
                "job {id} has no logs: it ran on the simulated fleet ({}), which runs no processes",
                last_run.join(",")
            )
        } else {
            format!(
                "job {id} has no logs here: it last ran on {}, which this fleet no longer has (its logs stay on those hosts)",
                last_run.join(",")
            )
        };
        Ok(JobLogs {
            state,
            team,
            secrets,
            sources: Vec::new(),
            none: Some(none),
        })
    }

    /// Whether every node of these names is of a simulated pool.
    fn simulated_nodes(&self, names: &[String]) -> bool {
        let fleet = self.engine.fleet();
        names.iter().all(|name| {
            fleet
                .nodes
                .iter()
                .position(|n| &n.name == name)
                .is_some_and(|i| self.runs.is_simulated(fleet.nodes[i].pool.index()))
        })
    }

    /// Why a pending job waits: the cycle's reason, and — when it waits for capacity and its
    /// class has patience left (`[scale] burst_after`) — when capacity will be bought for it.
    pub(super) fn why_waiting(&self, j: &crate::daemon::engine::Job) -> Option<String> {
        self.why_waiting_in(j, &mut HashMap::new())
    }

    /// `why_waiting`, with where each request shape finds no room kept in `rooms` (a snapshot
    /// asks it for every waiting job: the fleet is looked through once per shape, not per job).
    pub(super) fn why_waiting_in(
        &self,
        j: &crate::daemon::engine::Job,
        rooms: &mut HashMap<String, Option<String>>,
    ) -> Option<String> {
        let e = j.explanation.as_ref()?;
        // A time in a row of a table: short (HH:MM within a day, else the date too).
        let at = |t: f64| {
            let fmt = if t - self.now < 86_400.0 {
                "%H:%M"
            } else {
                "%b %d %H:%M"
            };
            self.calendar.datetime(t).format(fmt).to_string()
        };
        let mut text = reason_text(&e.reason, &at);
        let for_capacity = e.reason.waits_for_capacity();
        // Which pools it may use have no room, and why (the backends' words).
        if let PendingReason::NoCapacity {
            why: crate::scheduler::Unplaceable::NoCapacity { .. },
            ..
        } = &e.reason
        {
            let shape = format!("{:?}", j.request);
            let where_ = rooms
                .entry(shape)
                .or_insert_with(|| self.seen().where_no_room(j))
                .clone();
            if let Some(where_) = where_ {
                text.push_str(" — ");
                text.push_str(&where_);
            }
        }
        let patience = self.nodes.patience_s(j.class);
        let left = patience - (self.now - j.submitted_at);
        if let Some((node, _, _)) = self.engine.pins().find(|(_, w, _)| *w == j.id) {
            text.push_str(&format!(
                "; {} is being emptied for it (defragmentation)",
                self.engine.fleet().node(node).name
            ));
        } else if for_capacity && left > 0.0 {
            text.push_str(&format!(
                "; {} jobs wait {:.0} min for paid capacity before any is bought ({:.0} min left)",
                self.class_name(j.class),
                patience / 60.0,
                (left / 60.0).ceil()
            ));
        }
        Some(text)
    }

    /// Builds the snapshot afresh; readers holding the previous one keep it. A headless state
    /// (no client reads it) builds none.
    pub(super) fn rebuild_snapshot(&mut self) {
        if self.opened.opts.headless {
            return;
        }
        self.forecast_if_due();
        // The finished jobs' rows are shared from the old snapshot into the new one.
        let previous = std::mem::take(&mut self.snapshot);
        let version = previous.version + 1;
        let kept = rows::finished_rows_of(&previous);
        drop(previous);
        let mut listed = std::mem::take(&mut self.listed);
        self.snapshot = std::sync::Arc::new(self.build_snapshot(version, kept, &mut listed));
        self.listed = listed;
        // Every job that finished has its row now: the engine may let the oldest go.
        self.engine.forget_old();
    }

    /// Hands a copy of the present to the estimates' worker when it is idle and the last
    /// estimates are `eta::EVERY_S` old.
    fn forecast_if_due(&mut self) {
        let now = self.now;
        let Some(f) = self.eta.as_mut() else { return };
        if !f.due(now) {
            return;
        }
        let waiting = self
            .engine
            .live_jobs()
            .any(|j| matches!(j.state, JobState::Pending | JobState::Held));
        if waiting {
            let copy = self.engine.present(now, self.nodes.coming(now));
            f.send(now, copy, self.calendar.clone());
        }
    }

    /// What previewing `action` on jobs `ids` together (or moving one to `class`) needs,
    /// copied: the present, the changes, the calendar and the names. Run off the actor
    /// (`eta::what_if`). Refused where the action would be, for any of them.
    pub fn what_if_work(
        &self,
        ids: &[JobId],
        action: super::Action,
        class: Option<&str>,
        operator: bool,
    ) -> Result<WhatIfWork, EngineError> {
        use crate::scheduler::forecast::Change;
        let to = match (class, action) {
            (Some(_), _) => None,
            (None, super::Action::Hold) => Some(JobState::Held),
            (None, super::Action::Release) => Some(JobState::Pending),
            (None, super::Action::Cancel) => Some(JobState::Cancelled),
            (None, super::Action::Preempt) => Some(JobState::Preempting),
        };
        let mut changes = Vec::with_capacity(ids.len());
        for &id in ids {
            self.engine.check_change(id, to, class, operator)?;
            let job = id as u64;
            changes.push(match class {
                Some(c) => Change::Class(job, self.engine.class_named(c)?),
                None => match action {
                    super::Action::Hold => Change::Hold(job),
                    super::Action::Release => Change::Release(job),
                    super::Action::Cancel => Change::Cancel(job),
                    super::Action::Preempt => Change::Preempt(job),
                },
            });
        }
        let said = match class {
            Some(c) => format!("prio {c}"),
            None => action.name().to_string(),
        };
        let copy = self.engine.present(self.now, self.nodes.coming(self.now));
        Ok(self.work(copy, changes, said, ids, None))
    }

    /// Where a submission would land now and what previewing it needs (submitted now, run
    /// forward off the actor): refused as the submission would be.
    pub fn preview_with_work(
        &mut self,
        s: &super::Submission,
    ) -> Result<(crate::api::Preview, WhatIfWork), EngineError> {
        use crate::scheduler::forecast::Change;
        let preview = self.preview(s)?;
        let new = self.engine.as_submitted(s, self.now)?;
        let id = new.pending.id as JobId;
        let mut copy = self.engine.present(self.now, self.nodes.coming(self.now));
        copy.left.insert(new.pending.id, new.left);
        let change = Change::Submit(Box::new(new.pending));
        let work = self.work(copy, vec![change], "submit".to_string(), &[id], new.name);
        Ok((preview, work))
    }

    /// A preview's work: the copy, the change, and the names it is said in (`new`: the name of
    /// a job being submitted, which no live job has yet).
    fn work(
        &self,
        copy: crate::daemon::engine::Copy,
        changes: Vec<crate::scheduler::forecast::Change>,
        action: String,
        jobs: &[JobId],
        new: Option<String>,
    ) -> WhatIfWork {
        let mut names: HashMap<JobId, String> = self
            .engine
            .jobs()
            .filter(|j| !j.state.is_final())
            .map(|j| (j.id, j.name.clone().unwrap_or_default()))
            .collect();
        for c in &changes {
            if let crate::scheduler::forecast::Change::Submit(j) = c {
                let name = new.clone().unwrap_or_else(|| "(this job)".to_string());
                names.insert(j.id as JobId, name);
            }
        }
        WhatIfWork {
            copy,
            changes,
            action,
            jobs: jobs.to_vec(),
            calendar: self.calendar.clone(),
            names,
            teams: self.teams.clone(),
        }
    }

    /// Makes no start estimates (and shows none): for tests whose screens must not depend on
    /// when the estimates' worker answers.
    pub fn estimates_off(&mut self) {
        self.eta = None;
        self.rebuild_snapshot();
    }

    /// A waiting job's latest start estimate.
    pub(super) fn eta_of(&self, id: JobId, state: JobState) -> Option<crate::api::Eta> {
        if !matches!(state, JobState::Pending | JobState::Held) {
            return None;
        }
        self.eta.as_ref()?.latest().by_job.get(&id).cloned()
    }

    /// One job's row as it is now.
    fn job_row(
        &self,
        j: &Job,
        etas: Option<&crate::daemon::eta::Estimates>,
        rooms: &mut HashMap<String, Option<String>>,
    ) -> JobRow {
        let fleet = self.engine.fleet();
        let shape = j.shape();
        let gpus = match (shape.gpu, shape.nodes) {
            (GpuRequest::None, _) => "cpu".to_string(),
            (GpuRequest::Whole(n), 1) => format!("{n}"),
            (GpuRequest::Whole(n), k) => format!("{k}×{n}"),
            (GpuRequest::Fraction(m), _) => format!("{:.2}", f64::from(m) / 1000.0),
            (GpuRequest::Mig(p), _) => p.to_string(),
        };
        let (detail, position) = match (&j.placement, &j.explanation) {
            (Some(p), _) => {
                let node = &fleet.node(p.nodes[0].node).name;
                let share = p.nodes[0]
                    .gpus
                    .first()
                    .map_or(String::new(), |g| match g.share {
                        GpuShare::Mig { start, .. } => {
                            format!(" gpu{} slice@{start}", g.gpu)
                        }
                        _ => String::new(),
                    });
                let more = if p.nodes.len() > 1 {
                    format!(" +{} nodes", p.nodes.len() - 1)
                } else {
                    String::new()
                };
                // A part its backend's scheduler holds back says why.
                let waits = self
                    .runs
                    .held_back(j.id)
                    .map_or(String::new(), |w| format!(" · held back: {w}"));
                // A node of it that cannot be reached says so the moment it is seen
                // (not only when it is lost, minutes later).
                let unreachable = p
                    .nodes
                    .iter()
                    .find_map(|g| {
                        let i = g.node.index();
                        let why = self.runs.unreachable(i)?;
                        (self.nodes.life(i) != Life::Failed)
                            .then(|| format!(" · UNREACHABLE: {} ({why})", fleet.node(g.node).name))
                    })
                    .unwrap_or_default();
                (
                    format!(
                        "{node}{share}{more} ${:.2}/h{waits}{unreachable}",
                        p.price_per_hour
                    ),
                    None,
                )
            }
            (None, Some(e)) => (
                self.why_waiting_in(j, rooms).unwrap_or_default(),
                Some(e.position),
            ),
            (None, None) => (String::new(), None),
        };
        let since = j.started_at.unwrap_or(j.submitted_at);
        // Restarted after its own failures: said beside where it runs or why it waits.
        let restarts = self.runs.restarts(j.id);
        let detail = match restarts {
            0 => detail,
            n if detail.is_empty() => format!("restart {n}"),
            n => format!("{detail} · restart {n}"),
        };
        JobRow {
            id: j.id,
            name: j.name.clone().unwrap_or_default(),
            user: j.user.clone(),
            team: self.team_name(j.team),
            class: self.class_name(j.class),
            state: j.state.to_string(),
            gpus,
            since_s: since,
            submitted_s: Some(j.submitted_at),
            position,
            detail,
            cost_usd: j.cost,
            dollars_per_hour: j.placement.as_ref().map_or(0.0, |p| p.price_per_hour),
            restarts,
            experiment: j.spec.experiment.clone(),
            eta: etas
                .as_ref()
                .filter(|_| matches!(j.state, JobState::Pending | JobState::Held))
                .and_then(|e| e.by_job.get(&j.id))
                .map(|e| Box::new(e.clone())),
        }
    }

    fn build_snapshot(
        &self,
        version: u64,
        kept: Vec<std::sync::Arc<JobRow>>,
        listed: &mut rows::Listed,
    ) -> Snapshot {
        let fleet = self.engine.fleet();
        let mut pools: Vec<PoolRow> = fleet
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| PoolRow {
                path: fleet.pool_path(crate::model::PoolId(i as u32)),
                short: format!(
                    "{}/{}",
                    fleet.regions[fleet.zones[p.zone.index()].region as usize].provider,
                    p.name
                ),
                instance: p.instance_type.clone(),
                model: p
                    .model
                    .map_or("-".to_string(), |m| fleet.model(m).name.clone()),
                capacity: p.capacity.to_string(),
                dollars_per_hour: p.price_per_hour,
                ..PoolRow::default()
            })
            .collect();
        // Only nodes that exist count; provisioning ones are paid but not yet usable.
        let mut paid = vec![0usize; pools.len()];
        for (i, (n, life)) in fleet.nodes.iter().zip(self.nodes.lives()).enumerate() {
            let row = &mut pools[n.pool.index()];
            match life {
                Life::Absent => continue,
                Life::Provisioning => row.provisioning += 1,
                // A real host that stopped answering is unreachable, not in repair.
                Life::Failed if self.runs.unreachable(i).is_some() => row.unreachable += 1,
                Life::Failed => row.down += 1,
                Life::Up | Life::Noticed | Life::Draining => {
                    if self.runs.unreachable(i).is_some() {
                        row.unreachable += 1;
                    }
                    row.nodes += 1;
                    row.gpus += n.gpus.len();
                    row.gpus_busy += n.gpus.iter().filter(|g| !g.is_idle()).count();
                }
            }
            paid[n.pool.index()] += 1;
        }
        for (i, (row, of_pool)) in pools.iter_mut().zip(self.nodes.nodes_by_pool()).enumerate() {
            // A pool built from a cluster that could not be read: why it has no nodes.
            let why_empty =
                (self.opened.opts.cluster_built).why_empty(&self.engine.fleet().pools[i].name);
            row.notes =
                self.nodes
                    .pool_notes((self.engine.fleet(), self.now), i, &of_pool, why_empty);
        }
        let gpus_total: usize = pools.iter().map(|p| p.gpus).sum();
        let gpus_busy: usize = pools.iter().map(|p| p.gpus_busy).sum();
        let dollars: f64 = pools
            .iter()
            .zip(&paid)
            .map(|(p, n)| p.dollars_per_hour * *n as f64)
            .sum();
        // The same GPUs as the idle-by-cause table (booting and in-repair ones included), so
        // the header and the table under it agree.
        let idle_by_cause = self.seen().idle_by_cause();
        // An empty f64 sum is -0.0, which prints as "$-0.00/h": adding 0.0 makes it +0.0.
        let idle_dollars: f64 = idle_by_cause
            .iter()
            .map(|c| c.dollars_per_hour)
            .sum::<f64>()
            + 0.0;
        let mut rooms = HashMap::new();
        let etas = self.eta.as_ref().map(|f| f.latest());
        let etas = etas.as_deref();
        let jobs = rows::job_rows((&self.engine, self.now), kept, listed, |j| {
            self.job_row(j, etas, &mut rooms)
        });
        let mut queue_by_class: Vec<(String, usize)> =
            self.classes.iter().map(|c| (c.clone(), 0)).collect();
        for j in self
            .engine
            .live_jobs()
            .filter(|j| j.state == JobState::Pending)
        {
            if let Some(q) = queue_by_class
                .iter_mut()
                .find(|(c, _)| *c == self.class_name(j.class))
            {
                q.1 += 1;
            }
        }
        let mut teams: Vec<TeamRow> = self.billing.team_rows();
        for j in self.engine.live_jobs() {
            let Some(row) = teams.get_mut(j.team) else {
                continue;
            };
            match j.state {
                JobState::Running | JobState::Preempting => {
                    row.running += 1;
                    row.used_gpus += j.request.total_gpu_milli() as f64 / 1000.0;
                    row.burn_per_hour += j.placement.as_ref().map_or(0.0, |p| p.price_per_hour);
                }
                JobState::Pending => row.pending += 1,
                _ => {}
            }
        }
        for (row, u) in teams.iter_mut().zip(self.engine.usage()) {
            row.borrowed_gpus = row
                .guaranteed
                .map_or(0.0, |g| (row.used_gpus - f64::from(g)).max(0.0));
            row.usage_gpu_hours = u / 3600.0;
        }
        // The cycle's order of teams within a class: usage over weight, least first.
        let share = |r: &TeamRow| r.usage_gpu_hours / r.weight.max(1e-9);
        let mut ranked: Vec<usize> = (0..teams.len()).collect();
        ranked.sort_by(|&a, &b| share(&teams[a]).total_cmp(&share(&teams[b])));
        for (rank, i) in ranked.into_iter().enumerate() {
            teams[i].fair_share_rank = rank + 1;
        }
        // What each team lends: the others' borrowing in its cohort, spread over the members'
        // idle guarantees.
        let idle: Vec<f64> = teams
            .iter()
            .map(|r| {
                r.guaranteed
                    .map_or(0.0, |g| (f64::from(g) - r.used_gpus).max(0.0))
            })
            .collect();
        for i in 0..teams.len() {
            if teams[i].cohort.is_empty() || idle[i] == 0.0 {
                continue;
            }
            let same = |j: usize| teams[j].cohort == teams[i].cohort;
            let borrowed: f64 = (0..teams.len())
                .filter(|&j| j != i && same(j))
                .map(|j| teams[j].borrowed_gpus)
                .sum();
            let pool: f64 = (0..teams.len()).filter(|&j| same(j)).map(|j| idle[j]).sum();
            teams[i].lent_gpus = (borrowed * idle[i] / pool.max(1e-9)).min(idle[i]);
        }
        Snapshot {
            version,
            events_total: self.log.total(),
            teams,
            simulated: self.runs.any_simulated(),
            // The first real host's NVML status (this host's, in a fleet with a local pool).
            host: self
                .runs
                .first_node()
                .and_then(|n| self.telemetry.of(n))
                .map(|t| t.status(self.now)),
            now: self.now,
            calendar: {
                let month = self.calendar.month(self.now);
                crate::api::CalendarNow {
                    time: self.calendar.rfc3339(self.now),
                    time_zone: self.calendar.zone().name().to_string(),
                    budget_month: month.label,
                    budget_month_ends: self.calendar.rfc3339(month.end),
                }
            },
            pools,
            gpus_total,
            gpus_busy,
            dollars_per_hour: dollars,
            idle_dollars_per_hour: idle_dollars,
            idle_by_cause,
            services: self.service_rows(&jobs),
            jobs,
            queue_by_class,
            events: self.log.newest(50),
            mlflow: self.opened.cfg.mlflow.tracking_uri.clone(),
        }
    }
}

/// The queue order of states: what waits first (in queue position), then what is held, then
/// what runs, then what ended — the order `gantry jobs` and the console list.
pub(super) fn state_order(s: &str) -> u8 {
    match s {
        "pending" => 0,
        "held" => 1,
        "running" | "preempting" => 2,
        _ => 3,
    }
}

/// One line for why a job waits; `at` writes a time of the daemon's clock as the calendar's.
pub fn reason_text(r: &PendingReason, at: &dyn Fn(f64) -> String) -> String {
    match r {
        PendingReason::Held => "held".to_string(),
        PendingReason::After { job } => format!("waits for job {job} to complete (pipeline)"),
        PendingReason::UserLimit { user, resource, used, wants, limit, set_by } => {
            let n = |v: f64| if resource == "$/h" { format!("${v:.2}/h") } else { format!("{v:.1} GPU") };
            format!(
                "user limit: {user}'s running jobs hold {}, this job may take {} more, over the limit of {} ({set_by})",
                n(*used),
                n(*wants),
                n(*limit)
            )
        }
        PendingReason::Quota { wants, used, guaranteed, borrow_limit, lendable } => format!(
            "quota: wants {:.1} GPU, team uses {:.1}/{:.0} guaranteed, may borrow {:.0}, lendable idle {:.1}",
            *wants as f64 / 1000.0,
            *used as f64 / 1000.0,
            *guaranteed as f64 / 1000.0,
            *borrow_limit as f64 / 1000.0,
            *lendable as f64 / 1000.0
        ),
        PendingReason::NoCapacity { why, reservation } => {
            let behind = reservation.map_or(String::new(), |(j, _)| format!(" (behind job {j}'s reservation)"));
            format!("{why}{behind}")
        }
        PendingReason::AwaitingPreemption { victims } => format!("preempting {} job(s) to start", victims.len()),
        PendingReason::Reserved { start_at } => format!("reserved: starts by {}", at(*start_at)),
    }
}
