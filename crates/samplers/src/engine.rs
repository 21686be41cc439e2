//! The one Metropolis–Hastings engine every sampler runs on.
//!
//! A sampler is a [`Proposal`] plugged into [`MetropolisHastings`]. One step:
//!
//! 1. the proposal draws x* from the current state x and returns the log
//!    correction `log q(x | x*) − log q(x* | x)` (plus any extra term such as
//!    the kinetic energies `K(p) − K(p*)` of an HMC-type proposal);
//! 2. the engine evaluates log π(x*) **once** (NaN is treated as −∞); the
//!    current state's log density is the stored value, never re-evaluated
//!    (this is what keeps pseudo-marginal targets exact) — unless the
//!    proposal explicitly asks for the inexact MCWM variant
//!    ([`Proposal::reestimates_current_density`]);
//! 3. it accepts with log u < log π(x*) − log π(x) + correction, in log space;
//!    a non-finite proposal, correction or log density is rejected and counted;
//! 4. only then the proposal is told the outcome ([`Proposal::observe`]): it
//!    swaps cached factorisations on acceptance and adapts (when the engine
//!    says adaptation is still on) with the acceptance probability
//!    min(1, ratio), never the unclipped ratio.

use crate::Target;
use crate::error::{Result, SamplerError, check_dim};
use rand::{Rng, RngExt};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Everything a proposal learns after the engine's accept/reject decision.
#[derive(Debug, Clone, Copy)]
pub struct StepOutcome<'a> {
    /// The 1-based index of the step just taken.
    pub iteration: u64,
    /// The state before the step, x_t.
    pub previous: &'a [f64],
    /// The proposed point x* (possibly non-finite if the proposal diverged).
    pub proposed: &'a [f64],
    /// The state after the step, x_{t+1} (`proposed` if accepted, else `previous`).
    pub current: &'a [f64],
    /// The stored log density of `current`.
    pub log_density: f64,
    /// Whether x* was accepted.
    pub accepted: bool,
    /// The acceptance probability min(1, ratio); 0 for non-finite proposals.
    pub accept_prob: f64,
}

/// A summary of a proposal's adapted state, stored in the output [`crate::Chain`].
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AdaptationSummary {
    /// The proposal's global scale ν (standard-deviation scale), if it has one.
    pub scale: Option<f64>,
    /// The adapted mean estimate, if any.
    pub mean: Option<Vec<f64>>,
    /// The adapted covariance (d × d, row-major), if any.
    pub covariance: Option<Vec<f64>>,
    /// Further named scalars (e.g. per-direction scales, subsample size).
    pub extra: Vec<(String, f64)>,
}

/// An affine change of a proposal's coordinates, u_new = B (u_old − c),
/// announced by [`Proposal::change_coordinates`]: B is a d × d invertible
/// matrix (row-major) and c a point of the old coordinates (the new origin).
#[derive(Debug, Clone, PartialEq)]
pub struct CoordinateChange {
    matrix: Vec<f64>,
    shift: Vec<f64>,
}

impl CoordinateChange {
    /// The change u ↦ B (u − c) for `matrix` B (d × d, row-major) and
    /// `shift` c (length d). Errors unless the sizes match and every entry
    /// is finite.
    pub fn new(matrix: Vec<f64>, shift: Vec<f64>) -> Result<Self> {
        let d = shift.len();
        if d == 0 || matrix.len() != d * d {
            return Err(SamplerError::InvalidParameter {
                name: "matrix",
                reason: format!("must be d × d for the shift's d = {d} ≥ 1"),
            });
        }
        if !matrix.iter().chain(&shift).all(|v| v.is_finite()) {
            return Err(SamplerError::InvalidParameter {
                name: "matrix",
                reason: "entries must be finite".into(),
            });
        }
        Ok(Self { matrix, shift })
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.shift.len()
    }

    /// B, d × d row-major.
    pub fn matrix(&self) -> &[f64] {
        &self.matrix
    }

    /// c, the new origin in the old coordinates.
    pub fn shift(&self) -> &[f64] {
        &self.shift
    }

