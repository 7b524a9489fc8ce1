//! What the cloud tells an instance about its own end: EC2's instance metadata service (IMDS)
//! says, on a spot instance, two minutes ahead that it will be taken back
//! (`spot/instance-action`), and earlier, that it is at elevated risk
//! (`events/recommendations/rebalance`). Only the instance itself can read these, so the agent
//! on a spot node watches them (`gantry agent --notices URL`) and says what it saw: the daemon
//! preempts the node's jobs with their checkpoint signal at the first, and records the second.
//! IMDSv2 (a session token) is used, with IMDSv1 as the fallback where tokens are off.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the metadata is read (EC2 asks for every 5 seconds).
pub const WATCH_EVERY: Duration = Duration::from_secs(5);
/// EC2's metadata service on every instance.
pub const IMDS: &str = "http://169.254.169.254";

/// One thing the cloud said about this instance's end.
#[derive(Clone, Debug, PartialEq)]
pub struct Notice {
    pub what: String,
    /// Seconds until the instance is taken back, for an interruption; `None` for a warning.
    pub gone_in_s: Option<f64>,
}

/// The body of `spot/instance-action`, as a notice at `now`: `{"action": "terminate",
/// "time": "2026-11-28T03:00:00Z"}`. `None` for what is not one.
pub fn interruption(body: &str, now: chrono::DateTime<chrono::Utc>) -> Option<Notice> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let action = v.get("action")?.as_str()?;
    let time = v.get("time")?.as_str()?;
    let at = chrono::DateTime::parse_from_rfc3339(time).ok()?;
    let gone_in_s =
        ((at.with_timezone(&chrono::Utc) - now).num_milliseconds() as f64 / 1e3).max(0.0);
    Some(Notice {
        what: format!(
            "spot interruption notice from EC2: {} at {time}",
            crate::untrusted::bounded(action, 20)
        ),
        gone_in_s: Some(gone_in_s),
    })
}

/// The body of `events/recommendations/rebalance` (`{"noticeTime": "…"}`) as a warning.
pub fn rebalance(body: &str) -> Option<Notice> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let at = v.get("noticeTime")?.as_str()?;
    Some(Notice {
        what: format!(
            "rebalance recommendation from EC2 at {}: this spot instance is at elevated risk of interruption",
            crate::untrusted::bounded(at, 40)
        ),
        gone_in_s: None,
    })
}

/// Reads `base`'s metadata every `WATCH_EVERY` until `done`, saying each new notice once.
pub fn watch(base: String, say: impl Fn(Notice), done: Arc<AtomicBool>) {
    crate::tls::install_provider();
    let Ok(http) = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(2))
        .no_proxy()
        .build()
    else {
        return;
    };
    let base = base.trim_end_matches('/').to_string();
    let mut token: Option<(String, Instant)> = None;
    let mut said: Vec<String> = Vec::new();
    let mut next = Instant::now();
    while !done.load(Ordering::Relaxed) {
        if Instant::now() < next {
            std::thread::sleep(Duration::from_millis(100));
            continue;
        }
        next = Instant::now() + WATCH_EVERY;
        // A session token for six hours (IMDSv2); none where the service does not give one.
        if token
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() > Duration::from_secs(6 * 3600 - 60))
        {
            token = http
                .put(format!("{base}/latest/api/token"))
                .header("X-aws-ec2-metadata-token-ttl-seconds", "21600")
                .send()
                .ok()
                .filter(|r| r.status().is_success())
                .and_then(|r| r.text().ok())
                .map(|t| (t, Instant::now()));
        }
        let read = |path: &str| -> Option<String> {
            let mut req = http.get(format!("{base}/latest/meta-data/{path}"));
            if let Some((t, _)) = &token {
                req = req.header("X-aws-ec2-metadata-token", t);
            }
            let r = req.send().ok()?;
            if !r.status().is_success() {
                return None;
            }
            r.text().ok()
        };
        let now = chrono::Utc::now();
        let found = [
            read("spot/instance-action").and_then(|b| interruption(&b, now).map(|n| (b, n))),
            read("events/recommendations/rebalance").and_then(|b| rebalance(&b).map(|n| (b, n))),
        ];
        for (body, notice) in found.into_iter().flatten() {
            if !said.contains(&body) {
                said.push(body);
                say(notice);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notices_are_read_as_ec2_writes_them() {
        let now = chrono::DateTime::parse_from_rfc3339("2026-11-28T03:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let n = interruption(
            r#"{"action": "terminate", "time": "2026-11-28T03:02:00Z"}"#,
            now,
        )
        .unwrap();
        assert_eq!(n.gone_in_s, Some(120.0));
        assert!(
            n.what.contains("terminate at 2026-11-28T03:02:00Z"),
            "{}",
            n.what
        );
        // Past already: now.
        let late = interruption(r#"{"action":"stop","time":"2026-11-28T02:59:00Z"}"#, now).unwrap();
        assert_eq!(late.gone_in_s, Some(0.0));
        assert_eq!(interruption("<html>404</html>", now), None);
        assert_eq!(interruption(r#"{"action":"terminate"}"#, now), None);
        let r = rebalance(r#"{"noticeTime": "2026-11-28T02:50:00Z"}"#).unwrap();
        assert_eq!(r.gone_in_s, None);
        assert!(r.what.contains("elevated risk"));
    }
}
