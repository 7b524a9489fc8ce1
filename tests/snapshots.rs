//! Snapshot tests (insta) of every console view at 80×24, 120×36 and 200×50 on a fixed fixture: the
//! simulated demo fleet, seed 7, after five simulated minutes. A change to any screen shows up
//! as a reviewable diff (`cargo insta review`, or compare the `.snap.new` files).

use gantry::api::Snapshot;
use gantry::console::app::{App, View};

#[path = "common/console.rs"]
mod fixture;

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
    (d.state.snapshot().clone(), pool, node)
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
