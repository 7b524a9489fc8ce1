//! A host's runs as real processes (`backend::local::exec`), kept by `gantry agent` (on an SSH
//! host, or inside the daemon for this host): each in its own process group with its logs in
//! the agent's log directory. Exits are polled; a stop sends the spec's signal and SIGKILLs the
//! group when the grace period ends. The agent records each run in a file, so the next agent
//! re-adopts the runs still going (it is no longer their parent, so it learns how they end
//! from the exit status their group leader writes).

use crate::api::JobId;
use crate::backend::local::container::Container;
use crate::backend::local::exec::{self, Exit, LaunchSpec, Running};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// How the daemon holds a local job's processes.
pub enum Process {
    /// Started by this daemon: its child, waited on.
    Child(Running),
    /// Started by a previous daemon and re-adopted after a restart.
    Adopted,
}

pub struct LocalRun {
    pub process: Process,
    /// The process group (its leader's pid).
    pub pgid: u32,
    /// The run's token (`GANTRY_RUN_TOKEN` in its environment); `None` for runs journaled
    /// before tokens, identified by their job id instead.
    pub token: Option<String>,
    /// Daemon time at which the group is SIGKILLed (set by a stop).
    pub kill_at: Option<f64>,
    /// The run's container, where it runs in one: removed when the group is SIGKILLed (that
    /// kills only the runtime's client).
    pub container: Option<Container>,
    /// Where the run's `file_mounts` mount buckets: unmounted when it is over.
    pub mounts: Vec<String>,
}

#[derive(Default)]
pub struct LocalRuns {
    pub runs: BTreeMap<JobId, LocalRun>,
    pub log_dir: PathBuf,
    /// Runs' copies in their owners' homes (`stage`): removed, as the owner, when the run is
    /// forgotten.
    staged: BTreeMap<JobId, (crate::unix_user::Account, PathBuf)>,
}

impl LocalRuns {
    pub fn new(log_dir: PathBuf) -> LocalRuns {
        LocalRuns {
            runs: BTreeMap::new(),
            log_dir,
            staged: BTreeMap::new(),
        }
    }

    /// Starts one node's part of a job as a process group (its leader's pid returned); the
    /// error says why it could not.
    pub fn launch(&mut self, l: &crate::backend::Launch) -> Result<u32, String> {
        let container = match (&l.runtime, &l.image) {
            (Some(runtime), Some(image)) => {
                Some((Container::of(runtime, l.job, &l.token), image.clone()))
            }
            _ => None,
        };
        let owner = owner_of(l)?;
        // Someone else's run: what it reads of the agent's copies is copied to them first.
        let staged_launch;
        let l = match owner.as_ref().filter(|a| a.creds.switch_needed()) {
            Some(a) => {
                let mut copy = l.clone();
                let kept = super::stage::kept_roots(&self.log_dir);
                if let Some(dir) = super::stage::stage(a, &mut copy, &kept)? {
                    self.staged.insert(l.job, (a.clone(), dir));
                }
                staged_launch = copy;
                &staged_launch
            }
            None => l,
        };
        let running = exec::launch(&LaunchSpec {
            job: l.job,
            setup: l.setup.clone(),
            run: l.run.clone(),
            workdir: l.workdir.as_ref().map(PathBuf::from),
            envs: l.envs.clone(),
            gpu_uuids: l.gpus.clone(),
            checkpoint_dir: l.checkpoint_dir.as_ref().map(PathBuf::from),
            log_dir: self.log_dir.clone(),
            run_token: l.token.clone(),
            gang: l.gang.clone(),
            container: container.clone(),
            mount_sources: match l.envs.get("GANTRY_MOUNTS_FROM") {
                Some(root) => vec![PathBuf::from(root)],
                None => l.local_mounts.iter().map(PathBuf::from).collect(),
            },
            owner,
        })
        .map_err(|e| e.to_string())?;
        let pgid = running.pid;
        self.runs.insert(
            l.job,
            LocalRun {
                process: Process::Child(running),
                pgid,
                token: Some(l.token.clone()),
                kill_at: None,
                container: container.map(|(c, _)| c),
                mounts: l.mount_points.clone(),
            },
        );
        Ok(pgid)
    }

    /// Takes over a job a previous daemon started, if its process group still runs it or it
    /// left its exit status; false if neither (the job is lost and must be requeued).
    pub fn adopt(
        &mut self,
        id: JobId,
        pgid: u32,
        token: Option<String>,
        container: Option<Container>,
    ) -> bool {
        let known = exec::group_runs_job(pgid, id, token.as_deref())
            || exec::read_exit(&self.log_dir, id).is_some();
        if known {
            self.runs.insert(
                id,
                LocalRun {
                    process: Process::Adopted,
                    pgid,
                    token,
                    kill_at: None,
                    container,
                    mounts: Vec::new(),
                },
            );
        }
        known
    }

