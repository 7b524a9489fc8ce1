//! SkyPilot's own loader as the judge. `tests/skypilot/corpus` holds the task files of
//! SkyPilot's `examples/` and `llm/` that SkyPilot 0.14.1 loads (221 files; see its NOTICE);
//! `tests/skypilot/verdicts.json` is what its loader made of each (`scripts/skypilot_load.py`):
//! tasks, nodes, and per alternative the accelerators and counts, spot, cloud and region.
//!
//! Every file is either accepted by gantry with the same tasks, nodes, accelerators and
//! counts per alternative, spot and cloud/region, or refused at a field that is a real
//! non-feature (listed below, each with why). Where SkyPilot 0.14.1 is installed
//! (`GANTRY_SKYPILOT_PYTHON`, `/opt/gantry-skypilot/bin/python`, which `.ci/run` installs), the
//! verdicts are first checked against its loader run now; elsewhere the test says it used the
//! recorded ones.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CORPUS: &str = "tests/skypilot/corpus";
const VERDICTS: &str = "tests/skypilot/verdicts.json";

/// Refusals that are right: the field, a text the refusal must hold, and why gantry refuses.
pub(super) const NON_FEATURES: [(&str, &str, &str); 4] = [
    ("`pool`", "SkyPilot pools", "a pool of warm workers fed by `sky jobs launch --pool` is SkyPilot's own queue; gantry is the queue"),
    ("`resources.image_id`", "machine images", "AMIs and per-region machine images: gantry runs on machines that exist"),
    ("`resources.image_id`", "per-region map", "a per-region map of machine images"),
    ("`file_mounts` entry", "underspecified", "a storage object with neither a name nor a source: `sky launch` stops at it too"),
];

/// One way to run, as both sides are compared: accelerators (model → count), spot, cloud,
/// region, and per node CPUs (thousandths) and memory (MiB: SkyPilot's GB are GiB).
pub(super) type Way = (
    Vec<(String, String)>,
    bool,
    Option<String>,
    Option<String>,
    Option<u32>,
    Option<u64>,
);

/// SkyPilot's `cpus` / `memory` as read (`"8+"`, `"0.5"`, `"64.0+"`), in `unit`s of gantry's.
fn amount(v: &serde_json::Value, unit: f64) -> Option<u64> {
    let n: f64 = v.as_str()?.trim_end_matches('+').parse().ok()?;
    Some((n * unit).round() as u64)
}

fn count(n: f64) -> String {
    format!("{n:.3}")
}

pub(super) fn skypilot_tasks(v: &serde_json::Value) -> Vec<(u64, BTreeSet<Way>)> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let ways = t["alternatives"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| {
                    let acc = a["accelerators"]
                        .as_object()
                        .unwrap()
                        .iter()
                        .map(|(m, n)| (m.clone(), count(n.as_f64().unwrap())))
                        .collect();
                    (
                        acc,
                        a["use_spot"].as_bool().unwrap(),
                        a["cloud"].as_str().map(str::to_string),
                        a["region"].as_str().map(str::to_string),
                        // SkyPilot fills an instance type's from its catalog; gantry places
                        // the job on pools of that type, whose nodes are what they are.
                        amount(&a["cpus"], 1000.0)
                            .map(|c| c as u32)
                            .filter(|_| a["instance_type"].is_null()),
                        amount(&a["memory"], 1024.0).filter(|_| a["instance_type"].is_null()),
                    )
                })
                .collect();
            (t["num_nodes"].as_u64().unwrap(), ways)
        })
        .collect()
}

