//! Kernel Hamiltonian Monte Carlo (KMC; Strathmann et al., NIPS 2015):
//! HMC whose leapfrog follows the gradient of a score-matching surrogate
//! `f̂ ≈ log π` learned from the chain history, with the accept step on the
//! **true** Hamiltonian.
//!
//! One step of [`Kmc`] from the current state x:
//!
//! 1. While the surrogate is not ready (too little history, no oracle warm
//!    start) the proposal is the isotropic [`RandomWalk`] (its scale fixed or
//!    Robbins–Monro adapted, see [`KmcConfig::walk_scale`]).
//! 2. Otherwise momentum p ~ N(0, I), ε ~ s·U[ε_lo, ε_hi) (s fixed or
//!    learned, [`KmcConfig::step_scale`]), L ~ U{L_lo, …, L_hi}
//!    and L leapfrog steps on ∇f̂ — the very [`HamiltonianMove`] of [`crate::Hmc`]
//!    with the surrogate plugged in as its gradient — give (x*, p*).
//! 3. The engine accepts with log u < log π̂(x*) − log π̂(x) + K(p) − K(p*),
//!    K(p) = ½‖p‖², where log π̂(x) is the **stored** value of the current
//!    state (never re-evaluated, so pseudo-marginal targets stay exact; the
//!    inexact MCWM variant is the explicit option
//!    [`CurrentDensity::ReEstimate`]). Any error of ∇f̂ only lowers the
//!    acceptance rate: the trajectory map is volume preserving and
//!    reversible for *any* fixed gradient field, so the chain is π-invariant.
//! 4. After the decision, while the engine says adaptation is on, the
//!    surrogate learns from the new state ([`KmcSurrogate::learn`]):
//!    [`LiteSurrogate`] refits on a fresh subsample of the history with
//!    probability a_t ([`AdaptProbability`], vanishing: a_t → 0, Σ a_t = ∞);
//!    [`FiniteSurrogate`] adds every state (or every k-th, a documented
//!    thinning) by an exact O(dm²) online update. Stop adaptation after
//!    burn-in with [`crate::AdaptationStop::AfterBurnIn`] (the default of
//!    [`crate::RunConfig`]); the recorded chain is then a plain Markov chain.
//!
//! **Lite falls back to a random walk far from the data.** The lite gradient
//! ∇f̂(x) = Σᵢ αᵢ ∇k(zᵢ, x) decays like exp(−‖x − zᵢ‖²/σ): far from every zᵢ
//! it vanishes, the leapfrog momentum stays constant, x* = x + εL p and
//! K(p) − K(p*) = 0, i.e. a symmetric Gaussian random walk of scale εL, a
//! valid Metropolis proposal (KMC Prop. 3). The finite surrogate has no such
//! decay (cosine features oscillate in the tails): start it inside the bulk or
//! after a lite/random-walk burn-in.

use crate::Target;
use crate::adaptation::{AdaptProbability, History, Scale};
use crate::engine::{AdaptationSummary, CoordinateChange, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, SamplerError, check_dim, check_target_dim, ensure, ensure_room};
use crate::hmc::{HamiltonianMove, check_step_size, check_steps};
use crate::kamh::{Bandwidth, check_bandwidth};
use crate::random_walk::{RandomWalk, RandomWalkConfig};
use crate::whitening::WhiteningConfig;
use faer::MatRef;
use kameleon_features::FeatureMap;
use kameleon_kernels::MedianHeuristic;
use kameleon_score_matching::{
    CrossValidation, FiniteEstimator, GradientModel, LiteEstimator, ScoreMatchingError,
    cross_validate,
};
use rand::Rng;
use serde::{Deserialize, Serialize};

/// A gradient surrogate ∇f̂ ≈ ∇ log π that [`Kmc`] learns from the chain.
pub trait KmcSurrogate: Send {
    /// The dimension d.
    fn dim(&self) -> usize;

    /// Whether the surrogate can drive trajectories (until then [`Kmc`]
    /// proposes random-walk steps).
    fn is_ready(&self) -> bool;

    /// Fits the surrogate to given points before the chain starts (the
    /// papers' "oracle" runs), making it ready.
    fn warm_start(&mut self, points: MatRef<'_, f64>) -> Result<()>;

    /// Learns from states visited before the chain's (a pilot's; `states`
    /// row-major, d per row) as [`KmcSurrogate::learn`] learns from the
    /// chain's, but without fitting: the chain's next state fits if one is
    /// then due. Default: ignored.
    fn learn_from_pilot(&mut self, states: &[f64]) {
        let _ = states;
    }

    /// Learns from the chain's state after step `iteration` (0: the starting
    /// point), called only while adaptation is on. Returns whether ∇f̂ changed.
    /// A failed fit keeps the previous surrogate and is counted, never fatal.
    fn learn(&mut self, state: &[f64], iteration: u64, rng: &mut dyn Rng) -> bool;

    /// Writes ∇f̂(x) into `out` (allocation-free).
    fn gradient(&mut self, x: &[f64], out: &mut [f64]);

    /// Named counters for the chain output (refits, failures, …).
    fn counters(&self) -> Vec<(String, f64)>;

    /// The states the surrogate keeps, if every state it learns from is kept
    /// in order (see [`Proposal::kept_states`]; the starting point, learned
    /// at the first step, is the one leading row). Default `None`.
    fn kept_states(&self) -> Option<KeptStates> {
        None
    }

    /// Moves the kept states out ([`Proposal::take_kept_states`]).
    fn take_kept_states(&mut self) -> Vec<f64> {
        Vec::new()
    }

    /// Rewrites what the surrogate has learned into new coordinates (see
    /// [`Proposal::change_coordinates`]) and refits there, returning `true`;
    /// `false` leaves it working in the old coordinates. Default `false`,
    /// unsupported.
    fn change_coordinates(&mut self, change: &CoordinateChange, rng: &mut dyn Rng) -> bool {
        let _ = (change, rng);
        false
    }

    /// Told that adaptation has stopped for good: the surrogate may free
    /// what it keeps only to learn. Default: nothing.
    fn stop_learning(&mut self) {}
}

/// The KMC lite surrogate: a [`LiteEstimator`] refitted on a random subsample
/// (without replacement) of size n of the whole chain history.
///
/// The first fit happens as soon as the history holds n points (a pilot's
/// states included: [`KmcSurrogate::learn_from_pilot`]); after that
/// each adapting step refits with probability a_t (a vanishing
/// [`AdaptProbability`]). A refit costs O(n³ + dn²) and allocates; the
/// gradient costs O(nd) and does not.
///
/// Serialisable (with the fitted model and the history), so a [`KmcLite`]
/// run checkpoints and resumes bit-identically.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LiteSurrogate {
    model: LiteEstimator,
    history: History,
    subsample_size: usize,
    schedule: AdaptProbability,
    subsample: Vec<f64>,
    #[serde(default = "fixed_bandwidth")]
    bandwidth: Bandwidth,
    #[serde(skip)]
    median: MedianHeuristic,
    #[serde(default)]
    cross_validate: bool,
    /// σ over the bandwidth rule's σ (1 until cross-validation moves it).
    #[serde(default = "unit_factor")]
    sigma_factor: f64,
    fitted: bool,
    refits: u64,
    failed_fits: u64,
    /// History rows learned from a pilot, before the chain's first state.
    pilot_rows: usize,
}

