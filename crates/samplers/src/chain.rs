//! Chain output, the run configuration, the single- and multi-chain runners,
//! and checkpoint/resume.

use crate::Target;
use crate::engine::{AdaptationSummary, MetropolisHastings, Proposal, StepInfo};
use crate::error::{Result, SamplerError, ensure};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use rayon::prelude::*;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Instant;

/// The output of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Chain {
    /// The dimension d.
    pub dim: usize,
    /// The recorded (post-burn-in, thinned) states, n × d row-major.
    pub samples: Vec<f64>,
    /// For each recorded state, whether the step that produced it accepted.
    pub accepted: Vec<bool>,
    /// For each recorded state, its stored log density.
    pub log_densities: Vec<f64>,
    /// For each recorded state, the acceptance probability min(1, ratio) of
    /// the step that produced it (0 for a non-finite proposal).
    pub accept_probabilities: Vec<f64>,
    /// Wall-clock seconds spent stepping (burn-in included, summed over resumes).
    pub wall_time_secs: f64,
    /// The proposal's adaptation state at the end of the run.
    pub adaptation: AdaptationSummary,
    /// The base seed: this chain's rng is `Xoshiro256PlusPlus::seed_from_u64(seed)`
    /// advanced by `chain_index` jumps of 2¹²⁸ steps.
    pub seed: u64,
    /// The chain's index within a multi-chain run.
    pub chain_index: u64,
    /// The run's configuration.
    pub config: RunConfig,
    /// Steps taken, burn-in included: `config.total_steps()` for a finished
    /// run, fewer for a chain taken from a run part of the way
    /// ([`Run::into_chain`]).
    #[serde(default)]
    pub steps: u64,
    /// Accepted proposals over all steps, burn-in included.
    pub accepted_total: u64,
    /// Proposals rejected because x*, the proposal correction or log π(x*)
    /// was non-finite (NaN, −∞ outside the support, or +∞, which no
    /// density can be where a chain goes), over all steps.
    pub rejected_non_finite: u64,
    /// How many times a proposal covariance needed jitter to be factored.
    pub covariance_jitters: u64,
    /// Log-density evaluations over the whole run: the engine's (the start,
    /// one per finite proposal, MCWM re-estimates) and the proposal's own
    /// ([`crate::Proposal::target_evaluations`]).
    #[serde(default)]
    pub evaluations: u64,
}

/// The most states whose room a run reserves up front; longer runs grow
/// their buffers as they record (so a huge `iterations` costs nothing before
/// it is reached).
const RESERVED_STATES: usize = 1 << 16;

/// How many of `rows` states to reserve room for up front: all of them, up
/// to [`RESERVED_STATES`].
pub(crate) fn reserved_rows(rows: u64) -> usize {
    usize::try_from(rows).map_or(RESERVED_STATES, |r| r.min(RESERVED_STATES))
}

/// Room for [`reserved_rows`]`(rows)` states of `width` values each.
fn reserved<T>(rows: u64, width: usize) -> Vec<T> {
    Vec::with_capacity(reserved_rows(rows) * width)
}

impl Chain {
    /// An empty chain for a run of `config` in dimension `dim`, with room for
    /// `copied_rows` sample rows (capped, see [`reserved`]). `config` must be
    /// validated; errors if its recorded states of dimension `dim` cannot be
    /// addressed.
    pub(crate) fn empty(
        dim: usize,
        config: RunConfig,
        seed: u64,
        chain_index: u64,
        copied_rows: u64,
    ) -> Result<Self> {
        config.recorded_values(dim)?;
        let recorded = config.iterations / config.thin;
        Ok(Self {
            dim,
            samples: reserved(copied_rows, dim),
            accepted: reserved(recorded, 1),
            log_densities: reserved(recorded, 1),
            accept_probabilities: reserved(recorded, 1),
            wall_time_secs: 0.0,
            adaptation: AdaptationSummary::default(),
            seed,
            chain_index,
            config,
            steps: 0,
            accepted_total: 0,
            rejected_non_finite: 0,
            covariance_jitters: 0,
            evaluations: 0,
        })
    }

    /// The number of recorded states.
    pub fn len(&self) -> usize {
        self.accepted.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.accepted.is_empty()
    }

    /// The i-th recorded state.
    ///
    /// # Panics
    ///
    /// If `i` is not below [`Chain::len`].
    pub fn sample(&self, i: usize) -> &[f64] {
        &self.samples[i * self.dim..(i + 1) * self.dim]
    }

