//! Nodes of the simulated fleet's clouds as a `Provisioner`: bought nodes are ready after the
//! pool's provisioning delay; spot nodes get interruption notices (a Poisson process at the
//! pool's rate) and are taken back two minutes later; any node may fail (the daemon's
//! failure rate), a reserved one to be repaired in four hours, a cloud one terminated.

use crate::backend::{NodeEvent, Provisioner};
use crate::config::fleet::PoolConfig;
use crate::model::CapacityType;
use crate::model::SPOT_NOTICE_S;
use crate::scheduler::rng::draw_after;
use crate::scheduler::rng::Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// How long a failed reserved node is in repair.
const REPAIR_S: f64 = 4.0 * 3600.0;

/// What a node of the model is doing; the daemon keeps its own view (draining, for one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    Absent,
    Coming,
    Up,
    Noticed,
    InRepair,
}

/// A timed event; the epoch drops it if the node changed since it was set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Timer {
    Ready(usize, u64),
    Notice(usize, u64),
    Gone(usize, u64),
    Fail(usize, u64),
    Repair(usize, u64),
}

pub struct SimCloud {
    reserved: bool,
    /// Spot notices per node-hour (0: not spot).
    spot_rate: f64,
    failures_per_node_hour: f64,
    delay: f64,
    nodes: Vec<Node>,
    epochs: Vec<u64>,
    timers: BinaryHeap<Reverse<(u64, u64, Timer)>>,
    seq: u64,
    rng: Rng,
}

impl SimCloud {
    /// A pool of `hosts` node slots; the first `p.nodes` are up at `now`.
    pub fn new(
        p: &PoolConfig,
        hosts: usize,
        failures_per_node_hour: f64,
        seed: u64,
        now: f64,
    ) -> SimCloud {
        let spot = p.capacity == CapacityType::Spot;
        let mut c = SimCloud {
            reserved: p.capacity == CapacityType::Reserved,
            spot_rate: if spot {
                p.spot_interruptions_per_node_hour
            } else {
                0.0
            },
            failures_per_node_hour,
            delay: p.provisioning_delay_s(),
            nodes: vec![Node::Absent; hosts],
            epochs: vec![0; hosts],
            timers: BinaryHeap::new(),
            seq: 0,
            rng: Rng::new(seed),
        };
        for h in 0..hosts.min(p.nodes as usize) {
            c.set(h, Node::Up, now);
        }
        c
    }

    fn timer(&mut self, at: f64, t: Timer) {
        self.seq += 1;
        self.timers
            .push(Reverse((at.max(0.0).to_bits(), self.seq, t)));
    }

    /// Moves node `h` to `node`: timers set before are void; an up node draws its next spot
    /// notice and failure.
    fn set(&mut self, h: usize, node: Node, now: f64) {
        self.nodes[h] = node;
        self.epochs[h] += 1;
        if node != Node::Up {
            return;
        }
        let e = self.epochs[h];
        if self.spot_rate > 0.0 {
            let at = now + draw_after(&mut self.rng, self.spot_rate);
            self.timer(at, Timer::Notice(h, e));
        }
        if self.failures_per_node_hour > 0.0 {
            let at = now + draw_after(&mut self.rng, self.failures_per_node_hour);
            self.timer(at, Timer::Fail(h, e));
        }
    }
}

impl Provisioner for SimCloud {
    fn buy(&mut self, host: usize, now: f64) -> f64 {
        if host < self.nodes.len() {
            self.set(host, Node::Coming, now);
            let e = self.epochs[host];
            self.timer(now + self.delay, Timer::Ready(host, e));
        }
        self.delay
    }

    fn give_back(&mut self, host: usize, now: f64) {
        if host < self.nodes.len() {
            self.set(host, Node::Absent, now);
        }
    }

