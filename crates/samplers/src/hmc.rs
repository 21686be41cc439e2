//! Hamiltonian Monte Carlo with a leapfrog integrator and N(0, I) momentum,
//! the step size and the number of steps drawn afresh each iteration (the KMC
//! paper's baseline). The leapfrog move is a separate piece,
//! [`HamiltonianMove`], so surrogate-gradient samplers (KMC) reuse it with
//! their own gradient.

use crate::engine::{Proposal, StepOutcome};
use crate::error::{Result, check_target_dim, ensure, ensure_room};
use crate::{Target, TargetError};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};

/// A leapfrog trajectory with unit mass matrix, with the gradient at the
/// current state cached between iterations.
///
/// [`HamiltonianMove::propose`] returns the kinetic-energy correction
/// K(p) − K(p*) = ½‖p‖² − ½‖p*‖², which the engine adds to
/// log π(x*) − log π(x) to get the log acceptance ratio of the true
/// Hamiltonian. Call [`HamiltonianMove::observe`] with the accept decision
/// (it swaps the cached gradients) and [`HamiltonianMove::invalidate`] when
/// the gradient function changes (e.g. a surrogate is refitted).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct HamiltonianMove {
    step_size: (f64, f64),
    steps: (u32, u32),
    momentum: Vec<f64>,
    grad_current: Vec<f64>,
    grad_proposed: Vec<f64>,
    cached: bool,
}

impl HamiltonianMove {
    /// Step size ε ~ U[lo, hi) (0 < lo ≤ hi) and number of steps
    /// L ~ U{lo, …, hi} (1 ≤ lo ≤ hi), drawn each iteration.
    pub fn new(dim: usize, step_size: (f64, f64), steps: (u32, u32)) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        check_step_size(step_size)?;
        check_steps(steps)?;
        Ok(Self {
            step_size,
            steps,
            momentum: vec![0.0; dim],
            grad_current: vec![0.0; dim],
            grad_proposed: vec![0.0; dim],
            cached: false,
        })
    }

    /// Forgets the cached gradient at the current state.
    pub fn invalidate(&mut self) {
        self.cached = false;
    }

    /// Simulates one trajectory from `current` into `proposed` using
    /// `grad(x, out) -> ok` (the gradient of the log density the dynamics
    /// follow), with the drawn step size multiplied by `step_factor` (> 0),
    /// and returns K(p) − K(p*) (NaN if a gradient failed or the trajectory
    /// diverged, which rejects the step).
    pub fn propose(
        &mut self,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
        step_factor: f64,
        grad: &mut dyn FnMut(&[f64], &mut [f64]) -> bool,
    ) -> f64 {
        let (lo, hi) = self.step_size;
        let eps = step_factor
            * if lo < hi {
                rng.random_range(lo..hi)
            } else {
                lo
            };
        let steps = rng.random_range(self.steps.0..=self.steps.1);
        for p in self.momentum.iter_mut() {
            *p = rng.sample(StandardNormal);
        }
        let kinetic_start = 0.5 * self.momentum.iter().map(|p| p * p).sum::<f64>();
        if !self.cached {
            if !grad(current, &mut self.grad_current) {
                return f64::NAN;
            }
            self.cached = true;
        }
        proposed.copy_from_slice(current);
        self.grad_proposed.copy_from_slice(&self.grad_current);
        for _ in 0..steps {
            for (p, g) in self.momentum.iter_mut().zip(&self.grad_proposed) {
                *p += 0.5 * eps * g;
            }
            for (x, p) in proposed.iter_mut().zip(&self.momentum) {
                *x += eps * p;
            }
            if !grad(proposed, &mut self.grad_proposed) {
                return f64::NAN;
            }
            for (p, g) in self.momentum.iter_mut().zip(&self.grad_proposed) {
                *p += 0.5 * eps * g;
            }
        }
        let kinetic_end = 0.5 * self.momentum.iter().map(|p| p * p).sum::<f64>();
        kinetic_start - kinetic_end
    }

    /// Swaps the cached gradient to the proposal's if it was accepted.
    pub fn observe(&mut self, accepted: bool) {
        if accepted {
            std::mem::swap(&mut self.grad_current, &mut self.grad_proposed);
        }
    }
}

