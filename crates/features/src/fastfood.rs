//! Fastfood (Le, Sarlós & Smola 2013): random Fourier features whose
//! frequency matrix is a product of diagonal, permutation and Hadamard
//! matrices, applied in O(D log d) per point instead of O(D d).

use crate::error::{check_finite, check_len};
use crate::fwht::fwht;
use crate::rff::{Embedding, draw_phases, feature_values};
use crate::{FeatureError, FeatureMap, RandomFourierFeatures};
use faer::MatMut;
use kameleon_core::buffer::{checked_len, ensure_room, reserve, zeros};
use kameleon_kernels::{Gaussian, InverseMultiquadric, Matern, RationalQuadratic, SpectralDensity};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use std::cell::RefCell;

/// A spectral density that is radial (isotropic) in every dimension: ω = r·u
/// with u uniform on the sphere, and the density of the same radial kernel
/// in a higher dimension p restricts to the one in d ≤ p (true when the
/// kernel is a function of ‖x − y‖₂ that is positive definite in every
/// dimension).
///
/// Fastfood only needs the radius: it draws a frequency in the padded
/// dimension p with [`SpectralDensity::sample_frequency`] and keeps its norm.
/// Implemented for the kernels checked to be radial (each a Gaussian scale
/// mixture with one scale shared by all coordinates): [`Gaussian`],
/// [`Matern`] (multivariate Student t), [`RationalQuadratic`] and
/// [`InverseMultiquadric`]. Not for [`kameleon_kernels::Laplacian`], which
/// uses the L1 distance (its spectral density is a product of 1-d Cauchy
/// laws, not radial): use dense [`crate::RandomFourierFeatures`] for it.
pub trait RadialSpectralDensity: SpectralDensity {}

impl RadialSpectralDensity for Gaussian {}
impl RadialSpectralDensity for Matern {}
impl RadialSpectralDensity for RationalQuadratic {}
impl RadialSpectralDensity for InverseMultiquadric {}

/// Fastfood random features `φ: Rᵈ → R^D` for a radial kernel.
///
/// The input is zero-padded to `p`, the next power of two ≥ d. Block b holds
/// p frequencies, the rows of `V_b = S H G Π H B` (H the p × p
/// Walsh–Hadamard matrix, B random signs, Π a random permutation, G i.i.d.
/// N(0, 1), S the radial scaling): each row of `H G Π H B` is exactly
/// N(0, p I) given B and Π, so its direction is uniform; S rescales row i to
/// the norm `r_i = ‖ω_i‖` of a frequency drawn from the kernel's spectral
/// density in dimension p (for the Gaussian kernel, `r_i ~ χ_p / ℓ`, the
/// paper's `S = (1/(ℓ√p)) s_i/‖G‖_F`). The blocks provide the m = D
/// ([`Embedding::CosPhase`], with uniform phases) or m = D/2
/// ([`Embedding::SinCos`]) frequencies; the last block is truncated.
///
/// # Cost and scratch space
///
/// [`Fastfood::embed_with`] costs two fast transforms per block, O(D log p).
/// [`Fastfood::jacobian_transpose_mul_with`] (the gradient of `wᵀφ(x)`) adds
/// one transposed transform per block. The full Jacobian and second
/// derivatives need the columns `V_b e_l`, one transform each, so they cost
/// O(D d log p) — never a stored D × d matrix, but more than the O(D d) of
/// dense features (see the crate docs on choosing between them).
///
/// The transforms need `3p` numbers of scratch space. The `_with` methods
/// take it as a [`FastfoodScratch`] made once by [`Fastfood::scratch`]; the
/// [`FeatureMap`] methods use a thread-local buffer instead, which is
/// allocated on a thread's first call and only grows when a larger map is
/// used on that thread — so the per-point calls allocate nothing in steady
/// state either way.
///
/// The map (de)serialises with serde; deserialisation re-validates every
/// shape, sign, swap index and scale, so a damaged file gives an error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "FastfoodParts", into = "FastfoodParts")]
pub struct Fastfood {
    embedding: Embedding,
    dim_in: usize,
    dim_out: usize,
    padded: usize,
    num_frequencies: usize,
    /// B, per block (p entries of ±1).
    signs: Vec<f64>,
    /// Π as Fisher–Yates swaps, per block: swap positions j and `swaps[j]`
    /// for j = p−1 down to 1.
    swaps: Vec<usize>,
    /// G, per block.
    gaussian: Vec<f64>,
    /// S, per block, including the normalisation `1/(‖G‖ √p)`.
    scaling: Vec<f64>,
    /// The phases b_i (CosPhase only).
    phases: Vec<f64>,
    /// √(2/D).
    scale: f64,
}

