//! Score-matching estimators of kernel exponential families: the gradient
//! surrogates of Kernel Hamiltonian Monte Carlo (KMC, Strathmann et al. 2015).
//!
//! A [`GradientModel`] is a function `f` fitted to samples of a density `π`
//! by minimising the empirical score-matching objective (KMC eq. 5)
//!
//! `Ĵ(f) = (1/N) Σₓ Σ_l [∂²f(x)/∂x_l² + ½ (∂f(x)/∂x_l)²]`,
//!
//! so that `∇f ≈ ∇ log π`. Two estimators:
//!
//! - [`LiteEstimator`] (KMC Prop. 1): `f = Σ αᵢ k(zᵢ, ·)` on the fitted points
//!   with the Gaussian kernel `exp(−‖x − y‖²/σ)`, fitted in O(n³ + dn²).
//! - [`FiniteEstimator`] (KMC Prop. 2): `f = θᵀφ(x)` on any
//!   [`FeatureMap`](kameleon_features::FeatureMap), fitted in batch or
//!   updated online per point in O(dm²).
//!
//! [`cross_validate`] selects (σ, λ) by k-fold cross-validation of Ĵ.
//!
//! Both fit `f` either as the whole log density (a flat base measure, as in
//! the paper) or as a correction to a standard normal
//! ([`BaseMeasure::StandardNormal`]: `log π̂ = f − ‖x‖²/2`), which suits
//! points in coordinates where the target is roughly N(0, I): where the
//! points say little, the ridge shrinks `f` to 0 and the model falls back
//! to the Gaussian instead of to a flat density.
//!
//! The estimators and [`CrossValidation`] (de)serialise with serde, so a
//! fitted model can be saved. Deserialisation goes through the constructors
//! (a private mirror of the fields and `#[serde(try_from)]`, as for the
//! kernels and feature maps) and checks the fitted state's shapes, so a
//! damaged file gives an error instead of a model that misbehaves.
//!
//! ```
//! use faer::Mat;
//! use kameleon_score_matching::{GradientModel, LiteEstimator};
//! use rand::{RngExt, SeedableRng};
//! use rand_distr::StandardNormal;
//! use rand_xoshiro::Xoshiro256PlusPlus;
//!
//! // 300 draws from a standard normal in 2 dimensions.
//! let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
//! let points = Mat::from_fn(300, 2, |_, _| rng.sample::<f64, _>(StandardNormal));
//!
//! let mut model = LiteEstimator::new(2.0, 1e-3).unwrap();
//! model.fit(points.as_ref()).unwrap();
//!
//! // The true score at x is −x: the fitted gradient points back to the mode.
//! let mut grad = [0.0; 2];
//! model.grad_log_density(&[1.0, 0.0], &mut grad);
//! assert!(grad[0] < 0.0);
//! ```

mod cholesky_update;
mod cross_validation;
mod error;
mod finite;
mod lite;
mod serde_mat;

pub use cross_validation::{
    CrossValidation, CrossValidationResult, Hyperparameters, cross_validate,
};
pub use error::ScoreMatchingError;
pub use finite::{FiniteEstimator, RidgeSchedule};
pub use lite::{LiteEstimator, LiteRegulariser};

use faer::MatRef;

/// The base measure `q₀` of the kernel exponential family
/// `π̂(x) ∝ exp(f(x)) q₀(x)` that an estimator fits.
///
/// Score matching with a base measure minimises
/// `E[Δ log π̂ + ½‖∇ log π̂‖²]` over `f` as before; with
/// `∇ log q₀(x) = −w(x)·x` (a scalar weight `w`) this adds the linear term
/// `E[∇f(x)·(−w(x) x)]` to the objective, and the fitted model's gradient,
/// Laplacian and log density include `q₀`'s.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub enum BaseMeasure {
    /// `q₀ ≡ 1`: `f` models the whole log density (the KMC paper's; the
    /// default). An unfitted model is flat.
    #[default]
    Flat,
    /// `q₀ = N(0, I)`: `f` corrects a standard normal. Meant for whitened
    /// coordinates (the target roughly N(0, I)); an unfitted model is the
    /// standard normal.
    StandardNormal,
    /// `q₀` the multivariate Student t with `dof = ν > 0` degrees of freedom
    /// and the scale that gives it the standard normal's curvature at 0:
    /// `log q₀(x) = −(m/2) log(1 + ‖x‖²/m)` with `m = ν + d`, so
    /// `∇ log q₀ = −x/(1 + ‖x‖²/m)`. Near the origin it is N(0, I); its pull
    /// toward the origin peaks at `‖x‖ = √m` and falls as `m/‖x‖` beyond, so
    /// where the history is thin a heavy tail is not pulled back as hard as
    /// the Gaussian's `‖x‖` does.
    StudentT {
        /// Degrees of freedom ν (positive and finite).
        dof: f64,
    },
}

