//! The affine-invariant ensemble sampler (stretch move): its stationary
//! moments on a correlated Gaussian and the banana, the stretch factor's
//! distribution against its exact CDF, exact affine invariance, input
//! validation, and pseudo-marginal bookkeeping.
//!
//! Standard errors of an ensemble. The walkers interact, so neither the
//! W·T kept states nor the W per-walker series are independent chains. The
//! whole ensemble is one Markov chain on (ℝᵈ)^W with stationary density
//! π^W, and the ensemble average f̄_t = (1/W) Σ_k f(X_{t,k}) after sweep t is
//! a function of its state: after burn-in (f̄_t) is a stationary series with
//! E f̄_t = E_π f, and its time average F̂ = (1/T) Σ_t f̄_t obeys the Markov
//! chain CLT, √T (F̂ − E_π f) → N(0, σ²), where σ² = Var(f̄_t)(1 + 2 Σ_s ρ_s)
//! carries both the correlation between walkers within a sweep (in
//! Var f̄_t) and across sweeps (in the ρ_s). σ² is estimated by batch means:
//! cut the T values into B batches of length L = T/B; for L well above the
//! integrated autocorrelation time the batch means m_b are close to iid
//! N(E_π f, σ²/L), so se = sd(m_1, …, m_B)/√B estimates the standard error
//! of F̂ = mean(m_b), and (F̂ − E_π f)/se is close to Student's t with B − 1
//! degrees of freedom. With B = 50 and the tolerance Z_TOL = 5 of the other
//! statistical tests, P(|t₄₉| > 5) ≈ 8·10⁻⁶ per check. The runs below have
//! batches of hundreds of sweeps, against autocorrelation times of tens.

use crate::common;

use common::{Reference, Z_TOL, correlated_gaussian};
use kameleon_samplers::{
    Ensemble, EnsembleConfig, EnsembleRun, FnTarget, SamplerError, StretchFactor, Target,
    chain_rng, initial_ball, run_ensemble,
};
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use std::sync::atomic::{AtomicU64, Ordering};

/// Batches of the ensemble-average series (see the module docs).
const BATCHES: usize = 50;

fn mean(values: &[f64]) -> f64 {
    values.iter().sum::<f64>() / values.len() as f64
}

/// |F̂ − expected| / se with se from [`BATCHES`] batch means of the
/// ensemble-average series. `series` holds f at every kept state in the
/// run's order (sweep-major: `walkers` consecutive values per sweep).
fn z_batch_means(walkers: usize) -> impl Fn(&[f64], f64) -> f64 {
    move |series, expected| {
        let averages: Vec<f64> = series.chunks_exact(walkers).map(mean).collect();
        let len = averages.len() / BATCHES;
        let batch_means: Vec<f64> = averages[..len * BATCHES]
            .chunks_exact(len)
            .map(mean)
            .collect();
        let grand = mean(&batch_means);
        let var = batch_means
            .iter()
            .map(|m| (m - grand) * (m - grand))
            .sum::<f64>()
            / (BATCHES - 1) as f64;
        (grand - expected).abs() / (var / BATCHES as f64).sqrt()
    }
}

/// The walkers' start: a ball of radius ~0.5 around `center` (stream 1 of
/// the seed, independent of the ensemble's stream 0).
fn start(center: &[f64], walkers: usize, seed: u64) -> Vec<f64> {
    initial_ball(center, walkers, 0.5, &mut chain_rng(seed, 1)).unwrap()
}

