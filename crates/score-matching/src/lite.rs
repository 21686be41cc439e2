// Over 800 lines on purpose: the fit, its regularisers and the gradient
// share one set of precomputed kernel sums, and the derivation they follow
// (the docs) is a fifth of the file.
//! The lite estimator (KMC Prop. 1): `f = Σ αᵢ k(zᵢ, ·)` with a Gaussian kernel.

use crate::error::{check_points, positive};
use crate::{BaseMeasure, GradientModel, ScoreMatchingError};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor::{cholesky_in_place, cholesky_in_place_scratch};
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, Col, Mat, MatMut, MatRef, Par};
use kameleon_core::buffer::ensure_room;
use kameleon_core::fastmath::exp_nonpositive_fma;
use kameleon_core::simd::{MAX_ACCUMULATORS, SUM_LANES, accumulators, reduce_accumulators};
use kameleon_kernels::Gaussian;
use rayon::prelude::*;

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
///
/// With [`BaseMeasure::StandardNormal`] ([`LiteEstimator::with_base_measure`])
/// the model is `f(x) − ‖x‖²/2`; the base measure's term `E[∇f·(−x)]` of the
/// objective adds `eᵢ = Σⱼ K_ij ⟨z_j − z_i, z_j⟩` to `b`.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "LiteParts")]
pub struct LiteEstimator {
    sigma: f64,
    lambda: f64,
    regulariser: LiteRegulariser,
    #[serde(default)]
    base: BaseMeasure,
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

/// The serialised form of [`LiteEstimator`]: its parameters are validated
/// by the constructor, and a fitted basis must be `n × d` finite points
/// with `n = alpha.len()` (both empty before a fit).
#[derive(serde::Deserialize)]
struct LiteParts {
    sigma: f64,
    lambda: f64,
    regulariser: LiteRegulariser,
    #[serde(default)]
    base: BaseMeasure,
    dim: usize,
    basis: Vec<f64>,
    alpha: Vec<f64>,
}

impl TryFrom<LiteParts> for LiteEstimator {
    type Error = ScoreMatchingError;
    fn try_from(p: LiteParts) -> Result<Self, ScoreMatchingError> {
        let model = Self::new(p.sigma, p.lambda)?
            .with_regulariser(p.regulariser)
            .with_base_measure(p.base)?;
        let n = p.alpha.len();
        if (n == 0) != (p.dim == 0) || n.checked_mul(p.dim) != Some(p.basis.len()) {
            return Err(ScoreMatchingError::InvalidParameter {
                name: "basis",
                value: p.basis.len() as f64,
                reason: "must hold n × d values, n the length of alpha and d = dim \
                         (none before a fit)",
            });
        }
        check_points(MatRef::from_column_major_slice(&p.basis, n, p.dim), p.dim)?;
        Ok(Self {
            dim: p.dim,
            basis: p.basis,
            alpha: p.alpha,
            ..model
        })
    }
}

/// Basis points per block of the evaluation layout: one AVX2 vector of
/// `f64`. The lane-partial sums of an evaluation have this many lanes on
/// every CPU (vectors or scalars), so the result does not depend on the
/// instruction set; each lane sums its points in basis order. One vector
/// per coordinate keeps all d ≤ 8 partial sums and the two totals in
/// registers; with two vectors per coordinate (8 lanes) they spill
/// (measurements in PERFORMANCE.md).
const LANES: usize = 4;

/// Basis points per chunk of an evaluation pass: the chunk's exponents and
/// weights live in stack arrays (L1 cache), so the exponential runs as one
/// vectorised loop over a slice between the two mat-vec steps.
const CHUNK: usize = 64;

/// Points whose exponents are computed together, [`LANES`] at a time: the
/// loop over the coordinates is the outer one, so that the chains of d
/// fused multiply-adds of these blocks interleave in program order and the
/// CPU overlaps their latency (one block's chain alone is latency-bound).
const DISTANCE_POINTS: usize = 4 * LANES;

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
    /// `Σ eᵢ wᵢ` with the exponents `eᵢ = −‖x − zᵢ‖²/σ` (for the Laplacian;
    /// zero from a pass without it).
    weighted_exponents: [f64; LANES],
}

