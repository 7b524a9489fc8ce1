//! The GPUs an instance type holds, as SkyPilot infers a task's accelerators from its
//! `instance_type` when its cloud is known: AWS and Lambda from the catalogs gantry carries,
//! GCP from its machine families (GCP's catalog keeps a2/a3/a4 hosts and their GPUs in rows of
//! their own, paired by SkyPilot's code, not its data).

use crate::catalog::{self, Cloud};

/// `(model, count)` of `instance_type` on `cloud` (`aws`, `gcp`, `lambda`); `None` where the
/// type holds no GPU or gantry does not know it.
pub fn accelerators_of(cloud: &str, instance_type: &str) -> Option<(String, u8)> {
    match cloud {
        "aws" => catalog::holds(Cloud::Aws, instance_type).map(|(m, n)| (m.to_string(), n)),
        "lambda" => catalog::holds(Cloud::Lambda, instance_type).map(|(m, n)| (m.to_string(), n)),
        "gcp" => gcp(instance_type),
        _ => None,
    }
}

/// GCP's GPU machine families: `a2-highgpu-4g` is 4 A100s; `g2-standard-N` has L4s by size.
fn gcp(t: &str) -> Option<(String, u8)> {
    let count = |rest: &str| rest.strip_suffix('g').and_then(|n| n.parse::<u8>().ok());
    let (model, n) = if let Some(rest) = t.strip_prefix("a2-highgpu-") {
        ("A100", count(rest)?)
    } else if let Some(rest) = t.strip_prefix("a2-megagpu-") {
        ("A100", count(rest)?)
    } else if let Some(rest) = t.strip_prefix("a2-ultragpu-") {
        ("A100-80GB", count(rest)?)
    } else if let Some(rest) = t
        .strip_prefix("a3-highgpu-")
        .or_else(|| t.strip_prefix("a3-edgegpu-"))
    {
        ("H100", count(rest)?)
    } else if let Some(rest) = t.strip_prefix("a3-megagpu-") {
        ("H100-MEGA", count(rest)?)
    } else if let Some(rest) = t.strip_prefix("a3-ultragpu-") {
        ("H200", count(rest)?)
    } else if let Some(rest) = t.strip_prefix("a4-highgpu-") {
        ("B200", count(rest)?)
    } else if let Some(size) = t.strip_prefix("g2-standard-") {
        let n = match size.parse::<u16>().ok()? {
            4 | 8 | 12 | 16 | 32 => 1,
            24 => 2,
            48 => 4,
            96 => 8,
            _ => return None,
        };
        ("L4", n)
    } else {
        return None;
    };
    Some((model.to_string(), n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_types_name_their_gpus() {
        let of = |c, t| accelerators_of(c, t).map(|(m, n)| format!("{m}:{n}"));
        assert_eq!(of("gcp", "a3-highgpu-8g").as_deref(), Some("H100:8"));
        assert_eq!(of("gcp", "a2-ultragpu-4g").as_deref(), Some("A100-80GB:4"));
        assert_eq!(of("gcp", "g2-standard-48").as_deref(), Some("L4:4"));
        assert_eq!(of("gcp", "n1-standard-8"), None);
        assert_eq!(of("aws", "p4d.24xlarge").as_deref(), Some("A100:8"));
        assert_eq!(of("aws", "m5.large"), None);
        assert_eq!(of("kubernetes", "a3-highgpu-8g"), None);
    }
}
