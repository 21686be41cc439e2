//! The adaptive Metropolis family (Haario et al. 2001; Andrieu & Thoms 2008):
//! AM with fixed scale (AM-FS), AM with a learned global scale (AM-LS / GAM,
//! Alg. 4) and Rao–Blackwellised AM (Alg. 3), all one proposal
//! N(x, ν²(Σ_t + εI)) differing only in how Σ_t and ν are learned.

use crate::adaptation::{RunningMoments, Scale, StepSchedule, StochasticMoments};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, check_dim, ensure};
use crate::{RobbinsMonro, Target};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// How [`AdaptiveMetropolis`] learns the target's mean and covariance: the
/// configuration of a [`MomentEstimator`].
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub enum MomentUpdate {
    /// The empirical mean and covariance of the whole history (Welford; the
    /// default).
    #[default]
    Empirical,
    /// Stochastic approximation fed x_{t+1} with steps γ_t = `schedule`
    /// (Andrieu & Thoms Alg. 4).
    StochasticApproximation {
        /// The step sizes γ_t.
        schedule: StepSchedule,
    },
    /// Rao–Blackwellised stochastic approximation (Andrieu & Thoms Alg. 3)
    /// with steps γ_t = `schedule`.
    RaoBlackwellised {
        /// The step sizes γ_t.
        schedule: StepSchedule,
    },
}

impl MomentUpdate {
    /// Checks the step schedule, if any.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Empirical => Ok(()),
            Self::StochasticApproximation { schedule } | Self::RaoBlackwellised { schedule } => {
                schedule.validate()
            }
        }
    }
}

/// How an adaptive sampler estimates the target's mean and covariance.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MomentEstimator {
    /// The empirical mean and covariance of the whole history (Welford).
    Empirical(RunningMoments),
    /// Stochastic approximation fed x_{t+1} with step γ_t (Andrieu & Thoms Alg. 4).
    StochasticApproximation {
        /// The estimates.
        moments: StochasticMoments,
        /// The step sizes γ_t.
        schedule: StepSchedule,
        /// Updates so far.
        updates: u64,
    },
    /// Rao–Blackwellised stochastic approximation (Andrieu & Thoms Alg. 3):
    /// fed x* with weight α and x_t with weight 1 − α, α the acceptance probability.
    RaoBlackwellised {
        /// The estimates.
        moments: StochasticMoments,
        /// The step sizes γ_t.
        schedule: StepSchedule,
        /// Updates so far.
        updates: u64,
    },
}

impl MomentEstimator {
    /// The estimator `update` in dimension `dim`, before any update.
    pub fn new(dim: usize, update: MomentUpdate) -> Result<Self> {
        match update {
            MomentUpdate::Empirical => Ok(Self::empirical(dim)),
            MomentUpdate::StochasticApproximation { schedule } => Self::stochastic(dim, schedule),
            MomentUpdate::RaoBlackwellised { schedule } => Self::rao_blackwellised(dim, schedule),
        }
    }

    /// The empirical (Welford) estimator in dimension `dim`.
    pub fn empirical(dim: usize) -> Self {
        Self::Empirical(RunningMoments::new(dim))
    }

    /// Stochastic approximation (Alg. 4), started at mean 0 and covariance I
    /// (the mean is reset to the chain's start point when the chain starts).
    pub fn stochastic(dim: usize, schedule: StepSchedule) -> Result<Self> {
        schedule.validate()?;
        Ok(Self::StochasticApproximation {
            moments: StochasticMoments::new(vec![0.0; dim], identity(dim))?,
            schedule,
            updates: 0,
        })
    }

    /// Rao–Blackwellised stochastic approximation (Alg. 3), started like
    /// [`MomentEstimator::stochastic`].
    pub fn rao_blackwellised(dim: usize, schedule: StepSchedule) -> Result<Self> {
        schedule.validate()?;
        Ok(Self::RaoBlackwellised {
            moments: StochasticMoments::new(vec![0.0; dim], identity(dim))?,
            schedule,
            updates: 0,
        })
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        match self {
            Self::Empirical(m) => m.dim(),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => moments.dim(),
        }
    }

    /// Seeds the estimate with the chain's start point.
    pub fn start(&mut self, x0: &[f64]) {
        match self {
            Self::Empirical(m) => m.push(x0),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => {
                moments.set_mean(x0);
            }
        }
    }

