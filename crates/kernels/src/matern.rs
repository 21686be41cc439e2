//! The Matérn family.

use crate::error::{check_length_scale, derived_positive, in_terms_of, positive};
use crate::radial::{Radial, impl_radial_kernel};
use crate::{KernelError, SpectralDensity};
use rand::{Rng, RngExt};
use rand_distr::{Gamma, StandardNormal};

/// The Matérn kernel of smoothness `ν > 0` and length-scale `ℓ > 0`
/// (Rasmussen & Williams' convention):
///
/// `k(x, y) = 2^{1−ν}/Γ(ν) · u^ν K_ν(u)`, `u = √(2ν) ‖x − y‖₂ / ℓ`,
///
/// with `K_ν` the modified Bessel function of the second kind and `k(x, x) = 1`.
/// For `ν = 1/2, 3/2, 5/2` the closed forms `e^{−u}`, `(1 + u)e^{−u}` and
/// `(1 + u + u²/3)e^{−u}` are used; other orders go through `K_ν` (puruspe,
/// with an asymptotic expansion for `u > 500`), which is much slower.
///
/// Conventions of the papers: the F-KAMH thesis (Table 2.1, its `λ, σ`) and
/// the cKAM paper (`v, l`) use this one; the KAMH paper writes
/// `2^{1−ν}/Γ(ν) (r/ρ)^ν K_ν(r/ρ)`, i.e. `ℓ = ρ√(2ν)` — see
/// [`Matern::from_kamh_rho`].
///
/// Smoothness at `x = y`: the gradient exists for `ν > 1/2` and the Hessian
/// for `ν > 1`. Where they do not exist, [`crate::Kernel::grad_x`] returns 0
/// at `x = y` (the mean of the one-sided derivatives) and
/// [`crate::Kernel::hessian_diag_x`] returns `−∞` in every coordinate (the
/// limit of `f′(r)/r` as `r → 0`).
///
/// Orders are limited to `ν ≤` [`Matern::MAX_NU`]: close to `x = y` the
/// kernel is summed from its power series in `u²` (where `K_ν(u)` would
/// overflow), which converges quickly only up to there; beyond it the kernel
/// is within `O(1/ν)` of the Gaussian kernel with the same `ℓ` (its
/// `ν → ∞` limit), which should be used instead.
///
/// Spectral density: the multivariate Student t with `2ν` degrees of freedom
/// and scale `ℓ⁻¹I`, drawn as `ω = ζ / (ℓ√g)` with `ζ ~ N(0, I)` and
/// `g ~ Gamma(shape ν, rate ν)`.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "MaternParts")]
pub struct Matern {
    nu: f64,
    length_scale: f64,
    form: Form,
}

/// The serialised form of [`Matern`], validated by its constructors: a
/// stored [`Form::Bessel`] goes through [`Matern::with_bessel`] (whose
/// constants are recomputed), a closed form through [`Matern::new`], which
/// must choose the same form.
#[derive(serde::Deserialize)]
struct MaternParts {
    nu: f64,
    length_scale: f64,
    form: Form,
}

impl TryFrom<MaternParts> for Matern {
    type Error = KernelError;
    fn try_from(p: MaternParts) -> Result<Self, KernelError> {
        let kernel = match p.form {
            Form::Bessel { .. } => Self::with_bessel(p.nu, p.length_scale)?,
            _ => Self::new(p.nu, p.length_scale)?,
        };
        if std::mem::discriminant(&kernel.form) != std::mem::discriminant(&p.form) {
            return Err(KernelError::InvalidParameter {
                name: "nu",
                value: p.nu,
                reason: "does not match the stored closed form (nu = 1/2, 3/2 or 5/2)",
            });
        }
        Ok(kernel)
    }
}

/// How the kernel is evaluated.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
enum Form {
    Half,
    ThreeHalves,
    FiveHalves,
    /// Through `K_ν`, with `ln(2^{1−ν}/Γ(ν))` and the distance `u` below which
    /// `K_ν(u)` would overflow (the `u → 0` limits are used there).
    Bessel {
        ln_norm: f64,
        tiny_u: f64,
    },
}

impl Matern {
    /// The largest smoothness accepted (see the type's documentation).
    pub const MAX_NU: f64 = 250.0;

