//! What a backend whose nodes another scheduler runs (a Slurm cluster, a Kubernetes cluster)
//! last said of each node: reachable or why not, its first sample, its foreign work, and why
//! it takes no new work — so each refresh says only what changed.

use super::{Discovery, ForeignWork, HostInfo, RunEvent};

pub(crate) struct NodeReports {
    status: Vec<Option<Result<(), String>>>,
    sampled: Vec<bool>,
    foreign: Vec<Option<Vec<ForeignWork>>>,
    cordon: Vec<Option<String>>,
}

impl NodeReports {
    pub(crate) fn new(nodes: usize) -> NodeReports {
        NodeReports {
            status: vec![None; nodes],
            sampled: vec![false; nodes],
            foreign: vec![None; nodes],
            cordon: vec![None; nodes],
        }
    }

    /// Records `now` for `host`; whether it differs from what was last said.
    pub(crate) fn status_changed(&mut self, host: usize, now: &Result<(), String>) -> bool {
        if self.status[host].as_ref() == Some(now) {
            return false;
        }
        self.status[host] = Some(now.clone());
        true
    }

    pub(crate) fn is_up(&self, host: usize) -> bool {
        self.status[host] == Some(Ok(()))
    }

    /// `host` came up: its `Up`, then — the first time — the sample that says its GPUs are
    /// not measured (`no_telemetry`; `None` where samples follow). Its foreign work is said
    /// again after.
    pub(crate) fn up(
        &mut self,
        host: usize,
        info: HostInfo,
        no_telemetry: Option<&str>,
    ) -> Vec<RunEvent> {
        let mut out = vec![RunEvent::Up { host, info }];
        if let (false, Some(no_telemetry)) = (self.sampled[host], no_telemetry) {
            self.sampled[host] = true;
            out.push(RunEvent::Sample {
                host,
                found: Discovery::Unavailable {
                    reason: no_telemetry.to_string(),
                },
                groups: Vec::new(),
            });
        }
        self.foreign[host] = None;
        out
    }

    /// Why `host`'s scheduler takes no new work there (`None`: it does), if that changed.
    pub(crate) fn cordon(&mut self, host: usize, why: Option<String>) -> Option<RunEvent> {
        if self.cordon[host] == why {
            return None;
        }
        self.cordon[host] = why.clone();
        Some(RunEvent::Cordon { host, why })
    }

    /// The foreign work on `host` now, if that changed.
    pub(crate) fn foreign(&mut self, host: usize, work: Vec<ForeignWork>) -> Option<RunEvent> {
        if self.foreign[host].as_ref() == Some(&work) {
            return None;
        }
        self.foreign[host] = Some(work.clone());
        Some(RunEvent::Foreign { host, work })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A node cordoned, then down, then back uncordoned is said to take work again (the
    /// daemon keeps a cordon across a node's absence).
    #[test]
    fn a_cordon_lifted_while_the_node_was_away_is_said() {
        let mut r = NodeReports::new(1);
        let info = || HostInfo {
            hostname: "n".into(),
            arch: String::new(),
            version: String::new(),
            gpus: Vec::new(),
            nvml: None,
            driver: None,
            runs: Vec::new(),
            addresses: Vec::new(),
        };
        assert!(r.status_changed(0, &Ok(())));
        assert_eq!(r.up(0, info(), Some("none")).len(), 2);
        assert!(r.cordon(0, Some("drained".into())).is_some());
        assert!(r.status_changed(0, &Err("gone".into())));
        assert!(r.status_changed(0, &Ok(())));
        assert_eq!(r.up(0, info(), Some("none")).len(), 1, "sampled once");
        assert!(matches!(
            r.cordon(0, None),
            Some(RunEvent::Cordon { why: None, .. })
        ));
        assert!(r.foreign(0, Vec::new()).is_some());
        assert!(r.foreign(0, Vec::new()).is_none());
    }
}
