//! Opening the state: the lock, the journal, the fleet at its elastic maximum, local runs
//! re-adopted or (only where provably the run's) stopped, and the warnings a changed fleet
//! file gives.

use super::*;

impl State {
    /// Opens the journal at `db` over the fleet of `cfg`. The clock resumes from the latest
    /// time the journal has seen; jobs that were running are requeued (the simulated backend
    /// keeps nothing across a restart), with an event each.
    pub fn open(db: &Path, cfg: &FleetConfig, opts: &StateOptions) -> Result<State, EngineError> {
        // One daemon per journal, before anything is read or written.
        let lock = crate::daemon::lock::StateLock::acquire(db).map_err(EngineError::Locked)?;
        // `gpu = "auto"` pools not discovered by the caller are discovered here.
        let discovered;
        let cfg = if crate::config::fleet::wants_discovery(cfg) {
            let mut c = cfg.clone();
            crate::config::fleet::apply_discovery(&mut c, &crate::backend::local::nvml::discover());
            discovered = c;
            &discovered
        } else {
            cfg
        };
        let (resume, local_records, remote_records) = {
            let store = crate::daemon::journal::Store::open(db)?;
            (
                store.last_time()?,
                store.local_runs()?,
                store.remote_runs()?,
            )
        };
        let log_dir = opts
            .log_dir
            .clone()
            .unwrap_or_else(|| db.parent().unwrap_or_else(|| Path::new(".")).join("logs"));
        // Jobs a previous daemon started on this host that still run (or left how they
        // ended) are re-adopted where they were placed; the rest are requeued.
        let mut local = crate::backend::local::runs::LocalRuns::new(log_dir);
        let mut adopted = BTreeMap::new();
        let mut orphans = Vec::new();
        for r in local_records {
            let placement = r
                .placement
                .as_deref()
                .and_then(|p| serde_json::from_str::<crate::model::Placement>(p).ok());
            match (placement, r.started_at) {
                (Some(p), Some(t)) if local.adopt(r.job, r.pgid, r.token.clone()) => {
                    adopted.insert(r.job, (p, t));
                }
                _ => orphans.push((r.job, r.pgid, r.token)),
            }
        }
        let teams = teams_of(cfg);
        let names = teams.iter().map(|t| t.name.clone()).collect();
        let classes = classes_of(cfg);
        let class_names = classes.iter().map(|c| c.name.clone()).collect();
        // Every pool at its elastic maximum, so node ids never change; nodes not bought yet
        // are down until an elastic decision provisions them.
        let mut fleet = fleet_sized(cfg, |p| p.max_nodes.unwrap_or(p.nodes).max(p.nodes));
        let remote = super::remote::Remote::open(cfg, &fleet).map_err(EngineError::NeverFits)?;
        // Jobs handed to remote hosts are expected there until the hosts say otherwise.
        for r in &remote_records {
            if let Ok(p) = serde_json::from_str::<crate::model::Placement>(&r.placement) {
                adopted.insert(r.job, (p, r.started_at));
            }
        }
        let lives = start_lives(&fleet, &cfg.pools);
        for (n, life) in fleet.nodes.iter_mut().zip(&lives) {
            n.health = life.health();
        }
        let nodes = Nodes {
            pools: cfg.pools.clone(),
            epochs: vec![0; lives.len()],
            empty_since: vec![Some(resume); lives.len()],
            lives,
            timers: BinaryHeap::new(),
            seq: 0,
            interrupted: vec![None; cfg.pools.len()],
            failures_per_node_hour: opts.failures_per_node_hour,
            scale: crate::config::fleet::scale_of(cfg),
            next_consolidate: resume + CONSOLIDATE_EVERY_S,
        };
        let mut engine = Engine::open_adopting(db, fleet, teams, classes, resume, &adopted)?;
        for t in &cfg.teams {
            engine.set_allowed_classes(&t.name, t.classes.as_deref())?;
            if let Some(n) = t.max_pending {
                engine.set_max_pending(&t.name, n)?;
            }
        }
        let recent = engine.store().events(None, EVENTS_KEPT)?;
        for &id in adopted.keys() {
            if engine.job(id).is_none_or(|j| j.placement.is_none()) {
                // Its placement no longer fits the fleet (or the job is gone): stop it.
                if let Some(r) = local.runs.remove(&id) {
                    orphans.push((id, r.pgid, r.token));
                }
            }
        }
        let host_node = engine
            .fleet()
            .nodes
            .iter()
            .position(|n| cfg.pools[n.pool.index()].is_local());
        let mut s = State {
            _lock: lock,
            messages: opts.messages.clone(),
            local,
            host_node,
            measured: host_node
                .map(|n| (n, crate::daemon::host::HostTelemetry::default()))
                .into_iter()
                .collect(),
            remote,
            nodes,
            budgets: vec![TeamBudget::default(); cfg.teams.len()],
            budget_read_at: None,
            clock_saved: resume,
            gpu_history: HashMap::new(),
            history_at: f64::NEG_INFINITY,
            engine,
            rng: Rng::new(opts.seed),
            now: resume,
            runs: HashMap::new(),
            stops: HashMap::new(),
            events: VecDeque::new(),
            events_total: 0,
            snapshot: Snapshot::default(),
            teams: names,
            classes: class_names,
            team_config: cfg.teams.clone(),
            workload: opts.demo_workload.then(Workload::default),
            reclaim: cfg.reclaim.config(),
            counters: Counters::default(),
            reclaim_shown: VecDeque::new(),
        };
        for e in recent {
            s.push_event(
                e.at,
                format!(
                    "{}{}",
                    e.job.map_or(String::new(), |j| format!("job {j} ")),
                    e.detail
                ),
            );
        }
        // Said where an operator looks (the journal already holds each job's reason).
        let failed = s.engine.failed_at_open().to_vec();
        for (id, why) in failed {
            let what = format!("job {id} {why}");
            s.messages.write(&what);
            s.log(what);
        }
        if s.engine.stale_history() > 0 {
            let n = s.engine.stale_history();
            s.messages.write(&format!("{n} finished job(s) name a pool, team or class the fleet file no longer has: their history stays in the journal (gantry job ID)"));
        }
        for i in 0..s.nodes.lives.len() {
            if s.nodes.lives[i] == Life::Up {
                s.arm_node(i);
            }
        }
        // Remote hosts join the fleet when they answer; until then they are down, and lost
        // (with the jobs expected there) if they stay silent past their pool's timeout.
        let mut remote_nodes: Vec<usize> = s.remote.hosts.keys().copied().collect();
        remote_nodes.sort_unstable();
        for i in remote_nodes {
            s.set_life(i, Life::Failed);
            s.remote.down.insert(i, (s.now, "connecting".to_string()));
        }
        for r in remote_records {
            let parts = s.engine.job(r.job).and_then(|j| {
                let p = j.placement.as_ref()?;
                (j.started_at.is_some()).then(|| {
                    p.nodes
                        .iter()
                        .map(|g| super::remote::Part {
                            node: g.node.index(),
                            state: super::remote::PartState::Running,
                            since: s.now,
                        })
                        .collect::<Vec<_>>()
                })
            });
            match parts {
                Some(parts) if parts.iter().all(|p| s.remote.hosts.contains_key(&p.node)) => {
                    s.remote.runs.insert(
                        r.job,
                        super::remote::RemoteRun {
                            token: r.token,
                            parts,
                        },
                    );
                }
                // Requeued at open (its placement no longer fits the fleet): the host stops
                // the run when it connects (it is not expected there).
                _ => s.engine.store().remove_remote_run(r.job)?,
            }
        }
        // This host's GPUs wait for NVML's first sample: until then gantry cannot tell which
        // are busy with processes it did not start, nor give a job their UUIDs.
        if let Some(node) = s.host_node {
            for g in 0..s.engine.fleet().nodes[node].gpus.len() as u8 {
                s.engine.hold_gpu(NodeId(node as u32), g);
            }
        }
        for &id in adopted.keys() {
            let Some(pgid) = s.local.runs.get(&id).map(|r| r.pgid) else {
                continue;
            };
            if s.engine
                .job(id)
                .is_some_and(|j| j.state == JobState::Preempting)
            {
                // Its stop began before the restart: the grace runs again from now.
                let grace = s.grace_of(id);
                if let Some(r) = s.local.runs.get_mut(&id) {
                    r.kill_at = Some(s.now + grace);
                }
            }
            s.record_job(
                id,
                "local",
                format!(
                    "re-adopted process group {pgid}, still running on this host after the restart"
                ),
            )?;
        }
        // Processes a previous daemon left on this host that could not be re-adopted: their
        // jobs were requeued; stop them — only where the group is provably the run's (its
        // token in every member's environment). A group id that now names someone else's
        // processes (pid reuse after a reboot) is left alone, and said so.
        for (job, pgid, token) in orphans {
            use crate::backend::local::runs::{kill_orphan, Orphan};
            match kill_orphan(pgid, job, token.as_deref()) {
                Orphan::Killed => s.record(
                    "local",
                    format!("job {job}: killed process group {pgid} left from before the restart; the job was requeued"),
                )?,
                Orphan::NotOurs => s.record(
                    "local",
                    format!("job {job}: process group {pgid} is alive but not provably this job's (its id was reused): left alone; the job was requeued"),
                )?,
                Orphan::Gone => {}
            }
            s.engine.store().remove_local_run(job)?;
        }
        if s.workload.is_some() && s.engine.jobs().next().is_none() {
            // A morning's backlog, so the first screen is already busy (a fresh journal only).
            for _ in 0..40 {
                s.submit_demo()?;
            }
        }
        s.tick()?;
        Ok(s)
    }

    /// The built-in simulated fleet with the demo workload, its journal in `dir`: what the
    /// embedded console shows, for tests and benches.
    pub fn demo(dir: &Path, seed: u64) -> Result<State, EngineError> {
        State::demo_with(dir, seed, Messages::File(dir.join("daemon.log")))
    }

    /// `demo`, with the daemon's warnings sent to `messages`.
    pub fn demo_with(dir: &Path, seed: u64, messages: Messages) -> Result<State, EngineError> {
        let cfg = crate::config::fleet::parse("built-in", crate::config::fleet::DEFAULT_FLEET)
            .map_err(|e| EngineError::NeverFits(e.to_string()))?;
        let opts = StateOptions {
            seed,
            demo_workload: true,
            messages,
            ..StateOptions::default()
        };
        State::open(&dir.join("demo.db"), &cfg, &opts)
    }
}
