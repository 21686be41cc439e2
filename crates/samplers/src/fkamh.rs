// Over 800 lines on purpose: a fifth is the derivation in the docs and
// over a quarter the tests; the proposal, its quadratic form kernel and the
// Welford moments of the features share the proposal's private buffers.
//! F-KAMH (Kotlicki 2015, thesis ch. 4): the kernel adaptive Metropolis
//! proposal on an explicit feature map, with the feature covariance of the
//! **whole** chain history.
//!
//! The proposal at y is `N(y, R(y))` with
//!
//! ```text
//! R(y) = γ²I + η² J(y)ᵀ C̃ J(y),      J(y) = ∂φ/∂x at y  (D × d),
//! ```
//!
//! and `C̃ = S/n` the maximum-likelihood covariance of the features φ(x_0), …,
//! φ(x_{t}) of every state so far (thesis eq. 4.2; S the Welford scatter of
//! [`RunningMoments`]). With ν = η/(2√n) this is exactly the KAMH covariance
//! `γ²I + ν² M̃HM̃ᵀ` of the approximate kernel `k̃(x, y) = φ(x)ᵀφ(y)` on all n
//! points (thesis eq. 4.7–4.8).
//!
//! # One step
//!
//! The forward density `q(x*|x_t)` and the reverse density `q(x_t|x*)` use
//! the same C̃ — the one that includes x_t but not yet the new state — with J
//! at x_t and at x* respectively (the R code of the thesis used the previous
//! state's covariance for the reverse density instead). The new state is added
//! to the history only in [`Proposal::observe`], after the decision.
//!
//! # Cost
//!
//! Per step: one Jacobian at x* (O(Dd) for dense features), the d × d form
//! `J*ᵀSJ*` (one D × D × d product: O(D²d), the dominant cost), one Welford
//! update of S (O(D²)), two d × d Cholesky factorisations. The current state's
//! form `JᵀSJ` is never recomputed: it is the proposal's form when x* is
//! accepted, and the Welford update changes it by the rank one
//! `n/(n+1)(Jᵀδ)(Jᵀδ)ᵀ` (δ = φ_new − mean), O(Dd). Nothing depends on the
//! chain length t, and a step allocates nothing.

