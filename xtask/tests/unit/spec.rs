//! Tests of `xtask::spec`.

use kameleon_diagnostics::{
    MmdEstimator, PolynomialKernel, autocorrelation, column, ess_geyer_per_dim, ess_multi_chain,
    per_dimension,
};
use kameleon_samplers::{
    AdaptationSummary, Chain, Ckam, CkamConfig, CycleAdaptation, EnsembleConfig, RunConfig,
    SwitchRule, chain_rng, initial_ball,
};
use kameleon_targets::QuantileRegions;
use rand::Rng;
use std::sync::Arc;
use xtask::reference::Reference;
use xtask::spec::*;

fn chain_from(samples: Vec<f64>, dim: usize, accepted: Vec<bool>) -> Chain {
    let n = accepted.len();
    Chain {
        dim,
        samples,
        accepted,
        log_densities: vec![0.0; n],
        accept_probabilities: vec![0.0; n],
        wall_time_secs: 2.0,
        adaptation: AdaptationSummary::default(),
        seed: 0,
        chain_index: 0,
        config: RunConfig::new(0, n as u64),
        steps: n as u64,
        accepted_total: 0,
        rejected_non_finite: 0,
        covariance_jitters: 0,
        evaluations: 0,
    }
}

/// Metrics against hand computations on a tiny 2-d banana chain.
#[test]
fn metrics_match_direct_computations() {
    let spec = TargetSpec::Banana {
        dim: 2,
        b: 0.1,
        v: 1.0,
    };
    let target = spec.build().unwrap();
    let BuiltTarget::Banana(banana) = &target else {
        unreachable!()
    };
    // Four draws: mean (0.5, 1.0) → norm √1.25.
    let samples = vec![0.0, 0.0, 1.0, 2.0, 0.0, 2.0, 1.0, 0.0];
    let chain = chain_from(samples.clone(), 2, vec![true, false, true, true]);
    let acc = Metric::Acceptance.compute(&chain, &target).unwrap();
    assert_eq!(acc, vec![("accept".to_string(), 0.75)]);
    let norm = Metric::MeanNorm.compute(&chain, &target).unwrap();
    assert!((norm[0].1 - 1.25f64.sqrt()).abs() < 1e-15);
    let q = Metric::QuantileErrors.compute(&chain, &target).unwrap();
    assert_eq!(q.len(), 10);
    let mut sum = 0.0;
    for (level, (name, err)) in QUANTILE_LEVELS.iter().zip(&q) {
        let inside = samples
            .chunks_exact(2)
            .filter(|x| banana.in_region(x, *level).unwrap())
            .count() as f64;
        assert_eq!(name, &quantile_metric_name(*level));
        assert!((err - (inside / 4.0 - level).abs()).abs() < 1e-15);
        sum += err;
    }
    assert!((q[9].1 - sum / 9.0).abs() < 1e-15);
}

