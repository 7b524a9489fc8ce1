//! A pod's log through the pod log API, read as gantry's log queries ask (what follows a
//! cursor, or the last lines).

use super::inventory::JOB_LABEL;
use crate::backend::logs::{LogQuery, LogRead};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;

/// The log of job `job`'s pod on `node`.
pub(super) async fn pod_log(api: &Api<Pod>, job: i64, node: &str) -> Result<String, String> {
    let lp = kube::api::ListParams::default()
        .labels(&format!("{JOB_LABEL}={job}"))
        .fields(&format!("spec.nodeName={node}"));
    let list = api.list(&lp).await.map_err(|e| super::kube_error(&e))?;
    let Some(pod) = list.items.first().and_then(|p| p.metadata.name.clone()) else {
        return Err(format!(
            "no pod of job {job} on {node}: Kubernetes keeps a pod's log only while the pod exists, and gantry deletes a job's pods when it ends (read logs while it runs, or ship them from the pod to storage)"
        ));
    };
    api.logs(&pod, &kube::api::LogParams::default())
        .await
        .map_err(|e| super::kube_error(&e))
}

/// A pod's log (stdout and stderr as one stream, as the API gives it) read as `q` asks:
/// what follows the cursor, or the last lines.
pub(super) fn log_read(text: &str, q: &LogQuery) -> LogRead {
    use crate::backend::logs::{LogCursor, LogLine, Stream};
    let from = q.after.map_or(0, |c| (c.out as usize).min(text.len()));
    let rest = text.get(from..).unwrap_or_default();
    // Complete lines only, unless the run has ended (`partial`).
    let upto = if q.partial {
        rest.len()
    } else {
        rest.rfind('\n').map_or(0, |i| i + 1)
    };
    let mut lines: Vec<LogLine> = rest[..upto]
        .lines()
        .map(|l| LogLine {
            stream: Stream::Out,
            text: l.to_string(),
        })
        .collect();
    if q.after.is_none() && lines.len() > q.tail {
        lines.drain(..lines.len() - q.tail);
    }
    LogRead {
        lines,
        cursor: LogCursor {
            out: (from + upto) as u64,
            err: 0,
        },
        found: true,
        gone: None,
    }
}
