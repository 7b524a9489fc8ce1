//! dstack's task YAML (`type: task`) read into a [`JobSpec`], with the same honesty as
//! SkyPilot's: each field is honoured, noted with what gantry does instead, or refused at the
//! field with why. `commands` run as one bash script that stops at the first failing command;
//! `resources.gpu` (`A100:2`, `A10G,A100:1..2`, `24GB..:8`, `{name, memory, count}`) becomes
//! the models, counts and VRAM asked for; `backends` × `regions` × `instance_types` become the
//! places the job may run.

use super::task::{
    present, EnvValue, Noted, Other, Reader, Refused, NODE_DISK, RECLAIM, SHARED_DIRECTORY,
};
use super::values::{Count, Number, Text};
use super::{
    parse_duration, Accelerator, Accelerators, Alternative, GitWorkdir, GpuCount, Infra, JobSpec,
    SpecError, ANY_MODEL,
};
use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeMap;

type Ignored = serde::de::IgnoredAny;

/// A file is dstack's when it says its `type` at the top (SkyPilot's tasks have no `type`).
pub fn is_dstack(text: &str) -> bool {
    text.lines()
        .any(|l| l.starts_with("type:") || l.starts_with("\"type\":") || l.starts_with("'type':"))
}

/// A dstack file's `type` alone.
#[derive(Debug, Deserialize)]
pub struct Kind {
    #[serde(rename = "type")]
    kind: Text,
}

/// Only tasks are gantry's.
pub(super) fn check_kind(k: &Kind, text: &str, file: &str) -> Result<(), SpecError> {
    if k.kind.0 == "task" {
        return Ok(());
    }
    let r = Reader {
        text,
        file,
        ignored: Vec::new(),
    };
    Err(r.err(
        "type",
        format!(
            "`{}`: gantry runs dstack tasks (`type: task`); services and dev environments are not gantry's",
            k.kind.0
        ),
    ))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawTask {
    #[serde(rename = "type")]
    _kind: Text,
    name: Option<Text>,
    commands: Option<Vec<String>>,
    env: Option<RawEnv>,
    nodes: Option<Count>,
    resources: Option<RawResources>,
    image: Option<Text>,
    spot_policy: Option<Text>,
    max_price: Option<Number>,
    max_duration: Option<Value>,
    backends: Option<Vec<Text>>,
    regions: Option<Vec<Text>>,
    availability_zones: Option<Vec<Text>>,
    instance_types: Option<Vec<Text>>,
    working_dir: Option<Text>,
    repos: Option<Vec<RawRepo>>,
    // See `others`.
    python: Option<Ignored>,
    nvcc: Option<Ignored>,
    ports: Option<Ignored>,
    retry: Option<Ignored>,
    idle_duration: Option<Ignored>,
    utilization_policy: Option<Ignored>,
    priority: Option<Ignored>,
    volumes: Option<Ignored>,
    files: Option<Ignored>,
    registry_auth: Option<Ignored>,
    privileged: Option<Ignored>,
    docker: Option<Ignored>,
    user: Option<Ignored>,
    entrypoint: Option<Ignored>,
    shell: Option<Ignored>,
    fleets: Option<Ignored>,
    reservation: Option<Ignored>,
    creation_policy: Option<Ignored>,
    schedule: Option<Ignored>,
    stop_criteria: Option<Ignored>,
    startup_order: Option<Ignored>,
    tags: Option<Ignored>,
    stop_duration: Option<Ignored>,
    single_branch: Option<Ignored>,
    home_dir: Option<Ignored>,
    setup: Option<Ignored>,
}

impl RawTask {
    fn others(&self) -> Vec<(&'static str, Other)> {
        let all = [
            (self.python.is_some(), "python", Noted("jobs run with the Python their node (or `image`) has")),
            (self.nvcc.is_some(), "nvcc", Noted("jobs run with the CUDA toolkit their node (or `image`) has")),
            (self.ports.is_some(), "ports", Noted("not forwarded: the job's processes listen on their node's own network")),
            (self.retry.is_some(), "retry", Noted("gantry requeues a preempted job from its checkpoint (`checkpoint:`); a job that fails is not retried")),
            (self.idle_duration.is_some(), "idle_duration", Noted("gantry runs on the fleet's nodes and does not keep instances; idle GPUs are reclaimed by its own policy")),
            (self.utilization_policy.is_some(), "utilization_policy", Noted(RECLAIM)),
            (self.fleets.is_some(), "fleets", Noted("gantry places the job on its own pools (`backends`, `regions`, `instance_types` choose among them)")),
            (self.reservation.is_some(), "reservation", Noted("gantry places on the capacity its pools have")),
            (self.creation_policy.is_some(), "creation_policy", Noted("gantry places on its pools' nodes; cloud pools it scales by its own policy")),
            (self.tags.is_some(), "tags", Noted("cloud tags are not set from it")),
            (self.stop_duration.is_some(), "stop_duration", Noted("a stopped job gets its checkpoint grace (`checkpoint: {grace: …}`)")),
            (self.startup_order.is_some(), "startup_order", Noted("a gang's nodes are started together")),
            (self.stop_criteria.is_some(), "stop_criteria", Noted("a gang ends when all its nodes have ended")),
            (self.single_branch.is_some(), "single_branch", Noted("the repository is cloned whole")),
            (self.home_dir.is_some(), "home_dir", Noted("dstack itself ignores it")),
            (self.setup.is_some(), "setup", Noted("dstack itself ignores it for tasks; put the commands in `commands`")),
            (self.shell.is_some(), "shell", Noted("commands run in bash")),
            (self.user.is_some(), "user", Noted("jobs run as the user gantry's agent runs as on the node")),
            (self.registry_auth.is_some(), "registry_auth", Noted("images are pulled with the credentials of the pool (its image pull secrets)")),
            (self.priority.is_some(), "priority", Refused("dstack's numeric priority: gantry orders jobs by priority class — write `gantry submit FILE --priority CLASS` (`gantry teams` lists the classes)")),
            (self.volumes.is_some(), "volumes", Refused(SHARED_DIRECTORY)),
            (self.files.is_some(), "files", Refused("gantry does not copy `files`: keep them in the job's directory (`repos`) or fetch them in `commands`")),
            (self.privileged.is_some(), "privileged", Refused("gantry does not run privileged containers")),
            (self.docker.is_some(), "docker", Refused("gantry does not run Docker inside jobs")),
            (self.entrypoint.is_some(), "entrypoint", Refused("write the command in `commands`")),
            (self.schedule.is_some(), "schedule", Refused("gantry runs a job when it is submitted; submit it from cron or a CI schedule")),
        ];
        present(all)
    }
}

/// `env`: a list of `NAME` (given at submit) and `NAME=VALUE`, or a mapping.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawEnv {
    List(Vec<Text>),
    Map(BTreeMap<String, EnvValue>),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    gpu: Option<Value>,
    cpu: Option<Value>,
    memory: Option<Value>,
    disk: Option<Ignored>,
    shm_size: Option<Ignored>,
}

