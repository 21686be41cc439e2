//! Kernel Hamiltonian Monte Carlo: statistical validity of KMC lite and KMC
//! finite on the 8-d banana B(0.03, 100) and an 8-d correlated Gaussian over
//! several seeds (mean, covariance and quantile coverage within Z_TOL Monte
//! Carlo standard errors from the ESS, see `common/mod.rs`; KMC finite on the
//! banana by stationarity, from exact draws); a deliberately
//! wrong Hamiltonian (the kinetic energy dropped from the accept step) fails
//! the same checks; pseudo-marginal bookkeeping (the current estimate is
//! reused; MCWM re-estimates, counted); the lite random-walk fallback far from
//! the data; the finite surrogate learning from every state; the lite refit
//! frequency following a_t.

use crate::common;

/// The accept step without the kinetic energies, log u < log π(x*) − log π(x):
/// dropping KMC's finite correction is exactly what `ReverseAtCurrent` does.
use common::ReverseAtCurrent as DropKinetic;
use common::{
    Reference, assert_verdict, banana, correlated_gaussian, final_states, worst_coverage_z, z_iid,
};
use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, Bandwidth, Chain, CurrentDensity, FiniteSurrogate,
    FiniteSurrogateConfig, FnTarget, KmcConfig, KmcFinite, KmcLite, KmcSurrogate, LiteSurrogate,
    LiteSurrogateConfig, Proposal, Run, RunConfig, Target, run_chain,
};
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator};
use rand::{Rng, RngExt, SeedableRng};
use rand_distr::StandardNormal;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::atomic::{AtomicU64, Ordering};

const D: usize = 8;
const SEEDS: [u64; 3] = [1, 2, 3];
/// Subsample size (lite) and number of features (finite).
const N: usize = 200;
/// Leapfrog ranges: ε ~ U[0.3, 0.6), L ~ U{3, …, 10}.
const STEP_SIZE: (f64, f64) = (0.3, 0.6);
const STEPS: (u32, u32) = (3, 10);
/// KMC finite's leapfrog steps on the banana: L ~ U{10, …, 30}.
const BANANA_STEPS: (u32, u32) = (10, 30);
/// Chains with a smaller coordinate ESS are too short for the CLT tolerance
/// to mean anything (as in `validity.rs`).
const MIN_ESS: f64 = 15.0;

/// Burn-in and recorded steps of the validity chains; the surrogate is the
/// oracle fit, frozen (a surrogate refitted on a short burn-in that still
/// contains the transient from the start point mixes too slowly for a short
/// test; the adaptive mechanics are tested separately below).
fn config(recorded: u64) -> RunConfig {
    RunConfig::new(1_000, recorded).adaptation(AdaptationStop::After(0))
}

/// KMC lite: lite σ = 200 (length-scale 10, the banana's y₁ scale), λ = 1,
/// subsample n = 200, refit with probability t^(−1/2) during burn-in.
fn lite(d: usize) -> KmcLite {
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(200.0, 1.0).unwrap(),
        d,
        LiteSurrogateConfig::default()
            .with_subsample_size(N)
            .unwrap()
            .with_refit(AdaptProbability::Power { kappa: 0.5 })
            .unwrap(),
    )
    .unwrap();
    KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size(STEP_SIZE)
            .unwrap()
            .with_steps(STEPS)
            .unwrap(),
    )
    .unwrap()
}

/// m random Fourier features of the Gaussian kernel with length-scale 5.
fn features(d: usize, m: usize, seed: u64) -> RandomFourierFeatures {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let kernel = Gaussian::new(5.0).unwrap();
    RandomFourierFeatures::new(&kernel, d, m, Embedding::CosPhase, &mut rng).unwrap()
}

/// KMC finite: m = 200 random Fourier features (ℓ = 5), λ = 10⁻⁴, learning
/// from every burn-in state, ready after 200 points.
fn finite(d: usize) -> KmcFinite<RandomFourierFeatures> {
    let model = FiniteEstimator::new(features(d, N, 99), 1e-4).unwrap();
    KmcFinite::new(
        FiniteSurrogate::new(
            model,
            FiniteSurrogateConfig::default().with_min_points(N).unwrap(),
        )
        .unwrap(),
        KmcConfig::default()
            .with_step_size(STEP_SIZE)
            .unwrap()
            .with_steps(STEPS)
            .unwrap(),
    )
    .unwrap()
}