    /// Jobs that have exited since the last poll, with how.
    pub fn exited(&mut self) -> Vec<(JobId, Exit)> {
        let mut out = Vec::new();
        for (id, r) in &mut self.runs {
            match &mut r.process {
                Process::Child(running) => match running.try_exit() {
                    Ok(Some(exit)) => out.push((*id, exit)),
                    Ok(None) => {}
                    Err(_) => out.push((*id, Exit::Unknown)),
                },
                Process::Adopted => {
                    // The status first: a leader that wrote it may not have exited yet.
                    if let Some(exit) = exec::read_exit(&self.log_dir, *id) {
                        out.push((*id, exit));
                    } else if !exec::group_runs_job(r.pgid, *id, r.token.as_deref()) {
                        // Written between the two reads, or never (killed outright).
                        let exit = exec::read_exit(&self.log_dir, *id).unwrap_or(Exit::Unknown);
                        out.push((*id, exit));
                    }
                }
            }
        }
        for (id, _) in &out {
            let Some(r) = self.runs.remove(id) else {
                continue;
            };
            crate::backend::mounts::unmount(&r.mounts);
            if let Some(c) = r.container {
                // `--rm` removes it as it ends; podman 4.3 has been seen to leave one
                // "stopping" instead, holding its name (and, on a GPU host, its devices).
                c.remove();
            }
        }
        out
    }

    /// Sends the stop signal now; the group is killed at `kill_at` if it is still there.
    pub fn stop(&mut self, id: JobId, signal: i32, kill_at: f64) -> bool {
        match self.runs.get_mut(&id) {
            Some(r) => {
                r.signal(id, signal);
                r.kill_at = Some(kill_at);
                true
            }
            None => false,
        }
    }

    /// SIGKILLs the groups whose grace period ended by `now`.
    pub fn kill_due(&mut self, now: f64) {
        for (&id, r) in self.runs.iter_mut() {
            if r.kill_at.is_some_and(|t| t <= now) {
                r.signal(id, libc::SIGKILL);
                r.kill_at = None;
            }
        }
    }

    /// Kills a job's group at once (a cancel) and forgets it.
    pub fn kill(&mut self, id: JobId) {
        if let Some(mut r) = self.runs.remove(&id) {
            r.signal(id, libc::SIGKILL);
            if let Process::Child(running) = &mut r.process {
                let _ = running.wait();
            }
            crate::backend::mounts::unmount(&r.mounts);
        }
    }

    /// The run's end is recorded: its copy in its owner's home goes (as the owner).
    pub fn forget(&mut self, id: JobId) {
        if let Some((owner, dir)) = self.staged.remove(&id) {
            super::stage::remove_as(&owner, &dir);
        }
    }

    /// The process groups of the jobs running here (to tell gantry's GPU processes from
    /// foreign ones).
    pub fn groups(&self) -> impl Iterator<Item = (JobId, u32)> + '_ {
        self.runs.iter().map(|(id, r)| (*id, r.pgid))
    }
}

impl LocalRun {
    /// Signals the run's group: this daemon's own child always (its unreaped leader keeps the
    /// group id from being reused); an adopted group only while it is provably the run's.
    fn signal(&self, id: JobId, sig: i32) {
        match self.process {
            Process::Child(_) => exec::signal_group(self.pgid, sig),
            Process::Adopted => {
                exec::signal_group_if_ours(self.pgid, id, self.token.as_deref(), sig);
            }
        }
        if sig == libc::SIGKILL {
            if let Some(c) = &self.container {
                c.remove();
            }
        }
    }
}

/// What became of a process group a previous daemon left and this one could not re-adopt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Orphan {
    /// Provably the run's, and killed.
    Killed,
    /// Alive, but not provably the run's (its id was reused): left alone.
    NotOurs,
    /// No such group any more.
    Gone,
}

/// Kills a process group a previous daemon left, if and only if it is provably the run's.
pub fn kill_orphan(pgid: u32, job: JobId, token: Option<&str>) -> Orphan {
    if exec::signal_group_if_ours(pgid, job, token, libc::SIGKILL) {
        return Orphan::Killed;
    }
    // SAFETY: signal 0 only checks that the group exists; pgid ≤ 1 is never passed to kill.
    let alive =
        pgid > 1 && pgid <= i32::MAX as u32 && unsafe { libc::kill(-(pgid as i32), 0) } == 0;
    if alive {
        Orphan::NotOurs
    } else {
        Orphan::Gone
    }
}

/// The account a run's processes are started as, where this process is root: its job's
/// owner, who must have an account on this host. Root starts nothing for a job with no owner
/// (a token issued for nobody): its processes would be root's. Not root: the run is this
/// process's user's, whoever owns the job (`None`).
pub fn owner_of(l: &crate::backend::Launch) -> Result<Option<crate::unix_user::Account>, String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Ok(None);
    }
    let Some(name) = &l.owner else {
        return Err(format!(
            "job {} has no owner with a Unix account (submitted with a token made without --user), and this host's agent runs as root: it starts no process as root for a caller it cannot name (an operator makes tokens with `gantry token create --user NAME`)",
            l.job
        ));
    };
    crate::unix_user::account(name).map(Some).map_err(|why| {
        format!(
            "job {}'s owner: {why}, so it cannot run as them here",
            l.job
        )
    })
}
