//! Shared machinery of the radial kernels `k(x, y) = f(‖x − y‖₂)` and the
//! column-wise driver of the KAMH gradient matrix.
//!
//! A radial kernel describes itself through `s = ‖x − y‖²`: its value, the
//! slope `a(s)` with `∇ₓk = a (x − y)`, and the curvature `b(s)` with
//! `∂²k/∂x_l² = a + b (x_l − y_l)²`. In terms of `f(r)`, `a = f′(r)/r` and
//! `b = (f″(r) − f′(r)/r)/r²`.

use crate::simd;
use faer::reborrow::ReborrowMut;
use faer::{MatMut, MatRef};
use kameleon_core::simd::{MAX_ACCUMULATORS, accumulators, reduce_accumulators};

/// A kernel that depends on `x − y` only through `s = ‖x − y‖²`.
pub(crate) trait Radial {
    /// `k` at squared distance `s`.
    fn value(&self, s: f64) -> f64;

    /// `(k, a)` at squared distance `s`, with `∇ₓk = a (x − y)`. At `s = 0`
    /// the returned `a` must be finite (the gradient there is `a · 0`).
    fn value_slope(&self, s: f64) -> (f64, f64);

    /// `(k, a, b)` at squared distance `s`, with `∂²k/∂x_l² = a + b (x_l − y_l)²`.
    /// At `s = 0` only `a` is used: it must be the limit of the second
    /// derivative (possibly `−∞` for kernels that are not twice differentiable).
    fn value_slope_curvature(&self, s: f64) -> (f64, f64, f64);

    /// Replaces every squared distance `s` in `s_values` by the gradient
    /// matrix weight `2a(s)` (so `M`'s column is `2a(s)(x − z)`). The default
    /// calls [`Radial::value_slope`] point by point; a kernel with a
    /// vectorisable closed form overrides it and sets
    /// [`Radial::VECTORISED_WEIGHTS`], so that it runs inside a `pulp`
    /// dispatch ([`BlockWeights`]) and may use the FMA variants of
    /// [`kameleon_core::fastmath`].
    #[inline(always)]
    fn gradient_weights(&self, s_values: &mut [f64]) {
        for s in s_values.iter_mut() {
            *s = 2.0 * self.value_slope(*s).1;
        }
    }

    /// Whether [`Radial::gradient_weights`] is overridden by a vectorisable
    /// closed form, which then runs under the dispatched target features.
    /// The per-point default runs without (measured: it was no faster
    /// inside a dispatch, the scalar `value_slope` being what it costs).
    const VECTORISED_WEIGHTS: bool = false;
}

/// The weights step of [`FusedGram`] and [`GradientColumns`] for one block
/// of points, behind a trait object: those kernels are then compiled once
/// per dimension and instruction set rather than once per radial kernel as
/// well (a quarter of the code; the kernels crate builds in 6 s instead of
/// 22 s), at the price of one indirect call per block of 64–128 points.
pub(crate) trait BlockWeights {
    /// [`Radial::gradient_weights`] of `s_values`; a vectorised override
    /// runs under [`kameleon_core::simd::dispatch`], which picks the
    /// instruction set the calling kernel runs with. The weights are
    /// lane-wise, so they have the same bits as if computed inline there.
    fn block_weights(&self, s_values: &mut [f64]);
}

impl<R: Radial> BlockWeights for R {
    fn block_weights(&self, s_values: &mut [f64]) {
        if R::VECTORISED_WEIGHTS {
            kameleon_core::simd::dispatch(Weights {
                kernel: self,
                s_values,
            })
        } else {
            self.gradient_weights(s_values)
        }
    }
}

/// [`Radial::gradient_weights`] as a [`pulp::WithSimd`] operation, so that
/// a vectorisable override compiles with the dispatched target features.
struct Weights<'a, R> {
    kernel: &'a R,
    s_values: &'a mut [f64],
}

impl<R: Radial> pulp::WithSimd for Weights<'_, R> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        self.kernel.gradient_weights(self.s_values);
    }
}

