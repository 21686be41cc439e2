//! Pseudo-marginal ABC for the location of a skew-normal (KMC §6, App. D.4).
//!
//! The data are `n_samples` draws of `SN(θ, I, α)` ([`SkewNormal`]) summarised
//! by their mean `s`. The ABC likelihood at θ is
//!
//! ```text
//! L_ε(θ) = E_{s ~ simulator(θ)} [ exp(−½ ‖s − s_obs‖² / ε²) ],
//! ```
//!
//! the Gaussian ε-kernel without its normalising constant (constant in θ).
//! Each call estimates it without bias by the average over `n_pseudo`
//! independent simulated data sets, and returns the log of that average, so
//! exact pseudo-marginal MCMC targets the ε-posterior `p(θ) L_ε(θ)`.
//!
//! The KMC set-up ([`AbcSkewNormal::kmc_paper`], [`abc_skew_normal_posterior`]):
//! d = 10, α = 10·1, 10 draws per data set, 10 pseudo-data sets, ε = 0.55,
//! prior `N(0, 5² I)`, observed summary = one simulation at θ = 10·1. The
//! paper's observation came from R's `sn::rmsn` with seed 0, which cannot be
//! reproduced here; ours is drawn with `Xoshiro256PlusPlus` seeded with
//! [`OBSERVED_SEED`].

use crate::pseudo_marginal::{LikelihoodEstimator, PseudoMarginal, log_mean_exp};
use crate::util::check_dim;
use crate::{IsotropicGaussianPrior, SkewNormal, TargetError};
use kameleon_core::SummarySimulator;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// The seed of the simulation that gives the observed summary of
/// [`AbcSkewNormal::kmc_paper`].
pub const OBSERVED_SEED: u64 = 0;

/// The ABC likelihood estimator of the skew-normal location (module docs).
#[derive(Debug, Clone)]
pub struct AbcSkewNormal {
    simulator: SkewNormal,
    observed_summary: Vec<f64>,
    epsilon: f64,
    n_samples: usize,
    n_pseudo: usize,
}

impl AbcSkewNormal {
    /// The estimator for shape `simulator`, observed summary
    /// `observed_summary` (length d, finite), kernel width `epsilon > 0`,
    /// `n_samples ≥ 1` draws per data set and `n_pseudo ≥ 1` data sets per
    /// estimate.
    pub fn new(
        simulator: SkewNormal,
        observed_summary: Vec<f64>,
        epsilon: f64,
        n_samples: usize,
        n_pseudo: usize,
    ) -> Result<Self, TargetError> {
        if observed_summary.len() != simulator.dim() {
            return Err(TargetError::DimensionMismatch {
                expected: simulator.dim(),
                got: observed_summary.len(),
            });
        }
        if observed_summary.iter().any(|s| !s.is_finite()) {
            return Err(TargetError::InvalidParameter {
                name: "observed_summary",
                reason: "must be finite".into(),
            });
        }
        // ε² divides the squared distance: it must not underflow to 0
        // (an exact match would be 0/0)
        if !(epsilon.is_finite() && epsilon * epsilon > 0.0) {
            return Err(TargetError::InvalidParameter {
                name: "epsilon",
                reason: format!(
                    "must be finite and positive, with a square that does not underflow to 0 \
                     (above about 1.5e-154), got {epsilon}"
                ),
            });
        }
        if n_samples == 0 || n_pseudo == 0 {
            return Err(TargetError::InvalidParameter {
                name: "n_samples/n_pseudo",
                reason: "must both be at least 1".into(),
            });
        }
        Ok(Self {
            simulator,
            observed_summary,
            epsilon,
            n_samples,
            n_pseudo,
        })
    }

    /// The KMC set-up: d = 10, α = 10·1, ε = 0.55, 10 draws per data set,
    /// 10 pseudo-data sets, observed summary simulated at θ = 10·1 with
    /// seed [`OBSERVED_SEED`].
    pub fn kmc_paper() -> Result<Self, TargetError> {
        let (d, n_samples) = (10, 10);
        let simulator = SkewNormal::new(vec![10.0; d])?;
        let mut observed = vec![0.0; d];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(OBSERVED_SEED);
        simulator.add_sum_of_draws(&[10.0; 10], n_samples, &mut rng, &mut observed);
        observed.iter_mut().for_each(|s| *s /= n_samples as f64);
        Self::new(simulator, observed, 0.55, n_samples, 10)
    }

    /// The simulator.
    pub fn simulator(&self) -> &SkewNormal {
        &self.simulator
    }

    /// The observed summary `s_obs`.
    pub fn observed_summary(&self) -> &[f64] {
        &self.observed_summary
    }

