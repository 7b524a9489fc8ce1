//! Into a running job (`POST /v1/jobs/{id}/exec`): which node of the job, and the command that
//! reaches into its run there — asked of the node's runner, so nothing here knows which
//! backend a pool is.

use super::{PartState, Runs};
use crate::api::JobState;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::JobId;
use crate::daemon::refusal::{Kind, Refusal};
use crate::daemon::state::cx::Cx;

/// The error code of a node whose part has not started yet (the API waits a while for it).
pub const STARTING: &str = "starting";

/// A job's node to enter, and how.
pub struct Entering {
    /// The job's team (whose researchers and the operators may enter it).
    pub team: String,
    pub rank: usize,
    pub node: String,
    /// Run on the daemon's host: becomes the command inside the run (`Runner::enter`).
    pub command: std::process::Command,
}

impl Runs {
    /// How to run `argv` (a shell when empty) in node `rank` (default 0) of job `id`, for
    /// `caller`: the job's team's researchers and the operators only. Journaled as an event of
    /// the job (who entered, where, to run what).
    pub(in crate::daemon::state) fn enter(
        &self,
        cx: &mut Cx,
        caller: &crate::daemon::auth::Caller,
        id: JobId,
        rank: Option<usize>,
        tty: bool,
        argv: &[String],
    ) -> Result<Entering, Refusal> {
        let (state, team) = match cx.engine.job(id) {
            Some(j) => (j.state, cx.engine.teams()[j.team].name.clone()),
            None => {
                let r = cx.engine.job_record(id)?.ok_or(EngineError::NoJob(id))?;
                (r.state, r.team)
            }
        };
        if !caller.may_change(&team) {
            return Err(Refusal::forbidden(format!(
                "job {id} is team {team}'s: only its researchers and the operators may run commands in it"
            )));
        }
        let conflict = |why: String| Refusal::new(Kind::Conflict, "conflict", why);
        if state != JobState::Running {
            return Err(conflict(if state.is_final() {
                format!("job {id} has ended ({state}): nothing runs to enter (its output: gantry logs {id})")
            } else {
                format!("job {id} is {state}: nothing runs yet (gantry explain {id} says why)")
            }));
        }
        let run = self.by_job.get(&id).ok_or_else(|| {
            conflict(format!(
                "job {id} runs on the simulated fleet, which runs no processes to enter"
            ))
        })?;
        let rank = rank.unwrap_or(0);
        let part = run.parts.get(rank).ok_or_else(|| {
            Refusal::bad_request(format!(
                "job {id} has {} node{} (ranks 0 to {}): no node {rank}",
                run.parts.len(),
                if run.parts.len() == 1 { "" } else { "s" },
                run.parts.len().saturating_sub(1)
            ))
        })?;
        let node = cx.node_name(part.node);
        match part.state {
            PartState::Running => {}
            PartState::Starting => {
                return Err(Refusal::new(
                    Kind::Conflict,
                    STARTING,
                    format!("job {id}'s node {rank} ({node}) is still starting (its workdir copied, its setup run): try again in a moment"),
                ))
            }
            PartState::Exited(_) => {
                return Err(conflict(format!(
                    "job {id}'s process on node {rank} ({node}) has exited"
                )))
            }
        }
        if let Some((_, why)) = self.down.get(&part.node) {
            return Err(conflict(format!(
                "node {rank} of job {id} ({node}) is unreachable now: {why}"
            )));
        }
        let &(pool, host) = self
            .at
            .get(&part.node)
            .ok_or_else(|| conflict(format!("job {id}'s node {node} is no longer in the fleet")))?;
        let command = self.runners[pool]
            .enter(host, id, tty, argv)
            .map_err(|why| conflict(format!("job {id} on {node}: {why}")))?;
        let what = exec_said(argv);
        let who = match &caller.user {
            Some(u) => format!("{u} ({})", caller.name),
            None => caller.name.clone(),
        };
        cx.record_job(
            id,
            "exec",
            format!("{who} runs {what} on node {rank} ({node})"),
        )?;
        Ok(Entering {
            team,
            rank,
            node,
            command,
        })
    }
}

/// What the event log says a session ran: the program and how many arguments it had, never
/// the arguments. Events are every viewer's and every team's to read, and a command line
/// carries tokens as often as not (`huggingface-cli login --token hf_…`).
fn exec_said(argv: &[String]) -> String {
    let Some((program, args)) = argv.split_first() else {
        return "a shell".to_string();
    };
    // The program's own name: a path can name a user's private directory.
    let name = program.rsplit('/').next().unwrap_or(program);
    let name = crate::untrusted::bounded(name, 40);
    match args.len() {
        0 => format!("`{name}`"),
        1 => format!("`{name}` (1 argument, not recorded)"),
        n => format!("`{name}` ({n} arguments, not recorded)"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_exec_event_names_the_program_never_its_arguments() {
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let said = super::exec_said(&argv(&["huggingface-cli", "login", "--token", "hf_secret"]));
        assert_eq!(said, "`huggingface-cli` (3 arguments, not recorded)");
        assert!(!super::exec_said(&argv(&["/home/a/bin/x", "hf_secret"])).contains("hf_"));
        assert_eq!(
            super::exec_said(&argv(&["/usr/bin/nvidia-smi"])),
            "`nvidia-smi`"
        );
        assert_eq!(super::exec_said(&[]), "a shell");
    }
}
