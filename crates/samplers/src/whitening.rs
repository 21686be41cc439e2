//! Scale-free sampling: learn the target's location, scale and correlation
//! with a pilot run of adaptive Metropolis, then run any proposal in the
//! coordinates where the target is roughly N(0, I).
//!
//! The kernel samplers' settings (γ, bandwidths, leapfrog steps) are lengths.
//! The papers chose them for targets of scale 1–10; on a posterior whose
//! standard deviations are 10⁻³, or whose coordinates differ by 10⁴ in scale,
//! the same numbers propose nowhere near the mass. [`Whitened`] removes the
//! units: its proposal is
//!
//! 1. **pilot** (adapting steps 1 … W): adaptive Metropolis with the
//!    empirical covariance and ν learned toward acceptance 0.234 — it needs
//!    no length from the user. The covariance and mean of the second half of
//!    the pilot (steps W/2 < t ≤ W, past the transient from the start) are
//!    kept as (μ, Σ), Σ = L Lᵀ.
//! 2. **whitened** (steps t > W): the wrapped proposal runs on
//!    u = L⁻¹(x − μ). It is started at the pilot's last state, sees the step
//!    index t − W, and proposes u*, mapped back to x* = μ + L u*.
//!
//! Exactness: (μ, L) change once, at step W, and only while adaptation is
//! on; within a step they are fixed. The map is affine, so the density ratio
//! log q(x | x*) − log q(x* | x) equals that of the wrapped proposal in u
//! (the Jacobian |L| cancels), and once the engine stops adapting the chain
//! is the wrapped proposal's frozen chain in u — exactly π-invariant. If
//! adaptation stops during the pilot, the pilot's frozen AM proposal runs on.
//!
//! W is a fraction ([`WhiteningConfig::pilot_fraction`]) of the adaptation
//! period that the engine announces ([`Proposal::plan_adaptation`]), or
//! [`WhiteningConfig::pilot_steps`] when adaptation never stops.

use crate::Target;
use crate::adaptation::{RobbinsMonro, RunningMoments, Scale, StepSchedule};
use crate::am::{AdaptiveMetropolis, AdaptiveMetropolisConfig};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, check_dim, ensure};
use kameleon_core::TargetError;
use rand::Rng;
use serde::{Deserialize, Serialize};

/// The settings of [`Whitened`]: how long the pilot runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct WhiteningConfig {
    /// Whether to whiten at all (default `true`); `false` runs the wrapped
    /// proposal as is, step for step (no pilot, no map), so one proposal
    /// type serves both.
    pub enabled: bool,
    /// The pilot's share of the adaptation period, in (0, 1) (default 0.5):
    /// with adaptation on for steps 1 … T, the pilot runs W = ⌊f T⌋ steps
    /// and the wrapped proposal adapts, whitened, for the other T − W.
    pub pilot_fraction: f64,
    /// W when adaptation never stops (default 1000).
    pub pilot_steps: u64,
}

impl Default for WhiteningConfig {
    /// Half the adaptation period for the pilot (1000 steps if adaptation
    /// never stops).
    fn default() -> Self {
        Self {
            enabled: true,
            pilot_fraction: 0.5,
            pilot_steps: 1000,
        }
    }
}

impl WhiteningConfig {
    /// No whitening: the wrapped proposal runs as is.
    pub fn disabled() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }

    /// Sets the pilot's share of the adaptation period, in (0, 1).
    pub fn with_pilot_fraction(mut self, fraction: f64) -> Result<Self> {
        check_fraction(fraction)?;
        self.pilot_fraction = fraction;
        Ok(self)
    }

    /// Sets the pilot's length when adaptation never stops.
    pub fn with_pilot_steps(mut self, steps: u64) -> Self {
        self.pilot_steps = steps;
        self
    }

    /// The pilot's length for an adaptation period ending at `adapt_until`.
    fn pilot_length(&self, adapt_until: Option<u64>) -> u64 {
        match adapt_until {
            Some(t) => (self.pilot_fraction * t as f64).floor() as u64,
            None => self.pilot_steps,
        }
    }
}

fn check_fraction(fraction: f64) -> Result<()> {
    ensure(
        fraction > 0.0 && fraction < 1.0,
        "pilot_fraction",
        "must lie in (0, 1)",
    )
}

/// The affine map x = μ + L u learned by the pilot.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct AffineMap {
    mean: Vec<f64>,
    factor: ProposalCovariance,
}