    /// The kernel width ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// Draws per simulated data set.
    pub fn n_samples(&self) -> usize {
        self.n_samples
    }

    /// Simulated data sets per likelihood estimate.
    pub fn n_pseudo(&self) -> usize {
        self.n_pseudo
    }

    /// Simulates one data set at `theta` and writes its summary (the mean of
    /// its `n_samples` draws) into `out` (both of length d).
    pub fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        out.fill(0.0);
        self.simulator
            .add_sum_of_draws(theta, self.n_samples, rng, out);
        let scale = 1.0 / self.n_samples as f64;
        out.iter_mut().for_each(|s| *s *= scale);
    }

    /// `log exp(−½‖s − s_obs‖²/ε²)`, the log ε-kernel of one summary;
    /// errors unless `summary` has length d.
    pub fn log_kernel(&self, summary: &[f64]) -> Result<f64, TargetError> {
        check_dim(self.observed_summary.len(), summary.len())?;
        Ok(self.log_kernel_unchecked(summary))
    }

    /// [`AbcSkewNormal::log_kernel`] of a summary of length d.
    fn log_kernel_unchecked(&self, summary: &[f64]) -> f64 {
        let r2: f64 = summary
            .iter()
            .zip(&self.observed_summary)
            .map(|(s, o)| (s - o) * (s - o))
            .sum();
        -0.5 * r2 / (self.epsilon * self.epsilon)
    }
}

impl LikelihoodEstimator for AbcSkewNormal {
    fn dim(&self) -> usize {
        self.simulator.dim()
    }

    /// The log of the mean ε-kernel over `n_pseudo` fresh data sets: always
    /// finite and ≤ 0 for finite θ (computed in log space, so a far-away θ
    /// does not underflow to `-inf`). A θ of the wrong length gives NaN.
    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        if theta.len() != self.dim() {
            return f64::NAN;
        }
        // One summary buffer and one list of log kernels per estimate.
        let mut summary = vec![0.0; self.dim()];
        let log_kernels: Vec<f64> = (0..self.n_pseudo)
            .map(|_| {
                self.simulate_summary(theta, rng, &mut summary);
                self.log_kernel_unchecked(&summary)
            })
            .collect();
        log_mean_exp(&log_kernels)
    }
}

/// The KMC ABC posterior: [`AbcSkewNormal::kmc_paper`] with the prior
/// `N(0, 5² I)`.
pub fn abc_skew_normal_posterior()
-> Result<PseudoMarginal<AbcSkewNormal, IsotropicGaussianPrior>, TargetError> {
    Ok(PseudoMarginal::new(
        AbcSkewNormal::kmc_paper()?,
        IsotropicGaussianPrior::new(25.0)?,
    ))
}

impl SummarySimulator for AbcSkewNormal {
    fn parameter_dim(&self) -> usize {
        self.simulator().dim()
    }

    fn observed_summary(&self) -> &[f64] {
        AbcSkewNormal::observed_summary(self)
    }

    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        AbcSkewNormal::simulate_summary(self, theta, rng, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LogPrior, Target};
    use faer::{Mat, Side};
    use rand::RngExt;
    use rand_distr::StandardNormal;