/// `‖x − y‖²`.
#[inline(always)]
pub(crate) fn squared_distance(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum()
}

pub(crate) fn eval<R: Radial>(kernel: &R, x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    kernel.value(squared_distance(x, y))
}

pub(crate) fn grad_x<R: Radial>(kernel: &R, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
    debug_assert!(x.len() == y.len() && y.len() == out.len());
    let (k, a) = kernel.value_slope(squared_distance(x, y));
    for ((o, xl), yl) in out.iter_mut().zip(x).zip(y) {
        *o = a * (xl - yl);
    }
    k
}

pub(crate) fn hessian_diag_x<R: Radial>(kernel: &R, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
    debug_assert!(x.len() == y.len() && y.len() == out.len());
    let s = squared_distance(x, y);
    let (k, a, b) = kernel.value_slope_curvature(s);
    if s == 0.0 {
        out.fill(a);
    } else {
        for ((o, xl), yl) in out.iter_mut().zip(x).zip(y) {
            let diff = xl - yl;
            *o = a + b * diff * diff;
        }
    }
    k
}

pub(crate) fn gradient_matrix(
    kernel: &dyn BlockWeights,
    x: &[f64],
    z: MatRef<'_, f64>,
    out: MatMut<'_, f64>,
) {
    debug_assert_eq!(x.len(), z.ncols());
    // One body, compiled with the dimension as a constant for the small
    // dimensions of the experiments (the per-point loops are then unrolled
    // and vectorised) and once for any other d.
    match x.len() {
        1 => gradient_columns::<1>(kernel, x, z, out),
        2 => gradient_columns::<2>(kernel, x, z, out),
        3 => gradient_columns::<3>(kernel, x, z, out),
        4 => gradient_columns::<4>(kernel, x, z, out),
        5 => gradient_columns::<5>(kernel, x, z, out),
        6 => gradient_columns::<6>(kernel, x, z, out),
        7 => gradient_columns::<7>(kernel, x, z, out),
        8 => gradient_columns::<8>(kernel, x, z, out),
        9 => gradient_columns::<9>(kernel, x, z, out),
        10 => gradient_columns::<10>(kernel, x, z, out),
        _ => gradient_columns::<0>(kernel, x, z, out),
    }
}

pub(crate) fn gradient_gram<R: Radial + crate::Kernel>(
    kernel: &R,
    x: &[f64],
    z: MatRef<'_, f64>,
    scratch: &mut [f64],
    gram: &mut [f64],
    row_sums: &mut [f64],
) {
    debug_assert_eq!(x.len(), z.ncols());
    let fused: Option<FusedGramFn> = match x.len() {
        1 => Some(fused_gram::<1>),
        2 => Some(fused_gram::<2>),
        3 => Some(fused_gram::<3>),
        4 => Some(fused_gram::<4>),
        5 => Some(fused_gram::<5>),
        6 => Some(fused_gram::<6>),
        7 => Some(fused_gram::<7>),
        8 => Some(fused_gram::<8>),
        9 => Some(fused_gram::<9>),
        10 => Some(fused_gram::<10>),
        _ => None,
    };
    match (fused, z.try_as_col_major()) {
        (Some(fused), Some(columns)) => fused(kernel, x, columns, gram, row_sums),
        _ => crate::gram::gradient_gram_via_matrix(kernel, x, z, scratch, gram, row_sums),
    }
}

/// [`fused_gram`] for one dimension.
type FusedGramFn = fn(
    &dyn BlockWeights,
    &[f64],
    MatRef<'_, f64, usize, usize, faer::ContiguousFwd>,
    &mut [f64],
    &mut [f64],
);

/// Runs [`FusedGram`] with `d = DIM` on z stored column by column.
fn fused_gram<const DIM: usize>(
    kernel: &dyn BlockWeights,
    x: &[f64],
    z: MatRef<'_, f64, usize, usize, faer::ContiguousFwd>,
    gram: &mut [f64],
    row_sums: &mut [f64],
) {
    let columns: [&[f64]; DIM] = std::array::from_fn(|l| z.col(l).as_slice());
    kameleon_core::simd::dispatch(FusedGram::<DIM> {
        kernel,
        x,
        columns,
        gram,
        row_sums,
    });
}

