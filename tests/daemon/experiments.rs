//! Jobs' runs in a real MLflow tracking server (`mlflow server` from PyPI, in the virtual
//! environment `.ci/run` installs at /opt/gantry-mlflow; `GANTRY_MLFLOW` names another): the
//! run is made at submit, the job's own `mlflow.log_metric` lands in it, gantry's tags and
//! metrics and its end follow; a job submitted while the server is down gets its run when it
//! is back. Without MLflow the tests say they skipped.

use crate::support::daemon as common;
use crate::support::mlflow::{
    has_auth, metric, mlflow_bin, run_of, runs_of, start_server, start_signed_server, tag, wait,
    ADMIN,
};
use serde_json::Value;

#[test]
fn a_jobs_run_is_in_mlflow_with_its_own_metrics_and_gantrys_and_one_made_late_when_it_was_down() {
    let Some(bin) = mlflow_bin() else {
        eprintln!(
            "skipped: no mlflow (pip install mlflow into /opt/gantry-mlflow, or set GANTRY_MLFLOW)"
        );
        return;
    };
    let python = bin.with_file_name("python");
    let dir = common::temp_dir("mlflow");
    let port = common::free_port();
    let server = start_server(&bin, &dir, port);
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "{}\n[mlflow]\ntracking_uri = \"http://127.0.0.1:{port}\"\n",
            // GPUs the host declares (it has no NVML here): jobs on them are billed.
            common::local_fleet("lab", "gpu = \"H100\"\ngpus_per_node = 2\nvram_gb = 80\n")
        ),
    )
    .unwrap();
    let d = common::start_in(dir.clone(), &["--config", fleet.to_str().unwrap()]);
    let data = dir.join("data.txt");
    std::fs::write(&data, "rows\n").unwrap();
    // The job logs a metric of its own through MLflow's Python client, which reads the run
    // from MLFLOW_RUN_ID.
    let id = common::submit(
        &d,
        &dir,
        "train",
        &format!(
            "name: train\nexperiment: gantry-e2e\nresources:\n  accelerators: H100:1\nfile_mounts:\n  {}: {}\nrun: |\n  {} -c \"import mlflow; mlflow.log_metric('loss', 0.25)\"\n",
            dir.join("mounted.txt").display(),
            data.display(),
            python.display()
        ),
    );
    common::wait_for(&d, 180, "the job to complete", || {
        common::state(&d, id) == "completed"
    });
    let spec = common::job(&d, id)["spec"].as_str().unwrap().to_string();
    assert!(
        spec.contains("MLFLOW_RUN_ID") && spec.contains(&format!("http://127.0.0.1:{port}")),
        "{spec}"
    );
    // `gantry job` links the run; the Jobs rows name the experiment.
    let shown = common::cli(&d, &["job", &id.to_string()]);
    assert!(
        shown.contains(&format!(
            "experiment gantry-e2e: MLflow run http://127.0.0.1:{port}/#/experiments/"
        )),
        "{shown}"
    );
    let rows = common::json(&d, &["jobs"]);
    assert!(
        rows.as_array()
            .unwrap()
            .iter()
            .any(|r| r["id"] == id && r["experiment"] == "gantry-e2e"),
        "{rows}"
    );
    // The job's own client ends the run as its process exits; gantry's last report (its
    // state `completed`, its final metrics) follows.
    let run = wait(60, "gantry's last report of the run", || {
        runs_of(port, "gantry-e2e", id).into_iter().find(|r| {
            r["info"]["status"] == "FINISHED" && tag(r, "gantry.state") == Some("completed")
        })
    });
    assert_eq!(metric(&run, "loss"), Some(0.25), "{run}");
    // What its mounts read are the run's inputs; its spec is an artifact.
    let inputs = &run["inputs"]["dataset_inputs"];
    assert!(
        inputs
            .as_array()
            .is_some_and(|d| d.iter().any(|i| i["dataset"]["source_type"] == "local"
                && i["dataset"]["source"]
                    .as_str()
                    .unwrap_or("")
                    .contains("data.txt"))),
        "{run}"
    );
    let run_id = run["info"]["run_id"].as_str().unwrap();
    let listed = crate::support::mlflow::get(
        port,
        &format!("/api/2.0/mlflow/artifacts/list?run_id={run_id}"),
    )
    .unwrap_or_default();
    assert!(listed.contains("gantry-spec.yaml"), "{listed}");
    assert_eq!(tag(&run, "gantry.team"), Some("lab"), "{run}");
    assert_eq!(tag(&run, "gantry.nodes"), Some("1"), "{run}");
    assert_eq!(tag(&run, "gantry.gpu"), Some("H100x1"), "{run}");
    assert!(metric(&run, "gantry.gpu_hours").unwrap() > 0.0, "{run}");
    assert!(metric(&run, "gantry.queue_wait_s").is_some(), "{run}");
    assert!(run["info"]["end_time"].as_i64().is_some(), "{run}");
    // The cost MLflow has is gantry's.
    let cost = common::job(&d, id)["cost_usd"].as_f64().unwrap();
    assert!(
        (metric(&run, "gantry.cost_usd").unwrap() - cost).abs() < 1e-6,
        "{run} vs {cost}"
    );

    // The server stops; a job submitted meanwhile runs all the same, and gets its run once
    // the server is back.
    drop(server);
    let late = common::submit(
        &d,
        &dir,
        "late",
        "name: late\nexperiment: gantry-e2e\nresources:\n  accelerators: H100:1\nrun: sleep 1\n",
    );
    common::wait_for(&d, 60, "the late job to complete", || {
        common::state(&d, late) == "completed"
    });
    let _server = start_server(&bin, &dir, port);
    let run = wait(60, "the late job's run", || {
        runs_of(port, "gantry-e2e", late).into_iter().find(|r| {
            r["info"]["status"] == "FINISHED" && tag(r, "gantry.state") == Some("completed")
        })
    });
    assert_eq!(tag(&run, "gantry.job_id"), Some(late.to_string().as_str()));
    // The bill by experiment is what MLflow has, job by job.
    let late_run = runs_of(port, "gantry-e2e", late).remove(0);
    let report: Value = serde_json::from_str(&common::cli(
        &d,
        &["report", "--by", "experiment", "--format", "json"],
    ))
    .unwrap();
    let row = report["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["key"] == "gantry-e2e")
        .unwrap_or_else(|| panic!("{report}"))
        .clone();
    let in_mlflow = metric(&run_of(port, id), "gantry.cost_usd").unwrap()
        + metric(&late_run, "gantry.cost_usd").unwrap();
    assert!(
        (row["spend_usd"].as_f64().unwrap() - in_mlflow).abs() < 1e-6 && in_mlflow > 0.0,
        "{row} vs {in_mlflow}"
    );
    // The job's events say what happened, and so do the daemon's.
    let said = common::events(&d).join("\n");
    assert!(
        said.contains(&format!("job {id} has MLflow run"))
            && said.contains(&format!("job {late} has no MLflow run yet"))
            && said.contains(&format!("job {late} has MLflow run"))
            && said.contains("answers again"),
        "{said}"
    );
}

