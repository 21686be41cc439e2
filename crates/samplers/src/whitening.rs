//! Scale-free sampling: learn the target's location, scale and correlation
//! with a pilot random walk, then run any proposal in the coordinates where
//! the target is roughly N(0, I).
//!
//! The kernel samplers' settings (γ, bandwidths, leapfrog steps) are lengths.
//! The papers chose them for targets of scale 1–10; on a posterior whose
//! standard deviations are 10⁻³, or whose coordinates differ by 10⁴ in scale,
//! the same numbers propose nowhere near the mass. [`Whitened`] removes the
//! units: its proposal is
//!
//! 1. **pilot** (adapting steps 1 … W): the random walk N(x, ν²Σ_k) in
//!    windows of doubling length (25, 50, 100, … steps, the last stretched
//!    to end at W). Σ₀ is the inverse of minus a finite-difference Hessian
//!    of log π at the start for exact targets in up to
//!    [`WhiteningConfig::hessian_max_dim`] dimensions (the Laplace
//!    covariance; axis scales only above that, or where −H is not positive
//!    definite; I for pseudo-marginal targets). At the end of window k,
//!    Σ_{k+1} is the covariance of its states, computed in the coordinates
//!    of Σ_k and shrunk there toward a multiple of I with weight d²/(m + d²)
//!    for m accepted moves, and ν restarts at 2.38/√d; within a window ν is
//!    learned by Robbins–Monro toward acceptance 0.234 with steps 1/√t from
//!    the window's start. It needs no length from the user, and each window
//!    forgets the transient of the one before, which a running covariance
//!    over the whole history (adaptive Metropolis) does not: on a posterior
//!    whose scales differ by 10⁴ the early steps dominate AM's covariance
//!    for thousands of steps. The last window (the last third or more of the
//!    pilot) gives (μ, Σ), Σ = L Lᵀ.
//! 2. **whitened** (steps t > W): the wrapped proposal runs on
//!    u = L⁻¹(x − μ). It is started at the pilot's last state, sees the step
//!    index t − W, and proposes u*, mapped back to x* = μ + L u*. If it
//!    adapts, it is first handed the states of the pilot's last window, in
//!    u ([`Proposal::learn_from_pilot`]; at most the window's last 1 000):
//!    KMC's surrogate fits them with its own states, so its trajectories
//!    start sooner (at once if the window holds enough states) instead of
//!    after random-walk steps of its own.
//!
//! 3. **re-whitened** (optional, [`WhiteningConfig::rewhiten_fraction`]):
//!    at a later step W₂ of the adaptation period, (μ, Σ) are estimated
//!    again from the wrapped proposal's own states after the first fifth
//!    of its steps before W₂ (steps W + (W₂ − W)/5 … W₂) — it usually mixes
//!    far better than the pilot — the covariance shrunk as the pilot's
//!    windows are. If the wrapped proposal
//!    accepts the change of coordinates (u_new = B(u_old − c),
//!    [`Proposal::change_coordinates`]; KMC rewrites its history and refits
//!    its surrogate), the map becomes (μ', L'); otherwise the old map stays.
//!
//! Exactness: (μ, L) change at most twice, at steps W and W₂, and only while
//! adaptation is on; within a step they are fixed. The map is affine, so the density ratio
//! log q(x | x*) − log q(x* | x) equals that of the wrapped proposal in u
//! (the Jacobian |L| cancels), and once the engine stops adapting the chain
//! is the wrapped proposal's frozen chain in u — exactly π-invariant. If
//! adaptation stops during the pilot, the pilot's frozen random walk runs on.
//!
//! W is a fraction ([`WhiteningConfig::pilot_fraction`]) of the adaptation
//! period that the engine announces ([`Proposal::plan_adaptation`]), or
//! [`WhiteningConfig::pilot_steps`] when adaptation never stops.

use crate::Target;
use crate::adaptation::{RobbinsMonro, RunningMoments, Scale, StepSchedule};
use crate::covariance::ProposalCovariance;
use crate::engine::{AdaptationSummary, CoordinateChange, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, check_dim, check_target_dim, ensure, ensure_room};
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, MatRef};
use kameleon_core::TargetError;
use rand::Rng;
use rand_xoshiro::Xoshiro256PlusPlus;
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
    /// The largest dimension in which the pilot starts from the inverse of
    /// a finite-difference Hessian of log π at the start (about 2d²
    /// evaluations, counted as [`Proposal::target_evaluations`]; default
    /// 32). Above it, and for targets that are not exact (pseudo-marginal),
    /// only the diagonal scales are measured (a few evaluations per
    /// coordinate; none for inexact targets, which start from I).
    pub hessian_max_dim: usize,
    /// The share f₂ of the adaptation period after which the map is
    /// estimated again from the wrapped proposal's states, in
    /// (`pilot_fraction`, 1): W₂ = ⌊f₂ T⌋ (W₂ = ⌊W f₂ / f⌋ when adaptation
    /// never stops). `None` (the default): the pilot's map is kept.
    pub rewhiten_fraction: Option<f64>,
}

