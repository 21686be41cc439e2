//! Likelihoods of simulator models, estimated from `n` summaries simulated
//! at θ by any [`SummarySimulator`], as [`LikelihoodEstimator`]s (pair one
//! with a prior in [`crate::PseudoMarginal`]):
//!
//! - [`AbcLikelihood`]: approximate Bayesian computation with a Gaussian
//!   kernel, `L̂(θ) = (1/n) Σᵢ N(s_obs; sᵢ, diag(ε²))`. It is unbiased for
//!   the ε-likelihood `L_ε(θ) = E[N(s_obs; s, diag(ε²))]`, so exact
//!   pseudo-marginal MCMC targets the ε-posterior `p(θ) L_ε(θ)` whatever n.
//! - [`GaussianSyntheticLikelihood`]: the summaries taken to be Gaussian
//!   `N(μ(θ), Σ(θ))`. Wood's (2010) plug-in estimate `N(s_obs; μ̂, Σ̂)` is
//!   biased for `N(s_obs; μ, Σ)`, so its chains target a posterior that
//!   depends on n; the unbiased estimate of Ghurye & Olkin (1969), used for
//!   synthetic likelihood by Price, Drovandi, Lee & Nott (2018), makes them
//!   exact for the synthetic-likelihood posterior `p(θ) N(s_obs; μ(θ), Σ(θ))`.
//!
//! One estimator serves chains on several threads (`&self`): each thread
//! reuses its own scratch buffers, so an estimate allocates nothing once
//! its thread has made one of the same shape.

use crate::TargetError;
use crate::pseudo_marginal::LikelihoodEstimator;
use crate::util::{check_allocatable, check_dim};
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatRef, Par};
use kameleon_core::SummarySimulator;
use rand::Rng;
use std::cell::RefCell;
use std::f64::consts::PI;

/// This thread's buffers for `n` simulations of `s` summaries.
struct Workspace {
    shape: (usize, usize),
    /// The simulated summaries, one row of `s` per simulation.
    summaries: Vec<f64>,
    mean: Vec<f64>,
    residual: Vec<f64>,
    /// `s × s`: the scatter matrix, then its Cholesky factor.
    scatter: Mat<f64>,
}

impl Workspace {
    fn new((n, s): (usize, usize)) -> Self {
        Self {
            shape: (n, s),
            summaries: vec![0.0; n * s],
            mean: vec![0.0; s],
            residual: vec![0.0; s],
            scatter: Mat::zeros(s, s),
        }
    }
}

thread_local! {
    /// This thread's [`Workspace`]; chains on different threads never share
    /// buffers.
    static WORKSPACE: RefCell<Option<Workspace>> = const { RefCell::new(None) };
}

/// Runs `body` with this thread's workspace, (re)allocated if it does not
/// have `shape`. A nested call (a simulator that itself estimates a
/// likelihood) gets fresh buffers instead of failing.
fn with_workspace<R>(shape: (usize, usize), body: impl FnOnce(&mut Workspace) -> R) -> R {
    WORKSPACE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.as_ref().is_some_and(|ws| ws.shape != shape) {
                *slot = None;
            }
            body(slot.get_or_insert_with(|| Workspace::new(shape)))
        }
        Err(_) => body(&mut Workspace::new(shape)),
    })
}

/// The checks both estimators make of a simulator and `n_simulations`.
fn check_simulator<S: SummarySimulator>(
    simulator: &S,
    n_simulations: usize,
    minimum: usize,
    why: &str,
) -> Result<(), TargetError> {
    if simulator.parameter_dim() == 0 {
        return Err(TargetError::InvalidParameter {
            name: "parameter_dim",
            reason: "must be at least 1".into(),
        });
    }
    let observed = simulator.observed_summary();
    if observed.is_empty() || observed.iter().any(|s| !s.is_finite()) {
        return Err(TargetError::InvalidParameter {
            name: "observed_summary",
            reason: "must be non-empty and finite".into(),
        });
    }
    if n_simulations < minimum {
        return Err(TargetError::InvalidParameter {
            name: "n_simulations",
            reason: format!("must be at least {minimum} ({why}), got {n_simulations}"),
        });
    }
    Ok(())
}

