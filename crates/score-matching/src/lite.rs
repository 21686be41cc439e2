//! The lite estimator (KMC Prop. 1): `f = Σ αᵢ k(zᵢ, ·)` with a Gaussian kernel.

use crate::error::{check_points, positive};
use crate::{GradientModel, ScoreMatchingError};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::solvers::Solve;
use faer::{Accum, Col, Mat, MatRef, Par, Side};
use kameleon_kernels::Gaussian;
use kameleon_kernels::fastmath::exp;

/// The regulariser added to the lite system matrix `C`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum LiteRegulariser {
    /// `C + λI`, as in KMC Prop. 1 (the default).
    #[default]
    Identity,
    /// `C + λ(K + I)`, what the public kernel_exp_family / kamiltonian code
    /// does (`K` the kernel matrix of the basis points).
    KernelPlusIdentity,
}

/// The KMC lite estimator (Prop. 1): `f(x) = Σᵢ αᵢ k(zᵢ, x)` over the fitted
/// points `zᵢ` (pass a subsample of the chain history to [`GradientModel::fit`]),
/// with `α̂ = −(σ/2)(C + λR)⁻¹ b`, `R = I` or `K + I` ([`LiteRegulariser`]).
///
/// **Gaussian kernel only**: `k(x, y) = exp(−‖x − y‖²/σ)` (the lite σ; the
/// length-scale is `ℓ = √(σ/2)`, see [`LiteEstimator::kernel`]). The closed
/// forms of `b` and `C` are specific to this kernel.
///
/// `α̂` is the exact minimiser of `Ĵ(α) + (2λ/(nσ²)) αᵀRα`, where `Ĵ` is the
/// empirical score-matching objective on the `n` fitted points: the paper's λ
/// is this scaled ridge. `C` is computed in O(n³ + dn²) from
/// `C_ij = Σ_k K_ki K_kj ⟨z_k − z_i, z_k − z_j⟩` with two n × n products, and
/// the system is solved with a Cholesky factorisation.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct LiteEstimator {
    sigma: f64,
    lambda: f64,
    regulariser: LiteRegulariser,
    /// The dimension d (0 before a fit).
    dim: usize,
    /// The basis points, column-major (n × d): coordinate l of all points is
    /// the contiguous slice `basis[l n..(l + 1) n]`, which the gradient
    /// streams through.
    basis: Vec<f64>,
    alpha: Vec<f64>,
    /// Per-basis-point scratch of the evaluations: `‖x − zᵢ‖²`, then
    /// `αᵢ k(zᵢ, x)` (sized at fit, or lazily after deserialisation).
    #[serde(skip)]
    squared_distances: Vec<f64>,
    #[serde(skip)]
    weights: Vec<f64>,
}

impl LiteEstimator {
    /// An unfitted estimator with lite bandwidth `σ > 0` and ridge `λ > 0`,
    /// regularised with `λI`.
    pub fn new(sigma: f64, lambda: f64) -> Result<Self, ScoreMatchingError> {
        Ok(Self {
            sigma: positive("sigma", sigma)?,
            lambda: positive("lambda", lambda)?,
            regulariser: LiteRegulariser::Identity,
            dim: 0,
            basis: Vec::new(),
            alpha: Vec::new(),
            squared_distances: Vec::new(),
            weights: Vec::new(),
        })
    }

    /// The same estimator with another regulariser (applies at the next fit).
    pub fn with_regulariser(mut self, regulariser: LiteRegulariser) -> Self {
        self.regulariser = regulariser;
        self
    }

    /// The lite bandwidth σ of `exp(−‖x − y‖²/σ)`.
    pub fn sigma(&self) -> f64 {
        self.sigma
    }

    /// The ridge λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// The regulariser in use.
    pub fn regulariser(&self) -> LiteRegulariser {
        self.regulariser
    }

    /// The kernel as a [`Gaussian`] of the kernels crate (`ℓ = √(σ/2)`).
    pub fn kernel(&self) -> Gaussian {
        Gaussian::from_lite_sigma(self.sigma).expect("sigma validated at construction")
    }

    /// The basis points `zᵢ` (n × d, one per row; empty before a fit).
    pub fn basis(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(&self.basis, self.alpha.len(), self.dim)
    }

    /// The fitted coefficients α (empty before a fit).
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Fills the scratch with `‖x − zᵢ‖²` and `αᵢ k(zᵢ, x)` for every basis
    /// point, streaming through the basis one coordinate at a time so the
    /// loops vectorise (the exponential included, see [`crate::exp`]).
    #[inline(always)]
    fn evaluate_weights(&mut self, x: &[f64]) {
        let n = self.alpha.len();
        if self.weights.len() != n {
            // only the first evaluation after a deserialisation
            self.squared_distances = vec![0.0; n];
            self.weights = vec![0.0; n];
        }
        let r2 = &mut self.squared_distances;
        r2.fill(0.0);
        for (xl, column) in x.iter().zip(self.basis.chunks_exact(n.max(1))) {
            for (r, z) in r2.iter_mut().zip(column) {
                let diff = xl - z;
                *r += diff * diff;
            }
        }
        let sigma = self.sigma;
        for ((w, r), a) in self.weights.iter_mut().zip(r2.iter()).zip(&self.alpha) {
            *w = a * exp(-r / sigma);
        }
    }
}

