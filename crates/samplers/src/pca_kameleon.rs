//! PCA-Kameleon (Sejdinovic et al. 2014, arXiv version, Appendix C): a
//! mixture of rank-one kernel moves along the principal directions of the
//! subsample's centred kernel matrix.

use crate::Target;
use crate::adaptation::AdaptProbability;
use crate::adaptation::Scale;
use crate::engine::{AdaptationSummary, KeptStates, Proposal, StepOutcome};
use crate::error::{Result, check_target_dim, ensure, ensure_room};
use crate::kamh::{LengthScale, Refresh, SubsampleAdaptation, SubsampleConfig};
use crate::kamh_covariance::KamhCovariance;
use faer::linalg::matmul::matmul;
use faer::{Accum, Mat, MatMut, MatRef, Par, Side};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};

/// Eigenvalues below this fraction of the largest are treated as zero
/// (their directions are dropped).
const RELATIVE_EIGENVALUE_FLOOR: f64 = 1e-10;

/// The configuration of [`PcaKameleon`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PcaKameleonConfig {
    /// Subsample, refresh, bandwidth, γ and the initial random walk.
    pub subsample: SubsampleConfig,
    /// The number m ≥ 1 of principal directions (at most n − 1 are
    /// non-degenerate; fewer are used if HKH has fewer positive eigenvalues).
    pub components: usize,
    /// The scale ν_j of each direction, all starting from this one; with
    /// [`Scale::Adaptive`] each ν_j is adapted by its own Robbins–Monro
    /// recursion at the steps whose move used direction j (Andrieu & Thoms
    /// 2008, Alg. 8, in the RKHS).
    pub scale: Scale,
}

impl Default for PcaKameleonConfig {
    /// [`SubsampleConfig::default`], m = 5 directions, each ν_j fixed at 2.38.
    ///
    /// Slow while adapting: once the history holds n = 1000 states, the
    /// subsample is redrawn at every adapting step, and each redraw costs
    /// an O(n³) eigendecomposition of its 1000 × 1000 kernel matrix (about
    /// 0.3 s a step in d = 2 on a 2-core Xeon: a 5000-step burn-in takes
    /// some 20 minutes). To adapt over thousands of steps, redraw less
    /// often (`subsample.refresh`; [`PcaKameleonConfig::scale_free`] redraws
    /// with probability t^−½) or take a smaller n.
    fn default() -> Self {
        Self {
            subsample: SubsampleConfig::default(),
            components: 5,
            scale: Scale::Fixed(2.38),
        }
    }
}

impl PcaKameleonConfig {
    /// The settings for a target of unit scale in dimension `dim`, i.e. run
    /// in [`crate::Whitened`] coordinates (the Python package's defaults):
    /// [`SubsampleConfig::scale_free`] (γ = 2.38/√d, a random walk's
    /// optimal scale) but with the subsample redrawn at adapting step t with
    /// probability t^−½ (each redraw costs an O(n³) eigendecomposition),
    /// m = 5 directions, each ν_j learned from 2.38.
    ///
    /// Why γ scales with d: each move is rank one along a single principal
    /// direction, so in every other direction the chain moves by γ alone; at
    /// a fixed γ = 0.2 that is a random walk far below its optimal scale
    /// once d exceeds a few. On the posteriordb benchmark
    /// (`python/benchmarks/real_posteriors.py`, d = 3–26; medians of 3
    /// seeds) γ = 0.2 gave a minimum bulk ESS per 1000 evaluations 4–14
    /// times below γ = 0.75 · 2.38/√d, and 2.38/√d gives 1.24–1.57 times
    /// more than 0.75 · 2.38/√d on the seven posteriors either passes (on
    /// the ODE's heavy-tailed log V_m, 5 of seeds 1–6 pass against 3). On
    /// the 8-d banana B(0.1, 100) (4 × 25 000 steps, seeds 1–3) it accepts
    /// less, 0.09–0.15 against 0.12–0.19, with quantile errors of the same
    /// size: both mix slowly there (minimum ESS 7–80).
    ///
    /// A `dim` of 0 is treated as 1.
    pub fn scale_free(dim: usize) -> Self {
        let mut subsample = SubsampleConfig::scale_free(dim);
        subsample.refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
        Self {
            subsample,
            components: 5,
            scale: Scale::learned_from(2.38).expect("a valid constant"),
        }
    }

