//! cKAM, cyclical kernel adaptive Metropolis (Li, Zeng & Guo 2022, Alg. 2).
//!
//! The run is split into cycles of L steps. Step s = 0, 1, …, L − 1 of a
//! cycle (s = (t − 1) mod L for the engine's step t) is
//!
//! - **exploration** while s/L ≤ β: a KAMH step, proposal
//!   `N(x, γ²I + ν² M H Mᵀ)` with M the kernel gradients at x against a
//!   subsample z drawn (every step, without replacement, size
//!   min(n, available)) from the states of the **current cycle only**; the
//!   reverse density uses M at x* with the same z; ν is learned by
//!   Robbins–Monro (carried from cycle to cycle);
//! - at the switch (after the last exploration step, state θ, last subsample
//!   z, learned ν_exp) it freezes `Σ = (γ/ν_exp)² I + M_{z,θ} H M_{z,θ}ᵀ` and
//!   sets `ν₀ = 2ν_exp/(cos βπ + 1)`;
//! - **sampling** while s/L > β: the symmetric random walk `N(x, ν_s² Σ)`
//!   with the cosine schedule `ν_s = (ν₀/2)(cos(π s/L) + 1)` (so ν_s = ν_exp
//!   at s = βL), accepted with min(1, π(x*)/π(x)). Only these states are
//!   kept ([`run_ckam`]).
//!
//! # The approximation at the switch (paper §2.5)
//!
//! Each exploration step is an exact KAMH step and each sampling step an
//! exact Metropolis step for π, but the sampling kernel is built from the
//! chain's own state (θ, ν_exp and z at the switch), and the paper's sketch
//! of why that is harmless — read the switch as a delayed-rejection move
//! whose KAMH first stage always fails — would need the delayed-rejection
//! acceptance probability of Haario et al. (2006, eq. 3) at the first
//! sampling step; the paper drops it, and so does this implementation (as
//! written in Alg. 2). The kernel also keeps adapting from cycle to cycle, so
//! cKAM is an adaptive sampler without a vanishing-adaptation guarantee.
//!
//! Concretely, even if θ entered the sampling phase exactly distributed as
//! π, the first sampling state would not be: Σ is a function of θ, so the
//! step θ → x₁ is a Metropolis step with a state-dependent proposal
//! N(θ, ν²Σ(θ)) accepted as if it were symmetric — the same error as
//! evaluating KAMH's reverse density at the wrong point — and the later
//! steps keep the Σ chosen by θ. (In our tests this bias is below detection;
//! the exploration's, next, is not.)
//!
//! # The exploration is not exact either
//!
//! A larger departure from π comes before the switch: each exploration step
//! is a π-invariant KAMH step *for its z*, but z is redrawn at every step
//! from the current cycle's few states, which include the current state, so
//! the kernel depends on the chain's own recent past and this adaptation
//! never vanishes (it restarts every cycle). Started from exact draws, one
//! cycle does not return exact draws: with a bandwidth small against the
//! target's scale, `tests/ckam.rs` measures the first kept state's
//! quantile-region coverage > 10 standard errors off under either switch
//! rule (and KAMH with z redrawn every step from a short history shows the
//! same bias). On the 8-d banana B(0.1, 100) the kept states under-cover the
//! tails (Var y₁ at 0.3–0.5 of its exact value after 160 cycles of 1000
//! steps). The delayed-rejection switch below removes the switch's
//! approximation only.
//!
//! # The exact delayed-rejection switch ([`SwitchRule::DelayedRejection`])
//!
//! Read the switch as the paper suggests, as delayed rejection (Tierney &
//! Mira 1999; Haario et al. 2006, eq. 3) whose first stage is the KAMH
//! proposal θ' ~ q_z(·|θ) = N(θ, γ²I + ν_exp² M_{z,θ} H M_{z,θ}ᵀ), always
//! rejected (α₁ ≡ 0, so both 1 − α₁ factors are 1), and build Σ at θ'
//! instead of at θ: `Σ = (γ/ν_exp)² I + M_{z,θ'} H M_{z,θ'}ᵀ`. The second
//! stage x* ~ N(x, ν_s²Σ) is then symmetric in x ↔ x* given θ', and the
//! delayed-rejection acceptance probability reduces to
//!
//! `min{1, π(x*) q_z(θ'|x*) / (π(x) q_z(θ'|x))}`.
//!
//! Keeping θ' for the whole sampling phase and accepting every sampling step
//! with this ratio is Metropolis–Hastings on the pair (x, θ') for the joint
//! target π(x) q_z(θ'|x), whose x-marginal is π; drawing θ' at the switch is
//! the exact Gibbs update of θ' given x. So, for any fixed subsample z and
//! ν_exp, the whole sampling phase leaves π invariant (z itself still comes
//! from the cycle's history, the adaptive dependence of the previous
//! section). The price: every sampling step
//! evaluates q_z(θ'|x*), i.e. builds the KAMH covariance at x* (O(n d²) plus
//! a Cholesky factor, as a KAMH step) instead of the O(d²) random walk.
//!
//! The KAMH kernel term `M H Mᵀ` is built by [`KamhCovariance`] in O(n d²)
//! without forming H. During the first n − 1 steps of a cycle, when the
//! cycle's history holds fewer than n states, the subsample is the whole
//! history and a builder of that size is allocated per build; every other
//! step allocates nothing except one history buffer per cycle.

