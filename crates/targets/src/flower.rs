//! The flower (and ring) target of KAMH, with the square the paper's formula
//! lacks, and the KAMH code's variant that takes the norm of the whole vector.

use crate::quantile::chi_squared_quantile;
use crate::util::{
    LN_2PI, check_dim, check_finite, check_point_dim, check_positive, fill_standard_normal,
};
use crate::{QuantileRegions, Target, TargetError};
use kameleon_core::normal_cdf;
use rand::{Rng, RngExt};
use statrs::distribution::{ChiSquared, ContinuousCDF};
use std::f64::consts::{PI, TAU};

/// The flower `F(r₀, A, ω, σ)` in dimension `d ≥ 2`:
/// `π(x) ∝ exp(−(ρ − c(φ))²/(2σ²)) · N(x₃:d; 0, I)` with `ρ = ‖x₁:₂‖`,
/// `φ = atan2(x₂, x₁)` and `c(φ) = r₀ + A cos(ωφ)` (the square is missing in
/// the KAMH paper; the KAMH code has it). The ring is the flower with `A = 0`
/// ([`Flower::ring`]). KAMH uses `F(10, 6, 6, 1)` in `d = 8`.
/// [`Flower::with_whole_norm`] builds the KAMH code's variant, whose log density
/// takes `ρ = ‖x‖` instead.
///
/// **Normalisation.** In polar coordinates, with `a(φ) = c(φ)/σ`,
/// `∫ρ exp(−(ρ−c)²/(2σ²)) dρ = σ²√(2π) Z(φ)` where
/// `Z = a Φ(a) + ϕ(a)`; the normaliser `σ²√(2π) ∫₀^{2π} Z dφ` is computed
/// once by the trapezoidal rule, which converges geometrically for this
/// analytic periodic integrand (integer ω), so [`Target::log_density`] is
/// normalised to machine precision.
///
/// **Quantile regions.** With `u = (ρ − c(φ))/σ`, the statistic
/// `u² + ‖x₃:d‖²` satisfies `P(u² + ‖x₃:d‖² ≤ t) = κ·F_{χ²_{d−1}}(t)` for
/// every `t < min_φ a(φ)² = ((r₀ − |A|)/σ)²`, where
/// `κ = ∫ a dφ / ∫ Z dφ ≤ 1` (given φ, `u` has density `(a + u)ϕ(u)/Z` on
/// `u > −a`, and the odd part integrates to zero over the symmetric
/// region). For `F(10, 6, 6, 1)`, `1 − κ ≈ 5.5·10⁻⁸`.
/// [`QuantileRegions::region_threshold`] returns `χ²_{d−1}⁻¹(q/κ)`, exact
/// including κ, and errors when the validity condition
/// `r₀ − |A| > σ √t` fails at that level.
#[derive(Debug, Clone, PartialEq)]
pub struct Flower {
    dim: usize,
    radius: f64,
    amplitude: f64,
    petals: u32,
    sigma: f64,
    log_normaliser: f64,
    /// κ = ∫ a dφ / ∫ Z dφ.
    region_mass_factor: f64,
    /// Whether ρ is the norm of the whole vector.
    whole_norm: bool,
    /// The plane flower's mass of `‖x₃:d‖ > ρ` (with `x₃:d` standard
    /// normal), which the whole-norm flower cuts away; zero for the plane
    /// flower.
    truncated_mass: f64,
}

/// Standard normal density.
fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (TAU).sqrt()
}

/// `Z(a) = a Φ(a) + ϕ(a) = ∫_{v>0} v ϕ(v − a) dv`: the radial mass at
/// `a = c(φ)/σ`, in units of `σ²√(2π)`.
fn radial_mass(a: f64) -> f64 {
    a * normal_cdf(a) + normal_pdf(a)
}

/// Composite Simpson rule of `f` over `[lo, hi]` with `intervals` (even)
/// intervals.
fn simpson(lo: f64, hi: f64, intervals: usize, f: impl Fn(f64) -> f64) -> f64 {
    let h = (hi - lo) / intervals as f64;
    let inner: f64 = (1..intervals)
        .map(|i| if i % 2 == 1 { 4.0 } else { 2.0 } * f(lo + i as f64 * h))
        .sum();
    (f(lo) + inner + f(hi)) * h / 3.0
}

/// Angular nodes of the whole-norm flower's corrections (a periodic
/// trapezoidal rule in `θ = ωφ`).
const CORRECTION_ANGLES: usize = 256;
/// Simpson intervals of the corrections' radial integrals.
const CORRECTION_INTERVALS: usize = 128;

/// The most petals [`Flower::new`] accepts.
const MAX_PETALS: u32 = 1024;

impl Flower {
    /// The smallest kept mass `1 − τ` [`Flower::with_whole_norm`] accepts.
    pub const MIN_WHOLE_NORM_MASS: f64 = 1e-3;