/// SIMD vectors of points per block of [`FusedGram`]; the results are
/// bitwise the same for any even block size (each lane's sums see the points
/// in the same order, and a block starts on an even vector). Larger blocks spread the per-block work (the Gram sums
/// loaded and stored again, the exponential's loop set-up) over more points;
/// 16 vectors was the fastest size measured (see PERFORMANCE.md).
const CHUNKS: usize = 16;
/// The most f64 lanes of a SIMD vector (AVX-512).
const MAX_LANES: usize = 8;

/// A stack buffer on a cache-line boundary. `pulp`'s vector types are only
/// aligned like `f64`, so without this a buffer of them may start 8 bytes
/// past a 32-byte boundary, and then every other 256-bit access crosses a
/// cache line (measurably slower KAMH steps; see PERFORMANCE.md).
#[repr(C, align(64))]
struct CacheAligned<T>(T);

/// The lower triangle of `M Mᵀ` and `M1` for a radial kernel without
/// forming M, for `d = DIM` ≤ 10 and z column-major (each coordinate of the
/// n points contiguous): the points are taken in blocks of [`CHUNKS`] SIMD
/// vectors (64 points with AVX2, 128 with AVX-512), each vector holding one coordinate of
/// consecutive points, and per block
///
/// 1. in one pass, the differences `z_i − x` (negated, see [`differences`])
///    into a stack buffer laid out chunk by chunk (the DIM vectors of a
///    chunk adjacent, so later passes reach them through one slice index,
///    without bounds checks) and the squared distances
///    `s_i = Σ_l (x_l − z_il)²`, coordinate by coordinate (the order of the
///    scalar `squared_distance`, so `s` and the weights are bitwise those
///    of [`Kernel::gradient_matrix`]);
/// 2. the weights `w_i = 2a(s_i)` ([`Radial::gradient_weights`]);
/// 3. the block of −M, `−m_il = w_i (z_il − x_l)`, in place, in one pass
///    with the first column of step 4;
/// 4. for each column k of the Gram matrix one pass over the buffer with the
///    rows `l ≥ k` in registers: `G_lk += m_l m_k`, all points of a vector
///    at once, with no broadcasts and no entries above the diagonal; the
///    same pass adds `−m_k` to `−(M1)_k`.
///
/// Steps 3–4 run once per accumulator set of `kameleon_core::simd` (two with
/// AVX2: the even vectors of the block, then the odd ones; one with
/// AVX-512), so each of the sums' 8 lanes adds the same points in the same
/// order at both widths; the sets' lanes are added at the end in that
/// module's order. z is read once and M never leaves the L1 cache.
///
/// [`Kernel::gradient_matrix`]: crate::Kernel::gradient_matrix
struct FusedGram<'a, const DIM: usize> {
    kernel: &'a dyn BlockWeights,
    x: &'a [f64],
    columns: [&'a [f64]; DIM],
    gram: &'a mut [f64],
    row_sums: &'a mut [f64],
}

