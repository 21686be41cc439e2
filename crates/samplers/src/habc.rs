//! Hamiltonian ABC (Meeds, Leenders & Welling, UAI 2015), the KMC paper's
//! baseline on the ABC skew-normal target (KMC §6).
//!
//! **HABC is biased by design.** It follows a *noisy, estimated* gradient
//! with a friction integrator and accepts every trajectory — there is no
//! Metropolis–Hastings correction — so its chain does not have the ABC
//! posterior as its invariant distribution. It is a baseline, not an exact
//! sampler.
//!
//! # The synthetic likelihood ([`SyntheticLikelihood`])
//!
//! At θ, simulate `S` summaries `s₁ … s_S` ([`SummarySimulator`]), take their
//! mean `μ̂` and unbiased sample covariance `Σ̂`, and return
//!
//! ```text
//! log p̂(s_obs | θ) = log N(s_obs; μ̂(θ), Σ̂(θ) + ε²I).
//! ```
//!
//! **Sticky random numbers:** every evaluation with the same `sticky_seed`
//! draws its simulations from a fresh `Xoshiro256PlusPlus::seed_from_u64(sticky_seed)`,
//! so for a fixed seed the estimate is a deterministic function of θ.
//!
//! **SPSA gradient** (simultaneous perturbation): draw Δ with independent
//! Rademacher (±1) entries, and with the same sticky seed on both sides set
//!
//! ```text
//! ĝᵢ = [f(θ + cΔ) − f(θ − cΔ)] / (2cΔᵢ),     f = log p̂(s_obs | ·),
//! ```
//!
//! with perturbation size `c`. Averaged over Δ it is the gradient of `f`
//! up to O(c²) (exactly so when `f` is quadratic, as for any simulator whose
//! summary is θ plus noise that does not depend on θ). Cost: `2S` simulations.
//!
//! # The sampler ([`Habc`])
//!
//! Each iteration draws a fresh sticky seed `u` (the whole trajectory uses
//! it), a step size ε ~ U[lo, hi), and momentum p ~ N(0, I); then, from
//! θ₀ = the current state, for l = 0 … L−1 (the SGHMC discretisation of
//! Chen et al. 2014, as in their reference code, with the HABC friction of
//! Meeds et al. §4.4 / Eq. 21):
//!
//! ```text
//! g       = ∇ log p(θ_l) + ĝ(θ_l)                    (exact prior gradient + SPSA)
//! p_{l+1} = (p_l + ε g + η) / (1 + ε Cᵢ),   ηᵢ ~ N(0, 2ε (Cᵢ − B̂ᵢ)),
//! θ_{l+1} = θ_l + ε p_{l+1},
//! ```
//!
//! coordinate-wise, with friction `Cᵢ = c + V̂ᵢ` and `B̂ᵢ = ½ ε V̂ᵢ`: `c ≥ 0` is
//! [`HabcConfig::friction`] and `V̂ᵢ` the running (Welford) variance of
//! coordinate i over all gradient estimates of the run so far — the "running
//! average of the global covariance of the gradient estimates" of Meeds et
//! al., kept diagonal here (the kamiltonian code used the full matrix). The
//! friction grows with the gradient noise; that is what keeps the
//! uncorrected dynamics from gaining energy from the SPSA noise (without it
//! a 10-d run diverges), and also why HABC mixes slowly. `Cᵢ − B̂ᵢ` is
//! clamped at 0 (it is ≥ c whenever ε ≤ 2). The friction is applied
//! semi-implicitly: `(p + εg + η)/(1 + εC)` equals Chen et al.'s explicit
//! `p + εg − εCp + η` to first order in ε, but stays stable for any εC,
//! whereas the explicit form blows up once εCᵢ > 2 — which happens as soon
//! as V̂ is large (far from the mode, or in 10-d where SPSA noise is large). The end of the trajectory is
//! always accepted; only a non-finite trajectory (a failed factorisation or
//! a divergence) leaves the state unchanged and is counted in
//! [`Chain::rejected_non_finite`]. One iteration costs `2·L·S` simulations.
//!
//! The leapfrog of [`crate::HamiltonianMove`] is not reused: it has no
//! friction or injected noise and returns a kinetic-energy correction for an
//! MH step that HABC does not take; adding those to it would change HMC.
//!
//! The recorded [`Chain::log_densities`] are `log p(θ) + log p̂(s_obs | θ)`
//! at the recorded state with that iteration's sticky seed (S extra
//! simulations per recorded state).

