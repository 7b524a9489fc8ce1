//! SkyPilot's loader as a differential oracle: `resources` blocks generated from a seed —
//! outer fields with `any_of` / `ordered` alternatives over them, accelerators in their forms
//! (a count, a fraction, a map of models, a list), spot, cloud / region / zone and `infra`
//! strings, CPUs and memory with units, disk, ports, container images, nodes — each loaded by
//! SkyPilot 0.14.1 (`scripts/skypilot_load.py`, where `.ci/run` installs it) and by gantry.
//! Every case both load must be read alike (tasks, nodes, and per alternative the
//! accelerators and counts, spot, cloud and region, CPUs and memory); a case SkyPilot loads and gantry refuses
//! must be refused at a listed non-feature. `GANTRY_ORACLE_CASES` sets how many (CI runs a
//! few hundred; the closing notes give the long runs), `GANTRY_ORACLE_SEED` the seed.

use super::skypilot_loader::{
    gantry_tasks, skypilot_load, skypilot_python, skypilot_tasks, NON_FEATURES,
};
use std::fmt::Write as _;

/// xorshift64*: the same cases for a seed on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a>(&mut self, of: &[&'a str]) -> &'a str {
        of[self.below(of.len())]
    }
}

const ACCELERATORS: [&str; 12] = [
    "A100:8",
    "H100:8",
    "L4:1",
    "T4",
    "A100-80GB:4",
    "V100:2",
    "A10G:1",
    "T4:0.5",
    "{A100: 8, H100: 8}",
    "{L4: 1, A10G: 1}",
    "[L4:1, T4:1]",
    "[H100:8, A100-80GB:8]",
];
const CLOUDS: [&str; 4] = ["aws", "gcp", "azure", "lambda"];
const REGIONS: [&str; 5] = [
    "us-east-1",
    "us-west-2",
    "us-central1",
    "europe-west4",
    "eastus",
];
const ZONES: [&str; 3] = ["us-east-1a", "us-west-2b", "us-central1-a"];
const INFRAS: [&str; 5] = [
    "aws",
    "gcp",
    "aws/us-east-1",
    "gcp/us-central1",
    "azure/eastus",
];

/// One level's fields (`resources`, or one alternative): YAML lines at `indent`.
fn fields(rng: &mut Rng, indent: &str, outer: bool) -> Vec<String> {
    let mut out = Vec::new();
    if rng.chance(60) {
        out.push(format!("accelerators: {}", rng.pick(&ACCELERATORS)));
    }
    if rng.chance(30) {
        out.push(format!("use_spot: {}", rng.chance(50)));
    }
    if rng.chance(20) {
        out.push(format!("infra: {}", rng.pick(&INFRAS)));
    } else {
        if rng.chance(40) {
            out.push(format!("cloud: {}", rng.pick(&CLOUDS)));
        }
        if rng.chance(30) {
            out.push(format!("region: {}", rng.pick(&REGIONS)));
        }
        if rng.chance(10) {
            out.push(format!("zone: {}", rng.pick(&ZONES)));
        }
    }
    // CPUs and memory outside and in alternatives: an alternative's own are a shape of its
    // own (less often inside, so that most cases still share the outer ones).
    if rng.chance(if outer { 25 } else { 12 }) {
        out.push(format!(
            "cpus: {}",
            rng.pick(&["4", "8+", "16", "2+", "0.5"])
        ));
    }
    if rng.chance(if outer { 25 } else { 12 }) {
        out.push(format!(
            "memory: {}",
            rng.pick(&["32", "64+", "16GB", "512Mi", "1Ti", "64Gi+"])
        ));
    }
    if outer {
        if rng.chance(15) {
            out.push(format!("disk_size: {}", rng.pick(&["100", "256", "512"])));
        }
        if rng.chance(10) {
            out.push(format!("ports: {}", rng.pick(&["8080", "\"8080-8090\""])));
        }
    }
    if rng.chance(8) {
        out.push("image_id: docker:ubuntu:22.04".to_string());
    }
    out.into_iter().map(|l| format!("{indent}{l}")).collect()
}

