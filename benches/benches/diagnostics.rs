//! The run checks' diagnostics on long chains: the FFT autocovariance of one
//! series of 100 000 draws, and the rank-normalised bulk ESS and R-hat of
//! 4 chains of 100 000 draws (one parameter), apart and together, as
//! `kameleon.sample` computes them for every parameter after a run.

use criterion::{Criterion, criterion_group, criterion_main};
use kameleon_diagnostics::{autocovariance, ess_bulk, rhat_rank, rhat_rank_and_ess_bulk};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

const DRAWS: usize = 100_000;

/// An AR(1) series x_t = 0.9 x_{t−1} + e_t with uniform innovations.
fn ar1(n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut x = 0.0;
    (0..n)
        .map(|_| {
            x = 0.9 * x + rng.random::<f64>() - 0.5;
            x
        })
        .collect()
}

fn diagnostics(c: &mut Criterion) {
    let series = ar1(DRAWS, 0);
    c.bench_function("autocovariance/n100000", |b| {
        b.iter(|| autocovariance(black_box(&series)))
    });
    let chains: Vec<Vec<f64>> = (1..=4).map(|seed| ar1(DRAWS, seed)).collect();
    let rows: Vec<&[f64]> = chains.iter().map(Vec::as_slice).collect();
    c.bench_function("ess_bulk/4x100000", |b| {
        b.iter(|| ess_bulk(black_box(&rows)))
    });
    c.bench_function("rhat_rank/4x100000", |b| {
        b.iter(|| rhat_rank(black_box(&rows)))
    });
    c.bench_function("rhat_rank_and_ess_bulk/4x100000", |b| {
        b.iter(|| rhat_rank_and_ess_bulk(black_box(&rows)))
    });
}

criterion_group!(benches, diagnostics);
criterion_main!(benches);
