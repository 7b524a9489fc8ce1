//! The token gantry shows slurmrestd (`X-SLURM-USER-TOKEN`): where it comes from, read again
//! at every request so a renewed one is taken without a restart, and what it says of itself
//! (whose it is, when it expires) to explain a refusal in words that fix it.
//!
//! `scontrol token` makes a JWT that lasts 1,800 s unless `lifespan=` says otherwise, for the
//! user who runs it (only root or SlurmUser may name another). A daemon outlives that: give
//! it a `token_file` that something renews (a cron line or systemd timer running
//! `scontrol token username=USER lifespan=…` into it), or a token with a long lifespan.
//! The claims are read, never verified: the key is slurmctld's, and it is slurmctld that
//! judges the token; gantry only reads them to say why it was refused.

use base64::Engine;
use std::path::PathBuf;

/// Where the token comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum Token {
    /// Given once (`SLURM_JWT` in the daemon's environment, or the CLI's).
    Fixed(String),
    /// Read from a file at each request (`token_file`): what `scontrol token` prints
    /// (`SLURM_JWT=…`) or the bare token.
    File(PathBuf),
}

impl Token {
    /// The pool's `token_file` where it names one, else `SLURM_JWT` where set.
    pub fn of(file: Option<&str>) -> Option<Token> {
        if let Some(f) = file {
            return Some(Token::File(PathBuf::from(f)));
        }
        std::env::var("SLURM_JWT")
            .ok()
            .filter(|t| !t.trim().is_empty())
            .map(|t| Token::Fixed(t.trim().to_string()))
    }

    /// The token now.
    pub fn read(&self) -> Result<String, String> {
        match self {
            Token::Fixed(t) => Ok(t.clone()),
            Token::File(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    format!(
                        "token_file {}: {e} (write it with `scontrol token username=USER lifespan=SECONDS > {}`)",
                        path.display(),
                        path.display()
                    )
                })?;
                let t = text.trim();
                let t = t.strip_prefix("SLURM_JWT=").unwrap_or(t).trim();
                if t.is_empty() {
                    return Err(format!("token_file {}: empty", path.display()));
                }
                Ok(t.to_string())
            }
        }
    }

    /// The Slurm user it was made for, where it says (read now).
    pub fn user(&self) -> Option<String> {
        claims(&self.read().ok()?)?.user
    }

    /// Where it came from, in a sentence's words.
    pub fn source(&self) -> String {
        match self {
            Token::Fixed(_) => "SLURM_JWT".to_string(),
            Token::File(p) => format!("token_file {}", p.display()),
        }
    }
}

/// What a Slurm JWT says of itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Claims {
    /// `sun`: the Slurm user it was made for.
    pub user: Option<String>,
    /// `exp`: when it stops being taken, Unix seconds.
    pub expires: Option<i64>,
}

/// The claims of `token`, where it is a JWT whose payload can be read.
pub fn claims(token: &str) -> Option<Claims> {
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let v: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    Some(Claims {
        user: v.get("sun").and_then(|s| s.as_str()).map(str::to_string),
        expires: v.get("exp").and_then(serde_json::Value::as_i64),
    })
}

/// Why slurmrestd would refuse `token` sent as `user` at `now` (Unix seconds), and the fix —
/// or `None` where the token itself shows no fault (then the key or the cluster is at fault).
pub fn fault(token: &str, source: &str, user: Option<&str>, now: i64) -> Option<String> {
    let Some(c) = claims(token) else {
        return Some(format!(
            "the token in {source} is not a JWT gantry can read: make one with `scontrol token username=USER` (it prints SLURM_JWT=…)"
        ));
    };
    if let Some(exp) = c.expires.filter(|&e| e <= now) {
        return Some(format!(
            "the token in {source} expired {} ago ({}); `scontrol token` tokens last 1,800 s unless made with lifespan=SECONDS — make one that lasts (`scontrol token username={} lifespan=86400`), or give the pool a token_file that a timer renews",
            span(now - exp),
            chrono::DateTime::from_timestamp(exp, 0)
                .map_or(exp.to_string(), |t| t.format("%Y-%m-%d %H:%M:%SZ").to_string()),
            c.user.as_deref().unwrap_or("USER")
        ));
    }
    match (c.user.as_deref(), user) {
        (Some(theirs), Some(sent)) if theirs != sent => Some(format!(
            "the token in {source} is {theirs}'s, but gantry reads as {sent}: set `user = \"{theirs}\"` in the pool's [pools.slurm] (the CLI: `--user {theirs}`), or make a token for {sent} (`scontrol token username={sent}`)"
        )),
        _ => None,
    }
}

/// How long a token has left, where it says (a line for the pool's row when it is short).
pub fn left(token: &str, now: i64) -> Option<i64> {
    claims(token)?.expires.map(|e| e - now)
}

fn span(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s} s"),
        s if s < 7200 => format!("{} min", s / 60),
        s => format!("{} h", s / 3600),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token as `scontrol token` makes one: header, claims, signature.
    fn jwt(claims: &str) -> String {
        let b = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        format!("{}.{}.sig", b(r#"{"alg":"HS256","typ":"JWT"}"#), b(claims))
    }

    #[test]
    fn a_token_says_whose_it_is_and_when_it_ends() {
        let t = jwt(r#"{"exp":1000,"iat":100,"sun":"alice"}"#);
        assert_eq!(
            claims(&t),
            Some(Claims {
                user: Some("alice".into()),
                expires: Some(1000)
            })
        );
        assert_eq!(left(&t, 400), Some(600));
        assert_eq!(fault(&t, "SLURM_JWT", Some("alice"), 500), None);
        let e = fault(&t, "SLURM_JWT", Some("bob"), 500).unwrap();
        assert!(
            e.contains("alice's, but gantry reads as bob")
                && e.contains("user = \"alice\"")
                && e.contains("--user alice"),
            "{e}"
        );
        let e = fault(&t, "SLURM_JWT", Some("alice"), 1300).unwrap();
        assert!(
            e.contains("expired 5 min ago")
                && e.contains("1,800 s")
                && e.contains("lifespan=86400"),
            "{e}"
        );
        assert!(fault("not-a-jwt", "SLURM_JWT", None, 0)
            .unwrap()
            .contains("not a JWT"));
    }

    #[test]
    fn a_token_file_is_read_again_at_each_use() {
        let dir = std::env::temp_dir().join(format!("gantry-token-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("slurm.jwt");
        let t = Token::File(path.clone());
        assert!(t
            .read()
            .unwrap_err()
            .contains("scontrol token username=USER"));
        std::fs::write(&path, "SLURM_JWT=first\n").unwrap();
        assert_eq!(t.read().unwrap(), "first");
        std::fs::write(&path, "second").unwrap();
        assert_eq!(t.read().unwrap(), "second");
        std::fs::write(&path, "\n").unwrap();
        assert!(t.read().unwrap_err().contains("empty"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