use crate::Target;
use crate::adaptation::{RankOneUpdate, RunningMoments, Scale, add_scaled};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, check_dim, check_target_dim, ensure, ensure_room};
use faer::linalg::matmul::matmul;
use faer::{Accum, MatMut, MatRef, Par};
use kameleon_core::simd::{MAX_ACCUMULATORS, accumulators, reduce_accumulators};
use kameleon_features::FeatureMap;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The settings of [`FKamh`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FKamhConfig {
    /// The exploration noise γ > 0 (default 0.2, the KAMH papers' value).
    pub gamma: f64,
    /// The scale η, fixed or Robbins–Monro adapted (default fixed at 1).
    pub eta: Scale,
    /// The last step whose state updates C̃ (η keeps adapting as long as
    /// the engine adapts); `None` (the default): C̃ adapts as long as the
    /// engine does.
    pub freeze_covariance_after: Option<u64>,
}

impl Default for FKamhConfig {
    /// γ = 0.2, η fixed at 1, C̃ adapting with the engine.
    fn default() -> Self {
        Self {
            gamma: 0.2,
            eta: Scale::Fixed(1.0),
            freeze_covariance_after: None,
        }
    }
}

impl FKamhConfig {
    /// The settings for a target of unit scale in dimension `dim`, i.e. run
    /// in [`crate::Whitened`] coordinates (the Python package's defaults):
    /// γ = 2.38/√d (a random walk's optimal scale) and η learned from 1
    /// (with a feature map of length-scale about √(2d), the median distance
    /// of N(0, I) points). A `dim` of 0 is treated as 1.
    ///
    /// γ is larger than the papers' 0.2 because the kernel term alone
    /// proposes poorly in many dimensions: learned from the whitened
    /// history of one tuning period, J(y)ᵀC̃J(y) is a noisy shape in 26
    /// dimensions, η shrinks it to hold the acceptance, and the chain then
    /// moves by γ alone. On the posteriordb benchmark
    /// (`python/benchmarks/real_posteriors.py`, d = 3–26; medians of 3
    /// seeds) γ = 0.2 gave a minimum bulk ESS per 1000 evaluations of 1.9 on
    /// diamonds (d = 26; 200 or 400 features instead of 100 gave 1.5–2.8),
    /// a fixed γ = 0.5 gave 6.8 there, and 2.38/√d gives 1.1–1.8 times that
    /// fixed 0.5's on the seven posteriors either passes. On the 8-d banana
    /// B(0.1, 100) (4 × 25 000 steps, seeds 1–3) it accepts less, 0.08–0.14
    /// against 0.20–0.23, with quantile errors of the same size (mean 0.08–0.11
    /// sd against 0.08–0.13) and a minimum ESS of 11–62 against 11–94.
    pub fn scale_free(dim: usize) -> Self {
        Self {
            gamma: Scale::optimal_for(dim),
            eta: Scale::learned_from(1.0).expect("a valid constant"),
            ..Self::default()
        }
    }

    /// Sets γ (positive and finite).
    pub fn with_gamma(mut self, gamma: f64) -> Result<Self> {
        check_gamma(gamma)?;
        self.gamma = gamma;
        Ok(self)
    }

    /// Sets η (a fixed η must be positive and finite).
    pub fn with_eta(mut self, eta: Scale) -> Result<Self> {
        eta.validate("eta")?;
        self.eta = eta;
        Ok(self)
    }

    /// Stops updating C̃ after step `step`.
    pub fn with_freeze_covariance_after(mut self, step: u64) -> Self {
        self.freeze_covariance_after = Some(step);
        self
    }

    /// Checks γ and η.
    pub fn validate(&self) -> Result<()> {
        check_gamma(self.gamma)?;
        self.eta.validate("eta")
    }
}

fn check_gamma(gamma: f64) -> Result<()> {
    ensure(
        gamma > 0.0 && gamma.is_finite(),
        "gamma",
        "must be positive and finite",
    )
}

/// The F-KAMH proposal `N(y, γ²I + η² J(y)ᵀ C̃ J(y))` for any [`FeatureMap`]
/// (random Fourier features in either embedding, or Fastfood).
///
/// η is fixed or learned by Robbins–Monro ([`Scale`]); C̃ is updated with
/// every new state while the engine adapts (with the default
/// [`crate::RunConfig`] that is during burn-in, so C̃ is frozen after it; use
/// [`crate::AdaptationStop::Never`] for the thesis' ever-growing history), or
/// until [`FKamhConfig::freeze_covariance_after`].
///
/// ```
/// use kameleon_features::{Embedding, RandomFourierFeatures};
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::{
///     FKamh, FKamhConfig, FnTarget, RobbinsMonro, RunConfig, Scale, StepSchedule, run_chain,
/// };
/// use rand::SeedableRng;
///
/// let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
/// let phi = RandomFourierFeatures::new(&Gaussian::new(1.0)?, 2, 64, Embedding::CosPhase, &mut rng)?;
/// let eta = Scale::Adaptive(RobbinsMonro::new(1.0, 0.234, StepSchedule::Power { kappa: 0.7 })?);
/// let sampler = FKamh::new(phi, FKamhConfig::default().with_eta(eta)?)?;
/// let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
/// let chain = run_chain(&target, sampler, &[0.0, 0.0], RunConfig::new(500, 1000), 7)?;
/// assert_eq!(chain.len(), 1000);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FKamh<F> {
    features: F,
    dim: usize,
    gamma: f64,
    eta: Scale,
    freeze_after: Option<u64>,
    /// Welford moments of φ over the history (dimension D).
    moments: RunningMoments,
    /// J at the current state, D × d column-major.
    jacobian: Vec<f64>,
    /// J at the last proposal.
    jacobian_proposed: Vec<f64>,
    /// φ at the current state.
    embedding: Vec<f64>,
    /// JᵀSJ at the current state (d × d).
    form: Vec<f64>,
    /// J*ᵀSJ* at the last proposal.
    form_proposed: Vec<f64>,
    /// The buffers of J*ᵀSJ*.
    quadratic: QuadraticForm,
    /// Jᵀδ, length d.
    projection: Vec<f64>,
    /// Assembly buffer for a d × d covariance.
    assembled: Vec<f64>,
    /// The factor of R(x_t).
    current: ProposalCovariance,
    /// The factor of R(x*).
    proposed: ProposalCovariance,
    /// Whether `current` holds R(x_t) (false if its factorisation failed).
    current_valid: bool,
}

impl<F: FeatureMap> FKamh<F> {
    /// F-KAMH on the feature map `features` with the settings `config`
    /// (checked).
    pub fn new(features: F, config: FKamhConfig) -> Result<Self> {
        let dim = features.dim_in();
        let big = features.dim_out();
        ensure(dim >= 1, "features", "input dimension must be at least 1")?;
        ensure(big >= 1, "features", "output dimension must be at least 1")?;
        config.validate()?;
        ensure_room(
            "F-KAMH's feature covariance (D × D) and Jacobians (three D × d)",
            &[&[big, big], &[3, big, dim], &[8, dim, dim]],
        )?;
        Ok(Self {
            features,
            dim,
            gamma: config.gamma,
            eta: config.eta,
            freeze_after: config.freeze_covariance_after,
            moments: RunningMoments::lower_triangle(big),
            jacobian: vec![0.0; big * dim],
            jacobian_proposed: vec![0.0; big * dim],
            embedding: vec![0.0; big],
            form: vec![0.0; dim * dim],
            form_proposed: vec![0.0; dim * dim],
            quadratic: QuadraticForm::new(big, dim),
            projection: vec![0.0; dim],
            assembled: vec![0.0; dim * dim],
            current: ProposalCovariance::identity(dim),
            proposed: ProposalCovariance::identity(dim),
            current_valid: false,
        })
    }

    /// Adds a point to the history before the chain starts (e.g. the states
    /// of a random-walk pilot run, thesis Alg. 2 step 1). The chain's
    /// starting point is added by the engine when the chain starts.
    pub fn push_history(&mut self, x: &[f64]) -> Result<()> {
        self.check_point(x)?;
        ensure(x.iter().all(|v| v.is_finite()), "x", "must be finite")?;
        self.features.embed(x, &mut self.embedding);
        self.moments.push(&self.embedding);
        Ok(())
    }

    /// Errors unless `x` has the sampler's dimension.
    fn check_point(&self, x: &[f64]) -> Result<()> {
        check_dim(
            "the point's length",
            x.len(),
            "the sampler's dimension",
            self.dim,
        )
    }

    /// The feature map.
    pub fn features(&self) -> &F {
        &self.features
    }

    /// The exploration noise γ.
    pub fn gamma(&self) -> f64 {
        self.gamma
    }

    /// The current scale η.
    pub fn eta(&self) -> f64 {
        self.eta.value()
    }

    /// The number of states in the feature covariance.
    pub fn history_len(&self) -> u64 {
        self.moments.count()
    }

    /// The running moments of the features (mean and scatter S, C̃ = S/n).
    /// A copy (D × D): the sampler applies each step's rank-one update of S
    /// within its next pass over S, and the copy has it applied. For
    /// inspection and tests, not for the sampling loop.
    pub fn feature_moments(&self) -> RunningMoments {
        let mut moments = self.moments.clone();
        moments.settle();
        moments
    }

    /// The proposal covariance `R(x) = γ²I + η² J(x)ᵀ C̃ J(x)` at any `x`
    /// with the current C̃ and η (d × d, row-major). Allocates: for
    /// inspection and tests, not for the sampling loop.
    pub fn proposal_covariance_at(&self, x: &[f64]) -> Result<Vec<f64>> {
        self.check_point(x)?;
        let (big, d) = (self.features.dim_out(), self.dim);
        let mut jacobian = vec![0.0; big * d];
        jacobian_into(&self.features, x, &mut jacobian);
        let mut form = vec![0.0; d * d];
        let mut moments = self.moments.clone();
        QuadraticForm::new(big, d).compute(&mut moments, &jacobian, &mut form);
        let mut out = vec![0.0; d * d];
        self.assemble_into(&form, &mut out);
        Ok(out)
    }

    /// `out = γ²I + η² form / n` (the form is of the scatter S; n the history size).
    fn assemble_into(&self, form: &[f64], out: &mut [f64]) {
        let n = self.moments.count();
        let weight = if n == 0 {
            0.0
        } else {
            let eta = self.eta.value();
            eta * eta / n as f64
        };
        for (o, f) in out.iter_mut().zip(form) {
            *o = weight * f;
        }
        let gamma2 = self.gamma * self.gamma;
        for i in 0..self.dim {
            out[i * self.dim + i] += gamma2;
        }
    }

    /// Refactors R(x_t) from the cached form.
    fn refactor_current(&mut self) {
        let mut assembled = std::mem::take(&mut self.assembled);
        self.assemble_into(&self.form, &mut assembled);
        self.current_valid = self.current.factor(&assembled).is_ok();
        self.assembled = assembled;
    }

    /// Adds φ(x_t) (in `self.embedding`) to the history and updates the cached
    /// form `JᵀSJ` at x_t by the matching rank one; S's own rank-one update
    /// is left to the next [`QuadraticForm::compute`].
    fn push_current(&mut self) {
        let n = self.moments.count() as f64;
        let (big, d) = (self.features.dim_out(), self.dim);
        // projection = Jᵀ (φ − mean)
        let mean = self.moments.mean();
        self.projection.fill(0.0);
        for l in 0..d {
            let column = &self.jacobian[l * big..(l + 1) * big];
            self.projection[l] = column
                .iter()
                .zip(&self.embedding)
                .zip(mean)
                .map(|((j, p), m)| j * (p - m))
                .sum();
        }
        let weight = n / (n + 1.0);
        for a in 0..d {
            for b in 0..d {
                self.form[a * d + b] += weight * self.projection[a] * self.projection[b];
            }
        }
        self.moments.push_deferred(&self.embedding);
    }
}

/// Writes J(x) (D × d, column-major) into `out`. For random Fourier
/// features this is [`FeatureMap::jacobian`]'s tiled kernel, cheaper than
/// ψ′ from [`FeatureMap::argument_derivatives`] times a copy of Ω, which
/// computes the unused second derivatives too.
fn jacobian_into<F: FeatureMap>(features: &F, x: &[f64], out: &mut [f64]) {
    let (big, d) = (features.dim_out(), features.dim_in());
    features.jacobian(x, MatMut::from_column_major_slice_mut(out, big, d));
}

/// The d × d form `Jᵀ S J` (exactly symmetric) for S (D × D, symmetric,
/// given by its lower triangle in row-major storage as
/// [`RunningMoments::scatter`] holds it) and J (D × d, column-major), with
/// its buffers (allocated once). The pass over S first applies the
/// moments' pending rank-one update to each row (so S is read and written
/// once per step, not once for the update and once for the form).
///
/// With L the strict lower triangle of S, `P = (L + ½ diag S) J` (D × d) and
/// `X = Jᵀ P` (d × d, faer's product), `Jᵀ S J = X + Xᵀ`: the triangular
/// product costs half of the full `S J`, D²d/2 multiply-adds (see
/// [`HalfLowerProduct`]).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct QuadraticForm {
    big: usize,
    d: usize,
    /// P, D × d column-major.
    product: Vec<f64>,
    /// J repacked for [`HalfLowerProduct`]: per group of [`COLUMNS`]
    /// columns, per chunk of SIMD lanes of rows, the group's column chunks
    /// side by side; rows padded with zeros to a multiple of [`MAX_LANES`].
    packed: Vec<f64>,
}