    /// Feeds one step's outcome (after the accept decision).
    pub fn update(&mut self, outcome: &StepOutcome<'_>) {
        match self {
            Self::Empirical(m) => m.push(outcome.current),
            Self::StochasticApproximation {
                moments,
                schedule,
                updates,
            } => {
                *updates += 1;
                moments.update(schedule.step(*updates + 1), &[(outcome.current, 1.0)]);
            }
            Self::RaoBlackwellised {
                moments,
                schedule,
                updates,
            } => {
                *updates += 1;
                let a = outcome.accept_prob;
                moments.update(
                    schedule.step(*updates + 1),
                    &[(outcome.proposed, a), (outcome.previous, 1.0 - a)],
                );
            }
        }
    }

    /// The current mean estimate.
    pub fn mean(&self) -> &[f64] {
        match self {
            Self::Empirical(m) => m.mean(),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => moments.mean(),
        }
    }

    /// Writes the current covariance estimate (d × d row-major) into `out`.
    pub fn covariance_into(&self, out: &mut [f64]) {
        match self {
            Self::Empirical(m) => m.covariance_into(out),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => out.copy_from_slice(moments.covariance()),
        }
    }
}

fn identity(dim: usize) -> Vec<f64> {
    let mut m = vec![0.0; dim * dim];
    for i in 0..dim {
        m[i * dim + i] = 1.0;
    }
    m
}

/// The settings of [`AdaptiveMetropolis`]. The default is AM-FS (Haario et
/// al. 2001): the empirical covariance, the fixed ν = 2.38/√d, ε = 10⁻⁶ and
/// a warm-up of 2d updates; [`AdaptiveMetropolisConfig::learned_scale`] and
/// [`AdaptiveMetropolisConfig::rao_blackwellised`] are the other named
/// members of the family.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AdaptiveMetropolisConfig {
    /// ν, fixed or Robbins–Monro adapted; `None` is the fixed 2.38/√d of
    /// the sampler's dimension d.
    pub scale: Option<Scale>,
    /// How Σ_t is learned.
    pub moments: MomentUpdate,
    /// ε ≥ 0 added to the diagonal of Σ_t.
    pub epsilon: f64,
    /// The number of adaptive updates before Σ_t replaces the identity;
    /// `None` is 2d.
    pub warmup: Option<u64>,
}

impl Default for AdaptiveMetropolisConfig {
    /// AM-FS: empirical covariance, ν = 2.38/√d, ε = 10⁻⁶, warm-up 2d.
    fn default() -> Self {
        Self {
            scale: None,
            moments: MomentUpdate::Empirical,
            epsilon: 1e-6,
            warmup: None,
        }
    }
}

impl AdaptiveMetropolisConfig {
    /// AM-LS / GAM (Andrieu & Thoms Alg. 4) in dimension `dim`:
    /// stochastic-approximation moments and log ν adapted toward acceptance
    /// 0.234, both with step sizes `schedule`; ν starts at 2.38/√d,
    /// ε = 10⁻⁶, warm-up 2d.
    ///
    /// # Acceptance after adaptation stops
    ///
    /// While adapting, the acceptance rate is held at 0.234 (the
    /// Robbins–Monro update uses min(1, ratio) after the decision; tested).
    /// With adaptation stopped after a finite burn-in on a strongly curved
    /// target the frozen chain's acceptance is lower: on the 8-d banana
    /// B(0.1, 100) after 40 000 adapting steps it is 0.14–0.18. This is the
    /// algorithm, not a defect: with steps γ_t = t^−½ the moment estimates
    /// forget with weight (1 − γ_t) per step, an effective memory of ~√t
    /// steps (~200 at t = 4·10⁴), far shorter than the chain's
    /// autocorrelation time on the banana. Σ_t is then the *local*
    /// covariance of the region the chain just visited (at the end of
    /// burn-in its Var x₁ is ~10, against the target's 100), and ν_t is
    /// tuned jointly with that moving local fit. Frozen, (ν_T, Σ_T) fits only
    /// the region the chain was in at T, and the acceptance drops as the
    /// chain moves along the banana. On a Gaussian (local = global shape)
    /// the frozen acceptance stays near 0.234 (0.21–0.25 measured in d = 8).
    /// The KAMH paper's code updates the moments only every 20 steps, which
    /// stretches the memory twentyfold. For a global covariance with a
    /// learned scale keep [`MomentUpdate::Empirical`] and set an adaptive
    /// `scale` (frozen acceptance 0.21–0.31 on the same banana).
    pub fn learned_scale(dim: usize, schedule: StepSchedule) -> Result<Self> {
        let nu = RobbinsMonro::new(Scale::optimal_for(dim), 0.234, schedule)?;
        Self::default()
            .with_scale(Scale::Adaptive(nu))?
            .with_moments(MomentUpdate::StochasticApproximation { schedule })
    }

