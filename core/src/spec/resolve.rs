//! A spec resolved against a fleet: model names to the fleet's models, `infra` to its pools,
//! the alternatives of `accelerators` / `any_of` / `ordered` to one request the scheduler places.

use super::{did_you_mean, Accelerator, Alternative, GpuCount, Infra, JobSpec, ANY_MODEL};
use crate::model::{
    CapacityType, Fleet, GpuRequest, JobRequest, ModelChoice, ModelId, PoolId, MILLI_PER_GPU,
};

/// Whether a pool's provider is the cloud `infra` names (`k8s` is SkyPilot's name for
/// Kubernetes).
fn same_cloud(want: &str, provider: &str) -> bool {
    let canon = |c: &str| {
        let c = c.to_ascii_lowercase();
        if c == "k8s" {
            "kubernetes".to_string()
        } else {
            c
        }
    };
    canon(want) == canon(provider)
}

/// The pools `infra` allows on `fleet` (`None`: no `infra`, any pool); none is an error that
/// lists where the fleet's pools are.
fn pools_of(infra: &Infra, fleet: &Fleet) -> Result<Option<Vec<PoolId>>, ResolveError> {
    if *infra == Infra::default() {
        return Ok(None);
    }
    let shape = |id: PoolId| fleet.pool(id).instance_type.as_str();
    let ids = (0..fleet.pools.len()).map(|i| PoolId(i as u32));
    let pools: Vec<PoolId> = ids
        .clone()
        .filter(|&id| {
            let (cloud, region, zone) = fleet.pool_place(id);
            infra.cloud.as_deref().is_none_or(|c| same_cloud(c, cloud))
                && infra.region.as_deref().is_none_or(|r| r == region)
                && infra.zone.as_deref().is_none_or(|z| z == zone)
                && infra
                    .instance_type
                    .as_deref()
                    .is_none_or(|i| i == shape(id))
        })
        .collect();
    if pools.is_empty() {
        let mut places: Vec<String> = ids
            .map(|id| {
                let (c, r, z) = fleet.pool_place(id);
                match infra.instance_type {
                    Some(_) => format!("{c}/{r}/{z} {}", shape(id)),
                    None => format!("{c}/{r}/{z}"),
                }
            })
            .collect();
        places.sort();
        places.dedup();
        return Err(ResolveError::new(format!(
            "infra {infra}: no pool of this fleet is there (its pools are in: {})",
            places.join(", ")
        )));
    }
    Ok(Some(pools))
}

/// Of `pools` (`None`: all), those whose nodes can do every one of `mounts` (a pool that
/// declares no `tools` is not known to lack any); none is an error that names the mount, what
/// it needs, and the pools that have it.
fn mount_pools(
    mounts: &[super::mounts::FileMount],
    pools: Option<Vec<PoolId>>,
    fleet: &Fleet,
) -> Result<Option<Vec<PoolId>>, ResolveError> {
    if fleet.pool_tools.is_empty() || mounts.iter().all(|m| m.needs().is_empty()) {
        return Ok(pools);
    }
    let all: Vec<PoolId> = (0..fleet.pools.len()).map(|i| PoolId(i as u32)).collect();
    let candidates = pools.clone().unwrap_or_else(|| all.clone());
    let able = |id: PoolId| {
        fleet
            .tools_of(id)
            .is_none_or(|t| mounts.iter().all(|m| m.can(t)))
    };
    let kept: Vec<PoolId> = candidates.iter().copied().filter(|&id| able(id)).collect();
    if !kept.is_empty() {
        return Ok(if kept.len() == candidates.len() {
            pools
        } else {
            Some(kept)
        });
    }
    // Said of the first mount no candidate can do.
    let m = mounts
        .iter()
        .find(|m| {
            candidates
                .iter()
                .all(|&id| fleet.tools_of(id).is_some_and(|t| !m.can(t)))
        })
        .unwrap_or(&mounts[0]);
    let having: Vec<&str> = all
        .iter()
        .filter(|&&id| fleet.tools_of(id).is_some_and(|t| m.can(t)))
        .map(|&id| fleet.pool(id).name.as_str())
        .collect();
    let source = match &m.source {
        super::mounts::MountSource::Bucket { url, .. } => url.as_str(),
        super::mounts::MountSource::Local(p) => p.as_str(),
    };
    let verb = if m.mode == super::mounts::MountMode::Copy {
        "copying"
    } else {
        "mounting"
    };
    Err(ResolveError::new(format!(
        "`{}`: {verb} {source} needs {} on the node, and no pool where the job may run has it (their `tools` in the fleet file); {}",
        m.dest,
        m.needs_text(),
        if having.is_empty() {
            "no pool of this fleet declares it: add it to a pool's `tools`, or write `mode: COPY`".to_string()
        } else {
            format!("pools that have it: {}", having.join(", "))
        }
    ))
    .at("file_mounts"))
}