/// The settings of [`LiteSurrogate`].
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LiteSurrogateConfig {
    /// The subsample (basis) size n ≥ 2; the first fit happens once the
    /// history holds n points (default 200).
    pub subsample_size: usize,
    /// The refit probability a_t at step t after the first fit (default
    /// t^(−1/2): vanishing, Σ a_t = ∞).
    pub refit: AdaptProbability,
    /// The estimator's σ as given ([`Bandwidth::Fixed`], the default), or
    /// set at every fit from the subsample's median pairwise distance m as
    /// σ = 4m² (the Gaussian kernel of length-scale √2·m). Twice the
    /// squared length of KAMH's median heuristic: on standard normals in
    /// d = 2 … 10 the smoother surrogate's trajectories mixed 3–10× better
    /// than with σ = 2m².
    #[serde(default = "fixed_bandwidth")]
    pub bandwidth: Bandwidth,
    /// Choose σ and λ at the first fit by 5-fold cross-validation of the
    /// score-matching objective on the subsample (default `false`): σ over
    /// {¼, ½, 1, 2, 4} times the σ the bandwidth rule gives, λ over
    /// {10⁻³, …, 10}, then a compass search. Later refits keep λ and the
    /// chosen multiple of the rule's σ. Costs about a hundred fits, once.
    /// It picks the surrogate that fits the score best, which need not mix
    /// best (measured in the Python package's `KMCLite` docs).
    #[serde(default)]
    pub cross_validate: bool,
}

fn fixed_bandwidth() -> Bandwidth {
    Bandwidth::Fixed
}

fn unit_factor() -> f64 {
    1.0
}

impl Default for LiteSurrogateConfig {
    /// n = 200, refits with probability t^(−1/2), the estimator's own σ.
    fn default() -> Self {
        Self {
            subsample_size: 200,
            refit: AdaptProbability::Power { kappa: 0.5 },
            bandwidth: Bandwidth::Fixed,
            cross_validate: false,
        }
    }
}

impl LiteSurrogateConfig {
    /// The ridge per dimension of the scale-free settings:
    /// [`LiteSurrogateConfig::scale_free_ridge`] is max(d, 2) times this.
    pub const SCALE_FREE_RIDGE_PER_DIM: f64 = 5e3;

    /// The ridge λ of the estimator the scale-free settings pair with in
    /// dimension `dim`: λ = 5 000 max(d, 2), a strong ridge, so that the
    /// surrogate leaves its base measure only where the history insists. The system
    /// matrix `C` it is added to grows with d (its diagonal sums squared
    /// distances between the basis points, about 2d apart in whitened
    /// coordinates, at a median-heuristic σ that grows with d too), so a
    /// fixed λ regularises less the higher the dimension. On standard
    /// normals (the Python package's KMC lite, 1 000 tuning steps, seeds
    /// 1–3) λ = 10⁴ against 5 000 d: at d = 20 acceptance 0.40–0.57 against
    /// 0.48–0.56 and a minimum ESS of 2 × 2 000 draws of 251–442 against
    /// 342–474, at d = 10 about the same (781–961 against 678–964). In
    /// d = 1, λ = 5 000 gave 1 048–1 825 (seeds 1–6) against 1 389–1 993
    /// for 10⁴, hence the floor at d = 2.
    ///
    /// The Python package's default base is the flat one
    /// ([`kameleon_score_matching::BaseMeasure::Flat`]). The standard
    /// normal base ([`kameleon_score_matching::BaseMeasure::StandardNormal`])
    /// pulls trajectories back from heavy tails, so they reach them least
    /// of all the samplers (on the ODE posterior of the real-posterior suite
    /// its chains' sd of log V_m came out 13–19 % low, the flat base's
    /// within 8 %), and with this ridge it does not even accept more on a
    /// 20-d standard normal after 1 000 tuning steps (0.37–0.41 against
    /// 0.43–0.53, seeds 1–3).
    pub fn scale_free_ridge(dim: usize) -> f64 {
        Self::SCALE_FREE_RIDGE_PER_DIM * dim.max(2) as f64
    }

    /// The settings for a target of unit scale, i.e. run in [`crate::Whitened`]
    /// coordinates (the Python package's defaults): n = 200, refits with probability t^−½, σ by the
    /// median heuristic over 100 points at every fit; pair it with a
    /// [`LiteEstimator`] of ridge [`LiteSurrogateConfig::scale_free_ridge`].
    pub fn scale_free() -> Self {
        Self {
            bandwidth: Bandwidth::MedianHeuristic { max_points: 100 },
            ..Self::default()
        }
    }

