//! Job specs: gantry's YAML, which is a compatible superset of SkyPilot's task YAML, so that
//! existing task files run. Parsing is two steps: [`parse`] turns text into a [`JobSpec`] (every
//! error with file:line:col), and [`JobSpec::to_request`] resolves it against a fleet into the
//! scheduler's [`JobRequest`].

pub mod limits;
pub mod redact;
mod resolve;
pub mod sbatch;
mod values;

pub use resolve::ResolveError;

pub use values::{parse_duration, Accelerator, Accelerators, Checkpoint, GpuCount};

use crate::model::MigProfile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use values::{Amount, Bytes, Count, Duration, Number, Text};

/// The accelerator model meaning "any GPU model the fleet has" (a batch script's
/// `--gres=gpu:4` names none).
pub const ANY_MODEL: &str = "*";

/// The largest spec accepted, in bytes.
pub use limits::MAX_SPEC_BYTES;

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SpecError {
    pub file: String,
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.col, self.message
        )
    }
}

impl std::error::Error for SpecError {}

/// SkyPilot task fields gantry accepts but does not act on (reported, not fatal).
const SKYPILOT_IGNORED: &[&str] = &[
    "file_mounts",
    "service",
    "config",
    "volumes",
    "event_callback",
];
const SKYPILOT_RESOURCES_IGNORED: &[&str] = &[
    "ports",
    "disk_tier",
    "labels",
    "autostop",
    "network_tier",
    "job_recovery",
    "accelerator_args",
];

/// A field gantry accepts and does not read: skipped without building its value (no alias of
/// it is ever expanded into memory).
type Ignored = serde::de::IgnoredAny;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<Text>,
    num_nodes: Option<Count>,
    resources: Option<RawResources>,
    envs: Option<BTreeMap<String, EnvValue>>,
    workdir: Option<Text>,
    setup: Option<String>,
    run: Option<String>,
    // gantry's extensions
    team: Option<Text>,
    project: Option<Text>,
    priority: Option<Text>,
    preemptible: Option<bool>,
    interactive: Option<bool>,
    checkpoint: Option<Checkpoint>,
    vram: Option<Bytes>,
    time_limit: Option<Duration>,
    max_price: Option<Number>,
    mig: Option<Text>,
    /// Work that exists in a backend and waits for gantry to place it (`pod NS/NAME`);
    /// written by the backend that found it, not by hand.
    adopt: Option<Text>,
    // SkyPilot fields accepted and ignored
    file_mounts: Option<Ignored>,
    service: Option<Ignored>,
    config: Option<Ignored>,
    secrets: Option<BTreeMap<String, EnvValue>>,
    volumes: Option<Ignored>,
    event_callback: Option<Ignored>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResources {
    /// `gpus` is SkyPilot's newer name for the same field.
    #[serde(alias = "gpus")]
    accelerators: Option<Accelerators>,
    use_spot: Option<bool>,
    infra: Option<Text>,
    cloud: Option<Text>,
    region: Option<Text>,
    zone: Option<Text>,
    cpus: Option<Amount>,
    memory: Option<values::MemoryGb>,
    disk_size: Option<values::DiskGb>,
    ports: Option<Ignored>,
    disk_tier: Option<Ignored>,
    image_id: Option<Text>,
    labels: Option<Ignored>,
    autostop: Option<Ignored>,
    instance_type: Option<Text>,
    network_tier: Option<Ignored>,
    /// `spot_recovery` is its deprecated name.
    #[serde(alias = "spot_recovery")]
    job_recovery: Option<Ignored>,
    accelerator_args: Option<Ignored>,
}

/// Environment values may be written as strings, numbers or booleans.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum EnvValue {
    /// SkyPilot leaves a value empty when it must be given at launch (`HF_TOKEN:`).
    Unset(()),
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl EnvValue {
    /// The value, or `None` where the file leaves it to be given at submit.
    fn into_value(self) -> Option<String> {
        Some(match self {
            EnvValue::Unset(()) => return None,
            EnvValue::Text(s) => s,
            EnvValue::Int(i) => i.to_string(),
            EnvValue::Float(f) => f.to_string(),
            EnvValue::Bool(b) => b.to_string(),
        })
    }
}

