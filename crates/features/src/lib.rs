//! Explicit feature maps `φ: Rᵈ → R^D` with `φ(x)ᵀφ(y) ≈ k(x, y)`: random
//! Fourier features of any spectral kernel and Fastfood, with the Jacobian and
//! second derivatives that F-KAMH and KMC finite need.
//!
//! ```
//! use kameleon_features::{Embedding, FeatureMap, RandomFourierFeatures};
//! use kameleon_kernels::{Gaussian, Kernel};
//! use rand::SeedableRng;
//!
//! let kernel = Gaussian::new(1.0).unwrap();
//! let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
//! let phi = RandomFourierFeatures::new(&kernel, 2, 4096, Embedding::SinCos, &mut rng).unwrap();
//! let (x, y) = ([0.0, 0.5], [0.3, -0.2]);
//! let (mut fx, mut fy) = (vec![0.0; 4096], vec![0.0; 4096]);
//! phi.embed(&x, &mut fx);
//! phi.embed(&y, &mut fy);
//! let approx: f64 = fx.iter().zip(&fy).map(|(a, b)| a * b).sum();
//! assert!((approx - kernel.eval(&x, &y)).abs() < 0.05); // error ~ 1/√D
//! ```
//!
//! # Maps
//!
//! - [`RandomFourierFeatures`]: dense frequencies drawn from any
//!   [`kameleon_kernels::SpectralDensity`], in either [`Embedding`]
//!   (`√(2/D) cos(ωᵀx + b)`, or `√(2/D) [sin, cos]` pairs with D even);
//!   frequencies and phases readable and serde-serialisable.
//! - [`Fastfood`]: structured frequencies `V = S H G Π H B` for the radial
//!   kernels ([`RadialSpectralDensity`]: Gaussian, Matérn, rational
//!   quadratic, inverse multiquadric — not the L1 Laplacian), applied with
//!   our fast Walsh–Hadamard transform.
//!
//! # Dense or Fastfood?
//!
//! Fastfood embeds and computes `Jᵀw` (the gradient of a linear model on the
//! features, what KMC finite needs) in O(D log p), p the next power of two
//! ≥ d, instead of O(D d), but the full Jacobian (F-KAMH) costs it
//! O(D d log p) against O(D d) dense. Use Fastfood when you mostly embed or
//! need `Jᵀw` and d ≳ 64; use dense features for small d or when the full
//! Jacobian dominates (the benchmark behind this crossover is in
//! PERFORMANCE.md).
//!
//! # Conventions
//!
//! A point is a `&[f64]` of length `d`; a set of points is a faer matrix with
//! one point per row, and [`FeatureMap::embed_batch`] writes one feature
//! vector per row (`n × D`). Jacobians are `D × d` with `J[i, l] = ∂φ_i/∂x_l`.
//! The per-point methods never allocate and check dimensions with
//! `debug_assert!` only; the batched method validates shapes and returns a
//! [`FeatureError`].

mod error;
mod fastfood;
mod fwht;
mod rff;

pub use error::FeatureError;
pub use fastfood::{Fastfood, FastfoodScratch, RadialSpectralDensity};
pub use rff::{Embedding, RandomFourierFeatures};

use faer::{MatMut, MatRef};
use rayon::prelude::*;

/// Below this much work (`n · D · d` multiply-adds) [`FeatureMap::embed_batch`]
/// stays on the calling thread; above it, rows are embedded in parallel.
pub const PARALLEL_WORK_THRESHOLD: usize = 1 << 18;

/// Rows handed to one rayon task in [`FeatureMap::embed_batch`].
const ROWS_PER_TASK: usize = 32;

