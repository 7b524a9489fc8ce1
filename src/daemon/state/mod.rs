//! The daemon's state: the engine, the backends' runners that run what it places (one per
//! pool, driven through `backend::Runner` whatever the backend), the simulated fleet's node
//! lifecycle, the event log, telemetry, counters for `/metrics`, and the snapshot the console
//! and the API read. It does no networking and keeps no wall clock: its owner (the actor)
//! tells it what time it is. Everything the simulated backend makes up is labelled simulated.

mod observe;
mod open;
mod options;
pub use options::{Messages, StateOptions};

mod billing;
mod counters;
pub use counters::{Counters, Histogram, WAIT_BUCKETS};
mod cx;
mod demo;
use demo::Demo;
mod desk;
use cx::{cx, Cx};
mod event_log;
mod export;
pub mod history;
mod runs;
pub use runs::{Entering, STARTING};
pub mod ledger;
mod nodes;
pub use nodes::span;
use nodes::Nodes;
pub use nodes::Retiring;
mod reclaim;
pub mod rows;
mod seen;
mod services;
pub use services::{Measured, ServiceUp, ServiceUpAnswer};
mod telemetry;
mod view;
mod waits;

pub use export::{GpuMetric, JobGpuMetric};
pub use view::{reason_text, JobLogs, WhatIfWork};

use super::engine::{Engine, EngineError, Submission};
use super::journal::{JobId, ReportRecord, TimerRecord};
use crate::api::Snapshot;
use crate::backend::RunEvent;
use crate::config::fleet::FleetConfig;
use crate::scheduler::reclaim::ReclaimPlan;
use std::collections::HashMap;
use std::sync::Arc;

/// One GPU's utilization samples: (seconds, percent), oldest first.
type Samples = Vec<(f64, f64)>;

pub use crate::api::Action;

/// The kept timer that says since when, and why, the experiment tracker does not answer.
pub(crate) const TRACKER_DOWN: &str = "mlflow/down";

pub struct State {
    /// This daemon's exclusive hold on the journal (released when the state is dropped).
    _lock: super::lock::StateLock,
    /// What it was opened with (a reload opens it again over a new fleet file).
    opened: Opened,
    engine: Engine,
    nodes: Nodes,
    /// What NVML measured, and each GPU's history.
    telemetry: telemetry::Telemetry,
    /// Jobs on real backends (this host, SSH hosts) and those hosts.
    runs: runs::Runs,
    /// Budgets and spend.
    billing: billing::Billing,
    /// The clock time last written to the journal (at most a simulated minute behind).
    clock_saved: f64,
    now: f64,
    /// The daemon's clock on the calendar, in the fleet's time zone.
    calendar: crate::daemon::calendar::Calendar,
    /// What the console and `gantry events` show, newest first.
    log: event_log::EventLog,
    /// Shared with every publication and stream that holds it: publishing copies no row.
    snapshot: Arc<Snapshot>,
    teams: Vec<String>,
    /// Priority class names, in the engine's order.
    classes: Vec<String>,
    /// The seeded demo workload, where the daemon runs one.
    demo: Option<Demo>,
    reclaim: reclaim::Reclaim,
    pub counters: Counters,
    /// A host of a `gpu = "auto"` pool found GPUs the fleet is not built with: the state is
    /// to be reopened with them (`reopen_rediscovered`), and this says why.
    rediscovered: Option<Rediscovered>,
    /// Services (`gantry serve up`) and their replicas.
    services: services::Services,
    /// Start estimates for the waiting jobs, made off the actor (none when headless).
    eta: Option<crate::daemon::eta::Forecaster>,
    /// Which finished jobs the snapshot lists (their rows outlive the jobs in the engine).
    listed: rows::Listed,
}

/// GPUs a host of a `gpu = "auto"` pool found, to reopen the state with: why, the pool's name,
/// what was found.
type Rediscovered = (String, String, crate::config::fleet::FoundGpus);

/// The journal, options and fleet file a state was opened with.
struct Opened {
    db: std::path::PathBuf,
    opts: StateOptions,
    cfg: FleetConfig,
}

impl State {
    pub fn now(&self) -> f64 {
        self.now
    }

    /// Dollars spent ever per team and project ("" for none): finished runs, and running
    /// ones so far.
    pub fn project_spend(&self) -> Vec<(String, String, f64)> {
        self.billing.project_spend()
    }

