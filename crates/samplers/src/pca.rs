//! Adaptive Metropolis along principal components (Andrieu & Thoms 2008,
//! Alg. 8; the baseline of KAMH Appendix C): a mixture of one-dimensional
//! random walks x* = x + ρ ν_j √λ_j v_j, ρ ~ N(0, 1), direction j chosen with
//! probability ω_j = λ_j / Σ_l λ_l among the m leading eigenpairs (λ_j, v_j) of
//! the adapted covariance, with one Robbins–Monro scale ν_j per direction.

use crate::Target;
use crate::adaptation::{RobbinsMonro, StepSchedule};
use crate::am::{MomentEstimator, MomentUpdate};
use crate::engine::{AdaptationSummary, Proposal, StepOutcome};
use crate::error::{Result, check_target_dim, ensure, ensure_room};
use faer::diag::DiagMut;
use faer::dyn_stack::MemStack;
use faer::linalg::evd::{ComputeEigenvectors, self_adjoint_evd, self_adjoint_evd_scratch};
use faer::{MatMut, MatRef, Par};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use std::mem::MaybeUninit;

/// Eigenvalues are floored here so that zero-variance histories still give
/// a usable (tiny) step.
const MIN_EIGENVALUE: f64 = 1e-12;

/// Eigenvalues are also floored at this fraction of the largest one: a
/// direction whose estimated variance collapsed would otherwise be proposed
/// almost never and with almost no step, so the chain could not correct the
/// estimate (a positive feedback observed with short warm-ups).
const RELATIVE_EIGENVALUE_FLOOR: f64 = 1e-4;

/// The settings of [`PrincipalComponents`] (the defaults are those of the
/// Python package's AM-PCA).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PrincipalComponentsConfig {
    /// The number m of leading directions (1 ≤ m ≤ d); `None` (the default)
    /// is all d.
    pub components: Option<usize>,
    /// How the covariance is learned (default [`MomentUpdate::Empirical`]).
    pub moments: MomentUpdate,
    /// The step sizes of the per-direction scales, started at 2.38 and
    /// adapted toward acceptance 0.44 (the optimum for one-dimensional
    /// moves); default t^−0.7.
    pub schedule: StepSchedule,
    /// The adaptive updates before the first eigendecomposition; `None`
    /// (the default) is 100d.
    pub warmup: Option<u64>,
    /// The adaptive updates between eigendecompositions (≥ 1; default 10).
    pub refresh_every: u64,
}

impl Default for PrincipalComponentsConfig {
    /// All d directions, empirical moments, steps t^−0.7, warm-up 100d,
    /// refresh every 10 updates.
    fn default() -> Self {
        Self {
            components: None,
            moments: MomentUpdate::Empirical,
            schedule: StepSchedule::Power { kappa: 0.7 },
            warmup: None,
            refresh_every: 10,
        }
    }
}

impl PrincipalComponentsConfig {
    /// Sets the number m ≥ 1 of directions ([`PrincipalComponents::new`]
    /// checks m ≤ d).
    pub fn with_components(mut self, components: usize) -> Result<Self> {
        ensure(components >= 1, "components", "must lie in 1..=dim")?;
        self.components = Some(components);
        Ok(self)
    }

    /// Sets how the covariance is learned.
    pub fn with_moments(mut self, moments: MomentUpdate) -> Result<Self> {
        moments.validate()?;
        self.moments = moments;
        Ok(self)
    }

    /// Sets the step sizes of the per-direction scales.
    pub fn with_schedule(mut self, schedule: StepSchedule) -> Result<Self> {
        schedule.validate()?;
        self.schedule = schedule;
        Ok(self)
    }

    /// Sets the warm-up.
    pub fn with_warmup(mut self, warmup: u64) -> Self {
        self.warmup = Some(warmup);
        self
    }

    /// Sets the refresh interval (≥ 1).
    pub fn with_refresh_every(mut self, refresh_every: u64) -> Result<Self> {
        check_refresh_every(refresh_every)?;
        self.refresh_every = refresh_every;
        Ok(self)
    }
}

fn check_refresh_every(refresh_every: u64) -> Result<()> {
    ensure(refresh_every >= 1, "refresh_every", "must be at least 1")
}

