//! `gantry token`: bearer tokens for a TCP daemon, made, listed and revoked (operators only).

use super::remote::Target;
use super::table::cell;
use super::{print_as, CliError, Output};
use gantry::api::{MintedToken, TokenInfo};
use gantry::client::http::encode;

#[derive(clap::Subcommand)]
pub enum TokenCmd {
    /// Creates an API token (printed once; the daemon keeps only its hash).
    Create {
        #[arg(long)]
        role: String,
        /// A researcher's team: the only team whose jobs the token may change.
        #[arg(long)]
        team: Option<String>,
        /// A name for events and audits (a note: never who the token's jobs run as).
        #[arg(long)]
        label: Option<String>,
        /// The Unix account on the daemon's host its jobs run as (a root daemon runs nothing
        /// on its own host for a token without one).
        #[arg(long)]
        user: Option<String>,
        /// How long it is accepted: 90d, 12h, 1h30m (forever when absent).
        #[arg(long)]
        expires_in: Option<String>,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Lists the tokens: id, role, team, label, when created and when it expires, status
    /// (never the tokens themselves).
    List {
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
    /// Revokes a token at once, on every listener (ID: the ID column of `token list`).
    Revoke {
        id: String,
        #[arg(short, long, value_enum, default_value_t = Output::Table)]
        output: Output,
    },
}

pub fn run(t: &Target, cmd: TokenCmd) -> Result<(), CliError> {
    let (role, team, label, user, expires_in, output) = match cmd {
        TokenCmd::Create {
            role,
            team,
            label,
            user,
            expires_in,
            output,
        } => (role, team, label, user, expires_in, output),
        TokenCmd::List { output } => {
            let v: Vec<TokenInfo> = t.client()?.call("GET", "/v1/tokens", None)?;
            return match output {
                Output::Json | Output::Yaml => print_as(output, &v).map_err(CliError::from),
                Output::Table | Output::Wide => {
                    print_tokens(&v);
                    Ok(())
                }
            };
        }
        TokenCmd::Revoke { id, output } => {
            let v: TokenInfo =
                t.client()?
                    .call("DELETE", &format!("/v1/tokens/{}", encode(&id)), None)?;
            return match output {
                Output::Json | Output::Yaml => print_as(output, &v).map_err(CliError::from),
                Output::Table | Output::Wide => {
                    println!("token {} ({}) revoked", v.id, v.label);
                    Ok(())
                }
            };
        }
    };
    let body =
        serde_json::json!({ "role": role, "team": team, "label": label, "user": user, "expires_in": expires_in })
            .to_string();
    let v: MintedToken = t
        .client()?
        .call("POST", "/v1/tokens", Some(body.as_bytes()))?;
    match output {
        Output::Json | Output::Yaml => print_as(output, &v).map_err(CliError::from),
        Output::Table | Output::Wide => {
            println!("{}", v.token);
            eprintln!("(shown once: the daemon keeps only its SHA-256. Use it as GANTRY_TOKEN or --token.)");
            // Stdout stays the token alone (scripts capture it); the pin goes with the advice.
            if let Some(fp) = &v.tls_fingerprint {
                eprintln!("(the daemon serves TLS with certificate {fp}: connect with --connect https://HOST:PORT --tls-fingerprint {fp}, or GANTRY_TLS_FINGERPRINT)");
            }
            Ok(())
        }
    }
}

fn print_tokens(list: &[TokenInfo]) {
    let when = |x: Option<f64>| x.map_or("-".to_string(), gantry::daemon::auth::rfc3339);
    println!(
        "{:<12}  {:<10}  {:<14}  {:<20}  {:<12}  {:<20}  {:<20}  STATUS",
        "ID", "ROLE", "TEAM", "LABEL", "USER", "CREATED", "EXPIRES"
    );
    for t in list {
        println!(
            "{:<12}  {:<10}  {}  {}  {}  {:<20}  {:<20}  {}",
            t.id,
            t.role,
            cell(t.team.as_deref().unwrap_or("-"), 14),
            cell(&t.label, 20),
            cell(t.user.as_deref().unwrap_or("-"), 12),
            when(Some(t.created_at)),
            when(t.expires_at),
            t.status
        );
    }
}
