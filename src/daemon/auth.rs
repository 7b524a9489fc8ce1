//! Who may do what. Over the Unix socket (mode 0600: only the daemon's own user can connect)
//! every caller is an operator; over TCP every request carries a bearer token, and the daemon
//! keeps only each token's SHA-256.

use serde::Serialize;
use sha2::{Digest, Sha256};

pub use crate::random::{hex, random_hex};

pub use crate::api::Role;

/// The authenticated caller of one request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Caller {
    pub role: Role,
    /// A researcher's team (the only team whose jobs it may change).
    pub team: Option<String>,
    /// For events: "operator (unix socket)", "token ci-bot".
    pub name: String,
    /// The Unix account its jobs are owned by and run as on this host: the peer on the
    /// socket (by the kernel's word), the user a token was issued for over TCP (`gantry token
    /// create --user`). `None`: nobody, whatever the token's label says.
    pub user: Option<String>,
    /// What tells two callers apart where their names may not: the token's id (never its
    /// label, which two tokens may share), or the socket. Scopes idempotency keys.
    #[serde(skip)]
    pub key: String,
}

pub use crate::unix_user::{this_user, user_exists, user_name};

impl Caller {
    /// Who the API says this caller is (`GET /v1/whoami`).
    pub fn whoami(&self) -> crate::api::WhoAmI {
        crate::api::WhoAmI {
            role: self.role,
            team: self.team.clone(),
            name: self.name.clone(),
            user: self.user.clone(),
        }
    }

    pub fn local_operator() -> Caller {
        Caller {
            role: Role::Operator,
            team: None,
            name: "operator (unix socket)".to_string(),
            user: None,
            key: "socket".to_string(),
        }
    }

    /// The caller a token makes: its role and team, and the Unix user it was issued for.
    pub fn of_token(t: &super::journal::TokenRecord, role: Role) -> Caller {
        Caller {
            role,
            team: t.team.clone(),
            name: format!("token {}", t.label),
            user: t.user.clone(),
            key: format!("token {}", t.id()),
        }
    }

    /// Whether this caller may change a job of `team`.
    /// What scopes this caller's idempotency keys: two callers' keys never meet.
    pub fn scope(&self) -> String {
        format!(
            "{}|{}|{}",
            self.role,
            self.team.as_deref().unwrap_or(""),
            self.key
        )
    }

    pub fn may_change(&self, team: &str) -> bool {
        match self.role {
            Role::Operator => true,
            Role::Researcher => self.team.as_deref() == Some(team),
            Role::Viewer => false,
        }
    }
}

/// What a token grants, and until when.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    pub caller: Caller,
    /// Wall-clock Unix seconds after which the token is refused.
    pub expires_at: Option<f64>,
}

/// Wall-clock Unix seconds now (token expiry is wall time, whatever the scheduler's clock).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Unix seconds as an RFC 3339 time in UTC, for people.
pub fn rfc3339(at: f64) -> String {
    chrono::DateTime::from_timestamp(at as i64, 0).map_or_else(
        || format!("{at:.0}"),
        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    )
}

pub use crate::api::TokenInfo;

/// The token record as the API lists it, at `now` (wall-clock Unix seconds).
pub fn token_info(t: &super::journal::TokenRecord, now: f64) -> TokenInfo {
    let status = match (t.revoked_at, t.expires_at) {
        (Some(_), _) => "revoked",
        (None, Some(at)) if now >= at => "expired",
        _ => "active",
    };
    TokenInfo {
        id: t.id().to_string(),
        role: t.role.clone(),
        team: t.team.clone(),
        label: t.label.clone(),
        user: t.user.clone(),
        created_at: t.created_at,
        expires_at: t.expires_at,
        revoked_at: t.revoked_at,
        status: status.to_string(),
    }
}

/// A fresh token: `gty_` and 32 random bytes in hex.
pub fn new_token() -> std::io::Result<String> {
    Ok(format!("gty_{}", random_hex(32)?))
}

/// What the daemon stores and compares: the token's SHA-256, in hex.
pub fn hash_token(token: &str) -> String {
    hex(&Sha256::digest(token.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_random_and_only_their_hash_is_kept() {
        let (a, b) = (new_token().unwrap(), new_token().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 4 + 64);
        assert_eq!(hash_token(&a), hash_token(&a));
        assert_ne!(hash_token(&a), hash_token(&b));
        assert!(!hash_token(&a).contains(&a[4..]));
    }

    #[test]
    fn researchers_change_only_their_own_team() {
        let r = Caller {
            role: Role::Researcher,
            team: Some("applied".into()),
            name: "t".into(),
            user: None,
            key: "token t".into(),
        };
        assert!(r.may_change("applied") && !r.may_change("ml-research"));
        assert!(Caller::local_operator().may_change("anything"));
    }
}