/// The serialised form of [`Fastfood`] (everything but the derived sizes).
#[derive(Serialize, Deserialize)]
struct FastfoodParts {
    embedding: Embedding,
    dim_in: usize,
    dim_out: usize,
    signs: Vec<f64>,
    swaps: Vec<usize>,
    gaussian: Vec<f64>,
    scaling: Vec<f64>,
    phases: Vec<f64>,
}

impl TryFrom<FastfoodParts> for Fastfood {
    type Error = FeatureError;
    fn try_from(parts: FastfoodParts) -> Result<Self, FeatureError> {
        Self::from_parts(parts)
    }
}

impl From<Fastfood> for FastfoodParts {
    fn from(f: Fastfood) -> Self {
        FastfoodParts {
            embedding: f.embedding,
            dim_in: f.dim_in,
            dim_out: f.dim_out,
            signs: f.signs,
            swaps: f.swaps,
            gaussian: f.gaussian,
            scaling: f.scaling,
            phases: f.phases,
        }
    }
}

/// Scratch space for the [`Fastfood`] transforms (`3p` numbers); make it
/// once with [`Fastfood::scratch`] and reuse it for every point.
#[derive(Debug, Clone)]
pub struct FastfoodScratch {
    buf: Vec<f64>,
}

/// `dim_in` padded to the next power of two, or an error when that
/// overflows.
fn padded_dim(dim_in: usize) -> Result<usize, FeatureError> {
    dim_in
        .checked_next_power_of_two()
        .ok_or(FeatureError::InvalidParameter {
            name: "dim_in",
            value: dim_in as f64,
            reason: "must be at most 2^63 (it is padded to a power of two)",
        })
}

thread_local! {
    static THREAD_SCRATCH: RefCell<Vec<f64>> = const { RefCell::new(Vec::new()) };
}

impl Fastfood {
    /// Draws a Fastfood map for the radial kernel with spectral density
    /// `density`, inputs of dimension `dim_in` and `dim_out` features.
    ///
    /// Errors: a zero dimension, an odd `dim_out` with [`Embedding::SinCos`],
    /// a non-finite drawn radius, a `dim_in` above 2⁶³ (it is padded to a
    /// power of two), or ([`FeatureError::BufferTooLarge`]) parameters that
    /// cannot be allocated (four per frequency, padded to whole blocks of
    /// `p` frequencies).
    pub fn new(
        density: &dyn RadialSpectralDensity,
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
        let p = padded_dim(dim_in)?;
        let blocks = m.div_ceil(p);
        let len = checked_len("the Fastfood blocks, (m/p rounded up) × p", &[blocks, p])?;
        let (mut signs, mut gaussian, mut scaling) = (Vec::new(), Vec::new(), Vec::new());
        reserve("the Fastfood signs", &mut signs, len)?;
        reserve("the Fastfood Gaussian scalings", &mut gaussian, len)?;
        reserve("the Fastfood radial scalings", &mut scaling, len)?;
        // the swaps are `usize`s, as large as `f64`s: the allocator is asked
        // for that much first, so that a refusal is an error, not an abort
        ensure_room("the Fastfood permutations", &[&[len]])?;
        let mut swaps = Vec::with_capacity(len);
        let mut omega = zeros("a frequency, p values", &[p])?;
        for _ in 0..blocks {
            signs.extend((0..p).map(|_| if rng.random::<bool>() { 1.0 } else { -1.0 }));
            swaps.push(0);
            swaps.extend((1..p).map(|j| rng.random_range(0..=j)));
            let g: Vec<f64> = (0..p).map(|_| rng.sample(StandardNormal)).collect();
            let norm = (g.iter().map(|v| v * v).sum::<f64>() * p as f64).sqrt();
            gaussian.extend_from_slice(&g);
            for _ in 0..p {
                density.sample_frequency(rng, &mut omega);
                let radius = omega.iter().map(|v| v * v).sum::<f64>().sqrt();
                scaling.push(radius / norm);
            }
        }
        let phases = draw_phases(embedding, m, rng)?;
        Self::from_parts(FastfoodParts {
            embedding,
            dim_in,
            dim_out,
            signs,
            swaps,
            gaussian,
            scaling,
            phases,
        })
    }

