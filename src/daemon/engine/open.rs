//! Opening the engine: the journal read back (live jobs and a window of finished ones) and
//! resolved against today's fleet file; what no longer resolves fails or stays history.

use super::*;

/// Completed runs a daemon learns run lengths from as it opens (the newest).
const LENGTHS_LEARNT: usize = 10_000;

impl Engine {
    /// Opens the journal and rebuilds the state from it. Jobs that were running when the
    /// daemon stopped are requeued from their checkpoint (no backend reports them yet), with
    /// an event each.
    pub fn open(
        path: &Path,
        fleet: Fleet,
        teams: Vec<Team>,
        classes: Vec<PriorityClass>,
        now: f64,
    ) -> Result<Engine, EngineError> {
        Engine::open_adopting(path, fleet, teams, classes, now, &BTreeMap::new())
    }

    /// `open`, except that the jobs in `adopted` — still running on a backend that survived
    /// the restart (the local host's process groups) — keep running where they were placed,
    /// since when they started, with their run still billing. One whose placement no longer
    /// fits the fleet is requeued like the rest.
    pub fn open_adopting(
        path: &Path,
        fleet: Fleet,
        teams: Vec<Team>,
        classes: Vec<PriorityClass>,
        now: f64,
        adopted: &BTreeMap<JobId, (Placement, f64)>,
    ) -> Result<Engine, EngineError> {
        validate_teams(&teams, &classes)?;
        let store = Store::open(path)?;
        store.hold()?;
        let records = store.load_live(HISTORY_KEPT)?;
        let mut e = Engine {
            usage: vec![0.0; teams.len()],
            usage_at: now,
            store,
            cluster: Cluster::new(fleet),
            placer: Placer::new(Policy::Gantry),
            teams,
            classes,
            config: CycleConfig::default(),
            jobs: Default::default(),
            budget: HashMap::new(),
            releases: 0,
            held: BTreeMap::new(),
            pins: BTreeMap::new(),
            allowed: HashMap::new(),
            max_pending: HashMap::new(),
            user_limits: UserLimits::default(),
            finished: VecDeque::new(),
            history_kept: HISTORY_KEPT,
            until_read: false,
            forgotten: 0,
            stale_history: 0,
            replayed: Vec::new(),
            suspending: Default::default(),
            waiting: Vec::new(),
            failed_at_open: Vec::new(),
            lengths: Default::default(),
        };
        e.learn_lengths_from_journal(LENGTHS_LEARNT)?;
        e.usage = e.usage_from_journal(now)?;
        e.waiting = vec![0; e.teams.len()];
        let mut moves = Vec::new();
        for r in records {
            // The fleet file may have changed since the job was submitted (a pool, team or
            // class removed or renamed). A finished job keeps its history in the journal; a
            // live one fails with the reason; the daemon starts either way.
            let (spec, mut alternatives, team, class) = match e.resolve(&r) {
                Ok(resolved) => resolved,
                Err(_) if r.state.is_final() => {
                    e.stale_history += 1;
                    continue;
                }
                Err(why) => {
                    let why = format!("failed at startup: {why} (the fleet file changed since it was submitted); fix the spec or the fleet file and submit it again");
                    e.failed_at_open.push((r.id, why.clone()));
                    moves.push((r.id, JobState::Failed, why));
                    continue;
                }
            };
            let mut state = r.state;
            let mut kept = None;
            let suspended = state == JobState::Preempting
                && e.store
                    .last_move_to(r.id, JobState::Preempting)?
                    .is_some_and(|d| d.contains(SUSPENDED));
            if suspended {
                e.suspending.insert(r.id);
            }
            if matches!(state, JobState::Running | JobState::Preempting) {
                if let Some((p, started)) = adopted.get(&r.id) {
                    if e.cluster.allocate(p).is_ok() {
                        kept = Some((p.clone(), *started));
                    }
                }
            }
            if kept.is_none() && suspended {
                e.suspending.remove(&r.id);
                moves.push((r.id, JobState::Held, "daemon restarted while it was being suspended: held until its owner releases it".to_string()));
                state = JobState::Held;
            } else if kept.is_none() && matches!(state, JobState::Running | JobState::Preempting) {
                moves.push((r.id, JobState::Pending, "daemon restarted and no backend reports it running: requeued from its checkpoint".to_string()));
                state = JobState::Pending;
            }
            if state.is_final() {
                e.finished.push_back(r.id);
            }
            e.count_waiting(team, None, Some(state));
            let mut job = Box::new(Job {
                id: r.id,
                name: r.name,
                team,
                class,
                state,
                submitted_at: r.submitted_at,
                spec,
                request: alternatives.remove(0),
                alternatives,
                started_at: kept.as_ref().map(|k| k.1),
                placement: kept.map(|k| k.0),
                borrowed: false,
                explanation: None,
                cost: r.cost,
                user: r.user,
            });
            if state.is_final() {
                job.keep_as_finished();
            }
            e.jobs.insert(r.id, job);
        }
        e.store.transition_all(&moves, now)?;
        // The moves closed their open runs in the journal: read the bills back (of the jobs
        // kept in memory; the ones that failed stay in the journal only).
        for (id, _, _) in &moves {
            if !e.jobs.contains_key(id) {
                continue;
            }
            if let Some(r) = e.store.job(*id)? {
                if let Some(j) = e.jobs.get_mut(id) {
                    j.cost = r.cost;
                }
            }
        }
        // Every kept job's spec was parsed whole and then slimmed: what the parse and the
        // journal's rows took is free now, and would stay resident.
        crate::heap::give_back_freed();
        Ok(e)
    }

    /// A journaled job's spec, requests (one per shape, never none), team and class under
    /// today's fleet file, or why not.
    pub(super) fn resolve(
        &self,
        r: &JobRecord,
    ) -> Result<(JobSpec, Vec<JobRequest>, usize, usize), String> {
        let spec = spec::parse(&format!("job {}", r.id), r.spec.as_bytes())
            .map_err(|e| format!("its spec no longer parses: {e}"))?;
        let requests = spec
            .to_requests(self.cluster.fleet())
            .map_err(|e| e.to_string())?;
        let team = self.team_index(&r.team).map_err(|e| e.to_string())?;
        let class = self.class_index(&r.priority).map_err(|e| e.to_string())?;
        Ok((spec, requests, team, class))
    }
}

impl Engine {
    /// The live jobs (not ended) that opening over `fleet` and `teams` would fail, each with
    /// why: a reload that would strand them is not applied by itself (`State::reload`).
    pub fn stranded_by(&self, fleet: &Fleet, teams: &[Team]) -> Vec<(JobId, String)> {
        self.jobs
            .values()
            .filter(|j| !j.state.is_final())
            .filter_map(|j| {
                let team = &self.teams[j.team].name;
                if !teams.iter().any(|t| t.name == *team) {
                    return Some((j.id, format!("its team `{team}` is not in it")));
                }
                let e = j.spec.to_requests(fleet).err()?;
                Some((j.id, e.to_string()))
            })
            .collect()
    }
}
