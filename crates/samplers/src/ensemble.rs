//! The affine-invariant ensemble sampler with the stretch move (Goodman &
//! Weare 2010; the parallel form of Foreman-Mackey et al. 2013, the
//! algorithm of emcee).
//!
//! # The algorithm
//!
//! An ensemble of W walkers X₁, …, X_W ∈ ℝᵈ is one Markov chain on
//! (ℝᵈ)^W whose stationary density is the product π(X₁)⋯π(X_W). One
//! **sweep** moves every walker once:
//!
//! 1. The walkers are split at random into two halves S⁽⁰⁾ (⌈W/2⌉ walkers)
//!    and S⁽¹⁾ (⌊W/2⌋ walkers): a uniform random permutation of the walkers,
//!    drawn afresh each sweep, cut after its first ⌈W/2⌉ entries.
//! 2. For i = 0, then i = 1, every walker X_k of S⁽ⁱ⁾ moves with the
//!    complementary half S⁽¹⁻ⁱ⁾ held fixed (for i = 1 that half holds the
//!    positions just updated):
//!    - draw a walker X_j uniformly from S⁽¹⁻ⁱ⁾;
//!    - draw the stretch factor z ~ g(z) ∝ 1/√z on [1/a, a] (a > 1) by
//!      inversion: with u ~ U[0, 1), z = ((a − 1)u + 1)²/a, since the CDF is
//!      G(z) = (√(az) − 1)/(a − 1) (see [`StretchFactor`]);
//!    - propose y = X_j + z (X_k − X_j), the point on the line through X_j
//!      and X_k stretched (z > 1) or shrunk (z < 1) about X_j;
//!    - accept with probability min(1, z^{d−1} π(y)/π(X_k)), in log space:
//!      accept when log u < (d − 1) log z + log π(y) − log π(X_k).
//!
//! g satisfies g(1/z) = z g(z), which with the Jacobian z^{d−1} of the
//! stretch along a line through X_j makes each move satisfy detailed balance
//! for π(X_k) given the fixed complementary half; each half-sweep therefore
//! leaves the product density invariant, and so does their composition. The
//! proposal is built from differences of walkers, so it commutes with every
//! affine map x ↦ Ax + b (A invertible), and the acceptance ratio is
//! unchanged because the image density differs from π ∘ (map)⁻¹ only by the
//! constant |det A|⁻¹: the sampler run on the image of π, started from the
//! image of the walkers, follows the image of the chain.
//! Moving one half against the other (instead of every walker against all
//! others, one at a time) is what lets a half be evaluated in parallel; the
//! moves of one half depend only on their own walker and the fixed
//! complementary half, so evaluating them in sequence, as here, gives the
//! same chain as evaluating them all at once.
//!
//! **Why a random split.** A split chosen independently of the state
//! each sweep is a mixture of valid kernels, hence valid. Redrawing it lets
//! every pair of walkers meet over time (with fixed halves, the walkers of
//! one half never serve as each other's anchors), and it is what emcee does
//! by default, so the two libraries run the same Markov kernel. It costs one
//! shuffle of W indices per sweep.
//!
//! **Conventions.** log π(y) is evaluated once per proposal; the current
//! walker's log density is the stored value and is never re-evaluated, which
//! keeps pseudo-marginal targets ([`Target::is_exact`] `false`) exact. A
//! proposal with a non-finite coordinate is rejected without evaluating the
//! target; a non-finite log density at a proposal (NaN, −∞ or +∞) rejects it.
//! Both are counted in [`EnsembleRun::rejected_non_finite`]. The whole
//! ensemble draws from one stream, [`chain_rng`]`(seed, 0)`, so a run is
//! bit-identical for a seed. Per sweep the stream supplies, in order: the
//! W − 1 draws of the Fisher–Yates shuffle, then for each moving walker the
//! index of X_j, u for z, the target's own draws (if any), and u for the
//! acceptance (drawn even for a proposal rejected without evaluation, so
//! the layout of the stream does not depend on the target).
//!
//! The ensemble spans at most the affine hull of its starting walkers: a
//! stretch move stays on the line through two walkers. A start whose walkers
//! lie in a lower-dimensional affine subspace (fewer than d + 1 walkers, or
//! all walkers at one point) can never reach the rest of the space and is
//! refused. At least 2d walkers are recommended.
//!
//! # References
//!
//! - J. Goodman and J. Weare (2010), *Ensemble samplers with affine
//!   invariance*, Communications in Applied Mathematics and Computational
//!   Science 5(1), 65–80, §3 (the stretch move) and §4 (the parallel
//!   half-ensemble form).
//! - D. Foreman-Mackey, D. W. Hogg, D. Lang and J. Goodman (2013), *emcee:
//!   The MCMC Hammer*, Publications of the Astronomical Society of the
//!   Pacific 125, 306–312: eq. (7) the proposal, eq. (8) the symmetry
//!   g(1/z) = z g(z), eq. (9) the acceptance probability, eq. (10) g(z),
//!   Algorithm 3 the parallel stretch move.
//!
//! ```
//! use kameleon_samplers::{EnsembleConfig, FnTarget, initial_ball, chain_rng, run_ensemble};
//! let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
//! let config = EnsembleConfig::default().with_walkers(8)?;
//! let start = initial_ball(&[0.0, 0.0], config.walkers, 1e-3, &mut chain_rng(7, 1))?;
//! let run = run_ensemble(&target, &config, &start, 500, 100, 7)?;
//! assert_eq!(run.samples.len(), 500 * 8 * 2);
//! assert_eq!(run.evaluations, 8 * (500 + 100) + 8);
//! # Ok::<(), kameleon_samplers::SamplerError>(())
//! ```

