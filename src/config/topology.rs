//! Named topology of a pool of listed machines (SSH hosts, Slurm or Kubernetes nodes): which
//! share an InfiniBand leaf or network block and which share an NVLink domain, as the site
//! knows it or the cluster's labels say (`gantry kube --fleet` writes them from
//! `nvidia.com/gpu.clique` and the block label). The counted form (`nodes_per_leaf`,
//! `nodes_per_nvlink`) suits pools whose nodes are numbered in rack order.

use super::fleet::PoolConfig;
use super::problem::Problem;
use std::collections::{BTreeMap, HashMap};

/// The pool's `leaves` and `nvlink_domains`, or why they are wrong.
pub fn validate(p: &PoolConfig, name: &str) -> super::problem::Checked {
    for (field, groups, counted) in [
        ("leaves", &p.leaves, p.nodes_per_leaf.is_some()),
        (
            "nvlink_domains",
            &p.nvlink_domains,
            p.nodes_per_nvlink.is_some(),
        ),
    ] {
        if groups.is_empty() {
            continue;
        }
        if p.hosts.is_empty() {
            return Err(Problem::at("hosts", format!(
                "{name}: `{field}` names hosts, and this pool lists none (`hosts`); use nodes_per_leaf / nodes_per_nvlink for numbered nodes"
            )));
        }
        if counted {
            let other = if field == "leaves" {
                "nodes_per_leaf"
            } else {
                "nodes_per_nvlink"
            };
            return Err(Problem::at(
                field,
                format!(
                    "{name}: `{field}` and `{other}` both say which nodes are together: keep one"
                ),
            ));
        }
        let index = host_index(p);
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        for (group, hosts) in groups {
            if group.trim().is_empty() {
                return Err(Problem::at(
                    field,
                    format!("{name}: `{field}` has a group with an empty name"),
                ));
            }
            for h in hosts {
                if !index.contains_key(h.as_str()) {
                    return Err(Problem::at(
                        field,
                        format!(
                            "{name}: {field}.{group}: `{h}` is not one of the pool's hosts ({})",
                            p.hosts.join(", ")
                        ),
                    ));
                }
                if let Some(first) = seen.insert(h, group) {
                    return Err(Problem::at(
                        field,
                        format!("{name}: {field}: `{h}` is in both `{first}` and `{group}`"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Each listed host by the names a group may call it — the entry as written, or the node's
/// name (an SSH host without its user) — to its index in `hosts`. Built once per pool: a
/// cluster's pool lists thousands of nodes, and scanning `hosts` for every name of every
/// group made a 3,000-node pool take minutes to load.
fn host_index(p: &PoolConfig) -> HashMap<String, usize> {
    let mut index = HashMap::with_capacity(p.hosts.len() * 2);
    for (i, h) in p.hosts.iter().enumerate() {
        index.insert(p.node_name(i as u32), i);
        index.insert(h.clone(), i);
    }
    index
}

/// The group of each listed host (by index in `hosts`), where `groups` names one.
fn group_by_host<'a>(
    p: &PoolConfig,
    groups: &'a BTreeMap<String, Vec<String>>,
) -> Vec<Option<&'a str>> {
    let mut of = vec![None; p.hosts.len()];
    if groups.is_empty() {
        return of;
    }
    let index = host_index(p);
    for (g, hosts) in groups {
        for h in hosts {
            if let Some(&i) = index.get(h.as_str()) {
                // The first group naming it, as validation lets a host be named twice only
                // by its two names.
                of[i].get_or_insert(g.as_str());
            }
        }
    }
    of
}

/// The leaf of each of the pool's first `count` nodes: named (`leaves`), counted
/// (`nodes_per_leaf`), or none.
pub fn leaves(p: &PoolConfig, count: u32) -> Vec<Option<String>> {
    let named = group_by_host(p, &p.leaves);
    (0..count)
        .map(|i| match named.get(i as usize).copied().flatten() {
            Some(g) => Some(format!("{}/{}/{g}", p.provider, p.zone)),
            None => p
                .nodes_per_leaf
                .map(|k| format!("{}/{}/leaf-{}", p.provider, p.zone, i / k)),
        })
        .collect()
}

/// The NVLink domain each of the pool's first `count` nodes shares with others, if any
/// (alone: the node itself).
pub fn nvlinks(p: &PoolConfig, count: u32) -> Vec<Option<String>> {
    let named = group_by_host(p, &p.nvlink_domains);
    (0..count)
        .map(|i| match named.get(i as usize).copied().flatten() {
            Some(g) => Some(format!("{}/{}/nvlink-{g}", p.provider, p.zone)),
            None => p
                .nodes_per_nvlink
                .filter(|&k| k > 1)
                .map(|k| format!("{}/{}-rack-{}", p.provider, p.name, i / k)),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use crate::config::fleet;

    const POOL: &str = "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"lab\"\nzone = \"rack\"\nname = \"h100\"\ninstance_type = \"dgx\"\ngpu = \"H100\"\ngpus_per_node = 8\nvram_gb = 80\ncpus = 8\nmemory_gb = 64\ncapacity = \"reserved\"\nprice_per_hour = 0.0\nhosts = [\"root@g1:2222\", \"g2\", \"g3\", \"g4\"]\n";

    #[test]
    fn named_leaves_and_nvlink_domains_place_the_hosts() {
        let text = format!(
            "{POOL}leaves = {{ block-a = [\"g1:2222\", \"g2\"], block-b = [\"g3\"] }}\nnvlink_domains = {{ c1 = [\"root@g1:2222\", \"g3\"] }}\n"
        );
        let cfg = fleet::parse("fleet.toml", &text).unwrap();
        let f = fleet::fleet_of(&cfg);
        let leaf = |n: usize| f.nodes[n].leaf.map(|l| f.leaves[l.index()].clone());
        assert_eq!(leaf(0).as_deref(), Some("ssh/rack/block-a"));
        assert_eq!(leaf(1), leaf(0));
        assert_eq!(leaf(2).as_deref(), Some("ssh/rack/block-b"));
        assert_eq!(leaf(3), None);
        assert_eq!(f.nodes[0].nvlink, f.nodes[2].nvlink);
        assert_ne!(f.nodes[0].nvlink, f.nodes[1].nvlink);
        assert_ne!(f.nodes[1].nvlink, f.nodes[3].nvlink);
    }

    #[test]
    fn wrong_groups_are_named_with_what_to_do() {
        let err = |extra: &str| {
            fleet::parse("fleet.toml", &format!("{POOL}{extra}\n"))
                .unwrap_err()
                .to_string()
        };
        let e = err("leaves = { a = [\"g9\"] }");
        assert!(
            e.contains("leaves.a: `g9` is not one of the pool's hosts (root@g1:2222, g2, g3, g4)"),
            "{e}"
        );
        let e = err("leaves = { a = [\"g2\"], b = [\"g2\"] }");
        assert!(e.contains("leaves: `g2` is in both `a` and `b`"), "{e}");
        let e = err("nvlink_domains = { a = [\"g2\"] }\nnodes_per_nvlink = 2");
        assert!(
            e.contains("`nvlink_domains` and `nodes_per_nvlink` both say"),
            "{e}"
        );
        assert!(e.starts_with("fleet.toml:"), "{e}");
    }
}
