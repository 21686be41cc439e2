//! Kernel adaptive Metropolis–Hastings (KAMH, "MCMC Kameleon", Sejdinovic et
//! al. 2014) and the subsample adaptation it shares with PCA-Kameleon.

use crate::Target;
use crate::adaptation::{AdaptProbability, History, Scale, StepSchedule};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, check_dim, check_target_dim, ensure, ensure_room};
use crate::kamh_covariance::{KamhCovariance, combine_into};
use faer::MatRef;
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Linear, Matern, MedianHeuristic, Polynomial,
    RationalQuadratic,
};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// A kernel whose length-scale ℓ can be replaced, which is what the median
/// heuristic needs. Kernels without a length-scale (linear, polynomial)
/// return `None` and can only be used with [`Bandwidth::Fixed`].
pub trait LengthScale: Kernel + Sized {
    /// The same kernel with length-scale `length_scale` (> 0, finite), or
    /// `None` if the kernel has no length-scale.
    fn with_length_scale(&self, length_scale: f64) -> Option<Self>;
}

impl LengthScale for Gaussian {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        Gaussian::new(length_scale).ok()
    }
}

impl LengthScale for Laplacian {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        Laplacian::new(length_scale).ok()
    }
}

impl LengthScale for Matern {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        Matern::new(self.nu(), length_scale).ok()
    }
}

impl LengthScale for RationalQuadratic {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        RationalQuadratic::new(length_scale, self.alpha()).ok()
    }
}

impl LengthScale for InverseMultiquadric {
    fn with_length_scale(&self, length_scale: f64) -> Option<Self> {
        InverseMultiquadric::with_exponent(length_scale, self.beta()).ok()
    }
}

/// No length-scale: [`Bandwidth::Fixed`] only.
impl LengthScale for Linear {
    fn with_length_scale(&self, _length_scale: f64) -> Option<Self> {
        None
    }
}

/// No length-scale: [`Bandwidth::Fixed`] only.
impl LengthScale for Polynomial {
    fn with_length_scale(&self, _length_scale: f64) -> Option<Self> {
        None
    }
}

/// How the kernel's bandwidth is chosen.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Bandwidth {
    /// Keep the kernel as given.
    Fixed,
    /// Set ℓ to the median pairwise distance of each new subsample (over at
    /// most `max_points` of its points; the KAMH paper's choice). If the
    /// median is zero (a history of repeated states), the previous ℓ is kept.
    MedianHeuristic {
        /// The most subsample points the median is computed over (≥ 2; the
        /// cost is O(max_points² d) per refresh).
        max_points: usize,
    },
}

/// When the subsample z is redrawn from the chain history (only while the
/// engine's adaptation is on; it is frozen afterwards).
///
/// The KAMH paper's experiments ("adaptation stops after burn-in") are
/// `Refresh::Probability(AdaptProbability::Always)` with
/// [`crate::AdaptationStop::AfterBurnIn`]: z is redrawn every burn-in step
/// and frozen for the recorded chain.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Refresh {
    /// Redraw with probability p_t at step t (vanishing adaptation:
    /// p_t → 0, Σ p_t = ∞).
    Probability(AdaptProbability),
    /// Redraw at every step t ≤ `stop`, then never.
    EveryStepUntil(u64),
    /// Never redraw once a subsample exists (an oracle subsample given with
    /// [`Kamh::set_subsample`], or the first one drawn from the history).
    Never,
}

impl Refresh {
    fn validate(&self) -> Result<()> {
        match self {
            Self::Probability(p) => p.validate(),
            Self::EveryStepUntil(_) | Self::Never => Ok(()),
        }
    }

    fn decide<R: Rng + ?Sized>(&self, t: u64, rng: &mut R) -> bool {
        match self {
            Self::Probability(p) => p.decide(t, rng),
            Self::EveryStepUntil(stop) => t <= *stop,
            Self::Never => false,
        }
    }
}

/// The isotropic part γ of the proposal: fixed, or decaying with the number
/// of subsample refreshes k as γ_k = floor + (initial − floor)·s_k for a
/// step schedule s (so the learned covariance progressively dominates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum Gamma {
    /// A fixed γ (the paper: 0.2).
    Fixed(f64),
    /// γ_k = floor + (initial − floor)·schedule.step(k), k ≥ 1 the refresh count.
    Decaying {
        /// γ before and at the first refresh.
        initial: f64,
        /// The limit of γ (> 0, keeps the covariance regular).
        floor: f64,
        /// The decay schedule s_k.
        schedule: StepSchedule,
    },
}

