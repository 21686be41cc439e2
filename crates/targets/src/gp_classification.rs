// Over 800 lines on purpose: the data, the kernel matrix, the Laplace
// approximation and the importance-sampling estimate are one derivation
// (the module docs, a fifth of the file) and share the Newton state; the
// tests, a third, check each step against a brute-force computation.
//! Pseudo-marginal Gaussian-process classification (KAMH §5.1, KMC §6).
//!
//! **Model.** Binary labels `yᵢ ∈ {−1, +1}` at covariates `xᵢ ∈ R^d`; a
//! zero-mean GP `f ~ GP(0, K_θ)` with the ARD squared-exponential covariance
//!
//! ```text
//! K_θ(x, x′) = exp(−Σ_d e^{2θ_d} (x_d − x′_d)²)          (signal variance 1)
//! ```
//!
//! and the logistic likelihood `p(yᵢ | fᵢ) = σ(yᵢ fᵢ) = 1/(1 + e^{−yᵢ fᵢ})`.
//! This θ is the convention of the code that produced the KAMH figures
//! (`e^{2θ_d}` plays the role of `1/(2ℓ_d²)`). The papers write
//! `exp(−½ Σ Δ_d²/ℓ_d²)` with `θ_paper = log ℓ²`; the two are related by
//! `θ_paper = −2θ − log 2` ([`theta_code_to_paper`], [`theta_paper_to_code`]).
//! The prior of [`glass_posterior`], `θ ~ N(0, 5I)`, sits on this θ.
//!
//! **Estimator.** `p(y | θ) = ∫ Πᵢ σ(yᵢ fᵢ) N(f; 0, K_θ + ρI) df` is
//! estimated by importance sampling from the Laplace approximation of
//! `p(f | y, θ)` (ridge `ρ = 10⁻³` on the prior covariance, as in the public
//! code; strictly, the model is then a GP with a `ρ` nugget, and the
//! estimate is unbiased for that model):
//!
//! ```text
//! p̂(y | θ) = (1/n_imp) Σⱼ p(y | f⁽ʲ⁾) N(f⁽ʲ⁾; 0, K + ρI) / q(f⁽ʲ⁾),   f⁽ʲ⁾ ~ q,
//! q = N(f̂, Σ̃),   Σ̃ = ((K + ρI)⁻¹ + W)⁻¹,
//! ```
//!
//! with `W` at the mode `f̂`, returned as `log p̂` (combined by
//! log-mean-exp). `p̂` is unbiased for `p(y | θ)`; `log p̂` is not unbiased
//! for `log p(y | θ)`. With `L_K` the Cholesky factor of `K + ρI` and `L_C`
//! that of `C = I + L_Kᵀ W L_K` (eigenvalues ≥ 1, so it always factorises),
//! `Σ̃ = L_K C⁻¹ L_Kᵀ`: a draw is `f = f̂ + L_K u` with `u = L_C⁻ᵀ z`,
//! `z ~ N(0, I)`, and its log weight is
//! `log p(y | f) + ½‖z‖² − ½‖L_K⁻¹f̂ + u‖² − Σᵢ log L_C,ii` (the factors'
//! `log det L_K` cancel).
//!
//! **Laplace approximation.** Newton's method on
//! `Ψ(f) = log p(y | f) − ½ fᵀK⁻¹f` in the numerically stable form of
//! Rasmussen & Williams (2006), Alg. 3.1: with `W = diag(π(1 − π))`,
//! `π = σ(f)`, each step factorises `B = I + W^{½} K W^{½}` (eigenvalues
//! ≥ 1), never `K`. Steps are halved while `Ψ` decreases; iteration stops
//! when `Ψ` changes by less than a tolerance or after a bounded number of
//! steps. [`GpClassification::laplace`] reports the covariance
//! `Σ = (K⁻¹ + W)⁻¹ = K − VᵀV`, `V = L⁻¹ W^{½} K`, and the Laplace log
//! evidence (Alg. 3.2) `Ψ(f̂) − Σᵢ log Lᵢᵢ`, from `B` factorised at the mode.
//! A non-converged mode does not bias the estimate (any `q` with full
//! support gives an unbiased estimator); it is reported.
//!
//! **Cost.** One estimate factorises `B` once per Newton step, then `K + ρI`
//! and `C` once each; `C`'s product `(W^{½}L_K)ᵀ(W^{½}L_K)` is one of two
//! triangles (`n³/3` flops), and all `n_imp` draws take one triangular solve
//! and one triangular product. The factorisations use the crate's
//! left-looking panel algorithm (module `cholesky`), whose flops are faer
//! matrix products. The buffers live in a per-thread workspace, so repeated
//! estimates (one per pseudo-marginal iteration) allocate nothing; the
//! kernel exponentials and the `log σ` sums are vectorised (see
//! `sum_log_sigmoid`), which changes results only at rounding level.

use crate::IsotropicGaussianPrior;
use crate::cholesky::solve_lower_transposed_right_in_place;
use crate::pseudo_marginal::{LikelihoodEstimator, PseudoMarginal};
use crate::util::{check_allocatable, check_dim, fill_standard_normal};
use crate::{TargetError, pseudo_marginal::log_mean_exp};
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{BlockStructure, matmul as triangular_matmul};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, ColMut, ColRef, Mat, MatRef, Par};
use kameleon_core::fastmath;
use rand::Rng;
use std::cell::RefCell;

/// The UCI Glass data as shipped with the crate (see `data/README.md`).
const GLASS_CSV: &str = include_str!("../data/glass.csv");

/// The ridge `ρ` added to the prior and Laplace covariances by default.
pub const DEFAULT_RIDGE: f64 = 1e-3;
/// The maximum number of Newton steps of the Laplace approximation.
pub const DEFAULT_MAX_NEWTON_STEPS: usize = 100;
/// Newton stops when one step changes `Ψ` by less than this.
pub const DEFAULT_NEWTON_TOLERANCE: f64 = 1e-10;
/// The prior variance of each θ_d in [`glass_posterior`] (KAMH: `N(0, 5I)`).
pub const GLASS_PRIOR_VARIANCE: f64 = 5.0;

/// Converts a length-scale parameter from this crate's convention
/// (`k = exp(−Σ e^{2θ} Δ²)`) to the paper's (`θ_paper = log ℓ²` with
/// `k = exp(−½ Σ Δ²/ℓ²)`): `θ_paper = −2θ − log 2`.
pub fn theta_code_to_paper(theta: f64) -> f64 {
    -2.0 * theta - std::f64::consts::LN_2
}

/// The inverse of [`theta_code_to_paper`]: `θ = −(θ_paper + log 2)/2`.
pub fn theta_paper_to_code(theta_paper: f64) -> f64 {
    -0.5 * (theta_paper + std::f64::consts::LN_2)
}

/// `Σᵢ log σ(yᵢ fᵢ)` with one logarithm per block of points instead of an
/// `exp` and a `log1p` per point.
///
/// `log σ(z) = min(z, 0) − log(1 + e^{−|z|})`, and every factor
/// `1 + e^{−|z|}` lies in (1, 2], so the product of a block of
/// [`LOG_BLOCK`] factors stays below `2^LOG_BLOCK` and cannot overflow; the
/// block then costs one `ln`. The exponentials are
/// [`kameleon_core::fastmath::exp_fma`] (the loop runs under a `pulp`
/// dispatch, with FMA where the CPU has it) and the products and sums run in
/// `LANES` independent accumulators, so the loop vectorises. The result
/// differs from the pointwise sum `Σ log σ(yᵢfᵢ)` by rounding only (each
/// factor and product is rounded once: relative error ≲ block length · 2⁻⁵³
/// inside the logarithm). A NaN `fᵢ` gives NaN (through the product).
/// The loop is [`LogSigmoidSum`].
fn sum_log_sigmoid(y: &[f64], f: &[f64]) -> f64 {
    kameleon_core::simd::dispatch(LogSigmoidSum { y, f })
}

/// [`sum_log_sigmoid`] as a `pulp` operation: [`kameleon_core::simd::dispatch`]
/// runs `with_simd` compiled for the best instruction set of the running CPU
/// (AVX-512 or AVX2 and FMA on x86-64 where available), so the loops,
/// inlined into it, vectorise four or eight lanes wide instead of the
/// baseline two. The only fused
/// multiply-adds are those of [`fastmath::exp_fma`], which round the same in
/// hardware and in software, so the values do not depend on the CPU. [`KernelLowerTriangle`] and
/// [`ScaledKernelLowerTriangle`] do the same.
struct LogSigmoidSum<'a> {
    y: &'a [f64],
    f: &'a [f64],
}

