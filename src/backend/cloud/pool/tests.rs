//! The worker against a cloud kept in memory: what it asks, in what order, and what it
//! says, without a network.

use super::*;
use crate::backend::cloud::CheckLines;

#[derive(Default)]
struct Account {
    instances: Vec<Instance>,
    /// Places with capacity, where the cloud says (`None`: it does not).
    capacity: Option<Vec<String>>,
    /// Terminations refused (a call that fails) before one holds.
    refuse_terminate: u32,
    /// Listings refused before one is answered.
    refuse_list: u32,
    /// Each launch: node, place, when.
    launches: Vec<(String, String, Instant)>,
}

struct Fake {
    account: Arc<Mutex<Account>>,
    calls: Arc<AtomicU64>,
    every: Duration,
}

impl Cloud for Fake {
    fn offer(&self) -> String {
        "fake-8x, on-demand".to_string()
    }
    fn calls(&self) -> Arc<AtomicU64> {
        self.calls.clone()
    }
    fn launch_every(&self) -> Duration {
        self.every
    }
    async fn open_check(&self, _: &[String]) -> Result<(), OpenWhy> {
        Ok(())
    }
    async fn check(&self, _: &[String]) -> CheckLines {
        Vec::new()
    }
    async fn prepare(&mut self) -> Result<(), Refusal> {
        Ok(())
    }
    async fn capacity(&self) -> Result<Option<Vec<String>>, Refusal> {
        Ok(self.account.lock().unwrap().capacity.clone())
    }
    async fn launch(&self, node: &str, place: &str, _: &str) -> Result<Instance, Refusal> {
        let mut a = self.account.lock().unwrap();
        a.launches
            .push((node.to_string(), place.to_string(), Instant::now()));
        let i = instance(a.instances.len() + 1, node, place);
        a.instances.push(i.clone());
        Ok(i)
    }
    async fn list(&self) -> Result<Vec<Instance>, Refusal> {
        let mut a = self.account.lock().unwrap();
        if a.refuse_list > 0 {
            a.refuse_list -= 1;
            return Err(Refusal::Retry("DescribeInstances: throttled".to_string()));
        }
        Ok(a.instances.iter().filter(|i| i.live()).cloned().collect())
    }
    async fn states(&self, ids: Vec<String>) -> Result<Vec<Instance>, Refusal> {
        let a = self.account.lock().unwrap();
        Ok(a.instances
            .iter()
            .filter(|i| ids.contains(&i.id))
            .cloned()
            .collect())
    }
    async fn terminate(&self, ids: Vec<String>) -> Result<(), Refusal> {
        let mut a = self.account.lock().unwrap();
        if a.refuse_terminate > 0 {
            a.refuse_terminate -= 1;
            return Err(Refusal::Retry("timed out".to_string()));
        }
        for i in a.instances.iter_mut().filter(|i| ids.contains(&i.id)) {
            i.phase = Phase::Ended;
            i.state = "terminated".to_string();
        }
        Ok(())
    }
}

/// A running instance `f-N` for `node` in `place`.
fn instance(n: usize, node: &str, place: &str) -> Instance {
    Instance {
        id: format!("f-{n}"),
        state: "running".to_string(),
        phase: Phase::Running,
        node: Some(node.to_string()),
        pool: Some("p".to_string()),
        zone: Some(place.to_string()),
        instance_type: None,
        spot: false,
        public_ip: Some(format!("10.0.0.{n}")),
        private_ip: None,
        public_dns: None,
        launched: None,
        reason: None,
    }
}

fn open(nodes: usize, places: &[&str], every: Duration) -> (CloudPool, Arc<Mutex<Account>>) {
    let account: Arc<Mutex<Account>> = Arc::default();
    (open_on(&account, nodes, places, every), account)
}

/// A pool over `account` as it is (what a restarted daemon finds).
fn open_on(
    account: &Arc<Mutex<Account>>,
    nodes: usize,
    places: &[&str],
    every: Duration,
) -> CloudPool {
    let reach = Reach {
        name: "pool `p` (backend fake)".to_string(),
        places: places.iter().map(|p| p.to_string()).collect(),
        ssh_user: "ubuntu".to_string(),
        ssh_host: "{public_ip}".to_string(),
        nodes: (0..nodes).map(|i| format!("n{i}")).collect(),
        delay: 1.0,
    };
    let a = account.clone();
    CloudPool::open(reach, move || async move {
        Ok(Fake {
            account: a,
            calls: Arc::default(),
            every,
        })
    })
    .unwrap()
}

