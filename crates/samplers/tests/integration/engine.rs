//! Engine-level tests: pseudo-marginal bookkeeping, non-finite handling,
//! thread-count independence, checkpoint/resume, and a Hastings-ratio test
//! with teeth on an asymmetric proposal.

use crate::common;

use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolisConfig, FKamh, FKamhConfig, FnTarget, Hmc, HmcConfig, Kamh, KamhConfig,
    KmcConfig, KmcLite, LiteSurrogate, LiteSurrogateConfig, MAX_CHAIN_INDEX, Proposal, RandomWalk,
    RandomWalkConfig, Run, RunConfig, SamplerError, StepOutcome, Target, TargetError, Whitened,
    WhiteningConfig, run_chain, run_chains,
};
use kameleon_score_matching::LiteEstimator;
use rand::{Rng, RngExt};
use rand_distr::StandardNormal;
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU64, Ordering};

/// A correlated 2-d Gaussian: Σ = [[1, 0.8·2], [0.8·2, 4]], mean (1, −2).
fn gaussian_2d() -> (impl Target, Vec<f64>, Vec<f64>) {
    let mean = vec![1.0, -2.0];
    let cov = vec![1.0, 1.6, 1.6, 4.0];
    let det = 4.0 - 1.6 * 1.6;
    let prec = [4.0 / det, -1.6 / det, -1.6 / det, 1.0 / det];
    let m = mean.clone();
    let target = FnTarget::new(2, move |x: &[f64]| {
        let a = x[0] - m[0];
        let b = x[1] - m[1];
        -0.5 * (prec[0] * a * a + 2.0 * prec[1] * a * b + prec[3] * b * b)
    });
    (target, mean, cov)
}

#[test]
fn random_walk_matches_gaussian_moments_over_seeds() {
    let (target, mean, cov) = gaussian_2d();
    for seed in 0..4 {
        let chain = run_chain(
            &target,
            RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
            &[0.0, 0.0],
            RunConfig::new(1000, 40_000),
            seed,
        )
        .unwrap();
        assert_eq!(chain.len(), 40_000);
        let (z, _) = common::worst_moment_z(&chain, &mean, &cov);
        assert!(z < common::Z_TOL, "seed {seed}: worst z = {z}");
        assert!(chain.acceptance_rate() > 0.1 && chain.acceptance_rate() < 0.9);
    }
}

/// N(x + δ1, ν²I): asymmetric, with the exact Hastings correction or a broken one.
#[derive(Serialize, Deserialize)]
struct DriftingWalk {
    nu: f64,
    drift: f64,
    correct: bool,
}

impl Proposal for DriftingWalk {
    fn propose(
        &mut self,
        _t: &dyn Target,
        current: &[f64],
        proposed: &mut [f64],
        rng: &mut dyn Rng,
    ) -> f64 {
        let mut log_forward = 0.0;
        let mut log_reverse = 0.0;
        for (p, c) in proposed.iter_mut().zip(current) {
            *p = c + self.drift + self.nu * rng.sample::<f64, _>(StandardNormal);
            let fwd = *p - c - self.drift;
            let rev = c - *p - self.drift;
            log_forward -= fwd * fwd / (2.0 * self.nu * self.nu);
            log_reverse -= rev * rev / (2.0 * self.nu * self.nu);
        }
        // broken: the forward and reverse densities swapped
        if self.correct {
            log_reverse - log_forward
        } else {
            log_forward - log_reverse
        }
    }

