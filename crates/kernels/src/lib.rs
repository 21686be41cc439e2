//! Positive-definite kernels for kernel adaptive MCMC.
//!
//! Every kernel implements [`Kernel`]: its value, its gradient in the first
//! argument, the diagonal of its Hessian in the first argument (what score
//! matching needs) and the KAMH gradient matrix
//! `M = 2[∇ₓk(x, z_1), …, ∇ₓk(x, z_n)]`. Translation-invariant kernels also
//! implement [`SpectralDensity`], which draws frequencies ω with
//! `E[cos(ωᵀ(x − y))] = k(x, y)` (Bochner's theorem) for random features.
//!
//! # Bandwidth convention
//!
//! Every stationary kernel takes one length-scale `ℓ > 0` (plus a shape
//! parameter where the family has one), always with `k(x, x) = 1`:
//!
//! | kernel | `k(x, y)` | spectral density | smooth at `x = y` |
//! |---|---|---|---|
//! | [`Gaussian`] | `exp(−‖x − y‖²/(2ℓ²))` | `N(0, ℓ⁻²I)` | yes |
//! | [`Laplacian`] | `exp(−‖x − y‖₁/ℓ)` | Cauchy(0, 1/ℓ) per coordinate | no |
//! | [`Matern`] | `2^{1−ν}/Γ(ν) u^ν K_ν(u)`, `u = √(2ν)‖x − y‖/ℓ` | Student t, `2ν` d.o.f., scale `ℓ⁻¹` | gradient iff ν > 1/2, Hessian iff ν > 1 |
//! | [`RationalQuadratic`] | `(1 + ‖x − y‖²/(2αℓ²))^{−α}` | `N(0, τℓ⁻²I)`, `τ ~ Gamma(α, rate α)` | yes |
//! | [`InverseMultiquadric`] | `(1 + ‖x − y‖²/ℓ²)^{−β}` | as the RQ with `α = β`, `ℓ/√(2β)` | yes |
//! | [`Linear`] | `⟨x, y⟩` | — | yes |
//! | [`Polynomial`] | `(c + ⟨x, y⟩)^p` | — | yes |
//!
//! The papers use other parametrisations; named constructors convert them:
//! [`Gaussian::from_kamh_sigma`] (KAMH `σ`), [`Gaussian::from_lite_sigma`]
//! (KMC lite `exp(−‖·‖²/σ)`), [`Laplacian::from_thesis_sigma`] (F-KAMH
//! thesis `exp(−σ‖·‖₁)`), [`Matern::from_kamh_rho`] (KAMH `(r/ρ)^ν K_ν(r/ρ)`),
//! [`InverseMultiquadric::from_thesis`] (thesis `(c² + r²)^{−β}`). The
//! [`median_heuristic`] (or the buffer-reusing [`MedianHeuristic`]) gives a
//! data-driven `ℓ`.
//!
//! [`Kernel::gradient_gram`] gives the KAMH covariance's ingredients `M Mᵀ`
//! and `M1` without forming M for the radial kernels; the [`simd`] module
//! holds the block loads and stores its SIMD kernels share with callers.
//!
//! Where a kernel is not differentiable (Laplacian at a vanishing coordinate
//! of `x − y`, Matérn ν ≤ 1/2 at `x = y`), each type documents what its
//! gradient and Hessian diagonal return there.
//!
//! Every kernel (de)serialises with serde. Deserialisation goes through the
//! kernel's constructor (a private mirror of its fields and
//! `#[serde(try_from)]`), so a file holding parameters the constructor
//! refuses gives its error instead of a kernel that misbehaves.
//!
//! ```
//! use kameleon_kernels::{Gaussian, Kernel};
//! let k = Gaussian::new(1.5).unwrap();
//! let (x, y) = ([0.0, 1.0], [1.0, 1.0]);
//! let mut grad = [0.0; 2];
//! let value = k.grad_x(&x, &y, &mut grad);
//! assert!((value - (-1.0f64 / (2.0 * 1.5 * 1.5)).exp()).abs() < 1e-15);
//! assert!(grad[0] > 0.0); // moving x towards y increases k
//! ```

mod error;
mod gaussian;
mod gram;
mod laplacian;
mod matern;
mod median;
mod polynomial;
mod radial;
mod rational_quadratic;
pub mod simd;

pub use error::KernelError;
pub use gaussian::Gaussian;
pub use laplacian::Laplacian;
pub use matern::Matern;
pub use median::{MedianHeuristic, median_heuristic};
pub use polynomial::{Linear, Polynomial};
pub use rational_quadratic::{InverseMultiquadric, RationalQuadratic};

use faer::{MatMut, MatRef};
use rand::Rng;

/// A positive-definite kernel `k: Rᵈ × Rᵈ → R` with derivatives in its first
/// argument.
///
/// The per-point methods do not allocate and expect `x`, `y` and `out` to have
/// the same length (checked with `debug_assert!` only: they are hot paths;
/// validate dimensions once at the boundary of your algorithm).
pub trait Kernel: Send + Sync + std::fmt::Debug {
    /// The value `k(x, y)`.
    fn eval(&self, x: &[f64], y: &[f64]) -> f64;

    /// Writes `∇ₓk(x, y)` into `out` and returns `k(x, y)`.
    fn grad_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64;

    /// Writes the Hessian diagonal `∂²k(x, y)/∂x_l²` (l = 1…d) into `out` and
    /// returns `k(x, y)`.
    fn hessian_diag_x(&self, x: &[f64], y: &[f64], out: &mut [f64]) -> f64;

    /// Writes the KAMH gradient matrix `M = 2[∇ₓk(x, z_1), …, ∇ₓk(x, z_n)]`
    /// into `out` (d × n), where `z` holds one point per row (n × d).
    fn gradient_matrix(&self, x: &[f64], z: MatRef<'_, f64>, out: MatMut<'_, f64>);

    /// Writes the lower triangle of `M Mᵀ` into `gram` (d × d, column-major;
    /// the strict upper triangle is not written) and the row sums `M1` into
    /// `row_sums` (length d), for the gradient matrix M of
    /// [`Kernel::gradient_matrix`] (the KAMH covariance is
    /// `M Mᵀ − (1/n)(M1)(M1)ᵀ`). `scratch` (length ≥ d·n) may hold M.
    ///
    /// The default forms M in `scratch` and multiplies it out (explicit SIMD
    /// for d ≤ 10). Radial kernels (Gaussian, Matérn, rational quadratic,
    /// inverse multiquadric) override it: for column-major `z` and d ≤ 10
    /// they never form M but stream z once, in blocks (see
    /// `radial::FusedGram` in the source).
    fn gradient_gram(
        &self,
        x: &[f64],
        z: MatRef<'_, f64>,
        scratch: &mut [f64],
        gram: &mut [f64],
        row_sums: &mut [f64],
    ) {
        gram::gradient_gram_via_matrix(self, x, z, scratch, gram, row_sums);
    }
}

/// The spectral measure of a translation-invariant kernel: frequencies ω with
/// `E[cos(ωᵀ(x − y))] = k(x, y)`.
pub trait SpectralDensity: Send + Sync + std::fmt::Debug {
    /// Draws one frequency vector into `out` (its length is the input dimension).
    fn sample_frequency(&self, rng: &mut dyn Rng, out: &mut [f64]);
}
