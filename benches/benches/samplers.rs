//! One Metropolis–Hastings iteration of each sampler on the 8-d banana
//! B(0.03, 100), after 2000 warm-up steps, with adaptation still on (the
//! per-iteration cost during burn-in, the most expensive phase).

use criterion::{Criterion, criterion_group, criterion_main};
use kameleon_samplers::{
    AdaptiveMetropolis, AdaptiveMetropolisConfig, Hmc, HmcConfig, MetropolisHastings,
    PrincipalComponents, PrincipalComponentsConfig, Proposal, RandomWalk, RandomWalkConfig,
    StepSchedule, chain_rng,
};
use kameleon_targets::Banana;
use std::hint::black_box;

fn bench_one<P: Proposal>(c: &mut Criterion, name: &str, proposal: P) {
    let target = Banana::new(8, 0.03, 100.0).unwrap();
    let mut sampler =
        MetropolisHastings::new(&target, proposal, &[0.0; 8], chain_rng(1, 0), None).unwrap();
    for _ in 0..2000 {
        sampler.step(&target);
    }
    c.bench_function(name, |b| {
        b.iter(|| black_box(sampler.step(black_box(&target))))
    });
}

fn bench_samplers(c: &mut Criterion) {
    let d = 8;
    bench_one(
        c,
        "sampler_step_banana8/SM",
        RandomWalk::new(d, RandomWalkConfig::default()).unwrap(),
    );
    bench_one(
        c,
        "sampler_step_banana8/AM-FS",
        AdaptiveMetropolis::new(d, AdaptiveMetropolisConfig::default()).unwrap(),
    );
    bench_one(
        c,
        "sampler_step_banana8/AM-LS",
        AdaptiveMetropolis::new(
            d,
            AdaptiveMetropolisConfig::learned_scale(d, StepSchedule::Power { kappa: 0.7 }).unwrap(),
        )
        .unwrap(),
    );
    bench_one(
        c,
        "sampler_step_banana8/RBAM",
        AdaptiveMetropolis::new(
            d,
            AdaptiveMetropolisConfig::rao_blackwellised(StepSchedule::Harmonic { t0: 0.0 })
                .unwrap(),
        )
        .unwrap(),
    );
    bench_one(
        c,
        "sampler_step_banana8/PCA-AM",
        PrincipalComponents::new(d, PrincipalComponentsConfig::default()).unwrap(),
    );
    bench_one(
        c,
        "sampler_step_banana8/HMC(L=5..15)",
        Hmc::new(
            d,
            HmcConfig::default()
                .with_step_size((0.1, 0.3))
                .unwrap()
                .with_steps((5, 15))
                .unwrap(),
        )
        .unwrap(),
    );
}

criterion_group!(benches, bench_samplers);
criterion_main!(benches);
