//! The adaptive paths of KAMH, PCA-Kameleon and F-KAMH end to end: the
//! samplers learn only from their own chain (subsample drawn from the
//! history and redrawn at every burn-in step, bandwidth by the median
//! heuristic, ν or η by Robbins–Monro, F-KAMH's feature covariance from
//! every state), adaptation stops after burn-in, and the recorded draws pass
//! the shared statistical checks (`common::Reference`: means, covariances
//! and quantile-region coverages within Z_TOL = 5 Geyer-ESS standard errors,
//! see `common/mod.rs`). Each test also checks that the adapted quantities
//! were learned (moved from their initial values to sensible ones) and
//! stayed frozen after burn-in.
//!
//! Targets: the 4-d correlated Gaussian of `common::correlated_gaussian`
//! (the long-chain checks need ESS in the hundreds, which the banana does
//! not give at test sizes with a history-learned subsample); the banana
//! B(0.1, 100) is covered with an oracle subsample in `kamh_invariance.rs`
//! and `pca_kameleon.rs`.

use crate::common;

use common::{Reference, assert_verdict, z_chain};
use kameleon_features::{Embedding, Fastfood};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, FKamh, FKamhConfig, Kamh, KamhConfig, PcaKameleon, PcaKameleonConfig,
    Proposal, Refresh, RobbinsMonro, Run, RunConfig, Scale, StepSchedule, SubsampleConfig,
};
use kameleon_targets::Target;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const SEEDS: u64 = 3;
const BURN_IN: u64 = 3_000;
const RECORDED: u64 = 20_000;
const N: usize = 100;
/// The band for ℓ / (exact median distance) after the median heuristic on
/// the chain's own states. The subsample is 100 of the burn-in's 3000
/// autocorrelated states: they cover the target less evenly than iid draws
/// (the burn-in's ESS is in the low hundreds), which biases their median
/// distance low, by 5–20% in these runs, on top of a few % sampling error.
/// The band checks that ℓ was learned from the chain (it starts at 50, an
/// order of magnitude off) without pretending to a precision the heuristic
/// does not have.
const ELL_BAND: (f64, f64) = (0.7, 1.1);

/// The median of ‖x − y‖ over 20 000 pairs of independent exact draws of
/// the target: what the median heuristic estimates from a well-mixed
/// history (its sampling error here is < 1%).
fn exact_median_distance(target: &dyn Target) -> f64 {
    let d = target.dim();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(99);
    let (mut x, mut y) = (vec![0.0; d], vec![0.0; d]);
    let mut distances: Vec<f64> = (0..20_000)
        .map(|_| {
            target.sample_iid(&mut rng, &mut x).unwrap();
            target.sample_iid(&mut rng, &mut y).unwrap();
            x.iter()
                .zip(&y)
                .map(|(a, b)| (a - b) * (a - b))
                .sum::<f64>()
                .sqrt()
        })
        .collect();
    distances.sort_by(f64::total_cmp);
    distances[distances.len() / 2]
}

/// Runs `proposal` for [`BURN_IN`] adapting steps and [`RECORDED`] frozen
/// ones from the target's mean; returns a snapshot (by `snapshot`) of the
/// adapted state at the end of burn-in and at the end of the run, the
/// recorded chain's worst z-score and its post-burn-in acceptance rate.
fn run_in_two_halves<P: Proposal, S: PartialEq + std::fmt::Debug>(
    proposal: P,
    snapshot: impl Fn(&P) -> S,
    seed: u64,
) -> (S, S, (f64, String), f64) {
    let (target, mean, cov) = common::correlated_gaussian(4);
    let config = RunConfig::new(BURN_IN, RECORDED);
    let mut run = Run::new(&target, proposal, &mean, config, seed, 0).unwrap();
    run.advance(&target, BURN_IN, None).unwrap();
    let at_burn_in = snapshot(run.sampler().proposal());
    run.advance(&target, RECORDED, None).unwrap();
    let at_end = snapshot(run.sampler().proposal());
    let chain = run.into_chain();
    assert_eq!(chain.len() as u64, RECORDED);
    let acceptance = chain.accepted.iter().filter(|&&a| a).count() as f64 / chain.len() as f64;
    let score = Reference::gaussian(&mean, &cov).worst_z(&chain.samples, &z_chain);
    (at_burn_in, at_end, score, acceptance)
}

