//! The pods/exec subresource as an API server serves it to `kubectl exec`: a WebSocket
//! (`v5.channel.k8s.io`, or `v4`) whose binary messages start with their channel — 0 stdin,
//! 1 stdout, 2 stderr, 3 the command's status (a `Status` object), 4 a terminal resize, and
//! in v5 255 to close a channel (`[255, 0]`: no more input). The double has no containers: the
//! command runs as a process here, with the pod's first container's `env` and, where it exists
//! on this machine, its `workingDir` — so what the client sends and reads is real, and the
//! status carries the process's exit code as the kubelet's does (`NonZeroExitCode`).

use super::{status, Kind, Shared};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub(super) async fn exec(
    State(s): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    RawQuery(raw): RawQuery,
    ws: WebSocketUpgrade,
) -> Response {
    let Some(pod) = s.get(Kind::Pod, &ns, &name) else {
        return status(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("pods \"{name}\" not found"),
        );
    };
    let pairs: Vec<(String, String)> =
        serde_urlencoded::from_str(raw.as_deref().unwrap_or("")).unwrap_or_default();
    let command: Vec<String> = pairs
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return status(
            StatusCode::BAD_REQUEST,
            "BadRequest",
            "you must specify at least 1 command".to_string(),
        );
    }
    let container = &pod["spec"]["containers"][0];
    let env: Vec<(String, String)> = container["env"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|v| {
                    Some((
                        v["name"].as_str()?.to_string(),
                        v["value"].as_str().unwrap_or("").to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    let dir = container["workingDir"]
        .as_str()
        .filter(|d| std::path::Path::new(d).is_dir())
        .map(str::to_string);
    ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |socket| run(socket, command, env, dir))
        .into_response()
}

async fn run(
    mut socket: WebSocket,
    command: Vec<String>,
    env: Vec<(String, String)>,
    dir: Option<String>,
) {
    let v5 = socket
        .protocol()
        .is_some_and(|p| p.as_bytes() == b"v5.channel.k8s.io");
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..])
        .envs(env)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    if let Some(d) = dir {
        cmd.current_dir(d);
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let s = json!({"metadata": {}, "status": "Failure", "reason": "InternalError",
                "message": format!("exec: {e}")});
            let _ = socket.send(frame(3, s.to_string().as_bytes())).await;
            return;
        }
    };
    let (mut stdin, mut out, mut err) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Message>(16);
    for (channel, pipe) in [(1u8, out.take().map(boxed)), (2, err.take().map(boxed))] {
        let (Some(mut pipe), tx) = (pipe, tx.clone()) else {
            continue;
        };
        tokio::spawn(async move {
            let mut buf = vec![0u8; 8192];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 || tx.send(frame(channel, &buf[..n])).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(tx);
    let mut output_open = true;
    let code = loop {
        tokio::select! {
            m = rx.recv(), if output_open => match m {
                Some(m) => { if socket.send(m).await.is_err() { return; } }
                None => output_open = false,
            },
            m = socket.recv() => match m {
                Some(Ok(Message::Binary(b))) if !b.is_empty() => match (b[0], stdin.as_mut()) {
                    (0, Some(i)) => { let _ = i.write_all(&b[1..]).await; }
                    (255, _) if v5 && b.get(1) == Some(&0) => stdin = None,
                    _ => {}
                },
                Some(Ok(_)) => {}
                Some(Err(_)) | None => return,
            },
            s = child.wait(), if !output_open => {
                break s.ok().and_then(|s| s.code()).unwrap_or(255);
            }
        }
    };
    let s: Value = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({"metadata": {}, "status": "Failure",
            "message": format!("command terminated with non-zero exit code: error executing command [{}], exit code {code}", command.join(" ")),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]}})
    };
    let _ = socket.send(frame(3, s.to_string().as_bytes())).await;
    // A normal closure (1000): kubectl reads the status until then, and takes a close with
    // no code (1005) for a broken stream.
    let _ = socket
        .send(Message::Close(Some(axum::extract::ws::CloseFrame {
            code: 1000,
            reason: "".into(),
        })))
        .await;
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut b = Vec::with_capacity(data.len() + 1);
    b.push(channel);
    b.extend_from_slice(data);
    Message::Binary(b.into())
}

fn boxed<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    r: R,
) -> Box<dyn tokio::io::AsyncRead + Unpin + Send> {
    Box::new(r)
}
