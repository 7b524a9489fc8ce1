//! Binding and serving: the Unix socket (created 0600 inside a 0700 directory, a stale one
//! replaced, a live one or any other file refused) and the optional TCP listener, until SIGINT
//! or SIGTERM.
//!
//! Connections are served here rather than by `axum::serve` because a daemon left running on
//! a shared box must bound what one client can hold: every request's headers must arrive
//! within a time limit (slowloris), each listener has its own connection cap (connections past
//! it are closed at once, so a flood on TCP never costs the Unix socket — the operators' way
//! in — its file descriptors), and shutdown is bounded: open event streams end, and any
//! connection still busy after the grace period is dropped.

use super::actor::Handle;
use super::api::router;
use super::probation::{Bounds, Heard, OnProbation, Probation, Proof};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// What one client may hold of the daemon.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// A request's headers, and then its body, must arrive within this time.
    pub request_timeout: Duration,
    /// Open connections on the TCP listener; more are closed as they arrive.
    pub max_tcp_connections: usize,
    /// Open connections on the Unix socket (its own budget: TCP clients cannot use it up).
    pub max_unix_connections: usize,
    /// How long shutdown waits for busy connections before dropping them.
    pub shutdown_grace: Duration,
    /// The most one shipped workdir may be, packed (unpacked: eight times that).
    pub max_workdir_bytes: u64,
    /// The most one team's kept workdirs may hold together, unpacked (on disk, in blocks).
    pub max_team_workdir_bytes: u64,
    /// The most entries (files, directories, links) one shipped workdir may unpack to.
    pub max_workdir_files: u64,
    /// The most entries one team's kept workdirs may hold together.
    pub max_team_workdir_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_timeout: Duration::from_secs(10),
            max_tcp_connections: 256,
            max_unix_connections: 256,
            shutdown_grace: Duration::from_secs(3),
            max_workdir_bytes: crate::workdir::DEFAULT_MAX_BYTES,
            max_team_workdir_bytes: crate::workdir::DEFAULT_MAX_BYTES * 8,
            max_workdir_files: crate::workdir::DEFAULT_MAX_FILES,
            max_team_workdir_files: crate::workdir::DEFAULT_MAX_FILES * 4,
        }
    }
}

#[derive(Clone, Debug, Default)]
pub struct Listen {
    pub socket: PathBuf,
    /// TCP address, only when asked for; every request there needs a token.
    pub tcp: Option<SocketAddr>,
    /// TLS on the TCP listener, when asked for.
    pub tls: Option<super::tls::Tls>,
    /// TCP address serving `GET /metrics` alone, without a token, only when asked for.
    pub metrics: Option<SocketAddr>,
    pub limits: Limits,
    /// Where workdirs shipped by `gantry submit` are kept (`POST /v1/workdirs`); `None`
    /// refuses them.
    pub workdirs: Option<PathBuf>,
    /// The group the socket is opened to (`--socket-group`), as Docker's is: its members
    /// reach the daemon as themselves (the kernel says who), researchers of the team
    /// `[[users]]` gives them or viewers.
    pub socket_group: Option<String>,
}

/// The async runtime the API is served on: two workers (the actor has its own thread).
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// Binds the Unix socket at `path`: refuses when a daemon already answers there or when the
/// path is something other than a socket, replaces a stale socket file, and makes it readable
/// and writable by this user only (in a directory it creates 0700) — or, with `group`, by
/// that group's members too (0660, the directory 0750 of that group where it is ours).
pub fn bind_unix(path: &Path, group: Option<&str>) -> Result<tokio::net::UnixListener, String> {
    let gid = group.map(group_id).transpose()?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.exists() {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
        }
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(format!(
                "{}: exists and is not a socket; gantry will not replace it — pass --socket with another path",
                path.display()
            ));
        }
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
    if let Some(gid) = gid {
        let open_to = |p: &Path, mode: u32| {
            std::os::unix::fs::chown(p, None, Some(gid))
                .and_then(|()| std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)))
                .map_err(|e| format!("{}: opening it to group {gid}: {e}", p.display()))
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: geteuid has no preconditions.
            let mine = std::fs::metadata(dir).is_ok_and(|m| m.uid() == unsafe { libc::geteuid() });
            let shared = std::fs::metadata(dir).is_ok_and(|m| m.mode() & 0o1000 != 0);
            if mine && !shared {
                open_to(dir, 0o750)?;
            }
        }
        open_to(path, 0o660)?;
    }
    Ok(listener)
}

/// The id of the group `name`, or why there is none.
fn group_id(name: &str) -> Result<u32, String> {
    crate::unix_user::group_id(name).ok_or_else(|| {
        format!(
            "--socket-group {}: no such group on this host",
            name.escape_debug()
        )
    })
}

