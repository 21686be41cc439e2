//! The finite estimator (KMC Prop. 2): `f = θᵀφ(x)` on an explicit feature map.

use crate::cholesky_update::rank_update;
use crate::error::{check_points, positive};
use crate::{BaseMeasure, GradientModel, ScoreMatchingError};
use faer::dyn_stack::{MemBuffer, MemStack};
use faer::linalg::cholesky::llt::factor;
use faer::linalg::matmul::matmul;
use faer::linalg::matmul::triangular::{self, BlockStructure};
use faer::linalg::triangular_solve::{
    solve_lower_triangular_in_place, solve_upper_triangular_in_place,
};
use faer::{Accum, Col, ColMut, Mat, MatRef, Par};
use kameleon_core::buffer::ensure_room;
use kameleon_features::FeatureMap;

/// Refactorise when the point count exceeds the count at the last
/// factorisation by this fraction (see [`FiniteEstimator`]).
const REFACTOR_GROWTH: f64 = 0.125;
/// Relative residual at which the online solve stops.
const SOLVE_TOLERANCE: f64 = 1e-13;
/// Iterations after which the online solve gives up and refactorises.
const MAX_SOLVE_ITERATIONS: usize = 40;
/// Points per block when accumulating `C` in a batch fit.
const BLOCK_COLUMNS: usize = 256;

/// The KMC finite estimator (Prop. 2): `f(x) = θᵀφ(x)` with
/// `θ̂ = (C + λI)⁻¹ b`, `C = mean_x Σ_l ∂_lφ(x) ∂_lφ(x)ᵀ` and
/// `b = −mean_x Σ_l ∂²_lφ(x)` (means over the points, as in the paper's
/// intent; the printed `1/n` with a sum to `t` is a typo). `θ̂` is the exact
/// minimiser of `Ĵ(θ) + (λ/2)‖θ‖²`.
///
/// Works with any [`FeatureMap`] (random Fourier features of any spectral
/// kernel, Fastfood, …). [`GradientModel::fit`] fits in batch in O(ndm² + m³);
/// [`FiniteEstimator::update`] adds one point in O(dm²).
///
/// # Online updates (exact)
///
/// With `t` points, `θ̂ = (S + tλI)⁻¹ s` where `S = Σ J Jᵀ` and `s = −Σ Σ_l ∂²_lφ`
/// are **sums** (`J` the m × d Jacobian of φ at a point). The ridge `tλ` grows
/// with every point, a full-rank change that no low-rank update can follow.
/// The estimator therefore keeps the Cholesky factor `L` of `S + t₀λI`, where
/// `t₀` is the count at the last full factorisation; each new point updates
/// `L` by the rank-d term `J Jᵀ` (Givens rotations, one pass over the
/// triangle), and `θ̂` is then
/// solved *exactly* for the true matrix `S + tλI = LLᵀ + (t − t₀)λI` by
/// conjugate gradients preconditioned with `LLᵀ`, warm-started at the previous
/// `θ̂`. The preconditioned matrix has eigenvalues in `[1, t/t₀]`; a full
/// refactorisation of `S + tλI` (which also clears the round-off of the
/// updates) happens whenever `t > (1 + 1/8) t₀`, so the solve converges to
/// relative residual 1e-13 in a handful of O(m²) iterations. Refactorisations
/// cost O(m³) at geometrically spaced counts: the first ~9 points and then a
/// logarithmic number. The online result equals the batch fit on the same
/// points to round-off.
///
/// # A fixed ridge on the sums (named option)
///
/// With [`RidgeSchedule::FixedOnSums`] (set by
/// [`FiniteEstimator::with_ridge_schedule`]) the estimator solves
/// `θ̂ = (S + λI)⁻¹ s` instead: the ridge stays λ on the sums, an effective
/// ridge λ/t on the means. That system changes by exactly the rank-d term
/// `J Jᵀ` per point, so an online update is one rank-d Cholesky update plus
/// two triangular solves — O(dm²), no iteration, no refactorisation — and
/// again equals the batch fit on the same points. The price: the
/// regularisation fades as points accumulate, so the fit after many points is
/// less smooth (larger ‖θ̂‖, more oscillation of the cosine features in the
/// tails) than the default's at the same λ; pick λ about t_typ times the
/// default's λ to match it at a typical count t_typ.
///
/// # Batch fits of random Fourier features
///
/// When the map exposes [`FeatureMap::feature_frequencies`] (dense random
/// Fourier features do), `∂_lφ_r = ψ'_r ω_{r,l}`, so
/// `S = Σ_x Σ_l ∂_lφ ∂_lφᵀ = (Σ_x ψ'ψ'ᵀ) ∘ (ΩΩᵀ)` and
/// `s_r = −‖ω_r‖² Σ_x ψ''_r`: the batch fit forms an m × n × m product (its
/// lower triangle) instead of an m × nd × m one. Other maps use the generic
/// Jacobian path. Both give the same sums up to floating-point
/// reassociation.
///
/// # A standard normal base measure
///
/// With [`BaseMeasure::StandardNormal`] ([`FiniteEstimator::with_base_measure`])
/// the model is `θᵀφ(x) − ‖x‖²/2`; the base measure's term `E[∇f·(−x)]` of
/// the objective adds `J(x) x` per point to `s` (`Σ_l ∂_lφ(x) x_l`; for
/// random Fourier features `ψ'(x) ∘ (Ωx)`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "FiniteParts<F>")]
pub struct FiniteEstimator<F: FeatureMap> {
    features: F,
    lambda: f64,
    #[serde(default)]
    ridge_schedule: RidgeSchedule,
    #[serde(default)]
    base: BaseMeasure,
    count: usize,
    factor_count: usize,
    factorised: bool,
    /// The sums `S`; only the lower triangle is kept up to date by
    /// [`FiniteEstimator::update`], and only it is read. Serialised as the
    /// full symmetric matrix (the upper triangle mirrored from the lower).
    #[serde(
        serialize_with = "crate::serde_mat::serialize_symmetric_lower",
        deserialize_with = "crate::serde_mat::deserialize"
    )]
    c_sum: Mat<f64>,
    b_sum: Vec<f64>,
    /// The Cholesky factor in the lower triangle; the strict upper triangle
    /// is scratch, serialised as zeros.
    #[serde(
        serialize_with = "crate::serde_mat::serialize_lower_triangular",
        deserialize_with = "crate::serde_mat::deserialize"
    )]
    cholesky: Mat<f64>,
    theta: Vec<f64>,
    /// Scratch buffers, not part of the state (rebuilt after deserialisation).
    #[serde(skip)]
    work: Workspace,
}