use crate::adaptation::RunningMoments;
use crate::chain::{Chain, RunConfig, chain_rng};
use crate::engine::check_start;
use crate::error::{Result, SamplerError, ensure, ensure_room};
use kameleon_core::{IsotropicGaussianPrior, LogPrior, SummarySimulator};
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The Gaussian synthetic likelihood with sticky random numbers and its SPSA
/// gradient (module docs). Holds its own buffers: evaluations allocate nothing.
#[derive(Debug, Clone)]
pub struct SyntheticLikelihood<S> {
    simulator: S,
    n_simulations: usize,
    epsilon: f64,
    summaries: Vec<f64>,
    mean: Vec<f64>,
    factor: Vec<f64>,
    residual: Vec<f64>,
    theta_plus: Vec<f64>,
    theta_minus: Vec<f64>,
    delta: Vec<f64>,
}

impl<S: SummarySimulator> SyntheticLikelihood<S> {
    /// `n_simulations = S ≥ 2` simulations per estimate and the ridge ε
    /// (> 0, with ε² a positive finite double) added as ε²I to the sample
    /// covariance. The simulator
    /// needs θ and summary dimensions ≥ 1 and a finite observed summary.
    pub fn new(simulator: S, n_simulations: usize, epsilon: f64) -> Result<Self> {
        let (d, m) = (
            simulator.parameter_dim(),
            simulator.observed_summary().len(),
        );
        ensure(d >= 1, "parameter_dim", "must be at least 1")?;
        ensure(m >= 1, "observed_summary", "must have length at least 1")?;
        ensure(
            simulator.observed_summary().iter().all(|s| s.is_finite()),
            "observed_summary",
            "must be finite",
        )?;
        ensure(n_simulations >= 2, "n_simulations", "must be at least 2")?;
        ensure_room(
            "HABC's simulated summaries (S × m) and their covariance (m × m)",
            &[&[n_simulations, m], &[m, m]],
        )?;
        // used as the ridge ε²I: its square must be a positive double too
        let ridge = epsilon * epsilon;
        ensure(
            ridge.is_finite() && ridge > 0.0 && epsilon > 0.0,
            "epsilon",
            "must be positive with a finite positive square (about 1e-154 to 1e154)",
        )?;
        Ok(Self {
            simulator,
            n_simulations,
            epsilon,
            summaries: vec![0.0; n_simulations * m],
            mean: vec![0.0; m],
            factor: vec![0.0; m * m],
            residual: vec![0.0; m],
            theta_plus: vec![0.0; d],
            theta_minus: vec![0.0; d],
            delta: vec![0.0; d],
        })
    }

    /// The simulator.
    pub fn simulator(&self) -> &S {
        &self.simulator
    }

    /// The number S of simulations per estimate.
    pub fn n_simulations(&self) -> usize {
        self.n_simulations
    }

    /// The ridge ε.
    pub fn epsilon(&self) -> f64 {
        self.epsilon
    }

    /// The dimension of θ.
    pub fn dim(&self) -> usize {
        self.delta.len()
    }

