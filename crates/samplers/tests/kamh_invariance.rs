//! KAMH leaves the target invariant: on the strongly twisted banana
//! B(0.1, 100) in d = 8 and on a correlated 4-d Gaussian, chains pass mean,
//! covariance and quantile-coverage checks over several seeds, and the same
//! sampler with the reverse density evaluated at the wrong point fails them.
//! (PCA-Kameleon's and cKAM's counterparts are in `pca_kameleon.rs` and
//! `ckam.rs`; the fully adaptive paths in `kamh_adaptive.rs`.)
//!
//! Tolerances (see `common/mod.rs`): every checked quantity is a chain
//! average f̄; by the Markov-chain CLT f̄ ≈ N(E_π f, Var_π f / ESS_f), with
//! ESS_f Geyer's initial monotone sequence estimate on the series f(x_t)
//! itself, and we require |f̄ − E_π f| ≤ Z_TOL · sd(f)/√ESS_f with Z_TOL = 5
//! (a correct sampler fails one check with probability ≈ 6·10⁻⁷ under the
//! normal approximation; the generous 5 absorbs the noise of the ESS
//! estimate). Seeds are fixed, so the tests are deterministic.
//!
//! Banana moments are checked on the untwisted coordinates T(y), exactly
//! N(0, I) under the target, with the coverage of the exact regions
//! ‖T(y)‖² ≤ χ²₈⁻¹(q) (`common::Reference::banana`).

mod common;

use common::{Reference, ReverseAtCurrent, assert_verdict, banana_score, z_chain};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, Bandwidth, Gamma, Kamh, KamhConfig, Proposal, Refresh, RobbinsMonro,
    RunConfig, Scale, StepSchedule, SubsampleConfig, run_chain,
};
use kameleon_targets::{Banana, QuantileRegions};

const SEEDS: u64 = 3;

fn adaptive_scale() -> Scale {
    Scale::Adaptive(RobbinsMonro::new(0.1f64.sqrt(), 0.234, StepSchedule::InverseSqrt).unwrap())
}

#[test]
fn the_closed_form_chi_squared_quantile_matches_the_targets_crate() {
    // two independent computations of χ²₈⁻¹(q) (the banana's regions)
    let banana = Banana::new(8, 0.1, 100.0).unwrap();
    for q in common::LEVELS {
        let ours = common::chi2_quantile(8, q);
        let theirs = banana.region_threshold(q).unwrap();
        assert!(
            (ours - theirs).abs() < 1e-8 * theirs,
            "q {q}: {ours} vs {theirs}"
        );
    }
    // χ²₂ is exponential with mean 2: t_q = −2 ln(1 − q)
    assert!((common::chi2_quantile(2, 0.5) - 2.0 * 2f64.ln()).abs() < 1e-12);
}

// ---------------------------------------------------------------- banana

const BANANA_N: usize = 300;

/// KAMH-LS with an oracle subsample of n iid banana draws (as the KMC
/// paper's KAMH baselines), frozen; ν adapted during burn-in.
fn banana_kamh(target: &Banana, seed: u64) -> Kamh<Gaussian> {
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: BANANA_N,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Never,
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: adaptive_scale(),
    };
    let mut kamh = Kamh::new(8, Gaussian::new(15.0).unwrap(), config).unwrap();
    kamh.set_subsample(common::oracle_subsample(target, BANANA_N, seed).as_ref())
        .unwrap();
    kamh
}

#[test]
fn kamh_is_invariant_on_the_strongly_twisted_banana() {
    let target = Banana::new(8, 0.1, 100.0).unwrap();
    for seed in 0..SEEDS {
        let score = banana_score(&target, banana_kamh(&target, seed), seed);
        assert_verdict(&format!("kamh banana seed {seed}"), score, true);
    }
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_the_banana() {
    let target = Banana::new(8, 0.1, 100.0).unwrap();
    for seed in 0..SEEDS {
        let proposal = ReverseAtCurrent(banana_kamh(&target, seed));
        let score = banana_score(&target, proposal, seed);
        assert_verdict(&format!("broken kamh banana seed {seed}"), score, false);
    }
}

// -------------------------------------------------------------- Gaussian

/// Full adaptive KAMH-LS: z from the chain history, redrawn with
/// probability t^(−1/2) during burn-in, ν by Robbins–Monro.
fn gaussian_kamh() -> Kamh<Gaussian> {
    let config = KamhConfig {
        subsample: SubsampleConfig {
            subsample_size: 100,
            gamma: Gamma::Fixed(0.2),
            refresh: Refresh::Probability(AdaptProbability::Power { kappa: 0.5 }),
            bandwidth: Bandwidth::Fixed,
            warmup_scale: 1.0,
        },
        scale: adaptive_scale(),
    };
    Kamh::new(4, Gaussian::new(3.0).unwrap(), config).unwrap()
}

/// The worst z-score of a 20 000-step chain on `common::correlated_gaussian(4)`.
fn gaussian_score(proposal: impl Proposal, seed: u64) -> (f64, String) {
    let (target, mean, cov) = common::correlated_gaussian(4);
    let config = RunConfig::new(3_000, 20_000);
    let chain = run_chain(&target, proposal, &[0.0; 4], config, seed).unwrap();
    Reference::gaussian(&mean, &cov).worst_z(&chain.samples, &z_chain)
}

#[test]
fn kamh_is_invariant_on_a_correlated_gaussian() {
    for seed in 0..SEEDS {
        let score = gaussian_score(gaussian_kamh(), seed);
        assert_verdict(&format!("kamh gaussian seed {seed}"), score, true);
    }
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_a_correlated_gaussian() {
    for seed in 0..SEEDS {
        let score = gaussian_score(ReverseAtCurrent(gaussian_kamh()), seed);
        assert_verdict(&format!("broken kamh gaussian seed {seed}"), score, false);
    }
}