/// The worst moment and coverage z-scores, the smallest ESS of one chain and
/// which moment was worst.
fn statistics(chain: &Chain, case: &str) -> (f64, f64, f64, String) {
    if case == "banana" {
        let (target, mean, cov) = banana(D);
        // Var y₂'s estimator is driven by E[y₁⁸]: skipped as in validity.rs.
        let skip = |i: usize, j: usize| !(i == 1 && j == 1);
        let (z, ess, which) = common::worst_moment_z_at(chain, &mean, &cov, &skip);
        (z, worst_coverage_z(chain, &target), ess, which)
    } else {
        let (_, mean, cov) = correlated_gaussian(chain.dim);
        let (z, ess, which) = common::worst_moment_z_at(chain, &mean, &cov, &|_, _| true);
        (z, 0.0, ess, which)
    }
}

/// The target of a case.
fn target(case: &str) -> Box<dyn Target> {
    if case == "banana" {
        Box::new(banana(D).0)
    } else {
        Box::new(correlated_gaussian(D).0)
    }
}

/// `n` i.i.d. draws from the target of `case` (the "oracle" points).
fn oracle_points(case: &str, n: usize, seed: u64) -> Mat<f64> {
    let target = target(case);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = vec![0.0; D];
    let mut points = Mat::zeros(n, D);
    for i in 0..n {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for (l, v) in x.iter().enumerate() {
            points[(i, l)] = *v;
        }
    }
    points
}

fn run_case<P: Proposal>(case: &str, proposal: P, seed: u64, config: RunConfig) -> Chain {
    run_chain(target(case).as_ref(), proposal, &[0.0; D], config, seed).unwrap()
}

/// Every case and seed: an oracle warm start on `oracle_size` i.i.d. points
/// (seeded by the chain's seed), then the chain from the origin is checked.
fn check_valid<P: Proposal>(
    name: &str,
    cases: &[&str],
    oracle_size: usize,
    recorded: u64,
    make: impl Fn(usize, &Mat<f64>) -> P,
) {
    for &case in cases {
        for seed in SEEDS {
            let oracle = oracle_points(case, oracle_size, 100 + seed);
            let chain = run_case(case, make(D, &oracle), seed, config(recorded));
            assert_valid(name, case, seed, &chain);
            // the surrogate drove the post-burn-in chain, not the random walk
            let walk = chain.adaptation.extra.iter().find(|e| e.0 == "walk_steps");
            assert!(walk.unwrap().1 < 2_000.0);
        }
    }
}

/// The moment and coverage checks of one chain (see `common/mod.rs`).
fn assert_valid(name: &str, case: &str, seed: u64, chain: &Chain) {
    let (z, cz, ess, which) = statistics(chain, case);
    eprintln!(
        "{name} {case} seed={seed}: moment z {z:.2} ({which}), coverage z {cz:.2}, min ESS {ess:.0}, acc {:.2}",
        chain.acceptance_rate()
    );
    assert!(ess > MIN_ESS, "{name} {case} seed {seed}: ESS {ess}");
    assert!(z < common::Z_TOL, "{name} {case} seed {seed}: z {z}");
    assert!(
        cz < common::Z_TOL,
        "{name} {case} seed {seed}: coverage z {cz}"
    );
    assert_eq!(chain.rejected_non_finite, 0);
}

#[test]
fn kmc_lite_is_valid() {
    check_valid(
        "KMC lite",
        &["gaussian", "banana"],
        N,
        8_000,
        |d, oracle| lite(d).with_oracle_points(oracle.as_ref()).unwrap(),
    );
}

