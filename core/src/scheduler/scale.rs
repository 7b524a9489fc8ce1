//! Elastic capacity: which pool to grow when pending work cannot fit anywhere, and which empty
//! nodes to give back. Pure like the rest of the core — the backend (simulated or a cloud)
//! provisions and releases; every decision carries its reason and price so it can be an event.

use super::cycle::JobId;
use crate::model::{CapacityType, GpuRequest, JobRequest, ModelId, NodeId, PoolId, MILLI_PER_GPU};
use serde::Serialize;

/// One pool that can grow, as the planner sees it.
#[derive(Clone, Debug)]
pub struct PoolOffer {
    pub pool: PoolId,
    pub model: Option<ModelId>,
    pub gpus_per_node: u8,
    pub vram_mib: u32,
    pub cpu_milli: u32,
    pub mem_mib: u64,
    pub capacity: CapacityType,
    pub price_per_hour: f64,
    /// Whether new nodes come with MIG-mode GPUs.
    pub mig: bool,
    /// Nodes up or on their way.
    pub nodes: u32,
    pub max_nodes: u32,
    /// When the provider last took a spot node of this pool back.
    pub last_interruption: Option<f64>,
}

#[derive(Clone, Debug)]
pub struct ScaleConfig {
    /// After an interruption, a spot pool is not grown for this long: on-demand instead.
    pub spot_cooldown_s: f64,
    /// A node left empty this long is given back.
    pub idle_window_s: f64,
    /// Per priority class (by index): how long a job waits for capacity already paid for
    /// before any is bought for it. Missing: at once.
    pub burst_after_s: Vec<f64>,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        ScaleConfig {
            spot_cooldown_s: 30.0 * 60.0,
            idle_window_s: 10.0 * 60.0,
            burst_after_s: Vec::new(),
        }
    }
}

impl ScaleConfig {
    /// How long a job of `class` waits for paid capacity before any is bought for it.
    pub fn patience_s(&self, class: usize) -> f64 {
        self.burst_after_s.get(class).copied().unwrap_or(0.0)
    }