impl Gamma {
    fn validate(&self) -> Result<()> {
        let positive = |v: f64| v > 0.0 && v.is_finite();
        match *self {
            Self::Fixed(g) => ensure(positive(g), "gamma", "must be positive and finite"),
            Self::Decaying {
                initial,
                floor,
                schedule,
            } => {
                ensure(
                    positive(initial) && positive(floor) && floor <= initial,
                    "gamma",
                    "needs 0 < floor ≤ initial, both finite",
                )?;
                schedule.validate()
            }
        }
    }

    /// γ after `refreshes` subsample refreshes.
    pub fn value(&self, refreshes: u64) -> f64 {
        match *self {
            Self::Fixed(g) => g,
            Self::Decaying {
                initial,
                floor,
                schedule,
            } => floor + (initial - floor) * schedule.step(refreshes),
        }
    }
}

/// The subsample part of a KAMH-type configuration (shared by [`KamhConfig`]
/// and [`crate::PcaKameleonConfig`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SubsampleConfig {
    /// The subsample size n ≥ 2. The kernel proposal starts once the
    /// history holds n states; until then the chain is the random walk
    /// N(x, `warmup_scale`²I).
    pub subsample_size: usize,
    /// The isotropic part γ of the proposal.
    pub gamma: Gamma,
    /// When z is redrawn.
    pub refresh: Refresh,
    /// How the kernel's bandwidth is chosen.
    pub bandwidth: Bandwidth,
    /// The standard deviation of the initial random walk.
    pub warmup_scale: f64,
}

impl Default for SubsampleConfig {
    /// [`SubsampleConfig::paper`] with n = 1000, the median taken over 100
    /// of the subsample's points.
    fn default() -> Self {
        Self {
            bandwidth: Bandwidth::MedianHeuristic { max_points: 100 },
            ..Self::paper(1000)
        }
    }
}

impl SubsampleConfig {
    /// The settings for a target of unit scale in dimension `dim`, i.e. run
    /// in [`crate::Whitened`] coordinates (the Python package's defaults):
    /// n = 200 redrawn at every adapting step, the median heuristic over 100
    /// of its points, γ = 2.38/√d (a random walk's optimal scale) and an
    /// initial random walk of the same standard deviation 2.38/√d — lengths
    /// in standard deviations. A `dim` of 0 is treated as 1.
    ///
    /// The initial random walk runs until the history holds n states, and
    /// on after adaptation stops if it never did: with the papers' 0.2 it
    /// accepted 91 % and gave a bulk ESS of 23–26 from 2 × 5000 draws of a
    /// 2-d standard normal after 300 tuning steps.
    ///
    /// Why γ scales with d: wherever the kernel term says little (far from
    /// the subsample, or along directions it does not span) the chain moves
    /// by γ alone, and ν's adaptation can only shrink the kernel term to
    /// reach its acceptance rate. On the posteriordb benchmark
    /// (`python/benchmarks/real_posteriors.py`, d = 3–26; medians of 3
    /// seeds) KAMH's minimum bulk ESS per 1000 evaluations is 1.4–2.1 times
    /// that with the paper's γ = 0.2 on the seven posteriors either passes,
    /// and diamonds (d = 26) passes in 3 seeds of 3 instead of 2. On the
    /// 8-d banana B(0.1, 100) (4 × 25 000 steps, seeds 1–3) it accepts less
    /// (0.09–0.13 against 0.27–0.30) with quantile errors of the same size
    /// and a minimum ESS of 12–48 against 16–22.
    pub fn scale_free(dim: usize) -> Self {
        Self {
            subsample_size: 200,
            gamma: Gamma::Fixed(Scale::optimal_for(dim)),
            refresh: Refresh::Probability(AdaptProbability::Always),
            bandwidth: Bandwidth::MedianHeuristic { max_points: 100 },
            warmup_scale: Scale::optimal_for(dim),
        }
    }

