// Over 800 lines on purpose: the feature values, the Jacobian and the second
// derivatives share the trigonometric back-ends and the tiled sweep over the
// frequencies defined here; apart, those would have to become crate-wide.
//! Dense random Fourier features (Rahimi & Recht 2007) of any spectral kernel.

use crate::error::{check_finite, check_len};
use crate::{FeatureError, FeatureMap};
use faer::reborrow::ReborrowMut;
use faer::{Mat, MatMut, MatRef};
use kameleon_core::buffer::{checked_len, reserve, zeros};
use kameleon_core::fastmath;
use kameleon_kernels::SpectralDensity;
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::f64::consts::TAU;

/// Frequencies per tile: the arguments and feature values of one tile sit in
/// stack arrays, so the per-point methods allocate nothing. A whole number
/// of [`BLOCK`]s.
const TILE: usize = 128;
/// Frequencies per block of [`RandomFourierFeatures::block_arguments`]: 8
/// AVX2 vectors, whose arguments stay in registers while the input
/// coordinates are added in.
const BLOCK: usize = 32;
/// Partial sums of each output coordinate in
/// [`RandomFourierFeatures::jacobian_transpose_mul_with`]: two AVX2
/// registers.
const LANES: usize = 8;
/// Output coordinates whose [`LANES`] partial sums sit in the stack array of
/// [`RandomFourierFeatures::jacobian_transpose_mul_with`] (1.9 KiB, zeroed
/// once per sweep); larger input dimensions take several sweeps over the
/// frequencies, each computing the arguments and sines again.
const SWEEP_COORDINATES: usize = 30;

/// The two random-feature embeddings of the F-KAMH thesis (§2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Embedding {
    /// `φ_i(x) = √(2/D) cos(ω_iᵀx + b_i)`, `i = 1…D`: D frequencies ω_i and
    /// phases `b_i ~ U[0, 2π)` (thesis eq. 2.5).
    CosPhase,
    /// `φ(x) = √(2/D) [sin(ω_1ᵀx), cos(ω_1ᵀx), …, sin(ω_{D/2}ᵀx), cos(ω_{D/2}ᵀx)]`:
    /// D/2 frequencies, interleaved pairs, D even (thesis eq. 2.4).
    SinCos,
}

impl Embedding {
    /// The number of frequencies an embedding of output dimension `dim_out`
    /// uses; an error if `dim_out` is 0, or odd for [`Embedding::SinCos`].
    pub fn num_frequencies(self, dim_out: usize) -> Result<usize, FeatureError> {
        if dim_out == 0 {
            return Err(FeatureError::ZeroDimension {
                what: "output dimension",
            });
        }
        match self {
            Embedding::CosPhase => Ok(dim_out),
            Embedding::SinCos if dim_out.is_multiple_of(2) => Ok(dim_out / 2),
            Embedding::SinCos => Err(FeatureError::OddOutputDimension { dim_out }),
        }
    }

    /// The output dimension for `num_frequencies` frequencies.
    pub(crate) fn dim_out(self, num_frequencies: usize) -> usize {
        match self {
            Embedding::CosPhase => num_frequencies,
            Embedding::SinCos => 2 * num_frequencies,
        }
    }
}

/// Writes the `order`-th derivatives with respect to the argument `a` of the
/// features of the frequencies whose arguments `a_j = ω_jᵀx (+ b_j)` are
/// `args` into the first `embedding.dim_out(args.len())` values of `out` (one per
/// frequency for [`Embedding::CosPhase`], the interleaved pair for
/// [`Embedding::SinCos`]). Order 0 gives φ, 1 gives ∂φ/∂a, 2 gives ∂²φ/∂a².
///
/// Shared by the dense and the Fastfood maps so both follow one convention.
/// The sines and cosines come from the vectorisable [`Fast`] functions when
/// every argument lies in their accurate range (checked once per call), else
/// from libm. Inlined, so that it is compiled for the caller's instruction
/// set. The dense map's per-point methods, which run under [`PerPoint`]'s
/// FMA dispatch, use [`feature_values_with`]`::<FastFma>` instead.
#[inline(always)]
/// The phases `b ~ U[0, 2π)` of `m` frequencies for [`Embedding::CosPhase`]
/// (none for [`Embedding::SinCos`]), allocated fallibly.
pub(crate) fn draw_phases(
    embedding: Embedding,
    m: usize,
    rng: &mut dyn Rng,
) -> Result<Vec<f64>, FeatureError> {
    let mut phases = Vec::new();
    if embedding == Embedding::CosPhase {
        reserve("the phases", &mut phases, m)?;
        phases.extend((0..m).map(|_| TAU * rng.random::<f64>()));
    }
    Ok(phases)
}

