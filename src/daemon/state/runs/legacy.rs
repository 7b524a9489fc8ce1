//! Journals of an earlier version: this host's runs were journaled as process groups (the
//! `local_runs` table) before this host became a backend like the others. They are handed to
//! this host's agent at open, or stopped where provably theirs. The one place the daemon names
//! a backend (the local one, whose runs these were); it goes once no such journal is left.

use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::state::cx::Cx;

/// (job, process group, run token) of a run that could not be handed over.
pub(in crate::daemon::state) type LegacyRun = (JobId, u32, Option<String>);

/// Process groups journaled by a daemon of an earlier version that could not be handed
/// to this host's agent: their jobs were requeued; each group is stopped only where it is
/// provably the run's. A group id that now names someone else's processes (pid reuse after
/// a reboot) is left alone, and said so.
pub(in crate::daemon::state) fn stop_legacy_orphans(
    cx: &mut Cx,
    orphans: Vec<LegacyRun>,
) -> Result<(), EngineError> {
    for (job, pgid, token) in orphans {
        use crate::backend::local::runs::{kill_orphan, Orphan};
        match kill_orphan(pgid, job, token.as_deref()) {
                Orphan::Killed => cx.record(
                    "local",
                    format!("job {job}: killed process group {pgid} left from before the restart; the job was requeued"),
                )?,
                Orphan::NotOurs => cx.record(
                    "local",
                    format!("job {job}: process group {pgid} is alive but not provably this job's (its id was reused): left alone; the job was requeued"),
                )?,
                Orphan::Gone => {}
            }
    }
    Ok(())
}

/// Hands the runs a daemon of an earlier version journaled as this host's process groups to
/// this host's agent directory, where the local pool's agent re-adopts them like any host's
/// (the journal keeps them as runs on hosts from then on). Rows without a run token (older
/// still) or a placement cannot be handed over: their (job, process group, token) are
/// returned, and their jobs are requeued by the engine.
pub(in crate::daemon::state) fn migrate_local_runs(
    store: &mut crate::daemon::journal::Store,
    dirs: &crate::backend::agent::AgentDirs,
) -> Result<Vec<LegacyRun>, EngineError> {
    let mut orphans = Vec::new();
    for r in store.local_runs()? {
        match (r.token, r.placement, r.started_at) {
            (Some(token), Some(placement), Some(started_at)) => {
                crate::backend::agent::record_run(dirs, r.job, r.pgid, &token, None).map_err(
                    |e| {
                        EngineError::Backend(format!(
                            "cannot hand job {}'s process group to {}: {e}",
                            r.job,
                            dirs.runs.display()
                        ))
                    },
                )?;
                store.add_remote_run(&crate::daemon::journal::RemoteRunRecord {
                    job: r.job,
                    token,
                    placement,
                    started_at,
                    nodes: None,
                })?;
            }
            (token, _, _) => orphans.push((r.job, r.pgid, token)),
        }
        store.remove_local_run(r.job)?;
    }
    Ok(orphans)
}
