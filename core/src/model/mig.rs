//! Multi-Instance GPU (MIG) geometry.
//!
//! A100 and H100 class GPUs split into 7 compute slices and 8 memory slices. A profile such as
//! `3g.40gb` takes 3 compute slices and a contiguous run of memory slices that may start only at
//! certain offsets (NVIDIA's placement table). A GPU's MIG state is therefore two small numbers:
//! a bitmask of the memory slices in use and the count of compute slices in use.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A MIG profile, named like NVIDIA names it: `{compute}g.{memory}gb`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MigProfile {
    pub compute: u8,
    pub memory_gb: u16,
}

impl MigProfile {
    pub fn parse(text: &str) -> Option<MigProfile> {
        let text = text.trim().to_ascii_lowercase();
        let (c, m) = text.split_once("g.")?;
        let m = m.strip_suffix("gb")?;
        let compute: u8 = c.parse().ok()?;
        let memory_gb: u16 = m.parse().ok()?;
        if compute == 0 || compute > 7 || memory_gb == 0 {
            return None;
        }
        Some(MigProfile { compute, memory_gb })
    }
}

impl fmt::Display for MigProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}g.{}gb", self.compute, self.memory_gb)
    }
}

/// How one GPU model splits: the size of a memory slice and the profiles it offers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MigGeometry {
    /// GB of one memory slice (10 on an 80 GB H100, 5 on a 40 GB A100).
    pub slice_gb: u16,
}

/// Compute slices on an A100/H100-class GPU.
pub const MIG_COMPUTE_SLICES: u8 = 7;
/// Memory slices on an A100/H100-class GPU.
pub const MIG_MEMORY_SLICES: u8 = 8;

impl MigGeometry {
    /// Memory slices a profile needs on this geometry, if the profile exists here.
    pub fn memory_slices(&self, profile: MigProfile) -> Option<u8> {
        if !profile.memory_gb.is_multiple_of(self.slice_gb) {
            return None;
        }
        let slices = profile.memory_gb / self.slice_gb;
        // The profiles NVIDIA ships: 1g with 1 or 2 slices, 2g with 2, 3g and 4g with 4, 7g with 8.
        let ok = matches!(
            (profile.compute, slices),
            (1, 1) | (1, 2) | (2, 2) | (3, 4) | (4, 4) | (7, 8)
        );
        ok.then_some(slices as u8)
    }

    /// Offsets (in memory slices) where an instance of this profile may start.
    pub fn starts(&self, profile: MigProfile) -> &'static [u8] {
        match (profile.compute, self.memory_slices(profile)) {
            (1, Some(1)) => &[0, 1, 2, 3, 4, 5, 6],
            (1, Some(2)) => &[0, 2, 4, 6],
            (2, Some(2)) => &[0, 2, 4],
            (3, Some(4)) => &[0, 4],
            (4, Some(4)) => &[0],
            (7, Some(8)) => &[0],
            _ => &[],
        }
    }

    /// The profiles of this geometry, smallest first.
    pub fn profiles(&self) -> Vec<MigProfile> {
        [(1, 1), (1, 2), (2, 2), (3, 4), (4, 4), (7, 8)]
            .iter()
            .map(|&(c, s)| MigProfile {
                compute: c,
                memory_gb: s * self.slice_gb,
            })
            .collect()
    }
}

/// The MIG instances in use on one GPU.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
pub struct MigState {
    /// Bit i set: memory slice i is taken.
    pub memory_mask: u8,
    /// Compute slices taken.
    pub compute_used: u8,
}

impl MigState {
    fn run_mask(start: u8, len: u8) -> u8 {
        (((1u16 << len) - 1) << start) as u8
    }

    /// The first offset where `profile` fits, if any.
    pub fn first_fit(&self, geometry: &MigGeometry, profile: MigProfile) -> Option<u8> {
        let len = geometry.memory_slices(profile)?;
        if self.compute_used + profile.compute > MIG_COMPUTE_SLICES {
            return None;
        }
        geometry.starts(profile).iter().copied().find(|&s| {
            s + len <= MIG_MEMORY_SLICES && self.memory_mask & Self::run_mask(s, len) == 0
        })
    }