/// Checks a lite bandwidth σ: finite and positive, and such that the
/// Gaussian kernel of length-scale `√(σ/2)` exists (see
/// [`LiteEstimator::kernel`]), which holds for σ within about
/// 1e-154 … 1e154.
fn check_sigma(sigma: f64) -> Result<f64, ScoreMatchingError> {
    let sigma = positive("sigma", sigma)?;
    match Gaussian::from_lite_sigma(sigma) {
        Ok(_) => Ok(sigma),
        Err(_) => Err(ScoreMatchingError::InvalidParameter {
            name: "sigma",
            value: sigma,
            reason: "must give a length-scale √(σ/2) that the Gaussian kernel accepts \
                     (σ within about 1e-154 … 1e154)",
        }),
    }
}

impl LiteEstimator {
    /// An unfitted estimator with lite bandwidth `σ > 0` (within about
    /// 1e-154 … 1e154, see [`LiteEstimator::kernel`]) and ridge `λ > 0`,
    /// regularised with `λI`.
    pub fn new(sigma: f64, lambda: f64) -> Result<Self, ScoreMatchingError> {
        Ok(Self {
            sigma: check_sigma(sigma)?,
            lambda: positive("lambda", lambda)?,
            regulariser: LiteRegulariser::Identity,
            base: BaseMeasure::Flat,
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

    /// The same estimator with another base measure (applies at the next
    /// fit; an unfitted model is the base measure itself). Errors on an
    /// invalid base measure (a Student t's ν not positive and finite).
    pub fn with_base_measure(mut self, base: BaseMeasure) -> Result<Self, ScoreMatchingError> {
        base.validate()?;
        self.base = base;
        Ok(self)
    }

    /// The base measure in use.
    pub fn base_measure(&self) -> BaseMeasure {
        self.base
    }

    /// Sets the lite bandwidth σ > 0 (checked as in [`LiteEstimator::new`])
    /// for the next fit; a refused σ leaves the current one. The fitted α
    /// belong to the σ they were fitted with: refit (or set the old σ back)
    /// before evaluating the model again.
    pub fn set_sigma(&mut self, sigma: f64) -> Result<(), ScoreMatchingError> {
        self.sigma = check_sigma(sigma)?;
        Ok(())
    }

    /// Sets the ridge λ > 0 for the next fit (as [`LiteEstimator::set_sigma`]).
    pub fn set_lambda(&mut self, lambda: f64) -> Result<(), ScoreMatchingError> {
        self.lambda = positive("lambda", lambda)?;
        Ok(())
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

    /// Writes `∇f` at the point of the last evaluation, whose other sums are
    /// `totals`, into `grad`; returns `Σᵢ wᵢ`.
    fn write_gradient(&self, totals: &Totals, grad: &mut [f64]) -> f64 {
        let total = lane_sum(&totals.weights);
        // ∇f = (2/σ) Σᵢ wᵢ (zᵢ − c) − (2/σ)(x − c) Σᵢ wᵢ
        let scale = 2.0 / self.sigma;
        let Packed {
            direction, sums, ..
        } = &self.packed;
        for ((g, sum), y) in grad.iter_mut().zip(sums).zip(direction) {
            *g = scale * lane_sum(sum) - y * total;
        }
        total
    }

    /// Evaluates at `x` (of a fitted model): fills `direction` and `sums` of
    /// [`Packed`] and returns the other lane-partial sums, the weighted
    /// exponents only if `LAPLACIAN` (a gradient alone skips their
    /// accumulation, one fused multiply-add per vector of points).
    fn evaluate<const LAPLACIAN: bool>(&mut self, x: &[f64]) -> Totals {
        if self.packed.alpha.len() != self.alpha.len().next_multiple_of(CHUNK) {
            // only the first evaluation after a deserialisation
            self.packed = Packed::new(&self.basis, &self.alpha, self.dim, self.sigma);
        }
        let (packed, sigma) = (&mut self.packed, self.sigma);
        match self.dim {
            1 => evaluate_in::<1, LAPLACIAN>(packed, x, sigma),
            2 => evaluate_in::<2, LAPLACIAN>(packed, x, sigma),
            3 => evaluate_in::<3, LAPLACIAN>(packed, x, sigma),
            4 => evaluate_in::<4, LAPLACIAN>(packed, x, sigma),
            5 => evaluate_in::<5, LAPLACIAN>(packed, x, sigma),
            6 => evaluate_in::<6, LAPLACIAN>(packed, x, sigma),
            7 => evaluate_in::<7, LAPLACIAN>(packed, x, sigma),
            MAX_REGISTER_DIM => evaluate_in::<MAX_REGISTER_DIM, LAPLACIAN>(packed, x, sigma),
            _ => evaluate_in::<0, LAPLACIAN>(packed, x, sigma),
        }
    }
}

/// One evaluation pass with `d = DIM` if `DIM > 0` (the partial sums in
/// registers), else `d = x.len()` (the partial sums in [`Packed::sums`]),
/// with vectors of at most 256 bits: its partial sums are laid out for
/// [`LANES`] = 4 lanes.
fn evaluate_in<const DIM: usize, const LAPLACIAN: bool>(
    packed: &mut Packed,
    x: &[f64],
    sigma: f64,
) -> Totals {
    kameleon_core::simd::dispatch_at_most_256(Evaluation::<DIM, LAPLACIAN> { packed, x, sigma })
}

/// One evaluation pass over the basis as a [`pulp::WithSimd`] operation
/// (AVX2 + FMA on x86-64 where available): chunk by chunk, the exponents
/// (vectorised mat-vec), the weights (a vectorised loop over the chunk, the
/// exponential included, see [`kameleon_core::fastmath::exp_nonpositive_fma`]) and the
/// weighted sums (vectorised mat-vec), with the d lane-partial sums held in
/// registers across the whole pass when `DIM > 0`. The products are
/// accumulated with fused multiply-adds (`f64::mul_add` semantics on every
/// CPU, in software where the instruction is missing), so the result does
/// not depend on the CPU.
struct Evaluation<'a, const DIM: usize, const LAPLACIAN: bool> {
    packed: &'a mut Packed,
    x: &'a [f64],
    sigma: f64,
}

impl<const DIM: usize, const LAPLACIAN: bool> pulp::WithSimd for Evaluation<'_, DIM, LAPLACIAN> {
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
            let totals = basis.pass::<S, LAPLACIAN>(simd, &direction[..DIM], base, &mut local);
            sums.copy_from_slice(&local);
            totals
        } else {
            sums.fill([0.0; LANES]);
            basis.pass::<S, LAPLACIAN>(simd, direction, base, sums)
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
    fn pass<S: pulp::Simd, const LAPLACIAN: bool>(
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
            // the exponents `offset + base + direction · (z − c)`,
            // DISTANCE_POINTS at a time, coordinate by coordinate
            let exponent_groups = exponents.as_chunks_mut::<DISTANCE_POINTS>().0;
            let offset_groups = offsets.as_chunks::<DISTANCE_POINTS>().0;
            let point_groups = points.chunks_exact(DISTANCE_POINTS * direction.len());
            for ((exponent, offset), points) in exponent_groups
                .iter_mut()
                .zip(offset_groups)
                .zip(point_groups)
            {
                let e = S::as_mut_simd_f64s(exponent).0;
                for (e, o) in e.iter_mut().zip(S::as_simd_f64s(offset).0) {
                    *e = simd.add_f64s(*o, base);
                }
                for (l, y) in direction.iter().enumerate() {
                    let y = simd.splat_f64s(*y);
                    let blocks = e.chunks_exact_mut(LANES / S::F64_LANES);
                    for (e, block) in blocks.zip(points.chunks_exact(block_len)) {
                        let row = &block[l * LANES..(l + 1) * LANES];
                        for (e, z) in e.iter_mut().zip(S::as_simd_f64s(row).0) {
                            *e = simd.mul_add_f64s(*z, y, *e);
                        }
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
                    w[k] = a[k] * exp_nonpositive_fma(e[k]);
                }
            }
            // the weighted sums, block by block
            let weight_blocks = weights.as_chunks::<LANES>().0.iter();
            let exponent_blocks = exponents.as_chunks::<LANES>().0.iter();
            let blocks = points
                .chunks_exact(block_len)
                .map(|b| b.as_chunks::<LANES>().0);
            for ((weight, exponent), rows) in weight_blocks.zip(exponent_blocks).zip(blocks) {
                let w = S::as_simd_f64s(weight).0;
                for (row, sum) in rows.iter().zip(sums.iter_mut()) {
                    let sum = S::as_mut_simd_f64s(sum).0;
                    for ((s, z), w) in sum.iter_mut().zip(S::as_simd_f64s(row).0).zip(w) {
                        *s = simd.mul_add_f64s(*w, *z, *s);
                    }
                }
                let total = S::as_mut_simd_f64s(&mut totals.weights).0;
                for (t, w) in total.iter_mut().zip(w) {
                    *t = simd.add_f64s(*t, *w);
                }
                if LAPLACIAN {
                    let weighted = S::as_mut_simd_f64s(&mut totals.weighted_exponents).0;
                    let e = S::as_simd_f64s(exponent).0;
                    for ((we, w), e) in weighted.iter_mut().zip(w).zip(e) {
                        *we = simd.mul_add_f64s(*e, *w, *we);
                    }
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
/// matrix `K`, the vector `b` and the matrix `C`.
pub(crate) struct LiteSystem {
    /// `K`, full and exactly symmetric (see [`gram_column`]).
    pub(crate) kernel: Mat<f64>,
    pub(crate) b: Col<f64>,
    /// `C` in its lower triangle (all the Cholesky factorisation reads); the
    /// strict upper triangle is zero.
    pub(crate) c: Mat<f64>,
}

/// Computes `K`, `b` and the lower triangle of `C` of Prop. 1 in
/// O(n³ + dn²), with parallelism `par`.
///
/// With `s_k = ‖z_k‖²` and `G = ZZᵀ`,
/// `C_ij = Σ_k K_ki K_kj (s_k − G_ki − G_kj + G_ij) = (BᵀK + KᵀB)_ij + G_ij (KᵀK)_ij`
/// where `B_ki = K_ki (s_k/2 − G_ki)`; and
/// `b_i = Σ_k K_ik ((2/σ)‖z_k − z_i‖² − d)`.
///
/// The products are the whole cost, each on the lower triangle only (n³
/// flops each): `C ← KᵀK`, then `C ← G ∘ C` ([`GramProduct`]), then
/// `C += BᵀK` and `C += KᵀB`. The O(dn²) rest is two vectorised passes:
/// [`KernelPass`] (`K`, `B` and `b`) and [`GramProduct`]; `G` is never
/// stored but recomputed in both from the column-major copy of `z`.
///
/// The result does not depend on the number of threads of `par`: the passes
/// give each thread a contiguous range of columns, each computed alone, and
/// faer's matrix products split their output into tiles between threads,
/// every entry accumulated in the same order whatever the split (tested).
pub(crate) fn lite_system(z: MatRef<'_, f64>, sigma: f64, par: Par) -> LiteSystem {
    let n = z.nrows();
    // column-major: coordinate l of all points is a contiguous column
    let z = z.to_owned();
    let z = z.as_ref();
    // s_i = G_ii, by `gram_column` itself (a column of one row) so that the
    // distance of a point to itself is exactly 0
    let squares: Vec<f64> = kameleon_core::simd::dispatch(|| {
        (0..n)
            .map(|i| {
                let mut s = [0.0];
                gram_column(z, i, i, &mut s);
                s[0]
            })
            .collect()
    });
    // one contiguous range of columns per thread of `par`
    let chunk = n.div_ceil(par.degree()).max(1);
    let mut kernel = Mat::<f64>::zeros(n, n);
    let mut half_b = Mat::<f64>::zeros(n, n);
    let mut b = Col::<f64>::zeros(n);
    let b_slice = b.as_mut().try_as_col_major_mut().expect("contiguous b");
    kernel
        .as_mut()
        .par_col_chunks_mut(chunk)
        .zip(half_b.as_mut().par_col_chunks_mut(chunk))
        .zip(b_slice.as_slice_mut().par_chunks_mut(chunk))
        .enumerate()
        .for_each(|(part, ((kernel, half_b), b))| {
            kameleon_core::simd::dispatch(KernelPass {
                z,
                squares: &squares,
                sigma,
                first: part * chunk,
                kernel,
                half_b,
                b,
            })
        });
    // K is exactly symmetric, so Kᵀ enters the products as K itself
    let kernel_ref = kernel.as_ref();
    let mut c = Mat::<f64>::zeros(n, n);
    lower_product(c.as_mut(), Accum::Replace, kernel_ref, kernel_ref, par);
    c.as_mut()
        .par_col_chunks_mut(chunk)
        .enumerate()
        .for_each(|(part, c)| {
            kameleon_core::simd::dispatch(GramProduct {
                z,
                first: part * chunk,
                c,
            })
        });
    lower_product(c.as_mut(), Accum::Add, half_b.transpose(), kernel_ref, par);
    lower_product(c.as_mut(), Accum::Add, kernel_ref, half_b.as_ref(), par);
    LiteSystem { kernel, b, c }
}

/// The lower triangle of `lhs · rhs`, written to (`Accum::Replace`) or added
/// to (`Accum::Add`) that of `dst`, with parallelism `par`.
fn lower_product(
    dst: MatMut<'_, f64>,
    accum: Accum,
    lhs: MatRef<'_, f64>,
    rhs: MatRef<'_, f64>,
    par: Par,
) {
    triangular::matmul(
        dst,
        BlockStructure::TriangularLower,
        accum,
        lhs,
        BlockStructure::Rectangular,
        rhs,
        BlockStructure::Rectangular,
        1.0,
        par,
    );
}

/// Column l of the column-major `z` as a slice.
fn column_slice<'a>(z: MatRef<'a, f64>, l: usize) -> &'a [f64] {
    z.col(l)
        .try_as_col_major()
        .expect("column-major z")
        .as_slice()
}

/// Column j of `G = ZZᵀ` from row `start` on: `g[i − start] = Σ_l z_il z_jl`
/// over the column-major `z`, the product of l = 0 rounded and the others
/// accumulated in the order of l with `f64::mul_add` (a fused multiply-add
/// in the pulp contexts that call it; correctly rounded either way). Since
/// each step's product commutes, `G_ij` and `G_ji` are the same bits, and so
/// are `K_ij` and `K_ji`.
#[inline(always)]
fn gram_column(z: MatRef<'_, f64>, j: usize, start: usize, g: &mut [f64]) {
    let mut columns = (0..z.ncols()).map(|l| column_slice(z, l));
    let Some(first) = columns.next() else {
        g.fill(0.0);
        return;
    };
    let zj0 = first[j];
    for (g, zi0) in g.iter_mut().zip(&first[start..]) {
        *g = zi0 * zj0;
    }
    for column in columns {
        let zjl = column[j];
        for (g, zil) in g.iter_mut().zip(&column[start..]) {
            *g = zil.mul_add(zjl, *g);
        }
    }
}

/// The pass that forms columns `first..first + m` of `K` and `B` and the
/// same entries of `b` ([`lite_system`]), column by column, as a
/// [`pulp::WithSimd`] operation (so that its loops over a column vectorise,
/// the exponential included, by `exp_nonpositive_fma` with fused multiply-adds).
/// Column j: `G_·j` by [`gram_column`], then
/// `r_ij = max(s_i + s_j − 2G_ij, 0) = ‖z_i − z_j‖²`, `K_ij = exp(−r_ij/σ)`,
/// `B_ij = K_ij (s_i/2 − G_ij)` and the term `K_ij ((2/σ) r_ij − d)` of
/// `b_j` (`b_j` is a column sum: `K` and `r` are symmetric).
struct KernelPass<'a> {
    /// The points, column-major (n × d).
    z: MatRef<'a, f64>,
    /// `s_i = ‖z_i‖²`.
    squares: &'a [f64],
    sigma: f64,
    /// The index j of the first column.
    first: usize,
    /// Columns `first..first + m` of `K` (n × m).
    kernel: MatMut<'a, f64>,
    /// The same columns of `B`.
    half_b: MatMut<'a, f64>,
    /// `b_first..b_{first + m}`.
    b: &'a mut [f64],
}

impl pulp::WithSimd for KernelPass<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            z,
            squares,
            sigma,
            first,
            mut kernel,
            mut half_b,
            b,
        } = self;
        let (n, d) = (z.nrows(), z.ncols() as f64);
        let mut gram = vec![0.0; n];
        let mut terms = vec![0.0; n];
        for (column, b) in b.iter_mut().enumerate() {
            let j = first + column;
            gram_column(z, j, 0, &mut gram);
            let sj = squares[j];
            let kernel = kernel.as_mut().col_mut(column).try_as_col_major_mut();
            let half_b = half_b.as_mut().col_mut(column).try_as_col_major_mut();
            let (kernel, half_b) = (
                kernel.expect("column-major K").as_slice_mut(),
                half_b.expect("column-major B").as_slice_mut(),
            );
            let columns = kernel.iter_mut().zip(half_b.iter_mut()).zip(&mut terms);
            for (((k, h), t), (g, si)) in columns.zip(gram.iter().zip(squares)) {
                let r = (si + sj - 2.0 * g).max(0.0);
                *k = exp_nonpositive_fma(-r / sigma);
                *h = *k * (0.5 * si - g);
                *t = *k * (2.0 / sigma * r - d);
            }
            *b = simd_sum(simd, &terms);
        }
    }
}

/// The sum of `values` over the 8 lanes of `kameleon_core::simd` (value i
/// in lane i mod 8, the lanes added at the end in that module's order; the
/// values past the last whole group of 8 added after), the same bits with
/// AVX2 and AVX-512.
#[inline(always)]
fn simd_sum<S: pulp::Simd>(simd: S, values: &[f64]) -> f64 {
    let whole = values.len() / SUM_LANES * SUM_LANES;
    let (head, tail) = values.split_at(whole);
    let head = S::as_simd_f64s(head).0;
    let parts = accumulators::<S>();
    let mut sums = [simd.splat_f64s(0.0); MAX_ACCUMULATORS];
    for group in head.chunks_exact(parts) {
        for (sum, v) in sums.iter_mut().zip(group) {
            *sum = simd.add_f64s(*sum, *v);
        }
    }
    reduce_accumulators(simd, sums) + tail.iter().sum::<f64>()
}

/// `C_ij ← G_ij C_ij` on the lower triangle (`i ≥ j`) of columns
/// `first..first + m`, `G_·j` by [`gram_column`], as a [`pulp::WithSimd`]
/// operation.
struct GramProduct<'a> {
    /// The points, column-major (n × d).
    z: MatRef<'a, f64>,
    /// The index j of the first column.
    first: usize,
    /// Columns `first..first + m` of `C` (n × m).
    c: MatMut<'a, f64>,
}

