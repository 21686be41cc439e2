//! The banana-shaped target of Haario et al. (1999), as used by KAMH and KMC.

use crate::quantile::chi_squared_quantile;
use crate::util::{
    LN_2PI, check_dim, check_finite, check_point_dim, check_positive, fill_standard_normal,
};
use crate::{QuantileRegions, Target, TargetError};
use rand::Rng;

/// The banana `B(b, v)` in dimension `d ≥ 2`: `y₁ ~ N(0, v)`,
/// `y₂ | y₁ ~ N(b(y₁² − v), 1)`, `y₃, …, y_d ~ N(0, 1)` independently.
///
/// The map `T(y) = (y₁/√v, y₂ − b(y₁² − v), y₃, …, y_d)` sends `B(b, v)` to
/// `N(0, I_d)` (the shear has unit Jacobian), so
/// [`Target::log_density`] is the exactly normalised
/// `−½ d log 2π − ½ log v − ½‖T(y)‖²`, [`Target::sample_iid`] is exact, and
/// the quantile regions `{‖T(y)‖² ≤ χ²_d⁻¹(q)}` have mass exactly `q`.
/// KAMH uses `B(0.03, 100)` ("moderately twisted") and `B(0.1, 100)`
/// ("strongly twisted") in `d = 8`.
#[derive(Debug, Clone, PartialEq)]
pub struct Banana {
    dim: usize,
    bananicity: f64,
    variance: f64,
}

impl Banana {
    /// The banana with twist `bananicity = b` (any finite value; 0 gives a
    /// Gaussian) and first-coordinate variance `variance = v > 0` in
    /// dimension `dim ≥ 2` (small enough that a point can be allocated).
    pub fn new(dim: usize, bananicity: f64, variance: f64) -> Result<Self, TargetError> {
        if dim < 2 {
            return Err(TargetError::InvalidParameter {
                name: "dim",
                reason: format!("the banana needs dimension ≥ 2, got {dim}"),
            });
        }
        check_point_dim(dim)?;
        check_finite("bananicity", bananicity)?;
        check_positive("variance", variance)?;
        Ok(Self {
            dim,
            bananicity,
            variance,
        })
    }

    /// The twist `b`.
    pub fn bananicity(&self) -> f64 {
        self.bananicity
    }

    /// The variance `v` of the first coordinate.
    pub fn variance(&self) -> f64 {
        self.variance
    }

    /// The twist `b(y₁² − v)` of the second coordinate. Where `y₁²`
    /// overflows it is formed as `(b y₁) y₁ − b v`, finite where the twist is
    /// (0 for `b = 0`, where `0 · ∞` would be NaN).
    fn twist(&self, y1: f64) -> f64 {
        let square = y1 * y1;
        if square.is_finite() {
            self.bananicity * (square - self.variance)
        } else {
            (self.bananicity * y1) * y1 - self.bananicity * self.variance
        }
    }

    /// The untwisting residual of the second coordinate, `y₂ − b(y₁² − v)`.
    fn residual(&self, y: &[f64]) -> f64 {
        y[1] - self.twist(y[0])
    }

    /// `‖T(y)‖²` for a point of the right length.
    fn untwisted_norm_sq(&self, y: &[f64]) -> f64 {
        let r = self.residual(y);
        let square = y[0] * y[0];
        // where y₁² overflows, y₁²/v may not (a large v)
        let first = if square.is_finite() {
            square / self.variance
        } else {
            (y[0] / self.variance) * y[0]
        };
        first + r * r + y[2..].iter().map(|v| v * v).sum::<f64>()
    }
}

impl Target for Banana {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Exactly normalised; `NaN` when `x` does not have length `dim()`.
    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        -0.5 * (self.dim as f64 * LN_2PI + self.variance.ln() + self.untwisted_norm_sq(x))
    }

    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, x.len())?;
        check_dim(self.dim, out.len())?;
        let r = self.residual(x);
        out[0] = -x[0] / self.variance + 2.0 * self.bananicity * x[0] * r;
        out[1] = -r;
        for (o, v) in out[2..].iter_mut().zip(&x[2..]) {
            *o = -v;
        }
        Ok(())
    }

    /// Zero: `E y₂ = b(E y₁² − v) = 0` and the other coordinates are centred.
    fn exact_mean(&self, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        out.fill(0.0);
        Ok(())
    }

    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        fill_standard_normal(rng, out);
        out[0] *= self.variance.sqrt();
        out[1] += self.twist(out[0]);
        Ok(())
    }
}

