//! `POST /v1/jobs/{id}/exec`: a command (or a shell) inside a running job, relayed over the
//! upgraded connection (`exec_wire`). The actor only says how to reach the job's node
//! (`State::enter`: its runner's command); the command runs here under a terminal of its own
//! when asked (a pty, sized and resized as the client's), its output and exit status sent
//! back as frames. A client that goes away ends the command (SIGHUP to its session, as
//! closing a terminal does); nothing else is ever signalled.
//!
//! Query: `node=K` (rank, default 0), `tty=true` (a terminal; `rows`, `cols` its size),
//! `argv=` a JSON list of words (default: the job's shell).

use super::ApiError;
use super::{job_id, query, Api};
use crate::daemon::actor::Request as ActorRequest;
use crate::daemon::auth::Caller;
use crate::daemon::state::STARTING;
use crate::exec_wire::{Frame, PROTOCOL};
use axum::extract::{Path, RawQuery, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use tokio::io::AsyncWriteExt;

/// How long a request waits for a node still starting.
const START_WAIT: std::time::Duration = std::time::Duration::from_secs(20);

/// The most bytes of words a command may have.
const MAX_ARGV_BYTES: usize = 64 << 10;

/// Sessions open at once: per caller, and in all. Each holds a process, a terminal or three
/// pipes and a connection for as long as it lasts, outside the listeners' connection caps
/// (the connection was upgraded away from them), so they are counted here, apart.
const SESSIONS_PER_CALLER: usize = 8;
const SESSIONS: usize = 64;

/// The sessions open now, per caller (`Caller::scope`).
static OPEN: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A session's place among the open ones, given back when it ends.
struct Seat(String);

impl Seat {
    fn take(caller: &Caller) -> Result<Seat, ApiError> {
        let who = caller.scope();
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        let mine = open.iter().filter(|c| **c == who).count();
        if mine >= SESSIONS_PER_CALLER {
            return Err(ApiError::new(
                429,
                "too-many-sessions",
                format!("{mine} sessions of yours are open, the most one caller may hold: close one (exit its shell) and try again"),
            ));
        }
        if open.len() >= SESSIONS {
            return Err(ApiError::new(
                429,
                "too-many-sessions",
                format!("{} sessions are open on this daemon, the most it holds: try again when one ends", open.len()),
            ));
        }
        open.push(who.clone());
        Ok(Seat(who))
    }
}

impl Drop for Seat {
    fn drop(&mut self) {
        let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = open.iter().position(|c| *c == self.0) {
            open.swap_remove(i);
        }
    }
}

pub(super) async fn exec(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    RawQuery(raw): RawQuery,
    mut req: Request,
) -> Result<Response, ApiError> {
    let id = job_id(&id)?;
    let q = query(raw)?;
    // Counted from here: a session waiting for its node to start holds a seat too.
    let seat = Seat::take(&caller)?;
    let rank = match q.get("node") {
        None => None,
        Some(k) => Some(k.parse::<usize>().map_err(|_| {
            ApiError::bad_request(format!(
                "node `{}`: expected a rank, 0 or more",
                k.escape_debug()
            ))
        })?),
    };
    let tty = matches!(q.get("tty").map(String::as_str), Some("true" | "1"));
    let size = |k: &str, default: u16| -> Result<u16, ApiError> {
        match q.get(k) {
            None => Ok(default),
            Some(v) => v.parse::<u16>().ok().filter(|n| *n > 0).ok_or_else(|| {
                ApiError::bad_request(format!("{k} `{}`: expected 1 to 65535", v.escape_debug()))
            }),
        }
    };
    let (rows, cols) = (size("rows", 24)?, size("cols", 80)?);
    let argv: Vec<String> = match q.get("argv") {
        None => Vec::new(),
        Some(a) if a.len() > MAX_ARGV_BYTES => {
            return Err(ApiError::bad_request(format!(
                "argv: {} bytes, over the limit of {MAX_ARGV_BYTES}",
                a.len()
            )))
        }
        Some(a) => serde_json::from_str(a).map_err(|e| {
            ApiError::bad_request(format!("argv: expected a JSON list of strings: {e}"))
        })?,
    };
    let upgrade = req
        .headers()
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case(PROTOCOL));
    if !upgrade {
        return Err(ApiError::new(
            426,
            "upgrade-required",
            format!("/v1/jobs/{id}/exec relays a terminal session: send `Connection: upgrade` and `Upgrade: {PROTOCOL}` (gantry exec and gantry ssh do)"),
        ));
    }
    // A node whose part is still starting (a job just placed: its workdir on the way) is
    // waited for a while, so `gantry ssh` right after a job shows running just works.
    let waited = std::time::Instant::now();
    let entering = loop {
        let asked = api
            .handle
            .call(|reply| ActorRequest::Enter {
                caller: caller.clone(),
                id,
                rank,
                tty,
                argv: argv.clone(),
                reply,
            })
            .await;
        match asked {
            Err(e) if e.code == STARTING && waited.elapsed() < START_WAIT => {
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
            other => break other?,
        }
    };
    let mut child = spawn(entering.command, tty.then_some((rows, cols))).map_err(|e| {
        ApiError::new(
            500,
            "internal",
            format!(
                "job {id}: cannot start the command that enters node {}: {e}",
                entering.node
            ),
        )
    })?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let _seat = seat;
        match on_upgrade.await {
            Ok(io) => relay(hyper_util::rt::TokioIo::new(io), &mut child).await,
            Err(_) => child.hang_up(),
        }
    });
    let mut resp = StatusCode::SWITCHING_PROTOCOLS.into_response();
    resp.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    resp.headers_mut()
        .insert(header::UPGRADE, HeaderValue::from_static(PROTOCOL));
    Ok(resp)
}