pub(super) fn gantry_tasks(p: &gantry::spec::Pipeline) -> Vec<(u64, BTreeSet<Way>)> {
    p.tasks
        .iter()
        .map(|(_, s)| {
            let mut ways = BTreeSet::new();
            let alts: Vec<gantry::spec::Alternative> = if s.alternatives.is_empty() {
                vec![gantry::spec::Alternative {
                    accelerators: s.accelerators.clone(),
                    use_spot: s.use_spot,
                    infra: s.infra.clone(),
                    image: s.image.clone(),
                    cpu_milli: Some(s.cpu_milli),
                    mem_mib: Some(s.mem_mib),
                }]
            } else {
                s.alternatives.clone()
            };
            for a in alts {
                let (cloud, region) = (a.infra.cloud.clone(), a.infra.region.clone());
                let typed = a.infra.instance_type.is_some();
                let cpus = a.cpu_milli.filter(|&c| c > 0 && !typed);
                let memory = a.mem_mib.filter(|&m| m > 0 && !typed);
                let options = a.accelerators.map(|a| a.options).unwrap_or_default();
                if options.is_empty() {
                    ways.insert((
                        Vec::new(),
                        a.use_spot,
                        cloud.clone(),
                        region.clone(),
                        cpus,
                        memory,
                    ));
                }
                for o in options {
                    let n = match o.count {
                        gantry::spec::GpuCount::Whole(n) => f64::from(n),
                        gantry::spec::GpuCount::Fraction(m) => f64::from(m) / 1000.0,
                    };
                    ways.insert((
                        vec![(o.model, count(n))],
                        a.use_spot,
                        cloud.clone(),
                        region.clone(),
                        cpus,
                        memory,
                    ));
                }
            }
            (u64::from(s.nodes), ways)
        })
        .collect()
}

/// Each task's SkyServe section as both sides are compared (`scripts/skypilot_load.py`'s
/// fields); SkyPilot's unset delays are its defaults, as its autoscaler reads them.
fn skypilot_services(v: &serde_json::Value) -> Vec<Option<serde_json::Value>> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|t| {
            let mut s = t.get("service")?.clone();
            let o = s.as_object_mut()?;
            for (k, default) in [
                ("upscale_delay_seconds", 300.0),
                ("downscale_delay_seconds", 1200.0),
            ] {
                if o[k].is_null() {
                    o.insert(k.to_string(), default.into());
                }
            }
            // `instance_aware_least_load` is balanced as `least_load` (noted at the field).
            if o["load_balancing_policy"] == "instance_aware_least_load" {
                o.insert("load_balancing_policy".into(), "least_load".into());
            }
            Some(s)
        })
        .collect()
}

fn gantry_services(p: &gantry::spec::Pipeline) -> Vec<Option<serde_json::Value>> {
    use gantry::spec::service::Balance;
    p.tasks
        .iter()
        .map(|(_, s)| {
            let v = s.service.as_ref()?;
            Some(serde_json::json!({
                "min_replicas": v.min_replicas,
                "max_replicas": v.max_replicas,
                "target_qps_per_replica": v.signal.as_ref().map(|g| g.per_replica()),
                "readiness_path": v.readiness.path,
                "initial_delay_seconds": v.readiness.initial_delay_s,
                "readiness_timeout_seconds": v.readiness.timeout_s,
                "post_data": v.readiness.post_data.is_some(),
                "upscale_delay_seconds": v.upscale_delay_s,
                "downscale_delay_seconds": v.downscale_delay_s,
                // SkyPilot resolves `resources.ports` at `sky serve up`, not at load: only
                // the section's own `ports` is compared.
                "ports": serde_json::Value::Null,
                "load_balancing_policy": match v.balance {
                    Balance::RoundRobin => "round_robin",
                    Balance::LeastLoad => "least_load",
                },
            }))
        })
        .collect()
}

/// A file's verdict with each task's alternatives in one order (their JSON's).
fn as_sets(v: &serde_json::Value) -> serde_json::Value {
    let mut v = v.clone();
    for t in v.as_array_mut().into_iter().flatten() {
        if let Some(alts) = t["alternatives"].as_array_mut() {
            alts.sort_by_key(|a| a.to_string());
        }
    }
    v
}

/// A Python with SkyPilot 0.14.1 in it, if this machine has one.
pub(super) fn skypilot_python() -> Option<PathBuf> {
    let candidates = std::env::var_os("GANTRY_SKYPILOT_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .chain([PathBuf::from("/opt/gantry-skypilot/bin/python")]);
    for py in candidates {
        let ok = std::process::Command::new(&py)
            .args(["-c", "import sky; assert sky.__version__ == '0.14.1'"])
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(py);
        }
    }
    None
}