impl<const DIM: usize> pulp::WithSimd for FusedGram<'_, DIM> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            kernel,
            x,
            columns,
            gram,
            row_sums,
        } = self;
        let lanes = S::F64_LANES;
        let n = columns.first().map_or(0, |c| c.len());
        let zero = simd.splat_f64s(0.0);
        let xs: [S::f64s; DIM] = std::array::from_fn(|l| simd.splat_f64s(x[l]));
        // sums[k][l]: G_lk for l ≥ k; totals[l]: −(M1)_l (lane-wise; the
        // buffer holds −M, see `differences`)
        // one set per accumulator: vector v of the points (global index) in
        // set v mod `parts`, so that each of the sums' 8 lanes (see
        // `kameleon_core::simd`) sees the same points in the same order with
        // AVX2 and AVX-512
        let parts = accumulators::<S>();
        let mut sums = [[[zero; DIM]; DIM]; MAX_ACCUMULATORS];
        let mut totals = [[zero; DIM]; MAX_ACCUMULATORS];
        let mut weights = CacheAligned([0.0; CHUNKS * MAX_LANES]);
        let mut buffer = CacheAligned([[zero; DIM]; CHUNKS]);
        // each column as whole SIMD vectors and the rest, split once
        let vectors = n.div_ceil(lanes);
        let full = n / lanes;
        let z_heads: [&[S::f64s]; DIM] =
            std::array::from_fn(|l| &S::as_simd_f64s(columns[l]).0[..full]);
        let z_tails: [&[f64]; DIM] = std::array::from_fn(|l| S::as_simd_f64s(columns[l]).1);
        let mut first = 0;
        while first < vectors {
            let chunks = CHUNKS.min(vectors - first);
            let block = &mut buffer.0[..chunks];
            // 1–2. z_i − x (the lanes past the last point hold −x) and the
            //      squared distances, coordinate by coordinate, then the
            //      weights (zero in the lanes past the last point)
            let len = (n - first * lanes).min(CHUNKS * lanes);
            let padded = &mut weights.0[..chunks * lanes];
            let distances = S::as_mut_simd_f64s(padded).0;
            for (v, (slot, s)) in (first..).zip(block.iter_mut().zip(distances.iter_mut())) {
                let z: [S::f64s; DIM] = if v < full {
                    std::array::from_fn(|l| z_heads[l][v])
                } else {
                    std::array::from_fn(|l| simd.partial_load_f64s(z_tails[l]))
                };
                *s = differences(simd, &xs, &z, slot);
            }
            kernel.block_weights(&mut padded[..len]);
            padded[len..].fill(0.0);
            // 3–4. the block of −M in place of z_i − x with the first Gram
            //      column, then the other columns, one per pass, and −M1
            //      (straight calls with constant K; the columns K ≥ DIM
            //      return at once)
            //      (`first` is a multiple of CHUNKS, so slot i of the block
            //      belongs to set i mod `parts`)
            let block_weights = &S::as_simd_f64s(padded).0[..chunks];
            for (part, (sums, totals)) in sums.iter_mut().zip(&mut totals).take(parts).enumerate() {
                let set = (part, parts);
                weigh_first_column(
                    simd,
                    block,
                    set,
                    block_weights,
                    &mut sums[0],
                    &mut totals[0],
                );
                gram_column::<S, DIM, 1>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 2>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 3>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 4>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 5>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 6>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 7>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 8>(simd, block, set, sums, totals);
                gram_column::<S, DIM, 9>(simd, block, set, sums, totals);
            }
            first += chunks;
        }
        let [sums0, sums1] = &sums;
        for k in 0..DIM {
            for l in k..DIM {
                gram[k * DIM + l] = reduce_accumulators(simd, [sums0[k][l], sums1[k][l]]);
            }
        }
        let [totals0, totals1] = &totals;
        for (l, s) in row_sums.iter_mut().enumerate() {
            *s = -reduce_accumulators(simd, [totals0[l], totals1[l]]);
        }
    }
}

/// Writes `z − x` into `slot` and returns `‖x − z‖²` summed coordinate by
/// coordinate (the order of the scalar `squared_distance`), lane-wise.
///
/// `z − x` rather than `x − z`: with `x` the second operand its spilled
/// broadcasts are read as memory operands of the subtractions (one
/// instruction fewer per coordinate). Negation is exact, so `w (z − x)` is
/// `−m` bitwise, the Gram sums `(−m_l)(−m_k)` are those of `m`, and only
/// `M1` needs its sign flipped at the end (bitwise the sum of `m` too, but
/// for the sign of an exactly zero sum).
#[inline(always)]
fn differences<S: pulp::Simd, const DIM: usize>(
    simd: S,
    x: &[S::f64s; DIM],
    z: &[S::f64s; DIM],
    slot: &mut [S::f64s; DIM],
) -> S::f64s {
    let mut sum = simd.splat_f64s(0.0);
    for l in 0..DIM {
        let diff = simd.sub_f64s(z[l], x[l]);
        slot[l] = diff;
        sum = simd.add_f64s(sum, simd.mul_f64s(diff, diff));
    }
    sum
}