/// `envs` or `secrets` as values, and the names left without one (`what.NAME`).
fn values_of(
    what: &str,
    map: Option<BTreeMap<String, EnvValue>>,
    unset: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for (k, v) in map.unwrap_or_default() {
        match v.into_value() {
            Some(v) => {
                out.insert(k, v);
            }
            None => unset.push(format!("{what}.{k}")),
        }
    }
    out
}

/// Where the job may run (SkyPilot's `infra`, or `cloud`/`region`/`zone`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Infra {
    pub cloud: Option<String>,
    pub region: Option<String>,
    pub zone: Option<String>,
    /// SkyPilot's `resources.instance_type`: only pools of this instance type.
    pub instance_type: Option<String>,
}

impl std::fmt::Display for Infra {
    /// As SkyPilot writes it: `cloud/region/zone`, `*` where any.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let part = |p: &Option<String>| p.clone().unwrap_or_else(|| "*".to_string());
        let mut text = format!(
            "{}/{}/{}",
            part(&self.cloud),
            part(&self.region),
            part(&self.zone)
        );
        while let Some(t) = text.strip_suffix("/*") {
            text = t.to_string();
        }
        if let Some(i) = &self.instance_type {
            text = if text == "*" {
                format!("instance type {i}")
            } else {
                format!("{text} instance type {i}")
            };
        }
        f.write_str(&text)
    }
}

/// A parsed job spec, with names not yet resolved against a fleet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct JobSpec {
    pub name: Option<String>,
    pub nodes: u16,
    pub accelerators: Option<Accelerators>,
    pub mig: Option<MigProfile>,
    pub use_spot: bool,
    pub infra: Infra,
    /// Per node, milli-CPU (0 = no reservation).
    pub cpu_milli: u32,
    /// Per node, MiB (0 = no reservation).
    pub mem_mib: u64,
    pub disk_gb: Option<u32>,
    /// The container image the job runs in (SkyPilot's `image_id: docker:IMAGE`): only
    /// Kubernetes pools run it.
    pub image: Option<String>,
    /// Work that exists already and is placed, not started (`pod NS/NAME`).
    pub adopt: Option<String>,
    pub envs: BTreeMap<String, String>,
    /// SkyPilot's `secrets`: in the job's environment like `envs`, never shown (the API
    /// redacts them from the spec).
    #[serde(skip_serializing)]
    pub secrets: BTreeMap<String, String>,
    /// `envs` and `secrets` the file leaves empty (`envs.HF_TOKEN`): to be given at submit
    /// (`--env`, `--secret`); a job is not admitted without them, as SkyPilot refuses to launch.
    pub unset: Vec<String>,
    pub workdir: Option<String>,
    pub setup: Option<String>,
    pub run: Option<String>,
    pub team: Option<String>,
    pub project: Option<String>,
    pub priority: Option<String>,
    pub preemptible: bool,
    /// A person works in it (a notebook, a shell): reclaiming its idle GPUs suspends it —
    /// held until its owner releases it — instead of requeueing it into the same idle state.
    pub interactive: bool,
    pub checkpoint: Option<Checkpoint>,
    pub vram_mib: Option<u32>,
    pub time_limit_s: Option<f64>,
    pub max_price_per_hour: Option<f64>,
    /// SkyPilot fields present in the file that gantry does not act on.
    pub ignored: Vec<String>,
}

