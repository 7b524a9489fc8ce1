//! What the fleet view says beside a pool or a node whose capacity is bought: nodes coming
//! (how many, at what price, ready when), a spot notice (gone when), the pool passed over and
//! why (the planner buys elsewhere meanwhile), and when each idle node is given back. The
//! console shows these; `-o json` carries them (`PoolRow::notes`, `NodeView::note`).

use super::{Life, State};
use crate::model::CapacityType;

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

impl State {
    /// Each pool's nodes, by pool.
    pub(super) fn nodes_by_pool(&self) -> Vec<Vec<usize>> {
        let mut by = vec![Vec::new(); self.nodes.pools.len()];
        for (i, n) in self.engine.fleet().nodes.iter().enumerate() {
            by[n.pool.index()].push(i);
        }
        by
    }

    /// When node `i`, empty in a pool that buys and gives back, is given back (`None` where
    /// it is not: busy, reserved, or kept as one of the pool's `min_nodes`). `up`: the pool's
    /// nodes up now.
    fn given_back_at(&self, i: usize, up: usize) -> Option<f64> {
        let pool = self.engine.fleet().nodes[i].pool.index();
        let p = &self.nodes.pools[pool];
        if self.nodes.lives[i] != Life::Up
            || p.capacity == CapacityType::Reserved
            || self.nodes.provisioners[pool].is_none()
        {
            return None;
        }
        let since = self.nodes.empty_since[i]?;
        (up > p.min_nodes as usize).then_some(since + self.nodes.scale.idle_window_s)
    }

    /// Pool `pool`'s nodes up now (`of_pool`: its nodes).
    fn up_of(&self, of_pool: &[usize]) -> usize {
        of_pool
            .iter()
            .filter(|&&k| self.nodes.lives[k] == Life::Up)
            .count()
    }

    /// What a job waiting for capacity is told of the buying under way: the nodes coming (the
    /// first ready when) and the pools passed over now, with why — so `gantry explain` shows
    /// the fallback taken. Empty when nothing is being bought or passed over.
    pub(super) fn buying_now(&self) -> String {
        let now = self.now;
        let mut text = String::new();
        let mut coming: Vec<(usize, f64)> = self
            .nodes
            .coming_at
            .iter()
            .filter(|(i, _)| self.nodes.lives[**i] == Life::Provisioning)
            .map(|(i, at)| (*i, *at))
            .collect();
        coming.sort_by(|a, b| a.1.total_cmp(&b.1).then(a.0.cmp(&b.0)));
        if let Some(&(i, at)) = coming.first() {
            text.push_str(&format!(
                "; {} node(s) being bought, first {} ({}){}",
                coming.len(),
                self.node_name(i),
                self.pool_path_of(i),
                if at > now {
                    format!(" ready in ~{}", span(at - now))
                } else {
                    " starting".to_string()
                }
            ));
        }
        for (pool, until) in self.nodes.unavailable.iter().enumerate() {
            if let Some(until) = until.filter(|&u| u > now) {
                text.push_str(&format!(
                    "; {} passed over for {}: {}",
                    self.engine
                        .fleet()
                        .pool_path(crate::model::PoolId(pool as u32)),
                    span(until - now),
                    crate::untrusted::bounded(&self.nodes.passed_over[pool], 120)
                ));
            }
        }
        text
    }

    /// What node `i`'s row says beside its state, if anything (`of_pool`: its pool's nodes).
    pub(super) fn node_note(&self, i: usize, of_pool: &[usize]) -> Option<String> {
        let now = self.now;
        match self.nodes.lives[i] {
            Life::Provisioning => {
                let at = *self.nodes.coming_at.get(&i)?;
                Some(if self.nodes.unconnected.contains(&i) {
                    "running; waiting for its agent to answer".to_string()
                } else if at > now {
                    format!("coming: ready in ~{}", span(at - now))
                } else {
                    format!("coming: {} past its usual start", span(now - at))
                })
            }
            Life::Noticed => Some(match self.nodes.going_at.get(&i) {
                Some(&at) if at > now => format!("spot notice: taken back in {}", span(at - now)),
                _ => "spot notice: being taken back".to_string(),
            }),
            Life::Up => {
                let at = self.given_back_at(i, self.up_of(of_pool))?;
                let since = self.nodes.empty_since[i].unwrap_or(now);
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
    /// is passed over (and why).
    /// (`of_pool`: its nodes).
    pub(super) fn pool_notes(&self, pool: usize, of_pool: &[usize]) -> Vec<String> {
        let now = self.now;
        let p = &self.nodes.pools[pool];
        let up = self.up_of(of_pool);
        let mut notes = Vec::new();
        // A pool built from a cluster that could not be read: why it has no nodes.
        let name = &self.engine.fleet().pools[pool].name;
        notes.extend(self.opened.opts.cluster_built.why_empty(name));
        let coming: Vec<f64> = of_pool
            .iter()
            .filter(|&&i| self.nodes.lives[i] == Life::Provisioning)
            .filter_map(|i| self.nodes.coming_at.get(i).copied())
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
            .filter(|&&i| self.nodes.lives[i] == Life::Noticed)
            .count();
        if noticed > 0 {
            notes.push(format!("{noticed} under spot notice"));
        }
        if let Some(until) = self.nodes.unavailable[pool].filter(|&u| u > now) {
            notes.push(format!(
                "passed over for {}: {}; buys go to the next pool by price",
                span(until - now),
                crate::untrusted::bounded(&self.nodes.passed_over[pool], 120)
            ));
        }
        if let Some(cap) = self.nodes.capped.get(&pool) {
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
                self.node_name(i),
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
