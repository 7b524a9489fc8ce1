//! TCP connections on probation until they show a valid token. The TCP listener is reachable
//! by anyone on the network: a client that connects and sends nothing (or a partial request)
//! holds a connection slot until its header timeout, and enough of them — reopened as they are
//! cut — kept every real client out (300 idle connections: 59 of 59 real requests failed).
//!
//! So a connection is on probation until a request on it carries a valid token: probation has
//! room for a few per peer address and a bounded number in all, and a new connection past
//! either bound *evicts the oldest one on probation* (of its own peer first) rather than being
//! refused. A flood from one address then only churns its own connections; a real client's
//! connection, which shows its token in its first request, leaves probation at once. A
//! connection still on probation after `deadline` is closed.

use std::collections::VecDeque;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;

/// The bounds.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Connections on probation from one peer address.
    pub per_peer: usize,
    /// Connections on probation in all.
    pub total: usize,
    /// How long a connection may stay on probation.
    pub deadline: Duration,
}

impl Bounds {
    /// For a listener that holds `cap` connections: probation takes at most a quarter of them,
    /// one peer half of that.
    pub fn for_cap(cap: usize) -> Bounds {
        let total = (cap / 4).max(2);
        Bounds {
            per_peer: total / 2,
            total,
            deadline: Duration::from_secs(5),
        }
    }
}

struct Waiting {
    id: u64,
    peer: Option<IpAddr>,
    /// Set once the connection has sent a byte: a silent one is evicted first (a real client
    /// sends its request as soon as it connects).
    heard: Arc<AtomicBool>,
    /// Closes the connection.
    evict: oneshot::Sender<()>,
}

/// The connections of one listener on probation, oldest first.
pub struct Probation {
    bounds: Bounds,
    inner: Mutex<(u64, VecDeque<Waiting>)>,
}

/// A connection's place on probation: `prove` takes it off (its token was good), as its
/// `OnProbation` guard does when the connection closes.
#[derive(Clone)]
pub struct Proof {
    id: u64,
    probation: Arc<Probation>,
}

impl Proof {
    pub fn prove(&self) {
        self.probation.leave(self.id);
    }

    /// Resolves once the connection has been on probation past the deadline (never, once it
    /// has proven itself).
    pub async fn expired(&self) {
        tokio::time::sleep(self.probation.deadline()).await;
        if !self.probation.waiting(self.id) {
            std::future::pending::<()>().await;
        }
    }
}

/// Takes the connection off probation when it closes.
pub struct OnProbation(Proof);

impl Drop for OnProbation {
    fn drop(&mut self) {
        self.0.prove();
    }
}

impl Probation {
    pub fn new(bounds: Bounds) -> Arc<Probation> {
        Arc::new(Probation {
            bounds,
            inner: Mutex::new((0, VecDeque::new())),
        })
    }

    pub fn deadline(&self) -> Duration {
        self.bounds.deadline
    }

    /// A new connection from `peer` on probation, making room by evicting the oldest of the
    /// same peer (past `per_peer`) or of all (past `total`). Its proof, the guard that takes it
    /// off when it closes, and what says it was evicted.
    pub fn admit(
        self: &Arc<Probation>,
        peer: Option<IpAddr>,
        heard: Arc<AtomicBool>,
    ) -> (Proof, OnProbation, oneshot::Receiver<()>) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (next, waiting) = &mut *g;
        // The oldest silent one of those `of` picks, else the oldest of them.
        let oldest = |of: &dyn Fn(&Waiting) -> bool| {
            let silent = |w: &Waiting| of(w) && !w.heard.load(Ordering::Relaxed);
            waiting
                .iter()
                .position(silent)
                .or_else(|| waiting.iter().position(of))
        };
        let same = waiting.iter().filter(|w| w.peer == peer).count();
        let evict = if same >= self.bounds.per_peer {
            oldest(&|w: &Waiting| w.peer == peer)
        } else if waiting.len() >= self.bounds.total {
            oldest(&|_: &Waiting| true)
        } else {
            None
        };
        if let Some(i) = evict {
            if let Some(w) = waiting.remove(i) {
                let _ = w.evict.send(());
            }
        }
        *next += 1;
        let id = *next;
        let (tx, rx) = oneshot::channel();
        waiting.push_back(Waiting {
            id,
            peer,
            heard,
            evict: tx,
        });
        let proof = Proof {
            id,
            probation: self.clone(),
        };
        (proof.clone(), OnProbation(proof), rx)
    }

    fn leave(&self, id: u64) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(i) = g.1.iter().position(|w| w.id == id) {
            g.1.remove(i);
        }
    }

    /// Whether connection `id` is still on probation.
    fn waiting(&self, id: u64) -> bool {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.1.iter().any(|w| w.id == id)
    }
}