impl BaseMeasure {
    /// The weight `w(x)` of `∇ log q₀(x) = −w(x)·x`; `None` for the flat
    /// base measure.
    fn pull_weight(self, x: &[f64]) -> Option<f64> {
        match self {
            Self::Flat => None,
            Self::StandardNormal => Some(1.0),
            Self::StudentT { dof } => {
                let m = dof + x.len() as f64;
                Some(1.0 / (1.0 + x.iter().map(|v| v * v).sum::<f64>() / m))
            }
        }
    }

    /// Adds `∇ log q₀(x)` to `grad`.
    fn add_gradient(self, x: &[f64], grad: &mut [f64]) {
        if let Some(w) = self.pull_weight(x) {
            for (g, xl) in grad.iter_mut().zip(x) {
                *g -= w * xl;
            }
        }
    }

    /// `Δ log q₀(x)`.
    fn laplacian(self, x: &[f64]) -> f64 {
        let d = x.len() as f64;
        match self {
            Self::Flat => 0.0,
            Self::StandardNormal => -d,
            Self::StudentT { dof } => {
                // ∂_l(−x_l/u) = −1/u + 2x_l²/(m u²) with u = 1 + ‖x‖²/m
                let m = dof + d;
                let r2 = x.iter().map(|v| v * v).sum::<f64>();
                if r2 == f64::INFINITY {
                    // both terms vanish as ‖x‖ → ∞ (they would be ∞/∞)
                    return 0.0;
                }
                let u = 1.0 + r2 / m;
                -d / u + 2.0 * r2 / (m * u * u)
            }
        }
    }

    /// `log q₀(x)` up to a constant.
    fn log_density(self, x: &[f64]) -> f64 {
        let r2 = x.iter().map(|v| v * v).sum::<f64>();
        match self {
            Self::Flat => 0.0,
            Self::StandardNormal => -0.5 * r2,
            Self::StudentT { dof } => {
                let m = dof + x.len() as f64;
                -0.5 * m * (r2 / m).ln_1p()
            }
        }
    }

    /// Errors unless the parameters are valid (a Student t's ν positive
    /// and finite).
    fn validate(self) -> Result<(), ScoreMatchingError> {
        match self {
            Self::StudentT { dof } if !(dof.is_finite() && dof > 0.0) => {
                Err(ScoreMatchingError::InvalidParameter {
                    name: "dof",
                    value: dof,
                    reason: "must be positive and finite",
                })
            }
            _ => Ok(()),
        }
    }
}

/// A model `f` of an unnormalised log density, fitted by score matching,
/// with `∇f ≈ ∇ log π`.
///
/// The evaluation methods take `&mut self` so that models can keep scratch
/// buffers: they never allocate. An unfitted model is `f ≡ 0`. Points are
/// `&[f64]` of length [`dim`](GradientModel::dim) (checked with
/// `debug_assert!` only on the per-point methods, which are hot paths).
pub trait GradientModel {
    /// The input dimension d (0 before the first fit for models that learn it).
    fn dim(&self) -> usize;

    /// Fits the model to `points` (one point per row), replacing any previous fit.
    fn fit(&mut self, points: MatRef<'_, f64>) -> Result<(), ScoreMatchingError>;

    /// The fitted `f(x)`, an unnormalised log density.
    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64;

    /// Writes `∇f(x)`, the estimated score `∇ log π(x)`, into `out`.
    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]);

    /// Writes `∇f(x)` into `grad` and returns the Laplacian `Σ_l ∂²f(x)/∂x_l²`.
    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64;

    /// The empirical score-matching objective Ĵ (KMC eq. 5, without any
    /// regulariser) of the fitted `f` on `points` (e.g. held-out data): the
    /// mean over points of `Δf(x) + ½‖∇f(x)‖²`. Lower is better.
    fn score_matching_objective(
        &mut self,
        points: MatRef<'_, f64>,
    ) -> Result<f64, ScoreMatchingError> {
        let d = self.dim();
        error::check_points(points, d)?;
        if points.nrows() == 0 {
            return Err(ScoreMatchingError::TooFewPoints { needed: 1, got: 0 });
        }
        let mut x = vec![0.0; d];
        let mut grad = vec![0.0; d];
        let mut total = 0.0;
        for i in 0..points.nrows() {
            for (l, xl) in x.iter_mut().enumerate() {
                *xl = points[(i, l)];
            }
            let laplacian = self.grad_and_laplacian(&x, &mut grad);
            total += laplacian + 0.5 * grad.iter().map(|g| g * g).sum::<f64>();
        }
        Ok(total / points.nrows() as f64)
    }
}
