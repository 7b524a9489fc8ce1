//! Services' IO: each service's endpoint (`proxy`), its replicas' readiness probes and metric
//! scrapes (`probe`), and what they measured reported to the actor, whose state decides what
//! to do about it (`state::services`). Runs on the daemon's runtime beside the API; reads the
//! services from the published snapshot, so it holds no state the journal must keep.

pub mod probe;
pub mod proxy;

use super::actor::{Handle, Request};
use super::state::Measured;
use crate::api::services::ServiceRow;
use crate::spec::service::ScaleSignal;
use proxy::{Backend, HttpClient, Shared};
use std::collections::HashMap;
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// How often the loop looks: probes of replicas not yet ready are this frequent, so a new
/// replica takes traffic within a beat of answering.
const BEAT: Duration = Duration::from_millis(250);
/// How often a service's metric is scraped from each ready replica.
const SCRAPE_EVERY: Duration = Duration::from_secs(1);
/// Failed probes in a row that take a ready replica out for good (it is replaced).
const FAILURES_TO_REPLACE: u32 = 3;

struct Endpoint {
    addr: String,
    shared: Arc<Shared>,
    task: Option<tokio::task::JoinHandle<()>>,
    error: Option<String>,
    tried: Instant,
}

/// One replica as the loop follows it.
struct Watch {
    addr: String,
    ready: bool,
    ever_ready: bool,
    failures: u32,
    why: String,
    probed: Option<Instant>,
    probing: bool,
    in_flight: Arc<AtomicUsize>,
    /// The service's metric as this replica last reported it.
    metric: Option<f64>,
    scraped: Option<Instant>,
    scraping: bool,
}

type Results = Arc<Mutex<Vec<(i64, Outcome)>>>;

enum Outcome {
    Probe(Result<(), String>),
    Metric(Result<f64, String>),
}

