//! Small adaptation parts shared by every adaptive sampler: step-size
//! schedules, Robbins–Monro scale adaptation, adaptation-probability
//! schedules, Welford running moments and the chain history with subsampling
//! without replacement.

use crate::error::{Result, ensure};
use kameleon_core::PrefetchedWords;
use rand::distr::uniform::{UniformSampler, UniformUsize};
use rand::{Rng, RngExt};
use serde::{Deserialize, Serialize};

/// A step-size sequence γ_t, t = 1, 2, … (Σγ_t = ∞ for all of them). The
/// first three decrease (vanishing adaptation); [`StepSchedule::Constant`]
/// does not — an exponentially weighted average whose adaptation never
/// vanishes, as the cKAM paper's AM and RBAM baselines use it (Tables 1–3).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum StepSchedule {
    /// γ_t = 1/√t.
    InverseSqrt,
    /// γ_t = 1/(t − t₀) with t₀ < 1 (t₀ = 0 gives 1/t).
    Harmonic {
        /// The offset t₀.
        t0: f64,
    },
    /// γ_t = t^−κ with κ ∈ (0, 1].
    Power {
        /// The exponent κ.
        kappa: f64,
    },
    /// γ_t = γ for every t, with γ ∈ (0, 1]: not a vanishing schedule, so a
    /// sampler adapting with it at every step has no ergodicity guarantee
    /// (stop adaptation after a burn-in).
    Constant {
        /// The step γ.
        gamma: f64,
    },
}

impl StepSchedule {
    /// Checks the schedule's parameter.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::InverseSqrt => Ok(()),
            Self::Harmonic { t0 } => {
                ensure(t0.is_finite() && t0 < 1.0, "t0", "must be finite and < 1")
            }
            Self::Power { kappa } => {
                ensure(kappa > 0.0 && kappa <= 1.0, "kappa", "must lie in (0, 1]")
            }
            Self::Constant { gamma } => {
                ensure(gamma > 0.0 && gamma <= 1.0, "gamma", "must lie in (0, 1]")
            }
        }
    }

    /// γ_t for t ≥ 1.
    pub fn step(&self, t: u64) -> f64 {
        let t = t.max(1) as f64;
        match *self {
            Self::InverseSqrt => t.sqrt().recip(),
            Self::Harmonic { t0 } => (t - t0).recip(),
            Self::Power { kappa } => t.powf(-kappa),
            Self::Constant { gamma } => gamma,
        }
    }
}

/// Robbins–Monro adaptation of a log scale toward a target acceptance rate:
/// log ν_{t+1} = log ν_t + γ_{t+1} (α_t − α*), with α_t = min(1, ratio).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RobbinsMonro {
    log_scale: f64,
    target_rate: f64,
    schedule: StepSchedule,
    updates: u64,
    /// Bounds on ν, if any: each update is clamped into them.
    #[serde(default)]
    bounds: Option<(f64, f64)>,
}

impl RobbinsMonro {
    /// Starts at scale `initial_scale` > 0, aiming at `target_rate` ∈ (0, 1).
    pub fn new(initial_scale: f64, target_rate: f64, schedule: StepSchedule) -> Result<Self> {
        ensure(
            initial_scale > 0.0 && initial_scale.is_finite(),
            "initial_scale",
            "must be positive and finite",
        )?;
        ensure(
            target_rate > 0.0 && target_rate < 1.0,
            "target_rate",
            "must lie in (0, 1)",
        )?;
        schedule.validate()?;
        Ok(Self {
            log_scale: initial_scale.ln(),
            target_rate,
            schedule,
            updates: 0,
            bounds: None,
        })
    }

    /// The same adaptation with ν kept in [lo, hi] (0 < lo ≤ initial scale
    /// ≤ hi < ∞). Without bounds a run of rejections early on (e.g. KMC's
    /// first surrogate fits) can drive ν so low that the way back, at the
    /// slower pace 1 − α* per accepted step, outlasts the adaptation.
    pub fn with_bounds(mut self, lo: f64, hi: f64) -> Result<Self> {
        let scale = self.scale();
        ensure(
            lo > 0.0 && lo <= scale && scale <= hi && hi.is_finite(),
            "bounds",
            "need 0 < lo ≤ initial scale ≤ hi < ∞",
        )?;
        self.bounds = Some((lo.ln(), hi.ln()));
        Ok(self)
    }

    /// One update with the acceptance probability `accept_prob` ∈ [0, 1]
    /// (the clipped min(1, ratio), or the 0/1 accept indicator).
    pub fn update(&mut self, accept_prob: f64) {
        debug_assert!((0.0..=1.0).contains(&accept_prob));
        self.updates += 1;
        self.log_scale += self.schedule.step(self.updates) * (accept_prob - self.target_rate);
        if let Some((lo, hi)) = self.bounds {
            self.log_scale = self.log_scale.clamp(lo, hi);
        }
    }