    /// The fraction of accepted proposals over the steps taken (burn-in
    /// included); 0 before the first step.
    pub fn acceptance_rate(&self) -> f64 {
        if self.steps == 0 {
            0.0
        } else {
            self.accepted_total as f64 / self.steps as f64
        }
    }

    /// The mean of the recorded states per dimension; NaN in every
    /// coordinate if nothing was recorded. The mean of no states is
    /// undefined: NaN cannot be mistaken for an estimate (zeros could), it
    /// propagates through whatever is computed from it, and a caller that
    /// must know checks [`Chain::is_empty`] first.
    pub fn mean(&self) -> Vec<f64> {
        let mut m = vec![0.0; self.dim];
        for i in 0..self.len() {
            for (mj, xj) in m.iter_mut().zip(self.sample(i)) {
                *mj += xj;
            }
        }
        // 0/0 = NaN for an empty chain
        let n = self.len() as f64;
        m.iter_mut().for_each(|v| *v /= n);
        m
    }
}

/// When adaptation stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AdaptationStop {
    /// Adapt during burn-in only (the usual choice; the recorded chain is then
    /// a plain Markov chain).
    AfterBurnIn,
    /// Adapt at every step (use vanishing schedules).
    Never,
    /// Adapt during the first n steps.
    After(u64),
}

/// How long to run and what to record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RunConfig {
    /// Steps discarded before recording starts.
    pub burn_in: u64,
    /// Steps after burn-in.
    pub iterations: u64,
    /// Record every `thin`-th post-burn-in state (≥ 1).
    pub thin: u64,
    /// When adaptation stops.
    pub adaptation: AdaptationStop,
    /// The most log-density evaluations the chain may make, its start
    /// included (`None`: no limit; see [`RunConfig::max_evaluations`]).
    pub max_evaluations: Option<u64>,
}

impl RunConfig {
    /// `burn_in` + `iterations` steps, no thinning, adaptation during burn-in.
    pub const fn new(burn_in: u64, iterations: u64) -> Self {
        Self {
            burn_in,
            iterations,
            thin: 1,
            adaptation: AdaptationStop::AfterBurnIn,
            max_evaluations: None,
        }
    }

    /// `burn_in` steps, then `draws` recorded states, one every `thin`
    /// steps (`iterations` = `draws · thin`), adaptation during burn-in;
    /// errors if `thin` is 0 or `draws · thin` overflows a u64.
    ///
    /// ```
    /// use kameleon_samplers::RunConfig;
    /// let config = RunConfig::for_draws(100, 50, 4)?;
    /// assert_eq!((config.iterations, config.thin), (200, 4));
    /// assert!(RunConfig::for_draws(0, 1 << 40, 1 << 30).is_err());
    /// # Ok::<(), kameleon_samplers::SamplerError>(())
    /// ```
    pub fn for_draws(burn_in: u64, draws: u64, thin: u64) -> Result<Self> {
        ensure(thin >= 1, "thin", "must be at least 1")?;
        let iterations = draws
            .checked_mul(thin)
            .ok_or_else(|| SamplerError::InvalidParameter {
                name: "draws",
                reason: format!("{draws} draws × thin {thin} overflows the step counter (u64)"),
            })?;
        Ok(Self::new(burn_in, iterations).thin(thin))
    }

    /// Sets the thinning.
    pub fn thin(mut self, thin: u64) -> Self {
        self.thin = thin;
        self
    }

    /// Sets when adaptation stops.
    pub fn adaptation(mut self, stop: AdaptationStop) -> Self {
        self.adaptation = stop;
        self
    }

    /// Limits the chain to `limit` log-density evaluations in all: the
    /// start (log π at x₀ and whatever the proposal evaluates there, such
    /// as [`crate::Whitened`]'s curvature) and every step. The chain stops
    /// before a step that could take it past the limit (one evaluation per
    /// step, two when the current state's estimate is refreshed: see
    /// [`MetropolisHastings::most_step_evaluations`]), so its steps are
    /// those of the unlimited chain, up to where it stops. [`Run::new`]
    /// errors ([`SamplerError::EvaluationLimit`]) when the limit cannot
    /// cover the start and the steps to the first draw.
    ///
    /// ```
    /// use kameleon_samplers::{FnTarget, RandomWalk, RandomWalkConfig, Run, RunConfig};
    /// let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
    /// let walk = RandomWalk::new(2, RandomWalkConfig::default())?;
    /// let config = RunConfig::new(10, 1000).max_evaluations(101);
    /// let mut run = Run::new(&target, walk, &[0.0, 0.0], config, 7, 0)?;
    /// run.advance(&target, u64::MAX, None)?;
    /// // the start, then 100 steps of one evaluation each
    /// assert!(run.is_finished() && run.out_of_evaluations());
    /// assert_eq!((run.steps_done(), run.evaluations()), (100, 101));
    /// # Ok::<(), kameleon_samplers::SamplerError>(())
    /// ```
    pub fn max_evaluations(mut self, limit: u64) -> Self {
        self.max_evaluations = Some(limit);
        self
    }