/// A proposal run in whitened coordinates after a pilot of adaptive
/// Metropolis that learns them (see the module docs), configured by
/// [`WhiteningConfig`]. The wrapped proposal's lengths (γ, bandwidths, step
/// sizes) are then in units of the target's standard deviations.
///
/// ```
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::{FnTarget, Kamh, KamhConfig, RunConfig, Whitened, WhiteningConfig, run_chain};
/// // standard deviations 10⁻³ and 10³: no fixed length suits both
/// let target = FnTarget::new(2, |x: &[f64]| -0.5 * ((x[0] / 1e-3).powi(2) + (x[1] / 1e3).powi(2)));
/// let kamh = Kamh::new(2, Gaussian::new(1.0)?, KamhConfig::default())?;
/// let sampler = Whitened::new(kamh, 2, WhiteningConfig::default())?;
/// let chain = run_chain(&target, sampler, &[0.0, 0.0], RunConfig::new(2000, 2000), 3)?;
/// assert!(chain.acceptance_rate() > 0.1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Whitened<P> {
    dim: usize,
    config: WhiteningConfig,
    pilot: AdaptiveMetropolis,
    /// The pilot's length W (set when the engine announces the adaptation
    /// period).
    pilot_length: u64,
    /// Moments of the pilot's second half.
    window: RunningMoments,
    map: Option<AffineMap>,
    inner: P,
    inner_started: bool,
    /// The step before the wrapped proposal's first (W, or 0 when a
    /// whitened sampler starts a new chain).
    offset: u64,
    /// Whether the engine adapts at the wrapped proposal's first step.
    inner_adapts: bool,
    adapt_until: Option<u64>,
    /// Whether the step being taken is the pilot's.
    pilot_step: bool,
    /// u of the current state, and u* of the proposal.
    current: Vec<f64>,
    proposed: Vec<f64>,
    /// u after the step, for the wrapped proposal's outcome.
    after: Vec<f64>,
    scratch: Vec<f64>,
}

impl<P: Proposal> Whitened<P> {
    /// `inner` (a proposal in dimension `dim`, to run in whitened
    /// coordinates) after a pilot, with the settings `config` (checked).
    pub fn new(inner: P, dim: usize, config: WhiteningConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        check_fraction(config.pilot_fraction)?;
        let nu = RobbinsMonro::new(Scale::optimal_for(dim), 0.234, StepSchedule::InverseSqrt)?;
        let pilot = AdaptiveMetropolis::new(
            dim,
            AdaptiveMetropolisConfig::default().with_scale(Scale::Adaptive(nu))?,
        )?;
        Ok(Self {
            dim,
            config,
            pilot,
            pilot_length: config.pilot_steps,
            window: RunningMoments::new(dim),
            map: None,
            inner,
            inner_started: false,
            offset: 0,
            inner_adapts: true,
            adapt_until: None,
            pilot_step: true,
            current: vec![0.0; dim],
            proposed: vec![0.0; dim],
            after: vec![0.0; dim],
            scratch: vec![0.0; dim * dim],
        })
    }

    /// The wrapped proposal.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The pilot's length W.
    pub fn pilot_length(&self) -> u64 {
        self.pilot_length
    }

    /// The learned location μ and the lower Cholesky factor L of the learned
    /// covariance (d × d, row-major), once the pilot has ended.
    pub fn whitening(&self) -> Option<(Vec<f64>, Vec<f64>)> {
        self.map.as_ref().map(|map| {
            let l = map.factor.lower_factor();
            let d = self.dim;
            let factor = (0..d * d)
                .map(|k| {
                    let (i, j) = (k / d, k % d);
                    if j <= i { l[(i, j)] } else { 0.0 }
                })
                .collect();
            (map.mean.clone(), factor)
        })
    }

    /// Ends the pilot: (μ, Σ) from its second half, Σ regularised by the
    /// factorisation's jitter; the pilot's own covariance if the window saw
    /// too few distinct states.
    fn learn_map(&mut self) {
        let d = self.dim;
        let mut mean = self.window.mean().to_vec();
        self.window.covariance_into(&mut self.scratch);
        let degenerate = self.window.count() < 2 || (0..d).any(|i| self.scratch[i * d + i] <= 0.0);
        if degenerate {
            let summary = self.pilot.summary();
            if let Some(cov) = summary.covariance {
                self.scratch.copy_from_slice(&cov);
            }
            if let Some(m) = summary.mean {
                mean = m;
            }
            let nu2 = self.pilot.scale().powi(2);
            for i in 0..d {
                if self.scratch[i * d + i].is_nan() || self.scratch[i * d + i] <= 0.0 {
                    self.scratch[i * d + i] = nu2;
                }
            }
        }
        let mut factor = ProposalCovariance::identity(d);
        // On failure the identity stays: whitening is then a shift only.
        let _ = factor.factor(&self.scratch);
        self.map = Some(AffineMap { mean, factor });
    }
}

/// The target seen from whitened coordinates: log π(μ + L u) (the constant
/// log |L| dropped) and its gradient Lᵀ ∇ log π. The proposals here use a
/// target only for its dimension (and HMC for the gradient), so these
/// evaluations may allocate.
struct WhitenedTarget<'a> {
    target: &'a dyn Target,
    map: &'a AffineMap,
}

