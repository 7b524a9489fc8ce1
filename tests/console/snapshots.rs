//! Snapshot tests (insta) of every console view at 80×24, 120×36 and 200×50 on a fixed fixture: the
//! simulated demo fleet, seed 7, after five simulated minutes. A change to any screen shows up
//! as a reviewable diff (`cargo insta review`, or compare the `.snap.new` files).

use gantry::api::Snapshot;
use gantry::console::app::{App, View};

use crate::support::console as fixture;

fn fixture() -> (Snapshot, gantry::api::PoolDetail, gantry::api::NodeDetail) {
    let d = fixture::demo(5);
    let pool = d.state.pool_detail(1).unwrap();
    let node = d
        .state
        .node_detail(
            &pool.nodes[0].name,
            gantry::daemon::state::history::Range::Hour,
        )
        .unwrap();
    (Snapshot::clone(d.state.snapshot()), pool, node)
}

/// The screen with each line's trailing blanks trimmed (smaller, clearer snapshot files).
fn screen(app: &App, snap: &Snapshot, w: u16, h: u16) -> String {
    fixture::screen(app, snap, w, h)
        .lines()
        .map(|l| l.trim_end().to_string() + "\n")
        .collect()
}

#[test]
fn every_view_at_three_sizes() {
    let (snap, pool, node) = fixture();
    let mut app = App::new(false);
    for (w, h) in [(80u16, 24u16), (120, 36), (200, 50)] {
        for view in View::ALL {
            app.view = view;
            let name = view.short().to_lowercase();
            insta::assert_snapshot!(format!("{name}_{w}x{h}"), screen(&app, &snap, w, h));
        }
        app.view = View::Fleet;
        app.pool_detail = Some((1, pool.clone()));
        insta::assert_snapshot!(format!("pool_{w}x{h}"), screen(&app, &snap, w, h));
        let mut pane = gantry::console::node::NodePane::new(&node.name);
        pane.update(Ok(node.clone()));
        app.node = Some(pane);
        insta::assert_snapshot!(format!("node_{w}x{h}"), screen(&app, &snap, w, h));
        app.node = None;
        app.pool_detail = None;
        app.help = true;
        insta::assert_snapshot!(format!("help_{w}x{h}"), screen(&app, &snap, w, h));
        app.help = false;
    }
    // The fixture is the same every time (the simulated backend is seeded).
    let (again, _, _) = fixture();
    assert_eq!(snap.jobs, again.jobs);
}

/// A fleet of every kind of pool gantry drives — simulated clouds, this host through NVML, SSH
/// servers, a Kubernetes cluster and a Slurm cluster — as the console shows it. The rows are test
/// data in the shapes those backends report (a Slurm node's GPUs held by the cluster's own job,
/// its queue with Slurm's reasons; an SSH host whose GPUs NVML has not answered for), drawn by
/// the same code.
#[test]
fn a_mixed_fleet_at_three_sizes() {
    use gantry::api::{GpuView, NodeView, PoolDetail, PoolRow};
    let (mut snap, _, _) = fixture();
    let row = |path: &str, model: &str, nodes: usize, gpus: usize, busy: usize, price: f64| {
        let parts: Vec<&str> = path.split('/').collect();
        PoolRow {
            path: path.into(),
            short: format!("{}/{}", parts[0], parts[3]),
            instance: "".into(),
            model: model.into(),
            capacity: "reserved".into(),
            nodes,
            gpus,
            gpus_busy: busy,
            dollars_per_hour: price,
            provisioning: 0,
            down: 0,
            unreachable: 0,
            notes: Vec::new(),
        }
    };
    snap.pools.truncate(3);
    snap.pools.extend([
        row("local/here/here/host", "H100", 1, 8, 3, 0.0),
        row("ssh/lab/rack-1/dgx-a100", "A100-80GB", 4, 32, 20, 9.5),
        row(
            "kubernetes/eks-prod/us-east-1a/p4d",
            "A100",
            12,
            96,
            71,
            32.77,
        ),
        row(
            "slurm/hpc/gpu/a100-partition",
            "A100-80GB",
            16,
            128,
            128,
            0.0,
        ),
        // A pool gantry buys: one node coming, one idle and going, as the daemon says it.
        PoolRow {
            capacity: "spot".into(),
            provisioning: 1,
            notes: vec![
                "+1 coming (+$8.00/h), first ready in ~18s".into(),
                "aws-p4d-000 idle 3m20s: given back in 6m40s".into(),
            ],
            ..row("aws/us-east-1/us-east-1a/p4d", "A100", 1, 8, 0, 8.0)
        },
    ]);
    let gpu = |index: u8, util: f64, jobs: Vec<i64>, foreign: Option<&str>| GpuView {
        index,
        util_pct: util,
        vram_used_mib: (util * 700.0) as u32,
        vram_reserved_mib: if jobs.is_empty() { 0 } else { 81920 },
        vram_total_mib: 81920,
        jobs,
        mig_used: None,
        power_w: 60.0 + 3.4 * util,
        temp_c: 30.0 + 0.4 * util,
        foreign: foreign.map(str::to_string),
        foreign_pids: Vec::new(),
        unmeasured: foreign.is_some(),
        history: vec![40, 60, 80, 90, 95, 95, 94],
    };
    let slurm = PoolDetail {
        simulated: false,
        path: "slurm/hpc/gpu/a100-partition".into(),
        model: "A100-80GB".into(),
        capacity: "reserved".into(),
        dollars_per_hour: 0.0,
        nodes: vec![
            NodeView {
                name: "gpu-node-01".into(),
                state: "up".into(),
                note: None,
                leaf: None,
                nvlink: "gpu-node-01".into(),
                gpus: (0..4)
                    .map(|g| {
                        gpu(
                            g,
                            0.0,
                            vec![],
                            Some("Slurm job 4411 \"sweep\" of bob, account ml"),
                        )
                    })
                    .collect(),
                ..NodeView::default()
            },
            NodeView {
                name: "gpu-node-02".into(),
                state: "up".into(),
                note: Some("idle 3m20s: given back in 6m40s".into()),
                leaf: None,
                nvlink: "gpu-node-02".into(),
                gpus: (0..4)
                    .map(|g| gpu(g, 91.0 + f64::from(g), vec![42], None))
                    .collect(),
                ..NodeView::default()
            },
        ],
        waiting: vec![gantry::backend::ForeignWaiting {
            what: "Slurm job 4420 \"pretrain\" of alice, account llm".into(),
            gpus: 16,
            nodes: 2,
            reason: "waits for nodes to free up (Slurm: Resources)".into(),
        }],
    };
    let mut app = App::new(false);
    for (w, h) in [(80u16, 24u16), (120, 36), (200, 50)] {
        app.view = View::Fleet;
        app.pool_detail = None;
        let s = screen(&app, &snap, w, h);
        insta::assert_snapshot!(format!("mixed_fleet_{w}x{h}"), s);
        app.pool_detail = Some((6, slurm.clone()));
        insta::assert_snapshot!(
            format!("mixed_slurm_pool_{w}x{h}"),
            screen(&app, &snap, w, h)
        );
    }
}