/// The serialised form of [`FiniteEstimator`]: the feature map, λ and the
/// base measure are validated as by the constructor, the sums, factor and θ̂ must have the
/// feature map's output dimension m, and the count of the last
/// factorisation cannot exceed the point count.
#[derive(serde::Deserialize)]
struct FiniteParts<F> {
    features: F,
    lambda: f64,
    #[serde(default)]
    ridge_schedule: RidgeSchedule,
    #[serde(default)]
    base: BaseMeasure,
    count: usize,
    factor_count: usize,
    factorised: bool,
    #[serde(deserialize_with = "crate::serde_mat::deserialize")]
    c_sum: Mat<f64>,
    b_sum: Vec<f64>,
    #[serde(deserialize_with = "crate::serde_mat::deserialize")]
    cholesky: Mat<f64>,
    theta: Vec<f64>,
}

impl<F: FeatureMap> TryFrom<FiniteParts<F>> for FiniteEstimator<F> {
    type Error = ScoreMatchingError;
    fn try_from(p: FiniteParts<F>) -> Result<Self, ScoreMatchingError> {
        // the checks of `new` and `with_base_measure`, without allocating
        // the system a second time
        let lambda = Self::check_parameters(&p.features, p.lambda)?;
        p.base.validate()?;
        let m = p.features.dim_out();
        let shape_error = |name, got: usize| ScoreMatchingError::InvalidParameter {
            name,
            value: got as f64,
            reason: "must match the feature map's output dimension m (an m × m matrix, \
                     an m-vector)",
        };
        for (name, matrix) in [("c_sum", &p.c_sum), ("cholesky", &p.cholesky)] {
            if matrix.nrows() != m || matrix.ncols() != m {
                return Err(shape_error(name, matrix.nrows().max(matrix.ncols())));
            }
        }
        for (name, vector) in [("b_sum", &p.b_sum), ("theta", &p.theta)] {
            if vector.len() != m {
                return Err(shape_error(name, vector.len()));
            }
        }
        if p.factor_count > p.count {
            return Err(ScoreMatchingError::InvalidParameter {
                name: "factor_count",
                value: p.factor_count as f64,
                reason: "cannot exceed the point count",
            });
        }
        Ok(Self {
            features: p.features,
            lambda,
            ridge_schedule: p.ridge_schedule,
            base: p.base,
            count: p.count,
            factor_count: p.factor_count,
            factorised: p.factorised,
            c_sum: p.c_sum,
            b_sum: p.b_sum,
            cholesky: p.cholesky,
            theta: p.theta,
            work: Workspace::default(),
        })
    }
}