#[test]
fn min_ess_is_the_smallest_dimension_and_scaled_by_time() {
    let target = TargetSpec::Banana {
        dim: 2,
        b: 0.03,
        v: 100.0,
    }
    .build()
    .unwrap();
    // Dimension 0 alternates (antithetic, large ESS); dimension 1 is a
    // slow ramp (tiny ESS), so the minimum is dimension 1's Geyer ESS.
    let n = 200;
    let mut samples = Vec::with_capacity(2 * n);
    for t in 0..n {
        samples.push(if t % 2 == 0 { 1.0 } else { -1.0 });
        samples.push(t as f64);
    }
    let chain = chain_from(samples.clone(), 2, vec![true; n]);
    let out = Metric::MinEss.compute(&chain, &target).unwrap();
    let per_dim = ess_geyer_per_dim(&samples, 2).unwrap();
    assert_eq!(out[0].1, per_dim[0].min(per_dim[1]));
    assert_eq!(out[1].1, out[0].1 / 2.0);
    let two = Metric::EssFirstTwo.compute(&chain, &target).unwrap();
    assert_eq!(two[0].1, 0.5 * (per_dim[0] + per_dim[1]));
    assert_eq!(two[1].1, two[0].1 / 2.0);
    // After a warm-up of a quarter (50 of the 200 draws): the same ESS on
    // the last 150 draws only.
    let after = Metric::MinEssAfter { warmup: 1, of: 4 }
        .compute(&chain, &target)
        .unwrap();
    let tail = ess_geyer_per_dim(&samples[50 * 2..], 2).unwrap();
    assert_eq!(
        after,
        [("ess_min_after_warmup".to_string(), tail[0].min(tail[1]))]
    );
    assert_ne!(after[0].1, out[0].1);
    // Each family's value from the stored draws alone is the one a run records.
    for (metric, value) in [
        (Metric::MinEss, &out),
        (Metric::EssFirstTwo, &two),
        (Metric::MinEssAfter { warmup: 1, of: 4 }, &after),
    ] {
        assert_eq!(metric.draw_statistic(), Some(value[0].0.as_str()));
        assert_eq!(metric.on_draws(&samples, 2, 1).unwrap(), value[0].1);
    }
    assert_eq!(Metric::Acceptance.draw_statistic(), None);
    assert!(Metric::Acceptance.on_draws(&samples, 2, 1).is_err());
    assert!(Metric::MinEss.on_draws(&samples[1..], 2, 1).is_err());
    // A warm-up that leaves no draw is an error.
    assert!(
        Metric::MinEssAfter { warmup: 1, of: 1 }
            .compute(&chain, &target)
            .is_err()
    );
}

/// The median distance against a brute-force sort, on a target whose
/// draws we can reproduce.
#[test]
fn median_distance_matches_a_sorted_brute_force() {
    let target = TargetSpec::Banana {
        dim: 3,
        b: 0.1,
        v: 4.0,
    }
    .build()
    .unwrap();
    let t = target.target();
    let n = 41;
    let got = median_distance_of_draws(t, 5, n).unwrap();
    let mut rng = chain_rng(5 ^ 0x003E_D1A4_u64, 0);
    let draws: Vec<Vec<f64>> = (0..n)
        .map(|_| {
            let mut x = vec![0.0; 3];
            t.sample_iid(&mut rng, &mut x).unwrap();
            x
        })
        .collect();
    let mut all = Vec::new();
    for i in 0..n {
        for j in i + 1..n {
            let s: f64 = (0..3).map(|k| (draws[i][k] - draws[j][k]).powi(2)).sum();
            all.push(s.sqrt());
        }
    }
    all.sort_by(f64::total_cmp);
    // 820 distances: the upper median, index 410.
    assert_eq!(got, all[all.len() / 2]);
}

/// The KS distance against a brute-force sup over all sample points
/// (the sup of |F_a − F_b| is attained at a data point, right-continuous).
#[test]
fn ks_distance_matches_brute_force() {
    let a = [0.3, -1.0, 2.0, 0.3, 5.0, 1.1];
    let b = [0.3, 0.7, -2.0, 4.0];
    let cdf = |s: &[f64], t: f64| s.iter().filter(|&&v| v <= t).count() as f64 / s.len() as f64;
    let brute = a
        .iter()
        .chain(&b)
        .map(|&t| (cdf(&a, t) - cdf(&b, t)).abs())
        .fold(0.0, f64::max);
    assert_eq!(ks_distance(&a, &b), brute);
    assert_eq!(ks_distance(&a, &a), 0.0);
    assert_eq!(ks_distance(&[0.0, 1.0], &[5.0, 6.0]), 1.0);
}

#[test]
fn histogram_density_counts_and_normalises() {
    let x = [0.1, 0.2, 0.6, 0.99, 1.0, -3.0, 7.0];
    let h = histogram_density(&x, 0.0, 1.0, 2);
    assert_eq!(h.x, vec![0.25, 0.75]);
    // Bins [0, .5): 2 draws; [.5, 1]: 3 (1.0 goes to the last bin);
    // density = count / (7 · 0.5).
    assert_eq!(h.y, vec![2.0 / 3.5, 3.0 / 3.5]);
}