/// Of `pools` (`None`: all), those that run container images: Kubernetes pools.
fn container_pools(
    image: &str,
    pools: Option<Vec<PoolId>>,
    fleet: &Fleet,
) -> Result<Vec<PoolId>, ResolveError> {
    let all = || (0..fleet.pools.len()).map(|i| PoolId(i as u32)).collect();
    let runs_images: Vec<PoolId> = pools
        .unwrap_or_else(all)
        .into_iter()
        .filter(|id| fleet.image_pools.contains(id))
        .collect();
    if runs_images.is_empty() {
        return Err(ResolveError::new(format!(
            "image_id docker:{image}: none of this fleet's pools where the job may run runs container images (Kubernetes pools do, and local or SSH pools with container_runtime = \"docker\" or \"podman\"); leave image_id out to run on the hosts as they are"
        )));
    }
    Ok(runs_images)
}

/// Why a spec cannot become a request on this fleet, and the field of the file it is about
/// (`resources.accelerators`), so that the submitter is shown where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ResolveError {
    pub message: String,
    pub field: Option<String>,
}

impl ResolveError {
    pub fn new(message: String) -> ResolveError {
        ResolveError {
            message,
            field: None,
        }
    }
    /// The same error, about `field` unless it names a field already.
    pub fn at(mut self, field: &str) -> ResolveError {
        self.field.get_or_insert_with(|| field.to_string());
        self
    }
}

/// The shapes of one way: GPUs per node (`None`: no GPU) and the models asked for with that
/// count, in the order written.
type Shapes = Vec<(Option<GpuCount>, Vec<ModelId>)>;

/// One way of a job resolved on a fleet.
struct Way {
    /// GPUs per node (`None`: no GPU, or a MIG slice).
    count: Option<GpuCount>,
    /// The models it takes, in its order (empty: any model).
    models: Vec<ModelId>,
    /// The pools it may run in (`None`: any).
    pools: Option<Vec<PoolId>>,
    spot: bool,
    ordered: bool,
    /// CPUs (thousandths) and memory (MiB) per node.
    cpu_milli: u32,
    mem_mib: u64,
}

/// The models a memory-sized name stands for: `80GB+` every model with at least 80 GB,
/// `80GB` those of 80 GB. Model names round VRAM (an H100's 81,559 MiB is "80GB", an A10G's
/// 23,028 MiB "24GB"), so a model within 10% under the size counts; `None` when the name is
/// not a size.
fn models_by_memory(name: &str, fleet: &Fleet) -> Option<Result<Vec<ModelId>, ResolveError>> {
    let lower = name.to_ascii_lowercase();
    let (size, at_least) = match lower.strip_suffix('+') {
        Some(s) => (s, true),
        None => (lower.as_str(), false),
    };
    let gb: u32 = size.strip_suffix("gb")?.parse().ok()?;
    let want = f64::from(gb) * 1024.0;
    let ids: Vec<ModelId> = fleet
        .models
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            let have = f64::from(m.vram_mib);
            have >= 0.9 * want && (at_least || have <= 1.1 * want)
        })
        .map(|(i, _)| ModelId(i as u16))
        .collect();
    if ids.is_empty() {
        let have: Vec<String> = fleet
            .models
            .iter()
            .map(|m| format!("{} {:.0} GiB", m.name, f64::from(m.vram_mib) / 1024.0))
            .collect();
        return Some(Err(ResolveError::new(format!(
            "`{name}`: no GPU model of this fleet has {gb} GB{} (it has: {})",
            if at_least { " or more" } else { "" },
            have.join(", ")
        ))));
    }
    Some(Ok(ids))
}

impl JobSpec {
    /// The scheduler's view of this spec on `fleet`: its first shape (see `to_requests`).
    pub fn to_request(&self, fleet: &Fleet) -> Result<JobRequest, ResolveError> {
        Ok(self.to_requests(fleet)?.remove(0))
    }

