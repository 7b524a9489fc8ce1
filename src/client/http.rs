//! The client side of the daemon's API, on reqwest: the Unix socket, `http://` and `https://`
//! (rustls: a daemon's own certificate pinned by its fingerprint, a CA's verified by the
//! system's roots), responses bounded whatever a server claims, retries only of what is safe
//! to repeat, and the event stream's server-sent events (parsed by sse-stream). The calls
//! block, for the CLI and the console: each client drives its requests on a runtime of its
//! own on the caller's thread.

pub use super::remote::RemoteClient;

mod exec;
pub use exec::exec_path;
use futures_util::StreamExt;
use serde::de::DeserializeOwned;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Where the daemon listens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    Unix(PathBuf),
    /// host:port, plain HTTP.
    Tcp(String),
    /// host:port over TLS; `pin`: the SHA-256 of the one certificate trusted (else the
    /// system's roots verify it).
    Https {
        addr: String,
        pin: Option<[u8; 32]>,
    },
}

impl Endpoint {
    /// `unix:/path`, `/path/to/gantry.sock`, `http://host:port` or `https://host:port`.
    pub fn parse(text: &str) -> Result<Endpoint, String> {
        let t = text.trim();
        let https = t.starts_with("https://");
        if let Some(rest) = t
            .strip_prefix("http://")
            .or_else(|| t.strip_prefix("https://"))
        {
            let scheme = if https { "https://" } else { "http://" };
            let host = rest.trim_end_matches('/');
            if host.is_empty() || host.contains('/') {
                return Err(format!("--connect {t}: expected {scheme}HOST:PORT"));
            }
            let addr = match host_and_port(host) {
                (_, Some(_)) => host.to_string(),
                (_, None) => format!("{host}:{}", if https { 443 } else { 80 }),
            };
            return Ok(if https {
                Endpoint::Https { addr, pin: None }
            } else {
                Endpoint::Tcp(addr)
            });
        }
        if t.contains("://") {
            return Err(format!(
                "--connect {t}: expected a socket path, unix:PATH, http://HOST:PORT or https://HOST:PORT"
            ));
        }
        let path = t.strip_prefix("unix:").unwrap_or(t);
        if path.is_empty() {
            return Err("--connect: empty; expected a socket path or http(s)://HOST:PORT".into());
        }
        Ok(Endpoint::Unix(PathBuf::from(path)))
    }

    /// Pins the certificate of an `https://` daemon (`--tls-fingerprint`).
    pub fn pinned(self, fingerprint: Option<&str>) -> Result<Endpoint, String> {
        let Some(fp) = fingerprint.filter(|f| !f.trim().is_empty()) else {
            return Ok(self);
        };
        match self {
            Endpoint::Https { addr, .. } => Ok(Endpoint::Https {
                addr,
                pin: Some(crate::tls::parse_fingerprint(fp)?),
            }),
            other => Err(format!(
                "--tls-fingerprint: {other} is not an https:// address; a pin applies to a daemon serving TLS (gantry daemon --listen ADDR --tls)"
            )),
        }
    }

    /// What to tell a user who sends a token in the clear over a network: `http://` to an
    /// address that is not this machine's.
    pub fn cleartext_warning(&self) -> Option<String> {
        let Endpoint::Tcp(addr) = self else {
            return None;
        };
        let (host, _) = host_and_port(addr);
        let local = host == "localhost"
            || host
                .trim_matches(['[', ']'])
                .parse::<IpAddr>()
                .is_ok_and(|ip| ip.is_loopback());
        (!local).then(|| {
            format!(
                "warning: http://{addr} carries your token and jobs unencrypted; serve TLS (gantry daemon --listen ADDR --tls) and connect to https://{addr} with --tls-fingerprint, or reach it through an SSH tunnel"
            )
        })
    }

    /// The URL requests go to (a Unix socket's requests name localhost).
    fn base(&self) -> String {
        match self {
            Endpoint::Unix(_) => "http://localhost".to_string(),
            Endpoint::Tcp(addr) => format!("http://{addr}"),
            Endpoint::Https { addr, .. } => format!("https://{addr}"),
        }
    }
}