#[test]
fn kmc_finite_is_valid() {
    // the finite estimator learns from every point it is given: 1000 oracle
    // points for its m = 200 features. On the banana a single chain
    // under-explores the y₁ tails (slow, metastable mixing that the ESS
    // estimate does not see), so the banana is checked by stationarity
    // instead: see `kmc_finite_leaves_the_banana_invariant`.
    check_valid("KMC finite", &["gaussian"], 1_000, 20_000, |d, oracle| {
        finite(d).with_oracle_points(oracle.as_ref()).unwrap()
    });
}

/// KMC finite with the banana's settings: m = 200 features as on the
/// Gaussian but longer trajectories, L ~ U{10, …, 30}, which travel along
/// the curved y₁ direction; oracle warm start on `oracle`, frozen.
fn finite_for_the_banana(d: usize, oracle: &Mat<f64>) -> KmcFinite<RandomFourierFeatures> {
    let model = FiniteEstimator::new(features(d, N, 99), 1e-4).unwrap();
    KmcFinite::new(
        FiniteSurrogate::new(
            model,
            FiniteSurrogateConfig::default().with_min_points(N).unwrap(),
        )
        .unwrap(),
        KmcConfig::default()
            .with_step_size(STEP_SIZE)
            .unwrap()
            .with_steps(BANANA_STEPS)
            .unwrap(),
    )
    .unwrap()
    .with_oracle_points(oracle.as_ref())
    .unwrap()
}

/// Chains and steps per chain of the banana stationarity check.
const BANANA_CHAINS: u64 = 1_000;
const BANANA_CHAIN_STEPS: u64 = 20;

/// The banana stationarity check of KMC finite (`common::final_states`):
/// 1000 chains of 20 steps, each started at an exact draw of B(0.03, 100)
/// with the oracle surrogate frozen; their final states are iid π if the
/// kernel leaves π invariant, however slowly it mixes. Returns the worst iid
/// z-score of the final states against `common::Reference::banana`
/// (untwisted means and covariances, region coverages; 49 statistics).
///
/// Why not one long chain, as on the Gaussian: this sampler is metastable
/// in the banana's y₁ tails, where the surrogate's gradient is poor. Three
/// chains of 2·10⁶ steps of one frozen sampler gave E y₁² = 87.1 ± 1.9,
/// 96.5 ± 6.1 and 130.9 ± 14.9 (truth 100; batch-means standard errors):
/// long sticky excursions that no per-chain standard error (Geyer ESS or
/// batch means) captures at test-suite lengths, so the chain-CLT check was a
/// coin toss on rounding-level changes. Stationarity is exact.
fn finite_banana_stationarity(broken: bool, seed: u64) -> (f64, String) {
    let (target, _, _) = banana(D);
    let oracle = oracle_points("banana", 1_000, 100 + seed);
    let proposal = finite_for_the_banana(D, &oracle);
    let states = if broken {
        let broken = DropKinetic(proposal);
        final_states(&target, &broken, BANANA_CHAINS, BANANA_CHAIN_STEPS, seed)
    } else {
        final_states(&target, &proposal, BANANA_CHAINS, BANANA_CHAIN_STEPS, seed)
    };
    Reference::banana(&target).worst_z(&states, &z_iid)
}

#[test]
fn kmc_finite_leaves_the_banana_invariant() {
    // 49 checks per seed, each |z| < Z_TOL = 5 on 1000 iid draws
    // (P(fail) ≈ 6·10⁻⁷ each under the normal approximation)
    for seed in SEEDS {
        let score = finite_banana_stationarity(false, seed);
        assert_verdict(&format!("KMC finite banana seed {seed}"), score, true);
    }
}

#[test]
fn kmc_finite_without_the_kinetic_energy_fails_on_the_banana() {
    for seed in SEEDS {
        let score = finite_banana_stationarity(true, seed);
        assert_verdict(
            &format!("broken KMC finite banana seed {seed}"),
            score,
            false,
        );
    }
}

