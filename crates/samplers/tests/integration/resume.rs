//! Every sampler configuration checkpoints and resumes bit-identically, and a
//! resumed (or running) run refuses a target of another dimension with an
//! error naming the file and the run.

use crate::common;

use common::{adaptive_scale, correlated_gaussian, kmc_finite, subsample_config};
use kameleon_features::{Embedding, Fastfood, FeatureMap, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, AdaptationStop, AdaptiveMetropolis, AdaptiveMetropolisConfig, Ckam,
    CkamConfig, CycleAdaptation, FKamh, FKamhConfig, Hmc, HmcConfig, Kamh, KamhConfig, KmcConfig,
    KmcLite, LiteSurrogate, LiteSurrogateConfig, PcaKameleon, PcaKameleonConfig,
    PrincipalComponents, PrincipalComponentsConfig, Proposal, RandomWalk, RandomWalkConfig,
    Refresh, RobbinsMonro, Run, RunConfig, SamplerError, Scale, StepSchedule, SwitchRule,
};
use kameleon_score_matching::LiteEstimator;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::PathBuf;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kameleon-resume-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `make()` in one go and in three pieces with a checkpoint and a
/// resume at each break (the first inside the burn-in, the second after
/// it); the chains must be bit-identical.
fn resumes_bit_identically<P>(name: &str, make: impl Fn() -> P, config: RunConfig, breaks: [u64; 2])
where
    P: Proposal + Serialize + DeserializeOwned,
{
    let (target, _, _) = correlated_gaussian(2);
    let x0 = [0.3, -0.2];
    let mut whole = Run::new(&target, make(), &x0, config, 21, 1)
        .unwrap()
        .finish(&target, None)
        .unwrap();
    let dir = scratch(name);
    let path = dir.join("run.ckpt");
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
    assert!(!whole.is_empty(), "{name}");
    assert_eq!(whole, piecewise, "{name}");
}

const CONFIG: RunConfig = RunConfig::new(150, 200);
const BREAKS: [u64; 2] = [97, 120];

fn rff(m: usize) -> RandomFourierFeatures {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    RandomFourierFeatures::new(
        &Gaussian::new(2.0).unwrap(),
        2,
        m,
        Embedding::CosPhase,
        &mut rng,
    )
    .unwrap()
}

fn fastfood(m: usize) -> Fastfood {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    Fastfood::new(
        &Gaussian::new(2.0).unwrap(),
        2,
        m,
        Embedding::SinCos,
        &mut rng,
    )
    .unwrap()
}

fn fkamh<F: FeatureMap>(features: F) -> FKamh<F> {
    let eta = RobbinsMonro::new(1.0, 0.234, StepSchedule::Power { kappa: 0.7 }).unwrap();
    FKamh::new(
        features,
        FKamhConfig::default()
            .with_gamma(0.3)
            .unwrap()
            .with_eta(Scale::Adaptive(eta))
            .unwrap(),
    )
    .unwrap()
}

#[test]
fn random_walk_and_adaptive_metropolis_resume_bit_identically() {
    resumes_bit_identically(
        "rw",
        || RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        CONFIG,
        BREAKS,
    );
    resumes_bit_identically(
        "am",
        || AdaptiveMetropolis::new(2, AdaptiveMetropolisConfig::default()).unwrap(),
        CONFIG,
        BREAKS,
    );
    resumes_bit_identically(
        "am-learned",
        || {
            AdaptiveMetropolis::new(
                2,
                AdaptiveMetropolisConfig::learned_scale(2, StepSchedule::InverseSqrt).unwrap(),
            )
            .unwrap()
        },
        CONFIG,
        BREAKS,
    );
    resumes_bit_identically(
        "am-rb",
        || {
            AdaptiveMetropolis::new(
                2,
                AdaptiveMetropolisConfig::rao_blackwellised(StepSchedule::InverseSqrt).unwrap(),
            )
            .unwrap()
        },
        CONFIG,
        BREAKS,
    );
    resumes_bit_identically(
        "pca",
        || PrincipalComponents::new(2, PrincipalComponentsConfig::default()).unwrap(),
        CONFIG,
        BREAKS,
    );
}

#[test]
fn kernel_adaptive_samplers_resume_bit_identically() {
    let config = KamhConfig::default()
        .with_subsample(subsample_config(
            20,
            0.2,
            Refresh::Probability(AdaptProbability::Power { kappa: 0.5 }),
        ))
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    resumes_bit_identically(
        "kamh",
        || Kamh::new(2, Gaussian::new(1.0).unwrap(), config.clone()).unwrap(),
        CONFIG,
        BREAKS,
    );
    let pca = PcaKameleonConfig::default()
        .with_subsample(subsample_config(
            20,
            0.2,
            Refresh::Probability(AdaptProbability::Power { kappa: 0.5 }),
        ))
        .unwrap()
        .with_components(2)
        .unwrap()
        .with_scale(adaptive_scale())
        .unwrap();
    resumes_bit_identically(
        "pca-kameleon",
        || PcaKameleon::new(2, Gaussian::new(1.0).unwrap(), pca.clone()).unwrap(),
        CONFIG,
        BREAKS,
    );
    resumes_bit_identically("fkamh-rff", || fkamh(rff(40)), CONFIG, BREAKS);
    resumes_bit_identically("fkamh-fastfood", || fkamh(fastfood(40)), CONFIG, BREAKS);
}

