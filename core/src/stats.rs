//! Small numeric helpers shared by the benchmarks, the trace replays and the daemon.

/// The `q`-quantile of sorted samples (the nearest rank; 0 for no samples).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn quantiles_are_nearest_ranks() {
        let s = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(super::quantile(&s, 0.5), 3.0);
        assert_eq!(super::quantile(&s, 0.99), 5.0);
        assert_eq!(super::quantile(&[], 0.5), 0.0);
    }
}
