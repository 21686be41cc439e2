//! KAMH proposal tests against independent computations: the Hastings
//! correction against brute-force multivariate normal densities built with
//! an explicit centring matrix H, the cache (current/reverse factor swap)
//! across accept and reject, the linear kernel against AM's 4ν²ZᵀHZ + γ²I,
//! and the empirical covariance of proposal draws.

use crate::common;

use faer::Mat;
use faer::linalg::solvers::DenseSolveCore;
use kameleon_kernels::{Gaussian, Kernel, Linear};
use kameleon_samplers::{
    Bandwidth, FnTarget, Kamh, KamhConfig, KamhCovariance, Proposal, Refresh, RunningMoments,
    Scale, StepOutcome,
};
use rand::{RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;

const GAMMA: f64 = 0.3;
const NU: f64 = 0.8;

fn fixed_config(n: usize) -> KamhConfig {
    KamhConfig::default()
        .with_subsample(common::subsample_config(n, GAMMA, Refresh::Never))
        .unwrap()
        .with_scale(Scale::fixed(NU).unwrap())
        .unwrap()
}

/// KAMH with a fixed ν, a Gaussian kernel of length-scale `ell` and a
/// subsample of n random points (also returned), from the rng seeded with
/// `seed` (returned too, after the points).
fn kamh_on_random_points(
    n: usize,
    d: usize,
    ell: f64,
    seed: u64,
) -> (Kamh<Gaussian>, Mat<f64>, Xoshiro256PlusPlus) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let z = random_points(n, d, &mut rng);
    let mut kamh = Kamh::new(d, Gaussian::new(ell).unwrap(), fixed_config(n)).unwrap();
    kamh.set_subsample(z.as_ref()).unwrap();
    (kamh, z, rng)
}

/// The Hastings correction log q(x | x*) − log q(x* | x) by brute force.
fn brute_force_correction<K: Kernel>(kernel: &K, x: &[f64], proposed: &[f64], z: &Mat<f64>) -> f64 {
    let forward = brute_force_log_normal(proposed, x, &brute_force_covariance(kernel, x, z));
    let reverse = brute_force_log_normal(x, proposed, &brute_force_covariance(kernel, proposed, z));
    reverse - forward
}

fn random_points(n: usize, d: usize, rng: &mut Xoshiro256PlusPlus) -> Mat<f64> {
    Mat::from_fn(n, d, |_, j| {
        (1.0 + j as f64) * rng.sample::<f64, _>(StandardNormal)
    })
}

/// γ²I + ν² M H Mᵀ with M from `grad_x` point by point and an explicit n × n H.
fn brute_force_covariance<K: Kernel>(kernel: &K, y: &[f64], z: &Mat<f64>) -> Mat<f64> {
    let (n, d) = (z.nrows(), z.ncols());
    let mut m = Mat::<f64>::zeros(d, n);
    let mut g = vec![0.0; d];
    for i in 0..n {
        let zi: Vec<f64> = (0..d).map(|l| z[(i, l)]).collect();
        kernel.grad_x(y, &zi, &mut g);
        for l in 0..d {
            m[(l, i)] = 2.0 * g[l];
        }
    }
    let h = Mat::<f64>::from_fn(n, n, |a, b| f64::from(u8::from(a == b)) - 1.0 / n as f64);
    let mhm = &m * &h * m.transpose();
    Mat::from_fn(d, d, |i, j| {
        NU * NU * mhm[(i, j)] + if i == j { GAMMA * GAMMA } else { 0.0 }
    })
}

/// log N(x; mean, cov) through a dense inverse and determinant (LU).
fn brute_force_log_normal(x: &[f64], mean: &[f64], cov: &Mat<f64>) -> f64 {
    let d = x.len();
    let lu = cov.partial_piv_lu();
    let inv = lu.inverse();
    let v: Vec<f64> = x.iter().zip(mean).map(|(a, b)| a - b).collect();
    let maha: f64 = (0..d)
        .map(|i| (0..d).map(|j| v[i] * inv[(i, j)] * v[j]).sum::<f64>())
        .sum();
    -0.5 * maha - 0.5 * cov.determinant().ln() - 0.5 * d as f64 * (2.0 * std::f64::consts::PI).ln()
}

fn dummy_target(d: usize) -> FnTarget<impl Fn(&[f64]) -> f64 + Send + Sync> {
    FnTarget::new(d, |_: &[f64]| 0.0)
}

fn outcome<'a>(
    t: u64,
    previous: &'a [f64],
    proposed: &'a [f64],
    accepted: bool,
) -> StepOutcome<'a> {
    StepOutcome {
        iteration: t,
        previous,
        proposed,
        current: if accepted { proposed } else { previous },
        log_density: 0.0,
        accepted,
        accept_prob: if accepted { 1.0 } else { 0.0 },
    }
}

