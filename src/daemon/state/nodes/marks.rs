//! What the fleet view says beside a pool or a node whose capacity is bought: nodes coming
//! (how many, at what price, ready when), a spot notice (gone when), the pool passed over and
//! why (the planner buys elsewhere meanwhile), and when each idle node is given back. The
//! console shows these; `-o json` carries them (`PoolRow::notes`, `NodeView::note`).

use super::Nodes;
use crate::model::CapacityType;
use crate::model::Fleet;
use crate::model::Life;

/// `45s`, `6m40s`, `1h05m`.
pub fn span(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 if s.is_multiple_of(60) => format!("{}m", s / 60),
        60..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

impl Nodes {
    /// Each pool's nodes, by pool.
    pub(in crate::daemon::state) fn nodes_by_pool(&self) -> Vec<Vec<usize>> {
        let mut by = vec![Vec::new(); self.pools.len()];
        for (i, &(pool, _)) in self.slot_of.iter().enumerate() {
            by[pool].push(i);
        }
        by
    }

    /// When node `i`, empty in a pool that buys and gives back, is given back (`None` where
    /// it is not: busy, reserved, or kept as one of the pool's `min_nodes`). `up`: the pool's
    /// nodes up now.
    fn given_back_at(&self, i: usize, up: usize) -> Option<f64> {
        let pool = self.slot_of[i].0;
        let p = &self.pools[pool];
        if self.lives[i] != Life::Up
            || p.capacity == CapacityType::Reserved
            || self.provisioners[pool].is_none()
        {
            return None;
        }
        let since = self.empty_since[i]?;
        (up > p.min_nodes as usize).then_some(since + self.scale.idle_window_s)
    }

    /// Pool `pool`'s nodes up now (`of_pool`: its nodes).
    fn up_of(&self, of_pool: &[usize]) -> usize {
        of_pool
            .iter()
            .filter(|&&k| self.lives[k] == Life::Up)
            .count()
    }

    /// What a job waiting for capacity is told of the buying under way: the nodes coming (the
    /// first ready when) and the pools passed over now, with why — so `gantry explain` shows
    /// the fallback taken. Empty when nothing is being bought or passed over.
    /// The nodes being bought and when each is expected to take work (one overdue: now).
    pub(in crate::daemon::state) fn coming(&self, now: f64) -> Vec<(f64, crate::model::NodeId)> {
        self.coming_at
            .iter()
            .filter(|(i, _)| self.lives[**i] == Life::Provisioning)
            .map(|(i, at)| (at.max(now), crate::model::NodeId(*i as u32)))
            .collect()
    }

    pub(in crate::daemon::state) fn buying_now(&self, fleet: &Fleet, now: f64) -> String {
        let mut text = String::new();
        let mut coming: Vec<(usize, f64)> = self
            .coming_at
            .iter()
            .filter(|(i, _)| self.lives[**i] == Life::Provisioning)
            .map(|(i, at)| (*i, *at))
            .collect();
        coming.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        if let Some(&(i, at)) = coming.first() {
            text.push_str(&format!(
                "; {} node(s) being bought, first {} ({}){}",
                coming.len(),
                fleet.nodes[i].name,
                fleet.pool_path(fleet.nodes[i].pool),
                if at > now {
                    format!(" ready in ~{}", span(at - now))
                } else {
                    " starting".to_string()
                }
            ));
        }
        for (pool, until) in self.unavailable.iter().enumerate() {
            if let Some(until) = until.filter(|&u| u > now) {
                text.push_str(&format!(
                    "; {} passed over for {}: {}",
                    fleet.pool_path(crate::model::PoolId(pool as u32)),
                    span(until - now),
                    crate::untrusted::bounded(&self.passed_over[pool], 120)
                ));
            }
        }
        text
    }

    /// What node `i`'s row says beside its state, if anything (`of_pool`: its pool's nodes).
    pub(in crate::daemon::state) fn node_note(
        &self,
        now: f64,
        i: usize,
        of_pool: &[usize],
    ) -> Option<String> {
        match self.lives[i] {
            Life::Provisioning => {
                let at = *self.coming_at.get(&i)?;
                Some(if self.unconnected.contains(&i) {
                    "running; waiting for its agent to answer".to_string()
                } else if at > now {
                    format!("coming: ready in ~{}", span(at - now))
                } else {
                    format!("coming: {} past its usual start", span(now - at))
                })
            }
            Life::Noticed => Some(match self.going_at.get(&i) {
                Some(&at) if at > now => format!("spot notice: taken back in {}", span(at - now)),
                _ => "spot notice: being taken back".to_string(),
            }),
            Life::Up => {
                let at = self.given_back_at(i, self.up_of(of_pool))?;
                let since = self.empty_since[i].unwrap_or(now);
                Some(format!(
                    "idle {}: given back in {}",
                    span(now - since),
                    span(at - now)
                ))
            }
            _ => None,
        }
    }

    /// What pool `pool`'s row says: its coming nodes, notices, idle nodes going, and whether it
    /// is passed over (and why), after `first` (why the pool has no nodes, if it says).
    /// (`of_pool`: its nodes).
    pub(in crate::daemon::state) fn pool_notes(
        &self,
        (fleet, now): (&Fleet, f64),
        pool: usize,
        of_pool: &[usize],
        first: Option<String>,
    ) -> Vec<String> {
        let p = &self.pools[pool];
        let up = self.up_of(of_pool);
        let mut notes = Vec::new();
        notes.extend(first);
        let coming: Vec<f64> = of_pool
            .iter()
            .filter(|&&i| self.lives[i] == Life::Provisioning)
            .filter_map(|i| self.coming_at.get(i).copied())
            .collect();
        if !coming.is_empty() {
            let first = coming.iter().copied().fold(f64::INFINITY, f64::min);
            notes.push(format!(
                "+{} coming (+${:.2}/h){}",
                coming.len(),
                p.price_per_hour * coming.len() as f64,
                if first > now {
                    format!(", first ready in ~{}", span(first - now))
                } else {
                    String::new()
                }
            ));
        }
        let noticed = of_pool
            .iter()
            .filter(|&&i| self.lives[i] == Life::Noticed)
            .count();
        if noticed > 0 {
            notes.push(format!("{noticed} under spot notice"));
        }
        if let Some(until) = self.unavailable[pool].filter(|&u| u > now) {
            notes.push(format!(
                "passed over for {}: {}; buys go to the next pool by price",
                span(until - now),
                crate::untrusted::bounded(&self.passed_over[pool], 120)
            ));
        }
        if let Some(cap) = self.capped.get(&pool) {
            // The line as recorded starts with the pool's path, which the row already shows.
            let cap = cap.split_once(": ").map_or(cap.as_str(), |(_, rest)| rest);
            notes.push(crate::untrusted::bounded(cap, 160));
        }
        if let Some((i, at)) = of_pool
            .iter()
            .filter_map(|&i| self.given_back_at(i, up).map(|at| (i, at)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
        {
            notes.push(format!(
                "{} idle: given back in {}",
                fleet.nodes[i].name,
                span(at - now)
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn spans_read_as_an_operator_writes_them() {
        assert_eq!(super::span(18.4), "18s");
        assert_eq!(super::span(400.0), "6m40s");
        assert_eq!(super::span(600.0), "10m");
        assert_eq!(super::span(3900.0), "1h05m");
        assert_eq!(super::span(-3.0), "0s");
    }
}