    fn observe(&mut self, _o: &StepOutcome<'_>, _adapt: bool, _rng: &mut dyn Rng) {}
}

#[test]
fn asymmetric_proposal_correct_passes_and_swapped_ratio_is_caught() {
    let (target, mean, cov) = gaussian_2d();
    for seed in 0..3 {
        let good = DriftingWalk {
            nu: 1.2,
            drift: 0.4,
            correct: true,
        };
        let chain = run_chain(
            &target,
            good,
            &[0.0, 0.0],
            RunConfig::new(1000, 40_000),
            seed,
        )
        .unwrap();
        let (z, _) = common::worst_moment_z(&chain, &mean, &cov);
        eprintln!("correct z = {z}");
        assert!(z < common::Z_TOL, "correct ratio, seed {seed}: z = {z}");

        let bad = DriftingWalk {
            nu: 1.2,
            drift: 0.4,
            correct: false,
        };
        let chain = run_chain(
            &target,
            bad,
            &[0.0, 0.0],
            RunConfig::new(1000, 40_000),
            seed,
        )
        .unwrap();
        let (z, _) = common::worst_moment_z(&chain, &mean, &cov);
        eprintln!("broken z = {z}");
        assert!(
            z > 3.0 * common::Z_TOL,
            "broken ratio not caught, seed {seed}: z = {z}"
        );
    }
}

/// A noisy (pseudo-marginal style) target that counts its evaluations.
struct Counting {
    calls: AtomicU64,
}

impl Target for Counting {
    fn dim(&self) -> usize {
        1
    }
    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        // log of a unit-mean log-normal estimate of N(0,1): unbiased for π(x)
        let noise: f64 = rng.sample(StandardNormal);
        -0.5 * x[0] * x[0] + 0.5 * noise - 0.125
    }
    fn is_exact(&self) -> bool {
        false
    }
}

#[test]
fn current_log_density_is_never_re_evaluated() {
    let target = Counting {
        calls: AtomicU64::new(0),
    };
    let chain = run_chain(
        &target,
        RandomWalk::new(1, RandomWalkConfig::default()).unwrap(),
        &[0.0],
        RunConfig::new(100, 900),
        3,
    )
    .unwrap();
    // one evaluation at the start, one per proposal
    assert_eq!(target.calls.load(Ordering::Relaxed), 1 + 1000);
    // recorded log densities change only on acceptance
    for i in 1..chain.len() {
        if !chain.accepted[i] {
            assert_eq!(chain.log_densities[i], chain.log_densities[i - 1]);
            assert_eq!(chain.sample(i), chain.sample(i - 1));
        }
    }
    // the recorded acceptance probability is min(1, π(x*)/π(x)) of the
    // step: for an accepted random-walk step it is recomputable from the
    // two stored log densities
    assert_eq!(chain.accept_probabilities.len(), chain.len());
    for i in 1..chain.len() {
        let p = chain.accept_probabilities[i];
        assert!((0.0..=1.0).contains(&p), "{p}");
        if chain.accepted[i] {
            let expected = (chain.log_densities[i] - chain.log_densities[i - 1])
                .min(0.0)
                .exp();
            assert!((p - expected).abs() < 1e-12, "{p} vs {expected}");
        }
    }
}

#[test]
fn non_finite_targets_are_rejected_and_counted() {
    // NaN on the left half-plane, −∞ beyond |x| > 3, finite elsewhere
    let target = FnTarget::new(1, |x: &[f64]| {
        if x[0] < 0.0 {
            f64::NAN
        } else if x[0] > 3.0 {
            f64::NEG_INFINITY
        } else {
            -x[0]
        }
    });
    let chain = run_chain(
        &target,
        RandomWalk::new(1, RandomWalkConfig::default()).unwrap(),
        &[1.0],
        RunConfig::new(0, 5000),
        1,
    )
    .unwrap();
    assert!(
        chain.rejected_non_finite > 500,
        "{}",
        chain.rejected_non_finite
    );
    assert!((0..chain.len()).all(|i| (0.0..=3.0).contains(&chain.sample(i)[0])));
    assert!(chain.log_densities.iter().all(|v| v.is_finite()));
    // a start outside the support is an error, not a panic
    assert!(
        run_chain(
            &target,
            RandomWalk::new(1, RandomWalkConfig::default()).unwrap(),
            &[-1.0],
            RunConfig::new(0, 10),
            1
        )
        .is_err()
    );
}