    /// Sets the subsample size n (≥ 2).
    pub fn with_subsample_size(mut self, subsample_size: usize) -> Result<Self> {
        check_subsample_size(subsample_size)?;
        self.subsample_size = subsample_size;
        Ok(self)
    }

    /// Sets the refit probability.
    pub fn with_refit(mut self, refit: AdaptProbability) -> Result<Self> {
        refit.validate()?;
        self.refit = refit;
        Ok(self)
    }

    /// Sets how σ is chosen.
    pub fn with_bandwidth(mut self, bandwidth: Bandwidth) -> Result<Self> {
        check_bandwidth(bandwidth)?;
        self.bandwidth = bandwidth;
        Ok(self)
    }

    /// Checks n, the refit probability and the bandwidth rule.
    pub fn validate(&self) -> Result<()> {
        check_subsample_size(self.subsample_size)?;
        check_bandwidth(self.bandwidth)?;
        self.refit.validate()
    }
}

fn check_subsample_size(subsample_size: usize) -> Result<()> {
    ensure(subsample_size >= 2, "subsample_size", "must be at least 2")
}

impl LiteSurrogate {
    /// Lite surrogate in dimension `dim` ≥ 1 fitting `model` with the
    /// settings `config` (checked).
    pub fn new(model: LiteEstimator, dim: usize, config: LiteSurrogateConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        config.validate()?;
        let subsample_size = config.subsample_size;
        ensure_room("KMC lite's subsample (n × d)", &[&[subsample_size, dim]])?;
        Ok(Self {
            model,
            history: History::new(dim),
            subsample_size,
            schedule: config.refit,
            subsample: vec![0.0; subsample_size * dim],
            bandwidth: config.bandwidth,
            median: MedianHeuristic::new(),
            cross_validate: config.cross_validate,
            sigma_factor: 1.0,
            fitted: false,
            refits: 0,
            failed_fits: 0,
            pilot_rows: 0,
        })
    }

    /// The fitted estimator (its basis is the last subsample).
    pub fn model(&self) -> &LiteEstimator {
        &self.model
    }

    /// The chain history seen so far (every state while adapting).
    pub fn history(&self) -> &History {
        &self.history
    }

    /// The number of successful fits (including a warm start).
    pub fn refits(&self) -> u64 {
        self.refits
    }

    /// The number of fits that failed (the previous fit was kept).
    pub fn failed_fits(&self) -> u64 {
        self.failed_fits
    }

    /// Sets `sigma_factor` and λ by cross-validation on `points` around
    /// `rule_sigma` (see [`LiteSurrogateConfig::cross_validate`]); a failed
    /// search keeps them.
    fn choose_by_cross_validation(&mut self, points: MatRef<'_, f64>, rule_sigma: f64) {
        let sigmas: Vec<f64> = [0.25, 0.5, 1.0, 2.0, 4.0]
            .iter()
            .map(|f| f * rule_sigma)
            .collect();
        let lambdas = [1e-3, 1e-2, 1e-1, 1.0, 10.0];
        let regulariser = self.model.regulariser();
        let chosen = CrossValidation::new(5, 0, &sigmas, &lambdas).and_then(|settings| {
            cross_validate(points, &settings.with_refinement_steps(4), |h| {
                Ok(LiteEstimator::new(h.sigma, h.lambda)?.with_regulariser(regulariser))
            })
        });
        if let Ok(result) = chosen
            && self.model.set_lambda(result.best.lambda).is_ok()
        {
            self.sigma_factor = result.best.sigma / rule_sigma;
        }
    }

    fn fit(&mut self, points: MatRef<'_, f64>) -> std::result::Result<(), ScoreMatchingError> {
        self.model.fit(points)?;
        self.fitted = true;
        self.refits += 1;
        Ok(())
    }
}

impl KmcSurrogate for LiteSurrogate {
    fn dim(&self) -> usize {
        self.history.dim()
    }

    fn is_ready(&self) -> bool {
        self.fitted
    }

    /// Fits on all rows of `points` (pass the subsample you want as basis).
    fn warm_start(&mut self, points: MatRef<'_, f64>) -> Result<()> {
        check_columns(points, self.dim())?;
        self.fit(points).map_err(surrogate_error)
    }

    fn learn_from_pilot(&mut self, states: &[f64]) {
        for state in states.chunks_exact(self.dim()) {
            self.history.push(state);
            self.pilot_rows += 1;
        }
    }

    fn learn(&mut self, state: &[f64], iteration: u64, rng: &mut dyn Rng) -> bool {
        self.history.push(state);
        if self.history.len() < self.subsample_size
            || (self.fitted && !self.schedule.decide(iteration, rng))
        {
            return false;
        }
        self.refit(rng)
    }

    /// Rewrites the history into the new coordinates and, if the surrogate
    /// was fitted, refits at once on a fresh subsample (σ by the bandwidth
    /// rule there; λ and the cross-validated σ factor kept). A failed refit
    /// restores the old history and fit (and is counted); a surrogate
    /// warm-started on points its history cannot replace yet refuses.
    fn change_coordinates(&mut self, change: &CoordinateChange, rng: &mut dyn Rng) -> bool {
        // a fit on warm-start points with a short history cannot be redone
        let refittable = self.history.len() >= self.subsample_size;
        if change.dim() != self.dim() || (self.fitted && !refittable) {
            return false;
        }
        let before = self.fitted.then(|| self.clone());
        change.apply_to_rows(self.history.points_mut());
        if let Some(before) = before
            && !self.refit(rng)
        {
            let failed_fits = self.failed_fits;
            *self = before;
            self.failed_fits = failed_fits;
            return false;
        }
        true
    }