/// Parses a spec. `file` names the source in error messages.
pub fn parse(file: &str, bytes: &[u8]) -> Result<JobSpec, SpecError> {
    let at = |line: usize, col: usize, message: String| SpecError {
        file: file.to_string(),
        line,
        col,
        message,
    };
    if bytes.len() > MAX_SPEC_BYTES {
        return Err(at(
            1,
            1,
            format!(
                "the spec is {} bytes; the limit is {MAX_SPEC_BYTES} (a job spec is a few KiB: ship large files with `workdir`)",
                bytes.len()
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let before = &bytes[..e.valid_up_to()];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let col = before.iter().rev().take_while(|&&b| b != b'\n').count() + 1;
        at(line, col, "the spec is not valid UTF-8".to_string())
    })?;
    if text.trim().is_empty() {
        return Err(at(
            1,
            1,
            "the spec is empty; at least `run` or `resources` is expected".to_string(),
        ));
    }
    if sbatch::is_batch_script(file, text) {
        return sbatch::parse(file, text);
    }
    // Budgets first (aliases, depth, size): the loader below expands aliases and is slow on
    // deep nesting, and the text may come from anyone with a researcher token.
    limits::check(text).map_err(|o| at(o.line, o.col, o.message))?;
    // serde_path_to_error names the field a bad value belongs to: serde's own position for
    // a value error is the start of its mapping (`name: x` then `num_nodes: two` was reported
    // at 1:1 as `name`).
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let raw: RawSpec = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let e = e.into_inner();
        let (line, col) = e.location().map_or((1, 1), |l| (l.line(), l.column()));
        let message = e.to_string();
        // A value error is reported at (or before) its key; a syntax error met while reading a
        // field is reported where the text breaks, after it.
        let key = (!message.contains("unknown field") && !path.is_empty() && path != ".")
            .then(|| locate_path(text, &path))
            .flatten()
            .filter(|&k| (line, col) <= k);
        if let Some((line, col)) = key {
            let rest = message.split(" at line ").next().unwrap_or(&message);
            // serde_yaml may put its own (partial) path first.
            let rest = match rest.split_once(": ") {
                Some((p, r)) if !p.contains(' ') && !p.is_empty() => r,
                _ => rest,
            };
            return at(line, col, format!("`{path}`: {rest}"));
        }
        at(
            line,
            col,
            explain_yaml_error(&message, key_at(text, line, col)),
        )
    })?;
    build(raw, text, file)
}