/// One task file.
fn case(rng: &mut Rng) -> String {
    let mut y = String::new();
    if rng.chance(20) {
        let _ = writeln!(y, "num_nodes: {}", 1 + rng.below(3));
    }
    let _ = writeln!(y, "resources:");
    let outer = fields(rng, "  ", true);
    for l in &outer {
        let _ = writeln!(y, "{l}");
    }
    if outer.is_empty() || rng.chance(50) {
        let key = if rng.chance(50) { "any_of" } else { "ordered" };
        let _ = writeln!(y, "  {key}:");
        for _ in 0..1 + rng.below(3) {
            let mut alt = fields(rng, "      ", false);
            if alt.is_empty() {
                alt.push(format!("      region: {}", rng.pick(&REGIONS)));
            }
            alt[0].replace_range(4..6, "- ");
            for l in alt {
                let _ = writeln!(y, "{l}");
            }
        }
    }
    let _ = writeln!(y, "run: echo hi");
    y
}

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
fn generated_resources_read_as_skypilots_loader_reads_them() {
    let Some(py) = skypilot_python() else {
        eprintln!("skipped: no Python with skypilot==0.14.1 (set GANTRY_SKYPILOT_PYTHON)");
        return;
    };
    let n = env_number("GANTRY_ORACLE_CASES", 300) as usize;
    let seed = env_number("GANTRY_ORACLE_SEED", 0x5eed_0067).max(1);
    let mut rng = Rng(seed);
    let dir = gantry_testkit::scratch::scratch("skypilot-oracle");
    let cases: Vec<String> = (0..n).map(|_| case(&mut rng)).collect();
    for (i, c) in cases.iter().enumerate() {
        std::fs::write(dir.join(format!("case-{i:06}.yaml")), c).unwrap();
    }
    let out = dir.join("verdicts.json");
    let verdicts = &skypilot_load(&py, &dir, &out);
    let (mut both, mut only_skypilot, mut only_gantry) = (0, 0, 0);
    let (mut differ, mut wrong_refusals) = (Vec::new(), Vec::new());
    for (i, text) in cases.iter().enumerate() {
        let file = format!("case-{i:06}.yaml");
        let got = gantry::spec::parse_pipeline(&file, text.as_bytes());
        match (verdicts.get(&file), got) {
            (Some(want), Ok(p)) => {
                both += 1;
                let (got, want) = (gantry_tasks(&p), skypilot_tasks(want));
                if got != want {
                    differ.push(format!(
                        "{file}:\n{text}  SkyPilot {want:?}\n  gantry   {got:?}"
                    ));
                }
            }
            (Some(_), Err(e)) => {
                let e = e.to_string();
                if !NON_FEATURES
                    .iter()
                    .any(|(field, says, _)| e.contains(field) && e.contains(says))
                {
                    wrong_refusals.push(format!("{file}:\n{text}  gantry: {e}"));
                }
                only_skypilot += 1;
            }
            (None, Ok(_)) => only_gantry += 1,
            (None, Err(_)) => {}
        }
    }
    eprintln!(
        "{n} cases (seed {seed:#x}): {both} loaded by both, {} read differently; {only_skypilot} loaded by SkyPilot only ({} not at a non-feature); {only_gantry} by gantry only",
        differ.len(),
        wrong_refusals.len()
    );
    let shown = |v: &[String]| v.iter().take(5).cloned().collect::<Vec<_>>().join("\n");
    assert!(
        differ.is_empty(),
        "gantry reads these differently from SkyPilot's loader ({} of them; the first):\n{}",
        differ.len(),
        shown(&differ)
    );
    assert!(
        wrong_refusals.is_empty(),
        "SkyPilot loads these; gantry refuses them at what is not a listed non-feature ({}; the first):\n{}",
        wrong_refusals.len(),
        shown(&wrong_refusals)
    );
    assert!(
        both >= n / 4,
        "only {both} of {n} cases loaded by both: the generator drifted"
    );
}