/// The adaptive samplers as the paper runs them, with no oracle: random-walk
/// steps until the surrogate is ready, then lite refits on a fresh subsample
/// of the whole history with probability a_t = t^(−1/2) and finite learns
/// from every state, **throughout** the recorded chain
/// (`AdaptationStop::Never`; the adaptation vanishes, so the chain is
/// asymptotically π-invariant — each step is exact for the surrogate it
/// uses). The burn-in holds the random-walk phase and the transient from the
/// origin. Same Z_TOL tolerance as the frozen chains (the adaptation after
/// burn-in changes the kernel with probability O(a_t) per step for lite and
/// by O(1/t) for finite).
///
/// In 4 d: in the 8-d case the self-learned surrogate (fitted to a short,
/// autocorrelated history full of repeated states) mixes too slowly along
/// the long axis for a CLT test at test-suite length (a lite surrogate
/// frozen after 6000 burn-in steps gave ESS 69 in 100000 steps, means
/// shifted along the long axis). That is slow mixing, not bias: the chain
/// with a frozen surrogate is exactly π-invariant.
#[test]
fn adaptive_kmc_is_valid_on_the_gaussian() {
    let dim = 4;
    let config = RunConfig::new(2_000, 10_000).adaptation(AdaptationStop::Never);
    let (gaussian, _, _) = correlated_gaussian(dim);
    let x0 = vec![0.0; dim];
    for seed in SEEDS {
        let surrogate = LiteSurrogate::new(
            LiteEstimator::new(200.0, 1.0).unwrap(),
            dim,
            LiteSurrogateConfig::default()
                .with_subsample_size(N)
                .unwrap()
                .with_refit(AdaptProbability::Power { kappa: 0.5 })
                .unwrap(),
        )
        .unwrap();
        let lite = KmcLite::new(
            surrogate,
            KmcConfig::default()
                .with_step_size(STEP_SIZE)
                .unwrap()
                .with_steps(STEPS)
                .unwrap(),
        )
        .unwrap();
        let chain = run_chain(&gaussian, lite, &x0, config, seed).unwrap();
        let refits = chain.adaptation.extra.iter().find(|e| e.0 == "lite_refits");
        // about Σ t^(−1/2) ≈ 2√12000 refits: many, not one
        assert!(refits.unwrap().1 > 20.0, "{refits:?}");
        assert_valid("adaptive KMC lite", "gaussian", seed, &chain);

        let model = FiniteEstimator::new(features(dim, 100, 99), 1e-4).unwrap();
        let finite = KmcFinite::new(
            FiniteSurrogate::new(
                model,
                FiniteSurrogateConfig::default().with_min_points(N).unwrap(),
            )
            .unwrap(),
            KmcConfig::default()
                .with_step_size(STEP_SIZE)
                .unwrap()
                .with_steps(STEPS)
                .unwrap(),
        )
        .unwrap();
        let chain = run_chain(&gaussian, finite, &x0, config, seed).unwrap();
        let points = chain
            .adaptation
            .extra
            .iter()
            .find(|e| e.0 == "finite_points");
        // every state: the start point and all 12000 steps
        assert_eq!(points.unwrap().1, 12_001.0);
        assert_valid("adaptive KMC finite", "gaussian", seed, &chain);
    }
}

/// The same statistics flag the wrong Hamiltonian by a wide margin on every
/// seed and both targets, even on much shorter chains.
#[test]
fn wrong_hamiltonian_fails_the_same_checks() {
    let short = RunConfig::new(500, 1_500);
    for case in ["gaussian", "banana"] {
        for seed in SEEDS {
            for (name, chain) in [
                ("lite", run_case(case, DropKinetic(lite(D)), seed, short)),
                (
                    "finite",
                    run_case(case, DropKinetic(finite(D)), seed, short),
                ),
            ] {
                assert_broken(name, case, seed, &chain);
            }
        }
    }
}

/// The worst moment or coverage z of a chain with the wrong Hamiltonian
/// exceeds twice the validity tolerance.
fn assert_broken(name: &str, case: &str, seed: u64, chain: &Chain) {
    let (z, cz, _, _) = statistics(chain, case);
    let worst = z.max(cz);
    eprintln!("broken {name} {case} seed={seed}: worst z {worst:.1}");
    assert!(
        worst > 2.0 * common::Z_TOL,
        "dropped kinetic energy not caught: {name} {case} seed {seed}: z {worst}"
    );
}