fn build(raw: RawSpec, text: &str, file: &str) -> Result<JobSpec, SpecError> {
    let locate = |key: &str| locate_key(text, key);
    let err = |key: &str, message: String| {
        let (line, col) = locate(key);
        SpecError {
            file: file.to_string(),
            line,
            col,
            message: format!("`{key}`: {message}"),
        }
    };
    let mut ignored: Vec<String> = Vec::new();
    let top = [
        &raw.file_mounts,
        &raw.service,
        &raw.config,
        &raw.volumes,
        &raw.event_callback,
    ];
    for (name, v) in SKYPILOT_IGNORED.iter().zip(top) {
        if v.is_some() {
            ignored.push((*name).to_string());
        }
    }
    let res = raw.resources;
    let mut infra = Infra::default();
    let mut image = None;
    let mut unset = Vec::new();
    let envs = values_of("envs", raw.envs, &mut unset);
    let secrets = values_of("secrets", raw.secrets, &mut unset);
    let (mut accelerators, mut use_spot, mut cpu_milli, mut mem_mib, mut disk_gb) =
        (None, false, 0, 0, None);
    if let Some(r) = res {
        let extra = [
            &r.ports,
            &r.disk_tier,
            &r.labels,
            &r.autostop,
            &r.network_tier,
            &r.job_recovery,
            &r.accelerator_args,
        ];
        for (name, v) in SKYPILOT_RESOURCES_IGNORED.iter().zip(extra) {
            if v.is_some() {
                ignored.push(format!("resources.{name}"));
            }
        }
        accelerators = r.accelerators;
        use_spot = r.use_spot.unwrap_or(false);
        cpu_milli = r.cpus.map_or(0, |c| c.0);
        mem_mib = r.memory.map_or(0, |m| u64::from(m.0) * 1024 / 1000);
        disk_gb = r.disk_size.map(|d| d.0);
        infra.instance_type = r.instance_type.map(|t| t.0);
        if let Some(Text(i)) = r.image_id {
            image = Some(
                i.strip_prefix("docker:")
                    .map(str::trim)
                    .filter(|i| !i.is_empty() && !i.contains(char::is_whitespace))
                    .ok_or_else(|| {
                        err(
                            "image_id",
                            format!("`{i}`: gantry runs container images, written docker:IMAGE (e.g. docker:nvcr.io/nvidia/pytorch:25.01-py3); machine images (AMIs, GCP images) are not used: gantry runs jobs on machines that exist"),
                        )
                    })?
                    .to_string(),
            );
        }
        if let Some(Text(i)) = r.infra {
            if r.cloud.is_some() || r.region.is_some() || r.zone.is_some() {
                return Err(err(
                    "infra",
                    "give either `infra` or `cloud`/`region`/`zone`, not both".to_string(),
                ));
            }
            let mut parts = i.split('/').map(str::trim).map(str::to_string);
            infra.cloud = parts.next().filter(|s| !s.is_empty() && s != "*");
            infra.region = parts.next().filter(|s| !s.is_empty() && s != "*");
            infra.zone = parts.next().filter(|s| !s.is_empty() && s != "*");
            if parts.next().is_some() {
                return Err(err(
                    "infra",
                    format!("`{i}` has more than cloud/region/zone"),
                ));
            }
        } else {
            infra.cloud = r.cloud.map(|t| t.0);
            infra.region = r.region.map(|t| t.0);
            infra.zone = r.zone.map(|t| t.0);
        }
    }
    let mig = match raw.mig {
        None => None,
        Some(Text(m)) => Some(MigProfile::parse(&m).ok_or_else(|| {
            err("mig", format!("`{m}` is not a MIG profile; expected e.g. 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"))
        })?),
    };
    if mig.is_some()
        && accelerators
            .as_ref()
            .is_some_and(|a| a.options.iter().any(|o| o.count != GpuCount::Whole(1)))
    {
        return Err(err("mig", "a MIG slice is one slice of one GPU: with `mig`, `accelerators` may name models but ask for 1".to_string()));
    }
    let nodes = raw.num_nodes.map_or(1, |n| n.0);
    if nodes == 0 || nodes > 4096 {
        return Err(err(
            "num_nodes",
            format!("{nodes} nodes; expected 1..=4096"),
        ));
    }
    let max_price = raw.max_price.map(|n| n.0);
    if let Some(p) = max_price {
        if !(p.is_finite() && p > 0.0) {
            return Err(err(
                "max_price",
                format!("{p}; expected dollars per hour > 0"),
            ));
        }
    }
    Ok(JobSpec {
        name: raw.name.map(|t| t.0),
        nodes: nodes as u16,
        accelerators,
        mig,
        use_spot,
        infra,
        cpu_milli,
        mem_mib,
        disk_gb,
        image,
        adopt: raw.adopt.map(|t| t.0),
        envs,
        secrets,
        unset,
        workdir: raw.workdir.map(|t| t.0),
        setup: raw.setup,
        run: raw.run,
        team: raw.team.map(|t| t.0),
        project: raw.project.map(|t| t.0),
        priority: raw.priority.map(|t| t.0),
        preemptible: raw.preemptible.unwrap_or(true),
        interactive: raw.interactive.unwrap_or(false),
        checkpoint: raw.checkpoint,
        vram_mib: raw.vram.map(|b| b.0),
        time_limit_s: raw.time_limit.map(|d| d.0),
        max_price_per_hour: max_price,
        ignored,
    })
}

/// The position of `key:` in the text (its first occurrence), for errors found after parsing.
fn locate_key(text: &str, key: &str) -> (usize, usize) {
    let needle = format!("{key}:");
    for (i, line) in text.lines().enumerate() {
        if let Some(c) = line.find(&needle) {
            let before = &line[..c];
            if before.trim().is_empty()
                || before.trim_end().ends_with('{')
                || before.trim_end().ends_with(',')
            {
                return (i + 1, before.chars().count() + 1);
            }
        }
    }
    (1, 1)
}