pub(crate) fn feature_values(
    embedding: Embedding,
    order: u8,
    args: &[f64],
    scale: f64,
    out: &mut [f64],
) {
    feature_values_with::<Fast>(embedding, order, args, scale, out);
}

/// The sine and cosine of the per-point loops.
trait Trig {
    /// `sin x`.
    fn sin(x: f64) -> f64;
    /// `(sin x, cos x)`.
    fn sin_cos(x: f64) -> (f64, f64);
}

/// libm's sine and cosine: any argument.
struct Libm;

impl Trig for Libm {
    #[inline(always)]
    fn sin(x: f64) -> f64 {
        x.sin()
    }
    #[inline(always)]
    fn sin_cos(x: f64) -> (f64, f64) {
        x.sin_cos()
    }
}

/// [`kameleon_core::fastmath`]'s vectorisable sine and cosine with
/// separate multiplies and adds: any code, arguments up to
/// [`fastmath::SIN_COS_MAX_ARG`] in magnitude.
struct Fast;

impl Trig for Fast {
    #[inline(always)]
    fn sin(x: f64) -> f64 {
        fastmath::sin(x)
    }
    #[inline(always)]
    fn sin_cos(x: f64) -> (f64, f64) {
        fastmath::sin_cos(x)
    }
}

/// [`Fast`] with fused multiply-adds: only under [`PerPoint`]'s dispatch,
/// where they are one instruction each (a slow software call elsewhere).
struct FastFma;

impl Trig for FastFma {
    #[inline(always)]
    fn sin(x: f64) -> f64 {
        fastmath::sin_fma(x)
    }
    #[inline(always)]
    fn sin_cos(x: f64) -> (f64, f64) {
        fastmath::sin_cos_fma(x)
    }
}

/// [`FastFma`] whose sine has no range test: only for arguments known to lie
/// in its range ([`RandomFourierFeatures::fast_input_limit`]).
struct FastFmaInRange;

impl Trig for FastFmaInRange {
    #[inline(always)]
    fn sin(x: f64) -> f64 {
        fastmath::sin_fma_in_range(x)
    }
    #[inline(always)]
    fn sin_cos(x: f64) -> (f64, f64) {
        fastmath::sin_cos_fma(x)
    }
}

/// [`feature_values`] with the fast functions `T` where every argument is in
/// their range, else libm.
#[inline(always)]
fn feature_values_with<T: Trig>(
    embedding: Embedding,
    order: u8,
    args: &[f64],
    scale: f64,
    out: &mut [f64],
) {
    debug_assert!(out.len() >= embedding.dim_out(args.len()));
    if in_fast_range(args) {
        write_feature_values::<T>(embedding, order, args, scale, out);
    } else {
        feature_values_libm(embedding, order, args, scale, out);
    }
}

/// [`write_feature_values`] with libm: the rare fallback, kept out of line.
/// Inlined, its calls are pure functions of arguments that may sit in
/// registers, and the compiler may evaluate some of them on the fast path
/// too (speculatively, before the range test).
#[cold]
#[inline(never)]
fn feature_values_libm(embedding: Embedding, order: u8, args: &[f64], scale: f64, out: &mut [f64]) {
    write_feature_values::<Libm>(embedding, order, args, scale, out);
}

/// Whether every argument lies in the accurate range of
/// [`kameleon_core::fastmath`]'s sine and cosine (false for NaN): one
/// vectorisable pass.
#[inline(always)]
fn in_fast_range(args: &[f64]) -> bool {
    args.iter()
        .fold(true, |ok, a| ok & (a.abs() <= fastmath::SIN_COS_MAX_ARG))
}

/// [`feature_values`] with the sine and cosine `T`: one simple loop per case
/// so that each vectorises, with the sine alone where only it is needed.
#[inline(always)]
fn write_feature_values<T: Trig>(
    embedding: Embedding,
    order: u8,
    args: &[f64],
    scale: f64,
    out: &mut [f64],
) {
    match embedding {
        // φ = scale·cos a, φ' = −scale·sin a, φ'' = −scale·cos a
        Embedding::CosPhase if order == 1 => {
            for (o, a) in out.iter_mut().zip(args) {
                *o = -scale * T::sin(*a);
            }
        }
        Embedding::CosPhase => {
            let sign = if order == 0 { scale } else { -scale };
            for (o, a) in out.iter_mut().zip(args) {
                *o = sign * T::sin_cos(*a).1;
            }
        }
        Embedding::SinCos => {
            // (sin, cos) → (cos, −sin) → (−sin, −cos)
            for (pair, a) in out.chunks_exact_mut(2).zip(args) {
                let (s, c) = T::sin_cos(*a);
                let (first, second) = match order {
                    0 => (s, c),
                    1 => (c, -s),
                    _ => (-s, -c),
                };
                pair[0] = scale * first;
                pair[1] = scale * second;
            }
        }
    }
}

