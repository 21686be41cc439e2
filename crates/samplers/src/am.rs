//! The adaptive Metropolis family (Haario et al. 2001; Andrieu & Thoms 2008):
//! AM with fixed scale (AM-FS), AM with a learned global scale (AM-LS / GAM,
//! Alg. 4) and Rao–Blackwellised AM (Alg. 3), all one proposal
//! N(x, ν²(Σ_t + εI)) differing only in how Σ_t and ν are learned.

use crate::adaptation::{RunningMoments, Scale, StepSchedule, StochasticMoments};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, check_dim, check_target_dim, ensure, ensure_room};
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
    /// The empirical covariance S of the whole history shrunk toward the
    /// starting covariance Σ₀ (the identity unless
    /// [`AdaptiveMetropolisConfig::initial_covariance`] is set), a prior
    /// worth k accepted moves: Σ_t = (m S + k Σ₀)/(m + k) for m accepted
    /// moves so far. A random walk needs about d accepted moves per
    /// effectively independent state, so k = d² (`prior_moves: None`)
    /// weighs Σ₀ like d independent draws. Meant for coordinates in which
    /// Σ₀ is already a good guess ([`crate::Whitened`]): there the raw S of
    /// a short, autocorrelated history is far worse than Σ₀.
    Shrunk {
        /// k ≥ 0; `None`: d².
        prior_moves: Option<f64>,
    },
}

