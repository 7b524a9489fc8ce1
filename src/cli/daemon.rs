//! `gantry daemon`, and the console: embedded (an in-process daemon on the simulated fleet) or
//! attached to a running daemon with `--connect`.

use gantry::client::http::{Endpoint, RemoteClient};
use gantry::daemon::actor::{spawn, Clock};
use gantry::daemon::embedded::LocalClient;
use gantry::daemon::server::{serve, signals, Listen};
use gantry::daemon::state::{Messages, State, StateOptions};
use gantry::daemon::tls::CertSource;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args)]
pub struct DaemonArgs {
    /// Fleet file (default: the one `gantry info` shows, else the built-in simulated fleet).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The journal (SQLite); default: the one `gantry info` shows.
    #[arg(long)]
    db: Option<PathBuf>,
    /// Unix socket to serve (mode 0600); default: the one `gantry info` shows.
    #[arg(long)]
    socket: Option<PathBuf>,
    /// Open the socket to this group too (0660, as Docker's is): its members reach the daemon
    /// as themselves, each a researcher of the team `[[users]]` gives them, else a viewer.
    #[arg(long, value_name = "GROUP")]
    socket_group: Option<String>,
    /// Also serve TCP here (e.g. 127.0.0.1:7450); every request there needs a bearer token.
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Serve TLS on --listen: the certificate of --tls-cert/--tls-key, else one the daemon
    /// makes on first start and keeps beside its journal (clients pin its fingerprint, which
    /// the start line and `gantry token create` print).
    #[arg(long, requires = "listen")]
    tls: bool,
    /// PEM certificate chain for --listen (implies --tls).
    #[arg(long, requires_all = ["tls_key", "listen"])]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Another name (DNS or IP) for the certificate the daemon makes, e.g. gantry.lab.example;
    /// repeatable. Names matter only to clients that verify by CA, not to those that pin.
    #[arg(long, requires = "tls")]
    tls_name: Vec<String>,
    /// Serve GET /metrics alone here, without a token, as exporters do (e.g. 0.0.0.0:9400).
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Simulated seconds per wall second (1: real time).
    #[arg(long, default_value_t = 1.0)]
    speed: f64,
    /// How often the daemon steps its clock when nothing happens (timers, polls of backends
    /// that cannot say when a run ends); a run's end on this host or an SSH host wakes it at
    /// once whatever this is. 1s to 1h.
    #[arg(long, default_value = "1s")]
    step: String,
    /// Feed the seeded demo workload (what the embedded console shows).
    #[arg(long)]
    demo: bool,
    /// Seed of the simulated backend and the demo workload.
    #[arg(long, default_value_t = 7)]
    seed: u64,
    /// How often the local host's GPUs are sampled through NVML (fleets with a
    /// `provider = "local"` pool), e.g. 1s, 500ms.
    #[arg(long, default_value = "1s")]
    sample_interval: String,
    /// A client's request must arrive (headers, then body) within this time, e.g. 10s.
    #[arg(long, default_value = "10s")]
    request_timeout: String,
    /// Most open connections on the TCP listener (more are closed as they arrive); the Unix
    /// socket has a budget of its own.
    #[arg(long, default_value_t = 256)]
    max_connections: usize,
    /// The most a workdir shipped by `gantry submit` may be, packed, in MiB (kept under the
    /// journal's directory, in `workdirs/`).
    #[arg(long, default_value_t = 256)]
    max_workdir_mb: u64,
    /// The most one team's shipped workdirs may hold together, unpacked, in MiB (the same
    /// content sent again is kept once, charged to whoever sent it first; kept until an hour
    /// after the last job using it ends).
    #[arg(long, default_value_t = 2048)]
    max_team_workdirs_mb: u64,
    /// The most files and directories one shipped workdir may unpack to (each takes an inode
    /// and a block however small); one team's together may hold four times as many.
    #[arg(long, default_value_t = gantry::workdir::DEFAULT_MAX_FILES)]
    max_workdir_files: u64,
    /// How often the nodes of `gpu = "auto"` Kubernetes pools are listed again; the pools are
    /// rebuilt (as on a fleet file reload) when nodes joined or left.
    #[arg(long, default_value = "1m")]
    cluster_look_every: String,
}