/// Serves until `shutdown` resolves; removes the socket file on the way out. Returns within
/// about `limits.shutdown_grace` of the signal whatever the clients do.
pub async fn serve(
    handle: Handle,
    listen: &Listen,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<(), String> {
    let unix = bind_unix(&listen.socket, listen.socket_group.as_deref())?;
    let tcp = match listen.tcp {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("--listen {addr}: {e}"))?,
        ),
        None => None,
    };
    let metrics = match listen.metrics {
        Some(addr) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .map_err(|e| format!("--metrics-listen {addr}: {e}"))?,
        ),
        None => None,
    };
    // Every listener answers from here on: tell systemd (Type=notify) the daemon is ready. A
    // no-op without NOTIFY_SOCKET.
    let _ = sd_notify::notify(&[sd_notify::NotifyState::Ready]);
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = sd_notify::notify(&[sd_notify::NotifyState::Stopping]);
        let _ = stop_tx.send(true);
    });
    let limits = listen.limits;
    let fingerprint = listen.tls.as_ref().map(|t| t.fingerprint.clone());
    let workdirs: Option<std::sync::Arc<std::path::Path>> =
        listen.workdirs.as_deref().map(std::sync::Arc::from);
    if let Some(dir) = workdirs.clone() {
        tokio::spawn(sweep_workdirs(handle.clone(), dir, stop_rx.clone()));
    }
    // Services' endpoints and probes.
    tokio::spawn(super::serving::run(handle.clone(), stop_rx.clone()));
    // Jobs' runs in the fleet's experiment tracker.
    let (tracker, tracking) = super::experiments::Tracker::new(handle.clone(), stop_rx.clone());
    tokio::spawn(tracking);
    let unix_app = router(
        handle.clone(),
        false,
        fingerprint.clone(),
        stop_rx.clone(),
        limits,
        workdirs.clone(),
        tracker.clone(),
    );
    let unix_loop = accept_loop(
        unix,
        None,
        unix_app,
        limits.max_unix_connections,
        None,
        limits,
        stop_rx.clone(),
    );
    let tcp_loop = async {
        if let Some(tcp) = tcp {
            let app = router(
                handle.clone(),
                true,
                fingerprint,
                stop_rx.clone(),
                limits,
                workdirs,
                tracker,
            );
            let tls = listen
                .tls
                .as_ref()
                .map(|t| tokio_rustls::TlsAcceptor::from(t.config.clone()));
            // Every request here needs a token: a connection that has shown none is on
            // probation (`probation.rs`), so idle strangers cannot hold the slots.
            let probation = Probation::new(Bounds::for_cap(limits.max_tcp_connections));
            accept_loop(
                tcp,
                tls,
                app,
                limits.max_tcp_connections,
                Some(probation),
                limits,
                stop_rx.clone(),
            )
            .await;
        }
    };
    let metrics_loop = async {
        if let Some(l) = metrics {
            let app = super::api::metrics_router(handle.clone(), stop_rx.clone(), limits);
            let cap = limits.max_tcp_connections;
            accept_loop(l, None, app, cap, None, limits, stop_rx.clone()).await;
        }
    };
    tokio::join!(unix_loop, tcp_loop, metrics_loop);
    let _ = std::fs::remove_file(&listen.socket);
    Ok(())
}

/// The Unix user at the other end of a socket connection (the kernel's SO_PEERCRED): who
/// the jobs it submits are recorded as submitted by; its uid, and its name.
#[derive(Clone, Debug)]
pub struct SocketUser(pub u32, pub String);

/// Who is at the other end of a connection, where the kernel says (Unix sockets).
pub trait PeerUser {
    fn peer_user(&self) -> Option<SocketUser>;
}

impl PeerUser for tokio::net::UnixStream {
    fn peer_user(&self) -> Option<SocketUser> {
        self.peer_cred()
            .ok()
            .map(|c| SocketUser(c.uid(), crate::daemon::auth::user_name(c.uid())))
    }
}

impl PeerUser for tokio::net::TcpStream {
    fn peer_user(&self) -> Option<SocketUser> {
        None
    }
}

/// A listener's address of a peer, as probation counts peers.
pub trait PeerIp {
    fn peer_ip(&self) -> Option<IpAddr>;
}

impl PeerIp for SocketAddr {
    fn peer_ip(&self) -> Option<IpAddr> {
        Some(self.ip())
    }
}

impl PeerIp for tokio::net::unix::SocketAddr {
    fn peer_ip(&self) -> Option<IpAddr> {
        None
    }
}

