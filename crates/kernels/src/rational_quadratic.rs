//! The rational quadratic and inverse multiquadric kernels: scale mixtures of
//! Gaussians with a Gamma-distributed precision.

use crate::error::{check_length_scale, derived_positive, in_terms_of, positive};
use crate::radial::{Radial, impl_radial_kernel};
use crate::{KernelError, SpectralDensity};
use rand::{Rng, RngExt};
use rand_distr::{Gamma, StandardNormal};

/// The rational quadratic kernel `k(x, y) = (1 + ‖x − y‖² / (2αℓ²))^{−α}` with
/// length-scale `ℓ > 0` and shape `α > 0` (Rasmussen & Williams' convention;
/// it tends to the Gaussian kernel of length-scale `ℓ` as `α → ∞`).
///
/// It is the Gaussian scale mixture `E_τ[exp(−τ‖x − y‖²/(2ℓ²))]` with
/// `τ ~ Gamma(shape α, rate α)`, so its spectral density draws
/// `ω = √τ ζ / ℓ` with `ζ ~ N(0, I)`. Smooth everywhere.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "RationalQuadraticParts")]
pub struct RationalQuadratic {
    length_scale: f64,
    alpha: f64,
}

/// The serialised form of [`RationalQuadratic`], validated by its constructor.
#[derive(serde::Deserialize)]
struct RationalQuadraticParts {
    length_scale: f64,
    alpha: f64,
}

impl TryFrom<RationalQuadraticParts> for RationalQuadratic {
    type Error = KernelError;
    fn try_from(p: RationalQuadraticParts) -> Result<Self, KernelError> {
        Self::new(p.length_scale, p.alpha)
    }
}

impl RationalQuadratic {
    /// A rational quadratic kernel with length-scale `ℓ > 0` and shape `α > 0`.
    /// The scale `2αℓ²` of `s` in `t = 1 + s/(2αℓ²)` must be finite and
    /// positive as well.
    pub fn new(length_scale: f64, alpha: f64) -> Result<Self, KernelError> {
        let length_scale = check_length_scale("length_scale", length_scale)?;
        let alpha = positive("alpha", alpha)?;
        derived_positive("alpha", alpha, 2.0 * alpha * length_scale * length_scale)?;
        derived_positive(
            "alpha",
            alpha,
            1.0 / (2.0 * alpha * length_scale * length_scale),
        )?;
        Ok(Self {
            length_scale,
            alpha,
        })
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// The shape `α`.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
}

impl Radial for RationalQuadratic {
    fn value(&self, s: f64) -> f64 {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        let u = 0.5 * s * inv_l2 / self.alpha;
        (-self.alpha * u.ln_1p()).exp()
    }

    // With u = s/(2αℓ²) and t = 1 + u: k = t^{−α}, a = 2 dk/ds = −t^{−α−1}/ℓ²,
    // b = 4 d²k/ds² = (α + 1) t^{−α−2} / (αℓ⁴). `ln t` as `ln_1p(u)`: for
    // large α, u is tiny and `1 + u` would keep only a few of its digits,
    // which `α ln t` then multiplies back up (at α = 10¹² the kernel was off
    // by 10⁻⁴ relative).
    fn value_slope(&self, s: f64) -> (f64, f64) {
        let (k, a, _) = self.value_slope_curvature(s);
        (k, a)
    }

    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64) {
        let inv_l2 = 1.0 / (self.length_scale * self.length_scale);
        let u = 0.5 * s * inv_l2 / self.alpha;
        let t = 1.0 + u;
        let k = (-self.alpha * u.ln_1p()).exp();
        let a = -k / t * inv_l2;
        let b = (self.alpha + 1.0) / self.alpha * k / (t * t) * inv_l2 * inv_l2;
        (k, a, b)
    }
}

impl_radial_kernel!(RationalQuadratic);

impl SpectralDensity for RationalQuadratic {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        // α > 0 is checked by the constructor, so the Gamma parameters are valid.
        let gamma =
            Gamma::new(self.alpha, 1.0 / self.alpha).expect("α > 0 checked at construction");
        let tau: f64 = rng.sample(gamma);
        let scale = tau.sqrt() / self.length_scale;
        for o in out.iter_mut() {
            let z: f64 = rng.sample(StandardNormal);
            *o = z * scale;
        }
    }
}

/// The inverse multiquadric kernel `k(x, y) = (1 + ‖x − y‖²/ℓ²)^{−β}` with
/// length-scale `ℓ > 0` and exponent `β > 0` (`β = 1/2` by default).
///
/// The F-KAMH thesis (Table 2.1) writes `(c² + ‖x − y‖²)^{−β}`, which is
/// `c^{−2β}` times this kernel with `ℓ = c`; the constant factor does not
/// change the kernel's RKHS and is dropped here so that `k(x, x) = 1`.
///
/// It is the rational quadratic kernel with `α = β` and length-scale
/// `ℓ/√(2β)`, hence also a Gaussian scale mixture with a Gamma precision;
/// its spectral density and derivatives are those of that kernel. Smooth
/// everywhere.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "InverseMultiquadricParts")]
pub struct InverseMultiquadric {
    length_scale: f64,
    rational_quadratic: RationalQuadratic,
}

