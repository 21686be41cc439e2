//! Dense random Fourier features (Rahimi & Recht 2007) of any spectral kernel.

use crate::error::{check_finite, check_len};
use crate::{FeatureError, FeatureMap};
use faer::{MatMut, MatRef};
use kameleon_kernels::SpectralDensity;
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};
use std::f64::consts::TAU;

/// Frequencies per tile in the dense derivative matrices.
const TILE: usize = 16;

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

/// Writes the features of one frequency whose argument is `a = ωᵀx (+ b)`,
/// and calls `write(row, value)` for each of the (one or two) rows involved.
///
/// `derivative` selects the order: 0 gives φ, 1 gives ∂φ/∂a, 2 gives ∂²φ/∂a².
/// Shared by the dense and the Fastfood maps so both follow one convention.
#[inline]
pub(crate) fn feature_derivative(
    embedding: Embedding,
    frequency_index: usize,
    a: f64,
    scale: f64,
    derivative: u8,
    mut write: impl FnMut(usize, f64),
) {
    let (s, c) = a.sin_cos();
    match embedding {
        Embedding::CosPhase => {
            let v = match derivative {
                0 => c,
                1 => -s,
                _ => -c,
            };
            write(frequency_index, scale * v);
        }
        Embedding::SinCos => {
            let (vs, vc) = match derivative {
                0 => (s, c),
                1 => (c, -s),
                _ => (-s, -c),
            };
            write(2 * frequency_index, scale * vs);
            write(2 * frequency_index + 1, scale * vc);
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
        Ok(Self {
            embedding,
            dim_in,
            dim_out,
            frequencies,
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
    /// (order 1) or the second derivatives (order 2).
    ///
    /// Works on tiles of [`TILE`] frequencies whose derivative values sit in a
    /// stack array, so that `out` (column-major) is written column by column:
    /// writing it row by row strides through memory and was ~2× slower at
    /// D = 4096.
    fn derivative_matrix(&self, x: &[f64], mut out: MatMut<'_, f64>, order: u8) {
        debug_assert!(x.len() == self.dim_in);
        debug_assert!(out.nrows() == self.dim_out && out.ncols() == self.dim_in);
        let (d, m) = (self.dim_in, self.num_frequencies());
        let rows_per_frequency = self.embedding.dim_out(1);
        let mut values = [0.0; 2 * TILE];
        for first in (0..m).step_by(TILE) {
            let count = TILE.min(m - first);
            for j in 0..count {
                let (a, _) = self.argument(first + j, x);
                feature_derivative(self.embedding, j, a, self.scale, order, |q, v| {
                    values[q] = v;
                });
            }
            let first_row = self.embedding.dim_out(first);
            for l in 0..d {
                for q in 0..count * rows_per_frequency {
                    let w = self.frequencies[(first + q / rows_per_frequency) * d + l];
                    let factor = if order == 1 { w } else { w * w };
                    out[(first_row + q, l)] = values[q] * factor;
                }
            }
        }
    }

    /// The argument `ω_iᵀx (+ b_i)` of frequency `i`, and `ω_i`.
    #[inline]
    fn argument(&self, i: usize, x: &[f64]) -> (f64, &[f64]) {
        let omega = &self.frequencies[i * self.dim_in..(i + 1) * self.dim_in];
        let dot: f64 = omega.iter().zip(x).map(|(w, v)| w * v).sum();
        let phase = self.phases.get(i).copied().unwrap_or(0.0);
        (dot + phase, omega)
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
        for i in 0..self.num_frequencies() {
            let (a, _) = self.argument(i, x);
            feature_derivative(self.embedding, i, a, self.scale, 0, |r, v| out[r] = v);
        }
    }

    fn jacobian(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.derivative_matrix(x, out, 1);
    }

    fn second_derivatives(&self, x: &[f64], out: MatMut<'_, f64>) {
        self.derivative_matrix(x, out, 2);
    }

    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == self.dim_in && out.len() == self.dim_in);
        debug_assert!(weights.len() == self.dim_out);
        out.fill(0.0);
        for i in 0..self.num_frequencies() {
            let (a, omega) = self.argument(i, x);
            let mut g = 0.0;
            feature_derivative(self.embedding, i, a, self.scale, 1, |r, v| {
                g += v * weights[r];
            });
            for (o, w) in out.iter_mut().zip(omega) {
                *o += g * w;
            }
        }
    }
}
