//! A replica asked whether it is ready (its readiness probe), and for the metric a service
//! scales on (Prometheus text), with the endpoints' client.

use super::proxy::HttpClient;
use crate::spec::service::Readiness;
use axum::body::Body;
use hyper::Request;
use std::time::Duration;

/// The probe's answer: ready, or why not in a few words.
pub async fn ready(client: &HttpClient, addr: &str, r: &Readiness) -> Result<(), String> {
    let uri = format!("http://{addr}{}", r.path);
    let mut b = Request::builder().uri(&uri);
    b = match &r.post_data {
        Some(_) => b
            .method("POST")
            .header(hyper::header::CONTENT_TYPE, "application/json"),
        None => b.method("GET"),
    };
    for (k, v) in &r.headers {
        b = b.header(k, v);
    }
    let req = b
        .body(Body::from(r.post_data.clone().unwrap_or_default()))
        .map_err(|e| format!("probe {uri}: {e}"))?;
    let timeout = Duration::from_secs_f64(r.timeout_s.max(0.1));
    match tokio::time::timeout(timeout, client.request(req)).await {
        Err(_) => Err(format!(
            "probe {} timed out after {:.0} s",
            r.path, r.timeout_s
        )),
        Ok(Err(e)) => Err(format!("probe {}: {}", r.path, short(&e))),
        Ok(Ok(resp)) if resp.status().is_success() => Ok(()),
        Ok(Ok(resp)) => Err(format!("probe {} answered {}", r.path, resp.status())),
    }
}

/// The sum of `name`'s samples in the Prometheus text the replica serves at `path`.
pub async fn metric(
    client: &HttpClient,
    addr: &str,
    path: &str,
    name: &str,
    timeout: Duration,
) -> Result<f64, String> {
    let uri = format!("http://{addr}{path}");
    let req = Request::get(&uri)
        .body(Body::empty())
        .map_err(|e| format!("{uri}: {e}"))?;
    let resp = tokio::time::timeout(timeout, client.request(req))
        .await
        .map_err(|_| format!("{uri}: no answer within {:.0} s", timeout.as_secs_f64()))?
        .map_err(|e| format!("{uri}: {}", short(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{uri} answered {}", resp.status()));
    }
    // Read whole within the same time box, at most `MOST_METRICS` (a replica's page of 15 MB
    // cost the daemon 484 MB and two cores a scrape), and parsed off the runtime's threads.
    let body = tokio::time::timeout(
        timeout,
        axum::body::to_bytes(Body::new(resp.into_body()), MOST_METRICS),
    )
    .await
    .map_err(|_| format!("{uri}: its page did not arrive within {:.0} s", timeout.as_secs_f64()))?
    .map_err(|_| {
        format!(
            "{uri}: its page is over {} KiB (or broke off): gantry reads no more — serve the scaling metric on a page of its own (target_metric.path)",
            MOST_METRICS >> 10
        )
    })?;
    let (uri, name) = (uri.clone(), name.to_string());
    tokio::task::spawn_blocking(move || sum_of(&uri, &body, &name))
        .await
        .map_err(|e| format!("the metric's parse failed: {e}"))?
}

/// The largest metrics page a scrape reads.
pub const MOST_METRICS: usize = 1 << 20;

/// The sum of `name`'s samples in the Prometheus text `body` (from `uri`).
fn sum_of(uri: &str, body: &[u8], name: &str) -> Result<f64, String> {
    let text = String::from_utf8_lossy(body);
    let lines = text.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).map_err(|e| format!("{uri}: {e}"))?;
    let mut found = false;
    let mut sum = 0.0;
    for s in &scrape.samples {
        if s.metric != name {
            continue;
        }
        found = true;
        sum += match &s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            _ => 0.0,
        };
    }
    if !found {
        return Err(format!("{uri} has no metric {name}"));
    }
    Ok(sum)
}

/// An HTTP client error in a few words (its innermost cause: "Connection refused").
fn short(e: &hyper_util::client::legacy::Error) -> String {
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    let text = cause.to_string();
    // "Connection refused (os error 111)" reads better without the number.
    text.split(" (os error").next().unwrap_or(&text).to_string()
}
