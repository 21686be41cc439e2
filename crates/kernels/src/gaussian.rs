//! The Gaussian (squared-exponential) kernel.

use crate::error::{check_length_scale, in_terms_of, positive};
use crate::radial::{Radial, impl_radial_kernel};
use crate::{KernelError, SpectralDensity};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// `k(x, y) = exp(−‖x − y‖² / (2ℓ²))` with length-scale `ℓ`.
///
/// Smooth everywhere. Spectral density: `ω ~ N(0, ℓ⁻² I)`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "GaussianParts")]
pub struct Gaussian {
    length_scale: f64,
}

/// The serialised form of [`Gaussian`], validated by its constructor.
#[derive(serde::Deserialize)]
struct GaussianParts {
    length_scale: f64,
}

impl TryFrom<GaussianParts> for Gaussian {
    type Error = KernelError;
    fn try_from(p: GaussianParts) -> Result<Self, KernelError> {
        Self::new(p.length_scale)
    }
}

impl Gaussian {
    /// A Gaussian kernel with length-scale `ℓ > 0`.
    pub fn new(length_scale: f64) -> Result<Self, KernelError> {
        Ok(Self {
            length_scale: check_length_scale("length_scale", length_scale)?,
        })
    }

    /// The KAMH paper's `exp(−‖x − y‖² / (2σ²))`: `ℓ = σ`.
    pub fn from_kamh_sigma(sigma: f64) -> Result<Self, KernelError> {
        in_terms_of("sigma", sigma, Self::new(sigma))
    }

    /// The KMC lite estimator's `exp(−‖x − y‖² / σ)`: `ℓ = √(σ/2)`.
    pub fn from_lite_sigma(sigma: f64) -> Result<Self, KernelError> {
        let sigma = positive("sigma", sigma)?;
        in_terms_of("sigma", sigma, Self::new((sigma / 2.0).sqrt()))
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// The KMC lite estimator's `σ = 2ℓ²` (inverse of [`Gaussian::from_lite_sigma`]).
    pub fn lite_sigma(&self) -> f64 {
        2.0 * self.length_scale * self.length_scale
    }
}

impl Radial for Gaussian {
    fn value(&self, s: f64) -> f64 {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        (-0.5 * s * inv_l2).exp()
    }

    fn value_slope(&self, s: f64) -> (f64, f64) {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        let k = (-0.5 * s * inv_l2).exp();
        (k, -k * inv_l2)
    }

    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64) {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        let k = (-0.5 * s * inv_l2).exp();
        (k, -k * inv_l2, k * inv_l2 * inv_l2)
    }

    /// `2a(s) = −2 exp(−s/(2ℓ²))/ℓ²` with the vectorisable
    /// [`kameleon_core::fastmath::exp_fma`] (within 2 ulp of `value_slope`'s libm
    /// value; only called under a `pulp` dispatch, see the trait method), in
    /// its variant for the non-positive arguments that `s ≥ 0` gives (the
    /// same bits, less work). `−k ℓ⁻²` is `k · (−ℓ⁻²)` bitwise.
    #[inline(always)]
    fn gradient_weights(&self, s_values: &mut [f64]) {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        let minus_inv_l2 = -inv_l2;
        for s in s_values.iter_mut() {
            let k = kameleon_core::fastmath::exp_nonpositive_fma(-0.5 * *s * inv_l2);
            *s = 2.0 * (k * minus_inv_l2);
        }
    }

    const VECTORISED_WEIGHTS: bool = true;
}

impl_radial_kernel!(Gaussian);

impl SpectralDensity for Gaussian {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        let inv = 1.0 / self.length_scale;
        for o in out.iter_mut() {
            let z: f64 = rng.sample(StandardNormal);
            *o = z * inv;
        }
    }
}
