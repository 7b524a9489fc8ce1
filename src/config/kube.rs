//! The fleet file's Kubernetes pools: which cluster (kubeconfig context), the nodes and the
//! image gantry's pods run, checked before the daemon connects.

use super::fleet::{Backend, PoolConfig};
use super::problem::{Checked, Problem};
use serde::{Deserialize, Serialize};

/// `[pools.kubernetes]`: which cluster, where gantry's pods go and what they run, and — for a
/// pool built from the cluster's nodes (`gpu = "auto"`) — which nodes and how they group.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KubeSettings {
    /// The kubeconfig context (default: the current one) and file (default: `KUBECONFIG`,
    /// `~/.kube/config`, or the in-cluster service account).
    pub context: Option<String>,
    pub kubeconfig: Option<String>,
    /// Where gantry's pods go (default `gantry`).
    pub namespace: Option<String>,
    /// The container image gantry's pods run (their `run` and `setup` under bash).
    pub image: Option<String>,
    /// Where the cluster's DCGM exporter metrics are read (Prometheus text: one exporter, or
    /// a Prometheus `/federate` of all of them): per-GPU utilization and memory by node.
    pub dcgm: Option<String>,
    /// `gpu = "auto"`: which nodes the pool takes (a label selector as `kubectl get nodes -l`
    /// takes it; default: every node with GPUs), the label whose value groups them into
    /// gantry pools (default `node.kubernetes.io/instance-type`) and the label naming each
    /// node's network block (its leaf switch; none by default).
    pub node_selector: Option<String>,
    pub pool_label: Option<String>,
    pub block_label: Option<String>,
}

impl KubeSettings {
    /// Where gantry's pods go.
    pub fn namespace(&self) -> &str {
        self.namespace.as_deref().unwrap_or("gantry")
    }
}

/// A Kubernetes pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> Checked {
    let Some(k) = super::pool::backend_table(
        p,
        name,
        p.kubernetes.as_ref(),
        Backend::Kubernetes,
        "with the image gantry's pods run, e.g. image = \"nvcr.io/nvidia/pytorch:25.01-py3\"",
    )?
    else {
        return Ok(());
    };
    // What only a pool built from its cluster's nodes (`gpu = "auto"`) takes.
    let auto_only = [
        (
            "node_selector",
            "kubernetes.node_selector",
            k.node_selector.is_some(),
        ),
        (
            "pool_label",
            "kubernetes.pool_label",
            k.pool_label.is_some(),
        ),
        (
            "block_label",
            "kubernetes.block_label",
            k.block_label.is_some(),
        ),
    ];
    if p.is_auto() {
        return auto_pool(p, k, name);
    }
    if let Some((field, at, _)) = auto_only.iter().find(|(.., set)| *set) {
        return Err(Problem::at(at, format!(
            "{name}: `{field}` is for gpu = \"auto\" Kubernetes pools (built from the nodes they select); this one lists its nodes (`hosts`)"
        )));
    }
    if p.hosts.is_empty() {
        return Err(Problem::at("hosts", format!(
            "{name}: a provider = \"kubernetes\" pool needs `hosts`: its nodes, e.g. hosts = [\"gpu-node-1\", \"gpu-node-2\"] (`gantry kube` lists them)"
        )));
    }
    for h in &p.hosts {
        // A DNS-1123 subdomain, as node names are.
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !ok {
            return Err(Problem::at("hosts", format!(
                "{name}: hosts: `{h}` is not a Kubernetes node name (lowercase letters, digits, '-' and '.')"
            )));
        }
    }
    common(k, name)?;
    super::ssh::listed_nodes(p, name, "node", "a Kubernetes pool is its nodes")
}

/// What every Kubernetes pool needs: its image, a namespace and DCGM address that can be.
fn common(p: &KubeSettings, name: &str) -> Checked {
    match p.image.as_deref() {
        None | Some("") => {
            return Err(Problem::at("kubernetes.image", format!(
                "{name}: [pools.kubernetes] needs `image`: the container image gantry's pods run, e.g. image = \"nvcr.io/nvidia/pytorch:25.01-py3\""
            )))
        }
        Some(_) => {}
    }
    if let Some(ns) = &p.namespace {
        let ok = !ns.is_empty()
            && ns.len() <= 63
            && ns
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !ok {
            return Err(Problem::at("kubernetes.namespace", format!(
                "{name}: namespace = \"{ns}\" is not a Kubernetes namespace name (lowercase letters, digits and '-')"
            )));
        }
    }
    if let Some(url) = &p.dcgm {
        if !url.starts_with("http://") {
            return Err(Problem::at("kubernetes.dcgm", format!(
                "{name}: dcgm = \"{url}\" is not an http:// URL: give the DCGM exporter's metrics address, e.g. dcgm = \"http://nvidia-dcgm-exporter.gpu-operator:9400/metrics\" (https is not read yet)"
            )));
        }
    }
    Ok(())
}