impl pulp::WithSimd for GramProduct<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { z, first, mut c } = self;
        let n = z.nrows();
        let mut gram = vec![0.0; n];
        for column in 0..c.ncols() {
            let j = first + column;
            let gram = &mut gram[j..];
            gram_column(z, j, j, gram);
            let c = c.as_mut().col_mut(column).try_as_col_major_mut();
            let c = &mut c.expect("column-major C").as_slice_mut()[j..];
            for (c, g) in c.iter_mut().zip(gram.iter()) {
                *c *= g;
            }
        }
    }
}

impl LiteEstimator {
    /// [`GradientModel::fit`] with the parallelism `par` of the n × n
    /// products and the Cholesky factorisation of `C + λR`.
    ///
    /// The triangular solves run sequentially whatever `par`: faer's parallel
    /// matrix-vector product splits its sum between threads, which would make
    /// α depend on the thread count, and they are O(n²) anyway.
    fn fit_with(&mut self, points: MatRef<'_, f64>, par: Par) -> Result<(), ScoreMatchingError> {
        let n = points.nrows();
        if n == 0 {
            return Err(ScoreMatchingError::TooFewPoints { needed: 1, got: 0 });
        }
        if points.ncols() == 0 {
            return Err(ScoreMatchingError::DimensionMismatch {
                expected: 1,
                got: 0,
            });
        }
        ensure_room("the lite system's three n × n matrices", &[&[3, n, n]])?;
        check_points(points, points.ncols())?;
        let LiteSystem {
            kernel,
            mut b,
            mut c,
        } = lite_system(points, self.sigma, par);
        add_base_term(self.base, points, kernel.as_ref(), &mut b);
        // only the lower triangle is read by the Cholesky factorisation
        match self.regulariser {
            LiteRegulariser::Identity => {
                for i in 0..n {
                    c[(i, i)] += self.lambda;
                }
            }
            LiteRegulariser::KernelPlusIdentity => {
                for j in 0..n {
                    let kernel = kernel.col(j).subrows(j, n - j);
                    let column = c.col_mut(j).subrows_mut(j, n - j);
                    for (i, (c, k)) in column.iter_mut().zip(kernel.iter()).enumerate() {
                        let identity = if i == 0 { 1.0 } else { 0.0 };
                        *c += self.lambda * (k + identity);
                    }
                }
            }
        }
        let mut scratch =
            MemBuffer::new(cholesky_in_place_scratch::<f64>(n, par, Default::default()));
        cholesky_in_place(
            c.as_mut(),
            Default::default(),
            par,
            MemStack::new(&mut scratch),
            Default::default(),
        )
        .map_err(|_| ScoreMatchingError::NotPositiveDefinite)?;
        let factor = c.as_ref();
        solve_lower_triangular_in_place(factor, b.as_mat_mut(), Par::Seq);
        solve_upper_triangular_in_place(factor.transpose(), b.as_mat_mut(), Par::Seq);
        let scale = -0.5 * self.sigma;
        let alpha: Vec<f64> = b.iter().map(|x| scale * x).collect();
        if alpha.iter().any(|a| !a.is_finite()) {
            // a λ so small that the solve overflows (e.g. one point, whose
            // system is λR alone): the model would be NaN everywhere
            return Err(ScoreMatchingError::NotPositiveDefinite);
        }
        self.alpha = alpha;
        let d = points.ncols();
        self.dim = d;
        self.basis.clear();
        self.basis
            .extend((0..d).flat_map(|l| (0..n).map(move |i| points[(i, l)])));
        self.packed = Packed::new(&self.basis, &self.alpha, d, self.sigma);
        Ok(())
    }
}

