//! Hamiltonian ABC: the sticky synthetic likelihood against an independent
//! faer computation, its SPSA gradient against central finite differences,
//! and a chain on a Gaussian simulator whose posterior is known.

use crate::common;

use faer::prelude::Solve;
use faer::{Mat, Side};
use kameleon_samplers::{
    Habc, HabcConfig, RunConfig, SamplerError, SummarySimulator, SyntheticLikelihood,
};
use kameleon_targets::{AbcSkewNormal, IsotropicGaussianPrior};
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

/// s ~ N(θ, I): the synthetic likelihood's mean is θ plus noise that does
/// not depend on θ.
struct GaussianSimulator {
    observed: Vec<f64>,
}

impl SummarySimulator for GaussianSimulator {
    fn parameter_dim(&self) -> usize {
        self.observed.len()
    }
    fn observed_summary(&self) -> &[f64] {
        &self.observed
    }
    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t + rng.sample::<f64, _>(StandardNormal);
        }
    }
}

/// A non-linear simulator (d = 3, 4 summaries) whose covariance depends on θ:
/// s_j = sin θ_j + e^{0.3 θ_j} z_j (j < 3), s_3 = θ₀θ₁ + z_3.
struct NonlinearSimulator;

impl SummarySimulator for NonlinearSimulator {
    fn parameter_dim(&self) -> usize {
        3
    }
    fn observed_summary(&self) -> &[f64] {
        &[0.3, -0.2, 0.5, 0.1]
    }
    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        for j in 0..3 {
            out[j] = theta[j].sin() + (0.3 * theta[j]).exp() * rng.sample::<f64, _>(StandardNormal);
        }
        out[3] = theta[0] * theta[1] + rng.sample::<f64, _>(StandardNormal);
    }
}

fn invalid<T>(r: Result<T, SamplerError>) -> bool {
    matches!(r, Err(SamplerError::InvalidParameter { .. }))
}

#[test]
fn bad_parameters_are_typed_errors() {
    let sim = || GaussianSimulator {
        observed: vec![0.0; 2],
    };
    assert!(invalid(SyntheticLikelihood::new(sim(), 1, 0.5)));
    assert!(invalid(SyntheticLikelihood::new(sim(), 10, 0.0)));
    assert!(invalid(SyntheticLikelihood::new(sim(), 10, f64::NAN)));
    // finite, but the ridge ε² overflows or underflows
    assert!(invalid(SyntheticLikelihood::new(sim(), 10, 1e200)));
    assert!(invalid(SyntheticLikelihood::new(sim(), 10, 1e-200)));
    assert!(invalid(SyntheticLikelihood::new(
        GaussianSimulator {
            observed: vec![f64::INFINITY]
        },
        10,
        0.5
    )));
    let prior = IsotropicGaussianPrior::new(1.0).unwrap();
    let good = HabcConfig::kmc_paper();
    let with = |change: fn(&mut HabcConfig)| {
        let mut config = good;
        change(&mut config);
        config
    };
    for bad in [
        with(|c| c.step_size = (0.0, 0.1)),
        with(|c| c.step_size = (0.2, 0.1)),
        with(|c| c.steps = 0),
        with(|c| c.friction = -1.0),
        with(|c| c.perturbation = 0.0),
    ] {
        let lik = SyntheticLikelihood::new(sim(), 10, 0.5).unwrap();
        assert!(invalid(Habc::new(lik, prior, bad)));
    }
    let lik = SyntheticLikelihood::new(sim(), 10, 0.5).unwrap();
    let mut habc = Habc::new(lik, prior, good).unwrap();
    assert!(matches!(
        habc.run(&[0.0; 3], RunConfig::new(1, 1), 0, 0),
        Err(SamplerError::DimensionMismatch { .. })
    ));
    assert!(matches!(
        habc.run(&[f64::NAN; 2], RunConfig::new(1, 1), 0, 0),
        Err(SamplerError::NonFiniteStart { index: 0, .. })
    ));
}

