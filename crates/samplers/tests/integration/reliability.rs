//! Bad input gets a clear error, never a panic, an abort or a silently wrong
//! chain: run sizes, non-finite starts, invalid scales, empty chains.

use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, Ckam, CkamConfig, FnTarget, Habc, HabcConfig,
    Kamh, KamhConfig, RandomWalk, RandomWalkConfig, RobbinsMonro, Run, RunConfig, SamplerError,
    Scale, StepSchedule, SummarySimulator, SyntheticLikelihood, run_chain,
};
use kameleon_targets::IsotropicGaussianPrior;
use rand::{Rng, RngExt};

fn gaussian(d: usize) -> FnTarget<impl Fn(&[f64]) -> f64 + Send + Sync> {
    FnTarget::new(d, |x: &[f64]| -0.5 * x.iter().map(|v| v * v).sum::<f64>())
}

/// A box prior whose log density is 0 at NaN (the comparison is false).
fn box_prior(d: usize) -> FnTarget<impl Fn(&[f64]) -> f64 + Send + Sync> {
    FnTarget::new(d, |x: &[f64]| {
        if x.iter().any(|v| v.abs() > 3.0) {
            f64::NEG_INFINITY
        } else {
            0.0
        }
    })
}

fn kamh(d: usize) -> Kamh<Gaussian> {
    Kamh::new(
        d,
        Gaussian::new(1.0).unwrap(),
        KamhConfig::paper(10).unwrap(),
    )
    .unwrap()
}

fn ckam(d: usize) -> Ckam<Gaussian> {
    let nu = RobbinsMonro::new(1.0, 0.234, StepSchedule::InverseSqrt).unwrap();
    Ckam::new(
        d,
        Gaussian::new(1.0).unwrap(),
        CkamConfig::default()
            .with_gamma(0.5)
            .unwrap()
            .with_subsample_size(10)
            .unwrap()
            .with_nu(nu)
            .with_cycle_length(20)
            .unwrap()
            .with_exploration_fraction(0.4)
            .unwrap(),
    )
    .unwrap()
}

fn invalid_parameter<T: std::fmt::Debug>(result: kameleon_samplers::Result<T>, name: &str) {
    match result {
        Err(SamplerError::InvalidParameter { name: got, .. }) if got == name => {}
        other => panic!("expected an invalid `{name}`, got {other:?}"),
    }
}

/// s ~ N(θ, I).
struct GaussianSimulator;

impl SummarySimulator for GaussianSimulator {
    fn parameter_dim(&self) -> usize {
        2
    }
    fn observed_summary(&self) -> &[f64] {
        &[0.0, 0.0]
    }
    fn simulate_summary(&self, theta: &[f64], rng: &mut dyn Rng, out: &mut [f64]) {
        for (o, t) in out.iter_mut().zip(theta) {
            *o = t + rng.random::<f64>() - 0.5;
        }
    }
}

fn habc() -> Habc<GaussianSimulator> {
    let likelihood = SyntheticLikelihood::new(GaussianSimulator, 10, 0.5).unwrap();
    let prior = IsotropicGaussianPrior::new(1.0).unwrap();
    Habc::new(likelihood, prior, HabcConfig::kmc_paper()).unwrap()
}

#[test]
fn an_overflowing_run_length_is_an_error() {
    let config = RunConfig::new(u64::MAX, 2);
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("overflows"), "{error}");
    let target = gaussian(2);
    invalid_parameter(
        run_chain(
            &target,
            RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
            &[0.0; 2],
            config,
            1,
        ),
        "iterations",
    );
    // KAMH shares its history with the run: this used to index out of range
    invalid_parameter(
        run_chain(&target, kamh(2), &[0.0; 2], config, 1),
        "iterations",
    );
    invalid_parameter(habc().run(&[0.0; 2], config, 1, 0), "iterations");
    invalid_parameter(
        kameleon_samplers::run_ckam_with_burn_in(&target, ckam(2), &[0.0; 2], 1, u64::MAX / 4, 1),
        "cycles",
    );
    invalid_parameter(
        kameleon_samplers::run_ckam(&target, ckam(2), &[0.0; 2], u64::MAX / 4, 1),
        "cycles",
    );
}

#[test]
fn an_unaddressable_recorded_length_is_an_error() {
    let config = RunConfig::new(0, u64::MAX);
    let error = config.validate().unwrap_err().to_string();
    assert!(error.contains("cannot be addressed"), "{error}");
    // the run's dimension is not known to validate(): none is named
    assert!(!error.contains("dimension"), "{error}");
    let target = gaussian(2);
    invalid_parameter(
        run_chain(
            &target,
            RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
            &[0.0; 2],
            config,
            1,
        ),
        "iterations",
    );
    invalid_parameter(habc().run(&[0.0; 2], config, 1, 0), "iterations");
    // addressable with one value per state, not with 2⁵⁸ states of 64
    let wide = RunConfig::new(0, 1 << 58);
    assert!(wide.validate().is_ok());
    invalid_parameter(
        run_chain(
            &gaussian(64),
            RandomWalk::new(64, RandomWalkConfig::default()).unwrap(),
            &[0.0; 64],
            wide,
            1,
        ),
        "iterations",
    );
}

