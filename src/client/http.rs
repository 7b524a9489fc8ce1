//! The client side of the daemon's API: a small blocking HTTP/1.1 client over the Unix socket
//! or TCP (keep-alive, chunked bodies, server-sent events), the typed calls the CLI makes, and
//! the console's `RemoteClient`, which follows the event stream. It speaks only to gantry's own
//! server, which is why a full HTTP stack (and its TLS) is not pulled in: a remote daemon is
//! reached through an SSH tunnel or a forwarded Unix socket.

use super::{Client, Snapshot, SnapshotDelta};
use serde::de::DeserializeOwned;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the daemon listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// host:port
    Tcp(String),
}

impl Endpoint {
    /// `unix:/path`, `/path/to/gantry.sock`, or `http://host:port`.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let t = text.trim();
        if let Some(rest) = t.strip_prefix("http://") {
            let host = rest.trim_end_matches('/');
            if host.is_empty() || host.contains('/') {
                return Err(format!("--connect {t}: expected http://HOST:PORT"));
            }
            let host = if host.contains(':') {
                host.to_string()
            } else {
                format!("{host}:80")
            };
            return Ok(Endpoint::Tcp(host));
        }
        if t.starts_with("https://") {
            return Err(format!(
                "--connect {t}: gantry's API has no TLS of its own; reach a remote daemon through an SSH tunnel (ssh -L 7450:127.0.0.1:7450 HOST) and connect to http://127.0.0.1:7450"
            ));
        }
        let path = t.strip_prefix("unix:").unwrap_or(t);
        if path.is_empty() {
            return Err("--connect: empty; expected a socket path or http://HOST:PORT".into());
        }
        Ok(Endpoint::Unix(PathBuf::from(path)))
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp(h) => write!(f, "http://{h}"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach the daemon at {endpoint}: {why} (is `gantry daemon` running? `gantry info` shows the default socket)")]
    Unreachable { endpoint: String, why: String },
    #[error("{error}")]
    Api {
        status: u16,
        code: String,
        error: String,
    },
    #[error("daemon at {endpoint}: {why}")]
    Protocol { endpoint: String, why: String },
}

impl ClientError {
    /// The exit code the CLI uses: 2 bad input, 3 not found, 4 not allowed, 5 unreachable,
    /// 6 conflict (the job is not in a state that allows it), 1 anything else.
    pub fn exit_code(&self) -> u8 {
        match self {
            ClientError::Unreachable { .. } => 5,
            ClientError::Api { status, .. } => match status {
                400 | 413 | 422 => 2,
                404 => 3,
                401 | 403 => 4,
                409 => 6,
                _ => 1,
            },
            ClientError::Protocol { .. } => 1,
        }
    }
}

enum Stream {
    Unix(UnixStream),
    Tcp(std::net::TcpStream),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.read(buf),
            Stream::Tcp(s) => s.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Unix(s) => s.write(buf),
            Stream::Tcp(s) => s.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Unix(s) => s.flush(),
            Stream::Tcp(s) => s.flush(),
        }
    }
}

/// One response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// A blocking HTTP/1.1 connection to the daemon, reused across requests.
pub struct HttpClient {
    pub endpoint: Endpoint,
    token: Option<String>,
    conn: Option<BufReader<Stream>>,
    /// Read timeout for ordinary requests (not for event streams).
    pub timeout: Duration,
}

impl HttpClient {
    pub fn new(endpoint: Endpoint, token: Option<String>) -> HttpClient {
        HttpClient {
            endpoint,
            token,
            conn: None,
            timeout: Duration::from_secs(30),
        }
    }

    fn unreachable(&self, why: impl ToString) -> ClientError {
        ClientError::Unreachable {
            endpoint: self.endpoint.to_string(),
            why: why.to_string(),
        }
    }

    fn protocol(&self, why: impl ToString) -> ClientError {
        ClientError::Protocol {
            endpoint: self.endpoint.to_string(),
            why: why.to_string(),
        }
    }

