//! Exactly normalised Gaussian mixtures (and single Gaussians), including the
//! targets of the cKAM paper and the rotated Gaussian of KMC.

use crate::util::{
    LN_2PI, check_allocatable, check_dim, check_positive, fill_standard_normal, too_large,
};
use crate::{Target, TargetError};
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, Side};
use kameleon_core::buffer::{checked_len, reserve};
use kameleon_core::normal_cdf;
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::{Distribution, Gamma, StandardNormal};

/// A mixture `Σ_k w_k N(μ_k, Σ_k)` in dimension d with full covariances.
///
/// [`Target::log_density`] is the exactly normalised log density, computed
/// with a streaming log-sum-exp (no allocation, no overflow); the gradient is
/// the responsibility-weighted sum of `−Σ_k⁻¹(x − μ_k)`; [`Target::sample_iid`]
/// draws a component and then `μ_k + L_k z` with `Σ_k = L_k L_kᵀ` (Cholesky).
/// The exact marginals of single coordinates and coordinate pairs serve the
/// binned KL metric of the cKAM experiments. A single Gaussian is a
/// one-component mixture ([`GaussianMixture::gaussian`]).
#[derive(Debug, Clone, PartialEq)]
pub struct GaussianMixture {
    dim: usize,
    /// The normalised weights.
    weights: Vec<f64>,
    /// Running sums of the weights, for component selection.
    cumulative_weights: Vec<f64>,
    /// `log w_k − ½ d log 2π − ½ log det Σ_k`.
    log_constants: Vec<f64>,
    /// Means, one row of length d per component.
    means: Vec<f64>,
    /// Covariances, row-major d × d per component.
    covariances: Vec<f64>,
    /// Lower Cholesky factors, row-major d × d per component.
    cholesky_factors: Vec<f64>,
    /// Precision matrices `Σ_k⁻¹`, row-major d × d per component.
    precisions: Vec<f64>,
}

/// Builds an error for an invalid mixture parameter.
fn invalid(name: &'static str, reason: String) -> TargetError {
    TargetError::InvalidParameter { name, reason }
}

/// The weights divided by their sum; by their largest first when the sum
/// overflows, so that finite weights always give finite proportions.
fn normalised(weights: &[f64]) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    if total.is_finite() {
        return weights.iter().map(|w| w / total).collect();
    }
    let largest = weights.iter().copied().fold(0.0, f64::max);
    let total: f64 = weights.iter().map(|w| w / largest).sum();
    weights.iter().map(|w| w / largest / total).collect()
}

impl GaussianMixture {
    /// The mixture with the given weights (positive and finite; normalised
    /// here), means (all of the same length d ≥ 1) and symmetric positive
    /// definite d × d covariances, one per component.
    pub fn new(
        weights: &[f64],
        means: &[Vec<f64>],
        covariances: &[Mat<f64>],
    ) -> Result<Self, TargetError> {
        let k = weights.len();
        if k == 0 {
            return Err(invalid("weights", "a mixture needs a component".into()));
        }
        if means.len() != k || covariances.len() != k {
            return Err(invalid(
                "means",
                format!(
                    "{k} weights but {} means and {} covariances",
                    means.len(),
                    covariances.len()
                ),
            ));
        }
        for &w in weights {
            check_positive("weights", w)?;
        }
        let dim = means[0].len();
        if dim == 0 {
            return Err(invalid("means", "the dimension must be ≥ 1".into()));
        }
        let mut mixture = Self {
            dim,
            weights: normalised(weights),
            cumulative_weights: Vec::with_capacity(k),
            log_constants: Vec::with_capacity(k),
            means: Vec::with_capacity(k * dim),
            covariances: Vec::new(),
            cholesky_factors: Vec::new(),
            precisions: Vec::new(),
        };
        let what = "the mixture's covariances, factors and precisions, k × d × d";
        let len = checked_len(what, &[k, dim, dim]).map_err(too_large("covariances"))?;
        for buffer in [
            &mut mixture.covariances,
            &mut mixture.cholesky_factors,
            &mut mixture.precisions,
        ] {
            reserve(what, buffer, len).map_err(too_large("covariances"))?;
        }
        let mut running = 0.0;
        for (c, (mean, cov)) in means.iter().zip(covariances).enumerate() {
            check_dim(dim, mean.len())?;
            if mean.iter().any(|m| !m.is_finite()) {
                return Err(invalid(
                    "means",
                    format!("component {c} has a non-finite mean"),
                ));
            }
            if cov.nrows() != dim || cov.ncols() != dim {
                return Err(TargetError::DimensionMismatch {
                    expected: dim,
                    got: if cov.nrows() != dim {
                        cov.nrows()
                    } else {
                        cov.ncols()
                    },
                });
            }
            let scale = (0..dim).map(|i| cov[(i, i)].abs()).fold(0.0, f64::max);
            for i in 0..dim {
                for j in 0..dim {
                    let (a, b) = (cov[(i, j)], cov[(j, i)]);
                    if !a.is_finite() || (a - b).abs() > 1e-12 * scale {
                        return Err(invalid(
                            "covariances",
                            format!("component {c} is not a finite symmetric matrix"),
                        ));
                    }
                }
            }
            let llt = cov.llt(Side::Lower).map_err(|e| {
                invalid(
                    "covariances",
                    format!("component {c} is not positive definite: {e:?}"),
                )
            })?;
            let l = llt.L();
            let precision = llt.inverse();
            let log_det = 2.0 * (0..dim).map(|i| l[(i, i)].ln()).sum::<f64>();
            // a factorable but (sub)normal-tiny or huge covariance can have
            // an inverse or a log-determinant that is not finite: its log
            // density would be NaN
            if !log_det.is_finite()
                || precision
                    .col_iter()
                    .any(|col| col.iter().any(|p| !p.is_finite()))
            {
                return Err(invalid(
                    "covariances",
                    format!(
                        "component {c} has a log-determinant or an inverse that is not finite \
                         (its scale is beyond what f64 holds: rescale the problem)"
                    ),
                ));
            }
            running += mixture.weights[c];
            mixture.cumulative_weights.push(running);
            mixture
                .log_constants
                .push(mixture.weights[c].ln() - 0.5 * (dim as f64 * LN_2PI + log_det));
            mixture.means.extend_from_slice(mean);
            for i in 0..dim {
                for j in 0..dim {
                    mixture.covariances.push(cov[(i, j)]);
                    mixture
                        .cholesky_factors
                        .push(if j <= i { l[(i, j)] } else { 0.0 });
                    mixture.precisions.push(precision[(i, j)]);
                }
            }
        }
        Ok(mixture)
    }