/// The KAMH paper's adaptation (`KamhConfig::paper`): z of n = 100 states
/// redrawn from the whole history at every burn-in step, ℓ by the median
/// heuristic of each new z, ν from √0.1 by Robbins–Monro toward 0.234, an
/// initial random walk of standard deviation 0.2 until the history holds n
/// states; started from a deliberately wrong ℓ = 50.
#[test]
fn kamh_paper_adaptation_learns_from_its_history_and_freezes_after_burn_in() {
    let (target, _, _) = common::correlated_gaussian(4);
    let median = exact_median_distance(&target);
    for seed in 0..SEEDS {
        let kamh = Kamh::new(
            4,
            Gaussian::new(50.0).unwrap(),
            KamhConfig::paper(N).unwrap(),
        )
        .unwrap();
        let snapshot = |k: &Kamh<Gaussian>| {
            let z = k.subsample().map(|z| z.to_owned());
            (z, k.kernel().length_scale(), k.nu(), k.summary().extra)
        };
        let (before, after, score, acceptance) = run_in_two_halves(kamh, snapshot, seed);
        // frozen: same z, ℓ, ν and counters after 20 000 more steps
        assert_eq!(
            before, after,
            "seed {seed}: adaptation continued after burn-in"
        );
        let (_, ell, nu, extra) = after;
        let value = |name: &str| extra.iter().find(|(k, _)| k == name).unwrap().1;
        // z first drawn when the history reached n states (step n), then
        // redrawn at each of the remaining burn-in steps; each burn-in state
        // was appended to the history exactly once
        assert_eq!(
            value("subsample_refreshes"),
            (BURN_IN - N as u64 + 1) as f64
        );
        assert_eq!(value("history_len"), BURN_IN as f64);
        assert_eq!(value("median_heuristic_failures"), 0.0);
        assert!(
            (ELL_BAND.0..ELL_BAND.1).contains(&(ell / median)),
            "seed {seed}: ℓ = {ell}, exact median distance {median}"
        );
        // ν moved away from √0.1 and holds the frozen acceptance near the
        // 0.234 it was tuned to (the frozen z differs from the adapting
        // ones, so only a band is meaningful)
        assert!((nu - 0.1f64.sqrt()).abs() > 0.1, "seed {seed}: ν = {nu}");
        assert!(
            (0.15..0.35).contains(&acceptance),
            "seed {seed}: acceptance {acceptance}"
        );
        eprintln!(
            "seed {seed}: ℓ = {ell:.3} (median {median:.3}), ν = {nu:.3}, acceptance {acceptance:.3}"
        );
        assert_verdict(&format!("adaptive kamh seed {seed}"), score, true);
    }
}

/// PCA-Kameleon with the paper's subsample settings except the refresh
/// schedule: z redrawn with the vanishing probability t^(−1/2) (about
/// 2√t refreshes by step t, each an O(n³) eigendecomposition), median
/// heuristic, one Robbins–Monro scale per direction, 3 directions.
#[test]
fn pca_kameleon_paper_adaptation_learns_from_its_history_and_freezes_after_burn_in() {
    let (target, _, _) = common::correlated_gaussian(4);
    let median = exact_median_distance(&target);
    for seed in 0..SEEDS {
        let mut subsample = SubsampleConfig::paper(N);
        subsample.refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
        let config = PcaKameleonConfig::default()
            .with_subsample(subsample)
            .unwrap()
            .with_components(3)
            .unwrap()
            .with_scale(Scale::Adaptive(
                RobbinsMonro::new(1.0, 0.234, StepSchedule::InverseSqrt).unwrap(),
            ))
            .unwrap();
        let pca = PcaKameleon::new(4, Gaussian::new(50.0).unwrap(), config).unwrap();
        let snapshot = |p: &PcaKameleon<Gaussian>| {
            let z = p.subsample().map(|z| z.to_owned());
            let scales: Vec<f64> = p.scales().collect();
            (
                z,
                p.kernel().length_scale(),
                scales,
                p.eigenvalues().to_vec(),
            )
        };
        let (before, after, score, acceptance) = run_in_two_halves(pca, snapshot, seed);
        assert_eq!(
            before, after,
            "seed {seed}: adaptation continued after burn-in"
        );
        let (_, ell, scales, eigenvalues) = after;
        assert!(
            (ELL_BAND.0..ELL_BAND.1).contains(&(ell / median)),
            "seed {seed}: ℓ = {ell}, median {median}"
        );
        assert_eq!(eigenvalues.len(), 3);
        assert!(
            scales.iter().all(|&s| (s - 1.0).abs() > 0.05),
            "seed {seed}: {scales:?}"
        );
        assert!(
            (0.15..0.45).contains(&acceptance),
            "seed {seed}: acceptance {acceptance}"
        );
        eprintln!("seed {seed}: ℓ = {ell:.3}, ν_j = {scales:.3?}, acceptance {acceptance:.3}");
        assert_verdict(&format!("adaptive pca seed {seed}"), score, true);
    }
}

/// F-KAMH with Fastfood features (D = 64, ℓ = 2, a length-scale of the
/// order of the target's) learning C̃ from every state from an empty
/// history and η by Robbins–Monro, both frozen after burn-in by the engine.
#[test]
fn fkamh_fastfood_adaptation_learns_from_its_history_and_freezes_after_burn_in() {
    for seed in 0..SEEDS {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xfa57);
        let kernel = Gaussian::new(2.0).unwrap();
        let phi = Fastfood::new(&kernel, 4, 64, Embedding::CosPhase, &mut rng).unwrap();
        let eta = RobbinsMonro::new(5.0, 0.234, StepSchedule::Power { kappa: 0.6 }).unwrap();
        let fkamh = FKamh::new(
            phi,
            FKamhConfig::default()
                .with_gamma(0.2)
                .unwrap()
                .with_eta(Scale::Adaptive(eta))
                .unwrap(),
        )
        .unwrap();
        let snapshot = |f: &FKamh<Fastfood>| {
            (
                f.history_len(),
                f.eta(),
                f.feature_moments().mean().to_vec(),
            )
        };
        let (before, after, score, acceptance) = run_in_two_halves(fkamh, snapshot, seed);
        assert_eq!(
            before, after,
            "seed {seed}: adaptation continued after burn-in"
        );
        let (history, eta, _) = after;
        // the start point plus every burn-in state
        assert_eq!(history, BURN_IN + 1);
        assert!((eta - 5.0).abs() > 0.5, "seed {seed}: η = {eta}");
        assert!(
            (0.15..0.4).contains(&acceptance),
            "seed {seed}: acceptance {acceptance}"
        );
        eprintln!("seed {seed}: η = {eta:.3}, acceptance {acceptance:.3}");
        assert_verdict(&format!("adaptive fkamh seed {seed}"), score, true);
    }
}
