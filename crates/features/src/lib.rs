//! Explicit feature maps `φ: Rᵈ → R^D` with `φ(x)ᵀφ(y) ≈ k(x, y)`: random
//! Fourier features of any spectral kernel and Fastfood, with the Jacobian and
//! second derivatives that F-KAMH and KMC finite need.

use faer::MatMut;

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
}