    /// The flower with base radius `radius = r₀ > 0`, petal amplitude
    /// `amplitude = A` (finite), `petals = ω` petals and radial width
    /// `sigma = σ > 0`, in dimension `dim ≥ 2` (small enough that a point
    /// can be allocated). The normaliser is computed by
    /// quadrature with 2048 nodes per petal, so at most 1024 petals are
    /// accepted (a few milliseconds of setup).
    pub fn new(
        dim: usize,
        radius: f64,
        amplitude: f64,
        petals: u32,
        sigma: f64,
    ) -> Result<Self, TargetError> {
        if dim < 2 {
            return Err(TargetError::InvalidParameter {
                name: "dim",
                reason: format!("the flower needs dimension ≥ 2, got {dim}"),
            });
        }
        check_point_dim(dim)?;
        check_positive("radius", radius)?;
        check_finite("amplitude", amplitude)?;
        check_positive("sigma", sigma)?;
        if petals > MAX_PETALS {
            return Err(TargetError::InvalidParameter {
                name: "petals",
                reason: format!("at most {MAX_PETALS} petals, got {petals}"),
            });
        }
        // Periodic trapezoidal rule: nodes per petal period far beyond what
        // the geometric convergence needs for any reasonable a(φ).
        let nodes = 2048 * petals.max(1) as usize;
        let (mut sum_a, mut sum_z) = (0.0, 0.0);
        for k in 0..nodes {
            let phi = TAU * k as f64 / nodes as f64;
            let a = (radius + amplitude * (petals as f64 * phi).cos()) / sigma;
            sum_a += a;
            sum_z += radial_mass(a);
        }
        let integral_z = TAU * sum_z / nodes as f64;
        let log_normaliser =
            (sigma * sigma * TAU.sqrt() * integral_z).ln() + 0.5 * (dim - 2) as f64 * LN_2PI;
        if !log_normaliser.is_finite() {
            // σ² or the radial integral under- or overflows: the log density
            // would be NaN or −∞ everywhere
            return Err(TargetError::InvalidParameter {
                name: "sigma",
                reason: format!(
                    "the flower's normaliser is not finite for radius {radius}, amplitude \
                     {amplitude} and sigma {sigma} (rescale the problem)"
                ),
            });
        }
        Ok(Self {
            dim,
            radius,
            amplitude,
            petals,
            sigma,
            log_normaliser,
            region_mass_factor: sum_a / sum_z,
            whole_norm: false,
            truncated_mass: 0.0,
        })
    }

    /// The ring of radius `radius` and width `sigma`: the flower with `A = 0`.
    pub fn ring(dim: usize, radius: f64, sigma: f64) -> Result<Self, TargetError> {
        Self::new(dim, radius, 0.0, 0, sigma)
    }

    /// The same flower as the KAMH code writes it:
    /// `π(x) ∝ exp(−(‖x‖ − c(φ))²/(2σ²)) · N(x₃:d; 0, I)`, with the norm of
    /// the whole vector where [`Flower::new`] has `‖x₁:₂‖` (the same density
    /// in `d = 2`; applying it twice changes nothing).
    ///
    /// In the coordinates `(φ, ρ = ‖x‖, x₃:d)` it is the plane flower's
    /// `(φ, ρ)` times `N(x₃:d; 0, I)`, restricted to `ρ ≥ ‖x₃:d‖`. Its
    /// normaliser is the plane flower's times the kept mass `1 − τ`, with
    /// `τ = ∫dφ ∫ v ϕ(v − a) S_{d−2}(σ²v²) dv / ∫ Z dφ` (`S_k` the χ²_k
    /// survival function), computed once by quadrature (a periodic
    /// trapezoidal rule in φ, Simpson's rule in v). For `F(10, 6, 6, 1)` in
    /// `d = 8`, `τ ≈ 3.0·10⁻³`; that cut is why the KAMH code's quantile
    /// check, which uses the plane flower's χ² thresholds, is off by up to
    /// 0.0022 per level (0.0014 on average over the levels 0.1, …, 0.9) even
    /// for exact draws of this density.
    ///
    /// Errors when the kept mass `1 − τ` is below
    /// [`Flower::MIN_WHOLE_NORM_MASS`] (in high dimension `‖x₃:d‖` is about
    /// `√(d − 2)` and almost never below the flower's radius): the
    /// normaliser would be dominated by the quadrature's error, and
    /// [`Target::sample_iid`], which keeps a draw of the plane flower with
    /// probability `1 − τ`, would all but hang.
    pub fn with_whole_norm(self) -> Result<Self, TargetError> {
        if self.whole_norm {
            return Ok(self);
        }
        let mut flower = Self {
            whole_norm: true,
            ..self
        };
        let sigma = flower.sigma;
        if let Some(extra) = flower.extra_chi_squared() {
            let cut = |a: f64| {
                let lo = (a - 10.0).max(0.0);
                let hi = (a + 10.0).max(lo);
                simpson(lo, hi, CORRECTION_INTERVALS, |v| {
                    v * normal_pdf(v - a) * extra.sf(sigma * sigma * v * v)
                })
            };
            flower.truncated_mass = flower.angle_average(cut) / flower.angle_average(radial_mass);
            let kept = 1.0 - flower.truncated_mass;
            if kept.is_nan() || kept < Self::MIN_WHOLE_NORM_MASS {
                return Err(TargetError::InvalidParameter {
                    name: "dim",
                    reason: format!(
                        "the whole-norm flower keeps only {kept:.3e} of the plane flower's \
                         mass in dimension {} (at least {:e} is needed for an accurate \
                         normaliser and exact sampling): use a radius well above \
                         √(d − 2) = {:.3}, or the plane flower",
                        flower.dim,
                        Self::MIN_WHOLE_NORM_MASS,
                        ((flower.dim - 2) as f64).sqrt()
                    ),
                });
            }
            flower.log_normaliser += kept.ln();
        }
        Ok(flower)
    }

