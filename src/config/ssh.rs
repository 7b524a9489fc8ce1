//! The fleet file's SSH pools: `hosts` and the options of `ssh`, checked before the daemon
//! tries to connect (a wrong entry is named with what is wrong in it).

use super::fleet::PoolConfig;
use super::problem::{Checked, Problem};
use serde::{Deserialize, Serialize};

/// `[pools.ssh]`: how the daemon's `ssh` reaches a pool's hosts — an SSH pool's, or the
/// instances an EC2 or Lambda pool buys. Every field is optional: without the table, `ssh`
/// uses the user's own `~/.ssh/config` and keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SshSettings {
    /// `ssh -i`: the private key.
    pub identity_file: Option<String>,
    /// `ssh -F`: the ssh_config file (default: the user's `~/.ssh/config`).
    pub config: Option<String>,
    /// `ssh -J`: the head node the hosts are reached through.
    pub jump_host: Option<String>,
}

/// The backends whose hosts `ssh` reaches, so the ones that may have `[pools.ssh]`.
fn reached_over_ssh(p: &PoolConfig) -> bool {
    p.is_ssh() || p.buys_machines()
}

/// An SSH pool's hosts and options, or another pool's absence of them.
pub fn validate(p: &PoolConfig, name: &str) -> Checked {
    if p.ssh.is_some() && !reached_over_ssh(p) {
        return Err(Problem::at("ssh", format!(
            "{name}: [pools.ssh] is for the pools gantry reaches over SSH (backend = \"ssh\", \"ec2\" or \"lambda\"); this one is driven by the {} backend",
            p.backend().name()
        )));
    }
    let ssh_only = [
        ("hosts", !p.hosts.is_empty() && !p.lists_cluster_nodes()),
        (
            "lost_after",
            p.lost_after.is_some() && !p.lists_cluster_nodes(),
        ),
    ];
    if p.buys_machines() {
        // Its instances are reached over SSH as hosts are; gantry lists them itself.
        if !p.hosts.is_empty() {
            return Err(Problem::at("hosts", format!(
                "{name}: a {} pool's hosts are the instances gantry buys: no `hosts` (max_nodes bounds them)",
                p.backend().name()
            )));
        }
        return lost_after_ok(p, name);
    }
    if !p.is_ssh() {
        return none_set(p, name, "ssh", &ssh_only);
    }
    if p.hosts.is_empty() {
        return Err(Problem::at("hosts", format!(
            "{name}: a provider = \"ssh\" pool needs `hosts`, e.g. hosts = [\"gpu1.example\", \"ubuntu@10.0.0.12:2222\"]"
        )));
    }
    for h in &p.hosts {
        Destination::parse(h).map_err(|e| {
            Problem::at(
                "hosts",
                format!("{name}: hosts: {e} (expected [user@]host[:port])"),
            )
        })?;
    }
    listed_nodes(
        p,
        name,
        "host",
        "an SSH pool is its hosts (add hosts to grow it)",
    )
}

/// What a pool of listed machines (SSH hosts, Slurm nodes) must be: each listed once, one
/// node each, no elastic bounds, a sane `lost_after`. `what` names an entry ("host"), `is`
/// says what the pool is when it has min/max bounds.
pub(super) fn listed_nodes(p: &PoolConfig, name: &str, what: &str, is: &str) -> Checked {
    if let Some(dup) = p
        .hosts
        .iter()
        .enumerate()
        .find_map(|(i, h)| p.hosts[..i].contains(h).then_some(h))
    {
        return Err(Problem::at(
            "hosts",
            format!("{name}: {what} `{dup}` is listed twice"),
        ));
    }
    if p.nodes as usize != p.hosts.len() {
        return Err(Problem::at(
            "nodes",
            format!(
                "{name}: nodes = {} but {} {what}(s) are listed: one node per {what} (leave `nodes` out)",
                p.nodes,
                p.hosts.len()
            ),
        ));
    }
    if p.max_nodes.is_some_and(|m| m != p.nodes) || p.min_nodes > 0 {
        let field = if p.min_nodes > 0 {
            "min_nodes"
        } else {
            "max_nodes"
        };
        return Err(Problem::at(
            field,
            format!("{name}: {is}: no min_nodes or max_nodes"),
        ));
    }
    lost_after_ok(p, name)
}

fn lost_after_ok(p: &PoolConfig, name: &str) -> Checked {
    if let Some(d) = &p.lost_after {
        if crate::spec::parse_duration(d).is_none_or(|s| !(1.0..=86_400.0).contains(&s)) {
            return Err(Problem::at(
                "lost_after",
                format!("{name}: lost_after `{d}` must be a duration from 1s to 1d, e.g. 2m"),
            ));
        }
    }
    Ok(())
}

