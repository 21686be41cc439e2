//! Standard Metropolis (SM): the isotropic Gaussian random walk N(x, ν²I).

use crate::Target;
use crate::adaptation::Scale;
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, ensure};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// The isotropic random walk x* = x + ν ξ, ξ ~ N(0, I) (symmetric: no
/// Hastings correction). ν fixed (default 2.38/√d) or Robbins–Monro adapted.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RandomWalk {
    dim: usize,
    scale: Scale,
}

impl RandomWalk {
    /// Standard Metropolis in dimension `dim` ≥ 1 with ν = 2.38/√d.
    pub fn new(dim: usize) -> Result<Self> {
        Self::with_scale(dim, Scale::fixed(Scale::optimal_for(dim))?)
    }

    /// A random walk with the given (fixed or adaptive) scale.
    pub fn with_scale(dim: usize, scale: Scale) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        Ok(Self { dim, scale })
    }

    /// The current ν.
    pub fn scale(&self) -> f64 {
        self.scale.value()
    }
}

impl Proposal for RandomWalk {
    fn initialise(&mut self, target: &dyn Target, _x: &[f64], _adapts: bool) -> Result<()> {
        crate::error::check_dim(self.dim, target.dim())
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