/// Adds the base measure's term to `b`: with `∇ log q₀(z_j) = −w_j z_j` and
/// the Gaussian kernel's `∇_x k(z_i, x)|_{x=z_j} ∝ k_ij (z_i − z_j)`,
/// `b_i += Σ_j k_ij w_j (‖z_j‖² − z_i·z_j)` (nothing for the flat base).
fn add_base_term(base: BaseMeasure, z: MatRef<'_, f64>, kernel: MatRef<'_, f64>, b: &mut Col<f64>) {
    let (n, d) = z.shape();
    let mut row = vec![0.0; d];
    let mut weights = Vec::with_capacity(n);
    for j in 0..n {
        for (l, v) in row.iter_mut().enumerate() {
            *v = z[(j, l)];
        }
        match base.pull_weight(&row) {
            Some(w) => weights.push(w),
            None => return,
        }
    }
    let pulled = Mat::<f64>::from_fn(n, d, |j, l| weights[j] * z[(j, l)]);
    let mut kz = Mat::<f64>::zeros(n, d);
    faer::linalg::matmul::matmul(
        kz.as_mut(),
        Accum::Replace,
        kernel,
        pulled.as_ref(),
        1.0,
        Par::Seq,
    );
    let squares: Vec<f64> = (0..n)
        .map(|j| weights[j] * (0..d).map(|l| z[(j, l)] * z[(j, l)]).sum::<f64>())
        .collect();
    for i in 0..n {
        let weighted: f64 = (0..n).map(|j| kernel[(i, j)] * squares[j]).sum();
        let inner: f64 = (0..d).map(|l| kz[(i, l)] * z[(i, l)]).sum();
        b[i] += weighted - inner;
    }
}