    /// Rao–Blackwellised AM (Andrieu & Thoms Alg. 3): moments updated with
    /// x* weighted by α and x_t by 1 − α, step sizes `schedule`; ν = 2.38/√d,
    /// ε = 10⁻⁶, warm-up 2d.
    pub fn rao_blackwellised(schedule: StepSchedule) -> Result<Self> {
        Self::default().with_moments(MomentUpdate::RaoBlackwellised { schedule })
    }

    /// Sets ν (a fixed ν must be positive and finite).
    pub fn with_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("scale")?;
        self.scale = Some(scale);
        Ok(self)
    }

    /// Sets how Σ_t is learned (its step schedule must be valid).
    pub fn with_moments(mut self, moments: MomentUpdate) -> Result<Self> {
        moments.validate()?;
        self.moments = moments;
        Ok(self)
    }

    /// Sets ε (finite, ≥ 0).
    pub fn with_epsilon(mut self, epsilon: f64) -> Result<Self> {
        check_epsilon(epsilon)?;
        self.epsilon = epsilon;
        Ok(self)
    }

    /// Sets the number of adaptive updates before Σ_t is used.
    pub fn with_warmup(mut self, warmup: u64) -> Self {
        self.warmup = Some(warmup);
        self
    }
}

fn check_epsilon(epsilon: f64) -> Result<()> {
    ensure(
        epsilon >= 0.0 && epsilon.is_finite(),
        "epsilon",
        "must be finite and non-negative",
    )
}

/// Adaptive Metropolis: x* ~ N(x, ν²(Σ_t + εI)) with Σ_t learned by a
/// [`MomentEstimator`] and ν fixed or Robbins–Monro adapted ([`Scale`]),
/// configured by [`AdaptiveMetropolisConfig`].
///
/// Until `warmup` adaptive updates have been made the proposal covariance is
/// the identity. After each adaptive update the covariance is refactored
/// (O(d³), allocation-free) with jitter if needed (counted).
///
/// ```
/// use kameleon_samplers::{
///     AdaptiveMetropolis, AdaptiveMetropolisConfig, RunConfig, StepSchedule, run_chain,
/// };
/// use kameleon_targets::Banana;
///
/// let target = Banana::new(2, 0.03, 100.0)?;
/// // AM-LS: ν and the moments learned with steps t^(−1/2)
/// let config = AdaptiveMetropolisConfig::learned_scale(2, StepSchedule::InverseSqrt)?;
/// let am = AdaptiveMetropolis::new(2, config)?;
/// let chain = run_chain(&target, am, &[0.0, 0.0], RunConfig::new(1000, 2000), 5)?;
/// assert_eq!(chain.len(), 2000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AdaptiveMetropolis {
    dim: usize,
    scale: Scale,
    moments: MomentEstimator,
    epsilon: f64,
    warmup: u64,
    updates: u64,
    covariance: ProposalCovariance,
    buffer: Vec<f64>,
    failed_factorisations: u64,
}

impl AdaptiveMetropolis {
    /// Adaptive Metropolis in dimension `dim` ≥ 1 with the settings
    /// `config` (checked).
    pub fn new(dim: usize, config: AdaptiveMetropolisConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        let scale = match config.scale {
            Some(scale) => scale,
            None => Scale::fixed(Scale::optimal_for(dim))?,
        };
        scale.validate("scale")?;
        let moments = MomentEstimator::new(dim, config.moments)?;
        check_epsilon(config.epsilon)?;
        Ok(Self {
            dim,
            scale,
            moments,
            epsilon: config.epsilon,
            warmup: config.warmup.unwrap_or(2 * dim as u64),
            updates: 0,
            covariance: ProposalCovariance::identity(dim),
            buffer: vec![0.0; dim * dim],
            failed_factorisations: 0,
        })
    }

