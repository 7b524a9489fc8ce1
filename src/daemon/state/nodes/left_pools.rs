//! Cloud pools that left the fleet: what they bought is the journal's, not the fleet file's.
//! Every cloud pool in force is recorded in the journal with its settings. One that leaves the
//! file at a reload, or that a daemon started with another file lacks, is retired: a
//! provisioner built from its recorded settings ends every instance its cloud lists for it, in
//! the background, retrying until none is left — then the journal forgets it. What they say
//! reaches the event log; `gantry cloud ls` lists their instances meanwhile.

use super::Nodes;
use crate::backend::{NodeEvent, Provisioner};
use crate::config::fleet::FleetConfig;
use crate::config::reload::key_text;
use crate::daemon::engine::Engine;
use crate::daemon::engine::EngineError;
use crate::daemon::state::cx::Cx;
use crate::model::Life;
use std::collections::HashSet;

/// The pools being retired, shared by every state a daemon opens (`StateOptions::retiring`).
#[derive(Default)]
pub(crate) struct Retirees {
    /// Each pool's key (`config::reload::key_text`) and the provisioner ending what it bought.
    pools: Vec<(String, Box<dyn Provisioner>)>,
    /// The keys of pools retiring or about to (claimed before their provisioner is open), so
    /// that no pool is retired twice.
    claimed: HashSet<String>,
    /// What could not be done in the background (a pool whose cloud cannot be reached), to be
    /// said in the events.
    said: Vec<String>,
}

/// Provisioners retiring, shared by every state a daemon opens (`left_pools`).
#[derive(Clone, Default)]
pub struct Retiring(std::sync::Arc<std::sync::Mutex<Retirees>>);

impl Retiring {
    /// The retirees, even after a panic while another held them (what they hold stays
    /// consistent: each change is one push or one removal).
    fn lock(&self) -> std::sync::MutexGuard<'_, Retirees> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl std::fmt::Debug for Retiring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.0.lock().map_or(0, |v| v.claimed.len());
        write!(f, "Retiring({n})")
    }
}

/// A pool leaving the fleet at a reload: its key, its provisioner, what to say.
pub(in crate::daemon::state) type Leaving = (String, Box<dyn Provisioner>, String);

/// Whether a pool of `cfg` lists the instances `p` bought (the same provider, region and name:
/// only its zone moved): it adopts them, and its sweep ends those it does not need. Retiring
/// `p` then would end what that pool has just bought under the same marks.
fn carried_on(p: &crate::config::fleet::PoolConfig, cfg: &FleetConfig) -> bool {
    cfg.pools
        .iter()
        .any(|n| n.provider == p.provider && n.region == p.region && n.name == p.name)
}

/// Records each cloud pool of `cfg` (in force now) with its settings, so that what it buys is
/// found again whatever the fleet file says later.
pub(in crate::daemon::state) fn record_cloud_pools(
    engine: &mut Engine,
    now: f64,
    cfg: &FleetConfig,
) -> Result<(), EngineError> {
    for p in cfg
        .pools
        .iter()
        .filter(|p| crate::backend::registry::from_a_cloud(p))
    {
        // A pool's settings are plain data: they always serialize.
        let Ok(config) = serde_json::to_string(p) else {
            continue;
        };
        engine.save_cloud_pool(&key_text(p), &config, now)?;
    }
    Ok(())
}

impl Retiring {
    /// Retires each cloud pool the journal knows that `cfg` lacks (a daemon started with
    /// another file, or one whose pool left while it was down): its provisioner is opened from
    /// the recorded settings on a thread of its own (a cloud's credential check may take
    /// seconds), and ends what its cloud lists for it.
    pub(in crate::daemon::state) fn retire_left_pools(
        &self,
        cx: &mut Cx,
        cfg: &FleetConfig,
        opening: &crate::backend::Opening,
    ) -> Result<(), EngineError> {
        let here: HashSet<String> = cfg.pools.iter().map(key_text).collect();
        let retiring = self.clone();
        for rec in cx.engine.cloud_pools()? {
            if here.contains(&rec.key) {
                continue;
            }
            {
                let mut r = retiring.lock();
                if !r.claimed.insert(rec.key.clone()) {
                    continue; // retiring already (it left at a reload)
                }
            }
            let parsed = serde_json::from_str::<crate::config::fleet::PoolConfig>(&rec.config);
            if parsed.as_ref().is_ok_and(|p| carried_on(p, cfg)) {
                retiring.lock().claimed.remove(&rec.key);
                cx.engine.forget_cloud_pool(&rec.key)?;
                continue;
            }
            let Ok(p) = parsed else {
                cx.warn(format!(
                    "pool {}: the journal's record of it cannot be read by this gantry: its instances are not given back; `gantry cloud ls` with its fleet file lists them",
                    rec.key
                ));
                continue;
            };
            if !cfg.scale.give_back_left_pools {
                retiring.lock().claimed.remove(&rec.key);
                cx.warn(format!(
                    "pool {} left the fleet file, and its instances are kept ([scale] give_back_left_pools = false): `gantry cloud ls` lists them; they are paid for until ended",
                    rec.key
                ));
                continue;
            }
            cx.record(
                "cloud",
                format!(
                    "pool {} is in the journal but not in this fleet file: every instance it bought is terminated, in the background until its cloud lists none (the events say each)",
                    rec.key
                ),
            )?;
            let names: Vec<String> = (0..p.max_nodes.unwrap_or(p.nodes).max(p.nodes))
                .map(|i| p.node_name(i))
                .collect();
            let index = cfg.pools.len();
            let (opening, now, retiring, key) =
                (opening.clone(), cx.now, retiring.clone(), rec.key.clone());
            let spawned = std::thread::Builder::new()
                .name("gantry-retire".to_string())
                .spawn(move || {
                    let opened = crate::backend::provisioner_for(&p, index, &names, &opening, now);
                    let mut r = retiring.lock();
                    match opened {
                        Ok(Some(mut prov)) => {
                            prov.retire();
                            r.pools.push((key, prov));
                        }
                        Ok(None) => {
                            r.claimed.remove(&key);
                        }
                        Err(e) => {
                            r.said.push(format!(
                                "pool {key}: cannot reach its cloud to end what it bought ({e}); tried again at the next start — `gantry cloud ls` lists its instances"
                            ));
                            r.claimed.remove(&key);
                        }
                    }
                });
            if let Err(e) = spawned {
                cx.warn(format!(
                    "pool {}: cannot start its retirement: {e}",
                    rec.key
                ));
            }
        }
        Ok(())
    }