/// A `gpu = "auto"` pool: gantry builds its pools from the nodes `node_selector` selects, so
/// it lists none and declares no GPUs.
fn auto_pool(p: &PoolConfig, k: &KubeSettings, name: &str) -> Checked {
    if !p.hosts.is_empty() {
        return Err(Problem::at("hosts", format!(
            "{name}: a gpu = \"auto\" Kubernetes pool takes the nodes `node_selector` selects; leave `hosts` out (or declare the pool's gpu and list its hosts)"
        )));
    }
    if p.gpus_per_node > 0 || p.vram_gb > 0 || p.mig_gpus_per_node > 0 {
        return Err(Problem::at("gpus_per_node", format!(
            "{name}: gpu = \"auto\": the GPUs come from the nodes' labels (GPU Feature Discovery); leave gpus_per_node, vram_gb and mig_gpus_per_node out"
        )));
    }
    if let Some(sel) = &k.node_selector {
        check_selector(sel).map_err(|e| {
            Problem::at(
                "kubernetes.node_selector",
                format!("{name}: node_selector = \"{sel}\": {e}"),
            )
        })?;
    }
    for (field, at, label) in [
        ("pool_label", "kubernetes.pool_label", &k.pool_label),
        ("block_label", "kubernetes.block_label", &k.block_label),
    ] {
        if let Some(l) = label {
            check_label_key(l)
                .map_err(|e| Problem::at(at, format!("{name}: {field} = \"{l}\": {e}")))?;
        }
    }
    if p.max_nodes.is_some() || p.min_nodes > 0 {
        return Err(Problem::at(
            "max_nodes",
            format!("{name}: a Kubernetes pool is the cluster's nodes: no min_nodes or max_nodes"),
        ));
    }
    common(k, name)
}

/// A label key (`nvidia.com/gpu.product`, `pool`): an optional DNS-subdomain prefix and `/`,
/// then a name of at most 63 characters.
pub fn check_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let edge = |s: &str| {
        s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && s.chars().last().is_some_and(|c| c.is_ascii_alphanumeric())
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && edge(name)
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && edge(p)
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!(
            "`{key}` is not a label key (an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.')"
        ))
    }
}