/// Principal-components adaptive Metropolis (symmetric: no Hastings
/// correction, since the mixture weights do not depend on the state).
///
/// Before `warmup` adaptive updates the directions are the coordinate axes
/// with λ = 1. Afterwards the eigendecomposition of the covariance estimate
/// is refreshed every `refresh_every` adaptive updates (O(d³),
/// allocation-free after the first).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PrincipalComponents {
    dim: usize,
    components: usize,
    moments: MomentEstimator,
    scales: Vec<RobbinsMonro>,
    /// The m leading eigenvalues, descending.
    eigenvalues: Vec<f64>,
    /// Their eigenvectors, d × m column-major.
    eigenvectors: Vec<f64>,
    /// Cumulative ω_j.
    cumulative_weights: Vec<f64>,
    chosen: usize,
    warmup: u64,
    refresh_every: u64,
    updates: u64,
    failed_decompositions: u64,
    cov: Vec<f64>,
    all_values: Vec<f64>,
    all_vectors: Vec<f64>,
    #[serde(skip)]
    stack: Vec<MaybeUninit<f64>>,
}

impl PrincipalComponents {
    /// PCA-AM in dimension `dim` ≥ 1 with the settings `config` (checked).
    pub fn new(dim: usize, config: PrincipalComponentsConfig) -> Result<Self> {
        ensure(dim >= 1, "dim", "must be at least 1")?;
        ensure_room("AM-PCA's d × d matrices", &[&[6, dim, dim]])?;
        let components = config.components.unwrap_or(dim);
        ensure(
            (1..=dim).contains(&components),
            "components",
            "must lie in 1..=dim",
        )?;
        check_refresh_every(config.refresh_every)?;
        let moments = MomentEstimator::new(dim, config.moments)?;
        let (schedule, refresh_every) = (config.schedule, config.refresh_every);
        let warmup = config.warmup.unwrap_or(100 * dim as u64);
        let scale = RobbinsMonro::new(2.38, 0.44, schedule)?;
        let mut eigenvectors = vec![0.0; dim * components];
        for j in 0..components {
            eigenvectors[j * dim + j] = 1.0;
        }
        let mut this = Self {
            dim,
            components,
            moments,
            scales: vec![scale; components],
            eigenvalues: vec![1.0; components],
            eigenvectors,
            cumulative_weights: vec![0.0; components],
            chosen: 0,
            warmup,
            refresh_every,
            updates: 0,
            failed_decompositions: 0,
            cov: vec![0.0; dim * dim],
            all_values: vec![0.0; dim],
            all_vectors: vec![0.0; dim * dim],
            stack: Vec::new(),
        };
        this.update_weights();
        Ok(this)
    }

    /// The current eigenvalues λ_j (descending).
    pub fn eigenvalues(&self) -> &[f64] {
        &self.eigenvalues
    }

    fn update_weights(&mut self) {
        let total: f64 = self.eigenvalues.iter().sum();
        let mut acc = 0.0;
        for (c, l) in self.cumulative_weights.iter_mut().zip(&self.eigenvalues) {
            acc += l / total;
            *c = acc;
        }
    }

    /// Recomputes the leading eigenpairs of the covariance estimate.
    fn refresh(&mut self) {
        let d = self.dim;
        let params = Default::default();
        let req = self_adjoint_evd_scratch::<f64>(d, ComputeEigenvectors::Yes, Par::Seq, params);
        let words = (req.size_bytes() + req.align_bytes()).div_ceil(8) + 1;
        if self.stack.len() < words {
            self.stack.resize(words, MaybeUninit::new(0.0));
        }
        self.moments.covariance_into(&mut self.cov);
        if !self.cov.iter().all(|v| v.is_finite()) {
            self.failed_decompositions += 1;
            return;
        }
        let ok = self_adjoint_evd(
            MatRef::from_column_major_slice(&self.cov, d, d),
            DiagMut::from_slice_mut(&mut self.all_values),
            Some(MatMut::from_column_major_slice_mut(
                &mut self.all_vectors,
                d,
                d,
            )),
            Par::Seq,
            MemStack::new_any(&mut self.stack),
            params,
        )
        .is_ok();
        if !ok {
            self.failed_decompositions += 1;
            return;
        }
        // eigenvalues come ascending: take the last m, largest first
        let floor = (RELATIVE_EIGENVALUE_FLOOR * self.all_values[d - 1]).max(MIN_EIGENVALUE);
        for j in 0..self.components {
            let src = d - 1 - j;
            self.eigenvalues[j] = self.all_values[src].max(floor);
            self.eigenvectors[j * d..(j + 1) * d]
                .copy_from_slice(&self.all_vectors[src * d..(src + 1) * d]);
        }
        self.update_weights();
    }
}

