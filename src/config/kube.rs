//! The fleet file's Kubernetes pools: which cluster (kubeconfig context), the nodes and the
//! image gantry's pods run, checked before the daemon connects.

use super::fleet::PoolConfig;

/// A Kubernetes pool's settings, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> Result<(), String> {
    // What only a pool built from its cluster's nodes (`gpu = "auto"`) takes.
    let auto_only = [
        ("node_selector", p.node_selector.is_some()),
        ("pool_label", p.pool_label.is_some()),
        ("block_label", p.block_label.is_some()),
    ];
    let kube_only = [
        ("context", p.context.is_some()),
        ("kubeconfig", p.kubeconfig.is_some()),
        ("namespace", p.namespace.is_some()),
        ("image", p.image.is_some()),
        ("dcgm", p.dcgm.is_some()),
    ];
    if !p.is_kube() {
        let all: Vec<(&str, bool)> = kube_only.iter().chain(&auto_only).copied().collect();
        return super::ssh::none_set(p, name, "kubernetes", &all);
    }
    if p.is_auto() {
        return auto_pool(p, name);
    }
    if let Some((field, _)) = auto_only.iter().find(|(_, set)| *set) {
        return Err(format!(
            "{name}: `{field}` is for gpu = \"auto\" Kubernetes pools (built from the nodes they select); this one lists its nodes (`hosts`)"
        ));
    }
    if p.hosts.is_empty() {
        return Err(format!(
            "{name}: a provider = \"kubernetes\" pool needs `hosts`: its nodes, e.g. hosts = [\"gpu-node-1\", \"gpu-node-2\"] (`gantry kube` lists them)"
        ));
    }
    for h in &p.hosts {
        // A DNS-1123 subdomain, as node names are.
        let ok = !h.is_empty()
            && h.len() <= 253
            && h.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !ok {
            return Err(format!(
                "{name}: hosts: `{h}` is not a Kubernetes node name (lowercase letters, digits, '-' and '.')"
            ));
        }
    }
    common(p, name)?;
    super::ssh::listed_nodes(p, name, "node", "a Kubernetes pool is its nodes")
}

/// What every Kubernetes pool needs: its image, a namespace and DCGM address that can be.
fn common(p: &PoolConfig, name: &str) -> Result<(), String> {
    match p.image.as_deref() {
        None | Some("") => {
            return Err(format!(
                "{name}: a provider = \"kubernetes\" pool needs `image`: the container image gantry's pods run, e.g. image = \"nvcr.io/nvidia/pytorch:25.01-py3\""
            ))
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
            return Err(format!(
                "{name}: namespace = \"{ns}\" is not a Kubernetes namespace name (lowercase letters, digits and '-')"
            ));
        }
    }
    if let Some(url) = &p.dcgm {
        if !url.starts_with("http://") {
            return Err(format!(
                "{name}: dcgm = \"{url}\" is not an http:// URL: give the DCGM exporter's metrics address, e.g. dcgm = \"http://nvidia-dcgm-exporter.gpu-operator:9400/metrics\" (https is not read yet)"
            ));
        }
    }
    Ok(())
}

