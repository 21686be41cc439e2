//! The multivariate skew-normal distribution `SN(θ, I, α)` with identity
//! scale, simulated from its conditioning representation.
//!
//! **Density.** `p(y) = 2 φ_d(y − θ) Φ(αᵀ(y − θ))` (Azzalini & Dalla Valle
//! 1996), location θ, scale I, shape α.
//!
//! **Construction.** Let `δ = α/√(1 + αᵀα)` (so `δᵀδ < 1`), draw
//! `z₀ ~ N(0, 1)` and, independently, `w ~ N(0, I − δδᵀ)`, and set
//! `x = δ z₀ + w`. Then `(z₀, x)` is jointly Gaussian with `Cov(x) = I` and
//! `Cov(x, z₀) = δ`, and `x | z₀ > 0` has density `2 φ_d(x) Φ(αᵀx)`: the
//! conditional of `z₀` given `x` is `N(δᵀx, 1 − δᵀδ)`, so
//! `P(z₀ > 0 | x) = Φ(δᵀx/√(1 − δᵀδ)) = Φ(αᵀx)` and Bayes' rule gives the
//! density. Because `(z₀, x) → (−z₀, −x)` preserves the joint law, "x if
//! z₀ > 0, else −x" has the same law; it equals `δ|z₀| + sign(z₀) w`, and
//! `sign(z₀) w` has the law of `w` independently of `|z₀|`. So we draw
//!
//! ```text
//! y = θ + δ |z₀| + w,   w = u − β δ (δᵀu),   u ~ N(0, I),   β = 1/(1 + √(1 − δᵀδ)),
//! ```
//!
//! where `(I − βδδᵀ)² = I − (2β − β² δᵀδ) δδᵀ = I − δδᵀ` (β solves
//! `β² δᵀδ − 2β + 1 = 0`), so `w` has covariance `I − δδᵀ` in O(d) work.
//! Moments: `E y = θ + √(2/π) δ`, `Cov y = I − (2/π) δδᵀ`, and the third
//! central moment of `y_i` is `δᵢ³ b (2b² − 1)` with `b = √(2/π)`.

use crate::TargetError;
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;

/// The skew-normal `SN(θ, I, α)` family for a fixed shape α; the location θ
/// is given at each draw.
#[derive(Debug, Clone, PartialEq)]
pub struct SkewNormal {
    shape: Vec<f64>,
    delta: Vec<f64>,
    beta: f64,
}

impl SkewNormal {
    /// The family with shape `alpha` (finite, length d ≥ 1).
    pub fn new(alpha: Vec<f64>) -> Result<Self, TargetError> {
        if alpha.is_empty() || alpha.iter().any(|a| !a.is_finite()) {
            return Err(TargetError::InvalidParameter {
                name: "alpha",
                reason: "must be non-empty and finite".into(),
            });
        }
        let squared_norm = alpha.iter().map(|a| a * a).sum::<f64>();
        let (norm, delta): (f64, Vec<f64>) = if squared_norm.is_finite() {
            let norm = (1.0 + squared_norm).sqrt();
            (norm, alpha.iter().map(|a| a / norm).collect())
        } else {
            // αᵀα overflows (|α| beyond about 1e154): scale by the largest
            // |αᵢ| first, so that δ = α/√(1 + αᵀα) is the unit vector it
            // is to within rounding, not 0
            let largest = alpha.iter().fold(0.0, |m: f64, a| m.max(a.abs()));
            let scaled = ((1.0 / largest).powi(2)
                + alpha.iter().map(|a| (a / largest).powi(2)).sum::<f64>())
            .sqrt();
            (
                largest * scaled,
                alpha.iter().map(|a| a / largest / scaled).collect(),
            )
        };
        // 1 − δᵀδ = 1/(1 + αᵀα), computed without cancellation.
        let beta = 1.0 / (1.0 + 1.0 / norm);
        Ok(Self {
            shape: alpha,
            delta,
            beta,
        })
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.shape.len()
    }

    /// The shape α.
    pub fn shape(&self) -> &[f64] {
        &self.shape
    }

    /// `δ = α/√(1 + αᵀα)`.
    pub fn delta(&self) -> &[f64] {
        &self.delta
    }

    /// Draws `y ~ SN(location, I, α)` into `out` (both of length d; not
    /// checked in release builds: this is the simulator's inner loop).
    pub fn sample<R: Rng + ?Sized>(&self, location: &[f64], rng: &mut R, out: &mut [f64]) {
        out.fill(0.0);
        self.add_draw(location, rng, out);
    }

    /// Adds `Σ_k y⁽ᵏ⁾` over `n` draws `y⁽ᵏ⁾ ~ SN(location, I, α)` to `sum`
    /// without storing them (the same stream as `n` calls of
    /// [`SkewNormal::sample`]).
    pub fn add_sum_of_draws<R: Rng + ?Sized>(
        &self,
        location: &[f64],
        n: usize,
        rng: &mut R,
        sum: &mut [f64],
    ) {
        for _ in 0..n {
            self.add_draw(location, rng, sum);
        }
    }