    pub fn calendar(&self) -> &crate::daemon::calendar::Calendar {
        &self.calendar
    }

    pub fn snapshot(&self) -> &Arc<Snapshot> {
        &self.snapshot
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// What the runners call when a run ends (set by the actor that drives this state).
    pub fn wake(&self) -> &crate::backend::Wake {
        &self.opened.opts.wake
    }

    fn log(&mut self, what: String) {
        cx!(self).log(what);
    }

    /// Something went wrong that the operator must hear of, though no request failed (a
    /// scheduling cycle, a backend sample): the event log (journaled when the journal takes
    /// it) and the daemon's message sink.
    pub fn warn(&mut self, what: String) {
        cx!(self).warn(what);
    }

    /// An event that is also journaled (fleet changes: they are not job transitions, which the
    /// journal records by itself).
    fn record(&mut self, kind: &str, what: String) -> Result<(), EngineError> {
        cx!(self).record(kind, what)
    }

    /// What the experiment tracker says: in the job's history, or of the tracking server.
    pub fn experiment_said(&mut self, job: Option<JobId>, line: String) {
        let r = match job {
            Some(id) => self.record_job(id, "experiment", line),
            None => self.record("experiment", line),
        };
        if let Err(e) = r {
            self.warn(format!("experiments: {e}"));
        }
    }

    /// What the experiment tracker owes, oldest job first.
    pub fn experiments_owed(&self, limit: usize) -> Result<Vec<ReportRecord>, EngineError> {
        Ok(self.engine.owed_reports(limit)?)
    }

    /// What the experiment tracker sent of one job.
    pub fn experiment_sent(&mut self, report: &ReportRecord) {
        if let Err(e) = self.engine.report_sent(report) {
            self.warn(format!("experiments: job {}: {e}", report.job));
        }
    }

    /// The tracking server stopped answering (`Some(why)`), or answers again: kept as a timer
    /// (since when, and why) that `gantry job` reads, and said.
    pub fn experiment_server(&mut self, down: Option<String>, line: String) {
        let kept = match down {
            Some(why) => self.engine.set_timer(&TimerRecord {
                key: TRACKER_DOWN.to_string(),
                unix: self.calendar.unix(self.now),
                count: 0,
                why,
            }),
            None => self.engine.clear_timer(TRACKER_DOWN),
        };
        if let Err(e) = kept {
            self.warn(format!("experiments: {e}"));
        }
        self.experiment_said(None, line);
    }

    /// A journaled event about one job (it shows in the job's history).
    fn record_job(&mut self, id: JobId, kind: &str, what: String) -> Result<(), EngineError> {
        cx!(self).record_job(id, kind, what)
    }

    fn submit_demo(&mut self) -> Result<(), EngineError> {
        let Some((name, team, class, spec)) = self.demo.as_mut().map(Demo::next) else {
            return Ok(());
        };
        let sub = Submission {
            file: "demo".to_string(),
            text: spec.into_bytes(),
            team: Some(team.to_string()),
            priority: Some(class.to_string()),
            ..Submission::default()
        };
        let id = self.engine.submit_batch(&[sub], self.now).remove(0)?;
        self.log(format!("job {id} {name} submitted by {team} ({class})"));
        Ok(())
    }

    /// The desk, the services that ask it for their replicas, and what the state was opened
    /// with: disjoint parts of this state, borrowed together.
    fn desk_and_services(&mut self) -> (desk::Desk<'_>, &mut services::Services, &Opened) {
        let desk = desk::Desk {
            cx: cx!(self),
            runs: &mut self.runs,
            counters: &mut self.counters,
            teams: &self.teams,
            classes: &self.classes,
        };
        (desk, &mut self.services, &self.opened)
    }

    /// Starts a service, or rolls it to a new version (its replicas replaced one at a time).
    pub fn service_up(
        &mut self,
        up: ServiceUp,
        caller: &crate::daemon::auth::Caller,
    ) -> Result<ServiceUpAnswer, crate::daemon::refusal::Refusal> {
        let (mut desk, services, opened) = self.desk_and_services();
        let (settings, reserved) = (&opened.cfg.services, &opened.opts.reserved_ports[..]);
        let (answer, changed) = services.up((&mut desk, settings, reserved), up, caller)?;
        if changed {
            self.rebuild_snapshot();
        }
        Ok(answer)
    }

    /// Stops a service: its replicas cancelled, its record forgotten.
    pub fn service_down(
        &mut self,
        name: &str,
        caller: &crate::daemon::auth::Caller,
    ) -> Result<Vec<JobId>, crate::daemon::refusal::Refusal> {
        let (mut desk, services, _) = self.desk_and_services();
        let cancelled = services.down(&mut desk, name, caller)?;
        self.rebuild_snapshot();
        Ok(cancelled)
    }

    /// What the endpoints and probes measured: the autoscalers decide, replicas that failed
    /// are replaced, the counts are kept.
    /// True when jobs were submitted or cancelled (a scheduling cycle is due); else only the
    /// snapshot's services were brought up to date.
    pub fn service_measured(&mut self, measured: Vec<(String, Measured)>) -> bool {
        let (mut desk, services, _) = self.desk_and_services();
        let acted = services.measured(&mut desk, measured);
        if acted {
            self.rebuild_snapshot();
        } else {
            // The services' rows only: the rest of the snapshot is as it was.
            let services = self.service_rows(&self.snapshot.jobs);
            let snapshot = Arc::make_mut(&mut self.snapshot);
            snapshot.services = services;
            snapshot.version += 1;
        }
        acted
    }

    /// What the remote backends reported since the last poll, then hosts past their timeout.
    pub(super) fn poll_hosts(&mut self) -> Result<(), EngineError> {
        let events = self.runs.poll(self.now);
        // What a refresh says of many nodes at once is written in one commit.
        let batch = events.len() > 1;
        if batch {
            self.engine.begin_batch()?;
        }
        let mut done = Ok(());
        for (pool, e) in events {
            done = self.on_host_event(pool, e);
            if done.is_err() {
                break;
            }
        }
        if batch {
            // What was done is kept whether or not an event failed: the state in memory has
            // it.
            self.engine.end_batch()?;
        }
        done?;
        self.runs.top_up_foreign(&mut self.engine);
        let parts = (&mut self.telemetry, &mut self.counters);
        (self.runs).lose_unreachable(&mut cx!(self), &mut self.nodes, parts)
    }

    /// One thing a runner reported, given to the components it concerns: work its users want
    /// placed to the desk, a host answering to the runs with the nodes and the telemetry, a
    /// sample to the telemetry, a spot notice to the nodes; the rest to the runs.
    fn on_host_event(&mut self, pool: usize, e: RunEvent) -> Result<(), EngineError> {
        let e = match e {
            RunEvent::Wanted { work } => return runs::wanted(&mut self.desk(), pool, work),
            RunEvent::Queue { waiting } => {
                self.runs.set_queue(pool, waiting);
                return Ok(());
            }
            e => e,
        };
        let Some((host, node)) = self.runs.host_of(pool, &e) else {
            return Ok(());
        };
        let name = self.node_name(node);
        match e {
            // Work a backend's user gave gantry (a pod) that is gone by the time it is placed
            // — deleted between its run's end and the next start, which a run's end triggers
            // at once — goes as it would have before it was placed.
            RunEvent::Vanished {
                job, token, what, ..
            } => {
                if self.runs.has_run_part(job, &token, node) {
                    self.runs.kill(&mut self.engine, job)?;
                    if self.engine.job(job).is_some_and(|j| !j.state.is_final()) {
                        self.act(job, Action::Cancel, &format!("{what} going away"))?;
                        return self.record_job(
                            job,
                            self.runs.kind(node),
                            format!("cancelled: {what} went away before it could be placed again"),
                        );
                    }
                }
            }
            RunEvent::Up { info, .. } => {
                self.host_up(pool, host, node, info)?;
                if self.runs.cordoned(node).is_some() {
                    self.engine.set_health(
                        crate::model::NodeId(node as u32),
                        crate::model::Health::Cordoned,
                    );
                }
            }
            RunEvent::Sample { found, groups, .. } => {
                // Only the runs the daemon has there count as gantry's; anything else on a
                // GPU is foreign to it.
                let groups: HashMap<u32, JobId> = groups
                    .into_iter()
                    .filter(|(_, job)| self.runs.has_part_on(*job, node))
                    .collect();
                self.observe_node(node, found, &groups)?;
            }
            RunEvent::Notice {
                what,
                gone_in_s: Some(gone_in_s),
                ..
            } => {
                let (nodes, mut cx, mut on) = self.nodes_and();
                nodes.spot_noticed((&mut cx, &mut on), node, gone_in_s, &what)?
            }
            e => {
                let parts = (&mut cx!(self), &self.nodes);
                self.runs.on_event(parts, (pool, host, node), &name, e)?
            }
        }
        Ok(())
    }

    /// A host answered (`Runs::host_up`).
    fn host_up(
        &mut self,
        pool: usize,
        host: usize,
        node: usize,
        info: crate::backend::HostInfo,
    ) -> Result<(), EngineError> {
        let keep_s = self.reclaim.window_s() + 120.0;
        let auto = (self.opened.cfg.pools.get(pool))
            .filter(|p| crate::backend::registry::discovers_gpus(p))
            .map(|p| runs::Rediscovery {
                pool_name: p.name.clone(),
                discovered: self.opened.opts.discovered.get(&p.name),
                pending: &mut self.rediscovered,
            });
        let answering = runs::Answering {
            cx: &mut cx!(self),
            nodes: &mut self.nodes,
            telemetry: &mut self.telemetry,
            keep_s,
            auto,
        };
        self.runs.host_up(answering, pool, host, node, info)
    }

    /// The nodes, and what lives on them and acts through the `Cx`: disjoint parts of this
    /// state, borrowed together.
    fn nodes_and(&mut self) -> (&mut Nodes, Cx<'_>, nodes::OnNodes<'_>) {
        let on = nodes::OnNodes {
            runs: &mut self.runs,
            telemetry: &mut self.telemetry,
            counters: &mut self.counters,
        };
        (&mut self.nodes, cx!(self), on)
    }

    /// What the provisioners say happened up to `until`, in time order, each at its own time
    /// (what the runners report up to then comes first: a run that ends as its node goes
    /// ends on its own terms).
    fn run_node_timers(&mut self, until: f64) -> Result<(), EngineError> {
        let due = self.nodes.due(until);
        // Pools that left the fleet file: what their workers say of the instances they end.
        let retiring = self.opened.opts.retiring.clone();
        retiring.poll(&mut cx!(self), until)?;
        for (at, pool, e) in due {
            let saved = self.now;
            self.now = at.min(saved);
            self.poll_hosts()?;
            let (nodes, mut cx, mut on) = self.nodes_and();
            let done = nodes.node_event((&mut cx, &mut on), pool, e);
            self.now = saved;
            done?;
        }
        Ok(())
    }

    /// The desk jobs are asked of, over this state's parts.
    fn desk(&mut self) -> desk::Desk<'_> {
        self.desk_and_services().0
    }

