//! SkyPilot's task YAML, and gantry's fields over it, read into a [`JobSpec`]. Every field of
//! SkyPilot's task schema has a place here: honoured, noted with what gantry does instead, or
//! refused with why and what to write — none is read and dropped unsaid.

use super::values::{self, Amount, Bytes, Count, Duration, Number, Text};
use super::{
    locate_key, locate_path, Accelerators, Alternative, Checkpoint, GitWorkdir, GpuCount, Infra,
    JobSpec, SpecError,
};
use crate::model::MigProfile;
use serde::Deserialize;
use std::collections::BTreeMap;

/// A field gantry does not read: skipped without building its value (no alias of it is ever
/// expanded into memory).
type Ignored = serde::de::IgnoredAny;

/// What gantry does with a SkyPilot field it does not honour as SkyPilot does.
pub(super) enum Other {
    /// Accepted; the text says what gantry does instead (shown at submit and by `spec check`).
    Noted(&'static str),
    /// Refused at the field: why, and what to write instead.
    Refused(&'static str),
}
pub(super) use Other::{Noted, Refused};

/// Of `(present, field, what gantry does)`, the fields present.
pub(super) fn present<const N: usize>(
    all: [(bool, &'static str, Other); N],
) -> Vec<(&'static str, Other)> {
    all.into_iter()
        .filter(|(present, ..)| *present)
        .map(|(_, name, o)| (name, o))
        .collect()
}

pub(super) const RECLAIM: &str =
    "gantry reclaims idle GPUs by its own policy instead (`gantry reclaim`)";
pub(super) const SHARED_DIRECTORY: &str = "gantry does not create SkyPilot volumes: use a directory the nodes already share (NFS, a host path) and name it in `run`";
pub(super) const NODE_DISK: &str =
    "the job uses the disk its node has (gantry does not size or choose disks)";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSpec {
    name: Option<Text>,
    num_nodes: Option<Count>,
    resources: Option<RawResources>,
    envs: Option<BTreeMap<String, EnvValue>>,
    workdir: Option<RawWorkdir>,
    setup: Option<String>,
    run: Option<String>,
    secrets: Option<RawSecrets>,
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
    /// The experiment (MLflow's) the job's run is reported to, with the fleet's `[mlflow]`.
    experiment: Option<Text>,
    /// Work that exists in a backend and waits for gantry to place it (`pod NS/NAME`);
    /// written by the backend that found it, not by hand.
    adopt: Option<Text>,
    /// The job this one follows in a pipeline; written by `gantry submit`.
    after: Option<u64>,
    /// The name of the pipeline this task is part of (its file's first document's `name`);
    /// written by `gantry submit`.
    pipeline: Option<Text>,
    // SkyPilot fields gantry does not honour as SkyPilot does: see `task_others`.
    /// Read by hand (`mounts`), for errors that name the entry.
    file_mounts: Option<serde_yaml_ng::Value>,
    /// SkyServe's section: the task is a service's replica (`service`).
    service: Option<super::service::RawService>,
    config: Option<Ignored>,
    volumes: Option<Ignored>,
    volume_mounts: Option<Ignored>,
    event_callback: Option<Ignored>,
    pool: Option<Ignored>,
    managed_secrets: Option<Ignored>,
    inputs: Option<Ignored>,
    outputs: Option<Ignored>,
    file_mounts_mapping: Option<Ignored>,
    api_server_access: Option<Ignored>,
    #[serde(rename = "_metadata")]
    metadata: Option<Ignored>,
}

impl RawSpec {
    /// The SkyPilot fields present that gantry does not honour, with what it does about each.
    fn others(&self) -> Vec<(&'static str, Other)> {
        let all = [
            (self.config.is_some(), "config", Noted("SkyPilot's own settings; gantry's come from its fleet file")),
            (self.volumes.is_some(), "volumes", Refused(SHARED_DIRECTORY)),
            (self.volume_mounts.is_some(), "volume_mounts", Refused(SHARED_DIRECTORY)),
            (self.event_callback.is_some(), "event_callback", Noted("not run: follow the job with `gantry events -f` or `gantry jobs -w`")),
            (self.pool.is_some(), "pool", Refused("SkyPilot pools (workers kept warm for batch jobs) are not gantry's: submit each job to gantry's queue")),
            (self.managed_secrets.is_some(), "managed_secrets", Refused("SkyPilot's managed secrets are not gantry's: list the names under `secrets:` without a value and give them at submit (`gantry submit FILE --secret NAME`)")),
            (self.inputs.is_some(), "inputs", Noted("SkyPilot's optimizer estimates data egress from it; gantry places by price and free capacity")),
            (self.outputs.is_some(), "outputs", Noted("SkyPilot's optimizer estimates data egress from it; gantry places by price and free capacity")),
            (self.file_mounts_mapping.is_some(), "file_mounts_mapping", Noted("SkyPilot's record of uploaded file_mounts; nothing is uploaded")),
            (self.api_server_access.is_some(), "api_server_access", Noted("gantry jobs get no SkyPilot API server credentials")),
            (self.metadata.is_some(), "_metadata", Noted("SkyPilot's own bookkeeping")),
        ];
        present(all)
    }
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
    /// `ephemeral_storage` is its deprecated name.
    #[serde(alias = "ephemeral_storage")]
    disk_size: Option<values::DiskGb>,
    image_id: Option<serde_yaml_ng::Value>,
    instance_type: Option<Text>,
    /// SkyPilot's price cap: gantry's `max_price`.
    max_hourly_cost: Option<Number>,
    /// A priority class by name: gantry's `priority`.
    priority_class: Option<Text>,
    any_of: Option<Vec<RawResources>>,
    ordered: Option<Vec<RawResources>>,
    // See `others`.
    /// Not opened by gantry; a service's replicas serve on it (`service_port`).
    ports: Option<serde_yaml_ng::Value>,
    disk_tier: Option<Ignored>,
    labels: Option<Ignored>,
    /// SkyPilot's idle stop: the job's own reclaim window (`Reader::autostop`).
    autostop: Option<serde_yaml_ng::Value>,
    network_tier: Option<Ignored>,
    /// `spot_recovery` is its deprecated name.
    #[serde(alias = "spot_recovery")]
    job_recovery: Option<RawRecovery>,
    accelerator_args: Option<Ignored>,
    local_disk: Option<Ignored>,
    volumes: Option<Ignored>,
    priority: Option<Ignored>,
    #[serde(rename = "_no_missing_accel_warnings")]
    no_missing_accel_warnings: Option<Ignored>,
}

impl RawResources {
    fn others(&self) -> Vec<(&'static str, Other)> {
        let all = [
            (self.ports.is_some(), "ports", Noted("not opened or forwarded: the job's processes listen on their node's own network (a service's endpoint reaches its replicas there)")),
            (self.disk_size.is_some(), "disk_size", Noted(NODE_DISK)),
            (self.disk_tier.is_some(), "disk_tier", Noted(NODE_DISK)),
            (self.network_tier.is_some(), "network_tier", Noted("the job uses the network its nodes have")),
            (self.labels.is_some(), "labels", Noted("cloud and pod labels are not set from it (gantry labels its own pods)")),
            (
                matches!(&self.job_recovery, Some(RawRecovery::Strategy(_)))
                    || matches!(&self.job_recovery, Some(RawRecovery::Table { strategy: Some(_), .. })),
                "job_recovery.strategy",
                Noted("gantry's own: a preempted job requeues from its checkpoint and is placed on the cheapest capacity that fits"),
            ),
            (self.accelerator_args.is_some(), "accelerator_args", Noted("TPU settings; gantry's fleets have no TPUs")),
            (self.no_missing_accel_warnings.is_some(), "_no_missing_accel_warnings", Noted("SkyPilot's own warning switch")),
            (self.local_disk.is_some(), "local_disk", Refused("gantry does not choose nodes by local disk: ask for a pool whose nodes have it (`infra`, `instance_type`)")),
            (self.volumes.is_some(), "volumes", Refused(SHARED_DIRECTORY)),
            (self.priority.is_some(), "priority", Refused("SkyPilot's numeric priority: gantry orders jobs by priority class — write `priority: CLASS` at the top of the file (`gantry teams` lists the classes)")),
        ];
        present(all)
    }
}

/// `resources.job_recovery`: a strategy's name, or a table.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawRecovery {
    /// Its name is noted, not used: gantry's strategy is its own.
    Strategy(#[allow(dead_code)] Text),
    Table {
        strategy: Option<Text>,
        max_restarts_on_errors: Option<i64>,
        recover_on_exit_codes: Option<RawExitCodes>,
    },
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum RawExitCodes {
    One(i64),
    Many(Vec<i64>),
}

/// `workdir`: a directory, or a git repository (`{url, ref}`).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawWorkdir {
    Path(Text),
    Git(RawGit),
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGit {
    url: Text,
    #[serde(rename = "ref")]
    reference: Option<Text>,
}

/// `secrets`: a mapping of names to values (empty: given at submit), or a list of SkyPilot
/// managed secret names.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum RawSecrets {
    Values(BTreeMap<String, EnvValue>),
    Managed(#[allow(dead_code)] Vec<Ignored>),
}

/// Environment values may be written as strings, numbers or booleans.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub(super) enum EnvValue {
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

/// A name a shell can export: a letter or `_`, then letters, digits and `_`.
pub fn is_env_name(n: &str) -> bool {
    n.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// What one `resources` mapping (or one entry of its `any_of` / `ordered`) says; `None` where
/// it says nothing, so that an entry's fields go over the base's.
#[derive(Debug, Clone, Default)]
struct Resources {
    accelerators: Option<Accelerators>,
    use_spot: Option<bool>,
    /// cloud, region, zone: given together (`infra`) or key by key.
    place: Option<(Option<String>, Option<String>, Option<String>)>,
    /// `place` was given as `infra` (all three at once).
    infra: bool,
    instance_type: Option<String>,
    cpu_milli: Option<u32>,
    mem_mib: Option<u64>,
    disk_gb: Option<u32>,
    image: Option<String>,
    max_price: Option<f64>,
    priority_class: Option<String>,
    /// Of the job, not of one alternative: read from the top-level `resources` only.
    recovery: Option<crate::spec::Recovery>,
    /// `autostop`'s idle window, seconds (of the job too).
    idle_window_s: Option<f64>,
}

impl Resources {
    /// This entry's fields over `base`'s.
    fn over(self, base: &Resources) -> Resources {
        Resources {
            accelerators: self.accelerators.or_else(|| base.accelerators.clone()),
            use_spot: self.use_spot.or(base.use_spot),
            // Key by key, as SkyPilot copies an alternative over `resources`: one naming only
            // a region keeps the outer cloud; one giving `infra` gives all three.
            infra: self.infra || (self.place.is_none() && base.infra),
            place: match (self.place, &base.place) {
                (Some(place), _) if self.infra => Some(place),
                (Some((cloud, region, zone)), Some((c, r, z))) => Some((
                    cloud.or_else(|| c.clone()),
                    region.or_else(|| r.clone()),
                    zone.or_else(|| z.clone()),
                )),
                (place, base) => place.or_else(|| base.clone()),
            },
            instance_type: self.instance_type.or_else(|| base.instance_type.clone()),
            cpu_milli: self.cpu_milli.or(base.cpu_milli),
            mem_mib: self.mem_mib.or(base.mem_mib),
            disk_gb: self.disk_gb.or(base.disk_gb),
            image: self.image.or_else(|| base.image.clone()),
            max_price: self.max_price.or(base.max_price),
            priority_class: self.priority_class.or_else(|| base.priority_class.clone()),
            recovery: self.recovery.or_else(|| base.recovery.clone()),
            idle_window_s: self.idle_window_s.or(base.idle_window_s),
        }
    }

    fn infra(&self) -> Infra {
        let (cloud, region, zone) = self.place.clone().unwrap_or_default();
        Infra {
            cloud,
            region,
            zone,
            instance_type: self.instance_type.clone(),
        }
    }

    /// This way to run, with what SkyPilot infers from it: TPUs are Google's (cloud `gcp`),
    /// and an instance type of a known cloud holds its GPUs (`a3-highgpu-8g`: H100:8).
    fn alternative(&self) -> Alternative {
        let mut infra = self.infra();
        let mut accelerators = self.accelerators.clone();
        let tpu = |a: &Accelerators| {
            a.options
                .iter()
                .any(|o| o.model.to_ascii_lowercase().starts_with("tpu-"))
        };
        if infra.cloud.is_none() && accelerators.as_ref().is_some_and(tpu) {
            infra.cloud = Some("gcp".to_string());
        }
        if accelerators.is_none() {
            if let (Some(cloud), Some(ty)) = (&infra.cloud, &infra.instance_type) {
                accelerators =
                    super::instances::accelerators_of(cloud, ty).map(|(model, n)| Accelerators {
                        options: vec![super::Accelerator {
                            model,
                            count: GpuCount::Whole(n),
                        }],
                        ordered: false,
                    });
            }
        }
        Alternative {
            accelerators,
            use_spot: self.use_spot.unwrap_or(false),
            infra,
            image: self.image.clone(),
            cpu_milli: self.cpu_milli,
            mem_mib: self.mem_mib,
        }
    }
}

/// Reads the spec's text into a [`JobSpec`]; errors point at the field they are about.
pub(super) struct Reader<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a str,
    pub(super) ignored: Vec<String>,
}

impl Reader<'_> {
    /// An error about the field at dotted `path` (`resources.any_of`), at its key.
    pub(super) fn err(&self, path: &str, message: String) -> SpecError {
        let (line, col) = locate_path(self.text, path)
            .unwrap_or_else(|| locate_key(self.text, path.rsplit('.').next().unwrap_or(path)));
        SpecError {
            file: self.file.to_string(),
            line,
            col,
            message: format!("`{path}`: {message}"),
        }
    }

    /// Notes or refuses the fields of `others` under `prefix` (`resources.`).
    pub(super) fn others(
        &mut self,
        prefix: &str,
        others: Vec<(&'static str, Other)>,
    ) -> Result<(), SpecError> {
        for (name, what) in others {
            match what {
                Noted(instead) => self.ignored.push(format!("{prefix}{name}: {instead}")),
                Refused(why) => {
                    return Err(
                        self.err(&format!("{prefix}{name}"), format!("not supported: {why}"))
                    )
                }
            }
        }
        Ok(())
    }

    fn resources(
        &mut self,
        path: &str,
        r: RawResources,
    ) -> Result<(Resources, RawAlternatives), SpecError> {
        self.others(&format!("{path}."), r.others())?;
        let mut out = Resources {
            accelerators: r.accelerators,
            use_spot: r.use_spot,
            cpu_milli: r.cpus.map(|c| c.0),
            mem_mib: r.memory.map(|m| u64::from(m.0) * 1024 / 1000),
            disk_gb: r.disk_size.map(|d| d.0),
            instance_type: r.instance_type.map(|t| t.0),
            max_price: r.max_hourly_cost.map(|n| n.0),
            priority_class: r.priority_class.map(|t| t.0),
            ..Resources::default()
        };
        if let Some(RawRecovery::Table {
            max_restarts_on_errors,
            recover_on_exit_codes,
            ..
        }) = &r.job_recovery
        {
            out.recovery = Some(self.recovery(
                &format!("{path}.job_recovery"),
                *max_restarts_on_errors,
                recover_on_exit_codes,
            )?);
        }
        if let Some(Text(i)) = r.infra {
            if r.cloud.is_some() || r.region.is_some() || r.zone.is_some() {
                return Err(self.err(
                    &format!("{path}.infra"),
                    "give either `infra` or `cloud`/`region`/`zone`, not both".to_string(),
                ));
            }
            let mut parts = i.split('/').map(str::trim).map(str::to_string);
            let mut part = || parts.next().filter(|s| !s.is_empty() && s != "*");
            let place = (part(), part(), part());
            if part().is_some() {
                return Err(self.err(
                    &format!("{path}.infra"),
                    format!("`{i}` has more than cloud/region/zone"),
                ));
            }
            out.place = Some(place);
            out.infra = true;
        } else if r.cloud.is_some() || r.region.is_some() || r.zone.is_some() {
            out.place = Some((
                r.cloud.map(|t| t.0),
                r.region.map(|t| t.0),
                r.zone.map(|t| t.0),
            ));
        }
        // SkyPilot's names for clouds are case-blind, and `k8s` is Kubernetes.
        if let Some((Some(cloud), _, _)) = &mut out.place {
            *cloud = cloud.to_ascii_lowercase();
            if cloud == "k8s" {
                *cloud = "kubernetes".to_string();
            }
        }
        if let Some(v) = r.autostop {
            out.idle_window_s = self.autostop(&format!("{path}.autostop"), v)?;
        }
        if let Some(v) = r.image_id {
            let cloud = out.place.as_ref().and_then(|p| p.0.as_deref());
            out.image = self.image(&format!("{path}.image_id"), &v, cloud)?;
        }
        let alternatives = match (r.any_of, r.ordered) {
            (Some(_), Some(_)) => {
                return Err(self.err(
                    &format!("{path}.ordered"),
                    "give either `any_of` or `ordered`, not both".to_string(),
                ))
            }
            (Some(a), None) => RawAlternatives::AnyOf(a),
            (None, Some(o)) => RawAlternatives::Ordered(o),
            (None, None) => RawAlternatives::None,
        };
        Ok((out, alternatives))
    }

    /// `image_id`: `docker:IMAGE` (or, on Kubernetes, RunPod and Vast, the image as written, as
    /// SkyPilot reads it there); SkyPilot's stock images (`skypilot:gpu-ubuntu-2204`) are noted, as gantry's
    /// nodes are what they are; machine images and per-region maps are refused.
    pub(super) fn image(
        &mut self,
        path: &str,
        v: &serde_yaml_ng::Value,
        cloud: Option<&str>,
    ) -> Result<Option<String>, SpecError> {
        if let serde_yaml_ng::Value::String(s) = v {
            let s = s.trim();
            if s.starts_with("skypilot:") {
                self.ignored.push(format!("{path}: `{s}` is SkyPilot's stock machine image: gantry runs the job on its nodes as they are"));
                return Ok(None);
            }
        }
        // Where the node is itself a container (Kubernetes pods, RunPod and Vast), SkyPilot
        // runs a bare name as the node's image.
        let bare = matches!(cloud, Some("kubernetes" | "runpod" | "vast"));
        self.container_image(path, v, bare).map(Some)
    }

    /// `docker:IMAGE`, or where `bare` (a Kubernetes pool's), `IMAGE` alone too.
    pub(super) fn container_image(
        &self,
        path: &str,
        v: &serde_yaml_ng::Value,
        bare: bool,
    ) -> Result<String, SpecError> {
        let written = match v {
            serde_yaml_ng::Value::String(s) => s.clone(),
            _ => {
                return Err(self.err(path, "a per-region map of machine images: gantry runs container images, written docker:IMAGE (e.g. docker:nvcr.io/nvidia/pytorch:25.01-py3), on machines that exist".to_string()))
            }
        };
        written
            .strip_prefix("docker:")
            .or(bare.then_some(written.as_str()))
            .map(str::trim)
            .filter(|i| !i.is_empty() && !i.contains(char::is_whitespace) && !i.contains(char::is_control))
            .map(str::to_string)
            .ok_or_else(|| {
                // What to write instead, for what it looks like.
                let instead = if written.starts_with("ami-") {
                    format!("; an EC2 pool's instances boot the AMI its fleet entry names ([pools.ec2] image = \"{written}\")")
                } else if written.contains("/images/") {
                    String::new()
                } else if written.contains(['/', ':']) {
                    format!("; if it is a container image, write image_id: docker:{written} (a bare name is the image only where the cloud runs containers: Kubernetes, RunPod, Vast)")
                } else {
                    String::new()
                };
                self.err(
                    path,
                    format!("`{written}`: gantry runs container images, written docker:IMAGE (e.g. docker:nvcr.io/nvidia/pytorch:25.01-py3); machine images (AMIs, GCP images) are not used: gantry runs jobs on machines that exist{instead}"),
                )
            })
    }

    /// `envs` or `secrets` as values; names left without one go to `unset` (`what.NAME`).
    pub(super) fn values(
        &self,
        what: &str,
        map: Option<BTreeMap<String, EnvValue>>,
        unset: &mut Vec<String>,
    ) -> Result<BTreeMap<String, String>, SpecError> {
        let mut out = BTreeMap::new();
        for (k, v) in map.unwrap_or_default() {
            if !is_env_name(&k) {
                return Err(self.err(
                    &format!("{what}.{k}"),
                    "not a name a shell can export: a letter or _, then letters, digits and _"
                        .to_string(),
                ));
            }
            match v.into_value() {
                Some(v) => {
                    out.insert(k, v);
                }
                None => unset.push(format!("{what}.{k}")),
            }
        }
        Ok(out)
    }
}

enum RawAlternatives {
    None,
    AnyOf(Vec<RawResources>),
    Ordered(Vec<RawResources>),
}

/// A service's replicas serve on `resources.ports` where `service.ports` does not say (as
/// SkyServe reads it): one port, written as a number or a string.
fn service_port(
    r: &Reader,
    ports: Option<&serde_yaml_ng::Value>,
) -> Result<Option<u16>, SpecError> {
    use serde_yaml_ng::Value;
    let one = match ports {
        None => return Ok(None),
        Some(Value::Number(n)) => n.as_u64(),
        Some(Value::String(s)) => s.trim().parse().ok(),
        Some(Value::Sequence(v)) if v.len() == 1 => match &v[0] {
            Value::Number(n) => n.as_u64(),
            Value::String(s) => s.trim().parse().ok(),
            _ => None,
        },
        Some(_) => None,
    };
    match one.and_then(|p| u16::try_from(p).ok()).filter(|p| *p > 0) {
        Some(p) => Ok(Some(p)),
        None => Err(r.err(
            "resources.ports",
            "a service's replicas serve on one port: give one (`8080`), or `service.ports`"
                .to_string(),
        )),
    }
}

pub(super) fn build(raw: RawSpec, text: &str, file: &str) -> Result<JobSpec, SpecError> {
    let mut r = Reader {
        text,
        file,
        ignored: Vec::new(),
    };
    r.others("", raw.others())?;
    let ports = raw.resources.as_ref().and_then(|res| res.ports.clone());
    let (base, alternatives) = match raw.resources {
        Some(res) => r.resources("resources", res)?,
        None => (Resources::default(), RawAlternatives::None),
    };
    let (entries, ordered, key) = match alternatives {
        RawAlternatives::None => (Vec::new(), false, ""),
        RawAlternatives::AnyOf(a) => (a, false, "resources.any_of"),
        RawAlternatives::Ordered(o) => (o, true, "resources.ordered"),
    };
    if !key.is_empty() && entries.is_empty() {
        return Err(r.err(
            key,
            "lists no alternative; leave it out, or list at least one".to_string(),
        ));
    }
    let mut ways = Vec::new();
    for entry in entries {
        let (res, nested) = r.resources(key, entry)?;
        if !matches!(nested, RawAlternatives::None) {
            return Err(r.err(
                key,
                "an alternative cannot have alternatives of its own".to_string(),
            ));
        }
        ways.push(res.over(&base));
    }
    // Each alternative may ask for its own CPUs and memory (a shape of its own); what is of
    // the job (price cap, priority class) must be the same in each.
    let base = match ways.first() {
        None => base,
        Some(first) => {
            let shared = |w: &Resources| {
                [
                    ("max_hourly_cost", format!("{:?}", w.max_price)),
                    ("priority_class", format!("{:?}", w.priority_class)),
                ]
            };
            let want = shared(first);
            for w in &ways {
                if let Some((name, _)) = shared(w)
                    .iter()
                    .zip(&want)
                    .find(|(a, b)| a != b)
                    .map(|(a, _)| a)
                {
                    return Err(r.err(key, format!("the alternatives ask for different `{name}`, which is the job's: give `{name}` once, in `resources`")));
                }
            }
            first.clone()
        }
    };
    let mut unset = Vec::new();
    let envs = r.values("envs", raw.envs, &mut unset)?;
    let secrets = match raw.secrets {
        None => BTreeMap::new(),
        Some(RawSecrets::Values(m)) => r.values("secrets", Some(m), &mut unset)?,
        Some(RawSecrets::Managed(_)) => {
            return Err(r.err("secrets", "a list of SkyPilot managed secrets: gantry does not keep secrets; write them as a mapping with no values (`secrets: {HF_TOKEN: }`) and give them at submit (`gantry submit FILE --secret HF_TOKEN`)".to_string()))
        }
    };
    let mig = match raw.mig {
        None => None,
        Some(Text(m)) => Some(MigProfile::parse(&m).ok_or_else(|| {
            r.err("mig", format!("`{m}` is not a MIG profile; expected e.g. 1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb"))
        })?),
    };
    let whole_one = |a: &Option<Accelerators>| {
        a.as_ref()
            .is_some_and(|a| a.options.iter().any(|o| o.count != GpuCount::Whole(1)))
    };
    if mig.is_some()
        && (whole_one(&base.accelerators) || ways.iter().any(|w| whole_one(&w.accelerators)))
    {
        return Err(r.err("mig", "a MIG slice is one slice of one GPU: with `mig`, `accelerators` may name models but ask for 1".to_string()));
    }
    let nodes = raw.num_nodes.map_or(1, |n| n.0);
    if nodes == 0 || nodes > 4096 {
        return Err(r.err("num_nodes", format!("{nodes} nodes; expected 1..=4096")));
    }
    let max_price = match (raw.max_price, base.max_price) {
        (Some(_), Some(_)) => {
            return Err(r.err("max_price", "give the price cap once: `max_price` (gantry's name) or `resources.max_hourly_cost` (SkyPilot's)".to_string()))
        }
        (p, q) => p.map(|n| n.0).or(q),
    };
    if let Some(p) = max_price {
        if !(p.is_finite() && p > 0.0) {
            let key = if raw.max_price.is_some() {
                "max_price"
            } else {
                "resources.max_hourly_cost"
            };
            return Err(r.err(key, format!("{p}; expected dollars per hour > 0")));
        }
    }
    let priority = match (raw.priority, base.priority_class.clone()) {
        (Some(Text(p)), Some(c)) if p != c => {
            return Err(r.err(
                "priority",
                format!("`{p}`, while `resources.priority_class` says `{c}`: give the class once"),
            ))
        }
        (p, c) => p.map(|t| t.0).or(c),
    };
    // SkyPilot fills `$NAME` and `${NAME}` in `workdir` and `file_mounts` from the task's
    // `envs` and valued `secrets`; a value left to be given at submit is asked for at the
    // field that uses it.
    let known: BTreeMap<String, String> = envs
        .iter()
        .chain(&secrets)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut unset_uses = BTreeMap::new();
    let mut given_at_submit = |names: Vec<String>, at: &str| {
        for n in names {
            let what = if envs.contains_key(&n) {
                "envs"
            } else {
                "secrets"
            };
            let key = format!("{what}.{n}");
            unset_uses
                .entry(key.clone())
                .or_insert_with(|| at.to_string());
            if !unset.contains(&key) {
                unset.push(key);
            }
        }
    };
    let mut fill = |s: String, at: &str| {
        let (text, used) = super::mounts::filled(&s, &known);
        if text.trim().is_empty() && !used.is_empty() {
            given_at_submit(used, at);
        }
        text
    };
    let (workdir, git_workdir) = match raw.workdir {
        None => (None, None),
        Some(RawWorkdir::Path(Text(p))) => (Some(fill(p, "workdir")), None),
        Some(RawWorkdir::Git(g)) => (
            None,
            Some(Box::new(GitWorkdir {
                url: fill(g.url.0, "workdir.url"),
                reference: g.reference.map(|t| fill(t.0, "workdir.ref")),
            })),
        ),
    };
    let after = raw.after.map(|c| c.min(i64::MAX as u64) as i64);
    let one = base.alternative();
    let file_mounts = match raw.file_mounts {
        Some(mut v) => {
            for (n, at) in super::mounts::take_empty_sources(&mut v, &known) {
                given_at_submit(vec![n], &format!("file_mounts.{at}"));
            }
            super::mounts::fill_in_envs(&mut v, &known);
            r.file_mounts(v, one.infra.cloud.as_deref())?
        }
        None => Vec::new(),
    };
    let service = match raw.service {
        Some(s) => {
            let mut svc = r.service(s)?;
            if svc.port.is_none() {
                svc.port = service_port(&r, ports.as_ref())?;
            }
            Some(Box::new(svc))
        }
        None => None,
    };
    let experiment = raw
        .experiment
        .map(|t| t.0)
        .or_else(|| envs.get("MLFLOW_EXPERIMENT_NAME").cloned())
        .filter(|e| !e.trim().is_empty());
    Ok(JobSpec {
        name: raw.name.map(|t| t.0),
        nodes: nodes as u16,
        accelerators: one.accelerators,
        mig,
        use_spot: one.use_spot,
        infra: one.infra,
        cpu_milli: base.cpu_milli.unwrap_or(0),
        mem_mib: base.mem_mib.unwrap_or(0),
        disk_gb: base.disk_gb,
        image: one.image,
        adopt: raw.adopt.map(|t| t.0),
        envs,
        secrets,
        unset,
        unset_uses: (!unset_uses.is_empty()).then(|| Box::new(unset_uses)),
        workdir,
        setup: raw.setup,
        run: raw.run,
        team: raw.team.map(|t| t.0),
        project: raw.project.map(|t| t.0),
        priority,
        preemptible: raw.preemptible.unwrap_or(true),
        interactive: raw.interactive.unwrap_or(false),
        checkpoint: raw.checkpoint,
        vram_mib: raw.vram.map(|b| b.0),
        time_limit_s: raw.time_limit.map(|d| d.0),
        max_price_per_hour: max_price,
        alternatives: ways.iter().map(Resources::alternative).collect(),
        ordered,
        git_workdir,
        after,
        pipeline: raw.pipeline.map(|t| t.0),
        experiment,
        recovery: base.recovery.clone().unwrap_or_default(),
        idle_window_s: base.idle_window_s,
        file_mounts,
        service,
        ignored: r.ignored,
    })
}

#[cfg(test)]
mod tests {
    use crate::spec::parse;

    /// (cloud, region) of each alternative.
    fn places(yaml: &str) -> Vec<(Option<String>, Option<String>)> {
        let spec = parse("t.yaml", yaml.as_bytes()).unwrap();
        spec.alternatives
            .iter()
            .map(|a| (a.infra.cloud.clone(), a.infra.region.clone()))
            .collect()
    }

    fn some(cloud: &str, region: &str) -> (Option<String>, Option<String>) {
        (Some(cloud.to_string()), Some(region.to_string()))
    }

    /// What SkyPilot 0.14.1's loader makes of these files (`scripts/skypilot_load.py`):
    /// each alternative is copied over `resources` field by field.
    #[test]
    fn an_alternative_naming_a_region_keeps_the_outer_cloud() {
        let outer_cloud = "resources:\n  cloud: aws\n  accelerators: A100:8\n  any_of:\n    - region: us-east-1\n    - region: us-west-2\nrun: echo hi\n";
        assert_eq!(
            places(outer_cloud),
            [some("aws", "us-east-1"), some("aws", "us-west-2")]
        );
        let both = "resources:\n  cloud: aws\n  region: us-east-1\n  accelerators: A100:8\n  ordered:\n    - cloud: gcp\n    - region: us-west-2\nrun: echo hi\n";
        assert_eq!(
            places(both),
            [some("gcp", "us-east-1"), some("aws", "us-west-2")]
        );
        // `infra` gives cloud, region and zone at once: an alternative's replaces the outer's.
        let infra = "resources:\n  infra: azure/eastus\n  accelerators: V100:2\n  ordered:\n    - infra: gcp\n    - accelerators: T4\nrun: echo hi\n";
        assert_eq!(
            places(infra),
            [(Some("gcp".to_string()), None), some("azure", "eastus")]
        );
    }

    /// SkyPilot fills `${NAME}` in `workdir` from `envs` as in `file_mounts`; one the file
    /// leaves empty is asked for at the field that uses it. Before: the workdir was the text
    /// `${CODE}` and a git ref `$REF`.
    #[test]
    fn workdir_variables_are_filled_and_an_empty_one_is_asked_for_where_it_is_used() {
        let s = parse(
            "t.yaml",
            b"envs:\n  CODE: /src/app\nworkdir: ${CODE}/train\nrun: x\n",
        )
        .unwrap();
        assert_eq!(s.workdir.as_deref(), Some("/src/app/train"));
        let s = parse(
            "t.yaml",
            b"envs:\n  REPO: https://example.com/r.git\n  REF: \"\"\nworkdir:\n  url: $REPO\n  ref: ${REF}\nrun: x\n",
        )
        .unwrap();
        assert_eq!(
            s.git_workdir.as_ref().unwrap().url,
            "https://example.com/r.git"
        );
        assert_eq!(s.unset, ["envs.REF"]);
        assert_eq!(
            s.unset_at_its_use().unwrap(),
            "workdir.ref: ${REF} is not set: pass --env REF=… at submit"
        );
        // Given at submit (as `gantry submit --env REF=v2` writes it in), it is the ref.
        let s = parse(
            "t.yaml",
            b"envs:\n  REPO: https://example.com/r.git\n  REF: v2\nworkdir:\n  url: $REPO\n  ref: ${REF}\nrun: x\n",
        )
        .unwrap();
        assert!(s.unset.is_empty());
        assert_eq!(s.git_workdir.unwrap().reference.as_deref(), Some("v2"));
    }

    /// A SkyPilot job group (`execution: parallel`) is refused at its `execution`, with what
    /// to write; a pipeline's header may say `execution: serial`. Before: the header was read
    /// as a task and refused at an unknown field.
    #[test]
    fn a_job_group_is_refused_at_its_execution_and_a_serial_header_is_a_pipeline() {
        use crate::spec::parse_pipeline;
        let group = b"name: g\nexecution: parallel\n---\nname: a\nrun: x\n---\nname: b\nrun: y\n";
        let e = parse_pipeline("g.yaml", group).unwrap_err();
        assert_eq!((e.line, e.col), (2, 1), "{e}");
        assert!(
            e.message.contains("job group") && e.message.contains("its 2 tasks"),
            "{e}"
        );
        assert!(e.message.contains("num_nodes"), "{e}");
        let serial = b"name: p\nexecution: serial\n---\nrun: x\n---\nrun: y\n";
        let p = parse_pipeline("p.yaml", serial).unwrap();
        assert_eq!((p.name.as_deref(), p.tasks.len()), (Some("p"), 2));
        let odd = b"name: p\nexecution: fast\n---\nrun: x\n---\nrun: y\n";
        let e = parse_pipeline("p.yaml", odd).unwrap_err();
        assert!(e.message.contains("`fast`: expected `serial`"), "{e}");
        let keyed = b"name: p\nprimary_tasks: [a]\n---\nname: a\nrun: x\n";
        let e = parse_pipeline("p.yaml", keyed).unwrap_err();
        assert_eq!(e.line, 2, "{e}");
        assert!(
            e.message
                .contains("`primary_tasks` belongs to a SkyPilot job group"),
            "{e}"
        );
    }
}