    /// The radial centre `c(φ) = r₀ + A cos(ωφ)` and its derivative in φ.
    fn centre(&self, phi: f64) -> (f64, f64) {
        let w = self.petals as f64;
        (
            self.radius + self.amplitude * (w * phi).cos(),
            -self.amplitude * w * (w * phi).sin(),
        )
    }

    /// `ρ`: the norm of the first two coordinates, or of the whole vector.
    fn rho(&self, x: &[f64]) -> f64 {
        if self.whole_norm {
            x.iter().map(|v| v * v).sum::<f64>().sqrt()
        } else {
            x[0].hypot(x[1])
        }
    }

    /// `(ρ, u = (ρ − c(φ))/σ, c'(φ))` for a point of the right length.
    fn polar_residual(&self, x: &[f64]) -> (f64, f64, f64) {
        let rho = self.rho(x);
        let (c, dc) = self.centre(x[1].atan2(x[0]));
        (rho, (rho - c) / self.sigma, dc)
    }

    /// The largest threshold `t` for which the χ² identity holds:
    /// `((r₀ − |A|)/σ)²`.
    fn max_exact_threshold(&self) -> f64 {
        let a_min = (self.radius - self.amplitude.abs()) / self.sigma;
        if a_min > 0.0 { a_min * a_min } else { 0.0 }
    }

    /// The law of `‖x₃:d‖²`, χ²_{d−2}; `None` in `d = 2`.
    fn extra_chi_squared(&self) -> Option<ChiSquared> {
        (self.dim > 2).then(|| ChiSquared::new((self.dim - 2) as f64).expect("d − 2 ≥ 1"))
    }

    /// The average of `g(a(φ))` over φ uniform on `[0, 2π)`, by the periodic
    /// trapezoidal rule in `θ = ωφ` (for ω ≥ 1 the average over θ is the
    /// same).
    fn angle_average(&self, g: impl Fn(f64) -> f64) -> f64 {
        if self.petals == 0 {
            return g((self.radius + self.amplitude) / self.sigma);
        }
        (0..CORRECTION_ANGLES)
            .map(|k| {
                let theta = TAU * k as f64 / CORRECTION_ANGLES as f64;
                g((self.radius + self.amplitude * theta.cos()) / self.sigma)
            })
            .sum::<f64>()
            / CORRECTION_ANGLES as f64
    }

    /// For the whole-norm flower, the plane flower's mass of
    /// `{u² + ‖x₃:d‖² ≤ t, ‖x₃:d‖ > ρ}`: the part of its region that the cut
    /// removes. Given φ, with `S = ‖x₃:d‖²`, that part is
    /// `σ²(a + u)² < S ≤ t − u²`, non-empty for `u` between the roots of
    /// `(1 + σ²)u² + 2σ²a·u + σ²a² − t`.
    /// `radial_mass` is the angular average of `Z(a(φ))`, the normaliser of
    /// the plane flower's mass in these units.
    fn region_cut(&self, extra: &ChiSquared, t: f64, radial_mass: f64) -> f64 {
        let s2 = self.sigma * self.sigma;
        let cut = |a: f64| {
            let disc = (1.0 + s2) * t - s2 * a * a;
            if disc <= 0.0 {
                return 0.0;
            }
            let lo = ((-s2 * a - disc.sqrt()) / (1.0 + s2)).max(-a);
            let hi = (-s2 * a + disc.sqrt()) / (1.0 + s2);
            if hi <= lo {
                return 0.0;
            }
            simpson(lo, hi, CORRECTION_INTERVALS, |u| {
                let kept = extra.cdf((t - u * u).max(0.0)) - extra.cdf(s2 * (a + u) * (a + u));
                (a + u) * normal_pdf(u) * kept.max(0.0)
            })
        };
        self.angle_average(cut) / radial_mass
    }

    /// The plane flower's polar draw `(ρ, φ)` (see [`Target::sample_iid`]).
    fn sample_polar(&self, rng: &mut dyn Rng) -> (f64, f64) {
        let rayleigh_mass = self.sigma * (2.0 / PI).sqrt();
        let max_phi_weight = self.radius + self.amplitude.abs() + rayleigh_mass;
        loop {
            let phi = rng.random_range(-PI..PI);
            let (c, _) = self.centre(phi);
            let c_plus = c.max(0.0);
            if rng.random::<f64>() * max_phi_weight > c_plus + rayleigh_mass {
                continue;
            }
            let rho = if rng.random::<f64>() * (c_plus + rayleigh_mass) < c_plus {
                c + self.sigma * rng.sample::<f64, _>(rand_distr::StandardNormal)
            } else {
                // R = √(−2 ln U) has density r ϕ(r)·√(2π) on r > 0.
                let r = (-2.0 * (1.0 - rng.random::<f64>()).ln()).sqrt();
                if rng.random::<bool>() {
                    c + self.sigma * r
                } else {
                    c - self.sigma * r
                }
            };
            if rho > 0.0 && rng.random::<f64>() * (c_plus + (rho - c).abs()) < rho {
                return (rho, phi);
            }
        }
    }
}