    fn gradient(&mut self, x: &[f64], out: &mut [f64]) {
        self.model.grad_log_density(x, out);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("lite_refits".to_string(), self.refits as f64),
            ("lite_sigma".to_string(), self.model.sigma()),
            ("lite_lambda".to_string(), self.model.lambda()),
            ("lite_failed_fits".to_string(), self.failed_fits as f64),
            ("history_len".to_string(), self.history.len() as f64),
        ]
    }

    fn kept_states(&self) -> Option<KeptStates> {
        Some(KeptStates {
            leading: 1 + self.pilot_rows,
            rows: self.history.len(),
        })
    }

    fn take_kept_states(&mut self) -> Vec<f64> {
        self.history.take_points()
    }
}

impl LiteSurrogate {
    /// Refits on a fresh subsample of the history (which holds at least n
    /// points): σ by the bandwidth rule, λ and σ by cross-validation at the
    /// first fit if asked. Returns whether the fit succeeded; a failed fit
    /// keeps the previous σ, λ and α and is counted.
    fn refit(&mut self, rng: &mut dyn Rng) -> bool {
        let mut subsample = std::mem::take(&mut self.subsample);
        let drawn = self.history.subsample_into(rng, &mut subsample);
        debug_assert!(drawn.is_ok(), "history holds at least n points");
        let points = MatRef::from_row_major_slice(&subsample, self.subsample_size, self.dim());
        let (sigma, lambda) = (self.model.sigma(), self.model.lambda());
        let mut rule_sigma = sigma / self.sigma_factor;
        if let Bandwidth::MedianHeuristic { max_points } = self.bandwidth {
            // a zero median (a stuck history) keeps the previous σ
            if let Ok(m) = self.median.compute(points, max_points, rng) {
                rule_sigma = 4.0 * m * m;
            }
        }
        if self.cross_validate && !self.fitted {
            self.choose_by_cross_validation(points, rule_sigma);
        }
        let _ = self.model.set_sigma(self.sigma_factor * rule_sigma);
        let fitted = self.fit(points).is_ok();
        self.subsample = subsample;
        if !fitted {
            // the previous α belong to the previous σ and λ
            let _ = self.model.set_sigma(sigma);
            let _ = self.model.set_lambda(lambda);
            self.failed_fits += 1;
        }
        fitted
    }
}

/// The KMC finite surrogate: a [`FiniteEstimator`] on a feature map, updated
/// online (exactly, O(dm²) per point) with every state of the chain while
/// adapting — or every `thin`-th state ([`FiniteSurrogateConfig::thin`]).
///
/// Each update moves θ̂ by O(1/t), so adapting forever is a diminishing
/// adaptation; stop it after burn-in to save the O(dm²) per step. The
/// surrogate is ready once it has seen `min_points` points (a pilot's
/// included: [`KmcSurrogate::learn_from_pilot`]). For the cheapest
/// exact updates (a rank-d Cholesky update and two triangular solves, no
/// iterative solve) give it an estimator with
/// [`kameleon_score_matching::RidgeSchedule::FixedOnSums`] (a ridge fixed on
/// the sums, fading like λ/t on the means; see its docs for the trade-off).
///
/// While it learns it also keeps the points it has learned (O(d) memory per
/// point, freed when adaptation stops), so that a change of coordinates
/// ([`Proposal::change_coordinates`]) can refit the estimator on them in the
/// new coordinates (an O(nm² + m³) batch fit, equal to the online updates
/// on the same points) and continue online from there.
///
/// Serialisable (the estimator's sums, factor and θ̂, the kept points), so a
/// [`KmcFinite`] run checkpoints and resumes bit-identically.
///
/// Mixing caveat: a frozen surrogate leaves π exactly invariant, but where
/// its gradient is poor the chain can be metastable. On the 8-d banana
/// B(0.03, 100) with m = 200 features of length-scale 5 fitted to 1000
/// exact draws, three chains of 2·10⁶ steps of one sampler gave
/// E y₁² = 87.1 ± 1.9, 96.5 ± 6.1 and 130.9 ± 14.9 (truth 100; batch-means
/// standard errors): long, rare excursions into the y₁ tails. Judge such
/// runs by several independent chains (e.g. [`crate::run_chains`] from
/// dispersed starts), not by one chain's effective sample size.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FiniteSurrogate<F: FeatureMap> {
    model: FiniteEstimator<F>,
    min_points: usize,
    thin: u64,
    offered: u64,
    failed_updates: u64,
    /// The points the estimator holds (warm start and learned states, n × d
    /// row-major), kept while `keep_points` so that a change of coordinates
    /// can refit on them.
    points: Vec<f64>,
    /// Whether to keep the points: from [`FiniteSurrogate::keeping_points`]
    /// until the first change of coordinates or the end of learning.
    keep_points: bool,
}

/// The settings of [`FiniteSurrogate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct FiniteSurrogateConfig {
    /// The number of points (≥ 1) the estimator must have seen before the
    /// surrogate drives trajectories (default 100).
    pub min_points: usize,
    /// Learn only from every `thin`-th state offered (≥ 1; the default 1 is
    /// every state).
    pub thin: u64,
}

impl Default for FiniteSurrogateConfig {
    /// Ready after 100 points, learning from every state.
    fn default() -> Self {
        Self {
            min_points: 100,
            thin: 1,
        }
    }
}

impl FiniteSurrogateConfig {
    /// The ridge λ of the estimator that the scale-free settings (whitened
    /// coordinates, random Fourier features of a Gaussian kernel) pair with.
    /// On standard normals in d = 20 (1 000 tuning steps, on the standard
    /// normal base measure) λ = 10⁻³ gave acceptance 0.10–0.12, λ = 1 and
    /// 100 0.20–0.34.
    pub const SCALE_FREE_RIDGE: f64 = 1.0;

    /// The degrees of freedom per dimension of the Student-t base measure
    /// ([`kameleon_score_matching::BaseMeasure::StudentT`], ν = 3d) that
    /// the Python package's KMC finite pairs with this ridge in whitened
    /// coordinates. It is N(0, I) near the origin, but its pull falls off
    /// beyond `‖x‖ ≈ 2√d`, so trajectories reach heavy tails that the
    /// standard normal base pulls them back from: on the real-posterior
    /// suite's ODE the chains' sd of log V_m was 13–16 % low on the
    /// standard normal base and within 3 % on this one, and on standard
    /// normals in d = 10 and 20 (1 000 tuning steps) the minimum ESS of
    /// 2 × 2 000 draws rose from 28–210 and 14–136 to 347–421 and 124–222.
    pub const SCALE_FREE_BASE_DOF_PER_DIM: f64 = 3.0;