    /// The Gaussian `N(mean, covariance)`.
    pub fn gaussian(mean: &[f64], covariance: &Mat<f64>) -> Result<Self, TargetError> {
        Self::new(&[1.0], &[mean.to_vec()], std::slice::from_ref(covariance))
    }

    /// The mixture with isotropic covariances `variances[k]·I`.
    pub fn isotropic(
        weights: &[f64],
        means: &[Vec<f64>],
        variances: &[f64],
    ) -> Result<Self, TargetError> {
        let dim = means.first().map_or(0, Vec::len);
        // the k d × d covariances made here and the three copies `new` keeps
        check_allocatable(
            "means",
            "the isotropic mixture's covariances, 4 × k × d × d",
            &[4, variances.len(), dim, dim],
        )?;
        let covariances: Vec<Mat<f64>> = variances
            .iter()
            .map(|&v| Mat::from_fn(dim, dim, |i, j| if i == j { v } else { 0.0 }))
            .collect();
        Self::new(weights, means, &covariances)
    }

    /// The bimodal target of cKAM (Appendix A.1),
    /// `½N((−8, 0), 0.5 I) + ½N((8, 0), 2 I)`. With `code_weights` the
    /// weights are instead 1/3 (at −8) and 2/3 (at +8), what the cKAM code
    /// (`experiments/counter_example/global_data.py`) actually evaluates.
    pub fn ckam_bimodal(code_weights: bool) -> Self {
        let weights = if code_weights { [1.0, 2.0] } else { [1.0, 1.0] };
        Self::isotropic(&weights, &[vec![-8.0, 0.0], vec![8.0, 0.0]], &[0.5, 2.0])
            .expect("fixed valid parameters")
    }

    /// The five-component target of cKAM (Appendix A.2):
    /// `(1/5) Σ_{i=1}^{5} N(2.5(i−1)(1, 1), √i·I)`.
    pub fn ckam_five_components() -> Self {
        let means: Vec<Vec<f64>> = (0..5).map(|i| vec![2.5 * i as f64; 2]).collect();
        let variances: Vec<f64> = (1..=5).map(|i| (i as f64).sqrt()).collect();
        Self::isotropic(&[1.0; 5], &means, &variances).expect("fixed valid parameters")
    }

