//! A service's endpoint: an HTTP/1 server (hyper) that forwards each request to a ready
//! replica with hyper's pooled client, counting requests and timing answers for the
//! autoscaler and `gantry services`. A request whose replica cannot be reached is sent to
//! another (up to three tries, as SkyServe's load balancer does); with no ready replica it is
//! answered 503 with why.
//!
//! What a caller can make it hold is bounded: a request body is held only up to `HELD_BODY`
//! (so a small request can be tried on another replica); a longer one streams to one replica
//! as it arrives, and one whose bytes stop coming for `BODY_IDLE` is ended. Answers stream
//! back. An endpoint takes at most `MOST_CONNECTIONS` connections at once, `MOST_PER_PEER`
//! from one address: the rest are closed at once, so slow clients cannot take the daemon's
//! descriptors (the API's own listener has its own cap).

use axum::body::Body;
use bytes::Bytes;
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use crate::spec::service::Balance;

/// The pooled client every endpoint forwards (and probes) with.
pub type HttpClient = Client<HttpConnector, Body>;

pub fn client() -> HttpClient {
    let mut c = HttpConnector::new();
    c.set_nodelay(true);
    c.set_connect_timeout(Some(Duration::from_secs(5)));
    Client::builder(hyper_util::rt::TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .build(c)
}

/// The largest request body an endpoint takes.
pub const MAX_REQUEST_BODY: usize = 64 << 20;
/// Bodies up to this are held, and the request may be tried on another replica; longer ones
/// stream to one.
pub const HELD_BODY: usize = 64 << 10;
/// A request body whose next bytes take longer than this is ended (a client that sends one
/// byte a minute holds a connection, not memory, and not for long).
pub const BODY_IDLE: Duration = Duration::from_secs(30);
/// Connections one endpoint holds at once, and from one peer address.
pub const MOST_CONNECTIONS: usize = 512;
pub const MOST_PER_PEER: usize = 64;
/// Tries per request over different replicas (SkyServe's `LB_MAX_RETRY`).
const TRIES: usize = 3;
/// Answers kept for latency quantiles.
const LATENCY_KEPT: Duration = Duration::from_secs(60);
const LATENCY_MAX: usize = 200_000;

/// A ready replica as the endpoint routes to it.
#[derive(Clone, Debug)]
pub struct Backend {
    pub job: i64,
    /// `host:port`.
    pub addr: String,
    pub in_flight: Arc<AtomicUsize>,
}

/// What one endpoint shares between its connections and the service loop.
pub struct Shared {
    pub name: String,
    pub backends: RwLock<Vec<Backend>>,
    pub balance: RwLock<Balance>,
    pub timeout: RwLock<Duration>,
    next: AtomicUsize,
    /// Arrival times over the QPS window, and answer times over the last minute.
    arrivals: Mutex<VecDeque<Instant>>,
    latencies: Mutex<VecDeque<(Instant, f32)>>,
    pub requests: AtomicU64,
    pub failed: AtomicU64,
    /// Connections closed at once: over the endpoint's cap or their peer's.
    pub turned_away: AtomicU64,
    /// The SHA-256 (hex) of the bearer token a request must carry (`serve up --auth`).
    pub auth: RwLock<Option<String>>,
    client: HttpClient,
}

impl Shared {
    pub fn new(name: &str, client: HttpClient) -> Arc<Shared> {
        Arc::new(Shared {
            name: name.to_string(),
            backends: RwLock::new(Vec::new()),
            balance: RwLock::new(Balance::LeastLoad),
            timeout: RwLock::new(Duration::from_secs(120)),
            next: AtomicUsize::new(0),
            arrivals: Mutex::new(VecDeque::new()),
            latencies: Mutex::new(VecDeque::new()),
            requests: AtomicU64::new(0),
            failed: AtomicU64::new(0),
            turned_away: AtomicU64::new(0),
            auth: RwLock::new(None),
            client,
        })
    }

    /// Requests per second over the last `window`, and the latency p50 and p99 (ms) over the
    /// last minute; old entries are dropped.
    pub fn measure(&self, window: Duration) -> (f64, Option<f64>, Option<f64>) {
        let now = Instant::now();
        let qps = {
            let mut a = self.arrivals.lock().unwrap_or_else(|e| e.into_inner());
            while a.front().is_some_and(|t| now.duration_since(*t) > window) {
                a.pop_front();
            }
            a.len() as f64 / window.as_secs_f64().max(1.0)
        };
        let mut lat: Vec<f32> = {
            let mut l = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
            while l
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > LATENCY_KEPT)
            {
                l.pop_front();
            }
            l.iter().map(|(_, ms)| *ms).collect()
        };
        if lat.is_empty() {
            return (qps, None, None);
        }
        lat.sort_by(f32::total_cmp);
        let q = |p: f64| {
            let i = ((lat.len() as f64 - 1.0) * p).round() as usize;
            f64::from(lat[i.min(lat.len() - 1)])
        };
        (qps, Some(q(0.5)), Some(q(0.99)))
    }

    /// The replica for the next request, skipping `tried`.
    fn pick(&self, tried: &[i64]) -> Option<Backend> {
        let b = self.backends.read().unwrap_or_else(|e| e.into_inner());
        let open: Vec<&Backend> = b.iter().filter(|x| !tried.contains(&x.job)).collect();
        if open.is_empty() {
            return None;
        }
        let balance = *self.balance.read().unwrap_or_else(|e| e.into_inner());
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let chosen = match balance {
            Balance::RoundRobin => open[n % open.len()],
            // Ties go round robin, so an idle service still spreads its requests.
            Balance::LeastLoad => {
                // Each count read once: other requests move them while this one chooses.
                let loads: Vec<usize> = open
                    .iter()
                    .map(|x| x.in_flight.load(Ordering::Relaxed))
                    .collect();
                let least = loads.iter().copied().min().unwrap_or(0);
                let tied: Vec<&Backend> = open
                    .iter()
                    .zip(&loads)
                    .filter(|(_, l)| **l == least)
                    .map(|(b, _)| *b)
                    .collect();
                tied[n % tied.len()]
            }
        };
        Some(chosen.clone())
    }

    fn record(&self, arrived: Instant, ok: bool) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            self.failed.fetch_add(1, Ordering::Relaxed);
        }
        let ms = arrived.elapsed().as_secs_f32() * 1000.0;
        self.arrivals
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(arrived);
        let mut l = self.latencies.lock().unwrap_or_else(|e| e.into_inner());
        if l.len() >= LATENCY_MAX {
            l.pop_front();
        }
        l.push_back((arrived, ms));
    }

    /// One request: forwarded to a ready replica (another on a connection failure).
    pub async fn forward(self: Arc<Self>, req: Request<Incoming>) -> Response<Body> {
        let arrived = Instant::now();
        // A service that asks for a token: checked before anything of the request is read
        // (a stranger's body is never buffered).
        let want = self.auth.read().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(want) = want {
            let shown = req
                .headers()
                .get(hyper::header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.strip_prefix("Bearer "))
                .map(|t| crate::daemon::auth::hash_token(t.trim()));
            // Not counted as traffic: a stranger's requests must not scale the service up.
            if shown.as_deref() != Some(want.as_str()) {
                let mut r = plain(
                    StatusCode::UNAUTHORIZED,
                    format!(
                        "gantry: service {} asks for `Authorization: Bearer TOKEN` (the token `gantry serve up --auth` printed)\n",
                        self.name
                    ),
                );
                r.headers_mut().insert(
                    hyper::header::WWW_AUTHENTICATE,
                    hyper::header::HeaderValue::from_static("Bearer"),
                );
                return r;
            }
        }
        let (parts, body) = req.into_parts();
        let body = match read_body(body).await {
            Ok(b) => b,
            Err((status, why)) => {
                self.record(arrived, false);
                return plain(status, format!("gantry: {why}\n"));
            }
        };
        let body = match body {
            ReadBody::Held(b) => b,
            ReadBody::Streaming(stream) => {
                return self.forward_streaming(arrived, &parts, stream).await
            }
        };
        let timeout = *self.timeout.read().unwrap_or_else(|e| e.into_inner());
        // Replicas that refused a connection (not tried again), and tries made.
        let mut refused = Vec::new();
        let mut tries = 0;
        let mut last = String::new();
        // A request that may be repeated (RFC 9110's idempotent methods) is sent again after a
        // connection that broke mid-way too (a kept-alive one the replica had just closed).
        let repeatable = matches!(
            parts.method,
            hyper::Method::GET
                | hyper::Method::HEAD
                | hyper::Method::OPTIONS
                | hyper::Method::PUT
                | hyper::Method::DELETE
        );
        while tries < TRIES {
            let Some(b) = self.pick(&refused) else {
                break;
            };
            tries += 1;
            let req = match to_replica(&parts, body.clone(), &b.addr) {
                Ok(r) => r,
                Err(e) => {
                    self.record(arrived, false);
                    return plain(StatusCode::BAD_REQUEST, format!("gantry: {e}\n"));
                }
            };
            let answer = {
                // Counted while it waits, also when the client goes away mid-request (the
                // future is dropped): a drained replica is not held up by a count that leaked.
                let _in_flight = InFlight::new(&b.in_flight);
                tokio::time::timeout(timeout, self.client.request(req)).await
            };
            match answer {
                Ok(Ok(resp)) => {
                    self.record(arrived, true);
                    return resp.map(Body::new);
                }
                Ok(Err(e)) => {
                    last = format!("replica job {} at {}: {e}", b.job, b.addr);
                    if e.is_connect() {
                        refused.push(b.job);
                    } else if !repeatable {
                        // Sent and then failed: not safe to send again (it may have acted).
                        break;
                    }
                }
                Err(_) => {
                    self.record(arrived, false);
                    return self.unanswered(&b, timeout);
                }
            }
        }
        self.record(arrived, false);
        if tries == 0 {
            self.no_replica()
        } else {
            plain(
                StatusCode::BAD_GATEWAY,
                format!("gantry: service {}: {last}\n", self.name),
            )
        }
    }
}