    /// Admits submissions with one commit; each gets its own answer.
    pub fn submit(&mut self, batch: &[Submission]) -> Vec<Result<JobId, EngineError>> {
        self.desk().submit(batch)
    }

    /// Where a submission would land now, without admitting it.
    pub fn preview(&mut self, s: &Submission) -> Result<super::engine::Preview, EngineError> {
        self.desk().preview(s)
    }

    /// Cancels, holds, releases or preempts job `id`, asked by `who`.
    pub fn act(&mut self, id: JobId, action: Action, who: &str) -> Result<(), EngineError> {
        self.desk().act(id, action, who)
    }

    /// Moves job `id` to `class`, asked by `who` (an operator or not: see
    /// `Engine::set_priority`).
    pub fn set_priority(
        &mut self,
        id: JobId,
        class: &str,
        who: &str,
        operator: bool,
    ) -> Result<(), EngineError> {
        self.desk().set_priority(id, class, who, operator)
    }

    /// One more preemption, of job `id`'s class and team.
    fn count_preemption(&mut self, id: JobId) {
        self.desk().count_preemption(id);
    }

    /// The Unix users the fleet file names a team for (`[[users]] team`): researchers of it
    /// on a socket opened to a group.
    pub fn members(&self) -> HashMap<String, String> {
        self.opened
            .cfg
            .users
            .iter()
            .filter_map(|u| Some((u.name.clone(), u.team.clone()?)))
            .collect()
    }