/// i.i.d. N(0, I) points (an oracle sample of the standard normal).
fn normal_points(n: usize, d: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, d, |_, _| rng.sample::<f64, _>(StandardNormal))
}

/// A noisy (pseudo-marginal) standard normal in d = 2 that counts its
/// evaluations: log of a unit-mean log-normal estimate, unbiased for π.
struct Counting {
    calls: AtomicU64,
}

impl Target for Counting {
    fn dim(&self) -> usize {
        2
    }
    fn log_density(&self, x: &[f64], rng: &mut dyn Rng) -> f64 {
        self.calls.fetch_add(1, Ordering::Relaxed);
        let noise: f64 = rng.sample(StandardNormal);
        -0.5 * (x[0] * x[0] + x[1] * x[1]) + 0.5 * noise - 0.125
    }
    fn is_exact(&self) -> bool {
        false
    }
}

/// KMC lite on an oracle sample of the target. The ridge λ = 0.1 keeps the
/// surrogate smooth in the tails: with λ = 10⁻³ it overfits the 100 points,
/// and a chain that wanders into a tail can reject for hundreds of steps
/// (0 or 1 acceptances in 800 steps for 3 of 16 seed × density runs,
/// against 264–585 for every run with λ = 0.1).
fn oracle_lite(current_density: CurrentDensity) -> KmcLite {
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(2.0, 0.1).unwrap(),
        2,
        LiteSurrogateConfig::default()
            .with_subsample_size(50)
            .unwrap()
            .with_refit(AdaptProbability::Power { kappa: 0.5 })
            .unwrap(),
    )
    .unwrap();
    KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size((0.2, 0.5))
            .unwrap()
            .with_steps((1, 10))
            .unwrap()
            .with_current_density(current_density),
    )
    .unwrap()
    .with_oracle_points(normal_points(100, 2, 5).as_ref())
    .unwrap()
}

#[test]
fn pseudo_marginal_estimate_is_reused_and_mcwm_re_estimates() {
    let steps = 1_000;
    let config = RunConfig::new(200, steps - 200);
    for (density, per_step) in [(CurrentDensity::Reuse, 1), (CurrentDensity::ReEstimate, 2)] {
        let target = Counting {
            calls: AtomicU64::new(0),
        };
        let chain = run_chain(&target, oracle_lite(density), &[0.5, 0.5], config, 4).unwrap();
        // one evaluation at the start, then per step one (x*) or two (x_t, x*)
        assert_eq!(target.calls.load(Ordering::Relaxed), 1 + per_step * steps);
        let kept = (1..chain.len())
            .filter(|&i| !chain.accepted[i] && chain.log_densities[i] == chain.log_densities[i - 1])
            .count();
        let rejections = (1..chain.len()).filter(|&i| !chain.accepted[i]).count();
        // the checks below need both outcomes often; how often depends on the
        // path (an MCWM chain can sit in a low-acceptance stretch after a
        // rounding-level change), which is not what this test is about
        let acceptances = chain.len() - 1 - rejections;
        assert!(
            rejections > 10 && acceptances > 10,
            "{rejections} rejections, {acceptances} acceptances"
        );
        if density == CurrentDensity::Reuse {
            // exact: a rejection keeps the stored estimate
            assert_eq!(kept, rejections);
        } else {
            // MCWM: a fresh estimate every step (equal only by a measure-zero event)
            assert_eq!(kept, 0);
        }
    }
}