    /// The centred Gaussian of KMC's trajectory experiments with the random
    /// covariance of [`random_rotated_covariance`], drawn from a generator
    /// seeded with `seed` (the same seed gives the same target).
    pub fn random_rotated_gaussian(dim: usize, seed: u64) -> Result<Self, TargetError> {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed);
        let covariance = random_rotated_covariance(dim, &mut rng)?;
        Self::gaussian(&vec![0.0; dim], &covariance)
    }

    /// The number of components.
    pub fn num_components(&self) -> usize {
        self.weights.len()
    }

    /// The normalised component weights.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Checks that `coord` indexes a coordinate.
    fn check_coordinate(&self, coord: usize) -> Result<(), TargetError> {
        if coord < self.dim {
            Ok(())
        } else {
            Err(invalid(
                "coord",
                format!("coordinate {coord} of a {}-dimensional mixture", self.dim),
            ))
        }
    }

    /// `Σ_k[i, j]`.
    fn covariance_entry(&self, k: usize, i: usize, j: usize) -> f64 {
        self.covariances[(k * self.dim + i) * self.dim + j]
    }

    /// `μ_k[i]`.
    fn mean_entry(&self, k: usize, i: usize) -> f64 {
        self.means[k * self.dim + i]
    }

    /// The exact log density of the marginal of coordinate `coord` at `t`:
    /// the 1-d mixture `Σ_k w_k N(μ_k[coord], Σ_k[coord, coord])`.
    pub fn marginal_log_density(&self, coord: usize, t: f64) -> Result<f64, TargetError> {
        self.check_coordinate(coord)?;
        Ok(log_sum_exp((0..self.num_components()).map(|k| {
            let v = self.covariance_entry(k, coord, coord);
            let r = t - self.mean_entry(k, coord);
            self.weights[k].ln() - 0.5 * (LN_2PI + v.ln() + r * r / v)
        })))
    }

    /// The exact CDF of the marginal of coordinate `coord` at `t` (for exact
    /// bin masses as CDF differences).
    pub fn marginal_cdf(&self, coord: usize, t: f64) -> Result<f64, TargetError> {
        self.check_coordinate(coord)?;
        Ok((0..self.num_components())
            .map(|k| {
                let z =
                    (t - self.mean_entry(k, coord)) / self.covariance_entry(k, coord, coord).sqrt();
                self.weights[k] * normal_cdf(z)
            })
            .sum())
    }

    /// The exact log density of the marginal of the coordinate pair
    /// `(i, j)`, `i ≠ j`, at `(s, t)`: the 2-d mixture of the 2 × 2
    /// sub-blocks of the components.
    pub fn pair_marginal_log_density(
        &self,
        i: usize,
        j: usize,
        (s, t): (f64, f64),
    ) -> Result<f64, TargetError> {
        self.check_coordinate(i)?;
        self.check_coordinate(j)?;
        if i == j {
            return Err(invalid("j", "a pair marginal needs two coordinates".into()));
        }
        Ok(log_sum_exp((0..self.num_components()).map(|k| {
            let (a, b, c) = (
                self.covariance_entry(k, i, i),
                self.covariance_entry(k, i, j),
                self.covariance_entry(k, j, j),
            );
            let det = a * c - b * b;
            let (p, q) = (s - self.mean_entry(k, i), t - self.mean_entry(k, j));
            let (log_det, quad) = if det.is_normal() && det > 0.0 {
                (det.ln(), (c * p * p - 2.0 * b * p * q + a * q * q) / det)
            } else {
                // a·c under- or overflows (a block of scale beyond about
                // 1e±154): through the Schur complement s = c − b²/a,
                // det = a·s and the form is p²/a + (q − (b/a) p)²/s
                let schur = c - b / a * b;
                let residual = q - b / a * p;
                (a.ln() + schur.ln(), p * p / a + residual * residual / schur)
            };
            self.weights[k].ln() - 0.5 * (2.0 * LN_2PI + log_det + quad)
        })))
    }

    /// The exact probability that coordinates `(i, j)`, `i ≠ j`, fall in the
    /// box `[s.0, s.1] × [t.0, t.1]`: the sum over components of products of
    /// normal-CDF differences (the bin masses of the binned KL metric).
    /// Needs `Σ_k[i, j] = 0` in every component
    /// (true of all cKAM targets) and errors with
    /// [`TargetError::Unsupported`] otherwise. Each interval needs
    /// `lo ≤ hi` (infinite ends allowed, NaN not).
    pub fn pair_box_probability(
        &self,
        i: usize,
        j: usize,
        s: (f64, f64),
        t: (f64, f64),
    ) -> Result<f64, TargetError> {
        self.check_coordinate(i)?;
        self.check_coordinate(j)?;
        if i == j {
            return Err(invalid("j", "a pair marginal needs two coordinates".into()));
        }
        for (name, (lo, hi)) in [("s", s), ("t", t)] {
            if lo.is_nan() || hi.is_nan() || lo > hi {
                return Err(invalid(
                    name,
                    format!("the interval [{lo}, {hi}] needs lo ≤ hi (and no NaN)"),
                ));
            }
        }
        let k_max = self.num_components();
        if (0..k_max).any(|k| self.covariance_entry(k, i, j) != 0.0) {
            return Err(TargetError::Unsupported(
                "box probabilities of correlated coordinate pairs",
            ));
        }
        let interval = |k: usize, c: usize, (a, b): (f64, f64)| {
            let (m, sd) = (self.mean_entry(k, c), self.covariance_entry(k, c, c).sqrt());
            normal_cdf((b - m) / sd) - normal_cdf((a - m) / sd)
        };
        Ok((0..k_max)
            .map(|k| self.weights[k] * interval(k, i, s) * interval(k, j, t))
            .sum())
    }

    /// `log w_k N(x; μ_k, Σ_k)` for a point of the right length.
    /// `out −= weight · Σ_k⁻¹ (x − μ_k)`.
    fn subtract_component_score(&self, k: usize, weight: f64, x: &[f64], out: &mut [f64]) {
        let d = self.dim;
        let mu = &self.means[k * d..(k + 1) * d];
        let precision = &self.precisions[k * d * d..(k + 1) * d * d];
        for (o, row) in out.iter_mut().zip(precision.chunks(d)) {
            let pr: f64 = row
                .iter()
                .zip(x.iter().zip(mu))
                .map(|(p, (a, m))| p * (a - m))
                .sum();
            *o -= weight * pr;
        }
    }

    fn component_log_density(&self, k: usize, x: &[f64]) -> f64 {
        let d = self.dim;
        let mu = &self.means[k * d..(k + 1) * d];
        let precision = &self.precisions[k * d * d..(k + 1) * d * d];
        let mut quad = 0.0;
        for (i, row) in precision.chunks(d).enumerate() {
            let pr: f64 = row
                .iter()
                .zip(x.iter().zip(mu))
                .map(|(p, (a, m))| p * (a - m))
                .sum();
            quad += (x[i] - mu[i]) * pr;
        }
        if quad.is_nan() && x.iter().all(|v| v.is_finite()) {
            // the products overflowed with both signs (∞ − ∞); the form
            // itself is positive and beyond f64's range
            quad = f64::INFINITY;
        }
        self.log_constants[k] - 0.5 * quad
    }
}