impl MomentUpdate {
    /// Checks the step schedule or the prior's weight, if any.
    pub fn validate(&self) -> Result<()> {
        match self {
            Self::Empirical => Ok(()),
            Self::StochasticApproximation { schedule } | Self::RaoBlackwellised { schedule } => {
                schedule.validate()
            }
            Self::Shrunk { prior_moves } => ensure(
                prior_moves.is_none_or(|k| k >= 0.0 && k.is_finite()),
                "prior_moves",
                "must be finite and non-negative",
            ),
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
    /// The empirical covariance shrunk toward a prior ([`MomentUpdate::Shrunk`]).
    Shrunk {
        /// The history's empirical moments.
        moments: RunningMoments,
        /// The prior covariance Σ₀ (d × d row-major).
        prior: Vec<f64>,
        /// The prior's weight k, in accepted moves.
        prior_moves: f64,
        /// Accepted moves fed so far.
        moves: u64,
    },
}

impl MomentEstimator {
    /// The estimator `update` in dimension `dim`, before any update.
    pub fn new(dim: usize, update: MomentUpdate) -> Result<Self> {
        match update {
            MomentUpdate::Empirical => Ok(Self::empirical(dim)),
            MomentUpdate::StochasticApproximation { schedule } => Self::stochastic(dim, schedule),
            MomentUpdate::RaoBlackwellised { schedule } => Self::rao_blackwellised(dim, schedule),
            MomentUpdate::Shrunk { prior_moves } => {
                update.validate()?;
                Ok(Self::Shrunk {
                    moments: RunningMoments::new(dim),
                    prior: identity(dim),
                    prior_moves: prior_moves.unwrap_or((dim * dim) as f64),
                    moves: 0,
                })
            }
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
            Self::Empirical(m) | Self::Shrunk { moments: m, .. } => m.dim(),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => moments.dim(),
        }
    }

    /// Seeds the estimate with the chain's start point.
    pub fn start(&mut self, x0: &[f64]) {
        match self {
            Self::Empirical(m) | Self::Shrunk { moments: m, .. } => m.push(x0),
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => {
                moments.set_mean(x0);
            }
        }
    }

    /// Feeds one step's outcome (after the accept decision): the next
    /// update in the estimator's own count.
    pub fn update(&mut self, outcome: &StepOutcome<'_>) {
        let next = match self {
            Self::Empirical(_) | Self::Shrunk { .. } => 0,
            Self::StochasticApproximation { updates, .. }
            | Self::RaoBlackwellised { updates, .. } => *updates + 1,
        };
        self.update_at(outcome, next);
    }

    /// Feeds one step's outcome as the `index`-th update (≥ 1): the
    /// stochastic-approximation estimators take the step γ_{index+1}, so an
    /// estimator fed only every k-th step can keep the step sizes of the
    /// steps it skipped (the empirical estimators ignore `index`).
    pub fn update_at(&mut self, outcome: &StepOutcome<'_>, index: u64) {
        match self {
            Self::Empirical(m) => m.push(outcome.current),
            Self::Shrunk { moments, moves, .. } => {
                moments.push(outcome.current);
                *moves += u64::from(outcome.accepted);
            }
            Self::StochasticApproximation {
                moments,
                schedule,
                updates,
            } => {
                *updates = index;
                moments.update(schedule.step(*updates + 1), &[(outcome.current, 1.0)]);
            }
            Self::RaoBlackwellised {
                moments,
                schedule,
                updates,
            } => {
                *updates = index;
                let a = outcome.accept_prob;
                moments.update(
                    schedule.step(*updates + 1),
                    &[(outcome.proposed, a), (outcome.previous, 1.0 - a)],
                );
            }
        }
    }

    /// Replaces the starting covariance of a stochastic-approximation
    /// estimator or the prior of a shrunk one (d × d row-major, symmetric,
    /// finite); an error for the plain empirical estimator, which has no
    /// starting value.
    pub fn with_initial_covariance(mut self, covariance: &[f64]) -> Result<Self> {
        let d = self.dim();
        check_dim(
            "the covariance's length",
            covariance.len(),
            "the dimension squared",
            d * d,
        )?;
        ensure(
            covariance.iter().all(|v| v.is_finite())
                && (0..d).all(|i| (0..i).all(|j| covariance[i * d + j] == covariance[j * d + i])),
            "initial_covariance",
            "must be finite and symmetric",
        )?;
        match &mut self {
            Self::Empirical(_) => ensure(
                false,
                "initial_covariance",
                "needs stochastic-approximation or shrunk moments (the empirical estimator has no start)",
            )?,
            Self::StochasticApproximation { moments, .. }
            | Self::RaoBlackwellised { moments, .. } => {
                *moments = StochasticMoments::new(moments.mean().to_vec(), covariance.to_vec())?;
            }
            Self::Shrunk { prior, .. } => prior.copy_from_slice(covariance),
        }
        Ok(self)
    }

    /// The current mean estimate.
    pub fn mean(&self) -> &[f64] {
        match self {
            Self::Empirical(m) | Self::Shrunk { moments: m, .. } => m.mean(),
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
            Self::Shrunk {
                moments,
                prior,
                prior_moves,
                moves,
            } => {
                moments.covariance_into(out);
                let m = *moves as f64;
                let weight = if m + *prior_moves > 0.0 {
                    m / (m + *prior_moves)
                } else {
                    1.0
                };
                for (v, p) in out.iter_mut().zip(prior) {
                    *v = weight * *v + (1.0 - weight) * p;
                }
            }
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
    /// The number of moment updates before Σ_t replaces the starting
    /// covariance; `None` is 2d.
    pub warmup: Option<u64>,
    /// Σ_t is updated at every `moment_lag`-th adaptive step only (≥ 1;
    /// default 1), with the step size of that step, while ν adapts at every
    /// step. The KAMH code's AM uses 20.
    pub moment_lag: u64,
    /// The first `delay` adaptive steps change nothing; step sizes count
    /// from the step after them (default 0; the KAMH code's AM: 500).
    pub delay: u64,
    /// The starting covariance Σ₀ (d × d row-major; needs
    /// stochastic-approximation or shrunk moments), used by the proposal
    /// from the first step; `None`: the identity, used until the warm-up
    /// ends.
    pub initial_covariance: Option<Vec<f64>>,
}

impl Default for AdaptiveMetropolisConfig {
    /// AM-FS: empirical covariance, ν = 2.38/√d, ε = 10⁻⁶, warm-up 2d.
    fn default() -> Self {
        Self {
            scale: None,
            moments: MomentUpdate::Empirical,
            epsilon: 1e-6,
            warmup: None,
            moment_lag: 1,
            delay: 0,
            initial_covariance: None,
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

    /// Updates Σ_t at every `lag`-th adaptive step only (`lag` ≥ 1).
    pub fn with_moment_lag(mut self, lag: u64) -> Result<Self> {
        ensure(lag >= 1, "moment_lag", "must be at least 1")?;
        self.moment_lag = lag;
        Ok(self)
    }

    /// Lets the first `delay` adaptive steps change nothing.
    pub fn with_delay(mut self, delay: u64) -> Self {
        self.delay = delay;
        self
    }

    /// Starts Σ_t at `covariance` (d × d row-major, symmetric positive
    /// definite, checked by [`AdaptiveMetropolis::new`]).
    pub fn with_initial_covariance(mut self, covariance: Vec<f64>) -> Self {
        self.initial_covariance = Some(covariance);
        self
    }

    /// The KAMH paper's code's AM (kameleon-mcmc `AdaptiveMetropolis`):
    /// stochastic-approximation moments from Σ₀ = `initial_covariance`,
    /// updated every 20th step, nothing adapting during the first 500
    /// steps, step sizes 1/√(t − 500 + 1), Σ₀ used from the first step; ν
    /// fixed at 2.38/√d (AM-FS) or, with `learned_scale`, adapted at every
    /// step toward 0.234 from there (AM-LS). Run it without an adaptation
    /// stop, as the code does. The code adapts log ν² with the unclipped
    /// ratio; here log ν adapts with min(1, ratio).
    pub fn kamh_code(
        dim: usize,
        learned_scale: bool,
        initial_covariance: Vec<f64>,
    ) -> Result<Self> {
        let schedule = StepSchedule::InverseSqrt;
        let config = if learned_scale {
            Self::learned_scale(dim, schedule)?
        } else {
            Self::default().with_moments(MomentUpdate::StochasticApproximation { schedule })?
        };
        Ok(config
            .with_warmup(0)
            .with_moment_lag(20)?
            .with_delay(500)
            .with_initial_covariance(initial_covariance))
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
/// Until `warmup` moment updates have been made the proposal covariance is
/// the starting one (the identity unless
/// [`AdaptiveMetropolisConfig::initial_covariance`] is set). ν adapts at
/// every adaptive step after the first `delay`, Σ_t at every
/// `moment_lag`-th; after each moment update the covariance is refactored
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
    moment_lag: u64,
    delay: u64,
    /// Adaptive steps seen (delayed ones included).
    steps: u64,
    /// Moment updates made.
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
        ensure_room("adaptive Metropolis's d × d matrices", &[&[6, dim, dim]])?;
        let scale = match config.scale {
            Some(scale) => scale,
            None => Scale::fixed(Scale::optimal_for(dim))?,
        };
        scale.validate("scale")?;
        let mut moments = MomentEstimator::new(dim, config.moments)?;
        check_epsilon(config.epsilon)?;
        ensure(config.moment_lag >= 1, "moment_lag", "must be at least 1")?;
        let mut covariance = ProposalCovariance::identity(dim);
        let mut buffer = vec![0.0; dim * dim];
        if let Some(start) = &config.initial_covariance {
            moments = moments.with_initial_covariance(start)?;
            moments.covariance_into(&mut buffer);
            for i in 0..dim {
                buffer[i * dim + i] += config.epsilon;
            }
            ensure(
                covariance.factor(&buffer).is_ok() && covariance.jitters() == 0,
                "initial_covariance",
                "must be positive definite",
            )?;
        }
        Ok(Self {
            dim,
            scale,
            moments,
            epsilon: config.epsilon,
            warmup: config.warmup.unwrap_or(2 * dim as u64),
            moment_lag: config.moment_lag,
            delay: config.delay,
            steps: 0,
            updates: 0,
            covariance,
            buffer,
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
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
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
        self.steps += 1;
        if self.steps <= self.delay {
            return;
        }
        self.scale.update(outcome.accept_prob);
        let index = self.steps - self.delay;
        if index.is_multiple_of(self.moment_lag) {
            self.moments.update_at(outcome, index);
            self.updates += 1;
            if self.updates >= self.warmup {
                self.refactor();
            }
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

    /// A step outcome at `x` (accepted from `x` to itself, acceptance `prob`).
    fn outcome(iteration: u64, x: &[f64], prob: f64) -> StepOutcome<'_> {
        StepOutcome {
            iteration,
            previous: x,
            proposed: x,
            current: x,
            log_density: 0.0,
            accepted: true,
            accept_prob: prob,
        }
    }

    #[test]
    fn lagged_delayed_moments_follow_the_recursion_of_the_kamh_code() {
        // The KAMH code's AM: after a delay of D steps, at adaptive step
        // k = t − D the learning rate is (k + 1)^−½; ν adapts at every k (its
        // own count, step k^−½), the moments at every k divisible by the lag
        // L, from (x₀, Σ₀): Σ ← Σ + r((x − μ)(x − μ)ᵀ − Σ), then
        // μ ← μ + r(x − μ). The recursion is recomputed here from scratch.
        let (d, delay, lag) = (3, 7_u64, 4_u64);
        let sigma0 = vec![5.0, 0.5, 0.0, 0.5, 2.0, 0.0, 0.0, 0.0, 1.0];
        let config = AdaptiveMetropolisConfig::learned_scale(d, StepSchedule::InverseSqrt)
            .unwrap()
            .with_warmup(0)
            .with_moment_lag(lag)
            .unwrap()
            .with_delay(delay)
            .with_initial_covariance(sigma0.clone());
        let mut am = AdaptiveMetropolis::new(d, config).unwrap();
        let x0 = [0.5, -1.0, 2.0];
        am.moments.start(&x0);
        let (mut mean, mut cov) = (x0.to_vec(), sigma0.clone());
        let mut log_nu = Scale::optimal_for(d).ln();
        let mut rng = chain_rng(3, 0);
        let probs = [0.9, 0.1, 0.5, 0.0, 1.0, 0.3];
        for t in 1..=60_u64 {
            let x: Vec<f64> = (0..d)
                .map(|i| (t as f64 * 0.37 + i as f64).sin() * 3.0)
                .collect();
            let prob = probs[t as usize % probs.len()];
            am.observe(&outcome(t, &x, prob), true, &mut rng);
            if t > delay {
                let k = t - delay;
                log_nu += (k as f64).sqrt().recip() * (prob - 0.234);
                if k % lag == 0 {
                    let r = ((k + 1) as f64).sqrt().recip();
                    for i in 0..d {
                        for j in 0..d {
                            cov[i * d + j] +=
                                r * ((x[i] - mean[i]) * (x[j] - mean[j]) - cov[i * d + j]);
                        }
                    }
                    for i in 0..d {
                        mean[i] += r * (x[i] - mean[i]);
                    }
                }
            }
            let mut got = vec![0.0; d * d];
            am.moments().covariance_into(&mut got);
            let pairs = got
                .iter()
                .zip(&cov)
                .chain(am.moments().mean().iter().zip(&mean));
            for (a, b) in pairs {
                assert!((a - b).abs() < 1e-12, "t = {t}: {a} vs {b}");
            }
            assert!((am.scale().ln() - log_nu).abs() < 1e-12, "t = {t}");
        }
        assert_eq!(am.updates, (60 - delay) / lag);
    }

    #[test]
    fn the_starting_covariance_shapes_the_proposals_before_any_update() {
        // Before any moment update the proposal is N(x, ν²(Σ₀ + εI)). From
        // 40 000 draws the sample variance of a coordinate has relative sd
        // √(2/40 000) = 0.7%; 5% is seven sds.
        let d = 4;
        let mut sigma0 = vec![0.0; d * d];
        for (i, v) in [100.0, 1.0, 1.0, 4.0].iter().enumerate() {
            sigma0[i * d + i] = *v;
        }
        let config = AdaptiveMetropolisConfig::kamh_code(d, false, sigma0.clone()).unwrap();
        let mut am = AdaptiveMetropolis::new(d, config).unwrap();
        let nu2 = Scale::optimal_for(d).powi(2);
        let target = Banana::new(d, 0.0, 1.0).unwrap();
        let mut rng = chain_rng(11, 0);
        let (n, x) = (40_000, vec![1.0; d]);
        let mut y = vec![0.0; d];
        let mut sum_sq = vec![0.0; d];
        for _ in 0..n {
            am.propose(&target, &x, &mut y, &mut rng);
            for i in 0..d {
                sum_sq[i] += (y[i] - x[i]).powi(2);
            }
        }
        for i in 0..d {
            let expected = nu2 * (sigma0[i * d + i] + 1e-6);
            let got = sum_sq[i] / n as f64;
            assert!(
                (got / expected - 1.0).abs() < 0.05,
                "coordinate {i}: {got} vs {expected}"
            );
        }
        // the code's delay: its first 500 steps change nothing, not even ν
        let config = AdaptiveMetropolisConfig::kamh_code(d, true, sigma0).unwrap();
        let mut am = AdaptiveMetropolis::new(d, config).unwrap();
        let nu = am.scale();
        for t in 1..=500 {
            am.observe(&outcome(t, &x, 1.0), true, &mut rng);
        }
        assert_eq!((am.scale(), am.updates), (nu, 0));
        am.observe(&outcome(501, &x, 1.0), true, &mut rng);
        assert!(am.scale() > nu);
    }

    #[test]
    fn shrunk_moments_weigh_the_prior_against_the_accepted_moves() {
        // Σ_t = (m S + k Σ₀)/(m + k) with S the sample covariance (divisor
        // n − 1) of the start and every fed state, m the accepted moves;
        // S recomputed here by two passes, k = d² by default.
        let d = 3;
        let sigma0 = vec![2.0, 0.3, 0.0, 0.3, 1.0, -0.2, 0.0, -0.2, 0.5];
        for (prior_moves, k) in [(None, 9.0), (Some(4.5), 4.5), (Some(0.0), 0.0)] {
            let config = AdaptiveMetropolisConfig::default()
                .with_moments(MomentUpdate::Shrunk { prior_moves })
                .unwrap()
                .with_initial_covariance(sigma0.clone());
            let mut am = AdaptiveMetropolis::new(d, config).unwrap();
            let x0 = [0.5, -1.0, 2.0];
            am.moments.start(&x0);
            let mut points = vec![x0.to_vec()];
            let mut moves = 0;
            let mut rng = chain_rng(5, 0);
            for t in 1..=40_u64 {
                let x: Vec<f64> = (0..d)
                    .map(|i| (t as f64 * 0.71 + i as f64 * 1.3).sin() * (i + 1) as f64)
                    .collect();
                let mut step = outcome(t, &x, 0.5);
                step.accepted = t % 3 != 0;
                moves += u64::from(step.accepted);
                am.observe(&step, true, &mut rng);
                points.push(x);
                let n = points.len() as f64;
                let mean: Vec<f64> = (0..d)
                    .map(|i| points.iter().map(|p| p[i]).sum::<f64>() / n)
                    .collect();
                let m = moves as f64;
                let mut got = vec![0.0; d * d];
                am.moments().covariance_into(&mut got);
                for i in 0..d {
                    for j in 0..d {
                        let s = points
                            .iter()
                            .map(|p| (p[i] - mean[i]) * (p[j] - mean[j]))
                            .sum::<f64>()
                            / (n - 1.0);
                        let want = (m * s + k * sigma0[i * d + j]) / (m + k);
                        let got = got[i * d + j];
                        assert!((got - want).abs() < 1e-12, "k {k}, t {t}: {got} vs {want}");
                    }
                }
            }
        }
        // without a starting covariance the prior is the identity
        let config = AdaptiveMetropolisConfig::default()
            .with_moments(MomentUpdate::Shrunk { prior_moves: None })
            .unwrap();
        let am = AdaptiveMetropolis::new(d, config).unwrap();
        let mut got = vec![0.0; d * d];
        am.moments().covariance_into(&mut got);
        assert_eq!(got, identity(d));
    }

    #[test]
    fn bad_moment_settings_are_clear_errors() {
        let d = 2;
        let sa = || {
            AdaptiveMetropolisConfig::default()
                .with_moments(MomentUpdate::StochasticApproximation {
                    schedule: StepSchedule::InverseSqrt,
                })
                .unwrap()
        };
        assert!(
            AdaptiveMetropolisConfig::default()
                .with_moment_lag(0)
                .is_err()
        );
        for k in [-1.0, f64::NAN, f64::INFINITY] {
            let shrunk = MomentUpdate::Shrunk {
                prior_moves: Some(k),
            };
            assert!(
                AdaptiveMetropolisConfig::default()
                    .with_moments(shrunk)
                    .is_err(),
                "prior_moves {k}"
            );
            assert!(MomentEstimator::new(d, shrunk).is_err(), "prior_moves {k}");
        }
        let bad = [
            (sa().with_initial_covariance(vec![1.0; 3]), "length"),
            (
                sa().with_initial_covariance(vec![1.0, 0.5, 0.0, 1.0]),
                "asymmetric",
            ),
            (
                sa().with_initial_covariance(vec![1.0, 2.0, 2.0, 1.0]),
                "indefinite",
            ),
            (
                sa().with_initial_covariance(vec![f64::NAN, 0.0, 0.0, 1.0]),
                "NaN",
            ),
            (
                AdaptiveMetropolisConfig::default()
                    .with_initial_covariance(vec![1.0, 0.0, 0.0, 1.0]),
                "empirical moments",
            ),
        ];
        for (config, why) in bad {
            assert!(AdaptiveMetropolis::new(d, config).is_err(), "{why}");
        }
        let config = AdaptiveMetropolisConfig {
            moment_lag: 0,
            ..Default::default()
        };
        assert!(
            AdaptiveMetropolis::new(d, config).is_err(),
            "lag 0 set directly"
        );
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