impl pulp::WithSimd for LogSigmoidSum<'_> {
    type Output = f64;

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) -> f64 {
        const LANES: usize = 8;
        let mut total = 0.0;
        for (y, f) in self.y.chunks(LOG_BLOCK).zip(self.f.chunks(LOG_BLOCK)) {
            let mut products = [1.0; LANES];
            let mut minima = [0.0; LANES];
            let (y_lanes, y_rest) = y.as_chunks::<LANES>();
            let (f_lanes, f_rest) = f.as_chunks::<LANES>();
            for (y, f) in y_lanes.iter().zip(f_lanes) {
                for lane in 0..LANES {
                    let z = y[lane] * f[lane];
                    products[lane] *= 1.0 + fastmath::exp_fma(-z.abs());
                    minima[lane] += z.min(0.0);
                }
            }
            for (y, f) in y_rest.iter().zip(f_rest) {
                let z = y * f;
                products[0] *= 1.0 + fastmath::exp_fma(-z.abs());
                minima[0] += z.min(0.0);
            }
            total += minima.iter().sum::<f64>() - products.iter().product::<f64>().ln();
        }
        total
    }
}

/// The number of factors `1 + e^{−|z|} ∈ (1, 2]` multiplied before one
/// logarithm in [`sum_log_sigmoid`] (their product is below `2^512`).
const LOG_BLOCK: usize = 512;

/// `σ(z) = 1/(1 + e^{−z})`, without overflow.
fn sigmoid(z: f64) -> f64 {
    if z >= 0.0 {
        1.0 / (1.0 + (-z).exp())
    } else {
        let e = z.exp();
        e / (1.0 + e)
    }
}

/// Factorises the symmetric positive-definite `a = LLᵀ` in place with
/// [`crate::cholesky::cholesky_lower_in_place`] (sequential: these targets
/// run inside parallel chains): only the lower triangle of `a` is read, and
/// afterwards it holds `L`; the strict upper triangle is unspecified and must
/// not be read. A non-positive pivot is a [`TargetError::Numerical`] naming
/// `what`.
fn cholesky_lower_in_place(a: &mut Mat<f64>, what: &str) -> Result<(), TargetError> {
    crate::cholesky::cholesky_lower_in_place(a)
        .map_err(|e| TargetError::Numerical(format!("Cholesky of {what} failed: {e:?}")))
}

/// `Σᵢ log Lᵢᵢ = ½ log det(LLᵀ)` for the factor `L` in the lower triangle.
fn half_log_det(l: &Mat<f64>) -> f64 {
    (0..l.nrows()).map(|i| l[(i, i)].ln()).sum()
}

/// Adds `ridge` to the diagonal of `a`.
fn add_to_diagonal(a: &mut Mat<f64>, ridge: f64) {
    for i in 0..a.nrows() {
        a[(i, i)] += ridge;
    }
}

/// `out = m v`, sequential.
fn matvec(out: &mut [f64], m: &Mat<f64>, v: &[f64]) {
    matmul(
        ColMut::from_slice_mut(out).as_mat_mut(),
        Accum::Replace,
        m.as_ref(),
        ColRef::from_slice(v).as_mat(),
        1.0,
        Par::Seq,
    );
}

/// `aᵀb` (faer's dot product).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    ColRef::from_slice(a).transpose() * ColRef::from_slice(b)
}

/// Solves `LLᵀ x = rhs` in place, with `L` the lower triangle of `l`.
fn cholesky_solve_in_place(l: &Mat<f64>, rhs: &mut [f64]) {
    let mut rhs = ColMut::from_slice_mut(rhs);
    solve_lower_triangular_in_place(l.as_ref(), rhs.as_mut().as_mat_mut(), Par::Seq);
    solve_upper_triangular_in_place(l.transpose(), rhs.as_mat_mut(), Par::Seq);
}

/// The buffers of one likelihood estimate, allocated once per thread (see
/// [`with_workspace`]) and reused by every later estimate of the same shape:
/// the pseudo-marginal chain calls the estimator every iteration, and the
/// Glass estimate would otherwise allocate eight matrices each time (about
/// 2.5 MB for N = 214, n_imp = 100, which is also what each thread keeps).
///
/// All matrices are column-major; "lower triangle" always includes the
/// diagonal, and where only it is written the strict upper triangle holds
/// stale values (or a factorisation's scratch) that no consumer reads.
struct Workspace {
    /// `(n, d, m)`: points, covariates and importance draws it is sized for.
    shape: (usize, usize, usize),
    /// The scaled covariates `e^{θ_l} x_{il}` (n × d, one covariate per
    /// column, so the kernel loop runs over contiguous points).
    scaled: Mat<f64>,
    /// The kernel matrix `K` (n × n, both triangles).
    kernel: Mat<f64>,
    /// The Cholesky factor of `B = I + W^½KW^½` (lower triangle).
    b_factor: Mat<f64>,
    /// n × n scratch: `Vᵀ = K W^½ L⁻ᵀ` for [`GpClassification::laplace`],
    /// the lower triangle of `W^½ L_K` for an estimate.
    scratch: Mat<f64>,
    /// The lower triangle of the Laplace covariance `Σ` for
    /// [`GpClassification::laplace`]; the factor `L_C` of
    /// `C = I + L_Kᵀ W L_K` for an estimate.
    proposal_factor: Mat<f64>,
    /// The factor `L_K` of `K + ρI` (lower triangle).
    prior_factor: Mat<f64>,
    /// Standard normal draws `Z` (n × m, one draw per column), then
    /// `U = L_C⁻ᵀ Z` in place.
    z: Mat<f64>,
    /// The draws `F = f̂ 1ᵀ + L_K U`.
    draws: Mat<f64>,
    /// Newton's iterate `f = K a`, then the mode.
    f: Vec<f64>,
    /// The `a` of the iterate.
    a: Vec<f64>,
    /// Newton's candidate `f`.
    f_new: Vec<f64>,
    /// Newton's candidate `a`.
    a_new: Vec<f64>,
    /// `π = σ(f)` at the iterate.
    pi: Vec<f64>,
    /// `√W` at the iterate.
    sqrt_w: Vec<f64>,
    /// `W f + ∇log p(y | f)` at the iterate.
    rhs: Vec<f64>,
    /// Scratch vector of Newton's solve.
    solve: Vec<f64>,
    /// The log importance weights.
    log_weights: Vec<f64>,
}

impl Workspace {
    fn new(shape: (usize, usize, usize)) -> Self {
        let (n, d, m) = shape;
        let square = || Mat::zeros(n, n);
        Self {
            shape,
            scaled: Mat::zeros(n, d),
            kernel: square(),
            b_factor: square(),
            scratch: square(),
            proposal_factor: square(),
            prior_factor: square(),
            z: Mat::zeros(n, m),
            draws: Mat::zeros(n, m),
            f: vec![0.0; n],
            a: vec![0.0; n],
            f_new: vec![0.0; n],
            a_new: vec![0.0; n],
            pi: vec![0.0; n],
            sqrt_w: vec![0.0; n],
            rhs: vec![0.0; n],
            solve: vec![0.0; n],
            log_weights: vec![0.0; m],
        }
    }
}

thread_local! {
    /// This thread's [`Workspace`]; chains on different threads never share
    /// buffers.
    static WORKSPACE: RefCell<Option<Workspace>> = const { RefCell::new(None) };
}

/// Runs `body` with this thread's workspace, (re)allocated if it does not
/// have `shape`. A nested call (only possible from inside a user-supplied
/// rng) gets fresh buffers instead of failing.
fn with_workspace<R>(shape: (usize, usize, usize), body: impl FnOnce(&mut Workspace) -> R) -> R {
    WORKSPACE.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            if slot.as_ref().is_some_and(|ws| ws.shape != shape) {
                *slot = None;
            }
            body(slot.get_or_insert_with(|| Workspace::new(shape)))
        }
        Err(_) => body(&mut Workspace::new(shape)),
    })
}

/// What Newton's method reports besides the buffers it leaves in the
/// [`Workspace`].
struct NewtonOutcome {
    /// `Ψ` at the mode.
    psi: f64,
    newton_steps: usize,
    converged: bool,
}

/// Binary classification data: covariates (one row per point) and labels ±1.
#[derive(Debug, Clone)]
pub struct ClassificationData {
    x: Mat<f64>,
    y: Vec<f64>,
}