#[test]
fn hastings_correction_matches_brute_force_densities_across_accepts_and_rejects() {
    let (n, d) = (30, 3);
    let (mut kamh, z, mut rng) = kamh_on_random_points(n, d, 1.5, 11);
    let kernel = *kamh.kernel();
    let target = dummy_target(d);
    let mut x = vec![0.4, -0.2, 1.0];
    kamh.initialise(&target, &x, true).unwrap();
    let mut proposed = vec![0.0; d];
    // alternate accepts and rejects so both cache paths are exercised
    for step in 0..12u64 {
        let correction = kamh.propose(&target, &x, &mut proposed, &mut rng);
        let expected = brute_force_correction(&kernel, &x, &proposed, &z);
        assert!(
            (correction - expected).abs() < 1e-9 * expected.abs().max(1.0),
            "step {step}: {correction} vs {expected}"
        );
        let accept = step % 3 != 1;
        let previous = x.clone();
        kamh.observe(
            &outcome(step + 1, &previous, &proposed, accept),
            false,
            &mut rng,
        );
        if accept {
            x.copy_from_slice(&proposed);
        }
    }
}

#[test]
fn same_subsample_for_forward_and_reverse_while_z_is_redrawn_every_step() {
    // With z redrawn at every step, the correction must use the z that was
    // current when the step began, for both densities.
    let (n, d) = (20, 2);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let kernel = Gaussian::new(1.0).unwrap();
    let mut config = fixed_config(n);
    config.subsample.refresh = Refresh::EveryStepUntil(u64::MAX);
    let mut kamh = Kamh::new(d, kernel, config).unwrap();
    let target = dummy_target(d);
    let mut x = vec![0.0, 0.0];
    kamh.initialise(&target, &x, true).unwrap();
    let mut proposed = vec![0.0; d];
    let mut checked = 0;
    for t in 1..=80u64 {
        let z = kamh.subsample().map(|z| z.to_owned());
        let correction = kamh.propose(&target, &x, &mut proposed, &mut rng);
        if let Some(z) = z {
            let expected = brute_force_correction(&kernel, &x, &proposed, &z);
            assert!((correction - expected).abs() < 1e-9 * expected.abs().max(1.0));
            checked += 1;
        } else {
            assert_eq!(correction, 0.0); // the initial random walk
        }
        let previous = x.clone();
        let accept = t % 2 == 0;
        kamh.observe(&outcome(t, &previous, &proposed, accept), true, &mut rng);
        if accept {
            x.copy_from_slice(&proposed);
        }
    }
    assert!(checked > 50);
}

#[test]
fn linear_kernel_gives_the_adaptive_metropolis_covariance() {
    // M = 2Zᵀ, so ν² M H Mᵀ + γ²I = 4ν² Σᵢ (zᵢ − z̄)(zᵢ − z̄)ᵀ + γ²I at every y.
    let (n, d) = (25, 4);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    let z = random_points(n, d, &mut rng);
    let mean: Vec<f64> = (0..d)
        .map(|j| (0..n).map(|i| z[(i, j)]).sum::<f64>() / n as f64)
        .collect();
    let mut builder = KamhCovariance::new(d, n);
    let mut cov = vec![0.0; d * d];
    for y in [[0.0; 4], [1.0, -2.0, 3.0, 0.5]] {
        builder.covariance_into(&Linear, &y, z.as_ref(), GAMMA, NU, &mut cov);
        for a in 0..d {
            for b in 0..d {
                let scatter: f64 = (0..n)
                    .map(|i| (z[(i, a)] - mean[a]) * (z[(i, b)] - mean[b]))
                    .sum();
                let expected = 4.0 * NU * NU * scatter + if a == b { GAMMA * GAMMA } else { 0.0 };
                assert!((cov[a * d + b] - expected).abs() < 1e-10 * expected.abs().max(1.0));
            }
        }
    }
    // the sampler accepts a length-scale-free kernel with a fixed bandwidth only
    let mut kamh = Kamh::new(d, Linear, fixed_config(n)).unwrap();
    kamh.set_subsample(z.as_ref()).unwrap();
    let mut median = fixed_config(n);
    median.subsample.bandwidth = Bandwidth::MedianHeuristic { max_points: n };
    assert!(Kamh::new(d, Linear, median).is_err());
}