/// The tracking server asks for a password and is down from the submission on; the job ends,
/// the daemon is killed and started again, the server comes up: the job gets one run with its
/// end, and the password is nowhere the daemon writes.
#[test]
fn what_a_down_tracker_is_owed_outlives_a_daemon_crash_and_is_sent_signed_once() {
    let Some(bin) = mlflow_bin().filter(|b| has_auth(b)) else {
        eprintln!("skipped: no mlflow with its basic-auth app (pip install 'mlflow[auth]' into /opt/gantry-mlflow, or set GANTRY_MLFLOW)");
        return;
    };
    let dir = common::temp_dir("mlflow-owed");
    let port = common::free_port();
    let password = dir.join("mlflow.password");
    std::fs::write(&password, format!("{}\n", ADMIN.1)).unwrap();
    let fleet = dir.join("fleet.toml");
    std::fs::write(
        &fleet,
        format!(
            "{}\n[mlflow]\ntracking_uri = \"http://127.0.0.1:{port}\"\nusername = \"{}\"\npassword_file = \"{}\"\n",
            common::local_fleet("lab", "gpu = \"H100\"\ngpus_per_node = 2\nvram_gb = 80\n"),
            ADMIN.0,
            password.display()
        ),
    )
    .unwrap();
    let args = ["--config", fleet.to_str().unwrap()];
    let mut d = common::start_in(dir.clone(), &args);
    let id = common::submit(
        &d,
        &dir,
        "owed",
        "name: owed\nexperiment: gantry-owed\nresources:\n  accelerators: H100:1\nrun: sleep 1\n",
    );
    common::wait_for(&d, 60, "the job to complete", || {
        common::state(&d, id) == "completed"
    });
    // `gantry job` says what waits, and since when.
    common::wait_for(&d, 60, "gantry job to say what MLflow is owed", || {
        common::job(&d, id)["experiment"]["waiting"]
            .as_str()
            .is_some_and(|w| w.contains("its run") && w.contains("has not answered since"))
    });
    let shown = common::cli(&d, &["job", &id.to_string()]);
    assert!(shown.contains("not in MLflow yet: its run"), "{shown}");

    common::restart(&mut d, &args);
    let _server = start_signed_server(&bin, &dir, port);
    let run = wait(90, "the job's run, made once the server answers", || {
        runs_of(port, "gantry-owed", id).into_iter().find(|r| {
            r["info"]["status"] == "FINISHED" && tag(r, "gantry.state") == Some("completed")
        })
    });
    assert_eq!(tag(&run, "gantry.team"), Some("lab"), "{run}");
    assert!(metric(&run, "gantry.gpu_hours").unwrap() > 0.0, "{run}");
    // One run, however many beats and restarts it took; the link is in `gantry job`.
    assert_eq!(runs_of(port, "gantry-owed", id).len(), 1);
    common::wait_for(&d, 30, "gantry job to link the run and owe nothing", || {
        let e = &common::job(&d, id)["experiment"];
        e["waiting"].is_null()
            && e["url"]
                .as_str()
                .is_some_and(|u| u.contains(run["info"]["run_id"].as_str().unwrap()))
    });
    // Nothing more is owed: another restart makes no second run.
    common::restart(&mut d, &args);
    std::thread::sleep(std::time::Duration::from_secs(7));
    assert_eq!(runs_of(port, "gantry-owed", id).len(), 1);
    // The password is read, never written: not in the events, the daemon's output, the journal.
    let said = common::events(&d).join("\n");
    assert!(said.contains("waits for it in the journal"), "{said}");
    let err = std::fs::read_to_string(dir.join(common::STDERR)).unwrap_or_default();
    let mut journal = std::fs::read(dir.join("state").join("state.db")).unwrap();
    journal.extend(std::fs::read(dir.join("state").join("state.db-wal")).unwrap_or_default());
    let secret = ADMIN.1.as_bytes();
    assert!(
        !said.contains(ADMIN.1)
            && !err.contains(ADMIN.1)
            && !journal.windows(secret.len()).any(|w| w == secret),
        "the password was written somewhere"
    );
}