/// A pool of another provider must not set `fields` (name, set), which are `provider`'s.
pub(super) fn none_set(
    p: &PoolConfig,
    name: &str,
    provider: &str,
    fields: &[(&'static str, bool)],
) -> Checked {
    match fields.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(Problem::at(field, format!(
            "{name}: `{field}` is for provider = \"{provider}\" pools, or backend = \"{provider}\" (this one is provider = \"{}\", driven by the {} backend)",
            p.provider,
            p.backend().name()
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use crate::config::fleet::parse;

    const POOL: &str = "[[teams]]\nname = \"lab\"\n\n[[pools]]\nprovider = \"ssh\"\nregion = \"onprem\"\nzone = \"r1\"\nname = \"lab\"\ninstance_type = \"box\"\ncpus = 8\nmemory_gb = 32\ncapacity = \"reserved\"\nprice_per_hour = 0.0\n";

    fn with(extra: &str) -> Result<crate::config::fleet::FleetConfig, String> {
        parse("f.toml", &format!("{POOL}{extra}")).map_err(|e| e.to_string())
    }

    #[test]
    fn an_ssh_pool_has_a_node_per_host_named_after_it() {
        let cfg = with("hosts = [\"gpu1.example\", \"ubuntu@10.0.0.12:2222\"]\n").unwrap();
        assert_eq!(cfg.pools[0].nodes, 2);
        let fleet = crate::config::fleet::fleet_of(&cfg);
        let names: Vec<&str> = fleet.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["gpu1.example", "10.0.0.12:2222"]);
    }

    #[test]
    fn bad_ssh_pools_say_what_and_where() {
        let e = with("").unwrap_err();
        assert!(
            e.starts_with("f.toml:4:1:") && e.contains("needs `hosts`"),
            "{e}"
        );
        let e = with("hosts = [\"gpu1:http\"]\n").unwrap_err();
        assert!(
            e.contains("port `http`") && e.contains("[user@]host[:port]"),
            "{e}"
        );
        let e = with("hosts = [\"a\", \"a\"]\n").unwrap_err();
        assert!(e.contains("host `a` is listed twice"), "{e}");
        let e = with("hosts = [\"a\"]\nnodes = 3\n").unwrap_err();
        assert!(e.contains("nodes = 3 but 1 host(s)"), "{e}");
        let e = with("hosts = [\"a\"]\nlost_after = \"soon\"\n").unwrap_err();
        assert!(e.contains("lost_after `soon`"), "{e}");
        let cloud = POOL.replace("\"ssh\"", "\"aws\"\nbackend = \"simulated\"");
        let e = parse("f.toml", &format!("{cloud}nodes = 1\nhosts = [\"a\"]\n"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("`hosts` is for provider = \"ssh\" pools"), "{e}");
        let e = parse("f.toml", &cloud).unwrap_err().to_string();
        assert!(e.contains("missing field `nodes`"), "{e}");
    }

    #[test]
    fn how_ssh_reaches_the_hosts_is_the_pools_ssh_table() {
        let cfg = with("hosts = [\"a\"]\n[pools.ssh]\nidentity_file = \"~/.ssh/k\"\nconfig = \"/etc/gantry/ssh_config\"\njump_host = \"bastion\"\n")
            .unwrap();
        let s = cfg.pools[0].ssh.as_ref().unwrap();
        assert_eq!(
            (
                s.identity_file.as_deref(),
                s.config.as_deref(),
                s.jump_host.as_deref()
            ),
            (
                Some("~/.ssh/k"),
                Some("/etc/gantry/ssh_config"),
                Some("bastion")
            )
        );
        let e = with("hosts = [\"a\"]\nssh_config = \"/etc/gantry/ssh_config\"\n").unwrap_err();
        assert!(
            e.starts_with("f.toml:15:1: `ssh_config` is no longer a field of the pool itself")
                && e.contains("[pools.ssh] table, as `config`"),
            "{e}"
        );
        let e = with("hosts = [\"a\"]\n[pools.ssh]\nport = 22\n").unwrap_err();
        assert!(e.contains("unknown field `port`"), "{e}");
        let local = POOL.replace("\"ssh\"", "\"local\"");
        let e = parse(
            "f.toml",
            &format!("{local}nodes = 1\n[pools.ssh]\njump_host = \"b\"\n"),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("[pools.ssh] is for the pools gantry reaches over SSH")
                && e.contains("driven by the local backend"),
            "{e}"
        );
    }
}

/// A host entry of the fleet file: `[user@]host[:port]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
}

impl Destination {
    /// Parses a host entry; the error says what is wrong with it.
    pub fn parse(entry: &str) -> Result<Destination, String> {
        let entry = entry.trim();
        let (user, rest) = match entry.rsplit_once('@') {
            Some((u, r)) if !u.is_empty() => (Some(u.to_string()), r),
            Some(_) => return Err(format!("`{entry}`: empty user before @")),
            None => (None, entry),
        };
        let (host, port) = if let Some(v6) = rest.strip_prefix('[') {
            let (h, after) = v6
                .split_once(']')
                .ok_or(format!("`{entry}`: [ without ]"))?;
            let port = match after.strip_prefix(':') {
                Some(p) => Some(p),
                None if after.is_empty() => None,
                None => return Err(format!("`{entry}`: expected :PORT after ]")),
            };
            (h.to_string(), port)
        } else {
            match rest.split_once(':') {
                Some((h, p)) => (h.to_string(), Some(p)),
                None => (rest.to_string(), None),
            }
        };
        if host.is_empty() || host.contains(char::is_whitespace) {
            return Err(format!("`{entry}`: no host name"));
        }
        let port = match port {
            Some(p) => Some(p.parse::<u16>().ok().filter(|&p| p > 0).ok_or(format!(
                "`{entry}`: port `{p}` is not a number in 1..=65535"
            ))?),
            None => None,
        };
        Ok(Destination { user, host, port })
    }

    /// The address other nodes of a job reach this one at (the host part).
    pub fn address(&self) -> &str {
        &self.host
    }
}