/// `repos` entries: a URL or a path (`URL[:PATH]`), or `{url, branch, hash, path}`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawRepo {
    Text(Text),
    Spec(RawRepoSpec),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRepoSpec {
    url: Option<Text>,
    local_path: Option<Text>,
    branch: Option<Text>,
    hash: Option<Text>,
    path: Option<Text>,
    if_exists: Option<Ignored>,
}

/// `resources.gpu`: the models (empty: any), the counts per node (most first), and the least
/// VRAM per GPU in GB.
#[derive(Debug, Default, PartialEq)]
struct Gpu {
    names: Vec<String>,
    counts: Vec<u8>,
    memory_gb: Option<f64>,
}

const VENDORS: &[&str] = &["nvidia", "amd", "google", "tpu", "intel", "tenstorrent"];

/// A range `lo..hi`, `lo..`, `..hi` or a single value, each side read by `one`.
fn range<T: Copy>(text: &str, one: impl Fn(&str) -> Option<T>) -> Option<(Option<T>, Option<T>)> {
    match text.split_once("..") {
        Some((lo, hi)) => {
            let side = |s: &str| {
                if s.trim().is_empty() {
                    Some(None)
                } else {
                    one(s.trim()).map(Some)
                }
            };
            Some((side(lo)?, side(hi)?))
        }
        None => one(text.trim()).map(|v| (Some(v), Some(v))),
    }
}

fn gigabytes(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let n = lower.strip_suffix("gb").unwrap_or(&lower);
    n.trim()
        .parse::<f64>()
        .ok()
        .filter(|g| g.is_finite() && *g >= 0.0)
}

