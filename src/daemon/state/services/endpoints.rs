//! Where a service's endpoint may listen: the fleet's `[services]` addresses and ports, never
//! a port of the system's or of the daemon's own, and never a socket another service holds.

use super::Services;

/// Whether two endpoints would take the same socket: one port, and one address or either on
/// every address (`0.0.0.0` holds `127.0.0.1`'s port too).
pub(super) fn overlaps(a: std::net::SocketAddr, b: std::net::SocketAddr) -> bool {
    a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

impl Services {
    /// The endpoint `asked` (`--endpoint`), where the fleet allows it to `caller`: never a port
    /// below 1024 or one of the daemon's own, a port in `[services] ports`, an address of
    /// `[services] addresses` (any other — every interface, a public one — is an operator's
    /// to give), and no socket another service holds (its service's for as long as it
    /// exists, restarts included: the services' endpoints are journaled).
    pub(super) fn allowed_endpoint(
        &self,
        (policy, reserved_ports): (&crate::config::fleet::ServiceSettings, &[u16]),
        asked: &str,
        caller: &crate::daemon::auth::Caller,
    ) -> Result<String, crate::daemon::refusal::Refusal> {
        use crate::daemon::refusal::{Kind, Refusal};
        let addr: std::net::SocketAddr = asked.parse().map_err(|_| {
            Refusal::bad_request(format!(
                "endpoint `{}`: give an address and port (`127.0.0.1:30080`)",
                asked.escape_debug()
            ))
        })?;
        let port = addr.port();
        if port < 1024 {
            return Err(Refusal::bad_request(format!(
                "endpoint {addr}: ports below 1024 are the system's; services use [services] ports ({})",
                policy.ports
            )));
        }
        if reserved_ports.contains(&port) {
            return Err(Refusal::bad_request(format!(
                "endpoint {addr}: port {port} is one of the daemon's own listeners; services use [services] ports ({})",
                policy.ports
            )));
        }
        if !policy.port_range().is_some_and(|r| r.contains(&port)) {
            return Err(Refusal::bad_request(format!(
                "endpoint {addr}: port {port} is outside [services] ports ({}), the ports this fleet gives services",
                policy.ports
            )));
        }
        if caller.role != crate::api::Role::Operator && !policy.ips().contains(&addr.ip()) {
            return Err(Refusal::forbidden(format!(
                "endpoint {addr}: services may listen on {} ([services] addresses); another address{} is an operator's to give",
                policy.addresses.join(", "),
                if addr.ip().is_unspecified() {
                    " (every interface, with nothing in front of it)"
                } else {
                    ""
                }
            )));
        }
        if let Some(o) = self.list.values().find(|o| {
            o.record
                .endpoint
                .parse()
                .is_ok_and(|held| overlaps(held, addr))
        }) {
            return Err(Refusal::new(
                Kind::Conflict,
                "conflict",
                format!(
                    "endpoint {addr}: service {} holds {} (an endpoint is its service's for as long as the service exists)",
                    o.record.name, o.record.endpoint
                ),
            ));
        }
        Ok(addr.to_string())
    }
}