    /// The current ν.
    pub fn scale(&self) -> f64 {
        self.scale.value()
    }

    /// The moment estimator.
    pub fn moments(&self) -> &MomentEstimator {
        &self.moments
    }

    /// Refactors ν-free covariance Σ_t + εI from the estimator.
    fn refactor(&mut self) {
        self.moments.covariance_into(&mut self.buffer);
        for i in 0..self.dim {
            self.buffer[i * self.dim + i] += self.epsilon;
        }
        if self.covariance.factor(&self.buffer).is_err() {
            self.failed_factorisations += 1;
        }
    }
}

impl Proposal for AdaptiveMetropolis {
    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_dim(self.dim, target.dim())?;
        if adapts {
            self.moments.start(x);
        }
        Ok(())
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        self.covariance
            .sample_into(current, self.scale.value(), rng, proposed);
        0.0
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, _rng: &mut dyn Rng) {
        if !adapt {
            return;
        }
        self.scale.update(outcome.accept_prob);
        self.moments.update(outcome);
        self.updates += 1;
        if self.updates >= self.warmup {
            self.refactor();
        }
    }

    fn summary(&self) -> AdaptationSummary {
        let mut cov = vec![0.0; self.dim * self.dim];
        self.moments.covariance_into(&mut cov);
        AdaptationSummary {
            scale: Some(self.scale.value()),
            mean: Some(self.moments.mean().to_vec()),
            covariance: Some(cov),
            extra: vec![(
                "failed_factorisations".to_string(),
                self.failed_factorisations as f64,
            )],
        }
    }

    fn covariance_jitters(&self) -> u64 {
        self.covariance.jitters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MetropolisHastings, chain_rng};
    use kameleon_targets::Banana;

    /// The mean acceptance probability over the second half of the adapting
    /// steps and over the frozen steps of a chain from 0 with adaptation
    /// stopped at `burn_in` and as many frozen steps.
    fn acceptance(
        target: &dyn Target,
        am: AdaptiveMetropolis,
        burn_in: u64,
        seed: u64,
    ) -> (f64, f64) {
        let x0 = vec![0.0; target.dim()];
        let mut mh =
            MetropolisHastings::new(target, am, &x0, chain_rng(seed, 0), Some(burn_in)).unwrap();
        let (mut adapting, mut frozen) = (0.0, 0.0);
        for t in 1..=2 * burn_in {
            let p = mh.step(target).accept_prob;
            if t > burn_in {
                frozen += p;
            } else if t > burn_in / 2 {
                adapting += p;
            }
        }
        (adapting / (burn_in / 2) as f64, frozen / burn_in as f64)
    }

    #[test]
    fn am_ls_holds_the_target_acceptance_while_adapting_on_the_banana() {
        // The Robbins–Monro recursion telescopes: over steps t ∈ (T/2, T],
        // Σ γ_t (α_t − 0.234) = log ν_T − log ν_{T/2}. With γ_t = t^−½ and
        // T = 40 000, Σ γ_t ≈ 2(√T − √(T/2)) ≈ 117 and γ_t varies by only
        // √2 over the window, so |mean α − 0.234| ≤ √2 |Δ log ν| / 117 —
        // below 0.012 as long as log ν moves by less than 1 in the window
        // (it has settled by then). A broken update (wrong sign, unclipped
        // ratio, update before the decision) misses 0.234 by far more.
        // What is *not* asserted, and why, is in the docs of
        // `AdaptiveMetropolisConfig::learned_scale`: the frozen chain's acceptance
        // on the banana is lower (measured 0.14–0.18 on these seeds).
        let target = Banana::new(8, 0.1, 100.0).unwrap();
        for seed in 0..3 {
            let config =
                AdaptiveMetropolisConfig::learned_scale(8, StepSchedule::InverseSqrt).unwrap();
            let am = AdaptiveMetropolis::new(8, config).unwrap();
            let (adapting, frozen) = acceptance(&target, am, 40_000, seed);
            eprintln!("seed {seed}: acceptance adapting {adapting:.3}, frozen {frozen:.3}");
            assert!((adapting - 0.234).abs() < 0.012, "seed {seed}: {adapting}");
        }
    }
}
