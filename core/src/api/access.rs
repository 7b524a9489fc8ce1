//! Who may do what: roles, the caller's access, and the actions on a job.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What the console's caller may do at the daemon (its token's role and team).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub role: Role,
    pub team: Option<String>,
}

/// Who the daemon takes a client for (`GET /v1/whoami`): its role and team, the name its
/// changes are filed under, and the Unix account its jobs run as (`None`: nobody).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhoAmI {
    pub role: Role,
    pub team: Option<String>,
    pub name: String,
    pub user: Option<String>,
}

impl WhoAmI {
    /// What it may do.
    pub fn access(&self) -> Access {
        Access {
            role: self.role,
            team: self.team.clone(),
        }
    }
}

/// A token as `gantry token list` shows it (`GET /v1/tokens`, and what `DELETE
/// /v1/tokens/{id}` revoked): never the token, nor its full hash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// The first 12 hex digits of its SHA-256: what `gantry token revoke` takes.
    pub id: String,
    pub role: String,
    pub team: Option<String>,
    pub label: String,
    /// The Unix account its jobs run as (`--user`), if it names one.
    pub user: Option<String>,
    /// Wall-clock Unix seconds.
    pub created_at: f64,
    pub expires_at: Option<f64>,
    pub revoked_at: Option<f64>,
    /// active, expired or revoked.
    pub status: String,
}

/// A token just made (`POST /v1/tokens`): shown once, with the certificate a client over TCP
/// pins when the daemon serves TLS.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MintedToken {
    pub token: String,
    pub role: String,
    pub tls_fingerprint: Option<String>,
}

impl Access {
    pub fn operator() -> Access {
        Access {
            role: Role::Operator,
            team: None,
        }
    }

    /// Why this caller may not change a job of `team`, if it may not.
    pub fn forbids_job(&self, team: &str) -> Option<String> {
        use Role;
        match (self.role, &self.team) {
            (Role::Operator, _) => None,
            (Role::Researcher, Some(mine)) if mine == team => None,
            (Role::Researcher, Some(mine)) => Some(format!(
                "your researcher token may change team {mine}'s jobs only; this one is {team}'s"
            )),
            _ => Some(format!(
                "your {} token may not change jobs; ask for a researcher or operator token",
                self.role
            )),
        }
    }

    /// Why this caller may not apply a reclaim plan, if it may not.
    pub fn forbids_reclaim(&self) -> Option<String> {
        (self.role != Role::Operator).then(|| {
            format!(
                "applying a reclaim needs an operator token (yours: {})",
                self.role
            )
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Role {
    /// Reads everything.
    Viewer,
    /// Submits, and changes the jobs of its own team.
    Researcher,
    /// Everything: any job, reclaim, tokens.
    Operator,
}

impl Role {
    pub const ALL: [Role; 3] = [Role::Viewer, Role::Researcher, Role::Operator];
    pub fn name(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Researcher => "researcher",
            Role::Operator => "operator",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        Role::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| format!("unknown role `{s}`; roles: viewer, researcher, operator"))
    }
}

/// What an operator or researcher can do to one job.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    Cancel,
    Hold,
    Release,
    Preempt,
}

impl Action {
    pub const ALL: [Action; 4] = [
        Action::Cancel,
        Action::Hold,
        Action::Release,
        Action::Preempt,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Action::Cancel => "cancel",
            Action::Hold => "hold",
            Action::Release => "release",
            Action::Preempt => "preempt",
        }
    }
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|a| a.name() == s)
    }
}

pub use self::Action as JobAction;

/// A change the console asks of the daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JobRequest {
    pub id: i64,
    pub action: JobAction,
}