    /// Sets the number of points before the surrogate is ready (≥ 1).
    pub fn with_min_points(mut self, min_points: usize) -> Result<Self> {
        check_min_points(min_points)?;
        self.min_points = min_points;
        Ok(self)
    }

    /// Sets the thinning of the learned states (≥ 1).
    pub fn with_thin(mut self, thin: u64) -> Result<Self> {
        check_thin(thin)?;
        self.thin = thin;
        Ok(self)
    }

    /// Checks both settings.
    pub fn validate(&self) -> Result<()> {
        check_min_points(self.min_points)?;
        check_thin(self.thin)
    }
}

fn check_min_points(min_points: usize) -> Result<()> {
    ensure(min_points >= 1, "min_points", "must be at least 1")
}

fn check_thin(thin: u64) -> Result<()> {
    ensure(thin >= 1, "thin", "must be at least 1")
}

impl<F: FeatureMap> FiniteSurrogate<F> {
    /// Adds one point to the estimator (a failed update is counted) and,
    /// while they are kept, to the points.
    fn update(&mut self, state: &[f64]) {
        if self.model.update(state).is_err() {
            self.failed_updates += 1;
        }
        if self.keep_points {
            self.points.extend_from_slice(state);
        }
    }

    /// Finite surrogate on `model` with the settings `config` (checked).
    pub fn new(model: FiniteEstimator<F>, config: FiniteSurrogateConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            model,
            min_points: config.min_points,
            thin: config.thin,
            offered: 0,
            failed_updates: 0,
            points: Vec::new(),
            keep_points: false,
        })
    }

    /// Keeps the points the estimator learns (O(d) memory per point) until
    /// the first change of coordinates ([`Proposal::change_coordinates`],
    /// e.g. [`crate::Whitened`]'s re-whitening) or the end of learning, so
    /// that the change can refit the estimator on them in the new
    /// coordinates; without it the surrogate refuses a change of
    /// coordinates and keeps nothing.
    pub fn keeping_points(mut self) -> Self {
        self.keep_points = true;
        self
    }

    /// The estimator.
    pub fn model(&self) -> &FiniteEstimator<F> {
        &self.model
    }

    /// The number of online updates that failed (the point is kept in the
    /// sums; the next update refactorises).
    pub fn failed_updates(&self) -> u64 {
        self.failed_updates
    }
}

impl<F: FeatureMap> KmcSurrogate for FiniteSurrogate<F> {
    fn dim(&self) -> usize {
        self.model.dim()
    }

    fn is_ready(&self) -> bool {
        self.model.count() >= self.min_points
    }

    /// Batch fit on the points; the chain's states are then added online.
    fn warm_start(&mut self, points: MatRef<'_, f64>) -> Result<()> {
        check_columns(points, self.dim())?;
        self.model.fit(points).map_err(surrogate_error)?;
        self.points.clear();
        if self.keep_points {
            for row in points.row_iter() {
                self.points.extend(row.iter());
            }
        }
        ensure(
            self.is_ready(),
            "points",
            "the warm start needs at least min_points points",
        )
    }

    fn learn_from_pilot(&mut self, states: &[f64]) {
        for state in states.chunks_exact(self.dim()) {
            self.update(state);
        }
    }

    fn learn(&mut self, state: &[f64], _iteration: u64, _rng: &mut dyn Rng) -> bool {
        self.offered += 1;
        if !(self.offered - 1).is_multiple_of(self.thin) {
            return false;
        }
        self.update(state);
        true
    }

    /// Rewrites the kept points into the new coordinates and batch-fits the
    /// estimator on them, then lets the points go. Refuses, changing
    /// nothing, unless it keeps its points ([`FiniteSurrogate::keeping_points`]),
    /// or if a rewritten point is not finite; a fit that
    /// fails all the same (the regularised sums not positive definite) is
    /// redone on the old points, which restores the old surrogate up to
    /// round-off, and refuses.
    fn change_coordinates(&mut self, change: &CoordinateChange, _rng: &mut dyn Rng) -> bool {
        let d = self.dim();
        let n = self.points.len() / d;
        if !self.keep_points || change.dim() != d || n != self.model.count() {
            return false;
        }
        self.keep_points = false;
        if n == 0 {
            return true;
        }
        let mut points = self.points.clone();
        change.apply_to_rows(&mut points);
        if !points.iter().all(|v| v.is_finite()) {
            return false;
        }
        let fit = |model: &mut FiniteEstimator<F>, points: &[f64]| {
            model.fit(MatRef::from_row_major_slice(points, n, d))
        };
        let refitted = fit(&mut self.model, &points).is_ok();
        if !refitted && fit(&mut self.model, &self.points).is_err() {
            self.failed_updates += 1;
        }
        self.points = Vec::new();
        refitted
    }

    fn stop_learning(&mut self) {
        self.keep_points = false;
        self.points = Vec::new();
    }

    fn gradient(&mut self, x: &[f64], out: &mut [f64]) {
        self.model.grad_log_density(x, out);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("finite_points".to_string(), self.model.count() as f64),
            (
                "finite_failed_updates".to_string(),
                self.failed_updates as f64,
            ),
        ]
    }
}

/// Errors unless the rows of `points` have the surrogate's dimension `dim`.
fn check_columns(points: MatRef<'_, f64>, dim: usize) -> Result<()> {
    check_dim(
        "the points' columns",
        points.ncols(),
        "the surrogate's dimension",
        dim,
    )
}

fn surrogate_error(e: ScoreMatchingError) -> SamplerError {
    SamplerError::InvalidParameter {
        name: "surrogate",
        reason: e.to_string(),
    }
}

