//! Placement policies. Each scores one candidate (a node class and a GPU choice on it); the
//! lowest key wins. All six share one code path (`place.rs`), so side-by-side runs compare
//! policies, not implementations.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    /// Uniformly random among feasible nodes and GPUs.
    Random,
    /// Kubernetes-default-like: the least allocated node, the emptiest GPU.
    Spread,
    /// The node with the least resources left after placement (CPU, memory and GPU weighed
    /// equally), the fullest GPU that fits.
    BestFit,
    /// GPU packing: a partly used GPU first, then an idle GPU on a used node, then an idle node.
    Packing,
    /// Fragmentation gradient descent (Weng et al., ATC'23): least growth of expected GPU
    /// fragmentation, from a shape distribution given up front, CPU checked, memory not.
    Fgd,
    /// gantry's default: fragmentation-aware with the shape distribution learned online from
    /// arrivals, CPU and memory weighed with GPU, and best fit to break ties. See `place.rs`.
    Gantry,
}

impl Policy {
    pub const ALL: [Policy; 6] = [
        Policy::Random,
        Policy::Spread,
        Policy::BestFit,
        Policy::Packing,
        Policy::Fgd,
        Policy::Gantry,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Policy::Random => "random",
            Policy::Spread => "spread",
            Policy::BestFit => "best-fit",
            Policy::Packing => "packing",
            Policy::Fgd => "fgd",
            Policy::Gantry => "gantry",
        }
    }

    /// Whether the policy scores by expected fragmentation.
    pub fn is_fragmentation_aware(self) -> bool {
        matches!(self, Policy::Fgd | Policy::Gantry)
    }

    /// Whether the policy prefers to fill partly used domains (true) or spread out (false).
    pub fn packs(self) -> bool {
        !matches!(self, Policy::Spread | Policy::Random)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim().to_ascii_lowercase();
        let p = match s.as_str() {
            "random" => Policy::Random,
            "spread" | "first-fit" | "least-allocated" => Policy::Spread,
            "best-fit" | "bestfit" => Policy::BestFit,
            "packing" | "gpu-packing" => Policy::Packing,
            "fgd" => Policy::Fgd,
            "gantry" => Policy::Gantry,
            _ => {
                return Err(format!(
                    "unknown policy `{s}`; allowed: {} (first-fit and least-allocated mean spread)",
                    Policy::ALL.map(|p| p.name()).join(", ")
                ))
            }
        };
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        }
        assert_eq!("first-fit".parse::<Policy>().unwrap(), Policy::Spread);
        let err = "tetris".parse::<Policy>().unwrap_err();
        assert!(err.contains("allowed: random, spread"), "{err}");
    }
}