fn counts(lo: Option<u8>, hi: Option<u8>) -> Result<Vec<u8>, String> {
    let lo = lo.unwrap_or(1).max(1);
    let hi = hi.unwrap_or(lo);
    if hi < lo || hi > 64 {
        return Err(format!(
            "GPU count {lo}..{hi}: expected 1..=64 GPUs per node, the least first"
        ));
    }
    if hi - lo >= 8 {
        return Err(format!(
            "GPU count {lo}..{hi}: gantry tries each count of a range, most first; give at most 8 of them"
        ));
    }
    Ok((lo..=hi).rev().collect())
}

/// `A100:2`, `A10G,A100:1..2`, `24GB..:8`, `nvidia:H100:8`, `2`, or a mapping.
fn gpu_of(v: &Value) -> Result<Gpu, String> {
    let mut gpu = Gpu::default();
    let (mut lo, mut hi) = (None, None);
    match v {
        Value::Number(n) => {
            let c = n
                .as_u64()
                .and_then(|c| u8::try_from(c).ok())
                .ok_or(format!("`{n}` is not a GPU count"))?;
            (lo, hi) = (Some(c), Some(c));
        }
        Value::String(s) => {
            for token in s.split(':').map(str::trim) {
                let lower = token.to_ascii_lowercase();
                if VENDORS.contains(&lower.as_str()) {
                    continue;
                }
                if let Some((l, h)) = range(token, |t| t.parse::<u8>().ok()) {
                    (lo, hi) = (l, h);
                } else if lower.contains("gb") {
                    let (l, _) = range(token, gigabytes).ok_or(format!(
                        "`{token}` is not GPU memory like 24GB or 40GB..80GB"
                    ))?;
                    gpu.memory_gb = l;
                } else if !token.is_empty() {
                    gpu.names = token.split(',').map(|n| n.trim().to_string()).collect();
                }
            }
        }
        Value::Mapping(m) => {
            for (k, v) in m {
                let key = k.as_str().unwrap_or_default();
                let text = match v {
                    Value::String(s) => s.clone(),
                    Value::Number(n) => n.to_string(),
                    Value::Sequence(items) => items
                        .iter()
                        .filter_map(|i| i.as_str().map(str::to_string))
                        .collect::<Vec<_>>()
                        .join(","),
                    _ => String::new(),
                };
                match key {
                    "name" => gpu.names = text.split(',').map(|n| n.trim().to_string()).collect(),
                    "count" => {
                        (lo, hi) = range(&text, |t| t.parse::<u8>().ok())
                            .ok_or(format!("count `{text}` is not a GPU count like 2 or 1..2"))?
                    }
                    "memory" => {
                        gpu.memory_gb = range(&text, gigabytes)
                            .ok_or(format!("memory `{text}` is not GPU memory like 24GB.."))?
                            .0
                    }
                    "vendor" => {}
                    other => {
                        return Err(format!(
                        "unknown GPU field `{other}` (allowed here: name, count, memory, vendor)"
                    ))
                    }
                }
            }
        }
        _ => {
            return Err("expected a GPU spec like A100:2, 24GB.., or {name, count, memory}".into())
        }
    }
    gpu.counts = counts(lo, hi)?;
    Ok(gpu)
}