/// Polls `pool` until `want` has been said (up to 20 s); everything said meanwhile.
fn until(pool: &mut CloudPool, want: impl Fn(&NodeEvent) -> bool) -> Vec<NodeEvent> {
    let t0 = Instant::now();
    let mut said = Vec::new();
    while t0.elapsed() < Duration::from_secs(20) {
        for (_, e) in pool.poll(0.0) {
            let done = want(&e);
            said.push(e);
            if done {
                return said;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("not said in 20 s; said: {said:#?}");
}

#[test]
fn a_node_bought_again_before_its_instance_ended_is_ready_at_its_address() {
    let (mut pool, account) = open(1, &["a"], Duration::ZERO);
    pool.buy(0, 0.0);
    until(&mut pool, |e| *e == NodeEvent::Ready(0));
    assert_eq!(pool.entry(0).as_deref(), Some("ubuntu@10.0.0.1"));
    // Given back, but the cloud does not end it yet (a call that fails); bought again
    // meanwhile: the same instance, ready again — and reached at its address (the old
    // worker said ready with the address forgotten, and the daemon took the node up with
    // nowhere to reach it).
    account.lock().unwrap().refuse_terminate = 1;
    pool.give_back(0, 0.0);
    assert_eq!(pool.entry(0), None);
    until(
        &mut pool,
        |e| matches!(e, NodeEvent::Said { what, .. } if what.contains("terminating f-1 failed")),
    );
    pool.buy(0, 0.0);
    until(&mut pool, |e| *e == NodeEvent::Ready(0));
    assert_eq!(pool.entry(0).as_deref(), Some("ubuntu@10.0.0.1"));
    assert_eq!(account.lock().unwrap().launches.len(), 1, "bought once");
}

#[test]
fn launches_wait_their_turn_and_pass_over_places_without_capacity() {
    let (mut pool, account) = open(3, &["a", "b"], Duration::from_millis(700));
    account.lock().unwrap().capacity = Some(vec!["b".to_string()]);
    for h in 0..3 {
        pool.buy(h, 0.0);
    }
    let mut ready = 0;
    let mut said = Vec::new();
    while ready < 3 {
        for e in until(&mut pool, |e| matches!(e, NodeEvent::Ready(_))) {
            if matches!(e, NodeEvent::Ready(_)) {
                ready += 1;
            }
            said.push(e);
        }
    }
    let a = account.lock().unwrap();
    let places: Vec<&str> = a.launches.iter().map(|l| l.1.as_str()).collect();
    assert_eq!(places, ["b", "b", "b"]);
    for w in a.launches.windows(2) {
        assert!(
            w[1].2 - w[0].2 >= Duration::from_millis(690),
            "{:?}",
            w[1].2 - w[0].2
        );
    }
    assert!(said.iter().any(|e| matches!(e, NodeEvent::Said { host: Some(0), what } if what == "a: no fake-8x, on-demand capacity now; trying b")), "{said:#?}");
}

/// A restarted daemon whose listing fails buys nothing until it can list: then it adopts what
/// it has and buys only what it lacks (it bought n0 again, and six doubles were seen live).
#[test]
fn nothing_is_bought_until_the_pools_instances_are_listed() {
    let account: Arc<Mutex<Account>> = Arc::default();
    {
        let mut a = account.lock().unwrap();
        a.instances.push(instance(1, "n0", "a"));
        a.refuse_list = 3;
    }
    let mut pool = open_on(&account, 2, &["a"], Duration::ZERO);
    pool.buy(0, 0.0);
    pool.buy(1, 0.0);
    let mut said = Vec::new();
    while !(said.contains(&NodeEvent::Ready(0)) && said.contains(&NodeEvent::Ready(1))) {
        said.extend(until(&mut pool, |e| matches!(e, NodeEvent::Ready(_))));
    }
    assert!(
        said.iter().any(|e| matches!(e, NodeEvent::Said { host: None, what } if what.contains("nothing is bought until they can be listed"))),
        "{said:#?}"
    );
    let a = account.lock().unwrap();
    let launched: Vec<&str> = a.launches.iter().map(|l| l.0.as_str()).collect();
    assert_eq!(launched, ["n1"], "n0's instance adopted, not bought again");
}

/// A second live instance for a node that has one is terminated at once, said, not after
/// the stray grace (six nodes held two instances each 150 s later).
#[test]
fn a_second_instance_for_a_node_is_given_back_at_once() {
    let account: Arc<Mutex<Account>> = Arc::default();
    {
        let mut a = account.lock().unwrap();
        a.instances.push(instance(1, "n0", "a"));
        a.instances.push(instance(2, "n0", "a"));
    }
    let mut pool = open_on(&account, 1, &["a"], Duration::ZERO);
    let said = until(
        &mut pool,
        |e| matches!(e, NodeEvent::Said { what, .. } if what.starts_with("terminated f-2: a second instance for node n0, which has f-1")),
    );
    assert!(!said.is_empty());
    let a = account.lock().unwrap();
    assert_eq!(a.instances[1].phase, Phase::Ended);
    assert_eq!(a.instances[0].phase, Phase::Running);
}