    /// The current scale ν.
    pub fn scale(&self) -> f64 {
        self.log_scale.exp()
    }

    /// The current log scale.
    pub fn log_scale(&self) -> f64 {
        self.log_scale
    }

    /// How many updates have been made.
    pub fn updates(&self) -> u64 {
        self.updates
    }
}

/// The probability p_t of adapting at step t (vanishing adaptation:
/// p_t → 0 with Σ p_t = ∞ keeps the chain ergodic).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum AdaptProbability {
    /// p_t = 1.
    Always,
    /// p_t = min(1, t^−κ), κ ∈ (0, 1].
    Power {
        /// The exponent κ.
        kappa: f64,
    },
}

impl AdaptProbability {
    /// Checks the schedule's parameter.
    pub fn validate(&self) -> Result<()> {
        match *self {
            Self::Always => Ok(()),
            Self::Power { kappa } => {
                ensure(kappa > 0.0 && kappa <= 1.0, "kappa", "must lie in (0, 1]")
            }
        }
    }

    /// p_t for t ≥ 1.
    pub fn probability(&self, t: u64) -> f64 {
        match *self {
            Self::Always => 1.0,
            Self::Power { kappa } => (t.max(1) as f64).powf(-kappa).min(1.0),
        }
    }

    /// Decides whether to adapt at step t; draws a uniform only when p_t < 1.
    pub fn decide<R: Rng + ?Sized>(&self, t: u64, rng: &mut R) -> bool {
        let p = self.probability(t);
        p >= 1.0 || rng.random::<f64>() < p
    }
}

/// Welford's running mean and covariance of a stream of points (exact sample
/// covariance with divisor n − 1; numerically stable; O(d²) per point).
///
/// The scatter matrix is accumulated in one vectorised pass per point, in
/// full ([`RunningMoments::new`]) or only its lower triangle
/// ([`RunningMoments::lower_triangle`], for a consumer that uses the
/// symmetry: F-KAMH pushes a D-dimensional feature vector every step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningMoments {
    n: u64,
    mean: Vec<f64>,
    /// Σ (x − mean_old)(x − mean_new)ᵀ accumulated, d × d row-major (only
    /// its lower triangle if `lower`; the strict upper triangle stays zero).
    m2: Vec<f64>,
    lower: bool,
    /// x − mean_old of the last point.
    delta: Vec<f64>,
    /// x − mean_new of the last point.
    centred: Vec<f64>,
    /// Whether the last point's rank-one update of `m2` is still to be
    /// applied (see [`RunningMoments::push_deferred`]).
    #[serde(default)]
    pending: bool,
}

impl RunningMoments {
    /// Empty moments of dimension `dim`, accumulating the full scatter
    /// matrix.
    pub fn new(dim: usize) -> Self {
        Self {
            n: 0,
            mean: vec![0.0; dim],
            m2: vec![0.0; dim * dim],
            lower: false,
            delta: vec![0.0; dim],
            centred: vec![0.0; dim],
            pending: false,
        }
    }

