//! Job specs: gantry's YAML, which is a compatible superset of SkyPilot's task YAML, so that
//! existing task files run. Parsing is two steps: [`parse`] turns text into a [`JobSpec`] (every
//! error with file:line:col), and [`JobSpec::to_request`] resolves it against a fleet into the
//! scheduler's [`JobRequest`].

pub mod demo;
pub mod dstack;
pub mod instances;
mod lifecycle;
pub mod limits;
pub mod mounts;
pub mod redact;
mod resolve;
pub mod sbatch;
pub mod service;
mod task;
mod values;

pub use resolve::ResolveError;

pub use values::{parse_duration, Accelerator, Accelerators, Checkpoint, GpuCount};

use crate::model::MigProfile;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

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

/// One way a job may run: SkyPilot's `resources`, or one entry of its `resources.any_of` /
/// `resources.ordered` (the entry's fields over those of `resources`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Alternative {
    pub accelerators: Option<Accelerators>,
    /// Spot capacity allowed (on-demand too); `false`: on-demand and reserved only.
    pub use_spot: bool,
    pub infra: Infra,
    /// `image_id: docker:IMAGE`: only Kubernetes pools run it.
    pub image: Option<String>,
    /// CPUs (thousandths) and memory (MiB) per node this way asks for (its own or the outer
    /// `resources`'); `None`: none asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_milli: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mem_mib: Option<u64>,
}

/// SkyPilot's `workdir: {url, ref}`: a git repository cloned on each node, the job's
/// directory for setup and run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitWorkdir {
    pub url: String,
    #[serde(rename = "ref")]
    pub reference: Option<String>,
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
    /// Of `unset`, those a field fills in (`envs.SKYPILOT_BUCKET` → `file_mounts./artifacts`):
    /// asked for at that field.
    /// (Boxed: few jobs have one, and every job carries its spec inline.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unset_uses: Option<Box<BTreeMap<String, String>>>,
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
    /// SkyPilot's `resources.any_of` / `resources.ordered`: the ways the job may run, each
    /// complete (empty: the fields above are the only way).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub alternatives: Vec<Alternative>,
    /// The alternatives are in order of preference (`ordered`), not any of them (`any_of`).
    pub ordered: bool,
    /// A git repository to clone as the job's directory (SkyPilot's `workdir: {url, ref}`).
    /// Boxed, as `service`: rare, and every job held would carry its bytes.
    pub git_workdir: Option<Box<GitWorkdir>>,
    /// Starts once this job has completed; cancelled if it fails or is cancelled (a task of
    /// a pipeline, written by `gantry submit` for each task after the first).
    pub after: Option<i64>,
    /// The pipeline this task is part of, by its name (written by `gantry submit`).
    pub pipeline: Option<String>,
    /// The experiment its run is reported to (`experiment:`, or `MLFLOW_EXPERIMENT_NAME` in
    /// its `envs`), on the fleet's `[mlflow]` tracking server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experiment: Option<String>,
    /// SkyPilot's `resources.job_recovery`: restarts when the job's own process fails.
    pub recovery: Recovery,
    /// SkyPilot's `autostop` as the job's own idle window, seconds: reclaimable after its GPUs
    /// sat idle this long, where that is sooner than the fleet's `[reclaim]` window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idle_window_s: Option<f64>,
    /// SkyPilot's `file_mounts`: copied or mounted on every node before setup.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub file_mounts: Vec<mounts::FileMount>,
    /// SkyServe's `service:`: the task is run as a service's replicas behind an endpoint
    /// (`gantry serve up`), not once.
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Boxed: 200 bytes that only a service's jobs use, carried inline by every job the
    /// engine holds (`gantry bench memory`).
    pub service: Option<Box<service::ServiceSpec>>,
    /// SkyPilot fields present in the file that gantry does not act on, each with what gantry
    /// does instead.
    pub ignored: Vec<String>,
}

