//! An MLflow tracking server through its REST API (`/api/2.0/mlflow/…`), as the Python client
//! speaks it: experiments by name, runs, tags, metrics in batches, a run's end. gantry's own
//! reqwest client: no Python in the daemon. MLflow publishes no Rust client; the calls are the
//! five of the REST reference that a scheduler needs.

use crate::config::fleet::MlflowSettings;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;

/// One tracking server (`[mlflow] tracking_uri`), with its credentials where it asks for
/// them. No `Debug`: it holds secrets.
#[derive(Clone)]
pub struct Mlflow {
    http: reqwest::Client,
    base: String,
    auth: Auth,
}

/// How requests prove who sends them.
#[derive(Clone)]
enum Auth {
    None,
    /// `Authorization: Bearer …`.
    Bearer(String),
    /// HTTP basic auth (`mlflow server --app-name basic-auth`).
    Basic(String, String),
}

/// `[mlflow]` as the fleet file may have it: a tracking server's address, and one way of
/// proving who the daemon is (a token file, or a user and a password file).
pub fn check_settings(s: &MlflowSettings) -> Result<(), String> {
    let Some(uri) = &s.tracking_uri else {
        if s.token_file.is_some() || s.username.is_some() || s.password_file.is_some() {
            return Err("mlflow: credentials without a tracking_uri: name the server they are for (tracking_uri = \"http://…\")".to_string());
        }
        return Ok(());
    };
    Mlflow::check_uri(uri)?;
    if s.token_file.is_some() && (s.username.is_some() || s.password_file.is_some()) {
        return Err(
            "mlflow: token_file and username/password_file both given: keep one way of signing in"
                .to_string(),
        );
    }
    if s.username.is_some() != s.password_file.is_some() {
        return Err("mlflow: username and password_file go together (HTTP basic auth): give both, or neither".to_string());
    }
    for f in [&s.token_file, &s.password_file].into_iter().flatten() {
        if !f.is_absolute() {
            return Err(format!(
                "mlflow: `{}`: expected an absolute path (the daemon reads it wherever it runs)",
                f.display()
            ));
        }
    }
    Ok(())
}

/// A secret's file, its content trimmed (as `echo … > file` leaves it).
fn secret(path: &Path, what: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("mlflow: {what} `{}`: {e}", path.display()))?;
    let text = text.trim().to_string();
    if text.is_empty() {
        return Err(format!("mlflow: {what} `{}` is empty", path.display()));
    }
    Ok(text)
}

impl Auth {
    /// From the fleet file's files, else the daemon's environment as MLflow's clients read it.
    fn of(s: &MlflowSettings, env: impl Fn(&str) -> Option<String>) -> Result<Auth, String> {
        if let Some(f) = &s.token_file {
            return Ok(Auth::Bearer(secret(f, "token_file")?));
        }
        if let (Some(user), Some(f)) = (&s.username, &s.password_file) {
            return Ok(Auth::Basic(user.clone(), secret(f, "password_file")?));
        }
        let env = |k: &str| env(k).filter(|v| !v.is_empty());
        if let Some(t) = env("MLFLOW_TRACKING_TOKEN") {
            return Ok(Auth::Bearer(t));
        }
        if let (Some(u), Some(p)) = (
            env("MLFLOW_TRACKING_USERNAME"),
            env("MLFLOW_TRACKING_PASSWORD"),
        ) {
            return Ok(Auth::Basic(u, p));
        }
        Ok(Auth::None)
    }

    fn sign(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match self {
            Auth::None => req,
            Auth::Bearer(t) => req.bearer_auth(t),
            Auth::Basic(u, p) => req.basic_auth(u, Some(p)),
        }
    }
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
    /// A client of the fleet's tracking server (`None`: it names none), its credentials read
    /// now (an unreadable file is the error).
    pub fn connect(s: &MlflowSettings) -> Option<Result<Mlflow, String>> {
        let uri = s.tracking_uri.as_deref()?;
        Some(Mlflow::at(uri, Auth::of(s, |k| std::env::var(k).ok())))
    }

