//! The Gaussian (squared-exponential) kernel.

use crate::error::positive;
use crate::{Kernel, KernelError, SpectralDensity};
use faer::{MatMut, MatRef};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// `k(x, y) = exp(−‖x − y‖² / (2ℓ²))` with length-scale `ℓ`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Gaussian {
    length_scale: f64,
}

impl Gaussian {
    /// A Gaussian kernel with length-scale `ℓ > 0`.
    pub fn new(length_scale: f64) -> Result<Self, KernelError> {
        Ok(Self {
            length_scale: positive("length_scale", length_scale)?,
        })
    }

    /// The KAMH paper's `exp(−‖x − y‖² / (2σ²))`: `ℓ = σ`.
    pub fn from_kamh_sigma(sigma: f64) -> Result<Self, KernelError> {
        Self::new(sigma)
    }

    /// The KMC lite estimator's `exp(−‖x − y‖² / σ)`: `ℓ = √(σ/2)`.
    pub fn from_lite_sigma(sigma: f64) -> Result<Self, KernelError> {
        Self::new((positive("sigma", sigma)? / 2.0).sqrt())
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// `−1/(2ℓ²)`, the factor of the squared distance in the exponent.
    fn exponent_factor(&self) -> f64 {
        -0.5 / (self.length_scale * self.length_scale)
    }
}

fn squared_distance(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()
}

impl Kernel for Gaussian {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), y.len());
        (self.exponent_factor() * squared_distance(x, y)).exp()
    }

    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let k = self.eval(x, y);
        let c = 2.0 * self.exponent_factor() * k;
        for ((o, a), b) in out.iter_mut().zip(x).zip(y) {
            *o = c * (a - b);
        }
        k
    }

    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let k = self.eval(x, y);
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        for ((o, a), b) in out.iter_mut().zip(x).zip(y) {
            let r = (a - b) * inv_l2;
            *o = k * (r * r - inv_l2);
        }
        k
    }

    fn gradient_matrix(&self, x: &[f64], z: MatRef<'_, f64>, mut out: MatMut<'_, f64>) {
        let (n, d) = (z.nrows(), z.ncols());
        debug_assert!(x.len() == d && out.nrows() == d && out.ncols() == n);
        let f = self.exponent_factor();
        for i in 0..n {
            let mut r2 = 0.0;
            for l in 0..d {
                let diff = x[l] - z[(i, l)];
                r2 += diff * diff;
            }
            let c = 4.0 * f * (f * r2).exp();
            for l in 0..d {
                out[(l, i)] = c * (x[l] - z[(i, l)]);
            }
        }
    }
}

impl SpectralDensity for Gaussian {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        let inv = 1.0 / self.length_scale;
        for o in out.iter_mut() {
            let z: f64 = rng.sample(StandardNormal);
            *o = z * inv;
        }
    }
}