impl Default for WhiteningConfig {
    /// Half the adaptation period for the pilot (1000 steps if adaptation
    /// never stops).
    fn default() -> Self {
        Self {
            enabled: true,
            pilot_fraction: 0.5,
            pilot_steps: 1000,
            hessian_max_dim: 32,
            rewhiten_fraction: None,
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

    /// Sets the share of the adaptation period after which the map is
    /// re-estimated from the wrapped proposal's states, in
    /// (`pilot_fraction`, 1) (checked again by [`Whitened::new`]); `None`
    /// keeps the pilot's map.
    pub fn with_rewhiten_fraction(mut self, fraction: Option<f64>) -> Result<Self> {
        self.rewhiten_fraction = fraction;
        self.validate()?;
        Ok(self)
    }

    /// Checks the fractions: the pilot's in (0, 1), re-whitening's (if
    /// any) in (pilot's, 1).
    pub fn validate(&self) -> Result<()> {
        check_fraction(self.pilot_fraction)?;
        if let Some(f) = self.rewhiten_fraction {
            ensure(
                f > self.pilot_fraction && f < 1.0,
                "rewhiten_fraction",
                "must lie in (pilot_fraction, 1)",
            )?;
        }
        Ok(())
    }

    /// Sets the largest dimension with a full finite-difference Hessian.
    pub fn with_hessian_max_dim(mut self, dim: usize) -> Self {
        self.hessian_max_dim = dim;
        self
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

    /// The step W₂ of re-whitening for an adaptation period ending at
    /// `adapt_until`, if re-whitening is on and W₂ comes after the pilot.
    fn rewhiten_step(&self, adapt_until: Option<u64>) -> Option<u64> {
        let f = self.rewhiten_fraction?;
        let step = match adapt_until {
            Some(t) => (f * t as f64).floor() as u64,
            None => (self.pilot_steps as f64 * f / self.pilot_fraction).floor() as u64,
        };
        (step > self.pilot_length(adapt_until) + 1).then_some(step)
    }
}

fn check_fraction(fraction: f64) -> Result<()> {
    ensure(
        fraction > 0.0 && fraction < 1.0,
        "pilot_fraction",
        "must lie in (0, 1)",
    )
}

/// The shortest pilot window.
const FIRST_WINDOW: u64 = 25;

/// The pilot random walk N(x, ν²Σ_k) with Σ_k from the previous window
/// (module docs).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Pilot {
    dim: usize,
    covariance: ProposalCovariance,
    nu: RobbinsMonro,
    /// The moments of the current window's states.
    window: RunningMoments,
    /// Moves accepted in the current window.
    window_moves: u64,
    /// The first and the last step of the current window.
    window_start: u64,
    window_end: u64,
    /// The pilot's length W.
    length: u64,
    /// The mean estimated at the end of the last window whose covariance
    /// the pilot now proposes with (`covariance`), once a window has ended.
    estimate: Option<Vec<f64>>,
    scratch: Vec<f64>,
    /// A state in the current metric's whitened coordinates.
    whitened: Vec<f64>,
    /// Zeros: the origin of those coordinates.
    origin: Vec<f64>,
    /// The current window's last [`PILOT_STATES_KEPT`] states (x,
    /// row-major; past that many, each in place of the one that many before
    /// it). The wrapped proposal learns from the last window's
    /// ([`Proposal::learn_from_pilot`]).
    states: Vec<f64>,
}

/// The most pilot states kept for the wrapped proposal to learn from: a
/// pilot's last window is about a third of its steps, and a proposal that
/// learns from states (KMC: 200 history points, 100 before KMC finite's
/// trajectories start) needs a few hundred.
const PILOT_STATES_KEPT: usize = 1000;

impl Pilot {
    fn new(dim: usize) -> Result<Self> {
        Ok(Self {
            dim,
            covariance: ProposalCovariance::identity(dim),
            nu: Self::fresh_scale(dim)?,
            window: RunningMoments::new(dim),
            window_moves: 0,
            window_start: 1,
            window_end: 0,
            length: 0,
            estimate: None,
            scratch: vec![0.0; dim * dim],
            whitened: vec![0.0; dim],
            origin: vec![0.0; dim],
            states: Vec::new(),
        })
    }

    /// Records the state x of the current window's latest step, after its
    /// moments took it (so their count is this state's number in the
    /// window).
    fn keep_state(&mut self, x: &[f64]) {
        let seen = self.window.count() as usize;
        if seen == 1 {
            self.states.clear();
        }
        let d = self.dim;
        let slot = (seen - 1) % PILOT_STATES_KEPT;
        if self.states.len() == slot * d {
            self.states.extend_from_slice(x);
        } else {
            self.states[slot * d..(slot + 1) * d].copy_from_slice(x);
        }
    }

    /// Starts the pilot from the proposal covariance `cov` (d × d) instead
    /// of the identity (kept if it cannot be factored).
    fn start_from(&mut self, cov: &[f64]) {
        let _ = self.covariance.factor(cov);
    }

    fn fresh_scale(dim: usize) -> Result<RobbinsMonro> {
        RobbinsMonro::new(Scale::optimal_for(dim), 0.234, StepSchedule::InverseSqrt)
    }

    /// Sets the pilot's length W and lays out the first window.
    fn plan(&mut self, length: u64) {
        self.length = length;
        self.window_end = self.window_end_after(0, FIRST_WINDOW);
    }

    /// The end of a window of `len` steps after step `before`: W if the
    /// window after it (twice as long) would not fit before W.
    fn window_end_after(&self, before: u64, len: u64) -> u64 {
        let end = before + len;
        if end + 2 * len > self.length {
            self.length
        } else {
            end
        }
    }

    fn propose(&mut self, current: &[f64], proposed: &mut [f64], rng: &mut dyn Rng) {
        self.covariance
            .sample_into(current, self.nu.scale(), rng, proposed);
    }

    /// After adapting step `t`: learn ν, record the state (and keep it for
    /// the wrapped proposal if `keep`), and at the end of a window move to
    /// the next one.
    ///
    /// The window's states are recorded in the coordinates of the metric
    /// that proposed them, u = L_k⁻¹x, and their covariance S is shrunk
    /// toward (tr S/d) I with the weight d²/(m + d²) for m accepted moves:
    /// a random walk needs about d accepted moves per effectively
    /// independent state, so the window holds about n = m/d of them, and S
    /// gets the weight n/(n + d). A window with few moves has seen only a
    /// few directions, and its raw covariance would be nearly singular in
    /// the others (a metric that proposes nowhere); on diamonds (26-d) the
    /// weight d/(m + d) let the windows' noise undo a good curvature start
    /// (KAMH's minimum ESS per 1000 evaluations 1.7, against 2.6–3.1 now). Then Σ_{k+1} = L_k S' L_kᵀ; a window with fewer
    /// than 2 moves keeps Σ_k.
    fn adapt(&mut self, t: u64, current: &[f64], accepted: bool, accept_prob: f64, keep: bool) {
        self.nu.update(accept_prob);
        self.covariance
            .solve_into(current, &self.origin, &mut self.whitened);
        self.window.push(&self.whitened);
        if keep {
            self.keep_state(current);
        }
        self.window_moves += u64::from(accepted);
        if t < self.window_end {
            return;
        }
        let d = self.dim;
        let m = self.window_moves;
        if self.window_moves >= 2 {
            self.window.covariance_into(&mut self.scratch);
            shrink_toward_isotropic(&mut self.scratch, d, m);
            in_original_coordinates(&self.covariance, &mut self.scratch);
            let mut mean = vec![0.0; d];
            self.covariance
                .apply_into(&self.origin, self.window.mean(), &mut mean);
            if self.covariance.factor(&self.scratch).is_ok() {
                self.estimate = Some(mean);
                // ν was learned for the old shape; 2.38/√d suits the new one
                if let Ok(nu) = Self::fresh_scale(d) {
                    self.nu = nu;
                }
            }
        }
        let len = 2 * (self.window_end + 1 - self.window_start);
        self.window = RunningMoments::new(d);
        self.window_moves = 0;
        // the states stay until the next window's first: the last window's
        // go to the wrapped proposal
        self.window_start = self.window_end + 1;
        self.window_end = self.window_end_after(self.window_end, len);
    }
}

/// Shrinks the covariance S (d × d, row-major, in coordinates where the
/// target is roughly isotropic) toward (tr S/d) I with the weight
/// d²/(m + d²) for m accepted moves, as the pilot's windows do (see
/// [`Pilot::adapt`]).
///
/// Why toward a multiple of I and not toward diag(S) (shrinking only the
/// correlations): a coordinate that a short window barely moved along keeps
/// its small variance under the latter. Measured on the real-posterior
/// suite (3 seeds), shrinking toward diag(S) cut KMC lite's minimum ESS per
/// 1000 evaluations on diamonds (26-d) from 66 to 20 and on hmm_drive_0
/// from 256 to 99, and on a skewed 4-d product target it left more pilots
/// with a map below 0.7 of a coordinate's true sd (46 of 400 chains at
/// 2 000 tuning steps, against 34), though fewer below 0.5 (0 against 2).
fn shrink_toward_isotropic(cov: &mut [f64], d: usize, moves: u64) {
    let tau = (0..d).map(|i| cov[i * d + i]).sum::<f64>() / d as f64;
    let m = moves as f64;
    let weight = m / (m + (d * d) as f64);
    for (k, v) in cov.iter_mut().enumerate() {
        *v *= weight;
        if k % (d + 1) == 0 {
            *v += (1.0 - weight) * tau;
        }
    }
}

/// `cov` ← L S Lᵀ for the covariance S in `cov` (d × d, row-major) and the
/// factor L of `metric` (an O(d³) product through faer).
fn in_original_coordinates(metric: &ProposalCovariance, cov: &mut [f64]) {
    let d = metric.dim();
    let l = metric.lower_factor();
    let lower = Mat::from_fn(d, d, |i, j| if j <= i { l[(i, j)] } else { 0.0 });
    let s = MatRef::from_row_major_slice(cov, d, d);
    let product = &lower * s * lower.transpose();
    for i in 0..d {
        for j in 0..d {
            cov[i * d + j] = product[(i, j)];
        }
    }
}

/// The pilot's first metric from the curvature of log π at the start x₀:
/// the inverse of minus a finite-difference Hessian (the Laplace
/// approximation's covariance) if that is positive definite, else the
/// diagonal of squared lengths over which log π curves by about one unit.
/// `None` if log π is not finite around x₀. Counts its evaluations.
///
/// Scale-free: along each axis the difference step h_i starts at
/// 10⁻² max(|x₀ᵢ|, 1) and is rescaled (at most 40 times) until the second
/// difference c_i = f(x₀ + h_i eᵢ) + f(x₀ − h_i eᵢ) − 2 f(x₀) lies in
/// [1/4, 4] in magnitude, i.e. h_i is of the order of the target's
/// conditional standard deviation. The mixed terms use the four-point
/// formula with h_i, h_j: 1 + Σ(bracketing) + 2d(d − 1) evaluations.
struct Curvature<'a> {
    target: &'a dyn Target,
    evaluations: u64,
    point: Vec<f64>,
    rng: rand_xoshiro::Xoshiro256PlusPlus,
}

impl Curvature<'_> {
    /// log π at x₀ + Σ_k s_k e_{i_k}.
    fn at(&mut self, x0: &[f64], steps: &[(usize, f64)]) -> f64 {
        self.point.copy_from_slice(x0);
        for &(i, h) in steps {
            self.point[i] += h;
        }
        self.evaluations += 1;
        self.target.log_density(&self.point, &mut self.rng)
    }