/// The estimate equals log N(s_obs; μ̂, Σ̂ + ε²I) computed independently with
/// faer from the same simulations (replayed from the documented sticky
/// seeding), is a deterministic function of θ for a fixed seed, and changes
/// with the seed.
#[test]
fn sticky_synthetic_likelihood_matches_faer_and_is_deterministic() {
    let (n_sim, eps) = (7, 0.4);
    let mut lik = SyntheticLikelihood::new(NonlinearSimulator, n_sim, eps).unwrap();
    let theta = [0.4, -0.3, 0.2];
    for seed in [0u64, 17, 123_456] {
        let value = lik.log_density(&theta, seed);
        // Another evaluation in between must not matter.
        lik.log_density(&[1.0, 2.0, 3.0], seed + 1);
        assert_eq!(value.to_bits(), lik.log_density(&theta, seed).to_bits());

        let m = 4;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut rows = vec![vec![0.0; m]; n_sim];
        for row in rows.iter_mut() {
            NonlinearSimulator.simulate_summary(&theta, &mut rng, row);
        }
        let mean: Vec<f64> = (0..m)
            .map(|j| rows.iter().map(|r| r[j]).sum::<f64>() / n_sim as f64)
            .collect();
        let cov = Mat::<f64>::from_fn(m, m, |i, j| {
            rows.iter()
                .map(|r| (r[i] - mean[i]) * (r[j] - mean[j]))
                .sum::<f64>()
                / (n_sim - 1) as f64
                + if i == j { eps * eps } else { 0.0 }
        });
        let llt = cov.llt(Side::Lower).unwrap();
        let r =
            faer::Col::<f64>::from_fn(m, |i| NonlinearSimulator.observed_summary()[i] - mean[i]);
        let solved = llt.solve(&r);
        let quad: f64 = (0..m).map(|i| r[i] * solved[i]).sum();
        let log_det: f64 = 2.0 * (0..m).map(|i| llt.L()[(i, i)].ln()).sum::<f64>();
        let expected =
            -0.5 * quad - 0.5 * log_det - 0.5 * m as f64 * (2.0 * std::f64::consts::PI).ln();
        assert!(
            (value - expected).abs() < 1e-10 * (1.0 + expected.abs()),
            "seed {seed}: {value} vs faer {expected}"
        );
    }
    let a = lik.log_density(&theta, 1);
    let b = lik.log_density(&theta, 2);
    assert_ne!(a, b, "different sticky seeds must give different estimates");
    assert!(lik.log_density(&[0.0; 2], 1).is_nan());
}

/// E_Δ[SPSA] = ∇f + O(c²) for the sticky f; compared with a central finite
/// difference of the same sticky f (h = 1e-5, error ~1e-9). Per coordinate,
/// the average of N independent SPSA estimates has standard error
/// sd(ĝᵢ)/√N (sample sd); with c = 1e-3 the O(c²) bias (~1e-6 · third
/// derivatives) is far below it, so we allow 5 standard errors. The check
/// has teeth: every |∂ᵢf| exceeds 10 standard errors (an estimator that
/// dropped the 1/Δᵢ factor would average to ≈ 0).
#[test]
fn spsa_gradient_matches_finite_differences_in_expectation() {
    let mut lik = SyntheticLikelihood::new(NonlinearSimulator, 30, 0.5).unwrap();
    let theta = [0.4, -0.3, 0.2];
    let seed = 99;
    let h = 1e-5;
    let mut fd = [0.0; 3];
    for i in 0..3 {
        let mut plus = theta;
        let mut minus = theta;
        plus[i] += h;
        minus[i] -= h;
        fd[i] = (lik.log_density(&plus, seed) - lik.log_density(&minus, seed)) / (2.0 * h);
    }
    let n = 20_000;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let (mut sum, mut sum_sq) = ([0.0; 3], [0.0; 3]);
    let mut g = [0.0; 3];
    for _ in 0..n {
        assert!(lik.spsa_gradient(&theta, seed, 1e-3, &mut rng, &mut g));
        for i in 0..3 {
            sum[i] += g[i];
            sum_sq[i] += g[i] * g[i];
        }
    }
    for i in 0..3 {
        let mean = sum[i] / n as f64;
        let var = (sum_sq[i] - n as f64 * mean * mean) / (n - 1) as f64;
        let se = (var / n as f64).sqrt();
        assert!(
            (mean - fd[i]).abs() < 5.0 * se,
            "coordinate {i}: SPSA mean {mean} ± {se}, finite difference {}",
            fd[i]
        );
        assert!(
            fd[i].abs() > 10.0 * se,
            "coordinate {i}: {} vs se {se}",
            fd[i]
        );
    }
    // Wrong lengths are reported, not a panic.
    assert!(!lik.spsa_gradient(&[0.0; 2], seed, 1e-3, &mut rng, &mut g));
}