#[test]
fn a_long_run_reserves_no_more_than_it_stores() {
    // 2⁴⁰ states of d = 2 would be 16 TiB: reserving them up front aborts
    let config = RunConfig::new(0, 1 << 40);
    let target = gaussian(2);
    let mut run = Run::new(
        &target,
        RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        &[0.0; 2],
        config,
        1,
        0,
    )
    .unwrap();
    run.advance(&target, 100, None).unwrap();
    let chain = run.into_chain();
    assert_eq!(chain.len(), 100);
    assert!(
        chain.samples.capacity() <= 2 << 16,
        "{}",
        chain.samples.capacity()
    );
    assert!(chain.accepted.capacity() <= 1 << 16);
    // KAMH keeps its history and the run copies nothing while it adapts
    let mut run = Run::new(&target, kamh(2), &[0.0; 2], config, 1, 0).unwrap();
    run.advance(&target, 100, None).unwrap();
    assert_eq!(run.into_chain().len(), 100);
    // HABC: a long run cut short is not possible, but its reservation is
    // the same capped one (a short run checks the bookkeeping)
    let chain = habc().run(&[0.0; 2], RunConfig::new(0, 5), 1, 0).unwrap();
    assert_eq!(chain.len(), 5);
}

#[test]
fn a_non_finite_start_is_refused_by_every_sampler() {
    let target = box_prior(2);
    for bad in [
        [f64::NAN, 0.0],
        [0.0, f64::INFINITY],
        [f64::NEG_INFINITY, 1.0],
    ] {
        let index = bad.iter().position(|v| !v.is_finite()).unwrap();
        let check = |result: kameleon_samplers::Result<kameleon_samplers::Chain>| match result {
            Err(SamplerError::NonFiniteStart { index: i, value }) => {
                assert_eq!(i, index);
                assert!(value.is_nan() || value.is_infinite());
            }
            other => panic!("expected a non-finite start error, got {other:?}"),
        };
        let config = RunConfig::new(5, 5);
        check(run_chain(
            &target,
            RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
            &bad,
            config,
            1,
        ));
        check(run_chain(
            &target,
            AdaptiveMetropolis::new(2, AdaptiveMetropolisConfig::default()).unwrap(),
            &bad,
            config,
            1,
        ));
        check(run_chain(&target, kamh(2), &bad, config, 1));
        check(kameleon_samplers::run_ckam(&target, ckam(2), &bad, 1, 1));
        check(habc().run(&bad, config, 1, 0));
    }
    // the message says what is wrong
    let error = run_chain(
        &target,
        RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        &[0.0, f64::NAN],
        RunConfig::new(1, 1),
        1,
    )
    .unwrap_err()
    .to_string();
    assert!(
        error.contains("coordinate 1") && error.contains("NaN"),
        "{error}"
    );
}

#[test]
fn a_fixed_scale_must_be_positive_and_finite() {
    for bad in [0.0, -1.0, f64::NAN, f64::INFINITY] {
        let mut config = KamhConfig::paper(10).unwrap();
        config.scale = Scale::Fixed(bad);
        invalid_parameter(Kamh::new(2, Gaussian::new(1.0).unwrap(), config), "scale");
        invalid_parameter(
            AdaptiveMetropolisConfig::default().with_scale(Scale::Fixed(bad)),
            "scale",
        );
        let mut am = AdaptiveMetropolisConfig::default().with_warmup(10);
        am.scale = Some(Scale::Fixed(bad));
        invalid_parameter(AdaptiveMetropolis::new(2, am), "scale");
        let mut pca = kameleon_samplers::PcaKameleonConfig::default()
            .with_subsample(KamhConfig::paper(10).unwrap().subsample)
            .unwrap()
            .with_components(2)
            .unwrap();
        pca.scale = Scale::Fixed(bad);
        invalid_parameter(
            kameleon_samplers::PcaKameleon::new(2, Gaussian::new(1.0).unwrap(), pca),
            "scale",
        );
        invalid_parameter(Scale::fixed(bad), "scale");
        assert!(Scale::Fixed(bad).validate("nu").is_err());
    }
    assert!(Scale::Fixed(0.5).validate("nu").is_ok());
}

#[test]
fn the_mean_of_an_empty_chain_is_nan() {
    let target = gaussian(3);
    let chain = run_chain(
        &target,
        RandomWalk::new(3, RandomWalkConfig::default()).unwrap(),
        &[0.0; 3],
        RunConfig::new(4, 0),
        1,
    )
    .unwrap();
    assert!(chain.is_empty());
    let mean = chain.mean();
    assert_eq!(mean.len(), 3);
    assert!(mean.iter().all(|m| m.is_nan()), "{mean:?}");
    // and a non-empty one is the plain average
    let chain = run_chain(
        &target,
        RandomWalk::new(3, RandomWalkConfig::default()).unwrap(),
        &[0.0; 3],
        RunConfig::new(0, 3),
        1,
    )
    .unwrap();
    let expected: f64 = (0..3).map(|i| chain.sample(i)[1]).sum::<f64>() / 3.0;
    assert_eq!(chain.mean()[1], expected);
}