    /// Empty moments of dimension `dim` accumulating only the lower triangle
    /// of the scatter matrix (half the work per point; see
    /// [`RunningMoments::scatter`]).
    pub fn lower_triangle(dim: usize) -> Self {
        Self {
            lower: true,
            ..Self::new(dim)
        }
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// The number of points seen.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// Adds one point (allocation-free).
    pub fn push(&mut self, x: &[f64]) {
        self.push_deferred(x);
        self.settle();
    }

    /// Adds one point to the count and the mean but leaves its rank-one
    /// update of the scatter pending, for a consumer that applies it in its
    /// own next pass over the scatter ([`RunningMoments::take_scatter`]):
    /// F-KAMH reads the whole D × D triangle every step anyway, so the
    /// update costs no pass of its own. Any other access settles it first.
    pub(crate) fn push_deferred(&mut self, x: &[f64]) {
        debug_assert_eq!(x.len(), self.dim());
        self.settle();
        self.n += 1;
        let inv_n = 1.0 / self.n as f64;
        for (((m, d), c), xi) in self
            .mean
            .iter_mut()
            .zip(&mut self.delta)
            .zip(&mut self.centred)
            .zip(x)
        {
            *d = xi - *m;
            *m += *d * inv_n;
            *c = xi - *m;
        }
        self.pending = true;
    }

    /// Applies a pending rank-one update of the scatter, if any.
    pub(crate) fn settle(&mut self) {
        if std::mem::take(&mut self.pending) {
            kameleon_core::simd::dispatch(RankOne {
                m2: &mut self.m2,
                left: &self.delta,
                right: &self.centred,
                lower: self.lower,
            });
        }
    }

    /// The scatter for writing, with the pending rank-one update that the
    /// caller must now apply to it (lower triangle only, for
    /// [`RunningMoments::lower_triangle`]); `None` if nothing is pending.
    pub(crate) fn take_scatter(&mut self) -> (&mut [f64], Option<RankOneUpdate<'_>>) {
        let pending = std::mem::take(&mut self.pending);
        let update = pending.then_some(RankOneUpdate {
            left: &self.delta,
            right: &self.centred,
        });
        (&mut self.m2, update)
    }

    /// The running mean (zeros before the first point).
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// The scatter matrix S = Σ (x_i − x̄)(x_i − x̄)ᵀ (d × d, row-major; the
    /// covariance is S/(n − 1), or S/n for the maximum-likelihood form):
    /// symmetric up to round-off, or for [`RunningMoments::lower_triangle`]
    /// only its lower triangle (row i holds S_i0 … S_ii, the strict upper
    /// triangle is zero). A view, for callers that need the matrix every
    /// step without copying it.
    pub fn scatter(&self) -> &[f64] {
        debug_assert!(!self.pending, "the scatter has a pending update");
        &self.m2
    }

    /// Writes the sample covariance (divisor n − 1; zeros while n < 2) into
    /// `out` (d × d, symmetric).
    pub fn covariance_into(&self, out: &mut [f64]) {
        debug_assert_eq!(out.len(), self.m2.len());
        debug_assert!(!self.pending, "the scatter has a pending update");
        let d = self.dim();
        let scale = if self.n >= 2 {
            1.0 / (self.n - 1) as f64
        } else {
            0.0
        };
        for i in 0..d {
            for j in 0..d {
                let (r, c) = if self.lower && j > i { (j, i) } else { (i, j) };
                out[i * d + j] = self.m2[r * d + c] * scale;
            }
        }
    }
}

/// `m2 += left · rightᵀ` on the row-major m2 (its lower triangle only if
/// `lower`), as a [`pulp::WithSimd`] operation (each row's update
/// vectorises; no FMA contraction, so the values do not depend on the CPU).
struct RankOne<'a> {
    m2: &'a mut [f64],
    left: &'a [f64],
    right: &'a [f64],
    lower: bool,
}

impl pulp::WithSimd for RankOne<'_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        let Self {
            m2,
            left,
            right,
            lower,
        } = self;
        let d = left.len();
        for (i, (row, li)) in m2.chunks_exact_mut(d.max(1)).zip(left).enumerate() {
            let end = if lower { i + 1 } else { d };
            add_scaled(&mut row[..end], *li, &right[..end]);
        }
    }
}

/// A pending rank-one update of a [`RunningMoments`] scatter: row i gets
/// `left_i · right` added (see [`add_scaled`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RankOneUpdate<'a> {
    /// The row factors (x − mean before the point).
    pub(crate) left: &'a [f64],
    /// The common row (x − mean after the point).
    pub(crate) right: &'a [f64],
}

/// `row += scale · right`, one row of a [`RunningMoments`] rank-one update:
/// a multiply and an add per entry (no FMA contraction, so the values do not
/// depend on the CPU); vectorises when inlined into a [`pulp::WithSimd`]
/// operation.
#[inline(always)]
pub(crate) fn add_scaled(row: &mut [f64], scale: f64, right: &[f64]) {
    for (m, r) in row.iter_mut().zip(right) {
        *m += scale * r;
    }
}

/// Words drawn ahead per block by [`History::subsample_into`].
const WORDS_AHEAD: usize = 64;

/// f64 values per 64-byte cache line.
const LINE_VALUES: usize = 8;

/// A growable run of `f64` values whose first value starts a 64-byte cache
/// line: the values are `buffer[start..]`, behind at most 7 values of
/// padding chosen from the buffer's address (realigned at every growth and
/// clone). With d = 8 every point of a [`History`] then occupies one cache
/// line instead of straddling two, which halves the lines a random gather
/// touches. Serialised as the plain sequence of values.
#[derive(Debug, Default)]
struct AlignedValues {
    buffer: Vec<f64>,
    start: usize,
}

impl AlignedValues {
    /// Empty, with room for `capacity` values without reallocation.
    fn with_capacity(capacity: usize) -> Self {
        let mut buffer = Vec::with_capacity(capacity + LINE_VALUES - 1);
        let misalignment = (buffer.as_ptr() as usize % (8 * LINE_VALUES)) / 8;
        let start = (LINE_VALUES - misalignment) % LINE_VALUES;
        buffer.resize(start, 0.0);
        Self { buffer, start }
    }

    /// An aligned copy of `values`.
    fn from_slice(values: &[f64]) -> Self {
        let mut aligned = Self::with_capacity(values.len());
        aligned.buffer.extend_from_slice(values);
        aligned
    }

    fn values(&self) -> &[f64] {
        &self.buffer[self.start..]
    }

    fn values_mut(&mut self) -> &mut [f64] {
        &mut self.buffer[self.start..]
    }

