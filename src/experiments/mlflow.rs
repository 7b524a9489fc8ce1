//! An MLflow tracking server through its REST API (`/api/2.0/mlflow/…`), as the Python client
//! speaks it: experiments by name, runs, tags, metrics in batches, a run's end. gantry's own
//! reqwest client: no Python in the daemon. MLflow publishes no Rust client; the calls are the
//! five of the REST reference that a scheduler needs.

use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;

/// One tracking server (`[mlflow] tracking_uri`), with its token if it asks for one.
#[derive(Clone)]
pub struct Mlflow {
    http: reqwest::Client,
    base: String,
    /// `Authorization: Bearer …` (`MLFLOW_TRACKING_TOKEN` in the daemon's environment).
    token: Option<String>,
}

/// Why a call failed: the server's answer (`RESOURCE_DOES_NOT_EXIST`, …) or no answer.
#[derive(Debug, Clone, PartialEq)]
pub struct MlflowError {
    /// MLflow's `error_code`, or `UNREACHABLE` when the server did not answer.
    pub code: String,
    pub message: String,
}

impl std::fmt::Display for MlflowError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

/// A run's end as MLflow names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Finished,
    Failed,
    Killed,
}

impl RunStatus {
    fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "RUNNING",
            RunStatus::Finished => "FINISHED",
            RunStatus::Failed => "FAILED",
            RunStatus::Killed => "KILLED",
        }
    }
}

fn pairs(tags: &[(String, String)]) -> Vec<Value> {
    tags.iter()
        .map(|(k, v)| json!({"key": k, "value": v}))
        .collect()
}