    /// Sets the subsample part (checked).
    pub fn with_subsample(mut self, subsample: SubsampleConfig) -> Result<Self> {
        subsample.validate()?;
        self.subsample = subsample;
        Ok(self)
    }

    /// Sets the number m ≥ 1 of principal directions.
    pub fn with_components(mut self, components: usize) -> Result<Self> {
        check_components(components)?;
        self.components = components;
        Ok(self)
    }

    /// Sets the starting scale of every direction (a fixed ν must be
    /// positive and finite).
    pub fn with_scale(mut self, scale: Scale) -> Result<Self> {
        scale.validate("scale")?;
        self.scale = scale;
        Ok(self)
    }
}

fn check_components(components: usize) -> Result<()> {
    ensure(components >= 1, "components", "must be at least 1")
}

/// PCA-Kameleon: given the subsample z, the top-m unit eigenvectors α⁽ʲ⁾ of
/// the centred kernel matrix HKH (eigenvalues λ_j) define the proposal
///
/// `q_z(·|y) = Σ_j ω_j N(y, γ²I + ν_j² u_j(y) u_j(y)ᵀ)`, `u_j(y) = M_{z,y} H α⁽ʲ⁾`,
///
/// with ω_j = λ_j / Σ_l λ_l and M_{z,y} the KAMH gradient matrix at y
/// (see [`crate::KamhCovariance`]).
///
/// # Derivation (arXiv Appendix C, Proposition 3)
///
/// The move is drawn hierarchically: j ~ Discrete(ω), ρ ~ N(0, 1) (the scale
/// of the step along the j-th eigenfunction in the RKHS) and
/// x* | y, j, ρ ~ N(y + ρ ν_j u_j, γ²I). Given j, x* − y = ρ ν_j u_j + γξ is
/// a linear map of the independent Gaussians (ρ, ξ), hence Gaussian with
/// mean 0 and covariance ν_j² u_j u_jᵀ + γ²I: integrating ρ out gives the
/// j-th mixture component above, and summing over j with weights ω_j gives
/// q_z. Each component has a closed-form density through the matrix
/// determinant lemma and Sherman–Morrison: with v = x − y, s = ‖u_j‖²,
/// c = ν_j²/γ²,
///
/// `log N(v; 0, γ²I + ν_j² u_j u_jᵀ) = −½[d log(2πγ²) + log(1 + cs) + (‖v‖² − c (u_jᵀv)²/(1 + cs))/γ²]`,
///
/// so one density costs O(md) once U(y) = M_{z,y} H A (d × m) is known
/// (O(ndm), one product). Because α⁽ʲ⁾ ⊥ 1 for λ_j > 0 (HKH1 = 0), Hα⁽ʲ⁾ =
/// α⁽ʲ⁾ in exact arithmetic; the implementation centres the eigenvectors
/// explicitly, which is the printed M H α⁽ʲ⁾.
///
/// The proposal is not symmetric: the Hastings correction uses U at x* for
/// the reverse density and the same z, eigenvectors and scales for both; U
/// at the current state is cached (swapped on acceptance). The
/// eigendecomposition (O(n³), allocating) is redone only when z changes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PcaKameleon<K> {
    adaptation: SubsampleAdaptation<K>,
    requested: usize,
    scales: Vec<Scale>,
    /// log ω_j of the used directions.
    log_weights: Vec<f64>,
    /// The used eigenvalues λ_j (largest first).
    eigenvalues: Vec<f64>,
    /// H α⁽ʲ⁾, n × m column-major (m = `eigenvalues.len()`).
    directions: Vec<f64>,
    builder: KamhCovariance,
    /// U at the current state, d × m column-major.
    current: Vec<f64>,
    current_valid: bool,
    /// U at the proposal (or scratch), d × m column-major.
    proposed: Vec<f64>,
    chosen: usize,
    used_kernel: bool,
}