/// Step 3 of [`FusedGram`] fused with the first Gram column: scales each
/// vector of differences in the block by its weights, `−m_l = w (z_l − x_l)`,
/// in place, and adds `m_l m_0` to `sums[l]` and `m_0` to `total` (signs
/// as in [`differences`]), all from registers. `m_0` is not stored: no later
/// pass reads it. The same operations in the same order as scaling first
/// and then running [`gram_column`] for K = 0, so the same bits, with one
/// pass over the block fewer.
#[inline(always)]
fn weigh_first_column<S: pulp::Simd, const DIM: usize>(
    simd: S,
    block: &mut [[S::f64s; DIM]],
    (part, parts): (usize, usize),
    weights: &[S::f64s],
    sums: &mut [S::f64s; DIM],
    total: &mut S::f64s,
) {
    // A function, not a closure (see `GradientColumns`).
    #[inline(always)]
    fn weigh<S: pulp::Simd, const DIM: usize>(
        simd: S,
        slot: &mut [S::f64s; DIM],
        w: S::f64s,
        acc: &mut [S::f64s; DIM],
        sum: &mut S::f64s,
    ) {
        let m0 = simd.mul_f64s(w, slot[0]);
        *sum = simd.add_f64s(*sum, m0);
        acc[0] = simd.mul_add_f64s(m0, m0, acc[0]);
        for l in 1..DIM {
            let ml = simd.mul_f64s(w, slot[l]);
            slot[l] = ml;
            acc[l] = simd.mul_add_f64s(m0, ml, acc[l]);
        }
    }
    let mut acc = *sums;
    let mut sum = *total;
    // slot `part` of each group of `parts`, then the odd one out (an even
    // index, so set 0's): straight loops, which a strided iterator is not
    let mut groups = block.chunks_exact_mut(parts);
    let mut weight_groups = weights.chunks_exact(parts);
    for (group, w) in (&mut groups).zip(&mut weight_groups) {
        weigh(simd, &mut group[part], w[part], &mut acc, &mut sum);
    }
    let rest = (
        groups.into_remainder().first_mut(),
        weight_groups.remainder().first(),
    );
    if let (0, (Some(slot), Some(w))) = (part, rest) {
        weigh(simd, slot, *w, &mut acc, &mut sum);
    }
    *sums = acc;
    *total = sum;
}

/// Adds `m_l m_K` over a block of [`FusedGram`]'s buffer to `sums[K][l]`
/// for `K ≤ l < DIM` (a constant K, so the live sums stay in registers), and
/// `m_K` to `totals[K]` (it is loaded anyway; each lane still sums its
/// points in order). Does nothing for `K ≥ DIM`.
#[inline(always)]
fn gram_column<S: pulp::Simd, const DIM: usize, const K: usize>(
    simd: S,
    block: &[[S::f64s; DIM]],
    (part, parts): (usize, usize),
    sums: &mut [[S::f64s; DIM]; DIM],
    totals: &mut [S::f64s; DIM],
) {
    if K >= DIM {
        return;
    }
    // A function, not a closure (see `GradientColumns`).
    #[inline(always)]
    fn add<S: pulp::Simd, const DIM: usize, const K: usize>(
        simd: S,
        slot: &[S::f64s; DIM],
        acc: &mut [S::f64s; DIM],
        total: &mut S::f64s,
    ) {
        let mk = slot[K];
        *total = simd.add_f64s(*total, mk);
        for l in K..DIM {
            acc[l] = simd.mul_add_f64s(mk, slot[l], acc[l]);
        }
    }
    let mut acc = sums[K];
    let mut total = totals[K];
    // as in `weigh_first_column`
    let groups = block.chunks_exact(parts);
    let rest = groups.remainder().first().filter(|_| part == 0);
    for group in groups {
        add::<S, DIM, K>(simd, &group[part], &mut acc, &mut total);
    }
    if let Some(slot) = rest {
        add::<S, DIM, K>(simd, slot, &mut acc, &mut total);
    }
    sums[K] = acc;
    totals[K] = total;
}

