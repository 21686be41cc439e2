//! One F-KAMH iteration (propose, Jacobian at x*, J*ᵀSJ*, two d × d
//! factorisations, accept/reject on the banana, Welford update of the D × D
//! feature scatter) for D ∈ {100, 350, 1000}, d = 8, with dense random
//! Fourier features in both embeddings and with Fastfood; and one cKAM
//! sampling-phase iteration in d = 8 (the paper's frozen random walk, and
//! the exact delayed-rejection rule).

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use kameleon_features::{Embedding, Fastfood, FeatureMap, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    Ckam, CkamConfig, CycleAdaptation, FKamh, FKamhConfig, MetropolisHastings, Proposal,
    RobbinsMonro, Scale, StepSchedule, SwitchRule,
};
use kameleon_targets::{Banana, Target};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

const DIM: usize = 8;

/// An engine running F-KAMH on B(0.1, 100) in d = 8, its feature covariance
/// pre-filled with 2000 exact draws, adapting (η and C̃) at every step.
fn engine<F: FeatureMap>(features: F, target: &Banana) -> MetropolisHastings<FKamh<F>> {
    let eta =
        Scale::Adaptive(RobbinsMonro::new(1.0, 0.234, StepSchedule::Power { kappa: 0.7 }).unwrap());
    let mut proposal = FKamh::new(
        features,
        FKamhConfig::default()
            .with_gamma(0.2)
            .unwrap()
            .with_eta(eta)
            .unwrap(),
    )
    .unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut x = vec![0.0; DIM];
    for _ in 0..2000 {
        target.sample_iid(&mut rng, &mut x).unwrap();
        proposal.push_history(&x).unwrap();
    }
    target.sample_iid(&mut rng, &mut x).unwrap();
    MetropolisHastings::new(target, proposal, &x, rng, None).unwrap()
}

fn bench_engine<P: Proposal>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    big: usize,
    mut sampler: MetropolisHastings<P>,
    target: &Banana,
) {
    group.bench_with_input(BenchmarkId::new(name, big), &big, |b, _| {
        b.iter(|| sampler.step(target))
    });
}

fn fkamh_iteration(c: &mut Criterion) {
    let target = Banana::new(DIM, 0.1, 100.0).unwrap();
    let kernel = Gaussian::new(10.0).unwrap();
    let mut group = c.benchmark_group("fkamh_iteration_d8");
    for big in [100, 350, 1000] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(big as u64);
        for (name, embedding) in [
            ("rff_cos_phase", Embedding::CosPhase),
            ("rff_sin_cos", Embedding::SinCos),
        ] {
            let phi = RandomFourierFeatures::new(&kernel, DIM, big, embedding, &mut rng).unwrap();
            bench_engine(&mut group, name, big, engine(phi, &target), &target);
        }
        let phi = Fastfood::new(&kernel, DIM, big, Embedding::CosPhase, &mut rng).unwrap();
        bench_engine(
            &mut group,
            "fastfood_cos_phase",
            big,
            engine(phi, &target),
            &target,
        );
    }
    group.finish();
}

fn ckam_sampling_iteration(c: &mut Criterion) {
    // a cycle so long that after its 101 exploration steps (n = 50) every
    // benchmarked step is a sampling step: the paper's frozen random walk,
    // and the exact delayed-rejection rule (a KAMH covariance per step)
    let target = Banana::new(DIM, 0.1, 100.0).unwrap();
    for (name, rule) in [
        ("ckam_sampling_iteration_d8", SwitchRule::AsWritten),
        (
            "ckam_sampling_iteration_d8_delayed_rejection",
            SwitchRule::DelayedRejection,
        ),
    ] {
        let nu = RobbinsMonro::new(1.0, 0.234, StepSchedule::Power { kappa: 0.75 }).unwrap();
        let kernel = Gaussian::new(10.0).unwrap();
        let ckam = Ckam::new(
            DIM,
            kernel,
            CkamConfig::default()
                .with_gamma(0.2)
                .unwrap()
                .with_subsample_size(50)
                .unwrap()
                .with_nu(nu)
                .with_cycle_length(1_000_000_000_000)
                .unwrap()
                .with_exploration_fraction(1e-10)
                .unwrap()
                .with_switch_rule(rule)
                .with_cycle_adaptation(CycleAdaptation::WithinCycle),
        )
        .unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        let mut x = vec![0.0; DIM];
        target.sample_iid(&mut rng, &mut x).unwrap();
        let mut sampler = MetropolisHastings::new(&target, ckam, &x, rng, None).unwrap();
        for _ in 0..101 {
            sampler.step(&target);
        }
        assert!(sampler.proposal().is_sampling_step(102));
        c.bench_function(name, |b| b.iter(|| sampler.step(&target)));
    }
}

criterion_group!(benches, fkamh_iteration, ckam_sampling_iteration);
criterion_main!(benches);