/// Runs until `stop`.
pub async fn run(handle: Handle, mut stop: watch::Receiver<bool>) {
    let client = proxy::client();
    let mut endpoints: HashMap<String, Endpoint> = HashMap::new();
    let mut watches: HashMap<i64, Watch> = HashMap::new();
    let results: Results = Arc::default();
    // A probe's answer wakes the loop at once: a replica that answers takes traffic then, not
    // at the next beat. So does a new snapshot (a replica that just started).
    let answered = Arc::new(tokio::sync::Notify::new());
    let mut published = handle.published.clone();
    let mut reported = Instant::now() - BEAT;
    let mut last: Vec<(String, Measured)> = Vec::new();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(BEAT) => {}
            _ = answered.notified() => {}
            _ = published.changed() => {}
            _ = async { let _ = stop.wait_for(|&s| s).await; } => break,
        }
        let snapshot = published.borrow_and_update().clone();
        let services = &snapshot.snapshot.services;
        let now = snapshot.snapshot.now;
        if services.is_empty() && endpoints.is_empty() {
            continue;
        }
        // Endpoints follow the services.
        endpoints.retain(|name, e| {
            let keep = services
                .iter()
                .any(|s| s.name == *name && s.endpoint == e.addr);
            if !keep {
                if let Some(t) = e.task.take() {
                    t.abort();
                }
            }
            keep
        });
        for s in services {
            let e = endpoints.entry(s.name.clone()).or_insert_with(|| Endpoint {
                addr: s.endpoint.clone(),
                shared: Shared::new(&s.name, client.clone()),
                task: None,
                error: None,
                tried: Instant::now() - Duration::from_secs(60),
            });
            *e.shared.balance.write().unwrap_or_else(|p| p.into_inner()) = s.spec.balance;
            *e.shared.auth.write().unwrap_or_else(|p| p.into_inner()) =
                snapshot.service_tokens.get(&s.name).cloned();
            *e.shared.timeout.write().unwrap_or_else(|p| p.into_inner()) =
                Duration::from_secs_f64(s.spec.stream_timeout_s);
            if e.task.is_none() && e.tried.elapsed() >= Duration::from_secs(5) {
                e.tried = Instant::now();
                match tokio::net::TcpListener::bind(&e.addr).await {
                    Ok(l) => {
                        e.error = None;
                        e.task = Some(tokio::spawn(proxy::serve(
                            l,
                            e.shared.clone(),
                            stop.clone(),
                        )));
                    }
                    Err(err) => e.error = Some(format!("{}: {err}", e.addr)),
                }
            }
        }
        // What the probes and scrapes found since the last beat.
        let mut changed = false;
        for (job, outcome) in
            std::mem::take(&mut *results.lock().unwrap_or_else(|p| p.into_inner()))
        {
            let Some(w) = watches.get_mut(&job) else {
                continue;
            };
            match outcome {
                Outcome::Probe(r) => {
                    w.probing = false;
                    let was = w.ready;
                    match r {
                        Ok(()) => {
                            w.ready = true;
                            w.ever_ready = true;
                            w.failures = 0;
                            w.why.clear();
                        }
                        Err(why) => {
                            w.ready = false;
                            w.failures += 1;
                            w.why = why;
                        }
                    }
                    changed |= was != w.ready;
                }
                Outcome::Metric(r) => {
                    w.scraping = false;
                    w.metric = r.ok();
                }
            }
        }
        // Replicas that run are probed: those not ready every beat, the ready ones at the
        // probe's interval.
        let running: HashMap<i64, (&ServiceRow, &str)> = services
            .iter()
            .flat_map(|s| {
                s.replicas.iter().filter_map(move |r| {
                    let addr = r.address.as_deref().filter(|_| r.state == "running")?;
                    Some((r.job, (s, addr)))
                })
            })
            .collect();
        watches.retain(|job, w| running.get(job).is_some_and(|(_, a)| *a == w.addr));
        for (&job, &(s, addr)) in &running {
            let w = watches.entry(job).or_insert_with(|| Watch {
                addr: addr.to_string(),
                ready: false,
                ever_ready: false,
                failures: 0,
                why: "starting: its probe has not answered yet".to_string(),
                probed: None,
                probing: false,
                in_flight: Arc::default(),
                metric: None,
                scraped: None,
                scraping: false,
            });
            let every = if w.ready {
                Duration::from_secs_f64(s.spec.readiness.interval_s)
            } else {
                BEAT.min(Duration::from_secs_f64(s.spec.readiness.interval_s))
            };
            if !w.probing && w.probed.is_none_or(|t| t.elapsed() >= every) {
                w.probing = true;
                w.probed = Some(Instant::now());
                let (client, results, addr, readiness, answered) = (
                    client.clone(),
                    results.clone(),
                    w.addr.clone(),
                    s.spec.readiness.clone(),
                    answered.clone(),
                );
                tokio::spawn(async move {
                    let r = probe::ready(&client, &addr, &readiness).await;
                    results
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((job, Outcome::Probe(r)));
                    answered.notify_one();
                });
            }
            if let Some(ScaleSignal::Metric { name, path, .. }) = &s.spec.signal {
                if w.ready && !w.scraping && w.scraped.is_none_or(|t| t.elapsed() >= SCRAPE_EVERY) {
                    w.scraping = true;
                    w.scraped = Some(Instant::now());
                    scrape(
                        &client,
                        &results,
                        job,
                        &w.addr,
                        path,
                        name,
                        s.spec.readiness.timeout_s,
                    );
                }
            }
        }
        // Routing follows readiness.
        for s in services {
            let Some(e) = endpoints.get(&s.name) else {
                continue;
            };
            let backends: Vec<Backend> = s
                .replicas
                .iter()
                .filter(|r| !r.retiring)
                .filter_map(|r| {
                    let w = watches.get(&r.job).filter(|w| w.ready)?;
                    Some(Backend {
                        job: r.job,
                        addr: w.addr.clone(),
                        in_flight: w.in_flight.clone(),
                    })
                })
                .collect();
            *e.shared.backends.write().unwrap_or_else(|p| p.into_inner()) = backends;
        }
        // Under load the figures change every beat: each beat reports them (the actor
        // publishes them without a cycle); figures that did not change are not sent (below).
        if !changed && reported.elapsed() < BEAT {
            continue;
        }
        let measured: Vec<(String, Measured)> = services
            .iter()
            .filter_map(|s| {
                let e = endpoints.get(&s.name)?;
                Some((s.name.clone(), measure(s, e, &watches, now)))
            })
            .collect();
        // Nothing new: the actor is not woken for it.
        if measured == last && !changed {
            reported = Instant::now();
            continue;
        }
        reported = Instant::now();
        last = measured.clone();
        if !handle.tell(Request::ServiceMeasured { measured }) {
            break;
        }
    }
    for e in endpoints.into_values() {
        if let Some(t) = e.task {
            t.abort();
        }
    }
}

