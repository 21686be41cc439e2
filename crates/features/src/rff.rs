//! Dense random Fourier features (Rahimi & Recht 2007) of any spectral kernel.

use crate::error::{check_finite, check_len};
use crate::{FeatureError, FeatureMap};
use faer::{Mat, MatMut, MatRef};
use kameleon_kernels::{SpectralDensity, fastmath};
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::f64::consts::TAU;

/// Frequencies per tile: the arguments and feature values of one tile sit in
/// stack arrays, so the per-point methods allocate nothing.
const TILE: usize = 64;
/// Partial sums in [`tile_dot`]: two AVX2 registers.
const LANES: usize = 8;

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

/// [`kameleon_kernels::fastmath`]'s vectorisable sine and cosine with
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
        write_feature_values::<Libm>(embedding, order, args, scale, out);
    }
}

/// Whether every argument lies in the accurate range of
/// [`kameleon_kernels::fastmath`]'s sine and cosine (false for NaN): one
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

/// `Σ_j a_j b_j` over one tile with fused multiply-adds in [`LANES`]
/// interleaved partial sums (lane k sums the terms `j ≡ k mod LANES`, held in
/// `LANES / S::F64_LANES` vector registers), added in a fixed order at the
/// end: the result does not depend on the vector width of `S`.
#[inline(always)]
fn tile_dot<S: pulp::Simd>(simd: S, a: &[f64; TILE], b: &[f64; TILE]) -> f64 {
    let mut lanes = [0.0; LANES];
    let sums = S::as_mut_simd_f64s(&mut lanes).0;
    for (a, b) in a
        .as_chunks::<LANES>()
        .0
        .iter()
        .zip(b.as_chunks::<LANES>().0)
    {
        let (a, b) = (S::as_simd_f64s(a).0, S::as_simd_f64s(b).0);
        for ((s, a), b) in sums.iter_mut().zip(a).zip(b) {
            *s = simd.mul_add_f64s(*a, *b, *s);
        }
    }
    lanes.iter().sum()
}