    /// Adds one draw `θ + δ|z₀| + u − βδ(δᵀu)` to `acc`.
    fn add_draw<R: Rng + ?Sized>(&self, location: &[f64], rng: &mut R, acc: &mut [f64]) {
        debug_assert_eq!(location.len(), self.dim());
        debug_assert_eq!(acc.len(), self.dim());
        let abs_z0 = rng.sample::<f64, _>(StandardNormal).abs();
        let mut delta_dot_u = 0.0;
        for (a, d) in acc.iter_mut().zip(&self.delta) {
            let u: f64 = rng.sample(StandardNormal);
            *a += u;
            delta_dot_u += d * u;
        }
        let shift = abs_z0 - self.beta * delta_dot_u;
        for ((a, d), t) in acc.iter_mut().zip(&self.delta).zip(location) {
            *a += t + d * shift;
        }
    }

    /// `E y = θ + √(2/π) δ` for location θ, into `out`.
    pub fn mean(&self, location: &[f64], out: &mut [f64]) {
        let b = (2.0 / std::f64::consts::PI).sqrt();
        for ((o, t), d) in out.iter_mut().zip(location).zip(&self.delta) {
            *o = t + b * d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::f64::consts::PI;

    /// A shape whose αᵀα overflows still gives δ = α/√(1 + αᵀα), the
    /// unit vector along α to within rounding (it gave δ = 0, a normal
    /// instead of a half-normal), and β = 1/(1 + √(1 − δᵀδ)) = 1.
    #[test]
    fn delta_of_a_huge_shape_is_the_unit_vector() {
        let one = SkewNormal::new(vec![1e300]).unwrap();
        assert_eq!(one.delta(), &[1.0]);
        let two = SkewNormal::new(vec![1e200, -1e200, 0.0]).unwrap();
        let half = std::f64::consts::FRAC_1_SQRT_2;
        for (d, expected) in two.delta().iter().zip([half, -half, 0.0]) {
            assert!((d - expected).abs() < 1e-15, "{d} against {expected}");
        }
        assert_eq!((one.beta, two.beta), (1.0, 1.0));
        // the draws are then θ + δ|z₀| + w with w ⟂ δ: the half-normal along δ
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let mut y = [0.0];
        for _ in 0..100 {
            one.sample(&[0.0], &mut rng, &mut y);
            assert!(y[0] >= 0.0);
        }
    }

    #[test]
    fn delta_and_beta_give_the_intended_covariance_factor() {
        let sn = SkewNormal::new(vec![10.0; 10]).unwrap();
        let s: f64 = sn.delta().iter().map(|d| d * d).sum();
        assert!((s - 1000.0 / 1001.0).abs() < 1e-15);
        // (I − βδδᵀ)² = I − δδᵀ  ⇔  2β − β²δᵀδ = 1.
        assert!((2.0 * sn.beta - sn.beta * sn.beta * s - 1.0).abs() < 1e-14);
        assert!(SkewNormal::new(vec![]).is_err());
        assert!(SkewNormal::new(vec![1.0, f64::INFINITY]).is_err());
    }

    /// Mean, covariance and third marginal moment against the closed forms.
    /// N = 200 000 draws of a 3-d skew-normal with a strongly skewed first
    /// coordinate. Each check compares a sample average of some g(y) with
    /// its expectation and allows 5 standard errors, the standard error
    /// being the sample sd of g(y) over √N (the sample-mean centring adds
    /// O(1/N), negligible against these tolerances).
    #[test]
    fn moments_match_closed_forms() {
        let alpha = vec![5.0, -1.0, 0.5];
        let theta = [1.0, -2.0, 0.3];
        let sn = SkewNormal::new(alpha).unwrap();
        let d = 3;
        let n = 200_000;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut draws = vec![0.0; n * d];
        for y in draws.chunks_mut(d) {
            sn.sample(&theta, &mut rng, y);
        }
        let mut mean = vec![0.0; d];
        sn.mean(&theta, &mut mean);
        let b = (2.0 / PI).sqrt();
        let delta = sn.delta().to_vec();
        let check = |g: &dyn Fn(&[f64]) -> f64, expected: f64, what: &str| {
            let values: Vec<f64> = draws.chunks(d).map(g).collect();
            let avg = values.iter().sum::<f64>() / n as f64;
            let var = values.iter().map(|v| (v - avg).powi(2)).sum::<f64>() / (n - 1) as f64;
            let se = (var / n as f64).sqrt();
            assert!(
                (avg - expected).abs() < 5.0 * se + 1e-12,
                "{what}: {avg} vs {expected} (se {se})"
            );
        };
        for i in 0..d {
            check(&|y| y[i], mean[i], "mean");
            for j in 0..=i {
                let cov = if i == j { 1.0 } else { 0.0 } - 2.0 / PI * delta[i] * delta[j];
                check(&|y| (y[i] - mean[i]) * (y[j] - mean[j]), cov, "covariance");
            }
            let third = delta[i].powi(3) * b * (2.0 * b * b - 1.0);
            check(&|y| (y[i] - mean[i]).powi(3), third, "third central moment");
        }
        // The summed draws use the same construction.
        let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut rng_b = rng_a.clone();
        let mut sum = vec![0.0; d];
        sn.add_sum_of_draws(&theta, 4, &mut rng_a, &mut sum);
        let mut direct = vec![0.0; d];
        let mut y = vec![0.0; d];
        for _ in 0..4 {
            sn.sample(&theta, &mut rng_b, &mut y);
            direct.iter_mut().zip(&y).for_each(|(s, v)| *s += v);
        }
        for (s, t) in sum.iter().zip(&direct) {
            assert!((s - t).abs() < 1e-12);
        }
    }
}
