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
//! - [`Flower`]: the flower `F(r₀, A, ω, σ)`, the ring, and the KAMH code's
//!   variant with the norm of the whole vector (KAMH).
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
//!
//! Any [`SummarySimulator`](kameleon_core::SummarySimulator) gives a
//! likelihood estimator: [`AbcLikelihood`] (Gaussian-kernel ABC) or
//! [`GaussianSyntheticLikelihood`] (Wood's, or its unbiased form).

pub mod abc;
mod banana;
mod cholesky;
mod flower;
mod gaussian_mixture;
pub mod gp_classification;
mod grid_mixture;
pub mod pseudo_marginal;
mod quantile;
pub mod simulation;
pub mod skew_normal;
#[cfg(test)]
mod testing;
mod util;

pub use abc::{AbcSkewNormal, OBSERVED_SEED, abc_skew_normal_posterior};
pub use banana::Banana;
pub use flower::Flower;
pub use gaussian_mixture::{GaussianMixture, haar_orthogonal, random_rotated_covariance};
pub use gp_classification::{
    ClassificationData, DEFAULT_MAX_NEWTON_STEPS, DEFAULT_NEWTON_TOLERANCE, DEFAULT_RIDGE,
    GLASS_PRIOR_VARIANCE, GpClassification, LaplaceApproximation, glass_posterior,
    theta_code_to_paper, theta_paper_to_code,
};
pub use grid_mixture::GridMixture;
pub use pseudo_marginal::{LikelihoodEstimator, PseudoMarginal};
pub use quantile::QuantileRegions;
pub use simulation::{AbcLikelihood, GaussianSyntheticLikelihood};
pub use skew_normal::SkewNormal;

// The interface every target implements and the closure and prior building
// blocks live in `kameleon-core`, which the samplers depend on without this
// crate's contents; they are re-exported here for users of the targets.
pub use kameleon_core::{FnTarget, IsotropicGaussianPrior, LogPrior, Target, TargetError};