#[test]
fn recovers_the_moments_of_a_correlated_gaussian() {
    // d = 4, Σ_ij = s_i s_j 0.8^|i−j| (standard deviations 1 to 2.5), 16
    // walkers, 20 000 kept sweeps: batches of 400 sweeps.
    let (target, mu, cov) = correlated_gaussian(4);
    let config = EnsembleConfig::default()
        .with_walkers(16)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let reference = Reference::gaussian(&mu, &cov);
    let z = z_batch_means(config.walkers);
    for seed in [1, 2, 3] {
        let run = run_ensemble(
            &target,
            &config,
            &start(&[0.0; 4], 16, seed),
            20_000,
            2_000,
            seed,
        )
        .unwrap();
        let (worst, which) = reference.worst_z(&run.samples, &z);
        let acceptance = mean(&run.acceptance_fractions());
        eprintln!(
            "gaussian d=4 seed {seed}: worst z {worst:.2} ({which}), acceptance {acceptance:.3}"
        );
        assert!(worst < Z_TOL, "seed {seed}: z {worst} ({which})");
        assert_eq!(run.rejected_non_finite, 0);

        // The same statistics flag a reference that is off by a little: a
        // covariance 15% too large.
        let wrong: Vec<f64> = cov.iter().map(|c| 1.15 * c).collect();
        let (z_wrong, which) = Reference::gaussian(&mu, &wrong).worst_z(&run.samples, &z);
        eprintln!("  against 1.15 Σ: worst z {z_wrong:.2} ({which})");
        assert!(
            z_wrong > Z_TOL,
            "seed {seed}: a 15% wrong covariance passed, z {z_wrong}"
        );
    }
}

#[test]
fn recovers_the_banana_through_its_untwisting_map() {
    // B(0.03, 100) in d = 2, checked through the map that makes it exactly
    // N(0, I) and its exact quantile regions (common::Reference::banana).
    let (target, _, _) = common::banana(2);
    let config = EnsembleConfig::default()
        .with_walkers(16)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let reference = Reference::banana(&target);
    let z = z_batch_means(config.walkers);
    for seed in [4, 5] {
        let run = run_ensemble(
            &target,
            &config,
            &start(&[0.0; 2], 16, seed),
            40_000,
            4_000,
            seed,
        )
        .unwrap();
        let (worst, which) = reference.worst_z(&run.samples, &z);
        eprintln!("banana d=2 seed {seed}: worst z {worst:.2} ({which})");
        assert!(worst < Z_TOL, "seed {seed}: z {worst} ({which})");
    }
}

/// ∫_{1/a}^{z} g by composite Simpson's rule on the substitution s = √t
/// (g(t) dt = 2 ds / c, c = 2(√a − 1/√a)), written out without the closed
/// form so that it checks the derivation of G.
fn cdf_by_quadrature(a: f64, z: f64) -> f64 {
    // density of t on [1/a, a]: 1/(c √t)
    let c = 2.0 * (a.sqrt() - 1.0 / a.sqrt());
    let g = |t: f64| 1.0 / (c * t.sqrt());
    let (lo, n) = (1.0 / a, 2000);
    let h = (z - lo) / n as f64;
    let mut sum = g(lo) + g(z);
    for i in 1..n {
        let w = if i % 2 == 1 { 4.0 } else { 2.0 };
        sum += w * g(lo + i as f64 * h);
    }
    sum * h / 3.0
}

#[test]
fn stretch_factor_follows_its_exact_cdf() {
    // G(z) = (√(az) − 1)/(a − 1) on [1/a, a] (the integral of
    // g(z) = 1/(2(√a − 1/√a)√z)); inversion gives z = ((a − 1)u + 1)²/a.
    // For each decile z_q = G⁻¹(q), the fraction of n iid draws at or below
    // z_q is Binomial(n, q)/n: standard error √(q(1 − q)/n), tolerance Z_TOL
    // of them (P ≈ 6·10⁻⁷ per check under the normal approximation).
    let n = 200_000;
    let mut worst: f64 = 0.0;
    for (seed, a) in [(1, 1.5), (2, 2.0), (3, 4.0)] {
        let stretch = StretchFactor::new(a).unwrap();
        for q in [0.1, 0.3, 0.5, 0.7, 0.9] {
            let z = stretch.quantile(q);
            approx::assert_abs_diff_eq!(stretch.cdf(z), q, epsilon = 1e-12);
            approx::assert_abs_diff_eq!(cdf_by_quadrature(a, z), q, epsilon = 1e-6);
        }
        approx::assert_abs_diff_eq!(stretch.quantile(0.0), 1.0 / a, epsilon = 1e-15);
        approx::assert_abs_diff_eq!(stretch.quantile(1.0), a, epsilon = 1e-12);
        let mut rng = chain_rng(seed, 0);
        let draws: Vec<f64> = (0..n).map(|_| stretch.sample(&mut rng)).collect();
        assert!(draws.iter().all(|&z| (1.0 / a..=a).contains(&z)));
        for k in 1..10 {
            let q = k as f64 / 10.0;
            let z_q = stretch.quantile(q);
            let below = draws.iter().filter(|&&z| z <= z_q).count() as f64 / n as f64;
            let z = (below - q).abs() / (q * (1.0 - q) / n as f64).sqrt();
            worst = worst.max(z);
            assert!(z < Z_TOL, "a = {a}, decile {q}: fraction {below}, z {z}");
        }
    }
    eprintln!("stretch factor deciles: worst z {worst:.2}");
}