impl QuadraticForm {
    fn new(big: usize, d: usize) -> Self {
        Self {
            big,
            d,
            product: vec![0.0; big * d],
            packed: vec![0.0; big.next_multiple_of(MAX_LANES) * d],
        }
    }

    /// Writes `Jᵀ S J` into `out` (d × d), S the moments' scatter after
    /// their pending update (which this applies).
    fn compute(&mut self, moments: &mut RunningMoments, jacobian: &[f64], out: &mut [f64]) {
        let (big, d) = (self.big, self.d);
        let (scatter, update) = moments.take_scatter();
        kameleon_core::simd::dispatch(HalfLowerProduct {
            scatter,
            update,
            jacobian,
            big,
            d,
            packed: &mut self.packed,
            product: &mut self.product,
        });
        let j = MatRef::from_column_major_slice(jacobian, big, d);
        let w = MatRef::from_column_major_slice(&self.product, big, d);
        let x = MatMut::from_column_major_slice_mut(out, d, d);
        matmul(x, Accum::Replace, j.transpose(), w, 1.0, Par::Seq);
        for a in 0..d {
            for b in a..d {
                let v = out[a * d + b] + out[b * d + a];
                out[a * d + b] = v;
                out[b * d + a] = v;
            }
        }
    }
}

/// `product = (L + ½ diag S) J` (D × d, column-major) for S given by its
/// lower triangle in row-major storage (L its strict lower triangle) and J
/// (D × d, column-major): entry (a, l) is the dot product of row a of L with
/// column l of J, plus `½ S_aa J_al`.
///
/// The columns of J are taken in groups of up to [`COLUMNS`]; for each group
/// one pass over the rows of S keeps one SIMD accumulator per column in
/// registers, so every S vector loaded feeds all the group's columns (for
/// d ≤ 8, S is read once) and each J vector is the memory operand of a
/// single fused multiply-add. J is first repacked (into `packed`, see
/// [`QuadraticForm`]) so that the C vectors a chunk of S meets are adjacent
/// and one slice index reaches them (no per-column bounds checks). The chunk
/// holding the diagonal is assembled in a small array (`S_ab` for b < a,
/// `½ S_aa`, then zeros) and the accumulators are reduced once per row.
/// With AVX2 a row's vectors alternate between two accumulator sets (one
/// pass over the row each; the row stays in L1), with AVX-512 one set holds
/// them all, so each of the 8 lanes of `kameleon_core::simd` adds the same
/// entries in the same order and the product has the same bits at both
/// widths.
struct HalfLowerProduct<'a> {
    scatter: &'a mut [f64],
    /// A rank-one update to apply to S's lower triangle first (see
    /// [`RunningMoments::take_scatter`]).
    update: Option<RankOneUpdate<'a>>,
    jacobian: &'a [f64],
    big: usize,
    d: usize,
    packed: &'a mut [f64],
    product: &'a mut [f64],
}

