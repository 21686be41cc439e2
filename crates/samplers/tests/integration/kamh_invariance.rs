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

use crate::common;

use common::{Invariance, adaptive_scale, subsample_config};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{AdaptProbability, Kamh, KamhConfig, Refresh};
use kameleon_targets::{Banana, QuantileRegions};

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
fn banana_kamh(seed: u64) -> Kamh<Gaussian> {
    let config = KamhConfig::default()
        .with_subsample(subsample_config(BANANA_N, 0.2, Refresh::Never))
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    let mut kamh = Kamh::new(8, Gaussian::new(15.0).unwrap(), config).unwrap();
    let z = common::oracle_subsample(&Invariance::banana(), BANANA_N, seed);
    kamh.set_subsample(z.as_ref()).unwrap();
    kamh
}

#[test]
fn kamh_is_invariant_on_the_strongly_twisted_banana() {
    Invariance::Banana.assert("kamh", banana_kamh, false);
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_the_banana() {
    Invariance::Banana.assert("kamh", banana_kamh, true);
}

// -------------------------------------------------------------- Gaussian

/// Full adaptive KAMH-LS: z from the chain history, redrawn with
/// probability t^(−1/2) during burn-in, ν by Robbins–Monro.
fn gaussian_kamh(_seed: u64) -> Kamh<Gaussian> {
    let refresh = Refresh::Probability(AdaptProbability::Power { kappa: 0.5 });
    let config = KamhConfig::default()
        .with_subsample(subsample_config(100, 0.2, refresh))
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    Kamh::new(4, Gaussian::new(3.0).unwrap(), config).unwrap()
}

#[test]
fn kamh_is_invariant_on_a_correlated_gaussian() {
    Invariance::Gaussian.assert("kamh", gaussian_kamh, false);
}

#[test]
fn kamh_with_the_reverse_density_at_the_wrong_point_fails_on_a_correlated_gaussian() {
    Invariance::Gaussian.assert("kamh", gaussian_kamh, true);
}