#[test]
fn stretch_moves_commute_with_affine_maps() {
    // π is a twisted (non-Gaussian) density in d = 3; π' is its image under
    // y = A x + b (log π'(y) = log π(A⁻¹(y − b)), the constant log|det A|
    // dropped). Started from the images of the same walkers with the same
    // seed, the two ensembles draw the same split, anchors, stretch factors
    // and uniforms, and each proposal on π' is the image of the one on π
    // with the same acceptance ratio, so the chains are images of each
    // other up to rounding. The ensemble's dynamics are chaotic: rounding
    // differences grow exponentially, by about ×10 every 25 sweeps once
    // the walkers have spread (measured: 2·10⁻¹⁶ at the start, 2·10⁻¹³
    // after 100 sweeps, 4·10⁻¹¹ after 200, O(1) and diverging decisions
    // after ~600), so the chains are compared over 100 sweeps. A move that
    // is not affine invariant (any fixed-shape proposal) differs at O(1)
    // from the first accepted move on.
    let a = [[2.0, 0.0, 0.0], [0.5, 1.5, 0.0], [-1.0, 0.3, 0.7]];
    let b = [1.0, -2.0, 3.0];
    let log_pi = |x: &[f64]| {
        let r = x[1] - 0.5 * (x[0] * x[0] - 4.0);
        -x[0] * x[0] / 8.0 - 0.5 * r * r - 0.5 * x[2] * x[2]
    };
    let forward = move |x: &[f64]| -> [f64; 3] {
        std::array::from_fn(|i| (0..3).map(|j| a[i][j] * x[j]).sum::<f64>() + b[i])
    };
    let target = FnTarget::new(3, log_pi);
    let image = FnTarget::new(3, move |y: &[f64]| {
        // A is lower triangular: x = A⁻¹(y − b) by forward substitution
        let mut x = [0.0; 3];
        for i in 0..3 {
            let s: f64 = (0..i).map(|j| a[i][j] * x[j]).sum();
            x[i] = (y[i] - b[i] - s) / a[i][i];
        }
        log_pi(&x)
    });
    let config = EnsembleConfig::default()
        .with_walkers(12)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let initial = start(&[0.5, 0.2, -0.1], 12, 9);
    let mapped: Vec<f64> = initial.chunks_exact(3).flat_map(forward).collect();
    let run = run_ensemble(&target, &config, &initial, 100, 0, 11).unwrap();
    let run_image = run_ensemble(&image, &config, &mapped, 100, 0, 11).unwrap();
    assert_eq!(run.accepted, run_image.accepted);
    assert_eq!(run.accepted_total, run_image.accepted_total);
    let mut worst: f64 = 0.0;
    for (x, y) in run
        .samples
        .chunks_exact(3)
        .zip(run_image.samples.chunks_exact(3))
    {
        let fx = forward(x);
        for i in 0..3 {
            worst = worst.max((fx[i] - y[i]).abs() / (1.0 + y[i].abs()));
        }
    }
    let acceptance = mean(&run.acceptance_fractions());
    eprintln!("affine invariance: worst relative difference {worst:e}, acceptance {acceptance:.3}");
    assert!(worst < 1e-10, "the image chain drifted by {worst}");
    assert!(
        acceptance > 0.2,
        "the ensemble barely moved: acceptance {acceptance}"
    );
}

fn gaussian(d: usize) -> FnTarget<impl Fn(&[f64]) -> f64 + Send + Sync> {
    FnTarget::new(d, |x: &[f64]| -0.5 * x.iter().map(|v| v * v).sum::<f64>())
}