    fn connect(&self, timeout: Option<Duration>) -> Result<BufReader<Stream>, ClientError> {
        let stream = match &self.endpoint {
            Endpoint::Unix(p) => {
                let s = UnixStream::connect(p).map_err(|e| self.unreachable(e))?;
                s.set_read_timeout(timeout)
                    .map_err(|e| self.unreachable(e))?;
                Stream::Unix(s)
            }
            Endpoint::Tcp(h) => {
                let s = std::net::TcpStream::connect(h).map_err(|e| self.unreachable(e))?;
                s.set_read_timeout(timeout)
                    .map_err(|e| self.unreachable(e))?;
                let _ = s.set_nodelay(true);
                Stream::Tcp(s)
            }
        };
        Ok(BufReader::new(stream))
    }

    fn head(
        &self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        accept: &str,
        extra: &[(&str, &str)],
    ) -> Vec<u8> {
        let host = match &self.endpoint {
            Endpoint::Unix(_) => "localhost",
            Endpoint::Tcp(h) => h,
        };
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nAccept: {accept}\r\n");
        if let Some(t) = &self.token {
            head.push_str(&format!("Authorization: Bearer {t}\r\n"));
        }
        if let Some(b) = body {
            head.push_str(&format!("Content-Length: {}\r\n", b.len()));
        }
        for (k, v) in extra {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        if let Some(b) = body {
            bytes.extend_from_slice(b);
        }
        bytes
    }

    /// Sends one request and reads the whole response. A kept-alive connection the server
    /// has closed meanwhile is replaced once, transparently.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Response, ClientError> {
        self.request_with(method, path, body, &[])
    }

    /// `request` with extra headers. A request that is safe to repeat — a GET, or one that
    /// carries an `Idempotency-Key` — is sent once more when its answer is lost.
    pub fn request_with(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        extra: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        let bytes = self.head(method, path, body, "application/json", extra);
        let repeatable = method == "GET"
            || extra
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"));
        for attempt in 0..2 {
            let reused = self.conn.is_some();
            let mut conn = match self.conn.take() {
                Some(c) => c,
                None => self.connect(Some(self.timeout))?,
            };
            let answer = match conn.get_mut().write_all(&bytes) {
                Ok(()) => read_response(&mut conn),
                // The server may answer before reading everything (a body over its limit) and
                // close: its answer is still there to read.
                Err(e) => match read_response(&mut conn) {
                    Ok((resp, _)) => Ok((resp, false)),
                    Err(_) => Err((true, e.to_string())),
                },
            };
            match answer {
                Ok((resp, keep)) => {
                    if keep {
                        self.conn = Some(conn);
                    }
                    return Ok(resp);
                }
                Err((retryable, _)) if attempt == 0 && (repeatable || (reused && retryable)) => {
                    continue;
                }
                Err((_, why)) => return Err(self.protocol(why)),
            }
        }
        Err(self.protocol("no response"))
    }