    pub fn tokens(&mut self) -> Result<Vec<super::journal::TokenRecord>, EngineError> {
        Ok(self.engine.tokens()?)
    }

    pub fn add_token(&mut self, t: &super::journal::TokenRecord) -> Result<(), EngineError> {
        self.engine.add_token(t)?;
        self.log(format!("token {} created ({})", t.label, t.role));
        Ok(())
    }

    pub fn revoke_token(
        &mut self,
        t: &super::journal::TokenRecord,
        at: f64,
        by: &str,
    ) -> Result<(), EngineError> {
        self.engine.revoke_token(&t.hash, at)?;
        self.log(format!(
            "token {} ({}, id {}) revoked by {by}",
            t.label,
            t.role,
            t.id()
        ));
        Ok(())
    }

    /// How to run `argv` (a shell when empty) in node `rank` (default 0) of job `id`, for
    /// `caller` (the job's team's researchers and the operators only); journaled.
    pub fn enter(
        &mut self,
        caller: &crate::daemon::auth::Caller,
        id: JobId,
        rank: Option<usize>,
        tty: bool,
        argv: &[String],
    ) -> Result<Entering, crate::daemon::refusal::Refusal> {
        self.runs.enter(&mut cx!(self), caller, id, rank, tty, argv)
    }

