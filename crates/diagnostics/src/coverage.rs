//! Quantile-region coverage errors and the norm of the empirical mean (KAMH Fig. 5 metrics).

use crate::error::{DiagnosticsError, Result, check_finite, rows};
use crate::scale::{at_unit_scale, times_pow2};

/// Coverage errors e_q = |(1/N) Σ_t 1[s_t ≤ t_q] − q| for each level q.
///
/// `statistic` holds a membership statistic per draw (e.g. the banana's ‖T(y)‖²), `thresholds`
/// the exact q-quantile t_q of that statistic under the target for each entry of `levels`
/// (e.g. χ²_d⁻¹(q)); a draw is inside the region at level q when s ≤ t_q. Returns one error per
/// level, in order.
pub fn quantile_coverage_errors(
    statistic: &[f64],
    thresholds: &[f64],
    levels: &[f64],
) -> Result<Vec<f64>> {
    if statistic.is_empty() {
        return Err(DiagnosticsError::Empty(
            "quantile_coverage_errors statistic",
        ));
    }
    if thresholds.len() != levels.len() {
        return Err(DiagnosticsError::DimensionMismatch(format!(
            "{} thresholds for {} levels",
            thresholds.len(),
            levels.len()
        )));
    }
    check_finite(statistic, "quantile_coverage_errors statistic")?;
    if levels.iter().any(|q| !(0.0..=1.0).contains(q)) || thresholds.iter().any(|t| t.is_nan()) {
        return Err(DiagnosticsError::InvalidArgument(
            "levels must lie in [0, 1] and thresholds must not be NaN".into(),
        ));
    }
    let n = statistic.len() as f64;
    Ok(thresholds
        .iter()
        .zip(levels)
        .map(|(&t, &q)| {
            let inside = statistic.iter().filter(|&&s| s <= t).count() as f64;
            (inside / n - q).abs()
        })
        .collect())
}

/// Euclidean norm of the empirical mean of row-major draws (n rows × d values). Draws far from
/// unit scale are summed at unit scale (an exact power-of-two rescaling), so the norm is
/// infinite only when it passes the largest double.
pub fn mean_norm(samples: &[f64], d: usize) -> Result<f64> {
    let n = rows(samples, d, "mean_norm")?;
    check_finite(samples, "mean_norm")?;
    let (unit, e) = at_unit_scale(samples);
    let mut mean = vec![0.0; d];
    for row in unit.chunks_exact(d) {
        for (m, v) in mean.iter_mut().zip(row) {
            *m += v;
        }
    }
    let norm = mean
        .iter()
        .map(|m| (m / n as f64).powi(2))
        .sum::<f64>()
        .sqrt();
    Ok(times_pow2(norm, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::normal::{normal_cdf, normal_quantile};
    use rand::SeedableRng;
    use rand_distr::{Distribution, StandardNormal};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn exact_quantiles_give_small_errors_and_wrong_ones_do_not() {
        // Statistic s = |z| for z ~ N(0,1): its exact q-quantile is Φ⁻¹((1+q)/2). With N = 10⁴
        // iid draws each e_q has sd √(q(1−q)/N) ≤ 0.005, so 4 sd = 0.02 bounds every level.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let s: Vec<f64> = (0..10_000)
            .map(|_| {
                let z: f64 = StandardNormal.sample(&mut rng);
                z.abs()
            })
            .collect();
        let levels: Vec<f64> = (1..10).map(|i| i as f64 / 10.0).collect();
        let exact: Vec<f64> = levels
            .iter()
            .map(|q| normal_quantile((1.0 + q) / 2.0).unwrap())
            .collect();
        for e in quantile_coverage_errors(&s, &exact, &levels).unwrap() {
            assert!(e < 0.02);
        }
        // Thresholds of a N(0, 2²) instead: the true coverage at level q is 2Φ(2t_q)−1 whose
        // distance from q dominates the 0.02 noise at q = 0.5.
        let wrong: Vec<f64> = exact.iter().map(|t| 2.0 * t).collect();
        let errs = quantile_coverage_errors(&s, &wrong, &levels).unwrap();
        let expected = 2.0 * normal_cdf(2.0 * exact[4]) - 1.0 - 0.5;
        assert!((errs[4] - expected).abs() < 0.02 && expected > 0.3);
        assert!(quantile_coverage_errors(&s, &exact[..3], &levels).is_err());
    }

    #[test]
    fn mean_norm_by_hand() {
        // Rows (1, 2), (3, 6): mean (2, 4), norm √20.
        assert!((mean_norm(&[1.0, 2.0, 3.0, 6.0], 2).unwrap() - 20f64.sqrt()).abs() < 1e-15);
        assert!(mean_norm(&[1.0, 2.0, 3.0], 2).is_err());
    }

    #[test]
    fn mean_norm_of_large_draws_is_finite_when_the_norm_is() {
        // The column sums of 1e308 + 1e308, and the square of a mean of 4·2^600, overflowed.
        assert_eq!(mean_norm(&[1e308, 1e308], 1).unwrap(), 1e308);
        let f = 2.0_f64.powi(600);
        assert_eq!(mean_norm(&[3.0 * f, 4.0 * f], 2).unwrap(), 5.0 * f);
        let tiny = 2.0_f64.powi(-600);
        assert_eq!(mean_norm(&[3.0 * tiny, 4.0 * tiny], 2).unwrap(), 5.0 * tiny);
    }
}