impl QuantileRegions for Banana {
    /// `‖T(y)‖²`, which is χ²_d distributed under the target.
    fn region_statistic(&self, x: &[f64]) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        self.untwisted_norm_sq(x)
    }

    /// `χ²_d⁻¹(q)`.
    fn region_threshold(&self, q: f64) -> Result<f64, TargetError> {
        chi_squared_quantile(self.dim, q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        assert_gradient_matches_finite_differences, assert_within_mc_error, draw_iid, midpoint_2d,
        rng,
    };

    /// Quadrature of exp(log π) over y₁ ∈ ±10√v and a ±10 window around the
    /// ridge y₂ = b(y₁² − v); the neglected Gaussian tails are < 10⁻²⁰ and the
    /// midpoint rule on these smooth integrands is accurate to ≪ 10⁻⁶.
    fn integral_2d(banana: &Banana, f: impl Fn(f64, f64) -> f64) -> f64 {
        let mut r = rng(0);
        let s = banana.variance.sqrt();
        let b = banana.bananicity;
        let v = banana.variance;
        midpoint_2d(
            (-10.0 * s, 10.0 * s, 2000),
            |y1| (b * (y1 * y1 - v) - 10.0, b * (y1 * y1 - v) + 10.0),
            800,
            |y1, y2| f(y1, y2) * banana.log_density(&[y1, y2], &mut r).exp(),
        )
    }

    #[test]
    fn rejects_invalid_parameters() {
        assert!(Banana::new(1, 0.1, 100.0).is_err());
        for dim in [usize::MAX, 1 << 61] {
            let message = Banana::new(dim, 0.1, 100.0).unwrap_err().to_string();
            assert!(
                message.contains("`dim`") && message.contains("allocated"),
                "{message}"
            );
        }
        assert!(Banana::new(2, f64::NAN, 100.0).is_err());
        assert!(Banana::new(2, 0.1, 0.0).is_err());
        assert!(Banana::new(2, 0.1, -1.0).is_err());
        assert!(Banana::new(2, 0.1, f64::INFINITY).is_err());
        let banana = Banana::new(3, 0.1, 1.0).unwrap();
        assert!(banana.sample_iid(&mut rng(0), &mut [0.0; 2]).is_err());
        assert!(banana.grad_log_density(&[0.0; 2], &mut [0.0; 3]).is_err());
        assert!(banana.log_density(&[0.0; 2], &mut rng(0)).is_nan());
        assert!(banana.region_threshold(0.0).is_err());
        assert!(banana.region_threshold(1.0).is_err());
    }

    /// Where `y₁²` overflows, an untwisted banana (b = 0, "a Gaussian") has
    /// its Gaussian density and gradient, and a banana with a large
    /// variance its (finite) density and exact draws: `0 · ∞` made them
    /// NaN (and about one draw in six of `B(0, 10³⁰⁸)`).
    #[test]
    fn overflowing_squares_give_no_nan() {
        let mut r = rng(0);
        let gaussian = Banana::new(2, 0.0, 1.0).unwrap();
        let x = [2e154, 1.0];
        assert_eq!(gaussian.log_density(&x, &mut r), f64::NEG_INFINITY);
        let mut grad = [0.0; 2];
        gaussian.grad_log_density(&x, &mut grad).unwrap();
        assert_eq!(grad, [-2e154, -1.0]);

        let wide = Banana::new(2, 0.0, 1e308).unwrap();
        let expected = -0.5 * (2.0 * LN_2PI + 1e308f64.ln() + 4.0);
        let got = wide.log_density(&[2e154, 0.0], &mut r);
        assert!((got - expected).abs() < 1e-12 * expected.abs(), "{got}");
        let mut y = [0.0; 2];
        for _ in 0..1000 {
            wide.sample_iid(&mut r, &mut y).unwrap();
            assert!(y.iter().all(|v| v.is_finite()), "{y:?}");
        }

        // a tiny twist of a huge y₁ is finite: 10⁻³⁰⁰ · 10³¹⁰ = 10¹⁰
        let faint = Banana::new(2, 1e-300, 1.0).unwrap();
        let mut grad = [0.0; 2];
        faint.grad_log_density(&[1e155, 1e10], &mut grad).unwrap();
        assert!(grad.iter().all(|g| g.is_finite()), "{grad:?}");
    }

    #[test]
    fn density_is_normalised_in_two_dimensions() {
        for (b, v) in [(0.1, 1.0), (0.03, 100.0), (0.1, 100.0)] {
            let banana = Banana::new(2, b, v).unwrap();
            let mass = integral_2d(&banana, |_, _| 1.0);
            assert!((mass - 1.0).abs() < 1e-6, "B({b}, {v}): mass {mass}");
        }
    }

    #[test]
    fn extra_coordinates_are_standard_normal_factors() {
        let b2 = Banana::new(2, 0.1, 100.0).unwrap();
        let b4 = Banana::new(4, 0.1, 100.0).unwrap();
        let mut r = rng(0);
        let (y, z) = ([3.0, -1.5], [0.7, -2.0]);
        let expected =
            b2.log_density(&y, &mut r) + z.iter().map(|t| -0.5 * (t * t + LN_2PI)).sum::<f64>();
        let got = b4.log_density(&[y[0], y[1], z[0], z[1]], &mut r);
        assert!((got - expected).abs() < 1e-12);
    }

    /// The region masses are integrated directly from the density and the
    /// statistic, independently of the sampler. The indicator makes the
    /// midpoint rule only O(h) accurate at the boundary: with h ≈ 0.01√v in
    /// y₁ and 0.025 in y₂ the boundary error is ≲ 10⁻³.
    #[test]
    fn quantile_regions_have_exact_mass_by_quadrature() {
        for (b, v) in [(0.1, 1.0), (0.03, 100.0)] {
            let banana = Banana::new(2, b, v).unwrap();
            for q in [0.1, 0.5, 0.9] {
                let t = banana.region_threshold(q).unwrap();
                let mass = integral_2d(&banana, |y1, y2| {
                    f64::from(u8::from(banana.region_statistic(&[y1, y2]) <= t))
                });
                assert!((mass - q).abs() < 1e-3, "B({b}, {v}), q = {q}: mass {mass}");
            }
        }
    }

    /// Moments implied by the generative definition: E y₁ = E y₂ = 0,
    /// Var y₁ = v, Var y₂ = 1 + 2b²v², E[y₁² y₂] = b·E[y₁⁴ − v y₁²] = 2bv²,
    /// and the extra coordinates have variance 1. Each check uses a 5-s.e.
    /// band with the exact standard deviation of the averaged quantity
    /// (for y₁²: √2 v; for y₂²: bounded by √(E y₂⁴) computed below; for
    /// y₁² y₂: √(E y₁⁴ y₂²) ≤ bound below).
    #[test]
    fn iid_sampler_matches_moments() {
        let (b, v, d, n) = (0.1, 4.0, 3, 200_000);
        let banana = Banana::new(d, b, v).unwrap();
        let draws = draw_iid(&banana, n, 7);
        let mean = |f: &dyn Fn(&[f64]) -> f64| draws.chunks(d).map(f).sum::<f64>() / n as f64;
        let var_y2 = 1.0 + 2.0 * b * b * v * v;
        let mut exact = [f64::NAN; 3];
        banana.exact_mean(&mut exact).unwrap();
        assert_within_mc_error("E y1", mean(&|y| y[0]), exact[0], v.sqrt(), n);
        assert_within_mc_error("E y2", mean(&|y| y[1]), exact[1], var_y2.sqrt(), n);
        assert_within_mc_error("E y3", mean(&|y| y[2]), exact[2], 1.0, n);
        assert_within_mc_error("E y1²", mean(&|y| y[0] * y[0]), v, 2f64.sqrt() * v, n);
        // E y₂⁴ ≤ 8(E ε⁴ + b⁴ E(y₁²−v)⁴) = 8(3 + 60 b⁴ v⁴) bounds the variance of y₂².
        let sd_y2sq = (8.0 * (3.0 + 60.0 * b.powi(4) * v.powi(4))).sqrt();
        assert_within_mc_error("E y2²", mean(&|y| y[1] * y[1]), var_y2, sd_y2sq, n);
        // E[y₁⁴ y₂²] ≤ 2(E y₁⁴ + b² E y₁⁴(y₁²−v)²) = 2(3v² + b²·(105 − 30 + 3)v⁴).
        let sd_cross = (2.0 * (3.0 * v * v + b * b * 78.0 * v.powi(4))).sqrt();
        assert_within_mc_error(
            "E y1² y2",
            mean(&|y| y[0] * y[0] * y[1]),
            2.0 * b * v * v,
            sd_cross,
            n,
        );
        assert_within_mc_error("E y3²", mean(&|y| y[2] * y[2]), 1.0, 2f64.sqrt(), n);
    }

    /// Coverage of iid draws in d = 8 at every KAMH level: the indicator
    /// averages have sd √(q(1−q)).
    #[test]
    fn iid_draws_cover_quantile_regions_at_their_level() {
        let (d, n) = (8, 50_000);
        let banana = Banana::new(d, 0.1, 100.0).unwrap();
        let draws = draw_iid(&banana, n, 11);
        for k in 1..=9 {
            let q = k as f64 / 10.0;
            let t = banana.region_threshold(q).unwrap();
            for y in draws.chunks(d).take(50) {
                let by_statistic = banana.region_statistic(y) <= t;
                assert_eq!(banana.in_region(y, q).unwrap(), by_statistic);
            }
            let inside = draws
                .chunks(d)
                .filter(|y| banana.region_statistic(y) <= t)
                .count();
            let sd = (q * (1.0 - q)).sqrt();
            assert_within_mc_error("coverage", inside as f64 / n as f64, q, sd, n);
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let banana = Banana::new(4, 0.1, 100.0).unwrap();
        let mut r = rng(3);
        let mut x = [0.0; 4];
        for _ in 0..20 {
            banana.sample_iid(&mut r, &mut x).unwrap();
            assert_gradient_matches_finite_differences(&banana, &x);
        }
    }
}
