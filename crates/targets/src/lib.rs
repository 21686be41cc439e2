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

mod abc;
mod error;
mod function;
mod gp_classification;
mod pseudo_marginal;
mod skew_normal;

pub use abc::{AbcSkewNormal, OBSERVED_SEED, abc_skew_normal_posterior};
pub use error::TargetError;
pub use function::FnTarget;
pub use gp_classification::{
    ClassificationData, DEFAULT_MAX_NEWTON_STEPS, DEFAULT_NEWTON_TOLERANCE, DEFAULT_RIDGE,
    GLASS_PRIOR_VARIANCE, GpClassification, LaplaceApproximation, glass_posterior,
    theta_code_to_paper, theta_paper_to_code,
};
pub use pseudo_marginal::{IsotropicGaussianPrior, LikelihoodEstimator, LogPrior, PseudoMarginal};
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

    /// Draws one exact independent sample into `out` when the target can.
    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        let _ = (rng, out);
        Err(TargetError::Unsupported("iid sampling"))
    }
}
