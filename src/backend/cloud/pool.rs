//! The provisioner of a pool whose nodes are cloud instances, any cloud's (`Cloud`): the
//! daemon's actor never waits on the cloud — `CloudPool` hands each buy and give-back to one
//! worker thread per pool and reads back what happened (`NodeEvent`s). The worker:
//! * at start, and every few minutes, lists the instances marked as this fleet's and pool's:
//!   one marked for a node of the pool is adopted (a daemon killed during a launch finds its
//!   instance), any other is terminated after a grace, and said;
//! * queues launches (a cloud that rate-limits them gets one per `launch_every`) and launches
//!   each marked at launch, trying the pool's places in order — skipping those the cloud says
//!   have no capacity now; a place without capacity passes to the next, a quota or an empty
//!   spot market makes the pool unavailable for a while (the planner buys elsewhere: the next
//!   pool by price, on-demand after spot); a launch whose answer was lost looks for what it
//!   may have bought before it asks again;
//! * polls the instances it has (one call for all): running → ready, at the address the
//!   pool's `ssh_host` names; ended without being asked (a spot instance taken back) → gone;
//! * terminates what is given back, and retries until the cloud says it did.

use super::{Cloud, Instance, Phase, Refusal};
use crate::backend::error::OpenWhy;
use crate::backend::{NodeEvent, Provisioner};
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc as amp;

/// How often the worker asks the cloud about the instances it has.
const POLL_EVERY: Duration = Duration::from_secs(2);
/// How often it lists the fleet's instances for strays (and at start).
const SWEEP_EVERY: Duration = Duration::from_secs(300);
/// How long an instance marked for this pool but not one of its nodes may live before it is
/// terminated (a launch of another daemon of the same fleet name could be under way).
const STRAY_GRACE: Duration = Duration::from_secs(120);
/// A call that may not have reached the cloud is retried after this (doubling to 60 s).
const RETRY_FIRST: Duration = Duration::from_secs(2);

enum Ask {
    Buy(usize),
    GiveBack(usize),
    /// The pool left the fleet file: end every instance it has, then stop.
    Retire,
}

/// How long a retired pool's worker keeps trying to end its instances.
const RETIRE_FOR: Duration = Duration::from_secs(1800);

/// How a pool's instances are placed and reached: what its fleet file says.
#[derive(Clone, Debug)]
pub struct Reach {
    /// The pool, as its events name it (`error::PoolAt`, as its errors do too):
    /// ``pool `a100` (backend ec2, region us-east-1)``.
    pub name: String,
    /// Where to try, in order (EC2 zones, Lambda regions).
    pub places: Vec<String>,
    pub ssh_user: String,
    /// The `ssh` host template (`{public_ip}`, …; `cloud::entry_of`).
    pub ssh_host: String,
    /// The pool's node names, slot order.
    pub nodes: Vec<String>,
    /// Expected seconds from a buy to ready.
    pub delay: f64,
}

/// The provisioner of one cloud pool.
pub struct CloudPool {
    asks: amp::UnboundedSender<Ask>,
    events: mpsc::Receiver<NodeEvent>,
    /// Each node's `ssh` destination while its instance runs.
    entries: Arc<Mutex<Vec<Option<String>>>>,
    delay: f64,
    stop: tokio::sync::watch::Sender<bool>,
    /// Cloud calls made so far (`gantry bench cloud`).
    calls: Arc<AtomicU64>,
    /// Retired, and its cloud lists none of its instances live.
    retired: Arc<AtomicBool>,
}

impl Drop for CloudPool {
    fn drop(&mut self) {
        // The instances stay: a daemon that restarts adopts them; one that is gone leaves
        // them to `gantry cloud ls` and the next sweep.
        let _ = self.stop.send(true);
    }
}