/// How the engine treats the current state's log density.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CurrentDensity {
    /// Reuse the stored estimate until a proposal is accepted (exact
    /// pseudo-marginal MCMC; the default).
    #[default]
    Reuse,
    /// Monte Carlo within Metropolis (MCWM): re-estimate log π̂(x_t) before
    /// every step. **Inexact** for noisy targets (the chain targets a
    /// different distribution); what some public KMC ABC runs do. Costs one
    /// extra target evaluation per step.
    ReEstimate,
}

/// The settings of [`Kmc`], shared by [`KmcLite`] and [`KmcFinite`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct KmcConfig {
    /// Step size ε ~ U[lo, hi) drawn each iteration (0 < lo ≤ hi < ∞;
    /// default [0.1, 0.2)).
    pub step_size: (f64, f64),
    /// Number of leapfrog steps L ~ U{lo, …, hi} drawn each iteration
    /// (1 ≤ lo ≤ hi; default {10, …, 20}).
    pub steps: (u32, u32),
    /// The scale of the random walk used before the surrogate is ready (an
    /// adaptive [`Scale`] learns while adaptation is on); `None` (the
    /// default) is the fixed 2.38/√d.
    pub walk_scale: Option<Scale>,
    /// Exact reuse of the current state's log density (the default) or the
    /// inexact MCWM re-estimation.
    pub current_density: CurrentDensity,
    /// A factor s on every drawn step size (ε = s · U[lo, hi)): fixed, or
    /// learned by Robbins–Monro on log s toward an acceptance rate from the
    /// trajectory steps while adaptation is on. `None` (the default) is the
    /// fixed s = 1, the papers' protocol.
    #[serde(default)]
    pub step_scale: Option<Scale>,
}

impl Default for KmcConfig {
    /// ε ~ U[0.1, 0.2), L ~ U{10, …, 20}, the fixed walk scale 2.38/√d,
    /// [`CurrentDensity::Reuse`].
    fn default() -> Self {
        Self {
            step_size: (0.1, 0.2),
            steps: (10, 20),
            walk_scale: None,
            current_density: CurrentDensity::Reuse,
            step_scale: None,
        }
    }
}

impl KmcConfig {
    /// The acceptance rate the scale-free step factor is learned toward.
    pub const SCALE_FREE_TARGET_ACCEPT: f64 = 0.65;

    /// The range [lo, hi] the scale-free step factor is kept in. Where a
    /// surrogate learned in few steps caps the acceptance of these
    /// trajectories (d = 20 after 1 000 tuning steps: lite 0.48–0.56,
    /// finite 0.49–0.53), a factor free to chase the target shortens them
    /// until they barely move the chain: with ε's range halved to
    /// [0.05, 0.1), KMC lite and finite accepted 0.60–0.73 on standard
    /// normals in d = 2–20, but their minimum ESS at d = 20 fell by about
    /// half. The rejections come from the surrogate's error over the
    /// distance travelled, not from the leapfrog: trajectories as long, with
    /// half the step and twice the steps, accept about as often (d = 20:
    /// lite 0.48–0.58, finite 0.49–0.54).
    ///
    /// A lower floor with a lower target buys acceptance ≥ 0.5 on standard
    /// normals up to d = 20 (lite: target 0.62, floor 0.3, 0.55–0.62 at
    /// d = 20; finite: 0.62, 0.4, 0.55–0.60; 1 000 tuning steps, seeds 1–3)
    /// and costs mixing: lite's minimum ESS on the 20-d normal fell from
    /// 342–474 to 218–408, and on the real-posterior suite (seeds 1–3)
    /// lite's median ESS per evaluation fell 81 % on hmm_drive_0, 45 % on
    /// nes and 41 % on diamonds (d = 26), finite's 27 % on the ODE and 23 %
    /// on diamonds (it rose 12–16 % on nes and hmm_drive_0); there the
    /// chains gain from long trajectories accepted about half the time.
    /// The floor alone at 0.45 (target 0.65) accepts 0.51–0.61 (lite) and
    /// 0.52–0.58 (finite) at d = 20 over seeds 1–6, and still costs: on
    /// the suite (seeds 1–3) the median ESS per evaluation fell 10 % on
    /// diamonds for both, 7–9 % on nes and 12 % on the ODE, where the
    /// acceptance rose by 0.02–0.04, and on hmm_drive_0 over seeds 1–13
    /// lite's median fell from 208 to 163 per 1 000 evaluations (finite's
    /// 181 against 175; single seeds there range over 11–486). So the
    /// floor stays at 0.5.
    pub const SCALE_FREE_STEP_FACTOR_RANGE: (f64, f64) = (0.5, 20.0);

    /// The settings for a target of unit scale, i.e. run in [`crate::Whitened`]
    /// coordinates (the Python package's defaults): ε ~ s·U[0.1, 0.2), L ~ U{10, …, 20}, the step
    /// factor s learned toward acceptance
    /// [`KmcConfig::SCALE_FREE_TARGET_ACCEPT`] with steps 1/√t and kept in
    /// [`KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE`].
    pub fn scale_free() -> Self {
        Self::default()
            .with_learned_step_factor(
                Self::SCALE_FREE_TARGET_ACCEPT,
                Self::SCALE_FREE_STEP_FACTOR_RANGE,
            )
            .expect("valid constants")
    }