    /// Appends `x` (amortised O(len x): the capacity doubles, into a newly
    /// aligned buffer).
    fn extend(&mut self, x: &[f64]) {
        if self.buffer.len() + x.len() > self.buffer.capacity() {
            let len = self.buffer.len() - self.start;
            let mut grown = Self::with_capacity((len + x.len()).max(2 * len).max(64));
            grown.buffer.extend_from_slice(self.values());
            *self = grown;
        }
        self.buffer.extend_from_slice(x);
    }

    /// Moves the values out (unpadded), leaving this empty.
    fn take(&mut self) -> Vec<f64> {
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.drain(..std::mem::take(&mut self.start));
        buffer
    }
}

impl Clone for AlignedValues {
    fn clone(&self) -> Self {
        Self::from_slice(self.values())
    }
}

impl PartialEq for AlignedValues {
    fn eq(&self, other: &Self) -> bool {
        self.values() == other.values()
    }
}

impl Serialize for AlignedValues {
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        self.values().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for AlignedValues {
    fn deserialize<D: serde::Deserializer<'de>>(
        deserializer: D,
    ) -> std::result::Result<Self, D::Error> {
        Vec::<f64>::deserialize(deserializer).map(|values| Self::from_slice(&values))
    }
}

/// The chain history (the samples themselves, n × d row-major, starting at
/// a cache-line boundary) with allocation-free subsampling without
/// replacement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct History {
    dim: usize,
    points: AlignedValues,
    /// A permutation of 0..len, partially shuffled by each subsample.
    order: Vec<usize>,
}

impl History {
    /// An empty history of points of dimension `dim`.
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            points: AlignedValues::default(),
            order: Vec::new(),
        }
    }

    /// An empty history with room for `capacity` points (no reallocation
    /// until then).
    pub fn with_capacity(dim: usize, capacity: usize) -> Self {
        Self {
            dim,
            points: AlignedValues::with_capacity(dim * capacity),
            order: Vec::with_capacity(capacity),
        }
    }

    /// The dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of stored points.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// Whether no point is stored.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// Appends a point (amortised O(d)).
    pub fn push(&mut self, x: &[f64]) {
        debug_assert_eq!(x.len(), self.dim);
        self.order.push(self.order.len());
        self.points.extend(x);
    }

    /// The i-th stored point.
    pub fn point(&self, i: usize) -> &[f64] {
        &self.points.values()[i * self.dim..(i + 1) * self.dim]
    }

    /// All points, n × d row-major.
    pub fn points(&self) -> &[f64] {
        self.points.values()
    }

    /// All points, n × d row-major, to rewrite in place (e.g. into new
    /// coordinates); the order of the rows and the subsampling state stay.
    pub fn points_mut(&mut self) -> &mut [f64] {
        self.points.values_mut()
    }

    /// Moves all points out (n × d row-major, in the order pushed), leaving
    /// the history empty.
    pub fn take_points(&mut self) -> Vec<f64> {
        self.order.clear();
        self.points.take()
    }

    /// Draws `m = out.len() / dim` distinct points uniformly without
    /// replacement (a uniformly random m-subset in uniformly random order)
    /// into `out`, by a partial Fisher–Yates shuffle of the index permutation:
    /// O(m d), no allocation. Errors if m exceeds the history length, or if
    /// the points have dimension 0.
    ///
    /// The indices are `rng.random_range(i..n)` for i = 0, 1, …, m − 1, and
    /// `rng` is left as those draws leave it, for the generators of
    /// [`PrefetchedWords`] (such as the samplers' `Xoshiro256PlusPlus`): the
    /// words are drawn from `rng` in blocks ahead of the draws.
    pub fn subsample_into<R: Rng + ?Sized>(&mut self, rng: &mut R, out: &mut [f64]) -> Result<()> {
        ensure(
            self.dim >= 1,
            "dim",
            "a history of points of dimension 0 has no subsamples",
        )?;
        ensure(
            out.len().is_multiple_of(self.dim),
            "out",
            "length must be a multiple of the dimension",
        )?;
        let m = out.len() / self.dim;
        let n = self.len();
        ensure(
            m <= n,
            "subsample size",
            "must not exceed the history length",
        )?;
        shuffle_front(&mut self.order, m, rng);
        // the gather apart from the draws: its loads are independent, so
        // the cache misses of a long history overlap
        let args = (self.points.values(), &self.order[..m], out, self.dim);
        match self.dim {
            1 => kameleon_core::simd::dispatch(Gather::<1>(args)),
            2 => kameleon_core::simd::dispatch(Gather::<2>(args)),
            3 => kameleon_core::simd::dispatch(Gather::<3>(args)),
            4 => kameleon_core::simd::dispatch(Gather::<4>(args)),
            5 => kameleon_core::simd::dispatch(Gather::<5>(args)),
            6 => kameleon_core::simd::dispatch(Gather::<6>(args)),
            7 => kameleon_core::simd::dispatch(Gather::<7>(args)),
            8 => kameleon_core::simd::dispatch(Gather::<8>(args)),
            9 => kameleon_core::simd::dispatch(Gather::<9>(args)),
            10 => kameleon_core::simd::dispatch(Gather::<10>(args)),
            _ => kameleon_core::simd::dispatch(Gather::<0>(args)),
        }
        Ok(())
    }
}

