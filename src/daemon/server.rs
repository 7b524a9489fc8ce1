//! Binding and serving: the Unix socket (created 0600 inside a 0700 directory, a stale one
//! replaced, a live one refused) and the optional TCP listener, until SIGINT or SIGTERM.

use super::actor::Handle;
use super::api::router;
use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug)]
pub struct Listen {
    pub socket: PathBuf,
    /// TCP address, only when asked for; every request there needs a token.
    pub tcp: Option<SocketAddr>,
}

/// The async runtime the API is served on: two workers (the actor has its own thread).
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Binds the Unix socket at `path`: refuses when a daemon already answers there, replaces a
/// stale socket file, and makes it readable and writable by this user only.
pub fn bind_unix(path: &Path) -> Result<tokio::net::UnixListener, String> {
    if let Some(dir) = path.parent() {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(format!(
                "{}: a daemon already listens there; stop it first, or pass --socket PATH",
                path.display()
            ));
        }
        std::fs::remove_file(path).map_err(|e| format!("{}: stale socket: {e}", path.display()))?;
    }
    let listener =
        tokio::net::UnixListener::bind(path).map_err(|e| format!("{}: {e}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(listener)
}

/// Serves until `shutdown` resolves; removes the socket file on the way out.
pub async fn serve(
    handle: Handle,
    listen: &Listen,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let unix = bind_unix(&listen.socket)?;
    let tcp = match listen.tcp {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("--listen {addr}: {e}"))?,
        ),
        None => None,
    };
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop_tx.send(true);
    });
    let until = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|&s| s).await;
    };
    let unix_server = axum::serve(unix, router(handle.clone(), false))
        .with_graceful_shutdown(until(stop_rx.clone()));
    let result = match tcp {
        Some(tcp) => {
            let tcp_server = axum::serve(tcp, router(handle.clone(), true))
                .with_graceful_shutdown(until(stop_rx.clone()));
            let (a, b) = tokio::join!(unix_server, tcp_server);
            a.and(b)
        }
        None => unix_server.await,
    };
    let _ = std::fs::remove_file(&listen.socket);
    result.map_err(|e| format!("serving: {e}"))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn signals() {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(_) => return std::future::pending().await,
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
}
