//! The flower (and ring) target of KAMH, with the square the paper's formula
//! lacks.

use crate::quantile::chi_squared_quantile;
use crate::util::{LN_2PI, check_dim, check_finite, check_positive, fill_standard_normal};
use crate::{QuantileRegions, Target, TargetError};
use kameleon_core::normal_cdf;
use rand::{Rng, RngExt};
use std::f64::consts::{PI, TAU};

/// The flower `F(r₀, A, ω, σ)` in dimension `d ≥ 2`:
/// `π(x) ∝ exp(−(ρ − c(φ))²/(2σ²)) · N(x₃:d; 0, I)` with `ρ = ‖x₁:₂‖`,
/// `φ = atan2(x₂, x₁)` and `c(φ) = r₀ + A cos(ωφ)` (the square is missing in
/// the KAMH paper; the KAMH code has it). The ring is the flower with `A = 0`
/// ([`Flower::ring`]). KAMH uses `F(10, 6, 6, 1)` in `d = 8`.
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
}

/// Standard normal density.
fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (TAU).sqrt()
}

impl Flower {
    /// The flower with base radius `radius = r₀ > 0`, petal amplitude
    /// `amplitude = A` (finite), `petals = ω` petals and radial width
    /// `sigma = σ > 0`, in dimension `dim ≥ 2`.
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
        check_positive("radius", radius)?;
        check_finite("amplitude", amplitude)?;
        check_positive("sigma", sigma)?;
        // Periodic trapezoidal rule: nodes per petal period far beyond what
        // the geometric convergence needs for any reasonable a(φ).
        let nodes = 2048 * petals.max(1) as usize;
        let (mut sum_a, mut sum_z) = (0.0, 0.0);
        for k in 0..nodes {
            let phi = TAU * k as f64 / nodes as f64;
            let a = (radius + amplitude * (petals as f64 * phi).cos()) / sigma;
            sum_a += a;
            sum_z += a * normal_cdf(a) + normal_pdf(a);
        }
        let integral_z = TAU * sum_z / nodes as f64;
        let log_normaliser =
            (sigma * sigma * TAU.sqrt() * integral_z).ln() + 0.5 * (dim - 2) as f64 * LN_2PI;
        Ok(Self {
            dim,
            radius,
            amplitude,
            petals,
            sigma,
            log_normaliser,
            region_mass_factor: sum_a / sum_z,
        })
    }

    /// The ring of radius `radius` and width `sigma`: the flower with `A = 0`.
    pub fn ring(dim: usize, radius: f64, sigma: f64) -> Result<Self, TargetError> {
        Self::new(dim, radius, 0.0, 0, sigma)
    }

    /// The radial centre `c(φ) = r₀ + A cos(ωφ)` and its derivative in φ.
    fn centre(&self, phi: f64) -> (f64, f64) {
        let w = self.petals as f64;
        (
            self.radius + self.amplitude * (w * phi).cos(),
            -self.amplitude * w * (w * phi).sin(),
        )
    }

    /// `(ρ, u = (ρ − c(φ))/σ, c'(φ))` for a point of the right length.
    fn polar_residual(&self, x: &[f64]) -> (f64, f64, f64) {
        let rho = x[0].hypot(x[1]);
        let (c, dc) = self.centre(x[1].atan2(x[0]));
        (rho, (rho - c) / self.sigma, dc)
    }

    /// The largest threshold `t` for which the χ² identity holds:
    /// `((r₀ − |A|)/σ)²`.
    fn max_exact_threshold(&self) -> f64 {
        let a_min = (self.radius - self.amplitude.abs()) / self.sigma;
        if a_min > 0.0 { a_min * a_min } else { 0.0 }
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
        if rho == 0.0 {
            return Err(TargetError::Unsupported(
                "the gradient where x₁ = x₂ = 0 (the density is not differentiable there)",
            ));
        }
        // ∂ρ/∂x = (x₁, x₂)/ρ, ∂φ/∂x = (−x₂, x₁)/ρ².
        let s = -u / self.sigma;
        let rho2 = rho * rho;
        out[0] = s * (x[0] / rho + dc * x[1] / rho2);
        out[1] = s * (x[1] / rho - dc * x[0] / rho2);
        for (o, v) in out[2..].iter_mut().zip(&x[2..]) {
            *o = -v;
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
    /// `ρ⁺/(c⁺ + |ρ − c|) ≤ 1`: exact, with no truncated tail.
    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        let rayleigh_mass = self.sigma * (2.0 / PI).sqrt();
        let max_phi_weight = self.radius + self.amplitude.abs() + rayleigh_mass;
        let (rho, phi) = loop {
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
                break (rho, phi);
            }
        };
        out[0] = rho * phi.cos();
        out[1] = rho * phi.sin();
        fill_standard_normal(rng, &mut out[2..]);
        Ok(())
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
    /// given by the χ² identity.
    fn region_threshold(&self, q: f64) -> Result<f64, TargetError> {
        chi_squared_quantile(self.dim - 1, q)?;
        let t = chi_squared_quantile(self.dim - 1, q / self.region_mass_factor)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        assert_gradient_matches_finite_differences, assert_within_mc_error, draw_iid, midpoint_2d,
        rng,
    };

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

    #[test]
    fn rejects_invalid_parameters() {
        assert!(Flower::new(1, 10.0, 6.0, 6, 1.0).is_err());
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
}