#[test]
fn hamiltonian_samplers_resume_bit_identically() {
    resumes_bit_identically(
        "hmc",
        || {
            Hmc::new(
                2,
                HmcConfig::default()
                    .with_step_size((0.1, 0.3))
                    .unwrap()
                    .with_steps((1, 5))
                    .unwrap(),
            )
            .unwrap()
        },
        CONFIG,
        BREAKS,
    );
    let lite = || {
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
    resumes_bit_identically("kmc-lite", lite, CONFIG, BREAKS);
    resumes_bit_identically("kmc-finite-rff", || kmc_finite(rff(40)), CONFIG, BREAKS);
    resumes_bit_identically(
        "kmc-finite-fastfood",
        || kmc_finite(fastfood(40)),
        CONFIG,
        BREAKS,
    );
}

#[test]
fn ckam_resumes_bit_identically() {
    let make = |rule, adaptation| {
        move || {
            let nu = RobbinsMonro::new(1.0, 0.234, StepSchedule::InverseSqrt).unwrap();
            Ckam::new(
                2,
                Gaussian::new(1.0).unwrap(),
                CkamConfig::default()
                    .with_gamma(0.5)
                    .unwrap()
                    .with_subsample_size(10)
                    .unwrap()
                    .with_nu(nu)
                    .with_cycle_length(50)
                    .unwrap()
                    .with_exploration_fraction(0.4)
                    .unwrap()
                    .with_switch_rule(rule)
                    .with_cycle_adaptation(adaptation),
            )
            .unwrap()
        }
    };
    // 3 adapting cycles, 4 frozen; breaks inside an exploration phase and
    // inside a sampling phase
    let config = RunConfig::new(150, 200);
    for (name, rule, adaptation) in [
        (
            "ckam-paper",
            SwitchRule::AsWritten,
            CycleAdaptation::WithinCycle,
        ),
        (
            "ckam-exact",
            SwitchRule::DelayedRejection,
            CycleAdaptation::BetweenCycles,
        ),
    ] {
        resumes_bit_identically(name, make(rule, adaptation), config, [61, 103]);
    }
}

#[test]
fn a_resumed_run_refuses_a_target_of_another_dimension() {
    let (two, _, _) = correlated_gaussian(2);
    let (three, _, _) = correlated_gaussian(3);
    let dir = scratch("dimension");
    let path = dir.join("run.ckpt");
    let mut run = Run::new(
        &two,
        RandomWalk::new(2, RandomWalkConfig::default()).unwrap(),
        &[0.0; 2],
        CONFIG,
        31,
        4,
    )
    .unwrap();
    run.advance(&two, 10, None).unwrap();
    run.checkpoint(&path).unwrap();
    // on resume
    match Run::<RandomWalk>::resume(&path, &three) {
        Err(e @ SamplerError::ResumeDimension { .. }) => {
            let message = e.to_string();
            for part in [
                &path.display().to_string(),
                "seed 31",
                "chain 4",
                "dimension 2",
                "dimension 3",
            ] {
                assert!(message.contains(part), "`{part}` missing from: {message}");
            }
        }
        other => panic!("expected a dimension error, got {other:?}"),
    }
    // and when a run is advanced on the wrong target
    let mut resumed = Run::<RandomWalk>::resume(&path, &two).unwrap();
    let before = resumed.steps_done();
    match resumed.advance(&three, 10, None) {
        Err(e @ SamplerError::RunDimension { .. }) => {
            let message = e.to_string();
            assert!(
                message.contains("seed 31") && message.contains("chain 4"),
                "{message}"
            );
        }
        other => panic!("expected a dimension error, got {other:?}"),
    }
    assert_eq!(resumed.steps_done(), before, "no step was taken");
    assert!(resumed.finish(&three, None).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A frozen, adapted F-KAMH reused for new chains with adaptation off keeps
/// its C̃ exactly: starting a chain does not record the starting point.
#[test]
fn a_frozen_fkamh_is_not_changed_by_starting_a_chain() {
    let (target, _, _) = correlated_gaussian(2);
    let adapted = Run::new(
        &target,
        fkamh(rff(40)),
        &[0.0; 2],
        RunConfig::new(200, 0),
        3,
        0,
    )
    .unwrap();
    let mut adapted = adapted;
    adapted.advance(&target, u64::MAX, None).unwrap();
    let template = adapted.sampler().proposal().clone();
    let history = template.history_len();
    assert_eq!(history, 200 + 1, "x_0 and the 200 burn-in states");
    for stop in [AdaptationStop::After(0), AdaptationStop::AfterBurnIn] {
        // burn-in 0 with AfterBurnIn adapts at no step either
        let config = RunConfig::new(0, 50).adaptation(stop);
        let run = Run::new(&target, template.clone(), &[1.0, -1.0], config, 9, 0).unwrap();
        assert_eq!(run.sampler().proposal().history_len(), history, "{stop:?}");
        assert_eq!(
            run.sampler().proposal().feature_moments(),
            template.feature_moments()
        );
        let mut run = run;
        run.advance(&target, u64::MAX, None).unwrap();
        assert_eq!(run.sampler().proposal().history_len(), history);
        assert_eq!(
            run.sampler().proposal().feature_moments(),
            template.feature_moments()
        );
    }
    // with adaptation on, the start still joins the history
    let run = Run::new(
        &target,
        template.clone(),
        &[1.0, -1.0],
        RunConfig::new(5, 5),
        9,
        0,
    )
    .unwrap();
    assert_eq!(run.sampler().proposal().history_len(), history + 1);
}