/// Why a Unix socket could not be reached, in words that say what to do: the socket's own
/// error (`why`) is often misleading — a directory answers "Connection refused", an
/// `HOST:PORT` given without `http://` is "No such file", and another user's socket is
/// "Permission denied" while its daemon runs.
fn unix_hint(path: &std::path::Path, why: String) -> String {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let shown = path.display();
    if why.contains("ermission denied") {
        // SAFETY: getuid has no preconditions.
        let me = unsafe { libc::getuid() };
        let owner = std::fs::metadata(path)
            .map(|m| format!("user {}'s (mode {:o})", m.uid(), m.mode() & 0o777))
            .unwrap_or_else(|_| "in a directory you cannot enter".to_string());
        return format!(
            "{why}: the socket at {shown} is {owner} and you are user {me}; a daemon's Unix socket is its own user's only (the daemon may well be running) — run as that user, or ask its operator for a token and connect over TCP (--connect https://HOST:PORT --token …)"
        );
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_dir() => format!(
            "{shown} is a directory, not the daemon's socket; name the socket file in it (`gantry info` shows where the daemon's socket is)"
        ),
        Ok(m) if !m.file_type().is_socket() => format!(
            "{shown} is a file, not a socket; `gantry info` shows where the daemon's socket is"
        ),
        Err(_) if host_and_port(&path.to_string_lossy()).1.is_some_and(|p| {
            !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit())
        }) => format!(
            "no socket at {shown}; for a daemon listening on TCP say --connect http://{shown} (or https:// when it serves TLS)"
        ),
        _ => why,
    }
}

/// `host:port` → (host, port); a bracketed IPv6 host keeps its brackets.
fn host_and_port(addr: &str) -> (&str, Option<&str>) {
    if let Some(end) = addr.strip_prefix('[').and_then(|r| r.find(']')) {
        let (host, rest) = addr.split_at(end + 2);
        return (host, rest.strip_prefix(':'));
    }
    match addr.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') => (h, Some(p)),
        _ => (addr, None),
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
            Endpoint::Tcp(h) => write!(f, "http://{h}"),
            Endpoint::Https { addr, .. } => write!(f, "https://{addr}"),
        }
    }
}

pub use crate::api::ClientError;

/// One response.
#[derive(Clone, Debug)]
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

/// The most a response body (or one event of a stream) may hold: a client never allocates
/// what a server merely claims.
pub const MAX_RESPONSE_BYTES: u64 = 256 << 20;

/// How long a kept-alive connection may sit idle and still be reused: well under the
/// shortest header-read timeout the daemon takes (`--request-timeout`, at least 100 ms is
/// allowed, but the retry covers what this does not).
const IDLE_REUSE: Duration = Duration::from_secs(2);

/// A client of one daemon. Connections are kept alive and reused across requests.
pub struct HttpClient {
    pub endpoint: Endpoint,
    token: Option<String>,
    /// How long an ordinary request may take, answer included (not event streams).
    pub timeout: Duration,
    /// Built on the first request, so that making a client cannot fail.
    inner: Option<Inner>,
}

struct Inner {
    http: reqwest::Client,
    runtime: tokio::runtime::Runtime,
}

/// Why a request got no answer.
enum Failed {
    /// The connection failed or broke: the request may be sent again if that is safe.
    Transport(reqwest::Error),
    /// The answer was there but unacceptable (too large): sending again would not help.
    Answer(String),
}