use crate::Target;
use crate::chain::chain_rng;
use crate::error::{Result, SamplerError, check_dim, check_target_dim, ensure, ensure_room};
use faer::Mat;
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;

/// The stretch scale a of Goodman & Weare and of emcee.
pub const DEFAULT_STRETCH: f64 = 2.0;

/// The number of walkers of [`EnsembleConfig::default`].
pub const DEFAULT_WALKERS: usize = 32;

/// The distribution of the stretch factor z: density g(z) ∝ 1/√z on
/// [1/a, a], a > 1.
///
/// Normalised, g(z) = 1/(2(√a − 1/√a)√z), so the CDF is
/// G(z) = (√z − 1/√a)/(√a − 1/√a) = (√(az) − 1)/(a − 1) on [1/a, a], and its
/// inverse is z = ((a − 1)u + 1)²/a.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StretchFactor {
    a: f64,
}

impl StretchFactor {
    /// The distribution of scale `a`; `a` must be finite and greater than 1.
    pub fn new(a: f64) -> Result<Self> {
        ensure(
            a.is_finite() && a > 1.0,
            "a",
            &format!("the stretch scale must be finite and greater than 1, got {a}"),
        )?;
        Ok(Self { a })
    }

    /// The scale a.
    pub fn a(&self) -> f64 {
        self.a
    }

    /// G⁻¹(u) = ((a − 1)u + 1)²/a for u ∈ [0, 1].
    pub fn quantile(&self, u: f64) -> f64 {
        let s = (self.a - 1.0) * u + 1.0;
        s * s / self.a
    }

    /// G(z) = (√(az) − 1)/(a − 1), clamped to [0, 1] outside [1/a, a].
    pub fn cdf(&self, z: f64) -> f64 {
        if z <= 1.0 / self.a {
            0.0
        } else if z >= self.a {
            1.0
        } else {
            ((self.a * z).sqrt() - 1.0) / (self.a - 1.0)
        }
    }

    /// Draws z by inversion from one uniform of `rng`.
    pub fn sample(&self, rng: &mut dyn Rng) -> f64 {
        self.quantile(rng.random::<f64>())
    }
}

/// The ensemble's settings: the number of walkers W and the stretch scale a.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct EnsembleConfig {
    /// The number of walkers W ≥ 2 (each half must be non-empty; at least
    /// 2d are recommended, and a run refuses fewer than d + 1; default
    /// [`DEFAULT_WALKERS`]).
    pub walkers: usize,
    /// The stretch scale a (finite, > 1; default [`DEFAULT_STRETCH`], the
    /// usual choice).
    pub stretch_scale: f64,
}

impl EnsembleConfig {
    /// Sets the number of walkers W (≥ 2).
    pub fn with_walkers(mut self, walkers: usize) -> Result<Self> {
        check_walkers(walkers)?;
        self.walkers = walkers;
        Ok(self)
    }