/// A feature map `φ: Rᵈ → R^D` with derivatives.
///
/// Per-point methods write into caller-owned buffers and never allocate.
pub trait FeatureMap: Send + Sync + std::fmt::Debug {
    /// Input dimension d.
    fn dim_in(&self) -> usize;
    /// Output dimension D.
    fn dim_out(&self) -> usize;
    /// Writes `φ(x)` (length D) into `out`.
    fn embed(&self, x: &[f64], out: &mut [f64]);
    /// Writes the Jacobian `∂φ_i/∂x_l` (D × d) into `out`.
    fn jacobian(&self, x: &[f64], out: MatMut<'_, f64>);
    /// Writes the second derivatives `∂²φ_i/∂x_l²` (D × d) into `out`.
    fn second_derivatives(&self, x: &[f64], out: MatMut<'_, f64>);
    /// Writes `J(x)ᵀw = ∇ₓ(wᵀφ(x))` (length d) into `out`, for weights `w` of
    /// length D: the gradient of a linear model on the features, without
    /// forming the Jacobian.
    fn jacobian_transpose_mul(&self, x: &[f64], weights: &[f64], out: &mut [f64]);

    /// The frequencies of a map whose every feature is a function of one
    /// linear argument, `φ_r(x) = ψ_r(ω_rᵀx)` (random Fourier features: `ψ_r`
    /// a scaled, phase-shifted sine or cosine): row r of the returned D × d
    /// matrix is `ω_r` (the two features of a sine/cosine pair share a row
    /// value). Then the Jacobian factors as `J = diag(ψ'(a)) Ω`, so sums of
    /// `J Jᵀ` over points are `(Σ ψ'ψ'ᵀ) ∘ (ΩΩᵀ)`: d× fewer flops (what
    /// the KMC finite batch fit exploits). `None` (the default) for maps
    /// without this structure.
    fn feature_frequencies(&self) -> Option<faer::Mat<f64>> {
        None
    }

    /// For maps with [`FeatureMap::feature_frequencies`]: writes `ψ'_r(a_r)`
    /// into `first` and `ψ''_r(a_r)` into `second` (length D each), so that
    /// `∂_lφ_r = ψ'_r ω_{r,l}` and `∂²_lφ_r = ψ''_r ω_{r,l}²`, and returns
    /// `true`. Maps without the structure (the default) write nothing and
    /// return `false`.
    fn argument_derivatives(&self, x: &[f64], first: &mut [f64], second: &mut [f64]) -> bool {
        let _ = (x, first, second);
        false
    }

    /// Embeds every row of `points` (n × d) into the matching row of `out`
    /// (n × D). Runs in parallel with rayon when `n · D · d` exceeds
    /// [`PARALLEL_WORK_THRESHOLD`]; the result is identical to the sequential
    /// path (each row is computed by the same [`FeatureMap::embed`] call).
    ///
    /// Allocates two short buffers per task (a copy of the input row and the
    /// feature row), not per point.
    fn embed_batch(
        &self,
        points: MatRef<'_, f64>,
        mut out: MatMut<'_, f64>,
    ) -> Result<(), FeatureError> {
        error::check_len("points (columns)", self.dim_in(), points.ncols())?;
        error::check_len("output (columns)", self.dim_out(), out.ncols())?;
        error::check_len("output (rows)", points.nrows(), out.nrows())?;
        let work = points.nrows() * self.dim_out() * self.dim_in();
        if work < PARALLEL_WORK_THRESHOLD {
            embed_rows(self, points, out.as_mut());
        } else {
            out.par_row_chunks_mut(ROWS_PER_TASK)
                .enumerate()
                .for_each(|(chunk, block)| {
                    let rows = points.subrows(chunk * ROWS_PER_TASK, block.nrows());
                    embed_rows(self, rows, block);
                });
        }
        Ok(())
    }
}

/// Embeds the rows of `points` into the rows of `out`, one after the other.
fn embed_rows<F: FeatureMap + ?Sized>(map: &F, points: MatRef<'_, f64>, mut out: MatMut<'_, f64>) {
    let mut x = vec![0.0; map.dim_in()];
    let mut phi = vec![0.0; map.dim_out()];
    for r in 0..points.nrows() {
        for (l, v) in x.iter_mut().enumerate() {
            *v = points[(r, l)];
        }
        map.embed(&x, &mut phi);
        for (i, v) in phi.iter().enumerate() {
            out[(r, i)] = *v;
        }
    }
}