/// The error of a constructor asked for buffers that cannot be allocated.
fn too_large<T>(result: kameleon_samplers::Result<T>, what: &str) {
    match result {
        Err(e @ SamplerError::TooLarge(_)) => {
            let message = e.to_string();
            assert!(message.contains(what), "{message}");
            assert!(message.contains("more than can be allocated"), "{message}");
        }
        Err(other) => panic!("expected TooLarge, got {other}"),
        Ok(_) => panic!("expected TooLarge, got a sampler"),
    }
}

#[test]
fn sizes_beyond_memory_are_errors_not_aborts() {
    // each of these used to abort the process (a failed allocation) or, where
    // n·d wraps (2⁶² · 4 = 2⁶⁴ ≡ 0), to build an empty subsample silently
    for (n, d) in [(1usize << 40, 2), (1 << 62, 4), (usize::MAX, 3)] {
        let config = KamhConfig::paper(n).unwrap();
        too_large(
            Kamh::new(d, Gaussian::new(1.0).unwrap(), config),
            "subsample",
        );
        let config = CkamConfig::paper().with_subsample_size(n).unwrap();
        too_large(
            Ckam::new(d, Gaussian::new(1.0).unwrap(), config),
            "subsample",
        );
    }
    // d × d matrices at d = 2²⁸ are 2⁵⁹ bytes each
    let d = 1 << 28;
    too_large(
        AdaptiveMetropolis::new(d, AdaptiveMetropolisConfig::default()),
        "d × d",
    );
    too_large(
        kameleon_samplers::PrincipalComponents::new(
            d,
            kameleon_samplers::PrincipalComponentsConfig::default(),
        ),
        "d × d",
    );
    too_large(
        kameleon_samplers::Whitened::new(
            RandomWalk::new(d, RandomWalkConfig::default()).unwrap(),
            d,
            kameleon_samplers::WhiteningConfig::default(),
        ),
        "d × d",
    );
    let model = kameleon_score_matching::LiteEstimator::new(1.0, 1.0).unwrap();
    let config = kameleon_samplers::LiteSurrogateConfig::default()
        .with_subsample_size(1 << 40)
        .unwrap();
    too_large(
        kameleon_samplers::LiteSurrogate::new(model, 2, config),
        "subsample",
    );
    too_large(
        kameleon_samplers::initial_ball(&[0.0; 2], 1 << 60, 1.0, &mut rand::rng()),
        "walkers",
    );
    too_large(
        kameleon_samplers::FKamh::new(WideFeatures, kameleon_samplers::FKamhConfig::default()),
        "feature covariance",
    );
}

/// A feature map of 2⁴⁰ features in d = 2, only for its sizes.
#[derive(Debug)]
struct WideFeatures;

impl kameleon_features::FeatureMap for WideFeatures {
    fn dim_in(&self) -> usize {
        2
    }
    fn dim_out(&self) -> usize {
        1 << 40
    }
    fn embed(&self, _: &[f64], _: &mut [f64]) {
        unreachable!("only the sizes are read")
    }
    fn jacobian(&self, _: &[f64], _: faer::MatMut<'_, f64>) {
        unreachable!("only the sizes are read")
    }
    fn second_derivatives(&self, _: &[f64], _: faer::MatMut<'_, f64>) {
        unreachable!("only the sizes are read")
    }
    fn jacobian_transpose_mul(&self, _: &[f64], _: &[f64], _: &mut [f64]) {
        unreachable!("only the sizes are read")
    }
}

#[test]
fn a_chain_index_that_would_take_hours_of_jumps_is_an_error() {
    let target = gaussian(2);
    let run = |index| {
        Run::new(
            &target,
            RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
            &[0.0; 2],
            RunConfig::new(0, 10),
            1,
            index,
        )
    };
    invalid_parameter(run(1 << 40), "chain_index");
    invalid_parameter(run(kameleon_samplers::MAX_CHAIN_INDEX + 1), "chain_index");
    assert!(run(3).is_ok());
    invalid_parameter(
        habc().run(&[0.0; 2], RunConfig::new(0, 10), 1, 1 << 40),
        "chain_index",
    );
}

#[test]
fn a_chain_taken_part_of_the_way_reports_its_acceptance_over_the_steps_taken() {
    let target = gaussian(2);
    let mut run = Run::new(
        &target,
        RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        &[0.0; 2],
        RunConfig::new(0, 10_000),
        7,
        0,
    )
    .unwrap();
    run.advance(&target, 1000, None).unwrap();
    let chain = run.into_chain();
    assert_eq!(chain.steps, 1000);
    // recomputed from the recorded flags (no burn-in, no thinning: one per step)
    let accepted = chain.accepted.iter().filter(|&&a| a).count();
    assert_eq!(chain.accepted.len(), 1000);
    assert_eq!(chain.acceptance_rate(), accepted as f64 / 1000.0);
    assert!(chain.acceptance_rate() > 0.1, "{}", chain.acceptance_rate());
}