impl GradientModel for LiteEstimator {
    fn dim(&self) -> usize {
        self.dim
    }

    /// Fits on all rows of `points` as basis (subsample before calling).
    /// Needs at least one point with at least one coordinate; errors with
    /// [`ScoreMatchingError::BufferTooLarge`] if the n × n system cannot be
    /// allocated.
    ///
    /// Degenerate data is fitted without an error (an adaptive sampler's
    /// history can be one repeated point early on): with a single point, or
    /// all points equal, `C = 0` and `b` is the kernel's Laplacian term
    /// alone, so `α̂ = −(σ/2)(λR)⁻¹b` is a Gaussian bump at that point whose
    /// height grows like `n d/λ`. Its gradient pulls towards the point,
    /// steeply for a small λ, and says nothing about the target's spread; a
    /// λ so small that α overflows gives
    /// [`ScoreMatchingError::NotPositiveDefinite`]. The n × n products and the factorisation
    /// run with faer's global parallelism (`faer::get_global_parallelism()`,
    /// by default all threads of the current rayon pool; set it with
    /// `faer::set_global_parallelism`, e.g. to `Par::Seq` where chains
    /// already occupy every core). The fitted α does not depend on it.
    fn fit(&mut self, points: MatRef<'_, f64>) -> Result<(), ScoreMatchingError> {
        self.fit_with(points, faer::get_global_parallelism())
    }

    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64 {
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        let base = self.base.log_density(x);
        if self.alpha.is_empty() {
            return base;
        }
        lane_sum(&self.evaluate::<false>(x).weights) + base
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == out.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        if self.alpha.is_empty() {
            out.fill(0.0);
        } else {
            let totals = self.evaluate::<false>(x);
            self.write_gradient(&totals, out);
        }
        self.base.add_gradient(x, out);
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        debug_assert!(x.len() == grad.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        let base = self.base.laplacian(x);
        if self.alpha.is_empty() {
            grad.fill(0.0);
            self.base.add_gradient(x, grad);
            return base;
        }
        let totals = self.evaluate::<true>(x);
        let total = self.write_gradient(&totals, grad);
        self.base.add_gradient(x, grad);
        // Σ_l ∂²_l k = ((4/σ²)‖x − z‖² − 2d/σ) k = −(2/σ)(2e + d) k with the
        // exponent e = −‖x − z‖²/σ
        let d = x.len() as f64;
        -2.0 / self.sigma * (2.0 * lane_sum(&totals.weighted_exponents) + d * total) + base
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast `C` (its lower triangle, all that is formed) and `b` equal
    /// Prop. 1 as printed:
    /// `C = Σ_l (D_l K − K D_l)(K D_l − D_l K)`,
    /// `b = Σ_l ((2/σ)(K s_l + D_{s_l} K 1 − 2 D_l K x_l) − K1)`, O(dn³) with
    /// explicit diagonal matrices.
    #[test]
    fn fast_system_equals_printed_formula() {
        let (n, d, sigma) = (13, 4, 1.7);
        let z = Mat::from_fn(n, d, |i, l| ((i * 7 + l * 3) as f64 * 0.37).sin() * 1.5);
        let fast = lite_system(z.as_ref(), sigma, Par::Seq);
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
            for j in 0..=i {
                assert!((fast.c[(i, j)] - c[(i, j)]).abs() <= 1e-12 * c_scale);
            }
            for j in 0..n {
                assert!((fast.kernel[(i, j)] - k[(i, j)]).abs() <= 1e-14);
            }
        }
    }

    /// The fit does not depend on the number of threads: α with sequential
    /// products and factorisation equals α with 2 and 3 threads bit for bit,
    /// for both regularisers, at a size where faer's products, Cholesky
    /// factorisation and (were it run in parallel) triangular solves split
    /// their work between threads: a parallel solve fails this test.
    #[test]
    fn fit_is_identical_for_every_thread_count() {
        let (n, d) = (600, 3);
        let z = Mat::from_fn(n, d, |i, l| ((i * 5 + l * 11) as f64 * 0.23).sin() * 2.0);
        for regulariser in [
            LiteRegulariser::Identity,
            LiteRegulariser::KernelPlusIdentity,
        ] {
            let fit = |par| {
                let mut model = LiteEstimator::new(1.3, 1e-3)
                    .unwrap()
                    .with_regulariser(regulariser);
                model.fit_with(z.as_ref(), par).unwrap();
                model.alpha
            };
            let sequential = fit(Par::Seq);
            assert!(sequential.iter().all(|a| a.is_finite()));
            for threads in [2, 3] {
                let parallel = fit(Par::rayon(threads));
                let differing = parallel
                    .iter()
                    .zip(&sequential)
                    .filter(|(a, b)| a.to_bits() != b.to_bits())
                    .count();
                assert_eq!(differing, 0, "{threads} threads: {differing} of {n} differ");
            }
        }
    }
}