impl Target for WhitenedTarget<'_> {
    fn dim(&self) -> usize {
        self.target.dim()
    }

    fn log_density(&self, u: &[f64], rng: &mut dyn Rng) -> f64 {
        let mut x = vec![0.0; u.len()];
        self.map.factor.apply_into(&self.map.mean, u, &mut x);
        self.target.log_density(&x, rng)
    }

    fn is_exact(&self) -> bool {
        self.target.is_exact()
    }

    fn grad_log_density(&self, u: &[f64], out: &mut [f64]) -> std::result::Result<(), TargetError> {
        let d = u.len();
        let mut x = vec![0.0; d];
        self.map.factor.apply_into(&self.map.mean, u, &mut x);
        let mut g = vec![0.0; d];
        self.target.grad_log_density(&x, &mut g)?;
        let l = self.map.factor.lower_factor();
        for (j, o) in out.iter_mut().enumerate() {
            *o = (j..d).map(|i| l[(i, j)] * g[i]).sum();
        }
        Ok(())
    }
}

impl<P: Proposal> Proposal for Whitened<P> {
    fn plan_adaptation(&mut self, adapt_until: Option<u64>) {
        self.adapt_until = adapt_until;
        if self.config.enabled {
            if self.map.is_none() {
                self.pilot_length = self.config.pilot_length(adapt_until);
            }
        } else {
            self.inner.plan_adaptation(adapt_until);
        }
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_dim(self.dim, target.dim())?;
        if !self.config.enabled {
            return self.inner.initialise(target, x, adapts);
        }
        if self.map.is_some() {
            // a whitened sampler reused for a new chain: the wrapped
            // proposal restarts at the new point at the next step
            self.inner_started = false;
            self.inner_adapts = adapts;
            self.offset = 0;
            Ok(())
        } else {
            self.inner.initialise(target, x, adapts)
        }
    }

    fn propose(
        &mut self,
        target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        if !self.config.enabled {
            return self.inner.propose(target, current, proposed, rng);
        }
        let Some(map) = &self.map else {
            self.pilot_step = true;
            return self.pilot.propose(target, current, proposed, rng);
        };
        self.pilot_step = false;
        map.factor.solve_into(current, &map.mean, &mut self.current);
        let view = WhitenedTarget { target, map };
        if !self.inner_started {
            self.inner_started = true;
            let (adapt_until, offset) = (self.adapt_until, self.offset);
            self.inner
                .plan_adaptation(adapt_until.map(|t| t.saturating_sub(offset)));
            if self
                .inner
                .initialise(&view, &self.current, self.inner_adapts)
                .is_err()
            {
                // Unreachable for the samplers here (the dimension matches);
                // a NaN correction rejects the step rather than panicking.
                return f64::NAN;
            }
        }
        let correction = self
            .inner
            .propose(&view, &self.current, &mut self.proposed, rng);
        map.factor.apply_into(&map.mean, &self.proposed, proposed);
        correction
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        if !self.config.enabled {
            return self.inner.observe(outcome, adapt, rng);
        }
        let t = outcome.iteration;
        if self.pilot_step {
            self.pilot.observe(outcome, adapt, rng);
            if adapt && 2 * t > self.pilot_length {
                self.window.push(outcome.current);
            }
            if adapt && t >= self.pilot_length {
                self.learn_map();
                self.offset = t;
                self.inner_adapts = self.adapt_until.is_none_or(|n| n > t);
            }
            return;
        }
        let source = if outcome.accepted {
            &self.proposed
        } else {
            &self.current
        };
        self.after.copy_from_slice(source);
        let whitened = StepOutcome {
            iteration: t - self.offset,
            previous: &self.current,
            proposed: &self.proposed,
            current: &self.after,
            ..*outcome
        };
        self.inner.observe(&whitened, adapt, rng);
    }

    fn records_last_step(&self) -> bool {
        (self.config.enabled && self.pilot_step) || self.inner.records_last_step()
    }

    fn reestimates_current_density(&self) -> bool {
        self.inner.reestimates_current_density()
    }

    fn kept_states(&self) -> Option<KeptStates> {
        // whitened, the wrapped proposal keeps u, not the chain's x
        (!self.config.enabled)
            .then(|| self.inner.kept_states())
            .flatten()
    }

    fn take_kept_states(&mut self) -> Vec<f64> {
        self.inner.take_kept_states()
    }

    fn summary(&self) -> AdaptationSummary {
        if !self.config.enabled {
            return self.inner.summary();
        }
        let mut summary = if self.map.is_some() {
            self.inner.summary()
        } else {
            self.pilot.summary()
        };
        summary
            .extra
            .push(("pilot_steps".into(), self.pilot_length as f64));
        summary
            .extra
            .push(("whitened".into(), f64::from(u8::from(self.map.is_some()))));
        summary
    }

    fn covariance_jitters(&self) -> u64 {
        let map = self.map.as_ref().map_or(0, |m| m.factor.jitters());
        self.pilot.covariance_jitters() + self.inner.covariance_jitters() + map
    }
}
