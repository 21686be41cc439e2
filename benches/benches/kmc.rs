//! One KMC iteration on the 8-d banana B(0.03, 100) with L = 55 leapfrog
//! steps (the mean of the paper's L ~ U{10, …, 100}, the Python comparison)
//! and with the L = 50: KMC lite on a basis of n = 1000 points, KMC
//! finite on m = 1000 random Fourier features (D = m), both warm-started on
//! 1000 exact draws ("oracle"). Lite and finite are timed with the surrogate
//! frozen; finite also with adaptation on, where every iteration adds the new
//! state by an O(dm²) online update (default ridge, and
//! `RidgeSchedule::FixedOnSums`).

use criterion::{Criterion, criterion_group, criterion_main};
use faer::Mat;
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    AdaptProbability, FiniteSurrogate, FiniteSurrogateConfig, KmcConfig, KmcFinite, KmcLite,
    LiteSurrogate, LiteSurrogateConfig, MetropolisHastings, Proposal, Target, chain_rng,
};
use kameleon_score_matching::{FiniteEstimator, LiteEstimator, RidgeSchedule};
use kameleon_targets::Banana;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

const D: usize = 8;
const N: usize = 1000;
const STEP_SIZE: (f64, f64) = (0.3, 0.6);
/// The Python comparison's L = 55 and the L = 50.
const STEPS: [u32; 2] = [55, 50];

fn oracle(target: &Banana) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let mut x = [0.0; D];
    let mut points = Mat::zeros(N, D);
    for i in 0..N {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for (l, v) in x.iter().enumerate() {
            points[(i, l)] = *v;
        }
    }
    points
}

fn bench_one<P: Proposal>(c: &mut Criterion, name: &str, proposal: P, adapt: bool) {
    let target = Banana::new(D, 0.03, 100.0).unwrap();
    let adapt_until = if adapt { None } else { Some(0) };
    let mut sampler =
        MetropolisHastings::new(&target, proposal, &[0.0; D], chain_rng(1, 0), adapt_until)
            .unwrap();
    for _ in 0..200 {
        sampler.step(&target);
    }
    c.bench_function(name, |b| {
        b.iter(|| black_box(sampler.step(black_box(&target))))
    });
}

fn bench_kmc(c: &mut Criterion) {
    let target = Banana::new(D, 0.03, 100.0).unwrap();
    let points = oracle(&target);
    for steps in STEPS {
        let lite = LiteSurrogate::new(
            LiteEstimator::new(200.0, 1.0).unwrap(),
            D,
            LiteSurrogateConfig::default()
                .with_subsample_size(N)
                .unwrap()
                .with_refit(AdaptProbability::Always)
                .unwrap(),
        )
        .unwrap();
        let kmc = KmcLite::new(
            lite,
            KmcConfig::default()
                .with_step_size(STEP_SIZE)
                .unwrap()
                .with_steps((steps, steps))
                .unwrap(),
        )
        .unwrap()
        .with_oracle_points(points.as_ref())
        .unwrap();
        let name = format!("kmc_iteration_banana8/lite_n1000_L{steps}");
        bench_one(c, &name, kmc, false);

        let finite = |lambda: f64, schedule: RidgeSchedule| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
            let kernel = Gaussian::new(5.0).unwrap();
            let features =
                RandomFourierFeatures::new(&kernel, D, N, Embedding::CosPhase, &mut rng).unwrap();
            let model = FiniteEstimator::new(features, lambda)
                .unwrap()
                .with_ridge_schedule(schedule)
                .unwrap();
            KmcFinite::new(
                FiniteSurrogate::new(
                    model,
                    FiniteSurrogateConfig::default().with_min_points(1).unwrap(),
                )
                .unwrap(),
                KmcConfig::default()
                    .with_step_size(STEP_SIZE)
                    .unwrap()
                    .with_steps((steps, steps))
                    .unwrap(),
            )
            .unwrap()
            .with_oracle_points(points.as_ref())
            .unwrap()
        };
        let growing = || finite(1e-4, RidgeSchedule::GrowingWithCount);
        let name = format!("kmc_iteration_banana8/finite_m1000_L{steps}");
        bench_one(c, &name, growing(), false);
        let name = format!("kmc_iteration_banana8/finite_m1000_L{steps}_online_update");
        bench_one(c, &name, growing(), true);
        // λ₀ = 0.1: the default's ridge 10⁻⁴ on the means at t = 1000 points
        let fixed = finite(0.1, RidgeSchedule::FixedOnSums);
        let name = format!("kmc_iteration_banana8/finite_m1000_L{steps}_online_update_fixed_ridge");
        bench_one(c, &name, fixed, true);
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = bench_kmc
}
criterion_main!(benches);