    /// The KAMH paper's settings for subsample size n: γ = 0.2, z redrawn
    /// at every adapting step (frozen when adaptation stops), median
    /// heuristic over the whole subsample, initial random walk with
    /// standard deviation γ (as the public code's empty-subsample proposal).
    ///
    /// The median over all n points costs O(n²d) at every adapting step and
    /// dominates it at n = 1000; `Bandwidth::MedianHeuristic { max_points:
    /// 100 }` (the Python package's default and the experiments' setting)
    /// takes the median over 100 of the subsample's points instead.
    pub fn paper(subsample_size: usize) -> Self {
        Self {
            subsample_size,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Probability(AdaptProbability::Always),
            bandwidth: Bandwidth::MedianHeuristic {
                max_points: subsample_size,
            },
            warmup_scale: 0.2,
        }
    }

    /// Sets the subsample size n (≥ 2).
    pub fn with_subsample_size(mut self, subsample_size: usize) -> Result<Self> {
        check_subsample_size(subsample_size)?;
        self.subsample_size = subsample_size;
        Ok(self)
    }

    /// Sets γ (fixed or decaying; positive and finite).
    pub fn with_gamma(mut self, gamma: Gamma) -> Result<Self> {
        gamma.validate()?;
        self.gamma = gamma;
        Ok(self)
    }

    /// Sets when z is redrawn.
    pub fn with_refresh(mut self, refresh: Refresh) -> Result<Self> {
        refresh.validate()?;
        self.refresh = refresh;
        Ok(self)
    }

    /// Sets how the bandwidth is chosen.
    pub fn with_bandwidth(mut self, bandwidth: Bandwidth) -> Result<Self> {
        check_bandwidth(bandwidth)?;
        self.bandwidth = bandwidth;
        Ok(self)
    }

    /// Sets the standard deviation of the initial random walk (positive and
    /// finite).
    pub fn with_warmup_scale(mut self, warmup_scale: f64) -> Result<Self> {
        check_warmup_scale(warmup_scale)?;
        self.warmup_scale = warmup_scale;
        Ok(self)
    }

    /// Checks every setting.
    pub fn validate(&self) -> Result<()> {
        check_subsample_size(self.subsample_size)?;
        self.refresh.validate()?;
        self.gamma.validate()?;
        check_warmup_scale(self.warmup_scale)?;
        check_bandwidth(self.bandwidth)
    }
}

fn check_subsample_size(subsample_size: usize) -> Result<()> {
    ensure(subsample_size >= 2, "subsample_size", "must be at least 2")
}

fn check_warmup_scale(warmup_scale: f64) -> Result<()> {
    ensure(
        warmup_scale > 0.0 && warmup_scale.is_finite(),
        "warmup_scale",
        "must be positive and finite",
    )
}

pub(crate) fn check_bandwidth(bandwidth: Bandwidth) -> Result<()> {
    if let Bandwidth::MedianHeuristic { max_points } = bandwidth {
        ensure(max_points >= 2, "max_points", "must be at least 2")?;
    }
    Ok(())
}

/// The configuration of [`Kamh`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KamhConfig {
    /// Subsample, refresh, bandwidth, γ and the initial random walk.
    pub subsample: SubsampleConfig,
    /// The scale ν of the kernel term (ν² multiplies M H Mᵀ): fixed, or
    /// Robbins–Monro adapted on log ν toward an acceptance rate.
    pub scale: Scale,
}

impl KamhConfig {
    /// The largest ν the scale-free settings learn, as a multiple of the
    /// ν they start from ([`KamhConfig::scale_free_scale`]).
    ///
    /// In whitened coordinates, from √0.1 ≈ 0.32, ν settles at 0.2–0.9 on
    /// standard normals, at 0.001 or less to 0.8 on bananas B(0.1, 100) and
    /// at 10⁻⁴–1 on most Student t targets with 3 degrees of freedom (5 000
    /// tuning steps, seeds 1–5, d = 2–50; the largest value over whole runs
    /// on the normals and bananas: 1.5). On a heavy-tailed target it can
    /// also run away: a chain that wanders into
    /// the tail accepts almost every step there, Robbins–Monro raises ν,
    /// the larger kernel term carries the chain further out, and so on. On
    /// the Student t with 3 degrees of freedom in d = 10, 26 and 50 (seeds
    /// 1–5 each) ν reached 10²–10¹⁰ in 5 of 15 runs, and the kept chains went
    /// as far as 2·10²–1.4·10⁶ from the centre (the median distance under
    /// the target is 3.4, 5.7 and 7.9 at d = 10, 26 and 50); kept below 10
    /// times its start, the largest distance of the 1 000 states after
    /// adaptation is 5–28 in 14 of the 15 runs and 63 in one at d = 26 (a
    /// distance the target exceeds with probability 7·10⁻⁴), and the
    /// Gaussian and banana runs are unchanged (the bound never binds
    /// there), as are KAMH's 24 runs of the real-posterior suite.
    pub const SCALE_FREE_MAX_SCALE_FACTOR: f64 = 10.0;