/// How the ridge of a [`FiniteEstimator`] relates to the number of points t.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub enum RidgeSchedule {
    /// `θ̂ = (C + λI)⁻¹ b` on the **means** (KMC Prop. 2; the default): the
    /// ridge on the sums is tλ, growing with t. Online updates are exact
    /// but need a preconditioned iterative solve and occasional O(m³)
    /// refactorisations (see [`FiniteEstimator`]).
    #[default]
    GrowingWithCount,
    /// `θ̂ = (S + λI)⁻¹ s` on the **sums**: a fixed ridge λ, i.e. an
    /// effective ridge λ/t on the means that fades as points accumulate.
    /// Online updates are a rank-d Cholesky update and two triangular
    /// solves, O(dm²) with no iteration (see [`FiniteEstimator`] for the
    /// trade-off).
    FixedOnSums,
}

/// The scratch buffers of [`FiniteEstimator`].
#[derive(Debug, Clone)]
struct Workspace {
    jacobian: Mat<f64>,
    second: Mat<f64>,
    clobbered: Mat<f64>,
    residual: Col<f64>,
    preconditioned: Col<f64>,
    direction: Col<f64>,
    product: Col<f64>,
    embedding: Vec<f64>,
    second_argument: Vec<f64>,
}

impl Default for Workspace {
    /// Empty buffers, sized by `ensure_workspace` before use.
    fn default() -> Self {
        Self::new(0, 0)
    }
}

impl Workspace {
    fn new(m: usize, d: usize) -> Self {
        Self {
            jacobian: Mat::zeros(m, d),
            second: Mat::zeros(m, d),
            clobbered: Mat::zeros(m, d),
            residual: Col::zeros(m),
            preconditioned: Col::zeros(m),
            direction: Col::zeros(m),
            product: Col::zeros(m),
            embedding: vec![0.0; m],
            second_argument: vec![0.0; m],
        }
    }
}

impl<F: FeatureMap> FiniteEstimator<F> {
    /// An estimator with no points on the feature map `features` and ridge
    /// `λ > 0`. Errors with [`ScoreMatchingError::BufferTooLarge`] if its
    /// m × m system (m = `features.dim_out()`) cannot be allocated.
    pub fn new(features: F, lambda: f64) -> Result<Self, ScoreMatchingError> {
        let lambda = Self::check_parameters(&features, lambda)?;
        let (m, d) = (features.dim_out(), features.dim_in());
        Ok(Self {
            features,
            lambda,
            ridge_schedule: RidgeSchedule::GrowingWithCount,
            base: BaseMeasure::Flat,
            count: 0,
            factor_count: 0,
            factorised: false,
            c_sum: Mat::zeros(m, m),
            b_sum: vec![0.0; m],
            cholesky: Mat::zeros(m, m),
            theta: vec![0.0; m],
            work: Workspace::new(m, d),
        })
    }

    /// What [`FiniteEstimator::new`] checks before it allocates: `λ > 0`,
    /// a feature map with non-zero dimensions, and room for the buffers.
    /// Returns λ.
    fn check_parameters(features: &F, lambda: f64) -> Result<f64, ScoreMatchingError> {
        let lambda = positive("lambda", lambda)?;
        let (m, d) = (features.dim_out(), features.dim_in());
        if m == 0 || d == 0 {
            return Err(ScoreMatchingError::DimensionMismatch {
                expected: 1,
                got: m.min(d),
            });
        }
        ensure_room(
            "the finite system's two m × m matrices and three m × d derivative buffers",
            &[&[2, m, m], &[3, m, d]],
        )?;
        Ok(lambda)
    }

    /// The feature map.
    pub fn features(&self) -> &F {
        &self.features
    }

    /// The ridge λ.
    pub fn lambda(&self) -> f64 {
        self.lambda
    }

    /// Chooses how the ridge relates to the number of points (default
    /// [`RidgeSchedule::GrowingWithCount`]). If the estimator already holds
    /// points, θ̂ is recomputed for the new schedule (an O(m³) factorisation,
    /// which can fail only if the sums lost positive definiteness).
    pub fn with_ridge_schedule(
        mut self,
        schedule: RidgeSchedule,
    ) -> Result<Self, ScoreMatchingError> {
        self.ridge_schedule = schedule;
        if self.count > 0 {
            self.refactorise()?;
        }
        Ok(self)
    }

    /// The ridge schedule.
    pub fn ridge_schedule(&self) -> RidgeSchedule {
        self.ridge_schedule
    }

    /// Chooses the base measure (default [`BaseMeasure::Flat`]). The sums
    /// depend on it, so it is set before the first point: an estimator that
    /// holds points gives an error.
    pub fn with_base_measure(mut self, base: BaseMeasure) -> Result<Self, ScoreMatchingError> {
        base.validate()?;
        if self.count > 0 {
            return Err(ScoreMatchingError::InvalidParameter {
                name: "base_measure",
                value: self.count as f64,
                reason: "must be set before the first point (the value is the point count)",
            });
        }
        self.base = base;
        Ok(self)
    }

    /// The base measure.
    pub fn base_measure(&self) -> BaseMeasure {
        self.base
    }