#[test]
fn multi_chain_results_do_not_depend_on_thread_count() {
    let (target, _, _) = gaussian_2d();
    let config = RunConfig::new(100, 2000).thin(3);
    let setup = |_k: usize, rng: &mut rand_xoshiro::Xoshiro256PlusPlus| {
        let x0 = vec![rng.random::<f64>(), rng.random::<f64>()];
        Ok((RandomWalk::new(2, RandomWalkConfig::default())?, x0))
    };
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| run_chains(&target, 5, 77, config, setup, None).unwrap())
    };
    let strip = |mut chains: Vec<kameleon_samplers::Chain>| {
        chains.iter_mut().for_each(|c| c.wall_time_secs = 0.0);
        chains
    };
    let one = strip(run(1));
    let three = strip(run(3));
    assert_eq!(one, three);
    assert_eq!(one.len(), 5);
    assert_eq!(one[0].len(), 2000 / 3);
    assert_ne!(
        one[0].samples, one[1].samples,
        "chains must use different streams"
    );
    assert!(
        one.iter()
            .enumerate()
            .all(|(k, c)| c.chain_index == k as u64 && c.seed == 77)
    );
}

#[test]
fn checkpoint_and_resume_give_the_uninterrupted_chain() {
    let (target, _, _) = gaussian_2d();
    let config = RunConfig::new(300, 1200).thin(2);
    let proposal = || {
        RandomWalk::new(
            2,
            RandomWalkConfig::default()
                .with_scale(kameleon_samplers::Scale::Adaptive(
                    kameleon_samplers::RobbinsMonro::new(
                        1.0,
                        0.234,
                        kameleon_samplers::StepSchedule::InverseSqrt,
                    )
                    .unwrap(),
                ))
                .unwrap(),
        )
        .unwrap()
    };
    let mut whole = Run::new(&target, proposal(), &[0.5, 0.5], config, 11, 2)
        .unwrap()
        .finish(&target, None)
        .unwrap();

    let dir = std::env::temp_dir().join(format!("kameleon-ckpt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.postcard");
    let mut run = Run::new(&target, proposal(), &[0.5, 0.5], config, 11, 2).unwrap();
    run.advance(&target, 157, None).unwrap(); // inside burn-in: adaptation state matters
    run.checkpoint(&path).unwrap();
    drop(run);
    let mut resumed: Run<RandomWalk> = Run::resume(&path, &target).unwrap();
    resumed.advance(&target, 500, None).unwrap();
    resumed.checkpoint(&path).unwrap();
    let resumed: Run<RandomWalk> = Run::resume(&path, &target).unwrap();
    let mut piecewise = resumed.finish(&target, None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();

    whole.wall_time_secs = 0.0;
    piecewise.wall_time_secs = 0.0;
    assert_eq!(whole, piecewise);
    assert_eq!(whole.len(), 600);
}

#[test]
fn progress_reports_reach_the_end() {
    let (target, _, _) = gaussian_2d();
    let last = AtomicU64::new(0);
    let calls = AtomicU64::new(0);
    let report = |p: kameleon_samplers::Progress| {
        calls.fetch_add(1, Ordering::Relaxed);
        last.fetch_max(p.step, Ordering::Relaxed);
        assert_eq!(p.total, 1000);
    };
    run_chains(
        &target,
        2,
        1,
        RunConfig::new(200, 800),
        |_, _| {
            Ok((
                RandomWalk::new(2, RandomWalkConfig::default())?,
                vec![0.0, 0.0],
            ))
        },
        Some(&report),
    )
    .unwrap();
    assert_eq!(last.load(Ordering::Relaxed), 1000);
    assert!(calls.load(Ordering::Relaxed) >= 2 * 100);
}

#[test]
fn hmc_on_a_target_without_a_gradient_says_what_to_provide() {
    // a closure target has no gradient: the error names the method to
    // implement, on its own and under Whitened
    let (target, _, _) = gaussian_2d();
    let hmc = || Hmc::new(2, HmcConfig::default()).unwrap();
    let config = RunConfig::new(10, 10);
    let plain = run_chain(&target, hmc(), &[0.0, 0.0], config, 1).unwrap_err();
    let whitened = Whitened::new(hmc(), 2, WhiteningConfig::default()).unwrap();
    let whitened = run_chain(&target, whitened, &[0.0, 0.0], config, 1).unwrap_err();
    for err in [plain, whitened] {
        assert!(
            matches!(err, SamplerError::Target(TargetError::Unsupported(_))),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(
            message.contains("HMC needs") && message.contains("Target::grad_log_density"),
            "{message}"
        );
    }
}

#[test]
fn hmc_follows_the_gradient_of_a_closure_target() {
    // gaussian_2d's density with its gradient −P(x − m) as a closure: HMC's
    // moments match the Gaussian's (the same z-test as the random walk's)
    let (_, mean, cov) = gaussian_2d();
    let det = cov[0] * cov[3] - cov[1] * cov[2];
    let prec = [cov[3] / det, -cov[1] / det, -cov[2] / det, cov[0] / det];
    let m = mean.clone();
    let residual = move |x: &[f64]| [x[0] - m[0], x[1] - m[1]];
    let density = residual.clone();
    let target = FnTarget::new(2, move |x: &[f64]| {
        let [a, b] = density(x);
        -0.5 * (prec[0] * a * a + 2.0 * prec[1] * a * b + prec[3] * b * b)
    })
    .with_gradient(move |x: &[f64], out: &mut [f64]| {
        let [a, b] = residual(x);
        out[0] = -(prec[0] * a + prec[1] * b);
        out[1] = -(prec[2] * a + prec[3] * b);
    });
    for seed in 0..2 {
        let hmc = Hmc::new(2, HmcConfig::default()).unwrap();
        let chain =
            run_chain(&target, hmc, &[0.0, 0.0], RunConfig::new(500, 10_000), seed).unwrap();
        let (z, _) = common::worst_moment_z(&chain, &mean, &cov);
        assert!(z < common::Z_TOL, "seed {seed}: worst z = {z}");
        // a wrong gradient still leaves the chain exact (Metropolis corrects
        // it), so the acceptance is what shows the closure is followed: 0.995
        // with it, 0.36 with its first component zeroed
        assert!(chain.acceptance_rate() > 0.9, "{}", chain.acceptance_rate());
    }
}

#[test]
fn too_many_chains_is_an_error_before_any_chain_starts() {
    // chain k's generator is k jumps along: 2^20 + 2 chains would take days
    // of jumps; the run refuses at once and never calls setup
    let (target, _, _) = gaussian_2d();
    let setups = AtomicU64::new(0);
    let started = std::time::Instant::now();
    let err = run_chains(
        &target,
        MAX_CHAIN_INDEX as usize + 2,
        1,
        RunConfig::new(0, 0),
        |_, _| {
            setups.fetch_add(1, Ordering::Relaxed);
            Ok((
                RandomWalk::new(2, RandomWalkConfig::default())?,
                vec![0.0, 0.0],
            ))
        },
        None,
    )
    .unwrap_err();
    assert!(
        matches!(
            err,
            SamplerError::InvalidParameter {
                name: "n_chains",
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(setups.load(Ordering::Relaxed), 0);
    assert!(started.elapsed().as_secs_f64() < 1.0);
}

#[test]
fn setup_errors_of_kernels_features_and_estimators_pass_through_run_chains() {
    // a chain's setup builds its kernel, feature map or estimator with `?`;
    // the first bad parameter is the run's error, with its own message
    let (target, _, _) = gaussian_2d();
    let config = RunConfig::new(10, 10);
    let err = run_chains(
        &target,
        2,
        1,
        config,
        |_, _| {
            let kamh = Kamh::new(2, Gaussian::new(-1.0)?, KamhConfig::default())?;
            Ok((kamh, vec![0.0, 0.0]))
        },
        None,
    )
    .unwrap_err();
    assert!(matches!(err, SamplerError::Kernel(_)), "{err:?}");
    assert!(err.to_string().contains("length_scale"), "{err}");
    let err = run_chains(
        &target,
        2,
        1,
        config,
        |_, rng| {
            let features =
                RandomFourierFeatures::new(&Gaussian::new(1.0)?, 2, 0, Embedding::CosPhase, rng)?;
            Ok((
                FKamh::new(features, FKamhConfig::default())?,
                vec![0.0, 0.0],
            ))
        },
        None,
    )
    .unwrap_err();
    assert!(matches!(err, SamplerError::Features(_)), "{err:?}");
    let err = run_chains(
        &target,
        2,
        1,
        config,
        |_, _| {
            let estimator = LiteEstimator::new(f64::NAN, 1e-3)?;
            let surrogate = LiteSurrogate::new(estimator, 2, LiteSurrogateConfig::default())?;
            Ok((
                KmcLite::new(surrogate, KmcConfig::default())?,
                vec![0.0, 0.0],
            ))
        },
        None,
    )
    .unwrap_err();
    assert!(matches!(err, SamplerError::ScoreMatching(_)), "{err:?}");
}

#[test]
fn zero_variance_history_and_singular_covariance_are_counted_not_fatal() {
    // support = a tiny box: almost every proposal is −∞, the history is
    // (nearly) constant, the empirical covariance is zero or singular, and
    // with ε = 0 every refactorisation needs jitter
    let target = FnTarget::new(3, |x: &[f64]| {
        if x.iter().all(|v| v.abs() < 1e-9) {
            0.0
        } else {
            f64::NEG_INFINITY
        }
    });
    let am = kameleon_samplers::AdaptiveMetropolisConfig::default()
        .with_scale(kameleon_samplers::Scale::fixed(1.0).unwrap())
        .unwrap()
        .with_epsilon(0.0)
        .unwrap()
        .with_warmup(0);
    let am = kameleon_samplers::AdaptiveMetropolis::new(3, am).unwrap();
    let config = RunConfig::new(0, 500).adaptation(kameleon_samplers::AdaptationStop::Never);
    let chain = run_chain(&target, am, &[0.0; 3], config, 4).unwrap();
    assert!(chain.rejected_non_finite > 400);
    assert!(
        chain.covariance_jitters > 400,
        "{}",
        chain.covariance_jitters
    );
    assert!(chain.samples.iter().all(|v| v.is_finite()));
    let pca = kameleon_samplers::PrincipalComponentsConfig::default()
        .with_components(2)
        .unwrap()
        .with_schedule(kameleon_samplers::StepSchedule::InverseSqrt)
        .unwrap()
        .with_warmup(0)
        .with_refresh_every(1)
        .unwrap();
    let pca = kameleon_samplers::PrincipalComponents::new(3, pca).unwrap();
    // the per-direction Robbins–Monro scales shrink until steps fit the box,
    // so only the early proposals are rejected; nothing may blow up
    let chain = run_chain(&target, pca, &[0.0; 3], config, 4).unwrap();
    assert!(chain.rejected_non_finite > 0);
    assert!(
        chain
            .samples
            .iter()
            .all(|v| v.is_finite() && v.abs() < 1e-9)
    );
}

#[test]
fn adaptive_metropolis_checkpoint_resumes_bit_identically() {
    use kameleon_samplers::{AdaptiveMetropolis, StepSchedule};
    let (target, _, _) = gaussian_2d();
    let config = RunConfig::new(400, 600);
    let make = || {
        AdaptiveMetropolis::new(
            2,
            AdaptiveMetropolisConfig::learned_scale(2, StepSchedule::Power { kappa: 0.7 }).unwrap(),
        )
        .unwrap()
    };
    let mut whole = Run::new(&target, make(), &[0.0, 0.0], config, 5, 0)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let path =
        std::env::temp_dir().join(format!("kameleon-am-ckpt-{}.postcard", std::process::id()));
    let mut run = Run::new(&target, make(), &[0.0, 0.0], config, 5, 0).unwrap();
    run.advance(&target, 250, None).unwrap();
    run.checkpoint(&path).unwrap();
    let resumed: Run<AdaptiveMetropolis> = Run::resume(&path, &target).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut piecewise = resumed.finish(&target, None).unwrap();
    whole.wall_time_secs = 0.0;
    piecewise.wall_time_secs = 0.0;
    assert_eq!(whole, piecewise);
}