    /// The settings for a target of unit scale in dimension `dim`, i.e. run
    /// in [`crate::Whitened`] coordinates (the Python package's defaults):
    /// [`SubsampleConfig::scale_free`] and ν learned as in
    /// [`KamhConfig::paper`] but kept below
    /// [`KamhConfig::SCALE_FREE_MAX_SCALE_FACTOR`] times its start
    /// ([`KamhConfig::scale_free_scale`] from √0.1).
    pub fn scale_free(dim: usize) -> Self {
        Self {
            subsample: SubsampleConfig::scale_free(dim),
            scale: Self::scale_free_scale(0.1f64.sqrt()).expect("a valid constant"),
        }
    }

    /// ν of the scale-free settings from `initial` (positive and finite):
    /// learned toward acceptance 0.234 with steps 1/√t and kept below
    /// [`KamhConfig::SCALE_FREE_MAX_SCALE_FACTOR`] · `initial`, without a
    /// lower bound (a vanishing ν only turns the kernel term off).
    pub fn scale_free_scale(initial: f64) -> Result<Scale> {
        let learned = crate::RobbinsMonro::new(initial, 0.234, StepSchedule::InverseSqrt)?;
        let max = Self::SCALE_FREE_MAX_SCALE_FACTOR * initial;
        ensure(
            max.is_finite(),
            "scale",
            "must be small enough that 10 times it is finite",
        )?;
        Ok(Scale::Adaptive(
            learned.with_bounds(f64::MIN_POSITIVE, max)?,
        ))
    }

    /// KAMH-LS as in the paper: [`SubsampleConfig::paper`], and ν adapted by
    /// Robbins–Monro toward 0.234 with steps 1/√t from ν² = 0.1 (the public
    /// code's initial value), using the acceptance probability min(1, ratio).
    pub fn paper(subsample_size: usize) -> Result<Self> {
        Ok(Self {
            subsample: SubsampleConfig::paper(subsample_size),
            scale: Scale::Adaptive(crate::RobbinsMonro::new(
                0.1f64.sqrt(),
                0.234,
                StepSchedule::InverseSqrt,
            )?),
        })
    }

    /// Sets the subsample part (checked).
    pub fn with_subsample(mut self, subsample: SubsampleConfig) -> Result<Self> {
        subsample.validate()?;
        self.subsample = subsample;
        Ok(self)
    }

    /// Sets ν (a fixed ν must be positive and finite).
    pub fn with_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("scale")?;
        self.scale = scale;
        Ok(self)
    }
}

impl Default for KamhConfig {
    /// [`SubsampleConfig::default`] (the paper's settings at n = 1000, the
    /// median over 100 points) and ν learned as in [`KamhConfig::paper`].
    fn default() -> Self {
        let paper = Self::paper(1000).expect("the paper's constants are valid");
        Self {
            subsample: SubsampleConfig::default(),
            ..paper
        }
    }
}

/// The subsample adaptation shared by KAMH and PCA-Kameleon: the chain
/// history, the current subsample z and kernel, the refresh schedule, the
/// bandwidth rule, γ and the initial random-walk phase.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct SubsampleAdaptation<K> {
    pub(crate) dim: usize,
    pub(crate) kernel: K,
    config: SubsampleConfig,
    history: History,
    /// z, n × d row-major (meaningful once `has_subsample`).
    subsample: Vec<f64>,
    /// The same z column-major (each coordinate of the n points contiguous:
    /// the layout of the fused kernel term, see [`KamhCovariance`]).
    columns: Vec<f64>,
    has_subsample: bool,
    refreshes: u64,
    median_failures: u64,
    /// The median heuristic's buffers (reused at every refresh).
    #[serde(skip)]
    median: MedianHeuristic,
}