/// A label selector as `kubectl get nodes -l` takes it: requirements separated by commas,
/// each `KEY`, `!KEY`, `KEY=V`, `KEY==V`, `KEY!=V`, `KEY in (A,B)` or `KEY notin (A,B)`.
/// Checked for shape here (the API server judges the rest and its answer is said).
pub fn check_selector(sel: &str) -> Result<(), String> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in sel.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&sel[start..i]);
                start = i + 1;
            }
            _ => {}
        }
        if depth < 0 {
            return Err("a ')' without its '('".into());
        }
    }
    if depth != 0 {
        return Err("a '(' without its ')'".into());
    }
    parts.push(&sel[start..]);
    for part in parts {
        let part = part.trim();
        if part.is_empty() {
            return Err("an empty requirement (two commas, or one at an end)".into());
        }
        let key = part
            .trim_start_matches('!')
            .split(|c: char| c == '=' || c == '!' || c.is_whitespace())
            .next()
            .unwrap_or_default();
        check_label_key(key).map_err(|e| {
            format!("{e}; write requirements as kubectl -l does: KEY, !KEY, KEY=V, KEY!=V, KEY in (A,B)")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{check_label_key, check_selector};
    use crate::config::fleet::parse;

    const POOL: &str = "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"kubernetes\"\nregion = \"k8s\"\nzone = \"us-east-1a\"\nname = \"h100\"\ninstance_type = \"p5.48xlarge\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 190\nmemory_gb = 1900\ncapacity = \"reserved\"\nprice_per_hour = 98.32\n";

    /// The pool with `extra` among its own fields and `table` as its [pools.kubernetes].
    fn with(extra: &str, table: &str) -> Result<crate::config::fleet::FleetConfig, String> {
        parse(
            "f.toml",
            &format!("{POOL}{extra}[pools.kubernetes]\n{table}"),
        )
        .map_err(|e| e.to_string())
    }

    const NODE: &str = "hosts = [\"gpu-0\"]\n";

    #[test]
    fn a_kubernetes_pool_is_its_nodes_and_says_what_is_wrong() {
        let f = with(
            "hosts = [\"gpu-0\", \"gpu-1\"]\n",
            "context = \"prod\"\nnamespace = \"ml\"\nimage = \"pytorch:25\"\n",
        )
        .unwrap();
        let p = &f.pools[0];
        assert!(p.is_kube() && p.lists_cluster_nodes());
        let k = p.kubernetes.as_ref().unwrap();
        assert_eq!(
            (k.context.as_deref(), k.namespace(), p.hosts.len()),
            (Some("prod"), "ml", 2)
        );
        let e = with("", "image = \"x\"\n").unwrap_err();
        assert!(
            e.contains("f.toml:4:1") && e.contains("needs `hosts`"),
            "{e}"
        );
        let e = with(NODE, "").unwrap_err();
        assert!(e.contains("needs `image`"), "{e}");
        let e = parse("f.toml", &format!("{POOL}{NODE}"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("needs its [pools.kubernetes] table with the image"),
            "{e}"
        );
        let e = with("hosts = [\"GPU_0\"]\n", "image = \"x\"\n").unwrap_err();
        assert!(e.contains("not a Kubernetes node name"), "{e}");
        let e = with(NODE, "image = \"x\"\nnamespace = \"Gantry\"\n").unwrap_err();
        assert!(e.contains("not a Kubernetes namespace name"), "{e}");
        let e = with(NODE, "image = \"x\"\ndcgm = \"dcgm-exporter:9400\"\n").unwrap_err();
        assert!(e.contains("is not an http:// URL"), "{e}");
        let ok = with(NODE, "image = \"x\"\ndcgm = \"http://dcgm:9400/metrics\"\n").unwrap();
        assert_eq!(
            ok.pools[0].kubernetes.as_ref().unwrap().dcgm.as_deref(),
            Some("http://dcgm:9400/metrics")
        );
        let e = with(NODE, "image = \"x\"\nimages = \"y\"\n").unwrap_err();
        assert!(
            e.contains("unknown field `images`; did you mean `image`?"),
            "{e}"
        );
        let e = parse(
            "f.toml",
            &(POOL
                .replace("kubernetes", "aws")
                .replace("zone = ", "nodes = 1\nbackend = \"simulated\"\nzone = ")
                + "[pools.kubernetes]\ncontext = \"x\"\n"),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
        .unwrap_err();
        assert!(
            e.contains("[pools.kubernetes] is for backend = \"kubernetes\" pools"),
            "{e}"
        );
    }

    #[test]
    fn a_field_written_where_an_older_gantry_took_it_says_where_it_goes_now() {
        let e = parse(
            "f.toml",
            &format!("{POOL}{NODE}image = \"nvcr.io/nvidia/pytorch:25.01-py3\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("f.toml:18:1: `image` is no longer a field of the pool itself")
                && e.contains("[pools.kubernetes] table, as `image`"),
            "{e}"
        );
    }

    #[test]
    fn an_auto_pool_selects_its_nodes_and_declares_no_gpus() {
        let auto = POOL.replace(
            "gpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\n",
            "gpu = \"auto\"\n",
        );
        let with = |extra: &str, table: &str| {
            parse(
                "f.toml",
                &format!("{auto}{extra}[pools.kubernetes]\nimage = \"x\"\n{table}"),
            )
            .map_err(|e| e.to_string())
        };
        let f = with(
            "",
            "node_selector = \"pool=gpu\"\npool_label = \"eks.amazonaws.com/nodegroup\"\n",
        )
        .unwrap();
        assert_eq!(f.pools[0].nodes, 0, "its nodes come from the cluster");
        let e = with(NODE, "").unwrap_err();
        assert!(e.contains("leave `hosts` out"), "{e}");
        let e = with("gpus_per_node = 8\n", "").unwrap_err();
        assert!(e.contains("leave gpus_per_node, vram_gb"), "{e}");
        let e = with("", "block_label = \"Rack Id\"\n").unwrap_err();
        assert!(
            e.contains("block_label = \"Rack Id\": `Rack Id` is not a label key"),
            "{e}"
        );
        // On a pool that lists its nodes, a selector says what it is for.
        let e = parse(
            "f.toml",
            &format!("{POOL}{NODE}[pools.kubernetes]\nimage = \"x\"\nnode_selector = \"a=b\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("`node_selector` is for gpu = \"auto\" Kubernetes pools"),
            "{e}"
        );
    }

    #[test]
    fn selectors_and_label_keys_are_checked_as_kubectl_writes_them() {
        for ok in [
            "cloud.google.com/gke-accelerator",
            "nvidia.com/gpu.present=true",
            "pool in (a,b),!spot,tier!=cpu",
            "team==ml",
        ] {
            assert_eq!(check_selector(ok), Ok(()), "{ok}");
        }
        for bad in ["", "a,,b", "pool in (a,b", "-x=y", "a/b/c=1"] {
            assert!(check_selector(bad).is_err(), "{bad}");
        }
        assert!(check_label_key("node.kubernetes.io/instance-type").is_ok());
        assert!(check_label_key("Network.Block/x").is_err());
    }
}