impl CloudPool {
    /// Starts the pool's worker on the cloud `make` builds (on the worker's own runtime).
    /// Its credentials and places are checked first (up to 20 s): credentials that cannot be
    /// found, or places the region does not have, refuse the pool with what to do; a cloud
    /// that does not answer is said and retried.
    /// The error is why, without the pool (the registry says which).
    pub fn open<C, F, Fut>(reach: Reach, make: F) -> Result<CloudPool, OpenWhy>
    where
        C: Cloud + 'static,
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<C, OpenWhy>>,
    {
        let (asks, rx) = amp::unbounded_channel();
        let (tx, events) = mpsc::channel();
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let entries = Arc::new(Mutex::new(vec![None; reach.nodes.len()]));
        let (ok_tx, ok_rx) = mpsc::channel::<Result<Arc<AtomicU64>, OpenWhy>>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| OpenWhy::Host(format!("cannot start its runtime: {e}")))?;
        let delay = reach.delay;
        let retired = Arc::new(AtomicBool::new(false));
        let worker = Worker {
            retired: retired.clone(),
            slots: reach.nodes.iter().map(|_| Slot::default()).collect(),
            reach,
            strays: HashMap::new(),
            events: tx,
            entries: entries.clone(),
            prepared: false,
            listed: false,
            unlisted: false,
            launches: 0,
            next_launch: Instant::now(),
            nonce: nonce(),
        };
        std::thread::Builder::new()
            .name("gantry-cloud".to_string())
            .spawn(move || {
                runtime.block_on(async move {
                    let cloud = match make().await {
                        Ok(c) => c,
                        Err(e) => {
                            let _ = ok_tx.send(Err(e));
                            return;
                        }
                    };
                    match cloud.open_check(&worker.reach.places).await {
                        Ok(()) => {
                            let _ = ok_tx.send(Ok(cloud.calls()));
                        }
                        Err(e) => {
                            let _ = ok_tx.send(Err(e));
                            return;
                        }
                    }
                    worker.run(cloud, rx, stopped).await;
                });
            })
            .map_err(|e| OpenWhy::Host(format!("cannot start its thread: {e}")))?;
        let calls = match ok_rx.recv_timeout(Duration::from_secs(20)) {
            Ok(Ok(calls)) => calls,
            Ok(Err(why)) => return Err(why),
            Err(_) => {
                let _ = stop.send(true);
                return Err(OpenWhy::Unanswered(
                    "checking its credentials took over 20 s".to_string(),
                ));
            }
        };
        Ok(CloudPool {
            asks,
            events,
            entries,
            delay,
            stop,
            calls,
            retired,
        })
    }

    /// Cloud calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }
}

/// What makes this daemon's launch tokens its own (EC2's client tokens are per account).
fn nonce() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{:x}", (t as u64) ^ ((std::process::id() as u64) << 40))
}

impl Provisioner for CloudPool {
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

    fn retire(&mut self) {
        let _ = self.asks.send(Ask::Retire);
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::Relaxed)
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
    /// The token of the launch under way (kept across retries of the same request): while
    /// set, a launch may have reached the cloud unanswered.
    token: Option<String>,
    /// The place (index) the launch under way tries.
    zone: usize,
    /// Its launch is due then (queued, or retried after `backoff`).
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
    reach: Reach,
    slots: Vec<Slot>,
    /// Instances marked for this pool that are none of its nodes: when first seen.
    strays: HashMap<String, Instant>,
    events: mpsc::Sender<NodeEvent>,
    entries: Arc<Mutex<Vec<Option<String>>>>,
    /// `Cloud::prepare` done.
    prepared: bool,
    /// The pool's instances were listed once: nothing is bought before (a restarted daemon
    /// whose listing fails would buy again what it has).
    listed: bool,
    /// The listing failed since it last succeeded (said once).
    unlisted: bool,
    launches: u64,
    /// Set once a retired pool's cloud lists none of its instances live.
    retired: Arc<AtomicBool>,
    /// No launch before this (the cloud's `launch_every`).
    next_launch: Instant,
    nonce: String,
}

