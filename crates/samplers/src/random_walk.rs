//! Standard Metropolis (SM): the isotropic Gaussian random walk N(x, ν²I).

use crate::Target;
use crate::adaptation::Scale;
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, ensure};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// The settings of [`RandomWalk`]: its scale ν.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RandomWalkConfig {
    /// ν, fixed or Robbins–Monro adapted; `None` (the default) is the fixed
    /// ν = 2.38/√d of the sampler's dimension d.
    pub scale: Option<Scale>,
}

impl RandomWalkConfig {
    /// Sets the scale ν (a fixed ν must be positive and finite).
    pub fn with_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("scale")?;
        self.scale = Some(scale);
        Ok(self)
    }

    /// The scale in dimension `dim`: the given one, or the fixed 2.38/√d.
    pub(crate) fn scale_for(&self, dim: usize) -> Result<Scale> {
        match &self.scale {
            Some(scale) => {
                scale.validate("scale")?;
                Ok(scale.clone())
            }
            None => Scale::fixed(Scale::optimal_for(dim)),
        }
    }
}

/// The isotropic random walk x* = x + ν ξ, ξ ~ N(0, I) (symmetric: no
/// Hastings correction). ν fixed (default 2.38/√d) or Robbins–Monro adapted.
///
/// ```
/// use kameleon_samplers::{
///     FnTarget, RandomWalk, RandomWalkConfig, RobbinsMonro, RunConfig, Scale, StepSchedule,
///     run_chain,
/// };
/// let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
/// // ν learned toward acceptance 0.234 during burn-in
/// let nu = RobbinsMonro::new(1.0, 0.234, StepSchedule::InverseSqrt)?;
/// let config = RandomWalkConfig::default().with_scale(Scale::Adaptive(nu))?;
/// let chain = run_chain(&target, RandomWalk::new(2, config)?, &[0.0, 0.0], RunConfig::new(500, 1000), 1)?;
/// assert_eq!(chain.len(), 1000);
/// # Ok::<(), kameleon_samplers::SamplerError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RandomWalk {
    dim: usize,
    scale: Scale,
}

impl RandomWalk {
    /// Standard Metropolis in dimension `dim` ≥ 1 with the settings `config`
    /// (checked).
    pub fn new(dim: usize, config: RandomWalkConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        let scale = config.scale_for(dim)?;
        Ok(Self { dim, scale })
    }

    /// The current ν.
    pub fn scale(&self) -> f64 {
        self.scale.value()
    }
}

impl Proposal for RandomWalk {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn initialise(&mut self, target: &dyn Target, _x: &[f64], _adapts: bool) -> Result<()> {
        crate::error::check_target_dim(target, self.dim)
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let nu = self.scale.value();
        for (p, c) in proposed.iter_mut().zip(current) {
            *p = c + nu * rng.sample::<f64, _>(StandardNormal);
        }
        0.0
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, _rng: &mut dyn Rng) {
        if adapt {
            self.scale.update(outcome.accept_prob);
        }
    }

    fn summary(&self) -> AdaptationSummary {
        AdaptationSummary {
            scale: Some(self.scale.value()),
            ..AdaptationSummary::default()
        }
    }
}