    /// Sets the stretch scale a (finite, > 1).
    pub fn with_stretch_scale(mut self, a: f64) -> Result<Self> {
        StretchFactor::new(a)?;
        self.stretch_scale = a;
        Ok(self)
    }

    /// Checks both settings.
    pub fn validate(&self) -> Result<()> {
        self.stretch().map(|_| ())
    }

    /// The distribution of the stretch factor, after checking both
    /// settings.
    pub fn stretch(&self) -> Result<StretchFactor> {
        check_walkers(self.walkers)?;
        StretchFactor::new(self.stretch_scale)
    }
}

fn check_walkers(walkers: usize) -> Result<()> {
    ensure(
        walkers >= 2,
        "walkers",
        &format!("an ensemble needs at least 2 walkers, got {walkers}"),
    )
}

impl Default for EnsembleConfig {
    /// [`DEFAULT_WALKERS`] walkers, a = [`DEFAULT_STRETCH`].
    fn default() -> Self {
        Self {
            walkers: DEFAULT_WALKERS,
            stretch_scale: DEFAULT_STRETCH,
        }
    }
}

/// `walkers` points `center + scale · ξ`, ξ ~ N(0, I), drawn from `rng`
/// (W × d row-major): the usual start of an ensemble near one point.
/// `center` must be finite and non-empty, `scale` finite and positive.
pub fn initial_ball(
    center: &[f64],
    walkers: usize,
    scale: f64,
    rng: &mut dyn Rng,
) -> Result<Vec<f64>> {
    ensure(
        !center.is_empty(),
        "center",
        "must have dimension at least 1",
    )?;
    if let Some((index, &value)) = center.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(SamplerError::NonFiniteStart { index, value });
    }
    ensure(
        scale.is_finite() && scale > 0.0,
        "scale",
        &format!("must be finite and positive, got {scale}"),
    )?;
    let what = "the walkers' starts (W × d)";
    let values = kameleon_core::buffer::checked_len(what, &[walkers, center.len()])?;
    let mut out = Vec::new();
    kameleon_core::buffer::reserve(what, &mut out, values)?;
    for _ in 0..walkers {
        for &c in center {
            let xi: f64 = rng.sample(StandardNormal);
            out.push(c + scale * xi);
        }
    }
    Ok(out)
}

/// The largest condition number of the walkers' centred and column-normalised
/// matrix (the ratio of its extreme singular values) for which they are taken
/// to span ℝᵈ; the threshold emcee applies. Normalising the columns makes it
/// independent of the coordinates' scales, so badly scaled but well-spread
/// walkers pass.
const MAX_CONDITION: f64 = 1e8;

/// Errors unless the walkers (W × d row-major, finite) span ℝᵈ affinely.
fn check_spread(positions: &[f64], walkers: usize, dim: usize) -> Result<()> {
    let w = walkers as f64;
    let mut mean = vec![0.0; dim];
    for x in positions.chunks_exact(dim) {
        mean.iter_mut().zip(x).for_each(|(m, v)| *m += v / w);
    }
    let mut centred = Mat::<f64>::from_fn(walkers, dim, |k, i| positions[k * dim + i] - mean[i]);
    let degenerate = |detail: String| SamplerError::InvalidParameter {
        name: "initial",
        reason: format!(
            "the walkers lie in a lower-dimensional affine subspace ({detail}); \
             stretch moves never leave it: start them spread out, e.g. around a point"
        ),
    };
    for i in 0..dim {
        let norm = (0..walkers)
            .map(|k| centred[(k, i)] * centred[(k, i)])
            .sum::<f64>()
            .sqrt();
        if norm.is_nan() || norm <= 0.0 {
            return Err(degenerate(format!(
                "coordinate {i} is the same for all walkers"
            )));
        }
        (0..walkers).for_each(|k| centred[(k, i)] /= norm);
    }
    let singular = centred
        .singular_values()
        .map_err(|_| degenerate("their singular values could not be computed".into()))?;
    let largest = singular.iter().copied().fold(0.0, f64::max);
    let smallest = singular.iter().copied().fold(f64::INFINITY, f64::min);
    let condition = largest / smallest;
    if condition.is_nan() || condition > MAX_CONDITION {
        return Err(degenerate(format!(
            "the condition number of their centred, column-normalised matrix is {condition:e}"
        )));
    }
    Ok(())
}