/// `sums[k] += Σ_j ω_j g_j` over the frequencies `j ≡ k mod LANES` of one
/// block, with fused multiply-adds in increasing j (lane k of `sums` is lane
/// `k mod S::F64_LANES` of vector `k / S::F64_LANES`), so the result does not
/// depend on the vector width of `S`.
#[inline(always)]
fn accumulate_block<S: pulp::Simd>(
    simd: S,
    omega: &[f64; BLOCK],
    g: &[f64; BLOCK],
    sums: &mut [f64; LANES],
) {
    let sums = S::as_mut_simd_f64s(sums).0;
    for (omega, g) in omega
        .as_chunks::<LANES>()
        .0
        .iter()
        .zip(g.as_chunks::<LANES>().0)
    {
        let (omega, g) = (S::as_simd_f64s(omega).0, S::as_simd_f64s(g).0);
        for ((s, omega), g) in sums.iter_mut().zip(omega).zip(g) {
            *s = simd.mul_add_f64s(*omega, *g, *s);
        }
    }
}

/// `g_j = Σ_r (∂φ_r/∂a) w_r / c` over the rows r of the frequency with
/// argument `args[j]`, for the weights `w` of those rows (one per frequency
/// for [`Embedding::CosPhase`], the interleaved pair for
/// [`Embedding::SinCos`]), with the sine and cosine `T`: the derivatives of
/// [`feature_values`] (order 1) contracted with the weights in the same
/// loop, so that it vectorises and nothing is stored in between. The
/// constant factor `c` ([`derivative_factor`]) is left out, for the caller
/// to apply once to the sums over the frequencies: one multiplication per
/// frequency fewer.
///
/// The loop's length is the caller's run-time count: a loop of constant
/// length would be unrolled in full, and the polynomials' coefficients would
/// then be reloaded for every vector instead of staying in registers.
#[inline(always)]
fn weighted_derivatives<T: Trig>(embedding: Embedding, args: &[f64], w: &[f64], g: &mut [f64]) {
    match embedding {
        // ∂φ/∂a = −scale·sin a: the sine alone
        Embedding::CosPhase => {
            for ((g, a), w) in g.iter_mut().zip(args).zip(w) {
                *g = T::sin(*a) * w;
            }
        }
        // ∂(sin a, cos a)/∂a = scale·(cos a, −sin a)
        Embedding::SinCos => {
            for ((g, a), w) in g.iter_mut().zip(args).zip(w.chunks_exact(2)) {
                let (s, c) = T::sin_cos(*a);
                *g = c.mul_add(w[0], -s * w[1]);
            }
        }
    }
}

/// The factor [`weighted_derivatives`] leaves out: `−scale` for
/// [`Embedding::CosPhase`] (`∂φ/∂a = −scale·sin a`), `scale` for
/// [`Embedding::SinCos`].
fn derivative_factor(embedding: Embedding, scale: f64) -> f64 {
    match embedding {
        Embedding::CosPhase => -scale,
        Embedding::SinCos => scale,
    }
}

/// Dense random Fourier features `φ: Rᵈ → R^D` with
/// `E[φ(x)ᵀφ(y)] = k(x, y)` for the kernel whose spectral density drew the
/// frequencies.
///
/// The frequencies are stored row-major (one frequency per row, `m × d`,
/// `m = D` or `D/2`), with the phases (empty for [`Embedding::SinCos`]); both
/// can be read back and the whole map (de)serialised with serde, so a fitted
/// model can be saved. Deserialisation re-validates the shapes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "RffParts", into = "RffParts")]
pub struct RandomFourierFeatures {
    embedding: Embedding,
    dim_in: usize,
    dim_out: usize,
    frequencies: Vec<f64>,
    /// The frequencies again, by input coordinate and tile: tile t (of
    /// [`TILE`] frequencies, the last one padded with zero frequencies) is a
    /// contiguous run of d + 1 rows of length [`TILE`], row l holding
    /// `ω_{j,l}` for the tile's frequencies j, the last row the phases (zero
    /// for [`Embedding::SinCos`]). The per-point loops run over whole tiles
    /// of contiguous memory and vectorise; a tile's rows (9 KiB at d = 8)
    /// are one contiguous stretch that fits the L1 cache from the arguments
    /// to the accumulation of the tile. (With whole rows of length m, 8 KiB
    /// apart at m = 1000, the d + 1 rows of a block fall into the same few
    /// cache sets.)
    by_input: Vec<f64>,
    phases: Vec<f64>,
    scale: f64,
    /// Inputs with every `|x_l|` up to this have every argument within half
    /// of [`fastmath::SIN_COS_MAX_ARG`]: `(MAX/2 − max_j |b_j|) / max_j ‖ω_j‖₁`
    /// (negative if a phase alone is too large). The factor 2 leaves room
    /// for the d roundings of the computed arguments.
    fast_input_limit: f64,
}