/// Columns of J accumulated per pass over S (one register each).
const COLUMNS: usize = 8;
/// The most f64 lanes of a SIMD vector (AVX-512).
const MAX_LANES: usize = 8;

impl pulp::WithSimd for HalfLowerProduct<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, simd: S) {
        let Self {
            scatter,
            mut update,
            jacobian,
            big,
            d,
            packed,
            product,
        } = self;
        let padded = big.next_multiple_of(S::F64_LANES);
        let mut first = 0;
        while first < d {
            let count = COLUMNS.min(d - first);
            let pass = ColumnGroup {
                scatter: &mut *scatter,
                // applied by the first group's pass
                update: update.take(),
                jacobian: &jacobian[first * big..(first + count) * big],
                big,
                packed: &mut packed[first * padded..(first + count) * padded],
                product: &mut product[first * big..(first + count) * big],
            };
            // the group size as a constant, so the accumulators live in registers
            match count {
                1 => pass.run::<S, 1>(simd),
                2 => pass.run::<S, 2>(simd),
                3 => pass.run::<S, 3>(simd),
                4 => pass.run::<S, 4>(simd),
                5 => pass.run::<S, 5>(simd),
                6 => pass.run::<S, 6>(simd),
                7 => pass.run::<S, 7>(simd),
                _ => pass.run::<S, COLUMNS>(simd),
            }
            first += count;
        }
    }
}

