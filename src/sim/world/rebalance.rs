//! Consolidation and defragmentation in `gantry sim`: the scheduler's one planner
//! (`scheduler::moves`) decides; the world moves jobs at once (each pays its restore).

use super::*;
use crate::scheduler::moves::{self, Candidate, Rebalance};

impl World<'_> {
    /// Consolidation, every five minutes: cloud nodes whose every job checkpoints and fits on
    /// capacity already paid for are drained (their jobs checkpoint on SIGTERM and restart
    /// there) and given back at once.
    pub(super) fn consolidate(&mut self) {
        if self.now < self.next_consolidate || !self.cfg.consolidate {
            return;
        }
        self.next_consolidate = self.now + 300.0;
        let lives: Vec<Life> = self.nodes.iter().map(|n| n.life).collect();
        let mut counts = pool_counts(self.clusters[0].fleet(), self.fleet_cfg.len(), &lives);
        let mins: Vec<u32> = self.fleet_cfg.iter().map(|p| p.min_nodes).collect();
        moves::consolidate(self, &mut counts, &mins, usize::MAX);
    }

    /// Defragmentation with checkpoints: jobs that fit nowhere and need whole GPUs on one
    /// node get a node already paid for, emptied by moving its jobs, instead of one bought
    /// for them. Jobs served this way leave `waiting`.
    pub(super) fn defragment(&mut self, waiting: &mut Vec<usize>) {
        if !self.cfg.consolidate {
            return;
        }
        let jobs = self.jobs;
        let stuck: Vec<(u64, &crate::model::JobRequest)> = waiting
            .iter()
            .map(|&w| (w as u64, &jobs[w].request))
            .collect();
        let served = moves::defragment(self, &stuck, usize::MAX);
        waiting.retain(|w| !served.contains(&(*w as u64)));
    }

    fn candidate(&self, i: usize) -> Candidate {
        let n = &self.clusters[0].fleet().nodes[i];
        Candidate {
            node: i,
            pool: self.nodes[i].pool.index(),
            used_milli: n.gpu_milli_used(),
            model: n.model,
            gpus: n.gpus.len(),
        }
    }

    /// Moves a job at once to `placement` (it checkpointed and pays its restore there).
    fn move_now(&mut self, j: usize, placement: Placement) {
        let borrowed = self.runs[j].borrowed;
        self.stop(j, false, true, JobState::Pending);
        self.start(j, placement, 0, borrowed);
        self.out.moved_jobs += 1;
    }
}

impl Rebalance for World<'_> {
    fn consolidation_candidates(&self) -> Vec<Candidate> {
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].life == Life::Up
                    && self.nodes[i].jobs > 0
                    && self.pool_cfg(i).capacity != CapacityType::Reserved
            })
            .map(|i| self.candidate(i))
            .collect()
    }

    fn defrag_candidates(&self) -> Vec<Candidate> {
        let fleet = self.clusters[0].fleet();
        (0..self.nodes.len())
            .filter(|&i| {
                self.nodes[i].life == Life::Up
                    && fleet.nodes[i].health == Health::Healthy
                    && self.nodes[i].jobs > 0
            })
            .map(|i| self.candidate(i))
            .collect()
    }

    fn jobs_on(&self, node: usize) -> Vec<u64> {
        World::jobs_on(self, node)
            .into_iter()
            .map(|j| j as u64)
            .collect()
    }

    /// It checkpoints, may be preempted, is not a service or a notebook, and sits on one
    /// node.
    fn movable(&self, job: u64) -> bool {
        let j = job as usize;
        let (job, r) = (&self.jobs[j], &self.runs[j]);
        r.state == JobState::Running
            && job.preemptible
            && job.checkpoint_s.is_some()
            && matches!(job.kind, Kind::Training | Kind::Experiment)
            && r.placement.as_ref().is_some_and(|p| p.nodes.len() == 1)
    }

    fn try_moves(
        &mut self,
        node: usize,
        jobs: &[u64],
        then: Option<u64>,
    ) -> Option<(Vec<Placement>, Option<Placement>)> {
        let sim_jobs = self.jobs;
        let movers: Vec<Mover> = jobs
            .iter()
            .map(|&j| Mover {
                id: j,
                placement: self.runs[j as usize].placement.as_ref().expect("running"),
                request: &sim_jobs[j as usize].request,
            })
            .collect();
        let then = then.map(|w| (w, &sim_jobs[w as usize].request));
        moves_off(
            &mut self.placer,
            &mut self.clusters[0],
            NodeId(node as u32),
            &movers,
            then,
        )
    }

    fn drain(&mut self, n: usize, jobs: &[u64], moves: Vec<Placement>) {
        for (&j, placement) in jobs.iter().zip(moves) {
            self.move_now(j as usize, placement);
        }
        self.set_life(n, Life::Absent);
        self.out.consolidated_nodes += 1;
        self.out.scale_downs += 1;
        let path = self.clusters[0].fleet().pool_path(self.nodes[n].pool);
        let price = self.pool_cfg(n).price_per_hour;
        self.log(format_args!(
            "{path} -1 (node {n} consolidated: {} job(s) moved to paid capacity), -${price:.2}/h",
            jobs.len()
        ));
    }

    fn empty_for(
        &mut self,
        n: usize,
        jobs: &[u64],
        moves: Vec<Placement>,
        w: u64,
        target: Placement,
    ) {
        for (&j, placement) in jobs.iter().zip(moves) {
            self.move_now(j as usize, placement);
        }
        self.out.defragmented += 1;
        let k = target.nodes.first().map_or(0, |g| g.gpus.len());
        self.log(format_args!(
            "defragment node {n}: {} job(s) moved so job {w} gets {k} GPU(s) there",
            jobs.len()
        ));
        self.start(w as usize, target, 0, false);
    }
}