/// How often a job whose own process fails (an exit code, a signal) is started again, with a
/// backoff that doubles from 5 s up to 5 minutes. Preemptions, spot losses and lost hosts are
/// not the job's failures: they requeue it without counting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Recovery {
    /// Restarts after a failure (SkyPilot's `max_restarts_on_errors`; 0: it fails at once).
    pub max_restarts_on_errors: u32,
    /// Exit codes that restart the job whatever the count (SkyPilot's `recover_on_exit_codes`),
    /// up to `RESTARTS_MAX` in all.
    pub recover_on_exit_codes: Vec<i32>,
}

/// The most restarts a job is given, whatever its spec says.
pub const RESTARTS_MAX: u32 = 100;

impl Default for JobSpec {
    fn default() -> Self {
        JobSpec {
            name: None,
            nodes: 1,
            accelerators: None,
            mig: None,
            use_spot: false,
            infra: Infra::default(),
            cpu_milli: 0,
            mem_mib: 0,
            disk_gb: None,
            image: None,
            adopt: None,
            envs: BTreeMap::new(),
            secrets: BTreeMap::new(),
            unset: Vec::new(),
            unset_uses: None,
            workdir: None,
            setup: None,
            run: None,
            team: None,
            project: None,
            priority: None,
            preemptible: true,
            interactive: false,
            checkpoint: None,
            vram_mib: None,
            time_limit_s: None,
            max_price_per_hour: None,
            alternatives: Vec::new(),
            ordered: false,
            git_workdir: None,
            after: None,
            pipeline: None,
            experiment: None,
            recovery: Recovery::default(),
            idle_window_s: None,
            file_mounts: Vec::new(),
            service: None,
            ignored: Vec::new(),
        }
    }
}

impl JobSpec {
    /// The ways the job may run: its alternatives, or its one way.
    pub fn ways(&self) -> Vec<Alternative> {
        if !self.alternatives.is_empty() {
            return self.alternatives.clone();
        }
        vec![Alternative {
            accelerators: self.accelerators.clone(),
            use_spot: self.use_spot,
            infra: self.infra.clone(),
            image: self.image.clone(),
            cpu_milli: Some(self.cpu_milli),
            mem_mib: Some(self.mem_mib),
        }]
    }

    /// The first value the file leaves to be given at submit, where a field fills it in,
    /// asked for at that field: `file_mounts./artifacts: ${SKYPILOT_BUCKET} is not set: pass
    /// --env SKYPILOT_BUCKET=… at submit`, the others left without one named after it.
    pub fn unset_at_its_use(&self) -> Option<String> {
        let first = self.unset.first()?;
        let at = self.unset_uses.as_ref()?.get(first)?;
        let (what, name) = first.split_once('.').unwrap_or(("envs", first));
        let flag = if what == "secrets" {
            format!("--secret {name}")
        } else {
            format!("--env {name}=…")
        };
        let rest = match &self.unset[1..] {
            [] => String::new(),
            more => format!(" (also without one: {})", more.join(", ")),
        };
        Some(format!(
            "{at}: ${{{name}}} is not set: pass {flag} at submit{rest}"
        ))
    }
}

/// Parses a spec. `file` names the source in error messages.
pub fn parse(file: &str, bytes: &[u8]) -> Result<JobSpec, SpecError> {
    let text = text_of(file, bytes)?;
    if sbatch::is_batch_script(file, text) {
        return sbatch::parse(file, text);
    }
    let docs = documents(text);
    if docs.len() > 1 {
        let line = docs[1].lines().take_while(|l| l.trim().is_empty()).count();
        return Err(SpecError {
            file: file.to_string(),
            line: line.max(1),
            col: 1,
            message: format!(
                "this file is a pipeline of {} YAML documents: `gantry submit` runs its tasks one after another; here one task is expected",
                docs.len()
            ),
        });
    }
    parse_task(file, text)
}