    /// The node named `node`.
    fn node_named(&self, node: &str) -> Result<usize, EngineError> {
        let fleet = self.engine.fleet();
        (fleet.nodes.iter().position(|n| n.name == node))
            .ok_or_else(|| EngineError::Backend(format!("no node named {node}")))
    }

    /// A sample of the real host named `node` as if its agent had sent it, the process groups
    /// of gantry's runs being those the host reported when they started: for tests, which
    /// stand in for NVML (no GPU in CI). The snapshot is rebuilt.
    pub fn observe_sample(
        &mut self,
        node: &str,
        found: crate::backend::Discovery,
    ) -> Result<(), EngineError> {
        let i = self.node_named(node)?;
        let groups = self.runs.groups_on(i);
        self.observe_node(i, found, &groups)?;
        self.rebuild_snapshot();
        Ok(())
    }

    /// The real host named `node` answering with `info`, as if its agent had said hello: for
    /// tests, which stand in for a host's NVML (no GPU in CI). The snapshot is rebuilt.
    pub fn observe_hello(
        &mut self,
        node: &str,
        info: crate::backend::HostInfo,
    ) -> Result<(), EngineError> {
        let i = self.node_named(node)?;
        if !self.runs.is_host(i) {
            return Err(EngineError::Backend(format!("{node} is not a host")));
        }
        let (pool, host) = self.runs.slot(i);
        self.host_up(pool, host, i, info)?;
        self.rebuild_snapshot();
        Ok(())
    }

    /// A sample of node `node`'s GPUs (or why there is none). `groups` maps the process groups
    /// of gantry's runs on that host to their jobs. The caller rebuilds the snapshot.
    pub fn observe_node(
        &mut self,
        node: usize,
        found: crate::backend::Discovery,
        groups: &HashMap<u32, JobId>,
    ) -> Result<(), EngineError> {
        let keep = self.reclaim.window_s() + 120.0;
        let source = self.runs.kind(node);
        (self.telemetry).observe((&mut cx!(self), source, keep), node, found, groups)
    }

    /// The reclaim plan now, remembered by its id so that applying it applies exactly it.
    pub fn show_reclaim(&mut self) -> ReclaimPlan {
        let plan = self.reclaim_plan();
        if !plan.items.is_empty() {
            self.reclaim.remember(&plan);
        }
        plan
    }

    /// Applies the plan `id` that `show_reclaim` returned, and only it (`Reclaim::apply`).
    pub fn apply_reclaim(&mut self, who: &str, id: &str) -> Result<ReclaimPlan, EngineError> {
        let Some(shown) = self.reclaim.take(id) else {
            return Err(EngineError::Stale(format!(
                "reclaim plan `{}` is not one this daemon showed (or it was applied already); get the current plan (gantry reclaim) and apply its id",
                id.escape_debug()
            )));
        };
        let current = self.reclaim_plan();
        let parts = (&mut cx!(self), &mut self.runs, &mut self.counters);
        let plan = reclaim::Reclaim::apply(parts, shown, current, who)?;
        self.rebuild_snapshot();
        Ok(plan)
    }

    pub fn team_names(&self) -> Vec<String> {
        self.teams.clone()
    }

