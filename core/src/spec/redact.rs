//! What a job's spec looks like to someone who may not read its secrets: the values of
//! `secrets` are never shown to anyone, and those of `envs` only to the job's own team and
//! operators (an environment often carries tokens: `HF_TOKEN`, `WANDB_API_KEY`).

use serde_yaml_ng::Value;

/// Shown instead of a hidden value.
pub const REDACTED: &str = "<redacted>";

/// `text` with the values of `secrets` (and of `envs` unless `show_envs`) replaced. A spec
/// with nothing to hide comes back as written; one that must change is re-rendered from its
/// values (its comments and layout are not kept).
pub fn redact(text: &str, show_envs: bool) -> String {
    let Ok(mut doc) = serde_yaml_ng::from_str::<Value>(text) else {
        // The journal holds only specs that parsed; if one does not, show none of it.
        return "# spec hidden: it could not be read to hide its secrets\n".to_string();
    };
    let Some(map) = doc.as_mapping_mut() else {
        return text.to_string();
    };
    let mut changed = false;
    for key in ["secrets", "envs"] {
        if key == "envs" && show_envs {
            continue;
        }
        if let Some(Value::Mapping(m)) = map.get_mut(key) {
            for (_, v) in m.iter_mut() {
                if !v.is_null() {
                    *v = Value::String(REDACTED.to_string());
                    changed = true;
                }
            }
        }
    }
    if !changed {
        return text.to_string();
    }
    serde_yaml_ng::to_string(&doc).unwrap_or_else(|_| "# spec hidden\n".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SPEC: &str =
        "name: t\nenvs:\n  HF_TOKEN: hf_abc\n  N: 3\nsecrets:\n  WANDB_API_KEY: k-123\nrun: echo\n";

    #[test]
    fn secrets_are_hidden_from_everyone_and_envs_from_others() {
        let owner = redact(SPEC, true);
        assert!(
            !owner.contains("k-123") && owner.contains("hf_abc"),
            "{owner}"
        );
        let other = redact(SPEC, false);
        assert!(
            !other.contains("k-123") && !other.contains("hf_abc"),
            "{other}"
        );
        assert!(other.contains("HF_TOKEN") && other.contains(REDACTED));
        let plain = "name: t\nrun: echo # hi\n";
        assert_eq!(redact(plain, false), plain);
    }

    #[test]
    fn an_aliased_secret_is_hidden_too() {
        let spec = "x: &k sekrit\nsecrets:\n  K: *k\nrun: echo\n";
        let out = redact(spec, true);
        assert!(!out.contains("secrets:\n  K: sekrit"), "{out}");
        assert!(out.contains(&format!("K: {REDACTED}")), "{out}");
    }
}