fn scrape(
    client: &HttpClient,
    results: &Results,
    job: i64,
    addr: &str,
    path: &str,
    name: &str,
    timeout_s: f64,
) {
    let (client, results, addr, path, name) = (
        client.clone(),
        results.clone(),
        addr.to_string(),
        path.to_string(),
        name.to_string(),
    );
    tokio::spawn(async move {
        let timeout = Duration::from_secs_f64(timeout_s.max(0.1));
        let r = probe::metric(&client, &addr, &path, &name, timeout).await;
        results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((job, Outcome::Metric(r)));
    });
}

/// What one service's endpoint and replicas show now.
fn measure(s: &ServiceRow, e: &Endpoint, watches: &HashMap<i64, Watch>, now: f64) -> Measured {
    let window = Duration::from_secs_f64(s.spec.qps_window_s);
    let (qps, p50, p99) = e.shared.measure(window);
    let mut m = Measured {
        qps: round(qps),
        latency_p50_ms: p50.map(round),
        latency_p99_ms: p99.map(round),
        requests: e.shared.requests.load(std::sync::atomic::Ordering::Relaxed),
        failed_requests: e.shared.failed.load(std::sync::atomic::Ordering::Relaxed),
        turned_away: e
            .shared
            .turned_away
            .load(std::sync::atomic::Ordering::Relaxed),
        endpoint_error: e.error.clone(),
        ..Measured::default()
    };
    let mut metric = None::<f64>;
    for r in &s.replicas {
        let Some(w) = watches.get(&r.job) else {
            continue;
        };
        if w.in_flight.load(std::sync::atomic::Ordering::Relaxed) > 0 {
            m.busy.push(r.job);
        }
        if w.ready {
            m.ready.push(r.job);
            if let Some(v) = w.metric {
                metric = Some(metric.unwrap_or(0.0) + v);
            }
            continue;
        }
        let past_delay = r
            .started_s
            .is_some_and(|t| now - t > s.spec.readiness.initial_delay_s);
        // Failures in a row, seen by this daemon: one refused probe (a restart of the daemon
        // finds replicas past their delay) is not yet a failed replica.
        if w.failures >= FAILURES_TO_REPLACE && (w.ever_ready || past_delay) {
            let why = if w.ever_ready {
                format!("{} ({} times in a row)", w.why, w.failures)
            } else {
                format!(
                    "{}, past its initial delay of {:.0} s",
                    w.why, s.spec.readiness.initial_delay_s
                )
            };
            m.failing.push((r.job, why));
        } else {
            m.waiting.push((r.job, w.why.clone()));
        }
    }
    m.load = match &s.spec.signal {
        Some(ScaleSignal::Metric { .. }) => metric.map(round),
        _ => Some(m.qps),
    };
    m
}

/// Two decimals: what is reported does not change with noise below what anyone reads.
fn round(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}
