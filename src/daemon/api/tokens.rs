//! Bearer tokens: made (`gantry token create`), listed and revoked, by operators.

use super::*;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenBody {
    role: String,
    team: Option<String>,
    #[serde(default)]
    label: Option<String>,
    /// How long it is accepted: "90d", "12h", "1h30m" or seconds; forever when absent.
    #[serde(default)]
    expires_in: Option<String>,
    /// The Unix account on the daemon's host its jobs run as.
    #[serde(default)]
    user: Option<String>,
}

pub(super) async fn token(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    body: Body,
) -> Result<Response, ApiError> {
    require(&caller, Role::Operator, "creating tokens")?;
    let b: TokenBody = decode(&body_bytes(&api, body).await?)?;
    let role: Role = b.role.parse().map_err(ApiError::bad_request)?;
    let label = b.label.unwrap_or_else(|| role.name().to_string());
    if label.chars().any(char::is_control) || label.len() > 100 {
        return Err(ApiError::bad_request(
            "label: at most 100 characters, no control characters",
        ));
    }
    if let Some(u) = &b.user {
        // Refused here, not when its first job starts: a token for nobody runs nothing.
        if !crate::daemon::auth::user_exists(u) {
            return Err(ApiError::bad_request(format!(
                "user `{}`: no Unix account of that name on the daemon's host; a token's user is who its jobs run as here (create the account, or leave --user out for a token that runs nothing on this host)",
                u.escape_debug()
            )));
        }
    }
    let expires_in = match b.expires_in.as_deref() {
        None => None,
        Some(text) => match crate::spec::parse_duration(text) {
            Some(s) if s > 0.0 && s <= 10.0 * 365.0 * 86_400.0 => Some(s),
            _ => {
                return Err(ApiError::bad_request(format!(
                "expires_in `{}`: expected a duration from 1s to 10 years, like 90d, 12h or 1h30m",
                text.escape_debug()
            )))
            }
        },
    };
    let token = api
        .handle
        .call(|reply| Request::Token {
            role,
            team: b.team,
            label,
            user: b.user,
            expires_in,
            reply,
        })
        .await?;
    Ok(json(
        StatusCode::CREATED,
        &crate::api::MintedToken {
            token,
            role: role.name().to_string(),
            tls_fingerprint: api.tls_fingerprint.as_deref().map(str::to_string),
        },
    ))
}

pub(super) async fn tokens(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    require(&caller, Role::Operator, "listing tokens")?;
    let list = api.handle.call(|reply| Request::Tokens { reply }).await?;
    Ok(ok(&list))
}

/// `GET /v1/clouds`: the cloud pools the journal knows, in the fleet file or left it.
pub(super) async fn clouds(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
) -> Result<Response, ApiError> {
    require(&caller, Role::Operator, "listing the cloud pools' settings")?;
    let list = api
        .handle
        .call(|reply| Request::CloudPools { reply })
        .await?;
    Ok(ok(&list))
}

pub(super) async fn revoke(
    State(api): State<Api>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<Response, ApiError> {
    require(&caller, Role::Operator, "revoking tokens")?;
    let info = api
        .handle
        .call(|reply| Request::Revoke { id, caller, reply })
        .await?;
    Ok(ok(&info))
}
