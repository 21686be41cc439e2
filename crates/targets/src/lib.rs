//! Target densities for kernel adaptive MCMC, and the [`Target`] trait every
//! sampler of `kameleon-samplers` draws from.
//!
//! A target returns the log of its (unnormalised) density at a point, or, for
//! pseudo-marginal targets, the log of a non-negative unbiased estimate of it
//! (then it draws from the given rng and [`Target::is_exact`] is `false`).
//! `-inf` means "outside the support"; samplers treat NaN like `-inf` and
//! count it.
//!
//! ```
//! use kameleon_targets::{FnTarget, Target};
//! use rand::SeedableRng;
//! let normal = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
//! assert_eq!(normal.log_density(&[0.0, 0.0], &mut rng), 0.0);
//! ```
//!
//! The synthetic targets are exactly normalised, know their gradients and
//! draw exact iid samples; the banana and the flower also have regions of
//! exactly known mass ([`QuantileRegions`]) for coverage metrics:
//!
//! ```
//! use kameleon_targets::{Banana, QuantileRegions, Target};
//! use rand::SeedableRng;
//! let banana = Banana::new(8, 0.03, 100.0)?;
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
//! let mut x = vec![0.0; 8];
//! banana.sample_iid(&mut rng, &mut x)?;
//! let inside = banana.in_region(&x, 0.5)?; // true with probability exactly 0.5
//! # let _ = inside;
//! # Ok::<(), kameleon_targets::TargetError>(())
//! ```
//!
//! - [`Banana`]: the twisted Gaussian `B(b, v)` of Haario et al. (KAMH, KMC).
//! - [`Flower`]: the flower `F(r₀, A, ω, σ)` and the ring (KAMH).
//! - [`GaussianMixture`]: general mixtures with full covariances, exact
//!   marginals, the cKAM bimodal and five-component targets, single
//!   Gaussians and the rotated Gaussian of KMC ([`random_rotated_covariance`],
//!   [`haar_orthogonal`]).
//! - [`GridMixture`]: cKAM's 32-d mixture over a product grid, factorised.
//!
//! The intractable targets are [`PseudoMarginal`] posteriors: a
//! [`LogPrior`] plus the log of an unbiased [`LikelihoodEstimator`]:
//!
//! - [`glass_posterior`]: GP classification on UCI Glass with the
//!   importance-sampled marginal likelihood ([`GpClassification`]).
//! - [`abc_skew_normal_posterior`]: ABC for a skew-normal location
//!   ([`AbcSkewNormal`], [`SkewNormal`]).

mod abc;
mod banana;
mod cholesky;
mod error;
mod flower;
mod function;
mod gaussian_mixture;
mod gp_classification;
mod grid_mixture;
mod pseudo_marginal;
mod quantile;
mod skew_normal;
#[cfg(test)]
mod testing;
mod util;

pub use abc::{AbcSkewNormal, OBSERVED_SEED, abc_skew_normal_posterior};
pub use banana::Banana;
pub use error::TargetError;
pub use flower::Flower;
pub use function::FnTarget;
pub use gaussian_mixture::{GaussianMixture, haar_orthogonal, random_rotated_covariance};
pub use gp_classification::{
    ClassificationData, DEFAULT_MAX_NEWTON_STEPS, DEFAULT_NEWTON_TOLERANCE, DEFAULT_RIDGE,
    GLASS_PRIOR_VARIANCE, GpClassification, LaplaceApproximation, glass_posterior,
    theta_code_to_paper, theta_paper_to_code,
};
pub use grid_mixture::GridMixture;
pub use pseudo_marginal::{IsotropicGaussianPrior, LikelihoodEstimator, LogPrior, PseudoMarginal};
pub use quantile::QuantileRegions;
pub use skew_normal::SkewNormal;

use rand::Rng;

/// A probability density known up to a constant, possibly only through an
/// unbiased estimator (pseudo-marginal MCMC).
pub trait Target: Send + Sync {
    /// The dimension d of the state space.
    fn dim(&self) -> usize;

    /// The log density at `x` (length `dim()`), up to an additive constant,
    /// or the log of a non-negative unbiased estimate of the density for
    /// targets with `is_exact() == false`. `-inf` outside the support.
    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64;

    /// `true` when [`Target::log_density`] is exact and deterministic.
    fn is_exact(&self) -> bool {
        true
    }

    /// Writes `∇ log π(x)` into `out` when the target knows it (HMC baseline).
    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        let _ = (x, out);
        Err(TargetError::Unsupported("gradient"))
    }

    /// Writes the exact mean of the target into `out` when it is known (the
    /// reference of the norm-of-the-mean metric).
    fn exact_mean(&self, out: &mut [f64]) -> Result<(), TargetError> {
        let _ = out;
        Err(TargetError::Unsupported("an exact mean"))
    }

    /// Draws one exact independent sample into `out` when the target can.
    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        let _ = (rng, out);
        Err(TargetError::Unsupported("iid sampling"))
    }
}