    /// A request whose 2xx body is JSON `T`; other statuses become `ClientError::Api`.
    pub fn call<T: DeserializeOwned>(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<T, ClientError> {
        self.call_with(method, path, body, &[])
    }

    /// `call` with extra headers (see `request_with`).
    pub fn call_with<T: DeserializeOwned>(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        extra: &[(&str, &str)],
    ) -> Result<T, ClientError> {
        let r = self.request_with(method, path, body, extra)?;
        if !(200..300).contains(&r.status) {
            return Err(api_error(r.status, &r.body));
        }
        serde_json::from_slice(&r.body)
            .map_err(|e| self.protocol(format!("bad JSON from the daemon: {e}")))
    }

    /// Follows a server-sent-event stream, calling `on_event(event, data)` until it returns
    /// false or the stream ends.
    pub fn follow(
        &mut self,
        path: &str,
        mut on_event: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), ClientError> {
        let mut conn = self.connect(None)?;
        let bytes = self.head("GET", path, None, "text/event-stream", &[]);
        conn.get_mut()
            .write_all(&bytes)
            .map_err(|e| self.unreachable(e))?;
        let (status, headers) = read_head(&mut conn).map_err(|(_, why)| self.protocol(why))?;
        if status != 200 {
            let body = read_body(&mut conn, &headers).map_err(|(_, why)| self.protocol(why))?;
            return Err(api_error(status, &body));
        }
        let reader: Box<dyn BufRead> = if headers.chunked {
            Box::new(BufReader::new(Chunked {
                inner: conn,
                left: 0,
                done: false,
            }))
        } else {
            Box::new(conn)
        };
        let (mut event, mut data) = (String::new(), String::new());
        for line in reader.lines() {
            let line = line.map_err(|e| self.protocol(e))?;
            if line.is_empty() {
                if !data.is_empty() && !on_event(&event, &data) {
                    return Ok(());
                }
                event.clear();
                data.clear();
            } else if let Some(e) = line.strip_prefix("event:") {
                event = e.trim().to_string();
            } else if let Some(d) = line.strip_prefix("data:") {
                if !data.is_empty() {
                    data.push('\n');
                }
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
            }
        }
        Ok(())
    }
}

fn api_error(status: u16, body: &[u8]) -> ClientError {
    #[derive(serde::Deserialize)]
    struct E {
        code: String,
        error: String,
    }
    match serde_json::from_slice::<E>(body) {
        Ok(e) => ClientError::Api {
            status,
            code: e.code,
            error: e.error,
        },
        Err(_) => ClientError::Api {
            status,
            code: "http".into(),
            error: format!("HTTP {status}: {}", String::from_utf8_lossy(body).trim()),
        },
    }
}

struct Head {
    length: Option<usize>,
    chunked: bool,
    close: bool,
}

/// (retryable, why)
type ReadError = (bool, String);

/// The most a response body may hold: a client never allocates what a server merely claims.
pub const MAX_RESPONSE_BYTES: u64 = 256 << 20;
/// The most one header line, and the number of header lines, a response may have.
const MAX_HEADER_LINE: u64 = 16 << 10;
const MAX_HEADERS: usize = 200;

/// One line of a response head, at most `MAX_HEADER_LINE` bytes.
fn head_line(r: &mut impl BufRead, line: &mut String) -> io::Result<usize> {
    line.clear();
    let n = r.take(MAX_HEADER_LINE).read_line(line)?;
    if n as u64 == MAX_HEADER_LINE && !line.ends_with('\n') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a response header line over {MAX_HEADER_LINE} bytes"),
        ));
    }
    Ok(n)
}

fn read_head(r: &mut impl BufRead) -> Result<(u16, Head), ReadError> {
    let mut line = String::new();
    let n = head_line(r, &mut line).map_err(|e| (true, e.to_string()))?;
    if n == 0 {
        return Err((true, "connection closed before a response".into()));
    }
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or((false, format!("not an HTTP response: {}", line.trim())))?;
    let mut head = Head {
        length: None,
        chunked: false,
        close: false,
    };
    for seen in 0.. {
        if seen > MAX_HEADERS {
            return Err((false, format!("a response with over {MAX_HEADERS} headers")));
        }
        if head_line(r, &mut line).map_err(|e| (false, e.to_string()))? == 0 {
            return Err((false, "connection closed inside the response head".into()));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        let Some((k, v)) = l.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_ascii_lowercase());
        match k.as_str() {
            "content-length" => head.length = v.parse().ok(),
            "transfer-encoding" => head.chunked = v.contains("chunked"),
            "connection" => head.close = v == "close",
            _ => {}
        }
    }
    Ok((status, head))
}

/// The body, grown as it arrives and never past `MAX_RESPONSE_BYTES`, whatever the server's
/// Content-Length says.
fn read_body(r: &mut BufReader<Stream>, head: &Head) -> Result<Vec<u8>, ReadError> {
    let too_big = |n: String| {
        (
            false,
            format!("a response of {n} bytes, over the client's limit of {MAX_RESPONSE_BYTES}"),
        )
    };
    let mut body = Vec::new();
    let read = if let Some(n) = head.length {
        if n as u64 > MAX_RESPONSE_BYTES {
            return Err(too_big(n.to_string()));
        }
        let got = r
            .take(n as u64)
            .read_to_end(&mut body)
            .map_err(|e| (false, e.to_string()))?;
        if got < n {
            return Err((
                false,
                format!("the response ended after {got} of its {n} bytes"),
            ));
        }
        got
    } else if head.chunked {
        let c = Chunked {
            inner: r,
            left: 0,
            done: false,
        };
        c.take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| (false, e.to_string()))?
    } else {
        r.take(MAX_RESPONSE_BYTES + 1)
            .read_to_end(&mut body)
            .map_err(|e| (false, e.to_string()))?
    };
    if read as u64 > MAX_RESPONSE_BYTES {
        return Err(too_big("more".to_string()));
    }
    Ok(body)
}