/// Far from every basis point the lite gradient is exactly zero, so the
/// leapfrog keeps p constant: x* = x + εL p and K(p) − K(p*) = 0, a symmetric
/// random walk N(x, (εL)² I). With ε = 0.5 and L = 4 fixed, each coordinate of
/// x* − x is N(0, 4): over R = 4000 proposals the mean has sd 2/√R and the
/// sample variance sd ≈ 4·√(2/R); checked within 5 sd.
#[test]
fn lite_falls_back_to_a_random_walk_far_from_the_data() {
    let target = FnTarget::new(2, |x: &[f64]| -0.5 * (x[0] * x[0] + x[1] * x[1]));
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(2.0, 1e-3).unwrap(),
        2,
        LiteSurrogateConfig::default()
            .with_subsample_size(50)
            .unwrap()
            .with_refit(AdaptProbability::Always)
            .unwrap(),
    )
    .unwrap();
    let mut kmc = KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size((0.5, 0.5))
            .unwrap()
            .with_steps((4, 4))
            .unwrap(),
    )
    .unwrap()
    .with_oracle_points(normal_points(100, 2, 6).as_ref())
    .unwrap();
    let far = [40.0, -40.0];
    kmc.initialise(&target, &far, true).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
    let r = 4_000;
    let mut proposed = [0.0; 2];
    let (mut sum, mut sum_sq) = ([0.0; 2], [0.0; 2]);
    for _ in 0..r {
        let correction = kmc.propose(&target, &far, &mut proposed, &mut rng);
        assert_eq!(correction, 0.0);
        for l in 0..2 {
            let step = proposed[l] - far[l];
            sum[l] += step;
            sum_sq[l] += step * step;
        }
    }
    let rf = r as f64;
    for l in 0..2 {
        let mean = sum[l] / rf;
        let var = sum_sq[l] / rf - mean * mean;
        assert!(mean.abs() < 5.0 * 2.0 / rf.sqrt(), "mean {mean}");
        assert!(
            (var - 4.0).abs() < 5.0 * 4.0 * (2.0 / rf).sqrt(),
            "var {var}"
        );
    }
    // and a chain started there still reaches the target's bulk: the
    // walk-like moves are accepted often enough to drift in
    let chain = run_chain(&target, kmc, &far, RunConfig::new(0, 3_000), 9).unwrap();
    let last = chain.sample(chain.len() - 1);
    assert!(last[0].hypot(last[1]) < 5.0, "{last:?}");
    assert_eq!(chain.rejected_non_finite, 0);
}

/// The online finite surrogate, fed every state of an adapting chain, equals
/// a batch fit on the start point plus all recorded states (repeats included).
#[test]
fn finite_surrogate_learns_from_every_state() {
    let (target, _, _) = correlated_gaussian(2);
    let m = 40;
    let kmc = common::kmc_finite(features(2, m, 3));
    let config = RunConfig::new(0, 600).adaptation(AdaptationStop::Never);
    let x0 = [0.3, -0.2];
    let mut run = Run::new(&target, kmc, &x0, config, 11, 0).unwrap();
    run.advance(&target, u64::MAX, None).unwrap();
    let online = run.sampler().proposal().surrogate().model().clone();
    let chain = run.into_chain();
    assert_eq!(online.count(), 1 + chain.len());
    assert!(
        chain
            .adaptation
            .extra
            .iter()
            .any(|e| e == &("trajectories".to_string(), 600.0 - 29.0))
    );
    let points = Mat::from_fn(1 + chain.len(), 2, |i, l| {
        if i == 0 {
            x0[l]
        } else {
            chain.sample(i - 1)[l]
        }
    });
    let mut batch = FiniteEstimator::new(features(2, m, 3), 1e-3).unwrap();
    batch.fit(points.as_ref()).unwrap();
    let scale = batch.theta().iter().fold(0.0f64, |a, v| a.max(v.abs()));
    for (a, b) in online.theta().iter().zip(batch.theta()) {
        assert!((a - b).abs() <= 1e-8 * scale, "{a} vs {b}");
    }
}

