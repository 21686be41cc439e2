//! Tests of `xtask::experiments::trajectories`.

use kameleon_samplers::FnTarget;
use kameleon_samplers::{Target, chain_rng};
use kameleon_targets::GaussianMixture;
use xtask::experiments::trajectories::*;

/// On N(0, 1) one leapfrog step is the linear map
/// (q, p) ↦ ((1 − ε²/2)q + εp, −ε(1 − ε²/4)q + (1 − ε²/2)p), and the
/// acceptance is exp(min(0, H₀ − H₁)) of that point.
#[test]
fn one_leapfrog_step_matches_the_closed_form() {
    let target = FnTarget::new(1, |x: &[f64]| -0.5 * x[0] * x[0]);
    let (q0, p0, e) = (0.7, -1.3, 0.4);
    let (mut q, mut p) = ([q0], [p0]);
    let mut rng = chain_rng(1, 0);
    let accept = mean_acceptance(
        &target,
        &mut |x, g| g[0] = -x[0],
        &mut q,
        &mut p,
        e,
        1,
        &mut rng,
    );
    let q1 = (1.0 - e * e / 2.0) * q0 + e * p0;
    let p1 = -e * (1.0 - e * e / 4.0) * q0 + (1.0 - e * e / 2.0) * p0;
    assert!((q[0] - q1).abs() < 1e-14 && (p[0] - p1).abs() < 1e-14);
    let dh = 0.5 * (q0 * q0 + p0 * p0) - 0.5 * (q1 * q1 + p1 * p1);
    assert!((accept - dh.min(0.0).exp()).abs() < 1e-14);
}

/// With the true gradient the leapfrog error of H is O(ε²) and bounded
/// along the trajectory, so the acceptance stays near 1 for ε = 0.1 on a
/// rotated Gaussian whose precisions are moderate; a gradient that
/// points the wrong way makes the trajectory gain energy and the
/// acceptance drop.
#[test]
fn true_gradients_keep_the_energy_and_wrong_ones_do_not() {
    let target = GaussianMixture::random_rotated_gaussian(3, 11).unwrap();
    let mut rng = chain_rng(2, 0);
    let mut q = vec![0.0; 3];
    target.sample_iid(&mut rng, &mut q).unwrap();
    let p = vec![0.5, -0.2, 0.1];
    let true_grad = &mut |x: &[f64], g: &mut [f64]| target.grad_log_density(x, g).unwrap();
    let good = mean_acceptance(
        &target,
        true_grad,
        &mut q.clone(),
        &mut p.clone(),
        0.01,
        50,
        &mut rng,
    );
    assert!(good > 0.99, "{good}");
    let wrong = &mut |x: &[f64], g: &mut [f64]| {
        target.grad_log_density(x, g).unwrap();
        g.iter_mut().for_each(|v| *v = -*v);
    };
    let bad = mean_acceptance(
        &target,
        wrong,
        &mut q.clone(),
        &mut p.clone(),
        0.1,
        100,
        &mut rng,
    );
    assert!(bad < good - 0.1, "{bad} vs {good}");
}

/// The authors' table against sums done by hand over its lines (awk):
/// d = 8, n = 1000 has 50 trials with mean acceptances 0.982178 (HMC)
/// and 0.523125 (KMC); n = 300 was never run.
#[test]
fn authors_acceptance_reads_their_trials() {
    let (hmc, kmc, trials) = authors_acceptance(8, 1000).unwrap();
    assert_eq!(trials, 50);
    assert!((hmc - 0.982178).abs() < 1e-6 && (kmc - 0.523125).abs() < 1e-6);
    assert!(authors_acceptance(8, 300).is_none());
}

/// The code's frequency law against its moments: with τ ~ Gamma(α, 1/α)
/// and ω = (τ/2)ζ, E‖ω‖²/d = E[τ²]/4 = (1 + 1/α)/4 (2/3 for α = 0.6),
/// within 5 standard errors of 20 000 draws (the sd of ‖ω‖²/d is
/// estimated from the same draws).
#[test]
fn code_frequency_law_has_its_moments() {
    let (d, m) = (2, 20_000);
    let phi = code_rq_features(d, m, &mut chain_rng(5, 0)).unwrap();
    let omega = phi.frequencies();
    let values: Vec<f64> = (0..m)
        .map(|i| (0..d).map(|l| omega[(i, l)].powi(2)).sum::<f64>() / d as f64)
        .collect();
    let mean = values.iter().sum::<f64>() / m as f64;
    let sd = (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / m as f64).sqrt();
    let expected = (1.0 + 1.0 / RQ_ALPHA) / 4.0;
    assert!(
        (mean - expected).abs() < 5.0 * sd / (m as f64).sqrt(),
        "{mean} vs {expected}"
    );
}
