//! Experiment trackers gantry reports each job's run to (docs/specs.md, "Experiments"): today
//! MLflow's tracking server, named by the fleet file's `[mlflow] tracking_uri`.

pub mod mlflow;