    /// A step h along coordinate `i` and the second difference
    /// c = log π(x₀ + h eᵢ) + log π(x₀ − h eᵢ) − 2 log π(x₀) at it, with |c|
    /// near 1 (in [¼, 4], or the closest to 1 in 40 tries), so that c/h²
    /// estimates the curvature at the scale of the target; `None` if no
    /// step gave a finite c.
    ///
    /// Each try aims at |c| = 1 from c ≈ H_ii h² (by at most 10² per try)
    /// but stays strictly between the largest step known to give |c| < ¼
    /// and the smallest known to give |c| > 4 or a non-finite c, halving
    /// that bracket (in log h) where the aim would leave it. Where log π
    /// is linear on one side and doubly exponential on the other (the log
    /// of a half-normal variable, in its left tail) the aim alone jumps
    /// between two steps for ever.
    fn second_difference(&mut self, x0: &[f64], i: usize, f0: f64) -> Option<(f64, f64)> {
        let mut step = 1e-2 * x0[i].abs().max(1.0);
        let (mut small, mut large) = (0.0f64, f64::INFINITY);
        let mut best: Option<(f64, f64)> = None;
        // how far |c| is from 1, in log terms
        let miss = |c: f64| c.abs().ln().abs();
        for _ in 0..40 {
            let c = self.at(x0, &[(i, step)]) + self.at(x0, &[(i, -step)]) - 2.0 * f0;
            let aim = if c.is_finite() {
                if best.is_none_or(|(_, b)| miss(c) < miss(b)) {
                    best = Some((step, c));
                }
                let size = c.abs();
                if (0.25..=4.0).contains(&size) {
                    break;
                }
                if size < 0.25 {
                    small = step;
                } else {
                    large = step;
                }
                step * (1.0 / size.max(1e-300)).sqrt().clamp(1e-2, 1e2)
            } else {
                large = step;
                step * 0.25
            };
            step = if aim > small && aim < large {
                aim
            } else if small > 0.0 && large.is_finite() {
                (small * large).sqrt()
            } else if small > 0.0 {
                small * 4.0
            } else {
                large * 0.25
            };
        }
        best
    }

