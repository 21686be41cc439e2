//! The kernels pick the CPU's widest vectors (`kameleon_core::simd`); their
//! sums run over the same 8 lanes at every width, so a chain is the same
//! chain with AVX2 and with AVX-512. On an AVX-512 CPU this runs every
//! kernel sampler once at full width and once capped at 256 bits and
//! compares the states after every step; elsewhere both runs take the same
//! path and the test only checks that capping changes nothing.
//!
//! The width is a process-wide setting: the tests that change it take
//! [`WIDTH`] so that they do not cap each other's "full width" runs (other
//! tests of this binary may run at either width meanwhile, which is the
//! claim under test).

use crate::common;

use common::{correlated_gaussian, kmc_finite};
use kameleon_core::simd::{Width, set_max_width};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    FKamh, FKamhConfig, Kamh, KamhConfig, KmcConfig, KmcLite, LiteSurrogate, LiteSurrogateConfig,
    MetropolisHastings, Proposal, chain_rng,
};
use kameleon_score_matching::LiteEstimator;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::sync::Mutex;

static WIDTH: Mutex<()> = Mutex::new(());

/// Every state of a chain of `steps` steps (adapting for the first
/// `adapt_until`) on a correlated Gaussian in `d` dimensions, at `width`.
fn states(
    proposal: impl Proposal,
    d: usize,
    steps: u64,
    adapt_until: u64,
    width: Width,
) -> Vec<f64> {
    set_max_width(width);
    let (target, mean, _) = correlated_gaussian(d);
    let mut chain =
        MetropolisHastings::new(&target, proposal, &mean, chain_rng(5, 0), Some(adapt_until))
            .unwrap();
    let mut out = Vec::new();
    for _ in 0..steps {
        chain.step(&target);
        out.extend_from_slice(chain.position());
    }
    set_max_width(Width::Widest);
    assert!(
        chain.accepted() > steps / 20,
        "the chain barely moved: {} of {steps} accepted",
        chain.accepted()
    );
    out
}

fn assert_width_free<P: Proposal>(make: impl Fn() -> P, d: usize, steps: u64, adapt_until: u64) {
    let _only = WIDTH.lock().unwrap_or_else(|e| e.into_inner());
    let wide = states(make(), d, steps, adapt_until, Width::Widest);
    let narrow = states(make(), d, steps, adapt_until, Width::Bits256);
    let first = wide
        .iter()
        .zip(&narrow)
        .position(|(a, b)| a.to_bits() != b.to_bits());
    assert_eq!(first.map(|i| i / d), None, "the chains part at this step");
}

/// KAMH on its scale-free settings: the Gram matrix of the gradients at
/// every proposal (the fused kernel), the gradient columns, the median
/// heuristic over the redrawn subsample, in d = 3 (one vector of
/// coordinates) and d = 7 (two 4-lane vectors, one 8-lane one).
#[test]
fn kamh_is_the_same_chain_at_every_vector_width() {
    for d in [3, 7] {
        let make = || Kamh::new(d, Gaussian::new(1.0).unwrap(), KamhConfig::scale_free(d)).unwrap();
        assert_width_free(make, d, 700, 500);
    }
}

/// F-KAMH: the half lower product of the feature covariance and the
/// Jacobian, with the covariance's rank-one updates while adapting.
#[test]
fn fkamh_is_the_same_chain_at_every_vector_width() {
    let d = 5;
    let make = || {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let kernel = Gaussian::new(1.5).unwrap();
        let phi =
            RandomFourierFeatures::new(&kernel, d, 37, Embedding::CosPhase, &mut rng).unwrap();
        FKamh::new(phi, FKamhConfig::scale_free(d)).unwrap()
    };
    assert_width_free(make, d, 600, 400);
}

/// KMC lite (its fit's kernel sums and its gradient) and KMC finite (the
/// features and the online update of its solve).
#[test]
fn kmc_is_the_same_chain_at_every_vector_width() {
    let d = 6;
    let lite = || {
        let surrogate = LiteSurrogate::new(
            LiteEstimator::new(2.0 * d as f64, 1.0).unwrap(),
            d,
            LiteSurrogateConfig::default()
                .with_subsample_size(50)
                .unwrap(),
        )
        .unwrap();
        KmcLite::new(surrogate, KmcConfig::default()).unwrap()
    };
    assert_width_free(lite, d, 400, 300);
    let finite = || {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let kernel = Gaussian::new(2.0).unwrap();
        kmc_finite(
            RandomFourierFeatures::new(&kernel, d, 45, Embedding::CosPhase, &mut rng).unwrap(),
        )
    };
    assert_width_free(finite, d, 400, 300);
}
