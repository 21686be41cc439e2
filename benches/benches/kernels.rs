//! Kernel hot paths: the KAMH gradient matrix for n = 1000 points in d = 8,
//! for every kernel.

use criterion::{Criterion, criterion_group, criterion_main};
use faer::Mat;
use kameleon_kernels::{
    Gaussian, InverseMultiquadric, Kernel, Laplacian, Linear, Matern, Polynomial, RationalQuadratic,
};
use std::hint::black_box;

fn gradient_matrix(c: &mut Criterion) {
    let (n, d) = (1000, 8);
    let z = Mat::<f64>::from_fn(n, d, |i, j| ((i * 7 + j * 3) % 11) as f64 * 0.1);
    let x = vec![0.3; d];
    let mut out = Mat::<f64>::zeros(d, n);
    let kernels: Vec<(&str, Box<dyn Kernel>)> = vec![
        ("gaussian", Box::new(Gaussian::new(1.0).unwrap())),
        ("laplacian", Box::new(Laplacian::new(1.0).unwrap())),
        ("matern-1/2", Box::new(Matern::new(0.5, 1.0).unwrap())),
        ("matern-3/2", Box::new(Matern::new(1.5, 1.0).unwrap())),
        ("matern-5/2", Box::new(Matern::new(2.5, 1.0).unwrap())),
        (
            "matern-2.7-bessel",
            Box::new(Matern::new(2.7, 1.0).unwrap()),
        ),
        (
            "rational-quadratic",
            Box::new(RationalQuadratic::new(1.0, 2.0).unwrap()),
        ),
        (
            "inverse-multiquadric",
            Box::new(InverseMultiquadric::new(1.0).unwrap()),
        ),
        ("linear", Box::new(Linear)),
        ("polynomial-3", Box::new(Polynomial::new(1.0, 3).unwrap())),
    ];
    let mut group = c.benchmark_group("gradient_matrix/n1000_d8");
    for (name, k) in &kernels {
        group.bench_function(*name, |b| {
            b.iter(|| k.gradient_matrix(black_box(&x), z.as_ref(), out.as_mut()))
        });
    }
    group.finish();
}

criterion_group!(benches, gradient_matrix);
criterion_main!(benches);
