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
/// `f64`. The lane-partial sums of an evaluation have this many lanes on
/// every CPU (vectors or scalars), so the result does not depend on the
/// instruction set; each lane sums its points in basis order.
const LANES: usize = 8;

/// Basis points per chunk of an evaluation pass: the chunk's exponents and
/// weights live in stack arrays (L1 cache), so the exponential runs as one
/// vectorised loop over a slice between the two mat-vec steps.
const CHUNK: usize = 64;

/// Points per group of the exponential loop: four AVX2 vectors in flight.
const EXP_GROUP: usize = 16;

/// Dimensions up to this bound are evaluated with the partial sums in
/// registers (a code path per dimension); larger ones keep them in a
/// scratch slice.
const MAX_REGISTER_DIM: usize = 8;

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
    /// Scratch: per coordinate l, the lane-partial sums of `wᵢ (z_il − c_l)`.
    sums: Vec<[f64; LANES]>,
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
            sums: vec![[0.0; LANES]; dim],
        }
    }
}

/// The lane-partial sums of one evaluation besides the per-coordinate sums
/// (which stay in [`Packed::sums`]).
struct Totals {
    /// `Σ wᵢ`.
    weights: [f64; LANES],
    /// `Σ eᵢ wᵢ` with the exponents `eᵢ = −‖x − zᵢ‖²/σ` (for the Laplacian).
    weighted_exponents: [f64; LANES],
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

    /// Evaluates at `x` (of a fitted model): fills `direction` and `sums` of
    /// [`Packed`] and returns the other lane-partial sums.
    fn evaluate(&mut self, x: &[f64]) -> Totals {
        if self.packed.alpha.len() != self.alpha.len().next_multiple_of(CHUNK) {
            // only the first evaluation after a deserialisation
            self.packed = Packed::new(&self.basis, &self.alpha, self.dim, self.sigma);
        }
        let (packed, sigma) = (&mut self.packed, self.sigma);
        match self.dim {
            1 => evaluate_in::<1>(packed, x, sigma),
            2 => evaluate_in::<2>(packed, x, sigma),
            3 => evaluate_in::<3>(packed, x, sigma),
            4 => evaluate_in::<4>(packed, x, sigma),
            5 => evaluate_in::<5>(packed, x, sigma),
            6 => evaluate_in::<6>(packed, x, sigma),
            7 => evaluate_in::<7>(packed, x, sigma),
            MAX_REGISTER_DIM => evaluate_in::<MAX_REGISTER_DIM>(packed, x, sigma),
            _ => evaluate_in::<0>(packed, x, sigma),
        }
    }
}

/// One evaluation pass with `d = DIM` if `DIM > 0` (the partial sums in
/// registers), else `d = x.len()` (the partial sums in [`Packed::sums`]),
/// dispatched by `pulp` to the best instruction set of the running CPU.
fn evaluate_in<const DIM: usize>(packed: &mut Packed, x: &[f64], sigma: f64) -> Totals {
    pulp::Arch::new().dispatch(Evaluation::<DIM> { packed, x, sigma })
}

/// One evaluation pass over the basis as a [`pulp::WithSimd`] operation
/// (AVX2 + FMA on x86-64 where available): chunk by chunk, the exponents
/// (vectorised mat-vec), the weights (a vectorised loop over the chunk, the
/// exponential included, see [`kameleon_kernels::fastmath::exp`]) and the
/// weighted sums (vectorised mat-vec), with the d lane-partial sums held in
/// registers across the whole pass when `DIM > 0`. The products are
/// accumulated with fused multiply-adds (`f64::mul_add` semantics on every
/// CPU, in software where the instruction is missing), so the result does
/// not depend on the CPU.
struct Evaluation<'a, const DIM: usize> {
    packed: &'a mut Packed,
    x: &'a [f64],
    sigma: f64,
}

impl<const DIM: usize> pulp::WithSimd for Evaluation<'_, DIM> {
    type Output = Totals;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) -> Totals {
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
            sums,
        } = packed;
        let mut norm = 0.0;
        for ((y, xl), cl) in direction.iter_mut().zip(x).zip(centre.iter()) {
            let v = xl - cl;
            norm = v.mul_add(v, norm);
            *y = 2.0 / sigma * v;
        }
        let base = -norm / sigma;
        let basis = Basis {
            points,
            offsets,
            alpha,
        };
        if DIM > 0 {
            // the partial sums in a local array, which the compiler keeps in
            // registers: its length and the loops over it are constants
            let mut local = [[0.0; LANES]; DIM];
            let totals = basis.pass(simd, &direction[..DIM], base, &mut local);
            sums.copy_from_slice(&local);
            totals
        } else {
            sums.fill([0.0; LANES]);
            basis.pass(simd, direction, base, sums)
        }
    }
}

/// The read-only part of [`Packed`] that an evaluation pass streams through.
struct Basis<'a> {
    points: &'a [f64],
    offsets: &'a [f64],
    alpha: &'a [f64],
}