/// The Services view with two services as the daemon publishes them: one ready and scaled up
/// by its traffic, one short of replicas (amber) with a replica failing its probe.
#[test]
fn services_at_three_sizes() {
    use gantry::api::services::{ReplicaRow, ServiceRow};
    let (mut snap, _, _) = fixture();
    let spec = |text: &str| {
        *gantry::spec::parse("svc.yaml", text.as_bytes())
            .unwrap()
            .service
            .unwrap()
    };
    let replica = |n: u32, job: i64, ready: bool, detail: &str| ReplicaRow {
        replica: n,
        job,
        version: 1,
        state: "running".into(),
        ready,
        address: Some(format!("10.0.0.{n}:8000")),
        retiring: false,
        ondemand: false,
        detail: detail.into(),
        started_s: Some(60.0),
    };
    snap.services = vec![
        ServiceRow {
            name: "llama-8b".into(),
            team: "search".into(),
            class: "serving".into(),
            version: 3,
            endpoint: "0.0.0.0:30001".into(),
            status: "ready".into(),
            wanted: 3,
            ready: 3,
            live: 3,
            load: Some(41.2),
            qps: 41.2,
            latency_p50_ms: Some(182.4),
            latency_p99_ms: Some(911.0),
            requests: 120_511,
            failed_requests: 3,
            turned_away: 0,
            gpus: 3.0,
            dollars_per_hour: 11.85,
            last_decision: Some("qps 41.2 > 2 × 20 for 30 s: +1 replica (2 → 3)".into()),
            replicas: (1..=3).map(|n| replica(n, 100 + i64::from(n), true, "ready")).collect(),
            spec: spec("run: x\nservice:\n  readiness_probe: /health\n  replica_policy:\n    min_replicas: 1\n    max_replicas: 4\n    target_qps_per_replica: 20\n"),
        },
        ServiceRow {
            name: "embed".into(),
            team: "ads".into(),
            class: "serving".into(),
            version: 1,
            endpoint: "127.0.0.1:30002".into(),
            status: "ready".into(),
            wanted: 2,
            ready: 1,
            live: 2,
            load: Some(4.0),
            qps: 4.0,
            latency_p50_ms: Some(12.0),
            latency_p99_ms: Some(40.5),
            requests: 9_001,
            failed_requests: 0,
            turned_away: 0,
            gpus: 1.0,
            dollars_per_hour: 1.2,
            last_decision: None,
            replicas: vec![
                replica(1, 201, true, "ready"),
                replica(2, 202, false, "probe /health: Connection refused"),
            ],
            spec: spec("run: x\nservice:\n  readiness_probe: /health\n  replicas: 2\n"),
        },
    ];
    let mut app = App::new(false);
    app.view = View::Services;
    for (w, h) in [(80u16, 24u16), (120, 36), (200, 50)] {
        insta::assert_snapshot!(format!("services_two_{w}x{h}"), screen(&app, &snap, w, h));
    }
}
