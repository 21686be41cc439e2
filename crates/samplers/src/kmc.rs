//! Kernel Hamiltonian Monte Carlo (KMC; Strathmann et al., NIPS 2015):
//! HMC whose leapfrog follows the gradient of a score-matching surrogate
//! `f̂ ≈ log π` learned from the chain history, with the accept step on the
//! **true** Hamiltonian.
//!
//! One step of [`Kmc`] from the current state x:
//!
//! 1. While the surrogate is not ready (too little history, no oracle warm
//!    start) the proposal is the isotropic [`RandomWalk`] (its scale fixed or
//!    Robbins–Monro adapted, see [`Kmc::with_walk_scale`]).
//! 2. Otherwise momentum p ~ N(0, I), ε ~ U[ε_lo, ε_hi), L ~ U{L_lo, …, L_hi}
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
use crate::engine::{AdaptationSummary, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, SamplerError, check_dim, ensure};
use crate::hmc::HamiltonianMove;
use crate::random_walk::RandomWalk;
use faer::MatRef;
use kameleon_features::FeatureMap;
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator, ScoreMatchingError};
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
}

/// The KMC lite surrogate: a [`LiteEstimator`] refitted on a random subsample
/// (without replacement) of size n of the whole chain history.
///
/// The first fit happens as soon as the history holds n points; after that
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
    fitted: bool,
    refits: u64,
    failed_fits: u64,
}

impl LiteSurrogate {
    /// Lite surrogate in dimension `dim` ≥ 1 fitting `model` on subsamples of
    /// size `subsample_size` ≥ 2, refitted with probability
    /// `schedule.probability(t)` at step t.
    pub fn new(
        model: LiteEstimator,
        dim: usize,
        subsample_size: usize,
        schedule: AdaptProbability,
    ) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        ensure(subsample_size >= 2, "subsample_size", "must be at least 2")?;
        schedule.validate()?;
        Ok(Self {
            model,
            history: History::new(dim),
            subsample_size,
            schedule,
            subsample: vec![0.0; subsample_size * dim],
            fitted: false,
            refits: 0,
            failed_fits: 0,
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
        check_dim(self.dim(), points.ncols())?;
        self.fit(points).map_err(surrogate_error)
    }

    fn learn(&mut self, state: &[f64], iteration: u64, rng: &mut dyn Rng) -> bool {
        self.history.push(state);
        if self.history.len() < self.subsample_size
            || (self.fitted && !self.schedule.decide(iteration, rng))
        {
            return false;
        }
        let mut subsample = std::mem::take(&mut self.subsample);
        let drawn = self.history.subsample_into(rng, &mut subsample);
        debug_assert!(drawn.is_ok(), "history holds at least n points");
        let d = self.dim();
        let fitted = self
            .fit(MatRef::from_row_major_slice(
                &subsample,
                self.subsample_size,
                d,
            ))
            .is_ok();
        self.subsample = subsample;
        if !fitted {
            self.failed_fits += 1;
        }
        fitted
    }

    fn gradient(&mut self, x: &[f64], out: &mut [f64]) {
        self.model.grad_log_density(x, out);
    }

    fn counters(&self) -> Vec<(String, f64)> {
        vec![
            ("lite_refits".to_string(), self.refits as f64),
            ("lite_failed_fits".to_string(), self.failed_fits as f64),
            ("history_len".to_string(), self.history.len() as f64),
        ]
    }

    fn kept_states(&self) -> Option<KeptStates> {
        Some(KeptStates {
            leading: 1,
            rows: self.history.len(),
        })
    }

    fn take_kept_states(&mut self) -> Vec<f64> {
        self.history.take_points()
    }
}

/// The KMC finite surrogate: a [`FiniteEstimator`] on a feature map, updated
/// online (exactly, O(dm²) per point) with every state of the chain while
/// adapting — or every `thin`-th state ([`FiniteSurrogate::with_thinning`]).
///
/// Each update moves θ̂ by O(1/t), so adapting forever is a diminishing
/// adaptation; stop it after burn-in to save the O(dm²) per step. The
/// surrogate is ready once it has seen `min_points` points. For the cheapest
/// exact updates (a rank-d Cholesky update and two triangular solves, no
/// iterative solve) give it an estimator with
/// [`kameleon_score_matching::RidgeSchedule::FixedOnSums`] (a ridge fixed on
/// the sums, fading like λ/t on the means; see its docs for the trade-off).
///
/// Serialisable (the estimator's sums, factor and θ̂), so a [`KmcFinite`]
/// run checkpoints and resumes bit-identically.
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
}