/// The serialised form of [`RandomFourierFeatures`].
#[derive(Serialize, Deserialize)]
struct RffParts {
    embedding: Embedding,
    dim_in: usize,
    frequencies: Vec<f64>,
    phases: Vec<f64>,
}

impl TryFrom<RffParts> for RandomFourierFeatures {
    type Error = FeatureError;
    fn try_from(p: RffParts) -> Result<Self, FeatureError> {
        Self::from_parts(p.embedding, p.dim_in, p.frequencies, p.phases)
    }
}

impl From<RandomFourierFeatures> for RffParts {
    fn from(f: RandomFourierFeatures) -> Self {
        RffParts {
            embedding: f.embedding,
            dim_in: f.dim_in,
            frequencies: f.frequencies,
            phases: f.phases,
        }
    }
}

impl RandomFourierFeatures {
    /// Draws the frequencies from `density` (and, for
    /// [`Embedding::CosPhase`], phases `b ~ U[0, 2π)`) for inputs of dimension
    /// `dim_in` and `dim_out` features.
    ///
    /// Errors: a zero dimension, an odd `dim_out` with [`Embedding::SinCos`],
    /// a non-finite drawn frequency, or ([`FeatureError::BufferTooLarge`])
    /// `dim_out × dim_in` frequencies that cannot be allocated.
    pub fn new(
        density: &dyn SpectralDensity,
        dim_in: usize,
        dim_out: usize,
        embedding: Embedding,
        rng: &mut dyn Rng,
    ) -> Result<Self, FeatureError> {
        let m = embedding.num_frequencies(dim_out)?;
        if dim_in == 0 {
            return Err(FeatureError::ZeroDimension {
                what: "input dimension",
            });
        }
        let mut frequencies = zeros("the frequencies, m × d", &[m, dim_in])?;
        // the tiled copy that `from_parts` makes, checked before any draw
        checked_len(
            "the tiled frequencies",
            &[m.div_ceil(TILE), dim_in + 1, TILE],
        )?;
        for omega in frequencies.chunks_exact_mut(dim_in) {
            density.sample_frequency(rng, omega);
        }
        let phases = draw_phases(embedding, m, rng)?;
        Self::from_parts(embedding, dim_in, frequencies, phases)
    }

    /// Rebuilds a map from explicit frequencies (row-major, `m × dim_in`) and
    /// phases (length `m` for [`Embedding::CosPhase`], empty for
    /// [`Embedding::SinCos`]). Validates shapes and finiteness.
    pub fn from_parts(
        embedding: Embedding,
        dim_in: usize,
        frequencies: Vec<f64>,
        phases: Vec<f64>,
    ) -> Result<Self, FeatureError> {
        if dim_in == 0 {
            return Err(FeatureError::ZeroDimension {
                what: "input dimension",
            });
        }
        if !frequencies.len().is_multiple_of(dim_in) || frequencies.is_empty() {
            return Err(FeatureError::DimensionMismatch {
                what: "frequencies (a non-empty multiple of the input dimension)",
                expected: dim_in * (frequencies.len() / dim_in).max(1),
                got: frequencies.len(),
            });
        }
        let m = frequencies.len() / dim_in;
        let expected_phases = match embedding {
            Embedding::CosPhase => m,
            Embedding::SinCos => 0,
        };
        check_len("phases", expected_phases, phases.len())?;
        check_finite("frequency", &frequencies)?;
        check_finite("phase", &phases)?;
        let dim_out = embedding.dim_out(m);
        let tile_len = (dim_in + 1) * TILE;
        let mut by_input = zeros(
            "the tiled frequencies",
            &[m.div_ceil(TILE), dim_in + 1, TILE],
        )?;
        for (j, omega) in frequencies.chunks_exact(dim_in).enumerate() {
            let tile = &mut by_input[j / TILE * tile_len..][..tile_len];
            for (row, w) in tile.chunks_exact_mut(TILE).zip(omega) {
                row[j % TILE] = *w;
            }
            if let Some(b) = phases.get(j) {
                tile[dim_in * TILE + j % TILE] = *b;
            }
        }
        let largest = |values: &mut dyn Iterator<Item = f64>| values.fold(0.0, f64::max);
        let largest_phase = largest(&mut phases.iter().map(|b| b.abs()));
        let largest_row_sum = largest(
            &mut frequencies
                .chunks_exact(dim_in)
                .map(|omega| omega.iter().map(|w| w.abs()).sum()),
        );
        let fast_input_limit = (0.5 * fastmath::SIN_COS_MAX_ARG - largest_phase) / largest_row_sum;
        Ok(Self {
            embedding,
            dim_in,
            dim_out,
            frequencies,
            by_input,
            phases,
            scale: (2.0 / dim_out as f64).sqrt(),
            fast_input_limit,
        })
    }