impl Shared {
    /// The endpoint's answer when no replica is ready.
    fn no_replica(&self) -> Response<Body> {
        plain(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "gantry: service {} has no ready replica yet (gantry service {} says why)\n",
                self.name, self.name
            ),
        )
    }

    /// The endpoint's answer when replica `b` did not answer within `timeout`.
    fn unanswered(&self, b: &Backend, timeout: Duration) -> Response<Body> {
        plain(
            StatusCode::GATEWAY_TIMEOUT,
            format!(
                "gantry: service {}: replica job {} at {} did not answer within {:.0} s\n",
                self.name,
                b.job,
                b.addr,
                timeout.as_secs_f64()
            ),
        )
    }

    /// A request whose body streams: sent to one replica as it arrives (it cannot be sent
    /// again: what was read is gone).
    async fn forward_streaming(
        &self,
        arrived: Instant,
        parts: &hyper::http::request::Parts,
        body: Body,
    ) -> Response<Body> {
        let Some(b) = self.pick(&[]) else {
            self.record(arrived, false);
            return self.no_replica();
        };
        let req = match to_replica_with(parts, body, &b.addr) {
            Ok(r) => r,
            Err(e) => {
                self.record(arrived, false);
                return plain(StatusCode::BAD_REQUEST, format!("gantry: {e}\n"));
            }
        };
        let timeout = *self.timeout.read().unwrap_or_else(|e| e.into_inner());
        let answer = {
            let _in_flight = InFlight::new(&b.in_flight);
            tokio::time::timeout(timeout, self.client.request(req)).await
        };
        match answer {
            Ok(Ok(resp)) => {
                self.record(arrived, true);
                resp.map(Body::new)
            }
            Ok(Err(e)) => {
                self.record(arrived, false);
                plain(
                    StatusCode::BAD_GATEWAY,
                    format!(
                        "gantry: service {}: replica job {} at {}: {e}\n",
                        self.name, b.job, b.addr
                    ),
                )
            }
            Err(_) => {
                self.record(arrived, false);
                self.unanswered(&b, timeout)
            }
        }
    }
}

