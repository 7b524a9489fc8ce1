//! Pods users give gantry to place (`spec.schedulerName: gantry`), as work for the daemon to
//! queue: one job file per waiting pod, whose `adopt` names it — placed by gantry's core and
//! bound where it chose, as a secondary scheduler (Kueue, Volcano, KAI) binds.

use super::inventory::{pod_gpus, JOB_LABEL, SCHEDULER};
use crate::backend::Wanted;
use k8s_openapi::api::core::v1::Pod;
use serde_yaml_ng::{Mapping, Value};

/// The pod label naming its gantry team (else its namespace is the team's name).
pub const TEAM_LABEL: &str = "gantry.dev/team";
/// The pod label naming its priority class.
pub const PRIORITY_LABEL: &str = "gantry.dev/priority";

/// `pod NAMESPACE/NAME` → (namespace, name).
pub fn adopted_pod(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix("pod ")?
        .split_once('/')
        .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
}

/// The pool the pods are placed in: where the job files keep them.
pub struct Place {
    pub region: String,
    pub zone: String,
    pub instance_type: String,
}

/// Whether `p` waits for gantry to place it in `place`'s pool: given to gantry, not placed,
/// not gantry's own, not going away, and not selecting another instance type.
pub fn waits(p: &Pod, place: &Place) -> bool {
    let Some(spec) = &p.spec else { return false };
    let other_type = spec
        .node_selector
        .as_ref()
        .and_then(|s| s.get("node.kubernetes.io/instance-type"))
        .is_some_and(|t| *t != place.instance_type);
    let phase = p.status.as_ref().and_then(|s| s.phase.as_deref());
    spec.scheduler_name.as_deref() == Some(SCHEDULER)
        && spec.node_name.is_none()
        && p.metadata.deletion_timestamp.is_none()
        && !p
            .metadata
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(JOB_LABEL))
        && phase.is_none_or(|ph| ph == "Pending")
        && !other_type
}

/// The job file for a waiting pod: its GPUs (any model of the pool's), kept to the pool.
pub fn wanted(p: &Pod, place: &Place) -> Wanted {
    let ns = p
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| "default".into());
    let name = p.metadata.name.clone().unwrap_or_default();
    let key = format!("pod {ns}/{name}");
    let labels = p.metadata.labels.as_ref();
    let label = |k: &str| labels.and_then(|l| l.get(k)).cloned();
    let s = |v: &str| Value::String(v.to_string());
    let mut resources = Mapping::new();
    let gpus = pod_gpus(p);
    if gpus > 0 {
        resources.insert(
            s("accelerators"),
            s(&format!("{}:{gpus}", crate::spec::ANY_MODEL)),
        );
    }
    resources.insert(
        s("infra"),
        s(&format!("kubernetes/{}/{}", place.region, place.zone)),
    );
    resources.insert(s("instance_type"), s(&place.instance_type));
    let mut doc = Mapping::new();
    doc.insert(s("name"), s(&key));
    doc.insert(s("resources"), Value::Mapping(resources));
    doc.insert(s("run"), s(&format!("# {key}: its own containers")));
    doc.insert(s("adopt"), s(&key));
    Wanted {
        spec: serde_yaml_ng::to_string(&Value::Mapping(doc)).unwrap_or_default(),
        team: label(TEAM_LABEL).unwrap_or_else(|| ns.clone()),
        priority: label(PRIORITY_LABEL),
        key,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_waiting_pod_is_a_job_file_kept_to_its_pool() {
        let p: Pod = serde_json::from_value(json!({
            "metadata": {"name": "train-x7", "namespace": "research",
                         "labels": {"gantry.dev/priority": "production"}},
            "spec": {"schedulerName": "gantry", "containers": [{"name": "main", "image": "i",
                "resources": {"limits": {"nvidia.com/gpu": "4"}}}]},
            "status": {"phase": "Pending"}
        }))
        .unwrap();
        let place = Place {
            region: "k8s".into(),
            zone: "dc1".into(),
            instance_type: "p5.48xlarge".into(),
        };
        assert!(waits(&p, &place));
        let w = wanted(&p, &place);
        assert_eq!(
            (w.key.as_str(), w.team.as_str(), w.priority.as_deref()),
            ("pod research/train-x7", "research", Some("production"))
        );
        let spec = crate::spec::parse("w", w.spec.as_bytes()).unwrap();
        assert_eq!(spec.adopt.as_deref(), Some("pod research/train-x7"));
        assert_eq!(
            spec.infra.to_string(),
            "kubernetes/k8s/dc1 instance type p5.48xlarge"
        );
        assert_eq!(adopted_pod(&w.key), Some(("research", "train-x7")));
        let mut bound = p.clone();
        bound.spec.as_mut().unwrap().node_name = Some("gpu-0".into());
        assert!(!waits(&bound, &place));
        let mut elsewhere = p.clone();
        elsewhere.spec.as_mut().unwrap().node_selector = Some(
            [(
                "node.kubernetes.io/instance-type".to_string(),
                "g6.xlarge".to_string(),
            )]
            .into(),
        );
        assert!(!waits(&elsewhere, &place));
        let mut other = p;
        other.spec.as_mut().unwrap().scheduler_name = Some("default-scheduler".into());
        assert!(!waits(&other, &place));
    }
}