    /// A Matérn kernel with smoothness `0 < ν ≤` [`Matern::MAX_NU`] and
    /// length-scale `ℓ > 0`; the closed forms are used when `ν` is exactly
    /// 1/2, 3/2 or 5/2.
    pub fn new(nu: f64, length_scale: f64) -> Result<Self, KernelError> {
        let mut kernel = Self::with_bessel(nu, length_scale)?;
        kernel.form = if nu == 0.5 {
            Form::Half
        } else if nu == 1.5 {
            Form::ThreeHalves
        } else if nu == 2.5 {
            Form::FiveHalves
        } else {
            kernel.form
        };
        Ok(kernel)
    }

    /// A Matérn kernel that always evaluates through `K_ν`, even for
    /// `ν ∈ {1/2, 3/2, 5/2}` (slower; for validating the closed forms).
    pub fn with_bessel(nu: f64, length_scale: f64) -> Result<Self, KernelError> {
        let nu = positive("nu", nu)?;
        if nu > Self::MAX_NU {
            return Err(KernelError::InvalidParameter {
                name: "nu",
                value: nu,
                reason: "must be <= 250 (beyond it the kernel is within O(1/nu) of its limit, \
                         the Gaussian kernel with the same length-scale: use that)",
            });
        }
        let length_scale = check_length_scale("length_scale", length_scale)?;
        // q = 2ν/ℓ² scales the Bessel argument and the slopes
        derived_positive("nu", nu, 2.0 * nu / (length_scale * length_scale))?;
        // libm's lgamma is accurate to an ulp or so; puruspe's ln_gamma only to ~1e-11.
        let ln_gamma_nu = libm::lgamma(nu);
        // K_ν(u) ≈ Γ(ν) 2^{ν−1} u^{−ν} as u → 0: keep it below e^600.
        let tiny_u = 2.0 * ((ln_gamma_nu - 600.0) / nu).exp();
        Ok(Self {
            nu,
            length_scale,
            form: Form::Bessel {
                ln_norm: (1.0 - nu) * std::f64::consts::LN_2 - ln_gamma_nu,
                tiny_u,
            },
        })
    }

    /// The KAMH paper's `k_{ν,ρ}(x, x′) = 2^{1−ν}/Γ(ν) (‖x − x′‖/ρ)^ν K_ν(‖x − x′‖/ρ)`:
    /// `ℓ = ρ√(2ν)`.
    pub fn from_kamh_rho(nu: f64, rho: f64) -> Result<Self, KernelError> {
        let nu = positive("nu", nu)?;
        let rho = positive("rho", rho)?;
        in_terms_of("rho", rho, Self::new(nu, rho * (2.0 * nu).sqrt()))
    }

    /// The smoothness `ν`.
    pub fn nu(&self) -> f64 {
        self.nu
    }

    /// The length-scale `ℓ`.
    pub fn length_scale(&self) -> f64 {
        self.length_scale
    }

    /// The KAMH paper's `ρ = ℓ / √(2ν)`.
    pub fn kamh_rho(&self) -> f64 {
        self.length_scale / (2.0 * self.nu).sqrt()
    }

    /// `(k, a, b)` through `K_ν`, with `q = 2ν/ℓ²`, `u = √(q s)`:
    /// `k = c u^ν K_ν(u)`, `a = −c q u^{ν−1} K_{ν−1}(u)`,
    /// `b = c q² u^{ν−2} K_{ν−2}(u)`, `c = 2^{1−ν}/Γ(ν)`; from
    /// `d/du [u^μ K_μ(u)] = −u^μ K_{μ−1}(u)` and `K_{−μ} = K_μ`.
    fn bessel_terms(&self, s: f64, ln_norm: f64, tiny_u: f64, order: usize) -> (f64, f64, f64) {
        let nu = self.nu;
        let q = 2.0 * nu / (self.length_scale * self.length_scale);
        let u = (q * s).sqrt();
        if u == f64::INFINITY {
            // K_ν(u) = 0 and uⁿ = ∞ would give ∞ · 0
            return (0.0, -0.0, 0.0);
        }
        if u <= tiny_u {
            if s == 0.0 || nu <= 2.0 {
                // for ν ≤ 2, tiny_u < 1e-130: the u → 0 limits are exact
                return (1.0, self.slope_at_zero(), 0.0);
            }
            // (u/2)^{2μ}/Γ(μ)², the relative size of the series' neglected
            // part, is below e^{−1000} here for the orders μ = ν, ν − 1, ν − 2
            let t = 0.25 * q * s;
            let k = normalised_series(nu, t);
            let a = -q * normalised_series(nu - 1.0, t) / (2.0 * (nu - 1.0));
            let b = q * q * normalised_series(nu - 2.0, t) / (4.0 * (nu - 1.0) * (nu - 2.0));
            return (k, a, b);
        }
        let term = |mu: f64| (ln_norm + mu * u.ln() + ln_bessel_k(mu.abs(), u)).exp();
        let k = term(nu);
        let a = if order >= 1 { -q * term(nu - 1.0) } else { 0.0 };
        let b = if order >= 2 {
            q * q * term(nu - 2.0)
        } else {
            0.0
        };
        (k, a, b)
    }

