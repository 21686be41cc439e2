//! Exact quantile regions: the reference for KAMH-style coverage metrics.

use crate::{Target, TargetError};

/// A target with nested regions of exactly known probability mass.
///
/// The region at level `q ∈ (0, 1)` is `R_q = {x : region_statistic(x) ≤
/// region_threshold(q)}` and has mass exactly `q` under the normalised
/// target. A sampler's coverage error at level `q` is
/// `|fraction of draws in R_q − q|` (KAMH Fig. 5).
pub trait QuantileRegions: Target {
    /// The statistic `s(x) ≥ 0` whose sub-level sets are the regions; `NaN`
    /// when `x` does not have length `dim()`.
    fn region_statistic(&self, x: &[f64]) -> f64;

    /// The threshold `t(q)` with `P(s(X) ≤ t(q)) = q` exactly.
    ///
    /// Errors with [`TargetError::InvalidParameter`] when `q` is not in
    /// `(0, 1)` or when the target cannot guarantee exactness at this level.
    fn region_threshold(&self, q: f64) -> Result<f64, TargetError>;

    /// Whether `x` lies in the region of level `q`. This recomputes the
    /// threshold (a χ² quantile, which is iterative): over many points, call
    /// [`QuantileRegions::region_threshold`] once and compare
    /// [`QuantileRegions::region_statistic`] with it.
    fn in_region(&self, x: &[f64], q: f64) -> Result<bool, TargetError> {
        Ok(self.region_statistic(x) <= self.region_threshold(q)?)
    }
}

/// The χ²_k quantile at `q`, with `q` validated to lie in `(0, 1)`.
pub(crate) fn chi_squared_quantile(dof: usize, q: f64) -> Result<f64, TargetError> {
    use statrs::distribution::{ChiSquared, ContinuousCDF};
    if !(q > 0.0 && q < 1.0) {
        return Err(TargetError::InvalidParameter {
            name: "q",
            reason: format!("quantile level must lie in (0, 1), got {q}"),
        });
    }
    let chi2 = ChiSquared::new(dof as f64).map_err(|e| TargetError::InvalidParameter {
        name: "dof",
        reason: e.to_string(),
    })?;
    let quantile = chi2.inverse_cdf(q);
    // statrs' search stops at an absolute tolerance: in a far tail (q of
    // 1e-100, say) its answer has a level many orders of magnitude off.
    // Compare the level in the nearer tail, and refine where it is off.
    let level_error = |t: f64| {
        if q < 0.5 {
            chi2.cdf(t) / q - 1.0
        } else {
            chi2.sf(t) / (1.0 - q) - 1.0
        }
    };
    if level_error(quantile).abs() <= QUANTILE_LEVEL_TOLERANCE {
        return Ok(quantile);
    }
    // bisection in log t, the CDF and survival function being monotone
    let below = |log_t: f64| (level_error(log_t.exp()) < 0.0) == (q < 0.5);
    let (mut lo, mut hi) = (f64::MIN_POSITIVE.ln(), f64::MAX.ln());
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if below(mid) {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok((0.5 * (lo + hi)).exp())
}

/// The relative error of the level (in the nearer tail) of a χ² quantile
/// from statrs above which [`chi_squared_quantile`] refines it. statrs'
/// quantiles at levels 0.001–0.999 are off by up to 1.2·10⁻⁸ (dof 1–200),
/// and the experiments' quantile regions must keep statrs' values there;
/// the far-tail failures it is for are off by orders of magnitude.
const QUANTILE_LEVEL_TOLERANCE: f64 = 1e-6;

#[cfg(test)]
mod tests {
    use super::*;
    use statrs::distribution::{ChiSquared, ContinuousCDF};

    /// Far in the lower tail, where `P(χ²_k ≤ t) ≈ (t/2)^{k/2}/Γ(k/2 + 1)`,
    /// the quantile has its level (statrs alone gave 2.8e-9 at q = 1e-300,
    /// whose level is ~1e-37); at ordinary levels the value is statrs' own.
    #[test]
    fn far_tail_quantiles_have_their_level() {
        for q in [1e-300, 1e-100, 1e-30] {
            let t = chi_squared_quantile(8, q).unwrap();
            let expected = 2.0 * (24.0 * q).powf(0.25);
            assert!(
                (t / expected - 1.0).abs() < 1e-6,
                "q = {q}: {t} vs {expected}"
            );
        }
        // ordinary levels keep statrs' value bit for bit (with a tolerance
        // of 1e-9 on the level, dof 4 at q = 0.075 was refined)
        for dof in 1..=64 {
            let chi2 = ChiSquared::new(dof as f64).unwrap();
            for k in 1..200 {
                let q = f64::from(k) / 200.0;
                assert_eq!(chi_squared_quantile(dof, q).unwrap(), chi2.inverse_cdf(q));
            }
        }
        let chi2 = ChiSquared::new(8.0).unwrap();
        let q = 1.0 - 1e-15;
        let t = chi_squared_quantile(8, q).unwrap();
        assert!((chi2.sf(t) / (1.0 - q) - 1.0).abs() < 1e-6, "{t}");
    }
}