/// s ~ N(θ, I), S simulations, ridge ε, prior N(0, 10⁴ I). In expectation
/// over the simulations the synthetic likelihood is ≈ N(s_obs; θ, (1 + ε²)I),
/// so the posterior is ≈ N(s_obs, τ²I) with τ² = 1 + ε² (the prior shifts the
/// mean by a factor 1 − τ²/10⁴, negligible). HABC is biased by design (no
/// MH correction, noisy SPSA gradient, friction discretisation, Σ̂ noise),
/// so the check is loose but meaningful: per coordinate,
/// |chain mean − s_obs| ≤ 5·se + 0.25·τ, with se = sd/√ESS the Monte Carlo
/// standard error (tests/common) and 0.25τ the allowance for bias, and the
/// chain's sd must lie within [τ/2, 2τ] (a stuck or diverging chain fails;
/// the SPSA noise inflates the spread somewhat, as the module docs explain).
#[test]
fn habc_chain_on_a_gaussian_simulator_lands_near_the_posterior_mean() {
    let observed = vec![1.0, -0.5];
    let (n_sim, eps) = (20, 0.5);
    let tau = (1.0_f64 + eps * eps).sqrt();
    let lik = SyntheticLikelihood::new(
        GaussianSimulator {
            observed: observed.clone(),
        },
        n_sim,
        eps,
    )
    .unwrap();
    let config = HabcConfig::default()
        .with_step_size((0.2, 0.4))
        .unwrap()
        .with_steps(10)
        .unwrap()
        .with_friction(0.5)
        .unwrap()
        .with_perturbation(0.5)
        .unwrap();
    let prior = IsotropicGaussianPrior::new(1e4).unwrap();
    let mut habc = Habc::new(lik, prior, config).unwrap();
    let chain = habc
        .run(&[-3.0, 3.0], RunConfig::new(200, 3000), 11, 0)
        .unwrap();
    assert_eq!(chain.len(), 3000);
    assert!(chain.log_densities.iter().all(|l| l.is_finite()));
    assert!(chain.acceptance_rate() > 0.99);
    for j in 0..2 {
        let series: Vec<f64> = (0..chain.len()).map(|i| chain.sample(i)[j]).collect();
        let n = series.len() as f64;
        let mean = series.iter().sum::<f64>() / n;
        let sd = (series.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
        let (z, ess) = common::z_and_ess(&series, observed[j]);
        let se = sd / ess.sqrt();
        assert!(
            (mean - observed[j]).abs() <= 5.0 * se + 0.25 * tau,
            "coordinate {j}: mean {mean}, posterior mean {}, se {se}, z {z}",
            observed[j]
        );
        assert!(
            sd > 0.5 * tau && sd < 2.0 * tau,
            "coordinate {j}: sd {sd}, posterior sd {tau}"
        );
    }
}

/// The KMC set-up runs: the skew-normal ABC simulator plugs in, and a short
/// chain from θ_true stays finite and near it (the ABC posterior's mass is
/// within a few units of θ_true = 10·1 under the N(0, 25I) prior).
#[test]
fn habc_runs_on_the_abc_skew_normal_target() {
    let abc = AbcSkewNormal::kmc_paper().unwrap();
    let lik = SyntheticLikelihood::new(abc, 10, 0.55).unwrap();
    let prior = IsotropicGaussianPrior::new(25.0).unwrap();
    let mut habc = Habc::new(lik, prior, HabcConfig::kmc_paper()).unwrap();
    let chain = habc.run(&[10.0; 10], RunConfig::new(5, 30), 3, 1).unwrap();
    assert_eq!(chain.len(), 30);
    assert_eq!(chain.rejected_non_finite, 0);
    for i in 0..chain.len() {
        assert!(chain.sample(i).iter().all(|x| (x - 10.0).abs() < 5.0));
    }
}

/// [`GaussianSimulator`] that sets `stop` once it has run `calls_before_stop`
/// simulations.
struct StoppingSimulator<'a> {
    inner: GaussianSimulator,
    calls: std::sync::atomic::AtomicU64,
    calls_before_stop: u64,
    stop: &'a std::sync::atomic::AtomicBool,
}

