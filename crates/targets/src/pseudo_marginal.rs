//! Pseudo-marginal targets: a prior times an unbiased likelihood estimate.
//!
//! A model whose likelihood `p(y | θ)` is an intractable integral over latent
//! variables (or defined only through a simulator) can still be sampled
//! exactly by Metropolis–Hastings if one can draw a **non-negative unbiased
//! estimate** `p̂(y | θ)` (Andrieu & Roberts 2009). Implement
//! [`LikelihoodEstimator`] for the model, pair it with a [`LogPrior`] in
//! [`PseudoMarginal`], and hand the result to any sampler as a [`Target`].
//!
//! The sampler must store the estimate of the current state and never
//! recompute it; `log p̂` is not unbiased for `log p`, only `p̂` is for `p`.

use crate::{LogPrior, Target};
use rand::Rng;

/// A model that returns the log of a non-negative unbiased estimate of its
/// likelihood `p(y | θ)` (the data `y` live inside the model).
///
/// A latent-variable model `y ~ N(z, 1)`, `z ~ N(θ, 1)`, whose likelihood
/// `∫ N(y; z, 1) N(z; θ, 1) dz` is estimated by drawing `z` from its prior:
///
/// ```
/// use kameleon_targets::{IsotropicGaussianPrior, LikelihoodEstimator, PseudoMarginal, Target};
/// use rand::{Rng, RngExt, SeedableRng};
/// use rand_distr::StandardNormal;
///
/// struct Latent { y: f64 }
/// impl LikelihoodEstimator for Latent {
///     fn dim(&self) -> usize { 1 }
///     fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
///         let z = theta[0] + rng.sample::<f64, _>(StandardNormal);
///         -0.5 * (self.y - z).powi(2) - 0.5 * (2.0 * std::f64::consts::PI).ln()
///     }
/// }
///
/// let target = PseudoMarginal::new(Latent { y: 0.3 }, IsotropicGaussianPrior::new(4.0).unwrap());
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
/// assert!(!target.is_exact());
/// assert!(target.log_density(&[0.0], &mut rng).is_finite());
/// ```
pub trait LikelihoodEstimator: Send + Sync {
    /// The dimension of the parameter θ.
    fn dim(&self) -> usize;

    /// `log p̂(y | θ)`, where `E[p̂(y | θ)] = p(y | θ)` over the draws taken
    /// from `rng`. `-inf` is a valid value (an estimate of zero); NaN signals
    /// a numerical failure, which samplers treat as `-inf` and count.
    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64;
}

/// The pseudo-marginal posterior `log p(θ) + log p̂(y | θ)` as a [`Target`].
///
/// [`Target::is_exact`] is `false`: every call to [`Target::log_density`]
/// draws a fresh likelihood estimate from the rng. Where the prior is `-inf`
/// (or NaN) the estimator is not called and that value is returned. A point
/// of the wrong length gives NaN.
#[derive(Debug, Clone)]
pub struct PseudoMarginal<E, P> {
    estimator: E,
    prior: P,
}

impl<E: LikelihoodEstimator, P: LogPrior> PseudoMarginal<E, P> {
    /// Combines a likelihood estimator and a prior.
    pub fn new(estimator: E, prior: P) -> Self {
        Self { estimator, prior }
    }

    /// The likelihood estimator.
    pub fn estimator(&self) -> &E {
        &self.estimator
    }

    /// The prior.
    pub fn prior(&self) -> &P {
        &self.prior
    }
}

impl<E: LikelihoodEstimator, P: LogPrior> Target for PseudoMarginal<E, P> {
    fn dim(&self) -> usize {
        self.estimator.dim()
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        if x.len() != self.estimator.dim() {
            return f64::NAN;
        }
        let log_prior = self.prior.log_prior(x);
        if !log_prior.is_finite() {
            return log_prior;
        }
        log_prior + self.estimator.log_likelihood_estimate(x, rng)
    }

    fn is_exact(&self) -> bool {
        false
    }
}

/// `log(mean(exp(values)))`, computed stably; `-inf` for an empty slice or
/// when every value is `-inf`, NaN if any value is NaN.
pub(crate) fn log_mean_exp(values: &[f64]) -> f64 {
    let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    if values.iter().any(|v| v.is_nan()) {
        return f64::NAN;
    }
    if max == f64::NEG_INFINITY {
        return f64::NEG_INFINITY;
    }
    if max == f64::INFINITY {
        return f64::INFINITY;
    }
    let sum: f64 = values.iter().map(|v| (v - max).exp()).sum();
    max + (sum / values.len() as f64).ln()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// A likelihood known exactly, `p(y | θ) = exp(-θ²/2)`, estimated by
    /// `p · u / E[u]` with `u ~ U(0, 1)`, so unbiased but noisy.
    struct NoisyGaussian;

    impl LikelihoodEstimator for NoisyGaussian {
        fn dim(&self) -> usize {
            1
        }
        fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
            let u: f64 = rng.random();
            -0.5 * theta[0] * theta[0] + (2.0 * u).ln()
        }
    }

    #[test]
    fn log_mean_exp_matches_direct_computation() {
        let v = [-1.0, 0.5, 2.0, -3.0];
        let direct = (v.iter().map(|x: &f64| x.exp()).sum::<f64>() / 4.0).ln();
        assert!((log_mean_exp(&v) - direct).abs() < 1e-14);
        // Large values do not overflow: shifting every value shifts the result.
        let shifted: Vec<f64> = v.iter().map(|x| x + 1000.0).collect();
        assert!((log_mean_exp(&shifted) - direct - 1000.0).abs() < 1e-10);
        assert_eq!(log_mean_exp(&[f64::NEG_INFINITY; 3]), f64::NEG_INFINITY);
        assert_eq!(log_mean_exp(&[]), f64::NEG_INFINITY);
        assert!(log_mean_exp(&[0.0, f64::NAN]).is_nan());
    }

    #[test]
    fn pseudo_marginal_adds_prior_and_estimate_and_skips_outside_support() {
        let uniform_prior = |t: &[f64]| {
            if t[0].abs() <= 1.0 {
                0.0
            } else {
                f64::NEG_INFINITY
            }
        };
        let target = PseudoMarginal::new(NoisyGaussian, uniform_prior);
        assert!(!target.is_exact());
        assert_eq!(target.dim(), 1);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(target.log_density(&[2.0], &mut rng), f64::NEG_INFINITY);
        assert!(target.log_density(&[0.0, 1.0], &mut rng).is_nan());
        // E[exp(log density)] at θ = 0.5 equals exp(-1/8) (prior density 1):
        // the estimate is exp(-1/8)·2u with sd exp(-1/8)·2/√12 ≈ 0.51, so the
        // mean of 40 000 has standard error 0.0026; allow 4 standard errors.
        let m = 40_000;
        let mean = (0..m)
            .map(|_| target.log_density(&[0.5], &mut rng).exp())
            .sum::<f64>()
            / m as f64;
        assert!((mean - (-0.125f64).exp()).abs() < 4.0 * 0.51 / (m as f64).sqrt());
    }
}