/// The partial Fisher–Yates shuffle of [`History::subsample_into`]: swaps
/// `order[i]` with `order[rng.random_range(i..n)]` for i = 0, 1, …, m − 1
/// (m ≤ n = `order.len()`). The indices come from blocks of words drawn
/// ahead, so that rand's sampling inlines (not one dynamic call per draw
/// through a `dyn Rng`); each draw takes at least one word, so `count`
/// draws use up a block of `count`. Kept out of line: inlined into a large
/// caller, rand's sampling was not inlined into it.
#[inline(never)]
fn shuffle_front<R: Rng + ?Sized>(order: &mut [usize], m: usize, rng: &mut R) {
    let n = order.len();
    let mut buffer = [0; WORDS_AHEAD];
    let mut i = 0;
    while i < m {
        let count = (m - i).min(WORDS_AHEAD);
        let mut words = PrefetchedWords::new(&mut *rng, &mut buffer[..count]);
        for i in i..i + count {
            // what `words.random_range(i..n)` returns (i < n), inlined
            let j = UniformUsize::sample_single(i, n, &mut words).unwrap_or(i);
            order.swap(i, j);
        }
        i += count;
    }
}

/// [`gather`] as a [`pulp::WithSimd`] operation: compiled for the CPU's
/// vector width, a row of d = 8 values is two 256-bit moves (four with the
/// baseline's 128-bit ones).
struct Gather<'a, const DIM: usize>((&'a [f64], &'a [usize], &'a mut [f64], usize));

impl<const DIM: usize> pulp::WithSimd for Gather<'_, DIM> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        gather::<DIM>(self.0);
    }
}

/// Copies the rows `indices` of the n × d row-major `points` in turn into
/// `out`: with d = DIM > 0 each row as a fixed-size array (a few vector
/// moves), otherwise as slices of the runtime dimension `dim`.
#[inline(always)]
fn gather<const DIM: usize>((points, indices, out, dim): (&[f64], &[usize], &mut [f64], usize)) {
    if DIM > 0 {
        let (rows, _) = points.as_chunks::<DIM>();
        let (out, _) = out.as_chunks_mut::<DIM>();
        for (row, &p) in out.iter_mut().zip(indices) {
            *row = rows[p];
        }
    } else {
        for (row, &p) in out.chunks_exact_mut(dim).zip(indices) {
            row.copy_from_slice(&points[p * dim..(p + 1) * dim]);
        }
    }
}

/// A proposal's global scale ν: fixed, or learned by [`RobbinsMonro`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Scale {
    /// A fixed ν.
    Fixed(f64),
    /// ν adapted toward a target acceptance rate.
    Adaptive(RobbinsMonro),
}

impl Scale {
    /// A fixed scale ν > 0.
    pub fn fixed(scale: f64) -> Result<Self> {
        ensure(
            scale > 0.0 && scale.is_finite(),
            "scale",
            "must be positive and finite",
        )?;
        Ok(Self::Fixed(scale))
    }

    /// Checks the scale as the parameter `name`: a fixed ν must be positive
    /// and finite (a zero ν would never move the chain yet accept every
    /// step); an adaptive one was checked by [`RobbinsMonro::new`] and is
    /// checked again here.
    pub fn validate(&self, name: &'static str) -> Result<()> {
        let value = self.value();
        if value > 0.0 && value.is_finite() {
            Ok(())
        } else {
            Err(crate::SamplerError::InvalidParameter {
                name,
                reason: format!("must be positive and finite, got {value}"),
            })
        }
    }

    /// ν learned by Robbins–Monro toward acceptance 0.234 with steps 1/√t
    /// from `initial` (> 0, finite).
    pub fn learned_from(initial: f64) -> Result<Self> {
        Ok(Self::Adaptive(RobbinsMonro::new(
            initial,
            0.234,
            StepSchedule::InverseSqrt,
        )?))
    }

    /// The Gelman–Roberts–Gilks scale 2.38/√d.
    pub fn optimal_for(dim: usize) -> f64 {
        2.38 / (dim.max(1) as f64).sqrt()
    }

    /// The current ν.
    pub fn value(&self) -> f64 {
        match self {
            Self::Fixed(s) => *s,
            Self::Adaptive(rm) => rm.scale(),
        }
    }

    /// Feeds an acceptance probability to the Robbins–Monro update (no-op
    /// for a fixed scale).
    pub fn update(&mut self, accept_prob: f64) {
        if let Self::Adaptive(rm) = self {
            rm.update(accept_prob);
        }
    }
}

