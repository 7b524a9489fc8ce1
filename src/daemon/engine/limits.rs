//! Per-user limits (`[[users]]`, and the teams' `max_*_per_user`): the GPUs and dollars an
//! hour one user's running jobs may hold at once, whatever their team — beside the team's
//! quota (whose GPUs) and budget (whose money). A cycle holds back the pending jobs that would
//! take their user past a limit, in queue order, and says why; what is already running is
//! never stopped for it.
//!
//! The bound is kept exactly: a job counts for the most it may take (its largest shape; its
//! GPUs at the dearest price it may land at), so the cycle can start everything it is given
//! without passing a limit. The cost: a user's waiting job that needs no room may wait behind
//! an earlier one of theirs that fits under the limit but finds no capacity.

use super::*;
use crate::scheduler::cycle::PendingReason;

/// One user's limits (either may be absent).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limit {
    pub gpus: Option<f64>,
    pub dollars_per_hour: Option<f64>,
}

impl Limit {
    fn is_none(&self) -> bool {
        self.gpus.is_none() && self.dollars_per_hour.is_none()
    }
}

/// Every user limit of the fleet file.
#[derive(Clone, Debug, Default)]
pub struct UserLimits {
    /// Per team (its `max_*_per_user`), in the engine's team order.
    pub per_team: Vec<Limit>,
    /// `[[users]]`, by name: these win over the team's.
    pub users: HashMap<String, Limit>,
}

impl Engine {
    pub fn set_user_limits(&mut self, limits: UserLimits) {
        self.user_limits = limits;
    }

    /// The limit that applies to `user`'s job of team `team`, and where it was set.
    fn limit_of(&self, user: &str, team: usize) -> Option<(Limit, String)> {
        if let Some(l) = self.user_limits.users.get(user) {
            return Some((*l, "[[users]]".to_string()));
        }
        let l = self.user_limits.per_team.get(team).copied()?;
        (!l.is_none()).then(|| {
            (
                l,
                format!("team {}'s max_*_per_user", self.teams[team].name),
            )
        })
    }

    /// The most one GPU-hour may cost where a job of `request` may land.
    fn dearest_gpu_hour(&self, request: &JobRequest) -> f64 {
        let fleet = self.cluster.fleet();
        fleet
            .pools
            .iter()
            .filter(|p| p.model.is_some_and(|m| request.models.rank(m).is_some()))
            .map(|p| p.price_per_gpu_hour())
            .fold(0.0, f64::max)
    }

    /// Pending jobs this cycle holds back for their user's limits, and why.
    pub(super) fn over_user_limits(&self) -> HashMap<JobId, PendingReason> {
        let mut held = HashMap::new();
        if self.user_limits.users.is_empty() && self.user_limits.per_team.iter().all(Limit::is_none)
        {
            return held;
        }
        // What each user's jobs hold now (GPUs in milli, $/h), those stopping included.
        let mut used: HashMap<&str, (u64, f64)> = HashMap::new();
        for j in self.jobs.live() {
            let (Some(u), Some(p)) = (&j.user, &j.placement) else {
                continue;
            };
            if matches!(j.state, JobState::Running | JobState::Preempting) {
                let e = used.entry(u.as_str()).or_default();
                e.0 += p.gpu_milli();
                e.1 += p.price_per_hour;
            }
        }
        let mut waiting: Vec<&Job> = self
            .jobs
            .live()
            .filter(|j| j.state == JobState::Pending && j.user.is_some())
            .collect();
        waiting.sort_by(|a, b| {
            let v = |j: &Job| self.classes[j.class].value;
            v(b).cmp(&v(a))
                .then(a.submitted_at.total_cmp(&b.submitted_at))
                .then(a.id.cmp(&b.id))
        });
        for j in waiting {
            let user = j.user.as_deref().unwrap_or_default();
            let Some((limit, set_by)) = self.limit_of(user, j.team) else {
                continue;
            };
            let wants = std::iter::once(&j.request)
                .chain(&j.alternatives)
                .map(JobRequest::total_gpu_milli)
                .max()
                .unwrap_or(0);
            let dearest = self.dearest_gpu_hour(&j.request);
            let wants_dollars = wants as f64 / 1000.0 * dearest;
            let now = used.entry(user).or_default();
            let over_gpus = limit
                .gpus
                .filter(|max| (now.0 + wants) as f64 / 1000.0 > max + 1e-9);
            let over_dollars = limit.dollars_per_hour.filter(|max| {
                now.1 + wants_dollars > max + 1e-9 || (wants_dollars == 0.0 && now.1 >= *max)
            });
            let reason = match (over_gpus, over_dollars) {
                (Some(max), _) => Some(PendingReason::UserLimit {
                    user: user.to_string(),
                    resource: "GPUs".to_string(),
                    used: now.0 as f64 / 1000.0,
                    wants: wants as f64 / 1000.0,
                    limit: max,
                    set_by: set_by.clone(),
                }),
                (None, Some(max)) => Some(PendingReason::UserLimit {
                    user: user.to_string(),
                    resource: "$/h".to_string(),
                    used: now.1,
                    wants: wants_dollars,
                    limit: max,
                    set_by,
                }),
                (None, None) => None,
            };
            match reason {
                Some(r) => {
                    held.insert(j.id, r);
                }
                None => {
                    now.0 += wants;
                    now.1 += wants_dollars;
                }
            }
        }
        held
    }
}
