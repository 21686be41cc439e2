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
    Ok(chi2.inverse_cdf(q))
}