    /// Checks the configuration: `thin` ≥ 1, `burn_in + iterations` fits in
    /// a `u64`, and the recorded length `iterations / thin` can be held in
    /// memory on this platform (one `f64` per state, at least).
    pub fn validate(&self) -> Result<()> {
        ensure(self.thin >= 1, "thin", "must be at least 1")?;
        if self.burn_in.checked_add(self.iterations).is_none() {
            return Err(SamplerError::InvalidParameter {
                name: "iterations",
                reason: format!(
                    "burn_in ({}) + iterations ({}) overflows the step counter (u64)",
                    self.burn_in, self.iterations
                ),
            });
        }
        self.recorded_values(1).map(|_| ())
    }

    /// The number of values `iterations / thin` recorded states of `dim`
    /// coordinates take, or an error if they cannot be addressed on this
    /// platform (more than `isize::MAX` bytes of `f64`s).
    pub(crate) fn recorded_values(&self, dim: usize) -> Result<usize> {
        let recorded = self.iterations / self.thin.max(1);
        usize::try_from(recorded)
            .ok()
            .and_then(|rows| rows.checked_mul(dim))
            .filter(|&values| values <= isize::MAX as usize / size_of::<f64>())
            .ok_or_else(|| SamplerError::InvalidParameter {
                name: "iterations",
                // validate() checks the count alone (dim = 1): no dimension
                // to name then
                reason: if dim == 1 {
                    format!(
                        "{recorded} recorded states (iterations / thin) cannot be addressed \
                         on this platform"
                    )
                } else {
                    format!(
                        "{recorded} recorded states (iterations / thin) of dimension {dim} \
                         cannot be addressed on this platform"
                    )
                },
            })
    }

    /// The last adapting step (`None`: always adapt).
    pub fn adapt_until(&self) -> Option<u64> {
        match self.adaptation {
            AdaptationStop::AfterBurnIn => Some(self.burn_in),
            AdaptationStop::Never => None,
            AdaptationStop::After(n) => Some(n),
        }
    }

    /// The total number of steps.
    pub fn total_steps(&self) -> u64 {
        self.burn_in + self.iterations
    }

    /// Whether the state after step t is recorded.
    fn records(&self, t: u64) -> bool {
        t > self.burn_in && (t - self.burn_in).is_multiple_of(self.thin)
    }

    /// How many of the steps `after + 1 ..= total_steps()` are recorded.
    fn recorded_after(&self, after: u64) -> u64 {
        let recorded_by = |t: u64| t.saturating_sub(self.burn_in) / self.thin;
        recorded_by(self.total_steps()) - recorded_by(after.min(self.total_steps()))
    }
}

/// A progress report, sent every ~1% of a chain's steps and at its end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// The chain's index.
    pub chain_index: u64,
    /// Steps done.
    pub step: u64,
    /// Steps in the whole run.
    pub total: u64,
}

/// A progress callback (called from worker threads in multi-chain runs).
pub type ProgressFn<'a> = &'a (dyn Fn(Progress) + Sync);

/// The largest chain index a run accepts ([`Run::new`]): [`chain_rng`] makes
/// one jump per index, so 2²⁰ chains cost about a second of jumps; far more
/// would hang the start of a run.
pub const MAX_CHAIN_INDEX: u64 = 1 << 20;

/// Errors unless `chain_index` is at most [`MAX_CHAIN_INDEX`].
pub(crate) fn check_chain_index(chain_index: u64) -> Result<()> {
    ensure(
        chain_index <= MAX_CHAIN_INDEX,
        "chain_index",
        "must be at most MAX_CHAIN_INDEX (2^20): each index is a jump of the generator",
    )
}

