//! The lite estimator (KMC Prop. 1): `f = Σ αᵢ k(zᵢ, ·)` with a Gaussian kernel.

use crate::error::{check_points, positive};
use crate::{GradientModel, ScoreMatchingError};
use faer::linalg::matmul::matmul;
use faer::linalg::solvers::Solve;
use faer::{Accum, Col, Mat, MatRef, Par, Side};
use kameleon_kernels::Gaussian;

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
#[derive(Debug, Clone)]
pub struct LiteEstimator {
    sigma: f64,
    lambda: f64,
    regulariser: LiteRegulariser,
    basis: Mat<f64>,
    alpha: Vec<f64>,
}

impl LiteEstimator {
    /// An unfitted estimator with lite bandwidth `σ > 0` and ridge `λ > 0`,
    /// regularised with `λI`.
    pub fn new(sigma: f64, lambda: f64) -> Result<Self, ScoreMatchingError> {
        Ok(Self {
            sigma: positive("sigma", sigma)?,
            lambda: positive("lambda", lambda)?,
            regulariser: LiteRegulariser::Identity,
            basis: Mat::zeros(0, 0),
            alpha: Vec::new(),
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
        self.basis.as_ref()
    }

    /// The fitted coefficients α (empty before a fit).
    pub fn alpha(&self) -> &[f64] {
        &self.alpha
    }

    /// Calls `visit(αᵢ kᵢ, x − zᵢ)` for every basis point, `kᵢ = k(zᵢ, x)`.
    fn for_each_term(&self, x: &[f64], mut visit: impl FnMut(f64, usize, f64)) {
        let d = x.len();
        for (i, &a) in self.alpha.iter().enumerate() {
            let mut r2 = 0.0;
            for l in 0..d {
                let diff = x[l] - self.basis[(i, l)];
                r2 += diff * diff;
            }
            visit(a * (-r2 / self.sigma).exp(), i, r2);
        }
    }
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
pub(crate) fn lite_system(z: MatRef<'_, f64>, sigma: f64) -> LiteSystem {
    let (n, d) = (z.nrows(), z.ncols());
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
    let kernel = Mat::from_fn(n, n, |i, j| (-dist2(i, j, gram[(i, j)]) / sigma).exp());
    let b = Col::from_fn(n, |i| {
        (0..n)
            .map(|k| kernel[(i, k)] * (2.0 / sigma * dist2(i, k, gram[(i, k)]) - d as f64))
            .sum()
    });
    let half_b = Mat::from_fn(n, n, |k, i| kernel[(k, i)] * (0.5 * sq[k] - gram[(k, i)]));
    let mut c = Mat::<f64>::zeros(n, n);
    matmul(
        c.as_mut(),
        Accum::Replace,
        half_b.transpose(),
        kernel.as_ref(),
        1.0,
        Par::Seq,
    );
    let mut kk = Mat::<f64>::zeros(n, n);
    matmul(
        kk.as_mut(),
        Accum::Replace,
        kernel.transpose(),
        kernel.as_ref(),
        1.0,
        Par::Seq,
    );
    // C = P + Pᵀ + G ∘ KᵀK with P = BᵀK; symmetrise explicitly.
    let c = Mat::from_fn(n, n, |i, j| {
        c[(i, j)] + c[(j, i)] + gram[(i, j)] * kk[(i, j)]
    });
    LiteSystem { kernel, b, c }
}

impl GradientModel for LiteEstimator {
    fn dim(&self) -> usize {
        self.basis.ncols()
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
        for i in 0..n {
            for j in 0..n {
                let reg = match self.regulariser {
                    LiteRegulariser::Identity => 0.0,
                    LiteRegulariser::KernelPlusIdentity => kernel[(i, j)],
                };
                c[(i, j)] += self.lambda * (reg + if i == j { 1.0 } else { 0.0 });
            }
        }
        let llt = c
            .llt(Side::Lower)
            .map_err(|_| ScoreMatchingError::NotPositiveDefinite)?;
        let solution = llt.solve(&b);
        let scale = -0.5 * self.sigma;
        self.alpha = (0..n).map(|i| scale * solution[i]).collect();
        self.basis = points.to_owned();
        Ok(())
    }

    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64 {
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        let mut f = 0.0;
        self.for_each_term(x, |ak, _, _| f += ak);
        f
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        self.grad_and_laplacian(x, out);
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        debug_assert!(x.len() == grad.len());
        debug_assert!(self.alpha.is_empty() || x.len() == self.dim());
        grad.fill(0.0);
        let (s, d) = (self.sigma, x.len() as f64);
        let mut laplacian = 0.0;
        let basis = &self.basis;
        self.for_each_term(x, |ak, i, r2| {
            // ∂_l k = −(2/σ)(x_l − z_l) k,  Σ_l ∂²_l k = ((4/σ²)‖x − z‖² − 2d/σ) k.
            for (l, g) in grad.iter_mut().enumerate() {
                *g -= 2.0 / s * (x[l] - basis[(i, l)]) * ak;
            }
            laplacian += (4.0 / (s * s) * r2 - 2.0 * d / s) * ak;
        });
        laplacian
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
