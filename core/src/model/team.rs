//! Teams own quota and budget; priority classes order the queue. Validated together, because
//! most mistakes are relations (a borrowing limit above what the cohort could ever lend).

use super::fleet::ModelId;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// A priority class; higher `value` goes first. Defaults: serving > production > experiment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriorityClass {
    pub name: String,
    pub value: i32,
}

pub fn default_classes() -> Vec<PriorityClass> {
    [("serving", 1000), ("production", 500), ("experiment", 100)]
        .into_iter()
        .map(|(n, v)| PriorityClass {
            name: n.to_string(),
            value: v,
        })
        .collect()
}

/// GPUs a team is guaranteed, and how far it may borrow from and lend to its cohort.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Quota {
    /// Guaranteed GPUs in total.
    pub guaranteed: u32,
    /// Optional guarantees per GPU model (each ≤ the total).
    pub per_model: Vec<(ModelId, u32)>,
    /// GPUs above the guarantee this team may borrow from idle cohort capacity.
    pub borrow_limit: u32,
    /// GPUs of its idle guarantee this team lends at most (None: all of it).
    pub lend_limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Team {
    pub name: String,
    /// Fair-share weight (> 0).
    pub weight: f64,
    /// `None`: no quota (the team may use any free GPU, and lends nothing).
    pub quota: Option<Quota>,
    pub cohort: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum TeamError {
    #[error("team `{0}` appears twice")]
    DuplicateTeam(String),
    #[error("team `{team}`: weight must be a finite number > 0 (got {weight})")]
    BadWeight { team: String, weight: f64 },
    #[error("team `{team}`: per-model guarantee {per_model} exceeds the total guarantee {total}")]
    PerModelAboveTotal {
        team: String,
        per_model: u32,
        total: u32,
    },
    #[error("team `{team}`: borrow limit {limit} is above what cohort `{cohort}` could ever lend ({lendable} GPUs)")]
    BorrowAboveCohort {
        team: String,
        cohort: String,
        limit: u32,
        lendable: u32,
    },
    #[error("team `{team}`: a borrow limit needs a cohort to borrow from")]
    BorrowWithoutCohort { team: String },
    #[error("priority class `{0}` appears twice")]
    DuplicateClass(String),
    #[error("no priority classes defined; at least one is needed")]
    NoClasses,
}

/// Checks teams and classes together. Negative quotas cannot be expressed (unsigned fields);
/// a file that says `-4` fails when it is parsed, with its position.
pub fn validate(teams: &[Team], classes: &[PriorityClass]) -> Result<(), TeamError> {
    if classes.is_empty() {
        return Err(TeamError::NoClasses);
    }
    for (i, c) in classes.iter().enumerate() {
        if classes[..i].iter().any(|d| d.name == c.name) {
            return Err(TeamError::DuplicateClass(c.name.clone()));
        }
    }
    let mut lendable: HashMap<&str, u32> = HashMap::new();
    for (i, t) in teams.iter().enumerate() {
        if teams[..i].iter().any(|u| u.name == t.name) {
            return Err(TeamError::DuplicateTeam(t.name.clone()));
        }
        if !(t.weight.is_finite() && t.weight > 0.0) {
            return Err(TeamError::BadWeight {
                team: t.name.clone(),
                weight: t.weight,
            });
        }
        if let Some(q) = &t.quota {
            if let Some(&(_, m)) = q.per_model.iter().find(|(_, m)| *m > q.guaranteed) {
                return Err(TeamError::PerModelAboveTotal {
                    team: t.name.clone(),
                    per_model: m,
                    total: q.guaranteed,
                });
            }
            if let Some(c) = &t.cohort {
                *lendable.entry(c).or_default() +=
                    q.lend_limit.unwrap_or(q.guaranteed).min(q.guaranteed);
            }
        }
    }
    for t in teams {
        let Some(q) = &t.quota else { continue };
        if q.borrow_limit == 0 {
            continue;
        }
        let Some(c) = &t.cohort else {
            return Err(TeamError::BorrowWithoutCohort {
                team: t.name.clone(),
            });
        };
        let own = q.lend_limit.unwrap_or(q.guaranteed).min(q.guaranteed);
        let others = lendable.get(c.as_str()).copied().unwrap_or(0) - own;
        if q.borrow_limit > others {
            return Err(TeamError::BorrowAboveCohort {
                team: t.name.clone(),
                cohort: c.clone(),
                limit: q.borrow_limit,
                lendable: others,
            });
        }
    }
    Ok(())
}

/// How long a team's fair-share usage takes to count half as much: a week, as Slurm's
/// `PriorityDecayHalfLife` defaults to.
pub const FAIR_SHARE_HALF_LIFE_S: f64 = 7.0 * 86_400.0;

/// What holding `gpus` from `from` to `to` adds to a team's usage as counted at `at`:
/// GPU-seconds, each decayed with the half-life from when it was used to `at` (grown, for
/// use after `at`: decayed to a later time, it is what it would have been counted then).
pub fn used(gpus: f64, from: f64, to: f64, at: f64, half_life_s: f64) -> f64 {
    if to <= from {
        return 0.0;
    }
    if half_life_s <= 0.0 {
        return gpus * (to - from);
    }
    let k = std::f64::consts::LN_2 / half_life_s;
    gpus / k * ((-k * (at - to)).exp() - (-k * (at - from)).exp())
}

/// Usage decayed with a half-life: `usage × 2^(−dt / half_life) + added`.
pub fn decay(usage: f64, dt_s: f64, half_life_s: f64) -> f64 {
    if half_life_s <= 0.0 {
        return usage;
    }
    usage * (-dt_s.max(0.0) / half_life_s * std::f64::consts::LN_2).exp()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn team(name: &str, g: u32, borrow: u32, cohort: Option<&str>) -> Team {
        Team {
            name: name.to_string(),
            weight: 1.0,
            quota: Some(Quota {
                guaranteed: g,
                borrow_limit: borrow,
                ..Quota::default()
            }),
            cohort: cohort.map(str::to_string),
        }
    }

    #[test]
    fn a_borrow_limit_above_the_cohort_is_refused_with_numbers() {
        let teams = [team("a", 8, 8, Some("c")), team("b", 4, 0, Some("c"))];
        let e = validate(&teams, &default_classes()).unwrap_err();
        assert_eq!(
            e.to_string(),
            "team `a`: borrow limit 8 is above what cohort `c` could ever lend (4 GPUs)"
        );
        let ok = [team("a", 8, 4, Some("c")), team("b", 4, 0, Some("c"))];
        assert!(validate(&ok, &default_classes()).is_ok());
    }

    #[test]
    fn other_mistakes_are_named() {
        let e = validate(&[team("a", 8, 2, None)], &default_classes()).unwrap_err();
        assert!(matches!(e, TeamError::BorrowWithoutCohort { .. }));
        let e = validate(
            &[team("a", 1, 0, None), team("a", 1, 0, None)],
            &default_classes(),
        )
        .unwrap_err();
        assert_eq!(e, TeamError::DuplicateTeam("a".to_string()));
        let mut bad = team("w", 1, 0, None);
        bad.weight = 0.0;
        assert!(matches!(
            validate(&[bad], &default_classes()),
            Err(TeamError::BadWeight { .. })
        ));
        assert_eq!(validate(&[], &[]), Err(TeamError::NoClasses));
    }

    #[test]
    fn usage_counts_gpu_seconds_decayed_from_when_they_were_used() {
        // No half-life: GPU-seconds.
        assert_eq!(used(2.0, 10.0, 20.0, 99.0, 0.0), 20.0);
        assert_eq!(used(2.0, 20.0, 10.0, 99.0, 3600.0), 0.0);
        // A second just now counts about a second; an hour one half-life ago counts half.
        assert!((used(1.0, 0.0, 1.0, 1.0, 86_400.0) - 1.0).abs() < 1e-4);
        let h = 3600.0;
        let long_ago = used(1.0, -h - 1.0, -h, 0.0, h);
        assert!((long_ago - 0.5).abs() < 1e-3, "{long_ago}");
        // Counted in two pieces, each decayed to the same time, it is the whole.
        let whole = used(3.0, 0.0, 500.0, 800.0, h);
        let parts = used(3.0, 0.0, 200.0, 800.0, h) + used(3.0, 200.0, 500.0, 800.0, h);
        assert!((whole - parts).abs() < 1e-9);
        // Counted at 500 then decayed to 800, it is what it is counted at 800.
        let then = decay(used(3.0, 0.0, 500.0, 500.0, h), 300.0, h);
        assert!((then - whole).abs() < 1e-9);
        // A piece after the time it is counted at, decayed to its end, is that piece.
        let ahead = decay(used(3.0, 100.0, 150.0, 100.0, h), 50.0, h);
        assert!((ahead - used(3.0, 100.0, 150.0, 150.0, h)).abs() < 1e-9);
    }

    #[test]
    fn usage_halves_every_half_life() {
        assert!((decay(100.0, 3600.0, 3600.0) - 50.0).abs() < 1e-9);
        assert!((decay(100.0, 7200.0, 3600.0) - 25.0).abs() < 1e-9);
        assert_eq!(decay(100.0, 10.0, 0.0), 100.0);
    }
}