/// Stochastic-approximation estimates of the mean and covariance
/// (Andrieu & Thoms 2008, Alg. 3 and 4):
/// μ ← μ + γ Σ_k w_k (x_k − μ),  Σ ← Σ + γ (Σ_k w_k (x_k − μ)(x_k − μ)ᵀ − Σ),
/// with weights w_k summing to one and μ the value before the update.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StochasticMoments {
    mean: Vec<f64>,
    /// d × d row-major.
    cov: Vec<f64>,
    delta: Vec<f64>,
}

impl StochasticMoments {
    /// Starts at the given mean and covariance (d × d row-major).
    pub fn new(mean: Vec<f64>, cov: Vec<f64>) -> Result<Self> {
        let d = mean.len();
        crate::error::check_dim(
            "the covariance's length",
            cov.len(),
            "the mean's length squared",
            d * d,
        )?;
        Ok(Self {
            mean,
            cov,
            delta: vec![0.0; d],
        })
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.mean.len()
    }

    /// The current mean.
    pub fn mean(&self) -> &[f64] {
        &self.mean
    }

    /// Overwrites the mean (e.g. with the chain's start point).
    pub fn set_mean(&mut self, mean: &[f64]) {
        self.mean.copy_from_slice(mean);
    }

    /// The current covariance, d × d row-major.
    pub fn covariance(&self) -> &[f64] {
        &self.cov
    }