    /// Whether capacity may be bought for a job of `class` that has waited `waited_s`.
    pub fn may_buy_for(&self, class: usize, waited_s: f64) -> bool {
        waited_s >= self.patience_s(class)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScaleUp {
    pub pool: PoolId,
    pub nodes: u32,
    pub for_job: JobId,
    /// What the new nodes cost together, per hour.
    pub added_per_hour: f64,
    /// A spot pool that would have served was skipped because it was just interrupted.
    pub spot_fallback: bool,
}

/// Capacity left on nodes this plan already adds, so that small jobs share a new node.
struct Fresh {
    offer: usize,
    /// Free milli-GPU per GPU of the new node.
    gpus: Vec<u16>,
    cpu: u32,
    mem: u64,
}

fn take(fresh: &mut Fresh, req: &JobRequest) -> bool {
    if !has_room(fresh, req) {
        return false;
    }
    match req.gpu {
        GpuRequest::None => {}
        GpuRequest::Whole(n) => {
            for g in fresh
                .gpus
                .iter_mut()
                .filter(|g| **g == MILLI_PER_GPU)
                .take(usize::from(n))
            {
                *g = 0;
            }
        }
        GpuRequest::Fraction(_) | GpuRequest::Mig(_) => {
            let m = req.gpu.milli().min(u32::from(MILLI_PER_GPU)) as u16;
            // Best fit: the fullest GPU that still has room.
            if let Some(g) = fresh
                .gpus
                .iter_mut()
                .filter(|g| **g >= m)
                .min_by_key(|g| **g)
            {
                *g -= m;
            }
        }
    }
    fresh.cpu -= req.cpu_milli;
    fresh.mem -= req.mem_mib;
    true
}

/// Whether a fresh node of the offer can hold one node of the request, and the job's model
/// rank there.
fn suits(o: &PoolOffer, req: &JobRequest) -> Option<u16> {
    if req.cpu_milli > o.cpu_milli || req.mem_mib > o.mem_mib {
        return None;
    }
    if o.capacity == CapacityType::Spot && !req.spot_ok || !req.allows_pool(o.pool) {
        return None;
    }
    match req.gpu {
        GpuRequest::None => return Some(0),
        GpuRequest::Whole(n) if n > o.gpus_per_node => return None,
        GpuRequest::Mig(_) if !o.mig => return None,
        GpuRequest::Fraction(_) if o.mig && o.gpus_per_node == 0 => return None,
        _ => {}
    }
    if o.gpus_per_node == 0 || req.vram_mib > o.vram_mib {
        return None;
    }
    req.models.rank(o.model?)
}

/// The job's share of a node's price, per node of the gang.
fn share_price(o: &PoolOffer, req: &JobRequest) -> f64 {
    match req.gpu {
        GpuRequest::None => o.price_per_hour * f64::from(req.cpu_milli) / f64::from(o.cpu_milli),
        g => {
            o.price_per_hour / f64::from(o.gpus_per_node) * f64::from(g.milli())
                / f64::from(MILLI_PER_GPU)
        }
    }
}

/// GPUs (milli) one node of the request holds; CPU-only requests hold none.
fn node_milli(req: &JobRequest) -> u64 {
    match req.gpu {
        GpuRequest::None => 0,
        g => u64::from(g.milli()),
    }
}

/// What buying for the job costs per GPU that will do work on what is bought: the new nodes'
/// price over the GPUs the waiting jobs still to plan (this one included) would fill on them.
/// A lone one-GPU job on an eight-GPU node pays for seven idle GPUs; a sweep of eight fills it.
fn price_per_filled_gpu(o: &PoolOffer, req: &JobRequest, demand_milli: u64) -> f64 {
    if o.gpus_per_node == 0 || matches!(req.gpu, GpuRequest::None) {
        return share_price(o, req);
    }
    let node = u64::from(o.gpus_per_node) * u64::from(MILLI_PER_GPU);
    let per_node = if req.nodes > 1 {
        node
    } else {
        demand_milli.max(node_milli(req)).min(node)
    };
    o.price_per_hour * f64::from(MILLI_PER_GPU) / per_node.max(1) as f64
}

/// For each waiting job (in order) and offer: the GPUs (milli) that single-node jobs from this
/// one on, which a fresh node of the offer could hold, ask for. Row-major, a row per job.
fn demand_after(offers: &[PoolOffer], waiting: &[(JobId, &JobRequest)]) -> Vec<u64> {
    let width = offers.len();
    let mut out = vec![0u64; waiting.len() * width];
    let mut acc = vec![0u64; width];
    for (k, (_, req)) in waiting.iter().enumerate().rev() {
        if req.nodes == 1 {
            for (i, o) in offers.iter().enumerate() {
                if suits(o, req).is_some() {
                    acc[i] += node_milli(req);
                }
            }
        }
        out[k * width..(k + 1) * width].copy_from_slice(&acc);
    }
    out
}

/// Whether `fresh` has room for one node of `req` (what `take` takes).
fn has_room(fresh: &Fresh, req: &JobRequest) -> bool {
    if fresh.cpu < req.cpu_milli || fresh.mem < req.mem_mib {
        return false;
    }
    match req.gpu {
        GpuRequest::None => true,
        GpuRequest::Whole(n) => {
            fresh.gpus.iter().filter(|&&g| g == MILLI_PER_GPU).count() >= usize::from(n)
        }
        GpuRequest::Fraction(_) | GpuRequest::Mig(_) => {
            let m = req.gpu.milli().min(u32::from(MILLI_PER_GPU)) as u16;
            fresh.gpus.iter().any(|&g| g >= m)
        }
    }
}

/// Puts a single-node job on the cheapest new node (model preference first, then the earlier
/// node) that has room. It runs for every waiting job against every node the plan holds, so
/// full nodes are passed over before anything is priced.
fn take_cheapest(fresh: &mut [Fresh], offers: &[PoolOffer], req: &JobRequest) -> bool {
    let best = fresh
        .iter()
        .enumerate()
        .filter(|(_, f)| has_room(f, req))
        .filter_map(|(k, f)| {
            let o = &offers[f.offer];
            suits(o, req).map(|rank| (rank, share_price(o, req), k))
        })
        .min_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)).then(a.2.cmp(&b.2)));
    best.is_some_and(|(_, _, k)| take(&mut fresh[k], req))
}