pub fn run(a: DaemonArgs) -> Result<(), String> {
    if !(a.speed.is_finite() && (0.0..=1e6).contains(&a.speed)) {
        return Err(format!(
            "--speed {}: expected 0..=1000000 simulated seconds per second",
            a.speed
        ));
    }
    let look_every = gantry::spec::parse_duration(&a.cluster_look_every)
        .filter(|s| (1.0..=86_400.0).contains(s))
        .map(Duration::from_secs_f64)
        .ok_or_else(|| {
            format!(
                "--cluster-look-every {}: expected a duration from 1s to 1d, e.g. 1m",
                a.cluster_look_every
            )
        })?;
    let request_timeout = gantry::spec::parse_duration(&a.request_timeout)
        .filter(|s| (0.1..=3600.0).contains(s))
        .ok_or_else(|| {
            format!(
                "--request-timeout {}: expected a duration from 100ms to 1h, e.g. 10s",
                a.request_timeout
            )
        })?;
    if a.max_connections == 0 {
        return Err("--max-connections 0: expected at least 1".to_string());
    }
    // Everything the daemon writes (journal, logs, socket) is this user's alone: job specs
    // may carry secrets.
    // SAFETY: umask only changes this process's file-creation mask.
    unsafe {
        libc::umask(0o077);
    }
    gantry::daemon::server::raise_fd_limit();
    let paths = gantry::config::paths::from_env();
    let (source, cfg, file) = super::fleet::load(a.config)?;
    let db = a.db.unwrap_or(paths.journal);
    if let Some(dir) = db.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        private_dir(dir);
    }
    let tls = match (a.tls_cert, a.tls_key) {
        (Some(cert), Some(key)) => Some(CertSource::Files { cert, key }),
        _ if a.tls => Some(CertSource::Own {
            dir: gantry::config::paths::tls_dir(&db),
            names: a.tls_name,
        }),
        _ => None,
    };
    let tls = tls.as_ref().map(gantry::daemon::tls::load).transpose()?;
    if let Some(addr) = a
        .listen
        .filter(|addr| tls.is_none() && !addr.ip().is_loopback())
    {
        eprintln!(
            "gantry daemon: warning: --listen {addr} without --tls: tokens and job specs cross the network unencrypted"
        );
    }
    let listen = Listen {
        socket: a.socket.unwrap_or(paths.socket),
        socket_group: a.socket_group,
        tcp: a.listen,
        tls,
        metrics: a.metrics_listen,
        limits: gantry::daemon::server::Limits {
            request_timeout: Duration::from_secs_f64(request_timeout),
            max_tcp_connections: a.max_connections,
            max_workdir_bytes: a.max_workdir_mb << 20,
            max_team_workdir_bytes: a.max_team_workdirs_mb << 20,
            max_workdir_files: a.max_workdir_files,
            max_team_workdir_files: a.max_workdir_files.saturating_mul(4),
            ..Default::default()
        },
        workdirs: Some(
            db.parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(std::path::Path::new("."))
                .join("workdirs"),
        ),
    };
    let step = gantry::spec::parse_duration(&a.step)
        .filter(|s| (1.0..=3600.0).contains(s))
        .ok_or_else(|| {
            format!(
                "--step {}: expected a duration from 1s to 1h, e.g. 1s",
                a.step
            )
        })?;
    let interval = gantry::spec::parse_duration(&a.sample_interval)
        .filter(|s| (0.05..=3600.0).contains(s))
        .ok_or_else(|| {
            format!(
                "--sample-interval {}: expected a duration from 50ms to 1h, e.g. 1s",
                a.sample_interval
            )
        })?;
    let opts = StateOptions {
        seed: a.seed,
        demo_workload: a.demo,
        sampling: gantry::backend::agent::Sampling::Nvml(Duration::from_secs_f64(interval)),
        reserved_ports: a
            .listen
            .iter()
            .chain(&a.metrics_listen)
            .map(SocketAddr::port)
            .collect(),
        ..StateOptions::default()
    };
    let state = State::open(&db, &cfg, &opts).map_err(|e| e.to_string())?;
    let jobs = state.engine().jobs().count();
    let mut backends = Vec::new();
    if state.snapshot().simulated {
        backends.push("simulated backend".to_string());
    }
    // Each backend says its pools its own way (as it registered).
    for b in gantry::config::fleet::Backend::ALL {
        let r = gantry::backend::registry::of(b);
        let pools: Vec<_> = cfg.pools.iter().filter(|p| p.backend() == b).collect();
        if pools.is_empty() {
            continue;
        }
        backends.extend(r.here.map(str::to_string));
        if let Some(what) = r.hosts_are {
            let n: usize = pools.iter().map(|p| p.hosts.len()).sum();
            backends.extend((n > 0).then(|| format!("{n} {what}")));
        }
        if let Some(cloud) = r.cloud {
            let most: u32 = pools.iter().map(|p| p.max_nodes.unwrap_or(p.nodes)).sum();
            backends.push(format!(
                "{} {} pool(s), up to {most} instance(s) bought as needed",
                pools.len(),
                cloud.name
            ));
        }
    }
    let backend = if backends.is_empty() {
        "no pools".to_string()
    } else {
        backends.join(", ")
    };
    let (handle, actor) = spawn(
        state,
        Clock {
            speed: a.speed,
            step: Duration::from_secs_f64(step),
        },
    )
    .map_err(|e| e.to_string())?;
    let runtime = gantry::daemon::server::runtime()?;
    eprintln!(
        "gantry daemon {}: fleet {source} ({backend}), journal {} ({jobs} jobs), socket {}{}{}",
        env!("CARGO_PKG_VERSION"),
        db.display(),
        listen.socket.display(),
        listen.tcp.map_or(String::new(), |a| match &listen.tls {
            None => format!(", tcp {a} (bearer tokens)"),
            Some(t) => format!(
                ", tcp {a} (TLS, certificate {} {}{}; bearer tokens)",
                t.cert.display(),
                t.fingerprint,
                if t.made { ", made now" } else { "" },
            ),
        }),
        listen
            .metrics
            .map_or(String::new(), |a| format!(", metrics {a} (open)"))
    );
    if let Some(path) = file {
        let hup = Arc::new(AtomicBool::new(false));
        let flag = hup.clone();
        runtime.spawn(async move {
            use tokio::signal::unix::{signal, SignalKind};
            if let Ok(mut s) = signal(SignalKind::hangup()) {
                while s.recv().await.is_some() {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        });
        let handle = handle.clone();
        std::thread::Builder::new()
            .name("gantry-fleet-file".to_string())
            .spawn(move || watch_fleet_file(&path, &handle, &hup, look_every))
            .map_err(|e| format!("cannot watch the fleet file: {e}"))?;
    }
    let result = runtime.block_on(async { serve(handle.clone(), &listen, signals()).await });
    handle.shutdown();
    drop(handle);
    let _ = actor.join();
    eprintln!("gantry daemon: stopped");
    result
}

/// Applies the fleet file again whenever it changes (checked every second; a change is applied
/// once the file has stayed the same for a second, so an editor's half-written save is not
/// read) or the daemon gets SIGHUP. Polling the file's size, modification time and inode is
/// enough here and works where inotify does not (NFS homes, editors that replace the file).
/// Ends when the daemon stops.
fn watch_fleet_file(
    path: &std::path::Path,
    handle: &gantry::daemon::actor::Handle,
    hup: &AtomicBool,
    look_every: Duration,
) {
    use std::os::unix::fs::MetadataExt;
    let seen = |p: &std::path::Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.len(), m.mtime(), m.mtime_nsec(), m.ino()))
    };
    let mut applied = seen(path);
    let mut last = applied;
    // `gpu = "auto"` Kubernetes pools: their clusters' nodes looked at every minute; the file
    // is applied again when what they would be built into moves (nodes joined or left).
    // The file is only parsed here: `fleet::load` would also run this host's NVML discovery
    // (and say so on stderr) every minute, which the clusters' shape does not need.
    // `None`: no such pools (or no file to read); `Err`: a cluster that cannot be read.
    let cluster_shape = || {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).ok()?;
        let cfg = gantry::config::fleet::parse(&name, &text).ok()?;
        let auto = cfg.pools.iter().any(|p| p.built_from_cluster());
        auto.then(|| gantry::backend::discover::shape(&cfg))
    };
    let mut shape = cluster_shape().and_then(Result::ok);
    let mut looked = std::time::Instant::now();
    loop {
        std::thread::sleep(Duration::from_secs(1));
        let now = seen(path);
        let settled = now == last && now != applied;
        last = now;
        let mut moved = false;
        // A cluster that cannot be read is tried again by a reload: the pool's row counts the
        // tries, and the events say when the reason changes (or the cluster is read again).
        let mut unread = false;
        if looked.elapsed() >= look_every {
            looked = std::time::Instant::now();
            match cluster_shape() {
                Some(Ok(s)) => {
                    moved = shape.as_ref() != Some(&s);
                    shape = Some(s);
                }
                Some(Err(_)) => unread = true,
                None => {}
            }
        }
        if moved {
            eprintln!("gantry daemon: a cluster's nodes changed: its gpu = \"auto\" pools are built again");
        }
        // SIGHUP is the operator's say-so: it applies a file that would fail live jobs, which
        // a change noticed on disk alone never does (it may be half-written).
        let forced = hup.swap(false, Ordering::Relaxed);
        if !(settled || moved || forced || unread) {
            continue;
        }
        applied = now;
        let cfg = super::fleet::load(Some(path.to_path_buf())).map(|(_, cfg, _)| cfg);
        match handle.reload(cfg, forced) {
            // A retry of an unreadable cluster that found nothing new is not news.
            Ok(said) if unread && said == "the fleet file is unchanged" => {}
            Ok(said) => eprintln!("gantry daemon: fleet file {}: {said}", path.display()),
            Err(e) if e.code == "stopping" => return,
            Err(e) if e.code == "reopen-failed" => {
                // The state is closed (journal flushed, lock released): nothing left to serve.
                eprintln!("gantry daemon: {}; stopping", e.error);
                std::process::exit(1);
            }
            Err(e) => eprintln!("gantry daemon: {}", e.error),
        }
    }
}