/// Points per block of the gradient matrix: one block's weights live in a
/// stack array, so the weight loop runs over a slice and vectorises.
const BLOCK: usize = 64;

/// The gradient matrix with `d = DIM` if `DIM > 0`, else `d = x.len()`,
/// run at the CPU's widest vectors ([`kameleon_core::simd::dispatch`]; the
/// squared distances are summed over the 8 lanes of that module with fused
/// multiply-adds, the same bits at every width, so they may differ from
/// `grad_x`'s sequential sum in the last bits).
fn gradient_columns<const DIM: usize>(
    kernel: &dyn BlockWeights,
    x: &[f64],
    z: MatRef<'_, f64>,
    out: MatMut<'_, f64>,
) {
    kameleon_core::simd::dispatch(GradientColumns::<DIM> { kernel, x, z, out });
}

struct GradientColumns<'a, const DIM: usize> {
    kernel: &'a dyn BlockWeights,
    x: &'a [f64],
    z: MatRef<'a, f64>,
    out: MatMut<'a, f64>,
}

impl<const DIM: usize> pulp::WithSimd for GradientColumns<'_, DIM> {
    type Output = ();

    /// Block by block: the squared distances (x − z_i as SIMD blocks of the
    /// point, squared and summed lane-wise with fused multiply-adds, then
    /// across the lanes), the weights `2a(s)` of the whole block (one
    /// vectorised loop, the exponential included for the Gaussian), then the
    /// columns `2a(s_i)(x − z_i)`, again as SIMD blocks.
    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            kernel,
            x,
            z,
            mut out,
        } = self;
        let d = if DIM > 0 { DIM } else { x.len() };
        let x = &x[..d];
        let (Some(z), Some(mut out)) = (z.try_as_row_major(), out.rb_mut().try_as_col_major_mut())
        else {
            // any other layout: point by point through scratch buffers
            for_each_column(z, out, |_, col, zi| {
                let mut weight = [squared_distance(x, zi)];
                kernel.block_weights(&mut weight);
                for ((o, xl), zl) in col.iter_mut().zip(x).zip(zi) {
                    *o = weight[0] * (xl - zl);
                }
            });
            return;
        };
        let blocks = simd::blocks::<S>(d);
        let parts = accumulators::<S>();
        // A function, not a closure: a closure cannot be marked
        // `#[inline(always)]`, and compiled out of line it lacks the
        // caller's target features, so every SIMD subtraction in it became
        // a call.
        #[inline(always)]
        fn difference<S: pulp::Simd>(simd: S, x: &[f64], zi: &[f64], b: usize) -> S::f64s {
            simd.sub_f64s(
                simd::load_block(simd, x, b),
                simd::load_block(simd, &zi[..x.len()], b),
            )
        }
        let mut weights = [0.0; BLOCK];
        let mut start = 0;
        while start < z.nrows() {
            let len = BLOCK.min(z.nrows() - start);
            let (z, out) = (z.subrows(start, len), out.rb_mut().subcols_mut(start, len));
            let weights = &mut weights[..len];
            for (w, zi) in weights.iter_mut().zip(z.row_iter()) {
                // block b in accumulator b mod `parts` (see
                // `kameleon_core::simd`)
                let mut sums = [simd.splat_f64s(0.0); MAX_ACCUMULATORS];
                for b in 0..blocks {
                    let diff = difference(simd, x, zi.as_slice(), b);
                    let sum = &mut sums[b % parts];
                    *sum = simd.mul_add_f64s(diff, diff, *sum);
                }
                *w = reduce_accumulators(simd, sums);
            }
            kernel.block_weights(weights);
            for ((w, zi), col) in weights.iter().zip(z.row_iter()).zip(out.col_iter_mut()) {
                let w = simd.splat_f64s(*w);
                let col = &mut col.as_slice_mut()[..d];
                for b in 0..blocks {
                    let m = simd.mul_f64s(w, difference(simd, x, zi.as_slice(), b));
                    simd::store_block(simd, col, b, m);
                }
            }
            start += len;
        }
    }
}