/// Plans growth for jobs that fit nowhere now, in the order given (queue order). Each job gets
/// the cheapest pool that satisfies it — model preference first, then the price per GPU that
/// will work on what is bought (the node's price over what this job and the waiting jobs after
/// it would fill), so spot wins where the job allows it and a lone small job is not given an
/// eight-GPU node when a smaller one costs less — within the job's price ceiling and the pool's
/// maximum; a spot pool interrupted within the cooldown is passed over for on-demand. Nodes
/// already on their way (`incoming[i]` of offer `i`) are spoken for first, and jobs that share a
/// node plan onto capacity an earlier decision of this plan adds, so a burst does not order a
/// node per job.
pub fn scale_up(
    now: f64,
    offers: &[PoolOffer],
    incoming: &[u32],
    waiting: &[(JobId, &JobRequest)],
    cfg: &ScaleConfig,
) -> Vec<ScaleUp> {
    let mut nodes: Vec<u32> = offers.iter().map(|o| o.nodes).collect();
    let mut fresh: Vec<Fresh> = Vec::new();
    for (i, o) in offers.iter().enumerate() {
        for _ in 0..incoming.get(i).copied().unwrap_or(0) {
            fresh.push(Fresh {
                offer: i,
                gpus: vec![MILLI_PER_GPU; usize::from(o.gpus_per_node)],
                cpu: o.cpu_milli,
                mem: o.mem_mib,
            });
        }
    }
    let mut out = Vec::new();
    let cooling = |o: &PoolOffer| {
        o.capacity == CapacityType::Spot
            && o.last_interruption
                .is_some_and(|t| now - t < cfg.spot_cooldown_s)
    };
    // Pools that may still grow; once none may, a job can only take room on nodes already
    // planned or coming (a long queue on a fleet at its caps is then not priced job by job).
    let growable = |nodes: &[u32]| offers.iter().zip(nodes).any(|(o, &n)| n < o.max_nodes);
    let mut can_grow = growable(&nodes);
    if fresh.is_empty() && !can_grow {
        return out;
    }
    // Read only while some pool may grow.
    let demand = if can_grow {
        demand_after(offers, waiting)
    } else {
        Vec::new()
    };
    for (k, &(job, req)) in waiting.iter().enumerate() {
        if req.nodes == 1 && take_cheapest(&mut fresh, offers, req) {
            continue;
        }
        // A gang takes whole incoming nodes of one pool.
        if req.nodes > 1 {
            let mut by_pool: Vec<Vec<usize>> = vec![Vec::new(); offers.len()];
            for (k, f) in fresh.iter().enumerate() {
                let whole = f.gpus.iter().all(|&g| g == MILLI_PER_GPU);
                if whole && suits(&offers[f.offer], req).is_some() {
                    by_pool[f.offer].push(k);
                }
            }
            if let Some(ks) = by_pool.iter().find(|ks| ks.len() >= usize::from(req.nodes)) {
                let ks: Vec<usize> = ks[..usize::from(req.nodes)].to_vec();
                for k in ks {
                    take(&mut fresh[k], req);
                }
                continue;
            }
        }
        if !can_grow {
            continue;
        }
        let mut best: Option<(u16, f64, usize)> = None;
        let mut skipped_spot = false;
        for (i, o) in offers.iter().enumerate() {
            let Some(rank) = suits(o, req) else { continue };
            if nodes[i] + u32::from(req.nodes) > o.max_nodes {
                continue;
            }
            let price = share_price(o, req) * f64::from(req.nodes);
            if req.max_price_per_hour.is_some_and(|m| price > m + 1e-9) {
                continue;
            }
            if cooling(o) {
                skipped_spot = true;
                continue;
            }
            let cost = price_per_filled_gpu(o, req, demand[k * offers.len() + i]);
            let better = best.is_none_or(|(r, c, _)| (rank, cost) < (r, c));
            if better {
                best = Some((rank, cost, i));
            }
        }
        let Some((_, _, i)) = best else { continue };
        let o = &offers[i];
        nodes[i] += u32::from(req.nodes);
        can_grow = growable(&nodes);
        let mut f = Fresh {
            offer: i,
            gpus: vec![MILLI_PER_GPU; usize::from(o.gpus_per_node)],
            cpu: o.cpu_milli,
            mem: o.mem_mib,
        };
        take(&mut f, req);
        fresh.push(f);
        out.push(ScaleUp {
            pool: o.pool,
            nodes: u32::from(req.nodes),
            for_job: job,
            added_per_hour: o.price_per_hour * f64::from(req.nodes),
            spot_fallback: skipped_spot && o.capacity != CapacityType::Spot,
        });
    }
    out
}