/// A pipeline (SkyPilot's chain of tasks): a file of several YAML documents, each a task that
/// starts once the one before it has completed. A first document with only `name` names the
/// pipeline, as SkyPilot writes it.
#[derive(Debug, Clone)]
pub struct Pipeline {
    pub name: Option<String>,
    /// Each task's text (blank lines in place of the other documents, so that positions in
    /// it are positions in the file) and its spec.
    pub tasks: Vec<(String, JobSpec)>,
}

/// The tasks of a file: one, or a pipeline's.
pub fn parse_pipeline(file: &str, bytes: &[u8]) -> Result<Pipeline, SpecError> {
    let text = text_of(file, bytes)?;
    if sbatch::is_batch_script(file, text) {
        let spec = sbatch::parse(file, text)?;
        return Ok(Pipeline {
            name: None,
            tasks: vec![(text.to_string(), spec)],
        });
    }
    let mut docs = documents(text);
    let mut name = None;
    if docs.len() > 1 {
        if let Ok(header) = serde_yaml_ng::from_str::<PipelineHeader>(&docs[0]) {
            header.check(file, &docs[0], docs.len() - 1)?;
            name = Some(header.name);
            docs.remove(0);
        }
    }
    let tasks = docs
        .into_iter()
        .map(|d| parse_task(file, &d).map(|s| (d, s)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Pipeline { name, tasks })
}

/// The first document of a pipeline (`name`, and `execution: serial` where written) or of a
/// SkyPilot job group (`execution: parallel`, with its own keys read so that a group is
/// refused at its `execution`, not at a key gantry does not know).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PipelineHeader {
    name: String,
    #[serde(default)]
    execution: Option<String>,
    #[serde(default)]
    primary_tasks: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    termination_delay: Option<serde_yaml_ng::Value>,
    #[serde(default)]
    inter_connection: Option<serde_yaml_ng::Value>,
}

impl PipelineHeader {
    /// A pipeline runs; a job group is refused at its `execution` with what to write.
    fn check(&self, file: &str, doc: &str, tasks: usize) -> Result<(), SpecError> {
        let at = |message: String| {
            let (line, col) = position_of(doc, "execution").unwrap_or((1, 1));
            SpecError {
                file: file.to_string(),
                line,
                col,
                message: format!("`execution`: {message}"),
            }
        };
        let group_keys = [
            ("primary_tasks", self.primary_tasks.is_some()),
            ("termination_delay", self.termination_delay.is_some()),
            ("inter_connection", self.inter_connection.is_some()),
        ];
        match self.execution.as_deref() {
            None | Some("serial") => match group_keys.iter().find(|(_, given)| *given) {
                Some((key, _)) => {
                    let (line, col) = position_of(doc, key).unwrap_or((1, 1));
                    Err(SpecError {
                        file: file.to_string(),
                        line,
                        col,
                        message: format!("`{key}` belongs to a SkyPilot job group (`execution: parallel`), which gantry does not run; a pipeline's first document has only `name` (and `execution: serial`)"),
                    })
                }
                None => Ok(()),
            },
            Some("parallel") => Err(at(format!(
                "`parallel` makes this file a SkyPilot job group: its {tasks} tasks start together as one managed job, each on resources of its own, and reach each other by hostname; gantry starts together only the nodes of one task. Submit each task as a job of its own (one document per file), or, where they are one shape, write one task with `num_nodes: N` (a gang that starts together, its nodes in SKYPILOT_NODE_IPS)"
            ))),
            Some(other) => Err(at(format!(
                "`{other}`: expected `serial` (a pipeline: each task starts once the one before it has completed)"
            ))),
        }
    }
}