    /// The covariance (d × d, row-major) described in the type's docs.
    fn metric(&mut self, x0: &[f64], full: bool) -> Option<Vec<f64>> {
        let d = x0.len();
        let f0 = self.at(x0, &[]);
        let mut h = vec![0.0; d];
        let mut hessian = vec![0.0; d * d];
        for i in 0..d {
            let (step, c) = self.second_difference(x0, i, f0)?;
            h[i] = step;
            hessian[i * d + i] = c / (step * step);
        }
        let diagonal = |h: &[f64]| {
            let mut cov = vec![0.0; d * d];
            for i in 0..d {
                cov[i * d + i] = h[i] * h[i];
            }
            cov
        };
        if !full {
            return Some(diagonal(&h));
        }
        for i in 0..d {
            for j in 0..i {
                let (hi, hj) = (h[i], h[j]);
                let v = self.at(x0, &[(i, hi), (j, hj)])
                    - self.at(x0, &[(i, hi), (j, -hj)])
                    - self.at(x0, &[(i, -hi), (j, hj)])
                    + self.at(x0, &[(i, -hi), (j, -hj)]);
                let hij = v / (4.0 * hi * hj);
                if !hij.is_finite() {
                    return Some(diagonal(&h));
                }
                hessian[i * d + j] = hij;
                hessian[j * d + i] = hij;
            }
        }
        let minus = Mat::from_fn(d, d, |i, j| -hessian[i * d + j]);
        match minus.llt(faer::Side::Lower) {
            Ok(llt) => {
                let cov = llt.inverse();
                Some((0..d * d).map(|k| cov[(k / d, k % d)]).collect())
            }
            Err(_) => Some(diagonal(&h)),
        }
    }
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
    pilot: Pilot,
    /// The pilot's length W (set when the engine announces the adaptation
    /// period).
    pilot_length: u64,
    map: Option<AffineMap>,
    inner: P,
    inner_started: bool,
    /// Log-density evaluations of the curvature at the start.
    curvature_evaluations: u64,
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
    /// The step W₂ at which the map is re-estimated, while pending.
    rewhiten_at: Option<u64>,
    /// The last step before the states the re-estimate uses.
    rewhiten_from: u64,
    /// The moments of those states, in the current map's coordinates u.
    wrapped_moments: RunningMoments,
    /// Moves accepted among them.
    wrapped_moves: u64,
    /// Whether the map was re-estimated (and the wrapped proposal followed).
    rewhitened: bool,
    /// Jitters the re-estimated map's factor needed.
    map_jitters: u64,
    /// The pilot's last window's states in the map's coordinates u, until
    /// the wrapped proposal starts and learns from them.
    pilot_states: Vec<f64>,
}

