//! The demo's seeded workload: training gangs, sweeps, evaluations, notebooks on GPU shares,
//! an inference service on MIG slices — each with a mean duration the simulated backend uses.

use crate::scheduler::rng::Rng;

/// (name, team, priority, spec body, mean duration in seconds)
const WORK: &[(&str, &str, &str, &str, f64)] = &[
    ("llama-pretrain", "ml-research", "production", "project: llama\nnum_nodes: 2\nresources:\n  accelerators: H100:8\ncheckpoint: {interval: 30m, signal: SIGUSR1, grace: 2m}\ntime_limit: 24h\nrun: torchrun train.py\n", 6.0 * 3600.0),
    ("lr-sweep", "ml-research", "experiment", "project: llama\nresources:\n  accelerators: H100:1\n  use_spot: true\ntime_limit: 2h\nrun: python sweep.py\n", 3600.0),
    ("eval-harness", "applied", "experiment", "project: evals\nresources:\n  accelerators: {A100-80GB: 4, H100: 4}\ntime_limit: 3h\nrun: python eval.py\n", 1.5 * 3600.0),
    ("finetune", "applied", "production", "project: support-bot\nresources:\n  accelerators: [H200:8, H100:8]\n  use_spot: true\ntime_limit: 8h\nrun: python finetune.py\n", 4.0 * 3600.0),
    ("notebook", "applied", "experiment", "project: support-bot\nresources:\n  accelerators: A10G:0.5\n  use_spot: true\ncheckpoint: {dir: /ckpt, interval: 10m}\ninteractive: true\nrun: jupyter lab\n", 2.0 * 3600.0),
    ("vllm-serve", "inference", "serving", "project: chat-api\nresources:\n  accelerators: A100-80GB\nmig: 3g.40gb\npreemptible: false\nrun: python -m vllm.entrypoints.openai.api_server\n", 12.0 * 3600.0),
    ("embed-batch", "default", "experiment", "project: search\nresources:\n  accelerators: L40S:2\n  use_spot: true\ntime_limit: 1h\nrun: python embed.py\n", 1800.0),
];

/// Draws the next demo job; names are numbered so each is unique.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    counter: u64,
}

impl Workload {
    /// (name, team, class, spec text)
    pub fn next(&mut self, rng: &mut Rng) -> (String, &'static str, &'static str, String) {
        let (name, team, class, body, _) = WORK[rng.below(WORK.len() as u64) as usize];
        self.counter += 1;
        let name = format!("{name}-{}", self.counter);
        let spec = format!("name: {name}\n{body}");
        (name, team, class, spec)
    }

    /// The mean duration of the demo kind a job name belongs to.
    pub fn mean_duration(name: &str) -> Option<f64> {
        WORK.iter().find(|w| name.starts_with(w.0)).map(|w| w.4)
    }
}