/// An elastic node as the planner sees it for scale-down.
#[derive(Clone, Debug)]
pub struct NodeIdle {
    pub node: NodeId,
    pub pool: PoolId,
    /// Since when nothing runs on it (`None`: something does).
    pub empty_since: Option<f64>,
}

/// Empty nodes to give back: empty for the idle window, longest-empty first, never taking a
/// pool below its minimum. `pool_min[p]` and `pool_nodes[p]` are indexed by pool.
pub fn scale_down(
    now: f64,
    nodes: &[NodeIdle],
    pool_nodes: &[u32],
    pool_min: &[u32],
    cfg: &ScaleConfig,
) -> Vec<NodeId> {
    let mut idle: Vec<&NodeIdle> = nodes
        .iter()
        .filter(|n| n.empty_since.is_some_and(|t| now - t >= cfg.idle_window_s))
        .collect();
    idle.sort_by(|a, b| {
        a.empty_since
            .unwrap_or(now)
            .total_cmp(&b.empty_since.unwrap_or(now))
            .then(a.node.cmp(&b.node))
    });
    let mut left: Vec<u32> = pool_nodes.to_vec();
    let mut out = Vec::new();
    for n in idle {
        let p = n.pool.index();
        if left.get(p).copied().unwrap_or(0) > pool_min.get(p).copied().unwrap_or(0) {
            left[p] -= 1;
            out.push(n.node);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelChoice;

    fn offer(pool: u32, capacity: CapacityType, price: f64, nodes: u32, max: u32) -> PoolOffer {
        PoolOffer {
            pool: PoolId(pool),
            model: Some(ModelId(0)),
            gpus_per_node: 8,
            vram_mib: 80 * 1024,
            cpu_milli: 192_000,
            mem_mib: 2 << 20,
            capacity,
            price_per_hour: price,
            mig: false,
            nodes,
            max_nodes: max,
            last_interruption: None,
        }
    }

    fn gpus(n: u8, spot: bool) -> JobRequest {
        JobRequest {
            gpu: GpuRequest::Whole(n),
            spot_ok: spot,
            models: ModelChoice::Any,
            ..JobRequest::default()
        }
    }

    #[test]
    fn spot_first_where_allowed_on_demand_otherwise() {
        let offers = [
            offer(0, CapacityType::OnDemand, 55.0, 0, 4),
            offer(1, CapacityType::Spot, 14.6, 0, 4),
        ];
        let (a, b) = (gpus(8, true), gpus(8, false));
        let plan = scale_up(
            0.0,
            &offers,
            &[],
            &[(1, &a), (2, &b)],
            &ScaleConfig::default(),
        );
        assert_eq!(plan.len(), 2);
        assert_eq!((plan[0].pool, plan[0].for_job), (PoolId(1), 1));
        assert!((plan[0].added_per_hour - 14.6).abs() < 1e-9);
        assert_eq!((plan[1].pool, plan[1].for_job), (PoolId(0), 2));
        assert!(!plan[1].spot_fallback);
    }

    #[test]
    fn a_lone_small_job_gets_a_small_node_and_a_sweep_a_big_one() {
        // An eight-GPU spot node at $14.6/h ($1.83 a GPU) and a one-GPU on-demand node at $6.88.
        let mut small = offer(1, CapacityType::OnDemand, 6.88, 0, 16);
        small.gpus_per_node = 1;
        let offers = [offer(0, CapacityType::Spot, 14.6, 0, 4), small];
        let cfg = ScaleConfig::default();
        let one = gpus(1, true);
        let plan = scale_up(0.0, &offers, &[], &[(1, &one)], &cfg);
        assert_eq!(plan.len(), 1);
        assert_eq!(
            plan[0].pool,
            PoolId(1),
            "alone it would leave 7 paid GPUs idle"
        );
        let sweep: Vec<(JobId, &JobRequest)> = (0..8).map(|j| (j, &one)).collect();
        let plan = scale_up(0.0, &offers, &[], &sweep, &cfg);
        assert_eq!(plan.len(), 1, "eight jobs share one big node: {plan:?}");
        assert_eq!(plan[0].pool, PoolId(0));
        // Five jobs: $14.6 over 5 GPUs ($2.92) still beats $6.88 each.
        let plan = scale_up(0.0, &offers, &[], &sweep[..5], &cfg);
        assert_eq!(plan.iter().map(|s| s.pool).collect::<Vec<_>>(), [PoolId(0)]);
        // Gangs fill whole nodes: the per-GPU price decides.
        let gang = JobRequest {
            nodes: 2,
            ..gpus(8, true)
        };
        let plan = scale_up(0.0, &offers, &[], &[(9, &gang)], &cfg);
        assert_eq!(plan[0].pool, PoolId(0));
    }

    #[test]
    fn a_just_interrupted_spot_pool_falls_back_to_on_demand() {
        let mut spot = offer(1, CapacityType::Spot, 14.6, 0, 4);
        spot.last_interruption = Some(100.0);
        let offers = [offer(0, CapacityType::OnDemand, 55.0, 0, 4), spot];
        let a = gpus(8, true);
        let cfg = ScaleConfig::default();
        let plan = scale_up(200.0, &offers, &[], &[(1, &a)], &cfg);
        assert_eq!(plan[0].pool, PoolId(0));
        assert!(plan[0].spot_fallback);
        // After the cooldown spot is first again.
        let later = scale_up(100.0 + cfg.spot_cooldown_s, &offers, &[], &[(1, &a)], &cfg);
        assert_eq!(later[0].pool, PoolId(1));
    }

    #[test]
    fn pool_maximum_and_price_ceiling_hold() {
        let offers = [offer(0, CapacityType::OnDemand, 40.0, 3, 4)];
        let mut gang = gpus(8, false);
        gang.nodes = 2;
        assert!(scale_up(0.0, &offers, &[], &[(1, &gang)], &ScaleConfig::default()).is_empty());
        let mut cheap = gpus(8, false);
        cheap.max_price_per_hour = Some(30.0);
        assert!(scale_up(0.0, &offers, &[], &[(1, &cheap)], &ScaleConfig::default()).is_empty());
        let ok = gpus(8, false);
        let plan = scale_up(
            0.0,
            &offers,
            &[],
            &[(1, &ok), (2, &ok)],
            &ScaleConfig::default(),
        );
        assert_eq!(plan.len(), 1, "one node of headroom: {plan:?}");
    }

    #[test]
    fn at_its_cap_a_pool_buys_nothing_and_its_coming_nodes_still_take_jobs() {
        // Four nodes of four: the pool may not grow. One node is on its way with 8 GPUs.
        let full = [offer(0, CapacityType::OnDemand, 40.0, 4, 4)];
        let one = gpus(1, false);
        let queue: Vec<(JobId, &JobRequest)> = (0..1000).map(|j| (j, &one)).collect();
        let cfg = ScaleConfig::default();
        assert!(scale_up(0.0, &full, &[], &queue, &cfg).is_empty());
        assert!(scale_up(0.0, &full, &[1], &queue, &cfg).is_empty());
        // One node of headroom: the first eight share the coming node, the ninth buys one, and
        // the rest find the pool at its cap.
        let room = [offer(0, CapacityType::OnDemand, 40.0, 3, 4)];
        let plan = scale_up(0.0, &room, &[1], &queue, &cfg);
        assert_eq!(
            plan.iter().map(|s| s.for_job).collect::<Vec<_>>(),
            [8],
            "{plan:?}"
        );
    }

    #[test]
    fn small_jobs_share_one_new_node() {
        let offers = [offer(0, CapacityType::OnDemand, 40.0, 0, 4)];
        let reqs: Vec<JobRequest> = (0..4).map(|_| gpus(2, false)).collect();
        let waiting: Vec<(JobId, &JobRequest)> = reqs
            .iter()
            .enumerate()
            .map(|(i, r)| (i as u64, r))
            .collect();
        let plan = scale_up(0.0, &offers, &[], &waiting, &ScaleConfig::default());
        assert_eq!(plan.len(), 1, "{plan:?}");
        let frac = JobRequest {
            gpu: GpuRequest::Fraction(500),
            ..JobRequest::default()
        };
        let plan = scale_up(
            0.0,
            &offers,
            &[],
            &[(1, &frac), (2, &frac), (3, &frac)],
            &ScaleConfig::default(),
        );
        assert_eq!(plan.len(), 1, "{plan:?}");
    }

    #[test]
    fn nodes_on_their_way_are_spoken_for_first() {
        let offers = [offer(0, CapacityType::OnDemand, 40.0, 2, 8)];
        let mut gang = gpus(8, false);
        gang.nodes = 2;
        let one = gpus(8, false);
        let cfg = ScaleConfig::default();
        assert!(scale_up(0.0, &offers, &[2], &[(1, &gang)], &cfg).is_empty());
        let plan = scale_up(0.0, &offers, &[2], &[(1, &gang), (2, &one)], &cfg);
        assert_eq!(plan.len(), 1, "{plan:?}");
        assert_eq!((plan[0].for_job, plan[0].nodes), (2, 1));
    }

    #[test]
    fn incoming_spot_goes_to_the_job_that_may_use_spot() {
        let offers = [
            offer(0, CapacityType::OnDemand, 55.0, 1, 4),
            offer(1, CapacityType::Spot, 14.6, 1, 4),
        ];
        let (a, b) = (gpus(8, true), gpus(8, false));
        let plan = scale_up(
            0.0,
            &offers,
            &[1, 1],
            &[(1, &a), (2, &b)],
            &ScaleConfig::default(),
        );
        assert!(plan.is_empty(), "both fit what is on its way: {plan:?}");
    }

    #[test]
    fn scale_down_keeps_the_pool_minimum_and_waits_for_the_window() {
        let nodes = [
            NodeIdle {
                node: NodeId(0),
                pool: PoolId(0),
                empty_since: Some(0.0),
            },
            NodeIdle {
                node: NodeId(1),
                pool: PoolId(0),
                empty_since: Some(100.0),
            },
            NodeIdle {
                node: NodeId(2),
                pool: PoolId(0),
                empty_since: None,
            },
            NodeIdle {
                node: NodeId(3),
                pool: PoolId(0),
                empty_since: Some(550.0),
            },
        ];
        let cfg = ScaleConfig::default();
        let gone = scale_down(700.0, &nodes, &[4], &[2], &cfg);
        assert_eq!(gone, vec![NodeId(0), NodeId(1)]);
        assert!(scale_down(700.0, &nodes, &[4], &[4], &cfg).is_empty());
    }
}