impl ClassificationData {
    /// Wraps covariates `x` (n × d, finite) and labels `y` (length n, each
    /// exactly `−1.0` or `+1.0`), n ≥ 1, d ≥ 1.
    pub fn new(x: Mat<f64>, y: Vec<f64>) -> Result<Self, TargetError> {
        if x.nrows() != y.len() {
            return Err(TargetError::DimensionMismatch {
                expected: x.nrows(),
                got: y.len(),
            });
        }
        if x.nrows() == 0 || x.ncols() == 0 {
            return Err(TargetError::Data(
                "need at least one point and one covariate".into(),
            ));
        }
        if let Some(bad) = y.iter().find(|&&v| v != 1.0 && v != -1.0) {
            return Err(TargetError::Data(format!("labels must be ±1, found {bad}")));
        }
        if (0..x.ncols()).any(|j| x.col(j).iter().any(|v| !v.is_finite())) {
            return Err(TargetError::Data("covariates must be finite".into()));
        }
        Ok(Self { x, y })
    }

    /// The UCI Glass data as the KAMH/KMC experiments use it: the 9
    /// covariates of all 214 rows, centred and whitened
    /// ([`ClassificationData::whitened`]); label +1 for window glass
    /// (types 1–4; 163 rows) and −1 for the rest (types 5–7; 51 rows).
    pub fn glass() -> Result<Self, TargetError> {
        Self::parse_glass_csv(GLASS_CSV.as_bytes())?.whitened()
    }

    /// Parses the Glass CSV layout (header `RI,…,Fe,Type`, then one row
    /// per point with numeric covariates and an integer type 1–7),
    /// unwhitened. Errors name the line and the column.
    fn parse_glass_csv(bytes: &[u8]) -> Result<Self, TargetError> {
        let data_error = |e: csv::Error| TargetError::Data(format!("glass.csv: {e}"));
        let mut reader = csv::Reader::from_reader(bytes);
        let headers = reader.headers().map_err(data_error)?.clone();
        let Some(last) = headers.iter().next_back().map(str::trim) else {
            return Err(TargetError::Data("glass.csv has no header".into()));
        };
        if headers.len() < 2 || last != "Type" {
            return Err(TargetError::Data(format!(
                "glass.csv needs covariate columns and a last column `Type`, found header `{}`",
                headers.iter().collect::<Vec<_>>().join(",")
            )));
        }
        let d = headers.len() - 1;
        let (mut covariates, mut y) = (Vec::new(), Vec::new());
        for record in reader.records() {
            let record = record.map_err(data_error)?;
            let line = record.position().map_or(0, |p| p.line());
            let field = |j: usize| -> Result<f64, TargetError> {
                let text = record.get(j).unwrap_or("").trim();
                text.parse::<f64>().map_err(|_| {
                    TargetError::Data(format!(
                        "glass.csv line {line}, column `{}`: `{text}` is not a number",
                        &headers[j]
                    ))
                })
            };
            for j in 0..d {
                covariates.push(field(j)?);
            }
            let glass_type = field(d)?;
            if glass_type.fract() != 0.0 || !(1.0..=7.0).contains(&glass_type) {
                return Err(TargetError::Data(format!(
                    "glass.csv line {line}: unknown glass type {glass_type} (types are 1–7)"
                )));
            }
            y.push(if glass_type <= 4.0 { 1.0 } else { -1.0 });
        }
        let x = Mat::from_fn(y.len(), d, |i, j| covariates[i * d + j]);
        Self::new(x, y)
    }

    /// Centres the covariates and whitens them with the Cholesky factor of
    /// their sample covariance (divisor n − 1): `xᵢ ← L⁻¹(xᵢ − x̄)` with
    /// `LLᵀ = Ĉov(x)`, so the result has mean 0 and sample covariance I.
    /// Needs n > d and a non-singular covariance.
    pub fn whitened(&self) -> Result<Self, TargetError> {
        let (n, d) = (self.x.nrows(), self.x.ncols());
        if n <= d {
            return Err(TargetError::Data(format!(
                "whitening needs more points ({n}) than covariates ({d})"
            )));
        }
        let means: Vec<f64> = (0..d)
            .map(|j| self.x.col(j).iter().sum::<f64>() / n as f64)
            .collect();
        // Centred covariates, transposed: one point per column.
        let mut centred_t = Mat::from_fn(d, n, |j, i| self.x[(i, j)] - means[j]);
        let mut covariance = Mat::<f64>::zeros(d, d);
        matmul(
            covariance.as_mut(),
            Accum::Replace,
            centred_t.as_ref(),
            centred_t.transpose(),
            1.0 / (n - 1) as f64,
            Par::Seq,
        );
        cholesky_lower_in_place(&mut covariance, "the covariates' sample covariance")
            .map_err(|e| TargetError::Data(e.to_string()))?;
        solve_lower_triangular_in_place(covariance.as_ref(), centred_t.as_mut(), Par::Seq);
        Self::new(centred_t.transpose().to_owned(), self.y.clone())
    }

    /// The rows `rows` of the data (in that order), e.g. a subset for tests.
    pub fn subset(&self, rows: &[usize]) -> Result<Self, TargetError> {
        if let Some(&bad) = rows.iter().find(|&&i| i >= self.n()) {
            return Err(TargetError::Data(format!(
                "row {bad} out of range 0..{}",
                self.n()
            )));
        }
        let x = Mat::from_fn(rows.len(), self.dim(), |i, j| self.x[(rows[i], j)]);
        Self::new(x, rows.iter().map(|&i| self.y[i]).collect())
    }

    /// The covariates, one row per point.
    pub fn x(&self) -> MatRef<'_, f64> {
        self.x.as_ref()
    }

    /// The labels, each ±1.
    pub fn y(&self) -> &[f64] {
        &self.y
    }

    /// The number of points n.
    pub fn n(&self) -> usize {
        self.y.len()
    }

    /// The number of covariates d (= the dimension of θ).
    pub fn dim(&self) -> usize {
        self.x.ncols()
    }
}

/// The Laplace approximation `N(mode, covariance)` of `p(f | y, θ)`.
#[derive(Debug, Clone)]
pub struct LaplaceApproximation {
    mode: Vec<f64>,
    covariance: Mat<f64>,
    log_marginal_likelihood: f64,
    newton_steps: usize,
    converged: bool,
}

impl LaplaceApproximation {
    /// The posterior mode f̂.
    pub fn mode(&self) -> &[f64] {
        &self.mode
    }

    /// `Σ = (K⁻¹ + W)⁻¹` at the mode (without the ridge).
    pub fn covariance(&self) -> MatRef<'_, f64> {
        self.covariance.as_ref()
    }

    /// The Laplace approximation of `log p(y | θ)` (R&W Alg. 3.2), a cheap
    /// deterministic surrogate; it is not the pseudo-marginal target.
    pub fn log_marginal_likelihood(&self) -> f64 {
        self.log_marginal_likelihood
    }

    /// The number of Newton steps taken.
    pub fn newton_steps(&self) -> usize {
        self.newton_steps
    }

    /// Whether the change of `Ψ` fell below the tolerance within the
    /// allowed number of steps.
    pub fn converged(&self) -> bool {
        self.converged
    }
}

/// GP classification with an ARD squared-exponential covariance and a
/// logistic likelihood; a [`LikelihoodEstimator`] of `p(y | θ)` by
/// importance sampling from the Laplace approximation (see the module docs).
#[derive(Debug, Clone)]
pub struct GpClassification {
    data: ClassificationData,
    /// Labels mapped to `t = (y + 1)/2 ∈ {0, 1}`.
    targets01: Vec<f64>,
    n_importance: usize,
    ridge: f64,
    max_newton_steps: usize,
    newton_tolerance: f64,
}

impl GpClassification {
    /// The model on `data`, estimating `p(y | θ)` with `n_importance ≥ 1`
    /// importance draws, ridge [`DEFAULT_RIDGE`], at most
    /// [`DEFAULT_MAX_NEWTON_STEPS`] Newton steps with tolerance
    /// [`DEFAULT_NEWTON_TOLERANCE`]. Errors if the evaluations' five n × n
    /// matrices or their two n × `n_importance` ones cannot be allocated.
    pub fn new(data: ClassificationData, n_importance: usize) -> Result<Self, TargetError> {
        if n_importance == 0 {
            return Err(TargetError::InvalidParameter {
                name: "n_importance",
                reason: "must be at least 1".into(),
            });
        }
        // the evaluations' workspace: five n × n matrices and two n × m
        let n = data.n();
        check_allocatable("data", "the model's n × n matrices", &[5, n, n])?;
        check_allocatable(
            "n_importance",
            "the importance draws, 2 × n × n_importance",
            &[2, n, n_importance],
        )?;
        let targets01 = data.y().iter().map(|&y| 0.5 * (y + 1.0)).collect();
        Ok(Self {
            data,
            targets01,
            n_importance,
            ridge: DEFAULT_RIDGE,
            max_newton_steps: DEFAULT_MAX_NEWTON_STEPS,
            newton_tolerance: DEFAULT_NEWTON_TOLERANCE,
        })
    }

