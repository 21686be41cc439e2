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
    /// The evaluation layout, derived from `basis` and `alpha` (rebuilt
    /// after a deserialisation).
    #[serde(skip)]
    packed: Packed,
}

/// Basis points per block of the evaluation layout: two AVX2 vectors of
/// `f64`, so that two independent exponential evaluations are in flight.
const LANES: usize = 8;

/// Basis points per chunk of an evaluation pass (a multiple of [`LANES`]):
/// the three steps of the pass run chunk by chunk on data in the L1 cache.
const CHUNK: usize = 64;

/// The fitted basis in the layout the evaluations stream through, and their
/// scratch. With the centre `c` (the mean of the basis points), the
/// evaluation at `x` uses the expanded distance
/// `−‖x − zᵢ‖²/σ = −‖zᵢ − c‖²/σ − ‖x − c‖²/σ + (2/σ)(zᵢ − c)ᵀ(x − c)`:
/// one pass over the basis computes the exponents (a d × n mat-vec), the
/// weights `wᵢ = αᵢ exp(·)` and the sums `Σ wᵢ (zᵢ − c)` (a d × n mat-vec),
/// from which `∇f(x) = (2/σ)[Σ wᵢ (zᵢ − c) − (x − c) Σ wᵢ]`.
///
/// Accuracy: the expanded exponent carries an absolute rounding error of a
/// few ulp of `(‖zᵢ − c‖² + ‖x − c‖²)/σ` (the direct form: of `‖x − zᵢ‖²/σ`),
/// i.e. a relative error of that size in `wᵢ`; centring keeps it at the
/// scale of the data's spread rather than of its distance from the origin.
/// The gradient's two terms cancel where `∇f ≈ 0`, with an absolute error of
/// a few ulp of `(2/σ) Σ |wᵢ| (‖zᵢ − c‖ + ‖x − c‖)`. Both are tested against
/// the direct form.
#[derive(Debug, Clone, Default)]
struct Packed {
    /// The centre `c`, length d.
    centre: Vec<f64>,
    /// Blocks of [`LANES`] points: `z_{bL+k, l} − c_l` at `(b d + l) L + k`
    /// (`L` = [`LANES`]), padded with zero points to a whole number of
    /// [`CHUNK`]s.
    points: Vec<f64>,
    /// `−‖zᵢ − c‖²/σ` per point (0 for the padding).
    offsets: Vec<f64>,
    /// `αᵢ` per point (0 for the padding, so it never contributes).
    alpha: Vec<f64>,
    /// Scratch: `(2/σ)(x − c)`.
    direction: Vec<f64>,
    /// Scratch: `−‖x − zᵢ‖²/σ` per point.
    exponents: Vec<f64>,
    /// Scratch: `wᵢ = αᵢ k(zᵢ, x)` per point.
    weights: Vec<f64>,
    /// Scratch: per coordinate l and lane k, the partial sums of
    /// `wᵢ (z_il − c_l)` at `l L + k`.
    sums: Vec<f64>,
}

impl Packed {
    /// The layout of the basis `z` (n × d, column-major slice) and `alpha`.
    fn new(basis: &[f64], alpha: &[f64], dim: usize, sigma: f64) -> Self {
        let n = alpha.len();
        let blocks = n.next_multiple_of(CHUNK) / LANES;
        let columns = || basis.chunks_exact(n.max(1)).take(dim);
        let centre: Vec<f64> = columns()
            .map(|column| column.iter().sum::<f64>() / n as f64)
            .collect();
        let mut points = vec![0.0; blocks * dim * LANES];
        for (l, (column, cl)) in columns().zip(&centre).enumerate() {
            for (i, z) in column.iter().enumerate() {
                points[((i / LANES) * dim + l) * LANES + i % LANES] = z - cl;
            }
        }
        let mut offsets = vec![0.0; blocks * LANES];
        for (i, offset) in offsets.iter_mut().enumerate().take(n) {
            let (b, k) = (i / LANES, i % LANES);
            let norm: f64 = (0..dim)
                .map(|l| points[(b * dim + l) * LANES + k].powi(2))
                .sum();
            *offset = -norm / sigma;
        }
        let mut padded_alpha = vec![0.0; blocks * LANES];
        padded_alpha[..n].copy_from_slice(alpha);
        Self {
            centre,
            points,
            offsets,
            alpha: padded_alpha,
            direction: vec![0.0; dim],
            exponents: vec![0.0; blocks * LANES],
            weights: vec![0.0; blocks * LANES],
            sums: vec![0.0; dim * LANES],
        }
    }
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
            packed: Packed::default(),
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