    /// The [`crate::Whitened`] settings that re-whiten from KMC's own
    /// states (the Python package's default for KMC lite and finite): a
    /// pilot of the first 30 % of the adaptation period, then the map re-estimated from
    /// KMC's states of steps 0.4 T … 0.8 T
    /// ([`WhiteningConfig::rewhiten_fraction`]). KMC mixes far better than
    /// the pilot's random walk, so its states locate the target better, and
    /// the surrogate (for KMC finite also its base measure, centred at the
    /// whitened origin) continues in the better coordinates.
    ///
    /// Measured on KMC finite's scale-free defaults (1 000 tuning steps,
    /// 2 × 2 000 draws, seeds 1–3), against the pilot's map alone: on
    /// standard normals the minimum bulk ESS rose from 353–394 to 592–741
    /// at d = 10 and from 152–160 to 304–337 at d = 20 (acceptance there
    /// 0.49–0.53, was 0.36–0.48). The estimate needs many of KMC's states:
    /// from steps 0.45 T … 0.6 T, d = 20 gave ESS 256–347 and acceptance
    /// 0.41–0.43. On the real-posterior suite (seeds 1–10, five
    /// posteriors) the median ESS per evaluation against that window rose
    /// 80 % on nes, 21 % on diamonds, 18 % on hmm_drive_0 and 3 % on
    /// kilpisjarvi, and fell 15 % on the ODE (passed in 8 of 10 seeds, was
    /// 7); all 7 of 8 posteriors still pass. Later is worse: re-estimated at
    /// 0.9 T, too few tuning steps are left to settle the step size and
    /// surrogate in the new coordinates, and hmm_drive_0's ESS collapsed in
    /// 2 of 10 seeds.
    ///
    /// KMC lite gains too, with the ridge
    /// [`LiteSurrogateConfig::scale_free_ridge`] (1 000 tuning steps, seeds
    /// 1–3): on standard normals the minimum ESS rose from 267–373 on the
    /// pilot's map to 342–474 at d = 20 (acceptance 0.48–0.56, was
    /// 0.50–0.58) and from 457–514 to 678–964 at d = 10; on the
    /// real-posterior suite the median ESS per evaluation rose 3.2 times on
    /// nes, 1.5 times on diamonds and 23 % on the ODE, and stayed within
    /// 6 % elsewhere. Re-whitened with λ = 10⁴ instead, the ODE's ESS was a
    /// third (11.7 against 34.6 per 1 000 evaluations) and nes's 41 % lower.
    ///
    /// Tried and left: trusting the covariance of KMC's states more (its
    /// shrinkage weight from their effective number, N(1 − ρ)/(1 + ρ) with ρ
    /// from the mean squared jump, instead of a random walk's m/d) lowered
    /// the acceptance on the 20-d normal (finite 0.37–0.44, lite
    /// 0.37–0.40); keeping the pilot's shape and re-estimating only the
    /// centre and scale raised it a little (0.45–0.56) but cut the ESS on
    /// nes to a third for both; a pilot of 15 % or 30 % of the tuning
    /// without re-whitening accepted 0.52–0.67 on the 20-d normal but cut
    /// lite's ESS on nes by 58 % (and by 84 % on hmm_drive_0 at 15 %).
    pub fn scale_free_whitening() -> WhiteningConfig {
        WhiteningConfig::default()
            .with_pilot_fraction(0.3)
            .and_then(|c| c.with_rewhiten_fraction(Some(0.8)))
            .expect("valid constants")
    }

    /// Sets the step-size range (lo, hi), 0 < lo ≤ hi < ∞.
    pub fn with_step_size(mut self, step_size: (f64, f64)) -> Result<Self> {
        check_step_size(step_size)?;
        self.step_size = step_size;
        Ok(self)
    }

    /// Sets the range (lo, hi) of the number of leapfrog steps, 1 ≤ lo ≤ hi.
    pub fn with_steps(mut self, steps: (u32, u32)) -> Result<Self> {
        check_steps(steps)?;
        self.steps = steps;
        Ok(self)
    }

    /// Sets the scale of the random walk before the surrogate is ready.
    pub fn with_walk_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("scale")?;
        self.walk_scale = Some(scale);
        Ok(self)
    }

    /// Sets the factor on the step size (a fixed one must be positive and
    /// finite).
    pub fn with_step_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("step_scale")?;
        self.step_scale = Some(scale);
        Ok(self)
    }

    /// Learns the factor s on the step size toward the acceptance rate
    /// `target_accept` ∈ (0, 1) while adaptation is on (Robbins–Monro on
    /// log s with steps 1/√t, from s = 1), keeping it in `range` = (lo, hi),
    /// 0 < lo ≤ 1 ≤ hi < ∞.
    pub fn with_learned_step_factor(self, target_accept: f64, range: (f64, f64)) -> Result<Self> {
        let factor =
            crate::RobbinsMonro::new(1.0, target_accept, crate::StepSchedule::InverseSqrt)?
                .with_bounds(range.0, range.1)?;
        self.with_step_scale(Scale::Adaptive(factor))
    }

    /// Chooses exact reuse or the inexact MCWM re-estimation of the current
    /// state's log density.
    pub fn with_current_density(mut self, current_density: CurrentDensity) -> Self {
        self.current_density = current_density;
        self
    }
}

/// Kernel Hamiltonian Monte Carlo on a [`KmcSurrogate`]: leapfrog
/// trajectories on the surrogate gradient ∇f̂ ([`HamiltonianMove`], shared
/// with [`crate::Hmc`]), accepted with the true Hamiltonian, the surrogate
/// learning from the chain while adaptation is on, and random-walk steps
/// until it is ready. [`KmcLite`] and [`KmcFinite`] are the paper's two
/// variants.
///
/// ```
/// use kameleon_samplers::{
///     AdaptProbability, KmcConfig, KmcLite, LiteSurrogate, LiteSurrogateConfig, RunConfig,
///     run_chain,
/// };
/// use kameleon_score_matching::LiteEstimator;
/// use kameleon_targets::Banana;
///
/// let target = Banana::new(2, 0.03, 100.0)?;
/// // f̂ = Σ αᵢ exp(−‖zᵢ − x‖²/σ) on n = 100 history points, refitted with
/// // probability t^(−1/2); random-walk steps until 100 points are seen.
/// let lite = LiteSurrogateConfig::default()
///     .with_subsample_size(100)?
///     .with_refit(AdaptProbability::Power { kappa: 0.5 })?;
/// let surrogate = LiteSurrogate::new(LiteEstimator::new(50.0, 1e-3)?, 2, lite)?;
/// let config = KmcConfig::default().with_step_size((0.2, 0.5))?.with_steps((1, 10))?;
/// let kmc = KmcLite::new(surrogate, config)?;
/// let chain = run_chain(&target, kmc, &[0.0, 0.0], RunConfig::new(500, 1000), 7)?;
/// assert_eq!(chain.len(), 1000);
/// println!("acceptance {:.2}", chain.acceptance_rate());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Kmc<S> {
    dim: usize,
    surrogate: S,
    dynamics: HamiltonianMove,
    step_scale: Scale,
    walk: RandomWalk,
    current_density: CurrentDensity,
    last_was_walk: bool,
    trajectories: u64,
    walk_steps: u64,
}