    /// Checks the parts (as drawn, or as read back) and assembles the map.
    fn from_parts(parts: FastfoodParts) -> Result<Self, FeatureError> {
        let FastfoodParts {
            embedding,
            dim_in,
            dim_out,
            signs,
            swaps,
            gaussian,
            scaling,
            phases,
        } = parts;
        let m = embedding.num_frequencies(dim_out)?;
        if dim_in == 0 {
            return Err(FeatureError::ZeroDimension {
                what: "input dimension",
            });
        }
        let p = padded_dim(dim_in)?;
        let len = checked_len(
            "the Fastfood blocks, (m/p rounded up) × p",
            &[m.div_ceil(p), p],
        )?;
        check_len("signs", len, signs.len())?;
        check_len("swaps", len, swaps.len())?;
        check_len("gaussian", len, gaussian.len())?;
        check_len("radial scaling", len, scaling.len())?;
        let expected_phases = match embedding {
            Embedding::CosPhase => m,
            Embedding::SinCos => 0,
        };
        check_len("phases", expected_phases, phases.len())?;
        if let Some(&value) = signs.iter().find(|&&b| b != 1.0 && b != -1.0) {
            return Err(FeatureError::InvalidParameter {
                name: "signs",
                value,
                reason: "must be 1 or -1",
            });
        }
        // position j of a block swaps with one of 0..=j (Fisher–Yates)
        if let Some(i) = (0..len).find(|&i| swaps[i] > i % p) {
            return Err(FeatureError::InvalidParameter {
                name: "swaps",
                value: swaps[i] as f64,
                reason: "a block's position j must swap with a position in 0..=j",
            });
        }
        check_finite("gaussian", &gaussian)?;
        check_finite("radial scaling", &scaling)?;
        check_finite("phase", &phases)?;
        Ok(Self {
            embedding,
            dim_in,
            dim_out,
            padded: p,
            num_frequencies: m,
            signs,
            swaps,
            gaussian,
            scaling,
            phases,
            scale: (2.0 / dim_out as f64).sqrt(),
        })
    }

    /// The embedding used.
    pub fn embedding(&self) -> Embedding {
        self.embedding
    }

    /// The padded input dimension p (the next power of two ≥ d).
    pub fn padded_dim(&self) -> usize {
        self.padded
    }

    /// The number of frequencies m (`D` or `D/2`).
    pub fn num_frequencies(&self) -> usize {
        self.num_frequencies
    }

    /// Scratch space for the `_with` methods.
    pub fn scratch(&self) -> FastfoodScratch {
        FastfoodScratch {
            buf: vec![0.0; self.scratch_len()],
        }
    }

    fn scratch_len(&self) -> usize {
        3 * self.padded
    }

    /// The equivalent dense map: the same features with the frequencies
    /// `ω_i` (the first d columns of the rows of the `V_b`) stored
    /// explicitly. Allocates O(D d); for inspection, saving and testing.
    /// Errors if a materialised frequency overflows to a non-finite value, or
    /// ([`FeatureError::BufferTooLarge`]) if the `m × d` frequencies cannot
    /// be allocated.
    pub fn to_dense(&self) -> Result<RandomFourierFeatures, FeatureError> {
        let (d, p) = (self.dim_in, self.padded);
        let mut frequencies = zeros("the frequencies, m × d", &[self.num_frequencies, d])?;
        let mut col = vec![0.0; p];
        for b in 0..self.num_blocks() {
            let (first, count) = self.block_range(b);
            for l in 0..d {
                self.column(b, l, &mut col);
                for j in 0..count {
                    frequencies[(first + j) * d + l] = col[j];
                }
            }
        }
        RandomFourierFeatures::from_parts(self.embedding, d, frequencies, self.phases.clone())
    }