/// The Gaussian-kernel ABC likelihood estimate (module docs), computed in
/// log space: `log L̂(θ) = log (1/n) Σᵢ exp(log N(s_obs; sᵢ, diag(ε²)))`.
/// A simulation whose summaries are not all finite matches no data: its
/// kernel is 0. If every simulation is such, the estimate is 0 (`-inf`).
#[derive(Debug, Clone)]
pub struct AbcLikelihood<S> {
    simulator: S,
    n_simulations: usize,
    inverse_epsilon: Vec<f64>,
    /// `log` of the kernel's normalising constant, `½ s log 2π + Σⱼ log εⱼ`.
    log_normaliser: f64,
}

impl<S: SummarySimulator> AbcLikelihood<S> {
    /// The estimator from `n_simulations ≥ 1` simulations with kernel
    /// widths `epsilon`: one (for every summary) or one per summary, each
    /// finite and positive. The simulator needs a parameter dimension ≥ 1
    /// and a non-empty finite observed summary.
    pub fn new(simulator: S, epsilon: &[f64], n_simulations: usize) -> Result<Self, TargetError> {
        check_simulator(&simulator, n_simulations, 1, "one simulation at least")?;
        let s = simulator.observed_summary().len();
        if epsilon.len() != 1 && epsilon.len() != s {
            return Err(TargetError::InvalidParameter {
                name: "epsilon",
                reason: format!(
                    "must hold 1 or {s} widths (one per summary), got {}",
                    epsilon.len()
                ),
            });
        }
        // the kernel scales by 1/ε, which must not overflow (an exact match
        // would be 0 · ∞)
        if epsilon
            .iter()
            .any(|e| !(e.is_finite() && *e > 0.0 && e.recip().is_finite()))
        {
            return Err(TargetError::InvalidParameter {
                name: "epsilon",
                reason: format!(
                    "must be finite and positive, with a finite reciprocal (above about \
                     5.6e-309), got {epsilon:?}"
                ),
            });
        }
        let width = |j: usize| epsilon[if epsilon.len() == 1 { 0 } else { j }];
        let inverse_epsilon: Vec<f64> = (0..s).map(|j| width(j).recip()).collect();
        let log_normaliser =
            0.5 * s as f64 * (2.0 * PI).ln() + (0..s).map(|j| width(j).ln()).sum::<f64>();
        Ok(Self {
            simulator,
            n_simulations,
            inverse_epsilon,
            log_normaliser,
        })
    }

    /// The simulator.
    pub fn simulator(&self) -> &S {
        &self.simulator
    }

    /// Simulations per estimate.
    pub fn n_simulations(&self) -> usize {
        self.n_simulations
    }

    /// `log N(s_obs; summary, diag(ε²))`; `-inf` if `summary` is not
    /// finite. Errors unless `summary` has the observed summary's length.
    pub fn log_kernel(&self, summary: &[f64]) -> Result<f64, TargetError> {
        check_dim(self.inverse_epsilon.len(), summary.len())?;
        Ok(self.log_kernel_unchecked(summary))
    }

    /// [`AbcLikelihood::log_kernel`] of a summary of the right length.
    fn log_kernel_unchecked(&self, summary: &[f64]) -> f64 {
        let squared: f64 = summary
            .iter()
            .zip(self.simulator.observed_summary())
            .zip(&self.inverse_epsilon)
            .map(|((s, o), w)| ((s - o) * w).powi(2))
            .sum();
        let value = -0.5 * squared - self.log_normaliser;
        if value.is_nan() {
            f64::NEG_INFINITY
        } else {
            value
        }
    }
}

impl<S: SummarySimulator> LikelihoodEstimator for AbcLikelihood<S> {
    fn dim(&self) -> usize {
        self.simulator.parameter_dim()
    }