#[test]
fn thinning_keeps_the_last_row_of_each_block() {
    let samples: Vec<f64> = (0..10).map(f64::from).collect(); // 5 rows × 2
    assert_eq!(thinned_rows(&samples, 2, 2), vec![2.0, 3.0, 6.0, 7.0]);
    assert_eq!(thinned_rows(&samples, 2, 1), samples);
    // Shorter than two blocks: everything.
    assert_eq!(thinned_rows(&samples, 2, 3), samples);
}

#[test]
fn oracle_kamh_tuning_follows_the_code_table() {
    assert_eq!(kamh_oracle_tuning(1000), (0.8, 0.1));
    assert_eq!(kamh_oracle_tuning(1200), (0.8, 0.1));
    assert_eq!(kamh_oracle_tuning(2000), (0.5, 0.1));
    assert_eq!(kamh_oracle_tuning(10), (2.0, 1.0));
}

fn reference_target(samples: Vec<f64>, dim: usize) -> BuiltTarget {
    let record = crate::reference::record(samples.len() / dim);
    let reference = Reference::new(dim, samples, record).expect("whole rows");
    let mut built = TargetSpec::AbcSkewNormal.build().unwrap();
    if let BuiltTarget::Abc { reference: r, .. } = &mut built {
        *r = Some(Arc::new(reference));
    }
    built
}