    /// Evaluates at `x` (of a fitted model): fills the scratch with the
    /// exponents, the weights and the partial sums of [`Packed`] and returns
    /// the lane-partial sums of the weights.
    fn evaluate(&mut self, x: &[f64]) -> [f64; LANES] {
        if self.packed.alpha.len() != self.alpha.len().next_multiple_of(CHUNK) {
            // only the first evaluation after a deserialisation
            self.packed = Packed::new(&self.basis, &self.alpha, self.dim, self.sigma);
        }
        pulp::Arch::new().dispatch(Evaluation {
            packed: &mut self.packed,
            x,
            sigma: self.sigma,
        })
    }
}

/// One evaluation pass over the basis as a [`pulp::WithSimd`] operation:
/// dispatched to the best instruction set of the running CPU (AVX2 + FMA on
/// x86-64 where available), where its loops over blocks of [`LANES`] points
/// vectorise, the exponential included (see
/// [`kameleon_kernels::fastmath::exp`]). The products are accumulated with
/// `f64::mul_add`, a fused multiply-add on every CPU (in software where the
/// instruction is missing), so the result does not depend on the CPU.
///
/// The pass is fused chunk by chunk ([`CHUNK`] points, whose exponents,
/// weights and basis rows stay in the L1 cache between the three steps);
/// each lane of a partial sum adds its points in basis order, so the result
/// does not depend on [`CHUNK`] either.
struct Evaluation<'a> {
    packed: &'a mut Packed,
    x: &'a [f64],
    sigma: f64,
}

