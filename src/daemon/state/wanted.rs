//! Work a backend's own users ask gantry to place (pods created with `schedulerName: gantry`):
//! each is queued once as a job whose spec `adopt`s it — placed by the same core, shown with
//! its queue position and why it waits — and cancelled if it goes away before it is placed.

use super::*;
use crate::backend::Wanted;

impl State {
    pub(super) fn wanted(&mut self, pool: usize, work: Vec<Wanted>) -> Result<(), EngineError> {
        // Every job ever made for such work, by what it adopts: one job per piece of work.
        let known: HashMap<String, (JobId, JobState)> = self
            .engine
            .jobs()
            .filter_map(|j| Some((j.spec.adopt.clone()?, (j.id, j.state))))
            .collect();
        let mut batch = Vec::new();
        for w in &work {
            if known.contains_key(&w.key) || self.hosts.wanted_refused.contains(&w.key) {
                continue;
            }
            batch.push((
                w.key.clone(),
                crate::daemon::engine::Submission {
                    file: w.key.clone(),
                    text: w.spec.clone().into_bytes(),
                    team: Some(w.team.clone()),
                    priority: w.priority.clone(),
                    ..Default::default()
                },
            ));
        }
        let kind = self.hosts.runners[pool].kind();
        if !batch.is_empty() {
            let subs: Vec<_> = batch.iter().map(|(_, s)| s.clone()).collect();
            for ((key, _), r) in batch.iter().zip(self.submit(&subs)) {
                match r {
                    Ok(id) => self.record_job(
                        id,
                        kind,
                        format!("queued for {key}, which asks gantry to place it"),
                    )?,
                    Err(e) => {
                        self.hosts.wanted_refused.insert(key.clone());
                        self.record(
                            kind,
                            format!("{key} asks gantry to place it and cannot be queued: {e}"),
                        )?;
                    }
                }
            }
        }
        // What this pool's users no longer ask for, and gantry has not placed, goes.
        let this_pool = self
            .node_of(pool, 0)
            .map(|n| self.engine.fleet().nodes[n].pool);
        let wanted: std::collections::HashSet<&str> = work.iter().map(|w| w.key.as_str()).collect();
        let gone: Vec<(JobId, String)> = known
            .into_iter()
            .filter(|(key, (_, state))| {
                !wanted.contains(key.as_str())
                    && matches!(state, JobState::Pending | JobState::Held)
            })
            .filter(|(_, (id, _))| {
                let job = self.engine.job(*id);
                job.is_some_and(|j| {
                    this_pool
                        .is_some_and(|p| j.request.pools.as_ref().is_none_or(|ps| ps.contains(&p)))
                })
            })
            .map(|(key, (id, _))| (id, key))
            .collect();
        for (id, key) in gone {
            self.act(id, Action::Cancel, &format!("{key} going away"))?;
            self.record_job(
                id,
                kind,
                format!("cancelled: {key} went away before it was placed"),
            )?;
        }
        Ok(())
    }
}