/// Calls `row(i, z_i)` for every row `z_i` of `z`, handed over as a slice: a
/// view of `z` if it is row-major, else a copy in a d-length scratch buffer
/// allocated once per call.
#[inline(always)]
fn for_each_row(z: MatRef<'_, f64>, mut row: impl FnMut(usize, &[f64])) {
    match z.try_as_row_major() {
        Some(rows) => {
            for i in 0..z.nrows() {
                row(i, rows.row(i).as_slice());
            }
        }
        None => {
            let mut scratch = Vec::with_capacity(z.ncols());
            for i in 0..z.nrows() {
                scratch.clear();
                scratch.extend(z.row(i).iter().copied());
                row(i, &scratch);
            }
        }
    }
}

/// Calls `column(i, out_i, z_i)` for every column `out_i` of `out` (d × n)
/// and the matching row `z_i` of `z` (n × d); `column` fills `out_i`.
///
/// Both are handed over as slices. When `out` is column-major (faer's `Mat`
/// layout) and `z` row-major (how the samplers store a subsample), they are
/// views of the matrices and nothing is allocated; other layouts go through
/// d-length scratch buffers allocated once per call (slices rather than
/// faer's strided row iterators, which cost more per point).
#[inline(always)]
pub(crate) fn for_each_column(
    z: MatRef<'_, f64>,
    mut out: MatMut<'_, f64>,
    mut column: impl FnMut(usize, &mut [f64], &[f64]),
) {
    let d = z.ncols();
    debug_assert!(out.nrows() == d && out.ncols() == z.nrows());
    let mut out_scratch = Vec::new();
    for_each_row(z, |i, zi| {
        if let Some(col) = out.rb_mut().col_mut(i).try_as_col_major_mut() {
            column(i, col.as_slice_mut(), zi);
        } else {
            out_scratch.resize(d, 0.0);
            column(i, &mut out_scratch, zi);
            for (o, v) in out.rb_mut().col_mut(i).iter_mut().zip(&out_scratch) {
                *o = *v;
            }
        }
    });
}

/// Implements [`crate::Kernel`] for a type that implements [`Radial`].
macro_rules! impl_radial_kernel {
    ($ty:ty) => {
        impl $crate::Kernel for $ty {
            fn eval(&self, x: &[f64], y: &[f64]) -> f64 {
                $crate::radial::eval(self, x, y)
            }

            fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
                $crate::radial::grad_x(self, x, y, out)
            }

            fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64 {
                $crate::radial::hessian_diag_x(self, x, y, out)
            }

            fn gradient_matrix(
                &self,
                x: &[f64],
                z: faer::MatRef<'_, f64>,
                out: faer::MatMut<'_, f64>,
            ) {
                $crate::radial::gradient_matrix(self, x, z, out)
            }

            fn gradient_gram(
                &self,
                x: &[f64],
                z: faer::MatRef<'_, f64>,
                scratch: &mut [f64],
                gram: &mut [f64],
                row_sums: &mut [f64],
            ) {
                $crate::radial::gradient_gram(self, x, z, scratch, gram, row_sums)
            }
        }
    };
}
pub(crate) use impl_radial_kernel;

#[cfg(test)]
mod tests {
    use crate::{Gaussian, Kernel, Laplacian, Matern, RationalQuadratic};
    use faer::Mat;

