//! A spec resolved against a fleet: model names to the fleet's models, `infra` to its pools,
//! the alternatives of `accelerators` / `any_of` / `ordered` to one request the scheduler places.

use super::{did_you_mean, Accelerator, GpuCount, Infra, JobSpec, ANY_MODEL};
use crate::model::{Fleet, GpuRequest, JobRequest, ModelChoice, PoolId, MILLI_PER_GPU};

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
        return Err(ResolveError(format!(
            "infra {infra}: no pool of this fleet is there (its pools are in: {})",
            places.join(", ")
        )));
    }
    Ok(Some(pools))
}

/// Of `pools` (`None`: all), those that run container images: Kubernetes pools.
fn container_pools(
    image: &str,
    pools: Option<Vec<PoolId>>,
    fleet: &Fleet,
) -> Result<Vec<PoolId>, ResolveError> {
    let all = || (0..fleet.pools.len()).map(|i| PoolId(i as u32)).collect();
    let kube: Vec<PoolId> = pools
        .unwrap_or_else(all)
        .into_iter()
        .filter(|&id| same_cloud("kubernetes", fleet.pool_place(id).0))
        .collect();
    if kube.is_empty() {
        return Err(ResolveError(format!(
            "image_id docker:{image}: only Kubernetes pools run container images, and none of this fleet's pools where the job may run is one; leave image_id out to run on the hosts as they are"
        )));
    }
    Ok(kube)
}

/// Why a spec cannot become a request on this fleet.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

impl JobSpec {
    /// The scheduler's view of this spec on `fleet`: model names resolved, shares checked.
    pub fn to_request(&self, fleet: &Fleet) -> Result<JobRequest, ResolveError> {
        if let Some(first) = self.unset.first() {
            let (what, name) = first.split_once('.').unwrap_or(("envs", first));
            let how = if what == "secrets" {
                format!("`gantry submit FILE --secret {name}` (read from your environment)")
            } else {
                format!("`gantry submit FILE --env {name}=…`")
            };
            return Err(ResolveError(format!(
                "{first} has no value in the file: give it at submit with {how}{}",
                if self.unset.len() > 1 {
                    format!(" (also without one: {})", self.unset[1..].join(", "))
                } else {
                    String::new()
                }
            )));
        }
        let names: Vec<&str> = fleet.models.iter().map(|m| m.name.as_str()).collect();
        let resolve = |name: &str| {
            fleet.model_by_name(name).ok_or_else(|| {
                let hint = did_you_mean(name, &names)
                    .map_or(String::new(), |b| format!("; did you mean `{b}`?"));
                ResolveError(format!(
                    "unknown GPU model `{name}`{hint} (this fleet has: {})",
                    names.join(", ")
                ))
            })
        };
        let (gpu, models) = match (&self.accelerators, self.mig) {
            (None, None) => (GpuRequest::None, ModelChoice::Any),
            (None, Some(p)) => (GpuRequest::Mig(p), ModelChoice::Any),
            (Some(acc), None) if matches!(acc.options.as_slice(), [o] if o.model == ANY_MODEL) => {
                let gpu = match acc.options[0].count {
                    GpuCount::Whole(n) => GpuRequest::Whole(n),
                    GpuCount::Fraction(m) if self.nodes == 1 => GpuRequest::Fraction(m),
                    GpuCount::Fraction(_) => {
                        return Err(ResolveError(
                            "a fraction of a GPU cannot be a gang of nodes".to_string(),
                        ))
                    }
                };
                (gpu, ModelChoice::Any)
            }
            (Some(acc), mig) => {
                if acc.options.is_empty() {
                    return Err(ResolveError("`accelerators` is empty".to_string()));
                }
                // As SkyPilot does, options this fleet cannot offer are skipped; the job
                // fails only if none is left.
                let feasible: Vec<(&Accelerator, crate::model::ModelId)> = acc
                    .options
                    .iter()
                    .filter_map(|o| Some((o, resolve(&o.model).ok()?)))
                    .collect();
                let Some(&(first, _)) = feasible.first() else {
                    if let [only] = acc.options.as_slice() {
                        return Err(resolve(&only.model).err().unwrap_or_else(|| {
                            ResolveError(format!("unknown GPU model `{}`", only.model))
                        }));
                    }
                    let asked: Vec<String> = acc
                        .options
                        .iter()
                        .map(|o| format!("`{}`", o.model))
                        .collect();
                    return Err(ResolveError(format!(
                        "none of {} is in this fleet (it has: {})",
                        asked.join(", "),
                        names.join(", ")
                    )));
                };
                if feasible.iter().any(|(o, _)| o.count != first.count) {
                    return Err(ResolveError(
                        "every model in `accelerators` this fleet has must ask for the same count (gantry places one shape)".to_string(),
                    ));
                }
                let ids: Vec<crate::model::ModelId> = feasible.iter().map(|(_, id)| *id).collect();
                let gpu = match (mig, first.count) {
                    (Some(p), _) => GpuRequest::Mig(p),
                    (None, GpuCount::Whole(n)) => GpuRequest::Whole(n),
                    (None, GpuCount::Fraction(m)) if self.nodes > 1 => {
                        return Err(ResolveError(format!(
                            "a fraction of a GPU ({}) cannot be a {}-node gang",
                            f64::from(m) / f64::from(MILLI_PER_GPU),
                            self.nodes
                        )))
                    }
                    (None, GpuCount::Fraction(m)) => GpuRequest::Fraction(m),
                };
                let choice = if acc.ordered {
                    ModelChoice::Prefer(ids)
                } else {
                    ModelChoice::AnyOf(ids)
                };
                (gpu, choice)
            }
        };
        let request = JobRequest {
            nodes: self.nodes,
            gpu,
            cpu_milli: self.cpu_milli,
            mem_mib: self.mem_mib,
            vram_mib: self.vram_mib.unwrap_or(0),
            models,
            spot_ok: self.use_spot,
            max_price_per_hour: self.max_price_per_hour,
            pools: pools_of(&self.infra, fleet)?,
        };
        let mut request = request;
        if let Some(image) = &self.image {
            request.pools = Some(container_pools(image, request.pools.take(), fleet)?);
        }
        if let (Some(pools), false) = (&request.pools, request.gpu == GpuRequest::None) {
            let fits = |id: &PoolId| {
                fleet
                    .pool(*id)
                    .model
                    .is_some_and(|m| request.models.rank(m).is_some())
            };
            if !pools.iter().any(fits) {
                let mut there: Vec<&str> = pools
                    .iter()
                    .filter_map(|id| Some(fleet.model(fleet.pool(*id).model?).name.as_str()))
                    .collect();
                there.sort_unstable();
                there.dedup();
                let mut limits = Vec::new();
                if self.infra != Infra::default() {
                    limits.push(format!("infra {}", self.infra));
                }
                if let Some(i) = &self.image {
                    limits.push(format!("image_id docker:{i} (Kubernetes pools)"));
                }
                return Err(ResolveError(format!(
                    "{}: none of the GPUs asked for is there (its pools have: {})",
                    limits.join(", "),
                    if there.is_empty() {
                        "no GPUs".to_string()
                    } else {
                        there.join(", ")
                    }
                )));
            }
        }
        request
            .validate()
            .map_err(|e| ResolveError(e.to_string()))?;
        Ok(request)
    }
}