/// A connection's place on probation, while it has one.
type OnTrial = (Proof, OnProbation, tokio::sync::oneshot::Receiver<()>);

/// Accepts connections until `stop`, each served on a task of its own while a slot of the
/// listener's cap is free (over TLS when `tls`; on `probation` until a good token is shown);
/// then waits (at most the grace) for the open ones to finish.
#[allow(clippy::too_many_arguments)]
async fn accept_loop<L>(
    mut listener: L,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: axum::Router,
    cap: usize,
    probation: Option<Arc<Probation>>,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
) where
    L: axum::serve::Listener,
    L::Io: Unpin + PeerUser,
    L::Addr: PeerIp,
{
    let slots = Arc::new(Semaphore::new(cap));
    loop {
        let (io, peer) = tokio::select! {
            accepted = listener.accept() => accepted,
            _ = stop.wait_for(|&s| s) => break,
        };
        // Past the cap the connection is closed at once: holding it would hold its descriptor.
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            drop(io);
            continue;
        };
        let user = io.peer_user();
        let (io, heard) = Heard::new(io);
        let trial = probation.as_ref().map(|p| p.admit(peer.peer_ip(), heard));
        let app = match user {
            Some(u) => app.clone().layer(axum::Extension(u)),
            None => app.clone(),
        };
        let stop = stop.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => serve_connection(io, app, limits, stop, trial).await,
                // The handshake, like a request's headers, must end within the time limit: a
                // client that starts one and stalls holds a slot no longer than that.
                Some(tls) => {
                    let shaken = tokio::time::timeout(limits.request_timeout, tls.accept(io));
                    if let Ok(Ok(io)) = shaken.await {
                        serve_connection(io, app, limits, stop, trial).await;
                    }
                }
            }
        });
    }
    // Every slot back means every connection has closed.
    let _ = tokio::time::timeout(
        limits.shutdown_grace + Duration::from_millis(500),
        slots.acquire_many(cap as u32),
    )
    .await;
}

/// Serves one connection's requests until it closes, or until `stop` (then gracefully, for at
/// most the grace).
async fn serve_connection<I>(
    io: I,
    app: axum::Router,
    limits: Limits,
    mut stop: watch::Receiver<bool>,
    trial: Option<OnTrial>,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    // On probation: the connection's proof goes with each request (authentication takes it
    // off probation), and it is closed when evicted or past the deadline.
    let (app, ended) = match trial {
        Some((proof, guard, evicted)) => {
            let app = app.layer(axum::Extension(proof.clone()));
            let ended = async move {
                let _guard = guard;
                tokio::select! {
                    // A proven connection's sender is dropped: not an eviction.
                    e = evicted => if e.is_err() { std::future::pending::<()>().await },
                    _ = proof.expired() => {}
                }
            };
            (app, futures_util::future::Either::Left(ended))
        }
        None => (
            app,
            futures_util::future::Either::Right(std::future::pending()),
        ),
    };
    let service = TowerToHyperService::new(app);
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.request_timeout);
    // With upgrades: `gantry exec` turns its connection into a terminal session.
    let conn = builder
        .serve_connection(TokioIo::new(io), service)
        .with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = ended => return,
        _ = stop.wait_for(|&s| s) => {}
    }
    conn.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(limits.shutdown_grace, conn).await;
}

/// Raises this process's open-file limit to its hard limit, so the connection caps (not the
/// descriptor table) decide when clients are turned away.
pub fn raise_fd_limit() {
    // SAFETY: getrlimit/setrlimit read and write a plain struct owned here.
    unsafe {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}

/// Resolves on SIGINT or SIGTERM.
///
/// The handlers are installed when this is called (inside the runtime), not when the future is
/// first polled: the daemon says it is ready only after, so a SIGTERM right after readiness
/// stops it gracefully instead of killing it.
pub fn signals() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let term = signal(SignalKind::terminate()).ok();
    let int = signal(SignalKind::interrupt()).ok();
    async move {
        let (Some(mut term), Some(mut int)) = (term, int) else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}

/// Every ten minutes (and once at start), shipped workdirs no job that has not ended uses and
/// that are over an hour old are removed: a daemon left running does not fill its disk with
/// every directory ever submitted.
async fn sweep_workdirs(
    handle: Handle,
    dir: std::sync::Arc<std::path::Path>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        if let Ok(in_use) = handle
            .call(|reply| super::actor::Request::WorkdirsInUse { reply })
            .await
        {
            let dir = dir.clone();
            let _ = tokio::task::spawn_blocking(move || {
                crate::workdir::sweep(&dir, &in_use, Duration::from_secs(3600))
            })
            .await;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(600)) => {}
            _ = stop.changed() => return,
        }
    }
}
