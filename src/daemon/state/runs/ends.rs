//! How a run on real hosts ends: each part's exit settles the job once every part has ended or
//! one failed (the failure said with the other ranks' state), a run sent back to the queue, and
//! a run a host has that the daemon does not expect there.

use super::{PartState, Runs};
use crate::api::JobState;
use crate::backend::Exit;
use crate::daemon::engine::{Engine, EngineError};
use crate::daemon::journal::JobId;
use crate::daemon::state::cx::Cx;
use crate::daemon::state::nodes::Nodes;

impl Runs {
    /// A run the host has that the daemon does not expect there: killed (the agent acts only
    /// on the run's own processes) and forgotten.
    pub(in crate::daemon::state) fn stray(
        &mut self,
        cx: &mut Cx,
        pool: usize,
        host: usize,
        job: JobId,
        token: &str,
        name: &str,
    ) -> Result<(), EngineError> {
        let r = &mut self.runners[pool];
        r.kill(host, job, token);
        r.forget(host, job, token);
        let kind = r.kind();
        cx.record(
            kind,
            format!(
                "job {job}: stopped a run of it left on {name} (the job was requeued meanwhile)"
            ),
        )
    }

    /// A part ended: once every part has, or one failed, the job's fate is decided.
    pub(in crate::daemon::state) fn settle(
        &mut self,
        (cx, nodes): (&mut Cx, &Nodes),
        id: JobId,
        node: usize,
        exit: Exit,
    ) -> Result<(), EngineError> {
        let name = cx.node_name(node);
        let Some(run) = self.by_job.get(&id) else {
            return Ok(());
        };
        let gang = run.parts.len() > 1;
        let journaled = run.journaled;
        let all_done = run
            .parts
            .iter()
            .all(|p| matches!(p.state, PartState::Exited(_)));
        let failed = !exit.success();
        let state = cx.engine.job(id).map(|j| j.state);
        if failed && !all_done && state == Some(JobState::Running) {
            // One node's process failed: the rest of the gang stops now.
            self.each_part(id, |r, host, token| r.kill(host, id, token));
        }
        if !all_done && !failed {
            return Ok(());
        }
        // Decided: the journal first, then the hosts may forget the run.
        match state {
            Some(JobState::Preempting) => {
                cx.engine.requeued(id, cx.now)?;
                cx.log(format!("job {id} stopped on {name} ({exit}) and requeued"));
            }
            Some(JobState::Running) if exit == Exit::Unknown => {
                cx.engine.lost(
                    id,
                    cx.now,
                    &format!("its processes on {name} are gone without an exit status (killed outright, or the host restarted): requeued from its checkpoint"),
                )?;
            }
            Some(JobState::Running) => {
                // The job's own process failed (an exit code, a signal): restarted if its spec
                // asks, else the job failed — a gang was requeued, and failed again, forever.
                // Lost hosts and vanished processes requeue above; preemptions are not
                // failures.
                let rank = self
                    .by_job
                    .get(&id)
                    .and_then(|r| r.parts.iter().position(|p| p.node == node))
                    .filter(|_| gang)
                    .map_or(String::new(), |k| format!(" (rank {k})"));
                let what = if gang && failed {
                    format!(
                        "node {name}{rank} {exit}{}: the whole gang stopped{}",
                        runtime_failure((cx.engine, nodes), id, node, exit),
                        self.other_ranks(id, node)
                    )
                } else if gang {
                    let n = self.by_job.get(&id).map_or(0, |r| r.parts.len());
                    format!("all {n} nodes {exit}")
                } else {
                    format!(
                        "{exit} on {name}{}",
                        runtime_failure((cx.engine, nodes), id, node, exit)
                    )
                };
                if !(failed && self.restarts.restarted(cx, id, exit, &what)?) {
                    let restarts = self.restarts.said(id);
                    let said = format!("{what}{restarts}");
                    cx.engine.finished_because(id, !failed, cx.now, &said)?;
                    cx.log(format!("job {id} {said}"));
                }
            }
            _ => {}
        }
        self.each_part(id, |r, host, token| r.forget(host, id, token));
        self.remove(id);
        if journaled {
            cx.engine.remove_remote_run(id)?;
        }
        Ok(())
    }

    /// How the rest of a gang stood when node `node` failed: each other rank's exit, or that
    /// gantry stopped it (` (rank 0 exited with code 0; rank 2 stopped)`).
    fn other_ranks(&self, id: JobId, node: usize) -> String {
        let Some(run) = self.by_job.get(&id) else {
            return String::new();
        };
        let said: Vec<String> = run
            .parts
            .iter()
            .enumerate()
            .filter(|(_, p)| p.node != node)
            .map(|(k, p)| match p.state {
                PartState::Exited(e) => format!("rank {k} {e}"),
                _ => format!("rank {k} stopped"),
            })
            .collect();
        if said.is_empty() {
            String::new()
        } else {
            format!(" ({})", said.join("; "))
        }
    }

    /// Kills every part of a run and sends its job back to the queue with `why`.
    pub(in crate::daemon::state) fn requeue(
        &mut self,
        cx: &mut Cx,
        id: JobId,
        why: &str,
    ) -> Result<(), EngineError> {
        self.kill(cx.engine, id)?;
        if cx.engine.job(id).is_some_and(|j| !j.state.is_final()) {
            cx.engine.lost(id, cx.now, why)?;
        }
        Ok(())
    }
}

/// What a container run's exit says of the runtime itself: docker and podman exit 125
/// when they could not run the container at all (the image not pulled, a GPU not given);
/// any other code is the job's own.
fn runtime_failure(
    (engine, nodes): (&Engine, &Nodes),
    id: JobId,
    node: usize,
    exit: Exit,
) -> String {
    let image = engine.job(id).and_then(|j| j.spec.image.clone());
    let pool = engine.fleet().nodes[node].pool.index();
    let runtime = nodes.pool(pool).container_runtime.as_deref();
    match (exit, image, runtime) {
        (Exit::Code(125), Some(image), Some(rt)) => format!(
            ": {rt} could not run a container of {image} (not pulled, or its GPUs could not be given to it; the job's stderr has {rt}'s words)"
        ),
        _ => String::new(),
    }
}