    /// `gradient_gram` equals `M Mᵀ` (lower triangle) and `M1` summed point
    /// by point from `2 grad_x(x, z_i)`, for the fused path (column-major z,
    /// d ≤ 10: d = 1, 3 with partial SIMD blocks, 8, 10) over several blocks
    /// of points with a partial last vector, and for the fallbacks (d = 12;
    /// row-major z; the Laplacian's default), for radial kernels with the
    /// vectorised Gaussian weights and the per-point default weights.
    #[test]
    fn gradient_gram_matches_the_pointwise_gradients() {
        let n = 2 * super::CHUNKS * 4 + 17;
        for d in [1, 3, 8, 10, 12] {
            let z = Mat::<f64>::from_fn(n, d, |i, l| {
                (((i * 37 + l * 11) % 101) as f64 / 101.0 - 0.5) * 4.0
            });
            let z_row_major_storage = z.transpose().to_owned();
            let x: Vec<f64> = (0..d).map(|l| 0.1 * l as f64 - 0.3).collect();
            let kernels: [&dyn Kernel; 4] = [
                &Gaussian::new(1.7).unwrap(),
                &RationalQuadratic::new(1.2, 0.8).unwrap(),
                &Matern::new(1.5, 2.0).unwrap(),
                &Laplacian::new(1.5).unwrap(),
            ];
            for kernel in kernels {
                let (mut gram, mut sums) = (vec![0.0; d * d], vec![0.0; d]);
                let mut want_gram = vec![0.0; d * d];
                let mut want_sums = vec![0.0; d];
                let mut grad = vec![0.0; d];
                for i in 0..n {
                    let zi: Vec<f64> = (0..d).map(|l| z[(i, l)]).collect();
                    kernel.grad_x(&x, &zi, &mut grad);
                    for k in 0..d {
                        want_sums[k] += 2.0 * grad[k];
                        for l in k..d {
                            want_gram[k * d + l] += 4.0 * grad[k] * grad[l];
                        }
                    }
                }
                let scale = want_gram.iter().fold(1e-300f64, |a, v| a.max(v.abs()));
                for (layout, zm) in [
                    ("column-major", z.as_ref()),
                    ("row-major", z_row_major_storage.transpose()),
                ] {
                    let mut scratch = vec![0.0; d * n];
                    kernel.gradient_gram(&x, zm, &mut scratch, &mut gram, &mut sums);
                    for k in 0..d {
                        let tol = 1e-12 * (1.0 + want_sums[k].abs()) * n as f64;
                        assert!(
                            (sums[k] - want_sums[k]).abs() <= tol,
                            "{kernel:?} {layout} d = {d}"
                        );
                        for l in k..d {
                            let (got, want) = (gram[k * d + l], want_gram[k * d + l]);
                            assert!(
                                (got - want).abs() <= 1e-12 * scale,
                                "{kernel:?} {layout} d = {d}: G[{l},{k}] = {got} vs {want}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// The blocked gradient matrix equals `2 grad_x(x, z_i)` column by column
    /// for n spanning several blocks (with a partial last one), for a
    /// constant dimension (8) and a dynamic one (12), with the Gaussian's
    /// vectorised weights and a kernel using the per-point default.
    #[test]
    fn blocked_gradient_matrix_matches_the_pointwise_gradients() {
        let n = 2 * super::BLOCK + 17;
        for d in [8, 12] {
            let storage: Vec<f64> = (0..n * d)
                .map(|i| ((i * 37 % 101) as f64 / 101.0 - 0.5) * 4.0)
                .collect();
            let z = faer::MatRef::from_row_major_slice(&storage, n, d);
            let x: Vec<f64> = (0..d).map(|l| 0.1 * l as f64 - 0.3).collect();
            let kernels: [&dyn Kernel; 2] = [
                &Gaussian::new(1.7).unwrap(),
                &RationalQuadratic::new(1.2, 0.8).unwrap(),
            ];
            for kernel in kernels {
                let mut out = Mat::<f64>::zeros(d, n);
                kernel.gradient_matrix(&x, z, out.as_mut());
                let mut grad = vec![0.0; d];
                for i in 0..n {
                    kernel.grad_x(&x, &storage[i * d..(i + 1) * d], &mut grad);
                    for l in 0..d {
                        let want = 2.0 * grad[l];
                        // fastmath::exp is within 2 ulp of libm's exp
                        assert!(
                            (out[(l, i)] - want).abs() <= 1e-14 * (1.0 + want.abs()),
                            "{kernel:?}, d = {d}: M[{l},{i}] = {} vs {want}",
                            out[(l, i)]
                        );
                    }
                }
            }
        }
    }
}