    /// Adds the base measure's term `w(x)·J x` of one point to `s`, with `J`
    /// (m × d) the Jacobian of φ at `x` in `jacobian` and
    /// `∇ log q₀(x) = −w(x) x`.
    fn add_base_term(base: BaseMeasure, b_sum: &mut [f64], jacobian: MatRef<'_, f64>, x: &[f64]) {
        if let Some(w) = base.pull_weight(x) {
            for (i, b) in b_sum.iter_mut().enumerate() {
                *b += w * (0..x.len()).map(|l| jacobian[(i, l)] * x[l]).sum::<f64>();
            }
        }
    }

    /// The ridge added to the sums `S` with the current count.
    fn sum_ridge(&self) -> f64 {
        match self.ridge_schedule {
            RidgeSchedule::GrowingWithCount => self.count as f64 * self.lambda,
            RidgeSchedule::FixedOnSums => self.lambda,
        }
    }

    /// The number of points the estimator has seen.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The fitted parameter θ̂ (zeros before any point).
    pub fn theta(&self) -> &[f64] {
        &self.theta
    }

    /// Sizes the scratch buffers (only needed after a deserialisation).
    fn ensure_workspace(&mut self) {
        let (m, d) = (self.features.dim_out(), self.features.dim_in());
        if self.work.embedding.len() != m {
            self.work = Workspace::new(m, d);
        }
    }

    /// Adds one point and updates θ̂ in O(dm²) (see the type's docs). Does not
    /// allocate, except during the periodic O(m³) refactorisations.
    ///
    /// Errors on a point of the wrong dimension or with a non-finite
    /// coordinate, and with [`ScoreMatchingError::NonFiniteFeatures`] on a
    /// point so large that the features' derivatives overflow; the
    /// estimator is then unchanged.
    pub fn update(&mut self, x: &[f64]) -> Result<(), ScoreMatchingError> {
        self.ensure_workspace();
        let d = self.features.dim_in();
        if x.len() != d {
            return Err(ScoreMatchingError::DimensionMismatch {
                expected: d,
                got: x.len(),
            });
        }
        if x.iter().any(|v| !v.is_finite()) {
            return Err(ScoreMatchingError::NonFinitePoint { index: 0 });
        }
        self.features.jacobian(x, self.work.jacobian.as_mut());
        self.features
            .second_derivatives(x, self.work.second.as_mut());
        // the base measure's term, into scratch: checked with the
        // derivatives before anything is added to the sums, so that a point
        // whose terms overflow leaves the estimator as it was
        let base_term = &mut self.work.embedding;
        base_term.fill(0.0);
        Self::add_base_term(self.base, base_term, self.work.jacobian.as_ref(), x);
        if !point_terms_are_finite(self.work.jacobian.as_ref(), self.work.second.as_ref())
            || base_term.iter().any(|v| !v.is_finite())
        {
            return Err(ScoreMatchingError::NonFiniteFeatures);
        }
        // S += J Jᵀ on the lower triangle, the only one read after a fit
        let j = self.work.jacobian.as_ref();
        triangular::matmul(
            self.c_sum.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Add,
            j,
            BlockStructure::Rectangular,
            j.transpose(),
            BlockStructure::Rectangular,
            1.0,
            Par::Seq,
        );
        for i in 0..self.b_sum.len() {
            self.b_sum[i] -= (0..d).map(|l| self.work.second[(i, l)]).sum::<f64>();
        }
        if self.base.pull_weight(x).is_some() {
            for (b, term) in self.b_sum.iter_mut().zip(&self.work.embedding) {
                *b += term;
            }
        }
        self.count += 1;
        let stale = self.ridge_schedule == RidgeSchedule::GrowingWithCount
            && self.count as f64 > (1.0 + REFACTOR_GROWTH) * self.factor_count as f64;
        if !self.factorised || stale {
            return self.refactorise();
        }
        self.work.clobbered.copy_from(&self.work.jacobian);
        if rank_update(self.cholesky.as_mut(), self.work.clobbered.as_mut()).is_err() {
            return self.refactorise();
        }
        match self.ridge_schedule {
            // the factor is exactly that of S + λI: solve directly
            RidgeSchedule::FixedOnSums => self.solve_with_factor(),
            RidgeSchedule::GrowingWithCount => {
                if !self.solve_preconditioned() {
                    return self.refactorise();
                }
            }
        }
        Ok(())
    }