#[test]
fn refuses_invalid_input() {
    let invalid = |r: Result<EnsembleConfig, SamplerError>, name: &str| match r {
        Err(SamplerError::InvalidParameter { name: n, .. }) => assert_eq!(n, name),
        other => panic!("expected an invalid `{name}`, got {other:?}"),
    };
    invalid(EnsembleConfig::default().with_walkers(1), "walkers");
    invalid(EnsembleConfig::default().with_walkers(0), "walkers");
    invalid(EnsembleConfig::default().with_stretch_scale(1.0), "a");
    invalid(EnsembleConfig::default().with_stretch_scale(0.5), "a");
    invalid(EnsembleConfig::default().with_stretch_scale(f64::NAN), "a");
    invalid(
        EnsembleConfig::default().with_stretch_scale(f64::INFINITY),
        "a",
    );
    assert!(StretchFactor::new(-3.0).is_err());
    assert_eq!(EnsembleConfig::default().stretch_scale, 2.0);

    let target = gaussian(2);
    let config = EnsembleConfig::default()
        .with_walkers(6)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let good = start(&[0.0, 0.0], 6, 1);
    // the start must hold walkers × d values
    let short = run_ensemble(&target, &config, &good[..11], 10, 0, 1);
    assert!(matches!(
        short,
        Err(SamplerError::DimensionMismatch {
            expected: 12,
            got: 11,
            ..
        })
    ));
    assert_eq!(
        short.err().unwrap().to_string(),
        "dimension mismatch: the initial walkers' length is 11, walkers × dimension is 12"
    );
    // a non-finite coordinate names its walker and coordinate
    let mut bad = good.clone();
    bad[7] = f64::NAN;
    match run_ensemble(&target, &config, &bad, 10, 0, 1) {
        Err(SamplerError::WalkerStart { walker: 3, source }) => assert!(matches!(
            *source,
            SamplerError::NonFiniteStart { index: 1, .. }
        )),
        other => panic!("expected a non-finite start of walker 3, got {other:?}"),
    }
    // a walker outside the support (log density −∞ or NaN) is refused
    let half_plane = FnTarget::new(2, |x: &[f64]| {
        if x[0] > 10.0 {
            f64::NAN
        } else if x[0] > 5.0 {
            f64::NEG_INFINITY
        } else {
            -0.5 * (x[0] * x[0] + x[1] * x[1])
        }
    });
    for (value, expected_nan) in [(7.0, false), (12.0, true)] {
        let mut outside = good.clone();
        outside[4] = value;
        match run_ensemble(&half_plane, &config, &outside, 10, 0, 1) {
            Err(SamplerError::WalkerStart { walker: 2, source }) => match *source {
                SamplerError::StartOutsideSupport(lp) => assert_eq!(lp.is_nan(), expected_nan),
                other => panic!("expected a start outside the support, got {other:?}"),
            },
            other => panic!("expected walker 2 outside the support, got {other:?}"),
        }
    }
    // fewer than d + 1 walkers, or walkers on a line / at one point, cannot
    // span the space
    let few = EnsembleConfig::default()
        .with_walkers(2)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    invalid(
        run_ensemble(&target, &few, &good[..4], 10, 0, 1).map(|_| config),
        "walkers",
    );
    let same: Vec<f64> = [0.3, -0.2].repeat(6);
    invalid(
        run_ensemble(&target, &config, &same, 10, 0, 1).map(|_| config),
        "initial",
    );
    let line: Vec<f64> = (0..6)
        .flat_map(|k| [k as f64, 2.0 * k as f64 + 1.0])
        .collect();
    invalid(
        run_ensemble(&target, &config, &line, 10, 0, 1).map(|_| config),
        "initial",
    );
    invalid(
        initial_ball(&[0.0], 4, 0.0, &mut chain_rng(0, 0)).map(|_| config),
        "scale",
    );
    // a sweep on a target of another dimension moves nothing
    let mut ensemble = Ensemble::new(&target, &config, &good, 1).unwrap();
    assert!(matches!(
        ensemble.sweep(&gaussian(3)),
        Err(SamplerError::DimensionMismatch {
            expected: 2,
            got: 3,
            ..
        })
    ));
    assert_eq!(ensemble.positions(), &good[..]);
    assert_eq!(ensemble.sweeps(), 0);
    // burn_in + sweeps must fit the counter
    invalid(
        run_ensemble(&target, &config, &good, u64::MAX, 1, 1).map(|_| config),
        "sweeps",
    );
}