/// An ensemble in progress: the walkers, their stored log densities, the
/// rng and the counters. [`Ensemble::sweep`] moves every walker once.
#[derive(Debug, Clone)]
pub struct Ensemble {
    dim: usize,
    walkers: usize,
    stretch: StretchFactor,
    /// W × d row-major.
    positions: Vec<f64>,
    /// The stored log density of each walker.
    log_densities: Vec<f64>,
    /// Whether each walker's move was accepted in the last sweep.
    accepted_last: Vec<bool>,
    /// Accepted moves per walker over all sweeps.
    accepted_total: Vec<u64>,
    /// The walker permutation whose halves are S⁽⁰⁾ and S⁽¹⁾.
    order: Vec<usize>,
    /// The proposal y (length d).
    proposal: Vec<f64>,
    evaluations: u64,
    rejected_non_finite: u64,
    sweeps: u64,
    rng: Xoshiro256PlusPlus,
}

impl Ensemble {
    /// Starts `config.walkers` walkers at `initial` (W × d row-major, d =
    /// `target.dim()`) and evaluates the target once at each; draws from
    /// [`chain_rng`]`(seed, 0)`.
    ///
    /// Errors if `config` is invalid, if `initial` does not hold W × d
    /// values, if W ≤ d, if a coordinate is non-finite or the log density of
    /// a walker is not finite ([`SamplerError::WalkerStart`]), or if the
    /// walkers lie in a lower-dimensional affine subspace.
    pub fn new(
        target: &dyn Target,
        config: &EnsembleConfig,
        initial: &[f64],
        seed: u64,
    ) -> Result<Self> {
        let stretch = config.stretch()?;
        let dim = target.dim();
        let walkers = config.walkers;
        ensure(dim >= 1, "dim", "the target must have dimension at least 1")?;
        let values = walkers
            .checked_mul(dim)
            .ok_or_else(|| SamplerError::InvalidParameter {
                name: "walkers",
                reason: format!("{walkers} walkers of dimension {dim} cannot be addressed"),
            })?;
        check_dim(
            "the initial walkers' length",
            initial.len(),
            "walkers × dimension",
            values,
        )?;
        ensure_room("the ensemble's walkers (W × d, twice)", &[&[2, values]])?;
        ensure(
            walkers > dim,
            "walkers",
            &format!(
                "{walkers} walkers cannot span dimension {dim}: use more than d \
                 (at least 2d = {} recommended)",
                2 * dim
            ),
        )?;
        for (walker, x) in initial.chunks_exact(dim).enumerate() {
            if let Some((index, &value)) = x.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(SamplerError::WalkerStart {
                    walker,
                    source: Box::new(SamplerError::NonFiniteStart { index, value }),
                });
            }
        }
        check_spread(initial, walkers, dim)?;
        let mut rng = chain_rng(seed, 0);
        let mut log_densities = Vec::with_capacity(walkers);
        for (walker, x) in initial.chunks_exact(dim).enumerate() {
            let lp = target.log_density(x, &mut rng);
            if !lp.is_finite() {
                return Err(SamplerError::WalkerStart {
                    walker,
                    source: Box::new(SamplerError::StartOutsideSupport(lp)),
                });
            }
            log_densities.push(lp);
        }
        Ok(Self {
            dim,
            walkers,
            stretch,
            positions: initial.to_vec(),
            log_densities,
            accepted_last: vec![false; walkers],
            accepted_total: vec![0; walkers],
            order: (0..walkers).collect(),
            proposal: vec![0.0; dim],
            evaluations: walkers as u64,
            rejected_non_finite: 0,
            sweeps: 0,
            rng,
        })
    }

    /// Moves every walker once (see the module docs). Errors, moving
    /// nothing, if `target` has another dimension than the ensemble.
    pub fn sweep(&mut self, target: &dyn Target) -> Result<()> {
        check_target_dim(target, self.dim)?;
        let w = self.walkers;
        // Fisher–Yates: a uniform permutation, its first ⌈W/2⌉ entries S⁽⁰⁾
        for i in (1..w).rev() {
            let j = self.rng.random_range(0..=i);
            self.order.swap(i, j);
        }
        let first = w.div_ceil(2);
        for (moving, fixed) in [(0..first, first..w), (first..w, 0..first)] {
            for m in moving {
                let k = self.order[m];
                let j = self.order[fixed.start + self.rng.random_range(0..fixed.len())];
                self.move_walker(target, k, j);
            }
        }
        self.sweeps += 1;
        Ok(())
    }

    /// One stretch move of walker `k` about walker `j` (of the other half).
    fn move_walker(&mut self, target: &dyn Target, k: usize, j: usize) {
        let d = self.dim;
        let z = self.stretch.sample(&mut self.rng);
        let (xk, xj) = (k * d, j * d);
        for i in 0..d {
            let anchor = self.positions[xj + i];
            self.proposal[i] = anchor + z * (self.positions[xk + i] - anchor);
        }
        let lp = if self.proposal.iter().all(|v| v.is_finite()) {
            self.evaluations += 1;
            target.log_density(&self.proposal, &mut self.rng)
        } else {
            f64::NAN
        };
        let log_u = self.rng.random::<f64>().ln();
        let accepted = if lp.is_finite() {
            let log_ratio = (d - 1) as f64 * z.ln() + lp - self.log_densities[k];
            log_u < log_ratio
        } else {
            self.rejected_non_finite += 1;
            false
        };
        if accepted {
            self.positions[xk..xk + d].copy_from_slice(&self.proposal);
            self.log_densities[k] = lp;
            self.accepted_total[k] += 1;
        }
        self.accepted_last[k] = accepted;
    }

    /// The dimension d.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The number of walkers W.
    pub fn walkers(&self) -> usize {
        self.walkers
    }

    /// The walkers' current positions, W × d row-major.
    pub fn positions(&self) -> &[f64] {
        &self.positions
    }

    /// The walkers' stored log densities.
    pub fn log_densities(&self) -> &[f64] {
        &self.log_densities
    }

    /// Whether each walker's move was accepted in the last sweep (all
    /// `false` before the first).
    pub fn accepted_last(&self) -> &[bool] {
        &self.accepted_last
    }

    /// Accepted moves per walker over all sweeps.
    pub fn accepted_total(&self) -> &[u64] {
        &self.accepted_total
    }

    /// Log-density evaluations so far, the W at the start included.
    pub fn evaluations(&self) -> u64 {
        self.evaluations
    }

    /// Proposals rejected for a non-finite coordinate or log density.
    pub fn rejected_non_finite(&self) -> u64 {
        self.rejected_non_finite
    }

    /// Sweeps done.
    pub fn sweeps(&self) -> u64 {
        self.sweeps
    }
}