    /// The embedding used.
    pub fn embedding(&self) -> Embedding {
        self.embedding
    }

    /// The number of frequencies m (`D` or `D/2`).
    pub fn num_frequencies(&self) -> usize {
        self.frequencies.len() / self.dim_in
    }

    /// The frequencies, one per row (`m × d`).
    pub fn frequencies(&self) -> MatRef<'_, f64> {
        MatRef::from_row_major_slice(&self.frequencies, self.num_frequencies(), self.dim_in)
    }

    /// The phases `b_i` (empty for [`Embedding::SinCos`]).
    pub fn phases(&self) -> &[f64] {
        &self.phases
    }

    /// `out[r, l] = (∂^order φ_r/∂a^order) · ω_{r,l}^order`: the Jacobian
    /// (order 1) or the second derivatives (order 2), under [`PerPoint`]'s
    /// dispatch.
    ///
    /// Works on tiles of [`TILE`] frequencies whose derivative values sit in a
    /// stack array, so that `out` (column-major) is written column by column
    /// (row by row strides through memory). Each column segment is a slice
    /// written by a vectorised loop ([`Self::scale_rows`], not element-wise
    /// indexing into `out`), or, for a view with strided columns, goes
    /// through a stack buffer.
    #[inline(always)]
    fn derivative_matrix<S: pulp::Simd>(
        &self,
        simd: S,
        x: &[f64],
        mut out: MatMut<'_, f64>,
        order: u8,
    ) {
        debug_assert!(x.len() == self.dim_in);
        debug_assert!(out.nrows() == self.dim_out && out.ncols() == self.dim_in);
        let (d, m) = (self.dim_in, self.num_frequencies());
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        for first in (0..m).step_by(TILE) {
            let count = TILE.min(m - first);
            self.tile_arguments(simd, first, x, &mut args);
            feature_values_with::<FastFma>(self.embedding, order, &args, self.scale, &mut values);
            let (first_row, rows) = (self.embedding.dim_out(first), self.embedding.dim_out(count));
            for l in 0..d {
                let column = &self.tile_column(l, first)[..count];
                let target = out.rb_mut().col_mut(l).subrows_mut(first_row, rows);
                match target.try_as_col_major_mut() {
                    Some(target) => {
                        let target = target.as_slice_mut();
                        self.scale_rows(order, &values[..rows], column, target);
                    }
                    // a column with a stride: through a stack buffer
                    None => {
                        let mut buffer = [0.0; 2 * TILE];
                        self.scale_rows(order, &values[..rows], column, &mut buffer[..rows]);
                        let target = out.rb_mut().col_mut(l).subrows_mut(first_row, rows);
                        for (t, b) in target.iter_mut().zip(&buffer) {
                            *t = *b;
                        }
                    }
                }
            }
        }
    }

    /// `out[r] = values[r] · ω_{r,l}^order` over the rows of a tile, for the
    /// tile's row `column` of [`Self::by_input`] (one entry per frequency,
    /// so one per row or per pair of rows): one simple loop per embedding,
    /// which vectorises.
    #[inline(always)]
    fn scale_rows(&self, order: u8, values: &[f64], column: &[f64], out: &mut [f64]) {
        let factor = |w: f64| if order == 1 { w } else { w * w };
        match self.embedding {
            Embedding::CosPhase => {
                for ((o, v), w) in out.iter_mut().zip(values).zip(column) {
                    *o = v * factor(*w);
                }
            }
            Embedding::SinCos => {
                let pairs = out.chunks_exact_mut(2).zip(values.chunks_exact(2));
                for ((o, v), w) in pairs.zip(column) {
                    let f = factor(*w);
                    o[0] = v[0] * f;
                    o[1] = v[1] * f;
                }
            }
        }
    }

    /// The d + 1 rows of [`Self::by_input`] of the tile holding frequency
    /// `first` (contiguous, [`TILE`] long each; the last row holds the
    /// phases).
    #[inline(always)]
    fn tile(&self, first: usize) -> &[f64] {
        let tile_len = (self.dim_in + 1) * TILE;
        &self.by_input[first / TILE * tile_len..][..tile_len]
    }

    /// Row l of [`Self::by_input`] on the tile starting at frequency `first`
    /// (a multiple of [`TILE`]).
    #[inline(always)]
    fn tile_column(&self, l: usize, first: usize) -> &[f64; TILE] {
        self.tile(first)[l * TILE..][..TILE]
            .try_into()
            .expect("rows are TILE long")
    }

    /// Rows 0, 1, … d of [`Self::by_input`] on the block starting at
    /// frequency `first` (a multiple of [`BLOCK`]; the last row holds the
    /// phases).
    #[inline(always)]
    fn block_rows(&self, first: usize) -> impl Iterator<Item = &[f64; BLOCK]> {
        self.tile(first).chunks_exact(TILE).map(move |row| {
            row[first % TILE..][..BLOCK]
                .try_into()
                .expect("blocks lie inside the tiles")
        })
    }

    /// Writes the arguments `ω_jᵀx (+ b_j)` of the tile of frequencies
    /// starting at `first` into `args` (zero frequencies beyond m), block by
    /// block ([`Self::block_arguments`]).
    #[inline(always)]
    fn tile_arguments<S: pulp::Simd>(
        &self,
        simd: S,
        first: usize,
        x: &[f64],
        args: &mut [f64; TILE],
    ) {
        for (start, block) in (first..)
            .step_by(BLOCK)
            .zip(args.as_chunks_mut::<BLOCK>().0)
        {
            *block = self.block_arguments(simd, start, x);
        }
    }

    /// The arguments `ω_jᵀx (+ b_j)` of the block of frequencies starting at
    /// `first` (zero frequencies beyond m): starting from the phases (the
    /// last row of [`Self::by_input`], zero for [`Embedding::SinCos`]), one
    /// fused multiply-add per input coordinate with `x_l` broadcast. The
    /// block is a few SIMD vectors, which stay in registers across the
    /// coordinates.
    #[inline(always)]
    fn block_arguments<S: pulp::Simd>(&self, simd: S, first: usize, x: &[f64]) -> [f64; BLOCK] {
        let mut args = *self.block_rows(first).nth(x.len()).expect("the phases row");
        let vectors = S::as_mut_simd_f64s(&mut args).0;
        for (xl, omega) in x.iter().zip(self.block_rows(first)) {
            let xl = simd.splat_f64s(*xl);
            for (a, w) in vectors.iter_mut().zip(S::as_simd_f64s(omega).0) {
                *a = simd.mul_add_f64s(*w, xl, *a);
            }
        }
        args
    }

    /// The body of [`FeatureMap::jacobian_transpose_mul`]: the sweep of
    /// [`Self::jacobian_transpose_mul_with`] with the fast sine and no test
    /// per argument if the input is within [`Self::fast_input_limit`] (so
    /// every argument is in the fast sine's range), else with libm's (also
    /// for NaN inputs).
    #[inline(always)]
    fn jacobian_transpose_mul_tiles<S: pulp::Simd>(
        &self,
        simd: S,
        x: &[f64],
        weights: &[f64],
        out: &mut [f64],
    ) {
        if x.iter().all(|v| v.abs() <= self.fast_input_limit) {
            self.jacobian_transpose_mul_with::<S, FastFmaInRange>(simd, x, weights, out);
        } else {
            self.jacobian_transpose_mul_with::<S, Libm>(simd, x, weights, out);
        }
    }

    /// `out_l = Σ_j ω_{j,l} g_j` with `g_j = Σ_r (∂φ_r/∂a_j) w_r` over the
    /// rows r of frequency j, with the sine and cosine `T`, in one pass over
    /// tiles of frequencies: the arguments ([`Self::tile_arguments`], in
    /// registers while the coordinates are added in), `g`
    /// ([`weighted_derivatives`], zero beyond m), and, block by block, `g`
    /// multiplied into [`LANES`] partial sums per output coordinate
    /// ([`accumulate_block`], the block's `g` in registers across the
    /// coordinates), which are added up and multiplied by
    /// [`derivative_factor`] at the end. The partial sums of up to
    /// [`SWEEP_COORDINATES`] coordinates sit in a stack array; larger inputs
    /// sweep the frequencies once per group of coordinates.
    #[inline(always)]
    fn jacobian_transpose_mul_with<S: pulp::Simd, T: Trig>(
        &self,
        simd: S,
        x: &[f64],
        weights: &[f64],
        out: &mut [f64],
    ) {
        let m = self.num_frequencies();
        let (mut args, mut g) = ([0.0; TILE], [0.0; TILE]);
        for (sweep, out) in out.chunks_mut(SWEEP_COORDINATES).enumerate() {
            let mut sums = [[0.0; LANES]; SWEEP_COORDINATES];
            let sums = &mut sums[..out.len()];
            for first in (0..m).step_by(TILE) {
                let count = TILE.min(m - first);
                let w = &weights[self.embedding.dim_out(first)..][..self.embedding.dim_out(count)];
                self.tile_arguments(simd, first, x, &mut args);
                let (a, tile_g) = (&args[..count], &mut g[..count]);
                weighted_derivatives::<T>(self.embedding, a, w, tile_g);
                g[count..].fill(0.0);
                let blocks = g.as_chunks::<BLOCK>().0.iter().take(count.div_ceil(BLOCK));
                for (start, g) in (first..).step_by(BLOCK).zip(blocks) {
                    let rows = self.block_rows(start).skip(sweep * SWEEP_COORDINATES);
                    for (omega, sums) in rows.zip(sums.iter_mut()) {
                        accumulate_block(simd, omega, g, sums);
                    }
                }
            }
            let factor = derivative_factor(self.embedding, self.scale);
            for (o, sums) in out.iter_mut().zip(sums.iter()) {
                *o = factor * sums.iter().sum::<f64>();
            }
        }
    }

    /// The body of [`FeatureMap::embed`].
    #[inline(always)]
    fn embed_tiles<S: pulp::Simd>(&self, simd: S, x: &[f64], out: &mut [f64]) {
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        let m = self.num_frequencies();
        for first in (0..m).step_by(TILE) {
            let rows = self.embedding.dim_out(TILE.min(m - first));
            self.tile_arguments(simd, first, x, &mut args);
            feature_values_with::<FastFma>(self.embedding, 0, &args, self.scale, &mut values);
            out[self.embedding.dim_out(first)..][..rows].copy_from_slice(&values[..rows]);
        }
    }

    /// The body of [`FeatureMap::argument_derivatives`].
    #[inline(always)]
    fn argument_derivative_tiles<S: pulp::Simd>(
        &self,
        simd: S,
        x: &[f64],
        first: &mut [f64],
        second: &mut [f64],
    ) {
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        let m = self.num_frequencies();
        for start in (0..m).step_by(TILE) {
            let rows = self.embedding.dim_out(TILE.min(m - start));
            let first_row = self.embedding.dim_out(start);
            self.tile_arguments(simd, start, x, &mut args);
            for (order, out) in [(1, &mut *first), (2, &mut *second)] {
                feature_values_with::<FastFma>(
                    self.embedding,
                    order,
                    &args,
                    self.scale,
                    &mut values,
                );
                out[first_row..][..rows].copy_from_slice(&values[..rows]);
            }
        }
    }
}