/// The lite gradient as a [`pulp::WithSimd`] operation: dispatched to the
/// best instruction set of the running CPU (AVX2 on x86-64 where available),
/// so its loops vectorise 4 wide. No FMA contraction happens (Rust never
/// contracts), so the result does not depend on the CPU.
struct LiteGradient<'a> {
    model: &'a mut LiteEstimator,
    x: &'a [f64],
    out: &'a mut [f64],
}

impl pulp::WithSimd for LiteGradient<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { model, x, out } = self;
        model.evaluate_weights(x);
        // ∂_l f = −(2/σ) Σᵢ αᵢ kᵢ (x_l − z_il)
        let n = model.alpha.len();
        for ((g, xl), column) in out.iter_mut().zip(x).zip(model.basis.chunks_exact(n)) {
            *g = -2.0 / model.sigma * weighted_differences(&model.weights, column, *xl);
        }
    }
}

/// `Σᵢ wᵢ (x_l − z_il)` over one basis column, in four interleaved partial
/// sums so that the loop vectorises.
#[inline(always)]
fn weighted_differences(weights: &[f64], column: &[f64], xl: f64) -> f64 {
    let mut lanes = [0.0; 4];
    let (w_chunks, z_chunks) = (weights.chunks_exact(4), column.chunks_exact(4));
    let (w_rest, z_rest) = (w_chunks.remainder(), z_chunks.remainder());
    for (w, z) in w_chunks.zip(z_chunks) {
        for k in 0..4 {
            lanes[k] += w[k] * (xl - z[k]);
        }
    }
    let tail: f64 = w_rest.iter().zip(z_rest).map(|(w, z)| w * (xl - z)).sum();
    (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]) + tail
}

/// The lite statistics of Prop. 1 on basis = data `z` (n × d): the kernel
/// matrix `K`, the vector `b` and the matrix `C` (full, symmetric).
pub(crate) struct LiteSystem {
    pub(crate) kernel: Mat<f64>,
    pub(crate) b: Col<f64>,
    pub(crate) c: Mat<f64>,
}

/// Computes `K`, `b` and `C` of Prop. 1 in O(n³ + dn²).
///
/// With `s_k = ‖z_k‖²` and `G = ZZᵀ`,
/// `C_ij = Σ_k K_ki K_kj (s_k − G_ki − G_kj + G_ij) = (BᵀK + KᵀB)_ij + G_ij (KᵀK)_ij`
/// where `B_ki = K_ki (s_k/2 − G_ki)`; and
/// `b_i = Σ_k K_ik ((2/σ)‖z_k − z_i‖² − d)`.
///
/// The two n × n products are the whole cost: `P = BᵀK` (2n³ flops, full)
/// and the symmetric `KᵀK`, of which only the lower triangle is formed (n³
/// flops); both run on faer's parallel kernels.
pub(crate) fn lite_system(z: MatRef<'_, f64>, sigma: f64) -> LiteSystem {
    let (n, d) = (z.nrows(), z.ncols());
    let par = Par::rayon(0);
    let mut gram = Mat::<f64>::zeros(n, n);
    matmul(
        gram.as_mut(),
        Accum::Replace,
        z,
        z.transpose(),
        1.0,
        Par::Seq,
    );
    let sq: Vec<f64> = (0..n).map(|i| gram[(i, i)]).collect();
    let dist2 = |i: usize, j: usize, g: f64| (sq[i] + sq[j] - 2.0 * g).max(0.0);
    let kernel = Mat::from_fn(n, n, |i, j| exp(-dist2(i, j, gram[(i, j)]) / sigma));
    let b = Col::from_fn(n, |i| {
        (0..n)
            .map(|k| kernel[(i, k)] * (2.0 / sigma * dist2(i, k, gram[(i, k)]) - d as f64))
            .sum()
    });
    let half_b = Mat::from_fn(n, n, |k, i| kernel[(k, i)] * (0.5 * sq[k] - gram[(k, i)]));
    let mut product = Mat::<f64>::zeros(n, n);
    matmul(
        product.as_mut(),
        Accum::Replace,
        half_b.transpose(),
        kernel.as_ref(),
        1.0,
        par,
    );
    let mut kk = Mat::<f64>::zeros(n, n);
    triangular::matmul(
        kk.as_mut(),
        BlockStructure::TriangularLower,
        Accum::Replace,
        kernel.transpose(),
        BlockStructure::Rectangular,
        kernel.as_ref(),
        BlockStructure::Rectangular,
        1.0,
        par,
    );
    // C = P + Pᵀ + G ∘ KᵀK with P = BᵀK, from the lower triangle of KᵀK.
    let mut c = Mat::<f64>::zeros(n, n);
    for j in 0..n {
        for i in j..n {
            let value = product[(i, j)] + product[(j, i)] + gram[(i, j)] * kk[(i, j)];
            c[(i, j)] = value;
            c[(j, i)] = value;
        }
    }
    LiteSystem { kernel, b, c }
}