/// The rng of chain `chain_index` for a base `seed`: seeded with
/// `seed_from_u64(seed)` and advanced by `chain_index` jumps of 2¹²⁸ steps, so
/// the streams never overlap and do not depend on the number of threads.
/// The jumps take time linear in `chain_index` (about 1 µs each).
pub fn chain_rng(seed: u64, chain_index: u64) -> Xoshiro256PlusPlus {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    for _ in 0..chain_index {
        rng.jump();
    }
    rng
}

/// A run in progress: the engine plus what has been recorded so far.
/// Serialising it is a complete checkpoint ([`Run::checkpoint`], [`Run::resume`]).
///
/// **One copy of each state.** If the proposal keeps every adapting state
/// anyway ([`Proposal::kept_states`], e.g. KAMH's history) and starts with an
/// empty history, the run does not record those states a second time: while
/// adapting it records only the acceptance flags and log densities, and
/// [`Run::into_chain`] takes the history's buffer, keeps the recorded rows
/// (burn-in dropped, thinned) in place and puts them before the states
/// recorded after adaptation stopped. The chain is the one a copying run
/// gives, bit for bit; a KAMH chain of 10⁶ steps adapting throughout holds
/// its 10⁶ states once (64 MB in d = 8), not twice, and no state is ever
/// held twice on the way.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run<P> {
    sampler: MetropolisHastings<P>,
    chain: Chain,
    /// The proposal's kept states stand for the recorded states of the
    /// adapting steps (decided once, at the start).
    shares_states: bool,
}

impl<P: Proposal> Run<P> {
    /// Starts chain `chain_index` of base `seed` at `x0` (see [`chain_rng`]);
    /// errors if `chain_index` exceeds [`MAX_CHAIN_INDEX`], or if the
    /// evaluation limit of `config` ([`RunConfig::max_evaluations`]) does
    /// not cover the start and the steps to the first draw.
    pub fn new(
        target: &dyn Target,
        proposal: P,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain_index: u64,
    ) -> Result<Self> {
        check_chain_index(chain_index)?;
        Self::with_rng(
            target,
            proposal,
            x0,
            config,
            seed,
            chain_index,
            chain_rng(seed, chain_index),
        )
    }

    fn with_rng(
        target: &dyn Target,
        proposal: P,
        x0: &[f64],
        config: RunConfig,
        seed: u64,
        chain_index: u64,
        rng: Xoshiro256PlusPlus,
    ) -> Result<Self> {
        config.validate()?;
        let sampler = match config.max_evaluations {
            None => MetropolisHastings::new(target, proposal, x0, rng, config.adapt_until())?,
            Some(limit) => Self::start_within(target, proposal, x0, config, rng, limit)?,
        };
        // a proposal that already holds states (e.g. reused from another
        // chain) does not describe this chain alone: copy as usual
        let shares_states = sampler
            .proposal()
            .kept_states()
            .is_some_and(|kept| kept.rows == 0);
        let dim = target.dim();
        let copied_rows = if shares_states {
            config.recorded_after(config.adapt_until().unwrap_or(u64::MAX))
        } else {
            config.iterations / config.thin
        };
        let chain = Chain::empty(dim, config, seed, chain_index, copied_rows)?;
        Ok(Self {
            sampler,
            chain,
            shares_states,
        })
    }

    /// Starts the engine under the evaluation limit `limit` of `config`:
    /// the evaluations of the steps to the first draw (or of every step, if
    /// the run records none) at their most are set aside first, and the
    /// start may use the rest. Errors up front if nothing is left for it,
    /// and after the start if it needed more than was left: its
    /// evaluations past that are then not made (they are answered by NaN,
    /// and the half-built engine is dropped).
    fn start_within(
        target: &dyn Target,
        proposal: P,
        x0: &[f64],
        config: RunConfig,
        rng: Xoshiro256PlusPlus,
        limit: u64,
    ) -> Result<MetropolisHastings<P>> {
        let per_step = crate::engine::most_step_evaluations(&proposal);
        let (steps, what) = if config.iterations >= config.thin {
            (config.burn_in + config.thin, "steps to the first draw")
        } else {
            (config.total_steps(), "steps of a run without draws")
        };
        let reserved = steps.saturating_mul(per_step);
        let left = limit.saturating_sub(reserved);
        if left == 0 {
            return Err(SamplerError::EvaluationLimit {
                limit,
                problem: format!(
                    "does not cover the start and the {steps} {what} (1 + {steps} × \
                     {per_step} evaluations at the most)"
                ),
            });
        }
        let rationed = Rationed {
            target,
            left: AtomicU64::new(left),
            ran_out: AtomicBool::new(false),
        };
        let started = MetropolisHastings::new(&rationed, proposal, x0, rng, config.adapt_until());
        if rationed.ran_out.load(Ordering::Relaxed) {
            return Err(SamplerError::EvaluationLimit {
                limit,
                problem: format!(
                    "leaves {left} evaluations for the start once the {steps} {what} are set \
                     aside ({steps} × {per_step}), and the start needed \
                     more (log π at x₀ and the proposal's own evaluations there: a whitened \
                     sampler's finite-difference curvature takes about 2d² + 4d in \
                     dimension d ≤ 32)"
                ),
            });
        }
        started
    }