    /// `log L̂(θ)` from `n_simulations` fresh simulations; NaN if θ has the
    /// wrong length.
    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        if theta.len() != self.dim() {
            return f64::NAN;
        }
        let s = self.inverse_epsilon.len();
        with_workspace((1, s), |ws| {
            // one pass of log-sum-exp: `sum` is Σ exp(kernel − top)
            let (mut top, mut sum) = (f64::NEG_INFINITY, 0.0);
            for _ in 0..self.n_simulations {
                self.simulator
                    .simulate_summary(theta, rng, &mut ws.summaries);
                let value = self.log_kernel_unchecked(&ws.summaries);
                if value == f64::NEG_INFINITY {
                    continue;
                }
                if value > top {
                    sum = sum * (top - value).exp() + 1.0;
                    top = value;
                } else {
                    sum += (value - top).exp();
                }
            }
            if top == f64::NEG_INFINITY {
                top
            } else {
                top + (sum / self.n_simulations as f64).ln()
            }
        })
    }
}

/// The Gaussian synthetic likelihood (module docs), from the sample mean
/// `μ̂` and the scatter matrix `M = Σᵢ (sᵢ − μ̂)(sᵢ − μ̂)ᵀ = (n − 1) Σ̂` of
/// `n` simulations; with `u = s_obs − μ̂` and `k = n / (n − 1)`:
///
/// ```text
/// Wood:      log N(s_obs; μ̂, M / (n − 1))
/// unbiased:  log [ k^(s/2) Γ((n−1)/2) / (π^(s/2) Γ((n−s−1)/2)) · |M|^(−1/2)
///                  · (1 − k uᵀM⁻¹u)₊^((n−s−3)/2) ]
/// ```
///
/// The unbiased estimate is the conditional density of one simulation
/// given `(μ̂, M)`, evaluated at `s_obs`; it is 0 (`-inf`) outside the
/// ellipsoid `k uᵀM⁻¹u < 1`. Either estimate is `-inf` when a summary is
/// not finite (μ̂ and Σ̂ are undefined) or `M` is singular.
#[derive(Debug, Clone)]
pub struct GaussianSyntheticLikelihood<S> {
    simulator: S,
    n_simulations: usize,
    unbiased: bool,
    /// The terms of the log estimate that depend on `n` and `s` only.
    constant: f64,
}

impl<S: SummarySimulator> GaussianSyntheticLikelihood<S> {
    /// The estimator from `n_simulations` simulations: at least `s + 1`
    /// for Wood's (`unbiased = false`; `Σ̂` must be invertible), at least
    /// `s + 3` for the unbiased one (at `s + 2` it is unbiased but its
    /// variance is infinite), `s` the number of summaries.
    pub fn new(simulator: S, n_simulations: usize, unbiased: bool) -> Result<Self, TargetError> {
        let s = simulator.observed_summary().len();
        let (extra, why) = if unbiased {
            (
                3,
                "the unbiased estimate's variance is infinite below s + 3",
            )
        } else {
            (1, "the sample covariance is singular below s + 1")
        };
        check_simulator(&simulator, n_simulations, s + extra, why)?;
        // each thread that estimates holds n × s simulated summaries
        check_allocatable(
            "n_simulations",
            "the simulated summaries (n_simulations × s)",
            &[n_simulations, s],
        )?;
        let (n, s) = (n_simulations as f64, s as f64);
        let constant = if unbiased {
            let k = n / (n - 1.0);
            0.5 * s * k.ln() + libm::lgamma(0.5 * (n - 1.0))
                - libm::lgamma(0.5 * (n - s - 1.0))
                - 0.5 * s * PI.ln()
        } else {
            -0.5 * s * ((2.0 * PI).ln() - (n - 1.0).ln())
        };
        Ok(Self {
            simulator,
            n_simulations,
            unbiased,
            constant,
        })
    }

    /// The simulator.
    pub fn simulator(&self) -> &S {
        &self.simulator
    }

    /// Simulations per estimate.
    pub fn n_simulations(&self) -> usize {
        self.n_simulations
    }

    /// Whether this is the unbiased estimate (else Wood's).
    pub fn is_unbiased(&self) -> bool {
        self.unbiased
    }