    /// Factorises `S + ridge·I` from scratch and solves for θ̂ directly.
    fn refactorise(&mut self) -> Result<(), ScoreMatchingError> {
        let m = self.c_sum.nrows();
        let ridge = self.sum_ridge();
        if !ridge.is_finite() {
            return Err(ScoreMatchingError::InvalidParameter {
                name: "lambda",
                value: self.lambda,
                reason: "times the number of points (the ridge on the sums) overflows: \
                         use a smaller lambda",
            });
        }
        self.cholesky.copy_from(&self.c_sum);
        for i in 0..m {
            self.cholesky[(i, i)] += ridge;
        }
        let mut buffer = MemBuffer::new(factor::cholesky_in_place_scratch::<f64>(
            m,
            Par::Seq,
            Default::default(),
        ));
        self.factorised = factor::cholesky_in_place(
            self.cholesky.as_mut(),
            Default::default(),
            Par::Seq,
            MemStack::new(&mut buffer),
            Default::default(),
        )
        .is_ok();
        if !self.factorised {
            return Err(ScoreMatchingError::NotPositiveDefinite);
        }
        self.factor_count = self.count;
        self.solve_with_factor();
        Ok(())
    }

    /// θ̂ = (LLᵀ)⁻¹ s with the current factor L.
    fn solve_with_factor(&mut self) {
        self.theta.copy_from_slice(&self.b_sum);
        let l = self.cholesky.as_ref();
        let mut theta = ColMut::from_slice_mut(&mut self.theta);
        solve_lower_triangular_in_place(l, theta.as_mut().as_mat_mut(), Par::Seq);
        solve_upper_triangular_in_place(l.transpose(), theta.as_mat_mut(), Par::Seq);
    }

    /// Solves `(S + tλI) θ = s` by conjugate gradients preconditioned with the
    /// current factor, from the current θ. Returns whether it converged.
    fn solve_preconditioned(&mut self) -> bool {
        let m = self.theta.len();
        let ridge = self.sum_ridge();
        let l = self.cholesky.as_ref();
        let dot = |a: &Col<f64>, b: &Col<f64>| (0..m).map(|i| a[i] * b[i]).sum::<f64>();
        let b_norm = self.b_sum.iter().map(|v| v * v).sum::<f64>().sqrt();
        if b_norm == 0.0 {
            self.theta.fill(0.0);
            return true;
        }
        // residual = s − Aθ
        symmetric_lower_mul(
            self.c_sum.as_ref(),
            &self.theta,
            self.work.residual.as_mut(),
        );
        for i in 0..m {
            self.work.residual[i] = self.b_sum[i] - ridge * self.theta[i] - self.work.residual[i];
        }
        let precondition = |z: &mut Col<f64>, r: &Col<f64>| {
            z.copy_from(r);
            solve_lower_triangular_in_place(l, z.as_mat_mut(), Par::Seq);
            solve_upper_triangular_in_place(l.transpose(), z.as_mat_mut(), Par::Seq);
        };
        // The residual is checked before it is preconditioned, so the
        // preconditioner solve (two passes over the factor) runs only when
        // another step follows; the iterates are those of the textbook
        // order, which preconditions every new residual.
        let mut rz = 0.0;
        for iteration in 0..MAX_SOLVE_ITERATIONS {
            if dot(&self.work.residual, &self.work.residual).sqrt() <= SOLVE_TOLERANCE * b_norm {
                return true;
            }
            precondition(&mut self.work.preconditioned, &self.work.residual);
            let rz_next = dot(&self.work.residual, &self.work.preconditioned);
            if iteration == 0 {
                self.work.direction.copy_from(&self.work.preconditioned);
            } else {
                let beta = rz_next / rz;
                for i in 0..m {
                    self.work.direction[i] =
                        self.work.preconditioned[i] + beta * self.work.direction[i];
                }
            }
            rz = rz_next;
            symmetric_lower_mul(
                self.c_sum.as_ref(),
                self.work
                    .direction
                    .as_ref()
                    .try_as_col_major()
                    .expect("contiguous")
                    .as_slice(),
                self.work.product.as_mut(),
            );
            for i in 0..m {
                self.work.product[i] += ridge * self.work.direction[i];
            }
            let step = rz / dot(&self.work.direction, &self.work.product);
            for i in 0..m {
                self.theta[i] += step * self.work.direction[i];
                self.work.residual[i] -= step * self.work.product[i];
            }
        }
        false
    }
}

impl<F: FeatureMap> FiniteEstimator<F> {
    /// `S` and `s` over all rows of `points` from the full Jacobians, in
    /// blocks of points: `S += B Bᵀ` with `B` the Jacobians side by side
    /// (an m × nd × m product overall).
    fn sum_jacobians(&mut self, points: MatRef<'_, f64>) {
        let (n, d, m) = (points.nrows(), self.dim(), self.features.dim_out());
        let per_block = (BLOCK_COLUMNS / d).max(1);
        let mut block = Mat::<f64>::zeros(m, per_block * d);
        let mut x = vec![0.0; d];
        for start in (0..n).step_by(per_block) {
            let rows = per_block.min(n - start);
            for p in 0..rows {
                for (l, xl) in x.iter_mut().enumerate() {
                    *xl = points[(start + p, l)];
                }
                self.features
                    .jacobian(&x, block.as_mut().subcols_mut(p * d, d));
                self.features
                    .second_derivatives(&x, self.work.second.as_mut());
                for i in 0..m {
                    self.b_sum[i] -= (0..d).map(|l| self.work.second[(i, l)]).sum::<f64>();
                }
                let jacobian = block.as_ref().subcols(p * d, d);
                Self::add_base_term(self.base, &mut self.b_sum, jacobian, &x);
            }
            let used = block.as_ref().subcols(0, rows * d);
            matmul(
                self.c_sum.as_mut(),
                Accum::Add,
                used,
                used.transpose(),
                1.0,
                Par::Seq,
            );
        }
    }