    /// The limit of `a = f′(r)/r` as `r → 0`: `−ν/((ν−1)ℓ²)` for `ν > 1`,
    /// `−∞` otherwise.
    fn slope_at_zero(&self) -> f64 {
        if self.nu > 1.0 {
            -self.nu / ((self.nu - 1.0) * self.length_scale * self.length_scale)
        } else {
            f64::NEG_INFINITY
        }
    }

    /// `(k, a, b)` at squared distance `s > 0`, or at `s = 0` with `a` the
    /// second-derivative limit; `order` says which terms are needed.
    fn terms(&self, s: f64, order: usize) -> (f64, f64, f64) {
        let c = match self.form {
            Form::Bessel { ln_norm, tiny_u } => {
                return self.bessel_terms(s, ln_norm, tiny_u, order);
            }
            Form::Half => 1.0,
            Form::ThreeHalves => 3.0f64.sqrt(),
            Form::FiveHalves => 5.0f64.sqrt(),
        } / self.length_scale;
        if s == 0.0 {
            return (1.0, self.slope_at_zero(), 0.0);
        }
        let r = s.sqrt();
        let cr = c * r;
        let e = (-cr).exp();
        if e == 0.0 {
            // every term is a polynomial in cr times e, and would be 0 or,
            // where the polynomial or r·s overflows, NaN (∞ · 0)
            return (0.0, -0.0, 0.0);
        }
        match self.form {
            // f = e^{−cr}: a = −c e/r, b = c e (1 + cr)/r³.
            Form::Half => (e, -c * e / r, c * e * (1.0 + cr) / (r * s)),
            // f = (1 + cr) e^{−cr}: a = −c² e, b = c³ e / r.
            Form::ThreeHalves => ((1.0 + cr) * e, -c * c * e, c * c * c * e / r),
            // f = (1 + cr + c²r²/3) e^{−cr}: a = −c²(1 + cr) e/3, b = c⁴ e/3.
            Form::FiveHalves => (
                (1.0 + cr + cr * cr / 3.0) * e,
                -c * c * (1.0 + cr) * e / 3.0,
                c * c * c * c * e / 3.0,
            ),
            Form::Bessel { .. } => unreachable!("handled above"),
        }
    }
}

/// `2^{1−μ}/Γ(μ) u^μ K_μ(u)` for `μ > 0` and `t = u²/4` small against `μ`
/// (at most about `0.3 μ` where it is used), by the part of its power series
/// that is analytic in `t`:
/// `Σ_k (−t)^k / (k! (μ − 1)(μ − 2)⋯(μ − k))`, summed while its terms
/// shrink; the other part, `∝ t^μ/Γ(μ)²`, is negligible where it is used.
fn normalised_series(mu: f64, t: f64) -> f64 {
    let (mut sum, mut term) = (1.0, 1.0f64);
    let mut k = 1.0;
    while k < mu - 1.0 {
        term *= -t / (k * (mu - k));
        sum += term;
        if term.abs() <= 1e-17 * sum.abs() {
            break;
        }
        k += 1.0;
    }
    sum
}

/// `ln K_μ(u)` for `μ ≥ 0`, `u > 0`: puruspe's `besselik` for `u ≤ 500`
/// (it stops converging for very large `u`), else the asymptotic expansion
/// `K_μ(u) ≈ √(π/(2u)) e^{−u} Σ_k a_k`, `a_k = a_{k−1}(4μ² − (2k−1)²)/(8ku)`,
/// summed while its terms shrink.
fn ln_bessel_k(mu: f64, u: f64) -> f64 {
    if u <= 500.0 {
        puruspe::besselik(mu, u).1.ln()
    } else {
        ln_bessel_k_asymptotic(mu, u)
    }
}