pub(super) fn build(raw: RawTask, text: &str, file: &str) -> Result<JobSpec, SpecError> {
    let mut r = Reader {
        text,
        file,
        ignored: Vec::new(),
    };
    r.others("", raw.others())?;
    let mut spec = JobSpec {
        name: raw.name.map(|t| t.0),
        nodes: 1,
        ..JobSpec::default()
    };
    let commands = raw.commands.unwrap_or_default();
    if commands.is_empty() {
        return Err(r.err(
            "commands",
            "a task needs `commands` (gantry does not run an image's own entrypoint)".into(),
        ));
    }
    // dstack runs the commands one after another and stops at the first that fails.
    spec.run = Some(format!("set -e\n{}\n", commands.join("\n")));
    if let Some(n) = raw.nodes {
        if n.0 == 0 || n.0 > 4096 {
            return Err(r.err("nodes", format!("{} nodes; expected 1..=4096", n.0)));
        }
        spec.nodes = n.0 as u16;
    }
    match raw.env {
        None => {}
        Some(RawEnv::Map(m)) => spec.envs = r.values("env", Some(m), &mut spec.unset)?,
        Some(RawEnv::List(items)) => {
            let mut map = BTreeMap::new();
            for Text(item) in items {
                let (k, v) = match item.split_once('=') {
                    Some((k, v)) => (k.to_string(), EnvValue::Text(v.to_string())),
                    None => (item.clone(), EnvValue::Unset(())),
                };
                map.insert(k, v);
            }
            spec.envs = r.values("env", Some(map), &mut spec.unset)?;
        }
    }
    if let Some(res) = raw.resources {
        if res.disk.is_some() {
            r.ignored.push(format!("resources.disk: {NODE_DISK}"));
        }
        if res.shm_size.is_some() {
            r.ignored
                .push("resources.shm_size: the job uses the shared memory its node has".into());
        }
        if let Some(v) = &res.gpu {
            let gpu = gpu_of(v).map_err(|e| r.err("resources.gpu", e))?;
            let names = if gpu.names.is_empty() {
                vec![ANY_MODEL.to_string()]
            } else {
                gpu.names.clone()
            };
            let options = gpu
                .counts
                .iter()
                .flat_map(|&c| {
                    names.iter().map(move |n| Accelerator {
                        model: n.clone(),
                        count: GpuCount::Whole(c),
                    })
                })
                .collect();
            spec.accelerators = Some(Accelerators {
                options,
                ordered: false,
            });
            // GPU memory is a floor on each GPU's VRAM; model names round it, so 10% under
            // the nominal size still counts (an A10G's 23,028 MiB is "24GB").
            if let Some(g) = gpu.memory_gb.filter(|g| *g > 0.0) {
                spec.vram_mib = Some((g * 1024.0 * 0.9) as u32);
            }
        }
        let min = |v: &Value, unit: fn(&str) -> Option<f64>| -> Option<f64> {
            let text = match v {
                Value::Number(n) => n.to_string(),
                Value::String(s) => s.clone(),
                _ => return None,
            };
            range(&text, unit)?.0
        };
        if let Some(v) = &res.cpu {
            let c = min(v, |s| s.parse().ok()).ok_or_else(|| {
                r.err("resources.cpu", "expected CPUs like 8, 8.. or 4..16".into())
            })?;
            spec.cpu_milli = (c * 1000.0).round() as u32;
        }
        if let Some(v) = &res.memory {
            let g = min(v, gigabytes).ok_or_else(|| {
                r.err(
                    "resources.memory",
                    "expected memory like 16GB, 16GB.. or 8GB..64GB".into(),
                )
            })?;
            spec.mem_mib = (g * 1024.0).round() as u64;
        }
    }
    if let Some(Text(i)) = raw.image {
        spec.image =
            Some(r.container_image("image", &Value::String(format!("docker:{i}")), false)?);
    }
    match raw.spot_policy.as_ref().map(|t| t.0.as_str()) {
        None | Some("on-demand") => {}
        Some("auto") => spec.use_spot = true,
        Some("spot") => {
            spec.use_spot = true;
            r.ignored.push("spot_policy: spot: gantry allows spot capacity and falls back to on-demand when none is free".into());
        }
        Some(other) => {
            return Err(r.err(
                "spot_policy",
                format!("`{other}`; allowed: spot, on-demand, auto"),
            ))
        }
    }
    if let Some(Number(p)) = raw.max_price {
        if !(p.is_finite() && p > 0.0) {
            return Err(r.err("max_price", format!("{p}; expected dollars per hour > 0")));
        }
        spec.max_price_per_hour = Some(p);
    }
    spec.time_limit_s = match &raw.max_duration {
        None => None,
        Some(Value::String(s)) if s == "off" => None,
        Some(Value::Bool(false)) => None,
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => {
            Some(parse_duration(s).filter(|d| *d > 0.0).ok_or_else(|| {
                r.err(
                    "max_duration",
                    format!("`{s}` is not a duration like 2h or off"),
                )
            })?)
        }
        Some(_) => return Err(r.err("max_duration", "expected a duration like 2h, or off".into())),
    };
    // Where it may run: every combination of the backends, regions, zones and instance types
    // listed (none listed: anywhere).
    let list = |l: &Option<Vec<Text>>| -> Vec<Option<String>> {
        match l {
            Some(v) if !v.is_empty() => v.iter().map(|t| Some(t.0.clone())).collect(),
            _ => vec![None],
        }
    };
    let mut places = Vec::new();
    for cloud in list(&raw.backends) {
        for region in list(&raw.regions) {
            for zone in list(&raw.availability_zones) {
                for instance_type in list(&raw.instance_types) {
                    places.push(Infra {
                        cloud: cloud.clone(),
                        region: region.clone(),
                        zone: zone.clone(),
                        instance_type,
                    });
                }
            }
        }
    }
    if places.len() > 64 {
        return Err(r.err(
            "backends",
            format!(
                "{} combinations of backends, regions, zones and instance types; gantry takes at most 64",
                places.len()
            ),
        ));
    }
    if places.len() > 1 {
        spec.alternatives = places
            .iter()
            .map(|infra| Alternative {
                accelerators: spec.accelerators.clone(),
                use_spot: spec.use_spot,
                infra: infra.clone(),
                image: spec.image.clone(),
                cpu_milli: Some(spec.cpu_milli),
                mem_mib: Some(spec.mem_mib),
            })
            .collect();
    }
    spec.infra = places.swap_remove(0);
    for repo in raw.repos.unwrap_or_default() {
        let (url, local, reference) = match repo {
            RawRepo::Text(Text(t)) => {
                let url = t.contains("://") || t.starts_with("git@");
                if url {
                    (Some(t), None, None)
                } else {
                    (
                        None,
                        Some(t.split(':').next().unwrap_or(&t).to_string()),
                        None,
                    )
                }
            }
            RawRepo::Spec(s) => {
                if s.if_exists.is_some() {
                    r.ignored
                        .push("repos.if_exists: each run clones the repository afresh".into());
                }
                if s.path.as_ref().is_some_and(|p| p.0 != ".") {
                    r.ignored
                        .push("repos.path: the repository is the job's directory itself".into());
                }
                (
                    s.url.map(|t| t.0),
                    s.local_path.map(|t| t.0),
                    s.hash.or(s.branch).map(|t| t.0),
                )
            }
        };
        match (url, local) {
            (Some(url), _) => spec.git_workdir = Some(Box::new(GitWorkdir { url, reference })),
            (None, Some(path)) => spec.workdir = Some(path),
            (None, None) => return Err(r.err("repos", "a repo needs `url` or `local_path`".into())),
        }
    }
    if let Some(Text(w)) = raw.working_dir {
        if spec.workdir.is_none() && spec.git_workdir.is_none() {
            spec.workdir = Some(w);
        } else {
            r.ignored.push(format!(
                "working_dir: `{w}`: the job starts in its repository's directory"
            ));
        }
    }
    spec.ignored = r.ignored;
    Ok(spec)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gpu(s: &str) -> Gpu {
        gpu_of(&serde_yaml_ng::from_str(s).unwrap()).unwrap()
    }

    #[test]
    fn gpu_specs_read_as_dstack_writes_them() {
        assert_eq!(
            gpu("A100:2"),
            Gpu {
                names: vec!["A100".into()],
                counts: vec![2],
                memory_gb: None
            }
        );
        assert_eq!(gpu("A10G,A100:1..2").counts, [2, 1]);
        assert_eq!(gpu("A10G,A100:1..2").names, ["A10G", "A100"]);
        assert_eq!(gpu("24GB..:8").memory_gb, Some(24.0));
        assert_eq!(gpu("24GB..:8").counts, [8]);
        assert!(gpu("24GB..:8").names.is_empty());
        assert_eq!(gpu("nvidia:H100:8").names, ["H100"]);
        assert_eq!(gpu("40GB..80GB:2").memory_gb, Some(40.0));
        assert_eq!(gpu("2").counts, [2]);
        assert_eq!(
            gpu("{name: [H100, H200], count: 8}").names,
            ["H100", "H200"]
        );
        assert_eq!(gpu("{memory: 80GB.., count: 4..8}").counts, [8, 7, 6, 5, 4]);
        assert!(
            gpu_of(&serde_yaml_ng::from_str("{name: H100, size: 3}").unwrap())
                .unwrap_err()
                .contains("unknown GPU field `size`")
        );
        assert!(gpu_of(&serde_yaml_ng::from_str("H100:1..32").unwrap())
            .unwrap_err()
            .contains("at most 8"));
    }
}