/// KMC lite (random-walk fallback far from the data).
pub type KmcLite = Kmc<LiteSurrogate>;

/// KMC finite (learns from every state, online).
pub type KmcFinite<F> = Kmc<FiniteSurrogate<F>>;

impl<S: KmcSurrogate> Kmc<S> {
    /// KMC on `surrogate` with the settings `config` (checked): momentum
    /// N(0, I), ε and L drawn from their ranges each iteration, the random
    /// walk of `config.walk_scale` until the surrogate is ready.
    pub fn new(surrogate: S, config: KmcConfig) -> Result<Self> {
        let dim = surrogate.dim();
        let dynamics = HamiltonianMove::new(dim, config.step_size, config.steps)?;
        let step_scale = match config.step_scale {
            Some(scale) => {
                scale.validate("step_scale")?;
                scale
            }
            None => Scale::Fixed(1.0),
        };
        let walk = RandomWalk::new(
            dim,
            RandomWalkConfig {
                scale: config.walk_scale,
            },
        )?;
        Ok(Self {
            dim,
            dynamics,
            step_scale,
            walk,
            surrogate,
            current_density: config.current_density,
            last_was_walk: false,
            trajectories: 0,
            walk_steps: 0,
        })
    }

    /// **Oracle warm start**: fits the surrogate on given points (e.g. exact
    /// samples of π, as in the papers' "oracle" runs) before the chain
    /// starts, so trajectories start at once. Adaptation, if on, continues
    /// from the chain's own history. A builder on the sampler, not a
    /// [`KmcConfig`] field: the points are data, not a setting.
    pub fn with_oracle_points(mut self, points: MatRef<'_, f64>) -> Result<Self> {
        self.surrogate.warm_start(points)?;
        Ok(self)
    }

    /// The surrogate.
    pub fn surrogate(&self) -> &S {
        &self.surrogate
    }

    /// The number of leapfrog trajectories proposed so far.
    pub fn trajectories(&self) -> u64 {
        self.trajectories
    }

    /// The number of random-walk proposals made so far.
    pub fn walk_steps(&self) -> u64 {
        self.walk_steps
    }
}

impl<S: KmcSurrogate> Proposal for Kmc<S> {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
        self.walk.initialise(target, x, adapts)?;
        self.dynamics.invalidate();
        Ok(())
    }

    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        if !self.surrogate.is_ready() {
            self.last_was_walk = true;
            self.walk_steps += 1;
            return self.walk.propose(target, current, proposed, rng);
        }
        self.last_was_walk = false;
        self.trajectories += 1;
        let surrogate = &mut self.surrogate;
        let mut grad = |x: &[f64], out: &mut [f64]| {
            surrogate.gradient(x, out);
            out.iter().all(|g| g.is_finite())
        };
        let factor = self.step_scale.value();
        self.dynamics
            .propose(current, proposed, rng, factor, &mut grad)
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        if self.last_was_walk {
            // the cached gradient (if any) belongs to the old state
            self.dynamics.invalidate();
            self.walk.observe(outcome, adapt, rng);
        } else {
            self.dynamics.observe(outcome.accepted);
            if adapt {
                self.step_scale.update(outcome.accept_prob);
            }
        }
        if !adapt {
            self.surrogate.stop_learning();
        }
        if adapt {
            // the starting point is part of the history
            let start_changed =
                outcome.iteration == 1 && self.surrogate.learn(outcome.previous, 0, rng);
            let changed = self
                .surrogate
                .learn(outcome.current, outcome.iteration, rng);
            if start_changed || changed {
                self.dynamics.invalidate();
            }
        }
    }

    /// Hands the pilot's states to the surrogate
    /// ([`KmcSurrogate::learn_from_pilot`]).
    fn learn_from_pilot(&mut self, states: &[f64]) {
        self.surrogate.learn_from_pilot(states);
    }

    /// Both surrogates learn from the pilot's states.
    fn learns_from_pilot(&self) -> bool {
        true
    }

    /// Rewrites the surrogate into the new coordinates and refits it there
    /// ([`KmcSurrogate::change_coordinates`]); the step-size factor and the
    /// random walk's scale stay.
    fn change_coordinates(&mut self, change: &CoordinateChange, rng: &mut dyn Rng) -> bool {
        if !self.surrogate.change_coordinates(change, rng) {
            return false;
        }
        // the cached gradient is at the old coordinates' current state
        self.dynamics.invalidate();
        true
    }

    fn reestimates_current_density(&self) -> bool {
        self.current_density == CurrentDensity::ReEstimate
    }

    fn kept_states(&self) -> Option<KeptStates> {
        self.surrogate.kept_states()
    }

    fn take_kept_states(&mut self) -> Vec<f64> {
        self.surrogate.take_kept_states()
    }

    fn summary(&self) -> AdaptationSummary {
        let mut extra = self.surrogate.counters();
        extra.push(("trajectories".to_string(), self.trajectories as f64));
        extra.push(("walk_steps".to_string(), self.walk_steps as f64));
        extra.push(("step_scale".to_string(), self.step_scale.value()));
        AdaptationSummary {
            scale: Some(self.walk.scale()),
            extra,
            ..AdaptationSummary::default()
        }
    }
}