impl SummarySimulator for StoppingSimulator<'_> {
    fn parameter_dim(&self) -> usize {
        self.inner.parameter_dim()
    }
    fn observed_summary(&self) -> &[f64] {
        self.inner.observed_summary()
    }
    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        use std::sync::atomic::Ordering;
        if self.calls.fetch_add(1, Ordering::Relaxed) + 1 == self.calls_before_stop {
            self.stop.store(true, Ordering::Relaxed);
        }
        self.inner.simulate_summary(theta, rng, out);
    }
}

/// A watched run counts its steps; unstopped it is the plain run, stopped
/// it ends after the step in progress with the chain so far, which is the
/// start of the plain run's chain.
#[test]
fn a_watched_run_counts_its_steps_and_stops_when_asked() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let config = HabcConfig::kmc_paper().with_steps(3).unwrap();
    let prior = IsotropicGaussianPrior::new(25.0).unwrap();
    let run = RunConfig::new(4, 20);
    let build = |calls_before_stop, stop| {
        let simulator = StoppingSimulator {
            inner: GaussianSimulator {
                observed: vec![0.5, -0.5],
            },
            calls: AtomicU64::new(0),
            calls_before_stop,
            stop,
        };
        let lik = SyntheticLikelihood::new(simulator, 10, 0.5).unwrap();
        Habc::new(lik, prior, config).unwrap()
    };
    let never = AtomicBool::new(false);
    let plain = build(0, &never).run(&[0.0, 0.0], run, 5, 2).unwrap();
    assert_eq!(plain.steps, 24);
    let steps_done = AtomicU64::new(0);
    let watched = build(0, &never)
        .run_observed(&[0.0, 0.0], run, 5, 2, &steps_done, &never)
        .unwrap();
    assert_eq!(watched.samples, plain.samples);
    assert_eq!(watched.log_densities, plain.log_densities);
    assert_eq!(steps_done.load(Ordering::Relaxed), 24);
    // the start costs 10 simulations, each step 3 × 2 × 10 (plus 10 per
    // recorded step): the flag is set inside step 3 (of 1 … 24)
    let stop = AtomicBool::new(false);
    let stopped = build(10 + 3 * 60, &stop)
        .run_observed(&[0.0, 0.0], run, 5, 2, &steps_done, &stop)
        .unwrap();
    assert_eq!(stopped.steps, 3);
    assert_eq!(steps_done.load(Ordering::Relaxed), 3);
    assert_eq!(stopped.len(), 0, "the 4 burn-in steps were not all taken");
    let stop = AtomicBool::new(true);
    let none = build(0, &never)
        .run_observed(&[0.0, 0.0], run, 5, 2, &steps_done, &stop)
        .unwrap();
    assert_eq!((none.steps, none.len()), (0, 0));
}

/// A trajectory whose end overflows (a step size so large that the first
/// step, before the friction's running variance exists, takes the position
/// past the largest double while every gradient is finite) is rejected,
/// and the recorded `accepted` flags and acceptance probabilities say so
/// at every step, in agreement with the counts.
#[test]
fn a_trajectory_that_overflows_is_recorded_as_rejected() {
    let lik = SyntheticLikelihood::new(
        GaussianSimulator {
            observed: vec![1.0],
        },
        10,
        0.5,
    )
    .unwrap();
    let config = HabcConfig::default()
        .with_step_size((1e200, 1e200))
        .unwrap()
        .with_steps(1)
        .unwrap()
        .with_friction(0.0)
        .unwrap();
    let prior = IsotropicGaussianPrior::new(25.0).unwrap();
    let mut habc = Habc::new(lik, prior, config).unwrap();
    let chain = habc.run(&[0.0], RunConfig::new(0, 5), 1, 0).unwrap();
    assert_eq!(chain.samples[0], 0.0);
    assert!(!chain.accepted[0]);
    let accepted = chain.accepted.iter().filter(|a| **a).count() as u64;
    assert_eq!(accepted, chain.accepted_total);
    assert_eq!(5 - accepted, chain.rejected_non_finite);
    for (a, p) in chain.accepted.iter().zip(&chain.accept_probabilities) {
        assert_eq!(*p, if *a { 1.0 } else { 0.0 });
    }
}
