//! A gang on SSH hosts reported to a real MLflow server: two nodes, preempted once, completed —
//! one MLflow run with the job's own metric, gantry's tags and metrics, and the bill.

use crate::support::daemon as common;
use crate::support::mlflow::{metric, mlflow_bin, runs_of, start_server, tag, wait, EXPERIMENT};
use crate::support::sshd::{can_run, hosts};
use common::{cli, events, start_in, state, submit, temp_dir, wait_for};

#[test]
fn a_two_node_gang_preempted_once_is_one_mlflow_run_with_its_own_metric_and_the_bill() {
    if !can_run() {
        return;
    }
    let Some(bin) = mlflow_bin() else {
        eprintln!(
            "skipped: no mlflow (pip install mlflow into /opt/gantry-mlflow, or set GANTRY_MLFLOW)"
        );
        return;
    };
    let h = hosts("mlflow", 2);
    let port = common::free_port();
    let _server = start_server(&bin, &h.dir, port);
    let fleet = h.fleet(&h.entries(), "2m");
    let text = std::fs::read_to_string(&fleet).unwrap();
    std::fs::write(
        &fleet,
        format!("[mlflow]\ntracking_uri = \"http://127.0.0.1:{port}\"\n\n{text}"),
    )
    .unwrap();
    let d = start_in(
        temp_dir("ssh-mlflow"),
        &["--config", fleet.to_str().unwrap()],
    );
    wait_for(&d, 120, "both hosts to connect", || {
        events(&d)
            .iter()
            .filter(|e| e.contains("connected:"))
            .count()
            >= 2
    });
    // Rank 0 logs its own metric to the run its environment names (MLFLOW_TRACKING_URI and
    // MLFLOW_RUN_ID, on every node of every start: through MLflow's REST API with curl, as the
    // hosts do not see the test's Python environment); each start says which run it has; a
    // preemption's SIGUSR1 checkpoints.
    let id = submit(
        &d,
        &h.dir,
        "gang",
        &format!(
            "name: gang\nnum_nodes: 2\nexperiment: {EXPERIMENT}\nresources:\n  accelerators: A100-80GB:2\ncheckpoint: {{signal: SIGUSR1, grace: 20s}}\nrun: |\n  trap 'echo checkpointed; exit 0' USR1\n  echo \"start rank=$SKYPILOT_NODE_RANK run=$MLFLOW_RUN_ID\"\n  if [ \"$SKYPILOT_NODE_RANK\" = 0 ]; then curl -sf -X POST \"$MLFLOW_TRACKING_URI/api/2.0/mlflow/runs/log-metric\" -H 'Content-Type: application/json' -d \"{{\\\"run_id\\\": \\\"$MLFLOW_RUN_ID\\\", \\\"key\\\": \\\"loss\\\", \\\"value\\\": 0.5, \\\"timestamp\\\": $(date +%s)000}}\" && echo logged; fi\n  for i in $(seq 30); do sleep 0.1; done\n",
        ),
    );
    wait_for(&d, 60, "the gang to run", || {
        common::log_text(&d, id).contains("start rank=1")
    });
    cli(&d, &["preempt", &id.to_string()]);
    wait_for(&d, 60, "the requeue", || {
        events(&d)
            .iter()
            .any(|e| e.contains(&format!("job {id} preempting → pending")))
    });
    wait_for(
        &d,
        120,
        "the gang to complete after its second start",
        || state(&d, id) == "completed",
    );
    let run = wait(60, "gantry's last report of the run", || {
        runs_of(port, EXPERIMENT, id).into_iter().find(|r| {
            r["info"]["status"] == "FINISHED" && tag(r, "gantry.state") == Some("completed")
        })
    });
    let run_id = run["info"]["run_id"].as_str().unwrap();
    // Both starts, both nodes, in the one run.
    let log = common::log_text(&d, id);
    assert!(
        log.contains(&format!("start rank=0 run={run_id}"))
            && log.contains(&format!("start rank=1 run={run_id}")),
        "{log}"
    );
    let all = cli(&d, &["logs", &id.to_string()]);
    assert_eq!(metric(&run, "loss"), Some(0.5), "{run}\n{all}");
    assert_eq!(metric(&run, "gantry.preemptions"), Some(1.0), "{run}");
    assert_eq!(metric(&run, "gantry.restarts"), Some(0.0), "{run}");
    assert_eq!(tag(&run, "gantry.nodes"), Some("2"), "{run}");
    assert_eq!(tag(&run, "gantry.gpu"), Some("A100-80GBx2"), "{run}");
    assert_eq!(tag(&run, "gantry.team"), Some("lab"), "{run}");
    // The cost MLflow has is the bill's.
    let report: serde_json::Value =
        serde_json::from_str(&cli(&d, &["report", "--by", "job", "--format", "json"])).unwrap();
    let billed = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"].as_str() == Some(id.to_string().as_str()))
        .and_then(|r| r["spend_usd"].as_f64())
        .unwrap_or_else(|| panic!("{report}"));
    let in_mlflow = metric(&run, "gantry.cost_usd").unwrap();
    assert!(
        billed > 0.0 && (billed - in_mlflow).abs() < 1e-6,
        "report {billed} vs MLflow {in_mlflow}"
    );
}