/// A request body as read so far: whole (small), or streaming (what was read, then the rest).
enum ReadBody {
    Held(Bytes),
    Streaming(Body),
}

/// Reads `body` up to `HELD_BODY`: whole if it ends by then, else a body that yields what was
/// read and then the rest as it comes — each gap at most `BODY_IDLE`, the whole at most
/// `MAX_REQUEST_BODY`. The error: the status and why.
async fn read_body(body: Incoming) -> Result<ReadBody, (StatusCode, String)> {
    use futures_util::StreamExt;
    let mut stream = Body::new(body).into_data_stream();
    let mut held = bytes::BytesMut::new();
    loop {
        match tokio::time::timeout(BODY_IDLE, stream.next()).await {
            Err(_) => {
                return Err((
                    StatusCode::REQUEST_TIMEOUT,
                    format!(
                        "the request body stopped arriving for {} s",
                        BODY_IDLE.as_secs()
                    ),
                ))
            }
            Ok(None) => return Ok(ReadBody::Held(held.freeze())),
            Ok(Some(Err(e))) => {
                return Err((
                    StatusCode::BAD_REQUEST,
                    format!("the request body could not be read ({e})"),
                ))
            }
            Ok(Some(Ok(chunk))) => {
                held.extend_from_slice(&chunk);
                if held.len() > HELD_BODY {
                    break;
                }
            }
        }
    }
    // The rest streams: a gap past BODY_IDLE or more than MAX_REQUEST_BODY in all ends it
    // (the replica sees the body cut, the client a broken answer).
    let first = held.freeze();
    let sent = first.len();
    let rest = futures_util::stream::unfold(
        (stream, sent, false),
        |(mut stream, sent, done)| async move {
            if done {
                return None;
            }
            let next = tokio::time::timeout(BODY_IDLE, stream.next()).await;
            let why = match next {
                Err(_) => format!(
                    "the request body stopped arriving for {} s",
                    BODY_IDLE.as_secs()
                ),
                Ok(None) => return None,
                Ok(Some(Err(e))) => e.to_string(),
                Ok(Some(Ok(chunk))) => {
                    let sent = sent + chunk.len();
                    if sent <= MAX_REQUEST_BODY {
                        return Some((Ok(chunk), (stream, sent, false)));
                    }
                    format!("the request body passed {MAX_REQUEST_BODY} bytes")
                }
            };
            Some((Err(std::io::Error::other(why)), (stream, sent, true)))
        },
    );
    let all =
        futures_util::stream::once(async move { Ok::<Bytes, std::io::Error>(first) }).chain(rest);
    Ok(ReadBody::Streaming(Body::from_stream(all)))
}