/// The serialised form of [`InverseMultiquadric`], validated by its
/// constructor (the equivalent rational quadratic kernel is rebuilt from
/// `ℓ` and its exponent).
#[derive(serde::Deserialize)]
struct InverseMultiquadricParts {
    length_scale: f64,
    rational_quadratic: RationalQuadratic,
}

impl TryFrom<InverseMultiquadricParts> for InverseMultiquadric {
    type Error = KernelError;
    fn try_from(p: InverseMultiquadricParts) -> Result<Self, KernelError> {
        Self::with_exponent(p.length_scale, p.rational_quadratic.alpha)
    }
}

impl InverseMultiquadric {
    /// `(1 + ‖x − y‖²/ℓ²)^{−1/2}` with length-scale `ℓ > 0`.
    pub fn new(length_scale: f64) -> Result<Self, KernelError> {
        Self::with_exponent(length_scale, 0.5)
    }

    /// `(1 + ‖x − y‖²/ℓ²)^{−β}` with length-scale `ℓ > 0` and exponent `β > 0`.
    pub fn with_exponent(length_scale: f64, beta: f64) -> Result<Self, KernelError> {
        let length_scale = check_length_scale("length_scale", length_scale)?;
        let beta = positive("beta", beta)?;
        Ok(Self {
            length_scale,
            rational_quadratic: RationalQuadratic::new(length_scale / (2.0 * beta).sqrt(), beta)?,
        })
    }

    /// The thesis' `(c² + ‖x − y‖²)^{−β}` up to its constant factor `c^{−2β}`: `ℓ = c`.
    pub fn from_thesis(c: f64, beta: f64) -> Result<Self, KernelError> {
        in_terms_of("c", c, Self::with_exponent(c, beta))
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// The exponent `β`.
    pub fn beta(&self) -> f64 {
        self.rational_quadratic.alpha
    }

    /// The same kernel as a [`RationalQuadratic`] (`α = β`, length-scale `ℓ/√(2β)`).
    pub fn as_rational_quadratic(&self) -> RationalQuadratic {
        self.rational_quadratic
    }
}

impl Radial for InverseMultiquadric {
    fn value(&self, s: f64) -> f64 {
        self.rational_quadratic.value(s)
    }

    fn value_slope(&self, s: f64) -> (f64, f64) {
        self.rational_quadratic.value_slope(s)
    }

    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64) {
        self.rational_quadratic.value_slope_curvature(s)
    }
}

impl_radial_kernel!(InverseMultiquadric);

impl SpectralDensity for InverseMultiquadric {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        self.rational_quadratic.sample_frequency(rng, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Gaussian;

    /// At a huge α the rational quadratic kernel is the Gaussian of the same
    /// length-scale up to `O(1/α)`: `ln k = −α ln(1 + u) = −s/(2ℓ²) + α u²/2
    /// − …` with `u = s/(2αℓ²)`, so `|ln k − ln k_G| ≤ s²/(8αℓ⁴)`; the slope
    /// has a further factor `1/t = 1 − u + …` and the curvature `(1 + 1/α)/t²`,
    /// so every ratio to the Gaussian's is within `(s²/(8ℓ⁴) + s/ℓ² + 1)/α`
    /// of 1, below 2·10⁻¹¹ here. Computing `ln t` from `t = 1 + u` rounded `u`
    /// to the spacing of doubles near 1 (2.2·10⁻¹⁶, against u ≤ 2·10⁻¹²
    /// here) and gave errors of up to 10⁻⁴ relative.
    #[test]
    fn huge_alpha_gives_the_gaussian_limit() {
        let (ell, alpha) = (1.3, 1e12);
        let rq = RationalQuadratic::new(ell, alpha).unwrap();
        let gauss = Gaussian::new(ell).unwrap();
        for s in [1e-6, 0.01, 0.5, 1.0, 2.0, 4.0] {
            let bound = (s * s / (8.0 * ell.powi(4)) + s / (ell * ell) + 1.0) / alpha + 1e-14;
            let (k, a, b) = rq.value_slope_curvature(s);
            let (kg, ag, bg) = gauss.value_slope_curvature(s);
            for (what, got, want) in [("k", k, kg), ("a", a, ag), ("b", b, bg)] {
                assert!(
                    (got / want - 1.0).abs() <= bound,
                    "s = {s}: {what} = {got} against the Gaussian's {want}"
                );
            }
            assert_eq!(rq.value(s), k);
        }
    }
}