impl HttpClient {
    pub fn new(endpoint: Endpoint, token: Option<String>) -> HttpClient {
        HttpClient {
            endpoint,
            token,
            timeout: Duration::from_secs(30),
            inner: None,
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

    /// A transport error in the words of its innermost cause (reqwest's outer ones say only
    /// "error sending request"): unreachable when no connection was made.
    fn transport(&self, e: &reqwest::Error) -> ClientError {
        if let Some(tls) = crate::errors::cause::<rustls::Error>(e) {
            use rustls::CertificateError as Cert;
            let why = match tls {
                // A pinned certificate that is not the pin: the verifier's own words (rustls
                // shows an `Other` error only in its Debug form).
                rustls::Error::InvalidCertificate(Cert::Other(other)) => other.0.to_string(),
                rustls::Error::InvalidCertificate(Cert::UnknownIssuer | Cert::BadSignature) => format!(
                    "{tls} — no CA this machine trusts signed its certificate; if it is the one the daemon made itself, pin it with --tls-fingerprint (gantry token create and the daemon's start line print it)"
                ),
                _ => tls.to_string(),
            };
            return ClientError::Untrusted {
                endpoint: self.endpoint.to_string(),
                why,
            };
        }
        let why = crate::errors::root_cause(e);
        if e.is_connect() {
            match &self.endpoint {
                Endpoint::Unix(path) => self.unreachable(unix_hint(path, why)),
                _ => self.unreachable(why),
            }
        } else if e.is_timeout() {
            self.protocol(format!(
                "no answer within {} s ({why})",
                self.timeout.as_secs()
            ))
        } else {
            self.protocol(why)
        }
    }

    /// Builds the client and its runtime on first use.
    fn build(&mut self) -> Result<(), ClientError> {
        if self.inner.is_none() {
            crate::tls::install_provider();
            let mut b = reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(10))
                // The daemon is reached directly (or through an SSH tunnel), never through
                // the environment's HTTP proxy.
                .no_proxy()
                .http1_only()
                // Between calls this client's runtime does not run, so it cannot see the
                // daemon close an idle connection (its header-read timeout, 10 s by default):
                // one idle longer than this is not reused.
                .pool_idle_timeout(IDLE_REUSE);
            match &self.endpoint {
                // No TLS on a socket or plain HTTP: the system's roots are not read (they were
                // about an eighth of a CLI call's time: `gantry bench cli`).
                Endpoint::Unix(path) => b = b.unix_socket(path.clone()).tls_certs_only([]),
                Endpoint::Tcp(_) => b = b.tls_certs_only([]),
                Endpoint::Https { pin: Some(pin), .. } => {
                    let mut tls =
                        crate::tls::pinned_client_config(*pin).map_err(|e| self.protocol(e))?;
                    tls.alpn_protocols = vec![b"http/1.1".to_vec()];
                    b = b.tls_backend_preconfigured(tls);
                }
                Endpoint::Https { pin: None, .. } => {}
            }
            let http = b
                .build()
                .map_err(|e| self.protocol(crate::errors::root_cause(&e)))?;
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| self.protocol(format!("cannot start the client's runtime: {e}")))?;
            self.inner = Some(Inner { http, runtime });
        }
        Ok(())
    }

    fn prepare(
        &self,
        http: &reqwest::Client,
        method: &str,
        path: &str,
        accept: &str,
    ) -> Result<reqwest::RequestBuilder, ClientError> {
        let method = reqwest::Method::from_bytes(method.as_bytes())
            .map_err(|_| self.protocol(format!("bad method {method}")))?;
        let mut req = http
            .request(method, format!("{}{path}", self.endpoint.base()))
            .header(reqwest::header::ACCEPT, accept);
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        Ok(req)
    }

