//! The client's side of `gantry exec` / `gantry ssh`: the upgrade, then this terminal (raw
//! where the session has one) relayed to the daemon as `exec_wire` frames until the command
//! ends. Input is read by a thread that polls standard input, so it stops reading when the
//! session ends (the console takes the keyboard back).

use super::{ClientError, HttpClient};
use crate::exec_wire::{Frame, PROTOCOL};
use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The request that opens a session in node `node` of job `id`: a terminal of `size` (rows,
/// columns) where given, `argv` (a shell when empty).
pub fn exec_path(id: i64, node: usize, size: Option<(u16, u16)>, argv: &[String]) -> String {
    let mut p = format!("/v1/jobs/{id}/exec?node={node}");
    if let Some((rows, cols)) = size {
        p.push_str(&format!("&tty=true&rows={rows}&cols={cols}"));
    }
    if !argv.is_empty() {
        let words = serde_json::to_string(argv).unwrap_or_default();
        p.push_str(&format!("&argv={}", super::encode(&words)));
    }
    p
}

impl HttpClient {
    /// Runs the session `path` opens (`/v1/jobs/ID/exec?…`); the command's exit status.
    /// `tty`: this terminal goes raw and its size follows the window.
    pub fn exec(&mut self, path: &str, tty: bool) -> Result<i32, ClientError> {
        self.build()?;
        let inner = self.inner.as_ref().expect("built above");
        let req = self
            .prepare(&inner.http, "POST", path, "application/octet-stream")?
            .header(reqwest::header::CONNECTION, "upgrade")
            .header(reqwest::header::UPGRADE, PROTOCOL);
        let resp = inner
            .runtime
            .block_on(req.send())
            .map_err(|e| self.transport(&e))?;
        if resp.status() != reqwest::StatusCode::SWITCHING_PROTOCOLS {
            return Err(self.refusal(&inner.runtime, resp));
        }
        let io = inner
            .runtime
            .block_on(resp.upgrade())
            .map_err(|e| self.transport(&e))?;
        let raw = Raw::enter(tty);
        let stop = Arc::new(AtomicBool::new(false));
        let (tx, rx) = tokio::sync::mpsc::channel::<Frame>(16);
        let input = {
            let stop = stop.clone();
            std::thread::spawn(move || read_input(&stop, &tx))
        };
        let ended = inner.runtime.block_on(session(io, rx, tty));
        stop.store(true, Ordering::Relaxed);
        let _ = input.join();
        drop(raw);
        ended.map_err(|why| self.protocol(why))
    }
}

/// Frames both ways until the daemon says how the command ended.
async fn session(
    io: reqwest::Upgraded,
    mut input: tokio::sync::mpsc::Receiver<Frame>,
    tty: bool,
) -> Result<i32, String> {
    let (mut from, mut to) = tokio::io::split(io);
    // The daemon's frames, read whole by a task of their own (a read is not cancel-safe).
    let (frames_tx, mut frames) = tokio::sync::mpsc::channel::<Result<Option<Frame>, String>>(16);
    let reader = tokio::spawn(async move {
        loop {
            let f = Frame::read(&mut from).await.map_err(|e| e.to_string());
            let end = !matches!(f, Ok(Some(_)));
            if frames_tx.send(f).await.is_err() || end {
                break;
            }
        }
    });
    let mut winch = if tty {
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::window_change()).ok()
    } else {
        None
    };
    if tty {
        if let Ok((cols, rows)) = crossterm::terminal::size() {
            let _ = Frame::Resize(rows, cols).write(&mut to).await;
        }
    }
    let mut input_open = true;
    let ended = loop {
        tokio::select! {
            f = frames.recv() => match f {
                Some(Ok(Some(Frame::Stdout(b)))) => {
                    let mut out = std::io::stdout().lock();
                    let _ = out.write_all(&b);
                    let _ = out.flush();
                }
                Some(Ok(Some(Frame::Stderr(b)))) => {
                    let mut err = std::io::stderr().lock();
                    let _ = err.write_all(&b);
                    let _ = err.flush();
                }
                Some(Ok(Some(Frame::Exit(code)))) => break Ok(code),
                Some(Ok(Some(Frame::Error(why)))) => break Err(why),
                Some(Ok(Some(other))) => break Err(format!("the daemon sent {other:?}, a client's frame")),
                Some(Ok(None)) | None => break Err("the daemon closed the session before the command ended".to_string()),
                Some(Err(e)) => break Err(format!("the session broke: {e}")),
            },
            f = input.recv(), if input_open => match f {
                Some(f) => {
                    if f.write(&mut to).await.is_err() {
                        break Err("the session closed while sending input".to_string());
                    }
                }
                None => input_open = false,
            },
            Some(()) = async { match winch.as_mut() { Some(w) => w.recv().await, None => std::future::pending().await } } => {
                if let Ok((cols, rows)) = crossterm::terminal::size() {
                    let _ = Frame::Resize(rows, cols).write(&mut to).await;
                }
            }
        }
    };
    reader.abort();
    ended
}

/// Standard input, as frames, until `stop` or its end (then `Eof`).
fn read_input(stop: &AtomicBool, tx: &tokio::sync::mpsc::Sender<Frame>) {
    let mut buf = vec![0u8; 16 << 10];
    while !stop.load(Ordering::Relaxed) {
        let mut fds = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll(2) on one pollfd owned here, 100 ms at most.
        let ready = unsafe { libc::poll(&mut fds, 1, 100) };
        if ready <= 0 {
            continue;
        }
        // SAFETY: read(2) into a buffer of its length.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        let frame = match n {
            n if n > 0 => Frame::Stdin(buf[..n as usize].to_vec()),
            0 => Frame::Eof,
            _ => match std::io::Error::last_os_error().kind() {
                std::io::ErrorKind::Interrupted | std::io::ErrorKind::WouldBlock => continue,
                _ => Frame::Eof,
            },
        };
        let end = frame == Frame::Eof;
        if tx.blocking_send(frame).is_err() || end {
            return;
        }
    }
}

/// This terminal in raw mode for the session, restored however it ends.
struct Raw(bool);

impl Raw {
    fn enter(tty: bool) -> Raw {
        Raw(tty && crossterm::terminal::enable_raw_mode().is_ok())
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        if self.0 {
            let _ = crossterm::terminal::disable_raw_mode();
        }
    }
}