/// The output of [`run_ensemble`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsembleRun {
    /// The dimension d.
    pub dim: usize,
    /// The number of walkers W.
    pub walkers: usize,
    /// The stretch scale a.
    pub a: f64,
    /// The seed: the ensemble's rng is [`chain_rng`]`(seed, 0)`.
    pub seed: u64,
    /// Sweeps discarded before recording.
    pub burn_in: u64,
    /// The states after each kept sweep, sweep × walker × d row-major.
    pub samples: Vec<f64>,
    /// The stored log density of each kept state, sweep × walker.
    pub log_densities: Vec<f64>,
    /// Whether each walker's move in each kept sweep was accepted, sweep × walker.
    pub accepted: Vec<bool>,
    /// Accepted moves per walker over all sweeps, burn-in included.
    pub accepted_total: Vec<u64>,
    /// Log-density evaluations: W at the start, then one per proposal with
    /// finite coordinates (W per sweep unless a proposal overflows).
    pub evaluations: u64,
    /// Proposals rejected for a non-finite coordinate or log density
    /// (NaN, ±∞), over all sweeps.
    pub rejected_non_finite: u64,
    /// Sweeps done, burn-in included (fewer than `burn_in + sweeps` if the
    /// run was stopped early).
    pub sweeps_done: u64,
}

impl EnsembleRun {
    /// The number of kept sweeps.
    pub fn kept_sweeps(&self) -> usize {
        self.log_densities.len() / self.walkers.max(1)
    }