/// Lite refits: the first when the history holds n points (after step n − 1,
/// the start point counting), then at step t with probability a_t = t^(−1/2).
/// The number of refits over T steps is 1 + Σ_{t=n}^{T} Bernoulli(a_t): mean
/// 1 + Σ a_t, variance Σ a_t(1 − a_t); checked within 5 sd.
#[test]
fn lite_refits_follow_the_vanishing_schedule() {
    let (target, _, _) = correlated_gaussian(2);
    let n = 10;
    let steps = 5_000u64;
    let schedule = AdaptProbability::Power { kappa: 0.5 };
    let surrogate = LiteSurrogate::new(
        LiteEstimator::new(4.0, 1e-2).unwrap(),
        2,
        LiteSurrogateConfig::default()
            .with_subsample_size(n)
            .unwrap()
            .with_refit(schedule)
            .unwrap(),
    )
    .unwrap();
    let kmc = KmcLite::new(
        surrogate,
        KmcConfig::default()
            .with_step_size((0.1, 0.3))
            .unwrap()
            .with_steps((1, 5))
            .unwrap(),
    )
    .unwrap();
    let config = RunConfig::new(0, steps).adaptation(AdaptationStop::Never);
    let mut run = Run::new(&target, kmc, &[0.0, 0.0], config, 12, 0).unwrap();
    run.advance(&target, u64::MAX, None).unwrap();
    let kmc = run.sampler().proposal();
    assert_eq!(kmc.walk_steps(), n as u64 - 1);
    assert_eq!(kmc.surrogate().history().len() as u64, steps + 1);
    let p: Vec<f64> = (n as u64..=steps)
        .map(|t| schedule.probability(t))
        .collect();
    let mean = 1.0 + p.iter().sum::<f64>();
    let sd = p.iter().map(|a| a * (1.0 - a)).sum::<f64>().sqrt();
    let refits = kmc.surrogate().refits() as f64;
    assert!(
        (refits - mean).abs() < 5.0 * sd,
        "{refits} vs {mean} ± {sd}"
    );
}