use crate::Target;
use crate::adaptation::{History, RobbinsMonro};
use crate::chain::{Chain, RunConfig, chain_rng};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, MetropolisHastings, Proposal, StepOutcome};
use crate::error::{Result, check_dim, ensure};
use crate::kamh_covariance::{KamhCovariance, combine_in_place};
use faer::MatRef;
use kameleon_kernels::Kernel;
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::f64::consts::PI;
use std::time::Instant;

/// How cKAM passes from exploration to sampling (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum SwitchRule {
    /// The paper's Alg. 2 as written: Σ built at the switch state θ, plain
    /// random-walk acceptance min{1, π(x*)/π(x)} (the approximation of §2.5).
    #[default]
    AsWritten,
    /// The exact delayed-rejection reading: Σ built at a KAMH draw θ' from
    /// θ, every sampling step accepted with
    /// min{1, π(x*) q_z(θ'|x*) / (π(x) q_z(θ'|x))}.
    DelayedRejection,
}

/// The cKAM proposal (see the module docs): cycles of `cycle_length` steps,
/// the first fraction β exploring with KAMH on the current cycle's history,
/// the rest sampling with a frozen, cosine-scaled random walk.
///
/// ```
/// use kameleon_kernels::Gaussian;
/// use kameleon_samplers::{Ckam, RobbinsMonro, StepSchedule, run_ckam};
/// use kameleon_targets::GaussianMixture;
///
/// let target = GaussianMixture::ckam_bimodal(false);
/// let nu = RobbinsMonro::new(3.4, 0.234, StepSchedule::Power { kappa: 0.75 })?;
/// let ckam = Ckam::new(Gaussian::new(2.0)?, 2, 8.0, 50, nu, 200, 0.4)?;
/// let chain = run_ckam(&target, ckam, &[-8.0, 0.0], 5, 1)?;
/// assert_eq!(chain.len(), 5 * (200 - 81)); // steps s = 81, …, 199 of each cycle
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Ckam<K> {
    kernel: K,
    dim: usize,
    gamma: f64,
    subsample_size: usize,
    nu: RobbinsMonro,
    cycle_length: u64,
    exploration_fraction: f64,
    /// Exploration steps per cycle: s = 0, …, ⌊βL⌋.
    exploration_steps: u64,
    switch_rule: SwitchRule,
    /// Steps taken so far.
    steps: u64,
    /// The current cycle's states.
    history: History,
    /// The subsample of the last exploration step (n × d row-major, first
    /// `subsample_len` rows valid).
    subsample: Vec<f64>,
    subsample_len: usize,
    /// The KAMH kernel-term builder, for subsamples of its size (rebuilt
    /// when the size changes, i.e. during a cycle's first n − 1 steps).
    builder: KamhCovariance,
    /// Assembly buffer (d × d).
    assembled: Vec<f64>,
    /// The KAMH covariance at the current state (exploration; sampling
    /// under [`SwitchRule::DelayedRejection`]).
    forward: ProposalCovariance,
    /// The KAMH covariance at the proposal.
    reverse: ProposalCovariance,
    /// Whether `forward` holds the covariance at the current state
    /// (delayed-rejection sampling caches it across steps).
    forward_valid: bool,
    /// θ', the rejected first-stage KAMH draw of the delayed-rejection switch.
    auxiliary: Vec<f64>,
    /// Σ frozen at the last switch (d × d), with its factor.
    frozen: Vec<f64>,
    frozen_factor: ProposalCovariance,
    switch_state: Vec<f64>,
    nu_exp: f64,
    nu0: f64,
}