impl pulp::WithSimd for Evaluation<'_> {
    type Output = [f64; LANES];

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> [f64; LANES] {
        const {
            assert!(
                LANES.is_multiple_of(S::F64_LANES),
                "a block of LANES points is a whole number of vectors"
            )
        };
        let Self { packed, x, sigma } = self;
        let Packed {
            centre,
            points,
            offsets,
            alpha,
            direction,
            exponents,
            weights,
            sums,
        } = packed;
        let mut norm = 0.0;
        for ((y, xl), cl) in direction.iter_mut().zip(x).zip(centre.iter()) {
            let v = xl - cl;
            norm = v.mul_add(v, norm);
            *y = 2.0 / sigma * v;
        }
        let base = simd.splat_f64s(-norm / sigma);
        let block_len = direction.len() * LANES;
        sums.fill(0.0);
        let mut total = [0.0; LANES];
        let chunks = points
            .chunks_exact(CHUNK / LANES * block_len)
            .zip(offsets.chunks_exact(CHUNK))
            .zip(alpha.chunks_exact(CHUNK))
            .zip(exponents.chunks_exact_mut(CHUNK))
            .zip(weights.chunks_exact_mut(CHUNK));
        for ((((points, offsets), alpha), exponents), weights) in chunks {
            // the exponents, block by block: a d × CHUNK mat-vec
            let rows = points.as_chunks::<LANES>().0;
            let exponent_blocks = exponents.as_chunks_mut::<LANES>().0.iter_mut();
            let offset_blocks = offsets.as_chunks::<LANES>().0.iter();
            let row_blocks = rows.chunks_exact(direction.len());
            for ((exponent, offset), block) in exponent_blocks.zip(offset_blocks).zip(row_blocks) {
                let e = S::as_mut_simd_f64s(exponent).0;
                for (e, o) in e.iter_mut().zip(S::as_simd_f64s(offset).0) {
                    *e = simd.add_f64s(*o, base);
                }
                for (row, y) in block.iter().zip(direction.iter()) {
                    let y = simd.splat_f64s(*y);
                    for (e, z) in e.iter_mut().zip(S::as_simd_f64s(row).0) {
                        *e = simd.mul_add_f64s(*z, y, *e);
                    }
                }
            }
            // the weights: one vectorised loop of exponentials
            for ((w, e), a) in weights.iter_mut().zip(exponents.iter_mut()).zip(alpha) {
                // the distance is ≥ 0: clip the rounding of the expansion
                *e = e.min(0.0);
                *w = a * exp(*e);
            }
            // the weighted sums, coordinate by coordinate (a d × CHUNK
            // mat-vec): the LANES partial sums of one coordinate stay in
            // registers over the chunk's blocks
            let weight_blocks = weights.as_chunks::<LANES>().0;
            for (l, sum) in sums.as_chunks_mut::<LANES>().0.iter_mut().enumerate() {
                let mut acc = *sum;
                let s = S::as_mut_simd_f64s(&mut acc).0;
                let column = rows.chunks_exact(direction.len()).map(|block| &block[l]);
                for (weight, row) in weight_blocks.iter().zip(column) {
                    let w = S::as_simd_f64s(weight).0;
                    for ((s, z), w) in s.iter_mut().zip(S::as_simd_f64s(row).0).zip(w) {
                        *s = simd.mul_add_f64s(*w, *z, *s);
                    }
                }
                *sum = acc;
            }
            for weight in weight_blocks {
                let t = S::as_mut_simd_f64s(&mut total).0;
                for (t, w) in t.iter_mut().zip(S::as_simd_f64s(weight).0) {
                    *t = simd.add_f64s(*t, *w);
                }
            }
        }
        total
    }
}

/// The sum of lane-partial sums, in a fixed order.
fn lane_sum(lanes: &[f64; LANES]) -> f64 {
    lanes.iter().sum()
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
        // column by column (faer is column-major); only the lower triangle
        // is read by the Cholesky factorisation
        match self.regulariser {
            LiteRegulariser::Identity => {
                for i in 0..n {
                    c[(i, i)] += self.lambda;
                }
            }
            LiteRegulariser::KernelPlusIdentity => {
                for j in 0..n {
                    for i in j..n {
                        let identity = if i == j { 1.0 } else { 0.0 };
                        c[(i, j)] += self.lambda * (kernel[(i, j)] + identity);
                    }
                }
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
        self.packed = Packed::new(&self.basis, &self.alpha, d, self.sigma);
        Ok(())
    }

    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64 {
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        if self.alpha.is_empty() {
            return 0.0;
        }
        lane_sum(&self.evaluate(x))
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == out.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        if self.alpha.is_empty() {
            out.fill(0.0);
            return;
        }
        let total = lane_sum(&self.evaluate(x));
        // ∇f = (2/σ) Σᵢ wᵢ (zᵢ − c) − (2/σ)(x − c) Σᵢ wᵢ
        let scale = 2.0 / self.sigma;
        let Packed {
            direction, sums, ..
        } = &self.packed;
        for ((g, sum), y) in out
            .iter_mut()
            .zip(sums.as_chunks::<LANES>().0)
            .zip(direction)
        {
            *g = scale * lane_sum(sum) - y * total;
        }
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.grad_log_density(x, grad);
        // Σ_l ∂²_l k = ((4/σ²)‖x − z‖² − 2d/σ) k = −(2/σ)(2e + d) k with the
        // exponent e = −‖x − z‖²/σ
        let d = x.len() as f64;
        let Packed {
            weights, exponents, ..
        } = &self.packed;
        -2.0 / self.sigma
            * weights
                .iter()
                .zip(exponents)
                .map(|(w, e)| (2.0 * e + d) * w)
                .sum::<f64>()
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