impl Proposal for PrincipalComponents {
    fn state_dim(&self) -> Option<usize> {
        Some(self.dim)
    }

    fn initialise(&mut self, target: &dyn Target, x: &[f64], adapts: bool) -> Result<()> {
        check_target_dim(target, self.dim)?;
        if adapts {
            self.moments.start(x);
        }
        Ok(())
    }

    fn propose(
        &mut self,
        _target: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let u: f64 = rng.random();
        self.chosen = self
            .cumulative_weights
            .iter()
            .position(|&c| u < c)
            .unwrap_or(self.components - 1);
        let j = self.chosen;
        let rho: f64 = rng.sample(StandardNormal);
        let step = rho * self.scales[j].scale() * self.eigenvalues[j].sqrt();
        let v = &self.eigenvectors[j * self.dim..(j + 1) * self.dim];
        for ((p, c), vi) in proposed.iter_mut().zip(current).zip(v) {
            *p = c + step * vi;
        }
        0.0
    }

    fn observe(&mut self, outcome: &StepOutcome<'_>, adapt: bool, _rng: &mut dyn Rng) {
        if !adapt {
            return;
        }
        self.scales[self.chosen].update(outcome.accept_prob);
        self.moments.update(outcome);
        self.updates += 1;
        if self.updates >= self.warmup && self.updates.is_multiple_of(self.refresh_every) {
            self.refresh();
        }
    }

    fn summary(&self) -> AdaptationSummary {
        let mut cov = vec![0.0; self.dim * self.dim];
        self.moments.covariance_into(&mut cov);
        let mut extra: Vec<(String, f64)> = self
            .scales
            .iter()
            .enumerate()
            .map(|(j, s)| (format!("scale_{j}"), s.scale()))
            .collect();
        extra.extend(
            self.eigenvalues
                .iter()
                .enumerate()
                .map(|(j, l)| (format!("eigenvalue_{j}"), *l)),
        );
        extra.push((
            "failed_decompositions".to_string(),
            self.failed_decompositions as f64,
        ));
        AdaptationSummary {
            scale: None,
            mean: Some(self.moments.mean().to_vec()),
            covariance: Some(cov),
            extra,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eigenpairs_match_the_covariance() {
        // a known covariance through the Welford estimator: feed ±e-scaled
        // points so the sample covariance is exactly C = diag(9, 4, 1) rotated
        let d = 3;
        let config = PrincipalComponentsConfig {
            components: Some(2),
            schedule: StepSchedule::InverseSqrt,
            warmup: Some(0),
            refresh_every: 1,
            ..PrincipalComponentsConfig::default()
        };
        let mut pc = PrincipalComponents::new(d, config).unwrap();
        let pts = [
            [3.0, 0.0, 0.0],
            [-3.0, 0.0, 0.0],
            [0.0, 2.0, 0.0],
            [0.0, -2.0, 0.0],
            [0.0, 0.0, 1.0],
            [0.0, 0.0, -1.0],
        ];
        if let MomentEstimator::Empirical(m) = &mut pc.moments {
            pts.iter().for_each(|p| m.push(p));
        }
        pc.refresh();
        // sample covariance: diag(18, 8, 2) / 5
        assert!((pc.eigenvalues[0] - 18.0 / 5.0).abs() < 1e-12);
        assert!((pc.eigenvalues[1] - 8.0 / 5.0).abs() < 1e-12);
        assert!((pc.eigenvectors[0].abs() - 1.0).abs() < 1e-12);
        assert!((pc.eigenvectors[d + 1].abs() - 1.0).abs() < 1e-12);
        assert!((pc.cumulative_weights[0] - 18.0 / 26.0).abs() < 1e-12);
        assert_eq!(pc.cumulative_weights[1], 1.0);
        assert!(pc.failed_decompositions == 0);
    }

    #[test]
    fn zero_variance_history_does_not_panic() {
        let d = 2;
        let mut pc = PrincipalComponents::new(d, PrincipalComponentsConfig::default()).unwrap();
        if let MomentEstimator::Empirical(m) = &mut pc.moments {
            (0..10).for_each(|_| m.push(&[1.0, 1.0]));
        }
        pc.refresh();
        assert!(pc.eigenvalues.iter().all(|&l| l == MIN_EIGENVALUE));
        assert!(pc.cumulative_weights.iter().all(|w| w.is_finite()));
    }
}