    /// Rewrites the point `u` (length d) in place from the old coordinates
    /// into the new ones, using `scratch` (length d) for u − c.
    pub fn apply_in_place(&self, u: &mut [f64], scratch: &mut [f64]) {
        let d = self.dim();
        for ((s, x), c) in scratch.iter_mut().zip(u.iter()).zip(&self.shift) {
            *s = x - c;
        }
        for (i, out) in u.iter_mut().enumerate() {
            let row = &self.matrix[i * d..(i + 1) * d];
            *out = row.iter().zip(scratch.iter()).map(|(b, v)| b * v).sum();
        }
    }

    /// Rewrites every point of `points` (n × d row-major) in place.
    pub fn apply_to_rows(&self, points: &mut [f64]) {
        let d = self.dim();
        let mut scratch = vec![0.0; d];
        for row in points.chunks_exact_mut(d) {
            self.apply_in_place(row, &mut scratch);
        }
    }
}

/// A Metropolis–Hastings proposal, together with whatever it adapts.
///
/// Implement this to add a sampler; [`MetropolisHastings`] does the rest. A
/// proposal that wants checkpointing must also be `Serialize + Deserialize`.
///
/// Caching for state-dependent proposals (KAMH-style): keep the factorisation
/// at the current state in one slot; in [`Proposal::propose`] build the one at
/// x* (needed for the reverse density) in a second slot; in
/// [`Proposal::observe`] swap the slots if `outcome.accepted`. Then each
/// iteration builds exactly one new factorisation, and the forward and
/// reverse densities use the same adaptive quantities (e.g. subsample),
/// because adaptation happens only in `observe`, after the decision.
pub trait Proposal: Send {
    /// Told once, before [`Proposal::initialise`], the last step at which
    /// the engine lets the proposal adapt (`None`: every step). A proposal
    /// that divides its adaptation into phases (the pilot of
    /// [`crate::Whitened`]) sizes them from it. Default: ignored.
    fn plan_adaptation(&mut self, adapt_until: Option<u64>) {
        let _ = adapt_until;
    }

    /// The dimension of the states the proposal was built for, if it has
    /// one (every sampler of this crate does). [`crate::Whitened`] checks
    /// the proposal it wraps against its own dimension with it. Default
    /// `None`: not known until [`Proposal::initialise`] sees the target.
    fn state_dim(&self) -> Option<usize> {
        None
    }