    /// `S` and `s` over all rows of `points` for a map with
    /// [`FeatureMap::feature_frequencies`] `Ω` (see the type's docs):
    /// `S = (Σ_x ψ'ψ'ᵀ) ∘ (ΩΩᵀ)` with the lower triangle of `Σ ψ'ψ'ᵀ` formed
    /// by blocks of [`BLOCK_COLUMNS`] points, and `s_r = −‖ω_r‖² Σ_x ψ''_r`.
    fn sum_factored(&mut self, points: MatRef<'_, f64>, frequencies: MatRef<'_, f64>) {
        let (n, d, m) = (points.nrows(), self.dim(), self.features.dim_out());
        let par = faer::get_global_parallelism();
        let mut block = Mat::<f64>::zeros(m, BLOCK_COLUMNS.min(n));
        let mut x = vec![0.0; d];
        let mut second_sum = vec![0.0; m];
        // Σ_x ψ'_r(x) w(x) ω_r·x, the base measure's term
        let mut base_sum = vec![0.0; m];
        for start in (0..n).step_by(BLOCK_COLUMNS) {
            let count = BLOCK_COLUMNS.min(n - start);
            for p in 0..count {
                for (l, xl) in x.iter_mut().enumerate() {
                    *xl = points[(start + p, l)];
                }
                let column = block.col_mut(p).try_as_col_major_mut().expect("contiguous");
                let structured = self.features.argument_derivatives(
                    &x,
                    column.as_slice_mut(),
                    &mut self.work.second_argument,
                );
                debug_assert!(structured, "maps with frequencies give ψ', ψ''");
                for (total, v) in second_sum.iter_mut().zip(&self.work.second_argument) {
                    *total += v;
                }
                if let Some(w) = self.base.pull_weight(&x) {
                    for (r, total) in base_sum.iter_mut().enumerate() {
                        let projection: f64 = (0..d).map(|l| frequencies[(r, l)] * x[l]).sum();
                        *total += block[(r, p)] * (w * projection);
                    }
                }
            }
            let used = block.as_ref().subcols(0, count);
            triangular::matmul(
                self.c_sum.as_mut(),
                BlockStructure::TriangularLower,
                Accum::Add,
                used,
                BlockStructure::Rectangular,
                used.transpose(),
                BlockStructure::Rectangular,
                1.0,
                par,
            );
        }
        let mut gram = Mat::<f64>::zeros(m, m);
        triangular::matmul(
            gram.as_mut(),
            BlockStructure::TriangularLower,
            Accum::Replace,
            frequencies,
            BlockStructure::Rectangular,
            frequencies.transpose(),
            BlockStructure::Rectangular,
            1.0,
            par,
        );
        for j in 0..m {
            self.b_sum[j] = -gram[(j, j)] * second_sum[j] + base_sum[j];
            for i in j..m {
                let value = self.c_sum[(i, j)] * gram[(i, j)];
                self.c_sum[(i, j)] = value;
                self.c_sum[(j, i)] = value;
            }
        }
    }
}

impl<F: FeatureMap> GradientModel for FiniteEstimator<F> {
    fn dim(&self) -> usize {
        self.features.dim_in()
    }

    /// Batch fit on all rows of `points` (at least one), replacing previous points.
    ///
    /// Degenerate data is fitted without an error (an adaptive sampler's
    /// history can be one repeated point early on): with a single point, or
    /// all points equal, the system holds the features' derivatives at that
    /// one point only, of rank at most d, and the ridge λ fixes the rest of
    /// θ̂; the fitted gradient says nothing about the target's spread and
    /// can be large away from the point.
    ///
    /// Points so large that the features' derivatives overflow give
    /// [`ScoreMatchingError::NonFiniteFeatures`], and leave the estimator
    /// with no points.
    fn fit(&mut self, points: MatRef<'_, f64>) -> Result<(), ScoreMatchingError> {
        let (n, d) = (points.nrows(), self.dim());
        check_points(points, d)?;
        if n == 0 {
            return Err(ScoreMatchingError::TooFewPoints { needed: 1, got: 0 });
        }
        self.ensure_workspace();
        self.c_sum.fill(0.0);
        self.b_sum.fill(0.0);
        match self.features.feature_frequencies() {
            Some(frequencies) => self.sum_factored(points, frequencies.as_ref()),
            None => self.sum_jacobians(points),
        }
        let lower_finite = (0..self.c_sum.ncols())
            .all(|j| (j..self.c_sum.nrows()).all(|i| self.c_sum[(i, j)].is_finite()));
        if !lower_finite || self.b_sum.iter().any(|v| !v.is_finite()) {
            // the sums hold no usable points: start from none again, so that
            // later updates do not add to them
            self.c_sum.fill(0.0);
            self.b_sum.fill(0.0);
            self.theta.fill(0.0);
            self.count = 0;
            self.factor_count = 0;
            self.factorised = false;
            return Err(ScoreMatchingError::NonFiniteFeatures);
        }
        self.count = n;
        self.refactorise()
    }

