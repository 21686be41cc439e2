//! The high-dimensional grid mixture of cKAM (Appendix A.3), as the paper
//! describes it.

use crate::util::{check_dim, check_point_dim, check_positive};
use crate::{GaussianMixture, Target, TargetError};
use rand::Rng;

/// The equal-weight mixture of `N(μ, s·I_d)` over all `K^d` means `μ` of the
/// product grid `{c₁, …, c_K}^d`.
///
/// Because the weights are equal and the covariance is isotropic, the
/// mixture factorises: `p(x) = Π_j m(x_j)` with the 1-d mixture
/// `m = (1/K) Σ_k N(c_k, s)`. So the coordinates are independent, every
/// marginal is exact, sampling is exact, and the log density costs
/// `O(dK)` instead of `O(K^d)`.
///
/// cKAM's 32-d target ([`GridMixture::ckam_high_dim`]) has `d = 32`,
/// centres `{−30, −15, 0, 15, 30}` (the paper prints "15" for "−15", a typo)
/// and `s = 15`. The cKAM code evaluates something else,
/// `N(x; 15⌊x/15⌋, 5·I)`, an improper periodic tiling (not a normalisable
/// density); that variant is deliberately not offered.
#[derive(Debug, Clone, PartialEq)]
pub struct GridMixture {
    dim: usize,
    factor: GaussianMixture,
}

impl GridMixture {
    /// The grid mixture in dimension `dim ≥ 1` (small enough that a point
    /// can be allocated) with per-axis centres
    /// `centres` (non-empty, finite) and component variance `variance > 0`.
    pub fn new(dim: usize, centres: &[f64], variance: f64) -> Result<Self, TargetError> {
        if dim == 0 {
            return Err(TargetError::InvalidParameter {
                name: "dim",
                reason: "the dimension must be ≥ 1".into(),
            });
        }
        check_point_dim(dim)?;
        check_positive("variance", variance)?;
        let means: Vec<Vec<f64>> = centres.iter().map(|&c| vec![c]).collect();
        let factor = GaussianMixture::isotropic(
            &vec![1.0; centres.len()],
            &means,
            &vec![variance; centres.len()],
        )?;
        Ok(Self { dim, factor })
    }

    /// cKAM's 32-dimensional mixture of `5³²` Gaussians `N(μ, 15·I)`,
    /// `μ ∈ {−30, −15, 0, 15, 30}³²`.
    pub fn ckam_high_dim() -> Self {
        Self::new(32, &[-30.0, -15.0, 0.0, 15.0, 30.0], 15.0).expect("fixed valid parameters")
    }

    /// The 1-d mixture `m` every coordinate follows independently (its
    /// [`GaussianMixture::marginal_log_density`] and
    /// [`GaussianMixture::marginal_cdf`] at coordinate 0 give the exact
    /// marginals of every coordinate).
    pub fn coordinate_marginal(&self) -> &GaussianMixture {
        &self.factor
    }
}

impl Target for GridMixture {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Exactly normalised; `NaN` when `x` does not have length `dim()`.
    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        x.iter().map(|&t| self.factor.log_density(&[t], rng)).sum()
    }

    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, x.len())?;
        check_dim(self.dim, out.len())?;
        for (o, &t) in out.iter_mut().zip(x) {
            self.factor
                .grad_log_density(&[t], std::slice::from_mut(o))?;
        }
        Ok(())
    }

    /// The mean of the centres in every coordinate.
    fn exact_mean(&self, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        let mut centre_mean = 0.0;
        self.factor
            .exact_mean(std::slice::from_mut(&mut centre_mean))?;
        out.fill(centre_mean);
        Ok(())
    }

    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        for o in out.iter_mut() {
            self.factor.sample_iid(rng, std::slice::from_mut(o))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        assert_gradient_matches_finite_differences, assert_within_mc_error, draw_iid, rng,
    };

    #[test]
    fn rejects_invalid_parameters() {
        assert!(GridMixture::new(0, &[0.0], 1.0).is_err());
        for dim in [usize::MAX, 1 << 61] {
            let message = GridMixture::new(dim, &[0.0], 1.0).unwrap_err().to_string();
            assert!(
                message.contains("`dim`") && message.contains("allocated"),
                "{message}"
            );
        }
        assert!(GridMixture::new(2, &[], 1.0).is_err());
        assert!(GridMixture::new(2, &[0.0], 0.0).is_err());
        assert!(GridMixture::new(2, &[f64::NAN], 1.0).is_err());
    }

    /// The factorised density against the explicit mixture over all `K^d`
    /// grid means (d = 3, K = 5: 125 components).
    #[test]
    fn factorised_density_equals_the_explicit_grid_mixture() {
        let centres = [-30.0, -15.0, 0.0, 15.0, 30.0];
        let grid = GridMixture::new(3, &centres, 15.0).unwrap();
        let means: Vec<Vec<f64>> = (0..125)
            .map(|m| vec![centres[m % 5], centres[(m / 5) % 5], centres[m / 25]])
            .collect();
        let explicit = GaussianMixture::isotropic(&[1.0; 125], &means, &[15.0; 125]).unwrap();
        let mut r = rng(0);
        for x in [[0.0, 0.0, 0.0], [7.0, -22.0, 31.0], [-40.0, 3.0, 15.0]] {
            let (a, b) = (
                grid.log_density(&x, &mut r),
                explicit.log_density(&x, &mut r),
            );
            assert!((a - b).abs() < 1e-11, "{x:?}: {a} vs {b}");
        }
        let ckam = GridMixture::ckam_high_dim();
        assert_eq!(ckam.dim(), 32);
        assert_eq!(ckam.coordinate_marginal().num_components(), 5);
    }

    /// Each coordinate has mean 0 and variance 15 + mean(c²) = 15 + 450;
    /// coordinates are uncorrelated. 5 empirical standard errors.
    #[test]
    fn iid_sampler_matches_moments() {
        let (grid, n) = (GridMixture::ckam_high_dim(), 20_000);
        let draws = draw_iid(&grid, n, 17);
        for (j, expected) in [(0, 465.0), (31, 465.0)] {
            let values: Vec<f64> = draws.chunks(32).map(|x| x[j] * x[j]).collect();
            let m = values.iter().sum::<f64>() / n as f64;
            let sd = (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert_within_mc_error("E x²", m, expected, sd, n);
        }
        let mut mean = [f64::NAN; 32];
        grid.exact_mean(&mut mean).unwrap();
        assert!(mean.iter().all(|&m| m == 0.0));
        let first: f64 = draws.chunks(32).map(|x| x[5]).sum::<f64>() / n as f64;
        assert_within_mc_error("E x5", first, mean[5], 465f64.sqrt(), n);
        let cross: Vec<f64> = draws.chunks(32).map(|x| x[3] * x[17]).collect();
        let m = cross.iter().sum::<f64>() / n as f64;
        assert_within_mc_error("E x3 x17", m, 0.0, 465.0, n);
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let grid = GridMixture::new(4, &[-30.0, -15.0, 0.0, 15.0, 30.0], 15.0).unwrap();
        let mut r = rng(2);
        let mut x = [0.0; 4];
        for _ in 0..10 {
            grid.sample_iid(&mut r, &mut x).unwrap();
            assert_gradient_matches_finite_differences(&grid, &x);
        }
    }
}