/// Runs `make()` for `steps` steps in one go and in three pieces with a
/// postcard checkpoint and resume in between (the first break inside the
/// adaptation, with a fitted surrogate); the chains must be bit-identical.
fn resumes_bit_identically<P>(name: &str, make: impl Fn() -> P, config: RunConfig, breaks: [u64; 2])
where
    P: Proposal + serde::Serialize + serde::de::DeserializeOwned,
{
    let (target, _, _) = correlated_gaussian(2);
    let x0 = [0.3, -0.2];
    let mut whole = Run::new(&target, make(), &x0, config, 21, 1)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let dir = std::env::temp_dir().join(format!("kameleon-kmc-ckpt-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("run.postcard");
    let mut run = Run::new(&target, make(), &x0, config, 21, 1).unwrap();
    run.advance(&target, breaks[0], None).unwrap();
    run.checkpoint(&path).unwrap();
    drop(run);
    let mut resumed: Run<P> = Run::resume(&path, &target).unwrap();
    resumed.advance(&target, breaks[1], None).unwrap();
    resumed.checkpoint(&path).unwrap();
    let resumed: Run<P> = Run::resume(&path, &target).unwrap();
    let mut piecewise = resumed.finish(&target, None).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    whole.wall_time_secs = 0.0;
    piecewise.wall_time_secs = 0.0;
    assert_eq!(whole.len() as u64, config.iterations);
    assert_eq!(whole, piecewise, "{name}");
}

/// KMC lite adapting throughout (refits on the a_t schedule draw subsamples
/// from the history with the chain's rng): breaks after the first fit.
#[test]
fn kmc_lite_checkpoint_resumes_bit_identically() {
    let make = || {
        let surrogate = LiteSurrogate::new(
            LiteEstimator::new(4.0, 1e-2).unwrap(),
            2,
            LiteSurrogateConfig::default()
                .with_subsample_size(30)
                .unwrap()
                .with_refit(AdaptProbability::Power { kappa: 0.5 })
                .unwrap(),
        )
        .unwrap();
        KmcLite::new(
            surrogate,
            KmcConfig::default()
                .with_step_size((0.1, 0.3))
                .unwrap()
                .with_steps((1, 5))
                .unwrap(),
        )
        .unwrap()
    };
    let config = RunConfig::new(100, 400).adaptation(AdaptationStop::Never);
    resumes_bit_identically("lite", make, config, [77, 150]);
}

/// KMC finite learning from every state: the breaks fall between
/// refactorisations, so the rank-updated factor itself must round-trip.
#[test]
fn kmc_finite_checkpoint_resumes_bit_identically() {
    let make = || common::kmc_finite(features(2, 40, 3));
    let config = RunConfig::new(100, 400).adaptation(AdaptationStop::Never);
    resumes_bit_identically("finite", make, config, [93, 150]);
}

/// The mean of ‖∇f̂(x) + x‖² over 2 000 fresh N(0, I₃) draws: the squared
/// error of a surrogate's score against the exact score −x. A zero
/// gradient scores E‖x‖² = 3.
fn score_error(surrogate: &mut LiteSurrogate) -> f64 {
    let fresh = normal_points(2_000, 3, 99);
    let mut g = [0.0; 3];
    let mut total = 0.0;
    for i in 0..fresh.nrows() {
        let x = [fresh[(i, 0)], fresh[(i, 1)], fresh[(i, 2)]];
        surrogate.gradient(&x, &mut g);
        total += (0..3).map(|k| (g[k] + x[k]).powi(2)).sum::<f64>();
    }
    total / fresh.nrows() as f64
}

#[test]
fn cross_validated_lite_surrogate_learns_the_score_of_a_normal() {
    // 200 iid N(0, I₃) states fed one by one; the first fit
    // cross-validates (σ, λ) around the median rule. Its score error on
    // fresh draws must be a small fraction of the zero-gradient error 3:
    // a surrogate fitted with a σ or λ lost on the way (e.g. the factor
    // applied twice, λ not set) scores far worse — the deliberately
    // too narrow kernel below (σ = 0.05: each basis point's bump is a
    // tenth of a standard deviation wide) shows how much worse.
    let points = normal_points(200, 3, 7);
    let learn = |config: LiteSurrogateConfig, sigma: f64, lambda: f64| {
        let model = LiteEstimator::new(sigma, lambda).unwrap();
        let mut surrogate = LiteSurrogate::new(model, 3, config).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        for i in 0..points.nrows() {
            let x = [points[(i, 0)], points[(i, 1)], points[(i, 2)]];
            surrogate.learn(&x, i as u64 + 1, &mut rng);
        }
        assert!(surrogate.is_ready());
        surrogate
    };
    let median = Bandwidth::MedianHeuristic { max_points: 100 };
    let mut config = LiteSurrogateConfig::default()
        .with_bandwidth(median)
        .unwrap();
    config.cross_validate = true;
    let mut cv = learn(config, 1.0, 1.0);
    let error = score_error(&mut cv);
    let sigma = cv.model().sigma();
    let lambda = cv.model().lambda();
    eprintln!("cross-validated σ {sigma:.3}, λ {lambda:.2e}: score error {error:.3}");
    assert!(error < 0.3, "score error {error}");
    let mut poor = learn(LiteSurrogateConfig::default(), 0.05, 1e-3);
    let poor_error = score_error(&mut poor);
    eprintln!("σ = 0.05, λ = 0.001: score error {poor_error:.3}");
    assert!(poor_error > 1.0, "{poor_error} vs {error}");
}

#[test]
fn learned_step_factor_checks_its_target_and_range() {
    let base = KmcConfig::default();
    // the scale-free preset is this constructor on its constants
    let preset = base
        .clone()
        .with_learned_step_factor(
            KmcConfig::SCALE_FREE_TARGET_ACCEPT,
            KmcConfig::SCALE_FREE_STEP_FACTOR_RANGE,
        )
        .unwrap();
    assert_eq!(preset, KmcConfig::scale_free());
    // a range of one point, the starting factor 1, is valid
    assert!(
        base.clone()
            .with_learned_step_factor(0.5, (1.0, 1.0))
            .is_ok()
    );
    for (target, range) in [
        (1.0, (0.5, 20.0)),
        (0.0, (0.5, 20.0)),
        (f64::NAN, (0.5, 20.0)),
        (0.65, (1.5, 20.0)),
        (0.65, (0.1, 0.9)),
        (0.65, (0.0, 2.0)),
        (0.65, (0.5, f64::INFINITY)),
    ] {
        assert!(
            base.clone()
                .with_learned_step_factor(target, range)
                .is_err(),
            "accepted target {target}, range {range:?}"
        );
    }
}