impl<K: Kernel> Ckam<K> {
    /// cKAM in dimension `dim` with `kernel`, exploration noise γ > 0,
    /// subsample size n ≥ 2, the Robbins–Monro learner of ν (its initial
    /// scale is ν's starting value), cycles of L = `cycle_length` steps (the
    /// paper's ⌈T/M⌉) and exploration fraction β ∈ [0, 1) with at least one
    /// sampling step per cycle (⌊βL⌋ + 1 < L).
    pub fn new(
        kernel: K,
        dim: usize,
        gamma: f64,
        subsample_size: usize,
        nu: RobbinsMonro,
        cycle_length: u64,
        exploration_fraction: f64,
    ) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        ensure(
            gamma > 0.0 && gamma.is_finite(),
            "gamma",
            "must be positive and finite",
        )?;
        ensure(subsample_size >= 2, "subsample_size", "must be at least 2")?;
        ensure(
            (0.0..1.0).contains(&exploration_fraction),
            "exploration_fraction",
            "must lie in [0, 1)",
        )?;
        let exploration_steps = (exploration_fraction * cycle_length as f64).floor() as u64 + 1;
        ensure(
            cycle_length >= 2 && exploration_steps < cycle_length,
            "cycle_length",
            "must leave at least one sampling step per cycle (⌊βL⌋ + 1 < L)",
        )?;
        let n = subsample_size;
        Ok(Self {
            kernel,
            dim,
            gamma,
            subsample_size: n,
            nu,
            cycle_length,
            exploration_fraction,
            exploration_steps,
            switch_rule: SwitchRule::AsWritten,
            steps: 0,
            history: History::with_capacity(dim, exploration_steps as usize + 1),
            subsample: vec![0.0; n * dim],
            subsample_len: 0,
            builder: KamhCovariance::new(dim, n),
            assembled: vec![0.0; dim * dim],
            forward: ProposalCovariance::identity(dim),
            reverse: ProposalCovariance::identity(dim),
            forward_valid: false,
            auxiliary: vec![0.0; dim],
            frozen: vec![0.0; dim * dim],
            frozen_factor: ProposalCovariance::identity(dim),
            switch_state: vec![0.0; dim],
            nu_exp: f64::NAN,
            nu0: f64::NAN,
        })
    }

    /// Sets how exploration passes to sampling (default
    /// [`SwitchRule::AsWritten`]).
    pub fn with_switch_rule(mut self, rule: SwitchRule) -> Self {
        self.switch_rule = rule;
        self
    }

    /// The switch rule.
    pub fn switch_rule(&self) -> SwitchRule {
        self.switch_rule
    }

    /// The cycle length L.
    pub fn cycle_length(&self) -> u64 {
        self.cycle_length
    }

    /// The exploration fraction β.
    pub fn exploration_fraction(&self) -> f64 {
        self.exploration_fraction
    }

    /// Whether step t (1-based, as the engine counts) is a sampling step:
    /// (t − 1) mod L > βL. Only these steps' states are kept.
    pub fn is_sampling_step(&self, t: u64) -> bool {
        t >= 1 && (t - 1) % self.cycle_length >= self.exploration_steps
    }

    /// The current exploration scale ν (Robbins–Monro).
    pub fn nu(&self) -> f64 {
        self.nu.scale()
    }

    /// The ν_exp of the last switch (NaN before the first).
    pub fn nu_exp(&self) -> f64 {
        self.nu_exp
    }

    /// The ν₀ = 2ν_exp/(cos βπ + 1) of the last switch (NaN before the first).
    pub fn nu0(&self) -> f64 {
        self.nu0
    }

    /// Σ = (γ/ν_exp)²I + M H Mᵀ frozen at the last switch, with M at
    /// [`Ckam::sigma_point`] (d × d; zeros before the first switch).
    pub fn frozen_covariance(&self) -> &[f64] {
        &self.frozen
    }

    /// The state θ at the last switch (where M was evaluated under
    /// [`SwitchRule::AsWritten`]).
    pub fn switch_state(&self) -> &[f64] {
        &self.switch_state
    }

    /// The point where the frozen Σ's M was evaluated: θ under
    /// [`SwitchRule::AsWritten`], the rejected KAMH draw θ' under
    /// [`SwitchRule::DelayedRejection`].
    pub fn sigma_point(&self) -> &[f64] {
        match self.switch_rule {
            SwitchRule::AsWritten => &self.switch_state,
            SwitchRule::DelayedRejection => &self.auxiliary,
        }
    }

    /// The subsample z of the last exploration step (rows of d values; at
    /// the switch this is the z of Σ).
    pub fn last_subsample(&self) -> &[f64] {
        &self.subsample[..self.subsample_len * self.dim]
    }

    /// ν_s = (ν₀/2)(cos(π s/L) + 1) for the within-cycle index s.
    fn sampling_scale(&self, s: u64) -> f64 {
        0.5 * self.nu0 * ((PI * s as f64 / self.cycle_length as f64).cos() + 1.0)
    }

    /// Writes `scale_identity·I + weight·M H Mᵀ` at `y` for the current
    /// subsample into `self.assembled` (the KAMH building block
    /// [`KamhCovariance`]).
    fn assemble_kamh(&mut self, y: &[f64], scale_identity: f64, weight: f64) {
        let (d, n) = (self.dim, self.subsample_len);
        if self.builder.subsample_size() != n {
            // the cycle's history is shorter than n (its first n − 1
            // steps, or a sampling phase after a short exploration): a
            // builder of the smaller size (allocates)
            self.builder = KamhCovariance::new(d, n);
        }
        let z = MatRef::from_row_major_slice(&self.subsample[..n * d], n, d);
        self.builder
            .kernel_term_into(&self.kernel, y, z, &mut self.assembled);
        combine_in_place(&mut self.assembled, d, scale_identity, weight);
    }

    /// A KAMH exploration proposal with a fresh subsample of the cycle's history.
    fn explore(&mut self, current: &[f64], proposed: &mut [f64], rng: &mut dyn Rng) -> f64 {
        let available = self.history.len();
        self.subsample_len = self.subsample_size.min(available);
        let n = self.subsample_len;
        if self
            .history
            .subsample_into(rng, &mut self.subsample[..n * self.dim])
            .is_err()
        {
            return f64::NAN;
        }
        let (gamma2, nu2) = (self.gamma * self.gamma, self.nu.scale().powi(2));
        self.assemble_kamh(current, gamma2, nu2);
        if self.forward.factor(&self.assembled).is_err() {
            return f64::NAN;
        }
        self.forward.sample_into(current, 1.0, rng, proposed);
        if !proposed.iter().all(|v| v.is_finite()) {
            return f64::NAN;
        }
        self.assemble_kamh(proposed, gamma2, nu2);
        if self.reverse.factor(&self.assembled).is_err() {
            return f64::NAN;
        }
        self.reverse.log_density(current, proposed, 1.0)
            - self.forward.log_density(proposed, current, 1.0)
    }

    /// Freezes Σ with the last subsample: at the current state θ
    /// ([`SwitchRule::AsWritten`]), or at a KAMH draw θ' from θ
    /// ([`SwitchRule::DelayedRejection`], which also caches the KAMH
    /// covariance at θ for the first sampling step).
    fn switch(&mut self, theta: &[f64], rng: &mut dyn Rng) {
        self.nu_exp = self.nu.scale();
        self.nu0 = 2.0 * self.nu_exp / ((self.exploration_fraction * PI).cos() + 1.0);
        self.switch_state.copy_from_slice(theta);
        let ratio = self.gamma / self.nu_exp;
        // γ > 0 makes every covariance here positive definite, so a factor
        // fails only on non-finite entries; then ν₀ = NaN makes every
        // sampling step a counted rejection.
        match self.switch_rule {
            SwitchRule::AsWritten => self.assemble_kamh(theta, ratio * ratio, 1.0),
            SwitchRule::DelayedRejection => {
                let (gamma2, nu2) = (self.gamma * self.gamma, self.nu_exp * self.nu_exp);
                self.assemble_kamh(theta, gamma2, nu2);
                self.forward_valid = self.forward.factor(&self.assembled).is_ok();
                if !self.forward_valid {
                    self.nu0 = f64::NAN;
                    return;
                }
                self.forward
                    .sample_into(theta, 1.0, rng, &mut self.auxiliary);
                let auxiliary = std::mem::take(&mut self.auxiliary);
                self.assemble_kamh(&auxiliary, ratio * ratio, 1.0);
                self.auxiliary = auxiliary;
            }
        }
        self.frozen.copy_from_slice(&self.assembled);
        if self.frozen_factor.factor(&self.frozen).is_err() {
            self.nu0 = f64::NAN;
        }
    }

    /// The delayed-rejection correction log q_z(θ'|x*) − log q_z(θ'|x) of a
    /// sampling step, building the KAMH covariance at x* (and at x if not
    /// cached).
    fn delayed_rejection_correction(&mut self, current: &[f64], proposed: &[f64]) -> f64 {
        let (gamma2, nu2) = (self.gamma * self.gamma, self.nu_exp * self.nu_exp);
        if !self.forward_valid {
            self.assemble_kamh(current, gamma2, nu2);
            if self.forward.factor(&self.assembled).is_err() {
                return f64::NAN;
            }
            self.forward_valid = true;
        }
        self.assemble_kamh(proposed, gamma2, nu2);
        if self.reverse.factor(&self.assembled).is_err() {
            return f64::NAN;
        }
        self.reverse.log_density(&self.auxiliary, proposed, 1.0)
            - self.forward.log_density(&self.auxiliary, current, 1.0)
    }
}