    /// One update with step `gamma` ∈ (0, 1] from the weighted points
    /// `(x_k, w_k)` (weights summing to one; points of weight 0 are skipped,
    /// so a non-finite rejected proposal may be passed with weight 0; allocation-free).
    pub fn update(&mut self, gamma: f64, points: &[(&[f64], f64)]) {
        let d = self.dim();
        for v in self.cov.iter_mut() {
            *v *= 1.0 - gamma;
        }
        for &(x, w) in points.iter().filter(|p| p.1 != 0.0) {
            for i in 0..d {
                self.delta[i] = x[i] - self.mean[i];
            }
            let gw = gamma * w;
            for i in 0..d {
                let di = gw * self.delta[i];
                let row = &mut self.cov[i * d..(i + 1) * d];
                for j in 0..d {
                    row[j] += di * self.delta[j];
                }
            }
        }
        // with Σ w_k = 1: μ_new = (1 − γ) μ + γ Σ_k w_k x_k
        for m in self.mean.iter_mut() {
            *m *= 1.0 - gamma;
        }
        for &(x, w) in points.iter().filter(|p| p.1 != 0.0) {
            for i in 0..d {
                self.mean[i] += gamma * w * x[i];
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_xoshiro::Xoshiro256PlusPlus;

    #[test]
    fn schedules_follow_their_closed_forms_and_reject_bad_parameters() {
        assert_eq!(StepSchedule::InverseSqrt.step(16), 0.25);
        assert_eq!(StepSchedule::Harmonic { t0: -1.0 }.step(3), 0.25);
        assert!((StepSchedule::Power { kappa: 0.6 }.step(10) - 10f64.powf(-0.6)).abs() < 1e-15);
        assert!(StepSchedule::Harmonic { t0: 1.0 }.validate().is_err());
        // a step 1/(t − t0) of zero would freeze the adaptation
        assert!(
            StepSchedule::Harmonic {
                t0: f64::NEG_INFINITY
            }
            .validate()
            .is_err()
        );
        assert!(StepSchedule::Harmonic { t0: f64::NAN }.validate().is_err());
        assert!(StepSchedule::Power { kappa: 1.5 }.validate().is_err());
        let constant = StepSchedule::Constant { gamma: 0.1 };
        assert!(constant.validate().is_ok());
        assert_eq!((constant.step(1), constant.step(1_000_000)), (0.1, 0.1));
        for bad in [0.0, -0.1, 1.5, f64::NAN] {
            assert!(StepSchedule::Constant { gamma: bad }.validate().is_err());
        }
        assert!(AdaptProbability::Power { kappa: 0.0 }.validate().is_err());
        assert_eq!(AdaptProbability::Power { kappa: 0.5 }.probability(4), 0.5);
        assert!(RobbinsMonro::new(0.0, 0.2, StepSchedule::InverseSqrt).is_err());
        assert!(RobbinsMonro::new(1.0, 1.0, StepSchedule::InverseSqrt).is_err());
    }

    #[test]
    fn robbins_monro_moves_the_log_scale_by_the_step_times_the_error() {
        let mut rm = RobbinsMonro::new(2.0, 0.25, StepSchedule::InverseSqrt).unwrap();
        rm.update(0.25);
        assert_eq!(rm.scale(), 2.0);
        rm.update(1.0); // t = 2: γ = 1/√2
        assert!((rm.log_scale() - (2f64.ln() + 0.75 / 2f64.sqrt())).abs() < 1e-15);
        // a stream whose acceptance depends on the scale: α(ν) = exp(−ν);
        // the fixed point is ν = −ln 0.25 = ln 4
        let mut rm = RobbinsMonro::new(0.1, 0.25, StepSchedule::Power { kappa: 0.7 }).unwrap();
        for _ in 0..20_000 {
            let a = (-rm.scale()).exp();
            rm.update(a);
        }
        assert!((rm.scale() - 4f64.ln()).abs() < 1e-2, "{}", rm.scale());
    }

    #[test]
    fn adapt_probability_frequency_matches_p_t() {
        // count of adaptations at t = 100 over R draws ~ Binomial(R, 0.1):
        // within 5 standard deviations
        let schedule = AdaptProbability::Power { kappa: 0.5 };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let r = 20_000;
        let hits = (0..r).filter(|_| schedule.decide(100, &mut rng)).count() as f64;
        let sd = (r as f64 * 0.1 * 0.9).sqrt();
        assert!((hits - 0.1 * r as f64).abs() < 5.0 * sd);
        assert!(AdaptProbability::Always.decide(1_000_000, &mut rng));
    }

    #[test]
    fn welford_matches_the_two_pass_formulas() {
        let d = 3;
        let pts: Vec<f64> = (0..60)
            .map(|k| ((k * 37 % 17) as f64).sin() * 1e3 + 1e6)
            .collect();
        let n = pts.len() / d;
        let mut rm = RunningMoments::new(d);
        for i in 0..n {
            rm.push(&pts[i * d..(i + 1) * d]);
        }
        let mean: Vec<f64> = (0..d)
            .map(|j| (0..n).map(|i| pts[i * d + j]).sum::<f64>() / n as f64)
            .collect();
        let mut cov = vec![0.0; d * d];
        rm.covariance_into(&mut cov);
        for a in 0..d {
            assert!((rm.mean()[a] - mean[a]).abs() < 1e-9);
            for b in 0..d {
                let two_pass = (0..n)
                    .map(|i| (pts[i * d + a] - mean[a]) * (pts[i * d + b] - mean[b]))
                    .sum::<f64>()
                    / (n - 1) as f64;
                assert!((cov[a * d + b] - two_pass).abs() < 1e-9 * two_pass.abs().max(1.0));
            }
        }
        // the lower-triangle form gives the same covariance and the same
        // lower triangle of S, with a zero strict upper triangle
        let mut lower = RunningMoments::lower_triangle(d);
        for i in 0..n {
            lower.push(&pts[i * d..(i + 1) * d]);
        }
        let mut cov_lower = vec![0.0; d * d];
        lower.covariance_into(&mut cov_lower);
        for a in 0..d {
            for b in 0..d {
                assert!(
                    (cov_lower[a * d + b] - cov[a * d + b]).abs() < 1e-9 * cov[a * d + b].abs()
                );
                if b <= a {
                    assert_eq!(lower.scatter()[a * d + b], rm.scatter()[a * d + b]);
                } else {
                    assert_eq!(lower.scatter()[a * d + b], 0.0);
                }
            }
        }
        let mut one = RunningMoments::new(2);
        one.push(&[1.0, 2.0]);
        let mut c = vec![1.0; 4];
        one.covariance_into(&mut c);
        assert_eq!(c, vec![0.0; 4]);
    }

    #[test]
    fn subsampling_is_without_replacement_and_uniform() {
        // each point is included with probability m/n; over R draws the count
        // is Binomial(R, m/n): within 5 standard deviations
        let (n, m, r) = (20usize, 5usize, 20_000usize);
        let mut h = History::new(1);
        for i in 0..n {
            h.push(&[i as f64]);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let mut out = vec![0.0; m];
        let mut counts = vec![0usize; n];
        for _ in 0..r {
            h.subsample_into(&mut rng, &mut out).unwrap();
            let mut seen = out.clone();
            seen.sort_by(f64::total_cmp);
            seen.dedup();
            assert_eq!(seen.len(), m);
            out.iter().for_each(|&v| counts[v as usize] += 1);
        }
        let p = m as f64 / n as f64;
        let sd = (r as f64 * p * (1.0 - p)).sqrt();
        for c in counts {
            assert!((c as f64 - r as f64 * p).abs() < 5.0 * sd);
        }
        let mut too_many = vec![0.0; n + 1];
        assert!(h.subsample_into(&mut rng, &mut too_many).is_err());
    }

    /// Counts the words a generator hands out.
    struct Counting<'a> {
        rng: &'a mut Xoshiro256PlusPlus,
        words: usize,
    }

    impl rand::TryRng for Counting<'_> {
        type Error = std::convert::Infallible;
        fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
            self.words += 1;
            Ok(self.rng.next_u32())
        }
        fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
            self.words += 1;
            Ok(self.rng.next_u64())
        }
        fn try_fill_bytes(&mut self, dst: &mut [u8]) -> std::result::Result<(), Self::Error> {
            self.words += dst.len().div_ceil(8);
            self.rng.fill_bytes(dst);
            Ok(())
        }
    }

