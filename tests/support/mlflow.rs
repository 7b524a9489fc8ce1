//! A real MLflow tracking server (`mlflow server` from PyPI, in the virtual environment
//! `.ci/run` installs at /opt/gantry-mlflow; `GANTRY_MLFLOW` names another) and what a test
//! reads back from it through MLflow's REST API.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The experiment the tests' jobs report to.
pub const EXPERIMENT: &str = "gantry-e2e";

pub fn mlflow_bin() -> Option<PathBuf> {
    let p = std::env::var_os("GANTRY_MLFLOW")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/opt/gantry-mlflow/bin/mlflow"));
    p.is_file().then_some(p)
}

/// A tracking server on 127.0.0.1:`port`, its store in `dir`; killed on drop.
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        // `mlflow server` runs its workers as children of its own process group.
        unsafe { libc::kill(-(self.0.id() as i32), libc::SIGKILL) };
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn start_server(bin: &Path, dir: &Path, port: u16) -> Server {
    start(bin, dir, port, false)
}

/// The user and password a server from [`start_signed_server`] asks for (the helpers below
/// send them to every server; one that asks for none ignores them).
pub const ADMIN: (&str, &str) = ("gantry-admin", "a-long-test-password-1");

/// Whether this MLflow has its basic-auth app (`mlflow[auth]`, which `.ci/run` installs).
pub fn has_auth(bin: &Path) -> bool {
    Command::new(bin.with_file_name("python"))
        .args(["-c", "import flask_wtf"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A tracking server that asks every request for HTTP basic auth (`--app-name basic-auth`),
/// its one user [`ADMIN`].
pub fn start_signed_server(bin: &Path, dir: &Path, port: u16) -> Server {
    start(bin, dir, port, true)
}

fn start(bin: &Path, dir: &Path, port: u16, signed: bool) -> Server {
    use std::os::unix::process::CommandExt;
    let log = std::fs::File::create(dir.join(format!("mlflow-{port}.log"))).unwrap();
    let mut cmd = Command::new(bin);
    cmd.arg("server");
    if signed {
        let ini = dir.join("basic_auth.ini");
        std::fs::write(
            &ini,
            format!(
                "[mlflow]\ndefault_permission = READ\ndatabase_uri = sqlite:///{}\nadmin_username = {}\nadmin_password = {}\nauthorization_function = mlflow.server.auth:authenticate_request_basic_auth\n",
                dir.join("auth.db").display(),
                ADMIN.0,
                ADMIN.1
            ),
        )
        .unwrap();
        cmd.args(["--app-name", "basic-auth"])
            .env("MLFLOW_AUTH_CONFIG_PATH", ini)
            .env("MLFLOW_FLASK_SERVER_SECRET_KEY", "gantry-test");
    }
    let child = cmd
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .arg("--backend-store-uri")
        .arg(format!("sqlite:///{}", dir.join("mlflow.db").display()))
        // Artifacts kept by the server itself (`mlflow-artifacts:/…`), as `mlflow server`
        // does by default.
        .arg("--artifacts-destination")
        .arg(dir.join("artifacts"))
        .args(["--workers", "1"])
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .unwrap();
    let server = Server(child);
    let t0 = Instant::now();
    while get(port, "/health").is_none() {
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "mlflow server did not answer: {}",
            std::fs::read_to_string(dir.join(format!("mlflow-{port}.log"))).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    server
}

/// An HTTP client (gantry's TLS provider installed first, as its own clients do).
pub fn client() -> reqwest::blocking::Client {
    gantry::tls::install_provider();
    reqwest::blocking::Client::new()
}

pub fn get(port: u16, path: &str) -> Option<String> {
    let r = client()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .basic_auth(ADMIN.0, Some(ADMIN.1))
        .timeout(Duration::from_secs(5))
        .send()
        .ok()?;
    r.status()
        .is_success()
        .then(|| r.text().unwrap_or_default())
}

pub fn post(port: u16, path: &str, body: Value) -> Value {
    client()
        .post(format!("http://127.0.0.1:{port}/api/2.0/mlflow/{path}"))
        .basic_auth(ADMIN.0, Some(ADMIN.1))
        .json(&body)
        .timeout(Duration::from_secs(5))
        .send()
        .unwrap()
        .json()
        .unwrap()
}

/// The runs of experiment `name` tagged with gantry's job `id`.
pub fn runs_of(port: u16, name: &str, id: i64) -> Vec<Value> {
    let Some(e) = get(
        port,
        &format!("/api/2.0/mlflow/experiments/get-by-name?experiment_name={name}"),
    ) else {
        return Vec::new();
    };
    let e: Value = serde_json::from_str(&e).unwrap();
    let found = post(
        port,
        "runs/search",
        json!({"experiment_ids": [e["experiment"]["experiment_id"]], "filter": format!("tags.`gantry.job_id` = '{id}'")}),
    );
    found["runs"].as_array().cloned().unwrap_or_default()
}

/// Job `id`'s one run in [`EXPERIMENT`].
pub fn run_of(port: u16, id: i64) -> Value {
    runs_of(port, EXPERIMENT, id).remove(0)
}

pub fn tag<'a>(run: &'a Value, key: &str) -> Option<&'a str> {
    run["data"]["tags"]
        .as_array()?
        .iter()
        .find(|t| t["key"] == key)?["value"]
        .as_str()
}

pub fn metric(run: &Value, key: &str) -> Option<f64> {
    run["data"]["metrics"]
        .as_array()?
        .iter()
        .find(|m| m["key"] == key)?["value"]
        .as_f64()
}

pub fn wait<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let t0 = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}
