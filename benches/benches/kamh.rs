//! One KAMH iteration on the 8-d banana B(0.1, 100) with n = 1000 subsample
//! points and the Gaussian kernel, frozen and while adapting as the
//! experiments do (z redrawn from the history and the bandwidth re-estimated
//! at every step, ν learned), plus the frozen step's parts: the gradient
//! matrix M and the kernel term M H Mᵀ.

use criterion::{Criterion, criterion_group, criterion_main};
use faer::Mat;
use kameleon_kernels::Gaussian;
use kameleon_samplers::{
    Bandwidth, Gamma, Kamh, KamhConfig, KamhCovariance, MetropolisHastings, Refresh, Scale,
    SubsampleConfig, chain_rng,
};
use kameleon_targets::{Banana, Target};
use std::hint::black_box;

const N: usize = 1000;
const D: usize = 8;

/// n iid banana draws (an oracle subsample, as in the KMC paper's baselines).
fn oracle_subsample(target: &Banana) -> Mat<f64> {
    let mut rng = chain_rng(1, 0);
    let mut x = [0.0; D];
    let mut z = Mat::<f64>::zeros(N, D);
    for i in 0..N {
        target.sample_iid(&mut rng, &mut x).unwrap();
        for j in 0..D {
            z[(i, j)] = x[j];
        }
    }
    z
}

fn kamh_iteration(c: &mut Criterion) {
    let target = Banana::new(D, 0.1, 100.0).unwrap();
    let z = oracle_subsample(&target);
    let kernel = Gaussian::new(10.0).unwrap();
    let config = KamhConfig::default()
        .with_subsample(
            SubsampleConfig::default()
                .with_subsample_size(N)
                .unwrap()
                .with_gamma(Gamma::Fixed(0.2))
                .unwrap()
                .with_refresh(Refresh::Never)
                .unwrap()
                .with_bandwidth(Bandwidth::Fixed)
                .unwrap()
                .with_warmup_scale(1.0)
                .unwrap(),
        )
        .unwrap()
        .with_scale(Scale::fixed(2.0).unwrap())
        .unwrap();
    let mut kamh = Kamh::new(D, kernel, config).unwrap();
    kamh.set_subsample(z.as_ref()).unwrap();
    // adaptation off (adapt_until = 0): a plain MH step with the KAMH proposal
    let mut sampler =
        MetropolisHastings::new(&target, kamh, &[0.0; D], chain_rng(2, 0), Some(0)).unwrap();
    c.bench_function("kamh/step/banana8_n1000_gaussian", |b| {
        b.iter(|| black_box(sampler.step(&target)))
    });

    let mut builder = KamhCovariance::new(D, N);
    let mut term = [0.0; D * D];
    let y = [1.0, -2.0, 0.5, 0.0, 0.3, -0.1, 0.7, 0.2];
    c.bench_function("kamh/gradient_matrix/n1000_d8", |b| {
        b.iter(|| {
            black_box(builder.gradient_matrix(&kernel, black_box(&y), z.as_ref()));
        })
    });
    c.bench_function("kamh/kernel_term/n1000_d8", |b| {
        b.iter(|| builder.kernel_term_into(&kernel, black_box(&y), z.as_ref(), &mut term))
    });

    // adapting throughout, 2n steps in: the history holds n states, so every
    // step redraws z and takes the median over 100 of its points
    let mut config = KamhConfig::paper(N).unwrap();
    config.subsample.bandwidth = Bandwidth::MedianHeuristic { max_points: 100 };
    let kamh = Kamh::new(D, Gaussian::new(1.0).unwrap(), config).unwrap();
    let start: Vec<f64> = z.row(0).iter().copied().collect();
    let mut adapting =
        MetropolisHastings::new(&target, kamh, &start, chain_rng(3, 0), None).unwrap();
    for _ in 0..2 * N {
        adapting.step(&target);
    }
    c.bench_function("kamh/adapting_step/banana8_n1000_median100", |b| {
        b.iter(|| black_box(adapting.step(&target)))
    });
}

criterion_group!(benches, kamh_iteration);
criterion_main!(benches);