impl Worker {
    async fn run<C: Cloud>(
        mut self,
        mut cloud: C,
        mut asks: amp::UnboundedReceiver<Ask>,
        mut stopped: tokio::sync::watch::Receiver<bool>,
    ) {
        // What exists before anything is bought: a restarted daemon's instances are adopted,
        // never bought again.
        let mut next_sweep = Instant::now();
        let mut tick = tokio::time::interval(POLL_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            if Instant::now() >= next_sweep && self.sweep(&cloud).await {
                next_sweep = Instant::now() + SWEEP_EVERY;
            }
            tokio::select! {
                ask = asks.recv() => match ask {
                    None => return,
                    Some(Ask::Buy(h)) => {
                        if let Some(s) = self.slots.get_mut(h) {
                            s.want = true;
                            if s.instance.is_some() {
                                // Bought already (adopted, or given back and not yet ended):
                                // ready again at its address once it runs (the address was
                                // forgotten when it was given back).
                                if s.ready {
                                    let i = s.instance.clone();
                                    s.ready = false;
                                    if let Some(i) = i.filter(|i| i.phase == Phase::Running) {
                                        self.running(&cloud, h, &i).await;
                                    }
                                }
                            } else if s.retry_at.is_none() {
                                // Queued. A launch given up unanswered keeps its token and
                                // place: it first looks for what that one bought.
                                if s.token.is_none() {
                                    s.zone = 0;
                                }
                                s.backoff = RETRY_FIRST;
                                s.retry_at = Some(Instant::now());
                            }
                            self.launch_due(&mut cloud).await;
                        }
                    }
                    Some(Ask::GiveBack(h)) => {
                        if let Some(s) = self.slots.get_mut(h) {
                            s.want = false;
                            s.retry_at = None;
                            self.release(&cloud, h).await;
                        }
                    }
                    Some(Ask::Retire) => return self.retire(&cloud).await,
                },
                _ = tick.tick() => {
                    self.refresh(&cloud).await;
                    self.launch_due(&mut cloud).await;
                    // Given back but not yet terminated (a call that failed), or a launch
                    // given up whose answer was lost (it may have bought): end them.
                    let left: Vec<usize> = (0..self.slots.len())
                        .filter(|&h| !self.slots[h].want && self.slots[h].instance.is_some())
                        .collect();
                    for h in left {
                        self.release(&cloud, h).await;
                    }
                }
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
    }

    /// Ends every instance of the pool — those it holds and any its listing finds marked for
    /// it — retrying until the cloud lists none live (or `RETIRE_FOR` passes), whatever the
    /// daemon does meanwhile: nothing else would ever end them.
    async fn retire<C: Cloud>(mut self, cloud: &C) {
        for s in &mut self.slots {
            s.want = false;
            s.retry_at = None;
        }
        let t0 = Instant::now();
        let mut wait = RETRY_FIRST;
        loop {
            let mut ids: Vec<String> = self
                .slots
                .iter()
                .filter_map(|s| s.instance.as_ref().map(|i| i.id.clone()))
                .collect();
            let listed = match cloud.list().await {
                Ok(found) => {
                    for i in found.into_iter().filter(Instance::live) {
                        if !ids.contains(&i.id) {
                            ids.push(i.id);
                        }
                    }
                    true
                }
                Err(_) => false,
            };
            if listed && ids.is_empty() {
                self.retired.store(true, Ordering::Relaxed);
                return;
            }
            let said = match cloud.terminate(ids.clone()).await {
                Ok(()) => {
                    for s in &mut self.slots {
                        s.instance = None;
                    }
                    format!(
                        "{}: left the fleet file: terminated {}",
                        self.reach.name,
                        ids.join(", ")
                    )
                }
                Err(r) => format!(
                    "{}: left the fleet file: terminating {} failed: {}; retrying",
                    self.reach.name,
                    ids.join(", "),
                    r.why()
                ),
            };
            // The daemon keeps reading a retiring pool's events (`StateOptions::retiring`).
            self.said(None, said);
            if t0.elapsed() >= RETIRE_FOR {
                self.said(
                    None,
                    format!(
                        "{}: gave up ending its instances after {} min: `gantry cloud ls` lists them",
                        self.reach.name,
                        RETIRE_FOR.as_secs() / 60
                    ),
                );
                return;
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(60));
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
    /// others after a grace. False when the cloud did not answer (tried again at the next
    /// tick).
    async fn sweep<C: Cloud>(&mut self, cloud: &C) -> bool {
        let found = match cloud.list().await {
            Ok(f) => f,
            Err(r) => {
                if !self.unlisted {
                    self.unlisted = true;
                    self.said(
                        None,
                        format!(
                            "listing this fleet's instances failed: {}{}",
                            r.why(),
                            if self.listed {
                                "; tried again every few seconds"
                            } else {
                                "; nothing is bought until they can be listed (what a restarted daemon has is adopted first, never bought again); tried again every few seconds"
                            }
                        ),
                    );
                }
                return false;
            }
        };
        if self.unlisted {
            self.said(None, "this fleet's instances are listed again".to_string());
        }
        self.unlisted = false;
        self.listed = true;
        let mut seen = std::collections::HashSet::new();
        for i in found {
            seen.insert(i.id.clone());
            let slot = i
                .node
                .as_deref()
                .and_then(|n| self.reach.nodes.iter().position(|x| x == n));
            let mine = slot.is_some_and(|h| {
                self.slots[h]
                    .instance
                    .as_ref()
                    .is_none_or(|have| have.id == i.id)
            });
            match slot {
                Some(h) if mine && i.live() => {
                    let s = &self.slots[h];
                    if s.instance.is_none() {
                        // Given back while its launch went unanswered: what that launch
                        // bought is ended at the next tick, not adopted.
                        let given_up = !s.want && s.token.is_some();
                        self.said(
                            Some(h),
                            format!(
                                "{} {} ({}, {}, launched {})",
                                if given_up {
                                    "found, from a launch given back, and terminating"
                                } else {
                                    "adopted"
                                },
                                i.id,
                                i.zone.as_deref().unwrap_or("?"),
                                i.state,
                                i.launched.as_deref().unwrap_or("?")
                            ),
                        );
                        let s = &mut self.slots[h];
                        s.bought(i);
                        s.want = !given_up;
                    }
                }
                _ if !i.live() => {}
                // A second instance for a node that has one (a launch repeated by a daemon
                // that died before its answer came): given back at once, not after a grace.
                Some(h) if self.slots[h].instance.is_some() => {
                    let what = format!(
                        "a second instance for node {}, which has {}",
                        self.reach.nodes[h],
                        self.slots[h]
                            .instance
                            .as_ref()
                            .map_or("", |i| i.id.as_str())
                    );
                    match cloud.terminate(vec![i.id.clone()]).await {
                        Ok(()) => self.said(Some(h), format!("terminated {}: {what}", i.id)),
                        Err(r) => self.said(
                            Some(h),
                            format!("terminating {} ({what}) failed: {}", i.id, r.why()),
                        ),
                    }
                }
                _ => {
                    let first = *self.strays.entry(i.id.clone()).or_insert_with(Instant::now);
                    if first.elapsed() >= STRAY_GRACE {
                        let what = match (&i.node, slot) {
                            (Some(n), Some(_)) => format!("another instance for node {n}"),
                            (Some(n), None) => {
                                format!("marked for node {n}, which this pool does not have")
                            }
                            (None, _) => "marked with no node".to_string(),
                        };
                        match cloud.terminate(vec![i.id.clone()]).await {
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

    /// Launches the queued nodes whose turn it is, in node order, one per the cloud's
    /// `launch_every`.
    async fn launch_due<C: Cloud>(&mut self, cloud: &mut C) {
        // Adoption first, always.
        if !self.listed {
            return;
        }
        loop {
            if Instant::now() < self.next_launch {
                return;
            }
            let due = (0..self.slots.len()).find(|&h| {
                let s = &self.slots[h];
                s.want && s.instance.is_none() && s.retry_at.is_some_and(|t| t <= Instant::now())
            });
            let Some(h) = due else { return };
            self.launch(cloud, h).await;
        }
    }

    /// Buys node `h`'s instance: the places in order from the one its launch is at.
    async fn launch<C: Cloud>(&mut self, cloud: &mut C, h: usize) {
        if !self.prepared {
            if let Err(r) = cloud.prepare().await {
                return self.refused(h, r);
            }
            match cloud.places(&self.reach.places).await {
                Ok((places, said)) => {
                    self.reach.places = places;
                    if let Some(what) = said {
                        self.said(None, what);
                    }
                }
                Err(r) => return self.refused(h, r),
            }
            self.prepared = true;
        }
        let node = self.reach.nodes[h].clone();
        if self.slots[h].token.is_some() {
            // A launch whose answer was lost may have bought the instance: a cloud that
            // ignores client tokens (or has none) must not sell it twice. Marked at launch,
            // it is found by its node.
            match cloud.list().await {
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
        let capacity = match cloud.capacity().await {
            Ok(c) => c,
            Err(Refusal::Retry(why)) => {
                self.slots[h].later();
                self.said(Some(h), format!("{why}; retrying"));
                return;
            }
            Err(r) => return self.refused(h, r),
        };
        let places = self.reach.places.clone();
        while let Some(place) = places.get(self.slots[h].zone) {
            if capacity.as_ref().is_some_and(|c| !c.contains(place)) {
                let s = &mut self.slots[h];
                s.zone += 1;
                let next = next_place(&places, s.zone);
                self.said(
                    Some(h),
                    format!("{place}: no {} capacity now; {next}", cloud.offer()),
                );
                continue;
            }
            let token = match &self.slots[h].token {
                Some(t) => t.clone(),
                None => {
                    self.launches += 1;
                    let t = format!("gantry-{}-{h}-{}", self.nonce, self.launches);
                    self.slots[h].token = Some(t.clone());
                    t
                }
            };
            self.next_launch = Instant::now() + cloud.launch_every();
            match cloud.launch(&node, place, &token).await {
                Ok(i) => {
                    self.said(
                        Some(h),
                        format!("launched {} in {place} ({})", i.id, cloud.offer()),
                    );
                    self.slots[h].bought(i);
                    return;
                }
                Err(Refusal::Zone(why)) => {
                    let s = &mut self.slots[h];
                    s.token = None;
                    s.zone += 1;
                    let next = next_place(&places, s.zone);
                    self.said(Some(h), format!("{place}: {why}; {next}"));
                    if Instant::now() < self.next_launch {
                        // The next place waits its turn (the queue goes on at the tick).
                        self.slots[h].retry_at = Some(self.next_launch);
                        if self.slots[h].zone < places.len() {
                            return;
                        }
                    }
                }
                Err(Refusal::Retry(why)) => {
                    // The same request again later (same token, same place): it may have
                    // reached the cloud, and must not buy twice.
                    self.slots[h].later();
                    self.said(Some(h), format!("{place}: {why}; retrying"));
                    return;
                }
                Err(r) => return self.refused(h, r),
            }
        }
        let tried = places.join(", ");
        self.refused(h, Refusal::Pool(format!("no capacity in {tried}")));
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
    async fn release<C: Cloud>(&mut self, cloud: &C, h: usize) {
        self.set_entry(h, None);
        let Some(i) = self.slots[h].instance.clone() else {
            return;
        };
        match cloud.terminate(vec![i.id.clone()]).await {
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

    /// Asks the cloud about every instance the pool has: ready when running, gone when it
    /// ended without being given back.
    async fn refresh<C: Cloud>(&mut self, cloud: &C) {
        let ids: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.want)
            .filter_map(|s| s.instance.as_ref().map(|i| i.id.clone()))
            .collect();
        if ids.is_empty() {
            return;
        }
        let Ok(now) = cloud.states(ids).await else {
            return;
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
            match i.phase {
                Phase::Running if !self.slots[h].ready => self.running(cloud, h, i).await,
                Phase::Starting | Phase::Running => {}
                Phase::Stopped | Phase::Ended => self.ended(cloud, h, i).await,
            }
        }
    }

    /// Node `h`'s instance `i` runs: ready at its address, or terminated when it has none.
    async fn running<C: Cloud>(&mut self, cloud: &C, h: usize, i: &Instance) {
        let node = &self.reach.nodes[h];
        match super::entry_of(&self.reach.ssh_user, &self.reach.ssh_host, node, i) {
            Some(entry) => {
                self.set_entry(h, Some(entry));
                let s = &mut self.slots[h];
                s.ready = true;
                s.instance = Some(i.clone());
                self.say(NodeEvent::Ready(h));
            }
            None => {
                self.said(
                    Some(h),
                    format!(
                        "{} has no address for ssh_host = \"{}\" (a public IP needs a subnet that gives one; else write ssh_host = \"{{private_ip}}\"): terminated",
                        i.id, self.reach.ssh_host
                    ),
                );
                self.slots[h].want = false;
                self.release(cloud, h).await;
                self.say(NodeEvent::Unavailable {
                    host: h,
                    why: format!("{} cannot be reached", i.id),
                });
            }
        }
    }

    /// Node `h`'s instance `i` ended or stopped without being given back: a spot instance
    /// taken back, or stopped or terminated by someone else.
    async fn ended<C: Cloud>(&mut self, cloud: &C, h: usize, i: &Instance) {
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
        if i.phase == Phase::Stopped {
            // Stopped instances still cost their volumes: gantry's are ended.
            self.release(cloud, h).await;
        } else {
            self.slots[h].instance = None;
        }
        self.say(NodeEvent::Gone(h));
    }
}

fn next_place(places: &[String], at: usize) -> String {
    places.get(at).map_or_else(
        || "no place left to try".to_string(),
        |z| format!("trying {z}"),
    )
}

#[cfg(test)]
mod tests;
