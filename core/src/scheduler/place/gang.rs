//! Gangs: all-or-nothing, in the smallest topology domain that holds them.

use super::*;

impl Placer {
    /// `job.nodes` eligible nodes inside one domain of the smallest level that holds them
    /// (NVLink domain, leaf, zone): in each fitting domain its best members by key then node
    /// id, and the domain chosen by model rank, slack (packers take the tightest), score and
    /// price.
    pub(super) fn select_gang(
        &self,
        cluster: &Cluster,
        cands: &[Candidate],
        job: &JobRequest,
        rng: &mut Rng,
    ) -> Option<Placement> {
        let fleet = cluster.fleet();
        let need = usize::from(job.nodes);
        if cands.iter().map(|c| c.class.members.len()).sum::<usize>() < need {
            return None;
        }
        for level in [DomainLevel::Nvlink, DomainLevel::Leaf, DomainLevel::Zone] {
            if cluster.largest_domain(level) < need {
                continue;
            }
            // Count per domain first, then gather only the domains that hold the gang: on a
            // large fleet most eligible nodes sit in domains too small for it.
            let mut count = vec![0usize; cluster.domain_count(level)];
            for c in cands {
                if level == DomainLevel::Zone {
                    // A class's nodes share a pool, hence a zone.
                    let zone = c
                        .class
                        .members
                        .first()
                        .and_then(|&n| cluster.domain(n, level));
                    if let Some(x) = zone.and_then(|d| count.get_mut(d)) {
                        *x += c.class.members.len();
                    }
                    continue;
                }
                for &n in &c.class.members {
                    if let Some(x) = cluster.domain(n, level).and_then(|d| count.get_mut(d)) {
                        *x += 1;
                    }
                }
            }
            // `count` now maps a fitting domain to its place in `fitting` (ascending ids).
            let mut fitting: Vec<(u32, Vec<usize>)> = Vec::new();
            for (d, c) in count.iter_mut().enumerate() {
                if *c >= need {
                    fitting.push((d as u32, Vec::with_capacity(*c)));
                    *c = fitting.len();
                } else {
                    *c = 0;
                }
            }
            if fitting.is_empty() {
                continue;
            }
            // Every node in a fitting domain with its class's key and pick.
            let mut eligible: Vec<(u32, Key, Pick)> = Vec::new();
            for c in cands {
                for &n in &c.class.members {
                    let at = cluster
                        .domain(n, level)
                        .and_then(|d| count.get(d).copied())
                        .unwrap_or(0);
                    if at > 0 {
                        fitting[at - 1].1.push(eligible.len());
                        eligible.push((n, c.key, c.pick));
                    }
                }
            }
            let better = |a: &usize, b: &usize| {
                let (x, y) = (&eligible[*a], &eligible[*b]);
                x.1.cmp(&y.1).then(x.0.cmp(&y.0))
            };
            // Each domain's best `need` members first, in order; the rest stay unsorted (a
            // linear selection, not a sort of every eligible node).
            for (_, members) in fitting.iter_mut() {
                if members.len() > need {
                    members.select_nth_unstable_by(need - 1, better);
                }
                members[..need].sort_by(better);
            }
            let chosen = if self.policy == Policy::Random {
                let (_, members) = &fitting[rng.below(fitting.len() as u64) as usize];
                let mut m = members.clone();
                rng.shuffle(&mut m);
                m.truncate(need);
                m
            } else {
                let packs = self.policy.packs();
                let (_, members) = fitting.iter().min_by(|(da, a), (db, b)| {
                    let sum = |v: &Vec<usize>, f: &dyn Fn(&Key) -> f64| {
                        v[..need].iter().map(|&i| f(&eligible[i].1)).sum::<f64>()
                    };
                    let rank = |v: &Vec<usize>| {
                        v[..need]
                            .iter()
                            .map(|&i| u32::from(eligible[i].1.rank))
                            .sum::<u32>()
                    };
                    // Packers keep big free domains whole by taking the tightest one.
                    let slack = |v: &Vec<usize>| {
                        if packs {
                            v.len() as i64
                        } else {
                            -(v.len() as i64)
                        }
                    };
                    rank(a)
                        .cmp(&rank(b))
                        .then(slack(a).cmp(&slack(b)))
                        .then(sum(a, &|k| k.primary).total_cmp(&sum(b, &|k| k.primary)))
                        .then(sum(a, &|k| k.price).total_cmp(&sum(b, &|k| k.price)))
                        .then(da.cmp(db))
                })?;
                members[..need].to_vec()
            };
            let mut grants = Vec::with_capacity(need);
            let mut price = 0.0;
            for i in chosen {
                let (n, _, pick) = eligible[i];
                grants.push(grant_on(fleet, NodeId(n), job, pick)?);
                price += job_price_in_pool(fleet, fleet.node(NodeId(n)).pool, job);
            }
            grants.sort_by_key(|g| g.node);
            return Some(Placement {
                level,
                nodes: grants,
                price_per_hour: price,
            });
        }
        None
    }
}