/// The large-`u` expansion of `ln K_μ(u)` (see [`ln_bessel_k`]).
fn ln_bessel_k_asymptotic(mu: f64, u: f64) -> f64 {
    let four_mu2 = 4.0 * mu * mu;
    let (mut sum, mut term) = (1.0, 1.0f64);
    for k in 1..=40 {
        let odd = (2 * k - 1) as f64;
        let next = term * (four_mu2 - odd * odd) / (8.0 * k as f64 * u);
        if next.abs() >= term.abs() || next == 0.0 {
            break;
        }
        term = next;
        sum += term;
        if term.abs() < 1e-17 * sum.abs() {
            break;
        }
    }
    0.5 * (std::f64::consts::PI / (2.0 * u)).ln() - u + sum.ln()
}

impl Radial for Matern {
    fn value(&self, s: f64) -> f64 {
        self.terms(s, 0).0
    }

    fn value_slope(&self, s: f64) -> (f64, f64) {
        let (k, a, _) = self.terms(s, 1);
        // At x = y (and, for ν ≤ 1, closer than K_ν's overflow limit) the
        // slope limit is infinite while the gradient a·(x − y) is 0.
        (k, if a.is_finite() { a } else { 0.0 })
    }

    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64) {
        self.terms(s, 2)
    }
}

impl_radial_kernel!(Matern);

impl SpectralDensity for Matern {
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]) {
        // ν > 0 is checked by the constructors, so the Gamma parameters are valid.
        let gamma = Gamma::new(self.nu, 1.0 / self.nu).expect("ν > 0 checked at construction");
        let g: f64 = rng.sample(gamma);
        let scale = 1.0 / (self.length_scale * g.sqrt());
        for o in out.iter_mut() {
            let z: f64 = rng.sample(StandardNormal);
            *o = z * scale;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Kernel;

    /// The asymptotic expansion against puruspe where both are valid, for
    /// half-integer orders (where it terminates: exact) and others.
    #[test]
    fn asymptotic_bessel_matches_puruspe() {
        for mu in [0.0, 0.3, 0.5, 1.7, 2.5, 4.2] {
            for u in [60.0, 150.0, 400.0, 499.0] {
                let want = puruspe::besselik(mu, u).1.ln();
                let got = ln_bessel_k_asymptotic(mu, u);
                assert!(
                    (got - want).abs() <= 1e-13 * want.abs(),
                    "μ = {mu}, u = {u}: {got} vs {want}"
                );
            }
        }
    }

    #[test]
    fn constructors_reject_bad_parameters() {
        for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
            assert!(Matern::new(bad, 1.0).is_err());
            assert!(Matern::new(1.5, bad).is_err());
            assert!(Matern::with_bessel(bad, 1.0).is_err());
            assert!(Matern::from_kamh_rho(2.5, bad).is_err());
            assert!(Matern::from_kamh_rho(bad, 1.0).is_err());
        }
        assert!(Matern::new(1e-3, 1e-3).is_ok());
    }

    /// Far apart, where e^{−cr} (or K_ν) underflows to 0 and the
    /// polynomial factors or the squared distance overflow, the kernel, its
    /// gradient and its Hessian's diagonal are 0, as every other radial
    /// kernel's are (they were NaN: ∞ · 0). Nearer, where e^{−cr} > 0, they
    /// are what the closed forms and the Bessel terms give, so the values at
    /// r = 10³ must be positive and finite.
    #[test]
    fn far_apart_the_kernel_and_its_derivatives_are_zero() {
        let kernels = [
            Matern::new(0.5, 1.0).unwrap(),
            Matern::new(1.5, 1.0).unwrap(),
            Matern::new(2.5, 1.0).unwrap(),
            Matern::new(1.7, 1.0).unwrap(),
            Matern::with_bessel(2.5, 1.0).unwrap(),
            Matern::new(4.0, 1.0).unwrap(),
        ];
        let x = [0.0, 0.0];
        for kernel in &kernels {
            let near = kernel.eval(&x, &[1e2, 0.0]);
            assert!(near > 0.0 && near.is_finite(), "{kernel:?} at 100: {near}");
            for r in [1e154, 2e154, 1e155, 1e200, 1e300, f64::MAX] {
                let y = [r, -r];
                let mut gradient = [f64::NAN; 2];
                let mut curvature = [f64::NAN; 2];
                assert_eq!(kernel.eval(&x, &y), 0.0, "{kernel:?} at r = {r}");
                assert_eq!(kernel.grad_x(&x, &y, &mut gradient), 0.0);
                assert_eq!(kernel.hessian_diag_x(&x, &y, &mut curvature), 0.0);
                assert_eq!(gradient, [0.0, 0.0], "{kernel:?} at r = {r}");
                assert_eq!(curvature, [0.0, 0.0], "{kernel:?} at r = {r}");
            }
        }
    }
}