    fn log_density_unnormalised(&mut self, x: &[f64]) -> f64 {
        debug_assert_eq!(x.len(), self.dim());
        self.ensure_workspace();
        self.features.embed(x, &mut self.work.embedding);
        let f: f64 = self
            .work
            .embedding
            .iter()
            .enumerate()
            .map(|(i, p)| p * self.theta[i])
            .sum();
        f + self.base.log_density(x)
    }

    fn grad_log_density(&mut self, x: &[f64], out: &mut [f64]) {
        debug_assert!(x.len() == self.dim() && out.len() == x.len());
        self.features.jacobian_transpose_mul(x, &self.theta, out);
        self.base.add_gradient(x, out);
    }

    fn grad_and_laplacian(&mut self, x: &[f64], grad: &mut [f64]) -> f64 {
        self.grad_log_density(x, grad);
        self.ensure_workspace();
        self.features
            .second_derivatives(x, self.work.second.as_mut());
        let laplacian: f64 = (0..self.theta.len())
            .map(|i| self.theta[i] * (0..x.len()).map(|l| self.work.second[(i, l)]).sum::<f64>())
            .sum();
        laplacian + self.base.laplacian(x)
    }
}

/// `out = S p` for the symmetric `S` whose lower triangle (with the diagonal)
/// is stored in `lower` (column-major, contiguous columns; the strict upper
/// triangle is not read): column j contributes `S[j.., j] p_j` to `out[j..]`
/// (an axpy) and `S[j+1.., j] · p[j+1..]` to `out[j]` (a dot product), so the
/// triangle is read once. Dispatched like [`crate::cholesky_update`]'s
/// rotations, with explicit SIMD vectors; the dot products run in
/// [`DOT_LANES`] fixed partial sums, so the result does not depend on the
/// CPU.
/// Whether one point's Jacobian (m × d) and second derivatives are finite,
/// and so are the sums of squares `Σ_l J[i, l]²` that `S += J Jᵀ` adds to
/// the diagonal.
fn point_terms_are_finite(jacobian: MatRef<'_, f64>, second: MatRef<'_, f64>) -> bool {
    (0..jacobian.nrows()).all(|i| {
        let squares: f64 = (0..jacobian.ncols())
            .map(|l| jacobian[(i, l)] * jacobian[(i, l)])
            .sum();
        squares.is_finite() && (0..second.ncols()).all(|l| second[(i, l)].is_finite())
    })
}

fn symmetric_lower_mul(lower: MatRef<'_, f64>, p: &[f64], out: ColMut<'_, f64>) {
    kameleon_core::simd::dispatch(SymmetricLowerMul { lower, p, out });
}

/// Partial sums of the dot products in [`symmetric_lower_mul`].
const DOT_LANES: usize = 8;

/// [`symmetric_lower_mul`] as a [`pulp::WithSimd`] operation.
struct SymmetricLowerMul<'a> {
    lower: MatRef<'a, f64>,
    p: &'a [f64],
    out: ColMut<'a, f64>,
}

