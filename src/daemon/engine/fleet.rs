//! The fleet as backends report it — node health, GPUs busy with foreign work, MIG mode — and
//! nodes held (pinned) for a job while the jobs on them move away.

use super::*;

impl Engine {
    /// A backend reports a node's health (provisioned, cordoned by a notice, gone, failed).
    pub fn set_health(&mut self, node: crate::model::NodeId, health: crate::model::Health) {
        self.cluster.set_health(node, health);
    }

    /// A backend reports a GPU busy with processes gantry did not start: it is taken out of
    /// what the scheduler can hand out until `release_gpu`. False (nothing changed) if gantry
    /// has work on it, it is already held, or it does not exist.
    pub fn hold_gpu(&mut self, node: crate::model::NodeId, gpu: u8) -> bool {
        if self.held.contains_key(&(node.0, gpu)) {
            return false;
        }
        let Some(g) = self
            .fleet()
            .nodes
            .get(node.index())
            .and_then(|n| n.gpus.get(usize::from(gpu)))
        else {
            return false;
        };
        if !g.is_idle() || g.mig.is_some() {
            return false;
        }
        let hold = Placement {
            level: crate::model::DomainLevel::Node,
            nodes: vec![crate::model::NodeGrant {
                node,
                cpu_milli: 0,
                mem_mib: 0,
                gpus: vec![crate::model::GpuGrant {
                    gpu,
                    share: crate::model::GpuShare::Whole,
                    vram_mib: g.vram_free_mib,
                }],
            }],
            price_per_hour: 0.0,
        };
        if self.cluster.allocate(&hold).is_err() {
            return false;
        }
        self.held.insert((node.0, gpu), hold);
        true
    }

    /// A backend reports a GPU's MIG mode: an idle GPU follows it (a busy one keeps its
    /// mode until it is free). True if the mode changed.
    pub fn set_mig_mode(&mut self, node: crate::model::NodeId, gpu: u8, on: bool) -> bool {
        self.cluster.set_mig_mode(node, usize::from(gpu), on)
    }

    /// Gives a held GPU back to the scheduler (its foreign processes are gone).
    pub fn release_gpu(&mut self, node: crate::model::NodeId, gpu: u8) -> bool {
        match self.held.remove(&(node.0, gpu)) {
            Some(hold) => self.cluster.release(&hold).is_ok(),
            None => false,
        }
    }

    /// Whether a GPU is held for work gantry did not start.
    pub fn is_held(&self, node: crate::model::NodeId, gpu: u8) -> bool {
        self.held.contains_key(&(node.0, gpu))
    }

    /// Holds `node` for pending job `job` while the jobs on it move away.
    pub fn pin(&mut self, node: crate::model::NodeId, job: JobId, now: f64) {
        self.pins.insert(node.0, (job, now));
    }

    /// The nodes held for a job, and for which job since when.
    pub fn pins(&self) -> impl Iterator<Item = (crate::model::NodeId, JobId, f64)> + '_ {
        self.pins
            .iter()
            .map(|(&n, &(j, since))| (crate::model::NodeId(n), j, since))
    }

    /// Lets go of the pins older than `before` (their job never fitted) — and of any whose job
    /// is no longer pending.
    pub fn drop_pins(&mut self, before: f64) {
        let jobs = &self.jobs;
        self.pins.retain(|_, (j, since)| {
            *since >= before && jobs.get(j).is_some_and(|j| j.state == JobState::Pending)
        });
    }

    /// Where the jobs on `node` would go on other capacity that is up and, with `then`,
    /// where that pending job would go once they have gone — on `node` itself, or `None`
    /// (a dry run: nothing changes). `None` unless every one fits.
    pub fn moves_off(
        &mut self,
        node: crate::model::NodeId,
        jobs: &[JobId],
        then: Option<JobId>,
    ) -> Option<(
        Vec<crate::model::Placement>,
        Option<crate::model::Placement>,
    )> {
        let movers: Vec<Mover> = jobs
            .iter()
            .filter_map(|id| {
                let j = self.jobs.get(id)?;
                Some(Mover {
                    id: *id as u64,
                    placement: j.placement.as_ref()?,
                    request: &j.request,
                })
            })
            .collect();
        if movers.len() != jobs.len() {
            return None;
        }
        let then = match then {
            Some(id) => Some((id as u64, &self.jobs.get(&id)?.request)),
            None => None,
        };
        let (moves, target) = moves_off(&mut self.placer, &mut self.cluster, node, &movers, then)?;
        // The node is held for `then`: it must land there.
        if target
            .as_ref()
            .is_some_and(|p| !p.nodes.iter().all(|g| g.node == node))
        {
            return None;
        }
        Some((moves, target))
    }
}