    /// The state of `walker` after kept sweep `sweep`.
    pub fn state(&self, sweep: usize, walker: usize) -> &[f64] {
        let start = (sweep * self.walkers + walker) * self.dim;
        &self.samples[start..start + self.dim]
    }

    /// The fraction of accepted moves of each walker over all sweeps done.
    pub fn acceptance_fractions(&self) -> Vec<f64> {
        self.accepted_total
            .iter()
            .map(|&a| a as f64 / self.sweeps_done as f64)
            .collect()
    }

    /// The mean of all kept states per coordinate (NaN if none were kept).
    pub fn mean(&self) -> Vec<f64> {
        let mut m = vec![0.0; self.dim];
        for x in self.samples.chunks_exact(self.dim) {
            m.iter_mut().zip(x).for_each(|(mi, v)| *mi += v);
        }
        let n = (self.samples.len() / self.dim) as f64;
        m.iter_mut().for_each(|v| *v /= n);
        m
    }
}

/// Kept sweeps whose room is reserved up front; longer runs grow their
/// buffers as they record.
const RESERVED_SWEEPS: u64 = 4096;

/// Runs the ensemble from `initial` (W × d row-major) for `burn_in`
/// discarded sweeps and `sweeps` kept ones, with [`chain_rng`]`(seed, 0)`.
/// See [`Ensemble::new`] for the errors.
pub fn run_ensemble(
    target: &dyn Target,
    config: &EnsembleConfig,
    initial: &[f64],
    sweeps: u64,
    burn_in: u64,
    seed: u64,
) -> Result<EnsembleRun> {
    run_ensemble_with(target, config, initial, sweeps, burn_in, seed, &mut |_| {
        ControlFlow::Continue(())
    })
}

/// [`run_ensemble`], calling `after_sweep` with the number of sweeps done
/// (burn-in included) after every sweep; [`ControlFlow::Break`] stops the
/// run and returns what was recorded so far.
pub fn run_ensemble_with(
    target: &dyn Target,
    config: &EnsembleConfig,
    initial: &[f64],
    sweeps: u64,
    burn_in: u64,
    seed: u64,
    after_sweep: &mut dyn FnMut(u64) -> ControlFlow<()>,
) -> Result<EnsembleRun> {
    config.validate()?;
    let (w, dim) = (config.walkers, target.dim());
    let total = burn_in
        .checked_add(sweeps)
        .ok_or_else(|| SamplerError::InvalidParameter {
            name: "sweeps",
            reason: format!("burn_in ({burn_in}) + sweeps ({sweeps}) overflows a u64"),
        })?;
    let values = usize::try_from(sweeps)
        .ok()
        .and_then(|s| s.checked_mul(w))
        .and_then(|s| s.checked_mul(dim.max(1)))
        .filter(|&v| v <= isize::MAX as usize / size_of::<f64>())
        .ok_or_else(|| SamplerError::InvalidParameter {
            name: "sweeps",
            reason: format!(
                "{sweeps} sweeps of {w} walkers in dimension {dim} cannot be addressed"
            ),
        })?;
    let mut ensemble = Ensemble::new(target, config, initial, seed)?;
    let reserved = sweeps.min(RESERVED_SWEEPS) as usize * w;
    let mut run = EnsembleRun {
        dim,
        walkers: w,
        a: config.stretch_scale,
        seed,
        burn_in,
        samples: Vec::with_capacity((reserved * dim).min(values)),
        log_densities: Vec::with_capacity(reserved),
        accepted: Vec::with_capacity(reserved),
        accepted_total: Vec::new(),
        evaluations: 0,
        rejected_non_finite: 0,
        sweeps_done: 0,
    };
    for t in 1..=total {
        ensemble.sweep(target)?;
        if t > burn_in {
            run.samples.extend_from_slice(ensemble.positions());
            run.log_densities
                .extend_from_slice(ensemble.log_densities());
            run.accepted.extend_from_slice(ensemble.accepted_last());
        }
        if after_sweep(t).is_break() {
            break;
        }
    }
    run.accepted_total = ensemble.accepted_total().to_vec();
    run.evaluations = ensemble.evaluations();
    run.rejected_non_finite = ensemble.rejected_non_finite();
    run.sweeps_done = ensemble.sweeps();
    Ok(run)
}
