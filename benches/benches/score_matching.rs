//! Score-matching hot paths in d = 8: the lite fit (n = 250, 1000, 2000, with
//! faer's global parallelism, and n = 1000 on one thread), the
//! finite batch fit and one online update (m = 250, 1000, random Fourier
//! features of a Gaussian kernel; the update with the default ridge and with
//! `RidgeSchedule::FixedOnSums`), and one gradient evaluation of each.

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use faer::{Mat, Par};
use kameleon_features::{Embedding, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use kameleon_score_matching::{FiniteEstimator, GradientModel, LiteEstimator, RidgeSchedule};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

const D: usize = 8;

fn points(n: usize, seed: u64) -> Mat<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    Mat::from_fn(n, D, |_, _| rng.random_range(-2.0..2.0))
}

fn finite(m: usize) -> FiniteEstimator<RandomFourierFeatures> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let kernel = Gaussian::new(2.0).unwrap();
    let features =
        RandomFourierFeatures::new(&kernel, D, m, Embedding::CosPhase, &mut rng).unwrap();
    FiniteEstimator::new(features, 1e-3).unwrap()
}

fn lite(c: &mut Criterion) {
    let mut group = c.benchmark_group("lite");
    group.sample_size(10);
    for n in [250, 1000, 2000] {
        let z = points(n, 2);
        let fit = || {
            let mut model = LiteEstimator::new(8.0, 1e-3).unwrap();
            model.fit(black_box(z.as_ref())).unwrap();
            model
        };
        group.bench_with_input(BenchmarkId::new("fit", n), &n, |b, _| b.iter(fit));
        if n == 1000 {
            // the same fit on one thread: the gain of faer's parallel products
            let parallel = faer::get_global_parallelism();
            faer::set_global_parallelism(Par::Seq);
            group.bench_with_input(BenchmarkId::new("fit_one_thread", n), &n, |b, _| {
                b.iter(fit)
            });
            faer::set_global_parallelism(parallel);
        }
        let mut model = LiteEstimator::new(8.0, 1e-3).unwrap();
        model.fit(z.as_ref()).unwrap();
        let (x, mut grad) = (vec![0.3; D], vec![0.0; D]);
        group.bench_with_input(BenchmarkId::new("gradient", n), &n, |b, _| {
            b.iter(|| model.grad_log_density(black_box(&x), &mut grad))
        });
    }
    group.finish();
}

fn finite_estimator(c: &mut Criterion) {
    let mut group = c.benchmark_group("finite");
    group.sample_size(10);
    for m in [250, 1000] {
        // n = m points for the batch fit.
        let data = points(m, 3);
        let mut model = finite(m);
        group.bench_with_input(BenchmarkId::new("fit_n_eq_m", m), &m, |b, _| {
            b.iter(|| model.fit(black_box(data.as_ref())).unwrap())
        });
        // One online update of a model fitted on 2m points: no refactorisation
        // is due (that happens when the count grows by 1/8), so this is the
        // O(dm²) rank-d update plus the preconditioned solve.
        model.fit(points(2 * m, 4).as_ref()).unwrap();
        let x = vec![0.1; D];
        group.bench_with_input(BenchmarkId::new("online_update", m), &m, |b, _| {
            b.iter_batched(
                || model.clone(),
                |mut fitted| {
                    fitted.update(black_box(&x)).unwrap();
                    fitted
                },
                BatchSize::LargeInput,
            )
        });
        // The same with RidgeSchedule::FixedOnSums (λ₀ = 2m · 10⁻³, the
        // default's ridge at the fitted count): a rank-d Cholesky update and
        // two triangular solves, never a refactorisation.
        let mut fixed = FiniteEstimator::new(model.features().clone(), 2.0 * m as f64 * 1e-3)
            .unwrap()
            .with_ridge_schedule(RidgeSchedule::FixedOnSums)
            .unwrap();
        fixed.fit(points(2 * m, 4).as_ref()).unwrap();
        group.bench_with_input(
            BenchmarkId::new("online_update_fixed_ridge", m),
            &m,
            |b, _| {
                b.iter_batched(
                    || fixed.clone(),
                    |mut fitted| {
                        fitted.update(black_box(&x)).unwrap();
                        fitted
                    },
                    BatchSize::LargeInput,
                )
            },
        );
        let mut grad = vec![0.0; D];
        group.bench_with_input(BenchmarkId::new("gradient", m), &m, |b, _| {
            b.iter(|| model.grad_log_density(black_box(&x), &mut grad))
        });
    }
    group.finish();
}

criterion_group!(benches, lite, finite_estimator);
criterion_main!(benches);