    /// The scheduler's view of this spec on `fleet`: model names resolved, shares checked,
    /// one request per shape (GPUs per node) the job takes, in the order the file first names
    /// them. Of several ways (`any_of`, `ordered`, a mapping of models), those this fleet
    /// cannot offer are skipped, as SkyPilot skips infeasible ones; the job fails only if none
    /// is left. Never empty.
    pub fn to_requests(&self, fleet: &Fleet) -> Result<Vec<JobRequest>, ResolveError> {
        if let Some(said) = self.unset_at_its_use() {
            return Err(ResolveError::new(said));
        }
        if let Some(first) = self.unset.first() {
            let (what, name) = first.split_once('.').unwrap_or(("envs", first));
            let how = if what == "secrets" {
                format!("`gantry submit FILE --secret {name}` (read from your environment)")
            } else {
                format!("`gantry submit FILE --env {name}=…`")
            };
            return Err(ResolveError::new(format!(
                "{first} has no value in the file: give it at submit with {how}{}",
                if self.unset.len() > 1 {
                    format!(" (also without one: {})", self.unset[1..].join(", "))
                } else {
                    String::new()
                }
            ))
            .at(first));
        }
        let ways = self.ways();
        let several = ways.len() > 1;
        let resolved: Vec<Result<Vec<Way>, ResolveError>> = ways
            .iter()
            .map(|w| {
                let key = if self.ordered {
                    "resources.ordered"
                } else {
                    "resources.any_of"
                };
                let r = self.resolve_way(w, fleet, several);
                if several {
                    r.map_err(|e| ResolveError { field: None, ..e }.at(key))
                } else {
                    r
                }
            })
            .collect();
        let mut ok: Vec<Way> = Vec::new();
        let mut refusals: Vec<String> = Vec::new();
        for (n, r) in resolved.into_iter().enumerate() {
            match r {
                Ok(w) => ok.extend(w),
                Err(e) if !several => return Err(e),
                Err(e) => refusals.push(format!("{}. {}", n + 1, e.message)),
            }
        }
        let key = if self.ordered { "ordered" } else { "any_of" };
        if ok.is_empty() {
            return Err(ResolveError::new(format!(
                "no alternative of `resources.{key}` fits this fleet: {}",
                refusals.join("; ")
            ))
            .at(&format!("resources.{key}")));
        }
        // One request per shape (GPUs, CPUs and memory per node), in the order the file
        // first names it.
        let shape = |w: &Way| (w.count, w.cpu_milli, w.mem_mib);
        let mut shapes = Vec::new();
        for w in &ok {
            if !shapes.contains(&shape(w)) {
                shapes.push(shape(w));
            }
        }
        shapes
            .into_iter()
            .map(|s| {
                let same: Vec<&Way> = ok.iter().filter(|w| shape(w) == s).collect();
                self.request_of(s.0, &same, several)
            })
            .collect()
    }

    /// The request for one shape, from the ways that ask for it.
    fn request_of(
        &self,
        count: Option<GpuCount>,
        ok: &[&Way],
        several: bool,
    ) -> Result<JobRequest, ResolveError> {
        let first = ok[0];
        let gpu = match (self.mig, count) {
            (Some(p), _) => GpuRequest::Mig(p),
            (None, None) => GpuRequest::None,
            (None, Some(GpuCount::Whole(n))) => GpuRequest::Whole(n),
            (None, Some(GpuCount::Fraction(m))) if self.nodes > 1 => {
                return Err(ResolveError::new(format!(
                    "a fraction of a GPU ({}) cannot be a {}-node gang",
                    f64::from(m) / f64::from(MILLI_PER_GPU),
                    self.nodes
                ))
                .at("num_nodes"))
            }
            (None, Some(GpuCount::Fraction(m))) => GpuRequest::Fraction(m),
        };
        let models = if ok.iter().any(|w| w.models.is_empty()) {
            ModelChoice::Any
        } else {
            let mut ids: Vec<ModelId> = Vec::new();
            for id in ok.iter().flat_map(|w| w.models.iter()) {
                if !ids.contains(id) {
                    ids.push(*id);
                }
            }
            if (several && self.ordered) || (!several && first.ordered) {
                ModelChoice::Prefer(ids)
            } else {
                ModelChoice::AnyOf(ids)
            }
        };
        let pools = if ok.iter().any(|w| w.pools.is_none()) {
            None
        } else {
            let mut ids: Vec<PoolId> = ok
                .iter()
                .flat_map(|w| w.pools.iter().flatten().copied())
                .collect();
            ids.sort_unstable_by_key(|p| p.0);
            ids.dedup();
            Some(ids)
        };
        let request = JobRequest {
            nodes: self.nodes,
            gpu,
            cpu_milli: first.cpu_milli,
            mem_mib: first.mem_mib,
            vram_mib: self.vram_mib.unwrap_or(0),
            models,
            spot_ok: ok.iter().any(|w| w.spot),
            max_price_per_hour: self.max_price_per_hour,
            pools,
        };
        request
            .validate()
            .map_err(|e| ResolveError::new(e.to_string()).at("resources"))?;
        Ok(request)
    }