/// `log Σ exp(l)` of a stream, stable for large and `−∞` terms.
fn log_sum_exp(terms: impl Iterator<Item = f64>) -> f64 {
    let (mut max, mut sum) = (f64::NEG_INFINITY, 0.0);
    for l in terms {
        if l == f64::NEG_INFINITY {
            // adds e^{−∞} = 0 (and −∞ − max is NaN while max is −∞)
            continue;
        }
        if l > max {
            sum = sum * (max - l).exp() + 1.0;
            max = l;
        } else {
            sum += (l - max).exp();
        }
    }
    max + sum.ln()
}

impl Target for GaussianMixture {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Exactly normalised; `NaN` when `x` does not have length `dim()`.
    fn log_density(&self, x: &[f64], _rng: &mut dyn Rng) -> f64 {
        if x.len() != self.dim {
            return f64::NAN;
        }
        log_sum_exp((0..self.num_components()).map(|k| self.component_log_density(k, x)))
    }

    fn grad_log_density(&self, x: &[f64], out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, x.len())?;
        check_dim(self.dim, out.len())?;
        // Streaming responsibilities: `out` holds Σ_k e^{l_k − max}(−Σ_k⁻¹ r_k).
        out.fill(0.0);
        let (mut max, mut sum) = (f64::NEG_INFINITY, 0.0);
        for k in 0..self.num_components() {
            let l = self.component_log_density(k, x);
            if l.is_nan() || l == f64::NEG_INFINITY {
                // a density that underflows to 0 (or a NaN point) has no
                // weight; its −Σ_k⁻¹ r_k may overflow, and 0 · ∞ is NaN
                continue;
            }
            let weight = if l > max {
                let rescale = (max - l).exp();
                out.iter_mut().for_each(|o| *o *= rescale);
                sum *= rescale;
                max = l;
                1.0
            } else {
                (l - max).exp()
            };
            sum += weight;
            self.subtract_component_score(k, weight, x, out);
        }
        if sum == 0.0 {
            // every density underflows (x is far beyond the components'
            // scale): the weights are 0/0, except for a single component
            if self.num_components() > 1 {
                return Err(TargetError::Numerical(
                    "every component's density underflows to 0 at this point (it is too far \
                     from the means), so the components' weights in the gradient are undefined"
                        .into(),
                ));
            }
            self.subtract_component_score(0, 1.0, x, out);
            sum = 1.0;
        }
        out.iter_mut().for_each(|o| *o /= sum);
        Ok(())
    }

    /// `Σ_k w_k μ_k`.
    fn exact_mean(&self, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        out.fill(0.0);
        for (w, mu) in self.weights.iter().zip(self.means.chunks(self.dim)) {
            for (m, v) in out.iter_mut().zip(mu) {
                *m += w * v;
            }
        }
        Ok(())
    }

    fn sample_iid(&self, rng: &mut dyn Rng, out: &mut [f64]) -> Result<(), TargetError> {
        check_dim(self.dim, out.len())?;
        let d = self.dim;
        let u = rng.random::<f64>() * self.cumulative_weights[self.num_components() - 1];
        let k = self
            .cumulative_weights
            .partition_point(|&c| c <= u)
            .min(self.num_components() - 1);
        fill_standard_normal(rng, out);
        // out ← μ_k + L_k out, in place from the last row up (L is lower).
        let l = &self.cholesky_factors[k * d * d..(k + 1) * d * d];
        for i in (0..d).rev() {
            let row = &l[i * d..i * d + i + 1];
            out[i] =
                self.means[k * d + i] + row.iter().zip(&out[..=i]).map(|(a, z)| a * z).sum::<f64>();
        }
        Ok(())
    }
}

/// A Haar-distributed random orthogonal `dim × dim` matrix: the Q factor of
/// the QR decomposition of a matrix of iid standard normals, with the signs
/// of Q's columns fixed so that R has a positive diagonal (without this
/// correction Q is not Haar-distributed). Errors for `dim = 0` and for a
/// `dim` whose d × d matrices cannot be allocated.
pub fn haar_orthogonal(dim: usize, rng: &mut dyn Rng) -> Result<Mat<f64>, TargetError> {
    if dim == 0 {
        return Err(invalid("dim", "the dimension must be ≥ 1".into()));
    }
    // G, its QR factors and Q (and the caller's product with Q): four d × d
    check_allocatable("dim", "the rotation's d × d matrices", &[4, dim, dim])?;
    let g = Mat::<f64>::from_fn(dim, dim, |_, _| rng.sample(StandardNormal));
    let qr = g.qr();
    let r = qr.R();
    let mut q = qr.compute_Q();
    for j in 0..dim {
        if r[(j, j)] < 0.0 {
            for i in 0..dim {
                q[(i, j)] = -q[(i, j)];
            }
        }
    }
    Ok(q)
}