impl<K: Kernel> Proposal for Ckam<K> {
    fn initialise(&mut self, target: &dyn Target, x: &[f64]) -> Result<()> {
        check_dim(self.dim, target.dim())?;
        check_dim(self.dim, x.len())
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let s = self.steps % self.cycle_length;
        if s == 0 {
            // a new cycle: its history starts with its first state
            self.history = History::with_capacity(self.dim, self.exploration_steps as usize + 1);
            self.history.push(current);
        }
        if s < self.exploration_steps {
            self.explore(current, proposed, rng)
        } else {
            let scale = self.sampling_scale(s);
            if !scale.is_finite() {
                return f64::NAN;
            }
            self.frozen_factor
                .sample_into(current, scale, rng, proposed);
            match self.switch_rule {
                SwitchRule::AsWritten => 0.0,
                SwitchRule::DelayedRejection => {
                    if !proposed.iter().all(|v| v.is_finite()) {
                        return f64::NAN;
                    }
                    self.delayed_rejection_correction(current, proposed)
                }
            }
        }
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        let s = self.steps % self.cycle_length;
        self.steps += 1;
        if s < self.exploration_steps {
            self.history.push(outcome.current);
            if adapt {
                self.nu.update(outcome.accept_prob);
            }
            if s + 1 == self.exploration_steps {
                self.switch(outcome.current, rng);
            }
        } else if outcome.accepted && self.switch_rule == SwitchRule::DelayedRejection {
            // the KAMH covariance at x* becomes the current state's
            std::mem::swap(&mut self.forward, &mut self.reverse);
        }
    }