#[test]
fn empirical_covariance_of_proposal_draws_matches_the_formula() {
    // N draws x* − x with covariance Σ: each sample covariance entry has
    // standard error sqrt((Σ_ii Σ_jj + Σ_ij²)/N) (Gaussian fourth moments);
    // the mean has standard error sqrt(Σ_ii/N). Allow 5 standard errors.
    let (n, d, draws) = (40, 3, 100_000);
    let (mut kamh, z, mut rng) = kamh_on_random_points(n, d, 1.2, 21);
    let kernel = *kamh.kernel();
    let target = dummy_target(d);
    let x = [0.5, 0.0, -1.0];
    kamh.initialise(&target, &x, true).unwrap();
    let sigma = brute_force_covariance(&kernel, &x, &z);
    // the kernel term must matter at x, or this test would only check γ²I
    assert!(sigma[(0, 0)] > 2.0 * GAMMA * GAMMA);
    let mut proposed = vec![0.0; d];
    let mut moments = RunningMoments::new(d);
    for _ in 0..draws {
        kamh.propose(&target, &x, &mut proposed, &mut rng);
        moments.push(&proposed);
    }
    let mut emp = vec![0.0; d * d];
    moments.covariance_into(&mut emp);
    for i in 0..d {
        let se_mean = (sigma[(i, i)] / draws as f64).sqrt();
        assert!((moments.mean()[i] - x[i]).abs() < 5.0 * se_mean);
        for j in 0..d {
            let s = sigma[(i, j)];
            let se = ((sigma[(i, i)] * sigma[(j, j)] + s * s) / draws as f64).sqrt();
            assert!(
                (emp[i * d + j] - s).abs() < 5.0 * se,
                "({i},{j}): {} vs {s}",
                emp[i * d + j]
            );
        }
    }
}

#[test]
fn median_heuristic_sets_the_length_scale_to_the_median_distance_of_each_new_subsample() {
    let (n, d) = (15, 2);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let mut config = fixed_config(n);
    config.subsample.refresh = Refresh::EveryStepUntil(u64::MAX);
    config.subsample.bandwidth = Bandwidth::MedianHeuristic { max_points: n };
    let mut kamh = Kamh::new(d, Gaussian::new(123.0).unwrap(), config).unwrap();
    let target = dummy_target(d);
    let mut x = vec![0.0, 0.0];
    kamh.initialise(&target, &x, true).unwrap();
    let mut proposed = vec![0.0; d];
    let mut checked = 0;
    for t in 1..=40u64 {
        kamh.propose(&target, &x, &mut proposed, &mut rng);
        let previous = x.clone();
        kamh.observe(&outcome(t, &previous, &proposed, true), true, &mut rng);
        x.copy_from_slice(&proposed);
        if let Some(z) = kamh.subsample() {
            // brute force: sort all pairwise distances, average the middle two (105 pairs: odd)
            let mut dist = Vec::new();
            for i in 0..n {
                for j in 0..i {
                    dist.push(
                        ((z[(i, 0)] - z[(j, 0)]).powi(2) + (z[(i, 1)] - z[(j, 1)]).powi(2)).sqrt(),
                    );
                }
            }
            dist.sort_by(f64::total_cmp);
            let median = dist[dist.len() / 2];
            assert!((kamh.kernel().length_scale() - median).abs() < 1e-12);
            checked += 1;
        }
    }
    assert!(checked > 20);
}

#[test]
fn checkpoint_and_resume_reproduce_the_uninterrupted_chain() {
    // adaptation on (z from the history, median heuristic, Robbins–Monro ν)
    // across the checkpoint, so every cache and adaptation field must survive
    use kameleon_samplers::{Run, RunConfig};
    let d = 2;
    let target = FnTarget::new(d, |x: &[f64]| -0.5 * (x[0] * x[0] + 4.0 * x[1] * x[1]));
    let mut config = KamhConfig::paper(20).unwrap();
    config.subsample.warmup_scale = 1.0;
    let make = || Kamh::new(d, Gaussian::new(1.0).unwrap(), config.clone()).unwrap();
    let run_config = RunConfig::new(200, 300);
    let whole = Run::new(&target, make(), &[0.0, 0.0], run_config, 4, 0)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let mut first = Run::new(&target, make(), &[0.0, 0.0], run_config, 4, 0).unwrap();
    first.advance(&target, 150, None).unwrap();
    let path = std::env::temp_dir().join(format!("kamh-checkpoint-{}.bin", std::process::id()));
    first.checkpoint(&path).unwrap();
    let resumed = Run::<Kamh<Gaussian>>::resume(&path, &target).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut resumed_chain = resumed.finish(&target, None).unwrap();
    resumed_chain.wall_time_secs = whole.wall_time_secs;
    assert_eq!(resumed_chain, whole);
    assert!(whole.accepted_total > 0);
}