    /// The offset that keeps the most room for later instances: among the offsets where
    /// `profile` fits, the one after which the most (profile, offset) pairs still fit. First fit
    /// would put a 3g slice at 0 and make NVIDIA's own 3g+2g+1g+1g layout impossible.
    pub fn best_start(&self, geometry: &MigGeometry, profile: MigProfile) -> Option<u8> {
        let len = geometry.memory_slices(profile)?;
        let profiles = geometry.profiles();
        geometry
            .starts(profile)
            .iter()
            .copied()
            .filter(|&s| self.can_take(geometry, profile, s) && s + len <= MIG_MEMORY_SLICES)
            .map(|s| {
                let mut after = *self;
                after.take(geometry, profile, s);
                let room: usize = profiles
                    .iter()
                    .map(|&p| {
                        geometry
                            .starts(p)
                            .iter()
                            .filter(|&&t| after.can_take(geometry, p, t))
                            .count()
                    })
                    .sum();
                (room, std::cmp::Reverse(s))
            })
            .max()
            .map(|(_, std::cmp::Reverse(s))| s)
    }

    /// Whether an instance of `profile` can start at `start`.
    pub fn can_take(&self, geometry: &MigGeometry, profile: MigProfile, start: u8) -> bool {
        let Some(len) = geometry.memory_slices(profile) else {
            return false;
        };
        geometry.starts(profile).contains(&start)
            && start + len <= MIG_MEMORY_SLICES
            && self.memory_mask & Self::run_mask(start, len) == 0
            && self.compute_used + profile.compute <= MIG_COMPUTE_SLICES
    }

    pub fn take(&mut self, geometry: &MigGeometry, profile: MigProfile, start: u8) -> bool {
        if !self.can_take(geometry, profile, start) {
            return false;
        }
        let len = geometry.memory_slices(profile).unwrap_or(0);
        self.memory_mask |= Self::run_mask(start, len);
        self.compute_used += profile.compute;
        true
    }

    pub fn give_back(&mut self, geometry: &MigGeometry, profile: MigProfile, start: u8) -> bool {
        let Some(len) = geometry.memory_slices(profile) else {
            return false;
        };
        let mask = Self::run_mask(start, len);
        if self.memory_mask & mask != mask || self.compute_used < profile.compute {
            return false;
        }
        self.memory_mask &= !mask;
        self.compute_used -= profile.compute;
        true
    }

    pub fn is_empty(&self) -> bool {
        self.memory_mask == 0 && self.compute_used == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: MigGeometry = MigGeometry { slice_gb: 10 };

    #[test]
    fn parses_and_prints_profiles() {
        let p = MigProfile::parse("3g.40gb").unwrap();
        assert_eq!(p.to_string(), "3g.40gb");
        assert_eq!(MigProfile::parse("0g.10gb"), None);
        assert_eq!(MigProfile::parse("8g.10gb"), None);
        assert_eq!(MigProfile::parse("3g40gb"), None);
    }

    #[test]
    fn seven_small_slices_fill_a_gpu() {
        let p = MigProfile::parse("1g.10gb").unwrap();
        let mut s = MigState::default();
        for i in 0..7 {
            let at = s.first_fit(&H100, p).unwrap();
            assert_eq!(at, i);
            assert!(s.take(&H100, p, at));
        }
        assert_eq!(s.first_fit(&H100, p), None, "compute slices are exhausted");
    }

    #[test]
    fn a_3g_and_a_4g_share_a_gpu_but_two_4g_do_not() {
        let p3 = MigProfile::parse("3g.40gb").unwrap();
        let p4 = MigProfile::parse("4g.40gb").unwrap();
        let mut s = MigState::default();
        assert!(s.take(&H100, p4, 0));
        assert_eq!(s.first_fit(&H100, p4), None);
        assert_eq!(s.first_fit(&H100, p3), Some(4));
        assert!(s.take(&H100, p3, 4));
        assert!(s.give_back(&H100, p4, 0));
        assert!(!s.give_back(&H100, p4, 0), "double release is refused");
    }

    #[test]
    fn best_start_keeps_room_for_nvidias_3_2_1_1_layout() {
        let mut s = MigState::default();
        for name in ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"] {
            let p = MigProfile::parse(name).unwrap();
            let at = s
                .best_start(&H100, p)
                .unwrap_or_else(|| panic!("{name} should fit"));
            assert!(s.take(&H100, p, at));
        }
        assert_eq!(s.compute_used, 7);
        assert_eq!(s.memory_mask, 0xff);
    }

    #[test]
    fn unknown_profile_does_not_fit() {
        let odd = MigProfile {
            compute: 5,
            memory_gb: 50,
        };
        assert_eq!(H100.memory_slices(odd), None);
        assert_eq!(MigState::default().first_fit(&H100, odd), None);
    }
}
