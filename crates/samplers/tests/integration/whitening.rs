//! Scale-free sampling with [`Whitened`]: a kernel sampler whose lengths
//! are in the target's standard deviations works on a correlated Gaussian
//! whose scales are 10⁻³ (where the same sampler in the target's units never
//! accepts), stays exactly invariant once adaptation stops (the pilot, the
//! switch to whitened coordinates and the wrapped proposal's own adaptation
//! all happen during burn-in). The wrapper returns the wrapped proposal's
//! Hastings correction unchanged (an affine map's Jacobian cancels), so the
//! wrapped samplers' own broken-correction tests cover it.
//!
//! Tolerances: as in `kamh_invariance.rs`, every checked chain average must
//! lie within Z_TOL = 5 Monte Carlo standard errors (sd/√ESS, ESS estimated
//! on the series itself) of the exact value.

use crate::common;

use common::{Invariance, Reference, assert_verdict, final_states, z_chain, z_iid};
use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, FKamh, FKamhConfig, Kamh, KamhConfig, KmcConfig,
    KmcLite, LiteSurrogate, LiteSurrogateConfig, MetropolisHastings, MomentUpdate, PcaKameleon,
    PcaKameleonConfig, PrincipalComponents, PrincipalComponentsConfig, Proposal, RobbinsMonro,
    RunConfig, Scale, StepSchedule, Whitened, WhiteningConfig, chain_rng, run_chain,
};
use kameleon_score_matching::LiteEstimator;
use kameleon_targets::GaussianMixture;

/// KAMH with its scale-free presets ([`KamhConfig::scale_free`]: n = 200,
/// γ = 2.38/√d, the median heuristic) — lengths that suit a target of unit
/// scale.
fn unit_scale_kamh(dim: usize) -> Kamh<Gaussian> {
    Kamh::new(
        dim,
        Gaussian::new(1.0).unwrap(),
        KamhConfig::scale_free(dim),
    )
    .unwrap()
}

/// KMC lite with its scale-free presets: 200 history points, σ by the
/// median heuristic at every fit, λ = 1, the step size learned toward 0.65.
fn unit_scale_kmc_lite(dim: usize) -> KmcLite {
    let model = LiteEstimator::new(1.0, LiteSurrogateConfig::SCALE_FREE_RIDGE).unwrap();
    let surrogate = LiteSurrogate::new(model, dim, LiteSurrogateConfig::scale_free()).unwrap();
    KmcLite::new(surrogate, KmcConfig::scale_free()).unwrap()
}

/// `correlated_gaussian(4)` (correlation 0.8 between neighbours, standard
/// deviations 1–2.5) shrunk by 10⁻³ and moved to 5: the mean, the
/// covariance and the target.
fn tiny_gaussian() -> (GaussianMixture, Vec<f64>, Vec<f64>) {
    let (_, mean, cov) = common::correlated_gaussian(4);
    let mean: Vec<f64> = mean.iter().map(|m| 5.0 + 1e-3 * m).collect();
    let cov: Vec<f64> = cov.iter().map(|c| 1e-6 * c).collect();
    let c = Mat::from_fn(4, 4, |i, j| cov[i * 4 + j]);
    (GaussianMixture::gaussian(&mean, &c).unwrap(), mean, cov)
}

/// The worst z-score of a chain of `proposal` on [`tiny_gaussian`] from
/// its mean (3 000 burn-in steps, 20 000 kept), and its acceptance rate.
fn tiny_gaussian_score(proposal: impl Proposal, seed: u64) -> ((f64, String), f64) {
    let (target, mean, cov) = tiny_gaussian();
    let chain = run_chain(
        &target,
        proposal,
        &mean,
        RunConfig::new(3_000, 20_000),
        seed,
    )
    .unwrap();
    let score = Reference::gaussian(&mean, &cov).worst_z(&chain.samples, &z_chain);
    (score, chain.acceptance_rate())
}

fn whitened<P: Proposal>(inner: P) -> Whitened<P> {
    Whitened::new(inner, 4, WhiteningConfig::default()).unwrap()
}

#[test]
fn unit_scale_kamh_never_accepts_on_a_gaussian_of_scale_one_thousandth() {
    // the failure the wrapper exists for: γ = 0.2 is 100 standard
    // deviations here
    let (_, acceptance) = tiny_gaussian_score(unit_scale_kamh(4), 0);
    assert!(acceptance < 0.01, "acceptance {acceptance}");
}

#[test]
fn whitened_kamh_samples_a_gaussian_of_scale_one_thousandth() {
    for seed in 0..common::SEEDS {
        let (score, acceptance) = tiny_gaussian_score(whitened(unit_scale_kamh(4)), seed);
        assert!(acceptance > 0.15, "seed {seed}: acceptance {acceptance}");
        assert_verdict(&format!("whitened kamh seed {seed}"), score, true);
    }
}

#[test]
fn whitened_kmc_lite_samples_a_gaussian_of_scale_one_thousandth() {
    for seed in 0..common::SEEDS {
        let (score, acceptance) = tiny_gaussian_score(whitened(unit_scale_kmc_lite(4)), seed);
        // the step size is learned toward 0.65; a poor surrogate lowers it
        assert!(acceptance > 0.3, "seed {seed}: acceptance {acceptance}");
        assert_verdict(&format!("whitened kmc lite seed {seed}"), score, true);
    }
}

/// The banana stationarity check (`common::final_states`): a whitened
/// sampler adapted for 5 000 steps from the origin on B(0.1, 100) in d = 8
/// (pilot, switch and the wrapped sampler's own adaptation included), then
/// frozen and run as 1 000 chains of `STEPS` steps from exact draws. If the
/// frozen kernel leaves π invariant, their final states are iid π however
/// slowly it mixes along the banana; the worst iid z-score of 49 statistics
/// (untwisted moments, region coverages) is returned.
const STEPS: u64 = 30;

