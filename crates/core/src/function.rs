//! A target from a closure.

use crate::{Target, TargetError};
use rand::Rng;

/// Turns a closure `x ↦ log π(x)` into an exact [`Target`] of dimension
/// `dim`; [`FnTarget::with_gradient`] adds a closure for `∇ log π(x)`, for
/// the samplers that follow the gradient (HMC).
///
/// ```
/// use kameleon_core::{FnTarget, Target};
/// let normal = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]))
///     .with_gradient(|x: &[f64], out: &mut [f64]| {
///         out[0] = -x[0];
///         out[1] = -x[1];
///     });
/// let mut gradient = [0.0; 2];
/// normal.grad_log_density(&[1.0, -2.0], &mut gradient).unwrap();
/// assert_eq!(gradient, [-1.0, 2.0]);
/// ```
pub struct FnTarget<F, G = fn(&[f64], &mut [f64])> {
    dim: usize,
    log_density: F,
    gradient: Option<G>,
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync> FnTarget<F> {
    /// Wraps `log_density`, a function of points of length `dim`, without a
    /// gradient ([`Target::grad_log_density`] is
    /// [`TargetError::Unsupported`]).
    pub fn new(dim: usize, log_density: F) -> Self {
        Self {
            dim,
            log_density,
            gradient: None,
        }
    }
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync, G> FnTarget<F, G> {
    /// The same target with `gradient(x, out)`, which writes `∇ log π(x)`
    /// into `out` (both of length `dim`), as its
    /// [`Target::grad_log_density`].
    pub fn with_gradient<H: Fn(&[f64], &mut [f64]) + Send + Sync>(
        self,
        gradient: H,
    ) -> FnTarget<F, H> {
        FnTarget {
            dim: self.dim,
            log_density: self.log_density,
            gradient: Some(gradient),
        }
    }
}

impl<F, G> Target for FnTarget<F, G>
where
    F: Fn(&[f64]) -> f64 + Send + Sync,
    G: Fn(&[f64], &mut [f64]) + Send + Sync,
{
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        (self.log_density)(x)
    }

    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        match &self.gradient {
            Some(gradient) => {
                gradient(x, out);
                Ok(())
            }
            None => Err(TargetError::Unsupported("gradient")),
        }
    }
}