impl<K: LengthScale> PcaKameleon<K> {
    /// PCA-Kameleon in dimension `dim` with the initial `kernel`.
    pub fn new(dim: usize, kernel: K, config: PcaKameleonConfig) -> Result<Self> {
        check_components(config.components)?;
        config.scale.validate("scale")?;
        let adaptation = SubsampleAdaptation::new(dim, kernel, config.subsample)?;
        let n = adaptation.subsample_size();
        let m = config.components.min(n);
        ensure_room(
            "PCA-Kameleon's directions (n × m, two d × m)",
            &[&[n, m], &[2, dim, m]],
        )?;
        Ok(Self {
            adaptation,
            requested: m,
            scales: vec![config.scale; m],
            log_weights: Vec::with_capacity(m),
            eigenvalues: Vec::with_capacity(m),
            directions: vec![0.0; n * m],
            builder: KamhCovariance::new(dim, n),
            current: vec![0.0; dim * m],
            current_valid: false,
            proposed: vec![0.0; dim * m],
            chosen: 0,
            used_kernel: false,
        })
    }

    /// Installs a subsample z (n × d, finite) and its principal directions.
    pub fn set_subsample(&mut self, z: MatRef<'_, f64>) -> Result<()> {
        self.adaptation.set_subsample(z)?;
        self.update_directions();
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

    /// The eigenvalues λ_j of HKH of the used directions, largest first
    /// (empty before the first subsample).
    pub fn eigenvalues(&self) -> &[f64] {
        &self.eigenvalues
    }

    /// The current scales ν_j of the used directions.
    pub fn scales(&self) -> impl Iterator<Item = f64> + '_ {
        self.scales[..self.eigenvalues.len()]
            .iter()
            .map(Scale::value)
    }

    /// The current γ.
    pub fn gamma(&self) -> f64 {
        self.adaptation.gamma()
    }

    /// log q_z(x | y) with the current subsample, directions, scales and γ
    /// (allocation-free; uses the proposal slot as scratch, so call it
    /// between steps). Before the first subsample (or if HKH has no positive
    /// eigenvalue) it is the initial random walk's density.
    pub fn log_density(&mut self, y: &[f64], x: &[f64]) -> f64 {
        if !self.adaptation.active() || self.eigenvalues.is_empty() {
            return isotropic_log_density(x, y, self.adaptation.warmup_scale());
        }
        self.directions_at(y, false);
        self.mixture_log_density(false, x, y)
    }

    /// Eigendecomposition of HKH for the current z: keeps the top
    /// `requested` directions with positive eigenvalues, centred.
    fn update_directions(&mut self) {
        let n = self.adaptation.subsample_size();
        let kernel = &self.adaptation.kernel;
        let mut centred = Mat::<f64>::from_fn(n, n, |i, j| {
            kernel.eval(self.adaptation.point(i), self.adaptation.point(j))
        });
        double_centre(centred.as_mut());
        self.eigenvalues.clear();
        self.log_weights.clear();
        let Ok(evd) = centred.self_adjoint_eigen(Side::Lower) else {
            self.current_valid = false;
            return;
        };
        let (s, u) = (evd.S().column_vector(), evd.U());
        let largest = s[n - 1];
        for k in 0..self.requested {
            let idx = n - 1 - k;
            let lambda = s[idx];
            if !(largest > 0.0 && lambda > RELATIVE_EIGENVALUE_FLOOR * largest) {
                break;
            }
            let column = &mut self.directions[k * n..(k + 1) * n];
            let mean = (0..n).map(|i| u[(i, idx)]).sum::<f64>() / n as f64;
            for (i, c) in column.iter_mut().enumerate() {
                *c = u[(i, idx)] - mean;
            }
            self.eigenvalues.push(lambda);
        }
        let total: f64 = self.eigenvalues.iter().sum();
        self.log_weights
            .extend(self.eigenvalues.iter().map(|l| (l / total).ln()));
        self.current_valid = false;
    }

    /// U(y) = M_{z,y} H A into the current (or proposal) slot.
    fn directions_at(&mut self, y: &[f64], into_current: bool) {
        let (d, n, m) = (
            self.adaptation.dim,
            self.adaptation.subsample_size(),
            self.eigenvalues.len(),
        );
        let grad = self
            .builder
            .gradient_matrix(&self.adaptation.kernel, y, self.adaptation.z());
        let a = MatRef::from_column_major_slice(&self.directions[..n * m], n, m);
        let slot = if into_current {
            &mut self.current
        } else {
            &mut self.proposed
        };
        let out = MatMut::from_column_major_slice_mut(&mut slot[..d * m], d, m);
        matmul(out, Accum::Replace, grad, a, 1.0, Par::Seq);
    }