/// One group of C columns of a [`HalfLowerProduct`]: `jacobian` and
/// `product` hold the group's columns (D × C, column-major), `packed` room
/// for them repacked (D rounded up to the lanes, times C).
struct ColumnGroup<'a> {
    scatter: &'a mut [f64],
    update: Option<RankOneUpdate<'a>>,
    jacobian: &'a [f64],
    big: usize,
    packed: &'a mut [f64],
    product: &'a mut [f64],
}

impl ColumnGroup<'_> {
    #[inline(always)]
    fn run<S: pulp::Simd, const C: usize>(self, simd: S) {
        let Self {
            scatter,
            update,
            jacobian,
            big,
            packed,
            product,
        } = self;
        let lanes = S::F64_LANES;
        let parts = accumulators::<S>();
        // packed[(q·C + k)·lanes + i] = J[q·lanes + i, k], zero past row D
        // (one vector load and store each: a variable-length copy would be a
        // memcpy call per vector)
        let vectors = S::as_mut_simd_f64s(packed).0;
        for (q, block) in vectors.chunks_exact_mut(C).enumerate() {
            for (k, out) in block.iter_mut().enumerate() {
                let rows = &jacobian[k * big..(k + 1) * big];
                *out = simd.partial_load_f64s(&rows[q * lanes..big.min((q + 1) * lanes)]);
            }
        }
        let (chunks, _) = pulp::as_arrays::<C, _>(&*vectors);
        let zero = simd.splat_f64s(0.0);
        // diagonal_weights[p]: 1 in lanes < p, ½ in lane p, 0 above, so that
        // (row chunk) ∘ diagonal_weights[a − start] = (S_ab (b < a), ½ S_aa, 0…)
        let mut diagonal_weights = [zero; MAX_LANES];
        for (p, weights) in diagonal_weights[..lanes].iter_mut().enumerate() {
            let mut lanes_of = [0.0; MAX_LANES];
            lanes_of[..p].fill(1.0);
            lanes_of[p] = 0.5;
            *weights = simd.partial_load_f64s(&lanes_of[..lanes]);
        }
        let accumulate = |sums: &mut [S::f64s; C], s: S::f64s, js: &[S::f64s; C]| {
            for k in 0..C {
                sums[k] = simd.mul_add_f64s(s, js[k], sums[k]);
            }
        };
        for (a, row) in scatter.chunks_exact_mut(big).enumerate() {
            // whole vectors strictly below the diagonal's chunk
            let full = a / lanes;
            let start = full * lanes;
            let (below, diagonal) = row.split_at_mut(start);
            let below = S::as_mut_simd_f64s(below).0;
            // vector q of the row in accumulator set q mod `parts` (see
            // `kameleon_core::simd`), one pass over the row per set
            // (vector `part` of each group of `parts`, then the odd one out,
            // an even index: straight loops, which a strided iterator is not)
            let mut sums = [[zero; C]; MAX_ACCUMULATORS];
            let chunks_below = &chunks[..full];
            for (part, set) in sums.iter_mut().enumerate().take(parts) {
                let mut local = [zero; C];
                let mut groups = below.chunks_exact_mut(parts);
                let mut chunk_groups = chunks_below.chunks_exact(parts);
                match update {
                    Some(RankOneUpdate { left, right }) => {
                        // the pending update of the row, in the same pass: a
                        // multiply and an add per entry, as RunningMoments does
                        let scale = simd.splat_f64s(left[a]);
                        let mut right_groups =
                            S::as_simd_f64s(&right[..start]).0.chunks_exact(parts);
                        for ((s, js), r) in
                            (&mut groups).zip(&mut chunk_groups).zip(&mut right_groups)
                        {
                            let s = &mut s[part];
                            *s = simd.add_f64s(*s, simd.mul_f64s(scale, r[part]));
                            accumulate(&mut local, *s, &js[part]);
                        }
                        let rest = groups.into_remainder().first_mut();
                        let rest = (
                            rest,
                            chunk_groups.remainder().first(),
                            right_groups.remainder().first(),
                        );
                        if let (0, (Some(s), Some(js), Some(r))) = (part, rest) {
                            *s = simd.add_f64s(*s, simd.mul_f64s(scale, *r));
                            accumulate(&mut local, *s, js);
                        }
                    }
                    None => {
                        for (s, js) in (&mut groups).zip(&mut chunk_groups) {
                            accumulate(&mut local, s[part], &js[part]);
                        }
                        let rest = (
                            groups.into_remainder().first(),
                            chunk_groups.remainder().first(),
                        );
                        if let (0, (Some(s), Some(js))) = (part, rest) {
                            accumulate(&mut local, *s, js);
                        }
                    }
                }
                *set = local;
            }
            if let Some(RankOneUpdate { left, right }) = update {
                add_scaled(&mut diagonal[..=a - start], left[a], &right[start..=a]);
            }
            // the diagonal's chunk: S_ab for start ≤ b < a, ½ S_aa, then zeros
            let s = simd.mul_f64s(
                simd.partial_load_f64s(&diagonal[..=a - start]),
                diagonal_weights[a - start],
            );
            accumulate(&mut sums[full % parts], s, &chunks[full]);
            for k in 0..C {
                product[k * big + a] = reduce_accumulators(simd, [sums[0][k], sums[1][k]]);
            }
        }
    }
}