/// A fresh random Idempotency-Key (128 bits, hex), so a retried submission is never a
/// second job.
pub fn new_idempotency_key() -> Result<String, ClientError> {
    crate::daemon::auth::random_hex(16).map_err(|e| ClientError::Protocol {
        endpoint: "local".into(),
        why: format!("cannot read /dev/urandom for an Idempotency-Key: {e}"),
    })
}

/// (response, whether the connection may be reused)
fn read_response(r: &mut BufReader<Stream>) -> Result<(Response, bool), ReadError> {
    let (status, head) = read_head(r)?;
    let body = read_body(r, &head)?;
    let keep = !head.close && (head.length.is_some() || head.chunked);
    Ok((Response { status, body }, keep))
}

/// A chunked transfer-encoded body as a plain reader.
struct Chunked<R: BufRead> {
    inner: R,
    left: usize,
    done: bool,
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let mut line = String::new();
            if self.inner.read_line(&mut line)? == 0 {
                self.done = true;
                return Ok(0);
            }
            let size = line.trim().split(';').next().unwrap_or("");
            self.left = usize::from_str_radix(size, 16).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("bad chunk size `{}`", line.trim()),
                )
            })?;
            if self.left == 0 {
                // Trailer section: read up to the blank line.
                loop {
                    line.clear();
                    if self.inner.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf.len().min(self.left);
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        self.left -= n;
        if self.left == 0 {
            let mut crlf = [0u8; 2];
            self.inner.read_exact(&mut crlf)?;
        }
        Ok(n)
    }
}

/// Encodes a query-string value.
pub fn encode(v: &str) -> String {
    serde_urlencoded::to_string([("v", v)])
        .map(|s| s[2..].to_string())
        .unwrap_or_default()
}

/// The console's view of a remote daemon: a thread follows `/v1/events/stream` (a snapshot,
/// then deltas) and reconnects when the stream breaks, saying so in the event list.
pub struct RemoteClient {
    shared: Arc<Mutex<(Snapshot, bool)>>,
    snapshot: Snapshot,
    access: super::Access,
    /// For changes (requests of their own; the stream has its connection).
    http: HttpClient,
}

impl RemoteClient {
    /// Connects once (so a wrong address fails now, with its reason), then follows.
    pub fn connect(endpoint: Endpoint, token: Option<String>) -> Result<RemoteClient, ClientError> {
        let mut http = HttpClient::new(endpoint.clone(), token.clone());
        let first: Snapshot = http.call("GET", "/v1/snapshot", None)?;
        let access: super::Access = http.call("GET", "/v1/whoami", None)?;
        let shared = Arc::new(Mutex::new((first.clone(), false)));
        let mine = shared.clone();
        std::thread::Builder::new()
            .name("gantry-follow".into())
            .spawn(move || loop {
                let mut c = HttpClient::new(endpoint.clone(), token.clone());
                let result = c.follow("/v1/events/stream", |event, data| {
                    let Ok(mut guard) = mine.lock() else {
                        return false;
                    };
                    match event {
                        "snapshot" => {
                            if let Ok(s) = serde_json::from_str::<Snapshot>(data) {
                                guard.0 = s;
                                guard.1 = true;
                            }
                        }
                        "delta" => {
                            if let Ok(d) = serde_json::from_str::<SnapshotDelta>(data) {
                                guard.0.apply(d);
                                guard.1 = true;
                            }
                        }
                        _ => {}
                    }
                    true
                });
                if let Ok(mut guard) = mine.lock() {
                    let why = match result {
                        Ok(()) => "the daemon closed the stream".to_string(),
                        Err(e) => e.to_string(),
                    };
                    guard
                        .0
                        .events
                        .insert(0, format!("connection lost: {why}; retrying every 2 s"));
                    guard.1 = true;
                }
                std::thread::sleep(Duration::from_secs(2));
            })
            .map_err(|e| ClientError::Protocol {
                endpoint: String::new(),
                why: e.to_string(),
            })?;
        Ok(RemoteClient {
            shared,
            snapshot: first,
            access,
            http,
        })
    }
}