    /// The log estimate from the simulations in `ws.summaries`.
    fn log_estimate(&self, ws: &mut Workspace) -> f64 {
        let (n, s) = ws.shape;
        if ws.summaries.iter().any(|v| !v.is_finite()) {
            return f64::NEG_INFINITY;
        }
        ws.mean.fill(0.0);
        for row in ws.summaries.chunks_exact(s) {
            ws.mean.iter_mut().zip(row).for_each(|(m, v)| *m += v);
        }
        ws.mean.iter_mut().for_each(|m| *m /= n as f64);
        for row in ws.summaries.chunks_exact_mut(s) {
            row.iter_mut().zip(&ws.mean).for_each(|(v, m)| *v -= m);
        }
        let centred = MatRef::from_row_major_slice(&ws.summaries, n, s);
        matmul(
            ws.scatter.as_mut(),
            Accum::Replace,
            centred.transpose(),
            centred,
            1.0,
            Par::Seq,
        );
        if crate::cholesky::cholesky_lower_in_place(&mut ws.scatter).is_err() {
            return f64::NEG_INFINITY;
        }
        // L r = u by forward substitution: q = ‖r‖² = uᵀM⁻¹u
        let observed = self.simulator.observed_summary();
        let mut log_det = 0.0;
        for i in 0..s {
            let dot: f64 = (0..i).map(|j| ws.scatter[(i, j)] * ws.residual[j]).sum();
            let diagonal = ws.scatter[(i, i)];
            ws.residual[i] = (observed[i] - ws.mean[i] - dot) / diagonal;
            log_det += 2.0 * diagonal.ln();
        }
        let q: f64 = ws.residual.iter().map(|r| r * r).sum();
        let n = n as f64;
        let value = if self.unbiased {
            let t = 1.0 - n / (n - 1.0) * q;
            if t.is_nan() || t <= 0.0 {
                return f64::NEG_INFINITY;
            }
            self.constant - 0.5 * log_det + 0.5 * (n - s as f64 - 3.0) * t.ln()
        } else {
            self.constant - 0.5 * (log_det + (n - 1.0) * q)
        };
        if value.is_nan() {
            f64::NEG_INFINITY
        } else {
            value
        }
    }
}

impl<S: SummarySimulator> LikelihoodEstimator for GaussianSyntheticLikelihood<S> {
    fn dim(&self) -> usize {
        self.simulator.parameter_dim()
    }