/// The command, started: its process (a session and process group of its own) and either
/// its terminal or its pipes.
struct Child {
    process: tokio::process::Child,
    pty: Option<Pty>,
}

impl Child {
    /// As a terminal closing: SIGHUP to the command's session, then SIGKILL to what is left
    /// of its process group after a moment. Only the group this daemon made for it.
    fn hang_up(&mut self) {
        if let Some(pid) = self.process.id() {
            // SAFETY: kill(2) on the process group this daemon created (setsid / setpgid in
            // `spawn`), which lives as long as any of its members.
            unsafe {
                libc::kill(-(pid as i32), libc::SIGHUP);
            }
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_secs(2));
                // SAFETY: as above; ESRCH once the group is gone.
                unsafe {
                    libc::kill(-(pid as i32), libc::SIGKILL);
                }
            });
        }
    }
}

fn spawn(command: std::process::Command, tty: Option<(u16, u16)>) -> std::io::Result<Child> {
    use std::process::Stdio;
    let mut cmd = tokio::process::Command::from(command);
    cmd.kill_on_drop(true);
    match tty {
        Some((rows, cols)) => {
            let (pty, slave) = Pty::open(rows, cols)?;
            cmd.stdin(Stdio::from(slave.try_clone()?))
                .stdout(Stdio::from(slave.try_clone()?))
                .stderr(Stdio::from(slave));
            // SAFETY: only async-signal-safe calls between fork and exec: a new session with
            // the pty as its controlling terminal, as a terminal emulator does.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::setsid() < 0 || libc::ioctl(0, libc::TIOCSCTTY as _, 0) < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let process = cmd.spawn()?;
            Ok(Child {
                process,
                pty: Some(pty),
            })
        }
        None => {
            cmd.stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0);
            Ok(Child {
                process: cmd.spawn()?,
                pty: None,
            })
        }
    }
}