/// The per-point operations of [`RandomFourierFeatures`].
enum PointOp<'a> {
    Embed(&'a mut [f64]),
    /// [`RandomFourierFeatures::derivative_matrix`] of the given order.
    Derivatives(u8, MatMut<'a, f64>),
    ArgumentDerivatives(&'a mut [f64], &'a mut [f64]),
    JacobianTransposeMul(&'a [f64], &'a mut [f64]),
}

/// One per-point operation as a [`pulp::WithSimd`] operation: compiled for
/// the best instruction set of the running CPU (AVX-512 or AVX2 + FMA where
/// available, [`kameleon_core::simd::dispatch`]),
/// where the tile loops vectorise — the sines and cosines ([`FastFma`], the
/// FMA variants of [`kameleon_core::fastmath`]) included — and
/// `f64::mul_add` is one instruction. Fused multiply-adds are exact-then-rounded on every CPU (in
/// software where the instruction is missing) and the partial sums have a
/// fixed lane structure, so the result does not depend on the CPU.
struct PerPoint<'a> {
    map: &'a RandomFourierFeatures,
    x: &'a [f64],
    op: PointOp<'a>,
}

impl PerPoint<'_> {
    fn run(self) {
        kameleon_core::simd::dispatch(self);
    }
}

impl pulp::WithSimd for PerPoint<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self { map, x, op } = self;
        match op {
            PointOp::Embed(out) => map.embed_tiles(simd, x, out),
            PointOp::Derivatives(order, out) => map.derivative_matrix(simd, x, out, order),
            PointOp::ArgumentDerivatives(first, second) => {
                map.argument_derivative_tiles(simd, x, first, second)
            }
            PointOp::JacobianTransposeMul(weights, out) => {
                map.jacobian_transpose_mul_tiles(simd, x, weights, out)
            }
        }
    }
}