/// One of a peer address's connections, for as long as this lives.
struct PeerSeat {
    peers: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
    ip: std::net::IpAddr,
}

impl PeerSeat {
    /// A seat for `ip`, unless it holds `MOST_PER_PEER` already.
    fn take(
        peers: &Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>>,
        ip: std::net::IpAddr,
    ) -> Option<PeerSeat> {
        let mut held = peers.lock().unwrap_or_else(|e| e.into_inner());
        let n = held.entry(ip).or_default();
        if *n >= MOST_PER_PEER {
            return None;
        }
        *n += 1;
        Some(PeerSeat {
            peers: peers.clone(),
            ip,
        })
    }
}

impl Drop for PeerSeat {
    fn drop(&mut self) {
        let mut held = self.peers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.ip);
            }
        }
    }
}

/// A request in flight to a replica, for as long as this lives.
struct InFlight<'a>(&'a AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a AtomicUsize) -> InFlight<'a> {
        n.fetch_add(1, Ordering::Relaxed);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The request as sent to the replica at `addr`: its path and query, headers but the hop's.
fn to_replica(
    parts: &hyper::http::request::Parts,
    body: Bytes,
    addr: &str,
) -> Result<Request<Body>, String> {
    to_replica_with(parts, Body::from(body), addr)
}

fn to_replica_with(
    parts: &hyper::http::request::Parts,
    body: Body,
    addr: &str,
) -> Result<Request<Body>, String> {
    let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let uri: hyper::Uri = format!("http://{addr}{path}")
        .parse()
        .map_err(|e| format!("the request's path does not make a URI: {e}"))?;
    let mut b = Request::builder()
        .method(parts.method.clone())
        .uri(uri)
        .version(hyper::Version::HTTP_11);
    for (k, v) in &parts.headers {
        // Hop-by-hop headers are the endpoint's own connection's, not the replica's.
        if matches!(
            k.as_str(),
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "transfer-encoding"
                | "upgrade"
                | "te"
                | "trailer"
        ) {
            continue;
        }
        b = b.header(k, v);
    }
    b.body(body).map_err(|e| e.to_string())
}

pub fn plain(status: StatusCode, text: String) -> Response<Body> {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

/// Serves `listener` until `stop`: each connection on a task of its own.
pub async fn serve(
    listener: tokio::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MOST_CONNECTIONS));
    let peers: Arc<Mutex<std::collections::HashMap<std::net::IpAddr, usize>>> = Arc::default();
    loop {
        let (io, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    // Out of descriptors, say: try again shortly rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = async { let _ = stop.wait_for(|&s| s).await; } => return,
        };
        // Over the endpoint's cap, or the peer's: closed at once (its descriptor goes back).
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            shared.turned_away.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let Some(seat) = PeerSeat::take(&peers, peer.ip()) else {
            shared.turned_away.fetch_add(1, Ordering::Relaxed);
            continue;
        };
        let _ = io.set_nodelay(true);
        let shared = shared.clone();
        tokio::spawn(async move {
            let _held = (slot, seat);
            let svc = hyper::service::service_fn(move |req| {
                let shared = shared.clone();
                async move { Ok::<_, std::convert::Infallible>(shared.forward(req).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(30))
                .serve_connection(hyper_util::rt::TokioIo::new(io), svc)
                .await;
        });
    }
}