impl<K: LengthScale> SubsampleAdaptation<K> {
    pub(crate) fn new(dim: usize, kernel: K, config: SubsampleConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        config.validate()?;
        // the subsample and its columns here, the covariance builder's
        // gradient (n × d) beside them
        ensure_room(
            "the kernel proposal's subsample (three n × d buffers)",
            &[&[3, config.subsample_size, dim]],
        )?;
        if matches!(config.bandwidth, Bandwidth::MedianHeuristic { .. }) {
            ensure(
                kernel.with_length_scale(1.0).is_some(),
                "bandwidth",
                "the median heuristic needs a kernel with a length-scale",
            )?;
        }
        Ok(Self {
            dim,
            kernel,
            config,
            history: History::new(dim),
            subsample: vec![0.0; dim * config.subsample_size],
            columns: vec![0.0; dim * config.subsample_size],
            has_subsample: false,
            refreshes: 0,
            median_failures: 0,
            median: MedianHeuristic::new(),
        })
    }

    /// The subsample size n.
    pub(crate) fn subsample_size(&self) -> usize {
        self.config.subsample_size
    }

    /// Whether the kernel proposal is on (a subsample exists).
    pub(crate) fn active(&self) -> bool {
        self.has_subsample
    }

    /// z as an n × d view.
    pub(crate) fn z(&self) -> MatRef<'_, f64> {
        MatRef::from_row_major_slice(&self.subsample, self.subsample_size(), self.dim)
    }

    /// z as an n × d column-major view (the same matrix as [`Self::z`]).
    pub(crate) fn z_columns(&self) -> MatRef<'_, f64> {
        MatRef::from_column_major_slice(&self.columns, self.subsample_size(), self.dim)
    }

    /// Copies the row-major z into its column-major copy (O(nd), at each
    /// change of z).
    fn transpose_subsample(&mut self) {
        let args = (&self.subsample[..], &mut self.columns[..], self.dim);
        match self.dim {
            1 => kameleon_core::simd::dispatch(Transpose::<1>(args)),
            2 => kameleon_core::simd::dispatch(Transpose::<2>(args)),
            3 => kameleon_core::simd::dispatch(Transpose::<3>(args)),
            4 => kameleon_core::simd::dispatch(Transpose::<4>(args)),
            5 => kameleon_core::simd::dispatch(Transpose::<5>(args)),
            6 => kameleon_core::simd::dispatch(Transpose::<6>(args)),
            7 => kameleon_core::simd::dispatch(Transpose::<7>(args)),
            8 => kameleon_core::simd::dispatch(Transpose::<8>(args)),
            9 => kameleon_core::simd::dispatch(Transpose::<9>(args)),
            10 => kameleon_core::simd::dispatch(Transpose::<10>(args)),
            _ => kameleon_core::simd::dispatch(Transpose::<0>(args)),
        }
    }

    /// The i-th subsample point.
    pub(crate) fn point(&self, i: usize) -> &[f64] {
        &self.subsample[i * self.dim..(i + 1) * self.dim]
    }

    /// The standard deviation of the initial random walk.
    pub(crate) fn warmup_scale(&self) -> f64 {
        self.config.warmup_scale
    }

    /// The current γ.
    pub(crate) fn gamma(&self) -> f64 {
        self.config.gamma.value(self.refreshes)
    }

    /// The random-walk step of the initial phase: x* = x + w ξ (symmetric).
    pub(crate) fn warmup_step(&self, current: &[f64], proposed: &mut [f64], rng: &mut dyn Rng) {
        for (p, c) in proposed.iter_mut().zip(current) {
            *p = c + self.config.warmup_scale * rng.sample::<f64, _>(StandardNormal);
        }
    }

    /// Installs a given subsample (n × d, finite).
    pub(crate) fn set_subsample(&mut self, z: MatRef<'_, f64>) -> Result<()> {
        check_dim(
            "the subsample's rows",
            z.nrows(),
            "the subsample size",
            self.subsample_size(),
        )?;
        check_dim(
            "the subsample's columns",
            z.ncols(),
            "the sampler's dimension",
            self.dim,
        )?;
        let d = self.dim;
        for i in 0..z.nrows() {
            for j in 0..d {
                let v = z[(i, j)];
                ensure(v.is_finite(), "subsample", "must be finite")?;
                self.subsample[i * d + j] = v;
            }
        }
        self.transpose_subsample();
        self.has_subsample = true;
        self.refreshes += 1;
        Ok(())
    }

    /// After the accept decision of adapting step `t`: records the new state
    /// and maybe redraws z (and the bandwidth). Returns whether z changed.
    pub(crate) fn adapt<R: Rng + ?Sized>(&mut self, t: u64, current: &[f64], rng: &mut R) -> bool {
        self.history.push(current);
        let due = if self.has_subsample {
            self.config.refresh.decide(t, rng)
        } else {
            self.history.len() >= self.subsample_size()
        };
        if !due {
            return false;
        }
        if self
            .history
            .subsample_into(rng, &mut self.subsample)
            .is_err()
        {
            // Unreachable: z is due only once the history holds n points.
            return false;
        }
        self.transpose_subsample();
        self.has_subsample = true;
        self.refreshes += 1;
        if let Bandwidth::MedianHeuristic { max_points } = self.config.bandwidth {
            let z =
                MatRef::from_row_major_slice(&self.subsample, self.config.subsample_size, self.dim);
            let rescaled = self
                .median
                .compute(z, max_points, rng)
                .ok()
                .and_then(|l| self.kernel.with_length_scale(l));
            match rescaled {
                Some(kernel) => self.kernel = kernel,
                None => self.median_failures += 1,
            }
        }
        true
    }

    /// The history as [`Proposal::kept_states`]: x_t of every adapting step
    /// t, nothing before.
    pub(crate) fn kept_states(&self) -> KeptStates {
        KeptStates {
            leading: 0,
            rows: self.history.len(),
        }
    }

    /// Moves the history's points out ([`Proposal::take_kept_states`]).
    pub(crate) fn take_kept_states(&mut self) -> Vec<f64> {
        self.history.take_points()
    }

    /// Appends γ, the refresh count, the median-heuristic failures and the
    /// history length to a summary.
    pub(crate) fn summary_extra(&self, out: &mut Vec<(String, f64)>) {
        out.push(("gamma".into(), self.gamma()));
        out.push(("subsample_refreshes".into(), self.refreshes as f64));
        out.push((
            "median_heuristic_failures".into(),
            self.median_failures as f64,
        ));
        out.push(("history_len".into(), self.history.len() as f64));
    }
}