impl Mlflow {
    /// A client of the server at `uri` (`http://host:5000`, `https://…`); the token from the
    /// daemon's `MLFLOW_TRACKING_TOKEN`, as MLflow's own clients read it.
    pub fn new(uri: &str) -> Result<Mlflow, String> {
        Mlflow::check_uri(uri)?;
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("no HTTP client: {e}"))?;
        let token = std::env::var("MLFLOW_TRACKING_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        Ok(Mlflow {
            http,
            base: uri.trim_end_matches('/').to_string(),
            token,
        })
    }

    /// A tracking server's address: `http://` or `https://` and a host.
    pub fn check_uri(uri: &str) -> Result<(), String> {
        let rest = uri
            .strip_prefix("http://")
            .or_else(|| uri.strip_prefix("https://"));
        match rest {
            Some(r) if !r.is_empty() && !r.starts_with('/') && !r.contains(char::is_whitespace) => Ok(()),
            _ => Err(format!(
                "mlflow: tracking_uri `{}`: expected the http:// or https:// address of an MLflow tracking server (e.g. \"http://127.0.0.1:5000\")",
                uri.escape_debug()
            )),
        }
    }

    async fn call(&self, get: bool, path: &str, body: Value) -> Result<Value, MlflowError> {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        let mut req = if get {
            let query: Vec<(String, String)> = body
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                .collect();
            let query = serde_urlencoded::to_string(&query).unwrap_or_default();
            self.http.get(format!("{url}?{query}"))
        } else {
            self.http.post(&url).json(&body)
        };
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let unreachable = |e: reqwest::Error| MlflowError {
            code: "UNREACHABLE".into(),
            message: format!("{}: {e}", self.base),
        };
        let answer = req.send().await.map_err(unreachable)?;
        let status = answer.status();
        let v: Value = answer.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(v);
        }
        #[derive(Deserialize, Default)]
        struct Refusal {
            #[serde(default)]
            error_code: String,
            #[serde(default)]
            message: String,
        }
        let r: Refusal = serde_json::from_value(v).unwrap_or_default();
        Err(MlflowError {
            code: if r.error_code.is_empty() {
                format!("HTTP {}", status.as_u16())
            } else {
                r.error_code
            },
            message: r.message,
        })
    }

    /// The experiment's id, made if it does not exist yet (as `mlflow.set_experiment` does).
    pub async fn experiment(&self, name: &str) -> Result<String, MlflowError> {
        match self
            .call(
                true,
                "experiments/get-by-name",
                json!({"experiment_name": name}),
            )
            .await
        {
            Ok(v) => Ok(v["experiment"]["experiment_id"]
                .as_str()
                .unwrap_or_default()
                .to_string()),
            Err(e) if e.code == "RESOURCE_DOES_NOT_EXIST" => {
                let v = self
                    .call(false, "experiments/create", json!({"name": name}))
                    .await?;
                Ok(v["experiment_id"].as_str().unwrap_or_default().to_string())
            }
            Err(e) => Err(e),
        }
    }

    /// A new run of `experiment` (its id), started at `start_ms` (Unix milliseconds).
    pub async fn create_run(
        &self,
        experiment: &str,
        name: &str,
        start_ms: i64,
        tags: &[(String, String)],
    ) -> Result<String, MlflowError> {
        let v = self
            .call(
                false,
                "runs/create",
                json!({"experiment_id": experiment, "run_name": name, "start_time": start_ms, "tags": pairs(tags)}),
            )
            .await?;
        Ok(v["run"]["info"]["run_id"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Metrics (key, value) at `at_ms` and tags, in one request.
    pub async fn log_batch(
        &self,
        run: &str,
        at_ms: i64,
        metrics: &[(&str, f64)],
        tags: &[(String, String)],
    ) -> Result<(), MlflowError> {
        let metrics: Vec<Value> = metrics
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v, "timestamp": at_ms, "step": 0}))
            .collect();
        self.call(
            false,
            "runs/log-batch",
            json!({"run_id": run, "metrics": metrics, "tags": pairs(tags)}),
        )
        .await
        .map(drop)
    }

    /// Datasets the run used (MLflow's run inputs): (name, source type, source URI) each, the
    /// source as MLflow's dataset sources write it (`{"uri": …}`).
    pub async fn log_inputs(
        &self,
        run: &str,
        datasets: &[(String, String, String)],
    ) -> Result<(), MlflowError> {
        use sha2::{Digest, Sha256};
        let datasets: Vec<Value> = datasets
            .iter()
            .map(|(name, kind, uri)| {
                let digest = crate::random::hex(&Sha256::digest(uri.as_bytes()));
                json!({
                    "dataset": {
                        "name": name,
                        "digest": &digest[..8],
                        "source_type": kind,
                        "source": json!({"uri": uri}).to_string(),
                    },
                    "tags": [{"key": "mlflow.data.context", "value": "file_mounts"}],
                })
            })
            .collect();
        self.call(
            false,
            "runs/log-inputs",
            json!({"run_id": run, "datasets": datasets}),
        )
        .await
        .map(drop)
    }

    /// The run's artifact root (`mlflow-artifacts:/1/RUN/artifacts` where the server keeps
    /// artifacts itself).
    pub async fn artifact_uri(&self, run: &str) -> Result<String, MlflowError> {
        let v = self.call(true, "runs/get", json!({"run_id": run})).await?;
        Ok(v["run"]["info"]["artifact_uri"]
            .as_str()
            .unwrap_or_default()
            .to_string())
    }

    /// Writes `bytes` as artifact `name` of a run whose artifacts the server keeps itself
    /// (`artifact_uri` from [`Mlflow::artifact_uri`]); `Ok(false)` where the server does not
    /// (a run whose artifacts go straight to a bucket the client writes).
    pub async fn put_artifact(
        &self,
        artifact_uri: &str,
        name: &str,
        bytes: Vec<u8>,
    ) -> Result<bool, MlflowError> {
        let Some(path) = artifact_uri.strip_prefix("mlflow-artifacts:") else {
            return Ok(false);
        };
        let url = format!(
            "{}/api/2.0/mlflow-artifacts/artifacts/{}/{name}",
            self.base,
            path.trim_matches('/')
        );
        let mut req = self.http.put(url).body(bytes);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let answer = req.send().await.map_err(|e| MlflowError {
            code: "UNREACHABLE".into(),
            message: format!("{}: {e}", self.base),
        })?;
        if answer.status().is_success() {
            Ok(true)
        } else {
            Err(MlflowError {
                code: format!("HTTP {}", answer.status().as_u16()),
                message: answer.text().await.unwrap_or_default(),
            })
        }
    }

    /// The run's status, and its end where it ended.
    pub async fn set_status(
        &self,
        run: &str,
        status: RunStatus,
        end_ms: Option<i64>,
    ) -> Result<(), MlflowError> {
        let mut body = json!({"run_id": run, "status": status.name()});
        if let Some(end) = end_ms {
            body["end_time"] = json!(end);
        }
        self.call(false, "runs/update", body).await.map(drop)
    }
}