/// `g_j = Σ_r (∂φ_r/∂a) w_r` over the rows r of the frequency with argument
/// `args[j]`, for the weights `w` of those rows (one per frequency for
/// [`Embedding::CosPhase`], the interleaved pair for [`Embedding::SinCos`]),
/// with the sine and cosine `T`: the derivatives of [`feature_values`]
/// (order 1) contracted with the weights in the same loop, so that it
/// vectorises and nothing is stored in between.
#[inline(always)]
fn weighted_derivatives<T: Trig>(
    embedding: Embedding,
    scale: f64,
    args: &[f64],
    w: &[f64],
    g: &mut [f64],
) {
    match embedding {
        // ∂φ/∂a = −scale·sin a: the sine alone
        Embedding::CosPhase => {
            for ((g, a), w) in g.iter_mut().zip(args).zip(w) {
                *g = (-scale * T::sin(*a)) * w;
            }
        }
        // ∂(sin a, cos a)/∂a = (cos a, −sin a)
        Embedding::SinCos => {
            for ((g, a), w) in g.iter_mut().zip(args).zip(w.chunks_exact(2)) {
                let (s, c) = T::sin_cos(*a);
                *g = (scale * c).mul_add(w[0], (-scale * s) * w[1]);
            }
        }
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
    /// The frequencies again, by input coordinate: row l (of length
    /// `padded`, the multiple of [`TILE`] ≥ m, zero beyond m) holds
    /// `ω_{1,l} … ω_{m,l}`; for [`Embedding::CosPhase`] a last row holds the
    /// phases. The per-point loops run over whole tiles of contiguous memory
    /// and vectorise.
    by_input: Vec<f64>,
    padded: usize,
    phases: Vec<f64>,
    scale: f64,
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
    /// or a non-finite drawn frequency.
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
        let mut frequencies = vec![0.0; m * dim_in];
        for omega in frequencies.chunks_exact_mut(dim_in) {
            density.sample_frequency(rng, omega);
        }
        let phases = match embedding {
            Embedding::CosPhase => (0..m).map(|_| TAU * rng.random::<f64>()).collect(),
            Embedding::SinCos => Vec::new(),
        };
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
        let padded = m.div_ceil(TILE) * TILE;
        let mut by_input = vec![0.0; (dim_in + 1) * padded];
        for (j, omega) in frequencies.chunks_exact(dim_in).enumerate() {
            for (l, w) in omega.iter().enumerate() {
                by_input[l * padded + j] = *w;
            }
        }
        by_input[dim_in * padded..][..phases.len()].copy_from_slice(&phases);
        Ok(Self {
            embedding,
            dim_in,
            dim_out,
            frequencies,
            by_input,
            padded,
            phases,
            scale: (2.0 / dim_out as f64).sqrt(),
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
    /// stack array, so that `out` (column-major) is written column by column:
    /// writing it row by row strides through memory and was ~2× slower at
    /// D = 4096.
    #[inline(always)]
    fn derivative_matrix(&self, x: &[f64], mut out: MatMut<'_, f64>, order: u8) {
        debug_assert!(x.len() == self.dim_in);
        debug_assert!(out.nrows() == self.dim_out && out.ncols() == self.dim_in);
        let (d, m) = (self.dim_in, self.num_frequencies());
        let rows_per_frequency = self.embedding.dim_out(1);
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        for first in (0..m).step_by(TILE) {
            let count = TILE.min(m - first);
            self.tile_arguments(first, x, &mut args);
            feature_values_with::<FastFma>(self.embedding, order, &args, self.scale, &mut values);
            let first_row = self.embedding.dim_out(first);
            for l in 0..d {
                let column = self.tile_column(l, first);
                for q in 0..count * rows_per_frequency {
                    let w = column[q / rows_per_frequency];
                    let factor = if order == 1 { w } else { w * w };
                    out[(first_row + q, l)] = values[q] * factor;
                }
            }
        }
    }

    /// Row l of [`Self::by_input`] on the tile starting at frequency `first`.
    #[inline(always)]
    fn tile_column(&self, l: usize, first: usize) -> &[f64; TILE] {
        let start = l * self.padded + first;
        self.by_input[start..start + TILE]
            .try_into()
            .expect("tiles lie inside the padded rows")
    }

    /// Writes the arguments `ω_jᵀx (+ b_j)` of the tile of frequencies
    /// starting at `first` into `args` (zero frequencies beyond m): one fused
    /// multiply-add per input coordinate, the first one adding to the phases
    /// (for [`Embedding::CosPhase`]). Only called under [`PerPoint`]'s
    /// dispatch, where `mul_add` is the hardware instruction and the loops
    /// vectorise.
    #[inline(always)]
    fn tile_arguments(&self, first: usize, x: &[f64], args: &mut [f64; TILE]) {
        let (x0, rest) = x.split_first().expect("the input dimension is ≥ 1");
        let column = self.tile_column(0, first);
        match self.embedding {
            Embedding::CosPhase => {
                let phases = self.tile_column(x.len(), first);
                for ((a, w), b) in args.iter_mut().zip(column).zip(phases) {
                    *a = w.mul_add(*x0, *b);
                }
            }
            Embedding::SinCos => {
                for (a, w) in args.iter_mut().zip(column) {
                    *a = w * x0;
                }
            }
        }
        for (l, xl) in rest.iter().enumerate() {
            for (a, w) in args.iter_mut().zip(self.tile_column(l + 1, first)) {
                *a = w.mul_add(*xl, *a);
            }
        }
    }

    /// The body of [`FeatureMap::jacobian_transpose_mul`], one pass over
    /// tiles of frequencies: the arguments, `g_j = Σ_r (∂φ_r/∂a_j) w_r` over
    /// the rows r of frequency j ([`weighted_derivatives`], zero beyond m),
    /// and `out_l += Σ_j ω_{j,l} g_j` by [`tile_dot`] against row l of
    /// [`Self::by_input`].
    #[inline(always)]
    fn jacobian_transpose_mul_tiles<S: pulp::Simd>(
        &self,
        simd: S,
        x: &[f64],
        weights: &[f64],
        out: &mut [f64],
    ) {
        let m = self.num_frequencies();
        out.fill(0.0);
        let (mut args, mut g) = ([0.0; TILE], [0.0; TILE]);
        for first in (0..m).step_by(TILE) {
            let count = TILE.min(m - first);
            let w = &weights[self.embedding.dim_out(first)..][..self.embedding.dim_out(count)];
            self.tile_arguments(first, x, &mut args);
            let (a, tile_g) = (&args[..count], &mut g[..count]);
            if in_fast_range(a) {
                weighted_derivatives::<FastFma>(self.embedding, self.scale, a, w, tile_g);
            } else {
                weighted_derivatives::<Libm>(self.embedding, self.scale, a, w, tile_g);
            }
            g[count..].fill(0.0);
            for (l, o) in out.iter_mut().enumerate() {
                *o += tile_dot(simd, self.tile_column(l, first), &g);
            }
        }
    }

    /// The body of [`FeatureMap::embed`].
    #[inline(always)]
    fn embed_tiles(&self, x: &[f64], out: &mut [f64]) {
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        let m = self.num_frequencies();
        for first in (0..m).step_by(TILE) {
            let rows = self.embedding.dim_out(TILE.min(m - first));
            self.tile_arguments(first, x, &mut args);
            feature_values_with::<FastFma>(self.embedding, 0, &args, self.scale, &mut values);
            out[self.embedding.dim_out(first)..][..rows].copy_from_slice(&values[..rows]);
        }
    }

    /// The body of [`FeatureMap::argument_derivatives`].
    #[inline(always)]
    fn argument_derivative_tiles(&self, x: &[f64], first: &mut [f64], second: &mut [f64]) {
        let (mut args, mut values) = ([0.0; TILE], [0.0; 2 * TILE]);
        let m = self.num_frequencies();
        for start in (0..m).step_by(TILE) {
            let rows = self.embedding.dim_out(TILE.min(m - start));
            let first_row = self.embedding.dim_out(start);
            self.tile_arguments(start, x, &mut args);
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
/// the best instruction set of the running CPU (AVX2 + FMA where available),
/// where the tile loops vectorise — the sines and cosines ([`FastFma`], the
/// FMA variants of [`kameleon_kernels::fastmath`]) included — and
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
        pulp::Arch::new().dispatch(self);
    }
}

impl pulp::WithSimd for PerPoint<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self { map, x, op } = self;
        match op {
            PointOp::Embed(out) => map.embed_tiles(x, out),
            PointOp::Derivatives(order, out) => map.derivative_matrix(x, out, order),
            PointOp::ArgumentDerivatives(first, second) => {
                map.argument_derivative_tiles(x, first, second)
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