/// [`transpose`] as a [`pulp::WithSimd`] operation, compiled for the CPU's
/// vector width.
struct Transpose<'a, const DIM: usize>((&'a [f64], &'a mut [f64], usize));

impl<const DIM: usize> pulp::WithSimd for Transpose<'_, DIM> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _simd: S) {
        transpose::<DIM>(self.0);
    }
}

/// Writes the n × d row-major `rows` column-major into `columns` (both of
/// length n·d). With d = DIM > 0 row by row, each row's d values stored
/// into the d columns (split once, so the stores need no bounds checks);
/// otherwise column by column, the reads striding through `rows` (which
/// stays in cache).
#[inline(always)]
fn transpose<const DIM: usize>((rows, columns, dim): (&[f64], &mut [f64], usize)) {
    let n = columns.len() / dim;
    if DIM > 0 {
        let mut rest = columns;
        let columns: [&mut [f64]; DIM] = std::array::from_fn(|_| {
            let (column, tail) = std::mem::take(&mut rest).split_at_mut(n);
            rest = tail;
            column
        });
        for (i, row) in rows.chunks_exact(DIM).enumerate().take(n) {
            for l in 0..DIM {
                columns[l][i] = row[l];
            }
        }
    } else {
        for (l, column) in columns.chunks_exact_mut(n).enumerate() {
            for (c, point) in column.iter_mut().zip(rows.chunks_exact(dim)) {
                *c = point[l];
            }
        }
    }
}

/// The KAMH proposal's covariance at one point: the kernel term M H Mᵀ, its
/// factored γ²I + ν²·(term), and the (γ², ν²) the factor was built with.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CachedCovariance {
    term: Vec<f64>,
    factor: ProposalCovariance,
    params: Option<(f64, f64)>,
}

impl CachedCovariance {
    fn new(dim: usize) -> Self {
        Self {
            term: vec![0.0; dim * dim],
            factor: ProposalCovariance::identity(dim),
            params: None,
        }
    }

    /// Factors γ²I + ν²·term unless it already is (builds in `scratch`).
    fn refactor(&mut self, gamma2: f64, nu2: f64, scratch: &mut [f64]) -> Result<()> {
        if self.params == Some((gamma2, nu2)) {
            return Ok(());
        }
        self.params = None;
        combine_into(&self.term, self.factor.dim(), gamma2, nu2, scratch);
        self.factor.factor(scratch)?;
        self.params = Some((gamma2, nu2));
        Ok(())
    }
}