    fn summary(&self) -> AdaptationSummary {
        AdaptationSummary {
            scale: Some(self.nu.scale()),
            mean: None,
            covariance: Some(self.frozen.clone()),
            extra: vec![
                ("gamma".to_string(), self.gamma),
                ("nu_exp".to_string(), self.nu_exp),
                ("nu0".to_string(), self.nu0),
                ("cycle_length".to_string(), self.cycle_length as f64),
                (
                    "exploration_fraction".to_string(),
                    self.exploration_fraction,
                ),
            ],
        }
    }

    fn covariance_jitters(&self) -> u64 {
        self.forward.jitters() + self.reverse.jitters() + self.frozen_factor.jitters()
    }
}

/// Runs `cycles` cKAM cycles (cycles × L steps) from `x0` with the rng of
/// chain 0 of `seed` ([`chain_rng`]) and keeps the states of the sampling
/// steps only. The chain's `config` is `RunConfig::new(0, cycles × L)` (so
/// `acceptance_rate` is over all steps); its length is cycles × (L − ⌊βL⌋ − 1).
pub fn run_ckam<K: Kernel>(
    target: &dyn Target,
    proposal: Ckam<K>,
    x0: &[f64],
    cycles: u64,
    seed: u64,
) -> Result<Chain> {
    let total = cycles * proposal.cycle_length;
    let config = RunConfig::new(0, total).adaptation(crate::AdaptationStop::Never);
    let mut sampler = MetropolisHastings::new(target, proposal, x0, chain_rng(seed, 0), None)?;
    let dim = target.dim();
    let kept = (cycles * (sampler.proposal().cycle_length - sampler.proposal().exploration_steps))
        as usize;
    let mut samples = Vec::with_capacity(kept * dim);
    let mut accepted = Vec::with_capacity(kept);
    let mut log_densities = Vec::with_capacity(kept);
    let start = Instant::now();
    for t in 1..=total {
        let info = sampler.step(target);
        if sampler.proposal().is_sampling_step(t) {
            samples.extend_from_slice(sampler.position());
            accepted.push(info.accepted);
            log_densities.push(sampler.log_density());
        }
    }
    Ok(Chain {
        dim,
        samples,
        accepted,
        log_densities,
        wall_time_secs: start.elapsed().as_secs_f64(),
        adaptation: sampler.proposal().summary(),
        seed,
        chain_index: 0,
        config,
        accepted_total: sampler.accepted(),
        rejected_non_finite: sampler.rejected_non_finite(),
        covariance_jitters: sampler.proposal().covariance_jitters(),
    })
}