    /// Sends one request and reads the whole response.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
    ) -> Result<Response, ClientError> {
        self.request_with(method, path, body, &[])
    }

    /// `request` with extra headers. Sent once more when its answer is lost: a GET is safe to
    /// repeat, and every other request carries an `Idempotency-Key` (the caller's, or one made
    /// here) whose first answer the daemon keeps.
    pub fn request_with(
        &mut self,
        method: &str,
        path: &str,
        body: Option<&[u8]>,
        extra: &[(&str, &str)],
    ) -> Result<Response, ClientError> {
        // The daemon reads no more than this and then closes: a client still writing would
        // see its write cut before it could read the answer, so the limit is said here.
        let max = crate::api::MAX_BODY;
        if let Some(b) = body.filter(|b| b.len() > max) {
            return Err(ClientError::Api {
                status: 413,
                code: "too-large".into(),
                error: format!(
                    "request body of {} bytes, over the daemon's limit of {max} (a job spec is a few KiB)",
                    b.len()
                ),
                field: None,
            });
        }
        // Every change carries an Idempotency-Key (the daemon keeps its first answer), so every
        // request may be sent once more when its connection breaks: a connection the daemon
        // closed while this client sat idle costs a retry, never a lost action (issue 41).
        let own_key = match extra
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("idempotency-key"))
        {
            true => None,
            false if method == "GET" => None,
            false => Some(new_idempotency_key()?),
        };
        let timeout = self.timeout;
        self.build()?;
        let inner = self.inner.as_ref().expect("built above");
        let mut last = None;
        for _attempt in 0..2 {
            let mut req = self
                .prepare(&inner.http, method, path, "application/json")?
                .timeout(timeout);
            for (k, v) in extra {
                req = req.header(*k, *v);
            }
            if let Some(key) = &own_key {
                req = req.header("idempotency-key", key);
            }
            if let Some(b) = body {
                req = req.body(b.to_vec());
            }
            match inner.runtime.block_on(answer(req)) {
                Ok(r) => return Ok(r),
                Err(Failed::Answer(why)) => return Err(self.protocol(why)),
                Err(Failed::Transport(e)) => last = Some(e),
            }
        }
        Err(match last {
            Some(e) => self.transport(&e),
            None => self.protocol("no response"),
        })
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

    /// Sends a job's packed workdir (`gantry::workdir::pack`); the daemon's answer. Not held to
    /// the JSON body limit, and given ten minutes: a workdir may be large and the link slow.
    pub fn upload_workdir(
        &mut self,
        packed: Vec<u8>,
    ) -> Result<crate::api::KeptWorkdir, ClientError> {
        self.build()?;
        let inner = self.inner.as_ref().expect("built above");
        let req = self
            .prepare(&inner.http, "POST", "/v1/workdirs", "application/json")?
            .header(reqwest::header::CONTENT_TYPE, "application/gzip")
            .timeout(Duration::from_secs(600))
            .body(packed);
        let r = match inner.runtime.block_on(answer(req)) {
            Ok(r) => r,
            Err(Failed::Answer(why)) => return Err(self.protocol(why)),
            Err(Failed::Transport(e)) => return Err(self.transport(&e)),
        };
        if !(200..300).contains(&r.status) {
            return Err(api_error(r.status, &r.body));
        }
        serde_json::from_slice(&r.body)
            .map_err(|e| self.protocol(format!("bad JSON from the daemon: {e}")))
    }

    /// What a response other than the one expected says (its body read, bounded).
    fn refusal(&self, runtime: &tokio::runtime::Runtime, resp: reqwest::Response) -> ClientError {
        let status = resp.status().as_u16();
        match runtime.block_on(read_body(resp)) {
            Ok(body) => api_error(status, &body),
            Err(Failed::Transport(e)) => self.transport(&e),
            Err(Failed::Answer(why)) => self.protocol(why),
        }
    }

    /// Follows a server-sent-event stream, calling `on_event(event, data)` until it returns
    /// false or the stream ends.
    pub fn follow(
        &mut self,
        path: &str,
        mut on_event: impl FnMut(&str, &str) -> bool,
    ) -> Result<(), ClientError> {
        self.build()?;
        let inner = self.inner.as_ref().expect("built above");
        let req = self.prepare(&inner.http, "GET", path, "text/event-stream")?;
        let resp = inner
            .runtime
            .block_on(req.send())
            .map_err(|e| self.transport(&e))?;
        if resp.status() != reqwest::StatusCode::OK {
            return Err(self.refusal(&inner.runtime, resp));
        }
        let mut events = Box::pin(sse_stream::SseStream::from_bytes_stream(bounded_events(
            resp,
        )));
        // Each event is awaited on its own, and `on_event` runs outside the runtime: it may
        // make requests of its own (with another client) while the stream waits.
        while let Some(event) = inner.runtime.block_on(events.next()) {
            let event = event.map_err(|e| self.protocol(e))?;
            let data = event.data.unwrap_or_default();
            if !data.is_empty() && !on_event(event.event.as_deref().unwrap_or(""), &data) {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Sends `req` and reads its whole answer.
async fn answer(req: reqwest::RequestBuilder) -> Result<Response, Failed> {
    let resp = req.send().await.map_err(Failed::Transport)?;
    let status = resp.status().as_u16();
    Ok(Response {
        status,
        body: read_body(resp).await?,
    })
}

/// The body, grown as it arrives and never past `MAX_RESPONSE_BYTES`, whatever the server's
/// Content-Length says.
async fn read_body(mut resp: reqwest::Response) -> Result<Vec<u8>, Failed> {
    let too_big = |n: String| {
        Failed::Answer(format!(
            "a response of {n} bytes, over the client's limit of {MAX_RESPONSE_BYTES}"
        ))
    };
    if let Some(n) = resp.content_length().filter(|n| *n > MAX_RESPONSE_BYTES) {
        return Err(too_big(n.to_string()));
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(Failed::Transport)? {
        if (body.len() + chunk.len()) as u64 > MAX_RESPONSE_BYTES {
            return Err(too_big("more".to_string()));
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The stream's bytes, cut with an error once one event (the bytes since the last blank line)
/// grows past `MAX_RESPONSE_BYTES`: a server cannot make the client hold an endless line.
fn bounded_events(
    resp: reqwest::Response,
) -> impl futures_util::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let state = (Some(resp), EventBound::new(MAX_RESPONSE_BYTES));
    futures_util::stream::unfold(state, |(resp, mut bound)| async move {
        let mut resp = resp?;
        let item = match resp.chunk().await {
            Ok(Some(chunk)) if bound.take(&chunk) => Ok(chunk),
            Ok(Some(_)) => Err(std::io::Error::other(format!(
                "an event over the client's limit of {MAX_RESPONSE_BYTES} bytes"
            ))),
            Ok(None) => return None,
            Err(e) => Err(std::io::Error::other(crate::errors::root_cause(&e))),
        };
        let next = item.is_ok().then_some(resp);
        Some((item, (next, bound)))
    })
}

/// Bytes since the last blank line of an event stream.
struct EventBound {
    since: u64,
    newline: bool,
    limit: u64,
}

impl EventBound {
    fn new(limit: u64) -> EventBound {
        EventBound {
            since: 0,
            newline: false,
            limit,
        }
    }

    /// Counts `chunk`; false once an event is over the limit.
    fn take(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            match b {
                b'\r' => continue,
                b'\n' if self.newline => self.since = 0,
                _ => self.since += 1,
            }
            self.newline = b == b'\n';
        }
        self.since <= self.limit
    }
}

fn api_error(status: u16, body: &[u8]) -> ClientError {
    match serde_json::from_slice::<crate::api::Refused>(body) {
        Ok(e) => ClientError::Api {
            status,
            code: e.code,
            error: e.error,
            field: e.field,
        },
        Err(_) => ClientError::Api {
            status,
            code: "http".into(),
            error: format!("HTTP {status}: {}", String::from_utf8_lossy(body).trim()),
            field: None,
        },
    }
}

/// A fresh Idempotency-Key, so a retried submission is never a second job: 128 bits in hex,
/// the wall clock's milliseconds first (48 bits), then 80 random ones — time-ordered, as a
/// UUIDv7 is. The daemon keeps every key of the last day in an index; a random key lands on a
/// random page of it, so each commit of a burst rewrote about one 4 KiB page per submission
/// (most of what the journal wrote: `gantry bench api`), where keys in time order all land at
/// its end. Two keys meet only if they share the millisecond and 80 random bits.
pub fn new_idempotency_key() -> Result<String, ClientError> {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let random = crate::random::random_hex(10).map_err(|e| ClientError::Protocol {
        endpoint: "local".into(),
        why: format!("cannot read random bytes from the kernel for an Idempotency-Key: {e}"),
    })?;
    Ok(format!("{:012x}{random}", ms & 0xffff_ffff_ffff))
}

/// Encodes a query-string value.
pub fn encode(v: &str) -> String {
    serde_urlencoded::to_string([("v", v)])
        .map(|s| s[2..].to_string())
        .unwrap_or_default()
}

/// `GET /v1/nodes/{name}?range=` for a node and a range.
pub fn node_path(name: &str, range: crate::api::history::Range) -> String {
    format!("/v1/nodes/{}?range={}", encode(name), range.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys made later sort after earlier ones (the journal's index of keys grows at its end),
    /// and each is still 128 bits of hex, distinct within the same millisecond.
    #[test]
    fn idempotency_keys_are_time_ordered_and_distinct() {
        let first: Vec<String> = (0..100).map(|_| new_idempotency_key().unwrap()).collect();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let later = new_idempotency_key().unwrap();
        for k in first.iter().chain([&later]) {
            assert_eq!(k.len(), 32, "{k}");
            assert!(k.bytes().all(|b| b.is_ascii_hexdigit()), "{k}");
        }
        assert!(first.iter().all(|k| *k < later), "{first:?} then {later}");
        let distinct: std::collections::HashSet<_> = first.iter().collect();
        assert_eq!(distinct.len(), first.len());
    }

    #[test]
    fn endpoints_parse_with_their_schemes_and_pins() {
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
        assert_eq!(
            Endpoint::parse("https://gantry.lab").unwrap(),
            Endpoint::Https {
                addr: "gantry.lab:443".into(),
                pin: None
            }
        );
        assert_eq!(
            Endpoint::parse("https://[::1]:7450").unwrap().to_string(),
            "https://[::1]:7450"
        );
        assert!(Endpoint::parse("ftp://x").unwrap_err().contains("https://"));
        assert!(Endpoint::parse("").is_err());
        let fp = crate::tls::fingerprint(b"x");
        let pinned = Endpoint::parse("https://h:1")
            .unwrap()
            .pinned(Some(&fp))
            .unwrap();
        assert!(matches!(pinned, Endpoint::Https { pin: Some(_), .. }));
        let e = Endpoint::parse("http://h:1")
            .unwrap()
            .pinned(Some(&fp))
            .unwrap_err();
        assert!(e.contains("not an https://"), "{e}");
    }

    #[test]
    fn cleartext_to_another_machine_is_warned_about() {
        for local in [
            "http://127.0.0.1:7450",
            "http://localhost:1",
            "http://[::1]:7450",
        ] {
            let e = Endpoint::parse(local).unwrap();
            assert_eq!(e.cleartext_warning(), None, "{local}");
        }
        let far = Endpoint::parse("http://10.0.0.5:7450").unwrap();
        assert!(far.cleartext_warning().unwrap().contains("unencrypted"));
        assert_eq!(
            Endpoint::parse("https://10.0.0.5:7450")
                .unwrap()
                .cleartext_warning(),
            None
        );
    }

    #[test]
    fn an_endless_event_is_cut() {
        let mut b = EventBound::new(100);
        assert!(b.take(b"event: a\ndata: x\n\n"));
        let line = [b'x'; 30];
        assert!((0..3).all(|_| b.take(&line)));
        assert!(!b.take(&line), "one event past the limit is refused");
        let mut b = EventBound::new(100);
        for _ in 0..100 {
            assert!(
                b.take(&line) && b.take(b"\r\n\r\n"),
                "many small events pass"
            );
        }
        let mut b = EventBound::new(100);
        let lines = (0..100).map(|_| b.take(b"data: 12345\n"));
        assert_eq!(
            lines.filter(|ok| !ok).count(),
            92,
            "lines of one event add up"
        );
    }

    #[test]
    fn query_values_are_encoded() {
        assert_eq!(encode("a b&c"), "a+b%26c");
    }
}