impl FeatureMap for RandomFourierFeatures {
    fn dim_in(&self) -> usize {
        self.dim_in
    }

    fn dim_out(&self) -> usize {
        self.dim_out
    }

    fn embed(&self, x: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == self.dim_in && out.len() == self.dim_out);
        let op = PointOp::Embed(out);
        PerPoint { map: self, x, op }.run();
    }

    fn jacobian(&self, x: &[f64], out: MatMut<'_, f64>) {
        let op = PointOp::Derivatives(1, out);
        PerPoint { map: self, x, op }.run();
    }

    fn second_derivatives(&self, x: &[f64], out: MatMut<'_, f64>) {
        let op = PointOp::Derivatives(2, out);
        PerPoint { map: self, x, op }.run();
    }

    fn feature_frequencies(&self) -> Option<Mat<f64>> {
        let rows_per_frequency = self.embedding.dim_out(1);
        Some(Mat::from_fn(self.dim_out, self.dim_in, |r, l| {
            self.frequencies[(r / rows_per_frequency) * self.dim_in + l]
        }))
    }

    fn argument_derivatives(&self, x: &[f64], first: &mut [f64], second: &mut [f64]) -> bool {
        debug_assert!(x.len() == self.dim_in);
        debug_assert!(first.len() == self.dim_out && second.len() == self.dim_out);
        let op = PointOp::ArgumentDerivatives(first, second);
        PerPoint { map: self, x, op }.run();
        true
    }

    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == self.dim_in && out.len() == self.dim_in);
        debug_assert!(weights.len() == self.dim_out);
        let op = PointOp::JacobianTransposeMul(weights, out);
        PerPoint { map: self, x, op }.run();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kameleon_kernels::Gaussian;
    use rand::SeedableRng;

    /// The per-point methods give the same bits with pulp's portable
    /// back-ends of 1, 2, 4 and 8 lanes per vector as under the running
    /// CPU's dispatch (AVX-512 or AVX2 + FMA where available): the partial sums have a
    /// fixed lane structure and every multiply-add is fused on every
    /// back-end. Covers a partial last tile, a last tile of one block, two
    /// sweeps of coordinates, both embeddings and arguments outside the fast
    /// sine's range (the libm sweep).
    #[test]
    fn results_do_not_depend_on_the_vector_width() {
        fn bits(v: &[f64]) -> Vec<u64> {
            v.iter().map(|v| v.to_bits()).collect()
        }
        fn check<S: pulp::Simd>(simd: S, phi: &RandomFourierFeatures, x: &[f64], w: &[f64]) {
            let (d, big_d) = (phi.dim_in(), phi.dim_out());
            let (mut dispatched, mut portable) = (vec![0.0; d], vec![0.0; d]);
            phi.jacobian_transpose_mul(x, w, &mut dispatched);
            phi.jacobian_transpose_mul_tiles(simd, x, w, &mut portable);
            assert_eq!(bits(&dispatched), bits(&portable));
            let (mut dispatched, mut portable) = (vec![0.0; big_d], vec![0.0; big_d]);
            phi.embed(x, &mut dispatched);
            phi.embed_tiles(simd, x, &mut portable);
            assert_eq!(bits(&dispatched), bits(&portable));
        }
        let kernel = Gaussian::new(1.0).unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        for embedding in [Embedding::CosPhase, Embedding::SinCos] {
            for (d, m) in [(10, 97), (40, 80), (3, 5)] {
                let big_d = embedding.dim_out(m);
                let phi =
                    RandomFourierFeatures::new(&kernel, d, big_d, embedding, &mut rng).unwrap();
                let w: Vec<f64> = (0..big_d).map(|i| (0.7 * i as f64).cos()).collect();
                for scale in [1.0, 1e6] {
                    let x: Vec<f64> = (0..d).map(|l| scale * (0.3 * l as f64 - 1.1)).collect();
                    check(pulp::Scalar::new(), &phi, &x, &w);
                    check(pulp::Scalar128b, &phi, &x, &w);
                    check(pulp::Scalar256b, &phi, &x, &w);
                    check(pulp::Scalar512b, &phi, &x, &w);
                }
            }
        }
    }
}