/// The documents of a YAML stream (split at `---` lines; empty ones dropped), each padded
/// with blank lines in place of the text before it.
pub fn documents(text: &str) -> Vec<String> {
    let mut docs = Vec::new();
    let push = |docs: &mut Vec<String>, start: usize, doc: &str| {
        if !is_only_comments(doc) {
            docs.push(format!("{}{doc}", "\n".repeat(start)));
        }
    };
    let (mut cur, mut start) = (String::new(), 0);
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let l = line.trim_end_matches(['\n', '\r']);
        if l == "---" || l.starts_with("--- ") || l.starts_with("---\t") {
            push(&mut docs, start, &cur);
            // What follows the marker on its line belongs to the document.
            cur = format!("{}\n", l[3..].trim_start());
            start = i;
            continue;
        }
        cur.push_str(line);
    }
    push(&mut docs, start, &cur);
    if docs.is_empty() {
        docs.push(text.to_string());
    }
    docs
}

fn is_only_comments(doc: &str) -> bool {
    doc.lines()
        .all(|l| l.trim().is_empty() || l.trim_start().starts_with('#'))
}

/// The spec's bytes as text, within the size limit.
fn text_of<'a>(file: &str, bytes: &'a [u8]) -> Result<&'a str, SpecError> {
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
    Ok(text)
}

/// One task's YAML: dstack's when it says its `type`, else SkyPilot's (and gantry's).
fn parse_task(file: &str, text: &str) -> Result<JobSpec, SpecError> {
    // Budgets first (aliases, depth, size): the loader below expands aliases and is slow on
    // deep nesting, and the text may come from anyone with a researcher token.
    limits::check(text).map_err(|o| SpecError {
        file: file.to_string(),
        line: o.line,
        col: o.col,
        message: o.message,
    })?;
    if dstack::is_dstack(text) {
        // Its type first: a service's or dev environment's fields are not a task's.
        let kind: dstack::Kind = load(file, text)?;
        dstack::check_kind(&kind, text, file)?;
        let raw: dstack::RawTask = load(file, text)?;
        return dstack::build(raw, text, file);
    }
    let raw: task::RawSpec = load(file, text)?;
    task::build(raw, text, file)
}

/// Reads `text` into `T`, every error at the field it is about.
fn load<T: serde::de::DeserializeOwned>(file: &str, text: &str) -> Result<T, SpecError> {
    let at = |line: usize, col: usize, message: String| SpecError {
        file: file.to_string(),
        line,
        col,
        message,
    };
    // Read plainly first: tracking the path of every value costs a spec that reads well (most
    // of them) about a fifth of its load (`gantry bench api`).
    if let Ok(v) = T::deserialize(serde_yaml_ng::Deserializer::from_str(text)) {
        return Ok(v);
    }
    // Read again, the path tracked: serde_path_to_error names the field a bad value belongs
    // to, where serde's own position for a value error is the start of its mapping (`name: x`
    // then `num_nodes: two` was reported at 1:1 as `name`).
    let de = serde_yaml_ng::Deserializer::from_str(text);
    serde_path_to_error::deserialize(de).map_err(|e| {
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
    })
}

/// Where the field at dotted `path` (`resources.accelerators`) is written in `text`, or the
/// nearest of its parents that is; `None` when none is (a value given on the command line).
pub fn position_of(text: &str, path: &str) -> Option<(usize, usize)> {
    let mut path = path;
    loop {
        if let Some(at) = locate_path(text, path) {
            return Some(at);
        }
        path = path.rsplit_once('.')?.0;
    }
}

/// How `key` stands on one line of YAML, where it is written there as a key (`key:`, or
/// quoted, `"key":` / `'key':`, with `quoted`).
pub(crate) struct KeyOnLine {
    /// Characters before it.
    pub col: usize,
    /// Only spaces before it: a block mapping's key.
    pub block: bool,
    /// After `- `: the first key of a sequence item.
    pub item: bool,
    /// After `{` or `,`: a key of a flow mapping.
    pub flow: bool,
}