    /// The last step whose state the proposal keeps for this run (0 if the
    /// run copies every recorded state).
    fn kept_until(&self) -> u64 {
        if self.shares_states {
            self.sampler.adapt_until().unwrap_or(u64::MAX)
        } else {
            0
        }
    }

    /// The engine (current state, counters, proposal).
    pub fn sampler(&self) -> &MetropolisHastings<P> {
        &self.sampler
    }

    /// Steps taken so far.
    pub fn steps_done(&self) -> u64 {
        self.sampler.iteration()
    }

    /// Whether the run takes no more steps: all configured steps are done,
    /// or the next one could exceed its evaluation limit
    /// ([`Run::out_of_evaluations`]).
    pub fn is_finished(&self) -> bool {
        self.steps_done() >= self.chain.config.total_steps() || self.out_of_evaluations()
    }

    /// Log-density evaluations so far: the engine's
    /// ([`MetropolisHastings::evaluations`]) and the proposal's own
    /// ([`Proposal::target_evaluations`]).
    pub fn evaluations(&self) -> u64 {
        self.sampler.evaluations() + self.sampler.proposal().target_evaluations()
    }

    /// Whether the next step could take the chain past its evaluation limit
    /// ([`RunConfig::max_evaluations`]; `false` without one), which stops
    /// the run.
    pub fn out_of_evaluations(&self) -> bool {
        self.chain
            .config
            .max_evaluations
            .is_some_and(|limit| self.evaluations() + self.sampler.most_step_evaluations() > limit)
    }