    #[test]
    fn constructor_rejects_bad_input() {
        let sn = SkewNormal::new(vec![1.0; 3]).unwrap();
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0; 2], 0.5, 10, 10).is_err());
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0, f64::NAN, 0.0], 0.5, 10, 10).is_err());
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0; 3], 0.0, 10, 10).is_err());
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0; 3], 0.5, 0, 10).is_err());
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0; 3], 0.5, 10, 0).is_err());
        // an ε whose square underflows made the kernel of an exact match
        // 0/0 = NaN; just above, it is a proper (very narrow) kernel
        assert!(AbcSkewNormal::new(sn.clone(), vec![0.0; 3], 1e-170, 10, 10).is_err());
        let narrow = AbcSkewNormal::new(sn, vec![0.0; 3], 1e-150, 10, 10).unwrap();
        assert_eq!(narrow.log_kernel(&[0.0; 3]), Ok(0.0));
        // a summary of the wrong length was compared over the shorter one
        assert_eq!(
            narrow.log_kernel(&[0.0; 2]),
            Err(TargetError::DimensionMismatch {
                expected: 3,
                got: 2
            })
        );
    }

    #[test]
    fn paper_posterior_is_an_estimated_target_with_the_stated_prior() {
        let target = abc_skew_normal_posterior().unwrap();
        assert_eq!(target.dim(), 10);
        assert!(!target.is_exact());
        assert_eq!(target.estimator().epsilon(), 0.55);
        let prior = target.prior();
        // N(0, 25 I): the log density drops by ½·25/25 = ½ from 0 to 5·e₁.
        let mut e1 = [0.0; 10];
        e1[0] = 5.0;
        assert!((prior.log_prior(&[0.0; 10]) - prior.log_prior(&e1) - 0.5).abs() < 1e-12);
        // The observation is a summary near θ_true + √(2/π)δ (each coordinate
        // of the mean of 10 draws has sd ≤ 1/√10, so 2 is > 6 sd).
        let est = target.estimator();
        let mut expected = [0.0; 10];
        est.simulator().mean(&[10.0; 10], &mut expected);
        for (o, e) in est.observed_summary().iter().zip(&expected) {
            assert!((o - e).abs() < 2.0);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        assert!(target.log_density(&[f64::NAN; 10], &mut rng).is_nan());
        assert!(target.log_density(&[0.0; 3], &mut rng).is_nan());
    }

    /// The estimate is a valid (non-negative) likelihood estimate everywhere,
    /// and its mean at θ_true equals the ABC likelihood computed
    /// independently by Rao–Blackwellisation.
    ///
    /// The summary is `s = θ + δ·ā + w̄` with `ā` the mean of 10 half-normals
    /// and `w̄ ~ N(0, S)`, `S = (I − δδᵀ)/10`, independent of ā. Given ā,
    /// `E exp(−½‖s − s_obs‖²/ε²) = det(I + S/ε²)^{−½} exp(−½ rᵀ(S + ε²I)⁻¹r)`
    /// with `r = θ + δā − s_obs` (Gaussian integral), computed here with a
    /// dense faer Cholesky; only the 1-d average over ā is Monte Carlo.
    #[test]
    fn estimate_is_nonnegative_and_unbiased_for_the_abc_likelihood() {
        let abc = AbcSkewNormal::kmc_paper().unwrap();
        let d = abc.dim();
        let theta = [10.0; 10];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        for far in [[10.0; 10], [0.0; 10], [-200.0; 10]] {
            let value = abc.log_likelihood_estimate(&far, &mut rng);
            assert!(value.is_finite() && value <= 0.0, "{value}");
        }

        // Rao–Blackwellised ABC likelihood.
        let delta = abc.simulator().delta().to_vec();
        let eps2 = abc.epsilon() * abc.epsilon();
        let m = abc.n_samples() as f64;
        let s_cov = Mat::<f64>::from_fn(d, d, |i, j| {
            (if i == j { 1.0 } else { 0.0 } - delta[i] * delta[j]) / m
        });
        let a = Mat::<f64>::from_fn(d, d, |i, j| s_cov[(i, j)] + if i == j { eps2 } else { 0.0 });
        let llt = a.llt(Side::Lower).unwrap();
        // det(I + S/ε²) = det(S + ε²I)/ε^{2d}.
        let log_det: f64 =
            2.0 * (0..d).map(|i| llt.L()[(i, i)].ln()).sum::<f64>() - d as f64 * eps2.ln();
        let n_rb = 100_000;
        let mut rb = Vec::with_capacity(n_rb);
        let mut r = vec![0.0; d];
        for _ in 0..n_rb {
            let a_bar = (0..abc.n_samples())
                .map(|_| rng.sample::<f64, _>(StandardNormal).abs())
                .sum::<f64>()
                / m;
            for i in 0..d {
                r[i] = theta[i] + delta[i] * a_bar - abc.observed_summary()[i];
            }
            let mut v = faer::Col::<f64>::from_fn(d, |i| r[i]);
            faer::linalg::triangular_solve::solve_lower_triangular_in_place(
                llt.L(),
                v.as_mat_mut(),
                faer::Par::Seq,
            );
            rb.push((-0.5 * v.squared_norm_l2() - 0.5 * log_det).exp());
        }
        let (rb_mean, rb_se) = mean_and_standard_error(&rb);

        let n_est = 20_000;
        let estimates: Vec<f64> = (0..n_est)
            .map(|_| abc.log_likelihood_estimate(&theta, &mut rng).exp())
            .collect();
        let (est_mean, est_se) = mean_and_standard_error(&estimates);
        // Independent means: the difference has sd √(se₁² + se₂²); allow 4.
        let tolerance = 4.0 * (rb_se * rb_se + est_se * est_se).sqrt();
        assert!(
            (est_mean - rb_mean).abs() < tolerance,
            "estimator {est_mean} ± {est_se}, Rao–Blackwell {rb_mean} ± {rb_se}"
        );
        // The check has teeth: the likelihood is not negligible here.
        assert!(rb_mean > 20.0 * tolerance);
    }

    fn mean_and_standard_error(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, (var / n).sqrt())
    }
}
