//! Fair share: each team's usage, the GPU-seconds its jobs held, decayed with a half-life;
//! the cycle orders a class's waiting jobs by usage over the team's weight.

use super::*;

impl Engine {
    /// Counts each team's fair-share usage up to `now`: what was counted decays, and every
    /// job holding GPUs (running, or stopping after a preemption) adds what it held since
    /// usage was last counted (a run that ended meanwhile added its last piece as it ended).
    pub(super) fn count_usage(&mut self, now: f64) {
        let since = self.usage_at;
        if now <= since {
            return;
        }
        for u in &mut self.usage {
            *u = decay(*u, now - since, FAIR_SHARE_HALF_LIFE_S);
        }
        for j in self.jobs.live() {
            if let (Some(p), Some(started)) = (&j.placement, j.started_at) {
                let gpus = p.gpu_milli() as f64 / 1000.0;
                if let Some(u) = self.usage.get_mut(j.team) {
                    *u += used(gpus, since.max(started), now, now, FAIR_SHARE_HALF_LIFE_S);
                }
            }
        }
        self.usage_at = now;
    }

    /// Each team's usage at `now` from the journal's charges (the runs billed, open ones up
    /// to now), as `count_usage` would have counted it; runs older than twenty half-lives
    /// count less than a millionth and are not read.
    pub(super) fn usage_from_journal(&self, now: f64) -> Result<Vec<f64>, EngineError> {
        let mut usage = vec![0.0; self.teams.len()];
        let since = now - 20.0 * FAIR_SHARE_HALF_LIFE_S;
        self.store
            .each_gpu_time(since, now, &mut |team, gpus, from, to| {
                if let Some(t) = self.teams.iter().position(|t| t.name == team) {
                    usage[t] += used(gpus, from, to, now, FAIR_SHARE_HALF_LIFE_S);
                }
            })?;
        Ok(usage)
    }

    /// Each team's fair-share usage now (GPU-seconds, decayed), in the teams' order.
    pub fn usage(&self) -> &[f64] {
        &self.usage
    }
}