    /// Called once when a chain starts at `x` (a point of finite log density):
    /// build caches, check the target offers what the proposal needs.
    /// `adapts` says whether the chain's first step adapts: if not, the
    /// proposal must start with exactly the kernel it holds (nothing it has
    /// learned may change, not even by recording `x`).
    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        let _ = (target, x, adapts);
        Ok(())
    }

    /// Draws x* into `proposed` given the current state `current` and returns
    /// the log correction `log q(current | x*) − log q(x* | current)` added to
    /// the log target ratio (0 for symmetric proposals; for HMC-type proposals
    /// `K(p) − K(p*)`). A non-finite return or x* rejects the step (counted).
    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64;

    /// Told the outcome of the step after the decision. Swap caches here; adapt
    /// only if `adapt` (the engine turns adaptation off after its stop point).
    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng);

    /// [`Proposal::observe`] as the engine calls it, with the chain's
    /// generator as its own type: a proposal that draws many words while
    /// adapting (KAMH's subsample of the history) overrides it to draw them
    /// inlined, the generator's state in registers, instead of through one
    /// dynamically dispatched call per word. An override must do exactly
    /// what `observe` does with the same generator. Default: `observe`.
    fn observe_chain(
        &mut self,
        outcome: &StepOutcome<'_>,
        adapt: bool,
        rng: &mut Xoshiro256PlusPlus,
    ) {
        self.observe(outcome, adapt, rng);
    }

    /// Told, while adaptation is on and between two steps, that the
    /// coordinates the proposal runs in change by `change`
    /// (u_new = B (u_old − c)): the chain's states, and every state the
    /// proposal has learned from, are from now on given in the new
    /// coordinates. A proposal that supports it rewrites what it has
    /// learned into the new coordinates (it may draw from `rng`, e.g. to
    /// refit) and returns `true`; one that returns `false` must keep
    /// working in the old coordinates, as it was. [`crate::Whitened`] calls
    /// it when it re-estimates its map. Default: `false`, unsupported.
    fn change_coordinates(&mut self, change: &CoordinateChange, rng: &mut dyn Rng) -> bool {
        let _ = (change, rng);
        false
    }

    /// Told, while adaptation is on and before the proposal's first step,
    /// states of a pilot that ran before it (row-major, in the coordinates
    /// the proposal runs in), to learn from as from the chain's own states
    /// (KMC's surrogate adds them to what it fits). [`crate::Whitened`]
    /// hands its pilot's last window over when the wrapped proposal
    /// starts, if [`Proposal::learns_from_pilot`]. Default: ignored.
    fn learn_from_pilot(&mut self, states: &[f64]) {
        let _ = states;
    }

    /// Whether [`Proposal::learn_from_pilot`] uses the states it is told,
    /// so that a pilot keeps them (default `false`: they are not copied).
    fn learns_from_pilot(&self) -> bool {
        false
    }

    /// Whether the proposal evaluates the target's gradient
    /// ([`Target::grad_log_density`]), as [`crate::Hmc`] does. A wrapper
    /// that starts the proposal it wraps later than the chain
    /// ([`crate::Whitened`], after its pilot) asks it, to check at the
    /// chain's start that the target gives a gradient. A wrapper forwards
    /// its wrapped proposal's answer. Default `false`.
    fn uses_target_gradient(&self) -> bool {
        false
    }

    /// Whether the state after the step just observed is a draw of the
    /// chain: a [`crate::Run`] records a post-burn-in (thinned) step only if
    /// this says so. Default `true`, every step; cKAM answers `true` for its
    /// sampling steps only. A proposal that keeps states
    /// ([`Proposal::kept_states`]) must record every step.
    fn records_last_step(&self) -> bool {
        true
    }

    /// Whether the engine re-estimates log π̂ of the current state before each
    /// step ("Monte Carlo within Metropolis", MCWM) instead of reusing the
    /// stored value. Default `false`, the exact pseudo-marginal algorithm;
    /// `true` is **inexact** for noisy targets and costs one more target
    /// evaluation per step. Offer it only as a clearly named option.
    fn reestimates_current_density(&self) -> bool {
        false
    }

    /// The adapted state for the chain output.
    fn summary(&self) -> AdaptationSummary {
        AdaptationSummary::default()
    }

    /// How many times a covariance needed jitter to be factored.
    fn covariance_jitters(&self) -> u64 {
        0
    }

    /// Log-density evaluations the proposal made itself, outside the
    /// engine's one per step (e.g. [`crate::Whitened`]'s curvature at the
    /// start). A proposal evaluates the target only in
    /// [`Proposal::initialise`], at the chain's start: an evaluation limit
    /// ([`crate::RunConfig::max_evaluations`]) bounds a step's evaluations
    /// by [`MetropolisHastings::most_step_evaluations`]. Default 0.
    fn target_evaluations(&self) -> u64 {
        0
    }

    /// Whether the proposal keeps the chain's states for its adaptation:
    /// `Some` if it keeps, in chain order, the state x_t after every adapting
    /// step t and nothing else (after [`KeptStates::leading`] earlier rows,
    /// once the first adapting step is observed), as KAMH's history does.
    /// A [`crate::Run`] then records no second copy of those states and
    /// takes them back with [`Proposal::take_kept_states`] when it ends: the
    /// chain's samples are the history itself. Default `None`.
    fn kept_states(&self) -> Option<KeptStates> {
        None
    }

    /// Moves the states described by [`Proposal::kept_states`] out
    /// (row-major), leaving the proposal's history empty. Called once by
    /// [`crate::Run`] when a run that shares them ends.
    fn take_kept_states(&mut self) -> Vec<f64> {
        Vec::new()
    }
}

/// [`MetropolisHastings::most_step_evaluations`] of an engine running
/// `proposal`.
pub(crate) fn most_step_evaluations<P: Proposal>(proposal: &P) -> u64 {
    1 + u64::from(proposal.reestimates_current_density())
}

/// The shape of the states a proposal keeps ([`Proposal::kept_states`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeptStates {
    /// Rows kept before x_1 once the first adapting step is observed (1 for
    /// KMC lite, which keeps the starting point x_0 too; 0 for KAMH).
    pub leading: usize,
    /// Rows kept so far.
    pub rows: usize,
}

/// Checks a starting point `x0` for a target of dimension `dim`:
/// [`SamplerError::DimensionMismatch`] for another length,
/// [`SamplerError::NonFiniteStart`] for a coordinate that is not finite.
pub(crate) fn check_start(x0: &[f64], dim: usize) -> Result<()> {
    check_dim(
        "the starting point's length",
        x0.len(),
        "the target's dimension",
        dim,
    )?;
    match x0.iter().position(|v| !v.is_finite()) {
        Some(index) => Err(SamplerError::NonFiniteStart {
            index,
            value: x0[index],
        }),
        None => Ok(()),
    }
}

