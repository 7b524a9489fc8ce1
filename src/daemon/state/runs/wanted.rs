//! Work a backend's own users ask gantry to place (pods created with `schedulerName: gantry`):
//! each is queued once as a job whose spec `adopt`s it — placed by the same core, shown with
//! its queue position and why it waits — and cancelled if it goes away before it is placed.

use crate::api::{Action, JobState};
use crate::backend::Wanted;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::state::desk::Desk;
use std::collections::HashMap;

/// The work pool `pool`'s users ask gantry to place now, all of it, asked of `desk`.
pub(in crate::daemon::state) fn wanted(
    desk: &mut Desk,
    pool: usize,
    work: Vec<Wanted>,
) -> Result<(), EngineError> {
    let this_pool = desk
        .runs
        .node_of(pool, 0)
        .map(|n| desk.cx.engine.fleet().nodes[n].pool);
    // Every job ever made for such work, by what it adopts (one job per piece of work):
    // its id, and whether it waits unplaced in this pool.
    let known: HashMap<String, (JobId, bool)> = desk
        .cx
        .engine
        .jobs()
        .filter_map(|j| {
            let waits_here = matches!(j.state, JobState::Pending | JobState::Held)
                && this_pool.is_some_and(|p| j.request.allows_pool(p));
            Some((j.spec.adopt.clone()?, (j.id, waits_here)))
        })
        .collect();
    let (mut keys, mut subs) = (Vec::new(), Vec::new());
    for w in &work {
        if known.contains_key(&w.key) || desk.runs.wanted_refused.contains(&w.key) {
            continue;
        }
        keys.push(w.key.clone());
        subs.push(crate::daemon::engine::Submission {
            file: w.key.clone(),
            text: w.spec.clone().into_bytes(),
            team: Some(w.team.clone()),
            priority: w.priority.clone(),
            from_backend: true,
            ..Default::default()
        });
    }
    let kind = desk.runs.runners[pool].kind();
    if !subs.is_empty() {
        for (key, r) in keys.into_iter().zip(desk.submit(&subs)) {
            match r {
                Ok(id) => desk.cx.record_job(
                    id,
                    kind,
                    format!("queued for {key}, which asks gantry to place it"),
                )?,
                Err(e) => {
                    desk.cx.record(
                        kind,
                        format!("{key} asks gantry to place it and cannot be queued: {e}"),
                    )?;
                    desk.runs.wanted_refused.insert(key);
                }
            }
        }
    }
    // What this pool's users no longer ask for, and gantry has not placed, goes.
    let wanted: std::collections::HashSet<&str> = work.iter().map(|w| w.key.as_str()).collect();
    let gone: Vec<(JobId, String)> = known
        .into_iter()
        .filter(|(key, (_, waits_here))| *waits_here && !wanted.contains(key.as_str()))
        .map(|(key, (id, _))| (id, key))
        .collect();
    for (id, key) in gone {
        desk.act(id, Action::Cancel, &format!("{key} going away"))?;
        desk.cx.record_job(
            id,
            kind,
            format!("cancelled: {key} went away before it was placed"),
        )?;
    }
    Ok(())
}