fn whitened_banana_stationarity<P: Proposal + Clone>(inner: P, seed: u64) -> (f64, String) {
    let target = Invariance::banana();
    let sampler = Whitened::new(inner, 8, WhiteningConfig::default()).unwrap();
    let mut mh =
        MetropolisHastings::new(&target, sampler, &[0.0; 8], chain_rng(seed, 0), Some(5_000))
            .unwrap();
    for _ in 0..5_000 {
        mh.step(&target);
    }
    let adapted = mh.proposal().clone();
    assert!(adapted.whitening().is_some(), "the pilot has ended");
    let states = final_states(&target, &adapted, 1_000, STEPS, seed);
    Reference::banana(&target).worst_z(&states, &z_iid)
}

fn assert_whitened_invariant<P: Proposal + Clone>(label: &str, inner: impl Fn() -> P) {
    for seed in 0..common::SEEDS {
        let score = whitened_banana_stationarity(inner(), seed);
        assert_verdict(&format!("whitened {label} seed {seed}"), score, true);
    }
}

#[test]
fn whitened_kamh_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("kamh", || unit_scale_kamh(8));
}

#[test]
fn whitened_kmc_lite_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("kmc lite", || unit_scale_kmc_lite(8));
}

#[test]
fn whitened_fkamh_is_invariant_on_the_strongly_twisted_banana() {
    // 100 random Fourier features of the Gaussian kernel of length-scale
    // √(2d) = 4, the median distance of N(0, I₈) points
    assert_whitened_invariant("fkamh", || {
        let mut rng = chain_rng(77, 0);
        let phi = RandomFourierFeatures::new(
            &Gaussian::new(4.0).unwrap(),
            8,
            100,
            Embedding::CosPhase,
            &mut rng,
        )
        .unwrap();
        FKamh::new(phi, FKamhConfig::scale_free(8)).unwrap()
    });
}

#[test]
fn whitened_pca_kameleon_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("pca-kameleon", || {
        PcaKameleon::new(
            8,
            Gaussian::new(1.0).unwrap(),
            PcaKameleonConfig::scale_free(8),
        )
        .unwrap()
    });
}

/// The empirical covariance shrunk toward the pilot's (the identity in
/// whitened coordinates) with the weight of d² accepted moves.
const SHRUNK: MomentUpdate = MomentUpdate::Shrunk { prior_moves: None };

#[test]
fn whitened_am_with_shrunk_moments_is_invariant_on_the_strongly_twisted_banana() {
    // ν fixed at 2.38/√d, and learned toward 0.234 with steps 1/√t
    let learned =
        || RobbinsMonro::new(Scale::optimal_for(8), 0.234, StepSchedule::InverseSqrt).unwrap();
    for learn in [false, true] {
        assert_whitened_invariant(&format!("am (shrunk, ν learned: {learn})"), || {
            let config = AdaptiveMetropolisConfig::default()
                .with_moments(SHRUNK)
                .unwrap();
            let config = if learn {
                config.with_scale(Scale::Adaptive(learned())).unwrap()
            } else {
                config
            };
            AdaptiveMetropolis::new(8, config).unwrap()
        });
    }
}

#[test]
fn whitened_pca_am_with_shrunk_moments_is_invariant_on_the_strongly_twisted_banana() {
    assert_whitened_invariant("pca-am (shrunk)", || {
        let mut config = PrincipalComponentsConfig::default();
        config.moments = SHRUNK;
        PrincipalComponents::new(8, config).unwrap()
    });
}

#[test]
fn disabled_whitening_is_the_wrapped_sampler_step_for_step() {
    let (target, mean, _) = common::correlated_gaussian(4);
    let config = RunConfig::new(500, 1_000);
    let plain = run_chain(&target, unit_scale_kamh(4), &mean, config, 9).unwrap();
    let wrapped = Whitened::new(unit_scale_kamh(4), 4, WhiteningConfig::disabled()).unwrap();
    let wrapped = run_chain(&target, wrapped, &mean, config, 9).unwrap();
    assert_eq!(plain.samples, wrapped.samples);
}

#[test]
fn the_pilot_takes_its_share_of_the_adaptation_and_learns_the_covariance() {
    let (target, mean, cov) = tiny_gaussian();
    let sampler = whitened(unit_scale_kamh(4));
    let mut mh =
        MetropolisHastings::new(&target, sampler, &mean, chain_rng(4, 0), Some(4_000)).unwrap();
    assert!(mh.proposal().whitening().is_none());
    for _ in 0..2_000 {
        mh.step(&target);
    }
    let sampler = mh.proposal();
    assert_eq!(sampler.pilot_length(), 2_000);
    let (mu, l) = sampler.whitening().expect("the pilot has ended");
    // L Lᵀ estimates Σ from ~1 000 correlated pilot states: each variance
    // within a factor 2 (a scale error of √2 is harmless for the wrapped
    // sampler, which adapts its own scale), the mean within 3 sd
    for i in 0..4 {
        let var: f64 = (0..4).map(|k| l[i * 4 + k] * l[i * 4 + k]).sum();
        let ratio = var / cov[i * 4 + i];
        assert!((0.5..2.0).contains(&ratio), "var {i}: ratio {ratio}");
        let z = (mu[i] - mean[i]) / cov[i * 4 + i].sqrt();
        assert!(z.abs() < 3.0, "mean {i}: z {z}");
    }
}