/// What one [`MetropolisHastings::step`] did.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepInfo {
    /// Whether the proposal was accepted.
    pub accepted: bool,
    /// min(1, ratio); 0 when the proposal was non-finite.
    pub accept_prob: f64,
    /// Whether the proposal was rejected for a non-finite value.
    pub non_finite: bool,
}

/// A step begun by [`MetropolisHastings::begin_step`], waiting for the log
/// density of its proposed point to be finished by
/// [`MetropolisHastings::finish_step`].
#[derive(Debug)]
#[must_use = "a begun step must be finished with `finish_step`"]
pub struct PendingStep {
    /// The proposal's log correction.
    correction: f64,
    /// Whether x* and the correction are finite (else the step is rejected
    /// without evaluating x*).
    finite_draw: bool,
}

impl PendingStep {
    /// Whether the proposed point needs its log density: `false` when the
    /// draw or its correction is not finite, a rejection whatever the value.
    pub fn needs_density(&self) -> bool {
        self.finite_draw
    }
}

/// The Metropolis–Hastings engine: the chain's state, its rng and a proposal.
///
/// Serialising it (with its proposal) is a complete checkpoint: the rng state,
/// the current point and its stored log density, the iteration count and the
/// adaptation state are all in it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MetropolisHastings<P> {
    proposal: P,
    x: Vec<f64>,
    log_density: f64,
    proposed: Vec<f64>,
    rng: Xoshiro256PlusPlus,
    iteration: u64,
    adapt_until: Option<u64>,
    accepted: u64,
    rejected_non_finite: u64,
    #[serde(default)]
    evaluations: u64,
}

impl<P: Proposal> MetropolisHastings<P> {
    /// Starts a chain at `x0` with the given rng. Adaptation runs for steps
    /// `1..=adapt_until` (forever if `None`). Evaluates log π(x0) once.
    /// Errors if `x0` has the wrong length or a non-finite coordinate, if its
    /// log density is not finite, or if the proposal refuses to start.
    pub fn new(
        target: &dyn Target,
        mut proposal: P,
        x0: &[f64],
        mut rng: Xoshiro256PlusPlus,
        adapt_until: Option<u64>,
    ) -> Result<Self> {
        let d = target.dim();
        check_start(x0, d)?;
        let log_density = target.log_density(x0, &mut rng);
        if !log_density.is_finite() {
            return Err(SamplerError::StartOutsideSupport(log_density));
        }
        proposal.plan_adaptation(adapt_until);
        proposal.initialise(target, x0, adapt_until.is_none_or(|n| n >= 1))?;
        Ok(Self {
            proposal,
            x: x0.to_vec(),
            log_density,
            proposed: vec![0.0; d],
            rng,
            iteration: 0,
            adapt_until,
            accepted: 0,
            rejected_non_finite: 0,
            evaluations: 1,
        })
    }

    /// One Metropolis–Hastings step (allocation-free):
    /// [`MetropolisHastings::begin_step`], log π of the proposed point from
    /// `target` with the chain's rng, [`MetropolisHastings::finish_step`].
    pub fn step(&mut self, target: &dyn Target) -> StepInfo {
        let pending = self.begin_step(target);
        let log_density = if pending.needs_density() {
            target.log_density(&self.proposed, &mut self.rng)
        } else {
            f64::NEG_INFINITY
        };
        self.finish_step(pending, log_density)
    }