    /// The KAMH Glass model ([`ClassificationData::glass`]).
    pub fn glass(n_importance: usize) -> Result<Self, TargetError> {
        Self::new(ClassificationData::glass()?, n_importance)
    }

    /// Replaces the ridge `ρ` (finite, > 0) added to both covariances.
    pub fn with_ridge(mut self, ridge: f64) -> Result<Self, TargetError> {
        if !(ridge.is_finite() && ridge > 0.0) {
            return Err(TargetError::InvalidParameter {
                name: "ridge",
                reason: format!("must be finite and positive, got {ridge}"),
            });
        }
        self.ridge = ridge;
        Ok(self)
    }

    /// Replaces the Newton stopping rule: at most `max_steps ≥ 1` steps,
    /// stop when `Ψ` changes by less than `tolerance` (finite, > 0).
    pub fn with_newton(mut self, max_steps: usize, tolerance: f64) -> Result<Self, TargetError> {
        if max_steps == 0 || !(tolerance.is_finite() && tolerance > 0.0) {
            return Err(TargetError::InvalidParameter {
                name: "newton",
                reason: format!(
                    "need max_steps ≥ 1 and a positive tolerance, got {max_steps}, {tolerance}"
                ),
            });
        }
        self.max_newton_steps = max_steps;
        self.newton_tolerance = tolerance;
        Ok(self)
    }

    /// The data.
    pub fn data(&self) -> &ClassificationData {
        &self.data
    }

    /// The number of importance draws per estimate.
    pub fn n_importance(&self) -> usize {
        self.n_importance
    }

    /// The ridge ρ.
    pub fn ridge(&self) -> f64 {
        self.ridge
    }

    /// The covariance matrix `K_θ` of the latent values at the data.
    /// θ must have length d, and every `e^{θ_l}` and its products with the
    /// covariates must be finite (and `e^{θ_l}` positive).
    pub fn kernel_matrix(&self, theta: &[f64]) -> Result<Mat<f64>, TargetError> {
        let (n, d) = (self.data.n(), self.data.dim());
        let mut kernel = Mat::zeros(n, n);
        self.fill_kernel_matrix(theta, &mut Mat::zeros(n, d), &mut kernel)?;
        Ok(kernel)
    }

    /// Writes `K_θ` (both triangles) into `kernel`, using `scaled` (n × d)
    /// for the scaled covariates: the lower triangle by
    /// [`KernelLowerTriangle`], then the upper triangle mirrored.
    fn fill_kernel_matrix(
        &self,
        theta: &[f64],
        scaled: &mut Mat<f64>,
        kernel: &mut Mat<f64>,
    ) -> Result<(), TargetError> {
        let x = &self.data.x;
        let (n, d) = (x.nrows(), x.ncols());
        if theta.len() != d {
            return Err(TargetError::DimensionMismatch {
                expected: d,
                got: theta.len(),
            });
        }
        for (l, t) in theta.iter().enumerate() {
            let scale = t.exp();
            if !(scale.is_finite() && scale > 0.0) {
                return Err(TargetError::InvalidParameter {
                    name: "theta",
                    reason: format!("exp(θ) must be finite and positive, got θ = {theta:?}"),
                });
            }
            for (s, x) in scaled.col_as_slice_mut(l).iter_mut().zip(x.col_as_slice(l)) {
                *s = scale * x;
            }
            // an overflowing e^θ x makes the distances ∞ − ∞ = NaN
            if scaled.col_as_slice(l).iter().any(|s| !s.is_finite()) {
                return Err(TargetError::InvalidParameter {
                    name: "theta",
                    reason: format!(
                        "exp(θ_{l}) = {scale:e} times covariate {l} overflows (θ_{l} = {t} is too \
                         large for the data's scale)"
                    ),
                });
            }
        }
        kameleon_core::simd::dispatch(KernelLowerTriangle { scaled, kernel });
        // Mirror: the top of column i is row i of the columns to its left.
        for i in 1..n {
            let (left, right) = kernel.as_mut().split_at_col_mut(i);
            right
                .col_mut(0)
                .subrows_mut(0, i)
                .copy_from(left.as_ref().row(i).transpose());
        }
        Ok(())
    }

    /// `log p(y | f) = Σᵢ log σ(yᵢ fᵢ)` for latent values `f` at the n data
    /// points; errors unless `f` has length n.
    pub fn log_likelihood(&self, f: &[f64]) -> Result<f64, TargetError> {
        check_dim(self.data.n(), f.len())?;
        Ok(sum_log_sigmoid(self.data.y(), f))
    }

    /// The [`Workspace`] shape of this model.
    fn workspace_shape(&self) -> (usize, usize, usize) {
        (self.data.n(), self.data.dim(), self.n_importance)
    }

    /// The Laplace approximation of `p(f | y, θ)` (module docs).
    pub fn laplace(&self, theta: &[f64]) -> Result<LaplaceApproximation, TargetError> {
        with_workspace(self.workspace_shape(), |ws| {
            self.fill_kernel_matrix(theta, &mut ws.scaled, &mut ws.kernel)?;
            let outcome = self.newton_in(ws)?;
            let Workspace {
                kernel: k,
                b_factor,
                scratch: v_t,
                proposal_factor: sigma,
                f,
                pi,
                sqrt_w,
                ..
            } = ws;
            // Covariance and evidence at the mode.
            factor_b(k, f, pi, sqrt_w, b_factor)?;
            // Σ = K − VᵀV with V = L⁻¹ W^½ K, computed as Vᵀ = K W^½ L⁻ᵀ (K
            // is exactly symmetric), whose column panels the solve runs
            // through; only the lower triangle of Σ, mirrored below.
            for j in 0..k.ncols() {
                let s = sqrt_w[j];
                for (v, k) in v_t.col_as_slice_mut(j).iter_mut().zip(k.col_as_slice(j)) {
                    *v = k * s;
                }
            }
            solve_lower_transposed_right_in_place(b_factor, v_t);
            sigma.copy_from_triangular_lower(&*k);
            triangular_matmul(
                sigma.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                v_t.as_ref(),
                BlockStructure::Rectangular,
                v_t.transpose(),
                BlockStructure::Rectangular,
                -1.0,
                Par::Seq,
            );
            let covariance = Mat::from_fn(sigma.nrows(), sigma.ncols(), |i, j| {
                sigma[(i.max(j), i.min(j))]
            });
            Ok(LaplaceApproximation {
                mode: f.clone(),
                covariance,
                log_marginal_likelihood: outcome.psi - half_log_det(b_factor),
                newton_steps: outcome.newton_steps,
                converged: outcome.converged,
            })
        })
    }

    /// Newton's method in the stable form of R&W Alg. 3.1 on `ws.kernel`.
    /// Leaves the mode in `ws.f`.
    fn newton_in(&self, ws: &mut Workspace) -> Result<NewtonOutcome, TargetError> {
        let Workspace {
            kernel: k,
            b_factor,
            f,
            a,
            f_new,
            a_new,
            pi,
            sqrt_w,
            rhs,
            solve,
            ..
        } = ws;
        let t = &self.targets01;
        f.fill(0.0);
        a.fill(0.0);
        // Ψ = −½ aᵀf + log p(y|f) with f = K a.
        let objective = |a: &[f64], f: &[f64]| -0.5 * dot(a, f) + sum_log_sigmoid(self.data.y(), f);
        let mut psi = objective(a, f);
        // A NaN objective counts as no ascent, so it is never accepted.
        let no_ascent = |new: f64, old: f64| new.is_nan() || new < old;
        let mut converged = false;
        let mut steps = 0;
        while steps < self.max_newton_steps {
            steps += 1;
            factor_b(k, f, pi, sqrt_w, b_factor)?;
            for i in 0..f.len() {
                rhs[i] = sqrt_w[i] * sqrt_w[i] * f[i] + (t[i] - pi[i]);
            }
            // a_new = b − W^½ B⁻¹ W^½ K b, with b = rhs.
            matvec(solve, k, rhs);
            for (c, s) in solve.iter_mut().zip(sqrt_w.iter()) {
                *c *= s;
            }
            cholesky_solve_in_place(b_factor, solve);
            for i in 0..f.len() {
                a_new[i] = rhs[i] - sqrt_w[i] * solve[i];
            }
            matvec(f_new, k, a_new);
            let mut psi_new = objective(a_new, f_new);
            // Halve the step while Ψ decreases (Ψ is concave, so this ends).
            let mut halvings = 0;
            while no_ascent(psi_new, psi) && halvings < 50 {
                for (new, old) in a_new.iter_mut().zip(a.iter()) {
                    *new = 0.5 * (old + *new);
                }
                for (new, old) in f_new.iter_mut().zip(f.iter()) {
                    *new = 0.5 * (old + *new);
                }
                psi_new = objective(a_new, f_new);
                halvings += 1;
            }
            if no_ascent(psi_new, psi) {
                // No ascent at machine precision: the current point is the mode.
                converged = true;
                break;
            }
            let change = psi_new - psi;
            std::mem::swap(a, a_new);
            std::mem::swap(f, f_new);
            psi = psi_new;
            if change < self.newton_tolerance {
                converged = true;
                break;
            }
        }
        Ok(NewtonOutcome {
            psi,
            newton_steps: steps,
            converged,
        })
    }

