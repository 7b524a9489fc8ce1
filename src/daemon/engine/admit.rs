//! Admission: a submission checked (spec, team, class, budget, queue cap, idempotency key,
//! whether any node could ever host it) and journaled with one commit per batch.

use super::*;

impl Engine {
    /// Parses, resolves and admits a spec; `team` and `priority` override the file's. A job no
    /// node of the fleet could ever host is rejected here, with the reason, instead of waiting
    /// forever. Returns once the job is committed.
    pub fn submit(
        &mut self,
        file: &str,
        text: &[u8],
        team: Option<&str>,
        priority: Option<&str>,
        now: f64,
    ) -> Result<JobId, EngineError> {
        let one = Submission {
            file: file.to_string(),
            text: text.to_vec(),
            team: team.map(str::to_string),
            priority: priority.map(str::to_string),
            only_team: None,
            parsed: None,
            idempotency_key: None,
            user: None,
            from_backend: false,
            sent_text: None,
            reported: false,
        };
        self.submit_batch(&[one], now)
            .pop()
            .unwrap_or(Err(EngineError::NoJob(0)))
    }

    /// Admits several submissions with one journal commit (group commit): each is checked on
    /// its own, the valid ones are written together, and each gets its own answer.
    pub fn submit_batch(
        &mut self,
        batch: &[Submission],
        now: f64,
    ) -> Vec<Result<JobId, EngineError>> {
        let mut answers: Vec<Result<JobId, EngineError>> = Vec::with_capacity(batch.len());
        let mut admitted = Vec::new();
        // Jobs waiting per team, this batch's admissions included (the counts are kept as
        // states change: recounting every job per batch cost the actor more than admission).
        let mut waiting = self.waiting.clone();
        self.replayed.clear();
        // Idempotency key → the slot of this batch's first submission with it, and its digest.
        let mut keyed: HashMap<&str, (usize, String)> = HashMap::new();
        let mut repeats = Vec::new();
        for s in batch {
            // What the key vouches for, hashed once per keyed submission.
            let key = s.idempotency_key.as_deref().map(|k| (k, s.digest()));
            if let Some((key, digest)) = &key {
                let slot = answers.len();
                if let Some((first, first_digest)) = keyed.get(key) {
                    answers.push(Ok(0));
                    repeats.push((slot, *first, digest == first_digest));
                    continue;
                }
                keyed.insert(key, (slot, digest.clone()));
                match self.store.idempotent(key) {
                    Ok(Some((id, stored))) if &stored == digest => {
                        self.replayed.push(id);
                        answers.push(Ok(id));
                        continue;
                    }
                    Ok(Some((id, _))) => {
                        answers.push(Err(key_reused(id)));
                        continue;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        answers.push(Err(e.into()));
                        continue;
                    }
                }
            }
            let job = match self.admit(s) {
                Ok(job) => job,
                Err(e) => {
                    answers.push(Err(e));
                    continue;
                }
            };
            if let Some(cap) = self.queue_full(job.team, &waiting) {
                answers.push(Err(EngineError::QueueFull(format!(
                    "team `{}` already has {cap} jobs waiting, its limit (the fleet file's [[teams]] max_pending); wait for some to start or cancel some, then submit again",
                    self.teams[job.team].name
                ))));
                continue;
            }
            if let Some(n) = waiting.get_mut(job.team) {
                *n += 1;
            }
            answers.push(Ok(0));
            admitted.push((
                answers.len() - 1,
                job,
                String::from_utf8_lossy(&s.text),
                key.map(|(k, digest)| (k.to_string(), digest)),
                s.reported,
            ));
        }
        if admitted.is_empty() {
            return settle_repeats(answers, &repeats);
        }
        let rows: Vec<NewJob> = admitted
            .iter()
            .map(|(_, j, text, key, reported)| NewJob {
                name: j.name.clone(),
                team: self.teams[j.team].name.clone(),
                priority: self.classes[j.class].name.clone(),
                spec: text.to_string(),
                at: now,
                idempotency: key.clone(),
                user: j.user.clone(),
                reported: *reported,
            })
            .collect();
        match self.store.submit_all(&rows) {
            Ok(ids) => {
                for ((slot, mut job, _, _, _), id) in admitted.into_iter().zip(ids) {
                    job.id = id;
                    job.submitted_at = now;
                    answers[slot] = Ok(id);
                    self.count_waiting(job.team, None, Some(job.state));
                    self.jobs.insert(id, Box::new(job));
                }
            }
            Err(e) => {
                let why = e.to_string();
                for (slot, _, _, _, _) in admitted {
                    answers[slot] = Err(EngineError::Journal(JournalError::Corrupt {
                        id: 0,
                        what: why.clone(),
                    }));
                }
            }
        }
        settle_repeats(answers, &repeats)
    }

    /// The jobs the last `submit_batch` answered from an idempotency key: retries of
    /// submissions already journaled, not new jobs.
    pub fn replayed(&self) -> &[JobId] {
        &self.replayed
    }

    /// `Some(limit)` when `team` has as many jobs waiting as it may.
    pub(super) fn queue_full(&self, team: usize, waiting: &[usize]) -> Option<usize> {
        let cap = self
            .max_pending
            .get(&team)
            .copied()
            .unwrap_or(DEFAULT_MAX_PENDING);
        (waiting.get(team).copied().unwrap_or(0) >= cap).then_some(cap)
    }