    /// `log N(s_obs; μ̂(θ), Σ̂(θ) + ε²I)` from S simulations drawn with
    /// `Xoshiro256PlusPlus::seed_from_u64(sticky_seed)`: a deterministic
    /// function of (θ, seed). NaN if θ has the wrong length, or the
    /// simulations are non-finite.
    pub fn log_density(&mut self, theta: &[f64], sticky_seed: u64) -> f64 {
        if theta.len() != self.dim() {
            return f64::NAN;
        }
        let m = self.mean.len();
        let n = self.n_simulations;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(sticky_seed);
        for s in self.summaries.chunks_exact_mut(m) {
            self.simulator.simulate_summary(theta, &mut rng, s);
        }
        self.mean.fill(0.0);
        for s in self.summaries.chunks_exact(m) {
            self.mean.iter_mut().zip(s).for_each(|(a, b)| *a += b);
        }
        self.mean.iter_mut().for_each(|a| *a /= n as f64);
        // Lower triangle of Σ̂ + ε²I (unbiased, divisor S − 1).
        let ridge = self.epsilon * self.epsilon;
        for i in 0..m {
            for j in 0..=i {
                let cov = self
                    .summaries
                    .chunks_exact(m)
                    .map(|s| (s[i] - self.mean[i]) * (s[j] - self.mean[j]))
                    .sum::<f64>()
                    / (n - 1) as f64;
                self.factor[i * m + j] = cov + if i == j { ridge } else { 0.0 };
            }
        }
        if !cholesky_lower_in_place(&mut self.factor, m) {
            return f64::NAN;
        }
        // Forward solve L z = s_obs − μ̂ in `residual`.
        let observed = self.simulator.observed_summary();
        let mut log_det_half = 0.0;
        for i in 0..m {
            let row = &self.factor[i * m..i * m + i];
            let dot: f64 = row
                .iter()
                .zip(&self.residual[..i])
                .map(|(l, z)| l * z)
                .sum();
            let diag = self.factor[i * m + i];
            self.residual[i] = (observed[i] - self.mean[i] - dot) / diag;
            log_det_half += diag.ln();
        }
        let quad: f64 = self.residual.iter().map(|z| z * z).sum();
        -0.5 * quad - log_det_half - 0.5 * m as f64 * (2.0 * std::f64::consts::PI).ln()
    }

    /// One SPSA estimate of ∇θ of [`SyntheticLikelihood::log_density`] at
    /// fixed `sticky_seed` into `out`: a Rademacher Δ drawn from `rng`, and
    /// the two-sided difference with perturbation size `perturbation` (> 0)
    /// and the same sticky seed on both sides. Returns `false` (and leaves
    /// `out` unspecified) if either side is non-finite or the lengths are
    /// wrong.
    pub fn spsa_gradient(
        &mut self,
        theta: &[f64],
        sticky_seed: u64,
        perturbation: f64,
        rng: &mut dyn Rng,
        out: &mut [f64],
    ) -> bool {
        if theta.len() != self.dim() || out.len() != self.dim() {
            return false;
        }
        for i in 0..self.dim() {
            self.delta[i] = if rng.random::<bool>() { 1.0 } else { -1.0 };
            self.theta_plus[i] = theta[i] + perturbation * self.delta[i];
            self.theta_minus[i] = theta[i] - perturbation * self.delta[i];
        }
        // Move the perturbed points out so `log_density` can borrow `self`.
        let plus = std::mem::take(&mut self.theta_plus);
        let minus = std::mem::take(&mut self.theta_minus);
        let f_plus = self.log_density(&plus, sticky_seed);
        let f_minus = self.log_density(&minus, sticky_seed);
        self.theta_plus = plus;
        self.theta_minus = minus;
        let slope = (f_plus - f_minus) / (2.0 * perturbation);
        if !slope.is_finite() {
            return false;
        }
        // 1/Δᵢ = Δᵢ for Δᵢ = ±1.
        out.iter_mut()
            .zip(&self.delta)
            .for_each(|(g, d)| *g = slope * d);
        true
    }
}

/// In-place Cholesky of the lower triangle of the m × m row-major `a`
/// (the upper triangle is ignored); `false` if it is not positive definite.
fn cholesky_lower_in_place(a: &mut [f64], m: usize) -> bool {
    for j in 0..m {
        let mut diag = a[j * m + j];
        for k in 0..j {
            diag -= a[j * m + k] * a[j * m + k];
        }
        if !(diag > 0.0 && diag.is_finite()) {
            return false;
        }
        let diag = diag.sqrt();
        a[j * m + j] = diag;
        for i in j + 1..m {
            let mut v = a[i * m + j];
            for k in 0..j {
                v -= a[i * m + k] * a[j * m + k];
            }
            a[i * m + j] = v / diag;
        }
    }
    true
}

/// The integrator settings of [`Habc`] (module docs for the exact update).
/// The default is [`HabcConfig::kmc_paper`].
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct HabcConfig {
    /// Step size ε ~ U[lo, hi) per iteration (0 < lo ≤ hi < ∞).
    pub step_size: (f64, f64),
    /// Integration steps L per iteration (≥ 1).
    pub steps: u32,
    /// The constant part c ≥ 0 of the friction Cᵢ = c + V̂ᵢ (module docs).
    pub friction: f64,
    /// SPSA perturbation size c > 0.
    pub perturbation: f64,
}