impl<P: Proposal> Whitened<P> {
    /// `inner` (a proposal in dimension `dim`, to run in whitened
    /// coordinates) after a pilot, with the settings `config` (checked).
    /// Errors if `inner` was built for another dimension
    /// ([`Proposal::state_dim`]).
    pub fn new(inner: P, dim: usize, config: WhiteningConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        if let Some(inner_dim) = inner.state_dim() {
            check_dim(
                "the inner sampler's dimension",
                inner_dim,
                "the whitening's",
                dim,
            )?;
        }
        ensure_room("the whitening's d × d matrices", &[&[8, dim, dim]])?;
        config.validate()?;
        let mut pilot = Pilot::new(dim)?;
        pilot.plan(config.pilot_steps);
        Ok(Self {
            dim,
            config,
            pilot,
            pilot_length: config.pilot_steps,
            map: None,
            inner,
            inner_started: false,
            curvature_evaluations: 0,
            offset: 0,
            inner_adapts: true,
            adapt_until: None,
            pilot_step: true,
            current: vec![0.0; dim],
            proposed: vec![0.0; dim],
            after: vec![0.0; dim],
            scratch: vec![0.0; dim * dim],
            rewhiten_at: None,
            rewhiten_from: 0,
            wrapped_moments: RunningMoments::new(dim),
            wrapped_moves: 0,
            rewhitened: false,
            map_jitters: 0,
            pilot_states: Vec::new(),
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
    /// covariance (d × d, row-major), once the pilot has ended (the
    /// re-estimated ones after a re-whitening).
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

    /// Ends the pilot: (μ, Σ) from its last window (Σ's factor is the one
    /// the pilot proposes with), or, if no window moved the chain, the
    /// current state and the pilot's own proposal covariance ν²I.
    fn learn_map(&mut self, current: &[f64]) {
        let d = self.dim;
        let (mean, factor) = match &self.pilot.estimate {
            Some(mean) => (mean.clone(), self.pilot.covariance.clone()),
            None => {
                let nu2 = self.pilot.nu.scale().powi(2);
                let mut cov = vec![0.0; d * d];
                for i in 0..d {
                    cov[i * d + i] = nu2;
                }
                let mut factor = ProposalCovariance::identity(d);
                let _ = factor.factor(&cov);
                (current.to_vec(), factor)
            }
        };
        let map = AffineMap { mean, factor };
        let mut states = std::mem::take(&mut self.pilot.states);
        let mut u = vec![0.0; d];
        for x in states.chunks_exact_mut(d) {
            map.factor.solve_into(x, &map.mean, &mut u);
            x.copy_from_slice(&u);
        }
        self.pilot_states = states;
        self.map = Some(map);
    }

    /// Whether the map was re-estimated from the wrapped proposal's states
    /// (and the wrapped proposal followed it into the new coordinates).
    pub fn rewhitened(&self) -> bool {
        self.rewhitened
    }

    /// Re-whitening at W₂: (μ', Σ') from the moments of the wrapped
    /// proposal's states (in u, Σ shrunk as in the pilot's windows, then
    /// mapped back: μ' = μ + L ū, Σ' = L S' Lᵀ = L' L'ᵀ), offered to the
    /// wrapped proposal as u_new = B(u_old − ū) with B = L'⁻¹ L; the map
    /// changes only if it accepts. Fewer than 2 accepted moves, or a Σ'
    /// that cannot be factored, keep the map.
    fn rewhiten(&mut self, rng: &mut dyn Rng) {
        let d = self.dim;
        let moments = std::mem::replace(&mut self.wrapped_moments, RunningMoments::new(d));
        let Some(map) = &self.map else { return };
        if self.wrapped_moves < 2 {
            return;
        }
        let mut cov = vec![0.0; d * d];
        moments.covariance_into(&mut cov);
        shrink_toward_isotropic(&mut cov, d, self.wrapped_moves);
        in_original_coordinates(&map.factor, &mut cov);
        let mut factor = ProposalCovariance::identity(d);
        if factor.factor(&cov).is_err() {
            return;
        }
        let mut mean = vec![0.0; d];
        map.factor.apply_into(&map.mean, moments.mean(), &mut mean);
        let (l, zeros) = (map.factor.lower_factor(), vec![0.0; d]);
        let (mut column, mut solved) = (vec![0.0; d], vec![0.0; d]);
        let mut matrix = vec![0.0; d * d];
        for j in 0..d {
            for (i, v) in column.iter_mut().enumerate() {
                *v = if i >= j { l[(i, j)] } else { 0.0 };
            }
            factor.solve_into(&column, &zeros, &mut solved);
            for (i, v) in solved.iter().enumerate() {
                matrix[i * d + j] = *v;
            }
        }
        // c = L⁻¹(μ' − μ) = ū
        let Ok(change) = CoordinateChange::new(matrix, moments.mean().to_vec()) else {
            return;
        };
        if self.inner.change_coordinates(&change, rng) {
            self.map_jitters += factor.jitters();
            self.map = Some(AffineMap { mean, factor });
            self.rewhitened = true;
        }
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

impl<P: Proposal> Whitened<P> {
    /// [`Proposal::observe`] for any generator, telling the wrapped
    /// proposal with `inner_observe` (its `observe` or `observe_chain`).
    fn observe_with<R: Rng + ?Sized>(
        &mut self,
        outcome: &StepOutcome<'_>,
        adapt: bool,
        mut rng: &mut R,
        inner_observe: impl Fn(&mut P, &StepOutcome<'_>, bool, &mut R),
    ) {
        if !self.config.enabled {
            return inner_observe(&mut self.inner, outcome, adapt, rng);
        }
        let t = outcome.iteration;
        if self.pilot_step {
            if adapt {
                let (current, accepted) = (outcome.current, outcome.accepted);
                let keep = self.inner.learns_from_pilot();
                self.pilot
                    .adapt(t, current, accepted, outcome.accept_prob, keep);
            }
            if adapt && t >= self.pilot_length {
                self.learn_map(outcome.current);
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
        inner_observe(&mut self.inner, &whitened, adapt, rng);
        if let Some(at) = self.rewhiten_at.filter(|_| adapt) {
            if t > self.rewhiten_from {
                self.wrapped_moments.push(&self.after);
                self.wrapped_moves += u64::from(outcome.accepted);
            }
            if t >= at {
                self.rewhiten_at = None;
                self.rewhiten(&mut rng);
            }
        }
    }
}

impl<P: Proposal> Proposal for Whitened<P> {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn plan_adaptation(&mut self, adapt_until: Option<u64>) {
        self.adapt_until = adapt_until;
        if self.config.enabled {
            if self.map.is_none() {
                self.pilot_length = self.config.pilot_length(adapt_until);
                self.pilot.plan(self.pilot_length);
                self.rewhiten_at = self.config.rewhiten_step(adapt_until);
                if let Some(at) = self.rewhiten_at {
                    // the first fifth: the wrapped proposal's transient
                    self.rewhiten_from = self.pilot_length + (at - self.pilot_length) / 5;
                }
            }
        } else {
            self.inner.plan_adaptation(adapt_until);
        }
    }

    fn uses_target_gradient(&self) -> bool {
        self.inner.uses_target_gradient()
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
        if !self.config.enabled {
            return self.inner.initialise(target, x, adapts);
        }
        if self.inner.uses_target_gradient() {
            // the wrapped proposal starts after the pilot, where it could
            // no longer refuse a target without a gradient
            crate::hmc::require_gradient(target, x)?;
        }
        if self.map.is_some() {
            // a whitened sampler reused for a new chain: the wrapped
            // proposal restarts at the new point at the next step
            self.inner_started = false;
            self.inner_adapts = adapts;
            self.offset = 0;
            // the map is kept as learned; no second re-estimate
            self.rewhiten_at = None;
        } else if adapts && target.is_exact() {
            let mut curvature = Curvature {
                target,
                evaluations: 0,
                point: vec![0.0; self.dim],
                rng: rand::SeedableRng::seed_from_u64(0),
            };
            let full = self.dim <= self.config.hessian_max_dim;
            if let Some(cov) = curvature.metric(x, full) {
                self.pilot.start_from(&cov);
            }
            self.curvature_evaluations += curvature.evaluations;
        }
        Ok(())
    }

    fn target_evaluations(&self) -> u64 {
        self.curvature_evaluations + self.inner.target_evaluations()
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
            self.pilot.propose(current, proposed, rng);
            return 0.0;
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
                // Unreachable for a wrapped proposal of this dimension
                // (checked by `new`) on a target that offers what it needs;
                // a NaN correction rejects the step rather than panicking.
                return f64::NAN;
            }
            let states = std::mem::take(&mut self.pilot_states);
            if self.inner_adapts {
                self.inner.learn_from_pilot(&states);
            }
        }
        let correction = self
            .inner
            .propose(&view, &self.current, &mut self.proposed, rng);
        map.factor.apply_into(&map.mean, &self.proposed, proposed);
        correction
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, rng: &mut dyn Rng) {
        self.observe_with(outcome, adapt, rng, |inner, outcome, adapt, rng| {
            inner.observe(outcome, adapt, rng)
        });
    }

    fn observe_chain(
        &mut self,
        outcome: &StepOutcome<'_>,
        adapt: bool,
        rng: &mut Xoshiro256PlusPlus,
    ) {
        self.observe_with(outcome, adapt, rng, P::observe_chain);
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
            AdaptationSummary {
                scale: Some(self.pilot.nu.scale()),
                ..AdaptationSummary::default()
            }
        };
        summary
            .extra
            .push(("pilot_steps".into(), self.pilot_length as f64));
        summary
            .extra
            .push(("whitened".into(), f64::from(u8::from(self.map.is_some()))));
        if self.config.rewhiten_fraction.is_some() {
            summary
                .extra
                .push(("rewhitened".into(), f64::from(u8::from(self.rewhitened))));
        }
        summary
    }

    fn covariance_jitters(&self) -> u64 {
        // the map's factor is the pilot's (or a diagonal that needs none),
        // or the re-estimated one
        self.pilot.covariance.jitters() + self.map_jitters + self.inner.covariance_jitters()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kameleon_core::FnTarget;

    fn curvature(target: &dyn Target) -> Curvature<'_> {
        Curvature {
            target,
            evaluations: 0,
            point: vec![0.0; target.dim()],
            rng: rand::SeedableRng::seed_from_u64(0),
        }
    }

    #[test]
    fn the_curvature_metric_of_a_gaussian_is_its_covariance() {
        // log π quadratic with precision P: the central differences are
        // exact up to round-off, whatever the steps, so (−H)⁻¹ = P⁻¹ = Σ.
        // Σ (scales 10⁻³ … 10, correlation 0.9) and its inverse by hand:
        // Σ = D R D with R the AR(1) correlation, R⁻¹ tridiagonal.
        let s = [1e-3, 0.1, 10.0];
        let rho: f64 = 0.9;
        let r_inv = |i: usize, j: usize| -> f64 {
            let c = 1.0 / (1.0 - rho * rho);
            match (i, j) {
                _ if i == j && (i == 0 || i == 2) => c,
                _ if i == j => c * (1.0 + rho * rho),
                _ if i.abs_diff(j) == 1 => -c * rho,
                _ => 0.0,
            }
        };
        let precision = move |i: usize, j: usize| r_inv(i, j) / (s[i] * s[j]);
        let mean = [3.0, -200.0, 1e4];
        let target = FnTarget::new(3, move |x: &[f64]| {
            let mut q = 0.0;
            for i in 0..3 {
                for j in 0..3 {
                    q += (x[i] - mean[i]) * precision(i, j) * (x[j] - mean[j]);
                }
            }
            -0.5 * q
        });
        let mut c = curvature(&target);
        // away from the mode: the Hessian of a quadratic is the same
        let start = [3.001, -199.9, 1.001e4];
        let cov = c.metric(&start, true).expect("finite");
        for i in 0..3 {
            for j in 0..3 {
                let exact = s[i] * s[j] * rho.powi(i.abs_diff(j) as i32);
                let err = (cov[i * 3 + j] - exact).abs() / (s[i] * s[j]);
                assert!(err < 1e-4, "({i}, {j}): {} vs {exact}", cov[i * 3 + j]);
            }
        }
        // bracketing plus 2d(d − 1) mixed evaluations
        assert!(c.evaluations > 2 * 3 * 2, "{}", c.evaluations);
    }

    #[test]
    fn a_start_where_the_density_is_linear_on_one_side_gets_a_finite_scale() {
        // log π(u) = u − e^{2u}/8 (log |z| for z ~ N(0, 2²)) at u = −1.77:
        // linear to the left, doubly exponential to the right, so aiming at
        // |c| = 1 jumped between h ≈ 0.08 and h ≈ 8 for all 40 tries and
        // paired the last h with the c of the one before: a scale of 832
        // where the target's sd is 1.1. The bracketed search ends inside
        // [1/4, 4], with its own c.
        let f = |u: f64| u - (2.0 * u).exp() / 8.0;
        let target = FnTarget::new(1, move |x: &[f64]| f(x[0]));
        let x0 = -1.77;
        let mut curvature = curvature(&target);
        let (step, c) = curvature
            .second_difference(&[x0], 0, f(x0))
            .expect("finite");
        assert_eq!(c, f(x0 + step) + f(x0 - step) - 2.0 * f(x0));
        assert!((0.25..=4.0).contains(&c.abs()), "c {c} at h {step}");
        let cov = curvature.metric(&[x0], true).expect("finite");
        let sd = cov[0].sqrt();
        assert!((0.5..=5.0).contains(&sd), "sd {sd}");
    }

    #[test]
    fn a_target_that_is_not_concave_at_the_start_gets_its_axis_scales() {
        // log π = −x₀²/(2·0.01²) + x₁²/2 (convex in x₁): −H is not positive
        // definite, so the metric is diagonal, h_i² with |c_i| = |H_ii| h_i²
        // ∈ [1/4, 4]: h₀² within [1/4, 4] of 0.01² and h₁² of 1
        let target = FnTarget::new(2, |x: &[f64]| {
            -0.5 * (x[0] / 0.01).powi(2) + 0.5 * x[1] * x[1]
        });
        let cov = curvature(&target)
            .metric(&[0.0, 0.0], true)
            .expect("finite");
        assert_eq!(cov[1], 0.0);
        assert_eq!(cov[2], 0.0);
        let h0 = cov[0].sqrt() / 0.01;
        let h1 = cov[3].sqrt();
        assert!((0.25..=4.0).contains(&(h0 * h0)), "h0 {h0}");
        assert!((0.25..=4.0).contains(&(h1 * h1)), "h1 {h1}");
    }

    #[test]
    fn the_pilot_keeps_its_windows_last_states() {
        // 2 500 states in one window: the last 1 000 kept, each in the slot
        // of its index mod 1 000; a new window's first state starts afresh
        let mut pilot = Pilot::new(1).unwrap();
        for k in 0..2_500 {
            pilot.window.push(&[k as f64]);
            pilot.keep_state(&[k as f64]);
        }
        assert_eq!(pilot.states.len(), PILOT_STATES_KEPT);
        for (slot, x) in pilot.states.iter().enumerate() {
            let expected = if slot < 500 {
                2_000 + slot
            } else {
                1_000 + slot
            };
            assert_eq!(*x, expected as f64);
        }
        pilot.window = RunningMoments::new(1);
        pilot.window.push(&[-1.0]);
        pilot.keep_state(&[-1.0]);
        assert_eq!(pilot.states, vec![-1.0]);
    }

    #[test]
    fn a_start_outside_the_support_gives_no_metric() {
        let target = FnTarget::new(
            1,
            |x: &[f64]| if x[0] > 0.0 { 0.0 } else { f64::NEG_INFINITY },
        );
        assert!(curvature(&target).metric(&[-1.0], true).is_none());
    }
}