    /// One way on `fleet`. With `several`, the way's pools are spelled out (its models, its
    /// spot policy), so that the union of the ways keeps each model where its way allows it.
    fn resolve_way(
        &self,
        way: &Alternative,
        fleet: &Fleet,
        several: bool,
    ) -> Result<Vec<Way>, ResolveError> {
        let names: Vec<&str> = fleet.models.iter().map(|m| m.name.as_str()).collect();
        let resolve = |name: &str| -> Result<Vec<ModelId>, ResolveError> {
            if let Some(by_memory) = models_by_memory(name, fleet) {
                return by_memory;
            }
            fleet
                .model_by_name(name)
                .map(|id| vec![id])
                .ok_or_else(|| ResolveError::new(not_in_fleet(name, &names)))
        };
        let (shapes, ordered) = self
            .models_of(way, &resolve, &names)
            .map_err(|e| e.at("resources.accelerators"))?;
        let mut pools = pools_of(&way.infra, fleet).map_err(|e| e.at("resources.infra"))?;
        if let Some(image) = &way.image {
            pools = Some(
                container_pools(image, pools.take(), fleet)
                    .map_err(|e| e.at("resources.image_id"))?,
            );
        }
        pools = mount_pools(&self.file_mounts, pools, fleet)?;
        let mut out = Vec::new();
        let mut last_refusal = None;
        for (count, models) in shapes {
            // With `mig`, the slice is the request; the count only names the models.
            let count = if self.mig.is_some() { None } else { count };
            match self.shape_of(way, fleet, several, count, models, ordered, pools.clone()) {
                Ok(w) => out.push(w),
                Err(e) => last_refusal = Some(e),
            }
        }
        match (out.is_empty(), last_refusal) {
            (true, Some(e)) => Err(e),
            _ => Ok(out),
        }
    }

    /// One shape of one way: its pools checked (and spelled out with `several`).
    #[allow(clippy::too_many_arguments)]
    fn shape_of(
        &self,
        way: &Alternative,
        fleet: &Fleet,
        several: bool,
        count: Option<GpuCount>,
        models: Vec<ModelId>,
        ordered: bool,
        mut pools: Option<Vec<PoolId>>,
    ) -> Result<Way, ResolveError> {
        let wants_gpu = count.is_some() || self.mig.is_some();
        let takes = |id: PoolId| {
            fleet
                .pool(id)
                .model
                .is_some_and(|m| models.is_empty() || models.contains(&m))
        };
        if let (Some(pools), true) = (&pools, wants_gpu) {
            if !pools.iter().any(|&id| takes(id)) {
                let mut there: Vec<&str> = pools
                    .iter()
                    .filter_map(|id| Some(fleet.model(fleet.pool(*id).model?).name.as_str()))
                    .collect();
                there.sort_unstable();
                there.dedup();
                let mut limits = Vec::new();
                if way.infra != Infra::default() {
                    limits.push(format!("infra {}", way.infra));
                }
                if let Some(i) = &way.image {
                    limits.push(format!("image_id docker:{i} (pools that run images)"));
                }
                return Err(ResolveError::new(format!(
                    "{}: none of the GPUs asked for is there (its pools have: {})",
                    limits.join(", "),
                    if there.is_empty() {
                        "no GPUs".to_string()
                    } else {
                        there.join(", ")
                    }
                ))
                .at("resources.accelerators"));
            }
        }
        if several {
            let all = || (0..fleet.pools.len()).map(|i| PoolId(i as u32)).collect();
            let spelled: Vec<PoolId> = pools
                .unwrap_or_else(all)
                .into_iter()
                .filter(|&id| !wants_gpu || takes(id))
                .filter(|&id| way.use_spot || fleet.pool(id).capacity != CapacityType::Spot)
                .collect();
            if spelled.is_empty() {
                return Err(ResolveError::new(
                    "no pool of this fleet has what it asks for".to_string(),
                ));
            }
            pools = Some(spelled);
        }
        Ok(Way {
            count,
            models,
            pools,
            spot: way.use_spot,
            ordered,
            cpu_milli: way.cpu_milli.unwrap_or(0),
            mem_mib: way.mem_mib.unwrap_or(0),
        })
    }