    /// The subsample is the partial Fisher–Yates shuffle by direct
    /// `random_range(i..n)` draws, and the generator ends where those draws
    /// leave it. In a history of 10⁶ points about one draw in 4000 takes a
    /// second word (rand's multiply-and-reject step, with probability
    /// ≈ n / 2³²), so the 50 000 draws include some (counted), in and at the
    /// ends of the blocks of words drawn ahead.
    #[test]
    fn subsample_draws_are_the_direct_draws() {
        let (n, m) = (1_000_000usize, 50_000usize);
        let mut h = History::new(1);
        for i in 0..n {
            h.push(&[i as f64]);
        }
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(21);
        let mut direct = rng.clone();
        let mut out = vec![0.0; m];
        h.subsample_into(&mut rng, &mut out).unwrap();
        let mut order: Vec<usize> = (0..n).collect();
        let mut counting = Counting {
            rng: &mut direct,
            words: 0,
        };
        for i in 0..m {
            let j = counting.random_range(i..n);
            order.swap(i, j);
        }
        assert!(counting.words > m, "no draw took a second word");
        assert!(out.iter().zip(&order).all(|(&v, &i)| v == i as f64));
        assert_eq!(rng, direct);
    }

    /// Each subsample row is the whole history row its index names, for
    /// the fixed-size gathers (d ≤ 10) and the slice one (d > 10).
    #[test]
    fn subsample_rows_are_whole_history_rows() {
        let n = 50;
        for d in [1, 3, 8, 10, 11, 14] {
            let mut h = History::new(d);
            for i in 0..n {
                let x: Vec<f64> = (0..d).map(|l| (i * d + l) as f64).collect();
                h.push(&x);
            }
            let mut out = vec![f64::NAN; 20 * d];
            h.subsample_into(&mut Xoshiro256PlusPlus::seed_from_u64(d as u64), &mut out)
                .unwrap();
            let mut firsts: Vec<usize> = out.chunks_exact(d).map(|r| r[0] as usize).collect();
            for row in out.chunks_exact(d) {
                let first = row[0] as usize;
                assert!(first.is_multiple_of(d) && first / d < n, "d = {d}");
                assert!(
                    row.iter()
                        .enumerate()
                        .all(|(l, &v)| v == (first + l) as f64)
                );
            }
            firsts.sort_unstable();
            firsts.dedup();
            assert_eq!(firsts.len(), 20, "d = {d}");
        }
    }

    fn starts_a_cache_line(h: &History) -> bool {
        (h.points().as_ptr() as usize).is_multiple_of(64)
    }

    /// A history of 0-dimensional points (which `History::new(0)` allows)
    /// has no subsamples: an error, not a panic of the gather.
    #[test]
    fn subsampling_points_of_dimension_zero_is_an_error() {
        let mut h = History::new(0);
        h.push(&[]);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for len in [0, 1] {
            let mut out = vec![0.0; len];
            assert!(matches!(
                h.subsample_into(&mut rng, &mut out),
                Err(crate::SamplerError::InvalidParameter { name: "dim", .. })
            ));
        }
    }

    /// The points start a cache line through every growth, clone, take and
    /// serde round trip, and serialise exactly as a plain vector would.
    #[test]
    fn history_points_stay_aligned_and_serialise_plainly() {
        #[derive(Serialize)]
        struct Plain {
            dim: usize,
            points: Vec<f64>,
            order: Vec<usize>,
        }
        for mut h in [History::new(8), History::with_capacity(3, 5)] {
            let d = h.dim();
            for i in 0..1000 {
                let x: Vec<f64> = (0..d).map(|l| (i * d + l) as f64).collect();
                h.push(&x);
                assert!(starts_a_cache_line(&h), "after {} points", i + 1);
                assert_eq!(h.point(i), &x[..]);
            }
            let copy = h.clone();
            assert!(starts_a_cache_line(&copy));
            assert_eq!(copy, h);
            let bytes = postcard::to_stdvec(&h).unwrap();
            let plain = Plain {
                dim: d,
                points: h.points().to_vec(),
                order: (0..1000).collect(),
            };
            assert_eq!(bytes, postcard::to_stdvec(&plain).unwrap());
            let back: History = postcard::from_bytes(&bytes).unwrap();
            assert!(starts_a_cache_line(&back));
            assert_eq!(back, h);
            let points = h.take_points();
            assert_eq!(points.len(), 1000 * d);
            assert!(points.iter().enumerate().all(|(k, &v)| v == k as f64));
            assert!(h.is_empty() && h.points().is_empty());
            h.push(&vec![1.0; d]);
            assert!(starts_a_cache_line(&h));
        }
    }
}