    pub fn has_team(&self, team: &str) -> bool {
        self.teams.iter().any(|t| t == team)
    }

    /// The team a job belongs to (for permission checks).
    pub fn job_team(&self, id: JobId) -> Option<String> {
        self.engine.job(id).map(|j| self.team_name(j.team))
    }

    /// The spec's signal now, SIGKILL when the grace ends; the run's exit requeues the job.
    fn begin_stop(&mut self, id: JobId) {
        self.runs.stop(&self.engine, id, None);
    }

    fn node_name(&self, i: usize) -> String {
        self.engine.fleet().nodes[i].name.clone()
    }

    /// Advances the daemon's clock by `dt` seconds: node events, what the backends report
    /// (exits, stops), arrivals, a cycle. Jobs end (and stop billing) at their own end time
    /// where the backend knows it, however large the step.
    pub fn advance(&mut self, dt: f64) -> Result<(), EngineError> {
        self.now += dt.max(0.0);
        self.run_node_timers(self.now)?;
        self.runs.release_restarts(&mut cx!(self))?;
        self.poll_hosts()?;
        if self.demo.as_mut().is_some_and(Demo::arrives) {
            self.submit_demo()?;
        }
        if self.now - self.clock_saved >= 60.0 {
            self.engine.save_clock(self.now)?;
            self.clock_saved = self.now;
        }
        self.tick()
    }

    /// One scheduling cycle; starts what it places on the simulated backend.
    pub fn tick(&mut self) -> Result<(), EngineError> {
        // Replicas wanted are submitted before the cycle, so it places them now.
        let (mut desk, services, _) = self.desk_and_services();
        services.reconcile_all(&mut desk);
        let report = self.engine.tick(self.now)?;
        self.counters.cycles += 1;
        for (id, why) in &report.skipped {
            self.warn(format!("job {id}: {why}"));
        }
        for id in report.started {
            let Some(j) = self.engine.job(id) else {
                continue;
            };
            let wait = self.now - j.submitted_at;
            let class = self.class_name(j.class);
            let team = self.team_name(j.team);
            self.counters
                .waits
                .entry(class)
                .or_default()
                .entry(team)
                .or_default()
                .observe(&WAIT_BUCKETS, wait);
            let parts = (&mut cx!(self), &self.nodes, &mut self.telemetry);
            self.runs.launch(parts, id)?;
        }
        for id in report.preempting {
            self.begin_stop(id);
            self.count_preemption(id);
            self.log(format!("job {id} preempted by the scheduler"));
        }
        let (nodes, mut cx, mut on) = self.nodes_and();
        nodes.elastic(&mut cx, &mut on)?;
        nodes.consolidate(&mut cx, &mut on)?;
        // Every 10 s of the daemon's clock at most; a headless state (no client reads it)
        // keeps no history.
        if !self.opened.opts.headless && self.telemetry.sample_due(self.now) {
            let readings = self.seen().readings(None);
            (self.telemetry).sample(self.engine.fleet(), self.nodes.lives(), &readings, self.now);
        }
        self.account_budgets()?;
        self.rebuild_snapshot();
        Ok(())
    }

    /// This month's spend per team, alerts at each threshold, and the action at 100%:
    /// `block` refuses the team's new submissions, `demote` moves its new and pending jobs to
    /// the lowest class. A new month lifts both.
    fn account_budgets(&mut self) -> Result<(), EngineError> {
        let accounted = self
            .billing
            .account(&mut self.engine, self.now, &self.calendar)?;
        for what in accounted.said {
            self.log(what);
        }
        for team in accounted.demote {
            let lowest = self.class_name(self.engine.lowest_class());
            let n = billing::demote_pending(&mut self.engine, self.now, team, &lowest)?;
            self.log(format!(
                "budget: team {} over budget: {n} pending job(s) demoted to {lowest}",
                self.team_name(team)
            ));
        }
        Ok(())
    }

    fn team_name(&self, i: usize) -> String {
        named(&self.teams, i)
    }

    fn class_name(&self, i: usize) -> String {
        named(&self.classes, i)
    }
}

/// Team or class `i` of `names` (in the engine's order); `?` for one the fleet no longer has.
fn named(names: &[String], i: usize) -> String {
    names.get(i).cloned().unwrap_or_else(|| "?".to_string())
}