impl GradientModel for LiteEstimator {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Fits on all rows of `points` as basis (subsample before calling).
    /// Needs at least one point.
    fn fit(&mut self, points: MatRef<'_, f64>) -> Result<(), ScoreMatchingError> {
        let n = points.nrows();
        if n == 0 {
            return Err(ScoreMatchingError::TooFewPoints { needed: 1, got: 0 });
        }
        check_points(points, points.ncols())?;
        let LiteSystem { kernel, b, mut c } = lite_system(points, self.sigma);
        for i in 0..n {
            for j in 0..n {
                let reg = match self.regulariser {
                    LiteRegulariser::Identity => 0.0,
                    LiteRegulariser::KernelPlusIdentity => kernel[(i, j)],
                };
                c[(i, j)] += self.lambda * (reg + if i == j { 1.0 } else { 0.0 });
            }
        }
        let llt = c
            .llt(Side::Lower)
            .map_err(|_| ScoreMatchingError::NotPositiveDefinite)?;
        let solution = llt.solve(&b);
        let scale = -0.5 * self.sigma;
        self.alpha = (0..n).map(|i| scale * solution[i]).collect();
        let d = points.ncols();
        self.dim = d;
        self.basis.clear();
        self.basis
            .extend((0..d).flat_map(|l| (0..n).map(move |i| points[(i, l)])));
        self.squared_distances = vec![0.0; n];
        self.weights = vec![0.0; n];
        Ok(())
    }

    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64 {
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        self.evaluate_weights(x);
        self.weights.iter().sum()
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == out.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        if self.alpha.is_empty() {
            out.fill(0.0);
            return;
        }
        pulp::Arch::new().dispatch(LiteGradient {
            model: self,
            x,
            out,
        });
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.grad_log_density(x, grad);
        // Σ_l ∂²_l k = ((4/σ²)‖x − z‖² − 2d/σ) k
        let (s, d) = (self.sigma, x.len() as f64);
        self.weights
            .iter()
            .zip(&self.squared_distances)
            .map(|(w, r2)| (4.0 / (s * s) * r2 - 2.0 * d / s) * w)
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast `C` and `b` equal Prop. 1 as printed:
    /// `C = Σ_l (D_l K − K D_l)(K D_l − D_l K)`,
    /// `b = Σ_l ((2/σ)(K s_l + D_{s_l} K 1 − 2 D_l K x_l) − K1)`, O(dn³) with
    /// explicit diagonal matrices.
    #[test]
    fn fast_system_equals_printed_formula() {
        let (n, d, sigma) = (13, 4, 1.7);
        let z = Mat::from_fn(n, d, |i, l| ((i * 7 + l * 3) as f64 * 0.37).sin() * 1.5);
        let fast = lite_system(z.as_ref(), sigma);
        let k = Mat::from_fn(n, n, |i, j| {
            let r2: f64 = (0..d).map(|l| (z[(i, l)] - z[(j, l)]).powi(2)).sum();
            (-r2 / sigma).exp()
        });
        let mut c = Mat::<f64>::zeros(n, n);
        let mut b = Col::<f64>::zeros(n);
        let ones = Col::<f64>::from_fn(n, |_| 1.0);
        for l in 0..d {
            let xl = Col::from_fn(n, |i| z[(i, l)]);
            let sl = Col::from_fn(n, |i| z[(i, l)] * z[(i, l)]);
            let dx = Mat::from_fn(n, n, |i, j| if i == j { xl[i] } else { 0.0 });
            let ds = Mat::from_fn(n, n, |i, j| if i == j { sl[i] } else { 0.0 });
            let left = &dx * &k - &k * &dx;
            let right = &k * &dx - &dx * &k;
            c += &left * &right;
            let term =
                (&k * &sl + &ds * &k * &ones - &dx * &k * &xl * 2.0) * (2.0 / sigma) - &k * &ones;
            b += term;
        }
        let c_scale = (0..n).map(|i| c[(i, i)].abs()).fold(0.0, f64::max);
        for i in 0..n {
            assert!((fast.b[i] - b[i]).abs() <= 1e-12 * b.norm_max());
            assert!((fast.kernel[(i, i)] - 1.0).abs() < 1e-15);
            for j in 0..n {
                assert!((fast.c[(i, j)] - c[(i, j)]).abs() <= 1e-12 * c_scale);
                assert!((fast.kernel[(i, j)] - k[(i, j)]).abs() <= 1e-14);
            }
        }
    }
}