impl Target for Flower {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Exactly normalised; `NaN` when `x` does not have length `dim()`.
    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        let (_, u, _) = self.polar_residual(x);
        -0.5 * (u * u + x[2..].iter().map(|v| v * v).sum::<f64>()) - self.log_normaliser
    }

    /// Errors with [`TargetError::Unsupported`] at `x₁ = x₂ = 0`, where the
    /// angle and hence the density are not differentiable.
    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, x.len())?;
        check_dim(self.dim, out.len())?;
        let (rho, u, dc) = self.polar_residual(x);
        // ∂ρ/∂x = x/ρ (the first two coordinates only, for the plane
        // flower), ∂φ/∂x = (−x₂, x₁)/r² with r = ‖x₁:₂‖.
        let r = x[0].hypot(x[1]);
        let r2 = r * r;
        if r2 == 0.0 {
            return Err(TargetError::Unsupported(
                "the gradient where x₁ = x₂ = 0 (the density is not differentiable there)",
            ));
        }
        let s = -u / self.sigma;
        out[0] = s * (x[0] / rho + dc * x[1] / r2);
        out[1] = s * (x[1] / rho - dc * x[0] / r2);
        let radial = if self.whole_norm { s / rho } else { 0.0 };
        for (o, v) in out[2..].iter_mut().zip(&x[2..]) {
            *o = (radial - 1.0) * v;
        }
        Ok(())
    }

    /// Zero: the density is invariant under the rotation by 2π/ω of the
    /// first two coordinates (by any angle for ω = 0), and the others are
    /// centred.
    fn exact_mean(&self, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        out.fill(0.0);
        Ok(())
    }

    /// Exact rejection sampler. In polar coordinates the target is
    /// `∝ ρ N(ρ; c(φ), σ²)` on `ρ > 0`, and `ρ ≤ c⁺ + |ρ − c|`, so the envelope
    /// `(c⁺(φ) + |ρ − c(φ)|) N(ρ; c(φ), σ²)` dominates it. Its φ-marginal is
    /// `∝ c⁺(φ) + σ√(2/π)` (drawn by rejection from the uniform), and given φ
    /// it is the mixture of `N(c, σ²)` (weight `c⁺`) and `c ± σR` with `R`
    /// Rayleigh (weight `σ√(2/π)`). A draw is accepted with probability
    /// `ρ⁺/(c⁺ + |ρ − c|) ≤ 1`: exact, with no truncated tail. For the
    /// whole-norm flower, `(φ, ρ)` and `x₃:d` are drawn so until
    /// `‖x₃:d‖ ≤ ρ` (the cut, see [`Flower::with_whole_norm`]), and the first two
    /// coordinates get the radius `√(ρ² − ‖x₃:d‖²)`.
    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        loop {
            let (rho, phi) = self.sample_polar(rng);
            fill_standard_normal(rng, &mut out[2..]);
            let radius = if self.whole_norm {
                let rest: f64 = out[2..].iter().map(|v| v * v).sum();
                if rest > rho * rho {
                    continue;
                }
                (rho * rho - rest).sqrt()
            } else {
                rho
            };
            out[0] = radius * phi.cos();
            out[1] = radius * phi.sin();
            return Ok(());
        }
    }
}

impl QuantileRegions for Flower {
    /// `u² + ‖x₃:d‖²` with `u = (ρ − c(φ))/σ`.
    fn region_statistic(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        let (_, u, _) = self.polar_residual(x);
        u * u + x[2..].iter().map(|v| v * v).sum::<f64>()
    }

    /// `χ²_{d−1}⁻¹(q/κ)`; errors when `q/κ ≥ 1` or when the threshold
    /// reaches `((r₀ − |A|)/σ)²`, beyond which the region's mass is not
    /// given by the χ² identity. For the whole-norm flower, the region's
    /// mass is `(κ F_{χ²_{d−1}}(t) − C(t))/(1 − τ)`, where `C(t)` is the part
    /// of the plane flower's region that the cut removes (by quadrature,
    /// like τ), solved for `t` by the Illinois method between the bounds
    /// that `0 ≤ C(t) ≤ τ` give.
    fn region_threshold(&self, q: f64) -> Result<f64, TargetError> {
        chi_squared_quantile(self.dim - 1, q)?;
        let tau = self.truncated_mass;
        let t = match self.extra_chi_squared().filter(|_| self.whole_norm) {
            None => chi_squared_quantile(self.dim - 1, q / self.region_mass_factor)?,
            Some(extra) => {
                let kept = q * (1.0 - tau);
                let plane = ChiSquared::new((self.dim - 1) as f64).expect("d − 1 ≥ 1");
                let mass = self.angle_average(radial_mass);
                let excess = |t: f64| {
                    self.region_mass_factor * plane.cdf(t) - self.region_cut(&extra, t, mass) - kept
                };
                let lo = chi_squared_quantile(self.dim - 1, kept / self.region_mass_factor)?;
                let hi = match chi_squared_quantile(
                    self.dim - 1,
                    (kept + tau) / self.region_mass_factor,
                ) {
                    Ok(hi) => hi.min(self.max_exact_threshold()),
                    Err(_) => self.max_exact_threshold(),
                };
                illinois_root(excess, lo, hi)
            }
        };
        if t >= self.max_exact_threshold() {
            return Err(TargetError::InvalidParameter {
                name: "q",
                reason: format!(
                    "the flower's quantile region at level {q} is not exact: it needs \
                     r₀ − |A| > σ·√χ²_{{d−1}}(q) = {}",
                    self.sigma * t.sqrt()
                ),
            });
        }
        Ok(t)
    }
}