impl Client for RemoteClient {
    fn access(&self) -> super::Access {
        self.access.clone()
    }
    fn act(&mut self, req: super::JobRequest) -> Result<String, String> {
        let path = format!("/v1/jobs/{}/{}", req.id, req.action.name());
        self.http
            .call::<serde_json::Value>("POST", &path, None)
            .map(|_| format!("job {}: {} done", req.id, req.action.name()))
            .map_err(|e| e.to_string())
    }
    fn logs(
        &mut self,
        id: i64,
        node: Option<usize>,
        tail: usize,
    ) -> Result<super::LogsView, String> {
        let node = node.map_or(String::new(), |k| format!("&node={k}"));
        self.http
            .call(
                "GET",
                &format!("/v1/jobs/{id}/logs?tail={tail}{node}&partial=true"),
                None,
            )
            .map_err(|e| e.to_string())
    }
    fn pool(&mut self, index: usize) -> Result<super::PoolDetail, String> {
        self.http
            .call("GET", &format!("/v1/pools/{index}"), None)
            .map_err(|e| e.to_string())
    }
    fn submit(&mut self, spec: &str) -> Result<i64, String> {
        #[derive(serde::Deserialize)]
        struct Submitted {
            id: i64,
        }
        let key = new_idempotency_key().map_err(|e| e.to_string())?;
        self.http
            .call_with::<Submitted>(
                "POST",
                "/v1/jobs?file=form",
                Some(spec.as_bytes()),
                &[("Idempotency-Key", &key)],
            )
            .map(|s| s.id)
            .map_err(|e| e.to_string())
    }
    fn preview(&mut self, spec: &str) -> Result<crate::daemon::engine::Preview, String> {
        self.http
            .call("POST", "/v1/preview?file=form", Some(spec.as_bytes()))
            .map_err(|e| e.to_string())
    }
    fn job(&mut self, id: i64) -> Result<super::JobView, String> {
        self.http
            .call("GET", &format!("/v1/jobs/{id}"), None)
            .map_err(|e| e.to_string())
    }
    fn set_priority(&mut self, id: i64, class: &str) -> Result<String, String> {
        let body = serde_json::json!({ "class": class }).to_string();
        self.http
            .call::<serde_json::Value>(
                "PUT",
                &format!("/v1/jobs/{id}/priority"),
                Some(body.as_bytes()),
            )
            .map(|_| format!("job {id}: now {class}"))
            .map_err(|e| e.to_string())
    }
    fn reclaim(
        &mut self,
        apply: Option<&str>,
    ) -> Result<crate::scheduler::reclaim::ReclaimPlan, String> {
        match apply {
            None => self.http.call("GET", "/v1/reclaim", None),
            Some(id) => {
                let body = serde_json::json!({ "plan": id }).to_string();
                self.http.call("POST", "/v1/reclaim", Some(body.as_bytes()))
            }
        }
        .map_err(|e| e.to_string())
    }
    fn poll(&mut self) -> bool {
        let Ok(mut guard) = self.shared.lock() else {
            return false;
        };
        if !guard.1 {
            return false;
        }
        guard.1 = false;
        self.snapshot = guard.0.clone();
        true
    }
    fn snapshot(&self) -> &Snapshot {
        &self.snapshot
    }
    fn until_next(&self) -> Duration {
        Duration::from_millis(200)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse_and_https_is_refused_with_the_way_out() {
        assert_eq!(
            Endpoint::parse("/run/g.sock").unwrap(),
            Endpoint::Unix("/run/g.sock".into())
        );
        assert_eq!(
            Endpoint::parse("unix:/x").unwrap(),
            Endpoint::Unix("/x".into())
        );
        assert_eq!(
            Endpoint::parse("http://127.0.0.1:7450/").unwrap(),
            Endpoint::Tcp("127.0.0.1:7450".into())
        );
        assert!(Endpoint::parse("https://x")
            .unwrap_err()
            .contains("SSH tunnel"));
        assert!(Endpoint::parse("").is_err());
    }

    #[test]
    fn chunked_bodies_decode() {
        let raw = b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
        let mut c = Chunked {
            inner: &raw[..],
            left: 0,
            done: false,
        };
        let mut out = String::new();
        c.read_to_string(&mut out).unwrap();
        assert_eq!(out, "hello world");
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("a b&c"), "a+b%26c");
    }
}