    /// The first half of a step: draws the proposed point x*
    /// ([`MetropolisHastings::proposed`]) and returns what
    /// [`MetropolisHastings::finish_step`] needs besides log π(x*). Splitting
    /// the step lets a caller gather the proposed points of many chains and
    /// evaluate them together; the step is then the one
    /// [`MetropolisHastings::step`] takes, bit for bit, as long as the
    /// evaluation does not draw from the chain's rng (an exact target's
    /// does not; a pseudo-marginal estimate does, so a noisy target must
    /// use `step`). `target` still serves the proposal (gradients, the MCWM
    /// re-estimate of the current state).
    pub fn begin_step(&mut self, target: &dyn Target) -> PendingStep {
        self.iteration += 1;
        if self.proposal.reestimates_current_density() {
            // MCWM (inexact, opt-in): a fresh estimate replaces the stored one.
            let fresh = target.log_density(&self.x, &mut self.rng);
            self.evaluations += 1;
            self.log_density = if fresh.is_nan() {
                f64::NEG_INFINITY
            } else {
                fresh
            };
        }
        let correction = self
            .proposal
            .propose(target, &self.x, &mut self.proposed, &mut self.rng);
        let finite_draw = correction.is_finite() && self.proposed.iter().all(|v| v.is_finite());
        if finite_draw {
            self.evaluations += 1;
        }
        PendingStep {
            correction,
            finite_draw,
        }
    }

    /// The point x* drawn by the last [`MetropolisHastings::begin_step`].
    pub fn proposed(&self) -> &[f64] {
        &self.proposed
    }

    /// The second half of a step begun by
    /// [`MetropolisHastings::begin_step`]: accepts or rejects x* given its
    /// log density `proposal_log_density` (ignored, and the step rejected,
    /// if the draw was not finite: see [`PendingStep::needs_density`]),
    /// then tells the proposal the outcome.
    pub fn finish_step(&mut self, pending: PendingStep, proposal_log_density: f64) -> StepInfo {
        let PendingStep {
            correction,
            finite_draw,
        } = pending;
        let proposal_log_density = if finite_draw {
            proposal_log_density
        } else {
            f64::NEG_INFINITY
        };
        let log_ratio = proposal_log_density - self.log_density + correction;
        let non_finite = !proposal_log_density.is_finite() || log_ratio.is_nan();
        // One uniform per step whatever happens, so the rng stream's layout
        // does not depend on the values.
        let u: f64 = self.rng.random();
        let (accepted, accept_prob) = if non_finite {
            self.rejected_non_finite += 1;
            (false, 0.0)
        } else {
            (u.ln() < log_ratio, log_ratio.min(0.0).exp())
        };
        if accepted {
            std::mem::swap(&mut self.x, &mut self.proposed);
            self.log_density = proposal_log_density;
            self.accepted += 1;
        }
        let (previous, current) = if accepted {
            (&self.proposed, &self.x)
        } else {
            (&self.x, &self.x)
        };
        let outcome = StepOutcome {
            iteration: self.iteration,
            previous,
            proposed: if accepted { &self.x } else { &self.proposed },
            current,
            log_density: self.log_density,
            accepted,
            accept_prob,
        };
        let adapt = self.adapt_until.is_none_or(|n| self.iteration <= n);
        self.proposal.observe_chain(&outcome, adapt, &mut self.rng);
        StepInfo {
            accepted,
            accept_prob,
            non_finite,
        }
    }

    /// The current state x_t.
    pub fn position(&self) -> &[f64] {
        &self.x
    }

    /// The stored log density of the current state.
    pub fn log_density(&self) -> f64 {
        self.log_density
    }

    /// The number of steps taken so far.
    pub fn iteration(&self) -> u64 {
        self.iteration
    }

    /// The number of accepted proposals so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// The number of proposals rejected because x*, the proposal correction or
    /// log π(x*) was non-finite (NaN or −∞, i.e. also outside the support).
    pub fn rejected_non_finite(&self) -> u64 {
        self.rejected_non_finite
    }

    /// Log-density evaluations so far: the start, one per finite proposal
    /// and the MCWM re-estimates.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }

    /// The most log-density evaluations one step makes: one for the
    /// proposed point, and one more when the proposal re-estimates the
    /// current state's density ([`Proposal::reestimates_current_density`]).
    /// A step whose draw is not finite makes none.
    pub fn most_step_evaluations(&self) -> u64 {
        most_step_evaluations(&self.proposal)
    }

    /// The last step at which adaptation is on (`None`: always).
    pub fn adapt_until(&self) -> Option<u64> {
        self.adapt_until
    }

    /// The proposal and its adaptation state.
    pub fn proposal(&self) -> &P {
        &self.proposal
    }

    /// The chain's rng (its state is part of a checkpoint).
    pub fn rng(&self) -> &Xoshiro256PlusPlus {
        &self.rng
    }

    /// The proposal, mutably (for the runner's hand-over of kept states).
    pub(crate) fn proposal_mut(&mut self) -> &mut P {
        &mut self.proposal
    }
}