/// `key` as a key on `line`, if it is written there (the first of its spellings).
pub(crate) fn key_on_line(line: &str, key: &str, quoted: bool) -> Option<KeyOnLine> {
    let spellings = [
        format!("{key}:"),
        format!("\"{key}\":"),
        format!("'{key}':"),
    ];
    let tried = if quoted {
        &spellings[..]
    } else {
        &spellings[..1]
    };
    let c = tried.iter().filter_map(|n| line.find(n.as_str())).min()?;
    let before = &line[..c];
    let t = before.trim_end();
    Some(KeyOnLine {
        col: before.chars().count(),
        block: before.trim().is_empty(),
        item: t.ends_with('-'),
        flow: t.ends_with('{') || t.ends_with(','),
    })
}

/// The first line from `from` (0-based) holding `key` as a block or flow mapping's key:
/// its line and column (1-based).
pub(crate) fn find_key(text: &str, key: &str, quoted: bool, from: usize) -> Option<(usize, usize)> {
    text.lines().enumerate().skip(from).find_map(|(i, line)| {
        key_on_line(line, key, quoted)
            .filter(|k| k.block || k.flow)
            .map(|k| (i + 1, k.col + 1))
    })
}

/// The position of `key:` in the text (its first occurrence), for errors found after parsing.
pub(crate) fn locate_key(text: &str, key: &str) -> (usize, usize) {
    find_key(text, key, false, 0).unwrap_or((1, 1))
}

/// Where the key of a dotted field path (`resources.accelerators`, `envs.HF_TOKEN`,
/// `checkpoint[0].grace`) is written: each segment searched for after its parent's line, at a
/// deeper indent or inside a flow mapping. `None` when a segment is not found as written.
pub(crate) fn locate_path(text: &str, path: &str) -> Option<(usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut indent, mut found) = (0usize, None::<usize>, None);
    for seg in path.split('.') {
        let seg = seg.split('[').next().unwrap_or(seg);
        if seg.is_empty() {
            continue;
        }
        let (i, depth) = lines.iter().enumerate().skip(from).find_map(|(i, line)| {
            let k = key_on_line(line, seg, true)?;
            let deeper = (k.block || k.item) && indent.is_none_or(|p| k.col > p);
            (k.flow || deeper).then_some((i, k.col))
        })?;
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
    // A word that begins a candidate (`A100` of `A100-80GB`) means it, however far the
    // spelling of another (`H100`) is from it.
    let begun = candidates
        .iter()
        .filter(|c| w.len() >= 2 && c.len() > w.len() && c.to_ascii_lowercase().starts_with(&w))
        .min_by_key(|c| c.len());
    if let Some(c) = begun {
        return Some(c);
    }
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

#[cfg(test)]
mod hint_tests {
    use super::did_you_mean;

    /// Issue 41: `A100` suggested `H100` (one letter away) rather than `A100-80GB`, the model
    /// it begins.
    #[test]
    fn a_word_that_begins_a_candidate_means_it() {
        let models = ["H100", "A100-80GB", "A100-40GB-SXM", "L4"];
        assert_eq!(did_you_mean("A100", &models), Some("A100-80GB"));
        assert_eq!(did_you_mean("h10", &models), Some("H100"));
        assert_eq!(did_you_mean("H200", &models), Some("H100"));
        assert_eq!(
            did_you_mean("runing", &["running", "pending"]),
            Some("running")
        );
        assert_eq!(did_you_mean("zzz", &models), None);
    }
}

#[cfg(test)]
mod size_tests {
    /// Every job the engine holds carries a `JobSpec` inline — pending ones by the hundred
    /// thousand, finished ones by the thousand (`gantry bench memory`) — so a field that is
    /// large and rare goes behind a `Box` (as `service` and `git_workdir` do: 240 bytes of
    /// every job before).
    #[test]
    fn a_job_spec_stays_small_enough_to_hold_by_the_hundred_thousand() {
        let size = std::mem::size_of::<super::JobSpec>();
        assert!(
            size <= 768,
            "JobSpec is {size} bytes inline: box a large field that few jobs set"
        );
    }
}