    /// A way's GPUs per node, the models it takes (in its order; empty: any model) and
    /// whether that order is a preference.
    fn models_of(
        &self,
        way: &Alternative,
        resolve: &dyn Fn(&str) -> Result<Vec<ModelId>, ResolveError>,
        names: &[&str],
    ) -> Result<(Shapes, bool), ResolveError> {
        Ok(match (&way.accelerators, self.mig) {
            (None, _) => (vec![(None, Vec::new())], false),
            (Some(acc), _) if acc.options.iter().all(|o| o.model == ANY_MODEL) => {
                if self.nodes > 1
                    && acc
                        .options
                        .iter()
                        .any(|o| matches!(o.count, GpuCount::Fraction(_)))
                {
                    return Err(ResolveError::new(
                        "a fraction of a GPU cannot be a gang of nodes".to_string(),
                    ));
                }
                let mut groups: Shapes = Vec::new();
                for o in &acc.options {
                    if !groups.iter().any(|(c, _)| *c == Some(o.count)) {
                        groups.push((Some(o.count), Vec::new()));
                    }
                }
                (groups, false)
            }
            (Some(acc), _) => {
                if acc.options.is_empty() {
                    return Err(ResolveError::new("`accelerators` is empty".to_string()));
                }
                // As SkyPilot does, options this fleet cannot offer are skipped; the way
                // fails only if none is left.
                let feasible: Vec<(&Accelerator, Vec<ModelId>)> = acc
                    .options
                    .iter()
                    .filter_map(|o| Some((o, resolve(&o.model).ok()?)))
                    .collect();
                if feasible.is_empty() {
                    if let [only] = acc.options.as_slice() {
                        return Err(resolve(&only.model).err().unwrap_or_else(|| {
                            ResolveError::new(format!("unknown GPU model `{}`", only.model))
                        }));
                    }
                    let asked: Vec<String> = acc
                        .options
                        .iter()
                        .map(|o| format!("`{}`", o.model))
                        .collect();
                    return Err(ResolveError::new(format!(
                        "none of {} is in this fleet (it has: {})",
                        asked.join(", "),
                        names.join(", ")
                    )));
                }
                // Options with other counts are other shapes of the job, in the order written.
                let mut groups: Shapes = Vec::new();
                for (o, ids) in feasible {
                    let at = match groups.iter().position(|(c, _)| *c == Some(o.count)) {
                        Some(i) => i,
                        None => {
                            groups.push((Some(o.count), Vec::new()));
                            groups.len() - 1
                        }
                    };
                    for id in ids {
                        if !groups[at].1.contains(&id) {
                            groups[at].1.push(id);
                        }
                    }
                }
                (groups, acc.ordered)
            }
        })
    }
}

/// Why the GPU model `name` is not one of the fleet's `names`: a model gantry knows that this
/// fleet lacks is said so (a known H100 is no typo), an unknown one gets the nearest name; a
/// fleet without GPUs says that, not an empty list.
fn not_in_fleet(name: &str, names: &[&str]) -> String {
    let has = if names.is_empty() {
        "this fleet has no GPUs: a CPU job asks for `cpus` alone".to_string()
    } else {
        format!("this fleet has: {}", names.join(", "))
    };
    let (known, vram, _) = crate::model::names::model_of(name);
    if vram > 0 && known.eq_ignore_ascii_case(name) {
        return format!("no pool of this fleet has `{name}` GPUs ({has})");
    }
    let hint =
        did_you_mean(name, names).map_or(String::new(), |b| format!("; did you mean `{b}`?"));
    format!("unknown GPU model `{name}`{hint} ({has})")
}