/// Makes the state directory this user's alone (0700) when it is ours and not a shared one
/// (a sticky, world-writable directory such as /tmp is left as it is).
fn private_dir(dir: &std::path::Path) {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    let Ok(meta) = std::fs::metadata(dir) else {
        return;
    };
    // SAFETY: getuid has no preconditions.
    let mine = meta.uid() == unsafe { libc::getuid() };
    let shared = meta.mode() & 0o1000 != 0;
    if mine && !shared && meta.mode() & 0o077 != 0 {
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    }
}

/// The console: on a remote daemon with `--connect`, else on an in-process daemon over the
/// built-in simulated fleet with the demo workload (its state lives in a fresh temporary
/// directory and is not kept).
pub fn console(
    theme: Option<&str>,
    keymap: Option<&str>,
    target: &super::remote::Target,
    readonly: bool,
    demo_asked: bool,
) -> Result<(), super::CliError> {
    let paths = gantry::config::paths::from_env();
    let file = gantry::config::console::load(&paths.console_file)?;
    let (theme, color) =
        gantry::console::load_theme(theme.or(file.theme.as_deref()), &paths.config_dir)?;
    let keymap =
        gantry::console::load_keymap(keymap.or(file.keymap.as_deref()), &paths.config_dir)?;
    let app = |source: String| {
        let mut app = gantry::console::app::App::with(theme.clone(), keymap.clone(), color);
        app.readonly = readonly || file.readonly;
        app.mouse = file.mouse;
        app.source = source;
        app.contexts = file
            .contexts
            .iter()
            .map(|c| (c.name.clone(), c.connect.clone()))
            .collect();
        app
    };
    // A daemon named (--connect, GANTRY_CONNECT; else console.toml's `context`) or answering
    // on the default socket is what the console shows; only when none answers does it run
    // the embedded demo.
    let token = target.token.clone();
    let mut attach = match (&target.connect, &file.context) {
        _ if demo_asked => None,
        (Some(_), _) => Some((target.endpoint().map_err(|e| e.message)?, token)),
        (None, Some(name)) => Some(context(file.context(name)?)?),
        (None, None) => {
            let default = Endpoint::Unix(paths.socket.clone());
            let answers = gantry::client::http::HttpClient::new(default.clone(), None)
                .request("GET", "/v1/health", None)
                .is_ok_and(|r| r.status == 200);
            // Someone with a fleet of their own wants their fleet: the demo in its place,
            // with a badge to say so, was taken for it.
            if !answers && paths.fleet_file.exists() {
                return Err(super::CliError {
                    code: 5,
                    message: format!(
                        "no daemon answers on {}, and the console shows the daemon that runs your fleet file ({}): start it — `gantry daemon` (or as a service: deploy/gantry.service) — then run `gantry` again; `gantry --demo` opens the simulated demo fleet instead",
                        paths.socket.display(),
                        paths.fleet_file.display()
                    ),
                });
            }
            answers.then_some((default, token))
        }
    };
    loop {
        let switch = match attach {
            Some((endpoint, token)) => {
                let app = app(format!("daemon {endpoint}"));
                // Unreachable is exit 5 here as for every command (`gantry --help`).
                let mut client = RemoteClient::connect(endpoint, token)?;
                gantry::console::run(&mut client, app).map_err(|e| format!("console: {e}"))?
            }
            None => demo(&paths, app("demo".to_string()))?,
        };
        // `:ctx NAME`: the same console on another daemon.
        let Some(name) = switch else { return Ok(()) };
        attach = Some(context(file.context(&name)?)?);
    }
}