    /// log Σ_j ω_j N(x; y, γ²I + ν_j² u_j u_jᵀ) with U from the chosen slot.
    fn mixture_log_density(&self, from_current: bool, x: &[f64], y: &[f64]) -> f64 {
        let d = self.adaptation.dim;
        let slot = if from_current {
            &self.current
        } else {
            &self.proposed
        };
        let gamma2 = self.adaptation.gamma().powi(2);
        let v_norm2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
        let base = -0.5 * d as f64 * (2.0 * std::f64::consts::PI * gamma2).ln();
        let mut max = f64::NEG_INFINITY;
        // two passes (max, then sum) keep the log-sum-exp allocation-free
        let component = |j: usize| {
            let u = &slot[j * d..(j + 1) * d];
            let s: f64 = u.iter().map(|v| v * v).sum();
            let uv: f64 = u
                .iter()
                .zip(x.iter().zip(y))
                .map(|(u, (a, b))| u * (a - b))
                .sum();
            let c = self.scales[j].value().powi(2) / gamma2;
            let denom = 1.0 + c * s;
            self.log_weights[j] + base
                - 0.5 * (denom.ln() + (v_norm2 - c * uv * uv / denom) / gamma2)
        };
        for j in 0..self.eigenvalues.len() {
            max = max.max(component(j));
        }
        if !max.is_finite() {
            return max;
        }
        let sum: f64 = (0..self.eigenvalues.len())
            .map(|j| (component(j) - max).exp())
            .sum();
        max + sum.ln()
    }
}

/// log N(x; y, w²I).
fn isotropic_log_density(x: &[f64], y: &[f64], w: f64) -> f64 {
    let d = x.len() as f64;
    let r2: f64 = x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum();
    -0.5 * r2 / (w * w) - d * w.ln() - 0.5 * d * (2.0 * std::f64::consts::PI).ln()
}

/// K ← HKH for a symmetric n × n K (row means equal column means).
fn double_centre(mut k: MatMut<'_, f64>) {
    let n = k.nrows();
    let means: Vec<f64> = (0..n)
        .map(|j| (0..n).map(|i| k[(i, j)]).sum::<f64>() / n as f64)
        .collect();
    let grand = means.iter().sum::<f64>() / n as f64;
    for j in 0..n {
        for i in 0..n {
            k[(i, j)] += grand - means[i] - means[j];
        }
    }
}

impl<K: LengthScale> PcaKameleon<K> {
    /// [`Proposal::observe`] for any generator: swaps the cached factors on
    /// acceptance and, if `adapt`, updates the chosen ν and the subsample.
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
                self.scales[self.chosen].update(outcome.accept_prob);
            }
            if self
                .adaptation
                .adapt(outcome.iteration, outcome.current, rng)
            {
                self.update_directions();
            }
        }
    }
}

impl<K: LengthScale> Proposal for PcaKameleon<K> {
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
        self.used_kernel = self.adaptation.active() && !self.eigenvalues.is_empty();
        if !self.used_kernel {
            self.adaptation.warmup_step(current, proposed, rng);
            return 0.0;
        }
        if !self.current_valid {
            self.directions_at(current, true);
            self.current_valid = true;
        }
        let d = self.adaptation.dim;
        // j ~ ω by inversion of the cumulative weights
        let u: f64 = rng.random();
        let mut acc = 0.0;
        let m = self.eigenvalues.len();
        self.chosen = m - 1;
        for j in 0..m {
            acc += self.log_weights[j].exp();
            if u < acc {
                self.chosen = j;
                break;
            }
        }
        let j = self.chosen;
        let rho: f64 = rng.sample(StandardNormal);
        let step = rho * self.scales[j].value();
        let gamma = self.adaptation.gamma();
        let direction = &self.current[j * d..(j + 1) * d];
        for ((p, c), u) in proposed.iter_mut().zip(current).zip(direction) {
            *p = c + step * u + gamma * rng.sample::<f64, _>(StandardNormal);
        }
        let log_forward = self.mixture_log_density(true, proposed, current);
        self.directions_at(proposed, false);
        let log_reverse = self.mixture_log_density(false, current, proposed);
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
        for (j, (lambda, scale)) in self.eigenvalues.iter().zip(&self.scales).enumerate() {
            extra.push((format!("eigenvalue_{j}"), *lambda));
            extra.push((format!("nu_{j}"), scale.value()));
        }
        AdaptationSummary {
            extra,
            ..AdaptationSummary::default()
        }
    }
}