/// A connection's stream that notes its first byte (for `Waiting::heard`).
pub struct Heard<I> {
    io: I,
    heard: Arc<AtomicBool>,
}

impl<I> Heard<I> {
    pub fn new(io: I) -> (Heard<I>, Arc<AtomicBool>) {
        let heard = Arc::new(AtomicBool::new(false));
        (
            Heard {
                io,
                heard: heard.clone(),
            },
            heard,
        )
    }
}

impl<I: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Heard<I> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.heard.store(true, Ordering::Relaxed);
        }
        r
    }
}

impl<I: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Heard<I> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds() -> Bounds {
        Bounds {
            per_peer: 2,
            total: 3,
            deadline: Duration::from_secs(5),
        }
    }

    #[test]
    fn a_flooding_peer_evicts_its_own_connections_first() {
        let p = Probation::new(bounds());
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let b: Option<IpAddr> = Some("10.0.0.2".parse().unwrap());
        let (_pb, _gb, mut rb) = p.admit(b, Default::default());
        let (_p1, _g1, mut r1) = p.admit(a, Default::default());
        let (_p2, _g2, mut r2) = p.admit(a, Default::default());
        let (_p3, _g3, mut r3) = p.admit(a, Default::default());
        assert!(r1.try_recv().is_ok(), "a's oldest was evicted");
        assert!(r2.try_recv().is_err() && r3.try_recv().is_err());
        assert!(rb.try_recv().is_err(), "b's connection was not touched");
    }

    #[test]
    fn a_connection_that_has_spoken_is_evicted_after_the_silent_ones() {
        let p = Probation::new(bounds());
        let a: Option<IpAddr> = Some("10.0.0.1".parse().unwrap());
        let spoke = Arc::new(AtomicBool::new(true));
        let (_p1, _g1, mut r1) = p.admit(a, spoke);
        let (_p2, _g2, mut r2) = p.admit(a, Default::default());
        let (_p3, _g3, _r3) = p.admit(a, Default::default());
        assert!(r1.try_recv().is_err(), "the oldest had spoken");
        assert!(r2.try_recv().is_ok(), "the oldest silent one went");
    }

    #[test]
    fn past_the_total_the_oldest_goes_and_proven_ones_leave() {
        let p = Probation::new(bounds());
        let ips: Vec<Option<IpAddr>> = (1..=4)
            .map(|i| Some(format!("10.0.0.{i}").parse().unwrap()))
            .collect();
        let (p1, _g1, mut r1) = p.admit(ips[0], Default::default());
        p1.prove();
        let (_p2, _g2, mut r2) = p.admit(ips[1], Default::default());
        let (_p3, g3, _r3) = p.admit(ips[2], Default::default());
        let (_p4, _g4, mut r4) = p.admit(ips[3], Default::default());
        assert!(
            r1.try_recv().is_err(),
            "a proven connection is never evicted"
        );
        assert!(r2.try_recv().is_err(), "room for three");
        drop(g3);
        let (_p5, _g5, _r5) = p.admit(ips[0], Default::default());
        assert!(r2.try_recv().is_err(), "a closed one made room");
        let (_p6, _g6, _r6) = p.admit(ips[0], Default::default());
        assert!(r2.try_recv().is_ok(), "then the oldest goes");
        assert!(r4.try_recv().is_err());
    }
}