/// Where a console.toml context is, and its token.
fn context(c: &gantry::config::console::Context) -> Result<(Endpoint, Option<String>), String> {
    let endpoint = Endpoint::parse(&c.connect)
        .and_then(|e| e.pinned(c.tls_fingerprint.as_deref()))
        .map_err(|e| format!("context {}: {e}", c.name))?;
    Ok((endpoint, context_token(c)?))
}

/// A context's token, read from its `token_file`.
fn context_token(c: &gantry::config::console::Context) -> Result<Option<String>, String> {
    let Some(f) = &c.token_file else {
        return Ok(None);
    };
    let path = gantry::backend::expand_home(f);
    let t = std::fs::read_to_string(&path)
        .map_err(|e| format!("context {}: token_file {}: {e}", c.name, path.display()))?;
    Ok(Some(t.trim().to_string()))
}

/// `gantry --context NAME`: the daemon console.toml's context of that name stands for, with
/// its token and fingerprint (a `--token` or `--tls-fingerprint` given as well wins).
pub fn context_target(
    name: &str,
    given: &super::remote::Target,
) -> Result<super::remote::Target, String> {
    let paths = gantry::config::paths::from_env();
    let file = gantry::config::console::load(&paths.console_file)?;
    let c = file
        .context(name)
        .map_err(|e| format!("--context: {e} ({})", paths.console_file.display()))?;
    Ok(super::remote::Target {
        connect: Some(c.connect.clone()),
        token: match &given.token {
            Some(t) => Some(t.clone()),
            None => context_token(c)?,
        },
        tls_fingerprint: given
            .tls_fingerprint
            .clone()
            .or_else(|| c.tls_fingerprint.clone()),
    })
}

