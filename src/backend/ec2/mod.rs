//! EC2 pools: instances gantry buys from AWS when its queue needs them and gives back when
//! they idle, each joining its pool as an SSH host running `gantry agent` (the pool's runner
//! is the SSH backend's: multi-node jobs, logs and re-adoption are the same).
//!
//! The daemon's actor never waits on AWS: `Ec2Pool` hands each buy and give-back to one
//! worker thread per pool and reads back what happened (`NodeEvent`s). The worker:
//! * at start, and every few minutes, lists the instances tagged with this fleet and pool:
//!   one tagged for a node of the pool is adopted (a daemon killed during a launch finds its
//!   instance), any other is terminated after a grace, and said;
//! * launches with a client token (a retried request buys nothing twice) and the tags at
//!   launch, trying the pool's zones in order; a zone without capacity passes to the next,
//!   a quota or an empty spot market makes the pool unavailable for a while (the planner
//!   buys elsewhere: the next pool by price, on-demand after spot);
//! * polls the instances it has (one `DescribeInstances` for all): running → ready, at the
//!   address the pool's `ssh_host` names; ended without being asked (a spot instance taken
//!   back) → gone;
//! * terminates what is given back, and retries until EC2 says it did.

pub mod api;

use super::{NodeEvent, Provisioner};
use api::{Ec2, Instance, Refusal, Target};
use std::collections::HashMap;
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc as amp;

/// How often the worker asks EC2 about the instances it has.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// How often it lists the fleet's instances for strays (and at start).
const SWEEP_EVERY: Duration = Duration::from_secs(300);
/// How long an instance tagged for this pool but not one of its nodes may live before it is
/// terminated (a launch of another daemon of the same fleet name could be under way).
const STRAY_GRACE: Duration = Duration::from_secs(120);
/// A call that may not have reached EC2 is retried after this (doubling to 60 s).
const RETRY_FIRST: Duration = Duration::from_secs(2);

enum Ask {
    Buy(usize),
    GiveBack(usize),
}

/// The provisioner of one EC2 pool.
pub struct Ec2Pool {
    asks: amp::UnboundedSender<Ask>,
    events: mpsc::Receiver<NodeEvent>,
    /// Each node's `ssh` destination while its instance runs.
    entries: Arc<Mutex<Vec<Option<String>>>>,
    /// Expected seconds from a buy to ready.
    delay: f64,
    stop: tokio::sync::watch::Sender<bool>,
    /// EC2 calls made so far (`gantry bench cloud`).
    calls: Arc<std::sync::atomic::AtomicU64>,
}

impl Drop for Ec2Pool {
    fn drop(&mut self) {
        // The instances stay: a daemon that restarts adopts them; one that is gone leaves
        // them to `gantry cloud ls` and the next sweep.
        let _ = self.stop.send(true);
    }
}

/// What a pool's settings say about where and how to buy.
pub fn target_of(p: &crate::config::fleet::PoolConfig) -> Target {
    // Validated: an EC2 pool has its table.
    let e = p.ec2.clone().unwrap_or_default();
    Target {
        region: p.region.clone(),
        fleet: e.fleet.clone().unwrap_or_else(default_fleet),
        pool: p.name.clone(),
        instance_type: p.instance_type.clone(),
        spot: p.capacity == crate::model::CapacityType::Spot,
        key_name: e.key_name.clone(),
        security_groups: e.security_groups.clone(),
        subnets: e.subnets.clone(),
        image: e.image.clone(),
        image_name: e.image_name.clone(),
        image_owner: e.image_owner.clone(),
        profile: e.profile.clone(),
        endpoint_url: e.endpoint_url.clone(),
    }
}

/// The fleet's tag when the pool names none: this host's name.
fn default_fleet() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "gantry".to_string())
}

