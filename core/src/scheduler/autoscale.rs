//! How many replicas a service wants: SkyServe's request-rate autoscaler with hysteresis
//! (`sky/serve/autoscalers.py`), on time rather than on its 20 s decision ticks. The wanted
//! count follows `ceil(load / per_replica)` within `[min, max]`, and moves only once the load
//! has asked for the move for the whole upscale (or downscale) delay; with no replica at all it
//! moves at once. Pure: the caller measures the load and gives the time.

use crate::spec::service::ServiceSpec;

/// One service's autoscaler.
#[derive(Debug, Clone, PartialEq)]
pub struct Autoscaler {
    /// Replicas wanted now (before `num_overprovision`).
    pub target: u32,
    /// Since when the load has asked for more (or fewer) than `target`.
    above_since: Option<f64>,
    below_since: Option<f64>,
}

/// A change of the wanted count, and why, in words an event can carry.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    pub from: u32,
    pub to: u32,
    pub reason: String,
}

impl Autoscaler {
    pub fn new(spec: &ServiceSpec) -> Autoscaler {
        Autoscaler {
            target: spec.min_replicas,
            above_since: None,
            below_since: None,
        }
    }

    /// Replicas to run: the target and the ones kept warm above it.
    pub fn wanted(&self, spec: &ServiceSpec) -> u32 {
        self.target.saturating_add(spec.overprovision)
    }

    /// A new version of the service: its bounds apply at once, the delays start over.
    pub fn respec(&mut self, spec: &ServiceSpec) {
        self.target = self.target.clamp(spec.min_replicas, spec.max_replicas);
        if spec.signal.is_none() {
            self.target = spec.min_replicas;
        }
        self.above_since = None;
        self.below_since = None;
    }

    /// The load measured at `now` (`None`: not measurable yet, such as a metric with no ready
    /// replica to read it from): a decision when the target moves.
    pub fn observe(&mut self, spec: &ServiceSpec, load: Option<f64>, now: f64) -> Option<Decision> {
        let (Some(signal), Some(load)) = (&spec.signal, load) else {
            return None;
        };
        let per = signal.per_replica();
        let load = load.max(0.0);
        let need = (load / per).ceil();
        let desired = if need >= f64::from(spec.max_replicas) {
            spec.max_replicas
        } else {
            (need as u32).max(spec.min_replicas)
        };
        let from = self.target;
        let name = signal.name();
        let replicas = |n: u32| if n == 1 { "replica" } else { "replicas" };
        if desired == from {
            self.above_since = None;
            self.below_since = None;
            return None;
        }
        if desired > from {
            self.below_since = None;
            let since = *self.above_since.get_or_insert(now);
            let held = now - since;
            // SkyServe starts a service with no replica at once: nothing serves until then.
            if from > 0 && held < spec.upscale_delay_s {
                return None;
            }
            self.above_since = None;
            self.target = desired;
            let n = desired - from;
            let reason = if from == 0 {
                format!(
                    "{name} {load:.1} with no replica: +{n} {} ({from} → {desired})",
                    replicas(n)
                )
            } else {
                format!(
                    "{name} {load:.1} > {from} × {per} for {held:.0} s: +{n} {} ({from} → {desired})",
                    replicas(n)
                )
            };
            return Some(Decision {
                from,
                to: desired,
                reason,
            });
        }
        self.above_since = None;
        let since = *self.below_since.get_or_insert(now);
        let held = now - since;
        if held < spec.downscale_delay_s {
            return None;
        }
        self.below_since = None;
        self.target = desired;
        let n = from - desired;
        Some(Decision {
            from,
            to: desired,
            reason: format!(
                "{name} {load:.1} ≤ {desired} × {per} for {held:.0} s: −{n} {} ({from} → {desired})",
                replicas(n)
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::service::ScaleSignal;

    fn spec(min: u32, max: u32, per: f64, up: f64, down: f64) -> ServiceSpec {
        let text = format!(
            "run: x\nservice:\n  readiness_probe: /\n  replica_policy:\n    min_replicas: {min}\n    max_replicas: {max}\n    target_qps_per_replica: {per}\n    upscale_delay_seconds: {up}\n    downscale_delay_seconds: {down}\n"
        );
        *crate::spec::parse("s.yaml", text.as_bytes())
            .expect("a valid service")
            .service
            .expect("its service section")
    }

    #[test]
    fn scales_up_only_after_the_load_held_for_the_upscale_delay() {
        let s = spec(1, 5, 20.0, 30.0, 600.0);
        assert_eq!(s.signal, Some(ScaleSignal::Qps { per_replica: 20.0 }));
        let mut a = Autoscaler::new(&s);
        assert_eq!(a.target, 1);
        assert_eq!(a.observe(&s, Some(41.2), 100.0), None);
        assert_eq!(a.observe(&s, Some(41.2), 129.0), None);
        let d = a
            .observe(&s, Some(41.2), 130.0)
            .expect("a scale-up at 30 s");
        assert_eq!((d.from, d.to), (1, 3));
        assert_eq!(d.reason, "qps 41.2 > 1 × 20 for 30 s: +2 replicas (1 → 3)");
        assert_eq!(a.target, 3);
    }

    #[test]
    fn a_dip_restarts_the_delay() {
        let s = spec(1, 5, 10.0, 30.0, 600.0);
        let mut a = Autoscaler::new(&s);
        a.observe(&s, Some(25.0), 0.0);
        a.observe(&s, Some(5.0), 20.0);
        assert_eq!(a.observe(&s, Some(25.0), 31.0), None);
        assert_eq!(a.observe(&s, Some(25.0), 60.0), None);
        assert!(a.observe(&s, Some(25.0), 61.0).is_some());
    }

    #[test]
    fn scales_down_after_the_downscale_delay_and_never_below_min() {
        let s = spec(2, 8, 10.0, 0.0, 60.0);
        let mut a = Autoscaler::new(&s);
        assert_eq!(a.observe(&s, Some(75.0), 0.0).map(|d| d.to), Some(8));
        assert_eq!(a.observe(&s, Some(0.0), 10.0), None);
        let d = a
            .observe(&s, Some(0.0), 70.0)
            .expect("a scale-down at 60 s");
        assert_eq!((d.from, d.to), (8, 2));
        assert_eq!(d.reason, "qps 0.0 ≤ 2 × 10 for 60 s: −6 replicas (8 → 2)");
    }

    #[test]
    fn from_zero_replicas_it_starts_at_once_and_caps_at_max() {
        let s = spec(0, 3, 5.0, 300.0, 1200.0);
        let mut a = Autoscaler::new(&s);
        assert_eq!(a.target, 0);
        assert_eq!(a.observe(&s, Some(0.0), 0.0), None);
        let d = a.observe(&s, Some(1000.0), 1.0).expect("at once");
        assert_eq!((d.from, d.to), (0, 3));
    }

    #[test]
    fn a_fixed_service_never_moves() {
        let text = "run: x\nservice:\n  readiness_probe: /\n  replicas: 3\n";
        let s = crate::spec::parse("s.yaml", text.as_bytes())
            .unwrap()
            .service
            .unwrap();
        let mut a = Autoscaler::new(&s);
        assert_eq!(a.observe(&s, Some(1e9), 0.0), None);
        assert_eq!(a.observe(&s, Some(1e9), 1e9), None);
        assert_eq!(a.wanted(&s), 3);
    }
}
