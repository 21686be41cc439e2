//! Real-target hot paths: one pseudo-marginal likelihood estimate each.
//!
//! - Glass GP classification: Laplace approximation (N = 214) plus
//!   n_imp = 100 importance draws (KAMH §5.1). Goal: a few milliseconds.
//! - ABC skew-normal: 10 pseudo-data sets of 10 draws in d = 10 (KMC §6).

use criterion::{Criterion, criterion_group, criterion_main};
use kameleon_targets::{AbcSkewNormal, GpClassification, LikelihoodEstimator};
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

fn glass_estimate(c: &mut Criterion) {
    let model = GpClassification::glass(100).expect("embedded Glass data");
    let theta = [0.0; 9];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    c.bench_function("glass_log_likelihood_estimate/n214_nimp100", |b| {
        b.iter(|| model.log_likelihood_estimate(black_box(&theta), &mut rng))
    });
}

fn abc_estimate(c: &mut Criterion) {
    let abc = AbcSkewNormal::kmc_paper().expect("paper set-up");
    let theta = [10.0; 10];
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    c.bench_function("abc_skew_normal_log_likelihood_estimate/d10", |b| {
        b.iter(|| abc.log_likelihood_estimate(black_box(&theta), &mut rng))
    });
}

criterion_group!(benches, glass_estimate, abc_estimate);
criterion_main!(benches);