    /// `log p̂(y | θ)`, the log of the unbiased importance-sampling estimate
    /// (module docs), with typed errors for bad θ or a failed factorisation.
    /// Allocates nothing after the first call on a thread (the buffers are
    /// kept per thread, see the module docs).
    pub fn try_log_likelihood_estimate(
        &self,
        theta: &[f64],
        rng: &mut dyn Rng,
    ) -> Result<f64, TargetError> {
        with_workspace(self.workspace_shape(), |ws| {
            self.fill_kernel_matrix(theta, &mut ws.scaled, &mut ws.kernel)?;
            self.newton_in(ws)?;
            let Workspace {
                kernel,
                scratch: sqrt_w_l,
                proposal_factor: c_factor,
                prior_factor: l_k,
                z,
                draws,
                f: mode,
                pi,
                sqrt_w,
                solve: whitened_mode,
                log_weights,
                ..
            } = ws;
            set_weights(mode, pi, sqrt_w);
            l_k.copy_from_triangular_lower(&*kernel);
            add_to_diagonal(l_k, self.ridge);
            cholesky_lower_in_place(l_k, "K + ρI")?;
            // C = I + (W^½L_K)ᵀ(W^½L_K), lower triangles only: the product
            // of two triangles, a third of the flops of a full one.
            for j in 0..l_k.ncols() {
                for ((out, l), s) in sqrt_w_l.col_as_slice_mut(j)[j..]
                    .iter_mut()
                    .zip(&l_k.col_as_slice(j)[j..])
                    .zip(&sqrt_w[j..])
                {
                    *out = s * l;
                }
            }
            triangular_matmul(
                c_factor.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Replace,
                sqrt_w_l.transpose(),
                BlockStructure::TriangularUpper,
                sqrt_w_l.as_ref(),
                BlockStructure::TriangularLower,
                1.0,
                Par::Seq,
            );
            add_to_diagonal(c_factor, 1.0);
            cholesky_lower_in_place(c_factor, "C = I + L_Kᵀ W L_K")?;
            // log N(f; 0, K+ρI) − log q(f) = ½‖z‖² − ½‖L_K⁻¹f‖² − Σ log L_C,ii
            // for f = f̂ + L_K L_C⁻ᵀ z, where L_K⁻¹f = L_K⁻¹f̂ + L_C⁻ᵀ z.
            let log_det_term = -half_log_det(c_factor);
            whitened_mode.copy_from_slice(mode);
            solve_lower_triangular_in_place(
                l_k.as_ref(),
                ColMut::from_slice_mut(whitened_mode).as_mat_mut(),
                Par::Seq,
            );
            // All draws at once, one per column (Z is filled column by
            // column, the order of the rng's draws).
            for (j, w) in log_weights.iter_mut().enumerate() {
                fill_standard_normal(rng, z.col_as_slice_mut(j));
                *w = 0.5 * z.col(j).squared_norm_l2() + log_det_term;
            }
            // U = L_C⁻ᵀ Z, in place.
            solve_upper_triangular_in_place(c_factor.transpose(), z.as_mut(), Par::Seq);
            for (j, w) in log_weights.iter_mut().enumerate() {
                let whitened_draw: f64 = z
                    .col_as_slice(j)
                    .iter()
                    .zip(whitened_mode.iter())
                    .map(|(u, c)| (u + c) * (u + c))
                    .sum();
                *w -= 0.5 * whitened_draw;
            }
            // F = f̂ 1ᵀ + L_K U.
            for j in 0..self.n_importance {
                draws.col_as_slice_mut(j).copy_from_slice(mode);
            }
            triangular_matmul(
                draws.as_mut(),
                BlockStructure::Rectangular,
                Accum::Add,
                l_k.as_ref(),
                BlockStructure::TriangularLower,
                z.as_ref(),
                BlockStructure::Rectangular,
                1.0,
                Par::Seq,
            );
            for (j, w) in log_weights.iter_mut().enumerate() {
                *w += sum_log_sigmoid(self.data.y(), draws.col_as_slice(j));
            }
            Ok(log_mean_exp(log_weights))
        })
    }
}

/// Sets `pi = σ(f)` and `sqrt_w = √(π(1 − π))`, the square root of the
/// negative Hessian of `log p(y | f)`, at `f`.
fn set_weights(f: &[f64], pi: &mut [f64], sqrt_w: &mut [f64]) {
    for ((f, pi), sqrt_w) in f.iter().zip(pi.iter_mut()).zip(sqrt_w.iter_mut()) {
        *pi = sigmoid(*f);
        *sqrt_w = (*pi * (1.0 - *pi)).sqrt();
    }
}

/// Sets `pi` and `sqrt_w` at `f` ([`set_weights`]) and writes the
/// Cholesky factor of `B = I + W^½KW^½` into the lower triangle of `out`.
fn factor_b(
    k: &Mat<f64>,
    f: &[f64],
    pi: &mut [f64],
    sqrt_w: &mut [f64],
    out: &mut Mat<f64>,
) -> Result<(), TargetError> {
    set_weights(f, pi, sqrt_w);
    kameleon_core::simd::dispatch(ScaledKernelLowerTriangle { k, sqrt_w, out });
    cholesky_lower_in_place(out, "B = I + W^½KW^½")
}

/// The lower triangle of `B = I + W^½KW^½` from that of `K`, column slice by
/// column slice, as a `pulp` operation (see [`LogSigmoidSum`]).
struct ScaledKernelLowerTriangle<'a> {
    k: &'a Mat<f64>,
    sqrt_w: &'a [f64],
    out: &'a mut Mat<f64>,
}

impl pulp::WithSimd for ScaledKernelLowerTriangle<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { k, sqrt_w, out } = self;
        for j in 0..k.ncols() {
            let (out, k) = (&mut out.col_as_slice_mut(j)[j..], &k.col_as_slice(j)[j..]);
            let sqrt_wj = sqrt_w[j];
            for ((b, k), sqrt_wi) in out.iter_mut().zip(k).zip(&sqrt_w[j..]) {
                *b = sqrt_wi * k * sqrt_wj;
            }
            out[0] += 1.0;
        }
    }
}

/// The lower triangle of the kernel matrix from the scaled covariates, as a
/// `pulp` operation (see [`LogSigmoidSum`]): column j below the diagonal
/// first accumulates the squared distances `‖s_i − s_j‖²` in place,
/// covariate by covariate (each covariate one contiguous, vectorised sweep
/// over the points), then is exponentiated in place with
/// [`fastmath::exp_fma`].
struct KernelLowerTriangle<'a> {
    scaled: &'a Mat<f64>,
    kernel: &'a mut Mat<f64>,
}

impl pulp::WithSimd for KernelLowerTriangle<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self { scaled, kernel } = self;
        for j in 0..kernel.ncols() {
            let (diagonal, below) = kernel.col_as_slice_mut(j)[j..]
                .split_first_mut()
                .expect("j is a row of the square kernel matrix");
            *diagonal = 1.0;
            below.fill(0.0);
            for l in 0..scaled.ncols() {
                let s = scaled.col_as_slice(l);
                let sj = s[j];
                for (r2, si) in below.iter_mut().zip(&s[j + 1..]) {
                    let diff = si - sj;
                    *r2 += diff * diff;
                }
            }
            for value in below.iter_mut() {
                *value = fastmath::exp_fma(-*value);
            }
        }
    }
}

impl LikelihoodEstimator for GpClassification {
    fn dim(&self) -> usize {
        self.data.dim()
    }

    /// [`GpClassification::try_log_likelihood_estimate`], with NaN for any
    /// error (samplers count NaN as a rejected, `-inf` proposal).
    fn log_likelihood_estimate(&self, theta: &[f64], rng: &mut dyn Rng) -> f64 {
        self.try_log_likelihood_estimate(theta, rng)
            .unwrap_or(f64::NAN)
    }
}