#[test]
fn non_finite_proposals_are_rejected_and_counted() {
    // A half-plane x₀ < 0.5 (−∞ beyond) with NaN on a strip: proposals
    // there are rejected and counted, no walker ever leaves the support, and
    // the target is still evaluated once per proposal.
    let target = FnTarget::new(2, |x: &[f64]| {
        if x[0] >= 0.5 {
            f64::NEG_INFINITY
        } else if (0.3..0.35).contains(&x[0]) {
            f64::NAN
        } else {
            -0.5 * (x[0] * x[0] + x[1] * x[1])
        }
    });
    let config = EnsembleConfig::default()
        .with_walkers(8)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let initial = initial_ball(&[-1.0, 0.0], 8, 0.3, &mut chain_rng(3, 1)).unwrap();
    let run = run_ensemble(&target, &config, &initial, 500, 0, 3).unwrap();
    eprintln!("rejected non-finite: {}", run.rejected_non_finite);
    assert!(run.rejected_non_finite > 0);
    assert_eq!(run.evaluations, 8 * 500 + 8);
    assert!(
        run.samples
            .chunks_exact(2)
            .all(|x| x[0] < 0.5 && !(0.3..0.35).contains(&x[0]))
    );
    assert!(run.log_densities.iter().all(|lp| lp.is_finite()));
}

#[test]
fn same_seed_same_run() {
    let (target, _, _) = correlated_gaussian(3);
    let config = EnsembleConfig::default()
        .with_walkers(8)
        .unwrap()
        .with_stretch_scale(2.5)
        .unwrap();
    let initial = start(&[0.0; 3], 8, 5);
    let run = |seed| run_ensemble(&target, &config, &initial, 200, 50, seed).unwrap();
    let (first, second, other): (EnsembleRun, EnsembleRun, EnsembleRun) = (run(5), run(5), run(6));
    assert_eq!(first, second);
    assert_ne!(first.samples, other.samples);
    assert_eq!(first.kept_sweeps(), 200);
    assert_eq!(
        first.state(199, 7),
        &first.samples[(199 * 8 + 7) * 3..][..3]
    );
}

/// N(0, I) in d = 2 through an unbiased estimate exp(σξ − σ²/2)·π(x)
/// (ξ ~ N(0, 1), σ = 0.5), counting its calls.
struct Noisy {
    calls: AtomicU64,
}

impl Target for Noisy {
    fn dim(&self) -> usize {
        2
    }

    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let xi: f64 = rng.sample(StandardNormal);
        -0.5 * (x[0] * x[0] + x[1] * x[1]) + 0.5 * xi - 0.125
    }

    fn is_exact(&self) -> bool {
        false
    }
}

#[test]
fn pseudo_marginal_estimates_are_kept_not_recomputed() {
    // Every proposal is evaluated once and the current walkers never: the
    // target is called exactly W at the start plus W per sweep. A rejected
    // walker keeps its state and the very estimate it had (a recomputed
    // estimate would differ, the noise being continuous).
    let target = Noisy {
        calls: AtomicU64::new(0),
    };
    let (walkers, sweeps, burn_in) = (8, 300, 50);
    let config = EnsembleConfig::default()
        .with_walkers(walkers)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let run = run_ensemble(
        &target,
        &config,
        &start(&[0.0, 0.0], walkers, 2),
        sweeps,
        burn_in,
        2,
    )
    .unwrap();
    let calls = target.calls.load(Ordering::Relaxed);
    assert_eq!(calls, walkers as u64 * (sweeps + burn_in + 1));
    assert_eq!(run.evaluations, calls);
    let (mut kept, mut moved) = (0, 0);
    for t in 1..run.kept_sweeps() {
        for k in 0..walkers {
            let (now, before) = (t * walkers + k, (t - 1) * walkers + k);
            if run.accepted[now] {
                moved += 1;
                assert_ne!(run.log_densities[now], run.log_densities[before]);
            } else {
                kept += 1;
                assert_eq!(run.log_densities[now], run.log_densities[before]);
                assert_eq!(run.state(t, k), run.state(t - 1, k));
            }
        }
    }
    assert!(kept > 100 && moved > 100, "kept {kept}, moved {moved}");
}
