//! Reaching a daemon that is not in this process: over its Unix socket, TCP or HTTPS
//! (`http`), and as the console's `Client` (`remote`: one snapshot, then the event stream's
//! deltas). The trait and every type that crosses the wire are in `crate::api`; the embedded
//! daemon's in-process client is `daemon::embedded`.

pub mod http;
pub mod remote;