    /// Writes `φ(x)` into `out`, using `scratch`.
    pub fn embed_with(&self, x: &[f64], out: &mut [f64], scratch: &mut FastfoodScratch) {
        debug_assert!(x.len() == self.dim_in && out.len() == self.dim_out);
        let t = &mut scratch.buf[..self.padded];
        for b in 0..self.num_blocks() {
            let (first, count) = self.block_range(b);
            self.arguments(b, x, t);
            let rows = &mut out[self.embedding.dim_out(first)..][..self.embedding.dim_out(count)];
            feature_values(self.embedding, 0, &t[..count], self.scale, rows);
        }
    }

    /// Writes the Jacobian `∂φ_i/∂x_l` (D × d) into `out`, using `scratch`.
    pub fn jacobian_with(&self, x: &[f64], out: MatMut<'_, f64>, scratch: &mut FastfoodScratch) {
        self.derivative_matrix(x, out, 1, scratch);
    }

    /// Writes the second derivatives `∂²φ_i/∂x_l²` (D × d) into `out`, using
    /// `scratch`.
    pub fn second_derivatives_with(
        &self,
        x: &[f64],
        out: MatMut<'_, f64>,
        scratch: &mut FastfoodScratch,
    ) {
        self.derivative_matrix(x, out, 2, scratch);
    }

    /// Writes `J(x)ᵀw = ∇ₓ(wᵀφ(x))` into `out` (length d) with one forward
    /// and one transposed fast transform per block, using `scratch`.
    pub fn jacobian_transpose_mul_with(
        &self,
        x: &[f64],
        weights: &[f64],
        out: &mut [f64],
        scratch: &mut FastfoodScratch,
    ) {
        debug_assert!(x.len() == self.dim_in && out.len() == self.dim_in);
        debug_assert!(weights.len() == self.dim_out);
        out.fill(0.0);
        let (t, values) = scratch.buf.split_at_mut(self.padded);
        let rows_per_frequency = self.embedding.dim_out(1);
        for b in 0..self.num_blocks() {
            let (first, count) = self.block_range(b);
            self.arguments(b, x, t);
            let rows = self.embedding.dim_out(count);
            feature_values(
                self.embedding,
                1,
                &t[..count],
                self.scale,
                &mut values[..rows],
            );
            let w = &weights[self.embedding.dim_out(first)..][..rows];
            // t_j ← Σ_r (∂φ_r/∂a_j) w_r over the rows r of frequency j.
            let pairs = values[..rows]
                .chunks_exact(rows_per_frequency)
                .zip(w.chunks_exact(rows_per_frequency));
            for (g, (v, w)) in t.iter_mut().zip(pairs) {
                *g = v.iter().zip(w).map(|(v, w)| v * w).sum();
            }
            t[count..].fill(0.0);
            self.transpose_transform(b, t);
            for (o, v) in out.iter_mut().zip(t.iter()) {
                *o += v;
            }
        }
    }

    fn num_blocks(&self) -> usize {
        self.num_frequencies.div_ceil(self.padded)
    }

    /// The first frequency of block b and how many frequencies it holds.
    fn block_range(&self, b: usize) -> (usize, usize) {
        let first = b * self.padded;
        (first, self.padded.min(self.num_frequencies - first))
    }

    /// The parameters of block b: (B, swaps, G, S).
    fn block(&self, b: usize) -> (&[f64], &[usize], &[f64], &[f64]) {
        let r = b * self.padded..(b + 1) * self.padded;
        (
            &self.signs[r.clone()],
            &self.swaps[r.clone()],
            &self.gaussian[r.clone()],
            &self.scaling[r],
        )
    }

    /// `t ← V_b t = S H G Π H B t` in place.
    fn transform(&self, b: usize, t: &mut [f64]) {
        let (signs, ..) = self.block(b);
        multiply(t, signs);
        fwht(t);
        self.finish_transform(b, t);
    }

    /// `t ← S H G Π t`, the second half of [`Fastfood::transform`].
    fn finish_transform(&self, b: usize, t: &mut [f64]) {
        let (_, swaps, g, s) = self.block(b);
        for j in (1..t.len()).rev() {
            t.swap(j, swaps[j]);
        }
        multiply(t, g);
        fwht(t);
        multiply(t, s);
    }

    /// `t ← V_bᵀ t = B H Πᵀ G H S t` in place.
    fn transpose_transform(&self, b: usize, t: &mut [f64]) {
        let (signs, swaps, g, s) = self.block(b);
        multiply(t, s);
        fwht(t);
        multiply(t, g);
        for j in 1..t.len() {
            t.swap(j, swaps[j]);
        }
        fwht(t);
        multiply(t, signs);
    }