/// The settings of [`Hmc`]: the ranges the step size and the number of
/// leapfrog steps are drawn from at each iteration.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct HmcConfig {
    /// Step size ε ~ U[lo, hi) (0 < lo ≤ hi < ∞; lo = hi fixes ε).
    pub step_size: (f64, f64),
    /// Number of leapfrog steps L ~ U{lo, …, hi} (1 ≤ lo ≤ hi).
    pub steps: (u32, u32),
}

impl Default for HmcConfig {
    /// ε ~ U[0.1, 0.2), L ~ U{10, …, 20}.
    fn default() -> Self {
        Self {
            step_size: (0.1, 0.2),
            steps: (10, 20),
        }
    }
}

impl HmcConfig {
    /// Sets the step-size range (lo, hi), 0 < lo ≤ hi < ∞.
    pub fn with_step_size(mut self, step_size: (f64, f64)) -> Result<Self> {
        check_step_size(step_size)?;
        self.step_size = step_size;
        Ok(self)
    }

    /// Sets the range (lo, hi) of the number of leapfrog steps, 1 ≤ lo ≤ hi.
    pub fn with_steps(mut self, steps: (u32, u32)) -> Result<Self> {
        check_steps(steps)?;
        self.steps = steps;
        Ok(self)
    }

    /// Checks both ranges.
    pub fn validate(&self) -> Result<()> {
        check_step_size(self.step_size)?;
        check_steps(self.steps)
    }
}

/// Checks a step-size range ε ~ U[lo, hi).
pub(crate) fn check_step_size(step_size: (f64, f64)) -> Result<()> {
    ensure(
        step_size.0 > 0.0 && step_size.0 <= step_size.1 && step_size.1.is_finite(),
        "step_size",
        "needs 0 < lo ≤ hi < ∞",
    )
}

/// Checks a leapfrog-steps range L ~ U{lo, …, hi}.
pub(crate) fn check_steps(steps: (u32, u32)) -> Result<()> {
    ensure(
        steps.0 >= 1 && steps.0 <= steps.1,
        "steps",
        "needs 1 ≤ lo ≤ hi",
    )
}

/// HMC on the target's own gradient ([`Target::grad_log_density`]).
///
/// ```
/// use kameleon_samplers::{Hmc, HmcConfig, RunConfig, run_chain};
/// use kameleon_targets::Banana;
///
/// let target = Banana::new(2, 0.03, 100.0)?;
/// let config = HmcConfig::default().with_step_size((0.2, 0.4))?.with_steps((5, 10))?;
/// let chain = run_chain(&target, Hmc::new(2, config)?, &[0.0, 0.0], RunConfig::new(100, 500), 3)?;
/// assert_eq!(chain.len(), 500);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Hmc {
    dim: usize,
    dynamics: HamiltonianMove,
}

impl Hmc {
    /// HMC in dimension `dim` ≥ 1 with the settings `config` (checked).
    pub fn new(dim: usize, config: HmcConfig) -> Result<Self> {
        config.validate()?;
        ensure_room("HMC's states and momenta", &[&[6, dim]])?;
        Ok(Self {
            dim,
            dynamics: HamiltonianMove::new(dim, config.step_size, config.steps)?,
        })
    }
}

/// Evaluates the gradient of `target` at `x`, as a proposal that uses it
/// ([`Proposal::uses_target_gradient`]) does before its chain starts: an
/// error naming the method to implement if the target gives none.
pub(crate) fn require_gradient(target: &dyn Target, x: &[f64]) -> Result<()> {
    let mut g = vec![0.0; x.len()];
    target.grad_log_density(x, &mut g).map_err(|e| match e {
        TargetError::Unsupported(_) => TargetError::Unsupported(
            "the gradient of the log density, which HMC needs: implement \
             Target::grad_log_density for the target's type (an FnTarget has none)",
        ),
        other => other,
    })?;
    Ok(())
}

impl Proposal for Hmc {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn uses_target_gradient(&self) -> bool {
        true
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], _adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
        require_gradient(target, x)?;
        self.dynamics.invalidate();
        Ok(())
    }

    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let mut grad = |x: &[f64], out: &mut [f64]| {
            target.grad_log_density(x, out).is_ok() && out.iter().all(|g| g.is_finite())
        };
        self.dynamics
            .propose(current, proposed, rng, 1.0, &mut grad)
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, _adapt: bool, _rng: &mut dyn Rng) {
        self.dynamics.observe(outcome.accepted);
    }
}