    fn poll(&mut self, until: f64) -> Vec<(f64, NodeEvent)> {
        let mut out = Vec::new();
        while let Some(Reverse((bits, _, _))) = self.timers.peek() {
            let at = f64::from_bits(*bits);
            if at > until {
                break;
            }
            let Some(Reverse((_, _, t))) = self.timers.pop() else {
                break;
            };
            let (Timer::Ready(h, e)
            | Timer::Notice(h, e)
            | Timer::Gone(h, e)
            | Timer::Fail(h, e)
            | Timer::Repair(h, e)) = t;
            if self.epochs[h] != e {
                continue;
            }
            let event = match t {
                Timer::Ready(..) => {
                    self.set(h, Node::Up, at);
                    NodeEvent::Ready(h)
                }
                Timer::Notice(..) if self.nodes[h] == Node::Up => {
                    self.set(h, Node::Noticed, at);
                    let e = self.epochs[h];
                    self.timer(at + SPOT_NOTICE_S, Timer::Gone(h, e));
                    NodeEvent::SpotNotice {
                        host: h,
                        gone_in_s: SPOT_NOTICE_S,
                    }
                }
                Timer::Gone(..) => {
                    self.set(h, Node::Absent, at);
                    NodeEvent::Gone(h)
                }
                Timer::Fail(..) if self.nodes[h] == Node::Up => {
                    if self.reserved {
                        self.set(h, Node::InRepair, at);
                        let e = self.epochs[h];
                        self.timer(at + REPAIR_S, Timer::Repair(h, e));
                    } else {
                        self.set(h, Node::Absent, at);
                    }
                    NodeEvent::Failed {
                        host: h,
                        repair: self.reserved,
                    }
                }
                Timer::Repair(..) => {
                    self.set(h, Node::Up, at);
                    NodeEvent::Repaired(h)
                }
                _ => continue,
            };
            out.push((at, event));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(capacity: CapacityType, rate: f64) -> PoolConfig {
        let mut p: PoolConfig = toml::from_str(
            "name = \"p\"\nprovider = \"aws\"\nregion = \"r\"\nzone = \"z\"\ninstance_type = \"t\"\ncpus = 8\nmemory_gb = 64\ncapacity = \"on-demand\"\nnodes = 1\nmax_nodes = 2\nprice_per_hour = 1.0\nprovisioning_delay = \"5m\"",
        )
        .unwrap();
        p.capacity = capacity;
        p.spot_interruptions_per_node_hour = rate;
        p
    }

    #[test]
    fn a_bought_node_is_ready_after_the_delay_and_a_spot_notice_precedes_its_loss() {
        let mut c = SimCloud::new(&pool(CapacityType::Spot, 2.0), 2, 0.0, 3, 0.0);
        assert_eq!(c.buy(1, 10.0), 300.0);
        let ev = c.poll(1e6);
        assert_eq!(
            ev.iter().find(|e| e.1 == NodeEvent::Ready(1)).unwrap().0,
            310.0
        );
        for h in 0..2 {
            let notice = ev
                .iter()
                .find(|e| matches!(e.1, NodeEvent::SpotNotice { host, .. } if host == h))
                .unwrap()
                .0;
            let gone = ev.iter().find(|e| e.1 == NodeEvent::Gone(h)).unwrap().0;
            assert_eq!(gone - notice, SPOT_NOTICE_S);
        }
        assert!(ev.windows(2).all(|w| w[0].0 <= w[1].0), "in time order");
        assert!(c.poll(2e6).is_empty(), "gone nodes say nothing more");
    }

    #[test]
    fn a_reserved_node_is_repaired_and_a_node_given_back_says_nothing_more() {
        let mut c = SimCloud::new(&pool(CapacityType::Reserved, 0.0), 2, 1.0, 5, 0.0);
        c.give_back(0, 0.0);
        c.buy(1, 0.0);
        // A failure an hour: within 100 hours node 1 fails (all but surely) and is repaired.
        let ev = c.poll(100.0 * 3600.0);
        assert!(!ev.iter().any(|e| matches!(
            e.1,
            NodeEvent::Failed { host: 0, .. } | NodeEvent::Repaired(0)
        )));
        let (at, _) = ev
            .iter()
            .find(|e| {
                e.1 == NodeEvent::Failed {
                    host: 1,
                    repair: true,
                }
            })
            .expect("node 1 failed");
        let repaired = ev.iter().find(|e| e.1 == NodeEvent::Repaired(1)).unwrap();
        assert_eq!(repaired.0 - at, REPAIR_S);
    }
}