    /// `t ← V_b x̃ (+ phases)` for the zero-padded x̃: the arguments of block
    /// b's frequencies (entries past the block's count are meaningless).
    fn arguments(&self, b: usize, x: &[f64], t: &mut [f64]) {
        t[..self.dim_in].copy_from_slice(x);
        t[self.dim_in..].fill(0.0);
        self.transform(b, t);
        let (first, count) = self.block_range(b);
        if let Some(phases) = self.phases.get(first..first + count) {
            for (v, phase) in t.iter_mut().zip(phases) {
                *v += phase;
            }
        }
    }

    /// `t ← V_b e_l`, the l-th input coordinate of block b's frequencies.
    /// `H B e_l = B_l H e_l` is the l-th Sylvester–Hadamard column scaled by
    /// `B_l`, with entries `B_l (−1)^popcount(j & l)`: written directly, which
    /// saves one of the two fast transforms.
    fn column(&self, b: usize, l: usize, t: &mut [f64]) {
        let sign = self.block(b).0[l];
        for (j, v) in t.iter_mut().enumerate() {
            *v = if (j & l).count_ones().is_multiple_of(2) {
                sign
            } else {
                -sign
            };
        }
        self.finish_transform(b, t);
    }

    /// `out[r, l] = (∂^order φ_r/∂a^order) · ω_{r,l}^order`, the Jacobian
    /// (order 1) or the second derivatives (order 2).
    fn derivative_matrix(
        &self,
        x: &[f64],
        mut out: MatMut<'_, f64>,
        order: u8,
        scratch: &mut FastfoodScratch,
    ) {
        debug_assert!(x.len() == self.dim_in);
        debug_assert!(out.nrows() == self.dim_out && out.ncols() == self.dim_in);
        let p = self.padded;
        let (values, col) = scratch.buf.split_at_mut(2 * p);
        let col = &mut col[..p];
        let rows_per_frequency = self.embedding.dim_out(1);
        for b in 0..self.num_blocks() {
            let (first, count) = self.block_range(b);
            let first_row = self.embedding.dim_out(first);
            self.arguments(b, x, col);
            let rows = count * rows_per_frequency;
            feature_values(
                self.embedding,
                order,
                &col[..count],
                self.scale,
                &mut values[..rows],
            );
            for l in 0..self.dim_in {
                self.column(b, l, col);
                for q in 0..count * rows_per_frequency {
                    let w = col[q / rows_per_frequency];
                    let factor = if order == 1 { w } else { w * w };
                    out[(first_row + q, l)] = values[q] * factor;
                }
            }
        }
    }

    /// Runs `f` with this thread's scratch buffer, grown to this map's size.
    fn with_thread_scratch<R>(&self, f: impl FnOnce(&mut FastfoodScratch) -> R) -> R {
        THREAD_SCRATCH.with(|cell| {
            let mut buf = cell.borrow_mut();
            let mut scratch = FastfoodScratch {
                buf: std::mem::take(&mut *buf),
            };
            if scratch.buf.len() < self.scratch_len() {
                scratch.buf.resize(self.scratch_len(), 0.0);
            }
            let result = f(&mut scratch);
            *buf = scratch.buf;
            result
        })
    }
}

/// `t ← t ⊙ d`.
fn multiply(t: &mut [f64], d: &[f64]) {
    for (v, s) in t.iter_mut().zip(d) {
        *v *= s;
    }
}

impl FeatureMap for Fastfood {
    fn dim_in(&self) -> usize {
        self.dim_in
    }

    fn dim_out(&self) -> usize {
        self.dim_out
    }

    fn embed(&self, x: &[f64], out: &mut [f64]) {
        self.with_thread_scratch(|s| self.embed_with(x, out, s));
    }

    fn jacobian(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.with_thread_scratch(|s| self.jacobian_with(x, out, s));
    }

    fn second_derivatives(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.with_thread_scratch(|s| self.second_derivatives_with(x, out, s));
    }

    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]) {
        self.with_thread_scratch(|s| self.jacobian_transpose_mul_with(x, weights, out, s));
    }
}