/// What SkyPilot's loader (run by `py`) makes of every task file under `dir`, by path under
/// it (files it refuses left out), written through `out`.
pub(super) fn skypilot_load(
    py: &Path,
    dir: &Path,
    out: &Path,
) -> serde_json::Map<String, serde_json::Value> {
    let run = std::process::Command::new(py)
        .arg("scripts/skypilot_load.py")
        .arg(dir)
        .arg(out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "SkyPilot's loader: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    v.as_object().unwrap().clone()
}

fn verdicts() -> serde_json::Map<String, serde_json::Value> {
    let text = std::fs::read_to_string(VERDICTS).unwrap();
    let recorded: serde_json::Value = serde_json::from_str(&text).unwrap();
    let recorded = recorded.as_object().unwrap().clone();
    match skypilot_python() {
        Some(py) => {
            let out = std::env::temp_dir().join(format!("gantry-verdicts-{}.json", std::process::id()));
            let live = skypilot_load(&py, Path::new(CORPUS), &out);
            let _ = std::fs::remove_file(&out);
            let live = &live;
            // `any_of` is a set in SkyPilot: its order is Python's hash order, which changes from
            // one run to the next (PYTHONHASHSEED), so the alternatives compare as a set.
            let differ: Vec<&String> = live
                .keys()
                .chain(recorded.keys())
                .filter(|k| live.get(*k).map(as_sets) != recorded.get(*k).map(as_sets))
                .collect();
            assert!(
                differ.is_empty(),
                "SkyPilot's loader ({}) no longer says what {VERDICTS} records for {differ:?}: rerun scripts/skypilot_load.py",
                py.display()
            );
            eprintln!("verdicts checked against SkyPilot's loader run now ({})", py.display());
        }
        None => eprintln!(
            "skipped checking the verdicts against SkyPilot's loader: no Python with skypilot==0.14.1 (set GANTRY_SKYPILOT_PYTHON); compared with the ones recorded in {VERDICTS}"
        ),
    }
    recorded
}

#[test]
fn every_file_skypilot_loads_is_read_as_skypilot_reads_it_or_refused_at_a_non_feature() {
    let verdicts = verdicts();
    assert!(
        verdicts.len() >= 200,
        "the corpus shrank: {}",
        verdicts.len()
    );
    let (mut accepted, mut differ, mut wrong_refusals) = (0, Vec::new(), Vec::new());
    let mut services = 0;
    let mut refused: BTreeMap<&str, usize> = BTreeMap::new();
    for (file, want) in &verdicts {
        let path = Path::new(CORPUS).join(file);
        let bytes = std::fs::read(&path).unwrap();
        match gantry::spec::parse_pipeline(&path.display().to_string(), &bytes) {
            Ok(p) => {
                accepted += 1;
                let (got_s, want_s) = (gantry_services(&p), skypilot_services(want));
                services += want_s.iter().flatten().count();
                if got_s != want_s {
                    differ.push(format!(
                        "{file} (service):\n  SkyPilot {want_s:?}\n  gantry   {got_s:?}"
                    ));
                }
                let (got, want) = (gantry_tasks(&p), skypilot_tasks(want));
                if got != want {
                    differ.push(format!("{file}:\n  SkyPilot {want:?}\n  gantry   {got:?}"));
                }
            }
            Err(e) => {
                let e = e.to_string();
                match NON_FEATURES
                    .iter()
                    .find(|(field, says, _)| e.contains(field) && e.contains(says))
                {
                    Some((_, says, _)) => *refused.entry(says).or_default() += 1,
                    None => wrong_refusals.push(e),
                }
            }
        }
    }
    let share = 100.0 * accepted as f64 / verdicts.len() as f64;
    eprintln!(
        "{} files SkyPilot loads: {accepted} accepted by gantry ({share:.1}%), all agreeing ({services} SkyServe sections among them); refused at non-features: {refused:?}",
        verdicts.len()
    );
    assert!(services >= 40, "only {services} service sections compared");
    assert!(
        differ.is_empty(),
        "gantry reads these differently:\n{}",
        differ.join("\n")
    );
    assert!(
        wrong_refusals.is_empty(),
        "refused at what is not a listed non-feature:\n{}",
        wrong_refusals.join("\n")
    );
    assert!(share >= 96.0, "{share:.1}% accepted");
}
