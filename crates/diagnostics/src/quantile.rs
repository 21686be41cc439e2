//! Empirical quantiles of a sorted sample.

use crate::DiagnosticsError;

/// The `p`-quantile of `sorted` (ascending, non-empty) with linear
/// interpolation between order statistics, Hyndman & Fan's type 7 (R's
/// default, NumPy's `linear`): with h = (n − 1)·p, the value
/// x₍⌊h⌋₎ + (h − ⌊h⌋)·(x₍⌈h⌉₎ − x₍⌊h⌋₎) on 0-based order statistics.
///
/// The caller sorts (e.g. with `f64::total_cmp`). Infinite values
/// are order statistics like the others: the quantile is ±∞ when it interpolates toward one, and
/// NaN only strictly between −∞ and +∞.
///
/// ```
/// use kameleon_diagnostics::quantile_sorted;
/// let x = [1.0, 2.0, 4.0, 8.0];
/// assert_eq!(quantile_sorted(&x, 0.5)?, 3.0); // halfway between 2 and 4
/// assert_eq!(quantile_sorted(&x, 1.0)?, 8.0);
/// assert!(quantile_sorted(&[], 0.5).is_err());
/// # Ok::<(), kameleon_diagnostics::DiagnosticsError>(())
/// ```
///
/// # Errors
///
/// [`DiagnosticsError::Empty`] for an empty sample,
/// [`DiagnosticsError::InvalidArgument`] for `p` outside [0, 1] (NaN
/// included).
pub fn quantile_sorted(sorted: &[f64], p: f64) -> Result<f64, DiagnosticsError> {
    let (lo, hi, t) = order_statistics(sorted.len(), p)?;
    Ok(interpolate(sorted[lo], sorted[hi], t))
}

/// [`quantile_sorted`] of `values` in any order, found by selection (linear
/// time) instead of a sort: the same value, bit for bit. `values` is
/// reordered.
pub(crate) fn quantile_unsorted(values: &mut [f64], p: f64) -> Result<f64, DiagnosticsError> {
    let (lo, hi, t) = order_statistics(values.len(), p)?;
    let (_, &mut a, above) = values.select_nth_unstable_by(lo, f64::total_cmp);
    // the next order statistic is the least of those above the lo-th
    let b = if hi == lo {
        a
    } else {
        above
            .iter()
            .copied()
            .min_by(f64::total_cmp)
            .expect("hi < len, so values lie above the lo-th")
    };
    Ok(interpolate(a, b, t))
}

/// The 0-based order statistics `lo ≤ hi` the `p`-quantile of `n` values
/// interpolates between, and the weight `t` of the upper one.
fn order_statistics(n: usize, p: f64) -> Result<(usize, usize, f64), DiagnosticsError> {
    if n == 0 {
        return Err(DiagnosticsError::Empty("quantile_sorted"));
    }
    if !(0.0..=1.0).contains(&p) {
        return Err(DiagnosticsError::InvalidArgument(format!(
            "quantile_sorted: the level p must lie in [0, 1], got {p}"
        )));
    }
    let h = (n - 1) as f64 * p;
    let lo = h.floor() as usize;
    Ok((lo, (lo + 1).min(n - 1), h - lo as f64))
}

/// The value a fraction `t` of the way from order statistic `a` to `b`.
fn interpolate(a: f64, b: f64, t: f64) -> f64 {
    if t == 0.0 {
        return a;
    }
    let gap = b - a;
    if gap.is_finite() {
        a + t * gap
    } else {
        // an infinite order statistic, or a gap past the largest double
        (1.0 - t) * a + t * b
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against the definition by brute force: the interpolated value at
    /// h = (n − 1)p for every p on a grid, on an uneven sample.
    #[test]
    fn matches_the_type_7_definition() {
        let sorted = [-3.0, -1.0, 0.5, 0.5, 2.0, 7.0, 11.0];
        let n = sorted.len();
        for k in 0..=60 {
            let p = k as f64 / 60.0;
            let h = (n - 1) as f64 * p;
            let (below, above) = (h.floor(), h.ceil());
            let expected = if below == above {
                sorted[below as usize]
            } else {
                sorted[below as usize] * (above - h) + sorted[above as usize] * (h - below)
            };
            let got = quantile_sorted(&sorted, p).unwrap();
            assert!(
                (got - expected).abs() <= 1e-12,
                "p = {p}: {got} vs {expected}"
            );
        }
        assert_eq!(quantile_sorted(&[4.0], 0.3).unwrap(), 4.0);
    }

    /// Selection gives the sorted sample's quantile bit for bit, on samples
    /// with ties, signed zeros and infinities, at levels on and between
    /// order statistics.
    #[test]
    fn selection_equals_the_sorted_quantile() {
        use rand::{RngExt, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let pool = [
            -f64::INFINITY,
            -2.5,
            -0.0,
            0.0,
            1.0,
            1.0,
            3.25,
            1e300,
            f64::INFINITY,
        ];
        for n in 1..60 {
            for _ in 0..20 {
                let values: Vec<f64> = (0..n)
                    .map(|_| {
                        if rng.random::<f64>() < 0.4 {
                            pool[rng.random_range(0..pool.len())]
                        } else {
                            rng.random::<f64>() * 10.0 - 5.0
                        }
                    })
                    .collect();
                let mut sorted = values.clone();
                sorted.sort_by(f64::total_cmp);
                for p in [0.0, 0.05, 0.3, 0.5, 0.95, 1.0, rng.random::<f64>()] {
                    let expected = quantile_sorted(&sorted, p).unwrap();
                    let got = quantile_unsorted(&mut values.clone(), p).unwrap();
                    assert!(
                        got.to_bits() == expected.to_bits() || (got.is_nan() && expected.is_nan()),
                        "n = {n}, p = {p}: {got} against {expected}"
                    );
                }
            }
        }
    }

    /// Infinite order statistics gave NaN even where the level falls on a finite one
    /// (∞ − ∞ times a zero weight), and a gap past the largest double gave ±∞.
    #[test]
    fn infinite_and_huge_order_statistics() {
        let inf = f64::INFINITY;
        assert_eq!(quantile_sorted(&[1.0, inf], 1.0).unwrap(), inf);
        assert_eq!(quantile_sorted(&[-inf, 1.0], 0.0).unwrap(), -inf);
        assert_eq!(quantile_sorted(&[-inf, 1.0, 2.0, inf], 0.5).unwrap(), 1.5);
        assert_eq!(quantile_sorted(&[1.0, inf], 0.5).unwrap(), inf);
        assert_eq!(quantile_sorted(&[-1.5e308, 1.5e308], 0.5).unwrap(), 0.0);
        let big = 2.0_f64.powi(1023);
        assert_eq!(quantile_sorted(&[-big, big], 0.25).unwrap(), -big / 2.0);
        assert!(quantile_sorted(&[-inf, inf], 0.5).unwrap().is_nan());
    }

    /// A level past 1 indexed past the end (a bare index panic), NaN gave NaN
    /// silently, and an empty sample panicked: each is an error.
    #[test]
    fn bad_levels_and_empty_samples_are_errors() {
        let x = [1.0, 2.0, 3.0];
        for p in [1.5, -0.1, f64::NAN, f64::INFINITY] {
            match quantile_sorted(&x, p) {
                Err(DiagnosticsError::InvalidArgument(message)) => {
                    assert!(message.contains("[0, 1]"), "{message}")
                }
                other => panic!("p = {p}: {other:?}"),
            }
        }
        assert!(matches!(
            quantile_sorted(&[], 0.5),
            Err(DiagnosticsError::Empty("quantile_sorted"))
        ));
    }
}