impl HabcConfig {
    /// The settings of the KMC paper's HABC runs (kamiltonian `HABCJob`):
    /// ε ~ U[0.01, 0.1), L = 50, friction C = 10⁻⁵, SPSA perturbation c = 5.
    /// (The synthetic likelihood there used S = 10 and ε = 0.55.)
    pub fn kmc_paper() -> Self {
        Self {
            step_size: (0.01, 0.1),
            steps: 50,
            friction: 1e-5,
            perturbation: 5.0,
        }
    }

    /// Sets the step-size range (lo, hi), 0 < lo ≤ hi < ∞.
    pub fn with_step_size(mut self, step_size: (f64, f64)) -> Result<Self> {
        check_step_size(step_size)?;
        self.step_size = step_size;
        Ok(self)
    }

    /// Sets the number of integration steps L (≥ 1).
    pub fn with_steps(mut self, steps: u32) -> Result<Self> {
        check_steps(steps)?;
        self.steps = steps;
        Ok(self)
    }

    /// Sets the constant part c of the friction (finite, ≥ 0).
    pub fn with_friction(mut self, friction: f64) -> Result<Self> {
        check_friction(friction)?;
        self.friction = friction;
        Ok(self)
    }

    /// Sets the SPSA perturbation size (finite, > 0).
    pub fn with_perturbation(mut self, perturbation: f64) -> Result<Self> {
        check_perturbation(perturbation)?;
        self.perturbation = perturbation;
        Ok(self)
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<()> {
        check_step_size(self.step_size)?;
        check_steps(self.steps)?;
        check_friction(self.friction)?;
        check_perturbation(self.perturbation)
    }
}

impl Default for HabcConfig {
    /// [`HabcConfig::kmc_paper`].
    fn default() -> Self {
        Self::kmc_paper()
    }
}

fn check_step_size((lo, hi): (f64, f64)) -> Result<()> {
    ensure(
        lo > 0.0 && lo <= hi && hi.is_finite(),
        "step_size",
        "needs 0 < lo ≤ hi < ∞",
    )
}

fn check_steps(steps: u32) -> Result<()> {
    ensure(steps >= 1, "steps", "must be at least 1")
}

fn check_friction(friction: f64) -> Result<()> {
    ensure(
        friction.is_finite() && friction >= 0.0,
        "friction",
        "must be finite and non-negative",
    )
}

fn check_perturbation(perturbation: f64) -> Result<()> {
    ensure(
        perturbation.is_finite() && perturbation > 0.0,
        "perturbation",
        "must be finite and positive",
    )
}

/// The Hamiltonian ABC sampler: a synthetic likelihood, an isotropic
/// Gaussian prior (use a large variance for a nearly flat one) and the
/// integrator settings. **Biased: no MH correction** (module docs).
#[derive(Debug, Clone)]
pub struct Habc<S> {
    likelihood: SyntheticLikelihood<S>,
    prior: IsotropicGaussianPrior,
    config: HabcConfig,
}

impl<S: SummarySimulator> Habc<S> {
    /// Checks `config` and returns the sampler.
    pub fn new(
        likelihood: SyntheticLikelihood<S>,
        prior: IsotropicGaussianPrior,
        config: HabcConfig,
    ) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            likelihood,
            prior,
            config,
        })
    }

    /// The synthetic likelihood.
    pub fn likelihood(&self) -> &SyntheticLikelihood<S> {
        &self.likelihood
    }

    /// The integrator settings.
    pub fn config(&self) -> HabcConfig {
        self.config
    }

    /// Runs one chain from `start` with the rng `chain_rng(seed, chain_index)`.
    /// Every step counts as accepted unless its trajectory was non-finite.
    /// Errors: wrong `start` length, a non-finite coordinate of `start`,
    /// invalid `run`, or a start where the
    /// prior plus synthetic log likelihood is not finite.
    pub fn run(
        &mut self,
        start: &[f64],
        run: RunConfig,
        seed: u64,
        chain_index: u64,
    ) -> Result<Chain> {
        let (steps_done, stop) = (AtomicU64::new(0), AtomicBool::new(false));
        self.run_observed(start, run, seed, chain_index, &steps_done, &stop)
    }

    /// [`Habc::run`] watched from another thread: `steps_done` holds the
    /// number of steps taken (stored after each step), and once `stop` is
    /// set the run ends after the current step, returning the chain so far
    /// ([`Chain::steps`] says how many steps it took). Unstopped, the chain
    /// is [`Habc::run`]'s.
    pub fn run_observed(
        &mut self,
        start: &[f64],
        run: RunConfig,
        seed: u64,
        chain_index: u64,
        steps_done: &AtomicU64,
        stop: &AtomicBool,
    ) -> Result<Chain> {
        let d = self.likelihood.dim();
        check_start(start, d)?;
        run.validate()?;
        crate::chain::check_chain_index(chain_index)?;
        let mut chain = Chain::empty(d, run, seed, chain_index, run.iterations / run.thin)?;
        let mut rng = chain_rng(seed, chain_index);
        let start_density = self.log_posterior(start, rng.next_u64());
        if !start_density.is_finite() {
            return Err(SamplerError::StartOutsideSupport(start_density));
        }
        let clock = Instant::now();
        let mut current = start.to_vec();
        let mut position = vec![0.0; d];
        let mut momentum = vec![0.0; d];
        let mut grad = vec![0.0; d];
        let mut noise = RunningMoments::new(d);
        let (lo, hi) = self.config.step_size;
        let friction = self.config.friction;
        let mut taken = 0;
        for step in 0..run.total_steps() {
            if stop.load(Ordering::Relaxed) {
                break;
            }
            let sticky_seed = rng.next_u64();
            let eps = if lo < hi {
                rng.random_range(lo..hi)
            } else {
                lo
            };
            momentum
                .iter_mut()
                .for_each(|p| *p = rng.sample(StandardNormal));
            position.copy_from_slice(&current);
            let mut finite = true;
            for _ in 0..self.config.steps {
                if !self.likelihood.spsa_gradient(
                    &position,
                    sticky_seed,
                    self.config.perturbation,
                    &mut rng,
                    &mut grad,
                ) {
                    finite = false;
                    break;
                }
                let inv_var = 1.0 / self.prior.variance();
                grad.iter_mut()
                    .zip(&position)
                    .for_each(|(g, x)| *g -= x * inv_var);
                noise.push(&grad);
                for i in 0..d {
                    let v_hat = coordinate_variance(&noise, i);
                    let c_i = friction + v_hat;
                    let noise_var = 2.0 * eps * (c_i - 0.5 * eps * v_hat).max(0.0);
                    let eta = if noise_var > 0.0 {
                        noise_var.sqrt() * rng.sample::<f64, _>(StandardNormal)
                    } else {
                        0.0
                    };
                    momentum[i] = (momentum[i] + eps * grad[i] + eta) / (1.0 + eps * c_i);
                    position[i] += eps * momentum[i];
                }
            }
            // a finite gradient at every step can still end in an overflow
            let moved = finite && position.iter().chain(&momentum).all(|v| v.is_finite());
            if moved {
                current.copy_from_slice(&position);
                chain.accepted_total += 1;
            } else {
                chain.rejected_non_finite += 1;
            }
            if step >= run.burn_in && (step - run.burn_in + 1).is_multiple_of(run.thin) {
                let density = self.log_posterior(&current, sticky_seed);
                chain.samples.extend_from_slice(&current);
                chain.accepted.push(moved);
                chain.log_densities.push(density);
                chain
                    .accept_probabilities
                    .push(if moved { 1.0 } else { 0.0 });
            }
            taken = step + 1;
            steps_done.store(taken, Ordering::Relaxed);
        }
        chain.wall_time_secs = clock.elapsed().as_secs_f64();
        chain.steps = taken;
        chain.adaptation.extra = (0..d)
            .map(|i| {
                (
                    format!("gradient_variance_{i}"),
                    coordinate_variance(&noise, i),
                )
            })
            .collect();
        Ok(chain)
    }

    /// `log p(θ) + log p̂(s_obs | θ)` with the given sticky seed.
    fn log_posterior(&mut self, theta: &[f64], sticky_seed: u64) -> f64 {
        self.prior.log_prior(theta) + self.likelihood.log_density(theta, sticky_seed)
    }
}

/// The sample variance of coordinate i of the points in `moments` (0 before
/// two points).
fn coordinate_variance(moments: &RunningMoments, i: usize) -> f64 {
    let n = moments.count();
    if n < 2 {
        0.0
    } else {
        moments.scatter()[i * moments.dim() + i] / (n - 1) as f64
    }
}