impl Basis<'_> {
    /// The pass at `x`, given `direction = (2/σ)(x − c)` and
    /// `base = −‖x − c‖²/σ`: adds the lane-partial sums of `wᵢ (zᵢ − c)` to
    /// `sums` (one `[f64; LANES]` per coordinate) and returns the others.
    #[inline(always)]
    fn pass<S: pulp::Simd>(
        &self,
        simd: S,
        direction: &[f64],
        base: f64,
        sums: &mut [[f64; LANES]],
    ) -> Totals {
        let block_len = direction.len() * LANES;
        let base = simd.splat_f64s(base);
        let mut exponents = [0.0; CHUNK];
        let mut weights = [0.0; CHUNK];
        let mut totals = Totals {
            weights: [0.0; LANES],
            weighted_exponents: [0.0; LANES],
        };
        let chunks = self
            .points
            .chunks_exact(CHUNK / LANES * block_len)
            .zip(self.offsets.as_chunks::<CHUNK>().0)
            .zip(self.alpha.as_chunks::<CHUNK>().0);
        for ((points, offsets), alpha) in chunks {
            let blocks = || {
                points
                    .chunks_exact(block_len)
                    .map(|b| b.as_chunks::<LANES>().0)
            };
            // the exponents `offset + base + direction · (z − c)`, block by block
            let exponent_blocks = exponents.as_chunks_mut::<LANES>().0.iter_mut();
            let offset_blocks = offsets.as_chunks::<LANES>().0.iter();
            for ((exponent, offset), rows) in exponent_blocks.zip(offset_blocks).zip(blocks()) {
                let e = S::as_mut_simd_f64s(exponent).0;
                for (e, o) in e.iter_mut().zip(S::as_simd_f64s(offset).0) {
                    *e = simd.add_f64s(*o, base);
                }
                for (row, y) in rows.iter().zip(direction) {
                    let y = simd.splat_f64s(*y);
                    for (e, z) in e.iter_mut().zip(S::as_simd_f64s(row).0) {
                        *e = simd.mul_add_f64s(*z, y, *e);
                    }
                }
            }
            // the weights: a vectorised loop of exponentials, in groups of
            // EXP_GROUP points whose inner loop the compiler unrolls into
            // independent vector chains (one chain alone is latency-bound)
            let weight_groups = weights.as_chunks_mut::<EXP_GROUP>().0.iter_mut();
            let exponent_groups = exponents.as_chunks_mut::<EXP_GROUP>().0.iter_mut();
            for ((w, e), a) in weight_groups
                .zip(exponent_groups)
                .zip(alpha.as_chunks::<EXP_GROUP>().0)
            {
                for k in 0..EXP_GROUP {
                    // the distance is ≥ 0: clip the rounding of the expansion
                    e[k] = e[k].min(0.0);
                    w[k] = a[k] * exp(e[k]);
                }
            }
            // the weighted sums, block by block
            let weight_blocks = weights.as_chunks::<LANES>().0.iter();
            let exponent_blocks = exponents.as_chunks::<LANES>().0.iter();
            for ((weight, exponent), rows) in weight_blocks.zip(exponent_blocks).zip(blocks()) {
                let w = S::as_simd_f64s(weight).0;
                for (row, sum) in rows.iter().zip(sums.iter_mut()) {
                    let sum = S::as_mut_simd_f64s(sum).0;
                    for ((s, z), w) in sum.iter_mut().zip(S::as_simd_f64s(row).0).zip(w) {
                        *s = simd.mul_add_f64s(*w, *z, *s);
                    }
                }
                let total = S::as_mut_simd_f64s(&mut totals.weights).0;
                let weighted = S::as_mut_simd_f64s(&mut totals.weighted_exponents).0;
                let e = S::as_simd_f64s(exponent).0;
                for (((t, we), w), e) in total.iter_mut().zip(weighted).zip(w).zip(e) {
                    *t = simd.add_f64s(*t, *w);
                    *we = simd.mul_add_f64s(*e, *w, *we);
                }
            }
        }
        totals
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
        lane_sum(&self.evaluate(x).weights)
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        self.grad_and_laplacian(x, out);
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        debug_assert!(x.len() == grad.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        if self.alpha.is_empty() {
            grad.fill(0.0);
            return 0.0;
        }
        let totals = self.evaluate(x);
        let total = lane_sum(&totals.weights);
        // ∇f = (2/σ) Σᵢ wᵢ (zᵢ − c) − (2/σ)(x − c) Σᵢ wᵢ
        let scale = 2.0 / self.sigma;
        let Packed {
            direction, sums, ..
        } = &self.packed;
        for ((g, sum), y) in grad.iter_mut().zip(sums).zip(direction) {
            *g = scale * lane_sum(sum) - y * total;
        }
        // Σ_l ∂²_l k = ((4/σ²)‖x − z‖² − 2d/σ) k = −(2/σ)(2e + d) k with the
        // exponent e = −‖x − z‖²/σ
        let d = x.len() as f64;
        -scale * (2.0 * lane_sum(&totals.weighted_exponents) + d * total)
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