impl<F: FeatureMap> Proposal for FKamh<F> {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
        jacobian_into(&self.features, x, &mut self.jacobian);
        self.features.embed(x, &mut self.embedding);
        self.quadratic
            .compute(&mut self.moments, &self.jacobian, &mut self.form);
        // the start joins C̃'s history only if the first step adapts C̃:
        // a frozen kernel stays exactly as it was
        if adapts && self.freeze_after != Some(0) {
            self.push_current();
        }
        self.refactor_current();
        ensure(
            self.current_valid,
            "features",
            "the proposal covariance at the starting point is not finite",
        )
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        if !self.current_valid {
            proposed.copy_from_slice(current);
            return f64::NAN;
        }
        self.current.sample_into(current, 1.0, rng, proposed);
        if !proposed.iter().all(|v| v.is_finite()) {
            return f64::NAN;
        }
        jacobian_into(&self.features, proposed, &mut self.jacobian_proposed);
        self.quadratic.compute(
            &mut self.moments,
            &self.jacobian_proposed,
            &mut self.form_proposed,
        );
        let mut assembled = std::mem::take(&mut self.assembled);
        self.assemble_into(&self.form_proposed, &mut assembled);
        let ok = self.proposed.factor(&assembled).is_ok();
        self.assembled = assembled;
        if !ok {
            return f64::NAN;
        }
        let log_forward = self.current.log_density(proposed, current, 1.0);
        let log_reverse = self.proposed.log_density(current, proposed, 1.0);
        log_reverse - log_forward
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, _rng: &mut dyn Rng) {
        let mut changed = false;
        if outcome.accepted {
            // R(x*) was factored with this step's C̃ and η: it is R(x_{t+1}).
            std::mem::swap(&mut self.jacobian, &mut self.jacobian_proposed);
            std::mem::swap(&mut self.form, &mut self.form_proposed);
            std::mem::swap(&mut self.current, &mut self.proposed);
            self.current_valid = true;
            self.features.embed(outcome.current, &mut self.embedding);
        }
        if adapt {
            let before = self.eta.value();
            self.eta.update(outcome.accept_prob);
            changed |= self.eta.value() != before;
            if self.freeze_after.is_none_or(|n| outcome.iteration <= n) {
                self.push_current();
                changed = true;
            }
        }
        if changed || !self.current_valid {
            self.refactor_current();
        }
    }

    fn summary(&self) -> AdaptationSummary {
        AdaptationSummary {
            scale: Some(self.eta.value()),
            mean: None,
            covariance: None,
            extra: vec![
                ("gamma".to_string(), self.gamma),
                ("features".to_string(), self.features.dim_out() as f64),
                ("history".to_string(), self.moments.count() as f64),
            ],
        }
    }

    fn covariance_jitters(&self) -> u64 {
        self.current.jitters() + self.proposed.jitters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::FnTarget;
    use faer::Mat;
    use faer::linalg::solvers::DenseSolveCore;
    use kameleon_features::{Embedding, RandomFourierFeatures};
    use kameleon_kernels::Gaussian;
    use rand::{RngExt, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    /// γ and η, the rest default (unchecked: [`FKamh::new`] checks).
    fn config(gamma: f64, eta: Scale) -> FKamhConfig {
        FKamhConfig {
            gamma,
            eta,
            ..FKamhConfig::default()
        }
    }

    fn features(big: usize, d: usize, embedding: Embedding, seed: u64) -> RandomFourierFeatures {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        RandomFourierFeatures::new(&Gaussian::new(1.3).unwrap(), d, big, embedding, &mut rng)
            .unwrap()
    }

    fn points(n: usize, d: usize, seed: u64) -> Vec<Vec<f64>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        (0..n)
            .map(|_| {
                (0..d)
                    .map(|l| (l as f64 + 1.0) * (rng.random::<f64>() - 0.5))
                    .collect()
            })
            .collect()
    }

    /// R(y) = γ²I + η² Jᵀ C̃ J by brute force: C̃ two-pass over explicit
    /// embeddings (divisor n), J by central differences of `embed`.
    fn brute_force_covariance(
        phi: &RandomFourierFeatures,
        history: &[Vec<f64>],
        y: &[f64],
        gamma: f64,
        eta: f64,
    ) -> Mat<f64> {
        let (big, d, n) = (phi.dim_out(), phi.dim_in(), history.len());
        let embedded: Vec<Vec<f64>> = history
            .iter()
            .map(|x| {
                let mut e = vec![0.0; big];
                phi.embed(x, &mut e);
                e
            })
            .collect();
        let mean: Vec<f64> = (0..big)
            .map(|i| embedded.iter().map(|e| e[i]).sum::<f64>() / n as f64)
            .collect();
        let c = Mat::<f64>::from_fn(big, big, |i, j| {
            embedded
                .iter()
                .map(|e| (e[i] - mean[i]) * (e[j] - mean[j]))
                .sum::<f64>()
                / n as f64
        });
        let h = 1e-6;
        let jac = Mat::<f64>::from_fn(big, d, |i, l| {
            let (mut plus, mut minus) = (y.to_vec(), y.to_vec());
            plus[l] += h;
            minus[l] -= h;
            let (mut ep, mut em) = (vec![0.0; big], vec![0.0; big]);
            phi.embed(&plus, &mut ep);
            phi.embed(&minus, &mut em);
            (ep[i] - em[i]) / (2.0 * h)
        });
        let mut r = jac.transpose() * &c * &jac * faer::Scale(eta * eta);
        for i in 0..d {
            r[(i, i)] += gamma * gamma;
        }
        r
    }

    fn mvn_log_density(x: &[f64], mean: &[f64], cov: &Mat<f64>) -> f64 {
        let d = x.len();
        let inv = cov.partial_piv_lu().inverse();
        let v: Vec<f64> = x.iter().zip(mean).map(|(a, b)| a - b).collect();
        let maha: f64 = (0..d)
            .map(|i| (0..d).map(|j| v[i] * inv[(i, j)] * v[j]).sum::<f64>())
            .sum();
        -0.5 * maha
            - 0.5 * cov.determinant().ln()
            - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln()
    }

    #[test]
    fn proposal_covariance_and_hastings_correction_match_brute_force() {
        let (d, gamma, eta) = (3, 0.3, 2.5);
        for embedding in [Embedding::CosPhase, Embedding::SinCos] {
            let phi = features(40, d, embedding, 1);
            let mut sampler =
                FKamh::new(phi.clone(), config(gamma, Scale::fixed(eta).unwrap())).unwrap();
            let mut history = points(60, d, 2);
            for x in &history {
                sampler.push_history(x).unwrap();
            }
            let target = FnTarget::new(d, |x: &[f64]| -0.5 * x.iter().map(|v| v * v).sum::<f64>());
            let x0 = vec![0.2, -0.4, 0.5];
            sampler.initialise(&target, &x0, true).unwrap();
            history.push(x0.clone());
            // the covariance at an arbitrary point
            let y = [0.7, 0.1, -0.9];
            let r = sampler.proposal_covariance_at(&y).unwrap();
            let expected = brute_force_covariance(&phi, &history, &y, gamma, eta);
            for a in 0..d {
                for b in 0..d {
                    let e = expected[(a, b)];
                    assert!((r[a * d + b] - e).abs() < 1e-6 * e.abs().max(1.0), "{a}{b}");
                }
            }
            // the correction log q(x|x*) − log q(x*|x), both with this C̃
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
            let mut x_star = vec![0.0; d];
            for _ in 0..5 {
                let correction = sampler.propose(&target, &x0, &mut x_star, &mut rng);
                let forward = mvn_log_density(
                    &x_star,
                    &x0,
                    &brute_force_covariance(&phi, &history, &x0, gamma, eta),
                );
                let reverse = mvn_log_density(
                    &x0,
                    &x_star,
                    &brute_force_covariance(&phi, &history, &x_star, gamma, eta),
                );
                assert!(
                    (correction - (reverse - forward)).abs() < 1e-6,
                    "{correction} vs {}",
                    reverse - forward
                );
            }
        }
    }

    /// `Jᵀ S J` from the lower triangle equals the plain triple product of
    /// the full symmetric S, for sizes covering partial SIMD chunks (D not a
    /// multiple of the lanes, D below one vector) and column groups (d = 8,
    /// one full group; d = 11, a full and a partial one). With the last
    /// point's update of S pending, the pass applies it: S afterwards equals
    /// the settled S bit for bit, and so does the form.
    #[test]
    fn quadratic_form_matches_the_full_triple_product() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
        for big in [1, 3, 4, 5, 17, 40] {
            for d in [1, 3, 8, 11] {
                let mut settled = RunningMoments::lower_triangle(big);
                let mut deferred = RunningMoments::lower_triangle(big);
                for _ in 0..6 {
                    let x: Vec<f64> = (0..big).map(|_| rng.random::<f64>() - 0.5).collect();
                    settled.push(&x);
                    deferred.push_deferred(&x);
                }
                let scatter = settled.scatter();
                let symmetric =
                    Mat::<f64>::from_fn(big, big, |a, b| scatter[a.max(b) * big + a.min(b)]);
                let jacobian: Vec<f64> = (0..big * d).map(|_| rng.random::<f64>() - 0.5).collect();
                let j = MatRef::from_column_major_slice(&jacobian, big, d);
                let expected = j.transpose() * &symmetric * j;
                let mut form = vec![0.0; d * d];
                QuadraticForm::new(big, d).compute(&mut settled, &jacobian, &mut form);
                let scale = expected.norm_max();
                for a in 0..d {
                    for b in 0..d {
                        let e = expected[(a, b)];
                        assert!(
                            (form[a * d + b] - e).abs() < 1e-13 * (big as f64) * scale,
                            "D = {big}, d = {d}, ({a}, {b}): {} vs {e}",
                            form[a * d + b]
                        );
                    }
                }
                let mut fused = vec![0.0; d * d];
                QuadraticForm::new(big, d).compute(&mut deferred, &jacobian, &mut fused);
                assert_eq!(deferred.scatter(), settled.scatter(), "D = {big}, d = {d}");
                assert_eq!(fused, form, "D = {big}, d = {d}");
            }
        }
    }

    #[test]
    fn cached_form_follows_the_history_exactly() {
        // after many steps (accepts, rejects, Welford updates, η changes) the
        // cached JᵀSJ at the current state equals a fresh computation
        let d = 2;
        let phi = features(30, d, Embedding::CosPhase, 5);
        let eta = Scale::Adaptive(
            crate::RobbinsMonro::new(1.0, 0.234, crate::StepSchedule::InverseSqrt).unwrap(),
        );
        let sampler = FKamh::new(phi, config(0.5, eta)).unwrap();
        let target = FnTarget::new(d, |x: &[f64]| -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1]));
        let mut mh = crate::MetropolisHastings::new(
            &target,
            sampler,
            &[0.0, 0.0],
            Xoshiro256PlusPlus::seed_from_u64(6),
            None,
        )
        .unwrap();
        let mut accepted = 0;
        for _ in 0..300 {
            accepted += mh.step(&target).accepted as usize;
        }
        assert!(accepted > 10 && accepted < 290);
        let p = mh.proposal();
        assert_eq!(p.history_len(), 301);
        let fresh = p.proposal_covariance_at(mh.position()).unwrap();
        let mut cached = vec![0.0; d * d];
        p.assemble_into(&p.form, &mut cached);
        for (a, b) in fresh.iter().zip(&cached) {
            assert!((a - b).abs() < 1e-10 * a.abs().max(1.0), "{a} vs {b}");
        }
    }

    #[test]
    fn constructor_validates_and_freezing_stops_the_history() {
        let phi = features(8, 2, Embedding::SinCos, 7);
        let fixed = Scale::fixed(1.0).unwrap();
        assert!(FKamhConfig::default().with_gamma(0.0).is_err());
        assert!(FKamh::new(phi.clone(), config(0.0, fixed.clone())).is_err());
        assert!(FKamh::new(phi.clone(), config(f64::NAN, fixed.clone())).is_err());
        let mut s = FKamh::new(phi.clone(), config(0.1, fixed.clone())).unwrap();
        assert!(s.push_history(&[1.0]).is_err());
        assert!(s.push_history(&[1.0, f64::INFINITY]).is_err());
        let target = FnTarget::new(3, |_: &[f64]| 0.0);
        assert!(s.initialise(&target, &[0.0, 0.0, 0.0], true).is_err());
        let sampler = FKamh::new(phi, config(0.5, fixed).with_freeze_covariance_after(10)).unwrap();
        let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
        let chain = crate::run_chain(
            &target,
            sampler,
            &[0.0, 0.0],
            crate::RunConfig::new(0, 50).adaptation(crate::AdaptationStop::Never),
            1,
        )
        .unwrap();
        let history = chain
            .adaptation
            .extra
            .iter()
            .find(|(k, _)| k == "history")
            .unwrap()
            .1;
        assert_eq!(history, 11.0); // x0 and the states after steps 1..=10
    }
}