    /// The log estimate from `n_simulations` fresh simulations; NaN if θ
    /// has the wrong length.
    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        if theta.len() != self.dim() {
            return f64::NAN;
        }
        let s = self.simulator.observed_summary().len();
        with_workspace((self.n_simulations, s), |ws| {
            for row in ws.summaries.chunks_exact_mut(s) {
                self.simulator.simulate_summary(theta, rng, row);
            }
            self.log_estimate(ws)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_distr::StandardNormal;
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// Summaries `θ + L z`, `z ~ N(0, I)` (so exactly `N(θ, LLᵀ)`), with
    /// `L` lower triangular (row-major); NaN summaries where `θ₀ > nan_above`.
    #[derive(Debug)]
    struct Shifted {
        observed: Vec<f64>,
        factor: Vec<f64>,
        nan_above: f64,
    }

    impl Shifted {
        fn new(observed: Vec<f64>, factor: Vec<f64>) -> Self {
            Self {
                observed,
                factor,
                nan_above: f64::INFINITY,
            }
        }
    }

    impl SummarySimulator for Shifted {
        fn parameter_dim(&self) -> usize {
            self.observed.len()
        }
        fn observed_summary(&self) -> &[f64] {
            &self.observed
        }
        fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
            let s = out.len();
            let z: Vec<f64> = (0..s).map(|_| rng.sample(StandardNormal)).collect();
            for i in 0..s {
                out[i] = theta[i] + (0..=i).map(|j| self.factor[i * s + j] * z[j]).sum::<f64>();
            }
            if theta[0] > self.nan_above {
                out[0] = f64::NAN;
            }
        }
    }

    /// The n simulations an estimate seeded with `seed` draws.
    fn replay(sim: &Shifted, theta: &[f64], n: usize, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                let mut out = vec![0.0; sim.observed.len()];
                sim.simulate_summary(theta, &mut rng, &mut out);
                out
            })
            .collect()
    }

    fn two_by_two() -> Shifted {
        Shifted::new(vec![0.3, -0.2], vec![1.0, 0.0, 0.6, 0.8])
    }

    #[test]
    fn abc_estimate_is_the_mean_of_the_normalised_kernels() {
        let eps = [0.5, 2.0];
        let abc = AbcLikelihood::new(two_by_two(), &eps, 7).unwrap();
        let theta = [0.1, 0.4];
        let direct: f64 = replay(abc.simulator(), &theta, 7, 3)
            .iter()
            .map(|s| {
                let (a, b) = ((s[0] - 0.3) / eps[0], (s[1] + 0.2) / eps[1]);
                (-0.5 * (a * a + b * b)).exp() / (2.0 * PI * eps[0] * eps[1])
            })
            .sum::<f64>()
            / 7.0;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let estimate = abc.log_likelihood_estimate(&theta, &mut rng);
        assert!(
            (estimate - direct.ln()).abs() < 1e-12,
            "{estimate} {}",
            direct.ln()
        );
        // far away: finite in log space, where the direct mean underflows
        let far = abc.log_likelihood_estimate(&[300.0, 300.0], &mut rng);
        assert!(far.is_finite() && far < -1e4);
        assert!(abc.log_likelihood_estimate(&[0.0], &mut rng).is_nan());
    }

    #[test]
    fn abc_kernel_of_a_non_finite_summary_is_zero_and_all_nan_is_minus_infinity() {
        let abc = AbcLikelihood::new(two_by_two(), &[1.0], 3).unwrap();
        assert_eq!(abc.log_kernel(&[f64::NAN, 0.0]), Ok(f64::NEG_INFINITY));
        assert_eq!(abc.log_kernel(&[f64::INFINITY, 0.0]), Ok(f64::NEG_INFINITY));
        // a summary of the wrong length was compared over the shorter one
        for len in [0, 1, 3] {
            assert_eq!(
                abc.log_kernel(&vec![0.0; len]),
                Err(TargetError::DimensionMismatch {
                    expected: 2,
                    got: len
                })
            );
        }
        let mut sim = two_by_two();
        sim.nan_above = 0.0;
        let abc = AbcLikelihood::new(sim, &[1.0], 3).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        assert_eq!(
            abc.log_likelihood_estimate(&[1.0, 0.0], &mut rng),
            f64::NEG_INFINITY
        );
        assert!(
            abc.log_likelihood_estimate(&[-1.0, 0.0], &mut rng)
                .is_finite()
        );
    }

    #[test]
    fn wood_estimate_is_the_gaussian_density_at_the_sample_moments() {
        let n = 9;
        let sl = GaussianSyntheticLikelihood::new(two_by_two(), n, false).unwrap();
        let theta = [0.5, 0.1];
        let sims = replay(sl.simulator(), &theta, n, 8);
        // sample mean and covariance (divisor n − 1), 2 × 2 inverse by hand
        let mean: Vec<f64> = (0..2)
            .map(|j| sims.iter().map(|s| s[j]).sum::<f64>() / n as f64)
            .collect();
        let cov = |i: usize, j: usize| {
            sims.iter()
                .map(|s| (s[i] - mean[i]) * (s[j] - mean[j]))
                .sum::<f64>()
                / (n - 1) as f64
        };
        let (a, b, d) = (cov(0, 0), cov(0, 1), cov(1, 1));
        let det = a * d - b * b;
        let u = [0.3 - mean[0], -0.2 - mean[1]];
        let quad = (d * u[0] * u[0] - 2.0 * b * u[0] * u[1] + a * u[1] * u[1]) / det;
        let direct = -(2.0 * PI).ln() - 0.5 * det.ln() - 0.5 * quad;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
        let estimate = sl.log_likelihood_estimate(&theta, &mut rng);
        assert!((estimate - direct).abs() < 1e-11, "{estimate} {direct}");
    }

    #[test]
    fn unbiased_synthetic_likelihood_averages_to_the_gaussian_density() {
        // The mean of exp(log L̂) over N estimates must equal N(obs; θ, LLᵀ)
        // (|LLᵀ| = 0.64). Its relative standard error is sd(w)/(mean(w)√N),
        // estimated from the same w (finite variance for n ≥ s + 3), and 5
        // of them bound the ratio minus 1. θ is 0 and about 1.5
        // Mahalanobis units from obs; n = s + 3, the smallest allowed.
        let n = 5;
        let sl = GaussianSyntheticLikelihood::new(two_by_two(), n, true).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        let big = 40_000;
        for theta in [[0.3, -0.2], [1.5, -0.2]] {
            let u = [0.3 - theta[0], -0.2 - theta[1]];
            // L⁻¹u for L = [[1, 0], [0.6, 0.8]]
            let r = [u[0], (u[1] - 0.6 * u[0]) / 0.8];
            let exact = -(2.0 * PI).ln() - 0.5 * 0.64f64.ln() - 0.5 * (r[0] * r[0] + r[1] * r[1]);
            let w: Vec<f64> = (0..big)
                .map(|_| (sl.log_likelihood_estimate(&theta, &mut rng) - exact).exp())
                .collect();
            let mean = w.iter().sum::<f64>() / big as f64;
            let sd = (w.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (big - 1) as f64).sqrt();
            let se = sd / (big as f64).sqrt();
            assert!((mean - 1.0).abs() < 5.0 * se, "{theta:?}: {mean} ± {se}");
        }
    }

    #[test]
    fn synthetic_likelihood_of_non_finite_or_singular_summaries_is_minus_infinity() {
        let mut sim = two_by_two();
        sim.nan_above = 0.0;
        let sl = GaussianSyntheticLikelihood::new(sim, 4, false).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        assert_eq!(
            sl.log_likelihood_estimate(&[1.0, 0.0], &mut rng),
            f64::NEG_INFINITY
        );
        // a constant second summary: the scatter matrix is singular
        let degenerate = Shifted::new(vec![0.0, 0.0], vec![1.0, 0.0, 0.0, 0.0]);
        let sl = GaussianSyntheticLikelihood::new(degenerate, 6, true).unwrap();
        assert_eq!(
            sl.log_likelihood_estimate(&[0.0, 0.0], &mut rng),
            f64::NEG_INFINITY
        );
    }

    #[test]
    fn invalid_settings_are_refused_naming_the_parameter() {
        let named = |e: TargetError| match e {
            TargetError::InvalidParameter { name, .. } => name,
            other => panic!("{other}"),
        };
        let abc = |eps: &[f64], n| AbcLikelihood::new(two_by_two(), eps, n).map(|_| ());
        assert_eq!(named(abc(&[1.0], 0).unwrap_err()), "n_simulations");
        assert_eq!(named(abc(&[1.0, 2.0, 3.0], 5).unwrap_err()), "epsilon");
        assert_eq!(named(abc(&[0.0], 5).unwrap_err()), "epsilon");
        assert_eq!(named(abc(&[f64::NAN, 1.0], 5).unwrap_err()), "epsilon");
        // a subnormal ε whose reciprocal overflows made the kernel of an
        // exact match 0 · ∞ (reported as −∞); a tiny normal one is kept
        assert_eq!(named(abc(&[1.0, 1e-310], 5).unwrap_err()), "epsilon");
        assert!(abc(&[1e-300], 5).is_ok());
        let sl =
            |n, unbiased| GaussianSyntheticLikelihood::new(two_by_two(), n, unbiased).map(|_| ());
        assert!(sl(3, false).is_ok() && sl(5, true).is_ok());
        assert_eq!(named(sl(2, false).unwrap_err()), "n_simulations");
        assert_eq!(named(sl(4, true).unwrap_err()), "n_simulations");
        // n × s simulated summaries that could never be allocated: refused
        // here, not a panic or an abort at the first estimate
        for n in [1 << 62, 1 << 45] {
            assert_eq!(named(sl(n, false).unwrap_err()), "n_simulations");
        }
        let bad = Shifted::new(vec![f64::NAN, 0.0], vec![1.0, 0.0, 0.0, 1.0]);
        assert_eq!(
            named(GaussianSyntheticLikelihood::new(bad, 10, false).unwrap_err()),
            "observed_summary"
        );
    }
}