    /// Where a submission would land right now, without admitting it: the checks of a
    /// submission, then the placer on the current fleet. Quota and queue order decide at the
    /// next cycle; this answers "is it valid, could it start now, where and at what price".
    pub fn preview(&mut self, s: &Submission) -> Result<Preview, EngineError> {
        let job = self.admit(s)?;
        let fleet = self.cluster.fleet();
        let (nodes, dollars_per_hour, reason) =
            match self.placer.place(&self.cluster, &job.request, 0) {
                Ok(p) => (
                    p.nodes
                        .iter()
                        .map(|g| {
                            let n = fleet.node(g.node);
                            format!("{} ({})", n.name, fleet.pool_path(n.pool))
                        })
                        .collect(),
                    p.price_per_hour,
                    None,
                ),
                Err(why) => (Vec::new(), 0.0, Some(why.to_string())),
            };
        Ok(Preview {
            name: job.name,
            team: self.teams[job.team].name.clone(),
            class: self.classes[job.class].name.clone(),
            gpus: job.request.total_gpu_milli() as f64 / 1000.0,
            fits_now: reason.is_none(),
            nodes,
            dollars_per_hour,
            reason,
            what_if: None,
        })
    }

    /// Checks one submission and builds the job it would become (not yet journaled).
    pub(super) fn admit(&mut self, s: &Submission) -> Result<Job, EngineError> {
        let spec = match &s.parsed {
            Some(parsed) => parsed.clone(),
            None => spec::parse(&s.file, &s.text)?,
        };
        // A service's file runs as replicas behind an endpoint, not once: its replicas are
        // submitted without the section (`daemon::state::services`).
        if spec.service.is_some() {
            return Err(EngineError::Resolve(
                spec::ResolveError::new(
                    "the file is a service (it has `service:`): start it with `gantry serve up FILE`, which runs its replicas behind an endpoint; a job runs once".to_string(),
                )
                .at("service"),
            ));
        }
        // A relative local source names no directory the daemon knows (whose `.`, whose
        // `~`?): `gantry submit` makes each absolute, or ships it.
        let relative = spec.file_mounts.iter().find_map(|m| match &m.source {
            spec::mounts::MountSource::Local(p) if !p.starts_with('/') => Some((&m.dest, p)),
            _ => None,
        });
        if let Some((dest, p)) = relative {
            return Err(EngineError::Resolve(
                spec::ResolveError::new(format!(
                    "`{dest}`: the local source `{p}` is relative: the daemon cannot tell whose directory it means; submit with `gantry submit`, which makes it absolute (or ships it to a remote daemon), or write the absolute path"
                ))
                .at("file_mounts"),
            ));
        }
        let mut alternatives = spec.to_requests(self.cluster.fleet())?;
        let request = alternatives.remove(0);
        if let Some(after) = spec.after {
            if !self.jobs.contains_key(&after) && self.store.job(after)?.is_none() {
                return Err(EngineError::Resolve(spec::ResolveError::new(format!(
                    "`after`: job {after} is not known to this daemon; a task of a pipeline follows a job submitted before it"
                ))
                .at("after")));
            }
        }
        // A job that names no team is the default team's, or a researcher's own team's.
        let team_name = s
            .team
            .as_deref()
            .or(spec.team.as_deref())
            .or(s.only_team.as_deref())
            .unwrap_or("default");
        let class_name = s
            .priority
            .as_deref()
            .or(spec.priority.as_deref())
            .unwrap_or("experiment");
        if let Some(only) = s.only_team.as_deref().filter(|&t| t != team_name) {
            return Err(EngineError::Forbidden(format!(
                "this token may submit for team `{only}` only, and the job is for `{team_name}`"
            )));
        }
        let team = self.team_index(team_name)?;
        let mut class = self.class_index(class_name)?;
        // A token bound to a team is a researcher's; operators submit without one.
        self.check_class(team, class, s.only_team.is_none())?;
        match self.budget.get(&team) {
            Some(BudgetGate::Block(why)) => return Err(EngineError::OverBudget(why.clone())),
            Some(BudgetGate::Demote) => class = self.lowest_class(),
            None => {}
        }
        // The placer tells "not now" from "never": a refusal is NeverFits when no node of the
        // fleet could host the job even if it were empty.
        if let Err(why @ (Unplaceable::NeverFits { .. } | Unplaceable::Invalid { .. })) =
            self.placer.place(&self.cluster, &request, 0)
        {
            return Err(EngineError::NeverFits(why.to_string()));
        }
        Ok(Job {
            id: 0,
            name: spec.name.clone(),
            team,
            class,
            state: JobState::Pending,
            submitted_at: 0.0,
            spec,
            request,
            alternatives,
            placement: None,
            started_at: None,
            borrowed: false,
            explanation: None,
            cost: 0.0,
            user: s.user.clone(),
        })
    }
}

/// The answer to a submission whose idempotency key was already used for another one.
pub(super) fn key_reused(id: JobId) -> EngineError {
    EngineError::KeyReused(format!(
        "this Idempotency-Key was used within the last day for a different submission (job {id}); send a new key for a new job"
    ))
}

/// A submission that repeated an earlier one's key in the same batch gets that one's
/// answer: (slot, first slot, same submission).
pub(super) fn settle_repeats(
    mut answers: Vec<Result<JobId, EngineError>>,
    repeats: &[(usize, usize, bool)],
) -> Vec<Result<JobId, EngineError>> {
    for &(slot, first, same) in repeats {
        answers[slot] = match (&answers[first], same) {
            (Ok(id), true) => Ok(*id),
            (Ok(id), false) => Err(key_reused(*id)),
            (Err(e), _) => Err(EngineError::KeyReused(format!(
                "the first submission with this Idempotency-Key failed: {e}"
            ))),
        };
    }
    answers
}