/// Where the key of a dotted field path (`resources.accelerators`, `envs.HF_TOKEN`,
/// `checkpoint[0].grace`) is written: each segment searched for after its parent's line, at a
/// deeper indent or inside a flow mapping. `None` when a segment is not found as written.
fn locate_path(text: &str, path: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut indent, mut found) = (0usize, None::<usize>, None);
    for seg in path.split('.') {
        let seg = seg.split('[').next().unwrap_or(seg);
        if seg.is_empty() {
            continue;
        }
        let needles = [
            format!("{seg}:"),
            format!("\"{seg}\":"),
            format!("'{seg}':"),
        ];
        let mut hit = None;
        for (i, line) in lines.iter().enumerate().skip(from) {
            let Some(c) = needles.iter().filter_map(|n| line.find(n.as_str())).min() else {
                continue;
            };
            let before = &line[..c];
            let t = before.trim_end();
            let flow = t.ends_with('{') || t.ends_with(',');
            let at_start = before.trim().is_empty() || t.ends_with('-');
            let depth = before.chars().count();
            if flow || (at_start && indent.is_none_or(|p| depth > p)) {
                hit = Some((i, depth));
                break;
            }
        }
        let (i, depth) = hit?;
        found = Some((i + 1, depth + 1));
        from = i;
        indent = Some(depth);
    }
    found
}

/// The mapping key written at `line:col`, if the position points at one.
fn key_at(text: &str, line: usize, col: usize) -> Option<&str> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let rest: String = l.chars().skip(col.saturating_sub(1)).collect();
    let key_len = rest.find(':')?;
    let start = l
        .char_indices()
        .nth(col.saturating_sub(1))
        .map_or(l.len(), |(i, _)| i);
    let key = &l[start..start + key_len].trim();
    let ok = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_alphanumeric() || c == '_' || c == '-');
    ok.then_some(*key)
}

/// Rewrites serde's messages for people: dotted field paths, and a suggestion for typos.
/// `key` is the mapping key at the error's position, when there is one: value errors name the
/// field they are about.
fn explain_yaml_error(message: &str, key: Option<&str>) -> String {
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or(message)
        .to_string();
    let (path, rest) = match message.split_once(": ") {
        Some((p, r)) if !p.contains(' ') && !p.is_empty() => (Some(p.to_string()), r.to_string()),
        _ => (None, message.clone()),
    };
    if let Some(unknown) = rest
        .strip_prefix("unknown field `")
        .and_then(|r| r.split('`').next())
    {
        let allowed: Vec<&str> = rest
            .split("expected")
            .nth(1)
            .unwrap_or("")
            .split('`')
            .skip(1)
            .step_by(2)
            .collect();
        let full = path
            .as_ref()
            .map_or(unknown.to_string(), |p| format!("{p}.{unknown}"));
        let mut out = format!("unknown field `{full}`");
        if let Some(best) = did_you_mean(unknown, &allowed) {
            out.push_str(&format!("; did you mean `{best}`?"));
        }
        if !allowed.is_empty() {
            out.push_str(&format!(" (allowed here: {})", allowed.join(", ")));
        }
        return out;
    }
    let field = match (path, key) {
        (Some(p), Some(k)) if p != k && !p.ends_with(&format!(".{k}")) => Some(format!("{p}.{k}")),
        (Some(p), _) => Some(p),
        (None, Some(k)) => Some(k.to_string()),
        (None, None) => None,
    };
    match field {
        Some(f) => format!("`{f}`: {rest}"),
        None => rest,
    }
}

/// The closest candidate by edit distance, if it is close enough to be a typo.
pub fn did_you_mean<'a>(word: &str, candidates: &[&'a str]) -> Option<&'a str> {
    let w = word.to_ascii_lowercase();
    candidates
        .iter()
        .map(|c| (edit_distance(&w, &c.to_ascii_lowercase()), *c))
        .filter(|(d, c)| *d <= (c.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1];
        for (j, cb) in b.iter().enumerate() {
            let sub = prev[j] + usize::from(ca != *cb);
            cur.push(sub.min(prev[j + 1] + 1).min(cur[j] + 1));
        }
        prev = cur;
    }
    prev[b.len()]
}