/// Reference-based metrics against direct computations: the MMD curve
/// against O(nm) kernel sums (`mmd2`), the mean distance by hand, the
/// autocorrelation curve against the per-dimension average.
#[test]
fn reference_metrics_match_direct_computations() {
    let d = 10;
    let rows = |n: usize, shift: f64| -> Vec<f64> {
        (0..n * d)
            .map(|i| ((i * 7919) % 23) as f64 / 7.0 + shift)
            .collect()
    };
    let built = reference_target(rows(30, 0.0), d);
    let samples = rows(40, 0.3);
    let chain = chain_from(samples.clone(), d, vec![true; 40]);
    let metric = Metric::BenchmarkTrace {
        checkpoints: 4,
        thin: 2,
        estimator: MmdEstimator::Unbiased,
    };
    let curves = metric.compute_curves(&chain, &built).unwrap();
    let (mmd, norm) = (&curves[0].1, &curves[1].1);
    let thinned = thinned_rows(&samples, d, 2); // 20 rows
    let reference = built.reference().unwrap();
    for (k, &x) in mmd.x.iter().enumerate() {
        let prefix = 5 * (k + 1);
        assert_eq!(x, (prefix * 2) as f64);
        let part = &thinned[..prefix * d];
        let direct = kameleon_diagnostics::mmd2(
            part,
            &reference.samples,
            d,
            &PolynomialKernel::paper(),
            MmdEstimator::Unbiased,
        )
        .unwrap();
        assert!((mmd.y[k] - direct).abs() <= 1e-9 * direct.abs().max(1.0));
        let dist = distance(&row_mean(part, d), &reference.mean);
        assert!((norm.y[k] - dist).abs() < 1e-12);
    }
    let scalar = metric.compute(&chain, &built).unwrap();
    assert_eq!(scalar[0].1, *mmd.y.last().unwrap());
    let mean_norm = Metric::MeanNorm.compute(&chain, &built).unwrap();
    assert!((mean_norm[0].1 - distance(&chain.mean(), &reference.mean)).abs() < 1e-12);

    let acf = Metric::Autocorrelation { max_lag: 5 }
        .compute_curves(&chain, &built)
        .unwrap();
    let curve = &acf[0].1;
    assert_eq!(curve.x, vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    for lag in 0..=5 {
        let expected = (0..d)
            .map(|j| autocorrelation(&column(&samples, d, j).unwrap(), 5).unwrap()[lag])
            .sum::<f64>()
            / d as f64;
        assert!((curve.y[lag] - expected).abs() < 1e-12);
    }
    let marginal = Metric::Marginal { dim: 0, bins: 8 };
    let scalars = marginal.compute(&chain, &built).unwrap();
    let first = column(&samples, d, 0).unwrap();
    assert_eq!(scalars[0].1, first.iter().sum::<f64>() / 40.0);
    let density = &marginal.compute_curves(&chain, &built).unwrap()[0].1;
    // The histogram integrates to the fraction of draws in the range.
    let (lo, hi) = reference.range(0).unwrap();
    let inside = first.iter().filter(|&&v| v >= lo && v <= hi).count() as f64 / 40.0;
    let integral: f64 = density.y.iter().sum::<f64>() * (hi - lo) / 8.0;
    assert!((integral - inside).abs() < 1e-12);
    // Without a reference these metrics are errors, not silent values.
    let plain = TargetSpec::AbcSkewNormal.build().unwrap();
    assert!(metric.compute(&chain, &plain).is_err());
    assert!(Metric::MeanNorm.compute(&chain, &plain).is_err());
}

#[test]
fn empty_chains_and_pending_samplers_are_errors() {
    let target = TargetSpec::Banana {
        dim: 2,
        b: 0.03,
        v: 100.0,
    }
    .build()
    .unwrap();
    let chain = chain_from(vec![], 2, vec![]);
    assert!(Metric::Acceptance.compute(&chain, &target).is_err());
    let pending = [
        SamplerSpec::AmFs,
        SamplerSpec::AmLs,
        SamplerSpec::KamhOracle { n: 10 },
        SamplerSpec::KmcFinite {
            m: 10,
            step_size: (0.1, 0.2),
            steps: (1, 2),
        },
    ];
    for s in pending.into_iter().filter(|s| s.pending().is_some()) {
        let r = s.run(
            target.target(),
            &[0.0, 0.0],
            RunConfig::new(1, 1),
            0,
            0,
            &|_| {},
        );
        assert!(r.is_err());
    }
}

// ── cKAM experiments: curves, timelines, thinning ──

/// A timed chain of the given draws with a synthetic timeline.
fn timed(samples: Vec<f64>, dim: usize) -> TimedChain {
    let n = samples.len() / dim;
    let draws = checkpoints(n as u64);
    TimedChain {
        chain: chain_from(samples, dim, vec![true; n]),
        timeline: Timeline {
            steps: draws.clone(),
            seconds: draws.iter().map(|&k| k as f64 * 1e-3).collect(),
            draws,
        },
        walkers: 1,
    }
}

fn iid_draws(target: &BuiltTarget, n: usize, seed: u64) -> Vec<f64> {
    let t = target.target();
    let mut rng = chain_rng(seed, 0);
    let mut out = vec![0.0; n * t.dim()];
    for x in out.chunks_exact_mut(t.dim()) {
        t.sample_iid(&mut rng, x).unwrap();
    }
    out
}

#[test]
fn checkpoints_grow_geometrically_to_the_last_draw() {
    assert!(checkpoints(0).is_empty());
    assert_eq!(checkpoints(7), vec![7]);
    let c = checkpoints(1_000_000);
    assert_eq!(
        (c[0], *c.last().unwrap(), c.len()),
        (1000, 1_000_000, CHECKPOINTS)
    );
    // constant ratio 1000^(1/39) up to rounding
    let ratio = 1000f64.powf(1.0 / 39.0);
    for w in c.windows(2) {
        assert!((w[1] as f64 / w[0] as f64 - ratio).abs() < 2e-3, "{w:?}");
    }
    let small = checkpoints(120);
    assert!(small.windows(2).all(|w| w[0] < w[1]));
    assert_eq!((small[0], *small.last().unwrap()), (50, 120));
}

/// Exact iid draws reach the iid floor: their J differs from the floor
/// (a mean of 8 replicates) by less than 4 standard deviations of
/// J − floor, sd(J)·√(1 + 1/8), with sd(J) estimated from 8 more
/// replicates. A chain stuck in the left mode is far above it.
#[test]
fn symmetric_kl_of_exact_draws_sits_on_the_floor_and_a_missed_mode_does_not() {
    let target = TargetSpec::CkamBimodal.build().unwrap();
    let n = 20_000;
    let run = timed(iid_draws(&target, n, 11), 2);
    let out = Metric::SymmetricKl.evaluate(&run, &target, 3).unwrap();
    let scalar = |name: &str| out.scalars.iter().find(|(k, _)| k == name).unwrap().1;
    let curve = |name: &str| &out.curves.iter().find(|(k, _)| k == name).unwrap().1;
    let references = target.kl_reference().unwrap();
    let js: Vec<f64> = (0..8)
        .map(|r| {
            references[0]
                .divergence(&iid_draws(&target, n, 100 + r), 2)
                .unwrap()
                .jeffreys
        })
        .collect();
    let mean = js.iter().sum::<f64>() / 8.0;
    let sd = (js.iter().map(|j| (j - mean).powi(2)).sum::<f64>() / 7.0).sqrt();
    let (kl, floor) = (scalar("kl"), scalar("kl_floor"));
    assert!(
        (kl - floor).abs() < 4.0 * sd * (1.0 + 1.0 / 8.0f64).sqrt(),
        "{kl} {floor} {sd}"
    );
    assert!(
        (floor - mean).abs() < 4.0 * sd * (0.25f64).sqrt(),
        "{floor} {mean}"
    );
    // the curves run along the checkpoints and end at the scalars
    let kl_curve = curve("kl");
    assert_eq!(
        kl_curve.x,
        run.timeline
            .draws
            .iter()
            .map(|&d| d as f64)
            .collect::<Vec<_>>()
    );
    assert_eq!(*kl_curve.y.last().unwrap(), kl);
    assert_eq!(curve("seconds").y, run.timeline.seconds);
    // the floor falls with n (≈ (bins − 1)/n to first order)
    let floor_curve = &curve("kl_floor").y;
    assert!(floor_curve[0] > 5.0 * floor_curve.last().unwrap());
    // a chain in the left mode only: J ≥ ½ ln(½ / q̂(right)) ≫ floor, and
    // mass_x1_pos = 0 against the exact ≈ ½
    let left: Vec<f64> = iid_draws(&target, 4 * n, 12)
        .chunks_exact(2)
        .filter(|x| x[0] < 0.0)
        .take(n)
        .flatten()
        .copied()
        .collect();
    let stuck = timed(left, 2);
    let out = Metric::SymmetricKl.evaluate(&stuck, &target, 3).unwrap();
    assert!(out.scalars[0].1 > 2.0, "{:?}", out.scalars);
    let mass = Metric::PositiveMass.evaluate(&stuck, &target, 3).unwrap();
    assert_eq!(mass.scalars[0], ("mass_x1_pos".to_string(), 0.0));
    // exact mass ½(1 − Φ(−8/√2)) + ½(1 − Φ(8/√0.5)) = ½ − 3.8·10⁻⁹
    assert!((mass.scalars[1].1 - 0.5).abs() < 1e-8);
}

/// The 32-d KL is the mean of the 32 per-coordinate J values.
#[test]
fn grid_kl_averages_the_coordinates() {
    let target = TargetSpec::CkamGrid32.build().unwrap();
    let draws = iid_draws(&target, 500, 5);
    let references = target.kl_reference().unwrap();
    assert_eq!(references.len(), 32);
    let out = Metric::SymmetricKl
        .evaluate(&timed(draws.clone(), 32), &target, 1)
        .unwrap();
    let mean: f64 = (0..32)
        .map(|j| {
            // zero every other coordinate: only coordinate j may matter
            let mut padded = vec![0.0; draws.len()];
            for (row, x) in padded.chunks_exact_mut(32).zip(draws.chunks_exact(32)) {
                row[j] = x[j];
            }
            references[j].divergence(&padded, 32).unwrap().jeffreys
        })
        .sum::<f64>()
        / 32.0;
    assert!((out.scalars[0].1 - mean).abs() < 1e-12);
}

/// The marginal histogram of exact draws matches the exact bin
/// densities within 5 binomial standard errors per bin, and the exact
/// curve integrates to the covered mass 1 − 2·10⁻⁶.
#[test]
fn marginal_of_exact_draws_matches_the_exact_density() {
    let target = TargetSpec::CkamFiveComponents.build().unwrap();
    let n = 50_000;
    let out = Metric::MarginalFirst
        .evaluate(&timed(iid_draws(&target, n, 2), 2), &target, 0)
        .unwrap();
    let (hist, exact) = (&out.curves[0].1, &out.curves[1].1);
    let width = hist.x[1] - hist.x[0];
    let total: f64 = exact.y.iter().sum::<f64>() * width;
    assert!((total - (1.0 - 2e-6)).abs() < 1e-9, "{total}");
    for (h, e) in hist.y.iter().zip(&exact.y) {
        let p = e * width;
        let se = (p * (1.0 - p) / n as f64).sqrt() / width;
        assert!((h - e).abs() <= 5.0 * se + 1e-12, "{h} {e} {se}");
    }
}

/// cKAM through the runner's loop keeps exactly the states of the
/// library's `run_ckam` for chain 0, with one timeline point per
/// checkpoint; a cell that does not hold whole cycles is an error.
#[test]
fn cyclical_runs_match_run_ckam_and_record_the_checkpoints() {
    let target = TargetSpec::CkamBimodal.build().unwrap();
    let t = target.target();
    let spec = SamplerSpec::Ckam {
        n: 10,
        nu0: 3.0,
        gamma: 4.0,
        cycle: 100,
        beta: 0.4,
        switch: SwitchRule::AsWritten,
        adaptation: CycleAdaptation::WithinCycle,
        kernel: CkamKernel::MATERN,
    };
    // 41 exploration and 59 sampling steps per cycle
    let config = RunConfig::new(3 * 41, 3 * 59);
    let run = spec.run(t, &[-8.0, 0.0], config, 9, 0, &|_| {}).unwrap();
    let ckam = Ckam::new(
        2,
        ckam_kernel().unwrap(),
        CkamConfig::default()
            .with_gamma(4.0)
            .unwrap()
            .with_subsample_size(10)
            .unwrap()
            .with_nu(ckam_nu(3.0).unwrap())
            .with_cycle_length(100)
            .unwrap()
            .with_exploration_fraction(0.4)
            .unwrap()
            .with_switch_rule(SwitchRule::AsWritten)
            .with_cycle_adaptation(CycleAdaptation::WithinCycle),
    )
    .unwrap();
    let reference = kameleon_samplers::run_ckam(t, ckam, &[-8.0, 0.0], 3, 9).unwrap();
    assert_eq!(run.chain.samples, reference.samples);
    assert_eq!(run.timeline.draws, checkpoints(3 * 59));
    assert!(run.timeline.seconds.windows(2).all(|w| w[0] <= w[1]));
    assert_eq!(*run.timeline.steps.last().unwrap(), 300);
    let bad = spec.run(t, &[-8.0, 0.0], RunConfig::new(41, 60), 9, 0, &|_| {});
    assert!(bad.is_err());
}

/// A thinned sampler keeps every `thin`-th post-burn-in state of the
/// same stream, and its cell's iterations count the kept states.
#[test]
fn thinning_keeps_every_thin_th_state_of_the_same_stream() {
    let target = TargetSpec::CkamFiveComponents.build().unwrap();
    let t = target.target();
    let spec = |thin| SamplerSpec::RwFixed { nu: 1.5, thin };
    let full = spec(1)
        .run(t, &[0.0, 0.0], RunConfig::new(10, 300), 4, 2, &|_| {})
        .unwrap();
    let thinned = spec(3)
        .run(t, &[0.0, 0.0], RunConfig::new(10, 100), 4, 2, &|_| {})
        .unwrap();
    assert_eq!(thinned.chain.len(), 100);
    let every_third: Vec<f64> = full
        .chain
        .samples
        .chunks_exact(2)
        .skip(2)
        .step_by(3)
        .flatten()
        .copied()
        .collect();
    assert_eq!(thinned.chain.samples, every_third);
    assert_eq!(thinned.timeline.draws, checkpoints(100));
}

/// N(0, diag(4, 1)): the banana with b = 0.
fn gaussian_4_1() -> BuiltTarget {
    TargetSpec::Banana {
        dim: 2,
        b: 0.0,
        v: 4.0,
    }
    .build()
    .unwrap()
}

/// The ensemble cell is `run_ensemble` from its own ball and seed, at
/// the cell's evaluations, with the walkers pooled sweep by sweep.
#[test]
fn ensemble_cell_pools_the_walkers_at_the_cells_evaluations() {
    let target = gaussian_4_1();
    let t = target.target();
    let x0 = [0.5, -0.5];
    // W = 4: 41 burn-in evaluations round to 10 sweeps, 203 iterations
    // take 51 sweeps, of which the first 203 pooled states are kept.
    let run = EMCEE
        .run(t, &x0, RunConfig::new(41, 203), 11, 3, &|_| {})
        .unwrap();
    assert_eq!(run.walkers, 4);
    assert_eq!(EMCEE.walkers(2), 4);
    assert_eq!(SamplerSpec::RwTuned.walkers(2), 1);
    assert_eq!(run.chain.len(), 203);
    assert_eq!(run.chain.config, RunConfig::new(40, 203));
    let mut ball = chain_rng(11 ^ 0xBA11_u64, 3);
    let initial = initial_ball(&x0, 4, ENSEMBLE_BALL, &mut ball).unwrap();
    let seed = chain_rng(11 ^ 0xE45E_u64, 3).next_u64();
    let config = EnsembleConfig::default()
        .with_walkers(4)
        .unwrap()
        .with_stretch_scale(2.0)
        .unwrap();
    let direct = kameleon_samplers::run_ensemble(t, &config, &initial, 51, 10, seed).unwrap();
    assert_eq!(run.chain.samples, direct.samples[..203 * 2]);
    assert_eq!(run.chain.accepted, direct.accepted[..203]);
    assert_eq!(run.timeline.draws, checkpoints(203));
    assert_eq!(*run.timeline.steps.last().unwrap(), 244);
    assert!(run.timeline.seconds.windows(2).all(|w| w[0] <= w[1]));
    // The ESS uses the 50 whole sweeps.
    let ess = Metric::MinEss.evaluate(&run, &target, 11).unwrap();
    assert!(ess.scalars[0].1 > 0.0 && ess.scalars[0].1 <= 200.0);
    // No iterations is an error, not an empty chain.
    assert!(
        EMCEE
            .run(t, &x0, RunConfig::new(0, 0), 11, 3, &|_| {})
            .is_err()
    );
}

/// On N(0, diag(4, 1)) the pooled ensemble's means lie within 4 standard
/// errors of 0, with the standard error from the walkers-as-chains ESS
/// (a false failure has probability ~6e-5 per coordinate if that ESS is
/// right; an ESS overstated several-fold would make the bound too tight
/// to hold reliably). The ESS lies between 1/100 of the draws and the
/// draws.
#[test]
fn ensemble_cell_recovers_a_gaussian_with_an_honest_ess() {
    let target = gaussian_4_1();
    let t = target.target();
    let run = EMCEE
        .run(t, &[1.0, 1.0], RunConfig::new(4_000, 40_000), 5, 0, &|_| {})
        .unwrap();
    let chain = &run.chain;
    let split = split_walkers(&chain.samples, 2, run.walkers);
    let views: Vec<&[f64]> = split.iter().map(Vec::as_slice).collect();
    let ess = per_dimension(&views, 2, ess_multi_chain).unwrap();
    let n = chain.len() as f64;
    for (j, sd) in [2.0, 1.0].into_iter().enumerate() {
        assert!(ess[j] > n / 100.0 && ess[j] <= n, "ESS {} of {n}", ess[j]);
        let mean = column(&chain.samples, 2, j).unwrap().iter().sum::<f64>() / n;
        assert!(
            mean.abs() < 4.0 * sd / ess[j].sqrt(),
            "mean {mean}, ESS {}",
            ess[j]
        );
    }
    let metric = Metric::MinEss.evaluate(&run, &target, 5).unwrap();
    let min = ess[0].min(ess[1]);
    assert_eq!(metric.scalars[0], ("ess_min".to_string(), min));
    // A warm-up of a tenth of the draws, rounded up to whole sweeps.
    let w = run.walkers;
    let skip = (chain.len() / 10).div_ceil(w) * w;
    let end = skip + (chain.len() - skip) / w * w;
    let tail = split_walkers(&chain.samples[skip * 2..end * 2], 2, w);
    let views: Vec<&[f64]> = tail.iter().map(Vec::as_slice).collect();
    let ess = per_dimension(&views, 2, ess_multi_chain).unwrap();
    let metric = Metric::MinEssAfter { warmup: 1, of: 10 }
        .evaluate(&run, &target, 5)
        .unwrap();
    assert_eq!(
        metric.scalars,
        [("ess_min_after_warmup".to_string(), ess[0].min(ess[1]))]
    );
}

#[test]
fn split_walkers_undoes_the_sweep_major_pooling() {
    // 3 sweeps × 2 walkers × d = 2: walker k, sweep s holds (10s + k, −(10s + k)).
    let pooled: Vec<f64> = (0..3)
        .flat_map(|s| (0..2).flat_map(move |k| [(10 * s + k) as f64, -((10 * s + k) as f64)]))
        .collect();
    let split = split_walkers(&pooled, 2, 2);
    assert_eq!(split[0], [0.0, -0.0, 10.0, -10.0, 20.0, -20.0]);
    assert_eq!(split[1], [1.0, -1.0, 11.0, -11.0, 21.0, -21.0]);
}

/// The KAMH code's AM adapts for the whole chain, even in a cell without
/// burn-in (where the runner's default adapts never): its ν moves away from
/// 2.38/√d after the code's 500-step delay; its AM-FS keeps ν fixed.
#[test]
fn the_kamh_codes_am_adapts_for_the_whole_chain() {
    let built = TargetSpec::Banana {
        dim: 8,
        b: 0.03,
        v: 100.0,
    }
    .build()
    .unwrap();
    let start = vec![0.0; 8];
    let nu0 = 2.38 / 8f64.sqrt();
    for learned_scale in [true, false] {
        let spec = SamplerSpec::AmKamhCode {
            learned_scale,
            first_variance: 100.0,
        };
        let run = spec
            .run(
                built.target(),
                &start,
                RunConfig::new(0, 2000),
                4,
                0,
                &|_| {},
            )
            .unwrap();
        let nu = run.chain.adaptation.scale.unwrap();
        assert_eq!((nu - nu0).abs() > 1e-3, learned_scale, "{spec:?}: ν = {nu}");
        let cov = run.chain.adaptation.covariance.unwrap();
        // 75 moment updates from Σ₀ = diag(100, 1, …) have moved it
        assert!((cov[0] - 100.0).abs() > 1e-6 && (cov[9] - 1.0).abs() > 1e-6);
    }
}