impl Ec2Pool {
    /// Starts the pool's worker. Its credentials and zones are checked first (up to 20 s):
    /// credentials that cannot be found, or zones the region does not have, refuse the pool
    /// with what to do; a region that does not answer is said and retried.
    pub fn open(
        p: &crate::config::fleet::PoolConfig,
        nodes: Vec<String>,
    ) -> Result<Ec2Pool, String> {
        let settings = p.ec2.clone().ok_or("an EC2 pool needs [pools.ec2]")?;
        let target = target_of(p);
        let name = format!("pool `{}` (backend ec2, region {})", p.name, p.region);
        let (asks, rx) = amp::unbounded_channel();
        let (tx, events) = mpsc::channel();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let entries = Arc::new(Mutex::new(vec![None; nodes.len()]));
        let (ok_tx, ok_rx) =
            mpsc::channel::<(Result<(), String>, Arc<std::sync::atomic::AtomicU64>)>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("{name}: cannot start its runtime: {e}"))?;
        let worker = Worker {
            zones: settings.zones_or(&p.zone),
            ssh_user: settings.ssh_user().to_string(),
            ssh_host: settings.ssh_host().to_string(),
            slots: nodes.iter().map(|_| Slot::default()).collect(),
            nodes,
            strays: HashMap::new(),
            events: tx,
            entries: entries.clone(),
            image: None,
            launches: 0,
            nonce: nonce(),
        };
        std::thread::Builder::new()
            .name("gantry-ec2".to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    let ec2 = Ec2::new(target).await;
                    let _ = ok_tx.send((check(&ec2, &worker.zones).await, ec2.calls.clone()));
                    worker.run(ec2, rx, stopped).await;
                });
            })
            .map_err(|e| format!("{name}: cannot start its thread: {e}"))?;
        let calls = match ok_rx.recv_timeout(Duration::from_secs(20)) {
            Ok((Ok(()), calls)) => calls,
            Ok((Err(why), _)) => return Err(format!("{name}: {why}")),
            Err(_) => {
                let _ = stop.send(true);
                return Err(format!("{name}: checking its credentials took over 20 s"));
            }
        };
        Ok(Ec2Pool {
            asks,
            events,
            entries,
            delay: crate::sim::lifecycle::provisioning_delay(p),
            stop,
            calls,
        })
    }

    /// EC2 calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Credentials found, and the pool's zones among the region's (a region that does not answer
/// is not refused: it is retried as the pool buys).
async fn check(ec2: &Ec2, zones: &[String]) -> Result<(), String> {
    ec2.credentials().await?;
    match ec2.zones().await {
        Ok(have) => {
            let names: Vec<&str> = have.iter().map(|(z, _)| z.as_str()).collect();
            if let Some(z) = zones.iter().find(|z| !names.contains(&z.as_str())) {
                return Err(format!(
                    "zone `{z}` is not a zone of {} (it has: {})",
                    ec2.target.region,
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
            }
            Ok(())
        }
        Err(Refusal::Stop(why)) => Err(why),
        Err(_) => Ok(()),
    }
}

/// What makes this daemon's client tokens its own (tokens are per account).
fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}", (t as u64) ^ ((std::process::id() as u64) << 40))
}

impl Provisioner for Ec2Pool {
    fn buy(&mut self, host: usize, _now: f64) -> f64 {
        let _ = self.asks.send(Ask::Buy(host));
        self.delay
    }

    fn give_back(&mut self, host: usize, _now: f64) {
        if let Ok(mut e) = self.entries.lock() {
            if let Some(e) = e.get_mut(host) {
                *e = None;
            }
        }
        let _ = self.asks.send(Ask::GiveBack(host));
    }

    fn poll(&mut self, until: f64) -> Vec<(f64, NodeEvent)> {
        self.events.try_iter().map(|e| (until, e)).collect()
    }

    fn entry(&self, host: usize) -> Option<String> {
        self.entries.lock().ok()?.get(host).cloned().flatten()
    }

    fn machines(&self) -> bool {
        true
    }
}

/// A node of the pool as the worker tracks it.
#[derive(Default)]
struct Slot {
    /// The daemon wants it (bought and not given back).
    want: bool,
    instance: Option<Instance>,
    /// Ready was said for this instance.
    ready: bool,
    /// The client token of the launch under way (kept across retries of the same request).
    token: Option<String>,
    /// The zone (index) the launch under way tries.
    zone: usize,
    /// A launch that may not have reached EC2 is retried then, after `backoff`.
    retry_at: Option<Instant>,
    backoff: Duration,
}