    /// The reload is in force: the leaving pools' provisioners end what they bought.
    pub(in crate::daemon::state) fn retire_leaving(
        &self,
        cx: &mut Cx,
        leaving: Vec<Leaving>,
    ) -> Result<(), EngineError> {
        for (key, mut prov, line) in leaving {
            prov.retire();
            cx.record("cloud", line)?;
            self.lock().pools.push((key, prov));
        }
        Ok(())
    }

    /// The reload was not applied: the leaving pools stay (their provisioners are dropped; the
    /// state reopened on the old file has its own, which adopt what they bought).
    pub(in crate::daemon::state) fn unclaim(&self, leaving: &[Leaving]) {
        let mut r = self.lock();
        for (key, _, _) in leaving {
            r.claimed.remove(key);
        }
    }

    /// What the retiring pools said up to `until`, for the event log; a pool whose cloud lists
    /// none of its instances any more is forgotten by the journal.
    pub(in crate::daemon::state) fn poll(
        &self,
        cx: &mut Cx,
        until: f64,
    ) -> Result<(), EngineError> {
        let (said, done) = {
            let mut r = self.lock();
            let mut said = std::mem::take(&mut r.said);
            for (_, p) in r.pools.iter_mut() {
                said.extend(p.poll(until).into_iter().filter_map(|(_, e)| match e {
                    NodeEvent::Said { what, .. } => Some(what),
                    _ => None,
                }));
            }
            let mut done = Vec::new();
            r.pools.retain(|(key, p)| {
                let retired = p.retired();
                if retired {
                    done.push(key.clone());
                }
                !retired
            });
            for key in &done {
                r.claimed.remove(key);
            }
            (said, done)
        };
        for what in said {
            cx.record("cloud", what)?;
        }
        for key in done {
            cx.engine.forget_cloud_pool(&key)?;
            cx.record(
                "cloud",
                format!("pool {key}: its cloud lists none of its instances: forgotten"),
            )?;
        }
        Ok(())
    }
}

impl Nodes {
    /// Pools that buy machines and leave the fleet file with `new`: every machine they bought
    /// is given back (their provisioners end them in the background: a pool no longer in the
    /// file is one no command would ever end, paid by the hour).
    /// Taken out of this state before it reopens (and given back once the new file is in
    /// force, with what to say), so that a file that fails to open retires nothing; claimed,
    /// so that the reopened state does not retire them from the journal a second time.
    pub(in crate::daemon::state) fn leaving(
        &mut self,
        (fleet, retiring): (&crate::model::Fleet, &Retiring),
        new: &FleetConfig,
    ) -> Vec<Leaving> {
        let mut out = Vec::new();
        if !new.scale.give_back_left_pools {
            // Kept: the reopened state says so (`retire_left_pools`).
            return out;
        }
        let staying: HashSet<_> = new.pools.iter().map(key_text).collect();
        for pool in 0..self.pools.len() {
            let key = key_text(&self.pools[pool]);
            if staying.contains(&key) || carried_on(&self.pools[pool], new) {
                continue;
            }
            if !self.provisioners[pool]
                .as_ref()
                .is_some_and(|p| p.machines())
            {
                continue;
            }
            let Some(prov) = self.provisioners[pool].take() else {
                continue;
            };
            let bought: Vec<String> = fleet
                .nodes
                .iter()
                .enumerate()
                .filter(|(i, n)| n.pool.index() == pool && self.lives[*i] != Life::Absent)
                .map(|(_, n)| n.name.clone())
                .collect();
            let path = fleet.pool_path(crate::model::PoolId(pool as u32));
            let line = format!(
                "pool {path} left the fleet file: every instance it bought is terminated ({}), in the background until its cloud lists none (the events say each)",
                if bought.is_empty() {
                    "none held now; any its listing finds".to_string()
                } else {
                    bought.join(", ")
                }
            );
            retiring.lock().claimed.insert(key.clone());
            out.push((key, prov, line));
        }
        out
    }

    /// The cloud pools the journal knows: those in force and those that left.
    pub(in crate::daemon::state) fn known_cloud_pools(
        &self,
        engine: &mut Engine,
    ) -> Result<Vec<crate::api::KnownCloudPool>, EngineError> {
        let here: HashSet<String> = self.pools.iter().map(key_text).collect();
        Ok(engine
            .cloud_pools()?
            .into_iter()
            .map(|r| crate::api::KnownCloudPool {
                in_fleet: here.contains(&r.key),
                key: r.key,
                config: r.config,
            })
            .collect())
    }
}