/// The random covariance `Σ = Qᵀ diag(λ) Q` of KMC's trajectory experiments,
/// with `λ_i ~ Gamma(1, 1)` iid and `Q` from [`haar_orthogonal`].
pub fn random_rotated_covariance(dim: usize, rng: &mut dyn Rng) -> Result<Mat<f64>, TargetError> {
    let q = haar_orthogonal(dim, rng)?;
    let gamma = Gamma::new(1.0, 1.0).expect("valid Gamma parameters");
    let lambda: Vec<f64> = (0..dim).map(|_| gamma.sample(rng)).collect();
    let mut sigma = Mat::<f64>::from_fn(dim, dim, |i, j| {
        (0..dim).map(|k| q[(k, i)] * lambda[k] * q[(k, j)]).sum()
    });
    // Exact symmetry (the sums above agree only up to rounding order).
    for i in 0..dim {
        for j in 0..i {
            sigma[(i, j)] = sigma[(j, i)];
        }
    }
    Ok(sigma)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{
        assert_gradient_matches_finite_differences, assert_within_mc_error, draw_iid, midpoint_2d,
        rng,
    };

    /// A covariance that factors but whose inverse overflows (variance
    /// 1e-320) is refused: its log density at the mean was NaN.
    #[test]
    fn covariances_without_a_finite_inverse_are_refused() {
        for variance in [1e-320, 1e-310] {
            let result = GaussianMixture::isotropic(&[1.0], &[vec![0.0, 0.0]], &[variance]);
            assert!(result.is_err(), "variance {variance} accepted");
        }
        let tiny = GaussianMixture::isotropic(&[1.0], &[vec![0.0]], &[1e-300]).unwrap();
        let expected = -0.5 * (LN_2PI + 1e-300f64.ln());
        let value = tiny.log_density(&[0.0], &mut rng(1));
        assert!((value - expected).abs() < 1e-12 * expected.abs());
    }

    /// A reversed or NaN interval is an error, not a negative or NaN
    /// probability; an empty interval `[a, a]` has probability 0.
    #[test]
    fn pair_box_probability_refuses_reversed_intervals() {
        let mixture = GaussianMixture::ckam_bimodal(false);
        let whole = (f64::NEG_INFINITY, f64::INFINITY);
        for bad in [(1.0, -1.0), (f64::NAN, 1.0), (0.0, f64::NAN)] {
            assert!(mixture.pair_box_probability(0, 1, bad, whole).is_err());
            assert!(mixture.pair_box_probability(0, 1, whole, bad).is_err());
        }
        assert_eq!(
            mixture
                .pair_box_probability(0, 1, (2.0, 2.0), whole)
                .unwrap(),
            0.0
        );
        let all = mixture.pair_box_probability(0, 1, whole, whole).unwrap();
        assert!((all - 1.0).abs() < 1e-15);
    }

    /// A 3-d mixture with correlated covariances, for checks that diagonal
    /// covariances would not exercise.
    fn correlated_mixture() -> GaussianMixture {
        let c1 = Mat::from_fn(3, 3, |i, j| {
            [[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]][i][j]
        });
        let c2 = Mat::from_fn(3, 3, |i, j| {
            [[0.7, -0.4, 0.0], [-0.4, 1.5, 0.3], [0.0, 0.3, 1.2]][i][j]
        });
        GaussianMixture::new(
            &[0.3, 0.7],
            &[vec![-1.0, 2.0, 0.5], vec![2.0, -1.0, 1.0]],
            &[c1, c2],
        )
        .unwrap()
    }

    /// The same mixture's density from scratch: explicit 3 × 3 inverse via
    /// cofactors and determinant, naive sum of exponentials.
    fn naive_density(x: &[f64]) -> f64 {
        let covs = [
            [[2.0, 0.6, -0.3], [0.6, 1.0, 0.2], [-0.3, 0.2, 0.5]],
            [[0.7, -0.4, 0.0], [-0.4, 1.5, 0.3], [0.0, 0.3, 1.2]],
        ];
        let means = [[-1.0, 2.0, 0.5], [2.0, -1.0, 1.0]];
        let weights = [0.3, 0.7];
        (0..2)
            .map(|k| {
                let a = covs[k];
                let cof = |i: usize, j: usize| {
                    let (r0, r1) = ((i + 1) % 3, (i + 2) % 3);
                    let (c0, c1) = ((j + 1) % 3, (j + 2) % 3);
                    a[r0][c0] * a[r1][c1] - a[r0][c1] * a[r1][c0]
                };
                let det: f64 = (0..3).map(|j| a[0][j] * cof(0, j)).sum();
                let r: Vec<f64> = (0..3).map(|i| x[i] - means[k][i]).collect();
                // inverse[i][j] = cof(j, i)/det (cyclic cofactors carry the sign).
                let quad: f64 = (0..3)
                    .flat_map(|i| (0..3).map(move |j| (i, j)))
                    .map(|(i, j)| r[i] * cof(j, i) / det * r[j])
                    .sum();
                weights[k] * (-0.5 * quad).exp()
                    / ((2.0 * std::f64::consts::PI).powi(3) * det).sqrt()
            })
            .sum()
    }

    /// Weights whose sum overflows still give finite proportions: the same
    /// mixture as the weights scaled down.
    #[test]
    fn weights_whose_sum_overflows_are_normalised() {
        let means = [vec![0.0], vec![1.0]];
        let huge = GaussianMixture::isotropic(&[1e308, 1.5e308], &means, &[1.0, 2.0]).unwrap();
        let scaled = GaussianMixture::isotropic(&[1.0, 1.5], &means, &[1.0, 2.0]).unwrap();
        for (w, want) in huge.weights().iter().zip([0.4, 0.6]) {
            assert!((w - want).abs() <= 1e-15, "{:?}", huge.weights());
        }
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
        for x in [-1.0, 0.3, 2.0] {
            let (a, b) = (
                huge.log_density(&[x], &mut rng),
                scaled.log_density(&[x], &mut rng),
            );
            assert!((a - b).abs() <= 1e-15 * b.abs(), "{a} vs {b}");
        }
    }

    /// Dimensions whose d × d matrices are beyond memory are errors, not
    /// aborts (2⁵⁶ values: beyond any address space; 2⁶² overflows).
    #[test]
    fn covariances_beyond_memory_are_errors() {
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(0);
        for dim in [1 << 28, 1 << 31] {
            let err = random_rotated_covariance(dim, &mut rng).unwrap_err();
            assert!(err.to_string().contains("d × d"), "{err}");
            assert!(GaussianMixture::random_rotated_gaussian(dim, 1).is_err());
        }
        // 2²² coordinates (32 MiB) whose covariance would take 128 TiB
        let err = GaussianMixture::isotropic(&[1.0], &[vec![0.0; 1 << 22]], &[1.0]).unwrap_err();
        assert!(err.to_string().contains("covariances"), "{err}");
    }

    #[test]
    fn rejects_invalid_parameters() {
        let i2 = Mat::<f64>::identity(2, 2);
        assert!(GaussianMixture::new(&[], &[], &[]).is_err());
        assert!(GaussianMixture::new(&[1.0], &[vec![0.0; 2]], &[]).is_err());
        assert!(GaussianMixture::new(&[-1.0], &[vec![0.0; 2]], std::slice::from_ref(&i2)).is_err());
        assert!(
            GaussianMixture::new(&[1.0], &[vec![f64::NAN; 2]], std::slice::from_ref(&i2)).is_err()
        );
        assert!(GaussianMixture::new(&[1.0], &[vec![0.0; 3]], std::slice::from_ref(&i2)).is_err());
        let asymmetric = Mat::from_fn(2, 2, |i, j| {
            if i < j {
                0.5
            } else {
                f64::from(u8::from(i == j))
            }
        });
        assert!(GaussianMixture::gaussian(&[0.0; 2], &asymmetric).is_err());
        let indefinite = Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 2.0 });
        assert!(GaussianMixture::gaussian(&[0.0; 2], &indefinite).is_err());
        let mixture = correlated_mixture();
        assert!(mixture.marginal_log_density(3, 0.0).is_err());
        assert!(mixture.pair_marginal_log_density(1, 1, (0.0, 0.0)).is_err());
        assert!(mixture.sample_iid(&mut rng(0), &mut [0.0; 2]).is_err());
        assert!(mixture.log_density(&[0.0; 2], &mut rng(0)).is_nan());
        assert!(haar_orthogonal(0, &mut rng(0)).is_err());
    }

    #[test]
    fn log_density_matches_naive_formula() {
        let mixture = correlated_mixture();
        let mut r = rng(1);
        for x in [
            [0.0, 0.0, 0.0],
            [-1.0, 2.0, 0.5],
            [3.0, -2.0, 2.0],
            [0.5, 0.5, -1.0],
        ] {
            let got = mixture.log_density(&x, &mut r);
            let expected = naive_density(&x).ln();
            assert!((got - expected).abs() < 1e-12, "{x:?}: {got} vs {expected}");
        }
        // Far away the naive sum underflows; log-sum-exp stays finite.
        assert!(mixture.log_density(&[1e3, -1e3, 1e3], &mut r).is_finite());
    }

    /// Far beyond the components' scale every density underflows: the log
    /// densities are −∞ (they were NaN: −∞ − (−∞) in the log-sum-exp, or
    /// ∞ − ∞ in a correlated quadratic form), a single Gaussian's gradient
    /// is still −Σ⁻¹(x − μ), and a mixture's gradient, whose weights are
    /// 0/0 there, is an error rather than NaN.
    #[test]
    fn far_beyond_the_components_nothing_is_nan() {
        let mut r = rng(0);
        let x = [1e200, -1e200];
        let single = GaussianMixture::isotropic(&[1.0], &[vec![0.0, 0.0]], &[2.0]).unwrap();
        let correlated = GaussianMixture::gaussian(
            &[0.0, 0.0],
            &Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 0.5 }),
        )
        .unwrap();
        let pair =
            GaussianMixture::isotropic(&[1.0, 1.0], &[vec![0.0, 0.0], vec![5.0, 5.0]], &[1.0, 1.0])
                .unwrap();
        for mixture in [&single, &correlated, &pair] {
            assert_eq!(mixture.log_density(&x, &mut r), f64::NEG_INFINITY);
            assert_eq!(
                mixture.marginal_log_density(0, 1e300).unwrap(),
                f64::NEG_INFINITY
            );
        }
        let mut grad = [0.0; 2];
        single.grad_log_density(&x, &mut grad).unwrap();
        assert!(
            (grad[0] / -0.5e200 - 1.0).abs() < 1e-15 && (grad[1] / 0.5e200 - 1.0).abs() < 1e-15,
            "{grad:?}"
        );
        assert!(matches!(
            pair.grad_log_density(&x, &mut grad),
            Err(TargetError::Numerical(_))
        ));
        // nearer, where the densities are positive, nothing changes
        pair.grad_log_density(&[1e5, 1e5], &mut grad).unwrap();
        assert_eq!(grad, [-99995.0, -99995.0]);
    }

    /// A pair block whose determinant a·c − b² under- or overflows (scales
    /// of 1e±200, which the constructor accepts) has the pair marginal of
    /// the rescaled problem (it was NaN: 0/0 and ln 0).
    #[test]
    fn pair_marginal_of_extreme_scales_is_finite() {
        let unit = Mat::from_fn(2, 2, |i, j| if i == j { 1.0 } else { 0.3 });
        let base = GaussianMixture::gaussian(&[0.0, 0.0], &unit).unwrap();
        let at_unit = base.pair_marginal_log_density(0, 1, (0.5, -0.2)).unwrap();
        for scale in [1e-200, 1e200] {
            let scaled =
                GaussianMixture::gaussian(&[0.0, 0.0], &(&unit * faer::Scale(scale))).unwrap();
            let sd = scale.sqrt();
            // the density of σx at σy is that of x at y over σ²
            let got = scaled
                .pair_marginal_log_density(0, 1, (0.5 * sd, -0.2 * sd))
                .unwrap();
            let expected = at_unit - scale.ln();
            assert!(
                (got - expected).abs() < 1e-12 * expected.abs(),
                "{scale}: {got} vs {expected}"
            );
        }
    }

    /// 2-d midpoint quadrature over mean ± 10 sd of every component.
    #[test]
    fn ckam_targets_are_normalised() {
        let mut r = rng(0);
        let cases = [
            (
                GaussianMixture::ckam_bimodal(false),
                (-16.0, 24.0),
                (-15.0, 15.0),
            ),
            (
                GaussianMixture::ckam_bimodal(true),
                (-16.0, 24.0),
                (-15.0, 15.0),
            ),
            (
                GaussianMixture::ckam_five_components(),
                (-10.0, 25.0),
                (-10.0, 25.0),
            ),
        ];
        for (mixture, (a0, b0), (a1, b1)) in cases {
            let mass = midpoint_2d(
                (a0, b0, 1000),
                |_| (a1, b1),
                1000,
                |x, y| mixture.log_density(&[x, y], &mut r).exp(),
            );
            assert!((mass - 1.0).abs() < 1e-8, "mass {mass}");
        }
        let bimodal = GaussianMixture::ckam_bimodal(true);
        assert!((bimodal.weights()[0] - 1.0 / 3.0).abs() < 1e-15);
        let five = GaussianMixture::ckam_five_components();
        let mut mean = [0.0; 2];
        five.exact_mean(&mut mean).unwrap();
        assert_eq!(mean, [5.0, 5.0]);
        assert!((five.covariance_entry(3, 1, 1) - 2.0).abs() < 1e-15);
    }

    /// Marginals against numerical integration of the joint density over the
    /// other coordinates (midpoint rule on smooth Gaussian integrands, ±12 sd
    /// boxes: error ≪ 10⁻⁸).
    #[test]
    fn marginals_integrate_the_joint_density() {
        let mixture = correlated_mixture();
        let mut r = rng(0);
        // Coordinate 0 at t: integrate over (x₁, x₂).
        for t in [-2.0, 0.3, 2.5] {
            let m = midpoint_2d(
                (-14.0, 16.0, 600),
                |_| (-11.0, 13.0),
                600,
                |y, z| mixture.log_density(&[t, y, z], &mut r).exp(),
            );
            let got = mixture.marginal_log_density(0, t).unwrap().exp();
            assert!((got - m).abs() < 1e-8, "marginal at {t}: {got} vs {m}");
        }
        // Pair (2, 0) at (s, t): integrate over x₁.
        for (s, t) in [(0.5, -1.0), (1.5, 2.0)] {
            let n = 4000;
            let h = 30.0 / n as f64;
            let m: f64 = (0..n)
                .map(|k| {
                    let y = -15.0 + (k as f64 + 0.5) * h;
                    mixture.log_density(&[t, y, s], &mut r).exp() * h
                })
                .sum();
            let got = mixture
                .pair_marginal_log_density(2, 0, (s, t))
                .unwrap()
                .exp();
            assert!((got - m).abs() < 1e-10, "pair marginal: {got} vs {m}");
        }
        // CDF against the integral of the marginal density from −20 (12 sd
        // below every component). The midpoint rule's O(h²) error at the
        // upper edge is cancelled by Richardson extrapolation (n and 2n).
        let (a, b) = (-20.0, 1.3);
        let quadrature = |n: usize| {
            let h = (b - a) / n as f64;
            (0..n)
                .map(|k| {
                    mixture
                        .marginal_log_density(1, a + (k as f64 + 0.5) * h)
                        .unwrap()
                        .exp()
                        * h
                })
                .sum::<f64>()
        };
        let integral = (4.0 * quadrature(4000) - quadrature(2000)) / 3.0;
        let cdf = mixture.marginal_cdf(1, b).unwrap();
        assert!((cdf - integral).abs() < 1e-10, "cdf {cdf} vs {integral}");
    }

    /// Box probabilities against 2-d quadrature of the pair marginal density.
    /// On a box where the integrand does not vanish at the edges the midpoint
    /// rule is O(h²); Richardson extrapolation of n = 200 and 400 nodes per
    /// axis, (4 I₄₀₀ − I₂₀₀)/3, cancels that term and leaves O(h⁴) ≈ 10⁻¹⁰.
    /// Correlated pairs are refused.
    #[test]
    fn pair_box_probabilities_integrate_the_pair_marginal() {
        let five = GaussianMixture::ckam_five_components();
        for (s, t) in [((-1.0, 3.0), (0.5, 6.0)), ((4.0, 12.0), (-2.0, 2.5))] {
            let quadrature = |n| {
                midpoint_2d(
                    (s.0, s.1, n),
                    |_| t,
                    n,
                    |a, b| five.pair_marginal_log_density(0, 1, (a, b)).unwrap().exp(),
                )
            };
            let m = (4.0 * quadrature(400) - quadrature(200)) / 3.0;
            let got = five.pair_box_probability(0, 1, s, t).unwrap();
            assert!((got - m).abs() < 1e-8, "{got} vs {m}");
        }
        let wide = (-1e3, 1e3);
        assert!((five.pair_box_probability(1, 0, wide, wide).unwrap() - 1.0).abs() < 1e-15);
        assert!(
            correlated_mixture()
                .pair_box_probability(0, 1, wide, wide)
                .is_err()
        );
    }

    /// First and second moments of iid draws against the exact
    /// `E x = Σ w μ` and `E x xᵀ = Σ w (Σ_k + μ_k μ_kᵀ)`, with 5 empirical
    /// standard errors.
    #[test]
    fn iid_sampler_matches_moments() {
        let (mixture, n) = (correlated_mixture(), 100_000);
        let draws = draw_iid(&mixture, n, 9);
        let mut mean = [0.0; 3];
        mixture.exact_mean(&mut mean).unwrap();
        for i in 0..3 {
            for j in 0..=i {
                let second: f64 = (0..2)
                    .map(|k| {
                        mixture.weights[k]
                            * (mixture.covariance_entry(k, i, j)
                                + mixture.mean_entry(k, i) * mixture.mean_entry(k, j))
                    })
                    .sum();
                let values: Vec<f64> = draws.chunks(3).map(|x| x[i] * x[j]).collect();
                let m = values.iter().sum::<f64>() / n as f64;
                let sd = (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
                assert_within_mc_error(&format!("E x{i} x{j}"), m, second, sd, n);
            }
            let values: Vec<f64> = draws.chunks(3).map(|x| x[i]).collect();
            let m = values.iter().sum::<f64>() / n as f64;
            let sd = (values.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n as f64).sqrt();
            assert_within_mc_error(&format!("E x{i}"), m, mean[i], sd, n);
        }
    }

    #[test]
    fn gradient_matches_finite_differences() {
        let mixture = correlated_mixture();
        let mut r = rng(4);
        let mut x = [0.0; 3];
        for _ in 0..20 {
            mixture.sample_iid(&mut r, &mut x).unwrap();
            assert_gradient_matches_finite_differences(&mixture, &x);
        }
        // Between the modes, where both responsibilities matter.
        assert_gradient_matches_finite_differences(&mixture, &[0.5, 0.5, 0.7]);
        let bimodal = GaussianMixture::ckam_bimodal(false);
        assert_gradient_matches_finite_differences(&bimodal, &[0.3, -0.4]);
    }

    #[test]
    fn haar_matrices_are_orthogonal_with_haar_moments() {
        let (d, n) = (4, 4000);
        let mut r = rng(21);
        let (mut sum, mut sum_sq) = (0.0, 0.0);
        for _ in 0..n {
            let q = haar_orthogonal(d, &mut r).unwrap();
            for i in 0..d {
                for j in 0..d {
                    let dot: f64 = (0..d).map(|k| q[(k, i)] * q[(k, j)]).sum();
                    let expected = f64::from(u8::from(i == j));
                    assert!((dot - expected).abs() < 1e-12);
                }
            }
            sum += q[(0, 0)];
            sum_sq += q[(0, 0)] * q[(0, 0)];
        }
        // Under Haar measure a column is uniform on the sphere: Q₀₀ has mean
        // 0 and variance 1/d (E Q₀₀⁴ = 3/(d(d+2)) gives the sd of Q₀₀²).
        // Without the sign correction Q₀₀ is biased.
        let dd = d as f64;
        assert_within_mc_error("E Q00", sum / n as f64, 0.0, (1.0 / dd).sqrt(), n);
        let sd_sq = (3.0 / (dd * (dd + 2.0)) - 1.0 / (dd * dd)).sqrt();
        assert_within_mc_error("E Q00²", sum_sq / n as f64, 1.0 / dd, sd_sq, n);
    }

    /// The rotated Gaussian's log density against the eigendecomposition of
    /// its covariance (independent of the Cholesky path), and seeding.
    #[test]
    fn rotated_gaussian_density_matches_eigendecomposition() {
        let d = 5;
        let gaussian = GaussianMixture::random_rotated_gaussian(d, 42).unwrap();
        assert_eq!(
            gaussian,
            GaussianMixture::random_rotated_gaussian(d, 42).unwrap()
        );
        assert_ne!(
            gaussian,
            GaussianMixture::random_rotated_gaussian(d, 43).unwrap()
        );
        let cov = Mat::from_fn(d, d, |i, j| gaussian.covariance_entry(0, i, j));
        let evd = cov.self_adjoint_eigen(Side::Lower).unwrap();
        let (s, u) = (evd.S(), evd.U());
        let x = [0.3, -1.2, 0.8, 2.0, -0.5];
        let mut expected = -0.5 * d as f64 * LN_2PI;
        for k in 0..d {
            let proj: f64 = (0..d).map(|i| u[(i, k)] * x[i]).sum();
            expected -= 0.5 * (s[k].ln() + proj * proj / s[k]);
        }
        let got = gaussian.log_density(&x, &mut rng(0));
        assert!((got - expected).abs() < 1e-9, "{got} vs {expected}");
    }
}
