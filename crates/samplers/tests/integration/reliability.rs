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