/// Relays frames and the command's input and output until it ends (its status sent) or the
/// client goes (the command hung up).
async fn relay<S>(io: S, child: &mut Child)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut from, mut to) = tokio::io::split(io);
    let (out_tx, mut out_rx) = tokio::sync::mpsc::channel::<Frame>(16);
    let mut readers = tokio::task::JoinSet::new();
    // The client's frames, read whole by a task of their own (a read is not cancel-safe);
    // `None`: the client went, or broke the framing.
    let (in_tx, mut in_rx) = tokio::sync::mpsc::channel::<Option<Frame>>(16);
    readers.spawn(async move {
        loop {
            let f = Frame::read(&mut from).await.ok().flatten();
            let end = f.is_none();
            if in_tx.send(f).await.is_err() || end {
                break;
            }
        }
    });
    // The command's output: a pty's one stream, or stdout and stderr.
    let mut stdin = child.process.stdin.take();
    if let Some(pty) = &child.pty {
        let pty = pty.clone();
        let tx = out_tx.clone();
        readers.spawn(async move {
            let mut buf = vec![0u8; 16 << 10];
            // EIO once the last holder of the terminal's other end has closed it.
            while let Ok(n) = pty.read(&mut buf).await {
                if n == 0 || tx.send(Frame::Stdout(buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        });
    }
    for (pipe, err) in [
        (child.process.stdout.take().map(boxed), false),
        (child.process.stderr.take().map(boxed), true),
    ] {
        let (Some(mut pipe), tx) = (pipe, out_tx.clone()) else {
            continue;
        };
        readers.spawn(async move {
            use tokio::io::AsyncReadExt;
            let mut buf = vec![0u8; 16 << 10];
            while let Ok(n) = pipe.read(&mut buf).await {
                let f = if err { Frame::Stderr } else { Frame::Stdout };
                if n == 0 || tx.send(f(buf[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        });
    }
    drop(out_tx);
    let mut status = None;
    let mut output_done = false;
    loop {
        tokio::select! {
            f = in_rx.recv() => match f.flatten() {
                Some(Frame::Stdin(b)) => {
                    let written = match (&child.pty, stdin.as_mut()) {
                        (Some(pty), _) => pty.write_all(&b).await,
                        (None, Some(s)) => s.write_all(&b).await,
                        (None, None) => Ok(()),
                    };
                    if written.is_err() {
                        stdin = None;
                    }
                }
                Some(Frame::Eof) => stdin = None,
                Some(Frame::Resize(rows, cols)) => {
                    if let Some(pty) = &child.pty {
                        pty.resize(rows, cols);
                    }
                }
                // The client went (or broke the framing): hang up, as a closed terminal does.
                Some(_) | None => {
                    child.hang_up();
                    readers.abort_all();
                    return;
                }
            },
            out = out_rx.recv(), if !output_done => match out {
                Some(f) => {
                    if f.write(&mut to).await.is_err() {
                        child.hang_up();
                        return;
                    }
                }
                None => output_done = true,
            },
            s = child.process.wait(), if status.is_none() => {
                status = Some(s);
                // What is left in the terminal is read for a moment more: a background
                // process that keeps it open does not hold the session.
                if child.pty.is_some() {
                    let tx_done = tokio::time::sleep(std::time::Duration::from_millis(300));
                    tokio::pin!(tx_done);
                    loop {
                        tokio::select! {
                            _ = &mut tx_done => break,
                            out = out_rx.recv() => match out {
                                Some(f) => { let _ = f.write(&mut to).await; }
                                None => break,
                            },
                        }
                    }
                    output_done = true;
                }
            },
        }
        if output_done {
            if let Some(s) = status.take() {
                let last = match s {
                    Ok(s) => Frame::Exit(exit_code(s)),
                    Err(e) => Frame::Error(format!("waiting for the command: {e}")),
                };
                let _ = last.write(&mut to).await;
                let _ = to.shutdown().await;
                child.hang_up();
                readers.abort_all();
                return;
            }
        }
    }
}

fn boxed<R: tokio::io::AsyncRead + Unpin + Send + 'static>(
    r: R,
) -> Box<dyn tokio::io::AsyncRead + Unpin + Send> {
    Box::new(r)
}

/// The shell's convention: the code, or 128 + the signal that ended it.
fn exit_code(s: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    s.code()
        .or_else(|| s.signal().map(|n| 128 + n))
        .unwrap_or(255)
}

/// A pseudo-terminal's master side, non-blocking, read and written through tokio.
#[derive(Clone)]
struct Pty {
    master: std::sync::Arc<tokio::io::unix::AsyncFd<OwnedFd>>,
}

impl Pty {
    /// A new terminal of that size: its master, and the other end for the command.
    fn open(rows: u16, cols: u16) -> std::io::Result<(Pty, OwnedFd)> {
        let mut master = -1;
        let mut slave = -1;
        let size = winsize(rows, cols);
        // SAFETY: openpty writes two descriptors it opened into the ints given.
        let r = unsafe {
            libc::openpty(
                &mut master,
                &mut slave,
                std::ptr::null_mut(),
                std::ptr::null(),
                &size,
            )
        };
        if r != 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: both were just opened by openpty and are owned here alone.
        let (master, slave) =
            unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
        // SAFETY: fcntl on descriptors owned here. Neither is inherited by other processes
        // this daemon starts (the command gets the slave through its stdio, which is dup'd).
        unsafe {
            let fl = libc::fcntl(master.as_raw_fd(), libc::F_GETFL);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK);
            libc::fcntl(master.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(slave.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC);
        }
        // SAFETY: an OwnedFd's descriptor stays open and the same while it is owned.
        let master = unsafe { tokio::io::unix::AsyncFd::register(master) }
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let pty = Pty {
            master: std::sync::Arc::new(master),
        };
        Ok((pty, slave))
    }

    fn resize(&self, rows: u16, cols: u16) {
        let size = winsize(rows, cols);
        // SAFETY: TIOCSWINSZ reads the struct given; the kernel signals the terminal's
        // foreground process group (SIGWINCH).
        unsafe {
            libc::ioctl(self.master.as_raw_fd(), libc::TIOCSWINSZ, &size);
        }
    }

    async fn read(&self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let mut guard = self.master.readable().await?;
            // SAFETY: read(2) into a buffer owned by the caller, of its length.
            match guard.try_io(|fd| {
                let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(r) => return r,
                Err(_would_block) => continue,
            }
        }
    }

    async fn write_all(&self, mut data: &[u8]) -> std::io::Result<()> {
        while !data.is_empty() {
            let mut guard = self.master.writable().await?;
            // SAFETY: write(2) from a slice of its length.
            match guard.try_io(|fd| {
                let n = unsafe { libc::write(fd.as_raw_fd(), data.as_ptr().cast(), data.len()) };
                if n < 0 {
                    Err(std::io::Error::last_os_error())
                } else {
                    Ok(n as usize)
                }
            }) {
                Ok(Ok(n)) => data = &data[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => continue,
            }
        }
        Ok(())
    }
}

fn winsize(rows: u16, cols: u16) -> libc::winsize {
    libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_are_capped_per_caller_and_a_seat_comes_back_when_one_ends() {
        let caller = |key: &str| Caller {
            key: key.to_string(),
            ..Caller::local_operator()
        };
        let (a, b) = (caller("seat-test-a"), caller("seat-test-b"));
        let mut held: Vec<Seat> = (0..SESSIONS_PER_CALLER)
            .map(|_| Seat::take(&a).unwrap())
            .collect();
        let refused = Seat::take(&a).err().unwrap();
        assert_eq!((refused.status, refused.code), (429, "too-many-sessions"));
        // Another caller is not held up by the first one's.
        let other = Seat::take(&b).unwrap();
        held.pop();
        let again = Seat::take(&a).unwrap();
        drop((held, other, again));
        let open = OPEN.lock().unwrap();
        assert!(!open.iter().any(|c| c.contains("seat-test")), "{open:?}");
    }
}