impl pulp::WithSimd for SymmetricLowerMul<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        const {
            assert!(
                DOT_LANES.is_multiple_of(S::F64_LANES),
                "a block of DOT_LANES entries is a whole number of vectors"
            )
        };
        let Self { lower, p, out } = self;
        let out = out
            .try_as_col_major_mut()
            .expect("contiguous")
            .as_slice_mut();
        out.fill(0.0);
        for j in 0..p.len() {
            let column = lower.col(j).try_as_col_major().expect("contiguous columns");
            let (diagonal, below) = column.as_slice()[j..].split_first().expect("j < m");
            let (out_j, out_below) = out[j..].split_first_mut().expect("j < m");
            let (p_j, p_below) = (p[j], &p[j + 1..]);
            // lane k of the dot product sums the entries k, k + DOT_LANES, …
            // (whole blocks of DOT_LANES entries, as SIMD vectors), then the
            // rest in order: the same scalar operations on every CPU
            let mut lanes = [0.0; DOT_LANES];
            let (chunks, rest) = below.as_chunks::<DOT_LANES>();
            let (p_chunks, p_rest) = p_below.as_chunks::<DOT_LANES>();
            let (out_chunks, out_rest) = out_below.as_chunks_mut::<DOT_LANES>();
            let lane_vectors = S::as_mut_simd_f64s(&mut lanes).0;
            let p_j_vector = simd.splat_f64s(p_j);
            for ((s, q), o) in chunks.iter().zip(p_chunks).zip(out_chunks) {
                let blocks = S::as_simd_f64s(s).0.iter().zip(S::as_simd_f64s(q).0);
                let targets = lane_vectors.iter_mut().zip(S::as_mut_simd_f64s(o).0);
                for ((lane, o), (s, q)) in targets.zip(blocks) {
                    *o = simd.mul_add_f64s(*s, p_j_vector, *o);
                    *lane = simd.mul_add_f64s(*s, *q, *lane);
                }
            }
            for (k, ((s, q), o)) in rest.iter().zip(p_rest).zip(out_rest).enumerate() {
                *o = s.mul_add(p_j, *o);
                lanes[k] = s.mul_add(*q, lanes[k]);
            }
            *out_j += diagonal.mul_add(p_j, lanes.iter().sum::<f64>());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kameleon_features::{Embedding, RandomFourierFeatures};
    use kameleon_kernels::Gaussian;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// The serialised state is self-consistent — the sums symmetric with
    /// their lower triangle as kept, the factor lower triangular — although
    /// the online updates leave both upper triangles stale, and a
    /// deserialised estimator continues bit-identically.
    #[test]
    fn serialised_state_is_self_consistent_and_round_trips() {
        for schedule in [RidgeSchedule::GrowingWithCount, RidgeSchedule::FixedOnSums] {
            let (d, m) = (2, 12);
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
            let kernel = Gaussian::new(1.0).unwrap();
            let features =
                RandomFourierFeatures::new(&kernel, d, m, Embedding::CosPhase, &mut rng).unwrap();
            let mut model = FiniteEstimator::new(features, 0.1)
                .unwrap()
                .with_ridge_schedule(schedule)
                .unwrap();
            let points = Mat::from_fn(40, d, |_, _| rng.random_range(-2.0..2.0));
            model.fit(points.as_ref()).unwrap();
            let mut point = || [rng.random_range(-2.0..2.0), rng.random_range(-2.0..2.0)];
            for _ in 0..3 {
                model.update(&point()).unwrap();
            }
            // the updates left the upper triangle of the sums stale
            let stale = (0..m).any(|j| (0..j).any(|i| model.c_sum[(i, j)] != model.c_sum[(j, i)]));
            assert!(stale, "{schedule:?}: the test needs a stale upper triangle");
            let bytes = postcard::to_stdvec(&model).unwrap();
            let mut restored: FiniteEstimator<RandomFourierFeatures> =
                postcard::from_bytes(&bytes).unwrap();
            for j in 0..m {
                for i in 0..m {
                    let lower = model.c_sum[(i.max(j), i.min(j))];
                    assert_eq!(
                        restored.c_sum[(i, j)],
                        lower,
                        "{schedule:?}: sums ({i}, {j})"
                    );
                    let factor = if i >= j { model.cholesky[(i, j)] } else { 0.0 };
                    assert_eq!(restored.cholesky[(i, j)], factor, "{schedule:?}: factor");
                }
            }
            let next = point();
            model.update(&next).unwrap();
            restored.update(&next).unwrap();
            assert_eq!(model.theta(), restored.theta(), "{schedule:?}");
        }
    }

    /// The product from the lower triangle equals the full symmetric
    /// product (to round-off), ignores the upper triangle, and handles sizes
    /// that are not multiples of the lane count.
    #[test]
    fn symmetric_lower_mul_matches_the_full_product() {
        for m in [1, 7, 8, 9, 37] {
            let full = Mat::from_fn(m, m, |i, j| ((i + j) as f64 * 0.37).sin() + (i * j) as f64);
            let mut lower = full.clone();
            for j in 1..m {
                for i in 0..j {
                    lower[(i, j)] = f64::NAN;
                }
            }
            let p: Vec<f64> = (0..m).map(|i| (i as f64 * 1.3).cos()).collect();
            let mut out = Col::<f64>::zeros(m);
            symmetric_lower_mul(lower.as_ref(), &p, out.as_mut());
            for i in 0..m {
                let direct: f64 = (0..m).map(|j| full[(i, j)] * p[j]).sum();
                let scale: f64 = (0..m).map(|j| (full[(i, j)] * p[j]).abs()).sum();
                assert!((out[i] - direct).abs() <= 1e-14 * scale, "m = {m}, row {i}");
            }
        }
    }
}