/// Kernel adaptive Metropolis–Hastings ("MCMC Kameleon", Sejdinovic et al.
/// 2014) as a [`Proposal`] for [`crate::MetropolisHastings`].
///
/// At state y the proposal is `q_z(·|y) = N(y, γ²I + ν² M_{z,y} H M_{z,y}ᵀ)`
/// with `M_{z,y} = 2[∇ₓk(x, z_i)|ₓ₌y]_{i=1..n}` and z a subsample of the
/// chain history (see [`KamhCovariance`]). The proposal is not symmetric:
/// the Hastings correction `log q_z(x_t|x*) − log q_z(x*|x_t)` uses the
/// covariance built at x* for the reverse density and the **same** z for
/// both (z changes only in [`Proposal::observe`], after the decision).
///
/// Cost per step while z is fixed: one kernel term (O(n d²)) and one
/// Cholesky factor (O(d³)), at x*; the current state's factor is cached (on
/// acceptance the reverse factor becomes the current one, on rejection the
/// current one is kept). It is rebuilt only after z, γ or ν changed (ν
/// changes at every adapting step under Robbins–Monro: then only the cheap
/// O(d³) refactorisation of the cached kernel term is redone). Steps
/// allocate nothing except the amortised growth of the history while
/// adapting and the median heuristic's scratch at a refresh.
///
/// Adaptation (only while the engine adapts, after each decision): the new
/// state is appended to the history; once it holds n states z is drawn
/// without replacement, then redrawn per [`Refresh`], with the bandwidth per
/// [`Bandwidth`]; ν is updated with min(1, ratio) at steps that used the
/// kernel proposal. Until the first subsample the chain is a random walk.
///
/// ```
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::{Kamh, KamhConfig, RunConfig, run_chain};
/// use kameleon_targets::Banana;
/// let target = Banana::new(2, 0.1, 10.0)?;
/// let mut config = KamhConfig::paper(100)?;
/// config.subsample.warmup_scale = 1.0;
/// let kamh = Kamh::new(2, Gaussian::new(1.0)?, config)?;
/// let chain = run_chain(&target, kamh, &[0.0, 0.0], RunConfig::new(1000, 2000), 7)?;
/// assert_eq!(chain.len(), 2000);
/// println!("acceptance {:.2}, nu {:?}", chain.acceptance_rate(), chain.adaptation.scale);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kamh<K> {
    adaptation: SubsampleAdaptation<K>,
    scale: Scale,
    builder: KamhCovariance,
    current: CachedCovariance,
    current_valid: bool,
    proposed: CachedCovariance,
    scratch: Vec<f64>,
    used_kernel: bool,
}

impl<K: LengthScale> Kamh<K> {
    /// KAMH in dimension `dim` with the initial `kernel` (its bandwidth is
    /// replaced at each refresh under [`Bandwidth::MedianHeuristic`]).
    pub fn new(dim: usize, kernel: K, config: KamhConfig) -> Result<Self> {
        config.scale.validate("scale")?;
        ensure_room("KAMH's d × d matrices", &[&[6, dim, dim]])?;
        let adaptation = SubsampleAdaptation::new(dim, kernel, config.subsample)?;
        let n = adaptation.subsample_size();
        Ok(Self {
            adaptation,
            scale: config.scale,
            builder: KamhCovariance::new(dim, n),
            current: CachedCovariance::new(dim),
            current_valid: false,
            proposed: CachedCovariance::new(dim),
            scratch: vec![0.0; dim * dim],
            used_kernel: false,
        })
    }

    /// Installs a subsample z (n × d, finite), e.g. an oracle sample of the
    /// target; the kernel proposal is on from the next step. Use
    /// [`Refresh::Never`] to keep it (other schedules redraw z from the
    /// history once it holds n states).
    pub fn set_subsample(&mut self, z: MatRef<'_, f64>) -> Result<()> {
        self.adaptation.set_subsample(z)?;
        self.current_valid = false;
        Ok(())
    }

    /// The current subsample z (n × d), if the kernel proposal is on.
    pub fn subsample(&self) -> Option<MatRef<'_, f64>> {
        self.adaptation.active().then(|| self.adaptation.z())
    }

    /// The current kernel (with the current bandwidth).
    pub fn kernel(&self) -> &K {
        &self.adaptation.kernel
    }

    /// The current ν.
    pub fn nu(&self) -> f64 {
        self.scale.value()
    }

    /// The current γ.
    pub fn gamma(&self) -> f64 {
        self.adaptation.gamma()
    }

    /// Makes the cached covariance at `x` current and factored.
    fn prepare_current(&mut self, x: &[f64], gamma2: f64, nu2: f64) -> Result<()> {
        if !self.current_valid {
            self.builder.kernel_term_into(
                &self.adaptation.kernel,
                x,
                self.adaptation.z_columns(),
                &mut self.current.term,
            );
            self.current.params = None;
            self.current_valid = true;
        }
        self.current.refactor(gamma2, nu2, &mut self.scratch)
    }
}

