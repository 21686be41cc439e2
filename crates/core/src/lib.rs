//! What every kameleon crate shares: the [`Target`] interface the samplers
//! draw from, and the numerical building blocks the kernels, features,
//! score-matching estimators and targets all use.
//!
//! A target returns the log of its (unnormalised) density at a point, or,
//! for pseudo-marginal targets, the log of a non-negative unbiased estimate
//! of it (then it draws from the given rng and [`Target::is_exact`] is
//! `false`). `-inf` means "outside the support"; samplers treat NaN like
//! `-inf` and count it.
//!
//! ```
//! use kameleon_core::{FnTarget, Target};
//! use rand::SeedableRng;
//! let normal = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
//! assert_eq!(normal.log_density(&[0.0, 0.0], &mut rng), 0.0);
//! ```
//!
//! - [`Target`], [`FnTarget`] (a target from a closure, with or without its
//!   gradient), [`TargetError`];
//! - [`LogPrior`] and [`IsotropicGaussianPrior`]: the prior of a
//!   pseudo-marginal or ABC posterior;
//! - [`SummarySimulator`]: a model known only through simulated summary
//!   statistics (Hamiltonian ABC's synthetic likelihood);
//! - [`fastmath`]: `exp`, `sin` and `cos` that vectorise in loops over
//!   slices (kernel sums, random Fourier features, the GP likelihood);
//! - [`normal_cdf`]: the standard normal CDF, accurate in both tails;
//! - [`PrefetchedWords`]: a generator's words drawn ahead, so
//!   that loops of draws through a `&mut dyn Rng` inline;
//! - [`simd`]: the instruction set every SIMD kernel runs with, and the
//!   fixed-order sums that make results the same at every vector width;
//! - [`buffer`]: buffers whose size the caller chooses, sized with checked
//!   arithmetic and allocated fallibly ([`buffer::BufferTooLarge`]).
//!
//! The crate is small on purpose: `kameleon-samplers` depends on it, not on
//! `kameleon-targets` (whose data sets, CSV parser and special functions a
//! sampler user does not need), and the numerical crates share `fastmath`
//! without depending on each other.

pub mod buffer;
mod error;
pub mod fastmath;
mod function;
mod normal;
mod prefetch;
mod prior;
pub mod simd;
mod simulator;

pub use error::TargetError;
pub use function::FnTarget;
pub use normal::normal_cdf;
pub use prefetch::PrefetchedWords;
pub use prior::{IsotropicGaussianPrior, LogPrior};
pub use simulator::SummarySimulator;

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