/// The KAMH pseudo-marginal Glass posterior: [`GpClassification::glass`]
/// with `n_importance` draws and the prior `θ ~ N(0, 5I)`
/// ([`GLASS_PRIOR_VARIANCE`]); the papers use `n_importance = 100`.
pub fn glass_posterior(
    n_importance: usize,
) -> Result<PseudoMarginal<GpClassification, IsotropicGaussianPrior>, TargetError> {
    Ok(PseudoMarginal::new(
        GpClassification::glass(n_importance)?,
        IsotropicGaussianPrior::new(GLASS_PRIOR_VARIANCE)?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Target;
    use faer::Col;
    use faer::linalg::solvers::DenseSolveCore;
    use rand::{Rng, RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn glass_is_labelled_and_whitened() {
        let data = ClassificationData::glass().unwrap();
        assert_eq!((data.n(), data.dim()), (214, 9));
        assert_eq!(data.y().iter().filter(|&&y| y == 1.0).count(), 163);
        // Sample mean 0 and sample covariance I after whitening.
        let x = data.x();
        for j in 0..9 {
            let mean_j = x.col(j).iter().sum::<f64>() / 214.0;
            assert!(mean_j.abs() < 1e-10, "mean {mean_j}");
            for l in 0..9 {
                let cov = (0..214).map(|i| x[(i, j)] * x[(i, l)]).sum::<f64>() / 213.0;
                let expected = if j == l { 1.0 } else { 0.0 };
                assert!((cov - expected).abs() < 1e-10, "cov {cov}");
            }
        }
    }

    #[test]
    fn constructors_reject_bad_input() {
        let x = Mat::<f64>::zeros(2, 1);
        assert!(ClassificationData::new(x.clone(), vec![1.0]).is_err());
        assert!(ClassificationData::new(x.clone(), vec![1.0, 0.0]).is_err());
        assert!(ClassificationData::new(Mat::from_fn(1, 1, |_, _| f64::NAN), vec![1.0]).is_err());
        let data = ClassificationData::new(x, vec![1.0, -1.0]).unwrap();
        assert!(data.whitened().is_err());
        assert!(data.subset(&[2]).is_err());
        assert!(GpClassification::new(data.clone(), 0).is_err());
        // importance draws beyond memory: an error here, not an abort at the
        // first evaluation
        for n_importance in [1 << 60, usize::MAX] {
            let err = GpClassification::new(data.clone(), n_importance).unwrap_err();
            assert!(err.to_string().contains("n_importance"), "{err}");
        }
        let model = GpClassification::new(data, 1).unwrap();
        assert!(model.clone().with_ridge(-1.0).is_err());
        assert!(model.clone().with_newton(0, 1e-9).is_err());
        assert!(model.kernel_matrix(&[0.0, 0.0]).is_err());
        assert!(model.kernel_matrix(&[1000.0]).is_err());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
        assert!(
            model
                .log_likelihood_estimate(&[0.0, 1.0], &mut rng)
                .is_nan()
        );
    }

    /// Malformed Glass CSVs give errors that name the line, the column and
    /// the value; a fractional type is refused (it used to be truncated to
    /// a valid one).
    #[test]
    fn glass_csv_errors_name_the_place() {
        let err = |text: &str| {
            ClassificationData::parse_glass_csv(text.as_bytes())
                .unwrap_err()
                .to_string()
        };
        for (text, expected) in [
            ("RI,Type\n1.5,9\n", "line 2: unknown glass type 9"),
            ("RI,Type\n1.5,1.5\n", "unknown glass type 1.5"),
            ("RI,Type\n1.5,NaN\n", "unknown glass type NaN"),
            (
                "RI,Type\n1.5,1\nabc,1\n",
                "line 3, column `RI`: `abc` is not a number",
            ),
            ("RI,Type\n1.5,1\n1.5\n", "glass.csv"),
            ("RI,Kind\n1.5,1\n", "last column `Type`"),
            ("Type\n1\n", "last column `Type`"),
            ("", "glass.csv"),
            ("RI,Type\n", "at least one point"),
            ("RI,Type\ninf,1\n", "finite"),
        ] {
            let message = err(text);
            assert!(message.contains(expected), "{text:?}: {message}");
        }
        let ok = ClassificationData::parse_glass_csv(b"RI, Type\n1.5, 7\n2.5,4\n").unwrap();
        assert_eq!(ok.y(), &[-1.0, 1.0]);
    }

    /// Arbitrary bytes, and the embedded file with bytes overwritten,
    /// inserted or removed, give data or an error, never a panic: 256 cases
    /// from a fixed generator, so every run tries the same cases.
    #[test]
    fn glass_csv_parser_never_panics() {
        let end = GLASS_CSV[..2000].rfind('\n').expect("the file has lines") + 1;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for case in 0..256 {
            let bytes: Vec<u8> = (0..rng.random_range(0..200))
                .map(|_| rng.random())
                .collect();
            let _ = ClassificationData::parse_glass_csv(&bytes);
            let mut glass = GLASS_CSV.as_bytes()[..end].to_vec();
            for _ in 0..rng.random_range(1..6) {
                let (at, byte) = (rng.random_range(0..glass.len()), rng.random());
                match rng.random_range(0..3) {
                    0 => glass[at] = byte,
                    1 => glass.insert(at, byte),
                    _ => {
                        glass.remove(at);
                    }
                }
            }
            if let Ok(data) = ClassificationData::parse_glass_csv(&glass) {
                assert!(
                    data.y().iter().all(|&y| y == 1.0 || y == -1.0),
                    "case {case}: {:?}",
                    String::from_utf8_lossy(&glass)
                );
            }
        }
    }

    /// The blocked product form of `Σ log σ(yᵢfᵢ)` against the pointwise
    /// sum with libm (`log σ(z) = −log1p(e^{−z})` for z ≥ 0, `z − log1p(e^z)`
    /// otherwise), on 1300 points (more than two blocks of `LOG_BLOCK`, a
    /// remainder that is not a multiple of the lanes) spanning |z| up to 60,
    /// where `e^{−|z|}` is far below an ulp of 1; and the special values.
    #[test]
    fn sum_log_sigmoid_matches_the_pointwise_sum() {
        let pointwise = |z: f64| {
            if z >= 0.0 {
                -(-z).exp().ln_1p()
            } else {
                z - z.exp().ln_1p()
            }
        };
        let n = 1300;
        let f: Vec<f64> = (0..n).map(|i| 60.0 * ((i as f64) * 0.37).sin()).collect();
        let y: Vec<f64> = (0..n)
            .map(|i| if i % 3 == 0 { -1.0 } else { 1.0 })
            .collect();
        for len in [0, 1, 7, 8, 513, n] {
            let expected: f64 = (0..len).map(|i| pointwise(y[i] * f[i])).sum();
            let got = sum_log_sigmoid(&y[..len], &f[..len]);
            // Each of the len factors and products rounds once (≲ len ulp
            // inside the log), as does each term of the pointwise sum.
            let tolerance = 4.0 * len as f64 * f64::EPSILON * (1.0 + expected.abs());
            assert!(
                (got - expected).abs() <= tolerance,
                "{len}: {got} vs {expected}"
            );
        }
        assert!(sum_log_sigmoid(&[1.0, 1.0], &[0.5, f64::NAN]).is_nan());
        assert_eq!(sum_log_sigmoid(&[1.0], &[f64::INFINITY]), 0.0);
        assert_eq!(
            sum_log_sigmoid(&[-1.0], &[f64::INFINITY]),
            f64::NEG_INFINITY
        );
    }

    /// The thread's reused buffers leave no trace: the Laplace approximation
    /// and an estimate are the same after calls for a model of another shape
    /// (which reallocate the workspace) and for another θ (which leave stale
    /// values in it), on a fresh thread, and from inside a nested call (which
    /// gets its own buffers).
    #[test]
    fn results_do_not_depend_on_the_workspace_history() {
        let (small, theta) = small_model();
        let other =
            GpClassification::new(small.data().subset(&[0, 3, 5, 9, 11]).unwrap(), 3).unwrap();
        let estimate = |model: &GpClassification, theta: &[f64], seed: u64| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            model.try_log_likelihood_estimate(theta, &mut rng).unwrap()
        };
        let laplace = |theta: &[f64]| {
            let lap = small.laplace(theta).unwrap();
            (
                lap.mode().to_vec(),
                lap.newton_steps(),
                lap.log_marginal_likelihood(),
            )
        };
        let both = |theta: &[f64]| (estimate(&small, theta, 5), laplace(theta));
        // References, each computed on a fresh thread (fresh workspace).
        let fresh = |theta: &[f64]| std::thread::scope(|s| s.spawn(|| both(theta)).join());
        let thetas = [theta.clone(), vec![1.5; 9]];
        let references = thetas.clone().map(|theta| fresh(&theta).unwrap());
        // Interleaved on this thread, after another shape.
        estimate(&other, &[0.3; 9], 1);
        for _ in 0..2 {
            for (theta, reference) in thetas.iter().zip(&references) {
                assert_eq!(&both(theta), reference);
            }
        }
        let first = references[0].0;

        /// An rng that runs one estimate of `model` inside its first draw,
        /// while the outer estimate holds the thread's workspace.
        struct NestedRng<'a> {
            inner: Xoshiro256PlusPlus,
            model: &'a GpClassification,
            nested: Option<f64>,
        }
        impl rand::TryRng for NestedRng<'_> {
            type Error = std::convert::Infallible;
            fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
                Ok(self.try_next_u64()? as u32)
            }
            fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
                if self.nested.is_none() {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
                    self.nested = self
                        .model
                        .try_log_likelihood_estimate(&[-1.0; 9], &mut rng)
                        .ok();
                }
                Ok(self.inner.next_u64())
            }
            fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
                self.inner.fill_bytes(dst);
                Ok(())
            }
        }
        let mut nested_rng = NestedRng {
            inner: Xoshiro256PlusPlus::seed_from_u64(5),
            model: &small,
            nested: None,
        };
        let outer = small
            .try_log_likelihood_estimate(&theta, &mut nested_rng)
            .unwrap();
        assert_eq!((outer, nested_rng.nested), (first, Some(first)));
    }

    /// The Glass estimate (the kernel matrix, the Cholesky panels, the
    /// log-sigmoid sums, faer's products) gives the same bits with the
    /// CPU's widest vectors and capped at 256 bits (on a CPU without
    /// AVX-512 both runs take the same path).
    #[test]
    fn glass_estimate_does_not_depend_on_the_vector_width() {
        use kameleon_core::simd::{Width, set_max_width};
        let model = GpClassification::glass(20).unwrap();
        let estimate = |width| {
            set_max_width(width);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
            let values: Vec<u64> = [[0.0; 9], [0.4; 9], [-0.7; 9]]
                .iter()
                .map(|theta| {
                    model
                        .try_log_likelihood_estimate(theta, &mut rng)
                        .unwrap()
                        .to_bits()
                })
                .collect();
            set_max_width(Width::Widest);
            values
        };
        assert_eq!(estimate(Width::Widest), estimate(Width::Bits256));
    }

    /// Kernel values in this crate's convention equal the paper's
    /// `exp(−½ Σ Δ²/ℓ²)` with `log ℓ² = θ_paper = −2θ − log 2`, and the
    /// conversion round-trips.
    #[test]
    fn theta_convention_matches_the_paper_form() {
        let x = Mat::from_fn(3, 2, |i, j| (i as f64 - 1.0) * (0.7 + j as f64));
        let model = GpClassification::new(
            ClassificationData::new(x.clone(), vec![1.0, -1.0, 1.0]).unwrap(),
            1,
        )
        .unwrap();
        let theta = [0.4, -1.3];
        let k = model.kernel_matrix(&theta).unwrap();
        for i in 0..3 {
            for j in 0..3 {
                let paper: f64 = (0..2)
                    .map(|d| {
                        let ell2 = theta_code_to_paper(theta[d]).exp();
                        -0.5 * (x[(i, d)] - x[(j, d)]).powi(2) / ell2
                    })
                    .sum();
                assert!((k[(i, j)] - paper.exp()).abs() < 1e-14);
            }
        }
        for t in [-3.0, 0.0, 2.5] {
            assert!((theta_paper_to_code(theta_code_to_paper(t)) - t).abs() < 1e-15);
        }
    }

    /// A subset of Glass (both classes) and a θ with long length scales, so
    /// the latent values are strongly correlated.
    fn small_model() -> (GpClassification, Vec<f64>) {
        let data = ClassificationData::glass().unwrap();
        let rows: Vec<usize> = (0..214).step_by(12).collect(); // 18 rows
        let subset = data.subset(&rows).unwrap();
        assert!(subset.y().contains(&1.0) && subset.y().contains(&-1.0));
        (GpClassification::new(subset, 10).unwrap(), vec![-1.0; 9])
    }

    /// One estimate against its definition computed densely: the draws
    /// `f⁽ʲ⁾ = f̂ + S z⁽ʲ⁾` from the same standard normals, with the square
    /// root `S = L_K L_C⁻ᵀ` formed from an explicit inverse, weighed by the
    /// full Gaussian densities `N(f; 0, K + ρI)` and `N(f; f̂, Σ̃)`, where
    /// `Σ̃ = ((K + ρI)⁻¹ + W)⁻¹` comes from explicit inverses and the
    /// determinants from LU. The densities do not use `S`, so draws of the
    /// wrong covariance (`SSᵀ ≠ Σ̃`) or a wrong cancellation in the
    /// estimate's weights would change the result by far more than the
    /// rounding of these 18 × 18 inverses (~10⁻¹¹ at `cond(K + ρI)` ≈ 10⁴).
    #[test]
    fn estimate_matches_its_dense_definition() {
        let (model, theta) = small_model();
        let estimate = model
            .try_log_likelihood_estimate(&theta, &mut Xoshiro256PlusPlus::seed_from_u64(11))
            .unwrap();

        let mut prior = model.kernel_matrix(&theta).unwrap();
        let n = prior.nrows();
        add_to_diagonal(&mut prior, model.ridge());
        let mode = model.laplace(&theta).unwrap().mode().to_vec();
        let w: Vec<f64> = mode
            .iter()
            .map(|&v| sigmoid(v) * (1.0 - sigmoid(v)))
            .collect();
        let l_k = prior.llt(faer::Side::Lower).unwrap().L().to_owned();
        let weighted = Mat::from_fn(n, n, |i, j| w[i] * l_k[(i, j)]);
        let c = Mat::<f64>::identity(n, n) + l_k.transpose() * &weighted;
        let l_c = c.llt(faer::Side::Lower).unwrap().L().to_owned();
        let root = &l_k * l_c.transpose().partial_piv_lu().inverse();
        let prior_inv = prior.partial_piv_lu().inverse();
        let proposal = Mat::from_fn(n, n, |i, j| {
            prior_inv[(i, j)] + if i == j { w[i] } else { 0.0 }
        })
        .partial_piv_lu()
        .inverse();
        let log_normal = |x: &Col<f64>, mean: &Col<f64>, cov: &Mat<f64>| {
            let d = x - mean;
            let quad = d.transpose() * (cov.partial_piv_lu().inverse() * &d);
            -0.5 * quad
                - 0.5 * cov.determinant().ln()
                - 0.5 * n as f64 * (2.0 * std::f64::consts::PI).ln()
        };
        let zero = Col::<f64>::zeros(n);
        let mode = Col::from_fn(n, |i| mode[i]);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
        let mut z = vec![0.0; n];
        let log_weights: Vec<f64> = (0..model.n_importance())
            .map(|_| {
                fill_standard_normal(&mut rng, &mut z);
                let f = &mode + &root * Col::from_fn(n, |i| z[i]);
                let latent: Vec<f64> = f.iter().copied().collect();
                model.log_likelihood(&latent).unwrap() + log_normal(&f, &zero, &prior)
                    - log_normal(&f, &mode, &proposal)
            })
            .collect();
        let dense = log_mean_exp(&log_weights);
        assert!((estimate - dense).abs() < 1e-8, "{estimate} vs {dense}");
    }

    /// Mode, covariance and log evidence against an independent dense
    /// computation: Newton's method directly in f-space,
    /// `f ← (K⁻¹ + W)⁻¹ (W f + ∇log p(y|f))`, with explicit inverses, and the
    /// Laplace evidence `log p(y|f̂) − ½ f̂ᵀK⁻¹f̂ − ½ log det(I + KW)` with an
    /// LU determinant.
    #[test]
    fn laplace_matches_dense_newton_in_f_space() {
        let (model, theta) = small_model();
        let k = model.kernel_matrix(&theta).unwrap();
        let n = k.nrows();
        let lap = model.laplace(&theta).unwrap();
        assert!(lap.converged());

        let k_inv = k.partial_piv_lu().inverse();
        let y = model.data().y();
        let mut f = vec![0.0; n];
        let w_at = |f: &[f64]| -> Vec<f64> {
            f.iter().map(|&v| sigmoid(v) * (1.0 - sigmoid(v))).collect()
        };
        for _ in 0..50 {
            let w = w_at(&f);
            let h = Mat::from_fn(n, n, |i, j| k_inv[(i, j)] + if i == j { w[i] } else { 0.0 });
            let rhs = Col::from_fn(n, |i| w[i] * f[i] + 0.5 * (y[i] + 1.0) - sigmoid(f[i]));
            let next = h.partial_piv_lu().inverse() * &rhs;
            f = next.iter().copied().collect();
        }
        let scale = f.iter().fold(1.0f64, |m, v| m.max(v.abs()));
        for (a, b) in lap.mode().iter().zip(&f) {
            assert!((a - b).abs() < 1e-8 * scale, "{a} vs {b}");
        }
        let w = w_at(&f);
        let h = Mat::from_fn(n, n, |i, j| k_inv[(i, j)] + if i == j { w[i] } else { 0.0 });
        let sigma = h.partial_piv_lu().inverse();
        for i in 0..n {
            for j in 0..n {
                assert!((lap.covariance()[(i, j)] - sigma[(i, j)]).abs() < 1e-8);
            }
        }
        let fcol = Col::from_fn(n, |i| f[i]);
        let quad = fcol.transpose() * (&k_inv * &fcol);
        let i_plus_kw = Mat::from_fn(
            n,
            n,
            |i, j| if i == j { 1.0 } else { 0.0 } + k[(i, j)] * w[j],
        );
        let evidence =
            model.log_likelihood(&f).unwrap() - 0.5 * quad - 0.5 * i_plus_kw.determinant().ln();
        assert!(
            (lap.log_marginal_likelihood() - evidence).abs() < 1e-8,
            "{} vs {evidence}",
            lap.log_marginal_likelihood()
        );
    }

    /// On the full data the mode is a stationary point, f̂ = K (t − π(f̂)),
    /// reached in a few Newton steps.
    #[test]
    fn glass_mode_is_stationary() {
        let model = GpClassification::glass(1).unwrap();
        for theta in [vec![0.0; 9], vec![-2.0; 9]] {
            let k = model.kernel_matrix(&theta).unwrap();
            let lap = model.laplace(&theta).unwrap();
            assert!(
                lap.converged() && lap.newton_steps() < 30,
                "{}",
                lap.newton_steps()
            );
            let grad = Col::from_fn(214, |i| {
                0.5 * (model.data().y()[i] + 1.0) - sigmoid(lap.mode()[i])
            });
            let fixed_point = &k * &grad;
            for (a, b) in lap.mode().iter().zip(fixed_point.iter()) {
                assert!((a - b).abs() < 1e-8, "{a} vs {b}");
            }
        }
    }

    /// `E[p̂] = p(y|θ)` on two points, where
    /// `p(y|θ) = E_{z~N(0,I)} σ(y₁(Lz)₁) σ(y₂(Lz)₂)` with `LLᵀ = K + ρI` is
    /// computed by the trapezoid rule on [−9, 9]² with step 0.015 (spectrally
    /// accurate for this smooth Gaussian-weighted integrand; the truncation
    /// mass is ~1e−19). With a single importance draw per estimate the mean
    /// of 40 000 independent estimates has standard error (sample sd)/200;
    /// allow 4 of them.
    #[test]
    fn importance_estimate_is_unbiased_on_two_points() {
        let x = Mat::from_fn(2, 2, |i, j| [[0.0, 0.0], [0.5, -0.3]][i][j]);
        let model = GpClassification::new(ClassificationData::new(x, vec![1.0, -1.0]).unwrap(), 1)
            .unwrap()
            .with_ridge(0.05)
            .unwrap();
        let theta = [0.2, -0.4];
        let mut c = model.kernel_matrix(&theta).unwrap();
        c[(0, 0)] += 0.05;
        c[(1, 1)] += 0.05;
        let (l11, l21) = (c[(0, 0)].sqrt(), c[(1, 0)] / c[(0, 0)].sqrt());
        let l22 = (c[(1, 1)] - l21 * l21).sqrt();
        let (h, half_width) = (0.015f64, 9.0f64);
        let nodes: Vec<f64> = (0..=(2.0 * half_width / h).round() as usize)
            .map(|i| -half_width + i as f64 * h)
            .collect();
        let phi = |z: f64| (-0.5 * z * z).exp() / (2.0 * std::f64::consts::PI).sqrt();
        let mut exact = 0.0;
        for &z1 in &nodes {
            for &z2 in &nodes {
                let (f1, f2) = (l11 * z1, l21 * z1 + l22 * z2);
                exact += sigmoid(f1) * sigmoid(-f2) * phi(z1) * phi(z2);
            }
        }
        exact *= h * h;

        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let m = 40_000;
        let values: Vec<f64> = (0..m)
            .map(|_| {
                model
                    .try_log_likelihood_estimate(&theta, &mut rng)
                    .unwrap()
                    .exp()
            })
            .collect();
        let mean = values.iter().sum::<f64>() / m as f64;
        let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (m - 1) as f64).sqrt();
        let se = sd / (m as f64).sqrt();
        assert!(
            (mean - exact).abs() < 4.0 * se,
            "{mean} vs {exact} (se {se})"
        );
        // The weights are not constant, so unbiasedness is really tested.
        assert!(sd > 1e-3 * exact, "sd {sd}");
    }

    /// The log-estimate's variance falls roughly like 1/n_imp: with
    /// 30 estimates each, the ratio of sample variances of two normal-ish
    /// samples is F(29, 29)-distributed around the true ratio (~10), whose
    /// 0.1 % quantile is ~0.3, so requiring a ratio > 2.5 fails with
    /// negligible probability when the estimator is right.
    #[test]
    fn log_estimate_variance_shrinks_with_n_importance() {
        let (small, theta) = small_model();
        let data = small.data().clone();
        let variance = |n_imp: usize, seed: u64| {
            let model = GpClassification::new(data.clone(), n_imp)
                .unwrap()
                .with_ridge(1e-3)
                .unwrap();
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            let v: Vec<f64> = (0..30)
                .map(|_| model.try_log_likelihood_estimate(&theta, &mut rng).unwrap())
                .collect();
            let mean = v.iter().sum::<f64>() / 30.0;
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 29.0
        };
        let (v10, v100) = (variance(10, 1), variance(100, 2));
        assert!(
            v10 > 0.0 && v10 / v100 > 2.5,
            "var(n_imp=10) {v10}, var(n_imp=100) {v100}"
        );
    }

    /// Latent values of the wrong length were summed over the shorter of
    /// the two slices without an error.
    #[test]
    fn log_likelihood_of_the_wrong_length_is_an_error() {
        let (model, _) = small_model();
        let n = model.data().n();
        assert!(model.log_likelihood(&vec![0.0; n]).is_ok());
        for len in [0, 1, n - 1, n + 1] {
            assert_eq!(
                model.log_likelihood(&vec![0.0; len]),
                Err(TargetError::DimensionMismatch {
                    expected: n,
                    got: len
                })
            );
        }
    }

    /// A finite θ whose `e^θ` times a covariate overflows made the scaled
    /// distances ∞ − ∞ and `kernel_matrix` return NaN entries without an
    /// error; it is refused, naming θ, by every evaluation.
    #[test]
    fn theta_whose_scaled_covariates_overflow_is_refused() {
        let x = Mat::from_fn(4, 2, |i, j| (i + j) as f64 - 2.0);
        let data = ClassificationData::new(x, vec![1.0, -1.0, 1.0, -1.0]).unwrap();
        let model = GpClassification::new(data, 5).unwrap();
        let theta = [709.5, 0.0];
        for err in [
            model.kernel_matrix(&theta).unwrap_err(),
            model.laplace(&theta).unwrap_err(),
            model
                .try_log_likelihood_estimate(&theta, &mut Xoshiro256PlusPlus::seed_from_u64(0))
                .unwrap_err(),
        ] {
            let message = err.to_string();
            assert!(
                message.contains("`theta`") && message.contains("overflows"),
                "{message}"
            );
        }
        // just below, the kernel matrix is finite (distant points: 0)
        let kernel = model.kernel_matrix(&[709.0, 0.0]).unwrap();
        assert!(kernel.col_iter().all(|c| c.iter().all(|v| v.is_finite())));
    }

    /// The paper's target: finite log density at θ = 0 and reproducible from
    /// the seed; different seeds give different estimates.
    #[test]
    fn glass_posterior_is_a_seeded_estimated_target() {
        let target = glass_posterior(100).unwrap();
        assert_eq!(target.dim(), 9);
        assert!(!target.is_exact());
        let eval =
            |seed| target.log_density(&[0.0; 9], &mut Xoshiro256PlusPlus::seed_from_u64(seed));
        let (a, b, c) = (eval(1), eval(1), eval(2));
        assert!(a.is_finite() && a == b && a != c, "{a} {b} {c}");
        // The estimate is near the Laplace evidence + log prior.
        let model = target.estimator();
        let laplace = model.laplace(&[0.0; 9]).unwrap().log_marginal_likelihood();
        let log_prior = -4.5 * (2.0 * std::f64::consts::PI * 5.0).ln();
        assert!(
            (a - laplace - log_prior).abs() < 1.0,
            "{a} vs {}",
            laplace + log_prior
        );
    }
}
