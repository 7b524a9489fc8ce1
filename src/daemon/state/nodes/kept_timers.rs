//! The operator's timers kept across restarts (docs/daemon.md, "Timers a promise depends on"):
//! since when each bought node is empty (`[scale] scale_down_after` gives it back after), and
//! until when a pool is passed over (a refused buy; machines that never answered, the count
//! doubling the pause). Kept in the journal on the wall clock, so that a daemon restarting more
//! often than the window still gives an idle node back, and a crash never buys at once from a
//! pool it had passed over — the time it was down counts, as it does for a restart's backoff.

use super::Nodes;
use crate::config::reload::key_text;
use crate::daemon::engine::EngineError;
use crate::daemon::journal::TimerRecord;
use crate::daemon::state::cx::Cx;
use crate::model::Life;

/// What a timer's key starts with: a node's empty-since, a pool's pass-over.
const EMPTY: &str = "empty/";
const PASSED: &str = "passed/";

fn empty_key(node: &str) -> String {
    format!("{EMPTY}{node}")
}

fn passed_key(pool: &crate::config::fleet::PoolConfig) -> String {
    format!("{PASSED}{}", key_text(pool))
}

impl Nodes {
    /// At open: what the last daemon kept — each pool passed over (until then, on this clock)
    /// and the empty-since of each bought node, taken when the node is up again.
    pub(in crate::daemon::state) fn restore_timers(
        &mut self,
        cx: &mut Cx,
    ) -> Result<(), EngineError> {
        let kept = cx.engine.timers()?;
        // By the wall clock's distance from now: the calendar maps a moment of an earlier run
        // that came after its last saved clock to this start, which would start each window
        // again at a restart.
        let wall_now = cx.calendar.unix(cx.now);
        for t in kept {
            let at = cx.now + (t.unix - wall_now);
            if let Some(node) = t.key.strip_prefix(EMPTY) {
                self.restored_empty.insert(node.to_string(), at);
            } else if let Some(key) = t.key.strip_prefix(PASSED) {
                let Some(pool) = self.pools.iter().position(|p| key_text(p) == key) else {
                    continue;
                };
                self.unreached[pool] = t.count;
                if at > cx.now {
                    self.unavailable[pool] = Some(at);
                    self.passed_over[pool] = t.why;
                }
            }
        }
        Ok(())
    }

    /// Node `i` is empty since `since` (`None`: it holds work, or was given back); kept for a
    /// bought machine.
    pub(in crate::daemon::state) fn set_empty_since(
        &mut self,
        cx: &mut Cx,
        i: usize,
        since: Option<f64>,
    ) {
        self.empty_since[i] = since;
        if !self.is_machine(i) {
            return;
        }
        let key = empty_key(&cx.node_name(i));
        // Only an up node's window is a promise (one not bought is empty, and nothing's).
        let up = self.lives[i] == Life::Up;
        let kept = match since.filter(|_| up) {
            Some(t) => {
                let unix = cx.calendar.unix(t);
                cx.engine.set_timer(&TimerRecord {
                    key,
                    unix,
                    count: 0,
                    why: String::new(),
                })
            }
            None => cx.engine.clear_timer(&key),
        };
        if let Err(e) = kept {
            cx.warn(format!("keeping a node's empty-since in the journal: {e}"));
        }
    }

    /// A bought node is up: empty since now, or since when the last daemon saw it empty (a
    /// restart does not start its window again).
    pub(in crate::daemon::state) fn empty_since_up(&mut self, cx: &mut Cx, i: usize) {
        let name = cx.node_name(i);
        let since = self
            .restored_empty
            .remove(&name)
            .filter(|&t| t <= cx.now)
            .unwrap_or(cx.now);
        self.set_empty_since(cx, i, Some(since));
    }

    /// Pool `pool` is passed over until `until`, because `why`; kept with the count of its
    /// machines in a row that never answered.
    pub(in crate::daemon::state) fn pass_over(
        &mut self,
        cx: &mut Cx,
        pool: usize,
        until: f64,
        why: String,
    ) {
        self.unavailable[pool] = Some(until);
        self.passed_over[pool] = why.clone();
        self.keep_pool_timer(cx, pool, until, why);
    }

    /// A machine of `pool` answered: its count of machines in a row that never did starts
    /// again.
    pub(in crate::daemon::state) fn reset_unreached(&mut self, cx: &mut Cx, pool: usize) {
        if self.unreached[pool] == 0 {
            return;
        }
        self.unreached[pool] = 0;
        let until = self.unavailable[pool].unwrap_or(cx.now);
        let why = self.passed_over[pool].clone();
        self.keep_pool_timer(cx, pool, until, why);
    }

    fn keep_pool_timer(&mut self, cx: &mut Cx, pool: usize, until: f64, why: String) {
        let record = TimerRecord {
            key: passed_key(&self.pools[pool]),
            unix: cx.calendar.unix(until),
            count: self.unreached[pool],
            why,
        };
        if let Err(e) = cx.engine.set_timer(&record) {
            cx.warn(format!("keeping a pool's pass-over in the journal: {e}"));
        }
    }
}
