//! Kernel hot paths: the KAMH gradient matrix for n = 1000 points in d = 8.

use criterion::{Criterion, criterion_group, criterion_main};
use faer::Mat;
use kameleon_kernels::{Gaussian, Kernel};
use std::hint::black_box;

fn gradient_matrix(c: &mut Criterion) {
    let (n, d) = (1000, 8);
    let z = Mat::<f64>::from_fn(n, d, |i, j| ((i * 7 + j * 3) % 11) as f64 * 0.1);
    let x = vec![0.3; d];
    let mut out = Mat::<f64>::zeros(d, n);
    let k = Gaussian::new(1.0).unwrap();
    c.bench_function("gradient_matrix/gaussian/n1000_d8", |b| {
        b.iter(|| k.gradient_matrix(black_box(&x), z.as_ref(), out.as_mut()))
    });
}

criterion_group!(benches, gradient_matrix);
criterion_main!(benches);