    /// Takes up to `max_steps` more steps (stopping at the end of the run),
    /// recording the post-burn-in (thinned) states that the proposal marks
    /// as draws ([`Proposal::records_last_step`]: all, except cKAM's
    /// exploration steps); reports progress to `progress`.
    /// Errors (taking no step) if `target` has another dimension than the run.
    pub fn advance(
        &mut self,
        target: &dyn Target,
        max_steps: u64,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<()> {
        self.step_until(target, max_steps, usize::MAX, progress)
    }

    /// Takes steps until `recorded` states are recorded in all (see
    /// [`Run::recorded`]) or the run ends, reporting progress to `progress`.
    /// Errors (taking no step) if `target` has another dimension than the run.
    pub fn advance_until_recorded(
        &mut self,
        target: &dyn Target,
        recorded: usize,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<()> {
        self.step_until(target, u64::MAX, recorded, progress)
    }

    /// The number of states recorded so far.
    pub fn recorded(&self) -> usize {
        self.chain.len()
    }

    /// Takes up to `max_steps` steps, stopping early once `recorded` states
    /// are recorded or the run ends.
    fn step_until(
        &mut self,
        target: &dyn Target,
        max_steps: u64,
        recorded: usize,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<()> {
        self.check_dimension(target)?;
        let total = self.chain.config.total_steps();
        let end = total.min(self.steps_done().saturating_add(max_steps));
        let every = (total / 100).max(1);
        let kept_until = self.kept_until();
        let start = Instant::now();
        while self.steps_done() < end && self.chain.len() < recorded && !self.out_of_evaluations() {
            let info = self.sampler.step(target);
            self.record(info, kept_until);
            self.debug_check_limit();
            let t = self.sampler.iteration();
            if let Some(report) = progress
                && (t.is_multiple_of(every) || t == total)
            {
                report(Progress {
                    chain_index: self.chain.chain_index,
                    step: t,
                    total,
                });
            }
        }
        self.chain.wall_time_secs += start.elapsed().as_secs_f64();
        Ok(())
    }

    /// Checks (in debug builds) that the chain kept within its evaluation
    /// limit: proposals evaluate the target only at the start
    /// ([`Proposal::target_evaluations`]).
    fn debug_check_limit(&self) {
        debug_assert!(
            self.chain
                .config
                .max_evaluations
                .is_none_or(|limit| self.evaluations() <= limit),
            "a step made more evaluations than MetropolisHastings::most_step_evaluations"
        );
    }

    /// Errors unless `target` has the run's dimension.
    fn check_dimension(&self, target: &dyn Target) -> Result<()> {
        if target.dim() == self.chain.dim {
            return Ok(());
        }
        Err(SamplerError::RunDimension {
            seed: self.chain.seed,
            chain_index: self.chain.chain_index,
            run: self.chain.dim,
            target: target.dim(),
        })
    }

    /// Records the state after the step just taken (described by `info`) if
    /// the configuration and the proposal make it a draw; the states of the
    /// steps up to `kept_until` ([`Run::kept_until`]) are the proposal's.
    fn record(&mut self, info: StepInfo, kept_until: u64) {
        let t = self.sampler.iteration();
        debug_assert!(
            t > kept_until || self.keeps_states_up_to(t),
            "the proposal keeps every adapting state, as it declared"
        );
        if self.chain.config.records(t) && self.sampler.proposal().records_last_step() {
            if t > kept_until {
                self.chain
                    .samples
                    .extend_from_slice(self.sampler.position());
            }
            self.chain.accepted.push(info.accepted);
            self.chain.log_densities.push(self.sampler.log_density());
            self.chain.accept_probabilities.push(info.accept_prob);
        }
    }

    /// Runs to the end and returns the chain. Errors (taking no step) if
    /// `target` has another dimension than the run.
    pub fn finish(
        mut self,
        target: &dyn Target,
        progress: Option<ProgressFn<'_>>,
    ) -> Result<Chain> {
        self.advance(target, u64::MAX, progress)?;
        Ok(self.into_chain())
    }

    /// The chain recorded so far, with the final counters and adaptation state.
    pub fn into_chain(mut self) -> Chain {
        self.chain.steps = self.steps_done();
        self.chain.accepted_total = self.sampler.accepted();
        self.chain.rejected_non_finite = self.sampler.rejected_non_finite();
        self.chain.covariance_jitters = self.sampler.proposal().covariance_jitters();
        self.chain.evaluations = self.evaluations();
        self.chain.adaptation = self.sampler.proposal().summary();
        if self.shares_states {
            let kept_steps = self.steps_done().min(self.kept_until());
            let leading = self.leading_rows();
            let kept = self.sampler.proposal_mut().take_kept_states();
            let mut from_history = self.recorded_kept_states(kept, leading, kept_steps);
            if self.chain.samples.is_empty() {
                // adapting throughout: the history's buffer is the chain;
                // give back the dropped rows and the growth reserve
                from_history.shrink_to_fit();
                self.chain.samples = from_history;
            } else {
                // the history's rows are the earlier steps: the copied
                // states move up in place (nothing to move in the default
                // case, adaptation during burn-in only), so no more than
                // one copy of any state is ever held
                self.chain.samples.splice(0..0, from_history);
            }
        }
        self.chain
    }

    /// Whether the proposal keeps exactly its leading rows and x_1 … x_t
    /// (checked after each adapting step t of a sharing run).
    fn keeps_states_up_to(&self, t: u64) -> bool {
        self.sampler
            .proposal()
            .kept_states()
            .is_some_and(|k| k.rows == k.leading + t as usize)
    }

    /// [`crate::KeptStates::leading`] of the proposal (0 if it keeps nothing).
    fn leading_rows(&self) -> usize {
        self.sampler
            .proposal()
            .kept_states()
            .map_or(0, |k| k.leading)
    }

    /// The recorded states among the kept states x_1 … x_{kept_steps} (after
    /// `leading` rows), compacted in place: row `leading + t − 1` holds x_t,
    /// and the i-th recorded state's destination row i never lies past it,
    /// so one forward pass moves every row at most once.
    fn recorded_kept_states(
        &self,
        mut kept: Vec<f64>,
        leading: usize,
        kept_steps: u64,
    ) -> Vec<f64> {
        let (config, dim) = (self.chain.config, self.chain.dim);
        debug_assert!(kept_steps == 0 || kept.len() == (leading + kept_steps as usize) * dim);
        let mut len = 0;
        let mut t = config.burn_in + config.thin;
        while t <= kept_steps {
            let from = (leading + t as usize - 1) * dim;
            kept.copy_within(from..from + dim, len);
            len += dim;
            t += config.thin;
        }
        kept.truncate(len);
        kept
    }
}

/// Advances `runs` in lockstep by up to `max_steps` steps each (each stops
/// at its end): at every step, every unfinished run draws its proposal, one
/// call `evaluate(points, values)` gives the log densities of all the
/// proposed points that need one (`points` holds them one after the other,
/// row-major, and `values` has one slot per point, to be filled), and every
/// run finishes its step. No run draws from its rng for the evaluation, so
/// for an exact target whose log densities `evaluate` returns each run
/// takes the steps of [`Run::advance`], bit for bit (a pseudo-marginal
/// target's estimates draw from the chain's stream: run those with
/// [`Run::advance`]). `target` serves the proposals (gradients, the
/// starting points' curvature, MCWM re-estimates); a step whose draw is not
/// finite is rejected without a point in the batch, and a step with no
/// point at all makes no call. Each run's wall time grows by the whole
/// call's. Errors (taking no step) if `target` has another dimension than a
/// run.
pub fn advance_lockstep<P: Proposal>(
    runs: &mut [Run<P>],
    target: &dyn Target,
    max_steps: u64,
    evaluate: &mut dyn FnMut(&[f64], &mut [f64]),
) -> Result<()> {
    for run in runs.iter() {
        run.check_dimension(target)?;
    }
    let start = Instant::now();
    let kept_until: Vec<u64> = runs.iter().map(Run::kept_until).collect();
    let mut pending = Vec::with_capacity(runs.len());
    let mut points = Vec::with_capacity(runs.len() * target.dim());
    let mut values = Vec::with_capacity(runs.len());
    for _ in 0..max_steps {
        pending.clear();
        points.clear();
        values.clear();
        for (k, run) in runs.iter_mut().enumerate() {
            if run.is_finished() {
                continue;
            }
            let step = run.sampler.begin_step(target);
            if step.needs_density() {
                points.extend_from_slice(run.sampler.proposed());
                values.push(f64::NAN);
            }
            pending.push((k, step));
        }
        if pending.is_empty() {
            break;
        }
        if !values.is_empty() {
            evaluate(&points, &mut values);
        }
        let mut next = values.iter();
        for (k, step) in pending.drain(..) {
            let log_density = if step.needs_density() {
                *next.next().expect("one value per point")
            } else {
                f64::NEG_INFINITY
            };
            let run = &mut runs[k];
            let info = run.sampler.finish_step(step, log_density);
            run.record(info, kept_until[k]);
            run.debug_check_limit();
        }
    }
    let seconds = start.elapsed().as_secs_f64();
    for run in runs.iter_mut() {
        run.chain.wall_time_secs += seconds;
    }
    Ok(())
}

/// The target a chain's start sees under an evaluation limit
/// ([`Run::start_within`]): `target` while evaluations are `left`, then NaN
/// without evaluating, noting that it `ran_out`.
struct Rationed<'a> {
    target: &'a dyn Target,
    left: AtomicU64,
    ran_out: AtomicBool,
}

impl Target for Rationed<'_> {
    fn dim(&self) -> usize {
        self.target.dim()
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn rand::Rng) -> f64 {
        let spent = self
            .left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if spent.is_err() {
            self.ran_out.store(true, Ordering::Relaxed);
            return f64::NAN;
        }
        self.target.log_density(x, rng)
    }

    fn is_exact(&self) -> bool {
        self.target.is_exact()
    }

    fn grad_log_density(
        &self,
        x: &[f64],
        out: &mut [f64],
    ) -> std::result::Result<(), kameleon_core::TargetError> {
        self.target.grad_log_density(x, out)
    }
}

/// The checkpoint kind of a run of proposal `P` (its type name).
fn checkpoint_kind<P>() -> String {
    format!("kameleon_samplers::Run<{}>", std::any::type_name::<P>())
}

impl<P: Proposal + Serialize> Run<P> {
    /// Writes the complete state (engine, proposal, rng, recorded chain) to
    /// `path` with [`crate::checkpoint::save`] (checked, atomic), under the
    /// kind `kameleon_samplers::Run<P>` with `P`'s type name.
    pub fn checkpoint(&self, path: &Path) -> Result<()> {
        crate::checkpoint::save(path, &checkpoint_kind::<P>(), self)
    }
}

impl<P: Proposal + DeserializeOwned> Run<P> {
    /// Reads a run written by [`Run::checkpoint`] for the same proposal type
    /// (see [`crate::checkpoint::load`] for the checks), to be continued on
    /// `target`; continuing it gives the bit-identical chain of an
    /// uninterrupted run. Errors if `target` has another dimension than the
    /// run (naming the file, the seed and the chain index).
    pub fn resume(path: &Path, target: &dyn Target) -> Result<Self> {
        let run: Self = crate::checkpoint::load(path, &checkpoint_kind::<P>())?;
        if run.chain.dim != target.dim() || run.sampler.position().len() != run.chain.dim {
            return Err(SamplerError::ResumeDimension {
                path: path.to_path_buf(),
                seed: run.chain.seed,
                chain_index: run.chain.chain_index,
                recorded: run.chain.dim,
                target: target.dim(),
            });
        }
        Ok(run)
    }
}

/// Runs one chain (index 0 of `seed`) from `x0`.
pub fn run_chain<P: Proposal>(
    target: &dyn Target,
    proposal: P,
    x0: &[f64],
    config: RunConfig,
    seed: u64,
) -> Result<Chain> {
    Run::new(target, proposal, x0, config, seed, 0)?.finish(target, None)
}

/// Runs `n_chains` chains in parallel (rayon, the current thread pool).
///
/// `setup(k, rng)` builds chain k's proposal and starting point; it may draw
/// from `rng`, which is chain k's own stream ([`chain_rng`]), so the result is
/// bit-identical whatever the number of threads. Chains are returned in index
/// order. Errors, before any chain starts, if `n_chains` exceeds
/// [`MAX_CHAIN_INDEX`] + 1 (the chains are numbered from 0). `setup`
/// returns a [`SamplerError`], into which `?` also converts the errors of
/// building a kernel, a feature map or a score-matching estimator.
///
/// Four KAMH chains on a closure, each from its own random start, then
/// every chain's acceptance rate and, per coordinate, the bulk ESS and
/// R̂ of all four (with `kameleon-diagnostics`):
///
/// ```
/// use kameleon_diagnostics::{ess_bulk, per_dimension, rhat_rank};
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::{FnTarget, Kamh, KamhConfig, RunConfig, run_chains};
/// use rand::RngExt;
///
/// let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1]));
/// let chains = run_chains(&target, 4, 42, RunConfig::new(1_000, 4_000), |_k, rng| {
///     let kamh = Kamh::new(2, Gaussian::new(1.0)?, KamhConfig::default())?;
///     let x0 = vec![rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0)];
///     Ok((kamh, x0))
/// }, None)?;
/// let acceptance: Vec<f64> = chains.iter().map(|c| c.acceptance_rate()).collect();
/// let draws: Vec<&[f64]> = chains.iter().map(|c| c.samples.as_slice()).collect();
/// let ess = per_dimension(&draws, 2, ess_bulk)?;
/// let rhat = per_dimension(&draws, 2, rhat_rank)?;
/// assert!(acceptance.iter().all(|&a| a > 0.1) && ess.iter().all(|&e| e > 400.0));
/// assert!(rhat.iter().all(|&r| r < 1.05));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn run_chains<P, S>(
    target: &dyn Target,
    n_chains: usize,
    seed: u64,
    config: RunConfig,
    setup: S,
    progress: Option<ProgressFn<'_>>,
) -> Result<Vec<Chain>>
where
    P: Proposal,
    S: Fn(usize, &mut Xoshiro256PlusPlus) -> Result<(P, Vec<f64>)> + Sync,
{
    ensure(
        u64::try_from(n_chains).is_ok_and(|n| n <= MAX_CHAIN_INDEX + 1),
        "n_chains",
        "must be at most MAX_CHAIN_INDEX + 1 (2^20 + 1): chain k's generator is k jumps along",
    )?;
    let target_ref = TargetRef(target);
    (0..n_chains)
        .into_par_iter()
        .map(|k| {
            let target = target_ref.get();
            let mut rng = chain_rng(seed, k as u64);
            let (proposal, x0) = setup(k, &mut rng)?;
            let run = Run::with_rng(target, proposal, &x0, config, seed, k as u64, rng)?;
            run.finish(target, progress)
        })
        .collect()
}

/// `&dyn Target` is `Sync` because `Target: Sync`; this wrapper just names it
/// for the closure.
#[derive(Clone, Copy)]
struct TargetRef<'a>(&'a dyn Target);

impl<'a> TargetRef<'a> {
    fn get(self) -> &'a dyn Target {
        self.0
    }
}