impl<F: FeatureMap> FiniteSurrogate<F> {
    /// Finite surrogate learning from every state, ready after `min_points`
    /// ≥ 1 points.
    pub fn new(model: FiniteEstimator<F>, min_points: usize) -> Result<Self> {
        ensure(min_points >= 1, "min_points", "must be at least 1")?;
        Ok(Self {
            model,
            min_points,
            thin: 1,
            offered: 0,
            failed_updates: 0,
        })
    }

    /// Learns only from every `thin`-th state offered (≥ 1; 1 = every state).
    pub fn with_thinning(mut self, thin: u64) -> Result<Self> {
        ensure(thin >= 1, "thin", "must be at least 1")?;
        self.thin = thin;
        Ok(self)
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
        check_dim(self.dim(), points.ncols())?;
        self.model.fit(points).map_err(surrogate_error)?;
        ensure(
            self.is_ready(),
            "points",
            "the warm start needs at least min_points points",
        )
    }

    fn learn(&mut self, state: &[f64], _iteration: u64, _rng: &mut dyn Rng) -> bool {
        self.offered += 1;
        if !(self.offered - 1).is_multiple_of(self.thin) {
            return false;
        }
        if self.model.update(state).is_err() {
            self.failed_updates += 1;
        }
        true
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

/// Kernel Hamiltonian Monte Carlo on a [`KmcSurrogate`]: leapfrog
/// trajectories on the surrogate gradient ∇f̂ ([`HamiltonianMove`], shared
/// with [`crate::Hmc`]), accepted with the true Hamiltonian, the surrogate
/// learning from the chain while adaptation is on, and random-walk steps
/// until it is ready. [`KmcLite`] and [`KmcFinite`] are the paper's two
/// variants.
///
/// ```
/// use kameleon_samplers::{AdaptProbability, KmcLite, LiteSurrogate, RunConfig, run_chain};
/// use kameleon_score_matching::LiteEstimator;
/// use kameleon_targets::Banana;
///
/// let target = Banana::new(2, 0.03, 100.0)?;
/// // f̂ = Σ αᵢ exp(−‖zᵢ − x‖²/σ) on n = 100 history points, refitted with
/// // probability t^(−1/2); random-walk steps until 100 points are seen.
/// let surrogate = LiteSurrogate::new(
///     LiteEstimator::new(50.0, 1e-3)?,
///     2,
///     100,
///     AdaptProbability::Power { kappa: 0.5 },
/// )?;
/// let kmc = KmcLite::new(surrogate, (0.2, 0.5), (1, 10))?;
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
    /// KMC with step size ε ~ U[step_size.0, step_size.1) and number of
    /// leapfrog steps L ~ U{steps.0, …, steps.1} drawn each iteration,
    /// momentum N(0, I), and the fixed random-walk scale 2.38/√d before the
    /// surrogate is ready.
    pub fn new(surrogate: S, step_size: (f64, f64), steps: (u32, u32)) -> Result<Self> {
        let dim = surrogate.dim();
        Ok(Self {
            dim,
            dynamics: HamiltonianMove::new(dim, step_size, steps)?,
            walk: RandomWalk::new(dim)?,
            surrogate,
            current_density: CurrentDensity::Reuse,
            last_was_walk: false,
            trajectories: 0,
            walk_steps: 0,
        })
    }

    /// Sets the scale of the random walk used before the surrogate is ready
    /// (an adaptive [`Scale`] learns while adaptation is on).
    pub fn with_walk_scale(mut self, scale: Scale) -> Result<Self> {
        self.walk = RandomWalk::with_scale(self.dim, scale)?;
        Ok(self)
    }

    /// **Oracle warm start**: fits the surrogate on given points (e.g. exact
    /// samples of π, as in the papers' "oracle" runs) before the chain
    /// starts, so trajectories start at once. Adaptation, if on, continues
    /// from the chain's own history.
    pub fn with_oracle_points(mut self, points: MatRef<'_, f64>) -> Result<Self> {
        self.surrogate.warm_start(points)?;
        Ok(self)
    }

    /// Chooses exact reuse (default) or the inexact MCWM re-estimation of the
    /// current state's log density.
    pub fn with_current_density(mut self, current_density: CurrentDensity) -> Self {
        self.current_density = current_density;
        self
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
    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_dim(self.dim, target.dim())?;
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
        self.dynamics.propose(current, proposed, rng, &mut grad)
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        if self.last_was_walk {
            // the cached gradient (if any) belongs to the old state
            self.dynamics.invalidate();
            self.walk.observe(outcome, adapt, rng);
        } else {
            self.dynamics.observe(outcome.accepted);
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
        AdaptationSummary {
            scale: Some(self.walk.scale()),
            extra,
            ..AdaptationSummary::default()
        }
    }
}
