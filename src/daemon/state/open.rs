//! Opening the state: the lock, the journal, the fleet at its elastic maximum, the real
//! backends' runners (whose hosts re-adopt the runs they still have when they answer), and the
//! warnings a changed fleet file gives.

use super::cx::cx;
use super::{Counters, Messages, Nodes, Opened, State, StateOptions};
use crate::api::EVENTS_KEPT;
use crate::config::fleet::{classes_of, fleet_at_max, teams_of, FleetConfig};
use crate::daemon::calendar::Calendar;
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::journal::JobId;
use crate::daemon::lives::start_lives;
use crate::model::{Life, NodeId};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

impl State {
    /// Opens the journal at `db` over the fleet of `cfg`. The clock resumes from the latest
    /// time the journal has seen; jobs that were running are requeued (the simulated backend
    /// keeps nothing across a restart), with an event each.
    pub fn open(db: &Path, cfg: &FleetConfig, opts: &StateOptions) -> Result<State, EngineError> {
        // One daemon per journal, before anything is read or written.
        let lock = crate::daemon::lock::StateLock::acquire(db).map_err(EngineError::Locked)?;
        // `gpu = "auto"` pools not discovered by the caller are discovered here.
        // The fleet file as written (a reload compares with it; auto pools stay auto there).
        let file_cfg = cfg;
        let (discovered, _) = crate::backend::discover_auto(cfg);
        // `gpu = "auto"` Kubernetes pools: built from the nodes they select, at every open
        // (so a reload sees the nodes added since).
        let (mut discovered, said, cluster_built) = crate::backend::discover::expand(
            &discovered,
            &opts.cluster_built,
            opts.cluster_built_fresh,
        );
        let opts = &StateOptions {
            cluster_built,
            cluster_built_fresh: false,
            ..opts.clone()
        };
        // `gpu = "auto"` SSH pools: as their hosts' NVML said, CPU-only until one has.
        for p in discovered
            .pools
            .iter_mut()
            .filter(|p| crate::backend::registry::discovers_gpus(p))
        {
            p.resolve_auto(opts.discovered.get(&p.name));
        }
        let cfg = &discovered;
        let base = db.parent().unwrap_or_else(|| Path::new("."));
        let opening = crate::backend::Opening {
            local: crate::backend::agent::AgentDirs {
                runs: base.join("runs"),
                logs: opts.log_dir.clone().unwrap_or_else(|| base.join("logs")),
            },
            sampling: opts.sampling,
            seed: opts.seed,
            failures_per_node_hour: opts.failures_per_node_hour,
            retention: cfg.logs.retention(),
            wake: opts.wake.clone(),
            work: opts.work.clone(),
        };
        let (resume, orphans, remote_records, calendar) = {
            let mut store = crate::daemon::journal::Store::open(db)?;
            let orphans = super::runs::legacy::migrate_local_runs(&mut store, &opening.local)?;
            let resume = store.last_time()?;
            // This start pins the daemon's clock to the wall clock (when the calendar moved on).
            let mut anchors = store.calendar_anchors()?;
            let wall = opts
                .wall_clock
                .unwrap_or_else(crate::daemon::auth::unix_now);
            if let Some(a) = Calendar::start(&anchors, resume, wall) {
                store.add_calendar_anchor(a)?;
                anchors.push(a);
            }
            // Checked with the fleet file; a zone this build does not know is UTC.
            let zone = cfg.calendar.zone().unwrap_or(chrono_tz::Tz::UTC);
            let calendar = Calendar::new(anchors, zone);
            (resume, orphans, store.remote_runs()?, calendar)
        };
        let teams = teams_of(cfg);
        let names = teams.iter().map(|t| t.name.clone()).collect();
        let classes = classes_of(cfg);
        let class_names = classes.iter().map(|c| c.name.clone()).collect();
        // Every pool at its elastic maximum, so node ids never change; nodes not bought yet
        // are down until an elastic decision provisions them.
        let mut fleet = fleet_at_max(cfg);
        let hosts = super::runs::Runs::open(cfg, &fleet, &opening)?;
        // Jobs handed to real hosts are expected there until the hosts say otherwise: on the
        // nodes of those names (ids move when hosts are added to or removed from the file).
        let mut adopted = BTreeMap::new();
        for r in &remote_records {
            let Ok(mut p) = serde_json::from_str::<crate::model::Placement>(&r.placement) else {
                continue;
            };
            if let Some(names) = &r.nodes {
                let now: Option<Vec<NodeId>> = names
                    .iter()
                    .map(|n| {
                        let i = fleet.nodes.iter().position(|x| x.name == *n)?;
                        Some(NodeId(i as u32))
                    })
                    .collect();
                let Some(now) = now.filter(|v| v.len() == p.nodes.len()) else {
                    continue; // a node of it left the fleet file: requeued
                };
                for (g, id) in p.nodes.iter_mut().zip(now) {
                    g.node = id;
                }
            }
            adopted.insert(r.job, (p, r.started_at));
        }
        let mut lives = start_lives(&fleet, &cfg.pools);
        let provisioners: Vec<_> = cfg
            .pools
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let names: Vec<String> = fleet
                    .nodes
                    .iter()
                    .filter(|n| n.pool.index() == i)
                    .map(|n| n.name.clone())
                    .collect();
                crate::backend::provisioner_for(p, i, &names, &opening, resume)
            })
            .collect::<Result<_, _>>()?;
        // A pool of real machines bought (a cloud's) has none at open: those it starts with,
        // and those its runs were left on, are bought — the provisioner adopts the instances
        // that exist, so a restart buys nothing twice — and are up once ready.
        let mut to_buy = Vec::new();
        for (n, life) in lives.iter_mut().enumerate() {
            let pool = fleet.nodes[n].pool.index();
            if !provisioners[pool].as_ref().is_some_and(|p| p.machines()) {
                continue;
            }
            let name = &fleet.nodes[n].name;
            let ran_here = remote_records
                .iter()
                .any(|r| r.nodes.as_ref().is_some_and(|ns| ns.contains(name)));
            if *life == Life::Up || ran_here {
                *life = Life::Provisioning;
                to_buy.push(n);
            }
        }
        for (n, life) in fleet.nodes.iter_mut().zip(&lives) {
            n.health = life.health();
        }
        let nodes = Nodes::new(cfg, &fleet, lives, provisioners, resume);
        let mut engine = Engine::open_adopting(db, fleet, teams, classes, resume, &adopted)?;
        // The listings take a row of each job that finishes at the next snapshot; a headless
        // state builds none, and lets finished jobs go as they finish.
        engine.keep_finished_until_read(!opts.headless);
        engine.set_user_limits(crate::daemon::engine::UserLimits {
            per_team: cfg
                .teams
                .iter()
                .map(|t| crate::daemon::engine::Limit {
                    gpus: t.max_gpus_per_user,
                    dollars_per_hour: t.max_dollars_per_hour_per_user,
                })
                .collect(),
            users: cfg
                .users
                .iter()
                .map(|u| {
                    let l = crate::daemon::engine::Limit {
                        gpus: u.max_gpus,
                        dollars_per_hour: u.max_dollars_per_hour,
                    };
                    (u.name.clone(), l)
                })
                .collect(),
        });
        if let Some(s) = cfg.scheduler.min_runtime_s() {
            engine.set_min_runtime(s);
        }
        for t in &cfg.teams {
            engine.set_allowed_classes(&t.name, t.classes.as_deref())?;
            if let Some(n) = t.max_pending {
                engine.set_max_pending(&t.name, n)?;
            }
        }
        let recent = engine.events(None, EVENTS_KEPT)?;
        let mut s = State {
            _lock: lock,
            opened: Opened {
                db: db.to_path_buf(),
                opts: opts.clone(),
                cfg: file_cfg.clone(),
            },
            telemetry: Default::default(),
            runs: hosts,
            nodes,
            billing: super::billing::Billing::new(&cfg.teams),
            clock_saved: resume,
            engine,
            now: resume,
            calendar,
            log: super::event_log::EventLog::new(opts.messages.clone()),
            snapshot: Arc::default(),
            teams: names,
            classes: class_names,
            demo: opts.demo_workload.then(|| super::Demo::new(opts.seed)),
            reclaim: super::reclaim::Reclaim::new(cfg.reclaim.config()),
            counters: Counters::default(),
            rediscovered: None,
            services: Default::default(),
            // A headless state (`gantry sim`) is read by nobody: no estimates.
            eta: (!opts.headless).then(crate::daemon::eta::Forecaster::start),
            listed: Default::default(),
        };
        for e in recent {
            let what = format!(
                "{}{}",
                e.job.map_or(String::new(), |j| format!("job {j} ")),
                e.detail
            );
            s.log.push(&s.calendar, e.at, &what);
        }
        s.services.open(&mut cx!(s), &s.classes)?;
        super::nodes::record_cloud_pools(&mut s.engine, s.now, cfg)?;
        s.nodes.restore_timers(&mut cx!(s))?;
        let retiring = s.opened.opts.retiring.clone();
        retiring.retire_left_pools(&mut cx!(s), cfg, &opening)?;
        // Said where an operator looks (the journal already holds each job's reason).
        let failed = s.engine.failed_at_open().to_vec();
        for (id, why) in failed {
            let what = format!("job {id} {why}");
            s.log.say(&what);
            s.log(what);
        }
        if s.engine.stale_history() > 0 {
            let n = s.engine.stale_history();
            s.log.say(&format!("{n} finished job(s) name a pool, team or class the fleet file no longer has: their history stays in the journal (gantry job ID)"));
        }
        // The pools built from a cluster's nodes (`gpu = "auto"` Kubernetes pools), or why not.
        for line in said {
            s.log.say(&line);
            s.record("fleet", line)?;
        }
        // Real hosts join the fleet when they answer; until then they are down, and lost
        // (with the jobs expected there) if they stay silent past their pool's timeout. Their
        // GPUs wait for NVML's first sample (or word that there is none): until then gantry
        // cannot tell which are busy with processes it did not start, nor give a job their
        // UUIDs.
        // (A cloud's machines are not bought yet: they wait so once ready.)
        for i in s.runs.real_nodes().to_vec() {
            if s.nodes.is_machine(i) {
                continue;
            }
            s.nodes.set_life(&mut cx!(s), i, Life::Failed);
            let (nodes, mut cx, mut on) = s.nodes_and();
            nodes.await_first_contact(&mut cx, &mut on, i);
        }
        for r in remote_records {
            let nodes = s.engine.job(r.job).and_then(|j| {
                let p = j.placement.as_ref()?;
                (j.started_at.is_some())
                    .then(|| p.nodes.iter().map(|g| g.node.index()).collect::<Vec<_>>())
            });
            match nodes {
                Some(nodes) if nodes.iter().all(|&n| s.runs.is_real(n)) => {
                    s.runs.adopt(r.job, r.token, &nodes, s.now);
                }
                // Requeued at open (its placement no longer fits the fleet): the host stops
                // the run when it answers (it is not expected there).
                _ => s.engine.remove_remote_run(r.job)?,
            }
        }
        for n in to_buy {
            s.nodes.buy(&mut cx!(s), n);
        }
        super::runs::legacy::stop_legacy_orphans(&mut cx!(s), orphans)?;
        // What the hosts said already (this host answers at once).
        s.poll_hosts()?;
        if s.demo.is_some() && s.engine.jobs().next().is_none() {
            // A morning's backlog, so the first screen is already busy (a fresh journal only).
            for _ in 0..40 {
                s.submit_demo()?;
            }
        }
        s.runs.resume_restarts(&mut cx!(s))?;
        s.tick()?;
        Ok(s)
    }

    /// Opens the state again over fleet file `new` (edited while the daemon runs), saying
    /// what changed. Jobs on real hosts keep running and are re-adopted when their hosts
    /// answer (every host's link is made again); runs on hosts no longer in the file are
    /// killed and their jobs requeued; the simulated backend's jobs are requeued (it keeps
    /// nothing across a reopen). A file that cannot be
    /// applied leaves the previous one in force, with why (the inner error). The outer error:
    /// not even the previous fleet file could be opened again (the journal is gone).
    ///
    /// A file that looks half-written is never applied: one with no pools where the fleet had
    /// some (an editor's truncate-then-write, a full disk). Nor, unless `force` (the operator's
    /// SIGHUP), one that would fail live jobs — a model, pool or team they need gone: the
    /// previous file stays in force and the event says which jobs and what to do.
    pub fn reload(
        mut self,
        new: &FleetConfig,
        force: bool,
    ) -> Result<(State, Result<String, String>), EngineError> {
        // `gpu = "auto"` Kubernetes pools compared as built: what the state was opened with,
        // and what their clusters' nodes make now (a node that joined is a change; a cluster
        // that cannot be read keeps its pools).
        use crate::backend::discover::expand;
        let before = &self.opened.opts.cluster_built;
        let (old, _, _) = expand(&self.opened.cfg, before, true);
        let (built_new, _, cluster_built) = expand(new, before, false);
        // A cluster that cannot be read is said when that starts or its reason changes, and
        // at every SIGHUP (the operator is asking); its pool's row says it at every try.
        let news = before.news(&cluster_built, force);
        for line in &news {
            self.log.say(line);
            self.record("fleet", line.clone())?;
        }
        let changes = crate::config::reload::changes(&old, &built_new);
        if changes.is_empty() {
            self.opened.opts.cluster_built = cluster_built;
            self.rebuild_snapshot();
            let mut said = "the fleet file is unchanged".to_string();
            for line in news {
                said.push_str("; ");
                said.push_str(&line);
            }
            return Ok((self, Ok(said)));
        }
        let fleet_new = fleet_at_max(&built_new);
        if let Some(why) = self.refuse_reload(&old, &built_new, &fleet_new, force) {
            self.warn(why.clone());
            return Ok((self, Err(why)));
        }
        // Runs on hosts that leave the file are stopped while their hosts are still reached
        // (after the reload nothing would manage them) and their jobs requeued.
        let staying: std::collections::HashSet<String> =
            fleet_new.nodes.into_iter().map(|n| n.name).collect();
        let leaving: Vec<(JobId, String)> = self
            .runs
            .nodes_of_runs()
            .filter_map(|(id, nodes)| {
                let gone = nodes
                    .into_iter()
                    .map(|n| self.node_name(n))
                    .find(|n| !staying.contains(n))?;
                Some((id, gone))
            })
            .collect();
        for (id, host) in leaving {
            self.runs.requeue(&mut cx!(self),
                id,
                &format!("host {host} left the fleet file: its run was stopped and the job requeued from its checkpoint"),
            )?;
        }
        let leaving = (self.nodes).leaving(
            (self.engine.fleet(), &self.opened.opts.retiring),
            &built_new,
        );
        let opts = StateOptions {
            cluster_built,
            cluster_built_fresh: true,
            ..self.opened.opts.clone()
        };
        let said = changes.join("; ");
        match self.reopen_over(new, &opts)? {
            (mut s, None) => {
                s.record("fleet", format!("fleet file reloaded: {said}"))?;
                let retiring = s.opened.opts.retiring.clone();
                retiring.retire_leaving(&mut cx!(s), leaving)?;
                Ok((s, Ok(said)))
            }
            (mut s, Some(e)) => {
                s.opened.opts.retiring.unclaim(&leaving);
                let why = format!(
                    "the edited fleet file was not applied ({e}); the previous one stays in force"
                );
                s.warn(why.clone());
                Ok((s, Err(why)))
            }
        }
    }

    /// Why the fleet file `new` (replacing `old`; `fleet` is what it builds) is not applied by
    /// itself, if it is not.
    fn refuse_reload(
        &self,
        old: &FleetConfig,
        new: &FleetConfig,
        fleet: &crate::model::Fleet,
        force: bool,
    ) -> Option<String> {
        if new.pools.is_empty() && !old.pools.is_empty() {
            return Some("the edited fleet file has no pools (empty, or half-written?): not applied; the previous one stays in force".to_string());
        }
        if force {
            return None;
        }
        let stranded = self.engine.stranded_by(fleet, &teams_of(new));
        let (first, why) = stranded.first()?;
        let ids: Vec<String> = stranded.iter().map(|(id, _)| id.to_string()).collect();
        Some(format!(
            "the edited fleet file was not applied: it would fail {} live job(s) ({}; job {first}: {why}); the previous one stays in force — restore what they need, cancel them (gantry cancel {}), or send the daemon SIGHUP to apply it anyway and fail them",
            stranded.len(),
            ids.join(", "),
            ids.join(" ")
        ))
    }

    /// This state let go (the journal's lock, this host's agent, the hosts' links) and opened
    /// again over `cfg` and `opts` — or, where that fails, over what it was opened with, with
    /// why the new one did not open. The error: not even the old one opens.
    fn reopen_over(
        mut self,
        cfg: &FleetConfig,
        opts: &StateOptions,
    ) -> Result<(State, Option<EngineError>), EngineError> {
        // The clock goes on from where it is: the state opened again resumes from the last
        // moment the journal has, which is otherwise up to a minute back (the clock is saved
        // once a minute), and pins that moment to the wall clock — every event and run start
        // of that minute would read as happening at the reload, and its bill would lose them.
        // Nor has the daemon stopped: its calendar goes on too, with no new start pinned (the
        // wall clock of the saved moment is the one the calendar already gives it).
        self.engine.save_clock(self.now)?;
        let wall = Some(self.calendar.unix(self.now));
        let Opened {
            db,
            opts: old_opts,
            cfg: old_cfg,
        } = &self.opened;
        let (db, old_opts, old_cfg) = (db.clone(), old_opts.clone(), old_cfg.clone());
        drop(self);
        let live = |o: &StateOptions| StateOptions {
            wall_clock: o.wall_clock.or(wall),
            ..o.clone()
        };
        let opened = |cfg: &FleetConfig, o: &StateOptions| {
            State::open(&db, cfg, &live(o)).map(|mut s| {
                s.opened.opts.wall_clock = o.wall_clock;
                s
            })
        };
        match opened(cfg, opts) {
            Ok(s) => Ok((s, None)),
            Err(e) => Ok((opened(&old_cfg, &old_opts)?, Some(e))),
        }
    }

    /// Whether a host of a `gpu = "auto"` pool found GPUs the fleet is not built with (the
    /// owner then calls `reopen_rediscovered`).
    pub fn wants_reopen(&self) -> bool {
        self.rediscovered.is_some()
    }

    /// The state opened again with the GPUs the hosts of `gpu = "auto"` pools found: runs on
    /// real hosts are re-adopted when their hosts answer again (as after a reload).
    pub fn reopen_rediscovered(mut self) -> Result<State, EngineError> {
        let Some((why, pool, found)) = self.rediscovered.take() else {
            return Ok(self);
        };
        let (cfg, mut opts) = (self.opened.cfg.clone(), self.opened.opts.clone());
        opts.discovered.insert(pool, found);
        // Its owner (the actor) has nothing left to say a failure with: said here.
        let messages = self.log.messages().clone();
        let reopened = self.reopen_over(&cfg, &opts).inspect_err(|e| {
            messages.write(&format!("reopening the state failed: {e}"));
        })?;
        match reopened {
            (mut s, None) => {
                s.record("fleet", why)?;
                Ok(s)
            }
            // Not with the GPUs found (a running job's placement no longer fits, say): as it
            // was, and said.
            (mut s, Some(e)) => {
                s.warn(format!("{why}, but the state could not be reopened with them ({e}): the pool stays as it was"));
                Ok(s)
            }
        }
    }

    /// The built-in simulated fleet with the demo workload, its journal in `dir`: what the
    /// embedded console shows, for tests and benches.
    /// Its calendar starts at 2026-11-20T00:00:00Z, so that what it shows is the same on
    /// every run (screens' snapshots, fixtures).
    pub fn demo(dir: &Path, seed: u64) -> Result<State, EngineError> {
        let log = Messages::File(dir.join("daemon.log"));
        State::demo_opening(dir, seed, log, Some(1_795_132_800.0))
    }

    /// `demo` on the wall clock, with the daemon's warnings sent to `messages`.
    pub fn demo_with(dir: &Path, seed: u64, messages: Messages) -> Result<State, EngineError> {
        State::demo_opening(dir, seed, messages, None)
    }

    fn demo_opening(
        dir: &Path,
        seed: u64,
        messages: Messages,
        wall_clock: Option<f64>,
    ) -> Result<State, EngineError> {
        let cfg = crate::config::fleet::parse("built-in", crate::config::fleet::DEFAULT_FLEET)
            .map_err(|e| EngineError::NeverFits(e.to_string()))?;
        let opts = StateOptions {
            seed,
            demo_workload: true,
            messages,
            wall_clock,
            ..StateOptions::default()
        };
        State::open(&dir.join("demo.db"), &cfg, &opts)
    }
}