impl Slot {
    /// Its instance is `i` (launched, or found).
    fn bought(&mut self, i: Instance) {
        self.instance = Some(i);
        self.ready = false;
        self.token = None;
        self.retry_at = None;
    }

    /// Its launch is tried again after the backoff, which doubles up to a minute.
    fn later(&mut self) {
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(Duration::from_secs(60));
    }
}

struct Worker {
    nodes: Vec<String>,
    zones: Vec<String>,
    ssh_user: String,
    ssh_host: String,
    slots: Vec<Slot>,
    /// Instances tagged for this pool that are none of its nodes: when first seen.
    strays: HashMap<String, Instant>,
    events: mpsc::Sender<NodeEvent>,
    entries: Arc<Mutex<Vec<Option<String>>>>,
    image: Option<String>,
    launches: u64,
    nonce: String,
}

impl Worker {
    async fn run(
        mut self,
        ec2: Ec2,
        mut asks: amp::UnboundedReceiver<Ask>,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        // What exists before anything is bought: a restarted daemon's instances are adopted,
        // never bought again.
        let mut next_sweep = Instant::now();
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if Instant::now() >= next_sweep && self.sweep(&ec2).await {
                next_sweep = Instant::now() + SWEEP_EVERY;
            }
            tokio::select! {
                ask = asks.recv() => match ask {
                    None => return,
                    Some(Ask::Buy(h)) => {
                        if let Some(s) = self.slots.get_mut(h) {
                            s.want = true;
                            s.zone = 0;
                            s.backoff = RETRY_FIRST;
                            self.launch(&ec2, h).await;
                        }
                    }
                    Some(Ask::GiveBack(h)) => {
                        if let Some(s) = self.slots.get_mut(h) {
                            s.want = false;
                            s.retry_at = None;
                            s.token = None;
                            self.release(&ec2, h).await;
                        }
                    }
                },
                _ = tick.tick() => {
                    self.refresh(&ec2).await;
                    let due: Vec<usize> = (0..self.slots.len())
                        .filter(|&h| {
                            let s = &self.slots[h];
                            s.want && s.instance.is_none() && s.retry_at.is_some_and(|t| t <= Instant::now())
                        })
                        .collect();
                    for h in due {
                        self.launch(&ec2, h).await;
                    }
                    // Given back but not yet terminated (a call that failed): again.
                    let left: Vec<usize> = (0..self.slots.len())
                        .filter(|&h| !self.slots[h].want && self.slots[h].instance.is_some())
                        .collect();
                    for h in left {
                        self.release(&ec2, h).await;
                    }
                }
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
    }

    fn say(&self, e: NodeEvent) {
        let _ = self.events.send(e);
    }

    fn said(&self, host: Option<usize>, what: String) {
        self.say(NodeEvent::Said { host, what });
    }

    fn set_entry(&self, h: usize, entry: Option<String>) {
        if let Ok(mut e) = self.entries.lock() {
            if let Some(e) = e.get_mut(h) {
                *e = entry;
            }
        }
    }

    /// Lists the fleet's instances of this pool: adopts those of its nodes, terminates the
    /// others after a grace. False when EC2 did not answer (tried again at the next tick).
    async fn sweep(&mut self, ec2: &Ec2) -> bool {
        let found = match ec2.list().await {
            Ok(f) => f,
            Err(r) => {
                self.said(
                    None,
                    format!("listing this fleet's instances failed: {}", r.why()),
                );
                return false;
            }
        };
        let mut seen = std::collections::HashSet::new();
        for i in found {
            seen.insert(i.id.clone());
            let slot = i
                .node
                .as_deref()
                .and_then(|n| self.nodes.iter().position(|x| x == n));
            let mine = slot.is_some_and(|h| {
                self.slots[h]
                    .instance
                    .as_ref()
                    .is_none_or(|have| have.id == i.id)
            });
            match slot {
                Some(h) if mine && i.live() => {
                    if self.slots[h].instance.is_none() {
                        self.said(
                            Some(h),
                            format!(
                                "adopted {} ({}, {}, launched {})",
                                i.id,
                                i.zone.as_deref().unwrap_or("?"),
                                i.state,
                                i.launched.as_deref().unwrap_or("?")
                            ),
                        );
                        self.slots[h].instance = Some(i);
                        self.slots[h].want = true;
                    }
                }
                _ if !i.live() => {}
                _ => {
                    let first = *self.strays.entry(i.id.clone()).or_insert_with(Instant::now);
                    if first.elapsed() >= STRAY_GRACE {
                        let what = match (&i.node, slot) {
                            (Some(n), Some(_)) => format!("a second instance for node {n}"),
                            (Some(n), None) => {
                                format!("tagged for node {n}, which this pool does not have")
                            }
                            (None, _) => "tagged with no node".to_string(),
                        };
                        match ec2.terminate(vec![i.id.clone()]).await {
                            Ok(()) => {
                                self.strays.remove(&i.id);
                                self.said(None, format!("terminated {}: {what}", i.id));
                            }
                            Err(r) => self.said(
                                None,
                                format!("terminating {} ({what}) failed: {}", i.id, r.why()),
                            ),
                        }
                    }
                }
            }
        }
        self.strays.retain(|id, _| seen.contains(id));
        true
    }

    /// Buys node `h`'s instance: the zones in order from the one its launch is at.
    async fn launch(&mut self, ec2: &Ec2, h: usize) {
        if self.slots[h].instance.is_some() {
            // Bought already (adopted, or asked for again): ready again once it runs.
            if self.slots[h].ready {
                self.say(NodeEvent::Ready(h));
            }
            return;
        }
        let image = match &self.image {
            Some(i) => i.clone(),
            None => match ec2.image().await {
                Ok(i) => {
                    self.image = Some(i.clone());
                    i
                }
                Err(r) => return self.refused(h, r),
            },
        };
        let node = self.nodes[h].clone();
        if self.slots[h].token.is_some() {
            // A launch whose answer was lost may have bought the instance: a cloud that
            // ignores client tokens must not sell it twice either. Tagged at launch, it is
            // found by its node.
            match ec2.list().await {
                Ok(found) => {
                    if let Some(i) = found
                        .into_iter()
                        .find(|i| i.live() && i.node.as_deref() == Some(node.as_str()))
                    {
                        self.said(Some(h), format!("found {} from the launch retried", i.id));
                        self.slots[h].bought(i);
                        return;
                    }
                }
                Err(r) => {
                    self.slots[h].later();
                    self.said(Some(h), format!("{}; retrying", r.why()));
                    return;
                }
            }
        }
        while self.slots[h].zone < self.zones.len() {
            let zone = self.zones[self.slots[h].zone].clone();
            let token = match &self.slots[h].token {
                Some(t) => t.clone(),
                None => {
                    self.launches += 1;
                    let t = format!("gantry-{}-{h}-{}", self.nonce, self.launches);
                    self.slots[h].token = Some(t.clone());
                    t
                }
            };
            match ec2.launch(&node, &zone, &image, &token).await {
                Ok(i) => {
                    self.said(
                        Some(h),
                        format!(
                            "launched {} in {zone} ({}{})",
                            i.id,
                            ec2.target.instance_type,
                            if ec2.target.spot {
                                ", spot"
                            } else {
                                ", on-demand"
                            }
                        ),
                    );
                    self.slots[h].bought(i);
                    return;
                }
                Err(Refusal::Zone(why)) => {
                    let s = &mut self.slots[h];
                    s.token = None;
                    s.zone += 1;
                    let next = self.zones.get(s.zone).map_or_else(
                        || "no zone left to try".to_string(),
                        |z| format!("trying {z}"),
                    );
                    self.said(Some(h), format!("{zone}: {why}; {next}"));
                }
                Err(Refusal::Retry(why)) => {
                    // The same request again later (same token, same zone): it may have
                    // reached EC2, and must not buy twice.
                    self.slots[h].later();
                    self.said(Some(h), format!("{zone}: {why}; retrying"));
                    return;
                }
                Err(r) => return self.refused(h, r),
            }
        }
        let zones = self.zones.join(", ");
        self.refused(h, Refusal::Pool(format!("no capacity in {zones}")));
    }

    /// Node `h` cannot be bought now: the daemon passes the pool over for a while.
    fn refused(&mut self, h: usize, r: Refusal) {
        let s = &mut self.slots[h];
        s.want = false;
        s.token = None;
        s.retry_at = None;
        s.zone = 0;
        self.say(NodeEvent::Unavailable {
            host: h,
            why: r.why().to_string(),
        });
    }

    /// Terminates node `h`'s instance.
    async fn release(&mut self, ec2: &Ec2, h: usize) {
        self.set_entry(h, None);
        let Some(i) = self.slots[h].instance.clone() else {
            return;
        };
        match ec2.terminate(vec![i.id.clone()]).await {
            Ok(()) => {
                self.said(Some(h), format!("terminated {}", i.id));
                let s = &mut self.slots[h];
                s.instance = None;
                s.ready = false;
            }
            Err(r) => self.said(
                Some(h),
                format!("terminating {} failed: {}; retrying", i.id, r.why()),
            ),
        }
    }

    /// Asks EC2 about every instance the pool has: ready when running, gone when it ended
    /// without being given back.
    async fn refresh(&mut self, ec2: &Ec2) {
        let ids: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.want)
            .filter_map(|s| s.instance.as_ref().map(|i| i.id.clone()))
            .collect();
        if ids.is_empty() {
            return;
        }
        let now = match ec2.states(ids.clone()).await {
            Ok(n) => n,
            Err(_) => return,
        };
        for h in 0..self.slots.len() {
            let Some(have) = self.slots[h].instance.clone() else {
                continue;
            };
            if !self.slots[h].want {
                continue;
            }
            let Some(i) = now.iter().find(|i| i.id == have.id) else {
                continue;
            };
            match i.state.as_str() {
                "running" if !self.slots[h].ready => match self.entry_of(h, i) {
                    Some(entry) => {
                        self.set_entry(h, Some(entry));
                        self.slots[h].ready = true;
                        self.slots[h].instance = Some(i.clone());
                        self.say(NodeEvent::Ready(h));
                    }
                    None => {
                        self.said(
                            Some(h),
                            format!(
                                "{} has no address for ssh_host = \"{}\" (a public IP needs a subnet that gives one; else write ssh_host = \"{{private_ip}}\"): terminated",
                                i.id, self.ssh_host
                            ),
                        );
                        self.slots[h].want = false;
                        self.release(ec2, h).await;
                        self.say(NodeEvent::Unavailable {
                            host: h,
                            why: format!("{} cannot be reached", i.id),
                        });
                    }
                },
                "pending" | "running" => {}
                _ => {
                    // Ended without being given back: a spot instance taken back, or
                    // stopped or terminated by someone else.
                    self.said(
                        Some(h),
                        format!(
                            "{} is {}{}",
                            i.id,
                            i.state,
                            i.reason
                                .as_deref()
                                .map_or(String::new(), |r| format!(" ({r})"))
                        ),
                    );
                    self.set_entry(h, None);
                    let s = &mut self.slots[h];
                    s.want = false;
                    s.ready = false;
                    if matches!(i.state.as_str(), "stopping" | "stopped") {
                        // Stopped instances still cost their volumes: gantry's are ended.
                        self.release(ec2, h).await;
                    } else {
                        self.slots[h].instance = None;
                    }
                    self.say(NodeEvent::Gone(h));
                }
            }
        }
    }

    /// The `ssh` destination of node `h` running as `i`, from the pool's `ssh_host`.
    fn entry_of(&self, h: usize, i: &Instance) -> Option<String> {
        let mut host = self.ssh_host.clone();
        let fields: [(&str, Option<&str>); 5] = [
            ("{public_ip}", i.public_ip.as_deref()),
            ("{private_ip}", i.private_ip.as_deref()),
            ("{public_dns}", i.public_dns.as_deref()),
            ("{instance_id}", Some(i.id.as_str())),
            ("{node}", Some(self.nodes[h].as_str())),
        ];
        for (f, v) in fields {
            if host.contains(f) {
                host = host.replace(f, v.filter(|v| !v.is_empty())?);
            }
        }
        Some(format!("{}@{host}", self.ssh_user))
    }
}