/// The root of the increasing `f` in `[lo, hi]` by the Illinois variant of
/// the false-position method (to a relative width of 10⁻¹³); `hi` when
/// `f(hi) < 0`.
fn illinois_root(f: impl Fn(f64) -> f64, mut lo: f64, mut hi: f64) -> f64 {
    let (mut f_lo, mut f_hi) = (f(lo), f(hi));
    if f_lo >= 0.0 {
        return lo;
    }
    if f_hi <= 0.0 {
        return hi;
    }
    let mut side = 0;
    for _ in 0..100 {
        if hi - lo <= 1e-13 * hi {
            break;
        }
        let t = (lo * f_hi - hi * f_lo) / (f_hi - f_lo);
        let f_t = f(t);
        if f_t == 0.0 {
            return t;
        }
        if f_t < 0.0 {
            (lo, f_lo) = (t, f_t);
            if side == -1 {
                f_hi *= 0.5;
            }
            side = -1;
        } else {
            (hi, f_hi) = (t, f_t);
            if side == 1 {
                f_lo *= 0.5;
            }
            side = 1;
        }
    }
    0.5 * (lo + hi)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        assert_gradient_matches_finite_differences, assert_within_mc_error, draw_iid, midpoint_2d,
        rng,
    };

    /// A σ whose normaliser under- or overflows is refused: the flower was
    /// built, and its log density was NaN (σ = 1e-200) or −∞ (σ = 1e200)
    /// everywhere.
    #[test]
    fn sigma_with_a_non_finite_normaliser_is_refused() {
        for sigma in [1e-200, 1e200] {
            assert!(
                Flower::new(2, 10.0, 6.0, 6, sigma).is_err(),
                "sigma {sigma} accepted"
            );
        }
        let flower = Flower::new(2, 10.0, 6.0, 6, 1e-3).unwrap();
        assert!(
            flower
                .log_density(&[10.0 + 6.0, 0.0], &mut rng(1))
                .is_finite()
        );
    }

    /// Cartesian midpoint quadrature over the box `±(r₀ + |A| + 10σ)`: the
    /// neglected tail is < e⁻⁵⁰. The integrand is smooth except at the
    /// origin, where the density is ≤ e^{−a_min²/2}; with n² nodes the error
    /// is far below the asserted tolerances.
    fn integral_2d(flower: &Flower, n: usize, f: impl Fn(f64, f64) -> f64) -> f64 {
        let mut r = rng(0);
        let half = flower.radius + flower.amplitude.abs() + 10.0 * flower.sigma;
        midpoint_2d(
            (-half, half, n),
            |_| (-half, half),
            n,
            |x, y| f(x, y) * flower.log_density(&[x, y], &mut r).exp(),
        )
    }

    /// The quadrature of the normaliser grows with the petals: beyond the
    /// bound they are an error, not an endless setup.
    #[test]
    fn too_many_petals_are_rejected() {
        for petals in [MAX_PETALS + 1, u32::MAX] {
            let err = Flower::new(2, 10.0, 6.0, petals, 1.0).unwrap_err();
            assert!(err.to_string().contains("petals"), "{err}");
        }
        assert!(Flower::new(2, 10.0, 6.0, MAX_PETALS, 1.0).is_ok());
    }

    #[test]
    fn rejects_invalid_parameters() {
        assert!(Flower::new(1, 10.0, 6.0, 6, 1.0).is_err());
        for dim in [usize::MAX, 1 << 61] {
            let message = Flower::new(dim, 10.0, 6.0, 6, 1.0).unwrap_err().to_string();
            assert!(
                message.contains("`dim`") && message.contains("allocated"),
                "{message}"
            );
            assert!(Flower::ring(dim, 10.0, 1.0).is_err());
        }
        assert!(Flower::new(2, 0.0, 6.0, 6, 1.0).is_err());
        assert!(Flower::new(2, 10.0, f64::NAN, 6, 1.0).is_err());
        assert!(Flower::new(2, 10.0, 6.0, 6, 0.0).is_err());
        let flower = Flower::new(3, 10.0, 6.0, 6, 1.0).unwrap();
        assert!(flower.sample_iid(&mut rng(0), &mut [0.0; 2]).is_err());
        assert!(flower.grad_log_density(&[0.0; 3], &mut [0.0; 3]).is_err());
        assert!(flower.log_density(&[0.0; 2], &mut rng(0)).is_nan());
    }

    #[test]
    fn density_is_normalised_in_two_dimensions() {
        for (r0, a, w, s) in [(10.0, 6.0, 6, 1.0), (3.0, 1.0, 3, 0.5), (1.0, 2.0, 2, 1.0)] {
            let flower = Flower::new(2, r0, a, w, s).unwrap();
            let mass = integral_2d(&flower, 1200, |_, _| 1.0);
            assert!((mass - 1.0).abs() < 1e-5, "F({r0}, {a}, {w}, {s}): {mass}");
        }
        let ring = Flower::ring(2, 3.5, 0.05f64.sqrt()).unwrap();
        let mass = integral_2d(&ring, 1200, |_, _| 1.0);
        assert!((mass - 1.0).abs() < 1e-5, "ring: {mass}");
    }

    #[test]
    fn extra_coordinates_are_standard_normal_factors() {
        let f2 = Flower::new(2, 10.0, 6.0, 6, 1.0).unwrap();
        let f3 = Flower::new(3, 10.0, 6.0, 6, 1.0).unwrap();
        let mut r = rng(0);
        let expected = f2.log_density(&[4.0, 7.0], &mut r) - 0.5 * (0.49 + LN_2PI);
        assert!((f3.log_density(&[4.0, 7.0, 0.7], &mut r) - expected).abs() < 1e-12);
    }

    /// The region masses integrated from the density and the statistic
    /// (independent of the χ² derivation and the sampler). The indicator
    /// limits the midpoint rule to O(h) at the boundary; with h = 0.01σ the
    /// error is ≲ 10⁻³.
    #[test]
    fn quantile_regions_have_exact_mass_by_quadrature() {
        let flower = Flower::new(2, 3.0, 1.0, 3, 0.25).unwrap();
        let levels = [0.1, 0.5, 0.9];
        let thresholds = levels.map(|q| flower.region_threshold(q).unwrap());
        // One midpoint pass over the box of `integral_2d`, accumulating the
        // three region masses together.
        let (n, half) = (2000, 3.0 + 1.0 + 10.0 * 0.25);
        let h = 2.0 * half / n as f64;
        let mut r = rng(0);
        let mut masses = [0.0; 3];
        for i in 0..n {
            for j in 0..n {
                let x = [-half + (i as f64 + 0.5) * h, -half + (j as f64 + 0.5) * h];
                let p = flower.log_density(&x, &mut r).exp() * h * h;
                let s = flower.region_statistic(&x);
                for (m, t) in masses.iter_mut().zip(&thresholds) {
                    if s <= *t {
                        *m += p;
                    }
                }
            }
        }
        for (q, mass) in levels.iter().zip(masses) {
            assert!((mass - q).abs() < 1e-3, "q = {q}: mass {mass}");
        }
    }

    #[test]
    fn invalid_quantile_levels_are_reported() {
        let flower = Flower::new(8, 10.0, 6.0, 6, 1.0).unwrap();
        // √χ²₇(0.9) = 3.47 < (10 − 6)/1 = 4: exact.
        assert!(flower.region_threshold(0.9).is_ok());
        // √χ²₇(0.999) = 4.93 > 4: the region is cut by the origin.
        assert!(flower.region_threshold(0.999).is_err());
        assert!(flower.region_threshold(0.0).is_err());
        assert!(flower.region_threshold(f64::NAN).is_err());
        // For F(10, 6, 6, 1), 1 − κ ≈ 5.5·10⁻⁸ (see the type's docs).
        let kappa = flower.region_mass_factor;
        assert!((1.0 - kappa) > 1e-8 && (1.0 - kappa) < 1e-7, "κ = {kappa}");
    }

    /// Averages of `stats` over `n` iid draws against quadrature of the
    /// density (5 empirical standard errors; the quadrature error, limited
    /// by the kink of the density at the origin to O(h²), is far smaller).
    fn assert_sampler_matches_quadrature(
        flower: &Flower,
        stats: &[&dyn Fn(f64, f64) -> f64],
        n: usize,
        seed: u64,
    ) {
        let draws = draw_iid(flower, n, seed);
        for (k, f) in stats.iter().enumerate() {
            let exact = integral_2d(flower, 1200, f);
            let values: Vec<f64> = draws.chunks(2).map(|p| f(p[0], p[1])).collect();
            let mean = values.iter().sum::<f64>() / n as f64;
            let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert_within_mc_error(&format!("statistic {k}"), mean, exact, sd, n);
        }
    }

    /// The sampler against the density: E[ρ²], E[cos(ωφ)] and E[x].
    #[test]
    fn iid_sampler_matches_density_moments() {
        let flower = Flower::new(2, 3.0, 1.5, 3, 0.5).unwrap();
        assert_sampler_matches_quadrature(
            &flower,
            &[
                &|x, y| x * x + y * y,
                &|x, y| (3.0 * y.atan2(x)).cos(),
                &|x, _| x,
            ],
            100_000,
            5,
        );
    }

    /// With r₀ < |A| the radial centre c(φ) is negative for some angles,
    /// which the envelope handles through c⁺.
    #[test]
    fn iid_sampler_handles_negative_radial_centres() {
        let flower = Flower::new(2, 1.0, 2.0, 2, 1.0).unwrap();
        assert_sampler_matches_quadrature(
            &flower,
            &[&|x, y| x * x + y * y, &|x, y| (2.0 * y.atan2(x)).cos()],
            50_000,
            6,
        );
    }

    /// The exact mean (zero) against quadrature of the density. The kink of
    /// the density at the origin (where it is ≲ 10⁻³ here) limits the
    /// midpoint rule to O(h²·10⁻³) ≈ 10⁻⁸.
    #[test]
    fn exact_mean_matches_quadrature() {
        let flower = Flower::new(2, 3.0, 1.5, 3, 0.5).unwrap();
        let mut mean = [f64::NAN; 2];
        flower.exact_mean(&mut mean).unwrap();
        let coords: [&dyn Fn(f64, f64) -> f64; 2] = [&|x, _| x, &|_, y| y];
        for (m, f) in mean.iter().zip(coords) {
            let exact = integral_2d(&flower, 1200, f);
            assert!((exact - m).abs() < 1e-7, "quadrature mean {exact}");
        }
    }

    /// Coverage of iid draws of F(10, 6, 6, 1) in d = 8 at every KAMH level:
    /// indicator averages with sd √(q(1−q)).
    #[test]
    fn iid_draws_cover_quantile_regions_at_their_level() {
        let (d, n) = (8, 50_000);
        let flower = Flower::new(d, 10.0, 6.0, 6, 1.0).unwrap();
        let draws = draw_iid(&flower, n, 13);
        for k in 1..=9 {
            let q = k as f64 / 10.0;
            let t = flower.region_threshold(q).unwrap();
            let inside = draws
                .chunks(d)
                .filter(|x| flower.region_statistic(x) <= t)
                .count();
            let sd = (q * (1.0 - q)).sqrt();
            assert_within_mc_error("coverage", inside as f64 / n as f64, q, sd, n);
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let flower = Flower::new(3, 10.0, 6.0, 6, 1.0).unwrap();
        let mut r = rng(3);
        let mut x = [0.0; 3];
        for _ in 0..20 {
            flower.sample_iid(&mut r, &mut x).unwrap();
            assert_gradient_matches_finite_differences(&flower, &x);
        }
        assert_gradient_matches_finite_differences(&flower, &[-0.3, 0.2, 1.0]);
    }

    /// A statistic `f(x)` of a point.
    type PointStatistic = dyn Fn(&[f64]) -> f64;

    /// Midpoint quadrature of `f(x)·π(x)` for a whole-norm flower in `d = 3`,
    /// in the coordinates `(φ, r = ‖x₁:₂‖, x₃)`, where `dx = r dr dφ dx₃`;
    /// independent of the cut's χ² formula. The statistics must be even in
    /// `x₃` (as π is), which is integrated over `[0, 7]` and doubled. The box
    /// `r ≤ r₀ + |A| + 10σ`, `|x₃| ≤ 7` loses < e⁻²⁴; the integrand is
    /// periodic and analytic in φ (geometric convergence of 32 nodes), and
    /// the midpoint steps in r and x₃ keep the error below 10⁻⁵.
    fn integral_whole_3d(flower: &Flower, fs: &[&PointStatistic]) -> Vec<f64> {
        let mut r = rng(0);
        let (n_phi, n_r, n_y) = (32, 750, 700);
        let r_max = flower.radius + flower.amplitude.abs() + 10.0 * flower.sigma;
        let (h_phi, h_r, h_y) = (TAU / n_phi as f64, r_max / n_r as f64, 7.0 / n_y as f64);
        let mut totals = vec![0.0; fs.len()];
        for i in 0..n_phi {
            let phi = (i as f64 + 0.5) * h_phi;
            for j in 0..n_r {
                let rad = (j as f64 + 0.5) * h_r;
                for k in 0..n_y {
                    let x = [
                        rad * phi.cos(),
                        rad * phi.sin(),
                        -7.0 + (k as f64 + 0.5) * h_y,
                    ];
                    let w = rad * flower.log_density(&x, &mut r).exp();
                    for (t, f) in totals.iter_mut().zip(fs) {
                        *t += w * f(&x);
                    }
                }
            }
        }
        totals.iter().map(|t| 2.0 * t * h_phi * h_r * h_y).collect()
    }

    /// The whole-norm flower in d = 3 with a large cut (τ ≈ 6%): its
    /// normaliser, and its exact sampler's E[x₁² + x₂²], E[x₃²] and
    /// E[cos(ωφ)] against quadrature (5 standard errors for the draws), and
    /// its exact mean (zero) against the draws' means.
    #[test]
    fn whole_norm_density_is_normalised_and_sampled_exactly() {
        let flower = Flower::new(3, 2.0, 0.5, 2, 0.5)
            .unwrap()
            .with_whole_norm()
            .unwrap();
        assert!(
            flower.truncated_mass > 0.01,
            "τ = {}",
            flower.truncated_mass
        );
        let stats: [&PointStatistic; 4] = [
            &|_| 1.0,
            &|x| x[0] * x[0] + x[1] * x[1],
            &|x| x[2] * x[2],
            &|x| (2.0 * x[1].atan2(x[0])).cos(),
        ];
        let exact = integral_whole_3d(&flower, &stats);
        assert!((exact[0] - 1.0).abs() < 1e-5, "mass {}", exact[0]);
        let n = 100_000;
        let draws = draw_iid(&flower, n, 17);
        let moments = |f: &PointStatistic| {
            let values: Vec<f64> = draws.chunks(3).map(f).collect();
            let m = values.iter().sum::<f64>() / n as f64;
            let sd = (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
            (m, sd)
        };
        for (k, f) in stats.iter().enumerate().skip(1) {
            let (m, sd) = moments(f);
            assert_within_mc_error(&format!("statistic {k}"), m, exact[k], sd, n);
        }
        let mut mean = [f64::NAN; 3];
        flower.exact_mean(&mut mean).unwrap();
        for (i, exact) in mean.iter().enumerate() {
            let (m, sd) = moments(&move |x: &[f64]| x[i]);
            assert_within_mc_error(&format!("mean {i}"), m, *exact, sd, n);
        }
    }

    /// τ for the KAMH code's F(10, 6, 6, 1) in d = 8 against the fraction of
    /// the plane flower's exact draws with ‖x₃:₈‖ > ρ (5 standard errors of
    /// a proportion).
    #[test]
    fn whole_norm_cut_matches_plane_draws() {
        let (d, n) = (8, 200_000);
        let plane = Flower::new(d, 10.0, 6.0, 6, 1.0).unwrap();
        let whole = Flower::new(d, 10.0, 6.0, 6, 1.0)
            .unwrap()
            .with_whole_norm()
            .unwrap();
        let tau = whole.truncated_mass;
        assert!(tau > 2e-3 && tau < 4e-3, "τ = {tau}");
        let cut = draw_iid(&plane, n, 19)
            .chunks(d)
            .filter(|x| x[2..].iter().map(|v| v * v).sum::<f64>() > x[0].hypot(x[1]).powi(2))
            .count();
        assert_within_mc_error(
            "cut",
            cut as f64 / n as f64,
            tau,
            (tau * (1.0 - tau)).sqrt(),
            n,
        );
    }

    /// Coverage of the whole-norm flower's exact draws at every level, in
    /// d = 4 with a large cut; the plane flower's thresholds miss it, so
    /// the check can fail.
    #[test]
    fn whole_norm_quantile_regions_have_their_mass() {
        let (d, n) = (4, 200_000);
        let whole = Flower::new(d, 2.0, 0.5, 2, 0.5)
            .unwrap()
            .with_whole_norm()
            .unwrap();
        let plane = Flower::new(d, 2.0, 0.5, 2, 0.5).unwrap();
        let statistic: Vec<f64> = draw_iid(&whole, n, 23)
            .chunks(d)
            .map(|x| whole.region_statistic(x))
            .collect();
        let coverage = |t: f64| statistic.iter().filter(|&&s| s <= t).count() as f64 / n as f64;
        let mut plane_miss: f64 = 0.0;
        for k in 1..=9 {
            let q = k as f64 / 10.0;
            let sd = (q * (1.0 - q)).sqrt();
            assert_within_mc_error(
                "coverage",
                coverage(whole.region_threshold(q).unwrap()),
                q,
                sd,
                n,
            );
            let miss = (coverage(plane.region_threshold(q).unwrap()) - q).abs();
            plane_miss = plane_miss.max(miss / (sd / (n as f64).sqrt()));
        }
        assert!(
            plane_miss > 10.0,
            "plane thresholds miss by {plane_miss} standard errors"
        );
    }

    /// In high dimension `‖x₃:d‖ ≈ √(d − 2)` almost never falls below the
    /// radius, so the whole-norm flower keeps almost none of the plane
    /// flower's mass: its construction errors instead of building a density
    /// whose normaliser is quadrature noise and whose exact sampler loops
    /// (practically) forever. Where the kept mass is large it is built.
    #[test]
    fn whole_norm_flower_with_almost_no_mass_is_refused() {
        let message = Flower::new(400, 3.0, 1.0, 6, 1.0)
            .unwrap()
            .with_whole_norm()
            .unwrap_err()
            .to_string();
        assert!(
            message.contains("`dim`") && message.contains("plane flower"),
            "{message}"
        );
        for d in [8, 50] {
            let whole = Flower::new(d, 10.0, 6.0, 6, 1.0)
                .unwrap()
                .with_whole_norm()
                .unwrap();
            assert!(
                whole.truncated_mass < 0.5,
                "d = {d}: {}",
                whole.truncated_mass
            );
            whole.sample_iid(&mut rng(0), &mut vec![0.0; d]).unwrap();
        }
    }

    #[test]
    fn whole_norm_matches_plane_in_two_dimensions_and_has_its_gradient() {
        let plane = Flower::new(2, 10.0, 6.0, 6, 1.0).unwrap();
        let whole = Flower::new(2, 10.0, 6.0, 6, 1.0)
            .unwrap()
            .with_whole_norm()
            .unwrap();
        let mut r = rng(0);
        assert_eq!(
            plane.log_density(&[4.0, 7.0], &mut r),
            whole.log_density(&[4.0, 7.0], &mut r)
        );
        let whole = Flower::new(4, 10.0, 6.0, 6, 1.0)
            .unwrap()
            .with_whole_norm()
            .unwrap();
        let mut x = [0.0; 4];
        for _ in 0..20 {
            whole.sample_iid(&mut r, &mut x).unwrap();
            assert_gradient_matches_finite_differences(&whole, &x);
        }
    }
}
