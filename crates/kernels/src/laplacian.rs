//! The Laplacian (L1) kernel.

use crate::error::{check_length_scale, in_terms_of, positive};
use crate::radial::for_each_column;
use crate::{Kernel, KernelError, SpectralDensity};
use faer::{MatMut, MatRef};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// `k(x, y) = exp(−‖x − y‖₁ / ℓ)` with length-scale `ℓ > 0` (L1 distance).
///
/// The F-KAMH thesis (Table 2.1) writes `exp(−σ‖x − y‖₁)`: `ℓ = 1/σ`
/// ([`Laplacian::from_thesis_sigma`]). It factorises over coordinates, so its
/// spectral density is a product of Cauchy densities of scale `1/ℓ`
/// (`E[cos(ωr)] = e^{−|r|/ℓ}` for `ω ~ Cauchy(0, 1/ℓ)`).
///
/// Not differentiable where a coordinate of `x − y` vanishes. There,
/// [`Kernel::grad_x`] returns 0 in that coordinate (the mean of the two
/// one-sided derivatives) and [`Kernel::hessian_diag_x`] returns `k/ℓ²`, the
/// second derivative on either side (the Dirac mass of the kink is dropped).
/// Away from the kinks `∂k/∂x_l = −sign(x_l − y_l) k/ℓ` and `∂²k/∂x_l² = k/ℓ²`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "LaplacianParts")]
pub struct Laplacian {
    length_scale: f64,
}

/// The serialised form of [`Laplacian`], validated by its constructor.
#[derive(serde::Deserialize)]
struct LaplacianParts {
    length_scale: f64,
}

impl TryFrom<LaplacianParts> for Laplacian {
    type Error = KernelError;
    fn try_from(p: LaplacianParts) -> Result<Self, KernelError> {
        Self::new(p.length_scale)
    }
}

impl Laplacian {
    /// A Laplacian kernel with length-scale `ℓ > 0`.
    pub fn new(length_scale: f64) -> Result<Self, KernelError> {
        Ok(Self {
            length_scale: check_length_scale("length_scale", length_scale)?,
        })
    }

    /// The thesis' `exp(−σ‖x − y‖₁)`: `ℓ = 1/σ`.
    pub fn from_thesis_sigma(sigma: f64) -> Result<Self, KernelError> {
        let sigma = positive("sigma", sigma)?;
        in_terms_of("sigma", sigma, Self::new(1.0 / sigma))
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }
}

/// The sign with `sign(0) = 0` (unlike `f64::signum`).
fn sign(v: f64) -> f64 {
    if v > 0.0 {
        1.0
    } else if v < 0.0 {
        -1.0
    } else {
        0.0
    }
}

fn l1_distance(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a - b).abs()).sum()
}

impl Kernel for Laplacian {
    fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), y.len());
        (-l1_distance(x, y) / self.length_scale).exp()
    }

    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let k = self.eval(x, y);
        let c = -k / self.length_scale;
        for ((o, a), b) in out.iter_mut().zip(x).zip(y) {
            *o = c * sign(a - b);
        }
        k
    }

    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
        debug_assert!(x.len() == y.len() && y.len() == out.len());
        let k = self.eval(x, y);
        out.fill(k / (self.length_scale * self.length_scale));
        k
    }

    fn gradient_matrix(&self, x: &[f64], z: MatRef<'_, f64>, out: MatMut<'_, f64>) {
        let inv_l = 1.0 / self.length_scale;
        debug_assert_eq!(x.len(), z.ncols());
        for_each_column(z, out, |_, col, zi| {
            let mut l1 = 0.0;
            for ((v, xl), zl) in col.iter_mut().zip(x).zip(zi) {
                *v = xl - zl;
                l1 += v.abs();
            }
            let c = -2.0 * inv_l * (-l1 * inv_l).exp();
            col.iter_mut().for_each(|v| *v = c * sign(*v));
        });
    }
}

impl SpectralDensity for Laplacian {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        // A standard Cauchy draw is the ratio of two independent standard normals.
        let inv = 1.0 / self.length_scale;
        for o in out.iter_mut() {
            let (a, b): (f64, f64) = (rng.sample(StandardNormal), rng.sample(StandardNormal));
            *o = inv * a / b;
        }
    }
}
