//! Feature-map hot paths for one point: embed, Jacobian and Jᵀw, dense random
//! Fourier features against Fastfood, d ∈ {8, 64, 512}, D ∈ {256, 1024, 4096}.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use faer::Mat;
use kameleon_features::{Embedding, Fastfood, FeatureMap, RandomFourierFeatures};
use kameleon_kernels::Gaussian;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use std::hint::black_box;

fn feature_maps(c: &mut Criterion) {
    let kernel = Gaussian::new(1.0).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    for op in ["embed", "jacobian", "jacobian_transpose_mul"] {
        let mut group = c.benchmark_group(format!("features/{op}"));
        for d in [8usize, 64, 512] {
            for big_d in [256usize, 1024, 4096] {
                let dense =
                    RandomFourierFeatures::new(&kernel, d, big_d, Embedding::CosPhase, &mut rng)
                        .unwrap();
                let fast = Fastfood::new(&kernel, d, big_d, Embedding::CosPhase, &mut rng).unwrap();
                let maps: [(&str, &dyn FeatureMap); 2] = [("dense", &dense), ("fastfood", &fast)];
                let x: Vec<f64> = (0..d).map(|i| ((i * 7) % 11) as f64 * 0.1 - 0.5).collect();
                let w: Vec<f64> = (0..big_d).map(|i| ((i * 3) % 5) as f64 - 2.0).collect();
                let mut phi = vec![0.0; big_d];
                let mut jac = Mat::<f64>::zeros(big_d, d);
                let mut grad = vec![0.0; d];
                for (name, map) in maps {
                    let id = BenchmarkId::new(name, format!("d{d}_D{big_d}"));
                    group.bench_function(id, |b| match op {
                        "embed" => b.iter(|| map.embed(black_box(&x), &mut phi)),
                        "jacobian" => b.iter(|| map.jacobian(black_box(&x), jac.as_mut())),
                        _ => b.iter(|| map.jacobian_transpose_mul(black_box(&x), &w, &mut grad)),
                    });
                }
            }
        }
        group.finish();
    }
}

criterion_group!(benches, feature_maps);
criterion_main!(benches);