/// The console on the embedded demo daemon; the context to switch to, if the user asked.
fn demo(
    paths: &gantry::config::paths::Paths,
    app: gantry::console::app::App,
) -> Result<Option<String>, String> {
    let dir = std::env::temp_dir().join(format!("gantry-demo-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // The terminal is the console's screen: the embedded daemon's warnings go to a file (and
    // to the Events view), and the path is said once the console has closed.
    let log = paths.data_dir.join("console-daemon.log");
    let _ = std::fs::create_dir_all(&paths.data_dir);
    let logged_before = std::fs::metadata(&log).map_or(0, |m| m.len());
    let result = (|| {
        let state =
            State::demo_with(&dir, 7, Messages::File(log.clone())).map_err(|e| e.to_string())?;
        let clock = Clock {
            speed: 60.0,
            step: Duration::from_secs(1),
        };
        let (handle, actor) = spawn(state, clock).map_err(|e| e.to_string())?;
        let mut client = LocalClient::new(handle.clone());
        let r = gantry::console::run(&mut client, app).map_err(|e| format!("console: {e}"));
        handle.shutdown();
        drop(client);
        drop(handle);
        let _ = actor.join();
        r
    })();
    let _ = std::fs::remove_dir_all(&dir);
    if std::fs::metadata(&log).map_or(0, |m| m.len()) > logged_before {
        eprintln!(
            "gantry: the embedded daemon wrote warnings to {}",
            log.display()
        );
    }
    result
}