impl<K: LengthScale> Kamh<K> {
    /// [`Proposal::observe`] for any generator: swaps the cached factors on
    /// acceptance and, if `adapt`, updates ν and the subsample.
    fn observe_with<R: Rng + ?Sized>(
        &mut self,
        outcome: &StepOutcome<'_>,
        adapt: bool,
        rng: &mut R,
    ) {
        if self.used_kernel && outcome.accepted {
            std::mem::swap(&mut self.current, &mut self.proposed);
        }
        if adapt {
            if self.used_kernel {
                self.scale.update(outcome.accept_prob);
            }
            if self
                .adaptation
                .adapt(outcome.iteration, outcome.current, rng)
            {
                self.current_valid = false;
            }
        }
    }
}

impl<K: LengthScale> Proposal for Kamh<K> {
    fn state_dim(&self) -> Option<usize> {
        Some(self.adaptation.dim)
    }

    fn initialise(&mut self, target: &dyn Target, _x: &[f64], _adapts: bool) -> Result<()> {
        check_target_dim(target, self.adaptation.dim)?;
        self.current_valid = false;
        Ok(())
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        self.used_kernel = self.adaptation.active();
        if !self.used_kernel {
            self.adaptation.warmup_step(current, proposed, rng);
            return 0.0;
        }
        let gamma = self.adaptation.gamma();
        let (gamma2, nu2) = (gamma * gamma, self.scale.value().powi(2));
        if self.prepare_current(current, gamma2, nu2).is_err() {
            return f64::NEG_INFINITY;
        }
        self.current.factor.sample_into(current, 1.0, rng, proposed);
        self.builder.kernel_term_into(
            &self.adaptation.kernel,
            proposed,
            self.adaptation.z_columns(),
            &mut self.proposed.term,
        );
        self.proposed.params = None;
        if self
            .proposed
            .refactor(gamma2, nu2, &mut self.scratch)
            .is_err()
        {
            return f64::NEG_INFINITY;
        }
        let log_forward = self.current.factor.log_density(proposed, current, 1.0);
        let log_reverse = self.proposed.factor.log_density(current, proposed, 1.0);
        log_reverse - log_forward
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.observe_with(outcome, adapt, rng);
    }

    fn observe_chain(
        &mut self,
        outcome: &StepOutcome<'_>,
        adapt: bool,
        rng: &mut Xoshiro256PlusPlus,
    ) {
        self.observe_with(outcome, adapt, rng);
    }

    fn kept_states(&self) -> Option<KeptStates> {
        Some(self.adaptation.kept_states())
    }

    fn take_kept_states(&mut self) -> Vec<f64> {
        self.adaptation.take_kept_states()
    }

    fn summary(&self) -> AdaptationSummary {
        let mut extra = Vec::new();
        self.adaptation.summary_extra(&mut extra);
        AdaptationSummary {
            scale: Some(self.scale.value()),
            extra,
            ..AdaptationSummary::default()
        }
    }

    fn covariance_jitters(&self) -> u64 {
        self.current.factor.jitters() + self.proposed.factor.jitters()
    }
}

#[cfg(test)]
mod tests {
    use super::transpose;

    /// Both paths (d ≤ 10 row by row, larger d column by column) put entry
    /// (i, l) of the row-major input at `l·n + i`.
    #[test]
    fn transpose_puts_each_entry_in_its_column() {
        let n = 13;
        for d in [1, 3, 8, 10, 11, 14] {
            let rows: Vec<f64> = (0..n * d).map(|k| k as f64).collect();
            let mut columns = vec![f64::NAN; n * d];
            let args = (&rows[..], &mut columns[..], d);
            match d {
                1 => transpose::<1>(args),
                3 => transpose::<3>(args),
                8 => transpose::<8>(args),
                10 => transpose::<10>(args),
                _ => transpose::<0>(args),
            }
            for i in 0..n {
                for l in 0..d {
                    assert_eq!(columns[l * n + i], rows[i * d + l], "d = {d}");
                }
            }
        }
    }
}