/// A `gpu = "auto"` pool: gantry builds its pools from the nodes `node_selector` selects, so
/// it lists none and declares no GPUs.
fn auto_pool(p: &PoolConfig, name: &str) -> Result<(), String> {
    if !p.hosts.is_empty() {
        return Err(format!(
            "{name}: a gpu = \"auto\" Kubernetes pool takes the nodes `node_selector` selects; leave `hosts` out (or declare the pool's gpu and list its hosts)"
        ));
    }
    if p.gpus_per_node > 0 || p.vram_gb > 0 || p.mig_gpus_per_node > 0 {
        return Err(format!(
            "{name}: gpu = \"auto\": the GPUs come from the nodes' labels (GPU Feature Discovery); leave gpus_per_node, vram_gb and mig_gpus_per_node out"
        ));
    }
    if let Some(sel) = &p.node_selector {
        check_selector(sel).map_err(|e| format!("{name}: node_selector = \"{sel}\": {e}"))?;
    }
    for (field, label) in [
        ("pool_label", &p.pool_label),
        ("block_label", &p.block_label),
    ] {
        if let Some(l) = label {
            check_label_key(l).map_err(|e| format!("{name}: {field} = \"{l}\": {e}"))?;
        }
    }
    if p.max_nodes.is_some() || p.min_nodes > 0 {
        return Err(format!(
            "{name}: a Kubernetes pool is the cluster's nodes: no min_nodes or max_nodes"
        ));
    }
    common(p, name)
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

    fn with(extra: &str) -> Result<crate::config::fleet::FleetConfig, String> {
        parse("f.toml", &format!("{POOL}{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn a_kubernetes_pool_is_its_nodes_and_says_what_is_wrong() {
        let f = with(
            "context = \"prod\"\nnamespace = \"ml\"\nimage = \"pytorch:25\"\nhosts = [\"gpu-0\", \"gpu-1\"]\n",
        )
        .unwrap();
        let p = &f.pools[0];
        assert!(p.is_kube() && p.lists_cluster_nodes());
        assert_eq!(
            (p.context.as_deref(), p.namespace.as_deref(), p.hosts.len()),
            (Some("prod"), Some("ml"), 2)
        );
        let e = with("image = \"x\"\n").unwrap_err();
        assert!(
            e.contains("f.toml:4:1") && e.contains("needs `hosts`"),
            "{e}"
        );
        let e = with("hosts = [\"gpu-0\"]\n").unwrap_err();
        assert!(e.contains("needs `image`"), "{e}");
        let e = with("image = \"x\"\nhosts = [\"GPU_0\"]\n").unwrap_err();
        assert!(e.contains("not a Kubernetes node name"), "{e}");
        let e = with("image = \"x\"\nhosts = [\"gpu-0\"]\nnamespace = \"Gantry\"\n").unwrap_err();
        assert!(e.contains("not a Kubernetes namespace name"), "{e}");
        let e = with("image = \"x\"\nhosts = [\"gpu-0\"]\ndcgm = \"dcgm-exporter:9400\"\n")
            .unwrap_err();
        assert!(e.contains("is not an http:// URL"), "{e}");
        let ok = with("image = \"x\"\nhosts = [\"gpu-0\"]\ndcgm = \"http://dcgm:9400/metrics\"\n");
        assert_eq!(
            ok.unwrap().pools[0].dcgm.as_deref(),
            Some("http://dcgm:9400/metrics")
        );
        let e = parse(
            "f.toml",
            &POOL.replace("kubernetes", "aws").replace(
                "zone = ",
                "nodes = 1\ncontext = \"x\"\nbackend = \"simulated\"\nzone = ",
            ),
        )
        .map(|_| ())
        .map_err(|e| e.to_string())
        .unwrap_err();
        assert!(
            e.contains("`context` is for provider = \"kubernetes\" pools"),
            "{e}"
        );
    }

    #[test]
    fn an_auto_pool_selects_its_nodes_and_declares_no_gpus() {
        let auto = POOL.replace(
            "gpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\n",
            "gpu = \"auto\"\n",
        );
        let with = |extra: &str| {
            parse("f.toml", &format!("{auto}image = \"x\"\n{extra}")).map_err(|e| e.to_string())
        };
        let f =
            with("node_selector = \"pool=gpu\"\npool_label = \"eks.amazonaws.com/nodegroup\"\n")
                .unwrap();
        assert_eq!(f.pools[0].nodes, 0, "its nodes come from the cluster");
        let e = with("hosts = [\"gpu-0\"]\n").unwrap_err();
        assert!(e.contains("leave `hosts` out"), "{e}");
        let e = with("gpus_per_node = 8\n").unwrap_err();
        assert!(e.contains("leave gpus_per_node, vram_gb"), "{e}");
        let e = with("block_label = \"Rack Id\"\n").unwrap_err();
        assert!(
            e.contains("block_label = \"Rack Id\": `Rack Id` is not a label key"),
            "{e}"
        );
        // On a pool that lists its nodes, a selector says what it is for.
        let e = parse(
            "f.toml",
            &format!("{POOL}image = \"x\"\nhosts = [\"g\"]\nnode_selector = \"a=b\"\n"),
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
