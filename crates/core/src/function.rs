//! A target from a closure.

use crate::Target;
use rand::Rng;

/// Turns a closure `x ↦ log π(x)` into an exact [`Target`] of dimension `dim`.
pub struct FnTarget<F> {
    dim: usize,
    log_density: F,
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync> FnTarget<F> {
    /// Wraps `log_density`, a function of points of length `dim`.
    pub fn new(dim: usize, log_density: F) -> Self {
        Self { dim, log_density }
    }
}

impl<F: Fn(&[f64]) -> f64 + Send + Sync> Target for FnTarget<F> {
    fn dim(&self) -> usize {
        self.dim
    }

    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        (self.log_density)(x)
    }
}
