//! What changed between two fleet files, in the words the daemon uses when it reloads one
//! ("pool `lab`: + host gpu3, − host gpu1").

use super::fleet::{FleetConfig, PoolConfig};

/// A pool's identity across edits: its place in the provider → region → zone tree and name.
pub fn key(p: &PoolConfig) -> (String, String, String, String) {
    (
        p.provider.clone(),
        p.region.clone(),
        p.zone.clone(),
        p.name.clone(),
    )
}

/// A pool's identity as one string, `provider/region/zone/name` (the journal's key for it).
pub fn key_text(p: &PoolConfig) -> String {
    let (provider, region, zone, name) = key(p);
    format!("{provider}/{region}/{zone}/{name}")
}

/// Each change from `old` to `new`, one line each; empty when they are the same fleet.
pub fn changes(old: &FleetConfig, new: &FleetConfig) -> Vec<String> {
    let mut out = Vec::new();
    for p in &old.pools {
        if !new.pools.iter().any(|n| key(n) == key(p)) {
            out.push(format!("pool `{}` removed", p.name));
        }
    }
    for p in &new.pools {
        let Some(was) = old.pools.iter().find(|o| key(o) == key(p)) else {
            out.push(format!("pool `{}` added ({})", p.name, p.provider));
            continue;
        };
        if was == p {
            continue;
        }
        let mut said = Vec::new();
        for h in &p.hosts {
            if !was.hosts.contains(h) {
                said.push(format!("+ host {h}"));
            }
        }
        for h in &was.hosts {
            if !p.hosts.contains(h) {
                said.push(format!("− host {h}"));
            }
        }
        if was.nodes != p.nodes && !p.is_ssh() {
            said.push(format!("nodes {} → {}", was.nodes, p.nodes));
        }
        let mut rest = was.clone();
        rest.hosts.clone_from(&p.hosts);
        rest.nodes = p.nodes;
        if rest != *p {
            said.push("settings changed".to_string());
        }
        out.push(format!("pool `{}`: {}", p.name, said.join(", ")));
    }
    for t in &old.teams {
        if !new.teams.iter().any(|n| n.name == t.name) {
            out.push(format!("team `{}` removed", t.name));
        }
    }
    for t in &new.teams {
        match old.teams.iter().find(|o| o.name == t.name) {
            None => out.push(format!("team `{}` added", t.name)),
            Some(was) if was != t => out.push(format!("team `{}` changed", t.name)),
            Some(_) => {}
        }
    }
    if old.reclaim != new.reclaim {
        out.push("[reclaim] changed".to_string());
    }
    if old.scale != new.scale {
        out.push("[scale] changed".to_string());
    }
    if old.users != new.users {
        out.push("[[users]] changed".to_string());
    }
    if old.logs != new.logs {
        out.push("[logs] changed".to_string());
    }
    if old.calendar != new.calendar {
        out.push("[calendar] changed".to_string());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::fleet::parse;

    #[test]
    fn users_logs_and_calendar_edits_are_changes() {
        let a = lab("\"h1\"", "");
        let mut b = a.clone();
        b.users.push(crate::config::fleet::UserConfig {
            team: None,
            name: "alice".into(),
            max_gpus: Some(2.0),
            max_dollars_per_hour: None,
        });
        b.logs.keep_for = Some("1d".into());
        let said = changes(&a, &b);
        assert_eq!(
            said,
            vec!["[[users]] changed", "[logs] changed"],
            "{said:?}"
        );
        let per_user = lab("\"h1\"", "max_gpus_per_user = 2\n");
        assert_eq!(changes(&a, &per_user), vec!["team `a` changed"]);
    }

    fn lab(hosts: &str, extra: &str) -> FleetConfig {
        parse(
            "fleet.toml",
            &format!(
                r#"
[[teams]]
name = "a"
{extra}
[[pools]]
provider = "ssh"
region = "onprem"
zone = "rack"
name = "lab"
instance_type = "server"
gpu = "H100"
gpus_per_node = 2
vram_gb = 80
cpus = 8
memory_gb = 16
capacity = "reserved"
price_per_hour = 0.0
hosts = [{hosts}]
"#
            ),
        )
        .unwrap()
    }

    #[test]
    fn hosts_added_and_removed_are_named_and_an_unchanged_file_says_nothing() {
        let old = lab(r#""gpu1", "gpu2""#, "");
        assert!(changes(&old, &old).is_empty());
        let new = lab(r#""gpu2", "gpu3""#, "[[teams]]\nname = \"b\"\n");
        assert_eq!(
            changes(&old, &new),
            vec![
                "pool `lab`: + host gpu3, − host gpu1".to_string(),
                "team `b` added".to_string()
            ]
        );
    }
}