    fn at(uri: &str, auth: Result<Auth, String>) -> Result<Mlflow, String> {
        Mlflow::check_uri(uri)?;
        let auth = auth?;
        crate::tls::install_provider();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(3))
            .timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| format!("no HTTP client: {e}"))?;
        Ok(Mlflow {
            http,
            base: uri.trim_end_matches('/').to_string(),
            auth,
        })
    }

    /// The server's address.
    pub fn uri(&self) -> &str {
        &self.base
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
        req = self.auth.sign(req);
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

    /// The run of `experiment` whose tag `key` is `value` (a run made before a lost answer).
    pub async fn run_tagged(
        &self,
        experiment: &str,
        key: &str,
        value: &str,
    ) -> Result<Option<String>, MlflowError> {
        let v = self
            .call(
                false,
                "runs/search",
                json!({
                    "experiment_ids": [experiment],
                    "filter": format!("tags.`{key}` = '{}'", value.replace('\'', "")),
                    "max_results": 1,
                }),
            )
            .await?;
        Ok(v["runs"][0]["info"]["run_id"].as_str().map(str::to_string))
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
        let req = self.auth.sign(self.http.put(url).body(bytes));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(text: &str) -> MlflowSettings {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn credentials_are_one_way_of_signing_in_with_absolute_files() {
        let ok = |t: &str| check_settings(&settings(t));
        assert!(ok("").is_ok());
        assert!(ok(
            "tracking_uri = \"http://127.0.0.1:5000\"\ntoken_file = \"/etc/gantry/mlflow.token\""
        )
        .is_ok());
        assert!(ok(
            "tracking_uri = \"http://h:5000\"\nusername = \"gantry\"\npassword_file = \"/etc/p\""
        )
        .is_ok());
        let err = |t: &str| check_settings(&settings(t)).unwrap_err();
        assert!(err("token_file = \"/t\"").contains("without a tracking_uri"));
        assert!(err("tracking_uri = \"http://h\"\ntoken_file = \"/t\"\nusername = \"u\"\npassword_file = \"/p\"").contains("keep one way"));
        assert!(err("tracking_uri = \"http://h\"\nusername = \"u\"").contains("go together"));
        assert!(
            err("tracking_uri = \"http://h\"\ntoken_file = \"rel/t\"").contains("absolute path")
        );
        assert!(err("tracking_uri = \"ftp://h\"").contains("http://"));
    }

    #[test]
    fn credentials_come_from_the_files_first_then_the_environment_as_mlflow_reads_it() {
        let dir = gantry_testkit::scratch::scratch("mlflow-auth");
        let token = dir.join("token");
        std::fs::write(&token, "s3cret\n").unwrap();
        let none = |_: &str| None;
        let s = settings(&format!(
            "tracking_uri = \"http://h\"\ntoken_file = \"{}\"",
            token.display()
        ));
        assert!(matches!(Auth::of(&s, none), Ok(Auth::Bearer(t)) if t == "s3cret"));
        let pw = dir.join("pw");
        std::fs::write(&pw, "hunter2").unwrap();
        let s = settings(&format!(
            "tracking_uri = \"http://h\"\nusername = \"gantry\"\npassword_file = \"{}\"",
            pw.display()
        ));
        assert!(
            matches!(Auth::of(&s, none), Ok(Auth::Basic(u, p)) if u == "gantry" && p == "hunter2")
        );
        // An unreadable or empty file is an error naming the file, never its content.
        std::fs::write(&pw, "  \n").unwrap();
        let e = Auth::of(&s, none).err().unwrap();
        assert!(e.contains("password_file") && e.contains("is empty"), "{e}");
        std::fs::remove_file(&pw).unwrap();
        assert!(Auth::of(&s, none).err().unwrap().contains("password_file"));
        // Without files: the daemon's environment.
        let bare = settings("tracking_uri = \"http://h\"");
        let env = |k: &str| match k {
            "MLFLOW_TRACKING_USERNAME" => Some("u".to_string()),
            "MLFLOW_TRACKING_PASSWORD" => Some("p".to_string()),
            _ => None,
        };
        assert!(matches!(Auth::of(&bare, env), Ok(Auth::Basic(u, p)) if u == "u" && p == "p"));
        let env = |k: &str| (k == "MLFLOW_TRACKING_TOKEN").then(|| "t".to_string());
        assert!(matches!(Auth::of(&bare, env), Ok(Auth::Bearer(t)) if t == "t"));
        assert!(matches!(Auth::of(&bare, none), Ok(Auth::None)));
    }
}
